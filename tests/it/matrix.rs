//! The matrix workload on the real driver: a clean run of every kind the device has
//! verifies its products and finds nothing; a flipped bit in one element and a wrong
//! tile, planted between the multiplication and the checks, are each found at their
//! coordinates with the value the element should have.
//!
//! scripts/test.sh runs this suite twice: on the system's CPU device, which has no matrix
//! units (every kind on the shared-memory kernel), and on a CPU device that has them
//! (scripts/matrix-units-driver.sh, with KILN_EXPECT_MATRIX_UNITS set), where fp16 and
//! int8 must run on the units, so that a silent fall back to the ALUs fails the suite.

use std::time::Duration;

use crate::common::*;
use kiln::evidence::MemorySink;
use kiln::gpu::DeviceContext;
use kiln::workload::matrix::{
    Matrix, MatrixConfig, MatrixKind, MatrixPath, MatrixReport, MatrixTest, PlantedFault,
    reference_element,
};
use kiln::workload::{Kind, KindTest, Report, RunControl, WorkloadError, WorkloadStatus};

/// A 256-square product: 16 tiles, one recomputed per round; 33.5 M operations.
const EDGE: u32 = 256;

fn run(config: MatrixConfig, budget: Option<Duration>) -> MatrixReport {
    try_run(config, budget).unwrap()
}

fn try_run(config: MatrixConfig, budget: Option<Duration>) -> Result<MatrixReport, WorkloadError> {
    let (vulkan, info) = device();
    let mut ctx = DeviceContext::open(&vulkan, &info).unwrap();
    let mut sink = MemorySink::default();
    MatrixTest { config }.run_report(&mut ctx, &RunControl::new(budget), &mut sink)
}

/// Whether this suite runs on the device with matrix units (scripts/test.sh says so).
fn expect_matrix_units() -> bool {
    std::env::var_os("KILN_EXPECT_MATRIX_UNITS").is_some()
}

/// Where `kind` must run here: on the matrix units where the suite expects them and
/// they have a kernel for the kind (fp16, int8), else on the shared-memory kernel.
fn expected_path(kind: MatrixKind) -> &'static str {
    if expect_matrix_units() && kind != MatrixKind::Fp32 {
        "matrix_units"
    } else {
        "shared_memory"
    }
}

/// The kinds this device runs: fp16 only where it has fp16 arithmetic.
fn kinds() -> Vec<MatrixKind> {
    let (_, info) = device();
    MatrixKind::ALL
        .into_iter()
        .filter(|&k| k != MatrixKind::Fp16 || info.shader_float16)
        .collect()
}

fn fixed(kinds: Vec<MatrixKind>, rounds: u32, plant: Option<PlantedFault>) -> MatrixConfig {
    MatrixConfig {
        kinds,
        size: Some(EDGE),
        rounds: Some(rounds),
        plant,
        ..MatrixConfig::default()
    }
}

/// `kiln run --dry-run` on device 0 with a profile of one matrix workload whose table
/// holds `keys`.
fn dry_run_matrix(keys: &str) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("matrix.toml");
    std::fs::write(
        &profile,
        format!("description = \"matrix\"\nduration = \"5s\"\n\n[[workload]]\nkind = \"matrix\"\n{keys}\n"),
    )
    .unwrap();
    kiln()
        .args(["run", "--device", "0", "--dry-run", "--profile"])
        .arg(&profile)
        .output()
        .unwrap()
}

/// The device decides these (its memory model, BAR, vendor): `scripts/test.sh` runs them
/// again on every emulated discrete card.
mod card {
    use super::*;

    #[test]
    fn a_size_the_device_cannot_hold_is_refused_before_anything_runs() {
        // 16384-square fp32 inputs are a 2 GiB buffer: beyond the storage-buffer range of the
        // CPU device (128 MiB) and of many cards, and beyond the emulated cards' 1 GiB.
        let out = dry_run_matrix("size = 16384");
        assert_eq!(out.status.code(), Some(64), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("matrix size 16384 needs"), "{stderr}");
    }

    /// These depend on the device's matrix units too: run again on a device that has them.
    mod units {
        use super::*;

        #[test]
        fn a_timed_run_sizes_its_matrices_and_alternates_kinds() {
            let report = run(
                MatrixConfig {
                    size: None,
                    ..MatrixConfig::default()
                },
                Some(Duration::from_secs(3)),
            );
            assert_eq!(report.faults(), 0);
            assert!(report.size >= 128 && report.size.is_power_of_two());
            assert!(
                report.kinds.iter().all(|k| k.rounds >= 1),
                "{:?}",
                report.kinds
            );
            assert_eq!(report.status(), WorkloadStatus::Passed);
        }

