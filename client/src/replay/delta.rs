//! How a probe's output changed between two reads, so two changes can be compared.
//!
//! A probe prints a balance, a row count, a JSON object or a dump. When two
//! reads hold the same tokens in the same places, the change is how each
//! token moved: a count or an amount by how much, any other value (a word,
//! an ID, a timestamp) only whether it was replaced. When the output's shape
//! changed (a dump that grew), it is the lines added and removed.

use std::collections::BTreeMap;

use portpreview_shared::text::counted;

/// Numbers this large are clocks or generated IDs (epoch seconds pass 1.7e9,
/// milliseconds 1.7e12): how far one moved counts nothing, so it is only
/// compared as replaced or not.
const OPAQUE_FROM: f64 = 1e9;

/// How a comma between digits is read. `5,050` is one amount to a person
/// and two numbers to a CSV row (`sqlite3 -csv`: count 5, sum 50) or a JSON
/// array, and nothing in one read tells which. Read one way throughout,
/// the probe's own meaning moves consistently; read the other, a value
/// crossing a thousand (or a column crossing 100) changes the shape of the
/// line, and equal moves look unequal. So a burst is compared both ways
/// (see [`moves_alike`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Commas {
    /// `5,050` and `1,234.50` are one number each.
    Group,
    /// A comma separates numbers.
    Separate,
}

impl Commas {
    /// Both readings, the grouping one first.
    const BOTH: [Commas; 2] = [Commas::Group, Commas::Separate];
}

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

/// One count (a number under [`OPAQUE_FROM`]) and how far it moved.
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

/// One token of probe output. Whitespace only separates tokens: a table
/// whose columns widen as a number grows has the same tokens.
#[derive(Debug, Clone, PartialEq)]
enum Token<'a> {
    /// A standalone number under [`OPAQUE_FROM`]: a count or an amount.
    Count(f64),
    /// A value that counts nothing: a date, a time of day, a UUID, a quoted
    /// string, a number as large as a clock or a generated ID.
    Opaque(&'a str),
    /// A word (letters, digits and `_`: digits inside identifiers such as
    /// `evt_1Pq` and `v1` belong to it), or one other character.
    Text(&'a str),
}

impl Token<'_> {
    /// Whether two tokens hold the same place in two reads: text as it is,
    /// counts and opaque values whatever their value.
    fn same_place(&self, other: &Token<'_>) -> bool {
        match (self, other) {
            (Token::Count(_), Token::Count(_)) | (Token::Opaque(_), Token::Opaque(_)) => true,
            (Token::Text(a), Token::Text(b)) => a == b,
            // `total: null` became `total: 100`: the count was nothing.
            (Token::Text(a), Token::Count(_)) | (Token::Count(_), Token::Text(a)) => PLACEHOLDERS.contains(a),
            _ => false,
        }
    }

    /// Whether two tokens are of one kind: [`Token::same_place`], but any
    /// word matches any word (`evt_A` and `evt_B`).
    fn same_kind(&self, other: &Token<'_>) -> bool {
        match (self, other) {
            (Token::Text(a), Token::Text(b)) => a == b || (is_word(a) && is_word(b)),
            _ => self.same_place(other),
        }
    }

    fn is_count(&self) -> bool {
        matches!(self, Token::Count(_))
    }

    /// A count's value; zero for what [`Token::same_place`] pairs with one
    /// (a placeholder, which stands for no value yet).
    fn count_or_zero(&self) -> f64 {
        match self {
            Token::Count(n) => *n,
            _ => 0.0,
        }
    }
}

/// Whether a text token is a word (`evt_A`, `id`), not a sign (`|`, `:`).
fn is_word(text: &str) -> bool {
    text.starts_with(|c: char| c.is_alphanumeric() || c == '_')
}

/// Whether two lines' tokens pair one to one, in order, by `matches`.
fn pair_one_to_one<'t>(a: &[Token<'t>], b: &[Token<'t>], matches: impl Fn(&Token<'t>, &Token<'t>) -> bool) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| matches(x, y))
}

/// Characters a table draws its rules with (`psql`'s `-----+-----`,
/// `sqlite3 -box`): a run of one is one token, however long.
const RULES: [char; 5] = ['-', '=', '─', '━', '═'];

