//! Replacing a file whole: the last step of every atomic write (`fsutil::write_atomic`).
//! Linux renames over the old file and syncs the directory so the new name survives a
//! crash. Windows moves with write-through, and retries for a while when another process
//! (a metrics exporter, an antivirus scanner, a browser showing the report) holds the old
//! file open, which would refuse a replacement that Linux allows at once.

use std::path::Path;

/// Puts `from` in place of `to` in one step: a reader sees the old file or the new one.
pub fn replace(from: &Path, to: &Path) -> std::io::Result<()> {
    os::replace(from, to)
}

/// What a path that is neither a regular file nor a directory is, in words (`a FIFO`).
pub fn special_kind(kind: &std::fs::FileType) -> &'static str {
    os::special_kind(kind)
}

/// Makes a directory's entries durable (best effort: some file systems cannot).
pub fn sync_dir(dir: Option<&Path>) {
    os::sync_dir(dir)
}

#[cfg(not(windows))]
mod os {
    use std::os::unix::fs::FileTypeExt;
    use std::path::Path;

    pub fn special_kind(kind: &std::fs::FileType) -> &'static str {
        if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "a special file"
        }
    }

    pub fn replace(from: &Path, to: &Path) -> std::io::Result<()> {
        std::fs::rename(from, to)
    }

    pub fn sync_dir(dir: Option<&Path>) {
        let dir = match dir {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
}

#[cfg(windows)]
mod os {
    use std::path::Path;
    use std::time::{Duration, Instant};

    /// A named pipe or a device: Windows' metadata tells no more.
    pub fn special_kind(_kind: &std::fs::FileType) -> &'static str {
        "a special file"
    }

    use windows::Win32::Foundation::{
        ERROR_ACCESS_DENIED, ERROR_LOCK_VIOLATION, ERROR_SHARING_VIOLATION,
    };
    use windows::Win32::Storage::FileSystem::{
        MOVEFILE_REPLACE_EXISTING, MOVEFILE_WRITE_THROUGH, MoveFileExW,
    };
    use windows::core::HSTRING;

    /// How long a replacement waits for another process to let go of the old file.
    const PATIENCE: Duration = Duration::from_secs(5);

    pub fn replace(from: &Path, to: &Path) -> std::io::Result<()> {
        let (from, to) = (HSTRING::from(from), HSTRING::from(to));
        let started = Instant::now();
        loop {
            // SAFETY: two NUL-terminated wide paths that outlive the call.
            let moved = unsafe {
                MoveFileExW(
                    &from,
                    &to,
                    MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH,
                )
            };
            let Err(e) = moved else {
                return Ok(());
            };
            let held = [
                ERROR_SHARING_VIOLATION,
                ERROR_ACCESS_DENIED,
                ERROR_LOCK_VIOLATION,
            ]
            .iter()
            .any(|w| e.code() == w.to_hresult());
            if !held || started.elapsed() >= PATIENCE {
                return Err(std::io::Error::from_raw_os_error(e.code().0 & 0xFFFF));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// MOVEFILE_WRITE_THROUGH has made the move durable; NTFS journals its directories.
    pub fn sync_dir(_dir: Option<&Path>) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (old, new) = (
            dir.path().join("report.json"),
            dir.path().join("report.tmp"),
        );
        std::fs::write(&old, "old").unwrap();
        std::fs::write(&new, "new").unwrap();
        replace(&new, &old).unwrap();
        assert_eq!(std::fs::read_to_string(&old).unwrap(), "new");
        assert!(!new.exists());
        sync_dir(Some(dir.path()));
        let missing = replace(&dir.path().join("gone"), &old).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
    }
}
