//! The tunnel's path into the history: an inbox file, then one writer thread.
//!
//! A caller must not hear back before its request is in a file (where it
//! survives the process dying; surviving a power cut would take an fsync
//! per burst), and must not wait for SQLite either. So each request is appended to the recorder's
//! [`Inbox`], written out by [`Recorder::flush`] before any answer leaves
//! (one write for a whole burst), and handed to a dedicated thread that owns
//! the database connection. The thread wakes when work arrives, lets a short
//! window fill, and writes the whole window in one transaction: one commit
//! serves every request of the window instead of one commit per caller.
//!
//! An answer follows its request by the request's [`Ticket`], not by its row
//! id, so the tunnel never waits for SQLite: a request and its answer usually
//! land in the same transaction, and the writer itself reports each delivery
//! once both halves are stored. The queue is bounded by the body bytes it
//! holds (each job counts at least 1 KiB): past them, recording waits
//! for the writer to catch up, so bodies arriving faster than SQLite takes
//! them never pile up in memory. If the process dies, the next one to open
//! the history moves what the inbox still holds into SQLite.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use portpreview_shared::provider::event_key;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::inbox::{self, Inbox};
use super::{NewDelivery, Outcome, Store, StoreError, Summary};

/// Bodies longer than this are stored cut, with their full size kept.
pub const MAX_STORED_BODY: usize = 25 * 1024 * 1024;

/// Most request and answer body bytes waiting for the writer.
pub const QUEUE_BYTES: usize = 64 * 1024 * 1024;

/// Most body bytes the exchanges in flight hold for the history, all
/// together: past it, a body is stored cut short rather than held whole.
pub const HELD_BYTES: usize = 96 * 1024 * 1024;

/// Room in the queue is counted in these, so that a semaphore's `u32`
/// permits cover every body size. Every job takes at least one, which
/// bounds the number of jobs too.
const ROOM_UNIT: usize = 1024;

/// Most stored requests the writer keeps waiting for their answers. An
/// answer that never comes (its exchange was cut off) must not hold memory
/// for good; past this, the oldest are given up.
const AWAITED_LIMIT: usize = 65_536;

/// Most jobs written in one transaction, so one commit never grows unbounded.
const MAX_BATCH: usize = 2048;

/// Most body bytes written in one transaction, for the same reason.
const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024;

/// How long the writer lets work gather before a commit. Nobody waits on
/// it but the live display and readers in other processes.
const WINDOW: Duration = Duration::from_millis(10);

/// Pauses between tries while the store refuses a batch for now (another
/// process holds the lock, the disk is full): the first, and the longest.
const RETRY_FIRST: Duration = Duration::from_millis(200);
const RETRY_MOST: Duration = Duration::from_secs(2);

/// Where a delivery landed in the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Row id of the delivery.
    pub id: i64,
    /// 1 for the first delivery of its event key, 2 for the first retry…
    pub delivery_number: i64,
}

/// Why a delivery was not recorded; the tunnel forwards it anyway.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The inbox file could not be written (disk full…).
    #[error("delivery not recorded: cannot write the history inbox: {0}")]
    Inbox(std::io::Error),
    /// The writer has stopped.
    #[error("the history writer has stopped; delivery not recorded")]
    Closed,
    /// The store has refused writes for a while and the queue is full.
    #[error("delivery not recorded: the history is unavailable (locked by another process, or the disk is full) and its queue is full")]
    Unavailable,
}

/// Told of each delivery once the writer is done with both its halves:
/// stored, or (with id 0) lost to a failed write.
pub type OnRecorded = Box<dyn FnMut(Summary) + Send>;

/// A request staged in the inbox; hand it back with the request's answer.
#[derive(Debug)]
pub struct Ticket(u64);

enum Job {
    Request {
        seq: u64,
        delivery: Box<NewDelivery>,
        /// Given back when the job is done with.
        _room: OwnedSemaphorePermit,
    },
    Outcome {
        seq: u64,
        outcome: Box<Outcome>,
        _room: OwnedSemaphorePermit,
    },
    Shutdown,
}

impl Job {
    /// Body bytes the job carries.
    fn body_len(&self) -> usize {
        match self {
            Job::Request { delivery, .. } => delivery.request_body.len(),
            Job::Outcome { outcome, .. } => outcome.response_body.len(),
            Job::Shutdown => 0,
        }
    }
}

/// Hands deliveries to the writer thread. Cheap to clone.
#[derive(Clone)]
pub struct Recorder {
    shared: Arc<Shared>,
}

