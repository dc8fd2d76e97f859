use super::*;
use portpreview_shared::message::CONNECT_PATH;

/// Options for a relay on port 3000, with no token and no name.
fn local_options() -> ConnectOptions {
    ConnectOptions {
        url: "ws://127.0.0.1:3000/_portpreview/connect".into(),
        token: None,
        name: None,
        resume: None,
        tls: Default::default(),
    }
}

#[tokio::test]
async fn a_token_no_header_can_carry_is_refused_unsent_and_unshown() {
    for token in ["pp_s3cr3t-\u{fc}nicode", "pp_s3cr3t\nline", "pp_s3cr3t two"] {
        let options = ConnectOptions {
            token: Some(Secret::new(token)),
            ..local_options()
        };
        let Err(err) = connect(&options).await else {
            panic!("a token no header can carry was sent");
        };
        assert_eq!(
            err.to_string(),
            "cannot open the tunnel: the token holds characters a header cannot carry (spaces, control \
             characters or letters past ASCII)"
        );
    }
}

#[test]
fn a_server_that_is_no_relay_is_named_as_such() {
    let options = local_options();
    let page = tungstenite::http::Response::builder()
        .status(200)
        .body(Some(br#"{"ok": true}"#.to_vec()))
        .expect("response");
    let err = upgrade_error(tungstenite::Error::Http(Box::new(page)), &options);
    assert_eq!(
        err.to_string(),
        "ws://127.0.0.1:3000/_portpreview/connect is not a PortPreview relay: \
         it answered 200 OK where a relay opens a WebSocket; check --server"
    );
}

/// `python3 -m http.server` answers in HTTP/1.0: it was reached, and it
/// is no relay.
#[test]
fn a_server_answering_in_http_1_0_is_no_relay() {
    let wrong = tungstenite::Error::Protocol(tungstenite::error::ProtocolError::WrongHttpVersion);
    assert_eq!(
        upgrade_error(wrong, &local_options()).to_string(),
        "ws://127.0.0.1:3000/_portpreview/connect is not a PortPreview relay: \
         it answered in HTTP/1.0 where a relay opens a WebSocket; check --server"
    );
}

/// A proxy whose relay is down accepts the connection and closes it
/// unanswered: said so, not as "Handshake not finished".
#[test]
fn a_connection_closed_unanswered_is_told_as_such() {
    let closed = tungstenite::Error::Protocol(tungstenite::error::ProtocolError::HandshakeIncomplete);
    let reset = tungstenite::Error::Io(std::io::ErrorKind::ConnectionReset.into());
    for unanswered in [closed, reset] {
        assert_eq!(
            upgrade_error(unanswered, &local_options()).to_string(),
            "cannot reach the relay: the connection closed before any answer came: a proxy in front of a relay \
             that is down?"
        );
    }
}

/// A TLS server's alert has no `HTTP/` at all; an answer whose header
/// holds bytes HTTP does not allow is HTTP gone wrong, and TLS is no cure.
#[test]
fn a_malformed_answer_is_told_from_one_in_tls() {
    let broken = |error| tungstenite::Error::Protocol(tungstenite::error::ProtocolError::HttparseError(error));
    assert_eq!(
        upgrade_error(broken(httparse::Error::Version), &local_options()).to_string(),
        "ws://127.0.0.1:3000/_portpreview/connect did not answer in HTTP: if the relay serves TLS, give --server \
         as wss:// or https://"
    );
    assert_eq!(
        upgrade_error(broken(httparse::Error::HeaderValue), &local_options()).to_string(),
        "ws://127.0.0.1:3000/_portpreview/connect is not a PortPreview relay: it answered in malformed HTTP \
         (invalid header value) where a relay opens a WebSocket; check --server"
    );
}

#[test]
fn a_relay_turning_the_client_away_is_heard_out() {
    let options = local_options();
    let answer = |status: u16, content_type: &str, body: &[u8]| {
        let page = tungstenite::http::Response::builder()
            .status(status)
            .header(http::header::CONTENT_TYPE, content_type)
            .body(Some(body.to_vec()))
            .expect("response");
        upgrade_error(tungstenite::Error::Http(Box::new(page)), &options).to_string()
    };
    let plain = "text/plain; charset=utf-8";
    let told = answer(503, plain, b"too many connections to the relay: try again shortly\n");
    // `connect` puts the address tried before "the server there".
    assert_eq!(
        told,
        "cannot reach the relay: the server there answered \
         503 Service Unavailable: too many connections to the relay: try again shortly"
    );
    let silent = answer(503, plain, b"");
    assert!(
        silent.ends_with(": the server there answered 503 Service Unavailable"),
        "{silent}"
    );
    let page = answer(503, plain, &[b'x'; 5000]);
    assert!(
        page.ends_with(": the server there answered 503 Service Unavailable"),
        "a long page is left out: {page}"
    );
}

fn refusal(status: u16, retry_after: Option<&str>, name: Option<&str>) -> ConnectError {
    let mut page = tungstenite::http::Response::builder().status(status);
    if let Some(seconds) = retry_after {
        page = page.header(http::header::RETRY_AFTER, seconds);
    }
    let page = page.body(Some(b"told why\n".to_vec())).expect("response");
    let options = ConnectOptions {
        name: name.map(str::to_string),
        ..local_options()
    };
    upgrade_error(tungstenite::Error::Http(Box::new(page)), &options)
}

#[test]
fn a_relay_saying_when_to_come_back_is_waited_on_at_least_a_second() {
    let busy = refusal(503, Some("5"), None);
    assert!(matches!(busy, ConnectError::Busy { .. }), "{busy:?}");
    assert!(!busy.is_fatal());
    assert_eq!(busy.told_to_wait(), Some(Duration::from_secs(5)));
    assert_eq!(
        refusal(503, Some("0"), None).told_to_wait(),
        Some(Duration::from_secs(1)),
        "an answer of 0 is not asked again in a loop"
    );
    assert_eq!(
        refusal(409, Some("0"), Some("hooks")).told_to_wait(),
        Some(Duration::from_secs(1))
    );
    assert_eq!(refusal(409, None, Some("hooks")).told_to_wait(), None);
    assert_eq!(
        refusal(503, None, None).told_to_wait(),
        None,
        "busy, with no word on when"
    );
    assert_eq!(refusal(503, Some("soon"), None).told_to_wait(), None);
    assert_eq!(
        refusal(502, Some("5"), None).told_to_wait(),
        None,
        "a proxy's bad gateway"
    );
}

#[test]
fn a_409_to_no_name_asked_for_names_none() {
    let err = refusal(409, None, None);
    assert_eq!(err.to_string(), "the relay refused the tunnel: told why (409)");
}

#[test]
fn a_refusal_is_quoted_a_line_long() {
    let page = tungstenite::http::Response::builder()
        .status(409)
        .body(Some("held ".repeat(1000).into_bytes()))
        .expect("response");
    let options = ConnectOptions {
        name: Some("hooks".into()),
        ..local_options()
    };
    let err = upgrade_error(tungstenite::Error::Http(Box::new(page)), &options).to_string();
    assert!(err.chars().count() < MAX_QUOTED + 100, "{} characters", err.len());
}

/// nginx in front of a relay that is down answers the upgrade with its
/// own page: told by its status, and not as the relay's words.
#[test]
fn a_proxys_error_page_is_told_by_its_status_alone() {
    let page = tungstenite::http::Response::builder()
        .status(502)
        .header(http::header::CONTENT_TYPE, "text/html")
        .body(Some(
            b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway\
              </h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
                .to_vec(),
        ))
        .expect("response");
    let err = upgrade_error(tungstenite::Error::Http(Box::new(page)), &local_options());
    assert!(!err.is_fatal(), "a proxy's 502 is worth another try: {err}");
    assert_eq!(
        err.to_string(),
        "cannot reach the relay: the server there answered 502 Bad Gateway"
    );
    let forbidden = tungstenite::http::Response::builder()
        .status(403)
        .header(http::header::CONTENT_TYPE, "text/html")
        .body(Some(
            b"<html><head><title>Access denied | relay.test</title></head><body>...</body></html>".to_vec(),
        ))
        .expect("response");
    let err = upgrade_error(tungstenite::Error::Http(Box::new(forbidden)), &local_options());
    assert_eq!(
        err.to_string(),
        "the relay refused the tunnel: ws://127.0.0.1:3000/_portpreview/connect answered 403 Forbidden, \
         a page titled \"Access denied | relay.test\""
    );
}

/// An older relay's answer to an upgrade whose Upgrade and Connection
/// headers a proxy did not pass on.
#[test]
fn an_upgrade_that_arrived_as_none_names_the_proxy_between() {
    let refused = tungstenite::http::Response::builder()
        .status(400)
        .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Some(
            b"expected a WebSocket upgrade (portpreview clients connect here)\n".to_vec(),
        ))
        .expect("response");
    let err = upgrade_error(tungstenite::Error::Http(Box::new(refused)), &local_options());
    assert_eq!(
        err.to_string(),
        "the relay refused the tunnel: expected a WebSocket upgrade (portpreview clients connect here) \
         (400 Bad Request): a proxy in front of the relay must pass the Upgrade and Connection headers on"
    );
}

/// The path form of a tunnel's URL is on the address the client
/// reached, behind a proxy's base path too.
#[test]
fn the_path_url_is_on_the_relays_own_address() {
    let by_path = |relay: &str| path_url(&relay_url(relay).unwrap(), "shop");
    assert_eq!(
        by_path("http://127.0.0.1:8080").as_deref(),
        Some("http://127.0.0.1:8080/t/shop")
    );
    assert_eq!(
        by_path("wss://relay.test").as_deref(),
        Some("https://relay.test/t/shop")
    );
    assert_eq!(
        by_path("https://proxy.test/relay/").as_deref(),
        Some("https://proxy.test/relay/t/shop")
    );
}

#[test]
fn every_scheme_maps_to_the_connect_path() {
    assert_eq!(
        relay_url("http://relay.test:8080").unwrap(),
        "ws://relay.test:8080/_portpreview/connect"
    );
    assert_eq!(
        relay_url("https://relay.test/").unwrap(),
        "wss://relay.test/_portpreview/connect"
    );
    assert_eq!(
        relay_url("ws://127.0.0.1:1").unwrap(),
        "ws://127.0.0.1:1/_portpreview/connect"
    );
    assert_eq!(
        relay_url("wss://r.test/_portpreview/connect").unwrap(),
        "wss://r.test/_portpreview/connect"
    );
    assert_eq!(
        relay_url("http://[::1]:8080/").unwrap(),
        "ws://[::1]:8080/_portpreview/connect"
    );
    let bad_ports = [
        "http://127.0.0.1:90136",
        "wss://127.0.0.1:70000",
        "http://relay.test:65536",
        "http://relay.test:abc",
        "http://relay.test:",
        "http://relay.test:0",
        "http://relay.test:+80",
        "http://[::1",
        "http://[::1]x",
        "http://:8080",
    ];
    for bad in ["relay.test", "ftp://x", "http://", "http://a b"]
        .into_iter()
        .chain(bad_ports)
    {
        assert!(relay_url(bad).is_err(), "{bad}");
    }
    assert_eq!(
        relay_url("wss://relay.test/tunnels").unwrap(),
        "wss://relay.test/tunnels/_portpreview/connect",
        "a relay under a path prefix"
    );
    let query = relay_url("wss://relay.test/?token=abc").unwrap_err().to_string();
    assert!(
        query.contains("\"wss://relay.test/?…\": a query or fragment is not sent to the relay")
            && query.contains("--token")
            && !query.contains("abc"),
        "{query}"
    );
    let fragment = relay_url("wss://relay.test/#frag").unwrap_err().to_string();
    assert!(fragment.contains("\"wss://relay.test/#…\""), "{fragment}");
    let refused = relay_url("https://me:hunter2@relay.test").unwrap_err().to_string();
    assert!(
        refused.contains("\"https://***@relay.test\" carries a user or password"),
        "{refused}"
    );
}

/// Options for a tunnel to a plain relay at `address`, with no name asked.
fn plain(address: std::net::SocketAddr) -> ConnectOptions {
    ConnectOptions {
        url: format!("ws://{address}{CONNECT_PATH}"),
        token: None,
        name: None,
        resume: None,
        tls: None,
    }
}

/// A fake relay's side: the next client upgraded, its hello read.
async fn hello_read(listener: &tokio::net::TcpListener) -> tokio_tungstenite::WebSocketStream<TcpStream> {
    let (tcp, _) = listener.accept().await.expect("accept");
    let mut socket = tokio_tungstenite::accept_async(tcp).await.expect("upgrade");
    let _hello = socket.next().await;
    socket
}

#[tokio::test]
async fn a_relay_closing_during_the_hello_is_worth_another_try() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let relay = async {
        let mut socket = hello_read(&listener).await;
        let close = tungstenite::protocol::CloseFrame {
            code: tungstenite::protocol::frame::coding::CloseCode::Away,
            reason: "relay shutting down".into(),
        };
        let _ = socket.close(Some(close)).await;
    };
    let options = plain(address);
    let (_, attempt) = tokio::join!(relay, connect(&options));
    let err = attempt.expect_err("no tunnel from a closing relay");
    assert!(!err.is_fatal(), "{err:?}");
    assert!(err.to_string().contains("relay shutting down"), "{err}");
}

