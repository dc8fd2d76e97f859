//! User configuration: defaults < config file < environment < flags.
//!
//! clap resolves flags and environment; this file supplies what neither set.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use portpreview_shared::provider::Provider;
use portpreview_shared::toml_file::parse_toml;
use serde::Deserialize;

use crate::input_file::{into_text, read_settings, without_bom, InputError, MAX_SETTINGS_FILE};

/// Environment variable naming another config file (tests, several setups).
pub const CONFIG_ENV: &str = "PORTPREVIEW_CONFIG";

/// A secret that never prints: tokens and signing secrets.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

/// Read from the config file, a secret that is no string is refused
/// without being quoted back.
impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        portpreview_shared::toml_file::secret_string(deserializer).map(Secret)
    }
}

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

/// A signing secret and where it was found. A handler that refuses what
/// it signed is told of that place, the one to correct.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningSecret {
    /// The secret.
    pub secret: Secret,
    /// Where it came from.
    pub from: SecretFrom,
}

impl SigningSecret {
    /// A secret given with `--secret`.
    pub fn flag(value: impl Into<String>) -> Self {
        Self {
            secret: Secret::new(value),
            from: SecretFrom::Flag,
        }
    }
}

/// Where a signing secret was found, in the order [`resolve_secret`] looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretFrom {
    /// `--secret`, which signs for every provider.
    Flag,
    /// `--secret`, given where a suite's `secret_env` names this variable.
    FlagOverSuite(String),
    /// An environment variable: a suite's `secret_env`,
    /// `PORTPREVIEW_SECRET_<PROVIDER>` or `PORTPREVIEW_SECRET`.
    Env(String),
    /// The config file's `[secrets]` table, under this name.
    ConfigFile(&'static str),
}

impl fmt::Display for SecretFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Flag | Self::FlagOverSuite(_) => f.write_str("--secret"),
            Self::Env(var) => f.write_str(var),
            Self::ConfigFile(_) => f.write_str("the config file"),
        }
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
    /// A warning that users other than its owner may read the file, which
    /// holds secrets: said by the command, as its other warnings are.
    #[serde(skip)]
    pub open_to_others: Option<String>,
}

/// What to say of the config file at `path` when it holds a token or
/// signing secrets and users other than its owner may read or change it,
/// as a history they may read is said of: whoever reads the token connects
/// as its owner, and whoever reads a secret signs webhooks the handler
/// trusts.
fn open_to_others(path: &Path, config: &Config) -> Option<String> {
    let token = config.token.as_ref().is_some_and(|token| !token.expose().is_empty());
    let secrets = config.secrets.values().any(|secret| !secret.expose().is_empty());
    let held = match (token, secrets) {
        (true, true) => "a relay token and signing secrets",
        (true, false) => "a relay token",
        (false, true) => "signing secrets",
        (false, false) => return None,
    };
    let mode = portpreview_shared::file_mode::open_to_others(path)?;
    Some(format!(
        "{} may be {} by other users (mode {mode:04o}), and holds {held}: chmod 600 it",
        path.display(),
        portpreview_shared::file_mode::reached_as(mode)
    ))
}

impl Config {
    /// Loads the config file; a missing file is an empty config, a bad one
    /// an error. A file `PORTPREVIEW_CONFIG` names must exist: a mistyped
    /// path would otherwise run everything without the settings it meant.
    pub fn load() -> anyhow::Result<Self> {
        if let Some(named) = named_path() {
            if !named.exists() {
                anyhow::bail!("{CONFIG_ENV} names {}, which does not exist", named.display());
            }
            if named.is_dir() {
                anyhow::bail!(
                    "{CONFIG_ENV} names {}, a folder: name the config file in it",
                    named.display()
                );
            }
        }
        let Some(path) = config_path() else {
            return Ok(Self::default());
        };
        Self::load_from(&path)
    }

