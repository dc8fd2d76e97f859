//! How a probe's output changed between two reads, so two changes can be compared.
//!
//! A probe prints a balance, a row count, a JSON object or a dump. When two
//! reads hold the same tokens in the same places, the change is how each
//! token moved: a count or an amount by how much, any other value (a word,
//! an ID, a timestamp) only whether it was replaced. When the output's shape
//! changed (a dump that grew), it is the lines added and removed.

use std::collections::BTreeMap;

use portpreview_shared::text::counted;

use token::{pair_one_to_one, tokens, Commas, Token, PLACEHOLDERS};

mod large;
mod multiplied;
mod token;

pub use large::{large_move, LargeMove};
pub use multiplied::{multiplied_row, Multiplied};

/// The change between two probe reads.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Change {
    /// How far each count moved, with its place before and after.
    counts: Vec<Count>,
    /// Values that are no count (a word, an ID, a clock) replaced, appeared
    /// or gone within a line.
    replaced: usize,
    /// Lines added and removed (order ignored), when the number of lines
    /// changed: rows of a dump.
    added: usize,
    /// See `added`.
    removed: usize,
    /// The lines of the first read that did not stay as they were, in order.
    changed_lines: Vec<usize>,
    /// The lines of the second read that were added, in order.
    added_lines: Vec<usize>,
}

/// One count (a number under [`OPAQUE_FROM`](token::OPAQUE_FROM)) and how far it moved.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Count {
    before: Place,
    after: Place,
    by: f64,
}

/// A token's place: its line, and its index among the line's tokens.
type Place = (usize, usize);

impl Change {
    /// True when nothing moved.
    pub fn is_none(&self) -> bool {
        self.replaced == 0 && self.counts_nothing()
    }

    /// True when no count moved and no line came or went: at most values
    /// that count nothing (an ID, a clock) were replaced, which says
    /// nothing of how many side effects there were.
    pub fn counts_nothing(&self) -> bool {
        self.added == 0 && self.removed == 0 && self.counts.iter().all(|c| c.by == 0.0)
    }

    /// Lines added, when the number of lines grew (rows of a dump).
    pub fn lines_added(&self) -> usize {
        self.added.saturating_sub(self.removed)
    }

    /// A short description: "+1", "+1, −2", "+100, 1 value replaced", "1 line added".
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .counts
            .iter()
            .filter(|c| c.by != 0.0)
            .map(|c| signed(c.by))
            .collect();
        if self.replaced > 0 {
            parts.push(format!("{} replaced", counted(self.replaced, "value", "values")));
        }
        match (self.added, self.removed) {
            (0, 0) => {}
            (a, 0) => parts.push(format!("{} added", counted(a, "line", "lines"))),
            (0, r) => parts.push(format!("{} removed", counted(r, "line", "lines"))),
            (a, r) => parts.push(format!("{} added, {r} removed", counted(a, "line", "lines"))),
        }
        if parts.is_empty() {
            "no change".into()
        } else {
            parts.join(", ")
        }
    }

    /// How `later` (a change from this one's after) moved the count at
    /// this change's `count`'s place; `None` when it has no count there.
    /// Counts and changed lines are kept in the order of their places, so
    /// a probe of many thousand counts is compared in n log n.
    fn later_at(later: &Change, count: &Count) -> Option<f64> {
        if let Ok(at) = later.counts.binary_search_by_key(&count.after, |c| c.before) {
            return Some(later.counts[at].by);
        }
        // A line `later` left as it was holds its counts still.
        let (line, _) = count.after;
        later.changed_lines.binary_search(&line).is_err().then_some(0.0)
    }
}

fn signed(d: f64) -> String {
    if d > 0.0 {
        format!("+{}", trim(d))
    } else {
        format!("−{}", trim(-d))
    }
}

fn trim(d: f64) -> String {
    if d.fract() == 0.0 && d.abs() < 1e15 {
        return format!("{}", d as i64);
    }
    // A difference of decimals carries binary noise (20.51 − 20.41 is
    // 0.10000000000000142), which no probe printed: 12 significant digits
    // and at most 9 decimals keep what it did.
    let whole_digits = d.abs().log10().floor() as i32 + 1;
    let decimals = (12 - whole_digits).clamp(0, 9) as usize;
    let rounded = format!("{d:.decimals$}");
    match rounded.trim_end_matches('0').trim_end_matches('.') {
        "0" => format!("{d}"),
        kept => kept.to_owned(),
    }
}

/// Most token pairs one line's alignment may weigh: past it (a one-line
/// dump of megabytes) lines of different shapes count as replaced whole.
const MAX_ALIGNED: usize = 4_000_000;

