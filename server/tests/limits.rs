//! What the relay refuses on its own: malformed framing, oversized heads,
//! heads too large to frame, slow heads, crowds from one address, answers
//! with too many headers.

mod common;

use std::time::Duration;

use common::*;
use portpreview_server::{RelayConfig, RelayError};
use portpreview_shared::message::{CHUNK_SIZE, MAX_HEADER_BYTES, STREAM_WINDOW};
use portpreview_shared::{ClientMessage, Header, ServerMessage};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Reads until the peer closes; true when it did within [`HANG`].
async fn closed_by_peer(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(HANG, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
            Err(_) => return false,
        }
    }
}

#[tokio::test]
async fn malformed_framing_and_oversized_heads_are_refused_by_the_relay() {
    let relay = Relay::start(RelayConfig::default()).await;
    let (_client, _, _) = FakeClient::connect(&relay, Some("strict")).await;
    let smuggled = format!(
        "POST /t/strict/x HTTP/1.1\r\nHost: {}\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        relay.addr
    );
    // Saying `connection: close` is not enough: the relay must close, or
    // what follows the head could be read as a second request.
    let answer = raw_until_closed(relay.addr, smuggled.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");

    let huge = format!(
        "GET /t/strict/x HTTP/1.1\r\nHost: h\r\nX-Big: {}\r\n\r\n",
        "a".repeat(100 * 1024)
    );
    let answer = raw(relay.addr, huge.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");

    let many: String = (0..200).map(|i| format!("X-H{i}: v\r\n")).collect();
    let answer = raw(
        relay.addr,
        format!("GET /t/strict/x HTTP/1.1\r\nHost: h\r\n{many}\r\n").as_bytes(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");

    // Heads hyper cannot frame: refused as before, each with its reason.
    for (head, status, reason) in [
        (
            "Content-Length: 18446744073709551614\r\n",
            "413",
            "a body too large to count",
        ),
        (
            "Content-Length: 5\r\nContent-Length: 6\r\n",
            "400",
            "Content-Length is not one number",
        ),
        (
            "Content-Length: 99999999999999999999\r\n",
            "400",
            "Content-Length is not one number",
        ),
        ("X-A: 1\r\n  folded\r\n", "400", "obsolete line folding"),
    ] {
        let request = format!("POST /t/strict/x HTTP/1.1\r\nHost: h\r\n{head}\r\n");
        let answer = raw_until_closed(relay.addr, request.as_bytes()).await;
        assert!(answer.starts_with(&format!("HTTP/1.1 {status} ")), "{head}: {answer}");
        assert!(answer.contains(reason), "{head}: {answer}");
    }
}

#[tokio::test]
async fn a_head_that_trickles_in_too_slowly_loses_its_connection() {
    let config = RelayConfig {
        header_read_timeout: Duration::from_millis(200),
        ..RelayConfig::default()
    };
    let relay = Relay::start(config).await;
    let mut slow = TcpStream::connect(relay.addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .await
        .unwrap();
    // A byte every 100 ms, each inside the 200 ms allowed: a wait that
    // started over at every byte would hold the connection for as long as
    // the caller keeps trickling. The trickle lasts 10 s, far past the
    // 200 ms, so a busy machine still sees the close well before its end.
    let mut closed = false;
    for _ in 0..100 {
        if slow.write_all(b"a").await.is_err() {
            closed = true;
            break;
        }
        let mut buf = [0u8; 1024];
        match tokio::time::timeout(Duration::from_millis(100), slow.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                closed = true;
                break;
            }
            // An answer (a 408) before the close, or nothing yet.
            Ok(Ok(_)) | Err(_) => {}
        }
    }
    assert!(closed, "a head trickling in must not hold its connection");
    let health = call(relay.addr, request(relay.addr, "GET", "/healthz", "")).await;
    assert_eq!(health.status, 200);
}

/// A caller that never reads its answer loses its connection once the
/// relay's writes have waited `write_stall_timeout`, and the tunnel's
/// request slot comes back: with one slot, the next caller is served.
#[tokio::test]
async fn a_caller_that_never_reads_its_answer_frees_the_tunnels_slot() {
    let config = RelayConfig {
        max_in_flight: 1,
        write_stall_timeout: Duration::from_secs(1),
        ..RelayConfig::default()
    };
    let relay = Relay::start(config).await;
    let (mut client, _, _) = FakeClient::connect(&relay, Some("stuck")).await;
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut deaf = socket.connect(relay.addr).await.unwrap();
    let ask = format!("GET /t/stuck/big HTTP/1.1\r\nHost: {}\r\n\r\n", relay.addr);
    deaf.write_all(ask.as_bytes()).await.unwrap();
    let asked = client.request().await;
    let head = ClientMessage::ResponseHead {
        stream: asked.stream,
        status: 200,
        headers: vec![],
        end: false,
    };
    client.send(&head, b"").await;
    // An endless answer, sent as fast as the relay grants credit, until the
    // relay gives the stream up.
    let chunk = vec![b'x'; CHUNK_SIZE];
    let mut credit = STREAM_WINDOW as usize;
    let answer_forever = async {
        loop {
            while credit >= CHUNK_SIZE {
                let body = ClientMessage::ResponseBody {
                    stream: asked.stream,
                    end: false,
                };
                client.send(&body, &chunk).await;
                credit -= CHUNK_SIZE;
            }
            match client.message().await {
                (ServerMessage::Window { stream, credit: more }, _) if stream == asked.stream => {
                    credit += more as usize
                }
                (ServerMessage::Reset { stream, .. }, _) if stream == asked.stream => return,
                other => panic!("the relay kept the stream of a caller that reads nothing: {other:?}"),
            }
        }
    };
    assert!(
        tokio::time::timeout(HANG, answer_forever).await.is_ok(),
        "the relay kept the stream of a caller that reads nothing"
    );
    let next = tokio::spawn(call(relay.addr, request(relay.addr, "POST", "/t/stuck/next", "hi")));
    let asked = client.request().await;
    assert_eq!(asked.target, "/next");
    client.respond(asked.stream, 200, &[], b"served", 1).await;
    let reply = next.await.unwrap();
    assert_eq!((reply.status, reply.text().as_str()), (200, "served"));
    drop(deaf);
}

/// Requests pipelined behind answers never read: once the relay's writes
/// wait `write_stall_timeout`, it drops the connection instead of holding
/// it for good.
#[tokio::test]
async fn a_caller_pipelining_requests_it_never_reads_loses_its_connection() {
    let config = RelayConfig {
        write_stall_timeout: Duration::from_secs(1),
        ..RelayConfig::default()
    };
    let relay = Relay::start(config).await;
    let mut flood = TcpStream::connect(relay.addr).await.unwrap();
    let batch = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".repeat(1000);
    let dropped = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if flood.write_all(&batch).await.is_err() {
                return;
            }
        }
    })
    .await;
    assert!(dropped.is_ok(), "the relay still holds a connection that reads nothing");
    let health = call(relay.addr, request(relay.addr, "GET", "/healthz", "")).await;
    assert_eq!(health.status, 200);
}

#[tokio::test]
async fn one_address_cannot_take_more_than_its_share_of_connections() {
    let config = RelayConfig {
        max_connections_per_ip: 2,
        ..RelayConfig::default()
    };
    let relay = Relay::start(config).await;
    let _first = TcpStream::connect(relay.addr).await.unwrap();
    let mut second = TcpStream::connect(relay.addr).await.unwrap();
    // The second connection is served, so the relay has counted both.
    second
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 12];
    second.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"HTTP/1.1 200");
    // Over the cap: told so in a 503, and closed at once.
    let answer = raw(relay.addr, b"").await;
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer:?}");
    assert!(
        answer.ends_with("too many connections to the relay: try again shortly\n"),
        "{answer:?}"
    );
    let mut third = TcpStream::connect(relay.addr).await.unwrap();
    assert!(closed_by_peer(&mut third).await, "over the cap: closed at once");
    drop(second);
    // Places free up when connections end; poll until the relay has noticed.
    let mut served = false;
    for _ in 0..1000 {
        let answer = raw(
            relay.addr,
            b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        if answer.starts_with("HTTP/1.1 200") {
            served = true;
            break;
        }
    }
    assert!(served, "a freed place is given to the next caller");
}

