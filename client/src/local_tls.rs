//! Opening a connection to a local handler: TCP, then TLS for an
//! `https://` target; and reading a failed first exchange for a handler
//! spoken to in the wrong scheme.

mod config;
mod discard;

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use portpreview_shared::duration::format_duration;
use rustls::pki_types::ServerName;
use rustls::InvalidMessage;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::target::Scheme;
use discard::DiscardsAfterReset;

/// Why a connection to the handler could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Nothing accepted the TCP connection.
    #[error("{0}")]
    Connect(io::Error),
    /// TCP connected, TLS did not.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// Why the TLS handshake with an `https://` handler failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TlsError {
    /// The handler answered the TLS hello with something that is not TLS:
    /// it speaks plain HTTP.
    #[error("the handler did not answer in TLS: is it an http:// handler?")]
    NotTls,
    /// The handshake failed, for rustls's reason.
    #[error("the TLS handshake failed: {0}")]
    Handshake(String),
    /// No TLS connection within the time given. Once a handshake is part of
    /// connecting, a port that takes the connection and then says nothing
    /// (a stuck handler) looks the same as one that never took it.
    #[error("no TLS connection within {}", format_duration(*.0))]
    Unanswered(std::time::Duration),
}

impl TlsError {
    /// The error as one line naming `target`.
    pub fn about(&self, target: &str) -> String {
        match self {
            Self::NotTls => format!("{target} did not answer in TLS: is it an http:// handler?"),
            Self::Handshake(reason) => format!("the TLS handshake with {target} failed: {reason}"),
            Self::Unanswered(limit) => format!(
                "could not reach {target}: no TLS connection within {}: the port took no connection, \
                 or never answered the TLS handshake",
                format_duration(*limit)
            ),
        }
    }

    /// The TLS error an I/O error carries, if it does.
    pub fn within(error: &io::Error) -> Option<&Self> {
        error.get_ref()?.downcast_ref()
    }
}

/// A connection to a local handler, plain or TLS, that notes the first
/// byte it reads.
pub struct LocalStream {
    inner: Inner,
    first_byte: FirstByte,
}

/// The socket beneath, plain or TLS, discards what is written to a
/// handler that has reset it: see [`discard`].
enum Inner {
    Plain(DiscardsAfterReset<TcpStream>),
    Tls(Box<TlsStream<DiscardsAfterReset<TcpStream>>>),
}

impl Inner {
    /// The TCP connection, under TLS or not.
    fn tcp(&self) -> &TcpStream {
        match self {
            Inner::Plain(tcp) => tcp.get_ref(),
            Inner::Tls(tls) => tls.get_ref().0.get_ref(),
        }
    }
}

/// Acknowledges what `tcp` has received at once. A handler that writes
/// its head and its body apart with Nagle's algorithm on (Python's
/// `http.server`, Werkzeug, Flask's dev server) sends the body only once
/// the head is acknowledged, and Linux delays that ack by up to 40 ms on a
/// connection kept alive, as the tunnel keeps them: every such answer
/// took 40 ms longer through the tunnel than from a caller on a new
/// connection. One call per read that brought bytes.
#[cfg(target_os = "linux")]
fn ack_at_once(tcp: &TcpStream) {
    let _ = rustix::net::sockopt::set_tcp_quickack(tcp, true);
}

#[cfg(not(target_os = "linux"))]
fn ack_at_once(_tcp: &TcpStream) {}

/// The first byte a connection read, shared with whoever reads its errors.
#[derive(Debug, Clone, Default)]
pub struct FirstByte(Arc<AtomicU16>);

impl FirstByte {
    /// The byte, once one came.
    pub fn get(&self) -> Option<u8> {
        let seen = self.0.load(Ordering::Relaxed);
        (seen != 0).then_some(seen as u8)
    }

    fn note(&self, byte: u8) {
        // Every read passes here: after the first, a load and nothing more.
        if self.0.load(Ordering::Relaxed) == 0 {
            self.0.store(0x100 | u16::from(byte), Ordering::Relaxed);
        }
    }
}

impl LocalStream {
    /// A handle on the first byte this connection reads.
    pub fn first_byte(&self) -> FirstByte {
        self.first_byte.clone()
    }
}

