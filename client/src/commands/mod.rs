//! One module per subcommand, each with its `Args` and `run`, and what
//! `replay` and `check` share.

pub mod check;
pub mod export;
mod guard;
pub mod history;
pub mod http;
pub mod prune;
pub mod replay;
pub mod run;
pub mod show;
pub mod tui;
