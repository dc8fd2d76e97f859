//! The result of a replay run: checks, attempts, warnings, and the verdict.

use portpreview_shared::text::counted;
use serde_json::{json, Value};

use bytes::Bytes;

use super::attempt::Answer;
use crate::store::NewDelivery;

/// Why an attempt was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The recorded event, replayed as it was.
    Replay,
    /// A new identity delivered once, for `--fresh` to compare against.
    Baseline,
    /// One of the concurrent deliveries of another new identity (`--fresh`).
    Burst,
}

impl Role {
    /// The name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Replay => "replay",
            Role::Baseline => "baseline",
            Role::Burst => "burst",
        }
    }
}

/// One request sent and what came back.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// 1-based position in the run.
    pub n: u32,
    /// Why it was sent.
    pub role: Role,
    /// The request as sent (`replay_of` unset) but for its body, which is
    /// [`Attempt::body`].
    pub request: NewDelivery,
    /// The body as sent, shared with every attempt that sent the same
    /// bytes: a run of a thousand attempts holds a 20 MiB body once.
    pub body: Bytes,
    /// The answer or the error.
    pub answer: Answer,
    /// Index of the probe read taken after this attempt's step (attempt 1 or a batch).
    pub step: usize,
    /// Whether the state moved across this attempt's step; `None` without a probe.
    pub state_changed: Option<bool>,
}

impl Attempt {
    /// The request exactly as sent, body included, ready to be recorded.
    pub fn request_as_sent(&self) -> NewDelivery {
        NewDelivery {
            request_body: self.body.to_vec(),
            ..self.request.clone()
        }
    }

    /// True when the handler answered 2xx.
    pub fn succeeded(&self) -> bool {
        matches!(self.answer.status, Some(200..=299)) && self.answer.error.is_none()
    }

    /// Duration in milliseconds, as reports show it.
    pub fn duration_ms(&self) -> f64 {
        self.answer.duration.as_secs_f64() * 1000.0
    }
}

/// One line of the verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// Stable identifier, e.g. `answers_2xx`.
    pub name: &'static str,
    /// Whether it passed.
    pub passed: bool,
    /// What was seen, in a webhook developer's words.
    pub detail: String,
}

/// What the probe read across the run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StateTrace {
    /// Before the first attempt.
    pub before: String,
    /// After each step (attempt 1, then each batch; for `--fresh`: baseline, burst).
    pub steps: Vec<String>,
    /// The state read the final settle windows after the last step (see
    /// [`StateTrace::final_wait`]), when it had moved.
    pub moved_to: Option<String>,
    /// False when some read never held still within the cap.
    pub steady: bool,
}

impl StateTrace {
    /// How long after the last step the final read comes: longer when no
    /// read has seen the state move (see
    /// [`UNSEEN_FINAL_WAIT_FACTOR`](super::probe::UNSEEN_FINAL_WAIT_FACTOR)).
    pub fn final_wait(&self, settle: std::time::Duration) -> std::time::Duration {
        match self.steps_unmoved() {
            true => settle * super::probe::UNSEEN_FINAL_WAIT_FACTOR,
            false => settle * super::probe::FINAL_WAIT_FACTOR,
        }
    }

    /// No read after a step saw the state apart from where it began.
    fn steps_unmoved(&self) -> bool {
        self.steps.iter().all(|step| *step == self.before)
    }

    /// No read saw the state move at all, the final one's included.
    pub fn never_moved(&self) -> bool {
        self.moved_to.is_none() && self.steps_unmoved()
    }

    /// The state the verdict rests on at the end.
    pub fn after(&self) -> &str {
        self.steps.last().map_or(self.before.as_str(), String::as_str)
    }
}

