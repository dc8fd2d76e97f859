//! Per-stream state of one session: the streams in flight, their windows,
//! and the handle a caller's request holds while it is relayed.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::{Bytes, BytesMut};
use portpreview_shared::codec::EncodeError;
use portpreview_shared::message::{grantable, CALLER_GONE_BEFORE_ANSWER, CALLER_GONE_DURING_ANSWER, STREAM_WINDOW};
use portpreview_shared::{ClientMessage, Header, ServerMessage, StreamId};
use tokio::sync::{mpsc, Semaphore};

use crate::answer_budget::{AnswerBudget, Charge, SHED};
use crate::port::StreamPort;
use crate::registry::{BodyAtOpen, OpenError};
use crate::writer::{Outbox, SendError};

/// Client messages queued for one caller. Bytes are bounded by the
/// window; this bounds the count of tiny chunks, which past it are joined
/// into one (see [`Entry::overflow`]).
const INBOUND_QUEUE: usize = 1024;

/// Bodies shorter than this are copied out of the read buffer even when
/// taken at once: cheap to copy, and all the more memory they would keep.
const OWN_COPY_BELOW: usize = 8 * 1024;

/// What the client said about one stream, in order.
#[derive(Debug)]
pub enum Inbound {
    /// The response's status and headers, with the start of its body.
    Head {
        /// HTTP status code.
        status: u16,
        /// Response headers in order.
        headers: Vec<Header>,
        /// Body bytes that came with the head.
        body: Bytes,
        /// The body is complete: nothing follows.
        end: bool,
    },
    /// A chunk of response body.
    Body {
        /// The bytes.
        data: Bytes,
        /// Last chunk.
        end: bool,
    },
    /// The client abandoned the stream.
    Reset(String),
    /// The relay ended the stream itself; why, in words for the caller.
    Ended(String),
}

/// An event in a stream's queue, with the charge on the answer bytes it
/// carries: given back when the caller's side takes it, or when the queue
/// is dropped with it.
#[derive(Debug)]
pub(crate) struct Queued {
    pub(crate) event: Inbound,
    _held: Option<Charge>,
}

impl From<Inbound> for Queued {
    /// An event that carries no answer bytes.
    fn from(event: Inbound) -> Self {
        Self { event, _held: None }
    }
}

/// What a caller is told when the tunnel's client leaves with its request.
pub const CLIENT_GONE: &str = "the tunnel's client went away while the request was in flight";

/// What a caller is told when the tunnel's client shuts down on purpose
/// (the user stopped it) with its request unread or unanswered.
pub const CLIENT_STOPPED: &str = "the tunnel's client shut down before it answered the request";

/// What a caller is told when the relay gives up on a client that went
/// silent (paused, or its network stalled) with its request.
pub const CLIENT_SILENT: &str =
    "the tunnel's client stopped answering while the request was in flight (paused, or its network stalled)";

/// A client broke the protocol in a way that ends the session.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ProtocolError(pub String);

struct Entry {
    events: mpsc::Sender<Queued>,
    credit: Arc<Semaphore>,
    allowed: Arc<AtomicU64>,
    received: u64,
    /// The answer's head has come: a caller gone from now on left during
    /// the answer, having had its status.
    head_received: bool,
    response_done: bool,
    request_done: bool,
    /// Its request body was still arriving when it opened, and has not
    /// all been sent.
    arriving: bool,
    reset_sent: bool,
    /// Body bytes that came while the queue was full, joined, and whether
    /// the last of them ended the body: a handler writing its answer a line
    /// at a time sends a chunk a line, faster than a caller may read them.
    /// Taken by the caller's side once the queue is empty; bounded by the
    /// window, as every body byte is, and charged as queued bytes are.
    overflow: Option<(BytesMut, bool, Charge)>,
    /// Why the relay gave the answer up, told when its queue was full or
    /// bytes waited past it: taken after them, as the overflow is.
    end_waiting: Option<String>,
}

/// Hashes a stream id with one multiplication. The map's keys are ids
/// the relay gave out itself, counting up, which no one can pick to
/// collide; SipHash, which guards against that, cost more than the rest of
/// each lookup, and every request looks its stream up four times.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_u64(&mut self, id: u64) {
        // Fibonacci hashing: spreads consecutive ids over the high bits
        // the map's control bytes come from, and its low bits too.
        self.0 = (self.0 ^ id).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(32);
    }
}

