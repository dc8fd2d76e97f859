//! Reads run off the TUI's thread: a filter's search and `G`'s way to the
//! oldest row. The state machine asks with an [`Order`] the loop takes and
//! hands to the worker, and takes in the [`Found`] answers of the newest
//! order only: an answer to an order superseded since (another filter, Esc)
//! is about rows no longer shown.

use crossterm::event::KeyCode;

use super::{App, Waiting};
use crate::tui::pager::Pager;
use crate::tui::search::{Answer, Found, Job, Order};

impl App {
    /// What the list waits for, if anything.
    pub fn waiting(&self) -> Option<Waiting> {
        self.waiting.map(|(_, waiting)| waiting)
    }

    /// The order the last change asked for, for the loop to send on.
    pub fn take_order(&mut self) -> Option<Order> {
        self.order.take()
    }

    /// Takes in an answer from the search worker. True when it changed
    /// what is shown.
    pub fn on_found(&mut self, found: Found) -> bool {
        let Some((ticket, _)) = self.waiting.filter(|(ticket, _)| *ticket == found.ticket) else {
            return false;
        };
        self.waiting = None;
        match found.answer {
            Answer::Rows(rows) => {
                // A search's count ends where its first page starts.
                self.counted_up_to = rows.first().map(|row| row.id);
                self.pager.take_first_page(rows);
                if self.pager.total().is_none() {
                    self.waiting = Some((ticket, Waiting::Total));
                }
                match self.resume.take().map(|id| self.pager.position(id)) {
                    Some(Some(index)) => self.settle(index),
                    Some(None) => self.back_to_newest(),
                    None => self.settle(0),
                }
            }
            Answer::Total(counted) => {
                let newer = match self.counted_up_to.take() {
                    Some(after) => self.count_between(after),
                    None => Ok(0),
                };
                match newer {
                    Ok(newer) => self.pager.set_total(counted, newer),
                    Err(err) => self.set_status(format!("cannot read the history: {}", crate::error_line(&err)), true),
                }
            }
            Answer::End { query, ends, tail } => {
                // Pages read again since (new rows piled up) make it moot.
                if self.pager.take_end(&query, ends, tail) {
                    self.list_key(KeyCode::End);
                }
            }
            Answer::Failed(line) => self.set_status(format!("cannot read the history: {line}"), true),
        }
        true
    }

    /// Sends `job`, superseding any order before it; `None` only stops
    /// the one in flight.
    fn send(&mut self, job: Option<Job>, waiting: Option<Waiting>) {
        self.tickets += 1;
        self.order = Some(Order {
            ticket: self.tickets,
            job,
        });
        self.waiting = waiting.map(|waiting| (self.tickets, waiting));
    }

    /// Has the worker count the rows when the first page was not all of
    /// them: counting every row of a big history takes seconds, so the
    /// first page shows now and the count when it comes.
    pub(super) fn count_when_unknown(&mut self) {
        if self.pager.total().is_none() {
            let query = self.pager.count_query();
            self.counted_up_to = query.before_id.map(|id| id - 1);
            self.send(Some(Job::Count { query }), Some(Waiting::Total));
        }
    }

    /// Stops the read in flight, if any.
    pub(super) fn stop_waiting(&mut self) {
        if self.waiting.is_some() {
            self.send(None, None);
        }
    }

    /// Shows the rows matching `search` from the newest.
    pub(super) fn apply_filter(&mut self, search: Option<String>) {
        self.pager = Pager::new(search);
        // Not read while a filter was on: read again once it is off.
        self.read_overview();
        self.read_from_top_or_say();
    }

    /// Reads the list again from the newest row, closing the open delivery.
    /// Unfiltered, the first page is read at once (an index walk); filtered,
    /// the search is sent off the thread and the list waits. False, with
    /// the reason in the footer, when the history cannot be read.
    pub(super) fn read_from_top_or_say(&mut self) -> bool {
        self.resume = None;
        self.close_detail();
        self.head_stale = false;
        self.selected = 0;
        self.offset = 0;
        if let Some(search) = self.pager.search().map(str::to_owned) {
            self.pager = Pager::new(Some(search.clone()));
            self.send(Some(Job::Search { search }), Some(Waiting::Rows));
            return true;
        }
        self.stop_waiting();
        let read = self.pager.reload_page(self.source.as_ref());
        match &read {
            Ok(()) => self.count_when_unknown(),
            Err(err) => self.set_status(format!("cannot read the history: {}", crate::error_line(err)), true),
        }
        self.settle(0);
        read.is_ok()
    }

    /// Index of the oldest row when known. Else the pages' ends are asked
    /// of the worker, which scans every matching row, and the view moves
    /// there once they come.
    pub(super) fn last_index(&mut self) -> Option<usize> {
        if self.pager.end_reached() {
            return Some(self.pager.len().saturating_sub(1));
        }
        // No page read yet: a search's first one is on its way.
        let query = self.pager.end_query()?;
        self.send(Some(Job::End { query }), Some(Waiting::End));
        None
    }
}
