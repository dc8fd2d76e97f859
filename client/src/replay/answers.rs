//! Answers that differ between attempts, grouped and shown side by side.

use portpreview_shared::sanitize::escape_str;
use portpreview_shared::text::{columns, common_start, counted, fit, pad, tail, thousands, wrap};
use serde_json::{json, Value};

use super::report::{attempts_phrase, Attempt};
use crate::render::body::pretty_json;

/// Characters of a body shown in JSON and beside another answer.
const SHOWN_BODY_CHARS: usize = 2000;

/// Columns an error is wrapped to: one column of two side by side.
const ERROR_COLUMNS: usize = 36;

/// Attempts that got the same answer.
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerGroup {
    /// Attempt numbers, ascending.
    pub attempts: Vec<u32>,
    /// Status, `None` on error.
    pub status: Option<u16>,
    /// Response body (the kept part).
    pub body: Vec<u8>,
    /// The whole body's size and digest, which the group shares.
    whole: (u64, [u8; 32]),
    /// Error text when there was no answer.
    pub error: Option<String>,
}

impl AnswerGroup {
    /// The group as JSON: the body as text, or (null, and) its start as
    /// `body_base64` when it is binary.
    pub fn to_json(&self) -> Value {
        let (size, digest) = self.whole;
        let mut value = json!({
            "attempts": self.attempts,
            "status": self.status,
            "body": shown_body(&self.body),
            "body_size": size,
            // No answer has no body to digest; zeros would pass for one.
            "body_blake3": self.status.map(|_| hex::encode(digest)),
            "error": self.error,
        });
        // Text would turn binary bytes into U+FFFD: their start goes as base64.
        if is_binary(&self.body) {
            use base64::Engine;
            let start = &self.body[..self.body.len().min(SHOWN_BODY_CHARS)];
            value["body"] = Value::Null;
            value["body_base64"] = base64::engine::general_purpose::STANDARD.encode(start).into();
        }
        value
    }

    fn lines(&self) -> Vec<String> {
        let (size, _) = self.whole;
        // Kept cut, two answers may start alike and differ further on.
        let cut = if size > self.body.len() as u64 {
            format!(
                " ({} bytes, the first {} kept)",
                thousands(size),
                thousands(self.body.len() as u64)
            )
        } else {
            String::new()
        };
        let Some(status) = self.status else {
            // The error wrapped under its head: a column would cut it
            // before it says what happened.
            let mut lines = vec![format!("no answer to {}", attempts_phrase(&self.attempts))];
            // An error may quote what the handler sent.
            let error = escape_str(self.error.as_deref().unwrap_or("no answer"));
            lines.extend(wrap(&error, ERROR_COLUMNS));
            return lines;
        };
        // The status first: a column cuts a long list of attempts, and
        // two columns that both read "attempts 1, 3, 5, …" look alike.
        let mut lines = vec![format!("{status} for {}{cut}", attempts_phrase(&self.attempts))];
        let body = match is_binary(&self.body) {
            // As `show` and the state lines write bytes that are not
            // UTF-8: replacement characters would make two bodies that
            // differ only there read alike.
            true => {
                let start = &self.body[..self.body.len().min(SHOWN_BODY_CHARS)];
                super::probe::utf8_text(start.to_vec())
            }
            false => shown_body(&self.body),
        };
        let pretty = pretty_json(body.as_bytes()).unwrap_or(body);
        lines.extend(pretty.lines().map(|l| escape_str(l).into_owned()));
        lines
    }
}

impl AnswerGroup {
    /// The answer in at most `width` columns: its head, then its body's
    /// lines run together on one line, cut; or its error, wrapped whole,
    /// as cut it would stop before it says what happened.
    pub fn in_brief(&self, width: usize) -> Vec<String> {
        let lines = self.lines();
        let (head, rest) = lines.split_first().map_or(("", &[][..]), |(h, r)| (h.as_str(), r));
        let rest: Vec<&str> = rest.iter().map(|line| line.trim()).filter(|l| !l.is_empty()).collect();
        let whole = match rest.is_empty() {
            true => head.to_owned(),
            false => format!("{head}: {}", rest.join(" ")),
        };
        match self.status {
            Some(_) => vec![fit(&whole, width)],
            None => wrap(&whole, width),
        }
    }
}

/// Whether `body` is no UTF-8 text. A body kept cut may end inside a
/// character: that alone is still text.
fn is_binary(body: &[u8]) -> bool {
    std::str::from_utf8(body).is_err_and(|e| e.error_len().is_some())
}

