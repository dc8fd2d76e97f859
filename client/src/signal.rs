//! One future for "the user asked us to stop": ctrl-c, SIGTERM, or SIGHUP
//! when the terminal goes away.

/// Resolves on SIGINT (ctrl-c), SIGTERM or SIGHUP. SIGHUP is left alone
/// when PortPreview started with it ignored (`nohup portpreview http 3000
/// &`), so that closing the terminal keeps the tunnel up as asked.
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
        let hangup = async {
            if portpreview_shared::hangup::ignored() {
                std::future::pending().await
            } else {
                on(SignalKind::hangup()).await
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = on(SignalKind::terminate()) => {}
            () = hangup => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
