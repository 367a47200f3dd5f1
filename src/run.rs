//! `kiln run`: discover, select, test every device, keep the evidence, report.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use std::sync::Arc;

use crate::evidence::{
    Event, EventSink, EvidenceError, JsonlWriter, Manifest, RunDir, default_run_dir, read_jsonl,
    utc_timestamp,
};
use crate::gpu::{DeviceContext, DeviceInfo, GpuError, Vulkan};
use crate::report::{DeviceReport, Report, exit_code};
use crate::telemetry;
use crate::telemetry::record::TelemetryRecord;
use crate::telemetry::sidecar::{RealClock, Sidecar};
use crate::verdict::thresholds::Thresholds;
use crate::workload::compute::{ComputeConfig, ComputeTest};
use crate::workload::fragment::{FragmentConfig, FragmentTest};
use crate::workload::pcie::{PcieConfig, PcieTest};
use crate::workload::vram::{VramConfig, VramTest};
use crate::workload::{RunControl, Workload, WorkloadError, WorkloadStatus};

/// Everything `kiln run` was asked to do.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The profile the plan came from (bundled name or path), for the manifest.
    pub profile: String,
    /// Device selectors (index, UUID, PCI address); empty: every GPU.
    pub devices: Vec<String>,
    /// Time budget per device, shared by the workloads by weight.
    pub duration: Option<Duration>,
    /// The workloads to run on every device, in order.
    pub plan: Vec<PlannedWorkload>,
    /// Stop a device's remaining workloads after the first that fails.
    pub stop_on_first_failure: bool,
    /// Run directory.
    pub out: Option<PathBuf>,
    /// Bound on every wait for the device.
    pub fence_timeout: Duration,
    /// Show progress bars (only when stderr is a terminal).
    pub progress: bool,
    /// Telemetry sampling interval; None turns the sidecar off.
    pub telemetry_interval: Option<Duration>,
    /// Thresholds of the verdict rules.
    pub thresholds: Thresholds,
}

/// One workload of a plan and its share of the device's time budget.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PlannedWorkload {
    /// Parts of the budget (memory usually three to one for each other workload).
    pub weight: u32,
    /// What to run.
    pub config: WorkloadConfig,
}

/// A workload and its settings.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "workload", rename_all = "snake_case")]
pub enum WorkloadConfig {
    /// The VRAM pattern test.
    Vram(VramConfig),
    /// Verified compute saturation.
    Compute(ComputeConfig),
    /// PCIe bandwidth and transfer integrity.
    Pcie(PcieConfig),
    /// Allocator fragmentation and leak torture.
    Fragment(FragmentConfig),
}

impl WorkloadConfig {
    /// Which workload this is.
    pub fn name(&self) -> WorkloadName {
        match self {
            WorkloadConfig::Vram(_) => WorkloadName::Vram,
            WorkloadConfig::Compute(_) => WorkloadName::Compute,
            WorkloadConfig::Pcie(_) => WorkloadName::Pcie,
            WorkloadConfig::Fragment(_) => WorkloadName::Fragment,
        }
    }

    /// The workload with default settings.
    pub fn default_of(name: WorkloadName) -> WorkloadConfig {
        match name {
            WorkloadName::Vram => WorkloadConfig::Vram(VramConfig::default()),
            WorkloadName::Compute => WorkloadConfig::Compute(ComputeConfig::default()),
            WorkloadName::Pcie => WorkloadConfig::Pcie(PcieConfig::default()),
            WorkloadName::Fragment => WorkloadConfig::Fragment(FragmentConfig::default()),
        }
    }

    fn build(&self) -> Box<dyn Workload> {
        match self {
            WorkloadConfig::Vram(c) => Box::new(VramTest { config: c.clone() }),
            WorkloadConfig::Compute(c) => Box::new(ComputeTest { config: c.clone() }),
            WorkloadConfig::Pcie(c) => Box::new(PcieTest { config: c.clone() }),
            WorkloadConfig::Fragment(c) => Box::new(FragmentTest { config: c.clone() }),
        }
    }
}

