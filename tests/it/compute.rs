//! The compute test on the real driver: a clean run verifies over 10^9 multiply-adds
//! and finds nothing; one planted wrong lane is reported exactly.

use std::time::{Duration, Instant};

use crate::common::*;
use kiln::evidence::MemorySink;
use kiln::gpu::DeviceContext;
use kiln::workload::compute::{ComputeConfig, ComputeKind, ComputeReport, ComputeTest, LoadShape};
use kiln::workload::{KindTest, Report, RunControl, WorkloadStatus};

/// One compute run at a time in this binary: the load-shape test measures work done per
/// wall second at each duty level, which a sibling test's run on the same two cores would
/// skew (the levels it overlaps read low, whatever their duty).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run(config: ComputeConfig, budget: Option<Duration>) -> ComputeReport {
    run_timed(config, budget).0
}

/// [`run`], and how long it took from the moment it had the device to itself.
fn run_timed(config: ComputeConfig, budget: Option<Duration>) -> (ComputeReport, Duration) {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let (vulkan, info) = device();
    let mut ctx = DeviceContext::open(&vulkan, &info).unwrap();
    let mut sink = MemorySink::default();
    let report = ComputeTest { config }
        .run_report(&mut ctx, &RunControl::new(budget), &mut sink)
        .unwrap();
    (report, started.elapsed())
}

#[test]
fn bad_parameters_are_refused_with_a_reason() {
    let (vulkan, info) = device();
    let mut ctx = DeviceContext::open(&vulkan, &info).unwrap();
    let mut sink = MemorySink::default();
    for config in [
        ComputeConfig {
            items: Some(1000),
            ..ComputeConfig::default()
        },
        ComputeConfig {
            kinds: vec![],
            ..ComputeConfig::default()
        },
        ComputeConfig {
            inject: Some((1 << 20, 1)),
            items: Some(4096),
            ..ComputeConfig::default()
        },
    ] {
        let err = ComputeTest { config }
            .run_report(&mut ctx, &RunControl::new(None), &mut sink)
            .expect_err("refused");
        assert!(!err.to_string().is_empty());
    }
}

/// Timed: each holds a load for a time or measures one, so they run after the rest, one
/// at a time (`scripts/test.sh`).
mod timed {
    use super::*;

    #[test]
    fn load_shapes_honour_the_budget() {
        for shape in [
            LoadShape::Pulsed {
                on_ms: 100,
                off_ms: 100,
            },
            LoadShape::Sweep,
        ] {
            // Short dispatches, so that a 200 ms period can hold a load level's share of
            // rounds (the default 20 ms dispatches are too coarse for levels this short).
            let (report, took) = run_timed(
                ComputeConfig {
                    shape,
                    dispatch_target: Duration::from_millis(2),
                    // The CPU device's size, also where it poses as a discrete GPU (whose
                    // default would make one round outlast a short load level).
                    items: Some(1 << 12),
                    ..ComputeConfig::default()
                },
                Some(Duration::from_secs(2)),
            );
            assert!(
                took < Duration::from_millis(2600),
                "{shape:?} took {took:?}"
            );
            assert_eq!(report.faults(), 0);
            if shape == LoadShape::Sweep {
                assert!(report.levels.len() >= 5, "{:?}", report.levels);
                // Compare the three lowest levels with the three highest: one level alone is
                // one 200 ms period on a shared machine.
                let mean = |l: &[kiln::workload::compute::LevelResult]| {
                    l.iter().map(|x| x.gops_per_wall_s).sum::<f64>() / l.len() as f64
                };
                let n = report.levels.len();
                let (low, high) = (mean(&report.levels[..3]), mean(&report.levels[n - 3..]));
                assert!(
                    high > 1.5 * low,
                    "higher levels do more work ({low:.1} vs {high:.1}): {:?}",
                    report.levels
                );
            }
        }
    }
}

/// The device decides these (its memory model, BAR, vendor): `scripts/test.sh` runs them
/// again on every emulated discrete card.
mod card {
    use super::*;

