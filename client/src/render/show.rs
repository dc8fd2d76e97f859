//! `show` for people: one delivery whole, every untrusted byte escaped.

use std::borrow::Cow;
use std::io::{self, Write};

use portpreview_shared::provider::Provider;
use portpreview_shared::sanitize::{escape_multiline, escape_runs, escape_str, hex_dump_rows};
use portpreview_shared::text::thousands;
use portpreview_shared::Header;

use super::body::{decode, layout_start, shown_as_sent_note, truncation_note, Decoding, Layout};
use super::mask::{shown_path, shown_value, value_runs};
use crate::store::{Delivery, NewDelivery, ReplayRun};
use crate::time::{elapsed, ordinal, rfc3339_ms};

/// How far each body is shown, how to ask for the rest, and how its
/// escapes stand out.
#[derive(Debug, Clone, Copy)]
pub struct BodyCut<'a> {
    /// Bytes of each body shown (`usize::MAX` for all of them).
    pub limit: usize,
    /// The command line that reaches this history, `--db` included when
    /// it was named: the hint after a cut body must show this delivery,
    /// not the one with its number in the default history.
    pub portpreview: &'a str,
    /// How the escapes standing for characters the body sent stand out.
    pub marks: EscapeMarks,
}

impl BodyCut<'_> {
    /// Every byte of every body, escapes unmarked.
    pub const WHOLE: BodyCut<'static> = BodyCut {
        limit: usize::MAX,
        portpreview: "portpreview",
        marks: EscapeMarks::Plain,
    };
}

/// How an escape in a body (`\x1b` for an ESC it sent) stands out from
/// the same letters sent as they stand (a body holding `\x1b` typed out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EscapeMarks {
    /// Not at all: the text goes to a file or a program.
    Plain,
    /// In a colour of their own, as the TUI's detail shows them.
    Coloured,
    /// Underlined: NO_COLOR asks for no colour, not for no emphasis.
    Underlined,
}

impl EscapeMarks {
    /// The marks for a terminal, as the environment asks.
    pub fn for_terminal() -> EscapeMarks {
        match std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty()) {
            true => EscapeMarks::Underlined,
            false => EscapeMarks::Coloured,
        }
    }

    /// `text` escaped as [`escape_multiline`] does, each escape marked.
    fn escape<'t>(self, text: &'t str) -> Cow<'t, str> {
        match self {
            EscapeMarks::Plain => escape_multiline(text),
            _ => self.join(escape_runs(text, true)),
        }
    }

    /// The runs of escaped text (`(text, escaped)`) joined, the escapes marked.
    fn join<'t>(self, runs: Vec<(Cow<'t, str>, bool)>) -> Cow<'t, str> {
        let (on, off) = match self {
            EscapeMarks::Plain => ("", ""),
            EscapeMarks::Coloured => ("\x1b[35m", "\x1b[39m"),
            EscapeMarks::Underlined => ("\x1b[4m", "\x1b[24m"),
        };
        if let [(run, false)] = &runs[..] {
            return run.clone();
        }
        let mut joined = String::new();
        for (run, escaped) in runs {
            match escaped {
                true => joined.extend([on, &run, off]),
                false => joined.push_str(&run),
            }
        }
        Cow::Owned(joined)
    }
}

/// Writes the delivery as text to `out`; secrets masked unless `reveal`;
/// each body shown as far as `cut` says. Written as it is made: a 25 MiB
/// binary body is 130 MB of hex dump, never held whole.
pub fn write_delivery(
    out: &mut dyn Write,
    d: &Delivery,
    delivery_number: i64,
    runs: &[ReplayRun],
    reveal: bool,
    cut: BodyCut<'_>,
) -> io::Result<()> {
    writeln!(out, "Delivery #{}", d.id)?;
    overview(out, d, delivery_number)?;
    request(out, d, reveal, cut)?;
    response(out, d, reveal, cut)?;
    replay_runs(out, runs, reveal)
}

