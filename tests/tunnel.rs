//! A webhook reaches the local handler through relay and client, exactly as
//! the provider sent it, and its answer comes back.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::caller::{self, raw};
use common::local::{Answer, LocalHandler};
use common::relay::TestRelay;
use common::tunnel::{TestTunnel, TunnelOptions};
use futures_util::{SinkExt, StreamExt};
use portpreview::events::TunnelEvent;
use portpreview_shared::codec;
use portpreview_shared::message::{ClientMessage, ServerMessage, PROTOCOL_VERSION};
use portpreview_shared::Header;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use tokio_util::sync::CancellationToken;

/// Repeated keys, percent-encoded unicode, empty values and bare flags.
const QUERY_PATH: &str = "/webhooks/stripe?a=1&a=2&name=%E2%9C%93&empty=&flag&plus=a+b";

#[tokio::test]
async fn a_webhook_arrives_exactly_as_sent_and_its_answer_comes_back() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    assert!(
        tunnel.public_url.starts_with(&format!("{}/t/", relay.http_url())),
        "{}",
        tunnel.public_url
    );

    let body = br#"{"id":"evt_1","type":"payment_intent.succeeded"}"#.to_vec();
    let reply = caller::send(
        "POST",
        &tunnel.url(QUERY_PATH),
        &[
            ("content-type", b"application/json"),
            ("x-dup", b"first"),
            ("x-dup", b"second"),
            ("x-binary", &[0x80, 0xff, b'a']),
            ("x-forwarded-for", b"6.6.6.6"),
            ("x_forwarded_for", b"6.6.6.6"),
            ("x-real-ip", b"6.6.6.6"),
            ("connection", b"keep-alive, x-hop"),
            ("x-hop", b"must not pass"),
            ("keep-alive", b"timeout=5"),
        ],
        body.clone(),
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, body);
    assert_eq!(reply.header("x-seen-method").as_deref(), Some("POST"));

    let seen = &handler.requests()[0];
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.uri, QUERY_PATH);
    assert_eq!(seen.body, body);
    assert_eq!(seen.header_values("x-dup"), vec![&b"first"[..], &b"second"[..]]);
    assert_eq!(seen.header_values("x-binary"), vec![&[0x80, 0xff, b'a'][..]]);
    assert_eq!(seen.header("content-type").as_deref(), Some("application/json"));
    // Spelt with `_`, as CGI-style servers read it the same.
    assert_eq!(seen.header("x_forwarded_for"), None, "a forged spelling is dropped");
    // Exactly the relay's view of each: the caller's spoofed address is
    // neither kept beside it nor folded into one value with it.
    assert_eq!(
        seen.header_values("x-forwarded-for"),
        vec![&b"127.0.0.1"[..]],
        "relay sets X-Forwarded-For itself"
    );
    assert_eq!(seen.header_values("x-forwarded-proto"), vec![&b"http"[..]]);
    assert_eq!(
        seen.header_values("x-forwarded-host"),
        vec![relay.addr.to_string().as_bytes()],
        "the Host the caller sent, before it was rewritten"
    );
    assert_eq!(
        seen.header_values("x-real-ip"),
        vec![&b"127.0.0.1"[..]],
        "the caller's X-Real-IP is replaced by the relay's view"
    );
    for hop in ["x-hop", "keep-alive", "connection", "transfer-encoding"] {
        assert!(seen.header(hop).is_none(), "{hop} must not reach the handler");
    }
    assert_eq!(
        seen.header("host"),
        Some(format!("{}", handler.addr)),
        "Host rewritten to the target"
    );

    let (summary, number) = tunnel.next_delivery().await;
    assert_eq!(
        (summary.method.as_str(), summary.status, number),
        ("POST", Some(200), 1)
    );
    assert!(summary.id > 0, "the delivery is in the history");
}

/// A relay behind a proxy that takes HTTPS and speaks plain HTTP to it
/// gives https URLs, and tells the handler the caller used https: a
/// provider must be given an https endpoint, and a handler that checks a
/// signature over the URL (Twilio) must rebuild the one the caller called.
#[tokio::test]
async fn a_relay_behind_an_https_proxy_says_https() {
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        behind_https: true,
        ..Default::default()
    })
    .await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let expected = format!("https://{}/t/{}", relay.addr, tunnel.name());
    assert_eq!(tunnel.public_url, expected, "the URL given is the proxy's https one");
    // What the proxy passes on, in plain HTTP.
    let reply = caller::post(&format!("{}/t/{}/sms", relay.http_url(), tunnel.name()), "{}").await;
    assert_eq!(reply.status, 200);
    let seen = &handler.requests()[0];
    assert_eq!(seen.header_values("x-forwarded-proto"), vec![&b"https"[..]]);
    let (summary, _) = tunnel.next_delivery().await;
    let stored = tunnel.stored(summary.id);
    assert_eq!(stored.request.tunnel_url, expected, "the URL the caller called");
}

/// A client inside the network of a relay behind an HTTPS proxy, on the
/// relay's own plain port, is given the domain URL callers reach at the
/// proxy: on https's port, not on the plain one it came in by.
#[tokio::test]
async fn a_relay_behind_an_https_proxy_gives_its_domain_url_without_its_own_port() {
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        behind_https: true,
        domain: Some("relay.test".into()),
        ..Default::default()
    })
    .await;
    let handler = LocalHandler::echo().await;
    let tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let host = tunnel.public_url.strip_prefix("https://").expect("an https URL");
    assert!(
        host.ends_with(".relay.test") && !host.contains(':'),
        "{}",
        tunnel.public_url
    );
}

/// Answers by path: `/status/N` with status N and no body, anything else echoed.
async fn status_handler() -> LocalHandler {
    LocalHandler::start(|seen| match seen.uri.strip_prefix("/status/") {
        Some(code) => Answer {
            status: code.parse().unwrap_or(500),
            ..Answer::default()
        },
        None => Answer {
            status: 200,
            headers: vec![("x-seen-method".into(), seen.method.clone())],
            body: seen.body.clone(),
            ..Answer::default()
        },
    })
    .await
}

#[tokio::test]
async fn an_ipv4_caller_of_a_dual_stack_relay_is_forwarded_as_ipv4() {
    // `--listen [::]:PORT`: IPv4 callers arrive as `::ffff:a.b.c.d`.
    let listener = tokio::net::TcpListener::bind("[::]:0")
        .await
        .expect("a dual-stack listener");
    let relay = TestRelay::on(listener, portpreview_server::RelayConfig::default());
    let handler = LocalHandler::echo().await;
    let relay_url = format!("http://127.0.0.1:{}", relay.addr.port());
    let tunnel = TestTunnel::start(&relay_url, &handler.url()).await;
    let reply = caller::send("POST", &tunnel.url("/hook"), &[], b"{}".to_vec()).await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        handler.requests()[0].header("x-forwarded-for").as_deref(),
        Some("127.0.0.1"),
        "the address a provider's allowlist names"
    );
}

#[tokio::test]
async fn every_method_and_body_shape_passes() {
    let relay = TestRelay::start().await;
    let handler = status_handler().await;
    let tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;

    for method in ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
        let reply = caller::send(method, &tunnel.url("/m"), &[], "payload").await;
        assert_eq!(reply.status, 200, "{method}");
        assert_eq!(reply.header("x-seen-method").as_deref(), Some(method));
        assert_eq!(reply.text(), "payload", "{method}");
    }
    let head = caller::send("HEAD", &tunnel.url("/m"), &[], "").await;
    assert_eq!((head.status, head.body.len()), (200, 0));

    let binary: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    let reply = caller::post(&tunnel.url("/bin"), binary.clone()).await;
    assert_eq!(reply.body, binary, "binary body over a chunk boundary is intact");

    let empty = caller::send("POST", &tunnel.url("/empty"), &[("content-length", b"0")], "").await;
    assert_eq!((empty.status, empty.body.len()), (200, 0));
    let seen = handler.requests().pop().unwrap();
    assert_eq!(seen.body.len(), 0);
    assert_eq!(
        seen.header("content-length").as_deref(),
        Some("0"),
        "an empty POST keeps its length, as some servers want one"
    );

    for status in [204, 304, 404, 500] {
        let reply = caller::post(&tunnel.url(&format!("/status/{status}")), "x").await;
        assert_eq!(reply.status, status);
        assert!(reply.body.is_empty());
    }

    // The bodiless answers as bytes, one after another on one connection:
    // a stray byte or a length the caller would wait on breaks the next.
    let path = |p: &str| format!("/t/{}{p}", tunnel.name());
    let requests = [
        format!("HEAD {} HTTP/1.1\r\nHost: x\r\n\r\n", path("/m")),
        format!(
            "POST {} HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx",
            path("/status/204")
        ),
        format!(
            "POST {} HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx",
            path("/status/304")
        ),
        format!(
            "POST {} HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nConnection: close\r\n\r\nlast",
            path("/m")
        ),
    ];
    let answers = caller::raw_until_closed(relay.addr, requests.concat().as_bytes()).await;
    let answers: Vec<&str> = answers.split("HTTP/1.1 ").skip(1).collect();
    let statuses: Vec<&str> = answers.iter().map(|a| &a[..3]).collect();
    assert_eq!(statuses, ["200", "204", "304", "200"], "{answers:?}");
    for answer in &answers[..3] {
        assert!(answer.ends_with("\r\n\r\n"), "a head and nothing after it: {answer:?}");
    }
    assert!(answers[1].find("content-length").is_none(), "204: {:?}", answers[1]);
    assert!(answers[3].ends_with("\r\n\r\nlast"), "{:?}", answers[3]);
}

#[tokio::test]
async fn a_chunked_request_body_arrives_whole() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let path = format!("/t/{}/chunked", tunnel.name());
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        relay.addr
    );
    let answer = raw(relay.addr, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let got = &handler.requests()[0];
    assert_eq!(got.body, b"hello world");
    // A body this small is read whole before it is forwarded, so the
    // handler gets it framed by its length: one framing, never both, and
    // not chunks some handlers cannot read.
    assert_eq!(
        (got.header("content-length"), got.header("transfer-encoding")),
        (Some("11".to_owned()), None)
    );
}

