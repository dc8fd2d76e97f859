use super::*;

/// Whether the plan for `request` under `opts` warns with a line that
/// begins `start`.
fn warns(request: &NewDelivery, opts: &ReplayOptions, start: &str) -> bool {
    let plan = Plan::new(request, opts).unwrap();
    plan.warnings.iter().any(|w| w.starts_with(start))
}

/// Headers as (name, value) pairs, to compare with a literal list.
fn pairs(headers: &[Header]) -> Vec<(&str, &[u8])> {
    headers.iter().map(|h| (h.name.as_str(), h.value.as_slice())).collect()
}

fn resolved(recorded: &str, flag: Option<&str>, path: &str) -> (String, String) {
    let (endpoint, path) = resolve_target(recorded, flag, path).unwrap();
    (endpoint.authority(), path)
}

#[test]
fn a_target_without_a_path_keeps_the_recorded_path_and_query() {
    assert_eq!(
        resolved(
            "http://127.0.0.1:3000",
            Some("http://127.0.0.1:4000"),
            "/hooks/stripe?x=1"
        ),
        ("127.0.0.1:4000".into(), "/hooks/stripe?x=1".into())
    );
    assert_eq!(
        resolved("http://127.0.0.1:3000", None, "/a"),
        ("127.0.0.1:3000".into(), "/a".into())
    );
    assert_eq!(
        resolved("http://127.0.0.1:3000", Some("http://127.0.0.1:4000/"), "/a?x=1"),
        ("127.0.0.1:4000".into(), "/a?x=1".into()),
        "a trailing slash is no path"
    );
    assert_eq!(
        resolved("http://127.0.0.1:3000/api/", Some("http://127.0.0.1:4000"), "/hook?x=1"),
        ("127.0.0.1:4000".into(), "/api/hook?x=1".into()),
        "the path the handler was sent, base path included"
    );
}

#[test]
fn a_target_that_would_drop_its_query_or_fragment_is_refused() {
    for flag in [
        "http://127.0.0.1:4000?x=1",
        "http://127.0.0.1:4000#top",
        "http://127.0.0.1:4000/hook#top",
    ] {
        let err = resolve_target("http://127.0.0.1:3000", Some(flag), "/a")
            .unwrap_err()
            .to_string();
        assert!(err.contains("a fragment is never sent"), "{flag}: {err}");
    }
    assert_eq!(
        resolved("http://127.0.0.1:3000", Some("http://127.0.0.1:4000/hook?x=1"), "/a"),
        ("127.0.0.1:4000".into(), "/hook?x=1".into())
    );
}

/// A path no request line can carry would fail every attempt, reading as
/// the handler's failure: refused, and as a bad flag before anything runs.
#[test]
fn a_target_whose_path_no_request_can_carry_is_refused() {
    for flag in ["http://127.0.0.1:4000/\x1b[2J", "http://127.0.0.1:4000/a b"] {
        let err = resolve_target("http://127.0.0.1:3000", Some(flag), "/a")
            .unwrap_err()
            .to_string();
        assert!(err.contains("a path is written as in a URL"), "{flag}: {err}");
        let reason = parse_target_flag(flag).unwrap_err();
        assert!(reason.starts_with("a path is written as in a URL"), "{flag}: {reason}");
    }
}

#[test]
fn a_target_with_a_path_replaces_the_recorded_path() {
    assert_eq!(
        resolved(
            "http://127.0.0.1:3000",
            Some("http://127.0.0.1:4000/v2/hook"),
            "/hooks?x=1"
        ),
        ("127.0.0.1:4000".into(), "/v2/hook?x=1".into())
    );
    assert_eq!(
        resolved("", Some("localhost:4000/new?y=2"), "/hooks?x=1"),
        ("localhost:4000".into(), "/new?y=2".into())
    );
}

