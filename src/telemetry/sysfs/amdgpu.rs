//! amdgpu's own files under NVML's names: gauges (`gpu_busy_percent`, `mem_info_*`,
//! `pp_dpm_*`, hwmon), what its `gpu_metrics` table adds, and its RAS blocks and bad pages.

use std::path::Path;

use super::hwmon::{first_hwmon, limit_w, microwatts_w, temp_labelled};
use super::{as_reading, put, read, read_number};
use crate::telemetry::gpu_metrics;
use crate::telemetry::record::{Reading, Readings};
use crate::telemetry::signals;
use crate::telemetry::throttle::ThrottleReason;

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    use crate::telemetry::Source;
    use crate::telemetry::record::TelemetryData;
    use crate::telemetry::sysfs::tests::{BDF, device, sample_at, source, write_files};

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
                ("subsystem_vendor", "0x1002\n"),
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
        // The board's maker, the PCI subsystem vendor (AMD's own board here).
        assert_eq!(
            fields
                .get("pci_subsystem_vendor_id")
                .and_then(Reading::number),
            Some(f64::from(0x1002))
        );
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
}
