//! The browser that prints `report.pdf` and shows `report.html`: a Chromium-based one run
//! headless. Linux looks for Chromium or Chrome on `PATH` and, as root, runs it without
//! its sandbox (which refuses root); Windows looks where Edge (on every Windows 10 and 11)
//! and Chrome install themselves. `KILN_BROWSER` names another anywhere.

use std::path::{Path, PathBuf};

/// The browser to print with: `KILN_BROWSER`, else the first one installed.
pub fn find() -> Option<PathBuf> {
    if let Some(b) = std::env::var_os("KILN_BROWSER").filter(|b| !b.is_empty()) {
        return Some(PathBuf::from(b));
    }
    os::installed().into_iter().find(|p| p.is_file())
}

/// What to install when there is none, in words.
pub const INSTALL_HINT: &str = os::INSTALL_HINT;

/// True when the browser must run without its sandbox (Chromium refuses to run as root
/// with it).
pub fn without_sandbox() -> bool {
    os::without_sandbox()
}

/// Shows a file (the report) in the user's own browser, as opening it from the file
/// manager would.
pub fn open(path: &Path) -> std::io::Result<()> {
    let status = std::process::Command::new(os::OPENER)
        .arg(path)
        .stdin(std::process::Stdio::null())
        .status()?;
    // Explorer answers 1 even when it opened the file: only a start that failed counts.
    if status.success() || cfg!(windows) {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "{} answered {status}",
            os::OPENER
        )))
    }
}

/// The `file:` URL of a local file (`file:///C:/runs/report.html` on Windows).
pub fn file_url(path: &Path) -> String {
    let text = path.display().to_string();
    // A canonical Windows path is a verbatim one (`\\?\C:\...`): a URL has no such form.
    let text = text
        .strip_prefix(r"\\?\")
        .unwrap_or(&text)
        .replace('\\', "/");
    if text.starts_with('/') {
        format!("file://{text}")
    } else {
        format!("file:///{text}")
    }
}

#[cfg(not(windows))]
mod os {
    use std::path::PathBuf;

    pub const INSTALL_HINT: &str = "install chromium, or name one in KILN_BROWSER";

    /// What opens a file as the desktop would.
    pub const OPENER: &str = "xdg-open";

    /// The browsers tried, in order.
    const NAMES: [&str; 4] = [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ];

    pub fn installed() -> Vec<PathBuf> {
        let Some(path) = std::env::var_os("PATH") else {
            return Vec::new();
        };
        std::env::split_paths(&path)
            .flat_map(|dir| NAMES.iter().map(move |b| dir.join(b)))
            .collect()
    }

    pub fn without_sandbox() -> bool {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Uid:"))
                    .and_then(|ids| ids.split_whitespace().nth(1).map(|e| e == "0"))
            })
            .unwrap_or(false)
    }
}

#[cfg(windows)]
mod os {
    use std::path::PathBuf;

    pub const INSTALL_HINT: &str =
        "install Microsoft Edge or Google Chrome, or name a browser in KILN_BROWSER";

    /// What opens a file as the desktop would.
    pub const OPENER: &str = "explorer.exe";

    pub fn installed() -> Vec<PathBuf> {
        let mut out = Vec::new();
        for (root, app) in [
            (
                "ProgramFiles(x86)",
                r"Microsoft\Edge\Application\msedge.exe",
            ),
            ("ProgramFiles", r"Microsoft\Edge\Application\msedge.exe"),
            ("ProgramFiles", r"Google\Chrome\Application\chrome.exe"),
            ("ProgramFiles(x86)", r"Google\Chrome\Application\chrome.exe"),
            ("LOCALAPPDATA", r"Google\Chrome\Application\chrome.exe"),
        ] {
            if let Some(dir) = std::env::var_os(root) {
                out.push(PathBuf::from(dir).join(app));
            }
        }
        if let Some(path) = std::env::var_os("PATH") {
            for dir in std::env::split_paths(&path) {
                out.push(dir.join("msedge.exe"));
                out.push(dir.join("chrome.exe"));
            }
        }
        out
    }

    pub fn without_sandbox() -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_files_become_file_urls_on_either_os() {
        assert_eq!(
            file_url(Path::new("/runs/a/report.html")),
            "file:///runs/a/report.html"
        );
        assert_eq!(
            file_url(Path::new(r"\\?\C:\Users\ana\kiln-runs\report.html")),
            "file:///C:/Users/ana/kiln-runs/report.html"
        );
    }
}
