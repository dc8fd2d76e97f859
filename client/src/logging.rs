//! Tracing setup: logs to stderr, or to a file while a TUI owns the screen.

use std::path::PathBuf;

use tracing::Level;
use tracing_subscriber::filter::{FilterExt, Targets};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::cli::Cli;

/// Environment variable that sets the log filter (`RUST_LOG` syntax).
pub const LOG_ENV: &str = "PORTPREVIEW_LOG";

/// Installs the global subscriber. Warnings go to stderr unless a TUI will
/// take the terminal, in which case they go to `portpreview.log` in the data
/// directory, or nowhere when that file cannot be opened: a line written
/// over the TUI would garble it.
pub fn init(cli: &Cli) {
    if !cli.command.uses_tui() {
        // Colour codes only for a person's terminal, not in a captured log.
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        install(std::io::stderr, ansi);
        return;
    }
    match log_file() {
        Some(file) => install(std::sync::Mutex::new(file), false),
        None => install(std::io::sink, false),
    }
}

fn install<W>(writer: W, ansi: bool)
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let asked = EnvFilter::try_from_env(LOG_ENV).unwrap_or_else(|_| EnvFilter::new("warn"));
    // tungstenite traces the upgrade request whole, the relay token in its
    // Authorization header included; tokens never reach a log. A cap, not
    // a directive: `tungstenite=debug` would raise it from warn as well.
    let no_tungstenite_traces = Targets::new()
        .with_default(Level::TRACE)
        .with_target("tungstenite", Level::DEBUG)
        .with_target("tokio_tungstenite", Level::DEBUG);
    let layer = tracing_subscriber::fmt::layer()
        .with_target(false)
        .with_ansi(ansi)
        .with_writer(writer)
        .with_filter(asked.and(no_tungstenite_traces));
    tracing_subscriber::registry().with(layer).init();
}

fn log_file() -> Option<std::fs::File> {
    let path: PathBuf = crate::config::data_dir()?.join("portpreview.log");
    std::fs::create_dir_all(path.parent()?).ok()?;
    std::fs::OpenOptions::new().create(true).append(true).open(path).ok()
}
