//! The command line as a user meets it: bad input gets one clear sentence and exit 64;
//! the commands work end to end on the machine's Vulkan device.

use crate::common::*;
use kiln::evidence::{Event, read_events};

#[test]
fn bad_flags_get_one_sentence_and_exit_64() {
    // Through the binary, end to end: the parser's refusal and a device that is not there.
    usage_error_of_binary(&["run", "--bogus"], "--bogus");
    usage_error_of_binary(&["frobnicate"], "frobnicate");
    usage_error(&["run", "--vram-bytes", "12parsecs"], "unknown size unit");
    usage_error(&["run", "--vram-bytes", "0"], "not a usable size");
    usage_error(&["run", "--vram-percent", "150"], "between 0 and 100");
    usage_error(
        &["run", "--vram-bytes", "1GiB", "--vram-percent", "5"],
        "cannot be used with",
    );
    usage_error(&["run", "--duration", "soon"], "not a duration");
    usage_error(&["run", "--passes", "0"], "0");
    usage_error(&["run", "--layout", "diagonal"], "diagonal");
    usage_error(
        &["run", "--algorithms", "marchx"],
        "unknown VRAM algorithm `marchx`",
    );
    usage_error(&["run", "--algorithms", ","], "no VRAM algorithm");
    usage_error_of_binary(&["run", "--device", "7"], "no Vulkan device matches `7`");
    usage_error(
        &["run", "--device", "GPU-ffffffff-0000"],
        "no Vulkan device matches",
    );
    usage_error(
        &["run", "--workloads", "vram,pcie9"],
        "unknown workload `pcie9`; did you mean `pcie`?",
    );
    usage_error(
        &["run", "--profile", "burnin"],
        "no such profile; did you mean `burn-in`?",
    );
    usage_error(
        &["run", "--profle", "quick"],
        "unexpected argument '--profle' found; did you mean '--profile'?",
    );
    usage_error(
        &["report"],
        "the following required arguments were not provided: <RUN_DIR>",
    );
    usage_error(&["health", "--max-age", "3y"], "use ms, s, m, h, d or w");
    usage_error(
        &["run", "--algorithms", "own-adress"],
        "unknown VRAM algorithm `own-adress`; did you mean `own-address`?",
    );
    usage_error(&["run", "--load", "wobbly"], "wobbly");
    let bad = std::env::temp_dir().join(format!("kiln-bad-thresholds-{}.json", std::process::id()));
    std::fs::write(&bad, r#"{"throttle_share": 7}"#).unwrap();
    usage_error(
        &["run", "--thresholds", bad.to_str().unwrap()],
        "between 0 and 1",
    );
    usage_error(
        &[
            "verdict",
            "/nonexistent",
            "--thresholds",
            bad.to_str().unwrap(),
        ],
        "between 0 and 1",
    );
    std::fs::remove_file(&bad).unwrap();
    usage_error(
        &[
            "run",
            "--pcie-max-bytes",
            "1GiB",
            "--vram-bytes",
            "16MiB",
            "--pcie-max-bytes",
            "2",
        ],
        "--pcie-max-bytes",
    );
    usage_error(&["selftest", "--faults", "0"], "0");
    usage_error(&["bench", "flops"], "flops");
    usage_error(
        &["run", "--vram-bytes", "64MiB", "--reserve", "x"],
        "unknown size unit",
    );
}

#[test]
fn help_and_version_exit_0() {
    for args in [&["--help"][..], &["--version"], &["run", "--help"]] {
        let out = kiln().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(!out.stdout.is_empty());
    }
}

#[test]
fn an_output_directory_holding_files_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("precious.txt"), "keep me").unwrap();
    let out = kiln()
        .args(["run", "--vram-bytes", "16MiB", "--passes", "1", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("already holds files"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("precious.txt")).unwrap(),
        "keep me"
    );
    assert!(!dir.path().join("events.jsonl").exists());
}

