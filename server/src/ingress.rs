//! The relay's HTTP face: routing each request to a tunnel, the client's
//! door, or one of the relay's own short answers.

use std::net::SocketAddr;
use std::sync::Arc;

use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode, Version};
use hyper::body::{Body, Incoming};
use portpreview_shared::message::CONNECT_PATH;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::answer_budget::AnswerBudget;
use crate::body::{answer, closing, OwnAnswer, RelayBody};
use crate::forward::{forward, ForwardLimits};
use crate::headers::{caller_host, forwarded_element, Hop};
use crate::headscan::Verdicts;
use crate::limits::Slot;
use crate::linger::LingerAsk;
use crate::names;
use crate::registry::{Registry, Route};
use crate::turned_away::{declared_body_size, TurnedAway};
use crate::upgrade;
use crate::write_stall::StallNote;
use crate::RelayConfig;

/// Path prefix of tunnel traffic that works without DNS.
pub const TUNNEL_PREFIX: &str = "/t/";

/// What every connection of one relay shares.
pub struct Relay {
    /// The relay's settings.
    pub config: RelayConfig,
    /// Names and where their requests go.
    pub registry: Arc<dyn Registry>,
    /// Fires when the relay shuts down.
    pub shutdown: CancellationToken,
    /// Fires when the operator cuts the shutdown's drain short.
    pub cut_short: CancellationToken,
    /// Client sessions, waited for on shutdown.
    pub sessions: TaskTracker,
    /// Answer bytes held for callers, relay-wide.
    pub(crate) answer_budget: Arc<AnswerBudget>,
}

/// What the relay knows about one caller connection.
pub struct ConnInfo {
    /// The caller's address.
    pub peer: SocketAddr,
    /// The caller's IP address as text, for `X-Forwarded-For`: written
    /// once per connection rather than for each of its requests.
    pub peer_ip: String,
    /// The relay's address this connection reached.
    pub local: SocketAddr,
    /// True when the caller reached the relay over HTTPS: TLS here, or
    /// at a proxy in front ([`crate::RelayConfig::behind_https`]).
    pub https: bool,
    /// Framing verdicts of this connection's request heads.
    pub verdicts: Arc<Verdicts>,
    /// This connection's place under the connection caps.
    pub slot: Slot,
    /// Makes this connection's close read what its caller still sends.
    pub linger: LingerAsk,
    /// Shared with the watch on this connection's writes.
    pub(crate) stall: Arc<StallNote>,
}

/// Where a request goes, by its Host and path alone.
#[derive(Debug)]
pub enum Destination {
    /// To the tunnel of this name, as this origin-form target.
    Tunnel {
        /// The tunnel's name.
        name: String,
        /// Path and query the client forwards.
        target: String,
        /// What the relay took off the caller's path to route it
        /// (`/t/<name>`); none when the Host named the tunnel.
        prefix: Option<String>,
    },
    /// The client endpoint, where tunnels are opened.
    Connect,
    /// `/healthz`.
    Health,
    /// Under `/t/`, but no tunnel could have the name (`/t/ALPHA/`): why.
    NoSuchTunnel(String),
    /// None of the above: 404.
    Nowhere,
}

/// The relay's answer for a tunnel name nobody holds: the name is a
/// valid one, and safe to write back.
fn no_such_tunnel(name: &str) -> String {
    format!("no such tunnel: nothing is connected as {name}")
}

/// Answers one request.
pub async fn handle(relay: &Arc<Relay>, conn: &Arc<ConnInfo>, req: Request<Incoming>) -> Response<RelayBody> {
    let has_body = !req.body().is_end_stream();
    // An access line for an operator asking why a sender got a 504, at
    // debug: taken only when asked for, it costs the forwarding nothing.
    let access = tracing::enabled!(tracing::Level::DEBUG).then(|| Access::of(&req));
    let response = respond(relay, conn, req, has_body).await;
    if let Some(access) = access {
        access.log(response.status());
    }
    // The caller may be writing its whole body before it reads a byte of
    // the answer: closing on the unread rest would reset the connection,
    // and the answer with it. A caller still waiting for `100 Continue`
    // reads the answer instead and closes, which ends the reading at once.
    if has_body && closes(&response) {
        conn.linger.ask();
    }
    response
}

