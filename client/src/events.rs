//! What a running tunnel reports to whoever shows it (TUI or log lines).

use std::time::Duration;

use tokio::sync::mpsc;

use crate::store::{Summary, WriterNews};

/// One thing that happened on a live tunnel.
#[derive(Debug, Clone, PartialEq)]
pub enum TunnelEvent {
    /// The relay accepted the tunnel; `public_url` now reaches `target`.
    Connected {
        /// Public URL callers use.
        public_url: String,
        /// The same tunnel by path on the address the client reached the
        /// relay at (`/t/<name>`), when `public_url` is a `<name>.<domain>`
        /// one: that needs wildcard DNS, this works wherever the relay does.
        also_url: Option<String>,
        /// Local target requests go to.
        target: String,
    },
    /// The connection to the relay dropped, or a try to get it back
    /// failed; the next try is in `retry_in`.
    Disconnected {
        /// Why, in one line.
        reason: String,
        /// Tries that failed since the connection was lost (0: just lost).
        failed_tries: u32,
        /// Delay before the next attempt.
        retry_in: Duration,
    },
    /// The tunnel is stopping and gives the requests in flight a moment
    /// to finish, or, asked again, cuts them off.
    Stopping {
        /// Requests still in flight.
        in_flight: usize,
        /// How long they get; zero when they are cut off.
        within: Duration,
    },
    /// A request is in the history and still waits for its answer.
    Waiting {
        /// The request as a history row, without its answer.
        summary: Summary,
    },
    /// The history refuses writes (`Some`, why), or takes them
    /// again (`None`). Forwarding goes on either way.
    HistoryRefusing {
        /// Why, in one line.
        reason: Option<String>,
    },
    /// Deliveries are not recorded (`Some`, why: the history's inbox cannot
    /// be written, say on a full disk), or are again (`None`). Forwarding
    /// goes on either way.
    NotRecording {
        /// Why, in one line.
        reason: Option<String>,
    },
    /// Something about how the tunnel was set up that works, but perhaps
    /// not as meant: a config file's token withheld from another relay, a
    /// flag with nothing to act on. Shown where the user looks, the TUI's
    /// status line included, not only in a log.
    Notice {
        /// One line.
        text: String,
    },
    /// The relay asked the tunnel to wait before it starts (the name asked
    /// for is held for the client that last had it, or the relay is busy),
    /// and the tunnel waits: told as a notice, stale once connected.
    HeldBack {
        /// One line.
        text: String,
    },
    /// A delivery shown as completed turned out otherwise: the relay said
    /// its caller did not get the answer whole only after it was stored.
    Amended {
        /// The delivery as the history has it now.
        summary: Summary,
        /// The status it was shown with.
        was: u16,
    },
    /// A delivery completed (answered or failed); `summary.id` is its
    /// history row, 0 when it was not recorded.
    Delivered {
        /// The delivery as a history row.
        summary: Summary,
        /// 1 for the first delivery of its event key, 2 for the first retry…
        delivery_number: i64,
    },
}

impl TunnelEvent {
    /// The event for a completed delivery, numbered by its history row.
    pub fn delivered(summary: Summary) -> TunnelEvent {
        TunnelEvent::Delivered {
            delivery_number: summary.delivery_count,
            summary,
        }
    }
}

impl From<WriterNews> for TunnelEvent {
    fn from(news: WriterNews) -> Self {
        match news {
            WriterNews::Waiting(summary) => TunnelEvent::Waiting { summary },
            WriterNews::Stored(summary) => TunnelEvent::delivered(summary),
            WriterNews::Amended { summary, was } => TunnelEvent::Amended { summary, was },
            WriterNews::Refusing(reason) => TunnelEvent::HistoryRefusing { reason: Some(reason) },
            WriterNews::Resumed => TunnelEvent::HistoryRefusing { reason: None },
            WriterNews::Notice(text) => TunnelEvent::Notice { text },
        }
    }
}

/// Reports a completed delivery; see [`report`].
pub fn report_delivered(events: &mpsc::Sender<TunnelEvent>, summary: Summary) {
    report(events, TunnelEvent::delivered(summary));
}

/// Reports an event, dropping it when the display is behind: a display
/// nobody reads (stdout piped into a pager left alone) never holds up the
/// tunnel, the history writer, or a ctrl-c.
pub fn report(events: &mpsc::Sender<TunnelEvent>, event: TunnelEvent) {
    if events.try_send(event).is_err() {
        tracing::debug!("tunnel event dropped: the display is behind");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_display_that_is_behind_never_holds_up_the_sender() {
        let (events, mut shown) = mpsc::channel(1);
        let lost = |n: u64| TunnelEvent::Disconnected {
            reason: format!("drop {n}"),
            failed_tries: 0,
            retry_in: Duration::from_secs(n),
        };
        report(&events, lost(1));
        // The channel is full: a send that waited would never return here.
        report(&events, lost(2));
        assert_eq!(shown.try_recv().ok(), Some(lost(1)));
        assert!(
            shown.try_recv().is_err(),
            "the event the display had no room for is dropped"
        );
    }
}