/// Splits one line of probe output into tokens.
fn tokens(line: &str, commas: Commas) -> Vec<Token<'_>> {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut rest = line;
    let mut previous: Option<char> = None;
    while let Some(c) = rest.chars().next() {
        let after_word = previous.is_some_and(|p| word(p) || p == '.');
        let opaque = if after_word {
            None
        } else {
            date_time(rest)
                .or_else(|| time_of_day(rest))
                .or_else(|| uuid(rest))
                .or_else(|| quoted(rest))
        };
        let taken = if c.is_whitespace() {
            c.len_utf8()
        } else if let Some(len) = opaque {
            // A count written as a string (`"amount": "1050"`) is still a count.
            let inner = rest[..len].trim_matches('"');
            out.push(
                match number(inner, commas).filter(|(n, v)| *n == inner.len() && v.abs() < OPAQUE_FROM) {
                    Some((_, value)) => Token::Count(value),
                    None => Token::Opaque(&rest[..len]),
                },
            );
            len
        } else if let Some((len, value)) = number(rest, commas).filter(|_| !after_word) {
            out.push(if value.abs() >= OPAQUE_FROM {
                Token::Opaque(&rest[..len])
            } else {
                Token::Count(value)
            });
            len
        } else if word(c) {
            let len = rest.find(|c: char| !word(c)).unwrap_or(rest.len());
            out.push(Token::Text(&rest[..len]));
            len
        } else if RULES.contains(&c) {
            // The rule under a table's header widens with its columns.
            out.push(Token::Text(&rest[..c.len_utf8()]));
            rest.find(|d: char| d != c).unwrap_or(rest.len())
        } else {
            out.push(Token::Text(&rest[..c.len_utf8()]));
            // An empty column (`0|` for `count(*), sum(amount)` over no
            // rows): nothing stands there, and a number may come to.
            let next = rest[c.len_utf8()..].trim_start_matches(' ');
            if matches!(c, '|' | ',') && (next.is_empty() || next.starts_with(c)) {
                out.push(Token::Text(""));
            }
            c.len_utf8()
        };
        previous = rest[..taken].chars().last();
        rest = &rest[taken..];
    }
    out
}

/// A standalone number at the start of `text` (`5`, `-2`, `5.5`, and with
/// [`Commas::Group`] `5,050` and `1,234.50`), not the start of a word
/// (`1Pq`): its length and value.
fn number(text: &str, commas: Commas) -> Option<(usize, f64)> {
    let bytes = text.as_bytes();
    let digits = |from: usize| bytes[from..].iter().take_while(|b| b.is_ascii_digit()).count();
    let sign = usize::from(bytes.first() == Some(&b'-'));
    let whole = digits(sign);
    if whole == 0 {
        return None;
    }
    let mut len = sign + whole;
    if commas == Commas::Group && whole <= 3 {
        // Groups of exactly three digits after a comma; `1,2` and `1,2345`
        // are two numbers.
        while bytes.get(len) == Some(&b',') && digits(len + 1) == 3 {
            len += 4;
        }
    }
    if bytes.get(len) == Some(&b'.') && bytes.get(len + 1).is_some_and(u8::is_ascii_digit) {
        len += 1 + digits(len + 1);
    }
    let standalone = text[len..]
        .chars()
        .next()
        .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
    standalone.then(|| text[..len].replace(',', "").parse().ok().map(|value| (len, value)))?
}

/// Whether `b` holds `n` ASCII digits from `at`.
fn digits_at(b: &[u8], at: usize, n: usize) -> bool {
    b.len() >= at + n && b[at..at + n].iter().all(u8::is_ascii_digit)
}

