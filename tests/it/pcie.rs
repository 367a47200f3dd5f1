//! The PCIe probe on the real driver: clean transfers verify; one planted corrupted byte
//! is found at its offset, in the direction it happened.

use crate::common::*;
use kiln::evidence::MemorySink;
use kiln::gpu::DeviceContext;
use kiln::workload::pcie::{PcieConfig, PcieReport, PcieTest};
use kiln::workload::{KindTest, Report, RunControl, WorkloadStatus};

fn run(config: PcieConfig) -> PcieReport {
    let (vulkan, info) = device();
    let mut ctx = DeviceContext::open(&vulkan, &info).unwrap();
    let mut sink = MemorySink::default();
    PcieTest { config }
        .run_report(&mut ctx, &RunControl::new(None), &mut sink)
        .unwrap()
}

#[test]
fn bad_sizes_are_refused() {
    let (vulkan, info) = device();
    let mut ctx = DeviceContext::open(&vulkan, &info).unwrap();
    let mut sink = MemorySink::default();
    for config in [
        PcieConfig {
            min_bytes: 1 << 20,
            max_bytes: 1 << 10,
            ..PcieConfig::default()
        },
        PcieConfig {
            max_bytes: (1 << 20) + 2,
            ..PcieConfig::default()
        },
        PcieConfig {
            max_bytes: 1 << 20,
            inject_offset: Some(1 << 21),
            ..PcieConfig::default()
        },
    ] {
        let err = PcieTest { config }
            .run_report(&mut ctx, &RunControl::new(None), &mut sink)
            .expect_err("refused");
        assert!(err.to_string().contains("PCIe"), "{err}");
    }
}

/// The device decides these (its memory model, BAR, vendor): `scripts/test.sh` runs them
/// again on every emulated discrete card.
mod card {
    use super::*;

    #[test]
    fn clean_transfers_of_every_size_verify() {
        let report = run(PcieConfig {
            max_bytes: 16 * MIB,
            repeats: 2,
            ..PcieConfig::default()
        });
        let sizes: Vec<u64> = report.sizes.iter().map(|s| s.bytes).collect();
        assert_eq!(
            sizes,
            vec![
                4 << 10,
                16 << 10,
                64 << 10,
                256 << 10,
                1 << 20,
                4 << 20,
                16 << 20
            ]
        );
        assert!(report.corruption.is_empty(), "{:?}", report.corruption);
        assert_eq!(report.transfers_verified, 7 * 2 * 2);
        assert!(
            report.peak_h2d_gbps > 0.0
                && report.peak_d2h_gbps > 0.0
                && report.peak_bidir_gbps > 0.0
        );
        assert!(report.upload_memory.contains(&"host_visible".to_string()));
        assert!(report.readback_memory.contains(&"host_visible".to_string()));
        assert!(report.sizes.iter().all(|s| s.h2d_latency_us > 0.0));
        assert_eq!(report.status(), WorkloadStatus::Passed);
    }

    #[test]
    fn a_corrupted_byte_is_caught_where_and_how_it_happened() {
        let report = run(PcieConfig {
            max_bytes: 4 * MIB,
            repeats: 1,
            inject_offset: Some(1_234_567),
            ..PcieConfig::default()
        });
        assert_eq!(report.corruption.len(), 1, "{:?}", report.corruption);
        let c = &report.corruption[0];
        assert_eq!(
            (c.direction.as_str(), c.bytes, c.offset, c.differing_bytes),
            ("h2d", 4 * MIB, 1_234_567, 1)
        );
        assert_eq!(c.expected ^ c.actual, 0x5A);
        assert_eq!(report.status(), WorkloadStatus::Failed);
    }

    #[test]
    fn the_probe_stops_within_one_size_of_its_budget() {
        let (vulkan, info) = device();
        let mut ctx = DeviceContext::open(&vulkan, &info).unwrap();
        let mut sink = MemorySink::default();
        let report = PcieTest {
            config: PcieConfig {
                max_bytes: 16 * MIB,
                ..PcieConfig::default()
            },
        }
        .run_report(
            &mut ctx,
            &RunControl::new(Some(std::time::Duration::ZERO)),
            &mut sink,
        )
        .unwrap();
        assert_eq!(
            report.sizes.len(),
            1,
            "one size, then the spent budget stops it"
        );
        assert!(
            report
                .run
                .stopped_early
                .as_deref()
                .unwrap()
                .contains("time budget")
        );
        assert_eq!(report.status(), WorkloadStatus::Incomplete);
    }
}
