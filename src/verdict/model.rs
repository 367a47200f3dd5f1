//! The result model every output is built from: `report.json`, the terminal summary
//! and the exit code. The verdict owns it (it decides every field); `report` only renders
//! it.

use serde::{Deserialize, Serialize};

use super::evidence::{DeviceEvidence, DeviceFailure, RateSample, Setup};
use super::settle::{self, DeviceResult, Settled};
use super::watch::ApplicationReport;
use crate::evidence::REPORT_SCHEMA;
use crate::finding::{Class, Finding, FindingCode};
use crate::gpu::DeviceKind;
use crate::telemetry::summary::PhaseTelemetry;
use crate::workload::{WorkloadOutcome, WorkloadStatus};

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
    /// What to do next, for every result but a pass: the deciding finding's action, or
    /// for a device that could not be judged, what would let it be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// Each workload's outcome.
    pub workloads: Vec<WorkloadOutcome>,
    /// Telemetry per phase: gauge statistics, throttle time shares, counter deltas, Xids.
    #[serde(default)]
    pub telemetry: Vec<PhaseTelemetry>,
    /// What the evidence says, rule by rule.
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// How the device is installed: driver versions, the vendor's identity, other tenants.
    #[serde(default)]
    pub setup: Setup,
    /// Failures of the device or its worker that ended its test (a loss, a hang, a crash).
    #[serde(default)]
    pub failures: Vec<DeviceFailure>,
    /// True for the CPU Vulkan device run in a GPU's place (no GPU selected): it proves
    /// the tool, not a card, so its result is "could not test" whatever its own was.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stand_in: bool,
    /// True for a GPU of the machine that Vulkan cannot see: named, never tested.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_tested: bool,
    /// The rates its workloads measured at moments of the run (their `Rates` events and
    /// the VRAM test's steps), for what changed mid-run; read from the events, not kept in
    /// the report.
    #[serde(skip)]
    pub rate_samples: Vec<RateSample>,
}

impl DeviceReport {
    /// The report of a judged device, built once: its evidence, its findings after
    /// resolution and the result settled from them ([`super::settle`]); `stand_in` marks
    /// the CPU Vulkan device run in a GPU's place.
    pub fn judged(
        evidence: DeviceEvidence,
        findings: Vec<Finding>,
        settled: Settled,
        stand_in: bool,
    ) -> DeviceReport {
        let DeviceEvidence {
            index,
            name,
            uuid,
            pci_address,
            kind,
            driver,
            setup,
            workloads,
            telemetry,
            failures,
            rate_samples,
            role: _,
        } = evidence;
        DeviceReport {
            index,
            name,
            uuid,
            pci_address,
            kind,
            driver,
            result: settled.result,
            reason: settled.reason,
            action: settled.action,
            workloads,
            telemetry,
            findings,
            setup,
            failures,
            stand_in,
            not_tested: false,
            rate_samples,
        }
    }

    /// Windows' resets of the display driver after a timeout (TDR) during the run, every
    /// phase's.
    pub fn driver_resets(&self) -> impl Iterator<Item = &crate::telemetry::record::DriverReset> {
        self.telemetry.iter().flat_map(|p| &p.driver_resets)
    }

    /// The report of a GPU the machine has but Vulkan cannot see: not tested, with the
    /// cause as its finding (`GPU_NOT_VISIBLE`), placed at `index` after the tested ones.
    pub fn not_tested(
        index: usize,
        missing: &crate::evidence::NotTested,
        finding: Finding,
    ) -> DeviceReport {
        let gpu = &missing.gpu;
        let integrated = gpu.vendor_id == 0x8086
            && gpu
                .pci_address
                .as_deref()
                .is_some_and(|a| a.ends_with(":00:02.0"));
        DeviceReport {
            index,
            name: gpu.name.clone(),
            uuid: gpu.uuid_body(),
            pci_address: gpu.pci_address.clone(),
            kind: if integrated {
                DeviceKind::IntegratedGpu
            } else {
                DeviceKind::DiscreteGpu
            },
            driver: gpu.kernel_driver.clone().unwrap_or_default(),
            result: DeviceResult::Inconclusive,
            reason: finding.summary.clone(),
            action: Some(finding.action.clone()),
            workloads: Vec::new(),
            telemetry: Vec::new(),
            findings: vec![finding],
            setup: Setup {
                vendor_id: gpu.vendor_id,
                ..Setup::default()
            },
            failures: Vec::new(),
            stand_in: false,
            not_tested: true,
            rate_samples: Vec::new(),
        }
    }

    /// The finding a report leads with, in the verdict's own order: the one that decided
    /// the result, else the most serious judged one (a recheck), else the most serious of
    /// any but information (a GPU that could not be tested).
    pub fn leading_finding(&self) -> Option<&Finding> {
        let findings = &self.findings;
        settle::decisive(findings)
            .or_else(|| settle::most_serious(findings, settle::judged))
            .or_else(|| settle::most_serious(findings, |f| f.class != Class::Info))
    }