#[tokio::test]
async fn a_hundred_concurrent_requests_on_one_tunnel_are_all_answered() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let calls = (0..100).map(|i| {
        let url = tunnel.url(&format!("/hook/{i}"));
        async move { (i, caller::post(&url, format!("body {i}")).await) }
    });
    let replies = futures_util::future::join_all(calls).await;
    for (i, reply) in replies {
        assert_eq!(reply.status, 200, "request {i}");
        assert_eq!(reply.text(), format!("body {i}"), "request {i} got another's answer");
        assert_eq!(reply.header("x-seen-uri"), Some(format!("/hook/{i}")));
    }
    assert_eq!(handler.requests().len(), 100);
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The upload stops after its first MiB until the test lets it go on: the
/// small request must be answered while the upload is still on its way,
/// not merely after it.
#[tokio::test]
async fn a_25_mib_upload_passes_intact_without_stalling_small_requests() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::start(|seen| Answer {
        status: 200,
        body: sha256_hex(&seen.body).into_bytes(),
        ..Answer::default()
    })
    .await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let big: Vec<u8> = (0..25 * 1024 * 1024).map(|i: u32| (i % 251) as u8).collect();
    let digest = sha256_hex(&big);
    let mut big = bytes::Bytes::from(big);
    let first = big.split_to(1024 * 1024);
    let big_url = tunnel.url("/upload");
    let (paused_tx, paused) = tokio::sync::oneshot::channel();
    let (release, released) = tokio::sync::oneshot::channel();
    let upload = tokio::spawn(async move { caller::post_held(&big_url, first, big, paused_tx, released).await });
    paused.await.expect("the upload sent its first MiB");

    let small = tokio::time::timeout(Duration::from_secs(20), caller::post(&tunnel.url("/small"), "tiny"))
        .await
        .expect("the small request is answered while the upload waits");
    assert_eq!((small.status, small.text()), (200, sha256_hex(b"tiny")));
    assert!(!upload.is_finished(), "the upload is still held back by the test");
    assert!(
        handler.requests().iter().all(|seen| seen.uri != "/upload"),
        "the handler cannot have had the whole upload yet"
    );

    release.send(()).expect("the upload waits for the rest");
    let reply = upload.await.expect("upload task");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), digest, "the 25 MiB body arrived byte for byte");

    let (summary, _) = loop {
        let (summary, number) = tunnel.next_delivery().await;
        if summary.path == "/upload" {
            break (summary, number);
        }
    };
    let store = portpreview::store::Store::open(&tunnel.db).expect("open the history");
    let stored = store
        .get(summary.id)
        .expect("read")
        .expect("the upload is in the history");
    assert_eq!(stored.request.request_body_size, 25 * 1024 * 1024);
    assert_eq!(
        sha256_hex(&stored.request.request_body),
        digest,
        "the streamed body was recorded whole"
    );
}

/// A handler that reads `/upload` bodies only once `release` is notified
/// (telling `arrived` when an upload's head has come) and answers every
/// request with the SHA-256 of its body. Its listener's address.
async fn slow_reading_handler(arrived: Arc<Notify>, release: Arc<Notify>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let (arrived, release) = (arrived.clone(), release.clone());
            tokio::spawn(async move {
                let mut socket = tokio::io::BufReader::new(socket);
                let mut head = Vec::new();
                while !head.ends_with(b"\r\n\r\n") {
                    let mut byte = [0u8; 1];
                    if socket.read_exact(&mut byte).await.is_err() {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length:"))
                    .and_then(|value| value.trim().parse().ok())
                    .unwrap_or(0);
                if head.starts_with("post /upload") {
                    arrived.notify_one();
                    release.notified().await;
                }
                let mut body = vec![0u8; length];
                if socket.read_exact(&mut body).await.is_err() {
                    return;
                }
                let digest = sha256_hex(&body);
                let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{digest}", digest.len());
                let _ = socket.get_mut().write_all(answer.as_bytes()).await;
            });
        }
    });
    addr
}

/// The upload is inside the tunnel this time: the handler has its head and
/// does not read its body, so the rest of the 25 MiB fills every buffer on
/// the way, the relay's and the client's included. A small request beside
/// it on the same WebSocket is answered all the same.
#[tokio::test]
async fn a_small_request_passes_beside_an_upload_the_handler_does_not_read() {
    let relay = TestRelay::start().await;
    let (arrived, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let handler = slow_reading_handler(arrived.clone(), release.clone()).await;
    let tunnel = TestTunnel::start(&relay.http_url(), &handler.to_string()).await;
    let big: Vec<u8> = (0..25 * 1024 * 1024).map(|i: u32| (i % 251) as u8).collect();
    let digest = sha256_hex(&big);
    let big_url = tunnel.url("/upload");
    let upload = tokio::spawn(async move { caller::post(&big_url, big).await });
    tokio::time::timeout(Duration::from_secs(20), arrived.notified())
        .await
        .expect("the upload reaches the handler");

    for n in 0..3 {
        let body = format!("tiny {n}");
        let small = tokio::time::timeout(
            Duration::from_secs(20),
            caller::post(&tunnel.url("/small"), body.clone()),
        )
        .await
        .expect("a small request is answered while the upload is stuck in the tunnel");
        assert_eq!((small.status, small.text()), (200, sha256_hex(body.as_bytes())));
    }
    assert!(!upload.is_finished(), "the handler has not read the upload yet");

    release.notify_one();
    let reply = tokio::time::timeout(Duration::from_secs(60), upload)
        .await
        .expect("the upload finishes once read")
        .expect("upload task");
    assert_eq!(
        (reply.status, reply.text()),
        (200, digest),
        "the 25 MiB arrived byte for byte"
    );
}

/// A WebSocket client pointed at the tunnel is answered 501 by the relay,
/// which the tunnel does not carry, and the history says so, once a minute:
/// the developer sees that the client got this far, and why it went no
/// further, without a row for each of its retries.
#[tokio::test]
async fn a_websocket_upgrade_is_refused_by_the_relay_and_recorded() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let upgrade: [(&str, &[u8]); 4] = [
        ("upgrade", b"websocket"),
        ("connection", b"Upgrade"),
        ("sec-websocket-version", b"13"),
        ("sec-websocket-key", b"dGhlIHNhbXBsZSBub25jZQ=="),
    ];
    let reply = caller::send("GET", &tunnel.url("/live"), &upgrade, Vec::new()).await;
    assert_eq!(reply.status, 501);
    let (summary, _) = tunnel.next_delivery().await;
    assert!(handler.requests().is_empty(), "the handler never saw it");
    assert_eq!((summary.method.as_str(), summary.path.as_str()), ("GET", "/live"));
    assert_eq!(
        summary.error.as_deref(),
        Some(
            "the relay answered the caller 501: a WebSocket upgrade is not forwarded: \
             the tunnel carries HTTP requests and their answers"
        )
    );
    // Such clients retry every second or so: one a minute is news enough.
    let again = caller::send("GET", &tunnel.url("/live"), &upgrade, Vec::new()).await;
    assert_eq!(again.status, 501);
    let reply = caller::post(&tunnel.url("/after"), "{}").await;
    assert_eq!(reply.status, 200);
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!(summary.path, "/after", "the retry is not recorded");
}

/// A body declared over the limit is answered 413 by the relay without
/// reaching the handler, and the tunnel's history still has the delivery,
/// with what its caller was told: a provider's dashboard says 413, and so
/// must PortPreview.
#[tokio::test]
async fn a_body_over_the_limit_gets_413_from_the_relay_and_is_recorded() {
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        max_body: 1024,
        ..Default::default()
    })
    .await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let reply = caller::post(&tunnel.url("/big?order=7"), vec![b'x'; 4096]).await;
    assert_eq!(reply.status, 413);
    assert_eq!(
        reply.text(),
        "request body over the relay's limit of 1024 bytes\n",
        "the relay says why"
    );
    let (summary, _) = tunnel.next_delivery().await;
    assert!(handler.requests().is_empty(), "the handler never saw it");
    assert_eq!(
        (summary.method.as_str(), summary.path.as_str()),
        ("POST", "/big?order=7")
    );
    assert_eq!(summary.status, None, "no local answer");
    assert_eq!(
        summary.error.as_deref(),
        Some("the relay answered the caller 413: request body over the relay's limit of 1024 bytes")
    );
    let stored = tunnel.stored(summary.id);
    assert!(
        stored.request.request_body.is_empty(),
        "the body never crossed the tunnel"
    );
    assert_eq!(stored.request.request_body_size, 4096, "the size its caller declared");
    assert!(
        stored
            .request
            .request_headers
            .iter()
            .any(|h| h.name == "x-forwarded-for"),
        "the headers the handler would have had: {:?}",
        stored.request.request_headers
    );
}

