//! The PortPreview relay: gives each connected client a public URL and
//! streams every request that reaches it over the client's WebSocket.
//!
//! How a request travels, module by module: `connection` accepts it
//! (caps, TLS, hyper), [`ingress`] routes it, `forward` opens a stream on
//! the tunnel found in the `registry` and sends head and body, within the
//! client's window, through the session's `writer`; the client's answer
//! comes back through `control` (the session's reader) and `stream` to a
//! `port`, and out to the caller as a `body`. `upgrade` is the clients'
//! door.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod answer_budget;
mod body;
pub mod config;
mod connection;
mod control;
mod error;
mod forward;
mod headers;
pub mod headscan;
mod held_news;
pub mod ingress;
mod limits;
mod linger;
mod names;
mod port;
mod public_url;
mod reconnecting;
mod refusal_log;
mod registry;
pub mod signal;
mod stream;
pub mod tls;
pub mod tokens;
mod turned_away;
mod upgrade;
mod write_stall;
mod writer;

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use config::RelayConfig;
pub use error::{ConfigError, RelayError};
pub use tls::load_tls;
pub use tokens::Tokens;

use crate::ingress::Relay;
use crate::registry::LocalRegistry;

/// Serves the relay on `listener` until `shutdown` fires, then stops
/// accepting, lets requests in flight finish (up to the drain timeout) and
/// closes every client socket with a reason.
/// Settings it cannot honour are refused before anything is served.
pub async fn run(listener: TcpListener, config: RelayConfig, shutdown: CancellationToken) -> Result<(), RelayError> {
    run_until(
        listener,
        config,
        Stop {
            drain: shutdown,
            now: CancellationToken::new(),
        },
    )
    .await
}

/// What stops a relay: `drain` asks it to stop as [`run`]'s `shutdown`
/// does; `now`, fired after, cuts the drain short, as a second ctrl-c
/// does: requests in flight get the relay's 502 at once, and clients a
/// close frame with the reason.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    /// Stop accepting, and let requests in flight finish.
    pub drain: CancellationToken,
    /// Stop waiting for them.
    pub now: CancellationToken,
}

/// [`run`], with the drain that can be cut short.
pub async fn run_until(listener: TcpListener, config: RelayConfig, stop: Stop) -> Result<(), RelayError> {
    let Stop {
        drain: drain_asked,
        now: cut_short,
    } = stop;
    config.validate().map_err(RelayError::Config)?;
    let registry = Arc::new(LocalRegistry::new(config.grace, config.tokens.clone()));
    let drain_timeout = config.drain_timeout;
    // A child token: the relay may stop itself (listener failure) without
    // cancelling whatever else the caller's token governs.
    let shutdown = drain_asked.child_token();
    let answer_budget = answer_budget::AnswerBudget::new(config.answer_budget);
    let relay = Arc::new(Relay {
        config,
        answer_budget,
        registry,
        shutdown: shutdown.clone(),
        cut_short,
        sessions: TaskTracker::new(),
    });
    let connections = TaskTracker::new();
    let result = connection::accept_loop(listener, Arc::clone(&relay), &connections).await;
    // Whatever ended the loop, nothing new is served from here on.
    shutdown.cancel();
    connections.close();
    relay.sessions.close();
    let drained = tokio::time::timeout(drain_timeout + DRAIN_SLACK, async {
        connections.wait().await;
        relay.sessions.wait().await;
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            connections = connections.len(),
            sessions = relay.sessions.len(),
            "stopped with connections still open after the drain"
        );
    }
    result
}

/// Time beyond the drain timeout given to sockets to carry their close frames.
const DRAIN_SLACK: std::time::Duration = std::time::Duration::from_secs(3);
