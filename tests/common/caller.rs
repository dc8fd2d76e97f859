//! The webhook provider's side: sends requests to a public URL.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use http::{Method, Request, Uri};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// An answer as the caller received it.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// Headers in order.
    pub headers: Vec<(String, Vec<u8>)>,
    /// Whole body.
    pub body: Vec<u8>,
}

impl Reply {
    /// First value of a header as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends one request on a fresh connection and reads the whole answer.
pub async fn send(method: &str, url: &str, headers: &[(&str, &[u8])], body: impl Into<Bytes>) -> Reply {
    send_body(method, url, headers, Full::new(body.into())).await
}

/// POSTs `first`, then waits for `release` before it sends `rest`, all as
/// one body whose whole length is declared up front: an upload caught in
/// the middle. `paused` fires once `first` has been taken for sending.
pub async fn post_held(
    url: &str,
    first: Bytes,
    rest: Bytes,
    paused: oneshot::Sender<()>,
    release: oneshot::Receiver<()>,
) -> Reply {
    let length = (first.len() + rest.len()).to_string();
    let held = async move {
        let _ = paused.send(());
        release.await.expect("the test releases the rest of the upload");
        Ok::<_, Infallible>(Frame::data(rest))
    };
    let frames = stream::once(async move { Ok(Frame::data(first)) }).chain(stream::once(held));
    let headers: [(&str, &[u8]); 1] = [("content-length", length.as_bytes())];
    send_body("POST", url, &headers, StreamBody::new(frames)).await
}

async fn send_body<B>(method: &str, url: &str, headers: &[(&str, &[u8])], body: B) -> Reply
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let uri: Uri = url.parse().expect("valid url");
    let authority = uri.authority().expect("url with host").clone();
    let stream = TcpStream::connect(authority.as_str())
        .await
        .expect("connect to the public URL");
    stream.set_nodelay(true).expect("nodelay");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("http handshake");
    tokio::spawn(connection);
    let mut request = Request::builder()
        .method(Method::from_bytes(method.as_bytes()).expect("method"))
        .uri(uri.path_and_query().map(|p| p.as_str()).unwrap_or("/"))
        .header("host", authority.as_str());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(body).expect("request");
    let response = tokio::time::timeout(Duration::from_secs(60), sender.send_request(request))
        .await
        .expect("an answer within 60 s")
        .expect("an HTTP answer");
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec()))
        .collect();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("whole body")
        .to_bytes()
        .to_vec();
    Reply { status, headers, body }
}

/// POSTs `body` to `url`.
pub async fn post(url: &str, body: impl Into<Bytes>) -> Reply {
    send("POST", url, &[], body).await
}

/// How long [`raw`] waits for the first byte of an answer: a loaded
/// machine may take a while to forward a request, and silence before the
/// answer has begun is no end of it.
const FIRST_BYTE_WITHIN: Duration = Duration::from_secs(30);

/// How long [`raw`] waits for more once an answer has begun.
const QUIET_AFTER_DATA: Duration = Duration::from_secs(1);

/// Writes raw bytes to `addr` and returns everything read until the peer
/// closes, or goes quiet for a second once its answer has begun.
pub async fn raw(addr: std::net::SocketAddr, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(bytes).await.expect("write");
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let wait = if out.is_empty() {
            FIRST_BYTE_WITHIN
        } else {
            QUIET_AFTER_DATA
        };
        match tokio::time::timeout(wait, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// How long [`raw_until_closed`] waits for the peer to close.
const CLOSED_WITHIN: Duration = Duration::from_secs(20);

/// Writes raw bytes to `addr` and returns everything read until the peer
/// closes the connection (or resets it). Panics if it is still open after
/// [`CLOSED_WITHIN`]: a caller left hanging is what such a test catches.
pub async fn raw_until_closed(addr: std::net::SocketAddr, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(bytes).await.expect("write");
    let mut out = Vec::new();
    let read_all = async {
        let mut buf = [0u8; 8192];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    };
    let closed = tokio::time::timeout(CLOSED_WITHIN, read_all).await.is_ok();
    let answer = String::from_utf8_lossy(&out).into_owned();
    assert!(
        closed,
        "the connection was still open after {CLOSED_WITHIN:?}, the caller left hanging: {:?}",
        &answer[..answer.len().min(300)]
    );
    answer
}

/// Reads an HTTP head from `stream` byte by byte, up to and with its blank
/// line, leaving whatever follows unread; `None` if the stream ends or
/// fails first.
pub async fn read_head(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    Some(head)
}

/// The body length a raw HTTP/1 head declares in its `Content-Length`
/// (0 when it declares none).
pub fn declared_length(head: &str) -> usize {
    head.lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0)
}
