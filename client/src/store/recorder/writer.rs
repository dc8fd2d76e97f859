//! The writer thread: it owns the database connection, gathers the jobs
//! that arrive within a short window into one transaction, keeps a batch
//! the store refuses and tries it again, and reports each delivery
//! once both its halves are stored.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;

use super::recover::{identify, orphaned};
use super::{Amendment, OnNews, Recorded, WriterNews};
use crate::store::inbox::Inbox;
use crate::store::{ListQuery, NewDelivery, Outcome, Store, StoreError, Summary};

/// Most stored requests the writer keeps waiting for their answers. An
/// answer that never comes (its exchange was cut off) must not hold memory
/// for good; past this, the oldest are given up.
const AWAITED_LIMIT: usize = 65_536;

/// Most stored answers the writer remembers the rows of, newest first, for
/// an amendment that comes after its answer was stored: one comes within
/// a round trip to the relay, so a few seconds of deliveries at most.
const ANSWERED_LIMIT: usize = 4096;

/// Most jobs written in one transaction, so one commit never grows unbounded.
const MAX_BATCH: usize = 2048;

/// Most body bytes written in one transaction, for the same reason.
const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024;

/// How long the writer lets work gather before a commit. Nobody waits on
/// it but the live display and readers in other processes.
const WINDOW: Duration = Duration::from_millis(10);

/// How long the writer waits with nothing to write before it empties the
/// WAL (see [`Store::empty_wal`]).
const IDLE: Duration = Duration::from_secs(1);

/// Pauses between tries while the store refuses a batch (another process
/// holds the lock, the disk is full, the file is damaged): the first, and
/// the longest.
const RETRY_FIRST: Duration = Duration::from_millis(200);
const RETRY_MOST: Duration = Duration::from_secs(2);

/// What the recorder hands the writer.
pub(super) enum Job {
    Request {
        seq: u64,
        delivery: Box<NewDelivery>,
        /// Given back when the job is done with.
        _room: OwnedSemaphorePermit,
    },
    Outcome {
        seq: u64,
        outcome: Box<Outcome>,
        /// None for an answer kept without its headers and body, for
        /// which the queue had no room (see [`super::Recorder::record_outcome`]).
        _room: Option<OwnedSemaphorePermit>,
    },
    /// What became of an answer after all: its caller did not get it
    /// whole (see [`super::Recorder::amend`]).
    Amend {
        seq: u64,
        amendment: Amendment,
    },
    /// An inbox file a compaction replaced, to be closed here: closing a
    /// large file whose name is gone frees its pages, which took the
    /// tunnel's thread 15–30 ms for 150 MB.
    Close {
        _file: std::fs::File,
    },
    Shutdown,
}

impl Job {
    /// Body bytes the job carries.
    fn body_len(&self) -> usize {
        match self {
            Job::Request { delivery, .. } => delivery.request_body.len(),
            Job::Outcome { outcome, .. } => outcome.response_body.len(),
            Job::Amend { .. } | Job::Close { .. } | Job::Shutdown => 0,
        }
    }
}

/// The writer thread's state.
pub(super) struct Writer {
    pub(super) store: Store,
    pub(super) key_fields: Vec<String>,
    pub(super) inbox_name: String,
    /// The recorder's inbox, cut back here while the tunnel is idle.
    pub(super) inbox: Arc<Mutex<Inbox>>,
    pub(super) applied: Arc<AtomicU64>,
    pub(super) stalled: Arc<super::Stall>,
    pub(super) stopping: Arc<AtomicBool>,
    /// Stored requests whose answers have not come yet, by ticket.
    pub(super) awaited: BTreeMap<u64, Summary>,
    /// Some stored requests were given up waiting for (past
    /// [`AWAITED_LIMIT`]): their rows may still lack an answer.
    pub(super) gave_up_waiting: bool,
    /// The rows of the latest answers stored, by ticket, oldest first
    /// (see [`ANSWERED_LIMIT`]).
    pub(super) answered: VecDeque<(u64, i64)>,
    /// Answers kept in the inbox while the history refused writes, by
    /// ticket: each is kept once.
    pub(super) kept_answers: HashSet<u64>,
    pub(super) on_news: OnNews,
}

/// Adds to `batch` the jobs already queued, up to a batch's limits. True
/// when the batch holds the shutdown request, and then whatever raced in
/// after it too, as that is flushed as well.
fn gather(batch: &mut Vec<Job>, jobs: &Receiver<Job>) -> bool {
    let mut bytes: usize = batch.iter().map(Job::body_len).sum();
    while batch.len() < MAX_BATCH && bytes < MAX_BATCH_BYTES {
        match jobs.try_recv() {
            Ok(job) => {
                bytes += job.body_len();
                batch.push(job);
            }
            Err(_) => break,
        }
    }
    let stop = batch.iter().any(|job| matches!(job, Job::Shutdown));
    if stop {
        batch.extend(jobs.try_iter());
    }
    stop
}

/// Why the history refuses a batch, as the display gives it. Most causes
/// pass (another process's lock, a full disk); a damaged file does not,
/// and the user is told so rather than left waiting.
fn refusal(err: &StoreError) -> String {
    match err {
        StoreError::Corrupt { .. } => format!(
            "{err}; waiting will not mend it: stop the tunnel, then move the file aside or pass --db another file"
        ),
        other => other.to_string(),
    }
}

