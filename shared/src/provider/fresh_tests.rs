use serde_json::Value;

use super::*;
use crate::provider::event_key;
use crate::provider::test_vectors::{headers, mailgun_body, twilio_form, vector};

fn vector_request(name: &str) -> (Vec<Header>, Vec<u8>) {
    let v = vector(name);
    (
        headers(&v["headers"]),
        v["body"].as_str().unwrap_or("{}").as_bytes().to_vec(),
    )
}

/// Gives the request a fresh identity twice and checks each is new, is
/// what `event_key` now reads, and left everything else alone.
fn assert_fresh(provider: Provider, mut h: Vec<Header>, mut body: Vec<u8>) -> (Vec<Header>, Vec<u8>) {
    let old = event_key(&h, &body, &[]);
    assert_eq!(old.provider, Some(provider));
    let (old_h, old_body) = (h.clone(), body.clone());
    let first = fresh_identity(Some(provider), &mut h, &mut body, None).unwrap();
    let after = event_key(&h, &body, &[]);
    assert_eq!(after.key, first, "{provider}");
    assert_eq!(after.source, old.source, "{provider}");
    assert_ne!(first, old.key, "{provider}");
    let second = fresh_identity(Some(provider), &mut h.clone(), &mut body.clone(), None).unwrap();
    assert_ne!(second, first, "{provider}");
    // Header order and the rest of a JSON body are kept.
    let names = |h: &[Header]| h.iter().map(|h| h.name.to_ascii_lowercase()).collect::<Vec<_>>();
    assert_eq!(names(&h)[..old_h.len()], names(&old_h)[..], "{provider}");
    assert!(body.len().abs_diff(old_body.len()) < 64, "{provider}");
    (h, body)
}

fn changed_lines(old: &[u8], new: &[u8]) -> Value {
    let a: Value = serde_json::from_slice(old).unwrap();
    let b: Value = serde_json::from_slice(new).unwrap();
    let (Value::Object(a), Value::Object(b)) = (a, b) else {
        panic!("objects")
    };
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "key order kept"
    );
    Value::Array(
        a.iter()
            .filter(|(k, v)| b[k.as_str()] != **v)
            .map(|(k, _)| Value::String(k.clone()))
            .collect(),
    )
}

#[test]
fn stripe_gets_a_new_evt_id_and_nothing_else_changes() {
    let (h, body) = vector_request("stripe");
    let (_, new_body) = assert_fresh(Provider::Stripe, h, body.clone());
    assert_eq!(changed_lines(&body, &new_body), serde_json::json!(["id"]));
    let id = event_key(&[Header::new("stripe-signature", "")], &new_body, &[]).key;
    assert!(id.starts_with("evt_") && id.len() == 28, "{id}");
    // Only the ID's bytes changed: the body is spliced, not re-serialized.
    let old = String::from_utf8(body).unwrap();
    assert_eq!(
        String::from_utf8(new_body).unwrap(),
        old.replace("evt_1PortPreviewTest", &id)
    );
}

#[test]
fn header_keyed_providers_get_new_header_ids() {
    let (h, _) = assert_fresh(Provider::Github, vector_request("github").0, b"{}".to_vec());
    assert_eq!(header(&h, "x-github-delivery").unwrap().len(), 36);
    let (h, _) = assert_fresh(Provider::Shopify, vector_request("shopify").0, b"{}".to_vec());
    assert_ne!(
        header(&h, "x-shopify-event-id").unwrap(),
        b"98880550-7158-44d4-b7cd-2c97c8a091b5"
    );
    let events_webhook = vec![
        Header::new("shopify-topic", "orders/create"),
        Header::new("shopify-event-id", "e-1"),
    ];
    let (h, _) = assert_fresh(Provider::Shopify, events_webhook, b"{}".to_vec());
    assert!(
        header(&h, "x-shopify-webhook-id").is_none() && header(&h, "shopify-webhook-id").is_none(),
        "known by its event ID alone, it gets no webhook ID"
    );
    let (h, _) = assert_fresh(
        Provider::StandardWebhooks,
        vector_request("standard_webhooks").0,
        b"{}".to_vec(),
    );
    assert!(header(&h, "webhook-id").unwrap().starts_with(b"msg_"));
    let svix = headers(&vector("standard_webhooks")["svix_headers"]);
    let (h, _) = assert_fresh(Provider::StandardWebhooks, svix, b"{}".to_vec());
    assert!(header(&h, "webhook-id").is_none(), "the svix family stays svix");
    let (h, _) = assert_fresh(Provider::Linear, vector_request("linear").0, b"{}".to_vec());
    assert_eq!(header(&h, "linear-delivery").unwrap().len(), 36);
    let (h, _) = assert_fresh(
        Provider::Gitlab,
        vector_request("gitlab_signing_token").0,
        b"{}".to_vec(),
    );
    assert_eq!(
        header(&h, "idempotency-key"),
        header(&h, "webhook-id"),
        "GitLab sends one ID in both"
    );
}

