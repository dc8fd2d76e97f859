//! One module per subcommand, each with its `Args` and `run`.

pub mod http;
