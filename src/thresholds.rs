//! Every threshold the rules use, in one table, each with its default and where it comes
//! from, and the site's own floors (`kiln baseline`'s file). Pure data, below the run
//! directory and the verdict: a run records the thresholds it was judged by in its manifest
//! (typed), every rebuild judges by them, and a `--thresholds` file is laid over them field
//! by field.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Declares the thresholds once: each field with its type, its default and where that
/// default comes from. It makes [`Thresholds`], its `Default`, the file's [`Overrides`]
/// (every field optional) and [`SOURCES`], so that no field can have one without the
/// others.
macro_rules! thresholds {
    ($(
        $(#[doc = $doc:literal])*
        $(#[alias = $alias:literal])?
        $name:ident: $ty:ty = $default:expr, $source:literal;
    )*) => {
        /// The thresholds of the verdict rules.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct Thresholds {
            $(
                $(#[doc = $doc])*
                $(#[serde(alias = $alias)])?
                pub $name: $ty,
            )*
        }

        impl Default for Thresholds {
            fn default() -> Self {
                Thresholds { $($name: $default,)* }
            }
        }

        /// A thresholds file: any subset of the fields, each laid over the thresholds it
        /// refines.
        #[derive(Debug, Default, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        struct Overrides {
            $(
                $(#[serde(alias = $alias)])?
                $name: Option<$ty>,
            )*
        }

        impl Overrides {
            /// `base` with these fields laid over it, and the names of the fields whose
            /// value that changed, in the order of their names.
            fn lay_over(self, base: &Thresholds) -> (Thresholds, Vec<&'static str>) {
                let mut out = base.clone();
                let mut changed = Vec::new();
                $(
                    if let Some(value) = self.$name {
                        if out.$name != value {
                            changed.push(stringify!($name));
                        }
                        out.$name = value;
                    }
                )*
                changed.sort_unstable();
                (out, changed)
            }
        }

        /// Every threshold by its name in a file, with where its default comes from.
        pub const SOURCES: &[(&str, &str)] = &[$((stringify!($name), $source),)*];
    };
}

thresholds! {
    /// Share of a phase's samples under a throttle reason above which it is a finding.
    throttle_share: f64 = 0.05, "kiln default: 5% of a phase's samples";
    /// HW slowdown within this many °C of the slowdown threshold points at cooling;
    /// further below, at power delivery.
    thermal_margin_c: f64 = 5.0, "NVML's clocks-event reasons: HW slowdown is heat or a power brake; kiln tells them apart by the slowdown threshold";
    /// A PCIe rate below this share of what healthy cards reach on the link in use, per
    /// generation and direction ([`PCIE_REACHED`]), is low (DCGM's 0.75 of what the product
    /// measures).
    pcie_low_share: f64 = 0.75, "DCGM's 0.75-of-measured convention (diag-skus.yaml), applied by kiln per PCIe generation and direction";
    /// Corrected ECC errors per minute of a loaded phase from which the memory is degrading
    /// under load (a healthy card corrects none, or a handful a day).
    ecc_corrected_per_minute: f64 = 1000.0, "kiln default: a memory correcting a thousand errors a minute under load is degrading (Xid 92 is the driver's own word for a high rate); a healthy card corrects none or a handful a day";
    /// PCIe replays per minute per GT/s per lane allowed: ceil(1e-12 x GT/s x 60 x lanes)
    /// per minute.
    replays_per_gts_lane_minute: f64 = 60e-12 * 1e9, "the PCIe base specification's bit error rate of 1e-12: replays above ceil(1e-12 x GT/s x 60 x lanes) a minute (kiln's budget)";
    /// A rate below this share of the product's reference is low, one rule for every rate
    /// (DCGM sets its floors at 0.75 of what the product measures), and so is a clock a
    /// setting holds below this share of its maximum. `vram_floor_share` in older files.
    #[alias = "vram_floor_share"]
    floor_share: f64 = 0.75, "DCGM's diag-skus.yaml: floors at 0.75 of what a product measures; kiln uses one share for every rate and for a clock a setting holds";
    /// A site's own VRAM floor in GB/s, measured on its cards; 0 uses the product's
    /// reference ([`crate::product`]) times `floor_share`.
    vram_floor_gbps: f64 = 0.0, "the site's own floor from its cards (0: the product's reference x floor_share)";
    /// A site's own floors for other rates, by the rate's name and in its unit
    /// (`{"compute_fp32_gops": 45000}`), measured on its cards: they replace the product's
    /// reference times `floor_share`.
    floors: BTreeMap<String, f64> = BTreeMap::new(), "the site's own floors from its cards (none: the product's reference x floor_share)";
    /// Floors from the site's own healthy cards, by product (the device's name) and rate,
    /// as `kiln baseline` writes them: taken before the product's reference and before
    /// `floors`, and a rate below one is a sure finding.
    baseline: BTreeMap<String, ProductFloors> = BTreeMap::new(), "kiln baseline: floors from the site's own healthy cards";
    /// A device this share below the median of its peers (devices of the same model in
    /// the same run) in a rate is a finding.
    peer_slow_share: f64 = 0.10, "kiln default: 10% below the median of the same model's devices in the run";
    /// A watched application's baseline (its lowest memory between iterations) that
    /// climbs at least this much in all is a leak when the climb is steady.
    leak_min_bytes: f64 = 16.0 * 1024.0 * 1024.0, "kiln default: 16 MiB of climb in all, so that allocator noise is never a leak";
    /// How well a straight line must fit the baselines (R²) for a leak.
    leak_fit_r2: f64 = 0.8, "kiln default: a steady climb, about the same amount every iteration";
    /// A peak at this share of the budget has reached it.
    budget_reached_share: f64 = 0.9, "kiln default: a peak within 10% of the budget reached it (drivers keep a reserve)";
    /// Another process growing by this share of the budget in the window before an
    /// application's failure took the memory it needed.
    other_process_share: f64 = 0.05, "kiln default: another process taking 5% of the budget before a failure";
    /// How far before an application's failure another process's growth counts, seconds.
    other_process_window_s: f64 = 60.0, "kiln default: growth in the minute before a failure";
}

/// The floors of one product, as a thresholds file carries them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProductFloors {
    /// Where they come from, in words: `site baseline, 64 NVIDIA H200 cards, 2026-12-01`.
    pub source: String,
    /// The healthy cards the floors rest on.
    pub cards: usize,
    /// The driver versions those cards ran.
    pub drivers: Vec<String>,
    /// Per rate (its name, as `floors` names it), the floor and what it rests on.
    pub rates: BTreeMap<String, RateFloor>,
    /// The cards left out of a rate's floor for falling far behind it.
    #[serde(default)]
    pub left_out: Vec<Behind>,
}

/// One rate's floor, in the workload's unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateFloor {
    /// Below this is slow.
    pub floor: f64,
    /// The healthy cards' median.
    pub median: f64,
    /// Their robust standard deviation (1.4826 MAD).
    pub sigma: f64,
    /// The cards it rests on.
    pub cards: usize,
}

/// A card behind its product's floor in one rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Behind {
    /// The node.
    pub node: String,
    /// The run directory.
    pub run: String,
    /// Its index in its run.
    pub index: usize,
    /// Its UUID.
    pub uuid: String,
    /// The rate.
    pub rate: String,
    /// What it reached.
    pub value: f64,
    /// The floor it is below.
    pub floor: f64,
    /// Its product's median.
    pub median: f64,
    /// How far below the median, as a share of it.
    pub share_below_median: f64,
}

