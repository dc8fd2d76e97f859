//! Makes untrusted text safe to print on a terminal.
//!
//! Bodies, headers and paths come from the internet. Written raw, an escape
//! sequence in a webhook body could move the cursor, retitle the window or
//! fake output. Every control character (C0, DEL, C1), every bidi
//! override and every invisible formatting character is shown as a
//! visible escape instead.

use std::borrow::Cow;
use std::fmt::Write;

/// Escapes every control character, newlines included: for one-line output.
pub fn escape_str(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// Escapes control characters but keeps line breaks: for bodies shown whole.
pub fn escape_multiline(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

/// Shows bytes safely: escaped text when they are UTF-8, a hex dump otherwise.
pub fn escape_bytes(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => escape_multiline(text).into_owned(),
        Err(_) => hex_dump(bytes),
    }
}

/// A classic offset / hex / ASCII dump, safe for any bytes.
pub fn hex_dump(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 4 + 16);
    for (row, chunk) in bytes.chunks(16).enumerate() {
        let _ = write!(out, "{:08x}  ", row * 16);
        for i in 0..16 {
            match chunk.get(i) {
                Some(b) => {
                    let _ = write!(out, "{b:02x} ");
                }
                None => out.push_str("   "),
            }
        }
        out.push(' ');
        out.extend(chunk.iter().map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '.'
            }
        }));
        out.push('\n');
    }
    out
}

/// Whether `c` is never written raw, wherever it stands: controls, bidi
/// controls and invisible formatting characters. Newlines aside, which
/// text shown whole keeps. (Inside an emoji, [`escape_str`] keeps the
/// joiners and tags that build it.)
pub fn is_hidden_or_control(c: char) -> bool {
    match c {
        c if c.is_control() => true,
        // Bidi embeddings, overrides and isolates reorder what follows them.
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}' => true,
        // Invisible: `evil\u{200b}.com` must not read as `evil.com`, and a
        // terminal may drop them or, for U+2028 and U+2029, break the line.
        '\u{00ad}' | '\u{180e}' | '\u{200b}'..='\u{200d}' | '\u{2028}' | '\u{2029}' => true,
        '\u{2060}'..='\u{2065}' | '\u{206a}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}' => true,
        // Tags: invisible letters that can smuggle a whole sentence.
        '\u{e0000}'..='\u{e007f}' => true,
        _ => false,
    }
}

fn is_unsafe(c: char, keep_newlines: bool) -> bool {
    match c {
        '\n' => !keep_newlines,
        c => is_hidden_or_control(c),
    }
}

/// A pictograph an emoji sequence joins (with U+200D) or modifies.
fn is_pictograph(c: char) -> bool {
    matches!(c,
        '\u{1f000}'..='\u{1faff}' | '\u{2300}'..='\u{23ff}' | '\u{2600}'..='\u{27bf}'
        | '\u{2b00}'..='\u{2bff}' | '\u{fe0f}')
}

/// The waving black flag that tag characters turn into a subdivision's
/// flag (England, Scotland, Wales), closed by U+E007F.
const FLAG_BASE: char = '\u{1f3f4}';
const TAG_END: char = '\u{e007f}';

/// How many bytes of `rest` (the text after a [`FLAG_BASE`]) are the tags
/// of a subdivision flag, `TAG_END` included; 0 when they are not one.
fn flag_tags(rest: &str) -> usize {
    // A region's subdivision code: 3 to 6 lowercase letters or digits
    // (`gbsct`, `usca`). Any other run of tags is hidden text, escaped.
    let mut len = 0;
    for (n, c) in rest.chars().enumerate() {
        match c {
            '\u{e0030}'..='\u{e0039}' | '\u{e0061}'..='\u{e007a}' if n < 6 => len += c.len_utf8(),
            TAG_END if (3..=6).contains(&n) => return len + c.len_utf8(),
            _ => return 0,
        }
    }
    0
}