/// The workloads `kiln run` can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadName {
    /// The VRAM pattern test.
    Vram,
    /// Verified compute saturation.
    Compute,
    /// PCIe bandwidth and transfer integrity.
    Pcie,
    /// Allocator fragmentation and leak torture.
    Fragment,
}

impl WorkloadName {
    /// Parses a comma-separated list (`vram,compute`).
    pub fn parse_list(list: &str) -> Result<Vec<WorkloadName>, String> {
        let mut out = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let w = match name {
                "vram" => WorkloadName::Vram,
                "compute" => WorkloadName::Compute,
                "pcie" => WorkloadName::Pcie,
                "fragment" => WorkloadName::Fragment,
                other => {
                    return Err(format!(
                        "unknown workload `{other}` (known: vram, compute, pcie, fragment)"
                    ));
                }
            };
            if !out.contains(&w) {
                out.push(w);
            }
        }
        if out.is_empty() {
            return Err("no workload named".into());
        }
        Ok(out)
    }
}

/// Why a command could not produce a result.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Bad flags or input.
    #[error("{0}")]
    Usage(String),
    /// Vulkan could not start or find the devices.
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// Evidence could not be written or read.
    #[error(transparent)]
    Evidence(#[from] EvidenceError),
}

impl AppError {
    /// The exit code for this failure.
    pub fn exit_code(&self) -> i32 {
        match self {
            AppError::Usage(_) => exit_code::USAGE,
            AppError::Gpu(GpuError::NoSuchDevice { .. }) => exit_code::USAGE,
            AppError::Gpu(_) | AppError::Evidence(_) => exit_code::INCONCLUSIVE,
        }
    }
}

impl From<WorkloadError> for AppError {
    fn from(e: WorkloadError) -> Self {
        match e {
            WorkloadError::Gpu(g) => AppError::Gpu(g),
            WorkloadError::Config(c) => AppError::Usage(c),
        }
    }
}

/// The sentence said when only CPU devices are tested.
pub const CPU_ONLY_NOTE: &str = "this proves the tool, not a card";

/// Picks the devices to test. With no selectors: every GPU, or, with none, the CPU
/// Vulkan devices (and a note saying what that proves).
pub fn select_devices(
    vulkan: &Vulkan,
    selectors: &[String],
) -> Result<(Vec<DeviceInfo>, Vec<String>), AppError> {
    let all = vulkan.devices()?;
    let mut notes = Vec::new();
    let chosen: Vec<DeviceInfo> = if selectors.is_empty() {
        let gpus: Vec<DeviceInfo> = all.iter().filter(|d| d.kind.is_gpu()).cloned().collect();
        if gpus.is_empty() {
            let names: Vec<&str> = all.iter().map(|d| d.name.as_str()).collect();
            notes.push(format!(
                "no GPU found: testing the CPU Vulkan device ({}); {CPU_ONLY_NOTE}",
                names.join(", ")
            ));
            all
        } else {
            gpus
        }
    } else {
        let mut chosen: Vec<DeviceInfo> = Vec::new();
        for s in selectors {
            let found: Vec<&DeviceInfo> = all.iter().filter(|d| d.matches(s)).collect();
            if found.is_empty() {
                return Err(GpuError::NoSuchDevice {
                    selector: s.clone(),
                }
                .into());
            }
            for d in found {
                if !chosen.iter().any(|c| c.index == d.index) {
                    chosen.push(d.clone());
                }
            }
        }
        for d in chosen.iter().filter(|d| !d.kind.is_gpu()) {
            notes.push(format!(
                "device {} ({}) is a CPU Vulkan device; {CPU_ONLY_NOTE}",
                d.index, d.name
            ));
        }
        chosen
    };
    Ok((chosen, notes))
}

