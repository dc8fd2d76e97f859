//! Durations as PortPreview writes them everywhere, in what the relay
//! answers callers as in what the client prints (`300ms`, `1s`, `2m`,
//! `7d`), and as users write them, read in the same words for every flag
//! and suite key of relay and client that takes one.

use std::time::Duration;

/// A duration as PortPreview writes them: a whole number of the largest
/// unit that fits exactly (`300ms`, `1s`, `90s`, `2m`, `36h`, `7d`).
pub fn format_duration(duration: Duration) -> String {
    const UNITS: [(u128, &str); 4] = [(86_400_000, "d"), (3_600_000, "h"), (60_000, "m"), (1_000, "s")];
    let ms = duration.as_millis();
    if duration.is_zero() {
        return "0s".into();
    }
    if !duration.as_nanos().is_multiple_of(1_000_000) {
        return format!("{}µs", duration.as_micros());
    }
    UNITS
        .iter()
        .find(|(size, _)| ms >= *size && ms.is_multiple_of(*size))
        .map_or_else(|| format!("{ms}ms"), |(size, unit)| format!("{}{unit}", ms / size))
}

/// Every unit a duration is written in, and how long it is.
const UNITS: [(&str, Duration); 6] = [
    ("ms", Duration::from_millis(1)),
    ("s", Duration::from_secs(1)),
    ("m", Duration::from_secs(60)),
    ("h", Duration::from_secs(3600)),
    ("d", Duration::from_secs(86_400)),
    ("w", Duration::from_secs(7 * 86_400)),
];

/// What a duration looks like, in the words every refusal of one uses.
pub const A_DURATION: &str = "a number and a unit, like 300ms, 1s or 2m";

/// Parses a duration written as PortPreview writes them (`300ms`, `1s`,
/// `2m`, `7d`, `4w`); longer spellings such as `7days` are accepted too. Every
/// duration flag and suite key reads through here, so a bad one is
/// refused in the same words everywhere, not in humantime's (whose unit
/// list names months, which are refused).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    parse_duration_within(text, Duration::MAX, A_DURATION)
}

/// The longest wait any flag of relay or client takes (a timeout, a
/// grace period): a day, past any webhook sender's patience. The relay
/// adds its waits to the clock and multiplies the answer timeout for
/// uploads, far from overflowing either.
pub const MAX_WAIT: Duration = Duration::from_secs(24 * 60 * 60);

/// A wait (a timeout, a grace period) written `300ms`, `30s`, `2m`: zero
/// is refused, since nothing is done in no time, and so are less than 1ms
/// and more than [`MAX_WAIT`]. Reasons leave the value out, as clap and
/// the suite file name it beside them.
pub fn parse_wait(text: &str) -> Result<Duration, String> {
    let duration = nonzero_reading(text, MAX_WAIT)?;
    if duration.is_zero() {
        return Err("no time at all: give a duration like 300ms or 30s".to_string());
    }
    if duration < Duration::from_millis(1) {
        return Err("shorter than 1ms: give a duration like 300ms or 30s".to_string());
    }
    if duration > MAX_WAIT {
        return Err("longer than a day: give a duration like 30s or 5m".to_string());
    }
    Ok(duration)
}

/// `text` read as a duration for a flag that refuses zero and more than
/// `max`: a bare `0` reads as zero, to be refused as no time at all, not
/// told to take a unit, which would suggest `0ms`.
pub fn nonzero_reading(text: &str, max: Duration) -> Result<Duration, String> {
    match is_bare_zero(text) {
        true => Ok(Duration::ZERO),
        false => parse_duration_within(text, max, A_DURATION),
    }
}

/// Whether `text` is a bare zero (`0`, `00`).
pub fn is_bare_zero(text: &str) -> bool {
    let text = text.trim();
    !text.is_empty() && text.bytes().all(|b| b == b'0')
}

/// A duration with the words to say it back in: `prune --older-than 4w`
/// reports "older than 4w", not the "28d" that formatting the duration
/// gives, while a long spelling (`168hours`) is said the short way (`7d`).
#[derive(Debug, Clone, PartialEq)]
pub struct WrittenDuration {
    /// How long it is.
    pub duration: Duration,
    /// How to say it back.
    pub written: String,
}

