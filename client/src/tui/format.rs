//! How times, statuses, durations and keys are written in cells.

// Cells are cut as every view cuts text to columns.
pub use portpreview_shared::text::{cut, fit, tail, wrap};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};

/// `2026-11-30 02:45:00.123` (with the date) or `02:45:00`, in UTC.
/// A time past what RFC 3339 writes (a damaged or hand-edited row) is
/// shown as its number.
pub fn timestamp(ms: i64, with_date: bool) -> String {
    // "2026-11-30T02:45:00.123Z"
    let text = crate::time::rfc3339_ms(ms);
    if !text.ends_with('Z') {
        return text;
    }
    if with_date {
        text.trim_end_matches('Z').replacen('T', " ", 1)
    } else {
        text.get(11..19).unwrap_or_default().to_owned()
    }
}

/// `11-30 02:45:00`: month, day and time, in UTC.
pub fn short_timestamp(ms: i64) -> String {
    let full = timestamp(ms, true);
    full.get(5..19).map_or(full.clone(), str::to_owned)
}

/// Colour of a status by class; red for a delivery that got no answer.
pub fn status_style(status: Option<u16>) -> Style {
    let color = match status {
        None => Color::Red,
        Some(s) if s >= 500 => Color::Red,
        Some(s) if s >= 400 => Color::Yellow,
        Some(s) if s >= 300 => Color::Cyan,
        Some(_) => Color::Green,
    };
    Style::new().fg(color)
}

/// `14 ms`, `1.2 s`, or `…` while in flight.
pub fn duration(ms: Option<f64>) -> String {
    match ms {
        None => "…".to_owned(),
        Some(ms) => crate::time::ShortDuration(ms).to_string(),
    }
}

