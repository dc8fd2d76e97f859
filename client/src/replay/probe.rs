//! Reading the handler's observable state: `--check-cmd` or `--check-url`.
//!
//! Handlers that answer at once and work from a queue change state after
//! they answer, so a read counts only once the state has held still for the
//! settle window.

use std::time::{Duration, Instant};

use super::check_url::UrlProbe;

/// How long one probe read may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// Most bytes of state one read takes. A state is compared whole or not at
/// all: a change past a cut would pass for no change.
pub const STATE_LIMIT: usize = 16 * 1024 * 1024;

/// The settle wait stops after this many settle windows even if the state keeps moving.
pub const SETTLE_CAP_FACTOR: u32 = 10;

/// The settle wait also runs for this many of the slowest read, when that
/// is longer than its windows: a probe slower than them must still get to
/// read a state twice, and once more after the attempt's own change lands.
pub const SETTLE_CAP_READS: u32 = 5;

/// Windows waited after the last attempt before the final read.
pub const FINAL_WAIT_FACTOR: u32 = 3;

/// Windows waited instead when no read has seen the state move: a queue
/// slower than every read would otherwise pass unseen, its work landing
/// after the run, a new event's or a duplicate's of one the handler had.
pub const UNSEEN_FINAL_WAIT_FACTOR: u32 = SETTLE_CAP_FACTOR;

/// What prints the handler's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeSpec {
    /// A shell command run with `sh -c`; its stdout is the state.
    Cmd(String),
    /// A URL fetched with GET; its body is the state.
    Url(String),
}

/// Why the state could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The command could not start.
    #[error("cannot run the check command: {0}")]
    Spawn(std::io::Error),
    /// The command exited with a failure.
    #[error("the check command failed ({status}){}", detail(.stderr))]
    Failed {
        /// Exit status as text.
        status: String,
        /// The last lines of its stderr, or of its stdout when it wrote
        /// nothing on stderr, escaped and cut short (empty when it printed
        /// nothing).
        stderr: String,
    },
    /// The command is empty or blank: it would read an empty state every
    /// time, and any handler would pass (an unset variable in CI, say).
    #[error("the check command is empty: give it one that prints what the handler writes")]
    EmptyCommand,
    /// The URL is not an `http[s]://host:port/path` URL.
    #[error(
        "the check URL \"{0}\" is not one a request can go to: http:// or https://, host and port, then a path \
         with no spaces or control characters (localhost:3000/state and 3000/state are plain HTTP)"
    )]
    BadUrl(String),
    /// The URL carries a user or password, which a probe does not send.
    #[error("the check URL \"{0}\" carries a user or password, which is not sent: give the probe an address without")]
    Credentials(String),
    /// The URL gave no answer at all.
    #[error("the check URL {url} gave no answer: {error}")]
    NoAnswer {
        /// The URL.
        url: String,
        /// Why.
        error: String,
    },
    /// The URL did not answer 2xx.
    #[error("the check URL {url} answered {detail}")]
    Http {
        /// The URL.
        url: String,
        /// Status or error.
        detail: String,
    },
    /// The read took longer than [`PROBE_TIMEOUT`].
    #[error(
        "the state probe gave no answer within {}",
        portpreview_shared::duration::format_duration(PROBE_TIMEOUT)
    )]
    Timeout,
    /// The command exited, but a process it started kept its stdout open
    /// past [`PROBE_TIMEOUT`], so its output never ended.
    #[error(
        "the check command exited, but a process it started in the background kept its output open for {}: \
         send that process's output elsewhere (`server >/dev/null 2>&1 &`)",
        portpreview_shared::duration::format_duration(PROBE_TIMEOUT)
    )]
    OutputHeldOpen,
    /// The state is longer than the probe reads; the run cannot be judged.
    #[error(
        "{probe} gave more than {} of state, too much to compare whole: have it print a summary instead (a row count, a checksum)",
        portpreview_shared::text::size(*limit as u64)
    )]
    TooLarge {
        /// `the check command` or `the check URL <url>`.
        probe: String,
        /// The most bytes it may give.
        limit: usize,
    },
}

