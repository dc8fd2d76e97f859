//! Re-signing a recorded request with a current timestamp, the way its
//! provider signs it, so a handler that checks signatures and freshness
//! accepts a replay. Facts: `providers.md`, "Signatures".

use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha1::Sha1;
use sha2::Sha256;

use super::{form, has_header, header, pointer, set_header, Provider};
use crate::message::Header;

/// Why a request could not be re-signed.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// The provider signs with its own private key, which nobody else holds.
    #[error("{0} requests are signed with {brand}'s private key: only a byte-identical replay verifies", brand = brand(.0))]
    PrivateKey(Provider),
    /// The signature covers the URL the provider called, which the request
    /// itself does not carry.
    #[error("{0} signs the notification URL along with the body: give the public URL exactly as the handler sees it")]
    NeedsUrl(Provider),
    /// The secret is unusable for this provider.
    #[error("bad signing secret: {0}")]
    BadSecret(String),
    /// Something the signature covers is missing from the request.
    #[error("cannot re-sign this {provider} request: it has no {part}")]
    MissingPart {
        /// The provider being signed for.
        provider: Provider,
        /// What is missing, e.g. "webhook-id header".
        part: &'static str,
    },
    /// The body is not in the shape the provider's signature needs.
    #[error("cannot re-sign this {0} request: its body is not the JSON {0} sends")]
    Unsupported(Provider),
    /// The request names a signing algorithm PortPreview does not know.
    #[error("cannot re-sign this {provider} request: it names a signing algorithm PortPreview does not know, {named}")]
    UnknownAlgorithm {
        /// The provider being signed for.
        provider: Provider,
        /// The algorithm as the request names it.
        named: String,
    },
}

impl Provider {
    /// Whether a request can be re-signed with a shared secret: false for
    /// providers that sign with a private key of their own.
    pub fn resignable(self) -> bool {
        !matches!(self, Provider::Discord | Provider::Sendgrid)
    }

    /// Whether the signature covers the URL the provider called (Square,
    /// Twilio), which the request itself does not carry.
    pub fn signs_url(self) -> bool {
        matches!(self, Provider::Square | Provider::Twilio)
    }
}

fn brand(provider: &Provider) -> &'static str {
    match provider {
        Provider::Discord => "Discord",
        Provider::Sendgrid => "SendGrid",
        _ => "the provider",
    }
}

/// Whether `headers` carry a plain shared token, not a signature: a GitLab
/// hook's secret token (`X-Gitlab-Token`), which neither time nor a new
/// body voids, so the recorded one still verifies.
pub fn token_only(provider: Provider, headers: &[Header]) -> bool {
    provider == Provider::Gitlab && !has_header(headers, "webhook-id")
}

