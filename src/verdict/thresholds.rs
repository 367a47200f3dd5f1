//! Every threshold the rules use, in one table, each with where it comes from.

use serde::{Deserialize, Serialize};

/// The thresholds of the verdict rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
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

impl Thresholds {
    /// Loads overrides from a JSON file (any subset of the fields); validates every value.
    pub fn load(path: &std::path::Path) -> Result<Thresholds, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let t: Thresholds =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let share = |name: &str, v: f64| {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(format!(
                    "{}: {name} must be between 0 and 1, not {v}",
                    path.display()
                ))
            }
        };
        share("throttle_share", t.throttle_share)?;
        share("pcie_low_share", t.pcie_low_share)?;
        for (name, v) in [
            ("thermal_margin_c", t.thermal_margin_c),
            ("replays_per_gts_lane_minute", t.replays_per_gts_lane_minute),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!(
                    "{}: {name} must be a number of at least 0, not {v}",
                    path.display()
                ));
            }
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Thresholds, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        std::fs::write(&path, text).unwrap();
        Thresholds::load(&path)
    }

    #[test]
    fn overrides_are_validated() {
        let t = load(r#"{"throttle_share": 0.2}"#).unwrap();
        assert_eq!(t.throttle_share, 0.2);
        assert_eq!(
            t.pcie_low_share,
            Thresholds::default().pcie_low_share,
            "the rest keep their defaults"
        );
        assert!(
            load(r#"{"throttle_share": 2}"#)
                .unwrap_err()
                .contains("between 0 and 1")
        );
        assert!(
            load(r#"{"thermal_margin_c": -1}"#)
                .unwrap_err()
                .contains("at least 0")
        );
        assert!(
            load(r#"{"trottle_share": 0.1}"#)
                .unwrap_err()
                .contains("unknown field")
        );
        assert!(load("{ not json").is_err());
        assert!(Thresholds::load(std::path::Path::new("/nonexistent/t.json")).is_err());
    }
}
