//! The exchanges running on one session: one that panics is still known,
//! by its task id, so the stream it leaves unanswered can be found.

use std::any::Any;
use std::future::Future;

use portpreview_shared::message::StreamId;
use tokio::task::{self, JoinError, JoinSet};

/// How an exchange ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Joined {
    /// It ran to its end, having answered or reset its stream.
    Finished(StreamId),
    /// It panicked (or was cut off) without a word to the relay.
    Failed {
        /// The task, as [`InFlight::spawn`] named it.
        task: task::Id,
        /// What went wrong, for the log.
        why: String,
    },
}

/// Exchanges in flight, each on its own task.
#[derive(Default)]
pub struct InFlight {
    tasks: JoinSet<StreamId>,
}

impl InFlight {
    /// Runs `exchange`, which yields its stream when done; the task's id
    /// names it if it fails instead.
    pub fn spawn<F>(&mut self, exchange: F) -> task::Id
    where
        F: Future<Output = StreamId> + Send + 'static,
    {
        self.tasks.spawn(exchange).id()
    }

    /// Exchanges still running.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// True when none runs.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// The next exchange to end, `None` once none runs. Cancel-safe: an
    /// exchange that ends is reported by the next call if not by this one.
    pub async fn join_next(&mut self) -> Option<Joined> {
        Some(match self.tasks.join_next().await? {
            Ok(stream) => Joined::Finished(stream),
            Err(err) => Joined::Failed {
                task: err.id(),
                why: describe(err),
            },
        })
    }

    /// Cuts off every exchange still running and waits until they are gone.
    pub async fn shutdown(&mut self) {
        self.tasks.shutdown().await;
    }

    /// The tasks themselves, once no relay waits to hear how they end.
    pub fn into_tasks(self) -> JoinSet<StreamId> {
        self.tasks
    }
}

fn describe(err: JoinError) -> String {
    if !err.is_panic() {
        return "the exchange was cut off".into();
    }
    let payload: Box<dyn Any + Send> = err.into_panic();
    format!("the exchange panicked: {}", crate::panic_message(&*payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicked_exchange_is_known_by_its_task() {
        let mut in_flight = InFlight::default();
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let panicking = in_flight.spawn(async {
            let _ = wait.await;
            panic!("an exchange broken beyond repair")
        });
        in_flight.spawn(async { 4 });
        assert_eq!(in_flight.join_next().await, Some(Joined::Finished(4)));
        let _ = go.send(());
        assert_eq!(
            in_flight.join_next().await,
            Some(Joined::Failed {
                task: panicking,
                why: "the exchange panicked: an exchange broken beyond repair".into(),
            })
        );
        assert!(in_flight.is_empty());
        assert!(in_flight.join_next().await.is_none());
    }
}
