//! The `portpreview-server` binary: its start line, its exit codes, SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_portpreview-server");

/// Kills the relay if the test fails before stopping it.
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-KILL", &self.0.to_string()]).status();
    }
}

/// How long a relay that should refuse to start may take to say so.
const REFUSED_WITHIN: Duration = Duration::from_secs(30);

/// Runs the relay as `Command::output` does, but kills it and fails the
/// test if it is still running after [`REFUSED_WITHIN`]: a relay that
/// started when it should have refused fails its test instead of hanging.
fn output_of_refused(command: &mut Command) -> std::process::Output {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let guard = KillOnDrop(child.id());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    let out = rx
        .recv_timeout(REFUSED_WITHIN)
        .unwrap_or_else(|_| panic!("still running after {REFUSED_WITHIN:?}: {command:?}"));
    std::mem::forget(guard);
    out.unwrap()
}

/// Starts the relay with `command`, and waits for the line saying where
/// it listens: the process, what kills it should the test fail, and the
/// address.
fn listening(command: &mut Command) -> (std::process::Child, KillOnDrop, String) {
    let mut child = command.stdout(Stdio::piped()).spawn().unwrap();
    let guard = KillOnDrop(child.id());
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("portpreview-server listening on ")
        .expect(&line)
        .to_string();
    (child, guard, addr)
}