/// A probe's output as the state it stands for. Bytes that are not UTF-8
/// are written as `\xNN`, one escape each: replaced by U+FFFD they would
/// all read alike, and a count printed as one raw byte could move without
/// the state changing. A JSON document is rewritten in lines that compare
/// well (see the `json_state` module).
pub fn state_text(bytes: Vec<u8>) -> String {
    let text = utf8_text(bytes);
    super::json_state::lines(&text).unwrap_or(text)
}

/// `bytes` as text, each byte that is not UTF-8 written as `\xNN`.
pub(super) fn utf8_text(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(err) => {
            let bytes = err.into_bytes();
            let mut text = String::with_capacity(bytes.len() + 16);
            for chunk in bytes.utf8_chunks() {
                text.push_str(chunk.valid());
                for b in chunk.invalid() {
                    text.push_str(&format!("\\x{b:02x}"));
                }
            }
            text
        }
    }
}

/// `: <what the command said>`, or nothing when it said nothing.
fn detail(stderr: &str) -> String {
    let stderr = stderr.trim();
    if stderr.is_empty() {
        String::new()
    } else {
        format!(": {stderr}")
    }
}

/// Anything that can read the state; the engine uses [`Probe`], tests a script.
pub trait StateSource {
    /// Reads the state once.
    fn read(&mut self) -> impl std::future::Future<Output = Result<String, ProbeError>>;
}

/// A state read that held still, or the last read when the cap was hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// The state text.
    pub state: String,
    /// False when the state was still changing when the cap ran out.
    pub steady: bool,
    /// The read the state last moved from, when the reads moved: what a
    /// state that never held still is shown moving between.
    pub moved_from: Option<String>,
}

/// A ready probe: a command, or a URL.
pub struct Probe {
    kind: Kind,
}

enum Kind {
    Cmd(String),
    Url(UrlProbe),
}

impl Probe {
    /// Prepares a probe; a blank command or a URL that is not `http://`
    /// fails here.
    pub fn new(spec: &ProbeSpec) -> Result<Self, ProbeError> {
        let kind = match spec {
            ProbeSpec::Cmd(cmd) if cmd.trim().is_empty() => return Err(ProbeError::EmptyCommand),
            ProbeSpec::Cmd(cmd) => Kind::Cmd(cmd.clone()),
            ProbeSpec::Url(url) => Kind::Url(UrlProbe::new(url, STATE_LIMIT)?),
        };
        Ok(Self { kind })
    }
}

impl StateSource for Probe {
    async fn read(&mut self) -> Result<String, ProbeError> {
        match &mut self.kind {
            // The command stops what it started itself when it runs out of time.
            Kind::Cmd(cmd) => super::check_cmd::read(cmd, STATE_LIMIT, PROBE_TIMEOUT).await,
            Kind::Url(url) => tokio::time::timeout(PROBE_TIMEOUT, url.read())
                .await
                .unwrap_or(Err(ProbeError::Timeout)),
        }
    }
}

/// Whether two reads are one state: the same text, or the same lines in
/// another order. A probe that prints rows in no set order (`SELECT`
/// without `ORDER BY`, a set, a hash map) would otherwise never hold still.
/// A nested JSON document is in an order of its own (see `json_state`),
/// and is the same state only as the same text.
pub fn same_state(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    if a.len() != b.len() {
        return false;
    }
    // A JSON document's lines are in an order of their own: in another,
    // a value moved between records (a default card that changed hands).
    if super::json_state::is_nested(a) && super::json_state::is_nested(b) {
        return false;
    }
    fn sorted(text: &str) -> Vec<&str> {
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort_unstable();
        lines
    }
    sorted(a) == sorted(b)
}