struct Shared {
    /// Appends and queues happen under this lock, so the writer sees
    /// requests in the order of their sequence numbers.
    inbox: Mutex<Inbox>,
    queue: Sender<Job>,
    /// Room left for bodies in the queue, in [`ROOM_UNIT`]s.
    room: Arc<Semaphore>,
    /// Newest sequence number committed to SQLite.
    applied: Arc<AtomicU64>,
    /// True while the store refuses the writer's batches: recording then
    /// never waits for room, so forwarding goes on.
    stalled: Arc<AtomicBool>,
    /// Room for the bodies exchanges hold until they are recorded, in KiB.
    held: Arc<Semaphore>,
}

/// Owns the writer thread: `shutdown` (or dropping it) writes what is
/// queued, waits for the thread to finish and removes the inbox.
pub struct RecorderHandle {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Recorder {
    /// Opens the database at `path` (moving in what a recorder that died
    /// left in its inbox), creates this recorder's inbox and starts the
    /// writer thread. `key_fields` choose the body fields that make an event
    /// key when the provider gives no ID; `on_recorded` hears of every
    /// delivery once it is stored with its answer.
    pub fn start(
        path: &Path,
        key_fields: Vec<String>,
        on_recorded: impl FnMut(Summary) + Send + 'static,
    ) -> Result<(Recorder, RecorderHandle), StoreError> {
        let store = Store::open(path)?;
        let inbox = Inbox::create(path, &key_fields)?;
        let inbox_name = inbox.name().to_owned();
        // Unbounded in type only: every job holds room from the semaphore.
        let (queue, jobs) = mpsc::channel();
        let applied = Arc::new(AtomicU64::new(0));
        let stalled = Arc::new(AtomicBool::new(false));
        let writer = Writer {
            store,
            key_fields,
            inbox_name,
            applied: Arc::clone(&applied),
            stalled: Arc::clone(&stalled),
            awaited: BTreeMap::new(),
            on_recorded: Box::new(on_recorded),
        };
        let thread = std::thread::Builder::new()
            .name(WRITER_THREAD.into())
            .spawn(move || writer.run(&jobs))?;
        let shared = Arc::new(Shared {
            inbox: Mutex::new(inbox),
            queue,
            room: Arc::new(Semaphore::new(QUEUE_BYTES / ROOM_UNIT)),
            applied,
            stalled,
            held: Arc::new(Semaphore::new(HELD_BYTES / 1024)),
        });
        let handle = RecorderHandle {
            shared: Arc::clone(&shared),
            thread: Some(thread),
        };
        Ok((Recorder { shared }, handle))
    }

    /// Records the request half of a delivery. When this returns `Ok`, the
    /// request is staged in the inbox; once [`Recorder::flush`] has run it is
    /// on disk and its caller may hear back. Waits while the queue holds
    /// [`QUEUE_BYTES`] of bodies.
    pub async fn record_request(&self, d: NewDelivery) -> Result<Ticket, RecordError> {
        let room = self.room(d.request_body.len()).await?;
        let mut inbox = self.shared.inbox.lock().unwrap_or_else(|p| p.into_inner());
        if inbox.is_closed() {
            return Err(RecordError::Closed);
        }
        if let Err(err) = inbox.restart_if_applied(self.shared.applied.load(Ordering::Acquire)) {
            tracing::warn!(%err, "cannot start the history inbox over; it keeps growing");
        }
        let seq = inbox.append(&d).map_err(RecordError::Inbox)?;
        let job = Job::Request {
            seq,
            delivery: Box::new(d),
            _room: room,
        };
        self.shared.queue.send(job).map_err(|_| RecordError::Closed)?;
        Ok(Ticket(seq))
    }

    /// The budget, in KiB, that bodies held for the history while their
    /// exchanges are in flight all count against.
    pub fn held_budget(&self) -> Arc<Semaphore> {
        Arc::clone(&self.shared.held)
    }

    /// Waits for room for a body of `len` bytes in the queue; does not wait
    /// while the store is refusing writes, since the room may never come.
    async fn room(&self, len: usize) -> Result<OwnedSemaphorePermit, RecordError> {
        let all = QUEUE_BYTES / ROOM_UNIT;
        // A body over the whole room takes all of it, so it still fits alone.
        let units = (len / ROOM_UNIT + 1).min(all);
        let units = u32::try_from(units).unwrap_or(u32::MAX);
        let room = Arc::clone(&self.shared.room);
        if self.shared.stalled.load(Ordering::Acquire) {
            return room.try_acquire_many_owned(units).map_err(|err| match err {
                tokio::sync::TryAcquireError::Closed => RecordError::Closed,
                tokio::sync::TryAcquireError::NoPermits => RecordError::Unavailable,
            });
        }
        room.acquire_many_owned(units).await.map_err(|_| RecordError::Closed)
    }

