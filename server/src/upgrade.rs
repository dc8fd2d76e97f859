//! The client's door: checks an upgrade to `/_portpreview/connect` and
//! hands the WebSocket to a session.

use std::sync::Arc;

use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use portpreview_shared::message::{MAX_FRAME_BYTES, NAME_HEADER, RESUME_HEADER};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::WebSocketStream;
use tracing::Instrument;

use crate::body::{answer, closing, RelayBody};
use crate::control::{self, SessionContext};
use crate::ingress::{ConnInfo, Relay};
use crate::names;
use crate::public_url::PublicUrl;
use crate::registry::{ClaimError, Owner};

/// Bytes tungstenite buffers before writing to the socket.
const WRITE_BUFFER: usize = 128 * 1024;

/// Bytes tungstenite reads at a time. It keeps this much of its read buffer
/// filled in for every connection, so it is what an idle tunnel costs; a
/// webhook's answer is a few hundred bytes, so small reads lose little.
const READ_BUFFER: usize = 4 * 1024;

/// The WebSocket limits of a client connection: no message or frame larger
/// than one protocol frame, a write buffer that cannot grow past a few frames.
pub fn websocket_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(MAX_FRAME_BYTES))
        .max_frame_size(Some(MAX_FRAME_BYTES))
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(WRITE_BUFFER)
        .max_write_buffer_size(WRITE_BUFFER + 2 * MAX_FRAME_BYTES)
        .accept_unmasked_frames(false)
}

