//! Every delivery the tunnel carries is in the history: with its provider
//! and event key, and durably — a client killed mid-burst loses no delivery
//! whose caller got a 2xx, and readers never see "database is locked".

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::bin::portpreview_bin;
use common::caller;
use common::history::portpreview_async;
use common::local::{Answer, LocalHandler};
use common::process::Running;
use common::relay::TestRelay;
use common::tunnel::{TestTunnel, TunnelOptions};
use portpreview::events::TunnelEvent;
use portpreview::store::{NewDelivery, Outcome, Store};
use portpreview::tunnel::HostHeader;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const VECTORS: &str = include_str!("../shared/testdata/provider_vectors.json");

/// Where each provider's event identity lives in its signed test vector.
enum Identity {
    Header(&'static str),
    Body(&'static str),
}

#[tokio::test]
async fn each_providers_signed_delivery_is_recorded_with_its_provider_event_key_and_type() {
    let vectors: Value = serde_json::from_str(VECTORS).expect("vectors parse");
    let cases = [
        ("stripe", "stripe", Identity::Body("/id"), "payment_intent.succeeded"),
        (
            "github",
            "github",
            Identity::Header("X-GitHub-Delivery"),
            "pull_request.opened",
        ),
        (
            "shopify",
            "shopify",
            Identity::Header("X-Shopify-Webhook-Id"),
            "orders/create",
        ),
        ("slack", "slack", Identity::Body("/event_id"), "app_mention"),
        (
            "standard_webhooks",
            "standard-webhooks",
            Identity::Header("webhook-id"),
            "user.created",
        ),
        ("paddle", "paddle", Identity::Body("/event_id"), "transaction.completed"),
        ("square", "square", Identity::Body("/event_id"), "payment.created"),
        ("linear", "linear", Identity::Header("Linear-Delivery"), "Issue.create"),
        (
            "gitlab_signing_token",
            "gitlab",
            Identity::Header("Idempotency-Key"),
            "push",
        ),
        ("discord_test_keypair", "discord", Identity::Body("/id"), "ping"),
    ];
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;

    for (vector, provider, identity, event_type) in cases {
        let entry = &vectors[vector];
        let body = entry["body"].as_str().expect("vector body").to_string();
        let headers: Vec<(String, Vec<u8>)> = entry["headers"]
            .as_object()
            .expect("vector headers")
            .iter()
            .map(|(name, value)| (name.clone(), value.as_str().expect("header text").as_bytes().to_vec()))
            .collect();
        let header_refs: Vec<(&str, &[u8])> = headers.iter().map(|(n, v)| (n.as_str(), v.as_slice())).collect();
        let reply = caller::send(
            "POST",
            &tunnel.url(&format!("/hooks/{vector}")),
            &header_refs,
            body.clone(),
        )
        .await;
        assert_eq!(reply.status, 200, "{vector}");

        let (summary, _) = tunnel.next_delivery().await;
        let (key, source) = match identity {
            Identity::Header(name) => (
                entry["headers"][name].as_str().expect("id header").to_string(),
                format!("header:{name}"),
            ),
            Identity::Body(pointer) => {
                let json: Value = serde_json::from_str(&body).expect("JSON body");
                let id = &json.pointer(pointer).expect("id in body");
                (
                    id.as_str().map_or_else(|| id.to_string(), str::to_string),
                    format!("body:{pointer}"),
                )
            }
        };
        assert_eq!(summary.provider.as_deref(), Some(provider), "{vector}");
        assert_eq!(summary.event_key, key, "{vector}");
        assert_eq!(summary.event_key_source, source, "{vector}");
        assert_eq!(summary.event_type.as_deref(), Some(event_type), "{vector}");
    }

    // Twilio posts a form: keyed by its idempotency token when it sends one,
    // else by the call's SID and status; Mailgun by its event-data ID.
    let twilio = &vectors["twilio"];
    let form: Vec<String> = twilio["params"]
        .as_object()
        .expect("vector params")
        .iter()
        .map(|(name, value)| format!("{name}={}", value.as_str().expect("param").replace('+', "%2B")))
        .collect();
    let signature = twilio["headers"]["X-Twilio-Signature"].as_str().expect("signature");
    let mailgun = serde_json::json!({
        "signature": vectors["mailgun"]["body_signature"],
        "event-data": {"id": "CPgfbmQMTCKtHW6uIWtuVe", "event": "delivered"},
    });
    type Sent<'a> = (&'a str, &'a [u8]);
    // The key, how it was made, and the event type.
    type Recorded<'a> = (&'a str, &'a str, Option<&'a str>);
    let form_type: &[u8] = b"application/x-www-form-urlencoded";
    let json_type: &[u8] = b"application/json";
    let posts: [(&[Sent], String, Recorded); 3] = [
        (
            &[
                ("Content-Type", form_type),
                ("X-Twilio-Signature", signature.as_bytes()),
                ("I-Twilio-Idempotency-Token", b"4a4f2a2a-token"),
            ],
            form.join("&"),
            // A call's callback that reports no status names no type.
            ("4a4f2a2a-token", "header:I-Twilio-Idempotency-Token", None),
        ),
        (
            &[
                ("Content-Type", form_type),
                ("X-Twilio-Signature", signature.as_bytes()),
            ],
            form.join("&"),
            ("CA1234567890ABCDE", "form:CallSid", None),
        ),
        (
            &[("Content-Type", json_type)],
            mailgun.to_string(),
            ("CPgfbmQMTCKtHW6uIWtuVe", "body:/event-data/id", Some("delivered")),
        ),
    ];
    for (headers, body, (key, source, event_type)) in posts {
        let reply = caller::send("POST", &tunnel.url("/hooks/form"), headers, body).await;
        assert_eq!(reply.status, 200, "{source}");
        let (summary, _) = tunnel.next_delivery().await;
        let provider = if source.ends_with("/id") { "mailgun" } else { "twilio" };
        assert_eq!(
            (
                summary.provider.as_deref(),
                summary.event_key.as_str(),
                summary.event_key_source.as_str(),
                summary.event_type.as_deref()
            ),
            (Some(provider), key, source, event_type)
        );
    }

    // Meta (WhatsApp, Instagram) signs with GitHub's signature header and
    // nothing else of GitHub's: no provider, keyed by its body.
    let whatsapp = r#"{"object":"whatsapp_business_account","entry":[{"id":"WABA_1"}]}"#;
    let meta: &[Sent] = &[
        ("Content-Type", json_type),
        ("X-Hub-Signature-256", b"sha256=5e2d"),
        ("User-Agent", b"facebookexternalua"),
    ];
    let reply = caller::send("POST", &tunnel.url("/hooks/meta"), meta, whatsapp.to_string()).await;
    assert_eq!(reply.status, 200);
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!(
        (summary.provider.as_deref(), summary.event_key_source.as_str()),
        (None, "sha256:body")
    );

    // What the live line said is what the history holds, headers byte for byte.
    let store = portpreview::store::Store::open(&tunnel.db).expect("open the history");
    let first = store.get(1).expect("read").expect("delivery #1");
    assert_eq!(first.request.provider.as_deref(), Some("stripe"));
    assert_eq!(first.request.event_key, "evt_1PortPreviewTest");
    let signature = first
        .request
        .request_headers
        .iter()
        .find(|h| h.name == "stripe-signature")
        .expect("signature kept");
    assert_eq!(
        signature.value,
        vectors["stripe"]["headers"]["Stripe-Signature"]
            .as_str()
            .expect("sig")
            .as_bytes()
    );
}

#[tokio::test]
async fn one_github_event_sent_to_two_hooks_is_no_retry_but_a_redelivery_is() {
    let vectors: Value = serde_json::from_str(VECTORS).expect("vectors parse");
    let github = &vectors["github"];
    let body = github["body"].as_str().expect("vector body").to_string();
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;

    // The repository's hook, the organisation's hook, then GitHub's
    // "Redeliver" on the repository's hook: one delivery ID throughout.
    let mut numbers = Vec::new();
    for hook in ["111", "222", "111"] {
        let mut headers: Vec<(&str, &[u8])> = github["headers"]
            .as_object()
            .expect("vector headers")
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str().expect("header text").as_bytes()))
            .collect();
        headers.push(("X-GitHub-Hook-ID", hook.as_bytes()));
        let reply = caller::send("POST", &tunnel.url("/hooks/github"), &headers, body.clone()).await;
        assert_eq!(reply.status, 200);
        let (summary, number) = tunnel.next_delivery().await;
        assert_eq!(
            summary.event_key,
            github["headers"]["X-GitHub-Delivery"].as_str().expect("id")
        );
        numbers.push(number);
    }
    assert_eq!(numbers, [1, 1, 2], "live lines");

    let store = portpreview::store::Store::open(&tunnel.db).expect("open the history");
    let mut counts: Vec<(i64, i64)> = store
        .list(&portpreview::store::ListQuery::default())
        .expect("list")
        .iter()
        .map(|s| (s.id, s.delivery_count))
        .collect();
    counts.sort_unstable();
    assert_eq!(counts, [(1, 2), (2, 1), (3, 2)], "history's delivery counts");
    let shown = portpreview_async(&tunnel.db, &["show", "2"]).await;
    assert!(
        shown
            .stdout
            .contains("(header:X-GitHub-Delivery, hook 222; the only delivery of this event)"),
        "show says what counts it apart: {}",
        shown.stdout
    );
}

