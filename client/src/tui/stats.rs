//! What the header shows: live, the connection state, rate and latency;
//! browsing, how the newest deliveries arrived and how fast they were
//! answered.

use std::collections::VecDeque;

use crate::events::TunnelEvent;
use crate::store::Summary;

/// Seconds of history in the requests-per-second sparkline.
pub const RATE_WINDOW: usize = 60;
/// Recent durations the percentiles are taken over, and the newest
/// deliveries a browsed history's header is drawn from.
pub const LATENCY_WINDOW: usize = 1000;

/// The tunnel's connection as last reported.
#[derive(Debug, Clone, PartialEq)]
pub enum Connection {
    /// No report yet.
    Connecting,
    /// Up and forwarding.
    Connected,
    /// Down; the next attempt comes at `retry_at`.
    Disconnected {
        /// Why it dropped.
        reason: String,
        /// Second (since the TUI started) of the next attempt.
        retry_at: u64,
    },
}

/// A warning the header gives a line of its own, with its reason as the
/// tunnel gave it (unescaped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Warning<'a> {
    /// The relay cannot be reached: why.
    Offline(&'a str),
    /// The history takes no writes: why.
    HistoryRefusing(&'a str),
    /// Deliveries are not recorded at all: why.
    NotRecording(&'a str),
    /// This many deliveries were forwarded and kept out of the history
    /// (`--no-record`, or a history that could not take them): counted
    /// above, never listed.
    Unlisted(u64),
    /// The newest delivery got no answer from the handler: why (a dead
    /// port, a timeout). Gone once one does.
    LastFailed(&'a str),
}

/// Live counters of a running tunnel.
#[derive(Debug, Clone)]
pub struct LiveStats {
    /// Public URL callers use (empty until connected).
    pub public_url: String,
    /// The `/t/<name>` form of the URL, beside a subdomain one that needs
    /// wildcard DNS.
    pub also_url: Option<String>,
    /// Local target.
    pub target: String,
    /// Connection state.
    pub connection: Connection,
    /// Why the history refuses writes, while it does.
    pub history_refusing: Option<String>,
    /// Why deliveries are not recorded, while they are not.
    pub not_recording: Option<String>,
    /// Deliveries per second, oldest first; the last bucket is the current second.
    rate: VecDeque<u64>,
    /// Second (since the TUI started) the last bucket counts.
    second: u64,
    latencies: Latencies,
    /// Deliveries seen.
    pub total: u64,
    /// Answered 1xx–3xx.
    pub ok: u64,
    /// Answered 4xx.
    pub client_errors: u64,
    /// Answered 5xx.
    pub server_errors: u64,
    /// Not answered (target refused, timed out…).
    pub failed: u64,
    /// Forwarded but kept out of the history (`--no-record`, or a history
    /// that could not take them), so never listed.
    pub not_recorded: u64,
    /// Why the newest delivery got no answer, while it is the newest.
    last_failure: Option<String>,
}

impl Default for LiveStats {
    fn default() -> Self {
        Self {
            public_url: String::new(),
            also_url: None,
            target: String::new(),
            connection: Connection::Connecting,
            history_refusing: None,
            not_recording: None,
            rate: std::iter::repeat_n(0, RATE_WINDOW).collect(),
            second: 0,
            latencies: Latencies::default(),
            total: 0,
            ok: 0,
            client_errors: 0,
            server_errors: 0,
            failed: 0,
            not_recorded: 0,
            last_failure: None,
        }
    }
}

impl LiveStats {
    /// Takes in one tunnel event (deliveries are counted at `second`).
    pub fn record(&mut self, event: &TunnelEvent, second: u64) {
        match event {
            TunnelEvent::Connected {
                public_url,
                also_url,
                target,
            } => {
                self.public_url.clone_from(public_url);
                self.also_url.clone_from(also_url);
                self.target.clone_from(target);
                self.connection = Connection::Connected;
            }
            TunnelEvent::Disconnected { reason, retry_in, .. } => {
                self.connection = Connection::Disconnected {
                    reason: reason.clone(),
                    retry_at: second + retry_in.as_secs_f64().ceil() as u64,
                };
            }
            TunnelEvent::HistoryRefusing { reason } => self.history_refusing.clone_from(reason),
            TunnelEvent::NotRecording { reason } => self.not_recording.clone_from(reason),
            TunnelEvent::Amended { summary, was } => self.recount(*was, summary),
            TunnelEvent::Waiting { .. }
            | TunnelEvent::Stopping { .. }
            | TunnelEvent::Notice { .. }
            | TunnelEvent::Missed { .. }
            | TunnelEvent::HeldBack { .. } => {}
            TunnelEvent::Delivered { summary, .. } => self.count(summary, second),
        }
    }

    fn count(&mut self, summary: &Summary, second: u64) {
        self.advance(second);
        if let Some(last) = self.rate.back_mut() {
            *last += 1;
        }
        self.total += 1;
        if summary.id == 0 {
            self.not_recorded += 1;
        }
        *self.class(summary.status) += 1;
        self.last_failure = match summary.status {
            None => Some(summary.error.clone().unwrap_or_else(|| "no answer".into())),
            Some(_) => None,
        };
        self.latencies.add(summary);
    }

    /// Moves a delivery counted with status `was` to the class it has now:
    /// its caller left before the answer it was counted by reached it.
    fn recount(&mut self, was: u16, summary: &Summary) {
        let counted = self.class(Some(was));
        *counted = counted.saturating_sub(1);
        *self.class(summary.status) += 1;
        self.latencies.forget(summary);
        if summary.status.is_none() {
            self.last_failure = Some(summary.error.clone().unwrap_or_else(|| "no answer".into()));
        }
    }

    /// The count a delivery of `status` is in.
    fn class(&mut self, status: Option<u16>) -> &mut u64 {
        match status {
            None => &mut self.failed,
            Some(status) if status >= 500 => &mut self.server_errors,
            Some(status) if status >= 400 => &mut self.client_errors,
            Some(_) => &mut self.ok,
        }
    }

    /// What the user must know now: why the tunnel is offline, why the
    /// history takes no writes or leaves deliveries out, and why the
    /// newest delivery failed.
    pub fn warnings(&self) -> impl Iterator<Item = Warning<'_>> {
        let offline = match &self.connection {
            Connection::Disconnected { reason, .. } => Some(Warning::Offline(reason)),
            _ => None,
        };
        let refusing = self.history_refusing.as_deref().map(Warning::HistoryRefusing);
        let not_recording = self.not_recording.as_deref().map(Warning::NotRecording);
        // Not recording at all says it already.
        let unlisted =
            (self.not_recorded > 0 && self.not_recording.is_none()).then_some(Warning::Unlisted(self.not_recorded));
        let failed = self.last_failure.as_deref().map(Warning::LastFailed);
        offline
            .into_iter()
            .chain(refusing)
            .chain(not_recording)
            .chain(failed)
            .chain(unlisted)
    }

    /// Seconds until the next attempt to reconnect, counted down each tick.
    pub fn retry_left(&self) -> Option<u64> {
        match self.connection {
            Connection::Disconnected { retry_at, .. } => Some(retry_at.saturating_sub(self.second)),
            _ => None,
        }
    }

    /// Moves the sparkline on to `second`, with zeros for quiet seconds.
    pub fn advance(&mut self, second: u64) {
        let steps = second.saturating_sub(self.second).min(RATE_WINDOW as u64);
        for _ in 0..steps {
            self.rate.pop_front();
            self.rate.push_back(0);
        }
        self.second = self.second.max(second);
    }

    /// Deliveries per second over the window, oldest first.
    pub fn rate(&self) -> Vec<u64> {
        self.rate.iter().copied().collect()
    }

    /// The `p`th percentile (0–100) of recent durations, in milliseconds.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        self.latencies.percentile(p)
    }
}

/// The handler's latest [`LATENCY_WINDOW`] answer times.
#[derive(Debug, Clone, Default)]
struct Latencies(VecDeque<f64>);

impl Latencies {
    /// Takes in one delivery's time, pushing out the oldest when full.
    fn add(&mut self, summary: &Summary) {
        // The handler's latency: a delivery it never answered (its port
        // dead, the request never forwarded, the body cut off on its way)
        // took no time of the handler's, or all of a timeout.
        if let Some(ms) = summary.duration_ms.filter(|_| summary.status.is_some()) {
            if self.0.len() == LATENCY_WINDOW {
                self.0.pop_front();
            }
            self.0.push_back(ms);
        }
    }

    /// Takes out the time of a delivery counted as answered whose caller
    /// turned out to have had no answer: not timed, as the others.
    fn forget(&mut self, summary: &Summary) {
        let Some(ms) = summary.duration_ms.filter(|_| summary.status.is_none()) else {
            return;
        };
        if let Some(at) = self.0.iter().rposition(|&timed| timed == ms) {
            self.0.remove(at);
        }
    }

    fn percentile(&self, p: f64) -> Option<f64> {
        if self.0.is_empty() {
            return None;
        }
        let mut sorted: Vec<f64> = self.0.iter().copied().collect();
        sorted.sort_by(f64::total_cmp);
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted.get(rank.saturating_sub(1).min(sorted.len() - 1)).copied()
    }
}

/// Bars of a tenth of a second, for deliveries that all came within one
/// second: a second's bar is the narrowest otherwise.
const TENTHS: (i64, &str) = (100, "100 ms");

/// Bar widths a browsed history's sparkline may have, narrowest first,
/// each with how its label names it.
const BARS: [(i64, &str); 8] = [
    (1_000, "s"),
    (10_000, "10 s"),
    (60_000, "min"),
    (600_000, "10 min"),
    (3_600_000, "h"),
    (21_600_000, "6 h"),
    (86_400_000, "day"),
    (604_800_000, "week"),
];

/// What a browsed history's header shows of its newest deliveries (up
/// to [`LATENCY_WINDOW`]): when they arrived and how fast the handler
/// answered them. Read again whenever another process writes.
#[derive(Debug, Clone, Default)]
pub struct Overview {
    /// When each arrived, in milliseconds since the epoch, newest first.
    arrivals: Vec<i64>,
    latencies: Latencies,
}

impl Overview {
    /// The figures of `rows`, newest first, as the list gives them.
    pub fn of(rows: &[Summary]) -> Self {
        let mut latencies = Latencies::default();
        for row in rows.iter().rev() {
            latencies.add(row);
        }
        Self {
            arrivals: rows.iter().map(|row| row.received_at_ms).collect(),
            latencies,
        }
    }

    /// Deliveries per bar, oldest first, from the oldest delivery taken in
    /// to the newest, and what one bar spans ("min"): the narrowest that
    /// fits them all in `most` bars, so a burst of a minute and a week of
    /// traffic both fill the line, in tenths of a second when all came
    /// within one (a load test's burst). Bars fall on the clock's seconds,
    /// minutes and hours (UTC). With deliveries older than the widest bars
    /// reach, the newest `most` bars. `None` with no deliveries.
    pub fn bars(&self, most: usize) -> Option<(Vec<u64>, &'static str)> {
        let newest = *self.arrivals.iter().max()?;
        let oldest = *self.arrivals.iter().min()?;
        let spanned = |width: i64| usize::try_from(newest / width - oldest / width + 1).unwrap_or(usize::MAX);
        let (width, name) = match spanned(BARS[0].0) {
            // All in one second, as a burst from a load test: one bar of
            // a second would say nothing of it.
            1 => TENTHS,
            _ => BARS
                .iter()
                .copied()
                .find(|&(width, _)| spanned(width) <= most)
                .unwrap_or(BARS[BARS.len() - 1]),
        };
        let bars = spanned(width).min(most);
        let mut counts = vec![0; bars];
        for at in &self.arrivals {
            // Bars back from the newest one.
            let back = newest / width - at / width;
            if let Some(count) = usize::try_from(back)
                .ok()
                .and_then(|back| bars.checked_sub(back + 1))
                .and_then(|i| counts.get_mut(i))
            {
                *count += 1;
            }
        }
        Some((counts, name))
    }

    /// The `p`th percentile (0–100) of the handler's answer times, in
    /// milliseconds.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        self.latencies.percentile(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::source::{summary_of, test_delivery};

    fn delivered(status: Option<u16>, ms: f64) -> TunnelEvent {
        let mut summary = summary_of(&test_delivery(1));
        summary.status = status;
        summary.duration_ms = Some(ms);
        TunnelEvent::Delivered {
            summary,
            delivery_number: 1,
        }
    }

    #[test]
    fn counts_by_class_and_takes_percentiles() {
        let mut stats = LiveStats::default();
        for ms in 1..=10 {
            stats.record(&delivered(Some(200), f64::from(ms)), 0);
        }
        stats.record(&delivered(Some(404), 50.0), 1);
        stats.record(&delivered(Some(502), 60.0), 1);
        stats.record(&delivered(None, 70.0), 3);
        assert_eq!(
            (
                stats.total,
                stats.ok,
                stats.client_errors,
                stats.server_errors,
                stats.failed
            ),
            (13, 10, 1, 1, 1)
        );
        // The delivery nobody answered took none of the handler's time.
        assert_eq!(stats.percentile(50.0), Some(6.0));
        assert_eq!(stats.percentile(90.0), Some(50.0));
        assert_eq!(stats.percentile(100.0), Some(60.0));
        let rate = stats.rate();
        assert_eq!(rate.len(), RATE_WINDOW);
        assert_eq!(&rate[RATE_WINDOW - 4..], &[10, 2, 0, 1]);
    }

    /// A dead local port is named in the header while the newest delivery
    /// failed, and deliveries kept out of the history are counted there.
    /// A delivery amended once its caller was known to have left moves to
    /// the class it has now, and counts once.
    #[test]
    fn an_amended_delivery_moves_to_its_class() {
        let mut stats = LiveStats::default();
        stats.record(&delivered(Some(200), 5.0), 0);
        let TunnelEvent::Delivered { mut summary, .. } = delivered(None, 5.0) else {
            unreachable!()
        };
        summary.error = Some("the caller went away before the answer".into());
        stats.record(&TunnelEvent::Amended { summary, was: 200 }, 1);
        assert_eq!((stats.total, stats.ok, stats.failed), (1, 0, 1));
        assert_eq!(stats.percentile(50.0), None, "not timed");
        let warnings: Vec<_> = stats.warnings().collect();
        assert_eq!(
            warnings,
            [Warning::LastFailed("the caller went away before the answer")]
        );
    }

    #[test]
    fn the_newest_failure_and_the_unlisted_deliveries_are_warnings() {
        let mut stats = LiveStats::default();
        let mut failed = summary_of(&test_delivery(1));
        (failed.status, failed.error) = (None, Some("could not reach http://localhost:9: refused".into()));
        stats.record(
            &TunnelEvent::Delivered {
                summary: failed,
                delivery_number: 1,
            },
            0,
        );
        let warnings: Vec<_> = stats.warnings().collect();
        assert_eq!(
            warnings,
            [Warning::LastFailed("could not reach http://localhost:9: refused")]
        );

        let mut unlisted = summary_of(&test_delivery(2));
        (unlisted.id, unlisted.status) = (0, Some(200));
        for _ in 0..2 {
            stats.record(
                &TunnelEvent::Delivered {
                    summary: unlisted.clone(),
                    delivery_number: 1,
                },
                0,
            );
        }
        assert_eq!(stats.warnings().collect::<Vec<_>>(), [Warning::Unlisted(2)]);
        stats.not_recording = Some("the history could not be opened".into());
        assert_eq!(
            stats.warnings().collect::<Vec<_>>(),
            [Warning::NotRecording("the history could not be opened")]
        );
    }

    /// Summaries received at these milliseconds since the epoch, newest
    /// first as the list gives them, each answered in `ms`.
    fn arrived(at: &[i64], ms: f64) -> Vec<Summary> {
        at.iter()
            .rev()
            .map(|&at| {
                let mut summary = summary_of(&test_delivery(1));
                (summary.received_at_ms, summary.duration_ms) = (at, Some(ms));
                summary
            })
            .collect()
    }

    /// A browsed history's bars are the narrowest that hold every delivery
    /// taken in, counted on the clock's own seconds and minutes.
    #[test]
    fn a_history_is_drawn_in_the_narrowest_bars_that_hold_it() {
        let second = 1_000;
        let minute = 60 * second;
        let start = 1_764_470_700_000 - 1_764_470_700_000 % (3_600 * second);
        // Three in one second, one two seconds on.
        let burst = Overview::of(&arrived(&[start, start + 10, start + 999, start + 2 * second], 5.0));
        assert_eq!(burst.bars(30), Some((vec![3, 0, 1], "s")));
        // All in one second: tenths of it.
        let tenths = Overview::of(&arrived(&[start + 10, start + 20, start + 151], 5.0));
        assert_eq!(tenths.bars(30), Some((vec![2, 1], "100 ms")));
        // Forty seconds do not fit in 30 bars of a second: 10 s each.
        let slow = Overview::of(&arrived(&[start, start + 35 * second, start + 40 * second], 5.0));
        assert_eq!(slow.bars(30), Some((vec![1, 0, 0, 1, 1], "10 s")));
        // Half an hour in 20 bars: a minute is too narrow, ten are not.
        let day = Overview::of(&arrived(
            &[start + 59 * second, start + minute, start + 30 * minute],
            5.0,
        ));
        assert_eq!(day.bars(20), Some((vec![2, 0, 0, 1], "10 min")));
        // Years apart: the newest weeks, the oldest delivery left out.
        let years = Overview::of(&arrived(&[start - 1_000 * 604_800_000, start], 5.0));
        assert_eq!(years.bars(4), Some((vec![0, 0, 0, 1], "week")));
        assert_eq!(Overview::of(&[]).bars(30), None);
    }

    /// The percentiles skip deliveries the handler never answered, as live.
    #[test]
    fn a_history_s_percentiles_are_of_the_answered() {
        let mut rows = arrived(&[1, 2, 3], 10.0);
        rows[0].duration_ms = Some(30.0);
        rows[1].status = None;
        rows[1].duration_ms = Some(30_000.0);
        let overview = Overview::of(&rows);
        assert_eq!(overview.percentile(50.0), Some(10.0));
        assert_eq!(overview.percentile(90.0), Some(30.0));
    }

    #[test]
    fn connection_follows_events() {
        let mut stats = LiveStats::default();
        assert_eq!(stats.percentile(50.0), None);
        stats.record(
            &TunnelEvent::Connected {
                public_url: "http://x/t/a".into(),
                also_url: None,
                target: "http://127.0.0.1:3000".into(),
            },
            0,
        );
        assert_eq!(stats.connection, Connection::Connected);
        stats.record(
            &TunnelEvent::Disconnected {
                reason: "relay went away".into(),
                failed_tries: 0,
                retry_in: std::time::Duration::from_secs(2),
            },
            0,
        );
        assert!(matches!(stats.connection, Connection::Disconnected { .. }));
        assert_eq!(stats.public_url, "http://x/t/a");
    }
}
