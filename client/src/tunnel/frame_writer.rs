//! The session's writing half: every frame that is ready, then one flush.

use futures_util::stream::SplitSink;
use futures_util::{Sink, SinkExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::{self, Message};

use super::persist::Persist;

/// Writes every frame that is ready, then flushes once: per-frame flushes
/// cost a syscall each and were the main cost under load. Every frame may
/// carry an answer, so the history's inbox is written out before it.
pub(super) async fn write_frames<S>(
    mut sink: SplitSink<S, Message>,
    mut queue: mpsc::UnboundedReceiver<Message>,
    persist: Persist,
) -> Result<(), tungstenite::Error>
where
    S: Sink<Message, Error = tungstenite::Error> + Unpin,
{
    while let Some(first) = queue.recv().await {
        let closing = matches!(first, Message::Close(_));
        persist.requests();
        sink.feed(first).await?;
        while let Ok(next) = queue.try_recv() {
            // Feeding may have waited for the socket, and other requests
            // may have been recorded meanwhile.
            persist.requests();
            sink.feed(next).await?;
        }
        sink.flush().await?;
        if closing {
            break;
        }
    }
    let _ = sink.close().await;
    Ok(())
}
