//! The small forms drawn over the list: filter prompt, replay and export.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use std::time::Duration;

use crate::replay::options::{parse_settle, DEFAULT_SETTLE};
use crate::replay::MAX_TIMES;

/// Longest text a prompt accepts, in bytes; a paste beyond it is cut.
const MAX_INPUT: usize = 1024;

/// What a prompt says once a paste was cut at its limit.
pub const INPUT_CUT: &str = "1,024 bytes at most: the rest was not taken";

/// What a key did to a form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormOutcome {
    /// Still editing.
    Editing,
    /// Enter: use what was typed.
    Submit,
    /// Esc: forget it.
    Cancel,
}

/// A one-line text field with the cursor at its end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextInput {
    /// What was typed.
    pub text: String,
    /// True while `text` is a suggestion nobody has edited: the first
    /// character typed replaces it, so typing `3` asks for 3, not 103.
    pub suggested: bool,
    /// A character came past the prompt's limit and was not taken (the end of
    /// a long paste): the prompt says so, or a shorter filter than meant
    /// would run without a word.
    pub full: bool,
}

impl TextInput {
    /// A field holding `text`, to be edited.
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            suggested: false,
            full: false,
        }
    }

    /// A field suggesting `text`: typing replaces it, Enter takes it.
    pub fn suggest(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            suggested: true,
            full: false,
        }
    }

    /// Applies one key: characters, Backspace, ctrl-u (clear), ctrl-w (word).
    pub fn handle(&mut self, key: KeyEvent) -> FormOutcome {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        // Only an edit ends the suggestion: moving about leaves it whole.
        if self.suggested && matches!(key.code, KeyCode::Char(_) | KeyCode::Backspace | KeyCode::Delete) {
            self.suggested = false;
            self.text.clear();
            if matches!(key.code, KeyCode::Backspace | KeyCode::Delete) {
                return FormOutcome::Editing;
            }
        }
        match key.code {
            KeyCode::Enter => return FormOutcome::Submit,
            KeyCode::Esc => return FormOutcome::Cancel,
            KeyCode::Backspace => {
                let start = portpreview_shared::text::last_cluster_start(&self.text);
                self.text.truncate(start);
            }
            KeyCode::Char('u') if ctrl => self.text.clear(),
            KeyCode::Char('w') if ctrl => {
                let trimmed = self.text.trim_end().len();
                let cut = self.text[..trimmed].rfind(' ').map_or(0, |i| i + 1);
                self.text.truncate(cut);
            }
            KeyCode::Char(c) if !ctrl && !c.is_control() && self.text.len() < MAX_INPUT => self.text.push(c),
            KeyCode::Char(c) if !ctrl && !c.is_control() => self.full = true,
            _ => {}
        }
        self.full &= self.text.len() >= MAX_INPUT;
        FormOutcome::Editing
    }

    /// Takes pasted text as typed, up to its first line break: a line
    /// break typed is Enter, and what a paste holds after one is no key
    /// the user pressed. Returns whether text past a line break was left out.
    pub fn paste(&mut self, text: &str) -> bool {
        if self.suggested {
            self.suggested = false;
            self.text.clear();
        }
        let (line, rest) = text.split_once(['\n', '\r']).unwrap_or((text, ""));
        for c in line.chars().filter(|c| !c.is_control()) {
            if self.text.len() + c.len_utf8() > MAX_INPUT {
                self.full = true;
                break;
            }
            self.text.push(c);
        }
        !rest.trim().is_empty()
    }
}

/// What a replay sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sends {
    /// The recorded event, again and again, one attempt at a time: what a
    /// provider's retries do.
    Duplicates,
    /// Never-seen copies of the event (`replay --fresh`): one delivered
    /// alone, another as a burst of copies at once, which is what shows a
    /// check-then-insert race; duplicates of an event already handled
    /// cannot.
    FreshBurst,
}

impl Sends {
    fn other(self) -> Self {
        match self {
            Self::Duplicates => Self::FreshBurst,
            Self::FreshBurst => Self::Duplicates,
        }
    }
}

/// How a replay verdict reads the handler's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    /// No probe: only statuses are checked.
    None,
    /// GET a URL.
    Url,
    /// Run a shell command.
    Cmd,
}

impl ProbeKind {
    fn next(self) -> Self {
        match self {
            Self::None => Self::Url,
            Self::Url => Self::Cmd,
            Self::Cmd => Self::None,
        }
    }

    fn previous(self) -> Self {
        self.next().next()
    }
}

/// A probe chosen in the replay form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// `--check-url`.
    Url(String),
    /// `--check-cmd`.
    Cmd(String),
}

