//! Fresh identities: the same event under a new, never-seen ID, so a
//! handler treats it as new (the `--fresh` burst that catches
//! check-then-insert races). Re-sign afterwards: the body may have changed.

use serde_json::Value;

use super::detect::Body;
use super::key::provider_id;
use super::{form, has_header, header, ids, pointer, set_header, Provider};
use crate::message::Header;

const FRESH_FIELD_HINT: &str = "name the field that holds its ID with --fresh-field /json/pointer, \
     --fresh-field form:name (a form-encoded body) or --fresh-field header:Name";

/// Why an event could not be given a fresh identity.
#[derive(Debug, thiserror::Error)]
pub enum FreshError {
    /// Nothing in the request is known to hold the event's ID.
    #[error("cannot give this event a fresh identity: {0}; {FRESH_FIELD_HINT}")]
    NoIdentity(String),
    /// `--fresh-field` is neither a JSON pointer nor `form:name` nor `header:Name`.
    #[error("--fresh-field {0}: expected a JSON pointer such as /data/id, form:name or header:Name")]
    BadField(String),
    /// `--fresh-field` points at nothing in the body.
    #[error("--fresh-field {0}: the body has no such field")]
    FieldMissing(String),
    /// `--fresh-field header:Name` names a header the request does not carry.
    #[error("--fresh-field {0}: the request has no such header")]
    HeaderMissing(String),
    /// `--fresh-field` is a JSON pointer but the body is not JSON.
    #[error("--fresh-field {0}: the body is not JSON (a form-encoded body's field is named form:name)")]
    NotJson(String),
    /// `--fresh-field form:name` but the body is not form-encoded.
    #[error("--fresh-field {0}: the body is not form-encoded")]
    NotForm(String),
    /// `--fresh-field` points at an object, array, boolean or null.
    #[error("--fresh-field {0}: that field holds {1}, not an ID")]
    NotAnId(String, &'static str),
}

/// Gives the event a new ID where its provider keeps one, and in
/// `fresh_field` (a JSON pointer into the body, `form:name` or
/// `header:Name`) when set: a handler that dedups on the event's ID and on
/// the payment's sees a new event only when both are new. The provider's
/// retry markers go too: a never-seen event is no retry. Returns the new
/// event key: the provider's new ID, or the new value written in
/// `fresh_field` where the provider keeps none.
pub fn fresh_identity(
    provider: Option<Provider>,
    headers: &mut Vec<Header>,
    body: &mut Vec<u8>,
    fresh_field: Option<&str>,
) -> Result<String, FreshError> {
    // Beside a field, the provider's ID is renewed where the request
    // carries one: a Slack slash command or a Twilio JSON post has none,
    // and one added would be no identity its handler reads.
    let own_id = match fresh_field {
        None => provider,
        Some(_) => provider.filter(|&p| carries_own_id(p, headers, body)),
    };
    // Nor is a header added to a request keyed otherwise (an older
    // GitLab's hook, by its content): its handler dedups on something
    // else, which would stay as it was.
    if let (Some(p), None) = (own_id, fresh_field) {
        if let Some(name) = optional_id_header(p).filter(|_| !carries_own_id(p, headers, body)) {
            return Err(FreshError::NoIdentity(format!(
                "this {p} request carries no {name} header, the ID its handler dedups on"
            )));
        }
    }
    let field_value = fresh_field.map(|field| renew_field(field, headers, body)).transpose()?;
    let renewed = own_id.map(|provider| {
        renew(provider, headers, body)
            .map(|new_id| provider_id(provider, headers, &Body::new(body)).map_or(new_id, |(key, _)| key))
    });
    let key = match (renewed, field_value) {
        (Some(Ok(key)), _) => key,
        // The request carries the ID and it cannot be renewed: the burst
        // would go out under the recorded one.
        (Some(Err(err)), _) => return Err(err),
        (None, Some(value)) => value,
        (None, None) => {
            return Err(FreshError::NoIdentity(
                "no provider was recognised, so which field holds its ID is unknown".into(),
            ))
        }
    };
    // A handler that skips retries, as Slack advises, would skip every
    // fresh copy of a retried delivery and pass the burst unjudged.
    for name in provider.map_or(&[][..], Provider::retry_headers) {
        headers.retain(|h| !h.name.eq_ignore_ascii_case(name));
    }
    Ok(key)
}

/// How the key [`fresh_identity`] returned was made, in the request it
/// renewed: the provider's own ID where the request carries one, else the
/// field renewed (`body:/id`, `header:Name`, `form:name`).
pub fn fresh_key_source(
    provider: Option<Provider>,
    headers: &[Header],
    body: &[u8],
    fresh_field: Option<&str>,
) -> Option<String> {
    let own = provider.filter(|&p| carries_own_id(p, headers, body));
    if let Some((_, source)) = own.and_then(|p| provider_id(p, headers, &Body::new(body))) {
        return Some(source);
    }
    let field = fresh_field?;
    Some(match parse_field(field).ok()? {
        Field::Pointer(_) => format!("body:{field}"),
        Field::Header(name) => format!("header:{name}"),
        Field::Form(_) => field.to_owned(),
    })
}

/// The header that carries a provider's event ID, for those whose
/// deliveries may come without it, keyed otherwise: older GitLab sends
/// no Idempotency-Key (the body's hash keys such a hook), and a
/// Linear delivery without Linear-Delivery is keyed by the change it
/// describes. A provider that always sends its ID header gets one put
/// back when a request lacks it (`--drop-header`, then `--fresh`).
fn optional_id_header(provider: Provider) -> Option<&'static str> {
    match provider {
        Provider::Gitlab => Some("Idempotency-Key"),
        Provider::Linear => Some("Linear-Delivery"),
        _ => None,
    }
}

