//! One request's trip: relay → local handler → relay, recorded on the way.

mod handler;
mod late;
mod record;
mod request;
mod shared;

use std::sync::Arc;
use std::time::Instant;

use portpreview_shared::message::{Header, StreamId, CALLER_GONE_BEFORE_ANSWER};
use tokio::sync::{oneshot, Semaphore};
use tokio_util::sync::CancellationToken;

use super::awake::within;
use super::body::{Capture, Held, Inflow};
use super::contact::Heeded;
use super::outbox::Outbox;
use super::respond::{failure, AnswerSide};
use crate::store::recorder::Ticket;
use crate::store::{size_past_cut, NewDelivery, Outcome};
use handler::exchange;
pub use late::Answered;
use record::{finish, record_kept, Unrecorded};
pub use shared::{HostHeader, Shared};

/// Why an exchange whose request body never arrived whole failed.
const CUT_SHORT: &str = "the caller went away before its request body was complete; it was not forwarded";
/// Why an exchange whose request body stopped part way to the handler failed.
const PART_FORWARDED: &str = "the request body stopped part way; the handler got only part of it";

/// Why an exchange cut off by the end of its relay connection failed.
const ABANDONED: &str = "the connection to the relay ended before the answer";
/// Why an exchange cut off by the relay's shutdown failed: the relay
/// answered its caller itself before it closed.
pub const RELAY_SHUT_DOWN: &str = "the relay shut down before the answer; the relay answered the caller 502";
/// Why an answer the relay's shutdown cut off broke off: its caller had
/// the status, not the relay's 502.
const RELAY_SHUT_DOWN_MID_ANSWER: &str = "the relay shut down during the answer";
/// Why an exchange cut off by the user stopping PortPreview failed.
const STOPPED: &str = "PortPreview was stopped before the answer came";
/// Why an answer whose body PortPreview was stopped in the middle of
/// broke off: its caller had the status.
const STOPPED_MID_ANSWER: &str = "PortPreview was stopped during the answer";
/// What a caller gone during a streamed answer had of it.
const HAD_THE_STATUS: &str = "the caller had the status and headers, not the whole body";

/// A request head as the relay sent it.
#[derive(Clone)]
pub struct Head {
    /// Stream id.
    pub stream: StreamId,
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub target: String,
    /// Headers in order.
    pub headers: Vec<Header>,
}

/// The per-stream handles the session keeps to steer an exchange.
pub struct Steering {
    /// Response-body credit granted by the relay.
    pub credit: Arc<Semaphore>,
    /// Fires with the relay's reason when it resets the stream.
    pub reset: oneshot::Receiver<String>,
    /// Cancelled when the connection to the relay ends with the exchange
    /// still in flight.
    pub abandoned: CancellationToken,
    /// For a request read during a pause (see [`super::pause`]): fires once
    /// the relay has answered the ping sent after it. Until then the relay
    /// may have given up on the tunnel and answered the caller 502, so the
    /// request waits. The session drops the sender instead when the stream
    /// is reset or the connection ends first, and records the request: it
    /// is never forwarded.
    pub cleared: Option<oneshot::Receiver<()>>,
    /// Whether the relay still waited for an answer sent after a pause.
    pub contact: Heeded,
    /// The session's answers sent lately, which a reset may still amend.
    pub answered: Answered,
}

/// What an exchange leaves outside itself, so that it outlives the exchange
/// being cut off.
#[derive(Default)]
struct Kept {
    /// The recorded request's ticket: a request recorded before its caller
    /// went away still gets its answer, the failure.
    ticket: Option<Ticket>,
    /// The room the answer's body holds in the history's budget, until the
    /// answer is handed to the recorder.
    answer_room: Held,
    /// The request, until it is recorded. A streamed one is recorded once
    /// its body has all gone to the handler, or the handler answers first,
    /// or, should the relay end the stream first (the caller hung up, the
    /// body went over the limit), with what the handler had read.
    unrecorded: Option<Unrecorded>,
    /// A request whose body is still coming, before it goes to the handler.
    reading: Option<Reading>,
    /// The rest of a streamed body, which ends once the exchange is over.
    rest: Option<crate::tunnel::body::EndsRest>,
}