/// Two providers may spell their IDs alike (Stripe's and Paddle's both
/// start `evt_`): one's event is never counted as a retry of the other's,
/// and replaying the key says it names two events.
#[tokio::test]
async fn one_id_from_two_providers_is_two_events() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let stripe: &[(&str, &[u8])] = &[("Stripe-Signature", b"t=1700000000,v1=00")];
    let paddle: &[(&str, &[u8])] = &[("Paddle-Signature", b"ts=1700000000;h1=00")];
    let sent = [
        (
            "/hooks/stripe",
            stripe,
            r#"{"id":"evt_shared","object":"event","type":"charge.succeeded"}"#,
        ),
        (
            "/hooks/paddle",
            paddle,
            r#"{"event_id":"evt_shared","event_type":"transaction.completed"}"#,
        ),
        (
            "/hooks/stripe",
            stripe,
            r#"{"id":"evt_shared","object":"event","type":"charge.succeeded"}"#,
        ),
    ];
    let mut seen = Vec::new();
    for (path, headers, body) in sent {
        let reply = caller::send("POST", &tunnel.url(path), headers, body.to_string()).await;
        assert_eq!(reply.status, 200);
        let (summary, number) = tunnel.next_delivery().await;
        seen.push((summary.provider.unwrap_or_default(), summary.event_key, number));
    }
    let seen: Vec<(&str, &str, i64)> = seen.iter().map(|(p, k, n)| (p.as_str(), k.as_str(), *n)).collect();
    assert_eq!(
        seen,
        [
            ("stripe", "evt_shared", 1),
            ("paddle", "evt_shared", 1),
            ("stripe", "evt_shared", 2)
        ],
        "live lines"
    );
    let listed = portpreview_async(&tunnel.db, &["history", "--json"]).await;
    let rows: Vec<Value> = serde_json::from_str(&listed.stdout).expect("history --json");
    let counts: Vec<(&str, i64)> = rows
        .iter()
        .map(|row| {
            (
                row["provider"].as_str().unwrap_or(""),
                row["delivery_count"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        counts,
        [("stripe", 2), ("paddle", 1), ("stripe", 2)],
        "{}",
        listed.stdout
    );

    let replayed = portpreview_async(&tunnel.db, &["replay", "evt_shared"]).await;
    assert_eq!(replayed.code, 0, "{}", replayed.stderr);
    assert!(
        replayed.stderr.contains("note: 2 events share this key"),
        "{}",
        replayed.stderr
    );
}

/// A compressed delivery is keyed by the event inside it, as `show`
/// shows it decoded: its retry is the 2nd delivery of `evt_…`, not of a
/// hash of the compressed bytes.
#[tokio::test]
async fn a_gzipped_event_is_keyed_by_its_id() {
    use std::io::Write;
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gzip.write_all(br#"{"id":"evt_gzipped","object":"event","type":"charge.succeeded"}"#)
        .expect("compress");
    let body = gzip.finish().expect("compress");
    let headers: &[(&str, &[u8])] = &[
        ("Stripe-Signature", b"t=1700000000,v1=00"),
        ("Content-Type", b"application/json"),
        ("Content-Encoding", b"gzip"),
    ];
    let mut seen = Vec::new();
    for _ in 0..2 {
        let reply = caller::send("POST", &tunnel.url("/hooks/stripe"), headers, body.clone()).await;
        assert_eq!(reply.status, 200);
        let (summary, number) = tunnel.next_delivery().await;
        seen.push((summary.event_key, summary.event_key_source, number));
    }
    let key = |number| ("evt_gzipped".to_owned(), "body:/id".to_owned(), number);
    assert_eq!(seen, [key(1), key(2)]);
}

/// A GitHub delivery without its delivery ID is keyed by its content and,
/// like any content key, counted per method and path: within its hook too.
#[tokio::test]
async fn a_github_delivery_keyed_by_its_content_is_counted_per_path_within_its_hook() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let headers: &[(&str, &[u8])] = &[("X-GitHub-Event", b"ping"), ("X-GitHub-Hook-ID", b"7")];
    let mut numbers = Vec::new();
    for (method, path) in [("POST", "/orders"), ("PUT", "/users"), ("POST", "/orders")] {
        let reply = caller::send(method, &tunnel.url(path), headers, r#"{"zen":"x"}"#.to_string()).await;
        assert_eq!(reply.status, 200);
        let (summary, number) = tunnel.next_delivery().await;
        assert_eq!(
            (summary.provider.as_deref(), summary.event_key_source.as_str()),
            (Some("github"), "sha256:body")
        );
        numbers.push(number);
    }
    assert_eq!(numbers, [1, 1, 2], "a PUT to /users is no retry of a POST to /orders");
}

#[tokio::test]
async fn requests_with_empty_bodies_and_no_id_are_never_counted_as_retries() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::start(|_| Answer::default()).await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    for (method, path) in [("GET", "/health"), ("GET", "/favicon.ico"), ("POST", "/other")] {
        let reply = caller::send(method, &tunnel.url(path), &[], "").await;
        assert_eq!(reply.status, 200);
        let (summary, delivery_number) = tunnel.next_delivery().await;
        assert_eq!(summary.path, path);
        assert_eq!(
            (summary.event_key.as_str(), summary.event_key_source.as_str()),
            ("", "none")
        );
        assert_eq!(delivery_number, 1, "{path} is no retry of the one before");
    }
}

/// `--key-fields` keys provider-less events by the fields named, a dotted
/// name reaching into the body; a body lacking one of them is keyed by its
/// content, so events of one type are never counted as retries of another.
#[tokio::test]
async fn key_fields_group_resends_of_one_event_and_nothing_else() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::start(|_| Answer::default()).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let (mut client, url) = Running::tunnel_with(
        &handler.url(),
        &relay.http_url(),
        &db,
        dir.path(),
        &["--key-fields", "type,data.object.id"],
    )
    .await;
    let bodies = [
        r#"{"type":"invoice.paid","data":{"object":{"id":"in_1"}},"sent":1}"#,
        r#"{"type":"invoice.paid","data":{"object":{"id":"in_1"}},"sent":2}"#,
        r#"{"type":"invoice.paid","invoice":"in_2"}"#,
        r#"{"type":"invoice.paid","invoice":"in_3"}"#,
    ];
    let mut lines = Vec::new();
    for body in bodies {
        assert_eq!(caller::post(&format!("{url}/hook"), body).await.status, 200);
        lines.push(client.line_containing("POST /hook").await);
    }
    let retried: Vec<bool> = lines
        .iter()
        .map(|line| line.ends_with("(2nd delivery, same key fields)"))
        .collect();
    assert_eq!(retried, [false, true, false, false], "the live lines: {lines:#?}");
    let listed = portpreview_async(&db, &["history", "--json"]).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let rows: Vec<Value> = serde_json::from_str(&listed.stdout).expect("a JSON array");
    let oldest_first: Vec<(&str, i64)> = rows
        .iter()
        .rev()
        .map(|r| {
            (
                r["event_key_source"].as_str().unwrap(),
                r["delivery_number"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        oldest_first,
        [
            ("sha256:fields(type,data.object.id)", 1),
            ("sha256:fields(type,data.object.id)", 2),
            ("sha256:body", 1),
            ("sha256:body", 1),
        ],
        "{}",
        listed.stdout
    );
}

/// Two orders numbered past 64 bits are two events, and a resend of one
/// is its 2nd delivery: parsed, the two numbers would be one float.
#[tokio::test]
async fn numbers_past_64_bits_keep_their_events_apart() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::start(|_| Answer::default()).await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let mut numbers = Vec::new();
    for order in [
        "123456789012345678901234567890",
        "123456789012345678901234567999",
        "123456789012345678901234567890",
    ] {
        let reply = caller::post(&tunnel.url("/orders"), format!(r#"{{"order":{order}}}"#)).await;
        assert_eq!(reply.status, 200);
        let (summary, number) = tunnel.next_delivery().await;
        assert_eq!(summary.event_key_source, "sha256:body");
        numbers.push(number);
    }
    assert_eq!(numbers, [1, 1, 2]);
}

#[tokio::test]
async fn deliveries_answered_while_another_process_holds_the_history_lock_are_kept() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::start(|_| Answer::default()).await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let blocker = rusqlite::Connection::open(&tunnel.db).expect("open the history");
    blocker.execute_batch("BEGIN IMMEDIATE").expect("take the write lock");
    for n in 0..3 {
        let reply = caller::post(&tunnel.url("/hook"), format!(r#"{{"id":"evt_locked_{n}"}}"#)).await;
        assert_eq!(reply.status, 200, "forwarding goes on while the history is locked");
    }
    // The writer's first two tries outwait the store's busy timeout (another
    // tunnel's long write is waited out once), then the user is told, in
    // the line the TUI shows and `--no-tui` prints.
    let reason = loop {
        match tunnel.next_event().await {
            TunnelEvent::HistoryRefusing { reason: Some(reason) } => break reason,
            TunnelEvent::Delivered { summary, .. } => panic!("stored under another's lock: {summary:?}"),
            _ => {}
        }
    };
    assert!(reason.contains("locked by another process"), "{reason}");
    // Meanwhile a listing leaves them out, and says so.
    let listed = portpreview_async(&tunnel.db, &["history", "--json"]).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert_eq!(listed.stdout.trim(), "[]");
    assert_eq!(
        listed.stderr,
        "note: 3 deliveries a running tunnel forwarded are not in the history yet: its writer is behind \
         (a burst on a busy machine, another process holding the history's write lock, or a full disk), and stores \
         them once it can\n"
    );
    blocker.execute_batch("ROLLBACK").expect("let go of the lock");

    let mut stored = Vec::new();
    let mut resumed = false;
    while stored.len() < 3 || !resumed {
        match tunnel.next_event().await {
            TunnelEvent::Delivered { summary, .. } => {
                assert!(summary.id > 0, "{summary:?}");
                stored.push(summary.event_key);
            }
            TunnelEvent::HistoryRefusing { reason: None } => resumed = true,
            _ => {}
        }
    }
    stored.sort();
    stored.dedup();
    assert_eq!(stored.len(), 3, "three deliveries, each stored: {stored:?}");
}

/// A caller gone while its answer was on its way to a far relay: the
/// client sent the whole answer, and recorded it, a round trip before the
/// relay's word that nobody took it. The history must not keep a 200 the
/// caller never got. Such a caller closes its side of the connection as
/// soon as it has sent (`nc -N`), which proxies take for gone.
#[tokio::test]
async fn a_caller_gone_while_its_answer_was_on_its_way_is_not_recorded_as_answered() {
    let relay = TestRelay::start().await;
    let link = common::link::far_link(relay.addr, Duration::from_millis(150)).await;
    let handler = LocalHandler::start(|_| Answer {
        status: 200,
        body: b"credited".to_vec(),
        ..Answer::default()
    })
    .await;
    let mut tunnel = TestTunnel::start(&format!("http://{}", link.addr), &handler.url()).await;
    let mut caller = posted(relay.addr, &tunnel, "/hook").await;
    handler.wait_for_request().await;
    caller.shutdown().await.expect("close the sending side");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), caller.read_to_end(&mut answer))
        .await
        .expect("the relay closes the connection")
        .expect("read");
    assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));

    let (shown, amended) = shown_then_amended(&mut tunnel).await;
    let reason = "the caller went away before the answer; the handler then answered 200, which reached no caller";
    assert_eq!(
        (amended.id, amended.status, amended.error.as_deref()),
        (shown.id, None, Some(reason))
    );
    let stored = tunnel.stored(shown.id);
    let outcome = stored.outcome.expect("an outcome");
    assert_eq!((outcome.status, outcome.error.as_deref()), (None, Some(reason)));
    assert_eq!(outcome.response_body, b"credited", "the answer nobody received");
}

/// A caller that has sent `POST /t/<tunnel><path>` with a small body to
/// the relay at `relay`, and waits for its answer.
async fn posted(relay: std::net::SocketAddr, tunnel: &TestTunnel, path: &str) -> tokio::net::TcpStream {
    let mut caller = tokio::net::TcpStream::connect(relay).await.expect("connect");
    let request = format!(
        "POST /t/{}{path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}",
        tunnel.name()
    );
    caller.write_all(request.as_bytes()).await.expect("send");
    caller
}

/// The next delivery, shown answered 200, and the amendment of it that
/// follows.
async fn shown_then_amended(tunnel: &mut TestTunnel) -> (portpreview::store::Summary, portpreview::store::Summary) {
    let (shown, _) = tunnel.next_delivery().await;
    assert_eq!(
        (shown.status, shown.error.as_deref()),
        (Some(200), None),
        "shown as sent"
    );
    loop {
        if let TunnelEvent::Amended { summary, was: 200 } = tunnel.next_event().await {
            return (shown, summary);
        }
    }
}

/// A caller gone before a large answer's head reached the relay had no
/// status, though the client had sent the head when the relay's word came:
/// it is recorded as one that reached no caller, not as one that had the
/// status and headers.
#[tokio::test]
async fn a_caller_gone_before_a_large_answers_head_reached_the_relay_had_no_status() {
    let relay = TestRelay::start().await;
    let link = common::link::far_link(relay.addr, Duration::from_millis(150)).await;
    let handler = LocalHandler::start(|_| Answer {
        status: 200,
        body: vec![b'x'; 3 * 1024 * 1024],
        ..Answer::default()
    })
    .await;
    let mut tunnel = TestTunnel::start(&format!("http://{}", link.addr), &handler.url()).await;
    let caller = posted(relay.addr, &tunnel, "/download").await;
    handler.wait_for_request().await;
    drop(caller);

    let (summary, _) = tunnel.next_delivery().await;
    let reason = "the caller went away before the answer; the handler then answered 200, which reached no caller";
    assert_eq!((summary.status, summary.error.as_deref()), (None, Some(reason)));
}

/// The same for a caller gone during a streamed answer, its head read: the
/// client had sent the body's end, and recorded a clean 200, before the
/// relay's word that the caller left without it. The history keeps the
/// status the caller had, and says it did not have the whole body.
#[tokio::test]
async fn a_caller_gone_while_a_streamed_answer_was_on_its_way_keeps_only_the_status() {
    let relay = TestRelay::start().await;
    let link = common::link::far_link(relay.addr, Duration::from_millis(150)).await;
    // Writes its answer's head and a first piece at once, the end 300 ms on.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let handler = listener.local_addr().expect("address");
    let _serving = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else {
            return;
        };
        let Some(head) = caller::read_head(&mut socket).await else {
            return;
        };
        let mut body = vec![0; caller::declared_length(&String::from_utf8_lossy(&head))];
        if socket.read_exact(&mut body).await.is_err() {
            return;
        }
        let first = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n";
        if socket.write_all(first.as_bytes()).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let _ = socket.write_all(b"4\r\nlast\r\n0\r\n\r\n").await;
        }
        let _ = socket.read(&mut [0; 1]).await;
    }));
    let mut tunnel = TestTunnel::start(&format!("http://{}", link.addr), &format!("http://{handler}")).await;
    let mut caller = posted(relay.addr, &tunnel, "/hook").await;
    let head = caller::read_head(&mut caller).await.expect("the answer's head");
    assert!(head.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&head));
    // After the client sent the end, 300 ms after the head left it, and
    // before it reaches the relay, 150 ms later.
    tokio::time::sleep(Duration::from_millis(225)).await;
    drop(caller);

    let (shown, amended) = shown_then_amended(&mut tunnel).await;
    let reason = "the caller went away during the answer: the caller had the status and headers, not the whole body";
    assert_eq!(
        (amended.id, amended.status, amended.error.as_deref()),
        (shown.id, Some(200), Some(reason))
    );
}