/// Whether the request carries the provider's own event ID where a fresh
/// identity renews it: in its header, for a provider whose ID header may
/// be missing.
fn carries_own_id(provider: Provider, headers: &[Header], body: &[u8]) -> bool {
    match optional_id_header(provider) {
        Some(name) => has_header(headers, name),
        None => provider_id(provider, headers, &Body::new(body)).is_some(),
    }
}

/// Where a `--fresh-field` points.
enum Field<'a> {
    /// `header:Name`.
    Header(&'a str),
    /// `form:name`.
    Form(&'a str),
    /// A JSON pointer, as tokens.
    Pointer(Vec<String>),
}

/// Reads a `--fresh-field` as written: a JSON pointer such as `/data/id`,
/// `form:name` or `header:Name`.
fn parse_field(field: &str) -> Result<Field<'_>, FreshError> {
    let bad = || FreshError::BadField(field.to_owned());
    if let Some(name) = field.strip_prefix("header:") {
        let name = name.trim();
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
            return Err(bad());
        }
        return Ok(Field::Header(name));
    }
    if let Some(name) = field.strip_prefix("form:") {
        return match name.is_empty() {
            true => Err(bad()),
            false => Ok(Field::Form(name)),
        };
    }
    let tokens = pointer::parse(field).filter(|t| !t.is_empty()).ok_or_else(bad)?;
    Ok(Field::Pointer(tokens))
}

/// Checks a `--fresh-field` as written, before any request is at hand.
pub fn check_field(field: &str) -> Result<(), FreshError> {
    parse_field(field).map(drop)
}

fn renew_field(field: &str, headers: &mut Vec<Header>, body: &mut Vec<u8>) -> Result<String, FreshError> {
    let tokens = match parse_field(field)? {
        Field::Header(name) => return renew_header_field(field, name, headers),
        Field::Form(name) => return renew_form_field(field, name, body),
        Field::Pointer(tokens) => tokens,
    };
    let old = pointer::value_at(body, &tokens).map_err(|err| match err {
        pointer::ReplaceError::NotJson => FreshError::NotJson(field.to_owned()),
        pointer::ReplaceError::Missing => FreshError::FieldMissing(field.to_owned()),
    })?;
    let new = match old {
        Value::String(s) => Value::String(ids::like(&s)),
        Value::Number(n) => serde_json::from_str(&ids::digits(n.to_string().len().clamp(6, 18))).unwrap_or(Value::Null),
        Value::Object(_) => return Err(FreshError::NotAnId(field.to_owned(), "an object")),
        Value::Array(_) => return Err(FreshError::NotAnId(field.to_owned(), "an array")),
        Value::Bool(_) | Value::Null => return Err(FreshError::NotAnId(field.to_owned(), "no string or number")),
    };
    set_body(body, &tokens, &new).map_err(|_| FreshError::FieldMissing(field.to_owned()))?;
    Ok(match new {
        Value::String(s) => s,
        other => other.to_string(),
    })
}

