//! Command-line arguments: one subcommand per file under `commands/`.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use portpreview_shared::usage::one_line;

use crate::commands;
use crate::origin::Origin;

/// A webhook tunnel that records every delivery and checks handlers for idempotency.
#[derive(Debug, Parser)]
// Each subcommand's `--version` names the program, not clap's `portpreview-http`.
#[command(
    name = "portpreview",
    version,
    about,
    propagate_version = true,
    after_help = CONFIG_HELP,
    mut_subcommands = |sub: clap::Command| sub.display_name("portpreview")
)]
pub struct Cli {
    /// History database (default: the config file's db, else portpreview/history.db in the user's data directory; check and replay --from need none).
    #[arg(
        long,
        global = true,
        env = "PORTPREVIEW_DB",
        hide_env_values = true,
        value_name = "PATH"
    )]
    pub db: Option<PathBuf>,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,

    /// The variables of `FLAG_ENV` that gave a flag its value, so that
    /// an error can say where a value nobody typed came from.
    #[arg(skip)]
    pub from_env: Vec<&'static str>,
}

/// The config file, which no flag names: without this paragraph `--help`
/// would leave a user unaware of where a relay or a database nobody typed
/// comes from. The keys and the precedence are `config.rs`'s. Broken
/// into lines here: clap prints it as written.
const CONFIG_HELP: &str = "\
Settings also come from a TOML config file: config.toml in the user's config
directory (~/.config/portpreview/config.toml on Linux), or the file
PORTPREVIEW_CONFIG names. It may set server, token, db, ca_cert and [secrets]
(signing secrets by provider, for replay --resign and --fresh). Environment
variables override the file, and flags override both.";

/// Variables that stand in for flags. Set to an empty string, as CI leaves
/// a secret that is not defined, each counts as not set: clap would take it
/// for a flag given without its value.
const FLAG_ENV: [&str; 3] = ["PORTPREVIEW_DB", "PORTPREVIEW_SERVER", "PORTPREVIEW_TOKEN"];

impl Cli {
    /// Parses the command line, reading flags' variables as set out above.
    /// Call before any thread starts: it edits the environment.
    pub fn parse_args() -> Self {
        for name in FLAG_ENV {
            if std::env::var_os(name).is_some_and(|value| value.is_empty()) {
                std::env::remove_var(name);
            }
        }
        match Self::try_parse_with_origins() {
            Ok(cli) => cli,
            // One line, as every refusal: clap quotes the value it refused
            // as given, and an id or a path pasted from a delivery may hold
            // escape sequences, so every control in it is escaped.
            // `portpreview` alone is no mistake to put in a line: the
            // help is the answer, whole (on stderr, exit 2). So with only
            // `--db` given, or PORTPREVIEW_DB set, which clap then counts
            // as an argument and calls a missing subcommand.
            Err(err) if err.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => err.exit(),
            Err(err) if err.kind() == clap::error::ErrorKind::MissingSubcommand => {
                crate::to_stderr(format_args!("{}", Self::command().render_help()));
                std::process::exit(err.exit_code());
            }
            Err(err) if err.use_stderr() => {
                let code = err.exit_code();
                let line = match unreadable_text_env(&err) {
                    Some(var) => format!(
                        "error: {var} is set, but not to UTF-8 text; see {} --help\n",
                        command_given()
                    ),
                    None => one_line(
                        &breaks_escaped(rendered_whole(err), std::env::args_os().skip(1)),
                        &command_given(),
                    ),
                };
                crate::to_stderr(format_args!("{line}"));
                if asks_for_json_lines(std::env::args_os().skip(1)) {
                    // A supervisor reading stdout hears of a refused
                    // command line too, as of any error that ends `http`.
                    // A stdout already closed has no reader to tell.
                    let message = line.trim_end().trim_start_matches("error: ");
                    let _ = writeln!(std::io::stdout().lock(), "{}", crate::output::json_error_line(message));
                }
                std::process::exit(code);
            }
            // `--help` and `--version`, on stdout: a stdout that cannot
            // take them fails as any command's output does (a reader gone
            // is no failure).
            Err(err) => {
                let code = err.exit_code();
                let printed = err.print().and_then(|()| std::io::stdout().flush());
                match printed {
                    Err(failed) if failed.kind() != std::io::ErrorKind::BrokenPipe => {
                        crate::to_stderr(format_args!("error: cannot write to stdout: {failed}\n"));
                        std::process::exit(2);
                    }
                    _ => std::process::exit(code),
                }
            }
        }
    }