    /// Loads a given config file; a missing file is an empty config, and
    /// so is one under a file where a folder would be (`XDG_CONFIG_HOME`
    /// naming a file), or behind a folder closed to this user.
    pub fn load_from(path: &Path) -> anyhow::Result<Self> {
        let text = match read_settings(path, MAX_SETTINGS_FILE)
            .map(without_bom)
            .and_then(into_text)
        {
            Ok(text) => text,
            Err(InputError::Io(err))
                if matches!(
                    err.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                return Ok(Self::default())
            }
            // Behind a folder closed to this user (`sudo -u` keeping HOME):
            // another user's settings, if any, not this one's. A file this
            // user may see but not read is still an error.
            Err(InputError::Io(err))
                if err.kind() == std::io::ErrorKind::PermissionDenied && std::fs::metadata(path).is_err() =>
            {
                tracing::debug!(path = %path.display(), "the config file's folder is closed to this user");
                return Ok(Self::default());
            }
            Err(err) => return Err(err).with_context(|| format!("cannot read {}", path.display())),
        };
        let mut config: Config =
            parse_toml(&text).with_context(|| format!("invalid config file {}", path.display()))?;
        config
            .check_secrets()
            .and_then(|()| config.check_server())
            .with_context(|| format!("invalid config file {}", path.display()))?;
        config.open_to_others = open_to_others(path, &config);
        // Paths in the file mean the same from any directory: relative
        // ones are taken from the file's own folder, and `~/` is the home
        // folder, as a shell would read it (no shell reads this file).
        let home = directories::BaseDirs::new().map(|dirs| dirs.home_dir().to_path_buf());
        for (key, given) in [("db", &mut config.db), ("ca_cert", &mut config.ca_cert)] {
            let Some(given) = given else { continue };
            // Joined to the file's folder, an empty path would name the folder.
            if given.as_os_str().is_empty() {
                anyhow::bail!(
                    "invalid config file {}: {key} is empty: name a file, or leave {key} out",
                    path.display()
                );
            }
            match (given.strip_prefix("~"), &home) {
                (Ok(rest), Some(home)) => *given = home.join(rest),
                (Ok(_), None) => {
                    return Err(anyhow::anyhow!(
                        "invalid config file {}: {} starts with ~, and there is no home folder",
                        path.display(),
                        given.display()
                    ))
                }
                (Err(_), _) => {
                    if let Some(folder) = path.parent() {
                        *given = folder.join(&*given);
                    }
                }
            }
        }
        // Read only for a wss:// relay; a mistyped path would wait unseen
        // for the day the relay moves to TLS.
        if let Some(ca_cert) = config.ca_cert.as_ref().filter(|ca| !ca.is_file()) {
            return Err(anyhow::anyhow!(
                "invalid config file {}: ca_cert: no file at {}",
                path.display(),
                ca_cert.display()
            ));
        }
        Ok(config)
    }

    /// Refuses a `server` no tunnel could reach, naming the file: found
    /// only when `http` dialled it, it read as a mistake on the command line.
    fn check_server(&self) -> anyhow::Result<()> {
        if let Some(server) = &self.server {
            crate::tunnel::connect::relay_url(server).context("server")?;
        }
        Ok(())
    }

    /// Refuses a `[secrets]` entry under a name that is no provider's: a
    /// misspelt name would otherwise be ignored without a word, and the
    /// replay signed with no secret.
    fn check_secrets(&self) -> anyhow::Result<()> {
        for (name, secret) in &self.secrets {
            if secret.expose().is_empty() {
                anyhow::bail!(
                    "[secrets] {} is empty: give the secret, or leave the line out",
                    portpreview_shared::sanitize::escape_str(name)
                );
            }
            if Provider::ALL
                .iter()
                .all(|p| p.name() != name && p.alias() != Some(name))
            {
                let known: Vec<&str> = Provider::ALL.iter().map(|p| p.name()).collect();
                anyhow::bail!(
                    "[secrets] has `{}`, which is no provider's name: expected one of {} (svix means standard-webhooks)",
                    portpreview_shared::sanitize::escape_str(name),
                    known.join(", ")
                );
            }
        }
        // Two secrets for one provider: whichever won, the other was meant.
        for provider in Provider::ALL {
            if let Some(alias) = provider.alias() {
                if let (Some(a), Some(b)) = (self.secrets.get(provider.name()), self.secrets.get(alias)) {
                    if a != b {
                        anyhow::bail!(
                            "[secrets] has both `{}` and `{alias}`, one provider's names, set to different secrets: keep one",
                            provider.name()
                        );
                    }
                }
            }
        }
        Ok(())
    }

