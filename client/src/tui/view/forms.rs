//! The filter prompt and the replay and export forms.

use portpreview_shared::sanitize::escape_str;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Widget};

use crate::tui::dialog::{ExportForm, ExportFormat, ProbeKind, ReplayField, ReplayForm, Sends, TextInput, INPUT_CUT};
use crate::tui::format::{fit_line, tail, wrap};

use super::{centered, clear_popup};

const CURSOR: &str = "▏";

/// Width of the replay dialog when nothing in it asks for more.
const REPLAY_WIDTH: u16 = 58;
/// Columns a form field's marker and label take before its value.
const LABEL_WIDTH: usize = 12;

fn key(text: &'static str) -> Span<'static> {
    Span::styled(text, Style::new().fg(Color::Cyan))
}

pub(super) fn render_filter(input: &TextInput, area: Rect, buf: &mut Buffer) {
    let hint = match input.full {
        true => Span::styled(format!("  {INPUT_CUT}"), Style::new().fg(Color::Yellow)),
        false => Span::styled("  Enter apply  Esc cancel", Style::new().fg(Color::DarkGray)),
    };
    // Typing happens at the end: on a narrow screen the end stays in view.
    // A cut paste keeps room for the word that says so.
    let kept = if input.full { hint.width() } else { 0 };
    let typed = tail(
        &escape_str(&input.text),
        usize::from(area.width).saturating_sub(2 + kept),
    );
    let line = Line::from(vec![
        Span::styled("/", Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD)),
        Span::raw(typed),
        Span::raw(CURSOR),
        hint,
    ]);
    Paragraph::new(line).render(area, buf);
}

fn field_line(label: &str, value: Vec<Span<'static>>, active: bool) -> Line<'static> {
    let marker = if active { "›" } else { " " };
    let mut spans = vec![Span::styled(
        format!("{marker} {label:<width$}", width = LABEL_WIDTH - 2),
        Style::new().fg(Color::DarkGray),
    )];
    spans.extend(value);
    Line::from(spans)
}

/// A field's text, shown selected while it is a suggestion: typing
/// replaces it.
fn suggested_or_typed(input: &TextInput) -> Span<'static> {
    let text = escape_str(&input.text).into_owned();
    match input.suggested {
        true => Span::styled(text, Style::new().add_modifier(Modifier::REVERSED)),
        false => Span::raw(text),
    }
}

