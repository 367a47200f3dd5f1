//! The burn-in detectors on real runs: memory written once that decays while held (the
//! resident region), errors only around the switches between load and idle, errors only at
//! partial load where the card boosts highest, and the power supply under the CPU and the
//! GPU loaded together. Each is planted and found, located and classified, and a clean run
//! finds nothing. The clocks and temperatures they name come from the fake NVML, read by
//! kiln's own NVML code, on the emulated NVIDIA card.

use crate::common;

use std::path::{Path, PathBuf};

use crate::common::{expect_json, findings_of, kiln, nvidia_node_env};
use serde_json::{Value, json};

/// A profile of `workloads` (TOML tables) for `duration`, written into `dir`.
fn profile(dir: &Path, duration: &str, workloads: &str) -> PathBuf {
    let path = dir.join("burn-in-test.toml");
    std::fs::write(
        &path,
        format!("description = \"test\"\nduration = \"{duration}\"\n{workloads}"),
    )
    .unwrap();
    path
}

/// The emulated NVIDIA card's NVML scenario in `dir`, its readings those of a loaded H200,
/// plus `extra` fields (events, a loss).
fn node(dir: &Path, extra: Value) -> Vec<(String, std::ffi::OsString)> {
    let uuid = common::emulated_nvidia_uuid(dir);
    let mut gpu = json!({"uuid": uuid, "timeline": [
        {"at_s": 0, "temp_c": 71, "hbm_temp_c": 83, "power_w": 640, "sm_mhz": 1980}]});
    if let (Some(g), Some(e)) = (gpu.as_object_mut(), extra.as_object()) {
        g.extend(e.clone());
    }
    let scenario = dir.join("scenario.json");
    std::fs::write(
        &scenario,
        json!({"driver_version": common::FAKE_DRIVER_VERSION, "gpus": [gpu]}).to_string(),
    )
    .unwrap();
    nvidia_node_env(&scenario, &dir.join("nvml-calls.log"))
}

/// One run at a time in this binary: the loads here are timed (sweep levels, pauses, a
/// resident check's interval, a loss at a second of the run), and a sibling run on the same
/// two cores stretches their work past the times they are tested at.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `kiln run --json` with `args` into `dir/run`, in `env` (none: the CPU device); its exit
/// code must be `code`. The report's one device.
fn run(dir: &Path, env: &[(String, std::ffi::OsString)], args: &[&str], code: i32) -> Value {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // The fake NVML's and the layer's clock (a scripted loss, an Xid) starts when this run
    // does, not when its environment was made: it may have waited here for its turn.
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let stamped = env.iter().map(|(k, v)| {
        let v = if k == "KILN_FAKE_NVML_EPOCH" {
            format!("{now_s:.3}").into()
        } else {
            v.clone()
        };
        (k.clone(), v)
    });
    let mut cmd = kiln();
    cmd.envs(stamped).arg("run").args(args);
    if env.is_empty() {
        cmd.args(["--device", "cpu"]);
    }
    let out = cmd
        .args(["--json", "--out"])
        .arg(dir.join("run"))
        .output()
        .unwrap();
    let report = expect_json(&out, code);
    common::validate_report(&dir.join("run/report.json"));
    report["devices"][0].clone()
}

fn workload<'a>(device: &'a Value, name: &str) -> &'a Value {
    device["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["workload"] == name)
        .unwrap_or_else(|| panic!("no {name} in {device:#}"))
}

const RESIDENT_AND_PAUSES: &str = r#"
[[workload]]
kind = "resident"
interval = "1s"

[[workload]]
kind = "compute"
shape = "pauses"
hold = "2s"
pause = "1500ms"
"#;

/// The swept loads: compute, and matrix at an edge the CPU device multiplies quickly.
const SWEPT: [(&str, &str); 2] = [
    (
        "compute",
        "[[workload]]\nkind = \"compute\"\nshape = \"sweep\"\n",
    ),
    (
        "matrix",
        "[[workload]]\nkind = \"matrix\"\nshape = \"sweep\"\nsize = 256\n",
    ),
];

