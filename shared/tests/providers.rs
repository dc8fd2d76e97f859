//! The provider API as the recorder and the replay engine use it: facts
//! for the verdict, keys for history, masking, and robustness on any input.

use std::time::{Duration, SystemTime};

use portpreview_shared::provider::{
    detect, event_key, fresh_identity, header, is_sensitive_header, resign, signed_at, Provider,
};
use portpreview_shared::Header;
use proptest::prelude::*;
use serde_json::{json, Value};

#[test]
fn names_round_trip_and_svix_is_standard_webhooks() {
    let names: Vec<&str> = Provider::ALL.iter().map(|p| p.name()).collect();
    assert_eq!(
        names,
        [
            "stripe",
            "github",
            "shopify",
            "slack",
            "standard-webhooks",
            "twilio",
            "discord",
            "paddle",
            "square",
            "gitlab",
            "linear",
            "mailgun",
            "sendgrid"
        ]
    );
    for p in Provider::ALL {
        assert_eq!(Provider::from_name(p.name()), Some(p));
        assert_eq!(p.to_string(), p.name());
        assert!(
            p.id_location()
                .is_some_and(|l| l.starts_with("header ") || l.starts_with("body ")),
            "{p}"
        );
    }
    assert_eq!(Provider::from_name("svix"), Some(Provider::StandardWebhooks));
    assert_eq!(Provider::from_name("Stripe"), Some(Provider::Stripe));
    assert_eq!(Provider::from_name("paypal"), None);
}

#[test]
fn timeouts_and_retry_windows_follow_providers_md() {
    let secs = |p: Provider| p.answer_within().map(|d| d.as_secs());
    assert_eq!(secs(Provider::Stripe), Some(30));
    assert_eq!((secs(Provider::Slack), secs(Provider::Discord)), (Some(3), Some(3)));
    assert_eq!(
        (secs(Provider::Shopify), secs(Provider::Paddle), secs(Provider::Linear)),
        (Some(5), Some(5), Some(5))
    );
    assert_eq!(
        (secs(Provider::Github), secs(Provider::Square), secs(Provider::Gitlab)),
        (Some(10), Some(10), Some(10))
    );
    assert_eq!(
        (secs(Provider::StandardWebhooks), secs(Provider::Twilio)),
        (Some(15), Some(15))
    );
    assert!(Provider::Github.retry_window().starts_with("none by itself"));
    assert!(Provider::Stripe.retry_window().contains("3 days") && Provider::Stripe.retry_window().contains("30 (CLI)"));
    assert!(Provider::Shopify.retry_window().contains("4 hours"));
    let day = Duration::from_secs(86_400);
    assert_eq!(
        Provider::Stripe.retry_window_duration(),
        Some(30 * day),
        "a CLI resend, 30 days on"
    );
    assert!(Provider::StandardWebhooks
        .retry_window_duration()
        .is_some_and(|d| d > day && d < 2 * day));
    assert_eq!(Provider::Discord.retry_window_duration(), None);
    for p in Provider::ALL {
        assert!(!p.retry_window().is_empty() && !p.retry_window().contains('\n'), "{p}");
    }
}

#[test]
fn secrets_and_signatures_are_masked() {
    for name in [
        "Authorization",
        "cookie",
        "Set-Cookie",
        "proxy-authorization",
        "Stripe-Signature",
        "x-hub-signature",
        "X-Hub-Signature-256",
        "x-gitlab-token",
        "svix-signature",
        "x-signature-ed25519",
        "X-Api-Key",
        "x-auth-token",
        "X-Webhook-Secret",
        "x-acme-signature",
        "X-Amz-Security-Token",
        "x-private-key",
        "cookie2",
        "X-Authorization",
        "Authentication",
        "x-auth-key",
        "PayPal-Transmission-Sig",
        "X-Hmac-Sha256",
        "X-Trello-Webhook",
    ] {
        assert!(is_sensitive_header(name), "{name}");
    }
    for name in [
        "content-type",
        "x-github-delivery",
        "webhook-id",
        "user-agent",
        "i-twilio-idempotency-token",
        "x-signature-timestamp",
        "paypal-transmission-id",
        "x-author",
    ] {
        assert!(!is_sensitive_header(name), "{name}");
    }
}

