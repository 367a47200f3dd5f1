//! `kiln run`'s options: the profile's plan with the command line's flags laid over it.

use super::RunOptions;
use crate::cmd::cli::{LayoutArg, LoadArg, RunArgs};
use crate::error::AppError;
use crate::profile::Profile;
use std::time::Duration;

use crate::workload::compute::LoadShape;
use crate::workload::matrix::MatrixShape;
use crate::workload::vram::algorithm::Algorithm;
use crate::workload::vram::engine::AccessLayout;
use crate::workload::{PlannedWorkload, WorkloadConfig};

impl From<LoadArg> for LoadShape {
    fn from(arg: LoadArg) -> LoadShape {
        match arg {
            LoadArg::Steady => LoadShape::Steady,
            LoadArg::Pulsed => LoadShape::Pulsed {
                on_ms: 100,
                off_ms: 100,
            },
            LoadArg::Sweep => LoadShape::Sweep,
        }
    }
}

impl From<LayoutArg> for AccessLayout {
    fn from(arg: LayoutArg) -> AccessLayout {
        match arg {
            LayoutArg::Contiguous => AccessLayout::Contiguous,
            LayoutArg::Coalesced => AccessLayout::Coalesced,
        }
    }
}

/// The profile's plan with the command line's overrides laid over it, each flag bounded
/// as the key it overrides and refused where no workload of the run would use it.
/// `progress`: whether the run draws its bars (stderr is a terminal).
pub fn options(args: &RunArgs, profile: Profile, progress: bool) -> Result<RunOptions, AppError> {
    use crate::workload::registry::{PlannedWorkload, WorkloadConfig, WorkloadName};
    let mut plan = profile.workloads;
    if let Some(list) = &args.workloads {
        let names = WorkloadName::parse_list(list).map_err(AppError::Usage)?;
        plan.retain(|p| names.contains(&p.config.name()));
        for name in names {
            if !plan.iter().any(|p| p.config.name() == name) {
                plan.push(PlannedWorkload::default_of(name));
            }
        }
    }
    let algorithms = match &args.algorithms {
        Some(list) => Some(Algorithm::parse_list(list).map_err(AppError::Usage)?),
        None => None,
    };
    let retest_cap = args.retest_cap.or(profile.confirm.map(|c| c.retest_cap));
    let vram_overrides = |v: &mut crate::workload::vram::VramConfig| {
        if let Some(a) = &algorithms {
            v.algorithms = a.clone();
        }
        if args.vram.vram_bytes.is_some() {
            v.percent = None;
        }
        v.bytes = args.vram.vram_bytes.or(v.bytes);
        v.percent = args.vram.vram_percent.or(v.percent);
        v.reserve_bytes = args.vram.reserve.or(v.reserve_bytes);
        v.passes = args.passes.or(v.passes);
        v.record_capacity = args.records.unwrap_or(v.record_capacity);
        v.retest_cap = retest_cap.unwrap_or(v.retest_cap);
        v.retention_delay = args.retention_delay.unwrap_or(v.retention_delay);
        v.seed = args.seed.unwrap_or(v.seed);
        v.layout = args.vram.layout.map(AccessLayout::from).or(v.layout);
        v.max_buffer_bytes = args.vram.max_buffer.or(v.max_buffer_bytes);
        if let Some(word) = args.test_stuck_word {
            v.planted = vec![crate::workload::vram::engine::PlantedFault::stuck_bits(
                word,
            )];
        }
    };
    let compute_overrides = |c: &mut crate::workload::compute::ComputeConfig| {
        if let Some(shape) = args.load {
            c.shape = shape.into();
        }
        c.rounds = args.passes.map(|p| p * 2).or(c.rounds);
        // A pulsed or swept load is a shape of its own: the target holds the steady ones.
        if c.shape == LoadShape::Steady {
            c.power_target = args.power_target.or(c.power_target);
        }
        c.record_capacity = args.records.unwrap_or(c.record_capacity);
        // The compute inputs take the low half of the seed, as the patterns take all of it.
        c.seed = args.seed.map_or(c.seed, |s| s as u32);
    };
    let matrix_overrides = |m: &mut crate::workload::matrix::MatrixConfig| {
        if m.shape == MatrixShape::Steady {
            m.power_target = args.power_target.or(m.power_target);
        }
    };
    for p in &mut plan {
        match &mut p.config {
            WorkloadConfig::Vram(v) => vram_overrides(v),
            WorkloadConfig::Compute(c) => compute_overrides(c),
            WorkloadConfig::Heat(h) => {
                vram_overrides(&mut h.vram);
                compute_overrides(&mut h.compute);
                matrix_overrides(&mut h.matrix);
            }
            WorkloadConfig::Psu(p) => {
                vram_overrides(&mut p.heat.vram);
                compute_overrides(&mut p.heat.compute);
                matrix_overrides(&mut p.heat.matrix);
            }
            WorkloadConfig::Matrix(m) => matrix_overrides(m),
            WorkloadConfig::Pcie(c) => c.max_bytes = args.pcie_max_bytes.unwrap_or(c.max_bytes),
            // The region is its share of the memory the flag gives the VRAM tests.
            WorkloadConfig::Resident(r) => {
                if let Some(b) = args.vram.vram_bytes {
                    r.bytes = Some((b as f64 * r.share_percent / 100.0) as u64);
                }
                r.seed = args.seed.unwrap_or(r.seed);
            }
            // The command line's flags are for the workloads above; the others take their
            // settings from profiles.
            _ => {}
        }
    }
    for fault in &args.test_fault {
        plant_test_fault(fault, &mut plan).map_err(AppError::Usage)?;
    }
    check_every_flag_applies(args, &plan)?;
    // A pass count alone means "exactly that many passes", with no time budget.
    let duration = match (args.duration, args.passes) {
        (Some(d), _) => Some(d),
        (None, Some(_)) => None,
        (None, None) => profile.duration,
    };
    if let Some(d) = duration {
        crate::cmd::run::check_duration(&plan, profile.confirm, d, &profile.name)?;
    }
    let step_timeout = args.step_timeout.unwrap_or(profile.step_timeout);
    let telemetry_interval = args
        .telemetry_interval
        .or(profile.telemetry_interval)
        .unwrap_or(crate::telemetry::DEFAULT_INTERVAL);
    Ok(crate::cmd::run::RunOptions {
        profile: profile.name,
        profile_file: profile.file,
        profile_duration: profile.duration,
        devices: args.devices.clone(),
        duration,
        plan,
        stop_on_first_failure: profile.stop_on_first_failure,
        confirm: profile.confirm,
        wait_idle: args.wait_idle || profile.wait_idle,
        out: args.out.clone(),
        fence_timeout: crate::cmd::run::fence_timeout_for(
            args.vram.fence_timeout.or(profile.fence_timeout),
            step_timeout,
        )
        .map_err(AppError::Usage)?,
        progress,
        telemetry_interval: (!telemetry_interval.is_zero()).then_some(telemetry_interval),
        thresholds: match &args.thresholds {
            Some(path) => {
                profile
                    .thresholds
                    .overlay(path)
                    .map_err(|e| AppError::Usage(e.to_string()))?
                    .0
            }
            None => profile.thresholds,
        },
        step_timeout,
        test_hooks: crate::cmd::run::TestHooks {
            replicate: args.replicate.map_or(1, usize::from),
            hang_slot: args.test_hang_device,
            crash_slot: args.test_crash_device,
            busy_slot: args.test_busy_device,
            telemetry_replay: args.test_telemetry_replay.clone(),
        },
    })
}

