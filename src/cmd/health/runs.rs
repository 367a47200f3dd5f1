//! The full runs `kiln health` reads, as the typed reports their verdicts wrote: the last
//! one's age and result, and the passes that clear open faults.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::evidence::parse_utc_timestamp;
use crate::verdict::{DeviceResult, Report};

/// A full run as the check reads it: its directory's name, when it started, how old it is
/// and its report.
pub(super) struct Run {
    pub(super) id: String,
    pub(super) started_utc: String,
    pub(super) age: Duration,
    pub(super) report: Report,
}

impl Run {
    /// The keys of the GPUs that passed in it: `GPU-<uuid>` and the PCI address, lower
    /// case, as the state file keys them.
    pub(super) fn passed_gpus(&self) -> Vec<String> {
        self.report
            .devices
            .iter()
            .filter(|d| d.result == DeviceResult::Pass)
            .flat_map(|d| {
                let uuid = (!d.uuid.is_empty()).then(|| format!("GPU-{}", d.uuid));
                uuid.into_iter().chain(d.pci_address.clone())
            })
            .map(|k| k.to_ascii_lowercase())
            .collect()
    }
}

/// The run in `dir`: `Ok(None)` where `dir` holds no finished run (no report yet, or not a
/// run directory at all), an error naming the file where its report cannot be read.
fn read_run(dir: &Path) -> Result<Option<Run>, String> {
    let path = dir.join("report.json");
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    // A regular file only: a FIFO in its place would hold the check for ever.
    let bytes =
        crate::fsutil::read_regular(&path).map_err(|e| format!("{e}: that run is left out"))?;
    let report: Report = serde_json::from_slice(&bytes).map_err(|e| {
        format!(
            "{} could not be read ({e}): that run is left out",
            path.display()
        )
    })?;
    let age = parse_utc_timestamp(&report.started_utc)
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .unwrap_or_default();
    Ok(Some(Run {
        id: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        started_utc: report.started_utc.clone(),
        age,
        report,
    }))
}

/// Every finished run in `runs`, and a sentence for each whose report could not be read.
pub(super) fn all(runs: &Path) -> (Vec<Run>, Vec<String>) {
    let mut found = Vec::new();
    let mut unreadable = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(runs)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        match read_run(&dir) {
            Ok(Some(run)) => found.push(run),
            Ok(None) => {}
            Err(why) => unreadable.push(why),
        }
    }
    (found, unreadable)
}

/// The full run that started last (by when it started, not by when a file was last
/// written: rebuilding an old run's report must not make it the latest).
pub(super) fn last(runs: &[Run]) -> Option<&Run> {
    runs.iter().max_by(|a, b| a.started_utc.cmp(&b.started_utc))
}
