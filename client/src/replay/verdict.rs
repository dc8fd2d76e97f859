//! The checks a replay run is judged by, and the verdict they add up to.

use std::collections::BTreeMap;
use std::time::Duration;

use portpreview_shared::provider::Provider;

use crate::config::SecretFrom;

use super::options::HadBefore;
use super::plan::SignedWith;
use super::probe::ProbeError;
use super::report::{all_attempts, attempts_phrase, Attempt, Check, Role, StateTrace};

mod burst;
mod moved;
mod places;
mod shown;

pub use burst::burst_acts_once;
pub use shown::{aligned, first_moved_line, shown_change};

/// Name of the check that every answer was 2xx.
pub const ANSWERS_2XX: &str = "answers_2xx";
/// Name of the check that duplicates left the state alone.
pub const DUPLICATES_CHANGE_NOTHING: &str = "duplicates_change_nothing";
/// Name of the check that a concurrent burst of one new event acted once.
pub const BURST_ACTS_ONCE: &str = "fresh_burst_acts_once";
/// Name of the check that the state had stopped moving when it was judged.
pub const STATE_SETTLED: &str = "state_settled";
/// Name of the check that the state could be read whole, failed only when it could not.
pub const STATE_READABLE: &str = "state_readable";
/// Name of the check that the probe showed a new event's side effect,
/// failed only when it showed none (`--fresh`, `--expect-effect`).
pub const PROBE_SHOWS_EFFECTS: &str = "probe_shows_side_effects";
/// Name of the check that the run went to its end, failed only when the
/// user stopped it.
pub const RUN_COMPLETED: &str = "run_completed";

/// Whether a failed check named `name` leaves the verdict open rather than
/// saying the handler is not idempotent.
pub fn makes_inconclusive(name: &str) -> bool {
    [STATE_SETTLED, STATE_READABLE, PROBE_SHOWS_EFFECTS, RUN_COMPLETED].contains(&name)
}

/// The user stopped the run (ctrl-c) before its end: what was sent is
/// reported, but part of a run is no verdict on the handler.
pub fn run_completed(sent: usize, total: u32) -> Check {
    Check {
        name: RUN_COMPLETED,
        passed: false,
        detail: if sent < total as usize {
            format!("stopped after {sent} of {total} attempts: only the whole run can show the handler idempotent")
        } else {
            // Every attempt went out: what was cut short is the wait for
            // the state to settle, which the verdict reads.
            format!(
                "stopped after {}, while waiting for the state to settle: only the whole run can show the handler idempotent",
                all_attempts(total as usize, "all")
            )
        },
    }
}

/// Check 1: every attempt answered 2xx. `signature_void`: the attempts
/// carry a signature that cannot verify ([`super::plan::Plan::signature_void`]).
pub fn answers_2xx(attempts: &[Attempt], signature_void: bool) -> Check {
    let mut failures: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for attempt in attempts.iter().filter(|a| !a.succeeded()) {
        let what = match (attempt.answer.status, &attempt.answer.error) {
            (Some(status), Some(error)) => format!("answered {status} cut short ({error})"),
            (Some(status), None) => format!("answered {status}"),
            (None, Some(error)) => format!("failed ({error})"),
            (None, None) => "got no answer".to_string(),
        };
        failures.entry(what).or_default().push(attempt.n);
    }
    if failures.is_empty() {
        return Check {
            name: ANSWERS_2XX,
            passed: true,
            detail: format!("{} answered 2xx", all_attempts(attempts.len(), "all")),
        };
    }
    let mut parts: Vec<(u32, String)> = failures
        .into_iter()
        .map(|(what, ns)| (ns[0], format!("{} {what}", attempts_phrase(&ns))))
        .collect();
    parts.sort();
    let list: Vec<String> = parts.into_iter().map(|(_, p)| p).collect();
    let why = if went_away(attempts) {
        "the handler stopped taking connections during the run: if a duplicate crashed it, that is the bug \
         (its log says); if it was stopped, start it and run again"
    } else if signature_void && refused_as_unsigned(attempts) {
        "the fresh events carry the recorded signature, which no longer matches them, and a handler that checks \
         signatures refuses them: this says nothing of idempotency (see the warning)"
    } else if attempts
        .iter()
        .any(|a| a.answer.status.is_some() && a.answer.error.is_some())
    {
        "most HTTP clients take an answer cut short for a failed request, and the provider retries the delivery"
    } else if attempts.iter().all(|a| matches!(a.answer.status, Some(404 | 405))) {
        // Refused from the first attempt on, whatever the handler's state:
        // most often the request went where nothing handles it, though a
        // handler may answer 404 for a record the event names.
        "either nothing at that path takes the event (check --target, and the path: the delivery's own unless \
         --target gives one), or the handler found nothing the event names; its answer says which"
    } else if (attempts.iter().filter(|a| !a.succeeded())).all(|a| a.answer.status == Some(429)) {
        // A rate limit reads like load, not like the duplicate it refused.
        "429 is a rate limit, and the provider reads it as a failed delivery and retries it: a provider's \
         retries and bursts come close together, so a webhook endpoint answers them 2xx rather than limit them"
    } else {
        "the provider reads anything but a 2xx answer as a failed delivery and retries it"
    };
    Check {
        name: ANSWERS_2XX,
        passed: false,
        detail: format!("{}: {why}", list.join("; ")),
    }
}

