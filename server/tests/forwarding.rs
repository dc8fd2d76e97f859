//! A caller's request through the relay to a (fake) tunnel client and back.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use http_body::Frame;
use http_body_util::StreamBody;
use portpreview_server::RelayConfig;
use portpreview_shared::message::CHUNK_SIZE;
use portpreview_shared::{ClientMessage, ServerMessage};

#[tokio::test]
async fn the_relay_answers_health_checks_and_unknown_tunnels_itself() {
    let relay = Relay::start(RelayConfig::default()).await;
    let health = call(relay.addr, request(relay.addr, "GET", "/healthz", "")).await;
    assert_eq!(health.status, 200);
    let missing = call(relay.addr, request(relay.addr, "POST", "/t/nobody-here/hook", "x")).await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.text(), "no such tunnel: nothing is connected as nobody-here\n");
    let capitals = call(relay.addr, request(relay.addr, "POST", "/t/Nobody-Here/hook", "x")).await;
    assert_eq!(capitals.status, 404);
    assert_eq!(
        capitals.text(),
        "no such tunnel: tunnel names are lowercase, as in /t/nobody-here/\n"
    );
    assert_eq!(
        missing.headers.get("content-type").and_then(|v| v.to_str().ok()),
        Some("text/plain; charset=utf-8"),
        "the relay's own answers are plain text"
    );
    let root = call(relay.addr, request(relay.addr, "GET", "/", "")).await;
    assert_eq!(root.status, 404);
    assert_eq!(
        root.headers.get("connection"),
        None,
        "no body left unread: the connection stays open"
    );
}

/// A relay serving `<name>.relay.test`, and a client holding `shop` there.
async fn shop_under_a_domain() -> (Relay, FakeClient) {
    let relay = Relay::start(RelayConfig {
        domain: Some("relay.test".into()),
        ..RelayConfig::default()
    })
    .await;
    let (client, _, _) = FakeClient::connect(&relay, Some("shop")).await;
    (relay, client)
}

/// CONNECT, `OPTIONS *` and an `ftp://` target name nothing a handler
/// serves: the relay answers them itself rather than forward a request for
/// `/`; a WebSocket handshake, which the tunnel cannot carry through, too.
#[tokio::test]
async fn connect_the_asterisk_form_websockets_and_other_schemes_are_answered_by_the_relay() {
    let (relay, _client) = shop_under_a_domain().await;
    for request in [
        &b"CONNECT shop.relay.test:80 HTTP/1.1\r\nHost: shop.relay.test:80\r\n\r\n"[..],
        b"OPTIONS * HTTP/1.1\r\nHost: shop.relay.test\r\nConnection: close\r\n\r\n",
        b"GET /ws HTTP/1.1\r\nHost: shop.relay.test\r\nConnection: Upgrade\r\nUpgrade: WebSocket\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    ] {
        let answer = raw(relay.addr, request).await;
        assert!(answer.starts_with("HTTP/1.1 501 "), "{answer}");
        assert!(answer.contains("is not forwarded"), "{answer}");
    }
    let answer = raw(
        relay.addr,
        b"GET ftp://shop.relay.test/x HTTP/1.1\r\nHost: shop.relay.test\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(answer.contains("must be an http or https URL"), "{answer}");
}

/// The relay's own host names no tunnel: the 404 says where tunnels are,
/// the `<name>.<domain>` form the operator turned on included.
#[tokio::test]
async fn the_bare_domain_is_told_both_forms_of_a_tunnel_url() {
    let (relay, _client) = shop_under_a_domain().await;
    let answer = raw(
        relay.addr,
        b"GET / HTTP/1.1\r\nHost: relay.test\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 404 "), "{answer}");
    assert!(
        answer.ends_with("not found: tunnels live at <name>.relay.test and under /t/<name>/\n"),
        "{answer}"
    );
}

