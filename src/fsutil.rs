//! File-system helpers below every layer that writes files: the one atomic write.

use std::fs::File;
use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` atomically: a temporary file beside it (`<name>.tmp`), synced,
/// then renamed over it, so a reader sees the old file or the new one, never half of one.
/// A failure (a full disk) removes the temporary file rather than leave it behind.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// As [`write_atomic`], with the content written by `fill`. After the rename the directory
/// is synced too (best effort), so that the new name survives a crash.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(".tmp");
    let tmp = path.with_file_name(name);
    let write = || -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        fill(&mut f)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })?;
    sync_dir(path.parent());
    Ok(())
}

/// Syncs the directory `dir` (the current one when empty or none), ignoring failures: some
/// file systems cannot sync a directory, and the file itself is already on disk.
fn sync_dir(dir: Option<&Path>) {
    let dir = match dir {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_atomic_write_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        // The rename cannot replace a directory holding files, as a full disk cannot
        // take the write: either way the temporary file must go.
        let target = dir.path().join("report.json");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("keep"), "x").unwrap();
        assert!(write_atomic(&target, b"x").is_err());
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, vec!["report.json".to_owned()], "no *.tmp is left");
        let failed_fill = write_atomic_with(&dir.path().join("kiln.prom"), |_| {
            Err(std::io::Error::other("no space left on device"))
        });
        assert!(failed_fill.is_err());
        assert!(!dir.path().join("kiln.prom.tmp").exists());
        write_atomic(&dir.path().join("kiln.prom"), b"ok").unwrap();
        assert_eq!(std::fs::read(dir.path().join("kiln.prom")).unwrap(), b"ok");
        write_atomic(&dir.path().join("kiln.prom"), b"again").unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("kiln.prom")).unwrap(),
            b"again"
        );
    }
}
