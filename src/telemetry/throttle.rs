//! Throttle reasons: NVML's bit mask decoded by containment (several reasons can hold at
//! once; a test for equality would miss all but one). The source decodes: NVML writes the
//! reasons beside the mask, and a recording that carries only the mask is decoded once, as
//! it is read ([`decode_recorded`]). Summaries and rules take reasons, never bits.

use super::reading::{Reading, Readings};
use super::signals::{THROTTLE_REASONS, THROTTLE_REASONS_MASK};

/// A reason the clocks are held below their maximum (NVML API Reference,
/// "NvmlClocksEventReasons", and its newest header's clocks-event reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ThrottleReason {
    /// Nothing to do: clocks at rest.
    GpuIdle,
    /// Application clocks set below the maximum.
    ApplicationsClocksSetting,
    /// The software power cap (the enforced power limit).
    SwPowerCap,
    /// Hardware slowdown: heat or an external power brake signal.
    HwSlowdown,
    /// Held back to stay in sync with other GPUs (sync boost).
    SyncBoost,
    /// The driver's thermal slowdown.
    SwThermalSlowdown,
    /// The hardware's thermal slowdown.
    HwThermalSlowdown,
    /// The power brake asserted by the system (PSU, power delivery).
    HwPowerBrakeSlowdown,
    /// Held by the display clock setting.
    DisplayClockSetting,
    /// Held at the board's own limit (R580+).
    BoardLimit,
    /// Held by the reliability policy (R580+).
    ReliabilityPolicy,
}

impl ThrottleReason {
    /// Every reason, in the order of their bits.
    pub const ALL: [ThrottleReason; 11] = [
        ThrottleReason::GpuIdle,
        ThrottleReason::ApplicationsClocksSetting,
        ThrottleReason::SwPowerCap,
        ThrottleReason::HwSlowdown,
        ThrottleReason::SyncBoost,
        ThrottleReason::SwThermalSlowdown,
        ThrottleReason::HwThermalSlowdown,
        ThrottleReason::HwPowerBrakeSlowdown,
        ThrottleReason::DisplayClockSetting,
        ThrottleReason::BoardLimit,
        ThrottleReason::ReliabilityPolicy,
    ];

    /// NVML's bit for the reason.
    pub const fn bit(self) -> u64 {
        match self {
            ThrottleReason::GpuIdle => 0x1,
            ThrottleReason::ApplicationsClocksSetting => 0x2,
            ThrottleReason::SwPowerCap => 0x4,
            ThrottleReason::HwSlowdown => 0x8,
            ThrottleReason::SyncBoost => 0x10,
            ThrottleReason::SwThermalSlowdown => 0x20,
            ThrottleReason::HwThermalSlowdown => 0x40,
            ThrottleReason::HwPowerBrakeSlowdown => 0x80,
            ThrottleReason::DisplayClockSetting => 0x100,
            ThrottleReason::BoardLimit => 0x200,
            ThrottleReason::ReliabilityPolicy => 0x400,
        }
    }

    /// Its name in records and reports (`sw_power_cap`).
    pub const fn name(self) -> &'static str {
        match self {
            ThrottleReason::GpuIdle => "gpu_idle",
            ThrottleReason::ApplicationsClocksSetting => "applications_clocks_setting",
            ThrottleReason::SwPowerCap => "sw_power_cap",
            ThrottleReason::HwSlowdown => "hw_slowdown",
            ThrottleReason::SyncBoost => "sync_boost",
            ThrottleReason::SwThermalSlowdown => "sw_thermal_slowdown",
            ThrottleReason::HwThermalSlowdown => "hw_thermal_slowdown",
            ThrottleReason::HwPowerBrakeSlowdown => "hw_power_brake_slowdown",
            ThrottleReason::DisplayClockSetting => "display_clock_setting",
            ThrottleReason::BoardLimit => "board_limit",
            ThrottleReason::ReliabilityPolicy => "reliability_policy",
        }
    }
}

impl ThrottleReason {
    /// Its name for people (`software power cap`).
    pub const fn label(self) -> &'static str {
        match self {
            ThrottleReason::GpuIdle => "GPU idle",
            ThrottleReason::ApplicationsClocksSetting => "applications clocks setting",
            ThrottleReason::SwPowerCap => "software power cap",
            ThrottleReason::HwSlowdown => "hardware slowdown",
            ThrottleReason::SyncBoost => "sync boost",
            ThrottleReason::SwThermalSlowdown => "software thermal slowdown",
            ThrottleReason::HwThermalSlowdown => "hardware thermal slowdown",
            ThrottleReason::HwPowerBrakeSlowdown => "hardware power brake",
            ThrottleReason::DisplayClockSetting => "display clock setting",
            ThrottleReason::BoardLimit => "board limit",
            ThrottleReason::ReliabilityPolicy => "reliability policy",
        }
    }
}

