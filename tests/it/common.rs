//! Shared helpers of the integration tests: they run on the real Vulkan driver of the
//! machine (lavapipe in CI).

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use kiln::evidence::MemorySink;
use kiln::gpu::{DeviceContext, DeviceInfo, Vulkan};
use kiln::telemetry::Source;
use kiln::telemetry::record::TelemetryRecord;
use kiln::telemetry::replay::ReplaySource;
use kiln::telemetry::sidecar;
use kiln::telemetry::summary::{PhaseTelemetry, summarize};
use kiln::workload::vram::algorithm::Algorithm;
use kiln::workload::vram::engine::{AccessLayout, PlantedFault};
use kiln::workload::vram::{VramConfig, VramReport, VramTest};
use kiln::workload::{KindTest, RunControl};

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
    // A suite run on another driver through a runner (scripts/matrix-units-driver.sh)
    // starts kiln through the same runner, on the same device.
    match std::env::var_os("KILN_TEST_RUNNER") {
        Some(runner) => {
            let mut cmd = std::process::Command::new(runner);
            cmd.arg(env!("CARGO_BIN_EXE_kiln"));
            cmd
        }
        None => std::process::Command::new(env!("CARGO_BIN_EXE_kiln")),
    }
}

/// `kiln verdict --json RUN_DIR`, plus `extra` flags, judged in this process through the
/// command's own steps (`cmd::parse`, then `rebuild::judged`): what the
/// binary prints on stdout and stderr and its exit code, without starting it. The verdict
/// is a pure function of the run directory; `verdict::the_binary_judges_as_the_tests_do`
/// holds the binary to the same answers.
pub fn verdict(run_dir: &std::path::Path, extra: &[&std::ffi::OsStr]) -> std::process::Output {
    use kiln::cmd::{Refusal, cli::Command, edge, rebuild};
    use std::os::unix::process::ExitStatusExt;
    let mut args: Vec<std::ffi::OsString> = vec!["kiln".into(), "verdict".into(), "--json".into()];
    args.push(run_dir.into());
    args.extend(extra.iter().map(|a| a.to_os_string()));
    let args = match kiln::cmd::parse(args) {
        Ok(Command::Verdict(args)) => args,
        Ok(_) => unreachable!("`kiln verdict` parses to the verdict"),
        Err(Refusal::Shown(e)) => panic!("`kiln verdict {extra:?}` shows clap's text: {e}"),
        Err(Refusal::Usage(sentence)) => {
            return output(kiln::exit_code::USAGE, "", &edge::error_line(&sentence));
        }
    };
    return match rebuild::judged(&args) {
        Ok((report, text)) => {
            let json = serde_json::to_string_pretty(&report).unwrap() + "\n";
            output(report.exit_code, &json, &text)
        }
        Err(e) => output(e.exit_code(), "", &edge::error_line(&edge::sentence_of(&e))),
    };

    fn output(code: i32, stdout: &str, stderr: &str) -> std::process::Output {
        std::process::Output {
            status: std::process::ExitStatus::from_raw((code & 0xff) << 8),
            stdout: stdout.as_bytes().to_vec(),
            stderr: stderr.as_bytes().to_vec(),
        }
    }
}

/// `kiln verdict --json RUN_DIR`, plus `extra` flags, through the binary: for the tests
/// of the process itself.
pub fn verdict_of_binary(
    run_dir: &std::path::Path,
    extra: &[&std::ffi::OsStr],
) -> std::process::Output {
    kiln()
        .args(["verdict", "--json"])
        .arg(run_dir)
        .args(extra)
        .output()
        .unwrap()
}

/// The report a `--json` command printed on stdout, its exit code unchecked (see
/// [`expect_json`] for the usual case).
pub fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("a report on stdout")
}

/// Asserts that the command behind `out` exited with `code` (its stderr in the failure
/// message) and returns the JSON it printed on stdout.
pub fn expect_json(out: &std::process::Output, code: i32) -> serde_json::Value {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(out)
}

/// `kiln args`, which must exit with `code`: the JSON it printed on stdout.
pub fn kiln_json(args: &[&str], code: i32) -> serde_json::Value {
    expect_json(&kiln().args(args).output().unwrap(), code)
}

