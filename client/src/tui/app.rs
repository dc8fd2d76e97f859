//! The TUI's state and the state machine keys and events drive. Nothing
//! here draws or touches the terminal: `view` reads this state, the loop in
//! `mod.rs` feeds it and carries out the [`Effect`]s it asks for.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::Rect;

use crate::events::TunnelEvent;

use super::detail::DetailDoc;
use super::dialog::{ExportForm, ExportFormat, FormOutcome, ReplayForm, ReplayRequest, TextInput};
use super::pager::{Pager, PAGE_SIZE};
use super::source::HistorySource;
use super::stats::LiveStats;
use super::view::layout;

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
}

/// What is drawn over the panes, taking the keys.
#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    /// The key list.
    Help,
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
}

/// Everything the TUI shows.
pub struct App {
    source: Box<dyn HistorySource>,
    /// Live or browser.
    pub mode: Mode,
    /// Live tunnel counters.
    pub stats: LiveStats,
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
    /// Screen size last drawn on.
    pub size: Rect,
    /// Set by `q`: the loop ends.
    pub quit: bool,
    /// A filtered live view has rows to fetch on the next tick.
    head_stale: bool,
}

impl App {
    /// Opens the history and fetches its first page.
    pub fn new(source: Box<dyn HistorySource>, mode: Mode, size: Rect) -> anyhow::Result<Self> {
        let mut pager = Pager::new(None);
        pager.reload(source.as_ref())?;
        Ok(Self {
            source,
            mode,
            stats: LiveStats::default(),
            pager,
            selected: 0,
            offset: 0,
            focus: Focus::List,
            detail: None,
            overlay: None,
            status: None,
            replay: None,
            size,
            quit: false,
            head_stale: false,
        })
    }

    /// The history the app reads.
    pub fn source(&self) -> &dyn HistorySource {
        self.source.as_ref()
    }

    /// The parts of the screen as they are now.
    pub fn areas(&self) -> layout::Areas {
        layout::areas(self.size, self.detail.is_some(), self.focus == Focus::Detail)
    }

    /// Id of the selected delivery.
    pub fn selected_id(&self) -> Option<i64> {
        self.pager.get(self.selected).map(|row| row.id)
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
        self.stats.record(&event, second);
        let TunnelEvent::Delivered { summary, .. } = event else {
            return;
        };
        if self.pager.search().is_some() {
            self.head_stale = true;
            return;
        }
        let before = self.pager.len();
        self.pager.prepend(summary);
        self.rows_added_on_top(self.pager.len() - before);
    }

    /// Once per tick: moves the sparkline on and fetches what events announced.
    pub fn on_tick(&mut self, second: u64) {
        self.stats.advance(second);
        let following = self.follows_newest();
        let rebase = self.pager.search().is_none() && self.pager.head_is_full(!following);
        if !(self.head_stale || rebase) {
            return;
        }
        self.head_stale = false;
        let anchor = self.selected_id();
        let result = if rebase {
            self.pager.reload(self.source.as_ref()).map(|()| None)
        } else {
            self.pager.refresh_head(self.source.as_ref())
        };
        match result {
            Ok(added) => match anchor.and_then(|id| self.pager.position(id)) {
                Some(index) if !following => self.settle(index),
                _ if added.is_none() && !following => {
                    self.detail = None;
                    self.focus = Focus::List;
                    self.offset = 0;
                    self.settle(0);
                    self.set_status("too many new deliveries to keep your place: back at the newest", false);
                }
                _ => self.rows_added_on_top(added.unwrap_or(0)),
            },
            Err(err) => self.set_status(format!("cannot read the history: {}", crate::error_line(&err)), true),
        }
    }

    /// Replay progress reported by the engine.
    pub fn on_replay_progress(&mut self, text: String) {
        if let Some(replay) = &mut self.replay {
            replay.text = text;
        }
    }

    /// A replay ended with this one-line result.
    pub fn on_replay_done(&mut self, delivery_id: i64, result: Result<String, String>) {
        self.replay = None;
        match result {
            Ok(line) => self.set_status(format!("replay of #{delivery_id}: {line}"), false),
            Err(err) => self.set_status(format!("replay of #{delivery_id} failed: {err}"), true),
        }
        if self.detail.as_ref().is_some_and(|d| d.doc.id == delivery_id) {
            self.open_detail(delivery_id);
            // The runs, the new one last, close the document: show them.
            if let Some(detail) = &mut self.detail {
                detail.scroll = usize::MAX;
            }
            self.clamp_detail_scroll();
        }
    }

