//! A lingering close, as nginx's `lingering_close` and RFC 9112 §9.6 have
//! it, for connections closed on a caller still sending a body.
//!
//! Closing a socket with unread bytes in it makes the kernel answer with a
//! reset, which can reach the caller before it reads the relay's answer: a
//! sender that writes its whole body before reading (most HTTP libraries,
//! nginx in front of the relay) sees a broken pipe instead of the 413 that
//! said why. So when asked, the close happens in stages: the write half is
//! shut (the answer and a FIN are on their way), then what the caller still
//! sends is read and thrown away until it closes, pauses for [`PAUSE`], or
//! [`LONGEST`] has passed, or the relay shuts down; only then does the
//! socket close.
//!
//! Why at the socket, and not by keeping hyper's request body alive and
//! draining it: hyper drops an answer's body as soon as its length is
//! written, so the answer cannot carry the request body along; and the
//! socket under TLS needs no record decrypted to throw it away.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// The longest a close lingers (nginx's `lingering_time`): a caller sending
/// without a pause is cut off then. The connection keeps its place under
/// the connection caps until it closes, so this also bounds how long a
/// refused caller holds one.
pub const LONGEST: Duration = Duration::from_secs(30);

/// A caller that sends nothing for this long is taken to have stopped
/// (nginx's `lingering_timeout`).
pub const PAUSE: Duration = Duration::from_secs(5);

/// Bytes thrown away per read.
const SCRATCH: usize = 16 * 1024;

/// Asks a connection's socket to linger when it closes. The service that
/// answers knows whether a body may still come; the socket does the close.
#[derive(Debug, Clone, Default)]
pub struct LingerAsk(Arc<AtomicBool>);