/// A Host that is no host name (or names a port no URL can hold) would
/// reach the handler as the relay's own X-Forwarded-Host, which handlers
/// build URLs from: RFC 9112 has it answered 400.
#[tokio::test]
async fn a_host_header_that_is_no_host_is_answered_400() {
    let (relay, _client) = shop_under_a_domain().await;
    for host in [
        &b"evil.com/\"><script>"[..],
        b"x\xe2\x80\xae\xc2\x9b31m:99",
        b"shop.relay.test:80x",
        b"shop.relay.test:99999999999999999999",
    ] {
        let mut request = b"POST /t/shop/hook HTTP/1.1\r\nHost: ".to_vec();
        request.extend_from_slice(host);
        request.extend_from_slice(b"\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}");
        let answer = raw(relay.addr, &request).await;
        assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
        assert!(answer.contains("the Host header is not a host name"), "{answer}");
    }
    // An absolute-form target names the host instead, and is held to the same.
    let request = b"POST http://shop.relay.test:99999999/hook HTTP/1.1\r\nHost: shop.relay.test\r\n\
                    Content-Length: 2\r\nConnection: close\r\n\r\n{}";
    let answer = raw(relay.addr, request).await;
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(
        answer.contains("the request target's host is not a host name"),
        "{answer}"
    );
}

/// An absolute-form target names the host, and RFC 9112 has it win over
/// the Host header: for routing and for what the handler is told.
#[tokio::test]
async fn an_absolute_form_target_routes_by_its_own_host() {
    let (relay, mut client) = shop_under_a_domain().await;
    let addr = relay.addr;
    let caller = tokio::spawn(async move {
        raw(
            addr,
            b"GET http://shop.relay.test:8080/abs?q=1 HTTP/1.1\r\nHost: elsewhere\r\nConnection: close\r\n\r\n",
        )
        .await
    });
    let got = client.request().await;
    assert_eq!(got.target, "/abs?q=1");
    assert_eq!(got.header("x-forwarded-host").as_deref(), Some("shop.relay.test:8080"));
    assert_eq!(got.header("host").as_deref(), Some("shop.relay.test:8080"));
    client.respond(got.stream, 200, &[], b"ok", 1).await;
    assert!(caller.await.unwrap().starts_with("HTTP/1.1 200 "));
}

