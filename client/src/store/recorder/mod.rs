//! The tunnel's path into the history: an inbox file, then one writer thread.
//!
//! A caller must not hear back before its request is in a file (where it
//! survives the process dying; surviving a power cut would take an fsync
//! per burst), and must not wait for SQLite either. So each request is
//! appended to the recorder's inbox, written out by [`Recorder::flush`]
//! before any answer leaves (one write for a whole burst), and handed to a
//! dedicated thread that owns the database connection and runs below the
//! tunnel's priority. The thread wakes when work arrives, lets a short
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
//! the history moves what the inbox still holds into SQLite (a reading one
//! only if the lock is free at once; see [`Store::open_existing`]), and
//! gives every request whose answer died with it an outcome that says so: a
//! request committed without its answer is noted, by inbox, until the
//! answer comes.

pub(super) mod recover;

pub(crate) use recover::ORPHANED;
mod writer;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use portpreview_shared::sync::lock;
use portpreview_shared::text::counted;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::inbox::{Inbox, BODY_PART};
use super::{NewDelivery, Outcome, Store, StoreError, Summary};
pub(crate) use recover::recover;
pub use recover::Recovered;
use writer::{Job, Writer};

/// Bodies longer than this are stored cut, with their full size kept.
pub const MAX_STORED_BODY: usize = 25 * 1024 * 1024;

/// Most request and answer body bytes waiting for the writer.
pub const QUEUE_BYTES: usize = 64 * 1024 * 1024;

/// Most body bytes the exchanges in flight hold for the history, all
/// together: past it, a body is stored cut short rather than held whole.
pub const HELD_BYTES: usize = 96 * 1024 * 1024;

/// Of [`HELD_BYTES`], the room only the first [`KEPT_START`] bytes of a
/// body may take: large uploads spend the rest, and a webhook arriving
/// beside them is still kept whole, with the ID and event key in it.
pub const HELD_FOR_STARTS: usize = 16 * 1024 * 1024;

/// The start of a body that may use [`HELD_FOR_STARTS`]: as long as the
/// bodies that stay in their rows, which most webhooks are.
pub const KEPT_START: usize = super::write::SHARED_BODY;

/// The budget bodies held for the history count against, in
/// [`ROOM_UNIT`]s, shared by every exchange of a tunnel.
#[derive(Debug, Clone)]
pub struct HeldBudget {
    /// Room any bytes of a body may take.
    pub any: Arc<Semaphore>,
    /// Room the first [`KEPT_START`] bytes of a body take once `any` is spent.
    pub starts: Arc<Semaphore>,
    /// When a body was last told of as stored cut short for want of room:
    /// a burst of uploads cuts hundreds, and one line says it.
    pub told: Arc<Mutex<Option<std::time::Instant>>>,
}

impl HeldBudget {
    /// A budget of `any` bytes for any part of a body and `starts` more for
    /// their starts.
    pub fn new(any: usize, starts: usize) -> Self {
        Self {
            any: Arc::new(Semaphore::new(any / ROOM_UNIT)),
            starts: Arc::new(Semaphore::new(starts / ROOM_UNIT)),
            told: Arc::default(),
        }
    }
}

/// Room in the queue, and in the budget for held bodies, is counted in
/// these, so that a semaphore's `u32` permits cover every body size. Every
/// job takes at least one, which bounds the number of jobs too.
pub const ROOM_UNIT: usize = 1024;

/// Where a delivery landed in the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Row id of the delivery.
    pub id: i64,
    /// 1 for the first delivery of its event key, 2 for the first retry…
    pub delivery_number: i64,
    /// The event scope it was counted under (see [`NewDelivery::event_scope`]).
    pub event_scope: String,
}

