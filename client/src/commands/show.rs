//! `portpreview show <ID>`: one delivery whole.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use crate::render;
use crate::store::{Delivery, Store};

/// Bytes of each body `show` prints to a terminal: a screenful many times
/// over, where a 25 MiB upload would be a million and a half lines of hex
/// scrolling past. A pipe or a file gets every byte.
pub const TERMINAL_BODY_LIMIT: usize = 64 * 1024;

/// Arguments of `portpreview show`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Delivery id, as `history` lists it (`12` or `#12`).
    #[arg(value_name = "ID", value_parser = parse_id)]
    pub id: i64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Show secrets (Authorization, cookies, signatures, credentials in query strings) instead of masking them.
    #[arg(long)]
    pub reveal: bool,
}

/// Prints the delivery; `db_named` when `--db` (or `PORTPREVIEW_DB`) chose
/// the history, so that a hint to run another command names it too.
pub fn run(args: Args, db: &Path, db_named: bool) -> anyhow::Result<ExitCode> {
    let store = super::open_history(db)?;
    let delivery = fetch(&store, args.id, db)?;
    let number = store.delivery_number(args.id).map_err(|e| e.for_command(db))?;
    let runs = store.replay_runs(args.id).map_err(|e| e.for_command(db))?;
    let stdout = std::io::stdout();
    let on_terminal = stdout.is_terminal();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let written = if args.json {
        let value = render::json::delivery(&delivery, number, &runs, args.reveal);
        writeln!(out, "{}", render::json::to_terminal_text(&value))
    } else {
        let portpreview = super::portpreview_command(db, db_named);
        let cut = if on_terminal {
            render::show::BodyCut {
                limit: TERMINAL_BODY_LIMIT,
                portpreview: &portpreview,
                marks: render::show::EscapeMarks::for_terminal(),
            }
        } else {
            render::show::BodyCut::WHOLE
        };
        render::show::write_delivery(&mut out, &delivery, number, &runs, args.reveal, cut)
    };
    written.and_then(|()| out.flush()).context("cannot write to stdout")?;
    Ok(ExitCode::SUCCESS)
}

/// The delivery `id`, or the one-line error for an unknown id, or for
/// a history too damaged to tell.
pub fn fetch(store: &Store, id: i64, db: &Path) -> anyhow::Result<Delivery> {
    store
        .lookup(id)
        .map_err(|e| e.for_command(db))?
        .with_context(|| format!("no delivery #{id} in {}", db.display()))
}

/// Parses `12` or `#12`. Anything else is refused, pointed to the
/// listing that gives IDs for what it likely is, an event key.
pub fn parse_id(text: &str) -> Result<i64, String> {
    let id = text.trim().trim_start_matches('#');
    id.parse::<i64>().ok().filter(|id| *id > 0).ok_or_else(|| {
        let shown = portpreview_shared::sanitize::escape_str(text);
        match id.is_empty() || id.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
            true => format!("\"{shown}\" is not a delivery id (a number as `history` lists it)"),
            false => format!(
                "\"{shown}\" is not a delivery id (a number as `history` lists it); for an event key, \
                 `portpreview history --event {shown}` lists its deliveries"
            ),
        }
    })
}