/// When attempts PortPreview signed were refused as unauthorised (or as a
/// bad request, as some signature libraries answer), that the
/// secret it signed with may not be the handler's: the answer alone
/// reads like a handler bug.
///
/// Only attempt 1 tells: signed with the same secret, a later attempt
/// refused after it was taken is the handler refusing the duplicate.
pub fn refused_signature(attempts: &[Attempt], signed_with: Option<SignedWith<'_>>) -> Option<String> {
    let SignedWith { provider, from, token } = signed_with?;
    let status = attempts.first()?.answer.status.filter(|&s| refuses_signature(s))?;
    // The place the secret came from is the one to correct: advice to set
    // a variable that `--secret` comes before would change nothing.
    let advice = match from {
        SecretFrom::Flag => format!(
            "pass the handler's own with --secret, or leave --secret out and set {}: --secret signs every \
             provider's deliveries with one secret, and comes before any other",
            crate::config::secret_env(provider)
        ),
        SecretFrom::FlagOverSuite(var) => {
            format!("pass the handler's own with --secret, or leave --secret out for the suite's secret_env, {var}")
        }
        SecretFrom::Env(var) => format!("set {var} to the handler's own, or pass it with --secret"),
        SecretFrom::ConfigFile(key) => {
            format!("change {key} in the config file's [secrets] table, or pass the handler's own with --secret")
        }
    };
    if token {
        return Some(format!(
            "attempt 1, sent with the {provider} secret from {from} as its token, was answered {status}: if the \
             handler checks {provider} tokens, it holds another; {advice}"
        ));
    }
    // A signature over the URL fails as well where the handler checks it
    // against another URL than the one signed, with the right secret.
    let cause = if provider.signs_url() {
        "it holds another secret, or checks the signature against another URL than the one signed"
    } else {
        "it holds another secret"
    };
    Some(format!(
        "attempt 1, signed with the {provider} secret from {from}, was answered {status}: if the handler \
         checks {provider} signatures, {cause}; {advice}"
    ))
}

/// When attempt 1, sent with the recorded signature of `provider`, was
/// refused as a signature check refuses: that the signature may no longer
/// match the request (a fixture edited by hand, the handler's secret
/// rotated since), and how to sign it anew. The answer alone reads like a
/// handler bug.
pub fn refused_recorded_signature(
    attempts: &[Attempt],
    provider: Option<Provider>,
    found: Option<&SecretFrom>,
) -> Option<String> {
    let provider = provider?;
    let status = attempts.first()?.answer.status.filter(|&s| refuses_signature(s))?;
    Some(format!(
        "attempt 1, sent with the recorded {provider} signature, was answered {status}: if the handler checks \
         {provider} signatures, the request was changed after it was signed (a fixture edited by hand), or the \
         handler's secret was; {}",
        super::resign_advice(provider, found)
    ))
}

/// Whether `status` is how a signature check refuses a request: 401 or
/// 403, or 400 as Stripe's and Svix's libraries answer.
fn refuses_signature(status: u16) -> bool {
    matches!(status, 400 | 401 | 403)
}

/// True when every attempt that got no 2xx was refused as a signature
/// check refuses.
fn refused_as_unsigned(attempts: &[Attempt]) -> bool {
    (attempts.iter().filter(|a| !a.succeeded())).all(|a| a.answer.status.is_some_and(refuses_signature))
}

