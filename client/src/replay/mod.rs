//! The replay engine: send a recorded delivery N times, read the handler's
//! state around each attempt, and judge whether the handler is idempotent.
//!
//! `run` is the whole public face; `replay`, `check` and the TUI call it,
//! and `replay` and the TUI keep the result with `record`.

pub mod answers;
pub mod attempt;
mod check_cmd;
pub(crate) mod check_url;
pub mod delta;
mod engine;
mod history;
mod json_state;
pub mod junit;
pub mod options;
mod overridden;
pub mod plan;
pub mod probe;
pub mod report;
mod stale;
pub mod stored;
mod text;
pub mod verdict;

use portpreview_shared::provider::{FreshError, Provider, SignError};

pub use history::{had_before, record};
pub use options::{HadBefore, ReplayOptions, DEFAULT_SETTLE, DEFAULT_TIMEOUT, MAX_CONCURRENCY, MAX_TIMES};
pub use overridden::edits_not_sent;
pub use plan::provider_of;
pub use probe::{ProbeError, ProbeSpec};
pub use report::{Attempt, Check, Report, Role, StateTrace};
pub use stale::{resign_advice, signature_too_old};

use crate::store::NewDelivery;

/// The warning for a run without a probe.
pub const NOT_PROBED: &str =
    "side effects were not checked: pass --check-url or --check-cmd to read the handler's state";
/// The warning for a run of one attempt, which nothing can be compared to.
pub const ONE_ATTEMPT: &str =
    "one attempt only: nothing to compare it to; pass --times 2 or more to see what a duplicate does";

/// Whether a warning says what the run did not do ([`NOT_PROBED`],
/// [`ONE_ATTEMPT`]): the TUI shows that on the run's line, and its advice
/// names flags the TUI has no use for.
pub fn tells_what_was_not_done(warning: &str) -> bool {
    [NOT_PROBED, ONE_ATTEMPT].contains(&warning)
}

/// Where a run is, for progress lines and the TUI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Attempts answered so far (baseline included).
    pub done: u32,
    /// Attempts the run will send.
    pub total: u32,
    /// What the run is doing now.
    pub phase: Phase,
}

/// The stage of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Sending attempts.
    Sending,
    /// Waiting for the state to hold still.
    Settling,
    /// Waiting out the final settle windows after the last attempt.
    FinalWait,
}