/// A small body that never comes is answered 408 by the relay once its
/// answer timeout passes; the history dates the delivery from when it
/// came, not from the 408, and says how long the caller waited.
#[tokio::test]
async fn a_body_the_relay_gave_up_waiting_for_is_dated_from_its_arrival() {
    // A timeout long enough that a date taken at the 408 is told from one
    // taken at arrival, with a second's room for a loaded machine.
    let relay = TestRelay::answering_within(Duration::from_millis(1500)).await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let sent_at = portpreview::time::now_ms();
    let request = format!(
        "POST /t/{}/slow HTTP/1.1\r\nHost: {}\r\nContent-Length: 100\r\n\r\n0123456789",
        tunnel.name(),
        relay.addr
    );
    let answer = raw(relay.addr, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!(
        summary.error.as_deref(),
        Some("the relay answered the caller 408: the request body did not arrive in time")
    );
    assert!(
        summary.received_at_ms < sent_at + 1000,
        "dated from its arrival: {} ms after it was sent",
        summary.received_at_ms - sent_at
    );
    assert!(
        summary.duration_ms.is_some_and(|ms| ms >= 1400.0),
        "the caller waited the relay's timeout: {:?}",
        summary.duration_ms
    );
    assert!(handler.requests().is_empty());
}

/// Past the tunnel's requests in flight the relay answers 503 itself; each
/// request it turned away is in the history all the same.
#[tokio::test]
async fn requests_the_relay_turns_away_for_too_many_in_flight_are_recorded() {
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        max_in_flight: 1,
        ..Default::default()
    })
    .await;
    let release = CancellationToken::new();
    let handler = LocalHandler::holding("/held", release.clone()).await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let held_url = tunnel.url("/held");
    let held = tokio::spawn(async move { caller::post(&held_url, "{}").await });
    handler.wait_for_request().await;
    let reply = caller::post(&tunnel.url("/second"), r#"{"id":"evt_busy"}"#).await;
    assert_eq!(reply.status, 503, "{}", reply.text());
    release.cancel();
    assert_eq!(held.await.expect("held caller").status, 200);
    let mut seen = Vec::new();
    let mut turned_away = None;
    for _ in 0..2 {
        let (summary, _) = tunnel.next_delivery().await;
        if summary.path == "/second" {
            turned_away = Some(summary.id);
        }
        seen.push((summary.path, summary.status, summary.error));
    }
    seen.sort();
    let message = format!("too many requests in flight for tunnel {}", tunnel.name());
    assert_eq!(
        seen,
        [
            ("/held".to_owned(), Some(200), None),
            (
                "/second".to_owned(),
                None,
                Some(format!("the relay answered the caller 503: {message}"))
            ),
        ]
    );
    // The relay had read the small body whole: the history keeps it, and
    // the delivery can be replayed once the tunnel has room again.
    let stored = tunnel.stored(turned_away.expect("the turned-away delivery"));
    assert_eq!(stored.request.request_body, br#"{"id":"evt_busy"}"#);
    assert!(!stored.request.request_truncated());
}

#[tokio::test]
async fn a_dead_local_port_gets_502_and_a_slow_one_504_each_saying_why() {
    let relay = TestRelay::start().await;
    let dead_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let mut tunnel = TestTunnel::start(&relay.http_url(), &format!("127.0.0.1:{dead_port}")).await;
    let reply = caller::post(&tunnel.url("/hook"), "{}").await;
    assert_eq!(reply.status, 502);
    assert!(
        reply.text().contains("could not reach") && reply.text().contains("; is the handler running?"),
        "{}",
        reply.text()
    );
    let (summary, _) = tunnel.next_delivery().await;
    assert!(summary.error.as_deref().is_some_and(|e| e.contains("could not reach")));
    assert_eq!(summary.status, None, "the 502 was PortPreview's, not the handler's");
    // A body past what the client reads whole before forwarding, still on
    // its way when the port refuses: the caller hears so at once too.
    let reply = caller::post(&tunnel.url("/upload"), vec![b'x'; 3 << 20]).await;
    assert_eq!(reply.status, 502, "{}", reply.text());
    assert!(reply.text().contains("could not reach"), "{}", reply.text());
    let (summary, _) = tunnel.next_delivery().await;
    assert!(
        summary.error.as_deref().is_some_and(|e| e.contains("could not reach")),
        "{summary:?}"
    );

    let slow = LocalHandler::slow(Duration::from_secs(3)).await;
    let options = TunnelOptions {
        local_timeout: Duration::from_millis(300),
        ..TunnelOptions::default()
    };
    let mut tunnel = TestTunnel::start_with(&relay.http_url(), &slow.url(), options)
        .await
        .expect("connects");
    let reply = caller::post(&tunnel.url("/hook"), "{}").await;
    assert_eq!(reply.status, 504);
    assert!(reply.text().contains("did not answer within"), "{}", reply.text());
    // The history says the same: a user reading it later sees the timeout,
    // not a status the handler never sent.
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!(summary.status, None, "the 504 was PortPreview's, not the handler's");
    assert!(
        summary
            .error
            .as_deref()
            .is_some_and(|e| e.ends_with("did not answer within 300ms; it may still act on the request")),
        "{summary:?}"
    );
}

#[tokio::test]
async fn a_local_answer_that_breaks_off_is_cut_off_for_the_caller_and_recorded_as_broken() {
    // Promises 100 bytes, sends 5 and hangs up: the caller gets what came
    // and then the cut, as calling the handler directly; no caller may
    // take the stub for the whole answer.
    let (target, liar) = raw_handler(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort").await;
    let relay = TestRelay::start().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &target).await;
    let request = format!(
        "POST /t/{}/hook HTTP/1.1\r\nHost: {}\r\nContent-Length: 2\r\n\r\n{{}}",
        tunnel.name(),
        relay.addr
    );
    let answer = caller::raw_until_closed(relay.addr, request.as_bytes()).await;
    assert!(
        answer.starts_with("HTTP/1.1 200")
            && answer.contains("content-length: 100\r\n")
            && answer.ends_with("\r\n\r\nshort"),
        "{answer:?}"
    );
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!(summary.status, Some(200), "the caller had the handler's status");
    assert!(
        summary
            .error
            .as_deref()
            .is_some_and(|e| e.contains("broke off after 5 of 100 bytes")),
        "how far it came is said: {summary:?}"
    );
    // Kept as far as it came, marked as cut off on its way: a HAR export or
    // `show --json` never gives the stub as the whole answer.
    let outcome = tunnel.stored(summary.id).outcome.expect("an outcome");
    assert_eq!(outcome.response_body, b"short");
    assert!(
        portpreview::store::size_unknown_past(5, outcome.response_body_size),
        "size {}",
        outcome.response_body_size
    );
    liar.abort();
}

/// `--local-timeout` bounds the whole answer, not only its head: a handler
/// that sends its status and then stalls in the body holds its caller no
/// longer than one that never answers.
#[tokio::test]
async fn a_local_answer_that_stalls_in_its_body_is_given_up_on_at_the_local_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let staller = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut request = vec![0u8; 64 * 1024];
            let n = socket.read(&mut request).await.unwrap_or(0);
            // A small answer comes in one frame; a large one streams.
            let (declared, sent) = if request[..n].starts_with(b"POST /large") {
                (4_000_000, 300_000)
            } else {
                (100, 4)
            };
            let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {declared}\r\n\r\n");
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(&vec![b'x'; sent]).await;
            held.push(socket);
        }
    });
    let relay = TestRelay::start().await;
    let options = TunnelOptions {
        local_timeout: Duration::from_secs(1),
        ..TunnelOptions::default()
    };
    let mut tunnel = TestTunnel::start_with(&relay.http_url(), &addr.to_string(), options)
        .await
        .expect("connects");

    let reply = caller::post(&tunnel.url("/small"), "{}").await;
    assert_eq!(reply.status, 504, "{}", reply.text());
    let why = "the local answer's body stalled: it was not whole within 1s";
    assert!(reply.text().contains(why), "{}", reply.text());
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!((summary.status, summary.error.as_deref()), (None, Some(why)));

    // Once the head has gone, the caller's answer is cut off instead.
    let request = format!(
        "POST /t/{}/large HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}",
        tunnel.name()
    );
    let answer = caller::raw_until_closed(relay.addr, request.as_bytes()).await;
    assert!(
        answer.starts_with("HTTP/1.1 200 OK"),
        "{}",
        &answer[..answer.len().min(200)]
    );
    assert!(
        answer.len() < 4_000_000,
        "the caller never takes the stub for the whole answer"
    );
    assert!(
        answer.ends_with(&"x".repeat(1000)),
        "what the handler sent reached the caller"
    );
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!(
        (summary.status, summary.error.as_deref()),
        (
            Some(200),
            Some("the local answer's body stalled: nothing more came for 1s")
        ),
        "the caller had the handler's status: {summary:?}"
    );
    staller.abort();
}

#[tokio::test]
async fn a_local_answer_with_too_many_headers_gets_a_502_that_says_so() {
    let handler = LocalHandler::start(|_| Answer {
        headers: (0..101).map(|n| (format!("x-h{n}"), "v".to_owned())).collect(),
        ..Answer::default()
    })
    .await;
    let relay = TestRelay::start().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let reply = caller::post(&tunnel.url("/hook"), "{}").await;
    assert_eq!(reply.status, 502);
    let why = "answered with a head too large to read: more than 100 header fields, or over 408 KiB";
    assert!(reply.text().contains(why), "{}", reply.text());
    let (summary, _) = tunnel.next_delivery().await;
    assert!(summary.error.as_deref().is_some_and(|e| e.contains(why)), "{summary:?}");
}

#[tokio::test]
async fn a_streamed_local_answer_that_breaks_off_is_cut_off_for_the_caller_too() {
    // Starts a chunked answer and hangs up in the middle of it: the caller
    // must not receive a well-formed answer that only looks whole.
    let (target, quitter) = raw_handler(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n").await;
    let relay = TestRelay::start().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &target).await;
    let request = format!(
        "POST /t/{}/hook HTTP/1.1\r\nHost: {}\r\nContent-Length: 2\r\n\r\n{{}}",
        tunnel.name(),
        relay.addr
    );
    for _ in 0..5 {
        let answer = caller::raw_until_closed(relay.addr, request.as_bytes()).await;
        // The connection closes mid-answer, after what the handler sent,
        // never at a last chunk, and never before the head: an empty reply
        // would tell the caller nothing of the handler's answer.
        assert!(
            answer.starts_with("HTTP/1.1 200") && answer.ends_with("\r\n\r\n5\r\nhello\r\n"),
            "{answer:?}"
        );
        let (summary, _) = tunnel.next_delivery().await;
        assert_eq!(summary.status, Some(200), "the caller had the handler's status");
        assert!(
            summary.error.as_deref().is_some_and(|e| e.contains("broke off")),
            "{summary:?}"
        );
    }
    quitter.abort();
}

/// An HTTP/1.0 caller has no chunked coding, so an answer of unknown
/// length ends when the connection closes: the caller must not be told it
/// stays open, or it sends its next request into a closing socket.
#[tokio::test]
async fn an_http_1_0_caller_is_not_promised_keep_alive_for_an_answer_ended_by_closing() {
    let (target, closer) = raw_handler(b"HTTP/1.1 200 OK\r\n\r\nuntil close").await;
    let relay = TestRelay::start().await;
    let tunnel = TestTunnel::start(&relay.http_url(), &target).await;
    let request = format!(
        "GET /t/{}/old HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        tunnel.name()
    );
    let answer = raw(relay.addr, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.0 200 OK\r\n"), "{answer}");
    assert!(answer.ends_with("\r\n\r\nuntil close"), "{answer}");
    assert!(!answer.to_ascii_lowercase().contains("keep-alive"), "{answer}");
    closer.abort();
}

/// A handler that streams (server-sent events, progress lines) is heard
/// as it writes: each piece reaches the caller before the next is written.
#[tokio::test]
async fn each_piece_of_a_streamed_local_answer_reaches_the_caller_as_it_is_written() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (go_on, mut told) = tokio::sync::mpsc::channel::<()>(1);
    let streamer = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("accept");
        let mut request = [0u8; 4096];
        let _ = socket.read(&mut request).await;
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        socket.write_all(head.as_bytes()).await.expect("head");
        for event in ["data: 1\n\n", "data: 2\n\n"] {
            let chunk = format!("{:x}\r\n{event}\r\n", event.len());
            socket.write_all(chunk.as_bytes()).await.expect("chunk");
            told.recv().await;
        }
        socket.write_all(b"0\r\n\r\n").await.expect("end");
    });
    let relay = TestRelay::start().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &addr.to_string()).await;
    let mut caller = tokio::net::TcpStream::connect(relay.addr).await.expect("connect");
    let request = format!("GET /t/{}/events HTTP/1.1\r\nHost: x\r\n\r\n", tunnel.name());
    caller.write_all(request.as_bytes()).await.expect("request");

    let mut heard = Vec::new();
    for event in ["data: 1", "data: 2"] {
        let waited = tokio::time::timeout(Duration::from_secs(5), async {
            while !String::from_utf8_lossy(&heard).contains(event) {
                let mut buf = [0u8; 4096];
                let n = caller.read(&mut buf).await.expect("read");
                assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&heard));
                heard.extend_from_slice(&buf[..n]);
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "{event:?} not heard before the handler wrote more: {:?}",
            String::from_utf8_lossy(&heard)
        );
        go_on.send(()).await.expect("handler waits");
    }
    // The history is read by row id; the delivery number beside it counts
    // this session's deliveries, and matches the row only by chance.
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!((summary.status, summary.error), (Some(200), None));
    let stored = tunnel.stored(summary.id);
    assert_eq!(
        stored.outcome.expect("answered").response_body,
        b"data: 1\n\ndata: 2\n\n"
    );
    streamer.abort();
}

/// A handler that writes its answer a line at a time, faster than the
/// caller reads it (an NDJSON export), reaches the caller whole: the
/// client sends what is ready together, not a frame a line, which would
/// be more than the relay queues for one caller.
#[tokio::test]
async fn an_answer_written_in_a_hundred_thousand_small_pieces_reaches_the_caller_whole() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const LINES: usize = 100_000;
    let line = |n: usize| format!("{{\"row\":{n:09}}}\n");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let streamer = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("accept");
        let mut request = [0u8; 4096];
        let _ = socket.read(&mut request).await;
        let mut answer =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        for n in 0..LINES {
            let line = line(n);
            answer.extend_from_slice(format!("{:x}\r\n{line}\r\n", line.len()).as_bytes());
        }
        answer.extend_from_slice(b"0\r\n\r\n");
        socket.write_all(&answer).await.expect("answer");
    });
    let relay = TestRelay::start().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &addr.to_string()).await;
    let reply = caller::send("GET", &format!("{}/export", tunnel.public_url), &[], "").await;
    assert_eq!(reply.status, 200);
    let expected: String = (0..LINES).map(line).collect();
    assert_eq!(reply.body.len(), expected.len(), "the whole answer");
    assert!(reply.body == expected.as_bytes(), "in order");
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!((summary.status, summary.error), (Some(200), None));
    streamer.abort();
}

