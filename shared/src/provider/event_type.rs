//! What kind of event a delivery carries (`invoice.paid`,
//! `pull_request.opened`, `orders/create`): what a webhook developer looks
//! for first in a list of deliveries, and what the history is filtered by.

use serde_json::Value;

use super::detect::Body;
use super::{form, header, Provider};
use crate::coding::{decode, Decoding};
use crate::message::Header;

/// Longest event type kept: a real one is a few words, and a hostile body
/// must not fill every history row and list column with its own.
const MAX_TYPE_LEN: usize = 100;

/// The event type of a delivery from `provider` (`None` for a sender no
/// provider was recognised in, whose top-level `type`, `event`,
/// `event_type` or `eventType` is taken), from its headers and its body
/// as sent: decoded first when gzip or deflate, and read as far as it goes
/// when `whole` is false (a body stored cut short). `None` when it names
/// none.
pub fn event_type(provider: Option<Provider>, headers: &[Header], body: &[u8], whole: bool) -> Option<String> {
    let decoded = decode(headers, body, body.len() as u64);
    let plain = match &decoded {
        Decoding::Done { plain, .. } => plain,
        Decoding::NotCoded | Decoding::Failed { .. } => body,
    };
    let body = match whole {
        true => Body::new(plain),
        false => Body::start(plain),
    };
    in_body(provider, headers, &body)
}

/// [`event_type`] of a body already decoded, as the event key reads it:
/// the two share what either has parsed of it.
pub(crate) fn in_body(provider: Option<Provider>, headers: &[Header], body: &Body<'_>) -> Option<String> {
    // Each part was fit; what they make together must be too.
    usable(&found(provider, headers, body)?)
}

fn found(provider: Option<Provider>, headers: &[Header], body: &Body<'_>) -> Option<String> {
    use Provider::*;
    let Some(provider) = provider else {
        return ["type", "event", "event_type", "eventType"]
            .into_iter()
            .find_map(|name| text_at(body, &[name]));
    };
    match provider {
        Stripe | StandardWebhooks | Square => text_at(body, &["type"]),
        // The event, and what happened in it: `pull_request.opened`.
        Github => with_action(header_text(headers, "X-GitHub-Event")?, text_at(body, &["action"])),
        Shopify => header_text(headers, "X-Shopify-Topic").or_else(|| header_text(headers, "Shopify-Topic")),
        // An event callback names its event inside; a URL verification
        // is a type of its own.
        Slack => text_at(body, &["event", "type"])
            .or_else(|| text_at(body, &["type"]))
            .or_else(|| slack_form(body)),
        Paddle => text_at(body, &["event_type"]),
        Gitlab => match text_at(body, &["object_kind"]) {
            Some(kind) => with_action(kind, text_at(body, &["object_attributes", "action"])),
            None => header_text(headers, "X-Gitlab-Event"),
        },
        Linear => match text_at(body, &["type"]).or_else(|| header_text(headers, "Linear-Event")) {
            Some(kind) => with_action(kind, text_at(body, &["action"])),
            None => None,
        },
        Mailgun => text_at(body, &["event-data", "event"]),
        // A batch of events: the first one's.
        Sendgrid => text_at(body, &["0", "event"]),
        Twilio => twilio_status(body),
        Discord => text_at(body, &["event", "type"]).or_else(|| discord_interaction(body)),
    }
}

/// `kind.action`, or `kind` alone when there is no action.
fn with_action(kind: String, action: Option<String>) -> Option<String> {
    Some(match action {
        Some(action) => format!("{kind}.{action}"),
        None => kind,
    })
}

/// Twilio's status callbacks: what the message or call it reports on came
/// to (`message.delivered`, `call.completed`).
fn twilio_status(body: &Body<'_>) -> Option<String> {
    let pairs = form::parse(body.raw())?;
    [
        ("MessageStatus", "message"),
        ("SmsStatus", "message"),
        ("CallStatus", "call"),
    ]
    .into_iter()
    .find_map(|(name, of)| Some(format!("{of}.{}", usable(form::value(&pairs, name)?)?)))
}

/// Slack's interactivity and slash commands come as a form: a `payload`
/// of JSON whose `type` names it (`block_actions`, `view_submission`), or
/// a slash command's `command` (`/deploy`).
fn slack_form(body: &Body<'_>) -> Option<String> {
    let pairs = form::parse(body.raw())?;
    if let Some(payload) = form::value(&pairs, "payload") {
        let payload: Value = serde_json::from_str(payload).ok()?;
        return usable(payload.get("type")?.as_str()?);
    }
    usable(form::value(&pairs, "command")?)
}

