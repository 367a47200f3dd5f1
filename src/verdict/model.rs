//! The result model every output is built from: `report.json`, the terminal summary
//! and the exit code. The verdict owns it (it decides every field); `report` only renders
//! it.

use serde::{Deserialize, Serialize};

use super::rules;
use crate::evidence::{DeviceErrorKind, REPORT_SCHEMA};
use crate::exit_code;
use crate::finding::{Class, Confidence, Finding, FindingCode, Severity};
use crate::gpu::{DeviceInfo, DeviceKind};
use crate::telemetry::record::Readings;
use crate::telemetry::signals::Signal;
use crate::telemetry::summary::PhaseTelemetry;
use crate::thresholds::Thresholds;
use crate::workload::{WorkloadOutcome, WorkloadStatus};

/// A device's result in one word.
/// Ordered from most to least serious.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceResult {
    /// Hardware faults found.
    Fail,
    /// The environment is at fault (cooling, power, slot, configuration); no hardware fault.
    Environment,
    /// A software problem found (fragmentation, leaks); no hardware fault.
    Software,
    /// Not enough could run to judge.
    Inconclusive,
    /// Everything ran and nothing was wrong.
    Pass,
}

impl DeviceResult {
    /// Upper-case word for people.
    pub fn word(self) -> &'static str {
        match self {
            DeviceResult::Pass => "PASS",
            DeviceResult::Fail => "FAIL",
            DeviceResult::Environment => "ENVIRONMENT",
            DeviceResult::Software => "SOFTWARE",
            DeviceResult::Inconclusive => "INCONCLUSIVE",
        }
    }

    /// The exit code this result asks for.
    pub fn exit_code(self) -> i32 {
        match self {
            DeviceResult::Pass => exit_code::HEALTHY,
            DeviceResult::Fail => exit_code::HARDWARE,
            DeviceResult::Environment => exit_code::ENVIRONMENT,
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
    /// The result and reason before any finding: where judging starts again when
    /// findings are added.
    #[serde(skip)]
    start: Option<(DeviceResult, String)>,
    /// The findings as the rules gave them, before resolution: `findings` is these
    /// resolved ([`super::resolve`]), again whenever more are added.
    #[serde(skip)]
    found: Vec<Finding>,
}

/// What the rules read of one device: its evidence, borrowed from its report, and none of
/// its findings, so that no rule can read another's (which finding explains which is
/// [`super::resolve`]'s alone).
#[derive(Debug, Clone, Copy)]
pub struct DeviceEvidence<'a> {
    /// Vulkan index.
    pub index: usize,
    /// Device name, as Vulkan gives it.
    pub name: &'a str,
    /// Device kind.
    pub kind: DeviceKind,
    /// How the device is installed: driver versions, the vendor's identity, other tenants.
    pub setup: &'a Setup,
    /// Each workload's outcome.
    pub workloads: &'a [WorkloadOutcome],
    /// Telemetry per phase.
    pub telemetry: &'a [PhaseTelemetry],
    /// Failures of the device or its worker that ended its test.
    pub failures: &'a [DeviceFailure],
    /// The rates its workloads measured at moments of the run.
    pub rate_samples: &'a [RateSample],
}

impl DeviceEvidence<'_> {
    /// Windows' resets of the display driver after a timeout (TDR) during the run, every
    /// phase's.
    pub fn driver_resets(&self) -> impl Iterator<Item = &crate::telemetry::record::DriverReset> {
        self.telemetry.iter().flat_map(|p| &p.driver_resets)
    }
}

/// One rate a workload measured at a moment of the run.
#[derive(Debug, Clone, PartialEq)]
pub struct RateSample {
    /// When, ms since the run started (the events' clock, which the telemetry shares).
    pub t_ms: f64,
    /// The rate's name, as the workload's result gives it (`compute_fp32_gops`).
    pub name: String,
    /// Its value, in its own unit.
    pub value: f64,
}

/// A failure that ended (part of) a device's test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceFailure {
    /// What kind of failure (`device_lost`, `timeout`, `hang`, `crash`, ... on disk).
    pub error: DeviceErrorKind,
    /// In words.
    pub message: String,
}

