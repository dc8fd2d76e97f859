//! Which provider sent a request: by its headers first, then its user agent,
//! and for the providers that sign inside the body, by the body's shape.

use std::borrow::Cow;
use std::cell::OnceCell;

use serde_json::Value;

use super::Provider;
use crate::message::Header;

/// A request body whose JSON is parsed at most once, and only when asked.
pub(crate) struct Body<'a> {
    raw: &'a [u8],
    json: OnceCell<Option<Value>>,
    /// Only the start of the body: it was stored cut short.
    cut: bool,
}

impl<'a> Body<'a> {
    pub(crate) fn new(raw: &'a [u8]) -> Self {
        Self {
            raw,
            json: OnceCell::new(),
            cut: false,
        }
    }

    /// The start of a body cut short.
    pub(crate) fn start(raw: &'a [u8]) -> Self {
        Self {
            cut: true,
            ..Self::new(raw)
        }
    }

    /// Byte range of the value at `tokens`, found without parsing the whole
    /// body; in a body cut short, as far as its start shows.
    pub(crate) fn span(&self, tokens: &[String]) -> Option<std::ops::Range<usize>> {
        match self.cut {
            true => super::pointer::span_in_start(self.raw, tokens),
            false => super::pointer::span(self.raw, tokens),
        }
    }

    pub(crate) fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// The parsed body, only if something has parsed it already.
    pub(crate) fn parsed(&self) -> Option<&Value> {
        self.json.get().and_then(Option::as_ref)
    }

    /// The value at `tokens`: located in the bytes while nothing has
    /// parsed the body, which costs far less than parsing the whole of it
    /// into a tree; the full parse stays the fallback.
    pub(crate) fn value(&self, tokens: &[String]) -> Option<Cow<'_, Value>> {
        if let Some(json) = self.parsed() {
            return super::pointer::get(json, tokens).map(Cow::Borrowed);
        }
        let located = self
            .span(tokens)
            .and_then(|range| self.raw.get(range))
            .and_then(|value| serde_json::from_slice(value).ok());
        match located {
            Some(value) => Some(Cow::Owned(value)),
            None => super::pointer::get(self.json()?, tokens).map(Cow::Borrowed),
        }
    }

    /// The body as JSON, when it is an object or an array.
    pub(crate) fn json(&self) -> Option<&Value> {
        self.json
            .get_or_init(|| {
                let first = self.raw.iter().find(|b| !b.is_ascii_whitespace())?;
                if !matches!(first, b'{' | b'[') {
                    return None;
                }
                serde_json::from_slice(self.raw).ok()
            })
            .as_ref()
    }
}

/// Names the provider that sent a request, when it can tell.
pub fn detect(headers: &[Header], body: &[u8]) -> Option<Provider> {
    detect_in(headers, &Body::new(body))
}

pub(crate) fn detect_in(headers: &[Header], body: &Body<'_>) -> Option<Provider> {
    let mut best: Option<(u8, Provider)> = None;
    for h in headers {
        let found = if h.name == "user-agent" || h.name.eq_ignore_ascii_case("user-agent") {
            by_user_agent(&h.value)
        } else {
            by_header_name(&lowercase(&h.name))
        };
        if let Some((rank, provider)) = found {
            match best {
                Some((r, _)) if r <= rank => {}
                _ => best = Some((rank, provider)),
            }
        }
    }
    best.map(|(_, p)| p).or_else(|| by_body(body.json()?))
}

fn lowercase(name: &str) -> Cow<'_, str> {
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(name.to_ascii_lowercase())
    } else {
        Cow::Borrowed(name)
    }
}

/// A provider's own headers, ranked: a lower rank wins, so GitLab's signing
/// token (Standard Webhooks headers plus `X-Gitlab-Event`) reads as GitLab,
/// and SendGrid's `X-Twilio-Email-…` headers never as Twilio.
fn by_header_name(name: &str) -> Option<(u8, Provider)> {
    use Provider::*;
    Some(match name {
        "x-twilio-email-event-webhook-signature" | "x-twilio-email-event-webhook-timestamp" => (0, Sendgrid),
        "stripe-signature" => (1, Stripe),
        "x-github-event" | "x-github-delivery" | "x-github-hook-id" => (1, Github),
        "x-shopify-hmac-sha256"
        | "x-shopify-topic"
        | "x-shopify-webhook-id"
        | "shopify-hmac-sha256"
        | "shopify-topic"
        | "shopify-webhook-id" => (1, Shopify),
        "x-slack-signature" | "x-slack-request-timestamp" => (1, Slack),
        "x-gitlab-event" | "x-gitlab-token" | "x-gitlab-webhook-uuid" | "x-gitlab-event-uuid" => (1, Gitlab),
        "paddle-signature" => (1, Paddle),
        "x-square-hmacsha256-signature" | "x-square-signature" | "square-environment" => (1, Square),
        "linear-signature" | "linear-event" | "linear-delivery" => (1, Linear),
        "x-signature-ed25519" => (1, Discord),
        "x-twilio-signature" | "i-twilio-idempotency-token" => (2, Twilio),
        "webhook-signature" | "svix-signature" | "svix-id" => (3, StandardWebhooks),
        "webhook-id" => (4, StandardWebhooks),
        // `X-Hub-Signature-256` alone is not GitHub's: Meta (WhatsApp,
        // Instagram, Messenger) and others sign with it too, and GitHub
        // always sends its own event headers beside it. Read as GitHub, a
        // Meta message would get GitHub's retry advice, and `--fresh` would
        // renew an invented `X-GitHub-Delivery` the handler never reads.
        _ => return None,
    })
}

