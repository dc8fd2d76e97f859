//! Sending one replay attempt: one HTTP/1 request over a kept-alive connection.
//!
//! Each worker owns one connection and reuses it, so an attempt costs the
//! handler's time plus a few microseconds, not a TCP handshake.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use portpreview_shared::Header;
use tokio::task::JoinHandle;

use crate::forward::{failed_answer, undefined_status};
use crate::local_tls::{FirstByte, OpenError, TlsError};
use crate::target::Scheme;

use super::options::DEFAULT_TIMEOUT;

/// Response bytes kept per attempt, to show and compare answers.
pub const KEPT_BODY_BYTES: usize = 64 * 1024;

/// Headers a replay sets itself: the length of the body it sends, and the
/// target it sends to.
const RECOMPUTED: &[&str] = &["content-length", "host"];

/// Where attempts go: a scheme, host and port, and the `Host` header to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Plain HTTP or HTTPS.
    pub scheme: Scheme,
    /// Host to connect to.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl Endpoint {
    /// `host:port`, also the Host header value.
    pub fn authority(&self) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// Which handler this is, to tell whether two requests went to the
    /// same one: `host:port` with the host's case folded and `localhost`,
    /// `127.0.0.1` and `[::1]` written one way, so that `localhost:3000`
    /// and `127.0.0.1:3000` are one handler, as they are to the user. The
    /// rest of the loopback (`127.0.0.2`) may be another process's.
    pub fn handler(&self) -> String {
        match portpreview_shared::host::is_localhost(&self.host) {
            true => format!("localhost:{}", self.port),
            false => self.authority().to_ascii_lowercase(),
        }
    }

    /// The full URL of `path` (path and query) at this endpoint.
    pub fn url(&self, path: &str) -> String {
        format!("{}://{}{path}", self.scheme, self.authority())
    }
}

/// One request as it goes on the wire.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Headers in order, hop-by-hop ones already removed.
    pub headers: Vec<Header>,
    /// Body bytes; Content-Length is computed from them. A shared handle,
    /// so sending the same body N times never copies it.
    pub body: Bytes,
}

/// What one attempt got back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    /// Status, `None` when no answer came.
    pub status: Option<u16>,
    /// Response headers in order.
    pub headers: Vec<Header>,
    /// The start of the response body, as much as the connection keeps
    /// ([`KEPT_BODY_BYTES`] unless it was told otherwise).
    pub body: Vec<u8>,
    /// Size of the whole response body.
    pub body_size: u64,
    /// BLAKE3 of the whole response body, kept or not: two answers that
    /// differ only past the kept start are still told apart.
    pub body_digest: [u8; 32],
    /// Time from the first byte sent to the last byte received.
    pub duration: Duration,
    /// Why there was no answer, e.g. "connection reset by 127.0.0.1:3000",
    /// or, beside a status, why its body was cut short.
    pub error: Option<String>,
    /// True when no connection to the handler could be made: the request
    /// never left, so the handler neither saw it nor failed it.
    pub unreached: bool,
}

/// Removes the headers that must not be replayed: hop-by-hop ones, those
/// `Connection` names, and those the replay recomputes. `Host` stays when
/// the handler got the caller's own (`host_preserved`): it may route by it.
pub fn strip_unreplayable(headers: &mut Vec<Header>, host_preserved: bool) {
    portpreview_shared::hop::strip_hop_by_hop(headers);
    headers.retain(|h| {
        let recomputed = RECOMPUTED.iter().any(|r| r.eq_ignore_ascii_case(&h.name));
        !recomputed || (host_preserved && h.name.eq_ignore_ascii_case("host"))
    });
}

/// A kept-alive HTTP/1 connection to the replay target; reconnects when the
/// handler closes it.
pub struct Connection {
    endpoint: Endpoint,
    sender: Option<SendRequest<Full<Bytes>>>,
    driver: Option<JoinHandle<()>>,
    /// The first byte the current connection read, none before it has.
    first_byte: FirstByte,
    /// Whether the current connection has yet to answer: only then does
    /// a failure say something about the handler's scheme.
    fresh: bool,
    /// The flag that aims this connection, named in hints.
    aimed_by: &'static str,
    kept_body: usize,
    timeout: Duration,
    /// Whether the last request failed before any connection was made.
    unreached: bool,
    /// Whether the handler has answered over this scheme: then a failure
    /// is no sign that it speaks another.
    answered_once: bool,
}

