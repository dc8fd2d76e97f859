//! `portpreview prune --older-than 7d`: forget old deliveries.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use portpreview_shared::text::{counted, size};

use crate::store::Pruned;
use crate::time::{now_ms, WrittenDuration};

/// Arguments of `portpreview prune`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Remove deliveries received longer ago than this (`12h`, `7d`, `4w`).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::time::parse_age)]
    pub older_than: WrittenDuration,
    /// Say what would be removed, and remove nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Deletes the old deliveries and says how many went.
pub fn run(args: Args, db: &Path) -> anyhow::Result<ExitCode> {
    let store = super::open_history(db)?;
    let age = i64::try_from(args.older_than.duration.as_millis()).unwrap_or(i64::MAX);
    let cut_off = now_ms().saturating_sub(age);
    let mut out = std::io::stdout().lock();
    if args.dry_run {
        let foreseen = store.prunable(cut_off).map_err(|e| e.for_command(db))?;
        let what = what_goes(&foreseen, &args.older_than.written);
        writeln!(out, "Would remove {what} (--dry-run: nothing removed).").context("cannot write to stdout")?;
        return Ok(ExitCode::SUCCESS);
    }
    let waiting = |patience: std::time::Duration| {
        crate::to_stderr(format_args!(
            "note: another process holds the history's write lock; waiting up to {} s for it\n",
            patience.as_secs()
        ));
    };
    let pruned = store.prune(cut_off, waiting).map_err(|e| e.for_command(db))?;
    let what = what_goes(&pruned, &args.older_than.written);
    writeln!(out, "Removed {what}.").context("cannot write to stdout")?;
    drop(out);
    let before = file_size(db);
    match store.shrink_if_mostly_free() {
        // A tunnel writing the history keeps the copy in the WAL until it
        // pauses: the file has not shrunk yet, and saying it shrank from
        // its size to the same would be untrue.
        Ok(Some(after)) if file_size(db) > after => writeln!(
            std::io::stdout().lock(),
            "The history shrank from {} to {}; its file follows once the process writing it pauses.",
            size(before),
            size(after)
        )
        .context("cannot write to stdout")?,
        Ok(Some(_)) => writeln!(
            std::io::stdout().lock(),
            "The history file shrank from {} to {}.",
            size(before),
            size(file_size(db))
        )
        .context("cannot write to stdout")?,
        Ok(None) => {}
        // Pruned all the same: the free space goes to later deliveries.
        Err(err) => tracing::warn!(
            "the history file keeps its size, its free space left for new deliveries: {}",
            err.for_command(db)
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// `12 deliveries older than 7d, and 3 replay attempts of them`.
fn what_goes(pruned: &Pruned, age: &str) -> String {
    // `history` leaves replay attempts out, so they are not counted as deliveries here either.
    let attempts = match pruned.replay_attempts {
        0 => String::new(),
        n => format!(", and {} of them", counted(n, "replay attempt", "replay attempts")),
    };
    format!(
        "{} older than {age}{attempts}",
        counted(pruned.deliveries, "delivery", "deliveries")
    )
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}
