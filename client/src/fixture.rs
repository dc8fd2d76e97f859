//! Fixtures: one recorded delivery as a JSON file, committed next to a
//! handler's code and read by `replay --from` and `check`.
//!
//! Format version 1:
//! ```json
//! { "portpreview_fixture": 1, "method": "POST", "path": "/webhooks/stripe",
//!   "target": "http://127.0.0.1:3000", "tunnel_url": "https://relay.example/t/calm-otter",
//!   "headers": [{ "name": "content-type", "value": "application/json" }],
//!   "body": "{\"id\":\"evt_1\"}", "provider": "stripe", "event_key": "evt_1",
//!   "event_key_source": "body:/id", "received_at": "2026-01-01T00:00:00.000Z",
//!   "response_status": 200 }
//! ```
//! A header value or body that is not UTF-8 is written as `value_base64` /
//! `body_base64` instead.

use std::path::Path;

use anyhow::{bail, Context};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::render::body::Encoded;
use crate::store::{Delivery, NewDelivery};
use crate::time::{parse_rfc3339_ms, rfc3339_ms};
use portpreview_shared::provider::{event_key, event_key_again, EventKey, Provider};
use portpreview_shared::Header;

/// The fixture format version this build writes and reads.
pub const FIXTURE_VERSION: u32 = 1;

/// The format a fixture's text says it is in, read apart from the rest.
fn format_of(text: &[u8]) -> Option<u32> {
    #[derive(Deserialize)]
    struct Format {
        portpreview_fixture: u32,
    }
    serde_json::from_slice::<Format>(text)
        .ok()
        .map(|f| f.portpreview_fixture)
}

/// Why a fixture in `format` is not read, and what to do about it.
fn unsupported_format(format: u32) -> String {
    match format > FIXTURE_VERSION {
        true => format!(
            "fixture format {format} was written by a newer PortPreview (this portpreview reads format \
             {FIXTURE_VERSION}): upgrade portpreview to run it"
        ),
        false => format!("fixture format {format} is not supported (this portpreview reads format {FIXTURE_VERSION})"),
    }
}

/// One delivery as a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixture {
    /// Format version; always [`FIXTURE_VERSION`] when written.
    pub portpreview_fixture: u32,
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Local target it was recorded against (`check --target` overrides it).
    #[serde(default)]
    pub target: String,
    /// Public URL of the tunnel it came in on: the provider called this
    /// followed by `path`, and Square and Twilio sign that URL. Absent from
    /// fixtures written before it was kept, and from hand-written ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel_url: Option<String>,
    /// Request headers in order.
    #[serde(default)]
    pub headers: Vec<FixtureHeader>,
    /// The handler got the `Host` header in `headers`, not its own address
    /// (`http --host-header preserve`): replays send that Host too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub host_preserved: bool,
    /// Body, when it is UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Body in standard base64, when it is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    /// Detected provider.
    #[serde(default)]
    pub provider: Option<String>,
    /// Event key.
    #[serde(default)]
    pub event_key: String,
    /// How the event key was made.
    #[serde(default)]
    pub event_key_source: String,
    /// When it was recorded, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_at: Option<String>,
    /// Status the handler answered when it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_status: Option<u16>,
    /// History id it was exported from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_id: Option<i64>,
}

/// One header: `value` when UTF-8, `value_base64` otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixtureHeader {
    /// Header name.
    pub name: String,
    /// Value as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Value in standard base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_base64: Option<String>,
}

impl FixtureHeader {
    fn of(h: &Header) -> Self {
        let (value, value_base64) = split(Encoded::of(&h.value));
        Self {
            name: h.name.clone(),
            value,
            value_base64,
        }
    }

    fn bytes(&self) -> Result<Vec<u8>, String> {
        decode(self.value.as_deref(), self.value_base64.as_deref())
            .map_err(|e| format!("header \"{}\": {e}", self.name))
    }
}

/// Whether a JSON object holds a request. Without `portpreview_fixture`,
/// it is a fixture whose first line was lost in an edit, which must fail a
/// check, not be passed over as some other JSON beside the fixtures.
fn holds_a_request(members: &serde_json::Map<String, serde_json::Value>) -> bool {
    members.contains_key("method") && members.contains_key("path")
}