    /// Writes every request recorded so far to the inbox file. The tunnel
    /// calls this before any answer leaves the process.
    pub fn flush(&self) -> Result<(), RecordError> {
        let mut inbox = self.shared.inbox.lock().unwrap_or_else(|p| p.into_inner());
        inbox.flush().map_err(RecordError::Inbox)
    }

    /// Records the answer half of the delivery `ticket` stands for. Waits
    /// while the queue holds [`QUEUE_BYTES`] of bodies. Once this returns
    /// `Ok`, the writer reports the delivery; on `Err` nobody will.
    pub async fn record_outcome(&self, ticket: Ticket, o: Outcome) -> Result<(), RecordError> {
        let room = self.room(o.response_body.len()).await?;
        let job = Job::Outcome {
            seq: ticket.0,
            outcome: Box::new(o),
            _room: room,
        };
        self.shared.queue.send(job).map_err(|_| RecordError::Closed)
    }
}

impl RecorderHandle {
    /// Writes everything queued, then stops the writer thread.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        // A blocking send: the writer is draining, so room comes soon. If it
        // has died the send fails and join reports nothing more to do.
        let _ = self.shared.queue.send(Job::Shutdown);
        if thread.join().is_err() {
            tracing::warn!("history writer panicked");
        }
        let mut inbox = self.shared.inbox.lock().unwrap_or_else(|p| p.into_inner());
        let applied = self.shared.applied.load(Ordering::Acquire);
        if inbox.all_applied(applied) {
            inbox.discard();
        } else {
            // What did not reach SQLite stays for the next open to move in.
            if let Err(err) = inbox.flush() {
                tracing::warn!(%err, "cannot write the history inbox");
            }
            tracing::warn!("some deliveries did not reach the history; they are kept in its inbox");
        }
    }
}

impl Drop for RecorderHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Name of the writer thread. Its panics are caught (see `identify`), so a
/// TUI stays up through them.
pub const WRITER_THREAD: &str = "history-writer";

/// The writer thread's state.
struct Writer {
    store: Store,
    key_fields: Vec<String>,
    inbox_name: String,
    applied: Arc<AtomicU64>,
    stalled: Arc<AtomicBool>,
    /// Stored requests whose answers have not come yet, by ticket.
    awaited: BTreeMap<u64, Summary>,
    on_recorded: OnRecorded,
}

