//! i915 and xe under NVML's names: GT clocks, power limits, temperature, power from the
//! energy counter's deltas, and the GT's throttle reasons.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::hwmon::{first_hwmon, limit_w, millidegrees_c, temp_labelled};
use super::{Driver, as_reading, put, read, read_number};
use crate::telemetry::record::{Reading, Readings};
use crate::telemetry::signals;
use crate::telemetry::throttle::ThrottleReason;

fn read_u64(path: &Path) -> Option<u64> {
    read(path)?.trim().parse().ok()
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
pub(super) fn energy_uj(device_dir: &Path) -> Option<u64> {
    read_u64(&first_hwmon(device_dir)?.join("energy1_input"))
}

/// Mean power (W) between two readings of a µJ energy counter; None when the counter went
/// backwards (wrapped, or the driver reloaded) or no time passed.
pub(super) fn power_from_energy(before: (Instant, u64), after: (Instant, u64)) -> Option<f64> {
    let seconds = after.0.checked_duration_since(before.0)?.as_secs_f64();
    let joules = after.1.checked_sub(before.1)? as f64 * 1e-6;
    (seconds > 0.0).then(|| joules / seconds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::Source;
    use crate::telemetry::record::TelemetryData;
    use crate::telemetry::sysfs::tests::{device, sample_at, source, write_files};

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
}
