//! `kiln verdict RUN_DIR`: the report rebuilt from the evidence alone matches the run's
//! own; a killed run still gets a verdict, marked incomplete; bad run directories get one
//! clear sentence, never a panic.

use crate::common;

use crate::common::*;

#[test]
fn a_rebuilt_report_matches_the_runs_own() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let original = expect_json(&quick_run(&["--json"], &run_dir), 0);
    // Rebuilt over two seconds after the run ended: the report keeps the run's own times,
    // not the rebuild's.
    let finished = kiln::evidence::parse_utc_timestamp(original["finished_utc"].as_str().unwrap())
        .expect("the run's end in UTC");
    while std::time::SystemTime::now() < finished + std::time::Duration::from_millis(2100) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let rebuilt = expect_json(&verdict(&run_dir, &[]), 0);
    for key in ["result", "exit_code", "schema", "run_id", "started_utc"] {
        assert_eq!(rebuilt[key], original[key], "{key}");
    }
    let seconds = |r: &serde_json::Value| {
        kiln::evidence::parse_utc_timestamp(r["finished_utc"].as_str().unwrap_or_default())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_secs() as i64)
            .unwrap_or_default()
    };
    // Whole seconds both, so at most one apart; the rebuild came over two seconds later.
    assert!(
        (seconds(&rebuilt) - seconds(&original)).abs() <= 1,
        "{} vs {}",
        rebuilt["finished_utc"],
        original["finished_utc"]
    );
    let wall = |r: &serde_json::Value| r["wall_s"].as_f64().unwrap_or_default();
    assert!(
        (wall(&rebuilt) - wall(&original)).abs() < 0.5 && wall(&original) > 1.0,
        "{} vs {}",
        wall(&rebuilt),
        wall(&original)
    );
    assert_eq!(rebuilt["incomplete"], false);
    let devices = |r: &serde_json::Value| -> Vec<(
        serde_json::Value,
        Vec<(serde_json::Value, serde_json::Value)>,
    )> {
        r["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let w = d["workloads"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|w| (w["status"].clone(), w["headline"].clone()))
                    .collect();
                (d["result"].clone(), w)
            })
            .collect()
    };
    assert_eq!(devices(&rebuilt), devices(&original));
    assert_eq!(
        rebuilt["devices"][0]["telemetry"],
        original["devices"][0]["telemetry"]
    );
}

#[test]
fn a_killed_run_gets_a_verdict_marked_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    killed_run(&run_dir, 20);
    // Could not test enough: exit 4.
    let report = expect_json(&verdict(&run_dir, &[]), 4);
    assert_eq!(report["incomplete"], true);
    assert_eq!(report["result"], "inconclusive");
    assert!(
        report["devices"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("ended before vram finished")
    );
    assert!(
        report["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("did not finish"))
    );
    let saved = read_json(&run_dir.join("report.json"));
    assert_eq!(
        saved["incomplete"], true,
        "the rebuilt report joins the evidence"
    );
}

#[test]
fn bad_run_directories_get_one_sentence_and_exit_64() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    assert_eq!(quick_run(&[], &run_dir).status.code(), Some(0));
    let check = |path: &std::path::Path, needle: &str| {
        let out = kiln().arg("verdict").arg(path).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(needle), "`{needle}` not in {stderr}");
    };
    check(
        &dir.path().join("nowhere"),
        "nowhere does not exist: not a kiln run directory",
    );
    check(
        &run_dir.join("manifest.json"),
        "manifest.json is a file, not a kiln run directory",
    );
    check(dir.path(), "not a kiln run directory");

    let events = run_dir.join("events.jsonl");
    let text = std::fs::read_to_string(&events).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(3, "{\"this is\": not json");
    std::fs::write(&events, lines.join("\n") + "\n").unwrap();
    check(&run_dir, "line 4");

    std::fs::write(run_dir.join("manifest.json"), "{ truncated").unwrap();
    check(&run_dir, "manifest.json");
}