/// Renews the value of header `name` (`field` is the flag as given).
fn renew_header_field(field: &str, name: &str, headers: &mut Vec<Header>) -> Result<String, FreshError> {
    // A header the delivery never carried is not where its handler
    // finds the event's identity: added, it would leave the recorded
    // identity in place, and the burst would prove nothing.
    let old = header(headers, name).ok_or_else(|| FreshError::HeaderMissing(field.to_owned()))?;
    let old = std::str::from_utf8(old).unwrap_or_default();
    let new = if old.is_empty() {
        ids::uuid()
    } else {
        ids::like(old.trim())
    };
    set_header(headers, name, new.clone());
    Ok(new)
}

/// Renews the value of form field `name` (`field` is the flag as given):
/// a Slack slash command, a Twilio callback, any form-encoded post.
fn renew_form_field(field: &str, name: &str, body: &mut Vec<u8>) -> Result<String, FreshError> {
    let pairs = form::parse(body).ok_or_else(|| FreshError::NotForm(field.to_owned()))?;
    let old = form::value(&pairs, name).ok_or_else(|| FreshError::FieldMissing(field.to_owned()))?;
    // A form field holding a JSON document (Slack's interactive `payload`)
    // keeps its ID inside, where a form field name cannot point.
    if old.trim_start().starts_with(['{', '[']) {
        return Err(FreshError::NotAnId(field.to_owned(), "a JSON document"));
    }
    let new = match old {
        "" => ids::uuid(),
        // As for a number in JSON: a short one would come round again.
        digits if digits.bytes().all(|b| b.is_ascii_digit()) => ids::digits(digits.len().clamp(6, 18)),
        other => ids::like(other),
    };
    *body = form::replace_value(body, name, old, &form::encode(&new))
        .ok_or_else(|| FreshError::FieldMissing(field.to_owned()))?;
    Ok(new)
}

fn set_body(body: &mut Vec<u8>, tokens: &[String], new: &Value) -> Result<(), pointer::ReplaceError> {
    pointer::replace(body, tokens, new)
}

/// Replaces the string at top-level or nested `path` when present.
fn renew_body(provider: Provider, body: &mut Vec<u8>, path: &[&str], new: String) -> Result<String, FreshError> {
    let tokens: Vec<String> = path.iter().map(|s| (*s).to_owned()).collect();
    let looks_like_json = body
        .trim_ascii_start()
        .first()
        .is_some_and(|b| matches!(b, b'{' | b'['));
    match set_body(body, &tokens, &Value::String(new.clone())) {
        Ok(()) => Ok(new),
        // The event key reads the ID from such a body all the same, so
        // "no /id" would contradict what `history` shows.
        Err(pointer::ReplaceError::NotJson) if looks_like_json => Err(FreshError::NoIdentity(format!(
            "this {provider} request's body is not valid JSON (a raw control character in a string, or bytes \
             that are not UTF-8), so its /{} cannot be renewed",
            path.join("/")
        ))),
        Err(_) => Err(FreshError::NoIdentity(format!(
            "this {provider} request has no /{} in its body",
            path.join("/")
        ))),
    }
}

/// Sets each header in `names` that is present to `value`; adds the first
/// one when none is.
fn renew_headers(headers: &mut Vec<Header>, names: &[&str], value: &str) -> String {
    let present: Vec<&str> = names.iter().copied().filter(|n| has_header(headers, n)).collect();
    for name in if present.is_empty() { &names[..1] } else { &present[..] } {
        set_header(headers, name, value);
    }
    value.to_owned()
}

