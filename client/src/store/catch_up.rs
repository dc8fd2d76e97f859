//! A reader's wait for the tunnels' writers to store what their callers
//! have already heard back about (see [`super::inbox::appended_by_live_recorders`]).

use std::time::{Duration, Instant};

use super::inbox::{appended_by_live_recorders, left_by_dead_recorders, Appended};
use super::Store;

/// Longest a reader waits. A writer keeps up within milliseconds; one that
/// does not (another process holds the lock, the disk is full) must not
/// keep `history` from showing what is there.
const LIMIT: Duration = Duration::from_secs(1);

/// Longest a reader waits, past the requests, for answers its callers may
/// already have: those the tunnel stores just after. An answer a handler
/// has not given yet costs every reader this much, so it is kept short.
const ANSWERS_LIMIT: Duration = Duration::from_millis(300);

/// Pause between looks at how far a writer has come.
const POLL: Duration = Duration::from_millis(2);

/// Pause between looks at what dead tunnels' inboxes still hold, each of
/// which reads every inbox's record heads.
const ORPHANS_POLL: Duration = Duration::from_millis(20);

impl Store {
    /// Returns once every request that live tunnels have appended to their
    /// inboxes is in the database, or after [`LIMIT`]; then once the
    /// requests of theirs stored without an answer have one, or after
    /// [`ANSWERS_LIMIT`] more, within the same [`LIMIT`] in all. Returns
    /// how many requests were still not stored when the wait ended in the
    /// inboxes whose writers, still alive, stored none during it: held up
    /// (another process holding the write lock, a full disk), not merely
    /// behind, as a writer under a burst of requests is.
    pub(super) fn catch_up_with_recorders(&self) -> u64 {
        let appended = appended_by_live_recorders(&self.path);
        if appended.is_empty() {
            return 0;
        }
        let applied_before: Vec<Option<u64>> = (appended.iter())
            .map(|Appended { name, .. }| self.inbox_applied(name).ok())
            .collect();
        let deadline = Instant::now() + LIMIT;
        for Appended { name, newest } in &appended {
            // An error is left for the reading that follows to report.
            while self.inbox_applied(name).is_ok_and(|applied| applied < *newest) && Instant::now() < deadline {
                std::thread::sleep(POLL);
            }
        }
        let deadline = deadline.min(Instant::now() + ANSWERS_LIMIT);
        for Appended { name, .. } in &appended {
            let Ok(Some(newest)) = self.newest_unanswered(name) else {
                continue;
            };
            while self.any_unanswered_up_to(name, newest).is_ok_and(|any| any) && Instant::now() < deadline {
                std::thread::sleep(POLL);
            }
        }
        // Requests are numbered one after another in each inbox.
        let stuck: Vec<(&str, u64)> = (appended.iter().zip(applied_before))
            .filter_map(|(Appended { name, newest }, before)| match self.inbox_applied(name) {
                Ok(applied) if Some(applied) == before && applied < *newest => Some((name.as_str(), newest - applied)),
                _ => None,
            })
            .collect();
        if stuck.is_empty() {
            return 0;
        }
        // A recorder that died meanwhile (killed) is no writer held up:
        // what its inbox holds is moved in by whoever writes next.
        let alive = appended_by_live_recorders(&self.path);
        (stuck.into_iter())
            .filter(|(name, _)| alive.iter().any(|live| live.name == *name))
            .map(|(_, waiting)| waiting)
            .sum()
    }

    /// How many requests the inboxes of tunnels that died still hold that
    /// the history does not, after up to [`LIMIT`] of looks: none once
    /// opening moved them in. The lock that kept opening from it may be a
    /// tunnel's batch, over in milliseconds, or another reader moving the
    /// same inbox in, so it is tried again meanwhile; what is left at the
    /// end waits for a lock held longer (another process's transaction).
    pub(super) fn left_in_orphans(&self) -> u64 {
        let deadline = Instant::now() + LIMIT;
        loop {
            let left: u64 = left_by_dead_recorders(&self.path)
                .iter()
                .filter_map(|Appended { name, newest }| Some(newest.saturating_sub(self.inbox_applied(name).ok()?)))
                .sum();
            if left == 0 || Instant::now() >= deadline {
                return left;
            }
            std::thread::sleep(ORPHANS_POLL);
            self.take_in_orphans();
        }
    }
}