/// Signs `headers`/`body` afresh for `provider` at `now`, with `secret`.
///
/// Signature headers are replaced in place (header order kept) or added
/// when missing. Linear and Mailgun carry their timestamp in the body, which
/// is rewritten. Square and Twilio sign the notification `url` too.
pub fn resign(
    provider: Provider,
    secret: &str,
    headers: &mut Vec<Header>,
    body: &mut Vec<u8>,
    now: SystemTime,
    url: Option<&str>,
) -> Result<(), SignError> {
    if secret.is_empty() {
        return Err(SignError::BadSecret("the secret is empty".into()));
    }
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since_epoch.as_secs();
    let key = secret.as_bytes();
    match provider {
        Provider::Stripe => {
            let sig = hex::encode(hmac256(key, &[format!("{secs}.").as_bytes(), body]));
            set_header(headers, "stripe-signature", format!("t={secs},v1={sig}"));
        }
        Provider::Github => {
            let sig = hex::encode(hmac256(key, &[body]));
            set_header(headers, "x-hub-signature-256", format!("sha256={sig}"));
            if has_header(headers, "x-hub-signature") {
                let legacy = hex::encode(hmac1(key, &[body]));
                set_header(headers, "x-hub-signature", format!("sha1={legacy}"));
            }
        }
        Provider::Shopify => {
            // Newer "events" webhooks drop the X- prefix: each name sent
            // is signed, and the X- one when neither was.
            let sig = BASE64.encode(hmac256(key, &[body]));
            let unprefixed = has_header(headers, "shopify-hmac-sha256");
            if unprefixed {
                set_header(headers, "shopify-hmac-sha256", sig.clone());
            }
            if !unprefixed || has_header(headers, "x-shopify-hmac-sha256") {
                set_header(headers, "x-shopify-hmac-sha256", sig);
            }
        }
        Provider::Slack => {
            let sig = hex::encode(hmac256(key, &[format!("v0:{secs}:").as_bytes(), body]));
            set_header(headers, "x-slack-request-timestamp", secs.to_string());
            set_header(headers, "x-slack-signature", format!("v0={sig}"));
        }
        Provider::StandardWebhooks => standard_webhooks(provider, secret, headers, body, secs)?,
        // GitLab's signing tokens use Standard Webhooks; its older secret
        // tokens are sent as they are, in X-Gitlab-Token.
        Provider::Gitlab if token_only(provider, headers) => set_header(headers, "x-gitlab-token", secret),
        Provider::Gitlab => standard_webhooks(provider, secret, headers, body, secs)?,
        Provider::Paddle => {
            let sig = hex::encode(hmac256(key, &[format!("{secs}:").as_bytes(), body]));
            set_header(headers, "paddle-signature", format!("ts={secs};h1={sig}"));
        }
        Provider::Square => {
            let url = url.ok_or(SignError::NeedsUrl(provider))?;
            set_header(
                headers,
                "x-square-hmacsha256-signature",
                BASE64.encode(hmac256(key, &[url.as_bytes(), body])),
            );
            if has_header(headers, "x-square-signature") {
                set_header(
                    headers,
                    "x-square-signature",
                    BASE64.encode(hmac1(key, &[url.as_bytes(), body])),
                );
            }
        }
        Provider::Twilio => {
            let url = url.ok_or(SignError::NeedsUrl(provider))?;
            let payload = twilio_payload(url, body);
            let signature = match twilio_algorithm(headers)? {
                TwilioAlgorithm::Sha1 => hmac1(key, &[&payload]),
                TwilioAlgorithm::Sha256 => hmac256(key, &[&payload]),
            };
            set_header(headers, "x-twilio-signature", BASE64.encode(signature));
        }
        Provider::Linear => {
            let millis = u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX);
            // Rewritten only when present: a body without it is signed as
            // it is, and the handler judges freshness however it can.
            let _ = pointer::replace(body, &["webhookTimestamp".to_owned()], &Value::from(millis));
            set_header(headers, "linear-signature", hex::encode(hmac256(key, &[body])));
        }
        Provider::Mailgun => mailgun(key, body, secs)?,
        Provider::Discord | Provider::Sendgrid => return Err(SignError::PrivateKey(provider)),
    }
    Ok(())
}

/// Whether one signature verifies both requests: false when anything the
/// provider signs differs between them (a new event ID in a Stripe body),
/// true when only unsigned parts do (GitHub's `X-GitHub-Delivery`).
///
/// Rather than a second list of what each provider signs, beside
/// [`resign`] and bound to drift from it, both requests are signed with
/// two throwaway keys: what changes with the key is the signature, and the
/// two requests sign alike when theirs match. One that cannot be signed
/// here (a private key, a missing part) is alike only to an identical one.
pub fn signs_alike(provider: Provider, a: (&[Header], &[u8]), b: (&[Header], &[u8])) -> bool {
    match (signature_parts(provider, a), signature_parts(provider, b)) {
        (Some(a), Some(b)) => a == b,
        _ => a == b,
    }
}

