//! Request bodies arriving from the relay: chunks in, credit back out, and a
//! copy kept for the history.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use portpreview_shared::message::{StreamId, STREAM_WINDOW};
use portpreview_shared::sync::lock;
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use super::outbox::Outbox;
use crate::store::recorder::{HeldBudget, HELD_BYTES, KEPT_START, ROOM_UNIT};

/// How often at most a body stored cut short for want of room is told of.
const CUT_TOLD_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// One chunk of request body as the relay sent it.
#[derive(Debug)]
pub struct Chunk {
    /// The bytes.
    pub data: Bytes,
    /// True on the last chunk.
    pub end: bool,
}

/// How much of a body the history keeps, and the budget every kept byte is
/// counted in: bodies held for the history while in flight share it, so
/// many large uploads at once cannot grow this process without bound.
#[derive(Debug, Clone, Default)]
pub struct Keep {
    limit: usize,
    budget: Option<HeldBudget>,
}

impl Keep {
    /// Keeps up to `limit` bytes of each body, all bodies together within
    /// `budget`.
    pub fn new(limit: usize, budget: HeldBudget) -> Self {
        Self {
            limit,
            budget: Some(budget),
        }
    }
}

/// Room a capture holds in its budget, given back when dropped: hold it
/// until the kept bytes are handed on.
#[derive(Debug, Default)]
pub struct Held {
    any: Option<OwnedSemaphorePermit>,
    starts: Option<OwnedSemaphorePermit>,
}

/// The part of a body kept for the history, up to a limit, with its full size.
#[derive(Debug, Default)]
pub struct Capture {
    /// Bytes kept.
    pub bytes: Vec<u8>,
    /// Bytes seen, kept or not.
    pub size: u64,
    /// True once the last chunk went by.
    pub complete: bool,
    /// True once the relay ended the stream before its last chunk.
    pub cut: bool,
    /// When a streamed body ended, whole or cut: from then on the
    /// handler has had all it will get, and its time to answer runs.
    pub ended_at: Option<std::time::Instant>,
    keep: Keep,
    held: Held,
    /// Bytes counted in the budget.
    reserved: usize,
    /// The length the body declared, up to the limit; 0 when unsaid.
    declared: usize,
    /// Set once the budget had no room: nothing more is kept.
    starved: bool,
}

/// Memory a capture takes before its body's bytes come, however long the
/// body says it is: a webhook of up to this size is copied once, into a
/// buffer that never has to grow (and move) under it.
const ROOM_AHEAD: usize = 1024 * 1024;

impl Capture {
    /// An empty capture for a body of `expected` bytes (0 when unsaid),
    /// kept up to the limit. Memory is taken as bytes come, not as the
    /// length is declared: a caller declaring 25 MiB and sending a trickle
    /// costs no more than it sent, neither in the budget nor in the
    /// process's memory, which under a cap (`ulimit -v`, strict
    /// overcommit) would refuse 25 MiB unwritten as surely as written.
    pub fn expecting(expected: u64, keep: Keep) -> Self {
        let declared = usize::try_from(expected).unwrap_or(usize::MAX).min(keep.limit);
        let mut capture = Self {
            keep,
            declared,
            ..Self::default()
        };
        // Refused, it is only grown later.
        let _ = capture.bytes.try_reserve_exact(declared.min(ROOM_AHEAD));
        capture
    }

    /// The capture of `chunks`, with room for `expected` bytes in all.
    pub fn of(chunks: &[Bytes], expected: u64, keep: Keep) -> Self {
        let seen: u64 = chunks.iter().map(|chunk| chunk.len() as u64).sum();
        let mut capture = Self::expecting(seen.max(expected), keep);
        for chunk in chunks {
            capture.add(chunk);
        }
        capture
    }

    /// Takes in `chunk` as it goes by: kept as [`Capture::add`] says, and
    /// the body's end marked with it.
    pub fn take_in(&mut self, chunk: &Chunk) {
        self.add(&chunk.data);
        self.complete = chunk.end;
        if chunk.end {
            self.ended_at = Some(std::time::Instant::now());
        }
    }

    /// Marks the body ended with no chunk to end it: whole if its last
    /// chunk went by, otherwise cut short (the relay dropped the stream).
    /// Says whether it was whole.
    pub fn end(&mut self) -> bool {
        self.ended_at.get_or_insert_with(std::time::Instant::now);
        if !self.complete {
            self.cut = true;
        }
        self.complete
    }

