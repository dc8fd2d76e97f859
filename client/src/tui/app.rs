//! The TUI's state and the state machine keys and events drive. Nothing
//! here draws or touches the terminal: `view` reads this state, the loop in
//! `mod.rs` feeds it and carries out the [`Effect`]s it asks for.

use ratatui::layout::Rect;

use portpreview_shared::sanitize::escape_str;
use portpreview_shared::text::counted;

use crate::events::TunnelEvent;

use super::detail::DetailDoc;
use super::dialog::{ExportForm, ExportFormat, ReplayForm, ReplayRequest, TextInput};
use super::pager::Pager;
use super::search::Order;
use super::source::HistorySource;
use super::stats::{LiveStats, Overview, LATENCY_WINDOW};
use super::view::layout;

/// Most lines a message in the footer may take.
const MAX_FOOTER_LINES: usize = 3;

/// Seconds between two looks for inboxes of tunnels that died: each reads
/// the history's folder, and a killed tunnel's requests then show as cut
/// off within this long.
const ORPHANS_LOOKED_FOR_EVERY: u64 = 3;

/// Live during `http`, or browsing the stored history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Deliveries arrive as they happen.
    Live,
    /// The history in this database file.
    Browser {
        /// Database path, for the header (escaped when drawn).
        db: String,
    },
}

/// Which pane the movement keys act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    /// The deliveries.
    List,
    /// The open delivery.
    Detail,
}

/// The open delivery and how far it is scrolled.
#[derive(Debug, Clone, PartialEq)]
pub struct DetailState {
    /// The laid-out delivery.
    pub doc: DetailDoc,
    /// First line shown.
    pub scroll: usize,
    /// Columns cut from the left of every line.
    pub hscroll: usize,
    /// Event key and scope it counts among; `None` for a replay or a
    /// delivery with no key, whose text no retry changes.
    pub event: Option<(String, String)>,
}

impl DetailState {
    /// True when `row` is the open delivery or another delivery of its
    /// event: either changes what the pane says (its answer, its count).
    fn shown_changed_by(&self, row: &crate::store::Summary) -> bool {
        let retry = row.replay_of.is_none() && row.delivery_count > 1;
        row.id == self.doc.id
            || retry
                && self
                    .event
                    .as_ref()
                    .is_some_and(|(key, scope)| *key == row.event_key && *scope == row.event_scope)
    }
}

/// What is drawn over the panes, taking the keys.
#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    /// The key list, from its `first` row on (a short screen scrolls it).
    Help {
        /// First key shown.
        first: usize,
    },
    /// `/`: the search being typed.
    Filter(TextInput),
    /// `R`: attempts and probe.
    Replay(ReplayForm),
    /// `e`: format.
    Export(ExportForm),
}

/// A message in the footer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// One line, already safe to draw.
    pub text: String,
    /// Drawn in red when true.
    pub error: bool,
}

/// A replay under way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayProgress {
    /// Delivery being replayed.
    pub delivery_id: i64,
    /// What the engine last reported.
    pub text: String,
    /// Esc was pressed: the attempts in flight are being dropped.
    pub stopping: bool,
}

/// What the list waits for from a read running off the TUI's thread (see
/// [`super::search`]); keys keep working meanwhile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// A filter's first matches: the list says it is searching.
    Rows,
    /// How many rows match the filter: the count says so until then.
    Total,
    /// The oldest rows, for `G`: the view moves there once they come.
    End,
}

/// Work the loop does for the state machine (it needs I/O or time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Replay a delivery and report the verdict.
    Replay(ReplayRequest),
    /// Write a delivery to a file.
    Export {
        /// Delivery to export.
        delivery_id: i64,
        /// Format.
        format: ExportFormat,
    },
    /// Copy the delivery as a curl command (clipboard or file).
    CopyCurl {
        /// Delivery to copy.
        delivery_id: i64,
    },
    /// ctrl-z: hand the terminal back and stop until continued.
    Suspend,
    /// Esc during a replay: stop it where it is.
    StopReplay,
}

