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
    crate::fsutil::write_atomic_with(&path, |file| {
        let mut builder = tar::Builder::new(file);
        let mut sums = String::new();
        for file in FILES {
            let source = run_dir.join(file);
            let Ok(bytes) = std::fs::read(&source) else {
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
}
