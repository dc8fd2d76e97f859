//! The warning for a plain replay of a signature its provider no longer
//! accepts: the handler refuses every attempt, and without a word from us
//! that looks like a bug in the handler rather than a missing `--resign`.

use std::time::{Duration, SystemTime};

use portpreview_shared::provider::{signature_tolerance, signed_at, Provider};
use portpreview_shared::Header;

use crate::config::SecretFrom;

/// "the stripe signature is 3 h old; stripe accepts 5 min: pass --resign …",
/// or `None` when the signature is fresh enough or has no time in it.
/// `found` is where the secret `--resign` would sign with is, when known.
pub fn stale_signature(
    provider: Provider,
    headers: &[Header],
    body: &[u8],
    now: SystemTime,
    found: Option<&SecretFrom>,
) -> Option<String> {
    let age = signature_too_old(provider, headers, body, now)?;
    Some(format!(
        "{age}: {}, or a handler that checks signatures refuses every attempt",
        resign_advice(provider, found)
    ))
}

/// What to do about a signature a replay would send stale or void. The
/// secret is named here, so following the advice needs no second try; one
/// already `found` is named as the one `--resign` signs with, as the flag
/// is then all that is missing.
pub fn resign_advice(provider: Provider, found: Option<&SecretFrom>) -> String {
    if let Some(from) = found {
        return format!("pass --resign to sign with the {provider} secret from {from}");
    }
    format!(
        "pass --resign (it signs with --secret, {}, PORTPREVIEW_SECRET or {} in the config file's [secrets])",
        crate::config::secret_env(provider),
        provider.name()
    )
}

/// "the stripe signature is 3 h old; stripe accepts 5 min", or `None` when
/// the signature is fresh enough or has no time in it.
pub fn signature_too_old(provider: Provider, headers: &[Header], body: &[u8], now: SystemTime) -> Option<String> {
    let tolerance = signature_tolerance(provider)?;
    let age = now.duration_since(signed_at(provider, headers, body)?).ok()?;
    if age <= tolerance {
        return None;
    }
    // Rounded alike ("5 min old; accepts 5 min"), the two read as no
    // problem at all: then both are given in seconds.
    let (age, tolerance) = match (rough(age), rough(tolerance)) {
        (a, t) if a == t => (format!("{} s", age.as_secs()), format!("{} s", tolerance.as_secs())),
        pair => pair,
    };
    Some(format!(
        "the {provider} signature is {age} old; {provider} accepts {tolerance}"
    ))
}

/// A duration, rounded down, in a unit that keeps the number readable:
/// "5 s", "5 min", "3 h", "412 days".
fn rough(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0..120 => format!("{secs} s"),
        120..7_200 => format!("{} min", secs / 60),
        7_200..172_800 => format!("{} h", secs / 3_600),
        _ => format!("{} days", secs / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn stripe_signed_at(secs: u64) -> Vec<Header> {
        vec![Header::new("stripe-signature", format!("t={secs},v1=00"))]
    }

    #[test]
    fn an_old_stripe_signature_is_named_with_its_age_and_the_tolerance() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000 + 3 * 3_600 + 120);
        let warning = stale_signature(Provider::Stripe, &stripe_signed_at(1_700_000_000), b"{}", now, None).unwrap();
        assert_eq!(
            warning,
            "the stripe signature is 3 h old; stripe accepts 5 min: pass --resign (it signs with --secret, \
             PORTPREVIEW_SECRET_STRIPE, PORTPREVIEW_SECRET or stripe in the config file's [secrets]), or a handler that checks signatures refuses every attempt"
        );
    }

    #[test]
    fn an_age_just_past_the_tolerance_is_told_in_seconds() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_351);
        let warning = stale_signature(Provider::Stripe, &stripe_signed_at(1_700_000_000), b"{}", now, None).unwrap();
        assert!(
            warning.starts_with("the stripe signature is 351 s old; stripe accepts 300 s:"),
            "{warning}"
        );
    }

    #[test]
    fn a_fresh_or_timeless_signature_says_nothing() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_100);
        assert_eq!(
            stale_signature(Provider::Stripe, &stripe_signed_at(1_700_000_000), b"", now, None),
            None
        );
        let github = vec![Header::new("x-hub-signature-256", "sha256=00")];
        assert_eq!(stale_signature(Provider::Github, &github, b"{}", now, None), None);
        // Signed "in the future" by a skewed clock: not stale.
        assert_eq!(
            stale_signature(Provider::Stripe, &stripe_signed_at(1_800_000_000), b"", now, None),
            None
        );
    }

    #[test]
    fn paddle_allows_seconds_and_slack_minutes() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_009);
        let paddle = vec![Header::new("paddle-signature", "ts=1700000000;h1=00")];
        let warning = stale_signature(Provider::Paddle, &paddle, b"", now, None).unwrap();
        assert!(
            warning.starts_with("the paddle signature is 9 s old; paddle accepts 5 s"),
            "{warning}"
        );
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000 + 2 * 86_400);
        let slack = vec![Header::new("x-slack-request-timestamp", "1700000000")];
        let warning = stale_signature(Provider::Slack, &slack, b"", now, None).unwrap();
        assert!(
            warning.starts_with("the slack signature is 2 days old; slack accepts 5 min"),
            "{warning}"
        );
    }
}
