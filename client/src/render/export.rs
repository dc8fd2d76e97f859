//! A delivery written out for another tool, as `portpreview export` and the
//! TUI's `e` both write it: one function, so the two never drift apart.

use std::io::{self, Write};

use anyhow::bail;

use crate::fixture::Fixture;
use crate::replay::plan::{aimed_url, resolve_target};
use crate::store::{size_unknown_past, Delivery};

/// What an export writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A fixture that `replay --from` and `check` read (secrets kept, so replays stay exact).
    Json,
    /// HAR 1.2, for browser devtools (secrets masked unless --reveal).
    Har,
    /// A self-contained shell command that sends the request again, byte for byte.
    Curl,
}

impl Format {
    /// All formats, in the order the TUI's form lists them.
    pub const ALL: [Format; 3] = [Format::Json, Format::Har, Format::Curl];

    /// The `--format` value, as it is shown.
    pub fn name(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::Har => "har",
            Self::Curl => "curl",
        }
    }

    /// The extension of a file of this format: a curl command is a shell script.
    pub fn extension(self) -> &'static str {
        match self {
            Self::Curl => "sh",
            format => format.name(),
        }
    }

    /// The format a file named `path` is in, by its extension: `.har` a
    /// HAR file, `.sh` curl commands, `.json` a fixture.
    pub fn of_file(path: &std::path::Path) -> Option<Format> {
        let extension = path.extension()?.to_str()?;
        Self::ALL
            .into_iter()
            .find(|format| format.extension().eq_ignore_ascii_case(extension))
    }

    /// The name an export of delivery `id` is given in a folder.
    pub fn file_name(self, id: i64) -> String {
        format!("portpreview-{id}.{}", self.extension())
    }

    /// What a file of this format is, in words.
    pub fn what(self) -> &'static str {
        match self {
            Self::Json => "a fixture",
            Self::Har => "a HAR file",
            Self::Curl => "a curl command",
        }
    }
}

/// The text of `delivery` in `format`, aimed where `replay --target`
/// would send it.
pub fn export(delivery: &Delivery, format: Format, target: Option<&str>, reveal: bool) -> anyhow::Result<String> {
    refuse_a_cut_body(delivery, format)?;
    let r = &delivery.request;
    Ok(match format {
        Format::Json => {
            let mut fixture = Fixture::from_delivery(delivery);
            if let Some(flag) = target {
                // A fixture's target is a base that `replay --from` puts
                // before its path, so a flag's own path becomes the path.
                let (endpoint, path) = resolve_target(&r.target, Some(flag), &r.path)?;
                fixture.target = endpoint.url("");
                fixture.path = path;
            }
            fixture.to_json()
        }
        Format::Har => har_file(delivery, target, reveal)?,
        Format::Curl => curl_command(delivery, target)?,
    })
}

/// Why `delivery` cannot be exported in `format` aimed at `target`, if it
/// cannot: what [`export`] would fail on, found without rendering it, so
/// that every delivery of an export is checked before a byte is written.
pub fn check(delivery: &Delivery, format: Format, target: Option<&str>) -> anyhow::Result<()> {
    refuse_a_cut_body(delivery, format)?;
    let r = &delivery.request;
    resolve_target(&r.target, target, &r.path)?;
    Ok(())
}

/// Whether `count` deliveries go into one file of `format`: a fixture
/// holds one, so several have no JSON file.
pub fn check_together(count: usize, format: Format) -> anyhow::Result<()> {
    if count > 1 && format == Format::Json {
        bail!(
            "a fixture holds one delivery; export several to a folder, one fixture each: -o a folder there already, or a path ending in /"
        );
    }
    Ok(())
}

