//! Any vendor's PCIe link, AER counters and hwmon sensors from sysfs; and for amdgpu, i915
//! and xe devices their gauges, RAS counters and identity under the names NVML's signals
//! have, so that the verdict and `kiln health` judge every vendor by the same rules. Every
//! parser takes a root path so that tests can hand it a fake tree.
//! One concern a file: `pcie`, `hwmon`, `amdgpu`, `intel`; here the source, its `Source`
//! impl, the driver it dispatches on, the identity and the file reading they share.

mod amdgpu;
mod hwmon;
mod intel;
mod pcie;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::record::{Reading, Readings, TelemetryData};
use super::throttle::{self, ThrottleReason};
use super::{Gap, Source, gpu_metrics, signals};
use hwmon::{first_hwmon, temp_limit_labelled};
use intel::{energy_uj, power_from_energy};

pub use amdgpu::{
    BadPages, DpmClocks, RasCounts, parse_bad_pages, parse_dpm, parse_ras, read_amdgpu_gauges,
    read_amdgpu_ras, read_gpu_metrics,
};

pub use hwmon::read_hwmon;
pub use intel::{read_intel_gauges, read_intel_throttle};
pub use pcie::{
    generation, parse_aer, parse_link_speed, parse_width, read_aer, read_link, theoretical_gbps,
    transfer_rate_gts,
};

/// The directory that stands for `/` when kiln reads the machine: env `KILN_SYSTEM_ROOT`
/// (a test hook that points at a fixture tree) when set and not empty, else `/`. The one
/// place the hook is read: the inventory's `System` and the live sources both take it.
pub fn system_root() -> PathBuf {
    std::env::var_os("KILN_SYSTEM_ROOT")
        .filter(|r| !r.is_empty())
        .map_or_else(|| PathBuf::from("/"), PathBuf::from)
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The vendor drivers whose own files this source reads; any other driver gets only the
/// PCIe link, AER and generic hwmon readings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// AMD's `amdgpu`.
    Amdgpu,
    /// Intel's `i915`.
    I915,
    /// Intel's `xe`.
    Xe,
}

impl Driver {
    /// The kernel module's name, as the `driver` link and `/sys/module` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Driver::Amdgpu => "amdgpu",
            Driver::I915 => "i915",
            Driver::Xe => "xe",
        }
    }

    /// The vendor driver a PCI device directory is bound to, by the basename of its
    /// `driver` link; None for any other driver, or none.
    pub fn of(device_dir: &Path) -> Option<Driver> {
        let link = std::fs::read_link(device_dir.join("driver")).ok()?;
        match link.file_name()?.to_str()? {
            "amdgpu" => Some(Driver::Amdgpu),
            "i915" => Some(Driver::I915),
            "xe" => Some(Driver::Xe),
            _ => None,
        }
    }
}

fn read_word(path: &Path) -> Option<String> {
    let word = read(path)?.trim().to_owned();
    (!word.is_empty()).then_some(word)
}

fn read_number(path: &Path) -> Option<f64> {
    read(path)?.trim().parse().ok()
}

/// Inserts a reading the device offers; one it does not is left absent.
fn put(out: &mut Readings, key: &str, value: Option<f64>) {
    if let Some(v) = value {
        out.insert(key.to_owned(), Reading::Number(v));
    }
}

/// Reasons as a sample records them: as NVML's mask of them would be, by NVML's names.
fn as_reading(reasons: &[ThrottleReason]) -> Reading {
    throttle::reading(reasons.iter().fold(0, |mask, r| mask | r.bit()))
}

/// Who an amdgpu / i915 / xe device is, from the files it has: `name`, `serial`, `vbios`,
/// `unique_id`, `driver_version` where present, and always `kernel_driver`.
pub fn read_identity(root: &Path, device_dir: &Path, driver: Driver) -> Readings {
    let mut out = Readings::new();
    for (key, path) in [
        (signals::NAME.name, device_dir.join("product_name")),
        (signals::SERIAL.name, device_dir.join("serial_number")),
        (signals::VBIOS.name, device_dir.join("vbios_version")),
        (signals::UNIQUE_ID.name, device_dir.join("unique_id")),
        (
            signals::DRIVER_VERSION.name,
            root.join("sys/module").join(driver.name()).join("version"),
        ),
    ] {
        if let Some(word) = read_word(&path) {
            out.insert(key.into(), Reading::Text(word));
        }
    }
    out.insert(
        signals::KERNEL_DRIVER.name.into(),
        Reading::Text(driver.name().to_owned()),
    );
    // The board's maker (`0x1043`): the PCI subsystem vendor, not the chip's vendor.
    if let Some(id) = read_word(&device_dir.join("subsystem_vendor"))
        .and_then(|w| u32::from_str_radix(w.trim_start_matches("0x"), 16).ok())
    {
        out.insert(
            signals::PCI_SUBSYSTEM_VENDOR_ID.name.into(),
            Reading::Number(f64::from(id)),
        );
    }
    // The limits the driver protects the die and the memory at (amdgpu's junction and mem
    // sensors), so that a hot card is judged against its own.
    if let Some(hwmon) = first_hwmon(device_dir) {
        for (key, label) in [
            (signals::TEMP_HOTSPOT_MAX_C.name, "junction"),
            (signals::TEMP_MEM_MAX_C.name, "mem"),
        ] {
            if let Some(limit) = temp_limit_labelled(&hwmon, label) {
                out.insert(key.into(), Reading::Number(limit));
            }
        }
    }
    out
}

