//! Reaching the relay: URL forms, TLS, the upgrade and the hello exchange.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use http::{HeaderValue, StatusCode};
use portpreview_shared::codec;
use portpreview_shared::message::{
    version_mismatch, ClientMessage, ServerMessage, CONNECT_PATH, MAX_FRAME_BYTES, NAME_HEADER, PROTOCOL_VERSION,
    RESUME_HEADER,
};
use portpreview_shared::sanitize::{escape_str, is_hidden_or_control};
use portpreview_shared::text::shorten;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

use crate::config::Secret;

mod answer;
mod pinned;

/// The client's socket to the relay.
pub type RelaySocket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How long the relay may take to answer the hello.
const WELCOME_TIMEOUT: Duration = Duration::from_secs(10);

/// How long reaching the relay may take: TCP, TLS and the upgrade.
const UPGRADE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the tunnel could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The relay address is not one the client understands.
    #[error("invalid relay address \"{0}\": use ws://, wss://, http:// or https:// followed by host:port (a port from 1 to 65535)")]
    BadUrl(String),
    /// The relay address carries a query or a fragment, which the relay
    /// never reads: a token put there would not be sent either.
    #[error(
        "invalid relay address \"{0}\": a query or fragment is not sent to the relay (a path is, before \
         /_portpreview/connect); give its token with --token or PORTPREVIEW_TOKEN"
    )]
    QueryInUrl(String),
    /// The relay address carries a user or password, which is never sent.
    #[error(
        "the relay address {0:?} carries a user or password, which PortPreview does not send: \
         give the relay's token with --token or PORTPREVIEW_TOKEN"
    )]
    Credentials(String),
    /// The relay wants a token and none was sent (401).
    #[error(
        "this relay requires a token: pass --token, set PORTPREVIEW_TOKEN, or add token = \"…\" to the config file (it goes only to the file's own server)"
    )]
    TokenRequired,
    /// The relay refused the token that was sent (401).
    #[error("the relay refused the token (401): check --token, PORTPREVIEW_TOKEN or the config file's token")]
    Unauthorized,
    /// The name is held by another client, or for one that went away (409).
    #[error("tunnel name {name:?} is taken (409): {why}; ask for another with --name")]
    NameTaken {
        /// The name asked for.
        name: String,
        /// The relay's reason, one line.
        why: String,
        /// When the name is free, when the relay says (a name held for a
        /// client that went away): none while a live client has it.
        free_in: Option<Duration>,
    },
    /// What answered at the relay's address is no relay: a web server, or
    /// the local handler itself.
    #[error("{url} is not a PortPreview relay: it answered {status} where a relay opens a WebSocket; check --server")]
    NotARelay {
        /// The address tried.
        url: String,
        /// What it answered instead.
        status: String,
    },
    /// The relay refused the tunnel after the hello (version, name…).
    #[error("the relay refused the tunnel: {0}")]
    Refused(String),
    /// The relay's answer to the hello is not one this client can use: a
    /// broken or hostile relay, or another program.
    #[error("the relay's answer to the hello cannot be used: {0}")]
    BadWelcome(String),
    /// The relay speaks another protocol version; which side to upgrade.
    #[error("{0}")]
    Incompatible(String),
    /// The token holds what no header can carry: no relay was asked.
    #[error(
        "cannot open the tunnel: the token holds characters a header cannot carry (spaces, control characters or \
         letters past ASCII)"
    )]
    UnsendableToken,
    /// What the client would send cannot be sent: no relay was asked.
    #[error("cannot open the tunnel: {0}")]
    Unsendable(String),
    /// A TLS setting could not be used.
    #[error("TLS setup failed: {0}")]
    Tls(String),
    /// The relay's certificate was refused.
    #[error("the relay's certificate was refused: {0}")]
    Certificate(String),
    /// The address says TLS and the relay speaks plain HTTP, or the other
    /// way round.
    #[error("{url} {why}")]
    WrongScheme {
        /// The address tried.
        url: String,
        /// What answered, and the scheme to use instead.
        why: &'static str,
    },
    /// The relay could not be reached or the socket broke; worth retrying.
    #[error("cannot reach the relay: {0}")]
    Unreachable(String),
    /// The relay, or a proxy in front of it, is busy and says when to come
    /// back (503 with `Retry-After`): its connection cap, say.
    #[error("cannot reach the relay: {told}")]
    Busy {
        /// What answered, one line.
        told: String,
        /// When to try again.
        retry_in: Duration,
    },
    /// The tunnel's session panicked: a bug in PortPreview, not something
    /// the user can change.
    #[error("internal error in the tunnel, which stopped: {0}")]
    Internal(String),
}

