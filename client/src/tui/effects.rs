//! Carrying out what the state machine asks for: replays (run inside the
//! event loop so the screen stays live), exports and copies.

use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use portpreview_shared::provider::Provider;
use portpreview_shared::sanitize::escape_str;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::{resolve_secret, secret_env, ANY_PROVIDER_SECRET_ENV};
use crate::replay::{resign_advice, Phase, ProbeSpec, Progress, ReplayOptions, Report};
use crate::store::{Delivery, Store};

use super::app::{App, Effect};
use super::dialog::{ExportFormat, Probe, ReplayRequest, Sends};
use super::export;
use super::terminal::TerminalGuard;

/// A replay being run: resolves once with its result.
pub struct ReplayTask {
    /// The run, to be polled by the loop.
    pub done: Pin<Box<dyn Future<Output = ReplayDone>>>,
    /// Cancelled, it drops the attempts in flight and ends the run with
    /// what was answered, saved as `replay` saves a run ctrl-c stopped.
    pub stop: CancellationToken,
}

/// How a replay ended.
#[derive(Debug)]
pub struct ReplayDone {
    /// Delivery that was replayed.
    pub delivery_id: i64,
    /// The verdict's summary line, or why it could not run (both one line, safe to draw).
    pub result: Result<String, String>,
}

/// Does the work behind [`Effect`]s.
pub struct Effects {
    /// The history file, where replay runs are saved.
    db: PathBuf,
    progress: mpsc::UnboundedSender<String>,
}

impl Effects {
    /// Effects on the history in `db`; replay progress lines come out of
    /// the receiver.
    pub fn new(db: PathBuf) -> (Self, mpsc::UnboundedReceiver<String>) {
        let (progress, receiver) = mpsc::unbounded_channel();
        (Self { db, progress }, receiver)
    }

    /// Starts `effect`. A replay is put in `running`, for the loop to poll
    /// until it is done; stopping one cancels what is there.
    pub fn start(&self, effect: Effect, app: &mut App, terminal: &mut TerminalGuard, running: &mut Option<ReplayTask>) {
        match effect {
            Effect::Replay(request) => {
                if let Some(task) = self.replay(request, app) {
                    *running = Some(task);
                }
            }
            Effect::StopReplay => {
                if let Some(task) = running {
                    task.stop.cancel();
                }
            }
            Effect::Export { delivery_id, format } => {
                let written = load(app, delivery_id)
                    .map_err(anyhow::Error::msg)
                    .and_then(|d| export::render(&d, format))
                    .and_then(|text| export::write_new_file(&export::export_dir(), delivery_id, format, &text));
                match written {
                    Ok(path) => app.set_status(
                        format!("#{delivery_id} exported to {}{}", shown(&path), secrets_note(format)),
                        false,
                    ),
                    Err(err) => app.set_status(format!("export failed: {}", crate::error_line(&err)), true),
                }
            }
            Effect::Suspend =>
            {
                #[cfg(unix)]
                if let Err(err) = terminal.suspend() {
                    app.set_status(format!("cannot stop: {err}"), true);
                }
            }
            Effect::CopyCurl { delivery_id } => copy_curl(app, delivery_id, terminal),
        }
    }

    fn replay(&self, request: ReplayRequest, app: &mut App) -> Option<ReplayTask> {
        let id = request.delivery_id;
        let delivery = match load(app, id) {
            Ok(delivery) => delivery,
            Err(err) => {
                app.on_replay_done(id, Err(err));
                return None;
            }
        };
        // `r` and `R` take no flags: with a secret configured for the
        // provider, attempts are re-signed as `replay --resign` would sign
        // them, so an event older than the provider's tolerance verifies.
        let resignable = delivery
            .request
            .provider
            .as_deref()
            .and_then(Provider::from_name)
            .filter(|provider| provider.resignable());
        // A secret that cannot be told (two variables set to different
        // ones) stops the run, as it stops `replay --resign`: sending the
        // recorded signature instead would blame the handler.
        let secret = match resignable.map(|provider| resolve_secret(None, Some(provider), None)) {
            Some(Err(err)) => {
                app.on_replay_done(id, Err(escape_str(&crate::error_line(&err)).into_owned()));
                return None;
            }
            Some(Ok(secret)) => secret,
            None => None,
        };
        let opts = ReplayOptions {
            resign: secret.is_some(),
            secret,
            times: request.times,
            fresh: request.sends == Sends::FreshBurst,
            settle: request.settle,
            probe: request.probe.map(|probe| match probe {
                Probe::Url(url) => ProbeSpec::Url(url),
                Probe::Cmd(cmd) => ProbeSpec::Cmd(cmd),
            }),
            had_before: (delivery.outcome.as_ref())
                .is_some_and(|o| o.succeeded())
                .then_some(crate::replay::HadBefore::WhenRecorded),
            ..ReplayOptions::default()
        };
        let sender = self.progress.clone();
        let db = self.db.clone();
        let stop = CancellationToken::new();
        let stopped = stop.clone().cancelled_owned();
        let done = Box::pin(async move {
            let started_at_ms = crate::time::now_ms();
            let progress = |p: Progress| {
                let _ = sender.send(progress_line(id, p));
            };
            let result = match crate::replay::run_until(delivery.request, &opts, &progress, stopped).await {
                Ok(mut report) => {
                    if let Some(provider) = resignable {
                        for warning in &mut report.warnings {
                            *warning = advice_for_keys(warning, provider);
                        }
                    }
                    let _ = sender.send(format!("replaying #{id}: saving the run…"));
                    Ok(save(db, id, started_at_ms, report).await)
                }
                Err(err) => Err(escape_str(&err.to_string()).into_owned()),
            };
            ReplayDone {
                delivery_id: id,
                result,
            }
        });
        Some(ReplayTask { done, stop })
    }
}

