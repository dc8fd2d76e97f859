//! The `?` key list.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Widget};

use super::centered;

/// Every key, as the help box lists it (most needed first: a short screen
/// shows the start, and j and k scroll to the rest).
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
    ("v", "show / mask secrets"),
    ("?", "this help"),
    ("ctrl-z", "stop as a shell job (tui; fg resumes)"),
];

/// Width of the help box.
const WIDTH: u16 = 54;

/// Keys the help box shows at once on a screen of `area`.
pub fn rows_shown(area: Rect) -> usize {
    usize::from(popup(area).height.saturating_sub(2))
}

fn popup(area: Rect) -> Rect {
    centered(area, WIDTH, KEYS.len() as u16 + 2)
}

/// Draws the key list from its `first` row on.
pub(super) fn render(area: Rect, buf: &mut Buffer, first: usize) {
    let popup = popup(area);
    Clear.render(popup, buf);
    let lines: Vec<Line> = KEYS
        .iter()
        .skip(first)
        .map(|(key, what)| {
            Line::from(vec![
                Span::styled(format!(" {key:<11}"), Style::new().fg(Color::Cyan)),
                Span::raw(*what),
            ])
        })
        .collect();
    let title = match rows_shown(area) < KEYS.len() {
        true => " Keys (j k scroll, any other key closes) ",
        false => " Keys (any key closes) ",
    };
    let block = Block::bordered()
        .title(title)
        .border_style(Style::new().fg(Color::Cyan));
    Paragraph::new(lines).block(block).render(popup, buf);
}