impl Connection {
    /// A connection that connects on its first request.
    pub fn lazy(endpoint: Endpoint) -> Self {
        Self {
            endpoint,
            sender: None,
            driver: None,
            first_byte: FirstByte::default(),
            fresh: true,
            aimed_by: "--target",
            kept_body: KEPT_BODY_BYTES,
            timeout: DEFAULT_TIMEOUT,
            unreached: false,
            answered_once: false,
        }
    }

    /// Gives each request `timeout` for its whole answer instead of [`DEFAULT_TIMEOUT`].
    pub fn answering_within(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Names `flag` (`--check-url`) instead of `--target` as what aims the connection.
    pub fn aimed_by(mut self, flag: &'static str) -> Self {
        self.aimed_by = flag;
        self
    }

    /// Keeps up to `bytes` of each answer's body instead of [`KEPT_BODY_BYTES`].
    pub fn keeping(mut self, bytes: usize) -> Self {
        self.kept_body = bytes;
        self
    }

    /// Opens a connection now; fails when nothing listens at the target.
    pub async fn open(endpoint: Endpoint) -> std::io::Result<Self> {
        let mut conn = Self::lazy(endpoint);
        conn.reconnect().await?;
        Ok(conn)
    }

    /// Opens a connection now, giving up after `timeout`: a target that
    /// swallows connection attempts fails the run instead of holding it for
    /// the system's connect timeout.
    pub async fn open_within(endpoint: Endpoint, timeout: Duration) -> std::io::Result<Self> {
        let tls = endpoint.scheme == Scheme::Https;
        let mut conn = Self::lazy(endpoint).answering_within(timeout);
        tokio::time::timeout(timeout, conn.reconnect()).await.map_err(|_| {
            if tls {
                // Kept whole, as a failed handshake is: the port may have
                // taken the connection, so "nothing answers" would mislead.
                std::io::Error::other(TlsError::Unanswered(timeout))
            } else {
                std::io::Error::new(std::io::ErrorKind::TimedOut, no_answer_within(timeout))
            }
        })??;
        Ok(conn)
    }

    /// Closes the connection and waits until its socket is shut, so a
    /// handler that serves one connection at a time is free for the next
    /// one. The next request connects afresh.
    pub async fn close(&mut self) {
        self.sender = None;
        if let Some(driver) = self.driver.take() {
            driver.abort();
            // Cancelled, or already ended: either way the socket is dropped.
            let _ = driver.await;
        }
    }

    async fn reconnect(&mut self) -> std::io::Result<()> {
        self.close().await;
        let endpoint = &self.endpoint;
        let stream = crate::local_tls::open(endpoint.scheme, &endpoint.host, endpoint.port)
            .await
            .map_err(|err| match err {
                OpenError::Connect(err) => err,
                // Kept whole, so a caller can tell a handshake from a refusal.
                OpenError::Tls(err) => std::io::Error::other(err),
            })?;
        self.first_byte = stream.first_byte();
        self.fresh = true;
        let io = hyper_util::rt::TokioIo::new(stream);
        let (sender, conn) = http1::handshake(io).await.map_err(std::io::Error::other)?;
        let driver = tokio::spawn(async move {
            if let Err(err) = conn.await {
                tracing::debug!(%err, "replay connection ended");
            }
        });
        self.sender = Some(sender);
        self.driver = Some(driver);
        Ok(())
    }

    /// Sends one request and reads the whole answer; never retries a request
    /// the handler may have seen.
    pub async fn send(&mut self, out: &Outgoing) -> Answer {
        let started = Instant::now();
        self.unreached = false;
        match tokio::time::timeout(self.timeout, self.exchange(out)).await {
            Ok(Ok(mut answer)) => {
                answer.duration = started.elapsed();
                answer
            }
            Ok(Err(error)) => Answer {
                duration: started.elapsed(),
                error: Some(error),
                unreached: self.unreached,
                ..Answer::default()
            },
            Err(_) => {
                // The connection may still carry the late answer: start afresh.
                self.sender = None;
                Answer {
                    duration: started.elapsed(),
                    error: Some(no_answer_within(self.timeout)),
                    unreached: self.unreached,
                    ..Answer::default()
                }
            }
        }
    }

    async fn ready_sender(&mut self) -> Result<&mut SendRequest<Full<Bytes>>, String> {
        let usable = match self.sender.as_mut() {
            Some(sender) => sender.ready().await.is_ok(),
            None => false,
        };
        if !usable {
            // Set until connected: an attempt whose time runs out while
            // connecting never reached the handler either.
            self.unreached = true;
            if let Err(err) = self.reconnect().await {
                return Err(match TlsError::within(&err) {
                    Some(tls) => tls.about(&self.endpoint.url("")),
                    None => format!("cannot connect to {}: {err}", self.endpoint.authority()),
                });
            }
            self.unreached = false;
        }
        self.sender.as_mut().ok_or_else(|| "no connection".to_string())
    }

    async fn exchange(&mut self, out: &Outgoing) -> Result<Answer, String> {
        let authority = self.endpoint.authority();
        let request = build_request(out, &authority)?;
        let with_body = !http_body::Body::is_end_stream(request.body());
        let sender = self.ready_sender().await?;
        let response = match sender.try_send_request(request).await {
            Ok(response) => response,
            Err(mut err) => match err.take_message() {
                // Never written: the kept-alive connection had closed. Safe to resend once.
                Some(request) => {
                    let sender = self.ready_sender().await?;
                    let sent = sender.send_request(request).await;
                    sent.map_err(|err| self.no_answer(&err))?
                }
                None => return Err(self.no_answer(err.error())),
            },
        };
        self.fresh = false;
        self.answered_once = true;
        // The next attempt goes on a new connection, as the tunnel's would.
        if !crate::forward::reusable(&response, with_body) {
            self.sender = None;
        }
        let (parts, mut body) = response.into_parts();
        // Recorded as the tunnel records it: a failure, not a status.
        if let Some(reason) = undefined_status(&authority, parts.status) {
            return Err(reason);
        }
        let mut answer = Answer {
            status: Some(parts.status.as_u16()),
            headers: parts
                .headers
                .iter()
                .map(|(name, value)| Header::new(name.as_str(), value.as_bytes()))
                .collect(),
            ..Answer::default()
        };
        let mut digest = blake3::Hasher::new();
        let declared = http_body::Body::size_hint(&body).exact();
        while let Some(frame) = body.frame().await {
            // The status came, as it reaches a provider's client, which
            // then reads the body cut short: the tunnel records it so too.
            let frame = match frame {
                Ok(frame) => frame,
                Err(err) => {
                    let why = crate::forward::broke_off(&err, answer.body_size, declared);
                    answer.error = Some(format!("{authority}: {why}"));
                    break;
                }
            };
            if let Ok(data) = frame.into_data() {
                answer.body_size += data.len() as u64;
                digest.update(&data);
                let room = self.kept_body.saturating_sub(answer.body.len());
                answer.body.extend_from_slice(&data[..data.len().min(room)]);
            }
        }
        answer.body_digest = *digest.finalize().as_bytes();
        Ok(answer)
    }
}

/// How an attempt that got no answer is told, when its handler sent none.
const DID_NOT_ANSWER: &str = "did not answer";

impl Connection {
    /// Why an attempt got no answer, with a hint when a plain `http://`
    /// handler seems to speak TLS, or to have crashed on the request.
    fn no_answer(&self, err: &hyper::Error) -> String {
        let authority = self.endpoint.authority();
        let sign = (self.fresh && !self.answered_once)
            .then(|| crate::local_tls::tls_sign(self.endpoint.scheme, err, &self.first_byte))
            .flatten();
        let said = failed_answer(&authority, err, DID_NOT_ANSWER);
        match sign {
            Some(sign) => {
                let https = Endpoint {
                    scheme: Scheme::Https,
                    ..self.endpoint.clone()
                };
                let to_https = format!("give {} an https:// URL: {}", self.aimed_by, https.url(""));
                format!("{said} ({})", sign.hint(&to_https))
            }
            // Past its first answer, a handler serves no HTTPS: a close
            // where the answer was due is most likely a crash on the request.
            None if crate::local_tls::closed_unanswered(err) => {
                format!("{said} ({})", crate::local_tls::CLOSED_UNANSWERED)
            }
            None => said,
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(driver) = self.driver.take() {
            driver.abort();
        }
    }
}

/// "no answer within 30s", in the spelling `--timeout` takes.
fn no_answer_within(timeout: Duration) -> String {
    format!(
        "no answer within {}",
        portpreview_shared::duration::format_duration(timeout)
    )
}

/// Whether a request sends a body, and so a `Content-Length` (0 for an
/// empty one): any method but those that take none, or a body held. The
/// curl export goes by the same rule, so that its command sends the
/// headers a replay sends.
pub fn carries_body(method: &str, body: &[u8]) -> bool {
    !body.is_empty() || !matches!(method, "GET" | "HEAD" | "OPTIONS" | "DELETE")
}

impl Outgoing {
    /// Every header the request goes out with, in order: `Host` naming the
    /// target, the headers, and `Content-Length` when it carries a body.
    /// The history records these, so an attempt shows what its handler got,
    /// as a tunnelled delivery does.
    pub fn wire_headers(&self, authority: &str) -> Vec<Header> {
        let mut headers = Vec::with_capacity(self.headers.len() + 2);
        // A Host left in the headers is the one the handler got when recorded.
        if !self.headers.iter().any(|h| h.name.eq_ignore_ascii_case("host")) {
            headers.push(Header::new("host", authority));
        }
        headers.extend(self.headers.iter().cloned());
        if carries_body(&self.method, &self.body) {
            headers.push(Header::new("content-length", self.body.len().to_string()));
        }
        headers
    }
}

fn build_request(out: &Outgoing, authority: &str) -> Result<http::Request<Full<Bytes>>, String> {
    let method =
        http::Method::from_bytes(out.method.as_bytes()).map_err(|_| format!("invalid method {:?}", out.method))?;
    let mut builder = http::Request::builder().method(method).uri(out.path.as_str());
    for header in out.wire_headers(authority) {
        builder = builder.header(header.name, header.value);
    }
    builder
        .body(Full::new(out.body.clone()))
        .map_err(|err| format!("cannot build the request: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw_handler::answering;

    #[test]
    fn hop_by_hop_connection_named_and_recomputed_headers_are_dropped() {
        let mut headers = vec![
            Header::new("connection", "close, x-trace"),
            Header::new("x-trace", "1"),
            Header::new("content-length", "99"),
            Header::new("Transfer-Encoding", "chunked"),
            Header::new("stripe-signature", "t=1,v1=ab"),
            Header::new("x-dup", "a"),
            Header::new("x-dup", "b"),
        ];
        strip_unreplayable(&mut headers, false);
        let names: Vec<_> = headers.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["stripe-signature", "x-dup", "x-dup"]);
    }

    #[test]
    fn content_length_is_recomputed_and_host_names_the_target() {
        let out = Outgoing {
            method: "POST".into(),
            path: "/hook?x=1".into(),
            headers: vec![Header::new("x-a", "1")],
            body: Bytes::from_static(b"hello"),
        };
        let request = build_request(&out, "127.0.0.1:9").unwrap();
        assert_eq!(request.headers()["content-length"], "5");
        assert_eq!(request.headers()["host"], "127.0.0.1:9");
        assert_eq!(request.uri(), "/hook?x=1");
    }

    /// One `POST /` of `{}` to the handler on `port`, within `within`.
    async fn post_once(port: u16, within: Duration) -> Answer {
        let endpoint = Endpoint {
            scheme: Scheme::Http,
            host: "127.0.0.1".into(),
            port,
        };
        let mut conn = Connection::open_within(endpoint, within).await.unwrap();
        let out = Outgoing {
            method: "POST".into(),
            path: "/".into(),
            headers: Vec::new(),
            body: Bytes::from_static(b"{}"),
        };
        conn.send(&out).await
    }

    #[tokio::test]
    async fn a_handler_that_never_answers_fails_the_attempt_in_time() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        // Accepts and reads, never answers: a handler stuck on a row lock.
        let stuck = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut sink = Vec::new();
            let _ = tokio::io::AsyncReadExt::read_to_end(&mut socket, &mut sink).await;
        });
        let answer = post_once(port, Duration::from_millis(50)).await;
        assert_eq!(answer.status, None);
        assert_eq!(answer.error.as_deref(), Some("no answer within 50ms"));
        assert!(!answer.unreached, "the handler had the request");
        stuck.abort();
    }

