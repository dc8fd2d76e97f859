//! What `replay` and `check` share: the flags of a replay run, the
//! progress line and the JUnit file.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use crate::config::SigningSecret;
use crate::replay::{options::parse_settle, Phase, ProbeSpec, Progress, ReplayOptions, MAX_CONCURRENCY, MAX_TIMES};

/// The flags `replay` and `check` share: how to replay and how to judge.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    // Each command's help names its own default: replay sends one, check two.
    /// Attempts to send (1 to 100000).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = |text: &str| count_in(text, MAX_TIMES))]
    pub times: Option<u32>,
    /// Attempts kept in flight at once (1 to 512; default 1, or with --fresh the whole burst up to 512).
    #[arg(long, value_name = "C", allow_negative_numbers = true, value_parser = |text: &str| count_in(text, MAX_CONCURRENCY))]
    pub concurrency: Option<u32>,
    /// Send to this URL instead of the recorded target (`http://host:port` keeps the recorded path).
    #[arg(long, value_name = "URL", value_parser = UrlFlag(parse_target))]
    pub target: Option<String>,
    /// Shell command that prints the handler's state (a row count, a balance, a dump).
    #[arg(long, value_name = "CMD", conflicts_with = "check_url", value_parser = |text: &str| parse_probe(ProbeSpec::Cmd(text.to_owned())))]
    pub check_cmd: Option<String>,
    /// URL whose GET answer is the handler's state (`localhost:3000/state` and `3000/state` are plain HTTP).
    #[arg(long, value_name = "URL", value_parser = UrlFlag(|text| parse_probe(ProbeSpec::Url(text.to_owned()))))]
    pub check_url: Option<String>,
    /// How long the state must hold still to count as read (default 300ms, at most 10m).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = parse_settle)]
    pub settle: Option<Duration>,
    /// How long each attempt may wait for its answer before it counts as failed (default 30s).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::time::parse_wait)]
    pub timeout: Option<Duration>,
    /// Give the event new identities: one delivered once, another as a concurrent burst of --times (2 or more) copies.
    #[arg(long)]
    pub fresh: bool,
    /// Another field to renew beside the provider's own ID, or the identity where it keeps none: a JSON pointer, form:name or header:Name.
    #[arg(long, value_name = "FIELD", requires = "fresh", value_parser = crate::replay::options::parse_fresh_field)]
    pub fresh_field: Option<String>,
    /// The event is new to the handler and does something the probe shows: a run that never sees the state move is inconclusive, not a pass with a warning.
    #[arg(long)]
    pub expect_effect: bool,
    /// Re-sign every attempt with the current time.
    #[arg(long)]
    pub resign: bool,
    /// Signing secret (else, for check, a suite's `secret_env`; then `PORTPREVIEW_SECRET_<PROVIDER>`, `PORTPREVIEW_SECRET` or the config file).
    #[arg(long, value_name = "S", value_parser = crate::cli::parse_signing_secret, allow_hyphen_values = true)]
    pub secret: Option<SigningSecret>,
}

impl RunArgs {
    /// Engine options from these flags; `None` fields fall back to the defaults.
    pub fn options(&self) -> ReplayOptions {
        let defaults = ReplayOptions::default();
        ReplayOptions {
            times: self.times.unwrap_or(defaults.times),
            concurrency: self.concurrency,
            target: self.target.clone(),
            probe: probe_spec(self.check_cmd.as_deref(), self.check_url.as_deref()),
            settle: self.settle.unwrap_or(defaults.settle),
            timeout: self.timeout.unwrap_or(defaults.timeout),
            fresh: self.fresh,
            fresh_field: self.fresh_field.clone(),
            resign: self.resign,
            secret: self.secret.clone(),
            expect_effect: self.expect_effect,
            ..defaults
        }
    }
}

impl RunArgs {
    /// Warnings for flags given that the run will not read: `probed` says
    /// whether any attempt's state is read, `times` how many attempts a
    /// run sends. The user gave them to do something, and would otherwise
    /// take their run for one that did it.
    pub fn unused(&self, probed: bool, times: u32) -> Vec<&'static str> {
        let mut unused = Vec::new();
        if self.settle.is_some() && !probed {
            unused.push(
                "warning: --settle is not used: it is how long the state a probe reads must hold still, and no \
                 --check-url or --check-cmd reads one\n",
            );
        }
        if self.concurrency.is_some_and(|c| c > 1) && times < 2 {
            unused.push("warning: --concurrency is not used: one attempt is sent; give --times 2 or more\n");
        }
        unused
    }
}

