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
    /// A PCIe rate below this share of what healthy cards reach on the link in use, per
    /// generation and direction ([`PCIE_REACHED`]), is low (DCGM's 0.75 of what the product
    /// measures).
    pub pcie_low_share: f64,
    /// Corrected ECC errors per minute of a loaded phase from which the memory is degrading
    /// under load (a healthy card corrects none, or a handful a day).
    pub ecc_corrected_per_minute: f64,
    /// PCIe replays per minute per GT/s per lane allowed: ceil(1e-12 x GT/s x 60 x lanes)
    /// per minute (REFERENCE.md §4).
    pub replays_per_gts_lane_minute: f64,
    /// A rate below this share of the product's reference is low, one rule for every rate
    /// (DCGM sets its floors at 0.75 of what the product measures), and so is a clock a
    /// setting holds below this share of its maximum. `vram_floor_share` in older files.
    #[serde(alias = "vram_floor_share")]
    pub floor_share: f64,
    /// A site's own VRAM floor in GB/s, measured on its cards; 0 uses the product's
    /// reference ([`crate::product`]) times `floor_share`.
    pub vram_floor_gbps: f64,
    /// A site's own floors for other rates, by the rate's name and in its unit
    /// (`{"compute_fp32_gops": 45000}`), measured on its cards: they replace the product's
    /// reference times `floor_share`.
    pub floors: std::collections::BTreeMap<String, f64>,
    /// Floors from the site's own healthy cards, by product (the device's name) and rate,
    /// as `kiln baseline` writes them: taken before the product's reference and before
    /// `floors`, and a rate below one is a sure finding.
    pub baseline: std::collections::BTreeMap<String, crate::verdict::baseline::ProductFloors>,
    /// A device this share below the median of its peers (devices of the same model in
    /// the same run) in a rate is a finding.
    pub peer_slow_share: f64,
    /// A watched application's baseline (its lowest memory between iterations) that
    /// climbs at least this much in all is a leak when the climb is steady.
    pub leak_min_bytes: f64,
    /// How well a straight line must fit the baselines (R²) for a leak.
    pub leak_fit_r2: f64,
    /// A peak at this share of the budget has reached it.
    pub budget_reached_share: f64,
    /// Another process growing by this share of the budget in the window before an
    /// application's failure took the memory it needed.
    pub other_process_share: f64,
    /// How far before an application's failure another process's growth counts, seconds.
    pub other_process_window_s: f64,
}

/// What healthy cards reach on a PCIe link of each generation, per direction, as a share of
/// the link's theory (REFERENCE.md §5): generation, host-to-device, device-to-host, source.
/// An H100's host-to-device copies reach only about 56% of Gen5 x16: one share for both
/// directions would call every healthy Hopper slow.
pub const PCIE_REACHED: &[(u32, f64, f64, &str)] = &[
    (
        3,
        0.76,
        0.76,
        "REFERENCE.md §5: Gen3 x16 about 12-13 of 15.75 GB/s",
    ),
    (
        4,
        0.76,
        0.83,
        "REFERENCE.md §5: RTX 4090 H2D 24-26 and D2H 26-27, A100 H2D 25 of 31.5 GB/s",
    ),
    (
        5,
        0.56,
        0.84,
        "REFERENCE.md §5: H100 H2D 35 and D2H 53 of 63 GB/s",
    ),
];

/// What healthy cards reach on a link of `generation` (H2D share, D2H share, source): the
/// row of that generation, else the nearest one (older links like Gen3, newer like Gen5).
pub fn pcie_reached(generation: u32) -> (f64, f64, &'static str) {
    let row = PCIE_REACHED
        .iter()
        .min_by_key(|(g, ..)| g.abs_diff(generation))
        .copied()
        .unwrap_or((0, 0.75, 0.75, "no reference"));
    (row.1, row.2, row.3)
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            throttle_share: 0.05,
            thermal_margin_c: 5.0,
            pcie_low_share: 0.75,
            replays_per_gts_lane_minute: 60e-12 * 1e9,
            ecc_corrected_per_minute: 1000.0,
            floor_share: 0.75,
            vram_floor_gbps: 0.0,
            floors: std::collections::BTreeMap::new(),
            baseline: std::collections::BTreeMap::new(),
            peer_slow_share: 0.10,
            leak_min_bytes: 16.0 * 1024.0 * 1024.0,
            leak_fit_r2: 0.8,
            budget_reached_share: 0.9,
            other_process_share: 0.05,
            other_process_window_s: 60.0,
        }
    }
}

