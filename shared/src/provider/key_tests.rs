use proptest::prelude::*;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::*;
use crate::provider::test_vectors::{headers, mailgun_body, twilio_form, vector};

fn key_of(name: &str, header_field: &str) -> EventKey {
    let v = vector(name);
    let body = v.get("body").and_then(Value::as_str).unwrap_or("{}");
    event_key(&headers(&v[header_field]), body.as_bytes(), &[])
}

fn expect(k: EventKey, provider: Provider, key: &str, source: &str) {
    assert_eq!(
        (k.provider, k.key.as_str(), k.source.as_str()),
        (Some(provider), key, source)
    );
}

#[test]
fn provider_ids_from_the_vectors() {
    expect(
        key_of("stripe", "headers"),
        Provider::Stripe,
        "evt_1PortPreviewTest",
        "body:/id",
    );
    expect(
        key_of("github", "headers"),
        Provider::Github,
        "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        "header:X-GitHub-Delivery",
    );
    expect(
        key_of("shopify", "headers"),
        Provider::Shopify,
        "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
        "header:X-Shopify-Webhook-Id",
    );
    expect(
        key_of("slack", "headers"),
        Provider::Slack,
        "Ev0PORTPREVIEW",
        "body:/event_id",
    );
    expect(
        key_of("standard_webhooks", "headers"),
        Provider::StandardWebhooks,
        "msg_2PortPreviewTest",
        "header:webhook-id",
    );
    expect(
        key_of("standard_webhooks", "svix_headers"),
        Provider::StandardWebhooks,
        "msg_2PortPreviewTest",
        "header:svix-id",
    );
    expect(
        key_of("paddle", "headers"),
        Provider::Paddle,
        "evt_01hv8x2acma2gz6he7tx1m1nxx",
        "body:/event_id",
    );
    expect(
        key_of("square", "headers"),
        Provider::Square,
        "6a8f5f28-54a1-4eb0-a98a-3111513fd4fc",
        "body:/event_id",
    );
    expect(
        key_of("linear", "headers"),
        Provider::Linear,
        "234d1a4e-b617-4388-90fe-adc3633d6b72",
        "header:Linear-Delivery",
    );
    expect(
        key_of("gitlab_signing_token", "headers"),
        Provider::Gitlab,
        "5a91c7d2-2f10-49c8-b0aa-c2f9e4d8a013",
        "header:Idempotency-Key",
    );
    expect(
        key_of("discord_test_keypair", "headers"),
        Provider::Discord,
        "1175540000000000000",
        "body:/id",
    );
}

#[test]
fn body_signed_and_batched_providers() {
    let mailgun = mailgun_body(&vector("mailgun")["body_signature"]);
    expect(
        event_key(&[], &mailgun, &[]),
        Provider::Mailgun,
        "CPgfbmQMTCKtHW6uIWtuVe",
        "body:/event-data/id",
    );
    let batch = br#"[{"sg_event_id":"first","event":"open"},{"sg_event_id":"second"}]"#;
    let sig = [Header::new("x-twilio-email-event-webhook-signature", "x")];
    expect(
        event_key(&sig, batch, &[]),
        Provider::Sendgrid,
        "first",
        "body:/0/sg_event_id",
    );
}

#[test]
fn twilio_token_else_sid_and_status() {
    let sig = headers(&vector("twilio")["headers"]);
    expect(
        event_key(&sig, &twilio_form(), &[]),
        Provider::Twilio,
        "CA1234567890ABCDE",
        "form:CallSid",
    );
    let status = b"MessageSid=SM1&MessageStatus=delivered&AccountSid=AC1";
    expect(
        event_key(&sig, status, &[]),
        Provider::Twilio,
        "SM1:delivered",
        "form:MessageSid+MessageStatus",
    );
    let mut with_token = sig.clone();
    with_token.push(Header::new("i-twilio-idempotency-token", "tok-1"));
    expect(
        event_key(&with_token, status, &[]),
        Provider::Twilio,
        "tok-1",
        "header:I-Twilio-Idempotency-Token",
    );
}

