//! `--dry-run`: what `kiln run` would do on each device, planned and said, starting nothing.

use std::time::Duration;

use super::RunOptions;
use crate::error::AppError;
use crate::gpu::DeviceInfo;
use crate::select::{Selection, select_for_run};
use crate::workload::PlanDetail;
use crate::workload::registry::{PlannedWorkload, WorkloadName, weight_in_turn};

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
    /// Its share of the budget, given whatever ran before it (see [`Split`]); less only
    /// where reruns to confirm a finding take from it.
    pub budget_s: Option<f64>,
    /// What it will do.
    pub detail: String,
}

/// How one device's time budget is shared out, as they run, among the workloads that
/// take turns: each run gets its part of the time left, never more than its weight's
/// share of the whole (one that ends early, a fixed number of passes, shortens the run).
///
/// What a run cannot cut short past its part (its setup, a first sweep of the memory, a
/// calibration, the step under way: a device's least run, which no plan knows before the
/// device is measured, and which on a CPU device or a card with 80 GiB to fill can take
/// seconds) moves the device's end later by as much, and so does time spent waiting (for
/// an idle card, for a turn at the PCIe probe), which the budget does not count. So every
/// workload gets its share whatever ran before it, and the run says when and by how much
/// it ran past its budget. The other way, a budget kept to the second by handing the last
/// workloads what is left, tests them for nothing (a PCIe probe planned for 0.6 s given
/// 3 ms) while the plan promised their share: a diagnostic's user wants every workload
/// measured, and is told the seconds it cost. Only reruns to confirm a finding take from
/// the workloads after them, as the plan says; any other run given less than half its
/// share is recorded as cut short, never as a pass.
#[derive(Debug, Clone)]
pub struct Split {
    /// The device's time budget.
    whole: Duration,
    /// What the shares are out of (see [`weight_in_turn`]).
    weight_total: u32,
    /// When the device's budget ends, counted from the start of its first workload: the
    /// budget, plus every overrun and every wait.
    end: Duration,
}

impl Split {
    /// The budget `whole` shared by weights totalling `weight_total`.
    pub fn new(whole: Duration, weight_total: u32) -> Split {
        Split {
            whole,
            weight_total: weight_total.max(1),
            end: whole,
        }
    }

    /// A workload's share of the whole budget, by its weight.
    pub fn share(&self, weight: u32) -> Duration {
        self.whole * weight / self.weight_total
    }

    /// What a run weighing `weight` is given when it starts at `now` (from the start of
    /// the first workload), `weight_left` being its weight and that of every run after it
    /// (reruns weighed in parts): its part of the time left, at most its share.
    pub fn budget(&self, weight: u32, weight_left: u32, now: Duration) -> Duration {
        let left = self.end.saturating_sub(now);
        (left * weight / weight_left.max(1)).min(self.share(weight))
    }

    /// A run given `budget` that started at `started` ended at `ended`: what it ran over
    /// moves the device's end, never taken from the runs after it. Returns the overrun.
    pub fn ran(&mut self, budget: Duration, started: Duration, ended: Duration) -> Duration {
        let overrun = ended.saturating_sub(started + budget);
        self.end += overrun;
        overrun
    }

