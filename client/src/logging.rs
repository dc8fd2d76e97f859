//! Tracing setup: logs to stderr, or to a file while a TUI owns the screen.

use std::path::PathBuf;

use tracing_subscriber::EnvFilter;

use crate::cli::Cli;

/// Environment variable that sets the log filter (`RUST_LOG` syntax).
pub const LOG_ENV: &str = "PORTPREVIEW_LOG";

/// Installs the global subscriber. Warnings go to stderr unless a TUI will
/// take the terminal, in which case they go to `portpreview.log` in the data
/// directory, or nowhere when that file cannot be opened: a line written
/// over the TUI would garble it.
pub fn init(cli: &Cli) {
    let mut filter = EnvFilter::try_from_env(LOG_ENV).unwrap_or_else(|_| EnvFilter::new("warn"));
    // tungstenite traces the upgrade request whole, the relay token in its
    // Authorization header included; tokens never reach a log.
    for quiet in ["tungstenite=debug", "tokio_tungstenite=debug"] {
        if let Ok(directive) = quiet.parse() {
            filter = filter.add_directive(directive);
        }
    }
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(false);
    if !cli.command.uses_tui() {
        // Colour codes only for a person's terminal, not in a captured log.
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        builder.with_ansi(ansi).with_writer(std::io::stderr).init();
        return;
    }
    match log_file() {
        Some(file) => builder.with_ansi(false).with_writer(std::sync::Mutex::new(file)).init(),
        None => builder.with_writer(std::io::sink).init(),
    }
}

fn log_file() -> Option<std::fs::File> {
    let path: PathBuf = crate::config::data_dir()?.join("portpreview.log");
    std::fs::create_dir_all(path.parent()?).ok()?;
    std::fs::OpenOptions::new().create(true).append(true).open(path).ok()
}