/// The JSON file at `path` (a report, a manifest, a state file).
pub fn read_json(path: &std::path::Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A command's stderr, as text.
pub fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A command's stdout, as text.
pub fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The codes of a reported device's findings, in the report's order.
pub fn finding_codes(device: &serde_json::Value) -> Vec<&str> {
    device["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect()
}

/// The findings of `code` on a reported device.
pub fn findings_of<'a>(device: &'a serde_json::Value, code: &str) -> Vec<&'a serde_json::Value> {
    device["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == code)
        .collect()
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

/// Replays telemetry fixture `name` through the sidecar's own loop on a scripted clock, one
/// tick every 200 ms, with a `before` snapshot of `phase` before the first tick is due and
/// an `after` one once the last was sampled: the records the sidecar wrote, and their
/// summary per phase.
pub fn replay_phase(name: &str, phase: &str) -> (Vec<TelemetryRecord>, Vec<PhaseTelemetry>) {
    let path = telemetry_fixture(name);
    let source =
        ReplaySource::open(&path).unwrap_or_else(|e| panic!("{name}: the fixture loads: {e}"));
    let ticks = source.ticks_left() as u32;
    let interval = Duration::from_millis(200);
    let snapshot = |when: &str| {
        let (done, _wait) = std::sync::mpsc::channel();
        sidecar::Command::Snapshot {
            device: None,
            phase: phase.into(),
            when: when.into(),
            done,
        }
    };
    let clock = sidecar::ScriptedClock::new(
        interval * (ticks + 1),
        vec![
            (Duration::from_millis(1), snapshot("before")),
            (
                interval * ticks - Duration::from_millis(1),
                snapshot("after"),
            ),
        ],
    );
    let mut sources: Vec<Box<dyn Source>> = vec![Box::new(source)];
    let (_tx, rx) = std::sync::mpsc::channel();
    let mut records = Vec::new();
    sidecar::run_loop(&mut sources, interval, &clock, &rx, &mut |r| {
        records.push(r)
    });
    let phases = summarize(&records);
    (records, phases)
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

/// Waits (at most a minute) until a line of the run's events contains `text`.
pub fn wait_for_event_text(dir: &std::path::Path, text: &str) {
    let events = dir.join("events.jsonl");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !std::fs::read_to_string(&events).is_ok_and(|t| t.contains(text)) {
        assert!(
            std::time::Instant::now() < deadline,
            "the run never wrote {text:?}"
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
/// telemetry fixture it names, then its own files, less those it names in `without`.
pub fn lay_out_scenario(name: &str, run_dir: &std::path::Path) {
    fn lay(name: &str, run_dir: &std::path::Path, depth: usize) {
        assert!(depth < 8, "{name}: run_from goes round in a circle");
        let dir = scenarios().join(name);
        if name == "_base" {
            copy_scenario_files(&dir, run_dir);
            return;
        }
        let expected = read_json(&dir.join("expected.json"));
        lay(
            expected["run_from"].as_str().unwrap_or("_base"),
            run_dir,
            depth + 1,
        );
        if let Some(fixture) = expected["telemetry_fixture"].as_str() {
            use_telemetry_fixture(run_dir, fixture);
        }
        copy_scenario_files(&dir, run_dir);
        for lost in expected["without"].as_array().into_iter().flatten() {
            std::fs::remove_file(run_dir.join(lost.as_str().unwrap())).unwrap();
        }
    }
    std::fs::create_dir_all(run_dir).unwrap();
    lay(name, run_dir, 0);
}

/// Validates a report against the published schema with Python's jsonschema.
pub fn validate_report(report: &std::path::Path) {
    validate_reports(&[report.to_path_buf()]);
}

/// Validates reports against the published schema, in one run of Python's jsonschema; the
/// failure names every report that does not follow it.
pub fn validate_reports(reports: &[std::path::PathBuf]) {
    let schema =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/report.schema.json");
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import json, sys, jsonschema\n\
             v = jsonschema.Draft202012Validator(json.load(open(sys.argv[1])))\n\
             bad = [f'{p}: {e.message}' for p in sys.argv[2:] for e in v.iter_errors(json.load(open(p)))]\n\
             print('\\n'.join(bad), file=sys.stderr)\n\
             sys.exit(1 if bad else 0)",
        ])
        .arg(&schema)
        .args(reports)
        .output()
        .expect("python3 is needed");
    assert!(
        out.status.success(),
        "reports that do not follow the schema:\n{}",
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

/// Makes a FIFO at `path`: what a hostile input puts where kiln expects a file (opening one
/// for reading waits for a writer that never comes).
pub fn mkfifo(path: &std::path::Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
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

/// Checks that `kiln args` is refused before anything starts, in this process, as the
/// binary refuses it: parsed by `cmd::parse` and checked by `cmd::check` (what each command
/// does first), exit 64 and one line starting `kiln: ` and holding `needle`, no longer than
/// a sane sentence. Arguments refused only once the command runs (a device that is not
/// there) go through [`usage_error_of_binary`].
pub fn usage_error(args: &[&str], needle: &str) {
    use kiln::cmd::{Refusal, edge};
    let argv = std::iter::once("kiln").chain(args.iter().copied());
    let (code, sentence) = match kiln::cmd::parse(argv) {
        Err(Refusal::Usage(sentence)) => (kiln::exit_code::USAGE, sentence),
        Err(Refusal::Shown(e)) => panic!("{args:?}: shown, not refused: {e}"),
        Ok(command) => match kiln::cmd::check(&command) {
            Err(e) => (e.exit_code(), edge::sentence_of(&e)),
            Ok(()) => panic!("{args:?}: passes every check made before the command starts"),
        },
    };
    assert_refused(args, Some(code), &edge::error_line(&sentence), needle);
}

/// What every refusal of `args` must be: exit 64 and one line on stderr, starting `kiln: `
/// and holding `needle`, no longer than a sane sentence.
fn assert_refused(args: &[&str], code: Option<i32>, text: &str, needle: &str) {
    assert_eq!(code, Some(64), "{args:?}: {text}");
    assert_eq!(
        text.trim().lines().count(),
        1,
        "{args:?}: one sentence, got {text}"
    );
    assert!(text.starts_with("kiln: "), "{args:?}: {text}");
    assert!(text.contains(needle), "{args:?}: `{needle}` not in {text}");
    assert!(text.len() < 600, "{args:?}: {} characters", text.len());
}

/// Runs `kiln args` in an empty directory and checks it is refused before anything
/// starts: exit 64, one line on stderr starting `kiln: ` and holding `needle`, no longer
/// than a sane sentence, nothing on stdout, no run directory made.
pub fn usage_error_of_binary(args: &[&str], needle: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = kiln().args(args).current_dir(dir.path()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_refused(args, out.status.code(), &text, needle);
    assert!(!text.contains("panicked"));
    assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    assert!(
        !dir.path().join("kiln-runs").exists(),
        "{args:?}: a run started"
    );
}

/// The workspace's target directory, as cargo uses it (`CARGO_TARGET_DIR`, else
/// `target/` in the workspace).
fn target_dir() -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => root.join(dir),
        None => root.join("target"),
    }
}

/// Runs `cargo build` with `args` in the workspace and fails the test with cargo's words
/// when it fails.
fn cargo_build(args: &[&str]) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::env::var_os("CARGO")
        .or_else(|| option_env!("CARGO").map(std::ffi::OsString::from))
        .unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(&cargo)
        .arg("build")
        .args(args)
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .current_dir(root)
        .output()
        .unwrap_or_else(|e| panic!("running {cargo:?} build {args:?}: {e}"));
    assert!(
        out.status.success(),
        "cargo build {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The workspace's test-only crates (kiln's trace layer, the emulated-discrete layer, the
/// fake NVML and the watch's test application), built once per test process with one cargo
/// command into the workspace's target directory, so that they share kiln's dependencies
/// (`scripts/test.sh` builds them the same way before the tests): the directory that holds
/// them.
fn test_crates() -> std::path::PathBuf {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        cargo_build(&[
            "-p",
            "kiln-trace-layer",
            "-p",
            "kiln-discrete-layer",
            "-p",
            "kiln-fake-nvml",
            "-p",
            "kiln-test-app",
        ]);
        target_dir().join("debug")
    })
    .clone()
}

/// A file of the test-only crates' build ([`test_crates`]), which must be there.
fn built(name: &str) -> std::path::PathBuf {
    let path = test_crates().join(name);
    assert!(path.is_file(), "{} was not built", path.display());
    path
}

/// kiln's Vulkan layer for `kiln watch` (`layer/`): the path of its library, for
/// `KILN_TRACE_LAYER`.
pub fn trace_layer() -> std::path::PathBuf {
    built("libkiln_trace_layer.so")
}

/// The test application of `kiln watch` (`tests/apps/vkapp`).
pub fn test_app() -> std::path::PathBuf {
    built("kiln-test-app")
}

/// The lines of a JSON-lines evidence file (`events.jsonl`, `telemetry.jsonl`).
pub fn jsonl(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Writes `bytes` to `path` aside and renames it into place, so that a process reading it
/// meanwhile never sees half a file.
fn replace_file(path: &std::path::Path, bytes: &[u8]) {
    let temp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&temp, bytes).unwrap();
    std::fs::rename(&temp, path).unwrap();
}

/// The directory holding the emulated-discrete test layer's manifest
/// (`tests/layers/discrete`), for `VK_LAYER_PATH`: `target/vk-layer`, naming the library
/// the test crates' build made.
pub fn discrete_layer_dir() -> std::path::PathBuf {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let library = built("libkiln_discrete_layer.so");
        let dir = target_dir().join("vk-layer");
        std::fs::create_dir_all(&dir).unwrap();
        let template = std::fs::read_to_string(
            root.join("tests/layers/discrete/VkLayer_kiln_discrete.json.in"),
        )
        .expect("the layer's manifest template");
        let escaped = library
            .to_str()
            .expect("a UTF-8 target path")
            .replace('\\', "\\\\")
            .replace('"', "\\\"");
        let manifest = template.replace("@LIBRARY_PATH@", &escaped);
        replace_file(&dir.join("VkLayer_kiln_discrete.json"), manifest.as_bytes());
        dir
    })
    .clone()
}

/// The directory holding the fake NVML (`tests/fakes/nvml`) as `libnvidia-ml.so.1`, for
/// `LD_LIBRARY_PATH`: `target/fake-nvml`.
pub fn fake_nvml_dir() -> std::path::PathBuf {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        nvml_dir(
            &built("libkiln_fake_nvml.so"),
            &target_dir().join("fake-nvml"),
        )
    })
    .clone()
}

/// The directory of the fake NVML built as an R470-era library (`old_driver`: the calls
/// added in R510 not exported), `target/fake-nvml-old/nvml`: a target directory of its
/// own, since its library has the same name as the other's.
pub fn old_fake_nvml_dir() -> std::path::PathBuf {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let target = target_dir().join("fake-nvml-old");
        cargo_build(&[
            "-p",
            "kiln-fake-nvml",
            "--features",
            "old_driver",
            "--target-dir",
            target.to_str().expect("a UTF-8 target path"),
        ]);
        nvml_dir(
            &target.join("debug/libkiln_fake_nvml.so"),
            &target.join("nvml"),
        )
    })
    .clone()
}

