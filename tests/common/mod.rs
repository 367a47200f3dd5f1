//! Shared helpers of the integration tests: they run on the real Vulkan driver of the
//! machine (lavapipe in CI).

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use kiln::evidence::MemorySink;
use kiln::gpu::{DeviceContext, DeviceInfo, Vulkan};
use kiln::workload::RunControl;
use kiln::workload::vram::algorithm::Algorithm;
use kiln::workload::vram::engine::{AccessLayout, PlantedFault};
use kiln::workload::vram::{VramConfig, VramReport, VramTest};

pub const MIB: u64 = 1 << 20;

/// The first Vulkan device (the CPU device on a machine without a GPU).
pub fn device() -> (Arc<Vulkan>, DeviceInfo) {
    let vulkan = Vulkan::new().expect("Vulkan must load: run scripts/setup.sh");
    let info = vulkan.devices().expect("a Vulkan device")[0].clone();
    (vulkan, info)
}

/// A small VRAM test: `bytes` in buffers of `buffer` bytes, one pass.
pub fn config(
    algorithms: &[Algorithm],
    bytes: u64,
    buffer: u64,
    layout: AccessLayout,
) -> VramConfig {
    VramConfig {
        algorithms: algorithms.to_vec(),
        bytes: Some(bytes),
        passes: Some(1),
        max_buffer_bytes: Some(buffer),
        layout: Some(layout),
        retention_delay: Duration::from_millis(10),
        ..VramConfig::default()
    }
}

/// Runs a VRAM test, returning its report and the events it emitted.
pub fn run(config: VramConfig) -> (VramReport, MemorySink) {
    let (vulkan, info) = device();
    let mut ctx = DeviceContext::open(&vulkan, &info).expect("open the device");
    let mut sink = MemorySink::default();
    let report = VramTest { config }
        .run_report(&mut ctx, &RunControl::new(None), &mut sink)
        .expect("the VRAM test runs");
    (report, sink)
}

/// A fault that flips `xor` once at absolute word `word`.
pub fn flip(word: u64, xor: u32) -> PlantedFault {
    PlantedFault {
        word,
        and_mask: u32::MAX,
        or_mask: 0,
        xor_mask: xor,
        source: word,
        persistent: false,
    }
}

/// Path of the kiln binary under test.
pub fn kiln() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_kiln"))
}

/// `kiln verdict --json RUN_DIR`, plus `extra` flags.
pub fn verdict(run_dir: &std::path::Path, extra: &[&std::ffi::OsStr]) -> std::process::Output {
    kiln()
        .args(["verdict", "--json"])
        .arg(run_dir)
        .args(extra)
        .output()
        .unwrap()
}

/// The report a `--json` command printed on stdout.
pub fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("a report on stdout")
}

/// A recorded telemetry fixture, `tests/fixtures/telemetry/<name>.jsonl`.
pub fn telemetry_fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/fixtures/telemetry/{name}.jsonl"))
}

/// Replaces a run directory's telemetry by a recorded fixture.
pub fn use_telemetry_fixture(run_dir: &std::path::Path, name: &str) {
    std::fs::copy(telemetry_fixture(name), run_dir.join("telemetry.jsonl")).unwrap();
}

