//! A webhook that arrives while the tunnel's client is reconnecting gets
//! the relay's 503, and is in the client's history once it is back: dated
//! when its caller sent it, with the caller's headers and what it was told.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::caller;
use common::local::LocalHandler;
use common::relay::TestRelay;
use common::tunnel::TestTunnel;
use portpreview::events::TunnelEvent;
use tokio_util::sync::CancellationToken;

/// A TCP proxy to `to`, as a network between client and relay: its first
/// connection passes until `cut` is cancelled, and later ones reach `to`
/// only once `open` is, so the client stays away as long as the test needs.
async fn flaky_network(to: SocketAddr) -> (SocketAddr, CancellationToken, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
    let addr = listener.local_addr().expect("proxy address");
    let (cut, open) = (CancellationToken::new(), CancellationToken::new());
    let (cut_first, opened) = (cut.clone(), open.clone());
    tokio::spawn(async move {
        let mut first = true;
        while let Ok((mut client, _)) = listener.accept().await {
            let cut = std::mem::take(&mut first).then(|| cut_first.clone());
            let opened = opened.clone();
            tokio::spawn(async move {
                if cut.is_none() {
                    opened.cancelled().await;
                }
                let Ok(mut relay) = tokio::net::TcpStream::connect(to).await else {
                    return;
                };
                let cut_off = async {
                    match &cut {
                        Some(cut) => cut.cancelled().await,
                        None => std::future::pending().await,
                    }
                };
                // Either way, both sockets close: no goodbye reaches anyone.
                tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut client, &mut relay) => {}
                    () = cut_off => {}
                }
            });
        }
    });
    (addr, cut, open)
}

/// A Stripe webhook refused while the connection was down is in the
/// history once the client has its name back: the provider's retry later
/// is its second delivery, not its first.
#[tokio::test]
async fn a_webhook_refused_while_the_client_reconnects_reaches_the_history_once_it_is_back() {
    let relay = TestRelay::start().await;
    let (network, cut, open) = flaky_network(relay.addr).await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&format!("http://{network}"), &handler.url()).await;
    let name = tunnel.name().to_owned();
    let url = |path: &str| format!("{}/t/{name}{path}", relay.http_url());
    let signature: &[u8] = b"t=1700000000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd";
    let body = r#"{"id":"evt_missed","type":"invoice.paid"}"#;

    cut.cancel();
    // Until the relay notices the connection gone, a request still goes to
    // the old session and gets 502; then the name is held and callers 503.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let (sent_at, reply) = loop {
        let sent_at = portpreview::time::now_ms();
        let reply = caller::send(
            "POST",
            &url("/hooks/stripe?live=1"),
            &[("stripe-signature", signature)],
            body,
        )
        .await;
        if reply.status != 502 {
            break (sent_at, reply);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the relay never noticed the cut"
        );
    };
    assert_eq!(reply.status, 503, "{}", reply.text());
    assert_eq!(reply.text(), format!("tunnel {name} is reconnecting\n"));
    let second = caller::post(&url("/second"), "{}").await;
    assert_eq!(second.status, 503, "{}", second.text());

    // Away long enough that the time it comes back is not when the
    // caller called.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    open.cancel();
    loop {
        if let TunnelEvent::Connected { public_url, .. } = tunnel.next_event().await {
            assert!(public_url.ends_with(&format!("/t/{name}")), "{public_url}");
            break;
        }
    }
    let back_at = portpreview::time::now_ms();

    let mut deliveries = Vec::new();
    for _ in 0..2 {
        deliveries.push(tunnel.next_delivery().await.0);
    }
    deliveries.sort_by_key(|summary| summary.received_at_ms);
    let paths: Vec<&str> = deliveries.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(paths, ["/hooks/stripe?live=1", "/second"], "in the order they came");
    let missed = &deliveries[0];
    assert_eq!(missed.method, "POST");
    assert_eq!(missed.status, None, "no local answer");
    assert_eq!(
        missed.error.as_deref(),
        Some(format!("the relay answered the caller 503: tunnel {name} is reconnecting").as_str())
    );
    // The client was away 1.5 s: a date from its return would be past
    // the window, which leaves a loaded machine a second.
    assert!(
        (sent_at - 50..sent_at + 1000).contains(&missed.received_at_ms),
        "dated when the caller sent it: {} ms after, and the client came back {} ms after",
        missed.received_at_ms - sent_at,
        back_at - sent_at
    );
    assert!(
        missed.duration_ms.is_some_and(|ms| ms < 1000.0),
        "it lasted as long as the caller waited, not the client's absence: {:?}",
        missed.duration_ms
    );

    let stored = tunnel.stored(missed.id);
    let header = |name: &str| {
        stored
            .request
            .request_headers
            .iter()
            .find(|h| h.name == name)
            .map(|h| h.value.clone())
    };
    assert_eq!(
        header("stripe-signature").as_deref(),
        Some(signature),
        "the caller's headers"
    );
    assert!(
        header("x-forwarded-for").is_some(),
        "as the handler would have had them: {:?}",
        stored.request.request_headers
    );
    assert!(stored.request.request_body.is_empty(), "the body was never read");
    assert_eq!(
        stored.request.request_body_size,
        body.len() as u64,
        "the size its caller declared"
    );
    assert!(stored.request.request_truncated(), "so replay refuses it");
    assert!(handler.requests().is_empty(), "the handler never saw either");
}

/// More webhooks than the relay keeps for a held name: the history gets
/// the first 32, and the last of them says how many more were turned away,
/// so an outage is not undercounted.
#[tokio::test]
async fn webhooks_past_what_a_held_name_keeps_are_counted_in_the_history() {
    let relay = TestRelay::start().await;
    let (network, cut, open) = flaky_network(relay.addr).await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&format!("http://{network}"), &handler.url()).await;
    let name = tunnel.name().to_owned();
    let url = |n: usize| format!("{}/t/{name}/hook/{n}", relay.http_url());

    cut.cancel();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while caller::post(&url(0), "{}").await.status == 502 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the relay never noticed the cut"
        );
    }
    // The first 503 above, and 39 more.
    for n in 1..40 {
        let reply = caller::post(&url(n), "{}").await;
        assert_eq!(reply.status, 503, "{}", reply.text());
    }
    open.cancel();
    let mut deliveries = Vec::new();
    for _ in 0..32 {
        deliveries.push(tunnel.next_delivery().await.0);
    }
    deliveries.sort_by_key(|summary| summary.id);
    let told = |summary: &portpreview::store::Summary| summary.error.clone().unwrap_or_default();
    assert_eq!(
        told(&deliveries[0]),
        format!("the relay answered the caller 503: tunnel {name} is reconnecting")
    );
    let last = &deliveries[31];
    assert_eq!(last.path, "/hook/31", "the first 32, in order");
    assert_eq!(
        told(last),
        format!(
            "the relay answered the caller 503: tunnel {name} is reconnecting; after it, 8 more requests got \
             this answer while the name was held, too many to be told one by one"
        )
    );
}