#[test]
fn a_truncated_tail_gives_a_partial_verdict_and_broken_telemetry_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    assert_eq!(quick_run(&[], &run_dir).status.code(), Some(0));
    let events = run_dir.join("events.jsonl");
    let mut text = std::fs::read_to_string(&events).unwrap();
    // Drop the run_end record and leave half a line, as a kill mid-write would.
    let last = text.trim_end().rfind('\n').unwrap();
    text.truncate(last + 1);
    text.push_str("{\"t_ms\":1.0,\"kind\":\"no");
    std::fs::write(&events, text).unwrap();
    // Every workload had ended: the verdict stands (exit 0), marked incomplete.
    let report = expect_json(&verdict(&run_dir, &[]), 0);
    assert_eq!(report["incomplete"], true);
    // Telemetry whose first complete line is not a record is corrupt evidence: said with
    // the file and line (exit 64), never skipped into a verdict that lacks it.
    std::fs::write(run_dir.join("telemetry.jsonl"), "garbage\n").unwrap();
    let out = verdict(&run_dir, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("telemetry.jsonl, line 1"), "{stderr}");
    // The same damaged file is the same error for every command that reads the run: kiln
    // report (whose page once drew it as no telemetry at all) and kiln compare.
    let before = std::fs::read(run_dir.join("report.html")).unwrap();
    let refused = kiln::cmd::rebuild::report(kiln::cmd::cli::ReportArgs {
        run_dir: run_dir.clone(),
        rma: false,
        bundle: None,
    })
    .unwrap_err()
    .to_string();
    assert!(refused.contains("telemetry.jsonl, line 1"), "{refused}");
    assert_eq!(
        std::fs::read(run_dir.join("report.html")).unwrap(),
        before,
        "the page the run wrote is kept, not redrawn without its telemetry"
    );
    let compared = kiln::cmd::compare::compare(&run_dir, &run_dir, 0.05)
        .unwrap_err()
        .to_string();
    assert!(compared.contains("telemetry.jsonl, line 1"), "{compared}");
}

#[test]
fn reports_validate_against_the_published_schema() {
    let dir = tempfile::tempdir().unwrap();
    // A clean run, a failing one, and a rebuilt report of a run with findings.
    let clean = dir.path().join("clean");
    assert_eq!(quick_run(&[], &clean).status.code(), Some(0));
    common::validate_report(&clean.join("report.json"));
    let throttled = dir.path().join("throttled");
    assert_eq!(
        quick_run(&["--workloads", "vram"], &throttled)
            .status
            .code(),
        Some(0)
    );
    use_telemetry_fixture(&throttled, "ecc_uncorrectable_remap_pending");
    assert_eq!(
        kiln()
            .arg("verdict")
            .arg(&throttled)
            .output()
            .unwrap()
            .status
            .code(),
        Some(1)
    );
    common::validate_report(&throttled.join("report.json"));
    // And a broken one is refused, so the check is real.
    let broken = dir.path().join("broken.json");
    let mut report = read_json(&clean.join("report.json"));
    report["devices"][0]["result"] = "fine".into();
    std::fs::write(&broken, serde_json::to_vec(&report).unwrap()).unwrap();
    let schema =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/report.schema.json");
    let out = std::process::Command::new("python3")
        .args(["-c", "import json, sys, jsonschema; jsonschema.validate(json.load(open(sys.argv[2])), json.load(open(sys.argv[1])))"])
        .arg(&schema)
        .arg(&broken)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "the schema rejects an unknown result"
    );
}

