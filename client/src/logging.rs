//! Tracing setup: logs to stderr, or to a file while a TUI owns the screen.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use portpreview_shared::sanitize::escape_str;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::{filter_fn, FilterExt, Targets};
use tracing_subscriber::fmt::format::{Format, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::cli::Cli;

/// Environment variable that sets the log filter (`RUST_LOG` syntax).
pub const LOG_ENV: &str = "PORTPREVIEW_LOG";

/// Whether a TUI has the screen now.
static SCREEN_TAKEN: AtomicBool = AtomicBool::new(false);

/// Tells the logs, and the panic report, that a TUI has taken the screen
/// (`true`) or given it back: a line written over a TUI would garble it,
/// and one written to the file once the TUI is gone (a tunnel's last
/// deliveries lost as it stopped) would never be seen.
pub fn set_screen_taken(taken: bool) {
    SCREEN_TAKEN.store(taken, Ordering::Relaxed);
}

/// Whether a TUI has the screen now (see [`set_screen_taken`]).
pub fn screen_taken() -> bool {
    SCREEN_TAKEN.load(Ordering::Relaxed)
}

/// Installs the global subscriber. Warnings go to stderr, but while a TUI
/// has the screen to `portpreview.log` in the data directory, or nowhere
/// when that file cannot be opened.
pub fn init(cli: &Cli) {
    let asked = std::env::var_os(LOG_ENV);
    let understood = EnvFilter::try_from_env(LOG_ENV);
    if let (Some(asked), Err(err)) = (&asked, &understood) {
        // Said once, before any screen is taken; the logs go on at warn.
        crate::to_stderr(format_args!(
            "warning: {LOG_ENV}={} is not a log filter ({}): logging warnings only\n",
            escape_str(&asked.to_string_lossy()),
            escape_str(&err.to_string())
        ));
    }
    if let Some(why) = (asked.as_ref().filter(|_| understood.is_ok()))
        .and_then(|asked| portpreview_shared::log_filter::doubt(&asked.to_string_lossy()))
    {
        crate::to_stderr(format_args!(
            "warning: {LOG_ENV}={}: {why}\n",
            escape_str(&asked.as_deref().unwrap_or_default().to_string_lossy())
        ));
    }
    // Colour codes only for a person's terminal, not in a captured log.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    // Unasked for, a warning reads as the CLI's other lines do; a log
    // asked for with PORTPREVIEW_LOG keeps its times and levels.
    let lines = match (asked, understood) {
        (Some(_), Ok(_)) => Lines::Full(Format::default()),
        _ => Lines::Plain,
    };
    let to_stderr = layer(std::io::stderr, ansi, lines);
    if !cli.command.uses_tui() {
        tracing_subscriber::registry()
            .with(to_stderr.with_filter(filter()))
            .init();
        return;
    }
    beside_a_tui(to_stderr, LazyLog::default()).init();
}

/// Logs to `to_stderr`, but to `to_file` while a TUI has the screen.
fn beside_a_tui<W>(
    to_stderr: impl Layer<tracing_subscriber::Registry> + Send + Sync,
    to_file: W,
) -> impl Subscriber + Send + Sync
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let to_file = layer(to_file, false, Lines::Full(Format::default()));
    let layers = vec![
        to_stderr
            .with_filter(filter().and(filter_fn(|_| !screen_taken())))
            .boxed(),
        to_file.with_filter(filter().and(filter_fn(|_| screen_taken()))).boxed(),
    ];
    tracing_subscriber::registry().with(layers)
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

/// The events `PORTPREVIEW_LOG` asks for (warnings and errors unless it is set).
fn filter() -> impl tracing_subscriber::layer::Filter<tracing_subscriber::Registry> {
    let asked = EnvFilter::try_from_env(LOG_ENV).unwrap_or_else(|_| EnvFilter::new("warn"));
    // tungstenite traces the upgrade request whole, the relay token in its
    // Authorization header included; tokens never reach a log. A cap, not
    // a directive: `tungstenite=debug` would raise it from warn as well.
    let no_tungstenite_traces = Targets::new()
        .with_default(Level::TRACE)
        .with_target("tungstenite", Level::DEBUG)
        .with_target("tokio_tungstenite", Level::DEBUG);
    asked.and(no_tungstenite_traces)
}

fn layer<W>(
    writer: W,
    ansi: bool,
    lines: Lines,
) -> tracing_subscriber::fmt::Layer<
    tracing_subscriber::Registry,
    tracing_subscriber::fmt::format::DefaultFields,
    Lines,
    W,
>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt::layer()
        .with_target(false)
        .with_ansi(ansi)
        .with_writer(writer)
        .event_format(lines)
        // A line that cannot be written (stderr on a full disk, a closed
        // pipe) is dropped; tracing's own report of it would panic.
        .log_internal_errors(false)
}

/// How each event is written: as [`Plain`] lines, or with times and
/// levels, as tracing writes them.
enum Lines {
    Plain,
    Full(Format),
}

impl<S, N> FormatEvent<S, N> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, writer: Writer<'_>, event: &Event<'_>) -> std::fmt::Result {
        match self {
            Lines::Plain => Plain.format_event(ctx, writer, event),
            Lines::Full(full) => full.format_event(ctx, writer, event),
        }
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

    #[test]
    fn warnings_go_to_the_file_only_while_a_tui_has_the_screen() {
        let (stderr, file) = (Captured::default(), Captured::default());
        let (to_stderr, to_file) = (stderr.clone(), file.clone());
        let to_stderr = layer(move || to_stderr.clone(), false, Lines::Plain);
        let subscriber = beside_a_tui(to_stderr, move || to_file.clone());
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!("before the TUI");
            set_screen_taken(true);
            tracing::warn!("over the TUI");
            set_screen_taken(false);
            tracing::warn!("3 deliveries are lost");
        });
        let text = |c: &Captured| String::from_utf8(c.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            text(&stderr),
            "warning: before the TUI\nwarning: 3 deliveries are lost\n"
        );
        let file = text(&file);
        assert!(file.contains("WARN") && file.contains("over the TUI"), "{file}");
        assert_eq!(file.lines().count(), 1, "{file}");
    }
}
