//! Reading the history: one delivery whole, pages of summaries, lookups.

use rusqlite::types::Value;
use rusqlite::{params, OptionalExtension, Row};

use super::filter::{key_range, where_clause};
use super::{header_blob, Delivery, ListQuery, NewDelivery, Outcome, ReplayRun, Store, StoreError, Summary};

/// Deliveries sharing the row's event key and scope, replays not counted.
/// A delivery without a key is alone in its group.
const DELIVERY_COUNT: &str = "CASE WHEN d.event_key = '' THEN 1 ELSE
    coalesce((SELECT c.n FROM event_counts c
              WHERE c.event_key = d.event_key AND c.event_scope = d.event_scope), 0) END";

/// A delivery's answer, when one was recorded: a lookup by primary key, so
/// keyset paging stays one index walk. SQLite leaves the join out where no
/// answer column is used.
const WITH_OUTCOME: &str = "LEFT JOIN outcomes o ON o.delivery_id = d.id";

/// A delivery's event type, when it names one: a lookup by primary key too.
const WITH_TYPE: &str = "LEFT JOIN event_types t ON t.delivery_id = d.id";

/// Virtual machine steps between two checks of [`Store::stop_when`]'s
/// condition: a few microseconds of work, so a stop takes effect at once.
const STOP_CHECK_STEPS: std::ffi::c_int = 4096;

impl Store {
    /// One delivery whole, or `None` when there is no such id.
    pub fn get(&self, id: i64) -> Result<Option<Delivery>, StoreError> {
        let sql = format!(
            "SELECT d.id, d.received_at_ms, d.tunnel_url, d.target, d.method, d.path, d.request_headers,
                coalesce(rb.data, d.request_body), d.request_body_size, d.provider, d.event_key,
                d.event_key_source, d.replay_of, o.status, o.response_headers, coalesce(ab.data, o.response_body),
                o.response_body_size, o.duration_ms, o.error, o.completed_at_ms, {DELIVERY_COUNT},
                d.host_preserved, t.event_type
             FROM deliveries d {WITH_OUTCOME} {WITH_TYPE}
                LEFT JOIN bodies rb ON rb.id = d.request_body_id
                LEFT JOIN bodies ab ON ab.id = o.response_body_id
             WHERE d.id = ?1"
        );
        let raw = self
            .conn
            .prepare_cached(&sql)
            .and_then(|mut stmt| stmt.query_row([id], RawDelivery::from_row).optional())
            .map_err(|e| self.classify(e))?;
        raw.map(|raw| raw.decode(self)).transpose()
    }

    /// One delivery whole, or `None` when the history is whole and holds
    /// no such id: a lookup a damaged page led astray is
    /// [`StoreError::Corrupt`] (see [`Store::deliveries_whole`]).
    pub fn lookup(&self, id: i64) -> Result<Option<Delivery>, StoreError> {
        match self.get(id)? {
            None => self.deliveries_whole().map(|()| None),
            found => Ok(found),
        }
    }

    /// Whether the deliveries table reads whole, for a lookup that found
    /// nothing: on a damaged page SQLite may find no row and report no
    /// error, and "no delivery #12" would send the user looking for a
    /// delivery that is there. Only there: it reads the whole table.
    pub fn deliveries_whole(&self) -> Result<(), StoreError> {
        let found: String = (self.conn)
            .query_row("PRAGMA quick_check(deliveries)", [], |row| row.get(0))
            .map_err(|e| self.classify(e))?;
        if found == "ok" {
            return Ok(());
        }
        // "*** in database main ***" heads the problems, one a line.
        let first = found.lines().find(|line| !line.starts_with("***")).unwrap_or(&found);
        Err(StoreError::Corrupt {
            path: self.path.clone(),
            detail: format!("its deliveries table is damaged ({})", first.trim()),
        })
    }