/// Runs the test on every selected device and writes the run directory.
pub fn run(opts: &RunOptions) -> Result<Report, AppError> {
    let started = Instant::now();
    let started_utc = utc_timestamp(SystemTime::now());
    let vulkan = Vulkan::new()?;
    let (devices, mut notes) = select_devices(&vulkan, &opts.devices)?;
    let dir_path = opts.out.clone().unwrap_or_else(default_run_dir);
    // A run directory that cannot be made is the user's choice to fix: a usage error.
    let run_dir = RunDir::create(&dir_path).map_err(|e| AppError::Usage(e.to_string()))?;
    let settings = serde_json::json!({
        "profile": &opts.profile,
        "duration_s": opts.duration.map(|d| d.as_secs_f64()),
        "fence_timeout_s": opts.fence_timeout.as_secs_f64(),
        "telemetry_interval_s": opts.telemetry_interval.map(|d| d.as_secs_f64()),
        "stop_on_first_failure": opts.stop_on_first_failure,
        "plan": &opts.plan,
    });
    run_dir.write_manifest(&Manifest::new(
        devices.clone(),
        settings,
        started_utc.clone(),
    ))?;
    let mut events = run_dir.events(started)?;
    let sidecar = match opts.telemetry_interval {
        Some(interval) => {
            let (sidecar, telemetry_notes) =
                start_telemetry(&run_dir, &devices, interval, started)?;
            notes.extend(telemetry_notes);
            Some(sidecar)
        }
        None => {
            notes.push("telemetry off (--telemetry-interval 0): no temperature, power, clock or counter evidence".into());
            None
        }
    };
    for note in &notes {
        events.emit(
            None,
            Event::Note {
                message: note.clone(),
            },
        );
    }
    let mut reports = Vec::new();
    for info in &devices {
        reports.push(test_device(
            &vulkan,
            info,
            opts,
            &mut events,
            sidecar.as_ref(),
        ));
    }
    if let Some(s) = sidecar {
        s.stop();
        attach_telemetry(&run_dir, &mut reports, &mut notes);
    }
    for d in &mut reports {
        d.judge(&opts.thresholds);
    }
    let run_id = dir_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Err(e) = events.check() {
        notes.push(format!("some evidence could not be written: {e}"));
    }
    let report = Report::new(
        run_id,
        dir_path.display().to_string(),
        started_utc,
        started.elapsed().as_secs_f64(),
        notes,
        reports,
    );
    events.emit(
        None,
        Event::RunEnd {
            exit_code: report.exit_code,
            result: report.result.word().to_lowercase(),
        },
    );
    crate::report::write_all(run_dir.path(), &report).map_err(|e| {
        AppError::Evidence(EvidenceError::Io {
            path: run_dir.path().to_owned(),
            message: e.to_string(),
        })
    })?;
    Ok(report)
}

fn test_device(
    vulkan: &std::sync::Arc<Vulkan>,
    info: &DeviceInfo,
    opts: &RunOptions,
    events: &mut dyn EventSink,
    sidecar: Option<&Sidecar>,
) -> DeviceReport {
    let device = Some(info.index);
    // Counters are snapshotted around every workload phase, per device.
    let snapshot = |phase: &str, when: &str| {
        if let Some(s) = sidecar {
            s.snapshot(Some(info.index), phase, when);
        }
    };
    events.emit(
        device,
        Event::DeviceStart {
            info: Box::new(info.clone()),
        },
    );
    let mut ctx = match DeviceContext::open(vulkan, info) {
        Ok(ctx) => ctx,
        Err(e) => {
            events.emit(
                device,
                Event::DeviceError {
                    error: "open".into(),
                    message: e.to_string(),
                },
            );
            return DeviceReport::new(
                info,
                Vec::new(),
                Some(format!("could not open the device: {e}")),
            );
        }
    };
    ctx.set_fence_timeout(opts.fence_timeout);
    let mut workloads: Vec<(Box<dyn Workload>, u32)> = opts
        .plan
        .iter()
        .map(|p| (p.config.build(), p.weight))
        .collect();
    // The time left is shared by the weights left, so what one workload does not use
    // goes to the ones after it.
    let device_deadline = opts.duration.map(|d| Instant::now() + d);
    let mut weight_left: u32 = workloads.iter().map(|(_, w)| w).sum::<u32>().max(1);
    let mut outcomes = Vec::new();
    let mut failure = None;
    for (w, weight) in workloads.iter_mut() {
        let budget = device_deadline.map(|end| {
            end.saturating_duration_since(Instant::now()) * *weight / weight_left.max(1)
        });
        weight_left = weight_left.saturating_sub(*weight);
        let mut control = RunControl::new(budget);
        if opts.progress {
            control.progress = progress_bar(&info.name);
        }
        snapshot(w.name(), "before");
        let result = w.run(&mut ctx, &control, events);
        control.progress.finish_and_clear();
        snapshot(w.name(), "after");
        match result {
            Ok(outcome) => {
                events.emit(
                    device,
                    Event::WorkloadEnd {
                        workload: outcome.workload.clone(),
                        status: outcome.status.name().into(),
                        headline: outcome.headline.clone(),
                        summary: outcome.summary.clone(),
                    },
                );
                let failed = outcome.status == WorkloadStatus::Failed;
                outcomes.push(outcome);
                if failed && opts.stop_on_first_failure {
                    events.emit(
                        device,
                        Event::Note {
                            message: format!(
                                "{} failed: the profile stops this device at its first failure",
                                w.name()
                            ),
                        },
                    );
                    break;
                }
            }
            Err(e) => {
                events.emit(
                    device,
                    Event::DeviceError {
                        error: "workload".into(),
                        message: e.to_string(),
                    },
                );
                failure = Some(format!("{}: {e}", w.name()));
            }
        }
    }
    DeviceReport::new(info, outcomes, failure)
}

