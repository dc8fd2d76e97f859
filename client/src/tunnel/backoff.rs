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

impl Backoff {
    /// Starts over after a good connection.
    pub fn reset(&mut self) {
        self.attempt = 0;
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
        let first = backoff.next_delay();
        assert!(first >= INITIAL_DELAY / 2 && first <= INITIAL_DELAY);
        let later: Vec<Duration> = (0..30).map(|_| backoff.next_delay()).collect();
        assert!(later.iter().all(|d| *d <= MAX_DELAY));
        assert!(later.last().is_some_and(|d| *d >= MAX_DELAY / 2));
        backoff.reset();
        assert!(backoff.next_delay() <= INITIAL_DELAY);
    }
}
