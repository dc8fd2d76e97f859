//! JSON shapes of `history --json` and `show --json`.

use std::fmt::Write;

use serde::Serialize;
use serde_json::{json, Value};

use super::body::Encoded;
use super::mask::{shown_path, shown_value};
use crate::store::{Delivery, Outcome, ReplayRun, Summary};
use crate::time::{rfc3339_ms, round_ms};
use portpreview_shared::Header;

/// One `history --json` row; `target` is the local target it went to,
/// `delivery_number` its place among its event's deliveries (2 for the
/// first retry; none for a replay attempt). Credentials in the path's query
/// are masked unless `reveal`.
pub fn summary(s: &Summary, target: &str, delivery_number: Option<i64>, reveal: bool) -> Value {
    json!({
        "id": s.id,
        "received_at": rfc3339_ms(s.received_at_ms),
        "method": s.method,
        "path": shown_path(&s.path, reveal),
        "status": s.status,
        "duration_ms": s.duration_ms.map(round_ms),
        "provider": s.provider,
        "event_type": s.event_type,
        "event_key": s.event_key,
        "event_key_source": s.event_key_source,
        // A replay attempt is no delivery of its event: it is not counted,
        // nor does it count any.
        "delivery_count": s.replay_of.is_none().then_some(s.delivery_count),
        "error": s.error,
        "replay_of": s.replay_of,
        "target": target,
        "delivery_number": delivery_number,
    })
}

/// A body's full size, or null for one that broke off on its way: only
/// where it stopped is known, and the stored bytes say that.
fn known_size(stored: &[u8], size: u64) -> Option<u64> {
    (!crate::store::size_unknown_past(stored.len() as u64, size)).then_some(size)
}

/// One delivery whole for `show --json`; secrets masked unless `reveal`.
/// A replay attempt has no place among its event's deliveries, and came
/// in on no public URL: both are null, as in `history --json`.
pub fn delivery(d: &Delivery, delivery_number: i64, runs: &[ReplayRun], reveal: bool) -> Value {
    let r = &d.request;
    let mut request = json!({
        "method": r.method,
        "path": shown_path(&r.path, reveal),
        "headers": headers(&r.request_headers, reveal),
        "body_size": known_size(&r.request_body, r.request_body_size),
        "body_truncated": r.request_truncated(),
    });
    add_body(&mut request, &r.request_body);
    // No answer came (a refused port, a timeout): null, as in flight,
    // not an answer with nothing in it; `error` says why. One that came
    // after its caller had gone keeps its headers and body.
    let answered = |o: &&Outcome| o.status.is_some() || !o.response_headers.is_empty() || o.response_body_size > 0;
    let response = d.outcome.as_ref().filter(answered).map(|o| {
        let mut response = json!({
            "status": o.status,
            "headers": headers(&o.response_headers, reveal),
            "body_size": known_size(&o.response_body, o.response_body_size),
            "body_truncated": (o.response_body.len() as u64) < o.response_body_size,
        });
        add_body(&mut response, &o.response_body);
        response
    });
    json!({
        "id": d.id,
        "received_at": rfc3339_ms(r.received_at_ms),
        "tunnel_url": (!r.tunnel_url.is_empty()).then_some(&r.tunnel_url),
        "target": r.target,
        "method": r.method,
        "path": shown_path(&r.path, reveal),
        "status": d.outcome.as_ref().and_then(|o| o.status),
        "duration_ms": d.outcome.as_ref().and_then(|o| o.duration_ms).map(round_ms),
        "provider": r.provider,
        "event_type": r.event_type,
        "event_key": r.event_key,
        "event_key_source": r.event_key_source,
        "delivery_count": r.replay_of.is_none().then_some(d.delivery_count),
        "delivery_number": r.replay_of.is_none().then_some(delivery_number),
        "error": d.outcome.as_ref().and_then(|o| o.error.clone()),
        "replay_of": r.replay_of,
        "request": request,
        "response": response,
        "replay_runs": runs.iter().map(|run| replay_run(run, reveal)).collect::<Vec<_>>(),
    })
}

fn replay_run(run: &ReplayRun, reveal: bool) -> Value {
    let facts = crate::replay::stored::StoredReport::read(&run.report_json);
    let target = facts.target.map(|target| shown_path(&target, reveal).into_owned());
    json!({
        "id": run.id,
        "started_at": rfc3339_ms(run.started_at_ms),
        "target": target,
        "times": run.times,
        "concurrency": run.concurrency,
        "fresh": facts.fresh,
        "edits": facts.edits,
        "idempotent": run.idempotent == Some(true),
        "verdict": facts.verdict.unwrap_or_else(|| verdict_of(run.idempotent).to_owned()),
        "summary": run.summary,
    })
}

