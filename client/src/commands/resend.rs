//! `portpreview resend`: send again, once each and oldest first, the
//! deliveries a handler did not answer 2xx. After a fix, the events it
//! failed are handled now, not at the provider's next retry, hours away.

mod pick;
mod shown;

use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::Context;

use portpreview_shared::provider::{Provider, SignError};
use portpreview_shared::sanitize::escape_str;
use portpreview_shared::text::counted;

use super::history::{parse_path_glob, parse_provider, parse_since, parse_status, parse_type, Since};
use crate::config::SigningSecret;
use crate::replay::plan::Plan;
use crate::replay::{self, ReplayError, ReplayOptions};
use crate::store::{ListQuery, StatusWord, Store};

use pick::{Event, Picked};
use shown::Sent;

/// Events sent at most when `--limit` is not given.
pub const DEFAULT_LIMIT: usize = 100;

/// The answers a provider counts as a failed delivery, and retries: all
/// but 2xx, and no answer at all.
const NOT_2XX: [StatusWord; 5] = [
    StatusWord::Class(1),
    StatusWord::Class(3),
    StatusWord::Class(4),
    StatusWord::Class(5),
    StatusWord::Failed,
];

/// Arguments of `portpreview resend`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Each event is sent once, as its newest delivery, in the order the deliveries came. An event the \
                  handler answered 2xx after it failed (a provider's retry, or an earlier resend) is passed over. \
                  Each resend is kept in the history as a replay of its delivery (history --replays)."
)]
pub struct Args {
    /// Only deliveries answered so: a status (404), a class (5xx), or error for no answer; repeated or a comma list for any of them (default: every answer but 2xx).
    #[arg(long, value_name = "S", value_delimiter = ',', value_parser = parse_status)]
    pub status: Vec<StatusWord>,
    /// Only deliveries received within this span (30m, 2h, 7d), or since this time (2026-01-01T09:30:00Z, or a date), as for history.
    #[arg(long, value_name = "DURATION|TIME", allow_hyphen_values = true, value_parser = parse_since)]
    pub since: Option<Since>,
    /// Only deliveries from this provider (svix for standard-webhooks, unknown for none recognised); repeated or a comma list for any of them.
    #[arg(long, value_name = "P", value_delimiter = ',', value_parser = parse_provider)]
    pub provider: Vec<String>,
    /// Only deliveries of this event type, or types this glob names (invoice.paid, 'invoice.*'), as for history.
    #[arg(long = "type", value_name = "GLOB", value_parser = parse_type)]
    pub event_type: Option<String>,
    /// Only deliveries whose path matches this glob (`*` any text, `?` any one character), as for history.
    #[arg(long, value_name = "GLOB", value_parser = parse_path_glob)]
    pub path: Option<String>,
    /// Only deliveries of this event key.
    #[arg(long, value_name = "KEY")]
    pub event: Option<String>,
    /// Most events to send (default 100): when more match, nothing is sent. 0 sends them all.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_limit)]
    pub limit: Option<usize>,
    /// Send to this URL instead of each delivery's recorded target (`http://host:port` keeps the recorded path).
    #[arg(long, value_name = "URL", value_parser = super::replay_run::target_flag())]
    pub target: Option<String>,
    /// How long each delivery may wait for its answer before it counts as failed (default 30s).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::replay::options::parse_positive_duration)]
    pub timeout: Option<std::time::Duration>,
    /// Re-sign each delivery with the current time: a provider's signature is refused minutes after it was made.
    #[arg(long)]
    pub resign: bool,
    /// Signing secret for --resign (else `PORTPREVIEW_SECRET_<PROVIDER>`, `PORTPREVIEW_SECRET` or the config file).
    #[arg(long, value_name = "S", requires = "resign", value_parser = crate::cli::parse_signing_secret, allow_hyphen_values = true)]
    pub secret: Option<SigningSecret>,
    /// List what would be sent, and send nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print one JSON object instead of lines.
    #[arg(long)]
    pub json: bool,
}

impl Args {
    /// The listing the deliveries are picked from.
    fn query(&self) -> ListQuery {
        let status = match self.status.is_empty() {
            true => NOT_2XX.to_vec(),
            false => self.status.clone(),
        };
        ListQuery {
            providers: self.provider.clone(),
            event_key: self.event.clone(),
            event_type: self.event_type.clone(),
            status,
            path: self.path.clone(),
            received_since_ms: self.since.map(|since| since.start_ms(crate::time::now_ms())),
            ..ListQuery::default()
        }
    }