/// True when every attempt that got no 2xx never reached the handler:
/// it went away during the run, and no answer of its own failed.
pub fn went_away(attempts: &[Attempt]) -> bool {
    let mut failed = attempts.iter().filter(|a| !a.succeeded()).peekable();
    failed.peek().is_some() && failed.all(|a| a.answer.unreached)
}

/// Check 2: attempts 2..N left the state exactly as attempt 1 left it.
/// `None` when there is nothing to compare (one attempt). `had_the_event`:
/// the history shows the handler answering this event 2xx before.
pub fn duplicates_change_nothing(
    attempts: &[Attempt],
    trace: &StateTrace,
    had_the_event: Option<&HadBefore>,
) -> Option<Check> {
    let first = trace.steps.first()?;
    // An earlier fixture of the check sent this event minutes ago: attempt
    // 1 is a duplicate too, and one that acted is the bug, run of one or not.
    if let Some(HadBefore::EarlierFixture(fixture)) = had_the_event {
        if first != &trace.before && attempts.first().is_some_and(Attempt::succeeded) {
            return Some(Check {
                name: DUPLICATES_CHANGE_NOTHING,
                passed: false,
                detail: format!(
                    "attempt 1 changed the state, though {} sent this event earlier in this check: the duplicate \
                     repeated the side effect; record the event ID under a unique constraint and skip events \
                     already handled",
                    portpreview_shared::sanitize::escape_str(fixture)
                ),
            });
        }
    }
    if trace.steps.len() < 2 {
        return None;
    }
    let first_changed = first != &trace.before;
    // The duplicates that moved the state from where the step before
    // left it: once it moved, a duplicate that left it there did nothing.
    let moved_at = |step: usize| step > 0 && trace.steps.get(step) != trace.steps.get(step - 1);
    // An attempt that never reached the handler is no duplicate it handled.
    let reached = attempts.iter().filter(|a| !a.answer.unreached);
    let moved: Vec<u32> = reached.clone().filter(|a| moved_at(a.step)).map(|a| a.n).collect();
    let duplicates = reached.filter(|a| a.step > 0).count();
    if duplicates == 0 {
        return None;
    }
    // What attempt 1 says of the handler's past holds only when the
    // duplicates changed nothing: a handler that repeats every side effect
    // changes the state on attempt 1 whether it saw the event before or not.
    // A failed attempt 1 changing nothing says nothing of the handler's past.
    let first_answered = attempts.first().is_some_and(Attempt::succeeded);
    let had_it = |had: &HadBefore| match had {
        HadBefore::WhenRecorded => "its delivery answered 2xx".to_owned(),
        HadBefore::InHistory(id) => format!("the history has #{id} answered 2xx there"),
        HadBefore::EarlierFixture(fixture) => format!(
            "{} sent it earlier in this check",
            portpreview_shared::sanitize::escape_str(fixture)
        ),
    };
    let news: std::borrow::Cow<'static, str> = match (first_changed, moved.is_empty()) {
        (true, _) if !first_answered => "attempt 1 changed it, though it got no 2xx".into(),
        (true, true) => "attempt 1 changed it: the event was new to the handler".into(),
        // Or the work is queued for later than the settle windows waited.
        (false, true) if first_answered && had_the_event.is_some() => format!(
            "attempt 1 changed nothing: the handler had seen the event before, {} (or does its work later than \
             --settle waits)",
            had_the_event.map(had_it).unwrap_or_default()
        )
        .into(),
        // Why that may be is the run's warning (`nothing_seen_to_act`).
        (false, true) if first_answered => "attempt 1 changed nothing".into(),
        (false, true) => "attempt 1 changed nothing, and it was not answered 2xx".into(),
        (true, false) => "attempt 1 changed it too".into(),
        // Or each read saw the work of the attempt before it, done after
        // answering and later than the reads waited.
        (false, false) => "attempt 1 changed nothing while later attempts did: if the handler works after \
                           answering, a longer --settle shows which attempt did what"
            .into(),
    };
    if moved.is_empty() {
        let rest: Vec<u32> = attempts
            .iter()
            .filter(|a| a.n > 1 && !a.answer.unreached)
            .map(|a| a.n)
            .collect();
        let phrase = attempts_phrase(&rest);
        return Some(Check {
            name: DUPLICATES_CHANGE_NOTHING,
            passed: true,
            detail: format!("{phrase} left the state as attempt 1 left it; {news}"),
        });
    }
    let shown = moved::shown_move(attempts, trace)?;
    let change = &shown.change;
    // Attempt 1 answered and changed nothing, yet later reads moved: a
    // handler that works from a queue after it answers shows each
    // attempt's work in a later attempt's read, so the moves name the
    // wrong attempts and read like a limit or a race. Whether or not the
    // handler had the event before: one that had it and skips it would
    // skip the later copies too. More than one move is still one event
    // acting more than once (a single late move leaves the run
    // inconclusive instead: `late_first_effect`).
    if !first_changed && first_answered {
        return Some(Check {
            name: DUPLICATES_CHANGE_NOTHING,
            passed: false,
            detail: format!(
                "the state moved in the reads after {}{}: attempt 1 changed nothing and later reads moved: the \
                 handler likely works after it answers, so a read may show an earlier attempt's work; raise \
                 --settle above its delay to see which attempt did what; whichever did, the event acted more than \
                 once: record the event ID under a unique constraint and skip events already handled",
                attempts_phrase(&moved),
                shown.text,
            ),
        });
    }
    // Only values replaced (a `last_seen`, a status word): the handler may
    // skip the event's work and still write down that it came again.
    let advice = if first_changed && !first_answered {
        // The charge made before a failed answer, made again on the retry.
        "a delivery that got no 2xx is retried, and the handler acted on it before failing: record the event \
         ID in the same transaction as its work, so that the retry finds it done"
    } else if change.counts_nothing() {
        "no count moved and no line was added, only values were replaced: if the handler records when it \
         last saw an event, leave that out of the probe's output; if it is the event's work, skip events \
         already handled"
    } else if moved.len() == duplicates {
        "every duplicate repeated the side effect; record the event ID under a unique constraint and skip \
         events already handled"
    } else if attempts
        .iter()
        .any(|a| a.step > 0 && attempts.iter().any(|b| b.n != a.n && b.step == a.step))
    {
        "some duplicates repeated the side effect, not all: a check-then-insert race or a limit the handler \
         checks; record the event ID under a unique constraint and skip events already handled"
    } else {
        // One at a time, no two duplicates could race.
        "some duplicates repeated the side effect, not all: a limit the handler checks (a count, a time \
         window); record the event ID under a unique constraint and skip events already handled"
    };
    Some(Check {
        name: DUPLICATES_CHANGE_NOTHING,
        passed: false,
        detail: format!(
            "{} changed the state again{}: {advice} ({news})",
            attempts_phrase(&moved),
            shown.text,
        ),
    })
}

