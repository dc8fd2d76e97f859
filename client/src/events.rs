//! What a running tunnel reports to whoever shows it (TUI or log lines).

use std::time::Duration;

use tokio::sync::mpsc;

use crate::store::Summary;

/// One thing that happened on a live tunnel.
#[derive(Debug, Clone, PartialEq)]
pub enum TunnelEvent {
    /// The relay accepted the tunnel; `public_url` now reaches `target`.
    Connected {
        /// Public URL callers use.
        public_url: String,
        /// Local target requests go to.
        target: String,
    },
    /// The connection to the relay dropped; the next try is in `retry_in`.
    Disconnected {
        /// Why, in one line.
        reason: String,
        /// Delay before the next attempt.
        retry_in: Duration,
    },
    /// A delivery completed (answered or failed) and is in the history.
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

/// Reports a completed delivery, dropping it when the display is behind:
/// a slow display never holds up the tunnel or the history writer.
pub fn report_delivered(events: &mpsc::Sender<TunnelEvent>, summary: Summary) {
    if events.try_send(TunnelEvent::delivered(summary)).is_err() {
        tracing::debug!("delivery event dropped: the display is behind");
    }
}
