//! A local handler that serves only HTTPS, with a self-signed certificate as
//! development servers have: `portpreview http https://localhost:PORT`
//! forwards to it, records it, and replays to it; a target written in the
//! wrong scheme fails with a reason the developer can act on.

mod common;

use common::caller;
use common::history::portpreview_async;
use common::local::LocalHandler;
use common::relay::TestRelay;
use common::tunnel::TestTunnel;

#[tokio::test]
async fn a_webhook_reaches_an_https_handler_and_its_replay_does_too() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo_https().await;
    let target = handler.https_url();
    let mut tunnel = TestTunnel::start(&relay.http_url(), &target).await;

    let body = b"{\"id\":\"evt_tls\",\"bytes\":\"\x00\xff\"}".to_vec();
    let reply = caller::post(&tunnel.url("/hook?x=1"), body.clone()).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.body, body, "the handler's answer, byte for byte");
    assert_eq!(reply.header("x-seen-uri").as_deref(), Some("/hook?x=1"));
    assert_eq!(handler.requests().len(), 1);

    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!((summary.status, summary.error.as_deref()), (Some(200), None));
    let stored = tunnel.stored(summary.id);
    assert_eq!(stored.request.target, target, "recorded with its scheme");

    let id = summary.id.to_string();
    let state = format!("{target}/state");
    let replayed = portpreview_async(&tunnel.db, &["replay", &id, "--check-url", &state, "--settle", "100ms"]).await;
    assert_eq!(replayed.code, 0, "{}{}", replayed.stdout, replayed.stderr);
    let seen = handler.requests();
    let replays: Vec<_> = seen.iter().filter(|s| s.uri == "/hook?x=1").collect();
    assert_eq!(replays.len(), 2, "the replay reached the HTTPS handler: {seen:?}");
    assert_eq!(replays[1].body, body);

    let curl = portpreview_async(&tunnel.db, &["export", &id, "--format", "curl"])
        .await
        .stdout;
    assert!(curl.contains(&format!("'{target}/hook?x=1'")), "{curl}");
    assert!(
        curl.contains("--insecure"),
        "a loopback certificate is not checked: {curl}"
    );
}

#[tokio::test]
async fn an_https_target_whose_handler_speaks_plain_http_is_told_so() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let target = format!("https://127.0.0.1:{}", handler.port());
    let mut tunnel = TestTunnel::start(&relay.http_url(), &target).await;

    let reply = caller::post(&tunnel.url("/hook"), "{}").await;
    let said = format!("{target} did not answer in TLS: is it an http:// handler?");
    assert_eq!(reply.status, 502, "{}", reply.text());
    assert!(reply.text().contains(&said), "{}", reply.text());
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!(summary.error.as_deref(), Some(said.as_str()));
}

#[tokio::test]
async fn a_plain_target_whose_handler_serves_https_is_pointed_to_https() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo_https().await;
    let target = format!("http://localhost:{}", handler.port());
    let mut tunnel = TestTunnel::start(&relay.http_url(), &target).await;

    let hint = format!("(it answered in TLS: forward to {})", handler.https_url());
    fails_with_hint(&mut tunnel, &hint).await;
    assert!(handler.requests().is_empty());
}

/// A delivery through `tunnel` gets a 502 that gives `hint`, and is
/// recorded with it.
async fn fails_with_hint(tunnel: &mut TestTunnel, hint: &str) {
    let reply = caller::post(&tunnel.url("/hook"), "{}").await;
    assert_eq!(reply.status, 502, "{}", reply.text());
    assert!(reply.text().contains(hint), "{}", reply.text());
    let (summary, _) = tunnel.next_delivery().await;
    assert!(
        summary.error.as_deref().is_some_and(|e| e.contains(hint)),
        "{summary:?}"
    );
}

/// A plain handler that crashes on the request closes the connection
/// without a byte, as a TLS one does: the hint names both.
#[tokio::test]
async fn a_handler_that_closes_before_answering_is_not_said_to_serve_https_alone() {
    let relay = TestRelay::start().await;
    let crashing = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let port = crashing.local_addr().expect("its address").port();
    let _crashes = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
        while let Ok((mut socket, _)) = crashing.accept().await {
            let mut head = [0; 1024];
            let _ = tokio::io::AsyncReadExt::read(&mut socket, &mut head).await;
        }
    }));
    let target = format!("http://127.0.0.1:{port}");
    let mut tunnel = TestTunnel::start(&relay.http_url(), &target).await;

    let hint = format!(
        "(it closed the connection before answering, as a handler that crashed on the request does, or one \
         serving HTTPS: see its log, or forward to https://127.0.0.1:{port})"
    );
    fails_with_hint(&mut tunnel, &hint).await;
}