/// Check 2 for a run whose first attempts got no 2xx and changed nothing,
/// as a handler whose database was down fails a delivery: the first
/// attempt answered 2xx is the delivery the provider's retries ended
/// with, and those after it duplicate it. `None` when no attempt was
/// answered 2xx, none reached the handler after it, an attempt before it
/// changed the state, or it shared its step with others, whose moves
/// cannot be told from its own.
pub fn duplicates_after_the_first_success(attempts: &[Attempt], trace: &StateTrace) -> Option<Check> {
    let first = attempts.iter().find(|a| a.succeeded())?;
    let alone = attempts.iter().filter(|a| a.step == first.step).count() == 1;
    let untouched = trace.steps.get(..first.step)?.iter().all(|step| step == &trace.before);
    if !alone || !untouched {
        return None;
    }
    let handled = trace.steps.get(first.step)?;
    let later: Vec<&Attempt> = (attempts.iter())
        .filter(|a| a.step > first.step && !a.answer.unreached)
        .collect();
    if later.is_empty() {
        return None;
    }
    let moved: Vec<u32> = (later.iter())
        .filter(|a| trace.steps.get(a.step) != trace.steps.get(a.step - 1))
        .map(|a| a.n)
        .collect();
    let failed: Vec<u32> = attempts.iter().filter(|a| a.step < first.step).map(|a| a.n).collect();
    let context = format!(
        "attempt {} was the first answered 2xx, after {} got none and changed nothing",
        first.n,
        attempts_phrase(&failed)
    );
    if moved.is_empty() {
        let rest: Vec<u32> = later.iter().map(|a| a.n).collect();
        return Some(Check {
            name: DUPLICATES_CHANGE_NOTHING,
            passed: true,
            detail: format!(
                "{} left the state as attempt {} left it; {context}",
                attempts_phrase(&rest),
                first.n
            ),
        });
    }
    Some(Check {
        name: DUPLICATES_CHANGE_NOTHING,
        passed: false,
        detail: format!(
            "{} changed the state again after attempt {} ({}): {context}, and a duplicate of the delivery it \
             handled repeated the side effect; record the event ID under a unique constraint and skip events \
             already handled",
            attempts_phrase(&moved),
            first.n,
            shown_change(handled, trace.after()),
        ),
    })
}

