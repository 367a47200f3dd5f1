//! File-system helpers below every layer that reads or writes files: the one atomic
//! write, the one reader of a file a user or a run names (a regular file, never a FIFO or
//! a device), and the one JSON-lines reader.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Why a file could not be read or written, or is not what kiln wrote: the one file
/// error, which the evidence module's errors wrap.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file could not be read or written: `no such file: PATH`.
    #[error("{message}: {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said, in words ([`crate::text::io_words`]).
        message: String,
    },
    /// A file kiln reads whole (no lines to number) is not one kiln writes.
    #[error("{}: {message}", path.display())]
    NotKilns {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Where a file is expected, something else is: a FIFO, a device, a socket or a
    /// directory. Never opened: a FIFO's open waits for a writer that may never come, and a
    /// device such as `/dev/zero` never ends.
    #[error("{}: {what}, not a file", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What is there, in words (`a FIFO`).
        what: &'static str,
    },
    /// A complete line is not a record of the expected type.
    #[error("{}, line {line}: {message}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// Checks that `path` names a regular file (through any symlinks), without opening it:
/// a FIFO, a device, a socket or a directory is [`FileError::NotAFile`], a missing file or
/// a symlink loop [`FileError::Io`] with what the system said.
pub fn check_regular(path: &Path) -> Result<(), FileError> {
    let meta = std::fs::metadata(path).map_err(|e| FileError::Io {
        path: path.to_owned(),
        message: crate::text::io_words(&e),
    })?;
    if meta.is_file() {
        return Ok(());
    }
    let what = if meta.is_dir() {
        "a directory"
    } else {
        crate::platform::files::special_kind(&meta.file_type())
    };
    Err(FileError::NotAFile {
        path: path.to_owned(),
        what,
    })
}

/// Reads the regular file `path` whole ([`check_regular`] first), so that a path a user
/// or a run directory gives can never block kiln or feed it without end.
pub fn read_regular(path: &Path) -> Result<Vec<u8>, FileError> {
    check_regular(path)?;
    std::fs::read(path).map_err(|e| FileError::Io {
        path: path.to_owned(),
        message: crate::text::io_words(&e),
    })
}

/// As [`read_regular`], as text: bytes that are not UTF-8 are said so.
pub fn read_regular_text(path: &Path) -> Result<String, FileError> {
    String::from_utf8(read_regular(path)?).map_err(|_| FileError::NotKilns {
        path: path.to_owned(),
        message: "not text (it is not UTF-8)".into(),
    })
}

/// Reads a JSON-lines file of `T`: every complete line must parse; a partial last line
/// (a writer killed mid-record) is skipped and reported as the second value.
pub fn read_jsonl<T: serde::de::DeserializeOwned>(
    path: &Path,
) -> Result<(Vec<T>, bool), FileError> {
    let bytes = read_regular(path)?;
    let truncated_tail = !bytes.is_empty() && !bytes.ends_with(b"\n");
    let complete = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(end) => &bytes[..end],
        None => &bytes[..0],
    };
    let mut records = Vec::new();
    if !complete.is_empty() {
        for (i, line) in complete.split(|&b| b == b'\n').enumerate() {
            let corrupt = |e: serde_json::Error| FileError::Corrupt {
                path: path.to_owned(),
                line: i + 1,
                message: e.to_string(),
            };
            // Only a line that escapes a character (`\n`, `\u001b`) or holds one of the
            // three-byte characters the separators and overrides are can carry one that
            // acts: the rest is read as it is, at full speed.
            let record: T = if line.iter().any(|&b| b == b'\\' || b == 0xe2) {
                let mut value: serde_json::Value = serde_json::from_slice(line).map_err(corrupt)?;
                printable_strings(&mut value);
                serde_json::from_value(value).map_err(corrupt)?
            } else {
                serde_json::from_slice(line).map_err(corrupt)?
            };
            records.push(record);
        }
    }
    Ok((records, truncated_tail))
}

/// Makes every string in `value` printable ([`crate::text::printable`]): text read from
/// evidence (a host, a GPU, a process, a kernel-log line) is data, and whatever it holds
/// that could act (a newline that would start a line a script takes for kiln's, a
/// terminal's escape) is escaped once, where it is read, for every output after.
pub fn printable_strings(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(s) => {
            if let std::borrow::Cow::Owned(shown) = crate::text::printable(s) {
                *s = shown;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(printable_strings),
        serde_json::Value::Object(fields) => {
            let keys: Vec<String> = fields.keys().cloned().collect();
            for key in keys {
                if let Some(v) = fields.get_mut(&key) {
                    printable_strings(v);
                }
                if let std::borrow::Cow::Owned(shown) = crate::text::printable(&key)
                    && let Some(v) = fields.remove(&key)
                {
                    fields.insert(shown, v);
                }
            }
        }
        _ => {}
    }
}

/// Writes `bytes` to `path` atomically: a temporary file beside it, synced, then renamed
/// over it, so a reader sees the old file or the new one, never half of one. The temporary
/// name is this writer's own ([`temporary_beside`]), so two writers of one file (two
/// processes, two threads) never write into each other's. A failure (a full disk) removes
/// the temporary file rather than leave it behind.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// As [`write_atomic`], with the content written by `fill`. After the rename the directory
/// is synced too (best effort), so that the new name survives a crash.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let tmp = temporary_beside(path);
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        fill(&mut f)?;
        f.sync_all()?;
        crate::platform::files::replace(&tmp, path)
    };
    write().inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })?;
    crate::platform::files::sync_dir(path.parent());
    Ok(())
}