impl Writer {
    fn run(mut self, jobs: &Receiver<Job>) {
        let mut batch = Vec::with_capacity(64);
        // Set while the store refuses batches for now: the batch is kept
        // and tried again after this pause, with whatever came meanwhile.
        let mut pause: Option<Duration> = None;
        loop {
            match pause {
                // Blocks only when idle; the first job opens a window for the rest.
                None => match jobs.recv() {
                    Ok(first) => {
                        if !matches!(first, Job::Shutdown) {
                            std::thread::sleep(WINDOW);
                        }
                        batch.push(first);
                    }
                    Err(_) => return,
                },
                Some(wait) => {
                    if let Ok(job) = jobs.recv_timeout(wait) {
                        batch.push(job);
                    }
                }
            }
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
                // Whatever raced in after the shutdown request is flushed too.
                batch.extend(jobs.try_iter());
            }
            match self.write(&mut batch) {
                Ok(()) => {
                    if pause.take().is_some() {
                        self.stalled.store(false, Ordering::Release);
                        tracing::warn!("the history takes deliveries again");
                    }
                }
                // At shutdown the requests stay in the inbox, which the next
                // open moves into the history.
                Err(err) if !stop => {
                    if pause.is_none() {
                        self.stalled.store(true, Ordering::Release);
                        tracing::warn!(%err, "the history refuses writes for now; deliveries wait in memory and the tunnel keeps forwarding");
                    }
                    pause = Some(pause.map_or(RETRY_FIRST, |p| (p * 2).min(RETRY_MOST)));
                    continue;
                }
                Err(err) => tracing::warn!(%err, "the history refused the last deliveries; they stay in its inbox"),
            }
            if stop {
                return;
            }
        }
    }

    /// Writes one batch in one transaction, then reports the deliveries
    /// whose answers it held, and empties the batch. When the store refuses
    /// it for now (see [`StoreError::is_transient`]), the batch is left as
    /// it is, to be tried again: nothing is reported or marked applied.
    fn write(&mut self, batch: &mut Vec<Job>) -> Result<(), StoreError> {
        let mut newest = None;
        for job in batch.iter_mut() {
            if let Job::Request { seq, delivery, .. } = job {
                identify(delivery, &self.key_fields);
                newest = Some(*seq);
            }
        }
        let Writer {
            store,
            inbox_name,
            awaited,
            ..
        } = &*self;
        let result = store.write(|store| {
            // Where this batch's requests landed, by ticket; their answers,
            // often in the same batch, find their rows here.
            let mut rows = HashMap::new();
            for job in batch.iter() {
                match job {
                    Job::Request { seq, delivery, .. } => {
                        rows.insert(*seq, store.insert_recorded_row(delivery)?);
                    }
                    Job::Outcome { seq, outcome, .. } => {
                        let id = rows
                            .get(seq)
                            .map(|row| row.id)
                            .or_else(|| awaited.get(seq).map(|s| s.id));
                        if let Some(id) = id.filter(|id| *id > 0) {
                            store.outcome_row(id, outcome)?;
                        }
                    }
                    Job::Shutdown => {}
                }
            }
            if let Some(seq) = newest {
                store.mark_inbox_applied(inbox_name, seq)?;
            }
            Ok(rows)
        });
        let mut rows = match result {
            Ok(rows) => rows,
            Err(err) if err.is_transient() => return Err(err),
            Err(err) => {
                let jobs = batch.len();
                tracing::warn!(%err, jobs, "history write failed; tunnel keeps forwarding");
                HashMap::new()
            }
        };
        if let Some(seq) = newest {
            // Failed requests count as done too: they were reported lost,
            // and must not keep the inbox from starting over.
            self.applied.store(seq, Ordering::Release);
        }
        for job in batch.drain(..) {
            match job {
                Job::Request { seq, delivery, .. } => {
                    self.awaited.insert(seq, summary(*delivery, rows.remove(&seq)));
                }
                Job::Outcome { seq, outcome, .. } => {
                    if let Some(mut summary) = self.awaited.remove(&seq) {
                        summary.status = outcome.status;
                        summary.duration_ms = Some(outcome.duration_ms);
                        summary.error = outcome.error;
                        (self.on_recorded)(summary);
                    }
                }
                Job::Shutdown => {}
            }
        }
        while self.awaited.len() > AWAITED_LIMIT {
            self.awaited.pop_first();
        }
        Ok(())
    }
}

