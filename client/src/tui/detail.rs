//! The detail pane's document: one delivery laid out as lines, every
//! untrusted byte passed through the sanitiser.

use portpreview_shared::sanitize::{escape_runs, escape_str, hex_dump_rows};
use portpreview_shared::text::{counted, thousands};
use portpreview_shared::Header;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use unicode_segmentation::UnicodeSegmentation;

use crate::render::body::{as_text, layout_start, shown_as_sent_note, truncation_note, Decoding, Layout};
use crate::render::mask::{escape_value, is_sensitive, shown_path, shown_value, value_runs};
use crate::replay::stored::StoredReport;
use crate::store::{size_unknown_past, Delivery, Outcome, ReplayRun};
use crate::time::ordinal;

use super::format::{status_style, timestamp, wrap_line};
use crate::time::elapsed;

/// Bytes of a body shown as text; the rest is left to `e` export.
const MAX_SHOWN_TEXT: usize = 256 * 1024;
/// Bytes of a binary body shown as hex (each takes about four cells).
const MAX_SHOWN_BINARY: usize = 64 * 1024;

/// Escapes, in bodies and header values, stand apart from the text
/// around them: a body that sent ESC reads `\x1b` in this colour, one
/// that holds the four characters `\x1b` in the text's.
const ESCAPE: Style = Style::new().fg(Color::Magenta);

/// `text` as lines, its newlines kept and its escapes in [`ESCAPE`].
fn marked_lines(text: &str) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let mut line = Line::default();
    for (run, escaped) in escape_runs(text, true) {
        let style = if escaped { ESCAPE } else { Style::new() };
        for (n, part) in run.split('\n').enumerate() {
            if n > 0 {
                lines.push(std::mem::take(&mut line));
            }
            if !part.is_empty() {
                line.push_span(Span::styled(part.to_owned(), style));
            }
        }
    }
    // As `str::lines` ends: a last newline ends a line, and starts none.
    if !text.is_empty() && !text.ends_with('\n') {
        lines.push(line);
    }
    lines
}

/// A header value as spans, its escapes in [`ESCAPE`], bytes that are no
/// UTF-8 among them.
fn marked_value(value: &[u8]) -> Vec<Span<'static>> {
    value_runs(value)
        .into_iter()
        .map(|(run, escaped)| Span::styled(run.into_owned(), if escaped { ESCAPE } else { Style::new() }))
        .collect()
}

/// A delivery laid out for the detail pane.
#[derive(Debug, Clone, PartialEq)]
pub struct DetailDoc {
    /// Id of the delivery shown.
    pub id: i64,
    /// The lines, already safe to draw.
    pub lines: Vec<Line<'static>>,
    /// Lines from here on, the replay runs, are wrapped to the pane rather
    /// than cut at its edge: a verdict's reason and advice are read whole,
    /// where a body's line is scrolled to.
    pub wrap_from: usize,
}

fn title(text: impl Into<String>) -> Line<'static> {
    Line::from(Span::styled(
        text.into(),
        Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
    ))
}

fn label_value(label: &str, value: String) -> Line<'static> {
    Line::from(vec![
        Span::styled(format!("{label} "), Style::new().fg(Color::DarkGray)),
        Span::raw(value),
    ])
}

impl DetailDoc {
    /// Lays out `delivery`, the `number`th of its event, with its replay
    /// runs; credentials and signatures masked unless `reveal`.
    pub fn new(delivery: &Delivery, number: i64, runs: &[ReplayRun], reveal: bool) -> Self {
        let req = &delivery.request;
        let mut lines = about(delivery, number, reveal);
        lines.push(Line::default());
        lines.push(title(format!("Request headers ({})", req.request_headers.len())));
        push_headers(&mut lines, &req.request_headers, reveal);
        lines.push(Line::default());
        push_body_section(
            &mut lines,
            "Request body",
            &req.request_headers,
            &req.request_body,
            req.request_body_size,
        );
        lines.push(Line::default());
        match &delivery.outcome {
            None => lines.push(title("Response: none (in flight, or the client stopped first)")),
            Some(outcome) => push_response(&mut lines, outcome, reveal),
        }
        lines.push(Line::default());
        let wrap_from = lines.len();
        push_runs(&mut lines, runs);
        Self {
            id: delivery.id,
            lines,
            wrap_from,
        }
    }

