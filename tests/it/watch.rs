//! `kiln watch` on real parts: the test application (`tests/apps/vkapp`) run on lavapipe
//! under the watch, with kiln's own Vulkan layer tracing it, plain or behind the
//! emulated-discrete layer (a card whose memory runs out, whose allocation count is
//! limited, whose device is lost); the NVML per-process path on the fake NVML; `--pid`;
//! the application and kiln itself killed; an application that ignores kiln's request to
//! stop, killed, and an attached one left running; and the flags' errors.

use crate::common;

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

const MIB: u64 = 1 << 20;

type Env = Vec<(String, OsString)>;

/// Plain lavapipe: no GPU, the CPU device stands in.
fn plain() -> Env {
    let mut env: Env = Vec::new();
    if let Some(icd) = common::lavapipe_icd() {
        env.push(("VK_DRIVER_FILES".into(), icd.clone().into()));
        env.push(("VK_ICD_FILENAMES".into(), icd.into()));
    }
    env
}

/// An emulated NVIDIA card without BAR, its VRAM `vram_mib`, with `more` settings.
fn card(dir: &Path, vram_mib: u64, more: &[(&str, &str)]) -> Env {
    let mut env = common::emulated_env("nvidia", "none", &dir.join("layer.log"));
    env.push((
        "KILN_EMULATE_VRAM_BYTES".into(),
        (vram_mib * MIB).to_string().into(),
    ));
    env.extend(
        more.iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v))),
    );
    env
}

/// An emulated NVIDIA node: the emulated card (no BAR) as the H200 the fake NVML answers
/// for by its UUID and PCI address, with `processes` on it (the fake's scenario entries).
fn nvidia_node(dir: &Path, processes: Value) -> Env {
    const UUID: &str = "GPU-4b494c4e-4832-3030-8000-00000000003b";
    let scenario = serde_json::json!({
        "driver_version": common::FAKE_DRIVER_VERSION,
        "gpus": [{"uuid": UUID, "bus_id": "00000000:3B:00.0", "processes": processes}],
    });
    let path = dir.join("node.json");
    std::fs::write(&path, scenario.to_string()).unwrap();
    let mut env = common::nvidia_node_env(&path, &dir.join("calls.log"));
    env.push(("KILN_EMULATE_UUID".into(), UUID.into()));
    env.push(("KILN_EMULATE_PCI_ADDRESS".into(), "0000:3b:00.0".into()));
    env
}

/// `kiln watch` with `env`, `args`, and the test application with `app`'s arguments.
fn watch_command(dir: &Path, env: &Env, args: &[&str], app: &[&str]) -> Command {
    let program = common::test_app();
    let app: Vec<&std::ffi::OsStr> = app.iter().map(std::ffi::OsStr::new).collect();
    watch_program(dir, env, args, program.as_os_str(), &app)
}

/// `kiln watch` with `env` and `args`, of `program` with its arguments, kiln's layer
/// beside it and no layer of the caller's.
fn watch_program(
    dir: &Path,
    env: &Env,
    args: &[&str],
    program: &std::ffi::OsStr,
    program_args: &[&std::ffi::OsStr],
) -> Command {
    let mut cmd = common::kiln();
    for var in ["VK_INSTANCE_LAYERS", "VK_LAYER_PATH", "VK_ADD_LAYER_PATH"] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)))
        .env("KILN_TRACE_LAYER", common::trace_layer())
        .arg("watch")
        .arg("--out")
        .arg(dir.join("run"))
        .args(args)
        .arg("--")
        .arg(program)
        .args(program_args);
    cmd
}

/// Runs the watch to its end: its exit code, report and stderr.
fn watch(dir: &Path, env: &Env, args: &[&str], app: &[&str]) -> (i32, Value, String) {
    let out = watch_command(dir, env, args, app).output().unwrap();
    finished(dir, &out)
}

fn finished(dir: &Path, out: &Output) -> (i32, Value, String) {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    let report =
        report_of(&dir.join("run")).unwrap_or_else(|| panic!("no report.json; stderr: {stderr}"));
    (out.status.code().unwrap_or(-1), report, stderr)
}

fn report_of(run: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(run.join("report.json")).ok()?).ok()
}

fn codes(report: &Value) -> Vec<String> {
    report["devices"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_owned())
        .collect()
}

fn finding<'a>(report: &'a Value, code: &str) -> &'a Value {
    report["devices"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == code)
        .unwrap_or_else(|| panic!("no {code} in {:?}", codes(report)))
}

