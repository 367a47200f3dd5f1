//! Any vendor's PCIe link, AER counters and hwmon sensors from sysfs; and for amdgpu, i915
//! and xe devices their gauges, RAS counters and identity under the names NVML's signals
//! have, so that the verdict and `kiln health` judge every vendor by the same rules. Every
//! parser takes a root path so that tests can hand it a fake tree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::record::{Reading, Readings, TelemetryData};
use super::throttle::{self, ThrottleReason};
use super::{Gap, Source, gpu_metrics, signals};

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

/// PCIe link state of one device directory, and the maxima of the port above it (the slot,
/// or a switch's port) where sysfs has them: a card can only be as fast as its slot, and
/// which of the two limits the link is a different answer.
pub fn read_link(device_dir: &Path) -> Readings {
    let mut out = Readings::new();
    // The device's directory lies under its upstream port's in the device tree.
    let port = std::fs::canonicalize(device_dir)
        .ok()
        .and_then(|d| d.parent().map(Path::to_path_buf))
        .filter(|p| p.join("max_link_speed").is_file());
    if let Some(port) = port {
        let slot_speed = read(&port.join("max_link_speed")).and_then(|t| parse_link_speed(&t));
        if let Some(g) = slot_speed.and_then(generation) {
            out.insert(
                signals::PCIE_SLOT_GEN_MAX.name.into(),
                Reading::Number(f64::from(g)),
            );
        }
        if let Some(w) = read(&port.join("max_link_width")).and_then(|t| parse_width(&t)) {
            out.insert(
                signals::PCIE_SLOT_WIDTH_MAX.name.into(),
                Reading::Number(f64::from(w)),
            );
        }
    }
    let speed = |file: &str| read(&device_dir.join(file)).and_then(|t| parse_link_speed(&t));
    let width = |file: &str| read(&device_dir.join(file)).and_then(|t| parse_width(&t));
    for (key, gen_key, value) in [
        (
            signals::PCIE_SPEED_GTS,
            signals::PCIE_GEN,
            speed("current_link_speed"),
        ),
        (
            signals::PCIE_SPEED_MAX_GTS,
            signals::PCIE_GEN_MAX,
            speed("max_link_speed"),
        ),
    ] {
        out.insert(
            key.name.into(),
            value.map_or_else(Reading::not_supported, Reading::Number),
        );
        let generation = value.and_then(generation);
        out.insert(
            gen_key.name.into(),
            generation.map_or_else(Reading::not_supported, |g| Reading::Number(f64::from(g))),
        );
    }
    for (key, value) in [
        (signals::PCIE_WIDTH.name, width("current_link_width")),
        (signals::PCIE_WIDTH_MAX.name, width("max_link_width")),
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
        (signals::AER_CORRECTABLE.name, "aer_dev_correctable"),
        (signals::AER_NONFATAL.name, "aer_dev_nonfatal"),
        (signals::AER_FATAL.name, "aer_dev_fatal"),
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

/// One amdgpu `pp_dpm_*` clock table.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DpmClocks {
    /// The level marked `*`, if one is.
    pub current_mhz: Option<f64>,
    /// The highest level listed.
    pub max_mhz: Option<f64>,
}

/// `pp_dpm_sclk` / `pp_dpm_mclk` text (`0: 500Mhz`, `1: 1800Mhz *`, `MHz` too); lines
/// that are not a level are skipped.
pub fn parse_dpm(text: &str) -> DpmClocks {
    let mut out = DpmClocks::default();
    for line in text.lines() {
        let Some((_, level)) = line.split_once(':') else {
            continue;
        };
        let level = level.trim();
        let current = level.ends_with('*');
        let Some(mhz) = strip_mhz(level.trim_end_matches('*').trim())
            .and_then(|n| n.trim().parse::<f64>().ok())
        else {
            continue;
        };
        if current {
            out.current_mhz = Some(mhz);
        }
        out.max_mhz = Some(out.max_mhz.map_or(mhz, |m| m.max(mhz)));
    }
    out
}

/// `1800Mhz` / `1800MHz` -> `1800`.
fn strip_mhz(text: &str) -> Option<&str> {
    let split = text.len().checked_sub(3)?;
    let unit = text.get(split..)?;
    unit.eq_ignore_ascii_case("mhz")
        .then(|| text.get(..split))
        .flatten()
}

/// The error counts of one amdgpu RAS block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RasCounts {
    /// Uncorrectable errors (`ue:`).
    pub uncorrected: Option<u64>,
    /// Correctable errors (`ce:`).
    pub corrected: Option<u64>,
}

/// A `ras/<block>_err_count` file: `ue: N` and `ce: N` lines; other lines (`de:` on newer
/// kernels) are skipped.
pub fn parse_ras(text: &str) -> RasCounts {
    let mut out = RasCounts::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let Ok(value) = value.trim().parse::<u64>() else {
            continue;
        };
        match key.trim().to_ascii_lowercase().as_str() {
            "ue" => out.uncorrected = Some(value),
            "ce" => out.corrected = Some(value),
            _ => {}
        }
    }
    out
}

/// The pages of amdgpu's `ras/gpu_vram_bad_pages`, by state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BadPages {
    /// `R`: reserved, that is retired from use.
    pub retired: u64,
    /// `P`: waiting to be reserved.
    pub pending: u64,
    /// `F`: could not be reserved.
    pub failed: u64,
}

