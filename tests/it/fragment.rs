//! The fragmentation torture on the real driver: a clean run flags nothing and returns to
//! its baseline; a planted leak and a planted fragmenting pattern are each found.

use std::time::{Duration, Instant};

use crate::common::*;
use kiln::evidence::MemorySink;
use kiln::gpu::DeviceContext;
use kiln::workload::fragment::{FragmentConfig, FragmentReport, FragmentTest};
use kiln::workload::{KindTest, Report, RunControl, WorkloadStatus};

/// One torture at a time: a driver's memory usage (`VK_EXT_memory_budget`) is the
/// process's, which the other tests of this binary would change while one is judged.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run(config: FragmentConfig, budget: Option<Duration>) -> (FragmentReport, u64, u64) {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (vulkan, info) = device();
    let mut ctx = DeviceContext::open(&vulkan, &info).unwrap();
    let before = ctx.allocator_stats().allocated_bytes;
    let mut sink = MemorySink::default();
    let report = FragmentTest { config }
        .run_report(&mut ctx, &RunControl::new(budget), &mut sink)
        .unwrap();
    let after = ctx.allocator_stats().allocated_bytes;
    (report, before, after)
}

/// The device decides these (its memory model, BAR, vendor): `scripts/test.sh` runs them
/// again on every emulated discrete card.
mod card {
    use super::*;

    #[test]
    fn a_clean_run_flags_nothing_and_returns_to_its_baseline() {
        let (report, before, after) = run(
            FragmentConfig {
                rounds: Some(3),
                ..FragmentConfig::default()
            },
            None,
        );
        assert!(report.findings.is_empty(), "{:?}", report.findings);
        assert!(report.refused_while_free.is_empty());
        assert!(report.large_requests >= 3 * 5);
        assert!(report.allocator_allocations > 100 && report.raw_allocations > 20);
        assert_eq!(
            report.allocator_allocations as usize, report.allocator_latency.count,
            "each allocation counted once"
        );
        assert!(
            report.allocator_allocations < 3 * 300,
            "at most one allocation per operation"
        );
        assert!(
            report.allocator_latency.count > 0
                && report.allocator_latency.p50_us <= report.allocator_latency.p99_us
        );
        assert!(
            report
                .residuals
                .iter()
                .all(|r| r.allocator_bytes == report.baseline.allocator_bytes)
        );
        assert!(report.returned_to_baseline);
        assert_eq!(
            after, before,
            "the allocator holds nothing of the test afterwards"
        );
        assert_eq!(report.status(), WorkloadStatus::Passed);
    }

    #[test]
    fn a_planted_leak_is_found_and_still_cleaned_up() {
        let (report, before, after) = run(
            FragmentConfig {
                rounds: Some(3),
                plant_leak: true,
                ..FragmentConfig::default()
            },
            None,
        );
        assert!(
            report
                .findings
                .iter()
                .any(|f| f.message.starts_with("leak:")),
            "{:?}",
            report.findings
        );
        let residual: Vec<u64> = report.residuals.iter().map(|r| r.allocator_bytes).collect();
        assert!(
            residual.windows(2).all(|w| w[1] > w[0]),
            "grows every round: {residual:?}"
        );
        assert_eq!(report.status(), WorkloadStatus::SoftwareFault);
        assert_eq!(after, before, "the workload released even the planted leak");
    }

    #[test]
    fn a_planted_fragmenting_pattern_is_refused_with_memory_free() {
        let (report, _, _) = run(
            FragmentConfig {
                rounds: Some(1),
                plant_fragmentation: true,
                ..FragmentConfig::default()
            },
            None,
        );
        assert_eq!(report.refused_while_free.len(), 1, "{:?}", report.findings);
        let r = &report.refused_while_free[0];
        assert!(r.free_bytes >= r.request_bytes, "enough was free in total");
        assert!(
            r.largest_free_span_bytes < r.request_bytes,
            "but not in one piece"
        );
        assert!(
            report
                .findings
                .iter()
                .any(|f| f.message.starts_with("alloc_fail_fragmented"))
        );
        assert!(
            !report
                .findings
                .iter()
                .any(|f| f.message.starts_with("leak")),
            "{:?}",
            report.findings
        );
        assert_eq!(report.status(), WorkloadStatus::SoftwareFault);
    }

    #[test]
    fn the_torture_honours_its_budget_and_refuses_bad_settings() {
        let started = Instant::now();
        let (report, _, _) = run(FragmentConfig::default(), Some(Duration::from_millis(500)));
        assert!(report.rounds >= 1);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        let (vulkan, info) = device();
        let mut ctx = DeviceContext::open(&vulkan, &info).unwrap();
        let mut sink = MemorySink::default();
        for config in [
            FragmentConfig {
                cap_bytes: Some(100 * MIB),
                ..FragmentConfig::default()
            },
            FragmentConfig {
                ops_per_round: 0,
                ..FragmentConfig::default()
            },
        ] {
            let err = FragmentTest { config }
                .run_report(&mut ctx, &RunControl::new(None), &mut sink)
                .expect_err("refused");
            assert!(err.to_string().contains("fragmentation"), "{err}");
        }
    }
}
