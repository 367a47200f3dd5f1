//! Any vendor's PCIe link, AER counters and hwmon sensors from sysfs. Every parser takes
//! a root path so that tests can hand it a fake tree.

use std::path::{Path, PathBuf};

use super::Source;
use super::record::{Reading, Readings, TelemetryData};

/// `16.0 GT/s PCIe`, `8.0 GT/s`, `2.5 GT/s` -> GT/s; `Unknown` -> None.
pub fn parse_link_speed(text: &str) -> Option<f64> {
    let t = text.trim();
    let number = t.split_whitespace().next()?;
    if !t.contains("GT/s") {
        return None;
    }
    number.parse().ok()
}

/// The PCIe generation for a per-lane speed in GT/s.
pub fn generation(gts: f64) -> Option<u32> {
    [
        (2.5, 1),
        (5.0, 2),
        (8.0, 3),
        (16.0, 4),
        (32.0, 5),
        (64.0, 6),
    ]
    .iter()
    .find(|(speed, _)| (gts - speed).abs() < 0.01)
    .map(|(_, g)| *g)
}

/// `16` -> 16; `Unknown` or garbage -> None.
pub fn parse_width(text: &str) -> Option<u32> {
    text.trim().parse().ok()
}

/// The total of an AER counter file: its `TOTAL_ERR_*` line, else the sum of its lines.
pub fn parse_aer(text: &str) -> Option<u64> {
    let mut sum = 0u64;
    let mut seen = false;
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        let (Some(name), Some(value)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Ok(value) = value.parse::<u64>() else {
            continue;
        };
        if name.starts_with("TOTAL_ERR") {
            return Some(value);
        }
        sum += value;
        seen = true;
    }
    seen.then_some(sum)
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

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
                format!("hwmon_{kind}_{label}_{unit}"),
                Reading::Number(value * scale),
            );
        }
    }
    out
}

/// PCIe link state of one device directory.
pub fn read_link(device_dir: &Path) -> Readings {
    let mut out = Readings::new();
    let speed = |file: &str| read(&device_dir.join(file)).and_then(|t| parse_link_speed(&t));
    let width = |file: &str| read(&device_dir.join(file)).and_then(|t| parse_width(&t));
    for (key, value) in [
        ("pcie_speed_gts", speed("current_link_speed")),
        ("pcie_speed_max_gts", speed("max_link_speed")),
    ] {
        out.insert(
            key.into(),
            value.map_or_else(Reading::not_supported, Reading::Number),
        );
        let gen_key = key.replace("speed", "gen").replace("_gts", "");
        let generation = value.and_then(generation);
        out.insert(
            gen_key,
            generation.map_or_else(Reading::not_supported, |g| Reading::Number(f64::from(g))),
        );
    }
    for (key, value) in [
        ("pcie_width", width("current_link_width")),
        ("pcie_width_max", width("max_link_width")),
    ] {
        out.insert(
            key.into(),
            value.map_or_else(Reading::not_supported, |w| Reading::Number(f64::from(w))),
        );
    }
    out
}

/// AER counters of one device directory (absent files: not supported).
pub fn read_aer(device_dir: &Path) -> Readings {
    [
        ("aer_correctable", "aer_dev_correctable"),
        ("aer_nonfatal", "aer_dev_nonfatal"),
        ("aer_fatal", "aer_dev_fatal"),
    ]
    .iter()
    .map(|(key, file)| {
        let value = read(&device_dir.join(file)).and_then(|t| parse_aer(&t));
        (
            (*key).to_owned(),
            value.map_or_else(Reading::not_supported, |v| Reading::Number(v as f64)),
        )
    })
    .collect()
}

/// sysfs as a telemetry source for devices with a known PCI address.
pub struct SysfsSource {
    root: PathBuf,
    devices: Vec<(usize, String)>,
}

impl SysfsSource {
    /// Reads under `root` (`/` in a run) for these (Vulkan index, PCI address) pairs.
    pub fn new(root: &Path, devices: Vec<(usize, String)>) -> SysfsSource {
        SysfsSource {
            root: root.to_owned(),
            devices,
        }
    }

    fn dir(&self, pci: &str) -> PathBuf {
        self.root.join("sys/bus/pci/devices").join(pci)
    }
}

