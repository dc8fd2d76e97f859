//! The history's side of every frame sent: the requests recorded so far
//! are put on disk before any answer leaves, and a disk that stops taking
//! them is told of once.

use super::outage::Outage;
use crate::events::{report, Events, TunnelEvent};
use crate::store::recorder::{RecordError, Recorder};

/// Puts the inbox on disk before a frame is sent, for a tunnel that
/// records; does nothing for one that does not.
pub(super) struct Persist {
    recorder: Option<Recorder>,
    events: Events,
    failing: Outage,
}

impl Persist {
    pub(super) fn new(recorder: Option<Recorder>, events: Events) -> Self {
        Self {
            recorder,
            events,
            failing: Outage::default(),
        }
    }

    /// Puts every request recorded so far on disk, so no caller hears back
    /// about a request the history could still lose. A failure costs the
    /// history, never the answer. A full disk fails every write: the
    /// display is told once, and once when writes work again.
    pub(super) fn requests(&self) {
        let Some(recorder) = &self.recorder else { return };
        if let Some(text) = inbox_news(recorder.flush(), &self.failing) {
            report(&self.events, TunnelEvent::Notice { text });
        }
    }
}

/// What to tell of one write of the inbox: the first that fails, and the
/// first that works after failures; nothing of the others.
fn inbox_news(written: Result<bool, RecordError>, failing: &Outage) -> Option<String> {
    match written {
        // Nothing to write shows nothing of the disk.
        Ok(true) if failing.ended() => {
            tracing::info!("requests are written to the history inbox again");
            Some("the history inbox takes writes again".into())
        }
        Ok(_) => None,
        Err(err) if !failing.began() => {
            tracing::debug!(%err, "requests not written to the history inbox");
            None
        }
        Err(err) => {
            // Shown by the display, in the TUI too; the log keeps a note.
            tracing::info!(%err, "requests not written to the history inbox; forwarding goes on");
            Some(err.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full disk fails every write of the inbox: told once, and once
    /// more when writes work again; a flush with nothing to write (it
    /// succeeds whatever the disk) says nothing of it.
    #[test]
    fn an_inbox_that_cannot_be_written_is_told_once_per_change() {
        let full = || Err(RecordError::Unsaved(std::io::Error::from_raw_os_error(28)));
        let failing = Outage::default();
        let told: Vec<Option<String>> = [full(), full(), Ok(false), full(), Ok(true), Ok(true)]
            .into_iter()
            .map(|written| inbox_news(written, &failing))
            .collect();
        assert!(
            told[0]
                .as_deref()
                .is_some_and(|t| t.starts_with("cannot write the history inbox (No space left")),
            "{told:?}"
        );
        assert_eq!(told[1..4], [None, None, None]);
        assert_eq!(told[4].as_deref(), Some("the history inbox takes writes again"));
        assert_eq!(told[5], None);
    }
}
