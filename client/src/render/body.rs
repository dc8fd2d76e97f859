//! Bodies laid out for reading: JSON pretty-printed, text as it came,
//! binary as hex; whoever shows them escapes the text.

use base64::Engine;
use portpreview_shared::text::{thousands, truncate_whole};

pub use portpreview_shared::coding::{decode, Decoding};

/// How a body is laid out for reading, before its text is escaped.
pub enum Layout<'a> {
    /// Pretty JSON, every token as received.
    Json(String),
    /// Text as it came.
    Text(&'a str),
    /// Bytes to show as a hex dump, which is safe as it stands: made by
    /// whoever shows it, a row at a time if they like.
    Hex(&'a [u8]),
}

/// A body laid out for reading, pretty JSON, text or a hex dump, of at
/// most the first `limit` bytes of `body` (the kind still judged on the
/// whole body), and how many bytes that shows. The cut falls between
/// characters as they are seen, or between hex dump rows, and is made
/// before escaping, so no character and no escape is ever shown in part.
pub fn layout_start(body: &[u8], limit: usize) -> (Layout<'_>, usize) {
    if body.len() <= limit {
        let layout = match (pretty_json(body), as_text(body)) {
            (Some(pretty), _) => Layout::Json(pretty),
            (None, Some(text)) => Layout::Text(text),
            (None, None) => Layout::Hex(body),
        };
        return (layout, body.len());
    }
    let Some(text) = as_text(body) else {
        // Whole rows, so the offsets of a later look at the rest line up.
        let cut = limit - limit % 16;
        return (Layout::Hex(&body[..cut]), cut);
    };
    let cut = truncate_whole(text, limit).len();
    // The layout starts at the document's first token; whitespace before
    // it is among the bytes shown.
    let lead = body.len() - body.trim_ascii_start().len();
    match pretty_json_start(body, cut.saturating_sub(lead)) {
        Some(pretty) => (Layout::Json(pretty), cut),
        None => (Layout::Text(&text[..cut]), cut),
    }
}

/// The body as text, when it is text: UTF-8 without NUL bytes. A NUL is
/// valid UTF-8, but a body holding one is a file or a format of its own,
/// read better as a hex dump than as a line of `\x00`.
pub fn as_text(body: &[u8]) -> Option<&str> {
    std::str::from_utf8(body).ok().filter(|text| !text.contains('\0'))
}

/// The body re-indented when it is a JSON document, every token as it was
/// received. Parsing into a value and printing that would show numbers
/// rounded (`123456789012345678901234567890`, `1.10`) and repeated keys
/// dropped: things a developer chasing an amount or a parser bug must see
/// as they were sent.
pub fn pretty_json(body: &[u8]) -> Option<String> {
    pretty_json_start(body, usize::MAX)
}

/// [`pretty_json`] of a document checked whole, laid out only as far as
/// its first `limit` bytes: a screen shows the start of a large body.
pub fn pretty_json_start(body: &[u8], limit: usize) -> Option<String> {
    let trimmed = body.trim_ascii();
    if !trimmed.starts_with(b"{") && !trimmed.starts_with(b"[") {
        return None;
    }
    serde_json::from_slice::<serde::de::IgnoredAny>(trimmed).ok()?;
    let text = std::str::from_utf8(trimmed).ok()?;
    reindent(truncate_whole(text, limit))
}

/// Nesting deeper than this is shown as sent. Each level indents every
/// line below it, so a document nested 200,000 deep, 400 KB sent, would
/// lay out as tens of gigabytes; no webhook payload comes near.
const MAX_LAID_OUT_DEPTH: usize = 64;

/// Why a JSON document is shown as sent rather than laid out: it nests
/// deeper than [`MAX_LAID_OUT_DEPTH`]. `None` for any other body, and for
/// JSON that is laid out.
pub fn shown_as_sent_note(body: &[u8]) -> Option<String> {
    let trimmed = body.trim_ascii();
    if !trimmed.starts_with(b"{") && !trimmed.starts_with(b"[") {
        return None;
    }
    // The depth first: a byte scan, where the parse that follows reads
    // the document again.
    if !nests_past(trimmed, MAX_LAID_OUT_DEPTH) {
        return None;
    }
    serde_json::from_slice::<serde::de::IgnoredAny>(trimmed).ok()?;
    Some(format!(
        "JSON nested more than {MAX_LAID_OUT_DEPTH} levels deep, shown as sent"
    ))
}

/// Whether brackets outside strings in `json` open more than `depth` deep.
fn nests_past(json: &[u8], depth: usize) -> bool {
    let (mut open, mut in_string, mut escaped) = (0usize, false, false);
    for &byte in json {
        match (in_string, byte) {
            (true, _) if escaped => escaped = false,
            (true, b'\\') => escaped = true,
            (true, b'"') | (false, b'"') => in_string = !in_string,
            (true, _) => {}
            (false, b'{' | b'[') => {
                open += 1;
                if open > depth {
                    return true;
                }
            }
            (false, b'}' | b']') => open = open.saturating_sub(1),
            (false, _) => {}
        }
    }
    false
}

/// Lays out valid JSON two spaces per level, as `serde_json`'s pretty
/// printer does, copying strings, numbers and literals untouched; `None`
/// past [`MAX_LAID_OUT_DEPTH`].
fn reindent(json: &str) -> Option<String> {
    fn new_line(out: &mut String, depth: usize) {
        out.push('\n');
        out.extend(std::iter::repeat_n("  ", depth));
    }
    let mut out = String::with_capacity(json.len() * 2);
    let mut depth = 0usize;
    let mut chars = json.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                out.push(c);
                while let Some(c) = chars.next() {
                    out.push(c);
                    match c {
                        '\\' => out.extend(chars.next()),
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '{' | '[' => {
                out.push(c);
                while chars.next_if(|c| c.is_ascii_whitespace()).is_some() {}
                if let Some(close) = chars.next_if(|&c| c == '}' || c == ']') {
                    out.push(close);
                } else if depth == MAX_LAID_OUT_DEPTH {
                    return None;
                } else {
                    depth += 1;
                    new_line(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                new_line(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                new_line(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_ascii_whitespace() => {}
            c => out.push(c),
        }
    }
    Some(out)
}

/// Bytes for a JSON document: text when UTF-8, base64 otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Encoded {
    /// The bytes were UTF-8.
    Text(String),
    /// Standard base64 of bytes that were not UTF-8.
    Base64(String),
}

impl Encoded {
    /// Encodes `bytes`, keeping them readable when they are text.
    pub fn of(bytes: &[u8]) -> Self {
        match std::str::from_utf8(bytes) {
            Ok(text) => Self::Text(text.to_owned()),
            Err(_) => Self::Base64(base64::engine::general_purpose::STANDARD.encode(bytes)),
        }
    }
}

/// A short note when a stored body is shorter than the one received.
pub fn truncation_note(stored: usize, size: u64) -> Option<String> {
    let stored = stored as u64;
    // A stream without a declared size that went on past what the history
    // keeps: the rest went through, only unrecorded.
    if crate::store::size_unknown_past(stored, size) && stored >= crate::store::MAX_STORED_BODY as u64 {
        return Some(format!(
            "(stored body cut at {} bytes, the most the history keeps; the rest went through unrecorded, its size \
             unknown)",
            thousands(stored)
        ));
    }
    if crate::store::size_unknown_past(stored, size) {
        return Some(format!(
            "(body cut short after {} bytes; the rest did not reach PortPreview)",
            thousands(stored)
        ));
    }
    (stored < size).then(|| {
        format!(
            "(stored body cut at {} of {} bytes)",
            thousands(stored),
            thousands(size)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use portpreview_shared::sanitize::{escape_multiline, hex_dump};

    /// The body as `show` prints it, before its lines are indented.
    fn for_terminal_start(body: &[u8], limit: usize) -> (String, usize) {
        let (layout, shown) = layout_start(body, limit);
        let text = match layout {
            Layout::Json(pretty) => escape_multiline(&pretty).into_owned(),
            Layout::Text(text) => escape_multiline(text).into_owned(),
            Layout::Hex(bytes) => hex_dump(bytes),
        };
        (text, shown)
    }

    fn for_terminal(body: &[u8]) -> String {
        for_terminal_start(body, usize::MAX).0
    }

    #[test]
    fn json_too_deep_to_lay_out_says_why_it_is_shown_as_sent() {
        let deep = format!("{}1{}", "{\"a\":".repeat(5000), "}".repeat(5000));
        let note = shown_as_sent_note(deep.as_bytes());
        assert_eq!(
            note.as_deref(),
            Some("JSON nested more than 64 levels deep, shown as sent")
        );
        assert_eq!(for_terminal(deep.as_bytes()).lines().count(), 1, "as sent");

        let laid_out = format!("{}1{}", "[".repeat(64), "]".repeat(64));
        assert_eq!(shown_as_sent_note(laid_out.as_bytes()), None);
        assert!(for_terminal(laid_out.as_bytes()).lines().count() > 1);
        // Brackets within strings open nothing, and a broken document is no JSON.
        let quoted = format!("{{\"a\": \"{}\\\"{}\"}}", "[".repeat(100), "{".repeat(100));
        assert_eq!(shown_as_sent_note(quoted.as_bytes()), None);
        assert_eq!(shown_as_sent_note("[".repeat(100).as_bytes()), None);
    }

    #[test]
    fn a_body_of_nul_bytes_is_binary_though_it_is_utf8() {
        assert_eq!(as_text(b"plain"), Some("plain"));
        assert_eq!(as_text(b"a\0b"), None);
        assert!(
            for_terminal(&[0; 20]).starts_with("00000000  00 00"),
            "{}",
            for_terminal(&[0; 20])
        );
    }

    #[test]
    fn a_cut_body_says_how_it_was_cut() {
        assert_eq!(truncation_note(10, 10), None);
        assert_eq!(
            truncation_note(10, 40).as_deref(),
            Some("(stored body cut at 10 of 40 bytes)")
        );
        assert_eq!(
            truncation_note(10, 11).as_deref(),
            Some("(body cut short after 10 bytes; the rest did not reach PortPreview)")
        );
        let most = crate::store::MAX_STORED_BODY;
        assert_eq!(
            truncation_note(most, most as u64 + 1).as_deref(),
            Some(
                "(stored body cut at 26,214,400 bytes, the most the history keeps; the rest went through \
                 unrecorded, its size unknown)"
            )
        );
    }

    #[test]
    fn json_is_indented_and_escaped() {
        let shown = for_terminal(br#"{"a":1,"text":"x\u001by\u202e"}"#);
        assert!(shown.starts_with("{\n  \"a\": 1,"), "{shown}");
        assert!(!shown.contains('\u{1b}') && !shown.contains('\u{202e}'), "{shown}");
    }

    #[test]
    fn json_is_laid_out_without_changing_a_token() {
        let body = br#" {"big":123456789012345678901234567890, "dup":1,"dup":2,"f":1.10,"e":1E5,"z":-0,
            "s":"a,b:{[\"]}\\","empty":{},"none":[ ],"list":[true,null]} "#;
        let expected = r#"{
  "big": 123456789012345678901234567890,
  "dup": 1,
  "dup": 2,
  "f": 1.10,
  "e": 1E5,
  "z": -0,
  "s": "a,b:{[\"]}\\",
  "empty": {},
  "none": [],
  "list": [
    true,
    null
  ]
}"#;
        assert_eq!(pretty_json(body).as_deref(), Some(expected));
        assert_eq!(pretty_json(b"[1,2"), None, "not JSON: shown as text");
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(pretty_json(nested(MAX_LAID_OUT_DEPTH).as_bytes()).is_some());
        let deep = nested(200_000);
        assert_eq!(pretty_json(deep.as_bytes()), None, "laid out, it would take gigabytes");
        assert_eq!(for_terminal(deep.as_bytes()), deep, "shown as sent");
    }

    #[test]
    fn text_and_binary_are_safe() {
        assert_eq!(for_terminal(b"a=1&b=\x1b"), "a=1&b=\\x1b");
        assert!(for_terminal(&[0xff, 0x00]).starts_with("00000000  ff 00"));
        assert_eq!(for_terminal(b"{not json"), "{not json");
    }

    #[test]
    fn a_cut_body_ends_on_a_whole_character_and_a_whole_escape() {
        // `é` straddles the limit: it goes to the part not shown.
        let (shown, count) = for_terminal_start("abcé!".as_bytes(), 4);
        assert_eq!((shown.as_str(), count), ("abc", 3));
        // An escape right at the limit is shown whole or not at all.
        assert_eq!(for_terminal_start(b"abc\x1b[2J", 4), ("abc\\x1b".to_owned(), 4));
        assert_eq!(for_terminal_start(b"abc\x1b[2J", 3), ("abc".to_owned(), 3));
        // A C1 control is two bytes of UTF-8: never half of it, never half its escape.
        let c1 = "abc\u{9b}31m";
        assert_eq!(for_terminal_start(c1.as_bytes(), 4), ("abc".to_owned(), 3));
        let whole = format!("abc{}", escape_multiline("\u{9b}"));
        assert_eq!(for_terminal_start(c1.as_bytes(), 5), (whole, 5));
        // An emoji of several code points goes whole, never as another.
        let couple = "ab\u{1f468}\u{200d}\u{1f469}!";
        assert_eq!(for_terminal_start(couple.as_bytes(), 9), ("ab".to_owned(), 2));
    }

    #[test]
    fn the_start_of_a_large_body_keeps_its_kind() {
        let json = br#"  {"id":"evt_1","items":[1,2,3]}"#;
        let (shown, count) = for_terminal_start(json, 20);
        assert_eq!(count, 20);
        assert!(shown.starts_with("{\n  \"id\": \"evt_1\","), "{shown}");
        let mut binary = vec![0xffu8];
        binary.extend_from_slice(&[b'a'; 40]);
        let (shown, count) = for_terminal_start(&binary, 20);
        assert_eq!(count, 16, "whole hex dump rows");
        assert_eq!(shown.lines().count(), 1, "{shown}");
        assert_eq!(for_terminal_start(b"short", 20), ("short".to_owned(), 5));
    }

    #[test]
    fn encoding_picks_text_when_it_can() {
        assert_eq!(Encoded::of(b"hi"), Encoded::Text("hi".into()));
        assert_eq!(Encoded::of(&[0xff]), Encoded::Base64("/w==".into()));
    }
}
