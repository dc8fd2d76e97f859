//! A tunnel client's life on the relay: the upgrade, the Hello, names,
//! tokens, liveness, broken frames, shutdown, TLS.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use futures_util::SinkExt;
use portpreview_server::{RelayConfig, Tokens};
use portpreview_shared::message::PROTOCOL_VERSION;
use portpreview_shared::{ClientMessage, ServerMessage};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

#[tokio::test]
async fn a_client_without_a_name_gets_a_random_hard_to_guess_one() {
    let relay = Relay::start(RelayConfig::default()).await;
    let (_client, name, public_url) = FakeClient::connect(&relay, None).await;
    let hex = name.rsplit('-').next().unwrap();
    assert_eq!(hex.len(), 16, "64 bits of randomness in {name}");
    assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(public_url, format!("http://{}/t/{name}", relay.addr));
}

#[tokio::test]
async fn with_a_domain_names_are_subdomains_and_route_by_host() {
    let config = RelayConfig {
        domain: Some("relay.test".into()),
        ..RelayConfig::default()
    };
    let relay = Relay::start(config).await;
    let (mut client, _, public_url) = FakeClient::connect(&relay, Some("shop")).await;
    assert_eq!(
        public_url,
        format!("http://shop.relay.test:{}", relay.addr.port()),
        "with the port the client reached the relay on"
    );
    let mut req = request(relay.addr, "POST", "/webhooks/shopify?x=1", "{}");
    req.headers_mut().insert("host", "shop.relay.test".parse().unwrap());
    let caller = tokio::spawn(call(relay.addr, req));
    let got = client.request().await;
    assert_eq!(
        got.target, "/webhooks/shopify?x=1",
        "the whole path, no prefix to strip"
    );
    client.respond(got.stream, 200, &[], b"ok", 1).await;
    assert_eq!(caller.await.unwrap().text(), "ok");

    // One dot ends a name written in full; two name no tunnel.
    let mut req = request(relay.addr, "POST", "/", "{}");
    req.headers_mut().insert("host", "shop.relay.test..".parse().unwrap());
    assert_eq!(call(relay.addr, req).await.status, 404);
}

