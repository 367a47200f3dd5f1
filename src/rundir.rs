//! A run directory read once: its manifest (its plan typed here, one floor above the
//! evidence, which sits below the workloads it records), events, telemetry and the watched
//! application's trace, each file checked as it is read. The verdict, the reports, `kiln
//! compare` and `kiln baseline` all take what this read; none of them reads a file of the
//! run again, so a damaged file is the one named error everywhere, never an empty default
//! in one place and a stop in another.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::evidence::trace::Trace;
use crate::evidence::{
    EventLog, EvidenceError, EvidenceFile, Manifest, read_events, read_jsonl, read_manifest,
};
use crate::telemetry::record::{TelemetryData, TelemetryRecord};
use crate::workload::registry::PlannedWorkload;

/// Why a run directory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    /// The path does not exist.
    #[error("{0} does not exist: not a kiln run directory")]
    NoSuchDir(String),
    /// The path is a file, not a run directory.
    #[error(
        "{0} is a file, not a kiln run directory (give the directory that holds its manifest.json)"
    )]
    NotADir(String),
    /// The directory is not a kiln run directory.
    #[error("{0} is not a kiln run directory (no manifest.json)")]
    NotARunDir(String),
    /// A file is unreadable or not what kiln wrote.
    #[error(transparent)]
    Evidence(#[from] EvidenceError),
}

/// Everything a run directory holds as evidence.
#[derive(Debug)]
pub struct RunEvidence {
    /// The run directory.
    pub dir: PathBuf,
    /// `manifest.json`.
    pub manifest: Manifest,
    /// The workloads the run planned for every device, typed from the manifest's plan;
    /// None where the manifest does not say, or says it in a form this kiln cannot read
    /// (a newer kiln's workload), so that nothing is judged missing on a guess.
    pub plan: Option<Vec<PlannedWorkload>>,
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
    pub fn read(dir: &Path) -> Result<RunEvidence, RunDirError> {
        let manifest_path = dir.join("manifest.json");
        if !manifest_path.is_file() {
            let shown = dir.display().to_string();
            return Err(if !dir.exists() {
                RunDirError::NoSuchDir(shown)
            } else if !dir.is_dir() {
                RunDirError::NotADir(shown)
            } else {
                RunDirError::NotARunDir(shown)
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
        let plan = manifest
            .settings
            .plan
            .clone()
            .and_then(|p| serde_json::from_value(p).ok());
        Ok(RunEvidence {
            dir: dir.to_owned(),
            manifest,
            plan,
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