impl ConnectError {
    /// True when retrying cannot help: the user must change something.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, ConnectError::Unreachable(_) | ConnectError::Busy { .. })
    }

    /// How long the relay asked the client to wait before it asks again, when
    /// it said: a name held for a client that went away, or a busy relay.
    pub fn told_to_wait(&self) -> Option<Duration> {
        match self {
            ConnectError::NameTaken { free_in, .. } => *free_in,
            ConnectError::Busy { retry_in, .. } => Some(*retry_in),
            _ => None,
        }
    }
}

/// The tunnel the relay granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Welcome {
    /// Tunnel name.
    pub name: String,
    /// Public URL callers use.
    pub public_url: String,
    /// Secret that gets the name back after a disconnect.
    pub resume: Secret,
}

/// Everything needed to open (and reopen) a tunnel.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// `ws(s)://host:port/_portpreview/connect`.
    pub url: String,
    /// Bearer token, if the relay wants one.
    pub token: Option<Secret>,
    /// Name to ask for.
    pub name: Option<String>,
    /// Resume secret of the previous session, proving the name is ours.
    pub resume: Option<Secret>,
    /// TLS settings for `wss://`.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// Turns any accepted relay address into the WebSocket URL of its connect path.
pub fn relay_url(input: &str) -> Result<String, ConnectError> {
    let shown = crate::userinfo::hidden(input);
    if crate::userinfo::present(input) {
        return Err(ConnectError::Credentials(shown.into_owned()));
    }
    let bad = || ConnectError::BadUrl(shown.to_string());
    let (scheme, rest) = input.split_once("://").ok_or_else(bad)?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "ws" | "http" => "ws",
        "wss" | "https" => "wss",
        _ => return Err(bad()),
    };
    let rest = rest.trim_end_matches('/');
    let rest = rest.strip_suffix(CONNECT_PATH).unwrap_or(rest);
    if rest.contains(' ') || !valid_authority(rest.split(['/', '?', '#']).next().unwrap_or_default()) {
        return Err(bad());
    }
    if let Some(at) = shown.find(['?', '#']) {
        // Shown without it: a token put there is no less a secret.
        let (before, after) = shown.split_at(at);
        let mark = after.chars().next().unwrap_or('?');
        return Err(ConnectError::QueryInUrl(format!("{before}{mark}…")));
    }
    Ok(format!("{scheme}://{rest}{CONNECT_PATH}"))
}

/// Whether `authority` is a host with, if any, a port from 1 to 65535. A
/// port past it would otherwise be dropped on the way to the socket, and
/// the client would knock, token and all, on port 80 or 443.
fn valid_authority(authority: &str) -> bool {
    let (host, port) = match authority.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((v6, "")) => (v6, None),
            Some((v6, rest)) => match rest.strip_prefix(':') {
                Some(port) => (v6, Some(port)),
                None => return false,
            },
            None => return false,
        },
        None => match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port_ok = port.is_none_or(|p| p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok_and(|n| n > 0));
    !host.is_empty() && port_ok
}

/// The tunnel `name` by path on the relay at `connect_url` (as
/// [`relay_url`] makes it): `ws://relay:8080/_portpreview/connect` gives
/// `http://relay:8080/t/<name>`.
pub fn path_url(connect_url: &str, name: &str) -> Option<String> {
    let (scheme, rest) = connect_url.split_once("://")?;
    let scheme = match scheme {
        "ws" => "http",
        "wss" => "https",
        _ => return None,
    };
    let base = rest.strip_suffix(CONNECT_PATH)?;
    Some(format!("{scheme}://{base}/t/{name}"))
}

