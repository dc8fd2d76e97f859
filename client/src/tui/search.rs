//! Reads that may scan the whole history, run off the TUI's thread: a `/`
//! filter (LIKE over every row and body) and `G` (where every page ends).
//! On a million deliveries they take seconds, during which the screen must
//! keep taking keys and showing live rows.
//!
//! The state machine asks for one with an [`Order`] and takes the answer
//! as [`Found`]; the [`SearchWorker`] carries them out on a thread that owns
//! its own connection to the history. Each order supersedes the ones
//! before it: a search still running when the next order is sent stops
//! there (see [`Store::stop_when`]), and its answer is never sent.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc as std_mpsc, Arc};
use std::thread::JoinHandle;

use anyhow::Context;
use tokio::sync::mpsc;

use crate::store::{ListQuery, Store, StoreError, Summary};

use super::pager::{tail_query, PAGE_SIZE};
use super::source::HistorySource;

/// Work asked of the worker, under a ticket that tells its answers apart
/// from those of orders it superseded.
#[derive(Debug, Clone, PartialEq)]
pub struct Order {
    /// Grows with every order; the newest one is the only one wanted.
    pub ticket: u64,
    /// `None`: only stop whatever runs (the filter was cleared).
    pub job: Option<Job>,
}

/// A read too slow for the TUI's thread.
#[derive(Debug, Clone, PartialEq)]
pub enum Job {
    /// The newest page of rows matching `search`, then, when there are
    /// more, how many match.
    Search {
        /// The filter's words.
        search: String,
    },
    /// How many rows `query` matches: on a big history, unfiltered, a
    /// count reads every row.
    Count {
        /// From [`super::pager::Pager::count_query`].
        query: ListQuery,
    },
    /// The oldest rows: where every page after `query`'s cursor ends (see
    /// [`HistorySource::page_ends`]), then the last, short page.
    End {
        /// From [`super::pager::Pager::end_query`].
        query: ListQuery,
    },
}

/// An answer to the order with `ticket`.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The order's ticket.
    pub ticket: u64,
    /// What was found.
    pub answer: Answer,
}

/// What a [`Job`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A search's newest page of rows; fewer than a page when that is all.
    Rows(Vec<Summary>),
    /// How many rows a search matches, older than its first page's newest.
    Total(u64),
    /// The oldest rows, for [`super::pager::Pager::take_end`].
    End {
        /// The query the job was given; boxed, as it is far larger than
        /// the other answers.
        query: Box<ListQuery>,
        /// Where every full page ends.
        ends: Vec<i64>,
        /// The rows after the last of them.
        tail: Vec<Summary>,
    },
    /// The history could not be read (one line, safe to draw).
    Failed(String),
}

/// Runs one job against `source`, handing each answer to `answer` as soon
/// as it is known: the first page shows while the count goes on.
pub fn run(job: Job, source: &dyn HistorySource, mut answer: impl FnMut(Answer)) -> anyhow::Result<()> {
    match job {
        Job::Search { search } => {
            let first = ListQuery {
                search: Some(search),
                limit: Some(PAGE_SIZE),
                ..ListQuery::default()
            };
            let rows = source.list(&first)?;
            // The count stops where the page started, as the pager counts.
            let count = rows.first().map(|newest| ListQuery {
                before_id: Some(newest.id + 1),
                limit: None,
                ..first.clone()
            });
            let full = rows.len() == PAGE_SIZE;
            answer(Answer::Rows(rows));
            if let (true, Some(count)) = (full, count) {
                answer(Answer::Total(source.count(&count)?));
            }
        }
        Job::Count { query } => answer(Answer::Total(source.count(&query)?)),
        Job::End { query } => {
            let ends = source.page_ends(&query, PAGE_SIZE)?;
            let tail = source.list(&tail_query(&query, &ends))?;
            answer(Answer::End {
                query: Box::new(query),
                ends,
                tail,
            });
        }
    }
    Ok(())
}

/// How the history is opened, to open it alike on the worker's thread.
pub type Open = fn(&Path) -> Result<Store, StoreError>;

