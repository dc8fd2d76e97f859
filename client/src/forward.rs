//! Sending requests to the local target over a small pool of kept-alive
//! HTTP/1 connections.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use portpreview_shared::sync::lock;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::local_tls::{FirstByte, OpenError, TlsError, TlsSign};
use crate::target::{Scheme, Target};
use crate::time::ShortDuration;

/// Body type of requests sent to the local target.
pub type LocalBody = BoxBody<Bytes, std::io::Error>;

/// Connections kept for reuse: as many as the relay lets one tunnel have in
/// flight, so steady concurrency never opens a connection per request.
const MAX_IDLE: usize = 256;
/// A kept connection unused this long before a request may have met the
/// handler's own idle close on its way: none closes sooner.
const MAY_BE_IDLE_CLOSED: Duration = Duration::from_millis(100);
/// How long connecting to the local target may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A kept connection unused this long is closed. Many small handlers
/// (Python's `http.server`, `php -S`) serve one connection at a time: one
/// held open for good would shut out the developer's own curl, and replay.
/// And under the idle limit of the servers that set a short one (gunicorn
/// closes after 2 s, Node and uvicorn after 5 s): a request written as the
/// handler closes the connection is lost with it, and cannot be sent again
/// without perhaps reaching the handler twice.
const IDLE_CLOSE: Duration = Duration::from_secs(1);
/// How often kept connections are looked over for idle ones. Unused ones
/// are closed at once when a request has waited for its answer from one
/// look to the next: such a handler may be serving an unused connection
/// instead, and a burst of deliveries would otherwise be answered 1 s
/// apart. Requests sent since the last look do not count: under a steady
/// load some always wait, each for a moment, and closing the unused
/// connections then only had the next requests open new ones.
const IDLE_CHECK: Duration = Duration::from_millis(100);

/// Why the local target did not answer.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// Nothing accepted the connection.
    #[error("could not reach {target}: {error}{}", not_listening(error))]
    Connect {
        /// Target tried.
        target: String,
        /// The socket error (kept out of `source()`: the message includes it).
        error: std::io::Error,
    },
    /// Connecting took too long.
    #[error("could not reach {0}: connecting timed out")]
    ConnectTimeout(String),
    /// An `https://` target's TLS handshake failed.
    #[error("{}", error.about(target))]
    Tls {
        /// Target tried.
        target: String,
        /// Why.
        error: TlsError,
    },
    /// The handler broke the connection or sent something that is not HTTP.
    #[error("{}{}", failed_answer(target, error, "failed to answer"), hint.as_deref().unwrap_or_default())]
    Http {
        /// Target tried.
        target: String,
        /// What hyper saw (kept out of `source()`: the message includes it).
        error: hyper::Error,
        /// What to try instead, when the failure says the handler speaks TLS.
        hint: Option<String>,
    },
}

/// The likely cause of a refused connection, which the error alone does
/// not say to someone who forgot to start the handler.
fn not_listening(error: &std::io::Error) -> &'static str {
    match error.kind() {
        std::io::ErrorKind::ConnectionRefused => "; is the handler running?",
        _ => "",
    }
}

/// Why an answer's body stopped short, in words: how far it came, and
/// hyper's cause beneath its own "error reading a body from connection",
/// which alone reads as PortPreview's fault ("end of file before message
/// length reached" is the handler closing its connection).
pub fn broke_off(err: &hyper::Error, received: u64, declared: Option<u64>) -> String {
    let cause = std::error::Error::source(err).map_or_else(|| err.to_string(), ToString::to_string);
    let how_far = match declared {
        Some(declared) => format!("{received} of {declared} bytes"),
        None => format!("{received} bytes"),
    };
    format!("the local answer's body broke off after {how_far}: {cause}")
}

/// `who` and what became of the answer `error` ended: a handler whose
/// head hyper could not read did answer, and the fault is in what it
/// sent, so only another cause follows `unanswered` ("did not answer").
pub fn failed_answer(who: impl std::fmt::Display, error: &hyper::Error, unanswered: &str) -> String {
    if error.is_parse_too_large() {
        format!("{who} answered with a head too large to read: {}", explain(error))
    } else if error.is_parse() {
        format!("{who} answered with a malformed HTTP head: {}", explain(error))
    } else {
        format!("{who} {unanswered}: {}", explain(error))
    }
}

/// The most header fields a handler's answer may carry (hyper's default,
/// set here so that what [`explain`] says of it stays true).
const ANSWER_HEAD_FIELDS: usize = 100;
/// How much of a handler's answer is read ahead, its head whole within it
/// (hyper's default too).
const ANSWER_READ_BUFFER: usize = 8192 + 4096 * 100;

