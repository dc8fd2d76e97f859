//! `portpreview replay <ID|EVENT_KEY>`: send a recorded delivery again and
//! say whether the handler stayed idempotent.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use portpreview_shared::sanitize::escape_str;

use crate::render;
use crate::replay::{
    self,
    options::{parse_dropped_header, parse_header_arg},
    Report,
};
use crate::store::{ListQuery, NewDelivery, Pick, Store};

use super::guard::refuse_to_overwrite_a_database;
use super::replay_run::{clear_progress, progress_printer, refuse_to_overwrite_an_input, RunArgs};

/// Arguments of `portpreview replay`.
#[derive(Debug, clap::Args)]
#[command(mut_arg("times", |arg| arg.help("Attempts to send (1 to 100000; default 1: a verdict on duplicates needs 2 or more)")))]
// The delivery can be named three ways; clap's own usage names only the first.
#[command(
    override_usage = "portpreview replay <ID|EVENT_KEY> [OPTIONS]\n       portpreview replay --latest [OPTIONS]\n       portpreview replay --from <FIXTURE> [OPTIONS]"
)]
pub struct Args {
    /// Delivery to replay: its ID (12 or #12) or its event key (evt_…).
    // --provider and --path without --latest are refused in `run`, in
    // words clap has not: its own list reads as if both were wanted.
    #[arg(value_name = "ID|EVENT_KEY", required_unless_present_any = ["from", "latest", "provider", "path"], conflicts_with_all = ["from", "latest"], value_parser = parse_wanted)]
    pub delivery: Option<String>,
    /// Replay a fixture written by `portpreview export --format json` instead.
    #[arg(long, value_name = "FIXTURE", conflicts_with = "latest")]
    pub from: Option<PathBuf>,
    /// Replay the newest delivery (narrowed by --provider, --type and --path).
    #[arg(long)]
    pub latest: bool,
    /// With --latest: only deliveries from this provider (stripe, github, …; svix for standard-webhooks; unknown for none recognised); repeated or a comma list for any of them.
    #[arg(long, value_name = "P", value_delimiter = ',', value_parser = super::history::parse_provider)]
    pub provider: Vec<String>,
    /// With --latest: only deliveries of this event type, or types this glob names (invoice.paid, 'invoice.*'; as history's TYPE column shows it).
    #[arg(long = "type", value_name = "GLOB", value_parser = super::history::parse_type)]
    pub event_type: Option<String>,
    /// With --latest: only deliveries whose path, with its query as history lists it or without, matches this glob (`*` any text, `?` any one character; a path copied from history may keep its masked secrets and its `…`).
    #[arg(long, value_name = "GLOB", value_parser = super::history::parse_path_glob)]
    pub path: Option<String>,
    /// How to replay and judge.
    #[command(flatten)]
    pub run: RunArgs,
    /// Set a header on every attempt, in the recorded one's place ('Name: value', repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE", value_parser = parse_header_arg)]
    pub headers: Vec<(String, String)>,
    /// Leave a recorded header out (repeatable).
    #[arg(long = "drop-header", value_name = "NAME", value_parser = parse_dropped_header)]
    pub drop_headers: Vec<String>,
    /// Send this file's bytes as the body.
    #[arg(long, value_name = "FILE")]
    pub body_file: Option<PathBuf>,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Also write the verdict as a JUnit XML file.
    #[arg(long, value_name = "FILE", value_parser = crate::replay::options::parse_report_path)]
    pub junit: Option<PathBuf>,
}

/// The delivery asked for, refused when blank: an unset variable
/// (`replay "$EVENT"`) would otherwise name every delivery without a key.
fn parse_wanted(text: &str) -> Result<String, String> {
    match text.trim().is_empty() {
        true => Err("is empty: give a delivery's ID (12) or its event key (evt_…), or --latest".to_owned()),
        false => Ok(text.to_owned()),
    }
}

/// Flags that do not go together in ways clap cannot say.
fn usage_mistake(args: &Args) -> Option<String> {
    if !args.latest && (!args.provider.is_empty() || args.event_type.is_some() || args.path.is_some()) {
        return Some(
            match args.delivery.is_some() || args.from.is_some() {
                true => {
                    "--provider, --type and --path narrow --latest: with an ID, an event key or --from they would be \
                     ignored"
                }
                false => {
                    "--provider, --type and --path narrow --latest: add --latest to replay the newest delivery they \
                     match"
                }
            }
            .to_owned(),
        );
    }
    (args.run.fresh && args.run.times.unwrap_or(1) < 2).then(|| replay::ReplayError::FreshBurstOfOne.to_string())
}