/// What the access line says of a request, taken before it is handled.
struct Access {
    started: std::time::Instant,
    method: http::Method,
    host: String,
    target: String,
}

impl Access {
    fn of<B>(req: &Request<B>) -> Self {
        let text =
            |value: &[u8]| portpreview_shared::sanitize::escape_str(&String::from_utf8_lossy(value)).into_owned();
        Self {
            started: std::time::Instant::now(),
            method: req.method().clone(),
            host: text(req.headers().get(header::HOST).map_or(&b""[..], HeaderValue::as_bytes)),
            // The query may carry a sender's token (`?token=…`), which the
            // client masks on screen: the log keeps only that there was one.
            target: match req.uri().query() {
                Some(_) => format!("{}?…", text(req.uri().path().as_bytes())),
                None => text(req.uri().path().as_bytes()),
            },
        }
    }

    /// One line when the answer's head is ready (its body may stream on).
    /// The caller's address is the connection span's.
    fn log(self, status: StatusCode) {
        tracing::debug!(
            method = %self.method,
            host = %self.host,
            target = %self.target,
            status = status.as_u16(),
            ms = format_args!("{:.1}", self.started.elapsed().as_secs_f64() * 1000.0),
            "request"
        );
    }
}

/// Whether `response` closes its connection.
fn closes<B>(response: &Response<B>) -> bool {
    response
        .headers()
        .get(header::CONNECTION)
        .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"close"))
}

async fn respond(
    relay: &Arc<Relay>,
    conn: &Arc<ConnInfo>,
    mut req: Request<Incoming>,
    has_body: bool,
) -> Response<RelayBody> {
    let verdict = conn.verdicts.pop();
    if verdict.conflicted {
        return closing(answer(
            StatusCode::BAD_REQUEST,
            "a request may not carry both Content-Length and Transfer-Encoding",
        ));
    }
    let unfit = unfit(&req);
    if unfit.is_none() {
        host_from_target(&mut req);
    }
    let response = match unfit {
        Some((status, why)) => answer(status, why),
        None => match destination(relay.config.domain.as_deref(), &req) {
            Destination::Tunnel { name, target, prefix } => tunnel(relay, conn, req, &name, target, prefix).await,
            Destination::Connect => upgrade::accept(relay, conn, req),
            Destination::Health if matches!(*req.method(), Method::GET | Method::HEAD) => answer(StatusCode::OK, "ok"),
            Destination::Health => {
                let mut refused = answer(StatusCode::METHOD_NOT_ALLOWED, "use GET");
                // RFC 9110 §15.5.6: a 405 lists the methods the resource takes.
                refused
                    .headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
                refused
            }
            Destination::NoSuchTunnel(why) => answer(StatusCode::NOT_FOUND, why),
            Destination::Nowhere => answer(StatusCode::NOT_FOUND, nowhere(relay.config.domain.as_deref())),
        },
    };
    // The relay's own answers may leave the body unread, and hyper then
    // closes the connection without saying so: a caller reusing it would
    // write its next request into a closed socket. Saying so costs only
    // a reconnect, on an error path.
    let unread_body = has_body && response.extensions().get::<OwnAnswer>().is_some();
    // Past a head the scan could not follow, a request carrying both
    // framing headers would go unrefused: the caller gets a fresh
    // connection for the next one instead. A 101 has left HTTP behind.
    let unwatched_next = verdict.last_watched && response.status() != StatusCode::SWITCHING_PROTOCOLS;
    match unread_body || unwatched_next {
        true => closing(response),
        false => response,
    }
}