/// The handler is not cut off when its caller hangs up, as a server goes on
/// after its client has gone: its answer is kept, the first half of the
/// duplicate the provider's retry will make.
#[tokio::test]
async fn a_caller_that_hangs_up_is_recorded_with_the_reason_and_the_answer_it_missed() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::start(|_| Answer {
        status: 200,
        body: b"credited".to_vec(),
        delay: Duration::from_secs(3),
        ..Answer::default()
    })
    .await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let path = format!("/t/{}/slow", tunnel.name());
    let mut caller = tokio::net::TcpStream::connect(relay.addr).await.expect("connect");
    let request = format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n\r\n{{\"id\":\"evt_gone\"}}");
    caller.write_all(request.as_bytes()).await.expect("send");
    handler.wait_for_request().await;
    drop(caller);

    let (summary, _) = tunnel.next_delivery().await;
    let reason = "the caller went away before the answer; the handler then answered 200, which reached no caller";
    assert!(summary.id > 0, "{summary:?}");
    assert_eq!(summary.error.as_deref(), Some(reason));
    assert_eq!(summary.status, None, "no caller got a status");
    let store = portpreview::store::Store::open(&tunnel.db).expect("open the history");
    let stored = store.get(summary.id).expect("read").expect("the delivery");
    assert_eq!(stored.request.request_body, br#"{"id":"evt_gone"}"#);
    let outcome = stored.outcome.expect("the hang-up is stored as its outcome");
    assert_eq!(outcome.error.as_deref(), Some(reason));
    assert_eq!(outcome.response_body, b"credited", "the answer nobody received");
}

#[tokio::test]
async fn a_body_cut_short_by_its_caller_never_reaches_the_handler_and_is_kept_marked_cut() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::start(|_| Answer::default()).await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let path = format!("/t/{}/upload", tunnel.name());
    // Closed (FIN), then reset (RST, as a process killed mid-upload does).
    let mut summary = None;
    for reset in [false, true] {
        let mut caller = tokio::net::TcpStream::connect(relay.addr).await.expect("connect");
        // Over one chunk, so the relay streams it instead of reading it whole.
        let head = format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n");
        caller.write_all(head.as_bytes()).await.expect("send the head");
        caller.write_all(&[b'x'; 100_000]).await.expect("send half the body");
        caller.flush().await.expect("flush");
        if reset {
            // Deprecated for the wait a lingering close makes; a zero linger
            // makes none: the close resets at once.
            #[allow(deprecated)]
            caller.set_linger(Some(Duration::ZERO)).expect("linger 0");
        }
        drop(caller);
        let (recorded, _) = tunnel.next_delivery().await;
        assert_eq!(
            recorded.error.as_deref(),
            Some("the caller went away before its request body was complete; it was not forwarded"),
            "reset: {reset}"
        );
        summary = Some(recorded);
    }
    let summary = summary.expect("recorded");
    assert!(summary.id > 0, "{summary:?}");
    assert!(summary.error.is_some(), "{summary:?}");
    assert!(handler.requests().is_empty(), "the handler got a cut body as if whole");
    let store = portpreview::store::Store::open(&tunnel.db).expect("open the history");
    let stored = store.get(summary.id).expect("read").expect("the delivery");
    assert_eq!(
        stored.request.request_body_size, 200_000,
        "the size the caller declared"
    );
    assert!(stored.request.request_body.len() < 200_000);
    assert!(
        stored.request.request_truncated(),
        "marked cut short, so replay refuses it"
    );
}

