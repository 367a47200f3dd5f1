//! kiln on an emulated NVIDIA node: lavapipe dressed as an NVIDIA card by the discrete
//! layer, and the fake `libnvidia-ml.so.1` (`tests/fakes/nvml`) answering for it by the same
//! UUID from a scripted scenario, so that kiln's own NVML code runs: matching, gauges,
//! counters, identity, the event thread, and what NVML says when the GPU is lost.

use crate::common;

use std::path::{Path, PathBuf};

use crate::common::{Node, expect_json, finding_codes, read_json};
use serde_json::{Value, json};

impl Node {
    /// `kiln run --json` of VRAM and compute for `seconds` into the node's run directory.
    fn run(&self, seconds: u32) -> (std::process::Output, PathBuf) {
        self.run_as(&mut self.kiln(), seconds)
    }

    /// [`Node::run`] by `cmd` (the node's `kiln` with more settings).
    fn run_as(
        &self,
        cmd: &mut std::process::Command,
        seconds: u32,
    ) -> (std::process::Output, PathBuf) {
        let run_dir = self.dir.path().join("run");
        let out = cmd
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

/// `cmd` as `kiln run --json` of the compute workload for `seconds` into `run_dir`.
fn compute_run(
    cmd: &mut std::process::Command,
    seconds: u32,
    run_dir: &Path,
) -> std::process::Output {
    cmd.args(["run", "--workloads", "compute", "--duration"])
        .arg(format!("{seconds}s"))
        .args(["--json", "--out"])
        .arg(run_dir)
        .output()
        .unwrap()
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
    // The board maker: the PCI subsystem vendor, the low half of NVML's pciSubSystemId
    // (the fake's 0x18be10de: NVIDIA), and the page says it by name (issue 58).
    assert_eq!(
        device["setup"]["identity"]["pci_subsystem_vendor_id"],
        f64::from(0x10de)
    );
    let page = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
    assert!(
        page.contains("<th>Board maker</th><td>NVIDIA (PCI subsystem vendor 0x10de)</td>"),
        "the board maker on the page"
    );
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

/// Asserts that a run's report and summary say its process list is unknown for `word`'s
/// reason, never "none".
fn assert_processes_unknown(out: &std::process::Output, report: &Value, word: &str) {
    let summary = String::from_utf8_lossy(&out.stderr);
    assert_eq!(other_processes(report), &json!({"unavailable": word}));
    let said = format!("other processes: unknown ({})", word.replace('_', " "));
    assert!(summary.contains(&said), "{summary}");
    assert!(!summary.contains("other processes: none"), "{summary}");
}

#[test]
fn a_process_list_that_cannot_be_read_is_unknown_never_none() {
    let tenant = json!([{"pid": 4242, "bytes": 2_147_483_648u64}]);
    // Readable: the tenant is the environment's.
    let node = Node::new(json!({"processes": tenant}));
    let (out, _) = node.run(4);
    let report = expect_json(&out, 2);
    assert_eq!(
        other_processes(&report),
        &json!([{"pid": 4242, "used_bytes": 2_147_483_648u64}])
    );
    assert!(finding_codes(&report["devices"][0]).contains(&"OTHER_TENANTS"));
    // Named where the driver names it, and said to people in words, not `pid:bytes`.
    let node = Node::new(
        json!({"processes": [{"pid": 4242, "bytes": 2_147_483_648u64, "name": "python3"}]}),
    );
    let (out, _) = node.run(4);
    let report = expect_json(&out, 2);
    assert_eq!(
        other_processes(&report),
        &json!([{"pid": 4242, "used_bytes": 2_147_483_648u64, "name": "python3"}])
    );
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(
        summary.contains("other processes: pid 4242 python3 (2.00 GiB)"),
        "{summary}"
    );
    let tenants = common::findings_of(&report["devices"][0], "OTHER_TENANTS");
    assert!(
        tenants[0]["summary"]
            .as_str()
            .unwrap_or_default()
            .starts_with("pid 4242 python3 (2.00 GiB) was using the GPU when the test started"),
        "{}",
        tenants[0]
    );
    // Refused: the same tenant cannot be seen, and the report says the list is unknown.
    let node = Node::new(json!({"processes": tenant, "refuse": ["processes"]}));
    let (out, _) = node.run(4);
    let report = expect_json(&out, 0);
    assert_processes_unknown(&out, &report, "no_permission");
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
    common::validate_report(&run_dir.join("report.json"));
}

/// One NVML call of the fake's log.
struct Call {
    /// Seconds on the scenario's clock.
    t: f64,
    symbol: String,
    gpu: Option<usize>,
    /// The calling thread's name, as the kernel holds it (15 bytes at most).
    thread: String,
}

fn calls(path: &Path) -> Vec<Call> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let mut parts = l.split(' ');
            Some(Call {
                t: parts.next()?.parse().ok()?,
                symbol: parts.next()?.to_owned(),
                gpu: parts.next()?.parse().ok(),
                thread: parts.next()?.to_owned(),
            })
        })
        .collect()
}

/// Calls per symbol.
fn by_symbol<'a>(calls: &[&'a Call]) -> std::collections::BTreeMap<&'a str, usize> {
    let mut out = std::collections::BTreeMap::new();
    for c in calls {
        *out.entry(c.symbol.as_str()).or_default() += 1;
    }
    out
}

/// Alone: it counts the sidecar's ticks, which a sibling test on the same two cores
/// delays (`scripts/test.sh` runs it last, with nothing beside it).
mod alone {
    use super::*;

