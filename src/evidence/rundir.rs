//! Creating a run directory and describing the run in its manifest.

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::reader::check_schema;
use super::records::MANIFEST_SCHEMA;
use super::writer::{EventWriter, write_json_atomic};
use super::{EvidenceError, EvidenceResult};
use crate::gpu::DeviceInfo;

/// What a run was: written first, so even a run killed at once says what it was.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    /// `MANIFEST_SCHEMA`.
    pub schema: String,
    /// kiln's version.
    pub tool_version: String,
    /// The command line, argument by argument.
    pub command_line: Vec<String>,
    /// Host name.
    pub host: String,
    /// UTC start time, RFC 3339.
    pub started_utc: String,
    /// Devices selected for testing, with identity.
    pub devices: Vec<DeviceInfo>,
    /// The settings the run used.
    pub settings: RunSettings,
    /// True when no GPU was selected and the CPU Vulkan device ran the job in a GPU's
    /// place: that proves the tool, not a card, and the run's result is "could not test".
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stand_in: bool,
    /// GPUs the machine has (NVML, sysfs) that Vulkan cannot see, each with the most likely
    /// cause: not tested, and named so in every report.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_tested: Vec<NotTested>,
    /// The machine: OS, kernel, CPU, board, BIOS, Vulkan loader (absent in runs of an
    /// older kiln).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_info: Option<super::host::HostInfo>,
    /// The evidence files the run writes beside the manifest (absent in runs of an older
    /// kiln: [`Manifest::evidence_files`] tells them from the settings). One of them
    /// missing is evidence lost, which the verdict names, never a part that found nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Vec<EvidenceFile>>,
}

/// An evidence file of a run directory, as the manifest lists it (by its file name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EvidenceFile {
    /// `events.jsonl`: every workload's start, steps, results and the device errors.
    #[serde(rename = "events.jsonl")]
    Events,
    /// `telemetry.jsonl`: the sidecar's samples, counters, identity and Xids.
    #[serde(rename = "telemetry.jsonl")]
    Telemetry,
    /// `trace.jsonl`: a watched application's allocations and failures (`kiln watch`).
    #[serde(rename = "trace.jsonl")]
    Trace,
}

impl EvidenceFile {
    /// The files a run writes: the events always, the telemetry when the sidecar runs.
    pub fn written_by(telemetry: bool) -> Vec<EvidenceFile> {
        let mut files = vec![EvidenceFile::Events];
        if telemetry {
            files.push(EvidenceFile::Telemetry);
        }
        files
    }

    /// Its name in the run directory.
    pub fn file_name(self) -> &'static str {
        match self {
            EvidenceFile::Events => "events.jsonl",
            EvidenceFile::Telemetry => "telemetry.jsonl",
            EvidenceFile::Trace => super::trace::TRACE_FILE,
        }
    }

    /// What cannot be judged without it, in words.
    pub fn judges(self) -> &'static str {
        match self {
            EvidenceFile::Events => {
                "no workload's result, device error or interruption could be read"
            }
            EvidenceFile::Telemetry => {
                "thermal, power, clock, throttle, ECC, remap and Xid checks could not be judged"
            }
            EvidenceFile::Trace => {
                "the application's allocations and the failures its Vulkan calls returned could not be read"
            }
        }
    }
}

/// A GPU of the machine that the run could not test, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotTested {
    /// The GPU, as the inventory saw it.
    pub gpu: crate::inventory::InventoryGpu,
    /// Why Vulkan cannot see it, and what to do.
    pub cause: crate::inventory::Cause,
    /// The device index its telemetry records name it by, where the run watched what its
    /// telemetry can show (a compute-only accelerator no Vulkan driver drives: its RAS
    /// counters, sensors and link), so that a fault they show is judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_as: Option<usize>,
}