/// The verdict of a run stored by a version whose report did not name it:
/// such a report cannot tell a failed run from one not idempotent.
fn verdict_of(idempotent: Option<bool>) -> &'static str {
    match idempotent {
        Some(true) => "idempotent",
        Some(false) => "not_idempotent",
        None => "inconclusive",
    }
}

/// Headers as an ordered list of `{name, value}` (or `value_base64`).
pub fn headers(list: &[Header], reveal: bool) -> Value {
    Value::Array(
        list.iter()
            .map(|h| match Encoded::of(&shown_value(h, reveal)) {
                Encoded::Text(value) => json!({ "name": h.name, "value": value }),
                Encoded::Base64(value) => json!({ "name": h.name, "value_base64": value }),
            })
            .collect(),
    )
}

fn add_body(object: &mut Value, bytes: &[u8]) {
    let (key, value) = match Encoded::of(bytes) {
        Encoded::Text(text) => ("body", text),
        Encoded::Base64(b64) => ("body_base64", b64),
    };
    if let Some(map) = object.as_object_mut() {
        map.insert(key.into(), Value::String(value));
    }
}

/// Pretty JSON that is also safe on a terminal: DEL, C1 controls and bidi
/// overrides inside strings are written as `\uXXXX` escapes.
pub fn to_terminal_text(value: &impl Serialize) -> String {
    terminal_safe(serde_json::to_string_pretty(value).unwrap_or_default())
}

/// Writes `items` as the items of one pretty JSON array, as
/// [`to_terminal_text`] would write them collected, one item at a time (a
/// history of a million deliveries is never held as one document), after
/// an opening `[` when there are any (returns whether there were). A
/// caller whose items may end on an error closes the array only when they
/// did not, with [`close_terminal_array`]: a cut listing is then no valid
/// JSON, and never taken for a whole one.
pub fn write_terminal_items<T: Serialize>(
    out: &mut impl std::io::Write,
    items: impl IntoIterator<Item = T>,
) -> std::io::Result<bool> {
    write_terminal_items_at(out, items.into_iter().map(Ok), 1)
}

/// [`write_terminal_items`] of an array `depth` levels into a document
/// (1 for a document that is the array), each item made as its turn
/// comes, which may fail: the array is left open then.
pub fn write_terminal_items_at<T: Serialize>(
    out: &mut (impl std::io::Write + ?Sized),
    items: impl IntoIterator<Item = std::io::Result<T>>,
    depth: usize,
) -> std::io::Result<bool> {
    let indent = "  ".repeat(depth);
    let mut items = items.into_iter().peekable();
    if items.peek().is_none() {
        return Ok(false);
    }
    out.write_all(b"[\n")?;
    while let Some(item) = items.next() {
        for (n, line) in to_terminal_text(&item?).lines().enumerate() {
            if n > 0 {
                out.write_all(b"\n")?;
            }
            out.write_all(indent.as_bytes())?;
            out.write_all(line.as_bytes())?;
        }
        out.write_all(if items.peek().is_some() { b",\n" } else { b"\n" })?;
    }
    Ok(true)
}

/// Ends an array [`write_terminal_items`] began (`opened`), or writes an
/// empty one.
pub fn close_terminal_array(out: &mut impl std::io::Write, opened: bool) -> std::io::Result<()> {
    close_terminal_array_at(out, opened, 1)?;
    out.write_all(b"\n")
}

/// [`close_terminal_array`] of an array `depth` levels into a document,
/// without the line's end: what follows it may be `,`.
pub fn close_terminal_array_at(
    out: &mut (impl std::io::Write + ?Sized),
    opened: bool,
    depth: usize,
) -> std::io::Result<()> {
    match opened {
        true => write!(out, "{}]", "  ".repeat(depth - 1)),
        false => out.write_all(b"[]"),
    }
}

/// One-line JSON that is also safe on a terminal, escaped as
/// [`to_terminal_text`] is.
pub fn to_terminal_line(value: &impl Serialize) -> String {
    terminal_safe(serde_json::to_string(value).unwrap_or_default())
}

