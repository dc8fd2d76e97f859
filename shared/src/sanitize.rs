//! Makes untrusted text safe to print on a terminal.
//!
//! Bodies, headers and paths come from the internet. Written raw, an escape
//! sequence in a webhook body could move the cursor, retitle the window or
//! fake output. Every control character (C0, DEL, C1), every bidi
//! override, every invisible formatting character and every variation
//! selector that selects nothing is shown as a visible escape instead. So is a pile of combining marks past the few a
//! letter can carry: stacked on one base, they are drawn over the lines
//! above and below.

use std::borrow::Cow;
use std::fmt::Write;

use unicode_width::UnicodeWidthChar;

/// Combining marks kept raw on one base; those after are escaped. Three
/// cover real writing: Vietnamese decomposed takes two, a pointed Hebrew
/// letter or a Tibetan stack three. Fifty on one letter is only a way to
/// draw over the neighbouring lines.
const MARKS_KEPT: usize = 3;

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
    hex_dump_rows(bytes).fold(String::with_capacity(bytes.len() * 5), |mut out, row| {
        out.push_str(&row);
        out.push('\n');
        out
    })
}

/// [`hex_dump`] a row at a time, without its newlines: a 25 MiB body is
/// 130 MB of dump, written out as it is made rather than held whole.
pub fn hex_dump_rows(bytes: &[u8]) -> impl Iterator<Item = String> + '_ {
    bytes.chunks(16).enumerate().map(|(row, chunk)| {
        let mut out = String::with_capacity(80);
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
        out
    })
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
        // Blank or drawing nothing, yet no space: the Hangul fillers, the
        // combining grapheme joiner, the Khmer inherent vowels, the
        // shorthand and musical format controls, the blank Braille cell.
        '\u{115f}' | '\u{1160}' | '\u{3164}' | '\u{ffa0}' | '\u{034f}' | '\u{17b4}' | '\u{17b5}' => true,
        '\u{1bca0}'..='\u{1bca3}' | '\u{1d173}'..='\u{1d17a}' | '\u{2800}' => true,
        // Variation selectors: one after a character that takes it picks
        // how it is drawn (❤️, a Han variant) and is kept there by
        // [`escape_str`]; anywhere else, or one after another, they only
        // hide data (`id` and `id\u{fe0f}` would read alike).
        c if is_selector(c) => true,
        _ => false,
    }
}

fn is_selector(c: char) -> bool {
    matches!(c, '\u{fe00}'..='\u{fe0f}' | '\u{e0100}'..='\u{e01ef}' | '\u{180b}'..='\u{180d}' | '\u{180f}')
}