fn has_token(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Answers an upgrade request: an error, or 101 with the session spawned.
/// A refused upgrade closes the connection: what tried to open a tunnel
/// sends no other request on it.
pub fn accept(relay: &Arc<Relay>, conn: &Arc<ConnInfo>, req: Request<Incoming>) -> Response<RelayBody> {
    match upgrade(relay, conn, req) {
        Ok(switching) => {
            conn.stall.is_client();
            switching
        }
        // An operator's first question when a teammate's tunnel will not
        // open: who was turned away, and why. What is no WebSocket client
        // at all (a scanner, a browser) is not worth a line each.
        Err(refusal) if refusal.not_a_client => {
            tracing::debug!(peer = %conn.peer, reason = %refusal.reason, "not a WebSocket upgrade");
            refusal.into_response()
        }
        Err(refusal) => {
            // Behind a proxy every peer is the proxy: the token's label
            // says whose client it was, as `tunnel connected` does.
            let token_label = refusal.token.as_deref().map(tracing::field::display);
            tracing::info!(token_label, peer = %conn.peer, status = refusal.status.as_u16(), reason = %refusal.reason, "client refused");
            refusal.into_response()
        }
    }
}

/// Why a WebSocket handshake came without `Upgrade` and `Connection`.
const UPGRADE_HEADERS_LOST: &str = "the WebSocket upgrade arrived without its Upgrade and Connection headers: \
     a proxy in front of the relay must pass both on (nginx: proxy_http_version 1.1, \
     proxy_set_header Upgrade $http_upgrade, proxy_set_header Connection upgrade)";

/// The WebSocket version the relay speaks (RFC 6455).
const WEBSOCKET_VERSION: &str = "13";

/// What the relay answers in place of a 101.
struct Refusal {
    status: StatusCode,
    reason: String,
    /// A header the status calls for (the version spoken, the auth scheme).
    header: Option<(header::HeaderName, &'static str)>,
    /// Seconds until a held name is free, sent as `Retry-After`.
    retry_after: Option<u64>,
    /// Whether what was refused was no WebSocket upgrade at all.
    not_a_client: bool,
    /// The label of the valid token the client sent, once it is known.
    token: Option<String>,
}

impl Refusal {
    /// The answer, closing the connection: what tried to open a tunnel
    /// sends no other request on it.
    fn into_response(self) -> Response<RelayBody> {
        let mut response = answer(self.status, self.reason);
        let headers = response.headers_mut();
        if let Some((name, value)) = self.header {
            headers.insert(name, HeaderValue::from_static(value));
        }
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        closing(response)
    }
}

fn refuse(status: StatusCode, reason: impl Into<String>) -> Refusal {
    Refusal {
        status,
        reason: reason.into(),
        header: None,
        retry_after: None,
        not_a_client: false,
        token: None,
    }
}

fn upgrade(
    relay: &Arc<Relay>,
    conn: &Arc<ConnInfo>,
    mut req: Request<Incoming>,
) -> Result<Response<RelayBody>, Refusal> {
    let accept_key = handshake(&req)?;
    let headers = req.headers();
    let owner = owner(relay, headers)?;
    let resume = headers
        .get(RESUME_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(wanted) = headers.get(NAME_HEADER) {
        claimable(relay, wanted, owner, resume.as_deref()).map_err(|refusal| Refusal {
            token: token_label(relay, owner),
            ..refusal
        })?;
    }
    let ctx = session_context(relay, conn, headers, owner, resume);
    let on_upgrade = hyper::upgrade::on(&mut req);
    let held = Arc::clone(conn);
    relay.sessions.spawn(
        async move {
            match on_upgrade.await {
                Ok(upgraded) => {
                    let socket = WebSocketStream::from_raw_socket(
                        TokioIo::new(upgraded),
                        Role::Server,
                        Some(websocket_config()),
                    )
                    .await;
                    control::serve(socket, ctx).await;
                }
                Err(err) => tracing::debug!(%err, "upgrade failed"),
            }
            // The connection keeps its place under the connection caps while the
            // session lives.
            drop(held);
        }
        // The session's lines name the peer, as the connection's did.
        .instrument(tracing::Span::current()),
    );
    let mut switching = Response::new(RelayBody::Full(None));
    *switching.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = switching.headers_mut();
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    if let Ok(value) = HeaderValue::from_str(&accept_key) {
        h.insert(header::SEC_WEBSOCKET_ACCEPT, value);
    }
    Ok(switching)
}

/// The WebSocket handshake's own checks (RFC 6455 §4): the accept key when
/// the request is a WebSocket upgrade this relay can take.
fn handshake(req: &Request<Incoming>) -> Result<String, Refusal> {
    let headers = req.headers();
    let key = headers
        .get(header::SEC_WEBSOCKET_KEY)
        .map(|k| derive_accept_key(k.as_bytes()));
    let is_upgrade = req.method() == Method::GET
        && has_token(headers, header::UPGRADE, "websocket")
        && has_token(headers, header::CONNECTION, "upgrade");
    let Some(accept_key) = key.filter(|_| is_upgrade) else {
        // A client's handshake, key and all, that lost its hop-by-hop
        // headers on the way: a proxy that does not pass them on.
        if req.method() == Method::GET && headers.contains_key(header::SEC_WEBSOCKET_KEY) {
            return Err(refuse(StatusCode::BAD_REQUEST, UPGRADE_HEADERS_LOST));
        }
        return Err(Refusal {
            not_a_client: true,
            ..refuse(
                StatusCode::BAD_REQUEST,
                "expected a WebSocket upgrade (portpreview clients connect here)",
            )
        });
    };
    // RFC 6455 §4.1: in HTTP/1.1 or later.
    if req.version() < http::Version::HTTP_11 {
        return Err(refuse(StatusCode::BAD_REQUEST, "a WebSocket upgrade needs HTTP/1.1"));
    }
    // RFC 6455 §4.4: another version is told the one this relay speaks.
    if headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .is_none_or(|v| v != WEBSOCKET_VERSION)
    {
        return Err(Refusal {
            header: Some((header::SEC_WEBSOCKET_VERSION, WEBSOCKET_VERSION)),
            ..refuse(
                StatusCode::UPGRADE_REQUIRED,
                format!("this relay speaks WebSocket version {WEBSOCKET_VERSION} only"),
            )
        });
    }
    if headers.contains_key(header::ORIGIN) {
        return Err(refuse(StatusCode::FORBIDDEN, "browsers may not open tunnels"));
    }
    Ok(accept_key)
}

/// Whose tunnel this is: the token's, when the relay asks for one.
fn owner(relay: &Relay, headers: &HeaderMap) -> Result<Owner, Refusal> {
    let Some(tokens) = &relay.config.tokens else {
        return Ok(None);
    };
    match bearer(headers).and_then(|t| tokens.check(t)) {
        Some(id) => Ok(Some(id)),
        None => Err(Refusal {
            header: Some((header::WWW_AUTHENTICATE, "Bearer")),
            ..refuse(StatusCode::UNAUTHORIZED, "missing or invalid token")
        }),
    }
}

/// The label the logs name `owner`'s token by; tokens themselves are never logged.
fn token_label(relay: &Relay, owner: Owner) -> Option<String> {
    owner.and_then(|id| Some(relay.config.tokens.as_ref()?.label(id).to_string()))
}

/// Refuses a name that is malformed, or not this client's to take, before
/// the upgrade: the client hears why in an HTTP status it can act on.
fn claimable(relay: &Relay, wanted: &HeaderValue, owner: Owner, resume: Option<&str>) -> Result<(), Refusal> {
    let wanted = String::from_utf8_lossy(wanted.as_bytes());
    if let Some(why) = names::invalid_reason(&wanted) {
        return Err(refuse(StatusCode::BAD_REQUEST, names::refusal(&wanted, &why)));
    }
    match relay.registry.check(&wanted, owner, resume) {
        Ok(()) => Ok(()),
        Err(err @ (ClaimError::InUse(_) | ClaimError::HeldForAnother { .. })) => {
            Err(refuse(StatusCode::CONFLICT, err.to_string()))
        }
        // When it is free, in a header a client can wait on: the one that
        // held it, started again after a crash, waits for its own name.
        Err(err @ ClaimError::Held { seconds_left, .. }) => Err(Refusal {
            retry_after: Some(seconds_left),
            ..refuse(StatusCode::CONFLICT, err.to_string())
        }),
        Err(err @ ClaimError::Reserved(_)) => Err(refuse(StatusCode::FORBIDDEN, err.to_string())),
    }
}

fn session_context(
    relay: &Relay,
    conn: &ConnInfo,
    headers: &HeaderMap,
    owner: Owner,
    resume: Option<String>,
) -> SessionContext {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_graphic() && b != b'/'))
        .map_or_else(|| conn.local.to_string(), str::to_string);
    let token_label = token_label(relay, owner);
    SessionContext {
        peer: conn.peer,
        registry: Arc::clone(&relay.registry),
        owner,
        token_label,
        resume,
        public_url: PublicUrl {
            scheme: if conn.https { "https" } else { "http" },
            domain: relay.config.domain.clone(),
            host,
            proxied_port: relay.config.behind_https.then_some(conn.local.port()),
        },
        // The Hello is the upgraded socket's first request head: the same
        // time allowed as a caller's head, so one setting bounds how long
        // any connection may sit silent before saying what it wants.
        hello_timeout: relay.config.header_read_timeout,
        answer_budget: Arc::clone(&relay.answer_budget),
        ping_interval: relay.config.ping_interval,
        dead_after: relay.config.dead_after,
        name_grace: relay.config.grace,
        max_in_flight: relay.config.max_in_flight,
        drain_timeout: relay.config.drain_timeout,
        shutdown: relay.shutdown.clone(),
        cut_short: relay.cut_short.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_from_authorization_only() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer(&headers), None);
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer  abc "));
        assert_eq!(bearer(&headers), Some("abc"));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(bearer(&headers), None);
    }

    #[test]
    fn websocket_limits_are_consistent() {
        let config = websocket_config();
        assert!(config.max_write_buffer_size > config.write_buffer_size + MAX_FRAME_BYTES);
        assert_eq!(config.max_message_size, Some(MAX_FRAME_BYTES));
    }
}
