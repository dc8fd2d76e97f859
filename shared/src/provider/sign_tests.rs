use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use super::*;
use crate::provider::test_vectors::{at, headers, mailgun_body, text, twilio_form, vector};

/// Re-signs a vector's request at its own timestamp with every signature
/// header blanked first, and returns the headers and body it produced.
fn resign_vector(provider: Provider, v: &Value, header_field: &str, url: Option<&str>) -> (Vec<Header>, Vec<u8>) {
    let mut h = headers(&v[header_field]);
    for header in &mut h {
        if crate::provider::is_sensitive_header(&header.name) || header.name.ends_with("timestamp") {
            header.value = b"stale".to_vec();
        }
    }
    let mut body = v["body"].as_str().unwrap_or_default().as_bytes().to_vec();
    let ts = v["timestamp"].as_u64().unwrap_or(1_700_000_000);
    resign(provider, text(v, "secret"), &mut h, &mut body, at(ts), url).unwrap();
    (h, body)
}

/// Every signed header equals the vector's, in the vector's order.
fn assert_reproduces(provider: Provider, name: &str, header_field: &str, url: Option<&str>) {
    let v = vector(name);
    let (h, body) = resign_vector(provider, v, header_field, url);
    assert_eq!(h, headers(&v[header_field]), "{name}");
    assert_eq!(body, v["body"].as_str().unwrap_or_default().as_bytes(), "{name}");
}

#[test]
fn every_signer_reproduces_its_vector() {
    assert_reproduces(Provider::Stripe, "stripe", "headers", None);
    assert_reproduces(Provider::Github, "github", "headers", None);
    assert_reproduces(Provider::Shopify, "shopify", "headers", None);
    assert_reproduces(Provider::Slack, "slack", "headers", None);
    assert_reproduces(Provider::StandardWebhooks, "standard_webhooks", "headers", None);
    assert_reproduces(Provider::StandardWebhooks, "standard_webhooks", "svix_headers", None);
    assert_reproduces(Provider::Paddle, "paddle", "headers", None);
    assert_reproduces(
        Provider::Square,
        "square",
        "headers",
        Some(text(vector("square"), "notification_url")),
    );
    assert_reproduces(Provider::Linear, "linear", "headers", None);
    assert_reproduces(Provider::Gitlab, "gitlab_signing_token", "headers", None);
}

#[test]
fn docs_vectors() {
    let gh = &vector("github")["docs_vector"];
    let (mut h, mut body) = (Vec::new(), text(gh, "body").as_bytes().to_vec());
    resign(Provider::Github, text(gh, "secret"), &mut h, &mut body, at(0), None).unwrap();
    assert_eq!(h, [Header::new("x-hub-signature-256", text(gh, "expected"))]);

    let slack = &vector("slack")["docs_vector"];
    let (mut h, mut body) = (Vec::new(), text(slack, "body").as_bytes().to_vec());
    let ts = slack["timestamp"].as_u64().unwrap();
    resign(Provider::Slack, text(slack, "secret"), &mut h, &mut body, at(ts), None).unwrap();
    assert_eq!(
        header(&h, "X-Slack-Signature"),
        Some(text(slack, "expected_in_slack_docs").as_bytes())
    );
    assert_eq!(header(&h, "X-Slack-Request-Timestamp"), Some(ts.to_string().as_bytes()));

    let svix = &vector("standard_webhooks")["docs_vector"];
    let mut h = vec![Header::new("webhook-id", text(svix, "id"))];
    let mut body = text(svix, "body").as_bytes().to_vec();
    resign(
        Provider::StandardWebhooks,
        text(svix, "secret"),
        &mut h,
        &mut body,
        at(svix["timestamp"].as_u64().unwrap()),
        None,
    )
    .unwrap();
    assert_eq!(
        header(&h, "webhook-signature"),
        Some(text(svix, "expected_in_svix_docs").as_bytes())
    );
    assert_eq!(header(&h, "webhook-timestamp"), Some(b"1614265330".as_slice()));
    // A secret copied without its `=` padding signs as the whole one does.
    let signed = |secret: &str| {
        let mut h = vec![Header::new("webhook-id", "msg_1")];
        resign(
            Provider::StandardWebhooks,
            secret,
            &mut h,
            &mut b"{}".to_vec(),
            at(0),
            None,
        )
        .unwrap();
        h
    };
    let padded = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    assert_eq!(signed(padded.trim_end_matches('=')), signed(padded));
}