/// The relay on a free loopback port, started under the shell's
/// `ulimit` with `limit` (`-n 40`).
fn under_ulimit(limit: &str) -> Command {
    let mut command = Command::new("sh");
    command
        .args([
            "-c",
            &format!(r#"ulimit {limit} && exec "$0" --listen 127.0.0.1:0"#),
            BIN,
        ])
        .stderr(Stdio::null());
    command
}

#[test]
fn bad_flags_and_files_exit_2_with_one_line() {
    let dir = std::env::temp_dir().join(format!("pp-server-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let typo = dir.join("tokens.toml");
    std::fs::write(&typo, "[[token]]\ntoken = \"t\"\nnmaes = [\"x\"]\n").unwrap();
    // The toml crate's own message for this spans lines.
    let broken = dir.join("broken.toml");
    std::fs::write(&broken, "[[token]\ntoken = \"abc\"\n").unwrap();
    let cases: Vec<Vec<String>> = vec![
        vec![
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--tokens".into(),
            typo.display().to_string(),
        ],
        vec![
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--tokens".into(),
            broken.display().to_string(),
        ],
        vec![
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--tokens".into(),
            "/nonexistent/tokens.toml".into(),
        ],
        vec![
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--tls-cert".into(),
            "/nonexistent/c.pem".into(),
            "--tls-key".into(),
            "/nonexistent/k.pem".into(),
        ],
    ];
    for args in cases {
        let out = output_of_refused(Command::new(BIN).args(&args));
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
        // A mistyped key is named, so the user knows which line to fix.
        if args.contains(&typo.display().to_string()) {
            assert!(stderr.contains("`nmaes`"), "{stderr}");
        }
    }

    // A bad flag value names its flag and points to --help, on one line.
    for args in [
        &["--listen", "not-an-address"][..],
        &["--listen", "127.0.0.1:0", "--max-connections-per-ip", "0"],
        &["--listen", "127.0.0.1:0", "--max-connections-per-ip", "-1"],
        &["--listen", "127.0.0.1:0", "--domain", "bad domain"],
        &["--listen", "127.0.0.1:0", "--domain", "127.0.0.1"],
    ] {
        let out = output_of_refused(Command::new(BIN).args(args));
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let flag = args[args.len() - 2];
        assert!(
            stderr.starts_with(&format!("error: invalid value '{}' for '{flag} ", args[args.len() - 1])),
            "{stderr}"
        );
        assert!(
            stderr.trim_end().ends_with("; see portpreview-server --help"),
            "{stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_address_in_use_exits_2_with_one_line_and_never_says_it_listens() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = Command::new(BIN).args(["--listen", &addr]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "a relay that cannot start is the caller's to fix"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.starts_with(&format!("error: cannot listen on {addr}: ")),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn it_prints_where_it_listens_serves_and_stops_on_sigterm() {
    // A host name is taken too, as it is written in most examples.
    let (mut child, guard, addr) = listening(
        Command::new(BIN)
            .args(["--listen", "localhost:0"])
            .stderr(Stdio::null()),
    );
    let listening: std::net::SocketAddr = addr.parse().unwrap();
    assert!(listening.ip().is_loopback(), "{addr}");

    let mut tcp = std::net::TcpStream::connect(&addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait()));
    let status = rx
        .recv_timeout(Duration::from_secs(15))
        .expect("did not stop on SIGTERM")
        .unwrap();
    std::mem::forget(guard);
    assert!(status.success(), "{status:?}");
}

/// Started with the soft limit on open files most systems give (1,024,
/// here 256), the relay raises it to the hard limit: each connection is a
/// file, and its connection caps mean nothing below them.
#[cfg(target_os = "linux")]
#[test]
fn the_relay_takes_every_open_file_the_system_allows() {
    let (mut child, guard, _) = listening(&mut under_ulimit("-Sn 256"));
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id())).unwrap();
    let open_files: Vec<&str> = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .expect(&limits)
        .split_whitespace()
        .collect();
    let (soft, hard) = (open_files[0], open_files[1]);
    if hard != "unlimited" {
        assert_eq!(soft, hard, "{limits}");
    }
    if hard.parse::<u64>().map_or(true, |hard| hard > 256) {
        assert_ne!(soft, "256", "{limits}");
    }
    drop(guard);
    let _ = child.wait();
}

/// Under a limit on open files too low to run with, the relay says so
/// in one line, where tokio's signal set-up would panic.
#[cfg(unix)]
#[test]
fn too_few_open_files_exit_2_with_one_line() {
    for limit in ["6", "7", "12"] {
        let out = output_of_refused(&mut under_ulimit(&format!("-n {limit}")));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(
            stderr,
            format!("error: this process may open only {limit} files (ulimit -n); PortPreview needs at least 16\n")
        );
    }
}

/// Short of open files, the relay caps its connections below the limit:
/// a caller past it is told 503 at once, where past the limit it would
/// wait unanswered in the listen queue.
#[cfg(unix)]
#[test]
fn a_relay_short_of_open_files_answers_503_rather_than_leave_callers_waiting() {
    let (mut child, guard, addr) = listening(&mut under_ulimit("-n 40"));
    let held: Vec<_> = (0..60).map(|_| std::net::TcpStream::connect(&addr).unwrap()).collect();
    let mut late = std::net::TcpStream::connect(&addr).unwrap();
    late.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // Read before writing: the answer comes on accepting, and a request
    // left unread would have the close reset the connection under it.
    let mut answer = String::new();
    late.read_to_string(&mut answer).expect("an answer within 5 s");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("too many connections to the relay"), "{answer}");
    drop(held);
    drop(guard);
    let _ = child.wait();
}

#[test]
fn a_token_short_enough_to_guess_is_warned_of_by_its_label() {
    let dir = std::env::temp_dir().join(format!("pp-server-short-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tokens = dir.join("tokens.toml");
    std::fs::write(&tokens, "[[token]]\ntoken = \"Zq9x\"\nlabel = \"alice\"\n").unwrap();
    let line = first_line_on_stderr(
        Command::new(BIN)
            .args(["--listen", "127.0.0.1:0", "--tokens"])
            .arg(&tokens),
    );
    assert!(
        line.contains("a token shorter than 16 characters can be guessed") && line.contains("label=\"alice\""),
        "{line}"
    );
    assert!(!line.contains("Zq9x"), "the token itself is never logged: {line}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tokens file other users may read is warned of: whoever reads a
/// token connects as its owner.
#[cfg(unix)]
#[test]
fn a_tokens_file_others_may_read_is_warned_of() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("pp-server-open-tokens-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tokens = dir.join("tokens.toml");
    std::fs::write(&tokens, "[[token]]\ntoken = \"0123456789abcdef0123\"\n").unwrap();
    // A certificate that is not there stops the relay once the tokens are read.
    let stderr = |mode| {
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(mode)).unwrap();
        let out = Command::new(BIN)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--tls-cert",
                "/nonexistent",
                "--tls-key",
                "/nonexistent",
            ])
            .arg("--tokens")
            .arg(&tokens)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        String::from_utf8(out.stderr).unwrap()
    };
    let said = stderr(0o644);
    assert!(
        said.contains("the tokens file may be read by other users (mode 0644)") && said.contains("chmod 600 it"),
        "{said}"
    );
    assert!(
        !said.contains("0123456789abcdef"),
        "the token itself is never logged: {said}"
    );
    let said = stderr(0o600);
    assert!(!said.contains("may be read"), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The first line the relay started with `command` writes to stderr; the
/// relay is stopped once it has.
fn first_line_on_stderr(command: &mut Command) -> String {
    let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let guard = KillOnDrop(child.id());
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    std::mem::forget(guard);
    line
}

/// A log filter that does not parse, or that names a mistyped level and
/// so would silence every line, warnings included, is warned of before
/// the relay starts, as the client warns of it.
#[test]
fn a_log_filter_that_would_not_log_what_was_meant_is_warned_of() {
    for (filter, said) in [
        ("bogus=[[", "warning: PORTPREVIEW_LOG=bogus=[[ is not a log filter ("),
        (
            "debg",
            "warning: PORTPREVIEW_LOG=debg: \"debg\" in it is no level (did you mean debug?)",
        ),
    ] {
        let line = first_line_on_stderr(
            Command::new(BIN)
                .args(["--listen", "127.0.0.1:0"])
                .env("PORTPREVIEW_LOG", filter),
        );
        assert!(line.starts_with(said), "{filter}: {line}");
    }
}

/// At debug, the relay logs a line a request, with its status: how an
/// operator finds why a sender got a 404 or a 504.
#[test]
fn at_debug_each_request_is_logged_with_its_status() {
    let (mut child, guard, addr) = listening(
        Command::new(BIN)
            .args(["--listen", "127.0.0.1:0"])
            .env("PORTPREVIEW_LOG", "portpreview_server=debug")
            .stderr(Stdio::piped()),
    );
    let mut caller = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        caller,
        "POST /t/nobody/hook?n=1 HTTP/1.1\r\nHost: relay.test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    caller.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    let logged = BufReader::new(child.stderr.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .find(|line| line.contains(" request "))
        .expect("a request line");
    assert!(!logged.contains("s3cret"), "a query's token is never logged: {logged}");
    assert!(
        logged.contains("method=POST host=relay.test target=/t/nobody/hook?… status=404 ms="),
        "{logged}"
    );
    let _ = child.kill();
    let _ = child.wait();
    std::mem::forget(guard);
}
