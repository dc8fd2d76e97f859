use super::*;

fn check(name: &'static str, passed: bool) -> Check {
    Check {
        name,
        passed,
        detail: String::new(),
    }
}

#[test]
fn a_moving_state_makes_the_verdict_inconclusive_but_a_bad_answer_is_final() {
    assert_eq!(
        decide(&[check(ANSWERS_2XX, true), check(STATE_SETTLED, true)]),
        Some(true)
    );
    assert_eq!(
        decide(&[
            check(ANSWERS_2XX, true),
            check(DUPLICATES_CHANGE_NOTHING, false),
            check(STATE_SETTLED, false)
        ]),
        None
    );
    assert_eq!(
        decide(&[check(ANSWERS_2XX, false), check(STATE_SETTLED, false)]),
        Some(false)
    );
    assert_eq!(
        decide(&[check(ANSWERS_2XX, true), check(BURST_ACTS_ONCE, false)]),
        Some(false)
    );
    assert_eq!(decide(&[check(ANSWERS_2XX, true), check(STATE_READABLE, false)]), None);
    // Reads that caught a duplicate acting before the probe failed convict.
    assert_eq!(
        decide(&[
            check(ANSWERS_2XX, true),
            check(STATE_READABLE, false),
            check(DUPLICATES_CHANGE_NOTHING, false)
        ]),
        Some(false)
    );
}

#[test]
fn attempt_1_speaks_of_the_handlers_past_only_when_the_duplicates_changed_nothing() {
    let attempts: Vec<Attempt> = (1..=3)
        .map(|n| Attempt {
            n,
            role: Role::Replay,
            request: crate::store::NewDelivery::default(),
            body: bytes::Bytes::new(),
            answer: crate::replay::attempt::Answer {
                status: Some(200),
                ..Default::default()
            },
            step: n as usize - 1,
            state_changed: None,
        })
        .collect();
    let trace = |steps: [&str; 3]| StateTrace {
        before: "balance 0".into(),
        steps: steps.iter().map(|s| s.to_string()).collect(),
        moved_to: None,
        steady: true,
    };
    let dedups =
        duplicates_change_nothing(&attempts, &trace(["balance 10"; 3]), Some(&HadBefore::WhenRecorded)).unwrap();
    assert!(
        dedups.passed && dedups.detail.contains("the event was new to the handler"),
        "{}",
        dedups.detail
    );
    let pays_every_time = duplicates_change_nothing(
        &attempts,
        &trace(["balance 10", "balance 20", "balance 30"]),
        Some(&HadBefore::WhenRecorded),
    )
    .unwrap();
    assert!(!pays_every_time.passed);
    assert!(
        pays_every_time.detail.contains("attempt 1 changed it too") && !pays_every_time.detail.contains("new to"),
        "{}",
        pays_every_time.detail
    );
}

fn attempts(roles: &[(Role, usize)]) -> Vec<Attempt> {
    roles
        .iter()
        .enumerate()
        .map(|(i, &(role, step))| Attempt {
            n: i as u32 + 1,
            role,
            request: crate::store::NewDelivery::default(),
            body: bytes::Bytes::new(),
            answer: crate::replay::attempt::Answer {
                status: Some(200),
                ..Default::default()
            },
            step,
            state_changed: None,
        })
        .collect()
}

fn settled_trace(before: &str, steps: &[&str]) -> StateTrace {
    StateTrace {
        before: before.into(),
        steps: steps.iter().map(|s| s.to_string()).collect(),
        moved_to: None,
        steady: true,
    }
}

