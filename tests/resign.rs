//! `replay --resign` makes a delivery recorded long ago verify again, for
//! each provider whose signature PortPreview can re-make. Each delivery
//! goes through a real relay and client into a real history, signed as the
//! provider signs; the handler checks it as the provider's SDK does
//! (bytes signed, algorithm, encoding, freshness: providers.md), written
//! here apart from PortPreview's own signing code.
//!
//! Every case starts out refused: signed an hour ago where the provider
//! checks freshness, or with the secret since rotated where it does not.
//! A plain replay is refused alike; `--resign` with today's secret passes.

mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use common::caller;
use common::history::portpreview_async;
use common::local::{Answer, LocalHandler, Seen};
use common::relay::TestRelay;
use common::tunnel::TestTunnel;

/// Headers and body as a provider sent them.
type Delivery = (Vec<(&'static str, String)>, String);

/// One provider's delivery: what it sends, and how its SDK checks it.
struct Case {
    provider: &'static str,
    /// The secret the handler holds now, given to `--resign`.
    secret: &'static str,
    /// Headers and body as the provider sent them, signed at `signed_at`
    /// (unix seconds) with `with_secret`.
    deliver: fn(signed_at: u64, with_secret: &str) -> Delivery,
    /// Whether the SDK refuses an old signature: such a case is signed an
    /// hour ago with the right secret, the others now with a stale one.
    checks_freshness: bool,
    /// The SDK's check of a request, at `now`: `Err` says why it refuses.
    verify: fn(seen: &Seen, secret: &str, now: u64) -> Result<(), String>,
}

fn hmac_sha256(key: &[u8], signed: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
    mac.update(signed);
    mac.finalize().into_bytes().to_vec()
}

fn header(seen: &Seen, name: &str) -> Result<String, String> {
    seen.header(name).ok_or_else(|| format!("no {name} header"))
}

fn fresh(ts: &str, now: u64, tolerance: u64) -> Result<(), String> {
    let ts: u64 = ts.parse().map_err(|_| format!("timestamp {ts:?} is not a number"))?;
    match now.abs_diff(ts) <= tolerance {
        true => Ok(()),
        false => Err(format!("timestamp {ts} is {} s from now", now.abs_diff(ts))),
    }
}

fn matches(expected: &[u8], given: &[u8]) -> Result<(), String> {
    match expected == given {
        true => Ok(()),
        false => Err("the signature does not match".into()),
    }
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            provider: "github",
            secret: "gh-secret-today",
            checks_freshness: false,
            deliver: |_, secret| {
                let body = r#"{"action":"opened","number":7}"#.to_string();
                let signature = hex::encode(hmac_sha256(secret.as_bytes(), body.as_bytes()));
                let headers = vec![
                    ("user-agent", "GitHub-Hookshot/abc123".to_string()),
                    ("x-github-event", "pull_request".to_string()),
                    ("x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958".to_string()),
                    ("x-github-hook-id", "1".to_string()),
                    ("x-hub-signature-256", format!("sha256={signature}")),
                ];
                (headers, body)
            },
            verify: |seen, secret, _| {
                let given = header(seen, "x-hub-signature-256")?;
                let hex_part = given.strip_prefix("sha256=").ok_or("no sha256= prefix")?;
                let given = hex::decode(hex_part).map_err(|_| "not hex")?;
                matches(&hmac_sha256(secret.as_bytes(), &seen.body), &given)
            },
        },
        Case {
            provider: "shopify",
            secret: "shpss_today",
            checks_freshness: false,
            deliver: |_, secret| {
                let body = r#"{"id":820982911946154500,"email":"jon@example.com"}"#.to_string();
                let signature = BASE64.encode(hmac_sha256(secret.as_bytes(), body.as_bytes()));
                let headers = vec![
                    ("x-shopify-topic", "orders/create".to_string()),
                    (
                        "x-shopify-webhook-id",
                        "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043".to_string(),
                    ),
                    ("x-shopify-shop-domain", "shop.myshopify.com".to_string()),
                    ("x-shopify-hmac-sha256", signature),
                ];
                (headers, body)
            },
            verify: |seen, secret, _| {
                let given = BASE64
                    .decode(header(seen, "x-shopify-hmac-sha256")?)
                    .map_err(|_| "not base64")?;
                matches(&hmac_sha256(secret.as_bytes(), &seen.body), &given)
            },
        },
        Case {
            provider: "slack",
            secret: "8f742231b10e8888abcd99yyyzzz85a5",
            checks_freshness: true,
            deliver: |ts, secret| {
                let body =
                    r#"{"type":"event_callback","event_id":"Ev0PV52K21","event":{"type":"app_mention"}}"#.to_string();
                let signed = format!("v0:{ts}:{body}");
                let signature = hex::encode(hmac_sha256(secret.as_bytes(), signed.as_bytes()));
                let headers = vec![
                    ("x-slack-request-timestamp", ts.to_string()),
                    ("x-slack-signature", format!("v0={signature}")),
                ];
                (headers, body)
            },
            verify: |seen, secret, now| {
                let ts = header(seen, "x-slack-request-timestamp")?;
                fresh(&ts, now, 300)?;
                let given = header(seen, "x-slack-signature")?;
                let given = hex::decode(given.strip_prefix("v0=").ok_or("no v0= prefix")?).map_err(|_| "not hex")?;
                let mut signed = format!("v0:{ts}:").into_bytes();
                signed.extend_from_slice(&seen.body);
                matches(&hmac_sha256(secret.as_bytes(), &signed), &given)
            },
        },
        Case {
            provider: "standard-webhooks",
            secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            checks_freshness: true,
            deliver: |ts, secret| {
                let body = r#"{"type":"user.created","data":{"id":"user_29w83sxmDNGwOuEthce5gg56FcC"}}"#.to_string();
                let id = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W";
                let key = BASE64
                    .decode(secret.trim_start_matches("whsec_"))
                    .expect("base64 secret");
                let signature = BASE64.encode(hmac_sha256(&key, format!("{id}.{ts}.{body}").as_bytes()));
                let headers = vec![
                    ("webhook-id", id.to_string()),
                    ("webhook-timestamp", ts.to_string()),
                    ("webhook-signature", format!("v1,{signature}")),
                ];
                (headers, body)
            },
            verify: |seen, secret, now| {
                let id = header(seen, "webhook-id")?;
                let ts = header(seen, "webhook-timestamp")?;
                fresh(&ts, now, 300)?;
                let key = BASE64
                    .decode(secret.trim_start_matches("whsec_"))
                    .map_err(|_| "secret not base64")?;
                let mut signed = format!("{id}.{ts}.").into_bytes();
                signed.extend_from_slice(&seen.body);
                let expected = BASE64.encode(hmac_sha256(&key, &signed));
                let listed = header(seen, "webhook-signature")?;
                match listed.split(' ').any(|sig| sig == format!("v1,{expected}")) {
                    true => Ok(()),
                    false => Err("no v1 signature matches".into()),
                }
            },
        },
        Case {
            provider: "paddle",
            secret: "pdl_ntfset_today",
            checks_freshness: true,
            deliver: |ts, secret| {
                let body =
                    r#"{"event_id":"evt_01h8bzakzx3hm2fmen703n5q45","event_type":"transaction.paid"}"#.to_string();
                let signature = hex::encode(hmac_sha256(secret.as_bytes(), format!("{ts}:{body}").as_bytes()));
                (vec![("paddle-signature", format!("ts={ts};h1={signature}"))], body)
            },
            verify: |seen, secret, now| {
                let given = header(seen, "paddle-signature")?;
                let part = |name: &str| {
                    given
                        .split(';')
                        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                        .map(str::to_owned)
                        .ok_or(format!("no {name} in Paddle-Signature"))
                };
                let ts = part("ts")?;
                // Paddle's SDKs allow 5 s; the test's machine may be slow.
                fresh(&ts, now, 60)?;
                let given = hex::decode(part("h1")?).map_err(|_| "not hex")?;
                let mut signed = format!("{ts}:").into_bytes();
                signed.extend_from_slice(&seen.body);
                matches(&hmac_sha256(secret.as_bytes(), &signed), &given)
            },
        },
        Case {
            provider: "linear",
            secret: "lin_wh_today",
            checks_freshness: true,
            deliver: |ts, secret| {
                let body = format!(
                    r#"{{"action":"create","type":"Issue","data":{{"id":"2174add1"}},"webhookTimestamp":{}}}"#,
                    ts * 1000
                );
                let signature = hex::encode(hmac_sha256(secret.as_bytes(), body.as_bytes()));
                let headers = vec![
                    ("linear-event", "Issue".to_string()),
                    ("linear-delivery", "234d1a4e-b617-4388-90fe-adc3633d6b72".to_string()),
                    ("linear-signature", signature),
                ];
                (headers, body)
            },
            verify: |seen, secret, now| {
                let given = hex::decode(header(seen, "linear-signature")?).map_err(|_| "not hex")?;
                matches(&hmac_sha256(secret.as_bytes(), &seen.body), &given)?;
                let body: serde_json::Value = serde_json::from_slice(&seen.body).map_err(|_| "body not JSON")?;
                let ms = body["webhookTimestamp"].as_u64().ok_or("no webhookTimestamp")?;
                fresh(&(ms / 1000).to_string(), now, 60)
            },
        },
    ]
}