/// When no read saw the state move, attempt 1's included, and nothing
/// says the handler had the event before: a handler that does its work
/// later than the reads waited passes unseen, duplicates and all, and so
/// does one whose probe shows nothing of that work. `None` otherwise.
pub fn nothing_seen_to_act(trace: &StateTrace, settle: Duration, attempts: &[Attempt]) -> Option<String> {
    let duplicated = attempts.iter().any(|a| a.n > 1 && !a.answer.unreached);
    (duplicated && answered_unseen(trace, attempts)).then(|| {
        format!(
            "no read saw the state move, not even after attempt 1, and the handler is not known to have had \
             this event before: it may have had it all the same (left running since an earlier run: start it \
             afresh), or it does nothing the probe shows for this event, or it does its work later than the \
             reads waited ({}) and no duplicate could be seen repeating it; a longer --settle, or --fresh, which \
             must see a new event act, tells the last two apart",
            reads_waited(trace, settle)
        )
    })
}

/// Attempt 1 was answered 2xx, and no read saw the state move after it.
fn answered_unseen(trace: &StateTrace, attempts: &[Attempt]) -> bool {
    attempts.first().is_some_and(Attempt::succeeded) && trace.never_moved()
}

/// How long the reads waited for a side effect, in the flags' words.
fn reads_waited(trace: &StateTrace, settle: Duration) -> String {
    format!(
        "--settle {}, and {} after the last attempt",
        portpreview_shared::duration::format_duration(settle),
        portpreview_shared::duration::format_duration(trace.final_wait(settle))
    )
}

/// Under `--expect-effect`: no read saw the state move, attempt 1's
/// included, though the event was said to be new to the handler and to do
/// something the probe shows, so the run proved nothing and is
/// inconclusive. With one attempt as with many, and whatever the history
/// says of the event (`had_the_event`: the target answered it 2xx
/// before, which the flag says it has not). `None` when a read saw the
/// state move, or attempt 1 got no 2xx, which the run reports instead.
pub fn effect_unseen(trace: &StateTrace, settle: Duration, attempts: &[Attempt], had_the_event: bool) -> Option<Check> {
    if !answered_unseen(trace, attempts) {
        return None;
    }
    let why = if had_the_event {
        "the history shows this target answering the event 2xx before, so the handler had it already: start it \
         afresh, or --fresh sends a new event"
            .to_owned()
    } else {
        format!(
            "the handler had the event already (left running since an earlier run: start it afresh), does nothing \
             the probe shows for it, or does its work later than the reads waited ({})",
            reads_waited(trace, settle)
        )
    };
    Some(Check {
        name: PROBE_SHOWS_EFFECTS,
        passed: false,
        detail: format!(
            "no read saw the state move, not even after attempt 1, though --expect-effect says this event is new to \
             the handler and does something the probe shows: {why}"
        ),
    })
}

/// The state held still when it was judged: inconclusive otherwise.
pub fn state_settled(trace: &StateTrace, settle: Duration, attempts: &[Attempt]) -> Check {
    let window = portpreview_shared::duration::format_duration(settle);
    let wait = portpreview_shared::duration::format_duration(trace.final_wait(settle));
    if let Some(detail) = late_first_effect(trace, attempts, &window) {
        return Check {
            name: STATE_SETTLED,
            passed: false,
            detail,
        };
    }
    let (passed, detail) = match (&trace.moved_to, trace.steady) {
        // A read that never held still says more than the move after it.
        (_, false) => (
            false,
            format!(
                "the state never held still for {window} within {}, or within {} times the probe's slowest \
                 read when that is longer: raise --settle, or, if the probe's output changes with nothing sent \
                 (a clock, a request counter), print only what the handler writes",
                portpreview_shared::duration::format_duration(settle * super::probe::SETTLE_CAP_FACTOR),
                super::probe::SETTLE_CAP_READS
            ),
        ),
        // Only a clock or an ID moved: no side effect counts that.
        (Some(moved), true)
            if super::delta::changes(&[trace.after(), moved])
                .iter()
                .all(|c| c.counts_nothing()) =>
        {
            (
                false,
                format!(
                    "the state still moved {wait} after the last attempt ({}), though only in values that count \
                 nothing (a word, an ID, a clock): if the probe prints a clock or an ID that changes with nothing \
                 sent, print only what the handler writes; else raise --settle (now {window})",
                    shown_change(trace.after(), moved)
                ),
            )
        }
        (Some(moved), true) => (
            false,
            format!(
                "the state still moved {wait} after the last attempt ({}): the handler works after it answers; \
                 raise --settle (now {window})",
                shown_change(trace.after(), moved)
            ),
        ),
        (None, true) => (
            true,
            format!("the state held still for {window} after every step and {wait} after the last"),
        ),
    };
    Check {
        name: STATE_SETTLED,
        passed,
        detail,
    }
}

