//! Writing to the history: deliveries, their outcomes, replay runs, pruning.
//!
//! Every write runs inside `BEGIN IMMEDIATE`, so a writer takes the lock up
//! front instead of failing halfway when another process writes too.

use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use super::{
    header_blob, FileId, NewDelivery, Outcome, Pruned, Recorded, ReplayRun, Store, StoreError, MAX_STORED_BODY,
};

/// The highest id a delivery was ever given, pruned or not: a new one is
/// numbered past it, and pruning retires it. One expression for both, so
/// the two can never disagree.
macro_rules! highest_id_ever {
    () => {
        "max(coalesce((SELECT max(id) FROM deliveries), 0), coalesce((SELECT max(highest) FROM retired_ids), 0))"
    };
}

/// Bodies at least this long are stored once however often they arrive,
/// and their rows point to them; shorter ones stay in their rows, where
/// hashing and a lookup would cost more than the bytes they save.
pub(crate) const SHARED_BODY: usize = 64 * 1024;

/// Deliveries `prune` deletes per transaction: each batch passes through
/// the WAL (its pages overwritten, as pruned payloads carry secrets), and
/// a prune is most often run on a disk that is filling up. 1,000 deliveries
/// of 1 KiB take about 6 MB of it.
pub(super) const PRUNE_BATCH: usize = 1_000;

/// The condition, on a row of `bodies`, that no delivery uses it.
macro_rules! unused_body {
    () => {
        "NOT EXISTS (SELECT 1 FROM deliveries WHERE request_body_id = bodies.id)
            AND NOT EXISTS (SELECT 1 FROM outcomes WHERE response_body_id = bodies.id)"
    };
}

/// How long `prune` waits for another process's lock on the history: each
/// batch waits for the tunnels' writers to commit in between.
const PRUNE_PATIENCE: Duration = Duration::from_secs(30);

/// How long `prune` leaves the write lock free between its batches.
const BETWEEN_BATCHES: Duration = Duration::from_millis(5);

impl Store {
    /// Stores the request half of a delivery and returns its id.
    pub fn insert_request(&self, d: &NewDelivery) -> Result<i64, StoreError> {
        self.write(|store| store.insert_request_row(d))
    }

    /// Stores the answer half of delivery `id`.
    pub fn record_outcome(&self, id: i64, o: &Outcome) -> Result<(), StoreError> {
        self.write(|store| store.outcome_row(id, o))
    }

    /// Stores a whole delivery at once (replay attempts) and returns its id.
    pub fn insert_delivery(&self, d: &NewDelivery, o: &Outcome) -> Result<i64, StoreError> {
        self.write(|store| {
            let id = store.insert_request_row(d)?;
            store.outcome_row(id, o)?;
            Ok(id)
        })
    }

    /// Deletes deliveries received before `older_than_ms` (milliseconds since
    /// the epoch), with their replay runs and the attempts those sent.
    ///
    /// What is pruned leaves the file: deleted rows are overwritten rather
    /// than left in free pages, and the WAL, which still holds copies, is
    /// emptied into the database when no reader holds it back. Pruned
    /// payloads carry tokens and cookies. Rows go in batches of a thousand
    /// (`PRUNE_BATCH`), the WAL emptied after each: a running tunnel's
    /// writer gets in between, and the WAL never grows toward the size of
    /// what is pruned.
    ///
    /// `waiting` is called first when another process holds the write
    /// lock, for a command to say why it waits before it waits.
    pub fn prune(&self, older_than_ms: i64, waiting: impl FnOnce(Duration)) -> Result<Pruned, StoreError> {
        // Nothing to delete takes no lock: a prune run by cron beside busy
        // tunnels would otherwise queue behind their writes for nothing.
        if !self.holds_any_before(older_than_ms)? && !self.holds_unused_bodies()? {
            return Ok(Pruned::default());
        }
        if self.write_lock_held_elsewhere()? {
            waiting(PRUNE_PATIENCE);
        }
        // The user's own command may wait on busy tunnels longer than a
        // tunnel's writer waits on anyone.
        self.waiting_up_to(PRUNE_PATIENCE, |store| store.prune_now(older_than_ms))
    }

