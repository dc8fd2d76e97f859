//! Drawing: `Widget for &App` and one module per part. Nothing here
//! changes state; every untrusted string was sanitised before it got here
//! or is sanitised on the way into a cell.

mod detail;
mod forms;
mod header;
pub mod help;
pub mod layout;
mod list;

use portpreview_shared::text::columns;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Widget};

use super::app::{App, Focus, Overlay, Waiting};
use super::format::{cut, fit_line, wrap};

impl Widget for &App {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let areas = layout::areas(
            area,
            self.detail.is_some(),
            self.focus == Focus::Detail,
            self.chrome(area.width),
        );
        header::render(self, areas.header, buf);
        if let Some(list) = areas.list {
            list::render(self, list, buf);
        }
        if let (Some(rect), Some(detail)) = (areas.detail, &self.detail) {
            detail::render(
                detail,
                self.focus == Focus::Detail,
                self.reveal == Some(detail.doc.id),
                rect,
                buf,
            );
        }
        match &self.overlay {
            Some(Overlay::Filter(input)) => forms::render_filter(input, areas.footer, buf),
            _ => render_footer(self, areas.footer, buf),
        }
        match &self.overlay {
            Some(Overlay::Help { first }) => help::render(area, buf, *first),
            Some(Overlay::Replay(form)) => forms::render_replay(form, area, buf),
            Some(Overlay::Export(form)) => forms::render_export(form, area, buf),
            Some(Overlay::Filter(_)) | None => {}
        }
    }
}

/// The keys the list takes, as the footer names them.
const LIST_KEYS: &[(&str, &str)] = &[
    ("q", "quit"),
    ("?", "help"),
    ("/", "filter"),
    ("⏎", "open"),
    ("r", "replay"),
    ("R", "verdict"),
    ("e", "export"),
    ("y", "curl"),
    ("⇥", "pane"),
];

/// Key hints, or the last message, or the replay under way. A form drawn
/// over the panes takes the keys: the footer names its keys then, not the
/// list's, or `q` typed into a field looks like a screen that hangs.
fn render_footer(app: &App, area: Rect, buf: &mut Buffer) {
    let form_keys: Option<&[(&str, &str)]> = match &app.overlay {
        Some(Overlay::Replay(_)) => Some(&[("⇥", "field"), ("←→", "choose"), ("⏎", "run"), ("Esc", "cancel")]),
        Some(Overlay::Export(_)) => Some(&[("j h c ⏎", "write"), ("Esc q", "cancel")]),
        Some(Overlay::Help { .. }) => Some(&[("j k", "scroll"), ("any other key", "closes the help")]),
        Some(Overlay::Filter(_)) | None => None,
    };
    let lines = if let Some(keys) = form_keys {
        vec![hint_line(keys, area.width)]
    } else if let Some(status) = &app.status {
        // Wrapped as `App::chrome` counted the footer's lines.
        let style = Style::new().fg(if status.error { Color::Red } else { Color::Green });
        let mut lines = wrap(&status.text, usize::from(area.width));
        // More than the footer holds: its last row says the rest is cut.
        let rows = usize::from(area.height);
        if lines.len() > rows && rows > 0 {
            lines.truncate(rows);
            if let Some(last) = lines.last_mut() {
                *last = cut(last, usize::from(area.width));
            }
        }
        lines.into_iter().map(|l| Line::styled(l, style)).collect()
    } else if let Some(replay) = &app.replay {
        let mut spans = vec![Span::styled(replay.text.clone(), Style::new().fg(Color::Yellow))];
        if !replay.stopping {
            spans.push(Span::styled("  Esc stops", Style::new().fg(Color::DarkGray)));
        }
        vec![Line::from(spans)]
    } else if app.waiting() == Some(Waiting::End) {
        vec![Line::from(vec![
            Span::styled("finding the oldest delivery…", Style::new().fg(Color::Yellow)),
            Span::styled("  Esc stops", Style::new().fg(Color::DarkGray)),
        ])]
    } else {
        vec![hint_line(LIST_KEYS, area.width)]
    };
    Paragraph::new(lines).render(area, buf);
}

/// `q quit  ? help  …`, cut to `width`.
fn hint_line(hints: &[(&str, &str)], width: u16) -> Line<'static> {
    // Gaps go between hints, not after the last: a cut is marked only
    // when a hint is lost.
    let spans = hints.iter().enumerate().flat_map(|(i, (key, what))| {
        [
            Span::raw(if i == 0 { "" } else { "  " }),
            Span::styled(key.to_string(), Style::new().fg(Color::Cyan)),
            Span::raw(format!(" {what}")),
        ]
    });
    fit_line(Line::from(spans.collect::<Vec<_>>()), usize::from(width))
}

/// Empties `popup` for a box drawn over the screen. A wide character
/// whose second half lies under the box's left border must go too: a
/// terminal draws the whole glyph from its first cell, and ratatui sends no
/// cell a wide character covers, so the border there would never be drawn.
/// Likewise the cells right of the box that a wide character on its last
/// column covered are left blank, not half a glyph.
/// The border of the list or the detail: the focused one's stands out in
/// bold as well as in colour, so that NO_COLOR still shows which pane the
/// keys move.
fn pane_border(focused: bool) -> Style {
    match focused {
        true => Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
        false => Style::new().fg(Color::DarkGray),
    }
}

fn clear_popup(popup: Rect, buf: &mut Buffer) {
    // `cell` and `cell_mut` answer None off the screen, where indexing panics.
    let width_at = |buf: &Buffer, x: u16, y: u16| buf.cell((x, y)).map_or(0, |cell| columns(cell.symbol()));
    for y in popup.top()..popup.bottom() {
        // Glyphs are at most three columns wide (U+17D8): two cells to check.
        for k in 1..=2u16 {
            let Some(x) = popup.x.checked_sub(k) else { break };
            if width_at(buf, x, y) > usize::from(k) {
                if let Some(cell) = buf.cell_mut((x, y)) {
                    cell.set_symbol(" ");
                }
            }
        }
        for k in 1..=2u16 {
            let Some(x) = popup.right().checked_sub(k).filter(|&x| x >= popup.x) else {
                break;
            };
            let reach = usize::from(x) + width_at(buf, x, y);
            for covered in usize::from(popup.right())..reach {
                if let Some(cell) = u16::try_from(covered).ok().and_then(|c| buf.cell_mut((c, y))) {
                    cell.set_symbol(" ");
                }
            }
        }
    }
    Clear.render(popup, buf);
}

/// A box of `width`×`height` centred in `area` (shrunk to fit).
fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let width = width.min(area.width);
    let height = height.min(area.height);
    Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    }
}

#[cfg(test)]
mod tests;