fn escape(text: &str, keep_newlines: bool) -> Cow<'_, str> {
    if !text.chars().any(|c| is_unsafe(c, keep_newlines)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut previous = None;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let next = chars.peek().map(|&(_, c)| c);
        // Emoji are built of what is escaped alone: 👨‍👩‍👧 of joiners
        // between pictographs, 🏴󠁧󠁢󠁳󠁣󠁴󠁿 of tags after a flag. Those are kept.
        let joins_emoji = c == '\u{200d}' && previous.is_some_and(is_pictograph) && next.is_some_and(is_pictograph);
        previous = Some(c);
        if c == FLAG_BASE {
            let tags = flag_tags(&text[at + c.len_utf8()..]);
            out.push_str(&text[at..at + c.len_utf8() + tags]);
            while chars.peek().is_some_and(|&(i, _)| i < at + c.len_utf8() + tags) {
                chars.next();
            }
            continue;
        }
        if joins_emoji || !is_unsafe(c, keep_newlines) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Safe to print: no control character (newlines aside, when kept), and
    /// every joiner or tag left is part of an emoji, so that escaping the
    /// text again changes nothing.
    fn is_terminal_safe(s: &str, keep_newlines: bool) -> bool {
        let again = if keep_newlines {
            escape_multiline(s)
        } else {
            escape_str(s)
        };
        again == s && s.chars().all(|c| !c.is_control() || (keep_newlines && c == '\n'))
    }

    #[test]
    fn escapes_sequences_visibly() {
        assert_eq!(escape_str("a\x1b[2Jb"), "a\\x1b[2Jb");
        assert_eq!(escape_str("line\nnext\r"), "line\\nnext\\r");
        assert_eq!(escape_multiline("line\nnext"), "line\nnext");
        assert_eq!(escape_str("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(escape_str("abc\u{202e}cba"), "abc\\u{202e}cba");
        assert_eq!(escape_str("evil\u{200b}.com"), "evil\\u{200b}.com");
        assert_eq!(escape_multiline("a\u{2028}b\u{feff}"), "a\\u{2028}b\\u{feff}");
        assert_eq!(escape_str("\u{e0041}"), "\\u{e0041}");
        assert!(matches!(escape_str("中文 😀 é"), Cow::Borrowed(_)));
        assert!(matches!(escape_str("plain ✓ text"), Cow::Borrowed(_)));
    }

    #[test]
    fn emoji_keep_the_joiners_and_tags_that_build_them() {
        for emoji in [
            "👨\u{200d}👩\u{200d}👧",
            "❤\u{fe0f}\u{200d}🔥",
            "🏴\u{e0067}\u{e0062}\u{e0073}\u{e0063}\u{e0074}\u{e007f}",
        ] {
            assert_eq!(escape_str(&format!("a {emoji} b")), format!("a {emoji} b"));
        }
        assert_eq!(escape_str("a\u{200d}b"), "a\\u{200d}b");
        assert_eq!(escape_str("👨\u{200d}x"), "👨\\u{200d}x");
        assert_eq!(escape_str("\u{200d}👨"), "\\u{200d}👨");
        assert_eq!(
            escape_str("🏴\u{e0067}\u{e0062}"),
            "🏴\\u{e0067}\\u{e0062}",
            "a flag's tags end in U+E007F"
        );
        assert_eq!(escape_str("🏴\u{e007f}"), "🏴\\u{e007f}");
        assert_eq!(escape_str("x\u{e0041}\u{e007f}"), "x\\u{e0041}\\u{e007f}");
        let hidden: String = "🏴"
            .chars()
            .chain(
                "Wire $1000"
                    .chars()
                    .map(|c| char::from_u32(0xe0000 + c as u32).unwrap()),
            )
            .chain(['\u{e007f}'])
            .collect();
        assert!(
            escape_str(&hidden).starts_with("🏴\\u{e0057}"),
            "a sentence in tags is no flag"
        );
    }

    #[test]
    fn binary_is_hex() {
        let dump = escape_bytes(&[0xff, 0x1b, b'A']);
        assert!(dump.starts_with("00000000  ff 1b 41"));
        assert!(dump.ends_with("..A\n"));
    }

    proptest! {
        #[test]
        fn no_control_character_survives(s in any::<String>()) {
            prop_assert!(is_terminal_safe(&escape_str(&s), false));
            prop_assert!(is_terminal_safe(&escape_multiline(&s), true));
        }

        #[test]
        fn no_byte_sequence_survives(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let shown = escape_bytes(&bytes);
            prop_assert!(!shown.bytes().any(|b| b == 0x1b || b == 0x7f || (b < 0x20 && b != b'\n')));
            prop_assert!(is_terminal_safe(&shown, true));
        }
    }
}