    #[tokio::test]
    async fn an_attempt_that_cannot_connect_never_reached_the_handler() {
        // A port just let go: nothing listens on it.
        let port = {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            listener.local_addr().unwrap().port()
        };
        let endpoint = Endpoint {
            scheme: Scheme::Http,
            host: "127.0.0.1".into(),
            port,
        };
        let mut conn = Connection::lazy(endpoint).answering_within(Duration::from_secs(5));
        let out = Outgoing {
            method: "POST".into(),
            path: "/".into(),
            headers: Vec::new(),
            body: Bytes::from_static(b"{}"),
        };
        let answer = conn.send(&out).await;
        assert!(answer.unreached, "{answer:?}");
        assert!(
            answer
                .error
                .as_deref()
                .is_some_and(|e| e.starts_with("cannot connect to 127.0.0.1:")),
            "{answer:?}"
        );
    }

    #[tokio::test]
    async fn a_status_http_does_not_define_fails_the_attempt() {
        let (port, _odd) = answering(b"HTTP/1.1 600 Beyond\r\ncontent-length: 0\r\n\r\n").await;
        let answer = post_once(port, Duration::from_secs(5)).await;
        assert_eq!(answer.status, None, "recorded as a failure, as the tunnel records it");
        assert_eq!(
            answer.error,
            Some(format!(
                "127.0.0.1:{port} answered status 600, which HTTP does not define (100–599)"
            ))
        );
    }