/// Connects to `host` and `port` as [`crate::target::connect`] does, then,
/// for [`Scheme::Https`], shakes hands in TLS.
pub async fn open(scheme: Scheme, host: &str, port: u16) -> Result<LocalStream, OpenError> {
    let tcp = crate::target::connect(host, port).await.map_err(OpenError::Connect)?;
    // Webhook bodies are small: waiting to coalesce them only adds latency.
    let _ = tcp.set_nodelay(true);
    let inner = match scheme {
        Scheme::Http => Inner::Plain(DiscardsAfterReset::new(tcp)),
        Scheme::Https => Inner::Tls(Box::new(handshake(tcp, host).await?)),
    };
    Ok(LocalStream {
        inner,
        first_byte: FirstByte::default(),
    })
}

async fn handshake(tcp: TcpStream, host: &str) -> Result<TlsStream<DiscardsAfterReset<TcpStream>>, TlsError> {
    let name = server_name(host)?;
    let peer = tcp.peer_addr().map_err(|err| TlsError::Handshake(err.to_string()))?;
    // Which address answered, not which name was asked: `localhost` may
    // resolve anywhere, but a loopback peer is on this machine.
    let config = match peer.ip().to_canonical().is_loopback() {
        true => config::loopback(),
        false => config::web(),
    }
    .map_err(|err| TlsError::Handshake(err.to_string()))?;
    tokio_rustls::TlsConnector::from(config)
        .connect(name, DiscardsAfterReset::new(tcp))
        .await
        .map_err(handshake_error)
}

/// The name sent as SNI: the host name, or an address as an address.
fn server_name(host: &str) -> Result<ServerName<'static>, TlsError> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    // A zone (`fe80::1%eth0`) names an interface, not the server.
    let bare = bare.split_once('%').map_or(bare, |(address, _)| address);
    let bare = bare.strip_suffix('.').unwrap_or(bare);
    ServerName::try_from(bare.to_string())
        .map_err(|_| TlsError::Handshake(format!("{host} is not a name a certificate can hold")))
}

fn handshake_error(error: io::Error) -> TlsError {
    match error.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
        // What a plain HTTP answer ("HTTP/1.1 400") reads as in a TLS record header.
        Some(rustls::Error::InvalidMessage(
            InvalidMessage::InvalidContentType | InvalidMessage::UnknownProtocolVersion,
        )) => TlsError::NotTls,
        Some(reason) => TlsError::Handshake(reason.to_string()),
        None if error.kind() == io::ErrorKind::UnexpectedEof => {
            TlsError::Handshake("the handler closed the connection".into())
        }
        None => TlsError::Handshake(error.to_string()),
    }
}

/// What the failed first request on a fresh connection to a plain
/// `http://` target says of a handler that may speak TLS: its answer began
/// with a TLS record (an alert, as rustls sends to a stranger), or it
/// closed or reset the connection before sending a byte, as Node and
/// Kestrel do, and as a handler that crashed on the request does too. A
/// connection that has answered before is never read this way: a
/// kept-alive one closed between requests says nothing of its scheme.
pub fn tls_sign(scheme: Scheme, error: &hyper::Error, first_byte: &FirstByte) -> Option<TlsSign> {
    if scheme != Scheme::Http {
        return None;
    }
    match first_byte.get() {
        // Change cipher spec, alert, handshake, application data.
        Some(byte) => (error.is_parse() && (0x14..=0x17).contains(&byte)).then_some(TlsSign::Answered),
        None => closed_unanswered(error).then_some(TlsSign::Closed),
    }
}

/// What a connection the handler closed where its answer was due says of
/// it. Until the handler has answered once, a fresh connection's hint
/// goes on to name HTTPS too ([`TlsSign::hint`]).
pub const CLOSED_UNANSWERED: &str =
    "it closed the connection before answering, as a handler that crashed on the request does: see its log";

/// Why a plain `http://` handler may be one that serves HTTPS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsSign {
    /// It answered with a TLS record.
    Answered,
    /// It closed the connection before a byte of answer.
    Closed,
}

impl TlsSign {
    /// A hint that ends by pointing to `https` ("forward to https://…",
    /// "give --target an https:// URL: https://…").
    pub fn hint(self, to_https: &str) -> String {
        match self {
            TlsSign::Answered => format!("it answered in TLS: {to_https}"),
            // Both close alike; only the handler's log tells them apart.
            TlsSign::Closed => format!(
                "it closed the connection before answering, as a handler that crashed on the request does, or one \
                 serving HTTPS: see its log, or {to_https}"
            ),
        }
    }
}