#[test]
fn twilio_signs_url_and_sorted_params() {
    let v = vector("twilio");
    let mut h = vec![Header::new("content-type", "application/x-www-form-urlencoded")];
    let mut body = twilio_form();
    resign(
        Provider::Twilio,
        text(v, "secret"),
        &mut h,
        &mut body,
        at(0),
        Some(text(v, "url")),
    )
    .unwrap();
    assert_eq!(
        header(&h, "X-Twilio-Signature"),
        Some(text(&v["headers"], "X-Twilio-Signature").as_bytes())
    );
    let err = resign(Provider::Twilio, "s", &mut h, &mut body, at(0), None).unwrap_err();
    assert!(matches!(err, SignError::NeedsUrl(Provider::Twilio)), "{err}");
}

/// The signature of `body` sent to Twilio's documented example URL with
/// `headers`, made with its example auth token.
fn twilio_signature(mut headers: Vec<Header>, body: &[u8]) -> Result<String, SignError> {
    let v = vector("twilio");
    let mut body = body.to_vec();
    resign(
        Provider::Twilio,
        text(v, "secret"),
        &mut headers,
        &mut body,
        at(0),
        Some(text(v, "url")),
    )?;
    let signature = header(&headers, "X-Twilio-Signature").expect("signed");
    Ok(String::from_utf8_lossy(signature).into_owned())
}

/// Expected values made with twilio-python 9.13's `RequestValidator`
/// (`compute_signature(url, params, algorithm)`), which reads the
/// algorithm from this header as Twilio's other validators do.
#[test]
fn twilio_signs_with_the_algorithm_its_shared_key_names() {
    let settings = |value: &str| vec![Header::new("X-Twilio-Webhooks-Signature-Settings", value)];
    let sha256 = "Rmm4Vzj+Ky7JGoWXMCsZDZuHDszLr9xvdbvitrDr4/M=";
    assert_eq!(
        twilio_signature(
            settings("key=webhooks_sharedkey_1,algorithm=HMAC_SHA256"),
            &twilio_form()
        )
        .unwrap(),
        sha256
    );
    assert_eq!(
        twilio_signature(settings("algorithm = hmac_sha256"), &twilio_form()).unwrap(),
        sha256
    );
    let sha1 = text(&vector("twilio")["headers"], "X-Twilio-Signature");
    for sha1_settings in ["key=webhooks_sharedkey_1", "algorithm=HMAC_SHA1", ""] {
        assert_eq!(
            twilio_signature(settings(sha1_settings), &twilio_form()).unwrap(),
            sha1,
            "{sha1_settings:?}"
        );
    }
    let err = twilio_signature(settings("algorithm=HMAC_SHA512"), &twilio_form()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot re-sign this twilio request: it names a signing algorithm PortPreview does not know, HMAC_SHA512"
    );
}

/// Twilio's validators sign a name and value sent twice once (twilio-python
/// and twilio-node read each name's values as a set); values made as above.
#[test]
fn twilio_signs_a_repeated_pair_once() {
    let form = b"MessageSid=SMdup&Tag=a&Tag=a&Tag=b";
    assert_eq!(
        twilio_signature(Vec::new(), form).unwrap(),
        "EBOnzsX/lyiN04/yhBrivWvbdpU="
    );
    let settings = vec![Header::new(
        "X-Twilio-Webhooks-Signature-Settings",
        "algorithm=HMAC_SHA256",
    )];
    assert_eq!(
        twilio_signature(settings, form).unwrap(),
        "tlrlyX6q4wzM1KmpqVreDfBXaB3zkxq4XR431lp9FVU="
    );
}

#[test]
fn a_twilio_url_carries_the_hash_of_the_body_it_is_sent_with() {
    let body = br#"{"event":"changed"}"#;
    let hash = hex::encode(<Sha256 as sha2::Digest>::digest(body));
    assert_eq!(
        with_twilio_body_hash("/hook?a=1&bodySHA256=cf9f&b=2", body),
        Some(format!("/hook?a=1&bodySHA256={hash}&b=2"))
    );
    let current = format!("https://x.example/hook?bodySHA256={hash}");
    assert_eq!(with_twilio_body_hash(&current, body), None, "already right");
    assert_eq!(with_twilio_body_hash("/hook?a=1", body), None);
    assert_eq!(with_twilio_body_hash("/hook", body), None);
}

