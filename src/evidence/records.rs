//! The records of `events.jsonl`: one JSON object a line, tagged by `kind`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::vram::{ErrorRecord, RetestResult};
use crate::gpu::DeviceInfo;

/// Schema of `events.jsonl`; bumped on any incompatible change.
pub const EVENTS_SCHEMA: &str = "kiln.events/1";
/// Schema of `manifest.json`.
pub const MANIFEST_SCHEMA: &str = "kiln.manifest/2";
/// Schema of `report.json`.
pub const REPORT_SCHEMA: &str = "kiln.report/2";

/// How a workload ended, as the events write it (`passed`, `not_run`): a value that is
/// not one of these is damaged evidence, never read as some other status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadStatus {
    /// Ran and found nothing wrong.
    Passed,
    /// Found hardware faults.
    Failed,
    /// Found a software problem (fragmentation, a leak): the card may be fine.
    SoftwareFault,
    /// Ran only partly (time, stop request or device failure) and found nothing wrong in
    /// what ran.
    Incomplete,
    /// Could not run at all.
    NotRun,
}

/// One line of `events.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EventRecord {
    /// Milliseconds since the run started, on the monotonic clock.
    pub t_ms: f64,
    /// Index of the device the event concerns, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<usize>,
    /// What happened.
    #[serde(flatten)]
    pub event: Event,
}

