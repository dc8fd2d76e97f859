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
        Mode::Browser { .. } => render_history(app, second, buf),
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
            if stats.public_url.is_empty() {
                return Line::from(vec![brand, Span::raw(" "), state]);
            }
            let url = Span::styled(
                escape_str(&stats.public_url).into_owned(),
                Style::new().add_modifier(Modifier::BOLD),
            );
            // As the line output gives it: without wildcard DNS, the path
            // form is the URL that works.
            let also = (stats.also_url.as_ref()).map(|also| Span::raw(format!(" (also {})", escape_str(also))));
            let target = Span::raw(format!(" → {}", escape_str(&stats.target)));
            // The URLs are what the tunnel is for, and are copied from here:
            // on a narrow screen the brand, then the target, give way to
            // them before they are cut.
            let width = usize::from(width);
            let urls = state.width() + 2 + url.width() + also.as_ref().map_or(0, Span::width);
            // Two columns past the URLs for ` …`, where a cut target ends;
            // the brand takes a space after it.
            let branded = brand.width() + 1;
            let (brand_shown, target_shown) = match urls + 2 {
                room if room + branded <= width => (true, true),
                room if room <= width => (false, true),
                _ => (false, false),
            };
            let mut spans = match brand_shown {
                true => vec![brand, Span::raw(" "), state],
                false => vec![state],
            };
            spans.extend([Span::raw("  "), url]);
            spans.extend(also);
            spans.extend(target_shown.then_some(target));
            Line::from(spans)
        }
        Mode::Browser { db } => {
            // Said before a replay is sent: its attempts cannot be kept.
            let read_only = match app.source().read_only() {
                true => " (read-only)",
                false => "",
            };
            // A long path keeps its end: the file's name tells histories apart.
            let room = usize::from(width).saturating_sub(brand.width() + " history ".len() + read_only.len());
            Line::from(vec![
                brand,
                Span::raw(" history "),
                Span::styled(tail(&escape_str(db), room), Style::new().fg(Color::DarkGray)),
                Span::styled(read_only, Style::new().fg(Color::Yellow)),
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

/// Columns of a header's sparkline on a screen `area` wide.
fn sparkline_width(area: Rect) -> usize {
    usize::from((area.width / 4).min(30))
}

fn render_rate(app: &App, area: Rect, buf: &mut Buffer) {
    let stats = &app.stats;
    // The second under way is still counting: show complete seconds only.
    let rate = stats.rate();
    let complete = &rate[..rate.len().saturating_sub(1)];
    let data = &complete[complete.len().saturating_sub(sparkline_width(area))..];
    let now = data.last().copied().unwrap_or(0);
    let after = vec![
        Span::raw(format!(
            " {now}/s  {}  ",
            percentiles(stats.percentile(50.0), stats.percentile(90.0))
        )),
        Span::styled(format!("✓{}", stats.ok), Style::new().fg(Color::Green)),
        Span::raw(" "),
        Span::styled(format!("4xx {}", stats.client_errors), Style::new().fg(Color::Yellow)),
        Span::raw(" "),
        Span::styled(format!("5xx {}", stats.server_errors), Style::new().fg(Color::Red)),
        Span::raw(" "),
        Span::styled(format!("✗{}", stats.failed), Style::new().fg(Color::Red)),
    ];
    render_sparkline(" req/s ", data, after, area, buf);
}

/// How many deliveries the history holds, or match the filter; unfiltered,
/// how the newest arrived and how fast they were answered.
fn render_history(app: &App, area: Rect, buf: &mut Buffer) {
    let total = app.pager.total().map_or_else(|| "?".to_owned(), thousands);
    let noun = match (app.pager.search(), app.pager.total()) {
        (Some(_), _) => "matching",
        (None, Some(1)) => "delivery",
        (None, _) => "deliveries",
    };
    let label = format!(" {total} {noun} ");
    // The figures are the whole history's: beside a filter's count they
    // would read as the matches'.
    let Some(overview) = app.overview.as_ref().filter(|_| app.pager.search().is_none()) else {
        return Paragraph::new(label).render(area, buf);
    };
    let p50 = overview.percentile(50.0);
    let figures = percentiles(p50, overview.percentile(90.0));
    // One bar says nothing of how the deliveries came.
    match overview.bars(sparkline_width(area)).filter(|(data, _)| data.len() > 1) {
        Some((data, per)) => {
            render_sparkline(
                &label,
                &data,
                vec![Span::raw(format!(" per {per}  {figures}"))],
                area,
                buf,
            );
        }
        None if p50.is_some() => {
            Paragraph::new(fit_line(
                Line::from(format!("{label} {figures}")),
                usize::from(area.width),
            ))
            .render(area, buf);
        }
        None => Paragraph::new(label).render(area, buf),
    }
}

/// `p50 12 ms  p90 80 ms`, with a dash for a figure not known yet.
fn percentiles(p50: Option<f64>, p90: Option<f64>) -> String {
    let shown = |ms: Option<f64>| ms.map_or_else(|| "–".to_owned(), |ms| duration(Some(ms)));
    format!("p50 {}  p90 {}", shown(p50), shown(p90))
}

/// `label`, a sparkline of `data` and then `after`, cut with a mark at
/// the area's edge.
fn render_sparkline(label: &str, data: &[u64], after: Vec<Span<'static>>, area: Rect, buf: &mut Buffer) {
    Paragraph::new(label.to_owned()).render(area, buf);
    let label_width = u16::try_from(label.chars().count()).unwrap_or(u16::MAX);
    let spark = Rect {
        x: area.x.saturating_add(label_width).min(area.right()),
        width: u16::try_from(data.len())
            .unwrap_or(u16::MAX)
            .min(area.width.saturating_sub(label_width)),
        ..area
    };
    Sparkline::default()
        .data(data)
        .style(Style::new().fg(Color::Cyan))
        .render(spark, buf);
    let rest = Rect {
        x: spark.right(),
        width: area.right().saturating_sub(spark.right()),
        ..area
    };
    Paragraph::new(fit_line(Line::from(after), usize::from(rest.width))).render(rest, buf);
}