/// A status HTTP names no reason for reaches the caller with an empty
/// reason, not a made-up one.
#[tokio::test]
async fn a_status_without_a_standard_reason_gets_an_empty_one() {
    let (target, odd) = raw_handler(b"HTTP/1.1 299 Odd Reason\r\ncontent-length: 2\r\n\r\nok").await;
    let relay = TestRelay::start().await;
    let tunnel = TestTunnel::start(&relay.http_url(), &target).await;
    let request = format!(
        "GET /t/{}/x HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        tunnel.name(),
        relay.addr
    );
    let answer = caller::raw_until_closed(relay.addr, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 299 \r\n"), "{answer}");
    assert!(answer.ends_with("\r\n\r\nok"), "{answer}");
    odd.abort();
}

/// Answers no caller can be given: a protocol switch, and a status past
/// 599 that hyper reads as three digits like any other.
#[tokio::test]
async fn a_handler_switching_protocols_or_past_599_gets_502_and_is_recorded_as_a_failure() {
    for (answer, said) in [
        (
            &b"HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n"[..],
            "answered 101",
        ),
        (
            &b"HTTP/1.1 600 Beyond\r\ncontent-length: 0\r\n\r\n"[..],
            "answered status 600",
        ),
    ] {
        let (target, odd) = raw_handler(answer).await;
        let relay = TestRelay::start().await;
        let mut tunnel = TestTunnel::start(&relay.http_url(), &target).await;
        let reply = caller::post(&tunnel.url("/hook"), "{}").await;
        assert_eq!(reply.status, 502, "{said}");
        assert!(reply.text().contains(said), "{}", reply.text());
        let (summary, _) = tunnel.next_delivery().await;
        assert_eq!(
            summary.status, None,
            "the history shows what the caller got: {summary:?}"
        );
        assert!(
            summary.error.as_deref().is_some_and(|e| e.contains(said)),
            "{summary:?}"
        );
        odd.abort();
    }
}

#[tokio::test]
async fn the_relay_answers_for_itself_when_it_must() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;

    let missing = caller::post(&format!("{}/t/no-such-tunnel/x", relay.http_url()), "").await;
    assert_eq!(missing.status, 404);
    assert_eq!(
        missing.text(),
        "no such tunnel: nothing is connected as no-such-tunnel\n",
        "the relay says why"
    );

    let health = caller::send("GET", &format!("{}/healthz", relay.http_url()), &[], "").await;
    assert_eq!(health.status, 200);
    let posted = caller::send("POST", &format!("{}/healthz", relay.http_url()), &[], "").await;
    assert_eq!(posted.status, 405);
    let allow = posted.headers.iter().find(|(name, _)| name == "allow");
    assert_eq!(allow.map(|(_, value)| value.as_slice()), Some(&b"GET, HEAD"[..]));

    // hyper takes bare line feeds as line ends too, and so must the check.
    // The relay closes after its 400: what follows the head cannot be told
    // apart from a smuggled second request, so the connection is not reused.
    for eol in ["\r\n", "\n"] {
        let smuggled = format!(
            "POST /t/{}/x HTTP/1.1{eol}Host: {}{eol}Content-Length: 5{eol}Transfer-Encoding: chunked{eol}{eol}0{eol}{eol}",
            tunnel.name(),
            relay.addr
        );
        let answer = caller::raw_until_closed(relay.addr, smuggled.as_bytes()).await;
        assert!(
            answer.starts_with("HTTP/1.1 400")
                && answer.ends_with("\r\n\r\na request may not carry both Content-Length and Transfer-Encoding\n"),
            "CL+TE must be refused ({eol:?}): {answer}"
        );
    }

    // Heads over the limits hyper holds them to; the relay says which.
    let oversized = [
        (
            format!("X-Big: {}\r\n", "a".repeat(100 * 1024)),
            "request head over the relay's limit of 65536 bytes",
        ),
        (
            (0..101).map(|n| format!("X-Header-{n}: {n}\r\n")).collect(),
            "more request headers than the relay's limit of 100",
        ),
        // Refused by the parser before the head has ended.
        (
            (0..3000).map(|n| format!("X-{n}: v\r\n")).collect(),
            "more request headers than the relay's limit of 100",
        ),
    ];
    for (extra, why) in oversized {
        let head = format!(
            "GET /t/{}/x HTTP/1.1\r\nHost: {}\r\n{extra}\r\n",
            tunnel.name(),
            relay.addr
        );
        let answer = raw(relay.addr, head.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 431"), "{why}: {answer}");
        assert!(
            answer.ends_with(&format!("\r\n\r\n{why}\n")),
            "the relay says why: {answer}"
        );
    }
    let long_target = format!(
        "GET /t/{}/x?q={} HTTP/1.1\r\nHost: {}\r\n\r\n",
        tunnel.name(),
        "a".repeat(70_000),
        relay.addr
    );
    let answer = raw(relay.addr, long_target.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 414 URI Too Long"), "{answer}");
    assert!(answer.contains("request target (path and query) over"), "{answer}");

    // Heads hyper lets through that cannot be forwarded as they are.
    let path = format!("/t/{}/x", tunnel.name());
    let unfit = [
        (
            format!("GET {path} HTTP/1.1\r\nHost: {0}\r\nHost: {0}\r\n\r\n", relay.addr),
            "400",
            "a request may carry only one Host header",
        ),
        (
            format!("GET {path} HTTP/1.1\r\n\r\n"),
            "400",
            "an HTTP/1.1 request must carry a Host header",
        ),
        (
            format!(
                "POST {path} HTTP/1.1\r\nHost: {}\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
                relay.addr
            ),
            "501",
            "transfer coding \"gzip\" is not supported: send the body chunked, or with a Content-Length",
        ),
        (
            format!(
                "POST {path} HTTP/1.1\r\nHost: {}\r\nTransfer-Encoding: chunked, chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
                relay.addr
            ),
            "400",
            "chunked may be applied to a body only once",
        ),
    ];
    for (request, status, why) in unfit {
        let answer = raw(relay.addr, request.as_bytes()).await;
        assert!(answer.starts_with(&format!("HTTP/1.1 {status}")), "{why}: {answer}");
        assert!(
            answer.ends_with(&format!("\r\n\r\n{why}\n")),
            "the relay says why: {answer}"
        );
    }
    assert!(handler.requests().is_empty(), "none of these reached the handler");

    // The relay does not follow a chunked body to the head after it, so it
    // closes the connection once it has answered: a smuggled head behind
    // the body is never read, let alone forwarded.
    let chunked_then_smuggled = format!(
        "POST /t/{name}/chunked HTTP/1.1\r\nHost: {addr}\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n\
         POST /t/{name}/smuggled HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        name = tunnel.name(),
        addr = relay.addr
    );
    let answers = caller::raw_until_closed(relay.addr, chunked_then_smuggled.as_bytes()).await;
    assert_eq!(
        answers.matches("HTTP/1.1 ").count(),
        1,
        "one answer, then the close: {answers}"
    );
    assert!(answers.starts_with("HTTP/1.1 200"), "{answers}");
    assert!(
        answers.to_ascii_lowercase().contains("\r\nconnection: close\r\n"),
        "{answers}"
    );
    let smuggled = handler
        .requests()
        .into_iter()
        .filter(|seen| seen.uri.contains("smuggled"))
        .count();
    assert_eq!(smuggled, 0, "the head behind a chunked body never reached the handler");

    // HTTP/1.0 needs no Host.
    let answer = raw(relay.addr, format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes()).await;
    assert!(
        answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_malformed_chunked_body_is_refused_and_recorded_as_such() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let request = format!(
        "POST /t/{}/hook HTTP/1.1\r\nHost: {}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n",
        tunnel.name(),
        relay.addr
    );
    let answer = raw(relay.addr, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(
        answer.ends_with("\r\n\r\nthe request body's chunked coding was malformed\n"),
        "{answer}"
    );
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!(
        summary.error.as_deref(),
        Some(
            "the request body's chunked coding was malformed; the relay answered the caller 400; it was not \
             forwarded"
        ),
        "the history says what the caller was told, not that it went away"
    );
    assert!(handler.requests().is_empty(), "a cut body never reaches the handler");
}

#[tokio::test]
async fn a_client_stopping_finishes_the_request_in_flight_first() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::start(|_| Answer {
        status: 200,
        body: b"done".to_vec(),
        delay: Duration::from_millis(500),
        ..Answer::default()
    })
    .await;
    let tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let url = tunnel.url("/slow");
    let call = tokio::spawn(async move { caller::post(&url, "{}").await });
    handler.wait_for_request().await;
    let stopping = Instant::now();
    tunnel.stop().await.expect("the tunnel stops cleanly");
    let reply = call.await.expect("caller task");
    assert_eq!(
        (reply.status, reply.text().as_str()),
        (200, "done"),
        "the request in flight was finished"
    );
    assert!(
        stopping.elapsed() < Duration::from_secs(3),
        "stop took {:?}",
        stopping.elapsed()
    );
}

#[tokio::test]
async fn a_restarted_relay_gives_the_client_its_name_back() {
    let relay = TestRelay::start().await;
    let addr = relay.addr;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let url = tunnel.public_url.clone();
    relay.stop().await;

    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("rebind the relay's port");
    let _relay = TestRelay::on(listener, Default::default());
    loop {
        match tunnel.next_event().await {
            portpreview::events::TunnelEvent::Connected { public_url, .. } => {
                assert_eq!(public_url, url, "same name after the restart");
                break;
            }
            portpreview::events::TunnelEvent::Disconnected { .. } => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(caller::post(&tunnel.url("/again"), "x").await.status, 200);
}

/// A TCP proxy to `to` whose connection number `swallow` (from 1) passes
/// the relay's first answer (the upgrade's 101) and loses the rest, as a
/// network that went bad would; the first connection is cut when `cut` is
/// notified.
async fn lossy_proxy(to: std::net::SocketAddr, swallow: usize) -> (std::net::SocketAddr, Arc<Notify>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
    let addr = listener.local_addr().expect("proxy address");
    let cut = Arc::new(Notify::new());
    let cut_first = Arc::clone(&cut);
    tokio::spawn(async move {
        let mut count = 0;
        while let Ok((client, _)) = listener.accept().await {
            count += 1;
            let Ok(relay) = tokio::net::TcpStream::connect(to).await else {
                return;
            };
            let cut = Arc::clone(&cut_first);
            tokio::spawn(async move {
                let (mut client_reads, mut client_writes) = client.into_split();
                let (mut relay_reads, mut relay_writes) = relay.into_split();
                let up = tokio::io::copy(&mut client_reads, &mut relay_writes);
                let down = async {
                    if count == swallow {
                        let mut first = vec![0; 64 * 1024];
                        let read = relay_reads.read(&mut first).await?;
                        client_writes.write_all(&first[..read]).await?;
                        return tokio::io::copy(&mut relay_reads, &mut tokio::io::sink()).await;
                    }
                    tokio::io::copy(&mut relay_reads, &mut client_writes).await
                };
                let cut = async {
                    match count {
                        1 => cut.notified().await,
                        _ => std::future::pending().await,
                    }
                };
                // Whichever ends first ends the connection: both sockets close.
                tokio::select! {
                    _ = up => {}
                    _ = down => {}
                    () = cut => {}
                }
            });
        }
    });
    (addr, cut)
}

/// A welcome lost on its way during a reconnect leaves the relay holding
/// the name for a connection the client never saw, under a resume secret
/// it never got. The client asks again until that hold runs out and gets
/// its name back, rather than giving up on the 409.
#[tokio::test]
async fn a_welcome_lost_on_a_reconnect_does_not_cost_the_client_its_name() {
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        grace: Duration::from_secs(2),
        ..Default::default()
    })
    .await;
    let (proxy, cut) = lossy_proxy(relay.addr, 2).await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&format!("http://{proxy}"), &handler.url()).await;
    let name = tunnel.name().to_owned();
    cut.notify_one();
    let mut held = 0;
    loop {
        match tunnel.next_event().await {
            TunnelEvent::Connected { public_url, .. } => {
                assert!(public_url.ends_with(&format!("/t/{name}")), "{public_url}");
                break;
            }
            TunnelEvent::Disconnected { reason, .. } => held += usize::from(reason.contains("(409)")),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(held > 0, "the name was held for the lost connection");
    let again = format!("{}/t/{name}/again", relay.http_url());
    assert_eq!(caller::post(&again, "x").await.status, 200);
}

/// A request in flight when the connection to the relay drops gets its
/// caller a 502 and is never resent to the client once it is back under
/// its name: providers retry on their own, and a replay must be asked for.
#[tokio::test]
async fn a_request_in_flight_when_the_connection_drops_is_never_resent_after_the_reconnect() {
    let relay = TestRelay::start().await;
    // Passes everything; only the first connection is cut, when told.
    let (proxy, cut) = lossy_proxy(relay.addr, 0).await;
    let release = CancellationToken::new();
    let handler = LocalHandler::holding("/in-flight", release.clone()).await;
    let mut tunnel = TestTunnel::start(&format!("http://{proxy}"), &handler.url()).await;
    let name = tunnel.name().to_owned();
    let url = |path: &str| format!("{}/t/{name}{path}", relay.http_url());

    let in_flight = url("/in-flight");
    let call = tokio::spawn(async move { caller::post(&in_flight, r#"{"id":"evt_in_flight_once"}"#).await });
    handler.wait_for_request().await;
    cut.notify_one();
    let reply = call.await.expect("caller task");
    assert_eq!(reply.status, 502, "{}", reply.text());

    // Past the request still with the handler, and the lost connection.
    let back = loop {
        if let TunnelEvent::Connected { public_url, .. } = tunnel.next_event().await {
            break public_url;
        }
    };
    assert!(back.ends_with(&format!("/t/{name}")), "{back}");
    // A request sent after the reconnect and answered: whatever the relay
    // would hand the new connection of its own accord came before it.
    let after = caller::post(&url("/after"), r#"{"id":"evt_after_reconnect"}"#).await;
    assert_eq!(after.status, 200, "{}", after.text());
    release.cancel();
    let (summary, _) = loop {
        let delivered = tunnel.next_delivery().await;
        if delivered.0.path == "/in-flight" {
            break delivered;
        }
    };
    assert_eq!(summary.status, None, "no caller had the handler's answer: {summary:?}");
    let after_again = caller::post(&url("/after"), r#"{"id":"evt_after_release"}"#).await;
    assert_eq!(after_again.status, 200, "{}", after_again.text());
    assert_eq!(
        handler.arrivals("evt_in_flight_once"),
        1,
        "the request in flight reached the handler once: {:?}",
        handler.requests()
    );
}

#[tokio::test]
async fn a_second_client_cannot_take_a_name_in_use() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let named = TunnelOptions {
        name: Some("my-hooks".into()),
        ..TunnelOptions::default()
    };
    let first = TestTunnel::start_with(&relay.http_url(), &handler.url(), named.clone())
        .await
        .expect("first claim");
    assert!(first.public_url.ends_with("/t/my-hooks"));
    let second = TestTunnel::start_with(&relay.http_url(), &handler.url(), named.clone()).await;
    match second {
        Err(portpreview::tunnel::ConnectError::NameTaken { name, why, free_in }) => {
            assert_eq!((name.as_str(), why.as_str()), ("my-hooks", "name my-hooks is in use"));
            assert_eq!(free_in, None, "a live client's name is refused at once, not waited for");
        }
        Err(other) => panic!("expected 409 name taken, got {other}"),
        Ok(_) => panic!("a second client took a name in use"),
    }

    // A client that stops says goodbye, and its name is free at once, not
    // held through the grace period for a reconnect that will not come.
    first.stop().await.expect("the first client stops cleanly");
    let deadline = Instant::now() + Duration::from_secs(5);
    let restarted = loop {
        match TestTunnel::start_with(&relay.http_url(), &handler.url(), named.clone()).await {
            Ok(tunnel) => break tunnel,
            Err(portpreview::tunnel::ConnectError::NameTaken { .. }) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(err) => panic!("the name was not freed by the goodbye: {err}"),
        }
    };
    assert!(restarted.public_url.ends_with("/t/my-hooks"));
}

/// A relay at its connection cap says when to come back: a tunnel that
/// starts then waits for room, rather than giving up at once.
#[tokio::test]
async fn a_tunnel_starting_while_the_relay_is_full_waits_for_room() {
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        max_connections_per_ip: 2,
        ..Default::default()
    })
    .await;
    let handler = LocalHandler::echo().await;
    // Room for the tunnel and, once it is in, for the caller.
    let mut filling = Vec::new();
    for _ in 0..2 {
        let connection = tokio::net::TcpStream::connect(relay.addr).await;
        filling.push(connection.expect("a connection allowed"));
    }
    let held_back = Arc::new(Notify::new());
    let options = TunnelOptions {
        held_back: Some(held_back.clone()),
        ..TunnelOptions::default()
    };
    let (relay_url, target) = (relay.http_url(), handler.url());
    let start = TestTunnel::start_with(&relay_url, &target, options);
    tokio::pin!(start);
    tokio::select! {
        ended = &mut start => panic!("the start ended while the relay was full: {:?}", ended.err()),
        () = held_back.notified() => {}
    }
    drop(filling);
    let tunnel = tokio::time::timeout(Duration::from_secs(20), start)
        .await
        .expect("the tunnel opens within 20 s of the room it waited for")
        .expect("the tunnel opens");
    let reply = caller::post(&tunnel.url("/hook"), "after the wait").await;
    assert_eq!((reply.status, reply.text()), (200, "after the wait".to_string()));
}

#[tokio::test]
async fn only_a_valid_token_may_open_a_tunnel() {
    let tokens = portpreview_server::Tokens::from_toml("[[token]]\ntoken = \"s3cret-token\"\n").expect("tokens");
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        tokens: Some(tokens),
        ..Default::default()
    })
    .await;
    let handler = LocalHandler::echo().await;
    // No token and a wrong one are different mistakes, and are told apart.
    for (token, said) in [
        (
            None,
            "this relay requires a token: pass --token, set PORTPREVIEW_TOKEN, or add token = \"…\" to the config file (it goes only to the file's own server)",
        ),
        (
            Some("wrong"),
            "the relay refused the token (401): check --token, PORTPREVIEW_TOKEN or the config file's token",
        ),
    ] {
        let options = TunnelOptions {
            token: token.map(String::from),
            ..TunnelOptions::default()
        };
        match TestTunnel::start_with(&relay.http_url(), &handler.url(), options).await {
            Err(
                err @ (portpreview::tunnel::ConnectError::TokenRequired
                | portpreview::tunnel::ConnectError::Unauthorized),
            ) => {
                assert_eq!(err.to_string(), said);
                assert!(err.is_fatal(), "no retry can fix a token");
            }
            Err(other) => panic!("expected 401, got {other}"),
            Ok(_) => panic!("token {token:?} opened a tunnel"),
        }
    }
    let good = TunnelOptions {
        token: Some("s3cret-token".into()),
        ..TunnelOptions::default()
    };
    let tunnel = TestTunnel::start_with(&relay.http_url(), &handler.url(), good)
        .await
        .expect("valid token");
    assert_eq!(caller::post(&tunnel.url("/ok"), "x").await.status, 200);
}

#[tokio::test]
async fn a_provider_retry_shows_as_the_second_delivery_of_its_event() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let body = r#"{"id":"evt_1PortPreviewRetry","object":"event","type":"invoice.paid"}"#;
    let headers: [(&str, &[u8]); 2] = [
        ("stripe-signature", b"t=1700000000,v1=00"),
        ("user-agent", b"Stripe/1.0"),
    ];
    for expected in 1..=2 {
        let reply = caller::send("POST", &tunnel.url("/webhooks/stripe"), &headers, body).await;
        assert_eq!(reply.status, 200);
        let (summary, number) = tunnel.next_delivery().await;
        assert_eq!(number, expected);
        assert_eq!(summary.provider.as_deref(), Some("stripe"));
        assert_eq!(summary.event_key, "evt_1PortPreviewRetry");
        assert_eq!(summary.event_key_source, "body:/id");
    }
}

/// A handler that answers one request per connection and then closes it
/// without saying so (no `Connection: close`), as a server whose keep-alive
/// timeout has just run out does. Returns its address and a count of the
/// requests it read.
async fn closes_after_each_answer() -> (std::net::SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let served = std::sync::Arc::new(AtomicUsize::new(0));
    let count = served.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let count = count.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                // The requests here have no body: the head is the request.
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                count.fetch_add(1, Ordering::SeqCst);
                let _ = socket
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                    .await;
                // Dropped: closed with the answer just sent.
            });
        }
    });
    (addr, served)
}