/// Refuses a flag that no workload of the run would use: kiln never accepts an input it
/// then ignores (`--load` on a VRAM-only run, `--retention-delay` without retention).
fn check_every_flag_applies(
    args: &RunArgs,
    plan: &[crate::workload::registry::PlannedWorkload],
) -> Result<(), AppError> {
    use crate::workload::registry::WorkloadConfig;
    let has = |pred: &dyn Fn(&WorkloadConfig) -> bool| plan.iter().any(|p| pred(&p.config));
    let vram = has(&|c| c.vram().is_some());
    let compute = has(&|c| {
        matches!(
            c,
            WorkloadConfig::Compute(_) | WorkloadConfig::Heat { .. } | WorkloadConfig::Psu(_)
        )
    });
    let pcie = has(&|c| matches!(c, WorkloadConfig::Pcie(_)));
    let retention = plan
        .iter()
        .filter_map(|p| p.config.vram())
        .any(|v| v.algorithms.contains(&Algorithm::Retention));
    let given = |set: bool, flag: &str, applies: bool, to: &str| -> Result<(), AppError> {
        if set && !applies {
            let names: Vec<&str> = plan.iter().map(|p| p.config.name().as_str()).collect();
            return Err(AppError::Usage(format!(
                "{flag} applies to {to}, which this run does not have (workloads: {}): it would be ignored",
                names.join(", ")
            )));
        }
        Ok(())
    };
    let v = &args.vram;
    let memory = "the vram and heat workloads";
    let sized = vram || has(&|c| matches!(c, WorkloadConfig::Resident(_)));
    given(
        v.vram_bytes.is_some(),
        "--vram-bytes",
        sized,
        "the vram, heat and resident workloads",
    )?;
    given(v.vram_percent.is_some(), "--vram-percent", vram, memory)?;
    given(v.reserve.is_some(), "--reserve", vram, memory)?;
    given(v.layout.is_some(), "--layout", vram, memory)?;
    given(v.max_buffer.is_some(), "--max-buffer", vram, memory)?;
    given(args.algorithms.is_some(), "--algorithms", vram, memory)?;
    given(args.retest_cap.is_some(), "--retest-cap", vram, memory)?;
    given(
        args.test_stuck_word.is_some(),
        "--test-stuck-word",
        vram,
        memory,
    )?;
    given(
        args.retention_delay.is_some(),
        "--retention-delay",
        retention,
        "the retention algorithm",
    )?;
    let patterns = "the vram, compute and heat workloads";
    given(args.passes.is_some(), "--passes", vram || compute, patterns)?;
    given(
        args.records.is_some(),
        "--records",
        vram || compute,
        patterns,
    )?;
    given(args.seed.is_some(), "--seed", vram || compute, patterns)?;
    given(
        args.load.is_some(),
        "--load",
        compute,
        "the compute and heat workloads",
    )?;
    given(
        args.pcie_max_bytes.is_some(),
        "--pcie-max-bytes",
        pcie,
        "the pcie workload",
    )?;
    let steady = has(&|c| match c {
        WorkloadConfig::Compute(c) => c.shape == LoadShape::Steady,
        WorkloadConfig::Matrix(m) => m.shape == MatrixShape::Steady,
        WorkloadConfig::Heat { .. } => true,
        _ => false,
    });
    given(
        args.power_target.is_some(),
        "--power-target",
        steady,
        "the steady compute, matrix and heat workloads",
    )?;
    Ok(())
}

