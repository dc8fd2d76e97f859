//! A developer looks back at what was delivered: `history`, `show`,
//! `export` and `prune` run as real processes against a real history file.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Output};

use portpreview::fixture::Fixture;
use portpreview::store::{NewDelivery, Outcome, ReplayRun, Store};
use portpreview_shared::Header;
use serde_json::Value;

use common::bin::{portpreview_bin, run_into_a_closed_pipe};

/// A history database in a scratch directory, removed on drop.
struct History {
    dir: PathBuf,
    db: PathBuf,
}

impl History {
    fn new(label: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("portpreview-e2e-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // An empty config, isolating the runs from the user's own.
        std::fs::write(dir.join("config.toml"), "").unwrap();
        let db = dir.join("history.db");
        Self { dir, db }
    }

    fn store(&self) -> Store {
        Store::open(&self.db).unwrap()
    }

    /// Runs `portpreview <args>` with this database, isolated from the user's config.
    fn run(&self, args: &[&str]) -> Output {
        Command::new(portpreview_bin())
            .arg("--db")
            .arg(&self.db)
            .args(args)
            .env("PORTPREVIEW_CONFIG", self.dir.join("config.toml"))
            .env_remove("PORTPREVIEW_DB")
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for History {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn stripe_event(id: &str, received_at_ms: i64) -> NewDelivery {
    NewDelivery {
        received_at_ms,
        tunnel_url: "http://127.0.0.1:1/t/calm-otter".into(),
        target: "http://127.0.0.1:3000".into(),
        method: "POST".into(),
        path: "/webhooks/stripe?x=1".into(),
        request_headers: vec![
            Header::new("content-type", "application/json"),
            Header::new("stripe-signature", "t=1,v1=deadbeef"),
            Header::new("authorization", "Bearer sk_test_secret"),
        ],
        request_body: format!(r#"{{"id":"{id}","type":"charge.succeeded"}}"#).into_bytes(),
        request_body_size: 0,
        provider: Some("stripe".into()),
        event_key: id.into(),
        event_key_source: "body:/id".into(),
        replay_of: None,
        host_preserved: false,
        event_type: Some("charge.succeeded".into()),
    }
}

fn answered(status: u16) -> Outcome {
    Outcome {
        status: Some(status),
        response_headers: vec![Header::new("content-type", "text/plain")],
        response_body: b"ok".to_vec(),
        response_body_size: 2,
        duration_ms: Some(14.0),
        error: None,
    }
}

fn stderr_line(out: &Output) -> String {
    let text = String::from_utf8(out.stderr.clone()).unwrap();
    assert_eq!(text.lines().count(), 1, "one line expected: {text}");
    text.trim_end().to_owned()
}

/// A history longer than a page lists whole, in order, each delivery
/// numbered among its event's though the two fall on different pages.
#[test]
fn a_long_history_lists_whole_and_in_order() {
    let h = History::new("long");
    let store = h.store();
    let events = 601;
    for n in 0..2 * events {
        let at = 1_700_000_000_000 + n as i64;
        store
            .insert_delivery(&stripe_event(&format!("evt_{}", n % events), at), &answered(200))
            .unwrap();
    }
    let all: Vec<Value> = serde_json::from_str(&h.ok(&["history", "--limit", "0", "--json"])).unwrap();
    let ids: Vec<i64> = all.iter().map(|r| r["id"].as_i64().unwrap()).collect();
    let newest_first: Vec<i64> = (1..=2 * events as i64).rev().collect();
    assert_eq!(ids, newest_first);
    let numbers: Vec<i64> = all.iter().map(|r| r["delivery_number"].as_i64().unwrap()).collect();
    assert_eq!(&numbers[..events], vec![2; events], "the later half are retries");
    assert_eq!(&numbers[events..], vec![1; events]);

    let table = h.ok(&["history", "--limit", "0"]);
    assert_eq!(table.lines().count(), 1 + 2 * events, "a header and every delivery");
    assert!(table.lines().last().unwrap().trim_start().starts_with("#1 "), "{table}");
    let table = h.ok(&["history", "--limit", "700"]);
    assert!(
        table.ends_with("\n(700 of 1202 shown; --limit 0 lists all)\n"),
        "{table}"
    );
}

/// An event delivered hundreds of times, between others and replays, is
/// numbered down through every page, and through a filter that lists
/// only some of its deliveries.
#[test]
fn an_event_delivered_many_times_is_numbered_through_pages_and_filters() {
    let h = History::new("hot");
    let store = h.store();
    let mut expected = Vec::new();
    let mut hot = 0;
    for n in 0..1_300_i64 {
        let at = 1_700_000_000_000 + n;
        let (key, status) = if n % 4 == 3 {
            ("evt_other", 200)
        } else {
            ("evt_hot", 200 + 300 * (n % 2) as u16)
        };
        let id = store
            .insert_delivery(&stripe_event(key, at), &answered(status))
            .unwrap();
        if key == "evt_hot" {
            hot += 1;
            expected.push((id, hot, status));
        }
        if n % 100 == 0 {
            let mut replay = stripe_event("evt_hot", at);
            replay.replay_of = Some(id);
            store.insert_delivery(&replay, &answered(200)).unwrap();
        }
    }
    expected.reverse();
    let numbered = |args: &[&str]| -> Vec<(i64, i64)> {
        let rows: Vec<Value> = serde_json::from_str(&h.ok(args)).unwrap();
        rows.iter()
            .filter(|r| r["event_key"] == "evt_hot" && r["replay_of"].is_null())
            .map(|r| (r["id"].as_i64().unwrap(), r["delivery_number"].as_i64().unwrap()))
            .collect()
    };
    let all: Vec<(i64, i64)> = expected.iter().map(|&(id, number, _)| (id, number)).collect();
    assert_eq!(numbered(&["history", "--limit", "0", "--json"]), all);
    assert_eq!(
        numbered(&["history", "--limit", "0", "--json", "--replays"]),
        all,
        "replays between them count for nothing"
    );
    let rows: Vec<Value> = serde_json::from_str(&h.ok(&["history", "--limit", "0", "--json", "--replays"])).unwrap();
    let replay = rows
        .iter()
        .find(|r| !r["replay_of"].is_null())
        .expect("a replay attempt");
    assert_eq!(
        (&replay["delivery_count"], &replay["delivery_number"]),
        (&Value::Null, &Value::Null),
        "a replay attempt is no delivery of its event: {replay}"
    );
    let failed: Vec<(i64, i64)> = expected
        .iter()
        .filter(|&&(_, _, status)| status == 500)
        .map(|&(id, number, _)| (id, number))
        .collect();
    assert_eq!(
        numbered(&["history", "--limit", "0", "--json", "--status", "5xx"]),
        failed
    );
    let table = h.ok(&["history", "--event", "evt_hot", "--limit", "2"]);
    assert!(table.contains(&format!("{hot} of {hot}")), "{table}");
    assert!(table.contains(&format!("{} of {hot}", hot - 1)), "{table}");
}

#[test]
fn history_lists_newest_first_with_every_field() {
    let h = History::new("list");
    let store = h.store();
    let first = store
        .insert_delivery(&stripe_event("evt_1", 1_700_000_000_000), &answered(200))
        .unwrap();
    let retry = store
        .insert_delivery(&stripe_event("evt_1", 1_700_000_060_000), &answered(500))
        .unwrap();
    let failed = store
        .insert_delivery(
            &NewDelivery {
                provider: None,
                event_key: "sha256:abc".into(),
                event_key_source: "sha256:body".into(),
                ..stripe_event("x", 1_700_000_120_000)
            },
            &Outcome {
                error: Some("connection refused by 127.0.0.1:3000".into()),
                duration_ms: Some(1.0),
                ..Outcome::default()
            },
        )
        .unwrap();

    let rows: Vec<Value> = serde_json::from_str(&h.ok(&["history", "--json"])).unwrap();
    let ids: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, vec![failed, retry, first]);
    let r = &rows[1];
    assert_eq!(r["received_at"], "2023-11-14T22:14:20.000Z");
    assert_eq!(
        (r["method"].as_str(), r["path"].as_str()),
        (Some("POST"), Some("/webhooks/stripe?x=1"))
    );
    assert_eq!(
        (r["status"].as_u64(), r["duration_ms"].as_f64()),
        (Some(500), Some(14.0))
    );
    assert_eq!(
        (r["provider"].as_str(), r["event_key"].as_str()),
        (Some("stripe"), Some("evt_1"))
    );
    assert_eq!(
        (r["event_key_source"].as_str(), r["delivery_count"].as_i64()),
        (Some("body:/id"), Some(2))
    );
    let numbers: Vec<i64> = rows.iter().map(|r| r["delivery_number"].as_i64().unwrap()).collect();
    assert_eq!(numbers, vec![1, 2, 1], "the retry is the 2nd delivery of its event");
    let table = h.ok(&["history"]);
    let retry_line = table
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("#{retry} ")))
        .unwrap();
    assert!(retry_line.trim_end().ends_with("2 of 2"), "{table}");
    assert!(r["error"].is_null() && r["replay_of"].is_null());
    assert_eq!(r["target"], "http://127.0.0.1:3000");
    let e = &rows[0];
    assert!(e["status"].is_null() && e["provider"].is_null(), "{e}");
    assert_eq!(e["error"], "connection refused by 127.0.0.1:3000");

    let limited: Vec<Value> = serde_json::from_str(&h.ok(&["history", "--json", "--limit", "1"])).unwrap();
    assert_eq!(limited.len(), 1);
    let table = h.ok(&["history", "--limit", "2"]);
    assert!(table.ends_with("\n(2 of 3 shown; --limit 0 lists all)\n"), "{table}");
    let table = h.ok(&["history", "--limit", "3"]);
    assert!(!table.contains("shown;"), "all of it is shown: {table}");
    let by_event: Vec<Value> = serde_json::from_str(&h.ok(&["history", "--event", "evt_1", "--json"])).unwrap();
    assert_eq!(by_event.len(), 2);
    let by_provider: Vec<Value> = serde_json::from_str(&h.ok(&["history", "--provider", "stripe", "--json"])).unwrap();
    assert_eq!(by_provider.len(), 2);
    let unknown: Vec<Value> = serde_json::from_str(&h.ok(&["history", "--provider", "unknown", "--json"])).unwrap();
    assert_eq!(
        unknown.iter().map(|r| r["id"].clone()).collect::<Vec<_>>(),
        [e["id"].clone()],
        "--provider unknown: the delivery no provider was recognised in"
    );
    for either in [
        &["--provider", "stripe,unknown"][..],
        &["--provider", "unknown", "--provider", "stripe"],
    ] {
        let rows: Vec<Value> = serde_json::from_str(&h.ok(&[&["history", "--json"][..], either].concat())).unwrap();
        assert_eq!(rows.len(), 3, "any of them, as --status takes them: {either:?}");
    }
    let everything: Vec<Value> = serde_json::from_str(&h.ok(&["history", "--limit", "0", "--json"])).unwrap();
    assert_eq!(everything.len(), 3);

    // `--db` after the subcommand works too, and the table is plain text.
    let out = Command::new(portpreview_bin())
        .args(["history", "--provider", "stripe", "--db"])
        .arg(&h.db)
        .env("PORTPREVIEW_CONFIG", h.dir.join("config.toml"))
        .output()
        .unwrap();
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(table.lines().count(), 3, "header and two stripe rows: {table}");
    assert!(
        table.contains(&format!("#{retry}")) && !table.contains(&format!("#{failed} ")),
        "{table}"
    );
}

/// Each delivery is listed with its event type, and `--type` finds an
/// event type by name or glob, case as written.
#[test]
fn history_lists_and_filters_by_event_type() {
    let h = History::new("types");
    let store = h.store();
    let paid = store
        .insert_delivery(&stripe_event("evt_t1", 1_700_000_000_000), &answered(200))
        .unwrap();
    let refunded = NewDelivery {
        event_type: Some("charge.refunded".into()),
        ..stripe_event("evt_t2", 1_700_000_060_000)
    };
    let refunded = store.insert_delivery(&refunded, &answered(200)).unwrap();
    let untyped = NewDelivery {
        event_type: None,
        ..stripe_event("evt_t3", 1_700_000_120_000)
    };
    let untyped = store.insert_delivery(&untyped, &answered(200)).unwrap();

    let rows: Vec<Value> = serde_json::from_str(&h.ok(&["history", "--json"])).unwrap();
    let types: Vec<(i64, Value)> = rows
        .iter()
        .map(|r| (r["id"].as_i64().unwrap(), r["event_type"].clone()))
        .collect();
    assert_eq!(
        types,
        [
            (untyped, Value::Null),
            (refunded, Value::from("charge.refunded")),
            (paid, Value::from("charge.succeeded"))
        ]
    );
    let table = h.ok(&["history"]);
    let header = table.lines().next().unwrap();
    let column = header.find("TYPE").expect("a TYPE column");
    let row = table
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("#{refunded} ")))
        .unwrap();
    assert_eq!(row.get(column..column + 15), Some("charge.refunded"), "{table}");