fn shown_body(body: &[u8]) -> String {
    String::from_utf8_lossy(body).chars().take(SHOWN_BODY_CHARS).collect()
}

/// Groups attempts by answer (status, body, error), in order of first appearance.
pub fn distinct_answers(attempts: &[Attempt]) -> Vec<AnswerGroup> {
    let mut groups: Vec<AnswerGroup> = Vec::new();
    for attempt in attempts {
        let answer = &attempt.answer;
        let whole = (answer.body_size, answer.body_digest);
        match groups
            .iter_mut()
            .find(|g| g.status == answer.status && g.whole == whole && g.error == answer.error)
        {
            Some(group) => group.attempts.push(attempt.n),
            None => groups.push(AnswerGroup {
                attempts: vec![attempt.n],
                status: answer.status,
                body: answer.body.clone(),
                whole,
                error: answer.error.clone(),
            }),
        }
    }
    groups
}

/// The two answers to show side by side: the first, and the first that
/// differs from it in status or error if one does (the 409 among answers
/// that differ only in a counter), else the second.
pub fn pair_to_show(groups: &[AnswerGroup]) -> Option<(&AnswerGroup, &AnswerGroup)> {
    let (first, rest) = groups.split_first()?;
    let other = rest
        .iter()
        .find(|g| g.status != first.status || g.error != first.error)
        .or(rest.first())?;
    Some((first, other))
}

/// Most rows of two answers shown side by side.
const ROWS_SHOWN: usize = 40;

/// Rows shown before the first that differs, when the window cannot start
/// at the top: enough to see where in the answer it is.
const ROWS_BEFORE: usize = 3;

/// Two answers in two columns, each `width` terminal columns wide. A row
/// that differs is shown, on both sides, where it first differs; a long
/// answer is shown from a little before its first differing row, and the
/// rows left out are counted.
pub fn side_by_side(left: &AnswerGroup, right: &AnswerGroup, width: usize) -> String {
    let (a, b) = (left.lines(), right.lines());
    let total = a.len().max(b.len());
    // Row 0 heads each answer (its status and attempts) and always shows;
    // the window over the body follows the first row that differs.
    let first_differing = (1..total).find(|&i| a.get(i) != b.get(i)).unwrap_or(1);
    let start = if first_differing < ROWS_SHOWN {
        1
    } else {
        first_differing - ROWS_BEFORE
    };
    let end = total.min(start + ROWS_SHOWN - 1);
    let rows = std::iter::once(0).chain(start..end);
    let mut out = String::new();
    for i in rows {
        if i == start && start > 1 {
            out.push_str(&format!("  … {} lines alike\n", start - 1));
        }
        let (l, r) = (a.get(i).map_or("", String::as_str), b.get(i).map_or("", String::as_str));
        let marker = if a.get(i) == b.get(i) { ' ' } else { '|' };
        let (l, r) = around_difference(l, r, width);
        // Padded in columns: a CJK body would widen the left column, a
        // pile of combining marks narrow it.
        out.push_str(&format!("  {} {marker} {r}\n", pad(&l, width)));
    }
    if end < total {
        out.push_str(&format!("  … {} more lines\n", total - end));
    }
    out
}

/// One answer alone, its head and at most 40 rows of its body,
/// each in at most `width` columns: what every attempt got, when that was
/// a refusal whose body says why (a bad signature, a missing field).
pub fn alone(group: &AnswerGroup, width: usize) -> String {
    if is_binary(&group.body) {
        let (size, _) = group.whole;
        let head = group.lines().swap_remove(0);
        let size = counted(usize::try_from(size).unwrap_or(usize::MAX), "byte", "bytes");
        return format!(
            "  {}\n  (a binary body of {size}; --json has its start)\n",
            fit(&head, width)
        );
    }
    let lines = group.lines();
    let mut out = String::new();
    for line in lines.iter().take(ROWS_SHOWN) {
        out.push_str(&format!("  {}\n", fit(line, width)));
    }
    // Lines are counted only in the start that was read into them.
    let (size, _) = group.whole;
    let read_whole = size == group.body.len() as u64 && group.body.len() <= SHOWN_BODY_CHARS;
    if !read_whole {
        let size = counted(usize::try_from(size).unwrap_or(usize::MAX), "byte", "bytes");
        out.push_str(&format!("  … and more: a body of {size}\n"));
    } else if lines.len() > ROWS_SHOWN {
        out.push_str(&format!("  … {} more lines\n", lines.len() - ROWS_SHOWN));
    }
    out
}

