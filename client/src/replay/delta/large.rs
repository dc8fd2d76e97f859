//! A number too large to count for sure that a burst moved as far as one
//! delivery moved it, or a whole multiple of that: an amount in small
//! units (micros, wei) that one copy or several added to, or, rarely, a
//! clock.

use std::collections::BTreeMap;

use super::token::{tokens, Commas, Token};

/// A number of a billion or more (as long as a clock or an ID) on one
/// line of three reads, moved `times` as far by a burst as by one delivery
/// (once as far, for a burst that acted once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LargeMove {
    /// The number in the three reads.
    pub values: [i128; 3],
    /// How many times the single delivery's move the burst's is.
    pub times: usize,
}

/// Trailing zeros a single delivery's move must end in. An amount in
/// micros or wei moves by round sums; a clock by whatever time passed, so
/// a clock's two moves are whole multiples of each other only by chance,
/// and both round too by much less.
const ROUND_ZEROS: u32 = 2;

/// A number on a line of the same words in all three reads, as large as
/// a clock or an ID (so no count), that moved from `before` to `middle`
/// by a round amount and from `middle` to `last` by 1 to `copies` times
/// that: an amount printed in small units, which a burst whose copies
/// each added to moved more than once as far. A number that crossed into
/// that size counts too (`100000000` then `1100000000`). Of several, the
/// one moved furthest: one amount the copies added to is enough.
pub fn large_move(before: &str, middle: &str, last: &str, copies: usize) -> Option<LargeMove> {
    let reads = [before, middle, last].map(lines_by_words);
    let mut found: Option<LargeMove> = None;
    for (words, middle_numbers) in &reads[1] {
        let (Some(before_numbers), Some(last_numbers)) = (reads[0].get(words), reads[2].get(words)) else {
            continue;
        };
        for (at, m) in middle_numbers.iter().enumerate() {
            let (Some(b), Some(l)) = (before_numbers.get(at), last_numbers.get(at)) else {
                continue;
            };
            let Some(times) = multiplied(*b, *m, *l, copies) else {
                continue;
            };
            if found.as_ref().is_none_or(|furthest| times > furthest.times) {
                found = Some(LargeMove {
                    values: [*b, *m, *l],
                    times,
                });
            }
        }
    }
    found
}

/// How many times `m - b` the move `l - m` is, when one of the three is
/// as large as a clock, the first move is round, and the ratio is a whole
/// 1 to `copies`.
fn multiplied(b: i128, m: i128, l: i128, copies: usize) -> Option<usize> {
    let large = [b, m, l]
        .iter()
        .any(|n| n.unsigned_abs() >= super::token::OPAQUE_FROM as u128);
    let (first, later) = (m.checked_sub(b)?, l.checked_sub(m)?);
    let round = first != 0 && first % 10i128.pow(ROUND_ZEROS) == 0;
    if !large || !round || later % first != 0 {
        return None;
    }
    let times = usize::try_from(later / first).ok()?;
    (1..=copies).contains(&times).then_some(times)
}

/// Each line whose words (numbers aside) no other line of `read` shares,
/// by those words, with its whole numbers in order. A line holding any
/// other value is left out: no number on it can be told apart for sure.
fn lines_by_words(read: &str) -> BTreeMap<Vec<&str>, Vec<i128>> {
    let mut lines: BTreeMap<Vec<&str>, (usize, Option<Vec<i128>>)> = BTreeMap::new();
    for line in read.lines() {
        let (mut words, mut numbers) = (Vec::new(), Some(Vec::new()));
        for token in tokens(line, Commas::Group) {
            let number = match token {
                Token::Text(text) => {
                    words.push(text);
                    continue;
                }
                Token::Count(value) => (value.fract() == 0.0).then_some(value as i128),
                Token::Opaque(text) => text.trim_matches('"').replace(',', "").parse::<i128>().ok(),
            };
            match (number, numbers.as_mut()) {
                (Some(n), Some(numbers)) => numbers.push(n),
                _ => numbers = None,
            }
        }
        if numbers.as_ref().is_some_and(Vec::is_empty) {
            continue;
        }
        let seen = lines.entry(words).or_insert((0, None));
        *seen = (seen.0 + 1, numbers);
    }
    // Shared words are no one line: each would be taken for the other.
    (lines.into_iter())
        .filter_map(|(words, (seen, numbers))| Some((words, numbers.filter(|_| seen == 1)?)))
        .collect()
}
