//! Answers that differ between attempts, grouped and shown side by side.

use portpreview_shared::sanitize::escape_str;
use portpreview_shared::text::{shorten, thousands};
use serde_json::{json, Value};

use super::report::{attempts_phrase, Attempt};
use crate::render::body::pretty_json;

/// Characters of a body shown in JSON and beside another answer.
const SHOWN_BODY_CHARS: usize = 2000;

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
        // A body kept cut may end inside a character: that alone is still text.
        if std::str::from_utf8(&self.body).is_err_and(|e| e.error_len().is_some()) {
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
        let head = match (self.status, &self.error) {
            // The status first: a column cuts a long list of attempts, and
            // two columns that both read "attempts 1, 3, 5, …" look alike.
            (Some(status), _) => format!("{status} for {}{cut}", attempts_phrase(&self.attempts)),
            (None, error) => format!(
                "{}: {}",
                attempts_phrase(&self.attempts),
                error.as_deref().unwrap_or("no answer")
            ),
        };
        let mut lines = vec![head];
        let body = shown_body(&self.body);
        let pretty = pretty_json(body.as_bytes()).unwrap_or(body);
        lines.extend(pretty.lines().map(|l| escape_str(l).into_owned()));
        lines
    }
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

/// Two answers in two columns, each at most `width` characters wide.
pub fn side_by_side(left: &AnswerGroup, right: &AnswerGroup, width: usize) -> String {
    let (a, b) = (left.lines(), right.lines());
    let rows = a.len().max(b.len()).min(40);
    let mut out = String::new();
    for i in 0..rows {
        let l = shorten(a.get(i).map_or("", String::as_str), width);
        let r = shorten(b.get(i).map_or("", String::as_str), width);
        let marker = if a.get(i) == b.get(i) { ' ' } else { '|' };
        out.push_str(&format!("  {l:<width$} {marker} {r}\n"));
    }
    out
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
