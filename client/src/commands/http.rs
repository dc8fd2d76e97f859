//! `portpreview http <PORT|URL>`: forward a public URL to a local port.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::ValueEnum;

/// How the Host header reaches the local handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HostHeader {
    /// Set Host to the local target (what most local servers expect).
    Rewrite,
    /// Keep the Host the caller sent.
    Preserve,
}

/// How deliveries are printed without a TUI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One readable line per delivery.
    Text,
    /// One JSON object per line.
    Json,
}

/// Arguments of `portpreview http`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Local port or URL to forward to (3000, localhost:3000, http://127.0.0.1:3000).
    #[arg(value_name = "PORT|URL")]
    pub target: String,
    /// Relay to use (ws://, wss://, http:// or https://); none: run one in-process.
    #[arg(long, env = "PORTPREVIEW_SERVER")]
    pub server: Option<String>,
    /// Tunnel name to ask for.
    #[arg(long)]
    pub name: Option<String>,
    /// Token for the relay.
    #[arg(long, env = "PORTPREVIEW_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Extra CA certificate (PEM) to trust for a wss:// relay.
    #[arg(long, value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
    /// Host header sent to the local handler.
    #[arg(long, value_enum, default_value_t = HostHeader::Rewrite)]
    pub host_header: HostHeader,
    /// Print one line per delivery instead of the TUI.
    #[arg(long)]
    pub no_tui: bool,
    /// Format of the lines printed without a TUI.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Fields of the body that identify an event without an ID (names or JSON pointers).
    #[arg(long, value_delimiter = ',', value_name = "FIELDS")]
    pub key_fields: Vec<String>,
    /// Address for the in-process relay when no --server is given.
    #[arg(long, default_value = "127.0.0.1:0", value_name = "ADDR")]
    pub local_listen: String,
}

impl Args {
    /// True when deliveries will be shown in the TUI.
    pub fn uses_tui(&self) -> bool {
        !self.no_tui && self.log_format == LogFormat::Text && std::io::stdout().is_terminal()
    }
}

/// Runs the tunnel until ctrl-c.
pub async fn run(args: Args, db: &Path) -> anyhow::Result<ExitCode> {
    let _ = (args, db);
    anyhow::bail!("the tunnel is being wired up")
}
