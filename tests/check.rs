//! `portpreview check`: fixtures exported from a real history, committed
//! beside a handler, checked in CI mode by the real binary — no relay, no
//! history database — with exit codes, JSON and JUnit checked.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::bin::portpreview_bin;
use common::handlers::{slack_delivery, stripe_delivery, Behaviour, Handler, STRIPE_BODY, STRIPE_SECRET};
use common::local::{Answer, LocalHandler};
use portpreview::store::{NewDelivery, Outcome, Store};
use portpreview_shared::provider::{resign, Provider};
use portpreview_shared::Header;
use serde_json::Value;

/// A project directory with `fixtures/stripe.json` and `fixtures/slack/slack.json`,
/// exported by `portpreview export` from a history that is then deleted.
struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("history.db");
        let store = Store::open(&db).unwrap();
        let ok = Outcome {
            status: Some(200),
            ..Outcome::default()
        };
        let recorded_at = "http://127.0.0.1:1";
        let stripe = store.insert_delivery(&stripe_delivery(recorded_at), &ok).unwrap();
        let slack = store.insert_delivery(&slack_delivery(recorded_at), &ok).unwrap();
        drop(store);
        std::fs::create_dir_all(dir.path().join("fixtures/slack")).unwrap();
        for (id, name) in [(stripe, "stripe.json"), (slack, "slack/slack.json")] {
            let out = dir.path().join("fixtures").join(name);
            let ran = run(
                dir.path(),
                &[
                    "--db",
                    db.to_str().unwrap(),
                    "export",
                    &id.to_string(),
                    "-o",
                    out.to_str().unwrap(),
                ],
                &[],
            );
            assert_eq!(ran.code, 0, "export: {}", ran.stderr);
        }
        std::fs::remove_file(&db).unwrap();
        Self { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn check(&self, args: &[&str], env: &[(&str, &str)]) -> Ran {
        let mut all = vec!["check"];
        all.extend_from_slice(args);
        run(self.dir.path(), &all, env)
    }
}

struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Ran {
    ran(common::process::output_of(&mut command(cwd, args, env)))
}