/// A Discord interaction's type, named as Discord's docs name it.
fn discord_interaction(body: &Body<'_>) -> Option<String> {
    let kind = match json_at(body, &["type"])?.as_u64()? {
        1 => "ping",
        2 => "application_command",
        3 => "message_component",
        4 => "application_command_autocomplete",
        5 => "modal_submit",
        _ => return None,
    };
    Some(kind.to_owned())
}

/// The header's value, when it is fit to be (a part of) a type.
fn header_text(headers: &[Header], name: &str) -> Option<String> {
    usable(std::str::from_utf8(header(headers, name)?).ok()?)
}

/// The text at `path` in a JSON body, when it is fit to be (a part of) a
/// type; `None` when it is no string, so that the next place is looked in.
fn text_at(body: &Body<'_>, path: &[&str]) -> Option<String> {
    match &*json_at(body, path)? {
        Value::String(text) => usable(text),
        _ => None,
    }
}

fn json_at<'b>(body: &'b Body<'_>, path: &[&str]) -> Option<std::borrow::Cow<'b, Value>> {
    let tokens: Vec<String> = path.iter().map(|s| (*s).to_owned()).collect();
    body.value(&tokens)
}

/// A type fit to show and to filter by: no provider sends an empty, huge
/// or control-laden one.
fn usable(found: &str) -> Option<String> {
    let kind = found.trim();
    (!kind.is_empty() && kind.chars().count() <= MAX_TYPE_LEN && !kind.chars().any(char::is_control))
        .then(|| kind.to_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::provider::test_vectors::{headers, mailgun_body, twilio_form, vector};

    fn of_vector(name: &str) -> Option<String> {
        let v = vector(name);
        let body = v.get("body").and_then(Value::as_str).unwrap_or("{}");
        let headers = headers(&v["headers"]);
        let provider = crate::provider::detect(&headers, body.as_bytes());
        event_type(provider, &headers, body.as_bytes(), true)
    }

    #[test]
    fn each_provider_names_its_event_type() {
        for (name, wanted) in [
            ("stripe", "payment_intent.succeeded"),
            ("github", "pull_request.opened"),
            ("shopify", "orders/create"),
            ("slack", "app_mention"),
            ("standard_webhooks", "user.created"),
            ("paddle", "transaction.completed"),
            ("square", "payment.created"),
            ("linear", "Issue.create"),
            ("discord_test_keypair", "ping"),
        ] {
            assert_eq!(of_vector(name).as_deref(), Some(wanted), "{name}");
        }
    }

    #[test]
    fn github_adds_the_action_to_its_event() {
        let headers = vec![Header::new("X-GitHub-Event", "pull_request")];
        let kind = event_type(
            Some(Provider::Github),
            &headers,
            br#"{"action":"opened","number":1}"#,
            true,
        );
        assert_eq!(kind.as_deref(), Some("pull_request.opened"));
        let kind = event_type(Some(Provider::Github), &headers, br#"{"zen":"ok"}"#, true);
        assert_eq!(kind.as_deref(), Some("pull_request"));
    }

    #[test]
    fn stripe_and_slack_read_theirs_from_the_body() {
        let stripe = br#"{"id":"evt_1","object":"event","type":"invoice.paid","data":{"object":{"type":"card"}}}"#;
        assert_eq!(
            event_type(Some(Provider::Stripe), &[], stripe, true).as_deref(),
            Some("invoice.paid")
        );
        let slack = br#"{"type":"event_callback","event":{"type":"app_mention"}}"#;
        assert_eq!(
            event_type(Some(Provider::Slack), &[], slack, true).as_deref(),
            Some("app_mention")
        );
        let verification = br#"{"type":"url_verification","challenge":"x"}"#;
        assert_eq!(
            event_type(Some(Provider::Slack), &[], verification, true).as_deref(),
            Some("url_verification")
        );
        // A button pressed, and a slash command: forms, not JSON.
        let action = b"payload=%7B%22type%22%3A%22block_actions%22%2C%22actions%22%3A%5B%5D%7D";
        assert_eq!(
            event_type(Some(Provider::Slack), &[], action, true).as_deref(),
            Some("block_actions")
        );
        let command = b"token=x&team_id=T1&command=%2Fdeploy&text=prod";
        assert_eq!(
            event_type(Some(Provider::Slack), &[], command, true).as_deref(),
            Some("/deploy")
        );
    }

    #[test]
    fn form_and_batch_senders_name_theirs_too() {
        let twilio = b"MessageSid=SM1&MessageStatus=delivered";
        assert_eq!(
            event_type(Some(Provider::Twilio), &[], twilio, true).as_deref(),
            Some("message.delivered")
        );
        // A call's callback with no status says nothing of one.
        assert_eq!(event_type(Some(Provider::Twilio), &[], &twilio_form(), true), None);
        let gitlab = br#"{"object_kind":"merge_request","object_attributes":{"action":"open"}}"#;
        assert_eq!(
            event_type(Some(Provider::Gitlab), &[], gitlab, true).as_deref(),
            Some("merge_request.open")
        );
        let push = vec![Header::new("X-Gitlab-Event", "Push Hook")];
        assert_eq!(
            event_type(Some(Provider::Gitlab), &push, b"{}", true).as_deref(),
            Some("Push Hook")
        );
        let sendgrid = br#"[{"event":"processed","sg_event_id":"a"},{"event":"delivered"}]"#;
        assert_eq!(
            event_type(Some(Provider::Sendgrid), &[], sendgrid, true).as_deref(),
            Some("processed")
        );
        let mailgun = mailgun_body(&vector("mailgun")["signature"]);
        assert_eq!(
            event_type(Some(Provider::Mailgun), &[], &mailgun, true).as_deref(),
            Some("delivered")
        );
        let discord = br#"{"id":"1","type":1}"#;
        assert_eq!(
            event_type(Some(Provider::Discord), &[], discord, true).as_deref(),
            Some("ping")
        );
    }

    #[test]
    fn an_unknown_sender_is_read_by_the_usual_names() {
        assert_eq!(
            event_type(None, &[], br#"{"event":"order.shipped","id":7}"#, true).as_deref(),
            Some("order.shipped")
        );
        assert_eq!(event_type(None, &[], br#"{"type":{"nested":true}}"#, true), None);
        assert_eq!(event_type(None, &[], b"not json", true), None);
    }

    #[test]
    fn a_type_no_one_would_send_is_not_kept() {
        let long = format!(r#"{{"type":"{}"}}"#, "a".repeat(MAX_TYPE_LEN + 1));
        assert_eq!(event_type(Some(Provider::Stripe), &[], long.as_bytes(), true), None);
        assert_eq!(
            event_type(Some(Provider::Stripe), &[], br#"{"type":"a\u001b[2Jb"}"#, true),
            None
        );
        assert_eq!(event_type(Some(Provider::Stripe), &[], br#"{"type":"  "}"#, true), None);
    }

    #[test]
    fn a_place_that_names_nothing_fit_leaves_the_next_one_to_name_it() {
        assert_eq!(
            event_type(None, &[], br#"{"type":"","event":"fallback.ok"}"#, true).as_deref(),
            Some("fallback.ok")
        );
        assert_eq!(
            event_type(None, &[], br#"{"type":"a\u0001b","event":"good.event"}"#, true).as_deref(),
            Some("good.event")
        );
        let slack = br#"{"type":"event_callback","event":{"type":""}}"#;
        assert_eq!(
            event_type(Some(Provider::Slack), &[], slack, true).as_deref(),
            Some("event_callback")
        );
        // A blank part is no part: no `.opened`, no `pull_request.`.
        let blank = vec![Header::new("X-GitHub-Event", " ")];
        assert_eq!(
            event_type(Some(Provider::Github), &blank, br#"{"action":"opened"}"#, true),
            None
        );
        let event = vec![Header::new("X-GitHub-Event", "pull_request")];
        assert_eq!(
            event_type(Some(Provider::Github), &event, br#"{"action":""}"#, true).as_deref(),
            Some("pull_request")
        );
    }

    #[test]
    fn a_body_cut_short_is_read_as_far_as_it_goes() {
        let start = br#"{"id":"evt_1","type":"invoice.paid","data":{"object":{"amount":"#;
        assert_eq!(
            event_type(Some(Provider::Stripe), &[], start, false).as_deref(),
            Some("invoice.paid")
        );
    }
}