/// Everything the TUI shows.
pub struct App {
    source: Box<dyn HistorySource>,
    /// Live or browser.
    pub mode: Mode,
    /// Live tunnel counters.
    pub stats: LiveStats,
    /// Browsing, the header's figures of the newest deliveries.
    pub overview: Option<Overview>,
    /// The rows.
    pub pager: Pager,
    /// Index of the selected row (0 is the newest).
    pub selected: usize,
    /// Index of the first row shown.
    pub offset: usize,
    /// Pane the movement keys act on.
    pub focus: Focus,
    /// The open delivery.
    pub detail: Option<DetailState>,
    /// The form or help drawn on top.
    pub overlay: Option<Overlay>,
    /// Last message.
    pub status: Option<Status>,
    /// Replay under way.
    pub replay: Option<ReplayProgress>,
    /// The last `R` form sent: the next one opens with its attempts and
    /// probe, as a run is mostly repeated after a change to the handler.
    pub last_replay_form: Option<ReplayForm>,
    /// Screen size last drawn on.
    pub size: Rect,
    /// The row selected when the screen was last drawn: what the user
    /// sees selected, which rows arriving since may have moved on from.
    drawn_selection: Option<i64>,
    /// Set by `q`: the loop ends.
    pub quit: bool,
    /// Set by `v`: the delivery whose credentials and signatures are shown
    /// as received. Only that one: any other delivery opens masked.
    pub reveal: Option<i64>,
    /// A filtered live view has rows to fetch on the next tick.
    head_stale: bool,
    /// The open delivery's answer or a retry of its event came: it is read
    /// again on the next tick, once however many came. Read again on each,
    /// a burst of one event's retries would each count the event's
    /// deliveries, and keep the screen and `q` waiting behind them.
    detail_stale: bool,
    /// The history's data version when last read; browsing, a change
    /// means another process (a tunnel, a replay) wrote to it.
    seen_version: Option<i64>,
    /// The second it was last read in.
    version_read_at: u64,
    /// The smallest delivery id the history held when last read: moved
    /// on, another process pruned the oldest deliveries.
    oldest: Option<i64>,
    /// The history's generation when last read: it changes when the file
    /// at the history's path is another one.
    generation: u64,
    /// The history file read from left its path, and the user was told.
    orphaned: bool,
    /// The last order's ticket.
    tickets: u64,
    /// What the order with this ticket is still to answer.
    waiting: Option<(u64, Waiting)>,
    /// The delivery to select again once a search's first page comes, which
    /// says whether it is still listed; open meanwhile, if it was.
    resume: Option<i64>,
    /// An order for the search worker, not yet sent.
    order: Option<Order>,
    /// The footer's notice that the relay holds the start back.
    held_back_notice: Option<String>,
    /// The newest row the count in flight counts: rows past it, which the
    /// pages were read again to hold while it ran, are counted apart.
    counted_up_to: Option<i64>,
}

impl App {
    /// Opens the history and fetches its first page; a history longer than
    /// that page is counted off the screen's thread (a million rows take
    /// seconds), and the count shows once it comes.
    pub fn new(source: Box<dyn HistorySource>, mode: Mode, size: Rect) -> anyhow::Result<Self> {
        let mut pager = Pager::new(None);
        pager.reload_page(source.as_ref())?;
        let seen_version = source.data_version().ok();
        let oldest = source.oldest_id().ok().flatten();
        let generation = source.generation();
        let mut app = Self {
            source,
            mode,
            stats: LiveStats::default(),
            overview: None,
            pager,
            selected: 0,
            offset: 0,
            focus: Focus::List,
            detail: None,
            overlay: None,
            status: None,
            replay: None,
            last_replay_form: None,
            size,
            drawn_selection: None,
            quit: false,
            reveal: None,
            head_stale: false,
            detail_stale: false,
            seen_version,
            version_read_at: 0,
            oldest,
            generation,
            orphaned: false,
            tickets: 0,
            waiting: None,
            resume: None,
            order: None,
            held_back_notice: None,
            counted_up_to: None,
        };
        app.count_when_unknown();
        app.read_overview();
        Ok(app)
    }

    /// Browsing, reads the newest deliveries again for the header. Left
    /// out when they cannot be read (the list says why), and while a filter
    /// hides them (the header shows the matches' count alone).
    pub(super) fn read_overview(&mut self) {
        if matches!(self.mode, Mode::Browser { .. }) && self.pager.search().is_none() {
            let newest = crate::store::ListQuery {
                limit: Some(LATENCY_WINDOW),
                ..Default::default()
            };
            self.overview = self.source.list(&newest).ok().map(|rows| Overview::of(&rows));
        }
    }

    /// Drops every row and reads the first page again, leaving the count
    /// to the worker.
    fn reload_and_count(&mut self) -> anyhow::Result<()> {
        self.pager.reload_page(self.source.as_ref())?;
        self.count_when_unknown();
        Ok(())
    }