/// `a` and `b` in at most `width` columns each, cut alike so that where
/// they first differ is in view: two answers that differ in their last
/// bytes would otherwise show the same start and nothing else. The start
/// goes (marked `…`) only when the difference lies past the columns
/// shown; a few columns of what the two share are kept before it.
fn around_difference(a: &str, b: &str, width: usize) -> (String, String) {
    let same = common_start(a, b);
    let shared = columns(&a[..same]);
    let fits = |text: &str| columns(text) <= width;
    // The difference, and a little of it, already shows from the start.
    if same == a.len().max(b.len()) || (fits(a) && fits(b)) || shared + width / 4 < width {
        return (fit(a, width), fit(b, width));
    }
    let before = tail(&a[..same], width / 3);
    (
        fit(&format!("{before}{}", &a[same..]), width),
        fit(&format!("{before}{}", &b[same..]), width),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(body: &[u8]) -> AnswerGroup {
        AnswerGroup {
            attempts: vec![1],
            status: Some(200),
            body: body.to_vec(),
            whole: (body.len() as u64, *blake3::hash(body).as_bytes()),
            error: None,
        }
    }

    #[test]
    fn a_long_answer_shown_alone_says_how_long_it_is_not_how_many_lines_were_read() {
        let short: Vec<u8> = (0..50).flat_map(|n| format!("line {n}\n").into_bytes()).collect();
        assert!(
            alone(&group(&short), 78).ends_with("  … 11 more lines\n"),
            "every line was read"
        );
        let long = "line\n".repeat(5_000).into_bytes();
        let shown = alone(&group(&long), 78);
        assert!(shown.ends_with("  … and more: a body of 25000 bytes\n"), "{shown}");
        assert!(!shown.contains("more lines"), "{shown}");
    }

    #[test]
    fn answers_that_differ_past_their_kept_start_are_two_answers() {
        let whole = |tail: &[u8]| [vec![b'x'; 70_000], tail.to_vec()].concat();
        let attempt = |n: u32, body: &[u8]| Attempt {
            n,
            role: super::super::report::Role::Replay,
            request: crate::store::NewDelivery::default(),
            body: bytes::Bytes::new(),
            answer: crate::replay::attempt::Answer {
                status: Some(200),
                body: body[..65_536].to_vec(),
                body_size: body.len() as u64,
                body_digest: *blake3::hash(body).as_bytes(),
                ..Default::default()
            },
            step: 0,
            state_changed: None,
        };
        let groups = distinct_answers(&[
            attempt(1, &whole(b"n=1")),
            attempt(2, &whole(b"n=2")),
            attempt(3, &whole(b"n=2")),
        ]);
        let attempts: Vec<_> = groups.iter().map(|g| g.attempts.clone()).collect();
        assert_eq!(attempts, [vec![1], vec![2, 3]]);
        assert_eq!(
            groups[1].lines()[0],
            "200 for attempts 2–3 (70,003 bytes, the first 65,536 kept)"
        );
    }

    /// Side by side, bytes that are not UTF-8 are written as `show` writes
    /// them: two answers that differ only there read apart.
    #[test]
    fn binary_bytes_side_by_side_are_written_as_escapes() {
        assert_eq!(group(&[b'a', 0x9b, 0xff]).lines()[1], "a\\x9b\\xff");
        assert_eq!(group("caf\u{e9}".as_bytes()).lines()[1], "caf\u{e9}");
    }

    #[test]
    fn a_status_that_differs_is_shown_before_bodies_that_do() {
        let refused = AnswerGroup {
            attempts: vec![3],
            status: Some(409),
            ..group(b"duplicate")
        };
        let groups = [group(b"n=1"), second(b"n=2"), refused];
        let (left, right) = pair_to_show(&groups).unwrap();
        assert_eq!((left.status, right.status), (Some(200), Some(409)));
        let (_, right) = pair_to_show(&groups[..2]).unwrap();
        assert_eq!(right.attempts, [2]);
        assert!(pair_to_show(&groups[..1]).is_none());
    }

    /// Where the `|` stands in each row of `side_by_side`, in columns.
    fn marker_columns(shown: &str) -> Vec<usize> {
        shown
            .lines()
            .map(|row| columns(&row[..row.find(" | ").unwrap_or(0)]))
            .collect()
    }

    /// A second answer, to another attempt: every row differs.
    fn second(body: &[u8]) -> AnswerGroup {
        AnswerGroup {
            attempts: vec![2],
            ..group(body)
        }
    }

    #[test]
    fn answers_that_differ_at_their_end_are_shown_where_they_differ() {
        let start = r#"{"status":"ok","processed":true,"message":"thank you for the event"}"#;
        let shown = side_by_side(
            &group(format!("{start} n=1").as_bytes()),
            &group(format!("{start} n=2").as_bytes()),
            38,
        );
        let body = shown.lines().nth(1).expect("a body row");
        let (l, r) = body.split_once(" | ").expect("marked as differing");
        assert!(
            l.trim_start().starts_with('…') && l.trim_end().ends_with("n=1"),
            "{shown}"
        );
        assert!(r.starts_with('…') && r.ends_with("n=2"), "{shown}");
        assert_eq!(columns(l), 40, "{shown}");

        // A difference near the start keeps the start; the cut end is marked.
        let early = side_by_side(
            &group(format!("A{start}").as_bytes()),
            &group(format!("B{start}").as_bytes()),
            38,
        );
        let (l, r) = early
            .lines()
            .nth(1)
            .and_then(|row| row.split_once(" | "))
            .expect("a body row");
        assert!(l.trim().starts_with("A{") && l.trim_end().ends_with('…'), "{early}");
        assert!(r.starts_with("B{") && r.ends_with('…'), "{early}");
    }

    /// Two long answers that differ far down are shown where they differ,
    /// under their heads, with the rows left out counted.
    #[test]
    fn long_answers_are_shown_from_where_they_differ() {
        let body = |n: u32| {
            (1..=100)
                .map(|i| format!("line {i} {}", if i == 50 { n } else { 0 }))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let shown = side_by_side(&group(body(1).as_bytes()), &second(body(2).as_bytes()), 38);
        let rows: Vec<&str> = shown.lines().collect();
        assert!(rows[0].contains("200 for attempt 1"), "{shown}");
        assert_eq!(rows[1].trim(), "… 46 lines alike", "{shown}");
        assert!(rows[2].trim_start().starts_with("line 47 0"), "{shown}");
        assert!(
            rows.iter()
                .any(|row| row.contains("line 50 1") && row.contains(" | line 50 2")),
            "{shown}"
        );
        // 39 body rows shown from line 47: lines 86 to 100 are left out.
        assert_eq!(rows.last().map(|row| row.trim()), Some("… 15 more lines"), "{shown}");
    }

    #[test]
    fn columns_line_up_whatever_the_width_of_the_characters() {
        for body in [
            "漢字".repeat(40),
            format!("e{}", "\u{301}".repeat(46)),
            format!("{}x", "👨\u{200d}👩\u{200d}👧".repeat(30)),
            "short".to_owned(),
        ] {
            let shown = side_by_side(&group(body.as_bytes()), &second(b"other"), 38);
            assert_eq!(marker_columns(&shown), [40, 40], "{shown}");
            let shown = side_by_side(&group(body.as_bytes()), &second(format!("{body}!").as_bytes()), 38);
            assert_eq!(marker_columns(&shown), [40, 40], "{shown}");
            assert!(
                shown.lines().all(|row| !row.contains("\u{200d}…")),
                "no emoji cut in half: {shown}"
            );
        }
    }

    #[test]
    fn a_binary_answer_is_given_in_base64_not_replacement_characters() {
        let shown = group(&[0x00, 0xff, 0xfe]).to_json();
        assert_eq!((&shown["body"], &shown["body_base64"]), (&Value::Null, &json!("AP/+")));
        let text = group("caf\u{e9}".as_bytes()).to_json();
        assert_eq!(text["body"], "caf\u{e9}");
        assert!(text.get("body_base64").is_none());
        // Cut inside its last character, a text body is still text.
        let cut = group(&"café".as_bytes()[..4]).to_json();
        assert_eq!(cut["body"], "caf\u{fffd}");
        // No answer has no body, nor a digest of one.
        let none = AnswerGroup {
            status: None,
            error: Some("connection refused".into()),
            ..group(b"")
        }
        .to_json();
        assert_eq!((&none["body_blake3"], &none["body"]), (&Value::Null, &json!("")));
        assert_eq!(
            group(b"").to_json()["body_blake3"],
            hex::encode(blake3::hash(b"").as_bytes())
        );
    }
}