    /// Line `index` as rows of a pane `columns` wide, sideways scrolled by
    /// `hscroll`: wrapped from [`DetailDoc::wrap_from`] on, else one row.
    pub fn rows(&self, index: usize, columns: usize, hscroll: usize) -> Vec<Line<'static>> {
        match self.lines.get(index) {
            Some(line) if index >= self.wrap_from => wrap_line(line, columns),
            Some(line) => vec![cut_left(line, hscroll)],
            None => Vec::new(),
        }
    }

    /// The furthest line the pane may be scrolled down to: the one from
    /// which the rest fills at most `rows` rows `columns` wide.
    pub fn last_scroll(&self, rows: usize, columns: usize) -> usize {
        let mut used = 0;
        for index in (0..self.lines.len()).rev() {
            used += self.rows(index, columns, 0).len();
            if used > rows {
                return (index + 1).min(self.lines.len().saturating_sub(1));
            }
        }
        0
    }
}

/// The line without its first `columns` characters as they are seen
/// (horizontal scroll): an emoji of several code points goes whole, never
/// leaving a part that reads as another.
fn cut_left(line: &Line<'static>, columns: usize) -> Line<'static> {
    if columns == 0 {
        return line.clone();
    }
    let mut skip = columns;
    let mut spans = Vec::with_capacity(line.spans.len());
    for span in &line.spans {
        let count = span.content.graphemes(true).count();
        if skip >= count {
            skip -= count;
            continue;
        }
        let kept: String = span.content.graphemes(true).skip(skip).collect();
        skip = 0;
        spans.push(Span::styled(kept, span.style));
    }
    Line::from(spans).style(line.style)
}

/// The request line, then what the delivery is: when, where to, from
/// which provider, which event.
fn about(delivery: &Delivery, number: i64, reveal: bool) -> Vec<Line<'static>> {
    let req = &delivery.request;
    let mut request_line = vec![
        Span::styled(format!("#{} ", delivery.id), Style::new().fg(Color::DarkGray)),
        Span::styled(
            escape_str(&req.method).into_owned(),
            Style::new().add_modifier(Modifier::BOLD),
        ),
        Span::raw(" "),
    ];
    // Marked as a header value's escapes are: a path that sent U+200B
    // reads apart from one holding the text `\u{200b}`.
    request_line.extend(marked_value(shown_path(&req.path, reveal).as_bytes()));
    let mut lines = vec![Line::from(request_line)];
    lines.push(label_value(
        "received",
        format!("{} UTC", timestamp(req.received_at_ms, true)),
    ));
    lines.push(label_value("target  ", escape_str(&req.target).into_owned()));
    let provider = req
        .provider
        .as_deref()
        .map_or_else(|| "unknown".to_owned(), |p| escape_str(p).into_owned());
    lines.push(label_value("provider", provider));
    if let Some(kind) = &req.event_type {
        lines.push(label_value("type    ", escape_str(kind).into_owned()));
    }
    let key = || {
        format!(
            "{} ({})",
            escape_str(&req.event_key),
            crate::render::show::key_source(req)
        )
    };
    let event = match (req.replay_of, delivery.delivery_count) {
        // A replay is not a delivery of its event; it has no place in the count.
        (Some(_), _) => key(),
        (None, _) if req.event_key.is_empty() => "none (nothing to group deliveries by)".to_owned(),
        (None, 1) => format!("{}, the only delivery of this event", key()),
        (None, count) => format!("{}, {} delivery of {count}", key(), ordinal(number.max(1))),
    };
    lines.push(label_value("event   ", event));
    if let Some(original) = req.replay_of {
        lines.push(label_value("replay of", format!("#{original}")));
    }
    lines
}

fn push_response(lines: &mut Vec<Line<'static>>, outcome: &Outcome, reveal: bool) {
    let (status, took) = match (outcome.status, outcome.duration_ms) {
        (Some(code), ms) => (
            Span::styled(status_text(code), status_style(Some(code))),
            ms.map_or_else(String::new, |ms| format!("  in {}", elapsed(ms))),
        ),
        // Headers without a status: an answer no caller received. Neither:
        // the handler was down, too slow, or broke off before its status
        // line. The error below says which.
        (None, ms) => (
            Span::styled(
                if outcome.response_headers.is_empty() {
                    "no answer"
                } else {
                    "answered, but no caller received it,"
                },
                status_style(None),
            ),
            ms.map_or_else(String::new, |ms| format!(" after {}", elapsed(ms))),
        ),
    };
    lines.push(Line::from(vec![
        Span::styled("Response ", Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD)),
        status,
        Span::raw(took),
    ]));
    if let Some(error) = &outcome.error {
        lines.push(Line::from(Span::styled(
            format!("error: {}", escape_str(error)),
            Style::new().fg(Color::Red),
        )));
    }
    // An answer that came too late for its caller is stored all
    // the same: it is half of the duplicate a retry will make.
    if outcome.status.is_some() || !outcome.response_headers.is_empty() {
        lines.push(title(format!("Response headers ({})", outcome.response_headers.len())));
        push_headers(lines, &outcome.response_headers, reveal);
        lines.push(Line::default());
        push_body_section(
            lines,
            "Response body",
            &outcome.response_headers,
            &outcome.response_body,
            outcome.response_body_size,
        );
    }
}