/// A temporary name beside `path` that no other writer uses: `<name>.<pid>-<n>.tmp`, with
/// the process id and a count of this process's temporary files. It ends in `.tmp`, so a
/// reader that takes files by their suffix (node_exporter takes `*.prom`) never reads one.
pub fn temporary_beside(path: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(format!(
        ".{}-{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_in_a_record_that_could_act_is_escaped_as_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("names.jsonl");
        std::fs::write(
            &path,
            "{\"host\":\"slow-node\\nbehind the fleet: victim-node\",\"gpu\":\"\\u001b[2JH200\"}\n{\"host\":\"plain\",\"gpu\":\"C:\\\\ok\u{2013}\"}\n",
        )
        .unwrap();
        let (records, _) = read_jsonl::<std::collections::BTreeMap<String, String>>(&path).unwrap();
        assert_eq!(
            records[0]["host"],
            "slow-node\\nbehind the fleet: victim-node"
        );
        assert_eq!(records[0]["gpu"], "\\u{1b}[2JH200");
        assert_eq!(records[1]["host"], "plain");
        assert_eq!(
            records[1]["gpu"], "C:\\ok\u{2013}",
            "a backslash and a dash stay"
        );
    }

    #[test]
    fn a_jsonl_file_reads_to_its_last_complete_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("numbers.jsonl");
        std::fs::write(&path, "1\n2\n3").unwrap();
        assert_eq!(read_jsonl::<u32>(&path).unwrap(), (vec![1, 2], true));
        std::fs::write(&path, "1\nx\n").unwrap();
        let err = read_jsonl::<u32>(&path).unwrap_err();
        assert!(matches!(err, FileError::Corrupt { line: 2, .. }), "{err}");
        let missing = read_jsonl::<u32>(&dir.path().join("none.jsonl")).unwrap_err();
        assert!(matches!(missing, FileError::Io { .. }), "{missing}");
    }

    #[test]
    fn only_a_regular_file_is_read_and_anything_else_is_named_unopened() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.toml");
        std::fs::write(&file, "x = 1").unwrap();
        assert_eq!(read_regular_text(&file).unwrap(), "x = 1");
        let err = read_regular(dir.path()).unwrap_err();
        assert!(
            err.to_string().ends_with(": a directory, not a file"),
            "{err}"
        );
        let missing = read_regular(&dir.path().join("none")).unwrap_err();
        assert!(matches!(missing, FileError::Io { .. }), "{missing}");
        #[cfg(unix)]
        {
            // A FIFO would block the open until a writer came: refused before it.
            let fifo = dir.path().join("p.fifo");
            let made = std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap();
            assert!(made.success());
            let err = read_regular(&fifo).unwrap_err();
            assert!(err.to_string().ends_with(": a FIFO, not a file"), "{err}");
            let zero = dir.path().join("zero");
            std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
            let err = read_jsonl::<u32>(&zero).unwrap_err();
            assert!(err.to_string().ends_with(": a device, not a file"), "{err}");
            let looped = dir.path().join("loop");
            std::os::unix::fs::symlink(&looped, &looped).unwrap();
            let err = read_regular(&looped).unwrap_err();
            assert!(err.to_string().contains("symbolic links"), "{err}");
        }
        std::fs::write(&file, [0xff, 0xfe]).unwrap();
        let err = read_regular_text(&file).unwrap_err();
        assert!(
            err.to_string().ends_with("not text (it is not UTF-8)"),
            "{err}"
        );
    }

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
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "only report.json: no temporary file is left"
        );
        write_atomic(&dir.path().join("kiln.prom"), b"ok").unwrap();
        assert_eq!(std::fs::read(dir.path().join("kiln.prom")).unwrap(), b"ok");
        write_atomic(&dir.path().join("kiln.prom"), b"again").unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("kiln.prom")).unwrap(),
            b"again"
        );
    }

    #[test]
    fn writers_of_one_file_never_share_a_temporary_file() {
        // Two runs (or threads) replacing one file at the same moment: each writes its own
        // temporary file, so the file ends as one writer's bytes whole, never a mix.
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("manifest.json");
        let a = temporary_beside(&target);
        let b = temporary_beside(&target);
        assert_ne!(a, b);
        assert!(a.to_string_lossy().ends_with(".tmp"), "{}", a.display());
        let writers: Vec<Vec<u8>> = (0..8u8).map(|i| vec![b'a' + i; 64 * 1024]).collect();
        let barrier = std::sync::Barrier::new(writers.len());
        std::thread::scope(|s| {
            for bytes in &writers {
                let (target, barrier) = (&target, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    for _ in 0..20 {
                        write_atomic(target, bytes).unwrap();
                    }
                });
            }
        });
        let written = std::fs::read(&target).unwrap();
        assert!(writers.contains(&written), "the file is one writer's whole");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