/// Why a delivery was not recorded, or not yet safely; the tunnel forwards it anyway.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The inbox file could not be written (disk full…).
    #[error("cannot write the history inbox: {0}")]
    Inbox(std::io::Error),
    /// Requests already handed to the writer could not be written to the
    /// inbox file: the history still gets them, unless the process dies
    /// before the writer has stored them.
    #[error("cannot write the history inbox ({0}): the requests since the last write are stored in the history all the same, unless this process dies first")]
    Unsaved(std::io::Error),
    /// The writer has stopped.
    #[error("the history writer has stopped")]
    Closed,
    /// The store has refused writes for a while and the queue is full.
    #[error(
        "the history refuses writes (locked by another process, a full disk, a damaged file) and its queue is full"
    )]
    Unavailable,
}

/// What the history writer tells whoever shows the tunnel.
#[derive(Debug, Clone, PartialEq)]
pub enum WriterNews {
    /// A request is stored and its answer had not come by the commit: a
    /// slow handler's request shows while it is in flight.
    Waiting(Summary),
    /// The writer is done with both halves of a delivery: stored (with id
    /// 0 when its request's row went with a history replaced since).
    Stored(Summary),
    /// The history refuses writes (another process holds its lock, the
    /// disk is full, the file is damaged); deliveries wait in memory and in
    /// the inbox.
    Refusing(String),
    /// The history takes deliveries again.
    Resumed,
    /// A delivery already reported as stored was amended (see
    /// [`Recorder::amend`]): as the history has it now, and the status it
    /// was reported with.
    Amended {
        /// The delivery as the history has it now.
        summary: Summary,
        /// The status it was reported with.
        was: u16,
    },
    /// Something the user should know that changes nothing already shown.
    Notice(String),
}

/// Told of what the writer does; see [`WriterNews`].
pub type OnNews = Box<dyn FnMut(WriterNews) + Send>;

/// A request staged in the inbox; hand it back with the request's answer.
#[derive(Debug)]
pub struct Ticket(u64);

impl Ticket {
    /// What names the delivery once its answer is recorded, to amend it.
    pub fn answered(&self) -> AnsweredTicket {
        AnsweredTicket(self.0)
    }
}

/// Names a delivery whose answer is recorded, for [`Recorder::amend`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnsweredTicket(u64);

/// What became of an answer recorded as delivered, after all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Amendment {
    /// The status the answer was recorded with.
    pub was: u16,
    /// The status the history keeps now: none when no caller had it.
    pub status: Option<u16>,
    /// Why the answer recorded was not what its caller got, as the
    /// history shows it beside the delivery.
    pub error: String,
}

/// Hands deliveries to the writer thread. Cheap to clone.
#[derive(Clone)]
pub struct Recorder {
    shared: Arc<Shared>,
}

struct Shared {
    /// Appends and queues happen under this lock, so the writer sees
    /// requests in the order of their sequence numbers. The writer thread
    /// holds it too, to settle the inbox once it stops.
    inbox: Arc<Mutex<Inbox>>,
    queue: Sender<Job>,
    /// Room left for bodies in the queue, in [`ROOM_UNIT`]s.
    room: Arc<Semaphore>,
    /// Newest sequence number committed to SQLite.
    applied: Arc<AtomicU64>,
    /// Whether the store refuses the writer's batches: recording then
    /// never waits for room, so forwarding goes on.
    stalled: Arc<Stall>,
    /// Set once the writer is asked to stop: a pause between failed tries
    /// ends, and a last failed try is the last.
    stopping: Arc<AtomicBool>,
    /// Room for the bodies exchanges hold until they are recorded.
    held: HeldBudget,
}

/// Whether the store refuses the writer's batches, and news of when it
/// starts to, for recordings already waiting for room the writer may
/// never give back.
#[derive(Debug, Default)]
pub(super) struct Stall {
    refusing: AtomicBool,
    began: tokio::sync::Notify,
}

impl Stall {
    /// Notes whether the store refuses writes; waiters hear when it starts.
    pub(super) fn set(&self, refusing: bool) {
        let was = self.refusing.swap(refusing, Ordering::AcqRel);
        if refusing && !was {
            self.began.notify_waiters();
        }
    }

    /// True while the store refuses writes.
    pub(super) fn is_set(&self) -> bool {
        self.refusing.load(Ordering::Acquire)
    }
}