    /// Summaries matching `q`, newest first.
    pub fn list(&self, q: &ListQuery) -> Result<Vec<Summary>, StoreError> {
        Ok(self
            .list_with_targets(q)?
            .into_iter()
            .map(|(summary, _)| summary)
            .collect())
    }

    /// Like `list`, with each delivery's local target beside it.
    pub fn list_with_targets(&self, q: &ListQuery) -> Result<Vec<(Summary, String)>, StoreError> {
        let (filter, mut values) = where_clause(q);
        let limit = q.limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        values.push(Value::Integer(limit));
        let sql = format!(
            "SELECT d.id, d.received_at_ms, d.method, d.path, o.status, o.duration_ms, d.provider, d.event_key,
                d.event_key_source, o.error, d.replay_of, o.completed_at_ms, {DELIVERY_COUNT}, d.target,
                d.event_scope, t.event_type
             FROM deliveries d {WITH_OUTCOME} {WITH_TYPE} WHERE {filter} ORDER BY d.id DESC LIMIT ?"
        );
        let run = || -> rusqlite::Result<Vec<(Summary, String)>> {
            let mut stmt = self.conn.prepare_cached(&sql)?;
            let rows = stmt.query_map(rusqlite::params_from_iter(values), |row| {
                Ok((summary_from_row(row)?, row.get(13)?))
            })?;
            rows.collect()
        };
        run().map_err(|e| self.classify(e))
    }

    /// The smallest delivery id held, `None` when there is none: it moves
    /// on when `prune` removes the oldest deliveries, which a reader that
    /// counted them must know of.
    pub fn oldest_id(&self) -> Result<Option<i64>, StoreError> {
        self.conn
            .query_row("SELECT min(id) FROM deliveries", [], |row| row.get(0))
            .map_err(|e| self.classify(e))
    }

    /// How many deliveries match `q` (its `limit` and `before_id` apply too).
    pub fn count(&self, q: &ListQuery) -> Result<u64, StoreError> {
        let (filter, mut values) = where_clause(q);
        let limit = q.limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        values.push(Value::Integer(limit));
        let sql = format!("SELECT count(*) FROM (SELECT 1 FROM deliveries d {WITH_OUTCOME} WHERE {filter} LIMIT ?)");
        let run = || -> rusqlite::Result<i64> {
            self.conn
                .prepare_cached(&sql)?
                .query_row(rusqlite::params_from_iter(values), |row| row.get(0))
        };
        run()
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(|e| self.classify(e))
    }

    /// Where each full page of `page` rows matching `q` ends, newest first:
    /// the ids of the `page`-th, `2·page`-th… rows (its `limit` is ignored).
    /// One scan tells a pager where every page starts, so the oldest rows
    /// can be read without reading every page above them.
    pub fn page_ends(&self, q: &ListQuery, page: usize) -> Result<Vec<i64>, StoreError> {
        let (filter, values) = where_clause(q);
        // Without an order the ids come from whichever index covers the
        // filter (the event-key index, unfiltered), never from the table's
        // pages with their bodies: sorting them here is the cheaper part.
        let sql = format!("SELECT d.id FROM deliveries d {WITH_OUTCOME} WHERE {filter}");
        let run = || -> rusqlite::Result<Vec<i64>> {
            let mut stmt = self.conn.prepare_cached(&sql)?;
            let ids = stmt.query_map(rusqlite::params_from_iter(values), |row| row.get(0))?;
            ids.collect()
        };
        let mut ids = run().map_err(|e| self.classify(e))?;
        ids.sort_unstable_by(|a, b| b.cmp(a));
        let page = page.max(1);
        Ok(ids.into_iter().skip(page - 1).step_by(page).collect())
    }

    /// Position of delivery `id` among the deliveries sharing its event key
    /// and scope (1 = first); 0 for an unknown id. Replays are not counted.
    pub fn delivery_number(&self, id: i64) -> Result<i64, StoreError> {
        self.delivery_number_row(id).map_err(|e| self.classify(e))
    }