/// What is wrong with a JSON object that is no fixture, where serde's words
/// ("unknown field `name`", "invalid type: map") would blame a field that is
/// rightly there: no `portpreview_fixture` at all, or a `body` written as
/// JSON rather than as the one string of its bytes.
fn misread(text: &[u8]) -> Option<String> {
    let Ok(serde_json::Value::Object(members)) = serde_json::from_slice(text) else {
        return None;
    };
    if !members.contains_key("portpreview_fixture") {
        return Some(match holds_a_request(&members) {
            true => "it holds a request but no \"portpreview_fixture\": 1, which every fixture begins with".into(),
            false => "JSON without a portpreview_fixture field".into(),
        });
    }
    // null is no body, as leaving the field out is.
    let body = members.get("body")?;
    (!(body.is_string() || body.is_null())).then(|| {
        "body is the request's bytes as one JSON string (a JSON body escaped: \"{\\\"id\\\": …}\"), or \
         body_base64; not JSON itself"
            .into()
    })
}

impl Fixture {
    /// The fixture for a stored delivery: the request exactly as received.
    pub fn from_delivery(d: &Delivery) -> Self {
        let r = &d.request;
        let (body, body_base64) = split(Encoded::of(&r.request_body));
        Self {
            portpreview_fixture: FIXTURE_VERSION,
            method: r.method.clone(),
            path: r.path.clone(),
            target: r.target.clone(),
            tunnel_url: Some(r.tunnel_url.clone()).filter(|url| !url.is_empty()),
            headers: r.request_headers.iter().map(FixtureHeader::of).collect(),
            host_preserved: r.host_preserved,
            body: body.filter(|b| !b.is_empty()),
            body_base64,
            provider: r.provider.clone(),
            event_key: r.event_key.clone(),
            event_key_source: r.event_key_source.clone(),
            received_at: Some(rfc3339_ms(r.received_at_ms)),
            response_status: d.outcome.as_ref().and_then(|o| o.status),
            delivery_id: Some(d.id),
        }
    }

    /// Whether `path` holds JSON that is no fixture at all: an array, a
    /// number, an object without a `portpreview_fixture` field. A file
    /// that cannot be read or is not JSON is not said to be other JSON: it
    /// may be a fixture, broken, whose error the user must see.
    pub fn is_other_json(path: &Path) -> bool {
        let Ok(text) = read_text(path) else {
            return false;
        };
        match serde_json::from_slice::<serde_json::Value>(&text) {
            Ok(serde_json::Value::Object(members)) => {
                !members.contains_key("portpreview_fixture") && !holds_a_request(&members)
            }
            Ok(_) => true,
            Err(_) => false,
        }
    }

    /// Reads and checks a fixture file.
    pub fn load(path: &Path) -> anyhow::Result<Fixture> {
        let text = read_text(path).with_context(|| format!("cannot read fixture {}", path.display()))?;
        let not_a_fixture = || format!("{} is not a PortPreview fixture", path.display());
        // JSON is UTF-8; Windows PowerShell 5's `>` writes UTF-16, which
        // serde reads as no JSON at all "at line 1 column 1".
        if text.starts_with(&[0xFF, 0xFE]) || text.starts_with(&[0xFE, 0xFF]) {
            return Err(anyhow::anyhow!(
                "it is UTF-16 text (as Windows PowerShell 5's > writes it): save it as UTF-8"
            ))
            .with_context(not_a_fixture);
        }
        if text.trim_ascii_start().first() != Some(&b'{') {
            let is_suite = || std::str::from_utf8(&text).is_ok_and(crate::suite::Suite::lists_fixtures);
            if crate::suite::Suite::is_suite_path(path) && is_suite() {
                anyhow::bail!(
                    "{} is a suite, not a fixture: run it with portpreview check {}",
                    path.display(),
                    path.display()
                );
            }
            // serde would read an array as the struct's fields in order and
            // complain about "13 elements".
            serde_json::from_slice::<serde::de::IgnoredAny>(&text)
                .map_err(|err| anyhow::anyhow!("it is not JSON ({err})"))
                .with_context(not_a_fixture)?;
            return Err(anyhow::anyhow!("a fixture is one JSON object")).with_context(not_a_fixture);
        }
        // Read straight into the struct, which refuses a field given twice;
        // through a `Value` the last one would win without a word.
        let mut fixture: Fixture = match serde_json::from_slice(&text) {
            Ok(fixture) => fixture,
            Err(err) => match format_of(&text) {
                // A newer format may add fields: that it is newer is the
                // news, not the field this build does not know.
                Some(format) if format > FIXTURE_VERSION => {
                    return Err(anyhow::anyhow!(unsupported_format(format)))
                        .with_context(|| format!("invalid fixture {}", path.display()));
                }
                _ => {
                    let said =
                        misread(&text).unwrap_or_else(|| portpreview_shared::text::plain_types(&err.to_string()));
                    return Err(anyhow::anyhow!(said)).with_context(not_a_fixture);
                }
            },
        };
        let carried = fixture
            .validate()
            .with_context(|| format!("invalid fixture {}", path.display()))?;
        if fixture.event_key_source.is_empty() {
            fixture.identify(carried);
        } else if fixture.event_key_source.starts_with("sha256:") {
            // A key hashed from the content is worked out again: after the
            // body is edited, the recorded hash names an event not sent.
            let d = fixture.to_new_delivery();
            let rehashed = event_key_again(
                carried.provider,
                &d.request_headers,
                &d.request_body,
                &fixture.event_key_source,
            );
            fixture.identify(rehashed);
        }
        Ok(fixture)
    }