/// The label of a reason recorded by name; an unknown name (an unknown bit) as it is.
pub fn label_of(name: &str) -> &str {
    ThrottleReason::ALL
        .iter()
        .find(|r| r.name() == name)
        .map_or(name, |r| r.label())
}

/// Names of every reason whose bit is set; unknown bits come out as `0x…`.
pub fn decode(mask: u64) -> Vec<String> {
    let mut names: Vec<String> = ThrottleReason::ALL
        .iter()
        .filter(|r| mask & r.bit() != 0)
        .map(|r| r.name().to_owned())
        .collect();
    let known: u64 = ThrottleReason::ALL.iter().map(|r| r.bit()).sum();
    if mask & !known != 0 {
        names.push(format!("0x{:x}", mask & !known));
    }
    names
}

/// The reasons as a sample records them: the decoded names, joined by commas (empty for
/// none).
pub fn reading(mask: u64) -> Reading {
    Reading::Text(decode(mask).join(","))
}

/// The reasons a sample carries, by name (unknown bits as `0x…`); None for a sample that
/// carries none (another source's, or one where NVML could not say).
pub fn reasons_of(readings: &Readings) -> Option<impl Iterator<Item = &str>> {
    let text = readings
        .get(THROTTLE_REASONS.name)
        .and_then(Reading::text)?;
    Some(text.split(',').filter(|r| !r.is_empty()))
}

/// A recorded sample that carries the mask but not its reasons gets them decoded: the one
/// place bits become reasons for what was read from a file.
pub fn decode_recorded(readings: &mut Readings) {
    if readings.contains_key(THROTTLE_REASONS.name) {
        return;
    }
    let Some(mask) = readings
        .get(THROTTLE_REASONS_MASK.name)
        .and_then(Reading::number)
    else {
        return;
    };
    readings.insert(THROTTLE_REASONS.name.into(), reading(mask as u64));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_reasons_decode_by_containment() {
        assert_eq!(decode(0), Vec::<String>::new());
        assert_eq!(
            decode(0x4 | 0x40 | 0x80),
            vec![
                "sw_power_cap",
                "hw_thermal_slowdown",
                "hw_power_brake_slowdown"
            ]
        );
        assert_eq!(decode(0x1), vec!["gpu_idle"]);
        assert_eq!(
            decode(0x8 | 0x1000),
            vec!["hw_slowdown".to_string(), "0x1000".to_string()]
        );
        assert_eq!(
            decode(0x200 | 0x400),
            vec!["board_limit", "reliability_policy"]
        );
    }

    #[test]
    fn bits_are_distinct_and_names_unique() {
        let bits: u64 = ThrottleReason::ALL.iter().map(|r| r.bit()).sum();
        let or = ThrottleReason::ALL.iter().fold(0, |a, r| a | r.bit());
        assert_eq!(bits, or);
        let mut names: Vec<&str> = ThrottleReason::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ThrottleReason::ALL.len());
    }

    #[test]
    fn a_recording_with_only_the_mask_reads_as_reasons() {
        let mut old = Readings::new();
        old.insert("throttle_reasons_mask".into(), Reading::Number(0x24 as f64));
        decode_recorded(&mut old);
        let reasons: Vec<&str> = reasons_of(&old).into_iter().flatten().collect();
        assert_eq!(reasons, ["sw_power_cap", "sw_thermal_slowdown"]);

        let mut idle = Readings::new();
        idle.insert("throttle_reasons_mask".into(), Reading::Number(0.0));
        decode_recorded(&mut idle);
        assert_eq!(reasons_of(&idle).map(|r| r.count()), Some(0), "none, said");

        // What NVML could not read stays unread; what it decoded is kept as it was.
        let mut failed = Readings::new();
        failed.insert("throttle_reasons_mask".into(), Reading::not_supported());
        decode_recorded(&mut failed);
        assert!(reasons_of(&failed).is_none());
        let mut both = Readings::new();
        both.insert("throttle_reasons_mask".into(), Reading::Number(4.0));
        both.insert(
            "throttle_reasons".into(),
            Reading::Text("sw_power_cap".into()),
        );
        let before = both.clone();
        decode_recorded(&mut both);
        assert_eq!(both, before);
    }
}