/// The length of an ISO 8601 date or date-time at the start of `text`
/// (`2026-12-02`, `2026-12-02T14:00:05.123Z`, `2026-12-02 14:00:05+01:00`):
/// one value, not a handful of small numbers that move at random.
fn date_time(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    if !(digits_at(b, 0, 4)
        && b.get(4) == Some(&b'-')
        && digits_at(b, 5, 2)
        && b.get(7) == Some(&b'-')
        && digits_at(b, 8, 2))
    {
        return None;
    }
    let mut len = 10;
    if matches!(b.get(10), Some(b'T' | b' ')) {
        if let Some(time) = time_of_day(&text[11..]) {
            len = 11 + time;
            match b.get(len) {
                Some(b'Z') => len += 1,
                Some(b'+' | b'-') if digits_at(b, len + 1, 2) => {
                    len += 3;
                    if b.get(len) == Some(&b':') && digits_at(b, len + 1, 2) {
                        len += 3;
                    } else if digits_at(b, len, 2) {
                        len += 2;
                    }
                }
                _ => {}
            }
        }
    }
    Some(len)
}

/// The length of a time of day at the start of `text` (`14:00`, `4:00:05`,
/// `14:00:05.123`), as a log line or `date` prints it.
fn time_of_day(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let hours = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if !(1..=2).contains(&hours) || b.get(hours) != Some(&b':') || !digits_at(b, hours + 1, 2) {
        return None;
    }
    let mut len = hours + 3;
    if b.get(len) == Some(&b':') && digits_at(b, len + 1, 2) {
        len += 3;
        if b.get(len) == Some(&b'.') && digits_at(b, len + 1, 1) {
            len += 1 + b[len + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        }
    }
    Some(len)
}

/// The length of a UUID (`0f3c7a52-9d1e-4c0b-8a3e-5b6d7e8f9a0b`) at the
/// start of `text`: one ID, though some of its groups are all digits.
fn uuid(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let mut at = 0;
    for (n, group) in [8, 4, 4, 4, 12].into_iter().enumerate() {
        if n > 0 {
            if b.get(at) != Some(&b'-') {
                return None;
            }
            at += 1;
        }
        if b.len() < at + group || !b[at..at + group].iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        at += group;
    }
    let ends = b.get(at).is_none_or(|c| !(c.is_ascii_alphanumeric() || *c == b'_'));
    ends.then_some(at)
}

/// The length of a double-quoted string at the start of `text`, escapes
/// kept inside: a JSON value (`"evt_1"`) or a name (`"balance"`) is one token.
fn quoted(text: &str) -> Option<usize> {
    let rest = text.strip_prefix('"')?;
    let mut escaped = false;
    for (i, c) in rest.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return Some(i + 2),
            _ => {}
        }
    }
    None
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
    let before = nothing_as_empty_list(before, after);
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

/// `before` as the empty list it stands for when a probe printed nothing,
/// or `null`, for no rows (`sqlite3 -json`, Postgres' `json_agg`) and then
/// a JSON list: otherwise the first row would read as the list's every
/// line added, and the next as one more element.
fn nothing_as_empty_list<'a>(before: &'a str, after: &str) -> &'a str {
    let nothing = matches!(before.trim(), "" | "null");
    match nothing && after.starts_with(super::json_state::LIST_OPENING) {
        true => super::json_state::EMPTY_LIST,
        false => before,
    }
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

