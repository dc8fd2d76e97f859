//! The list's rows: fetched a page at a time with keyset paging, so a
//! history of any size opens at once and memory stays bounded.

use std::collections::{BTreeSet, HashMap};

use crate::store::{ListQuery, Summary};

use super::source::HistorySource;

/// Rows fetched per query.
pub const PAGE_SIZE: usize = 100;
/// Pages kept in memory; the ones farthest from the view are dropped first.
const MAX_CACHED_PAGES: usize = 20;
/// Live rows kept above the first page before paging starts over from the
/// top (done while the view follows the newest rows, so nobody loses their place).
const MAX_HEAD: usize = 1000;
/// Live rows kept above the first page even while the user reads older rows.
const HARD_MAX_HEAD: usize = 100_000;

/// One page of `PAGE_SIZE` rows; its cursor survives eviction so it can be
/// fetched again.
#[derive(Debug)]
struct Page {
    /// Rows with `id < before_id` (`None`: newest).
    before_id: Option<i64>,
    /// Id of its last (oldest) row: the cursor of the next page.
    last_id: Option<i64>,
    /// Rows it held when fetched.
    len: usize,
    /// Its rows while cached.
    rows: Option<Vec<Summary>>,
}

/// Waiting rows [`Pager::refresh_waiting`] reads again at most per call:
/// a killed tunnel may leave hundreds, which then change over a few ticks.
const MAX_WAITING_READ: usize = 64;

/// A window over the history, in newest-first order.
#[derive(Debug, Default)]
pub struct Pager {
    search: Option<String>,
    /// Rows that arrived live after the first page was fetched, oldest first.
    head: Vec<Summary>,
    pages: Vec<Page>,
    /// True once a short page showed where the history ends.
    end: bool,
    total: Option<u64>,
    /// How many deliveries each retried event has had, as last reported
    /// live, by event key, then scope: a row shows its event's count.
    /// Written into every row of the event instead, a burst of one event's
    /// retries cost each new row a pass over all held rows.
    seen: HashMap<String, HashMap<String, i64>>,
}

impl Pager {
    /// A pager over rows matching `search`, nothing fetched yet.
    pub fn new(search: Option<String>) -> Self {
        Self {
            search,
            ..Self::default()
        }
    }

    /// The search this pager filters by.
    pub fn search(&self) -> Option<&str> {
        self.search.as_deref()
    }

    /// Drops every row and fetches the first page again, and counts them
    /// on this thread, as the app leaves to its worker.
    #[cfg(test)]
    pub fn reload(&mut self, source: &dyn HistorySource) -> anyhow::Result<()> {
        self.reload_page(source)?;
        if self.total.is_none() {
            self.set_total(source.count(&self.count_query())?, 0);
        }
        Ok(())
    }

    /// Drops every row and fetches the first page again; how many rows
    /// there are is known only when that page is all of them.
    pub fn reload_page(&mut self, source: &dyn HistorySource) -> anyhow::Result<()> {
        *self = Self::new(self.search.take());
        self.fetch_next(source)
    }

    /// Rows known so far (all of them once the end was reached).
    pub fn len(&self) -> usize {
        self.head.len() + self.pages.iter().map(|p| p.len).sum::<usize>()
    }

    /// True when there is no row at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True once the oldest row is known.
    pub fn end_reached(&self) -> bool {
        self.end
    }

    /// Rows matching the filter in the whole history, when counted.
    pub fn total(&self) -> Option<u64> {
        self.total
    }

    /// The row at `index` (0 is the newest), if cached.
    pub fn get(&self, index: usize) -> Option<&Summary> {
        if index < self.head.len() {
            return self.head.get(self.head.len() - 1 - index);
        }
        let index = index - self.head.len();
        self.pages.get(index / PAGE_SIZE)?.rows.as_ref()?.get(index % PAGE_SIZE)
    }

