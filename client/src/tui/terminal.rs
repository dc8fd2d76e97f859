//! Taking the terminal over and always giving it back.

use std::io;
use std::ops::{Deref, DerefMut};

use ratatui::DefaultTerminal;

/// The terminal in raw mode on the alternate screen. Dropping it restores
/// the terminal, so an error return gives it back like a quit does; a
/// panic hook (installed by `ratatui::try_init`) covers panics.
pub struct TerminalGuard {
    terminal: DefaultTerminal,
}

impl TerminalGuard {
    /// Enters raw mode and the alternate screen.
    pub fn enter() -> io::Result<Self> {
        match ratatui::try_init() {
            Ok(terminal) => Ok(Self { terminal }),
            Err(err) => {
                // Raw mode may already be on when the alternate screen failed.
                ratatui::restore();
                Err(err)
            }
        }
    }
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
        ratatui::restore();
    }
}