/// Each replay run of the delivery: when, its verdict, its summary, and
/// what it warned of.
fn push_runs(lines: &mut Vec<Line<'static>>, runs: &[ReplayRun]) {
    lines.push(title(format!("Replay runs ({})", runs.len())));
    if runs.is_empty() {
        lines.push(Line::from(Span::styled(
            "none yet: r replays once, R runs a verdict",
            Style::new().fg(Color::DarkGray),
        )));
    }
    for run in runs {
        let report = RunReport::read(&run.report_json);
        // The stored verdict is a bool; the report's own word tells a
        // failed first delivery from a lack of idempotency. Reports
        // stored before it had the word say so in their summary.
        let failed = report.failed.unwrap_or_else(|| run.summary.starts_with("✗ failed"));
        let (mark, style) = match run.idempotent {
            // One attempt sends no duplicate, and a run without a probe
            // saw only statuses: neither can show idempotence.
            Some(true) if run.times == 1 || !report.side_effects_checked => {
                ("✓ answered", Style::new().fg(Color::Green))
            }
            Some(true) => ("✓ idempotent", Style::new().fg(Color::Green)),
            Some(false) if failed => ("✗ failed", Style::new().fg(Color::Red)),
            Some(false) => ("✗ not idempotent", Style::new().fg(Color::Red)),
            None => ("? inconclusive", Style::new().fg(Color::Yellow)),
        };
        // A summary that begins with the verdict the mark shows goes on
        // from there, rather than saying it twice; one that begins with
        // the mark's symbol alone (`✓ both attempts answered 2xx`) loses it.
        let symbol = mark.split(' ').next().unwrap_or(mark);
        let summary = (run.summary.strip_prefix(mark))
            .map(|rest| rest.trim_start_matches(':').trim_start())
            .or_else(|| run.summary.strip_prefix(symbol).map(str::trim_start))
            .unwrap_or(&run.summary);
        let at_once = crate::replay::stored::at_once(run.concurrency, run.times, report.fresh);
        lines.push(Line::from(vec![
            Span::raw(format!(
                "{} ×{}{at_once} ",
                timestamp(run.started_at_ms, true),
                report.times(run.times)
            )),
            Span::styled(mark, style),
            Span::raw(format!("  {}", escape_str(summary))),
        ]));
        // A run of an edited request judged another request than this one.
        let edited = (!report.edits.is_empty()).then(|| format!("edited: {}", report.edits.join("; ")));
        let answers = (report.answers.len() > 1).then(|| report.answers_line());
        for warning in edited.into_iter().chain(answers).chain(report.warnings) {
            lines.push(Line::from(Span::styled(
                format!("    ! {}", escape_str(&warning)),
                Style::new().fg(Color::Yellow),
            )));
        }
    }
}

/// What a run's line shows of the report it stored, beyond its summary.
struct RunReport {
    /// The warnings (a stale signature, slow answers). The two about what
    /// the run did not do are left out: its line already shows both, and
    /// they name flags the TUI has no use for.
    warnings: Vec<String>,
    /// Whether a probe read the handler's state.
    side_effects_checked: bool,
    /// Whether the verdict was "failed" (the first attempt got no 2xx, or
    /// the handler went away during the run) rather than "not idempotent";
    /// `None` for a report without the word.
    failed: Option<bool>,
    /// The distinct answers: the attempts that got each, its status and
    /// the start of its body.
    answers: Vec<(Vec<u32>, Option<u16>, String)>,
    /// Attempts the run saved: fewer than it asked for when it was stopped
    /// (Esc, ctrl-c). `None` when the report does not list them.
    sent: Option<usize>,
    /// A `--fresh` run: a baseline delivery went before the attempts asked for.
    fresh: bool,
    /// How its attempts differed from the recorded request.
    edits: Vec<String>,
}

impl RunReport {
    /// Most characters of each answer's body shown on the run's line.
    const BODY_SHOWN: usize = 40;

