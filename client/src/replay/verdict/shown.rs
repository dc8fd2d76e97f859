//! How probe reads are shown in a report line: on one line, cut alike
//! around where they differ, escaped.

use portpreview_shared::sanitize::escape_str;

/// Characters of a probe read shown in a report line.
const SHOWN: usize = 60;

/// Two probe reads as `before` → `after`; see [`aligned`].
pub fn shown_change(before: &str, after: &str) -> String {
    let (before, after) = aligned(before, after);
    format!("{before} → {after}")
}

/// Two probe reads cut alike from just before where they first differ, so
/// that a change past the first 60 characters shows instead of two
/// identical beginnings: `…"nonidem": 6, …` and `…"nonidem": 7, …`. Reads
/// that do not differ are shown from their start.
pub fn aligned(before: &str, after: &str) -> (String, String) {
    let (before, after) = (one_line(before), one_line(after));
    // With no difference to point at, the start of a state says most about
    // it; a window at its end would begin mid-line.
    if before == after {
        return (excerpt(&before, 0), excerpt(&after, 0));
    }
    let same = before.chars().zip(after.chars()).take_while(|(a, b)| a == b).count();
    let longest = before.chars().count().max(after.chars().count());
    // Start a little before the difference, unless everything fits anyway.
    let from = if longest <= SHOWN {
        0
    } else {
        word_start(&before, same.saturating_sub(SHOWN / 4))
    };
    (excerpt(&before, from), excerpt(&after, from))
}

/// Character `from` of `line` moved to the start of a word: back to the
/// start of the one it falls in, by a quarter window at most, or on past
/// the spaces and line marks it falls on. A cut read then begins with a
/// name the probe printed (`…stripe_rows: 6`), not the end of one
/// (`…ipe_rows: 6`).
fn word_start(line: &str, from: usize) -> usize {
    let gap = |c: &char| c.is_whitespace() || *c == '⏎';
    let chars: Vec<char> = line.chars().collect();
    let back = chars[..from.min(chars.len())]
        .iter()
        .rev()
        .take(SHOWN / 4)
        .position(gap);
    let start = back.map_or(from, |back| from - back);
    start + chars[start.min(chars.len())..].iter().take_while(|c| gap(c)).count()
}

fn one_line(state: &str) -> String {
    state.trim().replace('\n', " ⏎ ")
}

/// `SHOWN` characters of `line` from character `from`, with `…` where cut.
pub(super) fn excerpt(line: &str, from: usize) -> String {
    let clipped: String = line.chars().skip(from).take(SHOWN).collect();
    let head = if from > 0 { "…" } else { "" };
    let tail = if line.chars().count() > from + SHOWN { "…" } else { "" };
    format!("`{head}{}{tail}`", escape_str(&clipped))
}

/// The first line that differs between two probe reads, numbered as the
/// report shows the state, with how many others differ: `line 2
/// `uptime_ticks: 24` → `uptime_ticks: 31``. A probe's output can be long,
/// and a reader fixing the probe needs the line, not the whole read.
pub fn first_moved_line(before: &str, after: &str) -> String {
    let (before, after): (Vec<&str>, Vec<&str>) = (before.lines().collect(), after.lines().collect());
    fn line<'a>(lines: &[&'a str], i: usize) -> &'a str {
        lines.get(i).copied().unwrap_or_default()
    }
    let mut moved = (0..before.len().max(after.len())).filter(|&i| line(&before, i) != line(&after, i));
    // Reads that differ only in how their lines end (`\r\n`, a last
    // line break) differ in no line.
    let Some(first) = moved.next() else {
        return "its line endings".to_owned();
    };
    let shown = format!(
        "line {} {}",
        first + 1,
        shown_change(line(&before, first), line(&after, first))
    );
    match moved.count() {
        0 => shown,
        1 => format!("{shown}, and 1 other line"),
        n => format!("{shown}, and {n} other lines"),
    }
}