    /// `delivery_number` inside a caller's transaction.
    pub(crate) fn delivery_number_row(&self, id: i64) -> rusqlite::Result<i64> {
        self.conn
            .prepare_cached(
                "SELECT CASE WHEN d.event_key = '' THEN 1 ELSE
                    (SELECT count(*) FROM deliveries g
                     WHERE g.event_key = d.event_key AND g.event_scope = d.event_scope
                         AND g.replay_of IS NULL AND g.id <= d.id) END
                 FROM deliveries d WHERE d.id = ?1",
            )?
            .query_row([id], |row| row.get(0))
            .optional()
            .map(Option::unwrap_or_default)
    }

    /// The position of delivery `id` among its event's deliveries, as
    /// [`Store::delivery_number`] gives it, told from that of a newer
    /// delivery of the same event, `newer = (its id, its number)`: only the
    /// deliveries between the two are counted, so numbering an event's
    /// deliveries newest first reads each of them once, however many
    /// thousands the event has.
    pub fn delivery_number_before(
        &self,
        id: i64,
        event_key: &str,
        event_scope: &str,
        newer: (i64, i64),
    ) -> Result<i64, StoreError> {
        let (newer_id, newer_number) = newer;
        self.conn
            .prepare_cached(
                "SELECT ?5 - count(*) FROM deliveries
                 WHERE event_key = ?1 AND event_scope = ?2 AND replay_of IS NULL AND id > ?3 AND id <= ?4",
            )
            .and_then(|mut stmt| {
                stmt.query_row(params![event_key, event_scope, id, newer_id, newer_number], |row| {
                    row.get(0)
                })
            })
            .map_err(|e| self.classify(e))
    }

    /// How many deliveries (replays not counted) share `event_key` and
    /// `event_scope`: 0 for none.
    pub fn event_count(&self, event_key: &str, event_scope: &str) -> Result<i64, StoreError> {
        self.conn
            .prepare_cached("SELECT n FROM event_counts WHERE event_key = ?1 AND event_scope = ?2")
            .and_then(|mut stmt| stmt.query_row([event_key, event_scope], |row| row.get(0)).optional())
            .map(Option::unwrap_or_default)
            .map_err(|e| self.classify(e))
    }

    /// The number of a delivery just inserted: the newest of its event key,
    /// so its number is the group's count, read in O(1).
    pub(crate) fn newest_delivery_number_row(
        &self,
        d: &NewDelivery,
        event_scope: &str,
        id: i64,
    ) -> rusqlite::Result<i64> {
        if d.replay_of.is_some() || d.event_key.is_empty() {
            return self.delivery_number_row(id);
        }
        self.conn
            .prepare_cached("SELECT n FROM event_counts WHERE event_key = ?1 AND event_scope = ?2")?
            .query_row([d.event_key.as_str(), event_scope], |row| row.get(0))
    }

    /// The newest delivery (not a replay) carrying event key `key`, as
    /// [`Pick`] chooses among them.
    pub fn newest_with_event_key(&self, key: &str) -> Result<Option<Pick>, StoreError> {
        self.newest_where(
            "d.event_key = ? AND d.replay_of IS NULL",
            vec![Value::Text(key.to_owned())],
        )
    }

    /// Up to `most` distinct event keys (of deliveries, not replays) that
    /// begin with `start`: what a key cut short in the table, `evt_1Nq…`,
    /// may stand for.
    pub fn event_keys_starting_with(&self, start: &str, most: usize) -> Result<Vec<String>, StoreError> {
        let (low, high) = key_range(start);
        self.conn
            .prepare_cached(
                "SELECT DISTINCT event_key FROM deliveries \
                 WHERE event_key >= ?1 AND event_key < ?2 AND replay_of IS NULL ORDER BY event_key LIMIT ?3",
            )
            .and_then(|mut stmt| {
                stmt.query_map(
                    rusqlite::params![low, high, i64::try_from(most).unwrap_or(i64::MAX)],
                    |row| row.get(0),
                )?
                .collect()
            })
            .map_err(|e| self.classify(e))
    }

