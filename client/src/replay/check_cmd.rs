//! Running `--check-cmd`: what the command prints on stdout is the state.
//!
//! Its output is read up to a limit, never buffered whole: a command that
//! dumps a table or never stops printing must not take the memory with it.

use std::io;
use std::process::Stdio;

use tokio::io::{AsyncRead, AsyncReadExt};

use super::probe::ProbeError;

/// Stderr bytes kept, enough for the line that explains a failure.
const KEPT_STDERR: usize = 4096;

/// Runs `cmd` with `sh -c` and returns its stdout, or
/// [`ProbeError::TooLarge`] once it prints more than `limit` bytes.
pub(super) async fn read(cmd: &str, limit: usize) -> Result<String, ProbeError> {
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(ProbeError::Spawn)?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(ProbeError::Spawn(io::Error::other("its output cannot be read")));
    };
    // Both pipes are read at once: a command that fills one while nobody
    // reads it would wait forever.
    let stdout = read_capped(stdout, limit);
    let stderr = keep_first(stderr, KEPT_STDERR);
    tokio::pin!(stdout, stderr);
    let mut errors = None;
    let printed = loop {
        tokio::select! {
            printed = &mut stdout => break printed,
            text = &mut stderr, if errors.is_none() => errors = Some(text),
        }
    };
    let Some(printed) = printed.map_err(ProbeError::Spawn)? else {
        // The rest of its output will never be read, so it must not wait to write it.
        let _ = child.start_kill();
        let _ = child.wait().await;
        return Err(ProbeError::TooLarge {
            probe: "--check-cmd".into(),
            limit,
        });
    };
    let errors = match errors {
        Some(text) => text,
        None => stderr.await,
    };
    let status = child.wait().await.map_err(ProbeError::Spawn)?;
    if !status.success() {
        let errors = String::from_utf8_lossy(&errors);
        return Err(ProbeError::Failed {
            status: status.to_string(),
            stderr: errors.lines().next().unwrap_or("").to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&printed).into_owned())
}

/// Reads to the end; `None` as soon as more than `limit` bytes came.
async fn read_capped(reader: impl AsyncRead + Unpin, limit: usize) -> io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    let over = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader.take(over).read_to_end(&mut bytes).await?;
    Ok((bytes.len() <= limit).then_some(bytes))
}

/// Reads to the end and keeps the first `keep` bytes.
async fn keep_first(mut reader: impl AsyncRead + Unpin, keep: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut chunk = vec![0; 8192];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = keep.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn output_up_to_the_limit_is_read_whole() {
        let state = read("head -c 100000 /dev/zero | tr '\\0' x; echo end", 100_004)
            .await
            .unwrap();
        assert_eq!(state.len(), 100_004);
        assert!(state.ends_with("xend\n"), "{:?}", &state[state.len() - 8..]);
    }

    #[tokio::test]
    async fn a_command_that_never_stops_printing_is_cut_off() {
        let err = read("yes", 64 * 1024).await.unwrap_err();
        assert!(matches!(err, ProbeError::TooLarge { .. }), "{err}");
        assert!(err.to_string().starts_with("--check-cmd gave more than"), "{err}");
    }

    #[tokio::test]
    async fn a_chatty_stderr_neither_blocks_the_command_nor_fills_the_memory() {
        let state = read("head -c 1000000 /dev/zero >&2; echo 7", 1024).await.unwrap();
        assert_eq!(state, "7\n");
        let err = read("echo first >&2; head -c 1000000 /dev/zero >&2; exit 4", 1024)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ProbeError::Failed { stderr, .. } if stderr == "first"),
            "{err}"
        );
    }
}