#[tokio::test]
async fn a_client_answering_with_forty_thousand_headers_costs_only_that_caller() {
    let relay = Relay::start(RelayConfig::default()).await;
    let (mut client, _, _) = FakeClient::connect(&relay, Some("flood")).await;
    let caller = tokio::spawn(call(relay.addr, request(relay.addr, "POST", "/t/flood/a", "x")));
    let got = client.request().await;
    // Three bytes each once framed: all of them fit in one frame.
    let flood = ClientMessage::ResponseHead {
        stream: got.stream,
        status: 200,
        headers: vec![Header::new("a", ""); 40_000],
        end: true,
    };
    client.send(&flood, b"").await;
    let reply = caller.await.unwrap();
    assert_eq!(reply.status, 502);
    assert!(reply.text().contains("too many response headers"), "{}", reply.text());
    match client.message().await {
        (ServerMessage::Reset { stream, reason }, _) => {
            assert_eq!(stream, got.stream);
            assert!(reason.contains("too many headers"), "{reason}");
        }
        other => panic!("expected a reset of the flooded stream, got {other:?}"),
    }

    let caller = tokio::spawn(call(relay.addr, request(relay.addr, "POST", "/t/flood/b", "x")));
    let got = client.request().await;
    client.respond(got.stream, 200, &[("x-fine", "yes")], b"fine", 1).await;
    let reply = caller.await.unwrap();
    assert_eq!(
        (reply.status, reply.text().as_str()),
        (200, "fine"),
        "the session goes on"
    );
}

