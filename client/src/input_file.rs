//! Files a user names for PortPreview to read whole: a fixture, a suite, a
//! body, the config. Each is read no further than such a file can be, so a
//! path to `/dev/zero` or a runaway log is refused in one line instead of
//! filling the machine's memory.

use std::io::Read;
use std::path::Path;

/// Largest fixture or body file: a 25 MiB body written as base64 in a
/// fixture, with its headers, and room to spare.
pub const MAX_REQUEST_FILE: u64 = 64 * 1024 * 1024;

/// Largest suite, config or certificate file: text a person writes or
/// pastes.
pub const MAX_SETTINGS_FILE: u64 = 1024 * 1024;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// Opening or reading it failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A device, a pipe or a folder where a file was wanted.
    #[error("it is not a regular file")]
    NotAFile,
    /// Longer than such a file can be.
    #[error("it is over {} MiB, the most PortPreview reads from such a file", .0 / (1024 * 1024))]
    TooLarge(u64),
}

/// `text` without the byte-order mark some editors (Notepad, PowerShell's
/// `Out-File`) put before UTF-8: JSON and TOML readers refuse the file
/// over it, at "line 1 column 1", which says nothing of why.
pub fn without_bom(mut text: Vec<u8>) -> Vec<u8> {
    if text.starts_with(b"\xEF\xBB\xBF") {
        text.drain(..3);
    }
    text
}

/// Reads the regular file at `path` whole, up to `limit` bytes. A device or
/// a pipe is refused before it is opened: opening a pipe nobody writes to
/// would wait for good.
pub fn read_file(path: &Path, limit: u64) -> Result<Vec<u8>, InputError> {
    let metadata = std::fs::metadata(path)?;
    if !metadata.is_file() {
        return Err(InputError::NotAFile);
    }
    if metadata.len() > limit {
        return Err(InputError::TooLarge(limit));
    }
    read_stream(path, limit)
}

/// Reads a settings file: a regular file, or a device (`/dev/null` for no
/// settings), up to `limit` bytes; not a pipe, which would wait for a
/// writer before the command could even start, nor a folder.
pub fn read_settings(path: &Path, limit: u64) -> Result<Vec<u8>, InputError> {
    use std::os::unix::fs::FileTypeExt;
    let kind = std::fs::metadata(path)?.file_type();
    if kind.is_fifo() || kind.is_dir() || kind.is_socket() {
        return Err(InputError::NotAFile);
    }
    read_stream(path, limit)
}

/// Reads what `path` gives, a pipe's included (`--body-file <(jq …)`), up
/// to `limit` bytes.
pub fn read_stream(path: &Path, limit: u64) -> Result<Vec<u8>, InputError> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(InputError::TooLarge(limit));
    }
    Ok(bytes)
}

/// What a file read holds, as text.
pub fn into_text(bytes: Vec<u8>) -> Result<String, InputError> {
    String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "stream did not contain valid UTF-8").into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_a_pipe_or_a_file_too_long_is_refused() {
        let dir = crate::store::tests::ScratchDir::new("input-file");
        let file = dir.0.join("body");
        std::fs::write(&file, b"12345").unwrap();
        assert_eq!(read_file(&file, 5).unwrap(), b"12345");
        assert!(matches!(read_file(&file, 4), Err(InputError::TooLarge(4))));
        assert!(matches!(
            read_file(Path::new("/dev/zero"), 5),
            Err(InputError::NotAFile)
        ));
        assert!(matches!(read_file(&dir.0, 5), Err(InputError::NotAFile)));
        // A stream is read, but no further than the limit.
        assert!(matches!(
            read_stream(Path::new("/dev/zero"), 1024),
            Err(InputError::TooLarge(1024))
        ));
        // Settings may come from a device, never from a pipe.
        assert_eq!(read_settings(Path::new("/dev/null"), 5).unwrap(), b"");
        assert!(matches!(
            read_settings(Path::new("/dev/zero"), 5),
            Err(InputError::TooLarge(5))
        ));
        let fifo = dir.0.join("pipe");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        assert!(matches!(read_settings(&fifo, 5), Err(InputError::NotAFile)));
        assert!(matches!(read_settings(&dir.0, 5), Err(InputError::NotAFile)));
        assert_eq!(
            read_file(&dir.0.join("missing"), 5).unwrap_err().to_string(),
            "No such file or directory (os error 2)"
        );
    }
}