/// The codes of findings that judge (not information, not "could not test").
fn judged(report: &Value) -> Vec<String> {
    report["devices"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| ["hardware", "environment", "software"].contains(&f["class"].as_str().unwrap()))
        .map(|f| f["code"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_leaking_application_is_a_leak_with_its_rate_and_size_class_even_on_the_cpu_device() {
    let dir = tempfile::tempdir().unwrap();
    let (code, report, stderr) = watch(
        dir.path(),
        &plain(),
        &["--iteration", "^step"],
        &["leak", "10", "300", "8"],
    );
    assert_eq!(code, 3, "{stderr}");
    let app = &report["application"];
    assert_eq!(app["diagnosis"], "leak");
    assert_eq!(app["memory_source"], "trace");
    assert_eq!(app["iterations_from"], "output");
    assert_eq!(app["iterations_ms"].as_array().unwrap().len(), 10);
    let leak = finding(&report, "APP_MEMORY_LEAK");
    let per = leak["evidence"]["bytes_per_iteration"].as_f64().unwrap();
    assert!(
        (6.0 * MIB as f64..10.0 * MIB as f64).contains(&per),
        "{per}"
    );
    assert_eq!(leak["evidence"]["leaking_size_class_bytes"], 8 * MIB);
    assert!(leak["evidence"]["seconds_until_budget"].as_f64().unwrap() > 0.0);
    assert!(leak["summary"].as_str().unwrap().contains("a leak"));
    // The CPU device stood in: what its memory showed stands, and that is said.
    let notes = report["notes"].to_string();
    assert!(notes.contains("no GPU was watched"), "{notes}");
    assert!(stderr.contains("a leak"), "{stderr}");
    // Every allocation the layer saw made was traced, and its run directory judged alike.
    assert_eq!(app["trace"]["attached"], 1);
    assert_eq!(app["trace"]["lost_records"], 0);
    let again = common::verdict(&dir.path().join("run"), &[]);
    assert_eq!(again.status.code(), Some(3));
    common::validate_report(&dir.path().join("run/report.json"));
    // The metrics name the diagnosis, and promtool reads them.
    let metrics = std::fs::read(dir.path().join("run/kiln.prom")).unwrap();
    assert!(String::from_utf8_lossy(&metrics).contains("diagnosis=\"leak\"} 1"));
    common::promtool_accepts(&metrics);
}

#[test]
fn a_steady_application_is_healthy_on_a_card_and_not_a_pass_on_the_cpu_device() {
    let dir = tempfile::tempdir().unwrap();
    let env = card(dir.path(), 1024, &[]);
    let (code, report, stderr) = watch(
        dir.path(),
        &env,
        &["--iteration", "^step"],
        &["steady", "8", "250"],
    );
    assert_eq!(code, 0, "{stderr}");
    let app = &report["application"];
    assert_eq!(app["diagnosis"], "healthy");
    assert_eq!(app["exit_code"], 0);
    assert!(judged(&report).is_empty(), "{:?}", codes(&report));
    // Six 8 MiB blocks a step, each freed.
    let classes = app["histogram"].as_array().unwrap();
    let of_8mib = classes
        .iter()
        .find(|c| c["up_to_bytes"] == 8 * MIB)
        .unwrap();
    assert_eq!(of_8mib["allocations"], 48);
    assert_eq!(of_8mib["frees"], 48);
    assert_eq!(app["peak_bytes"], 48 * MIB);
    // Its baselines are flat at nothing: everything a step allocates it frees. The first
    // iteration is start-up, which the verdict leaves out: under load its stretch can
    // begin after the first step's allocations, as the line that marks it comes late.
    let baselines = app["baselines"].as_array().unwrap();
    assert!(baselines.len() >= 6, "{baselines:?}");
    for b in &baselines[1..] {
        assert_eq!(b[1], 0.0, "{b}");
    }
    // The ring was drained whole and removed; the trace holds every record.
    assert!(!dir.path().join("run/trace.ring").exists());
    assert!(dir.path().join("run/trace.jsonl").is_file());

    let plain_dir = tempfile::tempdir().unwrap();
    let (code, report, stderr) = watch(
        plain_dir.path(),
        &plain(),
        &["--iteration", "^step"],
        &["steady", "6", "100"],
    );
    assert_eq!(code, 4, "{stderr}");
    assert_eq!(report["application"]["diagnosis"], "healthy");
    assert!(stderr.contains("no GPU was watched"), "{stderr}");
    // The command is said whole, its program by name, not cut at its path.
    assert!(
        stderr.contains("application: `kiln-test-app steady 6 100` (pid"),
        "{stderr}"
    );
}

#[test]
fn a_step_that_needs_more_than_the_card_has_is_over_the_limit_not_a_leak() {
    let dir = tempfile::tempdir().unwrap();
    let env = card(dir.path(), 512, &[]);
    let (code, report, stderr) = watch(
        dir.path(),
        &env,
        &["--iteration", "^step"],
        &["oom", "8", "150"],
    );
    assert_eq!(code, 3, "{stderr}");
    assert_eq!(report["application"]["diagnosis"], "over_the_limit");
    assert_eq!(report["application"]["exit_code"], 1);
    let f = finding(&report, "APP_OVER_MEMORY_LIMIT");
    assert_eq!(f["confidence"], "high");
    assert_eq!(f["evidence"]["request_bytes"], 64 * MIB);
    assert_eq!(f["evidence"]["budget_bytes"], 512 * MIB);
    assert!(f["evidence"]["peak_bytes"].as_u64().unwrap() >= 460 * MIB);
    assert!(!codes(&report).contains(&"APP_MEMORY_LEAK".to_owned()));
    // The application said so too, in its output.
    let events = std::fs::read_to_string(dir.path().join("run/events.jsonl")).unwrap();
    assert!(events.contains("\"kind\":\"app_said\""), "{events}");
}

#[test]
fn an_allocation_refused_for_the_count_of_allocations_is_fragmentation_not_a_leak() {
    let dir = tempfile::tempdir().unwrap();
    let env = card(dir.path(), 1024, &[("KILN_EMULATE_MAX_ALLOCATIONS", "400")]);
    let (code, report, stderr) = watch(
        dir.path(),
        &env,
        &["--iteration", "^step"],
        &["fragment", "60", "20"],
    );
    assert_eq!(code, 3, "{stderr}");
    assert_eq!(report["application"]["diagnosis"], "fragmentation");
    let f = finding(&report, "APP_FRAGMENTATION");
    assert_eq!(f["evidence"]["result"], "VK_ERROR_TOO_MANY_OBJECTS");
    assert_eq!(f["evidence"]["max_allocations"], 400);
    assert_eq!(f["evidence"]["live_allocations"], 400);
    assert!(f["evidence"]["free_bytes"].as_u64().unwrap() > 900 * MIB);
    // The live count crept, its bytes hardly: not a leak.
    assert!(
        !codes(&report).contains(&"APP_MEMORY_LEAK".to_owned()),
        "{:?}",
        codes(&report)
    );
}

#[test]
fn a_device_lost_with_the_memory_flat_is_a_driver_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let env = card(
        dir.path(),
        1024,
        &[("KILN_EMULATE_LOSE_AFTER_SUBMITS", "4")],
    );
    let (code, report, stderr) = watch(
        dir.path(),
        &env,
        &["--iteration", "^step"],
        &["steady", "10", "100"],
    );
    assert_eq!(code, 3, "{stderr}");
    assert_eq!(report["application"]["diagnosis"], "driver_timeout");
    let f = finding(&report, "APP_DRIVER_TIMEOUT");
    assert_eq!(f["evidence"]["memory_flat"], true);
    assert!(
        f["summary"].as_str().unwrap().contains("vkQueueSubmit"),
        "{f}"
    );
    assert_eq!(report["application"]["trace"]["device_lost_calls"], 1);
}

/// The loss a watchdog makes (Windows' TDR): the submission accepted, the wait for it lost
/// after a while. The trace names the wait, and the diagnosis is the same timeout.
#[test]
fn a_device_lost_in_the_wait_a_watchdog_ended_is_a_driver_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let env = card(
        dir.path(),
        1024,
        &[
            ("KILN_EMULATE_LOSE_AFTER_SUBMITS", "4"),
            ("KILN_EMULATE_LOSS_WAIT_MS", "1200"),
        ],
    );
    let (code, report, stderr) = watch(
        dir.path(),
        &env,
        &["--iteration", "^step"],
        &["steady", "10", "100"],
    );
    assert_eq!(code, 3, "{stderr}");
    assert_eq!(report["application"]["diagnosis"], "driver_timeout");
    let f = finding(&report, "APP_DRIVER_TIMEOUT");
    assert!(
        f["summary"].as_str().unwrap().contains("vkWaitForFences"),
        "{f}"
    );
}

/// A crash with nothing on the GPU to explain it is the application's own failure
/// (software), never "healthy"; the emulated card here gives no telemetry, so its
/// evidence is never said to be clean (issue 58), only that it was not watched.
#[test]
fn an_application_that_crashes_on_its_own_is_its_own_failure_never_healthy() {
    let dir = tempfile::tempdir().unwrap();
    let env = card(dir.path(), 1024, &[]);
    let (code, report, stderr) = watch(
        dir.path(),
        &env,
        &["--iteration", "^step"],
        &["crash", "8", "100"],
    );
    assert_eq!(code, 3, "{stderr}");
    assert_eq!(report["application"]["signal"], 6);
    assert_eq!(report["application"]["diagnosis"], "application_failed");
    let f = finding(&report, "APP_EXIT");
    assert_eq!(f["class"], "software");
    assert_eq!(f["evidence"]["signal"], 6);
    let summary = f["summary"].as_str().unwrap();
    assert!(summary.contains("signal 6 (SIGABRT)"), "{summary}");
    assert!(
        !summary.contains("the card's evidence is clean")
            && summary.contains("no GPU telemetry was watched"),
        "{summary}"
    );
    assert!(stderr.contains("the application's own failure"), "{stderr}");
}

/// Waits until the run's events hold `n` iterations.
fn wait_for_iterations(run: &Path, n: usize, limit: Duration) {
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(run.join("events.jsonl")).unwrap_or_default();
        if text.matches("\"kind\":\"iteration\"").count() >= n {
            return;
        }
        assert!(
            started.elapsed() < limit,
            "no {n} iterations in {limit:?}: {text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `kiln watch` started in the background with the test application's `app` arguments
/// (its stderr kept for [`finished`]), once its run holds `iterations` iterations.
fn watching(dir: &Path, env: &Env, app: &[&str], iterations: usize) -> std::process::Child {
    let child = watch_command(dir, env, &["--iteration", "^step"], app)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_iterations(&dir.join("run"), iterations, Duration::from_secs(30));
    child
}

fn app_pid(run: &Path) -> u32 {
    let text = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    let start: Value = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["kind"] == "app_start")
        .unwrap();
    start["pid"].as_u64().unwrap() as u32
}

fn kill(pid: u32, signal: &str) {
    let ok = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

#[test]
fn an_application_killed_9_leaves_evidence_that_kiln_verdict_judges_alike() {
    let dir = tempfile::tempdir().unwrap();
    let env = card(dir.path(), 1024, &[]);
    let child = watching(dir.path(), &env, &["steady", "100", "100"], 4);
    let run = dir.path().join("run");
    kill(app_pid(&run), "-9");
    let out = child.wait_with_output().unwrap();
    let (code, report, stderr) = finished(dir.path(), &out);
    // Killed from outside with nothing on the GPU to explain it: the application's
    // failure (software), never healthy.
    assert_eq!(code, 3, "{stderr}");
    assert_eq!(report["application"]["signal"], 9);
    assert_eq!(report["application"]["diagnosis"], "application_failed");
    assert_eq!(finding(&report, "APP_EXIT")["evidence"]["signal"], 9);
    let again = common::verdict(&run, &[]);
    assert_eq!(again.status.code(), Some(3));
    let rebuilt: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(codes(&rebuilt), codes(&report));
}

#[test]
fn kiln_killed_9_mid_watch_leaves_a_ring_that_kiln_verdict_drains_and_judges() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = watching(dir.path(), &plain(), &["leak", "24", "100", "8"], 8);
    let run = dir.path().join("run");
    let app = app_pid(&run);
    child.kill().unwrap();
    child.wait().unwrap();
    // The application runs on, orphaned, and its layer keeps writing the ring.
    let started = Instant::now();
    while Path::new(&format!("/proc/{app}")).exists() && started.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        run.join("trace.ring").is_file(),
        "the ring stays for the verdict"
    );
    let drained = std::fs::read_to_string(run.join("trace.jsonl")).unwrap();
    let drained_allocs = drained.matches("\"kind\":\"alloc\"").count() as u64;
    let out = common::verdict(&run, &[]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report["incomplete"], true);
    assert_eq!(report["application"]["diagnosis"], "leak");
    // The records written after kiln died were read from the ring: 24 iterations of 7.
    let allocations = report["application"]["trace"]["allocations"]
        .as_u64()
        .unwrap();
    assert_eq!(allocations, 24 * 7);
    assert!(
        allocations > drained_allocs,
        "{allocations} vs {drained_allocs} drained"
    );
}

#[test]
fn alert_runs_its_command_once_when_the_memory_crosses_its_share() {
    let dir = tempfile::tempdir().unwrap();
    let env = card(dir.path(), 512, &[]);
    let flag = dir.path().join("alerted");
    let on_alert = format!(
        "echo \"$KILN_WATCH_BYTES $KILN_WATCH_BUDGET_BYTES\" >> {}",
        flag.display()
    );
    let (code, report, stderr) = watch(
        dir.path(),
        &env,
        &[
            "--iteration",
            "^step",
            "--interval",
            "50ms",
            "--alert",
            "40%",
            "--on-alert",
            &on_alert,
        ],
        &["leak", "10", "250", "64"],
    );
    assert_eq!(code, 3, "{stderr}");
    assert_eq!(report["application"]["alerts"], 1);
    let started = Instant::now();
    while !flag.exists() && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let said = std::fs::read_to_string(&flag).unwrap();
    assert_eq!(said.lines().count(), 1, "once: {said}");
    let numbers: Vec<u64> = said
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(numbers[1], 512 * MIB);
    assert!(numbers[0] as f64 >= 0.4 * (512 * MIB) as f64, "{said}");
}

#[test]
fn the_nvml_per_process_path_reads_the_watched_process_and_finds_its_leak_by_time() {
    let dir = tempfile::tempdir().unwrap();
    // A process of the machine, its GPU memory scripted in the fake NVML: it climbs
    // 512 MiB a second; another process holds a flat 2 GiB beside it.
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = sleeper.id();
    let timeline: Vec<Value> = (0..20)
        .map(|s| serde_json::json!([s, (1024 + 512 * s) * MIB]))
        .collect();
    let env = nvidia_node(
        dir.path(),
        serde_json::json!([
            {"pid": pid, "bytes": 1073741824u64, "name": "train.py", "timeline": timeline},
            {"pid": 777001, "bytes": 2147483648u64, "name": "Xorg", "kind": "graphics"},
        ]),
    );
    let mut cmd = common::kiln();
    cmd.envs(env.iter().map(|(k, v)| (k, v)))
        .args(["watch", "--out"])
        .arg(dir.path().join("run"))
        .args(["--pid", &pid.to_string()]);
    let child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(11));
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    let out = child.wait_with_output().unwrap();
    let (code, report, stderr) = finished(dir.path(), &out);
    assert_eq!(code, 3, "{stderr}");
    let app = &report["application"];
    assert_eq!(app["memory_source"], "driver");
    assert_eq!(app["attached"], true);
    assert_eq!(app["iterations_from"], "none");
    assert_eq!(app["diagnosis"], "leak");
    let leak = finding(&report, "APP_MEMORY_LEAK");
    let per_minute = leak["evidence"]["bytes_per_minute"].as_f64().unwrap();
    assert!(
        (20.0 * 1024.0 * MIB as f64..40.0 * 1024.0 * MIB as f64).contains(&per_minute),
        "{per_minute}"
    );
    assert!(
        leak["summary"].as_str().unwrap().contains("a minute"),
        "{leak}"
    );
    // The other process is on the timeline, not the application's.
    let timeline = app["timeline"].as_array().unwrap();
    assert!(
        timeline
            .iter()
            .any(|p| p["pid"] == 777001 && p["watched"] == false)
    );
    assert!(
        timeline
            .iter()
            .any(|p| p["pid"] == pid && p["watched"] == true)
    );
    // Its neighbour is not a tenant of a test: the watch judges it by its own rule.
    assert!(!codes(&report).contains(&"OTHER_TENANTS".to_owned()));
}

