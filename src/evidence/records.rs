//! The records of `events.jsonl`: one JSON object a line, tagged by `kind`.

use serde::{Deserialize, Serialize};

use super::vram::{ErrorRecord, RetestResult};
use crate::gpu::DeviceInfo;

/// Schema of `events.jsonl`; bumped on any incompatible change.
pub const EVENTS_SCHEMA: &str = "kiln.events/1";
/// Schema of `manifest.json`.
pub const MANIFEST_SCHEMA: &str = "kiln.manifest/1";
/// Schema of `report.json`.
pub const REPORT_SCHEMA: &str = "kiln.report/1";

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
    /// A device about to be tested, with its identity.
    DeviceStart {
        /// Identity, memory and limits.
        info: Box<DeviceInfo>,
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
        /// `passed`, `failed`, `software_fault`, `incomplete` or `not_run`.
        status: String,
        /// One sentence for people.
        #[serde(default)]
        headline: String,
        /// The workload's full result.
        summary: serde_json::Value,
    },
    /// The device failed (lost, hung, out of memory) while working.
    DeviceError {
        /// `device_lost`, `timeout`, `out_of_memory`, `open`, `workload`, `hang` (the
        /// watchdog abandoned it), `crash` (its worker process died) or `other`.
        error: String,
        /// The error in words.
        message: String,
    },
    /// A signal (Ctrl+C, SIGTERM) asked the run to stop: what follows is what the
    /// workloads finished before stopping.
    Interrupted {
        /// What happened, in words.
        message: String,
    },
    /// The run ended.
    RunEnd {
        /// The process exit code.
        exit_code: i32,
        /// The overall result in one word.
        result: String,
    },
}
