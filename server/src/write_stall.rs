//! A deadline on writes that make no progress.
//!
//! hyper bounds how long a caller may take to send a request head, but not
//! how long it may take to read the answer: once the socket stops draining,
//! hyper only waits for it to flush. A caller that never reads (a zero TCP
//! window its kernel keeps alive) would hold its connection, and the
//! tunnel's request slot the answer belongs to, for good; a few hundred such
//! callers would take every slot of a tunnel, and pipelined requests left
//! unread would take the relay's connections. This wrapper, on the socket
//! itself (under TLS, whose flush hides partial progress), fails a write,
//! flush or shutdown that has waited, without a byte accepted, for longer
//! than its limit; the connection then ends as for any broken socket.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// An IO whose writes fail after `limit` without progress.
pub struct WriteStall<IO> {
    io: IO,
    limit: Duration,
    /// Kept across stalls so a stream that stalls often (a large answer to
    /// a slow reader) resets one timer instead of allocating one each time.
    timer: Option<Pin<Box<Sleep>>>,
    /// Whether the last write attempt waited: the timer runs from the
    /// first attempt of a stall, not from each retry.
    stalled: bool,
}

impl<IO> WriteStall<IO> {
    /// Watches the writes of `io`.
    pub fn new(io: IO, limit: Duration) -> Self {
        Self {
            io,
            limit,
            timer: None,
            stalled: false,
        }
    }

    /// Passes a finished attempt through; on a waiting one, starts the
    /// stall's timer, or fails the attempt once it has run out.
    fn watch<T>(&mut self, cx: &mut Context<'_>, attempt: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if attempt.is_ready() {
            self.stalled = false;
            return attempt;
        }
        let deadline = Instant::now() + self.limit;
        let timer = match (&mut self.timer, self.stalled) {
            (Some(timer), true) => timer,
            (Some(timer), false) => {
                timer.as_mut().reset(deadline);
                timer
            }
            (timer @ None, _) => timer.insert(Box::pin(tokio::time::sleep_until(deadline))),
        };
        self.stalled = true;
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the peer read nothing for {:?}", self.limit),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for WriteStall<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for WriteStall<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let attempt = Pin::new(&mut self.io).poll_write(cx, buf);
        self.watch(cx, attempt)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let attempt = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.watch(cx, attempt)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let attempt = Pin::new(&mut self.io).poll_flush(cx);
        self.watch(cx, attempt)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let attempt = Pin::new(&mut self.io).poll_shutdown(cx);
        self.watch(cx, attempt)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    const LIMIT: Duration = Duration::from_secs(30);

    #[tokio::test(start_paused = true)]
    async fn a_write_nobody_reads_fails_after_the_limit_and_not_before() {
        let (near, mut far) = tokio::io::duplex(64);
        let mut guarded = WriteStall::new(near, LIMIT);
        guarded.write_all(&[1; 64]).await.expect("room for the first bytes");
        let started = Instant::now();
        let err = guarded.write_all(&[2; 64]).await.expect_err("nobody reads");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), LIMIT, "the stall's own length, no more, no less");
        // The reader was never gone: what it was sent is still there.
        let mut got = [0; 64];
        far.read_exact(&mut got).await.expect("the first bytes");
        assert_eq!(got, [1; 64]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_that_keeps_reading_is_never_cut_off() {
        let (near, mut far) = tokio::io::duplex(64);
        let mut guarded = WriteStall::new(near, LIMIT);
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            let mut buf = [0; 16];
            loop {
                // Each read comes well within the limit, but ten of them take
                // longer than the limit in all.
                tokio::time::sleep(LIMIT / 4).await;
                match far.read(&mut buf).await {
                    Ok(0) | Err(_) => return got,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
        });
        let sent = vec![7; 64 * 10];
        guarded
            .write_all(&sent)
            .await
            .expect("every write made progress in time");
        guarded.shutdown().await.expect("shut down");
        drop(guarded);
        assert_eq!(reader.await.expect("reader"), sent);
    }
}