    fn try_parse_with_origins() -> Result<Self, clap::Error> {
        let matches = Self::command().try_get_matches()?;
        let mut cli = Self::from_arg_matches(&matches)?;
        cli.from_env = crate::origin::from_env(&matches, &[("db", "PORTPREVIEW_DB")]);
        if let Some(http) = matches.subcommand_matches("http") {
            let names = [("server", "PORTPREVIEW_SERVER"), ("token", "PORTPREVIEW_TOKEN")];
            cli.from_env.extend(crate::origin::from_env(http, &names));
        }
        Ok(cli)
    }

    /// True when the command's news goes out as JSON lines (`http
    /// --log-format json`): an error that ends it is one more line.
    pub fn reports_in_json(&self) -> bool {
        matches!(&self.command, Command::Http(args) if args.log_format == crate::output::LogFormat::Json)
    }
}

/// The variable standing in for a text flag (`--server`, `--token`) that
/// is set to bytes that are not UTF-8, when clap refused the command line
/// for such bytes and none is in the arguments: clap's error names no
/// argument then.
fn unreadable_text_env(err: &clap::Error) -> Option<&'static str> {
    if err.kind() != clap::error::ErrorKind::InvalidUtf8 || std::env::args_os().any(|arg| arg.to_str().is_none()) {
        return None;
    }
    ["PORTPREVIEW_SERVER", "PORTPREVIEW_TOKEN"]
        .into_iter()
        .find(|name| std::env::var_os(name).is_some_and(|value| value.to_str().is_none()))
}

/// Whether the words of a command line clap refused ask `http` for JSON
/// lines (`--log-format json`): with no parse to ask, as they were given.
fn asks_for_json_lines(args: impl Iterator<Item = std::ffi::OsString>) -> bool {
    let args: Vec<std::ffi::OsString> = args.collect();
    let json = args
        .windows(2)
        .any(|pair| pair[0] == "--log-format" && pair[1] == "json")
        || args.iter().any(|arg| arg == "--log-format=json");
    json && args.iter().any(|arg| arg == "http")
}

/// A parse error as clap renders it, every byte of the values it quotes
/// kept. clap's plain rendering strips escape sequences, the user's among
/// them, and would quote another value than the one given. Its styles are
/// written into an error as it is made, so the arguments are parsed again
/// in plain styles: then every escape in the rendering is the user's, and
/// [`one_line`] shows each one escaped.
fn rendered_whole(err: clap::Error) -> String {
    let plain = Cli::command().styles(clap::builder::Styles::plain());
    match plain.try_get_matches() {
        Err(again) if again.kind() == err.kind() => again.render().ansi().to_string(),
        _ => err.render().to_string(),
    }
}

/// `rendered` with every argument that holds a line break, as clap quotes
/// it, escaped whole. [`one_line`] reads each line of a rendering as a
/// part of the error, and would show `--header $'X-A: a\r\nB: b'` as
/// `'X-A: a: B: b'`, a value never given, hiding the break refused.
fn breaks_escaped(rendered: String, args: impl Iterator<Item = std::ffi::OsString>) -> String {
    args.filter_map(|arg| arg.into_string().ok())
        .filter(|arg| arg.contains(['\n', '\r']))
        .fold(rendered, |rendered, arg| {
            rendered.replace(&arg, &portpreview_shared::sanitize::escape_str(&arg))
        })
}

/// The folder, missing, that a history named by the user (a flag, the
/// environment, the config file) is to be made in: it is made, as `export
/// -o` makes one, and said once made, since a typo in the path would
/// otherwise leave folders, and a history, where nobody looks.
fn missing_folder(db: &std::path::Path) -> Option<std::path::PathBuf> {
    db.parent()
        .filter(|dir| !dir.as_os_str().is_empty() && !dir.exists())
        .map(std::path::Path::to_path_buf)
}

/// `portpreview` and the subcommand the command line names, if any: the
/// `--help` a refusal points to when clap's own usage names none.
fn command_given() -> String {
    let command = Cli::command();
    // `args_os`: an argument that is not UTF-8 is what clap refused, and
    // `args` would panic on it.
    let named = std::env::args_os().skip(1).find_map(|arg| {
        command
            .get_subcommands()
            .find(|sub| arg == sub.get_name())
            .map(|sub| sub.get_name().to_owned())
    });
    match named {
        Some(sub) => format!("portpreview {sub}"),
        None => "portpreview".to_owned(),
    }
}

/// A secret or a token given on the command line: an empty one (`--token
/// "$TOKEN"` with the variable unset) is a mistake, not a key.
pub fn parse_secret_text(text: &str) -> Result<crate::config::Secret, String> {
    match text.is_empty() {
        true => Err("is empty: leave the flag out, or give the value".into()),
        false => Ok(crate::config::Secret::new(text)),
    }
}

