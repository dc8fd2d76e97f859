//! Timestamps: milliseconds since the epoch as the store keeps them, RFC 3339
//! and ordinals as users read them; durations as users write them.

pub use portpreview_shared::duration::{
    is_bare_zero, no_unit, nonzero_reading, parse_age, parse_duration, parse_duration_within, parse_wait,
    WrittenDuration, A_DURATION, MAX_WAIT,
};

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the epoch as RFC 3339 UTC with milliseconds; the bare
/// number when it is past what RFC 3339 can write (year 9999), as a damaged
/// or hand-edited history may hold.
pub fn rfc3339_ms(ms: i64) -> String {
    use std::fmt::Write as _;
    let at = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    let mut text = String::new();
    match write!(text, "{}", humantime::format_rfc3339_millis(at)) {
        Ok(()) => text,
        Err(_) => ms.to_string(),
    }
}

/// A delivery's time to its answer as a list shows it: `0.4 ms`, `14 ms`,
/// `1.2 s`, from milliseconds. Tenths below 10 ms, where a local handler's
/// answers fall and a whole number would read `0 ms`. Written where it
/// goes: a line is written for every delivery.
#[derive(Debug, Clone, Copy)]
pub struct ShortDuration(pub f64);

impl From<std::time::Duration> for ShortDuration {
    fn from(duration: std::time::Duration) -> Self {
        Self(duration.as_secs_f64() * 1000.0)
    }
}

impl std::fmt::Display for ShortDuration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = self.0;
        // Bounds as the figure rounds: 9.96 reads 10 ms, and 999.7 reads 1.0 s.
        if ms < 9.95 {
            write!(f, "{ms:.1} ms")
        } else if ms < 999.5 {
            write!(f, "{ms:.0} ms")
        } else {
            write!(f, "{:.1} s", ms / 1000.0)
        }
    }
}

/// `12.0 ms`, or `3.00 s` from a second on: a delivery's time to its
/// answer where one delivery is shown whole (`show`, the TUI's detail), to
/// the tenth of a millisecond where that can matter and never as
/// thousands of them.
pub fn elapsed(ms: f64) -> String {
    // The bound as the figure rounds: 999.96 would read `1000.0 ms`.
    if ms < 999.95 {
        format!("{ms:.1} ms")
    } else {
        format!("{:.2} s", ms / 1000.0)
    }
}

/// RFC 3339 UTC text (`2026-01-01T00:00:00.000Z`, as [`rfc3339_ms`]
/// writes it) back to milliseconds since the epoch. A time without its
/// `Z` names no instant: it is refused, not taken as UTC.
pub fn parse_rfc3339_ms(text: &str) -> Option<i64> {
    let at = humantime::parse_rfc3339(text).ok()?;
    let since = at.duration_since(UNIX_EPOCH).ok()?;
    i64::try_from(since.as_millis()).ok()
}

/// A time as a user may write one, to milliseconds since the epoch: RFC
/// 3339 with `Z` or any offset (`2026-12-05T16:50:55+01:00`, taken to
/// UTC), or a date alone (`2026-12-05`), its midnight in UTC. `None` for
/// anything else, a time without an offset included, which names no
/// instant.
pub fn parse_time_ms(text: &str) -> Option<i64> {
    // RFC 3339 allows `t` and `z`; humantime reads capitals only.
    let text = text.trim().to_ascii_uppercase();
    if text.len() == "2026-12-05".len() {
        return parse_rfc3339_ms(&format!("{text}T00:00:00Z"));
    }
    let (local, offset_ms) = split_offset(&text)?;
    // Only digits and separators before the offset: `…Z+01:00` is not
    // read as a UTC time with an offset thrown in.
    if !local.bytes().all(|b| b.is_ascii_digit() || b"-:.T".contains(&b)) {
        return None;
    }
    parse_rfc3339_ms(&format!("{local}Z"))?.checked_sub(offset_ms)
}

