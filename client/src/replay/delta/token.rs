//! Probe output as tokens: counts, values that count nothing, and text.

/// Numbers this large are clocks or generated IDs (epoch seconds pass 1.7e9,
/// milliseconds 1.7e12): how far one moved counts nothing, so it is only
/// compared as replaced or not.
pub(super) const OPAQUE_FROM: f64 = 1e9;

/// How a comma between digits is read. `5,050` is one amount to a person
/// and two numbers to a CSV row (`sqlite3 -csv`: count 5, sum 50) or a JSON
/// array, and nothing in one read tells which. Read one way throughout,
/// the probe's own meaning moves consistently; read the other, a value
/// crossing a thousand (or a column crossing 100) changes the shape of the
/// line, and equal moves look unequal. So a burst is compared both ways
/// (see [`moves_alike`](super::moves_alike)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Commas {
    /// `5,050` and `1,234.50` are one number each.
    Group,
    /// A comma separates numbers.
    Separate,
}

impl Commas {
    /// Both readings, the grouping one first.
    pub(super) const BOTH: [Commas; 2] = [Commas::Group, Commas::Separate];
}

/// Words that stand for no value (`null`, an empty column): a line where
/// one became a value (`0|null` → `1|1764684000`) is the same line.
pub(super) const PLACEHOLDERS: [&str; 6] = ["", "null", "NULL", "None", "nil", "NaN"];

/// One token of probe output. Whitespace only separates tokens: a table
/// whose columns widen as a number grows has the same tokens.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Token<'a> {
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
    pub(super) fn same_place(&self, other: &Token<'_>) -> bool {
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
    pub(super) fn same_kind(&self, other: &Token<'_>) -> bool {
        match (self, other) {
            (Token::Text(a), Token::Text(b)) => a == b || (is_word(a) && is_word(b)),
            _ => self.same_place(other),
        }
    }

    pub(super) fn is_count(&self) -> bool {
        matches!(self, Token::Count(_))
    }

    /// A count's value; zero for what [`Token::same_place`] pairs with one
    /// (a placeholder, which stands for no value yet).
    pub(super) fn count_or_zero(&self) -> f64 {
        match self {
            Token::Count(n) => *n,
            _ => 0.0,
        }
    }
}

/// Whether a text token is a word (`evt_A`, `id`), not a sign (`|`, `:`).
pub(super) fn is_word(text: &str) -> bool {
    text.starts_with(|c: char| c.is_alphanumeric() || c == '_')
}

/// Whether two lines' tokens pair one to one, in order, by `matches`.
pub(super) fn pair_one_to_one<'t>(
    a: &[Token<'t>],
    b: &[Token<'t>],
    matches: impl Fn(&Token<'t>, &Token<'t>) -> bool,
) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| matches(x, y))
}

/// Characters a table draws its rules with (`psql`'s `-----+-----`,
/// `sqlite3 -box`): a run of one is one token, however long.
const RULES: [char; 5] = ['-', '=', '─', '━', '═'];

/// Splits one line of probe output into tokens.
pub(super) fn tokens(line: &str, commas: Commas) -> Vec<Token<'_>> {
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
                match number(inner, commas).filter(|(n, v)| *n == inner.len() && countable(inner, *v)) {
                    Some((_, value)) => Token::Count(value),
                    None => Token::Opaque(&rest[..len]),
                },
            );
            len
        } else if let Some((len, value)) = number(rest, commas).filter(|_| !after_word) {
            out.push(match countable(&rest[..len], value) {
                true => Token::Count(value),
                false => Token::Opaque(&rest[..len]),
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

/// Whether the number written `text`, of `value`, is a count whose moves
/// can be measured: under [`OPAQUE_FROM`], and of no more digits than a
/// float holds, or a move in its last ones would measure as none.
fn countable(text: &str, value: f64) -> bool {
    let significant = text
        .bytes()
        .filter(u8::is_ascii_digit)
        .skip_while(|&d| d == b'0')
        .count();
    value.abs() < OPAQUE_FROM && significant <= 15
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
