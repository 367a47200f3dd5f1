//! kiln on an emulated NVIDIA node: lavapipe dressed as an NVIDIA card by the discrete
//! layer, and the fake `libnvidia-ml.so.1` (`tests/fakes/nvml`) answering for it by the same
//! UUID from a scripted scenario, so that kiln's own NVML code runs: matching, gauges,
//! counters, identity, the event thread, and what NVML says when the GPU is lost.

mod common;

use std::path::{Path, PathBuf};

use common::{expect_json, finding_codes, kiln, nvidia_node_env, read_json};
use serde_json::{Value, json};

/// The emulated card's Vulkan UUID, as NVML writes it (`GPU-...`).
fn card_uuid(dir: &Path) -> String {
    let out = kiln()
        .args(["list", "--json"])
        .envs(common::emulated_env(
            "nvidia",
            "none",
            &dir.join("list.log"),
        ))
        .output()
        .unwrap();
    let devices = expect_json(&out, 0);
    format!("GPU-{}", devices[0]["device_uuid"].as_str().unwrap())
}

/// A node whose one GPU is the emulated card, as NVML describes it in `gpu` (the fields of
/// `tests/fakes/nvml/src/scenario.rs`; its UUID is the card's).
struct Node {
    dir: tempfile::TempDir,
    scenario: PathBuf,
    calls: PathBuf,
}

impl Node {
    fn new(mut gpu: Value) -> Node {
        let dir = tempfile::tempdir().unwrap();
        gpu["uuid"] = card_uuid(dir.path()).into();
        let scenario = dir.path().join("scenario.json");
        std::fs::write(
            &scenario,
            json!({"driver_version": common::FAKE_DRIVER_VERSION, "gpus": [gpu]}).to_string(),
        )
        .unwrap();
        let calls = dir.path().join("nvml-calls.log");
        Node {
            dir,
            scenario,
            calls,
        }
    }

    fn kiln(&self) -> std::process::Command {
        let mut cmd = kiln();
        cmd.envs(nvidia_node_env(&self.scenario, &self.calls));
        cmd
    }

    /// `kiln run --json` of VRAM and compute for `seconds` into the node's run directory.
    fn run(&self, seconds: u32) -> (std::process::Output, PathBuf) {
        let run_dir = self.dir.path().join("run");
        let out = self
            .kiln()
            .args([
                "run",
                "--workloads",
                "vram,compute",
                "--vram-bytes",
                "32MiB",
            ])
            .args(["--duration", &format!("{seconds}s"), "--json", "--out"])
            .arg(&run_dir)
            .output()
            .unwrap();
        (out, run_dir)
    }
}

fn telemetry(run_dir: &Path) -> Vec<Value> {
    common::jsonl(&run_dir.join("telemetry.jsonl"))
}

#[test]
fn a_healthy_card_is_matched_by_uuid_read_through_nvml_and_passes() {
    let node = Node::new(json!({"serial": "1654923012345", "bus_id": "00000000:3B:00.0"}));
    let listed = expect_json(&node.kiln().args(["list", "--json"]).output().unwrap(), 0);
    assert_eq!(listed[0]["nvml"]["matched_by"], "uuid", "{}", listed[0]);
    let (out, run_dir) = node.run(6);
    let report = expect_json(&out, 0);
    let device = &report["devices"][0];
    assert_eq!(device["result"], "pass", "{device}");
    assert_eq!(device["setup"]["identity"]["serial"], "1654923012345");
    // The gauges came from NVML: the scenario's idle H200.
    let vram = device["telemetry"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == "vram")
        .unwrap();
    assert!(vram["samples"].as_u64().unwrap() > 0, "{vram}");
    assert_eq!(vram["gauges"]["gpu_temp_c"]["max"], 38.0);
    assert_eq!(vram["gauges"]["power_w"]["max"], 92.0);
    assert!(!finding_codes(device).contains(&"TELEMETRY_MISSING"));
    assert!(
        !telemetry(&run_dir).iter().any(|r| r["kind"] == "xid"),
        "a healthy card raises no Xid"
    );
}

