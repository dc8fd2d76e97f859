//! Cutting text: to a byte budget, as reasons travel in frames and close
//! messages of bounded size, and to a column width for display. A cut never
//! splits a character.

/// `text` cut to at most `max` bytes, on a character boundary.
pub fn truncate(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `text` cut to at most `width` characters, ending in `…` when cut, so a
/// reader sees that there was more.
pub fn shorten(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// "1 attempt", "3 attempts": a count and its noun, singular or plural.
pub fn counted(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
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
        assert_eq!(shorten("evt_1", 0), "…");
    }
}