/// What went wrong with a local answer, in words where hyper's would
/// mislead: it calls 101 header fields of a few bytes each a head "too large".
fn explain(error: &hyper::Error) -> String {
    if error.is_parse_too_large() {
        format!(
            "more than {ANSWER_HEAD_FIELDS} header fields, or over {}",
            portpreview_shared::text::size(ANSWER_READ_BUFFER as u64)
        )
    } else if let Some(tls) = crate::local_tls::tls_reason(error) {
        // hyper says only "connection error" for what TLS said.
        format!("{error}: {tls}")
    } else {
        error.to_string()
    }
}

/// Why an answer with `status` cannot be passed on, when HTTP does not
/// define it: hyper reads any three digits as a status.
pub fn undefined_status(who: impl std::fmt::Display, status: http::StatusCode) -> Option<String> {
    (status.as_u16() > 599).then(|| {
        format!(
            "{who} answered status {}, which HTTP does not define (100–599)",
            status.as_u16()
        )
    })
}

/// A client for one local target. Dropping it closes its connections.
pub struct Forwarder {
    target: Target,
    /// The target as a URL, written once: every recorded delivery names it.
    url: String,
    /// The target's `host:port` as a Host header, written once.
    host: Option<http::HeaderValue>,
    idle: Arc<Mutex<Vec<Kept>>>,
    /// Requests sent and waiting for their answers' heads.
    waiting: Arc<AtomicUsize>,
    /// Requests sent so far.
    sent: Arc<AtomicUsize>,
    /// Set once the task closing idle connections runs.
    closing_idle: AtomicBool,
    /// Set once the handler has answered: then it speaks the target's
    /// scheme, and a connection it drops later is no hint that it does not.
    answered_once: AtomicBool,
    connections: TaskTracker,
    cancel: CancellationToken,
}

/// Whether the connection an answer came on may carry another request. A
/// handler that refuses a request early (a 401 at a bad signature) may
/// answer without reading its body, and one that then keeps the
/// connection open reads those bytes as the start of the next request:
/// a request with a body that got an error is its connection's last, so
/// no caller's request runs into another's.
pub(crate) fn reusable<B>(response: &Response<B>, with_body: bool) -> bool {
    !(with_body && (response.status().is_client_error() || response.status().is_server_error()))
}

/// A connection kept for reuse, and since when it was last seen in use.
struct Kept {
    sender: SendRequest<LocalBody>,
    since: Instant,
}

impl Forwarder {
    /// A forwarder with no connections yet.
    pub fn new(target: Target) -> Self {
        Self {
            host: http::HeaderValue::from_str(&target.authority()).ok(),
            url: target.to_string(),
            target,
            idle: Arc::new(Mutex::new(Vec::new())),
            waiting: Arc::new(AtomicUsize::new(0)),
            sent: Arc::new(AtomicUsize::new(0)),
            closing_idle: AtomicBool::new(false),
            answered_once: AtomicBool::new(false),
            connections: TaskTracker::new(),
            cancel: CancellationToken::new(),
        }
    }

    /// The local target.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The local target as a URL, as it is displayed.
    pub fn target_url(&self) -> &str {
        &self.url
    }

    /// The Host header that names the local target; none when its
    /// `host:port` is no header value.
    pub fn host_header(&self) -> Option<http::HeaderValue> {
        self.host.clone()
    }

    /// Sends one request and returns the answer's head; its body streams.
    pub async fn send(&self, request: Request<LocalBody>) -> Result<Response<Incoming>, ForwardError> {
        // Counted sent before waiting, and read the other way round, so a
        // request the look counts as waiting is counted as sent too.
        self.sent.fetch_add(1, Ordering::Relaxed);
        self.waiting.fetch_add(1, Ordering::Relaxed);
        // Counted down however the wait ends, the exchange cancelled too.
        let _answered = Answered(&self.waiting);
        self.send_on_a_connection(request).await
    }

    async fn send_on_a_connection(&self, request: Request<LocalBody>) -> Result<Response<Incoming>, ForwardError> {
        let with_body = !http_body::Body::is_end_stream(request.body());
        let (mut fresh, request) = match self.take_idle() {
            Some((mut kept, last_used)) => match kept.try_send_request(request).await {
                Ok(response) => {
                    if reusable(&response, with_body) {
                        self.put_idle(kept);
                    }
                    return Ok(response);
                }
                // The handler closed the kept-alive connection before the
                // request was written (Node closes idle ones after 5 s): the
                // handler never saw it, so one resend on a new connection
                // keeps delivery at most once.
                Err(mut err) => match err.take_message() {
                    Some(unsent) => (Box::pin(self.connect()).await?, unsent),
                    None => return Err(self.kept_answer_failed(err.into_error(), last_used.elapsed())),
                },
            },
            // Boxed: connecting (a TLS handshake perhaps) needs far more
            // state than a request on a kept connection, and every request's
            // future, copied whole when its exchange is spawned, was as
            // large as that.
            None => (Box::pin(self.connect()).await?, request),
        };
        let response = fresh
            .sender
            .send_request(request)
            .await
            .map_err(|error| self.first_answer_failed(error, &fresh.first_byte))?;
        self.answered_once.store(true, Ordering::Relaxed);
        if reusable(&response, with_body) {
            self.put_idle(fresh.sender);
        }
        Ok(response)
    }

