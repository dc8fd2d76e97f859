//! The `portpreview` client: tunnel, history, replay and TUI.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cli;
mod commands;
pub mod config;
pub mod events;
pub mod fixture;
mod forward;
mod input_file;
mod local_tls;
pub mod logging;
pub mod memory;
mod origin;
pub mod output;
mod path_glob;
mod private_file;
#[cfg(test)]
mod raw_handler;
mod render;
pub mod replay;
mod signalled;
pub mod store;
mod suite;
pub mod target;
pub mod time;
pub mod tui;
pub mod tunnel;
mod userinfo;
mod whole_file;

/// Formats an error and its causes on one line, for stderr. Our messages
/// quote their cause; a cause whose text the line already holds (a foreign
/// error that also exposes it as `source()`) is not repeated.
pub fn error_line(err: &anyhow::Error) -> String {
    portpreview_shared::sanitize::escape_str(&error_text(err)).into_owned()
}

/// [`error_line`] before escaping, for output that escapes in its own way.
pub fn error_text(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// Writes `text` to stderr. A closed stderr (`2>&1 | head`) is no reason to
/// panic, as `eprint!` would: there is nobody left to tell.
pub fn to_stderr(text: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = std::io::stderr().lock().write_fmt(text);
}

/// What a panic said, from its payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message")
}

/// Writes `text` to stdout, for lines printed as work goes on: a reader
/// that went away (`| head`) is no reason to panic, as `print!` would, nor
/// to stop the work.
pub fn to_stdout(text: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = std::io::stdout().lock().write_fmt(text);
}

/// Whether `stream` is a terminal that takes escape sequences: not one
/// that says it is `dumb` (Emacs' shell, some CI consoles), which shows
/// them as text.
pub fn takes_escapes(stream: &impl std::io::IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("TERM").is_none_or(|term| term != "dumb")
}

/// True when the error comes from writing to a pipe whose reader has gone
/// (`portpreview history | head -1`): nothing to report, as with any CLI.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("nothing answers at 127.0.0.1:1: {0}")]
    struct QuotesItsSource(#[source] std::io::Error);

    #[test]
    fn an_error_line_names_each_cause_once() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let err = anyhow::Error::new(QuotesItsSource(refused)).context("replay #3");
        assert_eq!(
            error_line(&err),
            "replay #3: nothing answers at 127.0.0.1:1: Connection refused"
        );
    }
}
