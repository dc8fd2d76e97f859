//! One module per subcommand, each with its `Args` and `run`, and what
//! `replay` and `check` share.

pub mod check;
pub mod export;
mod guard;
pub mod history;
pub mod http;
pub mod prune;
pub mod replay;
pub mod replay_run;
pub mod resend;
pub mod show;
pub mod tui;

use std::path::Path;

use crate::store::{Store, Unstored};

/// How a hint writes a command to run next: `portpreview`, with the
/// `--db` that chose the history when one did (`db_named`, by `--db` or
/// `PORTPREVIEW_DB`), quoted for a shell.
pub(crate) fn portpreview_command(db: &Path, db_named: bool) -> String {
    if !db_named {
        return "portpreview".to_owned();
    }
    // `--db=`: a path starting with `-` would read as a flag.
    format!(
        "portpreview --db={}",
        crate::render::curl::quote(db.as_os_str().as_encoded_bytes())
    )
}

/// Opens the history at `db` for a command that reads it, saying on stderr
/// when tunnels have forwarded deliveries it does not hold yet: a listing
/// that leaves them out would otherwise pass for complete.
pub(crate) fn open_history(db: &Path) -> anyhow::Result<Store> {
    use portpreview_shared::text::counted;
    let store = Store::open_existing(db).map_err(|err| err.for_command(db))?;
    let Unstored { held_up, orphaned } = store.unstored_at_open();
    let unknown = store.recovered_at_open().answers_unknown;
    if unknown > 0 {
        // Without a word, a burst cut off by `kill -9` reads as thousands
        // of failed deliveries, most of whose callers got their 200.
        crate::to_stderr(format_args!(
            "note: a tunnel stopped without a word (killed, or its machine went down) before it recorded the \
             answers to {}; they are in the history now, as \"{}\", whatever their callers heard\n",
            counted(unknown, "delivery", "deliveries"),
            crate::store::recorder::ORPHANED,
        ));
    }
    if held_up > 0 {
        let (are, them) = are_them(held_up);
        crate::to_stderr(format_args!(
            "note: {} a running tunnel forwarded {are} not in the history yet: its writer is behind (a burst \
             on a busy machine, another process holding the history's write lock, or a full disk), and stores \
             {them} once it can\n",
            counted(held_up as usize, "delivery", "deliveries"),
        ));
    }
    if orphaned > 0 {
        let (are, them) = are_them(orphaned);
        crate::to_stderr(format_args!(
            "note: {} a tunnel that stopped left in its inbox {are} not in the history yet: another process \
             holds the history's write lock, and the next command to open it once the lock is free moves {them} \
             in\n",
            counted(orphaned as usize, "delivery", "deliveries"),
        ));
    }
    Ok(store)
}

/// The verb and pronoun for `n` deliveries: "is" and "it" for one.
fn are_them(n: u64) -> (&'static str, &'static str) {
    if n == 1 {
        ("is", "it")
    } else {
        ("are", "them")
    }
}