impl Kept {
    /// Records `request` with the body `capture` kept, of the size its
    /// caller `declared`, kept here until the recorder has it.
    async fn record(&mut self, shared: &Shared, request: NewDelivery, capture: Capture, declared: u64) {
        self.unrecorded = Some(Unrecorded::captured(request, capture, declared));
        self.ticket = record_kept(shared, &mut self.unrecorded).await;
    }
}

/// A request whose body is read before it is forwarded, and what came of it.
struct Reading {
    head: Head,
    prefix: Vec<bytes::Bytes>,
}

/// What the live display needs of a request, kept apart so the request
/// itself can move into the recorder without a copy.
struct Line {
    received_at_ms: i64,
    started: Instant,
    method: String,
    path: String,
}

/// Carries one request to the local target and its answer back.
pub async fn run(shared: Arc<Shared>, head: Head, inflow: Inflow, steering: Steering, outbox: Outbox) -> StreamId {
    let stream = head.stream;
    let line = Line {
        received_at_ms: crate::time::now_ms(),
        started: Instant::now(),
        method: head.method.clone(),
        path: head.target.clone(),
    };
    let mut kept = Kept::default();
    let Steering {
        credit,
        mut reset,
        abandoned,
        cleared,
        contact,
        answered,
    } = steering;
    if let Some(cleared) = cleared {
        if cleared.await.is_err() {
            return stream;
        }
    }
    let outcome = {
        let answer = AnswerSide::new(credit);
        let mut exchanged = std::pin::pin!(exchange(&shared, head, inflow, &line, &answer, &outbox, &mut kept));
        tokio::select! {
            // The exchange goes first: when the relay drops a stream mid-body,
            // the exchange records the cut request before the reset ends it.
            biased;
            // Finished, though the connection to the relay may have ended
            // under its answer (and the relay answered the caller 502).
            outcome = &mut exchanged => match answer.lost() {
                true => {
                    let why = why_cut_off(&shared, &answer);
                    answer_for_nobody(&shared, std::pin::pin!(async { outcome }), &answer, line.started, why).await
                }
                false => outcome,
            },
            // The relay says why in words meant for the history: the caller
            // hung up, or the relay gave up and answered the caller itself.
            Ok(reason) = &mut reset => {
                let reason = match reason.as_str() {
                    RELAY_SHUT_DOWN if answer.head_sent().is_some() => RELAY_SHUT_DOWN_MID_ANSWER.to_owned(),
                    _ => reason,
                };
                answer_for_nobody(&shared, exchanged, &answer, line.started, &reason).await
            }
            () = abandoned.cancelled() => cut_off(&shared, exchanged, &answer, line.started).await,
        }
    };
    // Sent after a pause, the answer may have gone to a relay that had
    // given up on the tunnel and answered the caller itself.
    let outcome = match outcome.status {
        Some(status) if outcome.error.is_none() => match contact.gave_up().await {
            Some(quiet) => Outcome {
                status: None,
                error: Some(unheard_after_pause(status, quiet)),
                ..outcome
            },
            None => outcome,
        },
        _ => outcome,
    };
    // A reset that came as the exchange ended, kept for what it says. A
    // body that stopped short says only that; the relay's reset, when it
    // sent one, says why (malformed, stalled, the caller gone), and a
    // connection to the relay that ended (lost, or closed over a frame it
    // could not read) is no caller gone.
    let late_reset = reset.try_recv().ok();
    let outcome = match (late_reset.as_deref(), outcome.error.as_deref().and_then(cut_body)) {
        (Some(reason), Some(cut)) => failure(line.started, format!("{reason}; {cut}")),
        (None, Some(cut)) if abandoned.is_cancelled() && !shared.stop.drain.is_cancelled() => {
            failure(line.started, format!("{ABANDONED}; {cut}"))
        }
        _ => outcome,
    };
    // Cut off while its body came: it never reached the handler.
    let outcome = match (&kept.reading, outcome.error) {
        (Some(_), Some(error)) => failure(line.started, format!("{error}; it was not forwarded")),
        (_, error) => Outcome { error, ..outcome },
    };
    if kept.ticket.is_none() {
        match kept.reading.take() {
            Some(Reading { head, prefix }) => {
                let declared = request::declared_length(&head.headers).unwrap_or(0);
                let capture = Capture::of(&prefix, declared, shared.keep());
                let request = record::new_delivery(&shared, head, line.received_at_ms);
                kept.record(&shared, request, capture, declared).await;
            }
            None => kept.ticket = record_kept(&shared, &mut kept.unrecorded).await,
        }
    }
    // Whole and clean so far: a caller gone meanwhile is told of later.
    let sent = outcome.status.filter(|_| outcome.error.is_none());
    let later = finish(&shared, line, outcome, kept.ticket).await;
    drop(kept.answer_room);
    if let (Some(status), Some(later)) = (sent, later) {
        answered.keep(stream, later, status);
        // A reset that came after the wait for one ended: its caller left
        // while the answer was on its way.
        if let Some(reason) = late_reset.or_else(|| reset.try_recv().ok()) {
            answered.amend(&shared, stream, &reason);
        }
    }
    stream
}

