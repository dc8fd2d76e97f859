//! The fixtures under a folder given to `check`: every `*.json`, in its
//! subfolders too, links followed, each file once; and the suites found
//! on the way, which a folder does not read.

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};

use anyhow::Context;
use portpreview_shared::sanitize::escape_str;

use crate::fixture::Fixture;
use crate::suite::Suite;

/// What a walk found.
#[derive(Debug, Default)]
pub struct Found {
    /// Fixtures, in path order.
    pub fixtures: Vec<PathBuf>,
    /// Folders that could not be read, and why: each a fixture that could
    /// not run, beside the fixtures that can.
    pub unreadable: Vec<(PathBuf, anyhow::Error)>,
}

/// Suites already warned of, and those named on the command line, which
/// are read and need no warning.
pub struct Suites<'a> {
    /// Suites named on the command line, as canonical paths.
    pub named: &'a [PathBuf],
    /// Suites warned of, so a folder given twice warns once.
    pub warned: HashSet<PathBuf>,
}

/// The fixture at `path`, or every `*.json` under the folder `path`,
/// subfolders included (`fixtures/stripe/`, `fixtures/github/`); a folder
/// holding none could not run.
///
/// - JSON that is plainly something else (a `package.json` beside the
///   fixtures) is skipped with a note; anything else named `*.json`, a
///   broken fixture, a pipe, a link to a file that is gone, is kept, to
///   fail as a fixture that could not run.
/// - Links are followed (fixtures shared between repositories are linked
///   in), each folder and file once, so a link back up cannot make the
///   walk endless. Real folders are walked before linked ones, breadth
///   first in name order, so a fixture is named by its real path where it
///   has one, and by the same path on every machine.
/// - A suite in a folder walked is not read; unless it was named too, the
///   user is warned, since its settings (a secret, a probe) would be
///   dropped without a word.
pub fn fixtures_at(path: &Path, suites: &mut Suites<'_>) -> Found {
    if !path.is_dir() {
        return Found {
            fixtures: vec![path.to_path_buf()],
            ..Found::default()
        };
    }
    let mut found = Found::default();
    // Each file kept: its path, the path it names (none for a link to
    // nothing), and whether a link led to it.
    let mut files: Vec<(PathBuf, Option<PathBuf>, bool)> = Vec::new();
    let mut walked = HashSet::new();
    let mut skipped = 0;
    let mut real = VecDeque::from([path.to_path_buf()]);
    let mut linked = VecDeque::new();
    while let Some((dir, through_link)) =
        (real.pop_front().map(|d| (d, false))).or_else(|| linked.pop_front().map(|d| (d, true)))
    {
        let entries = match read_folder(&dir, &mut walked) {
            Ok(Some(entries)) => entries,
            Ok(None) => continue,
            Err(err) => {
                found.unreadable.push((dir, err));
                continue;
            }
        };
        for entry in entries {
            let file = entry.path();
            let is_link = entry.file_type().is_ok_and(|kind| kind.is_symlink());
            if file.is_dir() {
                match (is_link, through_link) {
                    (false, false) => real.push_back(file),
                    _ => linked.push_back(file),
                }
                continue;
            }
            if Suite::is_suite_path(&file) {
                warn_of_a_suite(&file, suites);
            } else if file.extension().is_some_and(|ext| ext.eq_ignore_ascii_case("json")) {
                if Fixture::is_other_json(&file) {
                    skipped += 1;
                    let shown = escape_str(&file.display().to_string()).into_owned();
                    crate::to_stderr(format_args!(
                        "note: {shown} is skipped: JSON without a portpreview_fixture field\n"
                    ));
                } else {
                    let canonical = file.canonicalize().ok();
                    files.push((file, canonical, is_link || through_link));
                }
            }
        }
    }
    // A file reached twice runs once, under its real path where it has one.
    files.sort_by(|a, b| (&a.1, a.2, &a.0).cmp(&(&b.1, b.2, &b.0)));
    files.dedup_by(|later, first| later.1.is_some() && later.1 == first.1);
    found.fixtures = files.into_iter().map(|(file, _, _)| file).collect();
    found
        .fixtures
        .sort_by(|a, b| counting_order(&a.to_string_lossy(), &b.to_string_lossy()));
    // A folder that lost its fixtures (or a mistyped one) must not pass CI
    // beside others that ran: it is a fixture that could not run.
    if found.fixtures.is_empty() && found.unreadable.is_empty() {
        let none = match skipped {
            0 => anyhow::anyhow!("no fixtures (*.json) in {} or its subfolders", path.display()),
            // The folder holds JSON: say it is not fixtures, not that none is there.
            n => anyhow::anyhow!(
                "no fixtures in {} or its subfolders: {} without a portpreview_fixture field",
                path.display(),
                portpreview_shared::text::counted(n, "JSON file", "JSON files")
            ),
        };
        found.unreadable.push((path.to_path_buf(), none));
    }
    found
}

