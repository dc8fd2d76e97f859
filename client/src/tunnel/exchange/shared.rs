//! What every exchange of a tunnel shares: the forwarder, the recorder and
//! the policies the user chose.

use std::sync::Mutex;
use std::time::Duration;

use portpreview_shared::message::Header;

use crate::events::{report, Events, TunnelEvent};
use crate::forward::Forwarder;
use crate::store::recorder::{RecordError, Recorder};
use crate::store::MAX_STORED_BODY;
use crate::tunnel::body::Keep;
use crate::tunnel::outage::Outage;
use crate::tunnel::Stop;

/// How the Host header reaches the local handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HostHeader {
    /// Set Host to the local target (what most local servers expect).
    Rewrite,
    /// Keep the Host the caller sent.
    Preserve,
}

/// What every exchange of a tunnel shares.
pub struct Shared {
    /// The local target's client.
    pub forwarder: Forwarder,
    /// The history writer, when recording.
    pub recorder: Option<Recorder>,
    /// Where deliveries are reported.
    pub events: Events,
    /// Host header policy.
    pub host_header: HostHeader,
    /// How long the local handler may take to answer.
    pub local_timeout: Duration,
    /// Public URL of the tunnel, kept with each delivery.
    pub public_url: Mutex<String>,
    /// How the user stops the tunnel: an exchange abandoned once they
    /// asked says so in the history.
    pub stop: Stop,
    /// Deliveries cannot be recorded (the inbox cannot be written: a full
    /// disk), told once, not per delivery.
    pub not_recording: Outage,
    /// The relay runs in this process, and pauses with it.
    pub relay_in_process: bool,
}

impl Shared {
    /// Whether a request with `headers` goes to the handler with the
    /// caller's Host: the history records the same answer, for replays.
    pub(super) fn preserves_host(&self, headers: &[Header]) -> bool {
        self.host_header == HostHeader::Preserve && headers.iter().any(|h| h.name.eq_ignore_ascii_case("host"))
    }

    /// Tells the display that deliveries are not recorded, once until
    /// recording works again; the log keeps one note per change too.
    pub(super) fn recording_failed(&self, err: &RecordError) {
        if !self.not_recording.began() {
            tracing::debug!(%err, "delivery not recorded");
            return;
        }
        // Shown by the display, in the TUI too; the log keeps a note.
        tracing::info!(%err, "deliveries are not recorded; forwarding goes on");
        report(
            &self.events,
            TunnelEvent::NotRecording {
                reason: Some(err.to_string()),
            },
        );
    }

    /// Tells the display that deliveries are recorded again, if they were not.
    pub(super) fn recording_worked(&self) {
        if self.not_recording.ended() {
            tracing::info!("deliveries are recorded again");
            report(&self.events, TunnelEvent::NotRecording { reason: None });
        }
    }

    /// How much of each body the history keeps: nothing when nothing is recorded.
    pub(super) fn keep(&self) -> Keep {
        match &self.recorder {
            Some(recorder) => Keep::new(MAX_STORED_BODY, recorder.held_budget()),
            None => Keep::default(),
        }
    }
}