/// A relay reached that answers the hello with a frame no WebSocket
/// peer may send is not "unreachable", and is not tried again.
#[tokio::test]
async fn a_relay_breaking_the_websocket_protocol_is_told_as_such() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let relay = async {
        let mut socket = hello_read(&listener).await;
        // A final frame of opcode 3, which RFC 6455 reserves.
        let _ = tokio::io::AsyncWriteExt::write_all(socket.get_mut(), &[0x83, 0x00]).await;
        socket
    };
    let options = plain(address);
    let (_socket, attempt) = tokio::join!(relay, connect(&options));
    let err = attempt.expect_err("no tunnel from a relay breaking the protocol");
    assert!(err.is_fatal(), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("the relay's answer to the hello cannot be used: it broke the WebSocket protocol: "),
        "{err}"
    );
}

/// A relay's welcome is printed and partly sent back: one whose name
/// is no tunnel name, or that speaks another protocol, is refused in
/// words, its bytes escaped.
#[tokio::test]
async fn a_welcome_with_a_false_name_or_another_protocol_is_refused() {
    let welcomes = [
        (
            ServerMessage::Welcome {
                protocol: PROTOCOL_VERSION,
                name: "ab\x1b]0;PWNED\x07".into(),
                public_url: "http://fake.example".into(),
                resume: "r".into(),
            },
            "the relay's answer to the hello cannot be used: a tunnel name that is not one, \"ab\\x1b]0;PWNED\\x07\""
                .to_owned(),
        ),
        // The text as the user reads it, not as the function that
        // writes it says: a side named the wrong way round would pass.
        (
            ServerMessage::Welcome {
                protocol: PROTOCOL_VERSION + 1,
                name: "calm-otter".into(),
                public_url: "http://fake.example/t/calm-otter".into(),
                resume: "r".into(),
            },
            format!(
                "client {} speaks protocol {PROTOCOL_VERSION}, relay speaks {}: upgrade the client",
                env!("CARGO_PKG_VERSION"),
                PROTOCOL_VERSION + 1
            ),
        ),
        (
            ServerMessage::Welcome {
                protocol: PROTOCOL_VERSION - 1,
                name: "calm-otter".into(),
                public_url: "http://fake.example/t/calm-otter".into(),
                resume: "r".into(),
            },
            format!(
                "client {} speaks protocol {PROTOCOL_VERSION}, relay speaks {}: upgrade the relay",
                env!("CARGO_PKG_VERSION"),
                PROTOCOL_VERSION - 1
            ),
        ),
        // A URL printed as the tunnel's must be one a browser opens.
        (
            ServerMessage::Welcome {
                protocol: PROTOCOL_VERSION,
                name: "calm-otter".into(),
                public_url: "javascript:alert(1)//".into(),
                resume: "r".into(),
            },
            "a public URL that is not one, \"javascript:alert(1)//\"".to_owned(),
        ),
        // The relay's own text is repeated a line long, whatever it sent.
        (
            ServerMessage::Welcome {
                protocol: PROTOCOL_VERSION,
                name: "calm-otter".into(),
                public_url: format!("http://fake.example/{}", "a".repeat(10_000)),
                resume: "r".into(),
            },
            format!("\"http://fake.example/{}…\"", "a".repeat(MAX_QUOTED - 21)),
        ),
        (
            ServerMessage::Welcome {
                protocol: PROTOCOL_VERSION,
                name: "calm-otter".into(),
                public_url: "http://fake.example/t/calm-otter".into(),
                resume: "r".repeat(100_000),
            },
            "a resume secret that cannot be sent back (100000 bytes)".to_owned(),
        ),
        (
            ServerMessage::Welcome {
                protocol: PROTOCOL_VERSION,
                name: "calm-otter".into(),
                public_url: "http://fake.example/t/calm-otter".into(),
                resume: "with a space".into(),
            },
            "a resume secret that cannot be sent back (12 bytes)".to_owned(),
        ),
        (
            ServerMessage::Refused {
                reason: "no ".repeat(10_000),
            },
            format!("{}…", &"no ".repeat(10_000)[..MAX_QUOTED - 1]),
        ),
        (
            ServerMessage::RequestHead {
                stream: 1,
                method: "POST".into(),
                target: "/hook".into(),
                headers: vec![portpreview_shared::Header::new("x-h", vec![b'h'; 60_000])],
                end: true,
            },
            "the relay's answer to the hello cannot be used: a request head instead of a welcome".to_owned(),
        ),
    ];
    let welcomes = (welcomes.into_iter())
        .map(|(welcome, said)| {
            (
                Message::Binary(codec::encode(&welcome, b"").expect("encodes").into()),
                said,
            )
        })
        .chain([(
            Message::Text(r#"{"type":"welcome"}"#.into()),
            "the relay's answer to the hello cannot be used: it answered with text, \"{\"type\":\"welcome\"}\", \
             where a PortPreview relay answers in binary: is that address a PortPreview relay?"
                .to_owned(),
        )]);
    for (welcome, said) in welcomes {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let relay = async {
            let mut socket = hello_read(&listener).await;
            let _ = socket.send(welcome).await;
            socket
        };
        let options = plain(address);
        let (_socket, attempt) = tokio::join!(relay, connect(&options));
        let err = attempt.expect_err("refused");
        assert!(err.is_fatal(), "{err:?}");
        assert!(err.to_string().ends_with(&said), "{err}");
    }
}