#[tokio::test]
async fn an_answer_that_leaves_the_body_unread_says_the_connection_closes() {
    let relay = Relay::start(RelayConfig::default()).await;
    // The relay answers before the body has come: hyper cannot drain it and
    // closes the connection, which the caller must hear about.
    let answer = raw(
        relay.addr,
        b"POST /t/nobody-here/hook HTTP/1.1\r\nHost: x\r\nContent-Length: 300000\r\n\r\nxxxx",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 404 "), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("\r\nconnection: close\r\n"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_request_reaches_the_client_rebuilt_and_the_answer_streams_back() {
    let relay = Relay::start(RelayConfig::default()).await;
    let (mut client, name, public_url) = FakeClient::connect(&relay, Some("hooks")).await;
    assert_eq!(name, "hooks");
    assert_eq!(public_url, format!("http://{}/t/hooks", relay.addr));

    let req = http::Request::builder()
        .method("POST")
        .uri("/t/hooks/stripe/events?a=1&a=2")
        .header("host", "hooks.example")
        .header("connection", "x-hop")
        .header("x-hop", "secret")
        .header("keep-alive", "timeout=5")
        .header("te", "trailers")
        .header("proxy-authorization", "Basic eA==")
        .header("x-forwarded-for", "6.6.6.6")
        .header("x-real-ip", "6.6.6.6")
        .header("forwarded", "for=6.6.6.6")
        .header("x-forwarded-proto", "https")
        .header("x-forwarded-host", "bank.example")
        .header("x-dup", "first")
        .header("x-dup", "second")
        .header("stripe-signature", "t=1,v1=abc")
        .body(http_body_util::Full::new(Bytes::from_static(b"{\"id\":\"evt_1\"}")))
        .unwrap();
    let caller = tokio::spawn(call(relay.addr, req));

    let got = client.request().await;
    assert_eq!(got.method, "POST");
    assert_eq!(got.target, "/stripe/events?a=1&a=2");
    assert_eq!(got.body, b"{\"id\":\"evt_1\"}");
    for hop in ["connection", "x-hop", "keep-alive", "te", "proxy-authorization"] {
        assert_eq!(got.header(hop), None, "{hop} must not be forwarded");
    }
    // Each exactly once, and exactly the relay's view: the caller's spoofed
    // address is neither kept beside it nor folded into its value.
    let values = |name: &str| -> Vec<String> {
        got.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
            .collect()
    };
    assert_eq!(values("x-forwarded-for"), ["127.0.0.1"]);
    assert_eq!(values("x-forwarded-proto"), ["http"]);
    assert_eq!(values("x-forwarded-host"), ["hooks.example"]);
    assert_eq!(values("x-real-ip"), ["127.0.0.1"]);
    assert_eq!(values("forwarded"), ["for=127.0.0.1;proto=http;host=\"hooks.example\""]);
    assert_eq!(got.header("stripe-signature").as_deref(), Some("t=1,v1=abc"));
    let dups: Vec<&[u8]> = got
        .headers
        .iter()
        .filter(|(n, _)| n == "x-dup")
        .map(|(_, v)| &v[..])
        .collect();
    assert_eq!(dups, [&b"first"[..], b"second"]);

    client
        .respond(
            got.stream,
            201,
            &[("x-answer", "yes"), ("connection", "close")],
            b"streamed in pieces",
            3,
        )
        .await;
    let reply = caller.await.unwrap();
    assert_eq!(reply.status, 201);
    assert_eq!(reply.text(), "streamed in pieces");
    assert_eq!(reply.headers.get("x-answer").unwrap(), "yes");
}

#[tokio::test]
async fn small_bodies_ride_in_the_head_frames_both_ways() {
    let relay = Relay::start(RelayConfig::default()).await;
    let (mut client, _, _) = FakeClient::connect(&relay, Some("inline")).await;

    let caller = tokio::spawn(call(
        relay.addr,
        request(relay.addr, "POST", "/t/inline/a", "{\"id\":1}"),
    ));
    let (head, first) = client.message().await;
    let ServerMessage::RequestHead { stream, end, .. } = head else {
        panic!("{head:?}")
    };
    assert!(end, "a small request is whole in its head frame");
    assert_eq!(&first[..], b"{\"id\":1}");
    client
        .respond_split(stream, 200, &[("content-length", "5")], b"whole", &[])
        .await;
    let reply = caller.await.unwrap();
    assert_eq!((reply.status, reply.text().as_str()), (200, "whole"));

    // A head may carry the start of a body whose rest follows in body frames.
    let caller = tokio::spawn(call(relay.addr, request(relay.addr, "GET", "/t/inline/b", "")));
    let got = client.request().await;
    client
        .respond_split(got.stream, 200, &[], b"first, ", &[b"then ", b"the rest"])
        .await;
    let reply = caller.await.unwrap();
    assert_eq!((reply.status, reply.text().as_str()), (200, "first, then the rest"));
}

/// Answers the next request `client` gets (the one pipelined behind a
/// hostile answer) with `honest`, failing if it never comes.
async fn answer_honestly(client: &mut FakeClient) {
    let asked = tokio::time::timeout(HANG, client.request())
        .await
        .expect("the request behind the hostile answer reaches its tunnel");
    client
        .respond_split(asked.stream, 200, &[("content-length", "6")], b"honest", &[])
        .await;
}

#[tokio::test]
async fn a_client_whose_length_disagrees_with_its_body_cannot_write_into_the_next_answer() {
    let relay = Relay::start(RelayConfig::default()).await;
    let (mut hostile, _, _) = FakeClient::connect(&relay, Some("hostile")).await;
    let (mut victim, _, _) = FakeClient::connect(&relay, Some("victim")).await;
    // Two requests on one connection, the second for another tunnel, as a
    // proxy that reuses its connections to the relay would send them.
    let caller = tokio::spawn({
        let addr = relay.addr;
        async move {
            raw(
                addr,
                b"GET /t/hostile/a HTTP/1.1\r\nHost: x\r\n\r\nGET /t/victim/b HTTP/1.1\r\nHost: x\r\n\r\n",
            )
            .await
        }
    });
    let asked = hostile.request().await;
    let forged = b"01234HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged";
    hostile
        .respond_split(asked.stream, 200, &[("content-length", "5")], forged, &[])
        .await;
    answer_honestly(&mut victim).await;
    let answers = caller.await.unwrap();
    assert!(answers.starts_with("HTTP/1.1 502 "), "{answers}");
    assert!(
        answers.contains("the tunnel's client sent a body of 49 bytes under Content-Length: 5"),
        "{answers}"
    );
    assert!(!answers.contains("forged"), "{answers}");
    assert_eq!(answers.matches("HTTP/1.1 ").count(), 2, "{answers}");
    assert!(answers.ends_with("\r\n\r\nhonest"), "{answers}");
    // The client is told its answer was refused, so its history does not
    // show it as given.
    let (reset, _) = hostile.message().await;
    assert!(
        matches!(&reset, ServerMessage::Reset { stream, reason } if *stream == asked.stream
            && reason.starts_with("the answer's body did not match its Content-Length")),
        "{reset:?}"
    );

    // A length past the body would have left the caller waiting for the rest.
    let caller = tokio::spawn(call(relay.addr, request(relay.addr, "GET", "/t/hostile/c", "")));
    let asked = hostile.request().await;
    hostile
        .respond_split(asked.stream, 200, &[("content-length", "50")], b"ten bytes.", &[])
        .await;
    let reply = tokio::time::timeout(Duration::from_secs(2), caller)
        .await
        .expect("answered at once")
        .unwrap();
    assert_eq!(reply.status, 502, "{}", reply.text());
    let (reset, _) = hostile.message().await;
    assert!(
        matches!(&reset, ServerMessage::Reset { stream, .. } if *stream == asked.stream),
        "the client hears why: {reset:?}"
    );

    // A HEAD answer's length is that of the body a GET would get.
    let caller = tokio::spawn(call(relay.addr, request(relay.addr, "HEAD", "/t/victim/d", "")));
    let asked = victim.request().await;
    victim
        .respond_split(asked.stream, 200, &[("content-length", "1234")], b"", &[])
        .await;
    let reply = caller.await.unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers.get("content-length").unwrap(), "1234");

    // Lengths that disagree among themselves, on an answer with no body or
    // a streamed one: a 502 that says so, and the connection goes on.
    for (method, end) in [("HEAD", true), ("GET", false)] {
        let caller = tokio::spawn({
            let addr = relay.addr;
            let requests =
                format!("{method} /t/hostile/e HTTP/1.1\r\nHost: x\r\n\r\nGET /t/victim/f HTTP/1.1\r\nHost: x\r\n\r\n");
            async move { raw(addr, requests.as_bytes()).await }
        });
        let asked = hostile.request().await;
        let lengths = [("content-length", "100"), ("content-length", "7")];
        match end {
            true => hostile.respond_split(asked.stream, 200, &lengths, b"", &[]).await,
            false => {
                hostile
                    .respond_split(asked.stream, 200, &lengths, b"", &[b"seven!!"])
                    .await
            }
        }
        let (reset, _) = hostile.message().await;
        assert!(
            matches!(reset, ServerMessage::Reset { .. }),
            "the client hears why: {reset:?}"
        );
        answer_honestly(&mut victim).await;
        let answers = caller.await.unwrap();
        assert!(answers.starts_with("HTTP/1.1 502 "), "{method}: {answers}");
        // A HEAD answer carries no body, the relay's reason included.
        assert!(
            method == "HEAD" || answers.contains("Content-Length is not one number: 100, 7"),
            "{method}: {answers}"
        );
        assert!(answers.ends_with("\r\n\r\nhonest"), "{method}: {answers}");
    }

    // A length in a form strict parsers refuse reaches the caller plain.
    let caller = tokio::spawn(call(relay.addr, request(relay.addr, "GET", "/t/victim/g", "")));
    let asked = victim.request().await;
    victim
        .respond_split(asked.stream, 200, &[("content-length", " 005")], b"", &[b"fine!"])
        .await;
    let reply = caller.await.unwrap();
    assert_eq!((reply.status, reply.text().as_str()), (200, "fine!"));
    assert_eq!(reply.headers.get("content-length").unwrap(), "5");
    let caller = tokio::spawn(call(relay.addr, request(relay.addr, "GET", "/t/victim/h", "")));
    let asked = victim.request().await;
    victim
        .respond_split(asked.stream, 200, &[("content-length", "+5")], b"fine!", &[])
        .await;
    assert_eq!(caller.await.unwrap().status, 502, "+5 is not a length");
}

