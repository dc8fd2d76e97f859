//! Suite files for `portpreview check`: per-fixture settings in TOML.
//!
//! ```toml
//! [[fixture]]
//! path = "fixtures/stripe-payment.json"
//! target = "http://127.0.0.1:3000"
//! times = 5
//! check_url = "http://127.0.0.1:3000/state"
//! timeout = "10s"
//! secret_env = "STRIPE_WEBHOOK_SECRET"
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use portpreview_shared::toml_file::parse_toml;
use serde::Deserialize;

use crate::replay::{MAX_CONCURRENCY, MAX_TIMES};
use crate::time::parse_wait;

/// A suite file: a list of fixtures and how to check each.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    /// The fixtures, in order.
    #[serde(default)]
    pub fixture: Vec<SuiteFixture>,
}

/// One `[[fixture]]` entry; unset fields come from the command line or the defaults.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteFixture {
    /// Fixture file or directory of fixtures, relative to the suite file.
    pub path: PathBuf,
    /// Where to send it.
    pub target: Option<String>,
    /// Attempts.
    pub times: Option<u32>,
    /// Attempts in flight at once.
    pub concurrency: Option<u32>,
    /// URL that prints the handler's state.
    pub check_url: Option<String>,
    /// Shell command that prints the handler's state.
    pub check_cmd: Option<String>,
    /// Settle window, e.g. "300ms".
    #[serde(default, deserialize_with = "duration_text")]
    pub settle: Option<String>,
    /// How long each attempt may wait for its answer, e.g. "10s".
    #[serde(default, deserialize_with = "duration_text")]
    pub timeout: Option<String>,
    /// Send fresh identities (baseline + burst).
    pub fresh: Option<bool>,
    /// Where the identity lives when the provider is unknown.
    pub fresh_field: Option<String>,
    /// Re-sign every attempt.
    pub resign: Option<bool>,
    /// The event is new to the handler and does something the probe shows.
    pub expect_effect: Option<bool>,
    /// Environment variable holding the signing secret.
    pub secret_env: Option<String>,
}

/// A duration field's text. A bare number (`settle = 5`) is refused with
/// what to write instead, where TOML alone would only say a string was
/// expected.
fn duration_text<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Field {
        Text(String),
        Number(f64),
    }
    match Field::deserialize(deserializer) {
        Ok(Field::Text(text)) => Ok(Some(text)),
        Ok(Field::Number(number)) => Err(serde::de::Error::custom(format_args!(
            "{number} has no unit: write a duration in quotes, like \"300ms\", \"1s\" or \"2m\""
        ))),
        Err(_) => Err(serde::de::Error::custom(
            "expected a duration in quotes, like \"300ms\", \"1s\" or \"2m\"",
        )),
    }
}

impl SuiteFixture {
    /// The settle window, parsed.
    pub fn settle(&self) -> anyhow::Result<Option<Duration>> {
        self.settle
            .as_deref()
            .map(|text| {
                crate::replay::options::parse_settle(text)
                    .map_err(|reason| anyhow::anyhow!("settle = \"{text}\": {reason}"))
            })
            .transpose()
    }

    /// The per-attempt timeout, parsed.
    pub fn timeout(&self) -> anyhow::Result<Option<Duration>> {
        self.timeout
            .as_deref()
            .map(|text| parse_wait(text).map_err(|err| anyhow::anyhow!("timeout = \"{text}\": {err}")))
            .transpose()
    }
}

impl Suite {
    /// True when `path` names a suite file rather than a fixture.
    pub fn is_suite_path(path: &Path) -> bool {
        path.extension().is_some_and(|ext| ext.eq_ignore_ascii_case("toml"))
    }

