//! A caller the relay refuses while its body is still coming hears why,
//! even when it writes the whole body before it reads a byte of the answer,
//! as most HTTP libraries and proxies do.

mod common;

use common::local::LocalHandler;
use common::relay::TestRelay;
use common::tunnel::{TestTunnel, TunnelOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Far more than loopback's socket buffers hold: the caller's writes only
/// finish if the relay reads what it sends.
const BODY: usize = 16 * 1024 * 1024;

/// How much of the answer a caller reads.
#[derive(Clone, Copy, PartialEq)]
enum Reads {
    /// Until the relay closes the connection.
    ToTheClose,
    /// The head and the body its Content-Length declares: a relay that
    /// read the whole request may keep the connection for the next.
    TheAnswer,
}

/// POSTs a body of `BODY` bytes to `path` on `relay`, writing all of it
/// before reading, and returns the answer, read as `reads` says.
async fn post_all_then_read(relay: &TestRelay, path: &str, reads: Reads) -> String {
    let mut stream = TcpStream::connect(relay.addr).await.expect("connect");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {BODY}\r\n\r\n",
        relay.addr
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    stream
        .write_all(&vec![b'x'; BODY])
        .await
        .expect("the whole body is taken, though the relay has refused it");
    if reads == Reads::TheAnswer {
        let head = common::caller::read_head(&mut stream).await.expect("the answer's head");
        let head = String::from_utf8_lossy(&head).into_owned();
        let mut body = vec![0; common::caller::declared_length(&head)];
        stream.read_exact(&mut body).await.expect("the answer's body");
        return head + &String::from_utf8_lossy(&body);
    }
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .await
        .expect("the answer, then the relay's close, with no reset");
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn a_caller_writing_a_body_over_the_limit_before_reading_gets_the_413() {
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        max_body: 1024,
        ..Default::default()
    })
    .await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let answer = post_all_then_read(&relay, &format!("/t/{}/big", tunnel.name()), Reads::ToTheClose).await;
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer:.300}");
    assert!(
        answer.ends_with("\r\n\r\nrequest body over the relay's limit of 1024 bytes\n"),
        "the relay says why: {answer:.300}"
    );
    assert!(answer.contains("connection: close\r\n"), "{answer:.300}");
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!(
        summary.error.as_deref(),
        Some("the relay answered the caller 413: request body over the relay's limit of 1024 bytes"),
        "what the history says the caller got is what it got"
    );
    assert!(handler.requests().is_empty(), "the handler never saw it");
}

#[tokio::test]
async fn a_caller_writing_a_large_body_to_no_tunnel_before_reading_gets_the_404() {
    let relay = TestRelay::start().await;
    let answer = post_all_then_read(&relay, "/t/nobody-here/hook", Reads::ToTheClose).await;
    assert!(answer.starts_with("HTTP/1.1 404 "), "{answer:.300}");
    assert!(
        answer.ends_with("\r\n\r\nno such tunnel: nothing is connected as nobody-here\n"),
        "{answer:.300}"
    );
}