/// A time's text before its offset, and the offset in milliseconds east
/// of UTC: `Z` is none, `+01:00` an hour.
fn split_offset(text: &str) -> Option<(&str, i64)> {
    if let Some(local) = text.strip_suffix('Z') {
        return Some((local, 0));
    }
    let at = text.len().checked_sub("+00:00".len())?;
    let (local, offset) = (text.get(..at)?, text.get(at..)?.as_bytes());
    let sign = match offset[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits = |pair: &[u8]| -> Option<i64> {
        match pair {
            [a @ b'0'..=b'9', b @ b'0'..=b'9'] => Some(i64::from((a - b'0') * 10 + (b - b'0'))),
            _ => None,
        }
    };
    let (hours, minutes) = (digits(&offset[1..3])?, digits(&offset[4..6])?);
    if offset[3] != b':' || hours > 23 || minutes > 59 {
        return None;
    }
    Some((local, sign * (hours * 60 + minutes) * 60_000))
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// "1st", "2nd", "3rd", "11th"…: which delivery of an event this was.
pub fn ordinal(n: i64) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// Milliseconds rounded to the microsecond, for JSON: a measured
/// `46.377326000000004` is printed `46.377`.
pub fn round_ms(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_delivery_shows_its_time_in_tenths_of_a_ms_or_in_seconds() {
        assert_eq!(elapsed(12.0), "12.0 ms");
        assert_eq!(elapsed(999.94), "999.9 ms");
        assert_eq!(elapsed(999.96), "1.00 s");
        assert_eq!(elapsed(3001.1), "3.00 s");
        assert_eq!(elapsed(4942.1), "4.94 s");
    }

    #[test]
    fn a_sub_millisecond_answer_is_not_shown_as_none() {
        let shown: Vec<String> = [0.331, 9.94, 9.96, 14.2, 999.4, 999.994, 1234.0]
            .map(|ms| ShortDuration(ms).to_string())
            .into();
        assert_eq!(
            shown,
            ["0.3 ms", "9.9 ms", "10 ms", "14 ms", "999 ms", "1.0 s", "1.2 s"]
        );
    }

    #[test]
    fn milliseconds_keep_three_decimals() {
        assert_eq!(
            serde_json::json!(round_ms(46.377_326_000_000_004)).to_string(),
            "46.377"
        );
        assert_eq!(
            serde_json::json!(round_ms(2_001.605_866_999_999_8)).to_string(),
            "2001.606"
        );
        assert_eq!(serde_json::json!(round_ms(14.0)).to_string(), "14.0");
    }

    #[test]
    fn timestamps_round_trip() {
        let text = rfc3339_ms(1_700_000_000_123);
        assert_eq!(text, "2023-11-14T22:13:20.123Z");
        assert_eq!(parse_rfc3339_ms(&text), Some(1_700_000_000_123));
        assert_eq!(parse_rfc3339_ms("yesterday"), None);
        assert_eq!(parse_rfc3339_ms("2023-11-14T22:13:20Z"), Some(1_700_000_000_000));
        assert_eq!(parse_rfc3339_ms("2023-11-14T22:13:20"), None, "no offset, no instant");
        assert_eq!(parse_rfc3339_ms("2023-11-14 22:13:20Z"), None);
    }

    #[test]
    fn a_time_is_read_with_any_offset_or_as_a_date_at_midnight_utc() {
        let utc = parse_time_ms("2026-12-05T15:50:55Z").unwrap();
        assert_eq!(parse_time_ms("2026-12-05T16:50:55+01:00"), Some(utc));
        assert_eq!(parse_time_ms("2026-12-05T10:20:55-05:30"), Some(utc));
        assert_eq!(parse_time_ms("2026-12-05t15:50:55.000z"), Some(utc));
        assert_eq!(parse_time_ms("2026-12-05T15:50:55-00:00"), Some(utc));
        assert_eq!(
            parse_time_ms("2026-12-05T16:50:55.250+01:00"),
            Some(utc + 250),
            "fractions before the offset"
        );
        assert_eq!(parse_time_ms("2026-12-05"), parse_time_ms("2026-12-05T00:00:00Z"));
        assert_eq!(
            rfc3339_ms(parse_time_ms("2026-12-05").unwrap()),
            "2026-12-05T00:00:00.000Z"
        );
        for bad in [
            "2026-12-05T16:50:55",
            "2026-12-05T16:50:55+1:00",
            "2026-12-05T16:50:55+24:00",
            "2026-12-05T16:50:55+01:60",
            "2026-12-05T16:50:55+0100",
            "2026-12-05T16:50:55Z+01:00",
            "2026-12-05T16:50+01:00",
            "2026-13-05",
            "2026-02-30",
            "2026-12-5",
            "2026-12-05T16:50:55+01:0\u{e9}",
            "",
        ] {
            assert_eq!(parse_time_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_time_past_year_9999_is_shown_as_its_number() {
        assert_eq!(rfc3339_ms(i64::MAX), i64::MAX.to_string());
        assert_eq!(rfc3339_ms(-5), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn ordinals() {
        let shown: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101].into_iter().map(ordinal).collect();
        assert_eq!(
            shown,
            ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st"]
        );
    }
}