    /// Time spent waiting (for an idle card, for a PCIe turn), which the budget does not
    /// count: it moves the device's end.
    pub fn waited(&mut self, wait: Duration) {
        self.end += wait;
    }
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
    // A profile named by a word but read from a file (an installed kiln's): which file.
    if let Some(file) = opts
        .profile_file
        .as_ref()
        .filter(|f| f.as_os_str() != opts.profile.as_str())
    {
        notes.push(format!(
            "profile {} read from {}",
            opts.profile,
            file.display()
        ));
    }
    for n in &not_tested {
        notes.push(format!(
            "{} at {} will not be tested: {}",
            n.gpu.name,
            n.gpu.pci_address.as_deref().unwrap_or("an unknown address"),
            n.cause.message
        ));
    }
    let split = opts
        .duration
        .map(|d| Split::new(d, weight_in_turn(&opts.plan)));
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
                budget_s: opts.duration.zip(split.as_ref()).map(|(d, split)| {
                    if p.config.runs_alongside() {
                        d.as_secs_f64()
                    } else {
                        split.share(p.weight).as_secs_f64()
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

/// Seconds for people, as precise as a share needs: `0.004`, `0.15`, `1.8`, `554`.
pub(super) fn seconds(s: f64) -> String {
    if s < 0.1 {
        format!("{s:.3}")
    } else if s < 1.0 {
        format!("{s:.2}")
    } else if s < 10.0 {
        format!("{s:.1}")
    } else {
        format!("{s:.0}")
    }
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
                "{} per device plus start-up",
                crate::units::duration_rounded_up(std::time::Duration::from_secs_f64(s))
            ),
            None => "no time budget: each workload runs its passes".into(),
        }
    );
    if plan.duration_s.is_some() {
        let _ = writeln!(
            out,
            "  each workload is given its share whatever ran before it: one whose setup and first measurement outlast its share runs over, and the device's test ends that much later (said in the run's notes)"
        );
    }
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
                    .map(|b| format!("~{} s: ", seconds(b)))
                    .unwrap_or_default(),
                s.detail
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::registry::WorkloadName;
    use crate::workload::vram::algorithm::Algorithm;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// The quick profile's weights: VRAM 3, compute 1, PCIe 1.
    fn quick() -> Vec<PlannedWorkload> {
        [
            (WorkloadName::Vram, 3),
            (WorkloadName::Compute, 1),
            (WorkloadName::Pcie, 1),
        ]
        .into_iter()
        .map(|(name, weight)| PlannedWorkload {
            weight,
            ..PlannedWorkload::default_of(name)
        })
        .collect()
    }

    /// Runs `plan` through a split of `budget` as the worker does, each workload taking
    /// what `took` says it takes given its budget; returns each one's budget.
    fn shares(
        plan: &[PlannedWorkload],
        budget: Duration,
        waits: &[Duration],
        took: impl Fn(usize, Duration) -> Duration,
    ) -> Vec<Duration> {
        let mut split = Split::new(budget, weight_in_turn(plan));
        let mut weight_left = weight_in_turn(plan);
        let mut now = Duration::ZERO;
        let mut given = Vec::new();
        for (i, p) in plan.iter().enumerate() {
            let wait = waits.get(i).copied().unwrap_or_default();
            now += wait;
            split.waited(wait);
            let budget = split.budget(p.weight, weight_left, now);
            weight_left -= p.weight;
            let started = now;
            now += took(i, budget);
            split.ran(budget, started, now);
            given.push(budget);
        }
        given
    }

    #[test]
    fn a_short_budget_gives_every_workload_its_share_whatever_ran_before_it() {
        let plan = quick();
        // 3 s: VRAM's first sweep of the memory takes 3.5 s of its 1.8 s, compute's
        // calibration 1.3 s of its 0.6 s. Each after them still has its whole share,
        // where it once had what was left: PCIe planned for 0.6 s and given nothing.
        let given = shares(&plan, ms(3000), &[], |i, budget| match i {
            0 => ms(3500),
            1 => ms(1300),
            _ => budget,
        });
        assert_eq!(given, [ms(1800), ms(600), ms(600)]);
        // The plan says the same shares.
        let split = Split::new(ms(3000), weight_in_turn(&plan));
        let planned: Vec<Duration> = plan.iter().map(|p| split.share(p.weight)).collect();
        assert_eq!(planned, given);
    }

    #[test]
    fn a_workload_that_ends_early_shortens_the_run_and_gives_the_next_no_more() {
        let given = shares(&quick(), ms(3000), &[], |i, budget| match i {
            0 => ms(100),
            _ => budget,
        });
        assert_eq!(given, [ms(1800), ms(600), ms(600)]);
    }

    #[test]
    fn time_spent_waiting_is_not_taken_from_the_budget() {
        // The last of eight cards waits for seven PCIe probes (or a card to cool) before
        // its own: the wait moves its end, and the probe has its share.
        let given = shares(
            &quick(),
            ms(40_000),
            &[ms(0), ms(600_000), ms(56_000)],
            |_, budget| budget,
        );
        assert_eq!(given, [ms(24_000), ms(8_000), ms(8_000)]);
    }

    #[test]
    fn a_run_over_its_part_moves_the_devices_end_by_as_much() {
        let mut split = Split::new(ms(3000), 5);
        assert_eq!(split.ran(ms(1800), ms(0), ms(3500)), ms(1700));
        assert_eq!(split.ran(ms(600), ms(3500), ms(3900)), Duration::ZERO);
        // The end moved by the 1.7 s overrun alone: what is left at 3.9 s is the last
        // share, plus the 0.2 s compute left unused, which shortens the run.
        assert_eq!(split.budget(1, 1, ms(3900)), ms(600));
        assert_eq!(split.budget(1, 1, ms(4300)), ms(400));
    }

    #[test]
    fn reruns_to_confirm_share_the_time_left_with_the_workloads_after_them() {
        // 3 of 5 parts in 3 s: VRAM's 1.8 s run found something and reruns twice, its
        // reruns weighing as VRAM once more, counted in parts of a rerun.
        let mut split = Split::new(ms(3000), 5);
        split.ran(ms(1800), ms(0), ms(1800));
        let repeat = 2;
        let mut parts_left = (2 + 3) * repeat;
        let mut now = ms(1800);
        for _ in 0..repeat {
            let budget = split.budget(3, parts_left, now);
            parts_left -= 3;
            split.ran(budget, now, now + budget);
            now += budget;
        }
        // Each rerun took 0.36 s of the 1.2 s left, the later workloads 0.24 s each of
        // their 0.6 s, as the plan says reruns do.
        assert_eq!(now, ms(2520));
        assert_eq!(split.budget(1, 2, now), ms(240));
    }

    #[test]
    fn a_budget_that_cannot_hold_what_a_workload_cannot_do_without_is_refused_with_the_least_that_can()
     {
        let mut plan = quick();
        if let Some(v) = plan[0].config.vram_mut() {
            v.algorithms = vec![Algorithm::OwnAddress, Algorithm::Retention];
            v.retention_delay = Duration::from_secs(10);
        }
        // Two idle waits of 10 s, a tenth more and 5 s, in VRAM's 3 of 5 parts.
        let least = least_duration(&plan, None).map(|(d, p)| (d, p.config.name()));
        assert_eq!(least, Some((Duration::from_secs(45), WorkloadName::Vram)));
        let said = check_duration(&plan, None, Duration::from_secs(44), "quick")
            .map_err(|e| e.to_string())
            .unwrap_err();
        assert!(
            said.contains("a time budget of 44s is too short for profile quick")
                && said.contains("it needs at least 45s per device"),
            "{said}"
        );
        assert!(check_duration(&plan, None, Duration::from_secs(45), "quick").is_ok());
        // Without the retention test nothing is too short to plan.
        assert!(least_duration(&quick(), None).is_none());
    }
}