/// The table for people: name, value, source.
pub fn table(t: &Thresholds) -> Vec<(&'static str, f64, &'static str)> {
    vec![
        (
            "leak_min_bytes",
            t.leak_min_bytes,
            "kiln default: 16 MiB of climb in all, so that allocator noise is never a leak (REFERENCE.md §7)",
        ),
        (
            "leak_fit_r2",
            t.leak_fit_r2,
            "kiln default: a steady climb (REFERENCE.md §7: a steady amount per iteration)",
        ),
        (
            "budget_reached_share",
            t.budget_reached_share,
            "kiln default: a peak within 10% of the budget reached it (drivers keep a reserve)",
        ),
        (
            "other_process_share",
            t.other_process_share,
            "kiln default: another process taking 5% of the budget before a failure (REFERENCE.md §7)",
        ),
        (
            "other_process_window_s",
            t.other_process_window_s,
            "kiln default: growth in the minute before a failure",
        ),
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
            "DCGM: 0.75 of what healthy cards measure, per generation and direction (REFERENCE.md §5)",
        ),
        (
            "replays_per_gts_lane_minute",
            t.replays_per_gts_lane_minute,
            "REFERENCE.md §4: replays above ceil(1e-12 x GT/s x 60 x lanes) per minute",
        ),
        (
            "ecc_corrected_per_minute",
            t.ecc_corrected_per_minute,
            "kiln default: a memory correcting a thousand errors a minute under load is degrading (Xid 92 is the driver's own word for a high rate); a healthy card corrects none or a handful a day",
        ),
        (
            "floor_share",
            t.floor_share,
            "REFERENCE.md §5: DCGM sets its floors at 0.75 of what a product measures; one share for every rate and for a clock a setting holds",
        ),
        (
            "vram_floor_gbps",
            t.vram_floor_gbps,
            "the site's own floor from its cards (0: the product's reference x floor_share)",
        ),
        (
            "peer_slow_share",
            t.peer_slow_share,
            "kiln default: 10% below the median of the same model's devices in the run",
        ),
    ]
}

impl Thresholds {
    /// Loads overrides from a JSON file (any subset of the fields) over the defaults;
    /// validates every value.
    pub fn load(path: &std::path::Path) -> Result<Thresholds, String> {
        Thresholds::default().overlay(path)
    }

    /// These thresholds with a JSON file's fields (any subset) laid over them, so that a
    /// site's file refines a profile's thresholds rather than resetting the rest.
    pub fn overlay(&self, path: &std::path::Path) -> Result<Thresholds, String> {
        let at = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        let text = std::fs::read_to_string(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => at(&"no such thresholds file"),
            std::io::ErrorKind::PermissionDenied => {
                at(&"the thresholds file cannot be read (no permission)")
            }
            std::io::ErrorKind::IsADirectory => at(&"a directory, not a thresholds file"),
            _ => at(&e),
        })?;
        // A JSON object of known keys, each once: an array would fill the fields by
        // position, and a key given twice would silently keep one of its values.
        let mut own: UniqueKeys = serde_json::from_str(&text).map_err(|e| at(&e))?;
        // An older file's name for a field is read as the field's.
        if let Some(v) = own.0.remove("vram_floor_share") {
            if own.0.contains_key("floor_share") {
                return Err(at(
                    &"`vram_floor_share` and `floor_share` are one setting: give one",
                ));
            }
            own.0.insert("floor_share".into(), v);
        }
        let own = serde_json::Value::Object(own.0);
        // Unknown fields and wrong types are refused by parsing the file alone first.
        serde_json::from_value::<Thresholds>(own.clone()).map_err(|e| at(&e))?;
        let mut merged = serde_json::to_value(self).map_err(|e| at(&e))?;
        if let (Some(base), Some(over)) = (merged.as_object_mut(), own.as_object()) {
            for (k, v) in over {
                base.insert(k.clone(), v.clone());
            }
        }
        let t: Thresholds = serde_json::from_value(merged).map_err(|e| at(&e))?;
        t.validate().map_err(|e| at(&e))?;
        Ok(t)
    }

    /// Checks that every value is possible; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        for (name, v) in [
            ("throttle_share", self.throttle_share),
            ("pcie_low_share", self.pcie_low_share),
            ("floor_share", self.floor_share),
            ("peer_slow_share", self.peer_slow_share),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("{name} must be between 0 and 1, not {v}"));
            }
        }
        for (name, v) in [
            ("thermal_margin_c", self.thermal_margin_c),
            (
                "replays_per_gts_lane_minute",
                self.replays_per_gts_lane_minute,
            ),
            ("vram_floor_gbps", self.vram_floor_gbps),
            ("ecc_corrected_per_minute", self.ecc_corrected_per_minute),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{name} must be a number of at least 0, not {v}"));
            }
        }
        for (rate, v) in &self.floors {
            if crate::product::Rate::from_name(rate).is_none() {
                let known: Vec<&str> = crate::product::Rate::ALL.iter().map(|r| r.name()).collect();
                return Err(format!(
                    "floors: `{rate}` is not a rate kiln judges (one of {})",
                    known.join(", ")
                ));
            }
            if !(v.is_finite() && *v > 0.0) {
                return Err(format!(
                    "floors: `{rate}` must be a number above 0, not {v}"
                ));
            }
        }
        Ok(())
    }
}