/// sysfs as a telemetry source for devices with a known PCI address.
pub struct SysfsSource {
    root: PathBuf,
    devices: Vec<(usize, String)>,
    /// The last energy-counter reading (µJ) per device, for i915 / xe power.
    last_energy: BTreeMap<usize, (Instant, u64)>,
    /// The last throttle residency counters per device (MI300's `gpu_metrics`).
    last_residency: BTreeMap<usize, gpu_metrics::Residency>,
}

impl SysfsSource {
    /// Reads under `root` (`/` in a run) for these (Vulkan index, PCI address) pairs.
    pub fn new(root: &Path, devices: Vec<(usize, String)>) -> SysfsSource {
        SysfsSource {
            root: root.to_owned(),
            devices,
            last_energy: BTreeMap::new(),
            last_residency: BTreeMap::new(),
        }
    }

    /// Reads under `root` for the targets that have a PCI address.
    pub fn for_targets(root: &Path, devices: &[super::Target]) -> SysfsSource {
        SysfsSource::new(root, super::with_pci(devices))
    }

    fn dir(&self, pci: &str) -> PathBuf {
        self.root.join("sys/bus/pci/devices").join(pci)
    }

    /// What is missing for a device without a sysfs entry.
    fn no_entry(device: usize, pci: &str) -> Gap {
        Gap {
            device: Some(device),
            message: format!(
                "no sysfs entry for PCI device {pci}: no PCIe link, AER or hwmon readings"
            ),
            missing: vec![
                signals::group::PCIE_LINK.into(),
                signals::group::AER.into(),
                signals::group::HWMON.into(),
            ],
            cause: None,
        }
    }

    /// `sample` at a given instant, so that tests can step the energy counter's clock.
    fn sample_at(&mut self, now: Instant) -> Vec<(Option<usize>, TelemetryData)> {
        let mut out = Vec::new();
        for (i, pci) in &self.devices {
            let dir = self.dir(pci);
            if !dir.exists() {
                continue;
            }
            let mut readings = read_link(&dir);
            readings.extend(read_hwmon(&dir));
            match Driver::of(&dir) {
                Some(Driver::Amdgpu) => {
                    readings.extend(read_amdgpu_gauges(&dir));
                    let last = self.last_residency.get(i).copied();
                    match read_gpu_metrics(&dir, &mut readings, last) {
                        Some(r) => self.last_residency.insert(*i, r),
                        None => self.last_residency.remove(i),
                    };
                }
                Some(driver @ (Driver::I915 | Driver::Xe)) => {
                    readings.extend(read_intel_gauges(&dir, driver));
                    if let Some(reasons) = read_intel_throttle(&dir, driver) {
                        readings.insert(signals::THROTTLE_REASONS.name.into(), reasons);
                    }
                    let energy = energy_uj(&dir);
                    // Power is over one tick: a tick without a reading starts afresh.
                    let previous = match energy {
                        Some(e) => self.last_energy.insert(*i, (now, e)),
                        None => self.last_energy.remove(i),
                    };
                    let power = previous
                        .zip(energy)
                        .and_then(|(before, e)| power_from_energy(before, (now, e)));
                    put(&mut readings, signals::POWER_W.name, power);
                }
                None => {}
            }
            out.push((Some(*i), TelemetryData::Sample { readings }));
        }
        out
    }
}