/// Why a request hyper let through cannot be forwarded as it is (RFC 9112
/// §3.2, §6.1), and the relay's answer: which Host to route by would be a
/// guess, and a body in another coding would reach the handler undecoded
/// under a Content-Length.
fn unfit<B>(req: &Request<B>) -> Option<(StatusCode, String)> {
    let mut hosts = req.headers().get_all(header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (None, _) if req.version() == Version::HTTP_11 => {
            return Some((
                StatusCode::BAD_REQUEST,
                "an HTTP/1.1 request must carry a Host header".into(),
            ))
        }
        (Some(_), Some(_)) => {
            return Some((
                StatusCode::BAD_REQUEST,
                "a request may carry only one Host header".into(),
            ))
        }
        // The handler is told it as X-Forwarded-Host and builds URLs from
        // it: markup or control bytes there are no host (RFC 9112 §3.2).
        (Some(host), None) if !portpreview_shared::host::is_host_header(host.as_bytes()) => {
            return Some((
                StatusCode::BAD_REQUEST,
                "the Host header is not a host name, an IP address or either with a port".into(),
            ))
        }
        _ => {}
    }
    // Both name no resource a handler serves: CONNECT asks for a raw
    // connection, `*` for the server as a whole. Forwarded, both became
    // a request for `/`.
    if req.method() == Method::CONNECT {
        return Some((
            StatusCode::NOT_IMPLEMENTED,
            "CONNECT is not forwarded: the relay carries HTTP requests, not connections".into(),
        ));
    }
    if req
        .uri()
        .scheme_str()
        .is_some_and(|scheme| !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https"))
    {
        return Some((
            StatusCode::BAD_REQUEST,
            "a request target with a scheme must be an http or https URL".into(),
        ));
    }
    if req.uri() == "*" {
        return Some((
            StatusCode::NOT_IMPLEMENTED,
            "a request for * (the server as a whole) is not forwarded: ask for a path, like /".into(),
        ));
    }
    // An absolute-form target's host wins over the Host header
    // ([`host_from_target`]), and is held to the same.
    if let Some(authority) = req.uri().authority() {
        let host = authority
            .as_str()
            .rsplit_once('@')
            .map_or(authority.as_str(), |(_, host)| host);
        if !portpreview_shared::host::is_host_header(host.as_bytes()) {
            return Some((
                StatusCode::BAD_REQUEST,
                "the request target's host is not a host name, an IP address or either with a port".into(),
            ));
        }
    }
    // Looked at on every request: only a refusal allocates.
    let codings = || {
        req.headers()
            .get_all(header::TRANSFER_ENCODING)
            .iter()
            .flat_map(|value| value.as_bytes().split(|&b| b == b','))
            .map(<[u8]>::trim_ascii)
            .filter(|coding| !coding.is_empty())
    };
    let chunked = |coding: &&[u8]| coding.eq_ignore_ascii_case(b"chunked");
    if codings().filter(chunked).count() > 1 {
        return Some((
            StatusCode::BAD_REQUEST,
            "chunked may be applied to a body only once".into(),
        ));
    }
    let other = codings().find(|coding| !chunked(coding))?;
    let shown =
        portpreview_shared::sanitize::escape_str(&String::from_utf8_lossy(other).to_ascii_lowercase()).into_owned();
    Some((
        StatusCode::NOT_IMPLEMENTED,
        format!("transfer coding \"{shown}\" is not supported: send the body chunked, or with a Content-Length"),
    ))
}

/// Makes the host an absolute-form target names (`POST http://shop.relay.test/x`)
/// the request's Host, as RFC 9112 §3.2.2 has it win over the Host header:
/// routing, `X-Forwarded-Host` and a preserved Host then all follow it.
fn host_from_target<B>(req: &mut Request<B>) {
    let Some(host) = req.uri().host() else { return };
    let host = match req.uri().port_u16() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    if let Ok(value) = HeaderValue::from_str(&host) {
        req.headers_mut().insert(header::HOST, value);
    }
}

async fn tunnel(
    relay: &Arc<Relay>,
    conn: &Arc<ConnInfo>,
    mut req: Request<Incoming>,
    name: &str,
    target: String,
    prefix: Option<String>,
) -> Response<RelayBody> {
    let forwarded = req
        .headers()
        .contains_key(header::FORWARDED)
        .then(|| forwarded_element(&conn.peer_ip, conn.https, caller_host(req.headers())));
    let hop = Hop {
        peer: &conn.peer_ip,
        https: conn.https,
        prefix,
        forwarded,
    };
    let tunnel = match relay.registry.route(name) {
        Route::Live(tunnel) => tunnel,
        Route::Reconnecting => return reconnecting(relay, req, name, &target, &hop),
        Route::Unknown => return answer(StatusCode::NOT_FOUND, no_such_tunnel(name)),
    };
    if websocket_handshake(&req) {
        // Told to the client too: a developer whose WebSocket client got
        // this far sees in the tunnel's lines and history why it went no
        // further (once a minute: such clients retry).
        const NOT_FORWARDED: &str =
            "a WebSocket upgrade is not forwarded: the tunnel carries HTTP requests and their answers";
        if tunnel.upgrade_is_news() {
            let (parts, body) = req.into_parts();
            TurnedAway::arriving(&parts, &body, declared_body_size(&parts.headers), &target, &hop).tell(
                StatusCode::NOT_IMPLEMENTED,
                NOT_FORWARDED,
                &[],
                |news, _| tunnel.tell_turned_away(news, &[]),
            );
        }
        return answer(StatusCode::NOT_IMPLEMENTED, NOT_FORWARDED);
    }
    let limits = ForwardLimits {
        max_body: relay.config.max_body,
        timeout: relay.config.request_timeout,
    };
    // The stream learns from it whether its caller was shed, to tell the client so.
    req.extensions_mut().insert(Arc::clone(&conn.stall));
    forward(tunnel, &*relay.registry, name, req, target, &hop, limits).await
}

/// Answers a request for `name`, held while its client reconnects, at
/// once and without reading its body; news of it is kept for the client,
/// whose history would otherwise never hear of the delivery.
fn reconnecting(relay: &Relay, req: Request<Incoming>, name: &str, target: &str, hop: &Hop<'_>) -> Response<RelayBody> {
    // A WebSocket client retries every second or so: its handshakes would
    // fill the news kept for the name and crowd out the webhooks'.
    if websocket_handshake(&req) {
        return answer(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("tunnel {name} is reconnecting"),
        );
    }
    let (parts, body) = req.into_parts();
    let request = TurnedAway::arriving(&parts, &body, declared_body_size(&parts.headers), target, hop);
    crate::reconnecting::answer_held(&*relay.registry, name, &request)
}

/// Whether a request asks to become a WebSocket. The tunnel carries
/// requests and answers, not the connection a WebSocket takes over; with
/// its hop-by-hop Upgrade dropped, the handshake would reach the handler as
/// a plain GET, and the handler's refusal would blame the caller.
fn websocket_handshake<B>(req: &Request<B>) -> bool {
    req.headers()
        .get_all(header::UPGRADE)
        .iter()
        .flat_map(|value| value.as_bytes().split(|&b| b == b','))
        .any(|protocol| {
            let protocol = protocol.trim_ascii();
            protocol
                .get(..9)
                .is_some_and(|name| name.eq_ignore_ascii_case(b"websocket"))
        })
}

/// The 404 for a request that names no tunnel: where tunnels are, the
/// `<name>.<domain>` form too when the relay has a domain.
fn nowhere(domain: Option<&str>) -> String {
    match domain {
        Some(domain) => format!("not found: tunnels live at <name>.{domain} and under /t/<name>/"),
        None => "not found: tunnels live under /t/<name>/".to_owned(),
    }
}

/// Routes `req`: by a `<name>.<domain>` Host when the relay has a domain,
/// else by path, `/t/<name>/…`. The Host and the path are the caller's, so
/// any bytes must route to a valid name or nowhere.
pub fn destination<B>(domain: Option<&str>, req: &Request<B>) -> Destination {
    let uri = req.uri();
    let path = uri.path();
    if let Some(name) = domain.and_then(|d| subdomain(d, req)) {
        let target = uri
            .path_and_query()
            .map_or_else(|| "/".to_string(), |pq| pq.as_str().to_string());
        // Absolute-form request lines carry the scheme and host; the client
        // gets origin-form only.
        let target = if target.starts_with('/') {
            target
        } else {
            format!("/{}", target.trim_start_matches('*'))
        };
        return Destination::Tunnel {
            name,
            target,
            prefix: None,
        };
    }
    if path == CONNECT_PATH {
        return Destination::Connect;
    }
    if path == "/healthz" {
        return Destination::Health;
    }
    let Some(rest) = path.strip_prefix(TUNNEL_PREFIX) else {
        return Destination::Nowhere;
    };
    let (name, tail) = rest.split_once('/').map_or((rest, ""), |(n, t)| (n, t));
    if let Some(why) = names::invalid_reason(name) {
        // The path keeps its case, as a URL's does; the name written in
        // capitals is told how it reads.
        let lower = name.to_ascii_lowercase();
        return Destination::NoSuchTunnel(match names::is_valid(&lower) {
            true => format!("no such tunnel: tunnel names are lowercase, as in /t/{lower}/"),
            false => format!("no such tunnel: {why}"),
        });
    }
    // Put together by hand: `format!` costs several times as much, on
    // every request.
    let query = uri.query();
    let mut target = String::with_capacity(1 + tail.len() + query.map_or(0, |q| 1 + q.len()));
    target.push('/');
    target.push_str(tail);
    if let Some(query) = query {
        target.push('?');
        target.push_str(query);
    }
    Destination::Tunnel {
        name: name.to_string(),
        target,
        prefix: Some([TUNNEL_PREFIX, name].concat()),
    }
}

/// The tunnel name in a `<name>.<domain>` Host, if that is what it is.
fn subdomain<B>(domain: &str, req: &Request<B>) -> Option<String> {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().host())?;
    let host = names::host_name(host).to_ascii_lowercase();
    let domain = domain.trim_end_matches('.').to_ascii_lowercase();
    let label = host.strip_suffix(&domain)?.strip_suffix('.')?;
    names::is_valid(label).then(|| label.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest(domain: Option<&str>, host: &str, uri: &str) -> Destination {
        let req = Request::builder().uri(uri).header("host", host).body(()).unwrap();
        destination(domain, &req)
    }

    fn tunnel_of(d: Destination) -> Option<(String, String)> {
        match d {
            Destination::Tunnel { name, target, .. } => Some((name, target)),
            _ => None,
        }
    }

    /// The prefix taken off the path goes to the client, which records
    /// the URL the caller called; a Host that named the tunnel took none.
    #[test]
    fn the_routing_prefix_is_kept_only_when_the_path_routed() {
        let prefix = |d: Destination| match d {
            Destination::Tunnel { prefix, .. } => prefix,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            prefix(dest(Some("relay.test"), "relay.test", "/t/shop/hook?a=1")),
            Some("/t/shop".into())
        );
        assert_eq!(
            prefix(dest(Some("relay.test"), "shop.relay.test", "/t/other/hook")),
            None
        );
    }

    #[test]
    fn path_routing_strips_the_prefix_and_keeps_the_query() {
        let t = |uri| tunnel_of(dest(None, "relay:8080", uri));
        assert_eq!(
            t("/t/app/hooks/stripe?a=1&a=2"),
            Some(("app".into(), "/hooks/stripe?a=1&a=2".into()))
        );
        assert_eq!(t("/t/app"), Some(("app".into(), "/".into())));
        assert_eq!(t("/t/app?x"), Some(("app".into(), "/?x".into())));
        assert_eq!(t("/t/app/"), Some(("app".into(), "/".into())));
        assert_eq!(t("/t/App/x"), None);
        assert_eq!(t("/t//x"), None);
        assert!(matches!(dest(None, "relay", "/healthz"), Destination::Health));
        assert!(matches!(dest(None, "relay", CONNECT_PATH), Destination::Connect));
        assert!(matches!(dest(None, "relay", "/"), Destination::Nowhere));
        assert!(
            matches!(dest(None, "relay", "/t/ALPHA/x"), Destination::NoSuchTunnel(why)
                if why == "no such tunnel: tunnel names are lowercase, as in /t/alpha/"),
            "a name no tunnel could have is no such tunnel, not a wrong path"
        );
        assert!(
            matches!(dest(None, "relay", "/t/alpha-/x"), Destination::NoSuchTunnel(why)
                if why == "no such tunnel: a tunnel name starts and ends with a letter or digit"),
            "a name no tunnel could have is no such tunnel, not a wrong path"
        );
    }

    #[test]
    fn subdomain_routing_keeps_the_whole_path() {
        let d = Some("relay.example.com");
        let t = |host, uri| tunnel_of(dest(d, host, uri));
        assert_eq!(
            t("app.relay.example.com", "/t/x/healthz?q"),
            Some(("app".into(), "/t/x/healthz?q".into()))
        );
        assert_eq!(t("APP.Relay.Example.com:443", "/"), Some(("app".into(), "/".into())));
        assert_eq!(t("a.b.relay.example.com", "/"), None);
        assert_eq!(t("relay.example.com", "/"), None);
        assert_eq!(t("evilrelay.example.com", "/"), None);
        assert!(matches!(dest(d, "relay.example.com", "/healthz"), Destination::Health));
    }

    /// A label as a tunnel name might be written: mostly one that could be
    /// valid, sometimes one in the wrong case or too long, sometimes any
    /// characters a URL path can carry.
    fn label() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::prop_oneof![
            "[a-z0-9][a-z0-9-]{0,20}[a-z0-9]",
            "[a-zA-Z0-9-]{0,70}",
            "[a-zA-Z0-9%._~-]{0,20}",
        ]
    }

    /// Hosts of every kind, and `<label>.relay.example.com` ones (a port
    /// after some), which arbitrary text almost never is.
    fn host() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::strategy::Strategy;
        proptest::prop_oneof![
            "[ -~]{0,80}",
            label().prop_map(|label| format!("{label}.relay.example.com")),
            (label(), 1u16..).prop_map(|(label, port)| format!("{label}.Relay.example.com:{port}")),
        ]
    }

    /// Paths of every kind, and `/t/<label>/…` ones, which arbitrary
    /// segments almost never are.
    fn path() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::strategy::Strategy;
        let any = "(/[a-z0-9%._-]{0,12}){0,4}";
        proptest::prop_oneof![
            any,
            (label(), any).prop_map(|(label, rest)| format!("/t/{label}{rest}")),
        ]
    }

    proptest::proptest! {
        #[test]
        fn any_host_routes_to_a_valid_name_or_nowhere(host in host(), path in path()) {
            let path = if path.is_empty() { "/".to_string() } else { path };
            let req = Request::builder().uri(path.as_str()).header("host", host.as_str()).body(()).unwrap();
            if let Destination::Tunnel { name, target, .. } = destination(Some("relay.example.com"), &req) {
                proptest::prop_assert!(names::is_valid(&name));
                proptest::prop_assert!(target.starts_with('/'));
            }
        }
    }
}