/// Writes the deliveries `ids` names to `out` as one file, each read with
/// `read` only when its turn comes, so that an export of many large
/// bodies holds one at a time: one as [`export`] writes it; several as a
/// HAR log with an entry each, in the order given, or a shell script of
/// their curl commands, which sends them one after another. The caller
/// has run [`check`] and [`check_together`] over them.
pub fn write_together(
    out: &mut dyn Write,
    ids: &[i64],
    read: &mut dyn FnMut(i64) -> io::Result<Delivery>,
    format: Format,
    target: Option<&str>,
    reveal: bool,
) -> io::Result<()> {
    if let [id] = ids {
        return out.write_all(
            export(&read(*id)?, format, target, reveal)
                .map_err(io::Error::other)?
                .as_bytes(),
        );
    }
    match format {
        Format::Json => Err(io::Error::other("a fixture holds one delivery")),
        Format::Har => {
            // The log around its entries, as the whole document prints it.
            let empty = super::json::to_terminal_text(&super::har::document(Vec::new()));
            let (head, tail) = empty
                .split_once(EMPTY_ENTRIES)
                .ok_or_else(|| io::Error::other("a HAR log without its entries"))?;
            write!(out, "{head}\"entries\": ")?;
            let entries = ids.iter().map(|&id| {
                let d = read(id)?;
                let r = &d.request;
                let url = aimed_url(&r.target, target, &r.path).map_err(io::Error::other)?;
                Ok(super::har::entry(&d, &url, reveal))
            });
            let opened = super::json::write_terminal_items_at(out, entries, ENTRIES_DEPTH)?;
            super::json::close_terminal_array_at(out, opened, ENTRIES_DEPTH)?;
            writeln!(out, "{tail}")
        }
        Format::Curl => {
            for (n, &id) in ids.iter().enumerate() {
                let delivery = read(id)?;
                if n > 0 {
                    writeln!(out)?;
                }
                // Only the id: a path or event key is the caller's text,
                // and a newline in it would end the comment.
                writeln!(out, "# PortPreview delivery #{}", delivery.id)?;
                out.write_all(curl_command(&delivery, target).map_err(io::Error::other)?.as_bytes())?;
                // An answer seldom ends its line: without this, the next
                // one would be printed on the same line.
                writeln!(out, "echo")?;
            }
            Ok(())
        }
    }
}

/// How a HAR log with no entries prints them.
const EMPTY_ENTRIES: &str = "\"entries\": []";

/// How deep a HAR log's entries are: in the array under `log`.
const ENTRIES_DEPTH: usize = 3;

/// A fixture or curl command sends the request again, so a request stored
/// cut short is refused in both: either would send another body under the
/// delivery's name. HAR shows what was stored, cut or not.
fn refuse_a_cut_body(delivery: &Delivery, format: Format) -> anyhow::Result<()> {
    let r = &delivery.request;
    if format == Format::Har || !r.request_truncated() {
        return Ok(());
    }
    let stored = r.request_body.len();
    let cut = if size_unknown_past(stored as u64, r.request_body_size) {
        format!("was cut short after {stored} bytes")
    } else {
        format!("was stored cut at {stored} of {} bytes", r.request_body_size)
    };
    let resends = match format {
        Format::Json => "a replay of the fixture",
        _ => "a curl command",
    };
    bail!(
        "delivery #{} {cut}: {resends} would not send the same body",
        delivery.id
    )
}

fn har_file(delivery: &Delivery, target: Option<&str>, reveal: bool) -> anyhow::Result<String> {
    let r = &delivery.request;
    let entry = super::har::entry(delivery, &aimed_url(&r.target, target, &r.path)?, reveal);
    Ok(format!(
        "{}\n",
        super::json::to_terminal_text(&super::har::document(vec![entry]))
    ))
}

fn curl_command(delivery: &Delivery, target: Option<&str>) -> anyhow::Result<String> {
    let r = &delivery.request;
    let (endpoint, path) = resolve_target(&r.target, target, &r.path)?;
    Ok(super::curl::command(r, &endpoint, &path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::size_past_cut;
    use crate::tui::source::test_delivery;

    #[test]
    fn a_body_that_broke_off_is_never_exported_to_be_sent_again() {
        let mut d = test_delivery(31);
        d.request.request_body = b"{\"id\":".to_vec();
        d.request.request_body_size = size_past_cut(6);
        for format in [Format::Json, Format::Curl] {
            let err = export(&d, format, None, false).unwrap_err().to_string();
            assert!(err.starts_with("delivery #31 was cut short after 6 bytes: "), "{err}");
        }
        assert!(export(&d, Format::Har, None, false).is_ok());
    }

    /// Written an entry at a time, a HAR log of several deliveries is the
    /// document they make together, byte for byte.
    #[test]
    fn a_har_log_written_as_it_is_read_is_the_whole_document() {
        let deliveries = [test_delivery(3), test_delivery(9)];
        let mut read = |id: i64| {
            (deliveries.iter().find(|d| d.id == id).cloned()).ok_or_else(|| io::Error::other("no such delivery"))
        };
        let mut written = Vec::new();
        write_together(&mut written, &[9, 3], &mut read, Format::Har, None, false).unwrap();
        let entries = [9, 3]
            .map(|id| {
                let d = read(id).unwrap();
                super::super::har::entry(&d, &aimed_url(&d.request.target, None, &d.request.path).unwrap(), false)
            })
            .to_vec();
        let whole = format!(
            "{}\n",
            super::super::json::to_terminal_text(&super::super::har::document(entries))
        );
        assert_eq!(String::from_utf8(written).unwrap(), whole);
    }
}