impl Source for SysfsSource {
    fn name(&self) -> &'static str {
        "sysfs"
    }

    fn status(&self) -> Vec<Gap> {
        self.devices
            .iter()
            .filter(|(_, pci)| !self.dir(pci).exists())
            .map(|(i, pci)| Self::no_entry(*i, pci))
            .collect()
    }

    /// amdgpu, i915 and xe devices only: other drivers' identity comes from their
    /// vendor's library (NVML for NVIDIA), and a second, thinner one would overwrite its
    /// fields.
    fn identity(&self, device: usize) -> Option<Readings> {
        let (_, pci) = self.devices.iter().find(|(i, _)| *i == device)?;
        let dir = self.dir(pci);
        let driver = Driver::of(&dir)?;
        Some(read_identity(&self.root, &dir, driver))
    }

    fn start(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
        let mut out = Vec::new();
        for (i, pci) in &self.devices {
            if !self.dir(pci).exists() {
                out.push(Self::no_entry(*i, pci).record());
            } else if let Some(fields) = self.identity(*i) {
                out.push((Some(*i), TelemetryData::Identity { fields }));
            }
        }
        out
    }

    fn sample(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
        self.sample_at(Instant::now())
    }

    fn snapshot(&mut self) -> Vec<(usize, Readings)> {
        self.devices
            .iter()
            .filter(|(_, pci)| self.dir(pci).exists())
            .map(|(i, pci)| {
                let dir = self.dir(pci);
                let mut counters = read_aer(&dir);
                if Driver::of(&dir) == Some(Driver::Amdgpu) {
                    counters.extend(read_amdgpu_ras(&dir));
                }
                (*i, counters)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn fake_tree() -> tempfile::TempDir {
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
        let gaps = source.status();
        assert_eq!(gaps.len(), 1, "known before the start");
        assert_eq!(gaps[0].device, Some(2));
        assert_eq!(source.identity(1), None, "no vendor driver, no identity");
        let start = source.start();
        assert_eq!(
            start.len(),
            1,
            "the device without a sysfs entry is said once"
        );
        assert_eq!(start[0], gaps[0].clone().record());
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

    pub(super) const BDF: &str = "0000:c1:00.0";

    /// A PCI device directory bound to `driver`, with these files (parents made as needed).
    pub(super) fn device(root: &Path, driver: &str, files: &[(&str, &str)]) -> PathBuf {
        let dev = root.join("sys/bus/pci/devices").join(BDF);
        std::fs::create_dir_all(&dev).unwrap();
        std::os::unix::fs::symlink(
            format!("../../../bus/pci/drivers/{driver}"),
            dev.join("driver"),
        )
        .unwrap();
        write_files(&dev, files);
        dev
    }

    pub(super) fn write_files(dir: &Path, files: &[(&str, &str)]) {
        for (file, text) in files {
            let path = dir.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
    }

    pub(super) fn source(root: &Path) -> SysfsSource {
        SysfsSource::new(root, vec![(0, BDF.into())])
    }

    pub(super) fn sample_at(source: &mut SysfsSource, now: Instant) -> Readings {
        let mut samples = source.sample_at(now);
        assert_eq!(samples.len(), 1);
        let (device, TelemetryData::Sample { readings }) = samples.remove(0) else {
            panic!("a sample");
        };
        assert_eq!(device, Some(0));
        readings
    }

    #[test]
    fn other_drivers_get_no_vendor_readings_or_identity() {
        let root = tempfile::tempdir().unwrap();
        device(
            root.path(),
            "nvidia",
            &[
                ("current_link_speed", "16.0 GT/s PCIe\n"),
                ("gpu_busy_percent", "50\n"),
                ("pp_dpm_sclk", "0: 500Mhz *\n"),
                ("product_name", "not ours\n"),
                ("hwmon/hwmon1/temp1_input", "40000\n"),
                ("hwmon/hwmon1/temp1_label", "edge\n"),
                ("hwmon/hwmon1/energy1_input", "1000\n"),
                ("ras/umc_err_count", "ue: 9\nce: 9\n"),
            ],
        );
        let mut source = source(root.path());
        assert!(source.start().is_empty(), "NVML says who an NVIDIA GPU is");
        let t0 = Instant::now();
        sample_at(&mut source, t0);
        let readings = sample_at(&mut source, t0 + std::time::Duration::from_secs(1));
        let vendor = [
            "util_gpu_pct",
            "clock_sm_mhz",
            "gpu_temp_c",
            "power_w",
            "power_limit_enforced_w",
        ];
        for key in vendor {
            assert!(!readings.contains_key(key), "{key}");
        }
        assert_eq!(readings["pcie_gen"], Reading::Number(4.0));
        assert_eq!(readings["hwmon_temp_edge_c"], Reading::Number(40.0));
        let counters = &source.snapshot()[0].1;
        assert!(
            !counters.keys().any(|k| k.starts_with("ecc_")
                || k.starts_with("ras_")
                || k.starts_with("retired_")),
            "{counters:?}"
        );
    }
}
