//! The functions of our own that the store's SQL calls, registered on
//! every connection it opens.

use rusqlite::functions::FunctionFlags;
use rusqlite::Connection;

use crate::path_glob::PathGlob;

/// `portpreview_path_glob(glob, path)`: whether [`PathGlob`] `glob` names
/// `path`, so a listing narrowed by `--path` pages and counts in SQL like
/// one narrowed by any other filter.
pub(super) const PATH_GLOB: &str = "portpreview_path_glob";

/// Makes the functions callable on `conn`.
pub(super) fn register(conn: &Connection) -> rusqlite::Result<()> {
    // Direct only: a view or trigger in a history from elsewhere cannot
    // call it.
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC | FunctionFlags::SQLITE_DIRECTONLY;
    conn.create_scalar_function(PATH_GLOB, 2, flags, |ctx| {
        // The glob is one parameter for the whole statement: compiled
        // once, not once a row.
        let glob = ctx.get_or_create_aux(0, |glob| glob.as_str().map(PathGlob::new))?;
        // A path that is not text, in a damaged history, is named by no glob.
        Ok(ctx.get_raw(1).as_str().is_ok_and(|path| glob.matches(path)))
    })
}