fn renew(provider: Provider, headers: &mut Vec<Header>, body: &mut Vec<u8>) -> Result<String, FreshError> {
    use Provider::*;
    match provider {
        Stripe => renew_body(provider, body, &["id"], format!("evt_{}", ids::alnum(24))),
        Github => Ok(renew_headers(headers, &["x-github-delivery"], &ids::uuid())),
        Shopify => {
            const WEBHOOK_ID: [&str; 2] = ["x-shopify-webhook-id", "shopify-webhook-id"];
            const EVENT_ID: [&str; 2] = ["x-shopify-event-id", "shopify-event-id"];
            // A delivery known by its event ID alone stays so: a webhook ID
            // added to it would be a header it never had.
            let by_event = !WEBHOOK_ID.iter().any(|name| has_header(headers, name))
                && EVENT_ID.iter().any(|name| has_header(headers, name));
            if by_event {
                return Ok(renew_headers(headers, &EVENT_ID, &ids::uuid()));
            }
            renew_optional(headers, &EVENT_ID, &ids::uuid());
            Ok(renew_headers(headers, &WEBHOOK_ID, &ids::uuid()))
        }
        StandardWebhooks => Ok(renew_headers(
            headers,
            &["webhook-id", "svix-id"],
            &format!("msg_{}", ids::alnum(27)),
        )),
        Slack => renew_body(provider, body, &["event_id"], format!("Ev{}", ids::upper_alnum(10))),
        Paddle => {
            // A new event reaches each destination under a new notification too.
            let _ = set_body(
                body,
                &["notification_id".to_owned()],
                &Value::String(format!("ntf_{}", ids::lower_alnum(26))),
            );
            renew_body(provider, body, &["event_id"], format!("evt_{}", ids::lower_alnum(26)))
        }
        Square => renew_body(provider, body, &["event_id"], ids::uuid()),
        Gitlab => {
            renew_optional(headers, &["x-gitlab-event-uuid"], &ids::uuid());
            Ok(renew_headers(
                headers,
                &["idempotency-key", "x-gitlab-webhook-uuid", "webhook-id"],
                &ids::uuid(),
            ))
        }
        Linear => Ok(renew_headers(headers, &["linear-delivery"], &ids::uuid())),
        Discord => renew_body(provider, body, &["id"], ids::digits(19)),
        Twilio => Ok(renew_twilio(headers, body)),
        Mailgun => {
            // Handlers that guard against replays remember the token.
            let _ = set_body(
                body,
                &["signature".to_owned(), "token".to_owned()],
                &Value::String(ids::hex_digits(50)),
            );
            renew_body(provider, body, &["event-data", "id"], ids::alnum(22))
        }
        Sendgrid => renew_sendgrid(body),
    }
}

fn renew_optional(headers: &mut Vec<Header>, names: &[&str], value: &str) {
    for name in names {
        if has_header(headers, name) {
            set_header(headers, name, value);
        }
    }
}

/// A new idempotency token, and new resource SIDs in a form body: handlers
/// without the token key on `MessageSid`/`CallSid`.
fn renew_twilio(headers: &mut Vec<Header>, body: &mut Vec<u8>) -> String {
    let mut renewed = None;
    if let Some(pairs) = form::parse(body) {
        for name in ["MessageSid", "CallSid"] {
            let Some(old) = form::value(&pairs, name).filter(|v| v.len() > 2 && v.is_ascii()) else {
                continue;
            };
            let new = format!("{}{}", &old[..2], ids::hex_digits(32));
            // Twilio repeats a message's SID as SmsSid and SmsMessageSid.
            for alias in [name, "SmsSid", "SmsMessageSid"] {
                if let Some(edited) = form::replace_value(body, alias, old, &new) {
                    *body = edited;
                }
            }
            renewed.get_or_insert(new);
        }
    }
    if has_header(headers, "i-twilio-idempotency-token") || renewed.is_none() {
        let token = ids::uuid();
        set_header(headers, "i-twilio-idempotency-token", token.clone());
        return token;
    }
    renewed.unwrap_or_default()
}

/// Every event of the batch gets a new `sg_event_id`; the first is the key.
fn renew_sendgrid(body: &mut Vec<u8>) -> Result<String, FreshError> {
    let missing = || FreshError::NoIdentity("this sendgrid request has no sg_event_id in its events".into());
    let mut doc: Value = serde_json::from_slice(body).map_err(|_| missing())?;
    let events = doc.as_array_mut().ok_or_else(missing)?;
    let mut first = None;
    for event in events.iter_mut() {
        if let Some(id) = event.get_mut("sg_event_id") {
            let new = ids::alnum(22);
            first.get_or_insert_with(|| new.clone());
            *id = Value::String(new);
        }
    }
    let first = first.ok_or_else(missing)?;
    *body = serde_json::to_vec(&doc).map_err(|_| missing())?;
    Ok(first)
}

#[cfg(test)]
#[path = "fresh_tests.rs"]
mod tests;