#[test]
fn a_gpu_that_nvml_reports_lost_mid_run_fails_with_its_last_readings() {
    // Off the bus four seconds in (during the VRAM test, after the preflight), with no
    // Xid of the driver's own: NVML's GPU_IS_LOST is the only word of it.
    let node = Node::new(json!({"lost_at_s": 4.0, "timeline": [
        {"at_s": 0, "temp_c": 44},
        {"at_s": 2, "temp_c": 71, "power_w": 540, "throttle": 0}
    ]}));
    let (out, run_dir) = node.run(10);
    let report = expect_json(&out, 1);
    let device = &report["devices"][0];
    assert_eq!(device["result"], "fail", "{device}");
    let lost = common::findings_of(device, "XID_FALLEN_OFF_BUS");
    assert_eq!(lost.len(), 1, "{:?}", finding_codes(device));
    let xids = lost[0]["evidence"]["xids"].as_array().unwrap();
    assert_eq!(xids.len(), 1, "the loss is counted once: {xids:?}");
    let message = xids[0]["message"].as_str().unwrap();
    assert!(message.contains("GPU_IS_LOST"), "{message}");
    assert!(
        message.contains("last readings 71 °C, 540 W"),
        "the last readings before the loss: {message}"
    );
    let at_s = xids[0]["t_ms"].as_f64().unwrap() / 1e3;
    assert!((3.0..7.0).contains(&at_s), "when it happened: {at_s} s");
    // No sample after the loss: the lost card's ticks are not samples.
    let records = telemetry(&run_dir);
    let loss_ms = records
        .iter()
        .find(|r| r["kind"] == "xid")
        .map(|r| r["t_ms"].as_f64().unwrap())
        .unwrap();
    assert!(
        !records
            .iter()
            .any(|r| r["kind"] == "sample" && r["t_ms"].as_f64().unwrap() > loss_ms),
        "samples recorded after the loss"
    );
    // Rebuilt from the directory, the verdict is the same.
    let rebuilt = expect_json(&common::verdict(&run_dir, &[]), 1);
    assert_eq!(rebuilt["devices"][0]["result"], "fail");
}

#[test]
fn a_loss_the_driver_announced_with_xid_79_is_one_xid_not_two() {
    let node = Node::new(json!({
        "lost_at_s": 4.5,
        "events": [{"at_s": 4.0, "kind": "xid", "xid": 79}]
    }));
    let (out, run_dir) = node.run(10);
    let report = expect_json(&out, 1);
    let device = &report["devices"][0];
    let lost = *common::findings_of(device, "XID_FALLEN_OFF_BUS")
        .first()
        .unwrap_or_else(|| panic!("{:?}", finding_codes(device)));
    let xids = lost["evidence"]["xids"].as_array().unwrap();
    assert_eq!(xids.len(), 1, "{xids:?}");
    assert_eq!(xids[0]["message"], "critical Xid (NVML event)");
    let recorded = telemetry(&run_dir)
        .iter()
        .filter(|r| r["kind"] == "xid")
        .count();
    assert_eq!(recorded, 1);
    let manifest = read_json(&run_dir.join("manifest.json"));
    assert_eq!(manifest["devices"][0]["vendor_id"], 0x10de);
}

/// The report's other processes of the device, as the identity holds them.
fn other_processes(report: &Value) -> &Value {
    &report["devices"][0]["setup"]["identity"]["other_processes"]
}

#[test]
fn a_process_list_that_cannot_be_read_is_unknown_never_none() {
    let tenant = json!([{"pid": 4242, "bytes": 2_147_483_648u64}]);
    // Readable: the tenant is the environment's.
    let node = Node::new(json!({"processes": tenant}));
    let (out, _) = node.run(4);
    let report = expect_json(&out, 2);
    assert_eq!(other_processes(&report), "4242:2147483648");
    assert!(finding_codes(&report["devices"][0]).contains(&"OTHER_TENANTS"));
    // Refused: the same tenant cannot be seen, and the report says the list is unknown.
    let node = Node::new(json!({"processes": tenant, "refuse": ["processes"]}));
    let (out, _) = node.run(4);
    let summary = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = expect_json(&out, 0);
    assert_eq!(
        other_processes(&report),
        &json!({"unavailable": "no_permission"})
    );
    assert!(
        summary.contains("other processes: unknown (no permission)"),
        "{summary}"
    );
    assert!(!summary.contains("other processes: none"), "{summary}");
    // A driver without the calls (an old one) says so the same way.
    let node = Node::new(json!({"processes": tenant, "errors": {
        "nvmlDeviceGetComputeRunningProcesses_v3": "function_not_found"
    }}));
    let (out, _) = node.run(4);
    let report = expect_json(&out, 0);
    assert_eq!(
        other_processes(&report),
        &json!({"unavailable": "function_not_found"})
    );
}

#[test]
fn a_refused_event_registration_is_a_named_gap_not_silence() {
    let node = Node::new(json!({"refuse": ["events"],
        "events": [{"at_s": 3.0, "kind": "xid", "xid": 48}]}));
    let (out, run_dir) = node.run(5);
    let report = expect_json(&out, 0);
    let gap = telemetry(&run_dir)
        .into_iter()
        .find(|r| r["kind"] == "unavailable" && r["cause"] == "events_no_permission")
        .expect("the refusal is recorded");
    assert_eq!(gap["device"], 0, "{gap}");
    let said = report["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .any(|n| {
            n.starts_with("NVML would not watch device 0's Xid and ECC events (no permission)")
        });
    assert!(said, "{}", report["notes"]);
    assert!(
        report["devices"][0]["setup"]["source_problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "events_no_permission")
    );
}
