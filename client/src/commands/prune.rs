//! `portpreview prune --older-than 7d`: forget old deliveries.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use portpreview_shared::text::counted;

use crate::store::Store;
use crate::time::now_ms;

/// Arguments of `portpreview prune`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Remove deliveries received longer ago than this (`12h`, `7d`, `4w`).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::time::parse_duration)]
    pub older_than: Duration,
}

/// Deletes the old deliveries and says how many went.
pub fn run(args: Args, db: &Path) -> anyhow::Result<ExitCode> {
    let store = Store::open_existing(db).map_err(|e| e.for_command(db))?;
    let age = i64::try_from(args.older_than.as_millis()).unwrap_or(i64::MAX);
    let pruned = store
        .prune(now_ms().saturating_sub(age))
        .map_err(|e| e.for_command(db))?;
    let attempts = match pruned.later_attempts {
        0 => String::new(),
        n => format!(
            ", and {} of them",
            counted(n, "later replay attempt", "later replay attempts")
        ),
    };
    writeln!(
        std::io::stdout().lock(),
        "Removed {} older than {}{attempts}.",
        counted(pruned.deliveries, "delivery", "deliveries"),
        portpreview_shared::duration::format_duration(args.older_than)
    )
    .context("cannot write to stdout")?;
    Ok(ExitCode::SUCCESS)
}