    fn read(report_json: &str) -> Self {
        let report = StoredReport::read(report_json);
        let warnings = report
            .warnings
            .into_iter()
            .filter(|w| !crate::replay::tells_what_was_not_done(w))
            .collect();
        let answers = report
            .answers
            .into_iter()
            .map(|answer| {
                let body = answer.error.or(answer.body).unwrap_or_else(|| "(binary)".to_owned());
                (answer.attempts, answer.status, body)
            })
            .collect();
        Self {
            warnings,
            // Reports stored before the field existed count as checked: their
            // summary already says when they were not.
            side_effects_checked: report.side_effects_checked.unwrap_or(true),
            failed: report.verdict.map(|verdict| verdict == "failed"),
            answers,
            sent: report.attempts.map(|sent| sent.len()),
            fresh: report.fresh,
            edits: report.edits,
        }
    }

    /// `50`, or `9/50` for a run of 50 stopped after 9: the count asked
    /// for alone would claim attempts that were never sent. A `--fresh`
    /// run counts its baseline too: `1+4`.
    fn times(&self, asked: u32) -> String {
        crate::replay::stored::attempts_shown(asked, self.sent, self.fresh)
    }

    /// The distinct answers in one line: "answers differ: 1 → 200 {…}; 2–3 → 200 {…}".
    fn answers_line(&self) -> String {
        let shown: Vec<String> = self
            .answers
            .iter()
            .take(3)
            .map(|(attempts, status, body)| {
                let status = status.map_or_else(|| "no answer".to_owned(), |s| s.to_string());
                let body = body.split_whitespace().collect::<Vec<_>>().join(" ");
                let body = portpreview_shared::text::shorten(&body, Self::BODY_SHOWN);
                format!("{} → {status} {body}", crate::replay::report::attempt_ranges(attempts))
            })
            .collect();
        let rest = self.answers.len().saturating_sub(shown.len());
        let rest = if rest > 0 {
            format!("; and {rest} more")
        } else {
            String::new()
        };
        format!("answers differ: {}{rest}", shown.join("; "))
    }
}

fn status_text(code: u16) -> String {
    let reason = http::StatusCode::from_u16(code).ok().and_then(|s| s.canonical_reason());
    match reason {
        Some(reason) => format!("{code} {reason}"),
        None => code.to_string(),
    }
}

fn push_headers(lines: &mut Vec<Line<'static>>, headers: &[Header], reveal: bool) {
    for header in headers {
        let name = escape_str(&header.name).into_owned();
        let value = if !reveal && is_sensitive(&header.name) {
            // Masked as `show` and HAR mask it (an Authorization keeps its
            // scheme), with the size, which tells an empty secret from one.
            vec![Span::styled(
                format!(
                    "{} (masked, {} bytes)",
                    escape_value(&shown_value(header, false)),
                    header.value.len()
                ),
                Style::new().fg(Color::DarkGray),
            )]
        } else {
            marked_value(&header.value)
        };
        let mut spans = vec![Span::styled(format!("{name}: "), Style::new().fg(Color::Blue))];
        spans.extend(value);
        lines.push(Line::from(spans));
    }
}

/// A body's title and lines; one sent gzip or deflate is shown decoded,
/// as a hex dump of the stream would tell nobody anything.
fn push_body_section(lines: &mut Vec<Line<'static>>, what: &str, headers: &[Header], body: &[u8], size: u64) {
    match crate::render::body::decode(headers, body, size) {
        Decoding::Done { coding, plain } => {
            let what = format!(
                "{what}, decoded from {} {}",
                counted(body.len(), "byte", "bytes"),
                escape_str(&coding)
            );
            lines.push(title(body_title(&what, &plain, plain.len() as u64)));
            push_body(lines, &plain, plain.len() as u64);
        }
        failed => {
            lines.push(title(body_title(what, body, size)));
            if let Some(note) = failed.failure_note() {
                lines.push(Line::from(Span::styled(note, Style::new().fg(Color::Yellow))));
            }
            push_body(lines, body, size);
        }
    }
}

fn body_title(what: &str, body: &[u8], size: u64) -> String {
    let stored = body.len() as u64;
    if body.is_empty() && size == 0 {
        return format!("{what} (empty)");
    }
    let kind = if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() {
        "JSON"
    } else if as_text(body).is_some() {
        "text"
    } else {
        "binary"
    };
    let bytes = |n: u64| match n {
        1 => "1 byte".to_owned(),
        n => format!("{} bytes", thousands(n)),
    };
    if size_unknown_past(stored, size) {
        format!("{what} (cut short after {}, {kind})", bytes(stored))
    } else if stored < size {
        format!("{what} ({}, {} stored, {kind})", bytes(size), thousands(stored))
    } else {
        format!("{what} ({}, {kind})", bytes(stored))
    }
}

