//! `report.html` from a run directory whose telemetry shows thermal throttling: the banner,
//! the finding and the charts (phases shaded) are on the page.

use crate::common;

use crate::common::*;

/// Runs headless Chromium on `page` with a profile of its own under `dir`.
fn chromium(
    dir: &std::path::Path,
    page: &std::path::Path,
    extra: &[String],
) -> std::process::Output {
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
            "--no-pdf-header-footer",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium is needed: run scripts/setup.sh --test")
}

/// Takes a screenshot of `page` at `size` (`--window-size=W,H`) into `shot`, and checks
/// that it is a real picture.
fn screenshot(dir: &std::path::Path, page: &std::path::Path, size: &str, shot: &std::path::Path) {
    let out = chromium(
        dir,
        page,
        &[size.to_owned(), format!("--screenshot={}", shot.display())],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let png = std::fs::read(shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "{}: a real screenshot, {} bytes",
        shot.display(),
        png.len()
    );
}

/// The text of `pdf`'s pages `first..=last` (all with `None`), by pdftotext.
fn pdf_text(pdf: &std::path::Path, pages: Option<(u32, u32)>) -> String {
    let mut cmd = std::process::Command::new("pdftotext");
    cmd.arg("-layout");
    if let Some((first, last)) = pages {
        cmd.args(["-f", &first.to_string(), "-l", &last.to_string()]);
    }
    let out = cmd
        .arg(pdf)
        .arg("-")
        .output()
        .expect("pdftotext is needed: run scripts/setup.sh --test");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The run's page printed by headless Chromium into `dir`, as the RMA bundle's PDF is.
fn print_pdf(dir: &std::path::Path, run_dir: &std::path::Path) -> std::path::PathBuf {
    let pdf = dir.join("report.pdf");
    let out = chromium(
        dir,
        &run_dir.join("report.html"),
        &[format!("--print-to-pdf={}", pdf.display())],
    );
    assert!(pdf.is_file(), "{}", String::from_utf8_lossy(&out.stderr));
    pdf
}

/// A scenario's run directory with its reports rebuilt, in `dir`.
fn scenario_reports(dir: &std::path::Path, scenario: &str) -> std::path::PathBuf {
    let run_dir = dir.join(scenario);
    lay_out_scenario(scenario, &run_dir);
    verdict(&run_dir, &[]);
    run_dir
}

#[test]
fn the_pdf_holds_the_summary_on_page_one_and_every_wrong_word_with_no_empty_page() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = scenario_reports(dir.path(), "vram_stuck_while_thermal_throttled");
    let pdf = print_pdf(dir.path(), &run_dir);
    // Page one: the verdict, the card's identity, what failed, where, how often, action.
    let first = pdf_text(&pdf, Some((1, 1)));
    for needle in [
        "Result: FAIL (exit 1)",
        "Serial number",
        "1654923012345",
        "692-2G520-0200-000",
        "96.00.74.00.01",
        "GPU-6c4f3a5e-1b2c-4d5e-8f90-123456789abc",
        "VRAM_STUCK_BIT",
        "1 word of memory holds 2 bits stuck whatever is written, at 0x000000000fa0",
        "1 wrong read at 1 word: 0x000000000fa0",
        "Reproduced",
        "RMA the card",
    ] {
        assert!(first.contains(needle), "page 1 lacks `{needle}`:\n{first}");
    }
    // The whole document: the failing-word table and the evidence as labelled rows,
    // nothing in a tooltip, no raw JSON, offsets in hex.
    let all = pdf_text(&pdf, None);
    for needle in [
        "Failing words",
        "0x000000000fa0",
        "0xa8646c94 → 0xa8646e94",
        "bit 3 at 0, bit 9 at 1",
        "stuck at 0 and 1",
        "own-address",
        "First offsets",
        "0xfa0",
        "hardware thermal slowdown",
        "Host and run",
        "Command line",
    ] {
        assert!(all.contains(needle), "the PDF lacks `{needle}`:\n{all}");
    }
    assert!(
        !all.contains("\"first_offsets\""),
        "raw JSON on the page:\n{all}"
    );
    // No empty page: every page has words on it; one bad cell reads in a few pages.
    let pages = all.split('\u{c}').filter(|p| !p.trim().is_empty()).count();
    let total = all.matches('\u{c}').count();
    assert_eq!(pages, total, "an empty page among {total}:\n{all}");
    assert!(total <= 6, "{total} pages for one bad cell:\n{all}");
}

#[test]
fn a_passing_pdf_is_short_names_the_card_and_says_what_could_not_be_checked() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let out = common::quick_run(&["--workloads", "vram,compute"], &run_dir);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let pdf = print_pdf(dir.path(), &run_dir);
    let first = pdf_text(&pdf, Some((1, 1)));
    for needle in [
        "GPU report: GPU0 llvmpipe",
        "Result: PASS (exit 0)",
        "nothing: every check that ran passed",
        "Not checked",
        "no telemetry was read",
    ] {
        assert!(first.contains(needle), "page 1 lacks `{needle}`:\n{first}");
    }
    let all = pdf_text(&pdf, None);
    let total = all.matches('\u{c}').count();
    assert!(total <= 3, "{total} pages for a pass:\n{all}");
    assert!(
        all.contains("Not read during the run, so not charted"),
        "no empty chart frames:\n{all}"
    );
}