/// A handler that answers before it reads the body (a 401 to a bad
/// signature, at the first bytes): the relay reads on the rest, which the
/// history keeps, and a caller still writing reads the 401 rather than a
/// reset.
#[tokio::test]
async fn a_caller_still_writing_reads_a_handlers_early_answer() {
    let relay = TestRelay::start().await;
    let handler = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let handler_url = format!("http://{}", handler.local_addr().expect("address"));
    let early = tokio::spawn(async move {
        let (mut socket, _) = handler.accept().await.expect("the request");
        common::caller::read_head(&mut socket).await.expect("the head");
        socket
            .write_all(b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 13\r\n\r\nbad signature")
            .await
            .expect("the answer");
        // Reads on, as a server does, so that only the relay's side is tested.
        let _ = tokio::io::copy(&mut socket, &mut tokio::io::sink()).await;
    });
    let tunnel = TestTunnel::start(&relay.http_url(), &handler_url).await;
    let answer = post_all_then_read(&relay, &format!("/t/{}/hook", tunnel.name()), Reads::TheAnswer).await;
    assert!(answer.starts_with("HTTP/1.1 401 "), "{answer:.300}");
    assert!(answer.ends_with("\r\n\r\nbad signature"), "{answer:.300}");
    early.abort();
}

/// A handler that answers before it reads the body and then closes at once
/// (a framework's body limit, or an auth check, then a plain close): its
/// kernel resets the connection on the unread body, and the tunnel's
/// writes of the rest fail. The answer came before the reset, so the
/// caller gets it, every time, as it would calling the handler directly.
/// The history keeps the body the caller sent, whole, though the handler
/// read none of it: the same upload eight times is one event delivered
/// eight times, each replayable.
#[tokio::test]
async fn a_handler_that_answers_early_and_closes_unread_is_still_heard() {
    let relay = TestRelay::start().await;
    let handler = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let handler_url = format!("http://{}", handler.local_addr().expect("address"));
    let refusing = tokio::spawn(async move {
        loop {
            let (mut socket, _) = handler.accept().await.expect("a request");
            common::caller::read_head(&mut socket).await.expect("the head");
            socket
                .write_all(b"HTTP/1.1 413 Payload Too Large\r\nconnection: close\r\ncontent-length: 9\r\n\r\ntoo large")
                .await
                .expect("the answer");
            // Dropped with the body unread: the kernel answers it with a reset.
        }
    });
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler_url).await;
    let mut last = 0;
    for attempt in 1..=8 {
        let answer = post_all_then_read(&relay, &format!("/t/{}/upload", tunnel.name()), Reads::TheAnswer).await;
        assert!(answer.starts_with("HTTP/1.1 413 "), "attempt {attempt}: {answer:.300}");
        assert!(
            answer.ends_with("\r\n\r\ntoo large"),
            "attempt {attempt}: {answer:.300}"
        );
        let (recorded, _) = tunnel.next_delivery().await;
        assert_eq!(
            recorded.status,
            Some(413),
            "attempt {attempt} recorded as answered: {recorded:?}"
        );
        assert_eq!(recorded.delivery_count, attempt, "one event: {recorded:?}");
        last = recorded.id;
    }
    refusing.abort();
    let shown = common::history::portpreview_async(&tunnel.db, &["show", &last.to_string(), "--json"])
        .await
        .json();
    let request = &shown["request"];
    assert_eq!(
        (&request["body_size"], &request["body_truncated"]),
        (&serde_json::json!(BODY), &serde_json::json!(false)),
        "the whole body kept"
    );
}

/// A caller over the relay's connection cap that has already written its
/// request reads the 503 that says why, not a reset: what it sent is read
/// before the close. Twenty tries, as the reset came about half the time.
#[tokio::test]
async fn a_caller_over_the_connection_cap_that_wrote_first_reads_the_503() {
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        max_connections_per_ip: 1,
        ..Default::default()
    })
    .await;
    let _held = TcpStream::connect(relay.addr)
        .await
        .expect("the one connection allowed");
    for _ in 0..20 {
        let mut stream = TcpStream::connect(relay.addr).await.expect("connect");
        let request = format!(
            "POST /t/any/hook HTTP/1.1\r\nHost: {}\r\nContent-Length: 4096\r\n\r\n{}",
            relay.addr,
            "x".repeat(4096)
        );
        stream.write_all(request.as_bytes()).await.expect("the request");
        let mut answer = Vec::new();
        stream
            .read_to_end(&mut answer)
            .await
            .expect("the answer, then the relay's close, with no reset");
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
        assert!(answer.contains("too many connections to the relay"), "{answer}");
    }
}