/// `kiln run` of 16 MiB, one pass of own-address, PCIe up to 1 MiB, into `out`, plus
/// `extra` flags; the short-run flags go only to the workloads the run has (kiln refuses a
/// flag that no workload would use).
pub fn quick_run(extra: &[&str], out: &std::path::Path) -> std::process::Output {
    let workloads = extra
        .iter()
        .position(|a| *a == "--workloads")
        .and_then(|i| extra.get(i + 1))
        .map_or("vram,compute,pcie", |w| w);
    let has = |w: &str| workloads.split(',').any(|x| x == w);
    let mut args = vec!["run"];
    if has("vram") || has("heat") {
        args.extend(["--vram-bytes", "16MiB", "--algorithms", "own-address"]);
    }
    if has("vram") || has("heat") || has("compute") {
        args.extend(["--passes", "1"]);
    }
    if has("pcie") {
        args.extend(["--pcie-max-bytes", "1MiB"]);
    }
    // The CPU device is the device under test here, unless the test names one.
    if !extra.contains(&"--device") {
        args.extend(["--device", "cpu"]);
    }
    kiln()
        .args(args)
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

/// Starts a long `kiln run` of `workloads` (the fleet profile, 64 MiB of VRAM, two
/// minutes) into `out`, its output discarded.
pub fn long_run(out: &std::path::Path, workloads: &str) -> std::process::Child {
    kiln()
        .args([
            "run",
            "--profile",
            "fleet",
            "--vram-bytes",
            "64MiB",
            "--duration",
            "120s",
            "--workloads",
            workloads,
            "--device",
            "cpu",
            "--out",
        ])
        .arg(out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits (up to a minute) until the run in `dir` has written `lines` event lines.
pub fn wait_for_events(dir: &std::path::Path, lines: usize) {
    let events = dir.join("events.jsonl");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::fs::read(&events)
        .map(|b| b.iter().filter(|&&c| c == b'\n').count())
        .unwrap_or(0)
        < lines
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the run wrote too few events"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Starts a long `kiln run` into `out`, waits until its events hold `lines` lines, and
/// kills it with SIGKILL, as a crash or an impatient operator would.
pub fn killed_run(out: &std::path::Path, lines: usize) {
    let mut child = long_run(out, "vram");
    wait_for_events(out, lines);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

/// The scenario corpus.
pub fn scenarios() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios")
}

fn copy_scenario_files(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap();
        if name != "expected.json" && name != "thresholds.json" {
            std::fs::copy(&path, to.join(name)).unwrap();
        }
    }
}

/// Writes scenario `name`'s run directory into `run_dir`: its base first (`_base`, or the
/// scenario its `expected.json` names in `run_from`, laid out the same way), then the
/// telemetry fixture it names, then its own files.
pub fn lay_out_scenario(name: &str, run_dir: &std::path::Path) {
    fn lay(name: &str, run_dir: &std::path::Path, depth: usize) {
        assert!(depth < 8, "{name}: run_from goes round in a circle");
        let dir = scenarios().join(name);
        if name == "_base" {
            copy_scenario_files(&dir, run_dir);
            return;
        }
        let path = dir.join("expected.json");
        let expected: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        lay(
            expected["run_from"].as_str().unwrap_or("_base"),
            run_dir,
            depth + 1,
        );
        if let Some(fixture) = expected["telemetry_fixture"].as_str() {
            use_telemetry_fixture(run_dir, fixture);
        }
        copy_scenario_files(&dir, run_dir);
    }
    std::fs::create_dir_all(run_dir).unwrap();
    lay(name, run_dir, 0);
}

/// Validates a report against the published schema with Python's jsonschema.
pub fn validate_report(report: &std::path::Path) {
    let schema =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/report.schema.json");
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import json, sys, jsonschema; jsonschema.Draft202012Validator(json.load(open(sys.argv[1]))).validate(json.load(open(sys.argv[2])))",
        ])
        .arg(&schema)
        .arg(report)
        .output()
        .expect("python3 is needed");
    assert!(
        out.status.success(),
        "{}: {}",
        report.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Sends signal `name` (`INT`, `TERM`) to `child`, as an operator or a scheduler would.
pub fn signal(child: &std::process::Child, name: &str) {
    let status = std::process::Command::new("kill")
        .args([format!("-{name}"), child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits for `child` to end, at most `limit` (then kills it and fails); returns its exit
/// code and how long it took.
pub fn wait_with_limit(
    child: &mut std::process::Child,
    limit: std::time::Duration,
) -> (Option<i32>, std::time::Duration) {
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status.code(), started.elapsed());
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("the run did not end within {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Runs `kiln args` in an empty directory and checks it is refused before anything
/// starts: exit 64, one line on stderr starting `kiln: ` and holding `needle`, no longer
/// than a sane sentence, nothing on stdout, no run directory made.
pub fn usage_error(args: &[&str], needle: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = kiln().args(args).current_dir(dir.path()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{args:?}: {text}");
    assert_eq!(
        text.trim().lines().count(),
        1,
        "{args:?}: one sentence, got {text}"
    );
    assert!(text.starts_with("kiln: "), "{args:?}: {text}");
    assert!(text.contains(needle), "{args:?}: `{needle}` not in {text}");
    assert!(text.len() < 600, "{args:?}: {} characters", text.len());
    assert!(!text.contains("panicked"));
    assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    assert!(
        !dir.path().join("kiln-runs").exists(),
        "{args:?}: a run started"
    );
}