    /// The `[secrets]` entry for a provider, under its name or its alias
    /// (`svix` for standard-webhooks), and the name it is under.
    pub fn secret(&self, provider: Provider) -> Option<(&'static str, &Secret)> {
        [Some(provider.name()), provider.alias()]
            .into_iter()
            .flatten()
            .find_map(|key| Some((key, self.secrets.get(key)?)))
    }
}

fn project_dirs() -> Option<directories::ProjectDirs> {
    directories::ProjectDirs::from("", "", "portpreview")
}

/// The environment variable holding a provider's signing secret, e.g. `PORTPREVIEW_SECRET_STRIPE`.
pub fn secret_env(provider: Provider) -> String {
    env_name(provider.name())
}

/// Every variable that may hold a provider's secret, in the order they are
/// read: its own name's, then its alias's (`PORTPREVIEW_SECRET_SVIX`).
pub fn secret_envs(provider: Provider) -> Vec<String> {
    std::iter::once(provider.name())
        .chain(provider.alias())
        .map(env_name)
        .collect()
}

fn env_name(provider_name: &str) -> String {
    format!(
        "PORTPREVIEW_SECRET_{}",
        provider_name.to_ascii_uppercase().replace('-', "_")
    )
}

/// The variable holding one secret for whichever provider is replayed.
pub const ANY_PROVIDER_SECRET_ENV: &str = "PORTPREVIEW_SECRET";

/// The signing secret, the most particular first: `--secret`, else the
/// suite's `secret_env`, else `PORTPREVIEW_SECRET_<PROVIDER>`, else
/// `PORTPREVIEW_SECRET`, else the config file. A `PORTPREVIEW_SECRET` left
/// set in CI must not sign every provider's fixtures with one provider's
/// key while the right ones are set beside it.
pub fn resolve_secret(
    flag: Option<SigningSecret>,
    provider: Option<Provider>,
    suite_env: Option<&str>,
) -> anyhow::Result<Option<SigningSecret>> {
    if let Some(flag) = flag {
        // Known, so that advice on a refused signature points past --secret
        // to the suite's own variable, not to one the suite comes before.
        let from = match (flag.from, suite_env) {
            (SecretFrom::Flag, Some(var)) => SecretFrom::FlagOverSuite(var.to_owned()),
            (from, _) => from,
        };
        return Ok(Some(SigningSecret { from, ..flag }));
    }
    let from_env = |var: &str, value: String| SigningSecret {
        secret: Secret::new(value),
        from: SecretFrom::Env(var.to_owned()),
    };
    let read = match (suite_env, provider) {
        (Some(var), _) => vec![var.to_owned()],
        (None, Some(provider)) => secret_envs(provider),
        (None, None) => Vec::new(),
    };
    let any = suite_env.is_none().then(|| ANY_PROVIDER_SECRET_ENV.to_owned());
    refuse_unreadable(read.into_iter().chain(any))?;
    if let Some(var) = suite_env {
        // Empty, as CI leaves a secret that is not defined: signing with an
        // empty key would blame the handler for the missing secret.
        let value = std::env::var(var)
            .ok()
            .filter(|v| !v.is_empty())
            .with_context(|| format!("secret_env {var} is empty or not set"))?;
        return Ok(Some(from_env(var, value)));
    }
    let env = |var: &str| std::env::var(var).ok();
    let Some(provider) = provider else {
        return Ok(non_empty(env(ANY_PROVIDER_SECRET_ENV)).map(|value| from_env(ANY_PROVIDER_SECRET_ENV, value)));
    };
    provider_secret(provider, env, Config::load)
}