    /// Makes rows `start..end` available (as far as the history goes),
    /// fetching the pages they fall in and dropping far-away ones.
    pub fn ensure(&mut self, start: usize, end: usize, source: &dyn HistorySource) -> anyhow::Result<()> {
        let first = start.saturating_sub(self.head.len()) / PAGE_SIZE;
        let last = end.saturating_sub(self.head.len()) / PAGE_SIZE;
        for page in first..=last {
            while page >= self.pages.len() && !self.end {
                self.fetch_next(source)?;
            }
            let Some(slot) = self.pages.get_mut(page) else { break };
            if slot.rows.is_none() {
                let query = Self::query_with(&self.search, slot.before_id, Some(PAGE_SIZE));
                slot.rows = Some(source.list(&query)?);
            }
        }
        self.evict(first, last);
        Ok(())
    }

    /// Learns where every page still unread ends, in one query, and fetches
    /// the last one, so that the oldest rows show without every page above
    /// them being read one after another (1,000 queries for `G` on 100,000
    /// rows). The pages between are fetched when the view reaches them.
    /// On a large history this takes a while: the TUI runs it off its
    /// thread, as [`end_query`](Self::end_query) and [`take_end`](Self::take_end).
    pub fn reach_end(&mut self, source: &dyn HistorySource) -> anyhow::Result<()> {
        if self.end {
            return Ok(());
        }
        let Some(query) = self.end_query() else {
            return self.fetch_next(source);
        };
        let ends = source.page_ends(&query, PAGE_SIZE)?;
        let tail = source.list(&tail_query(&query, &ends))?;
        self.take_end(&query, ends, tail);
        Ok(())
    }

    /// What [`HistorySource::page_ends`] must be asked to reach the oldest
    /// row; `None` when it is reached, or when no page was read yet.
    pub fn end_query(&self) -> Option<ListQuery> {
        if self.end {
            return None;
        }
        let before_id = self.pages.last().and_then(|p| p.last_id)?;
        Some(self.query(Some(before_id), None))
    }

    /// Takes in where the pages after `query`'s cursor end and the rows
    /// after the last of them (see [`tail_query`]). False, and nothing
    /// changed, when the pages moved on since `query` was made (read again
    /// from the top): the answer is about pages no longer held.
    pub fn take_end(&mut self, query: &ListQuery, ends: Vec<i64>, tail: Vec<Summary>) -> bool {
        if self
            .end_query()
            .is_none_or(|now| now.before_id != query.before_id || now.search != query.search)
        {
            return false;
        }
        let mut before_id = query.before_id;
        for last_id in ends {
            self.pages.push(Page {
                before_id,
                last_id: Some(last_id),
                len: PAGE_SIZE,
                rows: None,
            });
            before_id = Some(last_id);
        }
        // What is left is less than a page: it ends the history.
        self.push_page(before_id, tail);
        true
    }

    /// Takes in the first page of rows, fetched elsewhere for a pager
    /// made with [`new`](Self::new): the newest rows matching its search.
    pub fn take_first_page(&mut self, rows: Vec<Summary>) {
        *self = Self::new(self.search.take());
        self.push_page(None, rows);
    }

    /// Sets how many rows match: `counted` up to the row the count ended
    /// at (see [`count_query`](Self::count_query)), and `newer` after it
    /// and up to the first page, which the pages were read again to hold
    /// while it ran. Rows that came live since were counted into the head.
    pub fn set_total(&mut self, counted: u64, newer: u64) {
        self.total = Some(counted + newer + self.head.len() as u64);
    }

    /// The query counting the rows the pages hold or will hold, up to the
    /// first page's newest: a count that takes seconds while rows pour in
    /// counts those apart (see [`between`](Self::between)).
    pub fn count_query(&self) -> ListQuery {
        let before_id = self.pages.first().and_then(|p| p.before_id);
        self.query(before_id.or(self.first_page_newest().map(|id| id + 1)), None)
    }

    /// The query for the rows these pages list newer than `after` and up
    /// to the first page's newest: the rows paging read again past a count
    /// or a total that ended at `after`. `None` when there are none.
    pub fn between(&self, after: i64) -> Option<ListQuery> {
        let newest = self.first_page_newest().filter(|&newest| newest > after)?;
        Some(ListQuery {
            after_id: Some(after),
            ..self.query(Some(newest + 1), None)
        })
    }

    /// The newest row of the first page, where counts end.
    pub fn first_page_newest(&self) -> Option<i64> {
        self.pages.first()?.rows.as_ref()?.first().map(|row| row.id)
    }

