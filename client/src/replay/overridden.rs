//! Header edits the attempts will not carry as given. Signing writes the
//! provider's signature headers on every attempt, so a `--header` naming
//! one of them is replaced and a `--drop-header` of one is sent after all;
//! `--fresh` does the same to the header holding the event's ID; a
//! hop-by-hop header describes one connection and is never replayed; a
//! `--drop-header` the request does not carry leaves nothing out. A user
//! may pass a default header list, so this is a warning, not a refusal.

use portpreview_shared::hop::HopFilter;
use portpreview_shared::provider;

use super::plan::Plan;
use super::ReplayOptions;
use crate::store::NewDelivery;

/// One line per `--header` that is hop-by-hop or that signing or `--fresh`
/// overrides, and per `--drop-header` that they put back, naming the header;
/// empty when the run cannot start (the run itself says why).
pub fn edits_not_sent(request: &NewDelivery, opts: &ReplayOptions) -> Vec<String> {
    if opts.add_headers.is_empty() && opts.drop_headers.is_empty() {
        return Vec::new();
    }
    let hop = HopFilter::from_headers(opts.add_headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes())));
    let Ok(plan) = Plan::new(request, opts) else {
        return Vec::new();
    };
    // The headers as an attempt sends them: unsigned, they are the edited
    // ones exactly, so nothing differs and nothing is reported.
    let Ok(signed) = plan.outgoing(&plan.recorded) else {
        return Vec::new();
    };
    // `--fresh` writes a new event ID on every attempt, where the provider
    // keeps it: a header the user pinned or left out is replaced or put back.
    let fresh = match opts.fresh {
        true => plan
            .fresh(opts.fresh_field.as_deref())
            .and_then(|v| plan.outgoing(&v))
            .ok(),
        false => None,
    };
    let fresh_sends = |name: &str, value: &str| fresh.as_ref().is_none_or(|out| sends(&out.headers, name, value));
    let fresh_carries = |name: &str| {
        fresh
            .as_ref()
            .is_some_and(|out| provider::header(&out.headers, name).is_some())
    };
    let by = if opts.resign {
        "--resign"
    } else {
        "signing the fresh events"
    };
    let mut lines = Vec::new();
    for (name, value) in &opts.add_headers {
        if hop.drops(name) {
            lines.push(format!(
                "the {name} header given with --header is not sent: a hop-by-hop header describes one \
                 connection, and no attempt replays it{}",
                recorded_ones_named(request, opts, name, value)
            ));
        } else if !sends(&signed.headers, name, value) {
            lines.push(format!(
                "{by} replaces the {name} header given with --header: each attempt is signed afresh"
            ));
        } else if !fresh_sends(name, value) {
            lines.push(format!(
                "--fresh replaces the {name} header given with --header: each fresh event gets a new ID there"
            ));
        }
    }
    for name in &opts.drop_headers {
        let set_again = opts
            .add_headers
            .iter()
            .any(|(added, _)| added.eq_ignore_ascii_case(name));
        if set_again {
            continue;
        }
        // A misspelt name would leave the header it meant in every attempt.
        if provider::header(&request.request_headers, name).is_none() {
            lines.push(format!(
                "the request carries no {name} header, so --drop-header left nothing out: is the name misspelt?"
            ));
        } else if provider::header(&signed.headers, name).is_some() {
            lines.push(format!(
                "{by} puts back the {name} header left out with --drop-header: each attempt is signed afresh"
            ));
        } else if fresh_carries(name) {
            lines.push(format!(
                "--fresh puts back the {name} header left out with --drop-header: each fresh event carries a new ID there"
            ));
        }
    }
    lines
}

/// What else a `--header Connection: …` leaves out: the recorded headers it
/// names (those given with `--header` have lines of their own).
fn recorded_ones_named(request: &NewDelivery, opts: &ReplayOptions, name: &str, value: &str) -> String {
    if !name.eq_ignore_ascii_case("connection") {
        return String::new();
    }
    let named: Vec<&str> = (value.split(',').map(str::trim))
        .filter(|named| provider::header(&request.request_headers, named).is_some())
        .filter(|named| {
            !opts
                .add_headers
                .iter()
                .any(|(added, _)| added.eq_ignore_ascii_case(named))
        })
        .collect();
    match named.as_slice() {
        [] => String::new(),
        [one] => format!("; nor is the recorded {one} header it names"),
        many => format!("; nor are the recorded {} headers it names", many.join(", ")),
    }
}

/// Whether `headers` carry `name: value`, among all the values of `name`:
/// `--header` may give a name twice, and both go out.
fn sends(headers: &[portpreview_shared::Header], name: &str, value: &str) -> bool {
    headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case(name) && h.value == value.as_bytes())
}

#[cfg(test)]
mod tests {
    use portpreview_shared::Header;

    use super::*;
    use crate::config::SigningSecret;

    fn stripe() -> NewDelivery {
        NewDelivery {
            target: "http://127.0.0.1:3000".into(),
            method: "POST".into(),
            path: "/hook".into(),
            request_headers: vec![
                Header::new("x-keep", "1"),
                Header::new("stripe-signature", "t=1,v1=old"),
            ],
            request_body: b"{}".to_vec(),
            request_body_size: 2,
            provider: Some("stripe".into()),
            event_key: "evt_1".into(),
            ..NewDelivery::default()
        }
    }