/// TLS settings trusting the web's roots plus the certificates of an
/// optional PEM file: as CAs, and each also as itself, so a self-signed
/// relay certificate marked as a CA is trusted when it is the one given.
pub fn tls_config(ca_cert: Option<&Path>) -> Result<Arc<rustls::ClientConfig>, ConnectError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let mut trusted = None;
    if let Some(path) = ca_cert {
        let mut certs = Vec::new();
        let pem = crate::input_file::read_file(path, crate::input_file::MAX_SETTINGS_FILE)
            .map_err(|e| ConnectError::Tls(format!("cannot read {}: {e}", path.display())))?;
        for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
            let cert = cert.map_err(|e| ConnectError::Tls(format!("{}: {e}", path.display())))?;
            roots
                .add(cert.clone())
                .map_err(|e| ConnectError::Tls(format!("{}: {e}", path.display())))?;
            certs.push(cert);
        }
        if certs.is_empty() {
            return Err(ConnectError::Tls(format!(
                "{} holds no PEM certificate",
                path.display()
            )));
        }
        trusted = Some(pinned::Trusted {
            file: Arc::from(path),
            certs,
        });
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let web_pki = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| ConnectError::Tls(e.to_string()))?;
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ConnectError::Tls(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(pinned::Verifier::new(web_pki, trusted)))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Bytes tungstenite reads at a time. It zeroes that much of its buffer
/// before every read, whatever comes: at its default of 128 KiB, for a
/// webhook of 1 KiB, that zeroing was 4.7% of the client's time at 1
/// concurrent. 32 KiB leaves it at 1.2%, and a 64 KiB chunk takes three
/// reads instead of one (1 MiB bodies at 4 concurrent cost the same).
const READ_BUFFER: usize = 32 * 1024;

/// WebSocket limits: nothing the relay sends can make a frame bigger than
/// the protocol allows.
pub fn websocket_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(MAX_FRAME_BYTES))
        .max_frame_size(Some(MAX_FRAME_BYTES))
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(128 * 1024)
        .max_write_buffer_size(4 * MAX_FRAME_BYTES)
}

/// Opens the socket, says hello and waits for the relay's welcome.
pub async fn connect(options: &ConnectOptions) -> Result<(RelaySocket, Welcome), ConnectError> {
    let mut request = options
        .url
        .as_str()
        .into_client_request()
        .map_err(|_| ConnectError::BadUrl(options.url.clone()))?;
    if let Some(token) = &options.token {
        // The handshake reads each header back as ASCII text: a letter past
        // ASCII would fail it later, with the whole header, token and all,
        // in the error.
        let value = Some(token.expose())
            .filter(|token| token.bytes().all(|b| b.is_ascii_graphic()))
            .and_then(|token| HeaderValue::from_str(&format!("Bearer {token}")).ok())
            .ok_or(ConnectError::UnsendableToken)?;
        request.headers_mut().insert(http::header::AUTHORIZATION, value);
    }
    if let Some(name) = &options.name {
        if let Ok(value) = HeaderValue::from_str(name) {
            request.headers_mut().insert(NAME_HEADER, value);
        }
    }
    if let Some(resume) = &options.resume {
        if let Ok(value) = HeaderValue::from_str(resume.expose()) {
            request.headers_mut().insert(RESUME_HEADER, value);
        }
    }
    let connector = options.tls.clone().map(Connector::Rustls);
    let upgrade = tokio_tungstenite::connect_async_tls_with_config(request, Some(websocket_config()), true, connector);
    // A relay behind a black hole would otherwise hold each attempt for the
    // system's connect timeout, minutes, before the backoff even starts.
    let (mut socket, _) = tokio::time::timeout(UPGRADE_TIMEOUT, upgrade)
        .await
        .map_err(|_| {
            ConnectError::Unreachable(format!(
                "{} (no answer within {})",
                options.url,
                portpreview_shared::duration::format_duration(UPGRADE_TIMEOUT)
            ))
        })?
        .map_err(|err| match upgrade_error(err, options) {
            ConnectError::Unreachable(why) => ConnectError::Unreachable(format!("{} ({why})", options.url)),
            ConnectError::Busy { told, retry_in } => ConnectError::Busy {
                told: format!("{} ({told})", options.url),
                retry_in,
            },
            other => other,
        })?;
    if let Some(Err(err)) = tcp_of(&socket).map(portpreview_shared::unsent::keep_little_unsent) {
        tracing::debug!(%err, "TCP_NOTSENT_LOWAT not set");
    }

    let hello = ClientMessage::Hello {
        protocol: PROTOCOL_VERSION,
        client_version: env!("CARGO_PKG_VERSION").to_string(),
        name: options.name.clone(),
    };
    // Only a name far over any the relay accepts makes the hello too large.
    let hello =
        codec::encode(&hello, &[]).map_err(|e| ConnectError::Unsendable(format!("the hello cannot be sent: {e}")))?;
    socket
        .send(Message::Binary(hello.into()))
        .await
        .map_err(|e| ConnectError::Unreachable(e.to_string()))?;
    let welcome = tokio::time::timeout(WELCOME_TIMEOUT, read_welcome(&mut socket))
        .await
        .map_err(|_| ConnectError::Unreachable("the relay did not answer the hello".into()))??;
    Ok((socket, welcome))
}

