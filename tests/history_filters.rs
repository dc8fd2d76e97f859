//! A developer hunting a failed webhook narrows `history` down: by status,
//! by path, by when it came. Real deliveries through a real relay and
//! tunnel to a real handler, in a real history file, read back by the
//! real `portpreview history`.

mod common;

use common::caller;
use common::history::{portpreview_async, Ran};
use common::local::{Answer, LocalHandler};
use common::relay::TestRelay;
use common::tunnel::TestTunnel;
use portpreview::store::{NewDelivery, Outcome, Store};
use serde_json::Value;

/// The IDs a `history --json` run listed, newest first.
fn ids(ran: &Ran) -> Vec<i64> {
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let rows = ran.json();
    rows.as_array()
        .unwrap_or_else(|| panic!("a JSON array: {rows}"))
        .iter()
        .map(|row| row["id"].as_i64().expect("an id"))
        .collect()
}

/// What the handler answers: each endpoint its own way, as a handler
/// halfway through a change does.
fn by_path(seen: &common::local::Seen) -> Answer {
    let status = match seen.uri.as_str() {
        uri if uri.starts_with("/webhooks/missing") => 404,
        uri if uri.starts_with("/webhooks/crash") => 500,
        uri if uri.starts_with("/health") => 503,
        _ => 200,
    };
    Answer {
        status,
        ..Answer::default()
    }
}

