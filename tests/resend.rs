//! `portpreview resend`: deliveries a handler failed, recorded through a
//! real relay and tunnel, sent again by the real binary once the handler
//! is fixed; each event once, in the order it came, none the handler has answered
//! since.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::caller;
use common::history::portpreview_async;
use common::local::{Answer, LocalHandler};
use common::relay::TestRelay;
use common::tunnel::TestTunnel;

/// A Stripe event as its webhook carries it, unsigned.
fn event(id: &str, kind: &str) -> String {
    format!(r#"{{"id":"{id}","object":"event","type":"{kind}","data":{{"object":{{}}}}}}"#)
}

/// A handler that answers 500 until `fixed` is set, as one whose database
/// is down; `/ok` it always answers.
async fn handler_down_until(fixed: Arc<AtomicBool>) -> LocalHandler {
    LocalHandler::start(move |seen| Answer {
        status: match fixed.load(Ordering::SeqCst) || seen.uri == "/ok" {
            true => 200,
            false => 500,
        },
        body: b"handled".to_vec(),
        ..Answer::default()
    })
    .await
}

/// A handler down until its flag is set, behind a relay and a tunnel.
async fn broken_behind_a_tunnel() -> (Arc<AtomicBool>, LocalHandler, TestRelay, TestTunnel) {
    let fixed = Arc::new(AtomicBool::new(false));
    let handler = handler_down_until(fixed.clone()).await;
    let relay = TestRelay::start().await;
    let tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    (fixed, handler, relay, tunnel)
}

/// The events among what the handler received, in order.
fn events_seen(handler: &LocalHandler) -> Vec<String> {
    handler
        .requests()
        .iter()
        .filter_map(|seen| {
            let body: serde_json::Value = serde_json::from_slice(&seen.body).ok()?;
            Some(body["id"].as_str()?.to_owned())
        })
        .collect()
}

#[tokio::test]
async fn failed_events_are_sent_again_once_each_in_order_once_the_handler_is_fixed() {
    let (fixed, handler, _relay, mut tunnel) = broken_behind_a_tunnel().await;
    let hook = tunnel.url("/webhooks/stripe");
    // evt_A fails twice (the provider retried), evt_B once; evt_C fails
    // and then its retry is answered; /ok never failed.
    for (id, kind) in [
        ("evt_A", "invoice.paid"),
        ("evt_A", "invoice.paid"),
        ("evt_B", "charge.refunded"),
        ("evt_C", "invoice.created"),
    ] {
        assert_eq!(caller::post(&hook, event(id, kind)).await.status, 500);
    }
    fixed.store(true, Ordering::SeqCst);
    assert_eq!(caller::post(&hook, event("evt_C", "invoice.created")).await.status, 200);
    fixed.store(false, Ordering::SeqCst);
    assert_eq!(
        caller::post(&tunnel.url("/ok"), event("evt_D", "invoice.paid"))
            .await
            .status,
        200
    );
    for _ in 0..6 {
        tunnel.next_delivery().await;
    }

    let listed = portpreview_async(&tunnel.db, &["resend", "--dry-run"]).await;
    assert_eq!(listed.code, 0, "{}{}", listed.stdout, listed.stderr);
    let lines: Vec<&str> = listed.stdout.lines().collect();
    assert_eq!(
        lines[0], "Would resend 2 events (not answered 2xx), in the order they came:",
        "{}",
        listed.stdout
    );
    assert!(
        lines[1].starts_with("#2  POST /webhooks/stripe  500") && lines[1].contains("evt_A"),
        "{}",
        listed.stdout
    );
    assert!(
        lines[2].starts_with("#3  POST /webhooks/stripe  500") && lines[2].contains("evt_B"),
        "{}",
        listed.stdout
    );
    assert_eq!(
        lines[3],
        "Passed over: 1 event answered 2xx by another delivery (a provider's retry, or a resend); 1 earlier \
         delivery of events above (each event goes once).",
    );
    assert_eq!(handler.requests().len(), 6, "a dry run sends nothing");

    // Still down: each is sent, answered 500, and the run says so.
    let failing = portpreview_async(&tunnel.db, &["resend"]).await;
    assert_eq!(failing.code, 1, "{}{}", failing.stdout, failing.stderr);
    assert!(
        failing
            .stdout
            .contains("0 of 2 events answered 2xx. Not answered 2xx: #2, #3."),
        "{}",
        failing.stdout
    );
    assert!(
        failing.stdout.contains("show 7` shows the answer to #2"),
        "{}",
        failing.stdout
    );

    fixed.store(true, Ordering::SeqCst);
    let resent = portpreview_async(&tunnel.db, &["resend", "--json"]).await;
    assert_eq!(resent.code, 0, "{}{}", resent.stdout, resent.stderr);
    let json: serde_json::Value = serde_json::from_str(&resent.stdout).expect("one JSON object");
    let sent: Vec<(i64, i64, u64)> = json["resent"]
        .as_array()
        .expect("resent")
        .iter()
        .map(|one| {
            (
                one["delivery"]["id"].as_i64().unwrap(),
                one["resent_as"].as_i64().unwrap(),
                one["status"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(sent, [(2, 9, 200), (3, 10, 200)], "{json:#}");
    // Each row as `history --json` gives it: #2 was evt_A's second delivery.
    let numbers = [0, 1].map(|n| json["resent"][n]["delivery"]["delivery_number"].as_i64());
    assert_eq!(numbers, [Some(2), Some(1)], "{json:#}");
    assert_eq!(json["answered_2xx"], 2);
    assert_eq!(json["not_answered_2xx"], 0);
    assert_eq!(json["passed_over"]["answered_elsewhere"], 1);
    assert_eq!(
        events_seen(&handler),
        ["evt_A", "evt_A", "evt_B", "evt_C", "evt_C", "evt_D", "evt_A", "evt_B", "evt_A", "evt_B"]
    );

    // Kept as replays of the deliveries they resend, with the answers.
    let history = portpreview_async(&tunnel.db, &["history", "--replays", "--json", "--limit", "2"]).await;
    let rows: serde_json::Value = serde_json::from_str(&history.stdout).expect("history JSON");
    assert_eq!(rows[0]["id"], 10);
    assert_eq!(rows[0]["replay_of"], 3);
    assert_eq!(rows[0]["status"], 200);
    assert_eq!(rows[0]["event_key"], "evt_B");

    // Every failure has now been answered: nothing is sent again.
    let again = portpreview_async(&tunnel.db, &["resend"]).await;
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    assert!(again.stdout.starts_with("Nothing to resend in "), "{}", again.stdout);
    assert!(
        again
            .stdout
            .contains("Passed over: 3 events answered 2xx by another delivery"),
        "{}",
        again.stdout
    );
    // The JSON of a run, as when something was sent.
    let again = portpreview_async(&tunnel.db, &["resend", "--json"]).await;
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    let json: serde_json::Value = serde_json::from_str(&again.stdout).expect("resend JSON");
    assert_eq!(json["resent"], serde_json::json!([]));
    assert_eq!((&json["answered_2xx"], &json["not_reached"]), (&0.into(), &0.into()));
    assert_eq!(json["passed_over"]["answered_elsewhere"], 3);
    assert_eq!(handler.requests().len(), 10);
}

#[tokio::test]
async fn a_resend_stops_when_nothing_answers_and_a_limit_sends_the_first_events() {
    let (fixed, handler, _relay, mut tunnel) = broken_behind_a_tunnel().await;
    for id in ["evt_1", "evt_2", "evt_3"] {
        caller::post(&tunnel.url("/hooks"), event(id, "invoice.paid")).await;
        tunnel.next_delivery().await;
    }

    let down = common::local::nothing_answers_at();
    let stopped = portpreview_async(&tunnel.db, &["resend", "--target", &down]).await;
    assert_eq!(stopped.code, 2, "{}{}", stopped.stdout, stopped.stderr);
    assert!(stopped.stderr.contains("nothing answers at"), "{}", stopped.stderr);
    assert!(
        stopped.stderr.trim_end().ends_with("3 events were not sent"),
        "{}",
        stopped.stderr
    );
    let replays = portpreview_async(&tunnel.db, &["history", "--replays", "--json"]).await;
    let rows: serde_json::Value = serde_json::from_str(&replays.stdout).expect("history JSON");
    assert_eq!(rows.as_array().map(Vec::len), Some(3), "no attempt recorded: {rows:#}");

    fixed.store(true, Ordering::SeqCst);
    let first = portpreview_async(&tunnel.db, &["resend", "--limit", "1"]).await;
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    assert!(
        first.stdout.starts_with(
            "Resending 1 event (not answered 2xx), in the order they came; 2 more match, for the next run:\n"
        ),
        "{}",
        first.stdout
    );
    assert_eq!(events_seen(&handler)[3..], ["evt_1"]);
    let rest = portpreview_async(&tunnel.db, &["resend"]).await;
    assert_eq!(rest.code, 0, "{}{}", rest.stdout, rest.stderr);
    assert_eq!(
        events_seen(&handler)[3..],
        ["evt_1", "evt_2", "evt_3"],
        "the rest, next run"
    );
}

/// More than 100 events are refused before anything is sent, unless the
/// user says how many; a dry run lists them all.
#[test]
fn more_events_than_resend_sends_unless_told_are_refused_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("history.db");
    let store = portpreview::store::Store::open(&db).unwrap();
    let down = common::local::nothing_answers_at();
    for n in 0..101 {
        let delivery = portpreview::store::NewDelivery {
            received_at_ms: 1_700_000_000_000 + n,
            target: down.clone(),
            method: "POST".into(),
            path: "/hooks".into(),
            request_body: event(&format!("evt_{n}"), "invoice.paid").into_bytes(),
            provider: Some("stripe".into()),
            event_key: format!("evt_{n}"),
            event_key_source: "body:/id".into(),
            ..portpreview::store::NewDelivery::default()
        };
        let failed = portpreview::store::Outcome {
            status: Some(500),
            duration_ms: Some(1.0),
            ..portpreview::store::Outcome::default()
        };
        store.insert_delivery(&delivery, &failed).unwrap();
    }
    // What resend never sends is refused, not looked for.
    let ran = common::history::portpreview(&db, &["resend", "--status", "5xx,2xx"]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stderr.starts_with(
            "error: invalid value '2xx' for '--status <S>': resend sends events the handler did not answer 2xx"
        ),
        "{}",
        ran.stderr
    );
    let ran = common::history::portpreview(&db, &["resend"]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stderr.contains("101 events in ") && ran.stderr.contains("more than the 100 resend sends unless told"),
        "{}",
        ran.stderr
    );
    let listed = common::history::portpreview(&db, &["resend", "--dry-run"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert_eq!(
        listed.stdout.lines().count(),
        102,
        "the heading and every event: {}",
        listed.stdout
    );
}

/// ctrl-c while an event is being sent lets it finish: the handler may
/// have it already, and an answer kept nowhere would have the next run
/// send it again.
#[tokio::test]
async fn ctrl_c_stops_once_the_event_being_sent_is_answered_and_keeps_it() {
    let fixed = Arc::new(AtomicBool::new(false));
    let release = tokio_util::sync::CancellationToken::new();
    let handler = {
        let (fixed, release) = (fixed.clone(), release.clone());
        LocalHandler::start(move |_| match fixed.load(Ordering::SeqCst) {
            // Fixed, and slow: each answer waits for the test.
            true => Answer {
                status: 200,
                held_until: Some(release.clone()),
                ..Answer::default()
            },
            false => Answer {
                status: 500,
                ..Answer::default()
            },
        })
        .await
    };
    let relay = TestRelay::start().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    for id in ["evt_1", "evt_2"] {
        caller::post(&tunnel.url("/hooks"), event(id, "invoice.paid")).await;
        tunnel.next_delivery().await;
    }
    fixed.store(true, Ordering::SeqCst);
    let mut resend = tokio::process::Command::from(common::history::command(&tunnel.db, &["resend"]));
    resend
        .kill_on_drop(true)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut resend = resend.spawn().unwrap();
    // The first event has reached the handler, which holds its answer.
    while handler.requests().len() < 3 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let pid = resend.id().expect("running").to_string();
    std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    let output = async {
        // Its "stopping once" line says the signal was heard before the answer came.
        let mut stderr = resend.stderr.take().expect("piped");
        let mut heard = Vec::new();
        let mut buf = [0u8; 256];
        while !String::from_utf8_lossy(&heard).contains("stopping once #1 is answered") {
            let n = tokio::io::AsyncReadExt::read(&mut stderr, &mut buf).await.unwrap();
            assert!(n > 0, "stderr closed: {}", String::from_utf8_lossy(&heard));
            heard.extend_from_slice(&buf[..n]);
        }
        release.cancel();
        let rest = resend.wait_with_output().await.unwrap();
        (rest, String::from_utf8_lossy(&heard).into_owned())
    };
    let (rest, stderr) = tokio::time::timeout(std::time::Duration::from_secs(60), output)
        .await
        .expect("resend ended");
    let stdout = String::from_utf8_lossy(&rest.stdout);
    assert_eq!(rest.status.code(), Some(130), "{stdout}{stderr}");
    assert!(stdout.contains("(resends #1, answered 500)"), "{stdout}");
    assert!(
        stdout.contains("1 event answered 2xx. 1 event was not sent."),
        "{stdout}"
    );
    assert_eq!(events_seen(&handler), ["evt_1", "evt_2", "evt_1"], "evt_2 was not sent");

    // Kept: the next run sends only what is left.
    let listed = portpreview_async(&tunnel.db, &["resend", "--dry-run"]).await;
    let lines: Vec<&str> = listed.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", listed.stdout);
    assert!(lines[1].contains("evt_2"), "{}", listed.stdout);
}