/// Owns the writer thread: `shutdown` writes what is queued, waits for the
/// thread to finish and removes the inbox. Dropping it asks the same of the
/// thread without waiting, as it may be dropped on an async thread, where
/// a store refusing writes would stall it for seconds; what the thread has
/// not stored when the process exits stays in the inbox for the next open.
pub struct RecorderHandle {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Recorder {
    /// Opens the database at `path` (moving in what a recorder that died
    /// left in its inbox), creates this recorder's inbox and starts the
    /// writer thread. `key_fields` choose the body fields that make an event
    /// key when the provider gives no ID; `on_news` hears of every
    /// delivery once it is stored with its answer, and more.
    pub fn start(
        path: &Path,
        key_fields: Vec<String>,
        on_news: impl FnMut(WriterNews) + Send + 'static,
    ) -> Result<(Recorder, RecorderHandle), StoreError> {
        Self::start_on(Store::open(path)?, path, key_fields, on_news)
    }

    /// [`Recorder::start`] writing with `store`, opened at `path`: a test
    /// limits the store's room.
    fn start_on(
        store: Store,
        path: &Path,
        key_fields: Vec<String>,
        on_news: impl FnMut(WriterNews) + Send + 'static,
    ) -> Result<(Recorder, RecorderHandle), StoreError> {
        let inbox = Inbox::create(path, &key_fields)?;
        let inbox_name = inbox.name().to_owned();
        // Unbounded in type only: every job holds room from the semaphore,
        // but an answer kept without its payload when there is none, a few
        // bytes for a request that held room.
        let (queue, jobs) = mpsc::channel();
        let applied = Arc::new(AtomicU64::new(0));
        let stalled = Arc::new(Stall::default());
        let stopping = Arc::new(AtomicBool::new(false));
        let inbox = Arc::new(Mutex::new(inbox));
        let writer = Writer {
            store,
            key_fields,
            inbox_name,
            inbox: Arc::clone(&inbox),
            applied: Arc::clone(&applied),
            stalled: Arc::clone(&stalled),
            stopping: Arc::clone(&stopping),
            awaited: BTreeMap::new(),
            gave_up_waiting: false,
            answered: std::collections::VecDeque::new(),
            kept_answers: std::collections::HashSet::new(),
            on_news: Box::new(on_news),
        };
        let (settled, done) = (Arc::clone(&inbox), Arc::clone(&applied));
        let thread = std::thread::Builder::new().name(WRITER_THREAD.into()).spawn(move || {
            yield_to_forwarding();
            let complete = writer.run(&jobs);
            // The thread settles the inbox itself, so that a handle
            // dropped without waiting still leaves no file behind.
            settle(&settled, done.load(Ordering::Acquire), complete);
        })?;
        let shared = Arc::new(Shared {
            inbox,
            queue,
            room: Arc::new(Semaphore::new(QUEUE_BYTES / ROOM_UNIT)),
            applied,
            stalled,
            stopping,
            held: HeldBudget::new(HELD_BYTES - HELD_FOR_STARTS, HELD_FOR_STARTS),
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
        let staged = self.stage(&d).await?;
        self.append_request(staged, d)
    }

    /// The waiting half of [`Recorder::record_request`]: room in the queue,
    /// and a large body's parts written ahead of its record. Cancelled, it
    /// gives both back and `d` is still the caller's, to record later.
    pub async fn stage(&self, d: &NewDelivery) -> Result<Staged, RecordError> {
        let room = self.room(d.request_body.len()).await?;
        let body = if d.request_body.len() >= BODY_PART {
            Some(self.write_body(&d.request_body).await?)
        } else {
            None
        };
        Ok(Staged { room, body })
    }

    /// The other half: appends `d`'s record after what `staged` holds. It
    /// never waits, so nothing can cut it off halfway.
    pub fn append_request(&self, staged: Staged, mut d: NewDelivery) -> Result<Ticket, RecordError> {
        let Staged { room, body } = staged;
        let mut inbox = lock(&self.shared.inbox);
        if inbox.is_closed() {
            return Err(RecordError::Closed);
        }
        if let Some(replaced) = inbox.cut_back(self.shared.applied.load(Ordering::Acquire)) {
            // Closed by the writer; should it be gone, here.
            drop(self.shared.queue.send(Job::Close { _file: replaced }));
        }
        let appended = match body {
            Some(body) => inbox.append_parted(body.finish(), &mut d),
            None => inbox.append(&mut d),
        };
        let seq = appended.map_err(RecordError::Inbox)?;
        let job = Job::Request {
            seq,
            delivery: Box::new(d),
            _room: room,
        };
        self.shared.queue.send(job).map_err(|_| RecordError::Closed)?;
        Ok(Ticket(seq))
    }

    /// Writes a large request body to the inbox ahead of its request, a
    /// part at a time, letting the tunnel serve everything else between
    /// parts.
    async fn write_body(&self, bytes: &[u8]) -> Result<BodyInProgress, RecordError> {
        let number = lock(&self.shared.inbox).begin_body().map_err(RecordError::Inbox)?;
        let body = BodyInProgress {
            inbox: Arc::clone(&self.shared.inbox),
            number,
            finished: false,
        };
        for part in bytes.chunks(BODY_PART) {
            tokio::task::yield_now().await;
            lock(&self.shared.inbox)
                .append_body_part(number, part)
                .map_err(RecordError::Inbox)?;
        }
        Ok(body)
    }

    /// The budget that bodies held for the history while their exchanges
    /// are in flight all count against.
    pub fn held_budget(&self) -> HeldBudget {
        self.shared.held.clone()
    }

    /// Waits for room for a body of `len` bytes in the queue; does not wait
    /// while the store is refusing writes, since the room may never come,
    /// and stops waiting once it starts to.
    async fn room(&self, len: usize) -> Result<OwnedSemaphorePermit, RecordError> {
        // A body over the whole room takes all of it, so it still fits alone.
        let units = portpreview_shared::room::units(len, ROOM_UNIT, QUEUE_BYTES / ROOM_UNIT);
        let room = &self.shared.room;
        loop {
            match Arc::clone(room).try_acquire_many_owned(units) {
                Ok(permit) => return Ok(permit),
                Err(tokio::sync::TryAcquireError::Closed) => return Err(RecordError::Closed),
                Err(tokio::sync::TryAcquireError::NoPermits) => {}
            }
            // Listening before looking, so a stall that begins between the
            // two is still heard of.
            let began = self.shared.stalled.began.notified();
            tokio::pin!(began);
            began.as_mut().enable();
            if self.shared.stalled.is_set() {
                return Err(RecordError::Unavailable);
            }
            tokio::select! {
                permit = Arc::clone(room).acquire_many_owned(units) => {
                    return permit.map_err(|_| RecordError::Closed);
                }
                () = &mut began => {}
            }
        }
    }

    /// Writes every request recorded so far to the inbox file, and says
    /// whether there were any. The tunnel calls this before any answer
    /// leaves the process.
    pub fn flush(&self) -> Result<bool, RecordError> {
        lock(&self.shared.inbox).flush().map_err(RecordError::Unsaved)
    }

    /// Records the answer half of the delivery `ticket` stands for. Waits
    /// while the queue holds [`QUEUE_BYTES`] of bodies. Once this returns
    /// `Ok`, the writer reports the delivery; on `Err` nobody will.
    ///
    /// While the store refuses writes and the queue is full, the answer is
    /// kept without its headers and body, a few bytes: its request is
    /// stored, or waits in the inbox to be, and without an answer its row
    /// would read as in flight for as long as the tunnel ran.
    pub async fn record_outcome(&self, ticket: Ticket, o: Outcome) -> Result<(), RecordError> {
        let (outcome, room) = match self.room(o.response_body.len()).await {
            Ok(room) => (o, Some(room)),
            Err(RecordError::Unavailable) => (without_payload(o), None),
            Err(err) => return Err(err),
        };
        let job = Job::Outcome {
            seq: ticket.0,
            outcome: Box::new(outcome),
            _room: room,
        };
        self.shared.queue.send(job).map_err(|_| RecordError::Closed)
    }

    /// Records what became of the answer of the delivery `answered` names
    /// after all, in place of the answer's status and error: the relay
    /// said its caller did not get it whole only after the answer was
    /// handed to the history. Never waits. Lost should the process die
    /// before the writer stores it, as the answer it amends would be.
    pub fn amend(&self, answered: AnsweredTicket, amendment: Amendment) -> Result<(), RecordError> {
        let job = Job::Amend {
            seq: answered.0,
            amendment,
        };
        self.shared.queue.send(job).map_err(|_| RecordError::Closed)
    }
}

/// Why an answer is stored without its headers and body.
pub(crate) const PAYLOAD_UNKEPT: &str =
    "the answer's headers and body were not recorded: the history refused writes and its queue was full";

/// `outcome` without its headers and body, saying so: the status its
/// caller got and how long it took are kept.
fn without_payload(outcome: Outcome) -> Outcome {
    let error = match outcome.error {
        Some(error) => format!("{error}; {PAYLOAD_UNKEPT}"),
        None => PAYLOAD_UNKEPT.to_string(),
    };
    Outcome {
        response_headers: Vec::new(),
        response_body: Vec::new(),
        error: Some(error),
        ..outcome
    }
}

/// What [`Recorder::stage`] set aside for one request.
pub struct Staged {
    room: OwnedSemaphorePermit,
    body: Option<BodyInProgress>,
}

/// A large body partly or wholly in the inbox, its request still to come.
/// Abandoned when dropped first (its exchange cancelled, a write failed), so
/// that its parts do not keep the inbox from being compacted.
struct BodyInProgress {
    inbox: Arc<Mutex<Inbox>>,
    number: u64,
    finished: bool,
}

impl BodyInProgress {
    /// The body's number, for appending its request.
    fn finish(mut self) -> u64 {
        self.finished = true;
        self.number
    }
}

impl Drop for BodyInProgress {
    fn drop(&mut self) {
        if !self.finished {
            lock(&self.inbox).abandon_body(self.number);
        }
    }
}

impl RecorderHandle {
    /// Writes everything queued, then stops the writer thread. Blocks until
    /// it has: call it where blocking is allowed.
    pub fn shutdown(mut self) {
        let Some(thread) = self.stop() else {
            return;
        };
        if thread.join().is_err() {
            tracing::warn!("history writer panicked");
            // It never got to settle the inbox.
            settle(&self.shared.inbox, self.shared.applied.load(Ordering::Acquire), false);
        }
    }

    /// Asks the writer to write what is queued and stop; returns its thread
    /// the first time.
    fn stop(&mut self) -> Option<JoinHandle<()>> {
        let thread = self.thread.take()?;
        self.shared.stopping.store(true, Ordering::Release);
        // The channel has no bound of its own (room is counted apart), so
        // this never waits. If the writer has died, it fails, and there is
        // nothing left to ask.
        let _ = self.shared.queue.send(Job::Shutdown);
        Some(thread)
    }
}

impl Drop for RecorderHandle {
    fn drop(&mut self) {
        // Detached, the thread still writes what is queued and settles the
        // inbox; only `shutdown` waits for it.
        drop(self.stop());
    }
}

/// Once the writer has stopped, with `applied` the newest sequence number it
/// committed and `complete` whether it finished its work: removes the inbox
/// if all of it is in SQLite, and otherwise writes it out for the next open
/// to move the rest in.
fn settle(inbox: &Mutex<Inbox>, applied: u64, complete: bool) {
    let mut inbox = lock(inbox);
    if complete && inbox.all_applied(applied) {
        inbox.discard();
        return;
    }
    let written = inbox.flush();
    // Said as it is: a full disk refuses the inbox as well as the history.
    match (inbox.unwritten_after(applied), written) {
        // A failed last write that dropped no request lost none.
        (0, _) => tracing::warn!("some deliveries did not reach the history; they are kept in its inbox"),
        (lost, written) => tracing::warn!(
            err = written.err().map(tracing::field::display),
            "{}: the history and its inbox both refused writes (a full disk?); the rest are kept in the inbox",
            counted(lost, "delivery is lost", "deliveries are lost")
        ),
    }
}

/// Name of the writer thread. Its panics are caught (see `identify`), so a
/// TUI stays up through them.
pub const WRITER_THREAD: &str = "history-writer";

/// How many nice steps the writer thread runs below the tunnel's.
#[cfg(target_os = "linux")]
const WRITER_NICENESS: i32 = 10;

/// Lowers the calling thread's scheduling priority, so that when the
/// machine is busy the tunnel's thread runs first and the history catches
/// up in the gaps; the queue and the inbox hold what it has not written
/// yet. Ten steps still leave it about a tenth of a core beside a program
/// that keeps one busy. On Linux a thread's nice value is its own; elsewhere
/// it is the whole process's, so there the writer keeps its priority.
fn yield_to_forwarding() {
    #[cfg(target_os = "linux")]
    {
        if let Err(err) = rustix::process::nice(WRITER_NICENESS) {
            tracing::debug!(%err, "the history writer keeps the tunnel's priority");
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::time::Duration;

    use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

    use super::*;
    use crate::store::tests::{delivery, ScratchDir};

    /// An answer with `status` and nothing else.
    pub(super) fn answered(status: u16) -> Outcome {
        Outcome {
            status: Some(status),
            ..Outcome::default()
        }
    }

    /// An answer that finds the store refusing writes and no room in the
    /// queue is stored without its headers and body, saying so, rather
    /// than dropped: its row would read as in flight for good.
    #[tokio::test]
    async fn an_answer_with_no_room_left_is_kept_without_its_payload() {
        let dir = ScratchDir::new("recorder-no-room");
        let path = dir.0.join("history.db");
        let (recorder, handle, mut reported) = start(&path);
        let ticket = recorder.record_request(delivery("evt_crowded", "/")).await.unwrap();
        // As the writer leaves things when the store has refused batches
        // until the queue filled.
        recorder.shared.stalled.set(true);
        let room = Arc::clone(&recorder.shared.room);
        let all = room.available_permits() as u32;
        let _taken = room.try_acquire_many_owned(all).unwrap();
        let answer = Outcome {
            status: Some(200),
            response_headers: vec![portpreview_shared::Header::new("content-type", "text/plain")],
            response_body: b"credited".to_vec(),
            response_body_size: 8,
            duration_ms: Some(3.0),
            error: None,
        };
        recorder
            .record_outcome(ticket, answer)
            .await
            .expect("kept, not refused");
        recorder.shared.stalled.set(false);
        let summary = next_report(&mut reported).await;
        assert_eq!(summary.status, Some(200), "the status its caller got");
        assert_eq!(summary.error.as_deref(), Some(PAYLOAD_UNKEPT));
        handle.shutdown();
        let stored = Store::open(&path).unwrap().get(summary.id).unwrap().unwrap();
        let outcome = stored.outcome.expect("an answer, not one in flight");
        assert_eq!((outcome.response_body.len(), outcome.response_body_size), (0, 8));
        assert!(outcome.response_headers.is_empty());
    }

    /// An answer already waiting for room when the store starts refusing
    /// writes stops waiting: the room may never come back, and the tunnel
    /// must go on forwarding.
    #[tokio::test]
    async fn an_answer_waiting_for_room_stops_waiting_once_the_store_refuses() {
        let dir = ScratchDir::new("recorder-stall-begins");
        let path = dir.0.join("history.db");
        let (recorder, handle, mut reported) = start(&path);
        let ticket = recorder.record_request(delivery("evt_stalled", "/")).await.unwrap();
        // All of it, the request's room too once the writer has stored it.
        let all = (QUEUE_BYTES / ROOM_UNIT) as u32;
        let taken = Arc::clone(&recorder.shared.room).acquire_many_owned(all);
        let taken = tokio::time::timeout(Duration::from_secs(30), taken)
            .await
            .unwrap()
            .unwrap();
        let waiting = recorder.record_outcome(ticket, answered(200));
        tokio::pin!(waiting);
        let still_waiting = tokio::time::timeout(Duration::from_millis(50), &mut waiting).await;
        assert!(
            still_waiting.is_err(),
            "with the store writing, the answer waits for room"
        );
        recorder.shared.stalled.set(true);
        tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("it stops waiting once the store refuses")
            .expect("kept, not refused");
        recorder.shared.stalled.set(false);
        drop(taken);
        let summary = next_report(&mut reported).await;
        assert_eq!(summary.status, Some(200));
        assert_eq!(summary.error.as_deref(), Some(PAYLOAD_UNKEPT));
        handle.shutdown();
    }

    /// A recorder on `path` whose reports the test reads.
    pub(super) fn start(path: &Path) -> (Recorder, RecorderHandle, UnboundedReceiver<Summary>) {
        start_on(Store::open(path).unwrap(), path)
    }

    /// [`start`] writing with `store`, opened at `path`.
    pub(super) fn start_on(store: Store, path: &Path) -> (Recorder, RecorderHandle, UnboundedReceiver<Summary>) {
        let (reports, reported) = unbounded_channel();
        let (recorder, handle) = Recorder::start_on(store, path, Vec::new(), move |news| {
            if let WriterNews::Stored(summary) | WriterNews::Amended { summary, .. } = news {
                let _ = reports.send(summary);
            }
        })
        .unwrap();
        (recorder, handle, reported)
    }

    /// The writer's next report of a delivery stored or amended, failing
    /// the test after 30 s.
    pub(super) async fn next_report(reported: &mut UnboundedReceiver<Summary>) -> Summary {
        tokio::time::timeout(Duration::from_secs(30), reported.recv())
            .await
            .expect("a report within 30 s")
            .expect("the writer is running")
    }

    /// The inbox file of the one recorder writing to `history.db` in `dir`.
    fn inbox_file(dir: &ScratchDir) -> std::path::PathBuf {
        std::fs::read_dir(&dir.0)
            .unwrap()
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with("history.db-inbox-"))
            .expect("an inbox beside the database")
            .path()
    }

    /// Records `d` answered with 200 and waits for the writer's report.
    pub(super) async fn recorded(
        recorder: &Recorder,
        reported: &mut UnboundedReceiver<Summary>,
        d: NewDelivery,
    ) -> Summary {
        let ticket = recorder.record_request(d).await.unwrap();
        recorder.record_outcome(ticket, answered(200)).await.unwrap();
        next_report(reported).await
    }

    /// The nice value of a thread, from its `/proc` stat line.
    #[cfg(target_os = "linux")]
    fn nice_of(stat_path: &Path) -> i32 {
        let stat = std::fs::read_to_string(stat_path).unwrap();
        // Fields after the command name, which ends at the last ')': state
        // first, nice the seventeenth.
        let fields = &stat[stat.rfind(')').unwrap() + 1..];
        fields.split_whitespace().nth(16).unwrap().parse().unwrap()
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_writer_thread_runs_below_the_tunnels_priority() {
        let dir = ScratchDir::new("recorder-nice");
        let (recorder, handle, mut reported) = start(&dir.0.join("history.db"));
        // Once a delivery is reported, the writer has long set its priority.
        recorded(&recorder, &mut reported, delivery("evt_nice", "/nice")).await;
        let ours = nice_of(Path::new("/proc/thread-self/stat"));
        let writers: Vec<i32> = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter(|task| {
                std::fs::read_to_string(task.path().join("comm")).is_ok_and(|comm| comm.trim() == WRITER_THREAD)
            })
            .map(|task| nice_of(&task.path().join("stat")))
            .collect();
        assert!(!writers.is_empty(), "a thread named {WRITER_THREAD}");
        let expected = (ours + WRITER_NICENESS).min(19);
        assert!(
            writers.iter().all(|nice| *nice == expected),
            "writers at {writers:?}, expected {expected}"
        );
        drop(recorder);
        handle.shutdown();
    }

    #[tokio::test]
    async fn a_request_is_on_disk_once_flushed_and_stored_with_its_answer_once_reported() {
        let dir = ScratchDir::new("recorder-commit");
        let path = dir.0.join("history.db");
        let (recorder, _handle, mut reported) = start(&path);
        let reader = rusqlite::Connection::open(&path).unwrap();
        let inbox = inbox_file(&dir);
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

    /// Once the tunnel is idle, the inbox keeps nothing SQLite holds,
    /// however small it is: a token in a request the history has since
    /// pruned must not stay on disk beside it.
    #[tokio::test]
    async fn an_idle_tunnels_inbox_keeps_nothing_the_history_holds() {
        let dir = ScratchDir::new("recorder-idle-cut");
        let path = dir.0.join("history.db");
        let (recorder, _handle, mut reported) = start(&path);
        let inbox = inbox_file(&dir);
        let mut secret = delivery("evt_secret", "/s");
        secret
            .request_headers
            .push(portpreview_shared::Header::new("authorization", "Bearer IDLE-SECRET"));
        let holds_it = || std::fs::read(&inbox).unwrap().windows(11).any(|w| w == b"IDLE-SECRET");
        let ticket = recorder.record_request(secret).await.unwrap();
        recorder.flush().unwrap();
        assert!(holds_it(), "in the inbox before its caller hears back");
        recorder.record_outcome(ticket, answered(200)).await.unwrap();
        next_report(&mut reported).await;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while holds_it() {
            assert!(
                std::time::Instant::now() < deadline,
                "the inbox still holds a stored request after 20 s idle"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // And the inbox still takes what comes next.
        recorded(&recorder, &mut reported, delivery("evt_after", "/a")).await;
    }

    #[tokio::test]
    async fn a_large_body_given_up_midway_does_not_keep_the_inbox_from_shrinking() {
        let dir = ScratchDir::new("recorder-body-dropped");
        let path = dir.0.join("history.db");
        let (recorder, _handle, mut reported) = start(&path);
        let inbox = inbox_file(&dir);
        let size = || std::fs::metadata(&inbox).unwrap().len();
        let mut big = delivery("evt_big", "/big");
        big.request_body = vec![b'x'; 32 * BODY_PART];
        {
            let mut recording = Box::pin(recorder.record_request(big));
            // Each poll writes one part and yields.
            for _ in 0..20 {
                assert!(futures_util::poll!(&mut recording).is_pending());
            }
            // Dropped here, as when the relay gives up on its exchange.
        }
        assert!(size() > 16 * BODY_PART as u64, "parts were written: {} bytes", size());
        recorded(&recorder, &mut reported, delivery("evt_1", "/a")).await;
        recorded(&recorder, &mut reported, delivery("evt_2", "/b")).await;
        assert!(size() < 64 * 1024, "the parts were dropped: {} bytes left", size());
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
    async fn a_dropped_handle_returns_at_once_and_its_writer_still_stores_what_was_queued() {
        let dir = ScratchDir::new("recorder-drop");
        let path = dir.0.join("history.db");
        let (recorder, handle, _reported) = start(&path);
        // Another process holds the lock: the writer's next batch waits for it.
        let blocker = rusqlite::Connection::open(&path).unwrap();
        blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
        recorder.record_request(delivery("evt_queued", "/")).await.unwrap();
        recorder.flush().unwrap();

        let started = std::time::Instant::now();
        drop(handle);
        // A drop that waited for the writer would wait out the lock's 5 s
        // busy timeout at the least.
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "dropping waited for the writer: {:?}",
            started.elapsed()
        );

        blocker.execute_batch("ROLLBACK").unwrap();
        let inbox_gone = || {
            !std::fs::read_dir(&dir.0)
                .unwrap()
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("history.db-inbox-"))
        };
        let waited = std::time::Instant::now();
        while !inbox_gone() {
            assert!(
                waited.elapsed() < Duration::from_secs(30),
                "the writer never settled its inbox"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let store = Store::open(&path).unwrap();
        let keys: Vec<String> = store
            .list(&crate::store::ListQuery::default())
            .unwrap()
            .into_iter()
            .map(|s| s.event_key)
            .collect();
        assert_eq!(keys, ["evt_queued"], "stored by the writer before it removed its inbox");
    }
}
