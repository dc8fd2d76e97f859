//! The `?` key list.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Widget};

use super::centered;

/// Every key, as the help box lists it (most needed first: a short screen cuts the end).
pub const KEYS: &[(&str, &str)] = &[
    ("q", "quit"),
    ("↑↓ j k", "move / scroll"),
    ("PgUp PgDn", "a page"),
    ("g G", "newest / oldest"),
    ("Enter", "open the delivery"),
    ("Tab", "switch list / detail"),
    ("← → h l", "scroll detail sideways"),
    ("/", "filter: 404, 5xx, err, or any text"),
    ("Esc", "stop replay, close detail, clear filter"),
    ("r", "replay once"),
    ("R", "replay N times, with verdict"),
    ("e", "export json / har / curl"),
    ("y", "copy as curl"),
    ("?", "this help"),
    ("ctrl-z", "stop as a shell job (tui; fg resumes)"),
];

pub(super) fn render(area: Rect, buf: &mut Buffer) {
    let popup = centered(area, 54, KEYS.len() as u16 + 2);
    Clear.render(popup, buf);
    let lines: Vec<Line> = KEYS
        .iter()
        .map(|(key, what)| {
            Line::from(vec![
                Span::styled(format!(" {key:<11}"), Style::new().fg(Color::Cyan)),
                Span::raw(*what),
            ])
        })
        .collect();
    let block = Block::bordered()
        .title(" Keys (any key closes) ")
        .border_style(Style::new().fg(Color::Cyan));
    Paragraph::new(lines).block(block).render(popup, buf);
}