impl Source for SysfsSource {
    fn name(&self) -> &'static str {
        "sysfs"
    }

    fn start(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
        self.devices
            .iter()
            .filter(|(_, pci)| !self.dir(pci).exists())
            .map(|(i, pci)| {
                (
                    Some(*i),
                    TelemetryData::Unavailable {
                        message: format!("no sysfs entry for PCI device {pci}: no PCIe link, AER or hwmon readings"),
                        missing: vec!["pcie_link".into(), "aer".into(), "hwmon".into()],
                        cause: None,
                    },
                )
            })
            .collect()
    }

    fn sample(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
        self.devices
            .iter()
            .filter(|(_, pci)| self.dir(pci).exists())
            .map(|(i, pci)| {
                let dir = self.dir(pci);
                let mut readings = read_link(&dir);
                readings.extend(read_hwmon(&dir));
                (Some(*i), TelemetryData::Sample { readings })
            })
            .collect()
    }

    fn snapshot(&mut self) -> Vec<(usize, Readings)> {
        self.devices
            .iter()
            .filter(|(_, pci)| self.dir(pci).exists())
            .map(|(i, pci)| (*i, read_aer(&self.dir(pci))))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_speeds_and_widths_parse() {
        assert_eq!(parse_link_speed("16.0 GT/s PCIe\n"), Some(16.0));
        assert_eq!(parse_link_speed("8.0 GT/s"), Some(8.0));
        assert_eq!(parse_link_speed("2.5 GT/s PCIe"), Some(2.5));
        assert_eq!(parse_link_speed("Unknown"), None);
        assert_eq!(parse_link_speed("Unknown speed"), None);
        assert_eq!(generation(16.0), Some(4));
        assert_eq!(generation(32.0), Some(5));
        assert_eq!(generation(3.0), None);
        assert_eq!(parse_width("16\n"), Some(16));
        assert_eq!(parse_width("Unknown"), None);
    }

    #[test]
    fn aer_counters_parse() {
        assert_eq!(parse_aer("RxErr 1\nBadTLP 2\nTOTAL_ERR_COR 3\n"), Some(3));
        assert_eq!(parse_aer("Undefined 0\nDLP 4\n"), Some(4));
        assert_eq!(parse_aer(""), None);
    }

    fn fake_tree() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let dev = root.path().join("sys/bus/pci/devices/0000:05:00.0");
        let hw = dev.join("hwmon/hwmon3");
        std::fs::create_dir_all(&hw).unwrap();
        for (file, text) in [
            ("current_link_speed", "8.0 GT/s PCIe\n"),
            ("max_link_speed", "16.0 GT/s PCIe\n"),
            ("current_link_width", "8\n"),
            ("max_link_width", "16\n"),
            ("aer_dev_correctable", "RxErr 0\nTOTAL_ERR_COR 5\n"),
            ("aer_dev_fatal", "TOTAL_ERR_FATAL 0\n"),
        ] {
            std::fs::write(dev.join(file), text).unwrap();
        }
        for (file, text) in [
            ("temp1_input", "45500\n"),
            ("temp1_label", "edge\n"),
            ("temp2_input", "61000\n"),
            ("temp2_label", "junction\n"),
            ("power1_average", "187500000\n"),
            ("freq1_input", "2100000000\n"),
            ("freq1_label", "sclk\n"),
            ("fan1_input", "1450\n"),
        ] {
            std::fs::write(hw.join(file), text).unwrap();
        }
        root
    }

    #[test]
    fn a_fake_tree_reads_in_base_units() {
        let root = fake_tree();
        let mut source = SysfsSource::new(
            root.path(),
            vec![(1, "0000:05:00.0".into()), (2, "0000:06:00.0".into())],
        );
        let start = source.start();
        assert_eq!(
            start.len(),
            1,
            "the device without a sysfs entry is said once"
        );
        assert_eq!(start[0].0, Some(2));
        let samples = source.sample();
        assert_eq!(samples.len(), 1);
        let TelemetryData::Sample { readings } = &samples[0].1 else {
            panic!("a sample");
        };
        let n = |k: &str| readings.get(k).and_then(Reading::number);
        assert_eq!(n("pcie_speed_gts"), Some(8.0));
        assert_eq!(n("pcie_gen"), Some(3.0));
        assert_eq!(n("pcie_gen_max"), Some(4.0));
        assert_eq!(
            (n("pcie_width"), n("pcie_width_max")),
            (Some(8.0), Some(16.0))
        );
        assert_eq!(n("hwmon_temp_edge_c"), Some(45.5));
        assert_eq!(n("hwmon_temp_junction_c"), Some(61.0));
        assert_eq!(n("hwmon_power_power1_w"), Some(187.5));
        assert_eq!(n("hwmon_clock_sclk_mhz"), Some(2100.0));
        assert_eq!(n("hwmon_fan_fan1_rpm"), Some(1450.0));
        let snap = source.snapshot();
        assert_eq!(snap[0].0, 1);
        assert_eq!(snap[0].1["aer_correctable"], Reading::Number(5.0));
        assert_eq!(snap[0].1["aer_fatal"], Reading::Number(0.0));
        assert_eq!(
            snap[0].1["aer_nonfatal"],
            Reading::not_supported(),
            "absent, never zero"
        );
    }
}
