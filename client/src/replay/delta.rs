//! How a probe's output changed between two reads, so two changes can be compared.
//!
//! A probe prints a balance, a row count, a JSON object or a dump. When two
//! reads hold the same tokens in the same places, the change is how each
//! token moved: a count or an amount by how much, any other value (a word,
//! an ID, a timestamp) only whether it was replaced. When the output's shape
//! changed (a dump that grew), it is the lines added and removed.

use std::collections::BTreeMap;

/// Numbers this large are clocks or generated IDs (epoch seconds pass 1.7e9,
/// milliseconds 1.7e12): how far one moved counts nothing, so it is only
/// compared as replaced or not.
const OPAQUE_FROM: f64 = 1e9;

/// The change between two probe reads.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// The same tokens in the same places: how each one moved.
    Tokens(Vec<Moved>),
    /// Lines added and removed, counted (order ignored).
    Lines {
        /// Lines present after but not before.
        added: usize,
        /// Lines present before but not after.
        removed: usize,
    },
}

/// How one token of the output moved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Moved {
    /// A count or an amount moved by this much (0 when it held still).
    By(f64),
    /// A value that is no count (a word, an ID, a timestamp) was replaced.
    Replaced,
}

impl Moved {
    fn is_still(self) -> bool {
        self == Moved::By(0.0)
    }
}

impl Change {
    /// True when nothing moved.
    pub fn is_none(&self) -> bool {
        match self {
            Change::Tokens(moved) => moved.iter().all(|m| m.is_still()),
            Change::Lines { added, removed } => *added == 0 && *removed == 0,
        }
    }

    /// A short description: "+1", "+1, −2", "+100, 1 value replaced", "1 line added".
    pub fn describe(&self) -> String {
        match self {
            Change::Tokens(moved) => {
                let mut parts: Vec<String> = moved
                    .iter()
                    .filter_map(|m| match m {
                        Moved::By(d) if *d != 0.0 => Some(signed(*d)),
                        _ => None,
                    })
                    .collect();
                let replaced = moved.iter().filter(|m| **m == Moved::Replaced).count();
                if replaced > 0 {
                    parts.push(format!("{replaced} value{} replaced", plural(replaced)));
                }
                if parts.is_empty() {
                    "no change".into()
                } else {
                    parts.join(", ")
                }
            }
            Change::Lines { added, removed } => match (added, removed) {
                (0, 0) => "no change".into(),
                (a, 0) => format!("{a} line{} added", plural(*a)),
                (0, r) => format!("{r} line{} removed", plural(*r)),
                (a, r) => format!("{a} line{} added, {r} removed", plural(*a)),
            },
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
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
        format!("{}", d as i64)
    } else {
        format!("{d}")
    }
}

/// One token of probe output. Whitespace only separates tokens: a table
/// whose columns widen as a number grows has the same tokens.
#[derive(Debug, Clone, PartialEq)]
enum Token<'a> {
    /// A standalone number.
    Number(f64),
    /// A word (letters, digits and `_`: digits inside identifiers such as
    /// `evt_1Pq` and `v1` belong to it), a date-time, or one other character.
    Text(&'a str),
}

/// Splits probe output into tokens.
fn tokens(text: &str) -> Vec<Token<'_>> {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut rest = text;
    let mut previous: Option<char> = None;
    while let Some(c) = rest.chars().next() {
        let after_word = previous.is_some_and(|p| word(p) || p == '.');
        let taken = if c.is_whitespace() {
            c.len_utf8()
        } else if let Some(len) = date_time(rest).filter(|_| !after_word) {
            out.push(Token::Text(&rest[..len]));
            len
        } else if let Some((len, value)) = number(rest).filter(|_| !after_word) {
            out.push(Token::Number(value));
            len
        } else if word(c) {
            let len = rest.find(|c: char| !word(c)).unwrap_or(rest.len());
            out.push(Token::Text(&rest[..len]));
            len
        } else {
            out.push(Token::Text(&rest[..c.len_utf8()]));
            c.len_utf8()
        };
        previous = rest[..taken].chars().last();
        rest = &rest[taken..];
    }
    out
}