#[test]
fn mailgun_rewrites_the_signature_object() {
    let v = vector("mailgun");
    let mut stale = v["body_signature"].clone();
    stale["timestamp"] = "1".into();
    stale["signature"] = "0000".into();
    let mut body = mailgun_body(&stale);
    resign(
        Provider::Mailgun,
        text(v, "secret"),
        &mut Vec::new(),
        &mut body,
        at(1_700_000_000),
        None,
    )
    .unwrap();
    // Mailgun's check: HMAC-SHA256 of timestamp then token, in hex, which
    // made the vector's own signature.
    let mailgun_signs = |signature: &Value| {
        let part = |name: &str| signature[name].as_str().unwrap().as_bytes().to_vec();
        hex::encode(hmac256(
            text(v, "secret").as_bytes(),
            &[&part("timestamp"), &part("token")],
        )) == text(signature, "signature")
    };
    assert!(mailgun_signs(&v["body_signature"]), "the check is Mailgun's");
    let signed: Value = serde_json::from_slice(&body).unwrap();
    let signature = &signed["signature"];
    assert!(mailgun_signs(signature), "{signed}");
    assert_eq!(signature["timestamp"], "1700000000");
    let token = text(signature, "token");
    assert!(
        token.len() == 50 && token != text(&v["body_signature"], "token"),
        "a token of its own, which no handler has seen: {token}"
    );
    assert_eq!(
        signed["event-data"]["id"], "CPgfbmQMTCKtHW6uIWtuVe",
        "the event is the same"
    );
    let err = resign(
        Provider::Mailgun,
        "k",
        &mut Vec::new(),
        &mut b"a=b".to_vec(),
        at(0),
        None,
    )
    .unwrap_err();
    assert!(matches!(err, SignError::Unsupported(Provider::Mailgun)), "{err}");
}

/// Stripe's verification as its SDKs do it: parse `t` and every `v1`,
/// recompute over `{t}.{body}`, and reject timestamps over 300 s old.
fn stripe_verify(header: &[u8], body: &[u8], secret: &str, now: SystemTime) -> bool {
    let header = std::str::from_utf8(header).unwrap();
    let mut t = None;
    let mut v1 = Vec::new();
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", value)) => t = value.parse::<u64>().ok(),
            Some(("v1", value)) => v1.push(hex::decode(value).unwrap_or_default()),
            _ => {}
        }
    }
    let Some(t) = t else { return false };
    let now = now.duration_since(UNIX_EPOCH).unwrap().as_secs();
    if now.abs_diff(t) > 300 {
        return false;
    }
    v1.iter().any(|sig| {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(format!("{t}.").as_bytes());
        mac.update(body);
        mac.verify_slice(sig).is_ok()
    })
}

#[test]
fn stripe_signature_made_now_verifies() {
    let v = vector("stripe");
    let secret = text(v, "secret");
    let mut h = headers(&v["headers"]);
    let mut body = text(v, "body").as_bytes().to_vec();
    let sig = text(&v["headers"], "Stripe-Signature").as_bytes();
    assert!(
        stripe_verify(sig, &body, secret, at(1_700_000_010)),
        "reference verifier accepts the vector"
    );
    assert!(
        !stripe_verify(sig, &body, secret, SystemTime::now()),
        "stale vector is rejected now"
    );
    let now = SystemTime::now();
    resign(Provider::Stripe, secret, &mut h, &mut body, now, None).unwrap();
    assert!(stripe_verify(
        header(&h, "stripe-signature").unwrap(),
        &body,
        secret,
        now
    ));
    assert!(!stripe_verify(
        header(&h, "stripe-signature").unwrap(),
        &body,
        "whsec_other",
        now
    ));
    assert!(!stripe_verify(
        header(&h, "stripe-signature").unwrap(),
        &body,
        secret,
        now + Duration::from_secs(301)
    ));
}