    fn resigned(add: &[(&str, &str)], drop: &[&str]) -> ReplayOptions {
        ReplayOptions {
            resign: true,
            secret: Some(SigningSecret::flag("whsec_test")),
            add_headers: add.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(),
            drop_headers: drop.iter().map(|n| n.to_string()).collect(),
            ..ReplayOptions::default()
        }
    }

    #[test]
    fn a_signature_header_set_or_dropped_by_hand_is_named_once() {
        let set = edits_not_sent(&stripe(), &resigned(&[("stripe-signature", "t=1,v1=bad")], &[]));
        assert_eq!(
            set,
            ["--resign replaces the stripe-signature header given with --header: each attempt is signed afresh"]
        );
        let dropped = edits_not_sent(&stripe(), &resigned(&[], &["Stripe-Signature"]));
        assert_eq!(
            dropped,
            ["--resign puts back the Stripe-Signature header left out with --drop-header: each attempt is signed afresh"]
        );
    }

    #[test]
    fn an_event_id_header_pinned_or_dropped_under_fresh_is_named() {
        let github = NewDelivery {
            request_headers: vec![
                Header::new("x-github-event", "ping"),
                Header::new("x-github-delivery", "d-1"),
            ],
            provider: Some("github".into()),
            event_key: "d-1".into(),
            ..stripe()
        };
        let fresh = |add: &[(&str, &str)], drop: &[&str]| ReplayOptions {
            fresh: true,
            resign: false,
            secret: None,
            ..resigned(add, drop)
        };
        assert_eq!(
            edits_not_sent(&github, &fresh(&[("X-GitHub-Delivery", "pinned")], &[])),
            ["--fresh replaces the X-GitHub-Delivery header given with --header: each fresh event gets a new ID there"]
        );
        assert_eq!(
            edits_not_sent(&github, &fresh(&[], &["X-GitHub-Delivery"])),
            ["--fresh puts back the X-GitHub-Delivery header left out with --drop-header: each fresh event carries a new ID there"]
        );
        assert!(edits_not_sent(&github, &fresh(&[("X-Other", "1")], &["x-github-event"])).is_empty());
    }

    #[test]
    fn a_header_to_drop_that_the_request_does_not_carry_is_named() {
        let unsigned = |drop: &[&str]| ReplayOptions {
            resign: false,
            secret: None,
            ..resigned(&[], drop)
        };
        assert_eq!(
            edits_not_sent(&stripe(), &unsigned(&["Stripe-Signatur", "X-KEEP"])),
            ["the request carries no Stripe-Signatur header, so --drop-header left nothing out: is the name misspelt?"]
        );
        // Dropped and set again: the header given is what goes out.
        let replaced = ReplayOptions {
            resign: false,
            secret: None,
            ..resigned(&[("x-new", "1")], &["x-new"])
        };
        assert!(edits_not_sent(&stripe(), &replaced).is_empty());
    }

    #[test]
    fn edits_signing_leaves_alone_are_not_mentioned() {
        let others = resigned(&[("x-added", "2")], &["x-keep"]);
        assert!(edits_not_sent(&stripe(), &others).is_empty());
        // Without signing the edited header is what goes out.
        let unsigned = ReplayOptions {
            resign: false,
            secret: None,
            ..resigned(&[("stripe-signature", "t=1,v1=bad")], &["stripe-signature"])
        };
        assert!(edits_not_sent(&stripe(), &unsigned).is_empty());
        // A name given twice sends both values.
        let twice = ReplayOptions {
            resign: false,
            secret: None,
            ..resigned(&[("X-Foo", "a"), ("X-Foo", "b")], &[])
        };
        assert!(edits_not_sent(&stripe(), &twice).is_empty());
        assert!(edits_not_sent(&stripe(), &resigned(&[("X-Foo", "a"), ("X-Foo", "b")], &[])).is_empty());
    }

    #[test]
    fn hop_by_hop_headers_are_said_to_stay_behind_not_to_be_signed_over() {
        let unsigned = ReplayOptions {
            resign: false,
            secret: None,
            ..resigned(
                &[("Connection", "close, X-Trace"), ("TE", "trailers"), ("X-Trace", "1")],
                &[],
            )
        };
        let lines = edits_not_sent(&stripe(), &unsigned);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(
            lines.iter().all(|l| l.contains("is not sent: a hop-by-hop header")),
            "{lines:?}"
        );
        assert!(
            lines[2].starts_with("the X-Trace header"),
            "named by Connection: {lines:?}"
        );
    }

    #[test]
    fn recorded_headers_an_added_connection_names_are_said_to_stay_behind() {
        let unsigned = |connection: &str| ReplayOptions {
            resign: false,
            secret: None,
            ..resigned(&[("Connection", connection)], &[])
        };
        let lines = edits_not_sent(&stripe(), &unsigned("X-Keep"));
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].ends_with("no attempt replays it; nor is the recorded X-Keep header it names"),
            "{lines:?}"
        );
        let lines = edits_not_sent(&stripe(), &unsigned("x-keep, Stripe-Signature, x-absent"));
        assert!(
            lines[0].ends_with("; nor are the recorded x-keep, Stripe-Signature headers it names"),
            "{lines:?}"
        );
        let lines = edits_not_sent(&stripe(), &unsigned("close"));
        assert!(lines[0].ends_with("no attempt replays it"), "{lines:?}");
    }
}
