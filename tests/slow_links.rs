//! Callers and handlers on slow links.
//!
//! A body that takes longer to upload than the handler is given to answer
//! reaches the handler whole, and its answer reaches the caller: the
//! upload is not the handler's delay, for the relay nor for the client. A
//! body still trickling in after the relay's upload limit (ten times its
//! answer timeout) is refused 408, so no upload holds a stream for good.
//! A caller that hangs up while a handler streams its answer slowly is
//! recorded at once, with the status it had, and so is one whose tunnel
//! is stopped meanwhile. Callers trickling large
//! bodies cannot take every place on a tunnel: webhooks still get through.

mod common;

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Frame;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use common::local::{Answer, LocalHandler};
use common::process::Running;
use common::relay::TestRelay;
use common::tunnel::{TestTunnel, TunnelOptions};

/// POSTs `pieces` pieces of `piece` bytes to `url`, one every `every`,
/// with the whole length declared up front as curl does; the status and
/// body of the answer.
async fn post_slowly(url: &str, pieces: usize, piece: usize, every: Duration) -> (u16, String) {
    let (uri, mut sender, _connection) = connect(url).await;
    let frames = futures_util::stream::unfold(0, move |sent| async move {
        if sent == pieces {
            return None;
        }
        tokio::time::sleep(every).await;
        let frame = Frame::data(Bytes::from(vec![b'x'; piece]));
        Some((Ok::<_, Infallible>(frame), sent + 1))
    });
    let request = Request::post(uri.path())
        .header("host", uri.authority().expect("url with host").as_str())
        .header("content-length", (pieces * piece).to_string())
        .body(StreamBody::new(frames))
        .expect("request");
    let response = tokio::time::timeout(Duration::from_secs(60), sender.send_request(request))
        .await
        .expect("an answer within 60 s")
        .expect("an HTTP answer");
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.expect("whole body").to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// An HTTP/1 connection to `url`'s host: the URL, its sender, and the task
/// that drives it until dropped.
async fn connect<B>(url: &str) -> (http::Uri, SendRequest<B>, AbortOnDropHandle<hyper::Result<()>>)
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let uri: http::Uri = url.parse().expect("valid url");
    let authority = uri.authority().expect("url with host").clone();
    let stream = TcpStream::connect(authority.as_str()).await.expect("connect");
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("http handshake");
    (uri, sender, AbortOnDropHandle::new(tokio::spawn(connection)))
}