/// The tokens of two reads of one line, paired: each pair's places, or
/// `None` for a token with no counterpart.
fn align(a: &[Token<'_>], b: &[Token<'_>]) -> Vec<(Option<usize>, Option<usize>)> {
    if pair_one_to_one(a, b, Token::same_place) {
        return (0..a.len()).map(|i| (Some(i), Some(i))).collect();
    }
    pair_in_order(a, b, Token::same_place)
}

/// The longest run of pairs, in order, of `a` and `b` items that `same`
/// holds for; past [`MAX_ALIGNED`] weighings, none. Each item's place, or
/// `None` for one with no counterpart.
fn pair_in_order<T>(a: &[T], b: &[T], same: impl Fn(&T, &T) -> bool) -> Vec<(Option<usize>, Option<usize>)> {
    if a.len().saturating_mul(b.len()) > MAX_ALIGNED {
        let mut pairs: Vec<_> = (0..a.len()).map(|i| (Some(i), None)).collect();
        pairs.extend((0..b.len()).map(|j| (None, Some(j))));
        return pairs;
    }
    // Longest common subsequence, walked back into pairs.
    let (n, m) = (a.len(), b.len());
    let mut best = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            best[at(i, j)] = if same(&a[i], &b[j]) {
                best[at(i + 1, j + 1)] + 1
            } else {
                best[at(i + 1, j)].max(best[at(i, j + 1)])
            };
        }
    }
    let (mut i, mut j, mut pairs) = (0, 0, Vec::new());
    while i < n || j < m {
        if i < n && j < m && same(&a[i], &b[j]) {
            pairs.push((Some(i), Some(j)));
            (i, j) = (i + 1, j + 1);
        } else if j == m || (i < n && best[at(i + 1, j)] >= best[at(i, j + 1)]) {
            pairs.push((Some(i), None));
            i += 1;
        } else {
            pairs.push((None, Some(j)));
            j += 1;
        }
    }
    pairs
}

/// The change from `before` to `after`. With as many lines in both, line
/// by line: each count's move, and how many other values were replaced.
/// Otherwise (a dump that grew) see [`change_of_shape`].
fn change(before: &str, after: &str, commas: Commas) -> Change {
    let before = no_rows_yet(before, after, commas);
    let (old, new): (Vec<&str>, Vec<&str>) = (before.lines().collect(), after.lines().collect());
    if old.len() != new.len() {
        return change_of_shape(&old, &new, commas);
    }
    let mut change = Change::default();
    for (line, (was, is)) in old.iter().zip(&new).enumerate() {
        if was != is {
            change.changed_lines.push(line);
            change.line_moved((line, &tokens(was, commas)), (line, &tokens(is, commas)));
        }
    }
    change
}

/// `before` as what it stands for when a probe said there was nothing
/// yet (a blank line, `null`, `(none)`, `-`): the empty list, when the
/// next read is a JSON list (`sqlite3 -json`, Postgres' `json_agg` print
/// nothing or `null` for no rows), or no lines at all, so that the first
/// row reads as a line added, as the next one will. Otherwise the first
/// row would read as the list's every line added, or as the placeholder
/// replaced, and a burst adding one more row as another kind of change.
/// A lone count after it is left to be read as a count moved from zero
/// (`SELECT sum(amount)` over no rows prints a blank line).
fn no_rows_yet<'a>(before: &'a str, after: &str, commas: Commas) -> &'a str {
    // Nothing still: no row came, and nothing moved.
    if !says_nothing(before) || says_nothing(after) {
        return before;
    }
    if after.starts_with(super::json_state::LIST_OPENING) {
        return super::json_state::EMPTY_LIST;
    }
    match tokens(after.trim(), commas).as_slice() {
        [Token::Count(_)] => before,
        _ => "",
    }
}

/// Whether a whole read says there is nothing: blank, or one placeholder
/// word, bracketed or not (`null`, `None`, `(none)`, `-`, `<empty>`).
fn says_nothing(read: &str) -> bool {
    let word = read.trim();
    let word = ["()", "[]", "<>"]
        .iter()
        .find_map(|pair| word.strip_prefix(&pair[..1])?.strip_suffix(&pair[1..]))
        .unwrap_or(word)
        .trim();
    PLACEHOLDERS.contains(&word)
        || ["-", "none", "empty", "nothing", "n/a"]
            .iter()
            .any(|nothing| word.eq_ignore_ascii_case(nothing))
}