/// Which field of the replay form has the cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayField {
    /// Number of attempts.
    Times,
    /// Duplicates or a fresh burst.
    Sends,
    /// Probe kind.
    ProbeKind,
    /// Probe URL or command.
    Probe,
    /// How long the state must hold still, with a probe.
    Settle,
}

/// The `R` form: how many attempts, and how to read the handler's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayForm {
    /// Delivery to replay.
    pub delivery_id: i64,
    /// Attempts, as typed.
    pub times: TextInput,
    /// What the attempts are.
    pub sends: Sends,
    /// Probe kind.
    pub probe_kind: ProbeKind,
    /// Probe URL, as typed.
    pub probe_url: TextInput,
    /// Probe command, as typed: apart from the URL, so that switching
    /// kind never hands a URL typed earlier to the shell.
    pub probe_cmd: TextInput,
    /// The settle window, as typed (`replay --settle`): a handler that
    /// works from a queue needs it longer than its delay.
    pub settle: TextInput,
    /// Field with the cursor.
    pub field: ReplayField,
    /// Why the last Enter was refused.
    pub error: Option<String>,
}

/// A replay the user asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayRequest {
    /// Delivery to replay.
    pub delivery_id: i64,
    /// Attempts (at least 1; 2 for a fresh burst).
    pub times: u32,
    /// Duplicates, or a fresh burst (`replay --fresh`).
    pub sends: Sends,
    /// How to read the handler's state, if at all.
    pub probe: Option<Probe>,
    /// How long the state must hold still to count as read.
    pub settle: Duration,
}

impl ReplayForm {
    /// The form for `delivery_id`, asking for 10 attempts without a probe.
    pub fn new(delivery_id: i64) -> Self {
        Self {
            delivery_id,
            times: TextInput::suggest("10"),
            sends: Sends::Duplicates,
            probe_kind: ProbeKind::None,
            probe_url: TextInput::default(),
            probe_cmd: TextInput::default(),
            settle: TextInput::suggest(portpreview_shared::duration::format_duration(DEFAULT_SETTLE)),
            field: ReplayField::Times,
            error: None,
        }
    }

    /// The form for `delivery_id` with this one's attempts and probe, the
    /// attempts suggested (typing replaces them).
    pub fn again(&self, delivery_id: i64) -> Self {
        Self {
            delivery_id,
            times: TextInput::suggest(self.times.text.clone()),
            field: ReplayField::Times,
            error: None,
            ..self.clone()
        }
    }

    /// Applies one key; on Enter, returns the request once it is valid.
    pub fn handle(&mut self, key: KeyEvent) -> (FormOutcome, Option<ReplayRequest>) {
        match key.code {
            KeyCode::Esc => return (FormOutcome::Cancel, None),
            KeyCode::Enter => {
                return match self.request() {
                    Ok(request) => (FormOutcome::Submit, Some(request)),
                    Err(error) => {
                        self.error = Some(error);
                        (FormOutcome::Editing, None)
                    }
                }
            }
            KeyCode::Tab | KeyCode::Down => self.field = self.next_field(),
            KeyCode::BackTab | KeyCode::Up => self.field = self.previous_field(),
            _ => match self.field {
                ReplayField::Times => {
                    if matches!(key.code, KeyCode::Char(c) if !c.is_ascii_digit()) {
                        return (FormOutcome::Editing, None);
                    }
                    self.times.handle(key);
                }
                ReplayField::Sends => match key.code {
                    KeyCode::Right | KeyCode::Left | KeyCode::Char(' ' | 'l' | 'h') => {
                        self.sends = self.sends.other();
                    }
                    KeyCode::Char('d') => self.sends = Sends::Duplicates,
                    KeyCode::Char('f') => self.sends = Sends::FreshBurst,
                    _ => {}
                },
                ReplayField::ProbeKind => match key.code {
                    KeyCode::Right | KeyCode::Char(' ' | 'l') => self.probe_kind = self.probe_kind.next(),
                    KeyCode::Left | KeyCode::Char('h') => self.probe_kind = self.probe_kind.previous(),
                    KeyCode::Char('n') => self.probe_kind = ProbeKind::None,
                    KeyCode::Char('u') => self.probe_kind = ProbeKind::Url,
                    KeyCode::Char('c') => self.probe_kind = ProbeKind::Cmd,
                    _ => {}
                },
                ReplayField::Probe => {
                    if let Some(probe) = self.probe_mut() {
                        probe.handle(key);
                    }
                }
                ReplayField::Settle => {
                    self.settle.handle(key);
                }
            },
        }
        self.error = None;
        (FormOutcome::Editing, None)
    }

