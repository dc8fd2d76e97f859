//! Reaching the relay: URL forms, TLS, the upgrade and the hello exchange.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use http::HeaderValue;
use portpreview_shared::codec;
use portpreview_shared::message::{
    version_mismatch, ClientMessage, ServerMessage, MAX_FRAME_BYTES, NAME_HEADER, PROTOCOL_VERSION, RESUME_HEADER,
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
mod error;
mod pinned;
mod tls;
mod upgrade;
mod url;

pub use error::ConnectError;
pub use tls::tls_config;
use upgrade::upgrade_error;
pub use url::{path_url, relay_url};

/// The client's socket to the relay.
pub type RelaySocket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How long the relay may take to answer the hello.
const WELCOME_TIMEOUT: Duration = Duration::from_secs(10);

/// How long reaching the relay may take: TCP, TLS and the upgrade.
const UPGRADE_TIMEOUT: Duration = Duration::from_secs(10);

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
            // A PortPreview relay speaks in binary frames only: text is
            // another WebSocket service at the address.
            Message::Text(text) => {
                return Err(ConnectError::BadWelcome(format!(
                    "it answered with text, \"{}\", where a PortPreview relay answers in binary: is that address \
                     a PortPreview relay?",
                    shorten(&escape_str(&text), MAX_QUOTED)
                )))
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

#[cfg(test)]
mod tests;
