//! Telling a peer's silence from this process's own pause.
//!
//! A process stopped (`kill -STOP`, a debugger) or a laptop asleep runs
//! no timers; when it runs again, every deadline that passed meanwhile
//! fires at once, before the frames and answers that arrived in the
//! meantime have been read. Judged by those timers alone, a peer would be
//! declared silent, and a handler slow, for time this process itself was
//! not running.

use std::time::{Duration, Instant};

/// How late a timer may fire and still be taken as running on time. Far
/// past what a busy scheduler delays a timer by, far below any pause
/// worth the name.
pub const OVERSLEPT: Duration = Duration::from_secs(1);

/// Once a limit passed while this process was not running, how long what
/// the pause held up gets to be read: it is in a socket already, a few
/// polls away.
pub const WAKE_GRACE: Duration = Duration::from_millis(500);

/// Whether a timer due at `due` that fired at `now` fired so late that
/// this process was not running in between.
pub fn overslept(due: Instant, now: Instant) -> bool {
    now.saturating_duration_since(due) > OVERSLEPT
}

/// A time limit's one extension by [`WAKE_GRACE`]: what a limit that ran
/// out while this process was not running held up is read before the
/// limit counts, once.
#[derive(Debug, Default)]
pub struct WakeGrace {
    given: bool,
}

impl WakeGrace {
    /// The limit's new deadline, when a timer due at `due` fired at `now`
    /// so late that this process was not running in between, and no grace
    /// was given yet; `None` when the limit stands.
    pub fn after(&mut self, due: Instant, now: Instant) -> Option<Instant> {
        if self.given || !overslept(due, now) {
            return None;
        }
        self.given = true;
        Some(now + WAKE_GRACE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_that_ran_out_in_a_pause_gets_its_grace_once() {
        let due = Instant::now();
        let mut grace = WakeGrace::default();
        assert_eq!(grace.after(due, due + Duration::from_millis(200)), None, "on time");
        let woke = due + Duration::from_secs(20);
        assert_eq!(grace.after(due, woke), Some(woke + WAKE_GRACE));
        let later = woke + Duration::from_secs(20);
        assert_eq!(grace.after(woke, later), None, "once");
    }

    #[test]
    fn only_a_timer_far_past_its_time_counts_as_a_pause() {
        let due = Instant::now();
        assert!(!overslept(due, due));
        assert!(!overslept(due, due + Duration::from_millis(200)));
        assert!(overslept(due, due + Duration::from_secs(20)));
        // Fired early (a reset deadline): no pause.
        assert!(!overslept(due + Duration::from_secs(5), due));
    }
}
