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
pub mod show;
pub mod tui;

use std::path::Path;

use crate::store::Store;

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
/// when running tunnels have forwarded deliveries it does not hold yet:
/// a listing that leaves them out would otherwise pass for complete.
pub(crate) fn open_history(db: &Path) -> anyhow::Result<Store> {
    let store = Store::open_existing(db).map_err(|err| err.for_command(db))?;
    let unstored = store.unstored_at_open();
    if unstored > 0 {
        crate::to_stderr(format_args!(
            "note: {} a running tunnel forwarded {} not in the history yet: its writer is behind (a burst \
             on a busy machine, another process holding the history's write lock, or a full disk), and stores {} \
             once it can\n",
            portpreview_shared::text::counted(unstored as usize, "delivery", "deliveries"),
            if unstored == 1 { "is" } else { "are" },
            if unstored == 1 { "it" } else { "them" },
        ));
    }
    Ok(store)
}
