//! `report.pdf` for the RMA bundle, printed from `report.html` by a headless Chromium,
//! Chrome or Edge where one is installed ([`crate::platform::browser`]): the page's print style puts the summary on page
//! one and every table expanded, so the PDF is the page. kiln never needs a browser to
//! test a card: without one the bundle says so and carries the page alone.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::platform::browser;
use std::time::{Duration, Instant};

/// How long printing may take before the browser is stopped.
const PRINT_TIMEOUT: Duration = Duration::from_secs(90);

/// Prints `html` to `pdf`. Says in one sentence why not when it cannot (no browser, the
/// browser failed or took too long).
pub fn print(html: &Path, pdf: &Path) -> Result<(), String> {
    let browser = browser::find().ok_or_else(|| {
        format!(
            "no PDF: no headless browser found ({})",
            browser::INSTALL_HINT
        )
    })?;
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
    if browser::without_sandbox() {
        cmd.arg("--no-sandbox");
    }
    cmd.arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--print-to-pdf={}", pdf.display()))
        .arg(browser::file_url(&html))
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
