//! The values of `history --status` and `--since`.

use std::time::Duration;

use portpreview_shared::duration::format_duration;

use crate::store::StatusWord;
use crate::time::{parse_duration_within, parse_time_ms, rfc3339_ms, A_DURATION};

/// One `--status` value: the TUI filter's status words, refused when it
/// is none, which the filter would take for text to search.
pub fn parse_status(text: &str) -> Result<StatusWord, String> {
    StatusWord::parse(text.trim())
        .ok_or_else(|| "expected a status (404), a class of statuses (5xx), or error for no answer".to_string())
}

/// A filter's value, refused when blank, `give` saying what to give: an
/// unset variable (`--type "$TYPE"`) would otherwise match nothing, or
/// everything, and say only that.
pub fn not_blank(text: &str, give: &str) -> Result<String, String> {
    match text.trim().is_empty() {
        true => Err(format!("is empty: give {give}")),
        false => Ok(text.to_owned()),
    }
}

/// A `--type` value.
pub fn parse_type(text: &str) -> Result<String, String> {
    not_blank(
        text,
        "an event type (invoice.paid, or invoice for every invoice.…) or a glob ('invoice.*')",
    )
}

/// A `--path` value.
pub fn parse_path_glob(text: &str) -> Result<String, String> {
    not_blank(text, "a path (/webhooks/stripe) or a glob ('/webhooks/*')")
}

/// Where `--since` starts the listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// This long before the command ran: `30m`, `2h`, `7d`.
    Ago(Duration),
    /// This time, in milliseconds since the epoch: a `received_at` copied
    /// from `history --json`, a time with its offset, or a date.
    At(i64),
}

impl Since {
    /// The earliest time listed, in milliseconds since the epoch, when it
    /// is `now_ms`.
    pub fn start_ms(self, now_ms: i64) -> i64 {
        match self {
            Self::Ago(span) => now_ms.saturating_sub(i64::try_from(span.as_millis()).unwrap_or(i64::MAX)),
            Self::At(ms) => ms,
        }
    }
}

impl std::fmt::Display for Since {
    /// As given, written the short way: `2h`, `2026-01-01T09:30:00.000Z`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Ago(span) => f.write_str(&format_duration(*span)),
            Self::At(ms) => f.write_str(&rfc3339_ms(*ms)),
        }
    }
}

/// A `--since` value: a time when it begins as a date does (`2026-`), a
/// duration otherwise, each refused in its own words.
pub fn parse_since(text: &str) -> Result<Since, String> {
    let text = text.trim();
    let dated = text.len() > 4 && text.as_bytes()[..4].iter().all(u8::is_ascii_digit) && text.as_bytes()[4] == b'-';
    // Every refusal names both forms: a value that is neither may have
    // been meant as either.
    let expected = format!(
        "a duration ({A_DURATION}), a time (2026-01-01T09:30:00Z, or with its offset: \
         2026-01-01T10:30:00+01:00) or a date (2026-01-01, from its midnight UTC)"
    );
    if !dated {
        // A word (`yesterday`) is neither; a number with a bad unit, or
        // a minus, is told in the duration's own words.
        let number = text.strip_prefix('-').unwrap_or(text);
        return match number.starts_with(|c: char| c.is_ascii_digit()) {
            true => parse_duration_within(text, Duration::MAX, &expected).map(Since::Ago),
            false => Err(format!("expected {expected}")),
        };
    }
    parse_time_ms(text)
        .map(Since::At)
        .ok_or_else(|| format!("expected {expected}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_values_are_the_filters_words_and_nothing_else() {
        assert_eq!(parse_status(" 5XX"), Ok(StatusWord::Class(5)));
        assert_eq!(parse_status("err"), Ok(StatusWord::Failed));
        for bad in ["", "600", "ok", "4x"] {
            let why = parse_status(bad).unwrap_err();
            assert!(why.contains("a class of statuses (5xx)"), "{bad:?}: {why}");
        }
    }

    #[test]
    fn since_takes_a_duration_or_a_time_as_json_writes_it() {
        assert_eq!(parse_since("2h"), Ok(Since::Ago(Duration::from_secs(7200))));
        assert_eq!(parse_since("7days"), Ok(Since::Ago(Duration::from_secs(7 * 86_400))));
        let at = parse_since("2023-11-14T22:14:20.000Z").unwrap();
        assert_eq!(at, Since::At(1_700_000_060_000));
        assert_eq!(at.to_string(), "2023-11-14T22:14:20.000Z");
        assert_eq!(
            parse_since("2023-11-14T23:14:20+01:00"),
            Ok(at),
            "an offset is taken to UTC"
        );
        assert_eq!(
            parse_since("2023-11-14").unwrap().to_string(),
            "2023-11-14T00:00:00.000Z",
            "a date is its midnight in UTC"
        );
        assert_eq!(
            parse_since("120m").unwrap().to_string(),
            "2h",
            "written back the short way"
        );
    }

    #[test]
    fn a_bad_since_is_refused_in_the_words_of_what_it_looks_like() {
        assert_eq!(
            parse_since("5").unwrap_err(),
            "5 has no unit: write 5ms, 5s, 5m, 5h, 5d or 5w"
        );
        for time in [
            "2026-01-01T09:30:00",
            "2026-01-01T09:30:00+1",
            "2026-02-30",
            "2026-13-01T00:00:00Z",
            "yesterday",
            "10x",
        ] {
            let why = parse_since(time).unwrap_err();
            assert!(
                why == "expected a duration (a number and a unit, like 300ms, 1s or 2m), a time \
                        (2026-01-01T09:30:00Z, or with its offset: 2026-01-01T10:30:00+01:00) or a date (2026-01-01, \
                        from its midnight UTC)",
                "{time}: {why}"
            );
        }
        assert_eq!(
            parse_since("-1s").unwrap_err(),
            "durations are never negative: write 1s",
            "as every duration flag says it"
        );
    }

    #[test]
    fn since_starts_that_long_before_now_or_at_its_time() {
        let now = 1_700_000_000_000;
        assert_eq!(Since::Ago(Duration::from_secs(60)).start_ms(now), now - 60_000);
        assert_eq!(Since::At(5).start_ms(now), 5);
        assert!(
            Since::Ago(Duration::MAX).start_ms(now) < 0,
            "longer than any history: all of it"
        );
    }
}