#[test]
fn one_move_after_a_first_step_that_changed_nothing_leaves_the_verdict_open() {
    let settle = Duration::from_millis(600);
    let three = attempts(&[(Role::Replay, 0), (Role::Replay, 1), (Role::Replay, 2)]);
    // A queue worker slower than --settle: attempt 1's credit shows up late.
    let late = state_settled(
        &settled_trace("emails: 5", &["emails: 5", "emails: 5", "emails: 6"]),
        settle,
        &three,
    );
    assert!(!late.passed);
    assert!(
        late.detail.starts_with(
            "attempt 1 left the state unchanged within --settle, and it moved only in the reads after attempt \
             3 (`emails: 5` → `emails: 6`)"
        ) && late
            .detail
            .ends_with("raise --settle (now 600ms) past the time the handler takes"),
        "{}",
        late.detail
    );
    assert_eq!(decide(&[check(ANSWERS_2XX, true), late]), None);
    // A row for each of the three attempts, all landing late: as likely
    // every attempt's work as the first one's.
    let rows = state_settled(
        &settled_trace("rows:", &["rows:", "rows:", "rows:\nevt_A\nevt_A\nevt_A"]),
        settle,
        &three,
    );
    assert!(
        rows.detail
            .contains("that may be every attempt's side effect (3 lines came for 3 attempts) or the first one's"),
        "{}",
        rows.detail
    );
    // Attempt 1 timed out: no "after it answered", and --timeout is named.
    let mut timed_out = three.clone();
    timed_out[0].answer.status = None;
    let late = state_settled(
        &settled_trace("emails: 5", &["emails: 5", "emails: 5", "emails: 6"]),
        settle,
        &timed_out,
    );
    assert!(
        late.detail.ends_with(
            "done though no answer came back in time; raise --timeout, or --settle (now 600ms), past the time \
             the handler takes"
        ),
        "{}",
        late.detail
    );

    // It moved once between steps and again after the last: not "once",
    // and the state never held still to be judged.
    let mut still_moving = settled_trace("effects: 14", &["effects: 14", "effects: 15", "effects: 15"]);
    still_moving.moved_to = Some("effects: 17".into());
    let moving = state_settled(&still_moving, settle, &three);
    assert!(!moving.passed);
    assert!(
        moving
            .detail
            .starts_with("the state still moved 1800ms after the last attempt (`effects: 15` → `effects: 17`)"),
        "{}",
        moving.detail
    );

    // Only a clock moved after the last attempt: the probe is named, not the handler.
    let mut clock = settled_trace("now=1796474218\nbalance: 300", &["now=1796474218\nbalance: 300"; 3]);
    clock.moved_to = Some("now=1796474219\nbalance: 300".into());
    let ticking = state_settled(&clock, settle, &three);
    assert!(!ticking.passed);
    assert!(
        ticking.detail.contains(
            "though only in values that count nothing (a word, an ID, a clock): if the probe prints a clock or \
             an ID that changes with nothing sent, print only what the handler writes"
        ),
        "{}",
        ticking.detail
    );

    // Two moves are two side effects of one event, late or not.
    let twice = settled_trace("emails: 5", &["emails: 5", "emails: 6", "emails: 7"]);
    assert!(state_settled(&twice, settle, &three).passed);
    assert!(
        !duplicates_change_nothing(&three, &twice, Some(&HadBefore::WhenRecorded))
            .unwrap()
            .passed
    );
    // A first step that moved the state is no late effect.
    let at_once = settled_trace("emails: 5", &["emails: 6", "emails: 6", "emails: 6"]);
    assert!(state_settled(&at_once, settle, &three).passed);
    // Nothing moved at all: a handler that had seen the event.
    let seen = settled_trace("emails: 5", &["emails: 5"; 3]);
    assert!(state_settled(&seen, settle, &three).passed);

    let fresh = attempts(&[(Role::Baseline, 0), (Role::Burst, 1), (Role::Burst, 1)]);
    let baseline_late = state_settled(&settled_trace("emails: 5", &["emails: 5", "emails: 7"]), settle, &fresh);
    assert!(
        baseline_late.detail.starts_with(
            "the single new event left the state unchanged within --settle, and it moved only in the reads after the burst"
        ),
        "{}",
        baseline_late.detail
    );
}

/// One event's work may write twice: the event's row at once, its credit
/// from a queue later than --settle. A move after attempt 2 in lines
/// attempt 1 left alone may be that credit, and neither clears nor
/// convicts; one where attempt 1 moved is a duplicate's.
#[test]
fn a_later_move_in_lines_the_first_attempt_left_alone_leaves_the_verdict_open() {
    let settle = Duration::from_millis(300);
    let two = attempts(&[(Role::Replay, 0), (Role::Replay, 1)]);
    let before = "balance: 0\nprocessed: [0]\n";
    let row_added = "balance: 0\nprocessed: [1]\n  - \"evt_1\"\n";
    let credited = "balance: 100\nprocessed: [1]\n  - \"evt_1\"\n";
    let split = settled_trace(before, &[row_added, credited]);
    let late = state_settled(&split, settle, &two);
    assert!(!late.passed);
    assert!(
        late.detail
            .contains("and it moved again only in the reads after attempt 2, elsewhere than attempt 1 moved it")
            && late.detail.contains("→ `balance: 100 ⏎")
            && late
                .detail
                .ends_with("raise --settle (now 300ms) past the time the handler takes"),
        "{}",
        late.detail
    );
    let dups = duplicates_change_nothing(&two, &split, None).unwrap();
    assert_eq!(decide(&[check(ANSWERS_2XX, true), dups, late]), None);

    // The same lines moved again, or one more line came where attempt 1's
    // did: the duplicate's own side effect.
    let orders = ["order_1: \"paid\"\n", "order_1: \"paid\"\norder_2: \"paid\"\n"];
    let again = [
        settled_trace("balance: 0", &["balance: 100", "balance: 200"]),
        settled_trace("", &orders),
    ];
    for twice in again {
        let settled = state_settled(&twice, settle, &two);
        assert!(settled.passed, "{}", settled.detail);
        let dups = duplicates_change_nothing(&two, &twice, None).unwrap();
        assert_eq!(decide(&[check(ANSWERS_2XX, true), dups, settled]), Some(false));
    }
    // Under --fresh the burst is a new event, which must move the state.
    let fresh = attempts(&[(Role::Baseline, 0), (Role::Burst, 1), (Role::Burst, 1)]);
    assert!(state_settled(&split, settle, &fresh).passed);
}

