//! The two header lines: tunnel and rate when live, the database when browsing.

use portpreview_shared::sanitize::escape_str;
use portpreview_shared::text::{counted, thousands};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Sparkline, Widget};

use crate::tui::app::{App, Mode};
use crate::tui::format::{duration, fit_line, tail};
use crate::tui::stats::{Connection, Warning};

pub(super) fn render(app: &App, area: Rect, buf: &mut Buffer) {
    // Cut with a mark: a URL cut short looks like another, whole one.
    Paragraph::new(fit_line(top_line(app, area.width), usize::from(area.width))).render(
        Rect {
            height: 1.min(area.height),
            ..area
        },
        buf,
    );
    let mut second = Rect {
        y: area.y + 1,
        height: 1,
        ..area
    };
    // A line of their own, under the URL they must never push off the
    // screen: the layout gives the header a third line for them.
    if area.height >= 3 {
        Paragraph::new(fit_line(warnings_line(app), usize::from(area.width))).render(second, buf);
        second.y += 1;
    }
    if second.bottom() > area.bottom() {
        return;
    }
    match &app.mode {
        Mode::Live => render_rate(app, second, buf),
        Mode::Browser { .. } => {
            let total = app.pager.total().map_or_else(|| "?".to_owned(), thousands);
            let noun = match (app.pager.search(), app.pager.total()) {
                (Some(_), _) => "matching",
                (None, Some(1)) => "delivery",
                (None, _) => "deliveries",
            };
            Paragraph::new(Line::from(format!(" {total} {noun}"))).render(second, buf);
        }
    }
}

/// The brand, then the tunnel's state and URL, or the history browsed.
fn top_line(app: &App, width: u16) -> Line<'static> {
    let brand = Span::styled(
        " PortPreview ",
        Style::new()
            .fg(Color::Black)
            .bg(Color::Cyan)
            .add_modifier(Modifier::BOLD),
    );
    match &app.mode {
        Mode::Live => {
            let stats = &app.stats;
            let offline = Style::new().fg(Color::Red);
            let state = match (&stats.connection, stats.retry_left()) {
                (Connection::Connecting, _) => Span::styled("○ connecting", Style::new().fg(Color::Yellow)),
                (Connection::Connected, _) => Span::styled("● online", Style::new().fg(Color::Green)),
                (Connection::Disconnected { .. }, Some(left @ 1..)) => {
                    Span::styled(format!("✗ offline, retry in {left}s"), offline)
                }
                (Connection::Disconnected { .. }, _) => Span::styled("✗ offline, retrying", offline),
            };
            let mut spans = vec![brand, Span::raw(" "), state];
            if !stats.public_url.is_empty() {
                spans.push(Span::raw("  "));
                spans.push(Span::styled(
                    escape_str(&stats.public_url).into_owned(),
                    Style::new().add_modifier(Modifier::BOLD),
                ));
                // As the line output gives it: without wildcard DNS, the
                // path form is the URL that works.
                if let Some(also) = &stats.also_url {
                    spans.push(Span::raw(format!(" (also {})", escape_str(also))));
                }
                spans.push(Span::raw(format!(" → {}", escape_str(&stats.target))));
            }
            Line::from(spans)
        }
        Mode::Browser { db } => {
            // A long path keeps its end: the file's name tells histories apart.
            let room = usize::from(width).saturating_sub(brand.width() + " history ".len());
            Line::from(vec![
                brand,
                Span::raw(" history "),
                Span::styled(tail(&escape_str(db), room), Style::new().fg(Color::DarkGray)),
            ])
        }
    }
}

/// Every warning standing, side by side.
fn warnings_line(app: &App) -> Line<'static> {
    let spans = app.stats.warnings().enumerate().flat_map(|(i, warning)| {
        let (text, color) = match warning {
            Warning::Offline(reason) => (format!("✗ {}", escape_str(reason)), Color::Red),
            Warning::HistoryRefusing(reason) => (
                format!(
                    "⚠ history refuses writes, deliveries wait in memory: {}",
                    escape_str(reason)
                ),
                Color::Yellow,
            ),
            Warning::NotRecording(reason) => (
                format!("⚠ deliveries not recorded: {}", escape_str(reason)),
                Color::Yellow,
            ),
            Warning::Unlisted(n) => (
                format!(
                    "⚠ {} forwarded and not recorded, so not listed",
                    counted(n as usize, "delivery", "deliveries")
                ),
                Color::Yellow,
            ),
            Warning::LastFailed(reason) => (format!("✗ last delivery: {}", escape_str(reason)), Color::Red),
        };
        let gap = if i == 0 { " " } else { "   " };
        [Span::raw(gap), Span::styled(text, Style::new().fg(color))]
    });
    Line::from(spans.collect::<Vec<_>>())
}

fn render_rate(app: &App, area: Rect, buf: &mut Buffer) {
    let stats = &app.stats;
    let label = " req/s ";
    let spark_width = (area.width / 4).min(30);
    // The second under way is still counting: show complete seconds only.
    let rate = stats.rate();
    let complete = &rate[..rate.len().saturating_sub(1)];
    let data: Vec<u64> = complete[complete.len().saturating_sub(usize::from(spark_width))..].to_vec();
    Paragraph::new(label).render(area, buf);
    let spark = Rect {
        x: area.x + label.len() as u16,
        width: spark_width.min(area.width.saturating_sub(label.len() as u16)),
        ..area
    };
    Sparkline::default()
        .data(&data)
        .style(Style::new().fg(Color::Cyan))
        .render(spark, buf);
    let now = data.last().copied().unwrap_or(0);
    let pct = |p| {
        stats
            .percentile(p)
            .map_or_else(|| "–".to_owned(), |ms| duration(Some(ms)))
    };
    let spans = vec![
        Span::raw(format!(" {now}/s  p50 {}  p90 {}  ", pct(50.0), pct(90.0))),
        Span::styled(format!("✓{}", stats.ok), Style::new().fg(Color::Green)),
        Span::raw(" "),
        Span::styled(format!("4xx {}", stats.client_errors), Style::new().fg(Color::Yellow)),
        Span::raw(" "),
        Span::styled(format!("5xx {}", stats.server_errors), Style::new().fg(Color::Red)),
        Span::raw(" "),
        Span::styled(format!("✗{}", stats.failed), Style::new().fg(Color::Red)),
    ];
    let rest = Rect {
        x: spark.right(),
        width: area.right().saturating_sub(spark.right()),
        ..area
    };
    Paragraph::new(fit_line(Line::from(spans), usize::from(rest.width))).render(rest, buf);
}
