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
use tokio::sync::mpsc;

use super::outbox::Outbox;

/// One chunk of request body as the relay sent it.
#[derive(Debug)]
pub struct Chunk {
    /// The bytes.
    pub data: Bytes,
    /// True on the last chunk.
    pub end: bool,
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
}

impl Capture {
    /// An empty capture with room for `expected` bytes, up to `limit`: a
    /// body that says its length is copied once, into a buffer that never
    /// has to grow (and move) under it.
    pub fn expecting(expected: u64, limit: usize) -> Self {
        let room = usize::try_from(expected).unwrap_or(usize::MAX).min(limit);
        Self {
            bytes: Vec::with_capacity(room),
            ..Self::default()
        }
    }

    /// The capture of `chunks`, with room for `expected` bytes in all.
    pub fn of(chunks: &[Bytes], expected: u64, limit: usize) -> Self {
        let seen: u64 = chunks.iter().map(|chunk| chunk.len() as u64).sum();
        let mut capture = Self::expecting(seen.max(expected), limit);
        for chunk in chunks {
            capture.add(chunk, limit);
        }
        capture
    }

    /// Keeps `data` while under `limit` and counts it either way.
    pub fn add(&mut self, data: &[u8], limit: usize) {
        self.size += data.len() as u64;
        let room = limit.saturating_sub(self.bytes.len());
        self.bytes.extend_from_slice(&data[..data.len().min(room)]);
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

/// A request body that streams the rest of an [`Inflow`] to the local
/// handler, copying what passes into a shared [`Capture`].
pub struct StreamedBody {
    /// Chunks taken before streaming started, sent first.
    pub prefix: Vec<Bytes>,
    /// The rest of the stream.
    pub inflow: Inflow,
    /// Where the copy goes.
    pub capture: Arc<Mutex<Capture>>,
    /// Most bytes kept in the capture.
    pub limit: usize,
}

impl Body for StreamedBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if !this.prefix.is_empty() {
            return Poll::Ready(Some(Ok(Frame::data(this.prefix.remove(0)))));
        }
        match this.inflow.poll_next(cx) {
            Poll::Ready(Some(chunk)) => {
                let mut capture = this.capture.lock().unwrap_or_else(|p| p.into_inner());
                capture.add(&chunk.data, this.limit);
                capture.complete = chunk.end;
                Poll::Ready(Some(Ok(Frame::data(chunk.data))))
            }
            Poll::Ready(None) => {
                let mut capture = this.capture.lock().unwrap_or_else(|p| p.into_inner());
                if !capture.complete {
                    // The relay dropped the stream: tell the handler the body is cut.
                    return Poll::Ready(Some(Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the caller's body was cut short",
                    ))));
                }
                capture.complete = true;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.is_empty() && self.inflow.is_done()
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