    /// What became of the event of `key` and `scope` beside its delivery
    /// `id`: answered 2xx by another of its deliveries (a provider's retry)
    /// or by a replay that sent it as it was, under its own key; or
    /// delivered again later and still awaiting the answer. A delivery
    /// without a key (a bodiless request) is an event of its own, which
    /// only its own replays answer.
    pub fn event_state(&self, key: &str, scope: &str, id: i64) -> Result<EventState, StoreError> {
        const ANSWERED: &str = "o.status BETWEEN 200 AND 299 AND o.error IS NULL";
        let sql = if key.is_empty() {
            format!(
                "SELECT EXISTS (SELECT 1 FROM deliveries r JOIN outcomes o ON o.delivery_id = r.id
                     WHERE r.replay_of = ?3 AND ?1 = '' AND ?2 = ?2 AND {ANSWERED}), 0"
            )
        } else {
            // Searches of their own, not one with OR: each keeps to its index.
            format!(
                "SELECT EXISTS (SELECT 1 FROM deliveries d JOIN outcomes o ON o.delivery_id = d.id
                     WHERE d.event_key = ?1 AND d.replay_of IS NULL AND d.event_scope = ?2 AND d.id != ?3
                         AND {ANSWERED})
                 OR EXISTS (SELECT 1 FROM deliveries r JOIN outcomes o ON o.delivery_id = r.id
                     WHERE r.replay_of IN (SELECT id FROM deliveries
                             WHERE event_key = ?1 AND replay_of IS NULL AND event_scope = ?2)
                         AND r.event_key = ?1 AND {ANSWERED}),
                 EXISTS (SELECT 1 FROM deliveries d
                     WHERE d.event_key = ?1 AND d.replay_of IS NULL AND d.event_scope = ?2 AND d.id > ?3
                         AND NOT EXISTS (SELECT 1 FROM outcomes o WHERE o.delivery_id = d.id))"
            )
        };
        let (answered, awaited): (bool, bool) = self
            .conn
            .prepare_cached(&sql)
            .and_then(|mut stmt| stmt.query_row(params![key, scope, id], |row| Ok((row.get(0)?, row.get(1)?))))
            .map_err(|e| self.classify(e))?;
        Ok(match (answered, awaited) {
            (true, _) => EventState::Answered,
            (false, true) => EventState::Awaited,
            (false, false) => EventState::Unanswered,
        })
    }

    /// How many events share the event key `key`: more than one when two
    /// GitHub hooks got one delivery ID, or one body went to two paths.
    pub fn events_with_key(&self, key: &str) -> Result<usize, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT count(DISTINCT event_scope) FROM deliveries WHERE event_key = ?1 AND replay_of IS NULL",
            )
            .and_then(|mut stmt| stmt.query_row([key], |row| row.get::<_, i64>(0)))
            .map(|n| usize::try_from(n).unwrap_or(0))
            .map_err(|e| self.classify(e))
    }

    /// The newest delivery `q` lists (its `limit` aside), as [`Pick`]
    /// chooses among them: what `replay --latest` replays.
    pub fn latest(&self, q: &ListQuery) -> Result<Option<Pick>, StoreError> {
        let (filter, values) = where_clause(q);
        self.newest_where(&filter, values)
    }

    /// The newest delivery meeting the SQL condition `filter`, as [`Pick`]
    /// chooses among them.
    fn newest_where(&self, filter: &str, values: Vec<Value>) -> Result<Option<Pick>, StoreError> {
        let sql = format!(
            "SELECT d.id, {WHOLE} FROM deliveries d LEFT JOIN bodies b ON b.id = d.request_body_id {WITH_OUTCOME}
             WHERE {filter} ORDER BY d.id DESC"
        );
        let run = || -> rusqlite::Result<Option<Pick>> {
            let mut stmt = self.conn.prepare_cached(&sql)?;
            let mut rows = stmt.query(rusqlite::params_from_iter(values))?;
            let mut pick = Picking::default();
            while let Some(row) = rows.next()? {
                if pick.offer(row.get(0)?, row.get(1)?) {
                    break;
                }
            }
            Ok(pick.chosen())
        };
        run().map_err(|e| self.classify(e))
    }

    /// A number that changes whenever another connection, in this process
    /// or another, commits to the history: a cheap way to know whether
    /// anything is new.
    pub fn data_version(&self) -> Result<i64, StoreError> {
        self.conn
            .query_row("PRAGMA data_version", [], |row| row.get(0))
            .map_err(|e| self.classify(e))
    }

    /// True when the history was opened for reading only.
    pub fn is_read_only(&self) -> bool {
        self.conn.is_readonly(rusqlite::DatabaseName::Main).unwrap_or(false)
    }

    /// Has every statement from now on stop, failing with an error that
    /// [`StoreError::is_stopped`] tells, as soon as `stop` says so: a
    /// search nobody waits for any more must not scan on for seconds.
    /// SQLite asks every few thousand steps, from the thread running the
    /// statement, so no stop set just before a statement starts is missed
    /// (as one sent by `sqlite3_interrupt` between two statements would be).
    pub fn stop_when(&self, stop: impl Fn() -> bool + Send + 'static) {
        self.conn.progress_handler(STOP_CHECK_STEPS, Some(stop));
    }

    /// The replay runs of delivery `delivery_id`, oldest first.
    pub fn replay_runs(&self, delivery_id: i64) -> Result<Vec<ReplayRun>, StoreError> {
        let run = || -> rusqlite::Result<Vec<ReplayRun>> {
            let mut stmt = self.conn.prepare_cached(
                "SELECT id, delivery_id, started_at_ms, times, concurrency, idempotent, summary, report_json
                 FROM replay_runs WHERE delivery_id = ?1 ORDER BY id",
            )?;
            let rows = stmt.query_map([delivery_id], |row| {
                Ok(ReplayRun {
                    id: row.get(0)?,
                    delivery_id: row.get(1)?,
                    started_at_ms: row.get(2)?,
                    times: row.get(3)?,
                    concurrency: row.get(4)?,
                    idempotent: row.get(5)?,
                    summary: row.get(6)?,
                    report_json: row.get(7)?,
                })
            })?;
            rows.collect()
        };
        run().map_err(|e| self.classify(e))
    }
}

