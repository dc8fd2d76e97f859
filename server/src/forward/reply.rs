//! The caller's answer, made from the head and body the client sent.

use bytes::Bytes;
use http::{Response, StatusCode};
use portpreview_shared::content_length;
use tokio_util::task::AbortOnDropHandle;

use super::refusal::bad_gateway;
use super::ForwardLimits;
use crate::body::{RelayBody, TunnelBody};
use crate::headers::{response_headers, MAX_RESPONSE_HEADERS};
use crate::port::StreamPort;

/// The head of the client's answer, as it came.
pub(super) struct AnswerHead {
    pub(super) status: u16,
    pub(super) headers: Vec<portpreview_shared::Header>,
    /// Body bytes that rode in the head's frame.
    pub(super) first: Bytes,
    pub(super) end: bool,
}

/// The caller's answer from the client's head: checked, its length made
/// plain, its body whole or streamed from the tunnel.
pub(super) fn response(
    port: StreamPort,
    head: AnswerHead,
    request: &http::request::Parts,
    pump: Option<AbortOnDropHandle<()>>,
    limits: ForwardLimits,
) -> Response<RelayBody> {
    // A final status, as RFC 9110 numbers them: `from_u16` takes up to 999.
    let Some(status) = StatusCode::from_u16(head.status)
        .ok()
        .filter(|s| (200..600).contains(&s.as_u16()))
    else {
        port.abandon("the answer's status was no final status (200 to 599); the relay answered the caller 502");
        return bad_gateway(format!(
            "the tunnel's client sent status {}, which is no final status",
            head.status
        ));
    };
    let Some(mut headers) = response_headers(head.headers) else {
        port.abandon("the answer had too many headers; the relay answered the caller 502");
        return bad_gateway(format!(
            "the tunnel's client sent too many response headers (the limit is {MAX_RESPONSE_HEADERS})"
        ));
    };
    let declared = match declared_length(&mut headers) {
        Ok(declared) => declared,
        Err(why) => {
            port.abandon("the answer's Content-Length was not one number; the relay answered the caller 502");
            return bad_gateway(why);
        }
    };
    let body = if head.end {
        match whole_body(declared, head.first, &request.method, status) {
            Ok(body) => RelayBody::Full(body),
            Err(why) => {
                port.abandon("the answer's body did not match its Content-Length; the relay answered the caller 502");
                return bad_gateway(why);
            }
        }
    } else {
        RelayBody::Tunnel(Box::new(TunnelBody::new(
            port,
            head.first,
            pump,
            limits.timeout,
            declared.filter(|_| carries_body(&request.method, status)),
        )))
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    // hyper writes `<none>` after a status HTTP names no reason for (299,
    // 599); the protocol carries no reason, and an empty one is valid.
    if status.canonical_reason().is_none() {
        response
            .extensions_mut()
            .insert(hyper::ext::ReasonPhrase::from_static(b""));
    }
    // HTTP/1.0 has no chunked coding: hyper ends a body of unknown length
    // by closing the connection, yet tells a keep-alive caller it stays
    // open unless the answer itself is HTTP/1.0 (hyper then leaves
    // keep-alive off).
    if request.version == http::Version::HTTP_10 && !head.end && declared.is_none() {
        *response.version_mut() = http::Version::HTTP_10;
    }
    response
}

/// The one length an answer's `Content-Length` headers declare, written
/// back in its plain form. hyper refuses to send an answer whose lengths
/// disagree only once its head is being written, and then drops the
/// caller's connection without a word; `+5` or ` 005` would reach the
/// caller as sent, where strict parsers refuse them.
fn declared_length(headers: &mut http::HeaderMap) -> Result<Option<u64>, String> {
    let values = headers.get_all(http::header::CONTENT_LENGTH);
    let declared = content_length::declared(values.iter().map(http::HeaderValue::as_bytes)).map_err(|_| {
        format!(
            "the tunnel's client sent an answer whose Content-Length is not one number: {}",
            content_length::shown(values.iter().map(http::HeaderValue::as_bytes))
        )
    })?;
    // One value, written as the number is: nothing to write back.
    let mut each = values.iter();
    let plain = match (each.next(), each.next()) {
        (Some(only), None) => {
            let text = only.as_bytes();
            text.iter().all(u8::is_ascii_digit) && (text.len() == 1 || text.first() != Some(&b'0'))
        }
        _ => false,
    };
    if let Some(length) = declared.filter(|_| !plain) {
        headers.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(length));
    }
    Ok(declared)
}

/// The body of an answer that came whole in its head's frame, checked
/// against the length its headers declare. hyper writes a body of known
/// size under the handler's `Content-Length` and trusts the two to agree:
/// a client that declared fewer bytes than it sent would have the rest
/// read by the caller as the next response on its connection (perhaps the
/// answer to a request for another tunnel), and one that declared more
/// would leave the caller waiting for bytes that never come.
fn whole_body(
    declared: Option<u64>,
    body: Bytes,
    method: &http::Method,
    status: StatusCode,
) -> Result<Option<Bytes>, String> {
    if !carries_body(method, status) {
        return Ok(None);
    }
    match declared {
        Some(length) if length != body.len() as u64 => Err(format!(
            "the tunnel's client sent a body of {} bytes under Content-Length: {length}",
            body.len()
        )),
        _ => Ok((!body.is_empty()).then_some(body)),
    }
}

/// Whether an answer carries a body its Content-Length measures. These do
/// not: the length, if any, is that of the representation a GET would
/// have got.
fn carries_body(method: &http::Method, status: StatusCode) -> bool {
    method != http::Method::HEAD && !matches!(status, StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED)
}

#[cfg(test)]
mod tests {
    use http::header::CONTENT_LENGTH;
    use http::{HeaderMap, HeaderValue};

    use super::declared_length;

    fn lengths(values: &[&str]) -> (Result<Option<u64>, String>, Vec<String>) {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(CONTENT_LENGTH, HeaderValue::from_str(value).unwrap());
        }
        let declared = declared_length(&mut headers);
        let written = headers
            .get_all(CONTENT_LENGTH)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect();
        (declared, written)
    }

    /// Whatever form the lengths came in, one plain number goes on.
    #[test]
    fn a_content_length_goes_on_as_one_plain_number() {
        assert_eq!(lengths(&["5"]), (Ok(Some(5)), vec!["5".to_owned()]));
        assert_eq!(lengths(&["0"]), (Ok(Some(0)), vec!["0".to_owned()]));
        assert_eq!(lengths(&[" 5 "]), (Ok(Some(5)), vec!["5".to_owned()]));
        assert_eq!(lengths(&["005"]), (Ok(Some(5)), vec!["5".to_owned()]));
        assert_eq!(lengths(&["5", "5"]), (Ok(Some(5)), vec!["5".to_owned()]));
        assert_eq!(lengths(&[]), (Ok(None), vec![]));
        assert!(lengths(&["+5"]).0.is_err());
        assert!(lengths(&["5", "6"]).0.is_err());
    }
}
