//! Work that a stop signal (ctrl-c, SIGTERM, SIGHUP) ends early, with
//! time to finish what it was doing.

use std::future::Future;

use tokio_util::sync::CancellationToken;

/// Runs `work` to its end. A stop signal cancels `stop` first, which
/// `work` watches to wind down (a check leaves its remaining fixtures
/// unstarted, the TUI gives the terminal back), and `work` is then awaited
/// all the same, so that what it did is still reported.
pub async fn finish_early_on_signal<T>(work: impl Future<Output = T>, stop: &CancellationToken) -> T {
    tokio::pin!(work);
    tokio::select! {
        done = &mut work => done,
        () = portpreview_server::signal::shutdown_signal() => {
            stop.cancel();
            work.await
        }
    }
}