impl Writer {
    /// Writes batches until asked to stop. Returns true when the history
    /// then holds everything it was given, the absence of the answers that
    /// never came included; false when the inbox must stay for the next open.
    pub(super) fn run(mut self, jobs: &Receiver<Job>) -> bool {
        let mut batch = Vec::with_capacity(64);
        // Set while the store refuses batches: the batch is kept
        // and tried again after this pause, with whatever came meanwhile.
        let mut pause: Option<Duration> = None;
        // Jobs written in one transaction: halved each time a full disk
        // refuses them, doubled back after each write, so that the room
        // freed on a full disk takes what it can hold. Else a backlog
        // grown past it, written whole, would be refused for good.
        let mut most = MAX_BATCH;
        // Set once the shutdown request is among the jobs gathered.
        let mut stop = false;
        // Set by a write, cleared once the WAL it grew has been emptied.
        let mut wal_grown = false;
        // Set by work, cleared once an idle spell has handed memory back.
        let mut worked = false;
        // Set once the user has been told the history refuses writes.
        let mut told = false;
        loop {
            match pause {
                // What a write in parts left is written next.
                None if !batch.is_empty() => {}
                // Blocks only when idle; the first job opens a window for the rest.
                None => match jobs.recv_timeout(IDLE) {
                    Ok(first) => {
                        worked = true;
                        if !matches!(first, Job::Shutdown) {
                            std::thread::sleep(WINDOW);
                        }
                        batch.push(first);
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        self.idle_upkeep(&mut wal_grown, &mut worked);
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => return self.close_unanswered(),
                },
                // The whole pause, whatever comes meanwhile: a write that
                // fails late (a damaged file) must not be tried again for
                // every job that arrives.
                Some(wait) => self.pause(wait),
            }
            // Kept once seen: a batch written in parts may have written
            // the shutdown request with its first part.
            stop |= gather(&mut batch, jobs);
            if pause.is_some() {
                // The history refused the last try, and may hold this one
                // for a whole busy timeout.
                self.keep_answers(batch.iter());
            }
            match self.write_front(&mut batch, most) {
                Ok(()) => {
                    wal_grown = true;
                    most = (most * 2).min(MAX_BATCH);
                    pause = None;
                    // Written in part, the rest comes next, at once.
                    if !batch.is_empty() {
                        continue;
                    }
                    self.stalled.set(false);
                    if batch.is_empty() {
                        self.kept_answers.clear();
                    }
                    if std::mem::take(&mut told) {
                        tracing::info!("the history takes deliveries again");
                        (self.on_news)(WriterNews::Resumed);
                    }
                    if stop {
                        return self.close_unanswered();
                    }
                }
                // At shutdown the requests stay in the inbox, which the next
                // open moves into the history.
                Err(err) if !stop && !self.stopping.load(Ordering::Acquire) => {
                    self.stalled.set(true);
                    // Their callers have them: a tunnel killed before the
                    // history takes them must not leave their requests
                    // recorded as never answered. What came during the
                    // failed try is among them.
                    stop |= gather(&mut batch, jobs);
                    self.keep_answers(batch.iter());
                    if err.is_full() {
                        most = (most.min(batch.len()) / 2).max(1);
                    }
                    // A lock held past one busy timeout is waited out once
                    // more before it is news: tunnels sharing a history
                    // under load each hold it for seconds at a time.
                    let news = !matches!(err, StoreError::Busy) || pause.is_some();
                    if news && !told {
                        told = true;
                        // Shown by the display, in the TUI too; the log keeps a note.
                        tracing::info!(%err, "the history refuses writes");
                        (self.on_news)(WriterNews::Refusing(refusal(&err)));
                    }
                    pause = Some(pause.map_or(RETRY_FIRST, |p| (p * 2).min(RETRY_MOST)));
                    continue;
                }
                Err(err) => {
                    tracing::warn!(%err, "the history refused the last deliveries");
                    let rest: Vec<Job> = jobs.try_iter().collect();
                    self.keep_answers(batch.iter().chain(&rest));
                    return false;
                }
            }
        }
    }

    /// What the writer does once no job came for [`IDLE`]: empties the WAL
    /// its writes grew, cuts the inbox down, and after work hands memory back.
    fn idle_upkeep(&mut self, wal_grown: &mut bool, worked: &mut bool) {
        if *wal_grown {
            // Another process at work keeps it for now: try again when next idle.
            *wal_grown = !self.store.empty_wal();
        }
        self.cut_inbox();
        if std::mem::take(worked) {
            // The bodies of a burst were freed here and on the tunnel's
            // thread; once, not every second.
            crate::memory::release();
        }
    }

    /// Keeps in the inbox file, once each, the answers among `jobs` whose
    /// requests are there too, not in SQLite: the next open stores each
    /// beside its request, so the history shows the answer its caller got
    /// rather than none.
    fn keep_answers<'a>(&mut self, jobs: impl Iterator<Item = &'a Job>) {
        let mut inbox = super::lock(&self.inbox);
        for job in jobs {
            if let Job::Outcome { seq, outcome, .. } = job {
                if stored_row(&self.awaited, *seq).is_some() || !self.kept_answers.insert(*seq) {
                    continue;
                }
                if let Err(err) = inbox.keep_answer(*seq, outcome) {
                    tracing::debug!(%err, "an answer could not be kept in the history inbox");
                }
            }
        }
        inbox.write_staged_now();
    }