#[test]
fn another_process_taking_memory_before_the_failure_is_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let mut env = nvidia_node(
        dir.path(),
        serde_json::json!([
            {"pid": 777002, "bytes": 0, "name": "render", "timeline": [[0.8, 42949672960u64]]},
        ]),
    );
    env.push((
        "KILN_EMULATE_VRAM_BYTES".into(),
        (512 * MIB).to_string().into(),
    ));
    let (code, report, stderr) = watch(
        dir.path(),
        &env,
        &["--iteration", "^step"],
        &["oom", "8", "700"],
    );
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(report["application"]["diagnosis"], "other_process");
    let f = finding(&report, "APP_OTHER_PROCESS");
    assert_eq!(f["evidence"]["processes"][0]["pid"], 777002);
    assert!(!codes(&report).contains(&"APP_OVER_MEMORY_LIMIT".to_owned()));
}

#[test]
fn pid_of_a_process_that_is_not_there_or_soon_gone_is_one_sentence() {
    // Not there: refused before anything is made.
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    common::usage_error_of_binary(
        &["watch", "--pid", &pid.to_string()],
        "no such process is running",
    );
    // Gone soon after: judged as a watch that saw nothing of it.
    let dir = tempfile::tempdir().unwrap();
    let mut short = Command::new("sleep").arg("1").spawn().unwrap();
    let out = common::kiln()
        .envs(plain().iter().map(|(k, v)| (k, v)))
        .args(["watch", "--interval", "100ms", "--out"])
        .arg(dir.path().join("run"))
        .args(["--pid", &short.id().to_string()])
        .output()
        .unwrap();
    short.wait().unwrap();
    let (code, report, stderr) = finished(dir.path(), &out);
    assert_eq!(code, 4, "{stderr}");
    assert_eq!(report["application"]["diagnosis"], "not_judged");
    let f = finding(&report, "APP_MEMORY_UNSEEN");
    assert!(
        f["summary"].as_str().unwrap().contains("could be read"),
        "{f}"
    );
    assert!(
        report["notes"]
            .to_string()
            .contains("kiln can load its layer only into an application it starts")
    );
}