/// Reads until the state has not changed for `settle`, or until the cap of
/// [`SETTLE_CAP_FACTOR`] windows, or [`SETTLE_CAP_READS`] of the slowest
/// read, runs out. A read that only reorders the lines of the one before it
/// keeps the earlier text.
pub async fn read_settled<S: StateSource>(source: &mut S, settle: Duration) -> Result<Settled, ProbeError> {
    let started = Instant::now();
    let poll = (settle / 5).clamp(Duration::from_millis(5), Duration::from_millis(200));
    let mut state = source.read().await?;
    let mut slowest = started.elapsed();
    let mut stable_since = Instant::now();
    let mut moved_from = None;
    loop {
        if stable_since.elapsed() >= settle {
            return Ok(Settled {
                state,
                steady: true,
                moved_from,
            });
        }
        if started.elapsed() >= (settle * SETTLE_CAP_FACTOR).max(slowest * SETTLE_CAP_READS) {
            return Ok(Settled {
                state,
                steady: false,
                moved_from,
            });
        }
        tokio::time::sleep(poll).await;
        let reading = Instant::now();
        let next = source.read().await?;
        slowest = slowest.max(reading.elapsed());
        if !same_state(&next, &state) {
            moved_from = Some(std::mem::replace(&mut state, next));
            stable_since = Instant::now();
        }
    }
}

