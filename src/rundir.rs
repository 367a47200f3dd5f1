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
    Event, EventLog, EvidenceError, EvidenceFile, Manifest, read_events, read_jsonl, read_manifest,
};
use crate::fsutil::FileError;
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

/// An evidence file the run wrote that holds no evidence now, and how it was lost.
#[derive(Debug, Clone, PartialEq)]
pub struct LostEvidence {
    /// The file, as the manifest lists it.
    pub file: EvidenceFile,
    /// How it was lost.
    pub how: Lost,
}

/// How an evidence file was lost. Each is evidence missing, never a part that found
/// nothing: a telemetry file emptied or replaced by `/dev/zero` must not read as a card
/// with nothing to say.
#[derive(Debug, Clone, PartialEq)]
pub enum Lost {
    /// Not in the run directory.
    Absent,
    /// Something other than a file in its place (`a FIFO`, `a device`, `a directory`):
    /// never opened.
    NotAFile(&'static str),
    /// There, but it cannot be read (a symlink loop, no permission): what the system said.
    Unreadable(String),
    /// A file with no record in it, where the run writes a header first.
    Empty,
    /// The telemetry of a finished run whose workloads ran, with none of the counters the
    /// sidecar reads around every phase: cut short after its first lines.
    CutShort,
}

impl LostEvidence {
    /// What is in the file's place, in a few words (`a FIFO`, `an empty file`).
    pub fn found(&self) -> String {
        match &self.how {
            Lost::Absent => "nothing".into(),
            Lost::NotAFile(what) => (*what).into(),
            Lost::Unreadable(why) => why.clone(),
            Lost::Empty => "an empty file".into(),
            Lost::CutShort => "a file with no phase's counters".into(),
        }
    }

    /// What became of the file, as the rest of a sentence that starts with its name.
    pub fn said(&self) -> String {
        match &self.how {
            Lost::Absent => "is missing from the run directory".into(),
            Lost::NotAFile(what) => format!("is {what}, not the file the run wrote"),
            Lost::Unreadable(why) => format!("cannot be read ({why})"),
            Lost::Empty => "is empty: its records were removed".into(),
            Lost::CutShort => {
                "is cut short: it holds none of the counters read around the phases the run ran"
                    .into()
            }
        }
    }
}

/// How the evidence file `file` of the run directory `dir` stands: None where it is a
/// regular file (its records are checked as they are read).
fn lost(dir: &Path, file: EvidenceFile) -> Option<Lost> {
    let path = dir.join(file.file_name());
    if std::fs::symlink_metadata(&path).is_err() {
        return Some(Lost::Absent);
    }
    match crate::fsutil::check_regular(&path) {
        Ok(()) => None,
        Err(FileError::NotAFile { what, .. }) => Some(Lost::NotAFile(what)),
        Err(e) => Some(Lost::Unreadable(match e {
            FileError::Io { message, .. } => message,
            other => other.to_string(),
        })),
    }
}

/// Whether `missing` holds the evidence file `file`.
fn is_lost(missing: &[LostEvidence], file: EvidenceFile) -> bool {
    missing.iter().any(|l| l.file == file)
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
    /// The evidence files the run wrote that cannot be read as evidence: gone, something
    /// other than a file in their place, unreadable, or emptied.
    pub missing: Vec<LostEvidence>,
    /// `events.jsonl`.
    pub log: EventLog,
    /// `telemetry.jsonl`'s records (none where the run read no telemetry).
    pub telemetry: Vec<TelemetryRecord>,
    /// The watched application's allocation trace, for a watch that traced it.
    pub trace: Option<Trace>,
}

/// Reads `telemetry.jsonl`: its records, the first of them the header the sidecar writes
/// before anything else (a file that starts otherwise is not the sidecar's).
fn read_telemetry(path: &Path) -> Result<Vec<TelemetryRecord>, EvidenceError> {
    let (records, _) = read_jsonl::<TelemetryRecord>(path)?;
    match records.first().map(|r| &r.data) {
        None | Some(TelemetryData::Header { .. }) => Ok(records),
        Some(_) => Err(EvidenceError::File(FileError::Corrupt {
            path: path.to_owned(),
            line: 1,
            message: "the first line is not a kiln telemetry header".into(),
        })),
    }
}

impl RunEvidence {
    /// Reads the run directory `dir`. A torn last line (a crash while writing) is tolerated;
    /// a damaged line before it is a corrupt file, said with its line, never skipped.
    pub fn read(dir: &Path) -> Result<RunEvidence, RunDirError> {
        let manifest_path = dir.join("manifest.json");
        // A manifest that is there but not a file is named by the reader, never taken for
        // a directory that is no run's.
        if std::fs::symlink_metadata(&manifest_path).is_err() {
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
        // Evidence the run wrote that is not there, or not a file, is named, never read as
        // a part that found nothing (a missing file reads as no records).
        let mut missing: Vec<LostEvidence> = manifest
            .evidence_files()
            .into_iter()
            .filter_map(|file| lost(dir, file).map(|how| LostEvidence { file, how }))
            .collect();
        let events_path = dir.join(EvidenceFile::Events.file_name());
        let log = if is_lost(&missing, EvidenceFile::Events) || !events_path.is_file() {
            EventLog::default()
        } else {
            read_events(&events_path)?
        };
        if log.records.is_empty() && !log.truncated_tail && !is_lost(&missing, EvidenceFile::Events)
        {
            missing.push(LostEvidence {
                file: EvidenceFile::Events,
                how: Lost::Empty,
            });
        }
        let telemetry_path = dir.join(EvidenceFile::Telemetry.file_name());
        let telemetry = if is_lost(&missing, EvidenceFile::Telemetry) || !telemetry_path.is_file() {
            Vec::new()
        } else {
            read_telemetry(&telemetry_path)?
        };
        if manifest.evidence_files().contains(&EvidenceFile::Telemetry)
            && !is_lost(&missing, EvidenceFile::Telemetry)
        {
            // The sidecar snapshots the counters around every phase: a finished run whose
            // workloads ran and whose telemetry holds none was cut after its first lines.
            let ran = log
                .records
                .iter()
                .any(|r| matches!(r.event, Event::WorkloadEnd { .. }));
            let finished = log
                .records
                .iter()
                .any(|r| matches!(r.event, Event::RunEnd { .. }));
            let snapshots = telemetry
                .iter()
                .any(|r| matches!(r.data, TelemetryData::Snapshot { .. }));
            let how = if telemetry.is_empty() {
                Some(Lost::Empty)
            } else if ran && finished && !snapshots {
                Some(Lost::CutShort)
            } else {
                None
            };
            if let Some(how) = how {
                missing.push(LostEvidence {
                    file: EvidenceFile::Telemetry,
                    how,
                });
            }
        }
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

    /// Whether the evidence file `file` was lost.
    pub fn lost(&self, file: EvidenceFile) -> bool {
        is_lost(&self.missing, file)
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
