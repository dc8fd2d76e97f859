//! What relay and client both need: the wire protocol, provider detection,
//! event keys, signatures and terminal sanitising; and, so that both
//! binaries behave alike, the small things a process does (durations as
//! written, open-file limits, SIGHUP left ignored, a TOML file read, a
//! usage error in one line, a pause told from a silent peer, locks, text
//! cut to a budget).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod codec;
pub mod coding;
pub mod content_length;
pub mod duration;
pub mod file_mode;
pub mod hangup;
pub mod hop;
pub mod host;
pub mod log_filter;
pub mod message;
pub mod name;
pub mod open_files;
pub mod provider;
pub mod request_ref;
pub mod room;
pub mod sanitize;
pub mod stall;
pub mod sync;
pub mod text;
pub mod toml_file;
pub mod unsent;
pub mod usage;

pub use message::{ClientMessage, Header, ServerMessage, StreamId};