/// Everything a run records as it happens.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// First line of every events file.
    Header {
        /// `EVENTS_SCHEMA`.
        schema: String,
        /// kiln's version.
        tool_version: String,
        /// The run's identifier (the run directory's name).
        run_id: String,
    },
    /// A fact of the environment worth keeping (a missing extension, a CPU device).
    Note {
        /// One sentence.
        message: String,
    },
    /// A workload that found something starts again, to confirm it: run `run` of `runs`
    /// (the first being the one that found it), within `budget_s` of the time left.
    Confirm {
        /// The workload.
        workload: String,
        /// Which run this is, from 2.
        run: u32,
        /// Its runs in all, the first included.
        runs: u32,
        /// Its share of the time left, when the run has a budget.
        budget_s: Option<f64>,
    },
    /// A device about to be tested, with its identity.
    DeviceStart {
        /// Identity, memory and limits.
        info: Box<DeviceInfo>,
    },
    /// The worker process testing a device started: its pid, so that the verdict tells
    /// an Xid raised in kiln's own process from another process's.
    Worker {
        /// The worker's process id.
        pid: u32,
    },
    /// A workload starts, with its settings.
    WorkloadStart {
        /// Workload name.
        workload: String,
        /// Its settings and sizing.
        settings: serde_json::Value,
    },
    /// One whole-memory step finished (or was cut short).
    Step {
        /// Workload name.
        workload: String,
        /// Algorithm name.
        algorithm: String,
        /// Pass number, from 0.
        pass: u32,
        /// Step number within the algorithm's pass.
        step: u32,
        /// `write`, `fill`, `verify`, `rewrite` or `idle`.
        op: String,
        /// The pattern, described.
        pattern: String,
        /// Bytes swept.
        bytes: u64,
        /// GPU time.
        gpu_ns: u64,
        /// Wall time.
        wall_ns: u64,
        /// Wrong words found by this step.
        errors: u64,
        /// False when cut short.
        completed: bool,
    },
    /// What a workload measured over its last stretch of about a second, by the names its
    /// result gives its rates: a rate that changes mid-run (another process arriving, a
    /// clock held) shows when it did.
    Rates {
        /// Workload name.
        workload: String,
        /// Each rate, in its own unit (`compute_fp32_gops`).
        rates: std::collections::BTreeMap<String, f64>,
    },
    /// A wrong word, as recorded.
    VramError {
        /// The record.
        record: ErrorRecord,
    },
    /// The in-place retest of a wrong word.
    Retest {
        /// What the retest found.
        result: RetestResult,
    },
    /// A workload ended.
    WorkloadEnd {
        /// Workload name.
        workload: String,
        /// How it ended.
        status: WorkloadStatus,
        /// One sentence for people.
        #[serde(default)]
        headline: String,
        /// The workload's full result.
        summary: serde_json::Value,
    },
    /// The device failed (lost, hung, out of memory) while working.
    DeviceError {
        /// What kind of failure.
        error: DeviceErrorKind,
        /// The error in words.
        message: String,
    },
    /// A signal (Ctrl+C, SIGTERM) asked the run to stop: what follows is what the
    /// workloads finished before stopping.
    Interrupted {
        /// What happened, in words.
        message: String,
    },
    /// `kiln watch`: the application started (or, with `--pid`, was found running).
    AppStart {
        /// Its command line, as started (empty when attached to a running process).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        command: Vec<String>,
        /// Its process id.
        pid: u32,
        /// Attached to a process kiln did not start.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        attached: bool,
    },
    /// `kiln watch`: processes of the application seen for the first time (its
    /// children), whose memory, Xids and allocations are the application's.
    AppProcesses {
        /// Their process ids.
        pids: Vec<u32>,
    },
    /// `kiln watch`: GPU libraries a process of the application loaded, first seen since
    /// the last tick (what it loaded says which GPU API it uses, and whether through the
    /// Vulkan loader that loads kiln's layer).
    AppLibraries {
        /// The process.
        pid: u32,
        /// The libraries' file names (`libvulkan.so.1`, `libcuda.so.1`).
        libraries: Vec<String>,
    },
    /// `kiln watch`: a line of the application's output matched `--iteration`.
    Iteration {
        /// Its number, from 1.
        n: u64,
        /// The line, cut to a sane length.
        line: String,
    },
    /// `kiln watch`: a line of the application's output says it failed for memory or
    /// lost its device.
    AppSaid {
        /// What it says.
        failure: AppFailure,
        /// The line, cut to a sane length.
        line: String,
    },
    /// `kiln watch`: the application's memory crossed `--alert`'s share of the budget.
    Alert {
        /// The share it reached.
        share: f64,
        /// Its memory then.
        bytes: u64,
        /// The budget it was a share of.
        budget_bytes: u64,
    },
    /// `kiln watch`: the application ended.
    AppEnd {
        /// Its exit code, when it exited (and kiln could know it).
        exit_code: Option<i32>,
        /// The signal that ended it, when one did.
        signal: Option<i32>,
        /// Processes of it that did not stop when kiln asked them to, and that kiln killed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        killed: Option<Killed>,
    },
    /// The run ended.
    RunEnd {
        /// The process exit code.
        exit_code: i32,
        /// The overall result in one word.
        result: String,
    },
}

/// Processes of an application `kiln watch` started that were asked to stop (SIGTERM, when
/// a signal interrupted the watch) and had not stopped when kiln's grace ran out, or when a
/// second signal came first: kiln killed them (SIGKILL; `TerminateProcess` on Windows).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Killed {
    /// How long the request to stop had gone unheeded when kiln killed them, ms.
    pub unheeded_ms: f64,
    /// A second signal ended the wait before the grace ran out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub at_second_signal: bool,
    /// The processes killed: the application's first among them when it had not stopped,
    /// else only what it left running.
    pub pids: Vec<u32>,
}

/// What a line of a watched application's output says went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AppFailure {
    /// Out of (device) memory: `CUDA out of memory`, `VK_ERROR_OUT_OF_DEVICE_MEMORY`, ...
    OutOfMemory,
    /// The device was lost or removed: `VK_ERROR_DEVICE_LOST`, `device removed`, ...
    DeviceLost,
    /// The last line of its output that said an error of another kind (`ValueError: ...`,
    /// `Segmentation fault`): its own words on how it ended, written once at its end.
    Error,
}