/// A JSON object whose keys each appear once.
struct UniqueKeys(serde_json::Map<String, serde_json::Value>);

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = UniqueKeys;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object of thresholds, e.g. {\"throttle_share\": 0.2}")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<UniqueKeys, A::Error> {
                let mut out = serde_json::Map::new();
                while let Some((key, value)) = map.next_entry::<String, serde_json::Value>()? {
                    if out.contains_key(&key) {
                        return Err(serde::de::Error::custom(format!("`{key}` is given twice")));
                    }
                    out.insert(key, value);
                }
                Ok(UniqueKeys(out))
            }
        }
        d.deserialize_map(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thresholds_file_that_is_not_there_is_one_sentence() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("site.json");
        assert_eq!(
            Thresholds::load(&missing).unwrap_err(),
            format!("{}: no such thresholds file", missing.display())
        );
        assert_eq!(
            Thresholds::load(dir.path()).unwrap_err(),
            format!(
                "{}: a directory, not a thresholds file",
                dir.path().display()
            )
        );
    }

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
        let array = load("[0.5, 0.5]").unwrap_err();
        assert!(array.contains("a JSON object"), "{array}");
        let twice = load(r#"{"throttle_share": 0.2, "throttle_share": 0.9}"#).unwrap_err();
        assert!(twice.contains("`throttle_share` is given twice"), "{twice}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("site.json");
        std::fs::write(&path, r#"{"pcie_low_share": 0.5}"#).unwrap();
        let profile = Thresholds {
            throttle_share: 0.2,
            ..Thresholds::default()
        };
        let t = profile.overlay(&path).unwrap();
        assert_eq!(
            (t.throttle_share, t.pcie_low_share),
            (0.2, 0.5),
            "the file refines the profile's thresholds"
        );
        assert!(
            load(r#"{"vram_floor_gbps": -5}"#)
                .unwrap_err()
                .contains("at least 0")
        );
        let old = load(r#"{"vram_floor_share": 0.6}"#).unwrap();
        assert_eq!(old.floor_share, 0.6, "an older file's name still reads");
        let both = load(r#"{"vram_floor_share": 0.6, "floor_share": 0.7}"#).unwrap_err();
        assert!(both.contains("are one setting: give one"), "{both}");
        let site = load(r#"{"floors": {"compute_fp32_gops": 45000}}"#).unwrap();
        assert_eq!(site.floors.get("compute_fp32_gops"), Some(&45000.0));
        let unknown = load(r#"{"floors": {"compute_fp64_gops": 1}}"#).unwrap_err();
        assert!(unknown.contains("not a rate kiln judges"), "{unknown}");
        assert!(
            load(r#"{"floors": {"vram_gib_per_s": 0}}"#)
                .unwrap_err()
                .contains("above 0")
        );
        assert!(Thresholds::load(std::path::Path::new("/nonexistent/t.json")).is_err());
    }
}
