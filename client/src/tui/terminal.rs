//! Taking the terminal over and always giving it back.

use std::io;
use std::ops::{Deref, DerefMut};

use crossterm::event::{DisableBracketedPaste, EnableBracketedPaste};
use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};
use ratatui::widgets::Widget;
use ratatui::DefaultTerminal;

use crate::store::recorder::WRITER_THREAD;

/// Whether stdout is a terminal that can draw a full-screen UI.
pub fn can_draw() -> bool {
    crate::takes_escapes(&std::io::stdout())
}

/// The terminal in raw mode on the alternate screen. Dropping it restores
/// the terminal, so an error return gives it back like a quit does; a
/// panic hook installed by [`TerminalGuard::enter`] covers panics.
pub struct TerminalGuard {
    terminal: DefaultTerminal,
    /// Given back to the shell by a stop, until [`TerminalGuard::resume`].
    given_back: bool,
    /// `NO_COLOR` is set: frames are drawn without colours.
    colorless: bool,
}

impl TerminalGuard {
    /// Enters raw mode and the alternate screen, as `ratatui::try_init`
    /// does, but with a panic hook that gives the terminal back in silence
    /// (see [`give_back`]).
    pub fn enter() -> io::Result<Self> {
        // NO_COLOR asks for no colour, not for no emphasis. crossterm
        // writes a colour it was told to leave out as a bare `CSI m`,
        // which ends every attribute: the reversed row that marks the
        // selection went with the colours. So crossterm writes colours, and
        // each frame is drawn without them (`draw_widget`).
        let colorless = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
        if colorless {
            crossterm::style::force_color_output(true);
        }
        report_panics_over_the_screen();
        crate::logging::set_screen_taken(true);
        let taken = crossterm::terminal::enable_raw_mode()
            .and_then(|()| {
                crossterm::execute!(
                    io::stdout(),
                    crossterm::terminal::EnterAlternateScreen,
                    EnableBracketedPaste
                )
            })
            .and_then(|()| DefaultTerminal::new(ratatui::backend::CrosstermBackend::new(io::stdout())));
        match taken {
            Ok(terminal) => Ok(Self {
                terminal,
                given_back: false,
                colorless,
            }),
            Err(err) => {
                // Raw mode may already be on when the alternate screen failed.
                give_back();
                crate::logging::set_screen_taken(false);
                Err(err)
            }
        }
    }
}

#[cfg(unix)]
impl TerminalGuard {
    /// ctrl-z: gives the terminal back and stops the process as a shell's
    /// job control expects. It is taken again by [`TerminalGuard::resume`]
    /// once the process is continued (`fg` sends SIGCONT), not here: the
    /// stop is the whole process's, another thread may be the one to take
    /// it, and this one went on to take the screen back before the process
    /// had stopped, leaving the shell's prompt on the TUI's screen.
    pub fn suspend(&mut self) -> io::Result<()> {
        use rustix::process::{getpid, kill_process, Signal};
        // The shell's prompt needs its cursor, as a quit leaves it.
        self.terminal.show_cursor()?;
        give_back();
        self.given_back = true;
        // Raw mode kept the shell's ctrl-z from stopping us: stop ourselves,
        // with the signal nothing catches (the TUI listens for SIGTSTP to
        // get here). Not stopped, no SIGCONT will come to take it back.
        if let Err(err) = kill_process(getpid(), Signal::STOP) {
            self.resume()?;
            return Err(err.into());
        }
        Ok(())
    }

    /// Draws `widget` over the whole screen, its colours left out when
    /// `NO_COLOR` asks.
    pub fn draw_widget(&mut self, widget: impl Widget) -> io::Result<()> {
        let colorless = self.colorless;
        self.terminal
            .draw(|frame| {
                let area = frame.area();
                frame.render_widget(widget, area);
                if colorless {
                    without_colors(frame.buffer_mut());
                }
            })
            .map(drop)
    }

    /// Whether a stop gave the terminal to the shell and it has not been
    /// taken back: nothing may be drawn meanwhile.
    pub fn is_given_back(&self) -> bool {
        self.given_back
    }

    /// Takes the terminal again after the process was stopped and continued,
    /// whatever the shell did to it meanwhile, and draws the screen afresh.
    pub fn resume(&mut self) -> io::Result<()> {
        self.given_back = false;
        // Stopped from outside, the shell put its own modes back while
        // crossterm still counts raw mode as on, which makes enabling it a
        // no-op: leaving it first has it set again.
        crossterm::terminal::disable_raw_mode()?;
        crossterm::terminal::enable_raw_mode()?;
        crossterm::execute!(
            io::stdout(),
            crossterm::terminal::EnterAlternateScreen,
            EnableBracketedPaste
        )?;
        self.terminal.hide_cursor()?;
        self.terminal.clear()
    }
}

