//! One module per subcommand, each with its `Args` and `run`.

pub mod export;
pub mod history;
pub mod http;
pub mod prune;
pub mod show;