#[test]
fn list_shows_the_device_with_its_limits() {
    let out = kiln().arg("list").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "GPU0",
        "uuid",
        "maxStorageBufferRange",
        "maxMemoryAllocationSize",
        "maxComputeWorkGroupCount",
        "timestampPeriod",
        "heap 0",
    ] {
        assert!(text.contains(needle), "`{needle}` missing from:\n{text}");
    }
    let out = kiln().args(["list", "--json"]).output().unwrap();
    let devices = json(&out);
    let first = &devices[0];
    assert!(
        first["limits"]["max_storage_buffer_range_bytes"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(first["device_uuid"].as_str().unwrap().len() == 36);
    assert!(first["heaps"][0]["size_bytes"].as_u64().unwrap() > 0);
}

#[test]
fn run_writes_a_complete_run_directory_and_exits_0_on_clean_memory() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let out = kiln()
        .args([
            "run",
            "--device",
            "cpu",
            "--vram-bytes",
            "128MiB",
            "--passes",
            "1",
            "--pcie-max-bytes",
            "4MiB",
            "--json",
            "--out",
        ])
        .arg(&out_dir)
        .output()
        .unwrap();
    let report = expect_json(&out, 0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("PASS"),
        "the summary goes to stderr with --json: {stderr}"
    );
    // `--device cpu` makes the CPU device the device under test, and says what that proves.
    assert!(
        stderr.contains("is a CPU Vulkan device, tested as asked")
            && stderr.contains("this proves the tool, not a card"),
        "{stderr}"
    );
    assert_eq!(report["schema"], "kiln.report/2");
    assert_eq!(
        report["no_gpu_tested"], false,
        "the CPU device was asked for"
    );
    assert_eq!(report["exit_code"], 0);
    assert_eq!(report["result"], "pass");
    let vram = &report["devices"][0]["workloads"][0]["summary"];
    assert!(vram["coverage"]["of_sized"].as_f64().unwrap() >= 0.9);
    assert_eq!(vram["errors_total"], 0);
    assert_eq!(read_json(&out_dir.join("report.json")), report);
    let manifest = read_json(&out_dir.join("manifest.json"));
    assert_eq!(manifest["schema"], "kiln.manifest/2");
    assert!(manifest["devices"][0]["device_uuid"].is_string());
    assert!(manifest["command_line"].as_array().unwrap().len() > 3);
    let log = read_events(&out_dir.join("events.jsonl")).unwrap();
    assert!(!log.truncated_tail);
    assert!(matches!(
        log.records.last().unwrap().event,
        Event::RunEnd { exit_code: 0, .. }
    ));
    assert!(
        log.records
            .iter()
            .any(|r| matches!(r.event, Event::DeviceStart { .. }))
    );
}

#[test]
fn kill_9_leaves_events_readable_up_to_the_last_complete_line() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    killed_run(&out_dir, 40);
    let events = out_dir.join("events.jsonl");
    let log = read_events(&events).expect("every complete line parses");
    assert!(log.records.len() >= 40);
    assert!(
        log.records
            .iter()
            .any(|r| matches!(r.event, Event::Step { .. }))
    );
    assert!(
        !log.records
            .iter()
            .any(|r| matches!(r.event, Event::RunEnd { .. })),
        "it was killed"
    );
    assert!(
        out_dir.join("manifest.json").exists(),
        "the manifest is written first"
    );
}