    /// Keeps `data` while under the limit and the budget has room, and
    /// counts it either way: a body the budget cut is stored cut short.
    pub fn add(&mut self, data: &[u8]) {
        self.size += data.len() as u64;
        let room = self.keep.limit.saturating_sub(self.bytes.len());
        let kept = data.len().min(room);
        if kept == 0 || self.starved {
            return;
        }
        if !self.reserve(self.bytes.len() + kept) {
            // A chunk across the end of the start keeps what falls in it,
            // which has room of its own.
            let start = KEPT_START.saturating_sub(self.bytes.len()).min(kept);
            if start > 0 && self.reserve(self.bytes.len() + start) && self.grow(start) {
                self.bytes.extend_from_slice(&data[..start]);
            }
            self.starved = true;
            self.tell_cut();
            return;
        }
        if !self.grow(kept) {
            self.starved = true;
            tracing::warn!(
                kept = self.bytes.len(),
                "the history keeps only the start of this body: the memory to hold more was refused"
            );
            return;
        }
        self.bytes.extend_from_slice(&data[..kept]);
    }

    /// The kept bytes and the room they hold in the budget.
    pub fn into_parts(self) -> (Vec<u8>, u64, Held) {
        (self.bytes, self.size, self.held)
    }

    /// Makes room for `more` bytes, doubling the buffer but never past the
    /// declared length; false when the allocator refuses.
    fn grow(&mut self, more: usize) -> bool {
        let needed = self.bytes.len() + more;
        if needed <= self.bytes.capacity() {
            return true;
        }
        let mut target = needed
            .max(self.bytes.capacity().saturating_mul(2))
            .min(self.keep.limit.max(needed));
        if self.declared >= needed {
            target = target.min(self.declared);
        }
        // Short of room to double, the bytes at hand may still fit.
        let len = self.bytes.len();
        self.bytes.try_reserve_exact(target - len).is_ok() || self.bytes.try_reserve_exact(needed - len).is_ok()
    }

    /// Counts `total` kept bytes in the budget; false when it has no room.
    /// The start of a body has room of its own once the rest is spent.
    fn reserve(&mut self, total: usize) -> bool {
        let Some(budget) = &self.keep.budget else {
            return true;
        };
        if total <= self.reserved {
            return true;
        }
        let units = (total - self.reserved).div_ceil(ROOM_UNIT);
        let units32 = u32::try_from(units).unwrap_or(u32::MAX);
        let (permit, slot) = match Arc::clone(&budget.any).try_acquire_many_owned(units32) {
            Ok(permit) => (permit, &mut self.held.any),
            Err(_) if total <= KEPT_START => match Arc::clone(&budget.starts).try_acquire_many_owned(units32) {
                Ok(permit) => (permit, &mut self.held.starts),
                Err(_) => return false,
            },
            Err(_) => return false,
        };
        match slot {
            Some(held) => held.merge(permit),
            None => *slot = Some(permit),
        }
        self.reserved += units * ROOM_UNIT;
        true
    }

    /// Says that bodies are stored cut short for want of room, once per
    /// [`CUT_TOLD_EVERY`] across the tunnel.
    fn tell_cut(&self) {
        let Some(budget) = &self.keep.budget else { return };
        let mut told = lock(&budget.told);
        if told.is_some_and(|at| at.elapsed() < CUT_TOLD_EVERY) {
            return;
        }
        *told = Some(std::time::Instant::now());
        tracing::warn!(
            "the memory the history keeps for bodies in flight ({} MiB) is in use: bodies arriving now are stored \
             cut short, with their full size; the first {} KiB of each has room kept for it",
            HELD_BYTES / (1024 * 1024),
            KEPT_START / 1024
        );
    }
}

/// Request-body bytes the relay sent on one stream that its exchange has
/// not taken yet. Credit goes back only as bytes are taken, so a relay that
/// keeps to its window never has more than one window of them here; counting
/// them keeps one that does not from growing this process without bound.
#[derive(Debug, Clone, Default)]
pub struct Backlog(Arc<AtomicUsize>);

impl Backlog {
    /// Counts `len` bytes in; false when they go past the window.
    pub fn arrived(&self, len: usize) -> bool {
        self.0.fetch_add(len, Ordering::AcqRel).saturating_add(len) <= STREAM_WINDOW as usize
    }

    fn taken(&self, len: usize) {
        self.0.fetch_sub(len, Ordering::AcqRel);
    }
}

/// Receives the chunks of one stream and grants credit as they are used.
pub struct Inflow {
    stream: StreamId,
    first: Option<Chunk>,
    chunks: Option<(mpsc::UnboundedReceiver<Chunk>, Backlog)>,
    outbox: Outbox,
    ended: bool,
    complete: bool,
}

