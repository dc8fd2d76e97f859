//! `portpreview history`: list deliveries, newest first.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use portpreview_shared::provider::Provider;

use crate::render;
use crate::store::model::Summary;
use crate::store::{ListQuery, StatusWord, Store, StoreError, UNKNOWN_PROVIDER};

mod filters;

pub use filters::{parse_path_glob, parse_since, parse_status, parse_type, Since};

/// Rows shown when `--limit` is not given.
pub const DEFAULT_LIMIT: usize = 50;

/// Arguments of `portpreview history`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Most deliveries to list; 0 lists them all.
    #[arg(long, default_value_t = DEFAULT_LIMIT, value_name = "N", allow_negative_numbers = true, value_parser = parse_limit)]
    pub limit: usize,
    /// Only deliveries from this provider (stripe, github, …; svix for standard-webhooks; unknown for none recognised); repeated or a comma list for any of them.
    #[arg(long, value_name = "P", value_delimiter = ',', value_parser = parse_provider)]
    pub provider: Vec<String>,
    /// Only deliveries of this event key; one the table shows cut (ending in …) matches the keys it begins.
    #[arg(long, value_name = "KEY", value_parser = parse_event_key)]
    pub event: Option<String>,
    /// Only deliveries of this event type and the types under it (invoice.paid; invoice for invoice.paid, invoice.created, …), or types this glob names ('invoice.*'; `*` any text, `?` any one character, case as written); one the TYPE column shows cut (ending in …) matches the types it begins.
    #[arg(long = "type", value_name = "GLOB", value_parser = parse_type)]
    pub event_type: Option<String>,
    /// Only deliveries answered so: a status (404), a class (5xx), or error for no answer (refused, timed out); repeated or a comma list for any of them.
    #[arg(long, value_name = "S", value_delimiter = ',', value_parser = parse_status)]
    pub status: Vec<StatusWord>,
    /// Only deliveries whose path, with its query as the table lists it or without, matches this glob (`*` any text, `?` any one character; a path copied from the table may keep its masked secrets and its `…`).
    #[arg(long, value_name = "GLOB", value_parser = parse_path_glob)]
    pub path: Option<String>,
    /// Only deliveries received within this span (30m, 2h, 7d), or since this time: in UTC as --json writes received_at (2026-01-01T09:30:00Z), with its offset (2026-01-01T10:30:00+01:00), or a date (2026-01-01, from its midnight UTC).
    #[arg(long, value_name = "DURATION|TIME", allow_hyphen_values = true, value_parser = parse_since)]
    pub since: Option<Since>,
    /// Also list the deliveries sent by `replay`.
    #[arg(long)]
    pub replays: bool,
    /// Print a JSON array instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Show credentials in query strings (`?token=…`) instead of masking them.
    #[arg(long)]
    pub reveal: bool,
}

