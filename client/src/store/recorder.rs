//! The tunnel's path into the history: a bounded queue to one writer thread.
//!
//! Forwarding must not wait on SQLite more than it has to. Each delivery is
//! handed to a dedicated thread that owns the connection; the thread takes
//! everything queued since its last commit and writes it in one
//! transaction, so under load one commit serves many deliveries. The queue
//! is bounded: when it is full the tunnel keeps forwarding and warns.

use std::path::Path;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use portpreview_shared::provider::event_key;
use tokio::sync::oneshot;

use super::{NewDelivery, Outcome, Store, StoreError};

/// Bodies longer than this are stored cut, with their full size kept.
pub const MAX_STORED_BODY: usize = 25 * 1024 * 1024;

/// Deliveries and outcomes waiting for the writer before `Full` is returned.
pub const QUEUE_CAPACITY: usize = 8192;

/// Most jobs written in one transaction, so one commit never grows unbounded.
const MAX_BATCH: usize = 2048;

/// Longest an answer waits for a request to share its commit with; a
/// history read in another process sees it this much later at worst.
const OUTCOME_LINGER: Duration = Duration::from_millis(50);

/// Where a delivery landed in the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Row id of the delivery.
    pub id: i64,
    /// 1 for the first delivery of its event key, 2 for the first retry…
    pub delivery_number: i64,
    /// Provider as stored (detected by the writer when the caller left it out).
    pub provider: Option<String>,
    /// Event key as stored.
    pub event_key: String,
    /// How the event key was made.
    pub event_key_source: String,
}

/// Why a delivery was not recorded; the tunnel forwards it anyway.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The writer is behind by more than [`QUEUE_CAPACITY`] jobs.
    #[error("the history writer is behind; delivery not recorded")]
    Full,
    /// SQLite refused the write (disk full, database locked…).
    #[error("delivery not recorded: {0}")]
    Store(String),
    /// The writer has stopped.
    #[error("the history writer has stopped; delivery not recorded")]
    Closed,
}

enum Job {
    Request {
        delivery: Box<NewDelivery>,
        reply: oneshot::Sender<Result<Recorded, String>>,
    },
    Outcome {
        id: i64,
        outcome: Box<Outcome>,
    },
    Shutdown,
}

/// Hands deliveries to the writer thread. Cheap to clone.
#[derive(Clone)]
pub struct Recorder {
    queue: SyncSender<Job>,
}

/// Owns the writer thread: `shutdown` (or dropping it) writes what is
/// queued and waits for the thread to finish.
pub struct RecorderHandle {
    queue: SyncSender<Job>,
    thread: Option<JoinHandle<()>>,
}

impl Recorder {
    /// Opens the database at `path` and starts its writer thread.
    /// `key_fields` choose the body fields that make an event key when the
    /// provider gives no ID.
    pub fn start(path: &Path, key_fields: Vec<String>) -> Result<(Recorder, RecorderHandle), StoreError> {
        let store = Store::open(path)?;
        let (queue, jobs) = mpsc::sync_channel(QUEUE_CAPACITY);
        let thread = std::thread::Builder::new()
            .name("history-writer".into())
            .spawn(move || Writer { store, key_fields }.run(&jobs))?;
        let handle = RecorderHandle {
            queue: queue.clone(),
            thread: Some(thread),
        };
        Ok((Recorder { queue }, handle))
    }

    /// Records the request half of a delivery; resolves once it is committed.
    pub async fn record_request(&self, d: NewDelivery) -> Result<Recorded, RecordError> {
        let (reply, answer) = oneshot::channel();
        let job = Job::Request {
            delivery: Box::new(d),
            reply,
        };
        match self.queue.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => return Err(RecordError::Full),
            Err(TrySendError::Disconnected(_)) => return Err(RecordError::Closed),
        }
        match answer.await {
            Ok(result) => result.map_err(RecordError::Store),
            Err(_) => Err(RecordError::Closed),
        }
    }

    /// Records the answer half of delivery `id`. Never blocks: when the
    /// writer is behind, the outcome is dropped with a warning.
    pub fn record_outcome(&self, id: i64, o: Outcome) {
        let job = Job::Outcome {
            id,
            outcome: Box::new(o),
        };
        match self.queue.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                tracing::warn!(delivery = id, "history writer behind; outcome not recorded")
            }
            Err(TrySendError::Disconnected(_)) => {
                tracing::warn!(delivery = id, "history writer stopped; outcome not recorded")
            }
        }
    }
}

impl RecorderHandle {
    /// Writes everything queued, then stops the writer thread.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        // A blocking send: the writer is draining, so room comes soon. If it
        // has died the send fails and join reports nothing more to do.
        let _ = self.queue.send(Job::Shutdown);
        if thread.join().is_err() {
            tracing::warn!("history writer panicked");
        }
    }
}

