//! `portpreview tui`: browse the recorded history in a terminal UI.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

/// Arguments of `portpreview tui` (only the global `--db`).
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Opens the history browser until the user quits.
pub async fn run(_args: Args, db: &Path) -> anyhow::Result<ExitCode> {
    crate::store::require(db).map_err(|err| err.for_command(db))?;
    // Keys are read from the terminal itself, as the live TUI reads them:
    // stdin may be anything (`< /dev/null`, a script's pipe).
    if !std::io::stdout().is_terminal() {
        anyhow::bail!("portpreview tui needs a terminal: use `portpreview history` for plain output");
    }
    if !crate::tui::terminal::can_draw() {
        anyhow::bail!(
            "portpreview tui cannot draw on a TERM=dumb terminal: use `portpreview history` for plain output"
        );
    }
    crate::tui::run_browser(db).await?;
    Ok(ExitCode::SUCCESS)
}
