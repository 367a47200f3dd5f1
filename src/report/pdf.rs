//! `report.pdf` for the RMA bundle, printed from `report.html` by a headless Chromium
//! (or Chrome) where one is installed: the page's print style puts the summary on page
//! one and every table expanded, so the PDF is the page. kiln never needs a browser to
//! test a card: without one the bundle says so and carries the page alone.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The browsers tried, in order.
const BROWSERS: [&str; 4] = [
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
];

/// How long printing may take before the browser is stopped.
const PRINT_TIMEOUT: Duration = Duration::from_secs(90);

/// The first browser on the PATH (`KILN_BROWSER` names another).
fn browser() -> Option<PathBuf> {
    if let Some(b) = std::env::var_os("KILN_BROWSER").filter(|b| !b.is_empty()) {
        return Some(PathBuf::from(b));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| BROWSERS.iter().map(move |b| dir.join(b)))
        .find(|p| p.is_file())
}

/// True when this process runs as root, where Chromium refuses its sandbox.
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// Prints `html` to `pdf`. Says in one sentence why not when it cannot (no browser, the
/// browser failed or took too long).
pub fn print(html: &Path, pdf: &Path) -> Result<(), String> {
    let browser = browser().ok_or(
        "no PDF: no headless browser found (install chromium, or name one in KILN_BROWSER)",
    )?;
    let html = html
        .canonicalize()
        .map_err(|e| format!("no PDF: {}: {e}", html.display()))?;
    // A profile of its own, so that a browser the user has open is not disturbed.
    let profile = std::env::temp_dir().join(format!("kiln-pdf-{}", std::process::id()));
    let mut cmd = Command::new(&browser);
    cmd.args([
        "--headless",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-pdf-header-footer",
    ]);
    if is_root() {
        cmd.arg("--no-sandbox");
    }
    cmd.arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--print-to-pdf={}", pdf.display()))
        .arg(format!("file://{}", html.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("no PDF: {} did not start: {e}", browser.display()))?;
    let deadline = Instant::now() + PRINT_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!(
                    "no PDF: {} took more than {} s",
                    browser.display(),
                    PRINT_TIMEOUT.as_secs()
                ));
            }
            Err(e) => break Err(format!("no PDF: {e}")),
        }
    };
    let _ = std::fs::remove_dir_all(&profile);
    let status = status?;
    match std::fs::metadata(pdf) {
        Ok(m) if status.success() && m.len() > 0 => Ok(()),
        _ => Err(format!(
            "no PDF: {} could not print the page ({status})",
            browser.display()
        )),
    }
}