    /// Applies one key press; returns work for the loop, if any.
    pub fn handle_key(&mut self, key: KeyEvent) -> Option<Effect> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            self.quit = true;
            return None;
        }
        if let Some(overlay) = self.overlay.take() {
            return self.overlay_key(overlay, key);
        }
        self.status = None;
        match key.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char('?') => self.overlay = Some(Overlay::Help),
            KeyCode::Char('/') => {
                self.overlay = Some(Overlay::Filter(TextInput::new(self.pager.search().unwrap_or_default())));
            }
            KeyCode::Esc => {
                if self.detail.is_some() {
                    self.detail = None;
                    self.focus = Focus::List;
                    self.settle(self.selected);
                } else if self.pager.search().is_some() {
                    self.apply_filter(None);
                }
            }
            KeyCode::Tab | KeyCode::BackTab => match (&self.detail, self.focus) {
                (None, _) => self.open_selected(),
                (Some(_), Focus::List) => self.focus = Focus::Detail,
                (Some(_), Focus::Detail) => {
                    self.focus = Focus::List;
                    self.settle(self.selected);
                }
            },
            KeyCode::Enter if self.focus == Focus::List => self.open_selected(),
            KeyCode::Char('r') => return self.replay_once(),
            KeyCode::Char('R') => {
                if let Some(id) = self.action_target() {
                    self.overlay = Some(Overlay::Replay(ReplayForm::new(id)));
                }
            }
            KeyCode::Char('e') => {
                if let Some(id) = self.action_target() {
                    self.overlay = Some(Overlay::Export(ExportForm {
                        delivery_id: id,
                        format: ExportFormat::Json,
                    }));
                }
            }
            KeyCode::Char('y') => return self.action_target().map(|delivery_id| Effect::CopyCurl { delivery_id }),
            _ => match self.focus {
                Focus::List => self.list_key(key.code),
                Focus::Detail => self.detail_key(key.code),
            },
        }
        None
    }

    fn overlay_key(&mut self, overlay: Overlay, key: KeyEvent) -> Option<Effect> {
        match overlay {
            Overlay::Help => {
                if key.code == KeyCode::Char('q') {
                    self.quit = true;
                }
            }
            Overlay::Filter(mut input) => match input.handle(key) {
                FormOutcome::Editing => self.overlay = Some(Overlay::Filter(input)),
                FormOutcome::Cancel => {}
                FormOutcome::Submit => {
                    let text = input.text.trim();
                    self.apply_filter((!text.is_empty()).then(|| text.to_owned()));
                }
            },
            Overlay::Replay(mut form) => match form.handle(key) {
                (FormOutcome::Submit, Some(request)) => return self.start_replay(request),
                (FormOutcome::Cancel, _) => {}
                _ => self.overlay = Some(Overlay::Replay(form)),
            },
            Overlay::Export(mut form) => match form.handle(key) {
                (FormOutcome::Submit, Some(format)) => {
                    return Some(Effect::Export {
                        delivery_id: form.delivery_id,
                        format,
                    });
                }
                (FormOutcome::Cancel, _) => {}
                _ => self.overlay = Some(Overlay::Export(form)),
            },
        }
        None
    }

    fn list_key(&mut self, code: KeyCode) {
        let page = self.list_rows();
        let target = match code {
            KeyCode::Up | KeyCode::Char('k') => self.selected.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => self.selected + 1,
            KeyCode::PageUp => self.selected.saturating_sub(page),
            KeyCode::PageDown => self.selected + page,
            KeyCode::Home | KeyCode::Char('g') => 0,
            KeyCode::End | KeyCode::Char('G') => self.last_index(),
            _ => return,
        };
        let before = self.selected_id();
        self.settle(target);
        if self.detail.is_some() && self.selected_id() != before {
            if let Some(id) = self.selected_id() {
                self.open_detail(id);
            }
        }
    }

    fn detail_key(&mut self, code: KeyCode) {
        let rows = self.detail_rows();
        let Some(detail) = &mut self.detail else { return };
        match code {
            KeyCode::Up | KeyCode::Char('k') => detail.scroll = detail.scroll.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => detail.scroll += 1,
            KeyCode::PageUp => detail.scroll = detail.scroll.saturating_sub(rows),
            KeyCode::PageDown | KeyCode::Char(' ') => detail.scroll += rows,
            KeyCode::Home | KeyCode::Char('g') => detail.scroll = 0,
            KeyCode::End | KeyCode::Char('G') => detail.scroll = usize::MAX,
            KeyCode::Left | KeyCode::Char('h') => detail.hscroll = detail.hscroll.saturating_sub(8),
            KeyCode::Right | KeyCode::Char('l') => detail.hscroll += 8,
            _ => {}
        }
        self.clamp_detail_scroll();
    }

    /// The delivery `r`, `R`, `e` and `y` act on: the open one, else the selected one.
    fn action_target(&mut self) -> Option<i64> {
        let id = match (&self.detail, self.focus) {
            (Some(detail), Focus::Detail) => Some(detail.doc.id),
            _ => self.selected_id(),
        };
        if id.is_none() {
            self.set_status("no delivery selected", true);
        }
        id
    }

    fn replay_once(&mut self) -> Option<Effect> {
        let delivery_id = self.action_target()?;
        self.start_replay(ReplayRequest {
            delivery_id,
            times: 1,
            probe: None,
        })
    }

    fn start_replay(&mut self, request: ReplayRequest) -> Option<Effect> {
        if self.replay.is_some() {
            self.set_status("a replay is already running", true);
            return None;
        }
        self.replay = Some(ReplayProgress {
            delivery_id: request.delivery_id,
            text: format!("replaying #{} ×{}…", request.delivery_id, request.times),
        });
        Some(Effect::Replay(request))
    }

    fn apply_filter(&mut self, search: Option<String>) {
        self.pager = Pager::new(search);
        self.detail = None;
        self.focus = Focus::List;
        self.head_stale = false;
        if let Err(err) = self.pager.reload(self.source.as_ref()) {
            self.set_status(format!("cannot read the history: {}", crate::error_line(&err)), true);
        }
        self.selected = 0;
        self.offset = 0;
        self.settle(0);
    }

    fn open_selected(&mut self) {
        match self.selected_id() {
            Some(id) => {
                self.open_detail(id);
                if self.detail.is_some() {
                    self.focus = Focus::Detail;
                }
            }
            None => self.set_status("no delivery selected", true),
        }
    }

    fn open_detail(&mut self, id: i64) {
        let loaded = self.source.get(id).and_then(|d| Ok((d, self.source.replay_runs(id)?)));
        match loaded {
            Ok((Some(delivery), runs)) => {
                self.detail = Some(DetailState {
                    doc: DetailDoc::new(&delivery, &runs),
                    scroll: 0,
                    hscroll: 0,
                });
            }
            Ok((None, _)) => self.set_status(format!("delivery #{id} is no longer in the history"), true),
            Err(err) => self.set_status(format!("cannot read #{id}: {}", crate::error_line(&err)), true),
        }
    }

    /// Live rows arrived above the list: follow them when at the top,
    /// otherwise keep the selected row (and the view) where they were.
    fn rows_added_on_top(&mut self, added: usize) {
        if added == 0 {
            return;
        }
        if self.follows_newest() {
            self.settle(0);
        } else {
            self.offset += added;
            self.settle(self.selected + added);
        }
    }

    fn follows_newest(&self) -> bool {
        self.selected == 0 && self.offset == 0 && self.detail.is_none()
    }

    /// Selects `target` (clamped), fetching the rows around it.
    fn settle(&mut self, target: usize) {
        let rows = self.list_rows();
        // First the page holding the target (this finds where the history
        // ends), then the rows the view will show.
        self.fetch(target, target + 1);
        self.selected = target.min(self.pager.len().saturating_sub(1));
        if self.selected < self.offset {
            self.offset = self.selected;
        } else if self.selected >= self.offset + rows {
            self.offset = self.selected + 1 - rows;
        }
        if self.pager.end_reached() {
            self.offset = self.offset.min(self.pager.len().saturating_sub(rows));
        }
        self.fetch(self.offset, self.offset + rows);
    }

    fn fetch(&mut self, start: usize, end: usize) {
        if let Err(err) = self.pager.ensure(start, end, self.source.as_ref()) {
            self.set_status(format!("cannot read the history: {}", crate::error_line(&err)), true);
        }
    }

    /// Index of the oldest row, fetching pages up to it.
    fn last_index(&mut self) -> usize {
        while !self.pager.end_reached() {
            let len = self.pager.len();
            if let Err(err) = self.pager.ensure(len, len + PAGE_SIZE, self.source.as_ref()) {
                self.set_status(format!("cannot read the history: {}", crate::error_line(&err)), true);
                break;
            }
        }
        self.pager.len().saturating_sub(1)
    }

    fn list_rows(&self) -> usize {
        let areas = layout::areas(self.size, self.detail.is_some(), false);
        areas.list.map_or(1, layout::list_rows)
    }

    fn detail_rows(&self) -> usize {
        let areas = layout::areas(self.size, true, true);
        areas.detail.map_or(1, layout::detail_rows)
    }

    fn clamp_detail_scroll(&mut self) {
        let rows = self.detail_rows();
        if let Some(detail) = &mut self.detail {
            detail.scroll = detail.scroll.min(detail.doc.lines.len().saturating_sub(rows));
        }
    }
}

#[cfg(test)]
mod tests;
