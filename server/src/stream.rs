//! Per-stream state of one session: the streams in flight, their windows,
//! and the handle a caller's request holds while it is relayed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use portpreview_shared::message::STREAM_WINDOW;
use portpreview_shared::{ClientMessage, Header, ServerMessage, StreamId};
use tokio::sync::{mpsc, Semaphore};

use crate::registry::OpenError;
use crate::writer::Outbox;

/// Client messages queued for one caller before the stream is reset. Bytes
/// are bounded by the window; this bounds the count of tiny chunks.
const INBOUND_QUEUE: usize = 1024;

/// Request-body credit a client may hold at once; grants beyond it are
/// ignored, so a hostile client cannot overflow the counter.
const MAX_CREDIT: usize = 16 * STREAM_WINDOW as usize;

/// What the client said about one stream, in order.
#[derive(Debug)]
pub enum Inbound {
    /// The response's status and headers.
    Head {
        /// HTTP status code.
        status: u16,
        /// Response headers in order.
        headers: Vec<Header>,
        /// No body follows.
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
}

/// A client broke the protocol in a way that ends the session.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ProtocolError(pub String);

struct Entry {
    events: mpsc::Sender<Inbound>,
    credit: Arc<Semaphore>,
    allowed: Arc<AtomicU64>,
    received: u64,
    response_done: bool,
    request_done: bool,
    reset_sent: bool,
}

#[derive(Default)]
struct Table {
    entries: HashMap<StreamId, Entry>,
    closed: bool,
}

/// The streams in flight on one session.
pub struct Streams {
    table: Mutex<Table>,
    next_id: AtomicU64,
    max_in_flight: usize,
    outbox: Outbox,
}

impl Streams {
    /// An empty set of streams that writes through `outbox`.
    pub fn new(outbox: Outbox, max_in_flight: usize) -> Arc<Self> {
        Arc::new(Self {
            table: Mutex::new(Table::default()),
            next_id: AtomicU64::new(1),
            max_in_flight,
            outbox,
        })
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // Every critical section is a few map operations that cannot leave
        // the table inconsistent, so a poisoned lock is still usable.
        self.table.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Opens a stream for one request.
    pub fn open(self: &Arc<Self>) -> Result<StreamPort, OpenError> {
        let mut table = self.table();
        if table.closed {
            return Err(OpenError::Gone);
        }
        if table.entries.len() >= self.max_in_flight {
            return Err(OpenError::Busy);
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
                response_done: false,
                request_done: false,
                reset_sent: false,
            },
        );
        Ok(StreamPort {
            id,
            inbound,
            credit,
            allowed,
            outbox: self.outbox.clone(),
            streams: Arc::clone(self),
        })
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> usize {
        self.table().entries.len()
    }

    /// Refuses new streams from now on (the session is draining).
    pub fn refuse_new(&self) {
        self.table().closed = true;
    }

    /// Ends every stream: their callers see the client go away.
    pub fn close_all(&self) {
        let mut table = self.table();
        table.closed = true;
        for (_, entry) in table.entries.drain() {
            entry.credit.close();
        }
    }

    /// Routes one client message to its stream.
    pub fn deliver(&self, msg: ClientMessage, body: Bytes) -> Result<(), ProtocolError> {
        let mut table = self.table();
        let (stream, event) = match msg {
            ClientMessage::Hello { .. } => {
                return Err(ProtocolError("Hello sent twice".into()));
            }
            ClientMessage::Window { stream, credit } => {
                if let Some(entry) = table.entries.get(&stream) {
                    let room = MAX_CREDIT.saturating_sub(entry.credit.available_permits());
                    entry.credit.add_permits((credit as usize).min(room));
                }
                return Ok(());
            }
            ClientMessage::ResponseHead {
                stream,
                status,
                headers,
                end,
            } => (stream, Inbound::Head { status, headers, end }),
            ClientMessage::ResponseBody { stream, end } => (stream, Inbound::Body { data: body, end }),
            ClientMessage::Reset { stream, reason } => (stream, Inbound::Reset(reason)),
        };
        // Messages for streams already finished or reset cross in flight;
        // they are expected and dropped.
        let Some(entry) = table.entries.get_mut(&stream) else {
            return Ok(());
        };
        let mut ends = matches!(event, Inbound::Reset(_));
        if let Inbound::Head { end, .. } | Inbound::Body { end, .. } = &event {
            ends = *end;
        }
        if let Inbound::Body { data, .. } = &event {
            entry.received += data.len() as u64;
            if entry.received > entry.allowed.load(Ordering::Acquire) {
                return self.reset_locked(&mut table, stream, "response body over its window");
            }
        }
        if entry.events.try_send(event).is_err() {
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
            let _ = entry.events.try_send(Inbound::Reset(reason.to_string()));
            entry.credit.close();
        }
        self.outbox.reset(stream, reason);
        Ok(())
    }

    fn mark_request_done(&self, stream: StreamId) {
        if let Some(entry) = self.table().entries.get_mut(&stream) {
            entry.request_done = true;
        }
    }

    fn abandon(&self, stream: StreamId, reason: &str) {
        let mut table = self.table();
        if let Some(entry) = table.entries.get_mut(&stream) {
            if !entry.reset_sent {
                entry.reset_sent = true;
                self.outbox.reset(stream, reason);
            }
        }
    }

    fn finish(&self, stream: StreamId) {
        let entry = self.table().entries.remove(&stream);
        if let Some(entry) = entry {
            if !(entry.response_done && entry.request_done || entry.reset_sent) {
                self.outbox.reset(stream, "the caller went away");
            }
        }
    }
}

/// One request's hold on its stream. Dropping it ends the stream, telling
/// the client to stop when the exchange was not complete.
pub struct StreamPort {
    /// The stream's id on the socket.
    pub id: StreamId,
    /// What the client sends about this stream; `None` once it went away.
    pub inbound: mpsc::Receiver<Inbound>,
    credit: Arc<Semaphore>,
    allowed: Arc<AtomicU64>,
    outbox: Outbox,
    streams: Arc<Streams>,
}

impl StreamPort {
    /// The writer of this stream's session.
    pub fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    /// The request-body credit the client grants.
    pub fn credit(&self) -> Arc<Semaphore> {
        Arc::clone(&self.credit)
    }

    /// Notes that the request body was sent whole.
    pub fn request_done(&self) {
        self.streams.mark_request_done(self.id);
    }

    /// The request body's side of the stream, for the task that sends it.
    pub fn request_side(&self) -> RequestSide {
        RequestSide {
            id: self.id,
            streams: Arc::clone(&self.streams),
        }
    }

    /// Grants the client `credit` more response-body bytes.
    pub fn grant(&self, credit: u32) {
        self.allowed.fetch_add(u64::from(credit), Ordering::AcqRel);
        self.outbox.control(&ServerMessage::Window {
            stream: self.id,
            credit,
        });
    }
}

impl Drop for StreamPort {
    fn drop(&mut self) {
        self.streams.finish(self.id);
    }
}

/// What the task sending a request body reports about its stream.
pub struct RequestSide {
    id: StreamId,
    streams: Arc<Streams>,
}

impl RequestSide {
    /// The body went out whole.
    pub fn finished(&self) {
        self.streams.mark_request_done(self.id);
    }

    /// The relay gives up on the stream; the client is told once.
    pub fn abandon(&self, reason: &str) {
        self.streams.abandon(self.id, reason);
    }
}