impl Inflow {
    /// The body of one stream: `first` came with the head, which said `end`
    /// when nothing follows; otherwise the rest arrives on `chunks`, counted
    /// in their backlog.
    pub fn new(
        stream: StreamId,
        first: Bytes,
        end: bool,
        chunks: Option<(mpsc::UnboundedReceiver<Chunk>, Backlog)>,
        outbox: Outbox,
    ) -> Self {
        let ended = end && first.is_empty();
        Self {
            stream,
            first: (!first.is_empty()).then_some(Chunk { data: first, end }),
            chunks,
            outbox,
            ended,
            complete: ended,
        }
    }

    /// True once no chunk is left to take: the last one was taken, or the
    /// relay dropped the stream.
    pub fn is_done(&self) -> bool {
        self.ended
    }

    /// True once the last chunk was taken: the body is whole.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Whether bytes the relay sent wait here, not yet taken.
    fn holds_unread(&self) -> bool {
        self.first.is_some()
            || self
                .chunks
                .as_ref()
                .is_some_and(|(_, backlog)| backlog.0.load(Ordering::Acquire) > 0)
    }

    fn on_chunk(&mut self, chunk: &Chunk) {
        if chunk.end {
            self.ended = true;
            self.complete = true;
        } else {
            self.outbox.grant(self.stream, chunk.data.len());
        }
    }

    /// The next chunk, `None` at the end (or when the relay dropped the stream).
    pub async fn next(&mut self) -> Option<Chunk> {
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Chunk>> {
        if let Some(chunk) = self.first.take() {
            self.on_chunk(&chunk);
            return Poll::Ready(Some(chunk));
        }
        if self.ended {
            return Poll::Ready(None);
        }
        let polled = match &mut self.chunks {
            Some((chunks, backlog)) => {
                let polled = chunks.poll_recv(cx);
                if let Poll::Ready(Some(chunk)) = &polled {
                    backlog.taken(chunk.data.len());
                }
                polled
            }
            None => Poll::Ready(None),
        };
        match &polled {
            Poll::Ready(Some(chunk)) => self.on_chunk(chunk),
            Poll::Ready(None) => self.ended = true,
            Poll::Pending => {}
        }
        polled
    }
}

/// The rest of a streamed body, shared by the handler's request and its
/// exchange: the handler reads from it while it wants the body, and the
/// exchange takes what is left once the handler has answered, to read it
/// into the history at the caller's pace instead of the handler's.
#[derive(Default)]
pub struct Rest {
    /// Chunks taken from the stream before it went to the handler, sent
    /// to it first.
    prefix: VecDeque<Bytes>,
    /// The stream, until the exchange takes it.
    inflow: Option<Inflow>,
    /// Bytes handed to the handler's connection so far, the prefix's
    /// included: what it has read, give or take its socket's buffers.
    taken: u64,
    /// Set once the exchange is over: a body whose rest it took ends.
    over: bool,
    /// The handler's request waiting on it, woken when the exchange is over.
    waiting: Option<std::task::Waker>,
}

impl Rest {
    /// `prefix` and then the rest of `inflow`, shared.
    pub fn of(prefix: Vec<Bytes>, inflow: Inflow) -> Arc<Mutex<Rest>> {
        Arc::new(Mutex::new(Rest {
            prefix: prefix.into(),
            inflow: Some(inflow),
            ..Rest::default()
        }))
    }

    /// How far the handler has read: the bytes handed to its connection,
    /// and whether bytes that came wait to be. Bytes waiting while none
    /// are handed on is a handler that stopped reading, not a slow caller.
    pub fn reading(rest: &Mutex<Rest>) -> (u64, bool) {
        let rest = lock(rest);
        let waiting = !rest.prefix.is_empty() || rest.inflow.as_ref().is_some_and(Inflow::holds_unread);
        (rest.taken, waiting)
    }