    let ids = |args: &[&str]| -> Vec<i64> {
        let rows: Vec<Value> = serde_json::from_str(&h.ok(&[&["history", "--json"][..], args].concat())).unwrap();
        rows.iter().map(|r| r["id"].as_i64().unwrap()).collect()
    };
    assert_eq!(ids(&["--type", "charge.refunded"]), [refunded]);
    assert_eq!(ids(&["--type", "charge.*"]), [refunded, paid]);
    assert_eq!(ids(&["--type", "Charge.*"]), Vec::<i64>::new(), "case as written");
    assert_eq!(
        ids(&["--type", "charge"]),
        [refunded, paid],
        "a type names the types under it, as GitHub's pull_request is pull_request.opened"
    );
    assert_eq!(ids(&["--type", "charge.refund"]), Vec::<i64>::new(), "whole names only");
    let blank = h.run(&["history", "--type", ""]);
    assert_eq!(blank.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&blank.stderr).contains("'--type <GLOB>': is empty"),
        "an unset variable is told, not taken for a type nothing has: {blank:?}"
    );
    assert_eq!(
        ids(&["--type", "charge.refu…"]),
        [refunded],
        "as the table shows one cut"
    );
    assert_eq!(
        ids(&["--type", "[c]harge.*"]),
        Vec::<i64>::new(),
        "a [ is itself, as in --path"
    );
    assert_eq!(
        h.ok(&["history", "--type", "invoice.*"]),
        format!("No deliveries match --type invoice.* in {}.\n", h.db.display())
    );
    let shown = h.ok(&["show", &refunded.to_string()]);
    assert!(shown.contains("Type") && shown.contains("charge.refunded"), "{shown}");
}