/// `heat` then `psu` for 16 s on the emulated NVIDIA card, the card falling off the bus
/// (the layer's loss and NVML's Xid 79 together) `lost_at_s` into the run.
fn lost_at(lost_at_s: f64) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let mut env = node(
        dir.path(),
        json!({"events": [{"at_s": lost_at_s, "kind": "xid", "xid": 79}]}),
    );
    env.push((
        "KILN_EMULATE_LOSE_AT_S".into(),
        format!("{lost_at_s}").into(),
    ));
    run(
        dir.path(),
        &env,
        &[
            "--workloads",
            "heat,psu",
            "--duration",
            "16s",
            "--vram-bytes",
            "32MiB",
        ],
        // Read by the caller from the findings.
        if lost_at_s > 8.0 { 2 } else { 1 },
    )
}

#[test]
fn the_burn_in_and_rma_profiles_plan_the_new_loads() {
    for (profile, wanted) in [
        ("burn-in", ["resident", "psu", "paused", "swept"].as_slice()),
        ("rma", ["resident", "paused"].as_slice()),
    ] {
        let out = kiln()
            .args(["run", "--profile", profile, "--dry-run", "--device", "cpu"])
            .output()
            .unwrap();
        let text = common::stdout(&out);
        assert!(out.status.success(), "{}", common::stderr(&out));
        for w in wanted {
            assert!(text.contains(w), "{profile}: no {w} in\n{text}");
        }
    }
}

/// Timed: each holds a load for a time or measures one, so they run after the rest, one
/// at a time (`scripts/test.sh`).
mod timed {
    use super::*;

    #[test]
    fn memory_that_decays_while_held_and_errors_at_the_pauses_are_found_and_said_when() {
        let dir = tempfile::tempdir().unwrap();
        let env = node(dir.path(), json!({}));
        let p = profile(dir.path(), "9s", RESIDENT_AND_PAUSES);
        let device = run(
            dir.path(),
            &env,
            &[
                "--profile",
                p.to_str().unwrap(),
                "--vram-bytes",
                "64MiB",
                "--test-fault",
                "decay:4099:2.5",
                "--test-fault",
                "pause",
            ],
            1,
        );
        // The resident word: right at the first checks, wrong later, at the card's temperatures.
        let decay = findings_of(&device, "VRAM_DECAY");
        assert_eq!(decay.len(), 1, "{device:#}");
        assert_eq!(decay[0]["class"], "hardware");
        let summary = decay[0]["summary"].as_str().unwrap();
        assert!(
            summary.contains("read right at an earlier check and wrong later")
                && summary.contains("GPU 71 °C, memory 83 °C"),
            "{summary}"
        );
        let resident = &workload(&device, "resident")["summary"];
        let record = &resident["records"][0];
        assert_eq!(record["offset_bytes"], 4099 * 4, "{resident:#}");
        assert_eq!(
            record["expected"].as_u64().unwrap() ^ record["actual"].as_u64().unwrap(),
            1 << 5
        );
        assert!(
            record["clean_checks_before"].as_u64().unwrap() >= 1,
            "{record}"
        );
        assert!(record["after_write_s"].as_f64().unwrap() >= 2.5, "{record}");
        // The region was also checked as the load paused, not only every interval.
        let phases: Vec<&str> = resident["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["phase"].as_str())
            .collect();
        assert!(phases.iter().any(|p| *p != "load"), "{phases:?}");
        // The compute results wrong only away from full load: named as such, with the phases.
        let transitions = findings_of(&device, "CLOCK_TRANSITION_ERRORS");
        assert_eq!(transitions.len(), 1, "{device:#}");
        let summary = transitions[0]["summary"].as_str().unwrap();
        assert!(
            summary.contains("only around the switches between load and idle")
                && summary.contains("shader clock 1980 MHz")
                && summary.contains("none under steady load"),
            "{summary}"
        );
        assert!(findings_of(&device, "COMPUTE_MISMATCH").is_empty());
    }

    #[test]
    fn a_clean_resident_region_and_a_clean_load_with_pauses_find_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let env = node(dir.path(), json!({}));
        // Long enough for a pause after the load's calibration on the CPU device.
        let p = profile(dir.path(), "10s", RESIDENT_AND_PAUSES);
        let device = run(
            dir.path(),
            &env,
            &["--profile", p.to_str().unwrap(), "--vram-bytes", "64MiB"],
            0,
        );
        let resident = workload(&device, "resident");
        assert_eq!(resident["status"], "passed", "{resident:#}");
        let checks = resident["summary"]["checks"].as_array().unwrap();
        assert!(checks.len() >= 4, "{checks:?}");
        // Its complement from half time, so that a stuck bit cannot hide.
        for held in ["own_address", "complement"] {
            assert!(checks.iter().any(|c| c["held"] == held), "{checks:?}");
        }
        assert!(checks.iter().all(|c| c["errors"] == 0));
        let compute = workload(&device, "compute");
        assert_eq!(compute["status"], "passed", "{compute:#}");
        assert!(
            compute["summary"]["pauses"]["pauses"].as_u64().unwrap() >= 1,
            "{compute:#}"
        );
        for code in ["VRAM_DECAY", "CLOCK_TRANSITION_ERRORS", "COMPUTE_MISMATCH"] {
            assert!(findings_of(&device, code).is_empty(), "{code}: {device:#}");
        }
    }

