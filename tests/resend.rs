//! `portpreview resend`: deliveries a handler failed, recorded through a
//! real relay and tunnel, sent again by the real binary once the handler
//! is fixed; each event once, oldest first, none the handler has answered
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
async fn failed_events_are_sent_again_once_each_oldest_first_once_the_handler_is_fixed() {
    let fixed = Arc::new(AtomicBool::new(false));
    let handler = handler_down_until(fixed.clone()).await;
    let relay = TestRelay::start().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
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
        lines[0], "Would resend 2 events (not answered 2xx), oldest first:",
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
        "Passed over: 1 event that failed was answered 2xx since (a provider's retry, or a resend); 1 earlier \
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
    assert_eq!(json["answered_2xx"], 2);
    assert_eq!(json["not_answered_2xx"], 0);
    assert_eq!(json["answered_since"], 1);
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
            .contains("Passed over: 3 events that failed were answered 2xx since"),
        "{}",
        again.stdout
    );
    assert_eq!(handler.requests().len(), 10);
}

#[tokio::test]
async fn a_resend_stops_when_nothing_answers_and_more_than_the_limit_sends_nothing() {
    let fixed = Arc::new(AtomicBool::new(false));
    let handler = handler_down_until(fixed).await;
    let relay = TestRelay::start().await;
    let mut tunnel = TestTunnel::start(&relay.http_url(), &handler.url()).await;
    for id in ["evt_1", "evt_2", "evt_3"] {
        caller::post(&tunnel.url("/hooks"), event(id, "invoice.paid")).await;
        tunnel.next_delivery().await;
    }

    let over = portpreview_async(&tunnel.db, &["resend", "--limit", "2"]).await;
    assert_eq!(over.code, 2, "{}{}", over.stdout, over.stderr);
    assert!(
        over.stderr.contains("3 events in ") && over.stderr.contains("more than --limit 2"),
        "{}",
        over.stderr
    );
    assert_eq!(handler.requests().len(), 3, "nothing sent");

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
}
