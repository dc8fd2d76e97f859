//! `portpreview check [FIXTURE|DIR|SUITE.toml ...]`: a replay verdict per
//! committed fixture, for CI. No relay and no history database needed.

mod results;
mod walk;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use portpreview_shared::sanitize::escape_str;
use tokio_util::sync::CancellationToken;

use super::guard::refuse_to_overwrite_a_database;
use super::replay_run::{
    clear_progress, probe_spec, progress_printer, refuse_to_overwrite_an_input, write_junit, RunArgs,
};
use crate::fixture::Fixture;
use crate::replay::{self, Attempt, HadBefore, ReplayError, ReplayOptions, Report};
use crate::suite::{Suite, SuiteFixture};
use results::Outcome;

/// Arguments of `portpreview check`.
#[derive(Debug, clap::Args)]
#[command(mut_arg("times", |arg| arg.help("Attempts per fixture (1 to 100000; default 2, or the suite's times)")))]
pub struct Args {
    /// Fixtures (`portpreview export --format json`), directories of them, or suite files (.toml).
    #[arg(value_name = "FIXTURE|DIR|SUITE.toml", required = true)]
    pub inputs: Vec<PathBuf>,
    /// How to replay and judge; flags win over a suite's settings.
    #[command(flatten)]
    pub run: RunArgs,
    /// Print one JSON object with a report per fixture.
    #[arg(long)]
    pub json: bool,
    /// Also write a JUnit XML file: one test case per fixture.
    #[arg(long, value_name = "FILE", value_parser = crate::replay::options::parse_report_path)]
    pub junit: Option<PathBuf>,
}

/// One fixture to check and its suite entry, if it came from a suite.
struct Job {
    fixture: PathBuf,
    entry: Option<SuiteFixture>,
    /// Why a suite named to be checked could not be read: reported as a
    /// fixture that could not run, in the JSON and JUnit reports too, so
    /// a typo in a suite leaves CI a report to show.
    unreadable: Option<String>,
}

impl Job {
    fn fixture(fixture: PathBuf, entry: Option<SuiteFixture>) -> Self {
        Self {
            fixture,
            entry,
            unreadable: None,
        }
    }
}

/// Checks every fixture; exits 0 when all are idempotent, 1 when any is not
/// (or failed, or was inconclusive), 2 when one could not run, 130 when
/// ctrl-c stopped the check part way.
pub async fn run(args: Args, history: Option<&Path>) -> anyhow::Result<ExitCode> {
    let jobs = expand(&args.inputs, &args.run);
    if jobs.is_empty() {
        anyhow::bail!("no fixtures found in {}", list(&args.inputs));
    }
    if let Some(junit) = &args.junit {
        let fixtures = jobs.iter().map(|job| job.fixture.as_path());
        refuse_to_overwrite_an_input(junit, args.inputs.iter().map(PathBuf::as_path).chain(fixtures))?;
        refuse_to_overwrite_a_database(junit, history, "the JUnit report")?;
    }
    let signs = |job: &Job| {
        let entry = job.entry.as_ref();
        args.run.resign
            || args.run.fresh
            || entry.is_some_and(|e| e.resign.unwrap_or(false) || e.fresh.unwrap_or(false))
    };
    if args.run.secret.is_some() && !jobs.iter().any(signs) {
        crate::to_stderr(format_args!("{}", super::replay_run::SECRET_UNUSED));
    }
    let probes = |job: &Job| {
        job.entry
            .as_ref()
            .is_some_and(|e| e.check_url.is_some() || e.check_cmd.is_some())
    };
    let probed = args.run.check_url.is_some() || args.run.check_cmd.is_some() || jobs.iter().any(probes);
    // The flag's --times is every fixture's: a suite's own is overridden.
    for warning in args.run.unused(probed, args.run.times.unwrap_or(CHECK_TIMES)) {
        crate::to_stderr(format_args!("{warning}"));
    }
    // One stop for the whole check: ctrl-c ends the fixture in progress
    // and leaves the rest unstarted, whenever it comes.
    let stop = CancellationToken::new();
    let results = crate::signalled::finish_early_on_signal(check_all(&jobs, &args.run, &stop), &stop).await;
    let code = results::exit_code(&results);
    // A reader that stopped early (`| head`) does not change the verdict.
    if let Err(err) = results::print(&results, args.json, code).context("cannot write the report to stdout") {
        if !crate::is_broken_pipe(&err) {
            return Err(err);
        }
    }
    if let Some(path) = &args.junit {
        write_junit(path, &results::junit(&results)).await?;
    }
    Ok(ExitCode::from(code))
}