/// `buf` in the terminal's own colours, its bold and reversed text kept.
/// A background colour marks something (the open delivery's row, a
/// badge): reverse video marks it instead.
fn without_colors(buf: &mut Buffer) {
    for cell in &mut buf.content {
        if cell.bg != Color::Reset {
            cell.modifier.insert(Modifier::REVERSED);
        }
        cell.set_fg(Color::Reset).set_bg(Color::Reset);
    }
}

/// Reports panics while a TUI has the screen (see
/// [`crate::logging::set_screen_taken`]); other panics are reported as
/// they would be without a TUI. Installed once for the whole process.
///
/// A panic that ends the TUI gives the terminal back before it is
/// reported. Some panics are caught and the TUI carries on: the history
/// writer's own, and a tokio task's (an exchange, a save to a file), which
/// its owner gets as an error. For those the screen stays, and the panic
/// goes to the log instead of over the TUI; a panic that ends the TUI
/// that way still gives the terminal back as it unwinds, through
/// [`TerminalGuard`]'s drop.
fn report_panics_over_the_screen() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !crate::logging::screen_taken() {
                report(info);
            } else if std::thread::current().name() == Some(WRITER_THREAD) {
                tracing::error!(%info, "internal error in the history writer");
            } else if let Some(task) = tokio::task::try_id() {
                tracing::error!(%info, %task, "internal error in a task");
            } else {
                give_back();
                report(info);
            }
        }));
    });
}

impl Deref for TerminalGuard {
    type Target = DefaultTerminal;

    fn deref(&self) -> &DefaultTerminal {
        &self.terminal
    }
}

impl DerefMut for TerminalGuard {
    fn deref_mut(&mut self) -> &mut DefaultTerminal {
        &mut self.terminal
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        let _ = self.terminal.show_cursor();
        give_back();
        crate::logging::set_screen_taken(false);
    }
}

/// Leaves raw mode and the alternate screen. A terminal closed under the
/// TUI cannot take that, nor any word of why, so nothing is said:
/// `ratatui::restore` would say it with `eprintln!`, which panics on a
/// closed terminal, and that panic, in a drop or a panic hook, aborts
/// the process before the tunnel says goodbye to the relay.
pub fn give_back() {
    let _ = crossterm::execute!(io::stdout(), DisableBracketedPaste);
    let _ = ratatui::try_restore();
}

/// Whether an error reading, drawing on or taking back the terminal says
/// it is gone (its window closed, its session ended): the user's way of
/// ending the TUI, as the hangup that usually comes with it is, not a
/// failure.
#[cfg(target_os = "linux")]
pub fn is_gone(err: &io::Error) -> bool {
    use rustix::io::Errno;
    [Errno::IO, Errno::NXIO, Errno::PIPE]
        .iter()
        .any(|errno| err.raw_os_error() == Some(errno.raw_os_error()))
}

/// See the Linux one.
#[cfg(not(target_os = "linux"))]
pub fn is_gone(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::BrokenPipe
}

#[cfg(test)]
mod tests {
    use ratatui::layout::Rect;
    use ratatui::style::Style;

    use super::*;

    #[test]
    fn a_frame_without_colors_keeps_its_emphasis() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 4, 1));
        buf.set_string(
            0,
            0,
            "ab",
            Style::new()
                .fg(Color::Cyan)
                .bg(Color::Red)
                .add_modifier(Modifier::REVERSED),
        );
        buf.set_string(2, 0, "cd", Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD));
        let mut marked = Buffer::empty(Rect::new(0, 1, 4, 1));
        marked.set_string(0, 1, "ef", Style::new().bg(Color::DarkGray));
        buf.merge(&marked);
        without_colors(&mut buf);
        for (x, y, modifier) in [
            (0, 0, Modifier::REVERSED),
            (3, 0, Modifier::BOLD),
            (1, 1, Modifier::REVERSED),
        ] {
            let cell = &buf[(x, y)];
            assert_eq!((cell.fg, cell.bg), (Color::Reset, Color::Reset));
            assert!(cell.modifier.contains(modifier), "{x}: {:?}", cell.modifier);
        }
    }
}