    /// Takes pasted text into the field being edited, as [`TextInput::paste`]
    /// does; the count takes its digits only. Returns whether text past a
    /// line break was left out.
    pub fn paste(&mut self, text: &str) -> bool {
        self.error = None;
        match self.field {
            // Its digits, as typing takes only digits there.
            ReplayField::Times => {
                let (line, rest) = text.split_once(['\n', '\r']).unwrap_or((text, ""));
                let digits: String = line.chars().filter(char::is_ascii_digit).collect();
                // None leaves the field as it was, as a letter typed does.
                if !digits.is_empty() {
                    self.times.paste(&digits);
                }
                !rest.trim().is_empty()
            }
            ReplayField::Sends | ReplayField::ProbeKind => false,
            ReplayField::Probe => self.probe_mut().is_some_and(|probe| probe.paste(text)),
            ReplayField::Settle => self.settle.paste(text),
        }
    }

    /// The text of the probe kind chosen; none without a probe.
    pub fn probe(&self) -> Option<&TextInput> {
        match self.probe_kind {
            ProbeKind::None => None,
            ProbeKind::Url => Some(&self.probe_url),
            ProbeKind::Cmd => Some(&self.probe_cmd),
        }
    }

    fn probe_mut(&mut self) -> Option<&mut TextInput> {
        match self.probe_kind {
            ProbeKind::None => None,
            ProbeKind::Url => Some(&mut self.probe_url),
            ProbeKind::Cmd => Some(&mut self.probe_cmd),
        }
    }

    /// The probe and its settle window are fields only with a probe.
    fn next_field(&self) -> ReplayField {
        match (self.field, self.probe_kind) {
            (ReplayField::Times, _) => ReplayField::Sends,
            (ReplayField::Sends, _) => ReplayField::ProbeKind,
            (ReplayField::ProbeKind, ProbeKind::None) => ReplayField::Times,
            (ReplayField::ProbeKind, _) => ReplayField::Probe,
            (ReplayField::Probe, _) => ReplayField::Settle,
            (ReplayField::Settle, _) => ReplayField::Times,
        }
    }

    fn previous_field(&self) -> ReplayField {
        match (self.field, self.probe_kind) {
            (ReplayField::Times, ProbeKind::None) => ReplayField::ProbeKind,
            (ReplayField::Times, _) => ReplayField::Settle,
            (ReplayField::Sends, _) => ReplayField::Times,
            (ReplayField::ProbeKind, _) => ReplayField::Sends,
            (ReplayField::Probe, _) => ReplayField::ProbeKind,
            (ReplayField::Settle, _) => ReplayField::Probe,
        }
    }

    fn request(&self) -> Result<ReplayRequest, String> {
        let times = match self.times.text.parse::<u32>() {
            Ok(n) if (1..=MAX_TIMES).contains(&n) => n,
            _ => {
                return Err(format!(
                    "attempts: a number from 1 to {MAX_TIMES}, as replay --times takes"
                ))
            }
        };
        if self.sends == Sends::FreshBurst && times < 2 {
            return Err("a fresh burst needs 2 or more attempts: one copy holds no duplicate".into());
        }
        let value = self.probe().map_or("", |p| p.text.trim()).to_owned();
        let probe = match self.probe_kind {
            ProbeKind::None => None,
            _ if value.is_empty() => return Err("type the probe URL or command, or choose none".into()),
            // Checked here, so a typo keeps the form and what was typed.
            ProbeKind::Url if crate::replay::check_url::parse_url(&value).is_err() => {
                return Err("the probe URL must be http://host:port/path".into())
            }
            ProbeKind::Url => Some(Probe::Url(value)),
            ProbeKind::Cmd => Some(Probe::Cmd(value)),
        };
        let settle = match probe {
            None => DEFAULT_SETTLE,
            Some(_) => parse_settle(self.settle.text.trim()).map_err(|why| format!("settle: {why}"))?,
        };
        Ok(ReplayRequest {
            delivery_id: self.delivery_id,
            times,
            sends: self.sends,
            probe,
            settle,
        })
    }
}

/// Formats `e` can write: those `portpreview export` writes.
pub use crate::render::export::Format as ExportFormat;

/// The `e` form: pick a format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportForm {
    /// Delivery to export.
    pub delivery_id: i64,
    /// Format under the cursor.
    pub format: ExportFormat,
}

