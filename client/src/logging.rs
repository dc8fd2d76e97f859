//! Tracing setup: logs to stderr, or to a file while a TUI owns the screen.

use std::path::PathBuf;

use portpreview_shared::sanitize::escape_str;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::{FilterExt, Targets};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
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
        // Unasked for, a warning reads as the CLI's other lines do; a log
        // asked for with PORTPREVIEW_LOG keeps its times and levels.
        match std::env::var_os(LOG_ENV) {
            None => install(std::io::stderr, ansi, Some(Plain)),
            Some(_) => install(std::io::stderr, ansi, None),
        }
        return;
    }
    install(LazyLog::default(), false, None);
}

/// `portpreview.log`, opened on its first line: a run that logs nothing
/// (a `tui` refused for a mistyped `--db`, most runs) leaves no file, nor
/// folder, in the user's data directory.
#[derive(Default)]
struct LazyLog(std::sync::OnceLock<Option<std::sync::Mutex<std::fs::File>>>);

impl<'w> MakeWriter<'w> for LazyLog {
    type Writer = Box<dyn std::io::Write + 'w>;

    fn make_writer(&'w self) -> Self::Writer {
        match self.0.get_or_init(|| log_file().map(std::sync::Mutex::new)) {
            Some(file) => Box::new(file.make_writer()),
            None => Box::new(std::io::sink()),
        }
    }
}

fn install<W>(writer: W, ansi: bool, plain: Option<Plain>)
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
    let filter = asked.and(no_tungstenite_traces);
    let layer = tracing_subscriber::fmt::layer()
        .with_target(false)
        .with_ansi(ansi)
        .with_writer(writer)
        // A line that cannot be written (stderr on a full disk, a closed
        // pipe) is dropped; tracing's own report of it would panic.
        .log_internal_errors(false);
    match plain {
        Some(plain) => tracing_subscriber::registry()
            .with(layer.event_format(plain).with_filter(filter))
            .init(),
        None => tracing_subscriber::registry().with(layer.with_filter(filter)).init(),
    }
}

/// One line per event, as the CLI's own lines: `warning: what happened:
/// the error (path=…)`, escaped, since fields carry paths and errors that
/// quote what was sent.
struct Plain;

/// An event's fields as [`Plain`] writes them.
#[derive(Default)]
struct PlainLine {
    message: String,
    err: Option<String>,
    rest: Vec<String>,
}

impl PlainLine {
    fn record(&mut self, field: &tracing::field::Field, value: String) {
        match field.name() {
            "message" => self.message = value,
            "err" => self.err = Some(value),
            name => self.rest.push(format!("{name}={value}")),
        }
    }
}

impl tracing::field::Visit for PlainLine {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.record(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.record(field, format!("{value:?}"));
    }
}

impl std::fmt::Display for PlainLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        if let Some(err) = &self.err {
            write!(f, ": {err}")?;
        }
        if !self.rest.is_empty() {
            write!(f, " ({})", self.rest.join(", "))?;
        }
        Ok(())
    }
}

impl<S, N> FormatEvent<S, N> for Plain
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, _: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> std::fmt::Result {
        let level = match *event.metadata().level() {
            Level::ERROR => "error",
            Level::WARN => "warning",
            Level::INFO => "info",
            Level::DEBUG => "debug",
            Level::TRACE => "trace",
        };
        let mut line = PlainLine::default();
        event.record(&mut line);
        writeln!(writer, "{level}: {}", escape_str(&line.to_string()))
    }
}

fn log_file() -> Option<std::fs::File> {
    let path: PathBuf = crate::config::data_dir()?.join("portpreview.log");
    std::fs::create_dir_all(path.parent()?).ok()?;
    // Like the history, the log may name what the deliveries carried; one
    // an earlier version made is made private too.
    let file = crate::private_file::options()
        .create(true)
        .append(true)
        .open(&path)
        .ok()?;
    let _ = crate::private_file::restrict(&path);
    Some(file)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Collects what the subscriber writes.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn an_unasked_for_warning_reads_as_one_escaped_line() {
        let captured = Captured::default();
        let sink = captured.clone();
        let layer = tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .event_format(Plain);
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let err = std::io::Error::other("Read-only file system");
            tracing::warn!(%err, path = %"h.db-inbox\u{1b}[2J", "cannot remove the history inbox");
        });
        let written = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            written,
            "warning: cannot remove the history inbox: Read-only file system (path=h.db-inbox\\x1b[2J)\n"
        );
    }
}
