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
            if hangup_ignored() {
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

/// Whether SIGHUP was ignored when first asked, which is before PortPreview
/// installs a handler for it. Read from `/proc` on Linux; elsewhere taken as
/// not ignored.
#[cfg(unix)]
fn hangup_ignored() -> bool {
    static IGNORED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *IGNORED.get_or_init(|| {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| {
                let mask = status.lines().find_map(|line| line.strip_prefix("SigIgn:"))?;
                u64::from_str_radix(mask.trim(), 16).ok()
            })
            // Bit n-1 stands for signal n; SIGHUP is 1.
            .is_some_and(|mask| mask & 1 != 0)
    })
}