/// Bytes that are not UTF-8 all decode to one mark: SIDs or fields told
/// apart only by them would be one event. The content keys them instead,
/// and so it does a status no provider sends.
#[test]
fn form_values_that_are_not_utf8_or_fit_key_nothing() {
    let sig = headers(&vector("twilio")["headers"]);
    let keys: Vec<EventKey> = [
        &b"MessageSid=SM%FFx&MessageStatus=sent"[..],
        b"MessageSid=SM%FEx&MessageStatus=sent",
    ]
    .iter()
    .map(|body| event_key(&sig, body, &[]))
    .collect();
    assert_eq!(keys[0].source, "sha256:body");
    assert_ne!(keys[0].key, keys[1].key);
    let weird_status = event_key(&sig, b"MessageSid=SM1&MessageStatus=%1b%5b2J", &[]);
    assert_eq!(weird_status.source, "sha256:body");
    let no_status = event_key(&sig, b"MessageSid=SM1&MessageStatus=", &[]);
    assert_eq!(
        (no_status.key.as_str(), no_status.source.as_str()),
        ("SM1", "form:MessageSid")
    );

    let fields = ["order".to_string()];
    let by_field: Vec<EventKey> = [&b"order=%FF1"[..], b"order=%FE1"]
        .iter()
        .map(|body| event_key(&[], body, &fields))
        .collect();
    assert_eq!(by_field[0].source, "sha256:body");
    assert_ne!(by_field[0].key, by_field[1].key);
}

#[test]
fn a_stripe_event_posted_by_hand_keeps_its_event_id_as_key() {
    let v = vector("stripe");
    let body = v["body"].as_str().expect("the Stripe vector has a body");
    let curl = [
        Header::new("content-type", "application/json"),
        Header::new("user-agent", "curl/8.5.0"),
    ];
    expect(
        event_key(&curl, body.as_bytes(), &[]),
        Provider::Stripe,
        "evt_1PortPreviewTest",
        "body:/id",
    );
}

#[test]
fn github_key_is_exactly_the_delivery_id() {
    let mut h = headers(&vector("github")["headers"]);
    h.push(Header::new("x-github-hook-id", "123"));
    assert_eq!(event_key(&h, b"{}", &[]).key, "72d3162e-cc78-11e3-81ab-4c9367dc0958");
}

#[test]
fn only_githubs_hook_id_scopes_an_event_key() {
    let mut h = headers(&vector("github")["headers"]);
    assert_eq!(event_scope(Some(Provider::Github), &h), None, "no hook ID, no scope");
    h.push(Header::new("x-github-hook-id", " 123 "));
    assert_eq!(event_scope(Some(Provider::Github), &h).as_deref(), Some("123"));
    assert_eq!(event_scope(Some(Provider::Stripe), &h), None);
    assert_eq!(event_scope(None, &h), None);
    h.push(Header::new("x-github-hook-id", "a\x1b[2J"));
    h.retain(|header| header.value != b" 123 ");
    assert_eq!(
        event_scope(Some(Provider::Github), &h),
        None,
        "a control-laden hook ID is not trusted"
    );
}

/// GitLab makes a new `X-Gitlab-Webhook-UUID` for every request, a
/// retry's included: without `Idempotency-Key` a retry is known by its body.
#[test]
fn gitlab_without_an_idempotency_key_is_keyed_by_its_body_not_its_request_uuid() {
    let sent = |uuid: &str| {
        [
            Header::new("x-gitlab-event", "Push Hook"),
            Header::new("x-gitlab-webhook-uuid", uuid),
        ]
    };
    let body = br#"{"object_kind":"push","checkout_sha":"da15"}"#;
    let first = event_key(&sent("u-1"), body, &[]);
    let retry = event_key(&sent("u-2"), body, &[]);
    assert_eq!(first.provider, Some(Provider::Gitlab));
    assert_eq!(first.source, "sha256:body");
    assert_eq!(first.key, retry.key, "a retry is the same event");
    let keyed = [sent("u-3")[0].clone(), Header::new("idempotency-key", "k-1")];
    expect(
        event_key(&keyed, body, &[]),
        Provider::Gitlab,
        "k-1",
        "header:Idempotency-Key",
    );
}

