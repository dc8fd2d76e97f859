//! Response bodies the relay gives callers: its own short answers, and
//! tunnel responses streamed from the client as it sends them.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use portpreview_shared::message::STREAM_WINDOW;
use tokio::time::{Instant, Sleep};
use tokio_util::task::AbortOnDropHandle;

use crate::port::StreamPort;
use crate::stream::Inbound;

/// Response bytes handed to the caller before the client gets them back as
/// credit: a quarter window keeps the pipe full without a grant per chunk.
const GRANT_STEP: u64 = STREAM_WINDOW as u64 / 4;

/// A tunnel response broke off; hyper aborts the caller's connection.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BodyError(pub String);

/// Every response body the relay sends.
pub enum RelayBody {
    /// A body known in full (the relay's own answers, empty bodies).
    Full(Option<Bytes>),
    /// A response streamed from a tunnel's client.
    Tunnel(Box<TunnelBody>),
}

/// The content type of every answer the relay gives itself.
pub const PLAIN_TEXT: &str = "text/plain; charset=utf-8";

/// Marks an answer the relay gave itself, in the response's extensions.
#[derive(Debug, Clone, Copy)]
pub struct OwnAnswer;

/// A response with a short plain-text body saying why.
pub fn answer(status: StatusCode, text: impl Into<String>) -> Response<RelayBody> {
    let mut text = text.into();
    text.push('\n');
    let mut response = Response::new(RelayBody::Full(Some(Bytes::from(text))));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(PLAIN_TEXT));
    response.extensions_mut().insert(OwnAnswer);
    response
}

/// `response` (a 503) with `Retry-After: 5`: a sender that reads it comes
/// back when a burst has passed or a client is back, not at once.
pub fn retry_shortly(mut response: Response<RelayBody>) -> Response<RelayBody> {
    response
        .headers_mut()
        .insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("5"));
    response
}

/// `response` with its connection closed after it: the rest of the
/// request's body is not read, or the connection is not worth keeping.
/// The close lingers when the service asks it to (`crate::linger`), so a
/// caller still sending reads the answer.
pub fn closing(mut response: Response<RelayBody>) -> Response<RelayBody> {
    response
        .headers_mut()
        .insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
    response
}

impl Body for RelayBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.get_mut() {
            RelayBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            RelayBody::Tunnel(body) => body.poll_next(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            RelayBody::Full(bytes) => bytes.is_none(),
            RelayBody::Tunnel(body) => body.done,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            RelayBody::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            RelayBody::Tunnel(_) => SizeHint::default(),
        }
    }
}

/// A response body arriving from the client chunk by chunk.
pub struct TunnelBody {
    port: StreamPort,
    // Body bytes that came with the response head, handed out first.
    first: Option<Bytes>,
    // Keeps the request-body pump alive exactly as long as the exchange.
    _pump: Option<AbortOnDropHandle<()>>,
    idle: Duration,
    idle_timer: Pin<Box<Sleep>>,
    ungranted: u64,
    /// Bytes the answer's Content-Length still allows, when it has one.
    allowed: Option<u64>,
    /// Why the answer broke off, told hyper one turn after it is known.
    failure: Option<BodyError>,
    done: bool,
}

impl TunnelBody {
    /// Streams `first`, then the rest of `port`'s response; `idle` bounds
    /// the wait for each chunk. A body running past `declared` (its
    /// Content-Length) fails rather than reaching the caller cut short as
    /// if whole.
    pub fn new(
        port: StreamPort,
        first: Bytes,
        pump: Option<AbortOnDropHandle<()>>,
        idle: Duration,
        declared: Option<u64>,
    ) -> Self {
        Self {
            port,
            first: (!first.is_empty()).then_some(first),
            _pump: pump,
            idle,
            idle_timer: Box::pin(tokio::time::sleep(idle)),
            ungranted: 0,
            allowed: declared,
            failure: None,
            done: false,
        }
    }