/// serde_json escapes C0 controls but leaves DEL, C1 controls (an 8-bit
/// CSI among them), bidi controls, invisible characters and piles of
/// combining marks (which draw over the lines around them) raw inside
/// strings; every character the text views escape becomes `\uXXXX` (a
/// surrogate pair past U+FFFF), which any JSON reader decodes back to the
/// same text. Outside strings serde_json writes only ASCII, spaces and
/// newlines, so the whole text can be scanned.
fn terminal_safe(text: String) -> String {
    // A fresh count of marks for each pass over the text.
    let risky = || {
        let mut pile = portpreview_shared::sanitize::Pile::default();
        move |c: char| pile.piles_up(c) || (c != '\n' && portpreview_shared::sanitize::is_hidden_or_control(c))
    };
    if !text.chars().any(risky()) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut escaped = risky();
    for c in text.chars() {
        if escaped(c) {
            for unit in c.encode_utf16(&mut [0; 2]) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_terminal_array<T: Serialize>(
        out: &mut impl std::io::Write,
        items: impl IntoIterator<Item = T>,
    ) -> std::io::Result<()> {
        let opened = write_terminal_items(out, items)?;
        close_terminal_array(out, opened)
    }

    #[test]
    fn an_array_written_item_by_item_reads_as_the_whole_one() {
        let items = [json!({"id": 1, "path": "/a\u{9b}"}), json!({"id": 2, "tags": [1, 2]})];
        for n in 0..=items.len() {
            let mut out = Vec::new();
            write_terminal_array(&mut out, &items[..n]).unwrap();
            let whole = format!("{}\n", to_terminal_text(&items[..n].to_vec()));
            assert_eq!(String::from_utf8(out).unwrap(), whole, "{n} items");
        }
    }

    #[test]
    fn terminal_json_stays_json() {
        let value = json!({ "path": "/a\u{9b}b\u{202e}c\u{1b}" });
        let text = to_terminal_text(&value);
        assert!(!text.contains('\u{9b}') && !text.contains('\u{202e}') && !text.contains('\u{1b}'));
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
        // Marks piled on one letter draw over the lines around it: past the
        // few a terminal shows in place, they are escaped as the text views
        // escape them.
        let piled = json!({ "body": format!("a{}", "\u{301}".repeat(50)) });
        let text = to_terminal_text(&piled);
        assert!(text.matches('\u{301}').count() <= 3, "{text}");
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), piled);
        let line = to_terminal_line(&value);
        assert!(!line.contains('\u{9b}') && !line.contains('\u{202e}') && !line.contains('\n'));
        assert_eq!(serde_json::from_str::<Value>(&line).unwrap(), value);
    }

    /// Every character the text views escape is escaped in JSON too: bidi
    /// marks, invisible ones, line separators and tags past U+FFFF.
    #[test]
    fn terminal_json_escapes_what_the_text_views_escape() {
        let hidden = "a\u{61c}b\u{feff}c\u{200b}d\u{2028}e\u{2029}f\u{e0041}g";
        let value = json!({ "event_key": hidden });
        for text in [to_terminal_text(&value), to_terminal_line(&value)] {
            assert!(
                !text
                    .chars()
                    .any(|c| c != '\n' && portpreview_shared::sanitize::is_hidden_or_control(c)),
                "{text:?}"
            );
            assert!(text.contains("\\udb40\\udc41"), "a surrogate pair past U+FFFF: {text}");
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
        }
    }

    #[test]
    fn headers_keep_order_and_mask() {
        let list = vec![
            Header::new("x-a", "1"),
            Header::new("authorization", "Bearer secret"),
            Header::new("x-a", vec![0xff]),
        ];
        let shown = headers(&list, false);
        assert_eq!(
            shown,
            json!([
                { "name": "x-a", "value": "1" },
                { "name": "authorization", "value": "Bearer ••••••" },
                { "name": "x-a", "value_base64": "/w==" },
            ])
        );
        assert_eq!(headers(&list, true)[1]["value"], "Bearer secret");
    }

    #[test]
    fn a_body_that_broke_off_has_no_size_and_one_over_the_limit_keeps_its_own() {
        use crate::store::{size_past_cut, Delivery, NewDelivery, Outcome};
        let d = Delivery {
            id: 1,
            request: NewDelivery {
                request_body: b"part".to_vec(),
                request_body_size: size_past_cut(4),
                ..NewDelivery::default()
            },
            outcome: Some(Outcome {
                status: Some(200),
                response_body: b"start".to_vec(),
                response_body_size: 90,
                ..Outcome::default()
            }),
            delivery_count: 1,
        };
        let shown = delivery(&d, 1, &[], false);
        assert_eq!(shown["request"]["body_size"], Value::Null, "never known: {shown}");
        assert_eq!(shown["request"]["body_truncated"], true);
        assert_eq!(shown["response"]["body_size"], 90);
        assert_eq!(shown["response"]["body_truncated"], true);
    }
}
