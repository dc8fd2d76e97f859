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
//!
//! While the relay holds more unread answers than its budget
//! (`answer_budget`), a caller's limit is [`PRESSED_WRITE_STALL`]: that
//! is how the relay sheds the callers that hold its memory, and no one
//! else. A client's WebSocket, once upgraded, keeps the usual limit: its
//! socket holds no caller's answer, and cutting it would cut every caller
//! of its tunnel.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::WaitForCancellationFutureOwned;

use crate::answer_budget::AnswerBudget;

/// How long a caller may read nothing while the relay is over its budget
/// of unread answers. Long enough that a reader on a busy link, whose
/// kernel takes bytes in bursts, is not taken for one that stopped;
/// short enough that a crowd of callers opening connections as fast as
/// they can cannot hold much before it is cut.
pub const PRESSED_WRITE_STALL: Duration = Duration::from_secs(2);

/// What a connection's write-stall watch and its requests share.
#[derive(Debug, Default)]
pub struct StallNote {
    /// The connection became a client's WebSocket: no caller's to shed.
    client: AtomicBool,
    /// The connection was cut under the budget's pressure.
    shed: AtomicBool,
}

impl StallNote {
    /// Marks the connection as a client's: its limit stays the usual one.
    pub fn is_client(&self) {
        self.client.store(true, Ordering::Release);
    }

    /// Whether the connection was cut under the budget's pressure.
    pub fn was_shed(&self) -> bool {
        self.shed.load(Ordering::Acquire)
    }
}

/// The relay's budget, as one connection's watch sees it.
struct Pressure {
    budget: Arc<AnswerBudget>,
    note: Arc<StallNote>,
    /// Wakes the stalled write when pressure starts.
    starts: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
}

impl Pressure {
    /// Whether this connection is held to the shorter limit now; when not,
    /// the task is woken once it would be.
    fn on(&mut self, cx: &mut Context<'_>) -> bool {
        if self.note.client.load(Ordering::Acquire) {
            self.starts = None;
            return false;
        }
        loop {
            if self.budget.pressed() {
                self.starts = None;
                return true;
            }
            let budget = &self.budget;
            let starts = self.starts.get_or_insert_with(|| Box::pin(budget.pressure_starts()));
            if starts.as_mut().poll(cx).is_pending() {
                return false;
            }
            // An episode that started and ended since: wait for the next.
            self.starts = None;
        }
    }
}

/// An IO whose writes fail after `limit` without progress.
pub struct WriteStall<IO> {
    io: IO,
    limit: Duration,
    /// Kept across stalls so a stream that stalls often (a large answer to
    /// a slow reader) resets one timer instead of allocating one each time.
    timer: Option<Pin<Box<Sleep>>>,
    /// When the current stall began, if the last write attempt waited:
    /// the timer runs from the first attempt of a stall, not from each retry.
    stalled: Option<Instant>,
    pressure: Option<Pressure>,
}

impl<IO> WriteStall<IO> {
    /// Watches the writes of `io`.
    pub fn new(io: IO, limit: Duration) -> Self {
        Self {
            io,
            limit,
            timer: None,
            stalled: None,
            pressure: None,
        }
    }

    /// Holds the connection to [`PRESSED_WRITE_STALL`] while `budget` is
    /// pressed, telling `note` when that cuts it.
    pub fn under(mut self, budget: Arc<AnswerBudget>, note: Arc<StallNote>) -> Self {
        self.pressure = Some(Pressure {
            budget,
            note,
            starts: None,
        });
        self
    }