#[test]
fn header_lookup_is_case_insensitive_and_takes_the_first() {
    let h = [Header::new("x-a", "1"), Header::new("X-A", "2")];
    assert_eq!(header(&h, "X-a"), Some(b"1".as_slice()));
    assert_eq!(header(&h, "x-b"), None);
}

/// A webhook that reaches the recorder, is replayed with a fresh identity
/// and re-signed: every step agrees with the next.
#[test]
fn stripe_delivery_keyed_freshened_and_resigned() {
    let secret = "whsec_story";
    let mut headers = vec![
        Header::new("content-type", "application/json"),
        Header::new("stripe-signature", "t=1,v1=00"),
        Header::new("user-agent", "Stripe/1.0"),
    ];
    let mut body =
        serde_json::to_vec(&json!({"id": "evt_story", "type": "invoice.paid", "data": {"object": {"id": "in_1"}}}))
            .unwrap();
    let first = event_key(&headers, &body, &[]);
    assert_eq!(
        (first.provider, first.key.as_str(), first.source.as_str()),
        (Some(Provider::Stripe), "evt_story", "body:/id")
    );

    let fresh = fresh_identity(first.provider, &mut headers, &mut body, None).unwrap();
    resign(
        Provider::Stripe,
        secret,
        &mut headers,
        &mut body,
        SystemTime::now(),
        None,
    )
    .unwrap();
    let again = event_key(&headers, &body, &[]);
    assert_eq!(again.key, fresh);
    assert_ne!(again.key, first.key);
    assert_eq!(headers[1].name, "stripe-signature", "signature replaced in place");
    assert_ne!(headers[1].value, b"t=1,v1=00");
}

fn json_body() -> impl Strategy<Value = Vec<u8>> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<i64>().prop_map(Value::from),
        "[ -~]{0,12}".prop_map(Value::String)
    ];
    let value = leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("id".to_owned()),
                        Just("event_id".to_owned()),
                        Just("signature".to_owned()),
                        Just("event-data".to_owned()),
                        Just("sg_event_id".to_owned()),
                        Just("token".to_owned()),
                        Just("webhookTimestamp".to_owned()),
                        "[a-z]{1,4}".prop_map(String::from)
                    ],
                    inner
                ),
                0..5
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    });
    prop_oneof![
        value.prop_map(|v| serde_json::to_vec(&v).unwrap()),
        prop::collection::vec(any::<u8>(), 0..48),
        "[A-Za-z=&%+0-9]{0,40}".prop_map(String::into_bytes)
    ]
}

const NAMES: &[&str] = &[
    "stripe-signature",
    "x-slack-request-timestamp",
    "webhook-timestamp",
    "x-github-event",
    "x-github-delivery",
    "x-shopify-topic",
    "x-slack-signature",
    "webhook-id",
    "svix-id",
    "x-twilio-signature",
    "x-signature-ed25519",
    "paddle-signature",
    "square-environment",
    "x-gitlab-event",
    "idempotency-key",
    "linear-event",
    "x-twilio-email-event-webhook-signature",
    "i-twilio-idempotency-token",
];

proptest! {
    /// What the fuzz target checks, on the stable toolchain.
    #[test]
    fn any_request_is_handled_without_panicking(
        picks in prop::collection::vec((0..NAMES.len(), prop::collection::vec(any::<u8>(), 0..12)), 0..4),
        mut body in json_body(),
        fresh_field in prop::option::of(prop_oneof![Just("/id".to_owned()), Just("header:X-Id".to_owned()), "[ -~]{0,8}".prop_map(String::from)]),
    ) {
        let mut headers: Vec<Header> = picks.into_iter().map(|(i, v)| Header::new(NAMES[i], v)).collect();
        let provider = detect(&headers, &body);
        for p in Provider::ALL {
            let _ = signed_at(p, &headers, &body);
        }
        let key = event_key(&headers, &body, &["id".to_owned(), "/data/id".to_owned()]);
        prop_assert_eq!(key.provider, provider);
        prop_assert!(key.key.len() <= 256);
        prop_assert_eq!(key.key.is_empty(), key.source == "none");
        if let Ok(new_key) = fresh_identity(provider, &mut headers, &mut body, fresh_field.as_deref()) {
            prop_assert!(!new_key.is_empty());
        }
        if let Some(p) = provider {
            let _ = resign(p, "whsec_AAECAwQ=", &mut headers, &mut body, SystemTime::now(), Some("https://example.com/h"));
        }
    }
}
