//! Where the TUI reads history from: the store, or a fake in tests.

use std::cell::{Cell, Ref, RefCell};
use std::path::Path;

use crate::store::{Delivery, ListQuery, ReplayRun, Store, StoreError, Summary};

/// Read access to the history, as the browser needs it.
///
/// The TUI reads through this trait so its state machine can be driven in
/// tests from rows in memory, without SQLite or a terminal.
pub trait HistorySource {
    /// Rows matching `query`, newest first.
    fn list(&self, query: &ListQuery) -> anyhow::Result<Vec<Summary>>;
    /// How many rows match `query` (its limit and cursor ignored).
    fn count(&self, query: &ListQuery) -> anyhow::Result<u64>;
    /// Ids of the rows that end each full page of `page` rows matching
    /// `query`, newest first (its limit ignored).
    fn page_ends(&self, query: &ListQuery, page: usize) -> anyhow::Result<Vec<i64>>;
    /// One delivery whole; `None` only when the history holds no such id
    /// (a damaged one is an error).
    fn get(&self, id: i64) -> anyhow::Result<Option<Delivery>>;
    /// Its place among its event's deliveries: 2 for the first retry.
    fn delivery_number(&self, id: i64) -> anyhow::Result<i64>;
    /// How many deliveries share this event key and scope.
    fn event_count(&self, event_key: &str, event_scope: &str) -> anyhow::Result<i64>;
    /// Replay runs of one delivery, with their verdicts.
    fn replay_runs(&self, delivery_id: i64) -> anyhow::Result<Vec<ReplayRun>>;
    /// Changes whenever someone else writes to the history.
    fn data_version(&self) -> anyhow::Result<i64>;
    /// The smallest delivery id held, `None` when empty: it moves on when
    /// another process prunes the oldest deliveries.
    fn oldest_id(&self) -> anyhow::Result<Option<i64>>;
    /// Changes when the history is another file than before (see
    /// [`FollowedStore`]): nothing read earlier holds, ids included.
    fn generation(&self) -> u64 {
        0
    }
    /// True while the file read from is no longer at the history's path
    /// and none has taken its place: what is shown is what it held.
    fn orphaned(&self) -> bool {
        false
    }
    /// Moves in what tunnels killed since left in their inboxes; true when
    /// that changed the history.
    fn take_in_orphans(&self) -> bool {
        false
    }
    /// True when the history could be opened for reading only (a CI job's
    /// artifact, a file of another user's): replays are sent, not kept.
    fn read_only(&self) -> bool {
        false
    }
}

/// A history as opened: a file that is another one later goes unnoticed
/// (see [`FollowedStore`]).
impl HistorySource for Store {
    fn list(&self, query: &ListQuery) -> anyhow::Result<Vec<Summary>> {
        Ok(Store::list(self, query)?)
    }

    fn count(&self, query: &ListQuery) -> anyhow::Result<u64> {
        Ok(Store::count(self, query)?)
    }

    fn page_ends(&self, query: &ListQuery, page: usize) -> anyhow::Result<Vec<i64>> {
        Ok(Store::page_ends(self, query, page)?)
    }

    fn get(&self, id: i64) -> anyhow::Result<Option<Delivery>> {
        Ok(Store::lookup(self, id)?)
    }

    fn delivery_number(&self, id: i64) -> anyhow::Result<i64> {
        Ok(Store::delivery_number(self, id)?)
    }

    fn event_count(&self, event_key: &str, event_scope: &str) -> anyhow::Result<i64> {
        Ok(Store::event_count(self, event_key, event_scope)?)
    }

    fn replay_runs(&self, delivery_id: i64) -> anyhow::Result<Vec<ReplayRun>> {
        Ok(Store::replay_runs(self, delivery_id)?)
    }

    fn data_version(&self) -> anyhow::Result<i64> {
        Ok(Store::data_version(self)?)
    }

    fn take_in_orphans(&self) -> bool {
        Store::take_in_orphans(self)
    }

    fn oldest_id(&self) -> anyhow::Result<Option<i64>> {
        Ok(Store::oldest_id(self)?)
    }
}

/// The history at a path, opened again once the file there is another:
/// deleted while a tunnel ran (which starts a new one there), or another
/// history moved over it. The TUI then shows what `history` would list,
/// not the file it first opened, whose ids now name other deliveries.
pub struct FollowedStore {
    store: RefCell<Store>,
    /// How the history was opened, to open it again alike.
    open: fn(&Path) -> Result<Store, StoreError>,
    /// Counts the reopenings: the source's generation.
    reopened: Cell<u64>,
}

impl FollowedStore {
    /// Follows `store`, opened with `open`.
    pub fn new(store: Store, open: fn(&Path) -> Result<Store, StoreError>) -> Self {
        Self {
            store: RefCell::new(store),
            open,
            reopened: Cell::new(0),
        }
    }

    /// The store for the file at the path now. While what is there cannot
    /// be opened yet (a tunnel has not started the new one), the old one
    /// stays.
    fn current(&self) -> Ref<'_, Store> {
        if self.store.borrow().replaced() {
            let path = self.store.borrow().path().to_path_buf();
            if let Ok(store) = (self.open)(&path) {
                *self.store.borrow_mut() = store;
                self.reopened.set(self.reopened.get() + 1);
            }
        }
        self.store.borrow()
    }
}