#[test]
fn the_aimed_url_is_where_the_attempts_go() {
    let aimed = |recorded: &str, flag: Option<&str>, path: &str| aimed_url(recorded, flag, path).unwrap();
    let t = "http://127.0.0.1:3000";
    assert_eq!(aimed(t, None, "/hook?a=1"), "http://127.0.0.1:3000/hook?a=1");
    assert_eq!(aimed(t, Some("http://h:9"), "/hook?a=1"), "http://h:9/hook?a=1");
    assert_eq!(aimed(t, Some("http://h:9/other"), "/hook?a=1"), "http://h:9/other?a=1");
    assert_eq!(aimed(t, Some("localhost:4000"), "/hook"), "http://localhost:4000/hook");
    assert_eq!(aimed("3000", None, "/h"), "http://localhost:3000/h");
    assert_eq!(
        aimed("http://127.0.0.1:3000/api", None, "/h?q"),
        "http://127.0.0.1:3000/api/h?q"
    );
    assert_eq!(aimed("http://[::1]:3000", None, "/h"), "http://[::1]:3000/h");
    for (at, flag) in [(t, None), (t, Some("http://h:9")), (t, Some("http://h:9/v2/hook"))] {
        let request = NewDelivery {
            target: at.into(),
            path: "/hook?a=1".into(),
            ..recorded()
        };
        let opts = ReplayOptions {
            target: flag.map(String::from),
            ..ReplayOptions::default()
        };
        let plan = Plan::new(&request, &opts).unwrap();
        assert_eq!(plan.url(), aimed(at, flag, "/hook?a=1"), "{flag:?}");
    }
    assert!(aimed_url("", None, "/h").is_err());
}

fn recorded() -> NewDelivery {
    NewDelivery {
        target: "http://127.0.0.1:3000".into(),
        method: "POST".into(),
        path: "/hook".into(),
        request_headers: vec![
            Header::new("host", "relay.example"),
            Header::new("content-length", "2"),
            Header::new("x-keep", "1"),
            Header::new("x-drop", "1"),
            Header::new("x-set", "old"),
        ],
        request_body: b"{}".to_vec(),
        request_body_size: 2,
        event_key: "k".into(),
        ..NewDelivery::default()
    }
}

#[test]
fn headers_and_body_can_be_changed_before_replaying() {
    let opts = ReplayOptions {
        add_headers: vec![("x-set".into(), "new".into()), ("x-added".into(), "2".into())],
        drop_headers: vec!["X-Drop".into()],
        body: Some(b"{\"id\":1}".to_vec()),
        ..ReplayOptions::default()
    };
    let plan = Plan::new(&recorded(), &opts).unwrap();
    let out = plan.outgoing(&plan.recorded).unwrap();
    let headers = pairs(&out.headers);
    // The header set takes the recorded one's place; a new one goes last.
    assert_eq!(headers, [("x-keep", &b"1"[..]), ("x-set", b"new"), ("x-added", b"2")]);
    assert_eq!(out.body, &b"{\"id\":1}"[..]);
}

