//! Every threshold the rules use, in one table, each with where it comes from.

use serde::{Deserialize, Serialize};

/// The thresholds of the verdict rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Share of a phase's samples under a throttle reason above which it is a finding.
    pub throttle_share: f64,
    /// HW slowdown within this many °C of the slowdown threshold points at cooling;
    /// further below, at power delivery (REFERENCE.md §4).
    pub thermal_margin_c: f64,
    /// A PCIe rate below this share of the link's theory is low (REFERENCE.md §5).
    pub pcie_low_share: f64,
    /// PCIe replays per minute per GT/s per lane allowed: ceil(1e-12 x GT/s x 60 x lanes)
    /// per minute (REFERENCE.md §4).
    pub replays_per_gts_lane_minute: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            throttle_share: 0.05,
            thermal_margin_c: 5.0,
            pcie_low_share: 0.70,
            replays_per_gts_lane_minute: 60e-12 * 1e9,
        }
    }
}

/// The table for people: name, value, source.
pub fn table(t: &Thresholds) -> Vec<(&'static str, f64, &'static str)> {
    vec![
        (
            "throttle_share",
            t.throttle_share,
            "kiln default: 5% of a phase's samples",
        ),
        (
            "thermal_margin_c",
            t.thermal_margin_c,
            "REFERENCE.md §4: HW slowdown near the slowdown threshold means cooling",
        ),
        (
            "pcie_low_share",
            t.pcie_low_share,
            "REFERENCE.md §5: flag a link below about 70% of its generation and width",
        ),
        (
            "replays_per_gts_lane_minute",
            t.replays_per_gts_lane_minute,
            "REFERENCE.md §4: replays above ceil(1e-12 x GT/s x 60 x lanes) per minute",
        ),
    ]
}