#[test]
fn compute_matrix_and_pcie_faults_each_have_their_table() {
    let dir = tempfile::tempdir().unwrap();
    for (scenario, heading, needle) in [
        ("compute_wrong_lane", "Wrong results", "<td>FP32</td>"),
        (
            "matrix_wrong_element",
            "Wrong matrix elements",
            "<td>(77, 201)</td>",
        ),
        ("pcie_corrupt_byte", "Corrupted transfers", "<td>0x"),
    ] {
        let run_dir = scenario_reports(dir.path(), scenario);
        let html = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
        let at = html
            .find(&format!("<h3>{heading}</h3>"))
            .unwrap_or_else(|| panic!("{scenario}: no {heading} table"));
        let table = &html[at..];
        let table = &table[..table.find("</table>").unwrap()];
        assert!(table.contains(needle), "{scenario}: {table}");
        assert!(
            table.matches("<tr>").count() >= 2,
            "{scenario}: a heading and a row"
        );
    }
}

#[test]
fn screenshots_of_the_first_screen_passing_and_failing() {
    let dir = tempfile::tempdir().unwrap();
    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    for (scenario, name, verdict_text) in [
        ("h200_healthy", "pass", "Result: PASS (exit 0)"),
        (
            "vram_stuck_while_thermal_throttled",
            "fail",
            "Result: FAIL (exit 1)",
        ),
    ] {
        let run_dir = scenario_reports(dir.path(), scenario);
        let page = run_dir.join("report.html");
        let dom = chromium(
            dir.path(),
            &page,
            &["--window-size=1280,900".into(), "--dump-dom".into()],
        );
        let dom = String::from_utf8_lossy(&dom.stdout);
        assert!(dom.contains(verdict_text), "{name}: {dom}");
        // The summary card's table, as the browser built it.
        let summary = &dom[dom.find("id=\"summary\"").expect("the summary section")..];
        let summary = &summary[..summary.find("</section>").unwrap()];
        assert!(summary.contains("<table class=\"identity\">"), "{summary}");
        for row in [
            "Product",
            "Serial number",
            "UUID",
            "PCI address",
            "Driver",
            "What failed",
        ] {
            assert!(
                summary.contains(&format!("<th>{row}</th>")),
                "{name}: {row}"
            );
        }
        if name == "fail" {
            assert!(
                dom.contains("<table class=\"rows\">"),
                "the wrong-word table"
            );
            assert!(summary.contains("<th>Action</th>"));
        }
        let shot = shots.join(format!("first-screen-{name}.png"));
        screenshot(dir.path(), &page, "--window-size=1280,900", &shot);
    }
}

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
        html.contains("class=\"banner warn\" id=\"verdict-0\">GPU0 ENVIRONMENT: thermal slowdown"),
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
    assert!(html.contains("class=\"phase p0\""), "the phase is shaded");
    assert!(html.contains("VRAM error map"));
    assert!(
        html.contains("<th>Serial number</th><td>1654923012345</td>"),
        "the identity a support desk asks for"
    );
    // Throttle reasons are named bands, not a bit mask; every chart has its axes.
    assert!(html.contains(">hardware thermal slowdown</text>"), "{html}");
    assert!(!html.contains("bit mask"));
    assert!(html.contains("time since the run started (s)"));
    assert!(html.contains("offset in the tested memory (GiB)") || html.contains("no wrong reads"));
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "self-contained: nothing fetched"
    );
    // The host as it was when the run started (kept in the manifest for rebuilds).
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert!(
        html.contains(&format!("<th>Kernel</th><td>{}</td>", kernel.trim())),
        "the host section"
    );
    for row in [
        "Operating system",
        "CPU",
        "Motherboard",
        "BIOS",
        "Vulkan loader",
    ] {
        // Each field is said: in its own row, or named in the one row of what was not read.
        let unread = html
            .split("<th>Not read</th><td>")
            .nth(1)
            .and_then(|rest| rest.split("</td>").next())
            .unwrap_or_default()
            .to_lowercase();
        assert!(
            html.contains(&format!("<th>{row}</th>")) || unread.contains(&row.to_lowercase()),
            "{row}"
        );
    }
    let command = html
        .split("<th>Command line</th><td>")
        .nth(1)
        .and_then(|rest| rest.split("</td>").next())
        .expect("the exact command line");
    assert!(
        command.contains(" run ") && command.contains("--workloads vram"),
        "{command}"
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
    let page = run_dir.join("report.html");
    let shot = dir.path().join("report.png");
    let size = "--window-size=900,1800".to_owned();
    let dom = chromium(dir.path(), &page, &[size.clone(), "--dump-dom".into()]);
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.contains("Result: ENVIRONMENT (exit 2)"),
        "the banner renders"
    );
    assert!(dom.matches("<svg").count() >= 5, "the charts render");
    screenshot(dir.path(), &page, &size, &shot);
}