fn by_user_agent(value: &[u8]) -> Option<(u8, Provider)> {
    use Provider::*;
    const AGENTS: &[(&[u8], Provider)] = &[
        (b"Stripe/", Stripe),
        (b"GitHub-Hookshot/", Github),
        (b"TwilioProxy/", Twilio),
        (b"Svix-Webhooks/", StandardWebhooks),
        (b"Shopify-Captain-Hook", Shopify),
        (b"Slackbot", Slack),
        (b"GitLab/", Gitlab),
        (b"SendGrid Event API", Sendgrid),
    ];
    AGENTS
        .iter()
        .find(|(prefix, _)| value.starts_with(prefix))
        .map(|&(_, provider)| (6, provider))
}

/// Providers that sign inside the body are known by its shape.
fn by_body(json: &Value) -> Option<Provider> {
    match json {
        Value::Object(map) if map.contains_key("event-data") && map.get("signature").is_some_and(Value::is_object) => {
            Some(Provider::Mailgun)
        }
        Value::Array(events) if events.first().is_some_and(|e| e.get("sg_event_id").is_some()) => {
            Some(Provider::Sendgrid)
        }
        // A Stripe event sent again by hand (a saved payload posted with
        // curl, say) has no signature, but keeps its shape and `evt_` ID.
        Value::Object(map)
            if map.get("object").and_then(Value::as_str) == Some("event")
                && map
                    .get("id")
                    .and_then(Value::as_str)
                    .is_some_and(|id| id.starts_with("evt_")) =>
        {
            Some(Provider::Stripe)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<Header> {
        pairs.iter().map(|(n, v)| Header::new(*n, v.as_bytes())).collect()
    }

    #[test]
    fn an_unsigned_stripe_event_is_known_by_its_shape_and_nothing_else_is() {
        let curl = h(&[("content-type", "application/json"), ("user-agent", "curl/8.5.0")]);
        let event = br#"{"id":"evt_1NqPortPreview","object":"event","type":"charge.succeeded"}"#;
        assert_eq!(detect(&curl, event), Some(Provider::Stripe));
        for other in [
            &br#"{"id":"evt_1","object":"charge"}"#[..],
            br#"{"id":"ch_1","object":"event"}"#,
            br#"{"id":1,"object":"event"}"#,
            br#"[{"id":"evt_1","object":"event"}]"#,
        ] {
            assert_eq!(detect(&curl, other), None, "{}", String::from_utf8_lossy(other));
        }
    }

    #[test]
    fn detects_by_provider_headers() {
        let cases = [
            ("stripe-signature", Provider::Stripe),
            ("x-github-event", Provider::Github),
            ("X-Shopify-Topic", Provider::Shopify),
            ("shopify-hmac-sha256", Provider::Shopify),
            ("x-slack-signature", Provider::Slack),
            ("webhook-signature", Provider::StandardWebhooks),
            ("svix-id", Provider::StandardWebhooks),
            ("x-twilio-signature", Provider::Twilio),
            ("x-signature-ed25519", Provider::Discord),
            ("paddle-signature", Provider::Paddle),
            ("x-square-hmacsha256-signature", Provider::Square),
            ("x-gitlab-event", Provider::Gitlab),
            ("linear-signature", Provider::Linear),
            ("x-twilio-email-event-webhook-signature", Provider::Sendgrid),
        ];
        for (name, provider) in cases {
            let headers = h(&[("content-type", "application/json"), (name, "x")]);
            assert_eq!(detect(&headers, b"{}"), Some(provider), "{name}");
        }
    }

    #[test]
    fn ranks_resolve_overlaps() {
        let gitlab_signed = h(&[
            ("webhook-id", "1"),
            ("webhook-signature", "v1,x"),
            ("x-gitlab-event", "Push Hook"),
        ]);
        assert_eq!(detect(&gitlab_signed, b"{}"), Some(Provider::Gitlab));
        let sendgrid = h(&[
            ("x-twilio-signature", "x"),
            ("x-twilio-email-event-webhook-signature", "y"),
        ]);
        assert_eq!(detect(&sendgrid, b"[]"), Some(Provider::Sendgrid));
        let github = h(&[
            ("x-hub-signature-256", "sha256=0"),
            ("user-agent", "GitHub-Hookshot/abc"),
        ]);
        assert_eq!(detect(&github, b"{}"), Some(Provider::Github));
        let meta = h(&[
            ("x-hub-signature-256", "sha256=0"),
            ("user-agent", "facebookexternalua"),
        ]);
        assert_eq!(detect(&meta, br#"{"object":"whatsapp_business_account"}"#), None);
    }

    #[test]
    fn detects_by_user_agent_and_body() {
        assert_eq!(
            detect(
                &h(&[("user-agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")]),
                b"{}"
            ),
            Some(Provider::Stripe)
        );
        let mailgun = br#"{"signature":{"timestamp":"1","token":"t","signature":"s"},"event-data":{"id":"x"}}"#;
        assert_eq!(detect(&[], mailgun), Some(Provider::Mailgun));
        assert_eq!(
            detect(&[], br#"[{"sg_event_id":"a","event":"delivered"}]"#),
            Some(Provider::Sendgrid)
        );
        assert_eq!(
            detect(&h(&[("content-type", "application/json")]), br#"{"id":"x"}"#),
            None
        );
        assert_eq!(detect(&[], b"\xff\x00garbage"), None);
    }
}
