//! The VRAM test's detectors on the real driver: clean runs find nothing; planted faults
//! are found at their exact offsets, with their exact bits, and classified right.

use crate::common::*;
use kiln::evidence::Event;
use kiln::workload::vram::algorithm::{ALL, Algorithm};
use kiln::workload::vram::classify::{ErrorShape, RetestClass};
use kiln::workload::vram::engine::{AccessLayout, PlantedFault};
use kiln::workload::{Report, WorkloadStatus};

/// Word index of byte `offset` in buffer `buffer` when every buffer is 4 MiB.
fn word_in_buffer(buffer: u64, offset: u64) -> u64 {
    (buffer * 4 * MIB + offset) / 4
}

/// The device decides these (its memory model, BAR, vendor): `scripts/test.sh` runs them
/// again on every emulated discrete card.
mod card {
    use super::*;

    #[test]
    fn every_algorithm_on_clean_memory_finds_nothing_in_both_layouts() {
        for layout in [AccessLayout::Contiguous, AccessLayout::Coalesced] {
            let (report, sink) = run(config(&ALL, 16 * MIB, 4 * MIB, layout));
            assert_eq!(
                report.errors_total,
                0,
                "{layout:?}: {:?}",
                report.records.first()
            );
            assert!(report.records.is_empty() && report.retests.is_empty());
            assert_eq!(report.status(), WorkloadStatus::Passed, "{layout:?}");
            assert_eq!(report.coverage.tested_bytes, 16 * MIB);
            assert!(report.coverage.of_sized >= 0.9);
            for a in &report.algorithms {
                assert_eq!(a.passes_completed, 1, "{layout:?} {:?}", a.algorithm);
            }
            let steps = sink
                .events
                .iter()
                .filter(|e| {
                    matches!(
                        &e.event,
                        Event::Step {
                            completed: true,
                            ..
                        }
                    )
                })
                .count();
            // own-address 2, moving inversions 8, modulo-20 40, random 4, backgrounds 20,
            // retention 4 (its idle periods are not sweeps).
            assert_eq!(steps, 78, "{layout:?}");
        }
    }

    #[test]
    fn single_and_multi_bit_flips_are_found_at_their_offsets_past_the_first_buffer() {
        for layout in [AccessLayout::Contiguous, AccessLayout::Coalesced] {
            let single = word_in_buffer(2, 0x1_2344);
            let multi = word_in_buffer(3, 0x3F_FFFC);
            let mut cfg = config(&[Algorithm::OwnAddress], 16 * MIB, 4 * MIB, layout);
            cfg.planted = vec![flip(single, 1 << 17), flip(multi, 0x8000_0101)];
            let (report, _) = run(cfg);
            assert_eq!(report.errors_total, 2, "{layout:?}");
            let by_offset = |o: u64| {
                report
                    .records
                    .iter()
                    .find(|r| r.offset_bytes == o)
                    .expect("recorded")
            };
            let s = by_offset(single * 4);
            assert_eq!(s.buffer, 2);
            assert_eq!(s.buffer_offset_bytes, 0x1_2344);
            assert_eq!(s.expected ^ s.actual, 1 << 17);
            assert_eq!(s.flipped_bits, vec![17]);
            assert_eq!(s.shape, ErrorShape::SingleBit);
            let m = by_offset(multi * 4);
            assert_eq!((m.buffer, m.buffer_offset_bytes), (3, 0x3F_FFFC));
            assert_eq!(m.expected ^ m.actual, 0x8000_0101);
            assert_eq!(m.shape, ErrorShape::MultiBit);
            for r in &report.retests {
                assert_eq!(
                    r.class,
                    RetestClass::NotReproduced,
                    "a one-time flip does not come back"
                );
            }
            assert_eq!(report.retests.len(), 2);
            assert_eq!(report.histograms.flipped_bits[1], 1);
            assert_eq!(report.histograms.flipped_bits[3], 1);
            assert_eq!(report.histograms.bit_position[17], 1);
            assert_eq!(report.histograms.bit_position[31], 1);
            assert_eq!(
                report.histograms.zero_to_one + report.histograms.one_to_zero,
                4
            );
        }
    }