#[test]
fn the_rma_bundle_carries_the_evidence_with_checksums() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    assert_eq!(quick_run(&[], &run_dir).status.code(), Some(0));
    let bundle = dir.path().join("ticket.tar");
    let out = kiln()
        .args(["report", "--rma", "--bundle"])
        .arg(&bundle)
        .arg(&run_dir)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let unpacked = dir.path().join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    let tar = std::process::Command::new("tar")
        .arg("-C")
        .arg(&unpacked)
        .arg("-xf")
        .arg(&bundle)
        .status()
        .unwrap();
    assert!(tar.success());
    for file in [
        "report.html",
        "report.json",
        "manifest.json",
        "events.jsonl",
        "telemetry.jsonl",
        "SHA256SUMS",
    ] {
        assert!(
            unpacked.join("run").join(file).is_file(),
            "{file} in the bundle"
        );
    }
    // As a support desk checks it: inside the unpacked folder.
    let check = std::process::Command::new("sha256sum")
        .args(["-c", "SHA256SUMS"])
        .current_dir(unpacked.join("run"))
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let html = std::fs::read_to_string(unpacked.join("run/report.html")).unwrap();
    for needed in ["UUID", "PCI address", "Driver", "To reproduce"] {
        assert!(html.contains(needed), "{needed}");
    }
    // The PDF a desk can file, printed from the page, its summary on page one.
    let pdf = unpacked.join("run/report.pdf");
    assert!(
        pdf.is_file(),
        "report.pdf in the bundle (chromium is installed by setup.sh --test)"
    );
    let text = std::process::Command::new("pdftotext")
        .args(["-l", "1"])
        .arg(&pdf)
        .arg("-")
        .output()
        .expect("pdftotext is needed: run scripts/setup.sh --test");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("Result: PASS (exit 0)") && text.contains("Serial number"),
        "{text}"
    );
    let out = kiln()
        .args(["report", "--rma"])
        .arg(dir.path().join("nowhere"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    // A failing card's bundle is the one a desk wants: writing it is a success (exit 0),
    // and the card's result is in it.
    let failing = dir.path().join("failing");
    assert_eq!(
        quick_run(&["--test-stuck-word", "1000"], &failing)
            .status
            .code(),
        Some(1)
    );
    let out = kiln()
        .args(["report", "--rma"])
        .arg(&failing)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.path().join("failing-rma.tar").is_file());
    // Rebuilding the reports alone still exits with the card's result.
    let out = kiln().arg("report").arg(&failing).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn the_summary_says_how_each_device_is_installed() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    common::lay_out_scenario("other_tenants", &run_dir);
    let out = common::kiln()
        .arg("verdict")
        .arg(&run_dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("  setup: driver 550.54.15 (Vulkan 550.54.15.0), serial 1654923012345")
            && text.contains("other processes: pid 4242 (64.00 GiB), pid 4243 (16.00 GiB)"),
        "{text}"
    );
}

