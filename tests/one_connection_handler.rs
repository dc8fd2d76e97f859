//! A handler that serves one connection at a time (Python's `http.server`,
//! `php -S`, many small test servers), judged with `--check-url` pointing at
//! the handler itself. Replay's attempts and its state probe share that one
//! connection slot: a run must take turns with itself, never wait on a
//! connection it is holding open.

mod common;

use std::time::Duration;

use common::handlers::{stripe_delivery, Behaviour, Handler};
use common::history::{portpreview_within, History};
use portpreview::fixture::Fixture;
use portpreview::store::Store;

/// Far longer than any of these runs takes, far shorter than a probe or an
/// attempt waits before it gives up: a run that finishes only by timing out
/// fails here rather than passing late.
const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn a_handler_that_dedups_is_idempotent_though_it_serves_one_connection_at_a_time() {
    let handler = Handler::one_connection_at_a_time(Behaviour::DedupsInOneTransaction);
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = history.replay_probed_within(LIMIT, &handler, &["--times", "3", "--json"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert_eq!(json["verdict"], "idempotent", "{json:#}");
    assert_eq!(ran.check("duplicates_change_nothing")["passed"], true);
    assert_eq!(json["state"]["after"], "balance: 1\n", "{json:#}");
    assert_eq!(handler.balance(), 1);
}

#[test]
fn a_handler_that_pays_every_duplicate_is_caught_though_it_serves_one_connection_at_a_time() {
    let handler = Handler::one_connection_at_a_time(Behaviour::CreditsEveryDelivery);
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = history.replay_probed_within(LIMIT, &handler, &["--times", "3", "--json"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert_eq!(json["verdict"], "not_idempotent", "{json:#}");
    assert_eq!(ran.check("answers_2xx")["passed"], true);
    assert_eq!(ran.check("duplicates_change_nothing")["passed"], false);
    assert_eq!(handler.balance(), 3);
}

#[test]
fn concurrent_attempts_and_a_fresh_burst_are_served_in_turn() {
    let handler = Handler::one_connection_at_a_time(Behaviour::DedupsInOneTransaction);
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = history.replay_probed_within(LIMIT, &handler, &["--times", "4", "--concurrency", "3", "--json"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(ran.check("answers_2xx")["passed"], true);
    assert_eq!(handler.balance(), 1);

    // A baseline event, then a burst of three copies of another, all at once.
    let ran = history.replay_probed_within(LIMIT, &handler, &["--fresh", "--times", "3", "--json"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(ran.json()["verdict"], "idempotent");
    assert_eq!(handler.balance(), 3);
}

#[test]
fn without_a_probe_concurrent_attempts_and_a_burst_are_served_in_turn_too() {
    let handler = Handler::one_connection_at_a_time(Behaviour::DedupsInOneTransaction);
    let history = History::with(&stripe_delivery(&handler.url()));
    for args in [
        &["--times", "4", "--concurrency", "3", "--json"][..],
        &["--fresh", "--times", "3", "--json"][..],
    ] {
        let ran = history.replay_within(LIMIT, args);
        assert_eq!(ran.code, 0, "{args:?}: {}{}", ran.stdout, ran.stderr);
        assert_eq!(ran.check("answers_2xx")["passed"], true, "{args:?}");
    }
}

#[test]
fn check_judges_a_fixture_against_a_handler_that_serves_one_connection_at_a_time() {
    let handler = Handler::one_connection_at_a_time(Behaviour::DedupsInOneTransaction);
    let history = History::with(&stripe_delivery("http://127.0.0.1:1"));
    let recorded = Store::open(&history.db()).unwrap().get(history.id).unwrap().unwrap();
    let project = tempfile::tempdir().unwrap();
    let fixture = project.path().join("stripe.json");
    std::fs::write(&fixture, Fixture::from_delivery(&recorded).to_json()).unwrap();
    let ran = portpreview_within(
        LIMIT,
        &history.db(),
        &[
            "check",
            fixture.to_str().unwrap(),
            "--target",
            &handler.url(),
            "--times",
            "3",
            "--check-url",
            &handler.state_url(),
            "--settle",
            "100ms",
        ],
    );
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout.contains("1 fixture: 1 idempotent, 0 not idempotent"),
        "{}",
        ran.stdout
    );
    assert_eq!(handler.balance(), 1);
}