/// Duplicates sent one at a time cannot race: when some of them repeated
/// the side effect and not all, the report names a limit, not a race.
#[test]
fn some_duplicates_acting_one_at_a_time_is_no_race() {
    let once_more = settled_trace("balance: 0", &["balance: 100", "balance: 200", "balance: 200"]);
    let one_at_a_time = attempts(&[(Role::Replay, 0), (Role::Replay, 1), (Role::Replay, 2)]);
    let detail = duplicates_change_nothing(&one_at_a_time, &once_more, None)
        .unwrap()
        .detail;
    assert!(
        detail.contains("not all: a limit the handler checks (a count, a time window)") && !detail.contains("race"),
        "{detail}"
    );
    let together = attempts(&[
        (Role::Replay, 0),
        (Role::Replay, 1),
        (Role::Replay, 1),
        (Role::Replay, 2),
    ]);
    let detail = duplicates_change_nothing(&together, &once_more, None).unwrap().detail;
    assert!(detail.contains("a check-then-insert race or a limit"), "{detail}");
}

/// Attempt 1 changing nothing while later ones did is what work done
/// after answering looks like when each read comes before it: the advice
/// leads with that and --settle, not with a limit or a race the moves
/// would otherwise read as, whatever the history says of the event.
#[test]
fn later_attempts_moving_after_a_still_first_one_point_to_settle() {
    let late = "attempt 1 changed nothing and later reads moved: the handler likely works after it answers, so a \
                read may show an earlier attempt's work; raise --settle above its delay to see which attempt did \
                what; whichever did, the event acted more than once: record the event ID under a unique \
                constraint and skip events already handled";
    let three = attempts(&[(Role::Replay, 0), (Role::Replay, 1), (Role::Replay, 2)]);
    let trace = settled_trace("emails: 5", &["emails: 5", "emails: 6", "emails: 7"]);
    let check = duplicates_change_nothing(&three, &trace, Some(&HadBefore::WhenRecorded)).unwrap();
    assert!(!check.passed);
    assert_eq!(
        check.detail,
        format!("the state moved in the reads after attempts 2–3 (`emails: 5` → `emails: 7`, +2): {late}")
    );

    // A queue worker crediting 100 a delivery, late, read one at a time:
    // some reads catch a credit and some do not, which read as "some
    // duplicates, not all", a limit. Every attempt credited.
    let five = attempts(&[
        (Role::Replay, 0),
        (Role::Replay, 1),
        (Role::Replay, 2),
        (Role::Replay, 3),
        (Role::Replay, 4),
    ]);
    let uneven = settled_trace(
        "balance: 0",
        &[
            "balance: 0",
            "balance: 200",
            "balance: 200",
            "balance: 300",
            "balance: 500",
        ],
    );
    for had in [None, Some(&HadBefore::WhenRecorded)] {
        let detail = duplicates_change_nothing(&five, &uneven, had).unwrap().detail;
        assert_eq!(
            detail,
            format!("the state moved in the reads after attempts 2, 4–5 (`balance: 0` → `balance: 500`, +500): {late}"),
            "{had:?}"
        );
        assert!(!detail.contains("a limit") && !detail.contains("race"), "{detail}");
    }

    // Attempt 1 that changed the state keeps the limit: its own effect
    // was seen, so later moves are the duplicates'.
    let first_acted = settled_trace(
        "balance: 0",
        &[
            "balance: 100",
            "balance: 200",
            "balance: 200",
            "balance: 300",
            "balance: 300",
        ],
    );
    let detail = duplicates_change_nothing(&five, &first_acted, None).unwrap().detail;
    assert!(detail.contains("a limit the handler checks"), "{detail}");
    assert!(!detail.contains("works after it answers"), "{detail}");
}

#[test]
fn a_failed_first_attempt_is_not_said_to_have_seen_the_event() {
    let mut two = attempts(&[(Role::Replay, 0), (Role::Replay, 1)]);
    let trace = settled_trace("emails: 5", &["emails: 5", "emails: 5"]);
    let answered = duplicates_change_nothing(&two, &trace, Some(&HadBefore::WhenRecorded)).unwrap();
    assert!(
        answered.detail.contains("the handler had seen the event before"),
        "{}",
        answered.detail
    );
    two[0].answer.status = Some(500);
    let failed = duplicates_change_nothing(&two, &trace, Some(&HadBefore::WhenRecorded)).unwrap();
    assert!(
        failed
            .detail
            .ends_with("attempt 1 changed nothing, and it was not answered 2xx"),
        "{}",
        failed.detail
    );
}

/// A probe that says "nothing" on every read saw no side effect at all:
/// the burst proved nothing, whatever word it says it with.
#[test]
fn a_probe_that_always_says_nothing_proves_nothing() {
    let trace = settled_trace("(none)", &["(none)", "(none)"]);
    let check = burst_acts_once(&trace, 4).unwrap();
    assert!(!check.passed, "{}", check.detail);
    assert!(check.detail.contains("proved nothing"), "{}", check.detail);
}

/// A burst that acted not at all shows no copy acting twice: its event
/// likely passed for the baseline's, and the run proves nothing.
#[test]
fn a_burst_that_changed_nothing_proves_nothing() {
    let trace = settled_trace("count 5", &["count 6", "count 6"]);
    let check = burst_acts_once(&trace, 4).unwrap();
    assert_eq!((check.name, check.passed), (PROBE_SHOWS_EFFECTS, false));
    assert_eq!(
        check.detail,
        "one new event changed the state by +1, but a burst of 4 copies of another left the state unchanged, \
         so it cannot show how many times it acted: the handler dedups on a field --fresh did not renew (an \
         order's or a payment's ID), which --fresh-field names, or it does not treat new events alike"
    );
}