/// The stream of a request the relay answered itself, which has none: 0,
/// which is no stream ([`StreamId`]).
pub const NO_STREAM: StreamId = 0;

/// The most a relay's news may say a request waited, or was held before it
/// was told: a relay holds news for a name through its grace period, a
/// minute by default. Past this a relay's figure is no time at all (one
/// that broke the protocol dated requests to 1970).
const MAX_TOLD_AGE: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// Records a request the relay answered itself without sending it on (its
/// body over the limit, too many in flight, a head too large for a frame),
/// or that the client did not send on, with `why`: the history shows the
/// delivery and what its caller was told.
///
/// Its body is what the relay sent of it, a small one whole, or nothing:
/// recorded `body_size` long (past what came, when unknown), a body that
/// did not come is cut short, and replay refuses it. It came `waited`
/// before the relay answered, which was `told_after` before the relay told
/// of it (a tunnel reconnecting hears later): it is dated from its arrival,
/// and lasted as long as its caller waited.
pub async fn turned_away(
    shared: Arc<Shared>,
    head: Head,
    (body, body_size): (bytes::Bytes, Option<u64>),
    (waited, told_after): (std::time::Duration, std::time::Duration),
    why: String,
) -> StreamId {
    let (waited, told_after) = (waited.min(MAX_TOLD_AGE), told_after.min(MAX_TOLD_AGE));
    let ago = waited.saturating_add(told_after);
    let ago_ms = i64::try_from(ago.as_millis()).unwrap_or(i64::MAX);
    let line = Line {
        received_at_ms: crate::time::now_ms().saturating_sub(ago_ms),
        started: Instant::now().checked_sub(waited).unwrap_or_else(Instant::now),
        method: head.method.clone(),
        path: head.target.clone(),
    };
    let mut request = record::new_delivery(&shared, head, line.received_at_ms);
    let came = body.len() as u64;
    request.request_body_size = body_size.unwrap_or(size_past_cut(came)).max(came);
    request.request_body = body.into();
    let ticket = record::record(&shared, request).await;
    let outcome = failure(line.started, why);
    // Its caller was answered by the relay, which resets no stream for it.
    finish(&shared, line, outcome, ticket).await;
    NO_STREAM
}

/// The exchange's answer, cut off by the end of the connection to the
/// relay: the user stopped PortPreview, or the connection was lost. Stopped
/// before the head left, the handler's answer is not waited for.
async fn cut_off(
    shared: &Shared,
    exchanged: std::pin::Pin<&mut impl std::future::Future<Output = Outcome>>,
    answer: &AnswerSide,
    started: Instant,
) -> Outcome {
    match why_cut_off(shared, answer) {
        STOPPED => failure(started, STOPPED.into()),
        why => answer_for_nobody(shared, exchanged, answer, started, why).await,
    }
}

/// Why an answer the end of the connection to the relay cut off reached
/// no caller; a caller that had the status keeps it in the history.
fn why_cut_off(shared: &Shared, answer: &AnswerSide) -> &'static str {
    match (shared.stop.drain.is_cancelled(), answer.head_sent()) {
        (true, None) => STOPPED,
        (true, Some(_)) => STOPPED_MID_ANSWER,
        (false, _) => ABANDONED,
    }
}