/// Everything a replay run found out.
#[derive(Debug, Clone)]
pub struct Report {
    /// `Some(true)` idempotent, `Some(false)` not, `None` inconclusive.
    pub idempotent: Option<bool>,
    /// The checks, in order.
    pub checks: Vec<Check>,
    /// Every attempt sent.
    pub attempts: Vec<Attempt>,
    /// Things worth knowing that do not fail the verdict.
    pub warnings: Vec<String>,
    /// Provider name, when known.
    pub provider: Option<String>,
    /// Event key of the replayed delivery.
    pub event_key: String,
    /// How long the provider keeps retrying, so a dedup store's TTL can be sized.
    pub retry_window: Option<String>,
    /// Where the attempts went, e.g. `http://127.0.0.1:3000/hooks`.
    pub target: String,
    /// Attempt count asked for.
    pub times: u32,
    /// Attempts in flight at once.
    pub concurrency: u32,
    /// Whether `--fresh` identities were used.
    pub fresh: bool,
    /// How each attempt was signed anew, when it was.
    pub signed: Option<Signed>,
    /// The event type the attempts carried, when they named one.
    pub event_type: Option<String>,
    /// How the attempts differed from the recorded request (`--body-file`,
    /// `--header`, `--drop-header`), each in a few words.
    pub edits: Vec<String>,
    /// Probe reads, when a probe was given.
    pub state: Option<StateTrace>,
    /// Wall time of the whole run: attempts, settle windows and the final wait.
    pub elapsed: std::time::Duration,
    /// The IDs the attempts were kept under in the history, in their
    /// order; empty until the run is kept (a fixture's never is).
    pub recorded_as: Vec<i64>,
}

/// How a run signed its attempts anew, for the report to say: a refusal
/// is read against the secret and the URL it names.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Signed {
    /// The provider signed for.
    pub provider: String,
    /// Where the secret came from: `--secret`, a variable, the config file.
    pub secret_from: String,
    /// The URL signed, for a provider that signs it (Square, Twilio).
    pub url: Option<String>,
    /// The secret is sent as it is, as a GitLab hook's X-Gitlab-Token.
    pub token: bool,
}

impl Signed {
    /// The line the report gives it.
    pub fn line(&self) -> String {
        let Signed {
            provider,
            secret_from,
            url,
            token,
        } = self;
        match (token, url) {
            (true, _) => format!("Each attempt sends the {provider} secret from {secret_from} as its token"),
            (false, Some(url)) => {
                format!("Each attempt signed anew with the {provider} secret from {secret_from}, over {url}")
            }
            (false, None) => format!("Each attempt signed anew with the {provider} secret from {secret_from}"),
        }
    }
}

impl Report {
    /// 0 idempotent, 1 not idempotent, failed or inconclusive; 130, as
    /// for a process ctrl-c ends, when the user stopped the run.
    pub fn exit_code(&self) -> u8 {
        match self.idempotent {
            _ if self.interrupted() => 130,
            Some(true) => 0,
            _ => 1,
        }
    }

    /// Whether the user stopped the run before its end.
    pub fn interrupted(&self) -> bool {
        self.checks.iter().any(|c| c.name == super::verdict::RUN_COMPLETED)
    }

    /// True when the first attempt itself got no 2xx (the handler failed the
    /// delivery before any duplicate was sent), or when the attempts that
    /// failed never reached the handler (it went away during the run), and
    /// nothing else convicts it: the run says nothing about idempotency and
    /// must not be worded as if it did.
    pub fn failed(&self) -> bool {
        let first_failed = self.attempts.first().is_some_and(|first| !first.succeeded());
        (first_failed || super::verdict::went_away(&self.attempts)) && self.convicting().next().is_none()
    }

    /// The failed checks that show the handler is not idempotent, beside
    /// the answers: a duplicate that repeated its side effect, a burst that
    /// acted twice.
    fn convicting(&self) -> impl Iterator<Item = &Check> {
        use super::verdict::{makes_inconclusive, ANSWERS_2XX};
        self.failed_checks()
            .filter(|c| c.name != ANSWERS_2XX && !makes_inconclusive(c.name))
    }

