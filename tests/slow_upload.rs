//! A caller on a slow link. A body that takes longer to upload than the
//! handler is given to answer reaches the handler whole, and its answer
//! reaches the caller: the upload is not the handler's delay, for the
//! relay nor for the client. A body still trickling in after the relay's
//! upload limit (ten times its answer timeout) is refused 408, so no
//! upload holds a stream for good.

mod common;

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use common::local::{Answer, LocalHandler};
use common::relay::TestRelay;
use common::tunnel::{TestTunnel, TunnelOptions};

/// POSTs `pieces` pieces of `piece` bytes to `url`, one every `every`,
/// with the whole length declared up front as curl does; the status and
/// body of the answer.
async fn post_slowly(url: &str, pieces: usize, piece: usize, every: Duration) -> (u16, String) {
    let uri: http::Uri = url.parse().expect("valid url");
    let authority = uri.authority().expect("url with host").clone();
    let stream = TcpStream::connect(authority.as_str()).await.expect("connect");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("http handshake");
    let connection = tokio::spawn(connection);
    let frames = futures_util::stream::unfold(0, move |sent| async move {
        if sent == pieces {
            return None;
        }
        tokio::time::sleep(every).await;
        let frame = Frame::data(Bytes::from(vec![b'x'; piece]));
        Some((Ok::<_, Infallible>(frame), sent + 1))
    });
    let request = Request::post(uri.path())
        .header("host", authority.as_str())
        .header("content-length", (pieces * piece).to_string())
        .body(StreamBody::new(frames))
        .expect("request");
    let response = tokio::time::timeout(Duration::from_secs(60), sender.send_request(request))
        .await
        .expect("an answer within 60 s")
        .expect("an HTTP answer");
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.expect("whole body").to_bytes();
    connection.abort();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A relay and a client that both give the handler one second to answer.
async fn impatient() -> (TestRelay, LocalHandler, TestTunnel) {
    let relay = TestRelay::with_config(portpreview_server::RelayConfig {
        request_timeout: Duration::from_secs(1),
        ..Default::default()
    })
    .await;
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
    // 30 pieces, one every 500 ms: each within the relay's one-second
    // wait for the next, the whole past its ten-second upload limit.
    let (status, said) = post_slowly(&tunnel.url("/upload"), 30, 8 * 1024, Duration::from_millis(500)).await;
    assert_eq!(status, 408, "{said}");
    assert_eq!(
        said.trim_end(),
        "the request body was still arriving after 10s, the most an upload may take"
    );
    assert!(handler.requests().is_empty(), "the handler never had it whole");
}
