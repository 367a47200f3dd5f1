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
use crate::workload::{RunControl, Workload, WorkloadError};

/// Everything `kiln run` was asked to do.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Device selectors (index, UUID, PCI address); empty: every GPU.
    pub devices: Vec<String>,
    /// Time budget per device.
    pub duration: Option<Duration>,
    /// Workloads to run on every device, in order.
    pub workloads: Vec<WorkloadName>,
    /// VRAM test settings.
    pub vram: VramConfig,
    /// Compute test settings.
    pub compute: ComputeConfig,
    /// PCIe probe settings.
    pub pcie: PcieConfig,
    /// Allocator torture settings.
    pub fragment: FragmentConfig,
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
        "duration_s": opts.duration.map(|d| d.as_secs_f64()),
        "fence_timeout_s": opts.fence_timeout.as_secs_f64(),
        "telemetry_interval_s": opts.telemetry_interval.map(|d| d.as_secs_f64()),
        "workloads": &opts.workloads,
        "vram": &opts.vram,
        "compute": &opts.compute,
        "pcie": &opts.pcie,
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
    let mut workloads: Vec<(Box<dyn Workload>, u32)> = Vec::new();
    for name in &opts.workloads {
        match name {
            WorkloadName::Vram => workloads.push((
                Box::new(VramTest {
                    config: opts.vram.clone(),
                }),
                3,
            )),
            WorkloadName::Compute => workloads.push((
                Box::new(ComputeTest {
                    config: opts.compute.clone(),
                }),
                1,
            )),
            WorkloadName::Pcie => workloads.push((
                Box::new(PcieTest {
                    config: opts.pcie.clone(),
                }),
                1,
            )),
            WorkloadName::Fragment => workloads.push((
                Box::new(FragmentTest {
                    config: opts.fragment.clone(),
                }),
                1,
            )),
        }
    }
    // The time budget is shared by weight: memory gets three parts, compute and PCIe one each.
    let total_weight: u32 = workloads.iter().map(|(_, w)| w).sum::<u32>().max(1);
    let mut outcomes = Vec::new();
    let mut failure = None;
    for (w, weight) in workloads.iter_mut() {
        let mut control = RunControl::new(opts.duration.map(|d| d * *weight / total_weight));
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
                outcomes.push(outcome);
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
