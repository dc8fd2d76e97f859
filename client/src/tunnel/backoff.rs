//! Capped exponential backoff with jitter, so a fleet of clients does not
//! reconnect in lockstep when a relay restarts.

use std::time::Duration;

use rand::Rng;

/// First delay after a drop.
pub const INITIAL_DELAY: Duration = Duration::from_millis(100);
/// Longest delay between attempts.
pub const MAX_DELAY: Duration = Duration::from_secs(10);

/// The delay sequence: doubles from `INITIAL_DELAY` up to `MAX_DELAY`,
/// each delay drawn from the upper half of its step ("equal jitter").
#[derive(Debug, Default)]
pub struct Backoff {
    attempt: u32,
}

/// How long a connection must have lasted to count as a good one, after
/// which the delays start over. A relay that welcomes the client and drops
/// it at once must not be reconnected to in a tight loop; one restarted
/// twice in a minute (a deploy, then its fix) must not leave its clients
/// waiting out 10 s delays, while their callers meet `no such tunnel`.
pub const STEADY: Duration = Duration::from_secs(2);

impl Backoff {
    /// Starts over after a good connection.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    /// Notes a connection that ended after lasting `lasted`: the delays
    /// start over only when it was a steady one.
    pub fn connection_ended(&mut self, lasted: Duration) {
        if lasted >= STEADY {
            self.reset();
        }
    }

    /// The next delay to wait.
    pub fn next_delay(&mut self) -> Duration {
        let step = INITIAL_DELAY.saturating_mul(1 << self.attempt.min(16)).min(MAX_DELAY);
        self.attempt = self.attempt.saturating_add(1);
        let half = step / 2;
        half + rand::thread_rng().gen_range(Duration::ZERO..=half)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_then_caps_with_jitter() {
        let mut backoff = Backoff::default();
        // Each step's delay lies in the upper half of a step that doubles
        // until it reaches the cap.
        for n in 0..12u32 {
            let step = INITIAL_DELAY.saturating_mul(1 << n).min(MAX_DELAY);
            let delay = backoff.next_delay();
            assert!(
                delay >= step / 2 && delay <= step,
                "try {n}: {delay:?} outside {step:?}'s upper half"
            );
        }
        // Jitter: clients started together do not keep in step.
        let at_the_cap: std::collections::HashSet<Duration> = (0..20).map(|_| backoff.next_delay()).collect();
        assert!(at_the_cap.len() > 1, "every delay the same: {at_the_cap:?}");
        backoff.reset();
        assert!(backoff.next_delay() <= INITIAL_DELAY);
    }

    #[test]
    fn only_a_steady_connection_starts_the_delays_over() {
        let mut backoff = Backoff::default();
        for _ in 0..6 {
            backoff.next_delay();
            // Welcomed, then dropped at once, as a broken relay does.
            backoff.connection_ended(Duration::from_millis(5));
        }
        assert!(backoff.next_delay() >= INITIAL_DELAY * 16, "still growing");
        backoff.connection_ended(STEADY);
        assert!(backoff.next_delay() <= INITIAL_DELAY, "a good connection starts over");
    }
}
