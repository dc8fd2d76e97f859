//! `PORTPREVIEW_LOG` read alike by relay and client: what a filter that
//! parses may still mean other than what was meant.

/// The level names a filter directive may give.
const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// Words other loggers use for a level, and the level tracing names it.
const SYNONYMS: [(&str, &str); 7] = [
    ("warning", "warn"),
    ("err", "error"),
    ("fatal", "error"),
    ("critical", "error"),
    ("information", "info"),
    ("verbose", "debug"),
    ("all", "trace"),
];

/// Why `filter` likely logs less than was meant: a directive with no `=`
/// that is no level is read as a target to log whole, and every other
/// line, warnings included, is then left out. Only a word that reads as
/// a mistyped level (`debg`, `inf`) or another logger's name for one
/// (`warning`, `verbose`) is doubted: a target named on its own
/// (`portpreview_server`) may be what was meant.
pub fn doubt(filter: &str) -> Option<String> {
    (filter.split(','))
        .map(str::trim)
        .filter(|directive| !directive.is_empty() && !directive.contains(['=', '[']))
        .find_map(|directive| {
            let word = directive.to_ascii_lowercase();
            let near = || {
                LEVELS.iter().copied().find(|level| {
                    *level != word && level.len().abs_diff(word.len()) <= 1 && level.get(..1) == word.get(..1)
                })
            };
            let level = (SYNONYMS.iter())
                .find_map(|(other, level)| (*other == word).then_some(*level))
                .or_else(near)?;
            Some(format!(
                "\"{}\" in it is no level (did you mean {level}?), so it logs a target of that name alone, and \
                 nothing else, warnings included",
                crate::sanitize::escape_str(directive)
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_mistyped_is_doubted_and_a_level_or_a_target_is_not() {
        assert_eq!(
            doubt("debg").as_deref(),
            Some(
                "\"debg\" in it is no level (did you mean debug?), so it logs a target of that name alone, and \
                 nothing else, warnings included"
            )
        );
        assert!(doubt("portpreview=info,inf").is_some_and(|why| why.contains("did you mean info?")));
        for (word, level) in [
            ("warning", "warn"),
            ("ERR", "error"),
            ("verbose", "debug"),
            ("all", "trace"),
        ] {
            assert!(
                doubt(word).is_some_and(|why| why.contains(&format!("did you mean {level}?"))),
                "{word}: {:?}",
                doubt(word)
            );
        }
        for fine in [
            "debug",
            "WARN",
            "portpreview_server",
            "portpreview_server=debug",
            "info,hyper=warn",
            "",
            "[span]=debug",
        ] {
            assert_eq!(doubt(fine), None, "{fine}");
        }
    }
}
