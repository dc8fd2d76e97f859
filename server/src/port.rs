//! One request's hold on its stream, used by the caller's side.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use portpreview_shared::{ServerMessage, StreamId};
use tokio::sync::{mpsc, Semaphore};

use crate::stream::{Inbound, Streams};
use crate::writer::Outbox;

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
    pub(crate) fn new(
        id: StreamId,
        inbound: mpsc::Receiver<Inbound>,
        credit: Arc<Semaphore>,
        allowed: Arc<AtomicU64>,
        outbox: Outbox,
        streams: Arc<Streams>,
    ) -> Self {
        Self {
            id,
            inbound,
            credit,
            allowed,
            outbox,
            streams,
        }
    }

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

    /// Gives up on the stream, telling the client why once; its history
    /// records the reason.
    pub fn abandon(&self, reason: &str) {
        self.streams.abandon(self.id, reason);
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
        let window = ServerMessage::Window {
            stream: self.id,
            credit,
        };
        if let Err(err) = self.outbox.control(&window) {
            tracing::error!(%err, stream = self.id, "a window grant did not fit a frame");
        }
    }

    /// Ends a stream whose head never left: the client never heard of it,
    /// so it is not told anything.
    pub fn discard(self) {
        self.streams.discard(self.id);
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
