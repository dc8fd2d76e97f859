//! What a replay run is asked to do.

use std::time::Duration;

use super::probe::{ProbeSpec, SETTLE_CAP_FACTOR};
use crate::config::SigningSecret;
use crate::time::{is_bare_zero, nonzero_reading};

/// Default `--settle`: how long the state must hold still to count as read.
pub const DEFAULT_SETTLE: Duration = Duration::from_millis(300);

/// Default `--timeout`: how long one attempt may wait for its answer. A
/// provider gives up about as soon (Stripe ~30 s, the relay 30 s), and a
/// handler stuck on a duplicate must end the run with a verdict, not hang it.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Most attempts one run sends: far more than any provider retries, few
/// enough that a slip of the keyboard cannot keep a handler busy for days.
pub const MAX_TIMES: u32 = 100_000;

/// Most attempts in flight at once. Each holds a connection, and so a file
/// descriptor, and a process is commonly allowed 1024 of them.
pub const MAX_CONCURRENCY: u32 = 512;

/// Settings of one replay run; `Default` is one attempt, one at a time,
/// 300 ms settle, 30 s per attempt.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// Attempts to send (1 to [`MAX_TIMES`]).
    pub times: u32,
    /// Attempts kept in flight at once (1 to [`MAX_CONCURRENCY`]); `None`
    /// when not asked for: one at a time, or the whole `--fresh` burst.
    pub concurrency: Option<u32>,
    /// `--target`: `scheme://host:port` keeps the recorded path, one with a path replaces it.
    pub target: Option<String>,
    /// What reads the handler's state, if anything.
    pub probe: Option<ProbeSpec>,
    /// How long the state must hold still to count as read.
    pub settle: Duration,
    /// How long one attempt may wait for its whole answer before it counts as failed.
    pub timeout: Duration,
    /// Give the event new identities: a baseline and a concurrent burst.
    pub fresh: bool,
    /// JSON pointer of the body field that holds the identity, when the provider is unknown.
    pub fresh_field: Option<String>,
    /// Re-sign every attempt with the current time.
    pub resign: bool,
    /// Signing secret (`--secret`, the environment or the config file).
    pub secret: Option<SigningSecret>,
    /// Headers to set, replacing recorded ones of the same name.
    pub add_headers: Vec<(String, String)>,
    /// Header names to leave out.
    pub drop_headers: Vec<String>,
    /// A body to send instead of the recorded one.
    pub body: Option<Vec<u8>>,
    /// Why the handler is known to have had the event already, if it is:
    /// attempt 1 changing nothing is then what an idempotent handler does,
    /// not a sign that the reads came before its work.
    pub had_before: Option<HadBefore>,
    /// The event is new to the handler and does something the probe
    /// shows: a run whose reads never saw the state move is inconclusive,
    /// not a pass with a warning.
    pub expect_effect: bool,
}

/// How the handler is known to have had the event before a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HadBefore {
    /// The delivery replayed was answered 2xx when it came; it holds of a
    /// replay of the recorded request, unedited, to where it went.
    WhenRecorded,
    /// An earlier fixture of the same `check`, named here, sent the same
    /// event to the same handler and got a 2xx: the provider's retry
    /// exported beside its first delivery.
    EarlierFixture(String),
    /// The history holds this delivery of the event, sent to the same
    /// handler (`host:port` and path) and answered 2xx: a provider's retry
    /// of it, or an attempt of an earlier replay.
    InHistory(i64),
}

impl Default for ReplayOptions {
    fn default() -> Self {
        Self {
            times: 1,
            concurrency: None,
            target: None,
            probe: None,
            settle: DEFAULT_SETTLE,
            timeout: DEFAULT_TIMEOUT,
            fresh: false,
            fresh_field: None,
            resign: false,
            secret: None,
            add_headers: Vec::new(),
            drop_headers: Vec::new(),
            body: None,
            had_before: None,
            expect_effect: false,
        }
    }
}