/// A handler written as many small servers are: it reads the whole
/// request, then writes its answer's head and, a moment later, its body
/// (Python's `http.server` writes them apart). With `endless`, the body is
/// chunked and never ends: a piece every 100 ms until the client hangs up.
/// The address it listens on.
async fn raw_handler(endless: bool) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = vec![0; 64 * 1024];
                let Some(end) = read_head(&mut socket, &mut request, &mut buf).await else {
                    return;
                };
                let head = String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length:"))
                    .map_or(0, |n| n.trim().parse().unwrap_or(0));
                while request.len() < end + 4 + length {
                    match socket.read(&mut buf).await {
                        Ok(n) if n > 0 => request.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                let whole = request.len() - end - 4;
                let body = format!("{whole} bytes");
                let head = match endless {
                    false => format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()),
                    true => "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_owned(),
                };
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                loop {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    let piece = match endless {
                        false => body.clone(),
                        true => format!("{:x}\r\n{body}\r\n", body.len()),
                    };
                    if socket.write_all(piece.as_bytes()).await.is_err() || !endless {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// A relay and a client that both give the handler one second to answer.
async fn impatient() -> (TestRelay, LocalHandler, TestTunnel) {
    let relay = TestRelay::answering_within(Duration::from_secs(1)).await;
    let handler = LocalHandler::start(|seen| Answer {
        status: 200,
        body: format!("{} bytes", seen.body.len()).into_bytes(),
        ..Answer::default()
    })
    .await;
    let options = TunnelOptions {
        local_timeout: Duration::from_secs(1),
        ..TunnelOptions::default()
    };
    let tunnel = TestTunnel::start_with(&relay.http_url(), &handler.url(), options)
        .await
        .expect("tunnel");
    (relay, handler, tunnel)
}

#[tokio::test]
async fn an_upload_slower_than_the_answer_timeout_is_answered_by_the_handler() {
    let (_relay, handler, mut tunnel) = impatient().await;
    // 3 MiB over about three seconds: past the 1 MiB read whole, the rest
    // streams to the handler as it comes.
    let (status, said) = post_slowly(&tunnel.url("/upload"), 12, 256 * 1024, Duration::from_millis(250)).await;
    assert_eq!((status, said.as_str()), (200, "3145728 bytes"), "{said}");
    assert_eq!(handler.requests().len(), 1);
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!((summary.status, summary.error), (Some(200), None));
}

#[tokio::test]
async fn an_upload_still_trickling_after_the_relays_limit_is_refused_408() {
    let (_relay, handler, tunnel) = impatient().await;
    // 40 pieces, one every 300 ms: each well within the relay's one-second
    // wait for the next, the whole past its ten-second upload limit.
    let (status, said) = post_slowly(&tunnel.url("/upload"), 40, 8 * 1024, Duration::from_millis(300)).await;
    assert_eq!(status, 408, "{said}");
    assert_eq!(
        said.trim_end(),
        "the request body was still arriving after 10s, the most an upload may take"
    );
    assert!(handler.requests().is_empty(), "the handler never had it whole");
}

#[tokio::test]
async fn an_answer_written_in_two_parts_after_a_slow_upload_reaches_the_caller() {
    let relay = TestRelay::answering_within(Duration::from_secs(1)).await;
    let handler = raw_handler(false).await;
    let options = TunnelOptions {
        local_timeout: Duration::from_secs(1),
        ..TunnelOptions::default()
    };
    let mut tunnel = TestTunnel::start_with(&relay.http_url(), &format!("http://{handler}"), options)
        .await
        .expect("tunnel");
    // Streamed by the relay, read whole by the client (under 1 MiB), over
    // about two seconds; the answer's body comes 100 ms after its head.
    let (status, said) = post_slowly(&tunnel.url("/upload"), 8, 64 * 1024, Duration::from_millis(250)).await;
    assert_eq!((status, said.as_str()), (200, "524288 bytes"), "{said}");
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!((summary.status, summary.error), (Some(200), None));
}

#[tokio::test]
async fn a_caller_gone_during_a_slow_streamed_answer_is_recorded_with_its_status() {
    let relay = TestRelay::start().await;
    let handler = raw_handler(true).await;
    let options = TunnelOptions {
        local_timeout: Duration::from_secs(2),
        ..TunnelOptions::default()
    };
    let mut tunnel = TestTunnel::start_with(&relay.http_url(), &format!("http://{handler}"), options)
        .await
        .expect("tunnel");
    let caller = caller_in_a_streamed_answer(relay.addr, tunnel.name()).await;
    drop(caller);
    // The handler never ends its answer: the delivery is recorded because
    // the caller left, not because the answer ended or timed out.
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!(summary.status, Some(200), "{:?}", summary.error);
    let error = summary.error.unwrap_or_default();
    assert!(
        error.ends_with(": the caller had the status and headers, not the whole body"),
        "{error}"
    );
}

/// A caller of tunnel `name` that has the status and the first piece of
/// the endless [`raw_handler`]'s answer, and reads no more.
async fn caller_in_a_streamed_answer(relay: std::net::SocketAddr, name: &str) -> TcpStream {
    let mut caller = TcpStream::connect(relay).await.expect("connect");
    let request = format!("POST /t/{name}/events HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}");
    caller.write_all(request.as_bytes()).await.expect("send");
    let mut answer = Vec::new();
    let mut buf = [0; 4096];
    while !String::from_utf8_lossy(&answer).contains("2 bytes") {
        let n = caller.read(&mut buf).await.expect("read");
        assert!(n > 0, "the answer ended: {}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&buf[..n]);
    }
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    caller
}

/// Stopped in the middle of a streamed answer, the tunnel keeps in the
/// history the status its caller had, as for a caller gone meanwhile.
#[tokio::test]
async fn a_tunnel_stopped_during_a_streamed_answer_records_the_status_its_caller_had() {
    let dir = tempfile::tempdir().expect("temp dir");
    let relay = TestRelay::start().await;
    let handler = raw_handler(true).await;
    let db = dir.path().join("history.db");
    let (mut client, url) = Running::tunnel(&format!("http://{handler}"), &relay.http_url(), &db, dir.path()).await;
    let name = url.rsplit('/').next().expect("tunnel name");
    let _caller = caller_in_a_streamed_answer(relay.addr, name).await;
    client.signal("TERM");
    assert_eq!(client.exit_code(Duration::from_secs(20)).await, Some(0));
    let store = portpreview::store::Store::open_existing(&db).expect("open the history");
    let listed = store.list(&portpreview::store::ListQuery::default()).expect("read");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        (listed[0].status, listed[0].error.as_deref()),
        (
            Some(200),
            Some(
                "PortPreview was stopped during the answer: the caller had the status and headers, not the whole body"
            )
        )
    );
}

/// Reads from `socket` into `request` until it holds a whole head; where
/// the head ends, or `None` when the connection ends first.
async fn read_head(socket: &mut TcpStream, request: &mut Vec<u8>, buf: &mut [u8]) -> Option<usize> {
    loop {
        if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            return Some(end);
        }
        match socket.read(buf).await {
            Ok(n) if n > 0 => request.extend_from_slice(&buf[..n]),
            _ => return None,
        }
    }
}

/// A handler that says which path each request it gets has, answers a
/// webhook "ok" as its head arrives, and reads an upload on without
/// answering it: the upload goes on holding its place at the relay.
async fn heads_handler() -> (std::net::SocketAddr, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let (heard, heads) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let heard = heard.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = vec![0; 64 * 1024];
                let Some(end) = read_head(&mut socket, &mut request, &mut buf).await else {
                    return;
                };
                let head = String::from_utf8_lossy(&request[..end]).into_owned();
                let path = head.split(' ').nth(1).unwrap_or_default().to_owned();
                let upload = path.starts_with("/upload");
                let _ = heard.send(path);
                if !upload {
                    let _ = socket
                        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                        .await;
                }
                while matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
    });
    (addr, heads)
}

