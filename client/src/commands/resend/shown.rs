//! How `resend` tells what it sent: a line for each event as it is
//! answered, the tally, and the same as one JSON object.

use std::fmt::Write as _;
use std::io::Write as _;

use anyhow::Context;
use serde_json::{json, Value};

use portpreview_shared::sanitize::escape_str;
use portpreview_shared::text::counted;

use super::pick::{Event, Picked};
use crate::output::delivery_line;
use crate::render;
use crate::replay::{ReplayError, Report};
use crate::store::{EventState, Summary};

/// Failed events named in the tally; the lines above name them all.
const NAMED: usize = 5;

/// One event sent again, or why it could not be.
pub struct Sent {
    /// The delivery sent again, as the history lists it.
    pub event: Event,
    outcome: Outcome,
    /// Why the history did not keep the attempt, when it did not.
    unkept: Option<String>,
}

enum Outcome {
    /// The handler answered, or the attempt failed on its way.
    Answered {
        /// The attempt as the history lists it (its id 0 when it could
        /// not be kept).
        attempt: Box<Summary>,
    },
    /// It was not sent: the stored request cannot be replayed as it came,
    /// or nothing answers at its target.
    NotSent { reason: String, target_down: bool },
}

impl Sent {
    /// The one attempt of `report`, kept in the history as `kept` says
    /// (its id, or why it was not kept); `None` when the report holds no
    /// attempt.
    pub fn answered(event: Event, report: &Report, kept: Result<Option<i64>, String>) -> Option<Self> {
        let attempt = report.attempts.first()?;
        let answer = &attempt.answer;
        let (kept_as, unkept) = match kept {
            Ok(id) => (id, None),
            Err(why) => (None, Some(why)),
        };
        let summary = Summary {
            id: kept_as.unwrap_or_default(),
            // Where it went: `--target` may name another path.
            path: attempt.request.path.clone(),
            status: answer.status,
            duration_ms: Some(attempt.duration_ms()),
            error: answer.error.clone(),
            replay_of: Some(event.summary.id),
            ..event.summary.clone()
        };
        Some(Self {
            event,
            outcome: Outcome::Answered {
                attempt: Box::new(summary),
            },
            unkept,
        })
    }

    /// An event the replay engine would not send.
    pub fn not_sent(event: Event, err: &ReplayError) -> Self {
        Self {
            event,
            outcome: Outcome::NotSent {
                reason: err.to_string(),
                target_down: matches!(err, ReplayError::TargetDown { .. }),
            },
            unkept: None,
        }
    }

    /// True when the handler answered 2xx.
    pub fn answered_2xx(&self) -> bool {
        match &self.outcome {
            Outcome::Answered { attempt } => matches!(attempt.status, Some(200..=299)) && attempt.error.is_none(),
            Outcome::NotSent { .. } => false,
        }
    }

    /// Why the history did not keep the attempt, when it was sent and not kept.
    pub fn unkept(&self) -> Option<&str> {
        self.unkept.as_deref()
    }

    /// Why nothing more can be sent: nothing answers at the target.
    pub fn went_away(&self) -> Option<&str> {
        match &self.outcome {
            Outcome::NotSent {
                reason,
                target_down: true,
            } => Some(reason),
            _ => None,
        }
    }

    /// `#12  POST /webhooks/stripe  200  3 ms  stripe invoice.paid evt_A  (resends #4, answered 500)`:
    /// the attempt as the live line shows a delivery, then what it resends.
    pub fn line(&self) -> String {
        let was = &self.event.summary;
        match &self.outcome {
            Outcome::Answered { attempt } => {
                format!(
                    "{}  (resends #{}, {})",
                    delivery_line(attempt, 1),
                    was.id,
                    answered(was)
                )
            }
            Outcome::NotSent { reason, .. } => format!(
                "#{}  {} {}  not sent: {}",
                was.id,
                escape_str(&was.method),
                escape_str(&render::mask::shown_path(&was.path, false)),
                escape_str(reason)
            ),
        }
    }

    fn to_json(&self) -> Value {
        let delivery = render::json::summary(
            &self.event.summary,
            &self.event.target,
            self.event.delivery_number,
            false,
        );
        match &self.outcome {
            Outcome::Answered { attempt } => json!({
                "delivery": delivery,
                "sent": true,
                "resent_as": (attempt.id > 0).then_some(attempt.id),
                "status": attempt.status,
                "error": attempt.error,
                "duration_ms": attempt.duration_ms.map(crate::time::round_ms),
            }),
            Outcome::NotSent { reason, .. } => json!({
                "delivery": delivery,
                "sent": false,
                "resent_as": null,
                "status": null,
                "error": reason,
                "duration_ms": null,
            }),
        }
    }
}

/// How a delivery was answered, in a few words: "answered 500", "not
/// answered: connection refused".
fn answered(s: &Summary) -> String {
    match (s.status, &s.error) {
        (Some(status), _) => format!("answered {status}"),
        (None, Some(error)) => format!("not answered: {}", escape_str(error)),
        (None, None) => "not answered".to_owned(),
    }
}

