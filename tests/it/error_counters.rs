//! Error counters on a badly failing card: with every word wrong, the VRAM test still
//! finishes its dispatches well within the fence timeout (counters are reduced per
//! workgroup and kept in device memory), and counts every wrong word exactly. The compute
//! comparison and the PCIe checksum, reduced the same way, still find a single fault.

use std::time::{Duration, Instant};

use crate::common::*;
use kiln::evidence::{Event, MemorySink};
use kiln::gpu::DeviceContext;
use kiln::workload::compute::{ComputeConfig, ComputeKind, ComputeTest};
use kiln::workload::pcie::{PcieConfig, PcieTest};
use kiln::workload::vram::algorithm::Algorithm;
use kiln::workload::vram::engine::AccessLayout;
use kiln::workload::vram::{VramReport, VramTest};
use kiln::workload::{KindTest, RunControl};

/// What every word holds after each write.
const PLANTED: u32 = 0xDEAD_BEEF;
const TESTED_BYTES: u64 = 64 * MIB;
const FENCE_TIMEOUT: Duration = Duration::from_secs(10);

/// Counters the host expects when every word of the own-address pattern was overwritten
/// by `PLANTED`.
#[derive(Debug, Default, PartialEq, Eq)]
struct Expected {
    errors: u64,
    flipped_bits: Vec<u64>,
    bit_position: Vec<u64>,
    zero_to_one: u64,
    one_to_zero: u64,
}

fn expected_counters(seed: u64, words: u64) -> Expected {
    let steps = Algorithm::OwnAddress.steps(0, seed, Duration::ZERO);
    let pattern = steps[1]
        .checks()
        .expect("own-address verifies in its second step");
    let mut e = Expected {
        flipped_bits: vec![0; 33],
        bit_position: vec![0; 32],
        ..Expected::default()
    };
    for w in 0..words {
        let expected = pattern.word(w);
        let diff = expected ^ PLANTED;
        if diff == 0 {
            continue;
        }
        e.errors += 1;
        e.flipped_bits[diff.count_ones() as usize] += 1;
        e.zero_to_one += u64::from((diff & PLANTED).count_ones());
        e.one_to_zero += u64::from((diff & expected).count_ones());
        let mut bits = diff;
        while bits != 0 {
            e.bit_position[bits.trailing_zeros() as usize] += 1;
            bits &= bits - 1;
        }
    }
    e
}

/// Runs one pass of own-address over 64 MiB with every word overwritten after the write.
/// Returns the report, the verify step's wall time and the whole run's wall time.
fn run_all_wrong(layout: AccessLayout) -> (VramReport, Duration, Duration) {
    let mut cfg = config(&[Algorithm::OwnAddress], TESTED_BYTES, TESTED_BYTES, layout);
    cfg.planted_all = Some(PLANTED);
    cfg.retest_cap = 4;
    let (vulkan, info) = device();
    let mut ctx = DeviceContext::open(&vulkan, &info).expect("open the device");
    ctx.set_fence_timeout(FENCE_TIMEOUT);
    let mut sink = MemorySink::default();
    let started = Instant::now();
    let report = VramTest { config: cfg }
        .run_report(&mut ctx, &RunControl::new(None), &mut sink)
        .expect("the VRAM test runs");
    let took = started.elapsed();
    let verify_wall = sink
        .events
        .iter()
        .find_map(|e| match &e.event {
            Event::Step { op, wall_ns, .. } if op == "verify" => {
                Some(Duration::from_nanos(*wall_ns))
            }
            _ => None,
        })
        .unwrap_or(Duration::MAX);
    eprintln!(
        "{layout:?}: verify of {} MiB with every word wrong took {verify_wall:?} (whole run {took:?}); \
         errors {}, device error {:?}",
        TESTED_BYTES / MIB,
        report.errors_total,
        report.run.device_error
    );
    (report, verify_wall, took)
}

/// The device decides these (its memory model, BAR, vendor): `scripts/test.sh` runs them
/// again on every emulated discrete card.
mod card {
    use super::*;

    #[test]
    fn every_word_wrong_is_counted_exactly_within_the_fence_timeout() {
        let seed = config(&[], 0, 0, AccessLayout::Contiguous).seed;
        let expected = expected_counters(seed, TESTED_BYTES / 4);
        // The pattern is a bijection of the index: at most one word can equal the constant.
        assert!(expected.errors >= TESTED_BYTES / 4 - 1, "{expected:?}");
        for layout in [AccessLayout::Contiguous, AccessLayout::Coalesced] {
            let (report, verify_wall, _) = run_all_wrong(layout);
            assert_eq!(report.run.device_error, None, "{layout:?}");
            assert_eq!(report.run.stopped_early, None, "{layout:?}");
            assert_eq!(report.coverage.tested_bytes, TESTED_BYTES, "{layout:?}");
            // Well within one fence timeout, though the timeout applies to each submission.
            assert!(
                verify_wall < FENCE_TIMEOUT / 2,
                "{layout:?}: the verify took {verify_wall:?}"
            );
            assert_eq!(report.errors_total, expected.errors, "{layout:?}");
            let capacity = config(&[], 0, 0, layout).record_capacity as usize;
            assert_eq!(report.records.len(), capacity, "{layout:?}");
            assert_eq!(
                report.records_dropped,
                expected.errors - capacity as u64,
                "{layout:?}"
            );
            let pattern = Algorithm::OwnAddress.steps(0, seed, Duration::ZERO)[1]
                .checks()
                .expect("a verify step");
            for r in &report.records {
                assert_eq!(r.actual, PLANTED, "{layout:?}: {r:?}");
                assert_eq!(
                    r.expected,
                    pattern.word(r.offset_bytes / 4),
                    "{layout:?}: {r:?}"
                );
                assert_eq!(r.span_elements, None, "{layout:?}: not a transient read");
            }
            let h = &report.histograms;
            assert_eq!(h.flipped_bits, expected.flipped_bits, "{layout:?}");
            assert_eq!(h.flipped_bits.iter().sum::<u64>(), report.errors_total);
            assert_eq!(h.flipped_bits[0], 0);
            assert_eq!(h.bit_position, expected.bit_position, "{layout:?}");
            assert_eq!(
                (h.zero_to_one, h.one_to_zero),
                (expected.zero_to_one, expected.one_to_zero),
                "{layout:?}"
            );
            let flipped: u64 = (0..33).map(|n| n as u64 * h.flipped_bits[n]).sum();
            assert_eq!(h.bit_position.iter().sum::<u64>(), flipped);
            assert_eq!(h.zero_to_one + h.one_to_zero, flipped);
        }
    }

