//! Honest under signals, races and missing files: a signal in every phase of every
//! workload kind, and before any work, ends in an interrupted verdict that never passes;
//! two runs given one run directory at the same moment never share it; a worker that stops
//! answering is recorded one step timeout after its last progress.

use crate::common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::{expect_json, finding_codes, kiln, read_json, verdict, wait_for_event_text};
use serde_json::Value;

/// How the signal reaches kiln.
#[derive(Clone, Copy, Debug)]
enum Delivery {
    /// SIGTERM to kiln's own process, as a scheduler ends a job: the workers learn of it
    /// from kiln.
    TermToKiln,
    /// SIGINT to kiln's process group, as Ctrl+C at a terminal: the workers get it too.
    CtrlC,
}

impl Delivery {
    fn send(self, child: &Child) {
        let pid = child.id().to_string();
        let (signal, target) = match self {
            Delivery::TermToKiln => ("-TERM", pid),
            Delivery::CtrlC => ("-INT", format!("-{pid}")),
        };
        let status = std::process::Command::new("kill")
            .args([signal, "--", &target])
            .status()
            .unwrap();
        assert!(status.success(), "kill {signal} {target}");
    }
}

/// A run on the CPU device with a budget far longer than any case takes, in a process
/// group of its own (so that Ctrl+C reaches kiln and its workers, not the test).
fn start(run_dir: &Path, args: &[&str]) -> Child {
    kiln()
        .args(["run", "--device", "cpu", "--duration", "120s"])
        .args(args)
        .arg("--out")
        .arg(run_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap()
}

fn events(dir: &Path) -> Vec<Value> {
    common::jsonl(&dir.join("events.jsonl"))
}

/// The outcomes of workload `name` on the report's first device.
fn outcomes<'a>(report: &'a Value, name: &str) -> Vec<&'a Value> {
    report["devices"][0]["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["workload"] == name)
        .collect()
}

/// A signal at one moment of a run.
struct Case {
    /// Which phase it aims at.
    phase: &'static str,
    /// The run's workloads and their sizes.
    args: &'static [&'static str],
    /// The event texts that open the phase, each of which the run must have written before
    /// the signal goes: the condition the case means, not a time.
    opens: &'static [&'static str],
    /// How long after it opens the signal goes, where no event marks the moment meant (a
    /// round of the allocator torture, of PCIe's sustained traffic).
    after: Duration,
    delivery: Delivery,
    /// The workloads the signal must leave stopped early: incomplete, or not run where it
    /// came before they had tested anything, never passed.
    cut: &'static [&'static str],
    /// Proves from the evidence that the signal came in the phase it aimed at.
    landed: fn(&Value, &[Value]) -> Result<(), String>,
}

/// Sends the case's signal and checks what every interrupted run must give: exit 4 with
/// every report, `interrupted`, no device passed, the RUN_INTERRUPTED finding, each
/// workload it cut marked stopped on request, and the same verdict rebuilt.
fn interrupt(case: &Case) {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let mut child = start(&run_dir, case.args);
    for text in case.opens {
        wait_for_event_text(&run_dir, text);
    }
    std::thread::sleep(case.after);
    case.delivery.send(&child);
    let (code, took) = common::wait_with_limit(&mut child, Duration::from_secs(40));
    let what = format!("{} ({:?})", case.phase, case.delivery);
    eprintln!("{what}: the run ended {took:?} after the signal");
    assert_eq!(code, Some(4), "{what}: an interrupted run is never a pass");
    for file in ["report.json", "report.html", "junit.xml", "kiln.prom"] {
        assert!(run_dir.join(file).is_file(), "{what}: {file} missing");
    }
    let report = read_json(&run_dir.join("report.json"));
    let log = events(&run_dir);
    if let Err(e) = (case.landed)(&report, &log) {
        panic!("{what}: the signal did not land where it aimed: {e}");
    }
    assert_eq!(report["interrupted"], true, "{what}");
    assert_eq!(
        report["incomplete"], false,
        "{what}: the run ended in order"
    );
    let device = &report["devices"][0];
    assert_eq!(device["result"], "inconclusive", "{what}: {device}");
    assert!(
        finding_codes(device).contains(&"RUN_INTERRUPTED"),
        "{what}: {:?}",
        finding_codes(device)
    );
    for name in case.cut {
        let cut = outcomes(&report, name);
        assert!(!cut.is_empty(), "{what}: no outcome of {name}");
        for w in cut {
            assert!(
                w["status"] == "incomplete" || w["status"] == "not_run",
                "{what}: {w}"
            );
            assert!(
                w["summary"]["stopped_early"]
                    .as_str()
                    .is_some_and(|s| s.contains("stopped on request")),
                "{what}: {name} says it was stopped: {w}"
            );
        }
    }
    let rebuilt = expect_json(&verdict(&run_dir, &[]), 4);
    assert_eq!(rebuilt["devices"][0]["result"], "inconclusive", "{what}");
    assert_eq!(rebuilt["interrupted"], true, "{what}");
}

