//! A relay running in this process on 127.0.0.1:0.

use std::net::SocketAddr;

use portpreview_server::RelayConfig;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A running relay; stops on drop.
pub struct TestRelay {
    /// Where it listens.
    pub addr: SocketAddr,
    shutdown: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl TestRelay {
    /// Starts a relay with default settings.
    pub async fn start() -> Self {
        Self::with_config(RelayConfig::default()).await
    }

    /// Starts a relay that gives a tunnel's handler `timeout` to answer.
    pub async fn answering_within(timeout: std::time::Duration) -> Self {
        Self::with_config(RelayConfig {
            request_timeout: timeout,
            ..RelayConfig::default()
        })
        .await
    }

    /// Starts a relay with the given settings.
    pub async fn with_config(config: RelayConfig) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind relay");
        Self::on(listener, config)
    }

    /// Starts a relay on an already bound listener (restarts on the same port).
    pub fn on(listener: TcpListener, config: RelayConfig) -> Self {
        let addr = listener.local_addr().expect("relay address");
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        let task = tokio::spawn(async move {
            if let Err(err) = portpreview_server::run(listener, config, stop).await {
                panic!("relay failed: {err}");
            }
        });
        Self {
            addr,
            shutdown,
            task: Some(task),
        }
    }

    /// `http://127.0.0.1:PORT`
    pub fn http_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops the relay and waits until it has closed everything.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for TestRelay {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
