//! The one queue every stream writes its frames to; the session's writer
//! drains it onto the socket.

use portpreview_shared::codec;
use portpreview_shared::message::{ClientMessage, Header, StreamId};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

/// Sends frames to the relay. Unbounded on purpose: body bytes only flow
/// against the relay's window credit, so the queue holds at most one window
/// per stream plus small control frames.
#[derive(Clone)]
pub struct Outbox(mpsc::UnboundedSender<Message>);

impl Outbox {
    /// An outbox and the receiver its writer drains.
    pub fn new() -> (Self, mpsc::UnboundedReceiver<Message>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self(tx), rx)
    }

    /// Queues one frame; a closed session drops it, as the stream is gone too.
    pub fn send(&self, message: &ClientMessage, body: &[u8]) {
        let _ = self.0.send(Message::Binary(codec::encode(message, body).into()));
    }

    /// Grants the relay `credit` more request-body bytes on `stream`.
    pub fn grant(&self, stream: StreamId, credit: usize) {
        let credit = u32::try_from(credit).unwrap_or(u32::MAX);
        self.send(&ClientMessage::Window { stream, credit }, &[]);
    }

    /// Answers `stream` itself with `status` and a one-line plain-text reason.
    pub fn answer(&self, stream: StreamId, status: u16, reason: &str) {
        let body = format!("portpreview: {reason}\n");
        let headers = vec![
            Header::new("content-type", "text/plain; charset=utf-8"),
            Header::new("content-length", body.len().to_string()),
        ];
        self.send(
            &ClientMessage::ResponseHead {
                stream,
                status,
                headers,
                end: true,
            },
            body.as_bytes(),
        );
    }

    /// Queues a raw WebSocket message (close frames).
    pub fn send_raw(&self, message: Message) {
        let _ = self.0.send(message);
    }
}
