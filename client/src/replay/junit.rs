//! JUnit XML: one `<testcase>` per replayed fixture, for CI dashboards.

use std::fmt::Write;

use portpreview_shared::sanitize::escape_str;

use super::report::Report;

/// How one fixture ended.
#[derive(Debug)]
pub enum CaseResult<'a> {
    /// A verdict was reached.
    Verdict(&'a Report),
    /// The run could not happen (exit 2), with the reason.
    Error(String),
    /// The run was never started (ctrl-c stopped what came before), with the reason.
    Skipped(String),
}

/// A whole JUnit document for a list of named cases.
pub fn document(suite: &str, cases: &[(String, CaseResult<'_>)]) -> String {
    let failures = cases
        .iter()
        .filter(|(_, r)| matches!(r, CaseResult::Verdict(report) if report.idempotent != Some(true)))
        .count();
    let errors = cases.iter().filter(|(_, r)| matches!(r, CaseResult::Error(_))).count();
    // Counted only when there are some, so a whole run's file is as before.
    let skipped = match cases
        .iter()
        .filter(|(_, r)| matches!(r, CaseResult::Skipped(_)))
        .count()
    {
        0 => String::new(),
        n => format!(" skipped=\"{n}\""),
    };
    let seconds: f64 = cases.iter().map(|(_, r)| case_seconds(r)).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"portpreview\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\"{skipped} time=\"{seconds:.3}\">",
        cases.len()
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\"{skipped} time=\"{seconds:.3}\">",
        escape(&escape_str(suite)),
        cases.len()
    );
    for (name, result) in cases {
        let _ = write!(
            out,
            "    <testcase classname=\"portpreview.idempotency\" name=\"{}\" time=\"{:.3}\"",
            escape(&escape_str(name)),
            case_seconds(result)
        );
        match result {
            CaseResult::Verdict(report) if report.idempotent == Some(true) => {
                out.push_str(">\n");
                let _ = writeln!(out, "      <system-out>{}</system-out>", escape(&report.summary_line()));
            }
            CaseResult::Verdict(report) => {
                let failed: Vec<String> = report
                    .failed_checks()
                    .map(|c| format!("{}: {}", c.name, c.detail))
                    .collect();
                let message = format!("{}: {}", report.verdict(), failed.join("; "));
                let _ = writeln!(
                    out,
                    ">\n      <failure message=\"{}\" type=\"{}\">{}</failure>",
                    escape(&message),
                    report.verdict(),
                    escape(&report.render_text())
                );
            }
            CaseResult::Error(reason) => {
                let _ = writeln!(
                    out,
                    ">\n      <error message=\"{}\" type=\"could_not_run\"/>",
                    escape(reason)
                );
            }
            CaseResult::Skipped(reason) => {
                let _ = writeln!(out, ">\n      <skipped message=\"{}\"/>", escape(reason));
            }
        }
        out.push_str("    </testcase>\n");
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// The run's wall time: CI dashboards add these up to show how long a job
/// spent, and settle windows are most of it.
fn case_seconds(result: &CaseResult<'_>) -> f64 {
    match result {
        CaseResult::Verdict(report) => report.elapsed.as_secs_f64(),
        CaseResult::Error(_) | CaseResult::Skipped(_) => 0.0,
    }
}

/// The suite name of a `replay`'s JUnit file.
const REPLAY_SUITE: &str = "portpreview replay";

impl Report {
    /// A JUnit document holding this one run as a test case named `name`.
    pub fn to_junit(&self, name: &str) -> String {
        document(REPLAY_SUITE, &[(name.to_string(), CaseResult::Verdict(self))])
    }
}

/// A JUnit document holding one replay that could not run (exit 2) as an
/// error case named `name`, as `check` writes a fixture that could not: a
/// CI job that uploads the file then shows why instead of finding nothing.
pub fn replay_error(name: &str, reason: &str) -> String {
    document(
        REPLAY_SUITE,
        &[(name.to_string(), CaseResult::Error(reason.to_string()))],
    )
}

/// Escapes text for XML attributes and content; drops characters XML 1.0 forbids.
///
/// A test case's name comes from an event key or a fixture's file name,
/// both untrusted, and CI pages and consoles show it as it stands: names
/// go through [`escape_str`] first, as in every other output, so
/// a bidi override or an 8-bit escape (U+009B) is shown, not obeyed.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' | '\r' => out.push(' '),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_specials_and_control_characters_are_escaped() {
        assert_eq!(escape("a<b>&\"c'\u{1b}"), "a&lt;b&gt;&amp;&quot;c&apos;\u{fffd}");
    }

    #[test]
    fn a_case_name_shows_hidden_and_control_characters_escaped() {
        let xml = replay_error("#11 k\u{202e}live\u{9b}31m", "down");
        assert!(xml.contains(r##"name="#11 k\u{202e}live\u{9b}31m""##), "{xml}");
        assert!(!xml.contains('\u{202e}') && !xml.contains('\u{9b}'), "{xml}");
    }

    #[test]
    fn an_error_case_is_counted_as_an_error() {
        let xml = document(
            "s",
            &[("fixtures/a.json".into(), CaseResult::Error("nothing answers".into()))],
        );
        assert!(xml.contains("errors=\"1\""), "{xml}");
        assert!(xml.contains("<error message=\"nothing answers\""), "{xml}");
        assert!(!xml.contains("skipped="), "{xml}");
    }

    #[test]
    fn a_case_never_started_is_skipped_and_counted_so() {
        let xml = document(
            "s",
            &[
                ("a.json".into(), CaseResult::Error("nothing answers".into())),
                ("b.json".into(), CaseResult::Skipped("not run".into())),
            ],
        );
        assert!(
            xml.contains("tests=\"2\" failures=\"0\" errors=\"1\" skipped=\"1\""),
            "{xml}"
        );
        assert!(xml.contains("<skipped message=\"not run\"/>"), "{xml}");
    }
}
