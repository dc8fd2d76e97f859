//! The `portpreview` client: tunnel, history, replay and TUI.
#![forbid(unsafe_code)]

pub mod cli;
pub mod commands;
pub mod config;
pub mod events;
pub mod fixture;
pub mod forward;
pub mod logging;
pub mod output;
pub mod render;
pub mod replay;
pub mod signal;
pub mod store;
pub mod suite;
pub mod target;
pub mod time;
pub mod tui;
pub mod tunnel;

/// Formats an error and its causes on one line, for stderr.
pub fn error_line(err: &anyhow::Error) -> String {
    let line = err.chain().map(ToString::to_string).collect::<Vec<_>>().join(": ");
    portpreview_shared::sanitize::escape_str(&line).into_owned()
}
