//! What a running tunnel reports to whoever shows it (TUI or log lines).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TryRecvError;

use crate::store::{Summary, WriterNews};

/// One thing that happened on a live tunnel.
#[derive(Debug, Clone, PartialEq)]
pub enum TunnelEvent {
    /// The relay accepted the tunnel; `public_url` now reaches `target`.
    Connected {
        /// Public URL callers use.
        public_url: String,
        /// The same tunnel by path on the address the client reached the
        /// relay at (`/t/<name>`), when `public_url` is a `<name>.<domain>`
        /// one: that needs wildcard DNS, this works wherever the relay does.
        also_url: Option<String>,
        /// Local target requests go to.
        target: String,
    },
    /// The connection to the relay dropped, or a try to get it back
    /// failed; the next try is in `retry_in`.
    Disconnected {
        /// Why, in one line.
        reason: String,
        /// Tries that failed since the connection was lost (0: just lost).
        failed_tries: u32,
        /// Delay before the next attempt.
        retry_in: Duration,
    },
    /// The tunnel is stopping and gives the requests in flight a moment
    /// to finish, or, asked again, cuts them off.
    Stopping {
        /// Requests still in flight.
        in_flight: usize,
        /// How long they get; zero when they are cut off.
        within: Duration,
    },
    /// A request is in the history and still waits for its answer.
    Waiting {
        /// The request as a history row, without its answer.
        summary: Summary,
    },
    /// The history refuses writes (`Some`, why), or takes them
    /// again (`None`). Forwarding goes on either way.
    HistoryRefusing {
        /// Why, in one line.
        reason: Option<String>,
    },
    /// Deliveries are not recorded (`Some`, why: the history's inbox cannot
    /// be written, say on a full disk), or are again (`None`). Forwarding
    /// goes on either way.
    NotRecording {
        /// Why, in one line.
        reason: Option<String>,
    },
    /// Something about how the tunnel was set up that works, but perhaps
    /// not as meant: a config file's token withheld from another relay, a
    /// flag with nothing to act on. Shown where the user looks, the TUI's
    /// status line included, not only in a log.
    Notice {
        /// One line.
        text: String,
    },
    /// The relay asked the tunnel to wait before it starts (the name asked
    /// for is held for the client that last had it, or the relay is busy),
    /// and the tunnel waits: told as a notice, stale once connected.
    HeldBack {
        /// One line.
        text: String,
    },
    /// A delivery shown as completed turned out otherwise: the relay said
    /// its caller did not get the answer whole only after it was stored.
    Amended {
        /// The delivery as the history has it now.
        summary: Summary,
        /// The status it was shown with.
        was: u16,
    },
    /// Events were dropped because the display was behind (a stdout read
    /// slowly); the history has every recorded delivery among them.
    Missed {
        /// How many; 0 only in the queue, where it wakes the display to
        /// tell the count (see [`report`]), never in what the display gets.
        count: usize,
    },
    /// A delivery completed (answered or failed); `summary.id` is its
    /// history row, 0 when it was not recorded.
    Delivered {
        /// The delivery as a history row.
        summary: Summary,
        /// 1 for the first delivery of its event key, 2 for the first retry…
        delivery_number: i64,
    },
}

impl TunnelEvent {
    /// The event for a completed delivery, numbered by its history row.
    pub fn delivered(summary: Summary) -> TunnelEvent {
        TunnelEvent::Delivered {
            delivery_number: summary.delivery_count,
            summary,
        }
    }
}

impl From<WriterNews> for TunnelEvent {
    fn from(news: WriterNews) -> Self {
        match news {
            WriterNews::Waiting(summary) => TunnelEvent::Waiting { summary },
            WriterNews::Stored(summary) => TunnelEvent::delivered(summary),
            WriterNews::Amended { summary, was } => TunnelEvent::Amended { summary, was },
            WriterNews::Refusing(reason) => TunnelEvent::HistoryRefusing { reason: Some(reason) },
            WriterNews::Resumed => TunnelEvent::HistoryRefusing { reason: None },
            WriterNews::Notice(text) => TunnelEvent::Notice { text },
        }
    }
}

/// The tunnel's end of the queue to its display. Cloned by everything that
/// reports; the display ends once every clone is gone.
#[derive(Clone, Debug)]
pub struct Events {
    queue: mpsc::Sender<TunnelEvent>,
    missed: Arc<AtomicUsize>,
}

/// [`Events`] that does not keep the display open.
pub struct WeakEvents {
    queue: mpsc::WeakSender<TunnelEvent>,
    missed: Arc<AtomicUsize>,
}

/// The display's end of the queue: the events in order, and, once it has
/// caught up, a [`TunnelEvent::Missed`] for those dropped meanwhile.
#[derive(Debug)]
pub struct EventFeed {
    queue: mpsc::Receiver<TunnelEvent>,
    missed: Arc<AtomicUsize>,
}

/// A queue of `size` events from a tunnel to its display.
pub fn queue(size: usize) -> (Events, EventFeed) {
    let (queue, shown) = mpsc::channel(size);
    let missed = Arc::new(AtomicUsize::new(0));
    let feed = EventFeed {
        queue: shown,
        missed: missed.clone(),
    };
    (Events { queue, missed }, feed)
}

impl Events {
    /// Whether the display has ended.
    pub fn is_closed(&self) -> bool {
        self.queue.is_closed()
    }

    /// A handle that reports while the display is open, without keeping it open.
    pub fn downgrade(&self) -> WeakEvents {
        WeakEvents {
            queue: self.queue.downgrade(),
            missed: self.missed.clone(),
        }
    }
}