        #[test]
        fn heat_runs_the_vram_test_and_the_matrix_load_at_once() {
            // Device 0: the CPU device here, the emulated card where scripts/test.sh puts one.
            let dir = tempfile::tempdir().unwrap();
            let profile = dir.path().join("heat.toml");
            std::fs::write(
        &profile,
        "description = \"heat with matrices\"\nduration = \"6s\"\n\n[[workload]]\nkind = \"heat\"\nload = \"matrix\"\npercent = 1\nalgorithms = [\"own-address\"]\nkinds = [\"int8\"]\n",
    )
    .unwrap();
            let out = dir.path().join("run");
            let status = kiln()
                .args(["run", "--device", "0", "--profile"])
                .arg(&profile)
                .arg("--out")
                .arg(&out)
                .output()
                .unwrap();
            assert_eq!(status.status.code(), Some(0), "{status:?}");
            let report: serde_json::Value =
                serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
            let workloads = report["devices"][0]["workloads"].as_array().unwrap();
            let names: Vec<&str> = workloads
                .iter()
                .filter_map(|w| w["workload"].as_str())
                .collect();
            assert_eq!(names, ["vram", "matrix"], "{report}");
            for w in workloads {
                assert_eq!(w["summary"]["together_with"], "heat", "{w}");
                assert_eq!(w["status"], "passed", "{w}");
            }
            let matrix = &workloads[1]["summary"];
            assert_eq!(matrix["kinds"][0]["kind"], "int8");
            assert!(matrix["kinds"][0]["rounds"].as_u64().unwrap_or(0) >= 1);
        }

        #[test]
        fn a_clean_run_of_every_kind_verifies_its_products_and_finds_nothing() {
            let kinds = kinds();
            let report = run(fixed(kinds.clone(), 2 * kinds.len() as u32, None), None);
            let expected = if expect_matrix_units() {
                "mixed"
            } else {
                "shared_memory"
            };
            assert_eq!(report.path, expected, "{}", report.cooperative_matrix);
            assert!(!report.cooperative_matrix.is_empty());
            assert_eq!(report.size, EDGE);
            assert_eq!(report.faults(), 0, "{:?}", report.records.first());
            assert!(report.records.is_empty());
            assert_eq!(
                report.status(),
                WorkloadStatus::Passed,
                "{}",
                report.headline()
            );
            assert_eq!(report.kinds.len(), kinds.len());
            for k in &report.kinds {
                assert_eq!(
                    k.path,
                    expected_path(k.kind),
                    "{}",
                    report.cooperative_matrix
                );
                assert_eq!(k.shape.is_some(), k.path == "matrix_units");
                assert_eq!(k.rounds, 2, "{:?}", k.kind);
                assert_eq!(k.verified_ops, 2 * 2 * u64::from(EDGE).pow(3));
                assert_eq!(k.tiles_recomputed, 2, "one tile in 16, each round");
                assert!(k.tflops > 0.0 && k.verified_tflops > 0.0);
                // Checks cost time: the verified rate is below the multiplication's.
                assert!(k.verified_tflops < k.tflops, "{k:?}");
            }
            assert!(Matrix::judge(&report).is_empty());
        }

        #[test]
        fn a_flipped_bit_in_one_element_is_found_at_its_coordinates_in_every_kind() {
            let (row, col) = (77, 201);
            for kind in kinds() {
                // Bit 0 of an fp32 integer's mantissa leaves it non-integral (the sums would round
                // it away); bit 0 of an int32 changes the sums. Both must be found.
                let plant = PlantedFault {
                    row,
                    col,
                    rows: 1,
                    cols: 1,
                    xor: 1,
                };
                let report = run(fixed(vec![kind], 1, Some(plant)), None);
                assert_eq!(report.status(), WorkloadStatus::Failed, "{kind:?}");
                let m = report
                    .records
                    .iter()
                    .find(|m| m.row == Some(row) && m.col == Some(col))
                    .unwrap_or_else(|| panic!("{kind:?}: not located: {:?}", report.records));
                assert_eq!(report.records.iter().filter(|m| m.row.is_some()).count(), 1);
                assert_eq!(m.tile, [row / 64, col / 64]);
                let seed = MatrixConfig::default().seed;
                let expected = reference_element(seed, EDGE, row, col);
                assert_eq!(m.expected, Some(expected as f64));
                let good_bits = match kind {
                    MatrixKind::Int8 => expected as i32 as u32,
                    _ => (expected as f32).to_bits(),
                };
                assert_eq!(m.actual_bits, Some(good_bits ^ 1), "{m:?}");
                // Tile (1, 3) of a 4-tile-wide product is the 7th: the primary run's workgroup 7.
                assert_eq!(m.workgroup, 7);
                let findings = Matrix::judge(&report);
                assert_eq!(findings.len(), 1);
                assert_eq!(findings[0].code, kiln::finding::FindingCode::MatrixMismatch);
                assert!(
                    findings[0].summary.contains("(77, 201)"),
                    "{}",
                    findings[0].summary
                );
            }
        }

