//! How times, statuses, durations and keys are written in cells.

use std::time::{Duration, UNIX_EPOCH};

use ratatui::style::{Color, Style};

/// `2026-11-30 02:45:00.123` (with the date) or `02:45:00`, in UTC.
pub fn timestamp(ms: i64, with_date: bool) -> String {
    let time = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    let text = humantime::format_rfc3339_millis(time).to_string();
    // "2026-11-30T02:45:00.123Z"
    if with_date {
        text.trim_end_matches('Z').replacen('T', " ", 1)
    } else {
        text.get(11..19).unwrap_or_default().to_owned()
    }
}

/// `11-30 02:45:00`: month, day and time, in UTC.
pub fn short_timestamp(ms: i64) -> String {
    let full = timestamp(ms, true);
    full.get(5..19).unwrap_or_default().to_owned()
}

/// Colour of a status by class; red for a delivery that got no answer.
pub fn status_style(status: Option<u16>) -> Style {
    let color = match status {
        None => Color::Red,
        Some(s) if s >= 500 => Color::Red,
        Some(s) if s >= 400 => Color::Yellow,
        Some(s) if s >= 300 => Color::Cyan,
        Some(_) => Color::Green,
    };
    Style::new().fg(color)
}

/// `14 ms`, `1.2 s`, or `…` while in flight.
pub fn duration(ms: Option<f64>) -> String {
    match ms {
        None => "…".to_owned(),
        Some(ms) if ms < 10.0 => format!("{ms:.1} ms"),
        Some(ms) if ms < 1000.0 => format!("{ms:.0} ms"),
        Some(ms) => format!("{:.1} s", ms / 1000.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_read_well() {
        assert_eq!(timestamp(1_764_470_701_234, true), "2025-11-30 02:45:01.234");
        assert_eq!(timestamp(1_764_470_701_234, false), "02:45:01");
        assert_eq!(short_timestamp(1_764_470_701_234), "11-30 02:45:01");
        assert_eq!(duration(Some(3.25)), "3.2 ms");
        assert_eq!(duration(Some(14.4)), "14 ms");
        assert_eq!(duration(Some(1234.0)), "1.2 s");
    }
}