#[test]
fn body_keyed_providers_get_new_body_ids() {
    let (_, body) = assert_fresh(Provider::Slack, vector_request("slack").0, vector_request("slack").1);
    assert_eq!(
        changed_lines(vector_request("slack").1.as_slice(), &body),
        serde_json::json!(["event_id"])
    );
    let (_, body) = assert_fresh(Provider::Paddle, vector_request("paddle").0, vector_request("paddle").1);
    assert_eq!(
        changed_lines(vector_request("paddle").1.as_slice(), &body),
        serde_json::json!(["event_id", "notification_id"])
    );
    assert_fresh(Provider::Square, vector_request("square").0, vector_request("square").1);
    let discord = vector("discord_test_keypair");
    let (_, body) = assert_fresh(
        Provider::Discord,
        headers(&discord["headers"]),
        discord["body"].as_str().unwrap().into(),
    );
    let id: Value = serde_json::from_slice(&body).unwrap();
    assert!(id["id"].as_str().unwrap().bytes().all(|b| b.is_ascii_digit()));
    let (_, body) = assert_fresh(
        Provider::Mailgun,
        Vec::new(),
        mailgun_body(&vector("mailgun")["body_signature"]),
    );
    let old: Value = serde_json::from_slice(&mailgun_body(&vector("mailgun")["body_signature"])).unwrap();
    let new: Value = serde_json::from_slice(&body).unwrap();
    assert_ne!(
        old["signature"]["token"], new["signature"]["token"],
        "a replay guard remembers tokens"
    );
    let sig = vec![Header::new("x-twilio-email-event-webhook-signature", "x")];
    let (_, body) = assert_fresh(
        Provider::Sendgrid,
        sig,
        br#"[{"sg_event_id":"a","event":"open"},{"sg_event_id":"b"}]"#.to_vec(),
    );
    let events: Value = serde_json::from_slice(&body).unwrap();
    assert!(events[1]["sg_event_id"] != "b" && events[0]["sg_event_id"] != events[1]["sg_event_id"]);
}

#[test]
fn a_fresh_identity_is_no_retry() {
    let (mut slack, slack_body) = vector_request("slack");
    slack.push(Header::new("X-Slack-Retry-Num", "1"));
    slack.push(Header::new("X-Slack-Retry-Reason", "http_timeout"));
    let (mut square, square_body) = vector_request("square");
    square.push(Header::new("square-retry-number", "2"));
    square.push(Header::new("square-retry-reason", "http_error"));
    for (provider, h, body, field) in [
        (Provider::Slack, &slack, &slack_body, None),
        (Provider::Square, &square, &square_body, None),
        // Named by hand, the identity is just as new.
        (Provider::Slack, &slack, &slack_body, Some("/event_id")),
    ] {
        let (mut h, mut body) = (h.clone(), body.clone());
        let kept = h.len() - 2;
        fresh_identity(Some(provider), &mut h, &mut body, field).unwrap();
        let names: Vec<&str> = h.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names.len(), kept, "{provider} {field:?}: {names:?}");
        assert!(
            names.iter().all(|n| !n.to_ascii_lowercase().contains("retry")),
            "{names:?}"
        );
    }
}

#[test]
fn twilio_gets_new_sids_and_token() {
    let sig = headers(&vector("twilio")["headers"]);
    let (_, body) = assert_fresh(Provider::Twilio, sig.clone(), twilio_form());
    let text = String::from_utf8(body).unwrap();
    assert!(
        !text.contains("CallSid=CA1234567890ABCDE") && text.contains("CallSid=CA"),
        "{text}"
    );
    let mut with_token = sig;
    with_token.push(Header::new("i-twilio-idempotency-token", "tok-1"));
    let (h, _) = assert_fresh(Provider::Twilio, with_token, b"MessageSid=SM1x&SmsSid=SM1x".to_vec());
    assert_ne!(header(&h, "i-twilio-idempotency-token"), Some(b"tok-1".as_slice()));
}