/// `gpu_vram_bad_pages` text (`0x00000001 : 0x00001000 : R`); unknown flags are ignored.
pub fn parse_bad_pages(text: &str) -> BadPages {
    let mut out = BadPages::default();
    for line in text.lines() {
        let Some((_, flag)) = line.rsplit_once(':') else {
            continue;
        };
        match flag.trim() {
            "R" => out.retired += 1,
            "P" => out.pending += 1,
            "F" => out.failed += 1,
            _ => {}
        }
    }
    out
}

fn read_word(path: &Path) -> Option<String> {
    let word = read(path)?.trim().to_owned();
    (!word.is_empty()).then_some(word)
}

fn read_number(path: &Path) -> Option<f64> {
    read(path)?.trim().parse().ok()
}

fn read_u64(path: &Path) -> Option<u64> {
    read(path)?.trim().parse().ok()
}

fn millidegrees_c(path: &Path) -> Option<f64> {
    read_number(path).map(|m| m * 1e-3)
}

fn microwatts_w(path: &Path) -> Option<f64> {
    read_number(path).map(|uw| uw * 1e-6)
}

/// A power limit in W; i915 reads 0 for a limit that is disabled, which is no limit rather
/// than a limit of zero.
fn limit_w(path: &Path) -> Option<f64> {
    microwatts_w(path).filter(|w| *w > 0.0)
}

/// Inserts a reading the device offers; one it does not is left absent.
fn put(out: &mut Readings, key: &str, value: Option<f64>) {
    if let Some(v) = value {
        out.insert(key.to_owned(), Reading::Number(v));
    }
}

