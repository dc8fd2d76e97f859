//! Unit tests of the store against in-memory and real-file databases.

use std::path::PathBuf;

use portpreview_shared::Header;

use rusqlite::OpenFlags;

use super::open::{immutable_uri, Opening};
use super::*;

/// A scratch directory removed on drop.
pub(crate) struct ScratchDir(pub PathBuf);

impl ScratchDir {
    /// A fresh directory under the system temp dir, unique to this process and call.
    pub(crate) fn new(label: &str) -> Self {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "portpreview-{label}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A Stripe-like delivery of event `key` to `path`.
pub(crate) fn delivery(key: &str, path: &str) -> NewDelivery {
    NewDelivery {
        received_at_ms: 1_700_000_000_000,
        tunnel_url: "http://127.0.0.1:9/t/calm-otter".into(),
        target: "http://127.0.0.1:3000".into(),
        method: "POST".into(),
        path: path.into(),
        request_headers: vec![Header::new("content-type", "application/json")],
        request_body: format!("{{\"id\":\"{key}\"}}").into_bytes(),
        request_body_size: 0,
        provider: Some("stripe".into()),
        event_key: key.into(),
        event_key_source: "body:/id".into(),
        replay_of: None,
        host_preserved: false,
        event_type: None,
    }
}

fn ok_outcome() -> Outcome {
    Outcome {
        status: Some(200),
        response_headers: vec![Header::new("content-length", "2")],
        response_body: b"ok".to_vec(),
        response_body_size: 2,
        duration_ms: Some(12.5),
        error: None,
    }
}

#[test]
fn a_delivery_comes_back_exactly() {
    let store = Store::in_memory().unwrap();
    let mut d = delivery("evt_1", "/hook?x=1");
    d.request_headers = vec![
        Header::new("x-dup", "a"),
        Header::new("authorization", "Bearer s"),
        Header::new("x-dup", "b"),
        Header::new("x-raw", vec![0xff, 0xfe, 0x00, 0x1b]),
    ];
    d.request_body = vec![0, 159, 146, 150, 0xff];
    d.request_body_size = 5;
    let id = store.insert_request(&d).unwrap();
    let pending = store.get(id).unwrap().unwrap();
    assert_eq!(pending.request, d);
    assert_eq!(pending.outcome, None);
    assert_eq!(pending.delivery_count, 1);

    store.record_outcome(id, &ok_outcome()).unwrap();
    let done = store.get(id).unwrap().unwrap();
    assert_eq!(done.outcome, Some(ok_outcome()));
    assert_eq!(store.get(id + 1).unwrap(), None);
}

#[test]
fn failed_forwarding_keeps_its_error() {
    let store = Store::in_memory().unwrap();
    let failed = Outcome {
        error: Some("connection refused by 127.0.0.1:3000".into()),
        duration_ms: Some(1.0),
        ..Outcome::default()
    };
    let id = store.insert_delivery(&delivery("evt_e", "/"), &failed).unwrap();
    let row = &store.list(&ListQuery::default()).unwrap()[0];
    assert_eq!(
        (row.id, row.status, row.error.as_deref()),
        (id, None, failed.error.as_deref())
    );
    assert_eq!(store.get(id).unwrap().unwrap().outcome, Some(failed));
}

#[test]
fn a_hashed_key_counts_resends_to_one_endpoint_only() {
    let store = Store::in_memory().unwrap();
    let hashed = |method: &str, path: &str| NewDelivery {
        method: method.into(),
        provider: None,
        event_key: "4e7d0c".into(),
        event_key_source: "sha256:body".into(),
        ..delivery("4e7d0c", path)
    };
    let orders = store.insert_request(&hashed("POST", "/orders")).unwrap();
    let users = store.insert_request(&hashed("POST", "/users")).unwrap();
    let put = store.insert_request(&hashed("PUT", "/orders")).unwrap();
    let resent = store.insert_request(&hashed("POST", "/orders?attempt=2")).unwrap();
    for (id, number) in [(orders, 1), (users, 1), (put, 1), (resent, 2)] {
        assert_eq!(store.delivery_number(id).unwrap(), number, "#{id}");
    }
    assert_eq!(store.get(users).unwrap().unwrap().delivery_count, 1);
    assert_eq!(store.get(orders).unwrap().unwrap().delivery_count, 2);
    // A provider's own ID is one event wherever it is sent.
    let first = store.insert_request(&delivery("evt_a", "/a")).unwrap();
    let elsewhere = store.insert_request(&delivery("evt_a", "/b")).unwrap();
    assert_eq!(
        (
            store.delivery_number(first).unwrap(),
            store.delivery_number(elsewhere).unwrap()
        ),
        (1, 2)
    );
}

#[test]
fn retries_are_counted_and_numbered() {
    let store = Store::in_memory().unwrap();
    let first = store.insert_request(&delivery("evt_a", "/a")).unwrap();
    let other = store.insert_request(&delivery("evt_b", "/b")).unwrap();
    let second = store.insert_request(&delivery("evt_a", "/a")).unwrap();
    let mut replay = delivery("evt_a", "/a");
    replay.replay_of = Some(first);
    let replayed = store.insert_delivery(&replay, &ok_outcome()).unwrap();

    assert_eq!(store.delivery_number(first).unwrap(), 1);
    assert_eq!(store.delivery_number(second).unwrap(), 2);
    assert_eq!(store.delivery_number(other).unwrap(), 1);
    assert_eq!(store.delivery_number(999).unwrap(), 0);
    assert_eq!(store.get(first).unwrap().unwrap().delivery_count, 2);
    assert_eq!(
        store.newest_with_event_key("evt_a").unwrap().map(|p| p.id),
        Some(second)
    );
    assert_eq!(store.newest_with_event_key("evt_zzz").unwrap(), None);

    let listed: Vec<i64> = store
        .list(&ListQuery::default())
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(listed, vec![second, other, first], "replays hidden, newest first");
    let all = store
        .list(&ListQuery {
            include_replays: true,
            ..ListQuery::default()
        })
        .unwrap();
    assert_eq!(all[0].id, replayed);
    assert_eq!(all[0].replay_of, Some(first));
    assert_eq!(all[0].delivery_count, 2, "a replay does not count as a delivery");
}

#[test]
fn listing_pages_and_filters() {
    let store = Store::in_memory().unwrap();
    let mut ids = Vec::new();
    for n in 0..10 {
        let mut d = delivery(&format!("evt_{n}"), &format!("/hooks/{n}"));
        if n % 2 == 1 {
            d.provider = Some("github".into());
            d.request_body = format!("{{\"action\":\"opened_{n}\"}}").into_bytes();
        }
        ids.push(store.insert_request(&d).unwrap());
    }
    let page = |before| ListQuery {
        limit: Some(4),
        before_id: before,
        ..ListQuery::default()
    };
    let first = store.list(&page(None)).unwrap();
    let second = store.list(&page(first.last().map(|s| s.id))).unwrap();
    let third = store.list(&page(second.last().map(|s| s.id))).unwrap();
    let seen: Vec<i64> = [first, second, third].concat().iter().map(|s| s.id).collect();
    assert_eq!(seen, ids.iter().rev().copied().collect::<Vec<_>>());

    let github = ListQuery {
        providers: vec!["github".into()],
        ..ListQuery::default()
    };
    assert_eq!(store.count(&github).unwrap(), 5);
    // Several providers are any of them; `unknown` the deliveries none was
    // recognised in, and the others here are Stripe's.
    let either = |providers: &[&str]| ListQuery {
        providers: providers.iter().map(|p| (*p).to_owned()).collect(),
        ..ListQuery::default()
    };
    assert_eq!(store.count(&either(&["stripe", "github"])).unwrap(), 10);
    assert_eq!(store.count(&either(&["github", "unknown"])).unwrap(), 5);
    let beside = Store::in_memory().unwrap();
    for provider in [None, Some("github"), Some("stripe")] {
        let d = NewDelivery {
            provider: provider.map(str::to_owned),
            ..delivery("evt_p", "/")
        };
        beside.insert_request(&d).unwrap();
    }
    assert_eq!(beside.count(&either(&["github", "unknown"])).unwrap(), 2);
    assert!(store
        .list(&github)
        .unwrap()
        .iter()
        .all(|s| s.provider.as_deref() == Some("github")));
    let by_key = ListQuery {
        event_key: Some("evt_3".into()),
        ..ListQuery::default()
    };
    assert_eq!(store.list(&by_key).unwrap()[0].id, ids[3]);
    let search = |text: &str| {
        let q = ListQuery {
            search: Some(text.into()),
            ..ListQuery::default()
        };
        store.list(&q).unwrap().iter().map(|s| s.id).collect::<Vec<_>>()
    };
    assert_eq!(search("OPENED_7"), vec![ids[7]], "body text, case-insensitive");
    assert_eq!(search("/hooks/4"), vec![ids[4]]);
    assert_eq!(search("100%"), Vec::<i64>::new(), "LIKE wildcards match themselves");
    assert_eq!(store.count(&ListQuery::default()).unwrap(), 10);
    let newer = ListQuery {
        after_id: Some(ids[7]),
        ..ListQuery::default()
    };
    let newer: Vec<i64> = store.list(&newer).unwrap().iter().map(|s| s.id).collect();
    assert_eq!(newer, vec![ids[9], ids[8]]);
}

/// Text past a NUL byte, as in a binary body, is found too: read as
/// text, a body would end at its first NUL. Bodies stored once for many
/// rows (64 KiB and more) as well as those kept in their rows.
#[test]
fn search_finds_text_past_a_nul_byte_in_a_body() {
    let store = Store::in_memory().unwrap();
    let mut small = delivery("evt_bin", "/bin/small");
    small.request_body = b"prefix\0findmetwo".to_vec();
    let mut large = delivery("evt_bin_large", "/bin/large");
    large.request_body = (0..=255u8).cycle().take(128 * 1024).collect();
    large.request_body.extend_from_slice(b"findmeone");
    let small = store.insert_request(&small).unwrap();
    let large = store.insert_request(&large).unwrap();
    let search = |text: &str| {
        let q = ListQuery {
            search: Some(text.into()),
            ..ListQuery::default()
        };
        store.list(&q).unwrap().iter().map(|s| s.id).collect::<Vec<_>>()
    };
    assert_eq!(search("findmetwo"), vec![small]);
    assert_eq!(search("findmeone"), vec![large]);
    assert_eq!(search("prefix"), vec![small], "text before the NUL, as before");
}

/// The handler's own words find its delivery: an error message in its
/// answer's body (kept in the row, or once in `bodies` when large), or a
/// header value, the request's or the answer's.
#[test]
fn search_finds_the_answer_body_and_header_values() {
    let store = Store::in_memory().unwrap();
    let failed = Outcome {
        status: Some(500),
        response_body: b"boom: Internal Error in ledger".to_vec(),
        ..ok_outcome()
    };
    let failed = store.insert_delivery(&delivery("evt_a", "/a"), &failed).unwrap();
    let mut large = ok_outcome();
    large.response_body = vec![b'.'; 128 * 1024];
    large.response_body.extend_from_slice(b"deep in a large answer");
    large
        .response_headers
        .push(Header::new("x-request-id", "req_answer_77"));
    let large = store.insert_delivery(&delivery("evt_b", "/b"), &large).unwrap();
    let mut shop = delivery("evt_c", "/c");
    shop.request_headers
        .push(Header::new("x-shopify-shop-domain", "example.myshopify.com"));
    let shop = store.insert_delivery(&shop, &ok_outcome()).unwrap();
    let search = |text: &str| {
        let q = ListQuery {
            search: Some(text.into()),
            ..ListQuery::default()
        };
        store.list(&q).unwrap().iter().map(|s| s.id).collect::<Vec<_>>()
    };
    assert_eq!(
        search("\"internal error\""),
        vec![failed],
        "case-insensitive, as a request body is"
    );
    assert_eq!(search("\"large answer\""), vec![large]);
    assert_eq!(search("req_answer_77"), vec![large]);
    assert_eq!(search("EXAMPLE.myshopify"), vec![shop]);
    assert_eq!(search("nowhere"), Vec::<i64>::new());
}

#[test]
fn a_statement_stops_once_its_answer_is_not_wanted() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let store = Store::in_memory().unwrap();
    for n in 0..2000 {
        store
            .insert_request(&delivery(&format!("evt_{n}"), &format!("/hooks/{n}")))
            .unwrap();
    }
    let search = ListQuery {
        search: Some("nowhere to be found".into()),
        ..ListQuery::default()
    };
    let stopped = Arc::new(AtomicBool::new(false));
    let check = stopped.clone();
    store.stop_when(move || check.load(Ordering::Relaxed));
    assert_eq!(store.count(&search).unwrap(), 0, "runs while wanted");
    stopped.store(true, Ordering::Relaxed);
    let err = store.count(&search).unwrap_err();
    assert!(err.is_stopped(), "{err}");
    assert!(store.list(&search).unwrap_err().is_stopped());
    stopped.store(false, Ordering::Relaxed);
    assert_eq!(store.list(&search).unwrap().len(), 0, "and runs again once wanted");
}

#[test]
fn page_ends_are_where_keyset_pages_end() {
    let store = Store::in_memory().unwrap();
    for n in 0..23 {
        let mut d = delivery(&format!("evt_{n}"), "/hook");
        if n % 2 == 1 {
            d.provider = Some("github".into());
        }
        store.insert_request(&d).unwrap();
    }
    // Paged by 5 from the newest: 23..=19, 18..=14, 13..=9, 8..=4, then 3..=1.
    let every = ListQuery::default();
    assert_eq!(store.page_ends(&every, 5).unwrap(), [19, 14, 9, 4]);
    let below = ListQuery {
        before_id: Some(14),
        ..ListQuery::default()
    };
    assert_eq!(store.page_ends(&below, 5).unwrap(), [9, 4]);
    let github = ListQuery {
        providers: vec!["github".into()],
        ..ListQuery::default()
    };
    // Odd-numbered deliveries have even ids: 22, 20, … 2.
    assert_eq!(store.page_ends(&github, 5).unwrap(), [14, 4]);
    assert_eq!(store.page_ends(&github, 20).unwrap(), Vec::<i64>::new());
}

#[test]
fn latest_is_the_newest_of_the_provider_whose_path_matches() {
    let store = Store::in_memory().unwrap();
    let stripe = store
        .insert_request(&delivery("evt_1", "/webhooks/stripe?x=1"))
        .unwrap();
    let mut gh = delivery("g1", "/webhooks/github");
    gh.provider = Some("github".into());
    let github = store.insert_request(&gh).unwrap();
    let latest = |providers: &[&str], path: Option<&str>| {
        let query = ListQuery {
            providers: providers.iter().map(|&p| p.to_owned()).collect(),
            path: path.map(str::to_owned),
            ..ListQuery::default()
        };
        store.latest(&query).unwrap().map(|p| p.id)
    };
    assert_eq!(latest(&[], None), Some(github));
    assert_eq!(latest(&["stripe"], None), Some(stripe));
    assert_eq!(latest(&["stripe", "github"], None), Some(github), "either of two");
    assert_eq!(latest(&[], Some("/webhooks/str*")), Some(stripe));
    assert_eq!(latest(&[], Some("/nope/*")), None);
    assert_eq!(latest(&[super::UNKNOWN_PROVIDER], None), None);
    let mut plain = delivery("", "/internal");
    plain.provider = None;
    let plain = store.insert_request(&plain).unwrap();
    store.insert_request(&gh).unwrap();
    assert_eq!(
        latest(&[super::UNKNOWN_PROVIDER], None),
        Some(plain),
        "the newest with no provider recognised"
    );
}

/// A delivery whose body was not stored whole (a request the relay turned
/// away, its body never read) is passed over for an older one of the same
/// event stored whole, and named; with none whole, it is the choice.
#[test]
fn replay_picks_the_newest_delivery_stored_whole_and_names_one_passed_over() {
    let store = Store::in_memory().unwrap();
    let whole = store.insert_request(&delivery("evt_cut", "/hooks")).unwrap();
    let mut turned_away = delivery("evt_cut", "/hooks");
    turned_away.request_body = Vec::new();
    turned_away.request_body_size = 40;
    let cut = store.insert_request(&turned_away).unwrap();
    let pick = Pick {
        id: whole,
        newer_cut: Some(cut),
    };
    assert_eq!(store.newest_with_event_key("evt_cut").unwrap(), Some(pick));
    assert_eq!(store.latest(&ListQuery::default()).unwrap(), Some(pick));
    let mut only = turned_away.clone();
    only.event_key = "evt_only_cut".into();
    let only = store.insert_request(&only).unwrap();
    let alone = Pick {
        id: only,
        newer_cut: None,
    };
    assert_eq!(store.newest_with_event_key("evt_only_cut").unwrap(), Some(alone));
    // A large body kept in `bodies` is whole too.
    let mut large = delivery("evt_large", "/hooks");
    large.request_body = vec![b'x'; 300 * 1024];
    large.request_body_size = large.request_body.len() as u64;
    let large = store.insert_request(&large).unwrap();
    assert_eq!(store.latest(&ListQuery::default()).unwrap().map(|p| p.id), Some(large));
}

#[test]
fn an_id_pruning_removed_is_never_given_to_another_delivery() {
    let store = Store::in_memory().unwrap();
    let ids: Vec<i64> = (0..3)
        .map(|n| store.insert_request(&delivery(&format!("evt_{n}"), "/")).unwrap())
        .collect();
    assert_eq!(store.prune(i64::MAX, |_| {}).unwrap().deliveries, 3);
    // Pruning an empty history keeps the mark of what came before.
    assert_eq!(store.prune(i64::MAX, |_| {}).unwrap().deliveries, 0);
    let next = store.insert_request(&delivery("evt_after", "/")).unwrap();
    assert_eq!(next, ids[2] + 1, "numbered past the pruned ids");
    let replayed = store
        .insert_delivery(&delivery("evt_again", "/"), &ok_outcome())
        .unwrap();
    assert_eq!(replayed, next + 1, "and on from there");
    let marks: i64 = store
        .conn
        .query_row("SELECT count(*) FROM retired_ids", [], |r| r.get(0))
        .unwrap();
    assert_eq!(marks, 1);
}

/// A prune with nothing to delete asks for no lock: run by cron beside a
/// busy tunnel, it neither waits on the tunnel's writes nor fails on them.
#[test]
fn a_prune_with_nothing_to_delete_takes_no_lock() {
    let dir = ScratchDir::new("prune-nothing");
    let path = dir.0.join("h.db");
    let store = Store::open(&path).unwrap();
    store.insert_request(&delivery("evt_new", "/")).unwrap();
    let writer = rusqlite::Connection::open(&path).unwrap();
    writer.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = std::time::Instant::now();
    assert_eq!(store.prune(1_000, |_| {}).unwrap(), Pruned::default());
    assert!(
        started.elapsed() < BUSY_TIMEOUT / 2,
        "waited for the lock: {:?}",
        started.elapsed()
    );
    writer.execute_batch("ROLLBACK").unwrap();
}

/// A prune lets go of the lock between its batches long enough for a
/// tunnel's writer to store a delivery: the writer waits for a batch, not
/// for the whole prune, and never tells the user the history refuses
/// writes.
#[test]
fn a_writer_gets_in_between_the_batches_of_a_prune() {
    let dir = ScratchDir::new("prune-beside-a-writer");
    let path = dir.0.join("h.db");
    let store = Store::open(&path).unwrap();
    let old = 50 * write::PRUNE_BATCH;
    store
        .write(|store| {
            for n in 0..old {
                let mut d = delivery(&format!("evt_{n}"), "/");
                d.received_at_ms = 1_000;
                store.insert_request_row(&d)?;
            }
            Ok(())
        })
        .unwrap();
    let tunnel = Store::open(&path).unwrap();
    let pruning = std::thread::spawn(move || {
        let pruned = store.prune(5_000, |_| {}).unwrap();
        (pruned, std::time::Instant::now())
    });
    let all = ListQuery::default();
    while tunnel.count(&all).unwrap() == old as u64 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let mut new = delivery("evt_new", "/");
    new.received_at_ms = 9_000;
    tunnel.insert_request(&new).unwrap();
    let stored_at = std::time::Instant::now();
    let (pruned, done_at) = pruning.join().unwrap();
    assert_eq!(pruned.deliveries, old);
    assert!(stored_at < done_at, "the writer waited for the whole prune");
    assert_eq!(tunnel.count(&all).unwrap(), 1);
}

#[test]
fn prune_removes_old_deliveries_and_their_runs() {
    let store = Store::in_memory().unwrap();
    let mut old = delivery("evt_old", "/");
    old.received_at_ms = 1_000;
    let old_id = store.insert_request(&old).unwrap();
    let new_id = store.insert_request(&delivery("evt_new", "/")).unwrap();
    let run = ReplayRun {
        id: 0,
        delivery_id: old_id,
        started_at_ms: 2_000,
        times: 3,
        concurrency: 1,
        idempotent: Some(true),
        summary: "✓ idempotent".into(),
        report_json: "{}".into(),
    };
    let run_id = store.insert_replay_run(&run).unwrap();
    assert_eq!(
        store.replay_runs(old_id).unwrap(),
        vec![ReplayRun { id: run_id, ..run }]
    );

    let mut twin = delivery("evt_new", "/");
    twin.received_at_ms = 1_500;
    store.insert_request(&twin).unwrap();
    assert_eq!(store.get(new_id).unwrap().unwrap().delivery_count, 2);
    // A replay attempt, sent after the cut-off, goes with its original.
    let mut attempt = delivery("evt_old", "/");
    attempt.replay_of = Some(old_id);
    attempt.received_at_ms = 9_000;
    store.insert_request(&attempt).unwrap();
    let foreseen = store.prunable(5_000).unwrap();
    assert_eq!((foreseen.deliveries, foreseen.replay_attempts), (2, 1));
    assert!(store.get(old_id).unwrap().is_some(), "a count deletes nothing");
    let pruned = store.prune(5_000, |_| {}).unwrap();
    assert_eq!((pruned.deliveries, pruned.replay_attempts), (2, 1));
    assert_eq!(
        store.get(new_id).unwrap().unwrap().delivery_count,
        1,
        "counts follow pruning"
    );
    assert_eq!(store.get(old_id).unwrap(), None);
    assert!(store.get(new_id).unwrap().is_some());
    assert!(store.replay_runs(old_id).unwrap().is_empty());
    assert_eq!(store.prune(5_000, |_| {}).unwrap().deliveries, 0);
    let groups: i64 = store
        .conn
        .query_row("SELECT count(*) FROM event_counts", [], |r| r.get(0))
        .unwrap();
    assert_eq!(groups, 1, "emptied groups are removed");
}

/// How many large bodies the history stores apart from their rows.
fn bodies(store: &Store) -> i64 {
    store
        .conn
        .query_row("SELECT count(*) FROM bodies", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_large_body_delivered_again_is_stored_once_and_read_back_whole() {
    let store = Store::in_memory().unwrap();
    let mut big = delivery("evt_big", "/");
    big.request_body = format!(
        "{{\"id\":\"evt_big\",\"pad\":\"{}needle\"}}",
        "x".repeat(write::SHARED_BODY)
    )
    .into_bytes();
    big.request_body_size = big.request_body.len() as u64;
    let mut retry = big.clone();
    retry.received_at_ms = 9_000;
    let answer = Outcome {
        response_body: vec![b'y'; write::SHARED_BODY + 1],
        response_body_size: write::SHARED_BODY as u64 + 1,
        ..ok_outcome()
    };
    big.received_at_ms = 1_000;
    let first = store.insert_delivery(&big, &answer).unwrap();
    let second = store.insert_delivery(&retry, &answer).unwrap();
    let small = store
        .insert_delivery(&delivery("evt_small", "/"), &ok_outcome())
        .unwrap();
    assert_eq!(
        bodies(&store),
        2,
        "one request body and one answer body, each stored once"
    );

    for id in [first, second] {
        let got = store.get(id).unwrap().unwrap();
        assert!(
            got.request.request_body == big.request_body,
            "request body of #{id} intact"
        );
        assert!(
            got.outcome.unwrap().response_body == answer.response_body,
            "answer body of #{id} intact"
        );
    }
    assert_eq!(
        store.get(small).unwrap().unwrap().request.request_body,
        b"{\"id\":\"evt_small\"}"
    );
    let found = store
        .list(&ListQuery {
            search: Some("needle".into()),
            ..ListQuery::default()
        })
        .unwrap();
    assert_eq!(
        found.iter().map(|s| s.id).collect::<Vec<_>>(),
        vec![second, first],
        "search reads shared bodies"
    );

    assert_eq!(store.prune(5_000, |_| {}).unwrap().deliveries, 1);
    assert_eq!(bodies(&store), 2, "still used by the retry");
    assert!(store.get(second).unwrap().unwrap().request.request_body == big.request_body);
    assert_eq!(store.prune(10_000, |_| {}).unwrap().deliveries, 1);
    assert_eq!(bodies(&store), 0, "gone with the last delivery using them");
}

/// A large body goes in the same transaction as the last delivery using
/// it: a prune killed between its batches leaves no payload behind (they
/// carry tokens), and one an older version left goes with the next prune,
/// even one with no delivery to delete.
#[test]
fn a_prune_cut_off_between_batches_leaves_no_body_behind() {
    let store = Store::in_memory().unwrap();
    let large = |key: &str, at: i64| {
        let mut d = delivery(key, "/");
        d.request_body = format!("{{\"id\":\"{key}\",\"token\":\"{}\"}}", "s".repeat(write::SHARED_BODY)).into_bytes();
        d.request_body_size = d.request_body.len() as u64;
        d.received_at_ms = at;
        d
    };
    let answer = Outcome {
        response_body: vec![b'y'; write::SHARED_BODY + 1],
        response_body_size: write::SHARED_BODY as u64 + 1,
        ..ok_outcome()
    };
    store.insert_delivery(&large("evt_old", 1_000), &answer).unwrap();
    store.insert_delivery(&large("evt_new", 9_000), &ok_outcome()).unwrap();
    assert_eq!(bodies(&store), 3);
    // The batches alone, as a prune killed before anything after them ran.
    let deleted = store
        .delete_in_batches("SELECT id FROM deliveries WHERE received_at_ms < ?1 LIMIT ?2", 5_000)
        .unwrap();
    assert_eq!(
        (deleted, bodies(&store)),
        (1, 1),
        "the old delivery's two bodies went with it"
    );

    // Left by a prune that deleted deliveries alone, as versions before did.
    store.conn.execute("DELETE FROM deliveries", []).unwrap();
    assert_eq!(bodies(&store), 1);
    assert_eq!(
        store.prune(5_000, |_| {}).unwrap(),
        Pruned::default(),
        "no delivery to delete"
    );
    assert_eq!(bodies(&store), 0, "the body no delivery used is gone all the same");
}

/// An answer that comes after a prune removed its delivery (a handler
/// slower than the prune) leaves no large body behind either.
#[test]
fn a_large_answer_to_a_pruned_delivery_is_not_kept() {
    let store = Store::in_memory().unwrap();
    let mut d = delivery("evt_slow", "/");
    d.received_at_ms = 1_000;
    let id = store.insert_request(&d).unwrap();
    assert_eq!(store.prune(5_000, |_| {}).unwrap().deliveries, 1);
    let answer = Outcome {
        response_body: vec![b's'; write::SHARED_BODY],
        response_body_size: write::SHARED_BODY as u64,
        ..ok_outcome()
    };
    store.record_outcome(id, &answer).unwrap();
    assert_eq!(bodies(&store), 0);
    assert!(store.get(id).unwrap().is_none());
}

#[test]
fn long_bodies_are_cut_with_their_size_kept() {
    let store = Store::in_memory().unwrap();
    let mut d = delivery("evt_big", "/");
    d.request_body = vec![b'x'; MAX_STORED_BODY + 10];
    d.request_body_size = d.request_body.len() as u64;
    let id = store.insert_request(&d).unwrap();
    let stored = store.get(id).unwrap().unwrap().request;
    assert_eq!(stored.request_body.len(), MAX_STORED_BODY);
    assert_eq!(stored.request_body_size, MAX_STORED_BODY as u64 + 10);
    assert!(stored.request_truncated());
}

#[test]
fn a_new_file_is_private_and_reopens() {
    let dir = ScratchDir::new("store-open");
    let path = dir.0.join("nested/dir/history.db");
    let id = Store::open(&path)
        .unwrap()
        .insert_request(&delivery("evt_1", "/"))
        .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let again = Store::open(&path).unwrap();
    assert!(again.get(id).unwrap().is_some());
}

#[test]
fn a_text_file_is_not_a_database() {
    let dir = ScratchDir::new("store-text");
    let path = dir.0.join("notes.txt");
    std::fs::write(&path, "these are my notes, not SQLite at all\n".repeat(40)).unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::NotADatabase { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("notes.txt") && !message.contains('\n'), "{message}");
}

#[test]
fn another_programs_database_is_never_written_to() {
    let dir = ScratchDir::new("store-foreign");
    let cases: [(&str, &str); 3] = [
        ("tables.db", "CREATE TABLE orders (id INTEGER PRIMARY KEY)"),
        (
            "versioned.db",
            "CREATE TABLE orders (id INTEGER PRIMARY KEY); PRAGMA user_version = 3",
        ),
        ("branded.db", "PRAGMA application_id = 7"),
    ];
    for (name, sql) in cases {
        let path = dir.0.join(name);
        rusqlite::Connection::open(&path).unwrap().execute_batch(sql).unwrap();
        let before = std::fs::read(&path).unwrap();
        for err in [
            Store::open(&path).unwrap_err(),
            Store::open_existing(&path).unwrap_err(),
        ] {
            assert!(matches!(err, StoreError::Foreign { .. }), "{name}: {err:?}");
        }
        assert!(std::fs::read(&path).unwrap() == before, "{name} unchanged");
    }
}

#[test]
fn an_empty_file_becomes_a_private_history_only_for_a_writer() {
    let dir = ScratchDir::new("store-empty");
    let path = dir.0.join("history.db");
    std::fs::write(&path, b"").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let err = Store::open_existing(&path).unwrap_err();
    assert!(matches!(err, StoreError::Empty { .. }), "{err:?}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "a reader writes nothing");
    drop(Store::open(&path).unwrap());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "owner-only, as a history PortPreview creates");
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    assert_eq!(schema::contents(&conn).unwrap(), schema::Contents::History);
    Store::open_existing(&path).unwrap();
}

/// A history whose schema version was set back by hand cannot be
/// upgraded again: one line says so, without the SQL of the schema.
#[test]
fn a_history_that_cannot_be_upgraded_is_refused_in_one_line() {
    let dir = ScratchDir::new("store-not-upgraded");
    let path = dir.0.join("history.db");
    drop(Store::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", 1).unwrap();
    drop(conn);
    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::NotUpgraded { .. }), "{err:?}");
    let said = err.to_string();
    assert!(!said.contains('\n') && !said.contains("CREATE"), "{said}");
    assert!(said.contains("already exists"), "{said}");
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, 1, "left as it was");
}

#[test]
fn a_newer_database_is_refused_untouched() {
    let dir = ScratchDir::new("store-newer");
    let path = dir.0.join("history.db");
    drop(Store::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", schema::SCHEMA_VERSION + 5)
        .unwrap();
    drop(conn);
    match Store::open(&path).unwrap_err() {
        StoreError::TooNew { found, supported, .. } => {
            assert_eq!((found, supported), (schema::SCHEMA_VERSION + 5, schema::SCHEMA_VERSION));
        }
        other => panic!("expected TooNew, got {other:?}"),
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, schema::SCHEMA_VERSION + 5, "never downgraded");
}

#[test]
fn damaged_pages_are_reported_as_corrupt() {
    let dir = ScratchDir::new("store-corrupt");
    let path = dir.0.join("history.db");
    {
        let store = Store::open(&path).unwrap();
        for n in 0..50 {
            let mut d = delivery(&format!("evt_{n}"), "/");
            d.request_body = vec![b'x'; 3000];
            store.insert_request(&d).unwrap();
        }
    }
    // Keep page 1 (the schema) and overwrite every page after it.
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() > 8192, "{} bytes", bytes.len());
    bytes[4096..].fill(0xa5);
    std::fs::write(&path, bytes).unwrap();
    let err = Store::open(&path)
        .and_then(|store| store.list(&ListQuery::default()).map(|_| ()))
        .unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("history.db"), "{err}");
}