    #[test]
    fn errors_only_at_partial_load_are_named_with_the_duty_and_the_clock() {
        for (name, table) in SWEPT {
            let dir = tempfile::tempdir().unwrap();
            let env = node(dir.path(), json!({}));
            // Long enough that a slow round on the CPU device (a compute round of fp16 takes
            // most of a second there) still leaves every level, 100% too, some work.
            let p = profile(dir.path(), "14s", table);
            let device = run(
                dir.path(),
                &env,
                &[
                    "--profile",
                    p.to_str().unwrap(),
                    "--test-fault",
                    "low-duty:0.35",
                ],
                1,
            );
            let peak = findings_of(&device, "PEAK_CLOCK_ERRORS");
            assert_eq!(peak.len(), 1, "{name}: {device:#}");
            assert_eq!(peak[0]["class"], "hardware");
            let summary = peak[0]["summary"].as_str().unwrap();
            assert!(
                summary.contains("only at partial load")
                    && ["at 10% load", "at 20% load", "at 30% load"]
                        .iter()
                        .any(|l| summary.contains(l))
                    && summary.contains("shader clock 1980 MHz")
                    && summary.contains("none at 100% load"),
                "{name}: {summary}"
            );
            // Named instead of the plain mismatch, not beside it.
            for plain in ["COMPUTE_MISMATCH", "MATRIX_MISMATCH"] {
                assert!(findings_of(&device, plain).is_empty(), "{name}: {plain}");
            }
            let levels = workload(&device, name)["summary"]["levels"]
                .as_array()
                .unwrap()
                .clone();
            assert_eq!(levels.len(), 10, "{name}: {levels:?}");
            for l in &levels {
                if l["faults"].as_u64().unwrap() > 0 {
                    assert!(l["duty"].as_f64().unwrap() < 0.35, "{name}: {l}");
                }
                // A level a long round on the CPU device overran did no work and read nothing.
                if l["gops_per_wall_s"].as_f64().unwrap() > 0.0 {
                    assert_eq!(l["clock_mhz"], 1980.0, "{name}: {l}");
                }
            }
            assert!(levels.iter().any(|l| l["faults"].as_u64().unwrap() > 0));
        }
    }

    /// The near miss: the same fault below full load and at it too is plain corruption.
    #[test]
    fn errors_at_every_load_level_are_not_said_to_be_the_peak_clock() {
        let dir = tempfile::tempdir().unwrap();
        let p = profile(dir.path(), "6s", SWEPT[1].1);
        let device = run(
            dir.path(),
            &[],
            &[
                "--profile",
                p.to_str().unwrap(),
                "--test-fault",
                "low-duty:1.5",
            ],
            1,
        );
        assert!(findings_of(&device, "PEAK_CLOCK_ERRORS").is_empty());
        assert_eq!(
            findings_of(&device, "MATRIX_MISMATCH").len(),
            1,
            "{device:#}"
        );
    }