/// Whether variation selector `selector` right after `base` picks how
/// `base` is drawn, as Unicode's variation sequences use them: text or
/// emoji presentation after an emoji or a keycap's digit, a variant after
/// a Han ideograph or a Mongolian letter, the standardized sequences
/// (math symbols, CJK compatibility) after a character beyond ASCII.
fn takes_selector(base: char, selector: char, next: Option<char>) -> bool {
    let han = matches!(base,
        '\u{3400}'..='\u{4dbf}' | '\u{4e00}'..='\u{9fff}' | '\u{f900}'..='\u{faff}' | '\u{20000}'..='\u{3ffff}');
    match selector {
        // A keycap's digit takes one only before the keycap itself (1️⃣):
        // after any other digit it would hide in an ID (`evt_1\u{fe0f}`).
        '\u{fe0e}' | '\u{fe0f}' if matches!(base, '#' | '*' | '0'..='9') => next == Some('\u{20e3}'),
        '\u{fe0e}' | '\u{fe0f}' => {
            base != '\u{fe0f}' && is_pictograph(base)
                || matches!(base, '\u{a9}' | '\u{ae}' | '\u{203c}' | '\u{2049}'
                    | '\u{2122}' | '\u{2139}' | '\u{2194}'..='\u{21aa}' | '\u{24c2}' | '\u{25aa}'..='\u{25fe}'
                    | '\u{2934}' | '\u{2935}' | '\u{3030}' | '\u{303d}' | '\u{3297}' | '\u{3299}')
        }
        '\u{e0100}'..='\u{e01ef}' => han,
        '\u{180b}'..='\u{180d}' | '\u{180f}' => matches!(base, '\u{1820}'..='\u{18aa}'),
        _ => !base.is_ascii() && !is_selector(base) && stacking(base) == Stacking::Base,
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

/// How a character kept raw counts toward a pile of marks on one base.
#[derive(PartialEq)]
enum Stacking {
    /// Drawn on the base before it: a combining mark, a Hangul vowel.
    Mark,
    /// Draws nothing: a joiner or a variation selector in an emoji.
    Invisible,
    /// Takes columns of its own, and is a new base.
    Base,
}

fn stacking(c: char) -> Stacking {
    match c {
        '\u{200d}' | '\u{fe00}'..='\u{fe0f}' | '\u{e0100}'..='\u{e01ef}' => Stacking::Invisible,
        c if c.is_control() => Stacking::Base,
        c if c.width() == Some(0) => Stacking::Mark,
        _ => Stacking::Base,
    }
}

/// The marks on the base last written, counted a character at a time.
#[derive(Default)]
pub struct Pile(usize);

impl Pile {
    /// Counts `c` in, and says whether it is a mark past the few a
    /// terminal shows in place: one that output for a terminal writes
    /// some other way, as an escape.
    pub fn piles_up(&mut self, c: char) -> bool {
        self.push(c) > MARKS_KEPT
    }

    /// Counts `c` in: the marks on its base, itself included.
    fn push(&mut self, c: char) -> usize {
        match stacking(c) {
            Stacking::Mark => self.0 += 1,
            Stacking::Invisible => {}
            Stacking::Base => self.0 = 0,
        }
        self.0
    }
}

/// Whether some base carries more than [`MARKS_KEPT`] marks.
fn piles_marks(text: &str) -> bool {
    let mut pile = Pile::default();
    text.chars().any(|c| pile.push(c) > MARKS_KEPT)
}

fn escape(text: &str, keep_newlines: bool) -> Cow<'_, str> {
    if !needs_escapes(text, keep_newlines) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    escape_into(text, keep_newlines, &mut out);
    Cow::Owned(out)
}

fn needs_escapes(text: &str, keep_newlines: bool) -> bool {
    text.chars().any(|c| is_unsafe(c, keep_newlines)) || piles_marks(text)
}

/// Text as [`escape_str`] (or, keeping newlines, [`escape_multiline`])
/// writes it, in runs: `(text, false)` kept as it came, `(escape, true)`
/// an escape standing for a character. A display that can style text
/// shows the escapes apart, so that one reads apart from the same letters
/// sent as they stand (a body holding `\x1b` typed out).
pub fn escape_runs(text: &str, keep_newlines: bool) -> Vec<(Cow<'_, str>, bool)> {
    if !needs_escapes(text, keep_newlines) {
        return vec![(Cow::Borrowed(text), false)];
    }
    let mut runs = Runs(Vec::new());
    escape_into(text, keep_newlines, &mut runs);
    runs.0
        .into_iter()
        .map(|(run, escaped)| (Cow::Owned(run), escaped))
        .collect()
}

/// Where [`escape_into`] writes.
trait Escaped {
    /// Text kept as it came.
    fn kept(&mut self, text: &str);
    /// The escape standing for `c`.
    fn escape(&mut self, c: char);
}

impl Escaped for String {
    fn kept(&mut self, text: &str) {
        self.push_str(text);
    }

    fn escape(&mut self, c: char) {
        write_escape(self, c);
    }
}

/// Runs of kept text and of escapes, each run of one kind.
struct Runs(Vec<(String, bool)>);

impl Runs {
    fn run(&mut self, escaped: bool) -> &mut String {
        if self.0.last().is_none_or(|(_, last)| *last != escaped) {
            self.0.push((String::new(), escaped));
        }
        // Pushed just now when there was none of its kind.
        &mut self.0.last_mut().unwrap_or_else(|| unreachable!("a run was pushed")).0
    }
}

impl Escaped for Runs {
    fn kept(&mut self, text: &str) {
        self.run(false).push_str(text);
    }

    fn escape(&mut self, c: char) {
        write_escape(self.run(true), c);
    }
}

fn write_escape(out: &mut String, c: char) {
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

fn escape_into(text: &str, keep_newlines: bool, out: &mut impl Escaped) {
    // The last character written raw, which a joiner or a selector may
    // belong to; none after an escape.
    let mut previous = None;
    // An escape written is a new base.
    let mut pile = Pile::default();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let next = chars.peek().map(|&(_, c)| c);
        // Emoji are built of what is escaped alone: 👨‍👩‍👧 of joiners
        // between pictographs, 🏴󠁧󠁢󠁳󠁣󠁴󠁿 of tags after a flag. Those are kept.
        let joins_emoji = c == '\u{200d}'
            && previous.is_some_and(is_pictograph)
            && next.is_some_and(|next| next != '\u{fe0f}' && is_pictograph(next));
        let selects = is_selector(c) && previous.is_some_and(|base| takes_selector(base, c, next));
        previous = Some(c);
        if c == FLAG_BASE {
            let tags = flag_tags(&text[at + c.len_utf8()..]);
            out.kept(&text[at..at + c.len_utf8() + tags]);
            while chars.peek().is_some_and(|&(i, _)| i < at + c.len_utf8() + tags) {
                chars.next();
            }
            pile = Pile::default();
            continue;
        }
        if joins_emoji || selects || !is_unsafe(c, keep_newlines) {
            if pile.push(c) <= MARKS_KEPT {
                out.kept(&text[at..at + c.len_utf8()]);
                continue;
            }
            // Past the cap, the rest of the pile is escaped, not stacked
            // again on the escape's last letter. (A mark is never a
            // pictograph: no joiner beside it reads differently for it.)
        } else {
            pile = Pile::default();
        }
        previous = None;
        out.escape(c);
    }
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
    fn a_pile_of_marks_is_kept_to_a_few_and_the_rest_escaped() {
        let pile = format!("e{}x", "\u{301}".repeat(50));
        let shown = escape_str(&pile);
        let kept = "\u{301}".repeat(MARKS_KEPT);
        let escaped = "\\u{301}".repeat(50 - MARKS_KEPT);
        assert_eq!(shown, format!("e{kept}{escaped}x"));
        assert_eq!(
            escape_multiline(&format!("{pile}\n{pile}")),
            format!("{shown}\n{shown}")
        );
        // Real writing keeps its marks: Vietnamese decomposed, a Tibetan
        // stack, Hangul jamo, a keycap, emoji with selectors and joiners.
        for text in [
            "Vie\u{323}\u{302}t",
            "\u{f66}\u{f92}\u{fb2}\u{f74}\u{f56}",
            "\u{1112}\u{1161}\u{11ab}",
            "1\u{fe0f}\u{20e3}",
            "\u{2764}\u{fe0f}\u{200d}\u{1f525} \u{1f441}\u{fe0f}\u{200d}\u{1f5e8}\u{fe0f}",
        ] {
            assert_eq!(escape_str(text), text);
        }
        // A selector after a mark selects nothing: escaped, it hides no pile.
        let hidden = format!("e{}", "\u{301}\u{fe0f}".repeat(5));
        assert_eq!(escape_str(&hidden), format!("e{}", "\u{301}\\u{fe0f}".repeat(5)));
        // An escape is a base of its own: marks after it are kept.
        assert_eq!(escape_str("\x1b\u{301}"), "\\x1b\u{301}");
    }

    #[test]
    fn a_variation_selector_is_kept_only_where_it_picks_a_glyph() {
        for text in [
            "❤\u{fe0f}",
            "☺\u{fe0e}",
            "#\u{fe0f}\u{20e3}",
            "葛\u{e0100}",
            "≩\u{fe00}",
            "\u{1820}\u{180b}",
        ] {
            assert_eq!(escape_str(text), text);
        }
        assert_eq!(escape_str("same-id\u{fe0f}"), "same-id\\u{fe0f}");
        assert_eq!(
            escape_str("evt_1Nq3\u{fe0f}"),
            "evt_1Nq3\\u{fe0f}",
            "a digit is a keycap's only before one"
        );
        assert_eq!(escape_str("id\u{1d173}\u{2800}"), "id\\u{1d173}\\u{2800}");
        assert_eq!(
            escape_str("❤\u{fe0f}\u{fe0f}"),
            "❤\u{fe0f}\\u{fe0f}",
            "one selector a base"
        );
        assert_eq!(escape_str("id\u{e0168}\u{e0169}"), "id\\u{e0168}\\u{e0169}");
        assert_eq!(escape_str("a\u{fe00}"), "a\\u{fe00}");
        assert_eq!(escape_str("\x1b\u{fe0f}"), "\\x1b\\u{fe0f}");
    }

    #[test]
    fn blank_fillers_are_escaped() {
        assert_eq!(escape_str("id\u{3164}"), "id\\u{3164}");
        assert_eq!(
            escape_str("a\u{115f}\u{1160}b\u{ffa0}\u{34f}"),
            "a\\u{115f}\\u{1160}b\\u{ffa0}\\u{34f}"
        );
    }

    #[test]
    fn binary_is_hex() {
        let dump = escape_bytes(&[0xff, 0x1b, b'A']);
        assert!(dump.starts_with("00000000  ff 1b 41"));
        assert!(dump.ends_with("..A\n"));
    }

    /// The most marks any base carries, as a terminal would stack them.
    fn tallest_pile(s: &str) -> usize {
        let mut pile = Pile::default();
        s.chars().map(|c| pile.push(c)).max().unwrap_or(0)
    }

    /// Text rich in marks, which `any::<String>()` seldom piles up.
    fn marked_text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("e".to_owned()),
            Just("\u{301}".to_owned()),
            Just("\u{20dd}".to_owned()),
            Just("\u{fe0f}".to_owned()),
            Just("\u{200d}".to_owned()),
            Just("\u{1f468}".to_owned()),
            Just("\u{1b}".to_owned()),
            Just("\n".to_owned()),
            any::<char>().prop_map(String::from),
        ];
        proptest::collection::vec(piece, 0..64).prop_map(|pieces| pieces.concat())
    }

    #[test]
    fn runs_tell_escapes_from_the_same_letters_sent() {
        let runs = escape_runs("typed \\x1b, sent \x1b[31m\n", true);
        let runs: Vec<(&str, bool)> = runs.iter().map(|(run, escaped)| (run.as_ref(), *escaped)).collect();
        assert_eq!(
            runs,
            [("typed \\x1b, sent ", false), ("\\x1b", true), ("[31m\n", false)]
        );
        assert_eq!(escape_runs("plain", false), [(Cow::Borrowed("plain"), false)]);
    }

    proptest! {
        #[test]
        fn runs_are_the_escaped_text_cut_where_escapes_start_and_end(s in any::<String>(), keep_newlines: bool) {
            let runs = escape_runs(&s, keep_newlines);
            let joined: String = runs.iter().map(|(run, _)| run.as_ref()).collect();
            prop_assert_eq!(joined, escape(&s, keep_newlines).into_owned());
            for (run, escaped) in &runs {
                prop_assert!(!escaped || run.starts_with('\\'), "{:?}", run);
            }
            prop_assert!(runs.windows(2).all(|pair| pair[0].1 != pair[1].1), "runs of one kind are one run");
        }

        #[test]
        fn no_base_carries_more_than_a_few_marks(s in marked_text()) {
            for (shown, keep_newlines) in [(escape_str(&s), false), (escape_multiline(&s), true)] {
                prop_assert!(tallest_pile(&shown) <= MARKS_KEPT, "{shown:?}");
                prop_assert!(is_terminal_safe(&shown, keep_newlines), "{shown:?}");
                let letters = |t: &str| t.chars().filter(|&c| stacking(c) == Stacking::Base).count();
                prop_assert!(letters(&shown) >= letters(&s), "nothing lost: {shown:?}");
            }
        }

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
