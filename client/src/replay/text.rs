//! The human report: checks with ✓/✗, the attempts table, the state, advice.

use std::fmt::Write;

use portpreview_shared::provider::Provider;
use portpreview_shared::sanitize::{escape_multiline, escape_str};

use super::answers::{alone, distinct_answers, pair_to_show, side_by_side};
use super::report::{Report, Signed};
use super::verdict::{aligned, role_label};
use crate::render::mask::shown_path;

/// Rows of the attempts table shown before the middle is elided.
const TABLE_HEAD: usize = 20;
/// Rows shown after the elision.
const TABLE_TAIL: usize = 5;
/// Answers listed on a line each, past the two shown side by side.
const OTHER_ANSWERS_SHOWN: usize = 5;

impl Report {
    /// The report as the terminal shows it; every untrusted string escaped.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        // An event no provider was recognised in is named by its key alone.
        let whose = self.provider.as_deref().map_or_else(String::new, |p| format!("{p} "));
        let mode = if self.fresh && self.concurrency < self.times {
            format!(
                "--fresh: 1 baseline + a burst of {}, {} at a time",
                self.times, self.concurrency
            )
        } else if self.fresh {
            format!("--fresh: 1 baseline + a burst of {}", self.times)
        } else {
            format!(
                "{} attempt{}, up to {} at once",
                self.times,
                if self.times == 1 { "" } else { "s" },
                self.concurrency
            )
        };
        // A request with nothing to key it by (a bodiless GET) is no event.
        let what = match self.event_key.is_empty() {
            true => "a request".to_owned(),
            false => format!("{whose}event {}", escape_str(&self.event_key)),
        };
        let _ = writeln!(
            out,
            "Replay of {what} → {} ({mode})",
            escape_str(&shown_path(&self.target, false))
        );
        if let Some(signed) = &self.signed {
            // A URL's credentials are masked here as in the line above.
            let shown = Signed {
                url: signed.url.as_deref().map(|url| shown_path(url, false).into_owned()),
                ..signed.clone()
            };
            let _ = writeln!(out, "{}", escape_str(&shown.line()));
        }
        if !self.edits.is_empty() {
            let _ = writeln!(out, "Edited: {}", escape_str(&self.edits.join("; ")));
        }
        out.push('\n');
        let width = self.checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
        for check in &self.checks {
            let mark = if check.passed { '✓' } else { '✗' };
            let _ = writeln!(out, "  {mark} {:<width$}  {}", check.name, escape_str(&check.detail));
        }
        out.push('\n');
        self.render_attempts(&mut out);
        self.render_recorded(&mut out);
        if let Some(state) = &self.state {
            let (before, after) = aligned(&state.before, state.after());
            let _ = writeln!(out, "\nState before: {before}");
            // No step read it after (nothing was sent, or the run was
            // stopped first): "after" would repeat "before" as if nothing moved.
            if !state.steps.is_empty() {
                let _ = writeln!(out, "State after:  {after}");
            }
            if let Some(moved) = &state.moved_to {
                let _ = writeln!(out, "State later:  {}", aligned(state.after(), moved).1);
            }
        }
        let groups = distinct_answers(&self.attempts);
        // What the handler said: a refusal says why only in its body, and
        // a replay sent once is often sent to see just that.
        if let [only] = groups.as_slice() {
            if only.status.is_some() && !only.body.is_empty() {
                out.push_str(match self.attempts.len() {
                    1 => "\nThe answer:\n",
                    _ => "\nEvery attempt got this answer:\n",
                });
                out.push_str(&alone(only, 78));
            }
        }
        if let Some((left, right)) = pair_to_show(&groups) {
            out.push_str("\nAnswers differ between attempts:\n");
            out.push_str(&side_by_side(left, right, 38));
            let others: Vec<_> = (groups.iter())
                .filter(|g| !std::ptr::eq(*g, left) && !std::ptr::eq(*g, right))
                .collect();
            for other in others.iter().take(OTHER_ANSWERS_SHOWN) {
                for (i, line) in other.in_brief(74).iter().enumerate() {
                    let _ = writeln!(out, "  {} {line}", if i == 0 { "and" } else { "   " });
                }
            }
            if others.len() > OTHER_ANSWERS_SHOWN {
                let more = others.len() - OTHER_ANSWERS_SHOWN;
                let _ = writeln!(
                    out,
                    "  … and {more} more distinct {}: --json lists every answer",
                    if more == 1 { "answer" } else { "answers" }
                );
            }
        }
        for warning in &self.warnings {
            let _ = writeln!(out, "\n! {}", escape_multiline(warning));
        }
        if let (Some(window), Some(provider)) = (&self.retry_window, &self.provider) {
            // A provider that sends nothing again on a schedule (GitLab,
            // Discord) sets no time a dedup store must cover.
            let retried = Provider::from_name(provider)
                .and_then(Provider::retry_window_duration)
                .is_some();
            let keep = if retried {
                " A dedup store must keep event keys longer than that."
            } else {
                ""
            };
            let _ = writeln!(out, "\n{provider} retries: {}.{keep}", escape_str(window));
        }
        let _ = writeln!(out, "\n{}", self.summary_line());
        out
    }

    /// Where the attempts were kept, so that one can be opened whole.
    fn render_recorded(&self, out: &mut String) {
        // Stored in one transaction, they hold IDs in a row.
        let _ = match self.recorded_as.as_slice() {
            [] => Ok(()),
            [only] => writeln!(out, "\nKept in the history as #{only}: portpreview show {only}"),
            [first, .., last] => writeln!(
                out,
                "\nKept in the history as #{first} to #{last}: portpreview show {first} opens the first"
            ),
        };
    }

    fn render_attempts(&self, out: &mut String) {
        // A run stopped before any answer has no rows: no table either.
        if self.attempts.is_empty() {
            return;
        }
        let (role_head, role_width) = if self.fresh { ("role", 8) } else { ("", 0) };
        let _ = writeln!(
            out,
            "  {:>5}  {role_head:<role_width$}  {:>6}  {:>10}  state",
            "#", "status", "time"
        );
        let total = self.attempts.len();
        for (i, attempt) in self.attempts.iter().enumerate() {
            if total > TABLE_HEAD + TABLE_TAIL && i == TABLE_HEAD {
                let _ = writeln!(out, "  {:>5}  … {} more", "", total - TABLE_HEAD - TABLE_TAIL);
            }
            if total > TABLE_HEAD + TABLE_TAIL && i >= TABLE_HEAD && i < total - TABLE_TAIL {
                continue;
            }
            let status = attempt
                .answer
                .status
                .map_or_else(|| "error".to_string(), |s| s.to_string());
            // The state is read once per step (attempt 1, a batch, the
            // burst), so it is shown once, on the step's last attempt. An
            // attempt after the probe failed was read in no step at all.
            let ends_step =
                (self.attempts.get(i + 1)).is_none_or(|next| next.step != attempt.step || next.state_changed.is_none());
            let state = match attempt.state_changed {
                Some(true) if ends_step => "changed",
                Some(false) if ends_step => "unchanged",
                _ => "",
            };
            let _ = write!(
                out,
                "  {:>5}  {:<role_width$}  {:>6}  {:>8.1}ms  {state}",
                attempt.n,
                role_label(attempt.role),
                status,
                attempt.duration_ms()
            );
            if let Some(error) = &attempt.answer.error {
                let _ = write!(out, "  {}", escape_str(error));
            }
            out.push('\n');
        }
    }
}