    /// The error for a request written on a kept-alive connection last used
    /// `unused` ago, with a hint when the handler closed the connection
    /// instead of answering: a handler crashing on the request does that.
    /// So does one closing connections left unused for less than that
    /// (most wait seconds, longer than they are kept here), when its close
    /// crossed the request on its way.
    fn kept_answer_failed(&self, error: hyper::Error, unused: Duration) -> ForwardError {
        let hint = crate::local_tls::closed_unanswered(&error).then(|| match unused >= MAY_BE_IDLE_CLOSED {
            true => format!(
                "{}; or it closes a connection left unused as long as this one was, {}",
                crate::local_tls::CLOSED_UNANSWERED,
                ShortDuration::from(unused)
            ),
            false => crate::local_tls::CLOSED_UNANSWERED.to_string(),
        });
        self.failed(error, hint)
    }

    /// The error for a fresh connection's first request, with a hint when
    /// a plain `http://` target's handler seems to speak TLS, or to have
    /// crashed on the request.
    fn first_answer_failed(&self, error: hyper::Error, first_byte: &FirstByte) -> ForwardError {
        let answered_before = self.answered_once.load(Ordering::Relaxed);
        let hint = match crate::local_tls::tls_sign(self.target.scheme, &error, first_byte) {
            Some(sign) if !answered_before => {
                let https = Target {
                    scheme: Scheme::Https,
                    ..self.target.clone()
                };
                Some(sign.hint(&format!("forward to {https}")))
            }
            // A handler that has answered in plain HTTP serves no HTTPS.
            Some(TlsSign::Closed) => Some(crate::local_tls::CLOSED_UNANSWERED.to_string()),
            _ => None,
        };
        self.failed(error, hint)
    }

    /// The handler's failure to answer, with what may explain it.
    fn failed(&self, error: hyper::Error, hint: Option<String>) -> ForwardError {
        ForwardError::Http {
            target: self.target.to_string(),
            error,
            hint: hint.map(|hint| format!(" ({hint})")),
        }
    }

    /// A ready kept connection, and when its last request was sent on it.
    fn take_idle(&self) -> Option<(SendRequest<LocalBody>, Instant)> {
        let mut idle = lock(&self.idle);
        // A closed connection is never ready, and the look every
        // IDLE_CHECK lets it go: sweeping the pool here as well cost a
        // pass over every kept connection on every request.
        let ready = idle.iter().position(|kept| kept.sender.is_ready())?;
        let kept = idle.swap_remove(ready);
        Some((kept.sender, kept.since))
    }

    /// A sender goes back at once: it turns ready again when its answer has
    /// been read, and `take_idle` only hands out ready ones.
    fn put_idle(&self, sender: SendRequest<LocalBody>) {
        let mut idle = lock(&self.idle);
        if idle.len() < MAX_IDLE {
            idle.push(Kept {
                sender,
                since: Instant::now(),
            });
        }
    }

    /// Closes kept connections left unused for [`IDLE_CLOSE`], or at once
    /// while requests wait on other connections (see [`IDLE_CHECK`]), from a task
    /// that lives as long as the forwarder: a connection with nothing in
    /// flight ends once its sender is dropped.
    fn close_idle_ones(&self) {
        if self.closing_idle.swap(true, Ordering::Relaxed) {
            return;
        }
        let idle = Arc::downgrade(&self.idle);
        let waiting = Arc::clone(&self.waiting);
        let sent = Arc::clone(&self.sent);
        let cancel = self.cancel.clone();
        self.connections.spawn(async move {
            let mut sent_by_last_look = sent.load(Ordering::Relaxed);
            loop {
                tokio::select! {
                    () = tokio::time::sleep(IDLE_CHECK) => {}
                    () = cancel.cancelled() => return,
                }
                let Some(idle) = idle.upgrade() else { return };
                let waiting_now = waiting.load(Ordering::Relaxed);
                let sent_now = sent.load(Ordering::Relaxed);
                // More wait than were sent since the last look: one of
                // them has waited since before it.
                let stuck = waiting_now > sent_now.wrapping_sub(sent_by_last_look);
                sent_by_last_look = sent_now;
                lock(&idle).retain_mut(|kept| {
                    if kept.sender.is_closed() {
                        return false;
                    }
                    // Still reading its answer's body: busy, not unused.
                    if !kept.sender.is_ready() {
                        kept.since = Instant::now();
                        return true;
                    }
                    !(stuck || kept.since.elapsed() >= IDLE_CLOSE)
                });
            }
        });
    }