/// A body changed under a recorded signature breaks it, and an old one is
/// refused; one sent without a signature (by curl, by a test) has none.
#[test]
fn a_signature_is_said_to_be_broken_or_old_only_where_there_is_one() {
    let unsigned = NewDelivery {
        request_headers: vec![Header::new("content-type", "application/json")],
        request_body: br#"{"id":"evt_1","object":"event"}"#.to_vec(),
        provider: Some("stripe".into()),
        event_key: "evt_1".into(),
        event_key_source: "body:/id".into(),
        ..recorded()
    };
    let signed = NewDelivery {
        request_headers: vec![Header::new("stripe-signature", "t=1,v1=00")],
        ..unsigned.clone()
    };
    let changed = ReplayOptions {
        body: Some(br#"{"id":"evt_1","object":"event","livemode":true}"#.to_vec()),
        ..ReplayOptions::default()
    };
    let broken = |d: &NewDelivery| warns(d, &changed, "the body was changed but not re-signed");
    assert!(broken(&signed));
    assert!(!broken(&unsigned));
    // Nor is a timestamp without a signature an old signature.
    let timestamped = NewDelivery {
        request_headers: vec![
            Header::new("webhook-id", "msg_1"),
            Header::new("webhook-timestamp", "1700000000"),
        ],
        provider: Some("standard-webhooks".into()),
        event_key: "msg_1".into(),
        event_key_source: "header:webhook-id".into(),
        ..unsigned.clone()
    };
    let plan = Plan::new(&timestamped, &ReplayOptions::default()).unwrap();
    assert!(
        plan.warnings.iter().all(|w| !w.contains("days old")),
        "{:?}",
        plan.warnings
    );
    let signed = NewDelivery {
        request_headers: [
            timestamped.request_headers.clone(),
            vec![Header::new("webhook-signature", "v1,AAAA")],
        ]
        .concat(),
        ..timestamped
    };
    let plan = Plan::new(&signed, &ReplayOptions::default()).unwrap();
    assert!(
        plan.warnings.iter().any(|w| w.contains("days old")),
        "{:?}",
        plan.warnings
    );
}

#[test]
fn a_header_set_by_hand_takes_the_recorded_ones_place() {
    let request = NewDelivery {
        request_headers: vec![
            Header::new("x-a", "1"),
            Header::new("x-set", "old"),
            Header::new("x-b", "2"),
            Header::new("x-set", "older"),
        ],
        ..recorded()
    };
    let opts = ReplayOptions {
        add_headers: vec![
            ("X-Set".into(), "new".into()),
            ("x-added".into(), "3".into()),
            ("x-set".into(), "newer".into()),
        ],
        ..ReplayOptions::default()
    };
    let plan = Plan::new(&request, &opts).unwrap();
    let out = plan.outgoing(&plan.recorded).unwrap();
    let headers = pairs(&out.headers);
    assert_eq!(
        headers,
        [
            ("x-a", &b"1"[..]),
            ("X-Set", b"new"),
            ("x-set", b"newer"),
            ("x-b", b"2"),
            ("x-added", b"3")
        ]
    );
}

#[test]
fn an_edited_request_is_keyed_by_its_recorded_provider() {
    let stripe = NewDelivery {
        request_headers: vec![Header::new("stripe-signature", "t=1,v1=old")],
        request_body: br#"{"id":"evt_recorded"}"#.to_vec(),
        request_body_size: 21,
        provider: Some("stripe".into()),
        event_key: "evt_recorded".into(),
        event_key_source: "body:/id".into(),
        ..recorded()
    };
    // Without its signature header the request no longer shows it is
    // Stripe's, but the edited event is still a Stripe event.
    let opts = ReplayOptions {
        drop_headers: vec!["Stripe-Signature".into()],
        body: Some(br#"{"id":"evt_edited","x":1}"#.to_vec()),
        ..ReplayOptions::default()
    };
    let plan = Plan::new(&stripe, &opts).unwrap();
    assert_eq!(plan.recorded.event_key, "evt_edited");
    assert_eq!(plan.provider, Some(Provider::Stripe));

    // A key made from chosen fields is made from them again.
    let fields = NewDelivery {
        request_body: br#"{"order":1,"at":"a"}"#.to_vec(),
        request_body_size: 20,
        event_key_source: "sha256:fields(order)".into(),
        ..recorded()
    };
    let edited = |body: &[u8]| {
        let opts = ReplayOptions {
            body: Some(body.to_vec()),
            ..ReplayOptions::default()
        };
        Plan::new(&fields, &opts).unwrap().recorded.event_key
    };
    assert_eq!(edited(br#"{"order":2,"at":"a"}"#), edited(br#"{"order":2,"at":"b"}"#));
    assert_ne!(edited(br#"{"order":2,"at":"a"}"#), edited(br#"{"order":3,"at":"a"}"#));
}

#[test]
fn only_the_recorded_request_sent_where_it_went_is_as_recorded() {
    let as_recorded = |opts: ReplayOptions| Plan::new(&recorded(), &opts).unwrap().as_recorded;
    assert!(as_recorded(ReplayOptions::default()));
    let aimed = |target: &str| ReplayOptions {
        target: Some(target.into()),
        ..ReplayOptions::default()
    };
    assert!(
        as_recorded(aimed("http://127.0.0.1:3000")),
        "the recorded target, named"
    );
    assert!(
        as_recorded(aimed("http://localhost:3000")),
        "the recorded target, by another name of the loopback"
    );
    assert!(!as_recorded(aimed("https://127.0.0.1:3000")), "another scheme");
    assert!(
        !as_recorded(aimed("http://127.0.0.2:3000")),
        "another loopback address, perhaps another process"
    );
    assert!(!as_recorded(aimed("http://127.0.0.1:3001")), "another port");
    assert!(!as_recorded(aimed("http://127.0.0.1:3000/v2/hook")), "another path");
    assert!(!as_recorded(ReplayOptions {
        body: Some(b"{\"id\":2}".to_vec()),
        ..ReplayOptions::default()
    }));
}

#[test]
fn unsigned_attempts_share_one_body_instead_of_copying_it() {
    let plan = Plan::new(&recorded(), &ReplayOptions::default()).unwrap();
    let first = plan.outgoing(&plan.recorded).unwrap();
    let second = plan.outgoing(&plan.recorded).unwrap();
    assert_eq!(first.body.as_ptr(), plan.recorded.body.as_ptr());
    assert_eq!(second.body.as_ptr(), plan.recorded.body.as_ptr());
}

#[test]
fn a_truncated_body_and_a_missing_secret_stop_the_run_before_it_starts() {
    let mut cut = recorded();
    cut.request_body_size = 10;
    assert!(matches!(
        Plan::new(&cut, &ReplayOptions::default()),
        Err(ReplayError::Truncated { kept: 2, size: 10 })
    ));
    let Err(err) = Plan::new(&cut, &ReplayOptions::default()) else {
        unreachable!()
    };
    assert!(err.to_string().contains("(2 of 10 bytes kept)"), "{err}");
    // Broken off on its way: how much more there was is not known.
    cut.request_body_size = crate::store::size_past_cut(2);
    let Err(err) = Plan::new(&cut, &ReplayOptions::default()) else {
        unreachable!()
    };
    assert!(
        err.to_string()
            .contains("was cut short when it was recorded (after 2 bytes)"),
        "{err}"
    );
    // A body of the user's own replaces the stored one whole.
    let own = ReplayOptions {
        body: Some(b"{\"id\":\"evt_own\"}".to_vec()),
        ..ReplayOptions::default()
    };
    let plan = Plan::new(&cut, &own).expect("--body-file needs none of the stored body");
    assert_eq!(&plan.recorded.body[..], b"{\"id\":\"evt_own\"}");
    let mut stripe = recorded();
    stripe.provider = Some("stripe".into());
    let resign = ReplayOptions {
        resign: true,
        ..ReplayOptions::default()
    };
    let err = Plan::new(&stripe, &resign).unwrap_err().to_string();
    assert!(
        err.starts_with(
            "no secret for stripe: pass --secret, set PORTPREVIEW_SECRET_STRIPE or PORTPREVIEW_SECRET, \
             or add stripe = \"…\" to the [secrets] table of "
        ),
        "{err}"
    );
    let mut discord = recorded();
    discord.provider = Some("discord".into());
    let with_secret = ReplayOptions {
        resign: true,
        secret: Some(SigningSecret::flag("x")),
        ..ReplayOptions::default()
    };
    // No secret makes a private-key signature: the recorded one goes out,
    // with a word, with a secret or without (asking for one would not help).
    for opts in [&with_secret, &resign] {
        let plan = Plan::new(&discord, opts).expect("sent as recorded");
        assert_eq!(
            plan.warnings,
            [
                "discord requests are signed with Discord's private key: only a byte-identical replay verifies; \
              --resign sends the recorded signature"
            ]
        );
    }
    // A GitLab hook with a secret token carries no signature; one with no
    // token carries nothing to make either. Both go as recorded.
    for (headers, said) in [
        (
            vec![
                Header::new("x-gitlab-event", "Push Hook"),
                Header::new("x-gitlab-token", "t"),
            ],
            "this gitlab hook sends a secret token (X-Gitlab-Token), not a signature",
        ),
        (
            vec![Header::new("x-gitlab-event", "Push Hook")],
            "this gitlab hook carries neither a signature nor a secret token",
        ),
    ] {
        let gitlab = NewDelivery {
            provider: Some("gitlab".into()),
            request_headers: headers,
            ..recorded()
        };
        let plan = Plan::new(&gitlab, &resign).expect("sent as recorded");
        assert!(plan.warnings.iter().any(|w| w.starts_with(said)), "{:?}", plan.warnings);
    }
    // Given a secret, a token hook sends it as its token; given a signing
    // token (as PORTPREVIEW_SECRET gives every provider one), the recorded
    // token, which still verifies.
    let token_hook = NewDelivery {
        provider: Some("gitlab".into()),
        request_headers: vec![
            Header::new("x-gitlab-event", "Push Hook"),
            Header::new("x-gitlab-token", "t"),
        ],
        ..recorded()
    };
    let with = |secret: &str| ReplayOptions {
        secret: Some(SigningSecret::flag(secret)),
        ..resign.clone()
    };
    let plan = Plan::new(&token_hook, &with("t2")).expect("sent with the token");
    assert!(plan.signed_with().is_some_and(|signed| signed.token));
    let plan =
        Plan::new(&token_hook, &with("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")).expect("as recorded");
    assert!(plan.signed_with().is_none());
    assert_eq!(
        plan.warnings,
        [
            "the gitlab secret from --secret is a signing token (whsec_…), but this hook sends a secret token \
             (X-Gitlab-Token), not a signature: --resign sends the recorded token, which still verifies"
        ]
    );
    let changed = ReplayOptions {
        body: Some(b"{\"type\":2}".to_vec()),
        ..resign.clone()
    };
    let plan = Plan::new(&discord, &changed).expect("sent as recorded");
    assert!(
        plan.warnings[1].starts_with("the body was changed, and discord signs with its own private key"),
        "{:?}",
        plan.warnings
    );
    // The recorded body given back whole is no change.
    let same = ReplayOptions {
        body: Some(discord.request_body.clone()),
        ..resign.clone()
    };
    let plan = Plan::new(&discord, &same).expect("sent as recorded");
    assert_eq!(plan.warnings.len(), 1, "{:?}", plan.warnings);
    assert_eq!(plan.recorded.event_key, discord.event_key);
}

#[test]
fn fresh_events_are_flagged_unsigned_only_when_the_provider_signs_their_id() {
    let fresh = ReplayOptions {
        fresh: true,
        times: 2,
        ..ReplayOptions::default()
    };
    let unsigned = |request: &NewDelivery| warns(request, &fresh, "the fresh events are not re-signed");
    // GitHub signs the body alone; a fresh X-GitHub-Delivery leaves the
    // recorded signature verifying.
    let github = NewDelivery {
        provider: Some("github".into()),
        request_headers: vec![
            Header::new("x-github-event", "push"),
            Header::new("x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
            Header::new("x-hub-signature-256", "sha256=00"),
        ],
        ..recorded()
    };
    assert!(!unsigned(&github));
    let stripe = NewDelivery {
        provider: Some("stripe".into()),
        request_headers: vec![Header::new("stripe-signature", "t=1,v1=00")],
        request_body: b"{\"id\":\"evt_1\"}".to_vec(),
        request_body_size: 14,
        ..recorded()
    };
    assert!(unsigned(&stripe));
    // Sent by hand, with no signature: a fresh one voids nothing.
    let by_hand = NewDelivery {
        request_headers: vec![Header::new("content-type", "application/json")],
        ..stripe.clone()
    };
    assert!(!unsigned(&by_hand));
    // Linear signs the body, not Linear-Delivery: the recorded signature
    // goes out with the fresh events, so its age is worth a word.
    let body = br#"{"type":"Issue","webhookTimestamp":1700000000000}"#.to_vec();
    let linear = NewDelivery {
        provider: Some("linear".into()),
        request_headers: vec![
            Header::new("linear-event", "Issue"),
            Header::new("linear-delivery", "234d1a4e-b617-4388-90fe-adc3633d6b72"),
            Header::new("linear-signature", "00"),
        ],
        request_body_size: body.len() as u64,
        request_body: body,
        ..recorded()
    };
    let warnings = Plan::new(&linear, &fresh).unwrap().warnings;
    assert!(
        !warnings
            .iter()
            .any(|w| w.starts_with("the fresh events are not re-signed")),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|w| w.starts_with("the linear signature is ")),
        "{warnings:?}"
    );
}

#[test]
fn no_target_at_all_is_a_clear_error() {
    assert!(resolve_target("", None, "/").is_err());
    assert!(resolve_target("", Some("ftp://x:1"), "/").is_err());
}

/// A full URL recorded as a path (sent by a relay that broke the
/// protocol, and refused by the tunnel) is neither replayed nor exported
/// as a request line, with or without a `--target`.
#[test]
fn a_recorded_path_that_is_no_path_is_not_replayed() {
    for flag in [None, Some("http://127.0.0.1:4000"), Some("http://127.0.0.1:4000/hook")] {
        let err = resolve_target(
            "http://127.0.0.1:3000",
            flag,
            "http://169.254.169.254/latest/meta-data/",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "the delivery's path is not a path, http://169.254.169.254/latest/meta-data/: the tunnel refused it, \
             and it is neither replayed nor exported as a request"
        );
    }
}

#[test]
fn an_https_target_is_replayed_over_https() {
    let (endpoint, path) = resolve_target("https://localhost:8443/api", None, "/hook").unwrap();
    assert_eq!(endpoint.url(&path), "https://localhost:8443/api/hook");
    let (endpoint, path) = resolve_target("http://localhost:3000", Some("HTTPS://[::1]:8443"), "/hook").unwrap();
    assert_eq!(endpoint.url(&path), "https://[::1]:8443/hook", "--target's scheme");
    let (endpoint, _) = resolve_target("https://localhost:8443", Some("localhost:3000"), "/").unwrap();
    assert_eq!(
        endpoint.scheme,
        crate::target::Scheme::Http,
        "a bare --target is plain HTTP"
    );
}

#[test]
fn a_twilio_json_body_changed_before_re_signing_gets_its_own_hash_in_the_url() {
    let old = br#"{"event":"recorded"}"#;
    let new = br#"{"event":"changed"}"#;
    let hash = |body: &[u8]| hex::encode(<sha2::Sha256 as sha2::Digest>::digest(body));
    let twilio = NewDelivery {
        path: format!("/tw?bodySHA256={}", hash(old)),
        provider: Some("twilio".into()),
        tunnel_url: "https://relay.example/t/otter".into(),
        request_body: old.to_vec(),
        request_body_size: old.len() as u64,
        ..recorded()
    };
    let resign = ReplayOptions {
        resign: true,
        secret: Some(SigningSecret::flag("12345")),
        body: Some(new.to_vec()),
        ..ReplayOptions::default()
    };
    let plan = Plan::new(&twilio, &resign).unwrap();
    assert_eq!(plan.path, format!("/tw?bodySHA256={}", hash(new)));
    assert_eq!(
        plan.signed_url,
        format!("https://relay.example/t/otter/tw?bodySHA256={}", hash(new)),
        "the signature covers the URL with the new hash"
    );
    // The recorded body keeps the recorded URL, and so does a plain replay.
    let same = ReplayOptions {
        body: None,
        ..resign.clone()
    };
    assert_eq!(Plan::new(&twilio, &same).unwrap().path, twilio.path);
    let unsigned = ReplayOptions {
        resign: false,
        ..resign
    };
    assert_eq!(Plan::new(&twilio, &unsigned).unwrap().path, twilio.path);
}

/// A signature over the URL is made over the URL the provider called; a
/// `--target` that moves the path is said to, before anything is sent.
#[test]
fn a_target_that_moves_a_url_signed_path_is_pointed_out() {
    let twilio = NewDelivery {
        path: "/twilio?foo=1".into(),
        provider: Some("twilio".into()),
        tunnel_url: "https://relay.example/t/otter".into(),
        ..recorded()
    };
    let aimed = |target: &str| {
        let opts = ReplayOptions {
            resign: true,
            secret: Some(SigningSecret::flag("12345")),
            target: Some(target.into()),
            ..ReplayOptions::default()
        };
        Plan::new(&twilio, &opts).expect("signed").warnings
    };
    assert_eq!(
        aimed("http://127.0.0.1:4000/twilio/elsewhere"),
        [
            "the twilio signature is made over https://relay.example/t/otter/twilio?foo=1, the URL twilio called, \
             but the attempts ask for /twilio/elsewhere?foo=1: a handler that checks it against the path it is \
             called at refuses them"
        ]
    );
    // Another handler at the same path is signed for as it was called.
    assert!(aimed("http://127.0.0.1:4000").is_empty());
}

/// Twilio signs a JSON body through its hash in the URL: each fresh body
/// goes to a URL holding its own hash, signed over that URL.
#[test]
fn a_fresh_twilio_json_body_gets_its_own_hash_in_the_url() {
    let body = br#"{"CallSid":"CA1","x":1}"#;
    let hash = |body: &[u8]| hex::encode(<sha2::Sha256 as sha2::Digest>::digest(body));
    let twilio = NewDelivery {
        path: format!("/tw?bodySHA256={}", hash(body)),
        provider: Some("twilio".into()),
        tunnel_url: "https://relay.example/t/otter".into(),
        request_headers: vec![Header::new("x-twilio-signature", "recorded=")],
        request_body: body.to_vec(),
        request_body_size: body.len() as u64,
        ..recorded()
    };
    let fresh = ReplayOptions {
        fresh: true,
        fresh_field: Some("/CallSid".into()),
        resign: true,
        secret: Some(SigningSecret::flag("12345")),
        ..ReplayOptions::default()
    };
    let plan = Plan::new(&twilio, &fresh).unwrap();
    let variant = plan.fresh(Some("/CallSid")).unwrap();
    assert_ne!(variant.body, &body[..]);
    let out = plan.outgoing(&variant).unwrap();
    let path = format!("/tw?bodySHA256={}", hash(&variant.body));
    assert_eq!(out.path, path);
    let (mut expected, mut unchanged) = (twilio.request_headers.clone(), variant.body.to_vec());
    let url = format!("https://relay.example/t/otter{path}");
    provider::resign(
        Provider::Twilio,
        "12345",
        &mut expected,
        &mut unchanged,
        UNIX_EPOCH,
        Some(&url),
    )
    .unwrap();
    assert_eq!(out.headers, expected, "signed over the URL with the fresh body's hash");
    // The recorded identity keeps the recorded URL.
    assert_eq!(plan.outgoing(&plan.recorded).unwrap().path, twilio.path);

    // Unsigned, the recorded hash names another body: the handler refuses it.
    let unsigned = ReplayOptions {
        resign: false,
        secret: None,
        ..fresh
    };
    let plan = Plan::new(&twilio, &unsigned).unwrap();
    assert!(
        plan.warnings
            .iter()
            .any(|w| w.starts_with("the fresh events are not re-signed (no secret for twilio)")),
        "{:?}",
        plan.warnings
    );
}

#[test]
fn a_secret_with_whitespace_around_it_is_pointed_out() {
    let mut stripe = recorded();
    stripe.provider = Some("stripe".into());
    let signed_with = |secret: &str| {
        let opts = ReplayOptions {
            resign: true,
            secret: Some(SigningSecret::flag(secret)),
            ..ReplayOptions::default()
        };
        Plan::new(&stripe, &opts).expect("signed").warnings
    };
    assert_eq!(
        signed_with("whsec_abc\n"),
        [
            "the stripe secret begins or ends with whitespace (a newline?) and signs as given: \
          remove it unless the secret holds it"
        ]
    );
    assert_eq!(signed_with(" whsec_abc").len(), 1);
    assert!(signed_with("whsec_abc").is_empty());
}

/// An unsigned webhook from no known provider has nothing to re-sign: a
/// folder checked with --resign still sends it, as recorded.
#[test]
fn resigning_a_request_from_no_known_provider_sends_it_as_recorded() {
    let opts = ReplayOptions {
        resign: true,
        secret: Some(SigningSecret::flag("x")),
        ..ReplayOptions::default()
    };
    let plan = Plan::new(&recorded(), &opts).expect("sent as recorded");
    assert_eq!(
        plan.warnings,
        ["the provider is unknown, so --resign signs nothing: the request goes as recorded"]
    );
    let out = plan.outgoing(&plan.recorded).unwrap();
    assert_eq!(out.body, recorded().request_body);
}
