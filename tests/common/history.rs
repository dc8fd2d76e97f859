//! A history database holding one recorded delivery, and the real
//! `portpreview` binary run against it, as a developer runs `replay`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use portpreview::store::{NewDelivery, Outcome, Store};
use serde_json::Value;

use super::bin::portpreview_bin;
use super::handlers::Handler;

/// A history database holding one delivery; removed on drop.
pub struct History {
    dir: tempfile::TempDir,
    /// The delivery's ID.
    pub id: i64,
}

impl History {
    /// A fresh history with `delivery` recorded in it, answered 200.
    pub fn with(delivery: &NewDelivery) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("history.db")).unwrap();
        let outcome = Outcome {
            status: Some(200),
            duration_ms: Some(3.0),
            ..Outcome::default()
        };
        let id = store.insert_delivery(delivery, &outcome).unwrap();
        std::fs::write(dir.path().join("history.config.toml"), "").unwrap();
        Self { dir, id }
    }

    /// The database file.
    pub fn db(&self) -> PathBuf {
        self.dir.path().join("history.db")
    }

    /// `portpreview replay ID args…`
    pub fn replay(&self, args: &[&str]) -> Ran {
        portpreview(&self.db(), &self.replay_args(args))
    }

    /// `replay` with `handler`'s state URL as the side-effect probe,
    /// settled for 100 ms.
    pub fn replay_probed(&self, handler: &Handler, args: &[&str]) -> Ran {
        portpreview(&self.db(), &self.replay_args(&probed(handler, args)))
    }

    /// `replay`, failing the test instead of waiting past `limit`.
    pub fn replay_within(&self, limit: Duration, args: &[&str]) -> Ran {
        portpreview_within(limit, &self.db(), &self.replay_args(args))
    }

    /// `replay_probed`, failing the test instead of waiting past `limit`.
    pub fn replay_probed_within(&self, limit: Duration, handler: &Handler, args: &[&str]) -> Ran {
        portpreview_within(limit, &self.db(), &self.replay_args(&probed(handler, args)))
    }

    /// How many replay attempts of the delivery the history holds.
    pub fn replay_attempts(&self) -> usize {
        Store::open(&self.db())
            .unwrap()
            .list(&portpreview::store::ListQuery {
                include_replays: true,
                ..Default::default()
            })
            .unwrap()
            .into_iter()
            .filter(|s| s.replay_of == Some(self.id))
            .count()
    }

    /// The `portpreview replay ID args…` command, to start and stop at will.
    pub fn replay_command(&self, args: &[&str]) -> Command {
        command(&self.db(), &self.replay_args(args))
    }

    fn replay_args<S: AsRef<str>>(&self, args: &[S]) -> Vec<String> {
        let mut all = vec!["replay".to_string(), self.id.to_string()];
        all.extend(args.iter().map(|a| a.as_ref().to_string()));
        all
    }
}

/// `--check-url STATE --settle 100ms args…`
fn probed(handler: &Handler, args: &[&str]) -> Vec<String> {
    let mut all = vec![
        "--check-url".to_string(),
        handler.state_url(),
        "--settle".into(),
        "100ms".into(),
    ];
    all.extend(args.iter().map(|a| a.to_string()));
    all
}

/// What a `portpreview` run left behind.
pub struct Ran {
    /// Exit code (-1 when killed by a signal).
    pub code: i32,
    /// Everything printed on stdout.
    pub stdout: String,
    /// Everything printed on stderr.
    pub stderr: String,
}

impl Ran {
    /// The exit code and what was printed, from a finished process.
    pub fn of(output: Output) -> Self {
        Self {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Stdout as JSON, for `--json` runs.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|err| panic!("not JSON ({err}): {}\n{}", self.stdout, self.stderr))
    }

    /// The verdict check called `name` in the JSON report.
    pub fn check(&self, name: &str) -> Value {
        let json = self.json();
        json["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no check {name} in {json:#}"))
            .clone()
    }
}

/// Runs the real binary with a private config and no secrets from the environment.
pub fn portpreview<S: AsRef<str>>(db: &Path, args: &[S]) -> Ran {
    Ran::of(super::process::output_of(&mut command(db, args)))
}

/// Runs the real binary as [`portpreview`] does, killing it and failing the
/// test if it has not finished within `limit`: a run that hangs fails the
/// test instead of holding up the whole suite.
pub fn portpreview_within<S: AsRef<str>>(limit: Duration, db: &Path, args: &[S]) -> Ran {
    let mut command = tokio::process::Command::from(command(db, args));
    command.kill_on_drop(true);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let output = runtime
        .block_on(async { tokio::time::timeout(limit, command.output()).await })
        .unwrap_or_else(|_| panic!("portpreview was still running after {limit:?}"))
        .unwrap();
    Ran::of(output)
}

/// Runs the real binary as [`portpreview`] does, from inside a test's
/// runtime, which goes on serving the test's handlers meanwhile.
pub async fn portpreview_async<S: AsRef<str>>(db: &Path, args: &[S]) -> Ran {
    let mut command = tokio::process::Command::from(command(db, args));
    command.kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("portpreview finished within 60 s")
        .unwrap();
    Ran::of(output)
}

/// The `portpreview` command on the history `db`, with `args`, not started.
pub fn command<S: AsRef<str>>(db: &Path, args: &[S]) -> Command {
    // The config beside the database, empty unless a test writes one:
    // PortPreview refuses a PORTPREVIEW_CONFIG that names no file.
    let config = db.with_extension("config.toml");
    if !config.exists() {
        std::fs::write(&config, "").unwrap();
    }
    let mut command = Command::new(portpreview_bin());
    command
        .arg("--db")
        .arg(db)
        .args(args.iter().map(AsRef::as_ref))
        .env("PORTPREVIEW_CONFIG", config)
        .env_remove("PORTPREVIEW_SECRET")
        .env_remove("PORTPREVIEW_SECRET_STRIPE")
        .env_remove("PORTPREVIEW_DB");
    command
}
