//! Honest results at the edges: no GPU tested is never a pass, a GPU Vulkan cannot see is
//! named with its cause, a run cut short is "could not judge", bad input is one sentence
//! and exit 64, corrupt evidence is said and never skipped, a closed pipe ends a command
//! quietly, and no worker outlives the run's time bounds.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{
    expect_json, finding_codes, json, kiln, read_json, signal, stderr, stdout, usage_error,
    usage_error_of_binary, verdict, wait_for_event_text,
};

/// A fixture machine root: PCI devices as sysfs shows them (address, class, vendor,
/// device, bound driver), for `KILN_SYSTEM_ROOT`.
fn machine(devices: &[(&str, &str, &str, &str, Option<&str>)]) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let pci = root.path().join("sys/bus/pci/devices");
    std::fs::create_dir_all(&pci).unwrap();
    for (address, class, vendor, device, driver) in devices {
        let dir = pci.join(address);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("class"), format!("{class}\n")).unwrap();
        std::fs::write(dir.join("vendor"), format!("{vendor}\n")).unwrap();
        std::fs::write(dir.join("device"), format!("{device}\n")).unwrap();
        if let Some(driver) = driver {
            let target = root.path().join("sys/bus/pci/drivers").join(driver);
            std::fs::create_dir_all(&target).unwrap();
            std::os::unix::fs::symlink(&target, dir.join("driver")).unwrap();
        }
    }
    root
}

/// An HGX-like node with one H200 (a 3D controller, bound to nvidia) and its ASPEED BMC.
fn h200_node() -> tempfile::TempDir {
    machine(&[
        ("0000:03:00.0", "0x030000", "0x1a03", "0x2000", Some("ast")),
        (
            "0000:19:00.0",
            "0x030200",
            "0x10de",
            "0x2335",
            Some("nvidia"),
        ),
    ])
}

/// `kiln` with the machine read from `root` and none of the caller's NVIDIA or loader
/// variables.
fn kiln_on(root: &Path) -> Command {
    let mut c = kiln();
    c.env("KILN_SYSTEM_ROOT", root);
    for var in [
        "NVIDIA_DRIVER_CAPABILITIES",
        "NVIDIA_VISIBLE_DEVICES",
        "VK_DRIVER_FILES",
        "VK_ICD_FILENAMES",
        "VK_ADD_DRIVER_FILES",
    ] {
        c.env_remove(var);
    }
    c
}

const SMALL_RUN: [&str; 9] = [
    "run",
    "--vram-bytes",
    "16MiB",
    "--passes",
    "1",
    "--algorithms",
    "own-address",
    "--pcie-max-bytes",
    "1MiB",
];

#[test]
fn the_cpu_device_alone_proves_the_tool_says_no_gpu_was_tested_and_exits_4() {
    let empty = machine(&[]);
    // The CPU Vulkan driver's manifest, so that the run sees the CPU device alone.
    let icd = common::lavapipe_icd().expect("lavapipe's ICD manifest: run scripts/setup.sh");
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let out = kiln_on(empty.path())
        .env("VK_DRIVER_FILES", &icd)
        .args(SMALL_RUN)
        .args(["--json", "--out"])
        .arg(&run_dir)
        .output()
        .unwrap();
    let report = expect_json(&out, 4);
    let text = stderr(&out);
    assert!(text.contains("no GPU was tested"), "{text}");
    assert!(text.contains("`--device cpu`"), "{text}");
    assert_eq!(report["no_gpu_tested"], true);
    assert_eq!(report["result"], "inconclusive");
    let device = &report["devices"][0];
    assert_eq!(device["stand_in"], true);
    assert_eq!(device["result"], "inconclusive");
    assert!(
        device["reason"]
            .as_str()
            .unwrap()
            .contains("its own result: PASS"),
        "the CPU device's own test is kept: {device}"
    );
    // Every workload ran to its end on the CPU device: the whole job, end to end.
    for w in device["workloads"].as_array().unwrap() {
        assert_eq!(w["status"], "passed", "{w}");
    }
    // A fleet reading the metrics must not see a healthy node.
    let prom = std::fs::read_to_string(run_dir.join("kiln.prom")).unwrap();
    let healthy = prom
        .lines()
        .find(|l| l.starts_with("kiln_device_healthy{"))
        .unwrap();
    assert!(healthy.ends_with(" 0"), "{healthy}");
    let junit = std::fs::read_to_string(run_dir.join("junit.xml")).unwrap();
    assert!(junit.contains("<error"), "{junit}");
    assert_eq!(
        expect_json(&verdict(&run_dir, &[]), 4)["no_gpu_tested"],
        true
    );
    common::validate_report(&run_dir.join("report.json"));

    // `--device cpu` makes the CPU device the device under test: its result is the run's.
    let asked = kiln_on(empty.path())
        .env("VK_DRIVER_FILES", &icd)
        .args(SMALL_RUN)
        .args(["--device", "cpu", "--json", "--out"])
        .arg(dir.path().join("asked"))
        .output()
        .unwrap();
    let report = expect_json(&asked, 0);
    assert_eq!(report["no_gpu_tested"], false);
    assert_eq!(report["devices"][0]["result"], "pass");
}

