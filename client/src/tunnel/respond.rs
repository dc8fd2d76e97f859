//! Answers going back to the relay: the local answer streamed within the
//! relay's credit with a copy kept for the history, or PortPreview's own
//! answer when there is none to send.

use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::Body as _;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use portpreview_shared::codec::EncodeError;
use portpreview_shared::content_length;
use portpreview_shared::duration::format_duration;
use portpreview_shared::message::{ClientMessage, Header, StreamId, CHUNK_SIZE, MAX_HEADER_BYTES};
use tokio::sync::{Notify, Semaphore};

use super::awake::within;
use super::body::{Capture, Held, Keep};
use super::outbox::{Outbox, Unqueued};
use crate::store::Outcome;

/// The answer's side of a stream: the relay's credit for its body, and
/// whether its head went ahead of its body, which tells a caller gone
/// during the answer, who had its status, from one gone before it.
pub(super) struct AnswerSide {
    /// Response-body credit granted by the relay.
    pub credit: Arc<Semaphore>,
    /// The status of a head that went ahead of a streamed body; 0 until
    /// then. See [`AnswerSide::head_sent`].
    status_sent: AtomicU16,
    /// Told when no caller is left to receive the answer: a streamed body
    /// stops being read then, rather than at the handler's pace.
    pub gone: Notify,
    /// Set when a frame of the answer found the connection to the relay
    /// ended: what the exchange sent reached no one, however it ended.
    lost: AtomicBool,
}

impl AnswerSide {
    /// The side of a stream whose answer has not begun, within `credit`.
    pub fn new(credit: Arc<Semaphore>) -> Self {
        Self {
            credit,
            status_sent: AtomicU16::new(0),
            gone: Notify::new(),
            lost: AtomicBool::new(false),
        }
    }

    /// A frame of the answer found the connection to the relay ended.
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }

    /// The status the caller had, when the head went ahead of a streamed
    /// body: a caller gone during the answer had it.
    pub fn head_sent(&self) -> Option<u16> {
        Some(self.status_sent.load(Ordering::Relaxed)).filter(|&status| status != 0)
    }

    /// No caller will receive the answer: sends stop waiting for credit,
    /// and a body being streamed stops being read.
    pub fn nobody_left(&self) {
        self.credit.close();
        self.gone.notify_waiters();
    }
}

/// When an exchange began, and how long its handler may take to answer.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timing {
    /// When the request reached the client.
    pub started: Instant,
    /// When the handler had all of the request, from which its patience
    /// runs: a body the caller took long to upload is not the handler's delay.
    pub handler_since: Instant,
    /// `--local-timeout`: for the whole of an answer sent in one frame, and
    /// for each wait on a streamed one's body.
    pub patience: Duration,
}