/// Why a replay could not run (exit code 2); each is one line for stderr.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// `--times` outside 1 to [`MAX_TIMES`].
    #[error("--times must be from 1 to {MAX_TIMES}, not {0}")]
    Times(u32),
    /// `--fresh` with one copy: a burst of one holds no duplicate, so it
    /// could only ever pass.
    #[error("--fresh needs --times 2 or more: a burst of one copy sends no duplicate, so it cannot show the handler acting twice")]
    FreshBurstOfOne,
    /// `--concurrency` outside 1 to [`MAX_CONCURRENCY`].
    #[error("--concurrency must be from 1 to {MAX_CONCURRENCY}, not {0}")]
    Concurrency(u32),
    /// More attempts in flight than the process may open sockets for:
    /// those past the limit would fail, and the handler be blamed.
    #[error(
        "{width} attempts at once need as many sockets, and this process may open {limit} files: \
         raise the limit (ulimit -n) or pass --concurrency {fits}"
    )]
    OpenFiles {
        /// Attempts in flight at once.
        width: u32,
        /// The open-file limit.
        limit: u64,
        /// The most attempts in flight the limit leaves room for.
        fits: u64,
    },
    /// A zero `--timeout`: no attempt could ever be answered in time.
    #[error("--timeout must be longer than 0s")]
    Timeout,
    /// `--expect-effect` with nothing to read the state: no run could see
    /// the effect it expects.
    #[error("--expect-effect needs a probe to see the effect: --check-url or --check-cmd")]
    EffectUnseeable,
    /// The recorded body was cut at the store's limit, or broke off on its
    /// way (then `size` is one past `kept`: the full size is not known).
    #[error(
        "the delivery's body was cut short when it was recorded ({}): it cannot be replayed as sent \
         (--body-file sends another)",
        if crate::store::size_unknown_past(*kept, *size) {
            format!("after {kept} bytes")
        } else {
            format!("{kept} of {size} bytes kept")
        }
    )]
    Truncated {
        /// Bytes stored.
        kept: u64,
        /// Bytes received.
        size: u64,
    },
    /// `--target` or the recorded target is unusable.
    #[error("{0}")]
    Target(String),
    /// Nothing listens at the target.
    #[error("nothing answers at {target}: {error} (is the handler running?)")]
    TargetDown {
        /// `host:port`.
        target: String,
        /// The connect error (kept out of `source()`: the message includes it).
        error: std::io::Error,
    },
    /// The handler answered, but the TLS handshake with it failed.
    #[error("{0}")]
    TargetTls(String),
    /// The state probe failed.
    #[error(transparent)]
    Probe(#[from] ProbeError),
    /// Re-signing was asked for without a secret.
    #[error("no secret for {provider}: {sources}")]
    NoSecret {
        /// Provider name.
        provider: &'static str,
        /// Every place the secret could come from ([`secret_sources`]).
        sources: String,
    },
    /// The provider's signature cannot be made here.
    #[error(transparent)]
    Sign(#[from] SignError),
    /// `--fresh` found no identity to renew.
    #[error(transparent)]
    Fresh(#[from] FreshError),
}

/// Every place a provider's signing secret can come from, as advice:
/// "pass --secret, set PORTPREVIEW_SECRET_STRIPE or PORTPREVIEW_SECRET,
/// or add stripe = "…" to the \[secrets\] table of
/// ~/.config/portpreview/config.toml". The config file is named by its real
/// path, since few people know where it lives; one set aside
/// (`PORTPREVIEW_CONFIG=/dev/null`) is no place for a secret. A variable
/// set to nothing is named as such first.
pub fn secret_sources(provider: Provider) -> String {
    let env = crate::config::secret_env(provider);
    // A CI job's secret a pull request from a fork may not read is set,
    // to nothing: "set it" alone would send the user to look for a typo.
    let empty = crate::config::set_but_empty(
        crate::config::secret_envs(provider)
            .into_iter()
            .chain([crate::config::ANY_PROVIDER_SECRET_ENV.to_owned()]),
    );
    let empty = match empty.as_slice() {
        [] => String::new(),
        [one] => format!("{one} is set but empty (as CI leaves a secret the job may not read); "),
        many => format!(
            "{} are set but empty (as CI leaves secrets the job may not read); ",
            many.join(" and ")
        ),
    };
    let places = match crate::config::config_path() {
        Some(path) if path.exists() && !path.is_file() => format!("pass --secret, or set {env} or PORTPREVIEW_SECRET"),
        path => {
            let config = path.map_or_else(|| "config.toml".to_string(), |p| p.display().to_string());
            let name = provider.name();
            format!(
                "pass --secret, set {env} or PORTPREVIEW_SECRET, or add {name} = \"…\" to the [secrets] table of \
                 {config}"
            )
        }
    };
    empty + &places
}

/// Replays `request` as `opts` says and judges the handler.
pub async fn run(
    request: NewDelivery,
    opts: &ReplayOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Report, ReplayError> {
    engine::run(&request, opts, progress, std::future::pending()).await
}

/// [`run`], until `interrupt` resolves (the user pressing ctrl-c): then the
/// attempts in flight are dropped and the report covers those answered,
/// with the verdict left open.
pub async fn run_until(
    request: NewDelivery,
    opts: &ReplayOptions,
    progress: &(dyn Fn(Progress) + Sync),
    interrupt: impl std::future::Future<Output = ()> + Send,
) -> Result<Report, ReplayError> {
    engine::run(&request, opts, progress, interrupt).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The TUI and other callers may run a replay on any runtime thread.
    #[test]
    fn a_run_can_move_between_threads() {
        fn is_send<T: Send>(_: &T) {}
        let opts = ReplayOptions::default();
        let progress = |_: Progress| {};
        let future = run(NewDelivery::default(), &opts, &progress);
        is_send(&future);
    }

    #[tokio::test]
    async fn absurd_settings_are_refused_before_anything_is_sent() {
        let progress = |_: Progress| {};
        let opts = ReplayOptions {
            times: u32::MAX,
            fresh: true,
            ..ReplayOptions::default()
        };
        let err = run(NewDelivery::default(), &opts, &progress).await.unwrap_err();
        assert!(matches!(err, ReplayError::Times(u32::MAX)), "{err}");
        // A burst of one copy holds no duplicate: it could only ever pass.
        let opts = ReplayOptions {
            fresh: true,
            ..ReplayOptions::default()
        };
        let err = run(NewDelivery::default(), &opts, &progress).await.unwrap_err();
        assert!(matches!(err, ReplayError::FreshBurstOfOne), "{err}");
        let opts = ReplayOptions {
            concurrency: Some(MAX_CONCURRENCY + 1),
            ..ReplayOptions::default()
        };
        let err = run(NewDelivery::default(), &opts, &progress).await.unwrap_err();
        assert_eq!(err.to_string(), "--concurrency must be from 1 to 512, not 513");
        let opts = ReplayOptions {
            timeout: std::time::Duration::ZERO,
            ..ReplayOptions::default()
        };
        let err = run(NewDelivery::default(), &opts, &progress).await.unwrap_err();
        assert!(matches!(err, ReplayError::Timeout), "{err}");
    }
}