    /// Works out provider and event key as the history does, for a fixture
    /// written by hand or trimmed down without them: the report names the
    /// event, and `--fresh` and `--resign` know the provider.
    fn identify(&mut self, key: EventKey) {
        if self.provider.is_none() {
            self.provider = key.provider.map(|p| p.name().to_owned());
        }
        self.event_key = key.key;
        self.event_key_source = key.source;
    }

    /// Writes the fixture as pretty JSON, safe to print or `cat`.
    pub fn to_json(&self) -> String {
        let mut text = crate::render::json::to_terminal_text(self);
        text.push('\n');
        text
    }

    /// Checks the fixture, and gives back the event key its request
    /// carries, worked out once for every check that needs it.
    fn validate(&self) -> anyhow::Result<EventKey> {
        if self.portpreview_fixture != FIXTURE_VERSION {
            bail!(unsupported_format(self.portpreview_fixture));
        }
        if self.method.is_empty() || !self.path.starts_with('/') {
            bail!("a fixture needs a method and a path starting with /");
        }
        // As the method below: a path no request line can carry would be
        // an attempt that fails, blamed on the handler. Bytes past ASCII
        // are carried raw, as the tunnel carried them when it was recorded.
        if self.path.chars().any(|c| c.is_ascii_control()) || http::Uri::try_from(self.path.as_str()).is_err() {
            bail!(
                "path \"{}\" cannot be sent in a request: it is written as in a URL, with no spaces or control \
                 characters (a space is %20)",
                self.path
            );
        }
        // Caught here, a method no request can carry is a fixture that does
        // not parse (exit 2), not an attempt that failed in a verdict.
        if http::Method::from_bytes(self.method.as_bytes()).is_err() {
            bail!("method \"{}\" is not an HTTP method", self.method);
        }
        // Methods are case-sensitive: "post" is another method, which a
        // handler answers 501 or 405, and the verdict would blame it. A
        // fixture exported from the history holds what a caller sent, and
        // a replay sends that as it came.
        let upper = self.method.to_ascii_uppercase();
        let standard = [
            "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
        ];
        if upper != self.method && standard.contains(&upper.as_str()) && self.delivery_id.is_none() {
            bail!(
                "method \"{}\" is not {upper}: methods are case-sensitive, and a handler answers \"{}\" as a \
                 method it does not know",
                self.method,
                self.method
            );
        }
        // A target `check` cannot reach would fail every fixture alike,
        // and the error would not say which file it came from. It is the
        // target a tunnel forwarded to, so it is checked as `http` checks
        // one: a query in it would land inside every replayed path.
        if !self.target.is_empty() {
            crate::target::Target::parse_for_tunnel(&self.target).map_err(|e| anyhow::anyhow!("target: {e}"))?;
        }
        if let Some(at) = self.received_at.as_deref().filter(|at| parse_rfc3339_ms(at).is_none()) {
            bail!("received_at \"{at}\" is not an RFC 3339 UTC time such as \"2026-01-01T00:00:00.000Z\"");
        }
        // A mistyped URL would be signed over without a word, and every
        // Square or Twilio attempt refused for no reason the report shows.
        if let Some(url) = &self.tunnel_url {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                bail!("tunnel_url \"{url}\" is not an http:// or https:// URL");
            }
        }
        // As for the method and the path: a header no request can carry
        // would be left out of every attempt with a warning, and a run
        // without it (a signature header, say) could pass.
        for h in &self.headers {
            let value = h.bytes().map_err(anyhow::Error::msg)?;
            if http::HeaderName::from_bytes(h.name.as_bytes()).is_err() {
                bail!("header name \"{}\" cannot be sent in a request: header names are tokens, with no spaces, colons or control characters", h.name);
            }
            if http::HeaderValue::from_bytes(&value).is_err() {
                bail!("the value of header \"{}\" cannot be sent in a request: it holds a line break or another control character", h.name);
            }
        }
        self.body_bytes().map_err(anyhow::Error::msg)?;
        let d = self.to_new_delivery();
        let detected = event_key(&d.request_headers, &d.request_body, &[]);
        self.check_provider(&detected)?;
        // Keyed by the provider it names, as the history keyed it, where the
        // request no longer shows it (its signature header trimmed away).
        let carried = match self.provider.as_deref().and_then(Provider::from_name) {
            Some(named) if detected.provider != Some(named) => {
                event_key_again(Some(named), &d.request_headers, &d.request_body, "")
            }
            _ => detected,
        };
        if !self.event_key_source.is_empty() {
            self.check_event_key(&carried, &d.request_body)?;
        }
        Ok(carried)
    }

    /// Refuses a `provider` PortPreview does not know, or one the request
    /// itself contradicts: it chooses how `--resign` and `--fresh` treat the
    /// request, and a typo would pass for another provider without a word.
    fn check_provider(&self, carried: &EventKey) -> anyhow::Result<()> {
        let Some(name) = &self.provider else {
            return Ok(());
        };
        let Some(given) = Provider::from_name(name) else {
            let known: Vec<&str> = Provider::ALL.iter().map(|p| p.name()).collect();
            bail!(
                "provider \"{name}\" is not one PortPreview knows ({})",
                known.join(", ")
            );
        };
        match carried.provider {
            Some(detected) if detected != given => bail!(
                "provider {name:?} disagrees with the request, which is a {} delivery: set provider to it, \
                 or remove provider to have it worked out",
                detected.name()
            ),
            _ => Ok(()),
        }
    }

    /// Refuses an `event_key` that is not the provider event ID the request
    /// carries: after the ID in the body or a header is edited, the report
    /// would name one event while the handler is sent another.
    fn check_event_key(&self, carried: &EventKey, body: &[u8]) -> anyhow::Result<()> {
        // A source that names an ID ("body:/id", "header:X-GitHub-Delivery")
        // the request no longer carries: the body was emptied, say.
        let names_an_id = !self.event_key_source.starts_with("sha256:") && self.event_key_source != "none";
        if names_an_id && !carried.is_provider_id() {
            // Where the ID was, so the user knows where to put it back.
            let bytes = portpreview_shared::text::counted(body.len(), "byte", "bytes");
            let broken_json = self.event_key_source.starts_with("body:")
                && !body.is_empty()
                && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_err();
            // An edit that broke the JSON, more often than a lost ID.
            if broken_json {
                bail!(
                    "event_key_source {:?} reads the ID from a JSON body, and this body, {bytes}, is not JSON: \
                     mend the edit that broke it",
                    self.event_key_source,
                );
            }
            let whereabouts = match self.event_key_source.strip_prefix("header:") {
                Some(name) => format!("no {name} header"),
                None => format!("its body holds {bytes}"),
            };
            bail!(
                "event_key_source {:?} names an ID the request does not carry ({whereabouts}): put it back, \
                 or remove event_key and event_key_source to have them worked out",
                self.event_key_source,
            );
        }
        if carried.is_provider_id() && names_an_id && carried.source != self.event_key_source {
            bail!(
                "event_key_source {:?} disagrees with the request, which carries its {} event ID at {}: set \
                 event_key_source to it, or remove event_key and event_key_source to have them worked out",
                self.event_key_source,
                carried.provider.map_or("", |p| p.name()),
                carried.source
            );
        }
        if carried.is_provider_id() && carried.key != self.event_key {
            bail!(
                "event_key {:?} disagrees with the request, which carries {} event {:?} ({}): set event_key to it, \
                 or remove event_key and event_key_source to have them worked out",
                self.event_key,
                carried.provider.map_or("", |p| p.name()),
                carried.key,
                carried.source
            );
        }
        Ok(())
    }

    /// The request body bytes.
    pub fn body_bytes(&self) -> Result<Vec<u8>, String> {
        match (&self.body, &self.body_base64) {
            (None, None) => Ok(Vec::new()),
            (body, b64) => decode(body.as_deref(), b64.as_deref()).map_err(|e| format!("body: {e}")),
        }
    }

    /// The request as a delivery to send or store (marked as a replay by the caller if it is one).
    pub fn to_new_delivery(&self) -> NewDelivery {
        // `load` has checked every encoding; a hand-built fixture with a bad
        // one sends an empty value rather than failing later.
        let body = self.body_bytes().unwrap_or_default();
        NewDelivery {
            received_at_ms: self.received_at.as_deref().and_then(parse_rfc3339_ms).unwrap_or(0),
            tunnel_url: self.tunnel_url.clone().unwrap_or_default(),
            target: self.target.clone(),
            method: self.method.clone(),
            path: self.path.clone(),
            request_headers: self
                .headers
                .iter()
                .map(|h| Header::new(h.name.clone(), h.bytes().unwrap_or_default()))
                .collect(),
            request_body_size: body.len() as u64,
            request_body: body,
            provider: self.provider.clone(),
            event_key: self.event_key.clone(),
            event_key_source: self.event_key_source.clone(),
            replay_of: None,
            host_preserved: self.host_preserved,
            event_type: None,
        }
    }
}