/// A large event stored cut short keeps its provider ID when the start
/// holds it; a start without one is keyed by what was kept.
#[test]
fn a_body_cut_short_is_keyed_by_the_id_its_start_holds() {
    let stripe = [Header::new("stripe-signature", "t=1,v1=x")];
    let body = format!(
        r#"{{"id": "evt_big", "object": "event", "data": {{"lines": "{}"}}, "id_later": 1}}"#,
        "x".repeat(1000)
    );
    for cut_at in [40, 200, body.len() - 3] {
        expect(
            event_key_of_start(&stripe, &body.as_bytes()[..cut_at], &[]),
            Provider::Stripe,
            "evt_big",
            "body:/id",
        );
    }
    // The ID itself cut: no ID, and no trust in half of one.
    let half = event_key_of_start(&stripe, &body.as_bytes()[..12], &[]);
    assert_eq!(half.source, "sha256:body");
    // A whole body is read as before: a body that does not parse is not
    // searched as a start.
    assert_eq!(event_key(&stripe, &body.as_bytes()[..200], &[]).source, "sha256:body");
    // The last of a repeated ID before the cut, as for a whole body.
    let twice = br#"{"id": "evt_a", "id": "evt_b", "data": {"#;
    assert_eq!(event_key_of_start(&stripe, twice, &[]).key, "evt_b");
}

#[test]
fn shopify_without_its_webhook_id_is_keyed_by_its_event_id() {
    let h = [
        Header::new("x-shopify-topic", "orders/create"),
        Header::new("x-shopify-event-id", "e-1"),
    ];
    expect(
        event_key(&h, b"{}", &[]),
        Provider::Shopify,
        "e-1",
        "header:X-Shopify-Event-Id",
    );
    let both = [h[0].clone(), h[1].clone(), Header::new("x-shopify-webhook-id", "w-1")];
    expect(
        event_key(&both, b"{}", &[]),
        Provider::Shopify,
        "w-1",
        "header:X-Shopify-Webhook-Id",
    );
}

#[test]
fn linear_without_its_delivery_id_is_keyed_by_the_change_it_tells_of() {
    let linear = [Header::new("linear-signature", "x")];
    let change = |action: &str, at: u64| {
        let body = format!(
            r#"{{"type":"Issue","action":"{action}","data":{{"id":"iss-1","updatedAt":"2026-01-0{at}T00:00:00.000Z"}},"webhookTimestamp":{at}}}"#
        );
        event_key(&linear, body.as_bytes(), &[])
    };
    expect(
        change("update", 1),
        Provider::Linear,
        "Issue|update|iss-1|2026-01-01T00:00:00.000Z",
        "body:type|action|data.id|data.updatedAt",
    );
    assert!(change("update", 1).is_provider_id());
    assert_ne!(
        change("update", 1),
        change("update", 2),
        "a later update is another event"
    );
    assert_ne!(change("update", 1), change("remove", 1));
    let delivered = [linear[0].clone(), Header::new("linear-delivery", "d-1")];
    let body = br#"{"type":"Issue","action":"update","data":{"id":"iss-1","updatedAt":"t"}}"#;
    assert_eq!(event_key(&delivered, body, &[]).source, "header:Linear-Delivery");
}