    /// The filters as given, for the lines that name them: "answered 5xx
    /// or error, from stripe, received in the last 2h".
    fn matching(&self) -> String {
        let mut words = vec![match self.status.is_empty() {
            true => "not answered 2xx".to_owned(),
            false => format!("answered {}", or_list(self.status.iter().map(StatusWord::to_string))),
        }];
        if !self.provider.is_empty() {
            words.push(format!("from {}", or_list(self.provider.iter().cloned())));
        }
        if let Some(kind) = &self.event_type {
            words.push(format!("of type {kind}"));
        }
        if let Some(path) = &self.path {
            words.push(format!("to {path}"));
        }
        if let Some(key) = &self.event {
            words.push(format!("of event {key}"));
        }
        match self.since {
            Some(since @ Since::Ago(_)) => words.push(format!("received in the last {since}")),
            Some(since @ Since::At(_)) => words.push(format!("received since {since}")),
            None => {}
        }
        escape_str(&words.join(", ")).into_owned()
    }
}

/// "5xx or error".
fn or_list(words: impl Iterator<Item = String>) -> String {
    words.collect::<Vec<_>>().join(" or ")
}

/// `--limit`: a count of events, which Rust's own refusal does not say.
fn parse_limit(text: &str) -> Result<usize, String> {
    text.trim()
        .parse()
        .map_err(|_| "expected a whole number of events, or 0 for all".to_string())
}

/// Sends what the filters pick and says how each was answered. Exit 0 when
/// every one was answered 2xx (or there was nothing to send), 1 when one
/// was not, 2 when the run could not start or the target went away, 130
/// when the user stopped it.
pub async fn run(args: Args, db: &Path, db_named: bool) -> anyhow::Result<ExitCode> {
    let store = super::open_history(db)?;
    let picked = pick::pick(&store, &args.query()).map_err(|err| err.for_command(db))?;
    let matching = args.matching();
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
    if limit > 0 && picked.events.len() > limit {
        let most = match args.limit {
            Some(_) => format!("--limit {limit}"),
            // Said, so that a mistaken filter is seen before it floods a handler.
            None => format!("the {limit} resend sends unless --limit says"),
        };
        anyhow::bail!(
            "{} in {} match ({matching}), more than {most}: narrow them (--since, --provider, --type, --path), \
             or pass --limit 0 to send them all; --dry-run lists them",
            counted(picked.events.len(), "event", "events"),
            db.display(),
        );
    }
    let secrets = secrets(&args, &picked.events)?;
    let stale = preflight(&args, &store, &picked.events, &secrets, db)?;
    for warning in &stale {
        crate::to_stderr(format_args!("warning: {warning}\n"));
    }
    if picked.events.is_empty() || args.dry_run {
        return listed(&args, &picked, &matching, db);
    }
    if !args.json {
        crate::to_stdout(format_args!(
            "Resending {} ({matching}), oldest first:\n",
            counted(picked.events.len(), "event", "events"),
        ));
    }
    let mut sent = Vec::with_capacity(picked.events.len());
    let shutdown = portpreview_server::signal::shutdown_signal();
    tokio::pin!(shutdown);
    let mut stopped = None;
    for event in &picked.events {
        let one = tokio::select! {
            one = send(&args, &store, event, &secrets, db) => one?,
            () = &mut shutdown => {
                stopped = Some(Stop::Interrupted);
                break;
            }
        };
        // The events left would fail alike, and the handler be blamed.
        if let Some(reason) = one.went_away() {
            stopped = Some(Stop::TargetDown(reason.to_owned()));
            break;
        }
        if !args.json {
            crate::to_stdout(format_args!("{}\n", one.line()));
        }
        sent.push(one);
    }
    let unsent = picked.events.len() - sent.len();
    let command = super::portpreview_command(db, db_named);
    match args.json {
        true => shown::print_json(&sent, &picked, unsent, stopped.as_ref().map(Stop::reason))?,
        false if sent.is_empty() => {}
        false => crate::to_stdout(format_args!(
            "{}{}",
            shown::tally(&sent, unsent, &command),
            shown::passed_over(&picked)
        )),
    }
    Ok(match stopped {
        Some(Stop::Interrupted) => ExitCode::from(130),
        Some(Stop::TargetDown(reason)) => {
            crate::to_stderr(format_args!(
                "error: {reason}; {} not sent\n",
                counted(unsent, "event was", "events were")
            ));
            ExitCode::from(2)
        }
        None if sent.iter().all(Sent::answered_2xx) => ExitCode::SUCCESS,
        None => ExitCode::from(1),
    })
}

/// Why the run ended before the last event.
enum Stop {
    /// The user pressed ctrl-c.
    Interrupted,
    /// Nothing answers at the target any more.
    TargetDown(String),
}

impl Stop {
    fn reason(&self) -> &str {
        match self {
            Stop::Interrupted => "stopped by the user",
            Stop::TargetDown(reason) => reason,
        }
    }
}

