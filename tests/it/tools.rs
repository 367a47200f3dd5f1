//! `kiln selftest` and `kiln bench` end to end, and the committed SPIR-V against its source.

use crate::common;

use crate::common::*;

/// Where scripts/setup.sh --test puts the shader tools newer than Debian's glslc.
fn test_venv_tool(name: &str) -> std::path::PathBuf {
    let venv = std::env::var_os("KILN_TEST_VENV").unwrap_or("/opt/kiln-test-venv".into());
    std::path::Path::new(&venv).join("bin").join(name)
}

/// `tool` with `args`, which this test needs installed.
/// The committed SPIR-V of a shader source: `shaders/spirv/<name>.spv`.
fn spirv_of(source: &std::path::Path) -> std::path::PathBuf {
    let name = source.file_stem().expect("a shader source has a name");
    source
        .with_file_name("spirv")
        .join(name)
        .with_extension("spv")
}

fn run_tool(tool: &std::path::Path, args: &[&std::ffi::OsStr]) -> std::process::Output {
    std::process::Command::new(tool)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{} is needed for this test ({e}): run scripts/setup.sh --test",
                tool.display()
            )
        })
}

/// A compiler's flags, from shaders/NAME.
fn shader_flags(name: &str) -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(root.join("shaders").join(name))
        .unwrap()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

#[test]
fn committed_spirv_matches_its_source() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let shaders = root.join("shaders");
    let glslc_args = shader_flags("glslc.args");
    let glslang_args = shader_flags("glslang.args");
    let glslang = test_venv_tool("glslangValidator");
    let tmp = tempfile::tempdir().unwrap();
    let (mut checked, mut matrix_units) = (0, 0);
    for entry in std::fs::read_dir(&shaders).unwrap() {
        let src = entry.unwrap().path();
        if src.extension().is_none_or(|e| e != "comp") {
            continue;
        }
        let fresh = tmp.path().join("fresh.spv");
        // The matrix units' shaders need the newer compiler build.rs uses for them.
        let units = std::fs::read_to_string(&src)
            .unwrap()
            .contains("GL_KHR_cooperative_matrix");
        let (compiler, args) = if units {
            matrix_units += 1;
            (glslang.clone(), &glslang_args)
        } else {
            ("glslc".into(), &glslc_args)
        };
        let mut all: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
        all.extend([src.as_os_str(), "-o".as_ref(), fresh.as_os_str()]);
        let output = run_tool(&compiler, &all);
        assert!(
            output.status.success(),
            "{} does not compile: {}{}",
            src.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let committed_at = spirv_of(&src);
        let committed = std::fs::read(&committed_at).unwrap_or_default();
        assert!(
            committed == std::fs::read(&fresh).unwrap(),
            "{} is stale: run scripts/compile-shaders.sh",
            committed_at.display()
        );
        checked += 1;
    }
    assert!(checked >= 7, "only {checked} shaders found");
    assert!(matrix_units >= 2, "only {matrix_units} matrix-unit shaders");
}

#[test]
fn the_matrix_unit_spirv_is_valid_for_vulkan() {
    // glslc's output is validated as it is made; glslangValidator's is not, and a driver
    // may take invalid SPIR-V in silence: spirv-val holds it to the Vulkan rules.
    let shaders = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders/spirv");
    let val = test_venv_tool("spirv-val");
    let mut validated = 0;
    for name in ["matrix_units_f16.spv", "matrix_units_i8.spv"] {
        let spv = shaders.join(name);
        let out = run_tool(
            &val,
            &[
                "--target-env".as_ref(),
                "vulkan1.1".as_ref(),
                spv.as_os_str(),
            ],
        );
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        validated += 1;
    }
    assert_eq!(validated, 2);
}

/// The device decides these (its memory model, BAR, vendor): `scripts/test.sh` runs them
/// again on every emulated discrete card.
mod card {
    use super::*;

