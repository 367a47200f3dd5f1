//! The outputs rendered from the verdict's result model (`crate::verdict::Report`):
//! `report.json`, the HTML report, JUnit XML, Prometheus metrics, the terminal summary
//! and the RMA bundle. Rendering only: every result is decided by the verdict.

pub mod html;
mod html_charts;
pub mod junit;
pub mod pdf;
pub mod prometheus;
pub mod rma;
pub mod terminal;

use crate::verdict::{Report, RunEvidence};

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

/// A finding's evidence as labelled rows for people: keys said in words, offsets and
/// addresses in hex, counts as integers, a list's repeats said once with their count, and
/// nested objects flattened under their key. The JSON itself stays in report.json.
pub fn evidence_rows(evidence: &serde_json::Value) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    flatten(None, evidence, &mut rows);
    rows
}

fn flatten(key: Option<&str>, value: &serde_json::Value, rows: &mut Vec<(String, String)>) {
    use serde_json::Value;
    let label = |k: &str| {
        let words = k.replace('_', " ");
        let mut chars = words.chars();
        chars
            .next()
            .map(|c| c.to_uppercase().chain(chars).collect::<String>())
            .unwrap_or_default()
    };
    match (key, value) {
        (_, Value::Null) => {}
        (prefix, Value::Object(map)) => {
            for (k, v) in map {
                let k = match prefix {
                    Some(p) => format!("{p} {k}"),
                    None => k.clone(),
                };
                flatten(Some(&k), v, rows);
            }
        }
        (Some(k), Value::Array(items)) if items.iter().all(|v| !v.is_object()) => {
            let said: Vec<String> = items.iter().map(|v| scalar(k, v)).collect();
            rows.push((label(k), runs_said(&said)));
        }
        (Some(k), Value::Array(items)) => {
            for (i, v) in items.iter().enumerate() {
                flatten(Some(&format!("{k} {}", i + 1)), v, rows);
            }
        }
        (Some(k), v) => rows.push((label(k), scalar(k, v))),
        (None, v) => rows.push((String::new(), scalar("", v))),
    }
}

/// One value: an offset or address in hex, a whole number without decimals.
fn scalar(key: &str, value: &serde_json::Value) -> String {
    use serde_json::Value;
    // Places and bit masks in hex, as the tables show them; a count of address faults
    // (`address`) stays a count.
    let located = ["offset", "offsets", "offset_bytes", "mask", "masks"]
        .iter()
        .any(|w| key.ends_with(w));
    match value {
        Value::Number(n) => match n.as_u64() {
            Some(u) if located => format!("0x{u:x}"),
            Some(u) => u.to_string(),
            None => match n.as_f64() {
                Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{f:.0}"),
                Some(f) => crate::units::significant(f),
                None => n.to_string(),
            },
        },
        Value::String(s) => s.clone(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.into(),
        Value::Array(items) => runs_said(&items.iter().map(|v| scalar(key, v)).collect::<Vec<_>>()),
        other => other.to_string(),
    }
}

/// Items listed once each, repeats counted: `0xfa0 (8 times), 0x1000`.
fn runs_said(items: &[String]) -> String {
    let mut said: Vec<(String, usize)> = Vec::new();
    for item in items {
        match said.iter_mut().find(|(s, _)| s == item) {
            Some((_, n)) => *n += 1,
            None => said.push((item.clone(), 1)),
        }
    }
    said.into_iter()
        .map(|(s, n)| if n > 1 { format!("{s} ({n} times)") } else { s })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod evidence_tests {
    use super::evidence_rows;

    #[test]
    fn evidence_reads_as_labelled_rows_in_hex_with_repeats_said_once() {
        let rows = evidence_rows(&serde_json::json!({
            "first_offsets": [4000, 4000, 4000, 8192],
            "errors": 89,
            "found_in_runs": 4,
            "rate_gbps": 12.3456,
            "link": {"width": 16.0},
            "address": 2,
            "stuck": true
        }));
        let said = |label: &str| {
            rows.iter()
                .find(|(l, _)| l == label)
                .map(|(_, v)| v.as_str())
                .unwrap_or("absent")
        };
        assert_eq!(said("First offsets"), "0xfa0 (3 times), 0x2000");
        assert_eq!(said("Errors"), "89");
        assert_eq!(said("Found in runs"), "4");
        assert_eq!(said("Rate gbps"), "12.3");
        assert_eq!(said("Link width"), "16");
        assert_eq!(said("Stuck"), "yes");
        assert_eq!(said("Address"), "2", "a count of address faults is a count");
    }
}