#[test]
fn headers_replaced_in_place_or_appended() {
    let mut h = vec![
        Header::new("content-type", "application/json"),
        Header::new("X-Hub-Signature", "sha1=old"),
        Header::new("X-Hub-Signature-256", "sha256=old"),
        Header::new("x-hub-signature-256", "sha256=duplicate"),
        Header::new("user-agent", "GitHub-Hookshot/1"),
    ];
    let mut body = b"{}".to_vec();
    resign(Provider::Github, "s", &mut h, &mut body, at(0), None).unwrap();
    let names: Vec<&str> = h.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(
        names,
        ["content-type", "X-Hub-Signature", "X-Hub-Signature-256", "user-agent"]
    );
    let mut mac = Hmac::<sha1::Sha1>::new_from_slice(b"s").unwrap();
    mac.update(b"{}");
    assert_eq!(
        h[1].value,
        format!("sha1={}", hex::encode(mac.finalize().into_bytes())).into_bytes()
    );

    let mut h = vec![Header::new("content-type", "application/json")];
    resign(Provider::Paddle, "s", &mut h, &mut body, at(5), None).unwrap();
    assert_eq!(h[1].name, "paddle-signature");
    assert!(h[1].value.starts_with(b"ts=5;h1="));
}

#[test]
fn newer_shopify_headers_keep_their_name() {
    let mut h = vec![Header::new("shopify-hmac-sha256", "old")];
    resign(Provider::Shopify, "s", &mut h, &mut b"{}".to_vec(), at(0), None).unwrap();
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].name, "shopify-hmac-sha256");
    assert_ne!(h[0].value, b"old");
    // Both names sent: both signed, or a handler reading the other one
    // would check the stale signature.
    let mut both = vec![
        Header::new("x-shopify-hmac-sha256", "old"),
        Header::new("shopify-hmac-sha256", "old"),
    ];
    resign(Provider::Shopify, "s", &mut both, &mut b"{}".to_vec(), at(0), None).unwrap();
    assert_eq!(both.len(), 2);
    assert_eq!(both[0].value, both[1].value);
    assert_ne!(both[0].value, b"old");
}

#[test]
fn linear_timestamp_moves_to_now() {
    let v = vector("linear");
    let mut h = headers(&v["headers"]);
    let mut body = text(v, "body").as_bytes().to_vec();
    resign(
        Provider::Linear,
        text(v, "secret"),
        &mut h,
        &mut body,
        at(1_800_000_000) + Duration::from_millis(250),
        None,
    )
    .unwrap();
    let expected = text(v, "body").replace("1700000000000", "1800000000250");
    assert_eq!(String::from_utf8(body.clone()).unwrap(), expected);
    let mut mac = Hmac::<Sha256>::new_from_slice(text(v, "secret").as_bytes()).unwrap();
    mac.update(&body);
    assert_eq!(
        header(&h, "linear-signature"),
        Some(hex::encode(mac.finalize().into_bytes()).as_bytes())
    );
}

#[test]
fn gitlab_secret_token_is_sent_as_is() {
    let mut h = vec![
        Header::new("x-gitlab-event", "Push Hook"),
        Header::new("x-gitlab-token", "old"),
    ];
    resign(Provider::Gitlab, "tok", &mut h, &mut b"{}".to_vec(), at(0), None).unwrap();
    assert_eq!(h[1], Header::new("x-gitlab-token", "tok"));
}

#[test]
fn refusals_say_why() {
    let mut body = b"{}".to_vec();
    let err = resign(Provider::Discord, "s", &mut Vec::new(), &mut body, at(0), None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "discord requests are signed with Discord's private key: only a byte-identical replay verifies"
    );
    let err = resign(Provider::Sendgrid, "s", &mut Vec::new(), &mut body, at(0), None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "sendgrid requests are signed with SendGrid's private key: only a byte-identical replay verifies"
    );
    let err = resign(Provider::Square, "s", &mut Vec::new(), &mut body, at(0), None).unwrap_err();
    assert!(matches!(err, SignError::NeedsUrl(Provider::Square)));
    let err = resign(
        Provider::StandardWebhooks,
        "whsec_!!!",
        &mut vec![Header::new("webhook-id", "m")],
        &mut body,
        at(0),
        None,
    )
    .unwrap_err();
    assert!(matches!(err, SignError::BadSecret(_)), "{err}");
    let err = resign(
        Provider::StandardWebhooks,
        "whsec_AAAA",
        &mut Vec::new(),
        &mut body,
        at(0),
        None,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot re-sign this standard-webhooks request: it has no webhook-id (or svix-id) header"
    );
    let err = resign(
        Provider::StandardWebhooks,
        "whsec_AAAA",
        &mut vec![Header::new("svix-id", "")],
        &mut body,
        at(0),
        None,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot re-sign this standard-webhooks request: it has no webhook-id (or svix-id) value: the header is empty"
    );
    let err = resign(Provider::Stripe, "", &mut Vec::new(), &mut body, at(0), None).unwrap_err();
    assert!(matches!(err, SignError::BadSecret(_)));
}