/// Streams the local answer to the relay within its credit, keeping a copy
/// of up to `keep` bytes. An answer whose head cannot cross the tunnel gets
/// the caller a 502 instead, and only that stream fails; one whose body
/// stalls past the handler's patience gets a 504, or is cut off once its
/// head has gone.
pub(super) async fn relay_response(
    response: http::Response<Incoming>,
    stream: StreamId,
    answer: &AnswerSide,
    outbox: &Outbox,
    timing: Timing,
    keep: Keep,
    held: &mut Held,
) -> Outcome {
    let credit = &*answer.credit;
    let Timing { started, patience, .. } = timing;
    let status = response.status().as_u16();
    // Recorded exactly as the handler sent them; the relay, where the hop
    // ends, drops the hop-by-hop ones before the caller sees them.
    let mut headers: Vec<Header> = response
        .headers()
        .iter()
        .map(|(name, value)| Header::new(name.as_str(), value.as_bytes()))
        .collect();
    if let Some(reason) = unreadable_length(&headers) {
        return answer_error(stream, outbox, started, 502, reason);
    }
    let mut body = response.into_body();
    let mut capture = Capture::expecting(body.size_hint().lower(), keep);
    let small = body.size_hint().exact().is_some_and(|len| len <= CHUNK_SIZE as u64);
    let error = if body.is_end_stream() || small {
        // The whole answer fits in the head's frame: one frame, one flush.
        let (whole, error) = match read_whole(&mut body, timing).await {
            Ok(read) => read,
            Err(reason) => return answer_error(stream, outbox, started, 504, reason),
        };
        capture.add(&whole);
        take_first_window(&whole, credit);
        let sent;
        (headers, sent) = send_head(outbox, stream, status, headers, error.is_none(), &whole).await;
        match sent {
            Ok(()) => {}
            Err(Unqueued::Unframable(err)) => return unframable(stream, outbox, started, err),
            // Recorded as the handler gave it; the exchange says it
            // reached no caller.
            Err(Unqueued::Closed) => answer.lost.store(true, Ordering::Relaxed),
        }
        if let Some(reason) = error.as_ref().filter(|_| !answer.lost()) {
            // As a streamed answer that breaks off: the caller has the
            // status, the headers and what came, and then the cut, as it
            // would calling the handler directly; never a last chunk.
            answer.status_sent.store(status, Ordering::Relaxed);
            outbox.reset(stream, reason);
        }
        error
    } else {
        let sent;
        (headers, sent) = send_head(outbox, stream, status, headers, false, &[]).await;
        match sent {
            Ok(()) => {
                answer.status_sent.store(status, Ordering::Relaxed);
                stream_body(&mut body, stream, patience, answer, outbox, &mut capture).await
            }
            Err(Unqueued::Unframable(err)) => return unframable(stream, outbox, started, err),
            Err(Unqueued::Closed) => {
                answer.lost.store(true, Ordering::Relaxed);
                None
            }
        }
    };
    let (response_body, mut response_body_size, room) = capture.into_parts();
    *held = room;
    if error.is_some() {
        // Broken off: how long the whole body was is not known, and the
        // history marks it so, as it does a request cut on its way.
        response_body_size = crate::store::size_past_cut(response_body.len() as u64);
    }
    let status_reached_caller = error.is_none() || answer.head_sent().is_some();
    Outcome {
        // An answer that broke off before its head left is recorded as the
        // error it became; after, the caller had the handler's status.
        status: status_reached_caller.then_some(status),
        response_headers: headers,
        response_body,
        response_body_size,
        duration_ms: Some(elapsed_ms(started)),
        error,
    }
}

/// Sends an answer's head once the outbox has room, and gives its headers
/// back for the history: moved into the frame's message and out again
/// rather than copied.
async fn send_head(
    outbox: &Outbox,
    stream: StreamId,
    status: u16,
    headers: Vec<Header>,
    end: bool,
    body: &[u8],
) -> (Vec<Header>, Result<(), Unqueued>) {
    let head = ClientMessage::ResponseHead {
        stream,
        status,
        headers,
        end,
    };
    let sent = outbox.send_answer(&head, body).await;
    let ClientMessage::ResponseHead { headers, .. } = head else {
        unreachable!("built as a response head above")
    };
    (headers, sent)
}

/// Reads a body small enough for one frame, whole, within the handler's
/// patience from the exchange's start: its bytes, and why it broke off if
/// it did. `Err` with the reason when it stalled.
async fn read_whole(body: &mut Incoming, timing: Timing) -> Result<(Vec<u8>, Option<String>), String> {
    let mut whole = Vec::new();
    let declared = body.size_hint().exact();
    let deadline = tokio::time::Instant::from_std(timing.handler_since) + timing.patience;
    loop {
        let Ok(frame) = tokio::time::timeout_at(deadline, body.frame()).await else {
            return Err(format!(
                "the local answer's body stalled: it was not whole within {}",
                format_duration(timing.patience)
            ));
        };
        let Some(frame) = frame else { break };
        match frame {
            Ok(frame) => {
                if let Ok(data) = frame.into_data() {
                    whole.extend_from_slice(&data);
                }
            }
            Err(err) => {
                let why = crate::forward::broke_off(&err, whole.len() as u64, declared);
                return Ok((whole, Some(why)));
            }
        }
    }
    Ok((whole, None))
}