/// Prints the listing.
pub fn run(args: Args, db: &Path) -> anyhow::Result<ExitCode> {
    let store = super::open_history(db)?;
    let statuses = args
        .status
        .iter()
        .map(StatusWord::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let since = args.since.map(|since| since.to_string());
    let providers = args.provider.join(",");
    let filters = filter_words(&[
        ("--provider", Some(providers.as_str()).filter(|named| !named.is_empty())),
        ("--event", args.event.as_deref()),
        ("--type", args.event_type.as_deref()),
        ("--status", Some(statuses.as_str()).filter(|words| !words.is_empty())),
        ("--path", args.path.as_deref()),
        ("--since", since.as_deref()),
    ]);
    let query = ListQuery {
        limit: (args.limit > 0).then_some(args.limit),
        providers: args.provider,
        event_key: args.event,
        event_type: args.event_type,
        status: args.status,
        path: args.path,
        received_since_ms: args.since.map(|since| since.start_ms(crate::time::now_ms())),
        include_replays: args.replays,
        ..ListQuery::default()
    };
    let mut listing = Listing::new(&store, query.clone());
    if args.json {
        return print_json(listing, args.reveal, db);
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut shown = 0;
    for (summary, _, number) in listing.by_ref() {
        if shown == 0 {
            out.write_all(render::table::header().as_bytes())
                .context("cannot write to stdout")?;
        }
        writeln!(out, "{}", render::table::line(&summary, number, args.reveal)).context("cannot write to stdout")?;
        shown += 1;
    }
    let last = listing.finish().map_err(|e| e.for_command(db))?;
    let mut text = footer(&store, query.clone(), last, shown, &filters, db)?;
    text.extend(unanswered_hint(&store, &query));
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("cannot write to stdout")?;
    Ok(ExitCode::SUCCESS)
}

/// The listing as one JSON array, written as it is read.
fn print_json(mut listing: Listing<'_>, reveal: bool, db: &Path) -> anyhow::Result<ExitCode> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let items = (listing.by_ref()).map(|(s, target, number)| render::json::summary(&s, &target, number, reveal));
    let opened = render::json::write_terminal_items(&mut out, items).context("cannot write to stdout")?;
    // A listing cut short by an error (a damaged history) is left
    // unclosed: a script reading stdout must not take it, or an empty
    // array, for the whole history.
    let finished = listing.finish().map_err(|e| e.for_command(db));
    if finished.is_ok() {
        render::json::close_terminal_array(&mut out, opened).context("cannot write to stdout")?;
    }
    out.flush().context("cannot write to stdout")?;
    finished.map(|_| ExitCode::SUCCESS)
}

/// What follows the table: that nothing matched (`last` is `None`), that
/// a full page of `shown` may not be all, or nothing.
fn footer(
    store: &Store,
    query: ListQuery,
    last: Option<i64>,
    shown: usize,
    filters: &str,
    db: &Path,
) -> anyhow::Result<String> {
    Ok(match last {
        None => {
            let file = db.display().to_string();
            let line = if filters.is_empty() {
                format!("No deliveries in {file}.")
            } else {
                format!("No deliveries match {filters} in {file}.")
            };
            let mut text = format!("{}\n", portpreview_shared::sanitize::escape_str(&line));
            if let Some(hint) = cut_key_hint(store, &query) {
                text.push_str(&hint);
            }
            text
        }
        // A full page may not be all: say so, on the table's own stream.
        // Counted only so far: a count of every match reads every row.
        Some(last) if query.limit == Some(shown) => {
            let more = ListQuery {
                limit: Some(COUNTED_BEYOND + 1),
                before_id: Some(last),
                ..query
            };
            match store.count(&more).map_err(|e| e.for_command(db))? {
                0 => String::new(),
                n if n <= COUNTED_BEYOND as u64 => {
                    format!("({shown} of {} shown; --limit 0 lists all)\n", shown as u64 + n)
                }
                _ => format!(
                    "({shown} of more than {} shown; --limit 0 lists all)\n",
                    shown + COUNTED_BEYOND
                ),
            }
        }
        Some(_) => String::new(),
    })
}

/// Matches past a full page that the footer counts exactly.
const COUNTED_BEYOND: usize = 10_000;

/// Rows read from the history at a time: `--limit 0` over a million
/// deliveries prints as it reads, in flat memory.
const PAGE: usize = 500;

/// The deliveries `query` matches, newest first, with each one's target and
/// its place among its event's deliveries, read a page at a time. An error
/// ends the rows; [`Listing::finish`] returns it.
struct Listing<'a> {
    store: &'a Store,
    query: ListQuery,
    page: std::vec::IntoIter<(Summary, String)>,
    /// Rows still to give under `--limit`; `None` for all.
    left: Option<usize>,
    last_id: Option<i64>,
    /// The last row numbered of each event with earlier deliveries still
    /// to come, by key and scope: (its id, its number).
    numbered: HashMap<(String, String), (i64, i64)>,
    error: Option<StoreError>,
    done: bool,
}

impl<'a> Listing<'a> {
    fn new(store: &'a Store, query: ListQuery) -> Self {
        Self {
            store,
            left: query.limit,
            query,
            page: Vec::new().into_iter(),
            last_id: None,
            numbered: HashMap::new(),
            error: None,
            done: false,
        }
    }

    /// The id of the last row given, or the error that ended the rows.
    fn finish(self) -> Result<Option<i64>, StoreError> {
        match self.error {
            Some(err) => Err(err),
            None => Ok(self.last_id),
        }
    }

    fn next_page(&mut self) -> Result<(), StoreError> {
        let size = self.left.map_or(PAGE, |left| left.min(PAGE));
        let query = ListQuery {
            limit: Some(size),
            before_id: self.last_id,
            ..self.query.clone()
        };
        let rows = self.store.list_with_targets(&query)?;
        self.done = rows.len() < size;
        self.page = rows.into_iter();
        Ok(())
    }

    fn number(&mut self, s: &Summary) -> Result<Option<i64>, StoreError> {
        // Counted only for events that came more than once; replays have
        // no number.
        match (s.replay_of, s.delivery_count) {
            (Some(_), _) => return Ok(None),
            (None, count) if count > 1 => {}
            (None, _) => return Ok(Some(1)),
        }
        // Rows come newest first: an event's next row is numbered from its
        // last, over the deliveries between them. Counting each from the
        // event's first delivery took seconds a page for an event sent
        // thousands of times.
        let group = (s.event_key.clone(), s.event_scope.clone());
        let number = match self.numbered.get(&group) {
            Some(&newer) => self
                .store
                .delivery_number_before(s.id, &s.event_key, &s.event_scope, newer)?,
            None => self.store.delivery_number(s.id)?,
        };
        // The first delivery of its event ends what is left to number.
        if number > 1 {
            self.numbered.insert(group, (s.id, number));
        } else {
            self.numbered.remove(&group);
        }
        Ok(Some(number))
    }
}

impl Iterator for Listing<'_> {
    type Item = (Summary, String, Option<i64>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.error.is_some() || self.left == Some(0) {
            return None;
        }
        let (summary, target) = match self.page.next() {
            Some(row) => row,
            None if self.done => return None,
            None => {
                if let Err(err) = self.next_page() {
                    self.error = Some(err);
                    return None;
                }
                self.page.next()?
            }
        };
        let number = match self.number(&summary) {
            Ok(number) => number,
            Err(err) => {
                self.error = Some(err);
                return None;
            }
        };
        self.last_id = Some(summary.id);
        self.left = self.left.map(|left| left - 1);
        Some((summary, target, number))
    }
}

