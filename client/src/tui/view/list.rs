//! The deliveries table, newest first.

use portpreview_shared::sanitize::escape_str;
use portpreview_shared::text::{counted, thousands};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Cell, Paragraph, Row, StatefulWidget, Table, TableState, Widget, Wrap};

use crate::render::mask::shown_path;
use crate::store::Summary;
use crate::tui::app::{App, Focus, Mode, Waiting};
use crate::tui::format::{duration, fit, short_timestamp, status_style, timestamp};

use super::layout::list_rows;

/// Width from which the provider column shows.
const WIDE: u16 = 80;
/// Width from which dates and event keys show.
const WIDER: u16 = 110;
/// Width from which event types show: below it, the path's room is worth
/// more than a type cut too short to tell one from another.
const TYPED: u16 = 130;
/// Width from which provider names and UUID event keys show whole.
const WIDEST: u16 = 150;
/// Width from which a content key (`sha256:` and 64 hex digits) shows whole.
const HASHES_WHOLE: u16 = 200;

/// Provider column width: `standard-webhooks` whole when there is room.
fn provider_width(width: u16) -> u16 {
    if width >= WIDEST {
        17
    } else {
        10
    }
}

/// Event type column width: `payment_intent.succeeded` whole, and at the
/// widest `invoice.payment_action_required`: cut short, types of one
/// object (`customer.subscription.…`) would all read alike.
fn type_width(width: u16) -> u16 {
    if width >= WIDEST {
        32
    } else {
        24
    }
}

/// Event key column width: a GitHub or Shopify UUID whole when there is
/// room, a content key whole when there is more.
fn event_width(width: u16) -> u16 {
    match width {
        w if w >= HASHES_WHOLE => 71,
        w if w >= WIDEST => 36,
        _ => 16,
    }
}

pub(super) fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let focused = app.focus == Focus::List;
    let block = Block::bordered()
        .border_style(super::pane_border(focused))
        .title(title(app, area.width));
    if app.pager.is_empty() {
        let inner = block.inner(area);
        block.render(area, buf);
        Paragraph::new(empty_text(app))
            .wrap(Wrap { trim: true })
            .render(inner, buf);
        return;
    }
    let rows = list_rows(area);
    let summaries: Vec<&Summary> = (app.offset..app.offset + rows)
        .map_while(|i| app.pager.get(i))
        .collect();
    // Ids are what `show` and `replay` take: never cut, so the column is
    // as wide as the longest on screen.
    let shape = Shape {
        width: area.width,
        id: id_width(summaries.iter().map(|s| s.id).max().unwrap_or(0)),
    };
    let path = path_width(shape);
    let shown: Vec<Row> = (summaries.into_iter())
        .map(|summary| row(summary, app.pager.seen(summary), shape, path))
        .collect();
    let mut state = TableState::default().with_selected(Some(app.selected.saturating_sub(app.offset)));
    let highlight = if focused {
        Style::new().add_modifier(Modifier::REVERSED)
    } else {
        Style::new().bg(Color::DarkGray)
    };
    let table = Table::new(shown, widths(shape))
        .header(Row::new(headers(area.width)).style(Style::new().add_modifier(Modifier::BOLD)))
        .block(block)
        .column_spacing(1)
        .row_highlight_style(highlight);
    StatefulWidget::render(table, area, buf, &mut state);
}

/// The list's title in `width` columns: a long filter is cut with a mark,
/// its closing quote kept, not run into the frame's corner.
fn title(app: &App, width: u16) -> Line<'static> {
    let position = if app.pager.is_empty() { 0 } else { app.selected + 1 };
    let of = match app.pager.total() {
        Some(total) => thousands(total),
        None if app.waiting() == Some(Waiting::Rows) => "searching…".to_owned(),
        None if app.waiting().is_some() => "counting…".to_owned(),
        None => "?".to_owned(),
    };
    let mut spans = vec![Span::raw(format!(" Deliveries {}/{} ", thousands(position as u64), of))];
    if let Some(search) = app.pager.search() {
        // The frame's two corners, and "filter “” ".
        let room = usize::from(width).saturating_sub(spans[0].width() + 2 + "filter “” ".chars().count());
        spans.push(Span::styled(
            format!("filter “{}” ", fit(&escape_str(search), room)),
            Style::new().fg(Color::Yellow),
        ));
    }
    Line::from(spans)
}

