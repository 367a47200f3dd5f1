//! The outputs rendered from the verdict's result model (`crate::verdict::Report`):
//! `report.json`, the HTML report, JUnit XML, Prometheus metrics, the terminal summary
//! and the RMA bundle. Rendering only: every result is decided by the verdict.

pub mod html;
pub mod junit;
pub mod prometheus;
pub mod rma;
pub mod text;

use crate::verdict::Report;

/// Writes every report file into the run directory: `report.json`, `report.html`,
/// `junit.xml` and `kiln.prom` (for node_exporter's textfile collector), each atomically.
/// Returns the first failure.
pub fn write_all(dir: &std::path::Path, report: &Report) -> std::io::Result<()> {
    crate::evidence::write_json_atomic(&dir.join("report.json"), report)
        .map_err(std::io::Error::other)?;
    let telemetry = crate::evidence::read_jsonl::<crate::telemetry::record::TelemetryRecord>(
        &dir.join("telemetry.jsonl"),
    )
    .map(|(records, _)| records)
    .unwrap_or_default();
    crate::fsutil::write_atomic(
        &dir.join("report.html"),
        html::render(report, &telemetry).as_bytes(),
    )?;
    crate::fsutil::write_atomic(&dir.join("junit.xml"), junit::render(report).as_bytes())?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    crate::fsutil::write_atomic(
        &dir.join("kiln.prom"),
        prometheus::render(report, now).as_bytes(),
    )
}
