//! `report.html` from a run directory whose telemetry shows thermal throttling: the banner,
//! the finding and the charts (phases shaded) are on the page.

mod common;

use common::*;

#[test]
fn the_page_shows_the_verdict_the_findings_and_the_charts() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    assert_eq!(
        quick_run(&["--workloads", "vram"], &run_dir).status.code(),
        Some(0)
    );
    // Replace the run's telemetry by a recording of a card that overheats during the phase.
    use_telemetry_fixture(&run_dir, "thermal_throttle");
    // Environment: exit 2.
    let report = expect_json(&verdict(&run_dir, &[]), 2);
    assert_eq!(
        report["devices"][0]["findings"][0]["code"],
        "THERMAL_THROTTLE"
    );
    let html = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(
        html.contains("id=\"verdict\">Result: ENVIRONMENT (exit 2)"),
        "the run's banner"
    );
    assert!(
        html.contains("class=\"banner warn\" id=\"verdict-0\">ENVIRONMENT: thermal slowdown"),
        "the device's banner"
    );
    assert!(html.contains("<td>THERMAL_THROTTLE</td>"));
    for chart in ["Temperature", "Power", "Clocks", "Throttle reasons"] {
        assert!(
            html.contains(&format!("<figcaption>{chart}")),
            "{chart} chart"
        );
    }
    assert!(
        html.matches("<polyline").count() >= 4,
        "the series are drawn"
    );
    assert!(html.contains("class=\"phase\""), "the phase is shaded");
    assert!(html.contains("VRAM error map"));
    assert!(
        html.contains("<th>serial</th><td>1654923012345</td>"),
        "the identity a support desk asks for"
    );
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "self-contained: nothing fetched"
    );
}

#[test]
fn headless_chromium_renders_the_page_with_its_banner_and_charts() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    assert_eq!(
        quick_run(&["--workloads", "vram"], &run_dir).status.code(),
        Some(0)
    );
    use_telemetry_fixture(&run_dir, "thermal_throttle");
    assert_eq!(
        kiln()
            .arg("verdict")
            .arg(&run_dir)
            .output()
            .unwrap()
            .status
            .code(),
        Some(2)
    );
    let page = format!("file://{}", run_dir.join("report.html").display());
    let shot = dir.path().join("report.png");
    let chromium = |extra: &[String]| {
        std::process::Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--window-size=900,1800",
            ])
            .arg(format!(
                "--user-data-dir={}",
                dir.path().join("profile").display()
            ))
            .args(extra)
            .arg(&page)
            .output()
            .expect("chromium is needed: run scripts/setup.sh --test")
    };
    let dom = chromium(&["--dump-dom".into()]);
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.contains("Result: ENVIRONMENT (exit 2)"),
        "the banner renders"
    );
    assert!(dom.matches("<svg").count() >= 5, "the charts render");
    let out = chromium(&[format!("--screenshot={}", shot.display())]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "a real screenshot, {} bytes",
        png.len()
    );
}