/// After the last attempt: waits `wait` (see [`StateTrace::final_wait`])
/// and reads once more. Returns the new state when it moved.
///
/// [`StateTrace::final_wait`]: super::report::StateTrace::final_wait
pub async fn read_final<S: StateSource>(
    source: &mut S,
    wait: Duration,
    last: &str,
) -> Result<Option<String>, ProbeError> {
    tokio::time::sleep(wait).await;
    let state = source.read().await?;
    Ok((!same_state(&state, last)).then_some(state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_that_are_not_utf8_keep_every_byte_apart() {
        assert_eq!(state_text(b"orders: 3\n".to_vec()), "orders: 3\n");
        let (one, four) = (state_text(vec![0x81]), state_text(vec![0x84]));
        assert_ne!(one, four, "two raw bytes are two states");
        assert_eq!(four, "\\x84");
        assert_eq!(state_text(b"caf\xc3\xa9 \xff".to_vec()), "caf\u{e9} \\xff");
    }

    /// Plays back a list of states, repeating the last one.
    struct Script(Vec<&'static str>, usize);

    impl StateSource for Script {
        async fn read(&mut self) -> Result<String, ProbeError> {
            let at = self.1.min(self.0.len() - 1);
            self.1 += 1;
            Ok(self.0[at].to_string())
        }
    }

    #[tokio::test]
    async fn waits_until_the_state_holds_still() {
        let mut source = Script(vec!["1", "1", "2", "3", "3"], 0);
        let settled = read_settled(&mut source, Duration::from_millis(30)).await.unwrap();
        assert_eq!(
            settled,
            Settled {
                state: "3".into(),
                steady: true,
                moved_from: Some("2".into()),
            }
        );
    }

    #[tokio::test]
    async fn rows_read_in_another_order_are_the_same_state() {
        let mut source = Script(vec!["a 1\nb 2\n", "b 2\na 1\n"], 0);
        let settled = read_settled(&mut source, Duration::from_millis(30)).await.unwrap();
        assert_eq!(settled.state, "a 1\nb 2\n", "the first order is kept");
        assert!(settled.steady);
        let mut source = Script(vec!["b 2\na 1\n"], 0);
        assert_eq!(
            read_final(&mut source, Duration::from_millis(10), "a 1\nb 2\n")
                .await
                .unwrap(),
            None
        );
        assert!(!same_state("a 1\nb 2\n", "a 1\nb 3\n"));
        assert!(!same_state("a\na\nb\n", "a\nb\nb\n"), "a row twice is another state");
        // In a JSON document, lines are placed by what holds them: a value
        // that moved from one record to another is another state.
        let default_on = |pm: &str| {
            state_text(
                format!(
                    r#"{{"methods": {{"pm_1": {{"default": {}}}, "pm_2": {{"default": {}}}}}}}"#,
                    pm == "pm_1",
                    pm == "pm_2"
                )
                .into_bytes(),
            )
        };
        assert!(!same_state(&default_on("pm_1"), &default_on("pm_2")));
        assert!(
            !same_state(&state_text(b"[700, 300]".to_vec()), &state_text(b"[300, 700]".to_vec())),
            "columns"
        );
        assert!(same_state(
            &state_text(br#"{"b": 2, "a": 1}"#.to_vec()),
            &state_text(br#"{"a": 1, "b": 2}"#.to_vec())
        ));
    }

    #[tokio::test]
    async fn gives_up_at_the_cap_when_the_state_keeps_moving() {
        struct Counter(u32);
        impl StateSource for Counter {
            async fn read(&mut self) -> Result<String, ProbeError> {
                self.0 += 1;
                Ok(self.0.to_string())
            }
        }
        let mut source = Counter(0);
        let settled = read_settled(&mut source, Duration::from_millis(20)).await.unwrap();
        assert!(!settled.steady);
        // The last two reads, to show what kept moving.
        let last: u32 = settled.state.parse().unwrap();
        assert_eq!(settled.moved_from, Some((last - 1).to_string()));
    }

    /// A probe slower than ten windows still reads the state twice, and
    /// once more after the attempt's own change lands.
    #[tokio::test]
    async fn a_probe_slower_than_the_cap_still_sees_a_state_hold_still() {
        struct Slow(Script);
        impl StateSource for Slow {
            async fn read(&mut self) -> Result<String, ProbeError> {
                tokio::time::sleep(Duration::from_millis(60)).await;
                self.0.read().await
            }
        }
        for states in [vec!["orders: 12"], vec!["orders: 12", "orders: 13"]] {
            let last = states[states.len() - 1];
            let moved_from = (states.len() > 1).then(|| states[0].to_string());
            let mut source = Slow(Script(states, 0));
            let settled = read_settled(&mut source, Duration::from_millis(5)).await.unwrap();
            assert_eq!(
                settled,
                Settled {
                    state: last.into(),
                    steady: true,
                    moved_from,
                }
            );
        }
    }

    #[tokio::test]
    async fn the_final_read_reports_a_late_change() {
        let mut source = Script(vec!["5", "6"], 1);
        assert_eq!(
            read_final(&mut source, Duration::from_millis(10), "5").await.unwrap(),
            Some("6".into())
        );
        let mut source = Script(vec!["5"], 0);
        assert_eq!(
            read_final(&mut source, Duration::from_millis(10), "5").await.unwrap(),
            None
        );
    }

    #[tokio::test]
    async fn a_command_probe_prints_the_state_and_a_failing_one_is_an_error() {
        let mut probe = Probe::new(&ProbeSpec::Cmd("echo 42".into())).unwrap();
        assert_eq!(probe.read().await.unwrap(), "42\n");
        let mut probe = Probe::new(&ProbeSpec::Cmd("echo oops >&2; exit 3".into())).unwrap();
        let err = probe.read().await.unwrap_err().to_string();
        assert!(err.contains("oops"), "{err}");
    }

    #[tokio::test]
    async fn a_state_is_read_whole_up_to_the_limit_and_refused_beyond_it() {
        let mut probe = Probe::new(&ProbeSpec::Cmd("head -c 1048576 /dev/zero".into())).unwrap();
        assert_eq!(probe.read().await.unwrap().len(), 1024 * 1024);
        let over = format!("head -c {} /dev/zero", STATE_LIMIT + 1);
        let mut probe = Probe::new(&ProbeSpec::Cmd(over)).unwrap();
        let err = probe.read().await.unwrap_err().to_string();
        assert_eq!(
            err,
            "the check command gave more than 16 MiB of state, too much to compare whole: \
             have it print a summary instead (a row count, a checksum)"
        );
    }
}
