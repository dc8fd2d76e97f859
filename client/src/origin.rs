//! Where a setting came from, so that a refusal can name it. A variable
//! exported in a shell profile long ago, or a config file forgotten, is
//! otherwise a puzzle: the user typed neither, and the message quotes a
//! value they never gave.

use std::fmt;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::ArgMatches;

/// Where one setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Typed on the command line, as this flag.
    Flag(&'static str),
    /// This environment variable.
    Env(&'static str),
    /// The config file at this path.
    ConfigFile(PathBuf),
    /// PortPreview's own default.
    Default,
}

impl Origin {
    /// The origin of a setting that a flag, its variable or the config
    /// file can give, in that order of precedence.
    pub fn of(flag: &'static str, env: &'static str, from_env: &[&str], given: bool, in_config: bool) -> Self {
        match (given, from_env.contains(&env), in_config) {
            (true, true, _) => Origin::Env(env),
            (true, false, _) => Origin::Flag(flag),
            (false, _, true) => crate::config::config_path().map_or(Origin::Default, Origin::ConfigFile),
            (false, _, false) => Origin::Default,
        }
    }

    /// Adds to `err`, about `what`, where it came from, when the user did
    /// not type it on this command line: that is what they will not think
    /// to check.
    pub fn explain(&self, err: anyhow::Error, what: &str) -> anyhow::Error {
        match self {
            Origin::Env(_) | Origin::ConfigFile(_) => {
                let line = format!("{}; {what} comes from {self}", crate::error_text(&err));
                // As context, not a new error: what the error is stays
                // known to callers that look (a broken pipe, say).
                err.context(line)
            }
            Origin::Flag(_) | Origin::Default => err,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Flag(flag) => f.write_str(flag),
            Origin::Env(name) => f.write_str(name),
            Origin::ConfigFile(path) => write!(f, "the config file {}", path.display()),
            Origin::Default => f.write_str("the default"),
        }
    }
}

/// The variables, of `names` (`(argument id, variable)`), that gave their
/// argument its value in `matches`.
pub fn from_env(matches: &ArgMatches, names: &[(&str, &'static str)]) -> Vec<&'static str> {
    names
        .iter()
        .filter(|(id, _)| matches.value_source(id) == Some(ValueSource::EnvVariable))
        .map(|&(_, env)| env)
        .collect()
}

/// Whether an error's line names `path`: only then does saying where the
/// path came from help.
pub fn names_path(err: &anyhow::Error, path: &Path) -> bool {
    crate::error_text(err).contains(&path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flags_value_is_its_own_but_its_variables_is_named() {
        let env = ["PORTPREVIEW_SERVER"];
        assert_eq!(
            Origin::of("--server", "PORTPREVIEW_SERVER", &env, true, true),
            Origin::Env("PORTPREVIEW_SERVER")
        );
        assert_eq!(
            Origin::of("--server", "PORTPREVIEW_SERVER", &[], true, true),
            Origin::Flag("--server")
        );
        assert_eq!(
            Origin::of("--server", "PORTPREVIEW_SERVER", &[], false, false),
            Origin::Default
        );
    }

    #[test]
    fn only_what_the_user_did_not_type_is_explained() {
        let err = || anyhow::anyhow!("cannot reach the relay: ws://old.example");
        let told = Origin::Env("PORTPREVIEW_SERVER").explain(err(), "the relay address");
        assert_eq!(
            crate::error_text(&told),
            "cannot reach the relay: ws://old.example; the relay address comes from PORTPREVIEW_SERVER"
        );
        let told = Origin::ConfigFile(PathBuf::from("/home/me/.config/portpreview/config.toml"))
            .explain(err(), "the relay address");
        assert!(crate::error_text(&told)
            .ends_with("; the relay address comes from the config file /home/me/.config/portpreview/config.toml"));
        let typed = Origin::Flag("--server").explain(err(), "the relay address");
        assert_eq!(crate::error_text(&typed), "cannot reach the relay: ws://old.example");
    }

    #[test]
    fn an_explained_error_is_still_the_error_it_was() {
        let io = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "pipe");
        let told = Origin::Env("PORTPREVIEW_DB").explain(io.into(), "the path");
        assert!(told.downcast_ref::<std::io::Error>().is_some());
    }
}
