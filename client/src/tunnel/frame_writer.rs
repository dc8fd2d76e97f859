//! The session's writing half: every frame that is ready, then one flush.

use std::time::Duration;

use futures_util::stream::SplitSink;
use futures_util::{Sink, SinkExt};
use tokio_tungstenite::tungstenite::{self, Message};

use super::outbox::Queue;
use super::persist::Persist;

/// How long a write to the relay may wait for its socket to take it. A
/// relay reads its socket whatever its callers do; one that stops while
/// it keeps sending (it is not silent, so the silence limit never ends the
/// session) would hold every answer queued for it.
const WRITE_STALL: Duration = Duration::from_secs(60);

/// Writes every frame that is ready, then flushes once: per-frame flushes
/// cost a syscall each and were the main cost under load. Every frame may
/// carry an answer, so the history's inbox is written out before it.
pub(super) async fn write_frames<S>(
    mut sink: SplitSink<S, Message>,
    mut queue: Queue,
    persist: Persist,
) -> Result<(), tungstenite::Error>
where
    S: Sink<Message, Error = tungstenite::Error> + Unpin,
{
    while let Some(first) = queue.recv().await {
        let closing = matches!(first, Message::Close(_));
        persist.requests();
        within_stall(sink.feed(first)).await?;
        while let Some(next) = queue.try_recv() {
            // Feeding may have waited for the socket, and other requests
            // may have been recorded meanwhile.
            persist.requests();
            within_stall(sink.feed(next)).await?;
        }
        within_stall(sink.flush()).await?;
        if closing {
            break;
        }
    }
    let _ = sink.close().await;
    Ok(())
}

/// `write`, failed once the socket has taken nothing for [`WRITE_STALL`].
async fn within_stall(
    write: impl std::future::Future<Output = Result<(), tungstenite::Error>>,
) -> Result<(), tungstenite::Error> {
    tokio::time::timeout(WRITE_STALL, write).await.unwrap_or_else(|_| {
        Err(tungstenite::Error::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("the relay read nothing for {}s", WRITE_STALL.as_secs()),
        )))
    })
}