/// The TCP connection under the relay's socket, in TLS or not.
fn tcp_of(socket: &RelaySocket) -> Option<&TcpStream> {
    match socket.get_ref() {
        MaybeTlsStream::Rustls(tls) => Some(tls.get_ref().0),
        MaybeTlsStream::Plain(tcp) => Some(tcp),
        // The enum is open to transports this client never builds.
        _ => None,
    }
}

async fn read_welcome(socket: &mut RelaySocket) -> Result<Welcome, ConnectError> {
    while let Some(message) = socket.next().await {
        let message = message.map_err(|err| match err {
            // Reached, and it broke the WebSocket protocol: no retry mends that.
            tungstenite::Error::Protocol(_) | tungstenite::Error::Capacity(_) | tungstenite::Error::Utf8(_) => {
                ConnectError::BadWelcome(format!("it broke the WebSocket protocol: {err}"))
            }
            err => ConnectError::Unreachable(err.to_string()),
        })?;
        let frame = match message {
            Message::Binary(frame) => frame,
            // Only a `Refused` message says the relay will not serve us; a
            // close here is a relay going away (a restart), worth retrying.
            Message::Close(close) => {
                let reason = close.map(|c| c.reason.to_string()).unwrap_or_default();
                return Err(ConnectError::Unreachable(if reason.is_empty() {
                    "the relay closed the socket during the hello".into()
                } else {
                    format!("the relay closed the socket during the hello: {reason}")
                }));
            }
            _ => continue,
        };
        let (message, _) =
            codec::decode::<ServerMessage>(frame).map_err(|e| ConnectError::BadWelcome(e.to_string()))?;
        let quoted = |text: &str| format!("\"{}\"", shorten(&escape_str(text), MAX_QUOTED));
        return match message {
            // The relay refuses a client of another protocol; one that
            // welcomes it anyway would misread every frame after (its
            // names and URLs included).
            ServerMessage::Welcome { protocol, .. } if protocol != PROTOCOL_VERSION => Err(ConnectError::Incompatible(
                version_mismatch(env!("CARGO_PKG_VERSION"), PROTOCOL_VERSION, protocol),
            )),
            // The URL is printed and drawn as it came: a relay must not
            // get to write to the user's terminal, nor hide a character in
            // the address the user copies.
            ServerMessage::Welcome { public_url, .. }
                if public_url.chars().any(|c| c.is_whitespace() || is_hidden_or_control(c))
                    || !(public_url.starts_with("http://") || public_url.starts_with("https://"))
                    || public_url.len() > MAX_PUBLIC_URL =>
            {
                Err(ConnectError::BadWelcome(format!(
                    "a public URL that is not one, {}",
                    quoted(&public_url)
                )))
            }
            // As must a name that is not one: it is printed too, and sent
            // back in the next hello.
            ServerMessage::Welcome { name, .. } if !portpreview_shared::name::is_valid(&name) => Err(
                ConnectError::BadWelcome(format!("a tunnel name that is not one, {}", quoted(&name))),
            ),
            // Sent back in a header at each reconnect: one no header carries,
            // or one past what a relay takes in its headers, would end the
            // tunnel then, at its first reconnect, in a relay's 431.
            ServerMessage::Welcome { resume, .. }
                if resume.len() > MAX_RESUME || !resume.bytes().all(|b| b.is_ascii_graphic()) =>
            {
                Err(ConnectError::BadWelcome(format!(
                    "a resume secret that cannot be sent back ({})",
                    portpreview_shared::text::counted(resume.len(), "byte", "bytes")
                )))
            }
            ServerMessage::Welcome {
                name,
                public_url,
                resume,
                ..
            } => Ok(Welcome {
                name,
                public_url,
                resume: Secret::new(resume),
            }),
            ServerMessage::Refused { reason } => Err(ConnectError::Refused(shown_reason(&reason))),
            other => Err(ConnectError::BadWelcome(format!(
                "{} instead of a welcome",
                other.kind()
            ))),
        };
    }
    Err(ConnectError::Unreachable(
        "the relay closed the socket during the hello".into(),
    ))
}