#[tokio::test]
async fn a_request_the_relay_gave_up_on_is_recorded_with_the_relays_reason() {
    let relay = TestRelay::answering_within(Duration::from_millis(300)).await;
    let handler = LocalHandler::slow(Duration::from_secs(3)).await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;

    let reply = caller::post(&tunnel.url("/slow"), r#"{"id":"evt_late"}"#).await;
    assert_eq!(reply.status, 504, "{}", reply.text());

    let (summary, _) = tunnel.next_delivery().await;
    let reason = "no answer within 300ms; the relay answered the caller 504; the handler then answered 200, which \
                  reached no caller";
    assert!(summary.id > 0, "{summary:?}");
    assert_eq!(summary.error.as_deref(), Some(reason));
    let store = portpreview::store::Store::open(&tunnel.db).expect("open the history");
    let stored = store.get(summary.id).expect("read").expect("the delivery");
    let outcome = stored.outcome.expect("the relay's timeout is stored as the outcome");
    assert_eq!(outcome.error.as_deref(), Some(reason));
}

#[tokio::test]
async fn a_client_killed_mid_burst_keeps_every_answered_delivery_and_readers_never_see_a_lock() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let db_arg = db.to_str().expect("utf-8 path").to_string();
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let (mut client, url) = Running::tunnel(&handler.url(), &relay.http_url(), &db, dir.path()).await;

    // Two readers list the history over and over while the tunnel writes,
    // until it is killed. A lock is a failure even when `history` gets
    // past it: a warning on stderr with exit 0 counts too.
    let killed = tokio_util::sync::CancellationToken::new();
    // A run that ends after the kill may be the first to open the history
    // since: it then tells, once, of the answers the dead tunnel never
    // recorded. That is no lock, and it says nothing before the kill.
    let kill_sent = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let db = db_arg.clone();
            let killed = killed.clone();
            let kill_sent = kill_sent.clone();
            tokio::spawn(async move {
                let (mut runs, mut failures) = (0, Vec::new());
                while !killed.is_cancelled() {
                    let out = tokio::process::Command::new(portpreview_bin())
                        .args(["history", "--json", "--limit", "20", "--db", &db])
                        .env("PORTPREVIEW_CONFIG", "/dev/null")
                        .output()
                        .await
                        .expect("run history");
                    runs += 1;
                    let told_of_the_kill = kill_sent.load(std::sync::atomic::Ordering::SeqCst)
                        && out.status.success()
                        && out.stderr.starts_with(b"note: a tunnel stopped without a word")
                        && out.stderr.iter().filter(|&&b| b == b'\n').count() == 1;
                    if !told_of_the_kill && (!out.status.success() || !out.stderr.is_empty()) {
                        failures.push(format!(
                            "exit {:?}: {}",
                            out.status.code(),
                            String::from_utf8_lossy(&out.stderr)
                        ));
                    }
                }
                (runs, failures)
            })
        })
        .collect();

    // A burst of 400 deliveries, 16 at a time; the client dies part-way.
    let (answered_tx, mut answered_rx) = tokio::sync::mpsc::unbounded_channel();
    let burst = tokio::spawn(async move {
        use futures_util::StreamExt;
        let mut calls = futures_util::stream::iter(0..400)
            .map(|i| {
                let url = format!("{url}/burst/{i}");
                async move {
                    (
                        i,
                        tokio::time::timeout(Duration::from_secs(10), caller::post(&url, format!("{{\"n\":{i}}}")))
                            .await,
                    )
                }
            })
            .buffer_unordered(16);
        while let Some((i, reply)) = calls.next().await {
            if let Ok(reply) = reply {
                if (200..300).contains(&reply.status) {
                    let _ = answered_tx.send(i);
                }
            }
        }
    });
    let mut answered = HashSet::new();
    while answered.len() < 120 {
        answered.insert(answered_rx.recv().await.expect("deliveries answered before the kill"));
    }
    kill_sent.store(true, std::sync::atomic::Ordering::SeqCst);
    client.signal("KILL");
    let _ = client.exit_code(Duration::from_secs(10)).await;
    killed.cancel();
    burst.await.expect("burst task");
    while let Ok(i) = answered_rx.try_recv() {
        answered.insert(i);
    }
    for reader in readers {
        let (runs, failures) = reader.await.expect("reader task");
        assert!(runs > 0, "the reader ran while the tunnel wrote");
        assert!(
            failures.is_empty(),
            "history failed or warned while the tunnel wrote: {failures:?}"
        );
    }

    let inboxes = || {
        std::fs::read_dir(dir.path())
            .expect("read the history's directory")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("history.db-inbox-"))
            .count()
    };
    // Reopened as a user would: requests that were on disk in the killed
    // client's inbox but not yet in SQLite are moved in on the way (if a
    // reader above came after the kill, it already did).
    let reopened = tokio::process::Command::new(portpreview_bin())
        .args(["history", "--json", "--limit", "1", "--db", &db_arg])
        .env("PORTPREVIEW_CONFIG", "/dev/null")
        .output()
        .await
        .expect("run history");
    assert!(
        reopened.status.success(),
        "{}",
        String::from_utf8_lossy(&reopened.stderr)
    );
    assert_eq!(inboxes(), 0, "reopening moved the inbox into the history");
    let conn = rusqlite::Connection::open(&db).expect("reopen the killed client's history");
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .expect("integrity check");
    assert_eq!(integrity, "ok");
    let mut stored = HashSet::new();
    let mut paths = conn.prepare("SELECT path FROM deliveries").expect("query");
    for path in paths.query_map([], |row| row.get::<_, String>(0)).expect("rows") {
        if let Some(n) = path
            .expect("path")
            .strip_prefix("/burst/")
            .and_then(|n| n.parse::<u32>().ok())
        {
            stored.insert(n);
        }
    }
    let lost: Vec<_> = answered.difference(&stored).collect();
    assert!(lost.is_empty(), "answered 2xx but missing from the history: {lost:?}");
    let waiting: Vec<String> = conn
        .prepare(
            "SELECT path FROM deliveries d
             WHERE NOT EXISTS (SELECT 1 FROM outcomes o WHERE o.delivery_id = d.id)",
        )
        .expect("query")
        .query_map([], |row| row.get(0))
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("paths");
    assert!(
        waiting.is_empty(),
        "still shown as waiting for an answer that died with the client: {waiting:?}"
    );
}