#[tokio::test]
async fn a_handler_that_closes_each_connection_after_answering_gets_every_request_once() {
    let relay = TestRelay::start().await;
    let (addr, served) = closes_after_each_answer().await;
    let tunnel = TestTunnel::start(&relay.http_url(), &format!("http://{addr}")).await;
    for n in 1..=30 {
        let reply = caller::send("GET", &tunnel.url(&format!("/n/{n}")), &[], Vec::new()).await;
        assert_eq!(reply.status, 200, "request {n}: {}", reply.text());
        assert_eq!(reply.text(), "ok");
    }
    assert_eq!(
        served.load(std::sync::atomic::Ordering::SeqCst),
        30,
        "each request reached the handler once"
    );
}

#[tokio::test]
async fn a_target_with_a_base_path_gets_it_exactly_for_the_bare_tunnel_url() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let target = format!("{}/webhooks/stripe", handler.url());
    let tunnel = TestTunnel::start(&relay.http_url(), &target).await;
    for (sent, arrived) in [
        ("", "/webhooks/stripe"),
        ("/", "/webhooks/stripe"),
        ("?x=1", "/webhooks/stripe?x=1"),
        ("/v2?x=1", "/webhooks/stripe/v2?x=1"),
    ] {
        let reply = caller::post(&format!("{}{sent}", tunnel.public_url), "{}").await;
        assert_eq!(reply.status, 200, "{sent:?}");
        let seen = handler.requests().pop().unwrap();
        assert_eq!(seen.uri, arrived, "the tunnel URL + {sent:?}");
    }
}

