//! A reader's wait for the tunnels' writers to store what their callers
//! have already heard back about (see [`super::inbox::appended_by_live_recorders`]).

use std::time::{Duration, Instant};

use super::inbox::{appended_by_live_recorders, Appended};
use super::Store;

/// Longest a reader waits. A writer keeps up within milliseconds; one that
/// does not (another process holds the lock, the disk is full) must not
/// keep `history` from showing what is there.
const LIMIT: Duration = Duration::from_secs(1);

/// Pause between looks at how far a writer has come.
const POLL: Duration = Duration::from_millis(2);

impl Store {
    /// Returns once every request that live tunnels have appended to their
    /// inboxes is in the database, or after [`LIMIT`].
    pub(super) fn catch_up_with_recorders(&self) {
        let deadline = Instant::now() + LIMIT;
        for Appended { name, newest } in appended_by_live_recorders(&self.path) {
            // An error is left for the reading that follows to report.
            while self.inbox_applied(&name).is_ok_and(|applied| applied < newest) && Instant::now() < deadline {
                std::thread::sleep(POLL);
            }
        }
    }
}