    /// Waits `wait` between failed tries, or less once asked to stop.
    fn pause(&self, wait: Duration) {
        const STEP: Duration = Duration::from_millis(50);
        let until = std::time::Instant::now() + wait;
        while !self.stopping.load(Ordering::Acquire) {
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return;
            }
            std::thread::sleep(left.min(STEP));
        }
    }

    /// Gives the requests still waiting for their answers, now that none
    /// will come, the outcome that says so. Returns false when that failed:
    /// the inbox then stays for the next open to do it.
    fn close_unanswered(&mut self) -> bool {
        let waiting = self.awaited.values().any(|s| s.id > 0) || self.gave_up_waiting;
        self.awaited.clear();
        // Nothing to mark is no write: a stop while another process holds
        // the lock would otherwise wait for it, and call the inbox unsettled.
        if !waiting {
            return true;
        }
        match self.store.close_unanswered(&self.inbox_name, &orphaned()) {
            Ok(closed) => {
                if closed > 0 {
                    tracing::debug!(closed, "requests left without an answer at shutdown");
                }
                true
            }
            Err(err) => {
                tracing::warn!(%err, "cannot mark the requests left without an answer; the next open of the history will mark them");
                false
            }
        }
    }

    /// Drops from the inbox the requests SQLite holds, while the tunnel is
    /// idle: otherwise only the next request's append does, and the bodies
    /// of a burst of uploads would sit on disk for as long as none comes.
    /// The file replaced is closed here, off the tunnel's threads.
    fn cut_inbox(&self) {
        let replaced = super::lock(&self.inbox).cut_back_idle(self.applied.load(Ordering::Acquire));
        // Closed once the lock is let go: the tunnel's thread appends under it.
        drop(replaced);
    }

    /// Stores the answers in `batch` whose requests are in the history this
    /// writer opened, before it takes up the one now at its path: a history
    /// moved away (`mv history.db old.db`) keeps each delivery whole. The
    /// open connection still writes to the moved file; to a deleted one it
    /// writes nothing anyone reads, and a failure is no loss either.
    fn answer_where_asked(&self, batch: &[Job]) {
        let earlier: Vec<(i64, &Outcome)> = batch
            .iter()
            .filter_map(|job| match job {
                Job::Outcome { seq, outcome, .. } => Some((stored_row(&self.awaited, *seq)?, &**outcome)),
                _ => None,
            })
            .collect();
        if earlier.is_empty() {
            return;
        }
        let written = self.store.write(|store| {
            for (id, outcome) in &earlier {
                answer_stored_row(store, *id, outcome)?;
            }
            Ok(())
        });
        if let Err(err) = written {
            tracing::debug!(%err, "answers not stored in the history that was moved away");
        }
    }

    /// Shows the delivery an amendment changed, its answer stored before,
    /// as the history has it now.
    fn tell_amended(&mut self, seq: u64, was: u16) {
        let Some(id) = answered_row(&self.answered, seq) else {
            return;
        };
        match self.store.list(&ListQuery::one(id)) {
            Ok(mut rows) => {
                if let Some(summary) = rows.pop() {
                    (self.on_news)(WriterNews::Amended { summary, was });
                }
            }
            Err(err) => tracing::debug!(%err, id, "an amended delivery could not be read back"),
        }
    }

    /// Takes up the history now at the store's path, its file having been
    /// deleted or replaced while the tunnel ran, and says so.
    fn reopen(&mut self) -> Result<(), StoreError> {
        let existed = self.store.reopen()?;
        // Their rows went with the file; an id in the new one is another delivery.
        for waiting in self.awaited.values_mut() {
            waiting.id = 0;
        }
        self.answered.clear();
        let path = self.store.path().display();
        let notice = if existed {
            format!("the history {path} was replaced: deliveries are recorded in the one there now")
        } else {
            format!("the history {path} was moved away or deleted: deliveries are recorded in a new one there")
        };
        tracing::info!("{notice}");
        (self.on_news)(WriterNews::Notice(notice));
        Ok(())
    }

    /// Writes the first `most` jobs of `batch` as [`Writer::write`] does,
    /// leaving the rest in it; when the store refuses them, the batch is
    /// left as it was.
    fn write_front(&mut self, batch: &mut Vec<Job>, most: usize) -> Result<(), StoreError> {
        if batch.len() <= most {
            return self.write(batch);
        }
        let mut front: Vec<Job> = batch.drain(..most).collect();
        let result = self.write(&mut front);
        if result.is_err() {
            front.append(batch);
            *batch = front;
        }
        result
    }

    /// Writes one batch in one transaction, then reports the deliveries
    /// whose answers it held, and empties the batch. When the store refuses
    /// it, the batch is left as it is, to be tried again: nothing is
    /// reported or marked applied.
    fn write(&mut self, batch: &mut Vec<Job>) -> Result<(), StoreError> {
        if batch.iter().all(|job| matches!(job, Job::Close { .. } | Job::Shutdown)) {
            // Nothing to store: no transaction, so no wait on another
            // process's lock.
            batch.clear();
            return Ok(());
        }
        if self.store.replaced() {
            self.answer_where_asked(batch);
            self.reopen()?;
        }
        // Sequence numbers only grow: this batch's requests are those from
        // its oldest to its newest.
        let (mut oldest, mut newest) = (None, None);
        for job in batch.iter_mut() {
            if let Job::Request { seq, delivery, .. } = job {
                identify(delivery, &self.key_fields);
                oldest.get_or_insert(*seq);
                newest = Some(*seq);
            }
        }
        amend_in_batch(batch);
        let answered = &self.answered;
        let result = self.store.write(|store| {
            let rows = store_batch(store, batch, &self.inbox_name, &self.awaited, newest)?;
            amend_stored(store, batch, answered)?;
            Ok(rows)
        });
        // Any failure keeps the batch, to be tried again: a history that
        // is locked or on a full disk takes it later, and one that is
        // damaged never drops it, as its requests stay in the inbox, for
        // the next open once the file is mended.
        let mut rows = result?;
        if let Some(seq) = newest {
            self.applied.store(seq, Ordering::Release);
        }
        for job in batch.drain(..) {
            match job {
                Job::Request { seq, delivery, .. } => {
                    self.awaited.insert(seq, summary(*delivery, rows.remove(&seq)));
                }
                Job::Outcome { seq, outcome, .. } => {
                    if let Some(mut summary) = self.awaited.remove(&seq) {
                        if summary.id > 0 {
                            if self.answered.len() == ANSWERED_LIMIT {
                                self.answered.pop_front();
                            }
                            self.answered.push_back((seq, summary.id));
                        }
                        summary.status = outcome.status;
                        summary.duration_ms = outcome.duration_ms;
                        summary.error = outcome.error;
                        (self.on_news)(WriterNews::Stored(summary));
                    }
                }
                Job::Amend { seq, amendment } => self.tell_amended(seq, amendment.was),
                Job::Close { .. } | Job::Shutdown => {}
            }
        }
        // Most answers come in the batch of their request; the rest are in
        // flight, and shown as such.
        if let Some(first) = oldest {
            let Writer { awaited, on_news, .. } = &mut *self;
            for waiting in awaited.range(first..).map(|(_, s)| s).filter(|s| s.id > 0) {
                on_news(WriterNews::Waiting(waiting.clone()));
            }
        }
        while self.awaited.len() > AWAITED_LIMIT {
            self.gave_up_waiting = true;
            self.awaited.pop_first();
        }
        Ok(())
    }
}