#[tokio::test]
async fn a_base_path_written_with_a_slash_keeps_it() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    // Django's APPEND_SLASH and Go's ServeMux redirect the slashless form,
    // and providers do not follow redirects on a POST.
    let target = format!("{}/webhook/", handler.url());
    let tunnel = TestTunnel::start(&relay.http_url(), &target).await;
    for (sent, arrived) in [
        ("", "/webhook/"),
        ("/", "/webhook/"),
        ("/?a=1", "/webhook/?a=1"),
        ("/v2", "/webhook/v2"),
    ] {
        let reply = caller::post(&format!("{}{sent}", tunnel.public_url), "{}").await;
        assert_eq!(reply.status, 200, "{sent:?}");
        let seen = handler.requests().pop().unwrap();
        assert_eq!(seen.uri, arrived, "the tunnel URL + {sent:?}");
    }
}

#[tokio::test]
async fn a_streamed_body_cut_off_by_the_relay_is_recorded_with_the_reason() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // Over the client's whole-body buffer, so the body streams to the handler.
    let limit = 3 * 1024 * 1024;
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        max_body: limit,
        ..Default::default()
    })
    .await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let mut stream = tokio::net::TcpStream::connect(relay.addr).await.expect("connect");
    let head = format!(
        "POST /t/{}/big HTTP/1.1\r\nHost: {}\r\nTransfer-Encoding: chunked\r\n\r\n",
        tunnel.name(),
        relay.addr
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    let chunk = [
        format!("{:x}\r\n", 64 * 1024).into_bytes(),
        vec![b'x'; 64 * 1024],
        b"\r\n".to_vec(),
    ]
    .concat();
    // The relay answers 413 and stops reading once the body passes its limit.
    for _ in 0..(limit / (64 * 1024) + 8) {
        if stream.write_all(&chunk).await.is_err() {
            break;
        }
    }
    let mut answer = vec![0; 1024];
    let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut answer))
        .await
        .expect("an answer")
        .expect("readable");
    let answer = String::from_utf8_lossy(&answer[..n]).into_owned();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");

    let (summary, _) = tunnel.next_delivery().await;
    assert!(summary.id > 0, "the cut-off request is in the history");
    assert_eq!(summary.status, None);
    assert_eq!(
        summary.error.as_deref(),
        Some(
            "the request body went over the relay's limit; the relay answered the caller 413; the handler got only \
             part of its body"
        )
    );
    // Chunked, so no size was declared: still marked cut, and never replayed.
    let stored = tunnel.stored(summary.id);
    assert!(
        stored.request.request_truncated(),
        "{} bytes kept",
        stored.request.request_body.len()
    );
    let refused = portpreview::replay::run(
        stored.request,
        &portpreview::replay::ReplayOptions::default(),
        &|_: portpreview::replay::Progress| {},
    )
    .await
    .expect_err("a cut body is not replayed");
    assert!(
        refused.to_string().starts_with("the delivery's body was cut short"),
        "{refused}"
    );
}

#[tokio::test]
async fn a_server_that_is_no_relay_is_named_as_such_and_not_retried() {
    // The handler itself given as --server: it answers the upgrade with a page.
    let handler = LocalHandler::echo().await;
    let options = TunnelOptions::default();
    match TestTunnel::start_with(&handler.url(), &handler.url(), options).await {
        Err(err @ portpreview::tunnel::ConnectError::NotARelay { .. }) => {
            let said = err.to_string();
            assert!(
                said.ends_with(
                    "is not a PortPreview relay: it answered 200 OK where a relay opens a WebSocket; check --server"
                ),
                "{said}"
            );
            assert!(err.is_fatal());
        }
        Err(other) => panic!("expected NotARelay, got {other}"),
        Ok(_) => panic!("a tunnel opened on a plain HTTP server"),
    }
}

/// A caller that reads the answer's head and hangs up before its body
/// had the status: the history keeps it, with why the body did not follow,
/// rather than a delivery no caller got.
#[tokio::test]
async fn a_caller_gone_during_the_answers_body_is_recorded_with_the_status_it_had() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let relay = TestRelay::start().await;
    // A handler that streams its answer: the head at once, the body later.
    let handler = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let handler_url = format!("http://{}", handler.local_addr().expect("address"));
    let serving = tokio::spawn(async move {
        let (mut conn, _) = handler.accept().await.expect("accept");
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !seen.ends_with(b"\r\n\r\n{}") {
            let n = conn.read(&mut buf).await.expect("read");
            assert!(n > 0, "the request came whole");
            seen.extend_from_slice(&buf[..n]);
        }
        conn.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            .await
            .expect("head");
        for (wait, piece) in [(300, &b"5\r\nhello\r\n"[..]), (600, b"0\r\n\r\n")] {
            tokio::time::sleep(Duration::from_millis(wait)).await;
            let _ = conn.write_all(piece).await;
        }
    });
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler_url).await;

    let mut caller = tokio::net::TcpStream::connect(relay.addr).await.expect("connect");
    let request = format!(
        "POST /t/{}/hook HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}",
        tunnel.name()
    );
    caller.write_all(request.as_bytes()).await.expect("send");
    let head = caller::read_head(&mut caller).await.expect("the head came");
    assert!(head.starts_with(b"HTTP/1.1 200 "), "{}", String::from_utf8_lossy(&head));
    // Reset, as a client that stops reading leaves: nothing more is taken.
    caller.set_zero_linger().expect("linger");
    drop(caller);

    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!(summary.status, Some(200), "{summary:?}");
    assert_eq!(
        summary.error.as_deref(),
        Some("the caller went away during the answer: the caller had the status and headers, not the whole body")
    );
    serving.await.expect("the handler finished");
}

/// An answer of `text`, as the handlers below give.
fn plain(text: &'static str) -> http::Response<http_body_util::Full<bytes::Bytes>> {
    http::Response::new(http_body_util::Full::new(bytes::Bytes::from_static(text.as_bytes())))
}

/// A handler that serves one connection at a time (Python's `http.server`,
/// `php -S`) is free for the developer's own calls soon after a delivery,
/// and takes a burst of deliveries one after the other: the tunnel does not
/// hold a kept-alive connection while others wait behind it.
#[tokio::test]
async fn a_handler_serving_one_connection_at_a_time_is_free_again_after_a_delivery() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let stop = tokio_util::sync::CancellationToken::new();
    let serving = tokio::spawn(common::local::serve_http_one_connection_at_a_time(
        listener,
        |_| async { plain("served") },
        stop.clone(),
    ));
    let relay = TestRelay::start().await;
    let options = TunnelOptions {
        local_timeout: Duration::from_secs(3),
        ..TunnelOptions::default()
    };
    let tunnel = TestTunnel::start_with(&relay.http_url(), &addr.to_string(), options)
        .await
        .expect("connects");
    assert_eq!(caller::post(&tunnel.url("/hook"), "{}").await.status, 200);

    let direct = tokio::time::timeout(
        Duration::from_secs(10),
        caller::post(&format!("http://{addr}/mine"), "{}"),
    )
    .await;
    assert_eq!(
        direct.map(|reply| reply.status).ok(),
        Some(200),
        "the developer's own call was shut out by the tunnel's idle connection"
    );

    // A provider's burst: each delivery on its own connection, which the
    // handler takes only once the one before it is closed.
    let burst: Vec<_> = (0..8)
        .map(|n| {
            let url = tunnel.url(&format!("/burst/{n}"));
            tokio::spawn(async move { caller::post(&url, "{}").await.status })
        })
        .collect();
    for delivery in burst {
        assert_eq!(
            delivery.await.expect("caller"),
            200,
            "answered within the 3 s local timeout"
        );
    }
    stop.cancel();
    serving.abort();
}

/// `localhost` (and a bare port) reaches a handler listening on `::1`
/// alone, as Node does where the resolver names `::1` first, and as curl
/// finds it.
#[tokio::test]
async fn a_bare_port_reaches_a_handler_listening_on_ipv6_loopback_alone() {
    let listener = tokio::net::TcpListener::bind("[::1]:0").await.expect("bind ::1");
    let port = listener.local_addr().expect("addr").port();
    let stop = tokio_util::sync::CancellationToken::new();
    let serving = tokio::spawn(common::local::serve_http(
        listener,
        |_| async { plain("on ::1") },
        stop.clone(),
    ));
    let relay = TestRelay::start().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &port.to_string()).await;
    let reply = caller::post(&tunnel.url("/hook"), "{}").await;
    assert_eq!((reply.status, reply.text()), (200, "on ::1".to_owned()));
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!((summary.status, summary.error), (Some(200), None));
    stop.cancel();
    serving.abort();
}

/// An answer whose body takes longer than the idle close to stream keeps
/// its connection for the next delivery: the connection was busy, not
/// unused, all that time.
#[tokio::test]
async fn a_connection_busy_streaming_a_slow_answer_is_kept_for_the_next_delivery() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counting = accepted.clone();
    // Answers each request's head at once and ends its chunked body 2.5 s
    // later, more than the forwarder's 1 s idle close.
    let serving = tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            counting.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tokio::spawn(async move {
                let mut read = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    while !read.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => read.extend_from_slice(&buf[..n]),
                        }
                    }
                    read.clear();
                    let head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n";
                    if socket.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(2500)).await;
                    if socket.write_all(b"4\r\nlast\r\n0\r\n\r\n").await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let relay = TestRelay::start().await;
    let tunnel = TestTunnel::start(&relay.http_url(), &addr.to_string()).await;
    let first = caller::send("GET", &tunnel.url("/slow/1"), &[], "").await;
    assert_eq!((first.status, first.text()), (200, "firstlast".to_owned()));
    // Well inside the idle close counted from the end of that answer.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let second = caller::send("GET", &tunnel.url("/slow/2"), &[], "").await;
    assert_eq!((second.status, second.text()), (200, "firstlast".to_owned()));
    assert_eq!(
        accepted.load(std::sync::atomic::Ordering::Relaxed),
        1,
        "the second delivery went over the connection the first had kept"
    );
    serving.abort();
}

