//! The outputs rendered from the verdict's result model (`crate::verdict::Report`):
//! `report.json`, the HTML report, JUnit XML, Prometheus metrics, the terminal summary
//! and the RMA bundle. Rendering only: every result is decided by the verdict.

pub mod html;
mod html_card;
mod html_charts;
pub mod junit;
pub mod pdf;
pub mod prometheus;
pub mod rma;
pub mod terminal;

use crate::rundir::RunEvidence;
use crate::verdict::Report;

/// Writes every report file into the run directory the evidence was read from:
/// `report.json`, `report.html`, `junit.xml` and `kiln.prom` (for node_exporter's
/// textfile collector), each atomically. The evidence gives the page its telemetry, host
/// and command line and the metrics their profile, as the verdict read them (no file is
/// read again here).
/// Returns the first failure.
pub fn write_all(evidence: &RunEvidence, report: &Report) -> std::io::Result<()> {
    let dir = &evidence.dir;
    crate::evidence::write_json_atomic(&dir.join("report.json"), report)
        .map_err(std::io::Error::other)?;
    let manifest = Some(&evidence.manifest);
    crate::fsutil::write_atomic(
        &dir.join("report.html"),
        html::render(report, &evidence.telemetry, manifest).as_bytes(),
    )?;
    crate::fsutil::write_atomic(&dir.join("junit.xml"), junit::render(report)?.as_bytes())?;
    crate::fsutil::write_atomic(
        &dir.join(METRICS_FILE),
        prometheus::render(report, &metrics_context(report, manifest)).as_bytes(),
    )
}

/// The metrics file of a run directory, under the name node_exporter's textfile collector
/// reads.
pub const METRICS_FILE: &str = "kiln.prom";

/// What the metrics carry beside the report: the run's own end (a rebuilt report keeps
/// it) and its profile, from the manifest.
fn metrics_context(
    report: &Report,
    manifest: Option<&crate::evidence::Manifest>,
) -> prometheus::Context {
    let ended = crate::evidence::parse_utc_timestamp(&report.finished_utc)
        .unwrap_or_else(std::time::SystemTime::now);
    let profile = manifest
        .and_then(|m| m.settings.profile.clone())
        .unwrap_or_default();
    prometheus::Context {
        run_unix_seconds: ended
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        profile,
    }
}

/// Whether `dir` can be node_exporter's textfile directory; checked before a run, so that
/// one that cannot take the metrics is said at once, not hours later.
pub fn check_textfile_dir(dir: &std::path::Path) -> Result<(), String> {
    if dir.is_dir() {
        Ok(())
    } else {
        Err(format!(
            "--textfile-dir {}: not a directory (give node_exporter's --collector.textfile.directory)",
            dir.display()
        ))
    }
}

/// Puts a metrics file into node_exporter's textfile directory under `name`, atomically
/// (the collector reads only `*.prom`, so the temporary `kiln.prom.<pid>-<n>.tmp` is never
/// half-read). The directory was checked before ([`check_textfile_dir`]); one gone since
/// fails the write, said with its path.
pub fn publish_metrics(
    textfile_dir: &std::path::Path,
    name: &str,
    text: &[u8],
) -> Result<std::path::PathBuf, String> {
    let path = textfile_dir.join(name);
    crate::fsutil::write_atomic(&path, text)
        .map_err(|e| format!("{}: the metrics could not be written: {e}", path.display()))?;
    Ok(path)
}
