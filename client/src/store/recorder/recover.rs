//! Moving in what a recorder that died left in its inbox, and working out
//! provider and event key, which the writer does the same way.
//!
//! An inbox drops only what SQLite already holds, so after a long stall
//! (the store locked, the disk full) an orphan can be far larger than
//! memory. It is read one record at a time and moved in batches, each in
//! its own transaction that
//! also marks how far the inbox has been moved: a recovery cut short (the
//! lock taken, the disk full, the process killed) resumes after the last
//! batch instead of moving anything twice.

use portpreview_shared::provider::{event_key, event_key_of_start, event_type, Provider};

use crate::store::inbox::{self, Orphan};
use crate::store::{NewDelivery, Outcome, Store, StoreError};

/// The outcome of a request moved in from an orphan: its answer, if any,
/// left with the process that died. Without it the history would show the
/// request as still waiting, for good.
pub(crate) const ORPHANED: &str = "PortPreview stopped before it recorded the answer";

/// The outcome given to a request whose answer its recorder never stored.
pub(super) fn orphaned() -> Outcome {
    Outcome {
        error: Some(ORPHANED.into()),
        ..Outcome::default()
    }
}

/// Most requests moved in one transaction.
const BATCH: usize = 1000;

/// Most request body bytes moved in one transaction: with the record being
/// read, this bounds what recovery holds in memory.
const BATCH_BYTES: usize = 16 * 1024 * 1024;

/// What moving in dead recorders' inboxes did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Requests moved into the history.
    pub moved: usize,
    /// Requests, moved in or stored before, whose answers died with their
    /// recorder: the history says "PortPreview stopped before it recorded
    /// the answer", whatever their callers heard.
    pub answers_unknown: usize,
}

/// Moves the requests of inboxes whose recorders died into the history.
pub(crate) fn recover(store: &Store) -> Result<Recovered, StoreError> {
    recover_in_batches(store, BATCH, BATCH_BYTES)
}

/// [`recover`], with each transaction ending at `most` requests or once
/// its bodies reach `most_bytes`.
fn recover_in_batches(store: &Store, most: usize, most_bytes: usize) -> Result<Recovered, StoreError> {
    let mut recovered = Recovered::default();
    for orphan in inbox::orphans(store.path()) {
        let (moved, unreadable) = move_in(store, &orphan, most, most_bytes)?;
        recovered.moved += moved.requests;
        recovered.answers_unknown += moved.unanswered;
        // Requests it stored in SQLite itself whose answers died with it.
        recovered.answers_unknown += store.close_unanswered(&orphan.name, &orphaned())?;
        let name = orphan.name.clone();
        if unreadable > 0 {
            // The mark stays with the file's name: put back under it, the
            // file is moved in past what already was, never twice.
            let kept = orphan.set_aside().map_err(in_inbox("set aside", &name))?;
            tracing::warn!(
                "{unreadable} record(s) in history inbox {name} could not be read (damaged, or written by a later \
                 PortPreview); every request in it that could be read is in the history, and the file is kept as {}",
                kept.display()
            );
            continue;
        }
        // The mark outlives the file: should removing it fail, the next
        // open skips what was moved instead of moving it twice.
        if let Err(err) = orphan.remove() {
            // What it held is in the history all the same.
            tracing::warn!(
                "the deliveries left in history inbox {name} are in the history, but the file cannot be removed \
                 ({err}); it is looked at again at the next open"
            );
            continue;
        }
        store.forget_inbox(&name)?;
    }
    Ok(recovered)
}

/// An error `doing` something to the inbox `name`, told as one.
fn in_inbox<'a>(doing: &'static str, name: &'a str) -> impl FnOnce(std::io::Error) -> StoreError + 'a {
    move |source| StoreError::Inbox {
        doing,
        name: name.to_owned(),
        source,
    }
}

