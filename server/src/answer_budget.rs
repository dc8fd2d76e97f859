//! A relay-wide budget on answer bytes held for callers.
//!
//! Each stream may queue up to its window (1 MiB) of answer for a caller
//! slow to take it, and the window is the protocol's, so no stream can be
//! held to less. A crowd of callers that ask for large answers and never
//! read them could thus make the relay hold a mebibyte each, for as long
//! as the write-stall limit lets them sit (a minute). The bytes a stream
//! queues are charged here when queued and given back when the caller's
//! side takes them or the queue is dropped ([`Charge`]), so the relay
//! knows what it holds in all.
//!
//! Past the budget the relay is under pressure, and sheds load by cutting
//! the connections of callers that have read nothing for
//! [`crate::write_stall::PRESSED_WRITE_STALL`] instead of the usual limit
//! (see `write_stall`). That is the simplest mechanism that frees what
//! such a caller holds: a stream's queue lives with the caller's
//! connection (hyper holds its body, and a caller who does not read stops
//! hyper polling it), so resetting the stream alone would free nothing
//! until the connection ended anyway; and a write waiting on the socket
//! is the plainest sign of a caller taking nothing. A caller reading at
//! any useful pace is never touched, whatever the others do; what is shed
//! is told to the tunnel's client as the reset's reason ([`SHED`]).
//!
//! The budget is thus where shedding starts, not a hard ceiling: in the
//! seconds a caller is given to read, newly stalled ones may still queue
//! their windows past it. What the relay holds beyond the budget is
//! bounded by what can reach it in those seconds, not by the connection
//! caps for a minute. Refusing the bytes instead (resetting the streams
//! whose queues are full when one more would cross the line) was the
//! other way: it would stop growth but free nothing, since the full
//! queues are the stalled callers', which send no more, and it would
//! put a fast reader whose queue happens to be full at a bad moment at
//! the same risk as a caller that reads nothing.
//!
//! Pressure lasts from the moment the budget is crossed until the bytes
//! held fall back to half of it, so a reader going up and down around the
//! line makes one episode, warned of once, not a warning a chunk.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// The reason given to the tunnel's client for a stream whose caller the
/// relay cut off under pressure.
pub const SHED: &str = "the relay cut the caller off: it read none of the answer for a while \
                        when the relay was holding too many unread answers";

/// Answer bytes the relay holds for callers in all, and whether it is
/// under pressure.
#[derive(Debug)]
pub struct AnswerBudget {
    limit: u64,
    held: AtomicU64,
    /// Mirrors `episode.pressed`, so a stalled write reads it without the lock.
    pressed: AtomicBool,
    episode: Mutex<Episode>,
}

#[derive(Debug, Default)]
struct Episode {
    pressed: bool,
    /// Cancelled when pressure starts, waking every stalled write to
    /// judge itself by the shorter limit; replaced when it ends.
    starts: CancellationToken,
}

impl AnswerBudget {
    /// A budget of `limit` bytes, none held.
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(Self {
            limit,
            held: AtomicU64::new(0),
            pressed: AtomicBool::new(false),
            episode: Mutex::new(Episode::default()),
        })
    }

    /// Charges `bytes` just queued for a caller; they are given back when
    /// the charge drops.
    pub fn charge(self: &Arc<Self>, bytes: u64) -> Charge {
        let mut charge = Charge {
            budget: Arc::clone(self),
            bytes: 0,
        };
        charge.add(bytes);
        charge
    }

    /// Answer bytes held now.
    #[cfg(test)]
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Acquire)
    }

    /// Whether the relay is under pressure: over its budget, and not yet
    /// back to half of it.
    pub fn pressed(&self) -> bool {
        self.pressed.load(Ordering::Acquire)
    }

    /// Completes when pressure starts, or at once when it is on.
    pub fn pressure_starts(&self) -> WaitForCancellationFutureOwned {
        self.episode().starts.clone().cancelled_owned()
    }

    fn episode(&self) -> std::sync::MutexGuard<'_, Episode> {
        // Each critical section flips a flag and swaps a token.
        portpreview_shared::sync::lock(&self.episode)
    }

    fn add(&self, bytes: u64) {
        let now = self.held.fetch_add(bytes, Ordering::AcqRel) + bytes;
        if now > self.limit && !self.pressed() {
            let mut episode = self.episode();
            if !episode.pressed {
                episode.pressed = true;
                self.pressed.store(true, Ordering::Release);
                episode.starts.cancel();
                tracing::warn!(
                    held = now,
                    budget = self.limit,
                    "answers unread by their callers are over the relay's budget: \
                     callers that read nothing for a while are cut off until it is back under"
                );
            }
        }
    }

    fn release(&self, bytes: u64) {
        let now = self.held.fetch_sub(bytes, Ordering::AcqRel) - bytes;
        if now <= self.limit / 2 && self.pressed() {
            let mut episode = self.episode();
            if episode.pressed {
                episode.pressed = false;
                self.pressed.store(false, Ordering::Release);
                episode.starts = CancellationToken::new();
                tracing::info!(
                    held = now,
                    budget = self.limit,
                    "answers held for callers are back under budget"
                );
            }
        }
    }
}

/// Answer bytes queued for one caller, counted against the budget until
/// dropped.
#[derive(Debug)]
pub struct Charge {
    budget: Arc<AnswerBudget>,
    bytes: u64,
}

impl Charge {
    /// Counts `bytes` more, joined to those already charged.
    pub fn add(&mut self, bytes: u64) {
        if bytes > 0 {
            self.bytes += bytes;
            self.budget.add(bytes);
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.budget.release(self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::*;

    fn ready(future: &mut std::pin::Pin<&mut WaitForCancellationFutureOwned>) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        matches!(future.as_mut().poll(&mut cx), Poll::Ready(()))
    }

    #[test]
    fn bytes_are_held_from_their_charge_until_it_drops() {
        let budget = AnswerBudget::new(100);
        let first = budget.charge(30);
        let mut second = budget.charge(20);
        assert_eq!(budget.held(), 50);
        second.add(5);
        assert_eq!(budget.held(), 55);
        drop(first);
        assert_eq!(budget.held(), 25);
        drop(second);
        assert_eq!(budget.held(), 0);
        assert!(!budget.pressed(), "never over");
    }

    #[test]
    fn pressure_starts_past_the_budget_and_ends_at_half_of_it() {
        let budget = AnswerBudget::new(100);
        let mut starts = pin!(budget.pressure_starts());
        let most = budget.charge(100);
        assert!(!budget.pressed(), "the budget itself is within it");
        assert!(!ready(&mut starts));
        let one_more = budget.charge(1);
        assert!(budget.pressed());
        assert!(ready(&mut starts), "stalled writes are woken");
        drop(one_more);
        assert!(budget.pressed(), "back at the line is not back under");
        let rest = budget.charge(0);
        drop(most);
        drop(rest);
        assert!(!budget.pressed(), "at half or less, the episode is over");
        let mut next = pin!(budget.pressure_starts());
        assert!(!ready(&mut next), "the next episode has a wake-up of its own");
        let _again = budget.charge(101);
        assert!(ready(&mut next));
    }

    #[test]
    fn one_episode_however_often_the_line_is_crossed_within_it() {
        let budget = AnswerBudget::new(100);
        let _base = budget.charge(80);
        let mut crossings = 0;
        for _ in 0..10 {
            let was = budget.pressed();
            let over = budget.charge(30);
            crossings += usize::from(!was && budget.pressed());
            drop(over);
        }
        assert_eq!(crossings, 1, "80 held is above half of the budget: still pressed");
    }
}