    /// `idempotent`, `not_idempotent`, `failed` or `inconclusive`.
    pub fn verdict(&self) -> &'static str {
        match self.idempotent {
            Some(true) => "idempotent",
            Some(false) if self.failed() => "failed",
            Some(false) => "not_idempotent",
            None => "inconclusive",
        }
    }

    /// The checks that failed.
    pub fn failed_checks(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.passed)
    }

    /// One line for lists and the TUI, e.g. "✗ not idempotent: attempts 2–3 answered 409".
    pub fn summary_line(&self) -> String {
        // An open verdict names what left it open, not a check it overrode.
        let first_failure = match self.idempotent {
            None => self
                .failed_checks()
                .find(|c| super::verdict::makes_inconclusive(c.name)),
            // A verdict reached names what reached it, not a read that
            // failed beside it; a side effect repeated first, as the worse
            // of two failures (a handler that credits, then crashes on the
            // duplicate).
            _ => (self.convicting().next())
                .or_else(|| {
                    self.failed_checks()
                        .find(|c| !super::verdict::makes_inconclusive(c.name))
                })
                .or_else(|| self.failed_checks().next()),
        }
        .map(|c| c.detail.as_str());
        let line = match (self.idempotent, first_failure) {
            (Some(true), _) if self.state.is_none() => {
                let answered = all_attempts(self.attempts.len(), "every one of");
                format!("✓ {answered} answered 2xx (side effects not checked)")
            }
            (Some(true), _) if self.attempts.len() == 1 => {
                "✓ 1 attempt answered 2xx, with nothing to compare it to: pass --times 2 or more".to_string()
            }
            // The baseline is a different event, not an attempt at this one:
            // counting it would claim a duplicate more than was sent.
            (Some(true), _) if self.fresh => format!(
                "✓ idempotent: a burst of {} of one new event acted once",
                counted(self.times as usize, "copy", "copies")
            ),
            (Some(true), _) => format!(
                "✓ idempotent over {}",
                counted(self.attempts.len(), "attempt", "attempts")
            ),
            (Some(false), Some(detail)) if self.failed() => format!("✗ failed: {detail}"),
            (Some(false), Some(detail)) => format!("✗ not idempotent: {detail}"),
            (Some(false), None) => "✗ not idempotent".to_string(),
            (None, Some(detail)) => format!("? inconclusive: {detail}"),
            (None, None) => "? inconclusive".to_string(),
        };
        portpreview_shared::sanitize::escape_str(&line).into_owned()
    }

    /// The object `--json` prints: the stored one, with the target's query
    /// secrets masked as the text report masks them, since a report on
    /// stdout ends up in CI logs.
    pub fn to_shown_json(&self) -> Value {
        let mut value = self.to_json();
        value["target"] = crate::render::mask::shown_path(&self.target, false).into();
        value
    }

    /// The object stored with the run; `show` masks it as it prints.
    pub fn to_json(&self) -> Value {
        let checks: Vec<Value> = self
            .checks
            .iter()
            .map(|c| json!({"name": c.name, "passed": c.passed, "detail": c.detail}))
            .collect();
        let attempts: Vec<Value> = self
            .attempts
            .iter()
            .zip(self.recorded_as.iter().map(Some).chain(std::iter::repeat(None)))
            .map(|(a, id)| {
                json!({
                    "n": a.n,
                    "id": id,
                    "role": a.role.as_str(),
                    "status": a.answer.status,
                    "duration_ms": crate::time::round_ms(a.duration_ms()),
                    "state_changed": a.state_changed,
                    "event_key": a.request.event_key,
                    "error": a.answer.error,
                })
            })
            .collect();
        let state = self.state.as_ref().map(|s| {
            json!({
                "before": s.before,
                "after": s.after(),
                "steps": s.steps,
                "moved_to": s.moved_to,
                "steady": s.steady,
            })
        });
        json!({
            "idempotent": self.idempotent == Some(true),
            "verdict": self.verdict(),
            "summary": self.summary_line(),
            "checks": checks,
            "attempts": attempts,
            "warnings": self.warnings,
            // The replay command names the delivery replayed from the
            // history; a fixture's run has none.
            "delivery_id": null,
            "provider": self.provider,
            "event_type": self.event_type,
            "event_key": self.event_key,
            "retry_window": self.retry_window,
            "target": self.target,
            "times": self.times,
            "concurrency": self.concurrency,
            "fresh": self.fresh,
            "edits": self.edits,
            "signed": self.signed,
            "elapsed_ms": (self.elapsed.as_secs_f64() * 1_000_000.0).round() / 1000.0,
            // Read before a run that then sent nothing, the state was
            // checked against no attempt.
            "side_effects_checked": self.state.is_some() && !self.attempts.is_empty(),
            "first_attempt_changed_state": self.first_attempt_changed_state(),
            "state": state,
            "answers": super::answers::distinct_answers(&self.attempts).iter().map(|g| g.to_json()).collect::<Vec<_>>(),
        })
    }

    /// Whether attempt 1 changed the state (the event was new to the
    /// handler); `None` when the state was not read through the run.
    pub fn first_attempt_changed_state(&self) -> Option<bool> {
        self.state.as_ref()?;
        self.attempts.first().and_then(|a| a.state_changed)
    }
}

/// Most ranges a list of attempts writes out: every other one of 1,000
/// attempts would be a line of 2,500 characters in the summary, the
/// terminal and a JUnit message.
const SHOWN_RANGES: usize = 8;

