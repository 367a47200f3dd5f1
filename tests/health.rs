//! `kiln health`: the could-not-check answer on this machine, the right exit code and fault
//! code for each recorded fault, Xids only once with a state file, the GPU count, and the
//! age and verdict of the last full run.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::kiln;

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/telemetry")
        .join(format!("{name}.jsonl"))
        .display()
        .to_string()
}

/// Runs `kiln health` and returns (exit code, first line, all of stdout).
fn health(args: &[&str]) -> (i32, String, String) {
    let out = kiln().arg("health").args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let first = stdout.lines().next().unwrap_or_default().to_owned();
    assert!(first.len() <= 256, "{first}");
    (out.status.code().unwrap_or(-1), first, stdout)
}

#[test]
fn without_an_nvidia_driver_it_says_it_could_not_check() {
    let started = Instant::now();
    let (code, first, _) = health(&[]);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(code, 4);
    assert!(first.ends_with("[KILN-NOT-001]"), "{first}");
    assert!(first.contains("no NVIDIA driver"), "{first}");
}

#[test]
fn each_recorded_fault_gets_its_exit_code_and_fault_code() {
    let cases = [
        ("healthy_idle", 0, "[KILN-OK-000]", "OK: 1 GPUs healthy"),
        ("healthy_load", 0, "[KILN-OK-000]", "OK"),
        (
            "ecc_uncorrectable_remap_pending",
            1,
            "[KILN-MEM-002]",
            "ECC uncorrectable +",
        ),
        ("remap_failure", 1, "[KILN-MEM-001]", "row remapping failed"),
        (
            "retired_pages_dbe",
            1,
            "[KILN-MEM-004]",
            "page retirement pending",
        ),
        ("xid79", 1, "[KILN-XID-079]", "fallen off the bus"),
        ("pcie_downtrained", 2, "[KILN-PCI-001]", "x8 of x16"),
        ("aux_power_missing", 2, "[KILN-XID-054]", "auxiliary power"),
        ("xid13_storm", 3, "[KILN-XID-013]", "Xid 13 x50"),
        ("gsp_firmware_xid119", 3, "[KILN-XID-119]", "GSP"),
    ];
    let mut wrong = Vec::new();
    for (name, want_code, fault, words) in cases {
        let (code, first, _) = health(&["--telemetry-replay", &fixture(name)]);
        if code != want_code || !first.contains(fault) || !first.contains(words) {
            wrong.push(format!("{name}: exit {code}, `{first}`"));
        }
        if want_code != 0 {
            assert!(first.starts_with("GPU0 GPU-6c4f3a5e...: "), "{first}");
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn with_a_state_file_an_xid_is_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let state = state.to_str().unwrap();
    let args = ["--telemetry-replay", &fixture("xid79"), "--state", state];
    let (code, first, _) = health(&args);
    assert_eq!((code, first.contains("KILN-XID-079")), (1, true), "{first}");
    let (code, first, _) = health(&args);
    assert_eq!(code, 0, "nothing new since the last check: {first}");
    // A damaged state file is said and replaced, never a crash.
    std::fs::write(state, "{ half a state").unwrap();
    let (code, _, all) = health(&args);
    assert_eq!(code, 1, "afresh, the Xid counts again");
    assert!(
        all.contains("unreadable") && all.contains("starting afresh"),
        "{all}"
    );
    let (code, _, _) = health(&args);
    assert_eq!(code, 0, "and the state is whole again");
}

#[test]
fn fewer_gpus_than_expected_is_a_fault() {
    let (code, first, _) = health(&[
        "--telemetry-replay",
        &fixture("healthy_idle"),
        "--expect-gpus",
        "8",
    ]);
    assert_eq!(code, 1);
    assert_eq!(first, "1 of 8 GPUs found [KILN-CNT-001]");
}

#[test]
fn the_last_full_run_must_be_recent_and_a_pass() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let runs_arg = runs.to_str().unwrap().to_owned();
    let replay = fixture("healthy_idle");
    let check = |max_age: &str| {
        health(&[
            "--telemetry-replay",
            &replay,
            "--runs",
            &runs_arg,
            "--max-age",
            max_age,
        ])
    };
    let (code, first, _) = check("24h");
    assert_eq!(
        (code, first.contains("[KILN-RUN-003]")),
        (4, true),
        "{first}"
    );

    let out = common::quick_run(&[], &runs.join("pass"));
    assert_eq!(out.status.code(), Some(0));
    let (code, first, _) = check("24h");
    assert_eq!(code, 0, "{first}");
    std::thread::sleep(Duration::from_millis(1200));
    let (code, first, _) = check("1s");
    assert_eq!(
        (code, first.contains("[KILN-RUN-001]")),
        (4, true),
        "{first}"
    );

    let out = common::quick_run(
        &["--workloads", "vram", "--test-stuck-word", "1000"],
        &runs.join("fail"),
    );
    assert_eq!(out.status.code(), Some(1));
    let (code, first, _) = check("24h");
    assert_eq!(code, 1, "{first}");
    assert!(
        first.contains("last full run: 1 memory cells hold a bit stuck")
            && first.ends_with("[KILN-RUN-002]"),
        "{first}"
    );
}

#[test]
fn json_follows_the_first_line() {
    let (_, first, stdout) = health(&["--telemetry-replay", &fixture("xid79"), "--json"]);
    let rest: String = stdout.lines().skip(1).collect::<Vec<_>>().join("\n");
    let v: serde_json::Value = serde_json::from_str(&rest).unwrap();
    assert_eq!(v["line"], first);
    assert_eq!(v["exit_code"], 1);
    assert_eq!(v["faults"][0]["code"], "KILN-XID-079");
}

#[test]
fn a_job_gpu_the_node_does_not_show_is_a_fault_not_a_skip() {
    let recorded = fixture("healthy_idle");
    let (code, first, _) = health(&["--telemetry-replay", &recorded, "--gpus", "0,7"]);
    assert_eq!(code, 1, "{first}");
    assert!(
        first.contains("GPU 7 (NVML index, from --gpus) not found [KILN-CNT-001]"),
        "{first}"
    );
    let (code, first, _) = health(&["--telemetry-replay", &recorded, "--gpus", "0"]);
    assert_eq!(code, 0, "{first}");
}