        #[test]
        fn a_high_bit_flip_is_found_too() {
            // An exponent bit: the value is far off but still finite and integral in fp32.
            let plant = PlantedFault {
                row: 3,
                col: 250,
                rows: 1,
                cols: 1,
                xor: 1 << 26,
            };
            let report = run(fixed(vec![MatrixKind::Fp32], 1, Some(plant)), None);
            let located: Vec<_> = report.records.iter().filter(|m| m.row.is_some()).collect();
            assert_eq!(located.len(), 1, "{:?}", report.records);
            assert_eq!((located[0].row, located[0].col), (Some(3), Some(250)));
        }

        #[test]
        fn a_wrong_tile_is_named_as_one() {
            let plant = PlantedFault {
                row: 128,
                col: 64,
                rows: 64,
                cols: 64,
                xor: 1 << 3,
            };
            for kind in [MatrixKind::Fp32, MatrixKind::Int8] {
                let report = run(fixed(vec![kind], 1, Some(plant)), None);
                assert_eq!(report.status(), WorkloadStatus::Failed);
                // Every row and column of the tile is wrong, but in int32 a row's flips of bit 3
                // can cancel (+8 where the bit was clear, -8 where set): most rows and columns
                // disagree, never fewer than half of them with this pattern.
                let k = &report.kinds[0];
                assert!(
                    (64..=128).contains(&k.checksum_mismatches),
                    "{kind:?}: {}",
                    k.checksum_mismatches
                );
                let tile = report
                    .records
                    .iter()
                    .find(|m| m.check == "wrong_tile")
                    .unwrap_or_else(|| panic!("{kind:?}: {:?}", report.records));
                assert_eq!(tile.tile, [2, 1]);
                let [rows, cols] = tile.rows_cols_wrong.unwrap_or_default();
                assert!(rows >= 32 && cols >= 32 && rows + cols == k.checksum_mismatches as u32);
                // Nothing outside the tile is blamed.
                assert!(report.records.iter().all(|m| m.tile == [2, 1]));
            }
        }

        #[test]
        fn a_sampled_tile_that_differs_on_recomputation_is_compared_bit_for_bit() {
            // A fault in every element of the product: whichever tile the round recomputes, its
            // first run differs from the recomputation everywhere.
            let plant = PlantedFault {
                row: 0,
                col: 0,
                rows: EDGE,
                cols: EDGE,
                xor: 1 << 2,
            };
            let r = run(fixed(vec![MatrixKind::Int8], 1, Some(plant)), None);
            // The one recomputed tile (of 16) differs in all of its 4096 elements.
            assert_eq!(r.kinds[0].redundant_mismatches, 64 * 64, "{:?}", r.kinds[0]);
        }

        #[test]
        fn the_bench_holds_the_verified_rate_against_the_same_kernel_unverified() {
            let (vulkan, info) = device();
            let mut ctx = DeviceContext::open(&vulkan, &info).unwrap();
            // Verification costs time; it never makes the device faster than its kernel
            // alone (a margin for a shared 2-core machine's noise). The two rates are
            // measured one after the other, so a neighbour's load that falls on the
            // kernel's stretch alone can invert them once: up to three benchmarks, each
            // whole, and one must hold every kind within the bound.
            let mut seen = Vec::new();
            let mut held = None;
            for _ in 0..3 {
                let r = kiln::workload::matrix::bench(&mut ctx, Duration::from_secs(2)).unwrap();
                assert_eq!(r.faults, 0);
                assert_eq!(r.kinds.len(), kinds().len());
                for k in &r.kinds {
                    assert!(k.roofline_tflops > 0.0 && k.verified_tflops > 0.0, "{k:?}");
                }
                if r.kinds
                    .iter()
                    .all(|k| k.of_roofline > 0.0 && k.of_roofline < 1.3)
                {
                    held = Some(r);
                    break;
                }
                seen.push(format!("{:?}", r.kinds));
            }
            let r = held.unwrap_or_else(|| {
                panic!("the verified rate beat its kernel alone in three benchmarks: {seen:#?}")
            });
            let text = kiln::workload::matrix::bench_summary(&r);
            assert!(text.contains("of") && text.contains("fp32"), "{text}");
        }