fn upgrade_error(err: tungstenite::Error, options: &ConnectOptions) -> ConnectError {
    match err {
        tungstenite::Error::Http(response) => match response.status() {
            // Without a token the fix is to get one, not to check it.
            StatusCode::UNAUTHORIZED if options.token.is_none() => ConnectError::TokenRequired,
            StatusCode::UNAUTHORIZED => ConnectError::Unauthorized,
            StatusCode::CONFLICT => match &options.name {
                Some(name) => ConnectError::NameTaken {
                    name: name.clone(),
                    why: relay_reason(&response),
                    free_in: retry_after(&response),
                },
                // A relay picks a free name when none is asked for: a 409
                // then names no name of the user's.
                None => ConnectError::Refused(format!("{} (409)", relay_reason(&response))),
            },
            // The relay's reason when it gives one (its connection cap); a
            // proxy in front may answer as well (the relay behind it down),
            // so what answered is not called the relay, and its error page
            // is told by its title.
            status if status.is_server_error() => {
                let told = format!("the server there answered {}", answer::told(&response));
                match retry_after(&response) {
                    Some(retry_in) if status == StatusCode::SERVICE_UNAVAILABLE => {
                        ConnectError::Busy { told, retry_in }
                    }
                    _ => ConnectError::Unreachable(told),
                }
            }
            // A relay switches protocols or says no; anything else that
            // answers (a web server, the handler itself) is no relay, and
            // its page says nothing about the tunnel.
            status if status.is_success() || status.is_redirection() => ConnectError::NotARelay {
                url: options.url.clone(),
                status: status.to_string(),
            },
            // The relay's own 404 for a path it does not serve: the address
            // given was not the relay's root.
            StatusCode::NOT_FOUND => ConnectError::Refused(format!(
                "{} answered 404: give --server as the relay's address, with no path but the one it is served \
                 under (none unless a proxy puts it under one)",
                options.url
            )),
            status => ConnectError::Refused(match answer::plain_reason(&response) {
                // The relay's own "expected a WebSocket upgrade" to what this
                // client sent as one: something in between dropped its headers.
                // A TLS relay's answer to a ws:// upgrade.
                Some(reason)
                    if status == StatusCode::BAD_REQUEST
                        && reason.starts_with(portpreview_shared::message::TLS_REQUIRED) =>
                {
                    return ConnectError::WrongScheme {
                        url: options.url.clone(),
                        why: "answered that it serves HTTPS only: give --server as wss:// or https://",
                    };
                }
                Some(reason)
                    if status == StatusCode::BAD_REQUEST && reason.starts_with("expected a WebSocket upgrade") =>
                {
                    format!(
                        "{reason} ({status}): a proxy in front of the relay must pass the Upgrade and Connection \
                         headers on"
                    )
                }
                Some(reason) => format!("{reason} ({status})"),
                None => format!("{} answered {}", options.url, answer::told(&response)),
            }),
        },
        tungstenite::Error::Url(e) => ConnectError::BadUrl(e.to_string()),
        tungstenite::Error::Tls(e) => ConnectError::Tls(e.to_string()),
        // rustls's verdicts arrive as I/O errors; no retry can change them.
        tungstenite::Error::Io(e) if e.kind() == std::io::ErrorKind::ConnectionReset && tls_error(&e).is_none() => {
            ConnectError::Unreachable(CLOSED_UNANSWERED.into())
        }
        tungstenite::Error::Io(e) => match tls_error(&e) {
            Some(rustls::Error::InvalidCertificate(problem)) => ConnectError::Certificate(certificate_problem(problem)),
            Some(rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType)) => {
                ConnectError::WrongScheme {
                    url: options.url.clone(),
                    why: "did not answer in TLS: if the relay serves plain HTTP, give --server as ws:// or http://",
                }
            }
            _ => ConnectError::Unreachable(e.to_string()),
        },
        // What a TLS server sends to a plain HTTP request: no `HTTP/` at all.
        tungstenite::Error::Protocol(tungstenite::error::ProtocolError::HttparseError(httparse::Error::Version))
            if options.url.starts_with("ws://") =>
        {
            ConnectError::WrongScheme {
                url: options.url.clone(),
                why: "did not answer in HTTP: if the relay serves TLS, give --server as wss:// or https://",
            }
        }
        // An answer in HTTP, broken further on (a header value no HTTP
        // allows): TLS is no cure for that.
        tungstenite::Error::Protocol(tungstenite::error::ProtocolError::HttparseError(broken)) => {
            ConnectError::NotARelay {
                url: options.url.clone(),
                status: format!("in malformed HTTP ({broken})"),
            }
        }
        // Every relay speaks HTTP/1.1; an older server is something else.
        tungstenite::Error::Protocol(tungstenite::error::ProtocolError::WrongHttpVersion) => ConnectError::NotARelay {
            url: options.url.clone(),
            status: "in HTTP/1.0".into(),
        },
        // Closed after the upgrade went out, with no answer at all: what
        // a proxy in front does when nothing listens behind it.
        tungstenite::Error::Protocol(tungstenite::error::ProtocolError::HandshakeIncomplete) => {
            ConnectError::Unreachable(CLOSED_UNANSWERED.into())
        }
        other => ConnectError::Unreachable(other.to_string()),
    }
}