/// The read before attempt 1 never held still, so the run stopped before
/// sending anything: inconclusive. Nothing had been sent, so what moved
/// is the probe's own output (a clock, a request counter) or the handler
/// finishing earlier work; a longer `--settle` only makes every read wait
/// longer for a state that does not stop. `moved_from` and `state` are the
/// last two reads, which differ.
pub fn moves_with_nothing_sent(moved_from: &str, state: &str) -> Check {
    Check {
        name: STATE_SETTLED,
        passed: false,
        detail: format!(
            "the probe's output changes with nothing sent (a clock or counter in its output, or the handler still \
             busy with earlier work): {}, so no attempt was sent; print only what the handler writes (leave clocks \
             and request counters out of the probe), or run again once the handler is idle",
            first_moved_line(moved_from, state)
        ),
    }
}

/// A handler that works after it answers, for longer than `--settle`,
/// leaves the state unchanged after the first step and moves it during a
/// later one only. That move reads the same whether it was the first
/// step's own late side effect or a later step's repeated one, so it
/// proves nothing either way, even seen in parts (one event's work may
/// write twice). Moves after two later steps would: one event acted more
/// than once, whichever steps caused it. So does a replayed first step
/// that moved the state, when the one later move is in lines it left
/// alone ([`places::apart`]): the event's row at once, its credit from a
/// queue. A later move where the first one moved is a duplicate's.
fn late_first_effect(trace: &StateTrace, attempts: &[Attempt], window: &str) -> Option<String> {
    let first = trace.steps.first()?;
    // A state that moved again after the last attempt moved more than
    // once; that it did not hold still is the finding.
    if trace.moved_to.is_some() {
        return None;
    }
    let mut moves = trace
        .steps
        .windows(2)
        .enumerate()
        .filter(|(_, pair)| pair[0] != pair[1]);
    let (step, pair) = moves.next()?;
    if moves.next().is_some() {
        return None;
    }
    // Under --fresh the burst is a new event of its own, which must move
    // the state however the single one before it did.
    let first_moved = first != &trace.before;
    let replayed = attempts.iter().all(|a| a.role == Role::Replay);
    if first_moved && !(replayed && places::apart(&trace.before, first, &pair[0], &pair[1])) {
        return None;
    }
    // A first step the handler answered as failed (a 500) did not act:
    // the move is the next attempt handling the event, as it should.
    if attempts
        .iter()
        .any(|a| a.step == 0 && a.answer.status.is_some() && !a.succeeded())
    {
        return None;
    }
    // A first step that got no answer (it timed out, its connection
    // dropped) may have done its work after the run gave up on it.
    let answered = attempts
        .iter()
        .filter(|a| a.step == 0)
        .all(|a| a.answer.status.is_some());
    let (after, raise) = match answered {
        true => ("after it answered", format!("raise --settle (now {window})")),
        false => (
            "though no answer came back in time",
            format!("raise --timeout, or --settle (now {window}),"),
        ),
    };
    let (first_phrase, later_phrase) = (step_phrase(attempts, 0), step_phrase(attempts, step + 1));
    let later_change = shown_change(&pair[0], &pair[1]);
    // As many rows as attempts came at once: each attempt's work, as
    // likely as the first one's alone.
    let reached = attempts.iter().filter(|a| !a.answer.unreached).count();
    let rows = super::delta::changes(&[&pair[0], &pair[1]]).remove(0).lines_added();
    let whose = match rows {
        n if n >= 2 && n == reached => {
            format!("every attempt's side effect ({n} lines came for {n} attempts) or the first one's")
        }
        _ => "the first one's own side effect".to_owned(),
    };
    Some(match first_moved {
        false => format!(
            "{first_phrase} left the state unchanged within --settle, and it moved only in the reads after \
             {later_phrase} ({later_change}): that may be {whose}, done {after}; {raise} past the time the handler \
             takes",
        ),
        true => format!(
            "{first_phrase} changed the state ({}), and it moved again only in the reads after {later_phrase}, \
             elsewhere than {first_phrase} moved it ({later_change}): that may be the rest of the first one's work, done \
             {after}; {raise} past the time the handler takes",
            shown_change(&trace.before, first),
        ),
    })
}