/// Applies each amendment in `batch` to its answer there, which is then
/// stored and shown amended, and drops it; those whose answers were
/// stored before stay.
fn amend_in_batch(batch: &mut Vec<Job>) {
    let mut at = 0;
    while at < batch.len() {
        let answer = match &batch[at] {
            Job::Amend { seq, .. } => batch[..at]
                .iter()
                .position(|job| matches!(job, Job::Outcome { seq: answered, .. } if answered == seq)),
            _ => None,
        };
        let Some(answer) = answer else {
            at += 1;
            continue;
        };
        if let (Job::Amend { amendment, .. }, Job::Outcome { outcome, .. }) = (batch.remove(at), &mut batch[answer]) {
            outcome.status = amendment.status;
            outcome.error = Some(amendment.error);
        }
    }
}

/// Applies the amendments left in `batch` to the rows of answers stored
/// before, in the caller's transaction.
fn amend_stored(store: &Store, batch: &[Job], answered: &VecDeque<(u64, i64)>) -> rusqlite::Result<()> {
    for job in batch {
        if let Job::Amend { seq, amendment } = job {
            if let Some(id) = answered_row(answered, *seq) {
                store.amend_outcome_row(id, amendment.status, &amendment.error)?;
            }
        }
    }
    Ok(())
}

/// The row of the answer of ticket `seq`, if stored lately.
fn answered_row(answered: &VecDeque<(u64, i64)>, seq: u64) -> Option<i64> {
    answered
        .iter()
        .rev()
        .find(|(answered, _)| *answered == seq)
        .map(|(_, id)| *id)
}

/// Stores a batch's requests and answers in the caller's transaction, and
/// returns where each request landed, by ticket. `newest` is the batch's
/// newest request, the inbox's progress once the transaction commits.
fn store_batch(
    store: &Store,
    batch: &[Job],
    inbox_name: &str,
    awaited: &BTreeMap<u64, Summary>,
    newest: Option<u64>,
) -> rusqlite::Result<HashMap<u64, Recorded>> {
    // Their answers, often in the same batch, find their rows here.
    let mut rows = HashMap::new();
    let mut answered = HashSet::new();
    for job in batch {
        match job {
            Job::Request { seq, delivery, .. } => {
                rows.insert(*seq, store.insert_recorded_row(delivery)?);
            }
            Job::Outcome { seq, outcome, .. } => match rows.get(seq) {
                Some(row) => {
                    answered.insert(*seq);
                    store.outcome_row(row.id, outcome)?;
                }
                None => {
                    if let Some(id) = stored_row(awaited, *seq) {
                        answer_stored_row(store, id, outcome)?;
                    }
                }
            },
            Job::Amend { .. } | Job::Close { .. } | Job::Shutdown => {}
        }
    }
    // A request committed without its answer is noted, so that should
    // this process die, the next open gives it an outcome.
    for (seq, row) in &rows {
        if !answered.contains(seq) {
            store.note_unanswered_row(row.id, inbox_name)?;
        }
    }
    if let Some(seq) = newest {
        store.mark_inbox_applied(inbox_name, seq)?;
    }
    Ok(rows)
}

/// The row of the request `seq` stands for, stored by an earlier batch
/// (none when its history was replaced since).
fn stored_row(awaited: &BTreeMap<u64, Summary>, seq: u64) -> Option<i64> {
    awaited.get(&seq).map(|s| s.id).filter(|id| *id > 0)
}

/// Gives the request stored as row `id` its answer, which it no longer
/// waits for; the caller provides the transaction.
fn answer_stored_row(store: &Store, id: i64, outcome: &Outcome) -> rusqlite::Result<()> {
    store.outcome_row(id, outcome)?;
    store.forget_unanswered_row(id)
}

/// A stored request as a history row still waiting for its answer; id 0
/// without a row.
fn summary(delivery: NewDelivery, recorded: Option<Recorded>) -> Summary {
    let (id, delivery_number, event_scope) =
        recorded.map_or((0, 1, String::new()), |r| (r.id, r.delivery_number, r.event_scope));
    Summary {
        id,
        event_scope,
        received_at_ms: delivery.received_at_ms,
        method: delivery.method,
        path: delivery.path,
        status: None,
        duration_ms: None,
        provider: delivery.provider,
        event_type: delivery.event_type,
        event_key: delivery.event_key,
        event_key_source: delivery.event_key_source,
        delivery_count: delivery_number,
        error: None,
        replay_of: delivery.replay_of,
    }
}

#[cfg(test)]
mod tests {
    use futures_util::future::join_all;

    use super::super::tests::{answered, next_report, recorded, start};
    use super::super::Ticket;
    use super::*;
    use crate::store::tests::{delivery, ScratchDir};
    use crate::store::ListQuery;

    /// Another process renames the answers' table away: every write of
    /// the writer fails, as on a damaged file, until [`mend_outcomes`].
    fn break_outcomes(path: &std::path::Path) -> rusqlite::Connection {
        let breaker = rusqlite::Connection::open(path).unwrap();
        breaker
            .execute_batch("ALTER TABLE outcomes RENAME TO outcomes_away")
            .unwrap();
        breaker
    }