    /// The newest row held, and how many rows match up to it: what a
    /// pager read again from the newest carries over, counting only the
    /// rows that came since.
    pub fn counted_through(&self) -> Option<(i64, u64)> {
        let newest = self.head.last().map(|row| row.id).or(self.first_page_newest())?;
        Some((newest, self.total?))
    }

    /// Takes in a row reported live: updated where it is held, or inserted
    /// among the live rows when it is newer than the first page. Deliveries
    /// finish out of order, so a row may land below newer ones. Returns the
    /// index it was inserted at (`None`: updated, or older than every page).
    pub fn upsert(&mut self, row: Summary) -> Option<usize> {
        self.note_seen(&row.event_key, &row.event_scope, row.delivery_count);
        let row = self.replace_held(row)?;
        if row.id <= self.pin() {
            return None;
        }
        let i = self.head.partition_point(|r| r.id < row.id);
        self.head.insert(i, row);
        self.total = self.total.map(|t| t + 1);
        Some(self.head.len() - 1 - i)
    }

    /// Takes in a row reported live under a filter, which only the store
    /// can match: updated where it is held (an answer to a row listed while
    /// in flight), never inserted. True when it was held.
    pub fn update(&mut self, row: Summary) -> bool {
        self.note_seen(&row.event_key, &row.event_scope, row.delivery_count);
        self.replace_held(row).is_none()
    }

    /// Puts `row` in place of the row held with its id; gives it back when
    /// no row is.
    fn replace_held(&mut self, row: Summary) -> Option<Summary> {
        let held = if row.id <= self.pin() {
            // Fetched with a page while still in flight: now it is done.
            self.pages
                .iter_mut()
                .flat_map(|p| p.rows.iter_mut().flatten())
                .find(|r| r.id == row.id)
        } else {
            let i = self.head.binary_search_by_key(&row.id, |r| r.id).ok();
            i.map(|i| &mut self.head[i])
        };
        match held {
            Some(held) => {
                *held = row;
                None
            }
            None => Some(row),
        }
    }

    /// Fetches the newest matching rows (for filtered live views, where only
    /// the store knows what matches, and for a browsed history another
    /// process writes to): only those above the pages, so the query reads
    /// no further down than the rows the pages hold. Returns how many rows
    /// were added, or `None` when there were so many that paging must start
    /// over (from [`reload_page`](Self::reload_page) or a search): past the
    /// head's limit, or `hard`, while the reader is away from the newest
    /// rows, past the one that costs them their place.
    pub fn refresh_head(&mut self, source: &dyn HistorySource, hard: bool) -> anyhow::Result<Option<usize>> {
        let limit = if hard { HARD_MAX_HEAD } else { MAX_HEAD };
        let pin = self.pin();
        let held = |id: i64| self.head.binary_search_by_key(&id, |r| r.id).is_ok();
        let mut rows = Vec::new();
        let mut new = 0;
        // A page at a time, down to the rows already held: a burst of more
        // than a page (a provider's, a load test) keeps the reader's place
        // as a few rows do, up to the head's limit.
        loop {
            let query = ListQuery {
                after_id: Some(pin),
                ..self.query(rows.last().map(|r: &Summary| r.id), Some(PAGE_SIZE))
            };
            let page = source.list(&query)?;
            // A full page whose oldest row is new may hide more new rows behind it.
            let more = page.len() == PAGE_SIZE && page.last().is_some_and(|r| !held(r.id));
            new += page.iter().filter(|r| !held(r.id)).count();
            rows.extend(page);
            if self.head.len() + new > limit {
                return Ok(None);
            }
            if !more {
                break;
            }
        }
        let added = rows.into_iter().filter_map(|r| self.upsert(r)).count();
        Ok(Some(added))
    }

    /// Reads again the rows held that were waiting for their answers when
    /// read: an answer, or the end a dead tunnel's recovery gives them,
    /// lands in rows [`refresh_head`](Self::refresh_head) does not reach.
    /// At most `MAX_WAITING_READ` (64) a call, newest first; true when one
    /// of them changed.
    pub fn refresh_waiting(&mut self, source: &dyn HistorySource) -> anyhow::Result<bool> {
        let waiting: Vec<i64> = self
            .head
            .iter()
            .rev()
            .chain(self.pages.iter().flat_map(|p| p.rows.iter().flatten()))
            .filter(|row| row.is_waiting())
            .map(|row| row.id)
            .take(MAX_WAITING_READ)
            .collect();
        let mut changed = false;
        for id in waiting {
            // By id alone: a row that no longer matches the filter still
            // shows how it ended until the list is read again.
            if let Some(row) = source
                .list(&ListQuery::one(id))?
                .into_iter()
                .find(|row| !row.is_waiting())
            {
                self.upsert(row);
                changed = true;
            }
        }
        Ok(changed)
    }