/// `line` broken into rows of at most `width` columns, at spaces where it
/// can and inside a word only when the word alone is wider than a row,
/// each piece in its span's style. Rows after the first are indented two
/// columns past the line's own indent, so a wrapped paragraph reads as one.
pub fn wrap_line(line: &Line<'static>, width: usize) -> Vec<Line<'static>> {
    use unicode_width::UnicodeWidthChar;
    let width = width.max(1);
    let styled: Vec<(char, Style)> = line
        .spans
        .iter()
        .flat_map(|span| span.content.chars().map(move |c| (c, span.style)))
        .collect();
    let indent = styled.iter().take_while(|(c, _)| *c == ' ').count() + 2;
    // Past half the row, an indent would leave the text no room.
    let indent = if indent * 2 > width { 0 } else { indent };
    let columns = |text: &[(char, Style)]| text.iter().map(|(c, _)| c.width().unwrap_or(0)).sum::<usize>();
    let continuation = || vec![(' ', Style::default()); indent];
    let mut rows: Vec<Vec<(char, Style)>> = vec![Vec::new()];
    let mut at = 0;
    while at < styled.len() {
        // The next word with the spaces before it.
        let spaces = styled[at..].iter().take_while(|(c, _)| *c == ' ').count();
        let word_len = styled[at + spaces..].iter().take_while(|(c, _)| *c != ' ').count();
        let (gap, word) = (&styled[at..at + spaces], &styled[at + spaces..at + spaces + word_len]);
        at += spaces + word_len;
        // A continuation row starts at its indent, not at a space.
        let fresh = rows.len() > 1 && rows.last().is_some_and(|row| row.len() == indent);
        let row = rows.last_mut().expect("one row at least");
        let gap = if fresh { &[][..] } else { gap };
        if columns(row) + columns(gap) + columns(word) <= width {
            row.extend_from_slice(gap);
            row.extend_from_slice(word);
            continue;
        }
        if !fresh && columns(word) <= width - indent {
            let mut next = continuation();
            next.extend_from_slice(word);
            rows.push(next);
            continue;
        }
        // A word wider than a row goes on where the row stands, cut where it is full.
        if columns(row) + columns(gap) < width {
            row.extend_from_slice(gap);
        }
        for &(c, style) in word {
            if columns(rows.last().expect("one row at least")) + c.width().unwrap_or(0) > width {
                rows.push(continuation());
            }
            rows.last_mut().expect("one row at least").push((c, style));
        }
    }
    rows.into_iter()
        .map(|row| {
            let mut spans: Vec<Span<'static>> = Vec::new();
            for (c, style) in row {
                match spans.last_mut() {
                    Some(last) if last.style == style => last.content.to_mut().push(c),
                    _ => spans.push(Span::styled(c.to_string(), style)),
                }
            }
            Line::from(spans).style(line.style)
        })
        .collect()
}

/// `line` in at most `width` columns, cut as [`fit`] cuts, the "…" in the
/// style of the span it ends: a line a paragraph clips shows no sign of it.
pub fn fit_line(line: Line<'static>, width: usize) -> Line<'static> {
    if line.width() <= width {
        return line;
    }
    let mut room = width;
    let mut spans = Vec::with_capacity(line.spans.len());
    for span in line.spans {
        let columns = span.width();
        // Whole, it must leave a column for the "…" a later span ends in.
        if columns < room {
            room -= columns;
            spans.push(span);
            continue;
        }
        spans.push(Span::styled(cut(&span.content, room), span.style));
        break;
    }
    Line { spans, ..line }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(rows: &[Line<'static>]) -> Vec<String> {
        rows.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_long_line_wraps_at_spaces_under_its_indent_keeping_styles() {
        let warn = Style::new().fg(Color::Yellow);
        let line = Line::from(vec![
            Span::raw("    ! "),
            Span::styled("set PORTPREVIEW_SECRET_STRIPE or pass --secret", warn),
        ]);
        let rows = wrap_line(&line, 24);
        assert_eq!(
            texts(&rows),
            [
                "    ! set PORTPREVIEW_SE",
                "      CRET_STRIPE or",
                "      pass --secret"
            ],
            "a word wider than a row goes on where the row stands"
        );
        assert!(rows.iter().all(|row| row.width() <= 24));
        assert_eq!(
            rows[2].spans.last().map(|s| s.style),
            Some(warn),
            "the style goes with the words"
        );
        assert_eq!(
            texts(&wrap_line(&Line::raw("one two three four"), 10)),
            ["one two", "  three", "  four"],
            "words that fit a row move to the next whole"
        );
        // A line that fits is one row, as it was.
        assert_eq!(texts(&wrap_line(&Line::raw("  ✓ idempotent"), 24)), ["  ✓ idempotent"]);
        // Wide characters count two columns each.
        let cjk = wrap_line(&Line::raw("日本語テキスト日本語テキスト"), 10);
        assert!(cjk.iter().all(|row| row.width() <= 10), "{:?}", texts(&cjk));
        assert_eq!(texts(&cjk).concat().replace(' ', ""), "日本語テキスト日本語テキスト");
    }

    #[test]
    fn cells_read_well() {
        assert_eq!(timestamp(1_764_470_701_234, true), "2025-11-30 02:45:01.234");
        assert_eq!(timestamp(1_764_470_701_234, false), "02:45:01");
        assert_eq!(short_timestamp(1_764_470_701_234), "11-30 02:45:01");
        // Past year 9999, as a hand-edited row may be: its number, no panic.
        let far = 300_000_000_000_000;
        assert_eq!(timestamp(far, true), far.to_string());
        assert_eq!(timestamp(far, false), far.to_string());
        assert_eq!(short_timestamp(far), far.to_string());
        assert_eq!(duration(Some(3.25)), "3.2 ms");
        assert_eq!(duration(Some(14.4)), "14 ms");
        assert_eq!(duration(Some(1234.0)), "1.2 s");
    }

    #[test]
    fn a_fit_measures_columns_and_marks_the_cut() {
        assert_eq!(fit("evt_日本語日本語日本語日本語", 16), "evt_日本語日本…");
        assert_eq!(fit("evt_日本語", 10), "evt_日本語");
        assert_eq!(fit("evt_日本語", 9), "evt_日本…");
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("a\\x1b[2J", 5), "a…", "an escape is never cut in half");
        assert_eq!(fit("abc", 0), "");
        assert!(Span::raw(fit("日本語日本語", 6)).width() <= 6);
    }

    #[test]
    fn a_fitted_line_ends_in_an_ellipsis_in_the_cut_spans_style() {
        let red = Style::new().fg(Color::Red);
        let line = Line::from(vec![
            Span::raw("● online  "),
            Span::styled("http://127.0.0.1:8080", red),
        ]);
        let fitted = fit_line(line.clone(), 20);
        assert_eq!(fitted.to_string(), "● online  http://12…");
        assert_eq!(fitted.spans.last().map(|s| s.style), Some(red));
        assert_eq!(fit_line(line.clone(), 40), line, "a line that fits is left whole");
        let exact = Line::from(vec![Span::raw("abcd"), Span::raw("efgh")]);
        assert_eq!(
            fit_line(exact, 4).to_string(),
            "abc…",
            "a span that just fits still leaves room for the mark"
        );
    }

    #[test]
    fn a_tail_keeps_the_end_in_columns() {
        assert_eq!(tail("abcdef", 4), "…def");
        assert_eq!(tail("abcd", 4), "abcd");
        assert_eq!(tail("日本語です", 5), "…です");
        assert_eq!(tail("abc", 0), "…");
    }
}
