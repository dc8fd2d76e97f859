//! A row a burst added holding a whole multiple of what the row one
//! delivery added held: copies that all acted on the event's one row.

use super::change;
use super::token::{is_word, pair_one_to_one, tokens, Commas, Token};

/// A row a burst added holding a multiple of what the row one delivery
/// added held; see [`multiplied_row`].
#[derive(Debug, Clone, PartialEq)]
pub struct Multiplied {
    /// The line the single delivery added.
    pub one: String,
    /// The line the burst added.
    pub all: String,
    /// How many times the single delivery's count the burst's is.
    pub times: usize,
}

/// A count on a line a burst added that is 2 to `copies` times the count
/// on the line one delivery added: `evt_B|1000` where the baseline added
/// `evt_A|100`. Copies acted on the event's one row (`amount = amount +
/// 100` on each), which adds as many lines as one delivery does.
pub fn multiplied_row(before: &str, middle: &str, last: &str, copies: usize) -> Option<Multiplied> {
    let (middle_lines, last_lines): (Vec<&str>, Vec<&str>) = (middle.lines().collect(), last.lines().collect());
    for commas in Commas::BOTH {
        let numbered_to = highest_first(before, commas);
        let (first, later) = (change(before, middle, commas), change(middle, last, commas));
        let was: Vec<Vec<Token<'_>>> = (first.added_lines.iter())
            .map(|&j| tokens(middle_lines[j], commas))
            .collect();
        let is: Vec<Vec<Token<'_>>> = (later.added_lines.iter())
            .map(|&j| tokens(last_lines[j], commas))
            .collect();
        for (x, y) in pair_added(&was, &is) {
            let Some(times) = multiple_at(&was[x], &is[y], copies, numbered_to) else {
                continue;
            };
            return Some(Multiplied {
                one: middle_lines[first.added_lines[x]].to_owned(),
                all: last_lines[later.added_lines[y]].to_owned(),
                times,
            });
        }
    }
    None
}

/// Pairs the lines one delivery added with those a burst added, wherever
/// they landed (a JSON list is read sorted, so a row's lines need not be
/// next to each other): first lines of the same words (`amount: 100` and
/// `amount: 400`), then lines of the same kinds of tokens, words aside
/// (`evt_A|100` and `evt_B|400`: the burst's event has its own ID).
fn pair_added(was: &[Vec<Token<'_>>], is: &[Vec<Token<'_>>]) -> Vec<(usize, usize)> {
    let mut taken = vec![false; is.len()];
    let mut pairs = Vec::new();
    for loose in [false, true] {
        let matches = |x: &Token<'_>, y: &Token<'_>| if loose { x.same_kind(y) } else { x.same_place(y) };
        for (x, line) in was.iter().enumerate() {
            if pairs.iter().any(|&(paired, _)| paired == x) {
                continue;
            }
            if let Some(y) = (0..is.len()).find(|&y| !taken[y] && pair_one_to_one(line, &is[y], matches)) {
                taken[y] = true;
                pairs.push((x, y));
            }
        }
    }
    pairs
}

/// How many times the count in its place on `a` a count on `b` is, when
/// that is 2 to `copies`. A row's ID is no amount: one under a name such
/// as `id` is not compared, nor one first on a line of several values
/// (after a table's border, if any) as a sequence numbers rows: at most
/// `copies` above the baseline's (each copy's insert may take a number,
/// kept or not), or a baseline's that came next after `numbered_to`, the
/// highest such number before it. Nor is a lone count one more than the
/// baseline's. Otherwise the first value is an amount (`500|evt_B` after
/// `100|evt_A`). Nor is a running total, the baseline's value plus another
/// count on the line (`evt_B|1250|2500` after `evt_A|1250|1250`).
fn multiple_at(a: &[Token<'_>], b: &[Token<'_>], copies: usize, numbered_to: f64) -> Option<usize> {
    let counts: Vec<f64> = b
        .iter()
        .filter_map(|t| match t {
            Token::Count(n) => Some(*n),
            _ => None,
        })
        .collect();
    a.iter().zip(b).enumerate().find_map(|(k, pair)| {
        let (Token::Count(v), Token::Count(w)) = pair else {
            return None;
        };
        let first = first_value(b) == Some(k);
        let handed_out = w > v && w - v <= copies as f64;
        let came_next = *v > numbered_to && v - numbered_to <= copies as f64 + 1.0;
        let id_like = (first && b.len() > k + 1 && (handed_out || came_next)) || id_named(&b[..k]);
        let next = b.len() == 1 && (w - v - 1.0).abs() <= 1e-9;
        let running = counts
            .iter()
            .filter(|n| (*n - w).abs() > 1e-9)
            .any(|n| (v + n - w).abs() <= 1e-9);
        let times = w / v;
        let whole = v.abs() > 0.0 && (times - times.round()).abs() <= 1e-9 * times.abs();
        let multiple = whole && (2.0..=copies as f64).contains(&times.round());
        (multiple && !id_like && !next && !running).then(|| times.round() as usize)
    })
}

/// The highest count first on a line of `text` (after a table's border,
/// if any), 0 for none: how far a sequence numbering its rows had got.
fn highest_first(text: &str, commas: Commas) -> f64 {
    text.lines()
        .filter_map(|line| {
            let tokens = tokens(line, commas);
            let at = first_value(&tokens)?;
            match tokens[at] {
                Token::Count(n) if tokens.len() > at + 1 => Some(n),
                _ => None,
            }
        })
        .fold(0.0, f64::max)
}

/// Where a line's first value stands: past a table's border, if any.
fn first_value(tokens: &[Token<'_>]) -> Option<usize> {
    tokens.iter().position(|t| !matches!(t, Token::Text(s) if !is_word(s)))
}

/// Whether the word nearest before a count names an ID (`id`, `rid`,
/// `order_id`, `seq`).
fn id_named(before: &[Token<'_>]) -> bool {
    let word = before.iter().rev().find_map(|token| match token {
        Token::Text(text) if is_word(text) => Some(*text),
        _ => None,
    });
    word.is_some_and(|w| {
        let w = w.to_ascii_lowercase();
        let short_id = w.ends_with("id") && w.len() <= 5 && w != "paid";
        short_id || w.ends_with("_id") || matches!(w.as_str(), "seq" | "pk" | "n" | "no" | "num" | "rownum")
    })
}