#[tokio::test]
async fn only_a_valid_bearer_token_may_connect() {
    let tokens =
        Tokens::from_toml("[[token]]\ntoken = \"s3cret\"\nnames = [\"mine\"]\n[[token]]\ntoken = \"other\"\n").unwrap();
    let relay = Relay::start(RelayConfig {
        tokens: Some(tokens),
        ..RelayConfig::default()
    })
    .await;
    for headers in [
        vec![],
        vec![("authorization", "Bearer wrong")],
        vec![("authorization", "s3cret")],
    ] {
        let err = upgrade(&relay.ws_url(), &headers, None).await.expect_err("refused");
        assert_eq!(refused_status(&err), Some(401), "{headers:?}");
    }
    let query = format!("{}?token=s3cret", relay.ws_url());
    assert_eq!(
        refused_status(&upgrade(&query, &[], None).await.err().unwrap()),
        Some(401)
    );

    let other = [("authorization", "Bearer other"), ("x-portpreview-name", "mine")];
    let err = upgrade(&relay.ws_url(), &other, None).await.expect_err("reserved");
    assert_eq!(refused_status(&err), Some(403), "a reserved name is its token's alone");

    let socket = upgrade(&relay.ws_url(), &[("authorization", "Bearer s3cret")], None)
        .await
        .unwrap();
    let mut client = FakeClient::new(socket);
    assert!(matches!(
        client.hello(PROTOCOL_VERSION, Some("mine")).await,
        Greeting::Welcome { .. }
    ));

    // A name no token reserves, held for the token whose client went
    // away: another token is refused at once, with no Retry-After to
    // wait on, as it would take another user's URL.
    let socket = upgrade(&relay.ws_url(), &[("authorization", "Bearer s3cret")], None)
        .await
        .unwrap();
    let mut first = FakeClient::new(socket);
    assert!(matches!(
        first.hello(PROTOCOL_VERSION, Some("shared")).await,
        Greeting::Welcome { .. }
    ));
    drop(first);
    let other = [("authorization", "Bearer other"), ("x-portpreview-name", "shared")];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let held = loop {
        let err = upgrade(&relay.ws_url(), &other, None)
            .await
            .expect_err("the name is not other's");
        // In use until the relay notices the closed socket.
        if refused_body(&err).is_some_and(|b| b.contains("in use")) {
            assert!(tokio::time::Instant::now() < deadline, "the closed socket noticed");
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        break err;
    };
    assert_eq!(refused_status(&held), Some(409));
    assert_eq!(retry_after(&held), None, "nothing to wait for");
    let told = refused_body(&held).unwrap_or_default();
    assert!(
        told.starts_with("name shared is held for another token's client"),
        "{told}"
    );
}

#[tokio::test]
async fn an_upgrade_from_a_browser_origin_is_refused() {
    let relay = Relay::start(RelayConfig::default()).await;
    let err = upgrade(&relay.ws_url(), &[("origin", "https://evil.example")], None)
        .await
        .err()
        .unwrap();
    assert_eq!(refused_status(&err), Some(403));
}

/// RFC 6455 §4.4: another WebSocket version is told the one spoken, and a
/// refused upgrade closes its connection, as nothing else comes on it.
#[tokio::test]
async fn an_upgrade_in_another_websocket_version_or_http_1_0_is_refused_and_closed() {
    let relay = Relay::start(RelayConfig::default()).await;
    let upgrade = |version: &str, websocket: &str| {
        format!(
            "GET /_portpreview/connect {version}\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: {websocket}\r\n\r\n"
        )
    };
    let mut caller = tokio::net::TcpStream::connect(relay.addr).await.unwrap();
    caller.write_all(upgrade("HTTP/1.1", "8").as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    // The relay closes the connection: reading to its end returns.
    tokio::time::timeout(Duration::from_secs(10), caller.read_to_end(&mut answer))
        .await
        .expect("the relay closes the connection")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 426 "), "{answer}");
    let lower = answer.to_ascii_lowercase();
    assert!(lower.contains("sec-websocket-version: 13\r\n"), "{answer}");
    assert!(lower.contains("connection: close\r\n"), "{answer}");
    assert!(
        answer.ends_with("this relay speaks WebSocket version 13 only\n"),
        "{answer}"
    );
    let answer = raw(relay.addr, upgrade("HTTP/1.0", "13").as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.0 400 "), "{answer}");
    assert!(answer.ends_with("a WebSocket upgrade needs HTTP/1.1\n"), "{answer}");
}

#[tokio::test]
async fn a_name_in_use_is_refused_with_409_or_in_the_hello() {
    let relay = Relay::start(RelayConfig::default()).await;
    let (_first, _, _) = FakeClient::connect(&relay, Some("taken")).await;
    let err = upgrade(&relay.ws_url(), &[("x-portpreview-name", "taken")], None)
        .await
        .err()
        .unwrap();
    assert_eq!(refused_status(&err), Some(409));
    assert_eq!(retry_after(&err), None, "a live name is never free at a set time");

    let mut second = FakeClient::new(upgrade(&relay.ws_url(), &[], None).await.unwrap());
    match second.hello(PROTOCOL_VERSION, Some("taken")).await {
        Greeting::Refused(reason) => assert_eq!(reason, "name taken is in use"),
        Greeting::Welcome { .. } => panic!("a second client took a live name"),
    }
    let mut third = FakeClient::new(upgrade(&relay.ws_url(), &[], None).await.unwrap());
    match third.hello(PROTOCOL_VERSION, Some("Not_Valid")).await {
        Greeting::Refused(reason) => assert!(reason.contains("not valid"), "{reason}"),
        Greeting::Welcome { .. } => panic!("an invalid name was accepted"),
    }
}

#[tokio::test]
async fn a_client_speaking_another_protocol_is_told_which_side_to_upgrade() {
    let relay = Relay::start(RelayConfig::default()).await;
    // The text as the user reads it, not as the function that writes it
    // says: a side named the wrong way round would pass either way.
    let p = PROTOCOL_VERSION;
    let cases = [
        (
            p + 1,
            format!(
                "client 9.9.9 speaks protocol {}, relay speaks {p}: upgrade the relay",
                p + 1
            ),
        ),
        (
            p - 1,
            format!(
                "client 9.9.9 speaks protocol {}, relay speaks {p}: upgrade the client",
                p - 1
            ),
        ),
    ];
    for (protocol, said) in cases {
        let mut client = FakeClient::new(upgrade(&relay.ws_url(), &[], None).await.unwrap());
        match client.hello(protocol, None).await {
            Greeting::Refused(reason) => assert_eq!(reason, said),
            Greeting::Welcome { .. } => panic!("protocol {protocol} accepted"),
        }
        assert!(matches!(client.recv().await, ServerFrame::Closed(_)));
    }
    // The version is the client's to write: repeated escaped and short.
    let mut client = FakeClient::new(upgrade(&relay.ws_url(), &[], None).await.unwrap());
    let hello = ClientMessage::Hello {
        protocol: p + 1,
        client_version: format!("0.9\x1b[2J\nFAKE: line{}", "x".repeat(500)),
        name: None,
    };
    client.send(&hello, b"").await;
    let ServerFrame::Message(ServerMessage::Refused { reason }, _) = client.recv().await else {
        panic!("no refusal")
    };
    assert!(reason.starts_with("client 0.9\\x1b[2J\\nFAKE: linexxx"), "{reason}");
    assert!(
        reason.len() < 150 && !reason.contains('\x1b') && !reason.contains('\n'),
        "{reason}"
    );
}

/// A caller whose request was routed, waiting for `100 Continue` before it
/// sends its body: the relay asks for the body once it has routed the
/// request to a tunnel.
async fn routed_awaiting_its_body(relay: &Relay, path: &str, body: &str) -> tokio::net::TcpStream {
    let mut caller = tokio::net::TcpStream::connect(relay.addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\r\n",
        relay.addr,
        body.len()
    );
    caller.write_all(head.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    while !got.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        assert_eq!(caller.read(&mut byte).await.unwrap(), 1, "closed before 100 Continue");
        got.push(byte[0]);
    }
    assert!(got.starts_with(b"HTTP/1.1 100"), "{}", String::from_utf8_lossy(&got));
    caller
}

/// Sends the body and reads the answer, until the relay has been quiet
/// for a second after it began.
async fn send_body(mut caller: tokio::net::TcpStream, body: &str) -> String {
    raw_on(&mut caller, body.as_bytes()).await
}

/// A request routed to a tunnel whose client went away while its body
/// came follows the name: to the client back under it, or, while the name
/// is held, to the 503 that says so, with the news kept for the client.
/// It used to get a 502, and the client's history never heard of it.
#[tokio::test]
async fn requests_routed_before_their_client_reconnected_follow_its_name() {
    let relay = Relay::start(RelayConfig::default()).await;
    let (client, _, _) = FakeClient::connect(&relay, Some("hop")).await;
    let resume = client.resume.clone().expect("a resume secret in the Welcome");
    let first = routed_awaiting_its_body(&relay, "/t/hop/first", "one\n").await;
    let second = routed_awaiting_its_body(&relay, "/t/hop/second", "two\n").await;
    drop(client);
    // Until the relay notices the closed socket, the name leads to it.
    let mut noticed = false;
    for _ in 0..1000 {
        if call(relay.addr, request(relay.addr, "GET", "/t/hop/poll", ""))
            .await
            .status
            == 503
        {
            noticed = true;
            break;
        }
    }
    assert!(noticed, "the relay noticed the closed socket");

    let held = send_body(second, "two\n").await;
    assert!(
        held.starts_with("HTTP/1.1 503") && held.contains("tunnel hop is reconnecting"),
        "{held}"
    );
    let (mut again, _, _) = FakeClient::reconnect(&relay, "hop", &resume).await;
    // The news kept meanwhile: the poll, then the second request.
    let mut told = Vec::new();
    for _ in 0..2 {
        match again.message().await.0 {
            ServerMessage::TurnedAway { target, status, .. } => told.push((target, status)),
            other => panic!("expected news of a request turned away, got {other:?}"),
        }
    }
    assert_eq!(told, [("/poll".to_owned(), 503), ("/second".to_owned(), 503)]);

    let answered = tokio::spawn(send_body(first, "one\n"));
    let got = again.request().await;
    assert_eq!(
        (got.target.as_str(), got.body.as_slice()),
        ("/first", b"one\n".as_slice())
    );
    again.respond(got.stream, 200, &[], b"back\n", 1).await;
    let answered = answered.await.unwrap();
    assert!(
        answered.starts_with("HTTP/1.1 200") && answered.contains("back\n"),
        "{answered}"
    );
}

#[tokio::test]
async fn a_name_is_held_during_grace_then_given_back_to_its_client() {
    let relay = Relay::start(RelayConfig::default()).await;
    let (client, _, url) = FakeClient::connect(&relay, Some("comeback")).await;
    let resume = client.resume.clone().expect("a resume secret in the Welcome");
    drop(client);
    // The relay notices the closed socket on its own; poll until it has.
    let mut reconnecting = None;
    for _ in 0..1000 {
        let reply = call(relay.addr, request(relay.addr, "GET", "/t/comeback/", "")).await;
        if reply.status != 502 {
            reconnecting = Some(reply);
            break;
        }
    }
    let reconnecting = reconnecting.expect("the relay noticed the closed socket");
    assert_eq!(reconnecting.status, 503);
    assert_eq!(reconnecting.text(), "tunnel comeback is reconnecting\n");
    let mut stranger = FakeClient::new(upgrade(&relay.ws_url(), &[], None).await.unwrap());
    match stranger.hello(PROTOCOL_VERSION, Some("comeback")).await {
        Greeting::Refused(reason) => assert!(
            reason.starts_with("name comeback is held for the client that last had it") && reason.ends_with(" s"),
            "{reason}"
        ),
        Greeting::Welcome { .. } => panic!("a stranger took a name held for its owner"),
    }
    // Asked for in the upgrade, the held name's 409 says when it is free,
    // so that its client, started again, can wait for it.
    let held = upgrade(&relay.ws_url(), &[("x-portpreview-name", "comeback")], None)
        .await
        .err()
        .unwrap();
    assert_eq!(refused_status(&held), Some(409));
    let free_in = retry_after(&held).expect("a Retry-After on a held name's 409");
    assert!((59..=60).contains(&free_in), "{free_in}");
    let (mut again, _, url_again) = FakeClient::reconnect(&relay, "comeback", &resume).await;
    assert_eq!(url_again, url);
    // The caller turned away meanwhile is news for the client, right
    // after its Welcome, with the headers its handler would have had.
    let (news, _) = again.message().await;
    let ServerMessage::TurnedAway {
        method,
        target,
        headers,
        body_size,
        status,
        reason,
        ..
    } = news
    else {
        panic!("expected news of the request turned away, got {news:?}")
    };
    assert_eq!(
        (method.as_str(), target.as_str(), body_size, status, reason.as_str()),
        ("GET", "/", Some(0), 503, "tunnel comeback is reconnecting")
    );
    assert!(headers.iter().any(|h| h.name == "x-forwarded-for"), "{headers:?}");
    let caller = tokio::spawn(call(relay.addr, request(relay.addr, "GET", "/t/comeback/x", "")));
    let got = again.request().await;
    again.respond(got.stream, 200, &[], b"back", 1).await;
    assert_eq!(caller.await.unwrap().text(), "back");
}

#[tokio::test]
async fn a_malformed_frame_closes_the_socket_with_a_reason_and_fails_callers() {
    let relay = Relay::start(RelayConfig::default()).await;
    let (mut client, _, _) = FakeClient::connect(&relay, Some("garbage")).await;
    let caller = tokio::spawn(call(relay.addr, request(relay.addr, "GET", "/t/garbage/", "")));
    client.request().await;
    client
        .socket
        .send(Message::Binary(vec![0, 0, 0, 2, 0xff, 0xff].into()))
        .await
        .unwrap();
    match client.recv().await {
        ServerFrame::Closed(reason) => assert!(reason.contains("malformed"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(caller.await.unwrap().status, 502);
}

#[tokio::test]
async fn broken_websocket_framing_closes_the_socket_with_a_reason() {
    use portpreview_shared::message::MAX_FRAME_BYTES;
    use tokio::io::AsyncWriteExt;
    use tokio_tungstenite::MaybeTlsStream;

    // Written raw: only the head of a frame announcing more than the
    // limit, so that nothing the relay leaves unread resets the socket
    // before its close frame is read.
    async fn close_reason(relay: &Relay, name: &str, frame_head: &[u8]) -> String {
        let (mut client, _, _) = FakeClient::connect(relay, Some(name)).await;
        let MaybeTlsStream::Plain(tcp) = client.socket.get_mut() else {
            panic!("plain TCP")
        };
        tcp.write_all(frame_head).await.unwrap();
        match client.recv().await {
            ServerFrame::Closed(reason) => reason,
            other => panic!("{other:?}"),
        }
    }

    let relay = Relay::start(RelayConfig::default()).await;
    let too_long = (MAX_FRAME_BYTES as u64 + 1).to_be_bytes();
    let oversize = [&[0x82, 0xff][..], &too_long, &[1, 2, 3, 4]].concat();
    let reason = close_reason(&relay, "oversize", &oversize).await;
    assert!(reason.contains("too long"), "{reason}");
    // A client's frames must be masked; this one is not.
    let reason = close_reason(&relay, "unmasked", &[0x82, 0x02, b'h', b'i']).await;
    assert!(reason.starts_with("invalid WebSocket framing"), "{reason}");
    // A text frame that is not even UTF-8 (masked with zeros: sent as is).
    let reason = close_reason(&relay, "not-utf8", &[0x81, 0x82, 0, 0, 0, 0, 0xff, 0xfe]).await;
    assert_eq!(reason, "a text message or close reason that is not UTF-8");
    // A close frame (code 1000) whose reason is not UTF-8.
    let bad_close = [0x88, 0x84, 0, 0, 0, 0, 0x03, 0xe8, 0xff, 0xfe];
    let reason = close_reason(&relay, "bad-close", &bad_close).await;
    assert_eq!(reason, "a text message or close reason that is not UTF-8");

    // The same before the Hello: the client is told, not just dropped.
    let mut client = FakeClient::new(upgrade(&relay.ws_url(), &[], None).await.unwrap());
    let MaybeTlsStream::Plain(tcp) = client.socket.get_mut() else {
        panic!("plain TCP")
    };
    tcp.write_all(&[0x82, 0x02, b'h', b'i']).await.unwrap();
    match client.recv().await {
        ServerFrame::Closed(reason) => assert!(reason.starts_with("invalid WebSocket framing"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_client_that_says_goodbye_leaves_its_callers_a_502_that_says_it_shut_down() {
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
    use tokio_tungstenite::tungstenite::protocol::CloseFrame;
    let relay = Relay::start(RelayConfig::default()).await;
    let (mut client, _, _) = FakeClient::connect(&relay, Some("leaving")).await;
    let caller = tokio::spawn(call(relay.addr, request(relay.addr, "GET", "/t/leaving/", "")));
    client.request().await;
    let goodbye = CloseFrame {
        code: CloseCode::Away,
        reason: "stopping".into(),
    };
    client.socket.send(Message::Close(Some(goodbye))).await.unwrap();
    let reply = caller.await.unwrap();
    assert_eq!(
        (reply.status, reply.text().as_str()),
        (502, "the tunnel's client shut down before it answered the request\n")
    );
}

#[tokio::test]
async fn a_silent_client_is_declared_dead_and_its_callers_get_502() {
    let config = RelayConfig {
        ping_interval: Duration::from_millis(50),
        dead_after: Duration::from_millis(300),
        ..RelayConfig::default()
    };
    let relay = Relay::start(config).await;
    let (mut client, _, _) = FakeClient::connect(&relay, Some("quiet")).await;
    let caller = tokio::spawn(call(relay.addr, request(relay.addr, "GET", "/t/quiet/", "")));
    client.request().await;
    // Not reading the socket means no pongs go back.
    let reply = caller.await.unwrap();
    assert_eq!(
        (reply.status, reply.text().as_str()),
        (
            502,
            "the tunnel's client stopped answering while the request was in flight (paused, or its network \
             stalled)\n"
        ),
        "the caller is told why no answer came"
    );
    // The relay closes with its reason once it has held the name: a client
    // that was only cut off comes back for it, so the next caller is asked
    // to retry rather than told the tunnel is gone.
    loop {
        match client.recv().await {
            ServerFrame::Closed(reason) => {
                assert_eq!(reason, "no answer to pings");
                break;
            }
            ServerFrame::Message(..) => continue,
        }
    }
    let next = call(relay.addr, request(relay.addr, "GET", "/t/quiet/", "")).await;
    assert_eq!(
        (next.status, next.text().as_str()),
        (503, "tunnel quiet is reconnecting\n")
    );
}

#[tokio::test]
async fn shutdown_finishes_requests_in_flight_then_closes_with_a_reason() {
    let relay = Relay::start(RelayConfig::default()).await;
    let addr = relay.addr;
    let (mut client, _, _) = FakeClient::connect(&relay, Some("drain")).await;
    let caller = tokio::spawn(call(addr, request(addr, "GET", "/t/drain/", "")));
    let got = client.request().await;
    let stopped = relay.begin_stop();
    client.respond(got.stream, 200, &[], b"finished", 1).await;
    assert_eq!(caller.await.unwrap().text(), "finished");
    loop {
        match client.recv().await {
            ServerFrame::Closed(reason) => {
                assert_eq!(reason, "relay shutting down");
                break;
            }
            ServerFrame::Message(ServerMessage::Window { .. }, _) => continue,
            other => panic!("{other:?}"),
        }
    }
    tokio::time::timeout(HANG, stopped)
        .await
        .expect("run returned")
        .unwrap()
        .unwrap();
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "no longer accepting"
    );
}

#[tokio::test]
async fn a_request_still_in_flight_when_the_drain_ends_gets_a_502_that_says_why() {
    let relay = Relay::start(RelayConfig {
        drain_timeout: Duration::from_millis(300),
        ..RelayConfig::default()
    })
    .await;
    let addr = relay.addr;
    let (mut client, _, _) = FakeClient::connect(&relay, Some("late")).await;
    let caller = tokio::spawn(call(addr, request(addr, "GET", "/t/late/", "")));
    let _never_answered = client.request().await;
    let stopped = relay.begin_stop();
    let reply = tokio::time::timeout(HANG, caller)
        .await
        .expect("the caller is answered")
        .unwrap();
    assert_eq!(reply.status, 502, "{}", reply.text());
    assert!(
        reply
            .text()
            .contains("the relay shut down before the tunnel's client answered"),
        "the relay says why, and does not blame the client: {}",
        reply.text()
    );
    tokio::time::timeout(HANG, stopped)
        .await
        .expect("run returned")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn tls_carries_both_the_tunnel_and_its_callers() {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let dir = std::env::temp_dir().join(format!("pp-relay-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.key_pair.serialize_pem()).unwrap();
    let tls = portpreview_server::load_tls(&cert_path, &key_path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let relay = Relay::start(RelayConfig {
        tls: Some(tls),
        ..RelayConfig::default()
    })
    .await;

    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.cert.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client_tls = Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );
    let url = format!("wss://localhost:{}/_portpreview/connect", relay.addr.port());
    let mut client = FakeClient::new(upgrade(&url, &[], Some(client_tls.clone())).await.unwrap());
    let Greeting::Welcome { name, public_url } = client.hello(PROTOCOL_VERSION, Some("secure")).await else {
        panic!("refused over TLS");
    };
    assert_eq!(public_url, format!("https://localhost:{}/t/{name}", relay.addr.port()));

    let connector = tokio_rustls::TlsConnector::from(client_tls);
    let tcp = tokio::net::TcpStream::connect(relay.addr).await.unwrap();
    let server_name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let stream = connector.connect(server_name, tcp).await.unwrap();
    let caller = tokio::spawn(async move {
        let io = hyper_util::rt::TokioIo::new(stream);
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(conn);
        let req = request(relay.addr, "POST", "/t/secure/hook", "over tls");
        let response = sender.send_request(req).await.unwrap();
        let status = response.status().as_u16();
        let body = http_body_util::BodyExt::collect(response.into_body())
            .await
            .unwrap()
            .to_bytes();
        (status, body)
    });
    let got = client.request().await;
    assert_eq!(got.body, b"over tls");
    assert_eq!(got.header("x-forwarded-proto").as_deref(), Some("https"));
    client.respond(got.stream, 200, &[], b"secret answer", 2).await;
    let (status, body) = caller.await.unwrap();
    assert_eq!((status, &body[..]), (200, &b"secret answer"[..]));
}