/// Whether a delivery's request body was stored whole, as a column of a
/// query over `deliveries d` joined with the `bodies b` it may keep it in.
const WHOLE: &str = "COALESCE(length(b.data), length(d.request_body), 0) >= d.request_body_size";

/// What became of an event beside one of its deliveries ([`Store::event_state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventState {
    /// Nothing answered it 2xx, and nothing of it is awaited.
    Unanswered,
    /// Another delivery of it, or a replay, was answered 2xx.
    Answered,
    /// A later delivery of it awaits its answer: a provider's retry in flight.
    Awaited,
}

/// The delivery to replay among those that match, newest first: the
/// newest whose body was stored whole, and the newer one passed over, if
/// any. A request the relay turned away (the relay did not read its body)
/// is often the newest delivery of its event, and cannot be sent again as
/// it was; one stored whole before it can. With none whole, the newest,
/// whose replay says why it cannot run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pick {
    /// The delivery chosen.
    pub id: i64,
    /// The newest match, when it was passed over for a body cut short.
    pub newer_cut: Option<i64>,
}

/// The matches offered so far, newest first.
#[derive(Default)]
struct Picking {
    newest: Option<i64>,
    whole: Option<i64>,
}

impl Picking {
    /// Offers the next match; true once one is chosen.
    fn offer(&mut self, id: i64, whole: bool) -> bool {
        self.newest.get_or_insert(id);
        if whole {
            self.whole = Some(id);
        }
        whole
    }

