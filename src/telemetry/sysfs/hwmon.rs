//! Generic hwmon sensors under a PCI device, any driver's, in base units; and the hwmon
//! lookups (first directory, labelled temperatures, unit conversions) the vendors share.

use std::path::{Path, PathBuf};

use super::{read, read_number, read_word};
use crate::telemetry::record::{Reading, Readings};
use crate::telemetry::signals;

/// hwmon readings under a PCI device directory, converted to base units: temperatures
/// from millidegrees to °C, power from microwatts to W, clocks from Hz to MHz, fans in RPM.
pub fn read_hwmon(device_dir: &Path) -> Readings {
    let mut out = Readings::new();
    let Ok(entries) = std::fs::read_dir(device_dir.join("hwmon")) else {
        return out;
    };
    let mut dirs: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    dirs.sort();
    for dir in dirs {
        let Ok(files) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut names: Vec<String> = files
            .filter_map(|f| f.ok().map(|f| f.file_name().to_string_lossy().into_owned()))
            .collect();
        names.sort();
        for name in names {
            let Some(stem) = name
                .strip_suffix("_input")
                .or_else(|| name.strip_suffix("_average"))
            else {
                continue;
            };
            let (kind, scale, unit) = if stem.starts_with("temp") {
                ("temp", 1e-3, "c")
            } else if stem.starts_with("power") {
                ("power", 1e-6, "w")
            } else if stem.starts_with("freq") {
                ("clock", 1e-6, "mhz")
            } else if stem.starts_with("fan") {
                ("fan", 1.0, "rpm")
            } else {
                continue;
            };
            let Some(value) = read(&dir.join(&name)).and_then(|v| v.trim().parse::<f64>().ok())
            else {
                continue;
            };
            let label = read(&dir.join(format!("{stem}_label")))
                .map(|l| l.trim().to_ascii_lowercase().replace(' ', "_"))
                .unwrap_or_else(|| stem.to_owned());
            out.insert(
                signals::hwmon(kind, &label, unit),
                Reading::Number(value * scale),
            );
        }
    }
    out
}

pub(super) fn millidegrees_c(path: &Path) -> Option<f64> {
    read_number(path).map(|m| m * 1e-3)
}

pub(super) fn microwatts_w(path: &Path) -> Option<f64> {
    read_number(path).map(|uw| uw * 1e-6)
}

/// A power limit in W; i915 reads 0 for a limit that is disabled, which is no limit rather
/// than a limit of zero.
pub(super) fn limit_w(path: &Path) -> Option<f64> {
    microwatts_w(path).filter(|w| *w > 0.0)
}

/// The device's first `hwmon/hwmonN` directory, where its own driver's sensors are (by N,
/// so that `hwmon10` does not come before `hwmon2`).
pub(super) fn first_hwmon(device_dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(device_dir.join("hwmon"))
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let n: u32 = e
                .file_name()
                .to_str()?
                .strip_prefix("hwmon")?
                .parse()
                .ok()?;
            Some((n, e.path()))
        })
        .min_by_key(|(n, _)| *n)
        .map(|(_, path)| path)
}

/// The temperature (°C) of the `tempN_input` whose `tempN_label` reads `label`, any case.
pub(super) fn temp_labelled(hwmon: &Path, label: &str) -> Option<f64> {
    temp_file_labelled(hwmon, label, "input")
}

/// The critical limit (°C) of the sensor whose `tempN_label` reads `label`: `tempN_crit`,
/// the temperature the driver slows the card at to protect it.
pub(super) fn temp_limit_labelled(hwmon: &Path, label: &str) -> Option<f64> {
    temp_file_labelled(hwmon, label, "crit")
}

/// `tempN_<what>` (°C) of the sensor whose `tempN_label` reads `label`, any case.
fn temp_file_labelled(hwmon: &Path, label: &str, what: &str) -> Option<f64> {
    let mut labels: Vec<String> = std::fs::read_dir(hwmon)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("temp") && n.ends_with("_label"))
        .collect();
    labels.sort();
    let file = labels
        .iter()
        .find(|n| read_word(&hwmon.join(n)).is_some_and(|l| l.eq_ignore_ascii_case(label)))?;
    let stem = file.strip_suffix("_label")?;
    millidegrees_c(&hwmon.join(format!("{stem}_{what}")))
}
