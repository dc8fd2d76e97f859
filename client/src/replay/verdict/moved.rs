//! Which move of the state a failed duplicates check shows, and in what words.

use super::shown::shown_change;
use crate::replay::delta::{changes, Change};
use crate::replay::report::{attempts_phrase, Attempt, StateTrace};

/// How the duplicates moved the state, as the failed check shows it.
#[derive(Debug)]
pub struct ShownMove {
    /// The change the advice rests on.
    pub change: Change,
    /// The words that show it, after "changed the state again":
    /// ` (`a` → `b`, +1)`, or `: attempt 2 changed it (…), and …`.
    pub text: String,
}

/// Attempt 1's read against the last, unless that shows no count moved
/// while a read between did: a duplicate that changed the state and a
/// later one that changed it back (a handler that toggles a row) leave
/// the last read as attempt 1 left it, or only a value replaced, which
/// would blame a timestamp for a repeated side effect. Then the first
/// read that moved a count away from attempt 1's is shown, or, when none
/// did and the last read is attempt 1's, the first that differs from it,
/// with the attempts that made it. `None` for no steps.
pub fn shown_move(attempts: &[Attempt], trace: &StateTrace) -> Option<ShownMove> {
    let steps = &trace.steps;
    let (first, last) = (steps.first()?, steps.last()?);
    let from_first = |read: &str| changes(&[first, read]).remove(0);
    let net = from_first(last);
    if !net.counts_nothing() {
        return Some(net_move(first, last, net));
    }
    // A read like the one before it moved nothing new: only each move
    // is measured, as a state may be long and the steps many.
    let moves = || {
        steps
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(step, read)| *read != &steps[step - 1])
    };
    let away = moves()
        .map(|(step, read)| (step, from_first(read)))
        .find(|(_, change)| !change.counts_nothing())
        .or_else(|| match last == first {
            true => moves().next().map(|(step, read)| (step, from_first(read))),
            false => None,
        });
    let Some((step, change)) = away.filter(|(step, _)| step + 1 < steps.len()) else {
        return Some(net_move(first, last, net));
    };
    let movers: Vec<u32> = attempts
        .iter()
        .filter(|a| a.step == step && !a.answer.unreached)
        .map(|a| a.n)
        .collect();
    let movers = match movers.is_empty() {
        true => super::step_phrase(attempts, step),
        false => attempts_phrase(&movers),
    };
    let end = match last == first {
        true => "the last read is back where attempt 1 left it".to_string(),
        false => format!("the last read differs from attempt 1's only by {}", net.describe()),
    };
    let text = format!(
        ": {movers} changed it ({}, {}), and {end}",
        shown_change(first, &steps[step]),
        change.describe()
    );
    Some(ShownMove { change, text })
}

/// Attempt 1's read against the last.
fn net_move(first: &str, last: &str, change: Change) -> ShownMove {
    let text = format!(" ({}, {})", shown_change(first, last), change.describe());
    ShownMove { change, text }
}