impl Drop for RecorderHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The writer thread's state.
struct Writer {
    store: Store,
    key_fields: Vec<String>,
}

impl Writer {
    fn run(self, jobs: &Receiver<Job>) {
        let mut batch = Vec::with_capacity(64);
        // When the answers held back in `batch` must be written at the latest.
        let mut due: Option<Instant> = None;
        loop {
            // Blocks only when idle; under load every pass finds a full batch.
            let next = match due {
                None => jobs.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(due) => jobs.recv_timeout(due.saturating_duration_since(Instant::now())),
            };
            let overdue = match next {
                Ok(job) => {
                    batch.push(job);
                    false
                }
                Err(RecvTimeoutError::Timeout) => true,
                Err(RecvTimeoutError::Disconnected) => {
                    if !batch.is_empty() {
                        self.write(batch);
                    }
                    return;
                }
            };
            while batch.len() < MAX_BATCH {
                match jobs.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            let stop = batch.iter().any(|job| matches!(job, Job::Shutdown));
            if stop {
                // Whatever raced in after the shutdown request is flushed too.
                batch.extend(jobs.try_iter());
            }
            // A caller waits on every request; nobody waits on an answer.
            // Answers alone are held back to share the next request's
            // commit, which halves the commits when requests come one by one.
            let urgent = batch.iter().any(|job| !matches!(job, Job::Outcome { .. }));
            if urgent || overdue || batch.len() >= MAX_BATCH {
                self.write(std::mem::take(&mut batch));
                due = None;
            } else if due.is_none() {
                due = Some(Instant::now() + OUTCOME_LINGER);
            }
            if stop {
                return;
            }
        }
    }

    /// Writes one batch in one transaction, then answers the waiting callers.
    fn write(&self, mut batch: Vec<Job>) {
        for job in &mut batch {
            if let Job::Request { delivery, .. } = job {
                self.identify(delivery);
            }
        }
        let mut replies = Vec::new();
        let mut outcomes = 0usize;
        let result = self.store.write(|store| {
            let mut recorded = Vec::new();
            for job in &batch {
                match job {
                    Job::Request { delivery, .. } => {
                        let id = store.insert_request_row(delivery)?;
                        let delivery_number = store.newest_delivery_number_row(delivery, id)?;
                        recorded.push(Recorded {
                            id,
                            delivery_number,
                            provider: delivery.provider.clone(),
                            event_key: delivery.event_key.clone(),
                            event_key_source: delivery.event_key_source.clone(),
                        });
                    }
                    Job::Outcome { id, outcome } => {
                        outcomes += 1;
                        store.outcome_row(*id, outcome)?;
                    }
                    Job::Shutdown => {}
                }
            }
            Ok(recorded)
        });
        for job in batch {
            if let Job::Request { reply, .. } = job {
                replies.push(reply);
            }
        }
        match result {
            Ok(recorded) => {
                for (reply, recorded) in replies.into_iter().zip(recorded) {
                    // The caller may have given up waiting; the row is stored anyway.
                    let _ = reply.send(Ok(recorded));
                }
            }
            Err(err) => {
                tracing::warn!(%err, deliveries = replies.len(), outcomes, "history write failed; tunnel keeps forwarding");
                let message = err.to_string();
                for reply in replies {
                    let _ = reply.send(Err(message.clone()));
                }
            }
        }
    }

    /// Fills in what the forwarding path left to the writer: detecting the
    /// provider and the event key means parsing the body, which must not
    /// cost the forwarding path anything.
    fn identify(&self, delivery: &mut NewDelivery) {
        if !delivery.event_key.is_empty() {
            return;
        }
        // The body is untrusted: should detection ever panic on it, that one
        // delivery goes without a key rather than the writer thread dying.
        let detect = || event_key(&delivery.request_headers, &delivery.request_body, &self.key_fields);
        let Ok(key) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(detect)) else {
            tracing::warn!(path = ?delivery.path, "event key detection failed; delivery stored without a key");
            return;
        };
        if delivery.provider.is_none() {
            delivery.provider = key.provider.map(|p| p.name().to_owned());
        }
        delivery.event_key = key.key;
        delivery.event_key_source = key.source;
    }
}

#[cfg(test)]
mod tests {
    use futures_util::future::join_all;

    use super::*;
    use crate::store::tests::{delivery, ScratchDir};
    use crate::store::ListQuery;