#[test]
fn a_burst_that_only_replaced_a_value_proves_nothing_and_is_no_race() {
    // A handler deduping on an order ID --fresh left alone: the burst's
    // event passed for the baseline's, and only last_seen moved.
    let trace = settled_trace(
        "orders: 0 last_seen: evt_a",
        &["orders: 1 last_seen: evt_b", "orders: 1 last_seen: evt_c"],
    );
    let check = burst_acts_once(&trace, 3).unwrap();
    assert_eq!((check.name, check.passed), (PROBE_SHOWS_EFFECTS, false));
    assert!(check.detail.contains("--fresh-field"), "{}", check.detail);
    assert!(!check.detail.contains("race"), "{}", check.detail);
    // Replacing a value once or three times reads alike: nothing was counted.
    let clock_only = settled_trace("last_seen: evt_a", &["last_seen: evt_b", "last_seen: evt_c"]);
    let check = burst_acts_once(&clock_only, 3).unwrap();
    assert_eq!((check.name, check.passed), (PROBE_SHOWS_EFFECTS, false));
    assert!(check.detail.contains("proved nothing"), "{}", check.detail);
}

#[test]
fn csv_rows_and_json_arrays_of_counts_are_judged_column_by_column() {
    for (before, baseline, burst) in [("0,0", "1,50", "2,100"), ("[0,0]", "[500,100]", "[1000,200]")] {
        let check = burst_acts_once(&settled_trace(before, &[baseline, burst]), 5).unwrap();
        assert!(check.passed, "{before} {baseline} {burst}: {}", check.detail);
    }
    // A sqlite3 -csv row of four columns: read whole, one ID-long number.
    let four = settled_trace("5,500,100,100", &["6,600,100,100", "8,800,100,100"]);
    assert!(
        !burst_acts_once(&four, 2).unwrap().passed,
        "a race in a four-column row"
    );
    let raced = burst_acts_once(&settled_trace("0,0", &["1,50", "6,300"]), 5).unwrap();
    assert!(!raced.passed);
    assert!(
        raced.detail.contains("by +1, +50") && raced.detail.contains("by +5, +250"),
        "{}",
        raced.detail
    );
}

