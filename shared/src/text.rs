//! Cutting text: to a byte budget, as reasons travel in frames and close
//! messages of bounded size, and to a column width for display. A cut never
//! splits a character, and a cut to columns never splits what a terminal
//! draws as one (a letter and its marks, an emoji sequence). Also counts
//! written for people: `1 attempt`, `12,345`.

use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

/// `text` cut to at most `max` bytes, on a character boundary.
pub fn truncate(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `text` cut to at most `max` bytes between characters as a reader sees
/// them: an emoji of several code points, or a letter and its accents,
/// is kept whole or left out, never cut to one that reads as another. A
/// text that is one such character past `max` is cut between code points.
pub fn truncate_whole(text: &str, max: usize) -> &str {
    let cut = truncate(text, max);
    if cut.len() == text.len() {
        return cut;
    }
    let start = last_cluster_start(cut);
    match text[start..].graphemes(true).next() {
        Some(cluster) if start > 0 && start + cluster.len() > cut.len() => &text[..start],
        _ => cut,
    }
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

/// Terminal columns `text` takes: two for a CJK character or an emoji,
/// none for a combining mark.
pub fn columns(text: &str) -> usize {
    UnicodeWidthStr::width(text)
}

/// `text` cut into lines of at most `width` columns, at spaces where it can
/// and inside a word only when the word alone is wider than a line.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let needed = if line.is_empty() { 0 } else { columns(&line) + 1 };
        if !line.is_empty() && needed + columns(word) > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        for c in word.chars() {
            let mut buf = [0; 4];
            if !line.is_empty() && columns(&line) + columns(c.encode_utf8(&mut buf)) > width {
                lines.push(std::mem::take(&mut line));
            }
            line.push(c);
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// `text` in at most `width` columns, ending in `…` when it had to be cut,
/// so a reader sees there was more. Columns, not characters: a CJK
/// character takes two, and counting it as one would cut it unmarked.
/// Escapes the sanitiser wrote are kept whole or left out.
pub fn fit(text: &str, width: usize) -> String {
    if columns(text) <= width {
        return text.to_owned();
    }
    cut(text, width)
}

/// The start of `text` and `…` in at most `width` columns, whether or not
/// the whole would fit: the caller knows more follows. A grapheme cluster
/// is kept whole or left out: a wide character never straddles the edge,
/// a letter keeps its marks, an emoji sequence is not broken in two.
pub fn cut(text: &str, width: usize) -> String {
    if width == 0 {
        return String::new();
    }
    let mut used = 0;
    let mut end = 0;
    for (at, cluster) in text.grapheme_indices(true) {
        used += columns(cluster);
        if used >= width {
            break;
        }
        end = at + cluster.len();
    }
    mark_cut(text[..end].to_owned())
}

/// `text` cut as [`fit`] cuts it, then filled with spaces to exactly
/// `width` columns: a cell of a table, where a wide or a combining
/// character counted as one column would shift every cell after it.
pub fn pad(text: &str, width: usize) -> String {
    let shown = fit(text, width);
    let fill = width.saturating_sub(columns(&shown));
    format!("{shown}{:fill$}", "")
}

/// The end of `text` in at most `width` columns, led by `…` when the start
/// had to go: where typing happens, or where a path names its file. Cut
/// between grapheme clusters, as [`cut`] cuts.
pub fn tail(text: &str, width: usize) -> String {
    if columns(text) <= width {
        return text.to_owned();
    }
    let mut used = columns("…");
    let mut start = text.len();
    for (at, cluster) in text.grapheme_indices(true).rev() {
        used += columns(cluster);
        if used > width {
            break;
        }
        start = at;
    }
    format!("…{}", &text[start..])
}

/// Where the last grapheme cluster of `text` starts: what one Backspace
/// takes away, an emoji of several code points or a letter and its accent
/// whole.
pub fn last_cluster_start(text: &str) -> usize {
    text.grapheme_indices(true).next_back().map_or(0, |(at, _)| at)
}

/// Bytes at the start of `a` that `b` starts with too, in whole grapheme
/// clusters: where two texts first differ, as a reader would point to it.
pub fn common_start(a: &str, b: &str) -> usize {
    a.grapheme_indices(true)
        .zip(b.graphemes(true))
        .take_while(|((_, x), y)| x == y)
        .last()
        .map_or(0, |((at, x), _)| at + x.len())
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

/// A size as people read it, in the binary units every limit is set in:
/// `1 byte`, `100 bytes`, `64 KiB`, `84.3 MiB`, `1.7 GiB`. A whole number
/// of its unit (a limit, mostly) is written without a fraction.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return counted(bytes as usize, "byte", "bytes");
    }
    let mut unit = 0;
    while unit + 1 < UNITS.len() && bytes >= 1024u64 << (10 * (unit + 1)) {
        unit += 1;
    }
    let per = 1024u64 << (10 * unit);
    if bytes.is_multiple_of(per) {
        format!("{} {}", bytes / per, UNITS[unit])
    } else {
        format!("{:.1} {}", bytes as f64 / per as f64, UNITS[unit])
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
    fn sizes_read_in_binary_units_whole_when_they_are() {
        let cases = [
            (0, "0 bytes"),
            (1, "1 byte"),
            (1023, "1023 bytes"),
            (1024, "1 KiB"),
            (1536, "1.5 KiB"),
            (64 * 1024, "64 KiB"),
            (25 * 1024 * 1024, "25 MiB"),
            (88_394_956, "84.3 MiB"),
            (1_825_361_101, "1.7 GiB"),
        ];
        for (bytes, said) in cases {
            assert_eq!(size(bytes), said, "{bytes}");
        }
    }

    #[test]
    fn a_cut_between_whole_characters_keeps_an_emoji_whole_or_leaves_it_out() {
        let family = "\u{1f468}\u{200d}\u{1f469}\u{200d}\u{1f467}";
        let text = format!("ab{family}cd");
        // Cut after the first person, a different emoji standing alone.
        assert_eq!(truncate(&text, 6), "ab\u{1f468}");
        assert_eq!(truncate_whole(&text, 6), "ab");
        assert_eq!(truncate_whole(&text, 2 + family.len()), format!("ab{family}"));
        assert_eq!(truncate_whole(&text, 100), text);
        assert_eq!(truncate_whole("e\u{301}\u{301}", 2), "e", "one character past the cut");
    }

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
    fn a_fit_measures_columns_and_cuts_between_clusters() {
        assert_eq!(fit("/漢字漢字", 5), "/漢…", "a wide character never straddles the edge");
        assert_eq!(fit("/漢字漢字", 9), "/漢字漢字");
        let marks = format!("e{}x", "\u{301}".repeat(3));
        assert_eq!(columns(&marks), 2);
        assert_eq!(
            fit(&format!("{marks}yz"), 2),
            format!("e{}…", "\u{301}".repeat(3)),
            "a letter keeps its marks"
        );
        let family = "👨\u{200d}👩\u{200d}👧";
        assert_eq!(columns(family), 2);
        assert_eq!(
            fit(&format!("ab{family}cd"), 4),
            "ab…",
            "an emoji sequence is whole or gone"
        );
        assert_eq!(fit(&format!("ab{family}cd"), 5), format!("ab{family}…"));
        assert_eq!(fit("a\\x1b[2J", 5), "a…", "an escape is never cut in half");
        assert_eq!(fit("abc", 0), "");
        assert_eq!(tail("日本語です", 5), "…です");
        assert_eq!(tail(&format!("{family}x"), 3), format!("{family}x"));
        assert_eq!(tail(&format!("{family}x"), 2), "…x");
    }

    #[test]
    fn a_padded_cell_takes_its_width_in_columns() {
        for text in [
            "/漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字",
            &format!("/e{}", "\u{301}".repeat(50)),
            &"👨\u{200d}👩\u{200d}👧".repeat(9),
            "/plain",
            "",
        ] {
            for width in [0, 1, 2, 7, 8, 40] {
                assert_eq!(columns(&pad(text, width)), width, "{text:?} in {width}");
            }
        }
        assert_eq!(pad("漢字", 3), "漢…");
        assert_eq!(pad("ab", 4), "ab  ");
    }

    #[test]
    fn texts_differ_where_a_reader_would_point() {
        assert_eq!(common_start("n=1", "n=2"), 2);
        assert_eq!(common_start("same", "same"), 4);
        assert_eq!(
            common_start("e\u{301}x", "e\u{302}x"),
            0,
            "a letter differs by its marks"
        );
        assert_eq!(common_start("漢字", "漢子"), "漢".len());
        assert_eq!(common_start("", "x"), 0);
    }

    #[test]
    fn counts_are_grouped_by_thousands() {
        assert_eq!(thousands(100_000), "100,000");
        assert_eq!(thousands(999), "999");
    }
    #[test]
    fn wrap_breaks_at_spaces_and_splits_only_words_wider_than_a_line() {
        assert_eq!(
            wrap("attempts: a number from 1", 12),
            ["attempts: a", "number from", "1"]
        );
        assert_eq!(wrap("abcdefgh ij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap("fits", 10), ["fits"]);
        assert_eq!(wrap("", 10), [""]);
        assert_eq!(wrap("wide ✓✓✓", 0), ["w", "i", "d", "e", "✓", "✓", "✓"]);
    }
}