/// `--secret`: a secret given on the command line, known as given there.
pub fn parse_signing_secret(text: &str) -> Result<crate::config::SigningSecret, String> {
    parse_secret_text(text).map(|_| crate::config::SigningSecret::flag(text))
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Forward a public URL to a local port and record every delivery.
    Http(commands::http::Args),
    /// List recorded deliveries, newest first.
    History(commands::history::Args),
    /// Show one delivery whole: request, answer, timings, replay runs.
    ///
    /// On a terminal each body stops after its first 64 KiB, with a line
    /// saying how many bytes are left; piped or redirected, and with
    /// --json, every byte is printed.
    Show(commands::show::Args),
    /// Export deliveries as fixtures (json), one HAR file or curl commands.
    Export(commands::export::Args),
    /// Remove deliveries older than a given age.
    Prune(commands::prune::Args),
    /// Replay a recorded delivery N times and say whether the handler stayed idempotent.
    Replay(commands::replay::Args),
    /// Send again, once each, the events the handler did not answer 2xx, in the order they first came.
    Resend(commands::resend::Args),
    /// Replay committed fixtures and fail when a handler is not idempotent (for CI).
    Check(commands::check::Args),
    /// Browse the recorded history in a terminal UI.
    Tui(commands::tui::Args),
}

impl Command {
    /// True when this command will draw a TUI, so logs must not go to the terminal.
    pub fn uses_tui(&self) -> bool {
        match self {
            Command::Http(args) => args.uses_tui(),
            Command::History(_) | Command::Show(_) | Command::Export(_) | Command::Prune(_) => false,
            Command::Replay(_) | Command::Resend(_) | Command::Check(_) => false,
            Command::Tui(_) => true,
        }
    }
}