/// An event key to list, refused when blank: an unset variable (`--event
/// "$KEY"`) would otherwise list every delivery without a key.
pub fn parse_event_key(text: &str) -> Result<String, String> {
    filters::not_blank(text, "an event key as history lists it")
}

/// `--limit`: a count of rows, which Rust's own refusal (`invalid digit
/// found in string`) does not say.
fn parse_limit(text: &str) -> Result<usize, String> {
    text.trim()
        .parse()
        .map_err(|_| "expected a whole number of deliveries, or 0 for all".to_string())
}

/// A provider name as the history stores it (`STRIPE` → `stripe`, `svix` →
/// `standard-webhooks`); an unknown name is refused with the list.
pub fn parse_provider(text: &str) -> Result<String, String> {
    match Provider::from_name(text) {
        Some(provider) => Ok(provider.name().to_string()),
        None if text.eq_ignore_ascii_case(UNKNOWN_PROVIDER) => Ok(UNKNOWN_PROVIDER.to_owned()),
        None => {
            let names: Vec<&str> = Provider::ALL.iter().map(|p| p.name()).collect();
            Err(format!(
                "unknown provider; expected one of {}, or {UNKNOWN_PROVIDER} for none recognised (svix means standard-webhooks)",
                names.join(", ")
            ))
        }
    }
}

/// When `--event` matched nothing but is the start of some key (copied
/// from the table, which cuts long keys), how to match those.
fn cut_key_hint(store: &Store, query: &ListQuery) -> Option<String> {
    let key = query
        .event_key
        .as_deref()
        .filter(|key| !key.is_empty() && !key.ends_with('…'))?;
    let by_start = ListQuery {
        event_key: Some(format!("{key}…")),
        limit: Some(1),
        ..query.clone()
    };
    store.list(&by_start).ok()?.first()?;
    Some(format!(
        "Some event keys begin with it: the table shows long keys cut, and --event {} matches them.\n",
        crate::render::curl::quote(format!("{key}…").as_bytes())
    ))
}

/// Under `--status 5xx` (or any status of that class, 502 and 504 among
/// them), that deliveries the handler never answered are not listed, when
/// the other filters let some through: the caller got a 502 or 504 from
/// PortPreview, and someone hunting failures looks for those first.
fn unanswered_hint(store: &Store, query: &ListQuery) -> Option<String> {
    let asks_5xx = query
        .status
        .iter()
        .any(|word| matches!(word, StatusWord::Class(5) | StatusWord::Exact(500..=599)));
    if !asks_5xx || query.status.contains(&StatusWord::Failed) {
        return None;
    }
    let unanswered = ListQuery {
        status: vec![StatusWord::Failed],
        limit: Some(1),
        ..query.clone()
    };
    store.list(&unanswered).ok()?.first()?;
    let words: Vec<String> = query.status.iter().map(StatusWord::to_string).collect();
    Some(format!(
        "Deliveries the handler never answered (the caller got a 502 or 504 from PortPreview) have no status: --status {},error lists them too.\n",
        words.join(",")
    ))
}

/// `--provider stripe --event evt_1` for the filters that were given.
pub fn filter_words(filters: &[(&str, Option<&str>)]) -> String {
    filters
        .iter()
        .filter_map(|(flag, value)| value.map(|value| format!("{flag} {value}")))
        .collect::<Vec<_>>()
        .join(" ")
}
