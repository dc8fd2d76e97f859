//! The one queue every stream writes its frames to; the session's writer
//! drains it onto the socket.

use portpreview_shared::codec::{self, EncodeError};
use portpreview_shared::message::{ClientMessage, Header, StreamId};
use portpreview_shared::text::truncate;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

/// Longest reason the client puts in an answer of its own: a line for a
/// person to read, and a frame that always fits.
const MAX_REASON: usize = 1024;

/// Sends frames to the relay. Unbounded on purpose: body bytes only flow
/// against the credit the relay granted, which the session caps per stream,
/// so the queue holds at most that per stream plus small frames. Of those,
/// only the 503s for requests past the session's limit are not paid for by
/// credit: a relay that sent such requests and read no answers would grow
/// it, by a frame for each of its own; the relay is one the user chose.
#[derive(Clone)]
pub struct Outbox(mpsc::UnboundedSender<Message>);

impl Outbox {
    /// An outbox and the receiver its writer drains.
    pub fn new() -> (Self, mpsc::UnboundedReceiver<Message>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self(tx), rx)
    }

    /// Queues one frame. A message the relay would refuse is not queued:
    /// the relay closes the whole session over such a frame, so the error
    /// goes back to the one stream that built it. A closed session drops
    /// the frame, as the stream is gone too.
    pub fn send(&self, message: &ClientMessage, body: &[u8]) -> Result<(), EncodeError> {
        let frame = codec::encode(message, body)?;
        let _ = self.0.send(Message::Binary(frame.into()));
        Ok(())
    }

    /// Grants the relay `credit` more request-body bytes on `stream`.
    pub fn grant(&self, stream: StreamId, credit: usize) {
        let credit = u32::try_from(credit).unwrap_or(u32::MAX);
        self.send_built_to_fit(&ClientMessage::Window { stream, credit }, &[]);
    }

    /// Answers `stream` itself with `status` and a one-line plain-text reason.
    pub fn answer(&self, stream: StreamId, status: u16, reason: &str) {
        let body = format!("portpreview: {}\n", truncate(reason, MAX_REASON));
        let headers = vec![
            Header::new("content-type", "text/plain; charset=utf-8"),
            Header::new("content-length", body.len().to_string()),
        ];
        let head = ClientMessage::ResponseHead {
            stream,
            status,
            headers,
            end: true,
        };
        self.send_built_to_fit(&head, body.as_bytes());
    }

    /// Abandons `stream` after its answer's head has gone: the relay cuts
    /// the caller's response off instead of ending it.
    pub fn reset(&self, stream: StreamId, reason: &str) {
        let reset = ClientMessage::Reset {
            stream,
            reason: truncate(reason, MAX_REASON).to_owned(),
        };
        self.send_built_to_fit(&reset, &[]);
    }

    /// Sends a frame whose size the client bounds itself (window grants,
    /// its own short answers, body chunks cut to the chunk size): one that
    /// does not fit is a bug in the client, logged rather than ending the
    /// session.
    pub fn send_built_to_fit(&self, message: &ClientMessage, body: &[u8]) {
        if let Err(err) = self.send(message, body) {
            tracing::error!(%err, "a frame the client sized itself was over the protocol's limits");
        }
    }

    /// Queues a raw WebSocket message (close frames).
    pub fn send_raw(&self, message: Message) {
        let _ = self.0.send(message);
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use portpreview_shared::message::MAX_HEADER_BYTES;

    use super::*;

    fn decoded(message: Option<Message>) -> (ClientMessage, Bytes) {
        let Some(Message::Binary(frame)) = message else {
            panic!("expected a binary frame, got {message:?}");
        };
        codec::decode::<ClientMessage>(frame).expect("a frame the relay accepts")
    }

    #[test]
    fn a_head_over_the_limit_is_refused_and_nothing_is_queued() {
        let (outbox, mut queue) = Outbox::new();
        let head = ClientMessage::ResponseHead {
            stream: 3,
            status: 200,
            headers: vec![Header::new("set-cookie", vec![b'a'; MAX_HEADER_BYTES])],
            end: true,
        };
        assert!(matches!(
            outbox.send(&head, b""),
            Err(EncodeError::HeaderTooLarge(size)) if size > MAX_HEADER_BYTES
        ));
        assert!(queue.try_recv().is_err(), "no frame the relay would refuse");
    }

    #[test]
    fn an_answer_of_its_own_always_fits_whatever_the_reason() {
        let (outbox, mut queue) = Outbox::new();
        outbox.answer(5, 502, &"é".repeat(200_000));
        let (head, body) = decoded(queue.try_recv().ok());
        assert!(matches!(
            head,
            ClientMessage::ResponseHead {
                stream: 5,
                status: 502,
                end: true,
                ..
            }
        ));
        assert!(body.len() <= MAX_REASON + "portpreview: \n".len());
        assert!(std::str::from_utf8(&body).is_ok(), "cut on a character boundary");
    }
}