    #[test]
    fn the_expected_value_is_the_host_pattern_of_that_address() {
        let word = word_in_buffer(1, 0x400);
        let mut cfg = config(
            &[Algorithm::Random],
            8 * MIB,
            4 * MIB,
            AccessLayout::Contiguous,
        );
        cfg.planted = vec![flip(word, 0x10)];
        let seed = cfg.seed;
        let (report, _) = run(cfg);
        let steps = Algorithm::Random.steps(0, seed, std::time::Duration::ZERO);
        let verify = steps[1].checks().unwrap();
        assert_eq!(report.records.len(), 1);
        assert_eq!(report.records[0].expected, verify.word(word));
    }

    #[test]
    fn stuck_bits_are_classified_stuck_with_their_masks_and_polarity() {
        let stuck1 = word_in_buffer(1, 0x800);
        let stuck0 = word_in_buffer(3, 0x1000);
        let mut cfg = config(
            &[Algorithm::Backgrounds],
            16 * MIB,
            4 * MIB,
            AccessLayout::Contiguous,
        );
        let stuck = |word, and_mask, or_mask| PlantedFault {
            word,
            and_mask,
            or_mask,
            xor_mask: 0,
            source: word,
            persistent: true,
        };
        cfg.planted = vec![
            stuck(stuck1, u32::MAX, 1 << 4),
            stuck(stuck0, !(1 << 30), 0),
        ];
        let (report, _) = run(cfg);
        // Backgrounds write each pattern and its complement: a stuck bit shows in half of them.
        assert_eq!(
            report.errors_total, 10,
            "five backgrounds, each fault in one of each pair"
        );
        let r1 = report
            .retests
            .iter()
            .find(|r| r.offset_bytes == stuck1 * 4)
            .expect("retested");
        assert_eq!(
            (r1.class, r1.stuck_at_1_mask, r1.stuck_at_0_mask),
            (RetestClass::StuckAt1, 1 << 4, 0)
        );
        let r0 = report
            .retests
            .iter()
            .find(|r| r.offset_bytes == stuck0 * 4)
            .expect("retested");
        assert_eq!(
            (r0.class, r0.stuck_at_0_mask, r0.stuck_at_1_mask),
            (RetestClass::StuckAt0, 1 << 30, 0)
        );
        assert_eq!(report.histograms.bit_position[4], 5);
        assert_eq!(report.histograms.bit_position[30], 5);
        assert_eq!(
            report.histograms.zero_to_one, 5,
            "the stuck-at-1 bit reads 1 where 0 was written"
        );
        assert_eq!(report.histograms.one_to_zero, 5);
        for r in &report.records {
            assert!(r.offset_bytes == stuck1 * 4 || r.offset_bytes == stuck0 * 4);
            assert_eq!(r.shape, ErrorShape::SingleBit);
        }
    }

    #[test]
    fn an_address_fault_names_the_address_the_value_came_from() {
        for (algorithm, layout) in [
            (Algorithm::OwnAddress, AccessLayout::Contiguous),
            (Algorithm::Random, AccessLayout::Coalesced),
        ] {
            let victim = word_in_buffer(2, 0x2_0000);
            let source = victim ^ (1 << 9);
            let mut cfg = config(&[algorithm], 16 * MIB, 4 * MIB, layout);
            cfg.planted = vec![PlantedFault {
                source,
                ..flip(victim, 0)
            }];
            let (report, _) = run(cfg);
            assert_eq!(report.errors_total, 1, "{algorithm:?}");
            let r = &report.records[0];
            assert_eq!(r.offset_bytes, victim * 4);
            assert_eq!(
                r.shape,
                ErrorShape::Address {
                    source_offset_bytes: source * 4
                }
            );
        }
    }

