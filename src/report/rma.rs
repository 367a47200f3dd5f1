//! The RMA bundle: one archive a vendor's support desk can take as it is: the report page,
//! the report, the raw evidence, and a SHA-256 manifest of every file in it.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The evidence files a bundle carries, when the run directory has them.
const FILES: [&str; 8] = [
    "report.html",
    "report.pdf",
    "report.json",
    "manifest.json",
    "events.jsonl",
    "telemetry.jsonl",
    "junit.xml",
    "kiln.prom",
];

/// Hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes `<run dir name>-rma.tar` beside the run directory (or at `out`), holding the
/// evidence files and `SHA256SUMS` under one folder. `SHA256SUMS` names the files
/// relative to that folder, so that `sha256sum -c SHA256SUMS` run inside the unpacked
/// folder checks them, as a support desk would. Returns its path.
pub fn bundle(run_dir: &Path, out: Option<&Path>) -> std::io::Result<PathBuf> {
    let name = run_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "kiln-run".into());
    let path = match out {
        Some(p) => p.to_owned(),
        None => run_dir.with_file_name(format!("{name}-rma.tar")),
    };
    // A file already there is replaced only where it is this run's bundle (written again):
    // any other file is someone's, and kiln never overwrites it.
    if path.exists() && !is_bundle_of(&path, &name) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!(
                "{} already exists and is not this run's bundle: name another file with --bundle",
                path.display()
            ),
        ));
    }
    crate::fsutil::write_atomic_with(&path, |file| {
        let mut builder = tar::Builder::new(file);
        let mut sums = String::new();
        for file in FILES {
            let source = run_dir.join(file);
            // What is not a regular file is no evidence (the verdict said it missing),
            // and a FIFO would hold the bundle for ever.
            let Ok(bytes) = crate::fsutil::read_regular(&source) else {
                continue;
            };
            sums.push_str(&format!("{}  {file}\n", sha256_hex(&bytes)));
            append(&mut builder, &format!("{name}/{file}"), &bytes)?;
        }
        append(&mut builder, &format!("{name}/SHA256SUMS"), sums.as_bytes())?;
        builder.into_inner().map(|_| ())
    })?;
    Ok(path)
}

/// Whether the file at `path` is a bundle of the run `name`: a tar whose first entry lies
/// in the run's folder.
fn is_bundle_of(path: &Path, name: &str) -> bool {
    if crate::fsutil::check_regular(path).is_err() {
        return false;
    }
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let mut archive = tar::Archive::new(file);
    let Ok(mut entries) = archive.entries() else {
        return false;
    };
    entries
        .next()
        .and_then(Result::ok)
        .and_then(|e| e.path().ok().map(|p| p.starts_with(name)))
        .unwrap_or(false)
}

fn append(
    builder: &mut tar::Builder<&mut std::fs::File>,
    path: &str,
    bytes: &[u8],
) -> std::io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(bytes.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    );
    header.set_cksum();
    builder.append_data(&mut header, path, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_matches_the_standard_vector() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_bundle_replaces_its_own_run_s_bundle_and_never_another_file() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run-7");
        std::fs::create_dir(&run).unwrap();
        std::fs::write(run.join("report.json"), "{}").unwrap();
        // Written, then written again over itself.
        let path = bundle(&run, None).unwrap();
        assert_eq!(bundle(&run, None).unwrap(), path);
        // Another file named as the bundle is left as it was.
        let notes = dir.path().join("notes.txt");
        std::fs::write(&notes, "mine").unwrap();
        let e = bundle(&run, Some(&notes)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        assert!(e.to_string().contains("is not this run's bundle"), "{e}");
        assert_eq!(std::fs::read_to_string(&notes).unwrap(), "mine");
        // Another run's bundle is someone else's too.
        let other = dir.path().join("run-8");
        std::fs::create_dir(&other).unwrap();
        assert!(bundle(&other, Some(&path)).is_err());
    }
}