/// A handler deduping on the event's ID and on the payment's sees a new
/// event only when both are new; the key is still the event's.
#[test]
fn fresh_field_is_renewed_beside_the_providers_own_id() {
    let (mut h, mut body) = vector_request("stripe");
    let old: Value = serde_json::from_slice(&body).unwrap();
    let new = fresh_identity(Some(Provider::Stripe), &mut h, &mut body, Some("/data/object/id")).unwrap();
    let doc: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(doc["id"], new.as_str());
    assert!(new.starts_with("evt_") && new != "evt_1PortPreviewTest", "{new}");
    let payment = doc["data"]["object"]["id"].as_str().unwrap();
    assert!(
        payment.starts_with("pi_") && payment != old["data"]["object"]["id"],
        "{payment}"
    );

    // Where the provider keeps no ID, the field is the identity.
    let mut slash = vec![Header::new("x-slack-signature", "v0=aa")];
    let mut form = b"command=%2Fpay&trigger_id=13345224609.738474920.8088930838d88f008e0".to_vec();
    let new = fresh_identity(Some(Provider::Slack), &mut slash, &mut form, Some("form:trigger_id")).unwrap();
    assert!(String::from_utf8(form).unwrap().ends_with(&format!("trigger_id={new}")));

    let mut h = vec![Header::new("x-request-id", "72d3162e-cc78-11e3-81ab-4c9367dc0958")];
    let new = fresh_identity(None, &mut h, &mut body, Some("header:X-Request-Id")).unwrap();
    assert_eq!(header(&h, "x-request-id"), Some(new.as_bytes()));
    assert_eq!(h.len(), 1);

    let mut numeric = br#"{"n": 820982911946154508}"#.to_vec();
    let new = fresh_identity(None, &mut Vec::new(), &mut numeric, Some("/n")).unwrap();
    assert_eq!(numeric, format!(r#"{{"n": {new}}}"#).into_bytes());
}

#[test]
fn a_form_field_is_renewed_in_place() {
    // A Slack slash command: no event ID, but a trigger_id per invocation.
    let mut body =
        b"token=gIkuvaNz&command=%2Fweather&text=94070&trigger_id=13345224609.738474920.8088930838d88f008e0".to_vec();
    let new = fresh_identity(
        Some(Provider::Slack),
        &mut Vec::new(),
        &mut body,
        Some("form:trigger_id"),
    )
    .unwrap();
    assert_ne!(new, "13345224609.738474920.8088930838d88f008e0");
    let text = String::from_utf8(body).unwrap();
    assert_eq!(
        text,
        format!(
            "token=gIkuvaNz&command=%2Fweather&text=94070&trigger_id={}",
            super::form::encode(&new)
        )
    );
    let err = fresh_identity(None, &mut Vec::new(), &mut b"{\"a\":1}".to_vec(), Some("form:a")).unwrap_err();
    assert!(err.to_string().ends_with("the body is not form-encoded"), "{err}");
    let err = fresh_identity(None, &mut Vec::new(), &mut b"a=1".to_vec(), Some("form:b")).unwrap_err();
    assert!(err.to_string().ends_with("the body has no such field"), "{err}");
    let err = fresh_identity(None, &mut Vec::new(), &mut b"a=1".to_vec(), Some("form:")).unwrap_err();
    assert!(err.to_string().contains("expected a JSON pointer"), "{err}");
    let mut slack_action = b"payload=%7B%22type%22%3A%22block_actions%22%7D".to_vec();
    let err = fresh_identity(None, &mut Vec::new(), &mut slack_action, Some("form:payload")).unwrap_err();
    assert!(
        err.to_string().ends_with("that field holds a JSON document, not an ID"),
        "{err}"
    );
    // A one-digit ID renewed as one digit would come round again.
    let mut short = b"a=1".to_vec();
    let new = fresh_identity(None, &mut Vec::new(), &mut short, Some("form:a")).unwrap();
    assert_eq!(new.len(), 6, "{new}");
}

#[test]
fn errors_say_what_to_do() {
    let err = fresh_identity(None, &mut Vec::new(), &mut b"{}".to_vec(), None).unwrap_err();
    assert!(err.to_string().contains("--fresh-field"), "{err}");
    let err = fresh_identity(
        Some(Provider::Slack),
        &mut Vec::new(),
        &mut b"command=%2Fx".to_vec(),
        None,
    )
    .unwrap_err();
    assert_eq!(err.to_string(), format!("cannot give this event a fresh identity: this slack request has no /event_id in its body; {FRESH_FIELD_HINT}"));
    // A body the event key reads its ID from, but no strict parser takes.
    let err = fresh_identity(
        Some(Provider::Stripe),
        &mut Vec::new(),
        &mut b"{\"id\":\"evt_1\",\"note\":\"a\tb\"}".to_vec(),
        None,
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("this stripe request's body is not valid JSON (a raw control character in a string"),
        "{err}"
    );
    let mut body = br#"{"a":{"b":1}}"#.to_vec();
    let cases = [
        ("a/b", "expected a JSON pointer"),
        ("/c", "no such field"),
        ("/a", "an object"),
        ("header:", "expected a JSON pointer"),
        ("header:X-Event-Id", "the request has no such header"),
    ];
    for (field, expected) in cases {
        let err = fresh_identity(None, &mut Vec::new(), &mut body, Some(field)).unwrap_err();
        assert!(err.to_string().contains(expected), "{field}: {err}");
    }
    let err = fresh_identity(None, &mut Vec::new(), &mut b"x=1".to_vec(), Some("/x")).unwrap_err();
    assert!(matches!(err, FreshError::NotJson(_)));
    assert_eq!(body, br#"{"a":{"b":1}}"#);
}

/// A request keyed by its content, not by the ID header its provider
/// sends (a GitLab hook from before Idempotency-Key, a Linear delivery
/// without Linear-Delivery), gets no header added: its handler dedups on
/// something else. Without a field that is refused; with one, the field
/// is the new identity and the header stays out.
#[test]
fn a_header_id_the_request_lacks_is_not_added() {
    let gitlab = || {
        vec![
            Header::new("X-Gitlab-Event", "Push Hook"),
            Header::new("X-Gitlab-Webhook-UUID", "u-1"),
        ]
    };
    let err = fresh_identity(Some(Provider::Gitlab), &mut gitlab(), &mut b"{}".to_vec(), None).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "cannot give this event a fresh identity: this gitlab request carries no Idempotency-Key header, the ID \
             its handler dedups on; {FRESH_FIELD_HINT}"
        )
    );
    let linear = || vec![Header::new("Linear-Event", "Issue")];
    let body = br#"{"action":"update","type":"Issue","data":{"id":"iss_9","updatedAt":"2024-01-01T00:00:00Z"}}"#;
    let err = fresh_identity(Some(Provider::Linear), &mut linear(), &mut body.to_vec(), None).unwrap_err();
    assert!(err.to_string().contains("carries no Linear-Delivery header"), "{err}");
    let (mut h, mut fresh_body) = (linear(), body.to_vec());
    let key = fresh_identity(Some(Provider::Linear), &mut h, &mut fresh_body, Some("/data/id")).unwrap();
    assert_eq!(h, linear(), "no Linear-Delivery added");
    let renewed: Value = serde_json::from_slice(&fresh_body).unwrap();
    assert_eq!(renewed["data"]["id"], key.as_str());
    assert_eq!(
        fresh_key_source(Some(Provider::Linear), &h, &fresh_body, Some("/data/id")).as_deref(),
        Some("body:/data/id")
    );
}

/// The key a fresh identity gets is named for where it came from: the
/// provider's own ID, else the field renewed, never the recorded source
/// (a `sha256:body` key of a sender nobody recognised).
#[test]
fn a_fresh_key_names_where_it_came_from() {
    let (stripe_headers, stripe_body) = vector_request("stripe");
    assert_eq!(
        fresh_key_source(
            Some(Provider::Stripe),
            &stripe_headers,
            &stripe_body,
            Some("/data/object/id")
        ),
        Some("body:/id".to_owned())
    );
    let body = br#"{"id":"ord_1","amount":100}"#;
    let custom = [Header::new("x-delivery", "d_1")];
    for (field, source) in [
        ("/id", "body:/id"),
        ("header:X-Delivery", "header:X-Delivery"),
        ("form:trigger_id", "form:trigger_id"),
    ] {
        assert_eq!(
            fresh_key_source(None, &custom, body, Some(field)).as_deref(),
            Some(source)
        );
    }
    assert_eq!(fresh_key_source(None, &custom, body, None), None);
}

/// JSON nested past the 128 levels serde reads is valid all the same, and
/// the event key finds its ID: a fresh identity is made for it too, in
/// place, by the provider's field or by `--fresh-field`.
#[test]
fn a_body_nested_past_what_serde_reads_gets_a_fresh_identity() {
    let depth = 200;
    let deep = format!(
        r#"{{"id":"evt_Deep","object":"event","data":{}1{}}}"#,
        r#"{"a":"#.repeat(depth),
        "}".repeat(depth)
    );
    let mut body = deep.clone().into_bytes();
    let new = fresh_identity(Some(Provider::Stripe), &mut Vec::new(), &mut body, None).expect("renewed");
    assert_ne!(new, "evt_Deep");
    assert_eq!(String::from_utf8(body).unwrap(), deep.replace("evt_Deep", &new));

    let mut body = deep.clone().into_bytes();
    let new = fresh_identity(None, &mut Vec::new(), &mut body, Some("/id")).expect("renewed");
    assert_eq!(String::from_utf8(body).unwrap(), deep.replace("evt_Deep", &new));
    let mut body = deep.into_bytes();
    let err = fresh_identity(None, &mut Vec::new(), &mut body, Some("/data")).unwrap_err();
    assert!(err.to_string().contains("that field holds an object"), "{err}");
}