/// A small body that ends before its `Content-Length` (the caller closed
/// its side, or went away): the caller that still reads, and the history,
/// learn how far it got, and the handler sees nothing.
#[tokio::test]
async fn a_small_body_cut_short_is_told_with_how_far_it_got() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let mut stream = TcpStream::connect(relay.addr).await.expect("connect");
    let head = format!(
        "POST /t/{}/hook HTTP/1.1\r\nHost: {}\r\nContent-Length: 10\r\n\r\nabc",
        tunnel.name(),
        relay.addr
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    stream.shutdown().await.expect("close the writing side");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("the answer");
    let answer = String::from_utf8_lossy(&answer);
    let why = "the request body could not be read: it ended after 3 of 10 bytes (the caller went away, or \
               closed its side of the connection); it was not forwarded";
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(answer.ends_with(&format!("\r\n\r\n{why}\n")), "{answer}");
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!(
        summary.error.as_deref(),
        Some(format!("the relay answered the caller 400: {why}").as_str())
    );
    assert!(handler.requests().is_empty(), "the handler never saw it");
}

/// A large body, streamed through the tunnel as it arrives, that ends
/// before its `Content-Length`: the caller that still reads learns how far
/// it got, as for a small one, and that the handler may have had part of
/// it (the client holds the first MiB before it calls the handler, which
/// the relay cannot see).
#[tokio::test]
async fn a_large_body_cut_short_is_told_with_how_far_it_got() {
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    let mut stream = TcpStream::connect(relay.addr).await.expect("connect");
    let head = format!(
        "POST /t/{}/upload HTTP/1.1\r\nHost: {}\r\nContent-Length: 200000\r\n\r\n",
        tunnel.name(),
        relay.addr
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    stream.write_all(&[b'x'; 100_000]).await.expect("half the body");
    stream.shutdown().await.expect("close the writing side");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("the answer");
    let answer = String::from_utf8_lossy(&answer);
    let why = "the request body could not be read: it ended after 100000 of 200000 bytes (the caller went \
               away, or closed its side of the connection); what came was passed on, so the handler may have had \
               part of it";
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(answer.ends_with(&format!("\r\n\r\n{why}\n")), "{answer}");
}

/// A handler that gives its answer's head at once and streams the rest as
/// it reads the body (a full-duplex one): an early 2xx is no refusal, and
/// the body keeps going to it, whole.
#[tokio::test]
async fn a_handler_answering_as_it_reads_gets_the_whole_body() {
    let relay = TestRelay::start().await;
    let handler = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let handler_url = format!("http://{}", handler.local_addr().expect("address"));
    let streaming = tokio::spawn(async move {
        let (mut socket, _) = handler.accept().await.expect("the request");
        let head = common::caller::read_head(&mut socket).await.expect("the head");
        let length = common::caller::declared_length(&String::from_utf8_lossy(&head));
        socket
            .write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n7\r\nreading\r\n")
            .await
            .expect("the head and a first chunk");
        let mut body = vec![0; length];
        socket
            .read_exact(&mut body)
            .await
            .expect("the whole body, after the answer began");
        let said = format!(" {length} bytes");
        socket
            .write_all(format!("{:x}\r\n{said}\r\n0\r\n\r\n", said.len()).as_bytes())
            .await
            .expect("the end of the answer");
    });
    let tunnel = TestTunnel::start(&relay.http_url(), &handler_url).await;
    let reply = common::caller::post(&tunnel.url("/stream"), vec![b'x'; 5 * 1024 * 1024]).await;
    assert_eq!((reply.status, reply.text()), (200, "reading 5242880 bytes".to_string()));
    streaming.await.expect("the handler read it all");
}

/// A handler that answers at once and then neither reads the rest of a
/// large body nor closes its connection: once the answer has gone back,
/// the tunnel closes the connection, as a caller that hung up would, rather
/// than hold it, and the caller's upload, for good.
#[tokio::test]
async fn a_handler_that_answers_early_and_stops_reading_is_let_go() {
    let relay = TestRelay::start().await;
    let handler = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let handler_url = format!("http://{}", handler.local_addr().expect("address"));
    let stalling = tokio::spawn(async move {
        let (mut socket, _) = handler.accept().await.expect("the request");
        common::caller::read_head(&mut socket).await.expect("the head");
        socket
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            .await
            .expect("the answer");
        // Reads nothing for a while, then all there is: a tunnel that let
        // the connection go sent a part of the body, and then its close.
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        let mut body = Vec::new();
        let read = tokio::time::timeout(std::time::Duration::from_secs(10), socket.read_to_end(&mut body)).await;
        (read.is_ok(), body.len())
    });
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler_url).await;
    let mut stream = TcpStream::connect(relay.addr).await.expect("connect");
    let head = format!(
        "POST /t/{}/upload HTTP/1.1\r\nHost: {}\r\nContent-Length: {BODY}\r\n\r\n",
        tunnel.name(),
        relay.addr
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    let (mut reading, mut writing) = stream.into_split();
    let uploading = tokio::spawn(async move { writing.write_all(&vec![b'x'; BODY]).await });
    let answer = common::caller::read_head(&mut reading)
        .await
        .expect("the answer's head");
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200 "));
    let (ended, read) = stalling.await.expect("the handler");
    assert!(ended, "the tunnel closed the connection it could not write to");
    assert!(read < BODY, "the handler was sent part of the body: {read} bytes");
    tokio::time::timeout(std::time::Duration::from_secs(10), uploading)
        .await
        .expect("the caller's upload is not held")
        .expect("the upload task")
        .expect("the relay took the whole upload");
    let (recorded, _) = tunnel.next_delivery().await;
    assert_eq!(
        (recorded.status, recorded.error),
        (Some(200), None),
        "answered 200, no failure"
    );
}

/// A handler that reads the head of a large body, then neither reads on
/// nor answers: its time to answer runs from when it stopped taking the
/// bytes waiting for it, so the caller hears the tunnel's 504 saying so
/// at `--local-timeout`, not the relay's at its own limit, blaming the
/// client. The history keeps the whole body, for a replay.
#[tokio::test]
async fn a_handler_that_stops_reading_a_large_body_and_never_answers_times_out() {
    let relay = TestRelay::start().await;
    let handler = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let handler_url = format!("http://{}", handler.local_addr().expect("address"));
    let stuck = tokio::spawn(async move {
        let (mut socket, _) = handler.accept().await.expect("the request");
        common::caller::read_head(&mut socket).await.expect("the head");
        // Held open and unread until the test ends.
        tokio::time::sleep(std::time::Duration::from_secs(60)).await;
        drop(socket);
    });
    let options = TunnelOptions {
        local_timeout: std::time::Duration::from_secs(1),
        ..TunnelOptions::default()
    };
    let mut tunnel = TestTunnel::start_with(&relay.http_url(), &handler_url, options)
        .await
        .expect("tunnel");
    let answer = post_all_then_read(&relay, &format!("/t/{}/upload", tunnel.name()), Reads::TheAnswer).await;
    assert!(answer.starts_with("HTTP/1.1 504 "), "{answer:.300}");
    assert!(
        answer
            .trim_end()
            .ends_with("took no more of the request body for 1s and did not answer"),
        "the caller hears what the handler did: {answer:.300}"
    );
    let (recorded, id) = tunnel.next_delivery().await;
    assert_eq!(recorded.status, None, "the 504 was PortPreview's: {recorded:?}");
    assert!(
        recorded
            .error
            .as_deref()
            .is_some_and(|e| e.ends_with("took no more of the request body for 1s and did not answer")),
        "{recorded:?}"
    );
    let stored = tunnel.stored(id);
    assert_eq!(
        (stored.request.request_body.len(), stored.request.request_body_size),
        (BODY, BODY as u64),
        "the whole body is kept, for a replay"
    );
    stuck.abort();
}