/// A standalone number at the start of `text` (`5`, `-2`, `5.5`), not the
/// start of a word (`1Pq`): its length and value.
fn number(text: &str) -> Option<(usize, f64)> {
    let bytes = text.as_bytes();
    let digits = |from: usize| bytes[from..].iter().take_while(|b| b.is_ascii_digit()).count();
    let sign = usize::from(bytes.first() == Some(&b'-'));
    let whole = digits(sign);
    if whole == 0 {
        return None;
    }
    let mut len = sign + whole;
    if bytes.get(len) == Some(&b'.') && bytes.get(len + 1).is_some_and(u8::is_ascii_digit) {
        len += 1 + digits(len + 1);
    }
    let standalone = text[len..]
        .chars()
        .next()
        .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
    standalone.then(|| text[..len].parse().ok().map(|value| (len, value)))?
}

/// The length of an ISO 8601 date or date-time at the start of `text`
/// (`2026-12-02`, `2026-12-02T14:00:05.123Z`, `2026-12-02 14:00:05+01:00`):
/// one value, not a handful of small numbers that move at random.
fn date_time(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let digits_at = |at: usize, n: usize| b.len() >= at + n && b[at..at + n].iter().all(u8::is_ascii_digit);
    if !(digits_at(0, 4) && b.get(4) == Some(&b'-') && digits_at(5, 2) && b.get(7) == Some(&b'-') && digits_at(8, 2)) {
        return None;
    }
    let mut len = 10;
    if matches!(b.get(10), Some(b'T' | b' ')) && digits_at(11, 2) && b.get(13) == Some(&b':') && digits_at(14, 2) {
        len = 16;
        if b.get(16) == Some(&b':') && digits_at(17, 2) {
            len = 19;
            if b.get(19) == Some(&b'.') {
                len += 1 + b[20..].iter().take_while(|c| c.is_ascii_digit()).count();
            }
        }
        match b.get(len) {
            Some(b'Z') => len += 1,
            Some(b'+' | b'-') if digits_at(len + 1, 2) => {
                len += 3;
                if b.get(len) == Some(&b':') && digits_at(len + 1, 2) {
                    len += 3;
                } else if digits_at(len, 2) {
                    len += 2;
                }
            }
            _ => {}
        }
    }
    Some(len)
}

/// How one token moved from `a` to `b`; `None` when they are of two kinds.
fn moved(a: &Token<'_>, b: &Token<'_>) -> Option<Moved> {
    Some(match (a, b) {
        (Token::Number(x), Token::Number(y)) if x == y => Moved::By(0.0),
        (Token::Number(x), Token::Number(y)) if x.abs().max(y.abs()) >= OPAQUE_FROM => Moved::Replaced,
        (Token::Number(x), Token::Number(y)) => Moved::By(y - x),
        (Token::Text(x), Token::Text(y)) if x == y => Moved::By(0.0),
        (Token::Text(_), Token::Text(_)) => Moved::Replaced,
        _ => return None,
    })
}

/// The change from `before` to `after`: token by token when both have the
/// same shape, lines added and removed otherwise.
pub fn change(before: &str, after: &str) -> Change {
    let (a, b) = (tokens(before), tokens(after));
    if a.len() == b.len() {
        if let Some(moved) = a.iter().zip(&b).map(|(x, y)| moved(x, y)).collect() {
            return Change::Tokens(moved);
        }
    }
    let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
    for line in before.lines() {
        *counts.entry(line).or_default() -= 1;
    }
    for line in after.lines() {
        *counts.entry(line).or_default() += 1;
    }
    let added = counts.values().filter(|c| **c > 0).map(|c| *c as usize).sum();
    let removed = counts.values().filter(|c| **c < 0).map(|c| (-*c) as usize).sum();
    Change::Lines { added, removed }
}

/// Whether two changes are the same: each count moved as far, each other
/// value replaced in both or in neither.
pub fn same_change(a: &Change, b: &Change) -> bool {
    match (a, b) {
        (Change::Tokens(x), Change::Tokens(y)) => {
            x.len() == y.len()
                && x.iter().zip(y).all(|pair| match pair {
                    (Moved::By(p), Moved::By(q)) => (p - q).abs() <= 1e-9 * p.abs().max(q.abs()).max(1.0),
                    (Moved::Replaced, Moved::Replaced) => true,
                    _ => false,
                })
        }
        (Change::Lines { added: a1, removed: r1 }, Change::Lines { added: a2, removed: r2 }) => a1 == a2 && r1 == r2,
        _ => false,
    }
}