#[derive(Default)]
struct Table {
    entries: HashMap<StreamId, Entry, BuildHasherDefault<IdHasher>>,
    closed: bool,
    draining: bool,
}

impl Table {
    /// Streams whose request bodies are still arriving. Counted when asked,
    /// which is only when the table is mostly full: no count to keep right
    /// on the many ways a stream ends.
    fn arriving(&self) -> usize {
        self.entries.values().filter(|entry| entry.arriving).count()
    }
}

/// The streams in flight on one session.
pub struct Streams {
    table: Mutex<Table>,
    next_id: AtomicU64,
    max_in_flight: usize,
    outbox: Outbox,
    /// What the answers queued for callers are charged to, relay-wide.
    budget: Arc<AnswerBudget>,
}

impl Streams {
    /// An empty set of streams that writes through `outbox` and charges
    /// the answers it queues to `budget`.
    pub fn new(outbox: Outbox, max_in_flight: usize, budget: Arc<AnswerBudget>) -> Arc<Self> {
        Arc::new(Self {
            table: Mutex::new(Table::default()),
            next_id: AtomicU64::new(1),
            max_in_flight,
            outbox,
            budget,
        })
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // Every critical section is a few map operations that cannot leave
        // the table inconsistent, so a poisoned lock is still usable.
        portpreview_shared::sync::lock(&self.table)
    }

    /// Sends the client news it need not answer, if its queue has room.
    /// Fails only when the news does not fit in a frame: a client too
    /// busy to take it, or gone, loses only news.
    pub fn tell(&self, news: &ServerMessage, body: &[u8]) -> Result<(), EncodeError> {
        match self.outbox.try_send(news, body) {
            Ok(true) => {}
            Ok(false) => tracing::debug!("the client's queue is full; news of a request turned away was dropped"),
            Err(SendError::Closed) => {}
            Err(SendError::Unframable(err)) => return Err(err),
        }
        Ok(())
    }

