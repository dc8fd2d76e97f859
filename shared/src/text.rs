//! Cutting text to a byte budget: reasons travel in frames and close
//! messages of bounded size, and a cut must not split a character.

/// `text` cut to at most `max` bytes, on a character boundary.
pub fn truncate(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
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
}