#[tokio::test]
async fn a_client_that_drops_mid_request_gets_its_caller_a_502_at_once() {
    let relay = Relay::start(RelayConfig::default()).await;
    let (mut client, _, _) = FakeClient::connect(&relay, Some("drop")).await;
    let caller = tokio::spawn(call(relay.addr, request(relay.addr, "POST", "/t/drop/x", "{}")));
    client.request().await;
    let dropped = Instant::now();
    drop(client);
    let reply = caller.await.unwrap();
    assert_eq!(reply.status, 502);
    assert!(reply.text().contains("went away"), "{}", reply.text());
    // At once, not when the relay's 30 s answer timeout runs out; the
    // bound leaves a loaded machine room to spare.
    assert!(
        dropped.elapsed() < Duration::from_secs(10),
        "502 took {:?}",
        dropped.elapsed()
    );
}

/// A relay that waits 300 ms for an answer, and a client on it as `name`.
async fn impatient_relay(name: &str) -> (Relay, FakeClient) {
    let config = RelayConfig {
        request_timeout: Duration::from_millis(300),
        ..RelayConfig::default()
    };
    let relay = Relay::start(config).await;
    let (client, _, _) = FakeClient::connect(&relay, Some(name)).await;
    (relay, client)
}

#[tokio::test]
async fn a_client_that_does_not_answer_gets_its_caller_a_504() {
    let (relay, mut client) = impatient_relay("slow").await;
    let caller = tokio::spawn(call(relay.addr, request(relay.addr, "GET", "/t/slow/", "")));
    let got = client.request().await;
    let reply = caller.await.unwrap();
    assert_eq!(reply.status, 504);
    assert!(
        reply.text().contains("no answer came through the tunnel within"),
        "{}",
        reply.text()
    );
    let (reset, _) = client.message().await;
    assert!(
        matches!(reset, ServerMessage::Reset { stream, .. } if stream == got.stream),
        "{reset:?}"
    );
}