/// A node with one AMD Instinct MI300X (a processing accelerator, class 0x1200, bound to
/// amdgpu) whose RAS counters say `umc` for the memory since the driver loaded.
fn mi300x_node(umc: &str) -> tempfile::TempDir {
    let root = machine(&[(
        "0000:0c:00.0",
        "0x120000",
        "0x1002",
        "0x74a1",
        Some("amdgpu"),
    )]);
    let dir = root.path().join("sys/bus/pci/devices/0000:0c:00.0");
    for (file, content) in [
        ("ras/umc_err_count", umc),
        ("ras/gfx_err_count", "ue: 0\nce: 0\n"),
        ("hwmon/hwmon2/temp1_input", "41000\n"),
        ("hwmon/hwmon2/temp1_label", "edge\n"),
        ("current_link_speed", "32.0 GT/s PCIe\n"),
        ("max_link_speed", "32.0 GT/s PCIe\n"),
        ("current_link_width", "16\n"),
        ("max_link_width", "16\n"),
    ] {
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    root
}

#[test]
fn a_compute_only_accelerator_is_judged_on_its_telemetry_and_never_passed_as_tested() {
    let dir = tempfile::tempdir().unwrap();
    // Clean counters: said not tested, its telemetry judged, never a pass.
    let run = |umc: &str, name: &str| {
        let node = mi300x_node(umc);
        let run_dir = dir.path().join(name);
        let out = kiln_on(node.path())
            .args(SMALL_RUN)
            .arg("--out")
            .arg(&run_dir)
            .output()
            .unwrap();
        (
            out.status.code(),
            format!("{}{}", stdout(&out), stderr(&out)),
            run_dir,
        )
    };
    let (code, text, run_dir) = run("ue: 0\nce: 3\n", "clean");
    assert_eq!(code, Some(4), "{text}");
    assert!(
        text.contains("compute-only accelerator")
            && text.contains("its compute and memory were not tested"),
        "{text}"
    );
    let report = read_json(&run_dir.join("report.json"));
    let device = &report["devices"][0];
    assert_eq!(device["not_tested"], true);
    assert_eq!(device["result"], "inconclusive");
    assert_eq!(finding_codes(device), vec!["GPU_NOT_VISIBLE"]);
    // Its telemetry was read all run long, under its own index.
    let telemetry = std::fs::read_to_string(run_dir.join("telemetry.jsonl")).unwrap();
    assert!(
        telemetry.contains(r#""device":0,"source":"sysfs","kind":"sample""#)
            && telemetry.contains(r#""phase":"observed""#),
        "{telemetry}"
    );
    common::validate_report(&run_dir.join("report.json"));

    // Uncorrectable errors since the driver loaded: the card fails on what its counters
    // show, with no rerun kiln cannot make offered to confirm it.
    let (code, text, run_dir) = run("ue: 2\nce: 3\n", "faulty");
    assert_eq!(code, Some(1), "{text}");
    let report = read_json(&run_dir.join("report.json"));
    assert_eq!(
        finding_codes(&report["devices"][0]),
        vec!["ECC_UNCORRECTABLE", "GPU_NOT_VISIBLE"]
    );
    assert!(
        text.contains("since the driver loaded, before the run began"),
        "{text}"
    );
    assert!(!text.contains("--profile rma"), "{text}");
    // The rebuild from the directory alone says the same.
    assert_eq!(
        expect_json(&verdict(&run_dir, &[]), 1)["devices"][0]["findings"][0]["code"],
        "ECC_UNCORRECTABLE"
    );
}

#[test]
fn a_gpu_vulkan_cannot_see_is_named_with_its_cause_and_never_replaced_by_the_cpu() {
    let node = h200_node();
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let out = kiln_on(node.path())
        .args(SMALL_RUN)
        .arg("--out")
        .arg(&run_dir)
        .output()
        .unwrap();
    let (text, notes) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(4), "{text}{notes}");
    assert!(
        text.contains("0000:19:00.0") && text.contains("not visible to Vulkan"),
        "{text}"
    );
    assert!(text.contains("nvidia_icd.json"), "the cause: {text}");
    assert!(text.contains("no GPU was tested"), "{text}");
    // The advice that leads straight to a CPU pass never reaches an NVIDIA user.
    assert!(!text.contains("mesa-vulkan-drivers") && !notes.contains("mesa-vulkan-drivers"));
    assert!(
        text.contains("not a GPU to test: 0000:03:00.0"),
        "the BMC display is set aside, said: {text}"
    );
    let report = read_json(&run_dir.join("report.json"));
    let devices = report["devices"].as_array().unwrap();
    assert_eq!(
        devices.len(),
        1,
        "the CPU device did not stand in: {devices:?}"
    );
    assert_eq!(devices[0]["not_tested"], true);
    assert_eq!(devices[0]["pci_address"], "0000:19:00.0");
    assert_eq!(finding_codes(&devices[0]), vec!["GPU_NOT_VISIBLE"]);
    let finding = &devices[0]["findings"][0];
    assert_eq!(finding["class"], "could_not_test");
    assert_eq!(finding["evidence"]["cause"], "icd_missing");
    assert!(
        !run_dir.join("telemetry.jsonl").exists()
            || std::fs::read(run_dir.join("telemetry.jsonl"))
                .unwrap()
                .is_empty()
    );
    common::validate_report(&run_dir.join("report.json"));
    assert_eq!(
        expect_json(&verdict(&run_dir, &[]), 4)["devices"][0]["findings"][0]["code"],
        "GPU_NOT_VISIBLE"
    );

    // In a container started without the graphics capability, that is the cause.
    let out = kiln_on(node.path())
        .env("NVIDIA_VISIBLE_DEVICES", "all")
        .env("NVIDIA_DRIVER_CAPABILITIES", "compute,utility")
        .args(SMALL_RUN)
        .args(["--json", "--out"])
        .arg(dir.path().join("container"))
        .output()
        .unwrap();
    let finding = &expect_json(&out, 4)["devices"][0]["findings"][0];
    assert_eq!(finding["evidence"]["cause"], "container_no_graphics");
    assert!(
        finding["action"]
            .as_str()
            .unwrap()
            .contains("NVIDIA_DRIVER_CAPABILITIES"),
        "{finding}"
    );

    // Named beside the CPU device: the CPU passes, the GPU is not tested, the run is 4.
    let out = kiln_on(node.path())
        .args(SMALL_RUN)
        .args([
            "--device",
            "cpu",
            "--device",
            "0000:19:00.0",
            "--json",
            "--out",
        ])
        .arg(dir.path().join("both"))
        .output()
        .unwrap();
    let report = expect_json(&out, 4);
    assert_eq!(report["devices"][0]["result"], "pass");
    assert_eq!(
        report["devices"][1]["findings"][0]["code"],
        "GPU_NOT_VISIBLE"
    );

    // A Vulkan that finds no driver at all: every command says the GPU's cause, never
    // the advice to install Mesa's CPU driver, which would test the CPU instead.
    let no_driver = dir.path().join("none.json");
    let nodriver_run = dir.path().join("nodriver");
    let run_args: Vec<&str> = SMALL_RUN
        .iter()
        .copied()
        .chain(["--out", nodriver_run.to_str().unwrap()])
        .collect();
    for args in [
        &run_args[..],
        &["list"],
        &[
            "selftest",
            "--faults",
            "4",
            "--runs",
            "1",
            "--vram-bytes",
            "4MiB",
        ],
        &["bench", "compute"],
    ] {
        let out = kiln_on(node.path())
            .env("VK_DRIVER_FILES", &no_driver)
            .args(args)
            .output()
            .unwrap();
        let all = format!("{}{}", stdout(&out), stderr(&out));
        assert_eq!(out.status.code(), Some(4), "{args:?}: {all}");
        assert!(!all.contains("mesa"), "{args:?}: {all}");
        assert!(
            all.contains("0000:19:00.0") && all.contains("VK_DRIVER_FILES"),
            "{args:?}: {all}"
        );
    }

    // `kiln list` names it too.
    let list = kiln_on(node.path()).arg("list").output().unwrap();
    assert!(
        stdout(&list).contains("not visible to Vulkan: ") && stdout(&list).contains("icd_missing"),
        "{}",
        stdout(&list)
    );
}

#[test]
fn health_counts_the_gpus_the_machine_has_not_the_ones_vulkan_sees() {
    let gpus: Vec<String> = (0..8)
        .map(|i| format!("0000:{:02x}:00.0", 0x19 + i * 0x10))
        .collect();
    let mut devices: Vec<(&str, &str, &str, &str, Option<&str>)> = gpus
        .iter()
        .map(|a| (a.as_str(), "0x030200", "0x10de", "0x2335", Some("nvidia")))
        .collect();
    devices.push(("0000:03:00.0", "0x030000", "0x1a03", "0x2000", Some("ast")));
    let node = machine(&devices);
    let out = kiln_on(node.path())
        .args(["health", "--expect-gpus", "8", "--json"])
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(!text.contains("KILN-CNT-001"), "8 of 8 are there: {text}");
    let body: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["gpus"], 8, "{text}");
    // Without NVML on this machine their counters cannot be read: could not check.
    assert_eq!(out.status.code(), Some(4), "{text}");
    assert!(text.contains("KILN-NOT-002"), "{text}");
    // A job's GPUs by NVML index cannot be chosen without NVML: every GPU stays checked,
    // and that is said, never an OK for GPUs nobody looked at.
    let job = kiln_on(node.path())
        .args(["health", "--gpus", "0"])
        .output()
        .unwrap();
    assert_eq!(job.status.code(), Some(4));
    assert!(stdout(&job).contains("KILN-NOT-003"), "{}", stdout(&job));
    let fewer = kiln_on(node.path())
        .args(["health", "--expect-gpus", "9"])
        .output()
        .unwrap();
    assert!(stdout(&fewer).contains("8 of 9 GPUs found [KILN-CNT-001]"));
}

/// A long run on the CPU device of `workloads`, each planned to take a while but VRAM,
/// which runs one pass, so that the later workloads start soon.
fn long_run(run_dir: &Path, workloads: &str, extra: &[&str]) -> Child {
    kiln()
        .args([
            "run",
            "--device",
            "cpu",
            "--vram-bytes",
            "32MiB",
            "--passes",
            "1",
            "--duration",
            "120s",
            "--workloads",
            workloads,
        ])
        .args(extra)
        .arg("--out")
        .arg(run_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn a_run_cut_short_by_a_signal_or_a_kill_is_never_a_pass() {
    // Once during compute (the one VRAM pass is over by then, and compute has a fifth of
    // the two minutes): PCIe never runs, so the device cannot be judged.
    for name in ["INT", "TERM"] {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("run");
        let mut child = long_run(&run_dir, "vram,compute,pcie", &[]);
        wait_for_event_text(
            &run_dir,
            "\"kind\":\"workload_start\",\"workload\":\"compute\"",
        );
        signal(&child, name);
        assert_eq!(
            common::wait_with_limit(&mut child, Duration::from_secs(30)).0,
            Some(4)
        );
        let rebuilt = verdict(&run_dir, &[]);
        assert_eq!(rebuilt.status.code(), Some(4), "SIG{name}");
        let report = json(&rebuilt);
        let device = &report["devices"][0];
        assert_eq!(device["result"], "inconclusive", "SIG{name}: {device}");
        assert!(
            device["reason"].as_str().unwrap().contains("pcie"),
            "the reason names what never ran: {device}"
        );
        let compute = &device["workloads"][1];
        assert_eq!(compute["workload"], "compute");
        assert_eq!(compute["status"], "incomplete", "SIG{name}: {compute}");
        assert!(
            compute["summary"]["stopped_early"]
                .as_str()
                .is_some_and(|s| s.contains("stopped on request")),
            "SIG{name}: the stopped workload says why: {compute}"
        );
    }

    // Killed (SIGKILL) once the first workload has ended: rebuilt as could not judge.
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let mut child = long_run(&run_dir, "vram,compute,pcie", &[]);
    wait_for_event_text(&run_dir, "\"kind\":\"workload_end\",\"workload\":\"vram\"");
    child.kill().unwrap();
    child.wait().unwrap();
    let report = expect_json(&verdict(&run_dir, &[]), 4);
    assert_eq!(report["incomplete"], true);
    assert_eq!(report["devices"][0]["result"], "inconclusive");

    // A hardware fault found before the signal stands: exit 1, live and rebuilt.
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let mut child = long_run(&run_dir, "vram,compute", &["--test-stuck-word", "4099"]);
    wait_for_event_text(&run_dir, "\"kind\":\"vram_error\"");
    signal(&child, "INT");
    assert_eq!(
        common::wait_with_limit(&mut child, Duration::from_secs(30)).0,
        Some(1)
    );
    assert_eq!(verdict(&run_dir, &[]).status.code(), Some(1));
}

#[test]
fn a_worker_that_never_answers_a_stop_is_killed_within_the_step_timeout() {
    // Host-side work that keeps showing progress but never looks at the stop: the
    // budget's end asks it to stop, and a step timeout later it is killed and recorded.
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let started = Instant::now();
    let out = kiln()
        .args([
            "run",
            "--device",
            "cpu",
            "--workloads",
            "vram",
            "--vram-bytes",
            "16MiB",
            "--duration",
            "2s",
            "--step-timeout",
            "2s",
            "--test-busy-device",
            "0",
            "--json",
            "--out",
        ])
        .arg(&run_dir)
        .output()
        .unwrap();
    let wall = started.elapsed();
    let report = expect_json(&out, 4);
    // Preflight (1 s), the budget (2 s), a step timeout to answer the budget's end and
    // one to answer the stop, then a few seconds of start-up and reports.
    assert!(wall < Duration::from_secs(15), "{wall:?}");
    let failure = &report["devices"][0]["failures"][0];
    assert_eq!(failure["error"], "hang");
    assert!(
        failure["message"]
            .as_str()
            .unwrap()
            .contains("did not stop within 2 s of being asked"),
        "{failure}"
    );
    assert!(finding_codes(&report["devices"][0]).contains(&"DEVICE_HANG"));

    // The same worker under SIGTERM: killed a step timeout after the signal.
    let run_dir = dir.path().join("signalled");
    let mut child = kiln()
        .args([
            "run",
            "--device",
            "cpu",
            "--workloads",
            "vram",
            "--vram-bytes",
            "16MiB",
            "--duration",
            "600s",
            "--step-timeout",
            "2s",
            "--test-busy-device",
            "0",
            "--out",
        ])
        .arg(&run_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_event_text(&run_dir, "never answers a stop");
    signal(&child, "TERM");
    let signalled = Instant::now();
    assert_eq!(
        common::wait_with_limit(&mut child, Duration::from_secs(20)).0,
        Some(4)
    );
    assert!(
        signalled.elapsed() < Duration::from_secs(8),
        "{:?}",
        signalled.elapsed()
    );
    let events = std::fs::read_to_string(run_dir.join("events.jsonl")).unwrap();
    assert!(events.contains("did not stop within 2 s of being asked"));
}

#[test]
fn flags_get_the_bounds_of_the_profile_keys_they_override() {
    usage_error(&["run", "--duration", "0"], "0 is outside 1s..168h");
    // A duration with no unit is refused with the units, never taken as seconds.
    usage_error(&["run", "--duration", "600"], "`600` has no unit");
    usage_error(&["health", "--max-age", "7"], "7d");
    usage_error(&["run", "--fence-timeout", "0"], "0 is outside 100ms..600s");
    usage_error(&["run", "--step-timeout", "0"], "0 is outside 1s..1h");
    // A wait for the device bounded at or past the watchdog's patience could never end in
    // its own timeout: refused.
    usage_error(
        &["run", "--fence-timeout", "30s", "--step-timeout", "30s"],
        "the fence timeout (30.0 s) must be shorter than the step timeout (30.0 s)",
    );
    usage_error(
        &["run", "--fence-timeout", "60s"],
        "must be shorter than the step timeout (30.0 s)",
    );
    usage_error(
        &["run", "--pcie-max-bytes", "1"],
        "1 is outside 4KiB..16GiB",
    );
    usage_error(
        &["run", "--telemetry-interval", "1ms"],
        "1ms is outside 10ms..60s (or 0 to turn telemetry off)",
    );
    usage_error(&["run", "--passes", "100001"], "outside 1..=100000");
    usage_error(&["run", "--retest-cap", "0"], "outside 1..=1048576");
    usage_error(&["run", "--records", "0"], "outside 1..=1048576");
    usage_error(&["run", "--retention-delay", "0"], "outside 1ms..24h");
    usage_error(
        &["run", "--vram-bytes", "18446744073709551616"],
        "is too large",
    );
    usage_error(&["run", "--vram-bytes", "17179869184GiB"], "is too large");
    // More than the device has: refused up front, never clamped.
    usage_error(
        &["run", "--device", "cpu", "--vram-bytes", "1TiB"],
        "is more than the",
    );
    usage_error(
        &["run", "--device", "cpu", "--reserve", "1TiB"],
        "leaves nothing",
    );
    usage_error(&["bench", "vram", "--bytes", "1"], "1 is outside 8MiB..");
    // Refused once the device is open: its free memory decides.
    usage_error_of_binary(
        &["bench", "vram", "--device", "cpu", "--bytes", "1TiB"],
        "is more than the",
    );
    usage_error(&["selftest", "--vram-bytes", "1"], "1 is outside 4MiB..");
    usage_error(
        &["selftest", "--faults", "16384", "--vram-bytes", "8MiB"],
        "cannot hold 16384 planted faults",
    );
    usage_error(&["health", "--expect-gpus", "0"], "outside 1..=4096");
    usage_error(&["monitor", "--interval", "0"], "outside 10ms..60s");
    // A flag no workload of the run would use is refused, never silently ignored.
    usage_error(
        &["run", "--workloads", "vram", "--load", "pulsed"],
        "--load applies to the compute and heat workloads, which this run does not have (workloads: vram)",
    );
    usage_error(
        &["run", "--workloads", "compute", "--algorithms", "random"],
        "--algorithms applies to the vram and heat workloads",
    );
    usage_error(
        &["run", "--workloads", "compute", "--vram-bytes", "64MiB"],
        "--vram-bytes applies to",
    );
    usage_error(
        &["run", "--retention-delay", "5s"],
        "--retention-delay applies to the retention algorithm",
    );
    usage_error(
        &["run", "--workloads", "vram", "--pcie-max-bytes", "1MiB"],
        "--pcie-max-bytes applies to the pcie workload",
    );
    usage_error(
        &["run", "--workloads", "fragment", "--passes", "2"],
        "--passes applies to",
    );
    usage_error(
        &["run", "--reserve", "1GiB", "--vram-percent", "50"],
        "cannot be used with",
    );
    usage_error(
        &["bench", "pcie", "--bytes", "1GiB"],
        "--bytes applies to `kiln bench vram`, not `kiln bench pcie`",
    );
    usage_error(
        &["bench", "vram", "--duration", "5s"],
        "--duration applies to `kiln bench compute`",
    );
    usage_error(
        &["run", "--workloads", "vram", "--power-target", "50"],
        "--power-target applies to the steady compute, matrix and heat workloads",
    );
    usage_error(
        &[
            "run",
            "--workloads",
            "compute",
            "--load",
            "sweep",
            "--power-target",
            "50",
        ],
        "--power-target applies to",
    );
    usage_error(
        &["run", "--workloads", "matrix", "--power-target", "0"],
        "0 is outside 1..=100",
    );
    // A runaway value is quoted cut short.
    let long = format!("vram,{}", "x".repeat(100_000));
    usage_error(&["run", "--workloads", &long], "100000 characters");
    usage_error(
        &["run", "--vram-bytes", &"9".repeat(100_000)],
        "is too large",
    );
    usage_error(&["run", "--device", &"g".repeat(100_000)], "characters");
}

#[test]
fn thresholds_and_baselines_are_checked_before_the_test_starts() {
    let dir = tempfile::tempdir().unwrap();
    let array = dir.path().join("array.json");
    std::fs::write(&array, "[0.5, 0.5]").unwrap();
    usage_error(
        &["run", "--thresholds", array.to_str().unwrap()],
        "a JSON object",
    );
    let twice = dir.path().join("twice.json");
    std::fs::write(&twice, r#"{"throttle_share": 0.2, "throttle_share": 0.9}"#).unwrap();
    usage_error(
        &["run", "--thresholds", twice.to_str().unwrap()],
        "`throttle_share` is given twice",
    );
    usage_error(
        &[
            "verdict",
            "/nonexistent",
            "--thresholds",
            twice.to_str().unwrap(),
        ],
        "given twice",
    );
    // Not a run at all, and a run directory whose manifest is damaged.
    usage_error(
        &["run", "--baseline", dir.path().to_str().unwrap()],
        "not a kiln run directory",
    );
    let fake = dir.path().join("fake");
    std::fs::create_dir(&fake).unwrap();
    std::fs::write(fake.join("manifest.json"), "{\"hello\": 1}").unwrap();
    usage_error(&["run", "--baseline", fake.to_str().unwrap()], "--baseline");
}

/// A real run's directory to damage.
fn recorded_run() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let out = common::quick_run(&["--workloads", "vram"], &run_dir);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    (dir, run_dir)
}

#[test]
fn damaged_evidence_is_named_never_skipped() {
    let (_dir, run_dir) = recorded_run();
    let telemetry = std::fs::read_to_string(run_dir.join("telemetry.jsonl")).unwrap();
    let lines: Vec<&str> = telemetry.lines().collect();
    assert!(lines.len() > 3, "the run recorded telemetry");

    // A torn last line (a crash while writing) is expected and tolerated.
    std::fs::write(
        run_dir.join("telemetry.jsonl"),
        format!("{telemetry}{{\"t_ms\":12.5,\"sou"),
    )
    .unwrap();
    assert_eq!(verdict(&run_dir, &[]).status.code(), Some(0));

    // A garbage line in the middle is a corrupt file, named with its line.
    let mut damaged = lines.clone();
    damaged.insert(2, "GARBAGE \u{0}\u{7f} not json");
    std::fs::write(run_dir.join("telemetry.jsonl"), damaged.join("\n") + "\n").unwrap();
    let out = verdict(&run_dir, &[]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(64), "{text}");
    assert!(
        text.contains("telemetry.jsonl, line 3"),
        "names the file and line: {text}"
    );
    std::fs::write(run_dir.join("telemetry.jsonl"), &telemetry).unwrap();

    // A workload's end with a status kiln does not know is damage, named with its line,
    // never read as a workload that did not run.
    let events = std::fs::read_to_string(run_dir.join("events.jsonl")).unwrap();
    let end = events
        .lines()
        .position(|l| l.contains("\"kind\":\"workload_end\""))
        .expect("a workload ended");
    let damaged: Vec<String> = events
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i == end {
                l.replacen("\"status\":\"passed\"", "\"status\":\"exploded\"", 1)
            } else {
                l.to_owned()
            }
        })
        .collect();
    assert_ne!(
        damaged.join("\n"),
        events.trim_end(),
        "the status was replaced"
    );
    std::fs::write(run_dir.join("events.jsonl"), damaged.join("\n") + "\n").unwrap();
    let out = verdict(&run_dir, &[]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(64), "{text}");
    assert!(
        text.contains(&format!("events.jsonl, line {}", end + 1)),
        "names the file and line: {text}"
    );
    std::fs::write(run_dir.join("events.jsonl"), &events).unwrap();

    // A manifest of a newer kiln is refused with a sentence that says so.
    let manifest = std::fs::read_to_string(run_dir.join("manifest.json")).unwrap();
    std::fs::write(
        run_dir.join("manifest.json"),
        manifest.replace("kiln.manifest/2", "kiln.manifest/3"),
    )
    .unwrap();
    let out = verdict(&run_dir, &[]);
    assert_eq!(out.status.code(), Some(64));
    assert!(
        stderr(&out).contains("written by a newer kiln (kiln.manifest/3)"),
        "{}",
        stderr(&out)
    );
    std::fs::write(run_dir.join("manifest.json"), &manifest).unwrap();

    // Killed right after it started: a manifest alone is an incomplete run, not 64.
    let early = tempfile::tempdir().unwrap();
    std::fs::write(early.path().join("manifest.json"), &manifest).unwrap();
    let report = expect_json(&verdict(early.path(), &[]), 4);
    assert_eq!(report["incomplete"], true);
    assert_eq!(report["devices"][0]["result"], "inconclusive");
}

/// The findings of `code` on the report's first device.
fn findings_of<'a>(report: &'a serde_json::Value, code: &str) -> Vec<&'a serde_json::Value> {
    common::findings_of(&report["devices"][0], code)
}