/// What the fixtures checked so far showed of the handlers they went to,
/// by `host:port`.
#[derive(Default)]
struct Earlier {
    /// The events a fixture got a 2xx for, each with the fixture that sent
    /// it first: to that handler, a later fixture of the same event (a
    /// provider's retry, exported beside its first delivery) is an event
    /// it has had.
    events: HashMap<Event, String>,
    /// The last fixture each handler answered: a handler that stops
    /// answering most likely died on it.
    answered: HashMap<String, String>,
}

/// An event at a handler: `host:port`, event key, and the key's scope,
/// which tells events apart as the history does (one body sent to
/// `/orders` and to `/users` is two).
type Event = (String, String, String);

impl Earlier {
    /// How the handler had the event, when an earlier fixture sent it.
    fn had(&self, event: Option<&Event>) -> Option<HadBefore> {
        let fixture = self.events.get(event?)?;
        Some(HadBefore::EarlierFixture(fixture.clone()))
    }

    /// Why a fixture could not run, naming the fixture a handler found
    /// down had answered last: "is the handler running?" alone would send
    /// the user to the job's setup, where it was running.
    fn why_down(&self, err: ReplayError, handler: Option<&String>) -> anyhow::Error {
        match (&err, handler.and_then(|handler| self.answered.get(handler))) {
            (ReplayError::TargetDown { .. }, Some(last)) => anyhow::anyhow!(
                "{err}; it answered {} earlier in this check, and stopped answering after it",
                escape_str(last)
            ),
            _ => err.into(),
        }
    }

    /// Notes what fixture `name`'s run showed of its handler and event.
    fn note(&mut self, name: &str, handler: Option<String>, event: Option<Event>, report: &Report) {
        if let Some(handler) = handler.filter(|_| report.attempts.iter().any(|a| a.answer.status.is_some())) {
            self.answered.insert(handler, name.to_owned());
        }
        if let Some(event) = event.filter(|_| report.attempts.iter().any(Attempt::succeeded)) {
            self.events.entry(event).or_insert_with(|| name.to_owned());
        }
    }
}

/// Checks the fixtures in order until `stop`; those after it are not run.
async fn check_all(jobs: &[Job], flags: &RunArgs, stop: &CancellationToken) -> Vec<(String, Outcome)> {
    let mut results = Vec::with_capacity(jobs.len());
    let mut earlier = Earlier::default();
    for (job, name) in jobs.iter().zip(names(jobs)) {
        if stop.is_cancelled() {
            results.push((name, Outcome::NotRun));
            continue;
        }
        let result = check_one(job, &name, flags, &mut earlier, stop.cancelled()).await;
        clear_progress();
        let outcome = match result {
            Ok(report) => Outcome::Ran(Box::new(report)),
            Err(err) => {
                let reason = crate::error_line(&err);
                let shown = escape_str(&name);
                // Most reasons name the fixture already.
                match reason.contains(shown.as_ref()) {
                    true => crate::to_stderr(format_args!("error: {reason}\n")),
                    false => crate::to_stderr(format_args!("error: {shown}: {reason}\n")),
                }
                Outcome::Error(reason)
            }
        };
        results.push((name, outcome));
    }
    results
}

/// Each job's name in the reports: its fixture's path, and when a suite
/// lists one fixture more than once (against two targets, say), which
/// listing it is (`a.json #2`), so a JUnit test case or a JSON entry
/// names the run that failed.
fn names(jobs: &[Job]) -> Vec<String> {
    let paths: Vec<PathBuf> = jobs.iter().map(|job| lexical(&job.fixture)).collect();
    (paths.iter())
        .enumerate()
        .map(|(i, path)| {
            let listed = paths.iter().filter(|p| *p == path).count();
            let nth = paths[..=i].iter().filter(|p| *p == path).count();
            match listed {
                1 => path.display().to_string(),
                _ => format!("{} #{nth}", path.display()),
            }
        })
        .collect()
}

/// `path` without its `.` and with each `dir/..` taken away, as the text
/// reads: a fixture reached as `./a.json` or `suites/../a.json` from a
/// suite is named `a.json`, as a JUnit test case must be from run to run.
fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.components().next_back(), Some(Component::Normal(_))) => {
                out.pop();
            }
            // `/..` is `/`.
            Component::ParentDir if out.has_root() => {}
            other => out.push(other),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