    /// A handler that answers 413 at the head and closes with the body
    /// unread resets the connection while the attempt still sends: the
    /// attempt is its 413, every time, not a failure to send.
    #[tokio::test]
    async fn an_answer_given_before_the_body_was_read_is_the_attempts() {
        let (port, _refusing) =
            answering(b"HTTP/1.1 413 Payload Too Large\r\nconnection: close\r\ncontent-length: 0\r\n\r\n").await;
        let endpoint = Endpoint {
            scheme: Scheme::Http,
            host: "127.0.0.1".into(),
            port,
        };
        let mut conn = Connection::open_within(endpoint, Duration::from_secs(10))
            .await
            .unwrap();
        let out = Outgoing {
            method: "POST".into(),
            path: "/upload".into(),
            headers: Vec::new(),
            body: Bytes::from(vec![b'x'; 8 * 1024 * 1024]),
        };
        for attempt in 1..=5 {
            let answer = conn.send(&out).await;
            assert_eq!(answer.status, Some(413), "attempt {attempt}: {answer:?}");
        }
    }

    /// A handler that sent a head hyper cannot read did answer: the fault
    /// is in its answer, not in its being there.
    #[tokio::test]
    async fn a_malformed_answer_is_told_as_answered_not_as_no_answer() {
        let (port, _odd) = answering(b"HTTP/1.1 200 OK\r\nx-color: \x1b[31mred\r\ncontent-length: 0\r\n\r\n").await;
        let answer = post_once(port, Duration::from_secs(5)).await;
        assert_eq!(answer.status, None);
        assert_eq!(
            answer.error,
            Some(format!(
                "127.0.0.1:{port} answered with a malformed HTTP head: invalid HTTP header parsed"
            ))
        );
        assert!(!answer.unreached, "the handler had the request");
    }

    #[test]
    fn a_header_value_that_cannot_be_sent_is_an_error() {
        let out = Outgoing {
            method: "POST".into(),
            path: "/".into(),
            headers: vec![Header::new("x-a", b"bad\r\nvalue".to_vec())],
            body: Bytes::new(),
        };
        assert!(build_request(&out, "h:1").is_err());
    }
}