#[test]
fn evidence_the_run_wrote_that_is_missing_is_named_never_a_clean_pass() {
    let (_dir, run_dir) = recorded_run();
    let whole = expect_json(&verdict(&run_dir, &[]), 0);
    assert!(findings_of(&whole, "EVIDENCE_MISSING").is_empty());
    let manifest = read_json(&run_dir.join("manifest.json"));
    assert_eq!(
        manifest["evidence"],
        serde_json::json!(["events.jsonl", "telemetry.jsonl"]),
        "the manifest lists what the run writes"
    );

    // The telemetry deleted: not a pass with its checks quietly gone.
    let telemetry = std::fs::read(run_dir.join("telemetry.jsonl")).unwrap();
    let events = std::fs::read_to_string(run_dir.join("events.jsonl")).unwrap();
    std::fs::remove_file(run_dir.join("telemetry.jsonl")).unwrap();
    let report = expect_json(&verdict(&run_dir, &[]), 4);
    let device = &report["devices"][0];
    assert_eq!(device["result"], "inconclusive", "{device}");
    let missing = findings_of(&report, "EVIDENCE_MISSING");
    assert_eq!(missing.len(), 1, "{device}");
    assert_eq!(missing[0]["evidence"]["file"], "telemetry.jsonl");
    assert_eq!(missing[0]["class"], "could_not_test");
    assert!(
        device["reason"]
            .as_str()
            .unwrap()
            .starts_with("telemetry.jsonl is missing from the run directory"),
        "{device}"
    );

    // The same from a manifest of an older kiln, which lists no files: its settings say
    // telemetry ran.
    let mut older = manifest.clone();
    older.as_object_mut().unwrap().remove("evidence");
    std::fs::write(
        run_dir.join("manifest.json"),
        serde_json::to_vec_pretty(&older).unwrap(),
    )
    .unwrap();
    let report = expect_json(&verdict(&run_dir, &[]), 4);
    assert_eq!(findings_of(&report, "EVIDENCE_MISSING").len(), 1);

    // The events deleted too: each file named.
    std::fs::write(run_dir.join("manifest.json"), manifest.to_string()).unwrap();
    std::fs::remove_file(run_dir.join("events.jsonl")).unwrap();
    let report = expect_json(&verdict(&run_dir, &[]), 4);
    let files: Vec<&str> = findings_of(&report, "EVIDENCE_MISSING")
        .iter()
        .map(|f| f["evidence"]["file"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["events.jsonl", "telemetry.jsonl"]);
    std::fs::write(run_dir.join("telemetry.jsonl"), &telemetry).unwrap();

    // What stands in a file's place is no evidence either: each said as what it is, never
    // opened (a FIFO would hold the verdict for ever, /dev/zero feed it without end).
    let fifo = |path: &Path| {
        let _ = std::fs::remove_file(path);
        common::mkfifo(path);
    };
    let device_link = |path: &Path| {
        let _ = std::fs::remove_file(path);
        std::os::unix::fs::symlink("/dev/zero", path).unwrap();
    };
    let looped = |path: &Path| {
        let _ = std::fs::remove_file(path);
        std::os::unix::fs::symlink(path, path).unwrap();
    };
    let emptied = |path: &Path| std::fs::write(path, "").unwrap();
    type StandIn<'a> = (&'a str, &'a dyn Fn(&Path), &'a str);
    let stand_ins: [StandIn; 4] = [
        ("a FIFO", &fifo, "is a FIFO"),
        ("/dev/zero", &device_link, "is a device"),
        ("a symlink loop", &looped, "symbolic links"),
        ("emptied", &emptied, "is empty"),
    ];
    for file in ["telemetry.jsonl", "events.jsonl"] {
        for (name, make, said) in &stand_ins {
            // Written anew, never through what stood there (a FIFO would hold the write).
            for (f, text) in [
                ("events.jsonl", events.as_bytes()),
                ("telemetry.jsonl", &telemetry),
            ] {
                let _ = std::fs::remove_file(run_dir.join(f));
                std::fs::write(run_dir.join(f), text).unwrap();
            }
            make(&run_dir.join(file));
            let mut child = common::kiln()
                .args(["verdict", "--json"])
                .arg(&run_dir)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let (code, _) = common::wait_with_limit(&mut child, Duration::from_secs(60));
            let mut text = String::new();
            std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut text).unwrap();
            assert_eq!(code, Some(4), "{file} as {name}: {text}");
            let report: serde_json::Value = serde_json::from_str(&text).unwrap();
            let lost = findings_of(&report, "EVIDENCE_MISSING");
            assert_eq!(lost.len(), 1, "{file} as {name}: {report}");
            assert_eq!(lost[0]["evidence"]["file"], file);
            let summary = lost[0]["summary"].as_str().unwrap();
            assert!(
                summary.starts_with(file) && summary.contains(said),
                "{file} as {name}: {summary}"
            );
        }
    }
    std::fs::remove_file(run_dir.join("events.jsonl")).unwrap();
    std::fs::write(run_dir.join("events.jsonl"), &events).unwrap();
    // The telemetry cut to its first line: a finished run with none of the counters read
    // around its phases is missing its telemetry too.
    let header = telemetry.split(|&b| b == b'\n').next().unwrap();
    std::fs::write(run_dir.join("telemetry.jsonl"), [header, b"\n"].concat()).unwrap();
    let report = expect_json(&verdict(&run_dir, &[]), 4);
    let lost = findings_of(&report, "EVIDENCE_MISSING");
    assert!(
        lost.len() == 1
            && lost[0]["summary"]
                .as_str()
                .unwrap()
                .contains("is cut short"),
        "{report}"
    );
    std::fs::write(run_dir.join("telemetry.jsonl"), &telemetry).unwrap();
    expect_json(&verdict(&run_dir, &[]), 0);

    // A run that did not finish (still running, or killed) compared with a whole one is
    // inconclusive, never "nothing worse".
    let lines: Vec<&str> = events.lines().collect();
    let cut = tempfile::tempdir().unwrap();
    for f in ["manifest.json", "telemetry.jsonl"] {
        std::fs::copy(run_dir.join(f), cut.path().join(f)).unwrap();
    }
    std::fs::write(
        cut.path().join("events.jsonl"),
        lines[..lines.len() / 2].join("\n") + "\n",
    )
    .unwrap();
    let out = common::kiln()
        .arg("compare")
        .arg(&run_dir)
        .arg(cut.path())
        .output()
        .unwrap();
    let said = common::stdout(&out);
    assert_eq!(out.status.code(), Some(4), "{said}");
    assert!(said.contains("unfinished: the later run"), "{said}");
    assert!(said.contains("inconclusive, a run is unfinished"), "{said}");
    assert!(!said.contains(": nothing worse"), "{said}");
    let out = common::kiln()
        .arg("compare")
        .arg(&run_dir)
        .arg(&run_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", common::stdout(&out));

    // A run without telemetry writes none and lists none: nothing is missing.
    let dir = tempfile::tempdir().unwrap();
    let quiet = dir.path().join("quiet");
    let out = common::quick_run(
        &["--workloads", "vram", "--telemetry-interval", "0", "--json"],
        &quiet,
    );
    let report = expect_json(&out, 0);
    assert!(!quiet.join("telemetry.jsonl").exists());
    assert!(findings_of(&report, "EVIDENCE_MISSING").is_empty());
    assert_eq!(
        read_json(&quiet.join("manifest.json"))["evidence"],
        serde_json::json!(["events.jsonl"])
    );
}