#[tokio::test]
async fn callers_trickling_large_bodies_leave_room_for_webhooks() {
    // Four places: three may go to bodies still arriving.
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        max_in_flight: 4,
        ..Default::default()
    })
    .await;
    let (handler, mut heads) = heads_handler().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &format!("http://{handler}")).await;
    let upload = |n: usize| {
        format!(
            "POST /t/{}/upload-{n} HTTP/1.1\r\nHost: x\r\nContent-Length: 3000000\r\n\r\n",
            tunnel.name()
        )
    };
    // Past what the client reads whole before forwarding (1 MiB), so the
    // handler hears each head while the rest of its body never comes.
    let start = vec![b'x'; 1_100_000];
    let mut trickling = Vec::new();
    for n in 1..=3 {
        let mut caller = TcpStream::connect(relay.addr).await.expect("connect");
        caller.write_all(upload(n).as_bytes()).await.expect("send the head");
        caller.write_all(&start).await.expect("send the start");
        let path = tokio::time::timeout(Duration::from_secs(20), heads.recv()).await;
        assert_eq!(
            path.expect("the handler hears the upload"),
            Some(format!("/upload-{n}"))
        );
        trickling.push(caller);
    }

    // A fourth upload finds the places for bodies still arriving taken.
    let mut fourth = TcpStream::connect(relay.addr).await.expect("connect");
    fourth.write_all(upload(4).as_bytes()).await.expect("send the head");
    fourth.write_all(&start[..100_000]).await.expect("send the start");
    let mut answer = vec![0; 4096];
    let n = tokio::time::timeout(Duration::from_secs(20), fourth.read(&mut answer))
        .await
        .expect("an answer within 20 s")
        .expect("read the answer");
    let answer = String::from_utf8_lossy(&answer[..n]).into_owned();
    let refusal = format!(
        "too many request bodies still arriving for tunnel {}; try again shortly",
        tunnel.name()
    );
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("\r\nretry-after: 5\r\n"),
        "{answer}"
    );
    assert!(answer.contains(&refusal), "{answer}");

    // A webhook, its body whole, gets through all the same.
    let reply = common::caller::post(&tunnel.url("/hook"), r#"{"id":"evt_1"}"#).await;
    assert_eq!((reply.status, reply.text()), (200, "ok".to_owned()));
    let mut recorded = Vec::new();
    while recorded.len() < 2 {
        let (summary, _) = tunnel.next_delivery().await;
        recorded.push((summary.path, summary.status, summary.error));
    }
    recorded.sort();
    assert_eq!(
        recorded,
        [
            ("/hook".to_owned(), Some(200), None),
            (
                "/upload-4".to_owned(),
                None,
                Some(format!("the relay answered the caller 503: {refusal}"))
            ),
        ]
    );
    drop(trickling);
}

