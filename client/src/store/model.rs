//! The records the history store holds and hands out.

use portpreview_shared::provider::{self, Provider};
use portpreview_shared::Header;
use serde::{Deserialize, Serialize};

/// The request half of a delivery, written before its answer goes back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NewDelivery {
    /// When the request reached the client, in milliseconds since the epoch.
    pub received_at_ms: i64,
    /// Public URL of the tunnel that carried it (empty for replays).
    pub tunnel_url: String,
    /// Local target it was forwarded to, e.g. `http://127.0.0.1:3000`.
    pub target: String,
    /// HTTP method.
    pub method: String,
    /// Path and query exactly as the caller sent them.
    pub path: String,
    /// Request headers exactly as received, in order.
    pub request_headers: Vec<Header>,
    /// Request body (at most the store's body limit).
    #[serde(with = "serde_bytes")]
    pub request_body: Vec<u8>,
    /// Size of the whole request body, even when `request_body` was cut.
    pub request_body_size: u64,
    /// Detected provider (`stripe`, `github`, …), if any.
    pub provider: Option<String>,
    /// Event identity shared by retries of the same event.
    pub event_key: String,
    /// How the key was made: `header:X-GitHub-Delivery`, `body:/id`, `sha256:body`…
    pub event_key_source: String,
    /// Delivery this one replays, when it was sent by `replay`.
    pub replay_of: Option<i64>,
    /// The handler got the caller's `Host` header rather than its own
    /// address (`http --host-header preserve`); replays send it too.
    #[serde(default)]
    pub host_preserved: bool,
    /// What kind of event it carries (`invoice.paid`), when it names one.
    /// Worked out by the history's writer from the request, so never in a
    /// tunnel's inbox, whose layout older versions read too.
    #[serde(skip)]
    pub event_type: Option<String>,
}

impl NewDelivery {
    /// True when the stored request body is shorter than what was received.
    pub fn request_truncated(&self) -> bool {
        (self.request_body.len() as u64) < self.request_body_size
    }

    /// What, beside the event key, tells this delivery's event from another
    /// with the same key: for a provider's ID, the provider and GitHub's
    /// hook ID (`stripe:`, `github:123`); for a key hashed from the
    /// content, the method and path it was sent to; empty when nothing
    /// does. Schema version 15 scopes rows in SQL the same way.
    pub fn event_scope(&self) -> String {
        let provider = self.provider.as_deref().and_then(Provider::from_name);
        let hook = provider::event_scope(provider, &self.request_headers);
        // A hash names what was sent, not an event: the same body sent to
        // two endpoints is two events, and only a resend to one is a retry,
        // whichever hook sent it. The query is left out, as some senders
        // number their attempts there.
        if self.event_key_source.starts_with("sha256:") {
            let path = self.path.split_once('?').map_or(self.path.as_str(), |(path, _)| path);
            let sent_to = format!("{} {path}", self.method);
            return match hook {
                Some(hook) => format!("{hook} {sent_to}"),
                None => sent_to,
            };
        }
        // Two providers' IDs may be spelled alike (Stripe's and Paddle's
        // both start `evt_`); neither event is a retry of the other.
        match &self.provider {
            Some(name) if !self.event_key.is_empty() => format!("{name}:{}", hook.unwrap_or_default()),
            _ => hook.unwrap_or_default(),
        }
    }
}

/// The size recorded for a body cut off on its way with no size declared:
/// one byte more than `arrived`, so it reads as cut (replay and export
/// refuse it) while its true size stays unknown.
pub fn size_past_cut(arrived: u64) -> u64 {
    arrived + 1
}

/// Whether `size` is [`size_past_cut`] of the `stored` bytes: a body cut
/// off on its way rather than cut at the store's limit.
pub fn size_unknown_past(stored: u64, size: u64) -> bool {
    size == size_past_cut(stored)
}

/// The answer half of a delivery: the local response or the error.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Status the caller got; `None` when forwarding failed before a response.
    pub status: Option<u16>,
    /// Response headers in order.
    pub response_headers: Vec<Header>,
    /// Response body (at most the store's body limit).
    #[serde(with = "serde_bytes")]
    pub response_body: Vec<u8>,
    /// Size of the whole response body.
    pub response_body_size: u64,
    /// Time from request received to response complete, in milliseconds;
    /// unknown when the process that forwarded it died before the answer.
    pub duration_ms: Option<f64>,
    /// What went wrong, e.g. "connection refused by 127.0.0.1:3000".
    pub error: Option<String>,
}

impl Outcome {
    /// The handler answered 2xx: the caller took the delivery as done.
    pub fn succeeded(&self) -> bool {
        matches!(self.status, Some(200..=299))
    }
}

/// One stored delivery, whole.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// Row id, the `#12` users see and pass to `show` and `replay`.
    pub id: i64,
    /// The request half.
    pub request: NewDelivery,
    /// The answer half; `None` while still in flight or if the client died first.
    pub outcome: Option<Outcome>,
    /// How many deliveries share this event key and scope (see
    /// [`NewDelivery::event_scope`]).
    pub delivery_count: i64,
}

/// One row of a history listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Row id.
    pub id: i64,
    /// Milliseconds since the epoch.
    pub received_at_ms: i64,
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Status, `None` on error or while in flight.
    pub status: Option<u16>,
    /// Duration in milliseconds, `None` while in flight.
    pub duration_ms: Option<f64>,
    /// Detected provider.
    pub provider: Option<String>,
    /// What kind of event it carries (`invoice.paid`), when it names one.
    pub event_type: Option<String>,
    /// Event key.
    pub event_key: String,
    /// How the event key was made.
    pub event_key_source: String,
    /// What tells this event from another with the same key (GitHub's hook
    /// ID); empty when nothing does.
    pub event_scope: String,
    /// Deliveries sharing the event key and scope.
    pub delivery_count: i64,
    /// Error text, if forwarding failed.
    pub error: Option<String>,
    /// Delivery this one replays, if any.
    pub replay_of: Option<i64>,
}

impl Summary {
    /// True while nothing of its answer is recorded: in flight, as far as
    /// the history knows.
    pub fn is_waiting(&self) -> bool {
        self.status.is_none() && self.duration_ms.is_none() && self.error.is_none()
    }
}

/// One `replay` run against a delivery: its settings and its verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayRun {
    /// Row id (0 before it is stored).
    pub id: i64,
    /// Delivery that was replayed.
    pub delivery_id: i64,
    /// When the run started, in milliseconds since the epoch.
    pub started_at_ms: i64,
    /// Attempts asked for (`--times`); a run stopped early sent fewer,
    /// as its report says.
    pub times: u32,
    /// Attempts kept in flight at once.
    pub concurrency: u32,
    /// `Some(true)` idempotent, `Some(false)` not, `None` inconclusive.
    pub idempotent: Option<bool>,
    /// One line a user reads in the TUI, e.g. "✗ state changed on attempts 2–10".
    pub summary: String,
    /// The whole report as the JSON `replay --json` prints.
    pub report_json: String,
}

/// What `prune` removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Deliveries received before the cut-off, not counting replay attempts.
    pub deliveries: usize,
    /// The attempts `replay` sent of those deliveries, before the cut-off
    /// or after it: without their original they would point at nothing.
    pub replay_attempts: usize,
}