/// `[a-z0-9_]+`.
fn is_plain_name(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The counter, or `not_supported` where the device does not offer it.
fn count(value: Option<u64>) -> Reading {
    value.map_or_else(Reading::not_supported, |v| Reading::Number(v as f64))
}

/// The device's first `hwmon/hwmonN` directory, where its own driver's sensors are (by N,
/// so that `hwmon10` does not come before `hwmon2`).
fn first_hwmon(device_dir: &Path) -> Option<PathBuf> {
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
fn temp_labelled(hwmon: &Path, label: &str) -> Option<f64> {
    temp_file_labelled(hwmon, label, "input")
}

/// The critical limit (°C) of the sensor whose `tempN_label` reads `label`: `tempN_crit`,
/// the temperature the driver slows the card at to protect it.
fn temp_limit_labelled(hwmon: &Path, label: &str) -> Option<f64> {
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

/// What a device's `gpu_metrics` table says, laid under NVML's names where the device's
/// other files did not say it (hwmon and the DPM tables come first: they are what the
/// driver reports to everyone), and its throttle status as reasons. `last` is the table's
/// throttle residency at the previous tick (MI300), which its reasons are measured against;
/// the new one is returned for the next tick. A table kiln cannot decode says why in
/// place of the reasons, never as "none".
pub fn read_gpu_metrics(
    device_dir: &Path,
    out: &mut Readings,
    last: Option<gpu_metrics::Residency>,
) -> Option<gpu_metrics::Residency> {
    let bytes = std::fs::read(device_dir.join("gpu_metrics")).ok()?;
    let m = match gpu_metrics::decode(&bytes) {
        Ok(m) => m,
        Err(e) => {
            let why = match e {
                gpu_metrics::MetricsError::Short { .. } => "short_table",
                gpu_metrics::MetricsError::Unknown { .. } => "unknown_layout",
            };
            out.insert(
                signals::THROTTLE_REASONS.name.into(),
                Reading::Unavailable {
                    unavailable: why.into(),
                },
            );
            return None;
        }
    };
    for (key, value) in [
        (signals::GPU_TEMP_C.name, m.temp_edge_c),
        (signals::GPU_HOTSPOT_TEMP_C.name, m.temp_hotspot_c),
        (signals::HBM_TEMP_C.name, m.temp_mem_c),
        (signals::POWER_W.name, m.power_w),
        (signals::CLOCK_SM_MHZ.name, m.gfxclk_mhz),
        (signals::CLOCK_MEM_MHZ.name, m.uclk_mhz),
    ] {
        if !out.contains_key(key) {
            put(out, key, value);
        }
    }
    let reasons: Option<Vec<ThrottleReason>> = match (m.throttlers, m.residency, last) {
        (Some(bits), ..) => Some(gpu_metrics::reasons_of(bits)),
        // A reason held for most of the tick holds in its sample.
        (None, Some(now), Some(before)) => now.since(&before).map(|shares| {
            shares
                .into_iter()
                .filter(|(_, share)| *share >= 0.5)
                .map(|(r, _)| r)
                .collect()
        }),
        _ => None,
    };
    if let Some(reasons) = reasons {
        out.insert(signals::THROTTLE_REASONS.name.into(), as_reading(&reasons));
    }
    m.residency
}

/// Reasons as a sample records them: as NVML's mask of them would be, by NVML's names.
fn as_reading(reasons: &[ThrottleReason]) -> Reading {
    throttle::reading(reasons.iter().fold(0, |mask, r| mask | r.bit()))
}

/// Why an Intel GT's clocks are held, from the driver's throttle files (i915:
/// `drm/cardN/gt/gt0/throttle_reason_*`; xe: `tile0/gt0/freq0/throttle/reason_*`), each `1`
/// while it holds, as NVML's reasons: the power limits (PL1, PL2, PL4) and the regulator's
/// current limit as a power cap, the thermal and running-average thermal limits as thermal
/// slowdown, PROCHOT and the regulator's thermal alert as hardware slowdown.
pub fn read_intel_throttle(device_dir: &Path, driver: Driver) -> Option<Reading> {
    let (dir, prefix) = if driver == Driver::Xe {
        (device_dir.join("tile0/gt0/freq0/throttle"), "reason_")
    } else {
        (first_card(device_dir)?.join("gt/gt0"), "throttle_reason_")
    };
    if !dir.is_dir() {
        return None;
    }
    let reasons: Vec<ThrottleReason> = [
        ("pl1", ThrottleReason::SwPowerCap),
        ("pl2", ThrottleReason::SwPowerCap),
        ("pl4", ThrottleReason::SwPowerCap),
        ("vr_tdc", ThrottleReason::SwPowerCap),
        ("thermal", ThrottleReason::SwThermalSlowdown),
        ("ratl", ThrottleReason::SwThermalSlowdown),
        ("prochot", ThrottleReason::HwSlowdown),
        ("vr_thermalert", ThrottleReason::HwSlowdown),
    ]
    .into_iter()
    .filter(|(file, _)| read_number(&dir.join(format!("{prefix}{file}"))) == Some(1.0))
    .map(|(_, r)| r)
    .collect();
    Some(as_reading(&reasons))
}

/// The first `drm/cardN` directory of an i915 device.
fn first_card(device_dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(device_dir.join("drm"))
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let n: u32 = e.file_name().to_str()?.strip_prefix("card")?.parse().ok()?;
            Some((n, e.path()))
        })
        .min_by_key(|(n, _)| *n)
        .map(|(_, path)| path)
}

/// amdgpu gauges under NVML's names: utilisation, VRAM, clocks, temperatures, power and
/// fan. What the device does not offer is absent.
pub fn read_amdgpu_gauges(device_dir: &Path) -> Readings {
    let mut out = Readings::new();
    for (key, file) in [
        (signals::UTIL_GPU_PCT.name, "gpu_busy_percent"),
        (signals::UTIL_MEM_PCT.name, "mem_busy_percent"),
        (signals::MEM_USED_BYTES.name, "mem_info_vram_used"),
        (signals::MEM_TOTAL_BYTES.name, "mem_info_vram_total"),
    ] {
        put(&mut out, key, read_number(&device_dir.join(file)));
    }
    for (now, max, file) in [
        (
            signals::CLOCK_SM_MHZ,
            signals::CLOCK_SM_MAX_MHZ,
            "pp_dpm_sclk",
        ),
        (
            signals::CLOCK_MEM_MHZ,
            signals::CLOCK_MEM_MAX_MHZ,
            "pp_dpm_mclk",
        ),
    ] {
        let table = read(&device_dir.join(file))
            .map(|t| parse_dpm(&t))
            .unwrap_or_default();
        put(&mut out, now.name, table.current_mhz);
        put(&mut out, max.name, table.max_mhz);
    }
    let Some(hwmon) = first_hwmon(device_dir) else {
        return out;
    };
    for (key, label) in [
        (signals::GPU_TEMP_C.name, "edge"),
        (signals::GPU_HOTSPOT_TEMP_C.name, "junction"),
        (signals::HBM_TEMP_C.name, "mem"),
    ] {
        put(&mut out, key, temp_labelled(&hwmon, label));
    }
    // Newer kernels drop `power1_average` for `power1_input`; both are the board's power.
    let power = microwatts_w(&hwmon.join("power1_average"))
        .or_else(|| microwatts_w(&hwmon.join("power1_input")));
    put(&mut out, signals::POWER_W.name, power);
    put(
        &mut out,
        signals::POWER_LIMIT_ENFORCED_W.name,
        limit_w(&hwmon.join("power1_cap")),
    );
    put(
        &mut out,
        signals::POWER_LIMIT_DEFAULT_W.name,
        limit_w(&hwmon.join("power1_cap_default")),
    );
    put(
        &mut out,
        signals::FAN0_RPM.name,
        read_number(&hwmon.join("fan1_input")),
    );
    out
}

/// i915 / xe gauges under NVML's names: power limits, temperature and GT clocks. Their
/// power is an energy counter, which takes two readings: `SysfsSource` keeps the last one.
pub fn read_intel_gauges(device_dir: &Path, driver: Driver) -> Readings {
    let mut out = Readings::new();
    if let Some(hwmon) = first_hwmon(device_dir) {
        put(
            &mut out,
            signals::POWER_LIMIT_ENFORCED_W.name,
            limit_w(&hwmon.join("power1_max")),
        );
        put(
            &mut out,
            signals::POWER_LIMIT_DEFAULT_W.name,
            limit_w(&hwmon.join("power1_rated_max")),
        );
        let temp =
            millidegrees_c(&hwmon.join("temp1_input")).or_else(|| temp_labelled(&hwmon, "pkg"));
        put(&mut out, signals::GPU_TEMP_C.name, temp);
    }
    let (actual, rp0) = if driver == Driver::Xe {
        let freq = device_dir.join("tile0/gt0/freq0");
        (freq.join("act_freq"), freq.join("rp0_freq"))
    } else {
        let Some(card) = first_card(device_dir) else {
            return out;
        };
        (card.join("gt_act_freq_mhz"), card.join("gt_RP0_freq_mhz"))
    };
    put(&mut out, signals::CLOCK_SM_MHZ.name, read_number(&actual));
    put(&mut out, signals::CLOCK_SM_MAX_MHZ.name, read_number(&rp0));
    out
}

/// An i915 / xe energy counter (`hwmon*/energy1_input`), µJ.
fn energy_uj(device_dir: &Path) -> Option<u64> {
    read_u64(&first_hwmon(device_dir)?.join("energy1_input"))
}

/// Mean power (W) between two readings of a µJ energy counter; None when the counter went
/// backwards (wrapped, or the driver reloaded) or no time passed.
fn power_from_energy(before: (Instant, u64), after: (Instant, u64)) -> Option<f64> {
    let seconds = after.0.checked_duration_since(before.0)?.as_secs_f64();
    let joules = after.1.checked_sub(before.1)? as f64 * 1e-6;
    (seconds > 0.0).then(|| joules / seconds)
}

/// amdgpu RAS counters: block `umc` (the memory) as NVML's volatile ECC counts, since both
/// count from driver load; every other block as `ras_<block>_ue` / `_ce`, with their
/// uncorrectable sum as `ras_uncorrected_other`; the bad-page list as retired pages.
/// Nothing at all for a device without a `ras` directory.
pub fn read_amdgpu_ras(device_dir: &Path) -> Readings {
    let mut out = Readings::new();
    let ras = device_dir.join("ras");
    let Ok(entries) = std::fs::read_dir(&ras) else {
        return out;
    };
    let blocks: Vec<(String, RasCounts)> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name().into_string().ok()?;
            let block = name.strip_suffix("_err_count")?;
            // A file name becomes a signal name: keep it to what names are made of.
            if !is_plain_name(block) {
                return None;
            }
            Some((block.to_owned(), parse_ras(&read(&e.path())?)))
        })
        .collect();
    // A RAS directory without a memory block: the device does not report ECC here.
    out.insert(
        signals::ECC_UNCORRECTED_VOLATILE.name.into(),
        Reading::not_supported(),
    );
    out.insert(
        signals::ECC_CORRECTED_VOLATILE.name.into(),
        Reading::not_supported(),
    );
    let mut other_uncorrected: Option<u64> = None;
    for (block, counts) in blocks {
        if block == "umc" {
            out.insert(
                signals::ECC_UNCORRECTED_VOLATILE.name.into(),
                count(counts.uncorrected),
            );
            out.insert(
                signals::ECC_CORRECTED_VOLATILE.name.into(),
                count(counts.corrected),
            );
            continue;
        }
        let as_f64 = |v: Option<u64>| v.map(|v| v as f64);
        put(
            &mut out,
            &signals::ras_ue(&block),
            as_f64(counts.uncorrected),
        );
        put(&mut out, &signals::ras_ce(&block), as_f64(counts.corrected));
        if let Some(ue) = counts.uncorrected {
            other_uncorrected = Some(other_uncorrected.unwrap_or(0).saturating_add(ue));
        }
    }
    put(
        &mut out,
        signals::RAS_UNCORRECTED_OTHER.name,
        other_uncorrected.map(|v| v as f64),
    );
    let pages = read(&ras.join("gpu_vram_bad_pages")).map(|t| parse_bad_pages(&t));
    out.insert(
        signals::RETIRED_PAGES_DBE.name.into(),
        count(pages.map(|p| p.retired)),
    );
    out.insert(
        signals::RETIRED_PAGES_PENDING.name.into(),
        count(pages.map(|p| p.pending)),
    );
    out.insert(
        signals::RETIRED_PAGES_FAILED.name.into(),
        count(pages.map(|p| p.failed)),
    );
    out
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
    fn the_slot_s_maxima_are_read_apart_from_the_card_s() {
        // A Gen5 x16 card below a Gen4 x16 root port, as the device tree nests them.
        let root = tempfile::tempdir().unwrap();
        let port = root.path().join("sys/devices/pci0000:00/0000:00:01.0");
        let card = port.join("0000:01:00.0");
        std::fs::create_dir_all(&card).unwrap();
        for (dir, speed, width) in [
            (&port, "16.0 GT/s PCIe\n", "16\n"),
            (&card, "32.0 GT/s PCIe\n", "16\n"),
        ] {
            std::fs::write(dir.join("max_link_speed"), speed).unwrap();
            std::fs::write(dir.join("max_link_width"), width).unwrap();
        }
        std::fs::write(card.join("current_link_speed"), "16.0 GT/s PCIe\n").unwrap();
        std::fs::write(card.join("current_link_width"), "16\n").unwrap();
        let bus = root.path().join("sys/bus/pci/devices");
        std::fs::create_dir_all(&bus).unwrap();
        std::os::unix::fs::symlink(&card, bus.join("0000:01:00.0")).unwrap();
        let link = read_link(&bus.join("0000:01:00.0"));
        let n = |k: &str| link.get(k).and_then(Reading::number);
        assert_eq!(n(signals::PCIE_GEN_MAX.name), Some(5.0));
        assert_eq!(n(signals::PCIE_SLOT_GEN_MAX.name), Some(4.0));
        assert_eq!(n(signals::PCIE_SLOT_WIDTH_MAX.name), Some(16.0));
        assert_eq!(n(signals::PCIE_GEN.name), Some(4.0));
        // A device with no port above it in the tree says nothing of a slot.
        let flat = read_link(&fake_tree().path().join("sys/bus/pci/devices/0000:05:00.0"));
        assert!(!flat.contains_key(signals::PCIE_SLOT_GEN_MAX.name));
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

    #[test]
    fn dpm_tables_parse() {
        let sclk = parse_dpm("0: 500Mhz\n1: 1800Mhz *\n2: 2100Mhz\n");
        assert_eq!(sclk.current_mhz, Some(1800.0));
        assert_eq!(sclk.max_mhz, Some(2100.0));
        let mclk = parse_dpm("0: 900MHz \n1: 1300MHz  *\n");
        assert_eq!(
            (mclk.current_mhz, mclk.max_mhz),
            (Some(1300.0), Some(1300.0))
        );
        let unmarked = parse_dpm("0: 500Mhz\n1: 1800Mhz\n");
        assert_eq!(unmarked.current_mhz, None, "no level marked: no current");
        assert_eq!(unmarked.max_mhz, Some(1800.0));
        assert_eq!(parse_dpm("OD_SCLK:\n0: 500\n"), DpmClocks::default());
        assert_eq!(parse_dpm(""), DpmClocks::default());
    }

    #[test]
    fn ras_counts_parse() {
        assert_eq!(
            parse_ras("ue: 0\nce: 3\n"),
            RasCounts {
                uncorrected: Some(0),
                corrected: Some(3)
            }
        );
        assert_eq!(
            parse_ras("  UE :   2  \n\tce:7\t\nde: 1\n\n"),
            RasCounts {
                uncorrected: Some(2),
                corrected: Some(7)
            }
        );
        assert_eq!(parse_ras("ue: lots\n"), RasCounts::default());
    }

    #[test]
    fn bad_pages_parse() {
        let pages = parse_bad_pages(
            "0x00000001 : 0x00001000 : R\n0x00000002 : 0x00001000 : R\n\
             0x00000003 : 0x00001000 : P\n0x00000004 : 0x00001000 : F\n\
             0x00000005 : 0x00001000 : X\ngarbage\n",
        );
        assert_eq!(
            pages,
            BadPages {
                retired: 2,
                pending: 1,
                failed: 1
            }
        );
        assert_eq!(parse_bad_pages(""), BadPages::default());
    }

    #[test]
    fn energy_deltas_give_power() {
        let t0 = Instant::now();
        let t1 = t0 + std::time::Duration::from_millis(500);
        assert_eq!(
            power_from_energy((t0, 1_000), (t1, 50_001_000)),
            Some(100.0)
        );
        assert_eq!(power_from_energy((t0, 5), (t1, 4)), None, "went backwards");
        assert_eq!(power_from_energy((t0, 5), (t0, 9)), None, "no time passed");
        assert_eq!(power_from_energy((t1, 5), (t0, 9)), None);
    }

    const BDF: &str = "0000:c1:00.0";

    /// A PCI device directory bound to `driver`, with these files (parents made as needed).
    fn device(root: &Path, driver: &str, files: &[(&str, &str)]) -> PathBuf {
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

    fn write_files(dir: &Path, files: &[(&str, &str)]) {
        for (file, text) in files {
            let path = dir.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
    }

    fn source(root: &Path) -> SysfsSource {
        SysfsSource::new(root, vec![(0, BDF.into())])
    }

    fn sample_at(source: &mut SysfsSource, now: Instant) -> Readings {
        let mut samples = source.sample_at(now);
        assert_eq!(samples.len(), 1);
        let (device, TelemetryData::Sample { readings }) = samples.remove(0) else {
            panic!("a sample");
        };
        assert_eq!(device, Some(0));
        readings
    }

    fn mi300_tree(umc: &str) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        device(
            root.path(),
            "amdgpu",
            &[
                ("current_link_speed", "32.0 GT/s PCIe\n"),
                ("gpu_busy_percent", "87\n"),
                ("mem_busy_percent", "42\n"),
                ("mem_info_vram_used", "1073741824\n"),
                ("mem_info_vram_total", "206141652992\n"),
                ("pp_dpm_sclk", "0: 500Mhz\n1: 1800Mhz *\n2: 2100Mhz\n"),
                ("pp_dpm_mclk", "0: 900Mhz\n1: 1300Mhz *\n"),
                ("product_name", "AMD Instinct MI300X\n"),
                ("serial_number", "692325000123\n"),
                ("vbios_version", "113-M3000100-102\n"),
                ("unique_id", "a2b3c4d5e6f70809\n"),
                ("hwmon/hwmon4/temp1_input", "45000\n"),
                ("hwmon/hwmon4/temp1_label", "edge\n"),
                ("hwmon/hwmon4/temp2_input", "61000\n"),
                ("hwmon/hwmon4/temp2_label", "junction\n"),
                ("hwmon/hwmon4/temp3_input", "52000\n"),
                ("hwmon/hwmon4/temp3_label", "mem\n"),
                ("hwmon/hwmon4/power1_average", "550000000\n"),
                ("hwmon/hwmon4/power1_cap", "700000000\n"),
                ("hwmon/hwmon4/power1_cap_default", "750000000\n"),
                ("hwmon/hwmon4/fan1_input", "1200\n"),
                ("ras/features", "feature mask: 0x0000ffff\n"),
                ("ras/umc_err_count", umc),
                ("ras/gfx_err_count", "ue: 1\nce: 0\n"),
                ("ras/sdma_err_count", "ue: 0\nce: 2\n"),
                (
                    "ras/gpu_vram_bad_pages",
                    "0x00000001 : 0x00001000 : R\n0x00000002 : 0x00001000 : R\n\
                     0x00000003 : 0x00001000 : P\n",
                ),
            ],
        );
        write_files(root.path(), &[("sys/module/amdgpu/version", "6.7.0\n")]);
        root
    }

    #[test]
    fn an_mi300_amdgpu_tree_reads_under_nvml_names() {
        let root = mi300_tree("ue: 0\nce: 3\n");
        let mut source = source(root.path());
        let start = source.start();
        assert_eq!(start.len(), 1);
        let TelemetryData::Identity { fields } = &start[0].1 else {
            panic!("identity");
        };
        assert_eq!(source.identity(0).as_ref(), Some(fields));
        let t = |k: &str| fields.get(k).and_then(Reading::text);
        assert_eq!(t("name"), Some("AMD Instinct MI300X"));
        assert_eq!(t("serial"), Some("692325000123"));
        assert_eq!(t("vbios"), Some("113-M3000100-102"));
        assert_eq!(t("unique_id"), Some("a2b3c4d5e6f70809"));
        assert_eq!(t("kernel_driver"), Some("amdgpu"));
        assert_eq!(t("driver_version"), Some("6.7.0"));

        let readings = sample_at(&mut source, Instant::now());
        let n = |k: &str| readings.get(k).and_then(Reading::number);
        assert_eq!(n("util_gpu_pct"), Some(87.0));
        assert_eq!(n("util_mem_pct"), Some(42.0));
        assert_eq!(n("mem_used_bytes"), Some(1_073_741_824.0));
        assert_eq!(n("mem_total_bytes"), Some(206_141_652_992.0));
        assert_eq!(n("clock_sm_mhz"), Some(1800.0));
        assert_eq!(n("clock_sm_max_mhz"), Some(2100.0));
        assert_eq!(n("clock_mem_mhz"), Some(1300.0));
        assert_eq!(n("clock_mem_max_mhz"), Some(1300.0));
        assert_eq!(n("gpu_temp_c"), Some(45.0));
        assert_eq!(n("gpu_hotspot_temp_c"), Some(61.0));
        assert_eq!(n("hbm_temp_c"), Some(52.0));
        assert_eq!(n("power_w"), Some(550.0));
        assert_eq!(n("power_limit_enforced_w"), Some(700.0));
        assert_eq!(n("power_limit_default_w"), Some(750.0));
        assert_eq!(n("fan0_rpm"), Some(1200.0));
        assert_eq!(n("pcie_gen"), Some(5.0), "the generic readings stay");
        assert_eq!(n("hwmon_temp_junction_c"), Some(61.0));

        let snap = source.snapshot();
        assert_eq!(snap.len(), 1);
        let c = |k: &str| snap[0].1.get(k).and_then(Reading::number);
        assert_eq!(c("ecc_uncorrected_volatile"), Some(0.0));
        assert_eq!(c("ecc_corrected_volatile"), Some(3.0));
        assert_eq!(c("ras_gfx_ue"), Some(1.0));
        assert_eq!(c("ras_gfx_ce"), Some(0.0));
        assert_eq!(c("ras_sdma_ue"), Some(0.0));
        assert_eq!(c("ras_sdma_ce"), Some(2.0));
        assert_eq!(c("ras_uncorrected_other"), Some(1.0));
        assert_eq!(c("retired_pages_dbe"), Some(2.0));
        assert_eq!(c("retired_pages_pending"), Some(1.0));
        assert_eq!(c("retired_pages_failed"), Some(0.0));
        assert!(
            !snap[0].1.contains_key("ras_umc_ue"),
            "umc is the ECC count"
        );
        assert!(
            !snap[0].1.keys().any(|k| k.contains("features")),
            "only *_err_count files are blocks"
        );
        assert_eq!(
            snap[0].1["aer_fatal"],
            Reading::not_supported(),
            "AER stays"
        );
    }

    #[test]
    fn a_faulty_amdgpu_tree_reports_uncorrected_memory_errors() {
        let root = mi300_tree("ue: 2\nce: 40\n");
        let snap = source(root.path()).snapshot();
        assert_eq!(snap[0].1["ecc_uncorrected_volatile"], Reading::Number(2.0));
        assert_eq!(snap[0].1["ecc_corrected_volatile"], Reading::Number(40.0));
    }

    #[test]
    fn an_amdgpu_without_ras_has_no_ras_counters() {
        let root = tempfile::tempdir().unwrap();
        device(root.path(), "amdgpu", &[("gpu_busy_percent", "3\n")]);
        let mut source = source(root.path());
        let counters = &source.snapshot()[0].1;
        assert!(
            !counters.keys().any(|k| k.starts_with("ecc_")
                || k.starts_with("ras_")
                || k.starts_with("retired_")),
            "{counters:?}"
        );
        let readings = sample_at(&mut source, Instant::now());
        assert_eq!(readings["util_gpu_pct"], Reading::Number(3.0));
        assert!(!readings.contains_key("power_w"), "absent, never zero");
        assert!(!readings.contains_key("gpu_temp_c"));
    }

    #[test]
    fn a_ras_directory_without_bad_pages_says_not_supported() {
        let root = tempfile::tempdir().unwrap();
        device(
            root.path(),
            "amdgpu",
            &[("ras/gfx_err_count", "ue: 0\nce: 0\n")],
        );
        let counters = &source(root.path()).snapshot()[0].1;
        assert_eq!(counters["retired_pages_dbe"], Reading::not_supported());
        assert_eq!(counters["retired_pages_pending"], Reading::not_supported());
        assert_eq!(
            counters["ecc_uncorrected_volatile"],
            Reading::not_supported()
        );
        assert_eq!(counters["ras_uncorrected_other"], Reading::Number(0.0));
    }

    #[test]
    fn i915_power_comes_from_energy_deltas() {
        let root = tempfile::tempdir().unwrap();
        let dev = device(
            root.path(),
            "i915",
            &[
                ("hwmon/hwmon2/energy1_input", "1000000000\n"),
                ("hwmon/hwmon2/power1_max", "225000000\n"),
                ("hwmon/hwmon2/power1_rated_max", "190000000\n"),
                ("hwmon/hwmon2/temp1_input", "58000\n"),
                ("drm/card1/gt_act_freq_mhz", "2050\n"),
                ("drm/card1/gt_RP0_freq_mhz", "2400\n"),
                ("drm/renderD128/dev", "226:128\n"),
            ],
        );
        let energy = dev.join("hwmon/hwmon2/energy1_input");
        let mut source = source(root.path());
        let start = source.start();
        let TelemetryData::Identity { fields } = &start[0].1 else {
            panic!("identity");
        };
        assert_eq!(fields["kernel_driver"], Reading::Text("i915".into()));
        assert!(!fields.contains_key("name"), "no file, no field");

        let t0 = Instant::now();
        let first = sample_at(&mut source, t0);
        assert!(!first.contains_key("power_w"), "one reading is no rate");
        assert_eq!(first["power_limit_enforced_w"], Reading::Number(225.0));
        assert_eq!(first["power_limit_default_w"], Reading::Number(190.0));
        assert_eq!(first["gpu_temp_c"], Reading::Number(58.0));
        assert_eq!(first["clock_sm_mhz"], Reading::Number(2050.0));
        assert_eq!(first["clock_sm_max_mhz"], Reading::Number(2400.0));

        std::fs::write(&energy, "1150000000\n").unwrap();
        let t1 = t0 + std::time::Duration::from_secs(1);
        let second = sample_at(&mut source, t1);
        assert_eq!(second["power_w"], Reading::Number(150.0));

        std::fs::write(&energy, "5000\n").unwrap();
        let t2 = t1 + std::time::Duration::from_secs(1);
        let backwards = sample_at(&mut source, t2);
        assert!(!backwards.contains_key("power_w"), "a reset is no rate");

        std::fs::write(&energy, "20005000\n").unwrap();
        let t3 = t2 + std::time::Duration::from_millis(500);
        let after = sample_at(&mut source, t3);
        assert_eq!(
            after["power_w"],
            Reading::Number(40.0),
            "counts on from the reset"
        );
    }

    #[test]
    fn xe_clocks_read_from_the_tile() {
        let root = tempfile::tempdir().unwrap();
        device(
            root.path(),
            "xe",
            &[
                ("tile0/gt0/freq0/act_freq", "1950\n"),
                ("tile0/gt0/freq0/rp0_freq", "2850\n"),
                ("hwmon/hwmon5/power1_max", "0\n"),
                ("hwmon/hwmon5/temp2_input", "64000\n"),
                ("hwmon/hwmon5/temp2_label", "pkg\n"),
                ("drm/card0/gt_act_freq_mhz", "1\n"),
            ],
        );
        write_files(root.path(), &[("sys/module/xe/version", "1.0\n")]);
        let mut source = source(root.path());
        let start = source.start();
        let TelemetryData::Identity { fields } = &start[0].1 else {
            panic!("identity");
        };
        assert_eq!(fields["kernel_driver"], Reading::Text("xe".into()));
        assert_eq!(fields["driver_version"], Reading::Text("1.0".into()));
        let readings = sample_at(&mut source, Instant::now());
        assert_eq!(readings["clock_sm_mhz"], Reading::Number(1950.0));
        assert_eq!(readings["clock_sm_max_mhz"], Reading::Number(2850.0));
        assert_eq!(readings["gpu_temp_c"], Reading::Number(64.0), "pkg label");
        assert!(
            !readings.contains_key("power_limit_enforced_w"),
            "0 is a disabled limit, not a limit of zero"
        );
        assert!(!readings.contains_key("power_w"));
    }

    #[test]
    fn an_mi300_s_gpu_metrics_give_its_throttle_reasons_from_one_tick_to_the_next() {
        let root = mi300_tree("ue: 0\nce: 0\n");
        write_files(
            &root.path().join("sys/bus/pci/devices").join(BDF),
            &[
                ("hwmon/hwmon4/temp2_crit", "110000\n"),
                ("hwmon/hwmon4/temp3_crit", "95000\n"),
            ],
        );
        let dev = root.path().join("sys/bus/pci/devices").join(BDF);
        // The final 1.6 layout: residency counters at 32.., the dies' clocks at 264.
        let table = |ticks: u32, socket_thermal: u32| {
            let fields: Vec<(usize, Vec<u8>)> = vec![
                (4, 107u16.to_le_bytes().to_vec()),
                (32, ticks.to_le_bytes().to_vec()),
                (40, 0u32.to_le_bytes().to_vec()),
                (44, socket_thermal.to_le_bytes().to_vec()),
                (264, 1550u16.to_le_bytes().to_vec()),
            ];
            let refs: Vec<(usize, &[u8])> =
                fields.iter().map(|(a, b)| (*a, b.as_slice())).collect();
            gpu_metrics::table_for_tests(6, 1664, &refs)
        };
        std::fs::write(dev.join("gpu_metrics"), table(1000, 500)).unwrap();
        let mut source = source(root.path());
        let TelemetryData::Identity { fields } = &source.start()[0].1 else {
            panic!("identity");
        };
        assert_eq!(fields["temp_hotspot_max_c"], Reading::Number(110.0));
        assert_eq!(fields["temp_mem_max_c"], Reading::Number(95.0));
        let first = sample_at(&mut source, Instant::now());
        assert!(
            !first.contains_key("throttle_reasons"),
            "one table says nothing of a share: no reasons, not none"
        );
        assert_eq!(
            first["gpu_hotspot_temp_c"],
            Reading::Number(61.0),
            "hwmon comes first"
        );
        // The socket's thermal limit held 90 of the next 100 ticks.
        std::fs::write(dev.join("gpu_metrics"), table(1100, 590)).unwrap();
        let second = sample_at(&mut source, Instant::now());
        assert_eq!(
            second["throttle_reasons"],
            Reading::Text("sw_thermal_slowdown".into())
        );
        // 10 of the next 100: not for most of the tick.
        std::fs::write(dev.join("gpu_metrics"), table(1200, 600)).unwrap();
        let third = sample_at(&mut source, Instant::now());
        assert_eq!(third["throttle_reasons"], Reading::Text(String::new()));
        // A layout kiln cannot decode says so in place of the reasons.
        let mut v19 = gpu_metrics::table_for_tests(9, 1150, &[]);
        v19[4] = 47;
        std::fs::write(dev.join("gpu_metrics"), v19).unwrap();
        let fourth = sample_at(&mut source, Instant::now());
        assert_eq!(
            fourth["throttle_reasons"],
            Reading::Unavailable {
                unavailable: "unknown_layout".into()
            }
        );
    }

    #[test]
    fn an_rdna_table_fills_what_hwmon_lacks_and_names_its_throttlers() {
        let root = tempfile::tempdir().unwrap();
        let bits: u64 = (1 << 0) | (1 << 36);
        let table = gpu_metrics::table_for_tests(
            3,
            120,
            &[
                (4, &71u16.to_le_bytes()),
                (6, &104u16.to_le_bytes()),
                (54, &2210u16.to_le_bytes()),
                (112, &bits.to_le_bytes()),
            ],
        );
        let dev = device(root.path(), "amdgpu", &[("gpu_busy_percent", "99\n")]);
        std::fs::write(dev.join("gpu_metrics"), table).unwrap();
        let readings = sample_at(&mut source(root.path()), Instant::now());
        assert_eq!(readings["gpu_hotspot_temp_c"], Reading::Number(104.0));
        assert_eq!(readings["clock_sm_mhz"], Reading::Number(2210.0));
        assert_eq!(
            readings["throttle_reasons"],
            Reading::Text("sw_power_cap,sw_thermal_slowdown".into())
        );
    }

    #[test]
    fn intel_throttle_files_name_the_reasons() {
        for (driver, dir, prefix) in [
            ("i915", "drm/card1/gt/gt0", "throttle_reason_"),
            ("xe", "tile0/gt0/freq0/throttle", "reason_"),
        ] {
            let root = tempfile::tempdir().unwrap();
            let files = [
                (format!("{dir}/{prefix}pl1"), "1\n"),
                (format!("{dir}/{prefix}thermal"), "1\n"),
                (format!("{dir}/{prefix}prochot"), "0\n"),
                (format!("{dir}/{prefix}status"), "1\n"),
            ];
            let refs: Vec<(&str, &str)> = files.iter().map(|(f, t)| (f.as_str(), *t)).collect();
            device(root.path(), driver, &refs);
            let readings = sample_at(&mut source(root.path()), Instant::now());
            assert_eq!(
                readings["throttle_reasons"],
                Reading::Text("sw_power_cap,sw_thermal_slowdown".into()),
                "{driver}"
            );
        }
        // Without the files the reasons are unknown, not none.
        let root = tempfile::tempdir().unwrap();
        device(root.path(), "i915", &[("drm/card0/gt_act_freq_mhz", "1\n")]);
        let readings = sample_at(&mut source(root.path()), Instant::now());
        assert!(!readings.contains_key("throttle_reasons"));
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