/// [`change`] of one line, an empty one included (which holds no lines
/// to [`str::lines`]).
fn line_change(before: &str, after: &str, commas: Commas) -> Change {
    let mut change = Change::default();
    if before != after {
        change.changed_lines.push(0);
        change.line_moved((0, &tokens(before, commas)), (0, &tokens(after, commas)));
    }
    change
}

impl Change {
    /// Adds how one line moved, given its number and tokens in each read:
    /// each count's move, and how many other values were replaced.
    fn line_moved(&mut self, (old, a): (usize, &[Token<'_>]), (new, b): (usize, &[Token<'_>])) {
        // An empty line that became a number: `SELECT sum(amount)` over no
        // rows prints nothing, then the first amount.
        if let ([], [Token::Count(y)]) = (a, b) {
            return self.counts.push(Count {
                before: (old, 0),
                after: (new, 0),
                by: *y,
            });
        }
        // A value replaced by one of another kind (`-` by `evt_1`, `0` by
        // a clock) goes and comes: one replacement, not two.
        let (mut gone, mut came) = (0, 0);
        for pair in align(a, b) {
            match pair {
                // A count, or a count that a placeholder stood for (zero).
                (Some(i), Some(j)) => match (&a[i], &b[j]) {
                    (x, y) if x.is_count() || y.is_count() => self.counts.push(Count {
                        before: (old, i),
                        after: (new, j),
                        by: y.count_or_zero() - x.count_or_zero(),
                    }),
                    (x, y) if x != y => self.replaced += 1,
                    _ => {}
                },
                // A value that appeared or went within a line (the first
                // row's max(id) where there was none): replaced.
                (Some(_), None) => gone += 1,
                (None, Some(_)) => came += 1,
                (None, None) => {}
            }
        }
        self.replaced += gone.max(came);
    }
}