#[test]
fn provider_filters_take_the_names_the_history_uses() {
    let h = History::new("providers");
    let store = h.store();
    store
        .insert_delivery(&stripe_event("evt_p", 1_700_000_000_000), &answered(200))
        .unwrap();
    let svix = NewDelivery {
        provider: Some("standard-webhooks".into()),
        event_key: "msg_p".into(),
        event_key_source: "header:svix-id".into(),
        ..stripe_event("x", 1_700_000_060_000)
    };
    let svix_id = store.insert_delivery(&svix, &answered(200)).unwrap();

    let listed = |provider: &str| -> Vec<Value> {
        serde_json::from_str(&h.ok(&["history", "--provider", provider, "--json"])).unwrap()
    };
    assert_eq!(listed("STRIPE").len(), 1, "names are case-insensitive");
    let by_alias = listed("svix");
    assert_eq!(
        (by_alias.len(), by_alias[0]["id"].as_i64()),
        (1, Some(svix_id)),
        "svix is stored as standard-webhooks"
    );

    let out = h.run(&["history", "--provider", "nosuch"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("'nosuch'") && stderr.contains("stripe, github, shopify") && stderr.contains("sendgrid"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());

    let said = h.ok(&["history", "--provider", "github"]);
    assert_eq!(
        said,
        format!("No deliveries match --provider github in {}.\n", h.db.display())
    );
    let out = h.run(&["replay", "--latest", "--provider", "github"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr_line(&out),
        format!(
            "error: no delivery in {} matches --latest --provider github",
            h.db.display()
        )
    );
    // As history takes them: any of two, listed or repeated.
    for args in [
        &["--provider", "github,shopify"][..],
        &["--provider", "github", "--provider", "shopify"],
    ] {
        let out = h.run(&[&["replay", "--latest"][..], args].concat());
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(
            stderr_line(&out),
            format!(
                "error: no delivery in {} matches --latest --provider github,shopify",
                h.db.display()
            )
        );
    }
}

#[test]
fn a_reader_that_stops_early_is_not_an_error() {
    let h = History::new("pipe");
    let store = h.store();
    for n in 0..200 {
        store
            .insert_delivery(
                &stripe_event(&format!("evt_{n}"), 1_700_000_000_000 + n),
                &answered(200),
            )
            .unwrap();
    }
    for args in [&["history", "--limit", "0"][..], &["history", "--json"], &["show", "1"]] {
        let out = run_into_a_closed_pipe(
            Command::new(portpreview_bin())
                .arg("--db")
                .arg(&h.db)
                .args(args)
                .env("PORTPREVIEW_CONFIG", h.dir.join("config.toml")),
        );
        assert_eq!(
            (out.status.code(), String::from_utf8_lossy(&out.stderr).as_ref()),
            (Some(0), ""),
            "{args:?}"
        );
    }
}

#[test]
fn durations_in_json_stop_at_the_microsecond() {
    let h = History::new("round");
    let outcome = Outcome {
        duration_ms: Some(46.377_326_000_000_004),
        ..answered(200)
    };
    let id = h
        .store()
        .insert_delivery(&stripe_event("evt_round", 1_700_000_000_000), &outcome)
        .unwrap();
    for args in [&["history", "--json"][..], &["show", &id.to_string(), "--json"]] {
        let text = h.ok(args);
        assert!(text.contains("\"duration_ms\": 46.377,"), "{args:?}: {text}");
    }
}

#[test]
fn a_request_stored_cut_short_exports_as_har_but_never_as_something_that_resends_it() {
    let h = History::new("cut");
    let mut cut = stripe_event("evt_cut", 1_700_000_000_000);
    cut.request_body_size = 40 * 1024 * 1024;
    let id = h.store().insert_delivery(&cut, &answered(200)).unwrap().to_string();
    let stored = cut.request_body.len();
    for (format, resends) in [("json", "a replay of the fixture"), ("curl", "a curl command")] {
        let out = h.run(&["export", &id, "--format", format]);
        assert_eq!(out.status.code(), Some(2), "{format}");
        assert_eq!(
            stderr_line(&out),
            format!("error: delivery #{id} was stored cut at {stored} of 41943040 bytes: {resends} would not send the same body")
        );
        assert!(out.stdout.is_empty(), "{format}");
    }
    let har: Value = serde_json::from_str(&h.ok(&["export", &id, "--format", "har"])).unwrap();
    let request = &har["log"]["entries"][0]["request"];
    assert_eq!(request["bodySize"], 41943040, "{har:#}");
    assert_eq!(
        request["postData"]["comment"],
        format!(
            "text holds the stored start only: stored body cut at {} of 41,943,040 bytes",
            portpreview_shared::text::thousands(stored as u64)
        ),
        "a devtools reader is told the text is not the whole body"
    );
}

#[test]
fn a_curl_export_of_an_expired_signature_says_a_handler_will_refuse_it() {
    let h = History::new("stale-curl");
    let old = stripe_event("evt_old", 1_700_000_000_000);
    let id = h.store().insert_delivery(&old, &answered(200)).unwrap().to_string();
    let out = h.run(&["export", &id, "--format", "curl"]);
    assert_eq!(out.status.code(), Some(0));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.starts_with("warning: the stripe signature is ")
            && said.contains("old; stripe accepts 5 min: a handler that checks signatures refuses")
            && said.ends_with(&format!("`portpreview replay {id} --resign` sends it signed anew\n")),
        "{said}"
    );
    // A fixture goes to replay or check, which warn (or re-sign) themselves.
    let out = h.run(&["export", &id, "--format", "json"]);
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn show_masks_secrets_and_escapes_what_the_sender_chose() {
    let h = History::new("show");
    let store = h.store();
    let mut hostile = stripe_event("evt_show", 1_700_000_000_000);
    hostile.path = "/hook\u{1b}]0;owned\u{7}".into();
    hostile.request_body = b"{\"id\":\"evt_show\",\"note\":\"\\u001b[2J\"}".to_vec();
    let id = store.insert_delivery(&hostile, &answered(200)).unwrap();
    store
        .insert_replay_run(&ReplayRun {
            id: 0,
            delivery_id: id,
            started_at_ms: 1_700_000_100_000,
            times: 3,
            concurrency: 1,
            idempotent: Some(true),
            summary: "idempotent".into(),
            report_json: "{}".into(),
        })
        .unwrap();

    let text = h.ok(&["show", &id.to_string()]);
    assert!(!text.contains('\u{1b}') && !text.contains('\u{7}'), "{text}");
    assert!(text.contains("\\x1b]0;owned\\x07"), "{text}");
    assert!(!text.contains("sk_test_secret") && !text.contains("deadbeef"), "{text}");
    assert!(text.contains("\"id\": \"evt_show\""), "pretty JSON body: {text}");
    assert!(text.contains("  ×3  idempotent"), "replay runs: {text}");
    assert!(h
        .ok(&["show", &id.to_string(), "--reveal"])
        .contains("Bearer sk_test_secret"));

    let json: Value = serde_json::from_str(&h.ok(&["show", &format!("#{id}"), "--json"])).unwrap();
    assert_eq!(json["id"], id);
    assert_eq!(json["path"], "/hook\u{1b}]0;owned\u{7}");
    assert_eq!(json["request"]["headers"][2]["value"], "Bearer ••••••");
    assert_eq!(json["response"]["status"], 200);
}

/// A secret carried in the URL (`?token=…`), as senders that cannot set a
/// header do, is masked wherever the path is shown, as a credential header
/// is; `--reveal` shows it, and exports that reproduce the request keep it.
#[test]
fn a_secret_in_the_query_string_is_masked_where_the_path_is_shown() {
    let h = History::new("query-secret");
    let mut delivery = stripe_event("evt_query", 1_700_000_000_000);
    delivery.path = "/hooks?token=tok_live_42&shop=acme".into();
    let id = h
        .store()
        .insert_delivery(&delivery, &answered(200))
        .unwrap()
        .to_string();
    let shown = [
        h.ok(&["history"]),
        h.ok(&["history", "--json"]),
        h.ok(&["show", &id]),
        h.ok(&["show", &id, "--json"]),
        h.ok(&["export", &id, "--format", "har"]),
    ];
    for text in shown {
        assert!(!text.contains("tok_live_42"), "{text}");
        assert!(text.contains("token=") && text.contains("shop=acme"), "{text}");
    }
    for revealed in [
        h.ok(&["show", &id, "--reveal"]),
        h.ok(&["history", "--reveal"]),
        h.ok(&["history", "--json", "--reveal"]),
    ] {
        assert!(revealed.contains("/hooks?token=tok_live_42&shop=acme"), "{revealed}");
    }
    assert!(h.ok(&["export", &id, "--format", "curl"]).contains("token=tok_live_42"));
    assert!(h.ok(&["export", &id, "--format", "json"]).contains("token=tok_live_42"));
}

/// Runs `portpreview show ID` with its stdout on a terminal (a pty made by
/// util-linux `script`) and returns what the terminal received.
fn show_on_a_terminal(h: &History, id: i64) -> String {
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let line = format!(
        "{} --db {} show {id}",
        quote(portpreview_bin().to_str().unwrap()),
        quote(h.db.to_str().unwrap())
    );
    let out = Command::new("script")
        .args(["-q", "-e", "-c", &line, "/dev/null"])
        .env("PORTPREVIEW_CONFIG", h.dir.join("config.toml"))
        .env_remove("PORTPREVIEW_DB")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("util-linux `script` gives show a terminal: apt-get install bsdutils");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8(out.stdout).unwrap().replace("\r\n", "\n")
}

#[test]
fn show_on_a_terminal_stops_a_large_body_early_and_a_pipe_gets_all_of_it() {
    let h = History::new("show-large");
    let mut upload = stripe_event("evt_large", 1_700_000_000_000);
    upload.request_headers = vec![Header::new("content-type", "application/octet-stream")];
    upload.request_body = (0..=255u8).cycle().take(1024 * 1024).collect();
    upload.request_body_size = upload.request_body.len() as u64;
    let id = h.store().insert_delivery(&upload, &answered(200)).unwrap();
    let hex_rows = |text: &str| text.lines().filter(|l| l.starts_with("  000")).count();

    let piped = h.ok(&["show", &id.to_string()]);
    assert_eq!(hex_rows(&piped), 1024 * 1024 / 16, "a pipe gets the whole body");
    assert!(!piped.contains("more bytes"), "{}", &piped[piped.len() - 300..]);

    let screen = show_on_a_terminal(&h, id);
    assert_eq!(hex_rows(&screen), 64 * 1024 / 16, "a terminal gets the first 64 KiB");
    // The history was named with --db, and the hint names it again.
    let again = format!("portpreview --db='{}'", h.db.display());
    let note = format!(
        "  … 983,040 more bytes; {again} show {id} | less shows all of them, {again} export {id} -o FILE saves them\n"
    );
    assert!(
        screen.contains(&note),
        "{}",
        &screen[screen.len().saturating_sub(600)..]
    );
    assert!(
        screen.contains("Response\n  Status 200"),
        "the rest of the delivery follows"
    );
}

/// A history damaged in the middle (its header whole) opens, and reading
/// it fails: `history --json` prints no whole array, so a script reading
/// stdout cannot take it for an empty or a whole history.
#[test]
fn a_history_damaged_in_the_middle_lists_no_whole_array() {
    let h = History::new("damaged");
    let store = h.store();
    for n in 0..400 {
        let mut d = stripe_event(&format!("evt_{n}"), 1_700_000_000_000 + n);
        d.request_body = vec![b'a' + (n % 26) as u8; 3000];
        store.insert_delivery(&d, &answered(200)).unwrap();
    }
    drop(store);
    let mut bytes = std::fs::read(&h.db).unwrap();
    let (from, to) = (bytes.len() / 4, bytes.len() * 3 / 4);
    for (i, byte) in bytes[from..to].iter_mut().enumerate() {
        *byte = (i * 131 % 251) as u8;
    }
    std::fs::write(&h.db, &bytes).unwrap();
    let out = h.run(&["history", "--json", "--limit", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(stderr_line(&out).contains("corrupt"), "{}", stderr_line(&out));
    assert!(
        serde_json::from_slice::<serde_json::Value>(&out.stdout).is_err(),
        "no valid JSON on stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A damaged page that leads a lookup astray finds no row and raises no
/// error in SQLite: `show`, `export` and `replay` of a delivery that is
/// there say the history is damaged, not that there is no such delivery.
#[test]
fn a_delivery_a_damaged_index_page_hides_is_reported_as_damage_not_as_missing() {
    let h = History::new("astray");
    let store = h.store();
    for n in 0..300 {
        store
            .insert_delivery(
                &stripe_event(&format!("evt_{n}"), 1_700_000_000_000 + n),
                &answered(200),
            )
            .unwrap();
    }
    drop(store);
    let conn = rusqlite::Connection::open(&h.db).unwrap();
    let root: u64 = conn
        .query_row(
            "SELECT rootpage FROM sqlite_master WHERE name = 'deliveries'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let page_size: u64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    drop(conn);
    // The root, an interior page (type 5), sends a search for rowid 1 to
    // its first child by the key of its first cell (after the child's
    // 4-byte page number): that key, made 0 in as many bytes, sends it on
    // to the second child, where row 1 is not.
    let mut bytes = std::fs::read(&h.db).unwrap();
    let page = usize::try_from((root - 1) * page_size).unwrap();
    assert_eq!(bytes[page], 5, "the deliveries table spans pages");
    let cell = page + usize::from(u16::from_be_bytes([bytes[page + 12], bytes[page + 13]]));
    let key = cell + 4;
    let len = bytes[key..].iter().position(|b| b & 0x80 == 0).unwrap() + 1;
    bytes[key..key + len - 1].fill(0x80);
    bytes[key + len - 1] = 0;
    std::fs::write(&h.db, &bytes).unwrap();
    for args in [&["show", "1"][..], &["export", "1"], &["replay", "1"]] {
        let out = h.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let line = stderr_line(&out);
        assert!(
            line.starts_with(&format!(
                "error: history database {} is corrupt: its deliveries table is damaged (",
                h.db.display()
            )),
            "{args:?}: {line}"
        );
    }
    // A delivery the lookup finds is shown as ever.
    assert_eq!(h.run(&["show", "300"]).status.code(), Some(0));
}

#[test]
fn unknown_ids_and_broken_databases_exit_2_with_one_line() {
    let h = History::new("errors");
    drop(h.store());
    let out = h.run(&["show", "42"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr_line(&out),
        format!("error: no delivery #42 in {}", h.db.display())
    );
    assert_eq!(h.run(&["export", "42", "--format", "curl"]).status.code(), Some(2));
    // An event key where an ID goes is pointed to the listing that gives IDs.
    for (command, placeholder) in [("show", "<ID>"), ("export", "<ID>...")] {
        let out = h.run(&[command, "evt_1NqPortPreview"]);
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(
            stderr_line(&out),
            format!(
                "error: invalid value 'evt_1NqPortPreview' for '{placeholder}': \"evt_1NqPortPreview\" is not a \
                 delivery id \
                 (a number as `history` lists it); for an event key, `portpreview history --event evt_1NqPortPreview` \
                 lists its deliveries; see portpreview {command} --help"
            )
        );
    }
    let out = h.run(&["export", "42", "--format", "curl", "--target", "notaurl"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_line(&out).starts_with("error: invalid --target \"notaurl\": expected http://host:port"),
        "{}",
        stderr_line(&out)
    );

    let text_file = h.dir.join("notes.txt");
    std::fs::write(&text_file, "not a database, just notes\n".repeat(50)).unwrap();
    let corrupt = h.dir.join("corrupt.db");
    let mut bytes = b"SQLite format 3\0".to_vec();
    bytes.extend(std::iter::repeat_n(0xa5u8, 8192));
    std::fs::write(&corrupt, bytes).unwrap();
    // SQLite would open a pipe or a device and write its journal beside it.
    let pipe = h.dir.join("pipe");
    assert!(Command::new("mkfifo").arg(&pipe).status().unwrap().success());
    for bad in [&text_file, &corrupt, &h.dir, &pipe] {
        let out = Command::new(portpreview_bin())
            .args(["history", "--db"])
            .arg(bad)
            .env("PORTPREVIEW_CONFIG", h.dir.join("config.toml"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", bad.display());
        let line = stderr_line(&out);
        assert!(
            line.starts_with("error: ") && line.contains(&bad.display().to_string()),
            "{line}"
        );
        assert_eq!(line.matches(&bad.display().to_string()).count(), 1, "{line}");
    }
    assert!(!h.dir.join("pipe-journal").exists(), "nothing written beside the pipe");
    // `http`, which creates its history, refuses the same in one line.
    let tunnel_refuses = |db: &std::path::Path| {
        let out = common::process::output_of(
            Command::new(portpreview_bin())
                .args(["http", "9", "--no-tui", "--db"])
                .arg(db)
                .env("PORTPREVIEW_CONFIG", h.dir.join("config.toml")),
        );
        assert_eq!(out.status.code(), Some(2), "{}", db.display());
        stderr_line(&out)
    };
    assert_eq!(
        tunnel_refuses(&pipe),
        format!(
            "error: {} is not a regular file, so it cannot hold a history: pass --db a file path",
            pipe.display()
        )
    );
    // A history another program holds exclusively is no fault of the
    // file: the error says the tunnel can go on without it.
    let held = h.dir.join("held.db");
    Store::open(&held).unwrap();
    let holder = rusqlite::Connection::open(&held).unwrap();
    holder
        .execute_batch("PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE; DELETE FROM deliveries;")
        .unwrap();
    assert_eq!(
        tunnel_refuses(&held),
        format!(
            "error: history database {} is locked by another process (one stopped as it wrote, by ctrl-z, SIGSTOP \
             or a debugger, or an sqlite3 shell in a transaction): try again, or forward without recording with \
             --no-record",
            held.display()
        )
    );
    drop(holder);
    // A file where a folder of the path should be is named.
    let under_a_file = text_file.join("history.db");
    assert_eq!(
        tunnel_refuses(&under_a_file),
        format!(
            "error: cannot create history database {}: {} is a file, not a folder",
            under_a_file.display(),
            text_file.display()
        )
    );
}

/// `portpreview --db DB <args>` run by a user who may only read `h`'s
/// files. Root may write anything, so as root the run is made as nobody,
/// from a copy of the binary in `h`'s folder that nobody can reach.
fn run_as_reader(h: &History, db: &std::path::Path, args: &[&str]) -> Output {
    run_as_reader_in(h, db, args, |command| {
        command.env("PORTPREVIEW_CONFIG", h.dir.join("config.toml"));
    })
}

/// [`run_as_reader`], its environment for settings set by `configure`.
fn run_as_reader_in(h: &History, db: &std::path::Path, args: &[&str], configure: impl FnOnce(&mut Command)) -> Output {
    let as_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.stdout == b"0\n");
    let mut command = if as_root {
        let bin = h.dir.join("portpreview");
        if !bin.exists() {
            std::fs::copy(portpreview_bin(), &bin).unwrap();
        }
        let mut command = Command::new("setpriv");
        command
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(bin);
        command
    } else {
        Command::new(portpreview_bin())
    };
    command.arg("--db").arg(db).args(args).env_remove("PORTPREVIEW_DB");
    configure(&mut command);
    common::process::output_of(&mut command)
}

#[test]
fn a_history_the_user_may_only_read_is_read_and_never_written() {
    use std::os::unix::fs::PermissionsExt;
    let h = History::new("read-only");
    h.store()
        .insert_delivery(&stripe_event("evt_kept", 1_764_470_700_000), &answered(200))
        .unwrap();
    // A CI job's artifact, say: the file and its folder read-only, no WAL beside it.
    let folder = h.dir.join("artifact");
    std::fs::create_dir(&folder).unwrap();
    let db = folder.join("history.db");
    std::fs::copy(&h.db, &db).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o555)).unwrap();

    let listed = run_as_reader(&h, &db, &["history", "--json"]);
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let rows: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(rows[0]["event_key"], "evt_kept", "{rows}");
    let shown = run_as_reader(&h, &db, &["show", "1"]);
    assert!(shown.status.success(), "{}", String::from_utf8_lossy(&shown.stderr));
    assert!(String::from_utf8_lossy(&shown.stdout).contains("evt_kept"));

    let pruned = run_as_reader(&h, &db, &["prune", "--older-than", "1s"]);
    assert_eq!(pruned.status.code(), Some(2));
    assert_eq!(
        stderr_line(&pruned),
        format!(
            "error: history database {} (or its folder, where SQLite keeps its journal) is read-only for this \
             user, and this would change it: run it as a user who may write both, or on a copy",
            db.display()
        )
    );
    assert_eq!(
        std::fs::read_dir(&folder).unwrap().count(),
        1,
        "nothing was made beside it"
    );

    // A tunnel recording into it would lose every delivery to a failed
    // write: refused, whether or not the folder takes new files.
    for mode in [0o555, 0o777] {
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(mode)).unwrap();
        let recording = run_as_reader(&h, &db, &["http", "1", "--no-tui"]);
        assert_eq!(recording.status.code(), Some(2));
        assert_eq!(
            stderr_line(&recording),
            format!(
                "error: history database {} (or its folder, where SQLite keeps its journal) is read-only for this \
                 user: pass --db a file you may write, or --no-record",
                db.display()
            ),
            "folder mode {mode:o}"
        );
    }
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();

    // Not even readable: said in words, not as SQLite's "unable to open".
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o000)).unwrap();
    let unreadable = run_as_reader(&h, &db, &["history"]);
    assert_eq!(unreadable.status.code(), Some(2));
    assert_eq!(
        stderr_line(&unreadable),
        format!(
            "error: history database {} cannot be read by this user: pass --db a history you may read",
            db.display()
        )
    );
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();

    // Behind a folder closed to this user: there, not missing. And a
    // config folder closed to it (`sudo -u` keeping HOME) is another
    // user's: no config file for this one, not an error for every command.
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o000)).unwrap();
    let unreachable = run_as_reader(&h, &db, &["history"]);
    let closed_config = run_as_reader_in(&h, &h.dir.join("elsewhere.db"), &["history"], |command| {
        command.env_remove("PORTPREVIEW_CONFIG").env("XDG_CONFIG_HOME", &folder);
    });
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(
        stderr_line(&closed_config),
        format!(
            "error: no history database at {} (start one with portpreview http)",
            h.dir.join("elsewhere.db").display()
        ),
        "the history is looked for, the config folder passed by"
    );
    assert_eq!(unreachable.status.code(), Some(2));
    assert_eq!(
        stderr_line(&unreachable),
        format!(
            "error: history database {} cannot be reached by this user, a folder on its path is closed to it: \
             pass --db a history you may read",
            db.display()
        )
    );

    // Copied with its WAL but without the -shm that reading the WAL needs:
    // what the WAL holds cannot be shown, and the reader is told so.
    let with_wal = h.dir.join("with-wal");
    std::fs::create_dir(&with_wal).unwrap();
    let writer = rusqlite::Connection::open(&h.db).unwrap();
    writer.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    writer
        .execute("UPDATE deliveries SET path = '/only-in-the-wal' WHERE id = 1", [])
        .unwrap();
    let copy = with_wal.join("history.db");
    std::fs::copy(&h.db, &copy).unwrap();
    std::fs::copy(h.dir.join("history.db-wal"), with_wal.join("history.db-wal")).unwrap();
    drop(writer);
    for file in [copy.clone(), with_wal.join("history.db-wal")] {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o444)).unwrap();
    }
    std::fs::set_permissions(&with_wal, std::fs::Permissions::from_mode(0o555)).unwrap();
    let listed = run_as_reader(&h, &copy, &["history"]);
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let stderr = String::from_utf8_lossy(&listed.stderr);
    assert!(
        stderr.contains(&format!("{}-wal is left out", copy.display())),
        "{stderr}"
    );
    std::fs::set_permissions(&with_wal, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_mistyped_db_is_refused_and_never_created() {
    let h = History::new("missing");
    let typo = h.dir.join("histroy.db");
    // Given by a variable, a path nobody typed is said to come from it.
    let expected = format!(
        "error: no history database at {} (start one with portpreview http); the path comes from PORTPREVIEW_DB",
        typo.display()
    );
    let commands: [&[&str]; 6] = [
        &["history"],
        &["show", "1"],
        &["export", "1"],
        &["prune", "--older-than", "7d"],
        &["replay", "1"],
        &["tui"],
    ];
    for args in commands {
        let out = Command::new(portpreview_bin())
            .args(args)
            .env("PORTPREVIEW_DB", &typo)
            .env("PORTPREVIEW_CONFIG", h.dir.join("config.toml"))
            .env("HOME", &h.dir)
            .env_remove("XDG_DATA_HOME")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(stderr_line(&out), expected, "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(!typo.exists(), "{args:?} created {}", typo.display());
        // Nor a log file: `tui` logs to one, and had nothing to log.
        let data = h.dir.join(".local/share/portpreview");
        assert!(!data.exists(), "{args:?} created {}", data.display());
    }
}

#[test]
fn another_programs_database_is_refused_and_left_untouched() {
    let h = History::new("foreign");
    let theirs = h.dir.join("app.db");
    {
        let conn = rusqlite::Connection::open(&theirs).unwrap();
        conn.execute_batch(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER); INSERT INTO orders VALUES (1, 42);",
        )
        .unwrap();
    }
    let before = std::fs::read(&theirs).unwrap();
    let commands: [&[&str]; 3] = [&["history"], &["show", "1"], &["prune", "--older-than", "7d"]];
    for args in commands {
        let out = Command::new(portpreview_bin())
            .args(args)
            .arg("--db")
            .arg(&theirs)
            .env("PORTPREVIEW_CONFIG", h.dir.join("config.toml"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(
            stderr_line(&out),
            format!(
                "error: {} is another program's SQLite database, not a PortPreview history: pass --db another file",
                theirs.display()
            )
        );
    }
    assert!(std::fs::read(&theirs).unwrap() == before, "not a byte of it changed");
    assert!(!h.dir.join("app.db-wal").exists(), "not even switched to WAL");

    // An empty file is no history to read, and is left as it is.
    let empty = h.dir.join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let out = Command::new(portpreview_bin())
        .args(["history", "--db"])
        .arg(&empty)
        .env("PORTPREVIEW_CONFIG", h.dir.join("config.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr_line(&out),
        format!(
            "error: {} holds no history yet (start one with portpreview http)",
            empty.display()
        )
    );
    assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);
}

#[test]
fn a_har_export_opens_as_har_1_2() {
    let h = History::new("har");
    let id = h
        .store()
        .insert_delivery(&stripe_event("evt_har", 1_700_000_000_000), &answered(200))
        .unwrap();
    let out_file = h.dir.join("delivery.har");
    h.ok(&[
        "export",
        &id.to_string(),
        "--format",
        "har",
        "-o",
        out_file.to_str().unwrap(),
    ]);
    let written = std::fs::read_to_string(&out_file).unwrap();
    for secret in ["deadbeef", "sk_test_secret"] {
        assert!(!written.contains(secret), "{secret} is masked everywhere: {written}");
    }
    let har: Value = serde_json::from_str(&written).unwrap();
    assert_eq!(har["log"]["version"], "1.2");
    assert_eq!(har["log"]["creator"]["name"], "portpreview");
    let entry = &har["log"]["entries"][0];
    assert_eq!(entry["startedDateTime"], "2023-11-14T22:13:20.000Z");
    assert_eq!(entry["request"]["method"], "POST");
    assert_eq!(entry["request"]["url"], "http://127.0.0.1:3000/webhooks/stripe?x=1");
    assert_eq!(entry["request"]["postData"]["mimeType"], "application/json");
    assert_eq!(
        entry["request"]["postData"]["text"],
        r#"{"id":"evt_har","type":"charge.succeeded"}"#
    );
    let headers = entry["request"]["headers"].as_array().unwrap();
    let names: Vec<&str> = headers.iter().map(|h| h["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["content-type", "stripe-signature", "authorization"],
        "masked headers are kept, by name"
    );
    assert_eq!(entry["response"]["status"], 200);
    assert_eq!(entry["response"]["content"]["text"], "ok");
    assert!(entry["timings"]["wait"].as_f64().unwrap() >= 0.0);

    let revealed: Value =
        serde_json::from_str(&h.ok(&["export", &id.to_string(), "--format", "har", "--reveal"])).unwrap();
    assert_eq!(
        revealed["log"]["entries"][0]["request"]["headers"][2]["value"],
        "Bearer sk_test_secret"
    );
    // Only HAR masks: --reveal with another format is said to do nothing.
    let curl = h.run(&["export", &id.to_string(), "--format", "curl", "--reveal"]);
    assert!(curl.status.success());
    assert!(String::from_utf8_lossy(&curl.stdout).contains("Bearer sk_test_secret"));
    assert_eq!(
        String::from_utf8_lossy(&curl.stderr).lines().next(),
        Some(
            "warning: --reveal is not used: only HAR files are masked; fixtures and curl commands keep every header \
             as received, so they replay exactly"
        )
    );
}

/// `{"received":true,"balance":1}` as gzip writes it (mtime 0).
const GZIP_ANSWER: [u8; 49] = [
    31, 139, 8, 0, 0, 0, 0, 0, 2, 3, 171, 86, 42, 74, 77, 78, 205, 44, 75, 77, 81, 178, 42, 41, 42, 77, 213, 81, 74,
    74, 204, 73, 204, 75, 78, 85, 178, 50, 172, 5, 0, 83, 94, 164, 79, 29, 0, 0, 0,
];

#[test]
fn a_gzip_answer_is_shown_and_exported_decoded() {
    let h = History::new("gzip");
    let answer = Outcome {
        response_headers: vec![
            Header::new("content-type", "application/json"),
            Header::new("content-encoding", "gzip"),
        ],
        response_body: GZIP_ANSWER.to_vec(),
        response_body_size: GZIP_ANSWER.len() as u64,
        ..answered(200)
    };
    let id = h
        .store()
        .insert_delivery(&stripe_event("evt_gzip", 1_700_000_000_000), &answer)
        .unwrap()
        .to_string();

    let shown = h.ok(&["show", &id]);
    assert!(
        shown.contains("(49 bytes gzip, shown decoded: 29 bytes)") && shown.contains(r#""balance": 1"#),
        "{shown}"
    );
    assert!(!shown.contains("1f 8b"), "no hex dump of the gzip stream: {shown}");

    let har: Value = serde_json::from_str(&h.ok(&["export", &id, "--format", "har"])).unwrap();
    let response = &har["log"]["entries"][0]["response"];
    assert_eq!(response["bodySize"], 49, "the bytes sent");
    assert_eq!(
        response["content"],
        serde_json::json!({
            "size": 29,
            "mimeType": "application/json",
            "text": r#"{"received":true,"balance":1}"#,
        }),
        "HAR 1.2: content is the body decoded; gzip saved nothing on so small a body"
    );

    // A handler that labels plain JSON gzip: its answer shows as sent, and why.
    let mislabelled = Outcome {
        response_headers: vec![Header::new("content-encoding", "gzip")],
        response_body: br#"{"received": true}"#.to_vec(),
        response_body_size: 18,
        ..answered(200)
    };
    let id = h
        .store()
        .insert_delivery(&stripe_event("evt_plain", 1_700_000_000_001), &mislabelled)
        .unwrap()
        .to_string();
    let shown = h.ok(&["show", &id]);
    assert!(
        shown.contains("(sent as gzip, but it does not decode: invalid gzip header; shown as sent)")
            && shown.contains(r#""received": true"#),
        "{shown}"
    );
}

#[test]
fn a_json_export_is_a_fixture_that_gives_back_the_request() {
    let h = History::new("fixture");
    let mut d = stripe_event("evt_fix", 1_700_000_000_000);
    d.request_headers.push(Header::new("x-raw", vec![0xff, 0xfe, b'a']));
    d.request_body = vec![0x00, 0xff, b'\n', b'%'];
    // A binary body carries no ID: its key is a hash of it.
    let key = portpreview_shared::provider::event_key(&d.request_headers, &d.request_body, &[]);
    assert_eq!(key.source, "sha256:body");
    d.event_key = key.key;
    d.event_key_source = key.source;
    let id = h.store().insert_delivery(&d, &answered(201)).unwrap();
    // Into a folder not made yet, as README's tour writes fixtures/….
    let path = h.dir.join("fixtures/stripe/fixture.json");
    let out = h.run(&["export", &id.to_string(), "-o", path.to_str().unwrap()]);
    assert!(out.status.success() && out.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("Wrote delivery #{id} as a fixture to {}\n", path.display()),
        "the file written is named"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "a fixture keeps its secrets: for its owner only");
    }
    let fixture = Fixture::load(&path).unwrap();
    assert_eq!(fixture.response_status, Some(201));
    let mut expected = d.clone();
    expected.request_body_size = 4;
    // Worked out from the request when one is stored, not kept in a fixture.
    expected.event_type = None;
    assert_eq!(fixture.to_new_delivery(), expected);

    // A file where a folder of the path should be is named, not taken
    // for a refusal to overwrite.
    let under_a_file = path.join("again.json");
    let out = h.run(&["export", &id.to_string(), "-o", under_a_file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr_line(&out),
        format!(
            "error: cannot write {}: {} is a file, not a folder",
            under_a_file.display(),
            path.display()
        )
    );
}

#[test]
fn an_export_never_overwrites_the_history_or_another_database() {
    let h = History::new("export-clobber");
    let id = h
        .store()
        .insert_delivery(&stripe_event("evt_keep", 1_700_000_000_000), &answered(200))
        .unwrap();
    let other = h.dir.join("other.db");
    let other_store = Store::open(&other).unwrap();
    other_store
        .insert_delivery(&stripe_event("evt_other", 1_700_000_000_000), &answered(200))
        .unwrap();
    let other_wal = h.dir.join("other.db-wal");
    assert!(other_wal.exists(), "the other history is open, with its WAL");
    let linked = h.dir.join("linked");
    std::fs::hard_link(h.dir.join("history.db"), &linked).unwrap();
    let id = id.to_string();
    // The history by another spelling, by a hard link, a file beside it,
    // another database and another database's WAL.
    let spellings = [
        h.dir.join(".").join("history.db"),
        linked,
        h.dir.join("history.db-wal"),
        h.dir.join("history.db-inbox-1234"),
        other.clone(),
        other_wal,
    ];
    for target in &spellings {
        for format in ["json", "har", "curl"] {
            let out = h.run(&["export", &id, "--format", format, "-o", target.to_str().unwrap()]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{target:?} {format}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
            assert!(stderr.contains("database"), "{stderr}");
        }
    }
    assert_eq!(
        h.ok(&["history", "--json"]).matches("evt_keep").count(),
        1,
        "the history is intact"
    );
    drop(other_store);
    let reopened = Store::open(&other).expect("the other database is intact");
    assert_eq!(
        reopened.count(&Default::default()).unwrap(),
        1,
        "with what its WAL held"
    );
    assert!(!h.dir.join("history.db-inbox-1234").exists(), "nothing was written");
}

#[test]
fn a_json_export_on_a_terminal_carries_no_raw_c1_or_bidi_control() {
    let h = History::new("export-c1");
    let mut d = stripe_event("evt_c1", 1_700_000_000_000);
    d.path = "/p\u{9b}31m/\u{202e}".into();
    d.request_body = "{\"msg\":\"hi \u{9b}31m\"}".as_bytes().to_vec();
    let id = h.store().insert_delivery(&d, &answered(200)).unwrap();
    let text = h.ok(&["export", &id.to_string()]);
    assert!(!text.contains('\u{9b}') && !text.contains('\u{202e}'), "{text}");
    assert!(
        text.contains("\\u009b") && text.contains("\\u202e"),
        "escaped, not dropped: {text}"
    );
    let fixture: Fixture = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (fixture.to_new_delivery().path, fixture.to_new_delivery().request_body),
        (d.path, d.request_body)
    );
}

/// Exports delivery `id` as a curl command aimed at a one-request listener
/// and runs it in `sh`: the command, and the raw request it sent.
fn send_curl_export(h: &History, id: i64) -> (String, Vec<u8>) {
    let (url, captured) = capture_one_request();
    let command = h.ok(&["export", &id.to_string(), "--format", "curl", "--target", &url]);
    assert!(!command.chars().any(|c| c.is_control() && c != '\n'), "{command}");
    let out = Command::new("sh").arg("-c").arg(&command).output().unwrap();
    assert!(
        out.status.success(),
        "{command}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"ok");
    (command, captured.join().unwrap())
}

/// Accepts one HTTP/1.1 request and hands back its raw bytes.
fn capture_one_request() -> (String, std::thread::JoinHandle<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        let mut raw = Vec::new();
        let mut buf = [0u8; 8192];
        let body_start = loop {
            let n = socket.read(&mut buf).unwrap();
            assert!(n > 0, "connection closed before the headers ended");
            raw.extend_from_slice(&buf[..n]);
            if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
        };
        let head = String::from_utf8_lossy(&raw[..body_start]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap());
        while raw.len() < body_start + length {
            let n = socket.read(&mut buf).unwrap();
            assert!(n > 0, "connection closed inside the body");
            raw.extend_from_slice(&buf[..n]);
        }
        socket
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
            .unwrap();
        raw
    });
    (url, handle)
}

/// A header as it crossed the wire: name and raw value.
type RawHeader = (String, Vec<u8>);

/// Splits a raw HTTP/1.1 request into its request line, headers and body.
fn split_request(raw: &[u8]) -> (String, Vec<RawHeader>, Vec<u8>) {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let mut lines = raw[..end]
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let request_line = String::from_utf8(lines.next().unwrap().to_vec()).unwrap();
    let headers = lines
        .map(|l| {
            let colon = l.iter().position(|&b| b == b':').unwrap();
            (
                String::from_utf8(l[..colon].to_vec()).unwrap(),
                l[colon + 1..].trim_ascii().to_vec(),
            )
        })
        .collect();
    (request_line, headers, raw[end + 4..].to_vec())
}

#[test]
fn a_curl_export_sends_the_same_bytes_again() {
    let h = History::new("curl");
    let mut d = stripe_event("evt_curl", 1_700_000_000_000);
    d.path = "/hooks/it's?a=[1]&b=$HOME".into();
    d.request_headers = vec![
        Header::new("host", "calm-otter.relay.example"),
        Header::new("content-type", "application/octet-stream"),
        Header::new("x-dup", "first"),
        Header::new("x-quote", "it's \"quoted\" $(not run) `nor this`"),
        Header::new("x-raw", vec![b'a', 0xff, 0xfe, b'z']),
        Header::new("x-dup", "second"),
        Header::new("x-empty", ""),
        Header::new("content-length", "999"),
        // Declared hop-by-hop by the caller: a replay leaves both out, so must curl.
        Header::new("connection", "x-trace"),
        Header::new("x-trace", "hop-1"),
    ];
    let mut body: Vec<u8> = (0..=255u8).collect();
    body.extend_from_slice(b"\n%s %% \\n '\"$(echo no)`x`\n-");
    d.request_body = body.clone();
    let id = h.store().insert_delivery(&d, &answered(200)).unwrap();

    let (_, raw) = send_curl_export(&h, id);
    let (request_line, headers, sent_body) = split_request(&raw);
    assert_eq!(request_line, "POST /hooks/it's?a=[1]&b=$HOME HTTP/1.1");
    assert_eq!(sent_body, body, "body byte for byte");
    let own: Vec<RawHeader> = headers
        .iter()
        .filter(|(name, _)| !name.eq_ignore_ascii_case("host") && !name.eq_ignore_ascii_case("content-length"))
        .cloned()
        .collect();
    let expected: Vec<RawHeader> = d.request_headers[1..7]
        .iter()
        .map(|h| (h.name.clone(), h.value.clone()))
        .collect();
    assert_eq!(own, expected, "the recorded headers, in order, and nothing curl added");
    let length = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .unwrap();
    assert_eq!(length.1, body.len().to_string().into_bytes());
}

#[test]
fn a_curl_export_sends_a_path_curl_would_rewrite_as_it_was_recorded() {
    let h = History::new("curl-path");
    for path in [
        // A C1 CSI and a right-to-left override, in the path and in the query.
        "/p\u{9b}31m/\u{202e}?q=\u{9b}",
        "/caf\u{e9}/\u{1F600}?name=J\u{f6}rg",
        // Dot segments and characters a URL would read otherwise.
        "/hooks/../admin/./x?a={1}|2&b=\"q\"#frag",
    ] {
        let mut d = stripe_event("evt_path", 1_700_000_000_000);
        d.path = path.into();
        let id = h.store().insert_delivery(&d, &answered(200)).unwrap();
        let (command, raw) = send_curl_export(&h, id);
        let line_end = raw.windows(2).position(|w| w == b"\r\n").unwrap();
        let expected = format!("POST {path} HTTP/1.1");
        assert_eq!(
            &raw[..line_end],
            expected.as_bytes(),
            "sent {:?}, recorded {expected:?}:\n{command}",
            String::from_utf8_lossy(&raw[..line_end])
        );
    }
}

#[test]
fn curl_and_fixture_exports_go_where_a_replay_goes() {
    let h = History::new("aim");
    // Recorded at /webhooks/stripe?x=1.
    let id = h
        .store()
        .insert_delivery(&stripe_event("evt_aim", 1_700_000_000_000), &answered(200))
        .unwrap()
        .to_string();
    // `--target http://host:port` keeps the recorded path; one with a path replaces it.
    for (path, expected) in [
        ("", "POST /webhooks/stripe?x=1 HTTP/1.1"),
        ("/v2/hook", "POST /v2/hook?x=1 HTTP/1.1"),
    ] {
        let (url, captured) = capture_one_request();
        let target = format!("{url}{path}");
        let command = h.ok(&["export", &id, "--format", "curl", "--target", &target]);
        let out = Command::new("sh").arg("-c").arg(&command).output().unwrap();
        assert!(
            out.status.success(),
            "{command}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (curl_line, _, _) = split_request(&captured.join().unwrap());

        let (url, captured) = capture_one_request();
        let target = format!("{url}{path}");
        let out = h.run(&["replay", &id, "--target", &target]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let (replay_line, _, _) = split_request(&captured.join().unwrap());

        let (url, captured) = capture_one_request();
        let fixture = h.dir.join("aimed.json");
        let target = format!("{url}{path}");
        h.ok(&["export", &id, "--target", &target, "-o", fixture.to_str().unwrap()]);
        let out = h.run(&["replay", "--from", fixture.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let (fixture_line, _, _) = split_request(&captured.join().unwrap());

        assert_eq!(
            (curl_line.as_str(), replay_line.as_str(), fixture_line.as_str()),
            (expected, expected, expected)
        );
    }
}

/// A POST that came with no body and no Content-Length: the curl command
/// sends the headers a replay sends, `Content-Length: 0` among them.
#[test]
fn a_curl_export_of_an_empty_post_sends_what_a_replay_sends() {
    let h = History::new("empty-post");
    let mut d = stripe_event("evt_empty", 1_700_000_000_000);
    d.request_headers
        .retain(|h| !h.name.eq_ignore_ascii_case("content-length"));
    d.request_body = Vec::new();
    d.request_body_size = 0;
    let id = h.store().insert_delivery(&d, &answered(200)).unwrap();
    let (_, raw) = send_curl_export(&h, id);
    let (_, curl_headers, _) = split_request(&raw);
    let (url, captured) = capture_one_request();
    let out = h.run(&["replay", &id.to_string(), "--target", &url]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let (_, replay_headers, _) = split_request(&captured.join().unwrap());
    let length = |headers: &[RawHeader]| {
        headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
            .map(|(_, value)| value.clone())
    };
    assert_eq!(length(&replay_headers), Some(b"0".to_vec()));
    assert_eq!(length(&curl_headers), length(&replay_headers));
}

/// Pruning most of a history gives its space back to the disk, in more
/// than one batch, and leaves what stays whole.
#[test]
fn pruning_most_of_a_history_shrinks_its_file() {
    let h = History::new("shrink");
    let store = h.store();
    let now = portpreview::time::now_ms();
    let old = 6_000;
    for n in 0..old {
        let mut d = stripe_event(&format!("evt_{n}"), now - 30 * 86_400_000 + n);
        d.request_headers
            .push(Header::new("authorization", format!("Bearer SHRUNK_SECRET_{n}")));
        d.request_body = format!("{{\"id\":\"evt_{n}\",\"pad\":\"{}\"}}", "x".repeat(1000)).into_bytes();
        d.request_body_size = d.request_body.len() as u64;
        store.insert_delivery(&d, &answered(200)).unwrap();
    }
    let kept = store
        .insert_delivery(&stripe_event("evt_new", now - 1_000), &answered(200))
        .unwrap();
    drop(store);
    let before = std::fs::metadata(&h.db).unwrap().len();

    assert_eq!(
        h.ok(&["prune", "--older-than", "7d", "--dry-run"]),
        "Would remove 6000 deliveries older than 7d (--dry-run: nothing removed).\n"
    );
    assert_eq!(std::fs::metadata(&h.db).unwrap().len(), before, "nothing removed");
    let said = h.ok(&["prune", "--older-than", "7d"]);
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines[0], "Removed 6000 deliveries older than 7d.", "{said}");
    assert!(lines[1].starts_with("The history file shrank from "), "{said}");
    let after = std::fs::metadata(&h.db).unwrap().len();
    assert!(after * 10 < before, "{before} -> {after} bytes");
    let file = std::fs::read(&h.db).unwrap();
    assert!(
        !file.windows(13).any(|w| w == b"SHRUNK_SECRET"),
        "no pruned secret is left"
    );
    let store = h.store();
    assert!(store.get(kept).unwrap().is_some());
    let conn = rusqlite::Connection::open(&h.db).unwrap();
    let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    assert_eq!(
        h.ok(&["prune", "--older-than", "4w"]),
        "Removed 0 deliveries older than 4w.\n",
        "a file with little free space is left as it is, and the age is said as written"
    );
}

/// Another process reading the history (a tunnel writing it does too)
/// keeps the rebuilt history in the WAL: the size said is the history's,
/// and the file is said to follow, not to have shrunk from a size to the
/// same.
#[test]
fn a_prune_beside_another_reader_says_the_file_follows() {
    let h = History::new("shrink-busy");
    let store = h.store();
    let now = portpreview::time::now_ms();
    for n in 0..2_000 {
        let mut d = stripe_event(&format!("evt_{n}"), now - 30 * 86_400_000 + n);
        d.request_body = format!("{{\"id\":\"evt_{n}\",\"pad\":\"{}\"}}", "x".repeat(1000)).into_bytes();
        d.request_body_size = d.request_body.len() as u64;
        store.insert_delivery(&d, &answered(200)).unwrap();
    }
    drop(store);
    let reader = rusqlite::Connection::open(&h.db).unwrap();
    reader.execute_batch("BEGIN; SELECT count(*) FROM deliveries;").unwrap();

    let said = h.ok(&["prune", "--older-than", "7d"]);
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines[0], "Removed 2000 deliveries older than 7d.", "{said}");
    assert!(lines[1].starts_with("The history shrank from "), "{said}");
    assert!(
        lines[1].ends_with(" KiB; its file follows once the process writing it pauses."),
        "{said}"
    );
    reader.execute_batch("COMMIT").unwrap();
}

/// `prune` waits up to 30 s for another process's write lock, and says
/// so first: a silent half minute reads as a hang.
#[test]
fn prune_says_it_waits_for_a_lock_another_process_holds() {
    let h = History::new("prune-locked");
    let store = h.store();
    store
        .insert_delivery(&stripe_event("evt_old", 1_700_000_000_000), &answered(200))
        .unwrap();
    drop(store);
    let holder = rusqlite::Connection::open(&h.db).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let mut prune = Command::new(portpreview_bin())
        .arg("--db")
        .arg(&h.db)
        .args(["prune", "--older-than", "7d"])
        .env("PORTPREVIEW_CONFIG", h.dir.join("config.toml"))
        .env_remove("PORTPREVIEW_DB")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(prune.stderr.take().unwrap());
    let mut said = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut said).unwrap();
    assert_eq!(
        said,
        "note: another process holds the history's write lock; waiting up to 30 s for it\n"
    );
    holder.execute_batch("ROLLBACK").unwrap();
    let out = prune.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Removed 1 delivery older than 7d.\n"
    );
}

#[test]
fn prune_removes_only_old_deliveries() {
    let h = History::new("prune");
    let store = h.store();
    let now = portpreview::time::now_ms();
    let mut secret = stripe_event("evt_old", now - 10 * 86_400_000);
    secret
        .request_headers
        .push(Header::new("x-api-key", "sk_live_PRUNED_SECRET"));
    secret.request_headers.push(Header::new("x-pad", " ".repeat(2048)));
    let old = store.insert_delivery(&secret, &answered(200)).unwrap();
    // Enough deliveries after it that the table's pages split: SQLite then
    // moves the secret's row and leaves its old bytes behind, unless every
    // write, not only the prune's, overwrites what it frees.
    for n in 0..100 {
        let mut filler = stripe_event(&format!("evt_filler_{n}"), now - 1_000);
        filler.request_headers.push(Header::new("x-pad", " ".repeat(1024)));
        store.insert_delivery(&filler, &answered(200)).unwrap();
    }
    // One attempt replayed the week it came, one replayed just now: both
    // are the old delivery's, and neither is counted as a delivery.
    let early_attempt = NewDelivery {
        replay_of: Some(old),
        ..stripe_event("evt_old", now - 9 * 86_400_000)
    };
    let early_attempt = store.insert_delivery(&early_attempt, &answered(200)).unwrap();
    let attempt = NewDelivery {
        replay_of: Some(old),
        ..stripe_event("evt_old", now - 2_000)
    };
    let attempt = store.insert_delivery(&attempt, &answered(200)).unwrap();
    let fresh = store
        .insert_delivery(&stripe_event("evt_new", now - 1_000), &answered(200))
        .unwrap();
    let said = h.ok(&["prune", "--older-than", "7d"]);
    assert_eq!(
        said,
        "Removed 1 delivery older than 7d, and 2 replay attempts of them.\n"
    );
    assert!(store.get(old).unwrap().is_none());
    assert!(store.get(early_attempt).unwrap().is_none());
    assert!(
        store.get(attempt).unwrap().is_none(),
        "no attempt is left pointing at nothing"
    );
    assert!(store.get(fresh).unwrap().is_some());
    drop(store);
    let file = [
        std::fs::read(&h.db).unwrap(),
        std::fs::read(h.db.with_extension("db-wal")).unwrap_or_default(),
    ]
    .concat();
    assert!(
        !file.windows(21).any(|w| w == b"sk_live_PRUNED_SECRET"),
        "a pruned secret is gone from the file, free pages and WAL included"
    );
    let store = h.store();
    assert_eq!(
        h.ok(&["prune", "--older-than", "168hours"]),
        "Removed 0 deliveries older than 7d.\n",
        "long spellings are read, and written back the short way"
    );

    let out = h.run(&["prune", "--older-than", "7"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("'7' for '--older-than <DURATION>': 7 has no unit: write 7ms, 7s, 7m, 7h, 7d or 7w"),
        "{stderr}"
    );
    assert!(store.get(fresh).unwrap().is_some());
}

#[test]
fn a_mistake_in_the_config_file_is_found_by_every_command() {
    let h = History::new("bad-config");
    h.store();
    std::fs::write(h.dir.join("config.toml"), "sever = \"https://relay.example.com\"\n").unwrap();
    for command in [&["history"][..], &["prune", "--older-than", "7d"]] {
        let out = h.run(command);
        assert_eq!(out.status.code(), Some(2), "{command:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.starts_with("error: invalid config file ") && stderr.contains("unknown field `sever`"),
            "{command:?}: {stderr}"
        );
    }
    // A PORTPREVIEW_CONFIG naming no file is a mistyped path, not "no config".
    std::fs::remove_file(h.dir.join("config.toml")).unwrap();
    let out = h.run(&["history"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        format!(
            "error: PORTPREVIEW_CONFIG names {}, which does not exist",
            h.dir.join("config.toml").display()
        )
    );
    // Nor is a folder, where the file was meant.
    std::fs::create_dir(h.dir.join("config.toml")).unwrap();
    let out = h.run(&["history"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        format!(
            "error: PORTPREVIEW_CONFIG names {}, a folder: name the config file in it",
            h.dir.join("config.toml").display()
        )
    );
}

#[test]
fn an_error_to_a_closed_stderr_exits_2_without_a_panic() {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let status = Command::new(portpreview_bin())
        .args(["history", "--db", "/nonexistent/history.db"])
        .stderr(writer)
        .status()
        .expect("run portpreview");
    assert_eq!(status.code(), Some(2), "a panic exits 101");
}

/// A history and the inbox its tunnel, run by an earlier PortPreview, left
/// (`tests/data/inbox-before-host-preserved`, whose README says how it was made).
fn older_history() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/inbox-before-host-preserved")
}

/// A copy of [`older_history`] in `history`, its inbox changed by `edit`
/// (a damage, say); returns the inbox's bytes as written.
fn copy_older_history(history: &History, edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let fixture = older_history();
    std::fs::copy(fixture.join("history.db"), &history.db).unwrap();
    let mut inbox = std::fs::read(fixture.join("history.db-inbox-faa3ea38")).unwrap();
    edit(&mut inbox);
    std::fs::write(history.dir.join("history.db-inbox-faa3ea38"), &inbox).unwrap();
    inbox
}

/// A history whose tunnel, run by PortPreview 0.1 before deliveries kept
/// whether the caller's Host was preserved, was killed while the database
/// was locked: its three requests, each answered 200, are still only in
/// its inbox. Made with that version's binaries; see
/// `tests/data/inbox-before-host-preserved`.
#[test]
fn requests_an_older_portpreview_left_in_its_inbox_are_moved_in_after_an_upgrade() {
    let history = History::new("older-inbox");
    copy_older_history(&history, |_| {});

    let listed: Value = serde_json::from_str(&history.ok(&["history", "--json"])).unwrap();
    let rows: Vec<(&str, Option<&str>, &str)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["path"].as_str().unwrap(),
                d["provider"].as_str(),
                d["event_key"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (
                "/plain?x=1",
                None,
                // Keyed as it is moved in: SHA-256 of `unknown\nplain body`.
                "0c9dff8396fd1ba916c24bb7cf60b65d59360eb7839662b5b789287d7dd6439e"
            ),
            ("/webhooks/github", Some("github"), "9d2c0c6e-legacy"),
            ("/webhooks/stripe", Some("stripe"), "evt_legacy_1"),
        ],
        "every request the old tunnel's callers heard back for is in the history"
    );
    let shown: Value = serde_json::from_str(&history.ok(&["show", "1", "--json"])).unwrap();
    assert_eq!(
        shown["request"]["body"],
        r#"{"id":"evt_legacy_1","object":"event","type":"invoice.paid"}"#
    );
    let left: Vec<String> = std::fs::read_dir(&history.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("inbox"))
        .collect();
    assert!(
        left.is_empty(),
        "the inbox is gone once all of it is moved in: {left:?}"
    );
}

#[test]
fn an_inbox_record_no_version_can_read_is_kept_in_a_file_set_aside_with_a_warning() {
    let history = History::new("unreadable-inbox");
    let inbox = copy_older_history(&history, |inbox| {
        // The GitHub request's record, damaged inside: its length still holds.
        let at = inbox.windows(8).position(|w| w == b"9d2c0c6e").unwrap();
        inbox[at - 30..at - 26].copy_from_slice(&[0xff; 4]);
    });

    let out = history.run(&["history", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let paths: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        ["/plain?x=1", "/webhooks/stripe"],
        "the records around it are moved in"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("1 record(s) in history inbox history.db-inbox-faa3ea38 could not be read")
            && stderr.contains("is kept as")
            && stderr.contains("history.db-unreadable-inbox-faa3ea38"),
        "says what it kept and where: {stderr}"
    );
    let kept = history.dir.join("history.db-unreadable-inbox-faa3ea38");
    assert_eq!(std::fs::read(&kept).unwrap(), inbox, "the file is kept as it was");
    assert!(!history.dir.join("history.db-inbox-faa3ea38").exists());

    // Put back, as by someone whose PortPreview can read it: what was
    // moved in is not moved in twice.
    std::fs::rename(&kept, history.dir.join("history.db-inbox-faa3ea38")).unwrap();
    let listed: Value = serde_json::from_str(&history.ok(&["history", "--json"])).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
}

#[test]
fn zeros_after_an_inboxs_last_record_are_no_loss_and_no_warning() {
    let history = History::new("zeroed-inbox");
    // What a power cut leaves of writes that never reached the disk.
    copy_older_history(&history, |inbox| inbox.extend_from_slice(&[0; 4096]));

    let out = history.run(&["history", "--json"]);
    assert!(out.status.success());
    // The answers the inbox never held are said lost; the zeros are no
    // record at all.
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "note: a tunnel stopped without a word (killed, or its machine went down) before it recorded the answers \
         to 3 deliveries; they are in the history now, as \"PortPreview stopped before it recorded the answer\", \
         whatever their callers heard\n"
    );
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 3);
    let left = std::fs::read_dir(&history.dir).unwrap().flatten();
    assert!(
        left.filter(|e| e.file_name().to_string_lossy().contains("inbox"))
            .count()
            == 0
    );
}

/// A history in a folder this user may only read cannot be upgraded, nor
/// take in what a stopped tunnel left beside it: each is said, rather than
/// an SQLite error, or an empty history shown as if it were all there is.
#[test]
fn a_read_only_history_says_what_it_cannot_upgrade_or_move_in() {
    use std::os::unix::fs::PermissionsExt;
    let h = History::new("read-only-left");
    let fixture = older_history();
    let read_only = |folder: &std::path::Path, files: &[(PathBuf, &str)]| {
        std::fs::create_dir(folder).unwrap();
        for (from, name) in files {
            let to = folder.join(name);
            std::fs::copy(from, &to).unwrap();
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o444)).unwrap();
        }
        std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o555)).unwrap();
        folder.join("history.db")
    };

    let earlier = read_only(&h.dir.join("earlier"), &[(fixture.join("history.db"), "history.db")]);
    let out = run_as_reader(&h, &earlier, &["history"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_line(&out).contains("was written by an earlier PortPreview (schema 9, this build reads")
            && stderr_line(&out).contains("must be upgraded, which needs write access"),
        "{}",
        stderr_line(&out)
    );

    drop(h.store());
    let current = read_only(
        &h.dir.join("current"),
        &[
            (h.db.clone(), "history.db"),
            (fixture.join("history.db-inbox-faa3ea38"), "history.db-inbox-faa3ea38"),
        ],
    );
    let out = run_as_reader(&h, &current, &["history"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("1 inbox file(s) beside the history (history.db-inbox-faa3ea38…) hold deliveries")
            && said.contains("not moved in and not shown"),
        "{said}"
    );
}

/// A log filter that does not parse is said to be ignored, once, rather
/// than leaving the user to wonder why the logs asked for never come.
#[test]
fn a_log_filter_that_does_not_parse_is_warned_of() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("none.db");
    let output = common::history::command(&db, &["history"])
        .env("PORTPREVIEW_LOG", "bad===")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("warning: PORTPREVIEW_LOG=bad=== is not a log filter ("),
        "{stderr}"
    );
    assert!(
        stderr.contains("): logging warnings only\nerror: no history database at "),
        "{stderr}"
    );
    assert_eq!(stderr.matches("warning:").count(), 1, "{stderr}");
    // One that parses but names a mistyped level would silence warnings.
    let output = common::history::command(&db, &["history"])
        .env("PORTPREVIEW_LOG", "debg")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("warning: PORTPREVIEW_LOG=debg: \"debg\" in it is no level (did you mean debug?)"),
        "{stderr}"
    );
}
