//! A `portpreview http` tunnel running in this process, recording into a
//! real SQLite file in a temporary directory.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use portpreview::config::Secret;
use portpreview::events::{report, EventFeed, TunnelEvent};
use portpreview::store::{Recorder, RecorderHandle, Summary, WriterNews};
use portpreview::target::Target;
use portpreview::tunnel::{self, connect, ConnectError, ConnectOptions, HostHeader, TunnelConfig};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How a test tunnel is set up.
#[derive(Clone)]
pub struct TunnelOptions {
    /// Name to ask for.
    pub name: Option<String>,
    /// Token to present.
    pub token: Option<String>,
    /// Local handler timeout.
    pub local_timeout: Duration,
    /// Host header policy.
    pub host_header: HostHeader,
    /// TLS settings for wss relays.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Told each time the relay holds the start back (a held name, a busy
    /// relay).
    pub held_back: Option<Arc<tokio::sync::Notify>>,
}

impl Default for TunnelOptions {
    fn default() -> Self {
        Self {
            name: None,
            token: None,
            local_timeout: tunnel::DEFAULT_LOCAL_TIMEOUT,
            host_header: HostHeader::Rewrite,
            tls: None,
            held_back: None,
        }
    }
}

/// A connected tunnel; stops on drop.
pub struct TestTunnel {
    /// Public URL the relay gave.
    pub public_url: String,
    /// The `/t/<name>` URL printed beside a `<name>.<domain>` one.
    pub also_url: Option<String>,
    /// History database file.
    pub db: PathBuf,
    events: EventFeed,
    shutdown: CancellationToken,
    task: Option<JoinHandle<Result<(), ConnectError>>>,
    recorder: Option<RecorderHandle>,
    /// The folder of its history, removed with the tunnel.
    dir: Option<tempfile::TempDir>,
}

impl TestTunnel {
    /// Connects to the relay at `relay_url` and forwards to `target`.
    pub async fn start(relay_url: &str, target: &str) -> Self {
        Self::start_with(relay_url, target, TunnelOptions::default())
            .await
            .expect("tunnel connects")
    }

    /// Like `start`, returning the connection error instead of panicking.
    pub async fn start_with(relay_url: &str, target: &str, options: TunnelOptions) -> Result<Self, ConnectError> {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("history.db");
        let (events_tx, mut events) = portpreview::events::queue(1024);
        let reported = events_tx.clone();
        let report = move |news: WriterNews| report(&reported, news.into());
        let (recorder, handle) = Recorder::start(&db, Vec::new(), report).expect("open the history");
        let config = TunnelConfig {
            connect: ConnectOptions {
                url: connect::relay_url(relay_url)?,
                token: options.token.map(Secret::new),
                name: options.name,
                resume: None,
                tls: options.tls,
            },
            target: Target::parse(target).expect("valid target"),
            host_header: options.host_header,
            local_timeout: options.local_timeout,
            relay_in_process: false,
        };
        let stop = tunnel::Stop::default();
        let shutdown = stop.drain.clone();
        let mut task = tokio::spawn(tunnel::run(config, Some(recorder), events_tx, stop));
        let (public_url, also_url) = loop {
            tokio::select! {
                event = events.recv() => match event {
                    Some(TunnelEvent::Connected { public_url, also_url, .. }) => break (public_url, also_url),
                    // A held name or a busy relay is waited for.
                    Some(TunnelEvent::HeldBack { .. }) => {
                        if let Some(held_back) = &options.held_back {
                            held_back.notify_one();
                        }
                    }
                    other => panic!("expected Connected, got {other:?}"),
                },
                // The tunnel ended without connecting: its result says why.
                ended = &mut task => {
                    return Err(ended.expect("tunnel task").expect_err("tunnel ended without connecting"));
                }
            }
        };
        Ok(Self {
            public_url,
            also_url,
            db,
            events,
            shutdown,
            task: Some(task),
            recorder: Some(handle),
            dir: Some(dir),
        })
    }

    /// The public URL of `path` (which starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.public_url, path)
    }

    /// The tunnel's name, the last segment of its URL.
    pub fn name(&self) -> &str {
        self.public_url.rsplit('/').next().unwrap_or_default()
    }

    /// Delivery `id` as the tunnel's history file holds it.
    pub fn stored(&self, id: i64) -> portpreview::store::Delivery {
        portpreview::store::Store::open_existing(&self.db)
            .expect("open the history")
            .get(id)
            .expect("read the history")
            .expect("the delivery is in the history")
    }

    /// The next event, failing the test after 20 s.
    pub async fn next_event(&mut self) -> TunnelEvent {
        tokio::time::timeout(Duration::from_secs(20), self.events.recv())
            .await
            .expect("a tunnel event within 20 s")
            .expect("tunnel still running")
    }

    /// The next completed delivery and its delivery number.
    pub async fn next_delivery(&mut self) -> (Summary, i64) {
        loop {
            if let TunnelEvent::Delivered {
                summary,
                delivery_number,
            } = self.next_event().await
            {
                return (summary, delivery_number);
            }
        }
    }

    /// Stops the tunnel as [`Self::stop`] does, and keeps the folder of its
    /// history to read after the stop.
    pub async fn stop_keeping_history(mut self) -> (Result<(), ConnectError>, Option<tempfile::TempDir>) {
        let dir = self.dir.take();
        (self.stop().await, dir)
    }

    /// Stops the tunnel, closing its socket with a reason, flushes the
    /// history, and gives what the tunnel ended with: `Ok` for a clean stop.
    pub async fn stop(mut self) -> Result<(), ConnectError> {
        self.shutdown.cancel();
        let ended = match self.task.take() {
            Some(task) => task.await.expect("the tunnel task ends without panicking"),
            None => Ok(()),
        };
        if let Some(handle) = self.recorder.take() {
            // It joins the writer's thread: off the runtime's own threads.
            tokio::task::spawn_blocking(move || handle.shutdown())
                .await
                .expect("the history writer stops");
        }
        ended
    }
}

impl Drop for TestTunnel {
    fn drop(&mut self) {
        self.shutdown.cancel();
        // The history writer stops before the temp folder goes: left to
        // write the last deliveries after it, it would make the history
        // again (as for a history deleted under a tunnel) in a folder
        // nobody removes.
        if let Some(handle) = self.recorder.take() {
            handle.shutdown();
        }
    }
}
