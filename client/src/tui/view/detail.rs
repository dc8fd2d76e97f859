//! The open delivery, scrolled both ways.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Widget};

use crate::tui::app::DetailState;

use super::layout::detail_rows;

pub(super) fn render(detail: &DetailState, focused: bool, reveal: bool, area: Rect, buf: &mut Buffer) {
    let rows = detail_rows(area);
    let total = detail.doc.lines.len();
    let columns = usize::from(area.width.saturating_sub(2));
    let mut lines: Vec<Line> = Vec::with_capacity(rows);
    let mut last = detail.scroll.min(total);
    while lines.len() < rows && last < total {
        lines.extend(detail.doc.rows(last, columns, detail.hscroll));
        last += 1;
    }
    lines.truncate(rows);
    // Scrolled sideways, lines shorter than the shift show blank: the
    // title says why the pane looks empty.
    let shifted = match detail.hscroll {
        0 => String::new(),
        columns => format!(", from column {}", columns + 1),
    };
    let title = format!(
        " #{}  lines {}–{} of {}{shifted} ",
        detail.doc.id,
        (detail.scroll + 1).min(total),
        last,
        total
    );
    let mut block = Block::bordered().border_style(super::pane_border(focused)).title(title);
    if reveal {
        block = block.title(Line::styled(" secrets shown (v masks) ", Style::new().fg(Color::Yellow)).right_aligned());
    }
    let inner = block.inner(area);
    // A line that goes on past the right edge ends in a mark: cut silently,
    // `evt_1, 2nd delivery of 2` could read as the whole of it.
    let cut: Vec<bool> = lines
        .iter()
        .map(|line| line.width() > usize::from(inner.width))
        .collect();
    Paragraph::new(lines).block(block).render(area, buf);
    if inner.width == 0 {
        return;
    }
    for (row, _) in cut.iter().enumerate().filter(|(_, cut)| **cut) {
        let y = inner.y + row as u16;
        if y < inner.bottom() {
            buf[(inner.right() - 1, y)]
                .set_symbol(CUT)
                .set_style(Style::new().fg(Color::DarkGray));
        }
    }
}

/// Marks a line that goes on past the right edge (`l` scrolls to the rest).
const CUT: &str = "…";