/// Runs the parsed command line. Exit codes: 0 done (or idempotent), 1 not
/// idempotent or inconclusive, 2 could not run.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // Read up front, so that a mistake in the file is found by every
    // command, not only by those that happen to need a value from it.
    let config = crate::config::Config::load()?;
    // A tunnel says it with its set-up warnings, on the TUI's status line
    // or as JSON.
    if let Some(warning) = config
        .open_to_others
        .as_ref()
        .filter(|_| !matches!(cli.command, Command::Http(_)))
    {
        crate::to_stderr(format_args!("warning: {warning}\n"));
    }
    // `check` reads fixtures only: it must run where no history can live.
    let db = || crate::config::db_path(cli.db.clone(), &config);
    let db_origin = Origin::of(
        "--db",
        "PORTPREVIEW_DB",
        &cli.from_env,
        cli.db.is_some(),
        config.db.is_some(),
    );
    let named_db = db().ok();
    let result = match cli.command {
        Command::Http(args) => {
            let db = db()?;
            let new_folder = (db_origin != Origin::Default).then(|| missing_folder(&db)).flatten();
            commands::http::run(args, &db, new_folder, config, &cli.from_env).await
        }
        Command::History(args) => commands::history::run(args, &db()?),
        Command::Show(args) => commands::show::run(args, &db()?, cli.db.is_some()),
        Command::Export(args) => commands::export::run(args, &db()?, cli.db.is_some()),
        Command::Prune(args) => commands::prune::run(args, &db()?),
        Command::Replay(args) => commands::replay::run(args, &db()?).await,
        Command::Resend(args) => commands::resend::run(args, &db()?, cli.db.is_some()).await,
        // check reads no history, but its report must not replace one.
        Command::Check(args) => commands::check::run(args, db().ok().as_deref()).await,
        Command::Tui(args) => commands::tui::run(args, &db()?).await,
    };
    match (result, named_db) {
        (Err(err), Some(path)) if crate::origin::names_path(&err, &path) => Err(db_origin.explain(err, "the path")),
        (result, _) => result,
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;
    use crate::config::Secret;

    /// The help of one flag of one subcommand.
    fn help(command: &str, flag: &str) -> String {
        let cli = Cli::command();
        let sub = cli.find_subcommand(command).unwrap();
        let arg = sub.get_arguments().find(|a| a.get_id() == flag).unwrap();
        arg.get_help().unwrap().to_string()
    }

    /// The config file is named in the top-level help, and a history
    /// path set in the environment is not printed there.
    #[test]
    fn the_help_names_the_config_file_and_hides_the_databases_variable() {
        // As one line: the paragraph is written in several.
        let top = Cli::command().render_help().to_string();
        let top = top.split_whitespace().collect::<Vec<_>>().join(" ");
        for part in [
            "config.toml",
            "PORTPREVIEW_CONFIG",
            "server, token, db, ca_cert and [secrets]",
        ] {
            assert!(top.contains(part), "{part}: {top}");
        }
        let cli = Cli::command();
        let db = cli.get_arguments().find(|a| a.get_id() == "db").unwrap();
        assert!(db.is_hide_env_values_set());
        assert!(db.get_help().unwrap().to_string().contains("the config file's db"));
        for flag in ["server", "token", "ca_cert"] {
            let shown = help("http", flag);
            assert!(
                shown.contains(&format!("the config file's {flag}")),
                "--{flag}: {shown}"
            );
        }
    }

    #[test]
    fn the_arguments_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_subcommand_version_names_the_program() {
        let expected = format!("portpreview {}\n", env!("CARGO_PKG_VERSION"));
        for sub in Cli::command().get_subcommands() {
            let err = Cli::try_parse_from(["portpreview", sub.get_name(), "--version"]).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::DisplayVersion, "{}", sub.get_name());
            assert_eq!(err.to_string(), expected, "{}", sub.get_name());
        }
    }

    #[test]
    fn an_empty_token_or_secret_is_refused_by_its_flag() {
        for args in [&["http", "3000", "--token", ""][..], &["replay", "1", "--secret", ""]] {
            let err = Cli::try_parse_from([&["portpreview"][..], args].concat()).unwrap_err();
            let text = err.to_string();
            assert!(text.contains("is empty: leave the flag out"), "{args:?}: {text}");
        }
    }

    /// The help's default is text; the library's tests run tunnels with the constant.
    #[test]
    fn the_local_timeout_flag_defaults_to_the_librarys_default() {
        let cli = Cli::try_parse_from(["portpreview", "http", "3000"]).unwrap();
        assert!(
            matches!(cli.command, Command::Http(args) if args.local_timeout == crate::tunnel::DEFAULT_LOCAL_TIMEOUT)
        );
    }

    /// Secrets and tokens are random text: one may start with a dash.
    #[test]
    fn a_token_or_secret_may_start_with_a_dash() {
        let cli = Cli::try_parse_from(["portpreview", "http", "3000", "--token", "-t0k3n"]).unwrap();
        assert!(
            matches!(cli.command, Command::Http(args) if args.token.as_ref().map(Secret::expose) == Some("-t0k3n"))
        );
        let cli = Cli::try_parse_from(["portpreview", "replay", "1", "--secret", "-s3cr3t", "--times", "2"]).unwrap();
        assert!(
            matches!(cli.command, Command::Replay(args) if args.run.secret.as_ref().map(|given| given.secret.expose()) == Some("-s3cr3t"))
        );
    }

    /// A refused value that holds a line break is quoted as given, escaped,
    /// not cut at the break into what read as two parts of the error.
    #[test]
    fn a_refused_value_with_a_line_break_is_quoted_whole() {
        let args = ["portpreview", "replay", "8", "--header", "X-A: a\r\nInjected: b"];
        let err = Cli::try_parse_from(args).unwrap_err();
        let rendered = breaks_escaped(err.render().to_string(), args.iter().skip(1).map(Into::into));
        let line = one_line(&rendered, "portpreview replay");
        assert!(
            line.starts_with(r"error: invalid value 'X-A: a\r\nInjected: b' for '--header <NAME: VALUE>'"),
            "{line}"
        );
        assert_eq!(line.lines().count(), 1, "{line}");
    }

    /// `--limit -1` is a bad value, not an unknown flag `-1`.
    #[test]
    fn a_negative_number_is_refused_as_the_flags_value() {
        for args in [
            &["history", "--limit", "-1"][..],
            &["prune", "--older-than", "-1d"],
            &["replay", "1", "--times", "-1"],
            &["check", "f.json", "--concurrency", "-2"],
            &["replay", "1", "--settle", "-5ms"],
            &["replay", "1", "--timeout", "-1s"],
            &["http", "3000", "--local-timeout", "-1s"],
        ] {
            let err = Cli::try_parse_from([&["portpreview"][..], args].concat()).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation, "{args:?}: {err}");
            assert!(
                err.to_string().starts_with("error: invalid value '-"),
                "{args:?}: {err}"
            );
        }
    }

    #[test]
    fn a_limit_that_is_no_count_says_what_a_limit_is() {
        for bad in ["-1", "x", "1.5"] {
            let err = Cli::try_parse_from(["portpreview", "history", "--limit", bad]).unwrap_err();
            assert!(
                err.to_string()
                    .contains("expected a whole number of deliveries, or 0 for all"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn each_command_names_its_own_default_attempt_count() {
        let replay = help("replay", "times");
        let check = help("check", "times");
        assert!(replay.contains("default 1") && !replay.contains("check"), "{replay}");
        assert!(check.contains("default 2") && !check.contains("replay"), "{check}");
    }
}