    /// Takes the stream from the handler's request, which is sent no more
    /// of it; none when the body had ended. The request waits, neither
    /// ended nor failed, until the exchange is over ([`EndsRest`]): its
    /// answer may still be coming on the connection, which a failed body
    /// would close.
    pub fn take(rest: &Mutex<Rest>) -> Option<Inflow> {
        lock(rest).inflow.take().filter(|inflow| !inflow.is_done())
    }
}

/// Ends the handler's request body once its exchange is over, should the
/// exchange have taken its rest: the body fails, and the connection to the
/// handler closes rather than wait for bytes that will not come.
pub struct EndsRest(pub Arc<Mutex<Rest>>);

impl Drop for EndsRest {
    fn drop(&mut self) {
        let mut rest = lock(&self.0);
        rest.over = true;
        if let Some(waiting) = rest.waiting.take() {
            waiting.wake();
        }
    }
}

/// A request body that streams the rest of an [`Inflow`] to the local
/// handler, copying what passes into a shared [`Capture`].
pub struct StreamedBody {
    /// The body, until the exchange takes what is left of it.
    pub rest: Arc<Mutex<Rest>>,
    /// Where the copy goes.
    pub capture: Arc<Mutex<Capture>>,
}

impl Body for StreamedBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let mut rest = lock(&this.rest);
        if let Some(chunk) = rest.prefix.pop_front() {
            rest.taken += chunk.len() as u64;
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        let Some(inflow) = rest.inflow.as_mut() else {
            // Taken by the exchange after the handler answered: the handler
            // is sent no more of it, and once the exchange is over its
            // connection closes.
            if rest.over {
                return Poll::Ready(Some(Err(std::io::Error::other(
                    "the handler answered before it read the whole body",
                ))));
            }
            rest.waiting = Some(cx.waker().clone());
            return Poll::Pending;
        };
        match inflow.poll_next(cx) {
            Poll::Ready(Some(chunk)) => {
                lock(&this.capture).take_in(&chunk);
                rest.taken += chunk.data.len() as u64;
                Poll::Ready(Some(Ok(Frame::data(chunk.data))))
            }
            Poll::Ready(None) => {
                if !lock(&this.capture).end() {
                    // The relay dropped the stream: tell the handler the body is cut.
                    return Poll::Ready(Some(Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the caller's body was cut short",
                    ))));
                }
                Poll::Ready(None)
            }
            Poll::Pending => {
                rest.waiting = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        let rest = lock(&self.rest);
        rest.prefix.is_empty() && rest.inflow.as_ref().is_some_and(Inflow::is_done)
    }
}

/// A request body received whole, sent on in the chunks it came in: its
/// exact length goes out as Content-Length, and no chunk is copied.
pub struct WholeBody {
    chunks: VecDeque<Bytes>,
    remaining: u64,
}

impl WholeBody {
    /// The body made of `chunks`, in order.
    pub fn new(chunks: Vec<Bytes>) -> Self {
        let remaining = chunks.iter().map(|c| c.len() as u64).sum();
        Self {
            chunks: chunks.into_iter().filter(|c| !c.is_empty()).collect(),
            remaining,
        }
    }
}