/// A lookup a damaged interior page sends to the wrong leaf finds no row,
/// and SQLite says nothing: `lookup`, which `show`, `export` and the TUI
/// read through, tells that from an id the history does not hold.
#[test]
fn a_lookup_a_damaged_page_leads_astray_is_corrupt_not_missing() {
    let dir = ScratchDir::new("store-astray");
    let path = dir.0.join("history.db");
    let store = Store::open(&path).unwrap();
    for n in 0..300 {
        store.insert_request(&delivery(&format!("evt_{n}"), "/")).unwrap();
    }
    assert!(matches!(store.lookup(1), Ok(Some(_))));
    assert!(matches!(store.lookup(9_999), Ok(None)), "an id never held is missing");
    let root: u64 = (store.conn)
        .query_row(
            "SELECT rootpage FROM sqlite_master WHERE name = 'deliveries'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    drop(store);
    // The root's first cell sends rowid 1 left by its key; 0 sends it on.
    let mut bytes = std::fs::read(&path).unwrap();
    let page = usize::try_from((root - 1) * 4096).unwrap();
    assert_eq!(bytes[page], 5, "an interior table page");
    let key = page + usize::from(u16::from_be_bytes([bytes[page + 12], bytes[page + 13]])) + 4;
    let len = bytes[key..].iter().position(|b| b & 0x80 == 0).unwrap() + 1;
    bytes[key..key + len - 1].fill(0x80);
    bytes[key + len - 1] = 0;
    std::fs::write(&path, &bytes).unwrap();
    let store = Store::open_existing(&path).unwrap();
    assert!(
        matches!(store.get(1), Ok(None)),
        "SQLite finds nothing, and says nothing"
    );
    let err = store.lookup(1).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("its deliveries table is damaged"), "{err}");
}