/// A client that takes the head and the first window of a large body, then
/// grants no more credit and never answers, is a client not answering: its
/// caller gets the 504 of the answer timeout, not a wait of the upload's
/// whole limit and a 408 that blames it.
#[tokio::test]
async fn a_client_that_takes_no_more_body_gets_its_caller_a_504() {
    let (relay, mut client) = impatient_relay("full").await;
    let large = vec![b'x'; 2 * portpreview_shared::message::STREAM_WINDOW as usize];
    let caller = tokio::spawn(call(relay.addr, request(relay.addr, "POST", "/t/full/x", large)));
    let reason = loop {
        match client.message().await {
            (ServerMessage::Reset { reason, .. }, _) => break reason,
            (ServerMessage::RequestHead { .. } | ServerMessage::RequestBody { .. }, _) => {}
            (other, _) => panic!("{other:?}"),
        }
    };
    assert_eq!(
        reason,
        "the client took none of the request body for 300ms; the relay answered the caller 504"
    );
    let reply = caller.await.unwrap();
    assert_eq!(reply.status, 504);
    assert_eq!(
        reply.text(),
        "no answer came through the tunnel within 300ms: its client, or the handler behind it, took longer\n"
    );
}

/// An answer whose body stops arriving is cut off at the answer timeout,
/// and the client is told the relay cut it, not that the caller left.
#[tokio::test]
async fn an_answer_body_that_stalls_is_cut_off_and_the_client_told_why() {
    let (relay, mut client) = impatient_relay("stall").await;
    let caller = tokio::spawn(call(relay.addr, request(relay.addr, "GET", "/t/stall/", "")));
    let got = client.request().await;
    let head = ClientMessage::ResponseHead {
        stream: got.stream,
        status: 200,
        headers: vec![portpreview_shared::Header::new("content-length", "1000")],
        end: false,
    };
    client.send(&head, b"0123456789").await;
    let (reset, _) = client.message().await;
    let ServerMessage::Reset { stream, reason } = reset else {
        panic!("{reset:?}")
    };
    assert_eq!(
        (stream, reason.as_str()),
        (
            got.stream,
            "the answer's body stopped arriving for 300ms; the relay cut the caller's answer off"
        )
    );
    drop(caller);
}