#[tokio::test]
async fn a_delivery_whose_client_was_killed_before_the_answer_is_not_shown_waiting_for_good() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let relay = TestRelay::start().await;
    let handler = LocalHandler::slow(Duration::from_secs(30)).await;
    let (mut client, url) = Running::tunnel(&handler.url(), &relay.http_url(), &db, dir.path()).await;
    let caller = tokio::spawn(async move { caller::post(&format!("{url}/slow"), "{\"id\":\"evt_cut\"}").await });

    // The request is in SQLite, its answer not yet come.
    let store = portpreview::store::Store::open(&db).expect("open the history");
    let started = std::time::Instant::now();
    while store.list(&Default::default()).expect("list").is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the request never reached the history"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(store);
    client.signal("KILL");
    let _ = client.exit_code(Duration::from_secs(10)).await;
    assert_eq!(
        caller.await.expect("caller task").status,
        502,
        "the relay answers for the dead client"
    );

    // The next process to open the history gives it an outcome.
    let store = portpreview::store::Store::open(&db).expect("reopen the history");
    let listed = store.list(&Default::default()).expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].status, listed[0].error.as_deref()),
        (None, Some("PortPreview stopped before it recorded the answer"))
    );
    // How long it took died with the process: unknown, not 0 ms.
    assert_eq!(listed[0].duration_ms, None);
    let listed = std::process::Command::new(portpreview_bin())
        .args(["history", "--json", "--db", db.to_str().expect("utf-8 path")])
        .env("PORTPREVIEW_CONFIG", "/dev/null")
        .output()
        .expect("run history");
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("history --json");
    assert_eq!(
        listed[0]["duration_ms"],
        serde_json::Value::Null,
        "no time is made up: {listed}"
    );
}

#[tokio::test]
async fn a_large_body_retried_is_stored_once_and_every_delivery_reads_it_whole() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::start(|_| Answer::default()).await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let body: Vec<u8> = (0..2 * 1024 * 1024).map(|i: u32| (i % 251) as u8).collect();
    let mut ids = Vec::new();
    for attempt in 1..=5 {
        let reply = caller::post(&tunnel.url("/hooks/export"), body.clone()).await;
        assert_eq!(reply.status, 200);
        let (summary, delivery_number) = tunnel.next_delivery().await;
        assert_eq!(delivery_number, attempt, "each retry counts as the same event");
        ids.push(summary.id);
    }

    let conn = rusqlite::Connection::open(&tunnel.db).expect("open the history file");
    conn.busy_timeout(Duration::from_secs(5)).expect("busy timeout");
    let busy: i64 = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))
        .expect("checkpoint");
    assert_eq!(busy, 0, "the history's log was emptied into the file");
    drop(conn);
    let size = std::fs::metadata(&tunnel.db).expect("history file").len();
    assert!(
        size < body.len() as u64 * 3 / 2,
        "five deliveries of a 2 MiB body left a {size}-byte history"
    );

    let store = portpreview::store::Store::open(&tunnel.db).expect("open the history");
    for id in ids {
        let stored = store.get(id).expect("read").expect("delivery in the history");
        assert!(
            stored.request.request_body == body,
            "delivery #{id} reads its whole body"
        );
        assert_eq!(stored.request.request_body_size, body.len() as u64);
    }
}

#[tokio::test]
async fn a_delivery_forwarded_with_the_callers_host_is_replayed_and_exported_with_it() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let options = TunnelOptions {
        host_header: HostHeader::Preserve,
        ..TunnelOptions::default()
    };
    let mut tunnel = TestTunnel::start_with(&relay.http_url(), &handler.url(), options)
        .await
        .expect("tunnel connects");
    let reply = caller::post(&tunnel.url("/hook"), r#"{"id":"evt_host"}"#).await;
    assert_eq!(reply.status, 200);
    let (summary, _) = tunnel.next_delivery().await;
    let callers_host = handler.requests()[0].header("host").expect("a Host header");
    assert_ne!(
        callers_host,
        handler.addr.to_string(),
        "the caller's Host reached the handler"
    );
    let id = summary.id.to_string();

    let replayed = portpreview_async(&tunnel.db, &["replay", &id]).await;
    assert_eq!(replayed.code, 0, "{}", replayed.stderr);
    assert_eq!(
        handler.requests()[1].header("host"),
        Some(callers_host.clone()),
        "a replay sends the Host the handler got"
    );

    let fixture: Value =
        serde_json::from_str(&portpreview_async(&tunnel.db, &["export", &id]).await.stdout).expect("a JSON fixture");
    assert_eq!(fixture["host_preserved"], true, "{fixture:#}");

    let curl = portpreview_async(&tunnel.db, &["export", &id, "--format", "curl"])
        .await
        .stdout;
    let sent = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&curl)
        .output()
        .await
        .expect("sh runs");
    assert!(
        sent.status.success(),
        "{curl}\n{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    assert_eq!(
        handler.requests()[2].header("host"),
        Some(callers_host),
        "the curl export sends it too: {curl}"
    );
}

/// Moves another history, holding one delivery to `path`, over `db`.
fn move_over(db: &std::path::Path, path: &str) {
    let other = db.with_extension("other");
    let moved_in = NewDelivery {
        received_at_ms: 1_700_000_000_000,
        method: "POST".into(),
        path: path.into(),
        ..NewDelivery::default()
    };
    Store::open(&other)
        .expect("another history")
        .insert_delivery(&moved_in, &Outcome::default())
        .expect("its delivery");
    std::fs::rename(&other, db).expect("move it over");
}

/// The paths of the deliveries `history --json` lists in `db`, newest first.
async fn paths_in(db: &std::path::Path) -> Vec<String> {
    let listed = portpreview_async(db, &["history", "--json"]).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let rows: Vec<Value> = serde_json::from_str(&listed.stdout).expect("a JSON array");
    rows.iter()
        .map(|r| r["path"].as_str().expect("path").to_owned())
        .collect()
}

/// A history deleted while the tunnel runs is started anew at its path,
/// and one moved over it is taken up as it is: the deliveries after go
/// where `history` looks, not into the file that was there, and the
/// tunnel says so.
#[tokio::test]
async fn a_history_deleted_or_replaced_while_the_tunnel_runs_is_taken_up_where_it_was() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let log = dir.path().join("client.log");
    let (mut client, url) = Running::tunnel_logging(&handler.url(), &relay.http_url(), &db, dir.path(), &log).await;

    assert_eq!(caller::post(&format!("{url}/before"), "1").await.status, 200);
    client.line_containing("POST /before").await;
    std::fs::remove_file(&db).expect("delete the history");
    assert_eq!(caller::post(&format!("{url}/after"), "2").await.status, 200);
    client.line_containing("POST /after").await;

    assert_eq!(paths_in(&db).await, ["/after"], "only what came after the deletion");

    // Another history moved over it, the tunnel's WAL still full: the one
    // moved in keeps what it held, and takes what comes next.
    move_over(&db, "/other");
    assert_eq!(caller::post(&format!("{url}/later"), "3").await.status, 200);
    client.line_containing("POST /later").await;
    assert_eq!(
        paths_in(&db).await,
        ["/later", "/other"],
        "the moved-in history, and what came after"
    );
    client.signal("TERM");
    assert_eq!(client.exit_code(Duration::from_secs(10)).await, Some(0));
    let said = std::fs::read_to_string(&log).expect("client log");
    for (how, where_) in [
        ("moved away or deleted", "in a new one there"),
        ("replaced", "in the one there now"),
    ] {
        let line = format!(
            "warning: the history {} was {how}: deliveries are recorded {where_}",
            db.display()
        );
        assert!(said.contains(&line), "{line} in {said}");
    }
}