/// Lays a built fake NVML out in `dir` as `libnvidia-ml.so.1` (copied aside and renamed,
/// so that a process loading it meanwhile never maps half a library).
fn nvml_dir(library: &std::path::Path, dir: &std::path::Path) -> std::path::PathBuf {
    assert!(library.is_file(), "{} was not built", library.display());
    std::fs::create_dir_all(dir).unwrap();
    replace_file(
        &dir.join("libnvidia-ml.so.1"),
        &std::fs::read(library).unwrap(),
    );
    dir.to_owned()
}

/// The NVIDIA driver version the emulated NVIDIA node reports, through Vulkan and NVML alike.
pub const FAKE_DRIVER_VERSION: &str = "550.90.07";

/// The environment of an emulated NVIDIA node: lavapipe dressed as an NVIDIA card without
/// BAR (its driver at [`FAKE_DRIVER_VERSION`]) and the fake NVML answering for it by the same
/// UUID from `scenario` (a JSON file, see `tests/fakes/nvml/src/scenario.rs`), its clock
/// starting now, every NVML call logged to `calls`.
pub fn nvidia_node_env(
    scenario: &std::path::Path,
    calls: &std::path::Path,
) -> Vec<(String, std::ffi::OsString)> {
    let mut env = emulated_env("nvidia", "none", &calls.with_extension("layer.log"));
    let library = fake_nvml_dir();
    // The clock starts once everything is built: a scenario's times are from kiln's start.
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    env.extend([
        (
            "KILN_EMULATE_DRIVER_VERSION".into(),
            FAKE_DRIVER_VERSION.into(),
        ),
        ("LD_LIBRARY_PATH".into(), library.into()),
        ("KILN_FAKE_NVML".into(), scenario.into()),
        ("KILN_FAKE_NVML_EPOCH".into(), format!("{epoch:.3}").into()),
        ("KILN_FAKE_NVML_LOG".into(), calls.into()),
    ]);
    env
}