/// Plants a fault a burn-in detector finds (`--test-fault`, tests only) in the planned
/// workloads it applies to.
fn plant_test_fault(spec: &str, plan: &mut [PlannedWorkload]) -> Result<(), String> {
    let parts: Vec<&str> = spec.split(':').collect();
    let bad = || {
        format!(
            "--test-fault {}: expected decay:WORD:SECONDS, low-duty:DUTY, pause or cpu",
            crate::text::quote(spec)
        )
    };
    let mut planted = false;
    for p in plan.iter_mut() {
        match (&mut p.config, parts.as_slice()) {
            (WorkloadConfig::Resident(r), ["decay", word, seconds]) => {
                r.inject = Some(crate::workload::resident::DelayedFault {
                    word: word.parse().map_err(|_| bad())?,
                    xor_mask: 1 << 5,
                    after: Duration::from_secs_f64(seconds.parse().map_err(|_| bad())?),
                });
                planted = true;
            }
            (WorkloadConfig::Compute(c), ["low-duty", duty]) => {
                c.inject = Some((0, 1 << 7));
                c.inject_when = Some(crate::workload::compute::InjectWhen::BelowDuty(
                    duty.parse().map_err(|_| bad())?,
                ));
                planted = true;
            }
            (WorkloadConfig::Matrix(m), ["low-duty", duty]) => {
                m.plant = Some(crate::workload::matrix::PlantedFault {
                    row: 0,
                    col: 0,
                    rows: 1,
                    cols: 1,
                    xor: 1,
                });
                m.plant_when = Some(crate::workload::compute::InjectWhen::BelowDuty(
                    duty.parse().map_err(|_| bad())?,
                ));
                planted = true;
            }
            (WorkloadConfig::Psu(c), ["cpu"]) => {
                c.cpu_fault = true;
                planted = true;
            }
            (WorkloadConfig::Compute(c), ["pause"]) => {
                c.inject = Some((0, 1 << 7));
                c.inject_when = Some(crate::workload::compute::InjectWhen::AwayFromLoad);
                planted = true;
            }
            _ => {}
        }
    }
    if planted {
        Ok(())
    } else {
        Err(format!("{}, or no planned workload takes it", bad()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::registry::WorkloadConfig;
    use clap::Parser;

    /// `kiln run ARGS`' options under the bundled profile it names (quick by default).
    fn options_of(args: &[&str]) -> Result<RunOptions, AppError> {
        let cli = crate::cmd::cli::Cli::try_parse_from(["kiln", "run"].iter().chain(args))
            .map_err(|e| AppError::Usage(e.to_string()))?;
        let crate::cmd::cli::Command::Run(run) = cli.command else {
            unreachable!("parsed as run");
        };
        let profile =
            crate::profile::load(&run.profile).map_err(|e| AppError::Usage(e.to_string()))?;
        options(&run, profile, false)
    }

    fn compute_shapes(o: &RunOptions) -> Vec<LoadShape> {
        o.plan
            .iter()
            .filter_map(|p| match &p.config {
                WorkloadConfig::Compute(c) => Some(c.shape),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn each_load_shape_flag_sets_that_shape() {
        for (flag, shape) in [
            ("steady", LoadShape::Steady),
            (
                "pulsed",
                LoadShape::Pulsed {
                    on_ms: 100,
                    off_ms: 100,
                },
            ),
            ("sweep", LoadShape::Sweep),
        ] {
            let o = options_of(&["--load", flag]).unwrap_or_else(|e| panic!("{flag}: {e}"));
            assert_eq!(compute_shapes(&o), vec![shape], "{flag}");
        }
        assert!(options_of(&["--load", "wobbly"]).is_err());
    }

    #[test]
    fn a_flag_no_workload_would_use_is_refused_and_one_that_applies_is_laid_over() {
        let e = options_of(&["--workloads", "vram", "--load", "pulsed"]).unwrap_err();
        assert!(
            e.to_string()
                .contains("--load applies to the compute and heat workloads"),
            "{e}"
        );
        let e = options_of(&["--retention-delay", "5s"]).unwrap_err();
        assert!(e.to_string().contains("the retention algorithm"), "{e}");
        let o = options_of(&[
            "--workloads",
            "vram",
            "--layout",
            "coalesced",
            "--passes",
            "2",
        ])
        .unwrap();
        let vram = o.plan[0].config.vram().unwrap();
        assert_eq!(vram.layout, Some(AccessLayout::Coalesced));
        assert_eq!(vram.passes, Some(2));
        assert_eq!(o.duration, None, "a pass count alone means no time budget");
        // A power target holds a steady load only: not the pulsed compute of burn-in's.
        let o = options_of(&[
            "--profile",
            "burn-in",
            "--power-target",
            "90",
            "--duration",
            "1h",
        ])
        .unwrap();
        let targets: Vec<Option<u32>> = o
            .plan
            .iter()
            .filter_map(|p| match &p.config {
                WorkloadConfig::Compute(c) => Some(c.power_target),
                _ => None,
            })
            .collect();
        // Nor the paused one's: its pauses are its own load.
        assert_eq!(targets, vec![Some(90), None, None, None, Some(90)]);
    }
}
