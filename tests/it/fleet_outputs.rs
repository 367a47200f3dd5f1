//! The files fleets consume, checked by the real tools: the Prometheus textfile by
//! promtool and by a real node_exporter scraping it, and the JUnit XML by an XML reader.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use crate::common::*;

/// A finished run directory with every report file.
fn run_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        quick_run(&[], &dir.path().join("run")).status.code(),
        Some(0)
    );
    dir
}

#[test]
fn promtool_accepts_the_metrics() {
    let dir = run_dir();
    let prom = std::fs::read(dir.path().join("run/kiln.prom")).unwrap();
    // The identity labels are dcgm-exporter's own (UUID, modelName) so that dashboards can
    // join the two; promtool's style lint names them, and nothing else may be reported.
    promtool_accepts(&prom);
    let prom = String::from_utf8_lossy(&prom);
    for family in [
        "kiln_device_healthy",
        "kiln_check_passed",
        "kiln_vram_tested_bytes",
        "kiln_last_run_timestamp_seconds",
    ] {
        assert!(prom.contains(&format!("# TYPE {family} gauge")), "{family}");
    }
    assert!(
        prom.contains("UUID=\"") && prom.contains("modelName=\"") && prom.contains("pci_bus_id=\"")
    );
    // Every sample says which node it is of, the run's own included, and the rates are
    // there in base units.
    for sample in prom.lines().filter(|l| !l.starts_with('#')) {
        assert!(sample.contains("Hostname=\""), "no Hostname: {sample}");
    }
    for rate in [
        "kiln_rate_bytes_per_second{",
        "rate=\"vram\"",
        "rate=\"pcie_h2d\"",
        "kiln_rate_operations_per_second{",
        "rate=\"compute_fp32\"",
    ] {
        assert!(prom.contains(rate), "{rate} missing:\n{prom}");
    }
}

