//! `portpreview resend`: send again, once each and in the order they first
//! came, the events a handler did not answer 2xx. After a fix, the events it
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
use crate::store::{EventState, ListQuery, StatusWord, Store};

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
    after_help = "Each event is sent once, as its newest delivery, in the order the events first came. An event the \
                  handler answered 2xx after it failed (a provider's retry, or an earlier resend) is passed over. \
                  Each resend is kept in the history as a replay of its delivery (history --replays)."
)]
pub struct Args {
    /// Only deliveries answered so: a status (404), a class (5xx), or error for no answer; repeated or a comma list for any of them (default: every answer but 2xx).
    #[arg(long, value_name = "S", value_delimiter = ',', value_parser = parse_failed_status)]
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
    #[arg(long, value_name = "KEY", value_parser = super::history::parse_event_key)]
    pub event: Option<String>,
    /// Send the first N events that match, and leave the rest for the next run (0: all). Without it, more than 100 events are refused before anything is sent.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_limit)]
    pub limit: Option<usize>,
    /// Send to this URL instead of each delivery's recorded target (`http://host:port` keeps the recorded path).
    #[arg(long, value_name = "URL", value_parser = super::replay_run::target_flag())]
    pub target: Option<String>,
    /// How long each delivery may wait for its answer before it counts as failed (default 30s).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::time::parse_wait)]
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

/// A `--status` value: a status that is no 2xx. An event answered 2xx was
/// handled, and is what resend passes over; the run would send nothing
/// and say only that.
fn parse_failed_status(text: &str) -> Result<StatusWord, String> {
    match parse_status(text)? {
        StatusWord::Class(2) | StatusWord::Exact(200..=299) => Err(
            "resend sends events the handler did not answer 2xx; to send one it did, use portpreview replay ID".into(),
        ),
        word => Ok(word),
    }
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
        let answered: Vec<String> = self
            .status
            .iter()
            .filter(|word| **word != StatusWord::Failed)
            .map(StatusWord::to_string)
            .collect();
        let unanswered = self.status.contains(&StatusWord::Failed);
        let mut words = vec![match (answered.is_empty(), unanswered) {
            (true, false) => "not answered 2xx".to_owned(),
            (true, true) => "not answered".to_owned(),
            (false, false) => format!("answered {}", or_list(answered.into_iter())),
            (false, true) => format!("answered {}, or not answered", or_list(answered.into_iter())),
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
/// was not, 2 when the run could not start or had to stop (the target went
/// away, the history would not keep a resend), 130 when the user stopped
/// it.
pub async fn run(args: Args, db: &Path, db_named: bool) -> anyhow::Result<ExitCode> {
    let store = super::open_history(db)?;
    let mut picked = pick::pick(&store, &args.query()).map_err(|err| err.for_command(db))?;
    let matching = args.matching();
    let found = picked.events.len();
    if let Some(first) = args.limit.filter(|n| *n > 0) {
        picked.events.truncate(first);
    } else if args.limit.is_none() && found > DEFAULT_LIMIT && !args.dry_run {
        // Said before anything is sent: a mistaken filter must not flood a handler.
        anyhow::bail!(
            "{} in {} match ({matching}), more than the {DEFAULT_LIMIT} resend sends unless told: narrow them \
             (--since, --provider, --type, --path), or pass --limit N to send the first N, --limit 0 to send \
             them all; --dry-run lists them",
            counted(found, "event", "events"),
            db.display(),
        );
    }
    let left = found - picked.events.len();
    let secrets = secrets(&args, &picked.events)?;
    let stale = preflight(&args, &store, &picked.events, &secrets, db)?;
    for warning in &stale {
        crate::to_stderr(format_args!("warning: {warning}\n"));
    }
    if picked.events.is_empty() || args.dry_run {
        return listed(&args, &picked, &matching, left, db);
    }
    if !args.json {
        crate::to_stdout(format_args!(
            "Resending {} ({matching}), in the order they came{}:\n",
            counted(picked.events.len(), "event", "events"),
            match left {
                0 => String::new(),
                n => format!("; {n} more match, for the next run"),
            }
        ));
    }
    let events = std::mem::take(&mut picked.events);
    let (sent, stopped) = send_in_turn(&args, &store, &events, &secrets, &mut picked, db).await?;
    // The event abandoned in flight may have been sent: it is told apart.
    let abandoned = usize::from(matches!(stopped, Some(Stop::Abandoned(_))));
    let unsent = events.len() - sent.len() - picked.skipped_while_sending - abandoned;
    let command = super::portpreview_command(db, db_named);
    match args.json {
        true => shown::print_json(&sent, &picked, unsent, stopped.as_ref().map(Stop::reason).as_deref())?,
        false if sent.is_empty() => crate::to_stdout(format_args!("{}", shown::passed_over(&picked))),
        false => crate::to_stdout(format_args!(
            "{}{}",
            shown::tally(&sent, unsent, &command),
            shown::passed_over(&picked)
        )),
    }
    if let Some(stop) = &stopped {
        if let Some(line) = stop.error_line(unsent) {
            crate::to_stderr(format_args!("error: {line}\n"));
        }
    }
    Ok(match stopped {
        Some(Stop::Interrupted | Stop::Abandoned(_)) => ExitCode::from(130),
        Some(Stop::TargetDown(_) | Stop::NotKept(_)) => ExitCode::from(2),
        None if sent.iter().all(Sent::answered_2xx) => ExitCode::SUCCESS,
        None => ExitCode::from(1),
    })
}

/// Sends `events` one at a time, each once its turn finds it still
/// unanswered, and prints each line as it comes; stops early for the
/// reasons [`Stop`] names.
async fn send_in_turn(
    args: &Args,
    store: &Store,
    events: &[Event],
    secrets: &HashMap<Provider, SigningSecret>,
    picked: &mut Picked,
    db: &Path,
) -> anyhow::Result<(Vec<Sent>, Option<Stop>)> {
    let mut sent = Vec::with_capacity(events.len());
    let shutdown = portpreview_server::signal::shutdown_signal();
    tokio::pin!(shutdown);
    let mut stopped = None;
    for event in events {
        // A provider's retry may have got through while the run went on.
        match pick::state(store, &event.summary).map_err(|err| err.for_command(db))? {
            EventState::Unanswered => {}
            state => {
                if !args.json {
                    crate::to_stdout(format_args!("{}\n", shown::passed_over_line(event, state)));
                }
                picked.note_passed_over(state);
                continue;
            }
        }
        let sending = send(args, store, event, secrets, db);
        tokio::pin!(sending);
        let one = tokio::select! {
            one = &mut sending => one?,
            () = &mut shutdown => {
                stopped = Some(Stop::Interrupted);
                // The handler may have the event already: dropped now, its
                // answer would be kept nowhere, and the next run would
                // send it again.
                crate::to_stderr(format_args!(
                    "stopping once #{} is answered (ctrl-c again stops at once)\n",
                    event.summary.id
                ));
                tokio::select! {
                    one = &mut sending => one?,
                    () = portpreview_server::signal::shutdown_signal() => {
                        return Ok((sent, Some(Stop::Abandoned(event.summary.id))));
                    }
                }
            }
        };
        // The events left would fail alike, and the handler be blamed.
        if let Some(reason) = one.went_away() {
            return Ok((sent, Some(Stop::TargetDown(reason.to_owned()))));
        }
        if !args.json {
            crate::to_stdout(format_args!("{}\n", one.line()));
        }
        let unkept = one.unkept().map(|why| Stop::NotKept(why.to_owned()));
        sent.push(one);
        if unkept.is_some() {
            return Ok((sent, unkept));
        }
        if stopped.is_some() {
            break;
        }
    }
    Ok((sent, stopped))
}

/// Why the run ended before the last event.
enum Stop {
    /// The user pressed ctrl-c, and the event in flight was answered.
    Interrupted,
    /// The user pressed ctrl-c twice: the event in flight, this delivery's,
    /// may have reached the handler, and its answer is kept nowhere.
    Abandoned(i64),
    /// Nothing answers at the target any more.
    TargetDown(String),
    /// The history would not keep a resend: the next run would send the
    /// event again, and so would every one after it.
    NotKept(String),
}

impl Stop {
    fn reason(&self) -> String {
        match self {
            Stop::Interrupted => "stopped by the user".to_owned(),
            Stop::Abandoned(id) => format!("stopped by the user while #{id} was being sent: its answer is unknown"),
            Stop::TargetDown(reason) | Stop::NotKept(reason) => reason.clone(),
        }
    }

    /// The line for stderr, when the stop is an error or leaves one unknown.
    fn error_line(&self, unsent: usize) -> Option<String> {
        let left = counted(unsent, "event was", "events were");
        match self {
            Stop::Interrupted => None,
            Stop::Abandoned(id) => Some(format!(
                "stopped while #{id} was being sent: the handler may have had it, and its answer is kept nowhere, \
                 so the next resend sends it again; {left} not sent"
            )),
            Stop::TargetDown(reason) => Some(format!("{reason}; {left} not sent")),
            Stop::NotKept(reason) => Some(format!(
                "the history did not keep the last resend ({reason}), so the next resend would send it again: \
                 stopped; {left} not sent"
            )),
        }
    }
}

/// `--dry-run`, or nothing to send: the events and nothing else.
fn listed(args: &Args, picked: &Picked, matching: &str, left: usize, db: &Path) -> anyhow::Result<ExitCode> {
    match args.json {
        true if args.dry_run => shown::print_dry_run_json(picked)?,
        // A run with nothing to send is a run all the same: a script reads
        // the same fields whether the handler failed anything or not.
        true => shown::print_json(&[], picked, 0, None)?,
        false => {}
    }
    if args.json {
        return Ok(ExitCode::SUCCESS);
    }
    let mut text = match picked.events.is_empty() {
        true => format!(
            "Nothing to resend in {} ({matching}).\n",
            escape_str(&db.display().to_string())
        ),
        false => format!(
            "Would resend {} ({matching}), in the order they came{}:\n",
            counted(picked.events.len(), "event", "events"),
            match (left, args.limit) {
                (0, _) => String::new(),
                (n, Some(_)) => format!("; {n} more match, for a later run"),
                // The run itself would refuse, and say why.
                (_, None) => String::new(),
            }
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
    let kept = replay::record(store, event.summary.id, started_at_ms, &report)
        .map(|ids| ids.first().copied())
        .map_err(|err| crate::error_line(&err.into()));
    Sent::answered(event.clone(), &report, kept).context("a replay of one attempt sent none")
}