/// An age, as `prune --older-than` takes one: [`parse_duration`], with
/// examples of ages where it is refused, keeping the text when it is
/// already written the short way.
pub fn parse_age(text: &str) -> Result<WrittenDuration, String> {
    let duration = parse_duration_within(text, Duration::MAX, "a number and a unit, like 12h, 7d or 4w")?;
    let text = text.trim();
    let written = match written_short(text) {
        true => text.to_string(),
        false => format_duration(duration),
    };
    Ok(WrittenDuration { duration, written })
}

/// Whether `text` is numbers each followed by a unit's short name, with
/// nothing between: `4w`, `2w3d`, `1h30m`.
fn written_short(mut text: &str) -> bool {
    if text.is_empty() {
        return false;
    }
    while !text.is_empty() {
        let digits = text.bytes().take_while(u8::is_ascii_digit).count();
        let rest = &text[digits..];
        let letters = rest.bytes().take_while(u8::is_ascii_lowercase).count();
        // A year too: `prune --older-than 1y` reads back as written.
        let unit = &rest[..letters];
        if digits == 0 || !(unit == "y" || UNITS.iter().any(|(short, _)| unit == *short)) {
            return false;
        }
        text = &rest[letters..];
    }
    true
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
    fn timeouts_are_durations_longer_than_nothing() {
        assert_eq!(parse_wait("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(parse_wait("30s"), Ok(Duration::from_secs(30)));
        assert!(parse_wait("0s").is_err());
        assert!(parse_wait("soon").is_err());
        // Not "write 0ms", which is refused in turn.
        assert_eq!(
            parse_wait("0"),
            Err("no time at all: give a duration like 300ms or 30s".to_string())
        );
        assert!(parse_wait("1ns").unwrap_err().starts_with("shorter than 1ms"));
        assert_eq!(parse_wait("1ms"), Ok(Duration::from_millis(1)));
        assert!(parse_wait("1M").unwrap_err().contains("months as days, like 30d"));
        assert_eq!(parse_wait("1d"), Ok(Duration::from_secs(86_400)));
        // Not "write 5d", which is refused in turn.
        assert_eq!(
            parse_wait("5"),
            Err("5 has no unit: write 5ms, 5s, 5m or 5h".to_string())
        );
        assert_eq!(
            parse_wait("30000000000000d"),
            Err("longer than a day: give a duration like 30s or 5m".to_string())
        );
    }

    #[test]
    fn durations_are_written_the_short_way() {
        let shown: Vec<String> = [
            Duration::from_millis(300),
            Duration::from_secs(1),
            Duration::from_millis(1_500),
            Duration::from_secs(90),
            Duration::from_secs(120),
            Duration::from_secs(36 * 3600),
            Duration::from_secs(7 * 86_400),
            Duration::ZERO,
        ]
        .into_iter()
        .map(format_duration)
        .collect();
        assert_eq!(shown, ["300ms", "1s", "1500ms", "90s", "2m", "36h", "7d", "0s"]);
    }

    #[test]
    fn durations_are_said_back_as_written_when_written_short() {
        let said = |text| parse_age(text).map(|d| d.written);
        assert_eq!(said("4w"), Ok("4w".to_string()));
        assert_eq!(said(" 90s "), Ok("90s".to_string()));
        assert_eq!(said("168hours"), Ok("7d".to_string()));
        assert_eq!(said("1h30m"), Ok("1h30m".to_string()));
        assert_eq!(said("2w3d"), Ok("2w3d".to_string()));
        assert_eq!(said("1y"), Ok("1y".to_string()));
        assert_eq!(said("1h 30m"), Ok("90m".to_string()));
        assert_eq!(said("90mins"), Ok("90m".to_string()));
        assert_eq!(parse_age("4w").map(|d| d.duration), parse_duration("28d"));
        assert!(parse_age("4").is_err());
        assert_eq!(
            parse_age("7x").unwrap_err(),
            "expected a number and a unit, like 12h, 7d or 4w"
        );
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
            Err("7 has no unit: write 7ms, 7s, 7m, 7h, 7d or 7w".to_string())
        );
        assert_eq!(
            parse_duration("0").unwrap_err(),
            "0 has no unit: write 0ms, 0s, 0m, 0h, 0d or 0w"
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
}
