//! Time limits that leave out this process's own pauses (see
//! [`portpreview_shared::stall`]): an answer that arrived while the tunnel
//! was stopped or its machine asleep waits in a socket, and is read before
//! the handler is said not to have answered.

use std::future::Future;
use std::time::Duration;

use portpreview_shared::stall::WakeGrace;
use tokio::time::Instant;

/// `future`'s output if it comes within `limit`, as `tokio::time::timeout`;
/// but a limit that passed while this process was not running gives it
/// [`portpreview_shared::stall::WAKE_GRACE`] more, once ([`WakeGrace`]).
/// `None` when it did not come.
///
/// `future` comes pinned (`std::pin::pin!`) where its caller keeps it:
/// pinned in here, it would take a second place in this future's state
/// beside the one it was passed in, and a request to the handler is 3 KiB
/// of state, copied whole when an exchange is spawned.
pub async fn within<F: Future + Unpin>(limit: Duration, mut future: F) -> Option<F::Output> {
    let mut deadline = Instant::now() + limit;
    let mut grace = WakeGrace::default();
    loop {
        if let Ok(output) = tokio::time::timeout_at(deadline, &mut future).await {
            return Some(output);
        }
        let later = grace.after(deadline.into_std(), Instant::now().into_std())?;
        deadline = Instant::from_std(later);
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use super::*;

    /// Ready on its third poll, without a wake-up of its own, as an answer
    /// that waits for the connection's task to read it.
    struct ReadyOnThirdPoll(u8);

    impl Future for ReadyOnThirdPoll {
        type Output = u16;
        fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<u16> {
            self.0 += 1;
            if self.0 >= 3 {
                Poll::Ready(200)
            } else {
                Poll::Pending
            }
        }
    }

    /// The tunnel was stopped for 20 s past a 2 s limit, and the answer came
    /// meanwhile: it is taken, not called late.
    #[tokio::test(start_paused = true)]
    async fn an_answer_that_came_during_a_pause_is_taken() {
        let waiting = within(Duration::from_secs(2), ReadyOnThirdPoll(0));
        tokio::pin!(waiting);
        assert!(futures_util::poll!(waiting.as_mut()).is_pending());
        // The clock moves with no task run: the process was not running.
        tokio::time::advance(Duration::from_secs(20)).await;
        assert_eq!(waiting.await, Some(200));
    }

    /// Awake all along, a limit is a limit, and after a pause the grace is
    /// given once, not again and again.
    #[tokio::test(start_paused = true)]
    async fn awake_the_limit_holds_and_a_pause_is_forgiven_once() {
        let started = Instant::now();
        assert_eq!(within(Duration::from_secs(2), std::future::pending::<()>()).await, None);
        assert_eq!(started.elapsed(), Duration::from_secs(2));

        let waiting = within(Duration::from_secs(2), std::future::pending::<()>());
        tokio::pin!(waiting);
        assert!(futures_util::poll!(waiting.as_mut()).is_pending());
        tokio::time::advance(Duration::from_secs(20)).await;
        let woke = Instant::now();
        assert_eq!(waiting.await, None);
        assert_eq!(woke.elapsed(), portpreview_shared::stall::WAKE_GRACE);
    }
}