/// The emulated-discrete configurations (vendor, BAR) the memory tests run in.
pub const EMULATED: &[(&str, &str)] = &[
    ("nvidia", "none"),
    ("nvidia", "rebar"),
    ("amd", "small"),
    ("intel", "rebar"),
];

/// One emulated discrete card: `vendor` is `nvidia`, `amd` or `intel`; `bar` is `none`,
/// `rebar` (all of VRAM host-visible) or `small` (a 256 MiB BAR heap).
#[derive(Clone, Copy, Debug)]
pub struct Emulated {
    pub vendor: &'static str,
    pub bar: &'static str,
}

impl Emulated {
    /// Every configuration of [`EMULATED`].
    pub fn all() -> Vec<Emulated> {
        EMULATED
            .iter()
            .map(|&(vendor, bar)| Emulated { vendor, bar })
            .collect()
    }

    /// The environment that runs a kiln process on this card; see [`emulated_env`].
    pub fn env(&self, log: &std::path::Path) -> Vec<(String, std::ffi::OsString)> {
        emulated_env(self.vendor, self.bar, log)
    }
}

/// Lavapipe's ICD manifest, when it is installed in a standard place.
pub fn lavapipe_icd() -> Option<std::path::PathBuf> {
    [
        "/usr/share/vulkan/icd.d",
        "/usr/local/share/vulkan/icd.d",
        "/etc/vulkan/icd.d",
    ]
    .iter()
    .filter_map(|d| std::fs::read_dir(d).ok())
    .flatten()
    .filter_map(|e| e.ok().map(|e| e.path()))
    .find(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("lvp_icd") && n.ends_with(".json"))
    })
}