async fn check_one(
    job: &Job,
    name: &str,
    flags: &RunArgs,
    earlier: &mut Earlier,
    interrupt: impl std::future::Future<Output = ()> + Send,
) -> anyhow::Result<Report> {
    if let Some(reason) = &job.unreadable {
        anyhow::bail!("{reason}");
    }
    let request = Fixture::load(&job.fixture)?.to_new_delivery();
    let (mut opts, secret_env) = options(flags, job.entry.as_ref())?;
    let found = crate::config::resolve_secret(opts.secret.take(), replay::provider_of(&request), secret_env.as_deref());
    opts.secret = match opts.resign || opts.fresh {
        true => found?,
        // Signs nothing: known only so that advice to pass --resign names
        // the secret it would sign with.
        false => found.ok().flatten(),
    };
    let handler = (replay::plan::resolve_target(&request.target, opts.target.as_deref(), &request.path).ok())
        .map(|(endpoint, _)| endpoint.handler());
    // A fresh run sends new events, and a request without a key is no event.
    let event = (handler.clone())
        .filter(|_| !opts.fresh && !request.event_key.is_empty())
        .map(|handler| (handler, request.event_key.clone(), request.event_scope()));
    opts.had_before = earlier.had(event.as_ref());
    let report = (replay::run_until(request, &opts, &progress_printer(), interrupt).await)
        .map_err(|err| earlier.why_down(err, handler.as_ref()))?;
    earlier.note(name, handler, event, &report);
    Ok(report)
}

/// Warns of a suite entry's `secret_env` that nothing signs with, and of a
/// `fresh_field` that no fresh run reads, as the command line does of
/// `--secret` (`--fresh-field` alone it refuses): the key was written to
/// do something, and would do nothing without a word. The entry is named
/// as the suite's errors name it (`suite.toml fixture 2 (a.json)`): one
/// path may be listed twice.
fn warn_of_unused_keys(suite: &Path, n: usize, entry: &SuiteFixture, flags: &RunArgs) {
    let fresh = flags.fresh || entry.fresh.unwrap_or(false);
    let signs = fresh || flags.resign || entry.resign.unwrap_or(false);
    let unused = [
        (entry.secret_env.is_some() && !signs && flags.secret.is_none())
            .then_some("secret_env signs only with resign or fresh; the attempts carry the recorded signature"),
        (entry.fresh_field.is_some() && !fresh)
            .then_some("fresh_field is read only with fresh = true (or --fresh); the attempts keep their identity"),
    ];
    for why in unused.into_iter().flatten() {
        crate::to_stderr(format_args!(
            "warning: {} fixture {n} ({}): {why}\n",
            escape_str(&suite.display().to_string()),
            escape_str(&entry.path.display().to_string())
        ));
    }
}

/// Attempts per fixture unless `--times` or the suite says otherwise. One
/// attempt holds no duplicate: a CI gate run without `--times` would pass
/// any handler.
const CHECK_TIMES: u32 = 2;

/// Options for one fixture: flags, else the suite entry, else the defaults.
fn options(flags: &RunArgs, entry: Option<&SuiteFixture>) -> anyhow::Result<(ReplayOptions, Option<String>)> {
    let defaults = ReplayOptions::default();
    let Some(entry) = entry else {
        let opts = ReplayOptions {
            times: flags.times.unwrap_or(CHECK_TIMES),
            ..flags.options()
        };
        return Ok((opts, None));
    };
    let probe = probe_spec(flags.check_cmd.as_deref(), flags.check_url.as_deref())
        .or_else(|| probe_spec(entry.check_cmd.as_deref(), entry.check_url.as_deref()));
    let opts = ReplayOptions {
        times: flags.times.or(entry.times).unwrap_or(CHECK_TIMES),
        concurrency: flags.concurrency.or(entry.concurrency),
        target: flags.target.clone().or_else(|| entry.target.clone()),
        probe,
        settle: flags.settle.or(entry.settle()?).unwrap_or(defaults.settle),
        timeout: flags.timeout.or(entry.timeout()?).unwrap_or(defaults.timeout),
        fresh: flags.fresh || entry.fresh.unwrap_or(false),
        fresh_field: flags.fresh_field.clone().or_else(|| entry.fresh_field.clone()),
        resign: flags.resign || entry.resign.unwrap_or(false),
        secret: flags.secret.clone(),
        expect_effect: flags.expect_effect || entry.expect_effect.unwrap_or(false),
        ..defaults
    };
    Ok((opts, entry.secret_env.clone()))
}