/// Bytes of `body` the pane lays out; the rest is left to `e` export.
fn shown_at_most(body: &[u8]) -> usize {
    match as_text(body) {
        Some(_) => MAX_SHOWN_TEXT,
        None => MAX_SHOWN_BINARY,
    }
}

/// The body as display lines, pretty JSON, escaped text or a hex dump, as
/// far as a screen's worth goes, then where they stop and why.
fn push_body(lines: &mut Vec<Line<'static>>, body: &[u8], size: u64) {
    if let Some(note) = shown_as_sent_note(body) {
        lines.push(Line::from(Span::styled(note, Style::new().fg(Color::DarkGray))));
    }
    let (layout, shown) = layout_start(body, shown_at_most(body));
    match layout {
        Layout::Json(text) => lines.extend(marked_lines(&text)),
        Layout::Text(text) => lines.extend(marked_lines(text)),
        Layout::Hex(bytes) => lines.extend(hex_dump_rows(bytes).map(Line::raw)),
    }
    if shown < body.len() {
        let shown = thousands(shown as u64);
        let note = if (body.len() as u64) < size {
            format!(
                "… (the first {shown} of the {} bytes stored shown)",
                thousands(body.len() as u64)
            )
        } else {
            format!(
                "… (the first {shown} of {} bytes shown; e exports the delivery whole)",
                thousands(size)
            )
        };
        lines.push(Line::from(Span::styled(note, Style::new().fg(Color::DarkGray))));
    }
    if let Some(note) = truncation_note(body.len(), size) {
        lines.push(Line::from(Span::styled(note, Style::new().fg(Color::Yellow))));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::source::test_delivery;

    fn text(doc: &DetailDoc) -> String {
        doc.lines.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn scrolled_sideways_an_emoji_goes_whole_or_stays_whole() {
        let text = |line: Line<'static>| line.spans.iter().map(|span| span.content.as_ref()).collect::<String>();
        let family = "\u{1f468}\u{200d}\u{1f469}\u{200d}\u{1f467}";
        let line = Line::from(vec![Span::raw(format!("{family}{family}")), Span::raw("e\u{301}x")]);
        assert_eq!(text(cut_left(&line, 1)), format!("{family}e\u{301}x"));
        assert_eq!(text(cut_left(&line, 3)), "x", "a letter and its accent are one");
        let toned = Line::from("\u{1f44d}\u{1f3fd}ok");
        assert_eq!(text(cut_left(&toned, 1)), "ok", "no bare skin tone left");
    }

    #[test]
    fn a_large_json_body_is_laid_out_as_far_as_it_is_shown() {
        let items: Vec<String> = (0..60_000).map(|n| format!("{{\"n\":{n}}}")).collect();
        let body = format!("{{\"items\":[{}]}}", items.join(","));
        assert!(body.len() > 512 * 1024);
        let mut lines = Vec::new();
        push_body(&mut lines, body.as_bytes(), body.len() as u64);
        assert!(lines.len() > 10_000, "laid out line by line: {}", lines.len());
        assert_eq!(lines[1].to_string(), "  \"items\": [");
        let last = lines.last().unwrap().to_string();
        assert!(last.contains("e exports the delivery whole"), "{last}");
    }

    /// The spans of `line` that stand apart as escapes.
    fn escapes(line: &Line<'_>) -> Vec<String> {
        line.spans
            .iter()
            .filter(|span| span.style == ESCAPE)
            .map(|span| span.content.to_string())
            .collect()
    }

    #[test]
    fn an_escape_reads_apart_from_the_same_characters_sent() {
        let mut lines = Vec::new();
        let body = "typed: \\x1b[31m \\t\nsent:  \x1b[31m \t\n";
        push_body(&mut lines, body.as_bytes(), body.len() as u64);
        let shown: Vec<String> = lines.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["typed: \\x1b[31m \\t", "sent:  \\x1b[31m \\t"], "alike as text");
        assert_eq!(escapes(&lines[0]), Vec::<String>::new(), "typed, so no escape");
        assert_eq!(escapes(&lines[1]), ["\\x1b", "\\t"]);

        let mut delivery = test_delivery(3);
        delivery.request.request_headers = vec![Header::new("x-note", b"\\u{202e} \xe2\x80\xae \xff".to_vec())];
        let doc = DetailDoc::new(&delivery, 1, &[], false);
        let header = doc
            .lines
            .iter()
            .find(|line| line.to_string().starts_with("x-note: "))
            .expect("the header");
        assert_eq!(header.to_string(), "x-note: \\u{202e} \\u{202e} \\xff");
        assert_eq!(escapes(header), ["\\u{202e}", "\\xff"]);
    }

    #[test]
    fn a_binary_body_is_a_hex_dump_as_far_as_it_is_shown() {
        let zeros = vec![0u8; 100_000];
        let mut lines = Vec::new();
        push_body(&mut lines, &zeros, 26_000_000);
        assert_eq!(
            lines[0].to_string(),
            "00000000  00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00  ................"
        );
        let rows = MAX_SHOWN_BINARY / 16;
        assert_eq!(lines.len(), rows + 2, "rows, then where they stop and why");
        let note = lines[rows].to_string();
        assert!(
            note.contains("the first 65,536 of the 100,000 bytes stored shown"),
            "{note}"
        );
    }

    #[test]
    fn json_is_pretty_and_secrets_masked() {
        let doc = DetailDoc::new(&test_delivery(7), 1, &[], false);
        let shown = text(&doc);
        assert!(shown.contains("#7 POST /hook/7"), "{shown}");
        assert!(
            shown.contains("{\n  \"id\": \"evt_7\",\n  \"type\": \"charge.succeeded\"\n}"),
            "{shown}"
        );
        assert!(
            shown.contains("authorization: Bearer •••••• (masked, 21 bytes)"),
            "{shown}"
        );
        assert!(!shown.contains("sk_live_secret"), "{shown}");
        assert!(shown.contains("Response 200 OK  in 12.0 ms"), "{shown}");
    }

    #[test]
    fn a_gzip_answer_is_shown_decoded() {
        use std::io::Write;
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gzip.write_all(br#"{"received":true}"#).unwrap();
        let gzip = gzip.finish().unwrap();
        let mut d = test_delivery(4);
        let outcome = d.outcome.as_mut().unwrap();
        outcome.response_headers = vec![Header::new("Content-Encoding", "gzip")];
        outcome.response_body_size = gzip.len() as u64;
        outcome.response_body = gzip;
        let shown = text(&DetailDoc::new(&d, 1, &[], false));
        let size = d.outcome.as_ref().unwrap().response_body.len();
        assert!(
            shown.contains(&format!(
                "Response body, decoded from {size} bytes gzip (17 bytes, JSON)"
            )),
            "{shown}"
        );
        assert!(shown.contains("\"received\": true"), "{shown}");

        let outcome = d.outcome.as_mut().unwrap();
        outcome.response_body = br#"{"received":true}"#.to_vec();
        outcome.response_body_size = 17;
        let shown = text(&DetailDoc::new(&d, 1, &[], false));
        assert!(
            shown
                .contains("Response body (17 bytes, JSON)\n(sent as gzip, but it does not decode: invalid gzip header"),
            "a mislabelled answer shows as sent, and why: {shown}"
        );
    }

    #[test]
    fn a_delivery_without_a_key_is_counted_with_nothing() {
        let mut health = test_delivery(3);
        health.request.event_key.clear();
        health.request.event_key_source = "none".into();
        let shown = text(&DetailDoc::new(&health, 1, &[], false));
        assert!(
            shown.contains("event    none (nothing to group deliveries by)"),
            "{shown}"
        );
        assert!(!shown.contains("of this event"), "{shown}");
    }

    #[test]
    fn a_retry_says_which_delivery_of_its_event_it_is() {
        let mut retry = test_delivery(9);
        retry.delivery_count = 3;
        let shown = text(&DetailDoc::new(&retry, 2, &[], false));
        assert!(
            shown.contains("event    evt_9 (body:/id), 2nd delivery of 3"),
            "{shown}"
        );
        retry.request.replay_of = Some(4);
        let shown = text(&DetailDoc::new(&retry, 2, &[], false));
        assert!(
            shown.contains("event    evt_9 (body:/id)\n"),
            "a replay is no delivery: {shown}"
        );
    }

    #[test]
    fn an_answer_too_late_for_its_caller_is_shown_beside_the_error() {
        let mut late = test_delivery(2);
        let outcome = late.outcome.as_mut().unwrap();
        outcome.status = None;
        outcome.error =
            Some("the connection to the relay ended before the answer; the handler then answered 200".into());
        let shown = text(&DetailDoc::new(&late, 1, &[], false));
        assert!(
            shown.contains("Response answered, but no caller received it, after 12.0 ms"),
            "{shown}"
        );
        late.outcome.as_mut().unwrap().duration_ms = Some(3001.1);
        let shown = text(&DetailDoc::new(&late, 1, &[], false));
        assert!(
            shown.contains("Response answered, but no caller received it, after 3.00 s"),
            "seconds, not thousands of milliseconds: {shown}"
        );
        assert!(
            shown.contains("Response headers (1)\ncontent-type: text/plain"),
            "{shown}"
        );
        assert!(shown.contains("Response body (2 bytes, text)\nok"), "{shown}");
        // No headers either: the handler never answered.
        late.outcome.as_mut().unwrap().response_headers.clear();
        let shown = text(&DetailDoc::new(&late, 1, &[], false));
        assert!(shown.contains("Response no answer after 3.00 s"), "{shown}");
    }

    #[test]
    fn a_body_stored_cut_short_says_so_and_offers_no_whole_export() {
        let mut d = test_delivery(3);
        d.request.request_body = vec![b'a'; 2 * MAX_SHOWN_TEXT];
        d.request.request_body_size = 31_457_280;
        let shown = text(&DetailDoc::new(&d, 1, &[], false));
        let stored = thousands(2 * MAX_SHOWN_TEXT as u64);
        assert!(
            shown.contains(&format!("Request body (31,457,280 bytes, {stored} stored, text)")),
            "{shown}"
        );
        assert!(
            shown.contains(&format!(
                "the first {} of the {stored} bytes stored shown)\n(stored body cut at {stored} of 31,457,280 bytes)",
                thousands(MAX_SHOWN_TEXT as u64)
            )),
            "{shown}"
        );
        assert!(!shown.contains("exports the delivery whole"), "{shown}");

        d.request.request_body = b"{\"partial\":".to_vec();
        d.request.request_body_size = crate::store::size_past_cut(11);
        let shown = text(&DetailDoc::new(&d, 1, &[], false));
        assert!(
            shown.contains("Request body (cut short after 11 bytes, text)"),
            "{shown}"
        );
        assert!(
            shown.contains("(body cut short after 11 bytes; the rest did not reach PortPreview)"),
            "{shown}"
        );
    }

    #[test]
    fn escape_sequences_never_survive() {
        let mut d = test_delivery(1);
        d.request.path = "/a\x1b]0;pwned\x07".into();
        d.request
            .request_headers
            .push(Header::new("x-evil", b"\x1b[2J\x9b".to_vec()));
        d.request.request_body = b"line\x1b[31m red\r\nnext\x1bP".to_vec();
        let outcome = d.outcome.as_mut().unwrap();
        outcome.response_body = vec![0xff, 0x1b, b'[', b'2', b'J'];
        outcome.error = Some("bad\x1b[0m".into());
        let shown = text(&DetailDoc::new(&d, 1, &[], false));
        assert!(!shown.chars().any(|c| c.is_control() && c != '\n'), "{shown:?}");
        assert!(shown.contains("line\\x1b[31m red\\r"), "{shown}");
        assert!(shown.contains("00000000  ff 1b 5b 32 4a"), "{shown}");
    }

    /// A verdict's reason and advice are wrapped to the pane, never cut at
    /// its edge, and the pane scrolls as far as their last row.
    #[test]
    fn replay_runs_wrap_to_the_pane_and_scroll_to_their_end() {
        let advice = "attempts 2–3 changed the state again (`count: 26` → `count: 28`, +2): \
                      dedupe on the event key before the side effect";
        let run = ReplayRun {
            id: 1,
            delivery_id: 1,
            started_at_ms: 1_764_470_700_000,
            times: 3,
            concurrency: 1,
            idempotent: Some(false),
            summary: advice.into(),
            report_json: "{}".into(),
        };
        let doc = DetailDoc::new(&test_delivery(1), 1, &[run], false);
        let last = doc.lines.len() - 1;
        assert!(doc.wrap_from <= last);
        let rows = doc.rows(last, 40, 8);
        assert!(rows.len() > 2 && rows.iter().all(|row| row.width() <= 40), "{rows:?}");
        let shown: String = rows.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ");
        assert!(shown.contains("before the side effect"), "the end is shown: {shown}");
        // A body's line is one row, scrolled sideways rather than wrapped.
        assert_eq!(doc.rows(0, 40, 0).len(), 1);
        // Scrolled to the end, the last run's rows fill the pane's last rows.
        let scroll = doc.last_scroll(5, 40);
        let below: usize = (scroll..doc.lines.len()).map(|i| doc.rows(i, 40, 0).len()).sum();
        assert!(below <= 5 && scroll <= last, "{scroll} {below}");
    }

    #[test]
    fn replay_runs_show_their_verdicts() {
        let run = ReplayRun {
            id: 1,
            delivery_id: 1,
            started_at_ms: 1_764_470_700_000,
            times: 10,
            concurrency: 1,
            idempotent: Some(false),
            summary: "state changed on attempts 2–10".into(),
            report_json: "{}".into(),
        };
        let failed = ReplayRun {
            times: 1,
            summary: "✗ failed: attempt 1 answered 302".into(),
            ..run.clone()
        };
        let unprobed = ReplayRun {
            times: 3,
            idempotent: Some(true),
            summary: "✓ every one of 3 attempts answered 2xx (side effects not checked)".into(),
            report_json: serde_json::json!({
                "side_effects_checked": false,
                "warnings": [crate::replay::NOT_PROBED],
                "answers": [
                    {"attempts": [1], "status": 200, "body": "{\"balance\": 100}"},
                    {"attempts": [2, 3], "status": 200, "body": "{\"balance\": 200}"},
                ],
            })
            .to_string(),
            ..run.clone()
        };
        // Told by the report's verdict, whatever its summary's words.
        let refused = ReplayRun {
            times: 2,
            summary: "attempt 1 answered 500".into(),
            report_json: serde_json::json!({"verdict": "failed"}).to_string(),
            ..run.clone()
        };
        let burst = ReplayRun {
            concurrency: 4,
            summary: "state changed on attempts 3 and 4".into(),
            ..run.clone()
        };
        let shown = text(&DetailDoc::new(
            &test_delivery(1),
            1,
            &[run, failed, unprobed, refused, burst],
            false,
        ));
        assert!(
            shown.contains("×10, 4 at once ✗ not idempotent  state changed on attempts 3 and 4"),
            "{shown}"
        );
        assert!(shown.contains("×2 ✗ failed  attempt 1 answered 500"), "{shown}");
        assert!(shown.contains("Replay runs (5)"), "{shown}");
        assert!(
            shown.contains("×3 ✓ answered  every one of 3 attempts"),
            "a run that read no state is not called idempotent: {shown}"
        );
        assert!(
            shown.contains(r#"! answers differ: 1 → 200 {"balance": 100}; 2–3 → 200 {"balance": 200}"#),
            "{shown}"
        );
        assert!(!shown.contains("side effects were not checked"), "{shown}");
        assert!(
            shown.contains("×10 ✗ not idempotent  state changed on attempts 2–10"),
            "{shown}"
        );
        assert!(
            shown.contains("×1 ✗ failed  attempt 1 answered 302"),
            "the verdict said once: {shown}"
        );
    }

    #[test]
    fn a_stopped_run_shows_the_attempts_it_sent_of_those_asked() {
        let attempts: Vec<_> = (1..=9).map(|n| serde_json::json!({"n": n, "status": 200})).collect();
        let stopped = ReplayRun {
            id: 1,
            delivery_id: 1,
            started_at_ms: 1_764_470_700_000,
            times: 50,
            concurrency: 1,
            idempotent: None,
            summary: "? stopped after 9 of 50 attempts".into(),
            report_json: serde_json::json!({ "attempts": attempts }).to_string(),
        };
        let whole = ReplayRun {
            times: 9,
            ..stopped.clone()
        };
        let shown = text(&DetailDoc::new(&test_delivery(1), 1, &[stopped, whole], false));
        assert!(shown.contains("×9/50 ? inconclusive"), "{shown}");
        assert!(
            shown.contains("×9 ? inconclusive"),
            "a run that sent all it asked: {shown}"
        );
    }

    #[test]
    fn a_fresh_run_counts_its_baseline() {
        let attempts: Vec<_> = (1..=5).map(|n| serde_json::json!({"n": n, "status": 200})).collect();
        let fresh = ReplayRun {
            id: 1,
            delivery_id: 1,
            started_at_ms: 1_764_470_700_000,
            times: 4,
            concurrency: 4,
            idempotent: Some(true),
            summary: "✓ idempotent: a burst of 4 copies of one new event acted once".into(),
            report_json: serde_json::json!({ "attempts": attempts, "fresh": true }).to_string(),
        };
        let stopped = ReplayRun {
            report_json: serde_json::json!({ "attempts": attempts[..3], "fresh": true }).to_string(),
            ..fresh.clone()
        };
        let shown = text(&DetailDoc::new(&test_delivery(1), 1, &[fresh, stopped], false));
        assert!(shown.contains("×1+4 ✓ idempotent"), "{shown}");
        assert!(shown.contains("×3/1+4 ✓ idempotent"), "{shown}");
    }
}