    fn mend_outcomes(conn: &rusqlite::Connection) {
        conn.execute_batch("ALTER TABLE outcomes_away RENAME TO outcomes")
            .unwrap();
    }

    /// Records `count` deliveries, `{prefix}0` on, each answered 200, and
    /// writes them to the inbox as the tunnel does before the answers leave.
    async fn record_answered(recorder: &super::super::Recorder, prefix: &str, count: usize) {
        for n in 0..count {
            let ticket = recorder
                .record_request(delivery(&format!("{prefix}{n}"), "/"))
                .await
                .unwrap();
            recorder.record_outcome(ticket, answered(200)).await.unwrap();
        }
        recorder.flush().unwrap();
    }

    /// A damaged history is told as lasting; a lock or a full disk as what
    /// it is, which passes.
    #[test]
    fn a_damaged_history_is_told_as_one_waiting_will_not_mend() {
        let damaged = StoreError::Corrupt {
            path: "/tmp/h.db".into(),
            detail: "database disk image is malformed".into(),
        };
        assert_eq!(
            refusal(&damaged),
            "history database /tmp/h.db is corrupt: database disk image is malformed; waiting will not mend it: \
             stop the tunnel, then move the file aside or pass --db another file"
        );
        assert_eq!(refusal(&StoreError::Busy), StoreError::Busy.to_string());
    }

    #[tokio::test]
    async fn a_thousand_deliveries_are_all_committed_and_reported() {
        let dir = ScratchDir::new("recorder-many");
        let path = dir.0.join("history.db");
        let (recorder, handle, mut reported) = start(&path);
        let sends = (0..1000).map(|n| recorder.record_request(delivery(&format!("evt_{}", n % 10), "/")));
        let tickets: Vec<Ticket> = join_all(sends).await.into_iter().map(Result::unwrap).collect();
        for ticket in tickets {
            recorder.record_outcome(ticket, answered(204)).await.unwrap();
        }
        let mut numbers = Vec::new();
        for _ in 0..1000 {
            let report = next_report(&mut reported).await;
            assert_eq!(report.status, Some(204), "reported with its answer: {report:?}");
            assert!(report.id > 0);
            numbers.push(report.delivery_count);
        }
        handle.shutdown();

        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(
            numbers,
            (1..=100).collect::<Vec<_>>(),
            "ten events, a hundred deliveries each"
        );
        let store = Store::open(&path).unwrap();
        assert_eq!(store.count(&ListQuery::default()).unwrap(), 1000);
        let answered = store.list(&ListQuery::default()).unwrap();
        assert!(answered
            .iter()
            .all(|s| s.status == Some(204) && s.delivery_count == 100));
    }

    /// An amendment that comes in the batch of its answer is stored and
    /// reported with it; one that comes once the answer was stored changes
    /// the row, and is reported as the row is now.
    #[tokio::test]
    async fn an_amended_answer_is_stored_and_reported_as_amended() {
        let dir = ScratchDir::new("recorder-amend");
        let path = dir.0.join("history.db");
        let (recorder, handle, mut reported) = start(&path);
        let ticket = recorder.record_request(delivery("evt_1", "/")).await.unwrap();
        let amendable = ticket.answered();
        recorder.record_outcome(ticket, answered(200)).await.unwrap();
        let amendment = |status, error: &str| Amendment {
            was: 200,
            status,
            error: error.into(),
        };
        recorder.amend(amendable, amendment(None, "gone")).unwrap();
        let report = next_report(&mut reported).await;
        assert_eq!((report.status, report.error.as_deref()), (None, Some("gone")));

        let ticket = recorder.record_request(delivery("evt_2", "/")).await.unwrap();
        let amendable = ticket.answered();
        recorder.record_outcome(ticket, answered(200)).await.unwrap();
        let report = next_report(&mut reported).await;
        assert_eq!((report.status, report.error.as_deref()), (Some(200), None));
        recorder.amend(amendable, amendment(Some(200), "cut")).unwrap();
        let amended = next_report(&mut reported).await;
        assert_eq!(
            (amended.id, amended.status, amended.error.as_deref()),
            (report.id, Some(200), Some("cut"))
        );
        handle.shutdown();
        let rows = Store::open(&path).unwrap().list(&ListQuery::default()).unwrap();
        let rows: Vec<_> = rows.iter().map(|row| (row.status, row.error.as_deref())).collect();
        assert_eq!(rows, [(Some(200), Some("cut")), (None, Some("gone"))]);
    }

    /// Once idle, the writer empties the WAL: SQLite never shrinks one, and
    /// two tunnels sharing a history grew it to 7 times the history.
    #[tokio::test]
    async fn an_idle_writer_leaves_no_wal_behind_unless_another_process_reads() {
        let dir = ScratchDir::new("recorder-wal");
        let path = dir.0.join("history.db");
        let wal = dir.0.join("history.db-wal");
        let wal_len = || std::fs::metadata(&wal).map_or(0, |m| m.len());
        let (recorder, _handle, mut reported) = start(&path);
        // Another process reading holds the WAL as it was.
        let reader = rusqlite::Connection::open(&path).unwrap();
        reader.execute_batch("BEGIN").unwrap();
        let _: i64 = reader
            .query_row("SELECT count(*) FROM deliveries", [], |r| r.get(0))
            .unwrap();
        for n in 0..20 {
            let ticket = recorder
                .record_request(delivery(&format!("evt_{n}"), "/"))
                .await
                .unwrap();
            recorder.record_outcome(ticket, answered(200)).await.unwrap();
            next_report(&mut reported).await;
        }
        tokio::time::sleep(IDLE * 2).await;
        assert!(wal_len() > 0, "kept while read");
        reader.execute_batch("COMMIT").unwrap();
        wait_until("the WAL is emptied", || wal_len() == 0).await;
        let store = Store::open(&path).unwrap();
        assert_eq!(
            store.count(&ListQuery::default()).unwrap(),
            20,
            "everything in the history"
        );
    }