#[test]
fn a_real_node_exporter_scrapes_the_textfile_without_error() {
    // kiln writes into node_exporter's directory itself (--textfile-dir), and so does
    // kiln health, beside it.
    let dir = tempfile::tempdir().unwrap();
    let textfile_dir = dir.path().join("textfile");
    std::fs::create_dir(&textfile_dir).unwrap();
    let textfile = textfile_dir.to_str().unwrap();
    assert_eq!(
        quick_run(&["--textfile-dir", textfile], &dir.path().join("run"))
            .status
            .code(),
        Some(0)
    );
    let health = kiln()
        .args(["health", "--textfile-dir", textfile])
        .output()
        .unwrap();
    assert!(
        textfile_dir.join("kiln-health.prom").is_file(),
        "{health:?}"
    );
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut exporter = std::process::Command::new("prometheus-node-exporter")
        .args([
            "--collector.disable-defaults",
            "--collector.textfile",
            &format!("--collector.textfile.directory={}", textfile_dir.display()),
            &format!("--web.listen-address=127.0.0.1:{port}"),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("prometheus-node-exporter is needed: run scripts/setup.sh --test");
    let deadline = Instant::now() + Duration::from_secs(10);
    let body = loop {
        let attempt = std::net::TcpStream::connect(("127.0.0.1", port)).and_then(|mut s| {
            s.write_all(
                format!("GET /metrics HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes(),
            )?;
            let mut body = String::new();
            s.read_to_string(&mut body)?;
            Ok(body)
        });
        match attempt {
            Ok(body) if body.contains("node_textfile_scrape_error") => break body,
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            other => {
                let _ = exporter.kill();
                panic!("node_exporter never answered: {other:?}");
            }
        }
    };
    let _ = exporter.kill();
    let _ = exporter.wait();
    assert!(
        body.lines().any(|l| l == "node_textfile_scrape_error 0"),
        "{body}"
    );
    assert!(
        body.contains("kiln_device_healthy{"),
        "our metrics are served"
    );
    assert!(
        body.contains("kiln_health_exit_code{"),
        "and the health check's"
    );
    // As served, with dcgm-exporter's label names.
    let healthy = body
        .lines()
        .find(|l| l.starts_with("kiln_device_healthy{"))
        .unwrap();
    for label in [
        "gpu=\"",
        "UUID=\"",
        "pci_bus_id=\"",
        "modelName=\"",
        "Hostname=\"",
    ] {
        assert!(healthy.contains(label), "{label} in {healthy}");
    }
}

#[test]
fn the_junit_file_parses_with_a_case_per_device_and_check() {
    let dir = run_dir();
    let text = std::fs::read_to_string(dir.path().join("run/junit.xml")).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let cases: Vec<_> = root
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    let names: Vec<&str> = cases.iter().filter_map(|c| c.attribute("name")).collect();
    assert_eq!(names, vec!["vram", "compute", "pcie", "verdict"]);
    assert_eq!(root.attribute("tests"), Some("4"));
    assert_eq!(root.attribute("failures"), Some("0"));
    assert_eq!(root.attribute("errors"), Some("0"));
    assert!(
        cases
            .iter()
            .all(|c| c.attribute("classname").unwrap().starts_with("kiln."))
    );
}

/// A recorded NVML identity for the CPU device: the values dcgm-exporter would label the
/// same card with (`gpu` is NVML's index 3, not Vulkan's 0).
const NVML_IDENTITY: &str = r#"{"t_ms":0.0,"source":"sidecar","kind":"header","schema":"kiln.telemetry/1","interval_ms":200.0}
{"t_ms":0.1,"device":0,"source":"nvml","kind":"identity","fields":{"name":"NVIDIA H200","uuid":"GPU-6c4f3a5e-1b2c-4d5e-8f90-123456789abc","serial":"1654923012345","pci_bus_id":"00000000:3B:00.0","minor_number":3,"nvml_index":3,"driver_version":"550.54.15","matched_by":"uuid"}}
"#;

#[test]
fn the_metrics_join_dcgm_exporters_series_in_promql_and_land_in_the_textfile_dir() {
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("identity.jsonl");
    std::fs::write(&recording, NVML_IDENTITY).unwrap();
    let textfile = dir.path().join("textfile");
    std::fs::create_dir(&textfile).unwrap();
    let out = kiln()
        .env("NODE_NAME", "gpu-node-7")
        .args([
            "run",
            "--device",
            "cpu",
            "--workloads",
            "compute",
            "--passes",
            "1",
        ])
        .arg("--test-telemetry-replay")
        .arg(&recording)
        .arg("--textfile-dir")
        .arg(&textfile)
        .arg("--out")
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // Written into the textfile directory by kiln itself, the same bytes as the run's.
    let prom = std::fs::read_to_string(textfile.join("kiln.prom")).unwrap();
    assert_eq!(
        prom,
        std::fs::read_to_string(dir.path().join("run/kiln.prom")).unwrap()
    );
    let left: Vec<String> = std::fs::read_dir(&textfile)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["kiln.prom"], "no temporary file is left beside it");
    assert!(
        prom.contains("kiln_build_info{version=\"") && prom.contains("profile=\"quick\""),
        "{prom}"
    );
    // The run's samples as node_exporter would serve them, beside a series shaped as
    // dcgm-exporter writes it for the same card; the join must find the pair on every
    // identity label at once.
    let mut series = String::new();
    for line in prom.lines().filter(|l| !l.starts_with('#')) {
        let (metric, value) = line.rsplit_once(' ').unwrap();
        let metric = match metric.split_once('{') {
            Some((name, labels)) => {
                format!("{name}{{instance=\"gpu-node-7:9100\",job=\"node\",{labels}")
            }
            None => format!("{metric}{{instance=\"gpu-node-7:9100\",job=\"node\"}}"),
        };
        series.push_str(&format!(
            "      - series: '{metric}'\n        values: '{value}x5'\n"
        ));
    }
    let dcgm = "DCGM_FI_DEV_GPU_TEMP{gpu=\"3\",UUID=\"GPU-6c4f3a5e-1b2c-4d5e-8f90-123456789abc\",pci_bus_id=\"00000000:3B:00.0\",device=\"nvidia3\",modelName=\"NVIDIA H200\",Hostname=\"gpu-node-7\",DCGM_FI_DRIVER_VERSION=\"550.54.15\",instance=\"10.0.0.7:9400\",job=\"dcgm\"}";
    series.push_str(&format!(
        "      - series: '{dcgm}'\n        values: '41x5'\n"
    ));
    let join = "kiln_device_healthy * on (gpu, UUID, pci_bus_id, device, modelName, Hostname) DCGM_FI_DEV_GPU_TEMP";
    let test = format!(
        "tests:\n  - interval: 1m\n    input_series:\n{series}    promql_expr_test:\n      - expr: '{join}'\n        eval_time: 2m\n        exp_samples:\n          - labels: '{{gpu=\"3\",UUID=\"GPU-6c4f3a5e-1b2c-4d5e-8f90-123456789abc\",pci_bus_id=\"00000000:3B:00.0\",device=\"nvidia3\",modelName=\"NVIDIA H200\",Hostname=\"gpu-node-7\"}}'\n            value: 41\n"
    );
    let file = dir.path().join("join.test.yml");
    std::fs::write(&file, &test).unwrap();
    let check = std::process::Command::new("promtool")
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .expect("promtool is needed: run scripts/setup.sh --test");
    assert!(
        check.status.success(),
        "{}\n{}\n{test}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
}

#[test]
fn a_textfile_dir_that_is_not_a_directory_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = kiln()
        .args(["run", "--device", "cpu", "--textfile-dir"])
        .arg(dir.path().join("missing"))
        .arg("--out")
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--textfile-dir") && stderr.contains("not a directory"),
        "{stderr}"
    );
    assert!(!dir.path().join("run").exists(), "nothing ran");
}

/// The test cases of a rebuilt scenario's `junit.xml`: (name, outcome element or `passed`,
/// its message).
fn junit_cases(scenario: &str) -> (String, Vec<(String, String, String)>) {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    lay_out_scenario(scenario, &run_dir);
    verdict(&run_dir, &[]);
    let text = std::fs::read_to_string(run_dir.join("junit.xml")).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("well-formed XML");
    let cases = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .map(|c| {
            let outcome = c
                .children()
                .find(|n| ["failure", "error", "skipped"].contains(&n.tag_name().name()));
            (
                c.attribute("name").unwrap_or_default().to_owned(),
                outcome.map_or("passed", |n| n.tag_name().name()).to_owned(),
                outcome
                    .and_then(|n| n.attribute("message"))
                    .unwrap_or_default()
                    .to_owned()
                    + outcome.and_then(|n| n.text()).unwrap_or_default(),
            )
        })
        .collect();
    (text.clone(), cases)
}

#[test]
fn junit_counts_each_fault_once_and_skips_what_did_not_run_with_why() {
    // A wrong multiply-add on a throttling card: the compute case fails with the mismatch,
    // the verdict's case with the heat alone.
    let (text, cases) = junit_cases("compute_mismatch_on_hot_card");
    let failures: Vec<_> = cases.iter().filter(|c| c.1 == "failure").collect();
    assert_eq!(failures.len(), 2, "{text}");
    let compute = cases.iter().find(|c| c.0 == "compute").unwrap();
    assert_eq!(compute.1, "failure");
    assert!(compute.2.contains("COMPUTE_MISMATCH"), "{text}");
    assert!(!compute.2.contains("THERMAL_THROTTLE"), "{text}");
    let verdict = cases.iter().find(|c| c.0 == "verdict").unwrap();
    assert_eq!(verdict.1, "failure");
    assert!(verdict.2.contains("THERMAL_THROTTLE"), "{text}");
    assert!(
        !verdict.2.contains("COMPUTE_MISMATCH"),
        "counted once: {text}"
    );
    assert!(text.contains("failures=\"2\""), "{text}");

    // A stuck bit alone: one failure, in the VRAM case; the verdict's case says so.
    let (text, cases) = junit_cases("vram_stuck_bit");
    assert_eq!(
        cases.iter().filter(|c| c.1 == "failure").count(),
        1,
        "{text}"
    );
    assert_eq!(cases.iter().find(|c| c.0 == "vram").unwrap().1, "failure");

    // Killed between compute and PCIe: PCIe is a skipped case saying why, and the device
    // could not be judged (an error, not a pass).
    let (text, cases) = junit_cases("killed_between_workloads");
    let pcie = cases
        .iter()
        .find(|c| c.0 == "pcie")
        .unwrap_or_else(|| panic!("the planned PCIe check has a case: {text}"));
    assert_eq!(pcie.1, "skipped", "{text}");
    assert!(pcie.2.contains("did not run"), "{text}");
    assert_eq!(
        cases.iter().find(|c| c.0 == "verdict").unwrap().1,
        "error",
        "{text}"
    );
    assert!(text.contains("skipped=\"1\""), "{text}");
}

#[test]
fn every_scenarios_metrics_parse_with_one_series_per_label_set() {
    // node_exporter rejects a whole textfile that repeats a label set: confirmation
    // reruns, a combined load beside a lone one, and a code found twice in one run (a
    // link degraded in width and in generation) must each stay one series.
    let mut read = 0;
    for_each_rebuilt_scenario(|name, run_dir, _| {
        let Ok(prom) = std::fs::read(run_dir.join("kiln.prom")) else {
            return;
        };
        read += 1;
        let text = String::from_utf8_lossy(&prom);
        let mut series: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.rsplit_once(' ').map(|(s, _)| s))
            .collect();
        let all = series.len();
        series.sort_unstable();
        series.dedup();
        assert_eq!(series.len(), all, "{name}: a repeated series in\n{text}");
        promtool_accepts(&prom);
    });
    assert!(read > 50, "only {read} scenarios had metrics");
}