#[test]
fn bad_flags_are_refused_with_one_sentence_before_anything_starts() {
    common::usage_error(&["watch"], "say what to watch");
    common::usage_error(
        &["watch", "--pid", "1", "--", "true"],
        "cannot be used with",
    );
    common::usage_error(
        &["watch", "--iteration", "(", "--", "true"],
        "is not a regular expression",
    );
    common::usage_error(&["watch", "--on-alert", "true", "--", "true"], "--alert");
    common::usage_error(&["watch", "--alert", "150%", "--", "true"], "percentage");
    common::usage_error(
        &["watch", "--pid", "1", "--iteration", "step"],
        "--iteration reads the application's output",
    );
    // Refused when kiln starts it: through the binary.
    common::usage_error_of_binary(
        &["watch", "--", "kiln-no-such-program-anywhere"],
        "no such program",
    );
    common::usage_error(&["watch", "--interval", "0", "--", "true"], "--interval");
}

#[test]
fn what_the_watch_costs_is_a_ratio_measured_in_one_run() {
    let out = common::kiln()
        .envs(plain().iter().map(|(k, v)| (k, v)))
        .env("KILN_TRACE_LAYER", common::trace_layer())
        .args(["bench", "watch", "--runs", "3", "--json", "--"])
        .arg(common::test_app())
        .args(["churn", "3000"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let b: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(b["plain_s"].as_array().unwrap().len(), 3);
    assert_eq!(b["watched_s"].as_array().unwrap().len(), 3);
    let ratio = b["ratio"].as_f64().unwrap();
    assert!(ratio > 0.0 && ratio.is_finite(), "{b}");
    // Every allocation and free of every watched run was traced, none lost.
    assert!(b["traced_records"].as_u64().unwrap() >= 3 * 2 * 3000, "{b}");
    // A command that fails cannot be timed; a command given to another benchmark is refused.
    let failing = common::kiln()
        .env("KILN_TRACE_LAYER", common::trace_layer())
        .args(["bench", "watch", "--runs", "1", "--", "false"])
        .output()
        .unwrap();
    assert_eq!(
        failing.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&failing.stderr)
    );
    common::usage_error(&["bench", "watch"], "needs a command after `--`");
    common::usage_error(
        &["bench", "vram", "--", "true"],
        "a command applies to `kiln bench watch`",
    );
}

/// A fixture machine with one amdgpu card at `bdf`, for `KILN_SYSTEM_ROOT`.
fn amd_machine(bdf: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("sys/bus/pci/devices").join(bdf);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("class"), "0x030000\n").unwrap();
    std::fs::write(dir.join("vendor"), "0x1002\n").unwrap();
    std::fs::write(dir.join("device"), "0x74a1\n").unwrap();
    let driver = root.path().join("sys/bus/pci/drivers/amdgpu");
    std::fs::create_dir_all(&driver).unwrap();
    std::os::unix::fs::symlink(&driver, dir.join("driver")).unwrap();
    root
}

