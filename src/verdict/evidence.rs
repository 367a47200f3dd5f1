//! A run directory read once: its manifest, events, telemetry and the watched
//! application's trace, each file checked as it is read. The verdict, the reports and `kiln
//! compare` all take what this read; none of them reads a file of the run again, so a
//! damaged file is the one named error everywhere, never an empty default in one place and
//! a stop in another.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::VerdictError;
use crate::evidence::trace::Trace;
use crate::evidence::{EventLog, EvidenceFile, Manifest, read_events, read_jsonl, read_manifest};
use crate::telemetry::record::{TelemetryData, TelemetryRecord};

/// Everything a run directory holds as evidence.
#[derive(Debug)]
pub struct RunEvidence {
    /// The run directory.
    pub dir: PathBuf,
    /// `manifest.json`.
    pub manifest: Manifest,
    /// The evidence files the run wrote that are not in its directory.
    pub missing: Vec<EvidenceFile>,
    /// `events.jsonl`.
    pub log: EventLog,
    /// `telemetry.jsonl`'s records (none where the run read no telemetry).
    pub telemetry: Vec<TelemetryRecord>,
    /// The watched application's allocation trace, for a watch that traced it.
    pub trace: Option<Trace>,
}

impl RunEvidence {
    /// Reads the run directory `dir`. A torn last line (a crash while writing) is tolerated;
    /// a damaged line before it is a corrupt file, said with its line, never skipped.
    pub fn read(dir: &Path) -> Result<RunEvidence, VerdictError> {
        let manifest_path = dir.join("manifest.json");
        if !manifest_path.is_file() {
            let shown = dir.display().to_string();
            return Err(if !dir.exists() {
                VerdictError::NoSuchDir(shown)
            } else if !dir.is_dir() {
                VerdictError::NotADir(shown)
            } else {
                VerdictError::NotARunDir(shown)
            });
        }
        let manifest = read_manifest(&manifest_path)?;
        // Evidence the run wrote that is not there is named, never read as a part that
        // found nothing (a missing file reads as no records).
        let missing: Vec<EvidenceFile> = manifest
            .evidence_files()
            .into_iter()
            .filter(|f| !dir.join(f.file_name()).exists())
            .collect();
        let log = read_events(&dir.join(EvidenceFile::Events.file_name()))?;
        let telemetry_path = dir.join(EvidenceFile::Telemetry.file_name());
        let telemetry = if telemetry_path.is_file() {
            read_jsonl::<TelemetryRecord>(&telemetry_path)?.0
        } else {
            Vec::new()
        };
        let trace = if manifest.settings.watch.is_some() {
            crate::evidence::trace::read_trace(dir)?
        } else {
            None
        };
        Ok(RunEvidence {
            dir: dir.to_owned(),
            manifest,
            missing,
            log,
            telemetry,
            trace,
        })
    }

    /// Each device's last snapshot of counters, by device index.
    pub fn last_counters(&self) -> BTreeMap<usize, BTreeMap<String, f64>> {
        let mut out: BTreeMap<usize, BTreeMap<String, f64>> = BTreeMap::new();
        for r in &self.telemetry {
            if let (Some(d), TelemetryData::Snapshot { counters, .. }) = (r.device, &r.data) {
                let entry = out.entry(d).or_default();
                for (k, v) in counters {
                    if let Some(n) = v.number() {
                        entry.insert(k.clone(), n);
                    }
                }
            }
        }
        out
    }
}