/// `--dry-run`, or nothing to send: the events and nothing else.
fn listed(args: &Args, picked: &Picked, matching: &str, db: &Path) -> anyhow::Result<ExitCode> {
    if args.json {
        shown::print_dry_run_json(picked)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut text = match picked.events.is_empty() {
        true => format!(
            "Nothing to resend in {} ({matching}).\n",
            escape_str(&db.display().to_string())
        ),
        false => format!(
            "Would resend {} ({matching}), oldest first:\n",
            counted(picked.events.len(), "event", "events"),
        ),
    };
    for event in &picked.events {
        text.push_str(&shown::planned_line(event));
        text.push('\n');
    }
    text.push_str(&shown::passed_over(picked));
    crate::to_stdout(format_args!("{text}"));
    Ok(ExitCode::SUCCESS)
}

/// Each provider's signing secret: with `--resign`, what signs (a missing
/// one is found as each event is checked); without, what advice to pass
/// `--resign` names.
fn secrets(args: &Args, events: &[Event]) -> anyhow::Result<HashMap<Provider, SigningSecret>> {
    let mut found = HashMap::new();
    for provider in events
        .iter()
        .filter_map(|e| e.summary.provider.as_deref().and_then(Provider::from_name))
    {
        if found.contains_key(&provider) {
            continue;
        }
        let secret = match args.resign {
            true => crate::config::resolve_secret(args.secret.clone(), Some(provider), None)?,
            false => crate::config::resolve_secret(None, Some(provider), None).ok().flatten(),
        };
        if let Some(secret) = secret {
            found.insert(provider, secret);
        }
    }
    Ok(found)
}

/// What the resend of `event` is asked to do: send it once, as recorded
/// or re-signed.
fn options(args: &Args, provider: Option<Provider>, secrets: &HashMap<Provider, SigningSecret>) -> ReplayOptions {
    let defaults = ReplayOptions::default();
    ReplayOptions {
        times: 1,
        target: args.target.clone(),
        timeout: args.timeout.unwrap_or(defaults.timeout),
        resign: args.resign,
        secret: provider.and_then(|p| secrets.get(&p).cloned()),
        ..defaults
    }
}

/// Checks every event as its resend will, before anything is sent: a
/// missing secret or an unusable `--target` stops the run whole, not after
/// half the events went out. An event that cannot be replayed as it came
/// (its body cut short) is told when its turn comes. Returns a warning for
/// each provider whose recorded signatures are too old for it to accept.
fn preflight(
    args: &Args,
    store: &Store,
    events: &[Event],
    secrets: &HashMap<Provider, SigningSecret>,
    db: &Path,
) -> anyhow::Result<Vec<String>> {
    let now = SystemTime::now();
    // By provider, in the order first seen: (events, the oldest's age).
    let mut stale: Vec<(Provider, usize, String)> = Vec::new();
    for event in events {
        let request = super::show::fetch(store, event.summary.id, db)?.request;
        let provider = replay::provider_of(&request);
        // What is wrong with one event alone is told when its turn comes.
        if let Err(
            err @ (ReplayError::NoSecret { .. } | ReplayError::Target(_) | ReplayError::Sign(SignError::BadSecret(_))),
        ) = Plan::new(&request, &options(args, provider, secrets))
        {
            anyhow::bail!("cannot resend #{}: {err}; nothing was sent", event.summary.id)
        }
        let Some(provider) = provider.filter(|_| !args.resign) else {
            continue;
        };
        if let Some(age) = replay::signature_too_old(provider, &request.request_headers, &request.request_body, now) {
            // Events come oldest first: the first found is the oldest.
            match stale.iter_mut().find(|(seen, ..)| *seen == provider) {
                Some((_, count, _)) => *count += 1,
                None => stale.push((provider, 1, age)),
            }
        }
    }
    Ok(stale
        .into_iter()
        .map(|(provider, count, oldest)| {
            format!(
                "{} too old to verify ({}{oldest}): {}, or a handler that checks signatures refuses them",
                counted(
                    count,
                    &format!("event carries a {provider} signature"),
                    &format!("events carry {provider} signatures")
                ),
                if count > 1 { "for the oldest, " } else { "" },
                replay::resign_advice(provider, secrets.get(&provider).map(|s| &s.from))
            )
        })
        .collect())
}

/// Sends one event, once, and keeps the attempt in the history as a replay
/// of its delivery.
async fn send(
    args: &Args,
    store: &Store,
    event: &Event,
    secrets: &HashMap<Provider, SigningSecret>,
    db: &Path,
) -> anyhow::Result<Sent> {
    let request = super::show::fetch(store, event.summary.id, db)?.request;
    let opts = options(args, replay::provider_of(&request), secrets);
    let started_at_ms = crate::time::now_ms();
    let report = match replay::run(request, &opts, &|_| {}).await {
        Ok(report) => report,
        Err(err) => return Ok(Sent::not_sent(event.clone(), &err)),
    };
    let kept_as = match replay::record(store, event.summary.id, started_at_ms, &report) {
        Ok(ids) => ids.first().copied(),
        Err(err) => {
            crate::to_stderr(format_args!(
                "warning: the resend of #{} was not kept in the history: {}\n",
                event.summary.id,
                crate::error_line(&err.into())
            ));
            None
        }
    };
    Sent::answered(event.clone(), &report, kept_as).context("a replay of one attempt sent none")
}