#[test]
fn a_change_deep_in_a_long_state_is_shown_where_it_happens() {
    let before = r#"{"idem_seen": 7, "idem_count": 7, "nonidem": 6, "racy_rows": 3, "queue": 0, "tail": "x"}"#;
    let after = before.replace("\"nonidem\": 6", "\"nonidem\": 7");
    let shown = shown_change(before, &after);
    assert!(
        shown.contains(r#""nonidem": 6"#) && shown.contains(r#""nonidem": 7"#),
        "{shown}"
    );
    assert!(shown.starts_with("`…"), "cut before the change: {shown}");
    // The cut falls between words, so each read begins with a whole name.
    let rows = "stripe_processed: 1\nstripe_balance: 100\nnaive_rows: 6\nnaive_total: 600\nqueue: 0";
    let shown = shown_change(rows, &rows.replace("naive_total: 600", "naive_total: 700"));
    assert!(
        shown.starts_with("`…naive_total: 600 ⏎ queue: 0` → `…naive_total: 700"),
        "{shown}"
    );
    let rows = "stripe_processed: 1\nstripe_balance: 1000\nnaive_rows: 6\nnaive_total: 600";
    let shown = shown_change(rows, &rows.replace("1000", "1100"));
    assert!(shown.starts_with("`…stripe_balance: 1000 ⏎ naive_rows"), "{shown}");
    assert_eq!(
        shown_change("count 5", "count 6"),
        "`count 5` → `count 6`",
        "short reads whole"
    );
}

#[test]
fn an_unchanged_long_state_is_shown_from_its_start() {
    let long = "1234567890123456789012345678901234567890abcdefghijklmnopqrstuvwxyz";
    let (before, after) = aligned(long, long);
    assert_eq!(before, format!("`{}…`", &long[..60]));
    assert_eq!(after, before);
    let dump = "orders: 12\nemails: 12\nrefunds: 0\nwebhooks_seen: 12\nqueue_depth: 0\nlast: evt_1\n";
    let (before, _) = aligned(dump, dump);
    assert!(before.starts_with("`orders: 12 ⏎ emails: 12 ⏎ "), "{before}");
    assert!(before.ends_with("…`"), "{before}");
    // A changed one still shows where it changed.
    let (_, changed) = aligned(long, &long.replace('z', "Z"));
    assert!(changed.starts_with("`…") && changed.ends_with("xyZ`"), "{changed}");
}

#[test]
fn a_burst_is_told_apart_by_how_many_copies_acted() {
    let trace = StateTrace {
        before: "count 5".into(),
        steps: vec!["count 6".into(), "count 16".into()],
        moved_to: None,
        steady: true,
    };
    let check = burst_acts_once(&trace, 10).unwrap();
    assert!(!check.passed);
    assert!(
        check
            .detail
            .contains("every one of the 10 copies acted: the handler does not dedup at all, or"),
        "{}",
        check.detail
    );
    let some_slipped = StateTrace {
        steps: vec!["count 6".into(), "count 10".into()],
        ..trace.clone()
    };
    let check = burst_acts_once(&some_slipped, 10).unwrap();
    assert!(
        check
            .detail
            .contains("4 side effects for one event: a check-then-insert race"),
        "{}",
        check.detail
    );
    let fine = StateTrace {
        steps: vec!["count 6".into(), "count 7".into()],
        ..trace
    };
    assert!(burst_acts_once(&fine, 10).unwrap().passed);
}

#[test]
fn a_json_state_is_judged_by_what_it_holds_not_by_how_it_was_printed() {
    // As `json.dumps(state, indent=2)` prints it: a comma moves to the line
    // before each event added, and the new event sorts anywhere.
    let read = |balance: u32, ids: &[&str]| {
        let state = serde_json::json!({"balance": balance, "processed": ids});
        crate::replay::probe::state_text(serde_json::to_vec_pretty(&state).unwrap())
    };
    let before = read(0, &["evt_m"]);
    let baseline = read(100, &["evt_m", "evt_z"]);
    let judge = |burst: &str| burst_acts_once(&settled_trace(&before, &[&baseline, burst]), 5).unwrap();

    let deduped = judge(&read(200, &["evt_a", "evt_m", "evt_z"]));
    assert!(deduped.passed, "{}", deduped.detail);
    // Every copy credited, the event recorded once: a check-then-insert race.
    let raced = judge(&read(600, &["evt_a", "evt_m", "evt_z"]));
    assert!(!raced.passed, "{}", raced.detail);
    assert!(
        raced.detail.contains("+100, +1, 1 line added") && raced.detail.contains("+500, +1, 1 line added"),
        "{}",
        raced.detail
    );

    // The same state with its keys in another order is no change at all.
    let shuffled = crate::replay::probe::state_text(br#"{"processed": ["evt_z", "evt_m"], "balance": 100}"#.to_vec());
    assert_eq!(shuffled, baseline);
}

#[test]
fn a_duplicate_that_only_replaced_a_value_is_told_what_that_may_be() {
    let three = attempts(&[(Role::Replay, 0), (Role::Replay, 1), (Role::Replay, 2)]);
    let stamped = |balance: u32, second: u32| format!("balance: {balance}\nlast_seen: 2026-12-03T04:00:{second:02}Z");
    let steps = [stamped(1, 1), stamped(1, 2), stamped(1, 3)];
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let check = duplicates_change_nothing(
        &three,
        &settled_trace("balance: 0\nlast_seen: -", &steps),
        Some(&HadBefore::WhenRecorded),
    )
    .unwrap();
    assert!(!check.passed, "the state changed: {}", check.detail);
    assert!(
        check
            .detail
            .contains("only values were replaced: if the handler records when it last saw an event"),
        "{}",
        check.detail
    );
    let steps = [stamped(1, 1), stamped(2, 2), stamped(3, 3)];
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let check = duplicates_change_nothing(
        &three,
        &settled_trace("balance: 0\nlast_seen: -", &steps),
        Some(&HadBefore::WhenRecorded),
    )
    .unwrap();
    assert!(
        check.detail.contains("every duplicate repeated the side effect"),
        "{}",
        check.detail
    );
}

#[test]
fn a_state_that_never_held_still_is_called_so_even_when_it_moved_at_the_end() {
    let ticking = StateTrace {
        before: "ticks: 1".into(),
        steps: vec!["ticks: 4".into(), "ticks: 9".into()],
        moved_to: Some("ticks: 14".into()),
        steady: false,
    };
    let two = attempts(&[(Role::Replay, 0), (Role::Replay, 1)]);
    let check = state_settled(&ticking, Duration::from_millis(300), &two);
    assert!(!check.passed);
    assert!(
        check.detail.starts_with(
            "the state never held still for 300ms within 3s, or within 5 times the probe's slowest read \
                 when that is longer: raise --settle"
        ) && check.detail.contains("print only what the handler writes"),
        "{}",
        check.detail
    );
}

#[test]
fn duplicates_that_left_the_state_where_the_one_before_put_it_did_nothing() {
    // Attempts 2 and 3 credited again, 4 and 5 found a limit reached.
    let five = attempts(&[
        (Role::Replay, 0),
        (Role::Replay, 1),
        (Role::Replay, 2),
        (Role::Replay, 3),
        (Role::Replay, 4),
    ]);
    let trace = settled_trace(
        "evt_1|0",
        &["evt_1|100", "evt_1|200", "evt_1|300", "evt_1|300", "evt_1|300"],
    );
    let check = duplicates_change_nothing(&five, &trace, Some(&HadBefore::WhenRecorded)).unwrap();
    assert!(!check.passed);
    assert!(
        check.detail.starts_with("attempts 2–3 changed the state again")
            && check
                .detail
                .contains("some duplicates repeated the side effect, not all"),
        "{}",
        check.detail
    );
    let every = settled_trace("n 0", &["n 1", "n 2", "n 3", "n 4", "n 5"]);
    let check = duplicates_change_nothing(&five, &every, Some(&HadBefore::WhenRecorded)).unwrap();
    assert!(check.detail.contains("every duplicate repeated"), "{}", check.detail);
}

#[test]
fn a_burst_row_holding_what_some_copies_credited_is_a_race() {
    let mut trace = settled_trace("", &["evt_A|100\n", "evt_A|100\nevt_B|300\n"]);
    let check = burst_acts_once(&trace, 4).unwrap();
    assert!(!check.passed);
    assert!(
        check
            .detail
            .contains("3 times as much, so 3 of the 4 copies acted on the event's row"),
        "{}",
        check.detail
    );
    trace.steps[1] = "evt_A|100\nevt_B|400\n".into();
    let check = burst_acts_once(&trace, 4).unwrap();
    assert!(check.detail.contains("so every copy acted"), "{}", check.detail);
    // A count first on its line may be an ID, and is not compared.
    let ids = settled_trace("", &["1|evt_A\n", "1|evt_A\n3|evt_B\n"]);
    assert!(burst_acts_once(&ids, 4).unwrap().passed);
}

#[test]
fn a_header_that_came_with_the_first_row_is_not_the_baselines_effect() {
    let column = |rows: &[&str]| {
        format!(
            "id  event\n--  -----\n{}",
            rows.iter().map(|r| format!("{r}\n")).collect::<String>()
        )
    };
    let trace = settled_trace("", &[&column(&["1   evt_A"]), &column(&["1   evt_A", "2   evt_B"])]);
    let check = burst_acts_once(&trace, 4).unwrap();
    assert!(check.passed, "{}", check.detail);
    let trace = settled_trace(
        "",
        &[
            &column(&["1   evt_A"]),
            &column(&["1   evt_A", "2   evt_B", "3   evt_B"]),
        ],
    );
    assert!(!burst_acts_once(&trace, 4).unwrap().passed);
}

#[test]
fn a_run_stopped_after_its_last_attempt_says_it_was_stopped_while_settling() {
    assert_eq!(
        run_completed(1, 3).detail,
        "stopped after 1 of 3 attempts: only the whole run can show the handler idempotent"
    );
    assert_eq!(
        run_completed(3, 3).detail,
        "stopped after all 3 attempts, while waiting for the state to settle: only the whole run can show the handler idempotent"
    );
    assert_eq!(
        run_completed(2, 2).detail,
        "stopped after both attempts, while waiting for the state to settle: only the whole run can show the handler idempotent"
    );
}

#[test]
fn an_attempt_that_never_reached_the_handler_is_no_duplicate_it_handled() {
    let mut attempts = attempts(&[(Role::Replay, 0), (Role::Replay, 1), (Role::Replay, 2)]);
    // The handler went away after attempt 2, which repeated the side effect.
    attempts[2].answer = crate::replay::attempt::Answer {
        error: Some("cannot connect to 127.0.0.1:3000: Connection refused".into()),
        unreached: true,
        ..Default::default()
    };
    let trace = settled_trace("rows 0", &["rows 1", "rows 2", "rows 2"]);
    let repeated = duplicates_change_nothing(&attempts, &trace, Some(&HadBefore::WhenRecorded)).unwrap();
    assert!(!repeated.passed);
    assert!(
        repeated.detail.contains("every duplicate repeated the side effect"),
        "attempt 3 did not leave the state alone, it never came: {}",
        repeated.detail
    );
    // Nothing reached it after attempt 1: no duplicate to judge.
    attempts[1].answer = attempts[2].answer.clone();
    assert_eq!(
        duplicates_change_nothing(
            &attempts,
            &settled_trace("rows 0", &["rows 1", "rows 1", "rows 1"]),
            Some(&HadBefore::WhenRecorded)
        ),
        None
    );
}

#[test]
fn a_run_in_which_nothing_was_seen_to_act_says_so() {
    let attempts = |first_status: u16| -> Vec<Attempt> {
        (1..=3)
            .map(|n| Attempt {
                n,
                role: Role::Replay,
                request: crate::store::NewDelivery::default(),
                body: bytes::Bytes::new(),
                answer: crate::replay::attempt::Answer {
                    status: Some(if n == 1 { first_status } else { 200 }),
                    ..crate::replay::attempt::Answer::default()
                },
                step: n as usize - 1,
                state_changed: None,
            })
            .collect()
    };
    let trace = |steps: [&str; 3]| StateTrace {
        before: "balance 0".into(),
        steps: steps.iter().map(|s| s.to_string()).collect(),
        moved_to: None,
        steady: true,
    };
    let settle = Duration::from_millis(300);

    // Under --expect-effect the same run fails the check, with one attempt
    // as with three, and says what the history knows.
    let unseen = effect_unseen(&trace(["balance 0"; 3]), settle, &attempts(200), false).unwrap();
    assert_eq!((unseen.name, unseen.passed), (PROBE_SHOWS_EFFECTS, false));
    assert!(
        unseen
            .detail
            .contains("(--settle 300ms, and 3s after the last attempt)"),
        "{}",
        unseen.detail
    );
    let one = StateTrace {
        steps: vec!["balance 0".into()],
        ..trace(["balance 0"; 3])
    };
    assert!(effect_unseen(&one, settle, &attempts(200)[..1], false).is_some());
    let had = effect_unseen(&trace(["balance 0"; 3]), settle, &attempts(200), true).unwrap();
    assert!(
        had.detail
            .contains("the history shows this target answering the event 2xx before"),
        "{}",
        had.detail
    );
    assert!(
        effect_unseen(&trace(["balance 10"; 3]), settle, &attempts(200), false).is_none(),
        "seen acting"
    );
    assert!(
        effect_unseen(&trace(["balance 0"; 3]), settle, &attempts(500), false).is_none(),
        "refused"
    );

    let still = nothing_seen_to_act(&trace(["balance 0"; 3]), settle, &attempts(200)).unwrap();
    assert!(
        still.starts_with("no read saw the state move, not even after attempt 1")
            && still.contains("(--settle 300ms, and 3s after the last attempt)"),
        "{still}"
    );
    // Attempt 1 acted, as a new event does: the reads were in time.
    assert_eq!(
        nothing_seen_to_act(&trace(["balance 10"; 3]), settle, &attempts(200)),
        None
    );
    // A duplicate acted: the run convicts, it does not need the warning.
    assert_eq!(
        nothing_seen_to_act(
            &trace(["balance 0", "balance 10", "balance 10"]),
            settle,
            &attempts(200)
        ),
        None
    );
    // An attempt 1 refused is what the run reports.
    assert_eq!(
        nothing_seen_to_act(&trace(["balance 0"; 3]), settle, &attempts(500)),
        None
    );
}

/// A handler that toggles a row: a duplicate changes the state and the
/// next changes it back, so attempt 1's read and the last are alike.
#[test]
fn a_duplicate_that_changed_the_state_back_is_shown_changing_it() {
    let three = attempts(&[(Role::Replay, 0), (Role::Replay, 1), (Role::Replay, 2)]);
    let trace = settled_trace("rows: 0", &["rows: 1", "rows: 0", "rows: 1"]);
    let check = duplicates_change_nothing(&three, &trace, None).unwrap();
    assert!(!check.passed);
    assert_eq!(
        check.detail,
        "attempts 2–3 changed the state again: attempt 2 changed it (`rows: 1` → `rows: 0`, −1), and the last \
         read is back where attempt 1 left it: every duplicate repeated the side effect; record the event ID \
         under a unique constraint and skip events already handled (attempt 1 changed it too)"
    );
    // A clock beside the toggled row: the last read differs from attempt
    // 1's by a value, which is not what the duplicates did.
    let stamped = |rows: u32, second: u32| format!("rows: {rows}\nlast_seen: 2026-12-03T04:00:{second:02}Z");
    let steps = [stamped(1, 1), stamped(0, 2), stamped(1, 3)];
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let check = duplicates_change_nothing(&three, &settled_trace("rows: 0\nlast_seen: -", &steps), None).unwrap();
    assert!(
        check.detail.contains(": attempt 2 changed it (")
            && check
                .detail
                .contains("and the last read differs from attempt 1's only by 1 value replaced")
            && !check
                .detail
                .contains("if the handler records when it last saw an event"),
        "{}",
        check.detail
    );
}

/// A balance in wei moves by numbers as long as an ID, which counts leave
/// out: a burst that credited it ten times is no pass, though the list of
/// events beside it grew by one row, as for one delivery.
#[test]
fn a_burst_that_multiplied_an_amount_in_small_units_is_no_pass() {
    let trace = settled_trace(
        "balance: 1000000000000000000\nevents: evt_0\n",
        &[
            "balance: 2000000000000000000\nevents: evt_0\nevents: evt_a\n",
            "balance: 12000000000000000000\nevents: evt_0\nevents: evt_a\nevents: evt_b\n",
        ],
    );
    let check = burst_acts_once(&trace, 10).unwrap();
    assert_eq!(
        (check.name, check.passed),
        (PROBE_SHOWS_EFFECTS, false),
        "{}",
        check.detail
    );
    assert!(
        check.detail.contains(
            "moved 10 times as far for a burst of 10 copies as for one new event (1000000000000000000 → \
             2000000000000000000 → 12000000000000000000): if it is an amount, every copy acted on it"
        ),
        "{}",
        check.detail
    );
    // Credited once, it passes.
    let once = settled_trace(
        "balance: 1000000000000000000\nevents: evt_0\n",
        &[
            "balance: 2000000000000000000\nevents: evt_0\nevents: evt_a\n",
            "balance: 3000000000000000000\nevents: evt_0\nevents: evt_a\nevents: evt_b\n",
        ],
    );
    assert!(burst_acts_once(&once, 10).unwrap().passed);
    // The balance alone, with no count beside it: judged by it alone.
    let alone = |burst: &str| burst_acts_once(&settled_trace("0", &["1000000000000000000", burst]), 10).unwrap();
    let many = alone("11000000000000000000");
    assert_eq!(
        (many.name, many.passed),
        (PROBE_SHOWS_EFFECTS, false),
        "{}",
        many.detail
    );
    assert!(many.detail.contains("moved 10 times as far"), "{}", many.detail);
    let once = alone("2000000000000000000");
    assert!(once.passed, "{}", once.detail);
    assert!(
        once.detail
            .ends_with("as one delivery did (0 → 1000000000000000000 → 2000000000000000000)"),
        "{}",
        once.detail
    );
}

#[test]
fn a_404_to_every_attempt_points_at_the_target_not_at_the_provider() {
    let answered = |statuses: &[u16]| -> Vec<Attempt> {
        (statuses.iter().zip(1..))
            .map(|(&status, n)| Attempt {
                n,
                role: Role::Replay,
                request: crate::store::NewDelivery::default(),
                body: bytes::Bytes::new(),
                answer: crate::replay::attempt::Answer {
                    status: Some(status),
                    ..Default::default()
                },
                step: n as usize - 1,
                state_changed: None,
            })
            .collect()
    };
    let nowhere = answers_2xx(&answered(&[404, 404]), false);
    assert!(
        nowhere
            .detail
            .starts_with("attempts 1–2 answered 404: either nothing at that path takes the event (check --target"),
        "{}",
        nowhere.detail
    );
    // A handler that takes the event, then refuses its duplicate: the
    // provider's retries are the point.
    let refused_duplicate = answers_2xx(&answered(&[200, 404]), false);
    assert!(
        refused_duplicate
            .detail
            .ends_with("the provider reads anything but a 2xx answer as a failed delivery and retries it"),
        "{}",
        refused_duplicate.detail
    );
}

/// Attempt 1 failed and did nothing; attempt 2 handled the event; attempt
/// 3, its duplicate, paid again: convicted, with the first success named.
/// When attempt 2 shared its step with another, nothing can be told.
#[test]
fn after_a_failure_that_did_nothing_the_first_success_is_the_delivery() {
    let mut three = attempts(&[(Role::Replay, 0), (Role::Replay, 1), (Role::Replay, 2)]);
    three[0].answer.status = Some(500);
    let trace = settled_trace("balance: 0", &["balance: 0", "balance: 100", "balance: 200"]);
    let paid_again = duplicates_after_the_first_success(&three, &trace).unwrap();
    assert!(!paid_again.passed);
    assert_eq!(
        paid_again.detail,
        "attempt 3 changed the state again after attempt 2 (`balance: 100` → `balance: 200`): attempt 2 was the \
         first answered 2xx, after attempt 1 got none and changed nothing, and a duplicate of the delivery it \
         handled repeated the side effect; record the event ID under a unique constraint and skip events already \
         handled"
    );
    let deduped = settled_trace("balance: 0", &["balance: 0", "balance: 100", "balance: 100"]);
    assert!(duplicates_after_the_first_success(&three, &deduped).unwrap().passed);
    // Attempt 1 acted: that run is judged from attempt 1 instead.
    let acted = settled_trace("balance: 0", &["balance: 100", "balance: 200", "balance: 200"]);
    assert_eq!(duplicates_after_the_first_success(&three, &acted), None);
    // Attempts 2 and 3 went out together: whose move is whose is unknown.
    let mut together = three.clone();
    together[2].step = 1;
    let two_steps = settled_trace("balance: 0", &["balance: 0", "balance: 200"]);
    assert_eq!(duplicates_after_the_first_success(&together, &two_steps), None);
}

/// The read before attempt 1 that never held still names the line that
/// moved, and says nothing was sent; --settle is no cure for a clock.
#[test]
fn a_probe_moving_before_anything_was_sent_names_the_line_that_moved() {
    let check = moves_with_nothing_sent("balance: 0\nuptime_ticks: 24\n", "balance: 0\nuptime_ticks: 31\n");
    assert!(!check.passed);
    assert_eq!(check.name, STATE_SETTLED);
    assert!(makes_inconclusive(check.name), "nothing sent judges nothing");
    assert_eq!(
        check.detail,
        "the probe's output changes with nothing sent (a clock or counter in its output, or the handler still \
         busy with earlier work): line 2 `uptime_ticks: 24` → `uptime_ticks: 31`, so no attempt was sent; print \
         only what the handler writes (leave clocks and request counters out of the probe), or run again once \
         the handler is idle"
    );
    assert!(!check.detail.contains("--settle"), "{}", check.detail);
    assert_eq!(decide(std::slice::from_ref(&check)), None);
}

#[test]
fn the_first_line_two_reads_differ_in_is_named_with_how_many_others_do() {
    assert_eq!(first_moved_line("a: 1\nb: 2", "a: 1\nb: 3"), "line 2 `b: 2` → `b: 3`");
    assert_eq!(
        first_moved_line("now: 1\nb: 2\nc: 3", "now: 2\nb: 3\nc: 4"),
        "line 1 `now: 1` → `now: 2`, and 2 other lines"
    );
    assert_eq!(
        first_moved_line("now: 1\nb: 2", "now: 2\nb: 3"),
        "line 1 `now: 1` → `now: 2`, and 1 other line"
    );
    // A line that came or went is shown against nothing.
    assert_eq!(first_moved_line("a: 1", "a: 1\nreq: 7"), "line 2 `` → `req: 7`");
    assert_eq!(first_moved_line("a: 1\n", "a: 1\r\n"), "its line endings");
    // What the handler sent is escaped, and a long line cut near the change.
    let long = |n: u32| format!("{}{n}", "x".repeat(100));
    let shown = first_moved_line(&long(1), &long(2));
    assert!(shown.starts_with("line 1 `…x") && shown.ends_with("x2`"), "{shown}");
    assert_eq!(first_moved_line("a\x1b[2J", "b"), "line 1 `a\\x1b[2J` → `b`");
}
