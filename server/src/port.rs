//! One request's hold on its stream, used by the caller's side.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use portpreview_shared::request_ref::RequestHeadRef;
use portpreview_shared::{ServerMessage, StreamId};
use tokio::sync::{mpsc, Semaphore};

use crate::stream::{Inbound, Queued, Streams};
use crate::write_stall::StallNote;
use crate::writer::{Outbox, SendError};

/// One request's hold on its stream. Dropping it ends the stream, telling
/// the client to stop when the exchange was not complete; a stream whose
/// head never left ends without a word to the client.
pub struct StreamPort {
    /// The stream's id on the socket.
    pub id: StreamId,
    /// What the client sends about this stream; `None` once it went away.
    inbound: mpsc::Receiver<Queued>,
    credit: Arc<Semaphore>,
    allowed: Arc<AtomicU64>,
    outbox: Outbox,
    streams: Arc<Streams>,
    /// The request's head is queued for the client: from then on the
    /// client knows the stream, and ending it early takes a reset.
    head_sent: bool,
    /// The caller's connection, as its write-stall watch sees it.
    caller: Option<Arc<StallNote>>,
}

impl StreamPort {
    pub(crate) fn new(
        id: StreamId,
        inbound: mpsc::Receiver<Queued>,
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
            head_sent: false,
            caller: None,
        }
    }

    /// Queues the request's head for the client, a small body riding in
    /// its frame, once the writer's queue has room. A caller who leaves
    /// while it waits, or a deadline that ends the wait, drops the port
    /// before the head left, and the client is told nothing: otherwise
    /// each caller giving up on a stalled client would queue a reset for
    /// a stream it never heard of, outside the queue's room.
    pub async fn send_head(&mut self, head: &RequestHeadRef<'_>, inline: &[u8]) -> Result<(), SendError> {
        self.outbox.send_head(head, inline).await?;
        self.head_sent = true;
        Ok(())
    }

    /// The next thing the client said about this stream, as
    /// [`mpsc::Receiver::poll_recv`] gives it, with the body bytes that
    /// waited past a full queue once the queue is empty.
    pub fn poll_inbound(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<Inbound>> {
        match self
            .inbound
            .poll_recv(cx)
            .map(|queued| queued.map(|queued| queued.event))
        {
            // Pending may also mean the task has had its turn (tokio's
            // budget) with the queue still full: the bytes behind it wait.
            std::task::Poll::Pending if self.inbound.is_empty() => match self.streams.take_waiting(self.id) {
                Some(joined) => std::task::Poll::Ready(Some(joined)),
                None => std::task::Poll::Pending,
            },
            other => other,
        }
    }

    /// The next thing the client said about this stream; `None` once it
    /// went away.
    pub async fn recv(&mut self) -> Option<Inbound> {
        self.inbound.recv().await.map(|queued| queued.event)
    }

    /// What the client said, if it is there now.
    #[cfg(test)]
    pub fn try_recv(&mut self) -> Result<Inbound, mpsc::error::TryRecvError> {
        self.inbound.try_recv().map(|queued| queued.event)
    }

    /// Tells the client, should the stream end with the caller's
    /// connection cut under the budget's pressure, that the relay shed it:
    /// otherwise it would read as a caller who went away.
    pub fn watch_caller(&mut self, caller: Arc<StallNote>) {
        self.caller = Some(caller);
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
}

impl Drop for StreamPort {
    fn drop(&mut self) {
        if self.head_sent {
            let shed = self.caller.as_ref().is_some_and(|caller| caller.was_shed());
            self.streams.finish(self.id, shed);
        } else {
            self.streams.discard(self.id);
        }
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