/// The thread that runs [`Order`]s, with a connection of its own to the
/// history. Dropping it stops the job in flight and waits for the thread.
pub struct SearchWorker {
    orders: Option<std_mpsc::Sender<Order>>,
    /// The newest order's ticket, read by the statement running to know
    /// whether it is still wanted.
    latest: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

/// A ticket no order has: set when the worker is dropped, it stops all.
const CLOSED: u64 = u64::MAX;

impl SearchWorker {
    /// Starts the thread for the history at `db`, opened with `open` (on
    /// the first order, so a TUI that never searches never opens it twice).
    /// Answers come out of the receiver.
    pub fn start(db: PathBuf, open: Open) -> anyhow::Result<(Self, mpsc::UnboundedReceiver<Found>)> {
        let (orders, inbox) = std_mpsc::channel();
        let (answers, found) = mpsc::unbounded_channel();
        let latest = Arc::new(AtomicU64::new(0));
        let shared = latest.clone();
        let thread = std::thread::Builder::new()
            .name("tui-search".into())
            .spawn(move || serve(&db, open, &inbox, &shared, &answers))
            .context("cannot start the TUI's search thread")?;
        let worker = Self {
            orders: Some(orders),
            latest,
            thread: Some(thread),
        };
        Ok((worker, found))
    }

    /// Sends `order`, stopping the one in flight at once.
    pub fn send(&self, order: Order) {
        self.latest.store(order.ticket, Ordering::SeqCst);
        if let Some(orders) = &self.orders {
            // Only fails once the thread is gone, with nothing left to stop.
            let _ = orders.send(order);
        }
    }
}

impl Drop for SearchWorker {
    fn drop(&mut self) {
        self.latest.store(CLOSED, Ordering::SeqCst);
        drop(self.orders.take());
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("the TUI's search thread panicked");
            }
        }
    }
}

/// The worker's loop: the newest order waiting, run until done or superseded.
fn serve(
    db: &Path,
    open: Open,
    inbox: &std_mpsc::Receiver<Order>,
    latest: &Arc<AtomicU64>,
    answers: &mpsc::UnboundedSender<Found>,
) {
    let mut source: Option<StoppableStore> = None;
    while let Ok(mut order) = inbox.recv() {
        // Orders sent meanwhile supersede this one: only the last counts.
        while let Ok(newer) = inbox.try_recv() {
            order = newer;
        }
        let ticket = order.ticket;
        let wanted = || latest.load(Ordering::SeqCst) == ticket;
        let Some(job) = order.job.filter(|_| wanted()) else {
            continue;
        };
        if source.is_none() {
            match StoppableStore::open(db, open, latest.clone()) {
                Ok(store) => source = Some(store),
                Err(err) => {
                    let answer = Answer::Failed(crate::error_line(&err.into()));
                    let _ = answers.send(Found { ticket, answer });
                    continue;
                }
            }
        }
        let Some(store) = source.as_mut() else { continue };
        store.running.store(ticket, Ordering::SeqCst);
        let store = store.current();
        let result = run(job, store, |answer| {
            if wanted() {
                let _ = answers.send(Found { ticket, answer });
            }
        });
        if let Err(err) = result {
            let stopped = err.downcast_ref::<StoreError>().is_some_and(StoreError::is_stopped);
            if !stopped && wanted() {
                let answer = Answer::Failed(crate::error_line(&err));
                let _ = answers.send(Found { ticket, answer });
            }
        }
    }
}

/// The worker's connection: stopped whenever the order it runs is no
/// longer the newest, and opened again, as [`super::source::FollowedStore`]
/// does, once the file at the history's path is another.
struct StoppableStore {
    store: Store,
    open: Open,
    latest: Arc<AtomicU64>,
    /// Ticket of the order being run.
    running: Arc<AtomicU64>,
}

impl StoppableStore {
    fn open(db: &Path, open: Open, latest: Arc<AtomicU64>) -> Result<Self, StoreError> {
        let store = Self {
            store: open(db)?,
            open,
            latest,
            running: Arc::new(AtomicU64::new(CLOSED)),
        };
        store.watch();
        Ok(store)
    }

    fn watch(&self) {
        let (latest, running) = (self.latest.clone(), self.running.clone());
        self.store
            .stop_when(move || latest.load(Ordering::SeqCst) != running.load(Ordering::SeqCst));
    }

    /// The store for the file at the path now. While what is there cannot
    /// be opened yet, the old one stays.
    fn current(&mut self) -> &Store {
        if self.store.replaced() {
            if let Ok(store) = (self.open)(self.store.path()) {
                self.store = store;
                self.watch();
            }
        }
        &self.store
    }
}

#[cfg(test)]
mod tests;
