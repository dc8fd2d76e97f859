//! `portpreview replay`: a delivery in a real history database, replayed by
//! the real binary against real handlers with real SQLite side effects, and
//! the verdict's exit code and report checked.

mod common;

use std::process::Command;

use common::bin::{portpreview_bin, run_into_a_closed_pipe};
use common::handlers::{slack_delivery, stripe_delivery, Behaviour, Handler, STRIPE_SECRET};
use common::history::{portpreview, History};
use portpreview::replay::junit::escape;
use portpreview::store::{NewDelivery, Store};
use serde_json::Value;

/// `--check-url` takes a URL written as `--target` takes one, without
/// its scheme: the probe reads it as plain HTTP.
#[test]
fn a_check_url_written_without_its_scheme_reads_the_state() {
    let handler = Handler::start(Behaviour::CreditsEveryDelivery);
    let history = History::with(&stripe_delivery(&handler.url()));
    let short = handler.state_url().replace("http://", "");
    let ran = history.replay(&["--times", "2", "--check-url", &short, "--json"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(ran.json()["verdict"], "not_idempotent", "{}", ran.stdout);
}

#[test]
fn a_handler_that_credits_every_delivery_is_not_idempotent() {
    let handler = Handler::start(Behaviour::CreditsEveryDelivery);
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = history.replay_probed(&handler, &["--times", "3", "--json"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert_eq!(json["idempotent"], false);
    assert_eq!(json["verdict"], "not_idempotent");
    assert_eq!(json["provider"], "stripe");
    assert_eq!(json["event_key"], "evt_1PortPreviewTest");
    assert_eq!(json["delivery_id"], 1, "the delivery replayed");
    assert!(json["retry_window"].as_str().unwrap().contains("3 days"), "{json:#}");
    let duplicates = ran.check("duplicates_change_nothing");
    assert_eq!(duplicates["passed"], false);
    assert!(
        duplicates["detail"].as_str().unwrap().contains("attempts 2–3"),
        "{duplicates}"
    );
    let states: Vec<Value> = json["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["state_changed"].clone())
        .collect();
    assert_eq!(states, [true, true, true]);
    assert_eq!(handler.balance(), 3);
}

/// A replay attempt takes an ID among the deliveries: exported, it is
/// what PortPreview sent the handler, and the export says which delivery
/// the caller sent.
#[test]
fn exporting_a_replay_attempt_names_the_delivery_it_replayed() {
    let handler = Handler::start(Behaviour::DedupsInOneTransaction);
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = portpreview(&history.db(), &["replay", "1", "--times", "2"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let attempt = portpreview(&history.db(), &["export", "3"]);
    assert_eq!(attempt.code, 0, "{}", attempt.stderr);
    assert!(attempt.stdout.contains("\"portpreview_fixture\""), "{}", attempt.stdout);
    // The history named as it was, so the command runs as given.
    let db = history.db();
    assert_eq!(
        attempt.stderr,
        format!(
            "note: #3 is an attempt of a replay of #1, as PortPreview sent it; `portpreview --db='{}' export 1` \
             exports the delivery as its caller sent it\n",
            db.display()
        )
    );
    let original = portpreview(&history.db(), &["export", "1"]);
    assert_eq!((original.code, original.stderr.as_str()), (0, ""));
    // Several attempts at once are told of in one note.
    let both = portpreview(&history.db(), &["export", "1", "2", "3", "--format", "har"]);
    assert_eq!(both.code, 0, "{}", both.stderr);
    assert_eq!(
        both.stderr,
        format!(
            "note: deliveries #2 and #3 are attempts of a replay of #1, as PortPreview sent them; `portpreview \
             --db='{}' export 1` exports the delivery as its caller sent it\n",
            db.display()
        )
    );
}

/// A Discord event's key is a number (a snowflake): replayed by it, it is
/// taken as the key it is, not as an ID no delivery has; `#1` stays an ID.
#[test]
fn a_numeric_event_key_is_replayed_by_its_key() {
    let handler = Handler::start(Behaviour::DedupsInOneTransaction);
    let mut discord = stripe_delivery(&handler.url());
    discord.provider = Some("discord".into());
    discord.event_key = "1234567890123456789".into();
    let history = History::with(&discord);
    let ran = portpreview(&history.db(), &["replay", "1234567890123456789"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(
        ran.stderr,
        "replaying #1, the newest delivery of event 1234567890123456789\n"
    );
    let ran = portpreview(&history.db(), &["replay", "#1"]);
    assert_eq!((ran.code, ran.stderr.as_str()), (0, ""), "{}", ran.stdout);
    let ran = portpreview(&history.db(), &["replay", "#1234567890123456789"]);
    assert_eq!(ran.code, 2, "{}", ran.stdout);
    assert!(
        ran.stderr.contains("no delivery #1234567890123456789 in"),
        "{}",
        ran.stderr
    );

    // A number that is an ID and a key too: the ID, and a note on the key.
    let keyed_one = NewDelivery {
        event_key: "1".into(),
        ..discord
    };
    let store = Store::open(&history.db()).unwrap();
    store
        .insert_delivery(&keyed_one, &portpreview::store::Outcome::default())
        .unwrap();
    let ran = portpreview(&history.db(), &["replay", "1"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(
        ran.stderr,
        "note: replaying delivery #1; 1 is also an event key: `portpreview history --event 1` lists its \
         deliveries, to replay by ID\n"
    );
}

/// `history` shows a long event key cut, `evt_1PortPreview…`: copied from
/// there, it replays the one event it begins; when it begins several, the
/// error names them and how to pick one, and nothing is sent.
#[test]
fn an_event_key_cut_as_the_history_shows_it_replays_the_event_it_begins() {
    let handler = Handler::start(Behaviour::DedupsInOneTransaction);
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = portpreview(&history.db(), &["replay", "evt_1PortPreview…"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(
        ran.stderr,
        "replaying #1, the newest delivery of event evt_1PortPreviewTest\n"
    );
    assert_eq!(handler.balance(), 1);

    let store = Store::open(&history.db()).unwrap();
    let other = NewDelivery {
        event_key: "evt_1PortPreviewOther".into(),
        ..stripe_delivery(&handler.url())
    };
    store
        .insert_delivery(&other, &portpreview::store::Outcome::default())
        .unwrap();
    let ran = portpreview(&history.db(), &["replay", "evt_1PortPreview…"]);
    assert_eq!(ran.code, 2, "{}", ran.stdout);
    assert_eq!(
        ran.stderr,
        "error: several event keys begin with 'evt_1PortPreview' ('evt_1PortPreviewOther', \
         'evt_1PortPreviewTest'): give one whole, or a delivery's ID from \
         `portpreview history --event 'evt_1PortPreview…'`\n"
    );
    assert_eq!(history.replay_attempts(), 1, "the ambiguous key sent nothing");
    let ran = portpreview(&history.db(), &["replay", "evt_2…"]);
    assert_eq!(ran.code, 2, "{}", ran.stdout);
    assert!(
        ran.stderr
            .starts_with("error: no delivery with event key \"evt_2…\" in "),
        "{}",
        ran.stderr
    );
}

#[test]
fn a_handler_that_dedups_in_one_transaction_is_idempotent_and_the_run_is_recorded() {
    let handler = Handler::start(Behaviour::DedupsInOneTransaction);
    let history = History::with(&stripe_delivery(&handler.url()));
    // By event key this time, as a developer copies it from the provider's dashboard.
    let ran = portpreview(
        &history.db(),
        &[
            "replay",
            "evt_1PortPreviewTest",
            "--times",
            "5",
            "--check-url",
            &handler.state_url(),
            "--settle",
            "100ms",
        ],
    );
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(
        ran.stderr, "replaying #1, the newest delivery of event evt_1PortPreviewTest\n",
        "which delivery a key chose"
    );
    assert!(ran.stdout.contains("✓ duplicates_change_nothing"), "{}", ran.stdout);
    assert!(
        ran.stdout.contains("the event was new to the handler"),
        "{}",
        ran.stdout
    );
    assert!(ran.stdout.contains("✓ idempotent over 5 attempts"), "{}", ran.stdout);
    assert_eq!(handler.balance(), 1);

    // One GitHub delivery ID sent to two hooks is two events: the key
    // picks the newest, and says how to pick the other.
    let github = |hook: &str| NewDelivery {
        provider: Some("github".into()),
        event_key: "d7e1-shared".into(),
        event_key_source: "header:X-GitHub-Delivery".into(),
        request_headers: vec![
            portpreview_shared::Header::new("x-github-event", "ping"),
            portpreview_shared::Header::new("x-github-delivery", "d7e1-shared"),
            portpreview_shared::Header::new("x-github-hook-id", hook),
        ],
        ..stripe_delivery(&handler.url())
    };
    let store = Store::open(&history.db()).unwrap();
    let answered = portpreview::store::Outcome {
        status: Some(200),
        ..Default::default()
    };
    store.insert_delivery(&github("111"), &answered).unwrap();
    let newest = store.insert_delivery(&github("222"), &answered).unwrap();
    let ran = portpreview(&history.db(), &["replay", "d7e1-shared"]);
    assert_eq!(
        ran.stderr.lines().collect::<Vec<_>>(),
        [
            format!("replaying #{newest}, the newest delivery of event d7e1-shared").as_str(),
            "note: 2 events share this key (two providers, two hooks, or two paths): \
             `portpreview history --event d7e1-shared` lists them; replay another by its ID"
        ],
        "{}",
        ran.stderr
    );

    let store = Store::open(&history.db()).unwrap();
    let runs = store.replay_runs(history.id).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!((runs[0].times, runs[0].idempotent), (5, Some(true)));
    let replays = history.replay_attempts();
    assert_eq!(replays, 5);

    // A second run: the handler has seen the event, and says so.
    let ran = history.replay(&[
        "--times",
        "2",
        "--check-cmd",
        &format!("cat '{}'", handler.state_file().display()),
        "--settle",
        "100ms",
        "--json",
    ]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(ran.json()["first_attempt_changed_state"], false);
    assert!(ran.check("duplicates_change_nothing")["detail"]
        .as_str()
        .unwrap()
        .contains("had seen the event before"));
}

/// A probe that fails after its reads caught a duplicate acting: the
/// conviction stands, and the report holds the reads it rests on rather
/// than saying side effects went unchecked.
#[test]
fn a_probe_that_fails_after_catching_a_duplicate_keeps_the_reads_that_convict() {
    let handler = Handler::start(Behaviour::CreditsEveryDelivery);
    let history = History::with(&stripe_delivery(&handler.url()));
    let probe = format!(
        "grep -qE 'balance: [012]$' {0} && cat {0} || {{ echo 'db down' >&2; exit 1; }}",
        handler.state_file().display()
    );
    let ran = history.replay(&["--times", "4", "--check-cmd", &probe, "--settle", "50ms", "--json"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert_eq!(json["verdict"], "not_idempotent", "{json:#}");
    assert!(
        json["summary"]
            .as_str()
            .unwrap()
            .starts_with("✗ not idempotent: attempt 2 changed the state again"),
        "{json:#}"
    );
    assert_eq!(ran.check("duplicates_change_nothing")["passed"], false, "{json:#}");
    let readable = ran.check("state_readable");
    assert!(
        readable["detail"]
            .as_str()
            .unwrap()
            .ends_with("db down; what the attempts after its last read did to the state was not judged"),
        "{readable}"
    );
    assert_eq!(json["side_effects_checked"], true, "{json:#}");
    assert_eq!(json["first_attempt_changed_state"], true, "{json:#}");
    assert!(
        json["state"]["before"].as_str().unwrap().contains("balance: 0"),
        "{json:#}"
    );
}

/// The same with `--fresh`: a burst read to credit every copy convicts,
/// though the read three settle windows later fails. The probe fails once
/// the burst's state has held still for 2.5 s: after its reads (1 s of
/// stillness), before that last read (3 s after them), with more than a
/// second to spare either side on a loaded machine.
#[test]
fn a_probe_that_fails_after_catching_a_burst_acting_keeps_the_reads_that_convict() {
    let handler = Handler::start(Behaviour::CreditsEveryDelivery);
    let history = History::with(&stripe_delivery(&handler.url()));
    let probe = format!(
        "python3 -c 'import os, sys, time; f = sys.argv[1]; s = open(f).read(); \
         sys.exit(\"db down\") if \"balance: 4\" in s and time.time() - os.path.getmtime(f) > 2.5 else print(s, end=\"\")' {}",
        handler.state_file().display()
    );
    let ran = history.replay(&[
        "--fresh",
        "--times",
        "3",
        "--check-cmd",
        &probe,
        "--settle",
        "1s",
        "--json",
    ]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert_eq!(json["verdict"], "not_idempotent", "{json:#}");
    assert_eq!(ran.check("fresh_burst_acts_once")["passed"], false, "{json:#}");
    assert_eq!(ran.check("state_readable")["passed"], false, "{json:#}");
    assert_eq!(json["side_effects_checked"], true, "{json:#}");
    assert_eq!(handler.balance(), 4, "one baseline credit and three for the burst");
}

#[test]
fn a_change_far_into_a_long_state_is_still_seen() {
    // The balance comes after 100 KiB of other state: a probe that compared
    // only the start would call a handler that pays every duplicate idempotent.
    let handler = Handler::with_padded_state(Behaviour::CreditsEveryDelivery, 100 * 1024);
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = history.replay_probed(&handler, &["--times", "3", "--json"]);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    let json = ran.json();
    assert_eq!(json["verdict"], "not_idempotent");
    assert_eq!(ran.check("duplicates_change_nothing")["passed"], false);
    let after = json["state"]["after"].as_str().unwrap();
    assert!(after.ends_with("balance: 3\n"), "{}", &after[after.len() - 20..]);
    assert_eq!(handler.balance(), 3);
}

#[test]
fn a_state_too_large_to_compare_whole_leaves_the_run_inconclusive() {
    let handler = Handler::with_padded_state(Behaviour::DedupsInOneTransaction, 16 * 1024 * 1024);
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = history.replay_probed(&handler, &["--times", "2", "--json"]);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    let json = ran.json();
    assert_eq!(json["verdict"], "inconclusive");
    assert_eq!(json["idempotent"], false);
    let readable = ran.check("state_readable");
    assert_eq!(readable["passed"], false);
    let detail = readable["detail"].as_str().unwrap();
    assert!(
        detail.starts_with(&format!(
            "the check URL {} gave more than 16 MiB of state",
            handler.state_url()
        )),
        "{detail}"
    );
    assert!(
        json["summary"].as_str().unwrap().starts_with("? inconclusive: "),
        "{json:#}"
    );
    assert_eq!(ran.check("answers_2xx")["passed"], true);
    assert_eq!(handler.balance(), 1, "the attempts still went out");
}

#[test]
fn answering_409_to_a_duplicate_fails_even_though_the_state_is_right() {
    let handler = Handler::start(Behaviour::ConflictOnDuplicate);
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = history.replay_probed(&handler, &["--times", "3", "--json"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let answers = ran.check("answers_2xx");
    assert_eq!(answers["passed"], false);
    let detail = answers["detail"].as_str().unwrap();
    assert!(detail.contains("attempts 2–3 answered 409"), "{detail}");
    assert!(detail.contains("retries it"), "{detail}");
    assert_eq!(ran.check("duplicates_change_nothing")["passed"], true);
    let statuses: Vec<Value> = ran.json()["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].clone())
        .collect();
    assert_eq!(statuses, [200, 409, 409]);
    assert_eq!(
        ran.json()["answers"].as_array().unwrap().len(),
        2,
        "differing answers are listed"
    );
    assert_eq!(handler.balance(), 1);

    // On the terminal the two answers stand side by side, row by row.
    let handler = Handler::start(Behaviour::ConflictOnDuplicate);
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = history.replay_probed(&handler, &["--times", "3"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout
            .lines()
            .any(|row| row.contains("credited") && row.contains(" | ") && row.contains("duplicate event")),
        "{}",
        ran.stdout
    );
}

#[test]
fn a_check_then_insert_race_passes_in_sequence_and_fails_a_fresh_burst() {
    let handler = Handler::start(Behaviour::CheckThenInsert {
        gap: std::time::Duration::from_millis(150),
    });
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = history.replay_probed(&handler, &["--times", "5"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    // Concurrent duplicates of an event already handled pass too, and the
    // report points at what would catch the race.
    let ran = history.replay_probed(&handler, &["--times", "5", "--concurrency", "5", "--json"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let warnings = ran.json()["warnings"].to_string();
    assert!(
        warnings.contains("attempt 1 goes alone") && warnings.contains("pass --fresh"),
        "{warnings}"
    );

    let ran = history.replay_probed(&handler, &["--fresh", "--concurrency", "10", "--times", "10", "--json"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let burst = ran.check("fresh_burst_acts_once");
    assert_eq!(burst["passed"], false);
    let detail = burst["detail"].as_str().unwrap();
    assert!(detail.contains("check-then-insert race"), "{detail}");
    assert!(detail.contains("ON CONFLICT DO NOTHING"), "{detail}");
    let json = ran.json();
    let attempts = json["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 11, "a baseline and a burst of 10");
    assert_eq!(attempts[0]["role"], "baseline");
    assert_ne!(
        attempts[0]["event_key"], "evt_1PortPreviewTest",
        "fresh identities are new to the handler"
    );
    assert_ne!(attempts[0]["event_key"], attempts[1]["event_key"]);
    assert!(handler.balance() > 3, "balance {}", handler.balance());
}

/// A probe that prints a blank line for no events yet, then an event's ID
/// a line (Python's `print("\\n".join(ids))`): the first new event adds a
/// line, as a burst of another adds one, and a correct handler passes.
#[test]
fn a_fresh_burst_is_judged_on_a_list_that_said_nothing_yet_with_a_blank_line() {
    let dedups = Handler::start(Behaviour::DedupsInOneTransaction);
    let history = History::with(&stripe_delivery(&dedups.url()));
    let probe = ["--check-url", &dedups.ids_url(), "--fresh", "--times", "5", "--json"];
    let ran = history.replay(&probe);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(ran.check("fresh_burst_acts_once")["passed"], true);

    let racy = Handler::start(Behaviour::CheckThenInsert {
        gap: std::time::Duration::from_millis(150),
    });
    let probe = [
        "--target",
        &racy.url(),
        "--check-url",
        &racy.ids_url(),
        "--fresh",
        "--concurrency",
        "10",
        "--times",
        "10",
        "--json",
    ];
    let ran = history.replay(&probe);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(ran.check("fresh_burst_acts_once")["passed"], false);
}

/// A probe that prints pretty JSON, the balance beside the list of events
/// handled: each new event adds a line to the list and moves a comma, and
/// a race that credits every copy while recording the event once shows
/// only in the balance beside it.
#[test]
fn a_fresh_burst_is_judged_on_a_json_state_by_the_balance_beside_the_list() {
    let racy = Handler::start(Behaviour::CheckThenInsert {
        gap: std::time::Duration::from_millis(150),
    });
    let history = History::with(&stripe_delivery(&racy.url()));
    let fresh = |handler: &Handler| {
        let probe = handler.json_state_url();
        let args = ["--target", &handler.url(), "--check-url", &probe, "--settle", "100ms"];
        history.replay(&[&args[..], &["--fresh", "--times", "5", "--json"]].concat())
    };
    let ran = fresh(&racy);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let detail = ran.check("fresh_burst_acts_once")["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        detail.contains("changed the state by +1, +1, 1 line added") && detail.contains("check-then-insert race"),
        "{detail}"
    );

    let dedups = Handler::start(Behaviour::DedupsInOneTransaction);
    for _ in 0..3 {
        let ran = fresh(&dedups);
        assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
        assert_eq!(ran.check("fresh_burst_acts_once")["passed"], true);
    }
}

/// A probe that prints one row per event with what it was credited
/// (`SELECT id, credits FROM event_credits`), and a handler that keeps the
/// event's one row but credits it for every copy: the burst adds one line,
/// as the single delivery did, holding the credit of every copy.
#[test]
fn a_fresh_burst_that_credits_the_events_one_row_per_copy_is_caught() {
    let fresh = |handler: &Handler, history: &History| {
        let rows = handler.rows_url();
        let args = ["--target", &handler.url(), "--check-url", &rows, "--settle", "100ms"];
        history.replay(&[&args[..], &["--fresh", "--times", "4", "--json"]].concat())
    };
    let credits = Handler::start(Behaviour::CreditsEveryDelivery);
    let history = History::with(&stripe_delivery(&credits.url()));
    let ran = fresh(&credits, &history);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let burst = ran.check("fresh_burst_acts_once");
    let detail = burst["detail"].as_str().unwrap();
    assert!(
        detail.contains("a burst of 4 copies of one new event added `evt_") && detail.contains("|4`"),
        "{detail}"
    );
    assert!(detail.contains("|1`: 4 times as much"), "{detail}");

    let dedups = Handler::start(Behaviour::DedupsInOneTransaction);
    let ran = fresh(&dedups, &history);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(ran.check("fresh_burst_acts_once")["passed"], true);
}

/// A probe that prints, beside the balance, the last event credited and
/// when (`SELECT balance, last_event, credited_at`): every delivery replaces
/// the ID and moves the clock by its own amount, and only the balance
/// counts side effects.
#[test]
fn a_fresh_burst_is_judged_by_the_count_beside_an_event_id_and_a_clock() {
    let credits = Handler::naming_last_event(Behaviour::CreditsEveryDelivery);
    let history = History::with(&stripe_delivery(&credits.url()));
    let ran = history.replay_probed(&credits, &["--fresh", "--times", "4", "--json"]);
    assert_eq!(ran.code, 1, "a handler that never dedups: {}{}", ran.stdout, ran.stderr);
    let burst = ran.check("fresh_burst_acts_once");
    assert_eq!(burst["passed"], false, "{burst}");
    let detail = burst["detail"].as_str().unwrap();
    assert!(
        detail.contains("by +1, 2 values replaced") && detail.contains("by +4, 2 values replaced"),
        "{detail}"
    );

    let dedups = Handler::naming_last_event(Behaviour::DedupsInOneTransaction);
    // The clock moves by another amount each run: every run must pass.
    for _ in 0..3 {
        let ran = history.replay_probed(
            &dedups,
            &["--target", &dedups.url(), "--fresh", "--times", "4", "--json"],
        );
        assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
        assert_eq!(ran.check("fresh_burst_acts_once")["passed"], true);
    }
}

/// A probe that works for the first read and fails once the attempts have
/// begun (its database went down) leaves the run inconclusive, with every
/// attempt sent reported and recorded: not "could not run", which would
/// hide that the handler was called.
#[test]
fn a_probe_that_fails_part_way_leaves_the_attempts_reported() {
    let handler = Handler::start(Behaviour::CreditsEveryDelivery);
    let history = History::with(&stripe_delivery(&handler.url()));
    let state = handler.state_file();
    let probe = format!(
        "grep -q 'balance: 0' {0} && cat {0} || {{ echo 'db down' >&2; exit 1; }}",
        state.display()
    );
    let ran = history.replay(&["--times", "3", "--check-cmd", &probe, "--settle", "50ms", "--json"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert_eq!(json["verdict"], "inconclusive", "{json:#}");
    assert_eq!(json["attempts"].as_array().map(Vec::len), Some(3), "{json:#}");
    let readable = ran.check("state_readable");
    assert_eq!(readable["passed"], false);
    assert!(
        readable["detail"]
            .as_str()
            .unwrap()
            .starts_with("the check command failed (exit status: 1): db down"),
        "{readable}"
    );
    // The probe was given: no advice to pass one, and no claim about
    // attempt 1 beside a state the report does not hold.
    assert!(!json["warnings"].to_string().contains("pass --check-url"), "{json:#}");
    assert_eq!(json["side_effects_checked"], false, "{json:#}");
    assert!(json["first_attempt_changed_state"].is_null(), "{json:#}");
    assert_eq!(handler.balance(), 3);
    assert_eq!(history.replay_attempts(), 3, "the attempts are in the history");
}

/// `--concurrency 1` given with `--fresh` sends the burst one copy at a
/// time, as asked: a check-then-insert handler then has no race to lose.
#[test]
fn an_explicit_concurrency_of_1_is_kept_for_a_fresh_burst() {
    let handler = Handler::start(Behaviour::CheckThenInsert {
        gap: std::time::Duration::from_millis(150),
    });
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = history.replay_probed(&handler, &["--fresh", "--times", "3", "--concurrency", "1", "--json"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert_eq!(json["concurrency"], 1, "{json:#}");
    assert_eq!(handler.balance(), 2, "one credit for the baseline, one for the burst");
    assert!(json["warnings"].to_string().contains("one copy at a time"), "{json:#}");
    // Left out, the burst goes out all at once.
    let ran = history.replay_probed(&handler, &["--fresh", "--times", "3", "--json"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(ran.json()["concurrency"], 3);
}

/// An attempt 1 that got no 2xx leaves nothing for the others to
/// duplicate: the run failed, and the attempt that first handled the event
/// is not called a duplicate that acted again.
#[test]
fn a_first_attempt_that_failed_judges_no_duplicate() {
    let handler = Handler::start(Behaviour::FailsFirstThenDedups {
        failed: Default::default(),
    });
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = history.replay_probed(&handler, &["--times", "3", "--json"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert_eq!(json["verdict"], "failed", "{json:#}");
    assert!(
        json["summary"]
            .as_str()
            .unwrap()
            .starts_with("✗ failed: attempt 1 answered 500:"),
        "{json:#}"
    );
    let names: Vec<&str> = json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["answers_2xx", "duplicates_change_nothing", "state_settled"],
        "{json:#}"
    );
    assert_eq!(
        ran.check("state_settled")["passed"],
        true,
        "the move was attempt 2's, not a late one"
    );
    assert_eq!(
        ran.check("duplicates_change_nothing")["detail"],
        "attempt 3 left the state as attempt 2 left it; attempt 2 was the first answered 2xx, after attempt 1 got \
         none and changed nothing",
        "attempt 2 is the delivery, and attempt 3 its duplicate"
    );
    assert_eq!(handler.balance(), 1, "attempt 2 handled the event, once");

    // Credited again on the retry after the one that first succeeded: the
    // double charge, caught though attempt 1 failed.
    let pays_again = Handler::start(Behaviour::FailsFirstThenCredits {
        failed: Default::default(),
    });
    let history = History::with(&stripe_delivery(&pays_again.url()));
    let ran = history.replay_probed(&pays_again, &["--times", "3", "--json"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert_eq!(json["verdict"], "not_idempotent", "{json:#}");
    assert!(
        (json["summary"].as_str().unwrap()).starts_with(
            "✗ not idempotent: attempt 3 changed the state again after attempt 2 ("
        ) && json["summary"].as_str().unwrap().contains(
            "attempt 2 was the first answered 2xx, after attempt 1 got none and changed nothing, and a duplicate of \
             the delivery it handled repeated the side effect"
        ),
        "{json:#}"
    );
    assert_eq!(pays_again.balance(), 2);
}

/// A handler that charged, then answered 500, is retried by its
/// provider: a retry that charges again is the double charge, and the run
/// says so; one that finds the event done leaves the run failed on its
/// answer alone.
#[test]
fn a_first_attempt_that_failed_after_acting_judges_its_retries() {
    let charges_twice = Handler::start(Behaviour::CreditsThenFailsFirst {
        failed: Default::default(),
    });
    let history = History::with(&stripe_delivery(&charges_twice.url()));
    let ran = history.replay_probed(&charges_twice, &["--times", "3", "--json"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert_eq!(json["verdict"], "not_idempotent", "{json:#}");
    let summary = json["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("✗ not idempotent: attempt 2 changed the state again"),
        "{json:#}"
    );
    assert!(
        summary.contains("attempt 1 changed it, though it got no 2xx"),
        "{summary}"
    );
    assert!(summary.contains("in the same transaction as its work"), "{summary}");
    assert_eq!(ran.check("answers_2xx")["passed"], false);
    assert_eq!(
        charges_twice.balance(),
        2,
        "attempt 1 and its first retry both credited"
    );

    let saves_then_fails = Handler::start(Behaviour::DedupsThenFailsFirst {
        failed: Default::default(),
    });
    let history = History::with(&stripe_delivery(&saves_then_fails.url()));
    let ran = history.replay_probed(&saves_then_fails, &["--times", "3", "--json"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert_eq!(json["verdict"], "failed", "{json:#}");
    assert!(
        (json["summary"].as_str().unwrap()).starts_with("✗ failed: attempt 1 answered 500:"),
        "{json:#}"
    );
    let duplicates = ran.check("duplicates_change_nothing");
    assert_eq!(duplicates["passed"], true, "{json:#}");
    assert!(
        (duplicates["detail"].as_str().unwrap()).starts_with(
            "attempts 2–3 left the state as attempt 1 left it; attempt 1 changed it, though it got no 2xx"
        ),
        "{json:#}"
    );
    assert_eq!(saves_then_fails.balance(), 1);
}

#[test]
fn a_stale_signature_fails_and_resigning_passes() {
    let handler = Handler::start(Behaviour::VerifiesStripeSignature {
        secret: STRIPE_SECRET.into(),
    });
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = history.replay(&["--times", "2", "--json"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert!(ran.check("answers_2xx")["detail"]
        .as_str()
        .unwrap()
        .contains("answered 400"));
    // Every attempt was turned down: the handler failed the delivery, which
    // says nothing about duplicates.
    let json = ran.json();
    assert_eq!(json["verdict"], "failed");
    assert!(
        json["summary"]
            .as_str()
            .unwrap()
            .starts_with("✗ failed: attempts 1–2 answered 400"),
        "{json:#}"
    );
    // The report says why before anyone debugs the handler.
    let stale = |json: &Value| {
        json["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .any(|w| {
                w.starts_with("the stripe signature is ") && w.contains(" old; stripe accepts 5 min: pass --resign")
            })
    };
    assert!(stale(&json), "{json:#}");

    // A secret without --resign signs nothing, and the user is told; so
    // are a settle window with no probe and a concurrency with one attempt.
    let ran = history.replay(&["--times", "2", "--secret", STRIPE_SECRET, "--json", "--settle", "2s"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stderr.contains(
            "warning: --secret signs only with --resign or --fresh; the attempts carry the recorded signature"
        ),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains(
            "warning: --settle is not used: it is how long the state a probe reads must hold still, and no \
             --check-url or --check-cmd reads one"
        ),
        "{}",
        ran.stderr
    );
    let one = history.replay(&["--concurrency", "4"]);
    assert!(
        one.stderr
            .contains("warning: --concurrency is not used: one attempt is sent; give --times 2 or more"),
        "{}",
        one.stderr
    );
    assert!(
        ran.json()["warnings"].as_array().unwrap().iter().any(|w| w
            .as_str()
            .unwrap()
            .contains("stripe accepts 5 min: pass --resign to sign with the stripe secret from --secret,")),
        "the advice names the secret --resign would sign with: {}",
        ran.stdout
    );

    let ran = history.replay_probed(
        &handler,
        &["--times", "2", "--resign", "--secret", STRIPE_SECRET, "--json"],
    );
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert!(!stale(&ran.json()), "re-signed attempts are fresh: {}", ran.stdout);
    assert_eq!(handler.balance(), 1);

    let ran = history.replay(&["--resign"]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(
        ran.stderr.trim(),
        format!(
            "error: no secret for stripe: pass --secret, set PORTPREVIEW_SECRET_STRIPE or PORTPREVIEW_SECRET, \
             or add stripe = \"…\" to the [secrets] table of {}",
            history.db().with_extension("config.toml").display()
        )
    );

    // Where that message points, a secret works; written with a mode that
    // lets others read it, the file is said to.
    let config = history.db().with_extension("config.toml");
    std::fs::write(&config, format!("[secrets]\nstripe = \"{STRIPE_SECRET}\"\n")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
        let ran = history.replay(&["--resign"]);
        assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
        assert_eq!(
            ran.stderr,
            format!(
                "warning: {} may be read by other users (mode 0644), and holds signing secrets: chmod 600 it\n",
                config.display()
            )
        );
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let ran = history.replay(&["--resign"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(ran.stderr, "", "a file for its owner alone is not warned of");
    // And a replay without --resign says the secret is there, so the flag
    // is all that is missing.
    let ran = history.replay(&["--json"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.json()["warnings"].as_array().unwrap().iter().any(|w| w
            .as_str()
            .unwrap()
            .ends_with("stripe accepts 5 min: pass --resign to sign with the stripe secret from the config file, or a handler that checks signatures refuses every attempt")),
        "{}",
        ran.stdout
    );
}

#[test]
fn a_signature_header_edited_by_hand_is_warned_about_when_resigning() {
    let handler = Handler::start(Behaviour::VerifiesStripeSignature {
        secret: STRIPE_SECRET.into(),
    });
    let history = History::with(&stripe_delivery(&handler.url()));
    let resign = ["--resign", "--secret", STRIPE_SECRET];
    let ran = history.replay(&[&["--header", "Stripe-Signature: t=1,v1=bad"][..], &resign].concat());
    assert_eq!(ran.code, 0, "re-signed, so accepted: {}{}", ran.stdout, ran.stderr);
    assert_eq!(
        ran.stderr,
        "warning: --resign replaces the stripe-signature header given with --header: each attempt is signed afresh\n"
    );
    let ran = history.replay(&[&["--drop-header", "Stripe-Signature"][..], &resign].concat());
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(
        ran.stderr,
        "warning: --resign puts back the Stripe-Signature header left out with --drop-header: each attempt is signed afresh\n"
    );
    // A JSON reader finds the same lines among the report's warnings.
    let ran = history.replay(&[&["--drop-header", "Stripe-Signatur", "--json"][..], &resign].concat());
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let report: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(
        report["warnings"][0],
        "the request carries no Stripe-Signatur header, so --drop-header left nothing out: is the name misspelt?"
    );
    // A header signing leaves alone is sent as given, without a word.
    let ran = history.replay(&[&["--header", "X-Trace: 1"][..], &resign].concat());
    assert_eq!((ran.code, ran.stderr.as_str()), (0, ""), "{}", ran.stdout);
}

#[test]
fn a_state_still_moving_after_the_run_is_inconclusive_until_settle_is_raised() {
    let queued = || {
        Handler::start(Behaviour::Deferred {
            delay: std::time::Duration::from_millis(250),
        })
    };
    let handler = queued();
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = history.replay_probed(&handler, &["--json"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert_eq!(
        (json["verdict"].as_str(), json["idempotent"].as_bool()),
        (Some("inconclusive"), Some(false))
    );
    let settled = ran.check("state_settled");
    assert_eq!(settled["passed"], false);
    assert!(
        settled["detail"].as_str().unwrap().contains("raise --settle"),
        "{settled}"
    );
    assert!(
        json["summary"].as_str().unwrap().contains("raise --settle"),
        "the headline says what left the verdict open: {json}"
    );
    assert!(
        json["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["name"] != "duplicates_change_nothing"),
        "reads of a moving state clear nothing: {json}"
    );

    // A probe that moves on every read (a clock) convicts nothing either:
    // it moves before anything is sent, and nothing is.
    let sent = handler.arrived();
    let ran = history.replay(&[
        "--target",
        &handler.url(),
        "--times",
        "2",
        "--check-cmd",
        "date +%s%N",
        "--settle",
        "50ms",
        "--json",
    ]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert_eq!(json["verdict"], "inconclusive");
    let names: Vec<_> = json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].clone())
        .collect();
    assert_eq!(names, ["state_settled"], "{json}");
    assert_eq!(handler.arrived(), sent, "no attempt went out");

    // The same queue worker, new to the event, judged with a settle window
    // longer than its delay, by enough that a busy machine's late timer
    // still lands inside it.
    let handler = queued();
    let target = handler.url();
    let ran = history.replay(&[
        "--target",
        &target,
        "--times",
        "3",
        "--check-url",
        &handler.state_url(),
        "--settle",
        "800ms",
        "--json",
    ]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert_eq!(json["verdict"], "idempotent");
    assert_eq!(
        json["first_attempt_changed_state"], true,
        "the settle wait saw the queued credit"
    );
    assert_eq!(handler.balance(), 1);
}

/// Replays the Stripe delivery twice to `handler`, probed at `probe` and
/// settled for 1300 ms, as a handler whose work lands 2 s after its answer
/// needs: the run is inconclusive. Returns the report and the
/// `state_settled` check's detail.
fn replayed_twice_as_its_work_lands(handler: &Handler, probe: &str) -> (Value, String) {
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = history.replay(&[
        "--target",
        &handler.url(),
        "--times",
        "2",
        "--check-url",
        probe,
        "--settle",
        "1300ms",
        "--json",
    ]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert_eq!(json["verdict"], "inconclusive", "{json:#}");
    let detail = ran.check("state_settled")["detail"].as_str().unwrap().to_owned();
    assert!(detail.contains("raise --settle (now 1300ms)"), "{detail}");
    (json, detail)
}

#[test]
fn a_queue_worker_slower_than_settle_is_not_convicted_by_its_own_late_effect() {
    // The credit of attempt 1 lands after attempt 1 was judged settled and
    // during attempt 2's window: one move, which a repeated side effect of
    // attempt 2 would look exactly like.
    let handler = Handler::start(Behaviour::Deferred {
        delay: std::time::Duration::from_secs(2),
    });
    let (json, detail) = replayed_twice_as_its_work_lands(&handler, &handler.state_url());
    assert!(
        detail.starts_with(
            "attempt 1 left the state unchanged within --settle, and it moved only in the reads after attempt 2"
        ),
        "{detail}"
    );
    assert!(
        json["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["name"] != "duplicates_change_nothing"),
        "a late effect convicts nothing: {json:#}"
    );
    assert_eq!(handler.balance(), 1, "the handler credited the event once");
}

/// One event's work written twice: the event's row at once, its credit
/// from a queue later than --settle, in attempt 2's reads. That move is
/// in lines attempt 1 left alone, and may be its own late work: the run
/// is inconclusive, not a conviction of a handler that credited once.
#[test]
fn a_handler_that_writes_one_events_work_twice_is_not_convicted_by_its_second_write() {
    let handler = Handler::start(Behaviour::WritesTwice {
        delay: std::time::Duration::from_secs(2),
    });
    let (_, detail) = replayed_twice_as_its_work_lands(&handler, &handler.json_state_url());
    assert!(
        detail.contains("it moved again only in the reads after attempt 2, elsewhere than attempt 1 moved it"),
        "{detail}"
    );
    assert_eq!(handler.balance(), 1, "the handler credited the event once");
}

/// Lines printed in another order are the same state, so a probe that
/// prints values without their names could hide a swap: the report says
/// so when a step's reads came back reordered.
#[test]
fn a_probe_whose_lines_came_back_reordered_is_warned_about() {
    let handler = Handler::start(Behaviour::CreditsEveryDelivery);
    let history = History::with(&stripe_delivery(&handler.url()));
    // Two balances, bare: swapped on every credit.
    let probe = format!(
        "if grep -q 'balance: 0' '{}' 2>/dev/null; then printf '100\\n200\\n'; else printf '200\\n100\\n'; fi",
        handler.state_file().display()
    );
    let ran = history.replay(&["--times", "2", "--check-cmd", &probe, "--settle", "100ms", "--json"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let warnings = ran.json()["warnings"].to_string();
    assert!(
        warnings.contains("the reads after attempt 1 printed the lines of the state before in another order")
            && warnings.contains("a swap between them passes unseen"),
        "{warnings}"
    );
}

#[test]
fn a_slow_answer_is_a_warning_not_a_failure() {
    let handler = Handler::start(Behaviour::Slow {
        delay: std::time::Duration::from_millis(3200),
    });
    let history = History::with(&slack_delivery(&handler.url()));
    let ran = history.replay(&["--json"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    let warnings: Vec<&str> = json["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("attempt 1 took 3.") && w.contains("s; slack waits 3 s")),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|w| w.contains("side effects were not checked")),
        "{warnings:?}"
    );
    assert_eq!(json["side_effects_checked"], false);
}

/// Runs `replay` with `args`, sends it ctrl-c once `ready` holds (`what`
/// names it for a failure), and returns what it printed.
fn replay_interrupted(
    history: &History,
    args: &[&str],
    what: &str,
    ready: impl Fn(u32) -> bool,
) -> common::history::Ran {
    let replay = history
        .replay_command(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !ready(replay.id()) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{what} never happened"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let status = Command::new("kill")
        .args(["-INT", &replay.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    common::history::Ran::of(replay.wait_with_output().unwrap())
}

/// True once no TCP socket of process `pid` holds bytes it has not read:
/// an answer the handler wrote has reached the replay itself.
fn answers_read(pid: u32) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    let inodes: Vec<String> = fds
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|link| {
            let link = link.to_string_lossy().into_owned();
            Some(link.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    ["tcp", "tcp6"].iter().all(|table| {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        text.lines().skip(1).all(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // fields[4] is "tx_queue:rx_queue" in hex; fields[9] the inode.
            let unread = fields
                .get(4)
                .and_then(|q| q.split_once(':'))
                .map(|(_, rx)| rx != "00000000");
            !(inodes.iter().any(|inode| Some(&inode.as_str()) == fields.get(9)) && unread == Some(true))
        })
    })
}

/// ctrl-c in the middle of a run: the attempts already answered are
/// reported and kept in the history, and the verdict is left open.
#[test]
fn a_run_stopped_with_ctrl_c_reports_and_keeps_what_it_sent() {
    let handler = Handler::start(Behaviour::HangsOnDuplicate);
    let history = History::with(&stripe_delivery(&handler.url()));
    // Attempt 1 is handled; attempt 2, a duplicate, then hangs. Attempt 2
    // is sent only once attempt 1's answer is read: its arrival is the cue.
    let args = ["--times", "5", "--timeout", "60s", "--json"];
    let ran = replay_interrupted(&history, &args, "attempt 2", |_| handler.arrived() >= 2);
    assert_eq!(ran.code, 130, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert_eq!(json["verdict"], "inconclusive");
    assert_eq!(json["attempts"].as_array().unwrap().len(), 1, "{json:#}");
    assert_eq!(
        ran.check("run_completed")["detail"],
        "stopped after 1 of 5 attempts: only the whole run can show the handler idempotent"
    );
    assert!(
        json["warnings"].to_string().contains("side effects were not checked"),
        "a run without a probe says so, stopped or not: {json:#}"
    );

    let store = Store::open(&history.db()).unwrap();
    let runs = store.replay_runs(history.id).unwrap();
    assert_eq!(runs.len(), 1, "the run is kept");
    assert_eq!(runs[0].idempotent, None);
    let replays = history.replay_attempts();
    assert_eq!(replays, 1, "the attempt the handler saw is in the history");

    // Stopped in the middle of a concurrent burst: the attempt the handler
    // answered is kept though the others never finished. `--fresh` sends
    // its baseline alone, then the burst; one of the burst is credited and
    // answered, the rest are duplicates and hang. The cue is the credit,
    // then the replay's sockets found empty of unread bytes for 100 ms on
    // end: the answer, written just after the credit, has been read.
    let handler = Handler::start(Behaviour::HangsOnDuplicate);
    let history = History::with(&stripe_delivery(&handler.url()));
    let args = ["--times", "4", "--fresh", "--timeout", "60s", "--json"];
    let settled = std::cell::Cell::new(0);
    let ran = replay_interrupted(&history, &args, "the burst's answer read", |pid| {
        let read = handler.balance() >= 2 && answers_read(pid);
        settled.set(if read { settled.get() + 1 } else { 0 });
        settled.get() >= 5
    });
    assert_eq!(ran.code, 130, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    let statuses: Vec<&Value> = json["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["status"])
        .collect();
    assert_eq!(
        statuses,
        [200, 200],
        "the baseline and the burst's answered attempt: {json:#}"
    );
    assert_eq!(history.replay_attempts(), 2, "both are kept");

    // Stopped while the probe is first read: no state was read, so none is
    // reported, least of all one that held still, and no advice on how
    // attempts that never went out were sent.
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("probing");
    let probe = format!("touch '{}'; sleep 30; echo 1", marker.display());
    let args = ["--times", "3", "--concurrency", "2", "--check-cmd", &probe, "--json"];
    let ran = replay_interrupted(&history, &args, "the first probe read", |_| marker.exists());
    assert_eq!(ran.code, 130, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert_eq!(
        (&json["state"], &json["side_effects_checked"]),
        (&Value::Null, &Value::Bool(false)),
        "{json:#}"
    );
    assert_eq!(
        ran.check("run_completed")["detail"],
        "stopped after 0 of 3 attempts: only the whole run can show the handler idempotent"
    );
    let warnings = json["warnings"].to_string();
    assert!(!warnings.contains("goes alone"), "{warnings}");

    // Stopped after duplicates were seen to credit again: that stands.
    // Attempt 4 is sent only once attempt 3's reads held still.
    let handler = Handler::start(Behaviour::CreditsEveryDelivery);
    let history = History::with(&stripe_delivery(&handler.url()));
    let probe = format!("cat '{}'", handler.state_file().display());
    let args = ["--times", "10", "--check-cmd", &probe, "--settle", "100ms", "--json"];
    let ran = replay_interrupted(&history, &args, "attempt 4", |_| handler.arrived() >= 4);
    assert_eq!(ran.code, 130, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert_eq!(json["verdict"], "not_idempotent", "{json:#}");
    assert_eq!(ran.check("duplicates_change_nothing")["passed"], false, "{json:#}");
    assert_eq!(ran.check("run_completed")["passed"], false, "{json:#}");
}

/// Another process holds the history's write lock: the replay itself
/// stands, and the run not kept is one plain line on stderr.
#[test]
fn a_replay_the_locked_history_cannot_keep_is_warned_about_on_one_line() {
    let handler = Handler::start(Behaviour::DedupsInOneTransaction);
    let history = History::with(&stripe_delivery(&handler.url()));
    let locker = rusqlite::Connection::open(history.db()).unwrap();
    locker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let ran = history.replay(&[]);
    let in_json = history.replay(&["--json"]);
    locker.execute_batch("ROLLBACK").unwrap();
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let warning = "the replay was not recorded in the history: the history database is locked by another process";
    assert_eq!(ran.stderr, format!("warning: {warning}\n"));
    assert!(ran.stdout.contains("✓ 1 attempt answered 2xx"), "{}", ran.stdout);
    assert_eq!(handler.balance(), 1, "the second replay is a duplicate to the handler");
    assert_eq!(history.replay_attempts(), 0);
    // A script reading the report is told as well.
    assert_eq!(in_json.code, 0, "{}{}", in_json.stdout, in_json.stderr);
    let warnings = in_json.json()["warnings"].clone();
    assert!(
        warnings.as_array().unwrap().iter().any(|w| w == warning),
        "{warnings:#}"
    );
}

#[test]
fn a_handler_stuck_on_a_duplicate_fails_the_run_instead_of_hanging_it() {
    let handler = Handler::start(Behaviour::HangsOnDuplicate);
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = history.replay(&["--times", "2", "--timeout", "300ms", "--json"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert_eq!(json["verdict"], "not_idempotent");
    let answers = ran.check("answers_2xx");
    assert_eq!(answers["passed"], false);
    assert!(
        answers["detail"]
            .as_str()
            .unwrap()
            .starts_with("attempt 2 failed (no answer within 300ms)"),
        "{answers}"
    );
    let second = &json["attempts"][1];
    assert_eq!(
        (second["status"].is_null(), &second["error"]),
        (true, &"no answer within 300ms".into())
    );
    assert_eq!(handler.balance(), 1);

    // The handler knows the event now, so even a single attempt gets stuck.
    let ran = history.replay(&["--timeout", "300ms"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout
            .contains("✗ failed: attempt 1 failed (no answer within 300ms)"),
        "{}",
        ran.stdout
    );

    let ran = history.replay(&["--timeout", "0s"]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(ran.stderr.contains("--timeout"), "{}", ran.stderr);
}

#[test]
fn what_cannot_run_exits_2_with_one_line() {
    let handler = Handler::start(Behaviour::DedupsInOneTransaction);
    let down = common::local::nothing_answers_at();
    let history = History::with(&stripe_delivery(&handler.url()));
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--target".into(), down], "nothing answers at"),
        (vec!["--times".into(), "0".into()], "--times"),
        (vec!["--times".into(), "4294967295".into(), "--fresh".into()], "--times"),
        (vec!["--concurrency".into(), "100000".into()], "--concurrency"),
    ];
    for (args, expected) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let ran = history.replay(&args);
        assert_eq!(ran.code, 2, "{args:?}: {}{}", ran.stdout, ran.stderr);
        assert!(ran.stderr.contains(expected), "{args:?}: {}", ran.stderr);
        assert_eq!(ran.stderr.trim().lines().count(), 1, "{args:?}: {}", ran.stderr);
    }
    let ran = history.replay(&["--target", "notaurl"]);
    assert_eq!(
        (ran.code, ran.stderr.trim()),
        (
            2,
            "error: invalid value 'notaurl' for '--target <URL>': expected http://host:port[/path], \
             https://host:port[/path], host:port or a port number; see portpreview replay --help"
        )
    );
    let ran = portpreview(&history.db(), &["replay", "999"]);
    assert_eq!(
        (ran.code, ran.stderr.trim()),
        (
            2,
            format!(
                "error: no delivery #999, nor one with event key \"999\", in {}",
                history.db().display()
            )
            .as_str()
        )
    );

    let mut cut = stripe_delivery(&handler.url());
    cut.request_body_size = 30 * 1024 * 1024;
    let history = History::with(&cut);
    let ran = history.replay(&[]);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(ran.stderr.contains("cut short"), "{}", ran.stderr);
    assert_eq!(ran.stderr.trim().lines().count(), 1, "{}", ran.stderr);
    assert_eq!(handler.balance(), 0, "nothing was sent");
}

#[test]
fn a_replay_that_cannot_start_still_writes_its_junit_file() {
    let handler = Handler::start(Behaviour::DedupsInOneTransaction);
    let down = common::local::nothing_answers_at();
    let history = History::with(&stripe_delivery(&handler.url()));
    let dir = tempfile::tempdir().unwrap();
    // In a folder the checkout does not have: it is made.
    let junit = dir.path().join("reports/j.xml");
    let junit_arg = junit.to_str().unwrap();
    // The CI job uploads the file whatever happened, so it says why, as
    // `check` does for a fixture that cannot run.
    let error_case = |ran: &common::history::Ran, name: &str| {
        assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
        let reason = ran.stderr.trim_end().strip_prefix("error: ").unwrap();
        let xml = std::fs::read_to_string(&junit).unwrap();
        std::fs::remove_file(&junit).unwrap();
        assert!(
            xml.contains("<testsuite name=\"portpreview replay\" tests=\"1\" failures=\"0\" errors=\"1\""),
            "{xml}"
        );
        assert!(
            xml.contains(&format!(
                "<testcase classname=\"portpreview.idempotency\" name=\"{name}\" time=\"0.000\">\n      \
                 <error message=\"{}\" type=\"could_not_run\"/>",
                escape(reason)
            )),
            "{xml}"
        );
    };
    let ran = history.replay(&["--target", &down, "--junit", junit_arg]);
    assert!(ran.stderr.contains("nothing answers at"), "{}", ran.stderr);
    error_case(&ran, &format!("#{} evt_1PortPreviewTest", history.id));
    // With --json, stdout holds one object that says so, as `check --json`
    // shows a fixture that cannot run.
    let ran = history.replay(&["--target", &down, "--json", "--junit", junit_arg]);
    error_case(&ran, &format!("#{} evt_1PortPreviewTest", history.id));
    let json: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    let reason = ran.stderr.trim_end().strip_prefix("error: ").unwrap();
    assert_eq!(
        json,
        serde_json::json!({"verdict": "could_not_run", "idempotent": false, "error": reason})
    );
    let ran = portpreview(&history.db(), &["replay", "999", "--junit", junit_arg]);
    assert!(ran.stderr.contains("no delivery #999"), "{}", ran.stderr);
    error_case(&ran, "#999");
    let ran = portpreview(
        &history.db(),
        &["replay", "--latest", "--path", "/nope/*", "--junit", junit_arg],
    );
    error_case(&ran, "--latest --path /nope/*");

    // Flags that were never understood are no run to report.
    for flags in [
        &["--times", "0"][..],
        &["--provider", "stripe"],
        &["--resign", "--secret", ""],
    ] {
        let ran = history.replay(&[flags, &["--junit", junit_arg]].concat());
        assert_eq!(ran.code, 2, "{flags:?}: {}{}", ran.stdout, ran.stderr);
        assert!(!junit.exists(), "{flags:?}");
    }
    assert_eq!(handler.balance(), 0, "nothing was sent");
}

#[test]
fn a_junit_file_that_cannot_be_written_is_refused_before_anything_is_sent() {
    let handler = Handler::start(Behaviour::CreditsEveryDelivery);
    let history = History::with(&stripe_delivery(&handler.url()));
    let dir = tempfile::tempdir().unwrap();
    let ran = history.replay(&["--times", "3", "--junit", dir.path().to_str().unwrap()]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stderr.starts_with(&format!(
            "error: invalid value '{0}' for '--junit <FILE>': cannot write {0}: Is a directory",
            dir.path().display()
        )),
        "{}",
        ran.stderr
    );
    assert_eq!(handler.balance(), 0, "nothing was sent");

    // Checking the path leaves a file that is there as it was, and a new
    // one unmade, until the run has its report.
    let existing = dir.path().join("old.xml");
    std::fs::write(&existing, "kept").unwrap();
    let new = dir.path().join("new.xml");
    for junit in [&existing, &new] {
        let ran = history.replay(&["--junit", junit.to_str().unwrap(), "--times", "0"]);
        assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    }
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "kept");
    assert!(!new.exists());
    let ran = history.replay(&["--junit", existing.to_str().unwrap()]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert!(std::fs::read_to_string(&existing).unwrap().contains("<testcase "));
}

#[test]
fn a_junit_report_never_replaces_the_history() {
    let handler = Handler::start(Behaviour::CreditsEveryDelivery);
    let history = History::with(&stripe_delivery(&handler.url()));
    let db = history.db();
    let wal = std::path::PathBuf::from(format!("{}-wal", db.display()));
    for junit in [&db, &wal] {
        let ran = history.replay(&["--junit", junit.to_str().unwrap()]);
        assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
        assert_eq!(
            ran.stderr,
            format!(
                "error: {} is the history database or one of its files; write the JUnit report to another file\n",
                junit.display()
            )
        );
    }
    assert_eq!(handler.balance(), 0, "nothing was sent");

    let fixture = db.with_file_name("stripe.json");
    let id = history.id.to_string();
    let exported = portpreview(&db, &["export", &id, "-o", fixture.to_str().unwrap()]);
    assert_eq!(exported.code, 0, "{}", exported.stderr);
    let ran = portpreview(
        &db,
        &["check", fixture.to_str().unwrap(), "--junit", db.to_str().unwrap()],
    );
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(ran.stderr.contains("is the history database"), "{}", ran.stderr);
    assert_eq!(handler.balance(), 0, "check sent nothing either");

    let listed = portpreview(&db, &["history", "--json"]);
    assert_eq!(listed.code, 0, "the history still opens: {}", listed.stderr);
    assert_eq!(listed.json().as_array().map(Vec::len), Some(1));
}

#[test]
fn a_reader_that_stops_early_keeps_the_verdict() {
    let handler = Handler::start(Behaviour::CreditsEveryDelivery);
    let history = History::with(&stripe_delivery(&handler.url()));
    let state = handler.state_url();
    let id = history.id.to_string();
    let out = run_into_a_closed_pipe(
        Command::new(portpreview_bin())
            .arg("--db")
            .arg(history.db())
            .args([
                "replay",
                &id,
                "--times",
                "2",
                "--check-url",
                &state,
                "--settle",
                "100ms",
            ])
            .env("PORTPREVIEW_CONFIG", history.db().with_extension("config.toml")),
    );
    assert_eq!(
        (out.status.code(), String::from_utf8_lossy(&out.stderr).as_ref()),
        (Some(1), ""),
        "not idempotent, and nothing to report about the closed pipe"
    );
}

#[test]
fn one_attempt_is_counted_in_the_singular() {
    let handler = Handler::start(Behaviour::DedupsInOneTransaction);
    let history = History::with(&stripe_delivery(&handler.url()));
    let unprobed = history.replay(&[]);
    assert_eq!(unprobed.code, 0, "{}{}", unprobed.stdout, unprobed.stderr);
    assert!(
        unprobed
            .stdout
            .contains("✓ 1 attempt answered 2xx (side effects not checked)"),
        "{}",
        unprobed.stdout
    );
    let probed = history.replay_probed(&handler, &[]);
    assert_eq!(probed.code, 0, "{}{}", probed.stdout, probed.stderr);
    assert!(
        probed
            .stdout
            .contains("✓ 1 attempt answered 2xx, with nothing to compare it to: pass --times 2 or more\n"),
        "one attempt is no evidence of idempotence: {}",
        probed.stdout
    );
    assert!(
        unprobed.stdout.contains("one attempt only: nothing to compare it to"),
        "the warning comes with or without a probe: {}",
        unprobed.stdout
    );
    for ran in [&unprobed, &probed] {
        assert!(
            !ran.stdout.contains(" 1 attempts") && !ran.stdout.contains(" 1 copies"),
            "{}",
            ran.stdout
        );
    }
}

/// A replay sent once is a resend: the report shows what the handler
/// answered, and the ID the attempt was kept under, which `show` opens.
/// `--json` names each attempt's ID too.
#[test]
fn a_replay_shows_the_answer_and_the_ids_its_attempts_were_kept_under() {
    let handler = Handler::start(Behaviour::DedupsInOneTransaction);
    let history = History::with(&stripe_delivery(&handler.url()));
    let once = history.replay(&[]);
    assert_eq!(once.code, 0, "{}{}", once.stdout, once.stderr);
    assert!(
        once.stdout.contains("\nThe answer:\n  200 for attempt 1\n  credited\n"),
        "{}",
        once.stdout
    );
    assert!(
        once.stdout
            .contains("\nKept in the history as #2: portpreview show 2\n"),
        "{}",
        once.stdout
    );
    let shown = portpreview(&history.db(), &["show", "2", "--json"]).json();
    assert_eq!(
        (&shown["replay_of"], &shown["status"]),
        (&Value::from(1), &Value::from(200)),
        "{shown:#}"
    );

    let twice = history.replay(&["--times", "2", "--json"]);
    assert_eq!(twice.code, 0, "{}{}", twice.stdout, twice.stderr);
    let ids: Vec<Value> = twice.json()["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].clone())
        .collect();
    assert_eq!(ids, [3, 4]);
    let text = history.replay(&["--times", "2"]);
    assert!(
        text.stdout
            .contains("\nEvery attempt got this answer:\n  200 for attempts 1–2\n  already handled\n"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("\nKept in the history as #5 to #6: portpreview show 5 opens the first\n"),
        "{}",
        text.stdout
    );
}

/// A burst of one copy sends no duplicate, so a handler that acts on every
/// delivery would pass it: `--fresh` asks for two copies or more instead.
#[test]
fn a_fresh_burst_of_one_copy_is_refused_before_anything_is_sent() {
    let handler = Handler::start(Behaviour::CreditsEveryDelivery);
    let history = History::with(&stripe_delivery(&handler.url()));
    for times in [&[][..], &["--times", "1"][..]] {
        let mut args = vec!["--fresh"];
        args.extend_from_slice(times);
        let ran = history.replay_probed(&handler, &args);
        assert_eq!(
            (ran.code, ran.stderr.as_str()),
            (
                2,
                "error: --fresh needs --times 2 or more: a burst of one copy sends no duplicate, \
                 so it cannot show the handler acting twice; see portpreview replay --help\n"
            ),
            "{args:?}: {}",
            ran.stdout
        );
        assert_eq!(ran.stdout, "", "{args:?}");
    }
    assert_eq!(handler.balance(), 0, "nothing was sent");

    // Two copies are enough to catch it.
    let ran = history.replay_probed(&handler, &["--fresh", "--times", "2", "--json"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(ran.check("fresh_burst_acts_once")["passed"], false);

    // A verdict of idempotent counts the burst, not the baseline beside it.
    let good = Handler::start(Behaviour::DedupsInOneTransaction);
    let ran = history.replay_probed(&good, &["--target", &good.url(), "--fresh", "--times", "2"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout
            .ends_with("✓ idempotent: a burst of 2 copies of one new event acted once\n"),
        "{}",
        ran.stdout
    );
}

#[test]
fn an_error_names_its_cause_once() {
    let handler = Handler::start(Behaviour::DedupsInOneTransaction);
    let down = common::local::nothing_answers_at();
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = history.replay(&["--target", &down]);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    let line = ran.stderr.trim_end();
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(line.ends_with("(is the handler running?)"), "{line}");
    assert_eq!(line.matches("refused").count(), 1, "{line}");

    let ran = history.replay(&["--check-cmd", "exit 3"]);
    assert_eq!(
        (ran.code, ran.stderr.trim_end()),
        (2, "error: the check command failed (exit status: 3)")
    );

    let unknown = NewDelivery {
        provider: None,
        request_headers: Vec::new(),
        request_body: b"plain text".to_vec(),
        request_body_size: 10,
        event_key: "sha256:plain".into(),
        event_key_source: "sha256:body".into(),
        ..stripe_delivery(&handler.url())
    };
    let ran = History::with(&unknown).replay(&["--fresh", "--times", "2"]);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert_eq!(ran.stderr.matches("fresh identity").count(), 1, "{}", ran.stderr);
    assert_eq!(handler.balance(), 0, "nothing was sent");
}

/// `--body-file /dev/zero` is read no further than a body can be.
#[test]
fn a_body_file_longer_than_any_body_is_refused() {
    let handler = Handler::start(Behaviour::CreditsEveryDelivery);
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = history.replay(&["--body-file", "/dev/zero"]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(
        ran.stderr,
        "error: cannot read --body-file /dev/zero: it is over 64 MiB, the most PortPreview reads from such a file\n"
    );
    assert_eq!(handler.balance(), 0, "nothing was sent");
}

/// A `--fresh-field` that names nothing in the request would leave the
/// recorded identity in place: refused alike for a header and a body
/// field, on one line, before anything is sent.
#[test]
fn a_fresh_field_the_request_does_not_carry_is_refused() {
    let handler = Handler::start(Behaviour::CreditsEveryDelivery);
    let history = History::with(&stripe_delivery(&handler.url()));
    for (field, reason) in [
        ("header:X-Event-Id", "the request has no such header"),
        ("/nonexistent", "the body has no such field"),
    ] {
        let ran = history.replay_probed(&handler, &["--fresh", "--fresh-field", field, "--times", "3"]);
        assert_eq!(
            (ran.code, ran.stderr.as_str()),
            (2, format!("error: --fresh-field {field}: {reason}\n").as_str()),
            "{}",
            ran.stdout
        );
    }
    assert_eq!(handler.balance(), 0, "nothing was sent");
}

#[test]
fn a_target_with_a_path_replaces_the_recorded_one_and_latest_finds_the_delivery() {
    let handler = Handler::start(Behaviour::DedupsInOneTransaction);
    let history = History::with(&stripe_delivery("http://127.0.0.1:1"));
    let target = format!("{}/other/path", handler.url());
    let ran = portpreview(
        &history.db(),
        &[
            "replay",
            "--latest",
            "--provider",
            "stripe",
            "--path",
            "/webhooks/*",
            "--target",
            &target,
            "--json",
        ],
    );
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(
        ran.stderr,
        "replaying #1, the newest match of --latest --provider stripe --path /webhooks/*\n"
    );
    assert_eq!(ran.json()["target"], format!("{}/other/path", handler.url()));
    assert_eq!(handler.balance(), 1);

    // By event type too, as history's TYPE column names it.
    let ran = portpreview(
        &history.db(),
        &[
            "replay",
            "--latest",
            "--type",
            "payment_intent.*",
            "--target",
            &handler.url(),
        ],
    );
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(
        ran.stderr,
        "replaying #1, the newest match of --latest --type payment_intent.*\n"
    );
    let ran = portpreview(&history.db(), &["replay", "--latest", "--type", "invoice.paid"]);
    assert_eq!(
        (ran.code, ran.stderr.trim()),
        (
            2,
            format!(
                "error: no delivery in {} matches --latest --type invoice.paid",
                history.db().display()
            )
            .as_str()
        )
    );
}

/// A Stripe delivery to `/hooks?token=abc123&shop=acme`, recorded with a
/// handler that dedups to replay it against.
fn a_delivery_with_a_token_in_its_query() -> (Handler, History) {
    let handler = Handler::start(Behaviour::DedupsInOneTransaction);
    let history = History::with(&NewDelivery {
        path: "/hooks?token=abc123&shop=acme".into(),
        ..stripe_delivery(&handler.url())
    });
    (handler, history)
}

/// `history` masks a secret in the query; the path copied from its table,
/// mask and all, still finds the delivery for `--latest --path`.
#[test]
fn latest_finds_a_path_copied_from_history_with_its_secret_masked() {
    let (handler, history) = a_delivery_with_a_token_in_its_query();
    let shown = "/hooks?token=••••••&shop=acme";
    let table = portpreview(&history.db(), &["history"]);
    assert!(table.stdout.contains(shown), "{}", table.stdout);
    let ran = portpreview(&history.db(), &["replay", "--latest", "--path", shown]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(handler.balance(), 1);
    let ran = portpreview(
        &history.db(),
        &["replay", "--latest", "--path", "/hooks?token=••••••&shop=other"],
    );
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    // A later delivery whose query goes on past the secret is not the one copied.
    let later = NewDelivery {
        path: "/hooks?token=abc123&shop=acme&admin=1".into(),
        ..stripe_delivery(&handler.url())
    };
    Store::open(&history.db()).unwrap().insert_request(&later).unwrap();
    let ran = portpreview(&history.db(), &["replay", "--latest", "--path", shown]);
    assert_eq!(
        (ran.code, ran.stderr.as_str()),
        (
            0,
            "replaying #1, the newest match of --latest --path /hooks?token=••••••&shop=acme\n"
        ),
        "{}",
        ran.stdout
    );
}

/// A report on stdout ends up in CI logs: `--json` masks a secret in the
/// target's query as the text report does. The run is stored as sent, so
/// `show --reveal` still shows it.
#[test]
fn the_json_report_masks_a_secret_in_the_target_query() {
    let (handler, history) = a_delivery_with_a_token_in_its_query();
    let ran = portpreview(&history.db(), &["replay", "1", "--json"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(
        ran.json()["target"],
        format!("{}/hooks?token=••••••&shop=acme", handler.url())
    );
    assert!(!ran.stdout.contains("abc123"), "{}", ran.stdout);
    let shown = portpreview(&history.db(), &["show", "1", "--json", "--reveal"]);
    assert_eq!(
        shown.json()["replay_runs"][0]["target"],
        format!("{}/hooks?token=abc123&shop=acme", handler.url())
    );
}

#[test]
fn the_fresh_burst_never_cries_wolf_at_a_correct_handler() {
    let handler = Handler::start(Behaviour::DedupsInOneTransaction);
    let history = History::with(&stripe_delivery(&handler.url()));
    for run in 0..20 {
        let ran = history.replay_probed(&handler, &["--fresh", "--concurrency", "10", "--times", "10"]);
        assert_eq!(ran.code, 0, "run {run}: {}{}", ran.stdout, ran.stderr);
    }
    assert_eq!(
        handler.balance(),
        40,
        "each run: one baseline event and one burst event"
    );
}

/// The same rows printed amount first (`SELECT amount, event_id`): the
/// burst's row holds four times the baseline's, further off than a
/// sequence would have numbered it, so it is read as the amount it is.
#[test]
fn a_fresh_burst_crediting_one_row_per_copy_is_caught_with_the_amount_printed_first() {
    let fresh = |handler: &Handler, history: &History| {
        let amounts = handler.amounts_url();
        let args = ["--target", &handler.url(), "--check-url", &amounts, "--settle", "100ms"];
        history.replay(&[&args[..], &["--fresh", "--times", "4", "--json"]].concat())
    };
    let credits = Handler::start(Behaviour::CreditsEveryDelivery);
    let history = History::with(&stripe_delivery(&credits.url()));
    let ran = fresh(&credits, &history);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(ran.json()["verdict"], "not_idempotent");
    let detail = ran.check("fresh_burst_acts_once")["detail"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        detail.contains("added `400|evt_") && detail.contains("added `100|evt_") && detail.contains("4 times as much"),
        "{detail}"
    );

    let dedups = Handler::start(Behaviour::DedupsInOneTransaction);
    let ran = fresh(&dedups, &history);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(ran.check("fresh_burst_acts_once")["passed"], true);
}

/// A handler deduping on the payment's ID, which `--fresh` alone leaves
/// as recorded: the baseline's event credits the payment, the burst's
/// passes for it and changes nothing. No copy acted twice, so the run
/// proves nothing, and names `--fresh-field`; with it, the handler passes.
#[test]
fn a_fresh_burst_that_a_field_fresh_left_alone_deduped_is_inconclusive() {
    let handler = Handler::start(Behaviour::DedupsOnPayment);
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = history.replay_probed(&handler, &["--fresh", "--times", "4", "--json"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(ran.json()["verdict"], "inconclusive", "{}", ran.stdout);
    let check = ran.check("probe_shows_side_effects");
    assert_eq!(check["passed"], false, "{check}");
    let detail = check["detail"].as_str().unwrap();
    assert!(
        detail.contains("a burst of 4 copies of another left the state unchanged") && detail.contains("--fresh-field"),
        "{detail}"
    );
    assert_eq!(handler.balance(), 1, "one payment, credited once");

    let renewed = ["--fresh", "--fresh-field", "/data/object/id", "--times", "4", "--json"];
    let ran = history.replay_probed(&handler, &renewed);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(handler.balance(), 3, "two new payments, each credited once");
    // Each run sent a baseline before its burst, and `show` counts it.
    let shown = portpreview(&history.db(), &["show", "1"]);
    let runs: Vec<&str> = shown.stdout.lines().filter(|line| line.contains(" ×1+4 ")).collect();
    assert_eq!(runs.len(), 2, "{}", shown.stdout);
    // Each names the handler it judged: runs against another --target sit beside these.
    let judged = format!("×1+4 → {}/", handler.url());
    assert!(runs.iter().all(|run| run.contains(&judged)), "{runs:?}");
    let runs = portpreview(&history.db(), &["show", "1", "--json"]).json()["replay_runs"].clone();
    assert_eq!(runs[0]["fresh"], true, "{runs:#}");
    // The verdicts as each run's replay --json gave them.
    let verdicts: Vec<_> = [&runs[0], &runs[1]]
        .map(|run| (run["idempotent"].clone(), run["verdict"].clone()))
        .into();
    assert_eq!(
        verdicts,
        [
            (false.into(), "inconclusive".into()),
            (true.into(), "idempotent".into())
        ],
        "{runs:#}"
    );
    assert!(
        runs[0]["target"]
            .as_str()
            .is_some_and(|target| target.starts_with(&handler.url())),
        "{runs:#}"
    );
    // An attempt is no delivery of its event, and came in on no public URL.
    let attempt = portpreview(&history.db(), &["show", "2", "--json"]).json();
    assert_eq!(
        (
            &attempt["replay_of"],
            &attempt["delivery_number"],
            &attempt["tunnel_url"]
        ),
        (&Value::from(1), &Value::Null, &Value::Null),
        "{attempt:#}"
    );
}

/// A sender nobody recognised, its key a hash of the body: the fresh
/// attempts are keyed by the field renewed, and say so in the history.
#[test]
fn fresh_attempts_of_an_unknown_sender_are_keyed_by_the_field_renewed() {
    let handler = Handler::start(Behaviour::DedupsInOneTransaction);
    let mut delivery = stripe_delivery(&handler.url());
    delivery
        .request_headers
        .retain(|h| h.name == "content-type" || h.name == "content-length");
    delivery.request_body = br#"{"id":"ord_1","amount":100}"#.to_vec();
    delivery.request_body_size = delivery.request_body.len() as u64;
    delivery.provider = None;
    let key = portpreview_shared::provider::event_key(&delivery.request_headers, &delivery.request_body, &[]);
    (delivery.event_key, delivery.event_key_source) = (key.key, key.source);
    assert_eq!(delivery.event_key_source, "sha256:body");
    let history = History::with(&delivery);
    let ran = history.replay_probed(&handler, &["--fresh", "--fresh-field", "/id", "--times", "2"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let attempt = portpreview(&history.db(), &["show", "2", "--json"]).json();
    assert_eq!(attempt["event_key_source"], "body:/id", "{attempt:#}");
    let body: Value = serde_json::from_str(attempt["request"]["body"].as_str().unwrap()).unwrap();
    assert_eq!(attempt["event_key"], body["id"], "{attempt:#}");
}

/// The report's own advice, `--fresh-field /data/object/id`, renews the
/// payment's ID beside the event's: a handler deduping on the event ID
/// still sees a new event, and passes.
#[test]
fn a_fresh_field_renews_its_field_beside_the_events_own_id() {
    let handler = Handler::start(Behaviour::DedupsInOneTransaction);
    let history = History::with(&stripe_delivery(&handler.url()));
    let args = ["--fresh", "--fresh-field", "/data/object/id", "--times", "4", "--json"];
    let ran = history.replay_probed(&handler, &args);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    let attempts = json["attempts"].as_array().unwrap();
    let (baseline, burst) = (&attempts[0]["event_key"], &attempts[1]["event_key"]);
    assert!(baseline.as_str().unwrap().starts_with("evt_"), "{json}");
    assert_ne!(baseline, "evt_1PortPreviewTest");
    assert_ne!(baseline, burst);
    assert_eq!(handler.balance(), 2, "one baseline event and one burst event");
}

#[test]
fn a_probe_that_shows_no_side_effect_leaves_a_fresh_burst_unjudged() {
    let handler = Handler::start(Behaviour::CreditsEveryDelivery);
    // A probe of another handler, which this run never touches.
    let elsewhere = Handler::start(Behaviour::CreditsEveryDelivery);
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = history.replay(&[
        "--fresh",
        "--times",
        "3",
        "--check-url",
        &elsewhere.state_url(),
        "--settle",
        "100ms",
        "--json",
    ]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert_eq!(json["verdict"], "inconclusive", "{json}");
    let check = ran.check("probe_shows_side_effects");
    assert_eq!(check["passed"], false, "{check}");
    assert!(
        json["summary"].as_str().unwrap().contains("the burst proved nothing"),
        "{json}"
    );
    assert!(handler.balance() > 0, "the handler itself did act");
    assert_eq!(elsewhere.balance(), 0);
}

#[test]
fn settings_that_cannot_work_are_refused_before_anything_is_sent() {
    let handler = Handler::start(Behaviour::Deferred {
        delay: std::time::Duration::from_millis(250),
    });
    let history = History::with(&stripe_delivery(&handler.url()));
    let ran = history.replay(&["--check-url", &handler.state_url(), "--settle", "0s"]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stderr
            .contains("invalid value '0s' for '--settle <DURATION>': no time at all"),
        "{}",
        ran.stderr
    );
    // Narrowing flags of --latest are refused beside an ID, not ignored.
    for narrowing in ["--provider", "--type"] {
        let ran = history.replay(&[narrowing, "stripe"]);
        assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
        assert_eq!(
            ran.stderr.trim(),
            "error: --provider, --type and --path narrow --latest: with an ID, an event key or --from they would be \
             ignored; see portpreview replay --help"
        );
    }
    // Without an ID they are taken for what they are: --latest left out.
    let ran = portpreview(&history.db(), &["replay", "--path", "/webhooks/*"]);
    assert_eq!(
        (ran.code, ran.stderr.as_str()),
        (
            2,
            "error: --provider, --type and --path narrow --latest: add --latest to replay the newest delivery they \
             match; see portpreview replay --help\n"
        ),
        "{}",
        ran.stdout
    );
    // Nor does the tunnel give the handler no time.
    let ran = portpreview(&history.db(), &["http", "3000", "--local-timeout", "0s"]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stderr
            .contains("invalid value '0s' for '--local-timeout <DURATION>': no time at all"),
        "{}",
        ran.stderr
    );
}

/// A large body is held once however many attempts send it, and every
/// attempt still reaches the handler, and the history, whole.
#[tokio::test]
async fn attempts_send_and_record_one_shared_copy_of_a_large_body() {
    use common::local::{Answer, LocalHandler};
    use portpreview::replay::{Progress, ReplayOptions};
    use portpreview::store::{ListQuery, Outcome};

    let handler = LocalHandler::start(|_| Answer {
        status: 200,
        ..Answer::default()
    })
    .await;
    let body: Vec<u8> = (0..1024 * 1024).map(|i| (i % 251) as u8).collect();
    let request = NewDelivery {
        target: handler.url(),
        method: "POST".into(),
        path: "/hook".into(),
        request_body_size: body.len() as u64,
        request_body: body.clone(),
        ..NewDelivery::default()
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(&dir.path().join("history.db")).expect("a history");
    let answered = Outcome {
        status: Some(200),
        ..Outcome::default()
    };
    let id = store.insert_delivery(&request, &answered).expect("recorded");
    let opts = ReplayOptions {
        times: 20,
        concurrency: Some(4),
        ..ReplayOptions::default()
    };
    let report = portpreview::replay::run(request, &opts, &|_: Progress| {})
        .await
        .expect("the run");

    assert_eq!(report.attempts.len(), 20);
    let first = report.attempts[0].body.as_ptr();
    assert!(
        report.attempts.iter().all(|a| a.body.as_ptr() == first),
        "every attempt holds the one copy of the body"
    );
    let seen = handler.requests();
    assert_eq!(seen.len(), 20);
    assert!(seen.iter().all(|s| s.body == body), "every attempt sent the body whole");

    portpreview::replay::record(&store, id, 0, &report).expect("the run is kept");
    let attempts = store
        .list(&ListQuery {
            include_replays: true,
            ..ListQuery::default()
        })
        .expect("listed");
    let replays: Vec<_> = attempts.iter().filter(|s| s.replay_of == Some(id)).collect();
    assert_eq!(replays.len(), 20);
    for summary in replays {
        let stored = store.get(summary.id).expect("read").expect("the attempt");
        assert_eq!(
            stored.request.request_body, body,
            "attempt #{} kept its body",
            summary.id
        );
    }
}

/// `--header` and `--drop-header` change what the handler receives, not
/// only what the report says: an added header arrives with its value, one
/// given again replaces the recorded one, and a dropped one is not sent.
#[tokio::test]
async fn replay_header_flags_change_what_the_handler_receives() {
    use common::history::portpreview_async;
    use common::local::LocalHandler;
    use portpreview_shared::Header;

    let handler = LocalHandler::echo().await;
    let mut delivery = stripe_delivery(&handler.url());
    delivery
        .request_headers
        .push(Header::new("x-trace-id", "trace-recorded-42"));
    let history = History::with(&delivery);
    let id = history.id.to_string();
    let ran = portpreview_async(
        &history.db(),
        &[
            "replay",
            &id,
            "--header",
            "X-Added: added-value",
            "--header",
            "User-Agent: replayed/1.0",
            "--drop-header",
            "X-Trace-Id",
        ],
    )
    .await;
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    // The report says how the request was edited, and so does the run kept
    // beside the delivery: it judged another request than the recorded one.
    let edited = "x-added set; user-agent set; x-trace-id left out";
    assert!(ran.stdout.contains(&format!("\nEdited: {edited}\n")), "{}", ran.stdout);
    let shown = portpreview_async(&history.db(), &["show", &id]).await;
    assert!(
        shown.stdout.contains(&format!("\n    edited: {edited}\n")),
        "{}",
        shown.stdout
    );
    let runs = portpreview_async(&history.db(), &["show", &id, "--json"]).await.json();
    assert_eq!(
        runs["replay_runs"][0]["edits"],
        serde_json::json!(["x-added set", "user-agent set", "x-trace-id left out"])
    );

    let seen = handler.requests();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let seen = &seen[0];
    assert_eq!(seen.header_values("x-added"), [&b"added-value"[..]]);
    assert_eq!(
        seen.header_values("user-agent"),
        [&b"replayed/1.0"[..]],
        "the recorded User-Agent is replaced, not sent beside it"
    );
    assert!(
        seen.header_values("x-trace-id").is_empty(),
        "the dropped header was sent: {seen:?}"
    );
    assert_eq!(
        seen.header("stripe-signature").as_deref(),
        Some(common::handlers::STRIPE_STALE_SIGNATURE),
        "headers no flag names pass as recorded"
    );
    // The attempt's record holds what the handler got, Host and
    // Content-Length included, as a tunnelled delivery's does.
    let attempt = (history.id + 1).to_string();
    let shown = portpreview_async(&history.db(), &["show", &attempt, "--json", "--reveal"])
        .await
        .json();
    let mut recorded: Vec<(String, String)> = shown["request"]["headers"]
        .as_array()
        .unwrap_or_else(|| panic!("headers in {shown:#}"))
        .iter()
        .map(|h| {
            (
                h["name"].as_str().unwrap_or_default().to_string(),
                h["value"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let mut sent: Vec<(String, String)> = seen
        .headers
        .iter()
        .map(|(name, value)| (name.clone(), String::from_utf8_lossy(value).into_owned()))
        .collect();
    recorded.sort();
    sent.sort();
    assert_eq!(recorded, sent, "the attempt's record says what was sent");
}

/// A replay sends the request it was asked to, once: a handler answering
/// 302 is reported as such, and the place it points to is never called.
#[tokio::test]
async fn replay_reports_a_redirect_and_does_not_follow_it() {
    use common::history::portpreview_async;
    use common::local::{Answer, LocalHandler};

    let handler = LocalHandler::start(|seen| match seen.uri.as_str() {
        "/webhooks/stripe" => Answer {
            status: 302,
            headers: vec![("location".into(), "/moved-here".into())],
            ..Answer::default()
        },
        _ => Answer::default(),
    })
    .await;
    let history = History::with(&stripe_delivery(&handler.url()));
    let id = history.id.to_string();
    let ran = portpreview_async(&history.db(), &["replay", &id, "--json"]).await;
    let json = ran.json();
    let statuses: Vec<&Value> = json["attempts"]
        .as_array()
        .unwrap_or_else(|| panic!("attempts in {json:#}"))
        .iter()
        .map(|a| &a["status"])
        .collect();
    assert_eq!(statuses, [302], "{json:#}");
    let paths: Vec<String> = handler.requests().into_iter().map(|seen| seen.uri).collect();
    assert_eq!(paths, ["/webhooks/stripe"], "the redirect was not followed");
}

/// `http --host-header preserve` hands the handler the Host the caller
/// sent, as the flag is given on the command line, and a replay of that
/// delivery sends the same Host.
#[tokio::test]
async fn host_header_preserve_on_the_command_line_reaches_the_handler_and_its_replay() {
    use common::caller;
    use common::history::portpreview_async;
    use common::local::LocalHandler;
    use common::process::Running;
    use common::relay::TestRelay;

    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("history.db");
    let relay = TestRelay::start().await;
    let handler = LocalHandler::echo().await;
    let preserve = ["--host-header", "preserve"];
    let (mut client, url) = Running::tunnel_with(&handler.url(), &relay.http_url(), &db, dir.path(), &preserve).await;
    let callers_host = relay.addr.to_string();
    let reply = caller::post(&format!("{url}/hook"), r#"{"id":"evt_host_flag"}"#).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    client.line_containing("POST /hook").await;
    assert_eq!(
        handler.requests()[0].header("host"),
        Some(callers_host.clone()),
        "the caller's Host, not the handler's address"
    );
    client.signal("TERM");
    assert_eq!(client.exit_code(std::time::Duration::from_secs(10)).await, Some(0));

    let replayed = portpreview_async(&db, &["replay", "1"]).await;
    assert_eq!(replayed.code, 0, "{}{}", replayed.stdout, replayed.stderr);
    assert_eq!(
        handler.requests()[1].header("host"),
        Some(callers_host),
        "the replay sends the Host the handler got"
    );
}

#[test]
fn a_recorded_delivery_its_handler_already_had_changes_nothing_without_a_warning() {
    let handler = Handler::start(Behaviour::DedupsInOneTransaction);
    let history = History::with(&stripe_delivery(&handler.url()));
    // The handler has the event, as it would once the delivery came.
    let ran = history.replay_probed(&handler, &[]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(handler.balance(), 1);

    // The delivery was answered 200 where the replay goes: attempt 1
    // changing nothing is an idempotent handler's doing.
    let ran = history.replay_probed(&handler, &["--times", "3", "--json"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert_eq!(json["first_attempt_changed_state"], false, "{json:#}");
    assert!(
        !json["warnings"].to_string().contains("no read saw the state move"),
        "{json:#}"
    );

    // Said to be new to the handler, the event that moved nothing proves
    // nothing: inconclusive, with one attempt as with three, and the
    // history's word on it.
    for times in ["1", "3"] {
        let ran = history.replay_probed(&handler, &["--times", times, "--expect-effect", "--json"]);
        assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
        let json = ran.json();
        assert_eq!(json["verdict"], "inconclusive", "{json:#}");
        assert!(
            json["checks"].to_string().contains(
                "the history shows this target answering the event 2xx before, so the handler had it already"
            ),
            "{json:#}"
        );
    }

    // Sent to another handler, nothing says it had the event the first
    // time: the run says what it could not see.
    let other = Handler::start(Behaviour::DedupsInOneTransaction);
    let aimed = [
        "--target",
        &other.url(),
        "--check-url",
        &other.state_url(),
        "--settle",
        "100ms",
    ];
    let first = history.replay(&[&aimed[..], &["--json"]].concat());
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    let first = first.json();
    assert_eq!(first["first_attempt_changed_state"], true, "{first:#}");
    // Run again there, the first run's attempt, kept in the history and
    // answered 2xx by that handler, says it had: no warning, and the
    // report says how it is known. The handler is named another way
    // this time: `localhost` is the `127.0.0.1` it was reached at.
    let by_name = other.url().replace("127.0.0.1", "localhost");
    let again = [&["--target", &by_name], &aimed[2..]].concat();
    let ran = history.replay(&[&again[..], &["--times", "2", "--json"]].concat());
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    assert!(
        !json["warnings"].to_string().contains("no read saw the state move"),
        "{json:#}"
    );
    let attempt = &first["attempts"][0]["id"];
    assert!(
        ran.check("duplicates_change_nothing")["detail"]
            .as_str()
            .unwrap()
            .ends_with(&format!(
                "attempt 1 changed nothing: the handler had seen the event before, the history has #{attempt} \
                 answered 2xx there (or does its work later than --settle waits)"
            )),
        "{json:#}"
    );
    assert_eq!(other.balance(), 1);
}

/// A provider's retry that reached the relay while the tunnel reconnected
/// is recorded without its body (the relay never read it), and is the
/// newest delivery of its event: replay by event key and `--latest` take
/// the newest one stored whole instead, and say which they passed over.
#[test]
fn replay_by_event_key_passes_over_a_newer_delivery_whose_body_was_not_kept() {
    let handler = Handler::start(Behaviour::CreditsEveryDelivery);
    let whole = stripe_delivery(&handler.url());
    let history = History::with(&whole);
    let mut turned_away = whole.clone();
    turned_away.request_body = Vec::new();
    turned_away.request_body_size = whole.request_body.len() as u64;
    let outcome = portpreview::store::Outcome {
        error: Some("the relay answered the caller 503: tunnel calm-otter is reconnecting".into()),
        ..Default::default()
    };
    let cut = Store::open(&history.db())
        .unwrap()
        .insert_delivery(&turned_away, &outcome)
        .unwrap();
    let kept = history.id;
    for args in [&["replay", "evt_1PortPreviewTest"][..], &["replay", "--latest"]] {
        let ran = portpreview(&history.db(), args);
        assert_ne!(ran.code, 2, "replayed, not refused: {}{}", ran.stdout, ran.stderr);
        assert!(
            ran.stderr.starts_with(&format!("replaying #{kept}, the newest "))
                && ran
                    .stderr
                    .contains(&format!(" whose body was recorded whole (#{cut}'s was not)\n")),
            "{}",
            ran.stderr
        );
    }
    assert_eq!(handler.arrived(), 2, "both runs sent the event");
}

/// A 2xx whose body the handler breaks off is no whole answer: the attempt
/// keeps its status, as the tunnel records such an answer, and fails as
/// cut short, never as "anything but a 2xx".
#[test]
fn a_2xx_answer_cut_short_fails_as_cut_short() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            // Read the whole request first: closing on unread bytes resets
            // the connection, and the answer with it.
            stream
                .set_read_timeout(Some(std::time::Duration::from_millis(200)))
                .unwrap();
            let mut buf = [0u8; 65536];
            while matches!(stream.read(&mut buf), Ok(1..)) {}
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort");
        }
    });
    let history = History::with(&stripe_delivery(&url));
    let ran = history.replay(&["--json"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let json = ran.json();
    let attempt = &json["attempts"][0];
    assert_eq!(attempt["status"], 200, "{attempt}");
    assert!(
        attempt["error"]
            .as_str()
            .is_some_and(|e| e.contains("broke off after 5 of 100 bytes")),
        "{attempt}"
    );
    let detail = ran.check("answers_2xx")["detail"].as_str().unwrap().to_owned();
    assert!(
        detail.starts_with("attempt 1 answered 200 cut short (")
            && detail.ends_with("most HTTP clients take an answer cut short for a failed request, and the provider retries the delivery"),
        "{detail}"
    );
}

/// A probe whose output moves with nothing sent (a request counter, a
/// clock) would leave every step waiting out the settle cap, and the run
/// inconclusive at its end: the read before attempt 1 shows it, so the run
/// stops there, before the handler is sent anything, and names the line.
#[test]
fn a_probe_that_moves_with_nothing_sent_stops_the_run_before_any_attempt() {
    let handler = Handler::start(Behaviour::CreditsEveryDelivery);
    let history = History::with(&stripe_delivery(&handler.url()));
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("junit.xml");
    let ran = history.replay(&[
        "--times",
        "5",
        "--check-url",
        &handler.ticking_state_url(),
        "--settle",
        "50ms",
        "--json",
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(handler.arrived(), 0, "the handler was sent nothing");
    assert_eq!(handler.balance(), 0);
    assert_eq!(history.replay_attempts(), 0, "no attempt is kept in the history");
    let json = ran.json();
    assert_eq!(
        (json["verdict"].as_str(), json["idempotent"].as_bool()),
        (Some("inconclusive"), Some(false)),
        "{json:#}"
    );
    assert_eq!(json["attempts"], serde_json::json!([]), "{json:#}");
    // The event is the recorded one, though no attempt carried it; and no
    // side effect was checked against an attempt.
    assert_eq!(json["event_type"], "payment_intent.succeeded", "{json:#}");
    assert_eq!(json["side_effects_checked"], false, "{json:#}");
    assert_eq!(
        json["retry_window"],
        serde_json::Value::Null,
        "no dedup advice: {json:#}"
    );
    let settled = ran.check("state_settled");
    assert_eq!(settled["passed"], false);
    let detail = settled["detail"].as_str().unwrap();
    assert!(
        detail.starts_with(
            "the probe's output changes with nothing sent (a clock or counter in its output, or the handler still \
             busy with earlier work): line 2 `uptime_ticks: "
        ),
        "{detail}"
    );
    assert!(detail.contains("so no attempt was sent"), "{detail}");
    assert!(!detail.contains("--settle"), "a longer wait cures no counter: {detail}");
    assert_eq!(
        json["summary"].as_str().unwrap(),
        format!("? inconclusive: {detail}"),
        "the headline is the reason"
    );
    assert_eq!(json["state"]["steady"], false, "{json:#}");
    assert_eq!(json["state"]["steps"], serde_json::json!([]), "{json:#}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("failures=\"1\"") && xml.contains("<failure message=\"inconclusive: "),
        "{xml}"
    );

    // The text report says the same, with the state read and no table.
    let ran = history.replay(&["--check-url", &handler.ticking_state_url(), "--settle", "50ms"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout
            .contains("✗ state_settled  the probe's output changes with nothing sent"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout.contains("State before: `balance: 0 ⏎ uptime_ticks: "),
        "{}",
        ran.stdout
    );
    assert!(!ran.stdout.contains("State after:"), "{}", ran.stdout);
    assert!(!ran.stdout.contains("stripe retries:"), "{}", ran.stdout);
    assert!(
        !ran.stdout.contains("one attempt only"),
        "none was sent: {}",
        ran.stdout
    );
    assert_eq!(handler.arrived(), 0, "the handler was sent nothing");
    // `show` counts what was sent of what was asked, as the TUI does.
    let shown = portpreview(&history.db(), &["show", "1"]).stdout;
    assert!(shown.contains("  ×0/5 → ") && shown.contains("  ×0/1 → "), "{shown}");
}