/// A warning that says to pass `--resign`, as `r` and `R` would take it:
/// they take no flags, and re-sign once the provider's secret is set.
fn advice_for_keys(warning: &str, provider: Provider) -> String {
    warning.replace(
        &resign_advice(provider, None),
        &format!(
            "set {} or {ANY_PROVIDER_SECRET_ENV} (or {} in [secrets]) to have r and R re-sign",
            secret_env(provider),
            provider.name()
        ),
    )
}

/// What a status line adds for a run's warnings (a stale signature, slow
/// answers, and answers that differ, which the run's lines show as one
/// too): their number, and where they are shown. The two about what the
/// run did not do are left out, as the run's line leaves them out.
fn warnings_note(warnings: &[String], answers_differ: bool) -> String {
    let shown = warnings
        .iter()
        .filter(|w| !crate::replay::tells_what_was_not_done(w))
        .count()
        + usize::from(answers_differ);
    match shown {
        0 => String::new(),
        n => format!(
            " · ⚠ {}: shown under the run in the delivery (Enter)",
            portpreview_shared::text::counted(n, "warning", "warnings")
        ),
    }
}

/// The longest curl command `y` puts on the clipboard. Terminals and tmux
/// drop an OSC 52 write past some size without a word (tmux took 150 KB
/// and lost 1.5 MB), and the status would say it was copied.
const CLIPBOARD_MOST: usize = 100 * 1024;

/// `y`: the curl command on the clipboard when the terminal takes OSC 52
/// and it is not too long for one, else in a file whose path is shown.
fn copy_curl(app: &mut App, id: i64, terminal: &mut TerminalGuard) {
    let text = match load(app, id)
        .map_err(anyhow::Error::msg)
        .and_then(|d| export::render(&d, ExportFormat::Curl))
    {
        Ok(text) => text,
        Err(err) => return app.set_status(format!("cannot copy: {}", crate::error_line(&err)), true),
    };
    let too_long = text.len() > CLIPBOARD_MOST;
    if export::clipboard_supported() && !too_long {
        let backend = terminal.backend_mut();
        let sent = backend
            .write_all(export::osc52(&text).as_bytes())
            .and_then(|()| backend.flush());
        if sent.is_ok() {
            return app.set_status(format!("#{id} copied as curl to the clipboard"), false);
        }
    }
    // Not the working directory, as `e` exports: nobody asked for a file
    // there, and one holding credentials could be committed with the rest.
    match export::write_new_file(&std::env::temp_dir(), id, ExportFormat::Curl, &text) {
        Ok(path) if too_long && export::clipboard_supported() => app.set_status(
            format!(
                "#{id}'s curl command is {} KiB, too long for a terminal's clipboard: written to {}{}",
                text.len() / 1024,
                shown(&path),
                secrets_note(ExportFormat::Curl)
            ),
            false,
        ),
        Ok(path) => app.set_status(copied_to_file(id, &path, export::clipboard_setting().as_deref()), false),
        Err(err) => app.set_status(format!("cannot copy: {}", crate::error_line(&err)), true),
    }
}

/// The status line of a curl command written to `path` instead of the
/// clipboard, `setting` being `PORTPREVIEW_CLIPBOARD`'s value. Unless a
/// file was asked for, it names the setting that sends OSC 52 anyway: the
/// guess leaves it off where the copy could be lost unseen (tmux, unknown
/// terminals), and only the user knows better.
fn copied_to_file(id: i64, path: &Path, setting: Option<&str>) -> String {
    let written = format!(
        "curl command of #{id} written to {}{}",
        shown(path),
        secrets_note(ExportFormat::Curl)
    );
    match setting {
        Some("file") => written,
        // First, where a narrow screen cannot cut it off: it is why.
        Some(other) => format!(
            "{}={} means nothing (set osc52 or file): {written}",
            export::CLIPBOARD_ENV,
            escape_str(other)
        ),
        None => format!(
            "no clipboard here: {written}; set {}=osc52 if your terminal takes OSC 52",
            export::CLIPBOARD_ENV
        ),
    }
}

