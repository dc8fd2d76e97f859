//! Where in a probe's output a change happened: under which names. One
//! event's work may write in two places at two times (the event's row at
//! once, the credit from a queue), and a move in lines the first attempt
//! left alone may be the rest of its work rather than a duplicate's.

use std::collections::{BTreeMap, BTreeSet};

/// True when the lines that differ from `a` to `b` and those that differ
/// from `c` to `d` sit under names none of the others share: `balance`
/// in `balance: 100`, under the names of the lines it is indented beneath.
/// A line without a name (a row of a dump, an element of a list) sits
/// under those alone, so two rows added to one dump share a place.
pub fn apart(a: &str, b: &str, c: &str, d: &str) -> bool {
    let first = changed_places(a, b);
    let later = changed_places(c, d);
    !first.is_empty() && !later.is_empty() && first.is_disjoint(&later)
}

/// The places of the lines one of `from` and `to` holds more often than
/// the other: their order aside, as the reads are compared.
fn changed_places<'a>(from: &'a str, to: &'a str) -> BTreeSet<String> {
    let mut lines: BTreeMap<(String, &str), i64> = BTreeMap::new();
    for (place, line) in placed(from) {
        *lines.entry((place, line)).or_default() += 1;
    }
    for (place, line) in placed(to) {
        *lines.entry((place, line)).or_default() -= 1;
    }
    lines
        .into_iter()
        .filter(|(_, count)| *count != 0)
        .map(|((place, _), _)| place)
        .collect()
}

/// Each line of `text` with its place: the names of the lines it is
/// indented beneath, then its own, joined by `/`.
fn placed(text: &str) -> Vec<(String, &str)> {
    let mut open: Vec<(usize, String)> = Vec::new();
    text.lines()
        .map(|line| {
            let body = line.trim_start();
            let indent = line.len() - body.len();
            while open.last().is_some_and(|(at, _)| *at >= indent) {
                open.pop();
            }
            let parent = open.last().map_or("", |(_, place)| place.as_str());
            let place = match name(body) {
                Some(name) => format!("{parent}/{name}"),
                None => parent.to_owned(),
            };
            open.push((indent, place.clone()));
            (place, line)
        })
        .collect()
}

/// The name a line opens with, `balance` in `balance: 100`: a word of
/// letters, digits, `_`, `-` and `.` that starts with a letter or `_`, or
/// a quoted one. A time (`10:42:07 sent`) or a row (`1|100`) has none.
fn name(line: &str) -> Option<&str> {
    let (name, _) = line.split_once(':')?;
    let quoted = name.len() >= 2 && name.starts_with('"') && name.ends_with('"');
    let word = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    (quoted || word).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_under_other_names_is_apart() {
        let before = "balance: 0\nprocessed: [0]\n";
        let row_added = "balance: 0\nprocessed: [1]\n  - \"evt_1\"\n";
        let credited = "balance: 100\nprocessed: [1]\n  - \"evt_1\"\n";
        assert!(apart(before, row_added, row_added, credited));
        let twice = "balance: 0\nprocessed: [2]\n  - \"evt_1\"\n  - \"evt_1\"\n";
        assert!(!apart(before, row_added, row_added, twice), "a row added to one list");
        assert!(!apart("count: 1", "count: 2", "count: 2", "count: 3"));
    }

    #[test]
    fn lines_without_a_name_share_their_parents_place() {
        assert!(!apart("1|100", "1|100\n2|100", "1|100\n2|100", "1|100\n2|100\n3|100"));
        assert!(
            !apart("", "10:42:07 sent", "10:42:07 sent", "10:42:07 sent\n10:43:01 sent"),
            "a time is no name"
        );
        assert!(
            !apart("a: 1", "a: 1", "a: 1", "b: 2"),
            "no change on one side is no place"
        );
    }
}
