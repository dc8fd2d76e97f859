//! Running `--check-cmd`: what the command prints on stdout is the state.
//!
//! Its output is read up to a limit, never buffered whole: a command that
//! dumps a table or never stops printing must not take the memory with it.

use std::io;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Child;

use super::probe::ProbeError;

/// Stderr bytes kept, its last: enough for the lines that explain a failure.
const KEPT_STDERR: usize = 4096;

/// Lines of stderr a failure quotes, its last that are not blank.
const QUOTED_LINES: usize = 3;

/// Characters quoted of each of those lines.
const QUOTED_LINE_CHARS: usize = 160;

/// How long stderr is read once the command has exited.
const STDERR_AFTER_EXIT: Duration = Duration::from_millis(200);

/// Runs `cmd` with `sh -c` and returns its stdout, or
/// [`ProbeError::TooLarge`] once it prints more than `limit` bytes, or
/// [`ProbeError::Timeout`] when it has not finished `within`.
pub(super) async fn read(cmd: &str, limit: usize, within: Duration) -> Result<String, ProbeError> {
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // A group of its own, so that what the shell starts can be stopped with it.
    #[cfg(unix)]
    command.process_group(0);
    let mut group = Group(command.spawn().map_err(ProbeError::Spawn)?);
    match tokio::time::timeout(within, output(&mut group, limit)).await {
        Ok(result) => result,
        Err(_) => {
            // The shell has exited: what it started holds the output open.
            let exited = group.0.id().is_some_and(has_exited);
            group.stop().await;
            Err(if exited {
                ProbeError::OutputHeldOpen
            } else {
                ProbeError::Timeout
            })
        }
    }
}

/// Whether process `pid` has exited and waits to be reaped, read from
/// `/proc` so that it stays unreaped (its id still names the group to
/// kill). Elsewhere, not known: false.
fn has_exited(pid: u32) -> bool {
    process_state(pid) == Some('Z')
}

/// The state of process `pid` from `/proc` (`S`, `Z`…), `None` once it is
/// gone or where there is no `/proc`.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// The shell and everything it started. Killing only the shell would leave
/// its children running, re-parented to init (`sleep 77; echo x` keeps its
/// `sleep`), so a read that ends early (timed out, cut off, or dropped when
/// the run is stopped) kills the whole group.
struct Group(Child);

impl Group {
    /// Kills the group; the shell is reaped by [`Group::stop`] or, when
    /// dropped, by tokio (`kill_on_drop`).
    fn kill(&mut self) {
        // Once the shell is reaped its id may belong to someone else.
        let Some(pid) = self.0.id() else {
            return;
        };
        #[cfg(unix)]
        if let Some(group) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
        #[cfg(not(unix))]
        let _ = pid;
        let _ = self.0.start_kill();
    }

    /// Kills the group and reaps the shell.
    async fn stop(&mut self) {
        self.kill();
        let _ = self.0.wait().await;
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits for the command and returns what it printed on stdout.
async fn output(group: &mut Group, limit: usize) -> Result<String, ProbeError> {
    let child = &mut group.0;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(ProbeError::Spawn(io::Error::other("its output cannot be read")));
    };
    // Both pipes are read at once: a command that fills one while nobody
    // reads it would wait forever.
    let mut errors = Tail::default();
    let (printed, status) = {
        let stdout = read_capped(stdout, limit);
        let stderr = keep_last(stderr, KEPT_STDERR, &mut errors);
        tokio::pin!(stdout, stderr);
        let mut stderr_ended = false;
        let printed = loop {
            tokio::select! {
                printed = &mut stdout => break printed,
                () = &mut stderr, if !stderr_ended => stderr_ended = true,
            }
        };
        let Some(printed) = printed.map_err(ProbeError::Spawn)? else {
            // The rest of its output will never be read, so it must not wait to write it.
            group.stop().await;
            return Err(ProbeError::TooLarge {
                probe: "the check command".into(),
                limit,
            });
        };
        // stderr is still read while the shell finishes: one that fills
        // the pipe would otherwise wait for a reader.
        let status = loop {
            tokio::select! {
                status = child.wait() => break status.map_err(ProbeError::Spawn)?,
                () = &mut stderr, if !stderr_ended => stderr_ended = true,
            }
        };
        if !stderr_ended {
            // The shell has exited; a process it left running in the
            // background may hold stderr open for good, and what the
            // shell itself wrote is there to read at once.
            let _still_open = tokio::time::timeout(STDERR_AFTER_EXIT, &mut stderr).await;
        }
        (printed, status)
    };
    if !status.success() {
        // A command that says why only on stdout (`echo "db down"; exit 1`)
        // is quoted from there.
        let mut said = last_lines(&errors);
        if said.is_empty() {
            said = last_lines(&Tail {
                bytes: printed,
                cut: false,
            });
        }
        return Err(ProbeError::Failed {
            status: status.to_string(),
            stderr: said,
        });
    }
    Ok(super::probe::state_text(printed))
}

/// Reads to the end; `None` as soon as more than `limit` bytes came.
async fn read_capped(reader: impl AsyncRead + Unpin, limit: usize) -> io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    let over = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader.take(over).read_to_end(&mut bytes).await?;
    Ok((bytes.len() <= limit).then_some(bytes))
}