impl ExportForm {
    /// Applies one key: j/h/c pick at once, arrows move, Enter takes; Esc
    /// or `q`, as everywhere else that is not a text field, closes it.
    pub fn handle(&mut self, key: KeyEvent) -> (FormOutcome, Option<ExportFormat>) {
        let index = ExportFormat::ALL.iter().position(|f| *f == self.format).unwrap_or(0);
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') => (FormOutcome::Cancel, None),
            KeyCode::Enter => (FormOutcome::Submit, Some(self.format)),
            KeyCode::Char('j') => (FormOutcome::Submit, Some(ExportFormat::Json)),
            KeyCode::Char('h') => (FormOutcome::Submit, Some(ExportFormat::Har)),
            KeyCode::Char('c') => (FormOutcome::Submit, Some(ExportFormat::Curl)),
            KeyCode::Down | KeyCode::Tab => {
                self.format = ExportFormat::ALL[(index + 1) % ExportFormat::ALL.len()];
                (FormOutcome::Editing, None)
            }
            KeyCode::Up | KeyCode::BackTab => {
                self.format = ExportFormat::ALL[(index + ExportFormat::ALL.len() - 1) % ExportFormat::ALL.len()];
                (FormOutcome::Editing, None)
            }
            _ => (FormOutcome::Editing, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn typed(form: &mut ReplayForm, text: &str) {
        for c in text.chars() {
            form.handle(key(KeyCode::Char(c)));
        }
    }

    #[test]
    fn replay_form_asks_times_and_probe() {
        let mut form = ReplayForm::new(4);
        form.handle(key(KeyCode::Backspace));
        form.handle(key(KeyCode::Backspace));
        typed(&mut form, "x5");
        form.handle(key(KeyCode::Tab));
        assert_eq!(form.field, ReplayField::Sends);
        form.handle(key(KeyCode::Char('f')));
        form.handle(key(KeyCode::Tab));
        form.handle(key(KeyCode::Char('u')));
        form.handle(key(KeyCode::Tab));
        typed(&mut form, "http://127.0.0.1:3000/count");
        let (outcome, request) = form.handle(key(KeyCode::Enter));
        assert_eq!(outcome, FormOutcome::Submit);
        assert_eq!(
            request,
            Some(ReplayRequest {
                delivery_id: 4,
                times: 5,
                sends: Sends::FreshBurst,
                probe: Some(Probe::Url("http://127.0.0.1:3000/count".into())),
                settle: DEFAULT_SETTLE,
            })
        );
    }

    /// With a probe, the form asks how long the state must hold still, as
    /// `replay --settle` does: a handler working from a queue needs more
    /// than the default, which the verdict's advice says.
    #[test]
    fn a_probe_comes_with_its_settle_window() {
        let mut form = ReplayForm::new(4);
        form.handle(key(KeyCode::Tab));
        form.handle(key(KeyCode::Tab));
        form.handle(key(KeyCode::Char('u')));
        form.handle(key(KeyCode::Tab));
        typed(&mut form, "http://127.0.0.1:3000/count");
        form.handle(key(KeyCode::Tab));
        assert_eq!(form.field, ReplayField::Settle);
        typed(&mut form, "5");
        let (outcome, _) = form.handle(key(KeyCode::Enter));
        assert_eq!(outcome, FormOutcome::Editing, "a number is no duration");
        assert!(
            form.error.as_deref().is_some_and(|e| e.starts_with("settle: ")),
            "{:?}",
            form.error
        );
        typed(&mut form, "s");
        let (outcome, request) = form.handle(key(KeyCode::Enter));
        assert_eq!(outcome, FormOutcome::Submit);
        assert_eq!(request.map(|r| r.settle), Some(Duration::from_secs(5)));
        form.handle(key(KeyCode::Tab));
        assert_eq!(form.field, ReplayField::Times, "then round again");
    }

    #[test]
    fn a_suggested_count_is_replaced_by_what_is_typed_not_added_to() {
        let mut form = ReplayForm::new(4);
        typed(&mut form, "3");
        assert_eq!(form.times.text, "3", "not 103");
        typed(&mut form, "0");
        assert_eq!(form.times.text, "30", "then typing goes on as usual");

        let mut form = ReplayForm::new(4);
        form.handle(key(KeyCode::Tab));
        form.handle(key(KeyCode::BackTab));
        typed(&mut form, "x");
        assert_eq!(form.times.text, "10", "a key the field refuses leaves the suggestion");
        assert_eq!(form.handle(key(KeyCode::Enter)).1.map(|r| r.times), Some(10));

        let mut form = ReplayForm::new(4);
        form.handle(key(KeyCode::Backspace));
        assert_eq!(form.times.text, "", "Backspace clears the suggestion whole");

        let mut form = ReplayForm::new(4);
        form.handle(key(KeyCode::Left));
        form.handle(key(KeyCode::End));
        typed(&mut form, "3");
        assert_eq!(
            form.times.text, "3",
            "moving about leaves the suggestion to be replaced"
        );
        let mut form = ReplayForm::new(4);
        form.handle(key(KeyCode::Delete));
        assert_eq!(form.times.text, "", "Delete clears it too");
    }

    #[test]
    fn replay_form_refuses_zero_a_burst_of_one_an_empty_probe_and_a_bad_url() {
        let mut form = ReplayForm::new(1);
        form.times = TextInput::new("0");
        assert_eq!(form.handle(key(KeyCode::Enter)), (FormOutcome::Editing, None));
        assert!(form.error.is_some());
        form.times = TextInput::new("1");
        form.sends = Sends::FreshBurst;
        assert_eq!(form.handle(key(KeyCode::Enter)).1, None);
        assert!(
            form.error
                .as_deref()
                .is_some_and(|e| e.starts_with("a fresh burst needs 2")),
            "{:?}",
            form.error
        );
        form.times = TextInput::new("3");
        form.probe_kind = ProbeKind::Cmd;
        assert_eq!(form.handle(key(KeyCode::Enter)).1, None);
        form.probe_kind = ProbeKind::Url;
        form.probe_url = TextInput::new("not a url");
        assert_eq!(
            form.handle(key(KeyCode::Enter)),
            (FormOutcome::Editing, None),
            "a bad URL keeps the form open"
        );
        assert_eq!(form.probe_url.text, "not a url", "with what was typed");
        assert_eq!(form.handle(key(KeyCode::Esc)).0, FormOutcome::Cancel);
    }

    #[test]
    fn each_probe_kind_keeps_its_own_text() {
        let mut form = ReplayForm::new(4);
        form.handle(key(KeyCode::Tab));
        form.handle(key(KeyCode::Tab));
        form.handle(key(KeyCode::Char('u')));
        form.handle(key(KeyCode::Tab));
        typed(&mut form, "http://127.0.0.1:3000/count");
        form.handle(key(KeyCode::BackTab));
        form.handle(key(KeyCode::Char('c')));
        form.handle(key(KeyCode::Tab));
        assert_eq!(form.probe().map(|p| p.text.as_str()), Some(""), "cmd starts empty");
        typed(&mut form, "sqlite3 app.db 'select 1'");
        let (_, request) = form.handle(key(KeyCode::Enter));
        assert_eq!(
            request.and_then(|r| r.probe),
            Some(Probe::Cmd("sqlite3 app.db 'select 1'".into())),
            "the command alone, without the URL typed before"
        );
        form.handle(key(KeyCode::BackTab));
        form.handle(key(KeyCode::Char('u')));
        assert_eq!(
            form.probe().map(|p| p.text.as_str()),
            Some("http://127.0.0.1:3000/count"),
            "back on url, its text is still there"
        );
    }

    #[test]
    fn export_form_picks_by_letter_or_arrows() {
        let mut form = ExportForm {
            delivery_id: 1,
            format: ExportFormat::Json,
        };
        assert_eq!(
            form.handle(key(KeyCode::Char('h'))),
            (FormOutcome::Submit, Some(ExportFormat::Har))
        );
        form.handle(key(KeyCode::Up));
        assert_eq!(
            form.handle(key(KeyCode::Enter)),
            (FormOutcome::Submit, Some(ExportFormat::Curl))
        );
        for close in [KeyCode::Esc, KeyCode::Char('q')] {
            assert_eq!(form.handle(key(close)), (FormOutcome::Cancel, None));
        }
    }

    #[test]
    fn text_input_edits() {
        let mut input = TextInput::new("stripe charge");
        input.handle(KeyEvent::new(KeyCode::Char('w'), KeyModifiers::CONTROL));
        assert_eq!(input.text, "stripe ");
        input.handle(key(KeyCode::Backspace));
        input.handle(key(KeyCode::Char('!')));
        assert_eq!(input.text, "stripe!");
        assert_eq!(input.handle(key(KeyCode::Enter)), FormOutcome::Submit);
    }

    /// One Backspace takes what reads as one character: a family emoji of
    /// five code points, or a letter and its combining accent.
    #[test]
    fn backspace_takes_a_whole_character() {
        let mut input = TextInput::new("ab中👨\u{200d}👩\u{200d}👧e\u{301}");
        input.handle(key(KeyCode::Backspace));
        assert_eq!(input.text, "ab中👨\u{200d}👩\u{200d}👧");
        input.handle(key(KeyCode::Backspace));
        assert_eq!(input.text, "ab中");
    }
}
