//! `portpreview export <ID>…`: deliveries as fixtures, a HAR file or curl commands.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::Context;

use crate::commands::guard::refuse_to_overwrite_a_database;
use crate::commands::show::{fetch, parse_id};
use crate::render;
use crate::render::export::{export, write_together};
use crate::store::{Delivery, NewDelivery};
use crate::whole_file::{self, Access, Existing};

pub use crate::render::export::Format;

/// Arguments of `portpreview export`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Delivery ids, as `history` lists them: several make one HAR file or one curl script, or one file each with -o FOLDER/.
    #[arg(value_name = "ID", required = true, num_args = 1.., value_parser = parse_id)]
    pub ids: Vec<i64>,
    /// Output format [default: from -o's extension, .har or .sh, else json].
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Write to this file instead of stdout (`-`: stdout); to a folder (one that exists, or ending in `/`), one file each, named portpreview-ID.json, .har or .sh.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Aim the fixture, the HAR URL or the curl command here instead of the recorded target, as `replay --target` would.
    #[arg(long, value_name = "URL")]
    pub target: Option<String>,
    /// Keep secrets (Authorization, cookies, signatures, credentials in query strings) unmasked in the HAR file; fixtures and curl commands are never masked: they must replay exactly.
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
    let output = args.output.as_deref().filter(|path| *path != Path::new("-"));
    // `-o hooks.har` asks for a HAR file as plainly as `--format har` does.
    let format = (args.format)
        .or_else(|| output.filter(|path| !is_a_folder(path)).and_then(Format::of_file))
        .unwrap_or(Format::Json);
    if args.reveal && format != Format::Har {
        crate::to_stderr(format_args!(
            "warning: --reveal is not used: only HAR files are masked; fixtures and curl commands keep every \
             header as received, so they replay exactly\n"
        ));
    }
    let store = super::open_history(db)?;
    let target = args.target.as_deref();
    // Every one read and checked before anything is written, one at a
    // time: a mistyped id, or a body stored cut short, leaves no export
    // half done, and an export of large bodies is never held whole.
    let exported = (args.ids.iter())
        .map(|&id| {
            let delivery = fetch(&store, id, db)?;
            render::export::check(&delivery, format, target)?;
            Ok(Exported::of(&delivery, format))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut read = |id| fetch(&store, id, db).map_err(std::io::Error::other);
    if !output.is_some_and(is_a_folder) {
        render::export::check_together(args.ids.len(), format)?;
    }
    match output {
        Some(folder) if is_a_folder(folder) => {
            let paths: Vec<PathBuf> = args.ids.iter().map(|&id| folder.join(format.file_name(id))).collect();
            for path in &paths {
                may_write(path, db, Existing::Refuse)?;
            }
            for (n, (path, &id)) in paths.iter().zip(&args.ids).enumerate() {
                let written = read(id)
                    .map_err(anyhow::Error::from)
                    .and_then(|delivery| export(&delivery, format, target, args.reveal))
                    .and_then(|text| write_file(path, Existing::Refuse, &mut |out| out.write_all(text.as_bytes())));
                if let Err(err) = written {
                    // All or none, so that the same command can be run
                    // again once the cause is mended.
                    for written in &paths[..n] {
                        let _ = std::fs::remove_file(written);
                    }
                    return Err(err);
                }
            }
            for (path, one) in paths.iter().zip(&exported) {
                wrote(&which(std::slice::from_ref(one)), format.what(), path);
            }
        }
        Some(path) => {
            may_write(path, db, Existing::Replace)?;
            write_file(path, Existing::Replace, &mut |out| {
                write_together(out, &args.ids, &mut read, format, target, args.reveal)
            })?;
            let what = match format {
                Format::Curl if args.ids.len() > 1 => "curl commands",
                _ => format.what(),
            };
            wrote(&which(&exported), what, path);
            if format != Format::Har || args.reveal {
                warn_if_others_may_read(path);
            }
        }
        None => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            write_together(&mut out, &args.ids, &mut read, format, target, args.reveal)
                .and_then(|()| out.flush())
                .context("cannot write to stdout")?
        }
    }
    let portpreview = super::portpreview_command(db, db_named);
    note_replay_attempts(&exported, &portpreview);
    for stale in exported.iter().filter_map(|one| one.stale.as_deref()) {
        crate::to_stderr(format_args!("warning: {stale}\n"));
    }
    Ok(ExitCode::SUCCESS)
}