/// The reads after `step` printed the lines of the state before it in
/// another order, which counts as no change: rows printed in no set
/// order would never hold still. A swap of values printed without what
/// they belong to passes unseen so.
pub fn reordered(attempts: &[Attempt], step: usize) -> String {
    format!(
        "the reads after {} printed the lines of the state before in another order, which counts as no change \
         (rows printed in no set order); if the probe prints values without what they belong to (two balances, \
         one a line), a swap between them passes unseen: print each beside its name or ID",
        step_phrase(attempts, step)
    )
}

/// The attempts of one step, as a report names them: "attempt 1", "the burst".
fn step_phrase(attempts: &[Attempt], step: usize) -> String {
    let at_step: Vec<&Attempt> = attempts.iter().filter(|a| a.step == step).collect();
    match at_step.first().map(|a| a.role) {
        Some(Role::Baseline) => "the single new event".into(),
        Some(Role::Burst) => "the burst".into(),
        _ => attempts_phrase(&at_step.iter().map(|a| a.n).collect::<Vec<_>>()),
    }
}

/// The state could not be read whole, so duplicates were not judged: inconclusive.
/// `judged`: the reads taken before the probe failed convicted the handler.
pub fn state_readable(reason: &ProbeError, judged: bool) -> Check {
    let unjudged = match judged {
        true => "what the attempts after its last read did to the state was not judged",
        false => "what the attempts did to the state was not judged",
    };
    Check {
        name: STATE_READABLE,
        passed: false,
        detail: format!("{reason}; {unjudged}"),
    }
}

/// Check 4: attempts slower than the provider waits (a warning, not a failure).
pub fn slow_answers(attempts: &[Attempt], provider: Provider) -> Option<String> {
    let answer_within = provider.answer_within()?;
    let slow: Vec<&Attempt> = attempts.iter().filter(|a| a.answer.duration > answer_within).collect();
    let slowest = slow.iter().map(|a| a.answer.duration).max()?;
    let numbers: Vec<u32> = slow.iter().map(|a| a.n).collect();
    // Whether it then retries is the provider's own: the report names its retry window.
    let took = match slow.len() {
        1 => "took",
        _ => "took up to",
    };
    Some(format!(
        "{} {took} {:.2} s; {provider} waits {} s for an answer, then counts the delivery as failed: \
         answer 2xx first and do the work from a queue",
        attempts_phrase(&numbers),
        slowest.as_secs_f64(),
        answer_within.as_secs_f64(),
    ))
}

/// The verdict: a failed answer check is final, and so is a duplicate or
/// a burst read acting again (such a check is only ever made of reads
/// that held still), unless the state was still moving; otherwise a failed
/// check that could not judge the handler (see [`makes_inconclusive`])
/// makes the rest inconclusive; any other failure is "not idempotent".
pub fn decide(checks: &[Check]) -> Option<bool> {
    let failed = |name: &str| checks.iter().any(|c| c.name == name && !c.passed);
    // A duplicate seen repeating its side effect in reads that held still
    // convicts, though the probe failed after them; a state still moving
    // leaves every read open.
    let convicted = failed(DUPLICATES_CHANGE_NOTHING) || failed(BURST_ACTS_ONCE);
    if failed(ANSWERS_2XX) || (convicted && !failed(STATE_SETTLED)) {
        return Some(false);
    }
    if checks.iter().any(|c| !c.passed && makes_inconclusive(c.name)) {
        return None;
    }
    Some(checks.iter().all(|c| c.passed))
}

/// `role`'s label in the report's table of attempts.
pub fn role_label(role: Role) -> &'static str {
    match role {
        Role::Replay => "",
        Role::Baseline => "baseline",
        Role::Burst => "burst",
    }
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