impl ReplayOptions {
    /// Attempts in flight at once after attempt 1 of a replay: as asked,
    /// else one at a time, and never more than the attempts after the first
    /// (so the report does not claim load that was never sent).
    pub fn width(&self) -> u32 {
        self.concurrency.unwrap_or(1).min(self.times.saturating_sub(1)).max(1)
    }

    /// Attempts in flight at once for the `--fresh` burst: all of them unless
    /// `--concurrency` asked for fewer (1 included), and never more than
    /// [`MAX_CONCURRENCY`].
    pub fn burst_width(&self) -> u32 {
        self.concurrency
            .unwrap_or(self.times)
            .min(self.times)
            .min(MAX_CONCURRENCY)
    }

    /// Attempts in flight at once at most: the burst's for `--fresh`, else
    /// those after attempt 1.
    pub fn most_at_once(&self) -> u32 {
        if self.fresh {
            self.burst_width()
        } else {
            self.width()
        }
    }
}

/// Longest `--settle` taken: each read of the state may wait ten of them.
const MAX_SETTLE: Duration = Duration::from_secs(600);

/// Shortest `--settle` taken: a probe read takes longer than less, so the
/// state could never be seen holding still that long.
const MIN_SETTLE: Duration = Duration::from_millis(1);

/// Parses a `--settle` window. Zero is refused: the state would be read
/// once, right after the answer, and a handler working from a queue would
/// pass for idempotent before its work was done.
pub fn parse_settle(text: &str) -> Result<Duration, String> {
    // A settle window is milliseconds or seconds, never days.
    if let Some(why) = crate::time::no_unit(text, &["ms", "s"], MAX_SETTLE).filter(|_| !is_bare_zero(text)) {
        return Err(why);
    }
    let duration = nonzero_reading(text, MAX_SETTLE)?;
    if duration.is_zero() {
        return Err(
            "no time at all: work a handler does after answering would go unseen; give a duration like 300ms or 2s"
                .to_string(),
        );
    }
    if duration < MIN_SETTLE {
        return Err(
            "shorter than 1ms, less than one read of the probe takes; give a duration like 300ms or 2s".to_string(),
        );
    }
    if duration > MAX_SETTLE {
        return Err(format!(
            "longer than 10m: each read of the state waits up to {SETTLE_CAP_FACTOR} settle windows for it to hold still"
        ));
    }
    Ok(duration)
}

/// `--fresh-field` (and a suite's `fresh_field`) as written: a JSON
/// pointer, `form:name` or `header:Name`.
pub fn parse_fresh_field(text: &str) -> Result<String, String> {
    match portpreview_shared::provider::fresh::check_field(text) {
        Ok(()) => Ok(text.to_owned()),
        Err(_) => Err("expected a JSON pointer such as /data/id, form:name or header:Name".to_owned()),
    }
}

/// Parses a `--header 'Name: value'` argument.
pub fn parse_header_arg(arg: &str) -> Result<(String, String), String> {
    let (name, value) = arg
        .split_once(':')
        .ok_or_else(|| format!("\"{arg}\" is not 'Name: value'"))?;
    let name = parse_header_name(name)?;
    let value = value.trim();
    if http::HeaderValue::from_str(value).is_err() {
        return Err(format!("the value of {name} holds characters a header cannot carry"));
    }
    let name = name.to_ascii_lowercase();
    match set_by_replay(&name) {
        Some(why) => Err(why),
        None => Ok((name, value.to_string())),
    }
}

/// Why a header `name` (lowercase) is no flag's to set or drop: a replay
/// sets it itself, and taking the flag and sending something else would
/// be a silent surprise.
fn set_by_replay(name: &str) -> Option<String> {
    match name {
        "host" => Some("Host is set from the target: aim the replay with --target".into()),
        "content-length" | "transfer-encoding" => {
            Some(format!("{name} is set from the body: change the body with --body-file"))
        }
        _ => None,
    }
}