/// True when the device's RUN_INTERRUPTED finding says the signal came before any work.
fn says_nothing_was_tested(device: &Value) -> bool {
    common::findings_of(device, "RUN_INTERRUPTED")
        .iter()
        .any(|f| {
            f["summary"]
                .as_str()
                .is_some_and(|s| s.ends_with("nothing was tested"))
        })
}

fn check(ok: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(why()) }
}

fn summary<'a>(report: &'a Value, name: &str) -> &'a Value {
    &outcomes(report, name)[0]["summary"]
}

/// A VRAM test whose sweeps are long enough to be interrupted inside one.
const VRAM_SWEEPS: &[&str] = &[
    "--workloads",
    "vram",
    "--vram-bytes",
    "256MiB",
    "--algorithms",
    "own-address,moving-inversions",
];

#[test]
fn a_signal_in_any_phase_of_the_vram_test_leaves_it_stopped_early() {
    interrupt(&Case {
        phase: "a vram sweep",
        args: VRAM_SWEEPS,
        opens: &["\"kind\":\"step\""],
        after: Duration::ZERO,
        delivery: Delivery::CtrlC,
        cut: &["vram"],
        landed: |_, log| {
            check(
                log.iter()
                    .any(|e| e["kind"] == "step" && e["completed"] == false),
                || "no sweep was cut short".into(),
            )
        },
    });
    interrupt(&Case {
        phase: "a vram sweep after memory was verified once",
        args: VRAM_SWEEPS,
        opens: &["\"op\":\"verify\""],
        after: Duration::ZERO,
        delivery: Delivery::TermToKiln,
        cut: &["vram"],
        landed: |report, _| {
            let vram = outcomes(report, "vram")[0];
            check(vram["status"] == "incomplete", || {
                format!(
                    "the test had verified memory, so it ran in part: {}",
                    vram["status"]
                )
            })
        },
    });
    interrupt(&Case {
        phase: "the retention test's idle",
        args: &[
            "--workloads",
            "vram",
            "--vram-bytes",
            "32MiB",
            "--algorithms",
            "retention",
            // Within what the 120 s budget allows for two idle waits.
            "--retention-delay",
            "50s",
        ],
        // The write's step written: the idle follows at once.
        opens: &["\"op\":\"write\""],
        after: Duration::ZERO,
        delivery: Delivery::TermToKiln,
        cut: &["vram"],
        landed: |_, log| {
            check(
                !log.iter()
                    .any(|e| e["kind"] == "step" && e["op"] == "verify"),
                || "the idle ended before the signal".into(),
            )
        },
    });
}

#[test]
fn a_signal_during_compute_or_matrix_rounds_leaves_them_stopped_early() {
    // A stretch of rounds measured (its rates) means rounds ran.
    for (name, opens) in [
        (
            "compute",
            &[
                "\"kind\":\"workload_start\",\"workload\":\"compute\"",
                "\"kind\":\"rates\"",
            ],
        ),
        (
            "matrix",
            &[
                "\"kind\":\"workload_start\",\"workload\":\"matrix\"",
                "\"kind\":\"rates\"",
            ],
        ),
    ] {
        let args: &'static [&'static str] = if name == "compute" {
            &["--workloads", "compute"]
        } else {
            &["--workloads", "matrix"]
        };
        interrupt(&Case {
            phase: name,
            args,
            opens,
            after: Duration::ZERO,
            delivery: if name == "compute" {
                Delivery::TermToKiln
            } else {
                Delivery::CtrlC
            },
            cut: if name == "compute" {
                &["compute"]
            } else {
                &["matrix"]
            },
            landed: |report, _| {
                let name = report["devices"][0]["workloads"][0]["workload"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let kinds = summary(report, &name)["kinds"].as_array().cloned();
                check(
                    kinds.is_some_and(|k| k.iter().any(|k| k["rounds"].as_u64() > Some(0))),
                    || format!("no {name} round had run"),
                )
            },
        });
    }
}

