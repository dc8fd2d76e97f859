//! Where in a probe's output a change happened: under which names. One
//! event's work may write in two places at two times (the event's row at
//! once, the credit from a queue), and a move elsewhere than the first
//! attempt moved may be the rest of its work rather than a duplicate's.

use std::collections::{BTreeMap, BTreeSet};

/// True when the lines that differ from `a` to `b` and those that differ
/// from `c` to `d` sit in places none of the others share. A line that
/// changed its value sits at its name (`balance` in `balance: 100`), under
/// the names of the lines it is indented beneath; one that came or went
/// sits in what holds it: two rows added to one dump, or two orders to
/// one object under names of their own, share a place.
pub fn apart(a: &str, b: &str, c: &str, d: &str) -> bool {
    let first = changed_places(a, b);
    let later = changed_places(c, d);
    !first.is_empty() && !later.is_empty() && first.is_disjoint(&later)
}

/// The places of the lines one of `from` and `to` holds more often than
/// the other: their order aside, as the reads are compared.
fn changed_places(from: &str, to: &str) -> BTreeSet<String> {
    let (from, to) = (placed(from), placed(to));
    let named = |lines: &[Placed<'_>]| -> BTreeSet<String> { lines.iter().filter_map(Placed::path).collect() };
    let in_both: BTreeSet<String> = named(&from).intersection(&named(&to)).cloned().collect();
    let mut lines: BTreeMap<&Placed<'_>, i64> = BTreeMap::new();
    for line in &from {
        *lines.entry(line).or_default() += 1;
    }
    for line in &to {
        *lines.entry(line).or_default() -= 1;
    }
    lines
        .into_iter()
        .filter(|(_, count)| *count != 0)
        .map(|(line, _)| match line.path() {
            Some(path) if in_both.contains(&path) => path,
            _ => format!("{}/*", line.parent),
        })
        .collect()
}

/// A line of probe output, with the names of the lines it is indented
/// beneath, joined by `/`, and its own name when it has one.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Placed<'a> {
    parent: String,
    name: Option<&'a str>,
    line: &'a str,
}

impl Placed<'_> {
    /// Where the line's name puts it, when it has one.
    fn path(&self) -> Option<String> {
        self.name.map(|name| format!("{}/{name}", self.parent))
    }
}

/// Each line of `text`, placed.
fn placed(text: &str) -> Vec<Placed<'_>> {
    let mut open: Vec<(usize, String)> = Vec::new();
    text.lines()
        .map(|line| {
            let body = line.trim_start();
            let indent = line.len() - body.len();
            while open.last().is_some_and(|(at, _)| *at >= indent) {
                open.pop();
            }
            let parent = open.last().map_or("", |(_, path)| path.as_str()).to_owned();
            let placed = Placed {
                name: name(body),
                parent,
                line,
            };
            open.push((indent, placed.path().unwrap_or_else(|| placed.parent.clone())));
            placed
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
    fn names_that_came_or_went_share_what_holds_them() {
        let one = "order_1001: \"paid\"\n";
        let two = "order_1001: \"paid\"\norder_1002: \"paid\"\n";
        let three = "order_1001: \"paid\"\norder_1002: \"paid\"\norder_1003: \"paid\"\n";
        assert!(
            !apart(one, two, two, three),
            "an order added each time, under names of its own"
        );
        // The order made at once, its status set later: the status changed.
        let none = "orders: {0}\n";
        let pending = "orders: {1}\n  evt_1: {1}\n    status: \"pending\"\n";
        let paid = "orders: {1}\n  evt_1: {1}\n    status: \"paid\"\n";
        assert!(apart(none, pending, pending, paid));
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