    #[tokio::test]
    async fn a_thousand_deliveries_are_all_committed() {
        let dir = ScratchDir::new("recorder-many");
        let path = dir.0.join("history.db");
        let (recorder, handle) = Recorder::start(&path, Vec::new()).unwrap();
        let sends = (0..1000).map(|n| {
            let recorder = recorder.clone();
            async move { recorder.record_request(delivery(&format!("evt_{}", n % 10), "/")).await }
        });
        let recorded: Vec<Recorded> = join_all(sends).await.into_iter().map(Result::unwrap).collect();
        for r in &recorded {
            recorder.record_outcome(
                r.id,
                Outcome {
                    status: Some(204),
                    ..Outcome::default()
                },
            );
        }
        handle.shutdown();

        let mut numbers: Vec<i64> = recorded.iter().map(|r| r.delivery_number).collect();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(
            numbers,
            (1..=100).collect::<Vec<_>>(),
            "ten events, a hundred deliveries each"
        );
        let store = Store::open(&path).unwrap();
        assert_eq!(store.count(&ListQuery::default()).unwrap(), 1000);
        let answered = store.list(&ListQuery::default()).unwrap();
        assert!(answered
            .iter()
            .all(|s| s.status == Some(204) && s.delivery_count == 100));
    }

    #[tokio::test]
    async fn a_recorded_request_is_already_on_disk() {
        let dir = ScratchDir::new("recorder-commit");
        let path = dir.0.join("history.db");
        let (recorder, _handle) = Recorder::start(&path, Vec::new()).unwrap();
        let reader = rusqlite::Connection::open(&path).unwrap();
        for n in 0..20 {
            let recorded = recorder
                .record_request(delivery(&format!("evt_{n}"), "/c"))
                .await
                .unwrap();
            let key: String = reader
                .query_row("SELECT event_key FROM deliveries WHERE id = ?1", [recorded.id], |r| {
                    r.get(0)
                })
                .unwrap();
            assert_eq!(key, format!("evt_{n}"));
            assert_eq!(recorded.delivery_number, 1);
        }
    }

    #[tokio::test]
    async fn an_answer_with_no_request_after_it_still_lands_soon() {
        let dir = ScratchDir::new("recorder-linger");
        let path = dir.0.join("history.db");
        let (recorder, _handle) = Recorder::start(&path, Vec::new()).unwrap();
        let recorded = recorder.record_request(delivery("evt_last", "/")).await.unwrap();
        recorder.record_outcome(
            recorded.id,
            Outcome {
                status: Some(202),
                ..Outcome::default()
            },
        );
        let reader = Store::open(&path).unwrap();
        let started = std::time::Instant::now();
        loop {
            let status = reader.list(&ListQuery::default()).unwrap()[0].status;
            if status == Some(202) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the answer was never written"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn the_writer_works_out_provider_and_event_key() {
        let dir = ScratchDir::new("recorder-identify");
        let (recorder, _handle) = Recorder::start(&dir.0.join("history.db"), Vec::new()).unwrap();
        let mut d = delivery("", "/webhooks/github");
        d.provider = None;
        d.event_key_source.clear();
        d.request_headers = vec![
            portpreview_shared::Header::new("x-github-event", "push"),
            portpreview_shared::Header::new("x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
            portpreview_shared::Header::new("x-github-hook-id", "42"),
        ];
        let first = recorder.record_request(d.clone()).await.unwrap();
        assert_eq!(first.provider.as_deref(), Some("github"));
        assert_eq!(first.event_key, "72d3162e-cc78-11e3-81ab-4c9367dc0958");
        assert!(first
            .event_key_source
            .to_ascii_lowercase()
            .starts_with("header:x-github-delivery"));
        let again = recorder.record_request(d).await.unwrap();
        assert_eq!(
            again.delivery_number, 2,
            "a redelivery is the 2nd delivery of its event"
        );
    }

    #[tokio::test]
    async fn after_shutdown_recording_fails_quietly() {
        let dir = ScratchDir::new("recorder-closed");
        let (recorder, handle) = Recorder::start(&dir.0.join("history.db"), Vec::new()).unwrap();
        handle.shutdown();
        let err = recorder.record_request(delivery("evt_1", "/")).await.unwrap_err();
        assert!(matches!(err, RecordError::Closed), "{err:?}");
        recorder.record_outcome(1, Outcome::default());
    }

    #[tokio::test]
    async fn a_failed_write_answers_with_an_error_and_the_writer_lives_on() {
        let dir = ScratchDir::new("recorder-locked");
        let path = dir.0.join("history.db");
        let (recorder, _handle) = Recorder::start(&path, Vec::new()).unwrap();
        let blocker = rusqlite::Connection::open(&path).unwrap();
        blocker.busy_timeout(std::time::Duration::ZERO).unwrap();
        blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
        // The writer waits out the busy timeout, then must answer, not hang.
        let held = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            recorder.record_request(delivery("evt_locked", "/")),
        )
        .await
        .expect("record_request hung");
        assert!(matches!(held, Err(RecordError::Store(_))), "{held:?}");
        blocker.execute_batch("ROLLBACK").unwrap();
        let recorded = recorder.record_request(delivery("evt_after", "/")).await.unwrap();
        assert!(recorded.id > 0);
    }
}