/// How the delivery's event key was made, terminal-safe, with GitHub's
/// hook where it has one: the hook counts apart deliveries that share a
/// key, and unsaid, two deliveries of one key would be counted apart for
/// no reason to be seen.
pub fn key_source(r: &NewDelivery) -> String {
    let provider = r.provider.as_deref().and_then(Provider::from_name);
    match portpreview_shared::provider::event_scope(provider, &r.request_headers) {
        Some(hook) => format!("{}, hook {}", escape_str(&r.event_key_source), escape_str(&hook)),
        None => escape_str(&r.event_key_source).into_owned(),
    }
}

/// Where and when the delivery came, and which event it is.
fn overview(out: &mut dyn Write, d: &Delivery, delivery_number: i64) -> io::Result<()> {
    let r = &d.request;
    field(out, "Received", &rfc3339_ms(r.received_at_ms))?;
    if !r.tunnel_url.is_empty() {
        field(out, "Tunnel", &escape_str(&r.tunnel_url))?;
    }
    field(out, "Target", &escape_str(&r.target))?;
    field(out, "Provider", &escape_str(r.provider.as_deref().unwrap_or("unknown")))?;
    if let Some(kind) = &r.event_type {
        field(out, "Type", &escape_str(kind))?;
    }
    let source = key_source(r);
    let event = match r.replay_of {
        // A replay is not a delivery of its event; it has no place in the count.
        Some(_) => format!("{} ({source})", escape_str(&r.event_key)),
        // Nothing to count deliveries by: it is no retry of anything.
        None if r.event_key.is_empty() => "none (nothing to group deliveries by)".to_string(),
        // As the TUI's detail says it.
        None if d.delivery_count == 1 => format!(
            "{} ({source}; the only delivery of this event)",
            escape_str(&r.event_key)
        ),
        None => format!(
            "{} ({source}; {} delivery of {})",
            escape_str(&r.event_key),
            ordinal(delivery_number.max(1)),
            d.delivery_count
        ),
    };
    field(out, "Event", &event)?;
    if let Some(original) = r.replay_of {
        field(out, "Replay of", &format!("#{original}"))?;
    }
    Ok(())
}

fn request(out: &mut dyn Write, d: &Delivery, reveal: bool, cut: BodyCut<'_>) -> io::Result<()> {
    let r = &d.request;
    writeln!(out, "\nRequest")?;
    writeln!(
        out,
        "  {} {}",
        escape_str(&r.method),
        // Marked as a body's escapes are: a path that sent U+200B reads
        // apart from one holding the text `\u{200b}`.
        cut.marks.join(value_runs(shown_path(&r.path, reveal).as_bytes()))
    )?;
    headers(out, &r.request_headers, reveal, cut.marks)?;
    body(out, d.id, &r.request_headers, &r.request_body, r.request_body_size, cut)
}

fn response(out: &mut dyn Write, d: &Delivery, reveal: bool, cut: BodyCut<'_>) -> io::Result<()> {
    writeln!(out, "\nResponse")?;
    let Some(o) = &d.outcome else {
        writeln!(
            out,
            "  (no answer recorded: still in flight, or the client stopped first)"
        )?;
        return Ok(());
    };
    // No status with headers is an answer no caller received (the
    // error below says why); none with neither, no answer at all
    // (the handler down, too slow, or broken off before its status).
    let what = match (o.status, o.response_headers.is_empty()) {
        (Some(status), _) => format!("Status {status}"),
        (None, false) => "Answered, but no caller received it,".to_string(),
        (None, true) => "No answer".to_string(),
    };
    match o.duration_ms {
        Some(ms) => writeln!(out, "  {what} after {}", elapsed(ms)),
        None => writeln!(out, "  {what}"),
    }?;
    if let Some(error) = &o.error {
        writeln!(out, "  Error: {}", escape_str(error))?;
    }
    headers(out, &o.response_headers, reveal, cut.marks)?;
    body(
        out,
        d.id,
        &o.response_headers,
        &o.response_body,
        o.response_body_size,
        cut,
    )
}