#[test]
fn answers_are_searched_pruned_and_replaced_with_their_delivery() {
    let store = Store::in_memory().unwrap();
    let mut old = delivery("evt_old", "/");
    old.received_at_ms = 1_000;
    let old_id = store.insert_request(&old).unwrap();
    let new_id = store.insert_request(&delivery("evt_new", "/")).unwrap();
    store.record_outcome(old_id, &ok_outcome()).unwrap();
    let teapot = Outcome {
        status: Some(418),
        ..ok_outcome()
    };
    store.record_outcome(new_id, &ok_outcome()).unwrap();
    store.record_outcome(new_id, &teapot).unwrap();
    assert_eq!(
        store.get(new_id).unwrap().unwrap().outcome,
        Some(teapot),
        "the last answer wins"
    );
    let by_status = ListQuery {
        search: Some("418".into()),
        ..ListQuery::default()
    };
    assert_eq!(store.count(&by_status).unwrap(), 1);
    assert_eq!(store.list(&by_status).unwrap()[0].id, new_id);

    assert_eq!(store.prune(5_000, |_| {}).unwrap().deliveries, 1);
    let answers = |store: &Store| -> i64 {
        store
            .conn
            .query_row("SELECT count(*) FROM outcomes", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(answers(&store), 1, "a pruned delivery takes its answer along");
    store
        .record_outcome(old_id, &ok_outcome())
        .expect("an answer arriving after its delivery was pruned is dropped, not an error");
    assert_eq!(answers(&store), 1);
    assert_eq!(store.get(old_id).unwrap(), None);
}

#[test]
fn a_reading_open_of_a_locked_history_reads_at_once_and_leaves_the_inbox_for_later() {
    let dir = ScratchDir::new("store-read-locked");
    let path = dir.0.join("history.db");
    Store::open(&path)
        .unwrap()
        .insert_request(&delivery("evt_stored", "/"))
        .unwrap();
    {
        let mut dead = inbox::Inbox::create(&path, &[]).unwrap();
        dead.append(&mut delivery("evt_orphaned", "/")).unwrap();
        // Dropped without discard, as when its process is killed.
    }
    // Another process is writing and keeps the lock.
    let writer = rusqlite::Connection::open(&path).unwrap();
    writer.execute_batch("BEGIN IMMEDIATE").unwrap();

    let started = std::time::Instant::now();
    let reader = Store::open_existing(&path).expect("a reader opens a locked history");
    let keys: Vec<String> = reader
        .list(&ListQuery::default())
        .unwrap()
        .into_iter()
        .map(|s| s.event_key)
        .collect();
    assert!(
        started.elapsed() < BUSY_TIMEOUT / 2,
        "the reader did not wait for the lock: {:?}",
        started.elapsed()
    );
    assert_eq!(keys, ["evt_stored"]);
    assert_eq!(inbox::orphans(&path).len(), 1, "the inbox waits for the lock");

    writer.execute_batch("ROLLBACK").unwrap();
    let keys: Vec<String> = Store::open_existing(&path)
        .unwrap()
        .list(&ListQuery::default())
        .unwrap()
        .into_iter()
        .map(|s| s.event_key)
        .collect();
    assert_eq!(keys, ["evt_orphaned", "evt_stored"], "moved in once the lock is free");
    assert!(inbox::orphans(&path).is_empty());
}

#[test]
fn search_words_match_statuses_as_statuses_and_failures_by_err() {
    let store = Store::in_memory().unwrap();
    let ok = store
        .insert_delivery(&delivery("evt_502abc", "/a"), &ok_outcome())
        .unwrap();
    let bad_gateway = Outcome {
        status: Some(502),
        ..ok_outcome()
    };
    let broken = store.insert_delivery(&delivery("evt_2", "/b"), &bad_gateway).unwrap();
    let down = Outcome {
        status: None,
        error: Some("connection refused by 127.0.0.1:3000".into()),
        ..ok_outcome()
    };
    let refused = store.insert_delivery(&delivery("evt_3", "/c"), &down).unwrap();
    // Answered, though the caller left before the body's end: the table
    // shows its 200, and `err` does not take it for a failure.
    let left = Outcome {
        error: Some("the caller went away during the answer".into()),
        ..ok_outcome()
    };
    let answered_late = store.insert_delivery(&delivery("evt_4", "/d"), &left).unwrap();
    let found = |search: &str| -> Vec<i64> {
        let query = ListQuery {
            search: Some(search.into()),
            ..ListQuery::default()
        };
        store.list(&query).unwrap().iter().map(|s| s.id).collect()
    };
    assert_eq!(found("502"), vec![broken], "a status, not a hash holding 502");
    assert_eq!(found("5xx"), vec![broken]);
    assert_eq!(found("2XX"), vec![answered_late, ok]);
    assert_eq!(found("err"), vec![refused]);
    assert_eq!(found("went away"), vec![answered_late], "the error's text");
    assert_eq!(found("refused"), vec![refused], "the error's text");
    assert_eq!(found("evt_502"), vec![ok], "the event key, as text");
    assert_eq!(found("/b 502"), vec![broken], "every word must match");
    assert_eq!(found("/a 502"), Vec::<i64>::new());
    assert_eq!(found("post"), vec![answered_late, refused, broken, ok], "the method");
    // In quotes, a word is text, and spaces are part of it.
    assert_eq!(found("\"502\""), vec![ok], "the event key holding 502");
    assert_eq!(found("\"err\""), Vec::<i64>::new(), "no error's text holds err");
    assert_eq!(found("\"went away\" 2xx"), vec![answered_late]);
    assert_eq!(found("\"away went\""), Vec::<i64>::new(), "the words in that order");
    assert_eq!(
        found("\"refused by"),
        vec![refused],
        "a quote left open runs to the end"
    );
    assert_eq!(found("\"\" 5xx"), vec![broken], "empty quotes ask nothing");
}

/// Statuses (any of them), a path glob and a start time narrow a listing
/// in SQL, so its limit, its pages and its count are of the matches.
#[test]
fn status_path_and_time_filters_combine_and_count_in_sql() {
    let store = Store::in_memory().unwrap();
    let answered = |status: Option<u16>| Outcome {
        status,
        error: status.is_none().then(|| "could not reach 127.0.0.1:3000".to_string()),
        ..ok_outcome()
    };
    let mut ids = Vec::new();
    for (n, status) in [Some(200), Some(404), Some(500), None, Some(502), Some(503)]
        .into_iter()
        .enumerate()
    {
        let mut d = delivery(&format!("evt_{n}"), &format!("/webhooks/{n}?token=s{n}"));
        d.received_at_ms = 1_700_000_000_000 + n as i64 * 1000;
        if n == 5 {
            d.path = "/other/5".into();
        }
        ids.push(store.insert_delivery(&d, &answered(status)).unwrap());
    }
    let listed = |q: ListQuery| store.list(&q).unwrap().iter().map(|s| s.id).collect::<Vec<_>>();
    let failures = ListQuery {
        status: vec![StatusWord::Class(5), StatusWord::Failed],
        ..ListQuery::default()
    };
    assert_eq!(listed(failures.clone()), [ids[5], ids[4], ids[3], ids[2]]);
    let newest_two = ListQuery {
        limit: Some(2),
        ..failures.clone()
    };
    assert_eq!(
        listed(newest_two),
        [ids[5], ids[4]],
        "the newest failures, not failures among the newest"
    );
    let under_webhooks = ListQuery {
        path: Some("/webhooks/*".into()),
        ..failures.clone()
    };
    assert_eq!(listed(under_webhooks.clone()), [ids[4], ids[3], ids[2]]);
    assert_eq!(store.count(&under_webhooks).unwrap(), 3);
    let recent = ListQuery {
        received_since_ms: Some(1_700_000_003_000),
        ..under_webhooks.clone()
    };
    assert_eq!(listed(recent), [ids[4], ids[3]], "received at the start time or later");
    let paged = ListQuery {
        before_id: Some(ids[4]),
        limit: Some(1),
        ..under_webhooks
    };
    assert_eq!(listed(paged), [ids[3]]);
    let masked = ListQuery {
        path: Some("/webhooks/1?token=••••••".into()),
        ..ListQuery::default()
    };
    assert_eq!(
        listed(masked),
        [ids[1]],
        "a path copied from the table, its secret masked"
    );
    let exact = ListQuery {
        status: vec![StatusWord::Exact(404)],
        path: Some("/webhooks/1".into()),
        ..ListQuery::default()
    };
    assert_eq!(listed(exact), [ids[1]], "the path without its query");
}

#[test]
fn a_history_opened_as_an_unchanging_file_is_found_whatever_its_name() {
    let dir = ScratchDir::new("odd-name");
    let path = dir.0.join("ci #12 ?50% été.db");
    Store::open(&path)
        .unwrap()
        .insert_delivery(&delivery("evt_odd", "/hook"), &ok_outcome())
        .unwrap();
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(immutable_uri(&path), flags).unwrap();
    let store = Store::setup(conn, path.clone(), Opening::ReadOnly).unwrap();
    let rows = store.list(&ListQuery::default()).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].event_key, "evt_odd");
    assert!(
        store.prune(i64::MAX, |_| {}).is_err(),
        "a read-only history refuses writes rather than pretend"
    );
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 1, "no file made beside it");
}