/// What a search that found nothing took as statuses, when it also held
/// text: `error` beside other words is easily meant as text.
fn read_as_statuses(search: &str) -> String {
    let statuses = crate::store::status_words(search);
    let words = search.split_whitespace().count();
    match statuses.as_slice() {
        [] => String::new(),
        _ if statuses.len() == words => String::new(),
        [one] => format!(" {one} is read as a status: in double quotes, it is text."),
        many => format!(
            " {} are read as statuses: in double quotes, they are text.",
            many.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
        ),
    }
}

fn empty_text(app: &App) -> Text<'static> {
    let dim = Style::new().fg(Color::DarkGray);
    match (app.pager.search(), &app.mode) {
        (Some(search), _) if app.waiting() == Some(Waiting::Rows) => Text::styled(
            format!("Searching for “{}”… Esc cancels.", escape_str(search)),
            Style::new().fg(Color::Yellow),
        ),
        (Some(search), _) => Text::styled(
            format!(
                "Nothing matches “{}”.{} Esc clears the filter.",
                escape_str(search),
                read_as_statuses(search)
            ),
            dim,
        ),
        // Only the history is listed: without it the list stays empty
        // while the counters above move.
        (None, Mode::Live) if app.stats.not_recorded > 0 => Text::styled(
            format!(
                "{} forwarded and not recorded: the counters above show them, this list only what the history keeps.",
                counted(app.stats.not_recorded as usize, "delivery", "deliveries")
            ),
            dim,
        ),
        (None, Mode::Live) if !app.stats.public_url.is_empty() => {
            let also = app.stats.also_url.as_deref().map_or_else(String::new, |url| {
                format!(" (or {}, which needs no DNS)", escape_str(url))
            });
            Text::styled(
                format!(
                    "No deliveries yet. Send a webhook to {}{also}",
                    escape_str(&app.stats.public_url)
                ),
                dim,
            )
        }
        (None, Mode::Live) => Text::styled("No deliveries yet.", dim),
        (None, Mode::Browser { .. }) => Text::styled(
            "No deliveries in this history yet. Run portpreview http to record some.",
            dim,
        ),
    }
}

/// Width below which the time column gives way to the path.
const NARROW: u16 = 60;
/// Width below which the duration column gives way too.
const NARROWEST: u16 = 44;

/// The list's columns, in order.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Column {
    Id,
    Time,
    Method,
    Path,
    Status,
    Took,
    Provider,
    Type,
    Event,
    Count,
}

/// The columns shown at `width`: on a narrow screen the path keeps its
/// room, and the time, then the duration, give way.
fn columns(width: u16) -> Vec<Column> {
    let mut columns = Vec::with_capacity(10);
    columns.push(Column::Id);
    if width >= NARROW {
        columns.push(Column::Time);
    }
    columns.extend([Column::Method, Column::Path, Column::Status]);
    if width >= NARROWEST {
        columns.push(Column::Took);
    }
    if width >= WIDE {
        columns.push(Column::Provider);
    }
    if width >= TYPED {
        columns.push(Column::Type);
    }
    if width >= WIDER {
        columns.push(Column::Event);
    }
    columns.push(Column::Count);
    columns
}

fn headers(width: u16) -> Vec<&'static str> {
    columns(width)
        .into_iter()
        .map(|column| match column {
            Column::Id => "ID",
            // Times are shown in UTC, as everywhere in PortPreview.
            Column::Time => "Time UTC",
            Column::Method => "Method",
            Column::Path => "Path",
            Column::Status => "St",
            Column::Took => "Took",
            Column::Provider => "Provider",
            Column::Type => "Type",
            Column::Event => "Event",
            // How many deliveries its event has had so far.
            Column::Count => "Seen",
        })
        .collect()
}

/// What the columns' widths depend on: the table's width, and the widest
/// id shown.
#[derive(Debug, Clone, Copy)]
struct Shape {
    width: u16,
    id: u16,
}

/// Columns an id takes with its `#`.
fn id_width(id: i64) -> u16 {
    (id.max(1).ilog10() + 2) as u16
}

fn widths(shape: Shape) -> Vec<Constraint> {
    let width = shape.width;
    columns(width)
        .into_iter()
        .map(|column| match column {
            Column::Id => Constraint::Length(shape.id),
            Column::Time if width >= WIDER => Constraint::Length(14),
            Column::Time => Constraint::Length(8),
            Column::Method => Constraint::Length(6),
            Column::Path => Constraint::Fill(1),
            Column::Status => Constraint::Length(3),
            Column::Count => Constraint::Length(4),
            Column::Took => Constraint::Length(7),
            Column::Provider => Constraint::Length(provider_width(width)),
            Column::Type => Constraint::Length(type_width(width)),
            Column::Event => Constraint::Length(event_width(width)),
        })
        .collect()
}