/// Refuses a secret variable set to bytes that are not UTF-8: taken for
/// unset, it would get advice to set a variable that is set.
fn refuse_unreadable(vars: impl IntoIterator<Item = String>) -> anyhow::Result<()> {
    for var in vars {
        if matches!(std::env::var(&var), Err(std::env::VarError::NotUnicode(_))) {
            anyhow::bail!("{var} is set, but not to UTF-8 text: a signing secret is text");
        }
    }
    Ok(())
}

/// Empty, as CI leaves a secret that is not defined, is not set.
fn non_empty(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.is_empty())
}

/// Those of `vars` set to nothing, as CI leaves a secret the job may not
/// read (a pull request from a fork): worth naming, as they look set.
pub fn set_but_empty(vars: impl IntoIterator<Item = String>) -> Vec<String> {
    vars.into_iter()
        .filter(|var| std::env::var_os(var).is_some_and(|value| value.is_empty()))
        .collect()
}

/// A provider's secret from its environment variables, else the config
/// file, which is loaded only then: a broken file does not stand in the
/// way of a secret the environment gives.
fn provider_secret(
    provider: Provider,
    env: impl Fn(&str) -> Option<String>,
    load: impl FnOnce() -> anyhow::Result<Config>,
) -> anyhow::Result<Option<SigningSecret>> {
    let set: Vec<(String, String)> = secret_envs(provider)
        .into_iter()
        .filter_map(|var| non_empty(env(&var)).map(|value| (var, value)))
        .collect();
    // Two names, two secrets: whichever won, the other was meant.
    if let [(first, a), (second, b), ..] = set.as_slice() {
        if a != b {
            anyhow::bail!("{first} and {second} are both set, to different secrets: keep one");
        }
    }
    if let Some((var, value)) = set
        .into_iter()
        .next()
        .or_else(|| non_empty(env(ANY_PROVIDER_SECRET_ENV)).map(|value| (ANY_PROVIDER_SECRET_ENV.to_owned(), value)))
    {
        return Ok(Some(SigningSecret {
            secret: Secret::new(value),
            from: SecretFrom::Env(var),
        }));
    }
    Ok(load()?.secret(provider).map(|(key, secret)| SigningSecret {
        secret: secret.clone(),
        from: SecretFrom::ConfigFile(key),
    }))
}

/// Where the config file lives (`PORTPREVIEW_CONFIG` overrides).
pub fn config_path() -> Option<PathBuf> {
    named_path().or_else(|| Some(project_dirs()?.config_dir().join("config.toml")))
}

