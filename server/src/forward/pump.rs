//! Streams a caller's request body to the client in chunks, within the
//! credit the client grants.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body as _, Incoming};
use portpreview_shared::duration::format_duration;
use portpreview_shared::message::{CHUNK_SIZE, STREAM_WINDOW};
use portpreview_shared::StreamId;
use tokio::sync::{oneshot, Semaphore};
use tokio_util::task::AbortOnDropHandle;

use super::ForwardLimits;
use crate::port::{RequestSide, StreamPort};
use crate::writer::Outbox;

pub(super) enum PumpEnd {
    Done,
    TooLarge,
    /// The caller's body was not valid HTTP (a broken chunked coding).
    Malformed,
    /// The caller sent no more body within the timeout.
    Stalled,
    /// The caller hung up mid-body, after `got` bytes of it: nobody may
    /// be left to answer, but one that only closed its side still reads.
    CallerGone {
        got: u64,
    },
    /// The client took no more of the body within the timeout (it granted
    /// no credit, or read nothing off its socket): it is not answering.
    ClientStalled,
    TunnelGone,
}

pub(super) async fn pump_outcome(
    rx: &mut Option<oneshot::Receiver<PumpEnd>>,
) -> Result<PumpEnd, oneshot::error::RecvError> {
    match rx {
        Some(rx) => rx.await,
        None => std::future::pending().await,
    }
}

/// Whether some of `credit` is still out: part of the body sent has not
/// been taken by the client yet.
pub(super) fn credit_out(credit: &Semaphore) -> bool {
    credit.available_permits() < STREAM_WINDOW as usize
}

/// Waits until the client gives back more of `credit` than it holds now:
/// it took more of the body. The credit is given back at once; false when
/// none can come any more (the stream is gone).
pub(super) async fn more_credit(credit: &Semaphore) -> bool {
    let more = u32::try_from(credit.available_permits() + 1).unwrap_or(u32::MAX);
    credit.acquire_many(more).await.is_ok()
}

pub(super) struct Pump {
    stream: StreamId,
    outbox: Outbox,
    credit: Arc<Semaphore>,
    side: RequestSide,
    limits: ForwardLimits,
}

impl Pump {
    /// Starts streaming `body` on `port`'s stream; the task ends with the
    /// handle, and the receiver hears how the body ended.
    pub(super) fn start(
        port: &StreamPort,
        body: Incoming,
        limits: ForwardLimits,
    ) -> (AbortOnDropHandle<()>, oneshot::Receiver<PumpEnd>) {
        let (tx, rx) = oneshot::channel();
        let job = Pump {
            stream: port.id,
            outbox: port.outbox().clone(),
            credit: port.credit(),
            side: port.request_side(),
            limits,
        };
        let task = tokio::spawn(async move {
            let _ = tx.send(job.run(body).await);
        });
        (AbortOnDropHandle::new(task), rx)
    }

    /// Streams the caller's body to the client in chunks, within the credit
    /// the client grants, and never more than the body limit.
    async fn run(self, mut body: Incoming) -> PumpEnd {
        let mut total: u64 = 0;
        loop {
            // The client hears why, for the history: it only sees the body stop.
            let frame = match tokio::time::timeout(self.limits.timeout, body.frame()).await {
                Ok(Some(Ok(frame))) => frame,
                Ok(None) => break,
                Ok(Some(Err(err))) if err.is_incomplete_message() || !is_malformed(&err) => {
                    self.side
                        .abandon("the caller went away before its request body was complete");
                    return PumpEnd::CallerGone { got: total };
                }
                Ok(Some(Err(_))) => {
                    self.side
                        .abandon(&format!("{MALFORMED_BODY}; the relay answered the caller 400"));
                    return PumpEnd::Malformed;
                }
                Err(_) => {
                    let waited = format_duration(self.limits.timeout);
                    self.side.abandon(&format!(
                        "the request body stopped arriving for {waited}; the relay answered the caller 408"
                    ));
                    return PumpEnd::Stalled;
                }
            };
            // Trailers are hop-by-hop metadata of chunked coding; not relayed.
            let Ok(mut data) = frame.into_data() else { continue };
            total += data.len() as u64;
            if total > self.limits.max_body {
                self.side
                    .abandon("the request body went over the relay's limit; the relay answered the caller 413");
                return PumpEnd::TooLarge;
            }
            let last_frame = body.is_end_stream();
            while !data.is_empty() {
                let chunk = data.split_to(data.len().min(CHUNK_SIZE));
                let end = last_frame && data.is_empty();
                if let Err(stopped) = self.send(chunk, end).await {
                    return stopped;
                }
                if end {
                    self.side.finished();
                    return PumpEnd::Done;
                }
            }
            if last_frame {
                break;
            }
        }
        if let Err(stopped) = self.send(Bytes::new(), true).await {
            return stopped;
        }
        self.side.finished();
        PumpEnd::Done
    }

    /// Sends one chunk within the credit the client grants. A client that
    /// takes none of it within the timeout is answering no more than one
    /// that sends nothing: the caller, who sent as fast as the relay read,
    /// is not kept waiting on it for the whole upload's limit.
    async fn send(&self, chunk: Bytes, end: bool) -> Result<(), PumpEnd> {
        let sent = async {
            if !chunk.is_empty() {
                // chunk.len() <= CHUNK_SIZE, so it fits in u32.
                match self.credit.acquire_many(chunk.len() as u32).await {
                    Ok(permit) => permit.forget(),
                    Err(_) => return Err(PumpEnd::TunnelGone),
                }
            }
            self.outbox
                .send_body(self.stream, &chunk, end)
                .await
                .map_err(|_| PumpEnd::TunnelGone)
        };
        match tokio::time::timeout(self.limits.timeout, sent).await {
            Ok(sent) => sent,
            Err(_) => {
                let waited = format_duration(self.limits.timeout);
                self.side.abandon(&format!(
                    "the client took none of the request body for {waited}; the relay answered the caller 504"
                ));
                Err(PumpEnd::ClientStalled)
            }
        }
    }
}

/// What the relay says of a request body that is not valid HTTP.
pub(super) const MALFORMED_BODY: &str = "the request body's chunked coding was malformed";

/// Whether reading a body failed on its bytes (hyper's chunked decoder
/// reports bad framing as invalid data) rather than on the connection: a
/// caller that hangs up mid-body, with unread bytes left, resets it.
fn is_malformed(err: &hyper::Error) -> bool {
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::InvalidInput
            );
        }
        source = cause.source();
    }
    // No I/O cause: a parse error of hyper's own.
    true
}