#[test]
fn a_disk_io_error_names_a_full_disk_as_its_likely_cause() {
    // As SQLite reports them, with its own words.
    let failure =
        |code, words: &str| rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), Some(words.to_owned()));
    let io = failure(rusqlite::ffi::SQLITE_IOERR, "disk I/O error");
    let line = StoreError::Sqlite(io).for_command(Path::new("h.db")).to_string();
    assert_eq!(line, "history database h.db: disk I/O error (is the disk full?)");
    let full = failure(rusqlite::ffi::SQLITE_FULL, "database or disk is full");
    let line = StoreError::Sqlite(full).for_command(Path::new("h.db")).to_string();
    assert_eq!(
        line,
        "history database h.db: the disk holding it is full, and even deleting needs room for SQLite's journal: \
         free some space on it first"
    );
}

#[test]
fn tunnels_started_together_on_a_new_history_all_open_it() {
    // Each open reads the file's kind, then sets it up: another's first
    // set-up must not show half-done (and so as another program's file),
    // nor its lock refuse the open.
    let dir = ScratchDir::new("open-together");
    for round in 0..15 {
        let path = dir.0.join(format!("h{round}.db"));
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(12));
        let opens: Vec<_> = (0..12)
            .map(|_| {
                let (path, barrier) = (path.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    Store::open(&path).map(drop)
                })
            })
            .collect();
        for open in opens {
            if let Err(err) = open.join().unwrap() {
                panic!("round {round}: {err}");
            }
        }
    }
}