    #[test]
    fn sampling_stays_within_fifteen_nvml_calls_per_gpu_per_tick() {
        // A card with fans, so that every kind of reading is taken.
        let node = Node::new(json!({"fans": 2, "fan_pct": 35}));
        let (out, run_dir) = node.run(8);
        let report = expect_json(&out, 0);
        let log = calls(&node.calls);
        // The steady middle of the run, phase boundaries and all.
        let (from_s, to_s) = (2.5, 7.0);
        let on_gpu = |thread: &str| -> Vec<&Call> {
            log.iter()
                .filter(|c| (from_s..to_s).contains(&c.t) && c.gpu == Some(0) && c.thread == thread)
                .collect()
        };
        let tick = on_gpu("kiln-telemetry");
        let ticks = tick
            .iter()
            .filter(|c| c.symbol == "nvmlDeviceGetTemperature")
            .count();
        assert!(ticks >= 15, "{ticks} ticks in 4.5 s at the default 200 ms");
        // The counters read at a phase boundary are the boundary's, not a tick's: each
        // snapshot reads four ECC totals, and one handle and one batch of field values beside
        // the counters' own calls.
        let counters = [
            "nvmlDeviceGetTotalEccErrors",
            "nvmlDeviceGetMemoryErrorCounter",
            "nvmlDeviceGetRetiredPages",
            "nvmlDeviceGetRetiredPagesPendingStatus",
            "nvmlDeviceGetPcieReplayCounter",
            "nvmlDeviceGetTotalEnergyConsumption",
            "nvmlDeviceGetViolationStatus",
        ];
        let (boundary, tick): (Vec<&Call>, Vec<&Call>) = tick
            .into_iter()
            .partition(|c| counters.contains(&c.symbol.as_str()));
        let snapshots = by_symbol(&boundary)
            .get("nvmlDeviceGetTotalEccErrors")
            .map_or(0, |n| n / 4);
        let per_snapshot = (boundary.len() + 2 * snapshots) as f64 / snapshots.max(1) as f64;
        eprintln!("{snapshots} counter snapshots of {per_snapshot:.0} NVML calls each");
        assert!(per_snapshot <= 32.0, "{per_snapshot} calls per snapshot");
        let per_tick = (tick.len() - 2 * snapshots) as f64 / ticks as f64;
        let symbols = by_symbol(&tick);
        eprintln!("{per_tick:.1} NVML calls per GPU per tick over {ticks} ticks: {symbols:?}");
        assert!(
            per_tick <= 15.0,
            "{per_tick:.1} calls per tick: {symbols:?}"
        );
        // What does not change is read once per run, never on the tick.
        for fixed in [
            "nvmlDeviceGetMaxClockInfo",
            "nvmlDeviceGetPowerManagementDefaultLimit",
            "nvmlDeviceGetMaxPcieLinkGeneration",
            "nvmlDeviceGetMaxPcieLinkWidth",
            "nvmlDeviceGetNumFans",
        ] {
            assert_eq!(symbols.get(fixed), None, "{fixed} re-read mid-run");
        }
        // The slow calls are never on the tick, and keep their own schedule: about once a
        // second, each.
        let slow = on_gpu("kiln-nvml-slow");
        let slow_symbols = by_symbol(&slow);
        eprintln!("slow schedule in {:.1} s: {slow_symbols:?}", to_s - from_s);
        for symbol in [
            "nvmlDeviceGetPcieThroughput",
            "nvmlDeviceGetFanSpeed_v2",
            "nvmlDeviceGetComputeRunningProcesses_v3",
        ] {
            assert_eq!(symbols.get(symbol), None, "{symbol} on the tick");
            let n = slow_symbols.get(symbol).copied().unwrap_or(0);
            // Twice a round for throughput (each way) and the fans (two of them).
            assert!((3..=12).contains(&n), "{n} calls of {symbol} in 4.5 s");
        }
        // And the slow readings reach the samples.
        let fans = telemetry(&run_dir)
            .into_iter()
            .filter(|r| r["kind"] == "sample" && r["source"] == "nvml")
            .filter(|r| r["readings"]["fan1_speed_pct"] == 35.0)
            .count();
        assert!(fans >= 3, "{fans} samples with the fans");
        assert_eq!(report["devices"][0]["result"], "pass");
    }
}

impl Node {
    /// `kiln health --json` on the node: (exit code, the report).
    fn health(&self) -> (i32, Value) {
        let out = self.kiln().args(["health", "--json"]).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let report: Value =
            serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
        (out.status.code().unwrap_or(-1), report)
    }
}

/// The faults' codes of a health report.
fn fault_codes(report: &Value) -> Vec<&str> {
    report["faults"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["code"].as_str())
        .collect()
}

fn checked(report: &Value) -> Vec<&str> {
    said_in(report, "checked")
}

/// What the check says limited it, apart from what it checked.
fn notes(report: &Value) -> Vec<&str> {
    said_in(report, "notes")
}

fn said_in<'a>(report: &'a Value, key: &str) -> Vec<&'a str> {
    report[key]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

#[test]
fn health_checks_only_the_counters_it_read_and_says_why_it_could_not() {
    // Every counter read: healthy, and the memory checks are listed.
    let (code, report) = Node::new(json!({})).health();
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["line"], "OK: 1 GPU healthy [KILN-OK-000]");
    assert!(
        checked(&report).contains(
            &"ECC, row remapping, retired pages, SRAM, NVLink, PCIe link, recovery action"
        ),
        "{report}"
    );
    // The counters refused: could not check, each group named with why, and none listed as
    // checked, although the energy and the link still read.
    let (code, report) = Node::new(json!({"refuse": ["counters"]})).health();
    assert_eq!(code, 4, "{report}");
    let line = report["line"].as_str().unwrap();
    assert!(
        line.contains(
            "could not read ECC (no permission), row remapping (no permission), retired pages (no permission)"
        ) && line.ends_with("[KILN-NOT-002]"),
        "{line}"
    );
    assert!(!line.contains("NVML not available"), "{line}");
    assert!(
        !checked(&report).iter().any(|c| c.contains("ECC")),
        "{report}"
    );
    // One group timing out is enough to leave the GPU unchecked.
    let (code, report) = Node::new(json!({"errors": {
        "nvmlDeviceGetTotalEccErrors": "timeout",
        "nvmlDeviceGetMemoryErrorCounter": "timeout"
    }}))
    .health();
    assert_eq!(code, 4, "{report}");
    assert!(
        report["line"]
            .as_str()
            .unwrap()
            .contains("could not read ECC (timeout)"),
        "{report}"
    );
    // A GeForce card has none of them: nothing is missing, and the report says what the
    // card does not have rather than claiming it checked it.
    let (code, report) = Node::new(json!({
        "name": "NVIDIA GeForce RTX 4090", "fans": 1, "nvlinks": 0,
        "unsupported": ["ecc", "retired_pages", "remap", "hbm_temp", "sram"]
    }))
    .health();
    assert_eq!(code, 0, "{report}");
    let said = checked(&report);
    assert!(said.contains(&"PCIe link, recovery action"), "{said:?}");
    assert!(
        !said.iter().any(|c| c.contains("ECC")),
        "what the card lacks is not checked: {said:?}"
    );
    assert!(
        notes(&report)
            .contains(&"not supported by the card: ECC, row remapping, retired pages, SRAM"),
        "{report}"
    );
}

