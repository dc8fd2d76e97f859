//! One module per subcommand, each with its `Args` and `run`.

pub mod check;
pub mod export;
pub mod history;
pub mod http;
pub mod prune;
pub mod replay;
pub mod show;
pub mod tui;
