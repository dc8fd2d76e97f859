//! `portpreview check [FIXTURE|DIR|SUITE.toml ...]`: a replay verdict per
//! committed fixture, for CI. No relay and no history database needed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use portpreview_shared::sanitize::escape_str;
use serde_json::json;

use super::run::{clear_progress, probe_spec, progress_printer, RunArgs};
use crate::config::Secret;
use crate::fixture::Fixture;
use crate::render;
use crate::replay::junit::{self, CaseResult};
use crate::replay::{self, ReplayOptions, Report};
use crate::suite::{Suite, SuiteFixture};

/// Arguments of `portpreview check`.
#[derive(Debug, clap::Args)]
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
}

/// Checks every fixture; exits 0 when all are idempotent, 1 when any is not
/// (or failed, or was inconclusive), 2 when one could not run.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let jobs = expand(&args.inputs)?;
    if jobs.is_empty() {
        anyhow::bail!("no fixtures found in {}", list(&args.inputs));
    }
    let mut results: Vec<(String, Result<Report, String>)> = Vec::with_capacity(jobs.len());
    for job in &jobs {
        let name = job.fixture.display().to_string();
        let result = check_one(job, &args.run).await.map_err(|err| crate::error_line(&err));
        clear_progress();
        if let Err(reason) = &result {
            let name = escape_str(&name);
            // Most reasons name the fixture already.
            match reason.contains(name.as_ref()) {
                true => crate::to_stderr(format_args!("error: {reason}\n")),
                false => crate::to_stderr(format_args!("error: {name}: {reason}\n")),
            }
        }
        results.push((name, result));
    }
    let code = exit_code(&results);
    // A reader that stopped early (`| head`) does not change the verdict.
    if let Err(err) = print(&results, args.json, code) {
        if !crate::is_broken_pipe(&err) {
            return Err(err);
        }
    }
    if let Some(path) = &args.junit {
        let cases: Vec<(String, CaseResult<'_>)> = results
            .iter()
            .map(|(name, result)| {
                let case = match result {
                    Ok(report) => CaseResult::Verdict(report),
                    Err(reason) => CaseResult::Error(reason.clone()),
                };
                (name.clone(), case)
            })
            .collect();
        std::fs::write(path, junit::document("portpreview check", &cases))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(ExitCode::from(code))
}

async fn check_one(job: &Job, flags: &RunArgs) -> anyhow::Result<Report> {
    let request = Fixture::load(&job.fixture)?.to_new_delivery();
    let (mut opts, secret_env) = options(flags, job.entry.as_ref())?;
    if opts.resign || opts.fresh {
        opts.secret =
            crate::config::resolve_secret(opts.secret.take(), replay::provider_of(&request), secret_env.as_deref())?;
    }
    Ok(replay::run(request, &opts, &progress_printer()).await?)
}

/// Options for one fixture: flags, else the suite entry, else the defaults.
fn options(flags: &RunArgs, entry: Option<&SuiteFixture>) -> anyhow::Result<(ReplayOptions, Option<String>)> {
    let defaults = ReplayOptions::default();
    let Some(entry) = entry else {
        return Ok((flags.options(), None));
    };
    let probe = probe_spec(flags.check_cmd.as_deref(), flags.check_url.as_deref())
        .or_else(|| probe_spec(entry.check_cmd.as_deref(), entry.check_url.as_deref()));
    let opts = ReplayOptions {
        times: flags.times.or(entry.times).unwrap_or(defaults.times),
        concurrency: flags.concurrency.or(entry.concurrency).unwrap_or(defaults.concurrency),
        target: flags.target.clone().or_else(|| entry.target.clone()),
        probe,
        settle: flags.settle.or(entry.settle()?).unwrap_or(defaults.settle),
        timeout: flags.timeout.or(entry.timeout()?).unwrap_or(defaults.timeout),
        fresh: flags.fresh || entry.fresh.unwrap_or(false),
        fresh_field: flags.fresh_field.clone().or_else(|| entry.fresh_field.clone()),
        resign: flags.resign || entry.resign.unwrap_or(false),
        secret: flags.secret.clone().map(Secret::new),
        ..defaults
    };
    Ok((opts, entry.secret_env.clone()))
}

/// Expands directories (their `*.json`, sorted) and suite files into jobs.
fn expand(inputs: &[PathBuf]) -> anyhow::Result<Vec<Job>> {
    let mut jobs = Vec::new();
    for input in inputs {
        if Suite::is_suite_path(input) {
            for entry in Suite::load(input)?.fixture {
                for fixture in fixtures_at(&entry.path)? {
                    jobs.push(Job {
                        fixture,
                        entry: Some(entry.clone()),
                    });
                }
            }
        } else {
            jobs.extend(
                fixtures_at(input)?
                    .into_iter()
                    .map(|fixture| Job { fixture, entry: None }),
            );
        }
    }
    Ok(jobs)
}

/// The fixture at `path`, or every `*.json` under the directory `path`,
/// subdirectories included (`fixtures/stripe/`, `fixtures/github/`), in
/// path order. Symbolic links to directories are not followed, so a link
/// loop cannot make the walk endless.
fn fixtures_at(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut found = Vec::new();
    let mut dirs = vec![path.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let cannot_read = || format!("cannot read directory {}", dir.display());
        for entry in std::fs::read_dir(&dir).with_context(cannot_read)? {
            let entry = entry.with_context(cannot_read)?;
            let file = entry.path();
            if entry.file_type().with_context(cannot_read)?.is_dir() {
                dirs.push(file);
            } else if file.is_file() && file.extension().is_some_and(|ext| ext.eq_ignore_ascii_case("json")) {
                found.push(file);
            }
        }
    }
    found.sort();
    Ok(found)
}

fn exit_code(results: &[(String, Result<Report, String>)]) -> u8 {
    if results.iter().any(|(_, r)| r.is_err()) {
        2
    } else if results
        .iter()
        .any(|(_, r)| matches!(r, Ok(report) if report.exit_code() != 0))
    {
        1
    } else {
        0
    }
}

fn print(results: &[(String, Result<Report, String>)], json: bool, code: u8) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let count = |verdict: &str| {
        results
            .iter()
            .filter(|(_, r)| match r {
                Ok(report) => report.verdict() == verdict,
                Err(_) => verdict == "error",
            })
            .count()
    };
    if json {
        let fixtures: Vec<serde_json::Value> = results
            .iter()
            .map(|(name, result)| match result {
                Ok(report) => {
                    let mut value = report.to_json();
                    value["fixture"] = name.clone().into();
                    value
                }
                Err(reason) => json!({"fixture": name, "verdict": "error", "idempotent": false, "error": reason}),
            })
            .collect();
        let all = json!({
            "idempotent": code == 0,
            "exit_code": code,
            "counts": {
                "idempotent": count("idempotent"),
                "not_idempotent": count("not_idempotent"),
                "failed": count("failed"),
                "inconclusive": count("inconclusive"),
                "error": count("error"),
            },
            "fixtures": fixtures,
        });
        writeln!(out, "{}", render::json::to_terminal_text(&all))?;
        return Ok(());
    }
    for (name, result) in results {
        writeln!(out, "━━ {}", escape_str(name))?;
        match result {
            Ok(report) => writeln!(out, "{}", report.render_text())?,
            Err(reason) => writeln!(out, "✗ could not run: {}\n", escape_str(reason))?,
        }
    }
    writeln!(
        out,
        "{} fixture{}: {} idempotent, {} not idempotent, {} failed, {} inconclusive, {} could not run",
        results.len(),
        if results.len() == 1 { "" } else { "s" },
        count("idempotent"),
        count("not_idempotent"),
        count("failed"),
        count("inconclusive"),
        count("error"),
    )?;
    Ok(())
}

fn list(inputs: &[PathBuf]) -> String {
    inputs
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
