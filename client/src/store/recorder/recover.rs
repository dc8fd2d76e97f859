//! Moving in what a recorder that died left in its inbox, and working out
//! provider and event key, which the writer does the same way.

use portpreview_shared::provider::event_key;

use crate::store::inbox;
use crate::store::{NewDelivery, Store, StoreError};

/// Moves the requests of inboxes whose recorders died into the history.
/// Returns how many were moved.
pub(crate) fn recover(store: &Store) -> Result<usize, StoreError> {
    let mut moved = 0;
    for mut orphan in inbox::orphans(store.path()) {
        let mut leftovers = orphan.read()?;
        let applied = store.inbox_applied(&orphan.name)?;
        leftovers.requests.retain(|(seq, _)| *seq > applied);
        for (_, delivery) in &mut leftovers.requests {
            identify(delivery, &leftovers.key_fields);
        }
        if let Some(newest) = leftovers.requests.last().map(|(seq, _)| *seq) {
            store.write(|store| {
                for (_, delivery) in &leftovers.requests {
                    store.insert_recorded_row(delivery)?;
                }
                store.mark_inbox_applied(&orphan.name, newest)
            })?;
        }
        moved += leftovers.requests.len();
        let name = orphan.name.clone();
        // The mark outlives the file: should removing it fail, the next
        // open skips what was moved instead of moving it twice.
        orphan.remove()?;
        store.forget_inbox(&name)?;
    }
    Ok(moved)
}

/// Fills in what the forwarding path left to the writer: detecting the
/// provider and the event key means parsing the body, which must not cost
/// the forwarding path anything.
pub(super) fn identify(delivery: &mut NewDelivery, key_fields: &[String]) {
    if !delivery.event_key.is_empty() {
        return;
    }
    // The body is untrusted: should detection ever panic on it, that one
    // delivery goes without a key rather than the writer thread dying.
    let detect = || event_key(&delivery.request_headers, &delivery.request_body, key_fields);
    let Ok(key) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(detect)) else {
        tracing::warn!(path = ?delivery.path, "event key detection failed; delivery stored without a key");
        return;
    };
    if delivery.provider.is_none() {
        delivery.provider = key.provider.map(|p| p.name().to_owned());
    }
    delivery.event_key = key.key;
    delivery.event_key_source = key.source;
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
            inbox.append(&delivery("evt_moved_before", "/a")).unwrap();
            inbox.append(&github).unwrap();
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
        assert!(inbox::orphans(&path).is_empty(), "the inbox is gone");
        assert_eq!(
            Store::open(&path).unwrap().list(&ListQuery::default()).unwrap().len(),
            1
        );
    }
}
