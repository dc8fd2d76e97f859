//! Writes to a handler that has reset the connection, discarded instead of
//! failed, so that an answer it gave first can still be read.
//!
//! A handler that answers before it has read the whole body (a body limit's
//! 413, a 401 to a bad signature) and then closes makes its kernel reset the
//! connection on the unread rest. hyper, still sending that rest, fails the
//! exchange on the write, and the answer, already in the socket's receive
//! queue, is lost: about half the time, by which it notices first. Reads go
//! on after a reset until that queue is empty, so with the writes discarded
//! hyper reads the answer; a handler that reset without answering still
//! fails the exchange, on the read.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A stream whose writes are discarded once one has found the connection
/// reset.
pub struct DiscardsAfterReset<T> {
    inner: T,
    reset: bool,
}

impl<T> DiscardsAfterReset<T> {
    /// Wraps `inner`.
    pub fn new(inner: T) -> Self {
        Self { inner, reset: false }
    }

    /// The stream wrapped.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }
}

/// Whether a write failed because the peer reset the connection: nothing
/// written from now on reaches it.
fn is_reset(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset)
}

impl<T: AsyncWrite + Unpin> DiscardsAfterReset<T> {
    /// Runs a write, or, once the connection is reset, takes `len` bytes
    /// without writing them.
    fn write_with(
        &mut self,
        len: usize,
        write: impl FnOnce(Pin<&mut T>) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        if self.reset {
            return Poll::Ready(Ok(len));
        }
        match write(Pin::new(&mut self.inner)) {
            Poll::Ready(Err(error)) if is_reset(&error) => {
                tracing::debug!(%error, "the handler reset the connection; discarding the rest of the request");
                self.reset = true;
                Poll::Ready(Ok(len))
            }
            polled => polled,
        }
    }

    /// Runs a flush or a shutdown, or nothing once the connection is reset.
    fn finish_with(&mut self, finish: impl FnOnce(Pin<&mut T>) -> Poll<io::Result<()>>) -> Poll<io::Result<()>> {
        if self.reset {
            return Poll::Ready(Ok(()));
        }
        match finish(Pin::new(&mut self.inner)) {
            Poll::Ready(Err(error)) if is_reset(&error) => {
                self.reset = true;
                Poll::Ready(Ok(()))
            }
            polled => polled,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for DiscardsAfterReset<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for DiscardsAfterReset<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut()
            .write_with(data.len(), |inner| inner.poll_write(cx, data))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let len = data.iter().map(|slice| slice.len()).sum();
        self.get_mut()
            .write_with(len, |inner| inner.poll_write_vectored(cx, data))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().finish_with(|inner| inner.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().finish_with(|inner| inner.poll_shutdown(cx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    /// A peer that answers, then closes with what was sent unread, which
    /// resets the connection: the writes after it are taken, and the
    /// answer is read whole.
    #[tokio::test]
    async fn an_answer_sent_before_a_reset_is_read_after_the_writes_that_met_it() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let peer = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut first = [0u8; 1];
            socket.read_exact(&mut first).await.unwrap();
            socket.write_all(b"answered early").await.unwrap();
            // Dropped with bytes unread: the kernel resets the connection.
        });
        let mut stream = DiscardsAfterReset::new(TcpStream::connect(address).await.unwrap());
        stream.write_all(b"x").await.unwrap();
        peer.await.unwrap();
        let chunk = vec![0u8; 64 * 1024];
        for _ in 0..64 {
            stream
                .write_all(&chunk)
                .await
                .expect("discarded once reset, not failed");
        }
        stream.flush().await.expect("flushed");
        assert!(stream.reset, "the writes met the reset");
        let mut answer = Vec::new();
        let mut buf = [0u8; 64];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
        assert_eq!(answer, b"answered early");
    }

    #[test]
    fn only_a_reset_or_a_broken_pipe_is_taken_for_one() {
        assert!(is_reset(&io::Error::from(io::ErrorKind::BrokenPipe)));
        assert!(is_reset(&io::Error::from(io::ErrorKind::ConnectionReset)));
        assert!(!is_reset(&io::Error::from(io::ErrorKind::TimedOut)));
        assert!(!is_reset(&io::Error::other("disk")));
    }
}