/// A tunnel whose client is on a slow link (1 MiB/s from the relay): the
/// caller's last byte leaves a window of the body still on its way to the
/// client, so the relay's answer timeout runs from when the client has
/// taken the whole body, as it runs from the caller's last byte when the
/// caller is the slow one. The answer is the handler's, not a 504 that
/// blames a client taking the body all along.
#[tokio::test]
async fn a_client_on_a_slow_link_is_waited_for_while_it_takes_the_body() {
    let relay = TestRelay::answering_within(Duration::from_secs(1)).await;
    let link = slow_link(relay.addr, Slow::Down).await;
    let handler = LocalHandler::start(|seen| Answer {
        status: 200,
        body: format!("{} bytes", seen.body.len()).into_bytes(),
        ..Answer::default()
    })
    .await;
    let mut tunnel = TestTunnel::start(&format!("http://{}", link.addr), &handler.url()).await;
    let url = format!("http://{}/t/{}/upload", relay.addr, tunnel.name());
    let reply = common::caller::post(&url, vec![b'x'; 3 * 1024 * 1024]).await;
    assert_eq!((reply.status, reply.text()), (200, "3145728 bytes".to_string()));
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!((summary.status, summary.error), (Some(200), None));
}

/// A webhook sent while a large upload crosses a slow client link reaches
/// the handler ahead of most of the upload: the relay writes requests'
/// heads before bodies already queued, and keeps little of a body in the
/// kernel's buffers, where nothing can overtake it. Before, a webhook
/// waited behind a whole window of the upload (18 s at 60 KB/s).
#[tokio::test]
async fn a_webhook_overtakes_an_upload_on_a_slow_client_link() {
    let relay = TestRelay::start().await;
    let link = slow_link(relay.addr, Slow::Down).await;
    let (handler, uploaded, _serving) = upload_counter().await;
    let tunnel = TestTunnel::start(&format!("http://{}", link.addr), &format!("http://{handler}")).await;
    let base = format!("http://{}/t/{}", relay.addr, tunnel.name());
    let upload_url = format!("{base}/upload");
    let upload = AbortOnDropHandle::new(tokio::spawn(async move {
        common::caller::post(&upload_url, vec![b'x'; UPLOAD]).await
    }));
    // Bodies up to 1 MiB are read whole before forwarding: the rest streams.
    while uploaded.load(Ordering::Relaxed) <= 1024 * 1024 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let at_send = uploaded.load(Ordering::Relaxed);
    let reply = common::caller::post(&format!("{base}/hook"), &b"{}"[..]).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let at_arrival: usize = reply.text().parse().expect("a count of bytes");
    // A window of the upload, 1 MiB, went ahead of it before.
    let ahead = at_arrival - at_send;
    assert!(
        ahead < 512 * 1024 && !upload.is_finished(),
        "{ahead} bytes of the upload reached the handler ahead of the webhook"
    );
}

/// A caller who leaves an upload on a slow client link stops it there:
/// the relay's reset takes the place of the body still queued for the
/// client, so the link carries little more of it, and the delivery is
/// recorded as left as soon as the client hears.
#[tokio::test]
async fn an_upload_its_caller_left_stops_crossing_a_slow_client_link() {
    let relay = TestRelay::start().await;
    let link = slow_link(relay.addr, Slow::Down).await;
    let (handler, uploaded, _serving) = upload_counter().await;
    let mut tunnel = TestTunnel::start(&format!("http://{}", link.addr), &format!("http://{handler}")).await;
    // Half of the body it declares, then gone: killed, its socket resets.
    let sent = UPLOAD / 2;
    let mut caller = TcpStream::connect(relay.addr).await.expect("connect");
    #[allow(deprecated)]
    caller.set_linger(Some(Duration::ZERO)).expect("linger 0");
    let head = format!(
        "POST /t/{}/upload HTTP/1.1\r\nHost: x\r\nContent-Length: {UPLOAD}\r\n\r\n",
        tunnel.name()
    );
    caller.write_all(head.as_bytes()).await.expect("send the head");
    caller.write_all(&vec![b'x'; sent]).await.expect("send half the body");
    // Past the first 1 MiB, read whole, the rest streams: the relay's
    // queue for the client fills with it.
    while uploaded.load(Ordering::Relaxed) <= 1024 * 1024 + 256 * 1024 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop(caller);
    let (summary, _) = tunnel.next_delivery().await;
    assert_eq!(
        summary.error.as_deref(),
        Some("the caller went away before its request body was complete; the handler got only part of its body")
    );
    // The relay reads on to the reset, its queue for the client full,
    // and the link carried all of it before.
    let reached = uploaded.load(Ordering::Relaxed);
    assert!(
        reached < sent - 256 * 1024,
        "{reached} of the {sent} bytes sent reached the handler"
    );
}