/// A whole number from 1 to `most`. clap's own reasons for a number it
/// cannot read are Rust's ("invalid digit found in string").
fn count_in(text: &str, most: u32) -> Result<u32, String> {
    match text.trim().parse::<i64>() {
        Ok(n) if (1..=i64::from(most)).contains(&n) => Ok(n as u32),
        Ok(n) => Err(format!("{n} is not in 1..={most}")),
        Err(_) => Err(format!("expected a whole number from 1 to {most}")),
    }
}

/// The parser of a flag that takes a URL, `check`ed by the function it
/// holds. Its refusal quotes the value with any user and password hidden:
/// clap's own would repeat a password given in the URL, to the terminal
/// and to CI's log.
#[derive(Clone)]
struct UrlFlag(fn(&str) -> Result<String, String>);

impl clap::builder::TypedValueParser for UrlFlag {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        let refused = |text: &str, reason: &str| {
            // Named as clap names it: `'--target <URL>'`.
            let flag = arg.and_then(clap::Arg::get_long).unwrap_or_default();
            let placeholder = arg
                .and_then(clap::Arg::get_value_names)
                .and_then(<[clap::builder::Str]>::first)
                .map_or_else(String::new, |name| format!(" <{name}>"));
            let shown = crate::userinfo::hidden(text);
            let message = format!("invalid value '{shown}' for '--{flag}{placeholder}': {reason}\n");
            clap::Error::raw(clap::error::ErrorKind::ValueValidation, message).with_cmd(cmd)
        };
        let Some(text) = value.to_str() else {
            return Err(refused(&value.to_string_lossy(), "not UTF-8"));
        };
        (self.0)(text).map_err(|reason| refused(text, &reason))
    }
}

/// The parser of `--target`, for the commands that send to one.
pub(super) fn target_flag() -> impl clap::builder::TypedValueParser<Value = String> {
    UrlFlag(parse_target)
}

/// `--target`, checked before anything is read or sent.
fn parse_target(text: &str) -> Result<String, String> {
    crate::replay::plan::parse_target_flag(text)
        .map(|_| text.to_owned())
        .map_err(str::to_owned)
}

/// `--check-cmd` or `--check-url`, refused as a bad flag when no probe
/// could be made of it (a blank command, a URL that is not http).
fn parse_probe(spec: ProbeSpec) -> Result<String, String> {
    crate::replay::probe::Probe::new(&spec).map_err(|err| err.to_string())?;
    Ok(match spec {
        ProbeSpec::Cmd(text) | ProbeSpec::Url(text) => text,
    })
}

/// Said when `--secret` is given and nothing signs: the user likely meant
/// it to sign.
pub const SECRET_UNUSED: &str =
    "warning: --secret signs only with --resign or --fresh; the attempts carry the recorded signature\n";

/// The probe a pair of `--check-cmd` / `--check-url` values asks for.
pub fn probe_spec(cmd: Option<&str>, url: Option<&str>) -> Option<ProbeSpec> {
    match (cmd, url) {
        (Some(cmd), _) => Some(ProbeSpec::Cmd(cmd.to_string())),
        (None, Some(url)) => Some(ProbeSpec::Url(url.to_string())),
        (None, None) => None,
    }
}

/// A progress line on stderr, only when stderr is a terminal that takes
/// the sequence erasing it.
pub fn progress_printer() -> impl Fn(Progress) + Sync {
    let enabled = crate::takes_escapes(&std::io::stderr());
    move |p: Progress| {
        if !enabled {
            return;
        }
        let what = match p.phase {
            Phase::Sending => "sending",
            Phase::Settling => "waiting for the state to settle",
            Phase::FinalWait => "checking the state stays put",
        };
        let line = format!("  {}/{} attempts · {what}…", p.done, p.total);
        // A line the terminal wraps is erased only in its last row, and
        // each one after it would leave the rest behind.
        let columns = crossterm::terminal::size().map_or(usize::MAX, |(columns, _)| usize::from(columns));
        let fitted: String = line.chars().take(columns.saturating_sub(1)).collect();
        crate::to_stderr(format_args!("\r\x1b[2K{fitted}"));
    }
}