    #[test]
    fn bench_reports_rates_and_ratios_against_copy_and_fill() {
        let r = kiln_json(
            &[
                "bench", "vram", "--bytes", "64MiB", "--repeat", "1", "--json",
            ],
            0,
        );
        for key in [
            "write_gib_s",
            "verify_gib_s",
            "combined_gib_per_wall_s",
            "copy_gib_s",
            "fill_gib_s",
        ] {
            assert!(r[key].as_f64().unwrap() > 0.0, "{key}");
        }
        assert!(
            r["telemetry_ratio"].as_f64().unwrap() > 0.0,
            "the sidecar's cost is measured"
        );
        let share = r["telemetry_busy_share"].as_f64().unwrap();
        assert!((0.0..1.0).contains(&share));
        let ratio = r["verify_over_copy"].as_f64().unwrap();
        let expected = r["verify_gib_s"].as_f64().unwrap() / r["copy_gib_s"].as_f64().unwrap();
        assert!((ratio - expected).abs() < 1e-9);
        // The copy ceiling is the best of every copy measured, the host's own memcpy among
        // them on a CPU device (whose memory is host memory), not on a card (the emulated
        // discrete card of scripts/test.sh is one).
        let copies = r["copies"].as_array().unwrap();
        let methods: Vec<&str> = copies
            .iter()
            .map(|c| c["method"].as_str().unwrap())
            .collect();
        let mut expected = vec![
            "copy_buffer_regions",
            "copy_buffer_one_region",
            "shader_copy",
        ];
        if !common::device().1.kind.is_gpu() {
            expected.push("host_memcpy");
        }
        assert_eq!(methods, expected);
        let rates: Vec<f64> = copies
            .iter()
            .map(|c| c["gib_s"].as_f64().unwrap())
            .collect();
        assert!(rates.iter().all(|&g| g > 0.0), "{copies:?}");
        let best = rates.iter().copied().fold(0.0, f64::max);
        assert_eq!(r["copy_gib_s"].as_f64().unwrap(), best);
        let best_method = methods[rates.iter().position(|&g| g == best).unwrap()];
        assert_eq!(r["copy_method"], best_method);
    }

    #[test]
    fn compute_bench_reports_the_verified_rates_against_their_own_roofline() {
        let r = kiln_json(&["bench", "compute", "--duration", "1s", "--json"], 0);
        assert_eq!(r["faults"], 0);
        let number = |key: &str| r[key].as_f64().unwrap_or_else(|| panic!("{key} in {r}"));
        for (rate, roof, ratio) in [
            ("fp32_gflops", "fp32_roofline_gflops", "fp32"),
            ("int32_gops", "int32_roofline_gops", "int32"),
        ] {
            let (rate, roof) = (number(rate), number(roof));
            assert!(rate > 0.0 && roof > 0.0, "{r}");
            let of = r["of_roofline"][ratio].as_f64().unwrap();
            assert!(
                (of - rate / roof).abs() < 1e-9,
                "{ratio}: {of} vs {rate}/{roof}"
            );
        }
        match (r["theoretical_gflops"].as_f64(), r["ratio"].as_f64()) {
            (Some(t), Some(ratio)) => {
                assert!((ratio - number("fp32_roofline_gflops") / t).abs() < 1e-9)
            }
            // A CPU device (or an unknown GPU) has only the measured ceiling, and says so.
            _ => assert!(
                r["theoretical_source"]
                    .as_str()
                    .unwrap()
                    .contains("measured roofline is the ceiling"),
                "{r}"
            ),
        }
    }

    /// These depend on the device's matrix units too: run again on a device that has them.
    mod units {
        use super::*;

        #[test]
        fn selftest_finds_every_planted_fault_and_nothing_else() {
            let report = kiln_json(&["selftest", "--runs", "4", "--faults", "256", "--json"], 0);
            assert_eq!(report["passed"], true);
            // 1024 in VRAM, and a flipped bit and a wrong tile in each matrix kind.
            let matrix = report["matrix"].as_array().unwrap();
            assert!(matrix.len() == 4 || matrix.len() == 6, "{matrix:?}");
            assert!(matrix.iter().all(|m| m["found"] == true), "{matrix:?}");
            // On the device with matrix units (scripts/test.sh says so), fp16 and int8 faults
            // were planted on the units' products; elsewhere every kind is on the ALUs.
            let units = std::env::var_os("KILN_EXPECT_MATRIX_UNITS").is_some();
            for m in matrix {
                let expected = if units && m["kind"] != "fp32" {
                    "matrix_units"
                } else {
                    "shared_memory"
                };
                assert_eq!(m["path"], expected, "{m}");
            }
            assert_eq!(report["planted_total"], 1024 + matrix.len());
            for run in report["runs"].as_array().unwrap() {
                assert_eq!(run["exact"], run["expected_reports"]);
                assert!(run["expected_reports"].as_u64().unwrap() >= 256);
                assert!(run["missed"].as_array().unwrap().is_empty());
                assert!(run["extra"].as_array().unwrap().is_empty());
                assert!(run["misclassified"].as_array().unwrap().is_empty());
                for kind in ["SingleBitFlip", "MultiBitFlip", "StuckAt", "AddressFault"] {
                    assert_eq!(run["planted"][kind], 64, "{kind}");
                }
            }
        }
    }
}