    #[test]
    fn invocations_with_uneven_error_counts_are_counted_exactly() {
        // Contiguous layout on the CPU device: each invocation owns a run of 4096 elements
        // (16384 words). The first run gets far more wrong words than an invocation tallies
        // between flushes (255), the second a few, the rest none: the workgroup's invocations
        // take different paths and must still add up exactly.
        let run_words = 4 * 4096u64;
        let mut words: Vec<u64> = (0..700).collect();
        words.extend([run_words + 1, run_words + 77, run_words + 16_000]);
        words.extend((0..300).map(|i| 5 * run_words + 3 * i));
        let xor = |w: u64| (((w as u32).wrapping_mul(0x9E37_79B1)) >> 3) | 1;
        let mut cfg = config(
            &[Algorithm::OwnAddress],
            16 * MIB,
            16 * MIB,
            AccessLayout::Contiguous,
        );
        cfg.planted = words.iter().map(|&w| flip(w, xor(w))).collect();
        cfg.retest_cap = 4;
        let (report, _) = run(cfg);
        assert_eq!(report.run.device_error, None);
        assert_eq!(report.errors_total, words.len() as u64);
        assert_eq!(report.records.len(), words.len());
        let mut flipped_bits = vec![0u64; 33];
        let mut bit_position = vec![0u64; 32];
        for &w in &words {
            let d = xor(w);
            flipped_bits[d.count_ones() as usize] += 1;
            for (b, bin) in bit_position.iter_mut().enumerate() {
                *bin += u64::from(d >> b & 1);
            }
        }
        assert_eq!(report.histograms.flipped_bits, flipped_bits);
        assert_eq!(report.histograms.bit_position, bit_position);
        let flipped: u64 = bit_position.iter().sum();
        assert_eq!(
            report.histograms.zero_to_one + report.histograms.one_to_zero,
            flipped
        );
        let mut found: Vec<u64> = report.records.iter().map(|r| r.offset_bytes / 4).collect();
        found.sort_unstable();
        let mut planted = words.clone();
        planted.sort_unstable();
        assert_eq!(found, planted);
    }

    #[test]
    fn one_wrong_compute_lane_is_still_reported_exactly() {
        for kind in [ComputeKind::Fp32, ComputeKind::Int32] {
            let (vulkan, info) = device();
            let mut ctx = DeviceContext::open(&vulkan, &info).unwrap();
            let mut sink = MemorySink::default();
            let report = ComputeTest {
                config: ComputeConfig {
                    kinds: vec![kind],
                    rounds: Some(2),
                    items: Some(1 << 12),
                    inject: Some((4095, 1 << 30)),
                    ..ComputeConfig::default()
                },
            }
            .run_report(&mut ctx, &RunControl::new(None), &mut sink)
            .unwrap();
            let k = &report.kinds[0];
            assert_eq!(report.run.device_error, None, "{kind:?}");
            assert_eq!(k.mismatches, 2, "{kind:?}: one per round");
            assert_eq!(k.cpu_mismatches, 0, "{kind:?}");
            assert!(k.cpu_checked > 0, "{kind:?}: the CPU samples still arrive");
            assert_eq!(report.records.len(), 2, "{kind:?}");
            for m in &report.records {
                assert_eq!(m.item, 4095, "{kind:?}");
                assert_eq!(m.check, "redundant_run");
                let diff: Vec<u32> = m
                    .expected
                    .iter()
                    .zip(m.actual)
                    .map(|(a, b)| a ^ b)
                    .collect();
                assert_eq!(
                    diff.iter().filter(|&&d| d != 0).count(),
                    1,
                    "{kind:?}: {m:?}"
                );
                assert!(diff.contains(&(1 << 30)), "{kind:?}: {m:?}");
            }
        }
    }

    #[test]
    fn the_device_checksum_still_catches_one_corrupted_byte() {
        let (vulkan, info) = device();
        let mut ctx = DeviceContext::open(&vulkan, &info).unwrap();
        let mut sink = MemorySink::default();
        let report = PcieTest {
            config: PcieConfig {
                max_bytes: 4 * MIB,
                repeats: 1,
                inject_offset: Some(3 * MIB + 7),
                ..PcieConfig::default()
            },
        }
        .run_report(&mut ctx, &RunControl::new(None), &mut sink)
        .unwrap();
        assert_eq!(report.run.device_error, None);
        let c = report.corruption.first().expect("the corruption is found");
        assert_eq!(c.direction, "h2d", "the device's checksum disagreed: {c:?}");
        assert_eq!(c.offset, 3 * MIB + 7);
    }
}
