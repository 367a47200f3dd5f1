//! Throttle reasons: NVML's bit mask decoded by containment (several reasons can hold at
//! once; a test for equality would miss all but one).

/// The reasons and their bits (REFERENCE.md §1).
pub const REASONS: [(u64, &str); 9] = [
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
];

/// Names of every reason whose bit is set; unknown bits come out as `0x…`.
pub fn decode(mask: u64) -> Vec<String> {
    let mut names: Vec<String> = REASONS
        .iter()
        .filter(|(bit, _)| mask & bit != 0)
        .map(|(_, name)| (*name).to_owned())
        .collect();
    let known: u64 = REASONS.iter().map(|(bit, _)| bit).sum();
    if mask & !known != 0 {
        names.push(format!("0x{:x}", mask & !known));
    }
    names
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
    }
}
