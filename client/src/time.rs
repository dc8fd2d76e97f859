//! Timestamps: milliseconds since the epoch as the store keeps them, RFC 3339
//! and ordinals as users read them.

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

/// Every unit a duration is written in, and how long it is.
const UNITS: [(&str, Duration); 5] = [
    ("ms", Duration::from_millis(1)),
    ("s", Duration::from_secs(1)),
    ("m", Duration::from_secs(60)),
    ("h", Duration::from_secs(3600)),
    ("d", Duration::from_secs(86_400)),
];

/// What a duration looks like, in the words every refusal of one uses.
pub const A_DURATION: &str = "a number and a unit, like 300ms, 1s or 2m";

/// Parses a duration written as PortPreview writes them (`300ms`, `1s`,
/// `2m`, `7d`); longer spellings such as `7days` are accepted too. Every
/// duration flag and suite key reads through here, so a bad one is
/// refused in the same words everywhere, not in humantime's (whose unit
/// list names months, which are refused).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    parse_duration_within(text, Duration::MAX, A_DURATION)
}

/// [`parse_duration`] for a value that may be at most `max` long: a bare
/// number is told only the units that keep it within, so that the hint
/// does not suggest what the flag then refuses. `expected` says what the
/// value may be when it is no duration at all (`--since` takes a time
/// too); the caller refuses a duration over `max` in its own words.
pub fn parse_duration_within(text: &str, max: Duration, expected: &str) -> Result<Duration, String> {
    // A bare number has no unit, `0` included (which humantime takes).
    if let Some(why) = no_unit(text, &UNITS.map(|(unit, _)| unit), max) {
        return Err(why);
    }
    let text = text.trim();
    // humantime has no word for a minus; "expected a number" would not
    // say what is wrong with `-1d`.
    if let Some(positive) = text
        .strip_prefix('-')
        .filter(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
    {
        return Err(match parse_duration_within(positive, max, A_DURATION) {
            Ok(duration) if duration <= max => format!("durations are never negative: write {positive}"),
            _ => format!("durations are never negative: write {A_DURATION}"),
        });
    }
    match read_duration(text) {
        Ok(duration) => Ok(duration),
        Err(months) if months == NO_MONTHS => Err(months),
        // `1S`, `1mS`: humantime reads units in lowercase only.
        _ if text.chars().any(char::is_uppercase) && read_duration(&text.to_lowercase()).is_ok() => {
            Err(format!("units are written in lowercase: {}", text.to_lowercase()))
        }
        _ if matches!(
            humantime::parse_duration(text),
            Err(humantime::DurationError::NumberOverflow)
        ) =>
        {
            Err(format!("{text} is longer than any duration PortPreview can count"))
        }
        _ => Err(format!("expected {expected}")),
    }
}

/// Why a bare number (`5`) is no duration, naming the `units` it could
/// take without being longer than `max`: `None` for anything else.
pub fn no_unit(text: &str, units: &[&str], max: Duration) -> Option<String> {
    let number = text.trim();
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // A number past u64 is too long in any unit.
    let count = number.parse::<u128>().unwrap_or(u128::MAX);
    let written: Vec<String> = UNITS
        .iter()
        .filter(|(unit, size)| units.contains(unit) && size.as_millis().saturating_mul(count) <= max.as_millis())
        .map(|(unit, _)| format!("{number}{unit}"))
        .collect();
    Some(match written.split_last() {
        Some((last, [])) => format!("{number} has no unit: write {last}"),
        Some((last, rest)) => format!("{number} has no unit: write {} or {last}", rest.join(", ")),
        None => format!("{number} has no unit: write {A_DURATION}"),
    })
}

/// Why a duration in months is refused.
const NO_MONTHS: &str =
    "M would be months, easily taken for m (minutes) or ms: write minutes and milliseconds in lowercase, and months as days, like 30d";

/// humantime's reading of a duration, without months (`M`, `month`): `M`
/// is months to humantime, a step from `m`, minutes. One slip of the
/// shift key, and `prune --older-than 1M` would keep a month instead of a
/// minute, or `--timeout 1M` wait a month.
fn read_duration(text: &str) -> Result<Duration, String> {
    if text.contains('M') || text.to_ascii_lowercase().contains("month") {
        return Err(NO_MONTHS.to_string());
    }
    humantime::parse_duration(text).map_err(|err| err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn durations_parse_short_and_long_spellings() {
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_duration("7days"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_duration("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(
            parse_duration("18446744073709551615ms"),
            Err("18446744073709551615ms is longer than any duration PortPreview can count".into())
        );
        assert!(parse_duration("1M").unwrap_err().contains("30d"));
        assert!(parse_duration("2months").unwrap_err().contains("30d"));
        for bad in ["5x", "soon", ""] {
            assert_eq!(
                parse_duration(bad),
                Err("expected a number and a unit, like 300ms, 1s or 2m".to_string()),
                "{bad}"
            );
        }
        assert_eq!(
            parse_duration("7"),
            Err("7 has no unit: write 7ms, 7s, 7m, 7h or 7d".to_string())
        );
        assert_eq!(
            parse_duration("0").unwrap_err(),
            "0 has no unit: write 0ms, 0s, 0m, 0h or 0d"
        );
        assert_eq!(
            parse_duration("1mS"),
            Err("units are written in lowercase: 1ms".to_string())
        );
        assert_eq!(
            parse_duration("2S"),
            Err("units are written in lowercase: 2s".to_string())
        );
    }

    /// `--timeout 5` must not be told to write `5d`, which it refuses.
    #[test]
    fn a_bare_number_is_told_only_the_units_that_keep_it_within_the_limit() {
        let day = Duration::from_secs(86_400);
        let within = |text: &str| parse_duration_within(text, day, A_DURATION).unwrap_err();
        assert_eq!(within("1"), "1 has no unit: write 1ms, 1s, 1m, 1h or 1d");
        assert_eq!(within("5"), "5 has no unit: write 5ms, 5s, 5m or 5h");
        assert_eq!(within("90000"), "90000 has no unit: write 90000ms");
        assert_eq!(
            within("100000000"),
            "100000000 has no unit: write a number and a unit, like 300ms, 1s or 2m"
        );
        assert_eq!(
            within("99999999999999999999999999999999999999999"),
            "99999999999999999999999999999999999999999 has no unit: write a number and a unit, like 300ms, 1s or 2m"
        );
    }

    /// `-1d` is told what is wrong with it, by every duration flag alike.
    #[test]
    fn a_negative_duration_is_refused_as_negative() {
        assert_eq!(
            parse_duration("-1d"),
            Err("durations are never negative: write 1d".into())
        );
        assert_eq!(
            parse_duration(" -300ms"),
            Err("durations are never negative: write 300ms".into())
        );
        assert_eq!(
            parse_duration("-5"),
            Err("durations are never negative: write a number and a unit, like 300ms, 1s or 2m".into())
        );
        assert_eq!(
            parse_duration("-x"),
            Err("expected a number and a unit, like 300ms, 1s or 2m".into())
        );
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