/// A stored request as a history row still waiting for its answer; id 0
/// when its write failed.
fn summary(delivery: NewDelivery, recorded: Option<Recorded>) -> Summary {
    let (id, delivery_number) = recorded.map_or((0, 1), |r| (r.id, r.delivery_number));
    Summary {
        id,
        received_at_ms: delivery.received_at_ms,
        method: delivery.method,
        path: delivery.path,
        status: None,
        duration_ms: None,
        provider: delivery.provider,
        event_key: delivery.event_key,
        event_key_source: delivery.event_key_source,
        delivery_count: delivery_number,
        error: None,
        replay_of: delivery.replay_of,
    }
}

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
fn identify(delivery: &mut NewDelivery, key_fields: &[String]) {
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
    use futures_util::future::join_all;
    use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

    use super::*;
    use crate::store::tests::{delivery, ScratchDir};
    use crate::store::ListQuery;

    /// An answer with `status` and nothing else.
    fn answered(status: u16) -> Outcome {
        Outcome {
            status: Some(status),
            ..Outcome::default()
        }
    }

    /// A recorder on `path` whose reports the test reads.
    fn start(path: &Path) -> (Recorder, RecorderHandle, UnboundedReceiver<Summary>) {
        let (reports, reported) = unbounded_channel();
        let (recorder, handle) = Recorder::start(path, Vec::new(), move |summary| {
            let _ = reports.send(summary);
        })
        .unwrap();
        (recorder, handle, reported)
    }

    /// The writer's next report, failing the test after 30 s.
    async fn next_report(reported: &mut UnboundedReceiver<Summary>) -> Summary {
        tokio::time::timeout(Duration::from_secs(30), reported.recv())
            .await
            .expect("a report within 30 s")
            .expect("the writer is running")
    }

    /// Records `d` answered with 200 and waits for the writer's report.
    async fn recorded(recorder: &Recorder, reported: &mut UnboundedReceiver<Summary>, d: NewDelivery) -> Summary {
        let ticket = recorder.record_request(d).await.unwrap();
        recorder.record_outcome(ticket, answered(200)).await.unwrap();
        next_report(reported).await
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

    #[tokio::test]
    async fn a_request_is_on_disk_once_flushed_and_stored_with_its_answer_once_reported() {
        let dir = ScratchDir::new("recorder-commit");
        let path = dir.0.join("history.db");
        let (recorder, _handle, mut reported) = start(&path);
        let reader = rusqlite::Connection::open(&path).unwrap();
        let inbox = std::fs::read_dir(&dir.0)
            .unwrap()
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with("history.db-inbox-"))
            .expect("an inbox beside the database")
            .path();
        let in_file = |key: &str| {
            std::fs::read(&inbox)
                .unwrap()
                .windows(key.len())
                .any(|w| w == key.as_bytes())
        };
        for n in 0..20 {
            let key = format!("evt_{n}");
            let ticket = recorder.record_request(delivery(&key, "/c")).await.unwrap();
            recorder.flush().unwrap();
            assert!(in_file(&key), "{key} is in the inbox before anyone hears back");
            recorder.record_outcome(ticket, answered(201)).await.unwrap();
            let report = next_report(&mut reported).await;
            let stored: (String, u16) = reader
                .query_row(
                    "SELECT event_key, status FROM deliveries JOIN outcomes ON delivery_id = id WHERE id = ?1",
                    [report.id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .unwrap();
            assert_eq!(stored, (key, 201));
            assert_eq!(report.delivery_count, 1);
        }
    }

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

    #[tokio::test]
    async fn an_answer_finds_a_request_stored_in_an_earlier_transaction() {
        let dir = ScratchDir::new("recorder-later");
        let path = dir.0.join("history.db");
        let (recorder, _handle, mut reported) = start(&path);
        let ticket = recorder.record_request(delivery("evt_slow", "/")).await.unwrap();
        let reader = Store::open(&path).unwrap();
        let started = std::time::Instant::now();
        // A slow handler: the request is committed alone, with no answer yet.
        while reader.count(&ListQuery::default()).unwrap() == 0 {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the request was never written"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(reader.list(&ListQuery::default()).unwrap()[0].status, None);
        recorder.record_outcome(ticket, answered(202)).await.unwrap();
        let report = next_report(&mut reported).await;
        assert_eq!(report.status, Some(202));
        let stored = reader.list(&ListQuery::default()).unwrap();
        assert_eq!((stored[0].id, stored[0].status), (report.id, Some(202)));
    }

    #[tokio::test]
    async fn the_writer_works_out_provider_and_event_key() {
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
        assert_eq!(first.event_key, "72d3162e-cc78-11e3-81ab-4c9367dc0958");
        assert!(first
            .event_key_source
            .to_ascii_lowercase()
            .starts_with("header:x-github-delivery"));
        let again = recorded(&recorder, &mut reported, d).await;
        assert_eq!(again.delivery_count, 2, "a redelivery is the 2nd delivery of its event");
    }

    #[tokio::test]
    async fn recording_waits_while_the_queue_holds_its_share_of_bodies() {
        let dir = ScratchDir::new("recorder-room");
        let path = dir.0.join("history.db");
        let (recorder, _handle, mut reported) = start(&path);
        // Another process holds the lock: the writer is stuck, nothing leaves the queue.
        let blocker = rusqlite::Connection::open(&path).unwrap();
        blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
        let big = |n: usize| {
            let mut d = delivery(&format!("evt_{n}"), "/big");
            d.request_body = vec![b'x'; 1024 * 1024];
            d
        };
        let fit = QUEUE_BYTES / (1024 * 1024 + ROOM_UNIT);
        for n in 0..fit {
            tokio::time::timeout(Duration::from_secs(5), recorder.record_request(big(n)))
                .await
                .expect("room for the bodies that fit")
                .unwrap();
        }
        let mut waiting = Box::pin(recorder.record_request(big(fit)));
        assert!(
            tokio::time::timeout(Duration::from_millis(300), &mut waiting)
                .await
                .is_err(),
            "one body more waits for the writer instead of piling up in memory"
        );
        blocker.execute_batch("ROLLBACK").unwrap();
        let last = tokio::time::timeout(Duration::from_secs(30), waiting)
            .await
            .expect("room once the writer catches up")
            .unwrap();
        recorder.record_outcome(last, answered(200)).await.unwrap();
        assert!(next_report(&mut reported).await.id > 0);
    }

    #[tokio::test]
    async fn after_shutdown_recording_fails_quietly() {
        let dir = ScratchDir::new("recorder-closed");
        let (recorder, handle, _reported) = start(&dir.0.join("history.db"));
        handle.shutdown();
        let err = recorder.record_request(delivery("evt_1", "/")).await.unwrap_err();
        assert!(matches!(err, RecordError::Closed), "{err:?}");
        let err = recorder
            .record_outcome(Ticket(1), Outcome::default())
            .await
            .unwrap_err();
        assert!(matches!(err, RecordError::Closed), "{err:?}");
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
}