/// The emulated NVIDIA card's Vulkan UUID, as NVML writes it (`GPU-...`), from
/// `kiln list` (its log in `dir`).
#[allow(dead_code)]
pub fn emulated_nvidia_uuid(dir: &std::path::Path) -> String {
    let out = kiln()
        .args(["list", "--json"])
        .envs(emulated_env("nvidia", "none", &dir.join("list.log")))
        .output()
        .unwrap();
    let devices = expect_json(&out, 0);
    format!("GPU-{}", devices[0]["device_uuid"].as_str().unwrap())
}

/// The environment that makes a kiln process see lavapipe as a discrete card of `vendor`
/// with BAR mode `bar`, through `VK_LAYER_KILN_emulated_discrete`, its memory events
/// appended to `log`. Only lavapipe's driver is loaded (when its manifest is found), so a
/// real GPU on the machine is not disguised. Add `KILN_EMULATE_VRAM_BYTES`,
/// `KILN_EMULATE_HOST_BYTES` or `KILN_EMULATE_MAX_STORAGE_RANGE` to change the card.
pub fn emulated_env(
    vendor: &str,
    bar: &str,
    log: &std::path::Path,
) -> Vec<(String, std::ffi::OsString)> {
    let mut env: Vec<(String, std::ffi::OsString)> = vec![
        ("VK_LAYER_PATH".into(), discrete_layer_dir().into()),
        (
            "VK_INSTANCE_LAYERS".into(),
            "VK_LAYER_KILN_emulated_discrete".into(),
        ),
        ("KILN_EMULATE_VENDOR".into(), vendor.into()),
        ("KILN_EMULATE_BAR".into(), bar.into()),
        ("KILN_EMULATE_LOG".into(), log.into()),
    ];
    if let Some(icd) = lavapipe_icd() {
        env.push(("VK_DRIVER_FILES".into(), icd.clone().into()));
        env.push(("VK_ICD_FILENAMES".into(), icd.into()));
    }
    env
}

/// One line of the emulated-discrete layer's log: `alloc`, `free`, `map`, `map-refused`,
/// `refused-heap-full` or `refused-bad-type`, with the fields the line has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocLine {
    pub kind: String,
    pub memory_type: Option<u32>,
    pub heap: Option<u32>,
    pub bytes: Option<u64>,
    pub flags: Vec<String>,
}

/// The lines of the layer's log at `path` (none when it was never written).
pub fn allocation_log(path: &std::path::Path) -> Vec<AllocLine> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let mut words = line.split_whitespace();
            let mut entry = AllocLine {
                kind: words.next().unwrap_or_default().to_owned(),
                memory_type: None,
                heap: None,
                bytes: None,
                flags: Vec::new(),
            };
            for word in words {
                let (key, value) = word
                    .split_once('=')
                    .unwrap_or_else(|| panic!("{}: bad log line `{line}`", path.display()));
                match key {
                    "type" => entry.memory_type = value.parse().ok(),
                    "heap" => entry.heap = value.parse().ok(),
                    "bytes" => entry.bytes = value.parse().ok(),
                    "flags" if value != "none" => {
                        entry.flags = value.split('|').map(str::to_owned).collect()
                    }
                    _ => {}
                }
            }
            entry
        })
        .collect()
}

