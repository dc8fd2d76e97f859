//! Which headers cross the relay: hop-by-hop ones stop here, forwarding
//! headers are the relay's own view, everything else passes in order.

use http::header::{HeaderMap, HeaderName, HeaderValue};
use portpreview_shared::hop::HopFilter;
use portpreview_shared::request_ref::HeaderRef;
use portpreview_shared::Header;

/// Forwarding headers a caller could forge; the relay sets its own.
const FORWARDING: &[&str] = &["forwarded", "x-real-ip"];

/// Response headers accepted from a client. Far above the 100 an HTTP/1
/// parser takes from a local handler by default, and far below the tens of
/// thousands at which a `HeaderMap` panics: one frame holds that many tiny
/// headers, so a client could otherwise bring down the task serving a caller.
pub const MAX_RESPONSE_HEADERS: usize = 1000;

/// What the relay knows about the hop it received a request on.
#[derive(Debug, Clone)]
pub struct Hop<'a> {
    /// The caller's address, as text.
    pub peer: &'a str,
    /// True when the caller reached the relay over HTTPS.
    pub https: bool,
    /// The path prefix that routed the request (`/t/<name>`), which the
    /// handler does not see: none when the Host did.
    pub prefix: Option<String>,
    /// The relay's view as a `Forwarded` element, standing in for the one
    /// the caller sent; none when it sent none ([`forwarded_element`]).
    pub forwarded: Option<String>,
}

/// The host the caller called, from its Host header; none when it sent
/// none, or an empty one (which RFC 9112 allows for a target with no
/// authority): a handler building URLs from `X-Forwarded-Host` would make
/// `http:///…` of it.
pub fn caller_host(headers: &HeaderMap) -> Option<&[u8]> {
    headers
        .get(http::header::HOST)
        .map(HeaderValue::as_bytes)
        .filter(|host| !host.is_empty())
}

/// The relay's view of a request as an RFC 7239 `Forwarded` element:
/// `for=203.0.113.7;proto=https;host="hooks.example"`.
pub fn forwarded_element(peer: &str, https: bool, host: Option<&[u8]>) -> String {
    // An IPv6 address is quoted and bracketed (RFC 7239 §6).
    let mut element = match peer.contains(':') {
        true => format!("for=\"[{peer}]\""),
        false => format!("for={peer}"),
    };
    element.push_str(if https { ";proto=https" } else { ";proto=http" });
    if let Some(host) = host {
        // A host with a port is no token: quoted, as a quoted-string escapes.
        element.push_str(";host=\"");
        for &byte in host {
            if matches!(byte, b'"' | b'\\') {
                element.push('\\');
            }
            element.push(char::from(byte));
        }
        element.push('"');
    }
    element
}

/// The request headers sent to the client: hop-by-hop and caller-supplied
/// forwarding headers dropped, the relay's `X-Forwarded-*` appended, and
/// its own `X-Real-IP` and `Forwarded` in place of the caller's. With
/// `X-Forwarded-Prefix`, proto, host and prefix give the URL the caller
/// called, before the path the handler sees: what Twilio and Square sign.
/// Borrowed where they lie, as they are only encoded.
pub fn request_headers<'a>(headers: &'a HeaderMap, hop: &'a Hop<'a>) -> Vec<HeaderRef<'a>> {
    // The map finds the Connection headers by hash: no scan of every
    // header on each request.
    let connection = headers.get_all(http::header::CONNECTION).iter();
    let hop_by_hop = HopFilter::from_connection(connection.map(HeaderValue::as_bytes));
    // Room for the four the relay adds.
    let mut out = Vec::with_capacity(headers.len() + 4);
    let mut real_ip = false;
    for (name, value) in headers {
        let name = name.as_str();
        let read_as = as_cgi_reads(name);
        if FORWARDING.contains(&&*read_as) {
            real_ip |= read_as == "x-real-ip";
            continue;
        }
        if hop_by_hop.drops(name) || read_as.starts_with("x-forwarded-") {
            continue;
        }
        out.push(HeaderRef::new(name, value.as_bytes()));
    }
    out.push(HeaderRef::new("x-forwarded-for", hop.peer.as_bytes()));
    let proto: &[u8] = if hop.https { b"https" } else { b"http" };
    out.push(HeaderRef::new("x-forwarded-proto", proto));
    if let Some(host) = caller_host(headers) {
        out.push(HeaderRef::new("x-forwarded-host", host));
    }
    if let Some(prefix) = &hop.prefix {
        out.push(HeaderRef::new("x-forwarded-prefix", prefix.as_bytes()));
    }
    // A handler that reads these reads the relay's view, as in the
    // `X-Forwarded-*`; they come only where the caller sent its own.
    if real_ip {
        out.push(HeaderRef::new("x-real-ip", hop.peer.as_bytes()));
    }
    if let Some(forwarded) = &hop.forwarded {
        out.push(HeaderRef::new("forwarded", forwarded.as_bytes()));
    }
    out
}

