//! The `?` key list.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Widget};

use super::{centered, clear_popup};
use crate::tui::format::fit_line;

/// Every key, as the help box lists it (most needed first: a short screen
/// shows the start, and j and k scroll to the rest).
pub const KEYS: &[(&str, &str)] = &[
    ("q", "quit"),
    ("↑↓ j k", "move / scroll"),
    ("PgUp PgDn", "a page"),
    ("g G", "newest / oldest; in a detail, top / end"),
    ("Home End", "as g G"),
    ("Enter", "open the delivery"),
    ("Tab", "switch list / detail"),
    ("← → h l", "scroll detail sideways"),
    ("H L 0 $", "sideways by a screen; to either edge"),
    ("/", "filter: 404, 5xx, err, or any text"),
    ("Esc", "stop replay, close detail, clear filter"),
    ("r", "replay once"),
    ("R", "verdict: N duplicates or a fresh burst"),
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
    clear_popup(popup, buf);
    let inner = usize::from(popup.width.saturating_sub(2));
    // Cut with a mark on a narrow screen: a cut description reads as a
    // whole, wrong one.
    let lines: Vec<Line> = KEYS
        .iter()
        .skip(first)
        .map(|(key, what)| {
            let line = Line::from(vec![
                Span::styled(format!(" {key:<11}"), Style::new().fg(Color::Cyan)),
                Span::raw(*what),
            ]);
            fit_line(line, inner)
        })
        .collect();
    // The shorter title where the long one would be cut: what it says
    // (that any key closes the box) is what a user needs from it.
    let titles: &[&str] = match rows_shown(area) < KEYS.len() {
        true => &[
            " Keys (j k scroll, any other key closes) ",
            " Keys (j k scroll, other keys close) ",
        ],
        false => &[" Keys (any key closes) "],
    };
    let title = titles
        .iter()
        .find(|title| Line::raw(**title).width() <= inner)
        .or(titles.last())
        .copied()
        .unwrap_or_default();
    let title = fit_line(Line::raw(title), inner);
    let block = Block::bordered()
        .title(title)
        .border_style(Style::new().fg(Color::Cyan));
    Paragraph::new(lines).block(block).render(popup, buf);
}
