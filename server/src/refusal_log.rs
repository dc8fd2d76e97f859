//! Log lines for connections the relay turns away, at most one a minute
//! each: an operator learns why callers are refused or kept waiting, and a
//! flood of connections does not become a flood of lines.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// The connections refused at the cap, counted and told at most once a
/// minute: an operator learns that the cap bites (set too low behind a
/// proxy that sends every caller from one address).
#[derive(Default)]
pub(crate) struct CapLog {
    every_minute: OnceAMinute,
    untold: u64,
    last_from: Option<SocketAddr>,
}

/// Lets a log line through at most once a minute.
#[derive(Default)]
struct OnceAMinute {
    last: Option<tokio::time::Instant>,
}

impl OnceAMinute {
    const EVERY: Duration = Duration::from_secs(60);

    /// When the next line may go through: now, when none has yet.
    fn next(&self) -> Option<tokio::time::Instant> {
        self.last.map(|last| last + Self::EVERY)
    }

    /// True when a minute has passed since the last line let through.
    fn due(&mut self) -> bool {
        let now = tokio::time::Instant::now();
        if self.last.is_some_and(|last| now < last + Self::EVERY) {
            return false;
        }
        self.last = Some(now);
        true
    }
}

impl CapLog {
    pub(crate) fn refused(&mut self, peer: SocketAddr) {
        tracing::debug!(%peer, "connection refused: over the connection cap");
        self.untold += 1;
        self.last_from = Some(peer);
        self.tell_if_due();
    }

    /// Returns once refusals counted since the last line may be told;
    /// never while there are none.
    pub(crate) async fn untold_due(&self) {
        match (self.untold, self.every_minute.next()) {
            (0, _) => std::future::pending().await,
            (_, Some(at)) => tokio::time::sleep_until(at).await,
            (_, None) => {}
        }
    }

    /// Tells the refusals counted so far, if a minute has passed.
    pub(crate) fn tell_if_due(&mut self) {
        if self.every_minute.due() {
            self.tell();
        }
    }

    /// At the end, the refusals not yet told.
    pub(crate) fn tell_the_rest(&mut self) {
        if self.untold > 0 {
            self.tell();
        }
    }

    fn tell(&mut self) {
        tracing::warn!(
            refused = self.untold,
            last_from = self.last_from.map(tracing::field::display),
            "connections refused over the connection cap (--max-connections-per-ip, or the relay's overall \
             cap), counted since the last such line; one a minute at most"
        );
        self.untold = 0;
    }
}

/// Accepts refused for want of descriptors or memory, told at most once a
/// minute: meanwhile callers wait unanswered in the listen queue, and an
/// operator must learn why, without a line per try.
#[derive(Default)]
pub(crate) struct ExhaustionLog(OnceAMinute);

impl ExhaustionLog {
    pub(crate) fn tell(&mut self, err: &io::Error) {
        if !self.0.due() {
            return;
        }
        tracing::warn!(
            %err,
            open_files = portpreview_shared::open_files::limit().map(tracing::field::display),
            "cannot accept connections: callers wait until some close (raise the open-file limit, ulimit -n); \
             one such line a minute at most"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn refusals_at_the_cap_are_told_once_a_minute_with_their_count() {
        let mut log = CapLog::default();
        let peer: SocketAddr = ([127, 0, 0, 1], 9).into();
        log.refused(peer);
        assert_eq!(log.untold, 0, "the first is told at once");
        for _ in 0..5 {
            log.refused(peer);
        }
        assert_eq!(log.untold, 5, "counted, not told");
        let started = tokio::time::Instant::now();
        // No refusal after the burst: its count is due a minute after
        // the line before.
        log.untold_due().await;
        assert_eq!(started.elapsed(), OnceAMinute::EVERY);
        log.tell_if_due();
        assert_eq!(log.untold, 0, "a minute on, told with the count");
        log.refused(peer);
        assert_eq!(log.untold, 1, "within the next minute, counted");
        tokio::time::advance(OnceAMinute::EVERY).await;
        log.refused(peer);
        assert_eq!(log.untold, 0, "a minute on, told at the refusal");
        log.refused(peer);
        log.tell_the_rest();
        assert_eq!(log.untold, 0, "what is left is told as the relay stops");
    }
}