/// A header name as servers that make CGI variables of them read it
/// (WSGI, PHP, Rack): `_` as `-`, so that `X_Forwarded_For` reaches their
/// `HTTP_X_FORWARDED_FOR` beside the relay's own. Such a spelling of a
/// forwarding header is as forged as the usual one.
fn as_cgi_reads(name: &str) -> std::borrow::Cow<'_, str> {
    match name.contains('_') {
        true => name.replace('_', "-").into(),
        false => name.into(),
    }
}

/// The response headers given to the caller: hop-by-hop ones and any the
/// client sent that are not valid HTTP are dropped. `None` when the client
/// sent more than [`MAX_RESPONSE_HEADERS`].
///
/// A handler's answer framed by `Transfer-Encoding` loses its
/// `Content-Length` too (RFC 9112 § 6.3: the encoding wins, and a proxy
/// removes the length): the encoding is hop-by-hop and goes, and the body
/// the client decoded would overrun a length kept beside it.
pub fn response_headers(headers: Vec<Header>) -> Option<HeaderMap> {
    if headers.len() > MAX_RESPONSE_HEADERS {
        return None;
    }
    let hop_by_hop = HopFilter::from_headers(headers.iter().map(|h| (h.name.as_str(), h.value.as_slice())));
    let encoded = headers.iter().any(|h| h.name.eq_ignore_ascii_case("transfer-encoding"));
    let mut out = HeaderMap::with_capacity(headers.len());
    for header in headers {
        let Ok(name) = HeaderName::from_bytes(header.name.as_bytes()) else {
            continue;
        };
        if hop_by_hop.drops(name.as_str()) || encoded && name == http::header::CONTENT_LENGTH {
            continue;
        }
        // The decoded bytes become the value as they are: checked, not copied.
        let Ok(value) = HeaderValue::from_maybe_shared(bytes::Bytes::from(header.value)) else {
            continue;
        };
        out.append(name, value);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_framed_by_transfer_encoding_loses_its_length_too() {
        let answer = vec![
            Header::new("content-length", "3"),
            Header::new("transfer-encoding", "chunked"),
            Header::new("x-kept", "1"),
        ];
        let out = response_headers(answer).expect("few headers");
        assert!(out.get("content-length").is_none() && out.get("transfer-encoding").is_none());
        assert_eq!(out.get("x-kept").map(|v| v.as_bytes()), Some(&b"1"[..]));
        let plain = response_headers(vec![Header::new("content-length", "3")]).expect("few headers");
        assert_eq!(plain.get("content-length").map(|v| v.as_bytes()), Some(&b"3"[..]));
    }

    fn map(pairs: &[(&str, &[u8])]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (n, v) in pairs {
            m.append(
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_bytes(v).unwrap(),
            );
        }
        m
    }

    #[test]
    fn hop_by_hop_and_forged_forwarding_headers_are_dropped() {
        let headers = map(&[
            ("host", b"hooks.example"),
            ("connection", b"keep-alive, X-Secret-Hop"),
            ("x-secret-hop", b"1"),
            ("keep-alive", b"timeout=5"),
            ("te", b"trailers"),
            ("proxy-authorization", b"Basic x"),
            ("x-forwarded-for", b"6.6.6.6"),
            ("x-forwarded-prefix", b"/evil"),
            ("x_forwarded_for", b"6.6.6.6"),
            ("x-forwarded_host", b"evil.example"),
            ("x_real_ip", b"6.6.6.6"),
            ("forwarded", b"for=6.6.6.6"),
            ("x-real-ip", b"6.6.6.6"),
            ("x_request_id", b"kept"),
            ("stripe-signature", b"t=1,v1=abc"),
            ("x-multi", b"1"),
            ("x-multi", b"2"),
            ("x-raw", &[0x80, b'a']),
        ]);
        let hop = Hop {
            peer: "203.0.113.7",
            https: true,
            prefix: Some("/t/shop".into()),
            forwarded: Some(forwarded_element("203.0.113.7", true, Some(b"hooks.example"))),
        };
        let out = request_headers(&headers, &hop);
        let names: Vec<&str> = out.iter().map(|h| h.name).collect();
        assert_eq!(
            names,
            [
                "host",
                "x_request_id",
                "stripe-signature",
                "x-multi",
                "x-multi",
                "x-raw",
                "x-forwarded-for",
                "x-forwarded-proto",
                "x-forwarded-host",
                "x-forwarded-prefix",
                "x-real-ip",
                "forwarded"
            ]
        );
        assert_eq!(out[4].value, b"2");
        assert_eq!(out[5].value, [0x80, b'a']);
        assert_eq!(out[6].value, b"203.0.113.7");
        assert_eq!(out[7].value, b"https");
        assert_eq!(out[8].value, b"hooks.example");
        assert_eq!(out[9].value, b"/t/shop");
        assert_eq!(out[10].value, b"203.0.113.7");
        assert_eq!(out[11].value, br#"for=203.0.113.7;proto=https;host="hooks.example""#);
    }

    #[test]
    fn an_empty_host_is_forwarded_as_no_host() {
        let headers = map(&[("host", b"")]);
        let hop = Hop {
            peer: "203.0.113.7",
            https: false,
            prefix: None,
            forwarded: None,
        };
        let names: Vec<&str> = request_headers(&headers, &hop).iter().map(|h| h.name).collect();
        assert_eq!(names, ["host", "x-forwarded-for", "x-forwarded-proto"]);
        assert_eq!(caller_host(&headers), None);
        assert_eq!(caller_host(&map(&[("host", b"h:1")])), Some(&b"h:1"[..]));
    }

    #[test]
    fn a_forwarded_element_quotes_what_is_no_token() {
        assert_eq!(
            forwarded_element("2001:db8::1", false, Some(b"h:8080")),
            r#"for="[2001:db8::1]";proto=http;host="h:8080""#
        );
        assert_eq!(forwarded_element("10.0.0.1", false, None), "for=10.0.0.1;proto=http");
        assert_eq!(
            forwarded_element("10.0.0.1", true, Some(br#"a"\b"#)),
            r#"for=10.0.0.1;proto=https;host="a\"\\b""#
        );
    }

    #[test]
    fn response_headers_drop_hop_by_hop_and_invalid_ones() {
        let out = response_headers(vec![
            Header::new("content-type", "application/json"),
            Header::new("transfer-encoding", "chunked"),
            Header::new("connection", "x-hop"),
            Header::new("x-hop", "1"),
            Header::new("bad name", "x"),
            Header::new("x-bad-value", "a\nb"),
            Header::new("set-cookie", "a=1"),
            Header::new("set-cookie", "b=2"),
        ])
        .expect("a handful of headers");
        assert_eq!(out.len(), 3);
        assert_eq!(out.get_all("set-cookie").iter().count(), 2);
        assert!(out.get("transfer-encoding").is_none());
    }

    #[test]
    fn forty_thousand_tiny_headers_are_refused_without_a_panic() {
        // Three bytes each once framed: 40,000 of them fit in one frame.
        let many = |count: usize| vec![Header::new("a", ""); count];
        let framed = portpreview_shared::codec::encode(
            &portpreview_shared::ClientMessage::ResponseHead {
                stream: 1,
                status: 200,
                headers: many(40_000),
                end: true,
            },
            b"",
        );
        assert!(framed.is_ok(), "a client can send them all in one frame");
        assert!(response_headers(many(40_000)).is_none());
        assert!(response_headers(many(MAX_RESPONSE_HEADERS + 1)).is_none());
        assert_eq!(
            response_headers(many(MAX_RESPONSE_HEADERS)).map(|map| map.len()),
            Some(MAX_RESPONSE_HEADERS)
        );
    }
}
