//! Event keys: the identity that history groups deliveries by, so a real
//! provider retry shows as the 2nd delivery of the same event.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::detect::{detect_in, Body};
use super::{canonical, form, header, inexact, pointer, Provider};
use crate::coding::{decode, Decoding};
use crate::message::Header;

/// Event IDs longer than this are not trusted as keys (a hostile body could
/// otherwise bloat every history row); the content hash is used instead.
const MAX_ID_LEN: usize = 256;

/// Top-level body fields that change from one attempt to the next, left out
/// of the content hash so retries of one event still hash alike. A bare
/// `timestamp` is not one: for many senders it is when the event happened,
/// and two readings an hour apart are two events.
const PER_ATTEMPT_FIELDS: &[&str] = &[
    "signature",
    "signatures",
    "webhookTimestamp",
    "webhook_timestamp",
    "sent_at",
    "sentAt",
    "attempt",
    "attempt_number",
    "delivery_attempt",
    "retry_count",
];

/// The identity of the event a delivery carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventKey {
    /// The provider that sent it, when recognised.
    pub provider: Option<Provider>,
    /// The key itself: the provider's event ID, or a SHA-256 hex digest.
    pub key: String,
    /// How the key was made: `header:X-GitHub-Delivery`, `body:/id`,
    /// `form:MessageSid+MessageStatus`, `sha256:body`, `sha256:fields(...)`,
    /// or `none` (an empty body, no ID: the key is empty).
    pub source: String,
    /// The event's type, as [`super::event_type`] reads it, worked out from
    /// the body the key was read from rather than decoded and parsed again.
    pub event_type: Option<String>,
}

impl EventKey {
    /// Whether the key is the provider's own event ID, as opposed to a
    /// content hash or no key at all.
    pub fn is_provider_id(&self) -> bool {
        self.provider.is_some() && !self.source.starts_with("sha256:") && self.source != "none"
    }
}

/// Works out the event key of one delivery.
///
/// The provider's event ID when it has one; otherwise a SHA-256 over the
/// canonical JSON of `key_fields` (top-level member names or JSON pointers)
/// when given and present, and failing that over the body's canonical JSON
/// (or its raw bytes).
pub fn event_key(headers: &[Header], body: &[u8], key_fields: &[String]) -> EventKey {
    let decoded = decode(headers, body, body.len() as u64);
    let body = Body::new(plain(&decoded, body));
    key_from(detect_in(headers, &body), headers, &body, key_fields)
}

/// The body as its handler reads it: a gzip or deflate body decoded, as
/// `show` and the TUI show it, so that a compressed event is keyed by the
/// ID inside it rather than by a hash of its compressed bytes.
fn plain<'a>(decoded: &'a Decoding, sent: &'a [u8]) -> &'a [u8] {
    match decoded {
        Decoding::Done { plain, .. } => plain,
        Decoding::NotCoded | Decoding::Failed { .. } => sent,
    }
}

/// Works out the event key of a delivery whose body was stored cut short,
/// from the start that was kept: the provider's event ID when the start
/// holds it (a Stripe event's `id` comes first), as [`event_key`] finds it
/// otherwise.
pub fn event_key_of_start(headers: &[Header], start: &[u8], key_fields: &[String]) -> EventKey {
    let body = Body::start(start);
    key_from(detect_in(headers, &body), headers, &body, key_fields)
}

/// Works out again the key of a delivery recorded from `provider` with a
/// key made as `source` says, after its request was edited: by that
/// provider whether or not the request still shows it (a replay that
/// dropped the signature header sends that provider's event all the
/// same), and from the same chosen fields when `source` names them.
pub fn event_key_again(provider: Option<Provider>, headers: &[Header], body: &[u8], source: &str) -> EventKey {
    let key_fields = key_fields_of(source).unwrap_or_default();
    let decoded = decode(headers, body, body.len() as u64);
    key_from(provider, headers, &Body::new(plain(&decoded, body)), &key_fields)
}

fn key_from(provider: Option<Provider>, headers: &[Header], body: &Body<'_>, key_fields: &[String]) -> EventKey {
    // A provider's own event ID is the truth about identity; chosen fields
    // only stand in for events that carry none.
    let found = provider
        .and_then(|p| provider_id(p, headers, body))
        .or_else(|| {
            (!key_fields.is_empty())
                .then(|| fields_key(provider, body, key_fields))
                .flatten()
        })
        .unwrap_or_else(|| content_key(provider, body));
    EventKey {
        provider,
        key: found.0,
        source: found.1,
        event_type: super::event_type::in_body(provider, headers, body),
    }
}