/// A handler that checks each request as `case`'s SDK does: 200 when it
/// verifies, else 400 with the reason.
async fn verifying_handler(case: &Case) -> LocalHandler {
    let (verify, secret) = (case.verify, case.secret);
    LocalHandler::start(move |seen| match verify(seen, secret, now()) {
        Ok(()) => Answer::default(),
        Err(why) => Answer {
            status: 400,
            body: why.into_bytes(),
            ..Answer::default()
        },
    })
    .await
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

/// The statuses of a `replay --json` run's attempts.
fn statuses(json: &serde_json::Value) -> Vec<u64> {
    json["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .map(|a| a["status"].as_u64().unwrap_or(0))
        .collect()
}

#[tokio::test]
async fn resigning_makes_an_old_delivery_verify_again_for_every_provider_that_signs() {
    let relay = TestRelay::start().await;
    for case in cases() {
        let (verify, secret) = (case.verify, case.secret);
        let handler = verifying_handler(&case).await;
        let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
        let (signed_at, with_secret) = match case.checks_freshness {
            true => (now() - 3600, case.secret),
            false => (now(), "a-secret-since-rotated"),
        };
        let (headers, body) = (case.deliver)(signed_at, with_secret);
        let headers: Vec<(&str, &[u8])> = headers
            .iter()
            .map(|(name, value)| (*name, value.as_bytes()))
            .chain([("content-type", &b"application/json"[..])])
            .collect();
        let reply = caller::send("POST", &tunnel.url("/hooks"), &headers, body.clone()).await;
        let provider = case.provider;
        assert_eq!(reply.status, 400, "{provider}: the handler refuses the old delivery");
        let (summary, _) = tunnel.next_delivery().await;
        assert_eq!(summary.provider.as_deref(), Some(provider), "detected");
        let id = summary.id.to_string();

        let replay = |extra: &[&str]| {
            let args: Vec<String> = ["replay", &id, "--times", "2", "--json"]
                .iter()
                .chain(extra)
                .map(|arg| arg.to_string())
                .collect();
            let db = tunnel.db.clone();
            async move { portpreview_async(&db, &args).await }
        };
        let plain = replay(&[]).await;
        assert_eq!(
            statuses(&plain.json()),
            [400, 400],
            "{provider}: a replay as recorded is refused as the delivery was: {}",
            plain.stderr
        );
        let resigned = replay(&["--resign", "--secret", case.secret]).await;
        assert_eq!(
            statuses(&resigned.json()),
            [200, 200],
            "{provider}: each re-signed attempt verifies: {}{}",
            resigned.stdout,
            resigned.stderr
        );
        // The report says what signed them, and over which URL for a
        // provider that signs the URL it called.
        let signed = &resigned.json()["signed"];
        assert_eq!(signed["provider"], provider, "{signed}");
        assert_eq!(signed["secret_from"], "--secret", "{signed}");
        let url = signed["url"].as_str();
        match provider {
            "square" | "twilio" => assert_eq!(url, Some(&*tunnel.url("/hooks")), "{signed}"),
            _ => assert_eq!(url, None, "{signed}"),
        }
        assert!(plain.json()["signed"].is_null(), "a plain replay signs nothing");
        let seen = handler.requests();
        let last = seen.last().expect("the handler saw the replays");
        assert_eq!(verify(last, secret, now()), Ok(()), "{provider}");
        assert!(
            !String::from_utf8_lossy(&last.body).is_empty(),
            "{provider}: the body went with it"
        );
        tunnel.stop().await.expect("the tunnel stops cleanly");
    }
}

/// A re-signed attempt refused for its signature points at where the
/// secret came from, since that is the place to correct: advice to set a
/// variable `--secret` comes before would change nothing.
#[tokio::test]
async fn a_refused_resign_names_where_its_secret_came_from() {
    let relay = TestRelay::start().await;
    let case = cases()
        .into_iter()
        .find(|c| c.provider == "github")
        .expect("a github case");
    let secret = case.secret;
    let handler = verifying_handler(&case).await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let (headers, body) = (case.deliver)(now(), secret);
    let headers: Vec<(&str, &[u8])> = headers.iter().map(|(n, v)| (*n, v.as_bytes())).collect();
    assert_eq!(
        caller::send("POST", &tunnel.url("/hooks"), &headers, body).await.status,
        200
    );
    let (summary, _) = tunnel.next_delivery().await;
    let id = summary.id.to_string();
    let warnings = |ran: &common::history::Ran| -> String {
        let json = ran.json();
        assert_eq!(statuses(&json), [400], "{}", ran.stdout);
        serde_json::to_string(&json["warnings"]).expect("warnings")
    };

    let flag = portpreview_async(
        &tunnel.db,
        &["replay", &id, "--resign", "--secret", "whsec_other", "--json"],
    )
    .await;
    let said = warnings(&flag);
    assert!(
        said.contains("signed with the github secret from --secret, was answered 400")
            && said.contains("leave --secret out and set PORTPREVIEW_SECRET_GITHUB"),
        "{said}"
    );

    std::fs::write(
        tunnel.db.with_extension("config.toml"),
        "[secrets]\ngithub = \"whsec_other\"\n",
    )
    .expect("config written");
    let file = portpreview_async(&tunnel.db, &["replay", &id, "--resign", "--json"]).await;
    let said = warnings(&file);
    assert!(
        said.contains("signed with the github secret from the config file, was answered 400")
            && said.contains("change github in the config file's [secrets] table"),
        "{said}"
    );
    let text = portpreview_async(&tunnel.db, &["replay", &id, "--resign"]).await;
    assert!(
        text.stdout
            .lines()
            .nth(1)
            .is_some_and(|line| line == "Each attempt signed anew with the github secret from the config file"),
        "said under the heading: {}",
        text.stdout
    );
    tunnel.stop().await.expect("the tunnel stops cleanly");
}

/// Fresh events sent under the recorded signature, with no secret to sign
/// them again, are refused by a handler that checks it: the run fails for
/// that, and says so where a CI report shows it, not as the handler's fault.
#[tokio::test]
async fn fresh_events_refused_for_a_signature_not_made_again_say_why() {
    let relay = TestRelay::start().await;
    let case = cases()
        .into_iter()
        .find(|c| c.provider == "standard-webhooks")
        .expect("a standard-webhooks case");
    let handler = verifying_handler(&case).await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let (headers, body) = (case.deliver)(now(), case.secret);
    let headers: Vec<(&str, &[u8])> = headers.iter().map(|(n, v)| (*n, v.as_bytes())).collect();
    assert_eq!(
        caller::send("POST", &tunnel.url("/hooks"), &headers, body).await.status,
        200,
        "the delivery verifies as sent"
    );
    let (summary, _) = tunnel.next_delivery().await;
    let id = summary.id.to_string();

    let fresh = portpreview_async(&tunnel.db, &["replay", &id, "--fresh", "--times", "2", "--json"]).await;
    let json = fresh.json();
    assert_eq!(statuses(&json), [400, 400, 400], "{}", fresh.stdout);
    assert_eq!(
        json["verdict"], "failed",
        "not the handler's idempotency: {}",
        fresh.stdout
    );
    let answers = json["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|c| c["name"] == "answers_2xx"))
        .expect("the answers check");
    let detail = answers["detail"].as_str().unwrap_or_default();
    assert!(
        detail.ends_with(
            "a handler that checks signatures refuses them: this says nothing of idempotency (see the warning)"
        ),
        "{detail}"
    );
    let warnings = serde_json::to_string(&json["warnings"]).expect("warnings");
    assert!(
        warnings.contains("the fresh events are not re-signed (no secret for standard-webhooks)"),
        "{warnings}"
    );
    tunnel.stop().await.expect("the tunnel stops cleanly");
}
