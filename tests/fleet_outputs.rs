//! The files fleets consume, checked by the real tools: the Prometheus textfile by
//! promtool and by a real node_exporter scraping it, and the JUnit XML by an XML reader.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::*;

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
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool is needed: run scripts/setup.sh --test");
    child.stdin.take().unwrap().write_all(&prom).unwrap();
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    // The identity labels are dcgm-exporter's own (UUID, modelName) so that dashboards can
    // join the two; promtool's style lint names them, and nothing else may be reported.
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
}

#[test]
fn a_real_node_exporter_scrapes_the_textfile_without_error() {
    let dir = run_dir();
    let textfile_dir = dir.path().join("textfile");
    std::fs::create_dir(&textfile_dir).unwrap();
    std::fs::copy(
        dir.path().join("run/kiln.prom"),
        textfile_dir.join("kiln.prom"),
    )
    .unwrap();
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