/// Streams the body of an answer whose head has gone, keeping a copy in
/// `capture`, and ends the stream: with its last chunk, or with a reset
/// when the body broke off or stalled, which it returns the reason for.
async fn stream_body(
    body: &mut Incoming,
    stream: StreamId,
    patience: Duration,
    answer: &AnswerSide,
    outbox: &Outbox,
    capture: &mut Capture,
) -> Option<String> {
    let credit = &*answer.credit;
    let declared = body.size_hint().exact();
    // Each piece leaves as soon as it comes, so that a handler's
    // stream (server-sent events, progress) reaches the caller as it
    // writes it. A body whose length says it is whole ends on its last
    // piece; any other ends with an empty one.
    let mut ended = false;
    let mut error = None;
    loop {
        let gone = answer.gone.notified();
        let mut gone = std::pin::pin!(gone);
        gone.as_mut().enable();
        if credit.is_closed() {
            return Some(CALLER_GONE.into());
        }
        let frame = tokio::select! {
            frame = tokio::time::timeout(patience, body.frame()) => frame,
            () = gone => return Some(CALLER_GONE.into()),
        };
        let Ok(frame) = frame else {
            error = Some(format!(
                "the local answer's body stalled: nothing more came for {}",
                format_duration(patience)
            ));
            break;
        };
        match frame {
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else { continue };
                capture.add(&data);
                let mut data = data;
                let mut unsent = None;
                while !data.is_empty() {
                    let piece = data.split_to(data.len().min(CHUNK_SIZE));
                    ended = data.is_empty() && body.is_end_stream();
                    if let Err(why) = send_chunk(stream, piece, ended, credit, patience, outbox).await {
                        unsent = Some(why);
                        break;
                    }
                }
                match unsent {
                    Some(Unsent::CallerGone) => return Some(CALLER_GONE.into()),
                    Some(Unsent::Lost) => {
                        answer.lost.store(true, Ordering::Relaxed);
                        return Some(CALLER_GONE.into());
                    }
                    Some(Unsent::NotRead(reason)) => {
                        error = Some(reason);
                        break;
                    }
                    None if ended => break,
                    None => {}
                }
            }
            Some(Err(err)) => {
                error = Some(crate::forward::broke_off(&err, capture.size, declared));
                break;
            }
            None => break,
        }
    }
    match &error {
        // No bytes: no credit to wait for.
        None if !ended => outbox.send_built_to_fit(&ClientMessage::ResponseBody { stream, end: true }, &[]),
        None => {}
        // What the handler sent has reached the caller, but never a
        // last chunk: the reset makes the relay cut the caller's
        // response, which would otherwise end as if it were whole.
        Some(reason) => outbox.reset(stream, reason),
    }
    error
}

/// Why a streamed answer stopped being read; the exchange, told why the
/// caller went, records that instead.
const CALLER_GONE: &str = "no caller was left to receive the rest of the answer";

/// Why a piece of the answer was not sent.
enum Unsent {
    /// The relay closed the stream.
    CallerGone,
    /// The connection to the relay has ended.
    Lost,
    /// The relay granted no room for it in time, the reason.
    NotRead(String),
}

async fn send_chunk(
    stream: StreamId,
    data: Bytes,
    end: bool,
    credit: &Semaphore,
    patience: Duration,
    outbox: &Outbox,
) -> Result<(), Unsent> {
    take_credit(&data, credit, patience).await?;
    // Cut to the chunk size by the caller: always fits.
    let chunk = ClientMessage::ResponseBody { stream, end };
    match outbox.send_answer(&chunk, &data).await {
        Ok(()) => Ok(()),
        Err(Unqueued::Unframable(err)) => {
            tracing::error!(%err, "a chunk cut to the chunk size was over the protocol's limits");
            Ok(())
        }
        Err(Unqueued::Closed) => Err(Unsent::Lost),
    }
}

