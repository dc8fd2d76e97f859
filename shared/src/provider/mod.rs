//! Webhook providers: who sent a request, which event it carries, how to
//! re-sign it and how to give it a fresh identity.
//!
//! Facts (timeouts, retry windows, where the event ID lives) come from
//! `providers.md`; the table below is their only home in code.

use std::fmt;
use std::time::Duration;

use crate::message::Header;

mod canonical;
mod detect;
mod event_type;
mod form;
pub mod fresh;
mod ids;
mod inexact;
mod key;
mod pointer;
pub mod sign;
pub mod signature_age;
#[cfg(test)]
mod test_vectors;

pub use detect::detect;
pub use event_type::event_type;
pub use fresh::{fresh_identity, fresh_key_source, FreshError};
pub use key::{event_key, event_key_again, event_key_of_start, event_scope, key_fields_of, EventKey};
pub use sign::{carries_signature, resign, signs_alike, token_only, with_twilio_body_hash, SignError};
pub use signature_age::{signature_tolerance, signed_at};

/// A webhook provider PortPreview recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    /// Stripe events (`Stripe-Signature`).
    Stripe,
    /// GitHub webhooks (`X-GitHub-Event`, `X-GitHub-Delivery`).
    Github,
    /// Shopify webhooks (`X-Shopify-Hmac-Sha256`).
    Shopify,
    /// Slack Events API (`X-Slack-Signature`).
    Slack,
    /// Standard Webhooks and Svix (`webhook-*` / `svix-*` headers).
    StandardWebhooks,
    /// Twilio callbacks (`X-Twilio-Signature`).
    Twilio,
    /// Discord interactions (`X-Signature-Ed25519`).
    Discord,
    /// Paddle Billing (`Paddle-Signature`).
    Paddle,
    /// Square (`x-square-hmacsha256-signature`).
    Square,
    /// GitLab webhooks (`X-Gitlab-Event`).
    Gitlab,
    /// Linear (`Linear-Signature`).
    Linear,
    /// Mailgun (signature object in the body).
    Mailgun,
    /// SendGrid event webhook (`X-Twilio-Email-Event-Webhook-Signature`).
    Sendgrid,
}

const MINUTE: u64 = 60;
const HOUR: u64 = 60 * MINUTE;
const DAY: u64 = 24 * HOUR;

/// What `providers.md` says about one provider.
struct Facts {
    name: &'static str,
    answer_within_secs: Option<u64>,
    retry_window: &'static str,
    retry_window_secs: Option<u64>,
    id_location: &'static str,
}

impl Provider {
    /// Every provider, in the order the design lists them.
    pub const ALL: [Provider; 13] = [
        Provider::Stripe,
        Provider::Github,
        Provider::Shopify,
        Provider::Slack,
        Provider::StandardWebhooks,
        Provider::Twilio,
        Provider::Discord,
        Provider::Paddle,
        Provider::Square,
        Provider::Gitlab,
        Provider::Linear,
        Provider::Mailgun,
        Provider::Sendgrid,
    ];