pub(super) fn render_replay(form: &ReplayForm, area: Rect, buf: &mut Buffer) {
    // The dialog grows to hold the message on one line where the screen
    // allows, and the message wraps inside it where it does not: a refusal
    // cut short cannot be acted on.
    let error_width = form.error.as_deref().map_or(0, |e| Line::raw(e).width());
    let width = REPLAY_WIDTH
        .max(u16::try_from(error_width + 2).unwrap_or(u16::MAX))
        .min(area.width);
    let cursor = |field| if form.field == field { CURSOR } else { "" };
    let kinds = [
        (ProbeKind::None, "none"),
        (ProbeKind::Url, "url"),
        (ProbeKind::Cmd, "cmd"),
    ];
    let kind_spans = choices(&kinds, form.probe_kind);
    let sends = [(Sends::Duplicates, "duplicates"), (Sends::FreshBurst, "fresh burst")];
    let mut lines = vec![
        field_line(
            "attempts",
            vec![suggested_or_typed(&form.times), Span::raw(cursor(ReplayField::Times))],
            form.field == ReplayField::Times,
        ),
        field_line("sends", choices(&sends, form.sends), form.field == ReplayField::Sends),
        field_line("probe", kind_spans, form.field == ReplayField::ProbeKind),
    ];
    let probe_label = match form.probe_kind {
        ProbeKind::None => None,
        ProbeKind::Url => Some("check url"),
        ProbeKind::Cmd => Some("check cmd"),
    };
    if let (Some(label), Some(probe)) = (probe_label, form.probe()) {
        // Typing happens at the end: the field keeps it and the cursor in
        // view, the start given way to a "…" (a column kept for the cursor).
        let room = usize::from(width.saturating_sub(2)).saturating_sub(LABEL_WIDTH + 1);
        lines.push(field_line(
            label,
            vec![
                Span::raw(tail(&escape_str(&probe.text), room)),
                Span::raw(cursor(ReplayField::Probe)),
            ],
            form.field == ReplayField::Probe,
        ));
        if probe.full {
            lines.push(field_line(
                "",
                vec![Span::styled(INPUT_CUT, Style::new().fg(Color::Yellow))],
                false,
            ));
        }
        lines.push(field_line(
            "settle",
            vec![suggested_or_typed(&form.settle), Span::raw(cursor(ReplayField::Settle))],
            form.field == ReplayField::Settle,
        ));
    }
    lines.push(Line::default());
    match &form.error {
        Some(error) => lines.extend(
            wrap(error, usize::from(width.saturating_sub(2)))
                .into_iter()
                .map(|line| Line::from(Span::styled(line, Style::new().fg(Color::Red)))),
        ),
        None => lines.push(Line::from(vec![
            key("Tab"),
            Span::raw(" field  "),
            key("←→"),
            Span::raw(" choose  "),
            key("Enter"),
            Span::raw(" run  "),
            key("Esc"),
            Span::raw(" cancel"),
        ])),
    }
    // A line the dialog is too narrow for ends in "…", not mid-word.
    let inner = usize::from(width.saturating_sub(2));
    let lines: Vec<Line> = lines.into_iter().map(|line| fit_line(line, inner)).collect();
    let title = format!(" Replay #{} with a verdict ", form.delivery_id);
    let popup = centered(area, width, u16::try_from(lines.len() + 2).unwrap_or(u16::MAX));
    clear_popup(popup, buf);
    Paragraph::new(lines)
        .block(
            Block::bordered()
                .title(title)
                .border_style(Style::new().fg(Color::Cyan)),
        )
        .render(popup, buf);
}

/// A field's choices on one line, the one chosen in brackets.
fn choices<T: PartialEq>(choices: &[(T, &str)], chosen: T) -> Vec<Span<'static>> {
    choices
        .iter()
        .map(|(choice, name)| {
            if *choice == chosen {
                Span::styled(
                    format!("[{name}] "),
                    Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
                )
            } else {
                Span::raw(format!(" {name}  "))
            }
        })
        .collect()
}

pub(super) fn render_export(form: &ExportForm, area: Rect, buf: &mut Buffer) {
    let popup = centered(area, 44, 7);
    clear_popup(popup, buf);
    let describe = |format: ExportFormat| match format {
        ExportFormat::Json => ("j", "json  fixture for replay --from, check"),
        ExportFormat::Har => ("h", "har   HAR 1.2 for browser devtools"),
        ExportFormat::Curl => ("c", "curl  shell command"),
    };
    let lines: Vec<Line> = ExportFormat::ALL
        .iter()
        .map(|format| {
            let (letter, text) = describe(*format);
            let style = if *format == form.format {
                Style::new().add_modifier(Modifier::REVERSED)
            } else {
                Style::new()
            };
            Line::from(vec![
                Span::styled(format!(" {letter} "), Style::new().fg(Color::Cyan)),
                Span::styled(text, style),
            ])
        })
        .chain([
            Line::default(),
            Line::from(vec![
                key(" j h c"),
                Span::raw(" or "),
                key("Enter"),
                Span::raw(" write  "),
                key("Esc"),
                Span::raw("/"),
                key("q"),
                Span::raw(" cancel"),
            ]),
        ])
        // A line the dialog is too narrow for ends in "…", not mid-word.
        .map(|line| fit_line(line, usize::from(popup.width.saturating_sub(2))))
        .collect();
    let title = format!(" Export #{} ", form.delivery_id);
    Paragraph::new(lines)
        .block(
            Block::bordered()
                .title(title)
                .border_style(Style::new().fg(Color::Cyan)),
        )
        .render(popup, buf);
}