/// Replays, prints the report, records the attempts. Exit 0 idempotent, 1 not
/// idempotent or inconclusive, 2 could not run.
pub async fn run(args: Args, db: &Path) -> anyhow::Result<ExitCode> {
    // Usage mistakes like clap's own, told as it tells them, so they
    // write no JUnit file either.
    if let Some(mistake) = usage_mistake(&args) {
        anyhow::bail!("{mistake}; see portpreview replay --help");
    }
    if let Some(junit) = &args.junit {
        // The history is read, and written with the attempts, too.
        refuse_to_overwrite_a_database(junit, Some(db), "the JUnit report")?;
        refuse_to_overwrite_an_input(junit, args.from.as_deref().into_iter().chain(args.body_file.as_deref()))?;
    }
    let mut case = asked_for(&args);
    let Ran {
        mut report,
        origin,
        started_at_ms,
    } = match start(&args, db, &mut case).await {
        Ok(ran) => ran,
        Err(err) => {
            if let Some(path) = &args.junit {
                write_error_case(path, &case, &err).await;
            }
            if args.json {
                print_could_not_run(&err);
            }
            return Err(err);
        }
    };
    if let Origin::History { id, store, .. } = &origin {
        // The attempts were sent and are judged below: a history that cannot
        // keep them is worth a line, not a failed command.
        match replay::record(store, *id, started_at_ms, &report) {
            Ok(ids) => report.recorded_as = ids,
            Err(err) => {
                let warning = format!(
                    "the replay was not recorded in the history: {}",
                    crate::error_line(&err.into())
                );
                crate::to_stderr(format_args!("warning: {warning}\n"));
                // In the report too: a script reading --json must not take the
                // run, and its attempts, for kept.
                report.warnings.push(warning);
            }
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
        let name = case_name(&origin, &report.event_key);
        super::replay_run::write_junit(path, &report.to_junit(&name)).await?;
    }
    Ok(ExitCode::from(report.exit_code()))
}

/// A run that came to a report, and where its request came from.
struct Ran {
    report: Report,
    origin: Origin,
    started_at_ms: i64,
}

/// Finds the request and replays it. `case` becomes the JUnit test case's
/// name once the delivery is known, so a run that cannot start is reported
/// under the name its verdict would have had.
async fn start(args: &Args, db: &Path, case: &mut String) -> anyhow::Result<Ran> {
    let (request, origin) = load_request(args, db)?;
    *case = case_name(&origin, &request.event_key);
    let mut opts = args.run.options();
    opts.add_headers = args.headers.clone();
    opts.drop_headers = args.drop_headers.clone();
    if let Some(file) = &args.body_file {
        let body = crate::input_file::read_stream(file, crate::input_file::MAX_REQUEST_FILE);
        opts.body = Some(body.with_context(|| format!("cannot read --body-file {}", file.display()))?);
    }
    opts.had_before = match &origin {
        Origin::History { answered: true, .. } if opts.target.is_none() => Some(replay::HadBefore::WhenRecorded),
        // Another body may be another event; a fresh one is new.
        Origin::History { store, .. } if opts.body.is_none() && !opts.fresh => {
            replay::had_before(store, &request, opts.target.as_deref())
        }
        _ => None,
    };
    for warning in args.run.unused(opts.probe.is_some(), opts.times) {
        crate::to_stderr(format_args!("{warning}"));
    }
    if opts.resign || opts.fresh {
        opts.secret = crate::config::resolve_secret(opts.secret.take(), replay::provider_of(&request), None)?;
    } else {
        if opts.secret.is_some() {
            crate::to_stderr(format_args!("{}", super::replay_run::SECRET_UNUSED));
        }
        // Signs nothing: known only so that advice to pass --resign names
        // the secret it would sign with.
        opts.secret = crate::config::resolve_secret(opts.secret.take(), replay::provider_of(&request), None)
            .ok()
            .flatten();
    }
    // Said before anything is sent: the user asked for a header the
    // attempts will not carry.
    let edits_not_sent = replay::edits_not_sent(&request, &opts);
    for line in &edits_not_sent {
        crate::to_stderr(format_args!("warning: {}\n", escape_str(line)));
    }
    let started_at_ms = crate::time::now_ms();
    let result = replay::run_until(
        request,
        &opts,
        &progress_printer(),
        portpreview_server::signal::shutdown_signal(),
    )
    .await;
    clear_progress();
    let mut report = result?;
    // The text report was preceded by these lines; a JSON reader sees only
    // the report, so they are its first warnings.
    if args.json {
        report.warnings.splice(0..0, edits_not_sent);
    }
    Ok(Ran {
        report,
        origin,
        started_at_ms,
    })
}

/// Writes a JUnit file with the run as an error case, as `check` does for a
/// fixture that cannot run: a CI job uploading it then shows why. The run's
/// own error is what the command reports, so a failed write is one more line.
async fn write_error_case(path: &Path, case: &str, err: &anyhow::Error) {
    let xml = replay::junit::replay_error(case, &crate::error_line(err));
    if let Err(write) = super::replay_run::write_junit(path, &xml).await {
        crate::to_stderr(format_args!("error: {}\n", crate::error_line(&write)));
    }
}

/// `--json`: a run that cannot start is still one object on stdout, as
/// `check --json` shows such a fixture, so a script reading the output
/// gets JSON it can branch on. The reason goes to stderr as well, as the
/// command's error; a stdout that cannot take this line changes nothing.
fn print_could_not_run(err: &anyhow::Error) {
    let value = serde_json::json!({
        "verdict": "could_not_run",
        "idempotent": false,
        "error": crate::error_line(err),
    });
    let _unwritable = writeln!(std::io::stdout().lock(), "{}", render::json::to_terminal_text(&value));
}

/// The JUnit test case's name: the delivery's ID and event key, or the fixture.
fn case_name(origin: &Origin, event_key: &str) -> String {
    match origin {
        Origin::History { id, .. } => format!("#{id} {event_key}"),
        Origin::Fixture(path) => path.display().to_string(),
    }
}

/// The test case's name before the delivery is found: what was asked for.
fn asked_for(args: &Args) -> String {
    if let Some(path) = &args.from {
        return path.display().to_string();
    }
    if args.latest {
        return latest_words(args);
    }
    let wanted = args.delivery.as_deref().unwrap_or_default();
    match wanted.trim_start_matches('#').parse::<i64>() {
        Ok(id) => format!("#{id}"),
        Err(_) => wanted.to_string(),
    }
}

/// `--latest --provider stripe --path /hooks/*`, as given.
fn latest_words(args: &Args) -> String {
    let providers = args.provider.join(",");
    let narrowed = super::history::filter_words(&[
        ("--provider", Some(providers.as_str()).filter(|named| !named.is_empty())),
        ("--type", args.event_type.as_deref()),
        ("--path", args.path.as_deref()),
    ]);
    format!("--latest {narrowed}").trim_end().to_string()
}

/// The delivery `wanted` names: `#12` is an ID; a bare number is one when
/// such a delivery exists, else an event key, as a Discord event's
/// snowflake is a number; anything else is an event key, whose newest
/// delivery is taken.
fn chosen(store: &Store, wanted: &str, db: &Path) -> anyhow::Result<i64> {
    let id = super::show::parse_id(wanted).ok();
    if let Some(id) = id {
        if wanted.trim_start().starts_with('#') {
            return Ok(id);
        }
        if store.get(id).map_err(|err| err.for_command(db))?.is_some() {
            // A key copied from the EVENT column may be a number, as a
            // Discord snowflake is: say which one was taken.
            let key = wanted.trim();
            if store
                .newest_with_event_key(key)
                .map_err(|err| err.for_command(db))?
                .is_some()
            {
                crate::to_stderr(format_args!(
                    "note: replaying delivery #{id}; {key} is also an event key: `portpreview history --event {key}` \
                     lists its deliveries, to replay by ID\n"
                ));
            }
            return Ok(id);
        }
    }
    let wanted = whole_key(store, wanted.trim(), db)?;
    let wanted = wanted.as_str();
    let Some(pick) = store.newest_with_event_key(wanted).map_err(|err| err.for_command(db))? else {
        store.deliveries_whole().map_err(|err| err.for_command(db))?;
        return Err(match id {
            Some(id) => anyhow::anyhow!(
                "no delivery #{id}, nor one with event key \"{wanted}\", in {}",
                db.display()
            ),
            None => anyhow::anyhow!("no delivery with event key \"{wanted}\" in {}", db.display()),
        });
    };
    // Several deliveries may share a key (retries, two hooks).
    crate::to_stderr(format_args!(
        "replaying #{}, the newest delivery of event {}{}\n",
        pick.id,
        escape_str(wanted),
        passed_over(&pick)
    ));
    let events = store.events_with_key(wanted).map_err(|err| err.for_command(db))?;
    if events > 1 {
        crate::to_stderr(format_args!(
            "note: {events} events share this key (two providers, two hooks, or two paths): \
             `portpreview history --event {}` lists them; replay another by its ID\n",
            escape_str(wanted)
        ));
    }
    Ok(pick.id)
}

/// What a [`Pick`] passed over, for the line that says what is replayed.
fn passed_over(pick: &Pick) -> String {
    match pick.newer_cut {
        Some(newer) => format!(" whose body was recorded whole (#{newer}'s was not)"),
        None => String::new(),
    }
}

/// The event key `wanted` stands for: itself, or, when it is a key as the
/// history table shows it, cut and ending in `…`, the one key that begins
/// so. Several keys beginning so is an error that names them.
fn whole_key(store: &Store, wanted: &str, db: &Path) -> anyhow::Result<String> {
    /// Keys named when a cut one is not enough to tell them apart.
    const NAMED: usize = 5;
    let start = match wanted.strip_suffix('…') {
        Some(start) if !start.is_empty() => start,
        _ => return Ok(wanted.to_owned()),
    };
    if store
        .newest_with_event_key(wanted)
        .map_err(|err| err.for_command(db))?
        .is_some()
    {
        return Ok(wanted.to_owned());
    }
    let keys = store
        .event_keys_starting_with(start, NAMED + 1)
        .map_err(|err| err.for_command(db))?;
    match keys.as_slice() {
        [] => Ok(wanted.to_owned()),
        [key] => Ok(key.clone()),
        several => {
            // Shell words, as the senders chose these keys.
            let mut named: Vec<String> = (several.iter().take(NAMED))
                .map(|key| render::curl::quote(key.as_bytes()))
                .collect();
            if several.len() > NAMED {
                named.push("more".into());
            }
            anyhow::bail!(
                "several event keys begin with {} ({}): give one whole, or a delivery's ID from `portpreview history --event {}`",
                render::curl::quote(start.as_bytes()),
                named.join(", "),
                render::curl::quote(wanted.as_bytes())
            )
        }
    }
}

/// Where the replayed request came from.
enum Origin {
    // Boxed: a connection is large, a fixture's path is not.
    History {
        id: i64,
        store: Box<Store>,
        /// The handler answered the delivery 2xx when it came.
        answered: bool,
    },
    Fixture(PathBuf),
}

fn load_request(args: &Args, db: &Path) -> anyhow::Result<(NewDelivery, Origin)> {
    if let Some(path) = &args.from {
        let fixture = crate::fixture::Fixture::load(path)?;
        return Ok((fixture.to_new_delivery(), Origin::Fixture(path.clone())));
    }
    let store = super::open_history(db)?;
    let id = if args.latest {
        let wanted = latest_words(args);
        let query = ListQuery {
            providers: args.provider.clone(),
            event_type: args.event_type.clone(),
            path: args.path.clone(),
            ..ListQuery::default()
        };
        let pick = store
            .latest(&query)
            .map_err(|err| err.for_command(db))?
            .with_context(|| format!("no delivery in {} matches {wanted}", db.display()))?;
        crate::to_stderr(format_args!(
            "replaying #{}, the newest match of {}{}\n",
            pick.id,
            escape_str(&wanted),
            passed_over(&pick)
        ));
        pick.id
    } else {
        chosen(&store, args.delivery.as_deref().unwrap_or_default(), db)?
    };
    let delivery = super::show::fetch(&store, id, db)?;
    Ok((
        delivery.request,
        Origin::History {
            id,
            store: Box::new(store),
            answered: delivery.outcome.is_some_and(|o| o.succeeded()),
        },
    ))
}

/// Prints a report as text or pretty JSON (after `extend` adds fields).
pub fn print_report(report: &Report, json: bool, extend: impl FnOnce(&mut serde_json::Value)) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    let written = if json {
        let mut value = report.to_shown_json();
        extend(&mut value);
        writeln!(stdout, "{}", render::json::to_terminal_text(&value))
    } else {
        write!(stdout, "{}", report.render_text())
    };
    written.context("cannot write the report to stdout")
}