    #[test]
    fn a_clean_sweep_finds_nothing() {
        for (name, table) in SWEPT {
            let dir = tempfile::tempdir().unwrap();
            let p = profile(dir.path(), "8s", table);
            let device = run(dir.path(), &[], &["--profile", p.to_str().unwrap()], 0);
            let load = workload(&device, name);
            assert_eq!(load["status"], "passed", "{load:#}");
            let levels = load["summary"]["levels"].as_array().unwrap();
            // Every level in order; the last is reported where it did work before the budget
            // ran out (a compute round on the CPU device takes most of a second).
            assert!((9..=10).contains(&levels.len()), "{name}: {levels:?}");
            for (i, l) in levels.iter().enumerate() {
                assert!((l["duty"].as_f64().unwrap() - (i + 1) as f64 / 10.0).abs() < 1e-9);
            }
            assert!(levels.iter().all(|l| l["faults"] == 0), "{levels:?}");
            assert!(findings_of(&device, "PEAK_CLOCK_ERRORS").is_empty());
        }
    }

    #[test]
    fn a_wrong_cpu_result_under_the_combined_load_is_not_the_gpus_fault() {
        let dir = tempfile::tempdir().unwrap();
        let device = run(
            dir.path(),
            &[],
            &[
                "--workloads",
                "psu",
                "--duration",
                "4s",
                "--vram-bytes",
                "16MiB",
                "--test-fault",
                "cpu",
            ],
            2,
        );
        let cpu = findings_of(&device, "CPU_WRONG_RESULT");
        assert_eq!(cpu.len(), 1, "{device:#}");
        assert_eq!(cpu[0]["class"], "environment");
        assert!(
            cpu[0]["summary"]
                .as_str()
                .unwrap()
                .contains("not the GPU's fault"),
            "{}",
            cpu[0]["summary"]
        );
        // The GPU's own parts ran beside it and stand on their own.
        for part in ["vram", "compute"] {
            assert_eq!(workload(&device, part)["status"], "passed");
            assert_eq!(workload(&device, part)["summary"]["together_with"], "psu");
        }
        let psu = &workload(&device, "psu")["summary"];
        assert_eq!(psu["cpu_wrong"], 1, "{psu:#}");
        assert_eq!(psu["cpu_records"][0]["thread"], 0);
    }

    #[test]
    fn a_card_lost_only_under_the_combined_load_is_the_power_supply() {
        let device = lost_at(13.0);
        let psu = findings_of(&device, "PSU_COMBINED_LOAD");
        assert_eq!(psu.len(), 1, "{device:#}");
        assert_eq!(psu[0]["class"], "environment");
        let summary = psu[0]["summary"].as_str().unwrap();
        assert!(
            summary.contains("only while the CPU and the GPU were loaded together")
                && summary.contains("card 640 W at most")
                && summary.contains("heat) ran clean"),
            "{summary}"
        );
        // It explains the loss: no second finding blames the card or a timeout for it.
        for code in [
            "XID_FALLEN_OFF_BUS",
            "DEVICE_LOST_HARDWARE",
            "DEVICE_LOST_TIMEOUT",
        ] {
            assert!(findings_of(&device, code).is_empty(), "{code}: {device:#}");
        }
        let cpu = &workload(&device, "psu")["summary"];
        assert!(
            cpu["cpu_checks"].as_u64().unwrap() > 0 && cpu["cpu_wrong"] == 0,
            "{cpu:#}"
        );
    }

    #[test]
    fn a_card_lost_under_its_own_load_alone_is_not_the_power_supply() {
        let device = lost_at(4.0);
        assert!(
            findings_of(&device, "PSU_COMBINED_LOAD").is_empty(),
            "{device:#}"
        );
        assert_eq!(
            findings_of(&device, "XID_FALLEN_OFF_BUS").len(),
            1,
            "{device:#}"
        );
    }
}
