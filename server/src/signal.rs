//! "Stop" as one future: ctrl-c, SIGTERM, or SIGHUP when the terminal goes
//! away. The relay's binary shuts down on it; the client, which embeds
//! the relay, stops its tunnel, replay or check on it too.

/// Resolves on ctrl-c (SIGINT) or, on Unix, SIGTERM or SIGHUP. SIGHUP is
/// left alone when the process started with it ignored (`nohup`), so that
/// closing the terminal keeps it running as asked. Awaited again, it
/// resolves on the next signal.
pub async fn shutdown_signal() {
    stop_signal(true).await;
}

/// [`shutdown_signal`] but for SIGHUP: ctrl-c or SIGTERM, what a user or a
/// supervisor sends. After a terminal-bound stop has begun, its terminal
/// closing says nothing more.
pub async fn interrupt_or_terminate() {
    stop_signal(false).await;
}

/// Ctrl-c, SIGTERM, and with `hangup` SIGHUP.
async fn stop_signal(hangup: bool) {
    let ctrl_c = async {
        // If the handler cannot be installed, the process still dies on
        // SIGINT by default; waiting forever here is the right fallback.
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::warn!(%err, "cannot watch for ctrl-c; it will stop the process without a drain");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let on = |kind| async move {
            match signal(kind) {
                Ok(mut stream) => {
                    stream.recv().await;
                }
                Err(err) => {
                    tracing::warn!(%err, ?kind, "cannot watch for a signal; it will stop the process without a drain");
                    std::future::pending::<()>().await
                }
            }
        };
        let hangup = async {
            if !hangup || portpreview_shared::hangup::ignored() {
                std::future::pending::<()>().await
            } else {
                on(SignalKind::hangup()).await
            }
        };
        tokio::select! {
            () = ctrl_c => {}
            () = on(SignalKind::terminate()) => {}
            () = hangup => {}
        }
    }
    #[cfg(not(unix))]
    {
        // No hangup signal to leave out.
        let _ = hangup;
        ctrl_c.await;
    }
}

/// How long after a stop signal another one is taken for the same: one
/// hang-up can arrive twice (from the kernel, and passed on by the
/// shell), and one ctrl-c too (from the terminal, and passed on by a
/// wrapper such as npm, which forwards it to its child).
pub const SIGNAL_SETTLE: std::time::Duration = std::time::Duration::from_millis(300);

/// The second stop signal: the first that comes [`SIGNAL_SETTLE`] or more
/// after this is awaited, as the user's "now".
pub async fn second_shutdown_signal() {
    tokio::time::sleep(SIGNAL_SETTLE).await;
    shutdown_signal().await;
}