/// Words that stand for no value (`null`, an empty column): a line where
/// one became a value (`0|null` → `1|1764684000`) is the same line.
const PLACEHOLDERS: [&str; 6] = ["", "null", "NULL", "None", "nil", "NaN"];

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
        let (first, later) = (change(before, middle, commas), change(middle, last, commas));
        let was: Vec<Vec<Token<'_>>> = (first.added_lines.iter())
            .map(|&j| tokens(middle_lines[j], commas))
            .collect();
        let is: Vec<Vec<Token<'_>>> = (later.added_lines.iter())
            .map(|&j| tokens(last_lines[j], commas))
            .collect();
        for (x, y) in pair_added(&was, &is) {
            let Some(times) = multiple_at(&was[x], &is[y], copies) else {
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
/// that is 2 to `copies`. A row's ID is no amount: one first on a line of
/// several values (after a table's border, if any), or under a name such
/// as `id`, is not compared (a sequence may have handed the burst's row
/// any number), nor is a lone count one more than the baseline's. Nor is
/// a running total, the baseline's value plus another count on the line
/// (`evt_B|1250|2500` after `evt_A|1250|1250`).
fn multiple_at(a: &[Token<'_>], b: &[Token<'_>], copies: usize) -> Option<usize> {
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
        let first = b[..k].iter().all(|t| matches!(t, Token::Text(s) if !is_word(s)));
        let id_like = (first && b.len() > k + 1) || id_named(&b[..k]);
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
mod tests {
    use super::*;

    /// Whether a burst that took the state from `one` to `two` changed it
    /// as the single delivery that took it from `zero` to `one` did.
    fn acts_once(zero: &str, one: &str, two: &str) -> bool {
        moves_alike(zero, one, two)
    }

    /// The change under the reading that keeps lines' shapes.
    fn change2(before: &str, after: &str) -> Change {
        changes(&[before, after]).remove(0)
    }

    #[test]
    fn numbers_inside_identifiers_belong_to_their_words() {
        assert_eq!(
            tokens("evt_1Pq balance: 5.5 rows=-2 v1", Commas::Group),
            vec![
                Token::Text("evt_1Pq"),
                Token::Text("balance"),
                Token::Text(":"),
                Token::Count(5.5),
                Token::Text("rows"),
                Token::Text("="),
                Token::Count(-2.0),
                Token::Text("v1"),
            ]
        );
    }

    #[test]
    fn dates_times_uuids_quoted_strings_and_large_numbers_count_nothing() {
        let line = r#"2026-12-02T14:00:05.123Z Dec  2 14:00:05 0f3c7a52-9d1e-4c0b-1234-5b6d7e8f9a0b "evt_1" 1764684000123 "42""#;
        assert_eq!(
            tokens(line, Commas::Group),
            vec![
                Token::Opaque("2026-12-02T14:00:05.123Z"),
                Token::Text("Dec"),
                Token::Count(2.0),
                Token::Opaque("14:00:05"),
                Token::Opaque("0f3c7a52-9d1e-4c0b-1234-5b6d7e8f9a0b"),
                Token::Opaque("\"evt_1\""),
                Token::Opaque("1764684000123"),
                Token::Count(42.0),
            ]
        );
    }

    #[test]
    fn a_counter_that_moved_ten_times_as_far_is_a_different_change() {
        let single = change2("count 5\n", "count 6\n");
        let burst = change2("count 6\n", "count 16\n");
        assert!(!same_change(&single, &burst));
        assert_eq!(multiple(&single, &burst), Some(10.0));
        assert!(same_change(&single, &change2("count 6", "count 7")));
        assert_eq!(single.describe(), "+1");
    }

    #[test]
    fn a_count_beside_a_replaced_value_is_still_compared() {
        let state = |balance, last: &str| format!("balance: {balance}\nlast_event: {last}\n");
        assert!(!acts_once(&state(0, "-"), &state(100, "evt_A"), &state(500, "evt_B")));
        assert!(acts_once(&state(0, "-"), &state(100, "evt_A"), &state(200, "evt_B")));
        assert_eq!(
            change2(&state(0, "-"), &state(100, "evt_A")).describe(),
            "+100, 1 value replaced"
        );
        let json = |balance, last: &str| format!(r#"{{"balance": {balance}, "last_event": {last}}}"#);
        let (a, b) = (
            r#""0f3c7a52-9d1e-4c0b-8a3e-5b6d7e8f9a0b""#,
            r#""ab05c7a5-1234-4c0b-8a3e-5b6d7e8f9a0b""#,
        );
        assert!(
            !acts_once(&json(0, "null"), &json(100, a), &json(500, b)),
            "null, then a UUID"
        );
        assert!(acts_once(&json(0, "null"), &json(100, a), &json(200, b)));
    }

    #[test]
    fn a_value_that_first_appears_with_the_first_row_is_no_second_effect() {
        // `SELECT count(*), max(id)` from an empty table prints `0|`.
        assert!(acts_once("0|\n", "1|1\n", "2|2\n"));
        assert!(!acts_once("0|\n", "1|1\n", "5|5\n"));
        assert!(acts_once("0 | \n", "1 | 1000000001\n", "2 | 1000000002\n"));
    }

    #[test]
    fn clocks_count_nothing_whether_or_not_they_ticked() {
        let at = |n, time: &str| format!("credits: {n}\nupdated_at: {time}\n");
        assert!(acts_once(&at(0, "0"), &at(1, "1796224662"), &at(2, "1796224662")));
        assert!(acts_once(
            &at(3, "1764684000123"),
            &at(4, "1764684001175"),
            &at(5, "1764684001391")
        ));
        assert!(!acts_once(
            &at(3, "1764684000123"),
            &at(4, "1764684001175"),
            &at(6, "1764684001391")
        ));
        let log = |n, time: &str| format!("orders={n} at Dec  2 {time}");
        assert!(acts_once(&log(1, "14:00:05"), &log(2, "14:00:59"), &log(3, "14:01:02")));
        let iso = |n, time: &str| format!("orders={n} at {time}");
        assert!(acts_once(
            &iso(1, "2026-12-02T14:00:00.120Z"),
            &iso(2, "2026-12-02T14:00:01.050Z"),
            &iso(3, "2026-12-02 14:07:59+01:00")
        ));
    }

    #[test]
    fn counts_written_as_strings_are_counts() {
        let json = |amount| format!(r#"{{"amount": "{amount}"}}"#);
        assert!(!acts_once(&json(0), &json(1050), &json(4200)));
    }

    #[test]
    fn padding_that_widens_with_a_number_is_no_change_of_shape() {
        let single = change2(" balance \n---------\n       9\n", " balance \n---------\n      10\n");
        assert_eq!(single.describe(), "+1");
    }

    #[test]
    fn dumps_compare_by_lines_added() {
        let single = change2("a\n", "a\nevt_x 100\n");
        let burst = change2("a\nevt_x 100\n", "a\nevt_x 100\nevt_y 100\nevt_y 100\n");
        assert!(!same_change(&single, &burst));
        assert_eq!(multiple(&single, &burst), Some(2.0));
        assert_eq!(burst.describe(), "2 lines added");
        assert!(same_change(
            &single,
            &change2("a\nevt_x 100\n", "a\nevt_x 100\nevt_y 100\n")
        ));
    }

    #[test]
    fn a_count_beside_rows_added_is_compared_too() {
        // One row per event, but every copy of the burst credited: a race.
        let before = "balance: 0\n";
        let one = "balance: 100\nprocessed evt_A\n";
        let raced = "balance: 700\nprocessed evt_A\nprocessed evt_B\n";
        assert!(!acts_once(before, one, raced));
        let moves = changes(&[before, one, raced]);
        assert_eq!(moves[1].describe(), "+600, 1 line added");
        assert_eq!(multiple(&moves[0], &moves[1]), Some(6.0));
        assert!(acts_once(
            before,
            one,
            "balance: 200\nprocessed evt_A\nprocessed evt_B\n"
        ));
        // Rows in another order stayed; the one new row was added.
        let reordered = change2("a 1\nb 2\n", "b 2\na 1\nc 3\n");
        assert_eq!(reordered.describe(), "1 line added");
    }

    #[test]
    fn a_row_credited_once_per_copy_is_told_from_a_row_given_the_next_id() {
        // `SELECT event, amount FROM credits`, one row per event.
        let (before, one) = ("", "evt_A|100\n");
        let every_copy = "evt_A|100\nevt_B|1000\n";
        assert!(
            acts_once(before, one, every_copy),
            "as many lines, no count beside them"
        );
        assert_eq!(
            multiplied_row(before, one, every_copy, 10),
            Some(Multiplied {
                one: "evt_A|100".into(),
                all: "evt_B|1000".into(),
                times: 10,
            })
        );
        // Some copies acted: 3 of 4.
        let three = multiplied_row(before, one, "evt_A|100\nevt_B|300\n", 4).unwrap();
        assert_eq!(three.times, 3);
        assert!(
            multiplied_row(before, one, "evt_A|100\nevt_B|500\n", 4).is_none(),
            "more than the copies"
        );
        assert_eq!(multiplied_row(before, one, "evt_A|100\nevt_B|100\n", 10), None);
        // A JSON map of amounts, and a list of objects.
        let map = |rows: &str| json_lines(&format!("{{{rows}}}"));
        let (one, all) = (map(r#""evt_A": 100"#), map(r#""evt_A": 100, "evt_B": 500"#));
        assert!(multiplied_row(&map(""), &one, &all, 5).is_some());
        let list = |rows: &str| json_lines(&format!("[{rows}]"));
        let row = |event: &str, amount| format!(r#"{{"event": "{event}", "amount": {amount}}}"#);
        let (one, all) = (
            list(&row("evt_A", 3)),
            list(&[row("evt_A", 3), row("evt_B", 12)].join(",")),
        );
        assert!(multiplied_row(&list(""), &one, &all, 4).is_some());
        // A row of that amount from an earlier run: the burst's row's lines
        // land apart once the list is sorted, and are paired all the same.
        let old = row("evt_0", 12);
        let (zero, one) = (list(&old), list(&[old.clone(), row("evt_A", 3)].join(",")));
        let all = list(&[old, row("evt_A", 3), row("evt_B", 12)].join(","));
        assert_eq!(multiplied_row(&zero, &one, &all, 4).map(|m| m.times), Some(4));
        // A generated ID is no amount: first on its line or named so, a
        // sequence may have handed the burst's row any number.
        assert_eq!(
            multiplied_row("", "1|evt_A|100\n", "1|evt_A|100\n2|evt_B|100\n", 2),
            None
        );
        assert_eq!(
            multiplied_row("", "1|evt_A|100\n", "1|evt_A|100\n4|evt_B|100\n", 4),
            None
        );
        let (one, all) = (
            list(r#"{"id": 4, "amount": 3}"#),
            list(r#"{"id": 4, "amount": 3}, {"id": 8, "amount": 3}"#),
        );
        assert_eq!(multiplied_row(&list(""), &one, &all, 10), None);
        // After a table's border, under another name for an ID, or a
        // running total beside the amount: no multiple either.
        let boxed = |rows: &[&str]| rows.iter().map(|r| format!("│ {r} │\n")).collect::<String>();
        let (one, all) = (
            boxed(&["1 │ evt_A │ 1250"]),
            boxed(&["1 │ evt_A │ 1250", "2 │ evt_B │ 1250"]),
        );
        assert_eq!(multiplied_row("", &one, &all, 2), None);
        let (one, all) = (
            list(r#"{"rid": 1, "amount": 3}"#),
            list(r#"{"rid": 1, "amount": 3}, {"rid": 2, "amount": 3}"#),
        );
        assert_eq!(multiplied_row(&list(""), &one, &all, 4), None);
        assert_eq!(
            multiplied_row("", "evt_A|1250|1250\n", "evt_A|1250|1250\nevt_B|1250|2500\n", 4),
            None
        );
        assert!(multiplied_row("", "evt_A|1250|1250\n", "evt_A|1250|1250\nevt_B|5000|6250\n", 4).is_some());
        // A lone count one more is an ID too; beside an event, a quantity.
        assert_eq!(multiplied_row("", "1\n", "1\n2\n", 2), None);
        assert!(multiplied_row("", "evt_A|1\n", "evt_A|1\nevt_B|2\n", 2).is_some());
        assert!(multiplied_row("", "100\n", "100\n300\n", 4).is_some());
        assert_eq!(multiplied_row("x\n", "x\n", "x\n", 4), None);
    }

    fn json_lines(text: &str) -> String {
        super::super::json_state::lines(text).unwrap()
    }

    #[test]
    fn a_value_standing_where_there_was_none_keeps_its_line() {
        // `SELECT count(*), max(id)` above the rows themselves.
        let (zero, one, two) = ("0|\n", "1|1\nevt_A\n", "2|2\nevt_A\nevt_B\n");
        assert!(acts_once(zero, one, two));
        // The empty column counts from nothing: max(id) moves by one a row.
        assert_eq!(change2(zero, one).describe(), "+1, +1, 1 line added");
        assert!(!acts_once(zero, one, "3|3\nevt_A\nevt_B\n"));
        // A row whose null became a clock as the first delivery was handled.
        let done = |n, at: &str| format!("done|{n}|{at}\n");
        let rows = |events: &str| events.lines().map(|e| format!("{e}\n")).collect::<String>();
        assert!(acts_once(
            &done(0, "null"),
            &(done(1, "1764684000") + &rows("evt_A")),
            &(done(2, "1764684007") + &rows("evt_A\nevt_B"))
        ));
    }

    #[test]
    fn a_change_of_decimals_reads_as_the_probe_printed_them() {
        assert_eq!(change2("balance: 20.41", "balance: 20.51").describe(), "+0.1");
        assert_eq!(change2("balance: 20.51", "balance: 20.41").describe(), "−0.1");
        assert_eq!(change2("balance: 1.5", "balance: 3.25").describe(), "+1.75");
        assert_eq!(
            change2("balance: 10000000.01", "balance: 30000000.03").describe(),
            "+20000000.02"
        );
        assert_eq!(change2("balance: 0.1", "balance: 0.101").describe(), "+0.001");
        // A burst of three copies that each acted is three times one copy.
        assert_eq!(
            multiple(
                &change2("balance: 0.1", "balance: 0.2"),
                &change2("balance: 0.2", "balance: 0.5")
            ),
            Some(3.0)
        );
    }

    #[test]
    fn a_sum_over_no_rows_is_none_and_then_the_first_amount() {
        // `SELECT sum(amount)` prints an empty line, JSON a null.
        assert_eq!(change2("\n", "100\n").describe(), "+100");
        assert!(acts_once("\n", "100\n", "200\n"));
        assert!(!acts_once("\n", "100\n", "400\n"));
        assert_eq!(multiple(&change2("\n", "100\n"), &change2("100\n", "400\n")), Some(3.0));
        assert_eq!(change2("total: null", "total: 100").describe(), "+100");
        // `count(*), sum(amount)` over no rows prints `0|`.
        assert!(acts_once("0|\n", "1|100\n", "2|200\n"));
        assert!(!acts_once("0|\n", "1|100\n", "2|500\n"));
        assert!(acts_once("0,\n", "1,100\n", "2,200\n"));
        assert!(!acts_once("total: null", "total: 100", "total: 400"));
    }

    #[test]
    fn nothing_or_null_before_a_json_list_is_an_empty_list() {
        let list = |n: usize| json_lines(&format!("[{}]", vec![r#"{"id": 1}"#; n].join(",")));
        for nothing in ["", "\n", "null\n"] {
            assert!(acts_once(nothing, &list(1), &list(2)), "{nothing:?}");
            assert!(!acts_once(nothing, &list(1), &list(3)), "{nothing:?}");
            assert_eq!(change2(nothing, &list(1)).describe(), "+1, 2 lines added");
        }
    }

    #[test]
    fn a_header_printed_with_the_first_row_is_no_side_effect() {
        let column = |rows: &[&str]| {
            let mut out = String::from("id  event  amount\n--  -----  ------\n");
            rows.iter().for_each(|row| out.push_str(&format!("{row}\n")));
            out
        };
        let (one, two) = (
            column(&["1   evt_A  1250"]),
            column(&["1   evt_A  1250", "2   evt_B  1250"]),
        );
        let before = framing("", &one, &two).unwrap();
        assert_eq!(before, "id  event  amount\n--  -----  ------\n");
        assert!(acts_once(&before, &one, &two));
        let raced = column(&["1   evt_A  1250", "2   evt_B  1250", "3   evt_B  1250"]);
        assert!(!acts_once(framing("", &one, &raced).as_deref().unwrap(), &one, &raced));
        // A CSV header, and `sqlite3 -line` records with a blank line between.
        let csv = |rows: &[&str]| {
            format!(
                "rid,id,amount\n{}",
                rows.iter().map(|r| format!("{r}\n")).collect::<String>()
            )
        };
        let (one, two) = (csv(&["1,evt_A,100"]), csv(&["1,evt_A,100", "2,evt_B,100"]));
        assert!(acts_once(&framing("", &one, &two).unwrap(), &one, &two));
        let (one, two) = (
            "id = 1\namount = 100\n",
            "id = 1\namount = 100\n\nid = 2\namount = 100\n",
        );
        assert_eq!(framing("", one, two), None);
        assert!(acts_once("", one, two));
        // Rows of words only are rows, not a header.
        let (one, two) = ("processed evt_A\n", "processed evt_A\nprocessed evt_B\n");
        assert_eq!(framing("", one, two), None);
        assert_eq!(
            framing("x\n", "x\nheader\n", "x\nheader\n"),
            None,
            "only before an empty read"
        );
    }

    #[test]
    fn a_psql_table_that_widens_and_counts_its_rows_is_the_same_table() {
        let table = |rows: &[(&str, u32)]| {
            let width = rows.iter().map(|(e, _)| e.len()).max().unwrap_or(0).max(5);
            let mut out = format!(" {:<width$} | amount\n{}+--------\n", "event", "-".repeat(width + 2));
            for (event, amount) in rows {
                out.push_str(&format!(" {event:<width$} | {amount:>6}\n"));
            }
            let n = rows.len();
            out.push_str(&format!("({n} row{})\n", if n == 1 { "" } else { "s" }));
            out
        };
        let (zero, one) = (table(&[]), table(&[("evt_A", 100)]));
        assert!(acts_once(&zero, &one, &table(&[("evt_A", 100), ("evt_long_B", 100)])));
        assert!(!acts_once(
            &zero,
            &one,
            &table(&[("evt_A", 100), ("evt_long_B", 100), ("evt_long_B", 100)])
        ));
    }

    #[test]
    fn a_huge_line_of_another_shape_is_replaced_whole_without_aligning() {
        let before = "x ".repeat(5_000);
        let after = "y ".repeat(5_000);
        assert_eq!(change2(&before, &after).describe(), "5000 values replaced");
    }

    #[test]
    fn amounts_written_with_thousands_separators_are_one_count() {
        assert_eq!(
            tokens("balance: 5,050", Commas::Group),
            [Token::Text("balance"), Token::Text(":"), Token::Count(5050.0)]
        );
        assert_eq!(tokens("1,234,567.50 USD", Commas::Group)[0], Token::Count(1_234_567.5));
        assert_eq!(
            tokens("1,2", Commas::Group)[0],
            Token::Count(1.0),
            "a list, not a grouped number"
        );
        assert_eq!(tokens("1,2345", Commas::Group)[0], Token::Count(1.0));
        assert_eq!(change2("balance: 5,050", "balance: 4,950").describe(), "−100");
        assert_eq!(change2("balance: 1,050", "balance: 950").describe(), "−100");
        assert!(acts_once("balance: 5,050", "balance: 4,950", "balance: 4,850"));
        assert!(!acts_once("5,000.00 USD", "4,900.00 USD", "4,700.00 USD"));
    }

    #[test]
    fn commas_between_numbers_are_read_the_probes_way() {
        // CSV rows (count, sum) and JSON arrays: read whole, `1,50` and
        // `2,100` would be 1 and 50, then 2100.
        assert!(acts_once("0,0", "1,50", "2,100"));
        assert!(acts_once("[0,0]", "[500,100]", "[1000,200]"));
        assert!(acts_once("1,100", "2,200", "3,300"));
        // Races still show, whichever way the commas are read.
        assert!(!acts_once("0,0", "1,50", "6,300"));
        assert!(!acts_once("[0,0]", "[500,100]", "[3000,600]"));
        assert!(!acts_once("balance: 5,050", "balance: 4,950", "balance: 4,450"));
        assert!(!acts_once("balance: 1,050", "balance: 950", "balance: 450"));
        // Four columns read whole are one number as long as an ID: no
        // evidence either way, so the race shows under the other reading.
        assert!(!acts_once("5,500,100,100", "6,600,100,100", "8,800,100,100"));
        assert!(!acts_once(
            "[500,250,999,123]",
            "[501,250,999,123]",
            "[503,250,999,123]"
        ));
        // Each line read its own way.
        assert!(acts_once(
            "balance: 950\nrow: 9,950",
            "balance: 1,000\nrow: 10,1000",
            "balance: 1,050\nrow: 11,1050"
        ));
        // Described the way that keeps the line's shape.
        assert_eq!(change2("0,0", "1,50").describe(), "+1, +50");
        assert_eq!(change2("1,50", "2,100").describe(), "+1, +50");
        assert_eq!(change2("balance: 1,050", "balance: 950").describe(), "−100");
    }

    #[test]
    fn no_movement_is_none() {
        assert!(change2("x 1", "x 1").is_none());
        assert_eq!(change2("x 1", "x 1").describe(), "no change");
        assert_eq!(change2("x 1", "x 3").describe(), "+2");
    }
}