    fn facts(self) -> Facts {
        let f = |name, answer_within_secs, retry_window, retry_window_secs, id_location| Facts {
            name,
            answer_within_secs,
            retry_window,
            retry_window_secs,
            id_location,
        };
        match self {
            // Stripe publishes no timeout; about 30 s is what it does in
            // practice. A manual resend sends the same event ID again, so a
            // dedup key must outlive the longest of them (the CLI's).
            Provider::Stripe => f(
                "stripe",
                Some(30),
                "up to 3 days (live mode), 3 times over a few hours in sandbox; a manual resend of the same event \
                 up to 15 days later (dashboard), 30 (CLI)",
                Some(30 * DAY),
                "body /id",
            ),
            // A manual redelivery reuses the delivery ID, so a dedup key must outlive it.
            Provider::Github => f(
                "github",
                Some(10),
                "none by itself; a manual redelivery within 3 days reuses the delivery ID",
                Some(3 * DAY),
                "header X-GitHub-Delivery",
            ),
            Provider::Shopify => f(
                "shopify",
                Some(5),
                "8 times over 4 hours",
                Some(4 * HOUR),
                "header X-Shopify-Webhook-Id",
            ),
            Provider::Slack => f(
                "slack",
                Some(3),
                "3 times: at once, after 1 min, after 5 min",
                Some(6 * MINUTE),
                "body /event_id",
            ),
            // 5 s + 5 min + 30 min + 2 h + 5 h + 10 h + 10 h, rounded up.
            Provider::StandardWebhooks => f(
                "standard-webhooks",
                Some(15),
                "8 attempts over about 28 hours (at once, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h)",
                Some(28 * HOUR),
                "header webhook-id (svix-id)",
            ),
            Provider::Twilio => f(
                "twilio",
                Some(15),
                "connection retries only (1 by default, right after the failure)",
                Some(MINUTE),
                "header I-Twilio-Idempotency-Token (else MessageSid/CallSid + status)",
            ),
            Provider::Discord => f("discord", Some(3), "none", None, "body /id"),
            Provider::Paddle => f(
                "paddle",
                Some(5),
                "60 times over 3 days (live)",
                Some(3 * DAY),
                "body /event_id",
            ),
            Provider::Square => f(
                "square",
                Some(10),
                "backing off from 1 min for up to 24-72 hours (sources differ)",
                Some(3 * DAY),
                "body /event_id",
            ),
            Provider::Gitlab => f(
                "gitlab",
                Some(10),
                "no scheduled retries; the hook is disabled after 4 failures",
                None,
                "header Idempotency-Key (else the body: older GitLab sends no such header)",
            ),
            // 1 min + 1 h + 6 h after the first attempt.
            Provider::Linear => f(
                "linear",
                Some(5),
                "3 times: after 1 min, 1 h, 6 h",
                Some(7 * HOUR + MINUTE),
                "header Linear-Delivery",
            ),
            Provider::Mailgun => f(
                "mailgun",
                None,
                "after 5, 10, 15 min, 1, 2, 4 h (8 hours in all)",
                Some(8 * HOUR),
                "body /event-data/id",
            ),
            Provider::Sendgrid => f(
                "sendgrid",
                None,
                "for up to 24 hours",
                Some(DAY),
                "body /0/sg_event_id (one per event of the batch)",
            ),
        }
    }