    /// Reads the list again from the newest row as rows pile up above it.
    /// The total carries over, the rows that came since counted by id, an
    /// index range: counting a big history again takes seconds, and under
    /// a tunnel recording a thousand a second each count was overtaken by
    /// the next before it came, and held a read open that kept the WAL
    /// from being emptied. A count in flight is left to finish.
    fn reload_counting_on(&mut self) -> anyhow::Result<()> {
        let carried = self.pager.counted_through();
        self.pager.reload_page(self.source.as_ref())?;
        if self.pager.total().is_some() {
            // One page holds every row, counted as it was read.
            return Ok(());
        }
        match carried {
            Some((through, total)) => {
                let newer = self.count_between(through)?;
                self.pager.set_total(total, newer);
            }
            None if self.waiting() == Some(Waiting::Total) => {}
            None => self.count_when_unknown(),
        }
        Ok(())
    }

    /// How many rows the pages list newer than `after`, up to the first
    /// page's newest.
    fn count_between(&self, after: i64) -> anyhow::Result<u64> {
        match self.pager.between(after) {
            Some(query) => self.source.count(&query),
            None => Ok(0),
        }
    }

    /// The history the app reads.
    pub fn source(&self) -> &dyn HistorySource {
        self.source.as_ref()
    }

    /// The parts of the screen as they are now.
    pub fn areas(&self) -> layout::Areas {
        layout::areas(
            self.size,
            self.detail.is_some(),
            self.focus == Focus::Detail,
            self.chrome(self.size.width),
        )
    }

    /// Lines the header and footer need at `width`: a line for a live
    /// warning, so it never pushes the public URL off the screen, and a
    /// message wrapped onto up to three, so the part that says what to do
    /// is never cut off.
    pub fn chrome(&self, width: u16) -> layout::Chrome {
        let warned = self.mode == Mode::Live && self.stats.warnings().next().is_some();
        let footer_lines = self.status.as_ref().map_or(1, |status| {
            let lines = super::format::wrap(&status.text, usize::from(width)).len();
            lines.clamp(1, MAX_FOOTER_LINES) as u16
        });
        layout::Chrome {
            header_lines: if warned { 3 } else { 2 },
            footer_lines,
        }
    }

    /// Id of the selected delivery.
    pub fn selected_id(&self) -> Option<i64> {
        self.pager.get(self.selected).map(|row| row.id)
    }

    /// Notes that the screen now shows the current selection.
    pub fn drawn(&mut self) {
        self.drawn_selection = self.selected_id();
    }

    /// Sets a footer message.
    pub fn set_status(&mut self, text: impl Into<String>, error: bool) {
        self.status = Some(Status {
            text: text.into(),
            error,
        });
    }

    /// The terminal changed size.
    pub fn resize(&mut self, size: Rect) {
        self.size = size;
        self.settle(self.selected);
        self.clamp_detail_scroll();
    }

    /// Takes in one event from the tunnel (`second`: seconds since start).
    pub fn on_tunnel_event(&mut self, event: TunnelEvent, second: u64) {
        if let TunnelEvent::Notice { text } = &event {
            return self.set_status(escape_str(text).into_owned(), true);
        }
        if let TunnelEvent::Missed { count } = event {
            // The rows come from the history; the header's counts miss them.
            self.history_changed();
            let missed = counted(count, "event", "events");
            let text = format!(
                "{missed} came faster than the screen took them: rows read again from the history, the header's \
                 counts leave them out"
            );
            return self.set_status(text, true);
        }
        if let TunnelEvent::HeldBack { text } = &event {
            let shown = escape_str(text).into_owned();
            self.held_back_notice = Some(shown.clone());
            return self.set_status(shown, true);
        }
        // The name waited for is the tunnel's now: the notice is stale.
        if let (TunnelEvent::Connected { .. }, Some(notice)) = (&event, self.held_back_notice.take()) {
            if self.status.as_ref().is_some_and(|s| s.text == notice) {
                self.status = None;
            }
        }
        self.stats.record(&event, second);
        let (TunnelEvent::Delivered { summary, .. }
        | TunnelEvent::Waiting { summary }
        | TunnelEvent::Amended { summary, .. }) = event
        else {
            return;
        };
        if self.detail.as_ref().is_some_and(|d| d.shown_changed_by(&summary)) {
            self.detail_stale = true;
        }
        if self.pager.search().is_some() {
            // A row listed in flight gets its answer here; new rows are the
            // store's to match, and a retry the filter hides still counts
            // for the rows it shows.
            self.pager.update(summary);
            self.head_stale = true;
            return;
        }
        if let Some(index) = self.pager.upsert(summary) {
            self.row_inserted_at(index);
        }
    }