/// How many times larger `b` is than `a` when both move one count the same way.
pub fn multiple(a: &Change, b: &Change) -> Option<f64> {
    let (Change::Tokens(x), Change::Tokens(y)) = (a, b) else {
        let (Change::Lines { added: a1, removed: 0 }, Change::Lines { added: a2, removed: 0 }) = (a, b) else {
            return None;
        };
        return (*a1 > 0).then(|| *a2 as f64 / *a1 as f64);
    };
    let (i, base) = x.iter().enumerate().find_map(|(i, m)| match m {
        Moved::By(d) if *d != 0.0 => Some((i, *d)),
        _ => None,
    })?;
    let Some(Moved::By(d)) = y.get(i) else {
        return None;
    };
    let ratio = d / base;
    (ratio > 0.0).then_some(ratio)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_inside_identifiers_belong_to_their_words() {
        assert_eq!(
            tokens("evt_1Pq balance: 5.5 rows=-2 v1"),
            vec![
                Token::Text("evt_1Pq"),
                Token::Text("balance"),
                Token::Text(":"),
                Token::Number(5.5),
                Token::Text("rows"),
                Token::Text("="),
                Token::Number(-2.0),
                Token::Text("v1"),
            ]
        );
    }

    #[test]
    fn a_counter_that_moved_ten_times_as_far_is_a_different_change() {
        let single = change("count 5\n", "count 6\n");
        let burst = change("count 6\n", "count 16\n");
        assert_eq!(single, Change::Tokens(vec![Moved::By(0.0), Moved::By(1.0)]));
        assert!(!same_change(&single, &burst));
        assert_eq!(multiple(&single, &burst), Some(10.0));
        assert!(same_change(&single, &change("count 6", "count 7")));
    }

    #[test]
    fn a_count_beside_a_replaced_value_is_still_compared() {
        // The balance grew four times as far though the last event's ID,
        // replaced both times, makes the two outputs differ in more than numbers.
        let single = change("balance: 0\nlast_event: -\n", "balance: 100\nlast_event: evt_A\n");
        let burst = change("balance: 100\nlast_event: evt_A\n", "balance: 500\nlast_event: evt_B\n");
        assert_eq!(single.describe(), "+100, 1 value replaced");
        assert!(!same_change(&single, &burst));
        assert_eq!(multiple(&single, &burst), Some(4.0));
        let json = |balance, last| format!(r#"{{"balance": {balance}, "last_event": "{last}"}}"#);
        let single = change(&json(0, "-"), &json(100, "evt_A"));
        assert!(!same_change(&single, &change(&json(100, "evt_A"), &json(500, "evt_B"))));
        assert!(same_change(&single, &change(&json(100, "evt_A"), &json(200, "evt_B"))));
    }

    #[test]
    fn clocks_and_generated_ids_count_only_as_replaced() {
        let single = change(
            "orders: 3\nlast_order_at: 1764684000123\n",
            "orders: 4\nlast_order_at: 1764684001175\n",
        );
        let burst = change(
            "orders: 4\nlast_order_at: 1764684001175\n",
            "orders: 5\nlast_order_at: 1764684001391\n",
        );
        assert!(same_change(&single, &burst), "{single:?} {burst:?}");
        assert!(!same_change(
            &single,
            &change(
                "orders: 4\nlast_order_at: 1764684001175\n",
                "orders: 6\nlast_order_at: 1764684001391\n"
            )
        ));
        let at = |n, time| format!("orders={n} at {time}");
        let single = change(&at(1, "2026-12-02T14:00:00.120Z"), &at(2, "2026-12-02T14:00:01.050Z"));
        let burst = change(&at(2, "2026-12-02T14:00:01.050Z"), &at(3, "2026-12-02 14:07:59+01:00"));
        assert!(same_change(&single, &burst), "{single:?} {burst:?}");
        assert_eq!(single.describe(), "+1, 1 value replaced");
    }

    #[test]
    fn padding_that_widens_with_a_number_is_no_change_of_shape() {
        let single = change(" balance \n---------\n       9\n", " balance \n---------\n      10\n");
        assert_eq!(single.describe(), "+1");
    }

    #[test]
    fn dumps_compare_by_lines_added() {
        let single = change("a\n", "a\nevt_x 100\n");
        let burst = change("a\nevt_x 100\n", "a\nevt_x 100\nevt_y 100\nevt_y 100\n");
        assert_eq!(single, Change::Lines { added: 1, removed: 0 });
        assert!(!same_change(&single, &burst));
        assert_eq!(multiple(&single, &burst), Some(2.0));
        assert_eq!(burst.describe(), "2 lines added");
    }

    #[test]
    fn no_movement_is_none() {
        assert!(change("x 1", "x 1").is_none());
        assert_eq!(change("x 1", "x 1").describe(), "no change");
        assert_eq!(change("x 1", "x 3").describe(), "+2");
    }
}
