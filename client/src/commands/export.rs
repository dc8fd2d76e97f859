//! `portpreview export <ID>`: a delivery as a fixture, a HAR file or a curl command.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::Context;

use crate::commands::guard::refuse_to_overwrite_a_database;
use crate::commands::show::{fetch, parse_id};
use crate::render;
use crate::store::{NewDelivery, Store};

pub use crate::render::export::Format;

/// Arguments of `portpreview export`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Delivery id, as `history` lists it.
    #[arg(value_name = "ID", value_parser = parse_id)]
    pub id: i64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
    /// Write to this file instead of stdout (`-`: stdout).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Aim the HAR URL or curl command here instead of the recorded target, as `replay --target` would.
    #[arg(long, value_name = "URL")]
    pub target: Option<String>,
    /// Keep secrets unmasked in the HAR file.
    #[arg(long)]
    pub reveal: bool,
}

/// Writes the export.
pub fn run(args: Args, db: &Path) -> anyhow::Result<ExitCode> {
    if let Some(flag) = args.target.as_deref().filter(|flag| !flag.contains("://")) {
        crate::target::Target::parse(flag).map_err(|err| err.named("--target"))?;
    }
    let store = Store::open_existing(db).map_err(|e| e.for_command(db))?;
    let delivery = fetch(&store, args.id, db)?;
    let text = render::export::export(&delivery, args.format, args.target.as_deref(), args.reveal)?;
    match args.output.as_deref().filter(|path| *path != Path::new("-")) {
        Some(path) => {
            refuse_to_overwrite_a_database(path, Some(db), "the export")?;
            if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                crate::private_file::create_folders(folder)
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            // A fixture keeps secrets as received, so replay can send them.
            crate::private_file::options()
                .write(true)
                .create(true)
                .truncate(true)
                .open(path)
                .and_then(|mut file| file.write_all(text.as_bytes()))
                .with_context(|| format!("cannot write {}", path.display()))?;
            // Said on stderr, as every note: stdout stays empty, as asked.
            let what = match args.format {
                Format::Json => "a fixture",
                Format::Har => "a HAR file",
                Format::Curl => "a curl command",
            };
            crate::to_stderr(format_args!(
                "Wrote delivery #{} as {what} to {}\n",
                args.id,
                portpreview_shared::sanitize::escape_str(&path.display().to_string())
            ));
        }
        None => std::io::stdout()
            .lock()
            .write_all(text.as_bytes())
            .context("cannot write to stdout")?,
    }
    if args.format == Format::Curl {
        warn_of_a_stale_signature(&delivery.request, args.id);
    }
    Ok(ExitCode::SUCCESS)
}

/// The curl command carries the recorded signature: past what its provider
/// accepts, the handler's refusal must not read as a bug in the handler.
fn warn_of_a_stale_signature(request: &NewDelivery, id: i64) {
    let too_old = crate::replay::provider_of(request).and_then(|provider| {
        crate::replay::signature_too_old(
            provider,
            &request.request_headers,
            &request.request_body,
            SystemTime::now(),
        )
    });
    if let Some(too_old) = too_old {
        crate::to_stderr(format_args!(
            "warning: {too_old}: a handler that checks signatures refuses this command's request; \
             `portpreview replay {id} --resign` sends it signed anew\n"
        ));
    }
}
