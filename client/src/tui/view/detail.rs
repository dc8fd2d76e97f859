//! The open delivery, scrolled both ways.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Widget};

use crate::tui::app::DetailState;

use super::layout::detail_rows;

pub(super) fn render(detail: &DetailState, focused: bool, reveal: bool, area: Rect, buf: &mut Buffer) {
    let border = if focused { Color::Cyan } else { Color::DarkGray };
    let rows = detail_rows(area);
    let total = detail.doc.lines.len();
    let last = (detail.scroll + rows).min(total);
    let title = format!(
        " #{}  lines {}–{} of {} ",
        detail.doc.id,
        (detail.scroll + 1).min(total),
        last,
        total
    );
    let mut block = Block::bordered().border_style(Style::new().fg(border)).title(title);
    if reveal {
        block = block.title(Line::styled(" secrets shown (v masks) ", Style::new().fg(Color::Yellow)).right_aligned());
    }
    let inner = block.inner(area);
    let lines: Vec<Line> = detail.doc.lines[detail.scroll.min(total)..last]
        .iter()
        .map(|line| cut_left(line, detail.hscroll))
        .collect();
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

/// The line without its first `columns` characters (horizontal scroll).
fn cut_left(line: &Line<'static>, columns: usize) -> Line<'static> {
    if columns == 0 {
        return line.clone();
    }
    let mut skip = columns;
    let mut spans = Vec::with_capacity(line.spans.len());
    for span in &line.spans {
        let count = span.content.chars().count();
        if skip >= count {
            skip -= count;
            continue;
        }
        let kept: String = span.content.chars().skip(skip).collect();
        skip = 0;
        spans.push(Span::styled(kept, span.style));
    }
    Line::from(spans).style(line.style)
}