/// The same the other way: a webhook's answer overtakes a large download
/// going up a slow client link, as the client writes answers' heads
/// before bodies and keeps little unsent in the kernel.
#[tokio::test]
async fn a_webhooks_answer_overtakes_a_download_on_a_slow_client_uplink() {
    let relay = TestRelay::start().await;
    let link = slow_link(relay.addr, Slow::Up).await;
    let handler = LocalHandler::start(|seen| Answer {
        status: 200,
        body: match seen.uri.as_str() {
            "/download" => vec![b'x'; UPLOAD],
            _ => b"ok".to_vec(),
        },
        ..Answer::default()
    })
    .await;
    let tunnel = TestTunnel::start(&format!("http://{}", link.addr), &handler.url()).await;
    let base = format!("http://{}/t/{}", relay.addr, tunnel.name());
    let downloaded = Arc::new(AtomicUsize::new(0));
    let download = AbortOnDropHandle::new(tokio::spawn(count_download(
        format!("{base}/download"),
        Arc::clone(&downloaded),
    )));
    while downloaded.load(Ordering::Relaxed) < 256 * 1024 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let at_send = downloaded.load(Ordering::Relaxed);
    let reply = common::caller::post(&format!("{base}/hook"), &b"{}"[..]).await;
    let at_answer = downloaded.load(Ordering::Relaxed);
    assert_eq!((reply.status, reply.text()), (200, "ok".to_string()));
    // A window of the download, 1 MiB, went ahead of it before.
    let ahead = at_answer - at_send;
    assert!(
        ahead < 512 * 1024 && !download.is_finished(),
        "{ahead} bytes of the download reached its caller ahead of the webhook's answer"
    );
}

/// Large answers going up a slow uplink together share it: each keeps
/// arriving, and none waits behind the others' whole windows past the
/// relay's patience (here 1 s), which cut the last ones off.
#[tokio::test]
async fn answers_going_up_a_slow_uplink_together_share_it() {
    let relay = TestRelay::answering_within(Duration::from_secs(1)).await;
    let link = slow_link(relay.addr, Slow::Up).await;
    let handler = LocalHandler::start(|_| Answer {
        status: 200,
        body: vec![b'x'; ANSWER],
        ..Answer::default()
    })
    .await;
    let tunnel = TestTunnel::start(&format!("http://{}", link.addr), &handler.url()).await;
    let downloads: Vec<_> = (0..6)
        .map(|i| {
            let got = Arc::new(AtomicUsize::new(0));
            let url = format!("http://{}/t/{}/download{i}", relay.addr, tunnel.name());
            (Arc::clone(&got), tokio::spawn(count_download(url, got)))
        })
        .collect();
    for (got, download) in downloads {
        download.await.expect("the download's task");
        assert_eq!(got.load(Ordering::Relaxed), ANSWER, "an answer came cut off");
    }
}

/// Bytes of each answer in [`answers_going_up_a_slow_uplink_together_share_it`]:
/// a stream's whole window.
const ANSWER: usize = 1024 * 1024;

/// GETs `url`, adding the bytes of its answer's body to `got` as they come.
async fn count_download(url: String, got: Arc<AtomicUsize>) {
    let (uri, mut sender, _connection) = connect(&url).await;
    let request = Request::get(uri.path())
        .header("host", uri.authority().expect("url with host").as_str())
        .body(http_body_util::Empty::<Bytes>::new())
        .expect("request");
    let mut body = sender.send_request(request).await.expect("an answer").into_body();
    while let Some(Ok(frame)) = body.frame().await {
        if let Some(data) = frame.data_ref() {
            got.fetch_add(data.len(), Ordering::Relaxed);
        }
    }
}