#[test]
fn health_on_a_gpu_nvml_answers_lost_for_reports_the_loss() {
    let (code, report) = Node::new(json!({"lost_at_s": 0.0})).health();
    assert_eq!(code, 1, "{report}");
    let codes = fault_codes(&report);
    assert_eq!(codes.first(), Some(&"KILN-XID-079"), "{report}");
    let said = report.to_string();
    assert!(!said.contains("NVML not available"), "{said}");
    assert!(!said.contains("no NVML device"), "{said}");
}

/// A machine root for `KILN_SYSTEM_ROOT` holding one NVIDIA card at `bdf`, bound to the
/// nvidia driver, on a Gen5 x16 link.
fn sysfs_card(bdf: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("sys/bus/pci/devices").join(bdf);
    std::fs::create_dir_all(&dir).unwrap();
    for (file, content) in [
        ("class", "0x030200\n"),
        ("vendor", "0x10de\n"),
        ("device", "0x2335\n"),
        ("current_link_speed", "32.0 GT/s PCIe\n"),
        ("max_link_speed", "32.0 GT/s PCIe\n"),
        ("current_link_width", "16\n"),
        ("max_link_width", "16\n"),
    ] {
        std::fs::write(dir.join(file), content).unwrap();
    }
    let driver = root.path().join("sys/bus/pci/drivers/nvidia");
    std::fs::create_dir_all(&driver).unwrap();
    std::os::unix::fs::symlink(&driver, dir.join("driver")).unwrap();
    root
}

