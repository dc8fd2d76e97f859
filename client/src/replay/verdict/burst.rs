//! Check 3 (`--fresh`): whether a burst of one new event acted once.

use portpreview_shared::text::counted;

use super::shown::{excerpt, shown_change};
use super::{BURST_ACTS_ONCE, PROBE_SHOWS_EFFECTS};
use crate::replay::delta::{
    changes, framing, large_move, moves_alike, multiple, multiplied_row, Change, LargeMove, Multiplied,
};
use crate::replay::report::{Check, StateTrace};

/// Check 3 (`--fresh`): a burst of one new event changed the state as one delivery did.
pub fn burst_acts_once(trace: &StateTrace, burst: usize) -> Option<Check> {
    let [after_baseline, after_burst, ..] = trace.steps.as_slice() else {
        return None;
    };
    // Three reads, two changes.
    // A header that came with the first row is no part of its effect.
    let framed = framing(&trace.before, after_baseline, after_burst);
    let before = framed.as_deref().unwrap_or(&trace.before);
    let moves = changes(&[before, after_baseline, after_burst]);
    let (single, many) = (&moves[0], &moves[1]);
    let copies = counted(burst, "copy", "copies");
    let failed = |name, detail| {
        Some(Check {
            name,
            passed: false,
            detail,
        })
    };
    // A number too large to count for sure (an amount in micros or wei)
    // that the counts leave out: moved more than once as far, the copies
    // may each have added to it; moved as far, it is the one effect seen.
    let large = large_move(before, after_baseline, after_burst, burst);
    let acted_once = |described: String| {
        Some(Check {
            name: BURST_ACTS_ONCE,
            passed: true,
            detail: format!("a burst of {copies} of one new event changed the state as one delivery did ({described})"),
        })
    };
    if single.counts_nothing() && many.counts_nothing() {
        match &large {
            Some(large) if large.times > 1 => return failed(PROBE_SHOWS_EFFECTS, large_detail(large, burst, &copies)),
            Some(LargeMove {
                values: [before, one, all],
                ..
            }) => {
                return acted_once(format!("{before} → {one} → {all}"));
            }
            None => {}
        }
    }
    if let Some(detail) = burst_unreadable(single, many, burst, (after_baseline, after_burst)) {
        return failed(PROBE_SHOWS_EFFECTS, detail);
    }
    if let Some(row) = multiplied_row(before, after_baseline, after_burst, burst) {
        return failed(BURST_ACTS_ONCE, multiplied_detail(&row, burst, &copies));
    }
    if moves_alike(before, after_baseline, after_burst) {
        if let Some(large) = large.filter(|large| large.times > 1) {
            return failed(PROBE_SHOWS_EFFECTS, large_detail(&large, burst, &copies));
        }
        return acted_once(single.describe());
    }
    let detail = if many.counts_nothing() || single.counts_nothing() {
        format!(
            "one new event {}, a burst of {copies} of another {}: the handler does not treat new events alike",
            effect(single),
            effect(many)
        )
    } else {
        format!(
            "one new event changed the state by {} ({}); a burst of {copies} of another changed it by {} \
             ({}): {}",
            single.describe(),
            shown_change(&trace.before, after_baseline),
            many.describe(),
            shown_change(after_baseline, after_burst),
            burst_diagnosis(single, many, burst),
        )
    };
    failed(BURST_ACTS_ONCE, detail)
}