/// A header name to leave out (`--drop-header`), refused for those a
/// replay sets itself.
pub fn parse_dropped_header(text: &str) -> Result<String, String> {
    let name = parse_header_name(text)?;
    match set_by_replay(&name.to_ascii_lowercase()) {
        Some(why) => Err(why),
        None => Ok(name),
    }
}

/// A header name (that of a `--header` or a `--drop-header`), trimmed.
fn parse_header_name(text: &str) -> Result<String, String> {
    let name = text.trim();
    match http::HeaderName::from_bytes(name.as_bytes()) {
        Ok(_) => Ok(name.to_owned()),
        Err(_) => Err(format!("\"{name}\" is not a header name")),
    }
}

/// Parses a report file path (`--junit`), refusing one that cannot be
/// written before any attempt is sent, not after a run whose side effects
/// happened. A file already there is opened without being changed; a new
/// one is made and removed again. Missing folders are made, as a CI job
/// names `reports/junit.xml` in a checkout that has no `reports/`.
pub fn parse_report_path(text: &str) -> Result<std::path::PathBuf, String> {
    // `export -o -` means stdout; here stdout carries the verdict, and a
    // file named `-` made without a word is found by nobody. An empty name
    // (`--junit "$REPORT"` unset) is no file either.
    if text == "-" || text.trim().is_empty() {
        return Err("JUnit is written to a file, as stdout carries the report: name one (junit.xml)".into());
    }
    let path = std::path::PathBuf::from(text);
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty() && !dir.is_dir()) {
        crate::private_file::create_folders(dir)
            .map_err(|err| format!("cannot make the folder {}: {err}", dir.display()))?;
    }
    // A FIFO or a device is not opened: opening a FIFO would hand its
    // reader an empty report, and wait until one came. Nor is a standard
    // stream, written through when the report comes.
    let probed = |meta: std::fs::Metadata| meta.is_file() || meta.is_dir();
    if crate::whole_file::standard_stream(&path).is_some() || std::fs::metadata(&path).is_ok_and(|m| !probed(m)) {
        return Ok(path);
    }
    let writable = if path.exists() {
        std::fs::OpenOptions::new().write(true).open(&path).map(drop)
    } else {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|_| std::fs::remove_file(&path))
    };
    writable.map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_arguments_split_at_the_first_colon() {
        assert_eq!(
            parse_header_arg("X-Test:  a:b ").unwrap(),
            ("x-test".into(), "a:b".into())
        );
        assert!(parse_header_arg("no colon").is_err());
        assert!(parse_header_arg("bad name: x").is_err());
        for set_by_the_replay in ["Host: evil.example", "Content-Length: 5", "transfer-encoding: chunked"] {
            assert!(parse_header_arg(set_by_the_replay).is_err(), "{set_by_the_replay}");
        }
    }

    /// A header the replay sets itself is no more droppable than settable:
    /// `--drop-header host` was taken, and Host sent all the same.
    #[test]
    fn headers_the_replay_sets_cannot_be_dropped() {
        assert_eq!(parse_dropped_header(" X-Trace-Id "), Ok("X-Trace-Id".into()));
        assert_eq!(
            parse_dropped_header("Host"),
            Err("Host is set from the target: aim the replay with --target".into())
        );
        assert_eq!(
            parse_dropped_header("content-length"),
            Err("content-length is set from the body: change the body with --body-file".into())
        );
        assert!(parse_dropped_header("bad name").is_err());
    }

    #[test]
    fn settle_windows_are_more_than_nothing_and_at_most_ten_minutes() {
        assert_eq!(parse_settle("300ms"), Ok(DEFAULT_SETTLE));
        assert!(parse_settle("0s").unwrap_err().contains("no time at all"));
        assert!(parse_settle("0").unwrap_err().contains("no time at all"));
        assert_eq!(parse_settle("5"), Err("5 has no unit: write 5ms or 5s".to_string()));
        assert_eq!(parse_settle("700"), Err("700 has no unit: write 700ms".to_string()));
        assert!(parse_settle("1d").unwrap_err().contains("longer than 10m"));
        assert!(parse_settle("500us").unwrap_err().contains("shorter than 1ms"));
        assert_eq!(parse_settle("1ms"), Ok(Duration::from_millis(1)));
        assert_eq!(parse_settle("10m"), Ok(Duration::from_secs(600)));
        assert!(parse_settle("1M")
            .unwrap_err()
            .contains("ms: write minutes and milliseconds in lowercase"));
    }

    #[test]
    fn every_duration_flag_refuses_a_bad_one_in_the_same_words() {
        let expected = Err("expected a number and a unit, like 300ms, 1s or 2m".to_string());
        for bad in ["2x", "soon"] {
            assert_eq!(parse_settle(bad), expected, "{bad}");
            assert_eq!(crate::time::parse_wait(bad), expected, "{bad}");
            assert_eq!(crate::time::parse_duration(bad), expected, "{bad}");
        }
        let negative = Err("durations are never negative: write 1s".to_string());
        assert_eq!(parse_settle("-1s"), negative);
        assert_eq!(crate::time::parse_wait("-1s"), negative);
        assert_eq!(crate::time::parse_duration("-1s"), negative);
    }

    #[test]
    fn a_report_path_gets_its_folders_up_front_unless_a_file_is_in_the_way() {
        assert!(parse_report_path("report.xml").is_ok());
        let top = std::env::temp_dir().join(format!("portpreview-report-{}", std::process::id()));
        let report = top.join("reports/ci/report.xml");
        assert_eq!(parse_report_path(report.to_str().unwrap()), Ok(report.clone()));
        assert!(top.join("reports/ci").is_dir());
        assert!(!report.exists(), "the probe leaves no file");
        std::fs::write(top.join("file"), "").unwrap();
        let under_a_file = parse_report_path(top.join("file/report.xml").to_str().unwrap());
        assert!(under_a_file.is_err_and(|e| e.ends_with("is a file, not a folder")));
        std::fs::remove_dir_all(&top).unwrap();
        for unnamed in ["-", "", " "] {
            assert!(
                parse_report_path(unnamed).is_err_and(|e| e.contains("name one")),
                "{unnamed:?}"
            );
        }
    }

    #[test]
    fn attempts_after_the_first_are_as_wide_as_asked_and_as_there_are() {
        let width = |times, concurrency| {
            ReplayOptions {
                times,
                concurrency,
                ..ReplayOptions::default()
            }
            .width()
        };
        assert_eq!(width(10, None), 1);
        assert_eq!(width(10, Some(4)), 4);
        assert_eq!(width(5, Some(10)), 4, "attempt 1 goes alone");
        assert_eq!(width(2, Some(10)), 1);
        assert_eq!(width(1, Some(10)), 1);
    }

    #[test]
    fn the_fresh_burst_sends_everything_at_once_unless_limited() {
        let opts = ReplayOptions {
            times: 10,
            ..ReplayOptions::default()
        };
        assert_eq!(opts.burst_width(), 10);
        let opts = ReplayOptions {
            times: 10,
            concurrency: Some(4),
            ..ReplayOptions::default()
        };
        assert_eq!(opts.burst_width(), 4);
        let opts = ReplayOptions {
            times: 10,
            concurrency: Some(1),
            ..ReplayOptions::default()
        };
        assert_eq!(opts.burst_width(), 1, "one at a time, when asked for");
        let opts = ReplayOptions {
            times: MAX_TIMES,
            ..ReplayOptions::default()
        };
        assert_eq!(opts.burst_width(), MAX_CONCURRENCY);
    }
}
