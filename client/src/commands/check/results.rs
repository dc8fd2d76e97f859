//! What each fixture of a `check` came to, and the run's report of them:
//! text or JSON on stdout, JUnit in a file, and the exit code.

use std::io::Write;

use portpreview_shared::sanitize::escape_str;
use serde_json::json;

use crate::render;
use crate::replay::junit::{self, CaseResult};
use crate::replay::Report;

/// Why a fixture was never started.
const NOT_RUN: &str = "not run: the check was stopped (ctrl-c or SIGTERM) before this fixture started";

/// How one fixture ended.
pub enum Outcome {
    /// A verdict, or what ran of one when ctrl-c stopped it part way.
    Ran(Box<Report>),
    /// It could not run (exit 2), with the reason.
    Error(String),
    /// ctrl-c came before it started.
    NotRun,
}

impl Outcome {
    /// `idempotent`, `not_idempotent`, `failed`, `inconclusive`,
    /// `could_not_run` (the JUnit file's error type too) or `not_run`.
    fn verdict(&self) -> &'static str {
        match self {
            Outcome::Ran(report) => report.verdict(),
            Outcome::Error(_) => "could_not_run",
            Outcome::NotRun => "not_run",
        }
    }
}

/// Each fixture's name and how it ended, in the order they were checked.
pub type Results = [(String, Outcome)];

/// 130 when ctrl-c stopped the check, as for a process ctrl-c ends; else 2
/// when a fixture could not run, 1 when any is not idempotent, 0 otherwise.
pub fn exit_code(results: &Results) -> u8 {
    let stopped = results.iter().any(|(_, outcome)| match outcome {
        Outcome::Ran(report) => report.interrupted(),
        Outcome::NotRun => true,
        Outcome::Error(_) => false,
    });
    if stopped {
        130
    } else if results.iter().any(|(_, o)| matches!(o, Outcome::Error(_))) {
        2
    } else if results
        .iter()
        .any(|(_, o)| matches!(o, Outcome::Ran(report) if report.exit_code() != 0))
    {
        1
    } else {
        0
    }
}

/// The JUnit document: one test case per fixture, those never started skipped.
pub fn junit(results: &Results) -> String {
    let cases: Vec<(String, CaseResult<'_>)> = results
        .iter()
        .map(|(name, outcome)| {
            let case = match outcome {
                Outcome::Ran(report) => CaseResult::Verdict(report),
                Outcome::Error(reason) => CaseResult::Error(reason.clone()),
                Outcome::NotRun => CaseResult::Skipped(NOT_RUN.to_string()),
            };
            (name.clone(), case)
        })
        .collect();
    junit::document("portpreview check", &cases)
}

/// Prints a report per fixture and the counts, as text or as one JSON object.
pub fn print(results: &Results, json: bool, code: u8) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let count = |verdict: &str| results.iter().filter(|(_, o)| o.verdict() == verdict).count();
    // Passed on their answers alone: a handler that credits every duplicate
    // passes so too, which a tally read on its own must not hide.
    let passed_so = |alone: fn(&Report) -> bool| {
        (results.iter())
            .filter(|(_, o)| matches!(o, Outcome::Ran(report) if report.idempotent == Some(true) && alone(report)))
            .count()
    };
    let unprobed = passed_so(|report| report.state.is_none());
    // One attempt has no duplicate to compare: passed, but proved nothing.
    let single = passed_so(|report| report.state.is_some() && report.attempts.len() == 1);
    if json {
        let fixtures: Vec<serde_json::Value> = results
            .iter()
            .map(|(name, outcome)| match outcome {
                Outcome::Ran(report) => {
                    let mut value = report.to_shown_json();
                    value["fixture"] = name.clone().into();
                    value
                }
                Outcome::Error(reason) => {
                    json!({"fixture": name, "verdict": "could_not_run", "idempotent": false, "error": reason})
                }
                Outcome::NotRun => json!({"fixture": name, "verdict": "not_run", "idempotent": false}),
            })
            .collect();
        let all = json!({
            "idempotent": code == 0,
            "exit_code": code,
            "counts": {
                "idempotent": count("idempotent"),
                "side_effects_not_checked": unprobed,
                "one_attempt_only": single,
                "not_idempotent": count("not_idempotent"),
                "failed": count("failed"),
                "inconclusive": count("inconclusive"),
                "could_not_run": count("could_not_run"),
                "not_run": count("not_run"),
            },
            "fixtures": fixtures,
        });
        writeln!(out, "{}", render::json::to_terminal_text(&all))?;
        return Ok(());
    }
    for (name, outcome) in results {
        writeln!(out, "━━ {}", escape_str(name))?;
        match outcome {
            Outcome::Ran(report) => writeln!(out, "{}", report.render_text())?,
            Outcome::Error(reason) => writeln!(out, "✗ could not run: {}\n", escape_str(reason))?,
            Outcome::NotRun => writeln!(out, "– {NOT_RUN}\n")?,
        }
    }
    // Fixtures left out by ctrl-c are counted only when there are some,
    // so a whole run's line stays as scripts know it.
    let not_run = match count("not_run") {
        0 => String::new(),
        n => format!(", {n} not run"),
    };
    let mut caveats = Vec::new();
    if unprobed > 0 {
        let answers = if unprobed == 1 { "its answers" } else { "their answers" };
        caveats.push(format!("{unprobed} on {answers} alone: side effects not checked"));
    }
    if single > 0 {
        caveats.push(format!("{single} on one attempt: no duplicate sent"));
    }
    let unchecked = if caveats.is_empty() {
        String::new()
    } else {
        format!(" ({})", caveats.join("; "))
    };
    // After dozens of reports, the ones to look at, named again.
    let not_passed = not_passed(results);
    if results.len() > 1 && !not_passed.is_empty() {
        writeln!(out, "Not passed:\n{}", not_passed.join("\n"))?;
    }
    writeln!(
        out,
        "{} fixture{}: {} idempotent{unchecked}, {} not idempotent, {} failed, {} inconclusive, {} could not run{not_run}",
        results.len(),
        if results.len() == 1 { "" } else { "s" },
        count("idempotent"),
        count("not_idempotent"),
        count("failed"),
        count("inconclusive"),
        count("could_not_run"),
    )?;
    Ok(())
}

/// A line for each fixture that ran and did not pass, or could not run:
/// its name and its one-line verdict.
fn not_passed(results: &Results) -> Vec<String> {
    (results.iter())
        .filter_map(|(name, outcome)| {
            let said = match outcome {
                Outcome::Ran(report) if report.idempotent == Some(true) => return None,
                Outcome::Ran(report) => report.summary_line(),
                Outcome::Error(reason) => format!("✗ could not run: {reason}"),
                Outcome::NotRun => return None,
            };
            Some(format!("  {}: {}", escape_str(name), escape_str(&said)))
        })
        .collect()
}