/// A history moved away while the tunnel writes keeps what the tunnel
/// wrote to it; one moved over the tunnel's just before the tunnel stops
/// keeps its own deliveries, with no write after to notice the move.
#[tokio::test]
async fn a_history_moved_away_or_over_just_before_a_stop_keeps_its_deliveries() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let (mut client, url) = Running::tunnel(&handler.url(), &relay.http_url(), &db, dir.path()).await;

    assert_eq!(caller::post(&format!("{url}/kept"), "1").await.status, 200);
    client.line_containing("POST /kept").await;
    let elsewhere = dir.path().join("elsewhere.db");
    std::fs::rename(&db, &elsewhere).expect("move it away");
    assert_eq!(caller::post(&format!("{url}/next"), "2").await.status, 200);
    client.line_containing("POST /next").await;
    assert_eq!(paths_in(&elsewhere).await, ["/kept"], "the moved history whole");
    assert_eq!(paths_in(&db).await, ["/next"]);

    move_over(&db, "/other");
    client.signal("TERM");
    assert_eq!(client.exit_code(Duration::from_secs(10)).await, Some(0));
    assert_eq!(paths_in(&db).await, ["/other"], "the moved-in history as it was");
    assert_eq!(paths_in(&elsewhere).await, ["/kept"]);
}

/// A body still arriving when the relay gives up on the exchange (past
/// its upload limit, ten times its answer timeout): the history says the
/// relay's reason, not that the body stopped, as well as that the handler
/// got only part of it.
#[tokio::test]
async fn a_body_the_relay_gave_up_on_part_way_is_recorded_with_the_relays_reason() {
    let relay = TestRelay::answering_within(Duration::from_secs(1)).await;
    let handler = LocalHandler::start(|_| Answer::default()).await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let path = format!("/t/{}/upload", tunnel.name());
    let mut caller = tokio::net::TcpStream::connect(relay.addr).await.expect("connect");
    // Past what the client reads whole before forwarding: the handler
    // gets the start of the body while the rest is on its way.
    let head = format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 4000000\r\n\r\n");
    caller.write_all(head.as_bytes()).await.expect("send the head");
    caller.write_all(&[b'x'; 2_000_000]).await.expect("send half the body");
    // A slow link: the body keeps coming, too slowly to finish in time.
    let trickle = async {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if caller.write_all(b"x").await.is_err() {
                break;
            }
        }
    };
    let recorded = tokio::select! {
        () = trickle => tunnel.next_delivery().await.0,
        (recorded, _) = tunnel.next_delivery() => recorded,
    };
    let error = recorded.error.unwrap_or_default();
    assert!(
        error.starts_with("the request body was still arriving after 10s; the relay answered the caller 408"),
        "{error}"
    );
    assert!(error.ends_with("; the handler got only part of its body"), "{error}");
}

#[tokio::test]
async fn a_delivery_is_in_the_history_as_soon_as_its_caller_has_heard_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let relay = TestRelay::start().await;
    // Slower than the writer's batching window: each request is stored
    // before its answer comes.
    let handler = LocalHandler::slow(Duration::from_millis(50)).await;
    let (_client, url) = Running::tunnel(&handler.url(), &relay.http_url(), &db, dir.path()).await;
    // `curl … && portpreview replay --latest`: each reader opens the
    // history the moment its caller has the answer, as the commands do,
    // within the writer's batching window.
    for i in 0..15 {
        let reply = caller::post(&format!("{url}/hooks/{i}"), format!(r#"{{"n":{i}}}"#)).await;
        assert_eq!(reply.status, 200);
        let newest = Store::open_existing(&db)
            .and_then(|store| {
                store.list(&portpreview::store::ListQuery {
                    limit: Some(1),
                    ..Default::default()
                })
            })
            .expect("read the history");
        let newest = newest.first().map(|d| (d.path.as_str(), d.status));
        assert_eq!(
            newest,
            Some((&*format!("/hooks/{i}"), Some(200))),
            "delivery {i}, with its answer"
        );
    }
}

/// A tunnel whose handler holds its answer to a 3 MiB request until
/// `release`, once that request is in the history: a body too large to set
/// aside before the handler sees it streams to the handler, and is recorded
/// once it has all gone there.
struct LargeRequestHeld {
    dir: tempfile::TempDir,
    client: Running,
    release: tokio_util::sync::CancellationToken,
    caller: tokio::task::JoinHandle<caller::Reply>,
    _relay: TestRelay,
    _handler: LocalHandler,
}

impl LargeRequestHeld {
    async fn start() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let relay = TestRelay::start().await;
        let release = tokio_util::sync::CancellationToken::new();
        let handler = LocalHandler::holding("/large", release.clone()).await;
        let db = dir.path().join("history.db");
        let (client, url) = Running::tunnel(&handler.url(), &relay.http_url(), &db, dir.path()).await;
        let large = format!("{url}/large");
        let caller = tokio::spawn(async move { caller::post(&large, vec![b'x'; 3 * 1024 * 1024]).await });
        handler.wait_for_request().await;
        let held = Self {
            dir,
            client,
            release,
            caller,
            _relay: relay,
            _handler: handler,
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while held.stored().is_none() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the request was not in the history while the handler held it"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        held
    }

    fn db(&self) -> std::path::PathBuf {
        self.dir.path().join("history.db")
    }

    /// The large request as the history holds it, if it does.
    fn stored(&self) -> Option<portpreview::store::Delivery> {
        Store::open_existing(&self.db())
            .and_then(|store| store.get(1))
            .ok()
            .flatten()
    }

    /// Lets the handler answer, and `show 1 --json` once the caller is done.
    async fn release_and_show(self) -> Value {
        let db = self.db();
        self.release.cancel();
        let _ = self.caller.await;
        let shown = portpreview_async(&db, &["show", "1", "--json"]).await;
        serde_json::from_str(&shown.stdout).expect("show --json")
    }
}

/// Once its body has all gone to the handler, a large request is in the
/// history while the handler works on it, as a small one is: a tunnel
/// killed then leaves it recorded, body and all, and not lost.
#[tokio::test]
async fn a_large_request_is_in_the_history_while_the_handler_works_on_it() {
    let mut held = LargeRequestHeld::start().await;
    let stored = held.stored().expect("recorded");
    assert_eq!(
        (stored.request.path.as_str(), stored.outcome.is_none()),
        ("/large", true),
        "waiting for its answer"
    );

    held.client.signal("KILL");
    // Gone before the history is read: the inbox of a tunnel still
    // running is its own, and no reader takes it in.
    assert_eq!(held.client.exit_code(Duration::from_secs(10)).await, None, "killed");
    let shown = held.release_and_show().await;
    assert_eq!(shown["request"]["body_size"], 3 * 1024 * 1024, "{shown}");
    assert!(
        shown["error"]
            .as_str()
            .is_some_and(|e| e.contains("stopped before it recorded the answer")),
        "{shown}"
    );
}

/// Stopped while the handler works on a large request, the tunnel keeps
/// it as stopped, as it does a small one: not as a crash, and its line
/// names it by its ID.
#[tokio::test]
async fn a_large_request_in_flight_when_the_tunnel_stops_is_kept_as_stopped() {
    let mut held = LargeRequestHeld::start().await;
    held.client.signal("TERM");
    let line = held.client.line_containing("/large").await;
    assert!(
        line.starts_with("#1 ") && line.contains("PortPreview was stopped before the answer came"),
        "{line}"
    );
    assert_eq!(held.client.exit_code(Duration::from_secs(10)).await, Some(0));
    let shown = held.release_and_show().await;
    assert_eq!(
        shown["error"], "PortPreview was stopped before the answer came",
        "{shown}"
    );
}

#[tokio::test]
async fn an_idle_tunnel_cuts_its_inbox_back_once_the_history_holds_what_it_held() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let (_client, url) = Running::tunnel(&handler.url(), &relay.http_url(), &db, dir.path()).await;
    let reply = caller::post(&format!("{url}/upload"), vec![b'x'; 6 * 1024 * 1024]).await;
    assert_eq!(reply.status, 200);
    let inbox_size = || {
        std::fs::read_dir(dir.path())
            .expect("read the history's folder")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("history.db-inbox-"))
            .map(|e| e.metadata().map_or(0, |m| m.len()))
            .sum::<u64>()
    };
    // No request follows, which used to be what cut it back.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while inbox_size() > 1024 * 1024 {
        assert!(
            std::time::Instant::now() < deadline,
            "the inbox still holds {} bytes",
            inbox_size()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `mv history.db old.db` with a request still at the handler: its answer,
/// which comes after the move, goes where its request is.
#[tokio::test]
async fn an_answer_that_comes_after_its_history_was_moved_away_is_stored_there() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let relay = TestRelay::start().await;
    let handler = LocalHandler::slow(Duration::from_millis(1500)).await;
    let (mut client, url) = Running::tunnel(&handler.url(), &relay.http_url(), &db, dir.path()).await;
    let call = format!("{url}/slow");
    let slow = tokio::spawn(async move { caller::post(&call, "1").await });
    // The request is in the history, its answer not yet.
    while !paths_in(&db).await.contains(&"/slow".to_owned()) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elsewhere = dir.path().join("elsewhere.db");
    std::fs::rename(&db, &elsewhere).expect("move it away");
    assert_eq!(slow.await.expect("caller task").status, 200);
    client.line_containing("POST /slow").await;
    assert_eq!(caller::post(&format!("{url}/next"), "2").await.status, 200);
    client.line_containing("POST /next").await;

    let listed = portpreview_async(&elsewhere, &["history", "--json"]).await;
    let rows: Vec<Value> = serde_json::from_str(&listed.stdout).expect("a JSON array");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (rows[0]["path"].as_str(), rows[0]["status"].as_u64()),
        (Some("/slow"), Some(200))
    );
    assert_eq!(paths_in(&db).await, ["/next"]);
}