    /// True when live rows have piled up and paging should start over;
    /// `hard`: even at the cost of the reader's place.
    pub fn head_is_full(&self, hard: bool) -> bool {
        self.head.len() > if hard { HARD_MAX_HEAD } else { MAX_HEAD }
    }

    /// Takes in how many deliveries an event has had, as a delivery of it
    /// reported or the store counted: a retry raises the count of its
    /// event's older rows too, listed or not (a filter may hide the retry).
    pub fn note_seen(&mut self, event_key: &str, event_scope: &str, count: i64) {
        // First deliveries, nearly all of them, have no older rows.
        if count > 1 {
            let scopes = self.seen.entry(event_key.to_owned()).or_default();
            let seen = scopes.entry(event_scope.to_owned()).or_default();
            *seen = (*seen).max(count);
        }
    }

    /// How many deliveries the event of `row` has had: its own count, or
    /// a higher one a later retry of the event reported.
    pub fn seen(&self, row: &Summary) -> i64 {
        let reported = self
            .seen
            .get(&row.event_key)
            .and_then(|scopes| scopes.get(&row.event_scope));
        reported.map_or(row.delivery_count, |&seen| seen.max(row.delivery_count))
    }

    /// Position of the row with this id among the cached rows.
    pub fn position(&self, id: i64) -> Option<usize> {
        (0..self.len()).find(|&i| self.get(i).is_some_and(|r| r.id == id))
    }

    /// Id of the newest row the pages cover; live rows above it go in the head.
    fn pin(&self) -> i64 {
        match self.pages.first() {
            Some(Page {
                before_id: Some(before),
                ..
            }) => before - 1,
            _ => 0,
        }
    }

    fn fetch_next(&mut self, source: &dyn HistorySource) -> anyhow::Result<()> {
        // With no page yet, rows that came live since (a first read that
        // failed, the history being replaced) are the head's: the pages
        // start below them, or the list would hold them twice.
        let before_id = match self.pages.last() {
            Some(page) => page.last_id,
            None => self.head.first().map(|oldest| oldest.id),
        };
        let rows = source.list(&self.query(before_id, Some(PAGE_SIZE)))?;
        self.push_page(before_id, rows);
        Ok(())
    }

    /// Adds the page of `rows` read with the cursor `before_id`.
    fn push_page(&mut self, before_id: Option<i64>, rows: Vec<Summary>) {
        self.end = rows.len() < PAGE_SIZE;
        // Pin the first page to what exists now, so fetching it again later
        // never pulls in live rows the head already holds.
        let before_id = match (before_id, rows.first()) {
            (None, Some(newest)) => Some(newest.id + 1),
            (before, _) => before,
        };
        let last_id = rows.last().map(|r| r.id).or(before_id.map(|b| b - 1));
        self.pages.push(Page {
            before_id,
            last_id,
            len: rows.len(),
            rows: Some(rows),
        });
        // Every row is held now: they need no counting.
        if self.end && self.total.is_none() {
            self.total = Some(self.len() as u64);
        }
    }

    fn evict(&mut self, first: usize, last: usize) {
        let cached: BTreeSet<usize> = (0..self.pages.len())
            .filter(|&i| self.pages[i].rows.is_some())
            .collect();
        if cached.len() <= MAX_CACHED_PAGES {
            return;
        }
        let distance = |i: usize| if i < first { first - i } else { i.saturating_sub(last) };
        let mut by_distance: Vec<usize> = cached
            .into_iter()
            .filter(|&i| self.pages[i].before_id.is_some())
            .collect();
        by_distance.sort_by_key(|&i| std::cmp::Reverse(distance(i)));
        let excess = by_distance.len().saturating_sub(MAX_CACHED_PAGES);
        for i in by_distance.into_iter().take(excess) {
            if distance(i) > 0 {
                self.pages[i].rows = None;
            }
        }
    }

