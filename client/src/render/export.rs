//! A delivery written out for another tool, as `portpreview export` and the
//! TUI's `e` both write it: one function, so the two never drift apart.

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
        Format::Har => har_file(std::slice::from_ref(delivery), target, reveal)?,
        Format::Curl => curl_command(delivery, target)?,
    })
}

/// Deliveries in one file: one as [`export`] writes it; several as a HAR
/// log with an entry each, in the order given, or a shell script of their
/// curl commands, which sends them one after another. A fixture holds one
/// delivery, so several have no JSON file.
pub fn export_together(
    deliveries: &[Delivery],
    format: Format,
    target: Option<&str>,
    reveal: bool,
) -> anyhow::Result<String> {
    if let [delivery] = deliveries {
        return export(delivery, format, target, reveal);
    }
    match format {
        Format::Json => bail!(
            "a fixture holds one delivery; export several to a folder, one fixture each: -o a folder there already, or a path ending in /"
        ),
        Format::Har => har_file(deliveries, target, reveal),
        Format::Curl => {
            let mut script = String::new();
            for delivery in deliveries {
                refuse_a_cut_body(delivery, format)?;
                if !script.is_empty() {
                    script.push('\n');
                }
                // Only the id: a path or event key is the caller's text,
                // and a newline in it would end the comment.
                script.push_str(&format!("# PortPreview delivery #{}\n", delivery.id));
                script.push_str(&curl_command(delivery, target)?);
                // An answer seldom ends its line: without this, the next
                // one would be printed on the same line.
                script.push_str("echo\n");
            }
            Ok(script)
        }
    }
}

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

fn har_file(deliveries: &[Delivery], target: Option<&str>, reveal: bool) -> anyhow::Result<String> {
    let entries = deliveries
        .iter()
        .map(|d| {
            let r = &d.request;
            Ok(super::har::entry(d, &aimed_url(&r.target, target, &r.path)?, reveal))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(format!(
        "{}\n",
        super::json::to_terminal_text(&super::har::document(entries))
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
}