/// Whether `headers` carry `provider`'s signature at all: a webhook sent
/// by hand (curl, a test) often has none, and then nothing is lost by
/// sending it unsigned. Told, as in [`signs_alike`], by signing a copy:
/// a request whose signing adds a header had none there.
pub fn carries_signature(provider: Provider, headers: &[Header], body: &[u8]) -> bool {
    let (mut signed, mut signed_body) = (headers.to_vec(), body.to_vec());
    let url = Some("https://example.invalid/hook");
    if resign(
        provider,
        "whsec_AAECAwQFBgc=",
        &mut signed,
        &mut signed_body,
        UNIX_EPOCH,
        url,
    )
    .is_err()
    {
        // Not signable here (a private key, a missing part): what is
        // recorded is all there is to go by, so assume it is signed.
        return true;
    }
    signed.len() == headers.len()
}

/// The headers (and the body, for providers that sign inside it) that hold
/// the signature of `headers`/`body` under one throwaway key.
fn signature_parts(provider: Provider, (headers, body): (&[Header], &[u8])) -> Option<(Vec<Header>, Option<Vec<u8>>)> {
    // Keys every provider takes: Standard Webhooks wants base64 after whsec_.
    let signed = ["whsec_AAECAwQFBgc=", "whsec_CAkKCwwNDg8="].map(|key| {
        let (mut headers, mut body) = (headers.to_vec(), body.to_vec());
        let url = Some("https://example.invalid/hook");
        resign(provider, key, &mut headers, &mut body, UNIX_EPOCH, url).ok()?;
        Some((headers, body))
    });
    let [Some((headers, body)), Some((other_headers, other_body))] = signed else {
        return None;
    };
    let keyed = headers
        .iter()
        .zip(&other_headers)
        .filter(|(h, other)| h != other)
        .map(|(h, _)| h.clone())
        .collect();
    Some((keyed, (body != other_body).then_some(body)))
}

fn hmac256(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    // HMAC takes keys of any length, so new_from_slice cannot fail.
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(key).unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    parts.iter().for_each(|p| mac.update(p));
    mac.finalize().into_bytes().to_vec()
}

fn hmac1(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut mac =
        <Hmac<Sha1> as Mac>::new_from_slice(key).unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    parts.iter().for_each(|p| mac.update(p));
    mac.finalize().into_bytes().to_vec()
}

/// How a Standard Webhooks secret's base64 is read: with its `=` padding
/// or without, as a secret copied without its end reads in some
/// libraries; the key is the same either way.
const SECRET_BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// Signs every header family present (`webhook-*`, `svix-*`) over
/// `{id}.{ts}.{body}` with the base64 key after `whsec_`.
fn standard_webhooks(
    provider: Provider,
    secret: &str,
    headers: &mut Vec<Header>,
    body: &[u8],
    secs: u64,
) -> Result<(), SignError> {
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    let key = SECRET_BASE64
        .decode(encoded)
        .map_err(|e| SignError::BadSecret(format!("a Standard Webhooks secret is whsec_ followed by base64 ({e})")))?;
    let mut signed = false;
    for family in ["webhook", "svix"] {
        let Some(id) = header(headers, &format!("{family}-id")).map(<[u8]>::to_vec) else {
            continue;
        };
        // Verifiers refuse a message without an id: signed, it would be
        // refused as if the secret were wrong.
        if id.trim_ascii().is_empty() {
            return Err(SignError::MissingPart {
                provider,
                part: "webhook-id (or svix-id) value: the header is empty",
            });
        }
        let sig = BASE64.encode(hmac256(&key, &[&id, format!(".{secs}.").as_bytes(), body]));
        set_header(headers, &format!("{family}-timestamp"), secs.to_string());
        set_header(headers, &format!("{family}-signature"), format!("v1,{sig}"));
        signed = true;
    }
    if signed {
        Ok(())
    } else {
        Err(SignError::MissingPart {
            provider,
            part: "webhook-id (or svix-id) header",
        })
    }
}