    /// Whether another process holds the write lock at this moment.
    fn write_lock_held_elsewhere(&self) -> Result<bool, StoreError> {
        self.waiting_up_to(Duration::ZERO, |store| {
            match store.conn.execute_batch("BEGIN IMMEDIATE; ROLLBACK") {
                Ok(()) => Ok(false),
                Err(err) if err.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) => Ok(true),
                Err(err) => Err(store.classify(err)),
            }
        })
    }

    /// What [`Store::prune`] would delete, without deleting it.
    pub fn prunable(&self, older_than_ms: i64) -> Result<Pruned, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT (SELECT count(*) FROM deliveries WHERE received_at_ms < ?1 AND replay_of IS NULL),
                        (SELECT count(*) FROM deliveries
                            WHERE replay_of IN (SELECT id FROM deliveries WHERE received_at_ms < ?1))",
            )
            .and_then(|mut stmt| {
                stmt.query_row([older_than_ms], |row| {
                    Ok(Pruned {
                        deliveries: usize::try_from(row.get::<_, i64>(0)?).unwrap_or(0),
                        replay_attempts: usize::try_from(row.get::<_, i64>(1)?).unwrap_or(0),
                    })
                })
            })
            .map_err(|e| self.classify(e))
    }

    /// Whether any delivery was received before `older_than_ms`.
    fn holds_any_before(&self, older_than_ms: i64) -> Result<bool, StoreError> {
        self.conn
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM deliveries WHERE received_at_ms < ?1)")
            .and_then(|mut stmt| stmt.query_row([older_than_ms], |row| row.get(0)))
            .map_err(|e| self.classify(e))
    }

    /// Whether the history holds a body no delivery uses: a prune of an
    /// older version, cut off between its batches, left them behind.
    fn holds_unused_bodies(&self) -> Result<bool, StoreError> {
        let unused = concat!("SELECT EXISTS (SELECT 1 FROM bodies WHERE ", unused_body!(), ")");
        self.conn
            .prepare_cached(unused)
            .and_then(|mut stmt| stmt.query_row([], |row| row.get(0)))
            .map_err(|e| self.classify(e))
    }

    /// [`Store::prune`], once there is something to prune.
    fn prune_now(&self, older_than_ms: i64) -> Result<Pruned, StoreError> {
        // Attempts first: once their original is gone nothing finds them.
        // An attempt comes after its original, so every attempt before the
        // cut-off is among them, and what is left before it are originals.
        let replay_attempts = self.delete_in_batches(
            "SELECT id FROM deliveries
                WHERE replay_of IN (SELECT id FROM deliveries WHERE received_at_ms < ?1) LIMIT ?2",
            older_than_ms,
        )?;
        let deliveries = self.delete_in_batches(
            "SELECT id FROM deliveries WHERE received_at_ms < ?1 LIMIT ?2",
            older_than_ms,
        )?;
        // Each batch takes its bodies along; these are any an older
        // version's prune, cut off between batches, left behind.
        self.write(|store| {
            store
                .conn
                .prepare_cached(concat!("DELETE FROM bodies WHERE ", unused_body!()))?
                .execute([])
        })?;
        self.empty_wal_waiting();
        Ok(Pruned {
            deliveries,
            replay_attempts,
        })
    }

    /// Deletes the deliveries `batch` names (its `?1` the cut-off, `?2`
    /// the batch size) until it names none, one transaction a batch, each
    /// with the bodies only its deliveries used: a prune cut off between
    /// batches leaves no payload behind whose delivery is gone. Returns
    /// the rows deleted.
    pub(super) fn delete_in_batches(&self, batch: &str, older_than_ms: i64) -> Result<usize, StoreError> {
        let named = format!("INSERT INTO temp.pruning {batch}");
        let mut total = 0;
        loop {
            let deleted = self.write(|store| {
                store.retire_ids()?;
                store.conn.execute_batch(
                    "CREATE TEMP TABLE IF NOT EXISTS pruning (id INTEGER PRIMARY KEY);
                     CREATE TEMP TABLE IF NOT EXISTS pruned_bodies (id INTEGER PRIMARY KEY);
                     DELETE FROM temp.pruning;
                     DELETE FROM temp.pruned_bodies;",
                )?;
                store
                    .conn
                    .prepare_cached(&named)?
                    .execute(rusqlite::params![older_than_ms, PRUNE_BATCH as i64])?;
                store.conn.execute_batch(
                    "INSERT OR IGNORE INTO temp.pruned_bodies
                        SELECT request_body_id FROM deliveries
                            WHERE id IN temp.pruning AND request_body_id IS NOT NULL
                        UNION SELECT response_body_id FROM outcomes
                            WHERE delivery_id IN temp.pruning AND response_body_id IS NOT NULL;",
                )?;
                let deleted = store
                    .conn
                    .prepare_cached("DELETE FROM deliveries WHERE id IN temp.pruning")?
                    .execute([])?;
                store.conn.execute_batch(concat!(
                    "DELETE FROM bodies WHERE id IN temp.pruned_bodies AND ",
                    unused_body!(),
                    ";"
                ))?;
                Ok(deleted)
            })?;
            total += deleted;
            if deleted < PRUNE_BATCH {
                return Ok(total);
            }
            self.empty_wal();
            // The lock is let go long enough for a tunnel's writer, trying
            // every millisecond, to take it: it waits one batch, not the
            // whole prune.
            std::thread::sleep(BETWEEN_BATCHES);
        }
    }

    /// Marks every id handed out so far as retired, whatever is deleted
    /// next. Done in each batch's own transaction: a tunnel's writer
    /// commits between batches, and a delivery it stored just before the
    /// cut-off may be in the next batch.
    fn retire_ids(&self) -> rusqlite::Result<()> {
        let highest: i64 = self
            .conn
            .query_row(concat!("SELECT ", highest_id_ever!()), [], |row| row.get(0))?;
        self.conn.execute_batch("DELETE FROM retired_ids")?;
        self.conn
            .prepare_cached("INSERT INTO retired_ids (highest) VALUES (?1)")?
            .execute([highest])?;
        Ok(())
    }

    /// Gives the file's free pages back to the file system when they are
    /// most of it, as after pruning most of a history; SQLite otherwise
    /// keeps them for later rows, and the file never shrinks. Returns the
    /// history's size after, in bytes, when it did: the file's, once the
    /// copy is written back from the WAL, which a process reading or
    /// writing the history meanwhile may put off. The copy this makes is
    /// of what is left, no larger than the space it frees.
    pub fn shrink_if_mostly_free(&self) -> Result<Option<u64>, StoreError> {
        let count = |pragma: &str| self.conn.query_row(pragma, [], |row| row.get::<_, i64>(0));
        let pages = count("PRAGMA page_count").map_err(|e| self.classify(e))?;
        let free = count("PRAGMA freelist_count").map_err(|e| self.classify(e))?;
        if free * 2 < pages {
            return Ok(None);
        }
        self.conn.execute_batch("VACUUM").map_err(|e| self.classify(e))?;
        self.empty_wal_waiting();
        let pages = count("PRAGMA page_count").map_err(|e| self.classify(e))?;
        let page_size = count("PRAGMA page_size").map_err(|e| self.classify(e))?;
        Ok(Some(u64::try_from(pages * page_size).unwrap_or(0)))
    }

    /// Empties the WAL into the database and cuts its file to nothing,
    /// waiting out the busy timeout for writers; after pruning, where its
    /// frames hold copies of what was deleted.
    fn empty_wal_waiting(&self) {
        if let Err(err) = self.conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())) {
            tracing::debug!(%err, "the WAL was not emptied");
        }
    }

    /// Empties the WAL into the database and cuts its file to nothing, if
    /// no other process is reading or writing just now; otherwise leaves it
    /// for a later try, without waiting. Returns whether it was emptied.
    ///
    /// SQLite reuses a WAL from its start once a checkpoint has caught up,
    /// but never shrinks it: with two tunnels writing one history, readers
    /// and writers overlap for long enough that a WAL can grow to many times
    /// the history, and it then keeps that size on disk.
    pub(crate) fn empty_wal(&self) -> bool {
        let busy_then = self.conn.busy_timeout(Duration::ZERO);
        let emptied = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get::<_, i64>(0))
            .is_ok_and(|busy| busy == 0);
        if busy_then
            .and_then(|()| self.conn.busy_timeout(super::BUSY_TIMEOUT))
            .is_err()
        {
            tracing::debug!("the history's busy timeout was not set back");
        }
        emptied
    }

    /// Whether the file at the history's path is no longer the one this
    /// store opened: deleted, or another moved there. Commits would go on
    /// to the file opened, where no one can read them again.
    pub(crate) fn replaced(&self) -> bool {
        FileId::at(&self.path) != self.opened.history
    }

    /// Opens the history at this store's path again, once it was
    /// [`replaced`](Store::replaced); a deleted one is started anew. Returns
    /// whether a file stood there to open.
    pub(crate) fn reopen(&mut self) -> Result<bool, StoreError> {
        let existed = self.path.exists();
        self.let_go_of_sidecars()?;
        // The old connection closes before a new one opens: closing, SQLite
        // may remove the WAL named beside the path, by then the new one's.
        let old = std::mem::replace(&mut self.conn, Connection::open_in_memory()?);
        if let Err((_, err)) = old.close() {
            tracing::debug!(%err, "the replaced history did not close cleanly");
        }
        // On failure the store stays replaced, so no write reaches the
        // stand-in connection, and the next one tries again.
        *self = Store::open(&self.path).map_err(|source| self.replaced_because(source))?;
        Ok(existed)
    }

    /// Lets go of the WAL and shared memory beside the path, the history
    /// file having been moved or deleted. SQLite then neither empties nor
    /// removes them, and left there they would be replayed into whatever
    /// history is opened at the path, over its own pages. Their frames go
    /// first into the file they belong to, wherever it now is. Fails, to be
    /// tried again, while another process still reads them.
    pub(super) fn let_go_of_sidecars(&mut self) -> Result<(), StoreError> {
        let busy: i64 = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))
            .map_err(|e| self.replaced_because(self.classify(e)))?;
        if busy != 0 {
            return Err(self.replaced_because(StoreError::Busy));
        }
        for (suffix, ours) in [("-wal", &mut self.opened.wal), ("-shm", &mut self.opened.shm)] {
            let file = super::beside(&self.path, suffix);
            if ours.is_some() && FileId::at(&file) == *ours {
                std::fs::remove_file(&file).map_err(|err| StoreError::Replaced {
                    path: self.path.clone(),
                    source: Box::new(StoreError::Io(err)),
                })?;
            }
            // Let go: whatever stands there from now on is another's.
            *ours = None;
        }
        Ok(())
    }

    /// The error of a history whose path names another file now.
    fn replaced_because(&self, source: StoreError) -> StoreError {
        StoreError::Replaced {
            path: self.path.clone(),
            source: Box::new(source),
        }
    }

    /// Stores one `replay` run and returns its id.
    pub fn insert_replay_run(&self, run: &ReplayRun) -> Result<i64, StoreError> {
        self.write(|store| store.replay_run_row(run))
    }

    /// Stores a `replay` run with the attempts it sent, each as a delivery
    /// that replays `run.delivery_id`, all in one transaction: the history
    /// never shows a run without its attempts, nor attempts without their
    /// run. Returns the attempts' IDs, in their order.
    pub fn insert_replay(
        &self,
        run: &ReplayRun,
        attempts: impl IntoIterator<Item = (NewDelivery, Outcome)>,
    ) -> Result<Vec<i64>, StoreError> {
        self.write(|store| {
            let mut ids = Vec::new();
            for (request, outcome) in attempts {
                let id = store.request_row(&request, Some(run.delivery_id), &request.event_scope())?;
                store.outcome_row(id, &outcome)?;
                ids.push(id);
            }
            store.replay_run_row(run)?;
            Ok(ids)
        })
    }

    /// Inserts a replay run; the caller provides the transaction.
    fn replay_run_row(&self, run: &ReplayRun) -> rusqlite::Result<i64> {
        self.conn
            .prepare_cached(
                "INSERT INTO replay_runs (delivery_id, started_at_ms, times, concurrency, idempotent, summary, report_json)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![
                run.delivery_id,
                run.started_at_ms,
                run.times,
                run.concurrency,
                run.idempotent,
                run.summary,
                run.report_json
            ])?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Runs `f` in one immediate transaction: all of it is committed or none.
    pub(crate) fn write<T>(&self, f: impl FnOnce(&Store) -> rusqlite::Result<T>) -> Result<T, StoreError> {
        let run = || {
            let tx = self.begin_immediate()?;
            let value = f(self)?;
            tx.commit()?;
            Ok(value)
        };
        run().map_err(|e| self.classify(e))
    }

    /// Takes the write lock, trying again every [`LOCK_POLL`](super::LOCK_POLL)
    /// while another process holds it, for as long as the store's patience:
    /// a lock let go for a moment is taken in that moment.
    fn begin_immediate(&self) -> rusqlite::Result<Transaction<'_>> {
        let patience = self.patience.get();
        let deadline = std::time::Instant::now() + patience;
        self.conn.busy_timeout(Duration::ZERO)?;
        let began = loop {
            match Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate) {
                Err(err)
                    if err.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(super::LOCK_POLL);
                }
                began => break began,
            }
        };
        // The transaction's statements wait as every other statement does.
        self.conn.busy_timeout(patience)?;
        began
    }

    /// Inserts the request half and says where it landed; the caller
    /// provides the transaction.
    pub(crate) fn insert_recorded_row(&self, d: &NewDelivery) -> rusqlite::Result<Recorded> {
        let event_scope = d.event_scope();
        let id = self.request_row(d, d.replay_of, &event_scope)?;
        Ok(Recorded {
            id,
            delivery_number: self.newest_delivery_number_row(d, &event_scope, id)?,
            event_scope,
        })
    }

    /// Notes that inbox `name` has been moved into the history up to `seq`;
    /// the caller provides the transaction.
    pub(crate) fn mark_inbox_applied(&self, name: &str, seq: u64) -> rusqlite::Result<()> {
        let seq = i64::try_from(seq).unwrap_or(i64::MAX);
        self.conn
            .prepare_cached(
                "INSERT INTO inbox_applied (inbox, seq) VALUES (?1, ?2)
                 ON CONFLICT (inbox) DO UPDATE SET seq = excluded.seq",
            )?
            .execute(params![name, seq])?;
        Ok(())
    }

    /// Notes that delivery `id`, stored by the recorder owning inbox `inbox`,
    /// waits for its answer; the caller provides the transaction.
    pub(crate) fn note_unanswered_row(&self, id: i64, inbox: &str) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached("INSERT OR REPLACE INTO unanswered (delivery_id, inbox) VALUES (?1, ?2)")?
            .execute(params![id, inbox])?;
        Ok(())
    }

    /// Notes that delivery `id` has its answer; the caller provides the
    /// transaction.
    pub(crate) fn forget_unanswered_row(&self, id: i64) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached("DELETE FROM unanswered WHERE delivery_id = ?1")?
            .execute([id])?;
        Ok(())
    }

    /// Gives every delivery that the recorder owning inbox `inbox` left
    /// waiting for its answer the outcome `o`. Returns how many there were.
    pub(crate) fn close_unanswered(&self, inbox: &str, o: &Outcome) -> Result<usize, StoreError> {
        self.write(|store| {
            let ids: Vec<i64> = store
                .conn
                .prepare_cached("SELECT delivery_id FROM unanswered WHERE inbox = ?1")?
                .query_map([inbox], |row| row.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            for id in &ids {
                store.outcome_row(*id, o)?;
            }
            store
                .conn
                .prepare_cached("DELETE FROM unanswered WHERE inbox = ?1")?
                .execute([inbox])?;
            Ok(ids.len())
        })
    }

    /// How far inbox `name` has been moved into the history (0: not at all).
    pub(crate) fn inbox_applied(&self, name: &str) -> Result<u64, StoreError> {
        let seq: Option<i64> = self
            .conn
            .prepare_cached("SELECT seq FROM inbox_applied WHERE inbox = ?1")
            .and_then(|mut stmt| stmt.query_row([name], |row| row.get(0)).optional())
            .map_err(|e| self.classify(e))?;
        Ok(seq.and_then(|seq| u64::try_from(seq).ok()).unwrap_or(0))
    }

    /// The newest delivery that the recorder owning inbox `inbox` stored
    /// without its answer, if any still waits for one.
    pub(crate) fn newest_unanswered(&self, inbox: &str) -> Result<Option<i64>, StoreError> {
        self.conn
            .prepare_cached("SELECT max(delivery_id) FROM unanswered WHERE inbox = ?1")
            .and_then(|mut stmt| stmt.query_row([inbox], |row| row.get(0)))
            .map_err(|e| self.classify(e))
    }

    /// Whether a delivery up to `id` that the recorder owning inbox `inbox`
    /// stored still waits for its answer.
    pub(crate) fn any_unanswered_up_to(&self, inbox: &str, id: i64) -> Result<bool, StoreError> {
        self.conn
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM unanswered WHERE inbox = ?1 AND delivery_id <= ?2)")
            .and_then(|mut stmt| stmt.query_row(params![inbox, id], |row| row.get(0)))
            .map_err(|e| self.classify(e))
    }

    /// Drops the progress mark of an inbox that no longer exists.
    pub(crate) fn forget_inbox(&self, name: &str) -> Result<(), StoreError> {
        self.write(|store| {
            store
                .conn
                .prepare_cached("DELETE FROM inbox_applied WHERE inbox = ?1")?
                .execute([name])
                .map(|_| ())
        })
    }

    /// Inserts the request half; the caller provides the transaction.
    pub(crate) fn insert_request_row(&self, d: &NewDelivery) -> rusqlite::Result<i64> {
        self.request_row(d, d.replay_of, &d.event_scope())
    }

    /// Inserts the request half with `replay_of` in place of `d.replay_of`,
    /// so a replay attempt need not be copied, body and all, to be stored.
    fn request_row(&self, d: &NewDelivery, replay_of: Option<i64>, event_scope: &str) -> rusqlite::Result<i64> {
        let (body, body_id) = self.body_row(&d.request_body[..d.request_body.len().min(MAX_STORED_BODY)])?;
        let size = d.request_body_size.max(d.request_body.len() as u64);
        self.conn
            .prepare_cached(
                // Numbered past the ids pruning retired, never reusing one.
                concat!(
                    "INSERT INTO deliveries (id, received_at_ms, tunnel_url, target, method, path, request_headers,
                         request_body, request_body_size, provider, event_key, event_key_source, replay_of,
                         event_scope, request_body_id, host_preserved)
                     VALUES (",
                    highest_id_ever!(),
                    " + 1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"
                ),
            )?
            .execute(params![
                d.received_at_ms,
                d.tunnel_url,
                d.target,
                d.method,
                d.path,
                header_blob::encode(&d.request_headers),
                body,
                i64::try_from(size).unwrap_or(i64::MAX),
                d.provider,
                d.event_key,
                d.event_key_source,
                replay_of,
                event_scope,
                body_id,
                d.host_preserved
            ])?;
        let id = self.conn.last_insert_rowid();
        if let Some(kind) = &d.event_type {
            self.conn
                .prepare_cached("INSERT INTO event_types (delivery_id, event_type) VALUES (?1, ?2)")?
                .execute(params![id, kind])?;
        }
        Ok(id)
    }

    /// Puts `status` and `error` in place of those of the answer stored
    /// for delivery `id`.
    pub(crate) fn amend_outcome_row(&self, id: i64, status: Option<u16>, error: &str) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached("UPDATE outcomes SET status = ?2, error = ?3 WHERE delivery_id = ?1")?
            .execute(params![id, status, error])?;
        Ok(())
    }

    /// Stores the answer half of delivery `id`; the caller provides the transaction.
    pub(crate) fn outcome_row(&self, id: i64, o: &Outcome) -> rusqlite::Result<()> {
        let body = &o.response_body[..o.response_body.len().min(MAX_STORED_BODY)];
        // A body stored apart would outlive a delivery pruned meanwhile,
        // with whatever tokens it holds, until some later prune.
        if body.len() >= SHARED_BODY && !self.delivery_row_exists(id)? {
            return Ok(());
        }
        let (body, body_id) = self.body_row(body)?;
        let size = o.response_body_size.max(o.response_body.len() as u64);
        let completed_at_ms = crate::time::now_ms();
        self.conn
            .prepare_cached(
                // An answer whose delivery was pruned meanwhile is dropped:
                // failing the foreign key would fail the writer's whole batch.
                "INSERT OR REPLACE INTO outcomes (delivery_id, status, response_headers, response_body,
                     response_body_size, duration_ms, error, completed_at_ms, response_body_id)
                 SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9 WHERE EXISTS (SELECT 1 FROM deliveries WHERE id = ?1)",
            )?
            .execute(params![
                id,
                o.status,
                header_blob::encode(&o.response_headers),
                body,
                i64::try_from(size).unwrap_or(i64::MAX),
                o.duration_ms,
                o.error,
                completed_at_ms,
                body_id
            ])?;
        Ok(())
    }

    fn delivery_row_exists(&self, id: i64) -> rusqlite::Result<bool> {
        self.conn
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM deliveries WHERE id = ?1)")?
            .query_row([id], |row| row.get(0))
    }

    /// Where a body is stored: the bytes for its row, and the shared body
    /// the row points to instead when it is at least [`SHARED_BODY`] long
    /// (stored now unless the history already holds the same bytes). The
    /// caller provides the transaction.
    fn body_row<'b>(&self, body: &'b [u8]) -> rusqlite::Result<(&'b [u8], Option<i64>)> {
        if body.len() < SHARED_BODY {
            return Ok((body, None));
        }
        let hash = blake3::hash(body);
        let hash = hash.as_bytes().as_slice();
        let found = self
            .conn
            .prepare_cached("SELECT id FROM bodies WHERE blake3 = ?1")?
            .query_row([hash], |row| row.get(0))
            .optional()?;
        let id = match found {
            Some(id) => id,
            None => {
                self.conn
                    .prepare_cached("INSERT INTO bodies (blake3, data) VALUES (?1, ?2)")?
                    .execute(params![hash, body])?;
                self.conn.last_insert_rowid()
            }
        };
        Ok((&[], Some(id)))
    }
}