/// How many times the handler's patience the relay may take to grant room
/// for more of an answer. The relay grants it as its caller reads, in
/// steps of a quarter of the window, and drops a caller it cannot write to
/// for a minute itself: this is for a relay that never grants or resets, far
/// past any caller that reads at all.
const CREDIT_PATIENCE_FACTOR: u32 = 10;

/// Takes the share of an answer sent in one frame from the stream's first
/// window, which always holds it: it never waits, and a stream the relay
/// has closed meanwhile drops the frame when it arrives.
fn take_first_window(data: &[u8], credit: &Semaphore) {
    let needed = u32::try_from(data.len()).unwrap_or(u32::MAX);
    if let Ok(permit) = credit.try_acquire_many(needed) {
        permit.forget();
    }
}

/// Waits until the relay has room for `data`: a slow caller slows this
/// stream only. A relay that grants nothing must not hold the exchange,
/// its capture and the handler's connection for good.
async fn take_credit(data: &[u8], credit: &Semaphore, patience: Duration) -> Result<(), Unsent> {
    let needed = u32::try_from(data.len()).unwrap_or(u32::MAX);
    if needed == 0 {
        return Ok(());
    }
    let limit = patience.saturating_mul(CREDIT_PATIENCE_FACTOR);
    match within(limit, std::pin::pin!(credit.acquire_many(needed))).await {
        Some(Ok(permit)) => {
            permit.forget();
            Ok(())
        }
        Some(Err(_closed)) => Err(Unsent::CallerGone),
        None => Err(Unsent::NotRead(format!(
            "the relay granted no room for more of the answer for {}",
            format_duration(limit)
        ))),
    }
}

/// Answers the caller with `status` and `reason` in PortPreview's name. The
/// history records the error alone: no status, since the handler gave none.
pub(super) fn answer_error(
    stream: StreamId,
    outbox: &Outbox,
    started: Instant,
    status: u16,
    reason: String,
) -> Outcome {
    outbox.answer(stream, status, &reason);
    failure(started, reason)
}

/// Why the relay would refuse an answer with these headers for its
/// lengths (hyper's client takes `5, 5`, hyper's server side does not):
/// answered here, the history says what the caller got, not 200. An answer
/// framed by `Transfer-Encoding` loses its length at the relay anyway.
fn unreadable_length(headers: &[Header]) -> Option<String> {
    if headers.iter().any(|h| h.name == "transfer-encoding") {
        return None;
    }
    let lengths = || {
        headers
            .iter()
            .filter(|h| h.name == "content-length")
            .map(|h| h.value.as_slice())
    };
    content_length::declared(lengths()).err()?;
    Some(format!(
        "the local answer's Content-Length is not one number: {}",
        content_length::shown(lengths())
    ))
}

/// Answers 502 for a local answer the relay would refuse as a frame: sent
/// as it is, it would end the session and every exchange on it.
fn unframable(stream: StreamId, outbox: &Outbox, started: Instant, err: EncodeError) -> Outcome {
    let reason = match err {
        EncodeError::HeaderTooLarge(size) => format!(
            "the local answer's headers are over the limit: {size} bytes framed, the tunnel carries at most {MAX_HEADER_BYTES}"
        ),
        other => format!("the local answer could not be framed for the tunnel: {other}"),
    };
    answer_error(stream, outbox, started, 502, reason)
}

/// An exchange that ended with `error` and no answer.
pub(super) fn failure(started: Instant, error: String) -> Outcome {
    Outcome {
        duration_ms: Some(elapsed_ms(started)),
        error: Some(error),
        ..Outcome::default()
    }
}

pub(super) fn elapsed_ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}