/// What kind of failure ended (part of) a device's test, as `events.jsonl` and
/// `report.json` spell it (`device_lost`, `hang`, ...). A name this kiln does not know
/// (evidence of another version) is kept as written, so that it still reads and is
/// written back unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceErrorKind {
    /// The device was lost (`device_lost`).
    DeviceLost,
    /// A fence did not signal in time (`timeout`).
    Timeout,
    /// The device ran out of memory (`out_of_memory`).
    OutOfMemory,
    /// Another GPU error (`other`).
    Other,
    /// The device, or a second context on it, could not be opened (`open`).
    Open,
    /// A workload failed outside the device, or the thread running it panicked
    /// (`workload`).
    Workload,
    /// The watchdog abandoned the device's worker as hung (`hang`).
    Hang,
    /// The device's worker process died before its test ended (`crash`).
    Crash,
    /// A name this kiln does not know, as written.
    Unknown(String),
}

impl DeviceErrorKind {
    /// The name as the evidence spells it.
    pub fn as_str(&self) -> &str {
        match self {
            DeviceErrorKind::DeviceLost => "device_lost",
            DeviceErrorKind::Timeout => "timeout",
            DeviceErrorKind::OutOfMemory => "out_of_memory",
            DeviceErrorKind::Other => "other",
            DeviceErrorKind::Open => "open",
            DeviceErrorKind::Workload => "workload",
            DeviceErrorKind::Hang => "hang",
            DeviceErrorKind::Crash => "crash",
            DeviceErrorKind::Unknown(name) => name,
        }
    }

    /// The kind a name spells; a name this kiln does not know is kept as written.
    pub fn from_name(name: &str) -> DeviceErrorKind {
        match name {
            "device_lost" => DeviceErrorKind::DeviceLost,
            "timeout" => DeviceErrorKind::Timeout,
            "out_of_memory" => DeviceErrorKind::OutOfMemory,
            "other" => DeviceErrorKind::Other,
            "open" => DeviceErrorKind::Open,
            "workload" => DeviceErrorKind::Workload,
            "hang" => DeviceErrorKind::Hang,
            "crash" => DeviceErrorKind::Crash,
            _ => DeviceErrorKind::Unknown(name.to_owned()),
        }
    }
}

impl std::fmt::Display for DeviceErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Compares with a name as the evidence spells it, for tools and tests that read the
/// evidence by its names (the rules match on the kind).
impl PartialEq<str> for DeviceErrorKind {
    fn eq(&self, name: &str) -> bool {
        self.as_str() == name
    }
}

impl Serialize for DeviceErrorKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for DeviceErrorKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        Ok(DeviceErrorKind::from_name(&name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_error_kind_reads_and_writes_its_name() {
        for name in [
            "device_lost",
            "timeout",
            "out_of_memory",
            "other",
            "open",
            "workload",
            "hang",
            "crash",
        ] {
            let kind: DeviceErrorKind = serde_json::from_value(name.into()).unwrap();
            assert!(!matches!(kind, DeviceErrorKind::Unknown(_)), "{name}");
            assert_eq!(serde_json::to_value(&kind).unwrap(), name);
        }
        // A kind of another kiln still reads, and is written back as it was.
        let kind: DeviceErrorKind = serde_json::from_value("melted".into()).unwrap();
        assert_eq!(kind, DeviceErrorKind::Unknown("melted".into()));
        assert_eq!(serde_json::to_value(&kind).unwrap(), "melted");
    }

    #[test]
    fn a_device_error_event_keeps_its_shape_on_disk() {
        let line =
            r#"{"t_ms":1.0,"device":0,"kind":"device_error","error":"hang","message":"stuck"}"#;
        let record: EventRecord = serde_json::from_str(line).unwrap();
        assert!(matches!(
            &record.event,
            Event::DeviceError {
                error: DeviceErrorKind::Hang,
                ..
            }
        ));
        assert_eq!(serde_json::to_string(&record).unwrap(), line);
    }
}