    #[test]
    fn a_clean_run_verifies_over_a_billion_operations_and_finds_nothing() {
        // A billion verified operations, whatever they take: one 4 s run on an idle CPU
        // device, more where other work shares its cores (CI beside two busy processes
        // verified 0.8 billion in 4 s). Every run must be clean; the condition is the
        // work verified, not the time.
        const RUNS_AT_MOST: usize = 5;
        let mut verified = 0u64;
        let mut runs = 0;
        while verified < 1_000_000_000 && runs < RUNS_AT_MOST {
            let report = run(ComputeConfig::default(), Some(Duration::from_secs(4)));
            runs += 1;
            verified += report.kinds.iter().map(|k| k.verified_ops).sum::<u64>();
            a_clean_run(&report);
        }
        assert!(
            verified >= 1_000_000_000,
            "only {verified} verified in {runs} runs of 4 s"
        );
    }

    /// A run that found nothing and ran every kind it was given, each at a chain count
    /// chosen for the device.
    fn a_clean_run(report: &ComputeReport) {
        assert_eq!(report.faults(), 0, "{:?}", report.records.first());
        assert_eq!(report.status(), WorkloadStatus::Passed);
        for k in &report.kinds {
            assert!(k.rounds > 0 && k.gops > 0.0, "{k:?}");
            // Unset, the chain count is chosen per kind from what fills the device.
            assert!([4, 8, 16].contains(&k.chains), "{k:?}");
            assert_eq!(
                k.cpu_checked > 0,
                k.kind != ComputeKind::Fp16,
                "{k:?}: fp16 has no CPU reference"
            );
        }
    }

    #[test]
    fn one_corrupted_lane_is_reported_exactly() {
        for kind in [ComputeKind::Fp32, ComputeKind::Int32, ComputeKind::Fp16] {
            let report = run(
                ComputeConfig {
                    kinds: vec![kind],
                    rounds: Some(3),
                    inject: Some((1234, 1 << 7)),
                    ..ComputeConfig::default()
                },
                None,
            );
            let k = &report.kinds[0];
            assert_eq!(k.mismatches, 3, "{kind:?}: one per round");
            assert_eq!(
                k.cpu_mismatches, 0,
                "the first run is right, and the CPU agrees with it"
            );
            assert_eq!(report.records.len(), 3);
            for (round, m) in report.records.iter().enumerate() {
                assert_eq!(
                    (m.item, m.round, m.first_invocation),
                    (1234, round as u32, 1234)
                );
                assert_eq!(m.check, "redundant_run");
                assert_eq!(m.expected[0] ^ m.actual[0], 1 << 7);
                assert_eq!(&m.expected[1..], &m.actual[1..]);
                let second = m.second_invocation.unwrap();
                assert_ne!(
                    second, 1234,
                    "the shuffled run put the item on another invocation"
                );
                assert_eq!(m.second_workgroup, Some(second / 64));
            }
            assert_eq!(report.status(), WorkloadStatus::Failed);
        }
    }

    #[test]
    fn a_small_fault_in_the_middle_of_a_chain_is_found() {
        // A few ulp flipped after 8 of the chain's blocks: the contracting fp chains would
        // forget it by their end, but the sum of every state carries it to the result.
        for (kind, xor) in [
            (ComputeKind::Fp32, 1 << 3),
            (ComputeKind::Fp16, 1 << 2),
            (ComputeKind::Int32, 1 << 3),
        ] {
            let report = run(
                ComputeConfig {
                    kinds: vec![kind],
                    rounds: Some(2),
                    inject: Some((77, xor)),
                    inject_step: Some(8),
                    ..ComputeConfig::default()
                },
                None,
            );
            let k = &report.kinds[0];
            assert!(k.iterations > 8, "{kind:?}: the fault is mid-chain");
            assert_eq!(k.mismatches, 2, "{kind:?}: one per round");
            assert_eq!(k.cpu_mismatches, 0, "{kind:?}: the first run is right");
            for m in &report.records {
                assert_eq!((m.item, m.check.as_str()), (77, "redundant_run"));
                assert_ne!(m.expected, m.actual);
            }
            assert_eq!(report.status(), WorkloadStatus::Failed);
        }
    }
}
