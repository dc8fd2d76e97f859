//! The request the local handler gets, built from the head the relay sent.

use http::{HeaderName, HeaderValue, Method, Request};
use portpreview_shared::content_length;
use portpreview_shared::message::Header;

use super::{Head, Shared};
use crate::forward::LocalBody;

/// The Content-Length a request head declares, if any (the relay's
/// parser has refused any it could not read).
pub(super) fn declared_length(headers: &[Header]) -> Option<u64> {
    let values = headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("content-length"))
        .map(|h| h.value.as_slice());
    content_length::declared(values).ok().flatten()
}

pub(super) fn build_request(
    shared: &Shared,
    head: &Head,
    body: LocalBody,
    buffered: bool,
) -> Result<Request<LocalBody>, String> {
    let method = Method::from_bytes(head.method.as_bytes()).map_err(|_| format!("invalid method {:?}", head.method))?;
    // The relay sends a path: a full URL (`http://169.254.169.254/…`) in
    // the request line would reach a handler that acts as a proxy, whatever
    // the connection's own target.
    if !head.target.starts_with('/') {
        return Err(format!(
            "the relay sent a request target that is not a path: {}",
            portpreview_shared::sanitize::escape_str(&portpreview_shared::text::shorten(&head.target, 200))
        ));
    }
    let target = shared.forwarder.target();
    // A whole body's length is set from the bytes, not copied: the caller's
    // header could disagree with them. Set even at 0, as the caller sent it:
    // some servers answer a POST without a length with 411.
    let mut length = buffered.then(|| http_body::Body::size_hint(&body).exact()).flatten();
    let mut request = Request::builder()
        .method(method)
        .uri(target.request_path(&head.target))
        .body(body)
        .map_err(|e| format!("invalid request target: {e}"))?;
    let preserve_host = shared.preserves_host(&head.headers);
    let target_host = || shared.forwarder.host_header();
    // Each set once, where the caller's first was, so the handler sees the
    // headers in the order the provider sent them, and a curl export
    // (whose Host comes first) sends them so too.
    let mut rewritten_host = (!preserve_host).then(target_host).flatten();
    let headers = request.headers_mut();
    // Room for them all at once, not grown (and rehashed) on the way.
    headers.reserve(head.headers.len());
    for header in &head.headers {
        let name = header.name.as_str();
        if buffered && name.eq_ignore_ascii_case("content-length") {
            if let Some(length) = length.take() {
                headers.append(http::header::CONTENT_LENGTH, HeaderValue::from(length));
            }
            continue;
        }
        if !preserve_host && name.eq_ignore_ascii_case("host") {
            if let Some(host) = rewritten_host.take() {
                headers.append(http::header::HOST, host);
            }
            continue;
        }
        match (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_bytes(&header.value),
        ) {
            (Ok(name), Ok(value)) => {
                headers.append(name, value);
            }
            _ => {
                let shown = portpreview_shared::text::shorten(&portpreview_shared::sanitize::escape_str(name), 100);
                tracing::warn!(header = %shown, "header dropped: not valid HTTP");
            }
        }
    }
    // No Host came, or one that is not valid HTTP was dropped above: the
    // target's stands in.
    if !headers.contains_key(http::header::HOST) {
        if let Some(host) = rewritten_host.or_else(target_host) {
            headers.insert(http::header::HOST, host);
        }
    }
    Ok(request)
}
