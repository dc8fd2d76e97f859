//! HAR 1.2 export: deliveries as a log that browser devtools open, one
//! entry each.
//!
//! Spec: <http://www.softwareishard.com/blog/har-12-spec/>. Bodies are
//! shown decoded when sent gzip or deflate; bodies that are not UTF-8 are
//! base64 (`content.encoding` for responses; requests have no such field
//! in HAR, so `postData` carries a `_encoding` beside its text).

use std::fmt::Write;

use serde_json::{json, Value};

use super::body::{decode, Decoding, Encoded};
use super::mask::{shown_path, shown_value, MASK};
use crate::store::{Delivery, NewDelivery, Outcome};
use crate::time::rfc3339_ms;
use portpreview_shared::Header;

/// The HAR document holding `entries`, as [`entry`] makes them.
pub fn document(entries: Vec<Value>) -> Value {
    json!({
        "log": {
            "version": "1.2",
            "creator": { "name": "portpreview", "version": env!("CARGO_PKG_VERSION") },
            "entries": entries,
        }
    })
}

/// The log entry for `d`, aimed at `url` (target plus path); secrets
/// masked unless `reveal`.
pub fn entry(d: &Delivery, url: &str, reveal: bool) -> Value {
    let r = &d.request;
    let duration = d
        .outcome
        .as_ref()
        .and_then(|o| o.duration_ms)
        .map_or(0.0, crate::time::round_ms);
    let response = match &d.outcome {
        Some(o) => response(o, reveal),
        None => json!({
            "status": 0, "statusText": "", "httpVersion": "HTTP/1.1", "cookies": [], "headers": [],
            "content": { "size": 0, "mimeType": "" }, "redirectURL": "", "headersSize": -1, "bodySize": -1,
            "_error": "no answer recorded",
        }),
    };
    json!({
        "startedDateTime": rfc3339_ms(r.received_at_ms),
        "time": duration,
        "request": request(r, url, reveal),
        "response": response,
        "cache": {},
        "timings": { "send": 0, "wait": duration, "receive": 0 },
        "comment": format!("PortPreview delivery #{}", d.id),
        "_portpreview": {
            "id": d.id,
            "provider": r.provider,
            "event_key": r.event_key,
            "event_key_source": r.event_key_source,
            "replay_of": r.replay_of,
        },
    })
}

/// The entry's `request`, as the caller sent it to `url`.
fn request(r: &NewDelivery, url: &str, reveal: bool) -> Value {
    let mut request = json!({
        "method": r.method,
        "url": url_text(&shown_path(url, reveal)),
        "httpVersion": "HTTP/1.1",
        "cookies": cookies(&r.request_headers, Cookies::Request, reveal),
        "headers": headers(&sent_headers(r, url), reveal),
        "queryString": query_string(&shown_path(&r.path, reveal)),
        "headersSize": -1,
        "bodySize": body_size(&r.request_body, r.request_body_size),
    });
    // A body none of which was kept (the relay refused it unread) still
    // gets its note: without one, an entry whose bodySize is 27 MB and
    // that has no text reads as an export that lost it.
    if !r.request_body.is_empty() || r.request_truncated() {
        request["postData"] = post_data(r);
    }
    request
}

/// The entry's `response`, from the answer recorded.
fn response(o: &Outcome, reveal: bool) -> Value {
    let mut response = json!({
        "status": o.status.unwrap_or(0),
        "statusText": o.status.and_then(reason).unwrap_or(""),
        "httpVersion": "HTTP/1.1",
        "cookies": cookies(&o.response_headers, Cookies::Response, reveal),
        "headers": headers(&o.response_headers, reveal),
        "content": content(o),
        "redirectURL": first_value(&o.response_headers, "location"),
        "headersSize": -1,
        "bodySize": body_size(&o.response_body, o.response_body_size),
    });
    if let Some(error) = &o.error {
        response["_error"] = Value::String(error.clone());
    }
    response
}