/// The hint for a handler that has answered before and closes instead of
/// answering, up to what follows it: a connection left unused a while is
/// said to be perhaps one the handler closed for it, and a slow machine
/// may leave one so between this file's deliveries.
const CRASHED: &str =
    "(it closed the connection before answering, as a handler that crashed on the request does: see its log";

/// Fails a delivery of "poison" with the crash hint, and no word of HTTPS:
/// a handler that has answered in plain HTTP serves none.
/// The error recorded.
async fn fails_as_crashed(tunnel: &mut TestTunnel) -> String {
    let reply = caller::post(&tunnel.url("/hook"), "poison").await;
    assert_eq!(reply.status, 502, "{}", reply.text());
    assert!(
        reply.text().contains(CRASHED) && !reply.text().contains("HTTPS"),
        "{}",
        reply.text()
    );
    let (summary, _) = tunnel.next_delivery().await;
    let error = summary.error.unwrap_or_default();
    assert!(error.contains(CRASHED) && !error.contains("HTTPS"), "{error}");
    error
}

/// A handler that has answered before and crashes on one request is still
/// said to have perhaps crashed, and no longer to perhaps serve HTTPS.
#[tokio::test]
async fn a_handler_that_answered_before_and_then_closes_unanswered_is_said_to_have_crashed() {
    let relay = TestRelay::start().await;
    let handler = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let port = handler.local_addr().expect("its address").port();
    let _serving = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
        while let Ok((mut socket, _)) = handler.accept().await {
            let mut request = [0; 4096];
            let read = tokio::io::AsyncReadExt::read(&mut socket, &mut request)
                .await
                .unwrap_or(0);
            // Crashes on the poison payload, closing with no answer.
            if !String::from_utf8_lossy(&request[..read]).contains("poison") {
                let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";
                let _ = tokio::io::AsyncWriteExt::write_all(&mut socket, ok).await;
            }
        }
    }));
    let target = format!("http://127.0.0.1:{port}");
    let mut tunnel = TestTunnel::start(&relay.http_url(), &target).await;
    let reply = caller::post(&tunnel.url("/hook"), "{}").await;
    assert_eq!((reply.status, reply.text()), (200, "ok".to_string()));
    let _ = tunnel.next_delivery().await;

    let _ = fails_as_crashed(&mut tunnel).await;
}

/// Reads one request from a kept-alive connection: its head and the body
/// its Content-Length declares. `None` once the connection ends.
async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<String> {
    let mut request = Vec::new();
    let mut buf = [0; 4096];
    loop {
        let text = String::from_utf8_lossy(&request).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = (text[..end].lines())
                .find_map(|line| {
                    line.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(str::to_owned)
                })
                .and_then(|value| value.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if request.len() >= end + 4 + length {
                return Some(text);
            }
        }
        let read = tokio::io::AsyncReadExt::read(socket, &mut buf).await.ok()?;
        if read == 0 {
            return None;
        }
        request.extend_from_slice(&buf[..read]);
    }
}