/// Why the burst cannot show how many times it acted, when it cannot:
/// the probe saw no count move in the single delivery nor in the burst,
/// or the burst changed nothing, or only replaced values.
fn burst_unreadable(single: &Change, many: &Change, burst: usize, burst_reads: (&str, &str)) -> Option<String> {
    if single.counts_nothing() && many.counts_nothing() {
        // Without a side effect to count, a burst that acted twice looks
        // just like one that acted once: a `last_seen` replaced once or
        // three times reads alike.
        let (moved, queue) = if single.is_none() && many.is_none() {
            // Nothing at all: a queue slower than every read looks so too.
            (
                "changed the state",
                ", or, if it works from a queue, raise --settle past the queue's delay",
            )
        } else {
            ("moved a count or added a line", "")
        };
        return Some(format!(
            "neither one new event nor a burst of {burst} {moved}, so the burst proved nothing: \
             point --check-url or --check-cmd at what the handler writes, or, if the handler dedups on a \
             field --fresh did not renew and has seen it before, name that field with --fresh-field{queue}"
        ));
    }
    if many.is_none() {
        // A burst that acted not at all shows no copy acting twice. The
        // likeliest cause is no race: the burst's event passed for the
        // baseline's, by a field --fresh did not renew.
        return Some(format!(
            "one new event {}, but a burst of {} of another left the state unchanged, so it cannot show how \
             many times it acted: the handler dedups on a field --fresh did not renew (an order's or a \
             payment's ID), which --fresh-field names, or it does not treat new events alike",
            effect(single),
            counted(burst, "copy", "copies"),
        ));
    }
    if many.counts_nothing() {
        // The burst was acted on (a last_seen was replaced) but moved no
        // count: one effect or several read alike. Its event may have
        // passed for the baseline's, deduped on a field --fresh left alone.
        return Some(format!(
            "one new event changed the state by {}, but a burst of {} of another only replaced values ({}), \
             so it cannot show how many times it acted: if the handler dedups on a field --fresh did not \
             renew, name it with --fresh-field; otherwise have the probe print a count per event",
            single.describe(),
            counted(burst, "copy", "copies"),
            shown_change(burst_reads.0, burst_reads.1),
        ));
    }
    None
}

/// The event's own row, written once by one delivery and `row.times`
/// over by the burst.
fn multiplied_detail(row: &Multiplied, burst: usize, copies: &str) -> String {
    let acted = match row.times {
        k if k == burst => "every copy acted on the event's row".to_owned(),
        k => format!("{k} of the {burst} copies acted on the event's row, a check-then-insert race"),
    };
    format!(
        "a burst of {copies} of one new event added {} where one delivery of another added {}: {} times as \
         much, so {acted}; record the event ID under a unique constraint and act only when that insert \
         took (INSERT ... ON CONFLICT DO NOTHING)",
        excerpt(&row.all, 0),
        excerpt(&row.one, 0),
        row.times,
    )
}

/// A number as large as a clock or an ID, which the counts leave out,
/// moved a whole multiple as far by the burst: an amount in small units
/// that several copies added to, most likely, but no count for sure.
fn large_detail(large: &LargeMove, burst: usize, copies: &str) -> String {
    let [before, one, all] = large.values;
    let acted = match large.times {
        k if k == burst => "every copy acted on it".to_owned(),
        k => format!("{k} of the {burst} copies acted on it, a check-then-insert race"),
    };
    format!(
        "the counts moved as one delivery's did, but a number too large to tell from a clock or an ID moved {} \
         times as far for a burst of {copies} as for one new event ({before} → {one} → {all}): if it is an \
         amount, {acted}; have the probe print it in larger units (dollars, not micros), or a count per event, \
         for the run to judge it",
        large.times
    )
}

/// What a burst that moved the counts more than one delivery did says
/// about the handler.
fn burst_diagnosis(single: &Change, many: &Change, burst: usize) -> String {
    let times = multiple(single, many).filter(|k| k.fract() == 0.0 && *k > 1.0);
    // Every copy acting may be no race at all but a handler that does not
    // dedup; the burst alone cannot tell, duplicates in sequence can.
    match times {
        Some(k) if k == burst as f64 => format!(
            "every one of the {burst} copies acted: the handler does not dedup at all, or a check-then-insert race \
             let every copy through (a replay without --fresh tells which); record the event ID under a unique \
             constraint: INSERT ... ON CONFLICT DO NOTHING"
        ),
        Some(k) => format!(
            "{k} side effects for one event: a check-then-insert race; \
             use a unique constraint / INSERT ... ON CONFLICT DO NOTHING"
        ),
        // Counts that moved unlike, with none a whole multiple: a race, or
        // two new events the handler does not treat alike.
        None => "more than one side effect for one event (a check-then-insert race: use a unique constraint / \
                 INSERT ... ON CONFLICT DO NOTHING), unless the handler treats the two new events differently"
            .to_string(),
    }
}

/// "changed the state by +1", or "left the state unchanged".
fn effect(change: &Change) -> String {
    if change.is_none() {
        "left the state unchanged".into()
    } else {
        format!("changed the state by {}", change.describe())
    }
}