/// The response's `content`: HAR's is the body decoded, with the bytes
/// the coding saved.
fn content(o: &Outcome) -> Value {
    let mut content = json!({
        "size": o.response_body_size,
        "mimeType": mime_type(&o.response_headers),
    });
    let decoding = decode(&o.response_headers, &o.response_body, o.response_body_size);
    let mut notes = Vec::new();
    let text = match &decoding {
        Decoding::Done { plain, .. } => {
            content["size"] = json!(plain.len());
            // Bytes saved; a tiny body that grew under gzip saved none.
            if let Some(saved) = plain.len().checked_sub(o.response_body.len()) {
                content["compression"] = json!(saved);
            }
            plain.as_slice()
        }
        Decoding::Failed { coding, why } => {
            notes.push(undecodable_note(coding, why));
            o.response_body.as_slice()
        }
        Decoding::NotCoded => o.response_body.as_slice(),
    };
    match Encoded::of(text) {
        Encoded::Text(text) => content["text"] = Value::String(text),
        Encoded::Base64(b64) => {
            content["text"] = Value::String(b64);
            content["encoding"] = Value::String("base64".into());
        }
    }
    notes.extend(cut_note(&o.response_body, o.response_body_size));
    if !notes.is_empty() {
        content["comment"] = Value::String(notes.join("; "));
    }
    content
}

/// The request body as HAR's `postData`: decoded when it was sent gzip or
/// deflate, as devtools show a body. HAR gives `postData` no encoding
/// field, so a body that is not UTF-8 is base64 under `_encoding`, and the
/// comment, which viewers do show, says so.
fn post_data(r: &NewDelivery) -> Value {
    let mut post = json!({ "mimeType": mime_type(&r.request_headers) });
    let mut notes = Vec::new();
    let decoding = decode(&r.request_headers, &r.request_body, r.request_body_size);
    let text = match &decoding {
        Decoding::Done { coding, plain } => {
            notes.push(format!("sent {coding} ({} bytes), shown decoded", r.request_body.len()));
            plain.as_slice()
        }
        Decoding::Failed { coding, why } => {
            notes.push(undecodable_note(coding, why));
            r.request_body.as_slice()
        }
        Decoding::NotCoded => r.request_body.as_slice(),
    };
    match Encoded::of(text) {
        Encoded::Text(text) => post["text"] = Value::String(text),
        Encoded::Base64(b64) => {
            post["text"] = Value::String(b64);
            post["_encoding"] = Value::String("base64".into());
            notes.push("text is base64: the body is not UTF-8 text".into());
        }
    }
    notes.extend(cut_note(&r.request_body, r.request_body_size));
    if !notes.is_empty() {
        post["comment"] = Value::String(notes.join("; "));
    }
    post
}

/// What a body labelled with a coding it does not decode under says of itself.
fn undecodable_note(coding: &str, why: &str) -> String {
    format!("sent as {coding}, but it does not decode ({why}): shown as sent")
}