/// Requests moved in from one inbox.
#[derive(Default)]
struct Moved {
    /// Every one moved.
    requests: usize,
    /// Those whose answers the inbox did not hold.
    unanswered: usize,
}

/// Moves the requests of `orphan` that the history lacks, one batch per
/// transaction. Returns what was moved, and how many records could not be
/// read.
fn move_in(store: &Store, orphan: &Orphan, most: usize, most_bytes: usize) -> Result<(Moved, usize), StoreError> {
    let applied = store.inbox_applied(&orphan.name)?;
    // Kept by a recorder that stopped while the history refused writes.
    let mut answers = orphan.answers().map_err(in_inbox("read", &orphan.name))?;
    let mut requests = orphan.requests().map_err(in_inbox("read", &orphan.name))?;
    let mut batch: Vec<(u64, NewDelivery)> = Vec::new();
    let mut bytes = 0;
    let mut moved = Moved::default();
    loop {
        let next = requests.next().transpose().map_err(in_inbox("read", &orphan.name))?;
        let ended = next.is_none();
        if let Some((seq, mut delivery)) = next.filter(|(seq, _)| *seq > applied) {
            identify(&mut delivery, requests.key_fields());
            bytes += delivery.request_body.len();
            batch.push((seq, delivery));
        }
        let full = batch.len() >= most || bytes >= most_bytes;
        if let Some(newest) = batch.last().map(|(seq, _)| *seq).filter(|_| full || ended) {
            let orphaned = orphaned();
            store.write(|store| {
                for (seq, delivery) in &batch {
                    let row = store.insert_recorded_row(delivery)?;
                    store.outcome_row(row.id, answers.get(seq).unwrap_or(&orphaned))?;
                }
                store.mark_inbox_applied(&orphan.name, newest)
            })?;
            for (seq, _) in &batch {
                if answers.remove(seq).is_none() {
                    moved.unanswered += 1;
                }
            }
            moved.requests += batch.len();
            batch.clear();
            bytes = 0;
        }
        if ended {
            return Ok((moved, requests.unreadable()));
        }
    }
}

/// Fills in what the forwarding path left to the writer: detecting the
/// provider, the event key and the event's type means parsing the body,
/// which must not cost the forwarding path anything.
pub(super) fn identify(delivery: &mut NewDelivery, key_fields: &[String]) {
    let cut = (delivery.request_body.len() as u64) < delivery.request_body_size;
    if delivery.event_key.is_empty() {
        key(delivery, key_fields, cut);
    } else if delivery.event_type.is_none() {
        // Keyed before it came here (no tunnel's request is): typed alone.
        let provider = delivery.provider.as_deref().and_then(Provider::from_name);
        let typed = || event_type(provider, &delivery.request_headers, &delivery.request_body, !cut);
        delivery.event_type = std::panic::catch_unwind(std::panic::AssertUnwindSafe(typed)).unwrap_or_default();
    }
}