/// A process of the fixture machine holding `vram_mib` of the card at `bdf` through one
/// DRM file (rewritten in place as the test goes on).
fn drm_process(root: &Path, pid: u32, comm: &str, bdf: &str, vram_mib: u64) {
    let dir = root.join("proc").join(pid.to_string());
    std::fs::create_dir_all(dir.join("fd")).unwrap();
    std::fs::create_dir_all(dir.join("fdinfo")).unwrap();
    // Written once: the process table's entries never change under a reader.
    if !dir.join("stat").exists() {
        let stat = format!("{pid} ({comm}) S 1 {pid} {pid} 0 -1 0");
        std::fs::write(dir.join("stat"), stat).unwrap();
        std::fs::write(dir.join("comm"), format!("{comm}\n")).unwrap();
    }
    let link = dir.join("fd/3");
    if link.symlink_metadata().is_err() {
        std::os::unix::fs::symlink("/dev/dri/renderD128", &link).unwrap();
    }
    let info = format!(
        "pos:\t0\nflags:\t02100002\ndrm-driver:\tamdgpu\ndrm-pdev:\t{bdf}\ndrm-client-id:\t{pid}\ndrm-memory-vram:\t{} KiB\ndrm-memory-gtt:\t2048 KiB\n",
        vram_mib * 1024
    );
    // Written aside and renamed: the watch never reads half a file.
    let temp = dir.join("fdinfo/.3");
    std::fs::write(&temp, info).unwrap();
    std::fs::rename(&temp, dir.join("fdinfo/3")).unwrap();
}

#[test]
fn an_amdgpu_card_s_processes_are_read_from_drm_fdinfo_and_a_climb_is_a_leak() {
    let bdf = "0000:03:00.0";
    let machine = amd_machine(bdf);
    let root = machine.path();
    let (app, neighbour) = (424_242, 424_243);
    drm_process(root, app, "blender", bdf, 2048);
    drm_process(root, neighbour, "Xorg", bdf, 300);
    let dir = tempfile::tempdir().unwrap();
    let mut env = common::emulated_env("amd", "small", &dir.path().join("layer.log"));
    env.push(("KILN_EMULATE_PCI_ADDRESS".into(), bdf.into()));
    env.push(("KILN_SYSTEM_ROOT".into(), root.into()));
    let child = common::kiln()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .args(["watch", "--out"])
        .arg(dir.path().join("run"))
        .args(["--pid", &app.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The application's VRAM climbs 96 MiB every half second; its neighbour's holds.
    for k in 1..=24u64 {
        std::thread::sleep(Duration::from_millis(500));
        drm_process(root, app, "blender", bdf, 2048 + 96 * k);
    }
    // It ends: its entry leaves the process table.
    std::fs::remove_dir_all(root.join("proc").join(app.to_string())).unwrap();
    let out = child.wait_with_output().unwrap();
    let (code, report, stderr) = finished(dir.path(), &out);
    let app_report = &report["application"];
    assert_eq!(code, 3, "{stderr}\n{}", app_report["baselines"]);
    assert_eq!(app_report["memory_source"], "driver");
    assert_eq!(app_report["diagnosis"], "leak");
    let leak = finding(&report, "APP_MEMORY_LEAK");
    let per_minute = leak["evidence"]["bytes_per_minute"].as_f64().unwrap() / MIB as f64;
    assert!(
        (8000.0..15000.0).contains(&per_minute),
        "{per_minute} MiB a minute"
    );
    let timeline = app_report["timeline"].as_array().unwrap();
    let xorg = timeline.iter().find(|p| p["pid"] == neighbour).unwrap();
    assert_eq!(xorg["name"], "Xorg");
    assert_eq!(xorg["points"][0][1].as_f64().unwrap(), (300 * MIB) as f64);
    assert!(app_report["peak_bytes"].as_u64().unwrap() >= 3500 * MIB);
}

#[test]
fn a_signal_ends_the_application_kiln_started_and_the_watch_says_it_was_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let env = card(dir.path(), 1024, &[]);
    let child = watching(dir.path(), &env, &["steady", "200", "100"], 3);
    kill(child.id(), "-TERM");
    let out = child.wait_with_output().unwrap();
    let (code, report, stderr) = finished(dir.path(), &out);
    assert_eq!(code, 4, "{stderr}");
    assert_eq!(report["interrupted"], true);
    // kiln asked the application to stop, and it did: its end is evidence too.
    assert_eq!(report["application"]["signal"], 15);
    let f = finding(&report, "RUN_INTERRUPTED");
    assert!(
        f["summary"]
            .as_str()
            .unwrap()
            .contains("interrupted the watch"),
        "{f}"
    );
}

/// True while the process `pid` runs: there, and not a zombie (a killed process whose
/// parent is gone waits for the machine's init to reap it, which a container's may never).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
        !state.is_some_and(|s| s.starts_with('Z') || s.starts_with('X'))
    })
}