/// Expands directories (their `*.json`, sorted) and suite files into
/// jobs. What cannot be read (a suite, a directory) is a job that cannot run.
fn expand(inputs: &[PathBuf], flags: &RunArgs) -> Vec<Job> {
    let named_suites: Vec<PathBuf> = (inputs.iter())
        .filter(|input| Suite::is_suite_path(input))
        .filter_map(|input| input.canonicalize().ok())
        .collect();
    let mut suites = walk::Suites {
        named: &named_suites,
        warned: std::collections::HashSet::new(),
    };
    let unreadable = |path: &Path, err: anyhow::Error| Job {
        unreadable: Some(crate::error_line(&err)),
        ..Job::fixture(path.to_path_buf(), None)
    };
    let found = |path: &Path, entry: Option<&SuiteFixture>, suites: &mut walk::Suites<'_>| {
        let found = walk::fixtures_at(path, suites);
        let fixtures = found.fixtures.into_iter().map(|f| Job::fixture(f, entry.cloned()));
        let unread = found.unreadable.into_iter().map(|(path, err)| unreadable(&path, err));
        fixtures.chain(unread).collect::<Vec<_>>()
    };
    let mut jobs = Vec::new();
    for input in inputs {
        if !Suite::is_suite_path(input) {
            jobs.extend(found(input, None, &mut suites));
            continue;
        }
        let suite = match Suite::load(input) {
            Ok(suite) => suite,
            Err(err) => {
                jobs.push(unreadable(input, err));
                continue;
            }
        };
        if suite.fixture.is_empty() {
            let empty = anyhow::anyhow!("{} lists no fixtures: add a [[fixture]] with a path", input.display());
            jobs.push(unreadable(input, empty));
        }
        for (i, entry) in suite.fixture.into_iter().enumerate() {
            warn_of_unused_keys(input, i + 1, &entry, flags);
            if Suite::is_suite_path(&entry.path) {
                let nested = anyhow::anyhow!(
                    "{}: a suite's path names a fixture or a folder of them, not another suite",
                    entry.path.display()
                );
                jobs.push(unreadable(&entry.path, nested));
                continue;
            }
            jobs.extend(found(&entry.path, Some(&entry), &mut suites));
        }
    }
    jobs
}

fn list(inputs: &[PathBuf]) -> String {
    inputs
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixture_is_named_by_its_path_as_it_reads() {
        let named = |path: &str| lexical(Path::new(path)).display().to_string();
        assert_eq!(named("./fixtures/a.json"), "fixtures/a.json");
        assert_eq!(named("suites/../many/f1.json"), "many/f1.json");
        assert_eq!(named("../repo/./a.json"), "../repo/a.json");
        assert_eq!(named("a/b/../../../c.json"), "../c.json");
        assert_eq!(named("/../a.json"), "/a.json");
        assert_eq!(named("a/.."), ".");
    }

    /// `check` given no flags.
    fn no_flags() -> RunArgs {
        #[derive(clap::Parser)]
        struct Check {
            #[command(flatten)]
            run: RunArgs,
        }
        <Check as clap::Parser>::parse_from(["check"]).run
    }

    #[test]
    fn a_suite_naming_another_suite_or_that_cannot_be_read_is_a_job_that_cannot_run() {
        let dir = crate::store::tests::ScratchDir::new("check-expand");
        let suite = dir.0.join("suite.toml");
        std::fs::write(&suite, "[[fixture]]\npath = \"other.toml\"\n").unwrap();
        let jobs = expand(std::slice::from_ref(&suite), &no_flags());
        assert_eq!(jobs.len(), 1);
        assert!(
            jobs[0]
                .unreadable
                .as_deref()
                .is_some_and(|why| why.ends_with("not another suite")),
            "{:?}",
            jobs[0].unreadable
        );
        std::fs::write(&suite, "timez = 1\n").unwrap();
        let jobs = expand(&[suite], &no_flags());
        assert!(jobs[0].unreadable.as_deref().is_some_and(|why| why.contains("timez")));
    }
}