#[test]
fn a_sysfs_fixture_changes_where_sysfs_is_read_and_nvml_is_still_asked() {
    // The card on the PCI bus as sysfs shows it, and NVML answering for it at the same
    // address: one GPU, its counters read through NVML, its link through sysfs.
    let root = sysfs_card("0000:18:00.0");
    let node = Node::of_gpus(1, json!({}));
    let mut gpu = node.kiln();
    gpu.env("KILN_SYSTEM_ROOT", root.path());
    let out = gpu.args(["health", "--json"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(
        report["line"], "OK: 1 GPU healthy [KILN-OK-000]",
        "{stdout}"
    );
    assert!(!stdout.contains("KILN-CNT-002"), "{stdout}");
    assert!(stdout.contains("ECC, row remapping"), "{stdout}");
}

#[test]
fn one_double_bit_error_is_one_xid_48_with_every_way_it_came_named() {
    // The driver raises Xid 48 and NVML its double-bit ECC event for the same error.
    // A single-bit error just after, and the row the DBE hit remapped on the next reset.
    let node = Node::new(json!({"events": [
        {"at_s": 3.0, "kind": "xid", "xid": 48},
        {"at_s": 3.0, "kind": "dbe"},
        {"at_s": 3.2, "kind": "sbe"}
    ], "timeline": [{"at_s": 3.0, "ecc_uncorrected_volatile": 1, "ecc_uncorrected_aggregate": 1,
        "ecc_corrected_volatile": 1, "remapped_unc": 1, "remap_pending": 1}]}));
    let (out, run_dir) = node.run(6);
    let report = expect_json(&out, 1);
    let device = &report["devices"][0];
    let codes = finding_codes(device);
    for code in [
        "ECC_UNCORRECTABLE",
        "ROW_REMAP_PENDING",
        "XID_MEMORY_HARDWARE",
    ] {
        assert!(codes.contains(&code), "{code} missing: {codes:?}");
    }
    assert_eq!(device["result"], "fail");
    let memory = common::findings_of(device, "XID_MEMORY_HARDWARE");
    assert_eq!(memory.len(), 1, "{:?}", finding_codes(device));
    let evidence = &memory[0]["evidence"];
    assert_eq!(
        evidence["codes"],
        json!([{"code": 48, "count": 1}]),
        "{evidence}"
    );
    assert_eq!(
        evidence["seen_by"],
        json!(["nvml_xid_event", "nvml_ecc_event"]),
        "{evidence}"
    );
    let summary = memory[0]["summary"].as_str().unwrap();
    assert!(!summary.contains("x2"), "{summary}");
    // Every record is kept in the evidence as it came (the single-bit one too).
    let recorded = telemetry(&run_dir)
        .iter()
        .filter(|r| r["kind"] == "xid")
        .count();
    assert_eq!(recorded, 3);
    common::validate_report(&run_dir.join("report.json"));
}

#[test]
fn a_tenant_arriving_mid_run_is_the_environment_and_kiln_s_own_workers_are_not_tenants() {
    // kiln's own workers are on every process list a real driver gives: never tenants.
    let node = Node::new(json!({"kiln_workers_listed": true}));
    let (out, run_dir) = node.run(6);
    let report = expect_json(&out, 0);
    assert!(
        !finding_codes(&report["devices"][0]).contains(&"OTHER_TENANTS"),
        "{}",
        report["devices"][0]
    );
    // The workers are in the evidence.
    let workers = common::jsonl(&run_dir.join("events.jsonl"))
        .into_iter()
        .filter(|e| e["kind"] == "worker" && e["pid"].as_u64().is_some())
        .count();
    assert_eq!(workers, 1);
    // A tenant that starts four seconds in, with kiln's workers beside it.
    let node = Node::new(json!({"kiln_workers_listed": true,
        "processes": [{"pid": 4242, "bytes": 2_147_483_648u64, "from_s": 4.0}]}));
    let (out, run_dir) = node.run(8);
    let report = common::json(&out);
    let tenants = common::findings_of(&report["devices"][0], "OTHER_TENANTS");
    assert_eq!(tenants.len(), 1, "{}", report["devices"][0]);
    // Its weight is what it cost: the emulated tenant takes nothing from lavapipe, so the
    // rates on both sides of its coming differ only by the CPU's own noise. Where none fell
    // 5% it is a note and the run passes; where one did, the environment's (exit 2).
    let changes: Vec<f64> = tenants[0]["evidence"]["arrived"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|a| a["rate_changes"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c.as_f64())
        .collect();
    let cost = changes.is_empty() || changes.iter().any(|c| *c <= -0.05);
    let (severity, code) = if cost { ("major", 2) } else { ("note", 0) };
    assert_eq!(tenants[0]["severity"], severity, "{changes:?}");
    assert_eq!(out.status.code(), Some(code), "{changes:?}");
    let summary = tenants[0]["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("pid 4242 (2.00 GiB) started using the GPU during the test, "),
        "{summary}"
    );
    assert!(!summary.contains("when the test started"), "{summary}");
    // Its arrival is timed, and the compute rate before and after it is said.
    let arrived = &tenants[0]["evidence"]["arrived"][0];
    assert!(
        arrived["first_seen_ms"].as_f64().unwrap() >= 4000.0,
        "{arrived}"
    );
    if arrived["phase"] == "compute" {
        let rates = arrived["rates"].as_array().unwrap();
        assert!(
            rates
                .iter()
                .any(|r| r.as_str().unwrap().contains("before it")),
            "{arrived}"
        );
    }
    common::validate_report(&run_dir.join("report.json"));
}

#[test]
fn vulkan_nvml_and_sysfs_meet_on_one_card_by_its_uuid_and_pci_address() {
    const UUID: &str = "GPU-4b494c4e-4832-3030-8000-00000000003b";
    let card = |node: &Node| {
        let mut cmd = node.kiln();
        cmd.env("KILN_EMULATE_PCI_ADDRESS", "0000:3b:00.0")
            .env("KILN_EMULATE_UUID", UUID);
        cmd
    };
    // NVML knows the card by both: matched by UUID, and Vulkan gives the address.
    let node = Node::of_gpus(1, json!({}));
    std::fs::write(
        &node.scenario,
        json!({"driver_version": common::FAKE_DRIVER_VERSION,
               "gpus": [{"uuid": UUID, "bus_id": "00000000:3B:00.0"}]})
        .to_string(),
    )
    .unwrap();
    let listed = expect_json(&card(&node).args(["list", "--json"]).output().unwrap(), 0);
    let device = &listed[0];
    assert_eq!(device["pci_address"], "0000:3b:00.0", "{device}");
    assert_eq!(
        device["device_uuid"],
        "4b494c4e-4832-3030-8000-00000000003b"
    );
    assert_eq!(device["nvml"]["matched_by"], "uuid", "{device}");
    // An NVML whose UUID differs (a MIG or driver quirk) still finds it by its address.
    std::fs::write(
        &node.scenario,
        json!({"driver_version": common::FAKE_DRIVER_VERSION,
               "gpus": [{"uuid": "GPU-00000000-0000-0000-0000-000000000001", "bus_id": "00000000:3B:00.0"}]})
        .to_string(),
    )
    .unwrap();
    let listed = expect_json(&card(&node).args(["list", "--json"]).output().unwrap(), 0);
    assert_eq!(listed[0]["nvml"]["matched_by"], "pci", "{}", listed[0]);
    // sysfs at the same address reads the same card's link during a run.
    let root = sysfs_card("0000:3b:00.0");
    let run_dir = node.dir.path().join("run-sysfs");
    let out = compute_run(
        card(&node).env("KILN_SYSTEM_ROOT", root.path()),
        3,
        &run_dir,
    );
    expect_json(&out, 0);
    let link = telemetry(&run_dir).into_iter().any(|r| {
        r["source"] == "sysfs" && r["device"] == 0 && r["readings"]["pcie_speed_gts"] == 32.0
    });
    assert!(link, "no sysfs link reading for the card");
    // Without the address, the layer's card has none, as lavapipe has none.
    let listed = expect_json(&node.kiln().args(["list", "--json"]).output().unwrap(), 0);
    assert!(listed[0]["pci_address"].is_null(), "{}", listed[0]);
}

/// One NVML error on every reading and counter, through `list`, `monitor`, `run` and
/// `health`: said with its stable `word` everywhere, never a zero, never a silent pass.
fn nvml_error_is_said_everywhere(code: &str, word: &str) {
    // Every reading and counter answers with the error; who the card is still reads,
    // so it is matched and each command meets the error on every read.
    let node = Node::new(json!({"errors": {"gauges": code, "hbm_temp": code, "counters": code}}));
    let lost = code == "gpu_is_lost";
    // `kiln list`: the card, matched.
    let listed = expect_json(&node.kiln().args(["list", "--json"]).output().unwrap(), 0);
    assert_eq!(
        listed[0]["nvml"]["matched_by"], "uuid",
        "{code}: {}",
        listed[0]
    );
    // `kiln monitor`: every record says the word, none a zero.
    let out = node
        .kiln()
        .args(["monitor", "--duration", "2s", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{code}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let nvml_samples: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "sample" && r["source"] == "nvml")
        .collect();
    for s in &nvml_samples {
        assert_eq!(
            s["readings"]["gpu_temp_c"],
            json!({"unavailable": word}),
            "{code}: {s}"
        );
        assert!(
            !s["readings"]
                .as_object()
                .unwrap()
                .values()
                .any(Value::is_number),
            "{code}: a number where every read failed: {s}"
        );
    }
    if lost {
        assert!(
            records
                .iter()
                .any(|r| r["kind"] == "xid" && r["xid"]["code"] == 79),
            "{code}: the loss is recorded"
        );
    } else {
        assert!(!nvml_samples.is_empty(), "{code}: {records:?}");
    }
    // `kiln run`: never a silent pass.
    let (out, _) = node.run(4);
    let exit = out.status.code();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{code}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    let device = &report["devices"][0];
    let codes = finding_codes(device);
    if lost {
        assert_eq!(exit, Some(1), "{code}: {codes:?}");
        assert!(codes.contains(&"XID_FALLEN_OFF_BUS"), "{code}: {codes:?}");
    } else {
        assert!(codes.contains(&"TELEMETRY_MISSING"), "{code}: {codes:?}");
        let unavailable = device["telemetry"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| p["counters_unavailable"].as_array().unwrap())
            .any(|c| c == "ecc_uncorrected_volatile");
        assert!(
            unavailable,
            "{code}: the counters are unavailable, not zero"
        );
    }
    // `kiln health`: what it could not read is said, with the word.
    let (exit, health) = node.health();
    let line = health["line"].as_str().unwrap();
    match code {
        // Nothing at all to read is nothing checked, said as what the card answers.
        "not_supported" => {
            assert_eq!(exit, 4, "{code}: {health}");
            assert!(
                line.contains("(NVML answers not supported for every counter and sensor)"),
                "{line}"
            );
            assert!(
                notes(&health)
                    .iter()
                    .any(|c| c.starts_with("not supported by the card: ECC")),
                "{code}: {health}"
            );
        }
        "gpu_is_lost" => {
            assert_eq!(exit, 1, "{code}: {health}");
            assert!(line.contains("KILN-XID-079"), "{line}");
        }
        _ => {
            assert_eq!(exit, 4, "{code}: {health}");
            let said = word.replace('_', " ");
            assert!(
                line.contains(&format!("could not read ECC ({said})")),
                "{code}: {line}"
            );
        }
    }
}

/// The tests of every NVML error kiln can meet, one each so that they run side by side.
macro_rules! nvml_error_tests {
    ($($name:ident: $code:literal => $word:literal;)*) => {
        $(
            #[test]
            fn $name() {
                nvml_error_is_said_everywhere($code, $word);
            }
        )*
    };
}

nvml_error_tests! {
    nvml_not_supported_is_said_never_zero: "not_supported" => "not_supported";
    nvml_no_permission_is_said_never_zero: "no_permission" => "no_permission";
    nvml_function_not_found_is_said_never_zero: "function_not_found" => "function_not_found";
    nvml_unknown_is_said_never_zero: "unknown" => "unknown";
    nvml_timeout_is_said_never_zero: "timeout" => "timeout";
    nvml_gpu_is_lost_is_said_never_zero: "gpu_is_lost" => "gpu_lost";
}

#[test]
fn an_old_driver_without_the_newer_calls_is_read_for_what_it_has() {
    // An R470 node: the `_v3` process lists and the `_v2` memory call are not in its
    // library at all. A tenant holds 2 GiB that such a driver cannot list.
    const OLD: &str = "470.199.02";
    let node = Node::new(json!({"processes": [{"pid": 4242, "bytes": 2_147_483_648u64}]}));
    std::fs::write(
        &node.scenario,
        std::fs::read_to_string(&node.scenario)
            .unwrap()
            .replace(common::FAKE_DRIVER_VERSION, OLD),
    )
    .unwrap();
    let (out, run_dir) = node.run_as(
        node.kiln()
            .env("LD_LIBRARY_PATH", common::old_fake_nvml_dir())
            .env("KILN_EMULATE_DRIVER_VERSION", OLD),
        4,
    );
    let report = expect_json(&out, 0);
    let device = &report["devices"][0];
    assert_eq!(device["setup"]["identity"]["driver_version"], OLD);
    // The list it cannot give is unknown, with why, never "none".
    assert_processes_unknown(&out, &report, "function_not_found");
    // The memory it cannot read is said so in every sample; the rest reads.
    let samples: Vec<Value> = telemetry(&run_dir)
        .into_iter()
        .filter(|r| r["kind"] == "sample" && r["source"] == "nvml")
        .collect();
    assert!(!samples.is_empty());
    for s in &samples {
        assert_eq!(
            s["readings"]["mem_used_bytes"],
            json!({"unavailable": "function_not_found"}),
            "{s}"
        );
        assert!(s["readings"]["gpu_temp_c"].is_number(), "{s}");
    }
    assert!(!finding_codes(device).contains(&"TELEMETRY_MISSING"));
    // R550's SRAM status is not in its library: said, and judged by nothing.
    let snapshot = telemetry(&run_dir)
        .into_iter()
        .find(|r| r["kind"] == "snapshot" && r["source"] == "nvml")
        .unwrap();
    assert_eq!(
        snapshot["counters"]["sram_threshold_exceeded"],
        json!({"unavailable": "function_not_found"}),
        "{snapshot}"
    );
    assert!(
        snapshot["counters"]["remap_banks_max"].is_number(),
        "{snapshot}"
    );
    // The clocks' reasons still read, under the old name of the call.
    assert!(
        samples
            .iter()
            .all(|s| s["readings"]["throttle_reasons"].is_string())
    );
}

#[test]
fn every_clocks_event_reason_the_driver_sets_is_named() {
    // R580's board limit (0x200) and reliability policy (0x400), which nvml-wrapper drops.
    let node = Node::new(json!({"throttle": 0x600 | 0x04, "util_gpu": 100}));
    let out = node
        .kiln()
        .args(["monitor", "--duration", "2s", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let reasons: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["kind"] == "sample" && r["source"] == "nvml")
        .filter_map(|r| {
            r["readings"]["throttle_reasons"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert!(!reasons.is_empty());
    for r in &reasons {
        assert_eq!(r, "sw_power_cap,board_limit,reliability_policy");
    }
}

#[test]
fn nvlink_errors_and_a_link_lost_mid_run_are_read_per_link_and_judged() {
    // An HGX H200's 18 links: link 7 corrects errors far over the 100 a second a link can
    // afford (CRC at one end, the replays of the same flits) and link 5 goes down two
    // seconds in.
    let node = Node::new(json!({"timeline": [
        {"at_s": 0, "util_gpu": 100},
        {"at_s": 2, "nvlink_replay": {"7": 900}, "nvlink_crc_flit": {"7": 4000}, "nvlink_down": [5]}
    ]}));
    let (out, run_dir) = node.run(5);
    let report = expect_json(&out, 1);
    let device = &report["devices"][0];
    let errors = common::findings_of(device, "NVLINK_ERRORS");
    assert_eq!(
        errors.len(),
        1,
        "one finding, for the one bad link: {device}"
    );
    assert_eq!(errors[0]["evidence"]["link"], 7);
    assert_eq!(errors[0]["severity"], "major");
    let down = common::findings_of(device, "NVLINK_DOWN");
    assert_eq!(down.len(), 1, "{device}");
    assert_eq!(down[0]["evidence"]["link"], 5);
    // Every link's state and counters at every boundary, none past the 18th.
    let snapshot = telemetry(&run_dir)
        .into_iter()
        .find(|r| r["kind"] == "snapshot" && r["source"] == "nvml")
        .unwrap();
    let links = snapshot["counters"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.ends_with("_state") && k.starts_with("nvlink"))
        .count();
    assert_eq!(links, 18, "{snapshot}");
    // The far end of every link, read once: another GPU's here, none an NVSwitch.
    let identity = telemetry(&run_dir)
        .into_iter()
        .find(|r| r["kind"] == "identity" && r["source"] == "nvml")
        .unwrap();
    assert_eq!(
        identity["fields"]["nvlink_switch_links"].as_f64(),
        Some(0.0),
        "{identity}"
    );
    // On an NVSwitch baseboard, every link ends at a switch, and one down all run fails
    // the GPU, where on a card of bridges it would be a note.
    let hgx = Node::new(json!({"nvlink_remote": 2, "nvlink_down": [3]}));
    let (out, run_dir) = hgx.run(3);
    let report = expect_json(&out, 1);
    let down = common::findings_of(&report["devices"][0], "NVLINK_DOWN");
    assert_eq!(down.len(), 1, "{report}");
    assert_eq!(down[0]["severity"], "major");
    let identity = telemetry(&run_dir)
        .into_iter()
        .find(|r| r["kind"] == "identity" && r["source"] == "nvml")
        .unwrap();
    assert_eq!(
        identity["fields"]["nvlink_switch_links"].as_f64(),
        Some(18.0),
        "{identity}"
    );
    // A GPU without NVLink is asked once and says nothing.
    let plain = Node::new(json!({"nvlinks": 0}));
    let (out, run_dir) = plain.run(3);
    expect_json(&out, 0);
    let snapshot = telemetry(&run_dir)
        .into_iter()
        .find(|r| r["kind"] == "snapshot" && r["source"] == "nvml")
        .unwrap();
    assert!(
        !snapshot["counters"]
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.starts_with("nvlink")),
        "{snapshot}"
    );
}

#[test]
fn the_remapper_s_banks_and_the_sram_flag_reach_the_run_and_the_node_check() {
    let node = Node::new(json!({
        "remap_banks": [2550, 6, 2, 1, 1], "remapped_unc": 12,
        "sram_unc_parity": 5, "sram_threshold": 1
    }));
    let (out, _) = node.run(3);
    let report = expect_json(&out, 1);
    let codes = finding_codes(&report["devices"][0]);
    assert!(codes.contains(&"ROW_REMAP_BANKS_LOW"), "{codes:?}");
    assert!(codes.contains(&"SRAM_THRESHOLD_EXCEEDED"), "{codes:?}");
    let (code, health) = node.health();
    assert_eq!(code, 1, "{health}");
    let faults = fault_codes(&health);
    assert!(faults.contains(&"KILN-MEM-005"), "{faults:?}");
    assert!(faults.contains(&"KILN-MEM-006"), "{faults:?}");
    // A card whose driver refuses the SRAM status (it wants root) is not judged on it.
    let refused = Node::new(json!({"refuse": ["sram"]}));
    let (code, health) = refused.health();
    assert_eq!(code, 0, "{health}");
}

#[test]
fn a_thermal_climb_through_sw_then_hw_slowdown_is_the_cooling_and_its_near_misses_are_not() {
    // Hot under load, the driver slows the clocks in software (0x20) and then the
    // hardware's thermal slowdown (0x40, with HW slowdown 0x08) holds them.
    let climb = Node::new(json!({"timeline": [
        {"at_s": 0, "temp_c": 45},
        {"at_s": 1.5, "temp_c": 84, "throttle": 0x20, "util_gpu": 100},
        {"at_s": 3.0, "temp_c": 91, "throttle": 0x20 | 0x40 | 0x08, "sm_mhz": 1410}
    ]}));
    let (out, _) = climb.run(8);
    let report = expect_json(&out, 2);
    let device = &report["devices"][0];
    let thermal = common::findings_of(device, "THERMAL_THROTTLE");
    assert!(!thermal.is_empty(), "{:?}", finding_codes(device));
    let summary = thermal[0]["summary"].as_str().unwrap();
    assert!(
        summary.contains("(hottest 91 °C, memory 41 °C)"),
        "{summary}"
    );
    // Not the power delivery: the card was hot.
    assert!(!finding_codes(device).contains(&"POWER_DELIVERY"));
    // Hot without a slowdown is no throttling.
    let warm = Node::new(json!({"timeline": [{"at_s": 0, "temp_c": 84, "util_gpu": 100}]}));
    let (out, _) = warm.run(5);
    let report = expect_json(&out, 0);
    assert!(!finding_codes(&report["devices"][0]).contains(&"THERMAL_THROTTLE"));
    // A HW slowdown while cool, holding the clock at half its maximum, is the power, not
    // the cooling.
    let cool = Node::new(
        json!({"timeline": [{"at_s": 0, "temp_c": 52, "throttle": 0x08, "sm_mhz": 990}]}),
    );
    let (out, _) = cool.run(5);
    let report = expect_json(&out, 2);
    let codes = finding_codes(&report["devices"][0]);
    assert!(codes.contains(&"POWER_DELIVERY"), "{codes:?}");
    assert!(!codes.contains(&"THERMAL_THROTTLE"), "{codes:?}");
    // The same flag with the clock at its maximum cost nothing: a note, and a pass.
    let flagged = Node::new(json!({"timeline": [{"at_s": 0, "temp_c": 52, "throttle": 0x08}]}));
    let (out, _) = flagged.run(5);
    let report = expect_json(&out, 0);
    let power = common::findings_of(&report["devices"][0], "POWER_DELIVERY");
    assert_eq!(power.len(), 1, "{:?}", finding_codes(&report["devices"][0]));
    assert_eq!(power[0]["severity"], "note");
}

#[test]
fn an_administrator_s_power_cap_is_noted_and_a_card_at_its_own_limit_is_not() {
    // 450 W of the H200's 700, and the SW power cap (0x04) holding the clocks of a busy
    // card (a cap holds only under load) that still ran at its maximum clock: a note.
    let capped =
        Node::new(json!({"power_limit_w": 450, "power_w": 448, "throttle": 0x04, "util_gpu": 100}));
    let (out, _) = capped.run(5);
    let report = expect_json(&out, 0);
    let device = &report["devices"][0];
    let cap = common::findings_of(device, "ADMIN_POWER_CAP");
    assert_eq!(cap.len(), 1, "{:?}", finding_codes(device));
    assert_eq!(cap[0]["class"], "info");
    assert_eq!(cap[0]["evidence"]["power_limit_enforced_w"]["max"], 450.0);
    assert_eq!(cap[0]["evidence"]["power_limit_default_w"]["min"], 700.0);
    // The card at its own limit is not an administrator's cap.
    let own = Node::new(json!({"power_w": 698, "throttle": 0x04, "util_gpu": 100}));
    let (out, _) = own.run(5);
    let report = expect_json(&out, 0);
    assert!(!finding_codes(&report["devices"][0]).contains(&"ADMIN_POWER_CAP"));
    // Nor is a lower limit that never held the clocks.
    let unused = Node::new(json!({"power_limit_w": 450}));
    let (out, _) = unused.run(5);
    let report = expect_json(&out, 0);
    assert!(!finding_codes(&report["devices"][0]).contains(&"ADMIN_POWER_CAP"));
}

#[test]
fn an_eight_gpu_node_tests_what_vulkan_sees_and_names_why_each_other_gpu_is_not_tested() {
    // Eight H200s as NVML lists them; Vulkan sees only the first (the layer's card at its
    // address and UUID); the fourth has MIG on.
    const FIRST: &str = "GPU-6b696c6e-0000-4000-8000-000000000000";
    let node = Node::of_gpus(8, json!({}));
    let mut spec = common::read_json(&node.scenario);
    spec["gpus"][3]["mig"] = true.into();
    std::fs::write(&node.scenario, spec.to_string()).unwrap();
    let run_dir = node.dir.path().join("run");
    let out = compute_run(
        node.kiln()
            .env("KILN_EMULATE_UUID", FIRST)
            .env("KILN_EMULATE_PCI_ADDRESS", "0000:18:00.0"),
        3,
        &run_dir,
    );
    let report = expect_json(&out, 4);
    let devices = report["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 8, "{report}");
    assert_eq!(devices[0]["result"], "pass", "{}", devices[0]);
    assert_eq!(devices[0]["setup"]["identity"]["uuid"], FIRST);
    for (i, d) in devices.iter().enumerate().skip(1) {
        let missing = common::findings_of(d, "GPU_NOT_VISIBLE");
        assert_eq!(missing.len(), 1, "GPU{i}: {d}");
        let (cause, action) = (&missing[0]["evidence"]["cause"], &missing[0]["action"]);
        if i == 3 {
            assert_eq!(cause, "mig_enabled", "{action}");
            assert!(action.as_str().unwrap().contains("-mig 0"), "{action}");
        } else {
            // The test's own setting limits Vulkan to lavapipe: that is the reason given.
            assert_eq!(cause, "driver_files_override", "GPU{i}: {action}");
        }
    }
}

/// A Python environment as a venv lays it out (`bin/python3`, `pyvenv.cfg`), with PyTorch
/// built for CUDA `cuda`: its files only, nothing that runs.
fn python_env_with_torch(cuda: &str) -> tempfile::TempDir {
    let env = tempfile::tempdir().unwrap();
    let bin = env.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("python3"), "").unwrap();
    std::fs::write(
        env.path().join("pyvenv.cfg"),
        "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11.9\n",
    )
    .unwrap();
    let torch = env.path().join("lib/python3.11/site-packages/torch");
    std::fs::create_dir_all(&torch).unwrap();
    std::fs::write(
        torch.join("version.py"),
        format!(
            "__version__ = '2.7.0+cu{}'\ncuda: Optional[str] = '{cuda}'\nhip: Optional[str] = None\n",
            cuda.replace('.', "")
        ),
    )
    .unwrap();
    env
}

/// The kinds of the diagnoses `kiln list --json` gives its first device.
fn diagnosis_kinds(listed: &Value) -> Vec<String> {
    listed[0]["diagnoses"]
        .as_array()
        .unwrap_or_else(|| panic!("no diagnoses: {listed}"))
        .iter()
        .map(|d| d["kind"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn kiln_list_says_why_pytorch_cannot_see_the_card_from_files_alone() {
    // A driver that supports CUDA 11.8, PyTorch built for 12.8 in a venv on PATH, and the
    // card in an x4 slot: both said, each with its fix.
    let node = Node::new(json!({}));
    let mut spec = common::read_json(&node.scenario);
    spec["cuda_version"] = 11080.into();
    std::fs::write(&node.scenario, spec.to_string()).unwrap();
    let env = python_env_with_torch("12.8");
    let root = sysfs_card("0000:3b:00.0");
    let dev = root.path().join("sys/bus/pci/devices/0000:3b:00.0");
    std::fs::write(dev.join("current_link_width"), "4\n").unwrap();
    let list = |node: &Node, path: &Path, extra: &[&std::ffi::OsStr]| {
        node.kiln()
            .env("PATH", path)
            .env("KILN_SYSTEM_ROOT", root.path())
            .arg("list")
            .args(extra)
            .output()
            .unwrap()
    };
    let json = std::ffi::OsStr::new("--json");
    let listed = expect_json(&list(&node, &env.path().join("bin"), &[json]), 0);
    assert_eq!(
        diagnosis_kinds(&listed),
        ["cuda_too_new", "narrow_link"],
        "{listed}"
    );
    let said = listed[0]["diagnoses"][0]["said"].as_str().unwrap();
    assert!(
        said.contains("PyTorch 2.7.0+cu128") && said.contains("CUDA 11.8"),
        "{said}"
    );
    let text = common::stdout(&list(&node, &env.path().join("bin"), &[]));
    assert!(
        text.contains("diagnosis [cuda_too_new]: PyTorch 2.7.0+cu128")
            && text.contains("update the NVIDIA driver")
            && text.contains("diagnosis [narrow_link]:")
            && text.contains("GB/s lost"),
        "{text}"
    );

    // Near miss: a driver that supports CUDA 12.8, the environment named with --python
    // (PATH holding no Python), and the card at full width: nothing said.
    spec["cuda_version"] = 12080.into();
    std::fs::write(&node.scenario, spec.to_string()).unwrap();
    std::fs::write(dev.join("current_link_width"), "16\n").unwrap();
    let empty = tempfile::tempdir().unwrap();
    let python = env.path().join("bin/python3");
    let listed = expect_json(
        &list(
            &node,
            empty.path(),
            &[json, "--python".as_ref(), python.as_os_str()],
        ),
        0,
    );
    assert!(diagnosis_kinds(&listed).is_empty(), "{listed}");
    let text = common::stdout(&list(
        &node,
        empty.path(),
        &["--python".as_ref(), python.as_os_str()],
    ));
    assert!(!text.contains("diagnosis"), "{text}");
    // The same environment named against the older driver: found by --python too.
    spec["cuda_version"] = 11080.into();
    std::fs::write(&node.scenario, spec.to_string()).unwrap();
    let listed = expect_json(
        &list(
            &node,
            empty.path(),
            &[json, "--python".as_ref(), env.path().as_os_str()],
        ),
        0,
    );
    assert_eq!(diagnosis_kinds(&listed), ["cuda_too_new"], "{listed}");
}

#[test]
fn kiln_list_says_a_driver_library_mismatch_is_a_reboot() {
    // NVML answers every start with NVML_ERROR_LIB_RM_VERSION_MISMATCH: the driver was
    // updated and the old module is still loaded.
    let node = Node::new(json!({}));
    let mut spec = common::read_json(&node.scenario);
    spec["init"] = "lib_rm_version_mismatch".into();
    std::fs::write(&node.scenario, spec.to_string()).unwrap();
    // No Python on PATH: the machine's own frameworks stay out of it.
    let empty = tempfile::tempdir().unwrap();
    let list = || {
        node.kiln()
            .env("PATH", empty.path())
            .args(["list", "--json"])
            .output()
            .unwrap()
    };
    let listed = expect_json(&list(), 0);
    assert_eq!(
        diagnosis_kinds(&listed),
        ["driver_library_mismatch"],
        "{listed}"
    );
    assert!(
        listed[0]["diagnoses"][0]["fix"]
            .as_str()
            .unwrap()
            .starts_with("reboot"),
        "{listed}"
    );
    // Near miss: NVML up.
    spec.as_object_mut().unwrap().remove("init");
    std::fs::write(&node.scenario, spec.to_string()).unwrap();
    let listed = expect_json(&list(), 0);
    assert!(diagnosis_kinds(&listed).is_empty(), "{listed}");
}

#[test]
fn kiln_list_says_a_wheel_without_the_card_s_architecture_cannot_run_on_it() {
    // An sm_120 card (compute capability 12.0) and PyTorch whose library lists code up to
    // sm_90, as `torch.cuda.get_arch_list()` would: read from the library, never loaded.
    let node = Node::new(json!({"cc": [12, 0]}));
    let mut spec = common::read_json(&node.scenario);
    spec["cuda_version"] = 12080.into();
    std::fs::write(&node.scenario, spec.to_string()).unwrap();
    let env = python_env_with_torch("12.8");
    let lib = env.path().join("lib/python3.11/site-packages/torch/lib");
    std::fs::create_dir_all(&lib).unwrap();
    let library = |archs: &str| {
        let mut bytes = b"\x7fELF\x02\x01\x01\x00-gencode arch=compute_90\x00".to_vec();
        bytes.extend_from_slice(archs.as_bytes());
        bytes.extend_from_slice(b"\x00THCPModule_getArchFlags\x00");
        std::fs::write(lib.join("libtorch_python.so"), bytes).unwrap();
    };
    let empty = tempfile::tempdir().unwrap();
    let list = || {
        node.kiln()
            .env("PATH", empty.path())
            .args(["list", "--json", "--python"])
            .arg(env.path())
            .output()
            .unwrap()
    };
    library("sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90");
    let listed = expect_json(&list(), 0);
    assert_eq!(diagnosis_kinds(&listed), ["arch_missing"], "{listed}");
    assert!(
        listed[0]["diagnoses"][0]["said"]
            .as_str()
            .unwrap()
            .contains("sm_120"),
        "{listed}"
    );
    // Near miss: a wheel that lists sm_120.
    library("sm_75 sm_80 sm_86 sm_90 sm_100 sm_120");
    let listed = expect_json(&list(), 0);
    assert!(diagnosis_kinds(&listed).is_empty(), "{listed}");
}