/// What a status line adds for a file that holds the request's
/// credentials and signatures as received (a fixture and a curl command
/// must, to be sent again); a HAR masks them.
fn secrets_note(format: ExportFormat) -> &'static str {
    match format {
        ExportFormat::Json | ExportFormat::Curl => " (secrets as received, readable by you only)",
        ExportFormat::Har => "",
    }
}

fn shown(path: &Path) -> String {
    escape_str(&path.display().to_string()).into_owned()
}

fn load(app: &App, id: i64) -> Result<Delivery, String> {
    match app.source().get(id) {
        Ok(Some(delivery)) => Ok(delivery),
        Ok(None) => Err(format!("#{id} is no longer in the history")),
        Err(err) => Err(crate::error_line(&err)),
    }
}

fn progress_line(id: i64, p: Progress) -> String {
    match p.phase {
        Phase::Sending => format!("replaying #{id}: {}/{} attempts answered…", p.done, p.total),
        Phase::Settling => format!(
            "replaying #{id}: {}/{}, waiting for the state to settle…",
            p.done, p.total
        ),
        Phase::FinalWait => format!("replaying #{id}: {}/{}, final check of the state…", p.done, p.total),
    }
}

/// Saves the run and its attempts beside the delivery, as `replay` does
/// (so the detail pane lists the run), and returns its summary line. The
/// save runs off the TUI's thread on a connection of its own: waiting out
/// another process's lock there would freeze the screen for seconds.
async fn save(db: PathBuf, delivery_id: i64, started_at_ms: i64, report: Report) -> String {
    let answers_differ = crate::replay::answers::distinct_answers(&report.attempts).len() > 1;
    let summary = report.summary_line() + &warnings_note(&report.warnings, answers_differ);
    let saved = tokio::task::spawn_blocking(move || {
        let store = Store::open_existing(&db)?;
        crate::replay::record(&store, delivery_id, started_at_ms, &report)
    })
    .await;
    match saved {
        Ok(Ok(_)) => summary,
        Ok(Err(err)) => {
            tracing::warn!(%err, delivery_id, "cannot save the replay run");
            format!("{summary} (not saved: {})", escape_str(&err.to_string()))
        }
        Err(err) => {
            tracing::error!(%err, delivery_id, "saving the replay run failed");
            format!("{summary} (not saved: internal error)")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advice_to_pass_resign_names_the_secret_the_keys_sign_with() {
        let warning = format!(
            "the stripe signature is 3 h old; stripe accepts 5 min: {}, \
             or a handler that checks signatures refuses every attempt",
            resign_advice(Provider::Stripe, None)
        );
        assert_eq!(
            advice_for_keys(&warning, Provider::Stripe),
            "the stripe signature is 3 h old; stripe accepts 5 min: set PORTPREVIEW_SECRET_STRIPE \
             or PORTPREVIEW_SECRET (or stripe in [secrets]) to have r and R re-sign, or a handler that checks signatures \
             refuses every attempt"
        );
        assert_eq!(advice_for_keys("slow answers", Provider::Stripe), "slow answers");
    }

    #[test]
    fn a_copy_written_to_a_file_names_the_setting_for_the_clipboard() {
        let path = Path::new("/tmp/portpreview-3.sh");
        let line = copied_to_file(3, path, None);
        assert_eq!(
            line,
            "no clipboard here: curl command of #3 written to /tmp/portpreview-3.sh \
             (secrets as received, readable by you only); set PORTPREVIEW_CLIPBOARD=osc52 \
             if your terminal takes OSC 52"
        );
        assert!(!line.contains('\n'), "one line");
        assert!(
            !copied_to_file(3, path, Some("file")).contains("PORTPREVIEW_CLIPBOARD"),
            "not to whoever asked for the file"
        );
        assert!(
            copied_to_file(3, path, Some("OSC52")).starts_with(
                "PORTPREVIEW_CLIPBOARD=OSC52 means nothing (set osc52 or file): curl command of #3 written to"
            ),
            "a misspelt setting is named first, where a narrow screen does not cut it off"
        );
    }

    #[test]
    fn a_runs_warnings_are_pointed_to_from_the_status_line() {
        let slow = "slow answers".to_string();
        assert_eq!(
            warnings_note(&[slow.clone(), crate::replay::NOT_PROBED.into()], false),
            " · ⚠ 1 warning: shown under the run in the delivery (Enter)"
        );
        assert_eq!(warnings_note(&[crate::replay::ONE_ATTEMPT.into()], false), "");
        assert_eq!(
            warnings_note(&[slow.clone(), slow.clone()], false),
            " · ⚠ 2 warnings: shown under the run in the delivery (Enter)"
        );
        assert_eq!(
            warnings_note(&[slow], true),
            " · ⚠ 2 warnings: shown under the run in the delivery (Enter)",
            "answers that differ are shown as one"
        );
    }
}