fn replay_runs(out: &mut dyn Write, runs: &[ReplayRun], reveal: bool) -> io::Result<()> {
    if runs.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nReplay runs")?;
    for run in runs {
        let facts = crate::replay::stored::StoredReport::read(&run.report_json);
        // As the TUI shows them: `×3`, `×0/3` for a run that sent nothing,
        // `×1+4` for a fresh one, and how many went at once.
        let attempts =
            crate::replay::stored::attempts_shown(run.times, facts.attempts.as_ref().map(Vec::len), facts.fresh);
        let at_once = crate::replay::stored::at_once(run.concurrency, run.times, facts.fresh);
        // Runs against another `--target` sit beside the others: which
        // handler each judged tells apart verdicts that seem to disagree.
        let target = facts
            .target
            .map(|target| format!(" → {}", escape_str(&shown_path(&target, reveal))))
            .unwrap_or_default();
        writeln!(
            out,
            "  {}  ×{attempts}{at_once}{target}  {}",
            rfc3339_ms(run.started_at_ms),
            escape_str(&run.summary)
        )?;
        // A run of an edited request judged another request than this one.
        if !facts.edits.is_empty() {
            writeln!(out, "    edited: {}", escape_str(&facts.edits.join("; ")))?;
        }
    }
    Ok(())
}

fn field(out: &mut dyn Write, label: &str, value: &str) -> io::Result<()> {
    writeln!(out, "{label:<10} {value}")
}

fn headers(out: &mut dyn Write, list: &[Header], reveal: bool, marks: EscapeMarks) -> io::Result<()> {
    for h in list {
        let value = shown_value(h, reveal);
        writeln!(out, "  {}: {}", escape_str(&h.name), marks.join(value_runs(&value)))?;
    }
    Ok(())
}

fn body(out: &mut dyn Write, id: i64, headers: &[Header], bytes: &[u8], size: u64, cut: BodyCut<'_>) -> io::Result<()> {
    if bytes.is_empty() && size == 0 {
        return Ok(());
    }
    writeln!(out)?;
    // A gzip answer shown as sent is a hex dump nobody reads.
    let decoding = decode(headers, bytes, size);
    let readable = match &decoding {
        Decoding::Done { coding, plain } => {
            writeln!(
                out,
                "  ({} bytes {}, shown decoded: {} bytes)",
                thousands(bytes.len() as u64),
                escape_str(coding),
                thousands(plain.len() as u64)
            )?;
            plain.as_slice()
        }
        failed => {
            if let Some(note) = failed.failure_note() {
                writeln!(out, "  {note}")?;
            }
            bytes
        }
    };
    if let Some(note) = shown_as_sent_note(readable) {
        writeln!(out, "  ({note})")?;
    }
    let (layout, shown) = layout_start(readable, cut.limit);
    match layout {
        Layout::Json(pretty) => indented(out, &cut.marks.escape(&pretty))?,
        Layout::Text(text) => indented(out, &cut.marks.escape(text))?,
        Layout::Hex(bytes) => {
            for row in hex_dump_rows(bytes) {
                writeln!(out, "  {row}")?;
            }
        }
    }
    if shown < readable.len() {
        let left = readable.len() - shown;
        // A request stored cut short exports only as HAR: the other
        // formats would send it again, and not as it came.
        let format = if (bytes.len() as u64) < size {
            " --format har"
        } else {
            ""
        };
        let again = escape_str(cut.portpreview);
        writeln!(
            out,
            "  … {} more {}; {again} show {id} | less shows all of them, {again} export {id}{format} -o FILE saves them",
            thousands(left as u64),
            if left == 1 { "byte" } else { "bytes" }
        )?;
    }
    if let Some(note) = truncation_note(bytes.len(), size) {
        writeln!(out, "  {}", escape_multiline(&note))?;
    }
    Ok(())
}