    /// Counts `data` against the declared length; an error once past it.
    fn within_declared(&mut self, data: &Bytes) -> Result<(), BodyError> {
        let Some(allowed) = self.allowed else {
            return Ok(());
        };
        match allowed.checked_sub(data.len() as u64) {
            Some(left) => {
                self.allowed = Some(left);
                Ok(())
            }
            None => {
                self.done = true;
                self.port
                    .abandon("the answer's body ran past its Content-Length; the relay cut the caller's answer off");
                Err(BodyError(
                    "the tunnel's client sent a longer body than its Content-Length".into(),
                ))
            }
        }
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        if let Some(failure) = self.failure.take() {
            self.done = true;
            return Poll::Ready(Some(Err(failure)));
        }
        if self.done {
            return Poll::Ready(None);
        }
        if let Some(first) = self.first.take() {
            self.ungranted += first.len() as u64;
            if let Err(err) = self.within_declared(&first) {
                return Poll::Ready(Some(Err(err)));
            }
            return Poll::Ready(Some(Ok(Frame::data(first))));
        }
        let failure = loop {
            let event = match self.port.poll_inbound(cx) {
                Poll::Ready(event) => event,
                Poll::Pending => {
                    if self.idle_timer.as_mut().poll(cx).is_ready() {
                        self.done = true;
                        // Said to the client, whose history would otherwise
                        // blame the caller for the close.
                        self.port.abandon(&format!(
                            "the answer's body stopped arriving for {}; the relay cut the caller's answer off",
                            portpreview_shared::duration::format_duration(self.idle)
                        ));
                        return Poll::Ready(Some(Err(BodyError(
                            "the tunnel's client stopped sending the response".into(),
                        ))));
                    }
                    return Poll::Pending;
                }
            };
            break match event {
                Some(Inbound::Body { data, end }) => {
                    self.idle_timer.as_mut().reset(Instant::now() + self.idle);
                    if end {
                        self.done = true;
                    } else {
                        self.ungranted += data.len() as u64;
                        if self.ungranted >= GRANT_STEP {
                            // ungranted < GRANT_STEP + one chunk, far below u32::MAX.
                            self.port.grant(self.ungranted as u32);
                            self.ungranted = 0;
                        }
                    }
                    if data.is_empty() {
                        if end {
                            return Poll::Ready(None);
                        }
                        continue;
                    }
                    if let Err(err) = self.within_declared(&data) {
                        return Poll::Ready(Some(Err(err)));
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Some(Inbound::Head { .. }) => {
                    self.port
                        .abandon("the answer had a second head; the relay cut the caller's answer off");
                    "the tunnel's client sent a second response head".into()
                }
                Some(Inbound::Reset(reason)) => format!("the tunnel's client abandoned the response: {reason}"),
                Some(Inbound::Ended(why)) => why,
                None => "the tunnel's client went away".into(),
            };
        };
        // hyper drops the connection on a body's error, with whatever it
        // holds unwritten: the head and the bytes just handed over would
        // never reach the caller, who would see an empty reply. Waiting a
        // turn lets it write them first.
        self.failure = Some(BodyError(failure));
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;
    use portpreview_shared::message::ClientMessage;

    use super::*;
    use crate::stream::Streams;
    use crate::writer;

    /// Reads the answer a client streamed as `first` in its head's frame,
    /// then `rest`, under Content-Length: 5.
    async fn streamed(first: &'static [u8], rest: Bytes) -> Result<Bytes, BodyError> {
        let (outbox, _inbox) = writer::channel();
        let streams = Streams::new(outbox, 8, crate::answer_budget::AnswerBudget::new(u64::MAX));
        let port = streams.open(crate::registry::BodyAtOpen::Whole).unwrap();
        let stream = port.id;
        streams
            .deliver(ClientMessage::ResponseBody { stream, end: true }, rest)
            .unwrap();
        let body = TunnelBody::new(port, Bytes::from_static(first), None, Duration::from_secs(5), Some(5));
        let read = RelayBody::Tunnel(Box::new(body)).collect().await?;
        Ok(read.to_bytes())
    }

    /// A streamed answer whose client sends more than the Content-Length
    /// it declared: the caller must not get the first bytes as if whole.
    #[tokio::test]
    async fn a_streamed_body_longer_than_its_content_length_fails() {
        let err = streamed(b"xxx", Bytes::from(vec![b'y'; 100]))
            .await
            .expect_err("the body fails");
        assert!(err.to_string().contains("longer body than its Content-Length"), "{err}");
    }

    #[tokio::test]
    async fn a_streamed_body_of_its_content_length_passes_whole() {
        let read = streamed(b"xxx", Bytes::from_static(b"yy")).await.expect("whole");
        assert_eq!(read, Bytes::from_static(b"xxxyy"));
    }
}