    #[test]
    fn a_flip_between_fill_and_the_first_inversion_is_caught_by_the_rewrite_sweep() {
        for layout in [AccessLayout::Contiguous, AccessLayout::Coalesced] {
            let word = word_in_buffer(1, 0x10);
            let mut cfg = config(&[Algorithm::MovingInversions], 8 * MIB, 4 * MIB, layout);
            cfg.planted = vec![flip(word, 1 << 3)];
            let (report, _) = run(cfg);
            assert_eq!(report.errors_total, 1, "{layout:?}");
            let r = &report.records[0];
            assert_eq!(
                (r.offset_bytes, r.step, r.expected, r.actual),
                (word * 4, 1, 0, 1 << 3)
            );
            assert_eq!(report.histograms.zero_to_one, 1);
        }
    }

    #[test]
    fn more_errors_than_record_capacity_keeps_the_exact_total() {
        let faults: Vec<PlantedFault> = (0..3000u64)
            .map(|i| flip(i * 997 + 5, 1 << (i % 32)))
            .collect();
        let mut cfg = config(
            &[Algorithm::OwnAddress],
            16 * MIB,
            4 * MIB,
            AccessLayout::Contiguous,
        );
        cfg.planted = faults;
        cfg.record_capacity = 100;
        cfg.retest_cap = 8;
        let (report, sink) = run(cfg);
        assert_eq!(report.errors_total, 3000);
        assert_eq!(report.records.len(), 100);
        assert_eq!(report.records_dropped, 2900);
        assert_eq!(report.histograms.flipped_bits[1], 3000);
        assert_eq!(report.histograms.bit_position.iter().sum::<u64>(), 3000);
        assert_eq!(report.retests.len(), 8);
        let recorded = sink
            .events
            .iter()
            .filter(|e| matches!(e.event, Event::VramError { .. }))
            .count();
        assert_eq!(recorded, 100);
    }

    #[test]
    fn the_retention_algorithm_idles_and_verifies() {
        let word = word_in_buffer(0, 0x40);
        let mut cfg = config(
            &[Algorithm::Retention],
            8 * MIB,
            4 * MIB,
            AccessLayout::Contiguous,
        );
        cfg.retention_delay = std::time::Duration::from_millis(300);
        cfg.planted = vec![flip(word, 1)];
        let started = std::time::Instant::now();
        let (report, _) = run(cfg);
        assert!(
            started.elapsed() >= std::time::Duration::from_millis(600),
            "two idle periods"
        );
        assert_eq!(report.errors_total, 1);
        assert_eq!(report.records[0].step, 2);
    }

    #[test]
    fn first_touch_is_kept_out_of_the_rates_unless_it_was_the_only_write() {
        use kiln::workload::vram::algorithm::Step;
        let bytes = 16 * MIB;
        let layout = AccessLayout::Contiguous;
        let writes = |algorithms: &[Algorithm]| -> u64 {
            algorithms
                .iter()
                .flat_map(|a| a.steps(0, 0, std::time::Duration::ZERO))
                .filter(|s| matches!(s, Step::Write(_)))
                .count() as u64
        };
        // Own-address writes the memory once: that write is all the rate there is.
        let once_algorithms = [Algorithm::OwnAddress];
        assert_eq!(writes(&once_algorithms), 1);
        let (once, _) = run(config(&once_algorithms, bytes, 4 * MIB, layout));
        assert!(once.throughput.includes_first_touch);
        assert_eq!(once.throughput.write.bytes, bytes);
        // With more writes, the first (which pays for first touch) is left out of the rate.
        let more = [Algorithm::OwnAddress, Algorithm::Random];
        let (twice, _) = run(config(&more, bytes, 4 * MIB, layout));
        assert!(!twice.throughput.includes_first_touch);
        assert_eq!(
            twice.throughput.write.bytes,
            (writes(&more) - 1) * bytes,
            "every write but the first"
        );
        assert!(twice.throughput.write.gib_per_s > 0.0);
    }
}