#[test]
fn resignable_names_exactly_the_providers_resign_does_not_refuse_for_their_key() {
    for provider in Provider::ALL {
        let mut body = b"{}".to_vec();
        let refused = matches!(
            resign(provider, "s", &mut Vec::new(), &mut body, at(0), Some("http://x/")),
            Err(SignError::PrivateKey(_))
        );
        assert_eq!(provider.resignable(), !refused, "{provider}");
    }
}

/// A request and the same event under a fresh identity.
fn with_fresh_identity(provider: Provider, h: Vec<Header>, body: Vec<u8>) -> [(Vec<Header>, Vec<u8>); 2] {
    let (mut fresh_h, mut fresh_body) = (h.clone(), body.clone());
    crate::provider::fresh_identity(Some(provider), &mut fresh_h, &mut fresh_body, None).unwrap();
    [(h, body), (fresh_h, fresh_body)]
}

fn alike(provider: Provider, [a, b]: &[(Vec<Header>, Vec<u8>); 2]) -> bool {
    signs_alike(provider, (&a.0, &a.1), (&b.0, &b.1))
}

#[test]
fn a_fresh_identity_signs_alike_only_where_the_id_is_not_signed() {
    let cases = [
        (Provider::Stripe, "stripe", false),
        (Provider::Github, "github", true),
        (Provider::Shopify, "shopify", true),
        (Provider::Slack, "slack", false),
        (Provider::StandardWebhooks, "standard_webhooks", false),
        (Provider::Paddle, "paddle", false),
        (Provider::Square, "square", false),
        (Provider::Linear, "linear", true),
        (Provider::Gitlab, "gitlab_signing_token", false),
        (Provider::Discord, "discord_test_keypair", false),
    ];
    for (provider, name, expected) in cases {
        let v = vector(name);
        let body = v["body"].as_str().unwrap().as_bytes().to_vec();
        let pair = with_fresh_identity(provider, headers(&v["headers"]), body);
        assert_eq!(alike(provider, &pair), expected, "{name}");
    }
    // Twilio signs the form's SIDs, not its idempotency token.
    let twilio = headers(&vector("twilio")["headers"]);
    let pair = with_fresh_identity(Provider::Twilio, twilio.clone(), twilio_form());
    assert!(!alike(Provider::Twilio, &pair), "new SIDs");
    let pair = with_fresh_identity(Provider::Twilio, twilio, b"MessageStatus=sent".to_vec());
    assert!(alike(Provider::Twilio, &pair), "only a new token");
    // A GitLab secret token is sent as it is, and covers nothing.
    let token = vec![
        Header::new("X-Gitlab-Event", "Push Hook"),
        Header::new("X-Gitlab-Token", "s3cret"),
        Header::new("Idempotency-Key", "f0e1d2c3-0000-4000-8000-000000000000"),
    ];
    let pair = with_fresh_identity(Provider::Gitlab, token, b"{}".to_vec());
    assert!(alike(Provider::Gitlab, &pair));
    // Mailgun signs the token its fresh identity renews.
    let body = mailgun_body(&vector("mailgun")["body_signature"]);
    let pair = with_fresh_identity(Provider::Mailgun, Vec::new(), body);
    assert!(!alike(Provider::Mailgun, &pair));
    // What cannot be signed here is alike only to itself.
    let v = vector("discord_test_keypair");
    let same = (headers(&v["headers"]), v["body"].as_str().unwrap().as_bytes().to_vec());
    assert!(alike(Provider::Discord, &[same.clone(), same]));
}
