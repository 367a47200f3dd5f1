//! `kiln selftest` and `kiln bench` end to end, and the committed SPIR-V against its source.

mod common;

use common::*;

#[test]
fn selftest_finds_every_planted_fault_and_nothing_else() {
    let report = kiln_json(&["selftest", "--runs", "4", "--faults", "256", "--json"], 0);
    assert_eq!(report["passed"], true);
    assert_eq!(report["planted_total"], 1024);
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
}

#[test]
fn compute_bench_reports_the_rate_against_the_theoretical_peak() {
    let r = kiln_json(&["bench", "compute", "--duration", "1s", "--json"], 0);
    assert_eq!(r["faults"], 0);
    let measured = r["fp32_best_gflops"].as_f64().unwrap();
    assert!(measured > 0.0);
    if let (Some(t), Some(ratio)) = (r["theoretical_gflops"].as_f64(), r["ratio"].as_f64()) {
        assert!((ratio - measured / t).abs() < 1e-9);
    } else {
        assert!(
            r["theoretical_source"]
                .as_str()
                .unwrap()
                .contains("unknown")
        );
    }
}

#[test]
fn committed_spirv_matches_its_source() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let shaders = root.join("shaders");
    let args: Vec<String> = std::fs::read_to_string(shaders.join("glslc.args"))
        .unwrap()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for entry in std::fs::read_dir(&shaders).unwrap() {
        let src = entry.unwrap().path();
        if src.extension().is_none_or(|e| e != "comp") {
            continue;
        }
        let fresh = tmp.path().join("fresh.spv");
        let status = std::process::Command::new("glslc")
            .args(&args)
            .arg(&src)
            .arg("-o")
            .arg(&fresh)
            .status()
            .expect("glslc is needed for this test: run scripts/setup.sh");
        assert!(status.success(), "{} does not compile", src.display());
        let committed = std::fs::read(src.with_extension("spv")).unwrap_or_default();
        assert!(
            committed == std::fs::read(&fresh).unwrap(),
            "{} is stale: run scripts/compile-shaders.sh",
            src.with_extension("spv").display()
        );
        checked += 1;
    }
    assert!(checked >= 7, "only {checked} shaders found");
}