/// Waits (boundedly) until the run's events hold `kind`.
fn wait_for_event(run: &Path, kind: &str) {
    let started = Instant::now();
    let tag = format!("\"kind\":\"{kind}\"");
    while !std::fs::read_to_string(run.join("events.jsonl")).is_ok_and(|t| t.contains(&tag)) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no {kind} event"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `kiln watch` in the background of the test application run by a shell that ignores
/// SIGTERM (`trap '' TERM`, which the application it becomes and the `sleep` it leaves
/// beside it inherit), once 3 iterations ran: kiln, the application's pid, the sleep's.
fn watching_a_stubborn_application(dir: &Path) -> (std::process::Child, u32, u32) {
    let pid_file = dir.join("sleep.pid");
    let script = "trap '' TERM; sleep 60 & echo $! > \"$1\"; exec \"$2\" steady 300 100";
    let app = common::test_app();
    let args: Vec<&std::ffi::OsStr> = vec![
        "-c".as_ref(),
        script.as_ref(),
        "sh".as_ref(),
        pid_file.as_os_str(),
        app.as_os_str(),
    ];
    let child = watch_program(
        dir,
        &plain(),
        &["--iteration", "^step"],
        "sh".as_ref(),
        &args,
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let run = dir.join("run");
    wait_for_iterations(&run, 3, Duration::from_secs(30));
    let sleep: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let app = app_pid(&run);
    assert!(running(app) && running(sleep));
    (child, app, sleep)
}

/// An application kiln started that ignores the request to stop is killed, with the
/// process it started, once kiln's grace has run out (never before), and the summary and
/// the report say so: it ended by signal 9 after SIGTERM went unheeded for the grace.
#[test]
fn an_application_that_ignores_the_request_to_stop_is_killed_with_its_children_after_the_grace() {
    use kiln::cmd::watch::stop::STOP_GRACE;
    let dir = tempfile::tempdir().unwrap();
    let (child, app, sleep) = watching_a_stubborn_application(dir.path());
    let asked = Instant::now();
    kill(child.id(), "-TERM");
    let out = child.wait_with_output().unwrap();
    let took = asked.elapsed();
    assert!(
        took >= STOP_GRACE && took < STOP_GRACE + Duration::from_secs(10),
        "{took:?}"
    );
    assert!(!running(app), "the application was left running");
    assert!(!running(sleep), "its child was left running");
    let (code, report, stderr) = finished(dir.path(), &out);
    assert_eq!(code, 4, "{stderr}");
    assert_eq!(report["interrupted"], true);
    let application = &report["application"];
    assert_eq!(application["signal"], 9);
    let killed = &application["killed"];
    let unheeded_ms = killed["unheeded_ms"].as_f64().unwrap();
    assert!(unheeded_ms >= STOP_GRACE.as_secs_f64() * 1e3, "{killed}");
    assert_eq!(killed.get("at_second_signal"), None, "{killed}");
    let pids: Vec<u64> = killed["pids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_u64().unwrap())
        .collect();
    assert_eq!(pids, [u64::from(app), u64::from(sleep)]);
    // Killed by kiln at an interrupt: not the application's own failure.
    assert!(!codes(&report).contains(&"APP_EXIT".to_owned()));
    assert!(
        stderr.contains("ended by signal 9")
            && stderr.contains("stopped: it ignored kiln's request to stop (SIGTERM) for 5.")
            && stderr
                .contains("kiln's grace, and kiln killed it and 1 other process of it (SIGKILL)"),
        "{stderr}"
    );
    // The evidence holds it: a rebuilt verdict says the same.
    let run = dir.path().join("run");
    common::validate_report(&run.join("report.json"));
    let again = common::verdict(&run, &[]);
    let rebuilt: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(rebuilt["application"]["killed"], *killed);
}

/// A second signal does not wait for the grace: what kiln started is killed at once.
#[test]
fn a_second_signal_kills_an_application_that_ignores_the_request_to_stop_at_once() {
    use kiln::cmd::watch::stop::STOP_GRACE;
    let dir = tempfile::tempdir().unwrap();
    let (child, app, sleep) = watching_a_stubborn_application(dir.path());
    let asked = Instant::now();
    kill(child.id(), "-TERM");
    wait_for_event(&dir.path().join("run"), "interrupted");
    kill(child.id(), "-INT");
    let out = child.wait_with_output().unwrap();
    assert!(asked.elapsed() < STOP_GRACE, "{:?}", asked.elapsed());
    assert!(!running(app) && !running(sleep));
    let (code, report, stderr) = finished(dir.path(), &out);
    assert_eq!(code, 4, "{stderr}");
    assert_eq!(report["application"]["signal"], 9);
    let killed = &report["application"]["killed"];
    assert_eq!(killed["at_second_signal"], true, "{killed}");
    assert_eq!(killed["pids"].as_array().unwrap().len(), 2, "{killed}");
    assert!(stderr.contains("until a second signal"), "{stderr}");
}

/// The near miss: a process the watch attached to with `--pid`, which would ignore SIGTERM,
/// is never kiln's to stop: a signal ends the watch at once and leaves it running.
#[test]
fn a_signal_ends_a_watch_by_pid_and_leaves_the_process_running_even_one_that_ignores_sigterm() {
    use kiln::cmd::watch::stop::STOP_GRACE;
    let dir = tempfile::tempdir().unwrap();
    let mut stubborn = Command::new("sh")
        .args(["-c", "trap '' TERM; exec sleep 60"])
        .spawn()
        .unwrap();
    let pid = stubborn.id();
    // Its trap is set once the shell has become `sleep`.
    let started = Instant::now();
    while std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default() != "sleep\n" {
        assert!(started.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(10));
    }
    let kiln = common::kiln()
        .envs(plain().iter().map(|(k, v)| (k, v)))
        .args(["watch", "--interval", "100ms", "--out"])
        .arg(dir.path().join("run"))
        .args(["--pid", &pid.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_event(&dir.path().join("run"), "app_start");
    let asked = Instant::now();
    kill(kiln.id(), "-TERM");
    let out = kiln.wait_with_output().unwrap();
    assert!(asked.elapsed() < STOP_GRACE, "{:?}", asked.elapsed());
    let alive = running(pid);
    stubborn.kill().unwrap();
    stubborn.wait().unwrap();
    assert!(alive, "kiln ended a process it only watched");
    let (code, report, stderr) = finished(dir.path(), &out);
    assert_eq!(code, 4, "{stderr}");
    assert_eq!(report["interrupted"], true);
    let application = &report["application"];
    assert_eq!(application["attached"], true);
    assert_eq!(application["ended_ms"], Value::Null);
    assert_eq!(application.get("killed"), None, "{application}");
    assert!(
        stderr.contains("still running when the watch stopped"),
        "{stderr}"
    );
}

#[test]
fn a_damaged_trace_is_said_with_its_file_never_judged_as_no_trace() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, stderr) = watch(
        dir.path(),
        &plain(),
        &["--iteration", "^step"],
        &["leak", "10", "250", "8"],
    );
    assert_eq!(code, 3, "{stderr}");
    let run = dir.path().join("run");
    // A line of the drained trace that is not a record: the file and line, exit 64.
    let trace = run.join("trace.jsonl");
    let mut text = std::fs::read_to_string(&trace).unwrap();
    text.insert_str(0, "garbage\n");
    std::fs::write(&trace, text).unwrap();
    let out = common::verdict(&run, &[]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{said}");
    assert!(said.contains("trace.jsonl, line 1"), "{said}");
    assert_eq!(said.trim().lines().count(), 1, "{said}");
    // A ring left behind that is not a ring: named, exit 64.
    std::fs::write(&trace, "").unwrap();
    std::fs::write(run.join("trace.ring"), vec![7u8; 8192]).unwrap();
    let out = common::verdict(&run, &[]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{said}");
    assert!(
        said.contains("trace.ring") && said.contains("not a kiln trace ring"),
        "{said}"
    );
    // The trace gone where the manifest lists it: evidence missing, never a pass.
    std::fs::remove_file(run.join("trace.ring")).unwrap();
    std::fs::remove_file(&trace).unwrap();
    let out = common::verdict(&run, &[]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        codes(&report).contains(&"EVIDENCE_MISSING".to_owned()),
        "{:?}",
        codes(&report)
    );
}

/// A C++ application of `tests/apps/teardown` (`name.cpp`), built with g++ into `dir`
/// with `libs`.
fn cpp_app(dir: &Path, name: &str, libs: &[&str]) -> std::path::PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/apps/teardown")
        .join(format!("{name}.cpp"));
    let app = dir.join(name);
    let out = Command::new("g++")
        .args(["-O0", "-o"])
        .arg(&app)
        .arg(&source)
        .args(libs)
        .output()
        .expect("g++ (scripts/setup.sh --test installs it with the Vulkan headers)");
    assert!(out.status.success(), "g++: {}", common::stderr(&out));
    app
}

/// An engine that opens its Vulkan driver itself (VK_DRIVER_FILES read, the library
/// loaded, past the loader where kiln's layer lives) is not "not a Vulkan application":
/// the watch names the driver it loaded, the variable, and what to change, and judges
/// nothing it did not see.
#[test]
fn an_engine_that_opens_its_driver_itself_is_said_with_why_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let app = cpp_app(dir.path(), "direct_icd", &["-ldl"]);
    let out = watch_program(
        dir.path(),
        &plain(),
        &["--interval", "200ms"],
        app.as_os_str(),
        &["2".as_ref()],
    )
    .output()
    .unwrap();
    let (code, report, stderr) = finished(dir.path(), &out);
    assert_eq!(code, 4, "{stderr}");
    let app_report = &report["application"];
    assert_eq!(app_report["diagnosis"], "not_judged");
    let unseen = app_report["unseen"][0]["said"].as_str().unwrap();
    assert!(unseen.contains("without the Vulkan loader"), "{unseen}");
    assert!(unseen.contains("libvulkan_lvp.so"), "{unseen}");
    assert!(unseen.contains("VK_DRIVER_FILES="), "{unseen}");
    assert!(stderr.contains("not seen: no allocation trace"), "{stderr}");
    let f = finding(&report, "APP_MEMORY_UNSEEN");
    assert!(
        !f["action"].as_str().unwrap().contains("kiln watch -- CMD"),
        "{f}"
    );
}

/// A command that never used the GPU (`true`) is not judged, said so, and not told to be
/// started under kiln.
#[test]
fn a_command_that_never_used_the_gpu_is_not_judged_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = watch_program(dir.path(), &plain(), &[], "true".as_ref(), &[])
        .output()
        .unwrap();
    let (code, report, stderr) = finished(dir.path(), &out);
    assert_eq!(code, 4, "{stderr}");
    assert_eq!(report["application"]["diagnosis"], "not_judged");
    let f = finding(&report, "APP_MEMORY_UNSEEN");
    assert_eq!(f["action"], "watch an application while it uses the GPU");
    assert!(stderr.contains("did not use the GPU"), "{stderr}");
    // The CPU device stood in for a watch, said as a watch.
    assert!(stderr.contains("no GPU was watched"), "{stderr}");
    assert!(!stderr.contains("to prove the tool"), "{stderr}");
}

/// kiln's layer never changes what the application does. A C++ application that tears
/// its device down from a static object's destructor and from an atexit handler (after the
/// runtimes' thread-local state has gone, where the layer once panicked across the C
/// boundary and aborted the process), forks and uses Vulkan in the child, or allocates
/// from eight threads at once: with the layer it prints the same bytes and exits with the
/// same status as without it, and the layer traced it to its end (it was there, and it
/// never stopped).
#[test]
fn the_trace_layer_never_changes_what_the_application_does() {
    use kiln::cmd::watch::trace::Tracer;
    let dir = tempfile::tempdir().unwrap();
    let app = cpp_app(dir.path(), "teardown", &["-lvulkan", "-pthread"]);
    for (mode, status) in [("static", 5), ("atexit", 6), ("fork", 8), ("threads", 9)] {
        let run = |extra: &Env| {
            let mut cmd = Command::new(&app);
            for var in ["VK_INSTANCE_LAYERS", "VK_LAYER_PATH", "VK_ADD_LAYER_PATH"] {
                cmd.env_remove(var);
            }
            cmd.envs(plain()).envs(extra.iter().map(|(k, v)| (k, v)));
            cmd.arg(mode).output().unwrap()
        };
        let alone = run(&Vec::new());
        assert_eq!(
            alone.status.code(),
            Some(status),
            "{mode}: {}",
            common::stderr(&alone)
        );
        let traced_dir = dir.path().join(mode);
        std::fs::create_dir(&traced_dir).unwrap();
        let mut tracer = Tracer::start(&traced_dir, &common::trace_layer(), 0).unwrap();
        let traced = run(&tracer.env());
        assert_eq!(
            traced.status.code(),
            alone.status.code(),
            "{mode}: {}",
            common::stderr(&traced)
        );
        assert_eq!(common::stdout(&traced), common::stdout(&alone), "{mode}");
        assert_eq!(common::stderr(&traced), common::stderr(&alone), "{mode}");
        tracer.drain(true, 0.0);
        drop(tracer);
        let trace = std::fs::read_to_string(traced_dir.join("trace.jsonl")).unwrap();
        let kinds: Vec<String> = trace
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["kind"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned()
            })
            .collect();
        assert!(
            kinds.iter().any(|k| k == "alloc"),
            "{mode}: the layer traced it: {kinds:?}"
        );
        assert!(
            !kinds.iter().any(|k| k == "stopped"),
            "{mode}: the layer never stopped"
        );
        // Every allocation was freed: the exit-time teardown went through the layer.
        let count = |kind: &str| kinds.iter().filter(|k| *k == kind).count();
        assert_eq!(count("alloc"), count("free"), "{mode}: {kinds:?}");
    }
}

/// Python with a third-party engine's bindings (`module`, from PyPI, installed by
/// `scripts/setup.sh --test` into the test environment).
fn engine_python(module: &str) -> std::path::PathBuf {
    let venv = std::env::var_os("KILN_TEST_VENV").map_or_else(
        || std::path::PathBuf::from("/opt/kiln-test-venv"),
        std::path::PathBuf::from,
    );
    let python = venv.join("bin/python");
    let ok = Command::new(&python)
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{} has no {module}: scripts/setup.sh --test installs it",
        python.display()
    );
    python
}