impl WeakEvents {
    /// The reporting handle, while anything else still holds one.
    pub fn upgrade(&self) -> Option<Events> {
        Some(Events {
            queue: self.queue.upgrade()?,
            missed: self.missed.clone(),
        })
    }
}

impl EventFeed {
    /// The next event, waiting for one; `None` once every sender is gone.
    pub async fn recv(&mut self) -> Option<TunnelEvent> {
        loop {
            if let Some(event) = self.try_recv() {
                return Some(event);
            }
            match self.queue.recv().await {
                Some(WAKE) => continue,
                Some(event) => return Some(event),
                None => return self.missed(),
            }
        }
    }

    /// [`EventFeed::recv`] for a thread outside the runtime.
    pub fn blocking_recv(&mut self) -> Option<TunnelEvent> {
        loop {
            if let Some(event) = self.try_recv() {
                return Some(event);
            }
            match self.queue.blocking_recv() {
                Some(WAKE) => continue,
                Some(event) => return Some(event),
                None => return self.missed(),
            }
        }
    }

    /// The next event if one is ready.
    pub fn try_recv(&mut self) -> Option<TunnelEvent> {
        loop {
            match self.queue.try_recv() {
                // Its count is told as the queue runs dry, as every count is.
                Ok(WAKE) => continue,
                Ok(event) => return Some(event),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return self.missed(),
            }
        }
    }

    /// The events dropped since the display last caught up, if any.
    fn missed(&self) -> Option<TunnelEvent> {
        match self.missed.swap(0, Ordering::Relaxed) {
            0 => None,
            count => Some(TunnelEvent::Missed { count }),
        }
    }
}

/// What [`report`] queues, when it can, after counting an event it
/// dropped: the display may have caught up between the failed send and the
/// count, and would otherwise wait for an event that never comes, the count
/// untold.
const WAKE: TunnelEvent = TunnelEvent::Missed { count: 0 };

/// Reports a completed delivery; see [`report`].
pub fn report_delivered(events: &Events, summary: Summary) {
    report(events, TunnelEvent::delivered(summary));
}

/// Reports an event, dropping it when the display is behind: a display
/// nobody reads (stdout piped into a pager left alone) never holds up the
/// tunnel, the history writer, or a ctrl-c. The display is told how many
/// it missed once it catches up.
pub fn report(events: &Events, event: TunnelEvent) {
    match events.queue.try_send(event) {
        Ok(()) => {}
        // A request in flight has no line; its answer, which has one, is
        // counted should it be dropped too.
        Err(mpsc::error::TrySendError::Full(TunnelEvent::Waiting { .. })) => {}
        Err(mpsc::error::TrySendError::Full(_)) => {
            tracing::debug!("tunnel event dropped: the display is behind");
            events.missed.fetch_add(1, Ordering::Relaxed);
            // Still full, the display finds the count as it catches up.
            let _ = events.queue.try_send(WAKE);
        }
        // The display has ended: the tunnel is stopping.
        Err(mpsc::error::TrySendError::Closed(_)) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_display_that_is_behind_never_holds_up_the_sender_and_is_told_what_it_missed() {
        let (events, mut shown) = queue(1);
        let lost = |n: u64| TunnelEvent::Disconnected {
            reason: format!("drop {n}"),
            failed_tries: 0,
            retry_in: Duration::from_secs(n),
        };
        report(&events, lost(1));
        // The queue is full: a send that waited would never return here.
        report(&events, lost(2));
        report(&events, lost(3));
        assert_eq!(shown.try_recv(), Some(lost(1)), "what was queued comes first");
        assert_eq!(shown.try_recv(), Some(TunnelEvent::Missed { count: 2 }));
        assert_eq!(shown.try_recv(), None, "told once");
        report(&events, lost(4));
        assert_eq!(shown.try_recv(), Some(lost(4)), "and reported again once there is room");

        // A request still in flight, which has no line of its own, is not counted.
        report(&events, lost(5));
        let waiting = TunnelEvent::Waiting {
            summary: crate::tui::source::summary_of(&crate::tui::source::test_delivery(1)),
        };
        report(&events, waiting);
        assert_eq!(shown.try_recv(), Some(lost(5)));
        assert_eq!(shown.try_recv(), None);
    }

    /// The display caught up between a send that failed and its count:
    /// waiting on an empty queue, it is woken to tell the count.
    #[tokio::test]
    async fn a_count_made_after_the_display_caught_up_is_still_told() {
        let (events, mut shown) = queue(1);
        let waiting = tokio::spawn(async move { shown.recv().await });
        tokio::task::yield_now().await;
        // What `report` does once its send failed on a queue now drained.
        events.missed.fetch_add(1, Ordering::Relaxed);
        let _ = events.queue.try_send(WAKE);
        let told = tokio::time::timeout(Duration::from_secs(5), waiting).await;
        assert_eq!(
            told.expect("the display was woken").expect("the display"),
            Some(TunnelEvent::Missed { count: 1 })
        );
    }

    #[tokio::test]
    async fn what_was_missed_is_told_before_the_display_ends() {
        let (events, mut shown) = queue(1);
        report(&events, TunnelEvent::Notice { text: "kept".into() });
        report(&events, TunnelEvent::Notice { text: "dropped".into() });
        drop(events);
        assert_eq!(shown.recv().await, Some(TunnelEvent::Notice { text: "kept".into() }));
        assert_eq!(shown.recv().await, Some(TunnelEvent::Missed { count: 1 }));
        assert_eq!(shown.recv().await, None);
    }
}