#[test]
fn a_device_is_selected_by_index_or_uuid() {
    let list = kiln().args(["list", "--json"]).output().unwrap();
    let devices = json(&list);
    let uuid = devices[0]["device_uuid"].as_str().unwrap().to_owned();
    for selector in [
        "0".to_string(),
        format!("GPU-{}", uuid.to_uppercase()),
        uuid[..8].to_string(),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = quick_run(&["--json", "--device", &selector], &dir.path().join("run"));
        assert_eq!(
            out.status.code(),
            Some(0),
            "{selector}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report = json(&out);
        assert_eq!(report["devices"].as_array().unwrap().len(), 1);
        assert_eq!(report["devices"][0]["uuid"].as_str().unwrap(), uuid);
    }
}

#[test]
fn without_nvml_the_run_says_so_once_and_keeps_its_exit_code() {
    if nvml_wrapper::Nvml::init().is_ok() {
        return; // an NVIDIA driver is here: nothing is missing to say
    }
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let out = quick_run(&[], &out_dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert_eq!(
        stdout.matches("NVML is not available").count(),
        1,
        "said once: {stdout}"
    );
    for signal in [
        "temperature",
        "power",
        "clocks",
        "throttle reasons",
        "ECC",
        "Xid",
    ] {
        assert!(
            stdout.contains(signal),
            "the missing {signal} is named: {stdout}"
        );
    }
    let (records, _) = kiln::evidence::read_jsonl::<kiln::telemetry::record::TelemetryRecord>(
        &out_dir.join("telemetry.jsonl"),
    )
    .unwrap();
    use kiln::telemetry::record::TelemetryData;
    assert!(matches!(records[0].data, TelemetryData::Header { .. }));
    let said = records.iter().filter(|r| matches!(&r.data, TelemetryData::Unavailable { message, .. } if message.contains("NVML"))).count();
    assert_eq!(said, 1);
    let report = read_json(&out_dir.join("report.json"));
    let notes: Vec<&str> = report["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert_eq!(notes.iter().filter(|n| n.contains("NVML")).count(), 1);
    let phases = report["devices"][0]["telemetry"].as_array().unwrap();
    let names: Vec<&str> = phases.iter().filter_map(|p| p["phase"].as_str()).collect();
    assert_eq!(
        names,
        vec!["preflight", "vram", "compute", "pcie"],
        "the idle preflight and every workload phase are marked, even with no counters"
    );
    for p in phases {
        assert!(p["end_ms"].as_f64().unwrap() > p["start_ms"].as_f64().unwrap());
    }
}

#[test]
fn monitor_prints_json_lines_and_stops_cleanly_on_ctrl_c() {
    let out = kiln()
        .args([
            "monitor",
            "--json",
            "--interval",
            "100ms",
            "--duration",
            "700ms",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let records: Vec<kiln::telemetry::record::TelemetryRecord> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is a record"))
        .collect();
    assert!(matches!(
        records[0].data,
        kiln::telemetry::record::TelemetryData::Header { .. }
    ));

    let mut child = kiln()
        .args(["monitor", "--json", "--interval", "100ms"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Monitoring once its first two records are out (the header and, on a machine without
    // NVML, what it cannot read), then Ctrl+C.
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut text = String::new();
    for _ in 0..2 {
        use std::io::BufRead;
        assert!(
            stdout.read_line(&mut text).unwrap() > 0,
            "ended early: {text}"
        );
    }
    let sent = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let started = std::time::Instant::now();
    std::io::Read::read_to_string(&mut stdout, &mut text).unwrap();
    let status = child.wait().unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "Ctrl+C stops within 2 s"
    );
    assert_eq!(status.code(), Some(0), "a clean exit");
    assert!(text.ends_with('\n'));
    for line in text.lines() {
        serde_json::from_str::<serde_json::Value>(line).expect("no torn line");
    }
}

#[test]
fn monitor_refuses_a_zero_interval() {
    let out = kiln()
        .args(["monitor", "--interval", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--interval"));
}

#[test]
fn the_fragment_workload_runs_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let report = kiln_json(
        &[
            "run",
            "--device",
            "cpu",
            "--workloads",
            "fragment",
            "--duration",
            "1s",
            "--json",
            "--out",
            run_dir.to_str().unwrap(),
        ],
        0,
    );
    let w = &report["devices"][0]["workloads"][0];
    assert_eq!(w["workload"], "fragment");
    assert_eq!(w["summary"]["returned_to_baseline"], true);
}

/// Runs `kiln ARGS` on a pseudo-terminal (util-linux's `script`), as a person at the
/// terminal would, and returns everything the terminal showed.
fn on_a_terminal(args: &str, no_color: bool) -> String {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("terminal.log");
    let mut cmd = std::process::Command::new("script");
    cmd.args(["-qfec"])
        .arg(format!(
            "{} {args} --out {}",
            env!("CARGO_BIN_EXE_kiln"),
            dir.path().join("run").display()
        ))
        .arg(&log)
        .env_remove("NO_COLOR")
        .env("TERM", "xterm-256color");
    if no_color {
        cmd.env("NO_COLOR", "1");
    }
    let out = cmd.output().expect("script (util-linux) is needed");
    assert!(out.status.success(), "{out:?}");
    std::fs::read_to_string(&log).unwrap()
}

#[test]
fn a_person_at_the_terminal_sees_progress_with_eta_and_a_coloured_result() {
    let shown = on_a_terminal(
        "run --device cpu --workloads vram,compute --duration 4s --vram-bytes 16MiB",
        false,
    );
    // The notes before the bars, then the bar over the device's whole plan: percent, time
    // left, the workload (which of how many) and the count of faults so far; the VRAM
    // passes in the scrollback; the notes not said again in the summary.
    let first_bar = shown
        .find("GPU0 [")
        .unwrap_or_else(|| panic!("no bar: {shown}"));
    let note = shown
        .find("is a CPU Vulkan device, tested as asked")
        .unwrap_or_else(|| panic!("no note: {shown}"));
    assert!(note < first_bar, "the notes come before the bars: {shown}");
    assert_eq!(
        shown
            .matches("is a CPU Vulkan device, tested as asked")
            .count(),
        1,
        "a note said once: {shown}"
    );
    assert!(shown.contains("GPU0 llvmpipe (LLVM 15.0.6, 256 bits): 2 workloads, at most 4s"));
    assert!(shown.contains("% ETA "), "{shown}");
    assert!(shown.contains("vram 1/2"), "{shown}");
    assert!(shown.contains("compute 2/2"), "{shown}");
    assert!(shown.contains("| no faults"), "{shown}");
    assert!(shown.contains("GPU0 vram pass"), "{shown}");
    assert!(shown.contains(": own-address, random: "), "{shown}");
    assert!(
        shown.contains("result: \u{1b}[32mPASS\u{1b}[0m (exit 0)"),
        "the result in green: {shown}"
    );
    // NO_COLOR turns the colour off, and nothing else.
    let plain = on_a_terminal("run --device cpu --workloads compute --passes 1", true);
    assert!(plain.contains("result: PASS (exit 0)"), "{plain}");
    assert!(!plain.contains("\u{1b}[32m"), "{plain}");
}

/// `kiln completions SHELL`, checked to parse in that shell.
fn completion_script(shell: &str) -> std::path::PathBuf {
    let out = kiln().args(["completions", shell]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let path = std::env::temp_dir().join(format!("kiln-completion-{}.{shell}", std::process::id()));
    std::fs::write(&path, &out.stdout).unwrap();
    let syntax = std::process::Command::new(shell)
        .arg("-n")
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("{shell} is needed: run scripts/setup.sh --test ({e})"));
    assert!(syntax.status.success(), "{shell}: {syntax:?}");
    path
}

fn shell_says(shell: &str, script: &str) -> String {
    let out = std::process::Command::new(shell)
        .args(["-c", script])
        .output()
        .unwrap();
    assert!(out.status.success(), "{shell}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn completions_complete_commands_flags_and_their_values_in_bash_zsh_and_fish() {
    let bash = completion_script("bash");
    let said = shell_says(
        "bash",
        &format!(
            "source {}; complete -p kiln; \
             COMP_WORDS=(kiln he); COMP_CWORD=1; _kiln; echo \"1 ${{COMPREPLY[*]}}\"; \
             COMP_WORDS=(kiln run --textf); COMP_CWORD=2; _kiln; echo \"2 ${{COMPREPLY[*]}}\"; \
             COMP_WORDS=(kiln run --profile b); COMP_CWORD=3; _kiln; echo \"3 ${{COMPREPLY[*]}}\"; \
             COMP_WORDS=(kiln completions ''); COMP_CWORD=2; _kiln; echo \"4 ${{COMPREPLY[*]}}\"",
            bash.display()
        ),
    );
    assert!(
        said.contains("complete -o filenames -F _kiln kiln"),
        "{said}"
    );
    assert!(said.contains("1 health"), "{said}");
    assert!(said.contains("2 --textfile-dir"), "{said}");
    // A profile is a bundled name or a file (the directory's files come too).
    assert!(
        said.lines()
            .any(|l| l.starts_with("3 ") && l.split(' ').any(|w| w == "burn-in")),
        "{said}"
    );
    assert!(said.contains("4 bash zsh fish"), "{said}");

    let fish = completion_script("fish");
    let said = shell_says(
        "fish",
        &format!(
            "source {}; complete -C 'kiln comp'; complete -C 'kiln run --power'; complete -C 'kiln run --profile r'; complete -C 'kiln completions z'",
            fish.display()
        ),
    );
    for needle in [
        "compare\t",
        "completions\t",
        "--power-target\t",
        "rma\t",
        "zsh",
    ] {
        assert!(said.contains(needle), "fish lacks {needle}: {said}");
    }

    // zsh: the script's dispatch with the completion system's functions stubbed to print
    // what they were given.
    let zsh = completion_script("zsh");
    let stubs = "_describe() { print -l -- \"${(@P)2}\" }; _files() {}; _values() {}; \
                 _arguments() { if [[ $1 == -C ]]; then state=$KILN_STATE; line=($KILN_LINE); return 0; fi; print -l -- \"$@\" }";
    let said = shell_says(
        "zsh",
        &format!(
            "{stubs}; source {z}; KILN_STATE=command _kiln; KILN_STATE=args KILN_LINE=run _kiln",
            z = zsh.display()
        ),
    );
    assert!(
        said.contains("health:A node check for schedulers"),
        "{said}"
    );
    assert!(
        said.contains("--textfile-dir[Also write the metrics"),
        "{said}"
    );
    assert!(said.contains("--profile[The job"), "{said}");
    assert!(said.contains("quick fleet burn-in rma"), "{said}");
    for path in [bash, fish, zsh] {
        let _ = std::fs::remove_file(path);
    }
}

#[test]
fn the_man_page_documents_every_command_and_option_and_renders_cleanly() {
    let out = kiln().arg("man").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let page = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(page.starts_with(".TH KILN 1"), "{page}");
    use clap::CommandFactory;
    let cli = kiln::cmd::cli::Cli::command();
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        assert!(
            page.contains(&format!(".SS \"kiln {}\"", sub.get_name())),
            "{}",
            sub.get_name()
        );
        for arg in sub.get_arguments().filter(|a| !a.is_hide_set()) {
            if let Some(long) = arg.get_long() {
                let roff = format!("\\fB\\-\\-{}\\fR", long.replace('-', "\\-"));
                assert!(page.contains(&roff), "kiln {} --{long}", sub.get_name());
            }
        }
    }
    assert!(page.contains(".SH EXIT STATUS"));
    // groff reads it without a warning, and the text says what it should.
    let path = std::env::temp_dir().join(format!("kiln-{}.1", std::process::id()));
    std::fs::write(&path, &page).unwrap();
    let render = std::process::Command::new("groff")
        .args(["-man", "-Tutf8", "-ww"])
        .arg(&path)
        .output()
        .expect("groff is needed: run scripts/setup.sh --test");
    let _ = std::fs::remove_file(&path);
    assert!(
        render.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&render.stderr)
    );
    // Without the terminal's overstrike (bold, underline).
    let text = regex::Regex::new("(?s).\u{8}")
        .unwrap()
        .replace_all(&String::from_utf8_lossy(&render.stdout), "")
        .into_owned();
    assert!(text.contains("--textfile-dir DIR"), "{text}");
    assert!(text.contains("kiln completions"), "{text}");
}

/// kiln.exe double-clicked in Explorer (the path taken here through its test switch, as a
/// script's console is never kiln's own): the quick check, the verdict in plain words,
/// where the report is, and a window that waits for Enter before it closes.
#[test]
fn a_double_clicked_kiln_checks_says_it_plainly_and_waits_for_enter() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("clicked");
    let mut child = kiln()
        .env("KILN_TEST_DOUBLE_CLICKED", "1")
        .env(
            "KILN_TEST_DOUBLE_CLICK_ARGS",
            format!(
                "--vram-bytes 16MiB --algorithms own-address --passes 1 --pcie-max-bytes 1MiB --out {}",
                run.display()
            ),
        )
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    // Read until the prompt: the window must not close before the person has read it.
    let mut said = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&said).contains("Press Enter to close") {
        let n = stdout.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "ended before asking: {}",
            String::from_utf8_lossy(&said)
        );
        said.extend_from_slice(&buf[..n]);
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "it waits for Enter");
    child.stdin.take().unwrap().write_all(b"\n").unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(4), "no GPU was tested");
    let text = String::from_utf8_lossy(&said);
    assert!(
        text.starts_with("kiln checks every GPU in this computer"),
        "{text}"
    );
    assert!(
        text.contains("NO GPU TESTED: kiln found no graphics card"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "The full report: {}",
            run.join("report.html").display()
        )),
        "{text}"
    );
    assert!(run.join("report.html").is_file());
    // Typed with no arguments in a terminal, kiln is a command like any other.
    let out = kiln().output().unwrap();
    assert_eq!(out.status.code(), Some(64));
}

#[test]
fn at_80_columns_the_live_line_fits_and_keeps_its_fault_count() {
    // A real terminal 80 columns wide (tmux), an emulated H200 whose NVML readings put its
    // temperature and power on the line, and a stuck word: the line is long, and the step
    // must give way so that the count of wrong reads stays on the bar's own line.
    let node = crate::common::Node::new(serde_json::json!({}));
    let session = format!("kiln-{}", std::process::id());
    let run_dir = node.dir.path().join("run");
    let kiln = node.kiln();
    let env: Vec<String> = kiln
        .get_envs()
        .filter_map(|(k, v)| Some(format!("{}='{}'", k.to_str()?, v?.to_str()?)))
        .collect();
    let command = format!(
        "env {} {} run --workloads vram --duration 4s --vram-bytes 32MiB --test-stuck-word 1000 --out {}; echo KILN-ENDED; sleep 60",
        env.join(" "),
        kiln.get_program().to_str().unwrap(),
        run_dir.display()
    );
    let tmux = |args: &[&str]| {
        std::process::Command::new("tmux")
            .args(["-L", &session])
            .args(args)
            .output()
            .expect("tmux is needed: run scripts/setup.sh --test")
    };
    let started = tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "80",
        "-y",
        "30",
        &command,
    ]);
    assert!(started.status.success(), "{started:?}");
    let mut screens: Vec<String> = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    while std::time::Instant::now() < deadline {
        let shown = tmux(&["capture-pane", "-p", "-t", &session]);
        let screen = String::from_utf8_lossy(&shown.stdout).into_owned();
        let ended = screen.contains("KILN-ENDED");
        screens.push(screen);
        if ended {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(150));
    }
    tmux(&["kill-server"]);
    let all = screens.join("\n----\n");
    assert!(all.contains("KILN-ENDED"), "the run did not end:\n{all}");
    // The bar's line, once the fault was found: the card's readings and the count on it.
    let bars: Vec<&str> = all
        .lines()
        .filter(|l| l.starts_with("GPU0 [") && l.contains("wrong read"))
        .collect();
    assert!(!bars.is_empty(), "no bar with the count on it:\n{all}");
    assert!(
        bars.iter()
            .any(|l| l.contains("°C | ") && l.contains(" W | ")),
        "the readings stay beside the count where they fit:\n{all}"
    );
    for l in &bars {
        assert!(
            l.trim_end().ends_with("wrong read") || l.trim_end().ends_with("wrong reads"),
            "the count ends the bar's line: `{l}`"
        );
    }
    // Nothing of the line wrapped onto the next: every line that counts wrong reads is the
    // bar, a line of the scrollback (`GPU0 vram pass`) or an indented line of the summary.
    for l in all.lines().filter(|l| l.contains("wrong read")) {
        assert!(
            l.starts_with("GPU0 ") || l.starts_with(' '),
            "a piece of a wrapped line: `{l}`\n{all}"
        );
    }
}