/// A handler on a port of its own that keeps connections alive and
/// answers `ok` to each request, but closes unanswered on one that
/// `crashes_on` picks (given the request and how many came before it), as
/// a handler that crashed on it does. It stops when the handle is dropped.
async fn crashing_on(
    crashes_on: impl Fn(&str, usize) -> bool + Send + Sync + 'static,
) -> (u16, tokio_util::task::AbortOnDropHandle<()>) {
    let handler = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let port = handler.local_addr().expect("its address").port();
    let crashes_on = std::sync::Arc::new(crashes_on);
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let serving = tokio::spawn(async move {
        while let Ok((mut socket, _)) = handler.accept().await {
            let (crashes_on, served) = (crashes_on.clone(), served.clone());
            tokio::spawn(async move {
                while let Some(request) = read_request(&mut socket).await {
                    let before = served.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if crashes_on(&request, before) {
                        return;
                    }
                    let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                    if tokio::io::AsyncWriteExt::write_all(&mut socket, ok).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, tokio_util::task::AbortOnDropHandle::new(serving))
}

/// Most handlers keep connections alive: one that crashes on a request
/// written on a kept connection is said to have perhaps crashed too.
#[tokio::test]
async fn a_handler_crashing_on_a_kept_alive_connection_is_said_to_have_perhaps_crashed() {
    let relay = TestRelay::start().await;
    let (port, _serving) = crashing_on(|request, _| request.contains("poison")).await;
    let target = format!("http://127.0.0.1:{port}");
    let mut tunnel = TestTunnel::start(&relay.http_url(), &target).await;
    for _ in 0..2 {
        let reply = caller::post(&tunnel.url("/hook"), "{}").await;
        assert_eq!((reply.status, reply.text()), (200, "ok".to_string()));
        let _ = tunnel.next_delivery().await;
    }

    // Left unused a while, the connection may have met the handler's own
    // idle close, which the hint names too.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let error = fails_as_crashed(&mut tunnel).await;
    assert!(
        error.contains("; or it closes a connection left unused as long as this one was, "),
        "{error}"
    );
}

/// A replay attempt whose handler crashed on it, past the first, is told
/// as the tunnel tells it: a close where the answer was due.
#[tokio::test]
async fn a_replay_attempt_the_handler_crashed_on_is_said_to_be_perhaps_a_crash() {
    let relay = TestRelay::start().await;
    // The delivery and two replay attempts; the third crashes it.
    let (port, _serving) = crashing_on(|_, before| before == 3).await;
    let target = format!("http://127.0.0.1:{port}");
    let mut tunnel = TestTunnel::start(&relay.http_url(), &target).await;
    let reply = caller::post(&tunnel.url("/hook"), "{}").await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let (summary, _) = tunnel.next_delivery().await;

    let ran = portpreview_async(
        &tunnel.db,
        &["replay", &summary.id.to_string(), "--times", "3", "--json"],
    )
    .await;
    let json = ran.json();
    let third = &json["attempts"][2];
    assert!(third["status"].is_null(), "{json:#}");
    assert!(
        third["error"]
            .as_str()
            .is_some_and(|e| e.contains("(it closed the connection before answering, as a handler that crashed")),
        "{json:#}"
    );
    tunnel.stop().await.expect("the tunnel stops cleanly");
}

/// An `https://` target on a port that takes every connection and never
/// says a word (a stuck handler), until the handle is dropped.
async fn silent_port() -> (String, tokio_util::task::AbortOnDropHandle<()>) {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let target = format!("https://127.0.0.1:{}", silent.local_addr().expect("its address").port());
    let holding = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    (target, tokio_util::task::AbortOnDropHandle::new(holding))
}

/// A port that takes the connection and never answers the TLS handshake
/// (a stuck handler) is not said to be unreachable: the reason names the
/// handshake as what may not have come.
#[tokio::test]
async fn an_https_target_silent_after_the_connection_is_told_apart_from_no_connection() {
    let relay = TestRelay::start().await;
    let (target, _holding) = silent_port().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &target).await;

    let reply = caller::post(&tunnel.url("/hook"), "{}").await;
    let said = format!(
        "could not reach {target}: no TLS connection within 5s: the port took no connection, \
         or never answered the TLS handshake"
    );
    assert_eq!(reply.status, 502, "{}", reply.text());
    assert!(reply.text().contains(&said), "{}", reply.text());
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!(summary.error.as_deref(), Some(said.as_str()));
}

/// Such a port, replayed to: the run cannot start, and says why in the
/// same words, not that nothing answers there.
#[tokio::test]
async fn a_replay_to_an_https_target_silent_after_the_connection_says_so() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (target, _holding) = silent_port().await;
    let fixture = dir.path().join("hook.json");
    let written = serde_json::json!({
        "portpreview_fixture": 1,
        "method": "POST",
        "path": "/hook",
        "headers": [{"name": "content-type", "value": "application/json"}],
        "body": "{}",
    });
    std::fs::write(&fixture, written.to_string()).expect("a fixture");
    let db = dir.path().join("history.db");
    let fixture = fixture.to_str().expect("a UTF-8 path");
    let args = ["replay", "--from", fixture, "--target", &target, "--timeout", "1s"];
    let ran = portpreview_async(&db, &args).await;
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(
        ran.stderr.trim_end(),
        format!(
            "error: could not reach {target}: no TLS connection within 5s: the port took no connection, \
             or never answered the TLS handshake"
        )
    );
}
