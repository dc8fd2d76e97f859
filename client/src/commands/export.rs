//! `portpreview export <ID>…`: deliveries as fixtures, a HAR file or curl commands.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::Context;

use crate::commands::guard::refuse_to_overwrite_a_database;
use crate::commands::show::{fetch, parse_id};
use crate::render::export::{export, export_together};
use crate::store::{Delivery, NewDelivery};
use crate::whole_file::{self, Access, Existing};

pub use crate::render::export::Format;

/// Arguments of `portpreview export`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Delivery ids, as `history` lists them: several make one HAR file or one curl script, or one file each with -o FOLDER/.
    #[arg(value_name = "ID", required = true, num_args = 1.., value_parser = parse_id)]
    pub ids: Vec<i64>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
    /// Write to this file instead of stdout (`-`: stdout); to a folder (one that exists, or ending in `/`), one file each, named portpreview-ID.json, .har or .sh.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Aim the fixture, the HAR URL or the curl command here instead of the recorded target, as `replay --target` would.
    #[arg(long, value_name = "URL")]
    pub target: Option<String>,
    /// Keep secrets unmasked in the HAR file (fixtures and curl commands are never masked: they must replay exactly).
    #[arg(long)]
    pub reveal: bool,
}

/// Writes the export; `db_named` when `--db` (or `PORTPREVIEW_DB`)
/// chose the history, so that a hint to run another command names it too.
pub fn run(mut args: Args, db: &Path, db_named: bool) -> anyhow::Result<ExitCode> {
    // A delivery named twice (`export {12..18} 15`) is exported once, in the
    // first place it was named: in a folder, a second copy could not be
    // written beside the first.
    let mut named = std::collections::HashSet::new();
    args.ids.retain(|id| named.insert(*id));
    if let Some(flag) = args.target.as_deref().filter(|flag| !flag.contains("://")) {
        crate::target::Target::parse(flag)
            .map_err(|err| anyhow::anyhow!("{}; see portpreview export --help", err.named("--target")))?;
    }
    if args.reveal && args.format != Format::Har {
        crate::to_stderr(format_args!(
            "warning: --reveal is not used: only HAR files are masked; fixtures and curl commands keep every \
             header as received, so they replay exactly\n"
        ));
    }
    let store = super::open_history(db)?;
    // All read before anything is written: a mistyped id leaves no export half done.
    let deliveries = args
        .ids
        .iter()
        .map(|id| fetch(&store, *id, db))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let (format, target) = (args.format, args.target.as_deref());
    match args.output.as_deref().filter(|path| *path != Path::new("-")) {
        Some(folder) if is_a_folder(folder) => {
            let paths: Vec<PathBuf> = deliveries.iter().map(|d| folder.join(format.file_name(d.id))).collect();
            for path in &paths {
                may_write(path, db, Existing::Refuse)?;
            }
            // All rendered before any is written: one that cannot be (a body
            // stored cut short) leaves no export half done.
            let texts = deliveries
                .iter()
                .map(|d| export(d, format, target, args.reveal))
                .collect::<anyhow::Result<Vec<_>>>()?;
            for (n, (path, text)) in paths.iter().zip(&texts).enumerate() {
                if let Err(err) = write_file(path, text, Existing::Refuse) {
                    // All or none, so that the same command can be run
                    // again once the cause is mended.
                    for written in &paths[..n] {
                        let _ = std::fs::remove_file(written);
                    }
                    return Err(err);
                }
            }
            for (path, delivery) in paths.iter().zip(&deliveries) {
                wrote(&which([delivery]), format.what(), path);
            }
        }
        Some(path) => {
            let text = export_together(&deliveries, format, target, args.reveal)?;
            may_write(path, db, Existing::Replace)?;
            write_file(path, &text, Existing::Replace)?;
            let what = match format {
                Format::Curl if deliveries.len() > 1 => "curl commands",
                _ => format.what(),
            };
            wrote(&which(&deliveries), what, path);
        }
        None => std::io::stdout()
            .lock()
            .write_all(export_together(&deliveries, format, target, args.reveal)?.as_bytes())
            .context("cannot write to stdout")?,
    }
    let portpreview = super::portpreview_command(db, db_named);
    note_replay_attempts(&deliveries, &portpreview);
    if format == Format::Curl {
        for delivery in &deliveries {
            warn_of_a_stale_signature(&delivery.request, delivery.id);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// True when `-o` names a folder: one that exists, or a path ending in
/// `/`, which says so before the folder is made.
fn is_a_folder(path: &Path) -> bool {
    path.is_dir() || path.as_os_str().as_encoded_bytes().ends_with(b"/")
}

/// Fails when the export must not go to `path`: over a database, or, when
/// PortPreview named the file, over one already there (a fixture edited by
/// hand since an earlier export, say).
fn may_write(path: &Path, db: &Path, existing: Existing) -> anyhow::Result<()> {
    refuse_to_overwrite_a_database(path, Some(db), "the export")?;
    if existing == Existing::Refuse && path.symlink_metadata().is_ok() {
        anyhow::bail!("{} exists: remove it, or export to another folder", shown(path));
    }
    Ok(())
}

/// Writes `text` to `path`, which [`may_write`] allowed, its folders made
/// as needed: whole, or not at all.
fn write_file(path: &Path, text: &str, existing: Existing) -> anyhow::Result<()> {
    if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        crate::private_file::create_folders(folder).with_context(|| format!("cannot write {}", shown(path)))?;
    }
    // A fixture keeps secrets as received, so replay can send them.
    whole_file::write(path, text.as_bytes(), existing, Access::Private)
        .with_context(|| format!("cannot write {}", shown(path)))
}

/// Says on stderr, as every note, what went to `path`: stdout stays
/// empty, as asked.
fn wrote(which: &str, what: &str, path: &Path) {
    crate::to_stderr(format_args!("Wrote {which} as {what} to {}\n", shown(path)));
}

/// A path as it may be shown on a terminal.
fn shown(path: &Path) -> String {
    portpreview_shared::sanitize::escape_str(&path.display().to_string()).into_owned()
}

/// IDs a note names one by one; past them, the first few and the last.
const IDS_NAMED: usize = 8;

/// `delivery #12`, `deliveries #12 and #15`, `deliveries #12, #15 and #18`;
/// of many, `100 deliveries: #1, #2, #3, … and #100`, on one line.
fn which<'a>(deliveries: impl IntoIterator<Item = &'a Delivery>) -> String {
    let ids: Vec<String> = deliveries.into_iter().map(|d| format!("#{}", d.id)).collect();
    match ids.as_slice() {
        [one] => format!("delivery {one}"),
        many if many.len() > IDS_NAMED => format!(
            "{} deliveries: {}, … and {}",
            many.len(),
            many[..IDS_NAMED - 1].join(", "),
            many[many.len() - 1]
        ),
        [rest @ .., last] => format!("deliveries {} and {last}", rest.join(", ")),
        [] => "no delivery".into(),
    }
}

/// Replay attempts take IDs among the deliveries, and one exported by
/// mistake is what PortPreview sent the handler (its Host the target's,
/// perhaps re-signed or edited), not what the caller sent. Said once for
/// all of them: a range of IDs may hold dozens.
fn note_replay_attempts(deliveries: &[Delivery], portpreview: &str) {
    let attempts: Vec<&Delivery> = deliveries.iter().filter(|d| d.request.replay_of.is_some()).collect();
    let originals: std::collections::BTreeSet<i64> = attempts.iter().filter_map(|d| d.request.replay_of).collect();
    let Some(original) = attempts.first().and_then(|d| d.request.replay_of) else {
        return;
    };
    let (attempted, sent) = match attempts.as_slice() {
        [one] => (format!("#{} is an attempt", one.id), "it"),
        many => (format!("{} are attempts", which(many.iter().copied())), "them"),
    };
    let (of, exported) = match originals.len() {
        1 => (format!("a replay of #{original}"), "the delivery"),
        n => (format!("replays of {n} deliveries"), "the first of those"),
    };
    let said = format!(
        "{attempted} of {of}, as PortPreview sent {sent}; `{portpreview} export {original}` exports {exported} \
         as its caller sent it"
    );
    crate::to_stderr(format_args!("note: {said}\n"));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::source::test_delivery;

    #[test]
    fn many_ids_are_named_by_the_first_few_and_the_last() {
        let named = |ids: std::ops::RangeInclusive<i64>| which(&ids.map(test_delivery).collect::<Vec<_>>());
        assert_eq!(named(12..=12), "delivery #12");
        assert_eq!(named(1..=3), "deliveries #1, #2 and #3");
        assert_eq!(named(1..=8), "deliveries #1, #2, #3, #4, #5, #6, #7 and #8");
        assert_eq!(named(1..=100), "100 deliveries: #1, #2, #3, #4, #5, #6, #7, … and #100");
    }
}