    async fn connect(&self) -> Result<Fresh, ForwardError> {
        self.close_idle_ones();
        let target = &self.target;
        let connecting = crate::local_tls::open(target.scheme, &target.host, target.port);
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, connecting)
            .await
            .map_err(|_| match target.scheme {
                Scheme::Https => ForwardError::Tls {
                    target: target.to_string(),
                    error: TlsError::Unanswered(CONNECT_TIMEOUT),
                },
                Scheme::Http => ForwardError::ConnectTimeout(target.to_string()),
            })?
            .map_err(|error| match error {
                OpenError::Connect(error) => ForwardError::Connect {
                    target: target.to_string(),
                    error,
                },
                OpenError::Tls(error) => ForwardError::Tls {
                    target: target.to_string(),
                    error,
                },
            })?;
        let first_byte = stream.first_byte();
        let (sender, connection) = http1::Builder::new()
            .max_headers(ANSWER_HEAD_FIELDS)
            .max_buf_size(ANSWER_READ_BUFFER)
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|error| ForwardError::Http {
                target: target.to_string(),
                error,
                hint: None,
            })?;
        let cancel = self.cancel.clone();
        self.connections.spawn(async move {
            tokio::select! {
                result = connection => {
                    if let Err(err) = result {
                        tracing::debug!(%err, "local connection ended");
                    }
                }
                () = cancel.cancelled() => {}
            }
        });
        Ok(Fresh { sender, first_byte })
    }

    /// Ends every connection to the handler and the task closing idle
    /// ones, and waits until they have ended: a stopped tunnel leaves no
    /// task of its own behind.
    pub async fn close(&self) {
        self.cancel.cancel();
        self.connections.close();
        self.connections.wait().await;
    }
}

/// A connection just opened, before its first request.
struct Fresh {
    sender: SendRequest<LocalBody>,
    first_byte: FirstByte,
}

/// Counts a waiting request down when dropped.
struct Answered<'a>(&'a AtomicUsize);

impl Drop for Answered<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.cancel.cancel();
        self.connections.close();
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::{BodyExt, Empty};

    use super::*;
    use crate::raw_handler::answering;

    /// What a tunnelled delivery records when its handler answers with a
    /// head hyper cannot read: an answer, malformed, not none.
    #[tokio::test]
    async fn a_malformed_local_answer_is_told_as_answered() {
        let (port, _odd) = answering(b"HTTP/1.1 200 OK\r\nx-color: \x1b[31mred\r\ncontent-length: 0\r\n\r\n").await;
        let forwarder = Forwarder::new(Target::parse(&format!("127.0.0.1:{port}")).unwrap());
        let body = Empty::<Bytes>::new().map_err(|never| match never {}).boxed();
        let request = Request::builder().uri("/hook").body(body).unwrap();
        let err = forwarder.send(request).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("http://127.0.0.1:{port} answered with a malformed HTTP head: invalid HTTP header parsed")
        );
    }

    /// A kept-alive connection to the handler, and the task that closes
    /// idle ones, end when the forwarder closes, and it waits for them.
    #[tokio::test]
    async fn closing_ends_the_connections_it_keeps() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let handler = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut head = [0u8; 4096];
            let _ = tokio::io::AsyncReadExt::read(&mut socket, &mut head).await;
            let answer = b"HTTP/1.1 204 No Content\r\n\r\n";
            tokio::io::AsyncWriteExt::write_all(&mut socket, answer).await.unwrap();
            // Kept open: the connection stays until the forwarder ends it.
            let _ = tokio::io::AsyncReadExt::read(&mut socket, &mut head).await;
        });
        let forwarder = Forwarder::new(Target::parse(&format!("127.0.0.1:{port}")).unwrap());
        let body = Empty::<Bytes>::new().map_err(|never| match never {}).boxed();
        let request = Request::builder().uri("/hook").body(body).unwrap();
        let answer = forwarder.send(request).await.unwrap();
        assert_eq!(answer.status(), 204);
        drop(answer);
        assert!(!forwarder.connections.is_empty(), "the connection is kept");
        forwarder.close().await;
        assert!(forwarder.connections.is_empty());
        let closed = tokio::time::timeout(std::time::Duration::from_secs(10), handler).await;
        assert!(closed.is_ok(), "the handler's connection is still open");
    }
}
