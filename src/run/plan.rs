//! `--dry-run`: what `kiln run` would do on each device, planned and said, starting nothing.

use super::RunOptions;
use crate::error::AppError;
use crate::gpu::DeviceInfo;
use crate::select::{Selection, select_for_run};
use crate::workload::WorkloadError;
use crate::workload::registry::{PlannedWorkload, WorkloadConfig, WorkloadName};

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

/// Checks what the plan asks of every device's memory against what the device has: a
/// `--vram-bytes` larger than the free memory, or a `--reserve` that leaves nothing, is a
/// usage error before the run starts (the device's own state is the workload's to record).
pub fn check_sizes(devices: &[DeviceInfo], plan: &[PlannedWorkload]) -> Result<(), AppError> {
    for info in devices {
        for v in plan.iter().filter_map(|p| p.config.vram()) {
            match crate::workload::vram::plan_size(info, v) {
                Err(WorkloadError::Config(why)) => return Err(AppError::Usage(why)),
                Ok(_) | Err(WorkloadError::Gpu(_)) => {}
            }
        }
    }
    Ok(())
}

/// Discovers and selects the devices and plans the run, starting nothing.
pub fn dry_run(opts: &RunOptions) -> Result<Plan, AppError> {
    let Selection {
        devices,
        stand_in: _,
        not_tested,
        mut notes,
    } = select_for_run(&opts.devices)?;
    check_sizes(&devices, &opts.plan)?;
    for n in &not_tested {
        notes.push(format!(
            "{} at {} will not be tested: {}",
            n.gpu.name,
            n.gpu.pci_address.as_deref().unwrap_or("an unknown address"),
            n.cause.message
        ));
    }
    let total_weight: u32 = opts.plan.iter().map(|p| p.weight).sum::<u32>().max(1);
    let mut plans = Vec::new();
    for info in &devices {
        let mut vram_bytes = None;
        let mut heap_bytes = None;
        let mut steps = Vec::new();
        for p in &opts.plan {
            let sized = match p
                .config
                .vram()
                .map(|v| crate::workload::vram::plan_size(info, v))
            {
                Some(Ok(sizing)) => {
                    vram_bytes = vram_bytes.max(Some(sizing.sized_bytes));
                    heap_bytes = Some(sizing.heap_bytes);
                    format!("{} GiB", gib(sizing.sized_bytes))
                }
                // The device's state (no memory free): the run would record it.
                Some(Err(e)) => format!("no memory ({e})"),
                None => String::new(),
            };
            let detail = match &p.config {
                WorkloadConfig::Vram(c) => {
                    format!(
                        "{sized} with {}, {}",
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
                    shape_name(&c.shape),
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
                WorkloadConfig::Heat { compute, .. } => format!(
                    "{sized} of VRAM patterns and {} compute at once, for heat",
                    shape_name(&compute.shape)
                ),
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

fn shape_name(shape: &crate::workload::compute::LoadShape) -> String {
    match shape {
        crate::workload::compute::LoadShape::Steady => "steady".to_owned(),
        crate::workload::compute::LoadShape::Pulsed { on_ms, off_ms } => {
            format!("pulsed ({on_ms} ms on / {off_ms} ms off)")
        }
        crate::workload::compute::LoadShape::Sweep => "swept 10%..100%".to_owned(),
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.2}", crate::units::to_gib(bytes))
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
                s.workload.as_str(),
                s.budget_s
                    .map(|b| format!("~{b:.0} s: "))
                    .unwrap_or_default(),
                s.detail
            );
        }
    }
    out
}