pub(crate) fn provider_id(provider: Provider, headers: &[Header], body: &Body<'_>) -> Option<(String, String)> {
    use Provider::*;
    match provider {
        Stripe | Discord => from_body(body, &["id"]),
        Github => from_header(headers, "X-GitHub-Delivery"),
        Shopify => from_header(headers, "X-Shopify-Webhook-Id")
            .or_else(|| from_header(headers, "Shopify-Webhook-Id"))
            // Shared by every subscription the event reaches: the identity
            // only when the delivery does not carry its subscription's own.
            .or_else(|| from_header(headers, "X-Shopify-Event-Id"))
            .or_else(|| from_header(headers, "Shopify-Event-Id")),
        StandardWebhooks => from_header(headers, "webhook-id").or_else(|| from_header(headers, "svix-id")),
        Slack | Paddle | Square => from_body(body, &["event_id"]),
        // Not `X-Gitlab-Webhook-UUID`: GitLab makes one for every request,
        // its retries' included, so a retry keyed by it would be an event
        // of its own. Where GitLab sends no `Idempotency-Key`, the body is
        // what a retry shares.
        Gitlab => from_header(headers, "Idempotency-Key"),
        Twilio => from_header(headers, "I-Twilio-Idempotency-Token").or_else(|| twilio_sid(body)),
        Linear => from_header(headers, "Linear-Delivery").or_else(|| linear_change(body)),
        Mailgun => from_body(body, &["event-data", "id"]),
        Sendgrid => from_body(body, &["0", "sg_event_id"]),
    }
}

/// What keeps apart deliveries that share an event key without being
/// retries of one another. GitHub sends one event to a repository's hook
/// and to its organisation's hook under one delivery ID; only the hook ID
/// tells the two apart. `None` for every other provider.
pub fn event_scope(provider: Option<Provider>, headers: &[Header]) -> Option<String> {
    match provider? {
        Provider::Github => {
            let hook = std::str::from_utf8(header(headers, "X-GitHub-Hook-ID")?).ok()?;
            usable(hook).map(str::to_owned)
        }
        _ => None,
    }
}

/// An ID fit to be a key: no provider issues empty, huge or control-laden
/// IDs, so such a value is not trusted (the content hash is used instead).
/// Nor is one holding what decoding bytes that are not UTF-8 leaves in
/// their place: two different IDs would read as one.
fn usable(id: &str) -> Option<&str> {
    let id = id.trim();
    (!id.is_empty()
        && id.len() <= MAX_ID_LEN
        && !id.chars().any(|c| c.is_control() || c == char::REPLACEMENT_CHARACTER))
    .then_some(id)
}

fn from_header(headers: &[Header], name: &str) -> Option<(String, String)> {
    let value = std::str::from_utf8(header(headers, name)?).ok()?;
    Some((usable(value)?.to_owned(), format!("header:{name}")))
}

fn from_body(body: &Body<'_>, path: &[&str]) -> Option<(String, String)> {
    let tokens: Vec<String> = path.iter().map(|s| (*s).to_owned()).collect();
    let id = match &*body.value(&tokens)? {
        Value::String(s) => usable(s)?.to_owned(),
        // As written when parsing changed it: two IDs past 64 bits would
        // otherwise read as one float.
        Value::Number(n) => match body.span(&tokens).and_then(|r| body.raw().get(r)) {
            Some(written) if !inexact::numbers(written, &[]).is_empty() => {
                usable(std::str::from_utf8(written).ok()?)?.to_owned()
            }
            _ => n.to_string(),
        },
        _ => return None,
    };
    Some((id, format!("body:/{}", path.join("/"))))
}

/// Twilio without its idempotency token: the resource SID plus its status,
/// since one message or call reports several statuses in turn.
fn twilio_sid(body: &Body<'_>) -> Option<(String, String)> {
    let pairs = form::parse(body.raw())?;
    let (sid_name, status_name) = [
        ("MessageSid", "MessageStatus"),
        ("SmsSid", "SmsStatus"),
        ("CallSid", "CallStatus"),
    ]
    .into_iter()
    .find(|(sid, _)| form::value(&pairs, sid).and_then(usable).is_some())?;
    let sid = usable(form::value(&pairs, sid_name)?)?;
    // A status that is there but unfit leaves the content hash to key the
    // delivery: the SID alone would make it one event with every status.
    match form::value(&pairs, status_name).filter(|status| !status.trim().is_empty()) {
        Some(status) => Some((
            format!("{sid}:{}", usable(status)?),
            format!("form:{sid_name}+{status_name}"),
        )),
        None => Some((sid.to_owned(), format!("form:{sid_name}"))),
    }
}

/// Linear without its delivery header: the change the event tells of, as
/// Linear's docs identify one (its kind, the action, the object and when
/// it was updated), every part present.
fn linear_change(body: &Body<'_>) -> Option<(String, String)> {
    let parts = LINEAR_CHANGE
        .iter()
        .map(|path| from_body(body, path).map(|(part, _)| part))
        .collect::<Option<Vec<_>>>()?;
    let names: Vec<String> = LINEAR_CHANGE.iter().map(|path| path.join(".")).collect();
    Some((parts.join("|"), format!("body:{}", names.join("|"))))
}

/// The members that identify a change Linear tells of.
const LINEAR_CHANGE: [&[&str]; 4] = [&["type"], &["action"], &["data", "id"], &["data", "updatedAt"]];

