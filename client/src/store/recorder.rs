//! The tunnel's path into the history: an inbox file, then one writer thread.
//!
//! A caller must not hear back before its request is on disk, and must not
//! wait for SQLite either. So each request is appended to the recorder's
//! [`Inbox`], written out by [`Recorder::flush`] before any answer leaves
//! (one write for a whole burst), and handed to a dedicated thread that owns
//! the database connection. The thread wakes when work arrives, lets a short
//! window fill, and writes the whole window in one transaction: one commit
//! serves every request of the window instead of one commit per caller.
//! The queue is bounded twice: by jobs (when full, the tunnel keeps
//! forwarding and warns) and by the body bytes it holds (past them,
//! recording waits for the writer to catch up, so large bodies arriving
//! faster than SQLite takes them never pile up in memory). If the process
//! dies, the next one to open the history moves what the inbox still holds
//! into SQLite.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use portpreview_shared::provider::event_key;
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};

use super::inbox::{self, Inbox};
use super::{NewDelivery, Outcome, Store, StoreError};

/// Bodies longer than this are stored cut, with their full size kept.
pub const MAX_STORED_BODY: usize = 25 * 1024 * 1024;

/// Deliveries and outcomes waiting for the writer before `Full` is returned.
pub const QUEUE_CAPACITY: usize = 8192;

/// Most request and answer body bytes waiting for the writer.
pub const QUEUE_BYTES: usize = 64 * 1024 * 1024;

/// Room in the queue is counted in these, so that a semaphore's `u32`
/// permits cover every body size.
const ROOM_UNIT: usize = 1024;

/// Most jobs written in one transaction, so one commit never grows unbounded.
const MAX_BATCH: usize = 2048;

/// Most body bytes written in one transaction, for the same reason.
const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024;

/// How long the writer lets work gather before a commit. Nobody waits on
/// it but the live display and readers in other processes.
const WINDOW: Duration = Duration::from_millis(10);

/// Where a delivery landed in the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Row id of the delivery.
    pub id: i64,
    /// 1 for the first delivery of its event key, 2 for the first retry…
    pub delivery_number: i64,
    /// Provider as stored (detected by the writer when the caller left it out).
    pub provider: Option<String>,
    /// Event key as stored.
    pub event_key: String,
    /// How the event key was made.
    pub event_key_source: String,
}

/// Why a delivery was not recorded; the tunnel forwards it anyway.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The writer is behind by more than [`QUEUE_CAPACITY`] jobs.
    #[error("the history writer is behind; delivery not recorded")]
    Full,
    /// SQLite refused the write (disk full, database locked…).
    #[error("delivery not recorded: {0}")]
    Store(String),
    /// The inbox file could not be written (disk full…).
    #[error("delivery not recorded: cannot write the history inbox: {0}")]
    Inbox(std::io::Error),
    /// The writer has stopped.
    #[error("the history writer has stopped; delivery not recorded")]
    Closed,
}

enum Job {
    Request {
        seq: u64,
        delivery: Box<NewDelivery>,
        reply: oneshot::Sender<Result<Recorded, String>>,
        /// Given back when the job is done with.
        _room: OwnedSemaphorePermit,
    },
    Outcome {
        id: i64,
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
    queue: SyncSender<Job>,
    /// Room left for bodies in the queue, in [`ROOM_UNIT`]s.
    room: Arc<Semaphore>,
    /// Newest sequence number committed to SQLite.
    applied: Arc<AtomicU64>,
}

/// A request on disk in the inbox, on its way into SQLite.
#[derive(Debug)]
pub struct Pending(oneshot::Receiver<Result<Recorded, String>>);

impl Pending {
    /// Where the request landed, once it is committed to SQLite.
    pub async fn recorded(self) -> Result<Recorded, RecordError> {
        match self.0.await {
            Ok(result) => result.map_err(RecordError::Store),
            Err(_) => Err(RecordError::Closed),
        }
    }
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
    /// key when the provider gives no ID.
    pub fn start(path: &Path, key_fields: Vec<String>) -> Result<(Recorder, RecorderHandle), StoreError> {
        let store = Store::open(path)?;
        let inbox = Inbox::create(path, &key_fields)?;
        let inbox_name = inbox.name().to_owned();
        let (queue, jobs) = mpsc::sync_channel(QUEUE_CAPACITY);
        let applied = Arc::new(AtomicU64::new(0));
        let writer = Writer {
            store,
            key_fields,
            inbox_name,
            applied: Arc::clone(&applied),
        };
        let thread = std::thread::Builder::new()
            .name("history-writer".into())
            .spawn(move || writer.run(&jobs))?;
        let shared = Arc::new(Shared {
            inbox: Mutex::new(inbox),
            queue,
            room: Arc::new(Semaphore::new(QUEUE_BYTES / ROOM_UNIT)),
            applied,
        });
        let handle = RecorderHandle {
            shared: Arc::clone(&shared),
            thread: Some(thread),
        };
        Ok((Recorder { shared }, handle))
    }