/// How a device is installed, as the Vulkan driver and the telemetry sources saw it at the
/// start: what the setup rules (driver mismatch, other tenants, a driver not loaded) read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    /// PCI vendor id from Vulkan.
    #[serde(default)]
    pub vendor_id: u32,
    /// The Vulkan driver's version, decoded per vendor.
    #[serde(default)]
    pub vulkan_driver_version: String,
    /// The vendor source's identity fields (serial, VBIOS, driver version, other
    /// processes), when one was read.
    #[serde(default)]
    pub identity: Readings,
    /// Why a telemetry source could not be read here, as stable causes
    /// (`driver_not_loaded`, `version_mismatch`, `nvml_missing`, ...).
    #[serde(default)]
    pub source_problems: Vec<String>,
    /// The run's own worker processes, by pid: an Xid one of them raised is kiln's own,
    /// any other pid another process's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kiln_pids: Vec<u32>,
    /// A watch (`kiln watch`), not a test: `kiln_pids` are the watched application's
    /// processes, and the other processes on the GPU are its neighbours, judged by the
    /// application's own rule (`APP_OTHER_PROCESS`) rather than as tenants of a test.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub watching: bool,
}

impl Setup {
    /// An identity field the vendor's source read as words, when it is not empty
    /// (`serial`, `uuid`, `pci_bus_id`).
    pub fn identity_text(&self, signal: Signal) -> Option<&str> {
        self.identity_of(signal)
            .and_then(crate::telemetry::record::Reading::text)
            .filter(|t| !t.is_empty())
    }

    /// An identity field as the source read it.
    pub fn identity_of(&self, signal: Signal) -> Option<&crate::telemetry::record::Reading> {
        self.identity.get(signal.name)
    }
}

