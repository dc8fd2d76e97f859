//! One future for "the user asked us to stop": ctrl-c, SIGTERM, or SIGHUP
//! when the terminal goes away.

/// Resolves on SIGINT (ctrl-c), SIGTERM or SIGHUP.
pub async fn stop_requested() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        // A signal whose handler cannot be installed is simply never awaited.
        let on = |kind| async move {
            match signal(kind) {
                Ok(mut stream) => {
                    stream.recv().await;
                }
                Err(_) => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = on(SignalKind::terminate()) => {}
            () = on(SignalKind::hangup()) => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