/// What healthy cards reach on a PCIe link of each generation, per direction, as a share of
/// the link's theory (public measurements, each named): generation, host-to-device, device-to-host, source.
/// An H100's host-to-device copies reach only about 56% of Gen5 x16: one share for both
/// directions would call every healthy Hopper slow.
pub const PCIE_REACHED: &[(u32, f64, f64, &str)] = &[
    (
        3,
        0.76,
        0.76,
        "Microway, PCIe Gen3 x16 typical 12.1 GB/s; P100 bandwidthTest 12.2 and 12.9 GB/s (gearshifft #82) of 15.75",
    ),
    (
        4,
        0.76,
        0.83,
        "nvbandwidth #15: RTX 4090 H2D 24-26 and D2H 26-27 GB/s; #42: A100 H2D 25 of 31.5 GB/s",
    ),
    (
        5,
        0.56,
        0.84,
        "nvbandwidth #24: H100 H2D 35 and D2H 53 of 63 GB/s (SM copies)",
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

impl Thresholds {
    /// Loads overrides from a JSON file (any subset of the fields) over the defaults;
    /// validates every value.
    pub fn load(path: &std::path::Path) -> Result<Thresholds, String> {
        Thresholds::default().overlay(path).map(|(t, _)| t)
    }

    /// These thresholds with a JSON file's fields (any subset) laid over them, so that a
    /// site's file refines a profile's thresholds rather than resetting the rest; with the
    /// names of the fields the file changed.
    pub fn overlay(
        &self,
        path: &std::path::Path,
    ) -> Result<(Thresholds, Vec<&'static str>), String> {
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
        let own: UniqueKeys = serde_json::from_str(&text).map_err(|e| at(&e))?;
        if own.0.contains_key("vram_floor_share") && own.0.contains_key("floor_share") {
            return Err(at(
                &"`vram_floor_share` and `floor_share` are one setting: give one",
            ));
        }
        let overrides: Overrides =
            serde_json::from_value(serde_json::Value::Object(own.0)).map_err(|e| at(&e))?;
        let (t, changed) = overrides.lay_over(self);
        t.validate().map_err(|e| at(&e))?;
        Ok((t, changed))
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
        let (t, changed) = profile.overlay(&path).unwrap();
        assert_eq!(changed, ["pcie_low_share"]);
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