/// Checks Prometheus text with `promtool check metrics`: it must parse, and the only lint
/// allowed is the one naming dcgm-exporter's camelCase labels (`UUID`, `modelName`,
/// `Hostname`), kept so that PromQL joins with its series work.
pub fn promtool_accepts(metrics: &[u8]) {
    use std::io::Write;
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool is needed: run scripts/setup.sh --test");
    child.stdin.take().unwrap().write_all(metrics).unwrap();
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            line.ends_with("label names should be written in 'snake_case' not 'camelCase'"),
            "promtool: {line}"
        );
    }
    assert!(
        matches!(out.status.code(), Some(0) | Some(3)),
        "exit 1 is a parse error: {text}"
    );
}

/// Calls `f(name, run_dir, verdict's output)` for every scenario of the corpus, each laid
/// out in a temporary directory of its own and rebuilt by `kiln verdict --json`.
pub fn for_each_rebuilt_scenario(mut f: impl FnMut(&str, &std::path::Path, &std::process::Output)) {
    for entry in std::fs::read_dir(scenarios()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.starts_with('_') {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("run");
        lay_out_scenario(&name, &run_dir);
        let out = verdict(&run_dir, &[]);
        f(&name, &run_dir, &out);
    }
}

/// An emulated NVIDIA node: the fake NVML answering for its GPUs from a scenario (the
/// fields of `tests/fakes/nvml/src/scenario.rs`), and logging the calls kiln makes.
pub struct Node {
    /// Its scenario, call log and run directories.
    pub dir: tempfile::TempDir,
    /// The fake NVML's scenario.
    pub scenario: std::path::PathBuf,
    /// The fake NVML's log of the calls made.
    pub calls: std::path::PathBuf,
}

impl Node {
    /// A node whose one GPU is the emulated card, as NVML describes it in `gpu` (its UUID
    /// is the card's).
    pub fn new(mut gpu: serde_json::Value) -> Node {
        let dir = tempfile::tempdir().unwrap();
        gpu["uuid"] = emulated_nvidia_uuid(dir.path()).into();
        Node::in_dir(dir, vec![gpu])
    }

    /// A node of `gpus` GPUs that Vulkan does not see (only NVML lists them), each
    /// answering as `gpu` does, on its own PCI address and UUID.
    pub fn of_gpus(gpus: usize, gpu: serde_json::Value) -> Node {
        let gpus: Vec<serde_json::Value> = (0..gpus)
            .map(|i| {
                let mut g = gpu.clone();
                g["uuid"] = format!("GPU-6b696c6e-0000-4000-8000-{i:012x}").into();
                g["bus_id"] = format!("00000000:{:02X}:00.0", 0x18 + 0x10 * i).into();
                g["minor"] = i.into();
                g
            })
            .collect();
        Node::in_dir(tempfile::tempdir().unwrap(), gpus)
    }

    /// The node of these GPUs, its scenario and call log in `dir`.
    pub fn in_dir(dir: tempfile::TempDir, gpus: Vec<serde_json::Value>) -> Node {
        let scenario = dir.path().join("scenario.json");
        std::fs::write(
            &scenario,
            serde_json::json!({"driver_version": FAKE_DRIVER_VERSION, "gpus": gpus}).to_string(),
        )
        .unwrap();
        let calls = dir.path().join("nvml-calls.log");
        Node {
            dir,
            scenario,
            calls,
        }
    }

    /// kiln on the node: the fake NVML's library, scenario and call log in its environment.
    pub fn kiln(&self) -> std::process::Command {
        let mut cmd = kiln();
        cmd.envs(nvidia_node_env(&self.scenario, &self.calls));
        cmd
    }
}

/// Scales the VRAM workload's streaming rates (write and verify) in the run at `run_dir`
/// by `factor`: the same card, as a slower or faster one would have measured.
pub fn scale_vram_rate(run_dir: &std::path::Path, factor: f64) {
    let events = run_dir.join("events.jsonl");
    let scaled: String = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(|line| {
            let mut record: serde_json::Value = serde_json::from_str(line).unwrap();
            if record["kind"] == "workload_end" && record["workload"] == "vram" {
                for part in ["write", "verify"] {
                    let rate = &mut record["summary"]["throughput"][part]["gib_per_s"];
                    if let Some(v) = rate.as_f64() {
                        *rate = (v * factor).into();
                    }
                }
            }
            record.to_string() + "\n"
        })
        .collect();
    std::fs::write(&events, scaled).unwrap();
}