fn split(encoded: Encoded) -> (Option<String>, Option<String>) {
    match encoded {
        Encoded::Text(text) => (Some(text), None),
        Encoded::Base64(b64) => (None, Some(b64)),
    }
}

fn decode(text: Option<&str>, b64: Option<&str>) -> Result<Vec<u8>, String> {
    match (text, b64) {
        (Some(text), None) => Ok(text.as_bytes().to_vec()),
        (None, Some(b64)) => STANDARD.decode(b64).map_err(|e| format!("bad base64: {e}")),
        (None, None) => Err("needs a value or a value_base64".into()),
        (Some(_), Some(_)) => Err("has both a text and a base64 form".into()),
    }
}

/// A fixture file's bytes, without the byte-order mark an editor may have
/// put before its JSON.
fn read_text(path: &Path) -> Result<Vec<u8>, crate::input_file::InputError> {
    crate::input_file::read_file(path, crate::input_file::MAX_REQUEST_FILE).map(crate::input_file::without_bom)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Outcome;

    fn recorded() -> Delivery {
        Delivery {
            id: 9,
            request: NewDelivery {
                received_at_ms: 1_700_000_000_123,
                tunnel_url: "http://127.0.0.1:39463/t/calm-otter".into(),
                target: "http://127.0.0.1:3000".into(),
                method: "POST".into(),
                path: "/hook?x=1".into(),
                request_headers: vec![
                    Header::new("x-dup", "1"),
                    Header::new("x-raw", vec![0xff, 0xfe]),
                    Header::new("x-dup", "2"),
                ],
                request_body: vec![0x00, 0xff, b'a'],
                request_body_size: 3,
                provider: Some("stripe".into()),
                // A binary body carries no ID: the key is its hash, with
                // the provider's name before it.
                event_key: hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"stripe\n\x00\xffa")),
                event_key_source: "sha256:body".into(),
                ..NewDelivery::default()
            },
            outcome: Some(Outcome {
                status: Some(202),
                ..Outcome::default()
            }),
            delivery_count: 1,
        }
    }

    #[test]
    fn a_fixture_file_gives_back_the_exact_request() {
        let d = recorded();
        let fixture = Fixture::from_delivery(&d);
        let json: serde_json::Value = serde_json::from_str(&fixture.to_json()).unwrap();
        assert_eq!(json["portpreview_fixture"], 1);
        assert_eq!(json["headers"][1]["value_base64"], "//4=");
        assert_eq!(json["body_base64"], "AP9h");
        assert_eq!(json["response_status"], 202);
        assert_eq!(
            json["tunnel_url"], "http://127.0.0.1:39463/t/calm-otter",
            "Square and Twilio sign the public URL"
        );

        let dir = crate::store::tests::ScratchDir::new("fixture");
        let path = dir.0.join("evt_1.json");
        std::fs::write(&path, fixture.to_json()).unwrap();
        let loaded = Fixture::load(&path).unwrap();
        assert_eq!(loaded, fixture);
        assert_eq!(loaded.to_new_delivery(), d.request);

        // An ID from a header that is gone is said to be missing there.
        let no_header = Fixture {
            event_key: "abc".into(),
            event_key_source: "header:X-GitHub-Delivery".into(),
            ..fixture.clone()
        };
        let carried = portpreview_shared::provider::event_key(&[], b"{}", &[]);
        let err = no_header.check_event_key(&carried, b"{}").unwrap_err().to_string();
        assert!(err.contains("(no X-GitHub-Delivery header)"), "{err}");
        // A body an edit left no longer JSON is said to be so.
        let broken = Fixture {
            event_key: "evt_1".into(),
            event_key_source: "body:/id".into(),
            ..fixture.clone()
        };
        let carried = portpreview_shared::provider::event_key(&[], b"{\"id\": \"evt_1\", broken", &[]);
        let err = broken
            .check_event_key(&carried, b"{\"id\": \"evt_1\", broken")
            .unwrap_err()
            .to_string();
        assert!(
            err.ends_with(
                "reads the ID from a JSON body, and this body, 22 bytes, is not JSON: mend the edit that broke it"
            ),
            "{err}"
        );

        // A status written as text is refused in words, not type names.
        std::fs::write(
            &path,
            fixture
                .to_json()
                .replace("\"response_status\": 202", "\"response_status\": \"202\""),
        )
        .unwrap();
        let err = format!("{:#}", Fixture::load(&path).unwrap_err());
        assert!(err.contains("expected a whole number") && !err.contains("u16"), "{err}");
    }

    #[test]
    fn a_fixture_without_its_event_key_gets_one_as_the_history_would() {
        let dir = crate::store::tests::ScratchDir::new("fixture-bare");
        let path = dir.0.join("bare.json");
        let text = r#"{"portpreview_fixture": 1, "method": "POST", "path": "/hook",
            "headers": [{"name": "stripe-signature", "value": "t=1,v1=00"}], "body": "{\"id\":\"evt_bare\"}"}"#;
        std::fs::write(&path, text).unwrap();
        let loaded = Fixture::load(&path).unwrap();
        assert_eq!(loaded.provider.as_deref(), Some("stripe"));
        assert_eq!(
            (loaded.event_key.as_str(), loaded.event_key_source.as_str()),
            ("evt_bare", "body:/id")
        );
    }

    #[test]
    fn a_fixture_whose_signature_was_trimmed_keeps_its_providers_key() {
        let dir = crate::store::tests::ScratchDir::new("fixture-trimmed");
        let path = dir.0.join("trimmed.json");
        // As exported, less the Stripe-Signature header: the request alone
        // no longer shows it is Stripe's, the fixture says so.
        let body = r#"{"id":"evt_trimmed","type":"invoice.paid"}"#;
        let text = format!(
            r#"{{"portpreview_fixture": 1, "method": "POST", "path": "/hook", "headers": [],
                "body": {body:?}, "provider": "stripe", "event_key": "evt_trimmed", "event_key_source": "body:/id"}}"#
        );
        std::fs::write(&path, text).unwrap();
        let loaded = Fixture::load(&path).unwrap();
        assert_eq!(
            (loaded.event_key.as_str(), loaded.event_key_source.as_str()),
            ("evt_trimmed", "body:/id")
        );

        // A key hashed from the content is hashed as the history hashed it.
        let unsigned = br#"{"order":7}"#;
        let as_recorded = portpreview_shared::provider::event_key_again(Some(Provider::Stripe), &[], unsigned, "");
        let text = format!(
            r#"{{"portpreview_fixture": 1, "method": "POST", "path": "/hook", "headers": [],
                "body": "{{\"order\":7}}", "provider": "stripe", "event_key": "{}", "event_key_source": "sha256:body"}}"#,
            as_recorded.key
        );
        std::fs::write(&path, text).unwrap();
        assert_eq!(Fixture::load(&path).unwrap().event_key, as_recorded.key);
    }

    #[test]
    fn an_edited_event_id_under_the_old_event_key_is_refused() {
        let dir = crate::store::tests::ScratchDir::new("fixture-edited");
        let path = dir.0.join("edited.json");
        let fixture = |id: &str, key: &str, source: &str| {
            serde_json::json!({"portpreview_fixture": 1, "method": "POST", "path": "/hook",
                "headers": [{"name": "stripe-signature", "value": "t=1,v1=00"}],
                "body": format!(r#"{{"id":"{id}"}}"#), "provider": "stripe",
                "event_key": key, "event_key_source": source})
            .to_string()
        };
        std::fs::write(&path, fixture("evt_EDITED", "evt_1", "body:/id")).unwrap();
        let err = format!("{:#}", Fixture::load(&path).unwrap_err());
        assert!(err.starts_with("invalid fixture "), "{err}");
        assert!(
            err.ends_with(
                "edited.json: event_key \"evt_1\" disagrees with the request, which carries stripe event \
                 \"evt_EDITED\" (body:/id): set event_key to it, or remove event_key and event_key_source \
                 to have them worked out"
            ),
            "{err}"
        );
        // Agreeing, or left out to be worked out, it loads.
        std::fs::write(&path, fixture("evt_EDITED", "evt_EDITED", "body:/id")).unwrap();
        assert_eq!(Fixture::load(&path).unwrap().event_key, "evt_EDITED");
        std::fs::write(&path, fixture("evt_EDITED", "", "")).unwrap();
        assert_eq!(Fixture::load(&path).unwrap().event_key, "evt_EDITED");
    }

    /// A key hashed from the content names what is sent: after the body is
    /// edited, it is worked out again from the fields it was hashed from.
    #[test]
    fn a_hashed_key_is_worked_out_again_from_an_edited_body() {
        let dir = crate::store::tests::ScratchDir::new("fixture-rehashed");
        let path = dir.0.join("edited.json");
        let fields = vec!["type".to_owned(), "/order/id".to_owned()];
        let recorded = event_key(&[], br#"{"type":"paid","order":{"id":"o1"}}"#, &fields);
        let edited = r#"{"type":"paid","order":{"id":"o9"}}"#;
        let text = serde_json::json!({"portpreview_fixture": 1, "method": "POST", "path": "/hook",
            "body": edited, "event_key": recorded.key, "event_key_source": recorded.source})
        .to_string();
        std::fs::write(&path, text).unwrap();
        let loaded = Fixture::load(&path).unwrap();
        assert_eq!(loaded.event_key_source, "sha256:fields(type,/order/id)");
        assert_eq!(loaded.event_key, event_key(&[], edited.as_bytes(), &fields).key);
        assert_ne!(loaded.event_key, recorded.key);
    }

    #[test]
    fn bad_fixtures_are_refused_with_the_file_named() {
        let dir = crate::store::tests::ScratchDir::new("fixture-bad");
        let cases = [
            r#"{"portpreview_fixture": 2, "method": "POST", "path": "/"}"#,
            r#"{"portpreview_fixture": 1, "method": "POST", "path": "/", "body_base64": "!!"}"#,
            r#"{"portpreview_fixture": 1, "method": "POST", "path": "/", "headers": [{"name": "a"}]}"#,
            r#"{"portpreview_fixture": 1, "method": "POST", "path": "/", "bdy": "typo"}"#,
            "not json",
            "[]",
            r#"{"portpreview_fixture": 1, "method": "GE T", "path": "/"}"#,
            r#"{"portpreview_fixture": 1, "method": "POST", "path": "/a\u001b[2Jb"}"#,
            r#"{"portpreview_fixture": 1, "method": "POST", "path": "/a\u007fb"}"#,
            r#"{"portpreview_fixture": 1, "method": "POST", "path": "/", "headers": [{"name": "stripe-signature", "value": "t=1,v1=0"}],
                "body": "{\"id\":\"evt_1\"}", "event_key": "evt_1", "event_key_source": "header:X-GitHub-Delivery"}"#,
            r#"{"portpreview_fixture": 1, "method": "POST", "path": "/", "tunnel_url": "127.0.0.1:1/t/x"}"#,
            r#"{"portpreview_fixture": 1, "method": "POST", "path": "/", "method": "DELETE"}"#,
            r#"{"portpreview_fixture": 1, "method": "POST", "path": "/", "received_at": "yesterday"}"#,
            r#"{"portpreview_fixture": 1, "method": "POST", "path": "/", "target": "not a url"}"#,
            r#"{"portpreview_fixture": 1, "method": "POST", "path": "/", "target": "ftp://127.0.0.1:1"}"#,
            r#"{"portpreview_fixture": 1, "method": "POST", "path": "/", "target": "http://127.0.0.1:1?q=1"}"#,
            r#"{"portpreview_fixture": 1, "method": "POST", "path": "/", "target": "http://127.0.0.1:1/base#x"}"#,
        ];
        for (n, text) in cases.iter().enumerate() {
            let path = dir.0.join(format!("bad{n}.json"));
            std::fs::write(&path, text).unwrap();
            let err = format!("{:#}", Fixture::load(&path).unwrap_err());
            assert!(err.contains(&format!("bad{n}.json")), "{err}");
            assert!(
                !err.contains("elements"),
                "serde's view of a struct as a sequence stays inside: {err}"
            );
        }
    }

    #[test]
    fn a_fixture_from_a_newer_portpreview_says_to_upgrade_whatever_else_it_holds() {
        let dir = crate::store::tests::ScratchDir::new("fixture-newer");
        for text in [
            r#"{"portpreview_fixture": 2, "method": "POST", "path": "/"}"#,
            r#"{"portpreview_fixture": 2, "method": "POST", "path": "/", "added_later": {"a": 1}}"#,
        ] {
            let path = dir.0.join("newer.json");
            std::fs::write(&path, text).unwrap();
            let err = format!("{:#}", Fixture::load(&path).unwrap_err());
            assert!(err.starts_with("invalid fixture "), "{err}");
            assert!(
                err.ends_with(
                    "fixture format 2 was written by a newer PortPreview (this portpreview reads format 1): \
                     upgrade portpreview to run it"
                ),
                "{err}"
            );
        }
    }

    /// What someone writing a fixture by hand gets wrong is named in
    /// their words, not serde's.
    #[test]
    fn hand_written_mistakes_are_named_for_what_they_are() {
        let dir = crate::store::tests::ScratchDir::new("fixture-by-hand");
        let path = dir.0.join("hand.json");
        let cases = [
            (
                r#"{"name": "pkg", "version": "1.0.0"}"#,
                "is not a PortPreview fixture: JSON without a portpreview_fixture field",
            ),
            (
                r#"{"method": "POST", "path": "/", "body": "{}"}"#,
                "is not a PortPreview fixture: it holds a request but no \"portpreview_fixture\": 1, which every \
                 fixture begins with",
            ),
            (
                r#"{"portpreview_fixture": 1, "method": "POST", "path": "/", "body": {"id": "evt_1"}}"#,
                "is not a PortPreview fixture: body is the request's bytes as one JSON string \
                 (a JSON body escaped: \"{\\\"id\\\": …}\"), or body_base64; not JSON itself",
            ),
            (
                r#"{"portpreview_fixture": 1, "method": "POST", "path": "/", "body": 42}"#,
                "is not a PortPreview fixture: body is the request's bytes as one JSON string \
                 (a JSON body escaped: \"{\\\"id\\\": …}\"), or body_base64; not JSON itself",
            ),
            (
                r#"{"portpreview_fixture": 1, "method": "post", "path": "/"}"#,
                "method \"post\" is not POST: methods are case-sensitive, and a handler answers \"post\" as a \
                 method it does not know",
            ),
        ];
        for (text, said) in cases {
            std::fs::write(&path, text).unwrap();
            let err = format!("{:#}", Fixture::load(&path).unwrap_err());
            assert!(err.ends_with(said), "{err}");
        }
    }

    #[test]
    fn an_exported_request_keeps_the_method_it_came_with() {
        let dir = crate::store::tests::ScratchDir::new("fixture-lower");
        let path = dir.0.join("lower.json");
        let text = r#"{"portpreview_fixture": 1, "method": "post", "path": "/", "delivery_id": 273}"#;
        std::fs::write(&path, text).unwrap();
        assert_eq!(Fixture::load(&path).unwrap().method, "post");
    }

    #[test]
    fn a_path_the_tunnel_carried_raw_can_be_sent_again() {
        let dir = crate::store::tests::ScratchDir::new("fixture-raw-path");
        let path = dir.0.join("raw.json");
        // A C1 character and a bidi override, as UTF-8 in the request
        // line: the relay and the client forward them as they came.
        let text = serde_json::json!({"portpreview_fixture": 1, "method": "POST", "path": "/h?q=\u{9b}31m\u{202e}"});
        std::fs::write(&path, text.to_string()).unwrap();
        let fixture = Fixture::load(&path).unwrap();
        assert_eq!(fixture.path, "/h?q=\u{9b}31m\u{202e}");
    }

    #[test]
    fn a_method_must_be_one_http_can_send() {
        let dir = crate::store::tests::ScratchDir::new("fixture-method");
        let path = dir.0.join("method.json");
        for (method, sendable) in [("POST", true), ("PROPFIND", true), ("GE T", false), ("GET\r\n", false)] {
            let text = serde_json::json!({"portpreview_fixture": 1, "method": method, "path": "/"}).to_string();
            std::fs::write(&path, text).unwrap();
            match Fixture::load(&path) {
                Ok(fixture) => assert!(sendable, "{method:?} was taken: {fixture:?}"),
                Err(err) => {
                    assert!(!sendable, "{method:?} was refused: {err:#}");
                    let err = format!("{err:#}");
                    assert!(err.starts_with("invalid fixture "), "{err}");
                    assert!(
                        err.ends_with(&format!("method \"{method}\" is not an HTTP method")),
                        "{err}"
                    );
                }
            }
        }
    }
}
