//! A head too large to cross the tunnel costs only its own request: the
//! caller hears why, the delivery is recorded with the reason, and every
//! other request on the tunnel goes on as if nothing happened.

mod common;

use common::caller::{self, raw};
use common::local::{Answer, LocalHandler};
use common::relay::TestRelay;
use common::tunnel::TestTunnel;
use portpreview::events::TunnelEvent;
use portpreview::store::Summary;
use portpreview_shared::message::MAX_HEADER_BYTES;
use tokio_util::sync::CancellationToken;

/// Answers `/big` with one 150 KiB Set-Cookie, `/slow` once `slow_release`
/// is cancelled, and anything else at once; every answer's body is "ok".
async fn cookie_monster(slow_release: CancellationToken) -> LocalHandler {
    LocalHandler::start(move |seen| {
        let mut answer = Answer {
            status: 200,
            body: b"ok".to_vec(),
            ..Answer::default()
        };
        match seen.uri.as_str() {
            "/big" => answer.headers = vec![("set-cookie".into(), format!("session={}", "c".repeat(150 * 1024)))],
            "/slow" => answer.held_until = Some(slow_release.clone()),
            _ => {}
        }
        answer
    })
    .await
}

/// The next `count` deliveries, by path; fails if the tunnel lost its
/// session to the relay meanwhile.
async fn deliveries_on_one_session(tunnel: &mut TestTunnel, count: usize) -> Vec<Summary> {
    let mut delivered = Vec::new();
    while delivered.len() < count {
        match tunnel.next_event().await {
            TunnelEvent::Delivered { summary, .. } => delivered.push(summary),
            TunnelEvent::Disconnected { reason, .. } => panic!("the tunnel lost its session: {reason}"),
            TunnelEvent::Connected { .. } => panic!("the tunnel reconnected"),
            TunnelEvent::Missed { count } => panic!("{count} events dropped before the test read them"),
            TunnelEvent::Waiting { .. }
            | TunnelEvent::Amended { .. }
            | TunnelEvent::HistoryRefusing { .. }
            | TunnelEvent::NotRecording { .. }
            | TunnelEvent::Stopping { .. }
            | TunnelEvent::Notice { .. }
            | TunnelEvent::HeldBack { .. } => {}
        }
    }
    delivered.sort_by(|a, b| a.path.cmp(&b.path));
    delivered
}

#[tokio::test]
async fn an_answer_with_oversized_headers_fails_alone_and_the_tunnel_stays_up() {
    let relay = TestRelay::start().await;
    let slow_release = CancellationToken::new();
    let handler = cookie_monster(slow_release.clone()).await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;

    // A request in flight beside the oversized answer must not be cut off:
    // `/slow` is held until `/big` has failed, so it is in flight throughout.
    let slow_url = tunnel.url("/slow");
    let slow = tokio::spawn(async move { caller::post(&slow_url, "{}").await });
    handler.wait_for_request().await;

    let big = caller::post(&tunnel.url("/big"), "{}").await;
    assert_eq!(big.status, 502);
    assert!(
        big.text().contains("the local answer's headers are over the limit"),
        "{}",
        big.text()
    );
    assert!(
        big.header("set-cookie").is_none(),
        "nothing of the oversized head leaks"
    );
    assert!(!slow.is_finished(), "/slow is still held by its handler");

    let after = caller::post(&tunnel.url("/after"), "{}").await;
    assert_eq!(
        (after.status, after.text().as_str()),
        (200, "ok"),
        "the same session still serves"
    );
    slow_release.cancel();
    let slow = slow.await.expect("slow caller");
    assert_eq!(
        (slow.status, slow.text().as_str()),
        (200, "ok"),
        "the request in flight was answered"
    );

    let delivered = deliveries_on_one_session(&mut tunnel, 3).await;
    let paths: Vec<&str> = delivered.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(paths, ["/after", "/big", "/slow"]);
    let big = &delivered[1];
    assert_eq!(big.status, None, "the 502 was PortPreview's, not the handler's");
    let error = big.error.as_deref().expect("the failure is recorded");
    assert!(error.contains("headers are over the limit"), "{error}");
    assert!(
        error.contains(&MAX_HEADER_BYTES.to_string()),
        "the limit is named: {error}"
    );
    assert_eq!((delivered[0].status, delivered[0].error.as_deref()), (Some(200), None));

    let store = portpreview::store::Store::open(&tunnel.db).expect("open the history");
    let stored = store
        .get(big.id)
        .expect("read")
        .expect("the delivery is in the history");
    let outcome = stored.outcome.expect("the failure is stored as its outcome");
    assert_eq!(outcome.status, None);
    assert_eq!(outcome.error.as_deref(), Some(error));
}

#[tokio::test]
async fn a_request_head_too_large_to_frame_gets_431_and_the_tunnel_stays_up() {
    // Heads up to the frame limit pass the relay's parser; the Host is
    // repeated in X-Forwarded-Host, so this one no longer fits once framed.
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        max_header_bytes: MAX_HEADER_BYTES,
        ..Default::default()
    })
    .await;
    let handler = cookie_monster(CancellationToken::new()).await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;

    let request = format!(
        "GET /t/{}/huge HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        tunnel.name(),
        "h".repeat(80 * 1024)
    );
    let answer = raw(relay.addr, request.as_bytes()).await;
    assert!(
        answer.starts_with("HTTP/1.1 431"),
        "{}",
        &answer[..answer.len().min(200)]
    );
    assert!(answer.contains("too large to cross the tunnel"), "the relay says why");

    let after = caller::post(&tunnel.url("/after"), "{}").await;
    assert_eq!(
        (after.status, after.text().as_str()),
        (200, "ok"),
        "the same session still serves"
    );
    let delivered = deliveries_on_one_session(&mut tunnel, 2).await;
    assert_eq!(delivered[0].path, "/after");
    // The refused request is in the history, with the caller's headers
    // and what its caller was told; replayed, it is sent as it came.
    assert_eq!(delivered[1].path, "/huge");
    let error = delivered[1].error.as_deref().unwrap_or_default();
    assert!(
        error.starts_with("the relay answered the caller 431: request headers too large to cross the tunnel"),
        "{error}"
    );
    let stored = tunnel.stored(delivered[1].id);
    let host = stored.request.request_headers.iter().find(|h| h.name == "host");
    assert_eq!(host.map(|h| h.value.len()), Some(80 * 1024), "the caller's Host, whole");
    assert!(
        !stored.request.request_truncated(),
        "nothing of it is missing: it can be replayed"
    );
    assert_eq!(
        handler.requests().len(),
        1,
        "the refused request never reached the handler"
    );
}