/// A history that `portpreview http` creates holds signatures and bodies:
/// it is readable by its owner alone, whatever the umask would give. It is
/// a write-ahead log, so reading it never waits on the tunnel's writes.
#[tokio::test]
async fn the_history_a_real_tunnel_creates_is_for_its_owner_only_and_in_wal_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let (mut client, url) = Running::tunnel(&handler.url(), &relay.http_url(), &db, dir.path()).await;
    assert_eq!(caller::post(&format!("{url}/hook"), "{}").await.status, 200);
    client.line_containing("POST /hook").await;
    for file in ["history.db", "history.db-wal", "history.db-shm"] {
        let path = dir.path().join(file);
        if file != "history.db" && !path.exists() {
            continue;
        }
        let mode = std::fs::metadata(&path).expect("the history file").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{file} is for its owner only: {mode:o}");
    }
    client.signal("TERM");
    assert_eq!(client.exit_code(Duration::from_secs(10)).await, Some(0));
    // WAL lets `history` and `show` read while the tunnel writes. It is the
    // one setting the file itself keeps; the others are per connection.
    let conn = rusqlite::Connection::open(&db).expect("open the history");
    let journal: String = conn
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .expect("journal mode");
    assert_eq!(journal, "wal", "the history is in write-ahead-log mode");
}

/// A history others may read, made so by hand or by another tool, is not
/// quietly filled with payloads: the tunnel says so when it starts, and how
/// to mend it, and leaves its mode to the user.
#[tokio::test]
async fn a_tunnel_recording_into_a_history_others_may_read_says_so() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    drop(Store::open(&db).expect("a history"));
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).expect("chmod 644");
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let log = dir.path().join("stderr.log");
    let (mut client, _) = Running::tunnel_logging(&handler.url(), &relay.http_url(), &db, dir.path(), &log).await;
    client.signal("TERM");
    assert_eq!(client.exit_code(Duration::from_secs(10)).await, Some(0));
    let said = std::fs::read_to_string(&log).expect("stderr");
    let warning = format!(
        "warning: the history {} may be read by other users (mode 644), and it keeps every payload and signature: \
         chmod 600 {}",
        db.display(),
        db.display()
    );
    assert!(said.lines().any(|line| line == warning), "{said}");
    let mode = std::fs::metadata(&db).expect("the history").permissions().mode() & 0o777;
    assert_eq!(mode, 0o644, "the user's choice, left as it is");
}

/// A session cookie a caller sent through the tunnel is masked where the
/// history is shown or exported, and shown only when asked with `--reveal`.
#[tokio::test]
async fn a_cookie_sent_through_the_tunnel_is_masked_in_show_and_har_unless_revealed() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let cookie = "session=ck-8f3a-secret-session";
    let reply = caller::send(
        "POST",
        &tunnel.url("/hook"),
        &[("cookie", cookie.as_bytes())],
        r#"{"id":"evt_cookie"}"#,
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(handler.requests()[0].header("cookie").as_deref(), Some(cookie));
    let (summary, _) = tunnel.next_delivery().await;
    let id = summary.id.to_string();

    for args in [
        vec!["show", id.as_str()],
        vec!["show", id.as_str(), "--json"],
        vec!["export", id.as_str(), "--format", "har"],
    ] {
        let ran = portpreview_async(&tunnel.db, &args).await;
        assert_eq!(ran.code, 0, "{args:?}: {}", ran.stderr);
        assert!(
            !ran.stdout.contains("ck-8f3a-secret-session"),
            "{args:?} shows the cookie: {}",
            ran.stdout
        );
        assert!(
            ran.stdout.to_ascii_lowercase().contains("cookie"),
            "{args:?} names the masked header: {}",
            ran.stdout
        );
    }
    for args in [
        vec!["show", id.as_str(), "--reveal"],
        vec!["export", id.as_str(), "--format", "har", "--reveal"],
    ] {
        let ran = portpreview_async(&tunnel.db, &args).await;
        assert_eq!(ran.code, 0, "{args:?}: {}", ran.stderr);
        assert!(ran.stdout.contains(cookie), "{args:?} reveals it: {}", ran.stdout);
    }
}

