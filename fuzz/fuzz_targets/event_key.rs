//! Provider bodies and headers come straight from the internet: detection,
//! event keys, signature ages, fresh identities and re-signing must take
//! any of them.
#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use libfuzzer_sys::fuzz_target;
use portpreview_shared::provider::{detect, event_key, fresh_identity, resign, signed_at, Provider};
use portpreview_shared::Header;

/// Header names providers use, so the fuzzer reaches every provider's path
/// without having to guess them.
const NAMES: &[&str] = &[
    "stripe-signature",
    "x-github-event",
    "x-github-delivery",
    "x-shopify-hmac-sha256",
    "x-shopify-webhook-id",
    "x-slack-signature",
    "x-slack-request-timestamp",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "svix-id",
    "x-twilio-signature",
    "i-twilio-idempotency-token",
    "x-signature-ed25519",
    "paddle-signature",
    "x-square-hmacsha256-signature",
    "x-gitlab-event",
    "idempotency-key",
    "linear-signature",
    "linear-delivery",
    "x-twilio-email-event-webhook-signature",
    "user-agent",
];

/// A header: an index into [`NAMES`] (or, past its end, the free name), and a value.
type RawHeader = (u8, String, Vec<u8>);

/// Headers, body, `--key-fields` and `--fresh-field`.
type Input = (Vec<RawHeader>, Vec<u8>, Vec<String>, Option<String>);

fuzz_target!(|input: Input| {
    let (raw_headers, mut body, key_fields, fresh_field) = input;
    let mut headers: Vec<Header> = raw_headers
        .into_iter()
        .map(|(pick, name, value)| match NAMES.get(usize::from(pick)) {
            Some(known) => Header::new(*known, value),
            None => Header::new(name, value),
        })
        .collect();
    let provider = detect(&headers, &body);
    let key = event_key(&headers, &body, &key_fields);
    assert_eq!(key.provider, provider);
    assert!(key.key.len() <= 256);
    assert_eq!(key.key.is_empty(), key.source == "none");
    assert!(Provider::ALL.iter().all(|p| Provider::from_name(p.name()) == Some(*p)));
    for p in Provider::ALL {
        let _ = signed_at(p, &headers, &body);
    }

    if fresh_identity(provider, &mut headers, &mut body, fresh_field.as_deref()).is_ok() {
        let fresh = event_key(&headers, &body, &[]);
        assert_eq!(fresh.key.is_empty(), fresh.source == "none");
    }
    if let Some(provider) = provider {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let _ = resign(
            provider,
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            &mut headers,
            &mut body,
            now,
            Some("https://example.com/hook"),
        );
    }
});