    /// The choice once every match was offered, or one was taken.
    fn chosen(self) -> Option<Pick> {
        let newest = self.newest?;
        Some(match self.whole {
            Some(id) => Pick {
                id,
                newer_cut: (id != newest).then_some(newest),
            },
            None => Pick {
                id: newest,
                newer_cut: None,
            },
        })
    }
}

fn summary_from_row(row: &Row<'_>) -> rusqlite::Result<Summary> {
    let completed: Option<i64> = row.get(11)?;
    Ok(Summary {
        id: row.get(0)?,
        received_at_ms: row.get(1)?,
        method: row.get(2)?,
        path: row.get(3)?,
        status: row.get(4)?,
        duration_ms: completed.and(row.get(5)?),
        provider: row.get(6)?,
        event_type: row.get(15)?,
        event_key: row.get(7)?,
        event_key_source: row.get(8)?,
        event_scope: row.get(14)?,
        error: row.get(9)?,
        replay_of: row.get(10)?,
        delivery_count: row.get(12)?,
    })
}

/// A row as SQLite holds it, before the header lists are decoded.
struct RawDelivery {
    id: i64,
    request: NewDelivery,
    request_headers: Vec<u8>,
    outcome: Option<(Outcome, Vec<u8>)>,
    delivery_count: i64,
}

impl RawDelivery {
    fn from_row(row: &Row<'_>) -> rusqlite::Result<Self> {
        let completed: Option<i64> = row.get(19)?;
        let outcome = match completed {
            None => None,
            Some(_) => Some((
                Outcome {
                    status: row.get(13)?,
                    response_headers: Vec::new(),
                    response_body: row.get::<_, Option<Vec<u8>>>(15)?.unwrap_or_default(),
                    response_body_size: row.get::<_, Option<i64>>(16)?.map_or(0, |n| n.max(0) as u64),
                    duration_ms: row.get(17)?,
                    error: row.get(18)?,
                },
                row.get::<_, Option<Vec<u8>>>(14)?.unwrap_or_default(),
            )),
        };
        Ok(Self {
            id: row.get(0)?,
            request: NewDelivery {
                received_at_ms: row.get(1)?,
                tunnel_url: row.get(2)?,
                target: row.get(3)?,
                method: row.get(4)?,
                path: row.get(5)?,
                request_headers: Vec::new(),
                request_body: row.get(7)?,
                request_body_size: row.get::<_, i64>(8)?.max(0) as u64,
                provider: row.get(9)?,
                event_key: row.get(10)?,
                event_key_source: row.get(11)?,
                replay_of: row.get(12)?,
                host_preserved: row.get(21)?,
                event_type: row.get(22)?,
            },
            request_headers: row.get(6)?,
            outcome,
            delivery_count: row.get(20)?,
        })
    }

    fn decode(self, store: &Store) -> Result<Delivery, StoreError> {
        let corrupt = |err: postcard::Error| StoreError::Corrupt {
            path: store.path.clone(),
            detail: format!("headers of delivery #{} cannot be read: {err}", self.id),
        };
        let mut request = self.request;
        request.request_headers = header_blob::decode(&self.request_headers).map_err(corrupt)?;
        let outcome = match self.outcome {
            None => None,
            Some((mut outcome, blob)) if !blob.is_empty() => {
                outcome.response_headers = header_blob::decode(&blob).map_err(corrupt)?;
                Some(outcome)
            }
            Some((outcome, _)) => Some(outcome),
        };
        Ok(Delivery {
            id: self.id,
            request,
            outcome,
            delivery_count: self.delivery_count,
        })
    }
}