    #[tokio::test]
    async fn an_answer_finds_a_request_stored_in_an_earlier_transaction() {
        let dir = ScratchDir::new("recorder-later");
        let path = dir.0.join("history.db");
        let (recorder, _handle, mut reported) = start(&path);
        let ticket = recorder.record_request(delivery("evt_slow", "/")).await.unwrap();
        let reader = Store::open(&path).unwrap();
        // A slow handler: the request is committed alone, with no answer yet.
        wait_until("the request is written", || {
            reader.count(&ListQuery::default()).unwrap() > 0
        })
        .await;
        assert_eq!(reader.list(&ListQuery::default()).unwrap()[0].status, None);
        recorder.record_outcome(ticket, answered(202)).await.unwrap();
        let report = next_report(&mut reported).await;
        assert_eq!(report.status, Some(202));
        let stored = reader.list(&ListQuery::default()).unwrap();
        assert_eq!((stored[0].id, stored[0].status), (report.id, Some(202)));
    }

    /// Polls `done` until it holds, failing the test after 5 s.
    async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        let started = std::time::Instant::now();
        while !done() {
            assert!(started.elapsed() < Duration::from_secs(5), "waited 5 s until {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Deliveries stored without their answers, as the next open sees them.
    fn left_unanswered(path: &std::path::Path) -> i64 {
        let reader = rusqlite::Connection::open(path).unwrap();
        reader
            .query_row("SELECT count(*) FROM unanswered", [], |r| r.get(0))
            .unwrap()
    }

    #[tokio::test]
    async fn a_request_stored_before_its_answer_is_noted_until_the_answer_comes() {
        let dir = ScratchDir::new("recorder-unanswered");
        let path = dir.0.join("history.db");
        let (recorder, handle, mut reported) = start(&path);
        let ticket = recorder.record_request(delivery("evt_slow", "/")).await.unwrap();
        wait_until("the request is noted", || left_unanswered(&path) > 0).await;
        recorder.record_outcome(ticket, answered(200)).await.unwrap();
        assert_eq!(next_report(&mut reported).await.status, Some(200));
        assert_eq!(left_unanswered(&path), 0, "forgotten once answered");
        recorded(&recorder, &mut reported, delivery("evt_quick", "/")).await;
        assert_eq!(left_unanswered(&path), 0, "nothing stays noted once answered");
        handle.shutdown();
    }

    #[tokio::test]
    async fn at_shutdown_a_request_whose_answer_never_came_says_so() {
        let dir = ScratchDir::new("recorder-unanswered-stop");
        let path = dir.0.join("history.db");
        let (recorder, handle, _reported) = start(&path);
        recorder.record_request(delivery("evt_cut", "/")).await.unwrap();
        wait_until("the request is noted", || left_unanswered(&path) > 0).await;
        handle.shutdown();
        let store = Store::open(&path).unwrap();
        let stored = store.list(&ListQuery::default()).unwrap();
        assert_eq!(
            (stored[0].status, stored[0].error.as_deref()),
            (None, Some(super::super::recover::ORPHANED)),
            "not shown as waiting for good"
        );
        assert_eq!(left_unanswered(&path), 0);
    }

    #[test]
    fn a_batch_with_nothing_to_store_never_waits_for_the_history() {
        let dir = ScratchDir::new("writer-nothing-to-store");
        let path = dir.0.join("history.db");
        let mut writer = Writer {
            store: Store::open(&path).unwrap(),
            key_fields: Vec::new(),
            inbox_name: "inbox".into(),
            inbox: Arc::new(Mutex::new(Inbox::create(&path, &[]).unwrap())),
            applied: Arc::default(),
            stalled: Arc::default(),
            stopping: Arc::default(),
            awaited: BTreeMap::new(),
            gave_up_waiting: false,
            answered: VecDeque::new(),
            kept_answers: HashSet::new(),
            on_news: Box::new(|_| {}),
        };
        // Another process holds the lock, as `replay` does while it stores a run.
        let blocker = rusqlite::Connection::open(&path).unwrap();
        blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
        let replaced = std::fs::File::open(&path).unwrap();
        let mut batch = vec![Job::Close { _file: replaced }];
        writer
            .write(&mut batch)
            .expect("closing a replaced inbox file needs no transaction");
        assert!(batch.is_empty());
    }

    #[tokio::test]
    async fn the_writer_works_out_provider_event_key_and_type() {
        let dir = ScratchDir::new("recorder-identify");
        let (recorder, _handle, mut reported) = start(&dir.0.join("history.db"));
        let mut d = delivery("", "/webhooks/github");
        d.provider = None;
        d.event_key_source.clear();
        d.request_headers = vec![
            portpreview_shared::Header::new("x-github-event", "push"),
            portpreview_shared::Header::new("x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
            portpreview_shared::Header::new("x-github-hook-id", "42"),
        ];
        let first = recorded(&recorder, &mut reported, d.clone()).await;
        assert_eq!(first.provider.as_deref(), Some("github"));
        assert_eq!(first.event_type.as_deref(), Some("push"), "reported as stored");
        assert_eq!(first.event_key, "72d3162e-cc78-11e3-81ab-4c9367dc0958");
        assert!(first
            .event_key_source
            .to_ascii_lowercase()
            .starts_with("header:x-github-delivery"));
        let again = recorded(&recorder, &mut reported, d).await;
        assert_eq!(again.delivery_count, 2, "a redelivery is the 2nd delivery of its event");
    }

    /// A large Stripe event stored cut short (beside large uploads) is
    /// counted with its retry, which arrived whole.
    #[tokio::test]
    async fn a_body_stored_cut_short_keeps_the_event_id_its_start_holds() {
        let dir = ScratchDir::new("recorder-identify-cut");
        let (recorder, _handle, mut reported) = start(&dir.0.join("history.db"));
        let body = format!(
            r#"{{"id": "evt_large", "object": "event", "lines": "{}"}}"#,
            "x".repeat(200_000)
        );
        let mut whole = delivery("", "/webhooks/stripe");
        whole.provider = None;
        whole.event_key_source.clear();
        whole.request_headers = vec![portpreview_shared::Header::new("stripe-signature", "t=1,v1=x")];
        whole.request_body = body.clone().into_bytes();
        whole.request_body_size = body.len() as u64;
        let mut cut = whole.clone();
        cut.request_body.truncate(65_536);
        let first = recorded(&recorder, &mut reported, cut).await;
        assert_eq!(
            (first.event_key.as_str(), first.event_key_source.as_str()),
            ("evt_large", "body:/id")
        );
        let retry = recorded(&recorder, &mut reported, whole).await;
        assert_eq!((retry.event_key.as_str(), retry.delivery_count), ("evt_large", 2));
    }
    #[tokio::test]
    async fn deliveries_recorded_while_another_process_holds_the_lock_are_stored_once_it_lets_go() {
        let dir = ScratchDir::new("recorder-locked");
        let path = dir.0.join("history.db");
        let (recorder, _handle, mut reported) = start(&path);
        let blocker = rusqlite::Connection::open(&path).unwrap();
        blocker.busy_timeout(std::time::Duration::ZERO).unwrap();
        blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
        let keys = ["evt_locked_1", "evt_locked_2", "evt_locked_3"];
        for key in keys {
            let ticket = recorder.record_request(delivery(key, "/")).await.unwrap();
            recorder.record_outcome(ticket, answered(200)).await.unwrap();
        }
        // The writer waits out the busy timeout and keeps the batch; nothing
        // is reported while the lock is held.
        let early = tokio::time::timeout(std::time::Duration::from_secs(7), reported.recv()).await;
        assert!(early.is_err(), "reported while the lock was held: {early:?}");
        blocker.execute_batch("ROLLBACK").unwrap();
        for key in keys {
            let stored = next_report(&mut reported).await;
            assert!(stored.id > 0, "{stored:?}");
            assert_eq!((stored.event_key.as_str(), stored.status), (key, Some(200)));
        }
        let after = recorded(&recorder, &mut reported, delivery("evt_after", "/")).await;
        assert!(after.id > 0);
    }

    /// Another tunnel's long write, held a little past one busy timeout, is
    /// waited out without telling the user the history refuses writes.
    #[tokio::test]
    async fn a_lock_held_a_little_past_the_busy_timeout_is_no_news() {
        let dir = ScratchDir::new("recorder-briefly-locked");
        let path = dir.0.join("history.db");
        let told = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (reports, mut reported) = tokio::sync::mpsc::unbounded_channel();
        let (recorder, _handle) = super::super::Recorder::start(&path, Vec::new(), {
            let told = told.clone();
            move |news| match news {
                WriterNews::Stored(summary) => {
                    let _ = reports.send(summary);
                }
                WriterNews::Refusing(_) => told.store(true, Ordering::Release),
                _ => {}
            }
        })
        .unwrap();
        let blocker = rusqlite::Connection::open(&path).unwrap();
        blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
        let ticket = recorder.record_request(delivery("evt_waited", "/")).await.unwrap();
        recorder.record_outcome(ticket, answered(200)).await.unwrap();
        tokio::time::sleep(crate::store::BUSY_TIMEOUT + std::time::Duration::from_secs(1)).await;
        blocker.execute_batch("ROLLBACK").unwrap();
        let stored = next_report(&mut reported).await;
        assert_eq!(stored.event_key, "evt_waited");
        assert!(!told.load(Ordering::Acquire), "told of a lock a tunnel's write holds");
    }

    /// A write that fails for no passing reason (a damaged file, here a
    /// table gone) loses nothing: the batch waits, in memory and in the
    /// inbox, and is stored once the history is mended.
    #[tokio::test]
    async fn a_batch_the_history_cannot_take_is_kept_until_it_can() {
        let dir = ScratchDir::new("recorder-broken");
        let path = dir.0.join("history.db");
        let (recorder, handle, mut reported) = start(&path);
        let before = recorded(&recorder, &mut reported, delivery("evt_before", "/")).await;
        assert!(before.id > 0);
        let breaker = break_outcomes(&path);
        let keys = ["evt_broken_1", "evt_broken_2"];
        for key in keys {
            let ticket = recorder.record_request(delivery(key, "/")).await.unwrap();
            recorder.record_outcome(ticket, answered(200)).await.unwrap();
        }
        let early = tokio::time::timeout(std::time::Duration::from_millis(600), reported.recv()).await;
        assert!(
            early.is_err(),
            "reported while the history could not take it: {early:?}"
        );
        mend_outcomes(&breaker);
        for key in keys {
            let stored = next_report(&mut reported).await;
            assert!(stored.id > 0, "{stored:?}");
            assert_eq!((stored.event_key.as_str(), stored.status), (key, Some(200)));
        }
        handle.shutdown();
        let store = crate::store::Store::open(&path).unwrap();
        assert_eq!(store.list(&ListQuery::default()).unwrap().len(), 3);
    }

    /// On a full disk, the room freed takes the deliveries it can hold,
    /// though the backlog as a whole would not fit: written whole, it was
    /// refused until the disk had room for all of it. (A history limited
    /// to a number of pages is full as a full disk is.)
    #[tokio::test]
    async fn a_backlog_larger_than_the_room_freed_on_a_full_disk_is_stored_as_far_as_it_fits() {
        let dir = ScratchDir::new("recorder-full");
        let path = dir.0.join("history.db");
        let filler = rusqlite::Connection::open(&path).unwrap();
        // The writer takes the lock at each try: the frees wait their turn.
        filler.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
        let store = crate::store::Store::open(&path).unwrap();
        filler
            .execute_batch("CREATE TABLE filler (n INTEGER PRIMARY KEY, b BLOB)")
            .unwrap();
        for n in 0..4 {
            filler
                .execute("INSERT INTO filler VALUES (?1, zeroblob(120000))", [n])
                .unwrap();
        }
        let pages: i64 = store.conn.query_row("PRAGMA page_count", [], |row| row.get(0)).unwrap();
        store.conn.pragma_update(None, "max_page_count", pages + 2).unwrap();
        let (recorder, handle, mut reported) = super::super::tests::start_on(store, &path);
        // 12 deliveries of 30 kB: more than half the filler frees, less
        // than all of it.
        let mut keys = Vec::new();
        for n in 0..12 {
            let key = format!("evt_full_{n}");
            let mut d = delivery(&key, "/");
            d.request_body = format!("{{\"id\":\"{key}\",\"pad\":\"{}\"}}", "x".repeat(30_000)).into_bytes();
            let ticket = recorder.record_request(d).await.unwrap();
            recorder.record_outcome(ticket, answered(200)).await.unwrap();
            keys.push(key);
        }
        // Room for some of them, not all.
        filler.execute("DELETE FROM filler WHERE n < 2", []).unwrap();
        let mut stored = Vec::new();
        while stored.len() < 2 {
            stored.push(next_report(&mut reported).await.event_key);
        }
        // Room for the rest.
        filler.execute("DROP TABLE filler", []).unwrap();
        while stored.len() < keys.len() {
            stored.push(next_report(&mut reported).await.event_key);
        }
        assert_eq!(stored, keys, "each stored once, in order");
        handle.shutdown();
    }

    /// Asked to stop while the history cannot take a batch, the writer
    /// stops at once, and the requests stay in the inbox with the answers
    /// their callers got, for the next open.
    #[tokio::test]
    async fn a_stop_while_the_history_cannot_take_a_batch_keeps_it_in_the_inbox() {
        let dir = ScratchDir::new("recorder-broken-stop");
        let path = dir.0.join("history.db");
        let (recorder, handle, mut reported) = start(&path);
        recorded(&recorder, &mut reported, delivery("evt_before", "/")).await;
        let breaker = break_outcomes(&path);
        record_answered(&recorder, "evt_kept_", 50).await;
        let asked = std::time::Instant::now();
        tokio::task::spawn_blocking(move || handle.shutdown()).await.unwrap();
        assert!(
            asked.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            asked.elapsed()
        );
        // The inbox is locked for as long as its recorder lives: the process's.
        drop(recorder);
        mend_outcomes(&breaker);
        drop(breaker);
        // The next open moves them in.
        let store = crate::store::Store::open(&path).unwrap();
        let listed = store.list(&ListQuery::default()).unwrap();
        assert_eq!(listed.len(), 51, "{listed:?}");
        assert!(
            listed.iter().all(|s| s.status == Some(200) && s.error.is_none()),
            "each with the answer its caller got: {listed:?}"
        );
    }

    /// A tunnel killed while the history refuses writes leaves its
    /// requests in the inbox with the answers their callers got: they were
    /// kept there as the writes failed, not only at a graceful stop. The
    /// kill is a copy of the files as they are, opened elsewhere.
    #[tokio::test]
    async fn answers_waiting_on_a_history_that_refuses_writes_survive_a_kill() {
        let dir = ScratchDir::new("recorder-refused-kill");
        let path = dir.0.join("history.db");
        let (recorder, handle, mut reported) = start(&path);
        recorded(&recorder, &mut reported, delivery("evt_before", "/")).await;
        let breaker = break_outcomes(&path);
        record_answered(&recorder, "evt_refused_", 3).await;
        let killed_at = |n: u32| {
            let copy = dir.0.join(format!("killed-{n}"));
            std::fs::create_dir_all(&copy).unwrap();
            let files = [path.clone(), path.with_extension("db-wal")]
                .into_iter()
                .chain(crate::store::inbox::inbox_files(&path).into_iter().map(|(_, p)| p));
            for file in files.filter(|f| f.exists()) {
                std::fs::copy(&file, copy.join(file.file_name().unwrap())).unwrap();
            }
            mend_outcomes(&rusqlite::Connection::open(copy.join("history.db")).unwrap());
            let store = crate::store::Store::open(&copy.join("history.db")).unwrap();
            store.list(&ListQuery::default()).unwrap()
        };
        // The writer keeps the answers once its write has failed.
        let mut tries = 0;
        let listed = loop {
            let listed = killed_at(tries);
            if listed.len() == 4 && listed.iter().all(|s| s.status == Some(200)) || tries == 100 {
                break listed;
            }
            tries += 1;
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        assert_eq!(listed.len(), 4, "{listed:?}");
        assert!(
            listed.iter().all(|s| s.status == Some(200) && s.error.is_none()),
            "each with the answer its caller got: {listed:?}"
        );
        mend_outcomes(&breaker);
        // Stopped before the folder goes: a writer outliving it would make
        // the history again where it was.
        drop(recorder);
        tokio::task::spawn_blocking(move || handle.shutdown()).await.unwrap();
    }

    /// An idle tunnel stopped while another process holds the lock has
    /// nothing to write: it stops at once and leaves no inbox behind.
    #[tokio::test]
    async fn an_idle_stop_under_another_process_lock_writes_nothing() {
        let dir = ScratchDir::new("recorder-idle-locked-stop");
        let path = dir.0.join("history.db");
        let (recorder, handle, _reported) = start(&path);
        let blocker = rusqlite::Connection::open(&path).unwrap();
        blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
        let asked = std::time::Instant::now();
        tokio::task::spawn_blocking(move || handle.shutdown()).await.unwrap();
        assert!(
            asked.elapsed() < std::time::Duration::from_secs(3),
            "{:?}",
            asked.elapsed()
        );
        drop(recorder);
        assert!(crate::store::inbox::orphans(&path).is_empty(), "no inbox left");
    }
}