#[tokio::test]
async fn a_request_head_that_does_not_fit_a_frame_gets_431_and_never_reaches_the_client() {
    let relay = Relay::start(RelayConfig {
        max_header_bytes: MAX_HEADER_BYTES,
        ..RelayConfig::default()
    })
    .await;
    let (mut client, _, _) = FakeClient::connect(&relay, Some("roomy")).await;
    // Within the head limit, yet twice the Host (X-Forwarded-Host repeats
    // it) is over what a frame header carries.
    let huge = format!(
        "GET /t/roomy/x HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        "h".repeat(80 * 1024)
    );
    let answer = raw(relay.addr, huge.as_bytes()).await;
    assert!(
        answer.starts_with("HTTP/1.1 431"),
        "{}",
        &answer[..answer.len().min(200)]
    );
    assert!(answer.contains("too large to cross the tunnel"), "{answer}");
    // The client hears of it, for its history, with the caller's headers:
    // only the relay's X-Forwarded-Host, which repeats the Host, is left out.
    match client.message().await {
        (
            ServerMessage::TurnedAway {
                method,
                target,
                headers,
                status,
                reason,
                ..
            },
            _,
        ) => {
            assert_eq!((method.as_str(), target.as_str(), status), ("GET", "/x", 431));
            let names: Vec<&str> = headers.iter().map(|h| h.name.as_str()).collect();
            assert!(
                names.contains(&"host") && !names.contains(&"x-forwarded-host"),
                "{names:?}"
            );
            assert!(
                reason.starts_with("request headers too large to cross the tunnel"),
                "{reason}"
            );
        }
        other => panic!("expected news of the request turned away, got {other:?}"),
    }

    let caller = tokio::spawn(call(relay.addr, request(relay.addr, "GET", "/t/roomy/next", "")));
    let got = client.request().await;
    assert_eq!(got.target, "/next", "nothing of the refused request was sent");
    client.respond(got.stream, 204, &[], b"", 1).await;
    assert_eq!(caller.await.unwrap().status, 204);
}

#[tokio::test]
async fn a_head_limit_no_frame_can_carry_is_refused_at_start() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let config = RelayConfig {
        max_header_bytes: MAX_HEADER_BYTES + 1,
        ..RelayConfig::default()
    };
    let ran = tokio::time::timeout(
        HANG,
        portpreview_server::run(listener, config, tokio_util::sync::CancellationToken::new()),
    )
    .await
    .expect("refused at once");
    assert!(matches!(ran, Err(RelayError::Config(_))), "{ran:?}");
}