/// What TLS said, when it ended an exchange with an `https://` handler:
/// an alert it sent, or a record that failed. A handler asking for a
/// client certificate (TLS 1.3 tells only after the handshake) is named.
pub fn tls_reason(error: &hyper::Error) -> Option<String> {
    let mut cause = std::error::Error::source(error);
    while let Some(inner) = cause {
        let tls = inner
            .downcast_ref::<rustls::Error>()
            .or_else(|| inner.downcast_ref::<io::Error>()?.get_ref()?.downcast_ref());
        if let Some(tls) = tls {
            return Some(match tls {
                rustls::Error::AlertReceived(rustls::AlertDescription::CertificateRequired) => {
                    "the handler asks for a client certificate, which PortPreview does not send".into()
                }
                other => format!("TLS: {other}"),
            });
        }
        cause = inner.source();
    }
    None
}

/// Whether the handler closed the connection, or reset it, where its
/// answer was due.
pub fn closed_unanswered(error: &hyper::Error) -> bool {
    error.is_incomplete_message() || closed_abruptly(error)
}

fn closed_abruptly(error: &hyper::Error) -> bool {
    let mut cause = std::error::Error::source(error);
    while let Some(inner) = cause {
        if let Some(io) = inner.downcast_ref::<io::Error>() {
            return matches!(
                io.kind(),
                io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::UnexpectedEof
            );
        }
        cause = inner.source();
    }
    false
}

impl AsyncRead for LocalStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = match &mut this.inner {
            Inner::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Inner::Tls(tls) => Pin::new(tls.as_mut()).poll_read(cx, buf),
        };
        if let Some(&byte) = buf.filled().get(before) {
            this.first_byte.note(byte);
            ack_at_once(this.inner.tcp());
        }
        polled
    }
}

impl AsyncWrite for LocalStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().inner {
            Inner::Plain(tcp) => Pin::new(tcp).poll_write(cx, data),
            Inner::Tls(tls) => Pin::new(tls.as_mut()).poll_write(cx, data),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().inner {
            Inner::Plain(tcp) => Pin::new(tcp).poll_write_vectored(cx, data),
            Inner::Tls(tls) => Pin::new(tls.as_mut()).poll_write_vectored(cx, data),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.inner {
            Inner::Plain(tcp) => tcp.is_write_vectored(),
            Inner::Tls(tls) => tls.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().inner {
            Inner::Plain(tcp) => Pin::new(tcp).poll_flush(cx),
            Inner::Tls(tls) => Pin::new(tls.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().inner {
            Inner::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Inner::Tls(tls) => Pin::new(tls.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection kept alive for request after answer is one Linux
    /// delays its acks on; each read that brings bytes acks them at once,
    /// so a handler waiting on the ack of its head sends its body now.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_read_acknowledges_what_came_at_once() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (stream, accepted) = tokio::join!(open(Scheme::Http, "127.0.0.1", port), listener.accept());
        let (mut ours, (mut theirs, _)) = (stream.unwrap(), accepted.unwrap());
        let mut buf = [0u8; 16];
        for _ in 0..8 {
            ours.write_all(b"request").await.unwrap();
            theirs.read_exact(&mut buf[..7]).await.unwrap();
            theirs.write_all(b"answer").await.unwrap();
            ours.read_exact(&mut buf[..6]).await.unwrap();
            assert!(rustix::net::sockopt::tcp_quickack(ours.inner.tcp()).unwrap());
        }
    }

    #[test]
    fn sni_names_the_host_or_its_address() {
        assert!(matches!(server_name("localhost"), Ok(ServerName::DnsName(_))));
        assert!(matches!(server_name("localhost."), Ok(ServerName::DnsName(_))));
        assert!(matches!(server_name("127.0.0.1"), Ok(ServerName::IpAddress(_))));
        assert!(matches!(server_name("[::1]"), Ok(ServerName::IpAddress(_))));
        assert!(matches!(server_name("[fe80::1%eth0]"), Ok(ServerName::IpAddress(_))));
    }

    #[test]
    fn a_plain_http_answer_to_the_hello_is_named_as_such() {
        let corrupt = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidMessage(InvalidMessage::InvalidContentType),
        );
        assert!(matches!(handshake_error(corrupt), TlsError::NotTls));
        let refused = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let said = handshake_error(refused).about("https://example.test:443");
        assert!(
            said.starts_with("the TLS handshake with https://example.test:443 failed: invalid peer certificate"),
            "{said}"
        );
    }
}