    fn query(&self, before_id: Option<i64>, limit: Option<usize>) -> ListQuery {
        Self::query_with(&self.search, before_id, limit)
    }

    fn query_with(search: &Option<String>, before_id: Option<i64>, limit: Option<usize>) -> ListQuery {
        ListQuery {
            limit,
            before_id,
            search: search.clone(),
            ..ListQuery::default()
        }
    }
}

/// The rows after the last of the page `ends` found for `query`: the
/// history's last page, shorter than a full one.
pub fn tail_query(query: &ListQuery, ends: &[i64]) -> ListQuery {
    ListQuery {
        before_id: ends.last().copied().or(query.before_id),
        limit: Some(PAGE_SIZE),
        ..query.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::source::{summary_of, test_delivery, MemorySource};

    #[test]
    fn opens_with_one_page_and_pages_on_demand() {
        let source = MemorySource::with_rows(1000);
        let mut pager = Pager::new(None);
        pager.reload(&source).unwrap();
        assert_eq!(source.list_calls.get(), 1);
        assert_eq!(pager.get(0).unwrap().id, 1000);
        assert!(pager.get(PAGE_SIZE).is_none());
        pager.ensure(250, 260, &source).unwrap();
        assert_eq!(pager.get(255).unwrap().id, 1000 - 255);
        assert_eq!(pager.total(), Some(1000));
        assert!(!pager.end_reached());
    }

    #[test]
    fn keeps_a_bounded_number_of_pages_and_refetches_evicted_ones() {
        let source = MemorySource::with_rows(5000);
        let mut pager = Pager::new(None);
        pager.reload(&source).unwrap();
        pager.ensure(4990, 5000, &source).unwrap();
        assert!(pager.end_reached());
        assert_eq!(pager.len(), 5000);
        assert_eq!(pager.get(4999).unwrap().id, 1);
        let cached = pager.pages.iter().filter(|p| p.rows.is_some()).count();
        assert!(cached <= MAX_CACHED_PAGES + 1, "{cached} pages cached");
        assert!(pager.get(150).is_none());
        pager.ensure(150, 160, &source).unwrap();
        assert_eq!(pager.get(150).unwrap().id, 5000 - 150);
    }

    #[test]
    fn the_oldest_rows_are_reached_without_reading_every_page() {
        let source = MemorySource::with_rows(5050);
        let mut pager = Pager::new(Some("/".into()));
        pager.reload(&source).unwrap();
        pager.ensure(150, 160, &source).unwrap();
        let before = source.list_calls.get();
        pager.reach_end(&source).unwrap();
        assert!(pager.end_reached());
        assert_eq!(pager.len(), 5050);
        assert_eq!(source.list_calls.get() - before, 1, "only the last page is read");
        pager.ensure(5040, 5050, &source).unwrap();
        assert_eq!(pager.get(5049).unwrap().id, 1);
        assert_eq!(pager.get(5000).unwrap().id, 50);
        // The pages between are where keyset paging would have put them.
        for index in [199, 200, 2500, 4999] {
            pager.ensure(index, index + 1, &source).unwrap();
            assert_eq!(pager.get(index).unwrap().id, 5050 - index as i64, "row {index}");
        }
    }

    #[test]
    fn a_history_of_whole_pages_ends_after_its_last_one() {
        let source = MemorySource::with_rows(300);
        let mut pager = Pager::new(None);
        pager.reload(&source).unwrap();
        pager.reach_end(&source).unwrap();
        assert!(pager.end_reached());
        assert_eq!(pager.len(), 300);
        pager.ensure(299, 300, &source).unwrap();
        assert_eq!(pager.get(299).unwrap().id, 1);
    }

    #[test]
    fn live_rows_go_on_top_without_duplicates() {
        let source = MemorySource::with_rows(150);
        let mut pager = Pager::new(None);
        pager.reload(&source).unwrap();
        let newer = test_delivery(151);
        source.push(newer.clone());
        assert_eq!(pager.upsert(summary_of(&newer)), Some(0));
        assert_eq!(pager.upsert(summary_of(&newer)), None);
        assert_eq!(pager.get(0).unwrap().id, 151);
        assert_eq!(pager.get(1).unwrap().id, 150);
        assert_eq!(pager.total(), Some(151));
        // Page 0 fetched again must not bring 151 back.
        pager.pages[0].rows = None;
        pager.ensure(0, 10, &source).unwrap();
        assert_eq!(pager.get(1).unwrap().id, 150);
        assert_eq!(pager.len(), 101);
    }

    /// A row that comes live before any page was read (the first read
    /// failed, or the history was just replaced) is not read again with
    /// the first page: the list holds it once.
    #[test]
    fn a_live_row_before_the_first_page_is_listed_once() {
        let source = MemorySource::with_rows(3);
        let mut pager = Pager::new(None);
        assert_eq!(pager.upsert(summary_of(&test_delivery(3))), Some(0));
        pager.ensure(0, 10, &source).unwrap();
        let ids: Vec<i64> = (0..pager.len()).filter_map(|i| pager.get(i)).map(|r| r.id).collect();
        assert_eq!(ids, [3, 2, 1]);
    }

    #[test]
    fn a_retry_raises_the_count_of_its_own_events_rows_only() {
        let source = MemorySource::with_rows(0);
        let mut pager = Pager::new(None);
        pager.reload(&source).unwrap();
        let from_hook = |id: i64, hook: &str, count: i64| Summary {
            event_key: "guid-1".into(),
            event_scope: hook.into(),
            delivery_count: count,
            ..summary_of(&test_delivery(id))
        };
        pager.upsert(from_hook(1, "111", 1));
        pager.upsert(from_hook(2, "222", 1));
        pager.upsert(from_hook(3, "111", 2));
        let counts: Vec<(i64, i64)> = (0..pager.len())
            .map(|i| pager.get(i).map(|r| (r.id, pager.seen(r))).unwrap())
            .collect();
        assert_eq!(
            counts,
            [(3, 2), (2, 1), (1, 2)],
            "the other hook's row stays a first delivery"
        );
    }

    #[test]
    fn filtered_head_refresh_asks_the_store() {
        let source = MemorySource::with_rows(5);
        let mut pager = Pager::new(Some("/hook/1".into()));
        pager.reload(&source).unwrap();
        assert_eq!(pager.len(), 1);
        source.push(test_delivery(10));
        source.push(test_delivery(11));
        source.push(test_delivery(12));
        assert_eq!(pager.refresh_head(&source, false).unwrap(), Some(3));
        let ids: Vec<i64> = (0..pager.len()).map(|i| pager.get(i).unwrap().id).collect();
        assert_eq!(ids, vec![12, 11, 10, 1]);
    }

    #[test]
    fn empty_history_then_live_rows() {
        let source = MemorySource::default();
        let mut pager = Pager::new(None);
        pager.reload(&source).unwrap();
        assert!(pager.is_empty() && pager.end_reached());
        let first = test_delivery(1);
        source.push(first.clone());
        pager.upsert(summary_of(&first));
        assert_eq!(pager.len(), 1);
        assert_eq!(pager.position(1), Some(0));
    }

    #[test]
    fn rows_finishing_out_of_order_land_in_id_order() {
        let source = MemorySource::with_rows(150);
        let mut pager = Pager::new(None);
        pager.reload(&source).unwrap();
        let row = |id| summary_of(&test_delivery(id));
        assert_eq!(pager.upsert(row(153)), Some(0));
        assert_eq!(pager.upsert(row(151)), Some(1));
        assert_eq!(pager.upsert(row(152)), Some(1));
        let ids: Vec<i64> = (0..5).map(|i| pager.get(i).unwrap().id).collect();
        assert_eq!(ids, vec![153, 152, 151, 150, 149]);
    }

    #[test]
    fn a_row_fetched_in_flight_is_completed_in_place() {
        let source = MemorySource::with_rows(3);
        let mut in_flight = test_delivery(4);
        in_flight.outcome = None;
        source.push(in_flight);
        let mut pager = Pager::new(None);
        pager.reload(&source).unwrap();
        assert_eq!(pager.get(0).unwrap().status, None);
        assert_eq!(pager.upsert(summary_of(&test_delivery(4))), None);
        assert_eq!(pager.get(0).unwrap().status, Some(200));
        assert_eq!(pager.len(), 4);
    }
}