    /// Opens a stream for one request whose body the relay holds as `body` says.
    pub fn open(self: &Arc<Self>, body: BodyAtOpen) -> Result<StreamPort, OpenError> {
        let mut table = self.table();
        if table.closed {
            return Err(OpenError::Gone);
        }
        if table.draining {
            return Err(OpenError::ShuttingDown);
        }
        if table.entries.len() >= self.max_in_flight {
            return Err(OpenError::Busy);
        }
        let arriving = body == BodyAtOpen::Arriving;
        if arriving && table.entries.len() >= self.most_arriving() && table.arriving() >= self.most_arriving() {
            return Err(OpenError::Uploading);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (events, inbound) = mpsc::channel(INBOUND_QUEUE);
        let credit = Arc::new(Semaphore::new(STREAM_WINDOW as usize));
        let allowed = Arc::new(AtomicU64::new(u64::from(STREAM_WINDOW)));
        table.entries.insert(
            id,
            Entry {
                events,
                credit: Arc::clone(&credit),
                allowed: Arc::clone(&allowed),
                received: 0,
                head_received: false,
                response_done: false,
                request_done: false,
                arriving,
                reset_sent: false,
                overflow: None,
                end_waiting: None,
            },
        );
        Ok(StreamPort::new(
            id,
            inbound,
            credit,
            allowed,
            self.outbox.clone(),
            Arc::clone(self),
        ))
    }

    /// Most requests whose bodies are still arriving: a crowd of callers
    /// trickling large bodies would otherwise hold every place, and
    /// webhooks, whose small bodies come whole before a stream opens,
    /// would be refused until the crowd gave up (up to the upload limit,
    /// 5 minutes by default). A quarter of the places, rounded up, is kept
    /// for them; a tunnel of one place keeps none.
    fn most_arriving(&self) -> usize {
        (self.max_in_flight - self.max_in_flight.div_ceil(4)).max(1)
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> usize {
        self.table().entries.len()
    }

    /// Refuses new streams from now on (the session is draining).
    pub fn refuse_new(&self) {
        self.table().draining = true;
    }

    /// Ends every stream, telling each caller `why` (when its queue has
    /// room; otherwise it sees the client go away).
    pub fn close_all(&self, why: &str) {
        let mut table = self.table();
        table.closed = true;
        for (_, entry) in table.entries.drain() {
            let _ = entry.events.try_send(Inbound::Ended(why.to_string()).into());
            entry.credit.close();
        }
    }

    /// Routes one client message to its stream.
    pub fn deliver(&self, msg: ClientMessage, body: Bytes) -> Result<(), ProtocolError> {
        let mut table = self.table();
        let (stream, mut event) = match msg {
            ClientMessage::Hello { .. } => {
                return Err(ProtocolError("Hello sent twice".into()));
            }
            ClientMessage::Window { stream, credit } => {
                if let Some(entry) = table.entries.get(&stream) {
                    entry
                        .credit
                        .add_permits(grantable(entry.credit.available_permits(), credit));
                }
                return Ok(());
            }
            ClientMessage::ResponseHead {
                stream,
                status,
                headers,
                end,
            } => (
                stream,
                Inbound::Head {
                    status,
                    headers,
                    body,
                    end,
                },
            ),
            ClientMessage::ResponseBody { stream, end } => (stream, Inbound::Body { data: body, end }),
            ClientMessage::Reset { stream, reason } => (stream, Inbound::Reset(reason)),
        };
        // Messages for streams already finished or reset cross in flight;
        // they are expected and dropped, as is anything a client sends
        // after its answer's end: only the window's bytes and one head may
        // wait in a stream's queue, whatever a client sends.
        let Some(entry) = table.entries.get_mut(&stream).filter(|entry| !entry.response_done) else {
            return Ok(());
        };
        let mut ends = matches!(event, Inbound::Reset(_));
        if let Inbound::Head { end, .. } | Inbound::Body { end, .. } = &event {
            ends = *end;
        }
        if matches!(event, Inbound::Head { .. }) {
            if entry.head_received {
                return self.reset_locked(&mut table, stream, "a second response head");
            }
            entry.head_received = true;
        }
        if let Inbound::Head { body: data, .. } | Inbound::Body { data, .. } = &mut event {
            entry.received += data.len() as u64;
            if entry.received > entry.allowed.load(Ordering::Acquire) {
                return self.reset_locked(&mut table, stream, "response body over its window");
            }
            // A body is a slice of the socket's read buffer, which held the
            // frames around it too: kept waiting behind a caller slow to
            // read, a small slice would keep a large buffer alive, counted
            // against no window. What waits, and what is small, gets its
            // own copy; a body taken at once stays where it was read.
            let waits = entry.events.capacity() < INBOUND_QUEUE;
            if waits || data.len() < OWN_COPY_BELOW {
                *data = Bytes::copy_from_slice(data);
            }
        }
        // Behind a full queue, or behind bytes already waiting past it, a
        // chunk joins those bytes, so the body stays in order.
        if let Inbound::Body { data, end } = &event {
            if entry.overflow.is_some() || entry.events.capacity() == 0 {
                let (waiting, ended, held) = entry
                    .overflow
                    .get_or_insert_with(|| (BytesMut::new(), false, self.budget.charge(0)));
                waiting.extend_from_slice(data);
                held.add(data.len() as u64);
                *ended = *end;
                if *end {
                    entry.response_done = true;
                }
                return Ok(());
            }
        }
        let held = match &event {
            Inbound::Head { body: data, .. } | Inbound::Body { data, .. } if !data.is_empty() => {
                Some(self.budget.charge(data.len() as u64))
            }
            _ => None,
        };
        if entry.events.try_send(Queued { event, _held: held }).is_err() {
            return self.reset_locked(&mut table, stream, "too many response chunks queued");
        }
        if ends {
            entry.response_done = true;
        }
        Ok(())
    }

    fn reset_locked(&self, table: &mut Table, stream: StreamId, reason: &str) -> Result<(), ProtocolError> {
        tracing::debug!(stream, reason, "resetting stream");
        if let Some(entry) = table.entries.remove(&stream) {
            // The relay's doing, for the client's fault: no reset of the client's.
            let why = format!("the relay dropped the answer of the tunnel's client: {reason}");
            let _ = entry.events.try_send(Inbound::Ended(why).into());
            entry.credit.close();
        }
        self.outbox.reset(stream, reason);
        Ok(())
    }

    /// What waited past the stream's full queue, once the caller's side
    /// has emptied the queue: the body bytes, joined into one chunk, then
    /// the end of an answer the relay gave up.
    pub(crate) fn take_waiting(&self, stream: StreamId) -> Option<Inbound> {
        let mut table = self.table();
        let entry = table.entries.get_mut(&stream)?;
        // Taken, the bytes are the caller's side's: their charge ends here.
        if let Some((data, end, _held)) = entry.overflow.take() {
            return Some(Inbound::Body {
                data: data.freeze(),
                end,
            });
        }
        entry.end_waiting.take().map(Inbound::Ended)
    }

    pub(crate) fn mark_request_done(&self, stream: StreamId) {
        if let Some(entry) = self.table().entries.get_mut(&stream) {
            entry.request_done = true;
            entry.arriving = false;
        }
    }

    pub(crate) fn abandon(&self, stream: StreamId, reason: &str) {
        let mut table = self.table();
        if let Some(entry) = table.entries.get_mut(&stream) {
            if !entry.reset_sent {
                entry.reset_sent = true;
                self.outbox.reset(stream, reason);
            }
            // An answer already under way (its head at the caller) ends
            // here: the client, told to stop, sends no end of its own, and
            // the caller would wait out the idle limit for the rest.
            if entry.head_received && !entry.response_done {
                entry.response_done = true;
                // Dropped behind a full queue, the end would leave the
                // caller to the idle limit after all.
                if entry.overflow.is_some() || entry.events.try_send(Inbound::Ended(reason.to_owned()).into()).is_err()
                {
                    entry.end_waiting = Some(reason.to_owned());
                }
            }
        }
    }

    pub(crate) fn discard(&self, stream: StreamId) {
        self.table().entries.remove(&stream);
    }

    /// Ends the stream as its caller's side lets it go; `shed` when the
    /// relay cut the caller off under the budget's pressure.
    pub(crate) fn finish(&self, stream: StreamId, shed: bool) {
        let entry = self.table().entries.remove(&stream);
        if let Some(entry) = entry {
            if !(entry.response_done && entry.request_done || entry.reset_sent) {
                let reason = if shed {
                    SHED
                } else if entry.response_done {
                    // The client answered before taking the whole body.
                    "the answer came whole before the request body: the rest of the body is not sent"
                } else if entry.head_received {
                    CALLER_GONE_DURING_ANSWER
                } else {
                    CALLER_GONE_BEFORE_ANSWER
                };
                self.outbox.reset(stream, reason);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::{self, Inbox};

    fn streams(max_in_flight: usize) -> (Arc<Streams>, Inbox) {
        let (outbox, inbox) = writer::channel();
        (Streams::new(outbox, max_in_flight, AnswerBudget::new(u64::MAX)), inbox)
    }

    fn body(stream: StreamId, end: bool) -> ClientMessage {
        ClientMessage::ResponseBody { stream, end }
    }

    /// The head of a 200 whose body follows.
    fn head(stream: StreamId) -> ClientMessage {
        ClientMessage::ResponseHead {
            stream,
            status: 200,
            headers: vec![],
            end: false,
        }
    }

    fn budgeted() -> (Arc<Streams>, Arc<AnswerBudget>, Inbox) {
        let (outbox, inbox) = writer::channel();
        let budget = AnswerBudget::new(u64::MAX);
        (Streams::new(outbox, 8, Arc::clone(&budget)), budget, inbox)
    }

    /// Answer bytes count from when they are queued until the caller's
    /// side takes them, heads' bodies as chunks.
    #[tokio::test]
    async fn queued_answer_bytes_are_held_until_the_caller_takes_them() {
        let (streams, budget, _inbox) = budgeted();
        let mut port = streams.open(BodyAtOpen::Whole).unwrap();
        streams.deliver(head(port.id), Bytes::from(vec![1; 100])).unwrap();
        streams
            .deliver(body(port.id, false), Bytes::from(vec![2; 1000]))
            .unwrap();
        streams.deliver(body(port.id, true), Bytes::new()).unwrap();
        assert_eq!(budget.held(), 1100);
        assert!(matches!(port.recv().await, Some(Inbound::Head { .. })));
        assert_eq!(budget.held(), 1000);
        assert!(matches!(port.recv().await, Some(Inbound::Body { .. })));
        assert_eq!(budget.held(), 0);
    }

    /// Bytes joined behind a full queue are held too, until taken.
    #[tokio::test]
    async fn bytes_waiting_past_a_full_queue_are_held_until_taken() {
        let (streams, budget, _inbox) = budgeted();
        let mut port = streams.open(BodyAtOpen::Whole).unwrap();
        streams.deliver(head(port.id), Bytes::new()).unwrap();
        let chunks = 2 * INBOUND_QUEUE;
        for n in 0..chunks {
            streams
                .deliver(body(port.id, n + 1 == chunks), Bytes::from_static(b"xy"))
                .unwrap();
        }
        assert_eq!(budget.held(), 2 * chunks as u64, "queued and waiting alike");
        let mut taken = 0;
        loop {
            match std::future::poll_fn(|cx| port.poll_inbound(cx)).await {
                Some(Inbound::Head { .. }) => {}
                Some(Inbound::Body { data, end }) => {
                    taken += data.len();
                    assert_eq!(budget.held(), (2 * chunks - taken) as u64, "given back as taken");
                    if end {
                        break;
                    }
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(budget.held(), 0);
    }

    /// However a stream ends with its answer untaken (reset by the relay,
    /// the session closing, the caller's side letting go), what it held
    /// is given back once nothing can take it.
    #[tokio::test]
    async fn bytes_of_answers_that_end_untaken_are_given_back() {
        let (streams, budget, _inbox) = budgeted();
        let chunk = Bytes::from(vec![0u8; 64 * 1024]);
        let over = streams.open(BodyAtOpen::Whole).unwrap();
        streams.deliver(head(over.id), Bytes::new()).unwrap();
        for _ in 0..=STREAM_WINDOW / (64 * 1024) {
            streams.deliver(body(over.id, false), chunk.clone()).unwrap();
        }
        let dropped = streams.open(BodyAtOpen::Whole).unwrap();
        streams.deliver(head(dropped.id), Bytes::new()).unwrap();
        for _ in 0..2 * INBOUND_QUEUE {
            streams
                .deliver(body(dropped.id, false), Bytes::from_static(b"z"))
                .unwrap();
        }
        let closed = streams.open(BodyAtOpen::Whole).unwrap();
        streams.deliver(head(closed.id), chunk.clone()).unwrap();
        assert!(budget.held() > u64::from(STREAM_WINDOW));
        drop(over);
        assert_eq!(budget.held(), 2 * INBOUND_QUEUE as u64 + chunk.len() as u64);
        drop(dropped);
        assert_eq!(budget.held(), chunk.len() as u64);
        streams.close_all("the relay shut down");
        drop(closed);
        assert_eq!(budget.held(), 0);
    }

    /// A stream whose caller the relay shed tells the client so, not that
    /// the caller went away.
    #[tokio::test]
    async fn a_shed_caller_is_told_to_the_client_as_shed() {
        let (streams, mut inbox) = streams(8);
        let shed = streams.open(BodyAtOpen::Whole).unwrap();
        let left = streams.open(BodyAtOpen::Whole).unwrap();
        for port in [&shed, &left] {
            port.request_done();
            streams.deliver(head(port.id), Bytes::new()).unwrap();
        }
        let (shed_id, left_id) = (shed.id, left.id);
        streams.finish(shed_id, true);
        streams.finish(left_id, false);
        drop((shed, left));
        let mut resets = inbox.drain_resets();
        resets.sort();
        assert_eq!(
            resets,
            [
                (shed_id, SHED.to_owned()),
                (left_id, CALLER_GONE_DURING_ANSWER.to_owned())
            ]
        );
    }

    #[tokio::test]
    async fn response_bytes_beyond_the_window_reset_only_that_stream() {
        let (streams, _inbox) = streams(8);
        let mut greedy = streams.open(BodyAtOpen::Whole).unwrap();
        let mut polite = streams.open(BodyAtOpen::Whole).unwrap();
        let chunk = Bytes::from(vec![0u8; 64 * 1024]);
        let head = |stream| ClientMessage::ResponseHead {
            stream,
            status: 200,
            headers: vec![],
            end: false,
        };
        streams.deliver(head(greedy.id), Bytes::new()).unwrap();
        streams.deliver(head(polite.id), Bytes::new()).unwrap();
        for _ in 0..STREAM_WINDOW / (64 * 1024) {
            streams.deliver(body(greedy.id, false), chunk.clone()).unwrap();
        }
        streams.deliver(body(greedy.id, false), chunk.clone()).unwrap();
        streams.deliver(body(polite.id, true), chunk.clone()).unwrap();

        let mut last = None;
        while let Ok(event) = greedy.try_recv() {
            last = Some(event);
        }
        assert!(
            matches!(last, Some(Inbound::Ended(ref why)) if why.ends_with("response body over its window")),
            "{last:?}"
        );
        assert_eq!(
            streams.in_flight(),
            1,
            "the greedy stream is gone, the polite one stays"
        );
        assert!(matches!(polite.recv().await, Some(Inbound::Head { .. })));
        assert!(matches!(polite.recv().await, Some(Inbound::Body { end: true, .. })));
    }

    /// Tiny chunks past the queue's count wait joined, in order, and the
    /// stream carries on: a handler writing a line at a time is no fault.
    #[tokio::test]
    async fn chunks_past_a_full_queue_wait_joined_and_in_order() {
        let (streams, _inbox) = streams(8);
        let mut port = streams.open(BodyAtOpen::Whole).unwrap();
        streams.deliver(head(port.id), Bytes::new()).unwrap();
        let lines = 3 * INBOUND_QUEUE;
        for n in 0..lines {
            let line = Bytes::from(format!("{n:05}\n"));
            streams.deliver(body(port.id, n + 1 == lines), line).unwrap();
        }
        assert_eq!(streams.in_flight(), 1, "not reset");
        assert!(matches!(port.recv().await, Some(Inbound::Head { .. })));
        let mut heard = Vec::new();
        loop {
            match std::future::poll_fn(|cx| port.poll_inbound(cx)).await {
                Some(Inbound::Body { data, end }) => {
                    heard.extend_from_slice(&data);
                    if end {
                        break;
                    }
                }
                other => panic!("{other:?}"),
            }
        }
        let expected: String = (0..lines).map(|n| format!("{n:05}\n")).collect();
        assert!(heard == expected.as_bytes(), "every line, in order");
    }

    /// An answer the relay gives up while its queue is full still ends for
    /// its caller, once the caller has read what came before: dropped, it
    /// left the caller to the idle limit.
    #[tokio::test]
    async fn an_answer_given_up_behind_a_full_queue_still_ends() {
        let (streams, _inbox) = streams(8);
        let mut port = streams.open(BodyAtOpen::Whole).unwrap();
        streams.deliver(head(port.id), Bytes::new()).unwrap();
        for _ in 0..2 * INBOUND_QUEUE {
            streams.deliver(body(port.id, false), Bytes::from_static(b"x")).unwrap();
        }
        port.abandon("the caller stopped reading");
        let mut bytes = 0;
        let ended = loop {
            let next = std::future::poll_fn(|cx| port.poll_inbound(cx));
            // An end dropped leaves the caller waiting: here, for good.
            match tokio::time::timeout(std::time::Duration::from_secs(10), next).await {
                Ok(Some(Inbound::Head { .. })) => {}
                Ok(Some(Inbound::Body { data, .. })) => bytes += data.len(),
                Ok(other) => break other,
                Err(_) => panic!("no end after {bytes} bytes"),
            }
        };
        assert_eq!(bytes, 2 * INBOUND_QUEUE, "what came before, in order");
        assert!(
            matches!(ended, Some(Inbound::Ended(ref why)) if why == "the caller stopped reading"),
            "{ended:?}"
        );
    }

    /// Heads are not counted against the window, so only one may wait per
    /// stream; and nothing waits after the answer's end, however many
    /// heads, resets or empty chunks a client sends there.
    #[tokio::test]
    async fn only_the_window_and_one_head_wait_in_a_streams_queue() {
        let (streams, _inbox) = streams(8);
        let head = |stream, end| ClientMessage::ResponseHead {
            stream,
            status: 200,
            headers: vec![Header::new("x-pad", vec![b'p'; 1000])],
            end,
        };
        let mut twice = streams.open(BodyAtOpen::Whole).unwrap();
        streams.deliver(head(twice.id, false), Bytes::new()).unwrap();
        streams.deliver(head(twice.id, false), Bytes::new()).unwrap();
        assert!(matches!(twice.recv().await, Some(Inbound::Head { .. })));
        assert!(
            matches!(twice.recv().await, Some(Inbound::Ended(ref why)) if why.ends_with(": a second response head")),
            "the stream is reset"
        );

        let mut ended = streams.open(BodyAtOpen::Whole).unwrap();
        streams.deliver(head(ended.id, true), Bytes::new()).unwrap();
        for _ in 0..INBOUND_QUEUE * 2 {
            streams.deliver(head(ended.id, true), Bytes::new()).unwrap();
            let reset = ClientMessage::Reset {
                stream: ended.id,
                reason: "x".repeat(1000),
            };
            streams.deliver(reset, Bytes::new()).unwrap();
            streams.deliver(body(ended.id, false), Bytes::new()).unwrap();
        }
        assert!(matches!(ended.recv().await, Some(Inbound::Head { end: true, .. })));
        assert!(ended.try_recv().is_err(), "nothing after the end is queued");
    }

    /// A body that waits, or a small one, does not keep the frame (and
    /// whatever else the read buffer held) it was cut from.
    #[tokio::test]
    async fn a_waiting_or_small_body_keeps_no_part_of_the_read_buffer() {
        let (streams, _inbox) = streams(8);
        let mut port = streams.open(BodyAtOpen::Whole).unwrap();
        let read_buffer = Bytes::from(vec![7u8; 256 * 1024]);
        let inside = |data: &Bytes| read_buffer.as_ptr_range().contains(&data.as_ptr());
        let head = ClientMessage::ResponseHead {
            stream: port.id,
            status: 200,
            headers: vec![],
            end: false,
        };
        streams.deliver(head, read_buffer.slice(0..16 * 1024)).unwrap();
        streams
            .deliver(body(port.id, false), read_buffer.slice(100_000..100_001))
            .unwrap();
        streams
            .deliver(body(port.id, true), read_buffer.slice(120_000..150_000))
            .unwrap();
        let Some(Inbound::Head { body: first, .. }) = port.recv().await else {
            panic!("a head")
        };
        assert!(inside(&first), "taken at once, a large body is not copied");
        for _ in 0..2 {
            let Some(Inbound::Body { data, .. }) = port.recv().await else {
                panic!("a body")
            };
            assert!(!inside(&data), "a body that waited is its own copy");
            assert!(data.iter().all(|b| *b == 7));
        }
    }

    #[tokio::test]
    async fn window_grants_add_credit_up_to_a_cap() {
        let (streams, _inbox) = streams(8);
        let port = streams.open(BodyAtOpen::Whole).unwrap();
        let credit = port.credit();
        assert_eq!(credit.available_permits(), STREAM_WINDOW as usize);
        streams
            .deliver(
                ClientMessage::Window {
                    stream: port.id,
                    credit: 10,
                },
                Bytes::new(),
            )
            .unwrap();
        assert_eq!(credit.available_permits(), STREAM_WINDOW as usize + 10);
        for _ in 0..64 {
            streams
                .deliver(
                    ClientMessage::Window {
                        stream: port.id,
                        credit: u32::MAX,
                    },
                    Bytes::new(),
                )
                .unwrap();
        }
        assert_eq!(credit.available_permits(), portpreview_shared::message::MAX_CREDIT);
    }

    #[tokio::test]
    async fn the_in_flight_cap_and_closing_are_enforced() {
        let (streams, _inbox) = streams(1);
        let mut first = streams.open(BodyAtOpen::Whole).unwrap();
        assert!(matches!(streams.open(BodyAtOpen::Whole), Err(OpenError::Busy)));
        streams.refuse_new();
        assert!(matches!(streams.open(BodyAtOpen::Whole), Err(OpenError::ShuttingDown)));
        streams.close_all("the relay shut down");
        assert!(
            matches!(first.recv().await, Some(Inbound::Ended(why)) if why == "the relay shut down"),
            "callers are told why"
        );
        assert!(first.recv().await.is_none(), "and nothing follows");
        assert!(first.credit().is_closed(), "a pump waiting for credit wakes up");
        assert!(matches!(streams.open(BodyAtOpen::Whole), Err(OpenError::Gone)));
    }

    #[tokio::test]
    async fn bodies_still_arriving_leave_a_quarter_of_the_places_to_requests_that_came_whole() {
        let (streams, _inbox) = streams(8);
        let uploads: Vec<StreamPort> = (0..6).map(|_| streams.open(BodyAtOpen::Arriving).unwrap()).collect();
        assert!(matches!(streams.open(BodyAtOpen::Arriving), Err(OpenError::Uploading)));
        let whole = streams.open(BodyAtOpen::Whole).unwrap();
        let _also_whole = streams.open(BodyAtOpen::Whole).unwrap();
        assert!(matches!(streams.open(BodyAtOpen::Whole), Err(OpenError::Busy)));
        // A body sent whole no longer counts, and a place let go is free
        // for an upload again.
        uploads[0].request_done();
        drop(whole);
        assert!(streams.open(BodyAtOpen::Arriving).is_ok());
    }

    #[tokio::test]
    async fn stray_messages_are_dropped_and_a_second_hello_is_an_error() {
        let (streams, _inbox) = streams(8);
        assert!(streams.deliver(body(42, true), Bytes::from_static(b"late")).is_ok());
        let hello = ClientMessage::Hello {
            protocol: 1,
            client_version: "x".into(),
            name: None,
        };
        assert!(streams.deliver(hello, Bytes::new()).is_err());
    }

    #[tokio::test]
    async fn an_unfinished_stream_is_reset_once_when_dropped() {
        let (streams, mut inbox) = streams(8);
        let done = streams.open(BodyAtOpen::Whole).unwrap();
        let cut = streams.open(BodyAtOpen::Whole).unwrap();
        let (done_id, cut_id) = (done.id, cut.id);
        done.request_done();
        let end = ClientMessage::ResponseHead {
            stream: done_id,
            status: 204,
            headers: vec![],
            end: true,
        };
        streams.deliver(end, Bytes::new()).unwrap();
        drop(done);
        cut.request_side().abandon("over the limit");
        drop(cut);
        drop(streams);
        let resets: Vec<StreamId> = inbox.drain_resets().into_iter().map(|(stream, _)| stream).collect();
        assert_eq!(resets, [cut_id], "one reset, for the unfinished stream only");
    }

    /// Given up on by the relay mid-answer (the caller's upload ran over
    /// the limit), an answer under way ends at once for its caller.
    #[tokio::test]
    async fn an_answer_under_way_ends_with_the_relays_giving_up() {
        let (streams, _inbox) = streams(8);
        let mut port = streams.open(BodyAtOpen::Arriving).unwrap();
        streams.deliver(head(port.id), Bytes::new()).unwrap();
        streams
            .deliver(body(port.id, false), Bytes::from_static(b"part"))
            .unwrap();
        port.request_side()
            .abandon("over the limit; the relay answered the caller 413");
        assert!(matches!(port.recv().await, Some(Inbound::Head { .. })));
        assert!(matches!(port.recv().await, Some(Inbound::Body { .. })));
        assert!(matches!(port.recv().await, Some(Inbound::Ended(why)) if why.starts_with("over the limit")));
        // What the client sends meanwhile, before it hears, is not queued.
        streams
            .deliver(body(port.id, true), Bytes::from_static(b"rest"))
            .unwrap();
        assert!(port.try_recv().is_err());
    }

    /// A client that answers before it took the whole request body (a 401
    /// to an upload) hears that the rest is not sent, not that the caller,
    /// who has its whole answer, went away.
    #[tokio::test]
    async fn an_answer_before_the_whole_body_stops_the_upload_for_what_it_is() {
        let (streams, mut inbox) = streams(8);
        let mut port = streams.open(BodyAtOpen::Arriving).unwrap();
        let head = portpreview_shared::request_ref::RequestHeadRef {
            stream: port.id,
            method: "POST",
            target: "/upload",
            headers: &[],
            end: false,
        };
        port.send_head(&head, b"first part").await.unwrap();
        let answer = ClientMessage::ResponseHead {
            stream: port.id,
            status: 401,
            headers: vec![],
            end: true,
        };
        streams.deliver(answer, Bytes::new()).unwrap();
        let id = port.id;
        drop(port);
        assert_eq!(
            inbox.drain_resets(),
            [(
                id,
                "the answer came whole before the request body: the rest of the body is not sent".to_owned()
            )]
        );
    }
}