/// The settings a run used, as its manifest records them. Every field may be absent in
/// the manifest of an older kiln, and reads as "not said".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    /// The profile's name, or the path it was loaded from.
    #[serde(default)]
    pub profile: Option<String>,
    /// The time budget per device (`--duration`); none: a fixed number of passes.
    #[serde(default)]
    pub duration_s: Option<f64>,
    /// The profile's own time budget, where it has one: a run given another
    /// (`--duration 2m` of a 4h burn-in) says both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_duration_s: Option<f64>,
    /// How long one wait for the device may take.
    #[serde(default)]
    pub fence_timeout_s: Option<f64>,
    /// How long a worker may go without a sign of life.
    #[serde(default)]
    pub step_timeout_s: Option<f64>,
    /// The telemetry sidecar's interval; none: no telemetry.
    #[serde(default)]
    pub telemetry_interval_s: Option<f64>,
    /// A device stops at its first failing workload.
    #[serde(default)]
    pub stop_on_first_failure: bool,
    /// The workloads every device runs, each with its settings and share of the budget,
    /// as written: the evidence sits below the workloads, so the verdict reads it as their
    /// plan ([`crate::verdict`]), and a plan in a form this kiln cannot read is then "not
    /// said", so that nothing is judged missing on a guess.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<serde_json::Value>,
    /// The workloads by name alone, as the oldest manifests gave them (before the plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workloads: Option<Vec<String>>,
    /// What `kiln watch` watched, in place of workloads: a run of `kiln run` has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<WatchSettings>,
    /// The verdict's thresholds the run was judged by (its profile's, with any
    /// `--thresholds` file laid over them): a verdict or report rebuilt later judges by
    /// them, never by defaults; absent in older manifests (kiln's defaults then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<crate::thresholds::Thresholds>,
}

/// What `kiln watch` was asked to watch, and how.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WatchSettings {
    /// The command it started (`kiln watch -- CMD ARGS`); empty with `--pid`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// The running process it attached to (`--pid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// How often the application's memory and the device were read.
    pub interval_s: f64,
    /// The pattern of an iteration's line of output (`--iteration`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<String>,
    /// Whether the allocation trace was asked for (its layer injected).
    pub trace: bool,
    /// The share of the budget at which `--on-alert` runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert_share: Option<f64>,
    /// The Vulkan loader's variables the application was started with (`VK_DRIVER_FILES`,
    /// ...): an engine that reads them may open the driver itself, past the loader and
    /// kiln's layer.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub loader_environment: std::collections::BTreeMap<String, String>,
}

impl Manifest {
    /// A manifest for this process, started at `started_utc` (the run's own start, so
    /// that the manifest and the report agree).
    pub fn new(devices: Vec<DeviceInfo>, settings: RunSettings, started_utc: String) -> Manifest {
        Manifest {
            schema: MANIFEST_SCHEMA.into(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            command_line: std::env::args().collect(),
            host: hostname(),
            started_utc,
            devices,
            settings,
            stand_in: false,
            not_tested: Vec::new(),
            host_info: Some(super::host::collect()),
            evidence: Some(EvidenceFile::written_by(false)),
        }
    }

    /// The evidence files the run wrote: as listed, or for a manifest of an older kiln,
    /// as its settings imply (the telemetry when it had devices and an interval).
    pub fn evidence_files(&self) -> Vec<EvidenceFile> {
        if let Some(files) = &self.evidence {
            return files.clone();
        }
        let telemetry = !self.devices.is_empty() && self.settings.telemetry_interval_s.is_some();
        EvidenceFile::written_by(telemetry)
    }
}

/// The file that claims a run directory for the run that made it (its process id and
/// host inside): created exclusively, first, and kept.
pub const CLAIM_FILE: &str = ".kiln-run";

/// How many names [`RunDir::create_default`] tries before it gives up.
const DEFAULT_NAME_TRIES: u32 = 100;

/// An open run directory.
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// Creates `path` (and its parents) and claims it for this run. An existing directory
    /// is accepted only when empty, so evidence of an earlier run is never mixed in or
    /// overwritten; the claim ([`CLAIM_FILE`], created exclusively before anything else is
    /// written) makes the check and the taking one step, so of two runs given the same
    /// directory at the same moment exactly one has it and the other writes nothing there.
    pub fn create(path: &Path) -> EvidenceResult<RunDir> {
        // A file where the directory should be (or one of its parents): said as such, not
        // as the system's "File exists".
        if let Some(file) = path
            .ancestors()
            .find(|p| p.exists() && !p.is_dir() && !p.as_os_str().is_empty())
        {
            return Err(EvidenceError::RunDirTaken {
                path: file.to_owned(),
                reason: "a file is there, not a directory",
            });
        }
        std::fs::create_dir_all(path).map_err(|e| EvidenceError::io(path, e))?;
        let holds_files = std::fs::read_dir(path)
            .map_err(|e| EvidenceError::io(path, e))?
            .next()
            .is_some();
        if holds_files {
            return Err(EvidenceError::RunDirTaken {
                path: path.to_owned(),
                reason: "the run directory already holds files",
            });
        }
        let claim = path.join(CLAIM_FILE);
        let mut file = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&claim)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(EvidenceError::RunDirTaken {
                    path: path.to_owned(),
                    reason: "another kiln run claimed this run directory at the same moment",
                });
            }
            Err(e) => return Err(EvidenceError::io(&claim, e)),
        };
        // Whose it is, for a person who finds the directory.
        let owner = format!(
            "{}\n",
            serde_json::json!({"pid": std::process::id(), "host": hostname()})
        );
        std::io::Write::write_all(&mut file, owner.as_bytes())
            .map_err(|e| EvidenceError::io(&claim, e))?;
        Ok(RunDir {
            path: path.to_owned(),
        })
    }

    /// Creates and claims the run directory asked for (`--out`), else one of kiln's own
    /// naming.
    pub fn create_at(out: Option<&Path>) -> EvidenceResult<RunDir> {
        match out {
            Some(path) => RunDir::create(path),
            None => RunDir::create_default(),
        }
    }

    /// Creates and claims a new run directory of kiln's own naming ([`default_run_dir`]):
    /// when another run took that name in the same second (several runs started at once,
    /// one per GPU), the next free `-2`, `-3`, ... is taken instead.
    pub fn create_default() -> EvidenceResult<RunDir> {
        RunDir::create_first_free(&default_run_dir())
    }

    /// Creates and claims `base`, or when another run has it, the first free of `base-2`,
    /// `base-3`, ...
    fn create_first_free(base: &Path) -> EvidenceResult<RunDir> {
        let mut last = None;
        for n in 1..=DEFAULT_NAME_TRIES {
            let path = if n == 1 {
                base.to_owned()
            } else {
                let mut name = base.file_name().unwrap_or_default().to_owned();
                name.push(format!("-{n}"));
                base.with_file_name(name)
            };
            match RunDir::create(&path) {
                Err(e @ EvidenceError::RunDirTaken { .. }) => last = Some(e),
                other => return other,
            }
        }
        Err(last.unwrap_or_else(|| EvidenceError::RunDirTaken {
            path: base.to_owned(),
            reason: "no free run directory name",
        }))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `manifest.json`.
    pub fn write_manifest(&self, manifest: &Manifest) -> EvidenceResult<()> {
        write_json_atomic(&self.path.join("manifest.json"), manifest)
    }

    /// Opens `events.jsonl` for appending.
    pub fn events(&self, started: Instant) -> EvidenceResult<EventWriter> {
        let run_id = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        EventWriter::create(&self.path.join("events.jsonl"), &run_id, started)
    }
}

