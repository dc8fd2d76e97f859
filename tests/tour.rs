//! README's 30-second tour, step by step, against the handler it offers
//! (`examples/webhook_handler.rs`): the real binary, its in-process relay,
//! a real SQLite file. The handler that credits every delivery is found
//! out by `replay` and by `check`; the one that dedups passes both.

mod common;

use std::path::Path;

use common::caller;
use common::history::portpreview_async;
use common::process::Running;

#[allow(dead_code)] // Its `main` and usage are the example binary's.
#[path = "../examples/webhook_handler.rs"]
mod webhook_handler;

/// The event the tour posts, twice.
const EVENT: &str = r#"{"id":"evt_1NqPortPreview","object":"event","type":"invoice.paid"}"#;

/// The tour's handler, crediting every delivery or (`dedup`) each event
/// once, on a port of its own; its address.
async fn handler(dedup: bool) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    tokio::spawn(webhook_handler::serve(listener, dedup));
    format!("http://127.0.0.1:{port}")
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .and_then(|port| port.parse().ok())
        .expect("a port")
}

/// Steps 1 to 4 against a handler that credits every delivery, then
/// steps 3 and 4 again against one that dedups.
#[tokio::test]
async fn the_tour_finds_the_double_credit_and_passes_the_dedup() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let naive = handler(false).await;

    // 1. Forward a URL to the handler; deliver the same event twice.
    let (mut tunnel, url) = Running::local_tunnel(port_of(&naive), "127.0.0.1:0", &db, dir.path()).await;
    let json: &[(&str, &[u8])] = &[("Content-Type", b"application/json")];
    for _ in 0..2 {
        let reply = caller::send("POST", &format!("{url}/webhooks/stripe"), json, EVENT).await;
        assert_eq!(reply.status, 200);
    }
    let first = tunnel.line_containing("#1 ").await;
    assert!(first.contains("stripe invoice.paid evt_1NqPortPreview"), "{first}");
    let second = tunnel.line_containing("#2 ").await;
    assert!(
        second.ends_with("stripe invoice.paid evt_1NqPortPreview (2nd delivery)"),
        "{second}"
    );

    // 2. Look at what arrived.
    let listed = portpreview_async(&db, &["history"]).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(listed.stdout.contains("2 of 2"), "{}", listed.stdout);

    // 3. Ask whether the handler is idempotent: it is not.
    let balance = format!("{naive}/balance");
    let replayed = portpreview_async(&db, &["replay", "2", "--times", "10", "--check-url", &balance]).await;
    assert_eq!(replayed.code, 1, "{}{}", replayed.stdout, replayed.stderr);
    assert!(replayed.stdout.contains("✗ not idempotent"), "{}", replayed.stdout);

    // 4. Keep the answer in CI: the fixture fails the check too.
    let fixtures = dir.path().join("fixtures");
    let fixture = fixtures.join("invoice-paid.json");
    let exported = portpreview_async(&db, &["export", "2", "-o", path(&fixture)]).await;
    assert_eq!(exported.code, 0, "{}", exported.stderr);
    let check = |target: &str| {
        let probe = format!("{target}/balance");
        let args = [
            "check",
            path(&fixtures),
            "--target",
            target,
            "--check-url",
            &probe,
            "--times",
            "5",
        ];
        let args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
        let db = db.clone();
        async move { portpreview_async(&db, &args).await }
    };
    let checked = check(&naive).await;
    assert_eq!(checked.code, 1, "{}{}", checked.stdout, checked.stderr);

    // The handler fixed: each event credited once.
    let dedup = handler(true).await;
    let replayed = portpreview_async(&db, &["replay", "2", "--times", "10", "--target", &dedup]).await;
    assert_eq!(replayed.code, 0, "{}{}", replayed.stdout, replayed.stderr);
    let probe = format!("{dedup}/balance");
    let args = [
        "replay",
        "2",
        "--fresh",
        "--times",
        "10",
        "--target",
        &dedup,
        "--check-url",
        &probe,
    ];
    let fresh = portpreview_async(&db, &args).await;
    assert_eq!(fresh.code, 0, "{}{}", fresh.stdout, fresh.stderr);
    assert!(fresh.stdout.contains("✓ idempotent"), "{}", fresh.stdout);
    let checked = check(&dedup).await;
    assert_eq!(checked.code, 0, "{}{}", checked.stdout, checked.stderr);
    assert!(checked.stdout.contains("1 fixture: 1 idempotent"), "{}", checked.stdout);
}

fn path(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}