/// Writes attempt numbers compactly: `[1, 2, 3, 5]` → "1–3, 5"; past
/// eight ranges, the first ones, the last and the count:
/// "2, 4, 6, 8, 10, 12, …, 1000 (500 in all)".
pub fn attempt_ranges(numbers: &[u32]) -> String {
    let mut parts = Vec::new();
    let mut iter = numbers.iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end += 1;
            iter.next();
        }
        parts.push(if end == start {
            start.to_string()
        } else {
            format!("{start}–{end}")
        });
    }
    if parts.len() > SHOWN_RANGES {
        let last = parts.pop().unwrap_or_default();
        parts.truncate(SHOWN_RANGES - 2);
        return format!("{}, …, {last} ({} in all)", parts.join(", "), numbers.len());
    }
    parts.join(", ")
}

/// "attempt 3" or "attempts 2–10".
pub fn attempts_phrase(numbers: &[u32]) -> String {
    match numbers {
        [one] => format!("attempt {one}"),
        _ => format!("attempts {}", attempt_ranges(numbers)),
    }
}

/// `n` attempts, all of them: "1 attempt", "both attempts", and past two
/// `all` and the count ("all 3 attempts", "every one of 3 attempts").
pub fn all_attempts(n: usize, all: &str) -> String {
    match n {
        1 => "1 attempt".into(),
        2 => "both attempts".into(),
        n => format!("{all} {n} attempts"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SecretFrom;
    use crate::replay::attempt::Answer;
    use crate::replay::plan::SignedWith;

    #[test]
    fn a_long_list_of_attempts_is_cut_to_its_first_ranges_its_last_and_a_count() {
        assert_eq!(attempt_ranges(&[1, 2, 3, 5]), "1–3, 5");
        let even: Vec<u32> = (1..=500).map(|n| n * 2).collect();
        assert_eq!(
            attempts_phrase(&even),
            "attempts 2, 4, 6, 8, 10, 12, …, 1000 (500 in all)"
        );
        let eight: Vec<u32> = (1..=8).map(|n| n * 2).collect();
        assert_eq!(attempt_ranges(&eight), "2, 4, 6, 8, 10, 12, 14, 16");
    }

    fn report(state_after: &str) -> Report {
        let attempt = |n: u32, status: u16| Attempt {
            n,
            role: Role::Replay,
            request: NewDelivery::default(),
            body: Bytes::new(),
            answer: Answer {
                status: Some(status),
                body: b"\x1b]0;pwned\x07".to_vec(),
                duration: std::time::Duration::from_micros(1500),
                ..Answer::default()
            },
            step: n as usize - 1,
            state_changed: Some(n == 1),
        };
        Report {
            idempotent: Some(false),
            checks: vec![Check {
                name: "answers_2xx",
                passed: false,
                detail: "attempt 2 answered 409".into(),
            }],
            attempts: vec![attempt(1, 200), attempt(2, 409)],
            warnings: vec!["slow".into()],
            provider: Some("stripe".into()),
            event_key: "evt_\x1b[2J".into(),
            retry_window: Some("up to 3 days".into()),
            target: "http://127.0.0.1:3000/hook".into(),
            times: 2,
            concurrency: 1,
            fresh: false,
            signed: None,
            state: Some(StateTrace {
                before: "rows: 0".into(),
                steps: vec!["rows: 1".into(), state_after.into()],
                moved_to: None,
                steady: true,
            }),
            elapsed: std::time::Duration::from_millis(1234),
            event_type: None,
            edits: Vec::new(),
            recorded_as: Vec::new(),
        }
    }

    #[test]
    fn two_attempts_that_answered_are_both() {
        let mut two = report("rows: 1");
        two.idempotent = Some(true);
        two.state = None;
        two.attempts[1].answer.status = Some(200);
        two.checks = vec![crate::replay::verdict::answers_2xx(&two.attempts, false)];
        assert_eq!(two.checks[0].detail, "both attempts answered 2xx");
        assert_eq!(
            two.summary_line(),
            "✓ both attempts answered 2xx (side effects not checked)"
        );
        let third = Attempt {
            n: 3,
            ..two.attempts[1].clone()
        };
        two.attempts.push(third);
        assert_eq!(
            two.summary_line(),
            "✓ every one of 3 attempts answered 2xx (side effects not checked)"
        );
        assert_eq!(
            crate::replay::verdict::answers_2xx(&two.attempts, false).detail,
            "all 3 attempts answered 2xx"
        );
    }

    #[test]
    fn duplicates_rate_limited_are_told_as_a_rate_limit() {
        let mut limited = report("rows: 1");
        limited.attempts[1].answer.status = Some(429);
        let check = crate::replay::verdict::answers_2xx(&limited.attempts, false);
        assert_eq!(
            check.detail,
            "attempt 2 answered 429: 429 is a rate limit, and the provider reads it as a failed delivery and \
             retries it: a provider's retries and bursts come close together, so a webhook endpoint answers them \
             2xx rather than limit them"
        );
    }

    #[test]
    fn json_carries_the_contract_fields() {
        let json = report("rows: 1").to_json();
        assert_eq!(json["idempotent"], false);
        assert_eq!(json["verdict"], "not_idempotent");
        assert_eq!(json["checks"][0]["name"], "answers_2xx");
        assert_eq!(json["checks"][0]["passed"], false);
        let first = &json["attempts"][0];
        assert_eq!((first["n"].as_u64(), first["status"].as_u64()), (Some(1), Some(200)));
        assert_eq!(first["duration_ms"].as_f64(), Some(1.5));
        assert_eq!(first["state_changed"], true);
        assert_eq!(json["warnings"][0], "slow");
        assert_eq!(json["retry_window"], "up to 3 days");
        assert_eq!(json["first_attempt_changed_state"], true);
        assert_eq!(json["state"]["after"], "rows: 1");
    }

    /// The TUI reads stored reports back through `StoredReport`: each field
    /// it shows must come back as written.
    #[test]
    fn a_stored_report_reads_back_what_was_written() {
        let mut report = report("rows: 2");
        report.fresh = true;
        let stored = crate::replay::stored::StoredReport::read(&report.to_json().to_string());
        assert_eq!(stored.warnings, ["slow"]);
        assert_eq!(stored.side_effects_checked, Some(true));
        assert_eq!(stored.verdict.as_deref(), Some("not_idempotent"));
        assert_eq!(stored.attempts.map(|sent| sent.len()), Some(2));
        assert!(stored.fresh);
        assert_eq!(stored.target.as_deref(), Some("http://127.0.0.1:3000/hook"));
        let answers: Vec<_> = stored
            .answers
            .iter()
            .map(|a| (a.attempts.clone(), a.status, a.body.is_some(), a.error.clone()))
            .collect();
        assert_eq!(
            answers,
            [(vec![1], Some(200), true, None), (vec![2], Some(409), true, None)]
        );
    }

    #[test]
    fn a_handler_gone_during_the_run_failed_it_and_one_a_duplicate_crashed_did_not_stay_idempotent() {
        let refused = Answer {
            error: Some("cannot connect to 127.0.0.1:3000: Connection refused".into()),
            unreached: true,
            ..Answer::default()
        };
        let mut gone = report("rows: 1");
        gone.attempts[1].answer = refused.clone();
        let third = Attempt {
            n: 3,
            ..gone.attempts[1].clone()
        };
        gone.attempts.push(third);
        gone.checks = vec![crate::replay::verdict::answers_2xx(&gone.attempts, false)];
        assert_eq!(gone.verdict(), "failed");
        assert!(
            gone.summary_line()
                .starts_with("✗ failed: attempts 2–3 failed (cannot connect")
                && gone
                    .summary_line()
                    .contains("the handler stopped taking connections during the run"),
            "{}",
            gone.summary_line()
        );
        // It went away after a duplicate repeated the side effect: that
        // convicts it, and is what the summary names.
        let mut repeated = gone.clone();
        repeated.checks.push(Check {
            name: crate::replay::verdict::DUPLICATES_CHANGE_NOTHING,
            passed: false,
            detail: "attempt 2 changed the state again".into(),
        });
        repeated.idempotent = crate::replay::verdict::decide(&repeated.checks);
        assert_eq!(repeated.verdict(), "not_idempotent");
        assert_eq!(
            repeated.summary_line(),
            "✗ not idempotent: attempt 2 changed the state again"
        );
        // Its probe, on the same handler, went with it: that leaves the
        // state unread, and convicts nothing.
        let mut unread = gone.clone();
        unread.checks.push(Check {
            name: crate::replay::verdict::STATE_READABLE,
            passed: false,
            detail: "the check URL gave no answer".into(),
        });
        assert_eq!(unread.verdict(), "failed");
        // The duplicate reached it and got no answer: what came after
        // is the duplicate's doing.
        let mut crashed = gone.clone();
        crashed.attempts[1].answer = Answer {
            error: Some("connection reset by 127.0.0.1:3000".into()),
            ..Answer::default()
        };
        crashed.checks = vec![crate::replay::verdict::answers_2xx(&crashed.attempts, false)];
        assert_eq!(crashed.verdict(), "not_idempotent");
        assert!(
            crashed.summary_line().contains("the provider reads anything but a 2xx"),
            "{}",
            crashed.summary_line()
        );
        // It credited the duplicate before crashing on it: the credit is
        // the worse of the two, and the summary names it.
        let mut credited = crashed.clone();
        credited.checks.push(Check {
            name: crate::replay::verdict::DUPLICATES_CHANGE_NOTHING,
            passed: false,
            detail: "attempt 2 changed the state again".into(),
        });
        credited.idempotent = crate::replay::verdict::decide(&credited.checks);
        assert_eq!(
            credited.summary_line(),
            "✗ not idempotent: attempt 2 changed the state again"
        );
    }

    #[test]
    fn every_distinct_answer_is_shown_and_an_error_beside_another_is_wrapped_whole() {
        let mut three = report("rows: 1");
        three.attempts[0].answer.status = Some(500);
        three.attempts[0].answer.body = b"charged card but failed to save".to_vec();
        three.attempts[1].answer = Answer {
            error: Some("localhost:3000 did not answer: connection closed before an answer came".into()),
            ..Answer::default()
        };
        let mut third = three.attempts[1].clone();
        third.n = 3;
        third.answer = Answer {
            status: Some(200),
            body: br#"{"ok":true,"dup":true}"#.to_vec(),
            ..Answer::default()
        };
        three.attempts.push(third);
        let mut fourth = three.attempts[1].clone();
        fourth.n = 4;
        fourth.answer.error = Some(
            "127.0.0.1:3000 did not answer: connection closed before an answer came, as a handler that crashed \
             closes it"
                .into(),
        );
        three.attempts.push(fourth);
        let text = three.render_text();
        assert!(
            text.contains("\n  and 200 for attempt 3: { \"ok\": true, \"dup\": true }\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "\n  and no answer to attempt 4: 127.0.0.1:3000 did not answer: connection closed\n      before an \
                 answer came, as a handler that crashed closes it\n"
            ),
            "{text}"
        );
        let error_rows: String = (text.lines())
            .filter_map(|line| line.split_once(" | ").map(|(_, right)| right.trim().to_owned()))
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            error_rows.contains(
                "no answer to attempt 2 localhost:3000 did not answer: connection closed before an answer came"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_refusal_every_attempt_got_is_shown_with_its_body() {
        let mut refused = report("rows: 1");
        for attempt in &mut refused.attempts {
            attempt.answer.status = Some(401);
            attempt.answer.body = b"stripe: bad signature".to_vec();
            attempt.answer.body_size = 21;
        }
        let text = refused.render_text();
        assert!(
            text.contains("\nEvery attempt got this answer:\n  401 for attempts 1–2\n  stripe: bad signature\n"),
            "{text}"
        );
        // A binary refusal is no text to print.
        let mut binary = refused.clone();
        for attempt in &mut binary.attempts {
            attempt.answer.body = vec![0xff, 0xfe, 0x00, 0x1b];
            attempt.answer.body_size = 4;
        }
        let text = binary.render_text();
        assert!(
            text.contains("\nEvery attempt got this answer:\n  401 for attempts 1–2\n  (a binary body of 4 bytes; --json has its start)\n"),
            "{text}"
        );
        // The advice points at where the secret came from: a variable that
        // `--secret` comes before is no place to fix it.
        let stripe = portpreview_shared::provider::Provider::Stripe;
        let hint = |attempts: &[Attempt], from: &SecretFrom| {
            crate::replay::verdict::refused_signature(
                attempts,
                Some(SignedWith {
                    provider: stripe,
                    from,
                    token: false,
                }),
            )
        };
        let flag = hint(&refused.attempts, &SecretFrom::Flag).unwrap();
        assert!(
            flag.starts_with("attempt 1, signed with the stripe secret from --secret, was answered 401"),
            "{flag}"
        );
        assert!(
            flag.ends_with(
                "pass the handler's own with --secret, or leave --secret out and set PORTPREVIEW_SECRET_STRIPE: \
                 --secret signs every provider's deliveries with one secret, and comes before any other"
            ),
            "{flag}"
        );
        let over = hint(
            &refused.attempts,
            &SecretFrom::FlagOverSuite("STRIPE_WEBHOOK_SECRET".into()),
        )
        .unwrap();
        assert!(
            over.contains("secret from --secret, was answered 401")
                && over.ends_with("or leave --secret out for the suite's secret_env, STRIPE_WEBHOOK_SECRET"),
            "{over}"
        );
        let env = hint(&refused.attempts, &SecretFrom::Env("STRIPE_WEBHOOK_SECRET".into())).unwrap();
        assert!(
            env.contains("secret from STRIPE_WEBHOOK_SECRET, was answered 401")
                && env.ends_with("set STRIPE_WEBHOOK_SECRET to the handler's own, or pass it with --secret"),
            "{env}"
        );
        let file = hint(&refused.attempts, &SecretFrom::ConfigFile("stripe")).unwrap();
        assert!(
            file.contains("secret from the config file, was answered 401")
                && file.ends_with(
                    "change stripe in the config file's [secrets] table, or pass the handler's own with --secret"
                ),
            "{file}"
        );
        assert!(file.contains("it holds another secret; "), "{file}");
        // Fresh events under the recorded signature are refused for it,
        // which says nothing of the handler.
        let unsigned = crate::replay::verdict::answers_2xx(&refused.attempts, true).detail;
        assert!(
            unsigned.ends_with(
                "the fresh events carry the recorded signature, which no longer matches them, and a handler that \
                 checks signatures refuses them: this says nothing of idempotency (see the warning)"
            ),
            "{unsigned}"
        );
        let signed = crate::replay::verdict::answers_2xx(&refused.attempts, false).detail;
        assert!(signed.ends_with("retries it"), "{signed}");
        // A signature over the URL is refused as well for a URL the
        // handler does not expect.
        let square = crate::replay::verdict::refused_signature(
            &refused.attempts,
            Some(SignedWith {
                provider: portpreview_shared::provider::Provider::Square,
                from: &SecretFrom::Flag,
                token: false,
            }),
        )
        .unwrap();
        assert!(
            square
                .contains("it holds another secret, or checks the signature against another URL than the one signed; "),
            "{square}"
        );
        // A GitLab secret token is sent, not signed with.
        let gitlab = crate::replay::verdict::refused_signature(
            &refused.attempts,
            Some(SignedWith {
                provider: portpreview_shared::provider::Provider::Gitlab,
                from: &SecretFrom::Env("PORTPREVIEW_SECRET_GITLAB".into()),
                token: true,
            }),
        )
        .unwrap();
        assert_eq!(
            gitlab,
            "attempt 1, sent with the gitlab secret from PORTPREVIEW_SECRET_GITLAB as its token, was answered 401: \
             if the handler checks gitlab tokens, it holds another; set PORTPREVIEW_SECRET_GITLAB to the handler's \
             own, or pass it with --secret"
        );
        assert_eq!(crate::replay::verdict::refused_signature(&refused.attempts, None), None);
        // Attempt 1 was taken with the same secret: a duplicate refused
        // after it is the handler refusing the duplicate.
        refused.attempts[0].answer.status = Some(200);
        assert_eq!(hint(&refused.attempts, &SecretFrom::Flag), None);
    }

    #[test]
    fn a_dedup_store_is_sized_only_for_a_provider_that_retries() {
        let stripe = report("rows: 1").render_text();
        assert!(
            stripe.contains("stripe retries: up to 3 days. A dedup store must keep event keys longer than that."),
            "{stripe}"
        );
        let mut gitlab = report("rows: 1");
        gitlab.provider = Some("gitlab".into());
        gitlab.retry_window = Some(portpreview_shared::provider::Provider::Gitlab.retry_window().into());
        let text = gitlab.render_text();
        assert!(
            text.contains("gitlab retries: no scheduled retries; the hook is disabled after 4 failures.\n"),
            "{text}"
        );
        assert!(!text.contains("dedup store"), "{text}");
    }

    #[test]
    fn the_heading_names_the_provider_only_when_there_is_one() {
        let stripe = report("rows: 1");
        assert!(
            stripe.render_text().starts_with("Replay of stripe event "),
            "{}",
            stripe.render_text()
        );
        let unknown = Report {
            provider: None,
            retry_window: None,
            ..report("rows: 1")
        };
        assert!(
            unknown.render_text().starts_with("Replay of event "),
            "{}",
            unknown.render_text()
        );
        let keyless = Report {
            event_key: String::new(),
            ..unknown
        };
        assert!(
            keyless.render_text().starts_with("Replay of a request → "),
            "{}",
            keyless.render_text()
        );
    }

    #[test]
    fn a_batch_read_once_shows_its_state_once() {
        let mut burst = report("rows: 2");
        burst.attempts[1].step = 0;
        burst.attempts[1].state_changed = Some(true);
        let text = burst.render_text();
        let rows: Vec<&str> = text.lines().filter(|l| l.contains("ms")).take(2).collect();
        assert!(!rows[0].ends_with("changed"), "{text}");
        assert!(rows[1].ends_with("changed"), "{text}");
    }

    /// The probe failed after attempt 1 was read: attempt 1's state is
    /// shown, the attempts read by no step are left blank.
    #[test]
    fn a_state_read_before_the_probe_failed_is_shown_on_its_attempt() {
        let mut partly = report("rows: 1");
        partly.attempts[1].step = 0;
        partly.attempts[1].state_changed = None;
        let text = partly.render_text();
        let rows: Vec<&str> = text.lines().filter(|l| l.contains("ms")).take(2).collect();
        assert!(rows[0].ends_with("  changed"), "{text}");
        assert!(rows[1].trim_end().ends_with("ms"), "{text}");
    }

    #[test]
    fn the_text_report_marks_checks_and_escapes_what_the_handler_sent() {
        let text = report("rows: 1").render_text();
        assert!(text.contains("✗ answers_2xx"), "{text}");
        assert!(text.contains("State after:  `rows: 1`"), "{text}");
        assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
        assert!(text.contains("up to 3 days"), "{text}");
        assert!(text.contains("status"), "the attempts table: {text}");
        assert_eq!(report("rows: 1").exit_code(), 1);
        // Stopped before any answer: no table of no rows.
        let mut none = report("rows: 1");
        none.attempts.clear();
        assert!(!none.render_text().contains("status"), "{}", none.render_text());
    }

    #[test]
    fn a_first_attempt_that_failed_is_a_failure_not_a_lack_of_idempotency() {
        let duplicate_refused = report("rows: 1");
        assert_eq!(duplicate_refused.verdict(), "not_idempotent");
        assert!(duplicate_refused.summary_line().starts_with("✗ not idempotent: "));

        let mut only_attempt_refused = report("rows: 1");
        only_attempt_refused.attempts.truncate(1);
        only_attempt_refused.attempts[0].answer.status = Some(302);
        only_attempt_refused.checks[0].detail = "attempt 1 answered 302".into();
        assert_eq!(only_attempt_refused.verdict(), "failed");
        assert_eq!(only_attempt_refused.summary_line(), "✗ failed: attempt 1 answered 302");
        assert_eq!(only_attempt_refused.to_json()["verdict"], "failed");
        assert_eq!(only_attempt_refused.exit_code(), 1);
    }

    #[test]
    fn a_fresh_verdict_counts_the_burst_not_the_baseline_beside_it() {
        let mut fresh = report("rows: 2");
        fresh.fresh = true;
        fresh.times = 2;
        fresh.idempotent = Some(true);
        fresh.checks.clear();
        for attempt in &mut fresh.attempts {
            attempt.answer.status = Some(200);
        }
        fresh.attempts.push(fresh.attempts[1].clone());
        assert_eq!(
            fresh.summary_line(),
            "✓ idempotent: a burst of 2 copies of one new event acted once"
        );
    }

    #[test]
    fn junit_times_the_whole_run_not_just_the_answers() {
        let xml = report("rows: 1").to_junit("fixtures/a.json");
        assert!(xml.contains("name=\"fixtures/a.json\" time=\"1.234\""), "{xml}");
        assert!(
            xml.contains(
                "<testsuite name=\"portpreview replay\" tests=\"1\" failures=\"1\" errors=\"0\" time=\"1.234\""
            ),
            "{xml}"
        );
        assert_eq!(report("rows: 1").to_json()["elapsed_ms"], 1234.0);
    }

    #[test]
    fn attempt_numbers_are_written_as_ranges() {
        assert_eq!(attempt_ranges(&[1, 2, 3, 5, 7, 8]), "1–3, 5, 7–8");
        assert_eq!(attempts_phrase(&[4]), "attempt 4");
        assert_eq!(attempts_phrase(&[2, 3]), "attempts 2–3");
    }
}
