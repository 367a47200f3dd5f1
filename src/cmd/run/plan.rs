//! `--dry-run`: what `kiln run` would do on each device, planned and said, starting nothing.

use super::RunOptions;
use crate::error::AppError;
use crate::gpu::DeviceInfo;
use crate::select::{Selection, select_for_run};
use crate::workload::PlanDetail;
use crate::workload::registry::{PlannedWorkload, WorkloadName};

/// What `kiln run` would do, without doing it (`--dry-run`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Plan {
    /// The profile.
    pub profile: String,
    /// Time budget per device; devices run in parallel, so this is also the run's.
    pub duration_s: Option<f64>,
    /// Reruns of a workload that found something, to confirm it: within the budget, taken
    /// from the workloads after it.
    pub confirm_reruns: u32,
    /// The longest wait for an idle, cool card before each workload and rerun, when the
    /// profile waits (not counted in the budget).
    pub idle_wait_max_s: Option<f64>,
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
    /// Its share of the budget (at most; less when earlier workloads ran over).
    pub budget_s: Option<f64>,
    /// What it will do.
    pub detail: String,
}

/// Checks what the plan asks of every device's memory against what the device has: a
/// `--vram-bytes` larger than the free memory, or a `--reserve` that leaves nothing, is a
/// usage error before the run starts (the device's own state is the workload's to record).
pub fn check_sizes(devices: &[DeviceInfo], plan: &[PlannedWorkload]) -> Result<(), AppError> {
    for info in devices {
        for p in plan {
            p.config.describe(info).map_err(AppError::Usage)?;
        }
    }
    Ok(())
}

/// The least time budget per device under which every workload still gets what it cannot
/// do without (the retention test's idle waits, with a tenth more and 5 s to write and
/// verify), for its first run and, when findings are confirmed, for every rerun.
pub fn least_duration(
    plan: &[PlannedWorkload],
    confirm: Option<crate::profile::Confirm>,
) -> Option<(std::time::Duration, &PlannedWorkload)> {
    let total = crate::workload::registry::weight_in_turn(plan);
    let runs = 1 + confirm.map_or(0, |c| c.repeat);
    plan.iter()
        .filter(|p| !p.config.least_time().is_zero())
        .map(|p| {
            let needed = p.config.least_time().mul_f64(1.1) + std::time::Duration::from_secs(5);
            (needed * runs * total / p.weight.max(1), p)
        })
        .max_by_key(|(d, _)| *d)
}

/// Refuses a time budget too short for the plan (see [`least_duration`]), saying the least
/// it needs: a `--duration` is a promise, kept or refused at the start.
pub fn check_duration(
    plan: &[PlannedWorkload],
    confirm: Option<crate::profile::Confirm>,
    duration: std::time::Duration,
    profile: &str,
) -> Result<(), AppError> {
    let Some((least, limiting)) = least_duration(plan, confirm) else {
        return Ok(());
    };
    if duration >= least {
        return Ok(());
    }
    let confirmed = match confirm {
        Some(c) if c.repeat > 0 => format!(
            ", in each of its {} runs to confirm a finding",
            c.repeat + 1
        ),
        _ => String::new(),
    };
    Err(AppError::Usage(format!(
        "a time budget of {} is too short for profile {profile}: its {} workload idles {} for the retention test{confirmed}, so it needs at least {} per device (or a shorter --retention-delay)",
        crate::units::duration_rounded_up(duration),
        limiting.config.name().as_str(),
        crate::units::duration_rounded_up(limiting.config.least_time()),
        crate::units::duration_rounded_up(least),
    )))
}

/// Discovers and selects the devices and plans the run, starting nothing.
pub fn dry_run(opts: &RunOptions) -> Result<Plan, AppError> {
    let Selection {
        devices,
        stand_in: _,
        not_tested,
        mut notes,
    } = select_for_run(&opts.devices, crate::select::Job::Test)?;
    check_sizes(&devices, &opts.plan)?;
    for n in &not_tested {
        notes.push(format!(
            "{} at {} will not be tested: {}",
            n.gpu.name,
            n.gpu.pci_address.as_deref().unwrap_or("an unknown address"),
            n.cause.message
        ));
    }
    let total_weight = crate::workload::registry::weight_in_turn(&opts.plan);
    let mut plans = Vec::new();
    for info in &devices {
        let plan = crate::workload::registry::with_room_beside(&opts.plan, info);
        let mut vram_bytes = None;
        let mut heap_bytes = None;
        let mut steps = Vec::new();
        for p in &plan {
            // Settings that cannot fit a device were refused by check_sizes above.
            let planned = p.config.describe(info).unwrap_or_else(|why| PlanDetail {
                detail: why,
                ..PlanDetail::default()
            });
            if planned.vram_bytes.is_some() {
                vram_bytes = vram_bytes.max(planned.vram_bytes);
                heap_bytes = planned.heap_bytes;
            }
            let detail = planned.detail;
            steps.push(PlannedStep {
                workload: p.config.name(),
                weight: p.weight,
                // One that runs all along has the whole budget, beside the others.
                budget_s: opts.duration.map(|d| {
                    if p.config.runs_alongside() {
                        d.as_secs_f64()
                    } else {
                        d.as_secs_f64() * f64::from(p.weight) / f64::from(total_weight)
                    }
                }),
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
        confirm_reruns: opts.confirm.map_or(0, |c| c.repeat),
        idle_wait_max_s: opts.wait_idle.then(|| super::WAIT_IDLE_MAX.as_secs_f64()),
        notes,
        devices: plans,
    })
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
        "plan: profile {}, {} at once, {}",
        plan.profile,
        crate::text::count(plan.devices.len() as u64, "device"),
        match plan.duration_s {
            Some(s) => format!(
                "at most {} per device plus start-up",
                crate::units::duration_rounded_up(std::time::Duration::from_secs_f64(s))
            ),
            None => "no time budget: each workload runs its passes".into(),
        }
    );
    if plan.confirm_reruns > 0 {
        let _ = writeln!(
            out,
            "  a workload that finds something runs {} more {} to confirm it, within the same budget (taken from the workloads after it)",
            plan.confirm_reruns,
            if plan.confirm_reruns == 1 {
                "time"
            } else {
                "times"
            }
        );
    }
    if let Some(wait) = plan.idle_wait_max_s {
        let _ = writeln!(
            out,
            "  before each workload and rerun it waits for an idle, cool card: at most {} each, not counted in the budget",
            crate::units::duration_rounded_up(std::time::Duration::from_secs_f64(wait))
        );
    }
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