/// The URL as a URL: bytes a URL cannot hold raw (spaces, controls,
/// anything past ASCII) are percent-encoded, as a browser sends them, and
/// so are the characters a URL parser would change or refuse: `\` reads
/// as `/` to a browser, which would show another path.
fn url_text(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    for c in url.chars() {
        if c.is_ascii_graphic() && !matches!(c, '\\' | '"' | '<' | '>' | '`' | '^' | '{' | '|' | '}') {
            out.push(c);
        } else {
            let mut bytes = [0; 4];
            for b in c.encode_utf8(&mut bytes).bytes() {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

/// Which side's cookie header to read.
#[derive(Clone, Copy)]
enum Cookies {
    /// `Cookie: a=1; b=2`: every pair.
    Request,
    /// `Set-Cookie: a=1; Path=/; HttpOnly`: one cookie per header, its
    /// attributes left to the header itself.
    Response,
}

/// The cookies the headers carry, as HAR lists them; values masked, as the
/// headers are, unless `reveal`.
fn cookies(list: &[Header], side: Cookies, reveal: bool) -> Vec<Value> {
    let name = match side {
        Cookies::Request => "cookie",
        Cookies::Response => "set-cookie",
    };
    // A value with bytes that are not UTF-8 keeps its other cookies; its
    // header's comment says what was replaced.
    let values: Vec<_> = list
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case(name))
        .map(|h| String::from_utf8_lossy(&h.value))
        .collect();
    let pairs: Vec<&str> = match side {
        Cookies::Request => values.iter().flat_map(|v| v.split(';')).collect(),
        Cookies::Response => values.iter().filter_map(|v| v.split(';').next()).collect(),
    };
    pairs
        .into_iter()
        .filter_map(|pair| pair.trim().split_once('='))
        .map(|(name, value)| json!({ "name": name.trim(), "value": if reveal { value.trim() } else { MASK } }))
        .collect()
}

/// HAR has no field for a header's raw bytes: one that is not UTF-8 is
/// written with U+FFFD in place of the bytes, and its comment says so (the
/// JSON fixture keeps them exact).
/// The request's headers as a request to `url` carries them: its Host is
/// `url`'s, as the handler got it, unless the tunnel kept the caller's
/// (`http --host-header preserve`). A replayer sending the recorded Host
/// to `url` would send a request no hop ever sent.
fn sent_headers(r: &NewDelivery, url: &str) -> Vec<Header> {
    let authority = url.split_once("://").map(|(scheme, rest)| {
        let authority = rest.split(['/', '?']).next().unwrap_or(rest);
        // A client leaves the scheme's own port out of Host, as curl does.
        let default_port = if scheme.eq_ignore_ascii_case("https") {
            ":443"
        } else {
            ":80"
        };
        authority.strip_suffix(default_port).unwrap_or(authority)
    });
    let mut list = r.request_headers.clone();
    if let Some(authority) = authority.filter(|_| !r.host_preserved) {
        for h in list.iter_mut().filter(|h| h.name.eq_ignore_ascii_case("host")) {
            h.value = authority.as_bytes().to_vec();
        }
    }
    list
}

fn headers(list: &[Header], reveal: bool) -> Vec<Value> {
    list.iter()
        .map(|h| {
            let value = shown_value(h, reveal);
            let mut header = json!({ "name": h.name, "value": String::from_utf8_lossy(&value) });
            if std::str::from_utf8(&value).is_err() {
                header["comment"] = "the value holds bytes that are not UTF-8, shown here as U+FFFD; export --format json keeps them exact".into();
            }
            header
        })
        .collect()
}

fn mime_type(list: &[Header]) -> String {
    first_value(list, "content-type")
}

/// The first value of header `name`, or empty: HAR's `mimeType` and
/// `redirectURL` are strings either way.
fn first_value(list: &[Header], name: &str) -> String {
    list.iter()
        .find(|h| h.name.eq_ignore_ascii_case(name))
        .map(|h| String::from_utf8_lossy(&h.value).into_owned())
        .unwrap_or_default()
}

/// The query's pairs decoded as a form decodes them (`+` is a space,
/// `%XX` a byte), as browsers write them in HAR: the entry's `url` keeps
/// the query exactly as it was sent.
fn query_string(path: &str) -> Vec<Value> {
    let Some((_, query)) = path.split_once('?') else {
        return Vec::new();
    };
    // HAR's strings hold text: bytes that decode to none are replaced,
    // which the entry says, as a header's does.
    let decoded = |text: &str| {
        let bytes = super::mask::percent_decoded_bytes(&text.replace('+', " ")).into_owned();
        match String::from_utf8(bytes) {
            Ok(text) => (text, false),
            Err(err) => (String::from_utf8_lossy(err.as_bytes()).into_owned(), true),
        }
    };
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let ((name, name_replaced), (value, value_replaced)) = (decoded(name), decoded(value));
            let mut entry = json!({ "name": name, "value": value });
            if name_replaced || value_replaced {
                entry["comment"] = "not UTF-8 once decoded: the bytes that are not are shown as U+FFFD; the url \
                                    holds them as sent"
                    .into();
            }
            entry
        })
        .collect()
}

fn reason(status: u16) -> Option<&'static str> {
    http::StatusCode::from_u16(status).ok()?.canonical_reason()
}