    /// Once per tick: moves the sparkline on and fetches what events
    /// announced, or what another process wrote while browsing. True when
    /// the screen changed: the rows were read again, or a notice was set.
    pub fn on_tick(&mut self, second: u64) -> bool {
        let detail_read = self.read_stale_detail();
        self.tick_rows(second) || detail_read
    }

    /// Reads the open delivery again when events said it changed.
    fn read_stale_detail(&mut self) -> bool {
        let stale = std::mem::take(&mut self.detail_stale);
        match self.detail.as_ref().map(|d| d.doc.id).filter(|_| stale) {
            Some(id) => {
                self.refresh_detail(id);
                true
            }
            None => false,
        }
    }

    /// [`App::on_tick`] for the rows.
    fn tick_rows(&mut self, second: u64) -> bool {
        self.stats.advance(second);
        let generation = self.source.generation();
        if generation != self.generation {
            self.generation = generation;
            self.orphaned = false;
            self.history_replaced();
            return true;
        }
        // Said once: the rows stay, as a file deleted while open still
        // holds them, but nothing new will come to them.
        if let Mode::Browser { db } = &self.mode {
            if !self.orphaned && self.source.orphaned() {
                self.orphaned = true;
                // A file there that could not be opened as a history is
                // another kind of file, not one gone.
                let gone = match std::path::Path::new(db).exists() {
                    true => "the file at the history's path is no history (not SQLite, or another program's)",
                    false => "the history file was deleted or moved",
                };
                self.set_status(
                    format!("{gone}: showing what it held until a history is at its path again"),
                    true,
                );
                return true;
            }
        }
        // Once a second: a filtered view reads the history again on each
        // change, and a tunnel beside it commits many times a second.
        if second != self.version_read_at {
            self.version_read_at = second;
            if self.follow_prune() {
                return true;
            }
            // Live, the tunnel's events say what is new.
            if matches!(self.mode, Mode::Browser { .. }) {
                self.note_another_writer();
                // A tunnel killed meanwhile left its requests in flight
                // waiting in its inbox, which no one else may open soon.
                if second.is_multiple_of(ORPHANS_LOOKED_FOR_EVERY) && self.source.take_in_orphans() {
                    self.history_changed();
                }
            }
        }
        let following = self.follows_newest();
        let rebase = self.pager.search().is_none() && self.pager.head_is_full(!following);
        // Until a search's first page comes, no row is held to refresh
        // above: the search brings the newest matches. Until `G`'s answer
        // comes, the pages stay as it read them: paging started over
        // would ask for a count in its place, and under a tunnel recording
        // a thousand deliveries a second `G` would never arrive.
        if !(self.head_stale || rebase) || matches!(self.waiting(), Some(Waiting::Rows | Waiting::End)) {
            return false;
        }
        self.head_stale = false;
        // Browsing, rows read while in flight get their answers here; live,
        // the tunnel's events bring them.
        if matches!(self.mode, Mode::Browser { .. }) {
            if let Err(err) = self.pager.refresh_waiting(self.source.as_ref()) {
                self.set_status(format!("cannot read the history: {}", crate::error_line(&err)), true);
            }
        }
        let anchor = self.selected_id();
        let result = if rebase {
            self.reload_counting_on().map(|()| None)
        } else {
            self.pager.refresh_head(self.source.as_ref(), !following)
        };
        let result = match result {
            // Where the matches start again only a search can tell.
            Ok(None) if self.pager.search().is_some() => {
                self.read_from_top_or_say();
                if !following {
                    self.set_status("too many new deliveries to keep your place: back at the newest", false);
                }
                return true;
            }
            Ok(None) if !rebase => self.reload_counting_on().map(|()| None),
            other => other,
        };
        match result {
            Ok(added) => match anchor.and_then(|id| self.pager.position(id)) {
                Some(index) if !following => self.settle(index),
                _ if added.is_none() && !following => {
                    self.back_to_newest();
                    self.set_status("too many new deliveries to keep your place: back at the newest", false);
                }
                _ => self.rows_added_on_top(added.unwrap_or(0)),
            },
            Err(err) => self.set_status(format!("cannot read the history: {}", crate::error_line(&err)), true),
        }
        true
    }

    /// Closes the open delivery and selects the newest row: where the
    /// reader's place is no longer among the rows read.
    fn back_to_newest(&mut self) {
        self.close_detail();
        self.offset = 0;
        self.settle(0);
    }