    /// Passes a finished attempt through; on a waiting one, starts the
    /// stall's timer, or fails the attempt once it has run out.
    fn watch<T>(&mut self, cx: &mut Context<'_>, attempt: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if attempt.is_ready() {
            self.stalled = None;
            return attempt;
        }
        let since = *self.stalled.get_or_insert_with(Instant::now);
        let pressed = self.pressure.as_mut().is_some_and(|pressure| pressure.on(cx));
        let limit = match pressed {
            true => self.limit.min(PRESSED_WRITE_STALL),
            false => self.limit,
        };
        let deadline = since + limit;
        let timer = match &mut self.timer {
            Some(timer) => {
                if timer.deadline() != deadline {
                    timer.as_mut().reset(deadline);
                }
                timer
            }
            timer @ None => timer.insert(Box::pin(tokio::time::sleep_until(deadline))),
        };
        if timer.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let why = match (pressed, &self.pressure) {
            (true, Some(pressure)) => {
                pressure.note.shed.store(true, Ordering::Release);
                tracing::debug!(
                    ?limit,
                    "cut a caller that read nothing while unread answers were over budget"
                );
                format!("the peer read nothing for {limit:?} while the relay held too many unread answers")
            }
            _ => format!("the peer read nothing for {limit:?}"),
        };
        Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, why)))
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

    /// A reader taking 16 bytes at a time, `pause` before each, until the
    /// writer is gone: what it got.
    fn read_pausing(mut far: tokio::io::DuplexStream, pause: Duration) -> tokio::task::JoinHandle<Vec<u8>> {
        tokio::spawn(async move {
            let mut got = Vec::new();
            let mut buf = [0; 16];
            loop {
                tokio::time::sleep(pause).await;
                match far.read(&mut buf).await {
                    Ok(0) | Err(_) => return got,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_that_keeps_reading_is_never_cut_off() {
        let (near, far) = tokio::io::duplex(64);
        let mut guarded = WriteStall::new(near, LIMIT);
        // Each read comes well within the limit, but ten of them take
        // longer than the limit in all.
        let reader = read_pausing(far, LIMIT / 4);
        let sent = vec![7; 64 * 10];
        guarded
            .write_all(&sent)
            .await
            .expect("every write made progress in time");
        guarded.shutdown().await.expect("shut down");
        drop(guarded);
        assert_eq!(reader.await.expect("reader"), sent);
    }

    /// A budget over its limit, and the note of one caller's connection.
    fn pressed() -> (Arc<AnswerBudget>, crate::answer_budget::Charge, Arc<StallNote>) {
        let budget = AnswerBudget::new(10);
        let over = budget.charge(11);
        (budget, over, Arc::new(StallNote::default()))
    }

    #[tokio::test(start_paused = true)]
    async fn under_pressure_a_caller_that_reads_nothing_is_cut_sooner() {
        let (budget, _over, note) = pressed();
        let (near, _far) = tokio::io::duplex(64);
        let mut guarded = WriteStall::new(near, LIMIT).under(budget, Arc::clone(&note));
        guarded.write_all(&[1; 64]).await.expect("room for the first bytes");
        let started = Instant::now();
        let err = guarded.write_all(&[2; 64]).await.expect_err("nobody reads");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), PRESSED_WRITE_STALL);
        assert!(note.was_shed(), "its streams tell their clients why");
    }

    /// A stall already under way when pressure starts is judged by the
    /// shorter limit at once, from when it began.
    #[tokio::test(start_paused = true)]
    async fn pressure_that_starts_mid_stall_cuts_a_long_stall_at_once() {
        let budget = AnswerBudget::new(10);
        let note = Arc::new(StallNote::default());
        let (near, _far) = tokio::io::duplex(64);
        let mut guarded = WriteStall::new(near, LIMIT).under(Arc::clone(&budget), Arc::clone(&note));
        guarded.write_all(&[1; 64]).await.expect("room for the first bytes");
        let started = Instant::now();
        let stalled = tokio::spawn(async move { guarded.write_all(&[2; 64]).await });
        tokio::time::sleep(LIMIT / 3).await;
        assert!(!stalled.is_finished(), "not cut before the pressure");
        let _over = budget.charge(11);
        let err = stalled.await.expect("task").expect_err("cut");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), LIMIT / 3, "at once");
        assert!(note.was_shed());
    }

    #[tokio::test(start_paused = true)]
    async fn under_pressure_a_slow_reader_that_keeps_reading_is_not_cut() {
        let (budget, _over, note) = pressed();
        let (near, far) = tokio::io::duplex(64);
        let mut guarded = WriteStall::new(near, LIMIT).under(budget, Arc::clone(&note));
        let reader = read_pausing(far, PRESSED_WRITE_STALL / 2);
        let sent = vec![7; 64 * 10];
        guarded
            .write_all(&sent)
            .await
            .expect("progress within the shorter limit");
        guarded.shutdown().await.expect("shut down");
        drop(guarded);
        assert_eq!(reader.await.expect("reader"), sent);
        assert!(!note.was_shed());
    }

    /// A client's WebSocket holds no caller's answer: cutting it would
    /// cut all its callers.
    #[tokio::test(start_paused = true)]
    async fn a_clients_connection_keeps_the_usual_limit_under_pressure() {
        let (budget, _over, note) = pressed();
        note.is_client();
        let (near, _far) = tokio::io::duplex(64);
        let mut guarded = WriteStall::new(near, LIMIT).under(budget, Arc::clone(&note));
        guarded.write_all(&[1; 64]).await.expect("room for the first bytes");
        let started = Instant::now();
        let err = guarded.write_all(&[2; 64]).await.expect_err("nobody reads");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), LIMIT);
        assert!(!note.was_shed());
    }
}
