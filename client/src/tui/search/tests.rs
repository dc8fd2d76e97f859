//! The worker against a real history file.

use super::*;
use crate::store::tests::{delivery, ScratchDir};
use crate::store::Outcome;

/// A history of `n` deliveries to `/hooks/<i>`.
fn history(n: usize) -> (ScratchDir, PathBuf) {
    let dir = ScratchDir::new("tui-search");
    let path = dir.0.join("history.db");
    let store = Store::open(&path).unwrap();
    for i in 0..n {
        store
            .insert_delivery(
                &delivery(&format!("evt_{i}"), &format!("/hooks/{i}")),
                &Outcome::default(),
            )
            .unwrap();
    }
    (dir, path)
}

fn search(ticket: u64, text: &str) -> Order {
    Order {
        ticket,
        job: Some(Job::Search { search: text.into() }),
    }
}

#[test]
fn a_search_answers_its_first_page_then_the_count() {
    let (_dir, path) = history(250);
    let (worker, mut found) = SearchWorker::start(path, Store::open_existing).unwrap();
    worker.send(search(1, "hooks"));
    let first = found.blocking_recv().unwrap();
    assert_eq!(first.ticket, 1);
    let Answer::Rows(rows) = first.answer else {
        panic!("{first:?}")
    };
    assert_eq!(rows.len(), PAGE_SIZE);
    assert_eq!(rows[0].path, "/hooks/249", "newest first");
    let total = found.blocking_recv().unwrap();
    assert_eq!(
        total,
        Found {
            ticket: 1,
            answer: Answer::Total(250)
        }
    );

    // Fewer than a page: nothing left to count.
    worker.send(search(2, "/hooks/24"));
    let Answer::Rows(rows) = found.blocking_recv().unwrap().answer else {
        panic!()
    };
    assert_eq!(rows.len(), 11);
    // Stopping answers nothing; the next order is answered as usual.
    worker.send(Order { ticket: 3, job: None });
    worker.send(search(4, "/hooks/7"));
    let next = found.blocking_recv().unwrap();
    assert_eq!(next.ticket, 4, "{next:?}");
    drop(worker);
    assert!(found.blocking_recv().is_none(), "the thread is gone with the worker");
}

#[test]
fn the_oldest_rows_come_with_where_the_pages_end() {
    let (_dir, path) = history(250);
    let (worker, mut found) = SearchWorker::start(path.clone(), Store::open_existing).unwrap();
    let query = ListQuery {
        before_id: Some(151),
        ..ListQuery::default()
    };
    worker.send(Order {
        ticket: 1,
        job: Some(Job::End { query: query.clone() }),
    });
    let Answer::End { ends, tail, .. } = found.blocking_recv().unwrap().answer else {
        panic!()
    };
    assert_eq!(ends, vec![51]);
    let tail: Vec<i64> = tail.iter().map(|r| r.id).collect();
    assert_eq!(tail, (1..=50).rev().collect::<Vec<_>>());
}

#[test]
fn a_history_that_cannot_be_opened_is_an_answer() {
    let dir = ScratchDir::new("tui-search-missing");
    let (worker, mut found) = SearchWorker::start(dir.0.join("none.db"), Store::open_existing).unwrap();
    worker.send(search(1, "x"));
    let answer = found.blocking_recv().unwrap();
    assert!(
        matches!(&answer.answer, Answer::Failed(line) if line.contains("no history database")),
        "{answer:?}"
    );
}