#[test]
fn no_id_hashes_canonical_json_without_per_attempt_fields() {
    let linear = [Header::new("linear-signature", "x")];
    let a = event_key(
        &linear,
        br#"{"type":"Issue","data":{"id":"1"},"webhookTimestamp":1}"#,
        &[],
    );
    let b = event_key(
        &linear,
        br#"{ "webhookTimestamp": 2, "data": {"id": "1"}, "type": "Issue" }"#,
        &[],
    );
    assert_eq!(a, b);
    assert_eq!(a.source, "sha256:body");
    assert_eq!(a.key.len(), 64);
    let c = event_key(
        &linear,
        br#"{"type":"Issue","data":{"id":"2"},"webhookTimestamp":1}"#,
        &[],
    );
    assert_ne!(a.key, c.key);
    // The provider is part of what is hashed.
    let unknown = event_key(&[], br#"{"type":"Issue","data":{"id":"1"},"webhookTimestamp":1}"#, &[]);
    assert_eq!(unknown.provider, None);
    assert_ne!(unknown.key, a.key);
}

/// Numbers past what a 64-bit integer or float holds parse alike: they are
/// told apart as written, or two events would share one key.
#[test]
fn numbers_parsing_would_merge_keep_their_events_apart() {
    let order = |n: &str| event_key(&[], format!(r#"{{"order":{n},"type":"t"}}"#).as_bytes(), &[]).key;
    assert_ne!(
        order("123456789012345678901234567890"),
        order("123456789012345678901234567999")
    );
    assert_ne!(order("-9223372036854775809"), order("-9223372036854775810"));
    assert_ne!(order("0.30000000000000001"), order("0.3"));
    let laid_out_again = br#"{ "type": "t", "order": 123456789012345678901234567890 }"#;
    assert_eq!(
        order("123456789012345678901234567890"),
        event_key(&[], laid_out_again, &[]).key
    );
    // An ordinary body keeps the key it always had.
    assert_eq!(
        order("1.5"),
        hex::encode(Sha256::digest(b"unknown\n{\"order\":1.5,\"type\":\"t\"}"))
    );
    // A field that changes on every attempt changes nothing, however long its number.
    let sent_at = |t: &str| event_key(&[], format!(r#"{{"order":1,"sent_at":{t}}}"#).as_bytes(), &[]).key;
    assert_eq!(sent_at("1733450000.123456789123"), sent_at("1733450001.123456789123"));
    // An event's own time is part of what it is: two readings are two events.
    let reading = |t: &str| event_key(&[], format!(r#"{{"device":"t-1","timestamp":{t}}}"#).as_bytes(), &[]).key;
    assert_ne!(reading("1700000000"), reading("1700003600"));

    let fields = vec!["/order".to_owned()];
    let chosen =
        |n: &str, other: &str| event_key(&[], format!(r#"{{"order":{n},"other":{other}}}"#).as_bytes(), &fields).key;
    let big = "123456789012345678901234567890";
    assert_ne!(chosen(big, "1"), chosen("123456789012345678901234567999", "1"));
    assert_eq!(
        chosen(big, "1"),
        chosen(big, "99999999999999999999999"),
        "only the chosen field counts"
    );

    let stripe = [Header::new("stripe-signature", "t=1")];
    let id = event_key(&stripe, format!(r#"{{"id":{big}}}"#).as_bytes(), &[]);
    assert_eq!((id.key.as_str(), id.source.as_str()), (big, "body:/id"));
}

#[test]
fn mailgun_without_id_ignores_its_signature_object() {
    let a = br#"{"signature":{"timestamp":"1","token":"a","signature":"x"},"event-data":{"event":"opened"}}"#;
    let b = br#"{"signature":{"timestamp":"2","token":"b","signature":"y"},"event-data":{"event":"opened"}}"#;
    assert_eq!(event_key(&[], a, &[]), event_key(&[], b, &[]));
}

#[test]
fn non_json_body_hashes_its_senders_name_and_raw_bytes() {
    let body = b"\x00\xffnot json";
    let k = event_key(&[], body, &[]);
    assert_eq!(k.key, hex::encode(Sha256::digest(b"unknown\n\x00\xffnot json")));
    assert_eq!(k.source, "sha256:body");
}

/// Slack's retry of a form post is one event; the same bytes from GitHub,
/// or from a sender nobody recognised, are others.
#[test]
fn the_same_raw_bytes_from_two_senders_are_two_events() {
    let slack = [
        Header::new("x-slack-signature", "v0=aa"),
        Header::new("x-slack-request-timestamp", "1"),
    ];
    let github = [Header::new("x-github-event", "ping")];
    let body = b"\x00raw bytes";
    let keys = [&slack[..], &github[..], &[]].map(|h| {
        let k = event_key(h, body, &[]);
        assert_eq!(k.source, "sha256:body");
        k.key
    });
    assert_ne!(keys[0], keys[1]);
    assert_ne!(keys[0], keys[2]);
    assert_ne!(keys[1], keys[2]);
    assert_eq!(event_key(&slack, body, &[]).key, keys[0]);
}

#[test]
fn id_with_control_characters_is_not_trusted() {
    let h = [
        Header::new("x-github-event", "push"),
        Header::new("x-github-delivery", "a\x1b[2Jb"),
    ];
    assert_eq!(event_key(&h, b"{}", &[]).source, "sha256:body");
}

#[test]
fn oversized_id_is_not_trusted() {
    let body = json!({"id": "x".repeat(MAX_ID_LEN + 1)}).to_string();
    let k = event_key(&[Header::new("stripe-signature", "t=1")], body.as_bytes(), &[]);
    assert_eq!(k.source, "sha256:body");
}

#[test]
fn key_fields_hash_the_chosen_values() {
    let fields = vec!["type".to_owned(), "/data/object/id".to_owned()];
    let a = event_key(&[], br#"{"type":"x","n":1,"data":{"object":{"id":"o1"}}}"#, &fields);
    let b = event_key(&[], br#"{"data":{"object":{"id":"o1"}},"n":2,"type":"x"}"#, &fields);
    assert_eq!(a, b);
    assert_eq!(a.source, "sha256:fields(type,/data/object/id)");
    let expected = Sha256::digest(b"unknown\nfields\n{\"/data/object/id\":\"o1\",\"type\":\"x\"}");
    assert_eq!(a.key, hex::encode(expected));
    // The same fields from another provider are another event.
    let shopify = event_key(
        &[Header::new("x-shopify-topic", "orders/create")],
        br#"{"type":"x","data":{"object":{"id":"o1"}}}"#,
        &fields,
    );
    assert_eq!(shopify.provider, Some(Provider::Shopify));
    assert_eq!(shopify.source, a.source);
    assert_ne!(shopify.key, a.key, "providers are keyed apart");
    // The provider's own ID wins: chosen fields stand in only where there is none.
    let stripe = event_key(
        &[Header::new("stripe-signature", "t=1")],
        br#"{"id":"evt_1","type":"x"}"#,
        &fields,
    );
    assert_eq!(stripe.provider, Some(Provider::Stripe));
    assert_eq!((stripe.key.as_str(), stripe.source.as_str()), ("evt_1", "body:/id"));
}

/// A body that lacks one of the chosen fields is keyed by its content:
/// keyed by `type` alone, every `invoice.paid` would read as a retry.
#[test]
fn a_body_missing_a_chosen_field_is_keyed_by_its_content() {
    let fields = vec!["type".to_owned(), "/data/object/id".to_owned()];
    let a = event_key(&[], br#"{"type":"invoice.paid","invoice":"in_1"}"#, &fields);
    let b = event_key(&[], br#"{"type":"invoice.paid","invoice":"in_2"}"#, &fields);
    assert_eq!((a.source.as_str(), b.source.as_str()), ("sha256:body", "sha256:body"));
    assert_ne!(a.key, b.key);
    let form = vec!["user_id".to_owned(), "team_id".to_owned()];
    assert_eq!(event_key(&[], b"user_id=U1", &form).source, "sha256:body");
}

/// `data.object.id`, as providers' docs write a path, reaches the nested
/// member unless the body has a member by that very name.
#[test]
fn a_dotted_field_name_is_a_path_unless_a_member_has_that_name() {
    let dotted = vec!["data.id".to_owned()];
    let a = event_key(&[], br#"{"data":{"id":"d1"},"x":1}"#, &dotted);
    let b = event_key(&[], br#"{"data":{"id":"d1"},"x":2}"#, &dotted);
    assert_eq!(a.source, "sha256:fields(data.id)");
    assert_eq!(a.key, b.key, "one event, sent twice");
    let literal = event_key(&[], br#"{"data.id":"lit","data":{"id":"d1"}}"#, &dotted);
    let expected = Sha256::digest(b"unknown\nfields\n{\"data.id\":\"lit\"}");
    assert_eq!(literal.key, hex::encode(expected));
}

/// A field's value hashed is never the key of a body that is just that
/// field: a tunnel with `--key-fields` and one without may share a history.
#[test]
fn a_key_over_fields_is_never_a_key_over_a_body() {
    let fields = vec!["order".to_owned()];
    let by_field = event_key(&[], br#"{"order":5,"x":1}"#, &fields);
    let whole = event_key(&[], br#"{"order":5}"#, &[]);
    assert_eq!(
        (by_field.source.as_str(), whole.source.as_str()),
        ("sha256:fields(order)", "sha256:body")
    );
    assert_ne!(by_field.key, whole.key);
}

#[test]
fn the_fields_a_key_was_hashed_from_are_read_back_from_its_source() {
    let fields = vec!["type".to_owned(), "/data/object/id".to_owned()];
    let k = event_key(&[], br#"{"type":"x","data":{"object":{"id":"o1"}}}"#, &fields);
    assert_eq!(key_fields_of(&k.source), Some(fields));
    assert_eq!(key_fields_of("sha256:body"), None);
    assert_eq!(key_fields_of("body:/id"), None);
}

#[test]
fn key_fields_read_form_bodies() {
    let fields = vec!["user_id".to_owned()];
    let k = event_key(&[], b"user_id=U1&trigger_id=1", &fields);
    assert_eq!(k.source, "sha256:fields(user_id)");
    assert_eq!(k.key, event_key(&[], b"trigger_id=2&user_id=U1", &fields).key);
}

fn reorder(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(map.iter().rev().map(|(k, v)| (k.clone(), reorder(v))).collect()),
        Value::Array(items) => Value::Array(items.iter().map(reorder).collect()),
        other => other.clone(),
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-z\\\\\"é ]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![Just("id".to_owned()), Just("event_id".to_owned()), "[a-z_]{1,6}"],
                    inner
                ),
                0..6
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn key_is_stable_under_key_order_and_whitespace(value in json_value(), fields in prop::collection::vec("[a-z_]{1,6}", 0..3)) {
        let compact = serde_json::to_vec(&value).unwrap();
        let pretty = serde_json::to_vec_pretty(&reorder(&value)).unwrap();
        for name in ["user-agent", "linear-signature", "stripe-signature", "x-slack-signature"] {
            let provider_headers = [Header::new(name, "x")];
            prop_assert_eq!(event_key(&provider_headers, &compact, &fields), event_key(&provider_headers, &pretty, &fields));
        }
    }

    /// `--key-fields` naming fields the body holds: the key is made of
    /// them, the same however the body is laid out, and another value in
    /// one of them is another key.
    #[test]
    fn a_key_over_fields_the_body_holds_follows_their_values_only(
        members in prop::collection::vec(("[a-z_]{1,6}", json_value()), 1..6),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 1..3),
    ) {
        let value = Value::Object(members.into_iter().collect());
        let names: Vec<&String> = value.as_object().unwrap().keys().collect();
        let mut fields: Vec<String> = picks.iter().map(|i| names[i.index(names.len())].clone()).collect();
        fields.dedup();
        let compact = serde_json::to_vec(&value).unwrap();
        let pretty = serde_json::to_vec_pretty(&reorder(&value)).unwrap();
        let key = event_key(&[], &compact, &fields);
        prop_assert_eq!(&key.source, &format!("sha256:fields({})", fields.join(",")));
        prop_assert_eq!(&key, &event_key(&[], &pretty, &fields));
        let mut changed = value.clone();
        changed[&fields[0]] = Value::String(format!("{}+changed", value[&fields[0]]));
        prop_assert_ne!(key.key, event_key(&[], &serde_json::to_vec(&changed).unwrap(), &fields).key);
    }

    #[test]
    fn body_ids_read_from_the_bytes_match_the_parsed_body(value in json_value()) {
        let k = event_key(&[Header::new("stripe-signature", "x")], &serde_json::to_vec_pretty(&value).unwrap(), &[]);
        let expected = match value.get("id") {
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_owned()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        prop_assert_eq!((k.source == "body:/id").then_some(k.key), expected);
    }

    #[test]
    fn any_input_gives_a_bounded_key(
        names in prop::collection::vec("[a-zA-Z-]{1,12}", 0..4),
        body in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let h: Vec<Header> = names.iter().map(|n| Header::new(n.as_str(), body.clone())).collect();
        let k = event_key(&h, &body, &[]);
        prop_assert!(k.key.len() <= MAX_ID_LEN);
        prop_assert_eq!(k.key.is_empty(), k.source == "none", "only the keyless are empty: {:?}", k);
    }
}

#[test]
fn an_empty_body_without_an_id_gets_no_key() {
    for headers in [Vec::new(), vec![Header::new("stripe-signature", "t=1,v1=00")]] {
        let k = event_key(&headers, b"", &[]);
        assert_eq!((k.key.as_str(), k.source.as_str()), ("", "none"));
    }
    let github = [
        Header::new("x-github-delivery", "72d3162e"),
        Header::new("x-github-event", "ping"),
    ];
    assert_eq!(event_key(&github, b"", &[]).key, "72d3162e", "an ID still wins");
}

#[test]
fn a_compressed_event_is_keyed_by_the_id_inside_it() {
    use std::io::Write;
    let body = br#"{"id":"evt_gzipped","object":"event","type":"x"}"#;
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gzip.write_all(body).unwrap();
    let gzipped = gzip.finish().unwrap();
    let headers = [
        Header::new("stripe-signature", "t=1,v1=00"),
        Header::new("content-encoding", "gzip"),
    ];
    expect(
        event_key(&headers, &gzipped, &[]),
        Provider::Stripe,
        "evt_gzipped",
        "body:/id",
    );
    let again = event_key_again(Some(Provider::Stripe), &headers, &gzipped, "body:/id");
    assert_eq!(again.key, "evt_gzipped");
    // Labelled gzip but not: keyed by the bytes as sent.
    let plain = event_key(&headers, body, &[]);
    assert_eq!(plain.key, "evt_gzipped");
}