/// Sends `path` through the tunnel and waits for its delivery to be
/// recorded; gives the caller's status and the delivery's ID.
async fn deliver(tunnel: &mut TestTunnel, path: &str) -> (u16, i64) {
    let reply = caller::post(&tunnel.url(path), format!(r#"{{"sent_to":"{path}"}}"#)).await;
    let (summary, _) = tunnel.next_delivery().await;
    (reply.status, summary.id)
}

#[tokio::test]
async fn failures_are_found_by_status_path_and_age_newest_first() {
    let relay = TestRelay::start().await;
    // The tunnel is up before the handler: its port refuses the first delivery.
    let port = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = port.local_addr().expect("address");
    drop(port);
    let mut tunnel = TestTunnel::start(&relay.http_url(), &addr.to_string()).await;

    // A crash from three days ago, before today's session.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let old_crash = Store::open(&tunnel.db)
        .expect("open the tunnel's history")
        .insert_delivery(
            &NewDelivery {
                received_at_ms: now - 3 * 86_400_000,
                target: format!("http://{addr}"),
                method: "POST".into(),
                path: "/webhooks/crash".into(),
                request_body: br#"{"sent_to":"three days ago"}"#.to_vec(),
                event_key: "sha256:three-days-ago".into(),
                event_key_source: "sha256:body".into(),
                ..NewDelivery::default()
            },
            &Outcome {
                status: Some(500),
                duration_ms: Some(4.0),
                ..Outcome::default()
            },
        )
        .expect("record the old crash");

    let (status, refused) = deliver(&mut tunnel, "/webhooks/orders").await;
    assert_eq!(status, 502, "nothing listens on the handler's port yet");
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("bind the handler's port");
    let handler = LocalHandler::start_on(listener, by_path);
    let (status, ok) = deliver(&mut tunnel, "/webhooks/orders?shop=acme").await;
    assert_eq!(status, 200);
    let (_, missing) = deliver(&mut tunnel, "/webhooks/missing").await;
    let (_, crash) = deliver(&mut tunnel, "/webhooks/crash").await;
    let (_, health) = deliver(&mut tunnel, "/health").await;
    let db = tunnel.db.clone();
    let listed = |args: &'static [&'static str]| {
        let db = db.clone();
        async move {
            let mut all = vec!["history", "--json"];
            all.extend_from_slice(args);
            portpreview_async(&db, &all).await
        }
    };

    let failures = listed(&["--status", "5xx"]).await;
    assert_eq!(ids(&failures), [health, crash, old_crash]);
    let statuses: Vec<Value> = failures
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].clone())
        .collect();
    assert_eq!(statuses, [503, 500, 500]);
    assert_eq!(ids(&listed(&["--status", "404"]).await), [missing]);
    let unanswered = listed(&["--status", "error"]).await;
    assert_eq!(ids(&unanswered), [refused]);
    let row = &unanswered.json()[0];
    assert!(row["status"].is_null(), "{row}");
    assert!(
        row["error"].as_str().is_some_and(|e| e.contains("could not reach")),
        "{row}"
    );
    assert_eq!(
        row["path"], "/webhooks/orders",
        "the same fields as without a filter: {row}"
    );
    let shown = portpreview_async(&db, &["show", &refused.to_string(), "--json"])
        .await
        .json();
    assert_eq!(shown["response"], Value::Null, "no answer, not an empty one: {shown:#}");
    assert_eq!(ids(&listed(&["--status", "4xx,err"]).await), [missing, refused]);
    assert_eq!(
        ids(&listed(&["--status", "404", "--status", "ERROR"]).await),
        [missing, refused],
        "repeated, as a comma list"
    );

    assert_eq!(
        ids(&listed(&["--path", "/webhooks/*"]).await),
        [crash, missing, ok, refused, old_crash]
    );
    assert_eq!(
        ids(&listed(&["--path", "/webhooks/orders"]).await),
        [ok, refused],
        "a path matches with its query or without, as replay --latest --path matches it"
    );

    assert_eq!(
        ids(&listed(&["--since", "1h"]).await),
        [health, crash, missing, ok, refused],
        "the crash of three days ago is left out"
    );
    assert_eq!(
        ids(&listed(&["--since", "4d", "--status", "500"]).await),
        [crash, old_crash]
    );
    // A received_at copied from a listing starts one there.
    let crash_row = listed(&["--status", "500", "--limit", "1"]).await.json()[0].clone();
    let received_at = crash_row["received_at"].as_str().expect("received_at").to_owned();
    let since = portpreview_async(&db, &["history", "--json", "--since", &received_at]).await;
    let since_crash = ids(&since);
    assert_eq!(since_crash[..2], [health, crash], "{}", since.stdout);
    assert!(since
        .json()
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["received_at"].as_str() >= Some(&received_at)));

    // Filters combine, and the limit counts what they let through: the
    // newest failure under /webhooks, though /health failed after it.
    assert_eq!(
        ids(&listed(&[
            "--status",
            "5xx,error",
            "--path",
            "/webhooks/*",
            "--since",
            "1h",
            "--limit",
            "1"
        ])
        .await),
        [crash]
    );
    let table = portpreview_async(&db, &["history", "--status", "5xx", "--limit", "2"]).await;
    assert_eq!(table.code, 0, "{}", table.stderr);
    let shown: Vec<&str> = table.stdout.lines().skip(1).take(2).collect();
    assert!(
        shown[0].trim_start().starts_with(&format!("#{health} "))
            && shown[1].trim_start().starts_with(&format!("#{crash} ")),
        "{}",
        table.stdout
    );
    assert!(
        table.stdout.ends_with(
            "\n(2 of 3 shown; --limit 0 lists all)\nDeliveries the handler never answered \
             (the caller got a 502 or 504 from PortPreview) have no status: --status 5xx,error lists them too.\n"
        ),
        "the footer counts the matches, and points at the 502 PortPreview answered: {}",
        table.stdout
    );
    let health_only = portpreview_async(&db, &["history", "--status", "5xx", "--path", "/health"]).await;
    assert!(
        !health_only.stdout.contains("never answered"),
        "no unanswered delivery under /health: {}",
        health_only.stdout
    );

    // A replay of the crash fails again; it is listed only with --replays.
    let replayed = portpreview_async(&db, &["replay", &crash.to_string()]).await;
    let crashes = handler
        .requests()
        .iter()
        .filter(|seen| seen.uri == "/webhooks/crash")
        .count();
    assert_eq!(crashes, 2, "the replay reached the handler: {}", replayed.stderr);
    assert_eq!(ids(&listed(&["--status", "500", "--since", "1h"]).await), [crash]);
    let with_replays = listed(&["--status", "500", "--since", "1h", "--replays"]).await;
    let rows = with_replays.json();
    let replay_of: Vec<Value> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["replay_of"].clone())
        .collect();
    assert_eq!(replay_of, [Value::from(crash), Value::Null], "{rows}");

    // Nothing matching says which filters matched nothing.
    let none = portpreview_async(
        &db,
        &["history", "--status", "404", "--path", "/health", "--since", "1h"],
    )
    .await;
    assert_eq!(
        (none.code, none.stdout.as_str()),
        (
            0,
            format!(
                "No deliveries match --status 404 --path /health --since 1h in {}.\n",
                db.display()
            )
            .as_str()
        )
    );
    tunnel.stop().await.expect("the tunnel stops cleanly");
}

#[tokio::test]
async fn a_filter_value_history_cannot_read_is_refused_in_one_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    Store::open(&db).expect("make a history");
    for (flag, value, why) in [
        (
            "--status",
            "600",
            "expected a status (404), a class of statuses (5xx), or error for no answer",
        ),
        ("--status", "4xx,", "expected a status (404)"),
        ("--since", "90", "90 has no unit: write 90ms, 90s, 90m, 90h, 90d or 90w"),
        ("--since", "2026-13-01", "or a date (2026-01-01, from its midnight UTC)"),
    ] {
        let ran = portpreview_async(&db, &["history", flag, value]).await;
        assert_eq!(ran.code, 2, "{flag} {value}: {}", ran.stderr);
        assert!(ran.stdout.is_empty(), "{}", ran.stdout);
        assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
        assert!(ran.stderr.contains(why), "{flag} {value}: {}", ran.stderr);
    }
}