        #[test]
        fn the_device_with_matrix_units_lists_them_and_the_run_names_its_shape() {
            let (_, info) = device();
            let units = &info.matrix_units;
            if !expect_matrix_units() {
                // The system's CPU device and the emulated cards have none, and say why not.
                let report = run(
                    fixed(vec![MatrixKind::Fp16, MatrixKind::Int8], 2, None),
                    None,
                );
                assert_eq!(report.path, "shared_memory");
                assert!(
                    report.cooperative_matrix.contains("fp16: ")
                        && report.cooperative_matrix.contains("int8: "),
                    "{}",
                    report.cooperative_matrix
                );
                return;
            }
            assert!(
                info.cooperative_matrix && units.unusable.is_none(),
                "{units:?}"
            );
            let report = run(
                fixed(vec![MatrixKind::Fp16, MatrixKind::Int8], 2, None),
                None,
            );
            assert_eq!(report.path, "matrix_units", "{}", report.cooperative_matrix);
            for k in &report.kinds {
                let [m, n, kk] = k.shape.unwrap();
                let types = match k.kind {
                    MatrixKind::Fp16 => ["f16", "f16", "f32", "f32"],
                    _ => ["s8", "s8", "s32", "s32"],
                };
                // The shape is one the device lists for the kind's types.
                assert!(
                    units.shapes.iter().any(|s| (s.m, s.n, s.k) == (m, n, kk)
                        && [s.a.as_str(), &s.b, &s.c, &s.result] == types),
                    "{k:?} not in {units:?}"
                );
                assert!(
                    report
                        .cooperative_matrix
                        .contains(&format!("{} in {m}x{n}x{kk} blocks", k.kind.name())),
                    "{}",
                    report.cooperative_matrix
                );
            }
            assert_eq!(report.faults(), 0);
            // The sections say it in words.
            let text = format!("{:?}", Matrix::sections(&report));
            assert!(
                text.contains(&format!(
                    "on the matrix units ({}x",
                    report.kinds[0].shape.unwrap()[0]
                )),
                "{text}"
            );
        }

        #[test]
        fn the_path_setting_puts_every_kind_on_the_shared_memory_kernel_or_demands_the_units() {
            let kinds = kinds();
            let alu = run(
                MatrixConfig {
                    path: MatrixPath::SharedMemory,
                    ..fixed(kinds.clone(), kinds.len() as u32, None)
                },
                None,
            );
            assert_eq!(alu.path, "shared_memory");
            assert!(
                alu.kinds
                    .iter()
                    .all(|k| k.path == "shared_memory" && k.shape.is_none())
            );
            assert_eq!(alu.faults(), 0);
            // fp32 has no matrix-unit kernel: demanding the units for it is refused before
            // anything runs, in a sentence that says why.
            let err = try_run(
                MatrixConfig {
                    path: MatrixPath::MatrixUnits,
                    ..fixed(vec![MatrixKind::Fp32], 1, None)
                },
                None,
            )
            .expect_err("fp32 cannot run on the matrix units");
            let text = err.to_string();
            assert!(
                text.contains("matrix_units") && text.contains("fp32"),
                "{text}"
            );
            // fp16 and int8 can, on the device that has units; elsewhere the demand is refused.
            let demanded = try_run(
                MatrixConfig {
                    path: MatrixPath::MatrixUnits,
                    ..fixed(vec![MatrixKind::Int8], 1, None)
                },
                None,
            );
            match demanded {
                Ok(r) => {
                    assert!(
                        expect_matrix_units(),
                        "units ran where none were expected: {r:?}"
                    );
                    assert_eq!(r.path, "matrix_units");
                    assert_eq!(r.faults(), 0);
                }
                Err(e) => assert!(!expect_matrix_units(), "{e}"),
            }
        }

        #[test]
        fn a_profile_that_demands_the_matrix_units_is_planned_only_where_they_are() {
            let out = dry_run_matrix("kinds = [\"fp16\", \"int8\"]\npath = \"matrix_units\"");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            if expect_matrix_units() {
                assert_eq!(out.status.code(), Some(0), "{stderr}");
                assert!(stdout.contains("fp16/int8 on the matrix units"), "{stdout}");
            } else {
                // Refused before anything runs, in one sentence that says why.
                assert_eq!(out.status.code(), Some(64), "{stdout}{stderr}");
                assert_eq!(stderr.lines().count(), 1, "{stderr}");
                assert!(
                    stderr.contains("path = \"matrix_units\"")
                        && stderr.contains("VK_KHR_cooperative_matrix"),
                    "{stderr}"
                );
            }
        }
    }
}