/// The end of what a command wrote (to stderr, or, quoted when stderr has
/// nothing, to stdout).
#[derive(Default)]
struct Tail {
    bytes: Vec<u8>,
    /// Set once bytes before `bytes` were let go.
    cut: bool,
}

/// Reads to the end and keeps at least the last `keep` bytes in `kept`,
/// which holds what came so far if the read is given up.
async fn keep_last(mut reader: impl AsyncRead + Unpin, keep: usize, kept: &mut Tail) {
    let mut chunk = vec![0; 8192];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                kept.bytes.extend_from_slice(&chunk[..n]);
                // Let go once twice `keep` is held, not on every read: a
                // chatty stderr then costs one copy per `keep` bytes.
                if kept.bytes.len() > 2 * keep {
                    kept.bytes.drain(..kept.bytes.len() - keep);
                    kept.cut = true;
                }
            }
        }
    }
}

/// The last lines of what a failed command wrote that are not blank,
/// joined with ` / `, each escaped and cut short. A command says why it
/// failed last, after what it was doing ("warming up", "connecting to
/// …"), and the first line alone quoted the preamble instead.
fn last_lines(tail: &Tail) -> String {
    let text = String::from_utf8_lossy(&tail.bytes);
    let mut lines: Vec<&str> = text.lines().map(str::trim).filter(|line| !line.is_empty()).collect();
    // What was let go took the start of the first line kept with it.
    if tail.cut && lines.len() > 1 {
        lines.remove(0);
    }
    let quoted: Vec<String> = lines[lines.len().saturating_sub(QUOTED_LINES)..]
        .iter()
        .map(|line| {
            portpreview_shared::text::shorten(&portpreview_shared::sanitize::escape_str(line), QUOTED_LINE_CHARS)
        })
        .collect();
    quoted.join(" / ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const WITHIN: Duration = Duration::from_secs(30);

    #[tokio::test]
    async fn output_up_to_the_limit_is_read_whole() {
        let state = read("head -c 100000 /dev/zero | tr '\\0' x; echo end", 100_004, WITHIN)
            .await
            .unwrap();
        assert_eq!(state.len(), 100_004);
        assert!(state.ends_with("xend\n"), "{:?}", &state[state.len() - 8..]);
    }

    #[tokio::test]
    async fn a_command_that_never_stops_printing_is_cut_off() {
        let err = read("yes", 64 * 1024, WITHIN).await.unwrap_err();
        assert!(matches!(err, ProbeError::TooLarge { .. }), "{err}");
        assert!(err.to_string().starts_with("the check command gave more than"), "{err}");
    }

    /// Waits up to 5 s for process `pid` to end (a zombie has ended).
    #[cfg(target_os = "linux")]
    async fn ended(pid: &str) -> bool {
        let pid = pid.parse().expect("a process id");
        for _ in 0..100 {
            if process_state(pid).is_none_or(|state| state == 'Z') {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// A command whose shell runs `sleep`, with the sleep's pid in a file.
    #[cfg(target_os = "linux")]
    fn sleeper(name: &str) -> (String, std::path::PathBuf) {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let file = std::env::temp_dir().join(format!("portpreview-{name}-{}-{nanos}", std::process::id()));
        (format!("sleep 77 & echo $! > '{}'; wait; echo x", file.display()), file)
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_command_that_takes_too_long_is_stopped_with_what_it_started() {
        let (cmd, pid_file) = sleeper("timeout");
        let err = read(&cmd, 1024, Duration::from_millis(500)).await.unwrap_err();
        assert!(matches!(err, ProbeError::Timeout), "{err}");
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let _ = std::fs::remove_file(&pid_file);
        assert!(ended(pid.trim()).await, "sleep {} outlived the probe", pid.trim());
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_run_stopped_mid_read_stops_what_the_command_started() {
        let (cmd, pid_file) = sleeper("dropped");
        let read = read(&cmd, 1024, Duration::from_secs(30));
        assert!(tokio::time::timeout(Duration::from_millis(500), read).await.is_err());
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let _ = std::fs::remove_file(&pid_file);
        assert!(ended(pid.trim()).await, "sleep {} outlived the probe", pid.trim());
    }

    /// A command whose background process keeps its stdout open: it is
    /// told as such, not as a command that took too long, and the process
    /// is stopped with it.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn output_held_open_by_a_background_process_is_told_as_such() {
        let (cmd, pid_file) = sleeper("held");
        let cmd = cmd.replace("; wait; echo x", "; echo state");
        let err = read(&cmd, 1024, Duration::from_millis(500)).await.unwrap_err();
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let _ = std::fs::remove_file(&pid_file);
        assert!(matches!(err, ProbeError::OutputHeldOpen), "{err}");
        assert!(err.to_string().contains(">/dev/null 2>&1 &"), "{err}");
        assert!(ended(pid.trim()).await, "sleep {} outlived the probe", pid.trim());
    }

    /// A command that starts a process in the background, its stdout sent
    /// elsewhere: its stderr stays open, but the command's answer is in.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_background_process_holding_stderr_does_not_hold_the_probe() {
        let (cmd, pid_file) = sleeper("stderr");
        let cmd = cmd
            .replace("& echo $!", ">/dev/null & echo $!")
            .replace("; wait; echo x", "; echo ready");
        let state = read(&cmd, 1024, Duration::from_secs(10)).await;
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let _ = std::fs::remove_file(&pid_file);
        // Left running, as anything a command that succeeded started.
        let _ = std::process::Command::new("kill").arg(pid.trim()).status();
        assert_eq!(state.unwrap(), "ready\n");
        let err = read(
            "sleep 7 >/dev/null & exec >&-; head -c 200000 /dev/zero >&2; echo >&2; echo broken >&2; exit 3",
            1024,
            Duration::from_secs(10),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&err, ProbeError::Failed { stderr, .. } if stderr == "broken"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_chatty_stderr_neither_blocks_the_command_nor_fills_the_memory() {
        let state = read("head -c 1000000 /dev/zero >&2; echo 7", 1024, WITHIN)
            .await
            .unwrap();
        assert_eq!(state, "7\n");
        let err = read(
            "echo first >&2; head -c 1000000 /dev/zero >&2; echo >&2; echo last >&2; exit 4",
            1024,
            WITHIN,
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&err, ProbeError::Failed { stderr, .. } if stderr == "last"),
            "{err}"
        );
    }

    /// A command that says why only on stdout is quoted from there;
    /// stderr, when it wrote any, comes first.
    #[tokio::test]
    async fn a_failure_silent_on_stderr_quotes_its_stdout() {
        let err = read("echo counting; echo 'db down'; exit 5", 1024, WITHIN)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the check command failed (exit status: 5): counting / db down"
        );
        let err = read("echo 'on stdout'; echo 'on stderr' >&2; exit 5", 1024, WITHIN)
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "the check command failed (exit status: 5): on stderr");
    }

    /// The reason a command gives comes last, after what it was doing.
    #[tokio::test]
    async fn a_failure_quotes_the_last_lines_of_stderr_escaped_and_cut() {
        let err = read(
            "echo 'warming up' >&2; echo step 2 >&2; echo >&2; printf 'step 3\\n  \\n\\033[31mdb: connection refused\\n\\n' >&2; \
             printf '%0300d\\n' 0 >&2; exit 1",
            1024,
            WITHIN,
        )
        .await
        .unwrap_err();
        let ProbeError::Failed { stderr, .. } = &err else {
            panic!("{err}");
        };
        let long = format!("{}…", "0".repeat(159));
        assert_eq!(stderr, &format!("step 3 / \\x1b[31mdb: connection refused / {long}"));
        assert!(
            err.to_string()
                .starts_with("the check command failed (exit status: 1): step 3 / "),
            "{err}"
        );
    }
}