#[test]
fn a_signal_in_the_pcie_sweep_or_its_sustained_phase_leaves_it_stopped_early() {
    interrupt(&Case {
        phase: "the PCIe size sweep",
        args: &["--workloads", "pcie", "--pcie-max-bytes", "256MiB"],
        opens: &["\"kind\":\"workload_start\",\"workload\":\"pcie\""],
        after: Duration::ZERO,
        delivery: Delivery::CtrlC,
        cut: &["pcie"],
        landed: |report, _| {
            let pcie = summary(report, "pcie");
            check(pcie["sustained"].is_null(), || {
                format!("the sweep had ended: {}", pcie["sustained"])
            })
        },
    });
    // The false pass this issue began with: a stop in the sustained phase.
    interrupt(&Case {
        phase: "PCIe's sustained traffic",
        args: &["--workloads", "pcie", "--pcie-max-bytes", "1MiB"],
        opens: &["\"kind\":\"workload_start\",\"workload\":\"pcie\""],
        after: Duration::from_secs(3),
        delivery: Delivery::TermToKiln,
        cut: &["pcie"],
        landed: |report, _| {
            let pcie = summary(report, "pcie");
            check(pcie["sustained"]["rounds"].as_u64() > Some(0), || {
                format!("no sustained round ran: {pcie}")
            })
        },
    });
}

#[test]
fn a_signal_during_the_allocator_torture_or_heat_leaves_them_stopped_early() {
    interrupt(&Case {
        phase: "the allocator torture",
        args: &["--workloads", "fragment"],
        opens: &["\"kind\":\"workload_start\",\"workload\":\"fragment\""],
        after: Duration::from_millis(1500),
        delivery: Delivery::CtrlC,
        cut: &["fragment"],
        landed: |report, _| {
            let rounds = summary(report, "fragment")["rounds"].as_u64();
            check(rounds > Some(0), || "no allocator round had run".into())
        },
    });
    interrupt(&Case {
        phase: "heat (vram and compute at once)",
        args: &["--workloads", "heat", "--vram-bytes", "64MiB"],
        // Both parts at work: the compute part's rounds measured, the VRAM part's sweeps
        // begun.
        opens: &[
            "\"kind\":\"workload_start\",\"workload\":\"compute\"",
            "\"kind\":\"workload_start\",\"workload\":\"vram\"",
            "\"kind\":\"step\",\"workload\":\"vram\"",
            "\"kind\":\"rates\"",
        ],
        after: Duration::ZERO,
        delivery: Delivery::TermToKiln,
        cut: &["vram", "compute"],
        landed: |report, _| {
            let parts: Vec<&Value> = report["devices"][0]["workloads"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|w| w["summary"]["together_with"] == "heat")
                .collect();
            check(parts.len() == 2, || {
                format!("{} parts ran inside heat", parts.len())
            })
        },
    });
}

#[test]
fn a_signal_between_workloads_or_in_the_preflight_never_passes() {
    interrupt(&Case {
        phase: "between two workloads",
        args: &[
            "--workloads",
            "vram,pcie",
            "--vram-bytes",
            "16MiB",
            "--algorithms",
            "own-address",
            "--passes",
            "1",
            "--pcie-max-bytes",
            "1MiB",
        ],
        opens: &["\"kind\":\"workload_end\",\"workload\":\"vram\""],
        after: Duration::ZERO,
        delivery: Delivery::TermToKiln,
        cut: &[],
        landed: |report, _| {
            let vram = outcomes(report, "vram")[0];
            let pcie = outcomes(report, "pcie")[0];
            let stopped = pcie["status"] == "not_run"
                || (pcie["status"] == "incomplete"
                    && pcie["summary"]["stopped_early"]
                        .as_str()
                        .is_some_and(|s| s.contains("stopped on request")));
            check(vram["status"] == "passed" && stopped, || {
                format!("vram {}, pcie {}", vram["status"], pcie)
            })
        },
    });
    interrupt(&Case {
        phase: "the preflight",
        args: &["--workloads", "compute"],
        opens: &["\"kind\":\"header\""],
        after: Duration::ZERO,
        delivery: Delivery::CtrlC,
        cut: &[],
        landed: |report, log| {
            let started = log.iter().any(|e| e["kind"] == "workload_start");
            let device = &report["devices"][0];
            let said = says_nothing_was_tested(device);
            check(!started && said, || {
                format!(
                    "a workload started ({started}) or the report did not say nothing was tested: {device}"
                )
            })
        },
    });
}