/// A path where kiln expects a file, holding something else, is refused unopened: a FIFO
/// would hold kiln in `open()` (before, `run --profile ./p.fifo` survived SIGINT and
/// SIGTERM there), and `/dev/zero` would feed it without end.
#[test]
fn a_fifo_or_a_device_where_a_file_belongs_is_refused_unopened() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("p.fifo");
    mkfifo(&fifo);
    let fifo = fifo.to_str().unwrap();
    usage_error(
        &["run", "--profile", fifo, "--dry-run"],
        "is a FIFO, not a profile file",
    );
    usage_error(
        &["run", "--thresholds", fifo, "--dry-run"],
        "a FIFO, not a thresholds file",
    );
    usage_error(
        &["run", "--profile", "/dev/zero", "--dry-run"],
        "is a device, not a profile file",
    );
}

/// Every kiln command of the script a session lent a GPU runs (`scripts/gpu-session.sh`)
/// parses as kiln's own command line: a typo there costs a turn on a real card, which
/// only such a turn would show.
#[test]
fn every_kiln_command_of_the_gpu_session_parses() {
    let script = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/gpu-session.sh"),
    )
    .unwrap();
    let mut parsed = 0;
    for line in script
        .lines()
        .filter(|l| l.trim_start().starts_with("step "))
    {
        let Some(at) = line.find("kiln ") else {
            continue;
        };
        let mut command = line[at..].trim_end();
        // A command inside `bash -c '...'` ends at its closing quote.
        if line.contains("bash -c '") {
            command = command.trim_end_matches('\'');
        }
        let command = command
            .replace("\"$(command -v python3)\"", "python3")
            .replace("$mode", "steady")
            .replace("$out", "/tmp/out");
        let words = shell_words(&command);
        match kiln::cmd::parse(
            words
                .iter()
                .map(std::ffi::OsString::from)
                .collect::<Vec<_>>(),
        ) {
            Ok(_) => parsed += 1,
            Err(kiln::cmd::Refusal::Shown(e)) => panic!("`{command}` shows clap's text: {e}"),
            Err(kiln::cmd::Refusal::Usage(sentence)) => panic!("`{command}`: {sentence}"),
        }
    }
    assert!(
        parsed >= 15,
        "the script's kiln commands were found ({parsed})"
    );

    /// Words of a command as a shell splits them, for the quoting the script uses: single
    /// and double quotes around a word or part of one.
    fn shell_words(command: &str) -> Vec<String> {
        let mut words = Vec::new();
        let mut word = String::new();
        let mut quote: Option<char> = None;
        let mut in_word = false;
        for c in command.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), c) => word.push(c),
                (None, '\'' | '"') => {
                    quote = Some(c);
                    in_word = true;
                }
                (None, c) if c.is_whitespace() => {
                    if in_word {
                        words.push(std::mem::take(&mut word));
                        in_word = false;
                    }
                }
                (None, c) => {
                    word.push(c);
                    in_word = true;
                }
            }
        }
        if in_word {
            words.push(word);
        }
        words
    }
}
