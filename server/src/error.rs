//! Errors at the library's edges.

use std::path::PathBuf;

/// A tokens file, certificate, key or setting could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {error}")]
    Read {
        /// File that failed.
        path: PathBuf,
        /// Underlying I/O error (kept out of `source()` since the message includes it).
        error: std::io::Error,
    },
    /// The tokens file is not valid TOML of the expected shape.
    #[error(
        "invalid tokens file: {0}; it is TOML with one entry per token: \
         [[token]] then token = \"...\" (and label = \"...\", names = [\"...\"] if wanted)"
    )]
    TokensSyntax(String),
    /// The tokens file parsed but says something impossible.
    #[error("invalid tokens file: {0}")]
    Tokens(String),
    /// The certificate or key could not be used.
    #[error("invalid TLS configuration: {0}")]
    Tls(String),
    /// A limit is set where the relay cannot honour it.
    #[error("invalid limit: {0}")]
    Limit(String),
}

/// Why [`crate::run`] stopped without a shutdown request.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// The listener failed in a way that retrying will not fix.
    /// (The I/O error stays out of `source()`: the message includes it.)
    #[error("listener failed: {0}")]
    Accept(std::io::Error),
    /// The settings cannot work; nothing was served. (Out of `source()` too.)
    #[error("invalid relay settings: {0}")]
    Config(ConfigError),
}