impl Body for WholeBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let next = self.chunks.pop_front();
        if let Some(chunk) = &next {
            self.remaining -= chunk.len() as u64;
        }
        Poll::Ready(next.map(|chunk| Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    #[tokio::test]
    async fn a_whole_body_keeps_its_chunks_and_says_its_length() {
        let body = WholeBody::new(vec![
            Bytes::from_static(b"ab"),
            Bytes::new(),
            Bytes::from_static(b"cde"),
        ]);
        assert_eq!(body.size_hint().exact(), Some(5));
        assert!(!body.is_end_stream());
        assert_eq!(body.collect().await.unwrap().to_bytes(), "abcde");
        assert!(WholeBody::new(Vec::new()).is_end_stream());
    }

    #[test]
    fn bodies_held_for_the_history_share_one_budget() {
        let held = HeldBudget::new(3 * ROOM_UNIT, 0);
        let budget = Arc::clone(&held.any);
        let keep = Keep::new(10 * ROOM_UNIT, held);
        let mut first = Capture::expecting(2 * ROOM_UNIT as u64, keep.clone());
        first.add(&[b'a'; 2 * ROOM_UNIT]);
        // A declared length takes none of it: only the bytes that come do.
        let declared = Capture::expecting(ROOM_UNIT as u64, keep.clone());
        assert_eq!(budget.available_permits(), 1);
        drop(declared);
        let mut second = Capture::expecting(0, keep.clone());
        second.add(&[b'b'; ROOM_UNIT]);
        second.add(&[b'b'; ROOM_UNIT]);
        assert_eq!(
            second.bytes.len(),
            ROOM_UNIT,
            "the budget ran out: the rest is not kept"
        );
        assert_eq!(
            second.size,
            2 * ROOM_UNIT as u64,
            "but it is counted, so it shows cut short"
        );
        assert_eq!(budget.available_permits(), 0);
        let (bytes, _, held) = first.into_parts();
        assert_eq!(bytes.len(), 2 * ROOM_UNIT);
        drop(held);
        assert_eq!(budget.available_permits(), 2, "given back once handed on");
    }

    /// Large uploads that spend the shared room leave the start of every
    /// body room of its own: a webhook beside them is kept whole.
    #[test]
    fn a_webhook_beside_large_uploads_is_kept_whole() {
        let held = HeldBudget::new(4 * KEPT_START, 4 * KEPT_START);
        let keep = Keep::new(crate::store::recorder::MAX_STORED_BODY, held.clone());
        let mut uploading = Capture::expecting(0, keep.clone());
        uploading.add(&vec![b'u'; 4 * KEPT_START]);
        assert_eq!(held.any.available_permits(), 0, "the shared room is spent");
        let mut upload = Capture::expecting(0, keep.clone());
        upload.add(&vec![b'u'; 5 * KEPT_START]);
        assert_eq!(upload.bytes.len(), KEPT_START, "past the shared room: cut to its start");

        let mut webhook = Capture::expecting(97, keep.clone());
        webhook.add(&[b'w'; 97]);
        assert_eq!(webhook.bytes.len(), 97, "kept whole");
        let mut largest = Capture::expecting(0, keep.clone());
        largest.add(&vec![b'l'; KEPT_START - 1000]);
        largest.add(&[b'l'; 1000]);
        assert_eq!(largest.bytes.len(), KEPT_START, "a start's room holds a whole start");
        // A chunk across the end of the start keeps the part within it.
        let mut across = Capture::expecting(0, keep.clone());
        across.add(&vec![b'a'; KEPT_START - 8000]);
        across.add(&[b'a'; 16000]);
        assert_eq!(
            (across.bytes.len(), across.size),
            (KEPT_START, KEPT_START as u64 + 8000)
        );
        drop(across);
        // Past its start, a body takes shared room only, of which none is left.
        largest.add(b"more");
        assert_eq!((largest.bytes.len(), largest.size), (KEPT_START, KEPT_START as u64 + 4));

        drop(upload);
        drop(uploading);
        drop(webhook);
        let (_, _, room) = largest.into_parts();
        drop(room);
        assert_eq!(
            held.any.available_permits(),
            4 * KEPT_START / ROOM_UNIT,
            "all given back"
        );
        assert_eq!(held.starts.available_permits(), 4 * KEPT_START / ROOM_UNIT);
    }

    #[test]
    fn memory_is_taken_as_the_bytes_come_not_as_the_length_is_declared() {
        let mib = 1024 * 1024;
        let keep = Keep::new(25 * mib, HeldBudget::new(100 * mib, 0));
        let mut trickle = Capture::expecting(25 * mib as u64, keep.clone());
        trickle.add(b"a");
        assert!(trickle.bytes.capacity() <= ROOM_AHEAD);
        trickle.add(&vec![b'a'; 3 * mib]);
        assert!(
            trickle.bytes.capacity() < 8 * mib,
            "grown by doubling, not to the declared 25 MiB"
        );
        trickle.add(&vec![b'a'; 22 * mib - 1]);
        assert_eq!(trickle.bytes.len(), 25 * mib);
        assert_eq!(trickle.bytes.capacity(), 25 * mib, "never past the declared length");

        let mut webhook = Capture::expecting(ROOM_AHEAD as u64, keep);
        let start = webhook.bytes.as_ptr();
        webhook.add(&vec![b'w'; ROOM_AHEAD / 2]);
        webhook.add(&vec![b'w'; ROOM_AHEAD / 2]);
        assert_eq!(
            webhook.bytes.as_ptr(),
            start,
            "a body up to the room ahead is copied once"
        );
    }

    #[tokio::test]
    async fn body_bytes_count_against_the_window_until_the_exchange_takes_them() {
        let (outbox, _queue) = Outbox::new();
        let (chunks, received) = mpsc::unbounded_channel();
        let backlog = Backlog::default();
        let mut inflow = Inflow::new(1, Bytes::new(), false, Some((received, backlog.clone())), outbox);
        let half = STREAM_WINDOW as usize / 2;
        for _ in 0..2 {
            assert!(backlog.arrived(half));
            let data = Bytes::from(vec![b'x'; half]);
            chunks.send(Chunk { data, end: false }).unwrap();
        }
        let taken = inflow.next().await.expect("a chunk");
        assert_eq!(taken.data.len(), half);
        assert!(backlog.arrived(half), "a chunk taken makes room for another");
        assert!(!backlog.arrived(1), "a relay past its window is caught");
    }
}
