//! `portpreview replay <ID|EVENT_KEY>`: send a recorded delivery again and
//! say whether the handler stayed idempotent.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use portpreview_shared::provider::Provider;

use crate::config::{Config, Secret};
use crate::replay::{
    self,
    options::{parse_header_arg, parse_positive_duration},
    Phase, ProbeSpec, Progress, ReplayOptions, Report, MAX_CONCURRENCY, MAX_TIMES,
};
use crate::store::{NewDelivery, Store};

/// The flags `replay` and `check` share: how to replay and how to judge.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Attempts to send (1 to 100000).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_TIMES)))]
    pub times: Option<u32>,
    /// Attempts kept in flight at once (1 to 512).
    #[arg(long, value_name = "C", value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_CONCURRENCY)))]
    pub concurrency: Option<u32>,
    /// Send to this URL instead of the recorded target (`http://host:port` keeps the recorded path).
    #[arg(long, value_name = "URL")]
    pub target: Option<String>,
    /// Shell command that prints the handler's state (a row count, a balance, a dump).
    #[arg(long, value_name = "CMD", conflicts_with = "check_url")]
    pub check_cmd: Option<String>,
    /// URL whose GET answer is the handler's state.
    #[arg(long, value_name = "URL")]
    pub check_url: Option<String>,
    /// How long the state must hold still to count as read (300ms, 1s).
    #[arg(long, value_name = "DURATION", value_parser = crate::time::parse_duration)]
    pub settle: Option<Duration>,
    /// How long each attempt may wait for its answer before it counts as failed (default 30s).
    #[arg(long, value_name = "DURATION", value_parser = parse_positive_duration)]
    pub timeout: Option<Duration>,
    /// Give the event new identities: one delivered once, another as a concurrent burst.
    #[arg(long)]
    pub fresh: bool,
    /// Where the identity lives when the provider is unknown (JSON pointer or header:Name).
    #[arg(long, value_name = "POINTER", requires = "fresh")]
    pub fresh_field: Option<String>,
    /// Re-sign every attempt with the current time.
    #[arg(long)]
    pub resign: bool,
    /// Signing secret (else PORTPREVIEW_SECRET_<PROVIDER> or the config file).
    #[arg(long, env = "PORTPREVIEW_SECRET", hide_env_values = true, value_name = "S")]
    pub secret: Option<String>,
}

impl RunArgs {
    /// Engine options from these flags; `None` fields fall back to the defaults.
    pub fn options(&self) -> ReplayOptions {
        let defaults = ReplayOptions::default();
        ReplayOptions {
            times: self.times.unwrap_or(defaults.times),
            concurrency: self.concurrency.unwrap_or(defaults.concurrency),
            target: self.target.clone(),
            probe: probe_spec(self.check_cmd.as_deref(), self.check_url.as_deref()),
            settle: self.settle.unwrap_or(defaults.settle),
            timeout: self.timeout.unwrap_or(defaults.timeout),
            fresh: self.fresh,
            fresh_field: self.fresh_field.clone(),
            resign: self.resign,
            secret: self.secret.clone().map(Secret::new),
            ..defaults
        }
    }
}

/// The probe a pair of `--check-cmd` / `--check-url` values asks for.
pub fn probe_spec(cmd: Option<&str>, url: Option<&str>) -> Option<ProbeSpec> {
    match (cmd, url) {
        (Some(cmd), _) => Some(ProbeSpec::Cmd(cmd.to_string())),
        (None, Some(url)) => Some(ProbeSpec::Url(url.to_string())),
        (None, None) => None,
    }
}

/// Arguments of `portpreview replay`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Delivery to replay: its ID (12 or #12) or its event key (evt_…).
    #[arg(value_name = "ID|EVENT_KEY", required_unless_present_any = ["from", "latest"], conflicts_with_all = ["from", "latest"])]
    pub delivery: Option<String>,
    /// Replay a fixture written by `portpreview export --format json` instead.
    #[arg(long, value_name = "FIXTURE", conflicts_with = "latest")]
    pub from: Option<PathBuf>,
    /// Replay the newest delivery (narrowed by --provider and --path).
    #[arg(long)]
    pub latest: bool,
    /// With --latest: only deliveries from this provider (svix for standard-webhooks).
    #[arg(long, requires = "latest", value_name = "P", value_parser = super::history::parse_provider)]
    pub provider: Option<String>,
    /// With --latest: only deliveries whose path matches this glob.
    #[arg(long, requires = "latest", value_name = "GLOB")]
    pub path: Option<String>,
    /// How to replay and judge.
    #[command(flatten)]
    pub run: RunArgs,
    /// Set a header on every attempt ('Name: value', repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE", value_parser = parse_header_arg)]
    pub headers: Vec<(String, String)>,
    /// Leave a recorded header out (repeatable).
    #[arg(long = "drop-header", value_name = "NAME")]
    pub drop_headers: Vec<String>,
    /// Send this file's bytes as the body.
    #[arg(long, value_name = "FILE")]
    pub body_file: Option<PathBuf>,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Also write the verdict as a JUnit XML file.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