    /// Whether a TOML text is a suite: it has a `fixture` list, however it
    /// is written. One that does not parse is taken for a suite when a line
    /// opens a `[[fixture]]` table, so a suite with a mistake is told apart
    /// from some other TOML (a `Cargo.toml`) too.
    pub fn lists_fixtures(text: &str) -> bool {
        match toml::from_str::<toml::Table>(text) {
            Ok(table) => table.contains_key("fixture"),
            Err(_) => text.lines().any(|line| {
                let code = line.split('#').next().unwrap_or_default();
                code.replace(char::is_whitespace, "") == "[[fixture]]"
            }),
        }
    }

    /// Reads a suite file; fixture paths come back relative to the current directory.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = crate::input_file::read_file(path, crate::input_file::MAX_SETTINGS_FILE)
            .map(crate::input_file::without_bom)
            .and_then(crate::input_file::into_text)
            .with_context(|| format!("cannot read suite {}", path.display()))?;
        let mut suite = Self::parse(&text).with_context(|| format!("invalid suite {}", path.display()))?;
        let base = path.parent().unwrap_or(Path::new(""));
        for fixture in &mut suite.fixture {
            fixture.path = base.join(&fixture.path);
        }
        Ok(suite)
    }

    /// Parses suite text and checks each entry.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        // `[fixture]` (or `fixture = { … }`) is one table where a list is
        // read: TOML's words for it ("expected a sequence") do not say
        // what to write.
        let single = |line: &str| {
            let line = line.split('#').next().unwrap_or_default().replace(' ', "");
            line == "[fixture]" || line.starts_with("fixture={")
        };
        let suite: Suite = parse_toml(text).map_err(|err| match text.lines().any(single) {
            true => anyhow::anyhow!("{err}: each fixture is written [[fixture]], with two brackets"),
            false => err.into(),
        })?;
        for (i, fixture) in suite.fixture.iter().enumerate() {
            let which = || format!("fixture {} ({})", i + 1, fixture.path.display());
            if fixture.check_url.is_some() && fixture.check_cmd.is_some() {
                anyhow::bail!("{}: set check_url or check_cmd, not both", which());
            }
            if fixture.times.is_some_and(|n| !(1..=MAX_TIMES).contains(&n)) {
                anyhow::bail!("{}: times must be from 1 to {MAX_TIMES}", which());
            }
            if fixture.concurrency.is_some_and(|n| !(1..=MAX_CONCURRENCY).contains(&n)) {
                anyhow::bail!("{}: concurrency must be from 1 to {MAX_CONCURRENCY}", which());
            }
            fixture.settle().with_context(which)?;
            fixture.timeout().with_context(which)?;
            if let Some(var) = &fixture.secret_env {
                if var.trim().is_empty() || var.contains(['=', '\0']) {
                    anyhow::bail!(
                        "{}: secret_env = \"{}\" names no environment variable",
                        which(),
                        var.escape_debug()
                    );
                }
            }
            if let Some(field) = &fixture.fresh_field {
                crate::replay::options::parse_fresh_field(field)
                    .map_err(|why| anyhow::anyhow!("fresh_field = \"{}\": {why}", field.escape_debug()))
                    .with_context(which)?;
            }
            // Told here, in the suite's words, not later as a bad --target.
            if let Some(target) = &fixture.target {
                crate::target::Target::parse(target)
                    .map_err(|err| anyhow::anyhow!(err.named("target =")))
                    .with_context(which)?;
            }
        }
        Ok(suite)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suite_is_known_by_its_fixture_list_however_written() {
        assert!(Suite::lists_fixtures("[[fixture]]\npath = \"a.json\"\n"));
        assert!(Suite::lists_fixtures("[[ fixture ]] # stripe\npath = \"a.json\"\n"));
        assert!(Suite::lists_fixtures("fixture = [{ path = \"a.json\" }]\n"));
        assert!(
            Suite::lists_fixtures("[[fixture]]\npath = \"a.json\nbroken\n"),
            "a suite with a mistake"
        );
        assert!(!Suite::lists_fixtures("[package]\nname = \"handler\"\n"));
        assert!(!Suite::lists_fixtures("not toml at all ["));
    }

    #[test]
    fn a_secret_env_naming_no_variable_is_refused_by_name() {
        for (var, shown) in [("", ""), ("  ", "  "), ("A=B", "A=B")] {
            let err = Suite::parse(&format!(
                "[[fixture]]\npath = \"a.json\"\nresign = true\nsecret_env = \"{var}\"\n"
            ))
            .unwrap_err()
            .to_string();
            assert_eq!(
                err,
                format!("fixture 1 (a.json): secret_env = \"{shown}\" names no environment variable")
            );
        }
    }

    #[test]
    fn a_suite_lists_fixtures_with_their_settings() {
        let suite = Suite::parse(
            "[[fixture]]\npath = \"a.json\"\ntimes = 3\nsettle = \"100ms\"\ntimeout = \"2s\"\ncheck_url = \"http://127.0.0.1:1/state\"\n\
             [[fixture]]\npath = \"dir\"\nfresh = true\nsecret_env = \"S\"\n",
        )
        .unwrap();
        assert_eq!(suite.fixture.len(), 2);
        assert_eq!(suite.fixture[0].settle().unwrap(), Some(Duration::from_millis(100)));
        assert_eq!(suite.fixture[0].timeout().unwrap(), Some(Duration::from_secs(2)));
        assert_eq!(suite.fixture[1].timeout().unwrap(), None);
        assert_eq!(suite.fixture[1].fresh, Some(true));
    }

    #[test]
    fn a_fixture_written_as_one_table_is_told_the_brackets_a_list_takes() {
        for text in ["[fixture]\npath = \"a.json\"\n", "fixture = { path = \"a.json\" }\n"] {
            let err = Suite::parse(text).unwrap_err().to_string();
            assert!(
                err.ends_with(": each fixture is written [[fixture]], with two brackets"),
                "{err}"
            );
        }
    }

    #[test]
    fn unknown_keys_and_contradictions_are_refused() {
        assert!(Suite::parse("[[fixture]]\npath = \"a\"\ntimez = 3\n").is_err());
        assert!(Suite::parse("[[fixture]]\npath = \"a\"\ncheck_url = \"x\"\ncheck_cmd = \"y\"\n").is_err());
        let err = Suite::parse("[[fixture]]\npath = \"a\"\nsettle = \"soon\"\n").unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            "fixture 1 (a): settle = \"soon\": expected a number and a unit, like 300ms, 1s or 2m"
        );
        assert!(Suite::parse("[[fixture]]\npath = \"a\"\ntimeout = \"0s\"\n").is_err());
        let err = Suite::parse("[[fixture]]\npath = \"a\"\nsettle = 5\n").unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            "line 3, column 10: 5 has no unit: write a duration in quotes, like \"300ms\", \"1s\" or \"2m\""
        );
        let err = Suite::parse("[[fixture]]\npath = \"a\"\ntimeout = true\n").unwrap_err();
        assert!(format!("{err:#}").contains("expected a duration in quotes"), "{err:#}");
        assert!(Suite::parse("[[fixture]]\npath = \"a\"\ntimes = 0\n").is_err());
        let err = Suite::parse("[[fixture]]\npath = \"a\"\ntarget = \"not a url\"\n").unwrap_err();
        assert!(
            format!("{err:#}").starts_with("fixture 1 (a): invalid target = \"not a url\": expected http://"),
            "{err:#}"
        );
        assert!(Suite::parse("[[fixture]]\npath = \"a\"\ntimes = 4294967295\n").is_err());
        assert!(Suite::parse("[[fixture]]\npath = \"a\"\nconcurrency = 100000\n").is_err());
    }

    #[test]
    fn fixture_paths_are_relative_to_the_suite_file() {
        let dir = std::env::temp_dir().join(format!("pp-suite-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("suite.toml");
        std::fs::write(&file, "[[fixture]]\npath = \"fixtures/a.json\"\n").unwrap();
        let suite = Suite::load(&file).unwrap();
        assert_eq!(suite.fixture[0].path, dir.join("fixtures/a.json"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