    /// Lowercase name, as the CLI and the history show it.
    pub fn name(self) -> &'static str {
        self.facts().name
    }

    /// Another name people know the provider by: `svix` for Standard
    /// Webhooks, the scheme Svix sends under its own header names.
    pub fn alias(self) -> Option<&'static str> {
        match self {
            Provider::StandardWebhooks => Some("svix"),
            _ => None,
        }
    }

    /// Parses a provider name; `svix` means Standard Webhooks.
    pub fn from_name(name: &str) -> Option<Provider> {
        let name = name.trim();
        Provider::ALL.into_iter().find(|p| {
            p.name().eq_ignore_ascii_case(name) || p.alias().is_some_and(|alias| alias.eq_ignore_ascii_case(name))
        })
    }

    /// How long the provider waits for an answer before it counts a failure.
    pub fn answer_within(self) -> Option<Duration> {
        self.facts().answer_within_secs.map(Duration::from_secs)
    }

    /// The provider's retry behaviour in one line, for reports.
    pub fn retry_window(self) -> &'static str {
        self.facts().retry_window
    }

    /// How long duplicates of one event can keep arriving: a dedup store's
    /// keys must outlive this. `None` when the provider never sends one again.
    pub fn retry_window_duration(self) -> Option<Duration> {
        self.facts().retry_window_secs.map(Duration::from_secs)
    }

    /// Where the provider puts its event ID, e.g. `header X-GitHub-Delivery`.
    pub fn id_location(self) -> Option<&'static str> {
        Some(self.facts().id_location)
    }

    /// Headers the provider adds only when it sends an event again (Slack's
    /// `X-Slack-Retry-Num`, Square's `square-retry-number`). Slack advises
    /// handlers to skip a delivery that carries them.
    pub fn retry_headers(self) -> &'static [&'static str] {
        match self {
            Provider::Slack => &["x-slack-retry-num", "x-slack-retry-reason"],
            Provider::Square => &["square-retry-number", "square-retry-reason"],
            _ => &[],
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Headers whose values are secrets or signatures: masked on screen and in
/// exports unless the user asks to see them.
pub fn is_sensitive_header(name: &str) -> bool {
    const SENSITIVE: &[&str] = &[
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "stripe-signature",
        "x-hub-signature",
        "x-hub-signature-256",
        "x-shopify-hmac-sha256",
        "shopify-hmac-sha256",
        "x-slack-signature",
        "webhook-signature",
        "svix-signature",
        "paddle-signature",
        "x-twilio-signature",
        "x-square-hmacsha256-signature",
        "x-square-signature",
        "linear-signature",
        "x-gitlab-token",
        "x-signature-ed25519",
        "x-twilio-email-event-webhook-signature",
        // Trello signs in a header named for neither a secret nor a signature.
        "x-trello-webhook",
        // AWS's load balancer passes on the caller's identity as a signed JWT.
        "x-amzn-oidc-data",
    ];
    // Credentials a sender invents its own name for: `X-Api-Key`,
    // `X-Auth-Key`, `X-Authorization`, `Authentication`, `X-Webhook-Secret`,
    // `X-Foo-Signature`, PayPal's `Paypal-Transmission-Sig`, `X-Hmac-Sha256`,
    // `X-Amz-Security-Token`, `X-Private-Key`, `Cookie2`, `X-JWT-Assertion`,
    // `signing_key`, OAuth's `client_assertion`.
    const HINTS: &[&str] = &[
        "authoriz",
        "authentic",
        "x-auth-",
        "hmac",
        "-sig",
        "secret",
        "password",
        "api-key",
        "apikey",
        "api_key",
        "token",
        "private-key",
        "private_key",
        "privatekey",
        "signing_key",
        "signing-key",
        "signingkey",
        "jwt",
        "assertion",
        "session",
        "credential",
        "cookie",
        "signature",
    ];
    let name = name.trim();
    if SENSITIVE.iter().any(|s| s.eq_ignore_ascii_case(name)) {
        return true;
    }
    let lower = name.to_ascii_lowercase();
    // `X-Signature-Timestamp` names when a signature was made, which is
    // what to look at when one has expired, and gives nothing away; an
    // idempotency token (`I-Twilio-Idempotency-Token`) is the event's ID.
    HINTS.iter().any(|hint| lower.contains(hint)) && !lower.ends_with("timestamp") && !lower.contains("idempotency")
}

/// Value of the first header called `name`, compared case-insensitively.
pub fn header<'a>(headers: &'a [Header], name: &str) -> Option<&'a [u8]> {
    headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case(name))
        .map(|h| h.value.as_slice())
}

/// Sets `name` to `value`: the first header of that name is replaced in
/// place (keeping header order), later ones are removed, and the header is
/// appended (lowercase, as hyper delivers names) when absent.
pub(crate) fn set_header(headers: &mut Vec<Header>, name: &str, value: impl Into<Vec<u8>>) {
    let mut value = Some(value.into());
    headers.retain_mut(|h| {
        if !h.name.eq_ignore_ascii_case(name) {
            return true;
        }
        match value.take() {
            Some(v) => {
                h.value = v;
                true
            }
            None => false,
        }
    });
    if let Some(v) = value {
        headers.push(Header::new(name.to_ascii_lowercase(), v));
    }
}

/// True when a header called `name` is present.
pub(crate) fn has_header(headers: &[Header], name: &str) -> bool {
    header(headers, name).is_some()
}