impl LingerAsk {
    /// The connection's next close lingers.
    pub fn ask(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn asked(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A socket whose shutdown lingers when asked to.
pub struct Linger<IO> {
    io: IO,
    ask: LingerAsk,
    shutdown: CancellationToken,
    phase: Phase,
}

enum Phase {
    Open,
    Draining(Box<Draining>),
    Closed,
}

impl<IO> Linger<IO> {
    /// Wraps `io`; a lingering close ends when `shutdown` fires.
    pub fn new(io: IO, shutdown: CancellationToken) -> (Self, LingerAsk) {
        let ask = LingerAsk::default();
        let linger = Self {
            io,
            ask: ask.clone(),
            shutdown,
            phase: Phase::Open,
        };
        (linger, ask)
    }
}

/// The reading half of a lingering close.
struct Draining {
    ends: Instant,
    last_read: Instant,
    timer: Pin<Box<Sleep>>,
    shutdown: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl Draining {
    fn new(shutdown: &CancellationToken) -> Self {
        let now = Instant::now();
        Self {
            ends: now + LONGEST,
            last_read: now,
            timer: Box::pin(tokio::time::sleep_until(now + PAUSE)),
            shutdown: Box::pin(shutdown.clone().cancelled_owned()),
        }
    }

    /// Reads and drops what `io` brings until one of the ends.
    fn poll_drain<IO: AsyncRead + Unpin>(&mut self, io: &mut IO, cx: &mut Context<'_>) -> Poll<()> {
        let mut scratch = [0; SCRATCH];
        loop {
            if self.shutdown.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut *io).poll_read(cx, &mut buf) {
                // Closed, or reset: nothing more can come.
                Poll::Ready(Ok(())) if buf.filled().is_empty() => return Poll::Ready(()),
                Poll::Ready(Err(_)) => return Poll::Ready(()),
                Poll::Ready(Ok(())) => {
                    self.last_read = Instant::now();
                    if self.last_read >= self.ends {
                        return Poll::Ready(());
                    }
                    continue;
                }
                Poll::Pending => {}
            }
            // One timer for both ends, moved only when a read has moved the
            // pause's end: not once per read.
            let due = (self.last_read + PAUSE).min(self.ends);
            if self.timer.deadline() != due {
                self.timer.as_mut().reset(due);
            }
            ready!(self.timer.as_mut().poll(cx));
            return Poll::Ready(());
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Linger<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Linger<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            match &mut this.phase {
                Phase::Open => {
                    ready!(Pin::new(&mut this.io).poll_shutdown(cx))?;
                    // A relay shutting down has no time for it.
                    this.phase = if this.ask.asked() && !this.shutdown.is_cancelled() {
                        Phase::Draining(Box::new(Draining::new(&this.shutdown)))
                    } else {
                        Phase::Closed
                    };
                }
                Phase::Draining(draining) => {
                    ready!(draining.poll_drain(&mut this.io, cx));
                    this.phase = Phase::Closed;
                }
                Phase::Closed => return Poll::Ready(Ok(())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    use super::*;

    /// Room in each direction of the test's pipe: far less than a caller
    /// sends, so its writes finish only if the other end reads.
    const PIPE: usize = 1024;

    fn pipe(asked: bool) -> (Linger<DuplexStream>, DuplexStream, CancellationToken) {
        let (near, far) = tokio::io::duplex(PIPE);
        let shutdown = CancellationToken::new();
        let (linger, ask) = Linger::new(near, shutdown.clone());
        if asked {
            ask.ask();
        }
        (linger, far, shutdown)
    }

    /// The caller: writes `body`, then reads until the relay's side closes.
    async fn caller(mut far: DuplexStream, body: Vec<u8>) -> io::Result<Vec<u8>> {
        far.write_all(&body).await?;
        let mut answer = Vec::new();
        far.read_to_end(&mut answer).await?;
        Ok(answer)
    }

    #[tokio::test]
    async fn a_caller_writing_its_whole_body_before_reading_gets_the_answer() {
        let (mut near, far, _shutdown) = pipe(true);
        let caller = tokio::spawn(caller(far, vec![7; 64 * PIPE]));
        near.write_all(b"HTTP/1.1 413 Payload Too Large\r\n\r\n").await.unwrap();
        near.shutdown().await.expect("lingered, then closed");
        // Without the linger the caller's writes would wait for ever.
        let answer = tokio::time::timeout(Duration::from_secs(20), caller)
            .await
            .expect("the caller's whole body taken")
            .unwrap()
            .expect("every byte taken, the answer read");
        assert_eq!(answer, b"HTTP/1.1 413 Payload Too Large\r\n\r\n");
    }

    #[tokio::test]
    async fn unasked_a_close_reads_nothing() {
        let (mut near, mut far, _shutdown) = pipe(false);
        far.write_all(b"more body").await.unwrap();
        near.shutdown().await.unwrap();
        let mut left = [0; 9];
        near.read_exact(&mut left).await.expect("still unread");
        assert_eq!(&left, b"more body");
    }

    #[tokio::test]
    async fn a_relay_shutting_down_does_not_linger() {
        let (mut near, mut far, shutdown) = pipe(true);
        shutdown.cancel();
        far.write_all(b"more body").await.unwrap();
        near.shutdown().await.unwrap();
        let mut left = [0; 9];
        near.read_exact(&mut left).await.expect("still unread");
        assert_eq!(&left, b"more body");
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_that_pauses_is_not_waited_for() {
        let (mut near, mut far, _shutdown) = pipe(true);
        far.write_all(b"some body").await.unwrap();
        // The caller keeps its connection open and sends nothing more.
        let start = Instant::now();
        tokio::time::timeout(LONGEST, near.shutdown())
            .await
            .expect("the pause ends it, well before the longest linger")
            .unwrap();
        // The clock is paused: it moves only as far as the linger waited.
        assert!(start.elapsed() >= PAUSE, "lingered through the pause");
        let mut got = Vec::new();
        far.read_to_end(&mut got).await.expect("the write half was shut");
        assert!(got.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_that_never_stops_is_cut_off() {
        let (mut near, mut far, _shutdown) = pipe(true);
        let sender = tokio::spawn(async move {
            loop {
                if far.write_all(&[1; 16]).await.is_err() {
                    return;
                }
                tokio::time::sleep(PAUSE / 2).await;
            }
        });
        let start = Instant::now();
        near.shutdown().await.expect("the longest linger ends it");
        assert!(start.elapsed() >= LONGEST, "read on for as long as the caller sent");
        assert!(!sender.is_finished(), "the caller was still sending");
        drop(near);
        sender.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn the_relay_shutting_down_ends_a_linger() {
        let (mut near, mut far, shutdown) = pipe(true);
        let sender = tokio::spawn(async move {
            loop {
                if far.write_all(&[1; 16]).await.is_err() {
                    return;
                }
                tokio::time::sleep(PAUSE / 2).await;
            }
        });
        let closing = tokio::spawn(async move { near.shutdown().await });
        tokio::time::sleep(PAUSE).await;
        assert!(!closing.is_finished(), "lingering while the caller sends");
        shutdown.cancel();
        closing.await.unwrap().expect("ended by the shutdown");
        sender.await.unwrap();
    }
}
