//! Cutting text: to a byte budget, as reasons travel in frames and close
//! messages of bounded size, and to a column width for display. A cut never
//! splits a character. Also counts written for people: `1 attempt`, `12,345`.

/// `text` cut to at most `max` bytes, on a character boundary.
pub fn truncate(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `text` cut to at most `width` characters, ending in `…` when cut, so a
/// reader sees that there was more. An escape the sanitiser wrote
/// (`\u{200b}`, `\x1b`) is kept whole or left out, never cut to a bare `\`.
pub fn shorten(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    mark_cut(text.chars().take(width.saturating_sub(1)).collect())
}

/// `kept`, the start of a longer text, ended in `…`, as [`shorten`] ends
/// it: an escape cut in half, or a joiner left joining nothing, is left
/// out. For callers that measure the start in their own units (a
/// terminal's columns).
pub fn mark_cut(mut out: String) -> String {
    if let Some(at) = out.rfind('\\') {
        let escape = &out[at..];
        let whole = match escape.as_bytes().get(1) {
            Some(b'u') => escape.contains('}'),
            Some(b'x') => escape.len() >= 4,
            Some(_) => true,
            None => false,
        };
        if !whole {
            out.truncate(at);
        }
    }
    // A cut inside an emoji sequence can leave a joiner or a flag's tags
    // with nothing to join: the only raw invisible characters escaped text
    // holds, so they go rather than end the text unseen.
    while out.ends_with(crate::sanitize::is_hidden_or_control) {
        out.pop();
    }
    out.push('…');
    out
}

/// A parser's message in a user's words: serde names the integer types
/// it expected (`expected u32`), which mean nothing to whoever wrote the
/// file.
pub fn plain_types(message: &str) -> String {
    ["u8", "u16", "u32", "u64", "usize", "i32", "i64"]
        .iter()
        .fold(message.to_owned(), |text, name| {
            text.replace(&format!("expected {name}"), "expected a whole number")
        })
}

/// "1 attempt", "3 attempts": a count and its noun, singular or plural.
pub fn counted(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// `12,345`: thousands separated, for counts.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_never_splits_a_character() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("héllo", 3), "hé");
        assert_eq!(truncate("short", 100), "short");
        assert_eq!(truncate("", 0), "");
    }

    #[test]
    fn a_shortened_text_says_it_was_cut() {
        assert_eq!(shorten("evt_1NqAbCdEf", 8), "evt_1Nq…");
        assert_eq!(shorten("évènement", 4), "évè…");
        assert_eq!(shorten("evt_1", 8), "evt_1");
        assert_eq!(shorten("evt_1", 5), "evt_1");
        assert_eq!(shorten("evt_\\u{200b}x", 9), "evt_…", "an escape is never cut in half");
        assert_eq!(shorten("evt_\\u{200b}xyz", 14), "evt_\\u{200b}x…");
        assert_eq!(shorten("a\\x1b[2J", 4), "a…");
        assert_eq!(shorten("a\\x1b[2J", 6), "a\\x1b…");
        assert_eq!(shorten("a\\nb", 3), "a…", "nor a bare backslash left");
        assert_eq!(shorten("evt_1", 0), "…");
    }

    #[test]
    fn a_cut_emoji_sequence_leaves_nothing_invisible() {
        let family = crate::sanitize::escape_str("👨\u{200d}👩\u{200d}👧!").into_owned();
        assert_eq!(shorten(&family, 3), "👨…", "no joiner before the cut");
        assert_eq!(shorten(&family, 4), "👨\u{200d}👩…");
        let scotland =
            crate::sanitize::escape_str("🏴\u{e0067}\u{e0062}\u{e0073}\u{e0063}\u{e0074}\u{e007f} x").into_owned();
        assert_eq!(shorten(&scotland, 4), "🏴…", "no tags without their end");
    }

    #[test]
    fn counts_are_grouped_by_thousands() {
        assert_eq!(thousands(100_000), "100,000");
        assert_eq!(thousands(999), "999");
    }
}
