//! Running the real binaries and reading what they print.

use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// A running `portpreview` or `portpreview-server` process; killed on drop.
pub struct Running {
    /// The process.
    pub child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Running {
    /// Starts `program args…` with a clean PortPreview environment: no user
    /// config, no relay or token from the caller's shell.
    pub fn start(program: &Path, args: &[&str], config_dir: &Path) -> Self {
        Self::start_with_stderr(program, args, config_dir, Stdio::inherit())
    }

    /// [`Running::start`], with the process's stderr (its log) sent to `stderr`.
    pub fn start_with_stderr(program: &Path, args: &[&str], config_dir: &Path, stderr: Stdio) -> Self {
        Self::start_with_env(program, args, config_dir, stderr, &[])
    }

    /// [`Running::start`], with the process's stderr written to the file
    /// `log`, to be read as the test goes.
    pub fn start_logging(program: &Path, args: &[&str], config_dir: &Path, log: &Path) -> Self {
        let file = std::fs::File::create(log).expect("log file");
        Self::start_with_stderr(program, args, config_dir, file.into())
    }

    /// [`Running::start_with_stderr`], with `env` set for the process.
    pub fn start_with_env(
        program: &Path,
        args: &[&str],
        config_dir: &Path,
        stderr: Stdio,
        env: &[(&str, &str)],
    ) -> Self {
        // PortPreview refuses a PORTPREVIEW_CONFIG that names no file.
        let config = config_dir.join("config.toml");
        if !config.exists() {
            std::fs::write(&config, "").expect("an empty config file");
        }
        // `env` comes after the removals, so a test can hand the process a
        // relay or a token through the environment.
        let mut child = Command::new(program)
            .args(args)
            .env_remove("PORTPREVIEW_SERVER")
            .env_remove("PORTPREVIEW_TOKEN")
            .env_remove("PORTPREVIEW_DB")
            .env("PORTPREVIEW_CONFIG", &config)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .expect("start the binary");
        let stdout = child.stdout.take().expect("piped stdout");
        Self {
            child,
            lines: BufReader::new(stdout).lines(),
        }
    }

    /// `portpreview http TARGET --server RELAY --no-tui --db DB`, with its
    /// config in `config_dir`, and the public URL it printed.
    pub async fn tunnel(target: &str, relay: &str, db: &Path, config_dir: &Path) -> (Self, String) {
        Self::tunnel_with(target, relay, db, config_dir, &[]).await
    }

    /// [`Running::tunnel`] with more flags after the others.
    pub async fn tunnel_with(target: &str, relay: &str, db: &Path, config_dir: &Path, more: &[&str]) -> (Self, String) {
        let db = db.to_str().expect("utf-8 path");
        let mut args = vec!["http", target, "--server", relay, "--no-tui", "--db", db];
        args.extend_from_slice(more);
        let mut client = Self::start(&super::bin::portpreview_bin(), &args, config_dir);
        let url = client.public_url().await;
        (client, url)
    }

    /// [`Running::tunnel`], with its stderr written to the file `log`.
    pub async fn tunnel_logging(target: &str, relay: &str, db: &Path, config_dir: &Path, log: &Path) -> (Self, String) {
        let db = db.to_str().expect("utf-8 path");
        let args = ["http", target, "--server", relay, "--no-tui", "--db", db];
        let mut client = Self::start_logging(&super::bin::portpreview_bin(), &args, config_dir, log);
        let url = client.public_url().await;
        (client, url)
    }

    /// `portpreview http PORT --no-tui` with its relay in-process on
    /// `listen`, and the URL it prints.
    pub async fn local_tunnel(port: u16, listen: &str, db: &Path, config_dir: &Path) -> (Self, String) {
        let port = port.to_string();
        let db = db.to_str().expect("utf-8 path");
        let args = ["http", &port, "--no-tui", "--local-listen", listen, "--db", db];
        let mut client = Self::start(&super::bin::portpreview_bin(), &args, config_dir);
        let url = client.public_url().await;
        (client, url)
    }

    /// `portpreview-server --listen 127.0.0.1:0`, with its config in
    /// `config_dir`, and the address it listens on.
    pub async fn relay(config_dir: &Path) -> (Self, String) {
        let mut relay = Self::start(&super::bin::server_bin(), &["--listen", "127.0.0.1:0"], config_dir);
        let line = relay.line_containing("listening on").await;
        let addr = line.rsplit(' ').next().expect("address").to_string();
        (relay, addr)
    }

    /// The next line printed on stdout, failing the test after 30 s.
    pub async fn next_line(&mut self) -> String {
        tokio::time::timeout(Duration::from_secs(30), self.lines.next_line())
            .await
            .expect("a line within 30 s")
            .expect("readable stdout")
            .expect("the process is still printing")
    }

    /// Reads lines until one contains `needle`, returning it.
    pub async fn line_containing(&mut self, needle: &str) -> String {
        loop {
            let line = self.next_line().await;
            if line.contains(needle) {
                return line;
            }
        }
    }

    /// Reads lines until `portpreview http`'s `Forwarding URL -> …` line,
    /// returning its public URL.
    pub async fn public_url(&mut self) -> String {
        let banner = self.line_containing("Forwarding").await;
        banner.split_whitespace().nth(1).expect("public URL").to_owned()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("running process")
    }

    /// Sends a signal by name (`TERM`, `KILL`) with kill(1).
    pub fn signal(&self, name: &str) {
        let status = std::process::Command::new("kill")
            .args([format!("-{name}"), self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} failed");
    }

    /// Sends a signal by name twice, back to back from one shell, as one
    /// key press passed on twice arrives: two kill(1) runs could land far
    /// enough apart on a busy machine to be taken for two key presses.
    pub fn signal_twice(&self, name: &str) {
        let twice = format!("kill -{name} \"$0\" && kill -{name} \"$0\"");
        let status = std::process::Command::new("sh")
            .args(["-c", &twice, &self.pid().to_string()])
            .status()
            .expect("run sh");
        assert!(status.success(), "kill -{name} twice failed");
    }

    /// Waits for the exit code, failing the test after `limit`.
    pub async fn exit_code(&mut self, limit: Duration) -> Option<i32> {
        tokio::time::timeout(limit, self.child.wait())
            .await
            .expect("the process exits in time")
            .expect("wait for the process")
            .code()
    }

    /// A field of /proc/<pid>/status in KiB (`VmRSS`, `VmHWM`).
    pub fn memory_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).expect("proc status");
        status
            .lines()
            .find_map(|line| {
                line.strip_prefix(field)?
                    .trim_start_matches(':')
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .expect("memory field")
    }
}

/// How long a command the tests run to its end may take.
pub const FINISHED_WITHIN: Duration = Duration::from_secs(120);

/// Runs `command` to its end as `Command::output` does (stdin empty, stdout
/// and stderr captured), but kills it and fails the test if it is still
/// running after [`FINISHED_WITHIN`]: a refusal that broke (`http` taking
/// a history it should refuse) then fails its test instead of holding up
/// the whole suite.
pub fn output_of(command: &mut std::process::Command) -> std::process::Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the command");
    let read_all = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = read_all(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = read_all(Box::new(child.stderr.take().expect("piped stderr")));
    let deadline = Instant::now() + FINISHED_WITHIN;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the command") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running after {FINISHED_WITHIN:?}: {command:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    std::process::Output {
        status,
        stdout: stdout.join().expect("stdout read"),
        stderr: stderr.join().expect("stderr read"),
    }
}