#[tokio::test]
async fn a_caller_that_goes_away_resets_its_stream() {
    let relay = Relay::start(RelayConfig::default()).await;
    let (mut client, _, _) = FakeClient::connect(&relay, Some("gone")).await;
    let caller = tokio::spawn(call(relay.addr, request(relay.addr, "GET", "/t/gone/", "")));
    let got = client.request().await;
    caller.abort();
    let (reset, _) = client.message().await;
    assert!(
        matches!(reset, ServerMessage::Reset { stream, .. } if stream == got.stream),
        "{reset:?}"
    );
}

/// Callers who give up while a client that stopped reading leaves no room
/// for their heads cost that client nothing: it never heard of their
/// streams, so none is reset. Each reset would be a frame queued outside
/// the queue's room, as many as callers came and gave up. The first late
/// heads find the room kept for heads beside the bodies: those the client
/// hears of, and then of their resets.
#[tokio::test]
async fn callers_whose_heads_never_left_are_not_reset() {
    let config = RelayConfig {
        request_timeout: Duration::from_secs(1),
        ..RelayConfig::default()
    };
    let relay = Relay::start(config).await;
    let (mut client, _, _) = FakeClient::connect(&relay, Some("stuck")).await;
    // A window's worth of body each, more than the sockets and the
    // relay's queue hold while the client reads nothing.
    let window = vec![b'x'; portpreview_shared::message::STREAM_WINDOW as usize];
    let uploads: Vec<_> = (0..32)
        .map(|i| {
            let upload = request(relay.addr, "POST", &format!("/t/stuck/upload{i}"), window.clone());
            tokio::spawn(call(relay.addr, upload))
        })
        .collect();
    for upload in uploads {
        assert_eq!(upload.await.unwrap().status, 504);
    }
    // More than the room kept for heads holds.
    let late_callers = 24;
    let late: Vec<_> = (0..late_callers)
        .map(|i| {
            tokio::spawn(call(
                relay.addr,
                request(relay.addr, "GET", &format!("/t/stuck/late{i}"), ""),
            ))
        })
        .collect();
    for reply in late {
        let reply = reply.await.unwrap();
        assert_eq!(reply.status, 504);
        assert_eq!(
            reply.text(),
            "no answer came through the tunnel within 1s: its client, or the handler behind it, took longer\n"
        );
    }
    // Whatever the relay queued before it comes before this head.
    let last = tokio::spawn(call(relay.addr, request(relay.addr, "GET", "/t/stuck/last", "")));
    let mut heard = std::collections::HashSet::new();
    let mut late_heard = 0;
    loop {
        match client.message().await {
            (ServerMessage::RequestHead { target, .. }, _) if target == "/last" => break,
            (ServerMessage::RequestHead { stream, target, .. }, _) => {
                late_heard += usize::from(target.starts_with("/late"));
                heard.insert(stream);
            }
            (ServerMessage::Reset { stream, reason }, _) => {
                assert!(heard.contains(&stream), "stream {stream} reset unheard of: {reason}");
            }
            (ServerMessage::RequestBody { stream, .. }, _) => assert!(heard.contains(&stream)),
            (other, _) => panic!("{other:?}"),
        }
    }
    assert!(
        late_heard < late_callers,
        "every late head left: the queue was never full"
    );
    drop(last);
}