/// Whether two lines are one line whose values moved: the same words and
/// signs around them, a word's plural read as the word (`(1 row)` →
/// `(2 rows)`), a value standing where there was none (`0|` → `1|1`).
fn same_line(a: &[Token<'_>], b: &[Token<'_>]) -> bool {
    fn words<'t>(tokens: &'t [Token<'_>]) -> impl Iterator<Item = &'t str> {
        tokens.iter().filter_map(|token| match token {
            Token::Text(text) if !PLACEHOLDERS.contains(text) => Some(text.strip_suffix('s').unwrap_or(text)),
            _ => None,
        })
    }
    !a.is_empty() && !b.is_empty() && words(a).eq(words(b))
}

/// [`change`] when lines came or went: a dump that grew, or a balance
/// beside a list of the events handled. A line found in both reads stayed,
/// wherever it moved (a dump in no set order). Of the others, lines with
/// the same words, in order, are one line whose values moved (`balance:
/// 100` → `balance: 700` while a row was added), so a count beside the
/// rows is compared too; the rest were added or removed.
fn change_of_shape(old: &[&str], new: &[&str], commas: Commas) -> Change {
    let mut unmatched: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (j, line) in new.iter().enumerate().rev() {
        unmatched.entry(line).or_default().push(j);
    }
    let gone: Vec<usize> = (0..old.len())
        .filter(|&i| unmatched.get_mut(old[i]).and_then(Vec::pop).is_none())
        .collect();
    let mut came: Vec<usize> = unmatched.into_values().flatten().collect();
    came.sort_unstable();
    let was: Vec<Vec<Token<'_>>> = gone.iter().map(|&i| tokens(old[i], commas)).collect();
    let is: Vec<Vec<Token<'_>>> = came.iter().map(|&j| tokens(new[j], commas)).collect();
    let mut change = Change::default();
    for pair in pair_in_order(&was, &is, |a, b| same_line(a, b)) {
        match pair {
            (Some(x), Some(y)) => change.line_moved((gone[x], &was[x]), (came[y], &is[y])),
            // A blank line is no row: `sqlite3 -line` puts one between
            // records, so the first record comes without it.
            (Some(x), None) if was[x].is_empty() => {}
            (None, Some(y)) if is[y].is_empty() => {}
            (Some(_), None) => change.removed += 1,
            (None, Some(y)) => {
                change.added += 1;
                change.added_lines.push(came[y]);
            }
            (None, None) => {}
        }
    }
    change.changed_lines = gone;
    change
}

/// What a probe that prints nothing for an empty table would have printed
/// with its header: `sqlite3 -header -column` or `-csv -header` print a
/// header and a rule only with the first row, which would read as lines
/// the first delivery added beside its row. When `before` is blank, the
/// lines `middle` added that hold no value (only words and signs), that
/// `last` still holds, and that no line `last` added resembles; `None`
/// when there are none.
pub fn framing(before: &str, middle: &str, last: &str) -> Option<String> {
    if !before.trim().is_empty() {
        return None;
    }
    let commas = Commas::Group;
    let valueless = |line: &&str| {
        let tokens = tokens(line, commas);
        !tokens.is_empty() && tokens.iter().all(|t| matches!(t, Token::Text(_)))
    };
    let last_tokens: Vec<Vec<Token<'_>>> = last.lines().map(|line| tokens(line, commas)).collect();
    let added = change(middle, last, commas).added_lines;
    let framing: Vec<&str> = (middle.lines())
        .filter(valueless)
        .filter(|line| {
            let tokens = tokens(line, commas);
            last_tokens.contains(&tokens)
                && !added
                    .iter()
                    .any(|&j| pair_one_to_one(&tokens, &last_tokens[j], Token::same_kind))
        })
        .collect();
    (!framing.is_empty()).then(|| framing.iter().map(|line| format!("{line}\n")).collect())
}

/// Whether `later`, the change from `first`'s after, is the same as
/// `first`: each count both moved as far, and as many lines came and
/// went. Values that count nothing (IDs, clocks, words) are not compared:
/// they tell no second side effect from a first, and a clock may tick
/// during one and not the other.
fn same_change(first: &Change, later: &Change) -> bool {
    let counts_agree = first.counts.iter().all(|count| {
        Change::later_at(later, count)
            .is_none_or(|by| (count.by - by).abs() <= 1e-9 * count.by.abs().max(by.abs()).max(1.0))
    });
    counts_agree && first.added == later.added && first.removed == later.removed
}

/// How many times larger `later` is than `first` when both move one count
/// the same way, or add lines.
pub fn multiple(first: &Change, later: &Change) -> Option<f64> {
    let ratio = match first.counts.iter().find(|c| c.by != 0.0) {
        Some(count) => Change::later_at(later, count)? / count.by,
        None if first.removed == 0 && later.removed == 0 && first.added > 0 => later.added as f64 / first.added as f64,
        None => return None,
    };
    // Decimals carry binary noise: +0.3 over +0.1 is 2.9999999999999996.
    let whole = ratio.round();
    let ratio = match (ratio - whole).abs() <= 1e-9 * whole.abs() {
        true => whole,
        false => ratio,
    };
    (ratio > 0.0).then_some(ratio)
}

/// The changes between each read and the next, all under the reading of
/// commas that leaves fewer values unpaired or replaced: the one whose
/// lines keep their shape. The grouping one wins a tie.
pub fn changes(reads: &[&str]) -> Vec<Change> {
    let under = |commas| -> Vec<Change> { reads.windows(2).map(|w| change(w[0], w[1], commas)).collect() };
    let replaced = |changes: &[Change]| changes.iter().map(|c| c.replaced).sum::<usize>();
    let [grouped, separate] = Commas::BOTH.map(under);
    if replaced(&separate) < replaced(&grouped) {
        separate
    } else {
        grouped
    }
}

/// Whether the change from `middle` to `last` (a burst) moved the state as
/// the change from `before` to `middle` (one delivery) did. Line by line,
/// as each line may need its own reading of commas (`balance: 1,050` and
/// `row: 9,950` from a CSV): a line agrees when it moves alike under a
/// reading that counts something on it. A burst that acted twice agrees
/// under neither: read apart, equal moves of each part make equal wholes;
/// read whole, three-digit parts cannot make up a thousand. A reading that
/// counts nothing on a line (four CSV columns read whole are one number
/// as long as an ID) is no evidence, and is skipped.
pub fn moves_alike(before: &str, middle: &str, last: &str) -> bool {
    let (a, b, c): (Vec<&str>, Vec<&str>, Vec<&str>) = (
        before.lines().collect(),
        middle.lines().collect(),
        last.lines().collect(),
    );
    if a.len() != b.len() || b.len() != c.len() {
        // Rows came or went: compared by lines added and removed, and by
        // how the counts on lines of one shape moved.
        return Commas::BOTH
            .into_iter()
            .any(|commas| same_change(&change(before, middle, commas), &change(middle, last, commas)));
    }
    a.iter().zip(&b).zip(&c).all(|((x, y), z)| line_moves_alike(x, y, z))
}

/// [`moves_alike`] for one line.
fn line_moves_alike(before: &str, middle: &str, last: &str) -> bool {
    let mut counted = false;
    for commas in Commas::BOTH {
        let (first, later) = (line_change(before, middle, commas), line_change(middle, last, commas));
        if first.counts_nothing() && later.counts_nothing() {
            continue;
        }
        if same_change(&first, &later) {
            return true;
        }
        counted = true;
    }
    !counted
}

#[cfg(test)]
mod tests;