/// Replays, prints the report, records the attempts. Exit 0 idempotent, 1 not
/// idempotent or inconclusive, 2 could not run.
pub async fn run(args: Args, db: &Path) -> anyhow::Result<ExitCode> {
    let (request, origin) = load_request(&args, db)?;
    let mut opts = args.run.options();
    opts.add_headers = args.headers.clone();
    opts.drop_headers = args.drop_headers.clone();
    if let Some(file) = &args.body_file {
        opts.body = Some(std::fs::read(file).with_context(|| format!("cannot read --body-file {}", file.display()))?);
    }
    if opts.resign || opts.fresh {
        opts.secret = resolve_secret(opts.secret.take(), replay::provider_of(&request), None)?;
    }
    let started_at_ms = crate::time::now_ms();
    let result = replay::run(request, &opts, &progress_printer()).await;
    clear_progress();
    let report = result?;
    let name = match &origin {
        Origin::History { id, .. } => format!("#{id} {}", report.event_key),
        Origin::Fixture(path) => path.display().to_string(),
    };
    if let Origin::History { id, store } = &origin {
        if let Err(err) = replay::record(store, *id, started_at_ms, &report) {
            tracing::warn!(%err, "the replay was not recorded in the history");
        }
    }
    let printed = print_report(&report, args.json, |json| {
        if let Origin::History { id, .. } = &origin {
            json["delivery_id"] = (*id).into();
        }
    });
    // A reader that stopped early (`| head`) does not change the verdict.
    if let Err(err) = printed {
        if !crate::is_broken_pipe(&err) {
            return Err(err);
        }
    }
    if let Some(path) = &args.junit {
        std::fs::write(path, report.to_junit(&name)).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(ExitCode::from(report.exit_code()))
}

/// Where the replayed request came from.
enum Origin {
    History { id: i64, store: Store },
    Fixture(PathBuf),
}

fn load_request(args: &Args, db: &Path) -> anyhow::Result<(NewDelivery, Origin)> {
    if let Some(path) = &args.from {
        let fixture = crate::fixture::Fixture::load(path)?;
        return Ok((fixture.to_new_delivery(), Origin::Fixture(path.clone())));
    }
    let store = Store::open_existing(db).map_err(|err| err.for_command(db))?;
    let id = if args.latest {
        store
            .latest(args.provider.as_deref(), args.path.as_deref())
            .map_err(|err| err.for_command(db))?
            .with_context(|| {
                let narrowed = super::history::filter_words(&[
                    ("--provider", args.provider.as_deref()),
                    ("--path", args.path.as_deref()),
                ]);
                let wanted = format!("--latest {narrowed}");
                format!("no delivery in {} matches {}", db.display(), wanted.trim_end())
            })?
    } else {
        let wanted = args.delivery.as_deref().unwrap_or_default();
        let numeric = wanted.trim_start_matches('#');
        match numeric.parse::<i64>() {
            Ok(id) => id,
            Err(_) => store
                .newest_with_event_key(wanted)
                .map_err(|err| err.for_command(db))?
                .with_context(|| format!("no delivery with event key {wanted:?} in {}", db.display()))?,
        }
    };
    let delivery = super::show::fetch(&store, id, db)?;
    Ok((delivery.request, Origin::History { id, store }))
}

/// The signing secret: `--secret`, else the suite's `secret_env`, else
/// `PORTPREVIEW_SECRET_<PROVIDER>`, else the config file.
pub fn resolve_secret(
    flag: Option<Secret>,
    provider: Option<Provider>,
    secret_env: Option<&str>,
) -> anyhow::Result<Option<Secret>> {
    if flag.is_some() {
        return Ok(flag);
    }
    if let Some(var) = secret_env {
        let value = std::env::var(var).with_context(|| format!("secret_env {var} is not set"))?;
        return Ok(Some(Secret::new(value)));
    }
    let Some(provider) = provider else {
        return Ok(None);
    };
    if let Ok(value) = std::env::var(replay::secret_env(provider)) {
        return Ok(Some(Secret::new(value)));
    }
    Ok(Config::load()?.secrets.get(provider.name()).cloned())
}

/// Prints a report as text or pretty JSON (after `extend` adds fields).
pub fn print_report(report: &Report, json: bool, extend: impl FnOnce(&mut serde_json::Value)) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    if json {
        let mut value = report.to_json();
        extend(&mut value);
        writeln!(stdout, "{}", serde_json::to_string_pretty(&value)?)?;
    } else {
        write!(stdout, "{}", report.render_text())?;
    }
    Ok(())
}

/// A progress line on stderr, only when stderr is a terminal.
pub fn progress_printer() -> impl Fn(Progress) + Sync {
    let enabled = std::io::stderr().is_terminal();
    move |p: Progress| {
        if !enabled {
            return;
        }
        let what = match p.phase {
            Phase::Sending => "sending",
            Phase::Settling => "waiting for the state to settle",
            Phase::FinalWait => "checking the state stays put",
        };
        crate::to_stderr(format_args!("\r\x1b[2K  {}/{} attempts · {what}…", p.done, p.total));
    }
}

/// Erases the progress line.
pub fn clear_progress() {
    if std::io::stderr().is_terminal() {
        crate::to_stderr(format_args!("\r\x1b[2K"));
    }
}
