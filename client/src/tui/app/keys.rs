//! Keys: what each one does to the state, by pane and by form.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::{App, Effect, Focus, Overlay, ReplayProgress, Waiting};
use crate::tui::dialog::{ExportForm, ExportFormat, FormOutcome, ReplayForm, ReplayRequest, Sends, TextInput};
use crate::tui::view::help;

impl App {
    /// Applies one key press; returns work for the loop, if any.
    pub fn handle_key(&mut self, key: KeyEvent) -> Option<Effect> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            self.quit = true;
            return None;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('z') {
            // Stopped, the process would stop forwarding too: the relay
            // would answer callers 502 and give the name up.
            if self.mode == super::Mode::Live {
                self.set_status("ctrl-z would stop the tunnel with the screen; q quits", true);
                return None;
            }
            return Some(Effect::Suspend);
        }
        if let Some(overlay) = self.overlay.take() {
            return self.overlay_key(overlay, key);
        }
        self.status = None;
        match key.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char('?') => self.overlay = Some(Overlay::Help { first: 0 }),
            KeyCode::Char('/') => {
                self.overlay = Some(Overlay::Filter(TextInput::new(self.pager.search().unwrap_or_default())));
            }
            KeyCode::Esc => return self.escape(),
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
            KeyCode::Char('R') => self.open_replay_form(),
            KeyCode::Char('e') => self.open_export_form(),
            KeyCode::Char('y') => return self.action_target().map(|delivery_id| Effect::CopyCurl { delivery_id }),
            // Only over an open delivery, so that secrets are never shown
            // by a key pressed long before, with nothing on screen to say so.
            KeyCode::Char('v') => match self.detail.as_ref().map(|d| d.doc.id) {
                Some(id) => {
                    self.reveal = if self.reveal == Some(id) { None } else { Some(id) };
                    self.refresh_detail(id);
                }
                None => self.set_status("open a delivery first: v shows its masked headers", true),
            },
            // The list has no width to scroll: sideways is the detail's,
            // whichever pane has the keys.
            KeyCode::Left | KeyCode::Right | KeyCode::Char('h' | 'l' | 'H' | 'L' | '0' | '$')
                if self.detail.is_some() =>
            {
                self.detail_key(key.code)
            }
            _ => match self.focus {
                Focus::List => self.list_key(key.code),
                Focus::Detail => self.detail_key(key.code),
            },
        }
        None
    }

    /// Takes a paste (bracketed by the terminal, so never read as keys):
    /// into the filter or the field being edited, as typed up to its first
    /// line break; anywhere else it is no command, and says so.
    pub fn handle_paste(&mut self, text: &str) {
        let cut = match &mut self.overlay {
            Some(Overlay::Filter(input)) => input.paste(text),
            Some(Overlay::Replay(form)) => form.paste(text),
            Some(Overlay::Help { .. } | Overlay::Export(_)) => return,
            None => {
                return self.set_status("a paste is no command: press / and paste to filter", true);
            }
        };
        if cut {
            self.set_status("pasted up to the first line break", false);
        }
    }

    /// Esc steps back one thing: a replay running, an open delivery, a
    /// `G` still looking, a filter, in that order.
    fn escape(&mut self) -> Option<Effect> {
        if let Some(replay) = self.replay.as_mut().filter(|r| !r.stopping) {
            replay.stopping = true;
            replay.text = format!("stopping the replay of #{}…", replay.delivery_id);
            return Some(Effect::StopReplay);
        }
        if self.detail.is_some() {
            self.close_detail();
            self.settle(self.selected);
        } else if self.waiting() == Some(Waiting::End) {
            // A `G` still finding the oldest row: stopped, the
            // filter it runs under kept.
            self.stop_waiting();
        } else if self.pager.search().is_some() {
            self.apply_filter(None);
        } else {
            self.stop_waiting();
        }
        None
    }

    /// `R`: the replay form for the delivery at hand, filled as last sent.
    fn open_replay_form(&mut self) {
        // Told now, not after the form is filled in.
        if self.replay.is_some() {
            self.set_status("a replay is already running", true);
            return;
        }
        if let Some(id) = self.action_target() {
            let form = match &self.last_replay_form {
                Some(last) => last.again(id),
                None => ReplayForm::new(id),
            };
            self.overlay = Some(Overlay::Replay(form));
        }
    }

    /// `e`: the export form for the delivery at hand.
    fn open_export_form(&mut self) {
        if let Some(id) = self.action_target() {
            self.overlay = Some(Overlay::Export(ExportForm {
                delivery_id: id,
                format: ExportFormat::Json,
            }));
        }
    }

    pub(super) fn overlay_key(&mut self, overlay: Overlay, key: KeyEvent) -> Option<Effect> {
        match overlay {
            // Any key closes the list, but j and k scroll one that is cut.
            Overlay::Help { first } => {
                let hidden = help::KEYS.len().saturating_sub(help::rows_shown(self.size));
                match key.code {
                    KeyCode::Down | KeyCode::Char('j') if hidden > 0 => {
                        self.overlay = Some(Overlay::Help {
                            first: (first + 1).min(hidden),
                        });
                    }
                    KeyCode::Up | KeyCode::Char('k') if hidden > 0 => {
                        self.overlay = Some(Overlay::Help {
                            first: first.saturating_sub(1),
                        });
                    }
                    // q too: the title promises any key closes, and a quit
                    // on the way out of the help would drop the tunnel.
                    _ => {}
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
                (FormOutcome::Submit, Some(request)) => {
                    self.last_replay_form = Some(form);
                    return self.start_replay(request);
                }
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

    pub(super) fn list_key(&mut self, code: KeyCode) {
        self.back_to_the_drawn_selection();
        let page = self.list_rows();
        let target = match code {
            KeyCode::Up | KeyCode::Char('k') => self.selected.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => self.selected + 1,
            KeyCode::PageUp => self.selected.saturating_sub(page),
            KeyCode::PageDown => self.selected + page,
            KeyCode::Home | KeyCode::Char('g') => 0,
            KeyCode::End | KeyCode::Char('G') => match self.last_index() {
                Some(last) => last,
                None => return,
            },
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

    pub(super) fn detail_key(&mut self, code: KeyCode) {
        let rows = self.detail_rows();
        let columns = self.detail_columns();
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
            // A path or a line of a body can run to thousands of columns.
            KeyCode::Char('H') => detail.hscroll = detail.hscroll.saturating_sub(columns),
            KeyCode::Char('L') => detail.hscroll += columns,
            KeyCode::Char('0') => detail.hscroll = 0,
            // Clamped below to where the longest line's end comes into view.
            KeyCode::Char('$') => detail.hscroll = usize::MAX,
            _ => {}
        }
        self.clamp_detail_scroll();
    }

    /// The delivery `r`, `R`, `e` and `y` act on: the open one, else the selected one.
    pub(super) fn action_target(&mut self) -> Option<i64> {
        let id = match (&self.detail, self.focus) {
            (Some(detail), Focus::Detail) => Some(detail.doc.id),
            _ => self.selected_id(),
        };
        if id.is_none() {
            self.set_status("no delivery selected", true);
        }
        id
    }

    pub(super) fn replay_once(&mut self) -> Option<Effect> {
        let delivery_id = self.action_target()?;
        self.start_replay(ReplayRequest {
            delivery_id,
            times: 1,
            sends: Sends::Duplicates,
            probe: None,
            settle: crate::replay::options::DEFAULT_SETTLE,
        })
    }

    pub(super) fn start_replay(&mut self, request: ReplayRequest) -> Option<Effect> {
        if self.replay.is_some() {
            self.set_status("a replay is already running", true);
            return None;
        }
        self.replay = Some(ReplayProgress {
            delivery_id: request.delivery_id,
            text: match request.sends {
                Sends::Duplicates => format!("replaying #{} ×{}…", request.delivery_id, request.times),
                Sends::FreshBurst => format!(
                    "replaying #{} as fresh events: one alone, then a burst of {}…",
                    request.delivery_id, request.times
                ),
            },
            stopping: false,
        });
        Some(Effect::Replay(request))
    }

    pub(super) fn open_selected(&mut self) {
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
}
