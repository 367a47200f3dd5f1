//! kiln.exe, the Windows build, under Wine on lavapipe: the commands that can run there do
//! what the Linux binary does, and say what a Windows machine has (its host facts from the
//! registry, its event log, nvml.dll). Run by `scripts/windows-test.sh`, which cross-builds
//! kiln.exe and prepares Wine (`KILN_WINE_EXE`, `WINEPREFIX`, `DISPLAY`, `VK_DRIVER_FILES`):
//! ignored in a plain `cargo test`, which has no kiln.exe to run.
//!
//! Under Wine the Linux paths reach kiln.exe through drive `Z:`, so this proves the Vulkan
//! work, the processes, the evidence and the Windows API paths kiln takes, not what a real
//! Windows machine's registry and event log hold (the unit tests read recorded ones).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{finding_codes, read_json, stderr, stdout};

/// The Windows build, as the script built it.
fn exe() -> PathBuf {
    PathBuf::from(
        std::env::var_os("KILN_WINE_EXE")
            .expect("KILN_WINE_EXE names kiln.exe (scripts/windows-test.sh sets it)"),
    )
}

/// `kiln.exe ARGS` under Wine, with its console output.
fn kiln_exe(args: &[&str]) -> Output {
    Command::new("wine")
        .arg(exe())
        .args(args)
        .env("WINEDEBUG", "-all")
        .output()
        .expect("wine runs")
}

/// A Linux path as kiln.exe names it under Wine (`Z:\tmp\...`).
fn windows_path(p: &Path) -> String {
    format!("Z:{}", p.display()).replace('/', "\\")
}

/// The short run of the Linux suite's `quick_run` on the CPU device: 16 MiB of VRAM, one
/// pass, PCIe up to 1 MiB (left out where `--workloads` names a run without PCIe).
const SHORT: [&str; 9] = [
    "run",
    "--device",
    "cpu",
    "--vram-bytes",
    "16MiB",
    "--algorithms",
    "own-address",
    "--passes",
    "1",
];

/// [`SHORT`] by kiln.exe, plus `extra`, into `out`.
fn short_run(extra: &[&str], out: &Path) -> Output {
    let out = windows_path(out);
    let mut args = SHORT.to_vec();
    if !extra.contains(&"--workloads") {
        args.extend(["--pcie-max-bytes", "1MiB"]);
    }
    args.extend(extra);
    args.extend(["--out", &out]);
    kiln_exe(&args)
}

/// The same run by the Linux binary, for comparison.
fn linux_run(out: &Path) -> Output {
    common::kiln()
        .args(SHORT)
        .args(["--pcie-max-bytes", "1MiB", "--out"])
        .arg(out)
        .output()
        .unwrap()
}

/// Every key path of a JSON value (`devices[].findings[].code`), the shape of a report.
fn shape(value: &serde_json::Value, at: &str, out: &mut std::collections::BTreeSet<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                let path = format!("{at}.{k}");
                out.insert(path.clone());
                shape(v, &path, out);
            }
        }
        serde_json::Value::Array(items) => {
            for v in items {
                shape(v, &format!("{at}[]"), out);
            }
        }
        _ => {}
    }
}