/// Starts the sidecar writing `telemetry.jsonl`; returns it and the facts about what
/// cannot be read here.
fn start_telemetry(
    run_dir: &RunDir,
    devices: &[DeviceInfo],
    interval: Duration,
    started: Instant,
) -> Result<(Sidecar, Vec<String>), AppError> {
    let (sources, notes) = telemetry::live_sources(devices);
    let mut out = JsonlWriter::create(&run_dir.path().join("telemetry.jsonl"))?;
    let sidecar = Sidecar::spawn(
        sources,
        interval,
        Arc::new(RealClock::new(started)),
        Box::new(move |record| out.append(&record)),
    )
    .map_err(|e| AppError::Usage(format!("could not start the telemetry thread: {e}")))?;
    Ok((sidecar, notes))
}

/// Reads `telemetry.jsonl` back (the report is built from evidence, not memory) and
/// gives each device its per-phase summary; facts that sources found unreadable become
/// notes, each once.
fn attach_telemetry(run_dir: &RunDir, reports: &mut [DeviceReport], notes: &mut Vec<String>) {
    let path = run_dir.path().join("telemetry.jsonl");
    match read_jsonl::<TelemetryRecord>(&path) {
        Ok((records, _)) => crate::verdict::attach_telemetry(&records, reports, notes),
        Err(e) => notes.push(format!("telemetry could not be read back: {e}")),
    }
}

fn progress_bar(name: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(0);
    let style = indicatif::ProgressStyle::with_template(
        "{prefix} {msg} [{bar:30}] {bytes}/{total_bytes} {elapsed}",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
    .progress_chars("=> ");
    bar.set_style(style);
    bar.set_prefix(name.to_owned());
    bar
}

/// What `kiln run` would do, without doing it (`--dry-run`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Plan {
    /// The profile.
    pub profile: String,
    /// Time budget per device; devices run in parallel, so this is also the run's.
    pub duration_s: Option<f64>,
    /// Facts about the selection (a CPU device only).
    pub notes: Vec<String>,
    /// Per device.
    pub devices: Vec<DevicePlan>,
}

/// One device's part of the plan.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DevicePlan {
    /// Vulkan index.
    pub index: usize,
    /// Name.
    pub name: String,
    /// `deviceUUID`.
    pub uuid: String,
    /// PCI address, when known.
    pub pci_address: Option<String>,
    /// VRAM each VRAM workload will test (the largest, when several differ).
    pub vram_bytes: Option<u64>,
    /// Size of the device-local heap.
    pub heap_bytes: Option<u64>,
    /// The workloads, in order, with their share of the budget.
    pub workloads: Vec<PlannedStep>,
}

/// One workload in a device's plan.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PlannedStep {
    /// Which workload.
    pub workload: WorkloadName,
    /// Its weight.
    pub weight: u32,
    /// Its first share of the budget (what earlier workloads leave goes to later ones).
    pub budget_s: Option<f64>,
    /// What it will do.
    pub detail: String,
}