#[tokio::test]
async fn bodies_over_the_limit_get_413_declared_or_streamed() {
    let config = RelayConfig {
        max_body: 1000,
        ..RelayConfig::default()
    };
    let relay = Relay::start(config).await;
    let (mut client, _, _) = FakeClient::connect(&relay, Some("small")).await;

    let declared = call(relay.addr, request(relay.addr, "POST", "/t/small/x", vec![b'a'; 1001])).await;
    assert_eq!(declared.status, 413);
    assert!(declared.text().contains("limit"), "{}", declared.text());

    let chunks = (0..4).map(|_| Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(vec![b'b'; 400]))));
    let streamed = http::Request::builder()
        .method("POST")
        .uri("/t/small/y")
        .header("host", relay.addr.to_string())
        .body(StreamBody::new(futures_util::stream::iter(chunks)))
        .unwrap();
    // The declared one never reached the client, which only hears of it.
    let (news, _) = client.message().await;
    let ServerMessage::TurnedAway {
        target,
        body_size,
        status,
        ..
    } = news
    else {
        panic!("{news:?}")
    };
    assert_eq!((target.as_str(), body_size, status), ("/x", Some(1001), 413));
    let caller = tokio::spawn(call(relay.addr, streamed));
    let (head, _) = client.message().await;
    let ServerMessage::RequestHead { stream, target, .. } = head else {
        panic!("{head:?}")
    };
    assert_eq!(target, "/y");
    assert_eq!(caller.await.unwrap().status, 413);
    loop {
        match client.message().await {
            (ServerMessage::RequestBody { stream: s, end }, _) => assert!(s == stream && !end),
            (ServerMessage::Reset { stream: s, .. }, _) => {
                assert_eq!(s, stream);
                break;
            }
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn too_many_requests_in_flight_on_one_tunnel_get_503() {
    let config = RelayConfig {
        max_in_flight: 1,
        ..RelayConfig::default()
    };
    let relay = Relay::start(config).await;
    let (mut client, _, _) = FakeClient::connect(&relay, Some("busy")).await;
    let first = tokio::spawn(call(relay.addr, request(relay.addr, "GET", "/t/busy/1", "")));
    let got = client.request().await;
    let second = call(relay.addr, request(relay.addr, "GET", "/t/busy/2", "")).await;
    assert_eq!(second.status, 503);
    assert!(
        second.text().contains("too many requests in flight"),
        "{}",
        second.text()
    );
    assert_eq!(second.headers["retry-after"], "5", "a sender backs off");
    let (news, _) = client.message().await;
    let ServerMessage::TurnedAway {
        method,
        target,
        body_size,
        status,
        reason,
        ..
    } = news
    else {
        panic!("{news:?}")
    };
    assert_eq!(
        (method.as_str(), target.as_str(), body_size, status),
        ("GET", "/2", Some(0), 503),
        "a request without a body, turned away"
    );
    assert_eq!(reason, "too many requests in flight for tunnel busy");
    client.respond(got.stream, 200, &[], b"", 1).await;
    assert_eq!(first.await.unwrap().status, 200);
}

#[tokio::test]
async fn five_mib_each_way_arrive_intact_within_the_windows() {
    use portpreview_shared::message::STREAM_WINDOW;
    let relay = Relay::start(RelayConfig::default()).await;
    let (mut client, _, _) = FakeClient::connect(&relay, Some("bulk")).await;
    let upload: Vec<u8> = (0..5 * 1024 * 1024).map(|i: u32| (i % 251) as u8).collect();
    let pieces: Vec<_> = upload
        .chunks(100_000)
        .map(|c| Ok::<_, std::convert::Infallible>(Frame::data(Bytes::copy_from_slice(c))))
        .collect();
    let req = http::Request::builder()
        .method("PUT")
        .uri("/t/bulk/blob")
        .header("host", relay.addr.to_string())
        .body(StreamBody::new(futures_util::stream::iter(pieces)))
        .unwrap();
    let caller = tokio::spawn(call(relay.addr, req));

    let (head, _) = client.message().await;
    let ServerMessage::RequestHead { stream, end: false, .. } = head else {
        panic!("{head:?}")
    };
    let mut received = Vec::new();
    let mut granted = u64::from(STREAM_WINDOW);
    loop {
        let (msg, chunk) = client.message().await;
        let ServerMessage::RequestBody { end, .. } = msg else {
            panic!("{msg:?}")
        };
        assert!(chunk.len() <= CHUNK_SIZE);
        received.extend_from_slice(&chunk);
        assert!(received.len() as u64 <= granted, "relay sent past its window");
        if end {
            break;
        }
        if chunk.len() as u64 > 0 {
            client
                .send(
                    &ClientMessage::Window {
                        stream,
                        credit: chunk.len() as u32,
                    },
                    b"",
                )
                .await;
            granted += chunk.len() as u64;
        }
    }
    assert!(received == upload, "upload arrived byte for byte");

    // Now answer with the same 5 MiB, never past the relay's grants.
    client
        .send(
            &ClientMessage::ResponseHead {
                stream,
                status: 200,
                headers: vec![],
                end: false,
            },
            b"",
        )
        .await;
    let mut allowed = u64::from(STREAM_WINDOW);
    let mut sent = 0usize;
    while sent < upload.len() {
        while allowed <= sent as u64 {
            match client.message().await {
                (ServerMessage::Window { stream: s, credit }, _) if s == stream => allowed += u64::from(credit),
                other => panic!("{other:?}"),
            }
        }
        let n = CHUNK_SIZE
            .min(upload.len() - sent)
            .min((allowed - sent as u64) as usize);
        let end = sent + n == upload.len();
        client
            .send(&ClientMessage::ResponseBody { stream, end }, &upload[sent..sent + n])
            .await;
        sent += n;
    }
    let reply = caller.await.unwrap();
    assert_eq!(reply.status, 200);
    assert!(reply.body == upload, "download arrived byte for byte");
}

/// What a broken or hostile client answers never reaches the caller as it
/// is: a status no final HTTP answer has (an informational 1xx among
/// them) gets a 502, and a reason it gives for
/// dropping a request is shown escaped, on one line.
#[tokio::test]
async fn a_clients_impossible_status_or_raw_reason_never_reaches_the_caller() {
    let relay = Relay::start(RelayConfig::default()).await;
    let (mut client, _, _) = FakeClient::connect(&relay, Some("odd")).await;
    for status in [999u16, 600, 101] {
        let caller = tokio::spawn(call(relay.addr, request(relay.addr, "POST", "/t/odd/hook", "x")));
        let got = client.request().await;
        client.respond(got.stream, status, &[], b"body", 1).await;
        let reply = caller.await.unwrap();
        assert_eq!(
            (reply.status, reply.text()),
            (
                502,
                format!("the tunnel's client sent status {status}, which is no final status\n")
            )
        );
        // The client is told, so its history does not show the answer as given.
        let (reset, _) = client.message().await;
        assert!(
            matches!(&reset, ServerMessage::Reset { stream, reason } if *stream == got.stream
                && reason == "the answer's status was no final status (200 to 599); the relay answered the caller 502"),
            "{reset:?}"
        );
    }

    let caller = tokio::spawn(call(relay.addr, request(relay.addr, "POST", "/t/odd/hook", "x")));
    let got = client.request().await;
    let reason = "boom \x1b[31mred\r\nX-Injected: 1";
    client
        .send(
            &ClientMessage::Reset {
                stream: got.stream,
                reason: reason.into(),
            },
            b"",
        )
        .await;
    let reply = caller.await.unwrap();
    assert_eq!(reply.status, 502);
    assert_eq!(
        reply.text(),
        "the tunnel's client abandoned the request: boom \\x1b[31mred\\r\\nX-Injected: 1\n"
    );
}