/// A relay with a domain gives the real client a `<name>.<domain>` URL,
/// and a webhook sent to that host reaches its handler with the whole
/// path, as a provider posting to the URL would.
#[tokio::test]
async fn with_a_domain_a_webhook_reaches_the_client_by_its_subdomain() {
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        domain: Some("relay.test".into()),
        ..Default::default()
    })
    .await;
    let handler = LocalHandler::echo().await;
    let options = TunnelOptions {
        name: Some("shop".into()),
        ..TunnelOptions::default()
    };
    let mut tunnel = TestTunnel::start_with(&relay.http_url(), &handler.url(), options)
        .await
        .expect("tunnel");
    assert_eq!(
        tunnel.public_url,
        format!("http://shop.relay.test:{}", relay.addr.port())
    );
    // Beside it, the URL that needs no wildcard DNS.
    assert_eq!(
        tunnel.also_url,
        Some(format!("http://127.0.0.1:{}/t/shop", relay.addr.port()))
    );
    let request = "POST /webhooks/shopify?x=1 HTTP/1.1\r\nHost: shop.relay.test\r\n\
                   Content-Length: 2\r\nConnection: close\r\n\r\n{}";
    let answer = caller::raw(relay.addr, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let seen = handler.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        (seen[0].uri.as_str(), seen[0].body.as_slice()),
        ("/webhooks/shopify?x=1", &b"{}"[..])
    );
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!(
        (summary.path.as_str(), summary.status),
        ("/webhooks/shopify?x=1", Some(200))
    );
    // `/t/<name>` reaches it too, and each delivery records the URL its
    // caller called: Twilio and Square sign that URL, and a replay
    // re-signs with it.
    let request = "POST /t/shop/webhooks/twilio HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                   Content-Length: 2\r\nConnection: close\r\n\r\n{}";
    let answer = caller::raw(relay.addr, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(handler.requests()[1].uri, "/webhooks/twilio");
    let (by_path, _) = tunnel.next_delivery().await;
    let store = portpreview::store::Store::open(&tunnel.db).expect("open the history");
    let called = |id| store.get(id).expect("read").expect("the delivery").request.tunnel_url;
    // The first went to `Host: shop.relay.test`, with no port (as through
    // a proxy on port 80): that is the URL its sender signed.
    assert_eq!(called(summary.id), "http://shop.relay.test");
    assert_eq!(called(by_path.id), "http://127.0.0.1/t/shop");
    // Another subdomain is no tunnel's.
    let request = "POST /x HTTP/1.1\r\nHost: other.relay.test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    let answer = caller::raw(relay.addr, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
}

/// A relay of the test's own, speaking the protocol frame by frame: it
/// accepts one client, takes its hello and welcomes it as `name`; `then`
/// plays the rest on the socket. Its URL, and the task playing it.
async fn fake_relay<F, Fut>(name: &'static str, then: F) -> (String, tokio::task::JoinHandle<Fut::Output>)
where
    F: FnOnce(WebSocketStream<tokio::net::TcpStream>) -> Fut + Send + 'static,
    Fut: std::future::Future + Send,
    Fut::Output: Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let task = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.expect("accept");
        let mut socket = tokio_tungstenite::accept_async(tcp).await.expect("upgrade");
        let _hello = socket.next().await;
        let welcome = ServerMessage::Welcome {
            protocol: PROTOCOL_VERSION,
            name: name.into(),
            public_url: format!("http://{addr}/t/{name}"),
            resume: "r".into(),
        };
        socket.send(frame_of(welcome)).await.expect("send");
        then(socket).await
    });
    (format!("http://{addr}"), task)
}

/// A relay's message as the WebSocket message that carries it.
fn frame_of(message: ServerMessage) -> Message {
    Message::Binary(codec::encode(&message, b"").expect("encodes").into())
}

/// Once a tunnel has been served, a page where its relay was (a proxy's,
/// while the relay behind it restarts) is waited out like any outage, not
/// the end of the tunnel.
#[tokio::test]
async fn a_page_where_the_relay_was_is_waited_out_once_connected() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let welcome = move |name: &str| ServerMessage::Welcome {
        protocol: PROTOCOL_VERSION,
        name: name.into(),
        public_url: format!("http://{addr}/t/{name}"),
        resume: "r".into(),
    };
    let relay = tokio::spawn(async move {
        // Served, then gone.
        let (tcp, _) = listener.accept().await.expect("accept");
        let mut socket = tokio_tungstenite::accept_async(tcp).await.expect("upgrade");
        let _hello = socket.next().await;
        socket.send(frame_of(welcome("back"))).await.expect("send");
        drop(socket);
        // A maintenance page in its place.
        let (mut tcp, _) = listener.accept().await.expect("accept");
        let _ = caller::read_head(&mut tcp).await;
        let page = "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 21\r\n\r\n<h1>maintenance</h1>\n";
        tcp.write_all(page.as_bytes()).await.expect("the page");
        drop(tcp);
        // The relay again.
        let (tcp, _) = listener.accept().await.expect("accept");
        let mut socket = tokio_tungstenite::accept_async(tcp).await.expect("upgrade");
        let _hello = socket.next().await;
        socket.send(frame_of(welcome("back"))).await.expect("send");
        while socket.next().await.is_some_and(|frame| frame.is_ok()) {}
    });
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&format!("http://{addr}"), &handler.url()).await;
    let mut told = Vec::new();
    loop {
        match tunnel.next_event().await {
            TunnelEvent::Connected { .. } => break,
            TunnelEvent::Disconnected { reason, .. } => told.push(reason),
            _ => {}
        }
    }
    assert!(
        told.iter().any(|reason| reason.contains("is not a PortPreview relay")),
        "the page is told as it is met: {told:?}"
    );
    drop(tunnel);
    relay.abort();
}

/// A relay's news of a request it turned away dates the delivery from
/// the relay's figures, within a day: one that broke the protocol dated
/// requests to 1970 and gave them a duration of ages.
#[tokio::test]
async fn news_of_a_turned_away_request_is_dated_within_a_day_whatever_the_relay_says() {
    let (relay_url, fake_relay) = fake_relay("fake", |mut socket| async move {
        let news = ServerMessage::TurnedAway {
            method: "POST".into(),
            target: "/hook".into(),
            headers: Vec::new(),
            body_size: Some(0),
            status: 503,
            reason: "tunnel fake is reconnecting".into(),
            waited_ms: u64::MAX,
            told_after_ms: u64::MAX,
        };
        socket.send(frame_of(news)).await.expect("send");
        // Open until the client goes.
        while socket.next().await.is_some_and(|frame| frame.is_ok()) {}
    })
    .await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay_url, &handler.url()).await;
    let now = portpreview::time::now_ms();
    let (summary, _) = tunnel.next_delivery().await;
    let day_ms = 24 * 60 * 60 * 1000;
    assert!(
        (now - 2 * day_ms - 60_000..=now).contains(&summary.received_at_ms),
        "dated {} ms before now",
        now - summary.received_at_ms
    );
    assert!(
        summary.duration_ms.is_some_and(|ms| ms <= (day_ms + 60_000) as f64),
        "{summary:?}"
    );
    drop(tunnel);
    fake_relay.abort();
}

/// A request whose body is still arriving when the user stops PortPreview
/// is in the history all the same, as cut off by the stop.
#[tokio::test]
async fn a_request_still_uploading_when_the_tunnel_stops_is_recorded() {
    let (taken, chunk_taken) = tokio::sync::oneshot::channel();
    let (relay_url, fake_relay) = fake_relay("fake", |mut socket| async move {
        let head = ServerMessage::RequestHead {
            stream: 1,
            method: "POST".into(),
            target: "/upload".into(),
            headers: vec![Header::new("content-length", "1000")],
            end: false,
        };
        socket.send(frame_of(head)).await.expect("send");
        let chunk = codec::encode(&ServerMessage::RequestBody { stream: 1, end: false }, &[b'x'; 100]);
        socket
            .send(Message::Binary(chunk.expect("encodes").into()))
            .await
            .expect("send");
        let mut taken = Some(taken);
        while let Some(Ok(frame)) = socket.next().await {
            // The client grants credit back once it has taken the chunk.
            if let Message::Binary(frame) = frame {
                if let Ok((ClientMessage::Window { stream: 1, .. }, _)) = codec::decode::<ClientMessage>(frame) {
                    if let Some(taken) = taken.take() {
                        let _ = taken.send(());
                    }
                }
            }
        }
    })
    .await;
    let handler = LocalHandler::echo().await;
    let tunnel = TestTunnel::start(&relay_url, &handler.url()).await;
    tokio::time::timeout(Duration::from_secs(20), chunk_taken)
        .await
        .expect("the client takes the first chunk within 20 s")
        .expect("the fake relay runs");
    let db = tunnel.db.clone();
    let (stopped, _dir) = tunnel.stop_keeping_history().await;
    stopped.expect("a clean stop");
    let history = portpreview::store::Store::open_existing(&db).expect("the history");
    let recorded = history
        .list(&portpreview::store::ListQuery::default())
        .expect("the list");
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0].path, "/upload");
    assert!(
        recorded[0].error.as_deref() == Some("PortPreview was stopped before the answer came; it was not forwarded"),
        "{recorded:?}"
    );
    let stored = history.get(recorded[0].id).expect("read").expect("the delivery");
    assert_eq!(
        (stored.request.request_body.len(), stored.request.request_body_size),
        (100, 1000),
        "stored cut short"
    );
    assert!(handler.requests().is_empty(), "never forwarded");
    fake_relay.abort();
}

/// A relay that sends a request's head, then a frame no relay may send
/// (the same stream opened again), and drops the connection: the delivery
/// is recorded as ended with the connection, not as a caller gone.
#[tokio::test]
async fn a_request_cut_by_a_relay_that_broke_the_protocol_is_not_blamed_on_its_caller() {
    let (relay_url, fake_relay) = fake_relay("fake", |mut socket| async move {
        let head = ServerMessage::RequestHead {
            stream: 1,
            method: "POST".into(),
            target: "/upload".into(),
            headers: vec![Header::new("content-length", "3")],
            end: false,
        };
        for message in [head.clone(), head] {
            socket.send(frame_of(message)).await.expect("send");
        }
        // Read until the client closes over the frame it could not take.
        while let Some(Ok(_)) = socket.next().await {}
    })
    .await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay_url, &handler.url()).await;
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!(
        summary.error.as_deref(),
        Some("the connection to the relay ended before the answer; it was not forwarded")
    );
    assert!(handler.requests().is_empty());
    fake_relay.abort();
}

/// A relay that sends more requests at once than a relay may keep in
/// flight (twice [`MAX_IN_FLIGHT`], all waiting for their bodies): the
/// client takes those and answers the next 503 itself, rather than hold an
/// exchange and a body buffer for every stream a relay opens.
#[tokio::test]
async fn a_relay_opening_more_streams_than_a_tunnel_carries_gets_503_for_the_rest() {
    use portpreview_shared::message::MAX_IN_FLIGHT;
    let taken = 2 * MAX_IN_FLIGHT as u64;
    let (relay_url, fake_relay) = fake_relay("crowd", move |mut socket| async move {
        for stream in 1..=taken + 1 {
            let head = ServerMessage::RequestHead {
                stream,
                method: "POST".into(),
                target: format!("/crowd/{stream}"),
                headers: vec![],
                end: false,
            };
            socket.feed(frame_of(head)).await.expect("send");
        }
        socket.flush().await.expect("flush");
        // The first answer from the client: the one past the cap.
        loop {
            match socket.next().await {
                Some(Ok(Message::Binary(frame))) => {
                    if let Ok((ClientMessage::ResponseHead { stream, status, .. }, body)) =
                        codec::decode::<ClientMessage>(frame)
                    {
                        return (stream, status, String::from_utf8_lossy(&body).into_owned());
                    }
                }
                Some(Ok(_)) => continue,
                other => panic!("the client closed the socket: {other:?}"),
            }
        }
    })
    .await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay_url, &handler.url()).await;
    let (stream, status, body) = tokio::time::timeout(Duration::from_secs(60), fake_relay)
        .await
        .expect("the client answered none of the streams")
        .expect("the fake relay");
    assert_eq!((stream, status), (taken + 1, 503), "{body}");
    assert!(body.contains("requests in flight already"), "{body}");
    assert!(
        handler.requests().is_empty(),
        "no body came, so nothing was forwarded yet"
    );
    // The caller turned away is in no history: the user is told why.
    loop {
        if let TunnelEvent::Notice { text } = tunnel.next_event().await {
            assert!(
                text.starts_with("2048 requests are in flight, the most a tunnel carries: callers past them are answered 503 and not recorded"),
                "{text}"
            );
            break;
        }
    }
}