/// Watches a third-party engine's job (`mode`, steps, buffer MiB) as a user would, its
/// steps marked by its own output, and holds its exit code, diagnosis and the trace as the
/// memory's source; returns its report.
fn watch_engine_job(
    python: &Path,
    job: &Path,
    (mode, steps, mib): (&str, &str, &str),
    exit: i32,
    diagnosis: &str,
) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let out = watch_program(
        dir.path(),
        &plain(),
        &["--iteration", "^step"],
        python.as_os_str(),
        &[job.as_os_str(), mode.as_ref(), steps.as_ref(), mib.as_ref()],
    )
    .output()
    .unwrap();
    let (code, report, stderr) = finished(dir.path(), &out);
    let app = &report["application"];
    assert_eq!(app["diagnosis"], diagnosis, "{mode} {steps}: {stderr}");
    assert_eq!(code, exit, "{mode} {steps}: {stderr}");
    assert_eq!(app["memory_source"], "trace", "{mode}");
    report
}

/// A third-party engine, watched as a user would: wgpu's Python bindings running compute
/// on lavapipe, through the loader and kiln's layer. wgpu pools its memory in blocks of its
/// own (gpu-alloc), so the trace sees its blocks, not its buffers. The expected diagnoses,
/// written before the first run: a job that keeps every step's 8 MiB buffer leaks; one that
/// destroys them is healthy; one that asks for a 64 GiB buffer is over the limit, refused
/// by wgpu's own check before the driver saw it. The leaking job runs 48 steps: its 64 MiB
/// blocks then step up three times, where over 30 they stepped twice, and under load the
/// two steps could fall inside the first and the last third of the iterations alike, a
/// floor that no longer rose from third to third (judged healthy, rightly short of a
/// call).
#[test]
fn a_webgpu_engine_s_leak_steady_job_and_refused_request_are_told_apart() {
    let python = engine_python("wgpu");
    let job = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps/wgpu/job.py");
    let cases: [(&str, &str, i32, &str); 3] = [
        ("leak", "48", 3, "leak"),
        ("steady", "12", 4, "healthy"),
        ("too-big", "10", 3, "over_the_limit"),
    ];
    for (mode, steps, exit, diagnosis) in cases {
        let report = watch_engine_job(&python, &job, (mode, steps, "8"), exit, diagnosis);
        if mode == "too-big" {
            let f = finding(&report, "APP_OVER_MEMORY_LIMIT");
            let summary = f["summary"].as_str().unwrap();
            assert!(summary.contains("wgpu's own check refused it"), "{summary}");
            assert!(summary.contains("64.00 GiB"), "{summary}");
        }
    }
}