impl HistorySource for FollowedStore {
    fn list(&self, query: &ListQuery) -> anyhow::Result<Vec<Summary>> {
        Ok(self.current().list(query)?)
    }

    fn count(&self, query: &ListQuery) -> anyhow::Result<u64> {
        Ok(self.current().count(query)?)
    }

    fn page_ends(&self, query: &ListQuery, page: usize) -> anyhow::Result<Vec<i64>> {
        Ok(self.current().page_ends(query, page)?)
    }

    fn get(&self, id: i64) -> anyhow::Result<Option<Delivery>> {
        Ok(self.current().lookup(id)?)
    }

    fn delivery_number(&self, id: i64) -> anyhow::Result<i64> {
        Ok(self.current().delivery_number(id)?)
    }

    fn event_count(&self, event_key: &str, event_scope: &str) -> anyhow::Result<i64> {
        Ok(self.current().event_count(event_key, event_scope)?)
    }

    fn replay_runs(&self, delivery_id: i64) -> anyhow::Result<Vec<ReplayRun>> {
        Ok(self.current().replay_runs(delivery_id)?)
    }

    fn data_version(&self) -> anyhow::Result<i64> {
        Ok(self.current().data_version()?)
    }

    fn oldest_id(&self) -> anyhow::Result<Option<i64>> {
        Ok(self.current().oldest_id()?)
    }

    fn generation(&self) -> u64 {
        drop(self.current());
        self.reopened.get()
    }

    fn orphaned(&self) -> bool {
        self.current().replaced()
    }

    fn take_in_orphans(&self) -> bool {
        self.current().take_in_orphans()
    }

    fn read_only(&self) -> bool {
        self.current().is_read_only()
    }
}

/// An in-memory history for unit tests: rows kept newest first.
#[cfg(test)]
#[derive(Default)]
pub struct MemorySource {
    /// Whole deliveries, any order.
    pub deliveries: std::cell::RefCell<Vec<Delivery>>,
    /// Replay runs of every delivery.
    pub runs: Vec<ReplayRun>,
    /// How many `list` calls were made (to check paging stays lazy).
    pub list_calls: std::cell::Cell<usize>,
    /// How many deliveries were read whole (to check an open one is read
    /// once per tick, however many events touch it).
    pub get_calls: std::cell::Cell<usize>,
    /// What [`HistorySource::generation`] says.
    pub generation: std::cell::Cell<u64>,
    /// What [`HistorySource::read_only`] says.
    pub read_only: bool,
}

#[cfg(test)]
impl MemorySource {
    /// `n` deliveries with ids 1..=n, paths `/hook/<id>`.
    pub fn with_rows(n: i64) -> Self {
        let source = Self::default();
        for id in 1..=n {
            source.push(test_delivery(id));
        }
        source
    }

    /// Adds a delivery.
    pub fn push(&self, delivery: Delivery) {
        self.deliveries.borrow_mut().push(delivery);
    }

    fn matching(&self, query: &ListQuery) -> Vec<Summary> {
        let mut rows: Vec<Summary> = self
            .deliveries
            .borrow()
            .iter()
            .filter(|d| query.search.as_deref().is_none_or(|s| d.request.path.contains(s)))
            .map(summary_of)
            .collect();
        rows.sort_by_key(|r| std::cmp::Reverse(r.id));
        rows
    }
}

#[cfg(test)]
impl HistorySource for MemorySource {
    fn list(&self, query: &ListQuery) -> anyhow::Result<Vec<Summary>> {
        self.list_calls.set(self.list_calls.get() + 1);
        let rows = self.matching(query).into_iter();
        let rows = rows.filter(|r| query.before_id.is_none_or(|b| r.id < b));
        let rows = rows.filter(|r| query.after_id.is_none_or(|a| r.id > a));
        Ok(rows.take(query.limit.unwrap_or(usize::MAX)).collect())
    }

    fn page_ends(&self, query: &ListQuery, page: usize) -> anyhow::Result<Vec<i64>> {
        let rows = self.matching(query).into_iter();
        let rows = rows.filter(|r| query.before_id.is_none_or(|b| r.id < b));
        Ok(rows.skip(page - 1).step_by(page).map(|r| r.id).collect())
    }

    fn count(&self, query: &ListQuery) -> anyhow::Result<u64> {
        let rows = self.matching(query).into_iter();
        let rows = rows.filter(|r| query.before_id.is_none_or(|b| r.id < b));
        let rows = rows.filter(|r| query.after_id.is_none_or(|a| r.id > a));
        Ok(rows.take(query.limit.unwrap_or(usize::MAX)).count() as u64)
    }

    fn get(&self, id: i64) -> anyhow::Result<Option<Delivery>> {
        self.get_calls.set(self.get_calls.get() + 1);
        Ok(self.deliveries.borrow().iter().find(|d| d.id == id).cloned())
    }