/// `url` (or a path) with its `bodySHA256` query parameter made for `body`,
/// when it has one that no longer matches. Twilio puts a JSON body's hash
/// in the URL it signs, and its validator checks the body against it: a
/// replay with a changed body needs the hash of that body.
pub fn with_twilio_body_hash(url: &str, body: &[u8]) -> Option<String> {
    let (head, query) = url.split_once('?')?;
    let hash = hex::encode(<Sha256 as sha2::Digest>::digest(body));
    let mut changed = false;
    let params: Vec<String> = query
        .split('&')
        .map(|param| match param.split_once('=') {
            Some(("bodySHA256", old)) if old != hash => {
                changed = true;
                format!("bodySHA256={hash}")
            }
            _ => param.to_owned(),
        })
        .collect();
    changed.then(|| format!("{head}?{}", params.join("&")))
}

/// The HMACs Twilio signs with.
enum TwilioAlgorithm {
    /// With the account's auth token, and with a shared key unless it says otherwise.
    Sha1,
    /// With a shared key that says so.
    Sha256,
}

/// The algorithm of a Twilio request's signature: one signed with a shared
/// key names it in `X-Twilio-Webhooks-Signature-Settings`
/// (`key=…,algorithm=HMAC_SHA256`); without one, HMAC-SHA1, as Twilio's
/// own validators read it.
fn twilio_algorithm(headers: &[Header]) -> Result<TwilioAlgorithm, SignError> {
    let Some(settings) = header(headers, "x-twilio-webhooks-signature-settings") else {
        return Ok(TwilioAlgorithm::Sha1);
    };
    let settings = String::from_utf8_lossy(settings);
    let named = settings.split(',').find_map(|part| {
        let (name, value) = part.split_once('=')?;
        (name.trim() == "algorithm" && !value.trim().is_empty()).then(|| value.trim())
    });
    match named.map(str::to_ascii_uppercase).as_deref() {
        None | Some("HMAC_SHA1") => Ok(TwilioAlgorithm::Sha1),
        Some("HMAC_SHA256") => Ok(TwilioAlgorithm::Sha256),
        Some(_) => Err(SignError::UnknownAlgorithm {
            provider: Provider::Twilio,
            // A header's worth would make no line of an error.
            named: named.unwrap_or_default().chars().take(40).collect(),
        }),
    }
}

/// Twilio signs the URL followed by every form parameter, sorted, as
/// name then value; a non-form body (JSON) leaves just the URL. A pair
/// sent twice is signed once, as Twilio's validators read the form.
fn twilio_payload(url: &str, body: &[u8]) -> Vec<u8> {
    let mut payload = url.as_bytes().to_vec();
    if let Some(mut pairs) = form::parse(body) {
        pairs.sort();
        pairs.dedup();
        for (name, value) in pairs {
            payload.extend_from_slice(name.as_bytes());
            payload.extend_from_slice(value.as_bytes());
        }
    }
    payload
}

/// Mailgun signs `timestamp + token` inside the body's `signature` object.
fn mailgun(key: &[u8], body: &mut Vec<u8>, secs: u64) -> Result<(), SignError> {
    let doc: Value = serde_json::from_slice(body).map_err(|_| SignError::Unsupported(Provider::Mailgun))?;
    doc.pointer("/signature/token")
        .and_then(Value::as_str)
        .ok_or(SignError::MissingPart {
            provider: Provider::Mailgun,
            part: "signature.token in its body",
        })?;
    // Each request Mailgun sends has a token of its own, and a handler that
    // refuses replays remembers the ones it has seen: a re-signed attempt
    // carrying the recorded token would be refused as a replay.
    let token = super::ids::hex_digits(50);
    let timestamp = secs.to_string();
    let sig = hex::encode(hmac256(key, &[timestamp.as_bytes(), token.as_bytes()]));
    for (field, value) in [("token", token), ("timestamp", timestamp), ("signature", sig)] {
        let path = ["signature".to_owned(), field.to_owned()];
        pointer::replace(body, &path, &Value::String(value)).map_err(|_| SignError::Unsupported(Provider::Mailgun))?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "sign_tests.rs"]
mod tests;