    /// The workloads' outcomes, one group per workload (and the load it ran inside of),
    /// in the order each first ran: a workload rerun to confirm a finding is one group of
    /// several runs. Every group has at least one outcome.
    pub fn runs_by_workload(&self) -> Vec<Vec<&WorkloadOutcome>> {
        let mut out: Vec<Vec<&WorkloadOutcome>> = Vec::new();
        for w in &self.workloads {
            let id = (w.workload.as_str(), w.together_with());
            match out
                .iter_mut()
                .find(|g| (g[0].workload.as_str(), g[0].together_with()) == id)
            {
                Some(group) => group.push(w),
                None => out.push(vec![w]),
            }
        }
        out
    }

    /// The product as its vendor's source names it, else as Vulkan does.
    pub fn product(&self) -> &str {
        self.setup
            .identity_text(crate::telemetry::signals::NAME)
            .unwrap_or(&self.name)
    }

    /// What could not be checked, in words, so that a pass is never read as more than it
    /// is: the checks that rest on telemetry when none was read, the rates when the product
    /// is unknown, and each planned workload (its first run) that did not run to its end.
    pub fn not_checked(&self) -> Vec<String> {
        let mut out = Vec::new();
        let has = |code: FindingCode| self.findings.iter().any(|f| f.code == code);
        if has(FindingCode::TelemetryMissing) {
            out.push(
                "temperature, power, clocks, throttling, ECC, row remapping and Xids (no telemetry was read)"
                    .to_owned(),
            );
        }
        if super::rules::rates::memory_temperature_unread(&self.telemetry) {
            let nvidia = crate::product::Vendor::from_pci_id(self.setup.vendor_id)
                == Some(crate::product::Vendor::Nvidia);
            out.push(if nvidia {
                "memory temperature (NVML reads it on HBM parts only: this card's memory has no sensor kiln can read, so memory heat cannot be ruled in or out as a cause of VRAM errors)".to_owned()
            } else {
                "memory temperature (the driver shows no memory sensor for this card)".to_owned()
            });
        }
        if has(FindingCode::ProductUnknown) {
            out.push(
                "rates against the product's figures (a product kiln has no figures for)"
                    .to_owned(),
            );
        }
        for runs in self.runs_by_workload() {
            let w = runs[0];
            match (w.status, w.summary.envelope().why_cut_short()) {
                (WorkloadStatus::NotRun, _) => out.push(format!("{}: not run", w.workload)),
                (WorkloadStatus::Incomplete, Some(why)) => {
                    out.push(format!("{}: stopped early ({why})", w.workload));
                }
                (WorkloadStatus::Incomplete, None) => {
                    out.push(format!("{}: stopped early", w.workload));
                }
                _ => {}
            }
            if let crate::workload::WorkloadResult::Compute(c) = &w.summary
                && c.pauses.is_some_and(|p| p.pauses == 0)
            {
                out.push(format!(
                    "clock transitions ({}: {})",
                    w.workload,
                    crate::workload::cadence::PausesReport::NONE_FITTED
                ));
            }
        }
        out
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
    /// True when a signal stopped the run: the verdict covers what ran before it.
    #[serde(default)]
    pub interrupted: bool,
    /// True when no GPU was tested (none was found, or none Vulkan could see): the run
    /// cannot pass, whatever the CPU Vulkan device's own test found.
    #[serde(default)]
    pub no_gpu_tested: bool,
    /// How many of the first notes were said at the terminal as the run started (before
    /// the progress bars), so that the summary does not say them again.
    #[serde(skip)]
    pub notes_said: usize,
    /// `kiln watch`: the watched application, its memory and the cause found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application: Option<ApplicationReport>,
}

/// What a report says of the run as a whole, beside its devices.
#[derive(Debug, Clone, Default)]
pub struct RunOutline {
    /// Run identifier (the run directory's name).
    pub run_id: String,
    /// The run directory.
    pub run_dir: String,
    /// UTC start.
    pub started_utc: String,
    /// UTC end.
    pub finished_utc: String,
    /// Wall seconds.
    pub wall_s: f64,
    /// Facts about the run as a whole.
    pub notes: Vec<String>,
    /// How many of the first notes were said at the terminal as the run started.
    pub notes_said: usize,
    /// The run did not finish.
    pub incomplete: bool,
    /// A signal stopped the run.
    pub interrupted: bool,
    /// No GPU was tested.
    pub no_gpu_tested: bool,
    /// `kiln watch`: the watched application.
    pub application: Option<ApplicationReport>,
}

impl Report {
    /// Assembles the report from the run's outline and its devices, judged; the overall
    /// result is the worst device result (no device at all is inconclusive).
    pub fn new(run: RunOutline, devices: Vec<DeviceReport>) -> Report {
        let result = devices
            .iter()
            .map(|d| d.result)
            .min()
            .unwrap_or(DeviceResult::Inconclusive);
        Report {
            schema: REPORT_SCHEMA.into(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            run_id: run.run_id,
            run_dir: run.run_dir,
            host: crate::evidence::hostname(),
            started_utc: run.started_utc,
            finished_utc: run.finished_utc,
            wall_s: run.wall_s,
            result,
            exit_code: result.exit_code(),
            notes: run.notes,
            devices,
            incomplete: run.incomplete,
            interrupted: run.interrupted,
            no_gpu_tested: run.no_gpu_tested,
            notes_said: run.notes_said,
            application: run.application,
        }
    }
}