/// The file `PORTPREVIEW_CONFIG` names; empty, as CI leaves an undefined
/// secret, is not set.
fn named_path() -> Option<PathBuf> {
    std::env::var_os(CONFIG_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The user's data directory for PortPreview.
pub fn data_dir() -> Option<PathBuf> {
    Some(project_dirs()?.data_dir().to_path_buf())
}

/// The history database: `--db` / `PORTPREVIEW_DB`, else the config file's
/// `db`, else `history.db` in the data directory.
pub fn db_path(flag: Option<PathBuf>, config: &Config) -> anyhow::Result<PathBuf> {
    if let Some(path) = flag.or_else(|| config.db.clone()) {
        return Ok(through_link(path));
    }
    data_dir()
        .map(|dir| dir.join("history.db"))
        .context("no home directory to keep the history in: pass --db PATH")
}

/// A history named through a symlink is used at the file it names. SQLite
/// keeps the WAL beside that file, and the tunnel's inbox must sit beside
/// it too: one left beside the link is found, after a crash, only by a
/// command given the link.
fn through_link(path: PathBuf) -> PathBuf {
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_symlink() => match std::fs::canonicalize(&path) {
            Ok(target) => target,
            // A link to a history not made yet: SQLite makes it where the
            // link points, and so must the tunnel its inbox.
            Err(_) => match std::fs::read_link(&path) {
                Ok(target) => match path.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                },
                Err(_) => path,
            },
        },
        _ => path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token or secret written without quotes is refused, never shown.
    /// `XDG_CONFIG_HOME` naming a file: no config file can be under it,
    /// and every command runs without one, as when it is missing.
    #[test]
    fn a_config_file_under_a_file_is_none() {
        let dir = crate::store::tests::ScratchDir::new("config-under-a-file");
        let file = dir.0.join("afile");
        std::fs::write(&file, "").unwrap();
        let config = Config::load_from(&file.join("portpreview/config.toml")).unwrap();
        assert!(config.server.is_none() && config.secrets.is_empty());
    }

    #[test]
    fn secrets_without_quotes_are_refused_unshown() {
        for text in ["token = 12345678\n", "[secrets]\ngithub = 98765432109876543\n"] {
            let err = parse_toml::<Config>(text).unwrap_err().to_string();
            assert!(err.contains("a secret is a quoted string"), "{err}");
            assert!(!err.contains("12345678") && !err.contains("98765432109876543"), "{err}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_history_named_through_a_symlink_is_used_where_it_lies() {
        let dir = std::env::temp_dir().join(format!("portpreview-db-link-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("real")).unwrap();
        let target = dir.join("real/history.db");
        std::fs::write(&target, b"").unwrap();
        let link = dir.join("link.db");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let used = db_path(Some(link.clone()), &Config::default()).unwrap();
        assert_eq!(used, target.canonicalize().unwrap());
        let ahead = dir.join("ahead.db");
        let _ = std::fs::remove_file(&ahead);
        std::os::unix::fs::symlink("real/not-made-yet.db", &ahead).unwrap();
        assert_eq!(
            db_path(Some(ahead), &Config::default()).unwrap(),
            dir.join("real/not-made-yet.db"),
            "a link to a history not made yet is followed too"
        );
        let plain = dir.join("plain.db");
        assert_eq!(db_path(Some(plain.clone()), &Config::default()).unwrap(), plain);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn secret_variables_are_named_after_the_provider() {
        assert_eq!(secret_env(Provider::Stripe), "PORTPREVIEW_SECRET_STRIPE");
        assert_eq!(
            secret_env(Provider::StandardWebhooks),
            "PORTPREVIEW_SECRET_STANDARD_WEBHOOKS"
        );
    }

    fn env_secret(var: &str, value: &str) -> Option<SigningSecret> {
        Some(SigningSecret {
            secret: Secret::new(value),
            from: SecretFrom::Env(var.to_owned()),
        })
    }

    #[test]
    fn a_flag_given_over_a_suites_variable_says_so() {
        let found = resolve_secret(Some(SigningSecret::flag("whsec_flag")), None, Some("MY_STRIPE_SECRET")).unwrap();
        assert_eq!(
            found.map(|s| s.from),
            Some(SecretFrom::FlagOverSuite("MY_STRIPE_SECRET".into()))
        );
        let found = resolve_secret(Some(SigningSecret::flag("whsec_flag")), None, None).unwrap();
        assert_eq!(found.map(|s| s.from), Some(SecretFrom::Flag));
    }

    #[test]
    fn svix_names_the_standard_webhooks_secret_too() {
        assert_eq!(
            secret_envs(Provider::StandardWebhooks),
            ["PORTPREVIEW_SECRET_STANDARD_WEBHOOKS", "PORTPREVIEW_SECRET_SVIX"]
        );
        assert_eq!(secret_envs(Provider::Stripe), ["PORTPREVIEW_SECRET_STRIPE"]);
        let no_config = || -> anyhow::Result<Config> { Ok(Config::default()) };
        let env = |var: &str| (var == "PORTPREVIEW_SECRET_SVIX").then(|| "whsec_svix".to_string());
        let found = provider_secret(Provider::StandardWebhooks, env, no_config).unwrap();
        assert_eq!(found, env_secret("PORTPREVIEW_SECRET_SVIX", "whsec_svix"));
        // Both names set to one secret is that secret; to two, a mistake.
        let same = |_: &str| Some("whsec_same".to_string());
        let found = provider_secret(Provider::StandardWebhooks, same, no_config).unwrap();
        assert_eq!(found, env_secret("PORTPREVIEW_SECRET_STANDARD_WEBHOOKS", "whsec_same"));
        let both = |var: &str| Some(var.to_string());
        let err = provider_secret(Provider::StandardWebhooks, both, no_config).unwrap_err();
        assert_eq!(
            err.to_string(),
            "PORTPREVIEW_SECRET_STANDARD_WEBHOOKS and PORTPREVIEW_SECRET_SVIX are both set, to different secrets: keep one"
        );

        let dir = crate::store::tests::ScratchDir::new("config-svix");
        let path = dir.0.join("config.toml");
        std::fs::write(&path, "[secrets]\nsvix = \"whsec_file\"\n").unwrap();
        let config = Config::load_from(&path).unwrap();
        assert_eq!(
            config.secret(Provider::StandardWebhooks),
            Some(("svix", &Secret::new("whsec_file")))
        );
        let found = provider_secret(Provider::StandardWebhooks, |_| None, || Ok(config)).unwrap();
        let from_file = SigningSecret {
            secret: Secret::new("whsec_file"),
            from: SecretFrom::ConfigFile("svix"),
        };
        assert_eq!(found, Some(from_file));

        std::fs::write(&path, "[secrets]\nsvix = \"a\"\nstandard-webhooks = \"b\"\n").unwrap();
        let err = format!("{:#}", Config::load_from(&path).unwrap_err());
        assert!(
            err.contains(
                "[secrets] has both `standard-webhooks` and `svix`, one provider's names, set to different secrets: keep one"
            ),
            "{err}"
        );
        std::fs::write(&path, "[secrets]\nsvix = \"a\"\nstandard-webhooks = \"a\"\n").unwrap();
        assert!(Config::load_from(&path).is_ok(), "one secret under both names");
        std::fs::write(&path, "[secrets]\nstripe = \"\"\n").unwrap();
        let err = format!("{:#}", Config::load_from(&path).unwrap_err());
        assert!(
            err.contains("[secrets] stripe is empty: give the secret, or leave the line out"),
            "{err}"
        );
    }

    #[test]
    fn a_secret_in_the_environment_needs_no_config_file() {
        let env = |var: &str| (var == "PORTPREVIEW_SECRET_STRIPE").then(|| "whsec_env".to_string());
        let broken = || -> anyhow::Result<Config> { anyhow::bail!("invalid config file") };
        let found = provider_secret(Provider::Stripe, env, broken).unwrap();
        assert_eq!(found, env_secret("PORTPREVIEW_SECRET_STRIPE", "whsec_env"));
        assert!(provider_secret(Provider::Stripe, |_| Some(String::new()), broken).is_err());
    }

    #[test]
    fn a_secret_named_for_the_provider_beats_the_one_for_any() {
        let no_config = || -> anyhow::Result<Config> { Ok(Config::default()) };
        let both = |var: &str| match var {
            "PORTPREVIEW_SECRET_STRIPE" => Some("whsec_stripe".to_string()),
            ANY_PROVIDER_SECRET_ENV => Some("whsec_any".to_string()),
            _ => None,
        };
        let found = provider_secret(Provider::Stripe, both, no_config).unwrap();
        assert_eq!(found, env_secret("PORTPREVIEW_SECRET_STRIPE", "whsec_stripe"));
        let found = provider_secret(Provider::Github, both, no_config).unwrap();
        assert_eq!(
            found,
            env_secret(ANY_PROVIDER_SECRET_ENV, "whsec_any"),
            "the one for any provider, else"
        );
        let file = || Ok(toml::from_str::<Config>("[secrets]\ngithub = \"from_file\"\n")?);
        let found = provider_secret(Provider::Github, both, file).unwrap();
        assert_eq!(
            found,
            env_secret(ANY_PROVIDER_SECRET_ENV, "whsec_any"),
            "the environment beats the file"
        );
    }

    #[test]
    fn secrets_do_not_print() {
        let config: Config = toml::from_str("token = \"tok_123\"\n[secrets]\nstripe = \"whsec_x\"").unwrap();
        let shown = format!("{config:?}");
        assert!(!shown.contains("tok_123") && !shown.contains("whsec_x"), "{shown}");
    }

    #[test]
    fn relative_paths_are_taken_from_the_files_folder_and_tilde_from_home() {
        let dir = crate::store::tests::ScratchDir::new("config");
        let path = dir.0.join("config.toml");
        let ca = dir.0.join("relay-ca.pem");
        std::fs::write(&ca, "").unwrap();
        let text = format!("db = \"history.db\"\nca_cert = {:?}\n", ca.display().to_string());
        std::fs::write(&path, text).unwrap();
        let config = Config::load_from(&path).unwrap();
        assert_eq!(config.db, Some(dir.0.join("history.db")));
        assert_eq!(config.ca_cert, Some(ca), "absolute stays");

        std::fs::write(&path, "db = \"~/hooks/history.db\"\n").unwrap();
        let home = directories::BaseDirs::new().unwrap().home_dir().to_path_buf();
        assert_eq!(
            Config::load_from(&path).unwrap().db,
            Some(home.join("hooks/history.db"))
        );
    }

    /// An empty path would name the file's own folder, and the history
    /// would be refused as a directory: the key is named instead.
    #[test]
    fn an_empty_path_is_refused_by_its_key() {
        let dir = crate::store::tests::ScratchDir::new("config-empty");
        let path = dir.0.join("config.toml");
        for key in ["db", "ca_cert"] {
            std::fs::write(&path, format!("{key} = \"\"\n")).unwrap();
            let err = Config::load_from(&path).unwrap_err().to_string();
            assert_eq!(
                err,
                format!(
                    "invalid config file {}: {key} is empty: name a file, or leave {key} out",
                    path.display()
                )
            );
        }
    }

    /// A mistyped `ca_cert` is told when the file is read, not the day a
    /// relay is first reached over TLS.
    #[test]
    fn a_ca_cert_naming_no_file_is_refused_with_the_file_named() {
        let dir = crate::store::tests::ScratchDir::new("config-ca");
        let path = dir.0.join("config.toml");
        std::fs::write(&path, "ca_cert = \"missing-ca.pem\"\n").unwrap();
        let err = Config::load_from(&path).unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            format!(
                "invalid config file {}: ca_cert: no file at {}",
                path.display(),
                dir.0.join("missing-ca.pem").display()
            )
        );
    }

    #[test]
    fn unknown_keys_are_refused() {
        assert!(toml::from_str::<Config>("sever = \"typo\"").is_err());
    }

    #[test]
    fn a_server_no_tunnel_could_reach_is_refused_with_the_file_named() {
        let dir = crate::store::tests::ScratchDir::new("config-server");
        let path = dir.0.join("config.toml");
        std::fs::write(&path, "server = \"https://relay.example\"\n").unwrap();
        assert!(Config::load_from(&path).is_ok());
        std::fs::write(&path, "server = \"junk\"\n").unwrap();
        let err = format!("{:#}", Config::load_from(&path).unwrap_err());
        assert!(
            err.starts_with(&format!(
                "invalid config file {}: server: invalid relay address \"junk\"",
                path.display()
            )),
            "{err}"
        );
    }

    #[test]
    fn a_secret_under_no_providers_name_is_refused() {
        let dir = crate::store::tests::ScratchDir::new("config-secrets");
        let path = dir.0.join("config.toml");
        std::fs::write(&path, "[secrets]\nstripe = \"whsec_x\"\ngithub = \"gh\"\n").unwrap();
        assert_eq!(Config::load_from(&path).unwrap().secrets.len(), 2);
        for typo in ["strpe", "Stripe"] {
            std::fs::write(&path, format!("[secrets]\n{typo} = \"whsec_x\"\n")).unwrap();
            let err = format!("{:#}", Config::load_from(&path).unwrap_err());
            assert!(
                err.contains(&format!(
                    "[secrets] has `{typo}`, which is no provider's name: expected one of stripe, github"
                )),
                "{err}"
            );
        }
    }
}
