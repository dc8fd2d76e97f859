//! A replay report as the history keeps it, read back: the fields a stored
//! run is shown with, named where [`super::report::Report::to_json`] writes
//! them, so that a field renamed there is caught by a test beside it rather
//! than read back as a default. Each field may be missing, as reports
//! stored by earlier versions lack some.

use serde::de::IgnoredAny;
use serde::Deserialize;

/// What a stored report says of its run.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct StoredReport {
    /// The run's warnings.
    pub warnings: Vec<String>,
    /// Whether a probe read the handler's state; missing in reports stored
    /// before the field existed.
    pub side_effects_checked: Option<bool>,
    /// The verdict's word: `idempotent`, `not_idempotent`, `failed`,
    /// `inconclusive`.
    pub verdict: Option<String>,
    /// The distinct answers, in the order the attempts first got them.
    pub answers: Vec<StoredAnswer>,
    /// The attempts the run sent; missing in reports that do not list them.
    pub attempts: Option<Vec<IgnoredAny>>,
    /// A `--fresh` run: a baseline delivery went before the attempts asked for.
    pub fresh: bool,
    /// The URL its attempts went to: the recorded target, or `--target`.
    pub target: Option<String>,
    /// How its attempts differed from the recorded request.
    pub edits: Vec<String>,
}

/// One distinct answer of a stored run.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct StoredAnswer {
    /// The attempts that got it.
    pub attempts: Vec<u32>,
    /// Its status; none when no answer came.
    pub status: Option<u16>,
    /// The start of its body, when it is text.
    pub body: Option<String>,
    /// Why no answer came.
    pub error: Option<String>,
}

impl StoredReport {
    /// Reads `report_json`; a report that cannot be read says nothing.
    pub fn read(report_json: &str) -> Self {
        serde_json::from_str(report_json).unwrap_or_default()
    }
}

/// The attempts of a run of `asked`, as `show` and the TUI show them:
/// `50`, or `9/50` for a run of 50 that saved 9 (stopped part way, or
/// stopped before attempt 1: `0/3`), since the count asked for alone
/// would claim attempts never sent. A `--fresh` run counts its baseline
/// too: `1+4`. `sent` is `None` for a report that does not list them.
pub fn attempts_shown(asked: u32, sent: Option<usize>, fresh: bool) -> String {
    let shown = match fresh {
        true => format!("1+{asked}"),
        false => asked.to_string(),
    };
    match sent {
        Some(sent) if sent < asked as usize + usize::from(fresh) => format!("{sent}/{shown}"),
        _ => shown,
    }
}

/// `, 4 at once` for a run that sent more than one attempt at once, and
/// nothing for one at a time or a `--fresh` burst sent whole (`1+4`
/// already says it): how many went together is part of what a run tried.
pub fn at_once(concurrency: u32, asked: u32, fresh: bool) -> String {
    let whole_burst = fresh && concurrency >= asked;
    match concurrency {
        n if n > 1 && !whole_burst => format!(", {n} at once"),
        _ => String::new(),
    }
}