/// The provider, the event key and the event's type, from the request.
fn key(delivery: &mut NewDelivery, key_fields: &[String], cut: bool) {
    // The body is untrusted: should detection ever panic on it, that one
    // delivery goes without a key rather than the writer thread dying.
    // A body stored cut short keys by what its start holds: a provider ID
    // that comes first, as a Stripe event's does, still names the event.
    let detect = || match cut {
        true => event_key_of_start(&delivery.request_headers, &delivery.request_body, key_fields),
        false => event_key(&delivery.request_headers, &delivery.request_body, key_fields),
    };
    let Ok(key) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(detect)) else {
        // The query may hold a token: it is masked as on screen.
        let path = crate::render::mask::shown_path(&delivery.path, false);
        tracing::warn!(?path, "event key detection failed; delivery stored without a key");
        return;
    };
    if delivery.provider.is_none() {
        delivery.provider = key.provider.map(|p| p.name().to_owned());
    }
    delivery.event_key = key.key;
    delivery.event_key_source = key.source;
    delivery.event_type = key.event_type;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::inbox::Inbox;
    use crate::store::tests::{delivery, ScratchDir};
    use crate::store::ListQuery;

    #[test]
    fn requests_left_in_a_dead_recorders_inbox_are_moved_in_once() {
        let dir = ScratchDir::new("recorder-recover");
        let path = dir.0.join("history.db");
        let store = Store::open(&path).unwrap();
        {
            let mut inbox = Inbox::create(&path, &[]).unwrap();
            let mut github = delivery("", "/webhooks/github");
            github.provider = None;
            github.request_headers = vec![portpreview_shared::Header::new("x-github-delivery", "gh-1")];
            inbox.append(&mut delivery("evt_moved_before", "/a")).unwrap();
            inbox.append(&mut github).unwrap();
            // The first request reached SQLite just before the crash.
            store.write(|s| s.mark_inbox_applied(inbox.name(), 1)).unwrap();
            // Dropped without discard, as when its process is killed.
        }
        drop(store);
        let reopened = Store::open(&path).unwrap();
        let listed = reopened.list(&ListQuery::default()).unwrap();
        assert_eq!(listed.len(), 1, "only what SQLite lacked is moved in: {listed:?}");
        assert_eq!(listed[0].event_key, "gh-1", "keys are worked out as the writer would");
        assert_eq!(listed[0].provider.as_deref(), Some("github"));
        assert_eq!(
            (listed[0].status, listed[0].error.as_deref()),
            (None, Some(ORPHANED)),
            "not left waiting for an answer that died with its process"
        );
        assert!(inbox::orphans(&path).is_empty(), "the inbox is gone");
        assert_eq!(
            Store::open(&path).unwrap().list(&ListQuery::default()).unwrap().len(),
            1
        );
    }

    #[test]
    fn requests_a_dead_recorder_stored_without_their_answers_get_an_outcome_and_a_live_ones_keep_waiting() {
        let dir = ScratchDir::new("recorder-recover-unanswered");
        let path = dir.0.join("history.db");
        let store = Store::open(&path).unwrap();
        let live = Inbox::create(&path, &[]).unwrap();
        let dead = dead_inbox(&path, 0, 0);
        let stored = |key: &str, inbox: &str| {
            store
                .write(|s| {
                    let id = s.insert_request_row(&delivery(key, "/"))?;
                    s.note_unanswered_row(id, inbox)?;
                    Ok(id)
                })
                .unwrap()
        };
        let cut_off = stored("evt_cut_off", &dead);
        let in_flight = stored("evt_in_flight", live.name());
        let answered = store.insert_request(&delivery("evt_answered", "/")).unwrap();
        store
            .record_outcome(
                answered,
                &Outcome {
                    status: Some(200),
                    ..Outcome::default()
                },
            )
            .unwrap();
        drop(store);

        let reopened = Store::open(&path).unwrap();
        let outcome = |id| reopened.get(id).unwrap().unwrap().outcome;
        let cut_off = outcome(cut_off).expect("an outcome for the request its recorder died with");
        assert_eq!((cut_off.status, cut_off.error.as_deref()), (None, Some(ORPHANED)));
        assert_eq!(
            outcome(in_flight),
            None,
            "a live recorder's request still waits for its answer"
        );
        assert_eq!(outcome(answered).and_then(|o| o.status), Some(200));
        assert!(inbox::orphans(&path).is_empty(), "the dead inbox is gone");
    }

    /// A history held open (the TUI) takes in what a tunnel killed after
    /// it opened left in its inbox, when asked, and only once.
    #[test]
    fn a_reader_held_open_takes_in_what_a_recorder_that_died_since_left() {
        let dir = ScratchDir::new("recorder-recover-later");
        let path = dir.0.join("history.db");
        drop(Store::open(&path).unwrap());
        let reader = Store::open_existing(&path).unwrap();
        assert!(!reader.take_in_orphans(), "nothing to take in");
        let live = Inbox::create(&path, &[]).unwrap();
        dead_inbox(&path, 2, 10);
        assert!(reader.list(&ListQuery::default()).unwrap().is_empty());
        assert!(reader.take_in_orphans());
        let listed = reader.list(&ListQuery::default()).unwrap();
        assert_eq!(listed.len(), 2);
        assert!(listed.iter().all(|d| d.error.as_deref() == Some(ORPHANED)));
        assert!(!reader.take_in_orphans(), "moved once; a live inbox is no orphan");
        drop(live);
    }

    /// An inbox left by a recorder that died, holding `count` requests to
    /// `/r/0`, `/r/1`… each with a body of `body` bytes. Returns its name.
    fn dead_inbox(path: &std::path::Path, count: usize, body: usize) -> String {
        let mut inbox = Inbox::create(path, &[]).unwrap();
        for n in 0..count {
            let mut d = delivery(&format!("evt_{n}"), &format!("/r/{n}"));
            d.request_body = vec![b'x'; body];
            inbox.append(&mut d).unwrap();
        }
        inbox.name().to_owned()
        // Dropped without discard, as when its process is killed.
    }

    /// Makes every transaction that stores a request to `path` fail, as a
    /// full disk would.
    fn refuse(store: &Store, path: &str) {
        let sql = format!(
            "CREATE TEMP TRIGGER refuse BEFORE INSERT ON deliveries WHEN NEW.path = '{path}'
             BEGIN SELECT RAISE(ABORT, 'refused'); END"
        );
        store.conn.execute_batch(&sql).unwrap();
    }

    /// The paths of every stored delivery, sorted.
    fn stored_paths(store: &Store) -> Vec<String> {
        let mut paths: Vec<String> = store
            .list(&ListQuery::default())
            .unwrap()
            .into_iter()
            .map(|s| s.path)
            .collect();
        paths.sort_unstable();
        paths
    }

    #[test]
    fn a_large_inbox_moves_in_a_batch_per_transaction_and_resumes_after_the_last_one() {
        let dir = ScratchDir::new("recorder-recover-batches");
        let path = dir.0.join("history.db");
        let store = Store::open(&path).unwrap();
        let name = dead_inbox(&path, 95, 16);
        refuse(&store, "/r/35");
        recover_in_batches(&store, 10, usize::MAX).expect_err("the fourth batch is refused");
        assert_eq!(
            stored_paths(&store).len(),
            30,
            "the three batches before it stay committed"
        );
        assert_eq!(
            store.inbox_applied(&name).unwrap(),
            30,
            "each batch marks how far it got"
        );
        assert_eq!(inbox::orphans(&path).len(), 1, "the inbox stays for another try");

        store.conn.execute_batch("DROP TRIGGER refuse").unwrap();
        assert_eq!(
            recover_in_batches(&store, 10, usize::MAX).unwrap(),
            Recovered {
                moved: 65,
                answers_unknown: 65
            },
            "only the rest moves"
        );
        let mut expected: Vec<String> = (0..95).map(|n| format!("/r/{n}")).collect();
        expected.sort_unstable();
        assert_eq!(stored_paths(&store), expected, "every request once");
        assert!(inbox::orphans(&path).is_empty(), "the inbox is gone");
        assert_eq!(store.inbox_applied(&name).unwrap(), 0, "and so is its mark");
    }

    #[test]
    fn a_batch_also_ends_once_its_bodies_reach_their_budget() {
        let dir = ScratchDir::new("recorder-recover-bytes");
        let path = dir.0.join("history.db");
        let store = Store::open(&path).unwrap();
        dead_inbox(&path, 6, 1000);
        refuse(&store, "/r/3");
        recover_in_batches(&store, usize::MAX, 2000).expect_err("the second batch is refused");
        assert_eq!(stored_paths(&store), ["/r/0", "/r/1"], "two bodies fill a batch");
    }
}