/// SHA-256 over the canonical JSON of the chosen fields; `None` unless the
/// body holds every one of them. Hashing the fields a body does hold would
/// make every event missing the others one event: `type` alone keys every
/// `invoice.paid` as a retry of the first, the false duplicate the history
/// exists to avoid. Such a body is keyed by its content instead.
fn fields_key(provider: Option<Provider>, body: &Body<'_>, key_fields: &[String]) -> Option<(String, String)> {
    let mut chosen = serde_json::Map::new();
    // Numbers in the chosen fields that parsing changed, as written.
    let mut written = Vec::new();
    if let Some(json) = body.json() {
        for field in key_fields {
            let tokens = field_tokens(json, field)?;
            let value = pointer::get(json, &tokens)?;
            if holds_float(value) {
                let span = pointer::span(body.raw(), &tokens).and_then(|r| body.raw().get(r));
                written.extend(inexact::numbers(span.unwrap_or_default(), &[]));
            }
            chosen.insert(field.clone(), value.clone());
        }
    } else {
        let pairs = form::parse(body.raw())?;
        for field in key_fields {
            // Bytes that are not UTF-8 decode alike: such a field keys nothing.
            let value = form::value(&pairs, field).filter(|v| !v.contains(char::REPLACEMENT_CHARACTER))?;
            chosen.insert(field.clone(), Value::String(value.to_owned()));
        }
    }
    let mut canonical = Vec::with_capacity(128);
    canonical::write(&Value::Object(chosen), &mut canonical);
    // The same fields from two providers are two events, as for a key
    // hashed over the whole body. Marked as fields: `{"order":5}` hashed
    // whole is another event than the field `order` of `{"order":5,"x":1}`,
    // though their canonical JSON is the same (a tunnel with
    // `--key-fields` and one without, writing one history).
    let mut hasher = hasher_for(provider);
    hasher.update(b"fields\n");
    hasher.update(&canonical);
    hash_written(&mut hasher, &written);
    Some((
        hex::encode(hasher.finalize()),
        format!("{FIELDS_SOURCE_PREFIX}{})", key_fields.join(",")),
    ))
}

/// How a key hashed from chosen fields names them: `sha256:fields(a,/b/c)`.
const FIELDS_SOURCE_PREFIX: &str = "sha256:fields(";

/// The fields a `sha256:fields(...)` key was hashed from, so the key can be
/// worked out again from an edited body; `None` for any other source.
pub fn key_fields_of(source: &str) -> Option<Vec<String>> {
    let list = source.strip_prefix(FIELDS_SOURCE_PREFIX)?.strip_suffix(')')?;
    Some(list.split(',').map(str::to_owned).collect())
}

/// Where one `--key-fields` entry leads, as pointer tokens: a JSON
/// pointer, or a top-level member, or failing that, for a name with dots,
/// the member its path leads to (`data.object.id`, as providers' docs
/// write paths). `None` when the body holds no such value.
fn field_tokens(json: &Value, field: &str) -> Option<Vec<String>> {
    if let Some(tokens) = pointer::parse(field) {
        return Some(tokens);
    }
    if json.get(field).is_some() {
        return Some(vec![field.to_owned()]);
    }
    let tokens: Vec<String> = field.split('.').map(str::to_owned).collect();
    (tokens.len() > 1 && pointer::get(json, &tokens).is_some()).then_some(tokens)
}

/// Whether `value` holds a number parsed as a float, the only kind that
/// may differ from what was written.
fn holds_float(value: &Value) -> bool {
    match value {
        Value::Number(n) => n.is_f64(),
        Value::Array(items) => items.iter().any(holds_float),
        Value::Object(map) => map.values().any(holds_float),
        _ => false,
    }
}

/// Adds to a content hash the numbers parsing changed, as written: nothing
/// when there are none, so other keys stay as they were.
fn hash_written(hasher: &mut Sha256, written: &[&[u8]]) {
    for number in written {
        hasher.update(b"\n");
        hasher.update(number);
    }
}

/// SHA-256 over provider + canonical JSON without per-attempt fields, or
/// over provider + the raw bytes when the body is not JSON: the same bytes
/// from two senders are two events either way. An empty body has no
/// content to tell events apart: it gets no key, so health checks and
/// browser hits are never shown as retries of one another.
fn content_key(provider: Option<Provider>, body: &Body<'_>) -> (String, String) {
    if body.raw().is_empty() {
        return (String::new(), "none".to_owned());
    }
    let mut hasher = hasher_for(provider);
    match body.json() {
        Some(json) => {
            hasher.update(canonical::to_vec_without(json, PER_ATTEMPT_FIELDS));
            if holds_float(json) {
                hash_written(&mut hasher, &inexact::numbers(body.raw(), PER_ATTEMPT_FIELDS));
            }
        }
        None => hasher.update(body.raw()),
    }
    (hex::encode(hasher.finalize()), "sha256:body".to_owned())
}

/// Starts a content hash with what it always begins with: the provider's
/// name and a newline.
fn hasher_for(provider: Option<Provider>) -> Sha256 {
    let mut hasher = Sha256::new();
    hasher.update(provider.map_or("unknown", Provider::name));
    hasher.update(b"\n");
    hasher
}

#[cfg(test)]
#[path = "key_tests.rs"]
mod tests;