/// A delivery carried by the tunnel, read back the three ways a user takes
/// it out of the history: `history --json` (fields, order, the retry
/// counted), a HAR file parsed back, and the curl export, which, run as it
/// is printed, sends the handler the request the tunnel sent it.
#[tokio::test]
async fn a_tunnelled_delivery_reads_back_as_history_json_har_and_a_curl_command() {
    let vectors: Value = serde_json::from_str(VECTORS).expect("vectors parse");
    let stripe = &vectors["stripe"];
    let body = stripe["body"].as_str().expect("vector body").to_string();
    let signature = stripe["headers"]["Stripe-Signature"].as_str().expect("signature");
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let path = "/hooks/stripe?b=2&a=1&a=%E2%9C%93&raw=%00&q=a+b";
    let headers: [(&str, &[u8]); 5] = [
        ("Content-Type", b"application/json; charset=utf-8"),
        ("X-Dup", b"one"),
        ("Stripe-Signature", signature.as_bytes()),
        ("X-Dup", b"two"),
        ("User-Agent", b"Stripe/1.0 (+https://stripe.com/docs/webhooks)"),
    ];
    // The event, then Stripe's retry of it.
    let mut ids = Vec::new();
    for _ in 0..2 {
        let reply = caller::send("POST", &tunnel.url(path), &headers, body.clone()).await;
        assert_eq!(reply.status, 200);
        ids.push(tunnel.next_delivery().await.0.id);
    }

    let listed = portpreview_async(&tunnel.db, &["history", "--json"]).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let rows: Vec<Value> = serde_json::from_str(&listed.stdout).expect("a JSON array");
    let listed_ids: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().expect("id")).collect();
    assert_eq!(listed_ids, [ids[1], ids[0]], "newest first");
    let row = &rows[0];
    let received_at = row["received_at"].as_str().expect("received_at");
    let shape: String = received_at
        .chars()
        .map(|c| if c.is_ascii_digit() { '9' } else { c })
        .collect();
    assert_eq!(shape, "9999-99-99T99:99:99.999Z", "RFC 3339: {received_at}");
    assert_eq!(
        (row["method"].as_str(), row["path"].as_str()),
        (Some("POST"), Some(path))
    );
    assert_eq!((row["status"].as_u64(), row["error"].as_null()), (Some(200), Some(())));
    assert!(row["duration_ms"].as_f64().is_some_and(|ms| ms >= 0.0), "{row}");
    assert_eq!(
        (
            row["provider"].as_str(),
            row["event_key"].as_str(),
            row["event_key_source"].as_str()
        ),
        (Some("stripe"), Some("evt_1PortPreviewTest"), Some("body:/id"))
    );
    assert_eq!(
        (row["delivery_count"].as_i64(), rows[1]["delivery_count"].as_i64()),
        (Some(2), Some(2)),
        "the retry and the first delivery share their event's count"
    );

    let id = ids[1].to_string();
    let har = portpreview_async(&tunnel.db, &["export", &id, "--format", "har"]).await;
    assert_eq!(har.code, 0, "{}", har.stderr);
    let har: Value = serde_json::from_str(&har.stdout).expect("HAR is JSON");
    assert_eq!(har["log"]["version"], "1.2");
    let entry = &har["log"]["entries"][0];
    let request = &entry["request"];
    assert_eq!(request["method"], "POST");
    assert!(
        request["url"].as_str().expect("url").ends_with(path),
        "{}",
        request["url"]
    );
    let dups: Vec<&str> = request["headers"]
        .as_array()
        .expect("headers")
        .iter()
        .filter(|h| h["name"].as_str().is_some_and(|n| n.eq_ignore_ascii_case("x-dup")))
        .map(|h| h["value"].as_str().expect("value"))
        .collect();
    assert_eq!(dups, ["one", "two"], "repeated headers in order");
    let query: Vec<(&str, &str)> = request["queryString"]
        .as_array()
        .expect("queryString")
        .iter()
        .map(|q| (q["name"].as_str().expect("name"), q["value"].as_str().expect("value")))
        .collect();
    assert_eq!(
        query,
        [("b", "2"), ("a", "1"), ("a", "✓"), ("raw", "\0"), ("q", "a b")],
        "in order, decoded as browsers write them"
    );
    assert_eq!(request["postData"]["text"].as_str(), Some(body.as_str()));
    assert_eq!(entry["response"]["status"], 200);
    assert!(
        !har.to_string().contains(signature),
        "the signature is masked in a HAR file by default"
    );

    let curl = portpreview_async(&tunnel.db, &["export", &id, "--format", "curl"]).await;
    assert_eq!(curl.code, 0, "{}", curl.stderr);
    let sent = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&curl.stdout)
        .output()
        .await
        .expect("sh runs");
    assert!(
        sent.status.success(),
        "{}\n{}",
        curl.stdout,
        String::from_utf8_lossy(&sent.stderr)
    );
    let seen = handler.requests();
    assert_eq!(seen.len(), 3, "two through the tunnel, one from curl");
    let (tunnelled, curled) = (&seen[1], &seen[2]);
    // curl writes its Content-Length last; the tunnel keeps the caller's
    // where the caller put it. The same length, and the rest in order.
    let lengthless = |seen: &common::local::Seen| -> Vec<(String, Vec<u8>)> {
        let length = seen.headers.iter().filter(|(name, _)| name == "content-length");
        assert_eq!(length.count(), 1, "{:?}", seen.headers);
        seen.headers
            .iter()
            .filter(|(name, _)| name != "content-length")
            .cloned()
            .collect()
    };
    assert_eq!(
        (&curled.method, &curled.uri, lengthless(curled), &curled.body),
        (
            &tunnelled.method,
            &tunnelled.uri,
            lengthless(tunnelled),
            &tunnelled.body
        ),
        "the curl export sends what the tunnel sent: {}",
        curl.stdout
    );
    assert_eq!(curled.header("content-length"), tunnelled.header("content-length"));
}

/// A tunnel that answered three callers 201 while another process held
/// the history's write lock, which it still holds, and what it needs:
/// bound by name, not left out with `..`, which would drop them at once.
struct Locked {
    _relay: TestRelay,
    _handler: LocalHandler,
    _dir: tempfile::TempDir,
    db: std::path::PathBuf,
    /// Where the tunnel's stderr goes.
    log: std::path::PathBuf,
    client: Running,
    blocker: rusqlite::Connection,
}

async fn delivered_three_with_the_history_locked() -> Locked {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::start(|_| Answer {
        status: 201,
        body: b"credited".to_vec(),
        ..Answer::default()
    })
    .await;
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let log = dir.path().join("stderr.log");
    let (client, url) = Running::tunnel_logging(&handler.url(), &relay.http_url(), &db, dir.path(), &log).await;
    let blocker = rusqlite::Connection::open(&db).expect("open the history");
    blocker.execute_batch("BEGIN IMMEDIATE").expect("take the write lock");
    for n in 0..3 {
        let reply = caller::post(&format!("{url}/hook"), format!(r#"{{"id":"evt_stop_{n}"}}"#)).await;
        assert_eq!(reply.status, 201);
    }
    Locked {
        _relay: relay,
        _handler: handler,
        _dir: dir,
        db,
        log,
        client,
        blocker,
    }
}

/// Stopped (SIGTERM) while another process holds the history's lock, the
/// tunnel cannot store what it carried: the next open does, each delivery
/// with the answer its caller got, not as one whose answer was lost.
#[tokio::test]
async fn a_tunnel_stopped_while_the_history_is_locked_keeps_the_answers_its_callers_got() {
    let Locked {
        mut client,
        blocker,
        db,
        log: _,
        _relay,
        _handler,
        _dir,
    } = delivered_three_with_the_history_locked().await;
    client.signal("TERM");
    assert_eq!(client.exit_code(Duration::from_secs(30)).await, Some(0));
    blocker.execute_batch("ROLLBACK").expect("let go of the lock");
    drop(blocker);

    let listed = portpreview_async(&db, &["history", "--json"]).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let rows: Vec<Value> = serde_json::from_str(&listed.stdout).expect("a JSON array");
    let got: Vec<(Option<u64>, bool)> = rows
        .iter()
        .map(|r| (r["status"].as_u64(), r["error"].is_null()))
        .collect();
    assert_eq!(got, [(Some(201), true); 3], "{}", listed.stdout);
}

/// The same stop, the lock held on: the tunnel says what it waits for, and
/// a second signal ends the wait at once. The requests stay in the
/// history's inbox, and the next open moves them in.
#[tokio::test]
async fn a_stop_waiting_for_a_locked_history_says_so_and_a_second_signal_ends_it() {
    stop_twice_with_the_history_locked(true).await;
}

/// The same, the second signal before the tunnel said what it waits for.
#[tokio::test]
async fn a_second_signal_before_the_notice_ends_the_wait_for_a_locked_history_too() {
    stop_twice_with_the_history_locked(false).await;
}

/// Stops a tunnel that delivered three requests while another process
/// held the history's lock, which it keeps, and stops it again once the
/// tunnel said what it waits for (`after_notice`), or half a second on.
async fn stop_twice_with_the_history_locked(after_notice: bool) {
    let Locked {
        mut client,
        blocker,
        db,
        log,
        _relay,
        _handler,
        _dir,
    } = delivered_three_with_the_history_locked().await;
    client.signal("TERM");
    let said = || std::fs::read_to_string(&log).unwrap_or_default();
    if after_notice {
        let notice = "warning: the history has not taken the last deliveries yet (another process may hold its lock)";
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !said().contains(notice) {
            assert!(tokio::time::Instant::now() < deadline, "no notice of the wait");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    } else {
        // Past the 300 ms in which a second signal is the first passed on twice.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    client.signal("TERM");
    assert_eq!(client.exit_code(Duration::from_secs(30)).await, Some(130));
    // Waited out, the writer gives up on the lock after its busy timeout,
    // and says so.
    assert!(
        !said().contains("the history refused the last deliveries"),
        "waited out: {}",
        said()
    );
    blocker.execute_batch("ROLLBACK").expect("let go of the lock");
    drop(blocker);

    let listed = portpreview_async(&db, &["history", "--json"]).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let rows: Vec<Value> = serde_json::from_str(&listed.stdout).expect("a JSON array");
    assert_eq!(rows.len(), 3, "{}", listed.stdout);
}