    /// Records the request half of a delivery. When this returns `Ok`, the
    /// request is staged in the inbox; once [`Recorder::flush`] has run it is
    /// on disk and its caller may hear back. The [`Pending`] resolves once it
    /// is in SQLite. Waits while the queue holds [`QUEUE_BYTES`] of bodies.
    pub async fn record_request(&self, d: NewDelivery) -> Result<Pending, RecordError> {
        let room = self.room(d.request_body.len()).await?;
        let mut inbox = self.shared.inbox.lock().unwrap_or_else(|p| p.into_inner());
        if inbox.is_closed() {
            return Err(RecordError::Closed);
        }
        if let Err(err) = inbox.restart_if_applied(self.shared.applied.load(Ordering::Acquire)) {
            tracing::warn!(%err, "cannot start the history inbox over; it keeps growing");
        }
        let seq = inbox.append(&d).map_err(RecordError::Inbox)?;
        let (reply, answer) = oneshot::channel();
        let job = Job::Request {
            seq,
            delivery: Box::new(d),
            reply,
            _room: room,
        };
        match self.shared.queue.try_send(job) {
            Ok(()) => Ok(Pending(answer)),
            Err(TrySendError::Full(_)) => Err(RecordError::Full),
            Err(TrySendError::Disconnected(_)) => Err(RecordError::Closed),
        }
    }

    /// Waits for room for a body of `len` bytes in the queue.
    async fn room(&self, len: usize) -> Result<OwnedSemaphorePermit, RecordError> {
        let all = QUEUE_BYTES / ROOM_UNIT;
        // A body over the whole room takes all of it, so it still fits alone.
        let units = (len / ROOM_UNIT + 1).min(all);
        let units = u32::try_from(units).unwrap_or(u32::MAX);
        Arc::clone(&self.shared.room)
            .acquire_many_owned(units)
            .await
            .map_err(|_| RecordError::Closed)
    }

    /// Writes every request recorded so far to the inbox file. The tunnel
    /// calls this before any answer leaves the process.
    pub fn flush(&self) -> Result<(), RecordError> {
        let mut inbox = self.shared.inbox.lock().unwrap_or_else(|p| p.into_inner());
        inbox.flush().map_err(RecordError::Inbox)
    }

    /// Records the answer half of delivery `id`. Waits while the queue
    /// holds [`QUEUE_BYTES`] of bodies; when the writer is behind by
    /// [`QUEUE_CAPACITY`] jobs, the outcome is dropped with a warning.
    pub async fn record_outcome(&self, id: i64, o: Outcome) {
        let Ok(room) = self.room(o.response_body.len()).await else {
            tracing::warn!(delivery = id, "history writer stopped; outcome not recorded");
            return;
        };
        let job = Job::Outcome {
            id,
            outcome: Box::new(o),
            _room: room,
        };
        match self.shared.queue.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                tracing::warn!(delivery = id, "history writer behind; outcome not recorded")
            }
            Err(TrySendError::Disconnected(_)) => {
                tracing::warn!(delivery = id, "history writer stopped; outcome not recorded")
            }
        }
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

/// The writer thread's state.
struct Writer {
    store: Store,
    key_fields: Vec<String>,
    inbox_name: String,
    applied: Arc<AtomicU64>,
}

impl Writer {
    fn run(self, jobs: &Receiver<Job>) {
        let mut batch = Vec::with_capacity(64);
        // Blocks only when idle; the first job opens a window for the rest.
        while let Ok(first) = jobs.recv() {
            if !matches!(first, Job::Shutdown) {
                std::thread::sleep(WINDOW);
            }
            let mut bytes = first.body_len();
            batch.push(first);
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
            self.write(std::mem::take(&mut batch));
            if stop {
                return;
            }
        }
    }