/// The same cap for a relay that resets each stream as soon as it has
/// opened it: each exchange still runs (the handler's answer goes to the
/// history), so the streams are counted by their exchanges, not by the
/// streams the relay keeps open.
#[tokio::test]
async fn a_relay_resetting_each_stream_it_opens_still_meets_the_cap() {
    use portpreview_shared::message::MAX_IN_FLIGHT;
    let taken = 2 * MAX_IN_FLIGHT as u64;
    // Each exchange holds a connection to the handler, and the handler
    // its end of it.
    let limit = portpreview_shared::open_files::raise_limit().unwrap_or(u64::MAX);
    assert!(
        limit > 3 * taken,
        "this test needs {} open files; the limit is {limit}",
        3 * taken
    );
    let (relay_url, fake_relay) = fake_relay("resets", move |mut socket| async move {
        for stream in 1..=taken + 1 {
            let head = ServerMessage::RequestHead {
                stream,
                method: "POST".into(),
                target: format!("/resets/{stream}"),
                headers: vec![],
                end: true,
            };
            socket.feed(frame_of(head)).await.expect("send");
            if stream <= taken {
                let reset = ServerMessage::Reset {
                    stream,
                    reason: "the caller went away".into(),
                };
                socket.feed(frame_of(reset)).await.expect("send");
            }
        }
        socket.flush().await.expect("flush");
        loop {
            match socket.next().await {
                Some(Ok(Message::Binary(frame))) => {
                    if let Ok((ClientMessage::ResponseHead { stream, status, .. }, _)) =
                        codec::decode::<ClientMessage>(frame)
                    {
                        return (stream, status);
                    }
                }
                Some(Ok(_)) => continue,
                other => panic!("the client closed the socket: {other:?}"),
            }
        }
    })
    .await;
    let handler = LocalHandler::slow(Duration::from_secs(120)).await;
    let _tunnel = TestTunnel::start(&relay_url, &handler.url()).await;
    let answered = tokio::time::timeout(Duration::from_secs(60), fake_relay)
        .await
        .expect("the client answered none of the streams")
        .expect("the fake relay");
    assert_eq!(answered, (taken + 1, 503));
}

/// A relay that grants no room for an answer past its first window (and
/// never resets the stream, as a relay does for a caller that stops
/// reading): the client gives the stream up after ten times
/// `--local-timeout` and records why, rather than hold the exchange, its
/// copy of the answer and the handler's connection.
#[tokio::test]
async fn an_answer_the_relay_grants_no_room_for_is_given_up_in_the_end() {
    use portpreview_shared::message::{CHUNK_SIZE, STREAM_WINDOW};
    let (relay_url, fake_relay) = fake_relay("mute", |mut socket| async move {
        let head = ServerMessage::RequestHead {
            stream: 1,
            method: "GET".into(),
            target: "/export.csv".into(),
            headers: vec![],
            end: true,
        };
        socket.send(frame_of(head)).await.expect("send");
        // Takes the answer's frames and never grants a byte more.
        let mut received = 0;
        loop {
            match socket.next().await {
                Some(Ok(Message::Binary(frame))) => match codec::decode::<ClientMessage>(frame) {
                    Ok((ClientMessage::Reset { stream: 1, reason }, _)) => return (received, reason),
                    Ok((_, body)) => received += body.len(),
                    Err(err) => panic!("a frame the client should not send: {err}"),
                },
                Some(Ok(_)) => continue,
                other => panic!("the client closed the socket: {other:?}"),
            }
        }
    })
    .await;
    let handler = LocalHandler::start(|_| Answer {
        body: vec![b'x'; 3 * STREAM_WINDOW as usize],
        ..Answer::default()
    })
    .await;
    let options = TunnelOptions {
        local_timeout: Duration::from_secs(1),
        ..TunnelOptions::default()
    };
    let mut tunnel = TestTunnel::start_with(&relay_url, &handler.url(), options)
        .await
        .expect("connects");
    let (received, reason) = tokio::time::timeout(Duration::from_secs(30), fake_relay)
        .await
        .expect("the client held the stream of an answer nobody reads")
        .expect("the fake relay");
    let window = STREAM_WINDOW as usize;
    assert!(
        (window - CHUNK_SIZE..=window).contains(&received),
        "most of the first window, and not a byte past it: {received}"
    );
    assert_eq!(reason, "the relay granted no room for more of the answer for 10s");
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!(
        (summary.status, summary.error.as_deref()),
        (
            Some(200),
            Some("the relay granted no room for more of the answer for 10s")
        )
    );
}

/// A handler that answers with raw bytes, answers hyper would never
/// write, one connection at a time, and its address as a target. It reads
/// the request whole first: closing on unread bytes would reset the
/// connection, and the answer with it.
async fn raw_handler(answer: &'static [u8]) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let task = tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && socket.read(&mut byte).await.is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            let length = caller::declared_length(&String::from_utf8_lossy(&head));
            let _ = socket.read_exact(&mut vec![0u8; length]).await;
            let _ = socket.write_all(answer).await;
        }
    });
    (url, task)
}

/// Answers whose lengths hyper's client takes but the relay cannot pass
/// on as they are: `5, 5` gets the caller a 502 that says why, and the
/// history records that, not a 200; a length beside `Transfer-Encoding`
/// is dropped with the encoding, and the caller gets the decoded body.
#[tokio::test]
async fn answers_with_lengths_the_relay_cannot_pass_on_are_told_and_recorded_as_such() {
    let relay = TestRelay::start().await;
    let (listed, _listed_task) =
        raw_handler(b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\nConnection: close\r\n\r\nabcde").await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &listed).await;
    let reply = caller::post(&tunnel.url("/listed"), "{}").await;
    let said = String::from_utf8_lossy(&reply.body).into_owned();
    assert_eq!(reply.status, 502, "{said}");
    assert!(said.contains("Content-Length is not one number: 5, 5"), "{said}");
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!(summary.status, None);
    assert_eq!(
        summary.error.as_deref(),
        Some("the local answer's Content-Length is not one number: 5, 5")
    );

    let (encoded, _encoded_task) = raw_handler(
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    )
    .await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &encoded).await;
    let reply = caller::post(&tunnel.url("/encoded"), "{}").await;
    assert_eq!((reply.status, reply.body.as_slice()), (200, &b"hello"[..]));
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!((summary.status, summary.error.as_deref()), (Some(200), None));
}

/// A relay that shuts down while a request waits answers its caller 502,
/// and the history says the relay shut down, not that a connection was
/// lost: the client reads why in the relay's close.
#[tokio::test]
async fn a_request_cut_off_by_the_relays_shutdown_is_recorded_as_such() {
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        drain_timeout: Duration::from_millis(200),
        ..Default::default()
    })
    .await;
    let release = CancellationToken::new();
    let handler = LocalHandler::holding("/held", release.clone()).await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let url = tunnel.url("/held");
    let call = tokio::spawn(async move { caller::post(&url, "x").await });
    handler.wait_for_request().await;
    relay.stop().await;
    let answer = call.await.expect("the caller");
    assert_eq!(answer.status, 502);
    assert!(answer.text().contains("the relay shut down"), "{}", answer.text());
    release.cancel();
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!(
        summary.error.as_deref(),
        Some(
            "the relay shut down before the answer; the relay answered the caller 502; \
             the handler then answered 200, which reached no caller"
        )
    );
}

/// A relay that shuts down in the middle of an answer: its caller had the
/// status, and the history says so, not that the relay answered 502.
#[tokio::test]
async fn an_answer_cut_off_by_the_relays_shutdown_keeps_its_status() {
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        drain_timeout: Duration::from_millis(200),
        ..Default::default()
    })
    .await;
    let handler = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let handler_url = format!("http://{}", handler.local_addr().expect("address"));
    let release = CancellationToken::new();
    let held = release.clone();
    let streaming = tokio::spawn(async move {
        let (mut socket, _) = handler.accept().await.expect("the request");
        common::caller::read_head(&mut socket).await.expect("the head");
        socket
            .write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n")
            .await
            .expect("the start of the answer");
        held.cancelled().await;
    });
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler_url).await;
    let mut caller = tokio::net::TcpStream::connect(relay.addr).await.expect("connect");
    let request = format!("GET /t/{}/export HTTP/1.1\r\nHost: x\r\n\r\n", tunnel.name());
    caller.write_all(request.as_bytes()).await.expect("request");
    let mut start = [0; 12];
    caller.read_exact(&mut start).await.expect("the status line");
    assert_eq!(&start, b"HTTP/1.1 200");
    relay.stop().await;
    release.cancel();
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!(summary.status, Some(200));
    assert_eq!(
        summary.error.as_deref(),
        Some("the relay shut down during the answer: the caller had the status and headers, not the whole body")
    );
    streaming.abort();
}

/// A handler that refuses at the head (a 401 to a bad signature) without
/// reading the body, and keeps its connection open: the bytes it left
/// unread would be read as the start of the next request sent on that
/// connection. Each caller's request reaches it whole, on its own.
#[tokio::test]
async fn a_body_the_handler_left_unread_never_runs_into_the_next_request() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let handler_url = format!("http://{}", listener.local_addr().expect("address"));
    let (lines_tx, mut lines) = tokio::sync::mpsc::unbounded_channel::<String>();
    let refusing = tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let lines_tx = lines_tx.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&seen[..end]).into_owned();
                        let _ = lines_tx.send(head.lines().next().unwrap_or_default().to_owned());
                        seen.drain(..end + 4);
                        let refusal = b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n";
                        if socket.write_all(refusal).await.is_err() {
                            return;
                        }
                    }
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
            });
        }
    });
    let relay = TestRelay::start().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler_url).await;
    for _ in 0..3 {
        let reply = caller::send("POST", &tunnel.url("/hook"), &[], "unsigned").await;
        assert_eq!(reply.status, 401);
        let (summary, _) = tunnel.next_delivery().await;
        assert_eq!(summary.status, Some(401));
    }
    let mut heard = Vec::new();
    while let Ok(line) = lines.try_recv() {
        heard.push(line);
    }
    assert_eq!(heard, ["POST /hook HTTP/1.1"; 3], "every request line as sent");
    refusing.abort();
}