/// Bytes of the upload, or the download, that a webhook overtakes: four
/// seconds over the slow link, which the tests do not wait for.
const UPLOAD: usize = 4 * 1024 * 1024;

/// A handler that counts the bytes of an upload to `/upload` as they come,
/// and answers anything else at once with that count: how much of the
/// upload had reached it when the request did.
async fn count_uploads(request: Request<hyper::body::Incoming>, uploaded: Arc<AtomicUsize>) -> Response<Full<Bytes>> {
    if request.uri().path() != "/upload" {
        let count = uploaded.load(Ordering::Relaxed).to_string();
        return Response::new(Full::new(Bytes::from(count)));
    }
    let mut body = request.into_body();
    while let Some(Ok(frame)) = body.frame().await {
        if let Some(data) = frame.data_ref() {
            uploaded.fetch_add(data.len(), Ordering::Relaxed);
        }
    }
    Response::new(Full::new(Bytes::new()))
}

/// A handler serving [`count_uploads`] until dropped: its address, and the
/// bytes of uploads it has read.
async fn upload_counter() -> (std::net::SocketAddr, Arc<AtomicUsize>, tokio_util::sync::DropGuard) {
    let uploaded = Arc::new(AtomicUsize::new(0));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let handler = listener.local_addr().expect("address");
    let stop = CancellationToken::new();
    // Stops once the guard is dropped, and the task with it.
    tokio::spawn(common::local::serve_http(
        listener,
        {
            let uploaded = Arc::clone(&uploaded);
            move |request| count_uploads(request, Arc::clone(&uploaded))
        },
        stop.clone(),
    ));
    (handler, uploaded, stop.drop_guard())
}

/// A TCP link to `to` that carries one way at about 1 MiB/s and the other
/// at once; it lasts as long as the handle.
struct SlowLink {
    addr: std::net::SocketAddr,
    _carrying: tokio_util::task::AbortOnDropHandle<()>,
}

/// Which way a [`SlowLink`] is slow.
#[derive(Clone, Copy, PartialEq)]
enum Slow {
    /// What comes back from the relay: requests to the client.
    Down,
    /// What goes to the relay: answers from the client.
    Up,
}

async fn slow_link(to: std::net::SocketAddr, slow: Slow) -> SlowLink {
    // A slow link holds little in flight; a loopback socket's buffer would
    // take megabytes the link has not carried. Accepted sockets take the
    // listener's.
    let listener = TcpSocket::new_v4().expect("socket");
    listener.set_recv_buffer_size(32 * 1024).expect("receive buffer");
    listener.bind("127.0.0.1:0".parse().expect("address")).expect("bind");
    let listener = listener.listen(16).expect("listen");
    let addr = listener.local_addr().expect("address");
    let carrying = tokio::spawn(async move {
        let mut links = tokio::task::JoinSet::new();
        loop {
            let Ok((near, _)) = listener.accept().await else { return };
            let far = TcpSocket::new_v4().expect("socket");
            far.set_recv_buffer_size(32 * 1024).expect("receive buffer");
            let far = far.connect(to).await.expect("the relay");
            let (near_read, near_write) = near.into_split();
            let (far_read, far_write) = far.into_split();
            links.spawn(carry(far_read, near_write, slow == Slow::Down));
            links.spawn(carry(near_read, far_write, slow == Slow::Up));
        }
    });
    SlowLink {
        addr,
        _carrying: tokio_util::task::AbortOnDropHandle::new(carrying),
    }
}

/// Copies `from` to `to`, with `slowly` 16 KiB every 15 ms.
async fn carry(mut from: tokio::net::tcp::OwnedReadHalf, mut to: tokio::net::tcp::OwnedWriteHalf, slowly: bool) {
    if !slowly {
        let _ = tokio::io::copy(&mut from, &mut to).await;
        return;
    }
    let mut piece = vec![0; 16 * 1024];
    while let Ok(read @ 1..) = from.read(&mut piece).await {
        if to.write_all(&piece[..read]).await.is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
}