#[test]
fn a_device_whose_xids_nothing_can_show_is_said_to_be_unwatched() {
    let gap = |source: &str, device: Option<u32>, cause: &str| {
        let mut r = serde_json::json!({"t_ms": 36.0, "source": source, "kind": "unavailable",
            "message": format!("{cause} (test)"), "missing": ["xid"], "cause": cause});
        if let Some(d) = device {
            r["device"] = d.into();
        }
        r.to_string()
    };
    let unwatched = "GPU0: no Xid is watched";
    for (gaps, said) in [
        // NVML will not watch its events, and the kernel log cannot be read: nothing shows
        // an Xid.
        (
            vec![
                gap("nvml", Some(0), "events_no_permission"),
                gap("kmsg", None, "kernel_log_unreadable"),
            ],
            true,
        ),
        // Either one alone still shows them.
        (vec![gap("nvml", Some(0), "events_no_permission")], false),
        (vec![gap("kmsg", None, "kernel_log_unreadable")], false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("run");
        common::lay_out_scenario("_base", &run_dir);
        let telemetry = run_dir.join("telemetry.jsonl");
        let mut text = std::fs::read_to_string(&telemetry).unwrap();
        for g in &gaps {
            text.push_str(g);
            text.push('\n');
        }
        std::fs::write(&telemetry, text).unwrap();
        let report = json(&verdict(&run_dir, &[]));
        let notes = report["notes"].to_string();
        assert_eq!(notes.contains(unwatched), said, "{gaps:?}: {notes}");
    }
}

#[test]
fn the_binary_judges_as_the_tests_do() {
    // The suite judges the scenarios in its own process (common::verdict): the binary must
    // print the same report, the same summary and exit the same, for one run of every exit
    // code, with a site's thresholds, and for a directory that holds no run.
    let work = tempfile::tempdir().unwrap();
    let mut codes = std::collections::BTreeSet::new();
    for name in [
        "amd_healthy",
        "amd_memory_uncorrectable",
        "arc_a770_thermal_limit",
        "alloc_fragmented",
        "compute_slow_unexplained",
        "pcie_replays_strict_site",
        "interrupted_before_pcie",
    ] {
        let run_dir = work.path().join(name);
        lay_out_scenario(name, &run_dir);
        let thresholds = scenarios().join(name).join("thresholds.json");
        let extra: Vec<&std::ffi::OsStr> = if thresholds.is_file() {
            vec!["--thresholds".as_ref(), thresholds.as_os_str()]
        } else {
            Vec::new()
        };
        let binary = verdict_of_binary(&run_dir, &extra);
        let in_process = verdict(&run_dir, &extra);
        assert_eq!(binary.status.code(), in_process.status.code(), "{name}");
        assert_eq!(json(&binary), json(&in_process), "{name}");
        assert_eq!(stderr(&binary), stderr(&in_process), "{name}");
        codes.insert(binary.status.code());
    }
    assert_eq!(codes.len(), 5, "one run of every exit code: {codes:?}");
    let empty = work.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let (binary, in_process) = (verdict_of_binary(&empty, &[]), verdict(&empty, &[]));
    assert_eq!(binary.status.code(), Some(64));
    assert_eq!(in_process.status.code(), Some(64));
    assert_eq!(stderr(&binary), stderr(&in_process));
    assert!(binary.stdout.is_empty() && in_process.stdout.is_empty());
}

#[test]
fn a_run_is_rebuilt_by_its_own_thresholds() {
    // A run that passed under a site's thresholds (`kiln run --thresholds`) records them in
    // its manifest: `kiln verdict`, `kiln report` (and the JUnit file it writes) and `kiln
    // compare` give that verdict again, never one judged anew by kiln's defaults; a file
    // given to `kiln verdict` is laid over them, and the report says so.
    let work = tempfile::tempdir().unwrap();
    let run_dir = work.path().join("run");
    let name = "pcie_bandwidth_low_lenient_site";
    lay_out_scenario(name, &run_dir);
    let site: serde_json::Value = read_json(&scenarios().join(name).join("thresholds.json"));
    let own = serde_json::to_value(
        kiln::thresholds::Thresholds::load(&scenarios().join(name).join("thresholds.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(own["pcie_low_share"], site["pcie_low_share"]);
    let manifest_path = run_dir.join("manifest.json");
    let mut manifest = read_json(&manifest_path);
    manifest["settings"]["thresholds"] = own;
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();

    let rebuilt = expect_json(&verdict(&run_dir, &[]), 0);
    assert_eq!(rebuilt["result"], "pass", "{rebuilt:#}");
    let notes = rebuilt["notes"].to_string();
    assert!(!notes.contains("laid over"), "{notes}");

    let report = kiln::cmd::rebuild::report(kiln::cmd::cli::ReportArgs {
        run_dir: run_dir.clone(),
        rma: false,
        bundle: None,
    })
    .unwrap();
    assert_eq!(report, 0, "kiln report judges by the run's own thresholds");
    assert_eq!(read_json(&run_dir.join("report.json"))["result"], "pass");
    let junit = std::fs::read_to_string(run_dir.join("junit.xml")).unwrap();
    assert!(!junit.contains("<failure"), "{junit}");
    assert!(!junit.contains("PCIE_BANDWIDTH_LOW"), "{junit}");

    let c = kiln::cmd::compare::compare(&run_dir, &run_dir, 0.05).unwrap();
    assert!(
        c.devices
            .iter()
            .all(|d| d.result_before == "pass" && d.result_after == "pass"),
        "compare judges each run by its own thresholds"
    );

    // kiln's default share laid over them: the verdict is another, and says why.
    let strict = work.path().join("strict.json");
    std::fs::write(&strict, r#"{"pcie_low_share": 0.75}"#).unwrap();
    let judged = expect_json(
        &verdict(&run_dir, &["--thresholds".as_ref(), strict.as_os_str()]),
        2,
    );
    assert_eq!(judged["result"], "environment", "{judged:#}");
    let notes = judged["notes"].to_string();
    assert!(
        notes.contains("laid over the run's own (pcie_low_share changed)"),
        "{notes}"
    );

    // Thresholds the run recorded that are not what kiln writes: one sentence, exit 64.
    manifest["settings"]["thresholds"] = serde_json::json!({"throttle_share": 7});
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let damaged = verdict(&run_dir, &[]);
    assert_eq!(damaged.status.code(), Some(64));
    let said = stderr(&damaged);
    assert!(
        said.contains("the thresholds the run recorded are not what kiln wrote")
            && said.contains("between 0 and 1"),
        "{said}"
    );
}