/// True when process `pid` catches SIGINT and SIGTERM (its `SigCgt` mask in /proc).
fn catches_signals(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .unwrap_or(0);
    let bit = |signal: u32| 1u64 << (signal - 1);
    mask & bit(2) != 0 && mask & bit(15) != 0
}

#[test]
fn a_signal_before_the_devices_are_chosen_gives_a_report_that_nothing_was_tested() {
    for delivery in [Delivery::TermToKiln, Delivery::CtrlC] {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("run");
        let mut child = start(&run_dir, &["--workloads", "vram", "--vram-bytes", "16MiB"]);
        // The moment kiln catches signals, before it has chosen its devices (its run
        // directory is made only after): read in that order, so that a directory still
        // absent after the handler was seen proves the handler came first.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !catches_signals(child.id()) {
            assert!(Instant::now() < deadline, "kiln never caught signals");
            std::thread::sleep(Duration::from_micros(200));
        }
        let before_the_claim = !run_dir.exists();
        delivery.send(&child);
        let (code, _) = common::wait_with_limit(&mut child, Duration::from_secs(30));
        assert!(
            before_the_claim,
            "{delivery:?}: signals were caught only after the run directory was made"
        );
        assert_eq!(
            code,
            Some(4),
            "{delivery:?}: exit 4, not killed by the signal"
        );
        let report = read_json(&run_dir.join("report.json"));
        assert_eq!(report["interrupted"], true);
        let device = &report["devices"][0];
        assert_eq!(device["result"], "inconclusive", "{device}");
        assert!(
            device["reason"]
                .as_str()
                .unwrap()
                .contains("before this device's test started"),
            "{device}"
        );
        assert!(says_nothing_was_tested(device), "{device}");
        assert!(
            !events(&run_dir)
                .iter()
                .any(|e| e["kind"] == "workload_start"),
            "no work started"
        );
        for w in device["workloads"].as_array().unwrap() {
            assert_eq!(w["status"], "not_run", "{w}");
        }
    }
}

/// The files of a run directory, with their bytes.
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn two_runs_given_one_directory_at_the_same_moment_never_share_it() {
    let rounds = 10;
    let mut refusals = Vec::new();
    for round in 0..rounds {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("run");
        // Each run tells itself apart by its largest transfer, kept in its manifest.
        let start = |largest: &str| {
            kiln()
                .args(["run", "--device", "cpu", "--workloads", "pcie"])
                .args(["--pcie-max-bytes", largest, "--duration", "1s"])
                .args(["--telemetry-interval", "0", "--json", "--out"])
                .arg(&run_dir)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (start("64KiB"), start("128KiB"));
        let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
        let codes = (a.status.code(), b.status.code());
        let (won, lost, largest) = match codes {
            (Some(0), Some(64)) => (&a, &b, 64 * 1024),
            (Some(64), Some(0)) => (&b, &a, 128 * 1024),
            other => panic!(
                "round {round}: exactly one run takes the directory, got {other:?}: {} / {}",
                common::stderr(&a),
                common::stderr(&b)
            ),
        };
        let said = common::stderr(lost);
        assert_eq!(said.trim().lines().count(), 1, "round {round}: {said}");
        assert!(
            said.starts_with("kiln: ") && said.trim().ends_with("choose a new --out"),
            "round {round}: {said}"
        );
        assert!(lost.stdout.is_empty(), "round {round}: nothing on stdout");
        refusals.push(said.trim().to_owned());
        // The directory is the winner's alone: its manifest, its verdict, nothing else.
        let manifest = read_json(&run_dir.join("manifest.json"));
        assert_eq!(
            manifest["settings"]["plan"][0]["config"]["max_bytes"], largest,
            "round {round}: the manifest is the other run's"
        );
        let report = expect_json(won, 0);
        assert_eq!(report["devices"][0]["result"], "pass", "round {round}");
        let held: Vec<String> = files(&run_dir)
            .iter()
            .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert!(
            !held.iter().any(|f| f.ends_with(".tmp")),
            "round {round}: {held:?}"
        );
        // Judged again, the evidence gives the winner's verdict.
        let rebuilt = expect_json(&verdict(&run_dir, &[]), 0);
        assert_eq!(
            rebuilt["devices"][0]["workloads"].as_array().unwrap().len(),
            1
        );
    }
    eprintln!("{rounds} rounds, refused with: {refusals:?}");
}

#[test]
fn a_run_given_a_directory_that_holds_files_refuses_and_touches_none_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let first = kiln()
        .args(["run", "--device", "cpu", "--workloads", "pcie"])
        .args([
            "--pcie-max-bytes",
            "64KiB",
            "--duration",
            "1s",
            "--json",
            "--out",
        ])
        .arg(&run_dir)
        .output()
        .unwrap();
    expect_json(&first, 0);
    let before = files(&run_dir);
    let second = kiln()
        .args(["run", "--device", "cpu", "--workloads", "pcie"])
        .args(["--pcie-max-bytes", "64KiB", "--duration", "1s", "--out"])
        .arg(&run_dir)
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(64));
    assert_eq!(
        common::stderr(&second).trim(),
        format!(
            "kiln: {}: the run directory already holds files; choose a new --out",
            run_dir.display()
        )
    );
    assert_eq!(
        files(&run_dir),
        before,
        "the first run's files are untouched"
    );
}

