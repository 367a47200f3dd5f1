//! What the parent and a device's worker say to each other, in one place. The parent
//! starts the worker (this binary with [`WORKER_ARG`]) and writes the [`WorkerJob`] as one
//! JSON line on its stdin, then a [`GO`] line for each answered wait; closing the pipe (or
//! dying) asks the worker to stop at its next step. The worker answers with one
//! [`WorkerMessage`] per line on its stdout; anything else there is kept as a note, never
//! trusted.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::evidence::EventRecord;
use crate::gpu::DeviceInfo;
use crate::profile::Confirm;
use crate::telemetry::record::{Boundary, Readings};
use crate::workload::registry::PlannedWorkload;

/// The first argument that makes a kiln binary a device worker.
pub const WORKER_ARG: &str = "__kiln-device-worker";

/// What one worker is to do.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerJob {
    /// The device's index in Vulkan's enumeration.
    pub vulkan_index: usize,
    /// The device as the run names it (`index` is its place in the run).
    pub info: DeviceInfo,
    /// Time budget, shared by the workloads by weight.
    pub duration: Option<Duration>,
    /// The workloads, in order.
    pub plan: Vec<PlannedWorkload>,
    /// Stop after the first workload that fails.
    pub stop_on_first_failure: bool,
    /// Bound on every wait for the device.
    pub fence_timeout: Duration,
    /// Rerun a workload that found something, to confirm it.
    #[serde(default)]
    pub confirm: Option<Confirm>,
    /// Wait for the device to be idle and cool between workloads.
    #[serde(default)]
    pub wait_idle: bool,
    /// A lock file that devices take in turn for the PCIe probe (several devices share
    /// the host's links); none with one device.
    #[serde(default)]
    pub pcie_lock: Option<std::path::PathBuf>,
    /// Test only: stop responding when the first workload starts, as a hung driver call
    /// would (the watchdog's test).
    #[serde(default)]
    pub hang_for_test: bool,
    /// Test only: die when the first workload starts, as a driver crash would.
    #[serde(default)]
    pub crash_for_test: bool,
    /// Test only: when the first workload starts, loop in host-side work that shows
    /// progress and never answers a stop (the parent's time bounds' test).
    #[serde(default)]
    pub busy_for_test: bool,
}

/// What a worker tells the parent, one JSON line each.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum WorkerMessage {
    /// Evidence to append to the run's events.
    Event(EventRecord),
    /// Snapshot the device's counters now, at one side of a phase.
    Snapshot {
        /// The phase: the planned workload's name.
        phase: String,
        /// Which side of it.
        when: Boundary,
    },
    /// The device finished work since the last message: it is not hung.
    Alive,
    /// Waiting to start the next workload until the parent sees the device idle and
    /// cool and answers [`GO`] on stdin.
    WaitIdle,
    /// Waiting for its turn at the PCIe probe (other devices share the host's links):
    /// time not counted against the device's budget.
    WaitTurn,
    /// A workload ran this much past the time it was given: the device's test ends as
    /// much later (see `plan::Split`), and the parent's bound on it moves with it.
    Overran(Duration),
    /// Every workload has ended.
    Done,
}

/// The parent's answer to [`WorkerMessage::WaitIdle`].
pub const GO: &str = "go";

/// What begins a line of the device's latest telemetry sample, which the parent writes
/// to a worker whose plan holds a power target, each time a new one is read.
pub const READINGS: &str = "readings ";

/// The line that carries `readings` to a worker.
pub fn readings_line(readings: &Readings) -> Option<String> {
    serde_json::to_string(readings)
        .ok()
        .map(|json| format!("{READINGS}{json}\n"))
}

/// The sample a `readings` line carries; None for any other line.
pub fn parse_readings(line: &str) -> Option<Readings> {
    serde_json::from_str(line.trim_end().strip_prefix(READINGS)?).ok()
}

impl WorkerJob {
    /// The job as the line the parent writes first.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default() + "\n"
    }

    /// The job from the worker's first line.
    pub fn parse(line: &str) -> Result<WorkerJob, serde_json::Error> {
        serde_json::from_str(line)
    }
}

impl WorkerMessage {
    /// The message as one line of the worker's stdout.
    pub fn to_line(&self) -> Option<String> {
        serde_json::to_string(self).ok().map(|l| l + "\n")
    }

    /// A line of the worker's stdout as a message; None for anything else (a library
    /// printing there).
    pub fn parse(line: &str) -> Option<WorkerMessage> {
        serde_json::from_str(line).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_telemetry_sample_survives_its_line_and_nothing_else_reads_as_one() {
        let mut readings = Readings::new();
        readings.insert(
            "power_w".into(),
            crate::telemetry::record::Reading::Number(612.5),
        );
        readings.insert(
            "throttle_reasons".into(),
            crate::telemetry::record::Reading::Text("sw_power_cap".into()),
        );
        let line = readings_line(&readings).unwrap_or_default();
        assert!(line.ends_with('\n') && !line.trim_end().contains('\n'));
        assert_eq!(parse_readings(&line), Some(readings));
        assert_eq!(parse_readings(GO), None);
        assert_eq!(parse_readings("readings {not json"), None);
    }

    #[test]
    fn a_message_survives_its_line() {
        let sent = WorkerMessage::Snapshot {
            phase: "vram".into(),
            when: Boundary::After,
        };
        let line = sent.to_line().unwrap_or_default();
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        let Some(WorkerMessage::Snapshot { phase, when }) = WorkerMessage::parse(&line) else {
            panic!("{line} did not parse back");
        };
        assert_eq!((phase.as_str(), when), ("vram", Boundary::After));
        assert!(WorkerMessage::parse("a driver printing on stdout").is_none());
        let over = Duration::from_millis(1700);
        let line = WorkerMessage::Overran(over).to_line().unwrap_or_default();
        assert!(
            matches!(WorkerMessage::parse(&line), Some(WorkerMessage::Overran(d)) if d == over),
            "{line}"
        );
    }
}