    fn delivery_number(&self, id: i64) -> anyhow::Result<i64> {
        let deliveries = self.deliveries.borrow();
        let Some(this) = deliveries.iter().find(|d| d.id == id) else {
            return Ok(0);
        };
        let same_event = |d: &&Delivery| d.request.event_key == this.request.event_key && d.request.replay_of.is_none();
        Ok(deliveries.iter().filter(same_event).filter(|d| d.id <= id).count() as i64)
    }

    fn event_count(&self, event_key: &str, _event_scope: &str) -> anyhow::Result<i64> {
        let deliveries = self.deliveries.borrow();
        let same_event = |d: &&Delivery| d.request.event_key == event_key && d.request.replay_of.is_none();
        Ok(deliveries.iter().filter(same_event).count() as i64)
    }

    fn replay_runs(&self, delivery_id: i64) -> anyhow::Result<Vec<ReplayRun>> {
        Ok(self
            .runs
            .iter()
            .filter(|r| r.delivery_id == delivery_id)
            .cloned()
            .collect())
    }

    fn data_version(&self) -> anyhow::Result<i64> {
        Ok(self.deliveries.borrow().len() as i64)
    }

    fn oldest_id(&self) -> anyhow::Result<Option<i64>> {
        Ok(self.deliveries.borrow().iter().map(|d| d.id).min())
    }

    fn generation(&self) -> u64 {
        self.generation.get()
    }

    fn read_only(&self) -> bool {
        self.read_only
    }
}

/// A plain delivery for tests: `POST /hook/<id>`, answered 200 in 12 ms.
#[cfg(test)]
pub fn test_delivery(id: i64) -> Delivery {
    use crate::store::{NewDelivery, Outcome};
    use portpreview_shared::Header;
    Delivery {
        id,
        request: NewDelivery {
            received_at_ms: 1_764_470_700_000 + id * 1000,
            tunnel_url: "http://127.0.0.1:9/t/calm-otter".into(),
            target: "http://127.0.0.1:3000".into(),
            method: "POST".into(),
            path: format!("/hook/{id}"),
            request_headers: vec![
                Header::new("content-type", "application/json"),
                Header::new("authorization", "Bearer sk_live_secret"),
            ],
            request_body: format!("{{\"id\":\"evt_{id}\",\"type\":\"charge.succeeded\"}}").into_bytes(),
            request_body_size: 0,
            provider: Some("stripe".into()),
            event_key: format!("evt_{id}"),
            event_key_source: "body:/id".into(),
            replay_of: None,
            host_preserved: false,
            event_type: None,
        },
        outcome: Some(Outcome {
            status: Some(200),
            response_headers: vec![Header::new("content-type", "text/plain")],
            response_body: b"ok".to_vec(),
            response_body_size: 2,
            duration_ms: Some(12.0),
            error: None,
        }),
        delivery_count: 1,
    }
}

/// The list row of a delivery.
#[cfg(test)]
pub fn summary_of(d: &Delivery) -> Summary {
    Summary {
        id: d.id,
        received_at_ms: d.request.received_at_ms,
        method: d.request.method.clone(),
        path: d.request.path.clone(),
        status: d.outcome.as_ref().and_then(|o| o.status),
        duration_ms: d.outcome.as_ref().and_then(|o| o.duration_ms),
        provider: d.request.provider.clone(),
        event_type: d.request.event_type.clone(),
        event_key: d.request.event_key.clone(),
        event_key_source: d.request.event_key_source.clone(),
        event_scope: d.request.event_scope(),
        delivery_count: d.delivery_count,
        error: d.outcome.as_ref().and_then(|o| o.error.clone()),
        replay_of: d.request.replay_of,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::{delivery, ScratchDir};
    use crate::store::Outcome;

    /// A history of `paths` at `path`.
    fn history(path: &Path, paths: &[&str]) {
        let store = Store::open(path).unwrap();
        for (n, p) in paths.iter().enumerate() {
            store
                .insert_delivery(&delivery(&format!("evt_{n}"), p), &Outcome::default())
                .unwrap();
        }
    }

    fn listed(source: &FollowedStore) -> Vec<String> {
        let rows = source.list(&ListQuery::default()).unwrap();
        rows.into_iter().map(|r| r.path).collect()
    }

    #[test]
    fn a_history_moved_over_the_one_shown_is_shown_instead() {
        let dir = ScratchDir::new("followed");
        let path = dir.0.join("history.db");
        history(&path, &["/first"]);
        let source = FollowedStore::new(Store::open_existing(&path).unwrap(), Store::open_existing);
        assert_eq!(listed(&source), ["/first"]);
        assert_eq!(source.generation(), 0);

        let other = dir.0.join("other.db");
        history(&other, &["/a", "/b"]);
        std::fs::rename(&other, &path).unwrap();
        assert_eq!(source.generation(), 1, "told as another file");
        assert_eq!(listed(&source), ["/b", "/a"]);
        // Deleted, with nothing there yet to open: the last one stays.
        std::fs::remove_file(&path).unwrap();
        assert_eq!(listed(&source), ["/b", "/a"]);
    }
}