/// The pids of `pid`'s children.
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

#[test]
fn a_worker_that_stops_answering_is_recorded_one_step_timeout_after_its_last_progress() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let step_timeout = Duration::from_secs(3);
    let spawned = Instant::now();
    let mut child = start(
        &run_dir,
        &[
            "--workloads",
            "compute",
            "--step-timeout",
            "3s",
            "--telemetry-interval",
            "0",
        ],
    );
    wait_for_event_text(
        &run_dir,
        "\"kind\":\"workload_start\",\"workload\":\"compute\"",
    );
    std::thread::sleep(Duration::from_millis(500));
    // As a worker stuck in the kernel would be: it neither works nor answers.
    let workers = children(child.id());
    assert_eq!(workers.len(), 1, "one worker: {workers:?}");
    let status = std::process::Command::new("kill")
        .args(["-STOP", &workers[0].to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // On the run's clock, which starts a moment after the spawn: at most that early.
    let stopped_ms = spawned.elapsed().as_secs_f64() * 1e3;
    let (code, took) = common::wait_with_limit(&mut child, Duration::from_secs(40));
    assert_eq!(code, Some(4), "a hung device is not a pass");
    let log = events(&run_dir);
    let hang = log
        .iter()
        .find(|e| e["kind"] == "device_error" && e["error"] == "hang")
        .expect("the hang is recorded");
    let waited_s = (hang["t_ms"].as_f64().unwrap() - stopped_ms) / 1e3;
    eprintln!(
        "hang recorded {waited_s:.2} s after the worker stopped; the run ended {took:?} after"
    );
    // Its last heartbeat came up to a quarter second before the stop, and the watchdog
    // looks every tenth of a second.
    assert!(
        (step_timeout.as_secs_f64() - 0.5..step_timeout.as_secs_f64() + 1.0).contains(&waited_s),
        "the watchdog waits one step timeout ({step_timeout:?}), it waited {waited_s:.2} s"
    );
    assert!(
        took < Duration::from_secs(5),
        "the run ended {took:?} after the worker stopped"
    );
    let message = hang["message"].as_str().unwrap();
    assert!(
        message.contains("no progress for 3 s during compute"),
        "{message}"
    );
}

#[test]
fn a_retention_idle_longer_than_the_step_timeout_is_not_a_hang() {
    // The idle is the test itself: the watchdog sees it as progress, not silence.
    let dir = tempfile::tempdir().unwrap();
    let out = kiln()
        .args(["run", "--device", "cpu", "--workloads", "vram"])
        .args(["--vram-bytes", "16MiB", "--algorithms", "retention"])
        .args(["--retention-delay", "3s", "--passes", "1"])
        .args(["--step-timeout", "1s", "--json", "--out"])
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    let report = expect_json(&out, 0);
    let device = &report["devices"][0];
    assert!(
        device["failures"].as_array().unwrap().is_empty(),
        "{device}"
    );
    assert_eq!(device["workloads"][0]["status"], "passed");
}
