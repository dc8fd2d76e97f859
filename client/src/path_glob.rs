//! `--path GLOB` (`replay --latest`, `history`): which recorded paths a
//! glob names.

use wildmatch::WildMatch;

use crate::render::mask::shown_path;

/// A `--path` glob (`*` any text, `?` any one character), matched the ways
/// a user may have written it: against a path whole, query included, as
/// `history` lists it, or without its query, so `/hooks/stripe` and
/// `/hooks/stripe?live=*` both find `/hooks/stripe?live=1`; and, when it
/// is a path copied from the table, with its secrets masked (`token=••••••`
/// stands for the one value recorded there) or cut short with `…`.
pub struct PathGlob {
    glob: WildMatch,
    masked: bool,
}

impl PathGlob {
    /// The glob `text`, a trailing `…` read as any text.
    pub fn new(text: &str) -> Self {
        let text = match text.strip_suffix('…') {
            Some(start) => format!("{start}*"),
            None => text.to_owned(),
        };
        Self {
            // Any of the mask's dots: the table may have cut inside it.
            masked: text.contains('•'),
            glob: WildMatch::new(&text),
        }
    }

    /// True when the glob names `path`, a path as recorded.
    pub fn matches(&self, path: &str) -> bool {
        let whole_or_bare = |path: &str| {
            self.glob.matches(path) || path.split_once('?').is_some_and(|(bare, _)| self.glob.matches(bare))
        };
        whole_or_bare(path) || (self.masked && whole_or_bare(&shown_path(path, false)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_glob_matches_the_path_with_or_without_its_query() {
        let status = "/twilio/status?foo=1&bar=2";
        // The path as `history` lists it, the path alone, and a query pattern.
        for glob in [status, "/twilio/status", "/twilio/status?foo=1*", "/twilio/s*?foo=*"] {
            assert!(PathGlob::new(glob).matches(status), "{glob}");
        }
        assert!(!PathGlob::new("/twilio/status?foo=2*").matches(status));
        assert!(!PathGlob::new("/twilio/status?").matches(status));
        assert!(!PathGlob::new("/twilio/status").matches("/twilio/voice?foo=1"));
    }

    /// The mask stands for the value it hides, not for the rest of the
    /// query: a path copied from the table names that delivery only.
    #[test]
    fn a_masked_secret_stands_for_its_own_value_only() {
        let copied = PathGlob::new("/m/h?token=••••••");
        assert!(copied.matches("/m/h?token=aa"));
        assert!(!copied.matches("/m/h?token=bb&admin=1"));
        let copied = PathGlob::new("/m/k?key=••••••&page=2");
        assert!(copied.matches("/m/k?key=s3cr3t&page=2"));
        assert!(!copied.matches("/m/k?key=s3cr3t&z=1&page=2"));
    }

    #[test]
    fn a_path_cut_short_by_the_table_matches_what_it_begins() {
        let cut = PathGlob::new("/twilio/status?x-token=&key=••••••&page…");
        assert!(cut.matches("/twilio/status?x-token=&key=abc&page=3&more=1"));
        assert!(!cut.matches("/twilio/status?x-token=&key=abc&other=3"));
        let cut_in_the_mask = PathGlob::new("/twilio/status?key=•••…");
        assert!(cut_in_the_mask.matches("/twilio/status?key=abc&page=3"));
    }
}