    /// Writes one batch in one transaction, then answers the waiting callers.
    fn write(&self, mut batch: Vec<Job>) {
        let mut newest = None;
        for job in &mut batch {
            if let Job::Request { seq, delivery, .. } = job {
                identify(delivery, &self.key_fields);
                newest = Some(*seq);
            }
        }
        let mut replies = Vec::new();
        let mut outcomes = 0usize;
        let result = self.store.write(|store| {
            let mut recorded = Vec::new();
            for job in &batch {
                match job {
                    Job::Request { delivery, .. } => recorded.push(store.insert_recorded_row(delivery)?),
                    Job::Outcome { id, outcome, .. } => {
                        outcomes += 1;
                        store.outcome_row(*id, outcome)?;
                    }
                    Job::Shutdown => {}
                }
            }
            if let Some(seq) = newest {
                store.mark_inbox_applied(&self.inbox_name, seq)?;
            }
            Ok(recorded)
        });
        if let Some(seq) = newest {
            // Failed requests count as done too: they were reported lost,
            // and must not keep the inbox from starting over.
            self.applied.store(seq, Ordering::Release);
        }
        for job in batch {
            if let Job::Request { reply, .. } = job {
                replies.push(reply);
            }
        }
        match result {
            Ok(recorded) => {
                for (reply, recorded) in replies.into_iter().zip(recorded) {
                    // The caller may have given up waiting; the row is stored anyway.
                    let _ = reply.send(Ok(recorded));
                }
            }
            Err(err) => {
                tracing::warn!(%err, deliveries = replies.len(), outcomes, "history write failed; tunnel keeps forwarding");
                let message = err.to_string();
                for reply in replies {
                    let _ = reply.send(Err(message.clone()));
                }
            }
        }
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

    /// Records `d` and waits for its row.
    async fn recorded(recorder: &Recorder, d: NewDelivery) -> Recorded {
        recorder.record_request(d).await.unwrap().recorded().await.unwrap()
    }

    #[tokio::test]
    async fn a_thousand_deliveries_are_all_committed() {
        let dir = ScratchDir::new("recorder-many");
        let path = dir.0.join("history.db");
        let (recorder, handle) = Recorder::start(&path, Vec::new()).unwrap();
        let sends = (0..1000).map(|n| {
            let recorder = recorder.clone();
            async move {
                match recorder.record_request(delivery(&format!("evt_{}", n % 10), "/")).await {
                    Ok(pending) => pending.recorded().await,
                    Err(err) => Err(err),
                }
            }
        });
        let recorded: Vec<Recorded> = join_all(sends).await.into_iter().map(Result::unwrap).collect();
        for r in &recorded {
            recorder.record_outcome(r.id, answered(204)).await;
        }
        handle.shutdown();

        let mut numbers: Vec<i64> = recorded.iter().map(|r| r.delivery_number).collect();
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
    async fn a_request_is_on_disk_once_flushed_and_in_sqlite_once_pending_resolves() {
        let dir = ScratchDir::new("recorder-commit");
        let path = dir.0.join("history.db");
        let (recorder, _handle) = Recorder::start(&path, Vec::new()).unwrap();
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
            let pending = recorder.record_request(delivery(&key, "/c")).await.unwrap();
            recorder.flush().unwrap();
            assert!(in_file(&key), "{key} is in the inbox before anyone hears back");
            let recorded = pending.recorded().await.unwrap();
            let stored: String = reader
                .query_row("SELECT event_key FROM deliveries WHERE id = ?1", [recorded.id], |r| {
                    r.get(0)
                })
                .unwrap();
            assert_eq!(stored, key);
            assert_eq!(recorded.delivery_number, 1);
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
    async fn an_answer_with_no_request_after_it_still_lands_soon() {
        let dir = ScratchDir::new("recorder-linger");
        let path = dir.0.join("history.db");
        let (recorder, _handle) = Recorder::start(&path, Vec::new()).unwrap();
        let recorded = recorded(&recorder, delivery("evt_last", "/")).await;
        recorder.record_outcome(recorded.id, answered(202)).await;
        let reader = Store::open(&path).unwrap();
        let started = std::time::Instant::now();
        loop {
            let status = reader.list(&ListQuery::default()).unwrap()[0].status;
            if status == Some(202) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the answer was never written"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn the_writer_works_out_provider_and_event_key() {
        let dir = ScratchDir::new("recorder-identify");
        let (recorder, _handle) = Recorder::start(&dir.0.join("history.db"), Vec::new()).unwrap();
        let mut d = delivery("", "/webhooks/github");
        d.provider = None;
        d.event_key_source.clear();
        d.request_headers = vec![
            portpreview_shared::Header::new("x-github-event", "push"),
            portpreview_shared::Header::new("x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
            portpreview_shared::Header::new("x-github-hook-id", "42"),
        ];
        let first = recorded(&recorder, d.clone()).await;
        assert_eq!(first.provider.as_deref(), Some("github"));
        assert_eq!(first.event_key, "72d3162e-cc78-11e3-81ab-4c9367dc0958");
        assert!(first
            .event_key_source
            .to_ascii_lowercase()
            .starts_with("header:x-github-delivery"));
        let again = recorded(&recorder, d).await;
        assert_eq!(
            again.delivery_number, 2,
            "a redelivery is the 2nd delivery of its event"
        );
    }

    #[tokio::test]
    async fn recording_waits_while_the_queue_holds_its_share_of_bodies() {
        let dir = ScratchDir::new("recorder-room");
        let path = dir.0.join("history.db");
        let (recorder, _handle) = Recorder::start(&path, Vec::new()).unwrap();
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
        assert!(last.recorded().await.unwrap().id > 0);
    }

    #[tokio::test]
    async fn after_shutdown_recording_fails_quietly() {
        let dir = ScratchDir::new("recorder-closed");
        let (recorder, handle) = Recorder::start(&dir.0.join("history.db"), Vec::new()).unwrap();
        handle.shutdown();
        let err = recorder.record_request(delivery("evt_1", "/")).await.unwrap_err();
        assert!(matches!(err, RecordError::Closed), "{err:?}");
        recorder.record_outcome(1, Outcome::default()).await;
    }

    #[tokio::test]
    async fn a_failed_write_answers_with_an_error_and_the_writer_lives_on() {
        let dir = ScratchDir::new("recorder-locked");
        let path = dir.0.join("history.db");
        let (recorder, _handle) = Recorder::start(&path, Vec::new()).unwrap();
        let blocker = rusqlite::Connection::open(&path).unwrap();
        blocker.busy_timeout(std::time::Duration::ZERO).unwrap();
        blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
        // The writer waits out the busy timeout, then must answer, not hang.
        let held = tokio::time::timeout(std::time::Duration::from_secs(30), async {
            recorder
                .record_request(delivery("evt_locked", "/"))
                .await
                .unwrap()
                .recorded()
                .await
        })
        .await
        .expect("record_request hung");
        assert!(matches!(held, Err(RecordError::Store(_))), "{held:?}");
        blocker.execute_batch("ROLLBACK").unwrap();
        let recorded = recorded(&recorder, delivery("evt_after", "/")).await;
        assert!(recorded.id > 0);
    }
}