#[test]
fn a_change_to_a_history_opened_read_only_says_so_in_words() {
    let dir = ScratchDir::new("store-read-only-write");
    let path = dir.0.join("history.db");
    Store::open(&path)
        .unwrap()
        .insert_request(&delivery("evt_1", "/"))
        .unwrap();
    let read_only = Store::open_read_only(&path).unwrap();
    assert!(read_only.is_read_only() && !Store::open(&path).unwrap().is_read_only());
    let err = read_only.insert_request(&delivery("evt_2", "/")).unwrap_err();
    assert!(matches!(err, StoreError::WriteRefused { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("is read-only for this user, and this would change it"),
        "{err}"
    );
}

#[test]
fn an_event_key_cut_as_the_table_shows_it_matches_the_keys_it_begins() {
    let store = Store::in_memory().unwrap();
    for key in ["evt_1abc", "evt_1abd", "evt_2abc"] {
        store.insert_request(&delivery(key, "/")).unwrap();
    }
    let keys = |event: &str| -> Vec<String> {
        let q = ListQuery {
            event_key: Some(event.into()),
            ..ListQuery::default()
        };
        store.list(&q).unwrap().into_iter().map(|s| s.event_key).collect()
    };
    assert_eq!(keys("evt_1ab…"), ["evt_1abd", "evt_1abc"]);
    assert!(keys("evt_1ab").is_empty(), "without the mark, the whole key");
    assert_eq!(keys("evt_2abc"), ["evt_2abc"]);
}