/// A third-party engine kiln has no words for, watched as a user would: Taichi's Vulkan
/// backend on lavapipe, through the loader and kiln's layer. Taichi's allocator places its
/// arrays in blocks of up to 256 MiB, so the driver sees its blocks, and the layer's
/// records of its buffers say what it keeps. The expected diagnoses, written before the
/// first run: a job that keeps every step's 32 MiB array leaks, said in its 32 MiB buffers
/// first and its allocator's blocks after; one that drops them is healthy; one that asks
/// for an array of 2^34 elements (at least 16 GiB, on a card of a few) is over the limit,
/// refused by Taichi's own check before any driver call, in words kiln has no pattern for;
/// and a job of two steps, its memory taken at once, is too short to judge, never
/// healthy.
#[test]
fn an_engine_kiln_has_no_words_for_is_judged_by_its_sizes_and_its_own_buffers() {
    let python = engine_python("taichi");
    let job = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps/taichi/job.py");
    let cases: [(&str, &str, i32, &str); 4] = [
        ("leak", "24", 3, "leak"),
        ("steady", "12", 4, "healthy"),
        ("too-big", "8", 3, "over_the_limit"),
        ("steady", "2", 4, "not_judged"),
    ];
    for (mode, steps, exit, diagnosis) in cases {
        let report = watch_engine_job(&python, &job, (mode, steps, "32"), exit, diagnosis);
        if mode == "leak" {
            let f = finding(&report, "APP_MEMORY_LEAK");
            let summary = f["summary"].as_str().unwrap();
            assert!(
                summary.contains("the application keeps 32 MiB buffers"),
                "{summary}"
            );
            assert!(
                summary.contains("which its allocator places in blocks of"),
                "{summary}"
            );
        }
        if mode == "too-big" {
            let f = finding(&report, "APP_OVER_MEMORY_LIMIT");
            let summary = f["summary"].as_str().unwrap();
            assert!(
                summary.contains("its framework's own check refused it"),
                "{summary}"
            );
            assert!(summary.contains("at least 16.00 GiB"), "{summary}");
        }
    }
}
