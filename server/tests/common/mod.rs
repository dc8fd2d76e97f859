//! A relay in this process, a fake tunnel client speaking the wire protocol
//! directly, and callers: the pieces every server test is made of.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use portpreview_server::{RelayConfig, RelayError};
use portpreview_shared::codec;
use portpreview_shared::message::{CONNECT_PATH, PROTOCOL_VERSION};
use portpreview_shared::{ClientMessage, ServerMessage};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;

/// Longest any single step may take before a test calls it a hang.
pub const HANG: Duration = Duration::from_secs(10);

/// A relay on 127.0.0.1:0; stops on drop.
pub struct Relay {
    pub addr: SocketAddr,
    shutdown: CancellationToken,
    task: Option<JoinHandle<Result<(), RelayError>>>,
}

impl Relay {
    pub async fn start(config: RelayConfig) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(portpreview_server::run(listener, config, shutdown.clone()));
        Relay {
            addr,
            shutdown,
            task: Some(task),
        }
    }

    pub fn ws_url(&self) -> String {
        format!("ws://{}{CONNECT_PATH}", self.addr)
    }

    /// Begins a graceful shutdown and returns the relay's task to await.
    pub fn begin_stop(mut self) -> JoinHandle<Result<(), RelayError>> {
        self.shutdown.cancel();
        self.task.take().unwrap()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Opens the WebSocket with extra upgrade headers; the error carries any HTTP refusal.
pub async fn upgrade(
    url: &str,
    headers: &[(&str, &str)],
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<Socket, tokio_tungstenite::tungstenite::Error> {
    let mut request = url.into_client_request().unwrap();
    for (name, value) in headers {
        request.headers_mut().append(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            http::HeaderValue::from_str(value).unwrap(),
        );
    }
    let connector = tls.map(Connector::Rustls);
    let (socket, _) = tokio::time::timeout(
        HANG,
        tokio_tungstenite::connect_async_tls_with_config(request, None, true, connector),
    )
    .await
    .expect("upgrade hung")?;
    Ok(socket)
}

/// The HTTP status of a refused upgrade.
pub fn refused_status(err: &tokio_tungstenite::tungstenite::Error) -> Option<u16> {
    match err {
        tokio_tungstenite::tungstenite::Error::Http(response) => Some(response.status().as_u16()),
        _ => None,
    }
}

/// The seconds a refused upgrade's `Retry-After` gives, if it has one.
pub fn retry_after(err: &tokio_tungstenite::tungstenite::Error) -> Option<u64> {
    match err {
        tokio_tungstenite::tungstenite::Error::Http(response) => {
            response.headers().get("retry-after")?.to_str().ok()?.parse().ok()
        }
        _ => None,
    }
}

/// The plain-text reason a refused upgrade's body gives, if it has one.
pub fn refused_body(err: &tokio_tungstenite::tungstenite::Error) -> Option<String> {
    match err {
        tokio_tungstenite::tungstenite::Error::Http(response) => {
            Some(String::from_utf8_lossy(response.body().as_deref()?).into_owned())
        }
        _ => None,
    }
}

/// A tunnel client that speaks the protocol by hand.
pub struct FakeClient {
    pub socket: Socket,
    /// Resume secret from the last Welcome.
    pub resume: Option<String>,
}

/// What the relay said after the Hello.
pub enum Greeting {
    Welcome { name: String, public_url: String },
    Refused(String),
}

impl FakeClient {
    pub fn new(socket: Socket) -> FakeClient {
        FakeClient { socket, resume: None }
    }

    /// Connects to a plain relay, says Hello and expects a Welcome.
    pub async fn connect(relay: &Relay, name: Option<&str>) -> (FakeClient, String, String) {
        let mut client = FakeClient::new(upgrade(&relay.ws_url(), &[], None).await.unwrap());
        match client.hello(PROTOCOL_VERSION, name).await {
            Greeting::Welcome { name, public_url } => (client, name, public_url),
            Greeting::Refused(reason) => panic!("refused: {reason}"),
        }
    }

    /// Reconnects to a plain relay presenting a resume secret, expecting a Welcome.
    pub async fn reconnect(relay: &Relay, name: &str, resume: &str) -> (FakeClient, String, String) {
        let headers = [("x-portpreview-resume", resume)];
        let mut client = FakeClient::new(upgrade(&relay.ws_url(), &headers, None).await.unwrap());
        match client.hello(PROTOCOL_VERSION, Some(name)).await {
            Greeting::Welcome { name, public_url } => (client, name, public_url),
            Greeting::Refused(reason) => panic!("refused: {reason}"),
        }
    }

    pub async fn hello(&mut self, protocol: u32, name: Option<&str>) -> Greeting {
        let hello = ClientMessage::Hello {
            protocol,
            client_version: "9.9.9".into(),
            name: name.map(String::from),
        };
        self.send(&hello, b"").await;
        match self.recv().await {
            ServerFrame::Message(
                ServerMessage::Welcome {
                    name,
                    public_url,
                    protocol,
                    resume,
                },
                _,
            ) => {
                assert_eq!(protocol, PROTOCOL_VERSION);
                self.resume = Some(resume);
                Greeting::Welcome { name, public_url }
            }
            ServerFrame::Message(ServerMessage::Refused { reason }, _) => Greeting::Refused(reason),
            other => panic!("unexpected answer to Hello: {other:?}"),
        }
    }

    pub async fn send(&mut self, msg: &ClientMessage, body: &[u8]) {
        let frame = codec::encode(msg, body).expect("a frame within the protocol's limits");
        self.socket.send(Message::Binary(frame.into())).await.unwrap();
    }

    /// The next protocol message or close frame, skipping pings.
    pub async fn recv(&mut self) -> ServerFrame {
        loop {
            let next = tokio::time::timeout(HANG, self.socket.next())
                .await
                .expect("relay went quiet");
            match next {
                Some(Ok(Message::Binary(frame))) => {
                    let (msg, body) = codec::decode::<ServerMessage>(frame).expect("valid frame");
                    return ServerFrame::Message(msg, body);
                }
                Some(Ok(Message::Close(frame))) => {
                    return ServerFrame::Closed(frame.map(|f| f.reason.to_string()).unwrap_or_default())
                }
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return ServerFrame::Closed(String::new()),
            }
        }
    }

    /// The next message, which must be a protocol message.
    pub async fn message(&mut self) -> (ServerMessage, Bytes) {
        match self.recv().await {
            ServerFrame::Message(msg, body) => (msg, body),
            ServerFrame::Closed(reason) => panic!("socket closed: {reason}"),
        }
    }

    /// Reads a whole request: its head, the body bytes that came with it,
    /// and any body frames after.
    pub async fn request(&mut self) -> Received {
        let (head, first) = self.message().await;
        let ServerMessage::RequestHead {
            stream,
            method,
            target,
            headers,
            end,
        } = head
        else {
            panic!("expected a request head, got {head:?}");
        };
        let mut body = first.to_vec();
        let mut done = end;
        while !done {
            match self.message().await {
                (ServerMessage::RequestBody { stream: s, end }, chunk) if s == stream => {
                    body.extend_from_slice(&chunk);
                    done = end;
                }
                other => panic!("expected body of stream {stream}, got {other:?}"),
            }
        }
        let headers = headers.into_iter().map(|h| (h.name, h.value)).collect();
        Received {
            stream,
            method,
            target,
            headers,
            body,
        }
    }

    /// Answers a stream with a status, headers and a body in `chunks` body
    /// frames after the head.
    pub async fn respond(&mut self, stream: u64, status: u16, headers: &[(&str, &str)], body: &[u8], chunks: usize) {
        let size = body.len().div_ceil(chunks.max(1)).max(1);
        let pieces: Vec<&[u8]> = body.chunks(size).collect();
        self.respond_split(stream, status, headers, b"", &pieces).await;
    }

    /// Answers a stream with `first` in the head's frame and then one body
    /// frame per piece of `rest`.
    pub async fn respond_split(
        &mut self,
        stream: u64,
        status: u16,
        headers: &[(&str, &str)],
        first: &[u8],
        rest: &[&[u8]],
    ) {
        let headers = headers
            .iter()
            .map(|(n, v)| portpreview_shared::Header::new(*n, *v))
            .collect();
        let head = ClientMessage::ResponseHead {
            stream,
            status,
            headers,
            end: rest.is_empty(),
        };
        self.send(&head, first).await;
        for (i, piece) in rest.iter().enumerate() {
            let end = i + 1 == rest.len();
            self.send(&ClientMessage::ResponseBody { stream, end }, piece).await;
        }
    }
}

#[derive(Debug)]
pub enum ServerFrame {
    Message(ServerMessage, Bytes),
    Closed(String),
}

/// A request as the client received it.
#[derive(Debug)]
pub struct Received {
    pub stream: u64,
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    }
}

/// A caller's view of an answer.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends one request over a fresh connection and reads the whole answer.
pub async fn call<B>(addr: SocketAddr, request: http::Request<B>) -> Reply
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.unwrap();
    tokio::spawn(conn);
    let response = tokio::time::timeout(HANG, sender.send_request(request))
        .await
        .expect("answer hung")
        .unwrap();
    let (parts, body) = response.into_parts();
    let body = tokio::time::timeout(HANG, body.collect())
        .await
        .expect("body hung")
        .unwrap()
        .to_bytes();
    Reply {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body,
    }
}

/// A request to the relay at `addr` with a full body.
pub fn request(addr: SocketAddr, method: &str, path: &str, body: impl Into<Bytes>) -> http::Request<Full<Bytes>> {
    http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string())
        .body(Full::new(body.into()))
        .unwrap()
}

/// Writes raw bytes and returns what comes back until the peer closes, or
/// stays quiet for a second once its answer has begun. Silence before the
/// first byte is no end of the answer: a loaded machine gets 30 s for it.
pub async fn raw(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    raw_on(&mut stream, bytes).await
}

/// As [`raw`], on a connection already open.
pub async fn raw_on(stream: &mut TcpStream, bytes: &[u8]) -> String {
    stream.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let wait = Duration::from_secs(if out.is_empty() { 30 } else { 1 });
        match tokio::time::timeout(wait, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Writes raw bytes and returns everything read until the peer closes the
/// connection (or resets it). Panics if it is still open after [`HANG`]: a
/// connection the relay should have closed is what such a test catches.
pub async fn raw_until_closed(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
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
    let closed = tokio::time::timeout(HANG, read_all).await.is_ok();
    let answer = String::from_utf8_lossy(&out).into_owned();
    assert!(closed, "the connection was still open after {HANG:?}: {answer:?}");
    answer
}