/// Discovers and selects the devices and plans the run, starting nothing.
pub fn dry_run(opts: &RunOptions) -> Result<Plan, AppError> {
    let vulkan = Vulkan::new()?;
    let (devices, notes) = select_devices(&vulkan, &opts.devices)?;
    let total_weight: u32 = opts.plan.iter().map(|p| p.weight).sum::<u32>().max(1);
    let mut plans = Vec::new();
    for info in &devices {
        let mut vram_bytes = None;
        let mut heap_bytes = None;
        let mut steps = Vec::new();
        for p in &opts.plan {
            let detail = match &p.config {
                WorkloadConfig::Vram(c) => {
                    let sizing = crate::workload::vram::plan_size(info, c)?;
                    vram_bytes = vram_bytes.max(Some(sizing.sized_bytes));
                    heap_bytes = Some(sizing.heap_bytes);
                    format!(
                        "{} GiB with {}, {}",
                        gib(sizing.sized_bytes),
                        c.algorithms
                            .iter()
                            .map(|a| a.name())
                            .collect::<Vec<_>>()
                            .join(", "),
                        match c.passes {
                            Some(1) => "1 pass".into(),
                            Some(n) => format!("{n} passes"),
                            None => "passes until the budget ends".into(),
                        }
                    )
                }
                WorkloadConfig::Compute(c) => format!(
                    "{} load, fp32/int32/fp16 verified{}",
                    match c.shape {
                        crate::workload::compute::LoadShape::Steady => "steady".to_owned(),
                        crate::workload::compute::LoadShape::Pulsed { on_ms, off_ms } =>
                            format!("pulsed ({on_ms} ms on / {off_ms} ms off)"),
                        crate::workload::compute::LoadShape::Sweep => "swept 10%..100%".to_owned(),
                    },
                    c.rounds
                        .map(|r| format!(", {r} rounds"))
                        .unwrap_or_default()
                ),
                WorkloadConfig::Pcie(c) => format!(
                    "transfers from {} KiB to {} MiB, each way and both, verified",
                    c.min_bytes >> 10,
                    c.max_bytes >> 20
                ),
                WorkloadConfig::Fragment(_) => {
                    "allocate and free under a memory cap; fragmentation and leaks".into()
                }
            };
            steps.push(PlannedStep {
                workload: p.config.name(),
                weight: p.weight,
                budget_s: opts
                    .duration
                    .map(|d| d.as_secs_f64() * f64::from(p.weight) / f64::from(total_weight)),
                detail,
            });
        }
        plans.push(DevicePlan {
            index: info.index,
            name: info.name.clone(),
            uuid: info.device_uuid.clone(),
            pci_address: info.pci_address.clone(),
            vram_bytes,
            heap_bytes,
            workloads: steps,
        });
    }
    Ok(Plan {
        profile: opts.profile.clone(),
        duration_s: opts.duration.map(|d| d.as_secs_f64()),
        notes,
        devices: plans,
    })
}

fn gib(bytes: u64) -> String {
    format!("{:.2}", bytes as f64 / (1u64 << 30) as f64)
}

/// The plan for people.
pub fn plan_summary(plan: &Plan) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "plan: profile {}, {} device(s) in parallel, {}",
        plan.profile,
        plan.devices.len(),
        match plan.duration_s {
            Some(s) => format!("about {s:.0} s per device plus start-up"),
            None => "no time budget: each workload runs its passes".into(),
        }
    );
    for note in &plan.notes {
        let _ = writeln!(out, "note: {note}");
    }
    for d in &plan.devices {
        let _ = writeln!(
            out,
            "GPU{} {} ({}){}",
            d.index,
            d.name,
            d.pci_address.as_deref().unwrap_or("no PCI address"),
            match (d.vram_bytes, d.heap_bytes) {
                (Some(v), Some(h)) => format!(": {} of {} GiB of VRAM to test", gib(v), gib(h)),
                _ => String::new(),
            }
        );
        for s in &d.workloads {
            let _ = writeln!(
                out,
                "  {:<9} {}{}",
                format!("{:?}", s.workload).to_lowercase(),
                s.budget_s
                    .map(|b| format!("~{b:.0} s: "))
                    .unwrap_or_default(),
                s.detail
            );
        }
    }
    out
}
