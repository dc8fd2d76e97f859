//! What a running tunnel reports to whoever shows it (TUI or log lines).

use std::time::Duration;

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
