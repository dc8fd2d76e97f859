//! User configuration: defaults < config file < environment < flags.
//!
//! clap resolves flags and environment; this file supplies what neither set.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;

/// Environment variable naming another config file (tests, several setups).
pub const CONFIG_ENV: &str = "PORTPREVIEW_CONFIG";

/// A secret that never prints: tokens and signing secrets.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one place that must send or use it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// The config file, `config.toml` in the user's config directory.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Relay to use when `--server` and `PORTPREVIEW_SERVER` are absent.
    pub server: Option<String>,
    /// Token for the relay.
    pub token: Option<Secret>,
    /// History database path.
    pub db: Option<PathBuf>,
    /// Extra CA certificate (PEM) to trust for `wss://` relays.
    pub ca_cert: Option<PathBuf>,
    /// Signing secrets by provider name, for `replay --resign` and `--fresh`.
    #[serde(default)]
    pub secrets: BTreeMap<String, Secret>,
}

impl Config {
    /// Loads the config file; a missing file is an empty config, a bad one an error.
    pub fn load() -> anyhow::Result<Self> {
        let Some(path) = config_path() else {
            return Ok(Self::default());
        };
        Self::load_from(&path)
    }

    /// Loads a given config file; a missing file is an empty config.
    pub fn load_from(path: &Path) -> anyhow::Result<Self> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(err) => return Err(err).with_context(|| format!("cannot read {}", path.display())),
        };
        toml::from_str(&text).with_context(|| format!("invalid config file {}", path.display()))
    }
}

fn project_dirs() -> Option<directories::ProjectDirs> {
    directories::ProjectDirs::from("", "", "portpreview")
}

/// Where the config file lives (`PORTPREVIEW_CONFIG` overrides).
pub fn config_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(CONFIG_ENV) {
        return Some(PathBuf::from(path));
    }
    Some(project_dirs()?.config_dir().join("config.toml"))
}

/// The user's data directory for PortPreview.
pub fn data_dir() -> Option<PathBuf> {
    Some(project_dirs()?.data_dir().to_path_buf())
}

/// The history database: `--db` / `PORTPREVIEW_DB`, else the config file's
/// `db`, else `history.db` in the data directory.
pub fn db_path(flag: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(path) = flag {
        return Ok(path);
    }
    if let Some(path) = Config::load()?.db {
        return Ok(path);
    }
    data_dir()
        .map(|dir| dir.join("history.db"))
        .context("no home directory to keep the history in: pass --db PATH")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_do_not_print() {
        let config: Config = toml::from_str("token = \"tok_123\"\n[secrets]\nstripe = \"whsec_x\"").unwrap();
        let shown = format!("{config:?}");
        assert!(!shown.contains("tok_123") && !shown.contains("whsec_x"), "{shown}");
    }

    #[test]
    fn unknown_keys_are_refused() {
        assert!(toml::from_str::<Config>("sever = \"typo\"").is_err());
    }
}