/// No caller will receive the handler's answer, for the reason `why`: the
/// caller hung up, the relay gave up waiting and answered it, or the
/// connection to the relay ended (and the relay answered 502). The handler
/// may be acting on the request all the same (charging the card, sending
/// the e-mail), as a server goes on after its client has gone, and the
/// provider will retry: so the local request is not cut off, and its
/// answer, if it comes within the local timeout and before the user stops,
/// is recorded beside the note that no caller received it. Stopping gives
/// it the time any request in flight gets.
async fn answer_for_nobody(
    shared: &Shared,
    exchanged: std::pin::Pin<&mut impl std::future::Future<Output = Outcome>>,
    answer: &AnswerSide,
    started: Instant,
    why: &str,
) -> Outcome {
    // No credit comes for a stream the relay has dropped: sends must not
    // wait for it, nor the handler's pace be waited on for the rest.
    answer.nobody_left();
    // A head sent is a status the caller had, unless the relay says the
    // caller left before the head reached the relay.
    let had_the_status = answer.head_sent().filter(|_| why != CALLER_GONE_BEFORE_ANSWER);
    let answered = tokio::select! {
        // An answer that broke off as soon as no caller was left is here
        // at once, whether or not the drain is already over.
        biased;
        answered = within(shared.local_timeout, exchanged) => answered,
        () = crate::tunnel::drain_over(&shared.stop) => None,
    };
    let Some(mut outcome) = answered else {
        // Its head sent, the caller had the status however the rest ended.
        if let Some(status) = had_the_status {
            let mut outcome = failure(started, format!("{why}: {HAD_THE_STATUS}"));
            outcome.status = Some(status);
            return outcome;
        }
        let why = if shared.stop.drain.is_cancelled() {
            format!("{why}; {STOPPED}")
        } else {
            why.to_owned()
        };
        return failure(started, why);
    };
    // The head went ahead of the body: the caller had the status, and the
    // history says so, or the delivery would pass for one no caller got.
    if had_the_status.is_some() && outcome.status.is_some() {
        outcome.error = Some(format!("{why}: {HAD_THE_STATUS}"));
        return outcome;
    }
    // Status stays empty, as for every answer that did not reach its caller.
    outcome.error = Some(match (outcome.status.take(), outcome.error.take()) {
        (Some(status), _) => reached_no_caller(why, status),
        (None, Some(error)) => match cut_body(&error) {
            Some(cut) => format!("{why}; {cut}"),
            None => format!("{why}; then {error}"),
        },
        (None, None) => why.into(),
    });
    outcome
}

/// Why an answer of `status` is recorded without it: its caller was gone,
/// for `why`.
fn reached_no_caller(why: &str, status: u16) -> String {
    format!("{why}; the handler then answered {status}, which reached no caller")
}

/// Why an answer of `status`, sent once the relay had been `quiet` long
/// enough to have given up on the tunnel, is not taken as delivered: the
/// connection ended before the relay said it still waited. Worded as the
/// requests held after such a pause are.
fn unheard_after_pause(status: u16, quiet: std::time::Duration) -> String {
    format!(
        "the handler answered {status} after {}s without a word from the relay (PortPreview paused, or the \
         relay or the network stalled), and the connection ended before the relay answered the ping asking \
         whether it still waited: it may have answered the caller 502, and this answer then reached no caller",
        quiet.as_secs()
    )
}

/// What became of a request body that never came whole, when `error`
/// says only that it stopped: beside the reason it stopped, this says
/// whether the handler saw any of it.
fn cut_body(error: &str) -> Option<&'static str> {
    match error {
        CUT_SHORT => Some("it was not forwarded"),
        PART_FORWARDED => Some("the handler got only part of its body"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body that stopped says whether the handler saw any of it, beside
    /// whatever reason the relay gives for the stop; other errors say
    /// nothing of the body.
    #[test]
    fn a_cut_body_says_how_much_the_handler_saw() {
        assert_eq!(cut_body(CUT_SHORT), Some("it was not forwarded"));
        assert_eq!(cut_body(PART_FORWARDED), Some("the handler got only part of its body"));
        assert_eq!(cut_body("connection refused"), None);
    }
}