#[test]
fn a_real_run_with_one_bad_word_prints_in_at_most_six_pages() {
    // An emulated H200 read through NVML (every chart drawn), the quick profile's
    // workloads, and one stuck word: the RMA PDF a support desk gets for one bad cell.
    let node = common::Node::new(serde_json::json!({}));
    let run_dir = node.dir.path().join("run");
    let out = node
        .kiln()
        .args(["run", "--profile", "quick", "--duration", "6s"])
        .args([
            "--vram-bytes",
            "32MiB",
            "--test-stuck-word",
            "1000",
            "--out",
        ])
        .arg(&run_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let pdf = print_pdf(node.dir.path(), &run_dir);
    let all = pdf_text(&pdf, None);
    let pages: Vec<&str> = all
        .split('\u{c}')
        .filter(|p| !p.trim().is_empty())
        .collect();
    let total = all.matches('\u{c}').count();
    assert_eq!(pages.len(), total, "an empty page among {total}:\n{all}");
    assert!(total <= 6, "{total} pages for one bad word:\n{all}");
    // No page holds a lone line or two: a page break left nothing stranded.
    for (i, page) in pages.iter().enumerate() {
        let lines = page.lines().filter(|l| !l.trim().is_empty()).count();
        assert!(lines >= 3, "page {} holds {lines} lines:\n{page}", i + 1);
    }
    let first = pdf_text(&pdf, Some((1, 1)));
    for needle in [
        "Result: FAIL (exit 1)",
        "Profile: quick, 6s of its 40s",
        "VRAM_STUCK_BIT",
    ] {
        assert!(first.contains(needle), "page 1 lacks `{needle}`:\n{first}");
    }
}

#[test]
fn a_composite_load_s_parts_are_named_by_it_and_the_charts_show_each_phase() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = scenario_reports(dir.path(), "psu_card_off_the_bus_only_under_combined_load");
    let html = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
    // Heat's and psu's VRAM and compute parts under their parent's name, never as the
    // workloads run alone.
    for heading in [
        "<h3>heat: its vram part",
        "<h3>heat: its compute part",
        "<h3>psu: its vram part",
    ] {
        assert!(html.contains(heading), "no `{heading}`");
    }
    // The phases shaded are the workloads' own: the span between them, which covers the
    // whole run, is not drawn over them.
    assert!(
        html.contains("class=\"phase-label\">heat<"),
        "heat's band is labelled"
    );
    assert!(!html.contains(">between_phases<"), "between_phases drawn");
    assert!(!html.contains(">preflight<"), "preflight drawn");
}

#[test]
fn a_pass_with_telemetry_prints_on_three_pages_with_no_lone_line() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = scenario_reports(dir.path(), "h200_healthy");
    let pdf = print_pdf(dir.path(), &run_dir);
    let all = pdf_text(&pdf, None);
    let total = all.matches('\u{c}').count();
    assert!(total <= 3, "{total} pages for a pass:\n{all}");
    // Did it run hot: the phase's temperatures and the card's limits on page one.
    let first = pdf_text(&pdf, Some((1, 1)));
    for needle in [
        "What the card did, per phase",
        "slows down at 87 °C",
        "Peak temperature",
    ] {
        assert!(first.contains(needle), "page 1 lacks `{needle}`:\n{first}");
    }
    // No page holds a lone closing line.
    for page in all.split('\u{c}').filter(|p| !p.trim().is_empty()) {
        let lines = page.lines().filter(|l| !l.trim().is_empty()).count();
        assert!(lines > 2, "a page of {lines} lines:\n{page}");
    }
}

/// The page's words for people: no project internals (raw keys, snake_case names of
/// kiln's records, source paths), and each device's headline said once.
#[test]
fn the_page_shows_no_internals_and_says_each_headline_once() {
    let dir = tempfile::tempdir().unwrap();
    for scenario in [
        "double_bit_error_between_phases",
        "thermal_throttle",
        "watch_own_error",
        "vram_stuck_bit",
    ] {
        let run_dir = scenario_reports(dir.path(), scenario);
        let html = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
        for raw in [
            "Codes 1",
            "· Code<",
            "nvml_xid_event",
            "nvml xid event",
            ">between_phases<",
            "src/",
            ".rs<",
        ] {
            assert!(!html.contains(raw), "{scenario}: `{raw}` on the page");
        }
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run_dir.join("report.json")).unwrap())
                .unwrap();
        let reason = report["devices"][0]["reason"].as_str().unwrap();
        let said = reason
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;");
        // The banner says it; the findings table holds it as its finding's summary at most.
        assert!(
            html.matches(&said).count() <= 2,
            "{scenario}: the headline said {} times",
            html.matches(&said).count()
        );
        let code = report["devices"][0]["findings"][0]["code"]
            .as_str()
            .unwrap();
        assert!(
            !html.contains(&format!("<td>{code}: {said}")),
            "{scenario}: `What failed` says the headline again"
        );
    }
}
