//! `e` and `y`: a delivery written out as a fixture, HAR or curl command,
//! to a file or (for `y`) to the clipboard.

use std::path::{Path, PathBuf};

use anyhow::Context;
use base64::Engine;

use crate::render;
use crate::store::Delivery;
use crate::whole_file::{self, Access, Existing};

use super::dialog::ExportFormat;

/// `PORTPREVIEW_CLIPBOARD=osc52|file` overrides the guess of whether the
/// terminal takes OSC 52 clipboard writes (documented with `y` in the README).
pub const CLIPBOARD_ENV: &str = "PORTPREVIEW_CLIPBOARD";

/// Terminals known to accept OSC 52 from applications (by `$TERM` or `$TERM_PROGRAM`).
const OSC52_TERMINALS: &[&str] = &[
    "xterm-kitty",
    "alacritty",
    "foot",
    "wezterm",
    "xterm-ghostty",
    "iTerm.app",
    "WezTerm",
    "ghostty",
    "vscode",
];

/// The text of `delivery` in `format`, as `portpreview export` writes it
/// (secrets masked in HAR, as on screen).
pub fn render(delivery: &Delivery, format: ExportFormat) -> anyhow::Result<String> {
    render::export::export(delivery, format, None, false)
}

/// Writes `text` to a new file `portpreview-<id>.<ext>` in `dir` (numbered
/// when the name is taken, never overwriting), and returns its path.
pub fn write_new_file(dir: &Path, id: i64, format: ExportFormat, text: &str) -> anyhow::Result<PathBuf> {
    for n in 1..1000 {
        let name = match n {
            1 => format.file_name(id),
            n => format!("portpreview-{id}-{n}.{}", format.extension()),
        };
        let path = dir.join(name);
        // A fixture keeps secrets as received, so replay can send them.
        match whole_file::write(&path, text.as_bytes(), Existing::Refuse, Access::Private) {
            Ok(()) => return Ok(path),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err).with_context(|| format!("cannot write {}", path.display())),
        }
    }
    anyhow::bail!("too many exports of #{id} in {}", dir.display())
}

/// Where exports go: the current directory, or the temp directory when it
/// cannot be written.
pub fn export_dir() -> PathBuf {
    match std::env::current_dir() {
        Ok(dir) if !dir.metadata().is_ok_and(|m| m.permissions().readonly()) => dir,
        _ => std::env::temp_dir(),
    }
}

/// What `PORTPREVIEW_CLIPBOARD` is set to, if anything.
pub fn clipboard_setting() -> Option<String> {
    std::env::var(CLIPBOARD_ENV).ok().filter(|v| !v.is_empty())
}

/// True when the terminal is known to take OSC 52 clipboard writes.
pub fn clipboard_supported() -> bool {
    let var = |name| std::env::var(name).unwrap_or_default();
    match clipboard_setting().as_deref() {
        Some("osc52") => return true,
        Some("file") => return false,
        _ => {}
    }
    // Inside tmux or screen the sequence is dropped unless configured
    // (tmux's `set-clipboard on` or `external`), and nothing tells the
    // sender: guessed on, a copy would be lost unseen. The file always
    // arrives, and its status line names the setting that turns OSC 52 on.
    if !var("TMUX").is_empty() || var("TERM").starts_with("screen") {
        return false;
    }
    let (term, program) = (var("TERM"), var("TERM_PROGRAM"));
    OSC52_TERMINALS.iter().any(|t| *t == term || *t == program)
}

/// The OSC 52 sequence that puts `text` on the system clipboard. Only our
/// own base64 goes inside it, so nothing from the delivery reaches the terminal raw.
pub fn osc52(text: &str) -> String {
    format!(
        "\x1b]52;c;{}\x07",
        base64::engine::general_purpose::STANDARD.encode(text)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::source::test_delivery;

    #[test]
    fn every_format_renders() {
        let d = test_delivery(3);
        let json = render(&d, ExportFormat::Json).unwrap();
        assert!(json.contains("\"path\": \"/hook/3\""), "{json}");
        let har = render(&d, ExportFormat::Har).unwrap();
        assert!(
            har.contains("\"version\": \"1.2\"") && !har.contains("sk_live_secret"),
            "{har}"
        );
        let curl = render(&d, ExportFormat::Curl).unwrap();
        assert!(
            curl.contains("curl ") && curl.contains("http://127.0.0.1:3000/hook/3"),
            "{curl}"
        );
    }

    #[test]
    fn a_cut_body_is_no_curl() {
        let mut d = test_delivery(3);
        d.request.request_body_size = 10_000;
        assert!(render(&d, ExportFormat::Curl).is_err());
    }

    #[test]
    fn files_are_never_overwritten() {
        let dir = std::env::temp_dir().join(format!("portpreview-tui-export-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let first = write_new_file(&dir, 7, ExportFormat::Har, "a").unwrap();
        let second = write_new_file(&dir, 7, ExportFormat::Har, "b").unwrap();
        assert_eq!(first.file_name().unwrap(), "portpreview-7.har");
        assert_eq!(second.file_name().unwrap(), "portpreview-7-2.har");
        assert_eq!(std::fs::read_to_string(&first).unwrap(), "a");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn osc52_carries_only_base64() {
        let seq = osc52("curl 'x'\x1b[2J");
        assert!(seq.starts_with("\x1b]52;c;") && seq.ends_with('\x07'));
        assert!(!seq[1..seq.len() - 1].contains('\x1b'));
    }
}