/// What the path column gets: the table's inner width less the other
/// columns and the spaces between them.
fn path_width(shape: Shape) -> usize {
    let columns = widths(shape);
    let fixed: u16 = columns
        .iter()
        .map(|c| match c {
            Constraint::Length(n) => *n,
            _ => 0,
        })
        .sum();
    let spacing = columns.len().saturating_sub(1) as u16;
    usize::from(shape.width.saturating_sub(2 + fixed + spacing))
}

/// A delivery's row; `seen`: how many deliveries its event has had.
fn row(summary: &Summary, seen: i64, shape: Shape, path_width: usize) -> Row<'static> {
    let width = shape.width;
    let cells = columns(width).into_iter().map(|column| match column {
        Column::Id => {
            Cell::from(Line::from(format!("#{}", summary.id)).right_aligned()).style(Style::new().fg(Color::DarkGray))
        }
        Column::Time => {
            let time = if width >= WIDER {
                short_timestamp(summary.received_at_ms)
            } else {
                timestamp(summary.received_at_ms, false)
            };
            Cell::from(time).style(Style::new().fg(Color::DarkGray))
        }
        Column::Method => Cell::from(fit(&escape_str(&summary.method), 6)),
        // Marked where it is cut: a cut path can look like another, whole one.
        Column::Path => Cell::from(fit(&escape_str(&shown_path(&summary.path, false)), path_width)),
        Column::Status => {
            let status = match summary.status {
                Some(code) => code.to_string(),
                None if summary.is_waiting() => "…".to_owned(),
                None => "ERR".to_owned(),
            };
            Cell::from(status).style(status_style(summary.status))
        }
        Column::Took => {
            // Ended without an answer (the tunnel stopped first): no time
            // to show, and "…" would read as still waiting.
            let took = match summary.duration_ms {
                None if summary.error.is_some() => "–".to_owned(),
                ms => duration(ms),
            };
            Cell::from(Line::from(took).right_aligned())
        }
        Column::Provider => {
            let provider = summary
                .provider
                .as_deref()
                .map_or_else(|| "–".to_owned(), |p| fit(&escape_str(p), provider_width(width).into()));
            Cell::from(provider).style(Style::new().fg(Color::Magenta))
        }
        Column::Type => {
            let kind = summary.event_type.as_deref().map_or_else(
                || "–".to_owned(),
                |kind| fit(&escape_str(kind), type_width(width).into()),
            );
            Cell::from(kind).style(Style::new().fg(Color::Cyan))
        }
        Column::Event => {
            let event = fit(&escape_str(&summary.event_key), event_width(width).into());
            Cell::from(event).style(Style::new().fg(Color::DarkGray))
        }
        Column::Count => {
            let style = if seen > 1 {
                Style::new().fg(Color::Yellow)
            } else {
                Style::new()
            };
            Cell::from(Line::from(count_cell(seen)).right_aligned()).style(style)
        }
    });
    Row::new(cells.collect::<Vec<_>>())
}

/// A delivery count in the list's three columns: past 999 in thousands,
/// past 99k only that it is more; the detail pane has the exact count.
fn count_cell(count: i64) -> String {
    match count {
        ..=999 => count.to_string(),
        1_000..=99_999 => format!("{}k", count / 1_000),
        _ => "…".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::{count_cell, read_as_statuses};

    #[test]
    fn a_count_never_loses_its_leading_digits_to_the_column() {
        let shown: Vec<String> = [1, 999, 1_000, 1_001, 99_999, 100_000]
            .into_iter()
            .map(count_cell)
            .collect();
        assert_eq!(shown, ["1", "999", "1k", "1k", "99k", "…"]);
        assert!(shown.iter().all(|cell| cell.chars().count() <= 3));
    }

    /// `internal error` found nothing: the words taken as statuses are
    /// named, as `error` beside text is easily meant as text.
    #[test]
    fn a_search_that_found_nothing_names_the_words_it_read_as_statuses() {
        assert_eq!(
            read_as_statuses("internal error"),
            " error is read as a status: in double quotes, it is text."
        );
        assert_eq!(
            read_as_statuses("boom 5xx err"),
            " 5xx, error are read as statuses: in double quotes, they are text."
        );
        assert_eq!(read_as_statuses("\"internal error\""), "");
        assert_eq!(read_as_statuses("5xx"), "", "statuses alone were meant as such");
        assert_eq!(read_as_statuses("stripe"), "");
    }
}
