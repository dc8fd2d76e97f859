//! "Stop" as one future: ctrl-c, SIGTERM, or SIGHUP when the terminal goes
//! away. The relay's binary shuts down on it; the client, which embeds
//! the relay, stops its tunnel, replay or check on it too.

/// Resolves on ctrl-c (SIGINT) or, on Unix, SIGTERM or SIGHUP. SIGHUP is
/// left alone when the process started with it ignored (`nohup`), so that
/// closing the terminal keeps it running as asked. Awaited again, it
/// resolves on the next signal.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        // If the handler cannot be installed, the process still dies on
        // SIGINT by default; waiting forever here is the right fallback.
        if tokio::signal::ctrl_c().await.is_err() {
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
                Err(_) => std::future::pending::<()>().await,
            }
        };
        let hangup = async {
            if portpreview_shared::hangup::ignored() {
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
    ctrl_c.await;
}