impl DeviceReport {
    /// The device's evidence, as its rules read it.
    pub fn evidence(&self) -> DeviceEvidence<'_> {
        DeviceEvidence {
            index: self.index,
            name: &self.name,
            kind: self.kind,
            setup: &self.setup,
            workloads: &self.workloads,
            telemetry: &self.telemetry,
            failures: &self.failures,
            rate_samples: &self.rate_samples,
        }
    }

    /// Windows' resets of the display driver after a timeout (TDR) during the run, every
    /// phase's.
    pub fn driver_resets(&self) -> impl Iterator<Item = &crate::telemetry::record::DriverReset> {
        self.telemetry.iter().flat_map(|p| &p.driver_resets)
    }

    /// Builds a device's report from its workloads' outcomes (and a failure that kept
    /// it from running any, if one did).
    pub fn new(
        info: &DeviceInfo,
        workloads: Vec<WorkloadOutcome>,
        failure: Option<String>,
    ) -> DeviceReport {
        // What ran decides only where judging starts: everything to its end is a pass
        // until a finding says otherwise (the findings, not a workload's status, decide a
        // fault); anything cut short cannot pass.
        let ran_to_end = failure.is_none()
            && !workloads.is_empty()
            && workloads.iter().all(|w| {
                matches!(
                    w.status,
                    WorkloadStatus::Passed | WorkloadStatus::Failed | WorkloadStatus::SoftwareFault
                )
            });
        let result = if ran_to_end {
            DeviceResult::Pass
        } else {
            DeviceResult::Inconclusive
        };
        // What was found first, then what cut the test short (it names what never ran),
        // then the first workload that did not pass.
        let found = workloads
            .iter()
            .find(|w| w.status == WorkloadStatus::Failed)
            .map(|w| format!("{}: {}", w.workload, w.headline));
        let reason = found
            .or(failure)
            .or_else(|| {
                workloads
                    .iter()
                    .find(|w| w.status != WorkloadStatus::Passed)
                    .map(|w| format!("{}: {}", w.workload, w.headline))
            })
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
            action: None,
            workloads,
            telemetry: Vec::new(),
            findings: Vec::new(),
            failures: Vec::new(),
            setup: Setup {
                vendor_id: info.vendor_id,
                vulkan_driver_version: info.driver_version.clone(),
                ..Setup::default()
            },
            stand_in: false,
            not_tested: false,
            rate_samples: Vec::new(),
            start: None,
            found: Vec::new(),
        }
        .starting_here()
    }

    /// Keeps the result and reason before any finding, for [`DeviceReport::settle`].
    fn starting_here(mut self) -> DeviceReport {
        self.start = Some((self.result, self.reason.clone()));
        self
    }

    /// The report of a GPU the machine has but Vulkan cannot see: not tested, with the
    /// cause as its finding (`GPU_NOT_VISIBLE`), placed at `index` after the tested ones.
    pub fn not_tested(index: usize, missing: &crate::evidence::NotTested) -> DeviceReport {
        let gpu = &missing.gpu;
        let integrated = gpu.vendor_id == 0x8086
            && gpu
                .pci_address
                .as_deref()
                .is_some_and(|a| a.ends_with(":00:02.0"));
        let finding = rules::gpu_not_visible(gpu, &missing.cause);
        DeviceReport {
            index,
            name: gpu.name.clone(),
            uuid: gpu
                .uuid
                .as_deref()
                .map(|u| u.trim_start_matches("GPU-").to_owned())
                .unwrap_or_default(),
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
            found: vec![finding.clone()],
            findings: vec![finding],
            setup: Setup {
                vendor_id: gpu.vendor_id,
                ..Setup::default()
            },
            failures: Vec::new(),
            stand_in: false,
            not_tested: true,
            rate_samples: Vec::new(),
            start: None,
        }
    }

    /// A device a watch (`kiln watch`) looked at while an application used it: nothing
    /// wrong seen until a finding says otherwise.
    pub fn watched(info: &DeviceInfo) -> DeviceReport {
        let mut d = DeviceReport::new(info, Vec::new(), None);
        d.result = DeviceResult::Pass;
        d.reason = "watched while the application ran: nothing wrong seen".into();
        d.setup.watching = true;
        d.starting_here()
    }

    /// A device observed without a test (`kiln health`): its identity and one phase of
    /// telemetry (a sample, counters, new Xids), for the same rules as a run's verdict.
    pub fn observed(
        index: usize,
        name: &str,
        uuid: &str,
        pci_address: Option<String>,
        setup: Setup,
        phase: PhaseTelemetry,
    ) -> DeviceReport {
        DeviceReport {
            index,
            name: name.to_owned(),
            uuid: uuid.to_owned(),
            pci_address,
            kind: DeviceKind::DiscreteGpu,
            driver: String::new(),
            result: DeviceResult::Pass,
            reason: "observed, not tested".into(),
            action: None,
            workloads: Vec::new(),
            telemetry: vec![phase],
            findings: Vec::new(),
            setup,
            failures: Vec::new(),
            stand_in: false,
            not_tested: false,
            rate_samples: Vec::new(),
            start: None,
            found: Vec::new(),
        }
    }

    /// Marks this device as the CPU Vulkan device run in a GPU's place: its result becomes
    /// "could not test" (no GPU was tested), and its reason keeps what its own test found.
    pub fn stand_in(&mut self, watched: bool) {
        if self.stand_in {
            return;
        }
        self.stand_in = true;
        let what = match self.kind {
            crate::gpu::DeviceKind::Translation => "Vulkan translated onto Direct3D 12 (Dozen)",
            _ => "the CPU Vulkan device",
        };
        self.reason = if watched {
            format!(
                "no GPU was watched: the application ran on {} ({what}), so nothing is said of a card",
                self.name
            )
        } else {
            format!(
                "no GPU was tested: {} is {what}, run in a GPU's place to prove the tool (its own result: {}, {})",
                self.name,
                self.result.word(),
                self.reason
            )
        };
        self.result = DeviceResult::Inconclusive;
        self.action = Some(if watched {
            "watch the application on a machine with a GPU to judge a card".into()
        } else {
            "run kiln on a machine with a GPU to test a card; `--device cpu` makes the CPU device itself the device under test".into()
        });
    }

    /// Applies the verdict rules to this device's evidence. The result becomes the most
    /// serious class found (hardware, then environment, then software) when a finding of
    /// that class is major or critical and at least of medium confidence.
    pub fn judge(&mut self, thresholds: &Thresholds) {
        self.judge_with(rules::RULES, thresholds);
    }

    /// [`DeviceReport::judge`] with these rules, run in the order given.
    pub fn judge_with(&mut self, with: &[(&str, rules::Rule)], thresholds: &Thresholds) {
        self.found = rules::judge_with(with, &self.evidence(), thresholds);
        self.settle();
    }

    /// Adds findings that need more than this device's evidence (a comparison with its
    /// peers) and settles the result again, every finding resolved anew.
    pub fn add_findings(&mut self, more: Vec<Finding>) {
        self.found.extend(more);
        self.settle();
    }

    /// The result from the findings: the most serious class among the major-or-worse
    /// findings of at least medium confidence decides, and its most serious finding is the
    /// reason. With none, a device with a major "could not test" finding (evidence missing,
    /// an interrupted run) could not be judged whole, and a device that ran to its end and
    /// has only minor or low-confidence findings is "could not judge yet" (recheck): neither
    /// is ever a fault or a pass.
    fn settle(&mut self) {
        self.findings = super::resolve::resolve(self.found.clone());
        self.settle_result();
        self.action = self.next_step();
    }

    /// What to do next for the result just settled (see [`DeviceReport::action`]).
    fn next_step(&self) -> Option<String> {
        if self.result == DeviceResult::Pass {
            return None;
        }
        if self.stand_in {
            return self.action.clone();
        }
        if let Some(f) = self.decisive_finding() {
            return Some(f.action.clone());
        }
        if let Some(f) = self
            .most_serious(|f| f.class == Class::CouldNotTest && f.severity <= Severity::Major)
            .or_else(|| self.most_serious(Self::judged))
        {
            return Some(f.action.clone());
        }
        let cut = self
            .workloads
            .iter()
            .find(|w| {
                matches!(
                    w.status,
                    WorkloadStatus::Incomplete | WorkloadStatus::NotRun
                )
            })
            .map(|w| {
                (
                    w.workload.as_str(),
                    w.summary.envelope().why_cut_short().unwrap_or("not run"),
                )
            });
        if let Some((workload, why)) = cut {
            return Some(if why.contains(crate::workload::STOPPED_ON_REQUEST) {
                format!("rerun without stopping it: {workload} was stopped ({why})")
            } else {
                format!(
                    "give the run more time (--duration) or fewer workloads (--workloads), then rerun: {workload} did not run to its end ({why})"
                )
            });
        }
        if let Some(failure) = self.failures.first() {
            return Some(format!(
                "rerun; if it happens again, keep this run directory: the device's test ended early ({})",
                failure.message
            ));
        }
        Some("rerun; if the same result comes back, keep this run directory and report.json for a closer look".into())
    }

    /// The result and reason from the findings (see [`DeviceReport::settle`]).
    fn settle_result(&mut self) {
        let (start, start_reason) = self
            .start
            .clone()
            .unwrap_or_else(|| (self.result, self.reason.clone()));
        if let Some((class, summary)) = self
            .decisive_finding()
            .map(|f| (f.class, f.summary.clone()))
        {
            self.result = match class {
                Class::Hardware => DeviceResult::Fail,
                Class::Environment => DeviceResult::Environment,
                _ => DeviceResult::Software,
            };
            self.reason = summary;
            return;
        }
        self.result = start;
        self.reason = start_reason;
        if start != DeviceResult::Pass {
            return;
        }
        // What could not be tested (evidence lost, a run stopped before its end) keeps a
        // device that found nothing from passing.
        if let Some(reason) = self
            .most_serious(|f| f.class == Class::CouldNotTest && f.severity <= Severity::Major)
            .map(|f| f.summary.clone())
        {
            self.result = DeviceResult::Inconclusive;
            self.reason = reason;
            return;
        }
        if let Some(reason) = self
            .most_serious(Self::judged)
            .map(|f| format!("not yet a call: {}; recheck: {}", f.summary, f.action))
        {
            self.result = DeviceResult::Inconclusive;
            self.reason = reason;
        } else if let Some(w) = self.workloads.iter().find(|w| {
            matches!(
                w.status,
                WorkloadStatus::Failed | WorkloadStatus::SoftwareFault
            )
        }) {
            // A workload that found something no rule could judge: said, not passed.
            self.result = DeviceResult::Inconclusive;
            self.reason = format!("{}: {} (no rule judged it)", w.workload, w.headline);
        }
    }

    /// The most serious of the findings `keep` keeps: class first (hardware, environment,
    /// software, could not test), then severity, then confidence.
    fn most_serious(&self, keep: impl Fn(&Finding) -> bool) -> Option<&Finding> {
        self.findings
            .iter()
            .filter(|f| keep(f))
            .min_by_key(|f| (f.class, f.severity, f.confidence))
    }

    /// A finding of a class the verdict judges by (hardware, environment, software).
    fn judged(f: &Finding) -> bool {
        matches!(
            f.class,
            Class::Hardware | Class::Environment | Class::Software
        )
    }

    /// The finding that decides the result: the most serious major-or-worse finding of at
    /// least medium confidence of a judged class.
    fn decisive_finding(&self) -> Option<&Finding> {
        self.most_serious(|f| {
            Self::judged(f) && f.severity <= Severity::Major && f.confidence <= Confidence::Medium
        })
    }

    /// The finding a report leads with, in the verdict's own order: the one that decided
    /// the result, else the most serious judged one (a recheck), else the most serious of
    /// any but information (a GPU that could not be tested).
    pub fn leading_finding(&self) -> Option<&Finding> {
        self.decisive_finding()
            .or_else(|| self.most_serious(Self::judged))
            .or_else(|| self.most_serious(|f| f.class != Class::Info))
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
        if super::rules::rates::memory_temperature_unread(&self.evidence()) {
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
    pub application: Option<super::app::ApplicationReport>,
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
        // The most serious device result; no device at all is inconclusive.
        let result = devices
            .iter()
            .map(|d| d.result)
            .min()
            .unwrap_or(DeviceResult::Inconclusive);
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
            interrupted: false,
            no_gpu_tested: false,
            notes_said: 0,
            application: None,
        }
    }
}
