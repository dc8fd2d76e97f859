//! Answers a caller missed after all. An exchange records its answer as
//! delivered once it has handed the last of it to the relay; a caller who
//! left meanwhile is told of by a reset that comes after, within a round
//! trip. The answers of a session's latest exchanges are kept for a few
//! seconds so that such a reset amends the delivery the history shows.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portpreview_shared::message::{StreamId, CALLER_GONE_BEFORE_ANSWER, CALLER_GONE_DURING_ANSWER};
use portpreview_shared::sync::lock;

use super::{reached_no_caller, Shared, HAD_THE_STATUS};
use crate::store::recorder::{Amendment, AnsweredTicket};

/// How long an answer is kept after it was sent: a reset later than this
/// is no round trip's.
const KEPT_FOR: Duration = Duration::from_secs(10);

/// Most answers kept, whatever their age: a burst of thousands a second
/// keeps the last of them.
const MOST_KEPT: usize = 4096;

/// The answers a session's exchanges sent lately, shared between the
/// session, which hears the relay's resets, and its exchanges.
#[derive(Clone, Default)]
pub struct Answered(Arc<Mutex<VecDeque<Sent>>>);

/// An answer sent whole, as recorded.
struct Sent {
    stream: StreamId,
    answered: AnsweredTicket,
    status: u16,
    at: Instant,
}

impl Answered {
    /// Keeps the answer `status` that `stream`'s exchange sent whole and
    /// recorded as `answered`.
    pub(super) fn keep(&self, stream: StreamId, answered: AnsweredTicket, status: u16) {
        let now = Instant::now();
        let mut sent = lock(&self.0);
        while sent
            .front()
            .is_some_and(|oldest| sent.len() >= MOST_KEPT || now.duration_since(oldest.at) > KEPT_FOR)
        {
            sent.pop_front();
        }
        sent.push_back(Sent {
            stream,
            answered,
            status,
            at: now,
        });
    }

    /// Amends the recorded answer of `stream`, if it is kept, for the
    /// relay's `reason`. Whoever takes it first amends
    /// it: the session, or the exchange that finds the reset after it sent
    /// its answer. A reset that says nothing about the caller (it had the
    /// whole answer, or the relay gave up on what the client had finished)
    /// amends nothing.
    pub fn amend(&self, shared: &Shared, stream: StreamId, reason: &str) {
        if !matches!(reason, CALLER_GONE_BEFORE_ANSWER | CALLER_GONE_DURING_ANSWER) {
            return;
        }
        let taken = {
            let mut sent = lock(&self.0);
            let at = sent.iter().rposition(|sent| sent.stream == stream);
            at.and_then(|at| sent.remove(at))
        };
        let (Some(sent), Some(recorder)) = (taken, &shared.recorder) else {
            return;
        };
        tracing::debug!(
            stream,
            reason,
            "the caller of an answer sent whole went away before it had it"
        );
        // In the words of an exchange whose reset came in time.
        let (status, error) = match reason {
            CALLER_GONE_BEFORE_ANSWER => (None, reached_no_caller(reason, sent.status)),
            _ => (Some(sent.status), format!("{reason}: {HAD_THE_STATUS}")),
        };
        let amendment = Amendment {
            was: sent.status,
            status,
            error,
        };
        if let Err(err) = recorder.amend(sent.answered, amendment) {
            shared.recording_failed(&err);
        }
    }
}