/// Each line of `text` two spaces in, as every body line is.
fn indented(out: &mut dyn Write, text: &str) -> io::Result<()> {
    for line in text.lines() {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{NewDelivery, Outcome};

    fn delivery(d: &Delivery, delivery_number: i64, runs: &[ReplayRun], reveal: bool, cut: BodyCut<'_>) -> String {
        let mut out = Vec::new();
        write_delivery(&mut out, d, delivery_number, runs, reveal, cut).expect("written to memory");
        String::from_utf8(out).expect("shown as text")
    }

    fn sample() -> Delivery {
        Delivery {
            id: 7,
            request: NewDelivery {
                received_at_ms: 1_700_000_000_000,
                target: "http://127.0.0.1:3000".into(),
                method: "POST".into(),
                path: "/hook\u{1b}]0;pwned\u{7}".into(),
                request_headers: vec![
                    Header::new("authorization", "Bearer sk_live_secret"),
                    Header::new("x-note", b"\x1b[2J".to_vec()),
                ],
                request_body: br#"{"id":"evt_1","n":1}"#.to_vec(),
                request_body_size: 20,
                provider: Some("stripe".into()),
                event_key: "evt_1".into(),
                event_key_source: "body:/id".into(),
                ..NewDelivery::default()
            },
            outcome: Some(Outcome {
                status: Some(200),
                response_body: vec![0xff, 0x00, 0x1b],
                response_body_size: 3,
                duration_ms: Some(3.25),
                ..Outcome::default()
            }),
            delivery_count: 2,
        }
    }

    #[test]
    fn everything_is_escaped_and_secrets_masked() {
        let shown = delivery(&sample(), 2, &[], false, BodyCut::WHOLE);
        assert!(!shown.chars().any(|c| c.is_control() && c != '\n'), "{shown}");
        assert!(!shown.contains("sk_live_secret"), "{shown}");
        assert!(shown.contains("Bearer ••••••"), "{shown}");
        assert!(shown.contains("2nd delivery of 2"), "{shown}");
        assert!(shown.contains("  {\n    \"id\": \"evt_1\","), "{shown}");
        assert!(shown.contains("00000000  ff 00 1b"), "{shown}");
    }

    #[test]
    fn a_delivery_without_a_key_is_no_numbered_delivery_of_anything() {
        let mut health = sample();
        health.request.event_key.clear();
        health.request.event_key_source = "none".into();
        health.delivery_count = 1;
        let shown = delivery(&health, 1, &[], false, BodyCut::WHOLE);
        assert!(shown.contains("none (nothing to group deliveries by)"), "{shown}");
        assert!(!shown.contains("delivery of"), "{shown}");
    }

    #[test]
    fn a_handler_that_never_answered_reads_as_no_answer_and_why() {
        let mut down = sample();
        down.outcome = Some(Outcome {
            duration_ms: Some(2001.0),
            error: Some("did not answer within 2s".into()),
            ..Outcome::default()
        });
        let shown = delivery(&down, 2, &[], false, BodyCut::WHOLE);
        assert!(
            shown.contains("Response\n  No answer after 2.00 s\n  Error: did not answer within 2s\n"),
            "{shown}"
        );
    }

    #[test]
    fn an_answer_no_caller_received_is_told_from_no_answer() {
        let mut late = sample();
        late.outcome = Some(Outcome {
            response_headers: vec![Header::new("content-type", "text/plain")],
            response_body: b"ok".to_vec(),
            response_body_size: 2,
            duration_ms: Some(31_000.0),
            error: Some("the relay answered the caller 504 first; the handler then answered 200".into()),
            ..Outcome::default()
        });
        let shown = delivery(&late, 2, &[], false, BodyCut::WHOLE);
        assert!(
            shown.contains("Response\n  Answered, but no caller received it, after 31.00 s\n  Error: "),
            "{shown}"
        );
    }

    #[test]
    fn reveal_shows_secrets() {
        assert!(delivery(&sample(), 2, &[], true, BodyCut::WHOLE).contains("Bearer sk_live_secret"));
    }

    #[test]
    fn a_body_past_the_limit_ends_with_how_much_more_there_is_and_where() {
        let mut big = sample();
        big.request.request_body = vec![b'x'; 100_000];
        big.request.request_body_size = 100_000;
        let at_64k = BodyCut {
            limit: 65_536,
            portpreview: "portpreview",
            marks: EscapeMarks::Plain,
        };
        let shown = delivery(&big, 2, &[], false, at_64k);
        assert!(
            shown.contains(&format!("  {}\n", "x".repeat(65_536))),
            "the first 64 KiB"
        );
        assert!(!shown.contains(&"x".repeat(65_537)), "and no more");
        assert!(
            shown.contains(
                "  … 34,464 more bytes; portpreview show 7 | less shows all of them, portpreview export 7 -o FILE saves them\n"
            ),
            "{}",
            &shown[shown.len() - 400..]
        );
        let whole = delivery(&big, 2, &[], false, BodyCut::WHOLE);
        assert!(whole.contains(&"x".repeat(100_000)) && !whole.contains("more bytes"));
        // Stored cut short, it exports only as HAR.
        let mut cut = big.clone();
        cut.request.request_body_size = 30_000_000;
        assert!(
            delivery(&cut, 2, &[], false, at_64k).contains("portpreview export 7 --format har -o FILE saves them\n"),
            "the hint names the export that works"
        );
        // A history named by --db is named again.
        let named = BodyCut {
            limit: 65_536,
            portpreview: "portpreview --db='my hooks.db'",
            marks: EscapeMarks::Plain,
        };
        assert!(delivery(&big, 2, &[], false, named).contains(
            "; portpreview --db='my hooks.db' show 7 | less shows all of them, \
             portpreview --db='my hooks.db' export 7 -o FILE saves them\n"
        ));
        // The response (3 bytes) is under the limit: no note for it.
        assert_eq!(shown.matches("more bytes").count(), 1);
    }

    #[test]
    fn on_a_terminal_an_escape_stands_out_from_the_same_letters_typed_out() {
        let body = |body: &[u8], marks: EscapeMarks| {
            let mut d = sample();
            d.request.request_body = body.to_vec();
            d.request.request_body_size = body.len() as u64;
            let cut = BodyCut {
                marks,
                ..BodyCut::WHOLE
            };
            delivery(&d, 2, &[], false, cut)
        };
        let sent = body(b"A\x1b[31mB\n\tC", EscapeMarks::Coloured);
        assert!(
            sent.contains("  A\x1b[35m\\x1b\x1b[39m[31mB\n  \x1b[35m\\t\x1b[39mC\n"),
            "{sent}"
        );
        let typed = body(b"A\\x1b[31mB", EscapeMarks::Coloured);
        assert!(
            typed.contains("  A\\x1b[31mB\n"),
            "typed out, left as it stands: {typed}"
        );
        let underlined = body(b"A\x1bB", EscapeMarks::Underlined);
        assert!(underlined.contains("  A\x1b[4m\\x1b\x1b[24mB\n"), "{underlined}");
        let plain = body(b"A\x1bB", EscapeMarks::Plain);
        assert!(plain.contains("  A\\x1bB\n"), "{plain}");

        let mut d = sample();
        d.request
            .request_headers
            .push(Header::new("x-sent", b"a\xffb".to_vec()));
        d.request.request_headers.push(Header::new("x-typed", "a\\xffb"));
        let cut = BodyCut {
            marks: EscapeMarks::Coloured,
            ..BodyCut::WHOLE
        };
        let shown = delivery(&d, 2, &[], false, cut);
        assert!(shown.contains("  x-sent: a\x1b[35m\\xff\x1b[39mb\n"), "{shown}");
        assert!(shown.contains("  x-typed: a\\xffb\n"), "{shown}");

        // And a path's: U+200B sent, and the same letters typed out.
        for (path, line) in [
            ("/zw\u{200b}j", "  POST /zw\x1b[35m\\u{200b}\x1b[39mj\n"),
            ("/zw\\u{200b}j", "  POST /zw\\u{200b}j\n"),
        ] {
            let mut d = sample();
            d.request.path = path.into();
            let shown = delivery(&d, 2, &[], false, cut);
            assert!(shown.contains(line), "{shown}");
        }
    }
}