/// The line of an event picked, then passed over as its turn came.
pub fn passed_over_line(event: &Event, state: EventState) -> String {
    let why = match state {
        EventState::Answered => "answered 2xx by another delivery since the run began",
        EventState::Awaited | EventState::Unanswered => "a provider's retry of it is on its way",
    };
    format!("#{}  passed over: {why}", event.summary.id)
}

/// A line of `--dry-run`: the delivery as the live line shows it.
pub fn planned_line(event: &Event) -> String {
    delivery_line(&event.summary, 1)
}

/// What the filters matched but is not sent, as a line: "Passed over: 1
/// event answered 2xx by another delivery …", or nothing.
pub fn passed_over(picked: &Picked) -> String {
    let mut parts = Vec::new();
    if picked.answered > 0 {
        parts.push(format!(
            "{} 2xx by another delivery (a provider's retry, or a resend)",
            counted(picked.answered, "event answered", "events answered")
        ));
    }
    if picked.awaited > 0 {
        parts.push(format!(
            "{} delivering now",
            counted(
                picked.awaited,
                "event a provider's retry is",
                "events a provider's retry is"
            )
        ));
    }
    if picked.unknown > 0 {
        parts.push(format!(
            "{} (PortPreview stopped before it recorded it, and the handler may have answered 2xx: `replay ID` \
             sends one)",
            counted(
                picked.unknown,
                "delivery whose answer is unknown",
                "deliveries whose answers are unknown"
            )
        ));
    }
    if picked.retries > 0 {
        parts.push(format!(
            "{} of events above (each event goes once)",
            counted(picked.retries, "earlier delivery", "earlier deliveries")
        ));
    }
    match parts.is_empty() {
        true => String::new(),
        false => format!("Passed over: {}.\n", parts.join("; ")),
    }
}

/// The lines after the events: how many were answered 2xx, which were
/// not, and where the attempts are kept. `command` is how to run
/// `portpreview` on this history.
pub fn tally(sent: &[Sent], unsent: usize, command: &str) -> String {
    let mut text = String::new();
    let failed: Vec<&Sent> = sent.iter().filter(|s| !s.answered_2xx()).collect();
    let answered = sent.len() - failed.len();
    match failed.first() {
        None if unsent == 0 => _ = write!(text, "All {} answered 2xx.", counted(sent.len(), "event", "events")),
        None => _ = write!(text, "{} answered 2xx.", counted(answered, "event", "events")),
        Some(first) => {
            let named: Vec<String> = failed
                .iter()
                .take(NAMED)
                .map(|s| format!("#{}", s.event.summary.id))
                .collect();
            let more = match failed.len() > NAMED {
                true => format!(" and {} more", failed.len() - NAMED),
                false => String::new(),
            };
            _ = write!(
                text,
                "{answered} of {} answered 2xx. Not answered 2xx: {}{more}.",
                counted(sent.len(), "event", "events"),
                named.join(", ")
            );
            // The first answer in full, where the history kept it.
            if let Outcome::Answered { attempt } = &first.outcome {
                if attempt.id > 0 {
                    _ = write!(
                        text,
                        " `{command} show {}` shows the answer to #{}.",
                        attempt.id, first.event.summary.id
                    );
                }
            }
        }
    }
    if unsent > 0 {
        _ = write!(text, " {} not sent.", counted(unsent, "event was", "events were"));
    }
    text.push('\n');
    let kept = sent
        .iter()
        .any(|s| matches!(&s.outcome, Outcome::Answered { attempt } if attempt.id > 0));
    if kept {
        _ = writeln!(
            text,
            "Each resend is kept in the history as a replay of its delivery: {command} history --replays"
        );
    }
    text
}

/// `--json`: one object with every event sent and the counts.
pub fn print_json(sent: &[Sent], picked: &Picked, unsent: usize, stopped: Option<&str>) -> anyhow::Result<()> {
    let answered = sent.iter().filter(|s| s.answered_2xx()).count();
    let value = json!({
        "resent": sent.iter().map(Sent::to_json).collect::<Vec<_>>(),
        "answered_2xx": answered,
        "not_answered_2xx": sent.len() - answered,
        "not_reached": unsent,
        "passed_over": passed_over_json(picked),
        "stopped": stopped,
    });
    print_value(&value)
}

/// `--dry-run --json`: what would be sent, and what was passed over.
pub fn print_dry_run_json(picked: &Picked) -> anyhow::Result<()> {
    let value = json!({
        "would_resend": picked
            .events
            .iter()
            .map(|e| render::json::summary(&e.summary, &e.target, e.delivery_number, false))
            .collect::<Vec<_>>(),
        "passed_over": passed_over_json(picked),
    });
    print_value(&value)
}

/// [`passed_over`] as counts.
fn passed_over_json(picked: &Picked) -> Value {
    json!({
        "answered_elsewhere": picked.answered,
        "awaited": picked.awaited,
        "answer_unknown": picked.unknown,
        "earlier_deliveries": picked.retries,
    })
}

fn print_value(value: &Value) -> anyhow::Result<()> {
    writeln!(std::io::stdout().lock(), "{}", render::json::to_terminal_text(value)).context("cannot write to stdout")
}