/// `a` against `b` with their numbers compared as numbers, as people
/// count: `portpreview-9.json` before `portpreview-10.json`, as `export`
/// names them.
fn counting_order(a: &str, b: &str) -> std::cmp::Ordering {
    let (mut a, mut b) = (a, b);
    loop {
        let (Some(x), Some(y)) = (a.chars().next(), b.chars().next()) else {
            return a.len().cmp(&b.len());
        };
        let order = if x.is_ascii_digit() && y.is_ascii_digit() {
            let (n, m) = (digits(a), digits(b));
            let (trimmed_n, trimmed_m) = (n.trim_start_matches('0'), m.trim_start_matches('0'));
            let order = (trimmed_n.len().cmp(&trimmed_m.len()))
                .then_with(|| trimmed_n.cmp(trimmed_m))
                .then_with(|| n.len().cmp(&m.len()));
            (a, b) = (&a[n.len()..], &b[m.len()..]);
            order
        } else {
            (a, b) = (&a[x.len_utf8()..], &b[y.len_utf8()..]);
            x.cmp(&y)
        };
        if order.is_ne() {
            return order;
        }
    }
}

/// The ASCII digits `text` starts with.
fn digits(text: &str) -> &str {
    &text[..text.bytes().take_while(u8::is_ascii_digit).count()]
}

/// The entries of `dir` in name order, or `None` when the folder it names
/// was walked already.
fn read_folder(dir: &Path, walked: &mut HashSet<PathBuf>) -> anyhow::Result<Option<Vec<std::fs::DirEntry>>> {
    let cannot_read = || format!("cannot read directory {}", dir.display());
    if !walked.insert(dir.canonicalize().with_context(cannot_read)?) {
        return Ok(None);
    }
    let mut entries = std::fs::read_dir(dir)
        .with_context(cannot_read)?
        .collect::<Result<Vec<_>, _>>()
        .with_context(cannot_read)?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    Ok(Some(entries))
}

/// Warns that the suite at `file`, in a folder walked, is not read, unless
/// it was named on the command line or warned of already. Some other TOML
/// (a `Cargo.toml`) is no suite, and no advice to run it would help; a
/// suite with a mistake in it is one, which running it will point out.
fn warn_of_a_suite(file: &Path, suites: &mut Suites<'_>) {
    let Ok(canonical) = file.canonicalize() else { return };
    if suites.named.contains(&canonical) || suites.warned.contains(&canonical) {
        return;
    }
    let is_suite = crate::input_file::read_file(file, crate::input_file::MAX_SETTINGS_FILE)
        .ok()
        .and_then(|bytes| String::from_utf8(crate::input_file::without_bom(bytes)).ok())
        .is_some_and(|text| Suite::lists_fixtures(&text));
    if !is_suite {
        return;
    }
    suites.warned.insert(canonical);
    let suite = escape_str(&super::lexical(file).display().to_string()).into_owned();
    crate::to_stderr(format_args!(
        "warning: {suite} is not read when its folder is given; to use its settings: portpreview check {suite}\n"
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_fixtures_run_in_the_order_they_count() {
        let mut names = vec![
            "fx/portpreview-10.json",
            "fx/portpreview-9.json",
            "fx/b.json",
            "fx/a-2.json",
            "fx/a-02.json",
            "fx/a.json",
            "fx/portpreview-100.json",
        ];
        names.sort_by(|a, b| counting_order(a, b));
        assert_eq!(
            names,
            [
                "fx/a-2.json",
                "fx/a-02.json",
                "fx/a.json",
                "fx/b.json",
                "fx/portpreview-9.json",
                "fx/portpreview-10.json",
                "fx/portpreview-100.json",
            ]
        );
    }
}