    /// Browsing: when another process (a tunnel, a replay) wrote to the
    /// history since the last look, the rows above and the open delivery
    /// are read again.
    fn note_another_writer(&mut self) {
        let version = self.source.data_version().ok();
        if std::mem::replace(&mut self.seen_version, version) != version {
            self.history_changed();
        }
    }

    /// Reads again what the history's change may have touched.
    fn history_changed(&mut self) {
        self.head_stale = true;
        self.read_overview();
        if self.pager.search().is_some() {
            self.count_shown_events();
        }
        // Its answer, or a retry of its event, may be what changed.
        if let Some(id) = self.detail.as_ref().map(|d| d.doc.id) {
            self.refresh_detail(id);
        }
    }

    /// Reads again how many deliveries the events of the rows in view have
    /// had: under a filter, the retries another process records may not
    /// be listed, and would otherwise go uncounted.
    fn count_shown_events(&mut self) {
        let shown: std::collections::HashSet<(String, String)> = (self.offset..self.offset + self.list_rows())
            .filter_map(|i| self.pager.get(i))
            .filter(|row| !row.event_key.is_empty())
            .map(|row| (row.event_key.clone(), row.event_scope.clone()))
            .collect();
        for (key, scope) in shown {
            if let Ok(count) = self.source.event_count(&key, &scope) {
                self.pager.note_seen(&key, &scope, count);
            }
        }
    }

    /// Reads the list again when another process pruned the oldest
    /// deliveries (`portpreview prune`): the count and the pages read
    /// still hold them. The open delivery stays where it is still listed
    /// on the first page; else the list goes back to the newest. True when
    /// the screen changed.
    fn follow_prune(&mut self) -> bool {
        let Ok(oldest) = self.source.oldest_id() else {
            return false;
        };
        let pruned = match (self.oldest, oldest) {
            (Some(before), Some(now)) => now > before,
            (Some(_), None) => true,
            (None, _) => false,
        };
        self.oldest = oldest;
        if !pruned {
            return false;
        }
        let anchor = self.selected_id();
        if self.pager.search().is_some() {
            // The search answers later: the open delivery stays open until
            // its first page says whether it is still listed.
            let (detail, reveal, focus) = (self.detail.take(), self.reveal.take(), self.focus);
            self.read_from_top_or_say();
            (self.detail, self.reveal, self.focus) = (detail, reveal, focus);
            self.resume = anchor;
        } else {
            if let Err(err) = self.reload_and_count() {
                self.set_status(format!("cannot read the history: {}", crate::error_line(&err)), true);
                return true;
            }
            match anchor.and_then(|id| self.pager.position(id)) {
                Some(index) => self.settle(index),
                None => self.back_to_newest(),
            }
        }
        self.set_status(
            "older deliveries were pruned from the history: the list is read again",
            false,
        );
        true
    }

    /// The file at the history's path is another one now (deleted and
    /// started anew, or another moved over it): nothing read from the old
    /// one holds, its ids included, so the list is read again from the top.
    fn history_replaced(&mut self) {
        self.seen_version = self.source.data_version().ok();
        self.oldest = self.source.oldest_id().ok().flatten();
        self.read_overview();
        if self.read_from_top_or_say() {
            self.set_status("the history file was replaced: showing the one now at its path", false);
        }
    }

    /// Replay progress reported by the engine.
    pub fn on_replay_progress(&mut self, text: String) {
        // Once stopping, the attempts still reporting are being dropped.
        if let Some(replay) = self.replay.as_mut().filter(|r| !r.stopping) {
            replay.text = text;
        }
    }

    /// A replay ended with this one-line result.
    pub fn on_replay_done(&mut self, delivery_id: i64, result: Result<String, String>) {
        self.replay = None;
        self.set_status(replay_line(delivery_id, &result), result.is_err());
        if self.detail.as_ref().is_some_and(|d| d.doc.id == delivery_id) {
            self.open_detail(delivery_id);
            // The runs, the new one last, close the document: show them.
            if let Some(detail) = &mut self.detail {
                detail.scroll = usize::MAX;
            }
            self.clamp_detail_scroll();
        }
    }
}

/// How a replay of `delivery_id` ended, in one line.
pub fn replay_line(delivery_id: i64, result: &Result<String, String>) -> String {
    match result {
        Ok(line) => format!("replay of #{delivery_id}: {line}"),
        Err(err) => format!("replay of #{delivery_id} failed: {err}"),
    }
}

mod keys;
mod navigate;
mod searching;

#[cfg(test)]
mod tests;
