//! The result model every output is built from: `report.json`, the terminal summary
//! and the exit code.

pub mod text;

use serde::{Deserialize, Serialize};

use crate::evidence::REPORT_SCHEMA;
use crate::gpu::{DeviceInfo, DeviceKind};
use crate::telemetry::summary::PhaseTelemetry;
use crate::workload::{WorkloadOutcome, WorkloadStatus};

/// Exit codes: the contract fleets build on (see the README).
pub mod exit_code {
    /// Every tested GPU healthy.
    pub const HEALTHY: i32 = 0;
    /// Hardware fault on at least one GPU.
    pub const HARDWARE: i32 = 1;
    /// Environment or configuration problem.
    pub const ENVIRONMENT: i32 = 2;
    /// Software problem (driver, timeouts, fragmentation, leaks; a failed self-test).
    pub const SOFTWARE: i32 = 3;
    /// Could not test enough to judge.
    pub const INCONCLUSIVE: i32 = 4;
    /// Usage error: bad flags or input.
    pub const USAGE: i32 = 64;
}

/// A device's result in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceResult {
    /// Everything ran and nothing was wrong.
    Pass,
    /// Hardware faults found.
    Fail,
    /// A software problem found (fragmentation, leaks); no hardware fault.
    Software,
    /// Not enough could run to judge.
    Inconclusive,
}

impl DeviceResult {
    /// Upper-case word for people.
    pub fn word(self) -> &'static str {
        match self {
            DeviceResult::Pass => "PASS",
            DeviceResult::Fail => "FAIL",
            DeviceResult::Software => "SOFTWARE",
            DeviceResult::Inconclusive => "INCONCLUSIVE",
        }
    }

    /// The exit code this result asks for.
    pub fn exit_code(self) -> i32 {
        match self {
            DeviceResult::Pass => exit_code::HEALTHY,
            DeviceResult::Fail => exit_code::HARDWARE,
            DeviceResult::Software => exit_code::SOFTWARE,
            DeviceResult::Inconclusive => exit_code::INCONCLUSIVE,
        }
    }
}

/// One device's part of the report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceReport {
    /// Vulkan index.
    pub index: usize,
    /// Device name.
    pub name: String,
    /// `deviceUUID`.
    pub uuid: String,
    /// PCI address, when known.
    pub pci_address: Option<String>,
    /// Device kind.
    pub kind: DeviceKind,
    /// Driver name and version.
    pub driver: String,
    /// The result.
    pub result: DeviceResult,
    /// The main reason, in one sentence.
    pub reason: String,
    /// Each workload's outcome.
    pub workloads: Vec<WorkloadOutcome>,
    /// Telemetry per phase: gauge statistics, throttle time shares, counter deltas, Xids.
    #[serde(default)]
    pub telemetry: Vec<PhaseTelemetry>,
}

impl DeviceReport {
    /// Builds a device's report from its workloads' outcomes (and a failure that kept
    /// it from running any, if one did).
    pub fn new(
        info: &DeviceInfo,
        workloads: Vec<WorkloadOutcome>,
        failure: Option<String>,
    ) -> DeviceReport {
        let result = if workloads.iter().any(|w| w.status == WorkloadStatus::Failed) {
            DeviceResult::Fail
        } else if workloads
            .iter()
            .any(|w| w.status == WorkloadStatus::SoftwareFault)
        {
            DeviceResult::Software
        } else if failure.is_none()
            && !workloads.is_empty()
            && workloads.iter().all(|w| w.status == WorkloadStatus::Passed)
        {
            DeviceResult::Pass
        } else {
            DeviceResult::Inconclusive
        };
        let reason = workloads
            .iter()
            .find(|w| w.status == WorkloadStatus::Failed)
            .or_else(|| {
                workloads
                    .iter()
                    .find(|w| w.status != WorkloadStatus::Passed)
            })
            .map(|w| format!("{}: {}", w.workload, w.headline))
            .or(failure)
            .or_else(|| {
                workloads
                    .first()
                    .map(|w| format!("{}: {}", w.workload, w.headline))
            })
            .unwrap_or_else(|| "no workload ran".into());
        DeviceReport {
            index: info.index,
            name: info.name.clone(),
            uuid: info.device_uuid.clone(),
            pci_address: info.pci_address.clone(),
            kind: info.kind,
            driver: format!("{} {}", info.driver_name, info.driver_info)
                .trim()
                .to_owned(),
            result,
            reason,
            workloads,
            telemetry: Vec::new(),
        }
    }
}

/// `report.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// `REPORT_SCHEMA`.
    pub schema: String,
    /// kiln's version.
    pub tool_version: String,
    /// Run identifier (the run directory's name).
    pub run_id: String,
    /// The run directory.
    pub run_dir: String,
    /// Host name.
    pub host: String,
    /// UTC start.
    pub started_utc: String,
    /// UTC end.
    pub finished_utc: String,
    /// Wall seconds.
    pub wall_s: f64,
    /// Overall result.
    pub result: DeviceResult,
    /// The process exit code.
    pub exit_code: i32,
    /// Facts about the run as a whole (a CPU device only, a missing extension).
    pub notes: Vec<String>,
    /// Per device.
    pub devices: Vec<DeviceReport>,
    /// True when the report was rebuilt from a run that did not finish (a crash, a kill):
    /// the verdict rests on partial evidence.
    #[serde(default)]
    pub incomplete: bool,
}

impl Report {
    /// Assembles the report; the overall result is the worst device result.
    pub fn new(
        run_id: String,
        run_dir: String,
        started_utc: String,
        wall_s: f64,
        notes: Vec<String>,
        devices: Vec<DeviceReport>,
    ) -> Report {
        let result = if devices.iter().any(|d| d.result == DeviceResult::Fail) {
            DeviceResult::Fail
        } else if devices.iter().any(|d| d.result == DeviceResult::Software) {
            DeviceResult::Software
        } else if devices.is_empty()
            || devices
                .iter()
                .any(|d| d.result == DeviceResult::Inconclusive)
        {
            DeviceResult::Inconclusive
        } else {
            DeviceResult::Pass
        };
        Report {
            schema: REPORT_SCHEMA.into(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            run_id,
            run_dir,
            host: crate::evidence::hostname(),
            started_utc,
            finished_utc: crate::evidence::utc_timestamp(std::time::SystemTime::now()),
            wall_s,
            result,
            exit_code: result.exit_code(),
            notes,
            devices,
            incomplete: false,
        }
    }
}
