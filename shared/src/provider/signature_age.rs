//! How old a recorded signature is. Some providers sign a timestamp, and
//! their SDKs refuse a request signed longer ago than a tolerance: a replay
//! sent as recorded then fails for a reason that has nothing to do with the
//! handler's logic. Facts: `providers.md`, "Signatures", column "freshness".

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::{header, Provider};
use crate::message::Header;

/// How old a signature the provider's SDK still accepts may be; `None` for
/// providers that sign no timestamp or whose SDKs check none.
pub fn signature_tolerance(provider: Provider) -> Option<Duration> {
    let secs = match provider {
        Provider::Stripe | Provider::Slack | Provider::StandardWebhooks | Provider::Gitlab => 300,
        // Its SDKs allow 5 s: only a request signed just before it is sent passes.
        Provider::Paddle => 5,
        Provider::Linear => 60,
        Provider::Mailgun => 900,
        Provider::Github
        | Provider::Shopify
        | Provider::Square
        | Provider::Twilio
        | Provider::Discord
        | Provider::Sendgrid => return None,
    };
    Some(Duration::from_secs(secs))
}

/// When the request was signed, read from the timestamp its signature
/// covers; `None` when the provider signs none or the request carries none.
pub fn signed_at(provider: Provider, headers: &[Header], body: &[u8]) -> Option<SystemTime> {
    let secs = match provider {
        Provider::Stripe => param(header(headers, "stripe-signature")?, ',', "t")?,
        Provider::Paddle => param(header(headers, "paddle-signature")?, ';', "ts")?,
        Provider::Slack => number(header(headers, "x-slack-request-timestamp")?)?,
        Provider::StandardWebhooks | Provider::Gitlab => {
            number(header(headers, "webhook-timestamp").or_else(|| header(headers, "svix-timestamp"))?)?
        }
        Provider::Linear => {
            let millis = body_field(body, "/webhookTimestamp")?;
            return UNIX_EPOCH.checked_add(Duration::from_millis(millis));
        }
        Provider::Mailgun => body_field(body, "/signature/timestamp")?,
        _ => return None,
    };
    // Checked: the number comes from the request, and a huge one must not panic.
    UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

/// `name=value` among `separator`-separated pairs, as a number.
fn param(value: &[u8], separator: char, name: &str) -> Option<u64> {
    let text = std::str::from_utf8(value).ok()?;
    text.split(separator).find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        (key == name).then(|| value.trim().parse().ok()).flatten()
    })
}

fn number(value: &[u8]) -> Option<u64> {
    std::str::from_utf8(value).ok()?.trim().parse().ok()
}

/// A JSON body field holding a number, or a string of one (Mailgun's).
fn body_field(body: &[u8], pointer: &str) -> Option<u64> {
    let doc: Value = serde_json::from_slice(body).ok()?;
    match doc.pointer(pointer)? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::resign;
    use crate::provider::test_vectors::{at, headers, mailgun_body, text, vector};

    /// Signs a vector's request at `when` and reads the time back.
    fn signed_then_read(provider: Provider, name: &str, when: SystemTime) -> Option<SystemTime> {
        let v = vector(name);
        let mut h = if v["headers"].is_object() {
            headers(&v["headers"])
        } else {
            Vec::new()
        };
        let mut body = match name {
            "mailgun" => mailgun_body(&v["body_signature"]),
            _ => text(v, "body").as_bytes().to_vec(),
        };
        resign(provider, text(v, "secret"), &mut h, &mut body, when, None).unwrap();
        signed_at(provider, &h, &body)
    }

    #[test]
    fn the_signed_time_is_the_time_a_signer_put_in() {
        let when = at(1_800_000_000);
        for (provider, name) in [
            (Provider::Stripe, "stripe"),
            (Provider::Slack, "slack"),
            (Provider::StandardWebhooks, "standard_webhooks"),
            (Provider::Paddle, "paddle"),
            (Provider::Linear, "linear"),
            (Provider::Mailgun, "mailgun"),
        ] {
            assert_eq!(signed_then_read(provider, name, when), Some(when), "{name}");
            assert!(signature_tolerance(provider).is_some(), "{name}");
        }
    }

    #[test]
    fn recorded_vectors_read_as_recorded() {
        let stripe = headers(&vector("stripe")["headers"]);
        assert_eq!(signed_at(Provider::Stripe, &stripe, b""), Some(at(1_700_000_000)));
        let svix = headers(&vector("standard_webhooks")["svix_headers"]);
        assert_eq!(signed_at(Provider::Gitlab, &svix, b""), Some(at(1_700_000_000)));
    }

    #[test]
    fn providers_without_a_signed_time_have_no_age() {
        let github = vec![Header::new("x-hub-signature-256", "sha256=00")];
        assert_eq!(signed_at(Provider::Github, &github, b"{}"), None);
        assert_eq!(signature_tolerance(Provider::Github), None);
        assert_eq!(signature_tolerance(Provider::Discord), None);
        let garbled = vec![Header::new("stripe-signature", "t=soon,v1=00")];
        assert_eq!(signed_at(Provider::Stripe, &garbled, b""), None);
        assert_eq!(signed_at(Provider::Linear, &[], b"not json"), None);
        let absurd = vec![Header::new("x-slack-request-timestamp", u64::MAX.to_string())];
        assert_eq!(signed_at(Provider::Slack, &absurd, b""), None);
    }
}