/// Why an upgrade got no answer at all, its connection closed or reset
/// instead: what a proxy in front does when nothing listens behind it.
const CLOSED_UNANSWERED: &str =
    "the connection closed before any answer came: a proxy in front of a relay that is down?";

/// The wait a refusal's `Retry-After` asks for, in whole seconds as the
/// relay sends it: at least a second, so that a relay answering 0 is not
/// asked again in a loop.
fn retry_after<T>(response: &tungstenite::http::Response<T>) -> Option<Duration> {
    let seconds: u64 = response
        .headers()
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds.max(1)))
}

/// The rustls error inside an I/O error, if any.
fn tls_error(err: &std::io::Error) -> Option<&rustls::Error> {
    err.get_ref()?.downcast_ref::<rustls::Error>()
}

/// What is wrong with the relay's certificate, and what to do about it.
fn certificate_problem(problem: &rustls::CertificateError) -> String {
    if let Some(file) = pinned::not_the_given_certificate(problem) {
        let file = portpreview_shared::sanitize::escape_str(&file.display().to_string()).into_owned();
        format!(
            "it is not the certificate given with --ca-cert {file}, nor signed by it: check that the file holds \
             the relay's current certificate, or the certificate of the CA that signed it"
        )
    } else if pinned::is_ca_used_as_end_entity(problem) {
        "it is a CA certificate (as `openssl req -x509` makes), which servers may not present; pass it with \
         --ca-cert FILE to trust it as it is"
            .into()
    } else if matches!(problem, rustls::CertificateError::UnknownIssuer) {
        "it is signed by a CA this machine does not trust; pass --ca-cert FILE with the relay's certificate \
         or that of the CA that signed it"
            .into()
    } else {
        problem.to_string()
    }
}

/// Most characters of a relay's own text (a name, a URL, a reason) that an
/// error repeats: more than any real one holds, where a broken relay's may
/// run to the frame's limit.
const MAX_QUOTED: usize = 500;

/// Longest public URL a welcome may give: a real one is a scheme, a host
/// and a name.
const MAX_PUBLIC_URL: usize = 2048;

/// Longest resume secret a welcome may give: a relay's is 32 characters.
const MAX_RESUME: usize = 256;

/// A reason the relay sent, as long as an error line repeats it.
pub(super) fn shown_reason(reason: &str) -> String {
    shorten(reason, MAX_QUOTED)
}

/// The plain-text reason in a relay's refusal, escaped, on one line.
fn relay_reason(response: &tungstenite::http::Response<Option<Vec<u8>>>) -> String {
    let body = response
        .body()
        .as_deref()
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    shorten(&portpreview_shared::sanitize::escape_str(body.trim()), MAX_QUOTED)
}

#[cfg(test)]
mod tests;
