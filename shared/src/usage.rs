//! Command-line mistakes told in one line. clap explains a refused
//! argument over several (the reason, a tip, the usage, a pointer to
//! `--help`); both binaries promise one line per refusal, which a script
//! can read and a person takes in at once.

/// The line to print, newline included, for a parse error as clap
/// rendered it: the reason, what it lists, its tips in parentheses, and
/// which `--help` tells more: the command clap's usage names, else
/// `command` (the binary, and the subcommand given if any). Control
/// characters in quoted values are escaped, as everywhere untrusted text
/// reaches the terminal.
pub fn one_line(rendered: &str, command: &str) -> String {
    let mut lines = rendered.lines();
    let mut line = lines.next().unwrap_or("error: invalid arguments").trim_end().to_owned();
    let mut details = Vec::new();
    let mut tips = Vec::new();
    let mut usage_names = None;
    // A command with several forms lists each on a line of its own under
    // the first, up to a blank line: they are usage, not what was missing.
    let mut in_usage = false;
    for text in lines.map(str::trim) {
        if text.is_empty() {
            in_usage = false;
            continue;
        }
        if in_usage {
            continue;
        }
        if let Some(usage) = text.strip_prefix("Usage:") {
            in_usage = true;
            // "portpreview http [OPTIONS] <PORT|URL>", or "portpreview-server
            // --listen <ADDR>": the command is the words before the first
            // placeholder or flag.
            let words: Vec<&str> = usage
                .split_whitespace()
                .take_while(|word| !word.starts_with(['[', '<', '-']))
                .collect();
            usage_names = Some(words.join(" "));
        } else if text.starts_with("For more information") {
            break;
        } else if let Some(tip) = text.strip_prefix("tip:") {
            tips.push(tip.trim());
        } else {
            details.push(text);
        }
    }
    if !details.is_empty() {
        line.push_str(if line.ends_with(':') { " " } else { ": " });
        line.push_str(&details.join(", "));
    }
    for tip in tips {
        line.push_str(&format!(" ({tip})"));
    }
    let named = usage_names.filter(|named| !named.is_empty());
    line.push_str(&format!("; see {} --help", named.as_deref().unwrap_or(command)));
    let mut line = crate::sanitize::escape_str(&line).into_owned();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn a_refused_value_is_one_line() {
        let rendered = "error: invalid value '0' for '--times <N>': 0 is not in 1..=100000\n\n\
                        For more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered, "portpreview replay"),
            "error: invalid value '0' for '--times <N>': 0 is not in 1..=100000; see portpreview replay --help\n"
        );
    }

    /// `replay` has three forms, each a usage line: none of them is what
    /// was missing.
    #[test]
    fn a_usage_of_several_forms_stays_out_of_the_line() {
        let rendered = "error: the following required arguments were not provided:\n  <ID|EVENT_KEY>\n\n\
                        Usage: portpreview replay [OPTIONS] <ID|EVENT_KEY>\n       \
                        portpreview replay --latest [OPTIONS]\n       \
                        portpreview replay --from <FIXTURE> [OPTIONS]\n\n\
                        For more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered, "portpreview"),
            "error: the following required arguments were not provided: <ID|EVENT_KEY>; see portpreview replay --help\n"
        );
    }

    #[test]
    fn tips_and_missing_arguments_join_the_line_and_the_usage_names_the_help() {
        let rendered = "error: unrecognized subcommand 'histroy'\n\n  tip: a similar subcommand exists: 'history'\n\n\
                        Usage: portpreview [OPTIONS] <COMMAND>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered, "portpreview replay"),
            "error: unrecognized subcommand 'histroy' (a similar subcommand exists: 'history'); see portpreview --help\n"
        );
        let rendered = "error: the following required arguments were not provided:\n  <PORT|URL>\n\n\
                        Usage: portpreview http <PORT|URL>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered, "portpreview replay"),
            "error: the following required arguments were not provided: <PORT|URL>; see portpreview http --help\n"
        );
    }

    #[test]
    fn the_help_named_is_the_commands_not_a_flags() {
        let rendered = "error: the following required arguments were not provided:\n  --listen <ADDR>\n\n\
                        Usage: portpreview-server --listen <ADDR>\n\nFor more information, try '--help'.\n";
        assert!(one_line(rendered, "portpreview-server").ends_with("; see portpreview-server --help\n"));
        let rendered = "error: unexpected argument '--bogus' found\n\n\
                        Usage: portpreview history --db <PATH> [OPTIONS]\n";
        assert!(one_line(rendered, "portpreview").ends_with("; see portpreview history --help\n"));
    }

    #[test]
    fn control_characters_in_a_quoted_value_are_escaped() {
        let line = one_line("error: invalid value '\u{1b}[2J' for '--limit <N>'\n", "portpreview");
        assert_eq!(line.matches('\n').count(), 1);
        assert!(!line.contains('\u{1b}'), "{line:?}");
    }
}