/// Says that the text is only the stored start of the body, when it is.
fn cut_note(stored: &[u8], size: u64) -> Option<String> {
    let note = super::body::truncation_note(stored.len(), size)?;
    Some(format!(
        "text holds the stored start only: {}",
        note.trim_matches(['(', ')'])
    ))
}

/// A body's size as HAR 1.2 gives it: -1 when it is not known, as for a
/// body that broke off on its way.
fn body_size(stored: &[u8], size: u64) -> i64 {
    if crate::store::size_unknown_past(stored.len() as u64, size) {
        -1
    } else {
        i64::try_from(size).unwrap_or(i64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{NewDelivery, Outcome};

    /// The HAR file `export` writes for `d` alone.
    fn one_entry(d: &Delivery, url: &str, reveal: bool) -> Value {
        document(vec![entry(d, url, reveal)])
    }

    #[test]
    fn a_har_has_the_required_parts() {
        let d = Delivery {
            id: 3,
            request: NewDelivery {
                received_at_ms: 1_700_000_000_000,
                method: "POST".into(),
                path: "/hook?a=1&b".into(),
                request_headers: vec![
                    Header::new("content-type", "application/json"),
                    Header::new("stripe-signature", "t=1,v1=secret"),
                    Header::new("x-raw", b"a\xffb".to_vec()),
                ],
                request_body: b"{}".to_vec(),
                request_body_size: 2,
                ..NewDelivery::default()
            },
            outcome: Some(Outcome {
                status: Some(200),
                response_body: vec![0xff],
                response_body_size: 1,
                duration_ms: Some(4.0),
                ..Outcome::default()
            }),
            delivery_count: 1,
        };
        let har = one_entry(&d, "http://127.0.0.1:3000/hook?a=1&b", false);
        let entry = &har["log"]["entries"][0];
        assert_eq!(har["log"]["version"], "1.2");
        assert_eq!(entry["request"]["postData"]["mimeType"], "application/json");
        assert_eq!(entry["request"]["postData"]["text"], "{}");
        assert_eq!(entry["request"]["headers"][1]["value"], "t=1,v1=••••••");
        // Bytes HAR cannot hold are said to be replaced, not changed unseen.
        let raw = &entry["request"]["headers"][2];
        assert_eq!(raw["value"], "a\u{fffd}b");
        assert_eq!(
            raw["comment"],
            "the value holds bytes that are not UTF-8, shown here as U+FFFD; export --format json keeps them exact"
        );
        assert!(entry["request"]["headers"][0].get("comment").is_none());
        assert_eq!(entry["request"]["queryString"][1], json!({ "name": "b", "value": "" }));
        assert_eq!(
            query_string("/hook?q=a+b%2Bc&%C3%A9t%C3%A9=%20&bad=%ff"),
            vec![
                json!({ "name": "q", "value": "a b+c" }),
                json!({ "name": "été", "value": " " }),
                json!({
                    "name": "bad",
                    "value": "\u{fffd}",
                    "comment": "not UTF-8 once decoded: the bytes that are not are shown as U+FFFD; the url holds \
                                them as sent"
                }),
            ]
        );
        // A browser reads `\` in a URL as `/`: it is encoded, `%` kept.
        assert_eq!(
            url_text("http://h/back\\slash?z=\\&q=%20\"{x}"),
            "http://h/back%5Cslash?z=%5C&q=%20%22%7Bx%7D"
        );
        assert_eq!(entry["response"]["statusText"], "OK");
        assert_eq!(entry["response"]["content"]["encoding"], "base64");
        assert_eq!(entry["timings"]["wait"], 4.0);
        assert_eq!(entry["request"]["bodySize"], 2);
        assert_eq!(entry["response"]["redirectURL"], "");

        let mut redirected = d.clone();
        let answer = redirected.outcome.as_mut().expect("answered");
        answer.status = Some(302);
        answer.response_headers = vec![Header::new("Location", "https://example.com/next")];
        let har = one_entry(&redirected, "http://127.0.0.1:3000/hook", false);
        assert_eq!(
            har["log"]["entries"][0]["response"]["redirectURL"],
            "https://example.com/next"
        );

        // A body that broke off on its way: its full size is not known.
        let mut cut = d.clone();
        cut.request.request_body_size = crate::store::size_past_cut(2);
        let har = one_entry(&cut, "http://127.0.0.1:3000/hook", false);
        let request = &har["log"]["entries"][0]["request"];
        assert_eq!(request["bodySize"], -1);
        assert_eq!(
            request["postData"]["comment"],
            "text holds the stored start only: body cut short after 2 bytes; the rest did not reach PortPreview"
        );
        assert!(
            entry["request"]["postData"].get("comment").is_none(),
            "a whole body has no note"
        );

        // A body the relay refused unread: none of it was kept.
        let mut refused = d.clone();
        refused.request.request_body = Vec::new();
        refused.request.request_body_size = 27_000_000;
        let har = one_entry(&refused, "http://127.0.0.1:3000/hook", false);
        let request = &har["log"]["entries"][0]["request"];
        assert_eq!(request["bodySize"], 27_000_000);
        assert_eq!(request["postData"]["text"], "");
        assert_eq!(
            request["postData"]["comment"],
            "text holds the stored start only: stored body cut at 0 of 27,000,000 bytes"
        );

        // A body over the store's limit: its size is known, its text is not whole.
        let mut over = d.clone();
        over.outcome.as_mut().expect("answered").response_body_size = 9;
        let har = one_entry(&over, "http://127.0.0.1:3000/hook", false);
        let response = &har["log"]["entries"][0]["response"];
        assert_eq!(response["bodySize"], 9);
        assert_eq!(
            response["content"]["comment"],
            "text holds the stored start only: stored body cut at 1 of 9 bytes"
        );

        // An answer labelled gzip that does not decode is shown as sent, and says so.
        let mut labelled = d.clone();
        let outcome = labelled.outcome.as_mut().expect("answered");
        outcome.response_headers = vec![Header::new("Content-Encoding", "gzip")];
        outcome.response_body = b"notgzip".to_vec();
        outcome.response_body_size = 7;
        let har = one_entry(&labelled, "http://127.0.0.1:3000/hook", false);
        let content = &har["log"]["entries"][0]["response"]["content"];
        assert_eq!(content["text"], "notgzip");
        assert!(
            content["comment"].as_str().is_some_and(
                |c| c.starts_with("sent as gzip, but it does not decode (") && c.ends_with("): shown as sent")
            ),
            "{content}"
        );
    }

    /// A request sent gzip is shown decoded, as devtools show bodies; one
    /// that is not text is base64, and the comment, which viewers show,
    /// says so, since HAR gives `postData` no encoding field.
    #[test]
    fn request_bodies_are_decoded_and_base64_is_said_in_the_comment() {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(br#"{"hello":"gzip world"}"#).unwrap();
        let sent = gz.finish().unwrap();
        let delivery = |headers: Vec<Header>, body: Vec<u8>| Delivery {
            id: 1,
            request: NewDelivery {
                method: "POST".into(),
                path: "/caf\u{e9}".into(),
                request_headers: headers,
                request_body_size: body.len() as u64,
                request_body: body,
                ..NewDelivery::default()
            },
            outcome: None,
            delivery_count: 1,
        };
        let gzipped = delivery(vec![Header::new("Content-Encoding", "gzip")], sent.clone());
        let har = one_entry(&gzipped, "http://127.0.0.1:3000/caf\u{e9}?q=\u{9b}\u{202e} x", false);
        let request = &har["log"]["entries"][0]["request"];
        assert_eq!(request["postData"]["text"], r#"{"hello":"gzip world"}"#);
        assert_eq!(
            request["postData"]["comment"],
            format!("sent gzip ({} bytes), shown decoded", sent.len())
        );
        assert_eq!(request["bodySize"], sent.len());
        assert_eq!(request["url"], "http://127.0.0.1:3000/caf%C3%A9?q=%C2%9B%E2%80%AE%20x");

        let labelled = delivery(vec![Header::new("Content-Encoding", "gzip")], b"notgzip".to_vec());
        let har = one_entry(&labelled, "http://127.0.0.1:3000/b", false);
        let post = &har["log"]["entries"][0]["request"]["postData"];
        assert_eq!(post["text"], "notgzip");
        assert!(
            post["comment"].as_str().is_some_and(
                |c| c.starts_with("sent as gzip, but it does not decode (") && c.ends_with("): shown as sent")
            ),
            "{post}"
        );

        let binary = delivery(Vec::new(), vec![0xff, 0x00, 0x01]);
        let har = one_entry(&binary, "http://127.0.0.1:3000/b", false);
        let post = &har["log"]["entries"][0]["request"]["postData"];
        assert_eq!(
            (post["text"].as_str(), post["_encoding"].as_str()),
            (Some("/wAB"), Some("base64"))
        );
        assert_eq!(post["comment"], "text is base64: the body is not UTF-8 text");
    }

    /// The HAR's URL is the target's; so is its Host, as the handler got
    /// it, unless the tunnel kept the caller's.
    #[test]
    fn the_host_header_is_the_urls_unless_the_callers_was_kept() {
        let mut d = Delivery {
            id: 1,
            request: NewDelivery {
                request_headers: vec![Header::new("host", "relay.example"), Header::new("x-other", "1")],
                ..NewDelivery::default()
            },
            outcome: None,
            delivery_count: 1,
        };
        let host = |d: &Delivery| {
            one_entry(d, "http://127.0.0.1:3000/hook?x=1", false)["log"]["entries"][0]["request"]["headers"].clone()
        };
        assert_eq!(
            host(&d),
            json!([{ "name": "host", "value": "127.0.0.1:3000" }, { "name": "x-other", "value": "1" }])
        );
        let on_port_80 = one_entry(&d, "http://localhost:80/hook", false);
        assert_eq!(
            on_port_80["log"]["entries"][0]["request"]["headers"][0],
            json!({ "name": "host", "value": "localhost" }),
            "the scheme's own port left out, as curl leaves it"
        );
        d.request.host_preserved = true;
        assert_eq!(host(&d)[0], json!({ "name": "host", "value": "relay.example" }));
    }

    #[test]
    fn cookies_are_listed_masked_unless_revealed() {
        let d = Delivery {
            id: 1,
            request: NewDelivery {
                request_headers: vec![
                    Header::new("Cookie", "session=s3cret; theme=dark"),
                    Header::new("Cookie", b"raw=\xff; lang=en".to_vec()),
                ],
                ..NewDelivery::default()
            },
            outcome: Some(Outcome {
                status: Some(200),
                response_headers: vec![
                    Header::new("set-cookie", "session=n3w; Path=/; HttpOnly"),
                    Header::new("set-cookie", "seen=1"),
                ],
                ..Outcome::default()
            }),
            delivery_count: 1,
        };
        let entry = |reveal| one_entry(&d, "http://127.0.0.1:3000/", reveal)["log"]["entries"][0].clone();
        let shown = entry(false);
        assert_eq!(
            shown["request"]["cookies"],
            json!([
                { "name": "session", "value": MASK },
                { "name": "theme", "value": MASK },
                { "name": "raw", "value": MASK },
                { "name": "lang", "value": MASK }
            ])
        );
        let revealed = entry(true);
        assert_eq!(
            revealed["request"]["cookies"][3],
            json!({ "name": "lang", "value": "en" })
        );
        assert_eq!(
            revealed["response"]["cookies"],
            json!([{ "name": "session", "value": "n3w" }, { "name": "seen", "value": "1" }])
        );
    }
}
