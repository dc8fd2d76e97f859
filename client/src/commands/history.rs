//! `portpreview history`: list deliveries, newest first.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use portpreview_shared::provider::Provider;

use crate::render;
use crate::store::{ListQuery, Store};

/// Rows shown when `--limit` is not given.
pub const DEFAULT_LIMIT: usize = 50;

/// Arguments of `portpreview history`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Most deliveries to list; 0 lists them all.
    #[arg(long, default_value_t = DEFAULT_LIMIT, value_name = "N", allow_negative_numbers = true)]
    pub limit: usize,
    /// Only deliveries from this provider (stripe, github, …; svix for standard-webhooks).
    #[arg(long, value_name = "P", value_parser = parse_provider)]
    pub provider: Option<String>,
    /// Only deliveries of this event key.
    #[arg(long, value_name = "KEY")]
    pub event: Option<String>,
    /// Also list the deliveries sent by `replay`.
    #[arg(long)]
    pub replays: bool,
    /// Print a JSON array instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Prints the listing.
pub fn run(args: Args, db: &Path) -> anyhow::Result<ExitCode> {
    let store = Store::open_existing(db).map_err(|e| e.for_command(db))?;
    let filters = filter_words(&[
        ("--provider", args.provider.as_deref()),
        ("--event", args.event.as_deref()),
    ]);
    let query = ListQuery {
        limit: (args.limit > 0).then_some(args.limit),
        provider: args.provider,
        event_key: args.event,
        include_replays: args.replays,
        ..ListQuery::default()
    };
    let rows = store.list_with_targets(&query).map_err(|e| e.for_command(db))?;
    // Each row's place among its event's deliveries: a count per row, so
    // only for events that came more than once. Replays have none.
    let numbers = rows
        .iter()
        .map(|(s, _)| match (s.replay_of, s.delivery_count) {
            (Some(_), _) => Ok(None),
            (None, count) if count > 1 => store.delivery_number(s.id).map(Some),
            (None, _) => Ok(Some(1)),
        })
        .collect::<Result<Vec<Option<i64>>, _>>()
        .map_err(|e| e.for_command(db))?;
    if args.json {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        let items = rows
            .iter()
            .zip(&numbers)
            .map(|((s, target), number)| render::json::summary(s, target, *number));
        render::json::write_terminal_array(&mut out, items)
            .and_then(|()| out.flush())
            .context("cannot write to stdout")?;
        return Ok(ExitCode::SUCCESS);
    }
    let text = if rows.is_empty() {
        let file = db.display().to_string();
        let line = if filters.is_empty() {
            format!("No deliveries in {file}.")
        } else {
            format!("No deliveries match {filters} in {file}.")
        };
        format!("{}\n", portpreview_shared::sanitize::escape_str(&line))
    } else {
        let summaries: Vec<_> = rows.into_iter().map(|(summary, _)| summary).zip(numbers).collect();
        let mut table = render::table::history(&summaries);
        // A full page may not be all: say so, on the table's own stream.
        if query.limit == Some(summaries.len()) {
            let all = ListQuery { limit: None, ..query };
            let total = store.count(&all).map_err(|e| e.for_command(db))?;
            if total > summaries.len() as u64 {
                table.push_str(&format!(
                    "({} of {total} shown; --limit 0 lists all)\n",
                    summaries.len()
                ));
            }
        }
        table
    };
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .context("cannot write to stdout")?;
    Ok(ExitCode::SUCCESS)
}

/// A provider name as the history stores it (`STRIPE` → `stripe`, `svix` →
/// `standard-webhooks`); an unknown name is refused with the list.
pub fn parse_provider(text: &str) -> Result<String, String> {
    match Provider::from_name(text) {
        Some(provider) => Ok(provider.name().to_string()),
        None => {
            let names: Vec<&str> = Provider::ALL.iter().map(|p| p.name()).collect();
            Err(format!(
                "unknown provider; expected one of {} (svix means standard-webhooks)",
                names.join(", ")
            ))
        }
    }
}

/// `--provider stripe --event evt_1` for the filters that were given.
pub fn filter_words(filters: &[(&str, Option<&str>)]) -> String {
    filters
        .iter()
        .filter_map(|(flag, value)| value.map(|value| format!("{flag} {value}")))
        .collect::<Vec<_>>()
        .join(" ")
}
