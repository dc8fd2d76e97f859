//! A delivery written out for another tool, as `portpreview export` and the
//! TUI's `e` both write it: one function, so the two never drift apart.

use anyhow::ensure;

use crate::fixture::Fixture;
use crate::replay::plan::{aimed_url, resolve_target};
use crate::store::Delivery;

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

    /// File extension and name shown.
    pub fn name(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::Har => "har",
            Self::Curl => "curl",
        }
    }
}

/// The text of `delivery` in `format`, aimed where `replay --target`
/// would send it. A fixture or curl command sends the request again, so a
/// request stored cut short is refused in both: either would send another
/// body under the delivery's name. HAR shows what was stored, cut or not.
pub fn export(delivery: &Delivery, format: Format, target: Option<&str>, reveal: bool) -> anyhow::Result<String> {
    let r = &delivery.request;
    if format != Format::Har {
        ensure!(
            !r.request_truncated(),
            "delivery #{} was stored cut at {} of {} bytes: {} would not send the same body",
            delivery.id,
            r.request_body.len(),
            r.request_body_size,
            match format {
                Format::Json => "a replay of the fixture",
                _ => "a curl command",
            }
        );
    }
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
        Format::Har => {
            let har = super::har::document(delivery, &aimed_url(&r.target, target, &r.path)?, reveal);
            format!("{}\n", super::json::to_terminal_text(&har))
        }
        Format::Curl => {
            let (endpoint, path) = resolve_target(&r.target, target, &r.path)?;
            super::curl::command(r, &endpoint, &path)
        }
    })
}