fn ran(output: std::process::Output) -> Ran {
    Ran {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `portpreview args…` in `cwd`, with no config, secrets or history of the caller's.
fn command(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(portpreview_bin());
    command
        .current_dir(cwd)
        .args(args)
        .env("PORTPREVIEW_CONFIG", "/dev/null")
        // `check` needs no history: point the default somewhere that must stay untouched.
        .env("PORTPREVIEW_DB", cwd.join("untouched").join("history.db"))
        .env_remove("PORTPREVIEW_SECRET")
        .env_remove("PORTPREVIEW_SECRET_STRIPE");
    for (name, value) in env {
        command.env(name, value);
    }
    command
}

#[test]
fn a_directory_of_fixtures_passes_against_a_handler_that_dedups() {
    let project = Project::new();
    // Other JSON beside the fixtures, as a project keeps: skipped, said so.
    std::fs::write(project.path("fixtures/package.json"), br#"{"name":"hooks"}"#).unwrap();
    std::fs::write(project.path("fixtures/slack/ids.json"), b"[1, 2, 3]").unwrap();
    let good = Handler::start(Behaviour::DedupsInOneTransaction);
    let ran = project.check(
        &[
            "fixtures",
            "--target",
            &good.url(),
            "--times",
            "3",
            "--check-url",
            &good.state_url(),
            "--settle",
            "100ms",
        ],
        &[],
    );
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout.contains("━━ fixtures/slack/slack.json"),
        "fixtures in subdirectories are found: {}",
        ran.stdout
    );
    assert!(
        ran.stdout.contains("2 fixtures: 2 idempotent, 0 not idempotent"),
        "{}",
        ran.stdout
    );
    assert_eq!(good.balance(), 2, "one credit per event");
    assert!(
        ran.stderr
            .contains("note: fixtures/package.json is skipped: JSON without a portpreview_fixture field"),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains("note: fixtures/slack/ids.json is skipped"),
        "an array is no fixture either: {}",
        ran.stderr
    );
    assert!(!project.path("untouched").exists(), "check opened no history database");

    // The same fixture through `replay --from`, with a body edited by hand.
    std::fs::write(project.path("other.json"), br#"{"id":"evt_other","object":"event"}"#).unwrap();
    let ran = run(
        project.dir.path(),
        &[
            "replay",
            "--from",
            "fixtures/stripe.json",
            "--target",
            &good.url(),
            "--body-file",
            "other.json",
            "--times",
            "2",
            "--json",
        ],
        &[],
    );
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(good.balance(), 3, "the edited body is a new event to the handler");
    let report: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(report["event_key"], "evt_other", "the event the edited body names");
    assert_eq!(
        report.get("delivery_id"),
        Some(&Value::Null),
        "no delivery of a history replayed, and the field there all the same: {report}"
    );
    assert!(
        report["warnings"]
            .to_string()
            .contains("the body was changed but not re-signed"),
        "{report}"
    );
    assert!(
        report["attempts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["event_key"] == "evt_other"),
        "{report}"
    );
    assert!(
        !project.path("untouched").exists(),
        "replay --from opened no history database"
    );
}

#[test]
fn a_suite_fails_the_bad_handler_in_junit_and_exits_1() {
    let project = Project::new();
    let bad = Handler::start(Behaviour::CreditsEveryDelivery);
    let good = Handler::start(Behaviour::DedupsInOneTransaction);
    let suite = format!(
        "[[fixture]]\npath = \"fixtures/stripe.json\"\ntarget = \"{}\"\ncheck_url = \"{}\"\n\n\
         [[fixture]]\npath = \"fixtures/slack/slack.json\"\ntarget = \"{}\"\ncheck_url = \"{}\"\nsettle = \"50ms\"\n",
        bad.url(),
        bad.state_url(),
        good.url(),
        good.state_url()
    );
    std::fs::create_dir(project.path("ci")).unwrap();
    // Paths in a suite are relative to the suite file.
    std::fs::write(
        project.path("ci/suite.toml"),
        suite.replace("fixtures/", "../fixtures/"),
    )
    .unwrap();
    // In a folder the checkout does not have: it is made.
    let junit = project.path("reports/junit.xml");
    let ran = project.check(
        &[
            "ci/suite.toml",
            "--times",
            "3",
            "--settle",
            "100ms",
            "--junit",
            junit.to_str().unwrap(),
            "--json",
        ],
        &[],
    );
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let json: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(json["idempotent"], false);
    assert_eq!(json["counts"]["not_idempotent"], 1);
    assert_eq!(
        json["counts"]["side_effects_not_checked"], 0,
        "the suite probes every fixture"
    );
    assert_eq!(json["fixtures"][0]["verdict"], "not_idempotent");
    assert_eq!(json["fixtures"][1]["verdict"], "idempotent");

    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<testcase ").count(), 2, "{xml}");
    assert_eq!(xml.matches("<failure ").count(), 1, "{xml}");
    assert!(xml.contains("tests=\"2\" failures=\"1\" errors=\"0\""), "{xml}");
    let failure = &xml[xml.find("<failure").unwrap()..];
    assert!(
        failure.starts_with("<failure message=\"not_idempotent: duplicates_change_nothing: attempts 2–3"),
        "{failure}"
    );
    let stripe_case = &xml[xml.find("stripe.json").unwrap()..xml.find("slack.json").unwrap()];
    assert!(
        stripe_case.contains("<failure"),
        "the failure belongs to the stripe fixture: {xml}"
    );
    // Each case lasts its whole run: at least a settle window before, one after
    // each of its two steps, and three at the end — not the handler's milliseconds.
    for case in xml.split("<testcase ").skip(1) {
        let time: f64 = case
            .split("time=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("no time in {case}"));
        assert!(time >= 0.6, "time {time} leaves out the settle windows: {xml}");
    }
}

/// One fixture listed twice in a suite, against two handlers, once as
/// `./fixtures/…`: each run keeps a name of its own, so the report says
/// which one failed.
#[test]
fn a_fixture_listed_twice_in_a_suite_is_named_apart() {
    let project = Project::new();
    let bad = Handler::start(Behaviour::CreditsEveryDelivery);
    let good = Handler::start(Behaviour::DedupsInOneTransaction);
    let entry = |path: &str, handler: &Handler| {
        format!(
            "[[fixture]]\npath = \"{path}\"\ntarget = \"{}\"\ncheck_url = \"{}\"\nsettle = \"50ms\"\n",
            handler.url(),
            handler.state_url()
        )
    };
    let suite = entry("fixtures/stripe.json", &good) + &entry("./fixtures/stripe.json", &bad);
    std::fs::write(project.path("suite.toml"), suite).unwrap();
    let junit = project.path("junit.xml");
    let ran = project.check(&["suite.toml", "--junit", junit.to_str().unwrap(), "--json"], &[]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let json: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(json["fixtures"][0]["fixture"], "fixtures/stripe.json #1");
    assert_eq!(json["fixtures"][1]["fixture"], "fixtures/stripe.json #2");
    assert_eq!(json["fixtures"][1]["verdict"], "not_idempotent");
    let xml = std::fs::read_to_string(&junit).unwrap();
    let second = &xml[xml.find("stripe.json #2").expect("named apart")..];
    assert!(second.contains("<failure"), "{xml}");
    assert!(
        !xml[..xml.find("stripe.json #2").unwrap()].contains("<failure"),
        "{xml}"
    );
}

#[test]
fn a_fixture_that_cannot_run_exits_2_and_is_a_junit_error() {
    let project = Project::new();
    let down = common::local::nothing_answers_at();
    let junit = project.path("junit.xml");
    let ran = project.check(
        &[
            "fixtures/stripe.json",
            "missing.json",
            "--target",
            &down,
            "--junit",
            junit.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(ran.stderr.contains("nothing answers at"), "{}", ran.stderr);
    assert!(ran.stderr.contains("missing.json"), "{}", ran.stderr);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<error ").count(), 2, "{xml}");
}

/// A fixture that lost its `portpreview_fixture` line in an edit fails the
/// check, where other JSON in the folder is passed over; the fixtures
/// that did not pass are named again above the tally.
#[test]
fn a_fixture_that_lost_its_version_cannot_run_and_is_named_above_the_tally() {
    let project = Project::new();
    let stripe = std::fs::read_to_string(project.path("fixtures/stripe.json")).unwrap();
    let mut edited: Value = serde_json::from_str(&stripe).unwrap();
    edited.as_object_mut().unwrap().remove("portpreview_fixture");
    std::fs::write(project.path("fixtures/edited.json"), edited.to_string()).unwrap();
    std::fs::write(project.path("fixtures/package.json"), br#"{"name":"hooks"}"#).unwrap();
    let good = Handler::start(Behaviour::DedupsInOneTransaction);
    let ran = project.check(
        &[
            "fixtures",
            "--target",
            &good.url(),
            "--check-url",
            &good.state_url(),
            "--settle",
            "50ms",
        ],
        &[],
    );
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stderr.contains("note: fixtures/package.json is skipped"),
        "{}",
        ran.stderr
    );
    let edited_said = "fixtures/edited.json is not a PortPreview fixture: it holds a request but no \
                       \"portpreview_fixture\": 1, which every fixture begins with";
    assert!(ran.stderr.contains(&format!("error: {edited_said}")), "{}", ran.stderr);
    assert!(
        ran.stdout.ends_with(&format!(
            "Not passed:\n  fixtures/edited.json: ✗ could not run: {edited_said}\n\
             3 fixtures: 2 idempotent, 0 not idempotent, 0 failed, 0 inconclusive, 1 could not run\n"
        )),
        "{}",
        ran.stdout
    );

    // One attempt passes, and the tally says what it did not try.
    let ran = project.check(
        &[
            "fixtures/stripe.json",
            "--target",
            &good.url(),
            "--check-url",
            &good.state_url(),
            "--times",
            "1",
            "--settle",
            "50ms",
        ],
        &[],
    );
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout.ends_with(
            "1 fixture: 1 idempotent (1 on one attempt: no duplicate sent), 0 not idempotent, 0 failed, \
             0 inconclusive, 0 could not run\n"
        ),
        "{}",
        ran.stdout
    );
}

/// A provider's retry exported beside its first delivery: to a fresh
/// handler that dedups, the second fixture's event is not new, and
/// `--expect-effect` does not hold that against it.
#[test]
fn a_retry_exported_beside_its_first_delivery_passes_a_check_expecting_an_effect() {
    let project = Project::new();
    std::fs::create_dir(project.path("retried")).unwrap();
    for name in ["a-first.json", "b-retry.json"] {
        std::fs::copy(project.path("fixtures/stripe.json"), project.path("retried").join(name)).unwrap();
    }
    let good = Handler::start(Behaviour::DedupsInOneTransaction);
    let ran = project.check(
        &[
            "retried",
            "--target",
            &good.url(),
            "--check-url",
            &good.state_url(),
            "--times",
            "3",
            "--settle",
            "50ms",
            "--expect-effect",
        ],
        &[],
    );
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(good.balance(), 1, "one credit for the event");
    let retry = &ran.stdout[ran.stdout.find("━━ retried/b-retry.json").expect("the retry's report")..];
    assert!(
        retry.contains(
            "attempt 1 changed nothing: the handler had seen the event before, retried/a-first.json sent it \
             earlier in this check"
        ),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout
            .ends_with("2 fixtures: 2 idempotent, 0 not idempotent, 0 failed, 0 inconclusive, 0 could not run\n"),
        "{}",
        ran.stdout
    );

    // To a handler that credits every delivery, the retry's one attempt is
    // a duplicate already: it fails, one attempt or not.
    let bad = Handler::start(Behaviour::CreditsEveryDelivery);
    let ran = project.check(
        &[
            "retried",
            "--target",
            &bad.url(),
            "--check-url",
            &bad.state_url(),
            "--times",
            "1",
            "--settle",
            "50ms",
        ],
        &[],
    );
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout.contains(
            "  retried/b-retry.json: ✗ not idempotent: attempt 1 changed the state, though retried/a-first.json \
             sent this event earlier in this check"
        ),
        "{}",
        ran.stdout
    );
}

/// A handler that answers its first request, then dies on the second as
/// one crashing on a duplicate does: the connection closed unanswered, and
/// its port with it. Returns the port.
fn dies_on_a_duplicate() -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for answers in [true, false] {
            let Ok((mut socket, _)) = listener.accept() else { return };
            // The whole request read, so that closing sends no reset over the answer.
            let mut request = Vec::new();
            let mut chunk = [0; 4096];
            while let Ok(n @ 1..) = socket.read(&mut chunk) {
                request.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&request).to_ascii_lowercase();
                let Some(head_end) = text.find("\r\n\r\n") else {
                    continue;
                };
                let length = (text.lines())
                    .find_map(|line| line.strip_prefix("content-length:"))
                    .and_then(|value| value.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if request.len() >= head_end + 4 + length {
                    break;
                }
            }
            if answers {
                let _ = socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            }
        }
    });
    port
}

/// A fixture that cannot run because the handler died on the one before
/// says which one that was, not only that nothing answers.
#[test]
fn a_handler_dead_after_a_fixture_is_said_to_have_stopped_after_it() {
    let project = Project::new();
    let port = dies_on_a_duplicate();
    let ran = project.check(&["fixtures", "--target", &format!("http://127.0.0.1:{port}")], &[]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout
            .contains("\n  fixtures/slack/slack.json: ✗ not idempotent: attempt 2 failed ("),
        "{}",
        ran.stdout
    );
    let said = format!(
        "error: fixtures/stripe.json: nothing answers at 127.0.0.1:{port}: Connection refused (os error 111) (is the \
         handler running?); it answered fixtures/slack/slack.json earlier in this check, and stopped answering \
         after it\n"
    );
    assert!(ran.stderr.ends_with(&said), "{}", ran.stderr);
}

/// A FIFO gets the report whole at its first reader; a check waiting for a
/// reader that never comes stops on ctrl-c.
#[test]
fn a_junit_fifo_gets_the_report_at_its_first_read_and_ctrl_c_ends_a_wait_for_one() {
    let project = Project::new();
    let down = common::local::nothing_answers_at();
    let fifo = project.path("junit.fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let args = [
        "check",
        "fixtures/stripe.json",
        "--target",
        &down,
        "--junit",
        fifo.to_str().unwrap(),
    ];
    let spawn = || {
        command(project.dir.path(), &args, &[])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };

    let check = spawn();
    let xml = std::fs::read_to_string(&fifo).unwrap();
    assert!(xml.contains("<testsuites") && xml.contains("<error "), "{xml}");
    assert_eq!(ran(check.wait_with_output().unwrap()).code, 2);

    let mut check = spawn();
    let mut report = std::io::BufReader::new(check.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut report, &mut first).unwrap();
    // The report is out and the check waits for a reader: ctrl-c, until it
    // is heard (one sent before the wait began goes to the run).
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = check.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "ctrl-c never ended the wait"
        );
        let _ = Command::new("kill").args(["-INT", &check.id().to_string()]).status();
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(2));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut check.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(
        stderr.contains("stopped waiting for something to read") && stderr.contains("the JUnit report was not written"),
        "{stderr}"
    );
}

/// A folder of fixtures that lost them, or a mistyped one, named beside
/// fixtures that pass, cannot run: the gate must not pass without it.
#[test]
fn an_empty_fixture_folder_cannot_run_even_beside_fixtures_that_pass() {
    let project = Project::new();
    std::fs::create_dir_all(project.path("fixtures/github")).unwrap();
    let good = Handler::start(Behaviour::DedupsInOneTransaction);
    let junit = project.path("junit.xml");
    let ran = project.check(
        &[
            "fixtures/github",
            "fixtures/stripe.json",
            "--target",
            &good.url(),
            "--json",
            "--junit",
            junit.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stderr
            .contains("no fixtures (*.json) in fixtures/github or its subfolders"),
        "{}",
        ran.stderr
    );
    let json: serde_json::Value = serde_json::from_str(&ran.stdout).expect("one JSON report");
    assert_eq!(json["fixtures"].as_array().map(Vec::len), Some(2), "{json}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<testcase ").count(), 2, "{xml}");
    assert_eq!(xml.matches("<error ").count(), 1, "{xml}");

    // A folder of other JSON holds no fixtures, and is not said to hold no JSON.
    std::fs::write(project.path("fixtures/github/package.json"), r#"{"name": "pkg"}"#).unwrap();
    let ran = project.check(&["fixtures/github", "--target", &good.url()], &[]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stderr.contains(
            "no fixtures in fixtures/github or its subfolders: 1 JSON file without a portpreview_fixture field"
        ),
        "{}",
        ran.stderr
    );
}

/// Fixtures shared between repositories are linked in: a linked folder is
/// walked, once however the links loop, a fixture reached twice runs once
/// under its real path, and a link to a fixture that is gone, or a `*.json`
/// that is no file, cannot run rather than being passed over.
#[test]
fn linked_fixture_folders_are_walked_and_a_broken_link_cannot_run() {
    let project = Project::new();
    let link = |to: &str, at: &str| std::os::unix::fs::symlink(to, project.path(at)).unwrap();
    std::fs::create_dir_all(project.path("outside")).unwrap();
    std::fs::copy(
        project.path("fixtures/stripe.json"),
        project.path("outside/stripe.json"),
    )
    .unwrap();
    link("../outside", "fixtures/outside");
    link("slack", "fixtures/0-linked");
    link("stripe.json", "fixtures/a-copy.json");
    link(".", "fixtures/again");
    let good = Handler::start(Behaviour::DedupsInOneTransaction);
    let ran = project.check(&["fixtures", "--target", &good.url()], &[]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    for named in [
        "fixtures/outside/stripe.json",
        "fixtures/slack/slack.json",
        "fixtures/stripe.json",
    ] {
        assert!(ran.stdout.contains(&format!("━━ {named}\n")), "{named}: {}", ran.stdout);
    }
    // Without a probe, the tally says what the passes rest on.
    assert!(
        ran.stdout.contains(
            "3 fixtures: 3 idempotent (3 on their answers alone: side effects not checked), 0 not idempotent, \
             0 failed, 0 inconclusive"
        ),
        "{}",
        ran.stdout
    );

    link("../deleted.json", "fixtures/gone.json");
    let made = Command::new("mkfifo").arg(project.path("fixtures/pipe.json")).status();
    assert!(made.is_ok_and(|status| status.success()), "mkfifo");
    let ran = project.check(&["fixtures", "--target", &good.url()], &[]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(ran.stderr.contains("fixtures/gone.json"), "{}", ran.stderr);
    assert!(ran.stderr.contains("fixtures/pipe.json"), "{}", ran.stderr);
    assert!(
        ran.stdout.contains("3 idempotent"),
        "the others still ran: {}",
        ran.stdout
    );
}

/// A file given where it does not belong is named for what it is: a suite
/// given as a fixture, a fixture that is no JSON, a suite beside fixtures
/// that a suite's folder entry would pass over.
#[test]
fn a_file_in_the_wrong_place_is_named_for_what_it_is() {
    let project = Project::new();
    let down = "http://127.0.0.1:1";
    std::fs::write(
        project.path("suite.toml"),
        "[[fixture]]\npath = \"fixtures/stripe.json\"\n",
    )
    .unwrap();
    let ran = run(project.dir.path(), &["replay", "--from", "suite.toml"], &[]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(
        ran.stderr,
        "error: suite.toml is a suite, not a fixture: run it with portpreview check suite.toml\n"
    );
    std::fs::write(
        project.path("typo.toml"),
        "[[fixture]]\npaht = \"fixtures/stripe.json\"\n",
    )
    .unwrap();
    let ran = run(project.dir.path(), &["replay", "--from", "typo.toml"], &[]);
    assert_eq!(
        ran.stderr, "error: typo.toml is a suite, not a fixture: run it with portpreview check typo.toml\n",
        "a suite with a mistake is a suite too"
    );
    std::fs::write(project.path("Cargo.toml"), "[package]\nname = \"handler\"\n").unwrap();
    let ran = run(project.dir.path(), &["replay", "--from", "Cargo.toml"], &[]);
    assert!(
        ran.stderr
            .starts_with("error: Cargo.toml is not a PortPreview fixture: it is not JSON"),
        "some other TOML is no suite: {}",
        ran.stderr
    );

    std::fs::write(project.path("fixtures/notes.json"), "not json {").unwrap();
    let ran = project.check(&["fixtures/notes.json", "--target", down], &[]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stderr.contains(
            "fixtures/notes.json is not a PortPreview fixture: it is not JSON (expected ident at line 1 column 2)"
        ),
        "{}",
        ran.stderr
    );

    std::fs::remove_file(project.path("fixtures/notes.json")).unwrap();
    let suite = "[[fixture]]\npath = \"slack.json\"\n";
    std::fs::write(project.path("fixtures/slack/suite.toml"), suite).unwrap();
    std::fs::write(project.path("fixtures/Cargo.toml"), "[package]\nname = \"handler\"\n").unwrap();
    std::fs::write(project.path("all.toml"), "[[fixture]]\npath = \"./fixtures\"\n").unwrap();
    let ran = project.check(&["all.toml", "fixtures", "--target", down], &[]);
    assert_eq!(
        ran.stderr
            .matches("warning: fixtures/slack/suite.toml is not read when its folder is given")
            .count(),
        1,
        "a suite in a subfolder, warned of once, its path as it reads: {}",
        ran.stderr
    );
    assert!(!ran.stderr.contains("Cargo.toml"), "no suite: {}", ran.stderr);
}

/// With the config file set aside (`PORTPREVIEW_CONFIG=/dev/null`, as the
/// README suggests, and as these tests run), a missing secret is not to be
/// added to /dev/null.
#[test]
fn a_missing_secret_with_the_config_set_aside_names_the_flag_and_the_environment() {
    let project = Project::new();
    let ran = project.check(
        &["fixtures/stripe.json", "--target", "http://127.0.0.1:1", "--resign"],
        &[],
    );
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stderr
            .contains("no secret for stripe: pass --secret, or set PORTPREVIEW_SECRET_STRIPE or PORTPREVIEW_SECRET\n"),
        "{}",
        ran.stderr
    );
    // As a CI job runs on a pull request from a fork, its secrets empty.
    let ran = project.check(
        &["fixtures/stripe.json", "--target", "http://127.0.0.1:1", "--resign"],
        &[("PORTPREVIEW_SECRET_STRIPE", "")],
    );
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stderr.contains(
            "no secret for stripe: PORTPREVIEW_SECRET_STRIPE is set but empty (as CI leaves a secret the job may \
             not read); pass --secret, or set PORTPREVIEW_SECRET_STRIPE or PORTPREVIEW_SECRET\n"
        ),
        "{}",
        ran.stderr
    );
}

/// A provider's own variable left empty (a CI secret the job may not
/// read) gives way to `PORTPREVIEW_SECRET`, and the run says so.
#[test]
fn an_empty_provider_secret_giving_way_to_the_wider_one_is_warned_of() {
    let project = Project::new();
    let handler = Handler::start(Behaviour::DedupsInOneTransaction);
    let ran = project.check(
        &["fixtures/stripe.json", "--target", &handler.url(), "--resign", "--json"],
        &[("PORTPREVIEW_SECRET_STRIPE", ""), ("PORTPREVIEW_SECRET", "whsec_any")],
    );
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let json: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert!(
        json["fixtures"][0]["warnings"].to_string().contains(
            "PORTPREVIEW_SECRET_STRIPE is set but empty: the attempts are signed with the stripe secret from \
             PORTPREVIEW_SECRET instead"
        ),
        "{json:#}"
    );
}

/// A provider's secret variable set to bytes that are not UTF-8 is named
/// as such, not taken for unset and "set it" advice.
#[test]
fn a_provider_secret_not_in_utf8_is_named() {
    use std::os::unix::ffi::OsStrExt;

    let project = Project::new();
    let handler = Handler::start(Behaviour::DedupsInOneTransaction);
    let mut check = command(
        project.dir.path(),
        &["check", "fixtures/stripe.json", "--target", &handler.url(), "--resign"],
        &[],
    );
    check.env("PORTPREVIEW_SECRET_STRIPE", std::ffi::OsStr::from_bytes(b"whsec_\xff"));
    let ran = ran(common::process::output_of(&mut check));
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stderr
            .contains("PORTPREVIEW_SECRET_STRIPE is set, but not to UTF-8 text: a signing secret is text"),
        "{}",
        ran.stderr
    );
    assert_eq!(handler.arrived(), 0, "nothing sent unsigned");
}

/// A fixture an editor saved with a byte-order mark before its JSON (as
/// Notepad and PowerShell do) is read as the same fixture.
#[test]
fn a_fixture_saved_with_a_byte_order_mark_is_read() {
    let project = Project::new();
    let fixture = project.path("fixtures/stripe.json");
    let mut marked = b"\xEF\xBB\xBF".to_vec();
    marked.extend(std::fs::read(&fixture).unwrap());
    std::fs::write(&fixture, marked).unwrap();
    let handler = Handler::start(Behaviour::DedupsInOneTransaction);
    let ran = project.check(
        &[
            "fixtures/stripe.json",
            "--target",
            &handler.url(),
            "--check-url",
            &handler.state_url(),
            "--json",
        ],
        &[],
    );
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let json: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(json["fixtures"][0]["verdict"], "idempotent", "{json:#}");
}

/// A fixture written as UTF-16 (Windows PowerShell 5's `>`) is refused
/// for what it is, not as JSON broken at its first byte.
#[test]
fn a_fixture_in_utf16_is_told_as_such() {
    let project = Project::new();
    let fixture = project.path("fixtures/stripe.json");
    let text = std::fs::read_to_string(&fixture).unwrap();
    let mut utf16 = vec![0xFF, 0xFE];
    utf16.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
    std::fs::write(&fixture, utf16).unwrap();
    let ran = project.check(&["fixtures/stripe.json", "--target", "http://127.0.0.1:1"], &[]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout.contains(
            "fixtures/stripe.json is not a PortPreview fixture: it is UTF-16 text (as Windows PowerShell 5's > \
             writes it): save it as UTF-8"
        ),
        "{}{}",
        ran.stdout,
        ran.stderr
    );
}

/// A suite's `check_cmd` that fails is named as the check command, not as
/// a flag the user never passed.
#[test]
fn a_suites_failing_check_command_is_reported_in_the_suites_words() {
    let project = Project::new();
    let good = Handler::start(Behaviour::DedupsInOneTransaction);
    let suite = format!(
        "[[fixture]]\npath = \"fixtures/stripe.json\"\ntarget = \"{}\"\ncheck_cmd = \"echo db down >&2; exit 3\"\n",
        good.url()
    );
    std::fs::write(project.path("suite.toml"), suite).unwrap();
    let ran = project.check(&["suite.toml"], &[]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stderr
            .contains("the check command failed (exit status: 3): db down"),
        "{}",
        ran.stderr
    );
    assert!(!ran.stderr.contains("--check-cmd"), "{}", ran.stderr);
}

/// A fixture that is a device or a pipe would be read for good (all of
/// memory for `/dev/zero`, forever for a pipe nobody writes to): refused
/// in one line, before anything is sent.
#[test]
fn a_fixture_that_is_a_device_or_a_pipe_is_refused() {
    let project = Project::new();
    let handler = Handler::start(Behaviour::CreditsEveryDelivery);
    std::os::unix::fs::symlink("/dev/zero", project.path("fixtures/zero.json")).unwrap();
    let fifo = project.path("fixtures/pipe.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    for fixture in ["fixtures/zero.json", "fixtures/pipe.json"] {
        let ran = project.check(&[fixture, "--target", &handler.url()], &[]);
        assert_eq!(ran.code, 2, "{fixture}: {}{}", ran.stdout, ran.stderr);
        assert_eq!(
            ran.stderr.trim_end(),
            format!("error: cannot read fixture {fixture}: it is not a regular file")
        );
    }
    assert_eq!(handler.balance(), 0, "nothing was sent");
}

/// `--check-cmd "$PROBE"` with the variable unset in CI would read an
/// empty state each time and pass a handler that credits every copy.
#[test]
fn an_empty_check_command_is_refused_rather_than_passing_everything() {
    let project = Project::new();
    let bad = Handler::start(Behaviour::CreditsEveryDelivery);
    for probe in ["", "   "] {
        let args = ["fixtures/stripe.json", "--target", &bad.url(), "--check-cmd", probe];
        let ran = project.check(&args, &[]);
        assert_eq!(ran.code, 2, "{probe:?}: {}{}", ran.stdout, ran.stderr);
        assert!(
            ran.stderr.contains("the check command is empty"),
            "{probe:?}: {}",
            ran.stderr
        );
    }
    assert_eq!(bad.balance(), 0, "nothing was sent");
}

#[test]
fn a_junit_file_that_cannot_be_written_is_refused_before_anything_is_sent() {
    let project = Project::new();
    let handler = Handler::start(Behaviour::CreditsEveryDelivery);
    let under_a_file = project.path("fixtures/stripe.json/junit.xml");
    let folder = project.path("fixtures");
    for (junit, reason) in [
        (
            &under_a_file,
            format!(
                "cannot make the folder {0}: {0} is a file, not a folder",
                project.path("fixtures/stripe.json").display()
            ),
        ),
        (&folder, format!("cannot write {}: Is a directory", folder.display())),
    ] {
        let ran = project.check(
            &[
                "fixtures/stripe.json",
                "--target",
                &handler.url(),
                "--times",
                "3",
                "--junit",
                junit.to_str().unwrap(),
            ],
            &[],
        );
        assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
        assert!(
            ran.stderr.starts_with(&format!(
                "error: invalid value '{}' for '--junit <FILE>': {reason}",
                junit.display()
            )),
            "{}",
            ran.stderr
        );
        assert_eq!(handler.balance(), 0, "nothing was sent");
    }
    assert!(folder.is_dir(), "the folder named is left alone");

    // A report written over the fixture it checks would lose the fixture.
    let fixture = project.path("fixtures/stripe.json");
    let before = std::fs::read(&fixture).unwrap();
    let ran = project.check(
        &[
            "fixtures/stripe.json",
            "--target",
            &handler.url(),
            "--junit",
            fixture.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(
        ran.stderr.trim_end(),
        format!(
            "error: --junit {} would overwrite fixtures/stripe.json, a fixture this run reads: write the report to another file",
            fixture.display()
        )
    );
    assert_eq!(
        std::fs::read(&fixture).unwrap(),
        before,
        "the fixture is left as it was"
    );
    assert_eq!(handler.balance(), 0, "nothing was sent");
}

#[test]
fn a_suite_with_a_mistyped_key_is_refused_on_one_readable_line() {
    let project = Project::new();
    std::fs::write(
        project.path("suite.toml"),
        "[[fixture]]\npath = \"fixtures/stripe.json\"\n\ntimez = 3\n",
    )
    .unwrap();
    let ran = project.check(&["suite.toml"], &[]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    let line = ran.stderr.trim_end();
    assert!(
        line.starts_with("error: invalid suite ")
            && line.contains("suite.toml: line 4, column 1: unknown field `timez`, expected one of `path`"),
        "{line}"
    );
    assert!(!line.contains('\n') && !line.contains("\\n"), "{line}");

    // CI keeps a report of it all the same, beside the fixtures that ran.
    let junit = project.path("junit.xml");
    let ran = project.check(
        &[
            "suite.toml",
            "fixtures/stripe.json",
            "--json",
            "--junit",
            junit.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    let json: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(json["fixtures"][0]["fixture"], "suite.toml");
    assert_eq!(json["fixtures"][0]["verdict"], "could_not_run");
    assert!(
        json["fixtures"][0]["error"]
            .as_str()
            .unwrap()
            .contains("unknown field `timez`"),
        "{json:#}"
    );
    assert_eq!(json["fixtures"][1]["fixture"], "fixtures/stripe.json");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("type=\"could_not_run\""), "{xml}");
}

/// A suite emptied by mistake is a gate that cannot run, with its report.
#[test]
fn an_empty_suite_cannot_run_and_says_so_in_its_reports() {
    let project = Project::new();
    std::fs::write(project.path("suite.toml"), "").unwrap();
    let junit = project.path("junit.xml");
    let ran = project.check(&["suite.toml", "--json", "--junit", junit.to_str().unwrap()], &[]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(
        ran.stderr.trim_end(),
        "error: suite.toml lists no fixtures: add a [[fixture]] with a path"
    );
    let json: Value = serde_json::from_str(&ran.stdout).expect("one JSON report");
    assert_eq!(json["fixtures"][0]["verdict"], "could_not_run", "{json:#}");
    let xml = std::fs::read_to_string(&junit).expect("the JUnit report");
    assert!(xml.contains("type=\"could_not_run\""), "{xml}");
}

#[test]
fn a_suite_resigns_with_the_secret_its_environment_names() {
    let project = Project::new();
    let verifier = Handler::start(Behaviour::VerifiesStripeSignature {
        secret: STRIPE_SECRET.into(),
    });
    let suite = format!(
        "[[fixture]]\npath = \"fixtures/stripe.json\"\ntarget = \"{}\"\ntimes = 2\nresign = true\nsecret_env = \"STRIPE_WEBHOOK_SECRET\"\n",
        verifier.url()
    );
    std::fs::write(project.path("suite.toml"), suite).unwrap();
    // A PORTPREVIEW_SECRET left set for any provider gives way to the
    // secrets named for this fixture and for its provider.
    let left_over = ("PORTPREVIEW_SECRET", "whsec_left_over_from_another_job");
    let ran = project.check(&["suite.toml"], &[("STRIPE_WEBHOOK_SECRET", STRIPE_SECRET), left_over]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(verifier.balance(), 1);
    let flags = ["fixtures/stripe.json", "--target", &verifier.url(), "--resign"];
    let ran = project.check(&flags, &[("PORTPREVIEW_SECRET_STRIPE", STRIPE_SECRET), left_over]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let ran = project.check(&flags, &[("PORTPREVIEW_SECRET", STRIPE_SECRET)]);
    assert_eq!(ran.code, 0, "alone, it signs: {}{}", ran.stdout, ran.stderr);

    // A secret CI left undefined is empty: no run, rather than a handler blamed for refusing it.
    let ran = project.check(&["suite.toml"], &[("STRIPE_WEBHOOK_SECRET", "")]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(
        format!("{}{}", ran.stdout, ran.stderr).contains("secret_env STRIPE_WEBHOOK_SECRET is empty or not set"),
        "{}{}",
        ran.stdout,
        ran.stderr
    );

    // A suite left in the folder given as fixtures is not read, and says so.
    std::fs::copy(project.path("suite.toml"), project.path("fixtures/suite.toml")).unwrap();
    let ran = project.check(&["fixtures", "--target", &verifier.url()], &[]);
    assert!(
        ran.stderr.contains(
            "warning: fixtures/suite.toml is not read when its folder is given; \
             to use its settings: portpreview check fixtures/suite.toml\n"
        ),
        "{}",
        ran.stderr
    );
    // Named beside its folder, it is read, and nothing is said.
    std::fs::write(
        project.path("fixtures/suite.toml"),
        "[[fixture]]\npath = \"stripe.json\"\n",
    )
    .unwrap();
    let ran = project.check(&["fixtures", "fixtures/suite.toml", "--target", &verifier.url()], &[]);
    assert!(ran.stdout.contains("fixtures/stripe.json #2"), "{}", ran.stdout);
    assert!(!ran.stderr.contains("is not read"), "{}", ran.stderr);
    std::fs::remove_file(project.path("fixtures/suite.toml")).unwrap();

    // A secret given with no re-signing asked for: said, as replay says it;
    // with a suite that re-signs, it is used and nothing is said.
    let secret = ["--secret", STRIPE_SECRET];
    let ran = project.check(&[&flags[..3], &secret[..]].concat(), &[]);
    assert!(
        ran.stderr
            .contains("warning: --secret signs only with --resign or --fresh"),
        "{}",
        ran.stderr
    );
    let ran = project.check(&["suite.toml", "--secret", STRIPE_SECRET], &[]);
    assert!(!ran.stderr.contains("signs only"), "{}", ran.stderr);

    // Without the re-signing the recorded 2023 signature is refused.
    let ran = project.check(&["fixtures/stripe.json", "--target", &verifier.url()], &[]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout.contains("✗ failed: attempts 1–2 answered 400"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout
            .contains("1 fixture: 0 idempotent, 0 not idempotent, 1 failed, 0 inconclusive"),
        "{}",
        ran.stdout
    );

    // Suite keys that would do nothing are said to, as --secret is.
    std::fs::write(
        project.path("idle.toml"),
        "[[fixture]]\npath = \"fixtures/stripe.json\"\nsecret_env = \"STRIPE_WEBHOOK_SECRET\"\nfresh_field = \"/id\"\n",
    )
    .unwrap();
    let ran = project.check(&["idle.toml", "--target", &verifier.url()], &[]);
    assert_eq!(
        ran.stderr
            .lines()
            .filter(|line| line.starts_with("warning: "))
            .collect::<Vec<_>>(),
        [
            "warning: idle.toml fixture 1 (fixtures/stripe.json): secret_env signs only with resign or fresh; \
             the attempts carry the recorded signature",
            "warning: idle.toml fixture 1 (fixtures/stripe.json): fresh_field is read only with fresh = true \
             (or --fresh); the attempts keep their identity"
        ],
        "{}",
        ran.stderr
    );
    std::fs::write(
        project.path("idle.toml"),
        "[[fixture]]\npath = \"fixtures/stripe.json\"\nresign = true\nsecret_env = \"\"\n",
    )
    .unwrap();
    let ran = project.check(&["idle.toml"], &[]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stderr.contains("secret_env = \"\" names no environment variable"),
        "{}",
        ran.stderr
    );
}

#[test]
fn a_handler_stuck_on_a_duplicate_still_gets_a_report_and_a_junit_file() {
    let project = Project::new();
    let stuck = Handler::start(Behaviour::HangsOnDuplicate);
    let suite = format!(
        "[[fixture]]\npath = \"fixtures/stripe.json\"\ntarget = \"{}\"\ntimes = 2\ntimeout = \"300ms\"\n",
        stuck.url()
    );
    std::fs::write(project.path("suite.toml"), suite).unwrap();
    let junit = project.path("junit.xml");
    let ran = project.check(&["suite.toml", "--junit", junit.to_str().unwrap()], &[]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout.contains("attempt 2 failed (no answer within 300ms)"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout.contains("1 fixture: 0 idempotent, 1 not idempotent"),
        "{}",
        ran.stdout
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<failure ").count(), 1, "{xml}");
    assert!(xml.contains("no answer within 300ms"), "{xml}");
    assert_eq!(stuck.balance(), 1);

    // The flag wins over the suite, and a fixture given directly takes it too.
    let ran = project.check(&["suite.toml", "--timeout", "200ms"], &[]);
    assert!(ran.stdout.contains("no answer within 200ms"), "{}", ran.stdout);
    let ran = project.check(
        &["fixtures/stripe.json", "--target", &stuck.url(), "--timeout", "200ms"],
        &[],
    );
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout.contains("attempts 1–2 failed (no answer within 200ms)"),
        "{}",
        ran.stdout
    );
}

/// `--fresh` with one copy sends no duplicate: refused alike from the command
/// line and from a suite, before the handler sees anything.
#[test]
fn a_fresh_burst_of_one_copy_cannot_run_from_flags_or_a_suite() {
    let project = Project::new();
    let bad = Handler::start(Behaviour::CreditsEveryDelivery);
    let refused = "--fresh needs --times 2 or more: a burst of one copy sends no duplicate";
    let junit = project.path("junit.xml");
    let ran = project.check(
        &[
            "fixtures/stripe.json",
            "--target",
            &bad.url(),
            "--check-url",
            &bad.state_url(),
            "--fresh",
            "--times",
            "1",
            "--junit",
            junit.to_str().unwrap(),
            "--json",
        ],
        &[],
    );
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(ran.stderr.contains(refused), "{}", ran.stderr);
    let json: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(json["fixtures"][0]["verdict"], "could_not_run", "{json:#}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<error ").count(), 1, "{xml}");

    std::fs::write(
        project.path("suite.toml"),
        format!(
            "[[fixture]]\npath = \"fixtures/stripe.json\"\ntarget = \"{}\"\ncheck_url = \"{}\"\nfresh = true\ntimes = 1\n",
            bad.url(),
            bad.state_url()
        ),
    )
    .unwrap();
    let ran = project.check(&["suite.toml"], &[]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(ran.stderr.contains(refused), "{}", ran.stderr);
    assert_eq!(bad.balance(), 0, "nothing was sent");

    let ran = project.check(&["suite.toml", "--times", "2"], &[]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert!(ran.stdout.contains("✗ fresh_burst_acts_once"), "{}", ran.stdout);
}

/// ctrl-c part way through, as for `replay`: the fixture in progress is
/// reported with the attempts it got answered, the fixtures never started
/// are listed as not run, the JUnit file is still written, and the exit
/// code is 130.
#[test]
fn a_check_stopped_with_ctrl_c_reports_what_ran_and_what_did_not() {
    let project = Project::new();
    let stuck = Handler::start(Behaviour::HangsOnDuplicate);
    let junit = project.path("junit.xml");
    let mut check = command(
        project.dir.path(),
        &[
            "check",
            "fixtures/stripe.json",
            "fixtures/slack/slack.json",
            "--target",
            &stuck.url(),
            "--times",
            "3",
            "--timeout",
            "60s",
            "--junit",
            junit.to_str().unwrap(),
        ],
        &[],
    );
    let check = check
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Attempt 1 is handled; attempt 2, a duplicate, then hangs. Attempt 2
    // is sent only once attempt 1's answer is read: its arrival is the cue
    // (the balance moves before attempt 1 is answered).
    let started = std::time::Instant::now();
    while stuck.arrived() < 2 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "attempt 2 never arrived"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let status = Command::new("kill")
        .args(["-INT", &check.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let ran = ran(check.wait_with_output().unwrap());
    assert_eq!(ran.code, 130, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(ran.stderr, "");
    let stripe = ran
        .stdout
        .split("━━ ")
        .find(|part| part.starts_with("fixtures/stripe.json"));
    let stripe = stripe.unwrap_or_else(|| panic!("no report of the stopped fixture: {}", ran.stdout));
    assert!(
        stripe.contains("? inconclusive: stopped after 1 of 3 attempts"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout.contains("━━ fixtures/slack/slack.json\n– not run: "),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout.ends_with(
            "2 fixtures: 0 idempotent, 0 not idempotent, 0 failed, 1 inconclusive, 0 could not run, 1 not run\n"
        ),
        "{}",
        ran.stdout
    );

    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<testcase ").count(), 2, "{xml}");
    assert!(
        xml.contains("tests=\"2\" failures=\"1\" errors=\"0\" skipped=\"1\""),
        "{xml}"
    );
    let stripe_case = &xml[xml.find("stripe.json").unwrap()..xml.find("slack.json").unwrap()];
    assert!(
        stripe_case.contains("<failure message=\"inconclusive: run_completed: stopped after 1 of 3 attempts"),
        "{xml}"
    );
    let slack_case = &xml[xml.find("slack.json").unwrap()..];
    assert!(slack_case.contains("<skipped message=\"not run: "), "{xml}");
    assert_eq!(stuck.balance(), 1, "the fixture not started sent nothing");
}

/// A method no request can carry makes a fixture that does not parse:
/// exit 2 with the reason, as for any other broken fixture, not a verdict.
#[test]
fn a_fixture_with_a_method_http_cannot_send_is_refused_before_anything_is_sent() {
    let project = Project::new();
    let good = Handler::start(Behaviour::DedupsInOneTransaction);
    let text = std::fs::read_to_string(project.path("fixtures/stripe.json")).unwrap();
    let mut fixture: Value = serde_json::from_str(&text).unwrap();
    fixture["method"] = "GE T".into();
    std::fs::write(project.path("bad-method.json"), fixture.to_string()).unwrap();
    let ran = project.check(&["bad-method.json", "--target", &good.url(), "--json"], &[]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(
        ran.stderr.trim_end(),
        "error: invalid fixture bad-method.json: method \"GE T\" is not an HTTP method"
    );
    let json: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(
        (json["exit_code"].as_u64(), &json["fixtures"][0]["verdict"]),
        (Some(2), &"could_not_run".into())
    );

    let ran = run(
        project.dir.path(),
        &["replay", "--from", "bad-method.json", "--target", &good.url()],
        &[],
    );
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(ran.stderr.contains("is not an HTTP method"), "{}", ran.stderr);
    assert_eq!(good.balance(), 0, "nothing was sent");

    // So is a path no request line can carry: not an attempt that failed.
    let mut fixture: Value = serde_json::from_str(&text).unwrap();
    fixture["path"] = "/webhooks/a b".into();
    std::fs::write(project.path("bad-path.json"), fixture.to_string()).unwrap();
    let ran = project.check(&["bad-path.json", "--target", &good.url()], &[]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(
        ran.stderr.trim_end(),
        "error: invalid fixture bad-path.json: path \"/webhooks/a b\" cannot be sent in a request: it is written \
         as in a URL, with no spaces or control characters (a space is %20)"
    );
    // And a header: left out of every attempt, the run could pass without it.
    for (name, value, said) in [
        (
            "x-sig nature",
            "v1",
            "header name \"x-sig nature\" cannot be sent in a request",
        ),
        (
            "x-inject",
            "a\r\nx-evil: 1",
            "the value of header \"x-inject\" cannot be sent in a request",
        ),
    ] {
        let mut fixture: Value = serde_json::from_str(&text).unwrap();
        fixture["headers"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"name": name, "value": value}));
        std::fs::write(project.path("bad-header.json"), fixture.to_string()).unwrap();
        let ran = project.check(&["bad-header.json", "--target", &good.url()], &[]);
        assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
        assert!(
            ran.stderr
                .starts_with(&format!("error: invalid fixture bad-header.json: {said}")),
            "{}",
            ran.stderr
        );
    }
    assert_eq!(good.balance(), 0, "nothing was sent");
}

/// A fixture whose event ID was edited but whose `event_key` was not would
/// be reported as the event it no longer is: refused on one line, exit 2.
#[test]
fn a_fixture_with_an_edited_event_id_under_its_old_key_is_refused() {
    let project = Project::new();
    let good = Handler::start(Behaviour::DedupsInOneTransaction);
    let text = std::fs::read_to_string(project.path("fixtures/stripe.json")).unwrap();
    let mut fixture: Value = serde_json::from_str(&text).unwrap();
    fixture["body"] = STRIPE_BODY.replace("evt_1PortPreviewTest", "evt_EDITED").into();
    std::fs::write(project.path("edited.json"), fixture.to_string()).unwrap();
    let ran = project.check(&["edited.json", "--target", &good.url()], &[]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(
        ran.stderr,
        "error: invalid fixture edited.json: event_key \"evt_1PortPreviewTest\" disagrees with the request, \
         which carries stripe event \"evt_EDITED\" (body:/id): set event_key to it, or remove event_key and \
         event_key_source to have them worked out\n"
    );
    assert!(!ran.stdout.contains("Replay of"), "no report of a run: {}", ran.stdout);
    assert_eq!(good.balance(), 0, "nothing was sent");

    // Without the stale key, the edited event is what is named and sent.
    let object = fixture.as_object_mut().unwrap();
    object.remove("event_key");
    object.remove("event_key_source");
    std::fs::write(project.path("edited.json"), fixture.to_string()).unwrap();
    let ran = project.check(&["edited.json", "--target", &good.url(), "--json"], &[]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let json: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(json["fixtures"][0]["event_key"], "evt_EDITED", "{json:#}");
    assert_eq!(good.balance(), 1);
}

/// A fixture whose body was removed, or whose provider was mistyped or
/// changed, would be reported as the event or provider it names while the
/// handler is sent something else: refused on one line, exit 2.
#[test]
fn a_fixture_that_contradicts_its_own_request_is_refused() {
    let project = Project::new();
    let good = Handler::start(Behaviour::DedupsInOneTransaction);
    let text = std::fs::read_to_string(project.path("fixtures/stripe.json")).unwrap();
    let recorded: Value = serde_json::from_str(&text).unwrap();
    let cases: [(&str, Value, &str); 3] = [
        (
            "body",
            Value::Null,
            "event_key_source \"body:/id\" names an ID the request does not carry (its body holds 0 bytes): put it \
             back, or remove event_key and event_key_source to have them worked out",
        ),
        (
            "provider",
            "strype".into(),
            "provider \"strype\" is not one PortPreview knows (stripe, github,",
        ),
        (
            "provider",
            "github".into(),
            "provider \"github\" disagrees with the request, which is a stripe delivery: set provider to it, or \
             remove provider to have it worked out",
        ),
    ];
    for (field, value, refusal) in cases {
        let mut fixture = recorded.clone();
        match value {
            Value::Null => fixture.as_object_mut().unwrap().remove(field),
            value => fixture.as_object_mut().unwrap().insert(field.into(), value),
        };
        std::fs::write(project.path("edited.json"), fixture.to_string()).unwrap();
        let ran = project.check(&["edited.json", "--target", &good.url()], &[]);
        assert_eq!(ran.code, 2, "{field}: {}{}", ran.stdout, ran.stderr);
        assert!(
            ran.stderr
                .starts_with(&format!("error: invalid fixture edited.json: {refusal}")),
            "{field}: {}",
            ran.stderr
        );
    }
    assert_eq!(good.balance(), 0, "nothing was sent");
}

/// Twilio's status callback, recorded through the tunnel at
/// `http://127.0.0.1:9/t/calm-otter`.
fn twilio_delivery() -> NewDelivery {
    let body = "AccountSid=AC1&MessageSid=SM0123456789abcdef&MessageStatus=delivered&From=%2B15550001111";
    NewDelivery {
        path: "/twilio/status?account=1".into(),
        request_headers: vec![
            Header::new("content-type", "application/x-www-form-urlencoded"),
            Header::new("user-agent", "TwilioProxy/1.1"),
            Header::new("i-twilio-idempotency-token", "0f3c7a52-9d1e-4c0b-8a3e-5b6d7e8f9a0b"),
            Header::new("x-twilio-signature", "recorded/0000000000000000000="),
        ],
        request_body: body.as_bytes().to_vec(),
        request_body_size: body.len() as u64,
        provider: Some("twilio".into()),
        event_key: "0f3c7a52-9d1e-4c0b-8a3e-5b6d7e8f9a0b".into(),
        event_key_source: "header:I-Twilio-Idempotency-Token".into(),
        ..stripe_delivery("http://127.0.0.1:1")
    }
}

/// `recorded`, answered 200, exported from a history in `dir` as the
/// fixture `file` there, as `portpreview export -o` writes one.
fn export_fixture(dir: &Path, recorded: &NewDelivery, file: &str) {
    let db = dir.join("history.db");
    let ok = Outcome {
        status: Some(200),
        ..Outcome::default()
    };
    let id = Store::open(&db).unwrap().insert_delivery(recorded, &ok).unwrap();
    let db = db.to_str().unwrap();
    let exported = run(dir, &["--db", db, "export", &id.to_string(), "-o", file], &[]);
    assert_eq!(exported.code, 0, "export: {}", exported.stderr);
}

/// What Twilio's `RequestValidator` expects for `body` called at `url`.
fn twilio_signature(url: &str, body: &[u8]) -> String {
    let mut headers = Vec::new();
    let now = std::time::SystemTime::now();
    resign(
        Provider::Twilio,
        "12345",
        &mut headers,
        &mut body.to_vec(),
        now,
        Some(url),
    )
    .unwrap();
    String::from_utf8(headers[0].value.clone()).unwrap()
}

/// Twilio signs the URL it called, not the handler's: a fixture keeps the
/// tunnel's public URL, so `check` and `replay --from` re-sign over it
/// wherever the attempts go, as a replay from the history does. A fixture
/// without one says which URL its signature covers.
#[tokio::test]
async fn a_twilio_fixture_is_re_signed_over_the_public_url_it_came_in_on() {
    let handler = LocalHandler::start(|_| Answer::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let recorded = twilio_delivery();
    export_fixture(dir.path(), &recorded, "tw.json");
    let fixture = dir.path().join("tw.json");

    let target = handler.url();
    let resign = ["--target", target.as_str(), "--resign", "--secret", "12345"];
    let check = [&["check", "tw.json"][..], &resign[..]].concat();
    let replay = [&["replay", "--from", "tw.json"][..], &resign[..]].concat();
    let public = "http://127.0.0.1:9/t/calm-otter/twilio/status?account=1";
    for args in [&check, &replay] {
        let ran = run_async(dir.path(), args).await;
        assert_eq!(ran.code, 0, "{args:?}: {}{}", ran.stdout, ran.stderr);
        assert!(!ran.stdout.contains("no public URL"), "{}", ran.stdout);
        let seen = handler.requests().pop().unwrap();
        assert_eq!(
            seen.header("x-twilio-signature").unwrap(),
            twilio_signature(public, &recorded.request_body),
            "{args:?}: signed over the URL Twilio called"
        );
    }

    // A fixture written before the public URL was kept still loads, and
    // says which URL it was signed over instead.
    let mut older: Value = serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    assert_eq!(older["tunnel_url"], "http://127.0.0.1:9/t/calm-otter");
    older.as_object_mut().unwrap().remove("tunnel_url");
    std::fs::write(&fixture, older.to_string()).unwrap();
    let ran = run_async(dir.path(), &check).await;
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let local = format!("{target}/twilio/status?account=1");
    assert!(
        ran.stdout.contains(&format!(
            "no public URL was recorded, so the twilio signature is made over {local}, where the attempts go"
        )),
        "{}",
        ran.stdout
    );
    let seen = handler.requests().pop().unwrap();
    assert_eq!(
        seen.header("x-twilio-signature").unwrap(),
        twilio_signature(&local, &recorded.request_body)
    );
}

/// Discord signs with its private key, which no replay can make: under
/// `--resign` its fixture goes out with the recorded signature, which a
/// byte-identical replay keeps valid, instead of failing the whole check.
#[tokio::test]
async fn a_fixture_signed_with_a_private_key_is_sent_as_recorded_under_resign() {
    let handler = LocalHandler::start(|_| Answer::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let body = r#"{"type":1,"id":"int_1","application_id":"app_1"}"#;
    let recorded = NewDelivery {
        path: "/interactions".into(),
        request_headers: vec![
            Header::new("content-type", "application/json"),
            Header::new("x-signature-ed25519", "ab".repeat(64)),
            Header::new("x-signature-timestamp", "1700000000"),
        ],
        request_body: body.as_bytes().to_vec(),
        request_body_size: body.len() as u64,
        provider: Some("discord".into()),
        event_key: "int_1".into(),
        event_key_source: "body:/id".into(),
        ..stripe_delivery("http://127.0.0.1:1")
    };
    export_fixture(dir.path(), &recorded, "dc.json");

    let target = handler.url();
    let ran = run_async(dir.path(), &["check", "dc.json", "--target", &target, "--resign"]).await;
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout.contains(
            "discord requests are signed with Discord's private key: only a byte-identical replay verifies; \
             --resign sends the recorded signature"
        ),
        "{}",
        ran.stdout
    );
    let seen = handler.requests().pop().unwrap();
    assert_eq!(seen.header("x-signature-ed25519").unwrap(), "ab".repeat(64));
    assert_eq!(seen.header("x-signature-timestamp").unwrap(), "1700000000");
    assert_eq!(seen.body, body.as_bytes());
}

/// A GitLab hook with a secret token carries no signature: the token
/// still verifies, so `--resign` sends it as recorded rather than stop the
/// check for a secret it would not use. A signing-token hook still needs one.
#[tokio::test]
async fn a_gitlab_hook_with_a_secret_token_is_sent_as_recorded_under_resign() {
    let handler = LocalHandler::start(|_| Answer::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let body = r#"{"object_kind":"push","ref":"refs/heads/main"}"#;
    let token = NewDelivery {
        path: "/gitlab".into(),
        request_headers: vec![
            Header::new("content-type", "application/json"),
            Header::new("x-gitlab-event", "Push Hook"),
            Header::new("x-gitlab-token", "plain-token"),
            Header::new("idempotency-key", "gl-1"),
        ],
        request_body: body.as_bytes().to_vec(),
        request_body_size: body.len() as u64,
        provider: Some("gitlab".into()),
        event_key: "gl-1".into(),
        event_key_source: "header:Idempotency-Key".into(),
        ..stripe_delivery("http://127.0.0.1:1")
    };
    export_fixture(dir.path(), &token, "token.json");
    let target = handler.url();
    let ran = run_async(dir.path(), &["check", "token.json", "--target", &target, "--resign"]).await;
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout.contains(
            "this gitlab hook sends a secret token (X-Gitlab-Token), not a signature: --resign sends the \
             recorded one, which still verifies"
        ),
        "{}",
        ran.stdout
    );
    let seen = handler.requests().pop().unwrap();
    assert_eq!(seen.header("x-gitlab-token").unwrap(), "plain-token");

    let mut signed = token.clone();
    signed.request_headers[2] = Header::new("webhook-id", "msg_1");
    export_fixture(dir.path(), &signed, "signed.json");
    let ran = run_async(dir.path(), &["check", "signed.json", "--target", &target, "--resign"]).await;
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(ran.stdout.contains("no secret for gitlab"), "{}", ran.stdout);
}

/// `portpreview args…` in `cwd`, awaited, so a handler on this runtime can answer it.
async fn run_async(cwd: &Path, args: &[&str]) -> Ran {
    let output = tokio::process::Command::from(command(cwd, args, &[]))
        .output()
        .await
        .unwrap();
    ran(output)
}

/// A burst of 300 copies needs 300 sockets at once. Started under a soft
/// limit of 128 open files (macOS starts processes at 256), the binary
/// raises it to the hard limit instead of failing attempts with "Too many
/// open files" and blaming the handler.
#[test]
fn a_burst_wider_than_a_low_open_file_limit_is_sent_whole() {
    let project = Project::new();
    let good = Handler::start(Behaviour::DedupsInOneTransaction);
    let mut limited = Command::new("sh");
    limited
        .current_dir(project.dir.path())
        .args(["-c", "ulimit -Sn 128 && exec \"$0\" \"$@\""])
        .arg(portpreview_bin())
        .args([
            "check",
            "fixtures/stripe.json",
            "--target",
            &good.url(),
            "--check-url",
            &good.state_url(),
            "--fresh",
            "--times",
            "300",
            "--settle",
            "100ms",
            "--json",
        ])
        .env("PORTPREVIEW_CONFIG", "/dev/null")
        .env("PORTPREVIEW_DB", project.path("untouched/history.db"));
    let ran = ran(limited.output().unwrap());
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let json: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(json["fixtures"][0]["verdict"], "idempotent", "{json:#}");
    assert!(!ran.stdout.contains("Too many open files"), "{}", ran.stdout);
}

/// Without `--times`, `check` sends each fixture twice: run with one
/// attempt, a handler that pays every delivery passed the gate.
#[test]
fn check_sends_a_duplicate_unless_told_otherwise() {
    let project = Project::new();
    let bad = Handler::start(Behaviour::CreditsEveryDelivery);
    let ran = project.check(
        &[
            "fixtures/stripe.json",
            "--target",
            &bad.url(),
            "--check-url",
            &bad.state_url(),
            "--json",
        ],
        &[],
    );
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let json: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(json["fixtures"][0]["verdict"], "not_idempotent", "{json:#}");
    assert_eq!(bad.balance(), 2, "the fixture went out twice");
}

/// Checks the Stripe fixture twice, probed with `--settle`, against a
/// handler that answers at once and dedups and credits `delay` later, as
/// a queue worker does.
fn check_a_queue_worker(delay: std::time::Duration, settle: &str) -> (Handler, Ran) {
    check_a_queue_worker_with(delay, settle, &[])
}

/// [`check_a_queue_worker`], with more flags.
fn check_a_queue_worker_with(delay: std::time::Duration, settle: &str, more: &[&str]) -> (Handler, Ran) {
    let project = Project::new();
    let late = Handler::start(Behaviour::Deferred { delay });
    let (url, state_url) = (late.url(), late.state_url());
    let mut args = vec![
        "fixtures/stripe.json",
        "--target",
        &url,
        "--times",
        "2",
        "--check-url",
        &state_url,
        "--settle",
        settle,
        "--json",
    ];
    args.extend_from_slice(more);
    let ran = project.check(&args, &[]);
    (late, ran)
}

/// A queue a little slower than the reads: seen by no read but the last,
/// which waits ten settle windows when nothing has moved, not three. Its
/// first credit lands after the run would otherwise have ended.
#[test]
fn a_queue_worker_slower_than_the_steps_is_seen_moving_by_the_last_read() {
    let (late, ran) = check_a_queue_worker(std::time::Duration::from_secs(2), "200ms");
    assert_eq!(ran.code, 1, "never a pass: {}{}", ran.stdout, ran.stderr);
    let json: Value = serde_json::from_str(&ran.stdout).unwrap();
    let fixture = &json["fixtures"][0];
    assert_eq!(fixture["verdict"], "inconclusive", "{json:#}");
    let settled = fixture["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|c| c["name"] == "state_settled"))
        .expect("a state_settled check");
    assert!(
        settled["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("the state still moved 2s after the last attempt")),
        "{settled}"
    );
    assert_eq!(late.balance(), 1, "the handler dedups: one credit, once its queue ran");
}

#[test]
fn a_queue_worker_slower_than_every_read_is_not_passed_in_silence() {
    // It answers at once, and dedups and credits 5 s later: past every
    // read a run with --settle 100ms takes.
    let (_late, ran) = check_a_queue_worker(std::time::Duration::from_secs(5), "100ms");
    assert_eq!(ran.code, 0, "no read could see it: {}{}", ran.stdout, ran.stderr);
    let json: Value = serde_json::from_str(&ran.stdout).unwrap();
    let warnings = json["fixtures"][0]["warnings"].to_string();
    assert!(
        warnings.contains(
            "no read saw the state move, not even after attempt 1, and the handler is not known to have had this \
             event before"
        ) && warnings.contains("later than the reads waited (--settle 100ms, and 1s after the last attempt)"),
        "{json:#}"
    );
}

/// A CI job whose handler starts with no events says so with
/// `--expect-effect`: a run that never saw the event act, which passes
/// with a warning otherwise, is inconclusive, and the job fails.
#[test]
fn a_queue_worker_slower_than_every_read_fails_a_check_expecting_an_effect() {
    let (_late, ran) = check_a_queue_worker_with(std::time::Duration::from_secs(5), "100ms", &["--expect-effect"]);
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    let json: Value = serde_json::from_str(&ran.stdout).unwrap();
    let fixture = &json["fixtures"][0];
    assert_eq!(fixture["verdict"], "inconclusive", "{json:#}");
    let unseen = fixture["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["name"] == "probe_shows_side_effects")
        .unwrap_or_else(|| panic!("the check that failed: {json:#}"));
    assert_eq!(unseen["passed"], false, "{json:#}");
    let detail = unseen["detail"].as_str().unwrap();
    assert!(
        detail.starts_with(
            "no read saw the state move, not even after attempt 1, though --expect-effect says this event is new"
        ) && detail.ends_with("later than the reads waited (--settle 100ms, and 1s after the last attempt)"),
        "{json:#}"
    );
    assert!(
        !fixture["warnings"].to_string().contains("no read saw the state move"),
        "told once, as the check: {json:#}"
    );

    // Without a probe nothing could see the effect: the run cannot start.
    let project = Project::new();
    let ran = project.check(
        &[
            "fixtures/stripe.json",
            "--target",
            "http://127.0.0.1:1",
            "--expect-effect",
        ],
        &[],
    );
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout
            .contains("--expect-effect needs a probe to see the effect: --check-url or --check-cmd"),
        "{}{}",
        ran.stdout,
        ran.stderr
    );
}

/// A handler that dedups and acts at once passes a check expecting an
/// effect: attempt 1 is seen acting, the duplicate not.
#[test]
fn a_handler_seen_acting_once_passes_a_check_expecting_an_effect() {
    let (late, ran) = check_a_queue_worker_with(std::time::Duration::ZERO, "100ms", &["--expect-effect"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let json: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(json["fixtures"][0]["verdict"], "idempotent", "{json:#}");
    assert_eq!(late.balance(), 1);
}

/// A fixture whose body was edited by hand, sent under its recorded
/// signature: a handler that checks it answers 401, and the report says
/// that the signature may be what it refused, and how to sign anew.
#[tokio::test]
async fn a_refused_recorded_signature_is_said_to_need_signing_anew() {
    let handler = LocalHandler::start(|_| Answer {
        status: 401,
        ..Answer::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let body = r#"{"action":"opened","number":2}"#;
    let edited = NewDelivery {
        path: "/github".into(),
        request_headers: vec![
            Header::new("content-type", "application/json"),
            Header::new("x-github-event", "pull_request"),
            Header::new("x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
            Header::new("x-hub-signature-256", format!("sha256={}", "0".repeat(64))),
        ],
        request_body: body.as_bytes().to_vec(),
        request_body_size: body.len() as u64,
        provider: Some("github".into()),
        event_key: "72d3162e-cc78-11e3-81ab-4c9367dc0958".into(),
        event_key_source: "header:X-GitHub-Delivery".into(),
        event_type: Some("pull_request.opened".into()),
        ..stripe_delivery("http://127.0.0.1:1")
    };
    export_fixture(dir.path(), &edited, "edited.json");
    let ran = run_async(dir.path(), &["check", "edited.json", "--target", &handler.url()]).await;
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout.contains(
            "attempt 1, sent with the recorded github signature, was answered 401: if the handler checks github \
             signatures, the request was changed after it was signed (a fixture edited by hand), or the handler's \
             secret was; pass --resign"
        ),
        "{}",
        ran.stdout
    );
}

/// A fixture whose probe moves with nothing sent is that fixture's
/// inconclusive result, reached before its handler is sent anything; the
/// check goes on to the next fixture.
#[test]
fn a_fixture_whose_probe_moves_with_nothing_sent_is_inconclusive_and_the_check_goes_on() {
    let project = Project::new();
    let ticking = Handler::start(Behaviour::CreditsEveryDelivery);
    let good = Handler::start(Behaviour::DedupsInOneTransaction);
    let suite = format!(
        "[[fixture]]\npath = \"fixtures/stripe.json\"\ntarget = \"{}\"\ncheck_url = \"{}\"\n\n\
         [[fixture]]\npath = \"fixtures/slack/slack.json\"\ntarget = \"{}\"\ncheck_url = \"{}\"\n",
        ticking.url(),
        ticking.ticking_state_url(),
        good.url(),
        good.state_url()
    );
    std::fs::write(project.path("suite.toml"), suite).unwrap();
    let junit = project.path("junit.xml");
    let ran = project.check(
        &[
            "suite.toml",
            "--times",
            "3",
            "--settle",
            "50ms",
            "--junit",
            junit.to_str().unwrap(),
            "--json",
        ],
        &[],
    );
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(ticking.arrived(), 0, "the fixture's handler was sent nothing");
    let json: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(json["counts"]["inconclusive"], 1, "{json:#}");
    assert_eq!(json["counts"]["idempotent"], 1, "{json:#}");
    let first = &json["fixtures"][0];
    assert_eq!(first["verdict"], "inconclusive", "{json:#}");
    assert_eq!(first["attempts"], serde_json::json!([]), "{json:#}");
    assert!(
        first["summary"]
            .as_str()
            .unwrap()
            .contains("changes with nothing sent (a clock or counter in its output, or the handler still busy with earlier work): line 2 `uptime_ticks: "),
        "{first:#}"
    );
    assert_eq!(json["fixtures"][1]["verdict"], "idempotent", "{json:#}");
    assert_eq!(good.balance(), 1, "the next fixture ran");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("tests=\"2\" failures=\"1\" errors=\"0\""), "{xml}");
}