/// What the notes after an export say of one delivery, kept from its
/// check so that its body need not be.
struct Exported {
    id: i64,
    /// The delivery it is a replay attempt of, if it is one.
    replay_of: Option<i64>,
    /// Why a curl command's recorded signature is refused by now.
    stale: Option<String>,
}

impl Exported {
    fn of(delivery: &Delivery, format: Format) -> Self {
        Exported {
            id: delivery.id,
            replay_of: delivery.request.replay_of,
            stale: (format == Format::Curl)
                .then(|| stale_signature(&delivery.request, delivery.id))
                .flatten(),
        }
    }
}

/// A file PortPreview makes is its owner's alone, but one it replaces
/// keeps its mode: said when that lets others read what it now holds.
fn warn_if_others_may_read(path: &Path) {
    let Some(mode) = crate::private_file::open_to_others(path).filter(|_| path.is_file()) else {
        return;
    };
    crate::to_stderr(format_args!(
        "warning: {} may be read by others (mode {mode:04o}, kept from the file it replaced), and holds every \
         header unmasked, tokens and signatures included: chmod 600 it if it should not\n",
        shown(path)
    ));
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

/// Writes what `fill` writes to `path`, which [`may_write`] allowed, its
/// folders made as needed: whole, or not at all.
fn write_file(path: &Path, existing: Existing, fill: whole_file::Fill<'_>) -> anyhow::Result<()> {
    if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        crate::private_file::create_folders(folder).with_context(|| format!("cannot write {}", shown(path)))?;
    }
    // A fixture keeps secrets as received, so replay can send them.
    whole_file::write_with(path, existing, Access::Private, fill)
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
fn which<'a>(deliveries: impl IntoIterator<Item = &'a Exported>) -> String {
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
fn note_replay_attempts(deliveries: &[Exported], portpreview: &str) {
    let attempts: Vec<&Exported> = deliveries.iter().filter(|d| d.replay_of.is_some()).collect();
    let originals: std::collections::BTreeSet<i64> = attempts.iter().filter_map(|d| d.replay_of).collect();
    let Some(original) = attempts.first().and_then(|d| d.replay_of) else {
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

/// Why the recorded signature a curl command carries is refused by now,
/// past what its provider accepts: the handler's refusal must not read as
/// a bug in the handler.
fn stale_signature(request: &NewDelivery, id: i64) -> Option<String> {
    let provider = crate::replay::provider_of(request)?;
    let too_old = crate::replay::signature_too_old(
        provider,
        &request.request_headers,
        &request.request_body,
        SystemTime::now(),
    )?;
    Some(format!(
        "{too_old}: a handler that checks signatures refuses this command's request; \
         `portpreview replay {id} --resign` sends it signed anew"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::source::test_delivery;

    #[test]
    fn many_ids_are_named_by_the_first_few_and_the_last() {
        let named = |ids: std::ops::RangeInclusive<i64>| {
            let exported: Vec<Exported> = ids.map(|id| Exported::of(&test_delivery(id), Format::Json)).collect();
            which(&exported)
        };
        assert_eq!(named(12..=12), "delivery #12");
        assert_eq!(named(1..=3), "deliveries #1, #2 and #3");
        assert_eq!(named(1..=8), "deliveries #1, #2, #3, #4, #5, #6, #7 and #8");
        assert_eq!(named(1..=100), "100 deliveries: #1, #2, #3, #4, #5, #6, #7, … and #100");
    }
}