#[test]
#[ignore = "run by scripts/windows-test.sh under Wine"]
fn list_names_the_cpu_device_and_what_windows_lacks() {
    let out = kiln_exe(&["list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("llvmpipe"), "{text}");
    assert!(text.contains("(CPU device)"), "{text}");
    // NVML is looked for as Windows has it.
    assert!(text.contains("nvml.dll not found"), "{text}");
}

#[test]
#[ignore = "run by scripts/windows-test.sh under Wine"]
fn selftest_finds_every_planted_fault() {
    let out = kiln_exe(&["selftest"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("every one found exactly, nothing else reported"),
        "{text}"
    );
}

#[test]
#[ignore = "run by scripts/windows-test.sh under Wine"]
fn a_run_on_the_cpu_device_passes_with_the_linux_reports_shape() {
    let dir = tempfile::tempdir().unwrap();
    let (windows, linux) = (dir.path().join("windows"), dir.path().join("linux"));
    let out = short_run(&[], &windows);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("result: PASS (exit 0)"),
        "{}",
        stdout(&out)
    );
    let out = linux_run(&linux);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for file in [
        "manifest.json",
        "events.jsonl",
        "telemetry.jsonl",
        "report.json",
        "report.html",
        "junit.xml",
        "kiln.prom",
    ] {
        assert!(windows.join(file).is_file(), "{file} written");
    }
    let (w, l) = (
        read_json(&windows.join("report.json")),
        read_json(&linux.join("report.json")),
    );
    common::validate_report(&windows.join("report.json"));
    let (mut ws, mut ls) = (Default::default(), Default::default());
    shape(&w, "", &mut ws);
    shape(&l, "", &mut ls);
    // The fields a reader relies on are the same (facts of the host may differ: Windows
    // reports no kernel version, Linux no OS build).
    let missing: Vec<&String> = ls
        .difference(&ws)
        .filter(|k| !k.starts_with(".setup.host") && !k.contains(".notes"))
        .collect();
    assert!(missing.is_empty(), "kiln.exe's report lacks {missing:?}");
    assert_eq!(w["result"], l["result"]);
    // What a Windows machine says of itself, read through the registry and the kernel.
    let manifest = read_json(&windows.join("manifest.json"));
    let host = &manifest["host_info"];
    assert!(
        host["os"]
            .as_str()
            .is_some_and(|os| os.contains("Windows") && os.contains("(build ")),
        "{host}"
    );
    assert!(
        host["kernel"]
            .as_str()
            .is_some_and(|k| k.starts_with("Windows NT ")),
        "{host}"
    );
    assert!(
        host["memory_bytes"].as_u64().is_some_and(|m| m > 0),
        "{host}"
    );
    // Its log is the System event log, said as unreadable where it cannot be read (Wine
    // has no event log service), never as a log with nothing in it.
    let telemetry = std::fs::read_to_string(windows.join("telemetry.jsonl")).unwrap();
    assert!(
        telemetry.contains("the System event log could not be read"),
        "{telemetry}"
    );
    assert_eq!(
        finding_codes(&w["devices"][0]),
        finding_codes(&l["devices"][0])
    );
}

#[test]
#[ignore = "run by scripts/windows-test.sh under Wine"]
fn a_planted_stuck_bit_is_found_located_and_classified_and_rebuilt_alike() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("stuck");
    let out = short_run(&["--workloads", "vram", "--test-stuck-word", "4099"], &run);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = read_json(&run.join("report.json"));
    let device = &report["devices"][0];
    assert!(
        finding_codes(device).contains(&"VRAM_STUCK_BIT"),
        "{:?}",
        finding_codes(device)
    );
    let stuck = common::findings_of(device, "VRAM_STUCK_BIT")[0];
    assert_eq!(stuck["class"], "hardware");
    // Located: word 4099 is byte offset 16396.
    assert_eq!(stuck["evidence"]["first_offsets"][0], 4099 * 4, "{stuck}");
    // `kiln verdict` and `kiln report` on the evidence alone, by kiln.exe.
    let out = kiln_exe(&["verdict", "--json", &windows_path(&run)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let rebuilt: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(finding_codes(&rebuilt["devices"][0]), finding_codes(device));
    std::fs::remove_file(run.join("report.html")).unwrap();
    let out = kiln_exe(&["report", &windows_path(&run)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(html.contains("VRAM_STUCK_BIT"));
}

#[test]
#[ignore = "run by scripts/windows-test.sh under Wine"]
fn the_quick_check_with_no_gpu_says_so_and_exits_4() {
    let dir = tempfile::tempdir().unwrap();
    // The short run with no device named: every GPU, and there is none.
    let out_dir = windows_path(&dir.path().join("quick"));
    let mut args: Vec<&str> = SHORT
        .iter()
        .copied()
        .filter(|a| !["--device", "cpu"].contains(a))
        .collect();
    args.extend(["--pcie-max-bytes", "1MiB", "--out", &out_dir]);
    let out = kiln_exe(&args);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("no GPU was tested"),
        "{}",
        stdout(&out)
    );
}

#[test]
#[ignore = "run by scripts/windows-test.sh under Wine"]
fn bad_input_gets_one_sentence_and_exit_64() {
    let out = kiln_exe(&["run", "--vram-bytes", "12parsecs"]);
    assert_eq!(out.status.code(), Some(64));
    let text = stderr(&out);
    assert!(text.starts_with("kiln: "), "{text}");
    assert!(text.contains("unknown size unit"), "{text}");
    let out = kiln_exe(&["verdict", "Z:\\no\\such\\run"]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
}

#[test]
#[ignore = "run by scripts/windows-test.sh under Wine"]
fn double_clicked_kiln_exe_checks_says_it_plainly_and_waits_for_enter() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("clicked");
    let mut child = Command::new("wine")
        .arg(exe())
        .env("WINEDEBUG", "-all")
        .env("KILN_TEST_DOUBLE_CLICKED", "1")
        .env(
            "KILN_TEST_DOUBLE_CLICK_ARGS",
            format!(
                "--vram-bytes 16MiB --algorithms own-address --passes 1 --pcie-max-bytes 1MiB --out {}",
                windows_path(&run)
            ),
        )
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"\r\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("NO GPU TESTED: kiln found no graphics card"),
        "{text}"
    );
    assert!(text.contains("Press Enter to close this window"), "{text}");
    assert!(
        text.contains(&format!(
            "The full report: {}",
            windows_path(&run.join("report.html"))
        )),
        "{text}"
    );
    assert!(run.join("report.html").is_file());
}

/// Starts a long run of kiln.exe under Wine into `run`, and waits until its VRAM test runs.
fn long_run(run: &Path) -> std::process::Child {
    let child = Command::new("wine")
        .arg(exe())
        .args([
            "run",
            "--device",
            "cpu",
            "--workloads",
            "vram",
            "--vram-bytes",
            "64MiB",
            "--algorithms",
            "own-address",
            "--duration",
            "120s",
            "--out",
            &windows_path(run),
        ])
        .env("WINEDEBUG", "-all")
        // Marks this run's processes, its workers too, among the other tests' runs.
        .env("KILN_WINE_TEST_RUN", run)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !std::fs::read_to_string(run.join("events.jsonl"))
        .is_ok_and(|e| e.contains("\"kind\":\"workload_start\""))
    {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the run never started its test"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    child
}

/// The (Linux) pids of the device workers of the run into `run` still running: Wine runs
/// each Windows process as a Linux one, with the environment it was given.
fn workers(run: &Path) -> Vec<u32> {
    let mark = format!("KILN_WINE_TEST_RUN={}", run.display());
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let read = |f: &str| std::fs::read(entry.path().join(f)).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&read("cmdline")).replace('\0', " ");
        let environ = read("environ");
        let marked = environ.split(|&b| b == 0).any(|v| v == mark.as_bytes());
        if marked && cmdline.contains("__kiln-device-worker") {
            out.push(pid);
        }
    }
    out
}

#[test]
#[ignore = "run by scripts/windows-test.sh under Wine"]
fn ctrl_c_interrupts_with_the_evidence_kept_and_no_worker_outlives_kiln() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("interrupted");
    let child = long_run(&run);
    // Wine turns SIGINT into the console's Ctrl+C, as a person pressing it would.
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stdout(&out));
    assert!(stdout(&out).contains("RUN_INTERRUPTED"), "{}", stdout(&out));
    let report = read_json(&run.join("report.json"));
    assert!(report["interrupted"].as_bool().unwrap_or(false));
    // kiln killed outright: its worker ends with it (a Job object on Windows).
    let killed = dir.path().join("killed");
    let mut child = long_run(&killed);
    assert!(!workers(&killed).is_empty(), "a worker runs the test");
    let status = Command::new("kill")
        .args(["-KILL", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let _ = child.wait();
    let started = std::time::Instant::now();
    while !workers(&killed).is_empty() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "a worker outlived kiln: {:?}",
            workers(&killed)
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // What was recorded before the kill stands, and `kiln verdict` judges it.
    let out = kiln_exe(&["verdict", &windows_path(&killed)]);
    assert_eq!(out.status.code(), Some(4), "{}", stdout(&out));
}

#[test]
#[ignore = "run by scripts/windows-test.sh under Wine"]
fn kiln_watch_runs_a_windows_program_passes_its_output_and_sees_it_end() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("watched");
    let out = kiln_exe(&[
        "watch",
        "--out",
        &windows_path(&run),
        "--",
        "cmd",
        "/c",
        "echo step 1 & echo step 2 & exit 3",
    ]);
    // No GPU is watched here: the watch cannot judge (exit 4), and says what it saw.
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    // The program is found on PATH by PATHEXT (cmd.exe), and its output is its own.
    let text = stdout(&out);
    assert!(text.contains("step 1") && text.contains("step 2"), "{text}");
    let said = stderr(&out);
    assert!(said.contains("exited with 3"), "{said}");
    assert!(
        said.contains("kiln's trace layer is not built for Windows yet"),
        "{said}"
    );
    let report = read_json(&run.join("report.json"));
    assert_eq!(
        report["application"]["exit_code"], 3,
        "{}",
        report["application"]
    );
    // A program that is not there is refused before anything starts.
    let out = kiln_exe(&["watch", "--", "no-such-program-anywhere"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("no such program"), "{}", stderr(&out));
}