/// `./kiln-runs/<UTC time>-<host>`.
pub fn default_run_dir() -> PathBuf {
    let stamp = utc_timestamp(SystemTime::now()).replace([':', '-'], "");
    let host: String = hostname()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    PathBuf::from("kiln-runs").join(format!("{stamp}-{host}"))
}

/// The node's name: `NODE_NAME` where set (Kubernetes manifests set it from the pod's
/// `spec.nodeName`, as dcgm-exporter's do, since a pod's own host name is the pod's), else
/// the host's name, or `localhost` when neither can be read.
pub fn hostname() -> String {
    std::env::var("NODE_NAME")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(crate::platform::host::computer_name)
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// RFC 3339 UTC time with second precision (`2026-11-29T17:05:00Z`).
pub fn utc_timestamp(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The time a [`utc_timestamp`] names (`2026-11-29T17:05:00Z`); None for any other text.
pub fn parse_utc_timestamp(text: &str) -> Option<SystemTime> {
    let b = text.as_bytes();
    if b.len() != 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[19] != b'Z' {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> { text.get(from..to)?.parse().ok() };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    // Days since 1970-01-01 from a civil date (the inverse of utc_timestamp's).
    let y = year - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second;
    u64::try_from(secs)
        .ok()
        .map(|s| UNIX_EPOCH + std::time::Duration::from_secs(s))
}

/// Reads `manifest.json`, refusing a manifest of a newer kiln with a sentence that says so
/// (before its fields are read, since a newer schema may have changed them).
pub fn read_manifest(path: &Path) -> EvidenceResult<Manifest> {
    let bytes = crate::fsutil::read_regular(path)?;
    let corrupt = |e: serde_json::Error| {
        EvidenceError::File(crate::fsutil::FileError::Corrupt {
            path: path.to_owned(),
            line: e.line(),
            message: e.to_string(),
        })
    };
    let mut value: serde_json::Value = serde_json::from_slice(&bytes).map_err(corrupt)?;
    // The host's and the devices' names are data: what in them could act is escaped here.
    crate::fsutil::printable_strings(&mut value);
    let schema = value.get("schema").and_then(|s| s.as_str()).unwrap_or("");
    check_schema(path, schema, MANIFEST_SCHEMA)?;
    serde_json::from_value(value).map_err(corrupt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_file_where_the_run_directory_should_be_is_said_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("report.txt");
        std::fs::write(&file, "notes").unwrap();
        for path in [file.clone(), file.join("run")] {
            let Err(e) = RunDir::create(&path) else {
                panic!("{} was taken", path.display());
            };
            assert_eq!(
                e.to_string(),
                format!(
                    "{}: a file is there, not a directory; choose a new --out",
                    file.display()
                )
            );
        }
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "notes",
            "left as it was"
        );
    }

    #[test]
    fn of_runs_claiming_one_directory_at_once_exactly_one_has_it() {
        let root = tempfile::tempdir().unwrap();
        for round in 0..200 {
            // Half the rounds into a directory that does not exist yet, half into an
            // empty one (`mktemp -d`).
            let path = root.path().join(format!("run-{round}"));
            if round % 2 == 1 {
                std::fs::create_dir(&path).unwrap();
            }
            let barrier = std::sync::Barrier::new(4);
            let results: Vec<EvidenceResult<RunDir>> = std::thread::scope(|s| {
                let claims: Vec<_> = (0..4)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            RunDir::create(&path)
                        })
                    })
                    .collect();
                claims.into_iter().map(|c| c.join().unwrap()).collect()
            });
            let won = results.iter().filter(|r| r.is_ok()).count();
            assert_eq!(won, 1, "round {round}: {won} runs claimed the directory");
            for lost in results.iter().filter_map(|r| r.as_ref().err()) {
                assert!(
                    matches!(lost, EvidenceError::RunDirTaken { .. }),
                    "round {round}: {lost}"
                );
                assert!(lost.to_string().ends_with("choose a new --out"), "{lost}");
            }
            let files: Vec<_> = std::fs::read_dir(&path).unwrap().collect();
            assert_eq!(files.len(), 1, "round {round}: only the claim is there");
        }
    }

    #[test]
    fn a_run_directory_holding_files_is_refused_and_left_as_it_was() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("manifest.json"), "{}").unwrap();
        let err = RunDir::create(root.path()).err().unwrap();
        assert_eq!(
            err.to_string(),
            format!(
                "{}: the run directory already holds files; choose a new --out",
                root.path().display()
            )
        );
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 1);
        assert_eq!(
            std::fs::read(root.path().join("manifest.json")).unwrap(),
            b"{}"
        );
    }

    #[test]
    fn a_name_of_kilns_own_taken_in_the_same_second_moves_to_the_next_free() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().join("kiln-runs").join("20261201T120000Z-node");
        let first = RunDir::create_first_free(&base).unwrap();
        let second = RunDir::create_first_free(&base).unwrap();
        let third = RunDir::create_first_free(&base).unwrap();
        assert_eq!(first.path(), base);
        assert_eq!(
            second.path(),
            root.path().join("kiln-runs/20261201T120000Z-node-2")
        );
        assert_eq!(
            third.path(),
            root.path().join("kiln-runs/20261201T120000Z-node-3")
        );
    }

    #[test]
    fn a_timestamp_reads_back_as_the_time_it_names() {
        for secs in [0u64, 951_782_400, 1_795_971_900, 4_102_444_799] {
            let t = UNIX_EPOCH + Duration::from_secs(secs);
            assert_eq!(parse_utc_timestamp(&utc_timestamp(t)), Some(t));
        }
        assert_eq!(
            parse_utc_timestamp("2000-02-29T00:00:00Z"),
            Some(UNIX_EPOCH + Duration::from_secs(951_782_400))
        );
        for bad in [
            "",
            "2026-13-01T00:00:00Z",
            "2026-11-29 17:05:00Z",
            "yesterday",
        ] {
            assert_eq!(parse_utc_timestamp(bad), None, "{bad}");
        }
    }

    #[test]
    fn utc_timestamps_are_civil_dates() {
        assert_eq!(utc_timestamp(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_795_971_900);
        assert_eq!(utc_timestamp(t), "2026-11-29T17:05:00Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(utc_timestamp(leap), "2000-02-29T00:00:00Z");
    }
}