/// Erases the progress line.
pub fn clear_progress() {
    if crate::takes_escapes(&std::io::stderr()) {
        crate::to_stderr(format_args!("\r\x1b[2K"));
    }
}

/// Fails when the JUnit report at `junit` would replace one of `inputs`,
/// the fixtures and suites the run reads: a mistyped `--junit` must not
/// cost a committed fixture.
pub fn refuse_to_overwrite_an_input<'a>(
    junit: &Path,
    inputs: impl IntoIterator<Item = &'a Path>,
) -> anyhow::Result<()> {
    if !junit.exists() {
        // Not there yet: it replaces nothing.
        return Ok(());
    }
    // One file however it is reached: another spelling, a symbolic or a hard link.
    if let Some(input) = inputs.into_iter().find(|input| super::guard::same_file(input, junit)) {
        let what = if crate::suite::Suite::is_suite_path(input) {
            "a suite"
        } else if input.extension().is_some_and(|e| e == "json") {
            "a fixture"
        } else {
            "a file"
        };
        // The input is named only when it was written another way.
        let overwritten = match input.as_os_str() == junit.as_os_str() {
            true => format!("{what} this run reads"),
            false => format!("{}, {what} this run reads", input.display()),
        };
        anyhow::bail!(
            "--junit {} would overwrite {overwritten}: write the report to another file",
            junit.display()
        );
    }
    Ok(())
}

/// Writes a JUnit report to `path`, whole. Its folders were made as
/// the path was parsed. A FIFO gets it once something reads it, and
/// ctrl-c or SIGTERM ends that wait.
pub async fn write_junit(path: &Path, xml: &str) -> anyhow::Result<()> {
    let written = async {
        #[cfg(unix)]
        if crate::whole_file::is_fifo(path) {
            let mut fifo = loop {
                match crate::whole_file::fifo_once_read(path)? {
                    Some(fifo) => break fifo,
                    None => tokio::time::sleep(READER_POLL).await,
                }
            };
            return std::io::Write::write_all(&mut fifo, xml.as_bytes());
        }
        crate::whole_file::write(
            path,
            xml.as_bytes(),
            crate::whole_file::Existing::Replace,
            crate::whole_file::Access::Usual,
        )
    };
    tokio::select! {
        written = written => written.with_context(|| format!("cannot write {}", path.display())),
        () = portpreview_server::signal::shutdown_signal() => anyhow::bail!(
            "stopped waiting for something to read {}: the JUnit report was not written",
            path.display()
        ),
    }
}

/// How often a FIFO is looked at for a reader.
#[cfg(unix)]
const READER_POLL: std::time::Duration = std::time::Duration::from_millis(50);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_over_an_input_is_refused_naming_what_it_would_overwrite() {
        let dir = crate::store::tests::ScratchDir::new("junit-input");
        let fixture = dir.0.join("j.json");
        let suite = dir.0.join("suite.toml");
        std::fs::write(&fixture, "{}").unwrap();
        std::fs::write(&suite, "").unwrap();
        let err = refuse_to_overwrite_an_input(&fixture, [fixture.as_path()]).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "--junit {} would overwrite a fixture this run reads: write the report to another file",
                fixture.display()
            )
        );
        let other_spelling = dir.0.join(".").join("suite.toml");
        let err = refuse_to_overwrite_an_input(&other_spelling, [suite.as_path()]).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "--junit {} would overwrite {}, a suite this run reads: write the report to another file",
                other_spelling.display(),
                suite.display()
            )
        );
        assert!(refuse_to_overwrite_an_input(&dir.0.join("report.xml"), [fixture.as_path()]).is_ok());
        let linked = dir.0.join("hard.xml");
        std::fs::hard_link(&fixture, &linked).unwrap();
        let err = refuse_to_overwrite_an_input(&linked, [fixture.as_path()]).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("would overwrite {}, a fixture", fixture.display())),
            "a hard link is the fixture under another name: {err}"
        );
    }
}