/// Every command that takes `--json`, with what it needs: a recorded run and a telemetry
/// recording.
fn json_commands(run: &str, fixture: &Path) -> Vec<Vec<String>> {
    [
        vec!["list", "--json"],
        vec!["verdict", "--json", run],
        vec!["compare", "--json", run, run],
        vec![
            "health",
            "--json",
            "--telemetry-replay",
            fixture.to_str().unwrap(),
        ],
        vec!["run", "--device", "cpu", "--dry-run", "--json"],
        vec![
            "selftest",
            "--json",
            "--vram-bytes",
            "4MiB",
            "--faults",
            "8",
            "--runs",
            "1",
        ],
        vec!["bench", "compute", "--json", "--duration", "1s"],
    ]
    .iter()
    .map(|c| c.iter().map(|s| (*s).to_owned()).collect())
    .collect()
}

#[test]
fn a_closed_output_ends_every_command_quietly() {
    let (_dir, run_dir) = recorded_run();
    let run = run_dir.to_str().unwrap().to_owned();
    let fixture = common::telemetry_fixture("healthy_idle");
    let dry = tempfile::tempdir().unwrap();
    let mut commands = json_commands(&run, &fixture);
    commands.extend(
        [
            vec!["list"],
            vec!["verdict", &run],
            vec!["report", &run],
            vec![
                "monitor",
                "--json",
                "--interval",
                "50ms",
                "--duration",
                "30s",
            ],
            vec!["bench", "pcie"],
            vec!["--help"],
        ]
        .iter()
        .map(|c| c.iter().map(|s| (*s).to_owned()).collect()),
    );
    for args in &commands {
        // The reader goes away before kiln writes a byte (`kiln list --json | head -0`).
        let mut child = kiln()
            .args(args)
            .current_dir(dry.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{args:?} did not end when its output closed"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        use std::io::Read;
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(
            !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
            "{args:?}: {err}"
        );
        assert_ne!(status.code(), Some(101), "{args:?}: {err}");
        assert!(
            status.code().is_some(),
            "{args:?} died of a signal: {status}"
        );
    }
}

#[test]
fn json_means_stdout_is_json_and_nothing_else_for_every_command() {
    let (_dir, run_dir) = recorded_run();
    let run = run_dir.to_str().unwrap().to_owned();
    let scratch = tempfile::tempdir().unwrap();
    let out_dir = scratch.path().join("fresh");
    let mut commands = json_commands(&run, &common::telemetry_fixture("xid79"));
    commands.push(vec!["health".into(), "--json".into()]);
    commands.push(
        [
            "run",
            "--device",
            "cpu",
            "--workloads",
            "compute",
            "--passes",
            "1",
            "--json",
            "--out",
            out_dir.to_str().unwrap(),
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect(),
    );
    for args in &commands {
        let out = kiln().args(args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let parsed: Result<serde_json::Value, _> = serde_json::from_str(&text);
        assert!(
            parsed.is_ok(),
            "{args:?}: stdout is not one JSON document ({:?}):\n{text}\nstderr: {}",
            parsed.err(),
            stderr(&out)
        );
    }
    // A stream of JSON lines, each a document of its own.
    let out = kiln()
        .args([
            "monitor",
            "--json",
            "--interval",
            "50ms",
            "--duration",
            "1s",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.trim().is_empty(), "{}", stderr(&out));
    for line in text.lines() {
        assert!(
            serde_json::from_str::<serde_json::Value>(line).is_ok(),
            "monitor --json: not a JSON line: {line}"
        );
    }
}

#[test]
fn kiln_list_says_why_a_framework_cannot_see_each_gpu_of_the_machine() {
    // Two NVIDIA cards Vulkan cannot see: one with no driver bound and no nvidia module
    // loaded, one bound to vfio-pci for a virtual machine. NVML (the fake, answering
    // "driver not loaded" whatever the host has) cannot start, and no Python is on PATH.
    let root = machine(&[
        ("0000:19:00.0", "0x030200", "0x10de", "0x2335", None),
        (
            "0000:29:00.0",
            "0x030200",
            "0x10de",
            "0x2335",
            Some("vfio-pci"),
        ),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("scenario.json");
    std::fs::write(
        &scenario,
        r#"{"driver_version": "550.90.07", "init": "driver_not_loaded", "gpus": []}"#,
    )
    .unwrap();
    let empty = tempfile::tempdir().unwrap();
    let list = || {
        let out = kiln_on(root.path())
            .env("LD_LIBRARY_PATH", common::fake_nvml_dir())
            .env("KILN_FAKE_NVML", &scenario)
            .env("PATH", empty.path())
            .arg("list")
            .output()
            .unwrap();
        stdout(&out)
    };
    let text = list();
    let under = |address: &str| -> Vec<String> {
        let mut lines = text.lines().skip_while(|l| !l.contains(address));
        let first = lines.next().unwrap_or_default();
        assert!(first.starts_with("not visible to Vulkan: "), "{text}");
        lines
            .take_while(|l| l.starts_with("  diagnosis ["))
            .map(str::to_owned)
            .collect()
    };
    let unbound = under("0000:19:00.0");
    assert_eq!(unbound.len(), 1, "{text}");
    assert!(
        unbound[0].starts_with("  diagnosis [kernel_module_not_loaded]: ")
            && unbound[0].contains("modprobe nvidia"),
        "{text}"
    );
    let passed = under("0000:29:00.0");
    assert_eq!(passed.len(), 1, "{text}");
    assert!(
        passed[0].starts_with("  diagnosis [passed_through]: "),
        "{text}"
    );
    // Near miss: the module loaded (its driver failed to bind for another reason, which
    // the Vulkan cause says): no module diagnosis; the passed-through card keeps its own.
    std::fs::create_dir_all(root.path().join("sys/module/nvidia")).unwrap();
    let text = list();
    assert!(!text.contains("kernel_module_not_loaded"), "{text}");
    assert!(text.contains("diagnosis [passed_through]"), "{text}");
}
