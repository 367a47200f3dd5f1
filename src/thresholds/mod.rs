//! Every threshold the rules use, in one table, each with its default, the values it may
//! take and where the default comes from, and the site's own floors (`kiln baseline`'s
//! file, [`floors`]). Pure data, below the run directory and the verdict: a run records
//! the thresholds it was judged by in its manifest (typed), every rebuild judges by them,
//! and a `--thresholds` file ([`file`]) or a profile's `[thresholds]` table is laid over
//! them field by field.

mod file;
mod floors;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::limits::NumberBounds;

pub use file::FileError;
pub use floors::{Behind, MEASURED_RATES, MIN_CARDS, ProductFloors, RateFloor};

/// Declares the thresholds once: each field with its type, its default, the values it may
/// take (`in`: a [`NumberBounds`] for a figure, the rules of a table for the floors) and
/// where that default comes from. It makes [`Thresholds`], its `Default` and its
/// [`Thresholds::validate`], a file's [`Overrides`] (every field optional) and
/// [`SOURCES`], so that no field can have one without the others.
macro_rules! thresholds {
    ($(
        $(#[doc = $doc:literal])*
        $(#[alias = $alias:literal])?
        $name:ident: $ty:ty = $default:expr, in $valid:expr, $source:literal;
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

        impl Thresholds {
            /// Checks every value against the values its field may take; the error names
            /// the key (`baseline."NVIDIA H200".rates.vram_gib_per_s.cards`).
            pub fn validate(&self) -> Result<(), Invalid> {
                $(
                    Valid::check(&$valid, &self.$name)
                        .map_err(|e| e.under(stringify!($name)))?;
                )*
                Ok(())
            }
        }

        /// A thresholds file or a profile's `[thresholds]` table: any subset of the
        /// fields, each laid over the thresholds it refines.
        #[derive(Debug, Default)]
        pub struct Overrides {
            $($name: Option<$ty>,)*
        }

        impl Overrides {
            /// `base` with these fields laid over it, and the names of the fields whose
            /// value that changed, in the order of their names.
            pub fn lay_over(self, base: &Thresholds) -> (Thresholds, Vec<&'static str>) {
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

            /// Reads the value of the field `key` names (by its name or an older one);
            /// a key that names none, or a field given already, is one sentence.
            fn read<'de, A: serde::de::MapAccess<'de>>(
                &mut self,
                key: &str,
                map: &mut A,
            ) -> Result<(), A::Error> {
                match key {
                    $(
                        stringify!($name) $(| $alias)? => {
                            if self.$name.is_some() {
                                let other = [stringify!($name) $(, $alias)?]
                                    .into_iter()
                                    .find(|n| *n != key)
                                    .unwrap_or(key);
                                return map.next_value_seed(Refuse(format!(
                                    "`{key}` and `{other}` are one setting: give one"
                                )));
                            }
                            self.$name = Some(map.next_value()?);
                        }
                    )*
                    _ => {
                        let names: Vec<&str> = SOURCES.iter().map(|(n, _)| *n).collect();
                        return map.next_value_seed(Refuse(crate::text::not_one_of(
                            key,
                            "a threshold",
                            &names,
                            "docs/guide.md",
                        )));
                    }
                }
                Ok(())
            }
        }

        /// Every threshold by its name in a file, with where its default comes from.
        pub const SOURCES: &[(&str, &str)] = &[$((stringify!($name), $source),)*];

        /// The older names a file may still give a threshold by: (older, current).
        const ALIASES: &[(&str, &str)] = &[$($(($alias, stringify!($name)),)?)*];
    };
}

/// A share of something (a phase's samples, a product's rate, a budget): above 0 and at
/// most the whole, and no finer than a tenth of a percent, since a share below that is
/// a typing slip (`1e-300`), not a threshold any phase's samples or any card's rates
/// could be told apart by.
const SHARE: NumberBounds = NumberBounds {
    min: 0.001,
    max: 1.0,
    words: "a share between 0 and 1 (0.001 at least)",
};

/// A margin, budget or size where 0 means "any": a finite number, not negative.
const AT_LEAST_ZERO: NumberBounds = NumberBounds {
    min: 0.0,
    max: f64::MAX,
    words: "a number of at least 0",
};

/// A floor or a median: a finite number above 0 and no denormal (a rate that small is
/// no rate).
const ABOVE_ZERO: NumberBounds = NumberBounds {
    min: f64::MIN_POSITIVE,
    max: f64::MAX,
    words: "a number above 0",
};

/// A margin below a card's temperature limit, °C: none to 50 (every limit a card has lies
/// within 50 °C of where a loaded card runs).
const MARGIN_C: NumberBounds = NumberBounds {
    min: 0.0,
    max: 50.0,
    words: "a number of at least 0 and at most 50 (°C)",
};

/// A fan's speed, percent of its maximum: 0 to 100.
const PERCENT: NumberBounds = NumberBounds {
    min: 0.0,
    max: 100.0,
    words: "a number of at least 0 and at most 100 (%)",
};

/// How well a line fits (R²): 0 to 1.
const FIT_R2: NumberBounds = NumberBounds {
    min: 0.0,
    max: 1.0,
    words: "a number between 0 and 1",
};

/// A window of time before an event, seconds: a millisecond to a day.
const WINDOW_S: NumberBounds = NumberBounds {
    min: 0.001,
    max: 86_400.0,
    words: "a number of seconds from 0.001 to 86400",
};

/// A count of retired pages: one to the 64 that the page-retirement table holds (NVIDIA's
/// "Row Remapping" document: page retirement supported a maximum of 64 retirements).
const RETIRED_PAGES: NumberBounds = NumberBounds {
    min: 1.0,
    max: 64.0,
    words: "a number of pages from 1 to 64",
};

thresholds! {
    /// Share of a phase's samples under a throttle reason above which it is a finding.
    throttle_share: f64 = 0.05, in SHARE, "kiln default: 5% of a phase's samples";
    /// HW slowdown within this many °C of the slowdown threshold points at cooling;
    /// further below, at power delivery.
    thermal_margin_c: f64 = 5.0, in MARGIN_C, "NVML's clocks-event reasons: HW slowdown is heat or a power brake; kiln tells them apart by the slowdown threshold";
    /// A fan whose speed never rose above this percent of its maximum in a loaded phase
    /// while the GPU was hot (slowing for heat, or within `thermal_margin_c` of its
    /// slowdown temperature) has failed, or its control has: a cooler that works runs far
    /// faster there. 0 judges only a stopped fan.
    fan_floor_pct: f64 = 30.0, in PERCENT, "NVML's nvmlDeviceGetFanSpeed is the fan's intended speed as a percent of its maximum, and zero-RPM fan stop holds it at 0 only while the GPU is cool; kiln default: under 30% on a GPU at its slowdown temperature is far below any fan curve";
    /// A PCIe rate below this share of what healthy cards reach on the link in use, per
    /// generation and direction ([`PCIE_REACHED`]), is low (DCGM's 0.75 of what the product
    /// measures).
    pcie_low_share: f64 = 0.75, in SHARE, "DCGM's 0.75-of-measured convention (diag-skus.yaml), applied by kiln per PCIe generation and direction";
    /// Corrected ECC errors per minute of a loaded phase from which the memory is degrading
    /// under load (a healthy card corrects none, or a handful a day).
    ecc_corrected_per_minute: f64 = 1000.0, in AT_LEAST_ZERO, "kiln default: a memory correcting a thousand errors a minute under load is degrading (Xid 92 is the driver's own word for a high rate); a healthy card corrects none or a handful a day";
    /// Pages retired over a card's life (single- and double-bit together) at which the card
    /// fails, whether or not any was retired during the run.
    retired_pages_limit: f64 = 63.0, in RETIRED_PAGES, "DCGM's health check and diagnostic: 63 retired pages (SBE and DBE together) or more fail the GPU (DCGM_LIMIT_MAX_RETIRED_PAGES, 60 in older releases); the table holds 64";
    /// Pages retired for double-bit errors past which a card that retires more than one
    /// more such page in a week fails.
    retired_pages_dbe_soft_limit: f64 = 15.0, in RETIRED_PAGES, "DCGM's health check: more than 15 pages retired for double-bit errors, and more than one more of them in a week, fail the GPU (DCGM_LIMIT_MAX_RETIRED_PAGES_SOFT_LIMIT)";
    /// PCIe replays per minute per GT/s per lane allowed: ceil(1e-12 x GT/s x 60 x lanes)
    /// per minute.
    replays_per_gts_lane_minute: f64 = 60e-12 * 1e9, in AT_LEAST_ZERO, "the PCIe base specification's bit error rate of 1e-12: replays above ceil(1e-12 x GT/s x 60 x lanes) a minute (kiln's budget)";
    /// A rate below this share of the product's reference is low, one rule for every rate
    /// (DCGM sets its floors at 0.75 of what the product measures), and so is a clock a
    /// setting holds below this share of its maximum. `vram_floor_share` in older files.
    #[alias = "vram_floor_share"]
    floor_share: f64 = 0.75, in SHARE, "DCGM's diag-skus.yaml: floors at 0.75 of what a product measures; kiln uses one share for every rate and for a clock a setting holds";
    /// A site's own VRAM floor in GB/s, measured on its cards; 0 uses the product's
    /// reference ([`crate::product`]) times `floor_share`.
    vram_floor_gbps: f64 = 0.0, in AT_LEAST_ZERO, "the site's own floor from its cards (0: the product's reference x floor_share)";
    /// A site's own floors for other rates, by the rate's name and in its unit
    /// (`{"compute_fp32_gops": 45000}`), measured on its cards: they replace the product's
    /// reference times `floor_share`.
    floors: BTreeMap<String, f64> = BTreeMap::new(), in floors::EachRateFloor, "the site's own floors from its cards (none: the product's reference x floor_share)";
    /// Floors from the site's own healthy cards, by product (the device's name) and rate,
    /// as `kiln baseline` writes them: taken before the product's reference and before
    /// `floors`, and a rate below one is a sure finding.
    baseline: BTreeMap<String, ProductFloors> = BTreeMap::new(), in floors::EachProduct, "kiln baseline: floors from the site's own healthy cards";
    /// A device this share below the median of its peers (devices of the same model in
    /// the same run) in a rate is a finding.
    peer_slow_share: f64 = 0.10, in SHARE, "kiln default: 10% below the median of the same model's devices in the run";
    /// A watched application's baseline (its lowest memory between iterations) that
    /// climbs at least this much in all is a leak when the climb is steady.
    leak_min_bytes: f64 = 16.0 * 1024.0 * 1024.0, in AT_LEAST_ZERO, "kiln default: 16 MiB of climb in all, so that allocator noise is never a leak";
    /// How well a straight line must fit the baselines (R²) for a leak.
    leak_fit_r2: f64 = 0.8, in FIT_R2, "kiln default: a steady climb, about the same amount every iteration";
    /// A peak at this share of the budget has reached it.
    budget_reached_share: f64 = 0.9, in SHARE, "kiln default: a peak within 10% of the budget reached it (drivers keep a reserve)";
    /// Another process growing by this share of the budget in the window before an
    /// application's failure took the memory it needed.
    other_process_share: f64 = 0.05, in SHARE, "kiln default: another process taking 5% of the budget before a failure";
    /// How far before an application's failure another process's growth counts, seconds.
    other_process_window_s: f64 = 60.0, in WINDOW_S, "kiln default: growth in the minute before a failure";
}

/// A threshold that cannot be, and where it is among the thresholds: its path of keys from
/// the top (`["baseline", "NVIDIA H200", "rates", "vram_gib_per_s", "cards"]`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{}`: {message}", self.key())]
pub struct Invalid {
    /// The keys from the top of the thresholds to the value at fault.
    pub path: Vec<String>,
    /// What is wrong with it.
    pub message: String,
}

impl Invalid {
    /// `message`, about the value itself (its keys are added on the way up).
    pub fn new(message: impl Into<String>) -> Invalid {
        Invalid {
            path: Vec::new(),
            message: message.into(),
        }
    }

    /// This, about a value under `key`.
    pub fn under(mut self, key: &str) -> Invalid {
        self.path.insert(0, key.to_owned());
        self
    }

    /// The path as TOML writes a dotted key: `baseline."NVIDIA H200".rates`.
    pub fn key(&self) -> String {
        dotted(&self.path)
    }
}

/// Keys as TOML writes a dotted key, quoting those that are not bare.
pub fn dotted(path: &[String]) -> String {
    path.iter()
        .map(|k| {
            let bare = !k.is_empty()
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if bare { k.clone() } else { format!("{k:?}") }
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// What a threshold's value must be: a figure's range, a table of floors' rules.
trait Valid<T> {
    /// Why `value` cannot be, its path below the field.
    fn check(&self, value: &T) -> Result<(), Invalid>;
}

impl Valid<f64> for NumberBounds {
    fn check(&self, value: &f64) -> Result<(), Invalid> {
        figure(self, *value)
    }
}

/// `value` checked against `range`.
fn figure(range: &NumberBounds, value: f64) -> Result<(), Invalid> {
    range.check(value).map(drop).map_err(Invalid::new)
}

/// A value refused for its key, with why: refused as the value is read, so that each
/// format's reader says where that value is (a TOML table's key, not its header).
struct Refuse(String);

impl<'de> serde::de::DeserializeSeed<'de> for Refuse {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, _: D) -> Result<(), D::Error> {
        Err(serde::de::Error::custom(self.0))
    }
}

impl<'de> Deserialize<'de> for Overrides {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Overrides;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a table of thresholds, e.g. {\"throttle_share\": 0.2}")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Overrides, A::Error> {
                let mut out = Overrides::default();
                let mut seen: Vec<String> = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    if seen.contains(&key) {
                        return Err(serde::de::Error::custom(format!("`{key}` is given twice")));
                    }
                    out.read(&key, &mut map)?;
                    seen.push(key);
                }
                Ok(out)
            }
        }
        d.deserialize_map(Visitor)
    }
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
    pub fn load(path: &std::path::Path) -> Result<Thresholds, FileError> {
        Thresholds::default().overlay(path).map(|(t, _)| t)
    }

    /// These thresholds with a JSON file's fields (any subset) laid over them, so that a
    /// site's file refines a profile's thresholds rather than resetting the rest; with the
    /// names of the fields the file changed. Every value is validated, and a refusal names
    /// the file, the line and the key.
    pub fn overlay(
        &self,
        path: &std::path::Path,
    ) -> Result<(Thresholds, Vec<&'static str>), FileError> {
        let text = file::read(path)?;
        let overrides = file::parse(path, &text)?;
        let (t, changed) = overrides.lay_over(self);
        t.validate().map_err(|e| file::invalid(path, &text, e))?;
        Ok((t, changed))
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
            Thresholds::load(&missing).unwrap_err().to_string(),
            format!("{}: no such thresholds file", missing.display())
        );
        assert_eq!(
            Thresholds::load(dir.path()).unwrap_err().to_string(),
            format!(
                "{}: a directory, not a thresholds file",
                dir.path().display()
            )
        );
    }

    /// The refusal of `text` as a thresholds file named `t.json`, or the thresholds.
    fn load(text: &str) -> Result<Thresholds, String> {
        refusal(text).map_err(|e| e.to_string())
    }

    fn refusal(text: &str) -> Result<Thresholds, FileError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        std::fs::write(&path, text).unwrap();
        Thresholds::load(&path).map_err(|e| FileError {
            file: "t.json".into(),
            ..e
        })
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
        let typo = load(r#"{"trottle_share": 0.1}"#).unwrap_err();
        assert_eq!(
            typo,
            "t.json:1: `trottle_share` is not a threshold; did you mean `throttle_share`?"
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

    #[test]
    fn every_default_lies_within_its_own_range() {
        Thresholds::default()
            .validate()
            .unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn a_figure_out_of_its_range_is_refused_by_kind_with_its_line_and_key() {
        // (file, line, key, words): shares, margins, windows, and the values no JSON
        // reader takes (1e999 is no finite number).
        let cases = [
            (
                "{\"throttle_share\": 1e-300}",
                1,
                "throttle_share",
                "1e-300 is not a share between 0 and 1",
            ),
            ("{\"floor_share\": 0}", 1, "floor_share", "0 is not a share"),
            (
                "{\n\"vram_floor_share\": 1.5}",
                2,
                "vram_floor_share",
                "1.5 is not a share",
            ),
            (
                "{\"peer_slow_share\": -0.1}",
                1,
                "peer_slow_share",
                "not a share",
            ),
            (
                "{\"budget_reached_share\": 2}",
                1,
                "budget_reached_share",
                "not a share",
            ),
            (
                "{\"other_process_share\": 0}",
                1,
                "other_process_share",
                "not a share",
            ),
            (
                "{\"pcie_low_share\": 1.0000001}",
                1,
                "pcie_low_share",
                "not a share",
            ),
            (
                "{\"leak_fit_r2\": 1.5}",
                1,
                "leak_fit_r2",
                "between 0 and 1",
            ),
            (
                "{\"thermal_margin_c\": 500}",
                1,
                "thermal_margin_c",
                "at most 50",
            ),
            (
                "{\"other_process_window_s\": 0}",
                1,
                "other_process_window_s",
                "from 0.001 to 86400",
            ),
            (
                "{\"ecc_corrected_per_minute\": -1}",
                1,
                "ecc_corrected_per_minute",
                "at least 0",
            ),
            (
                "{\"replays_per_gts_lane_minute\": -1e-9}",
                1,
                "replays_per_gts_lane_minute",
                "at least 0",
            ),
            (
                "{\"leak_min_bytes\": -1}",
                1,
                "leak_min_bytes",
                "at least 0",
            ),
            (
                "{\n  \"floors\": {\n    \"vram_gib_per_s\": -3}}",
                3,
                "floors.vram_gib_per_s",
                "-3 is not a number above 0",
            ),
            (
                "{\"floors\": {\"vram_gib_per_s\": 1e-310}}",
                1,
                "floors.vram_gib_per_s",
                "1e-310 is not a number above 0",
            ),
            (
                "{\"throttle_share\": 1e999}",
                1,
                "throttle_share",
                "number out of range",
            ),
            (
                "{\"throttle_share\": \"high\"}",
                1,
                "throttle_share",
                "invalid type: string",
            ),
        ];
        for (text, line, key, words) in cases {
            let e = refusal(text).expect_err(text);
            assert_eq!(
                (e.line, e.key.as_deref()),
                (Some(line), Some(key)),
                "{text}: {e}"
            );
            let sentence = e.to_string();
            assert!(sentence.contains(words), "{text}: {sentence}");
            assert!(
                sentence.starts_with(&format!("t.json:{line}: `{key}`")),
                "{sentence}"
            );
            assert!(!sentence.contains('\n'), "{sentence}");
        }
    }

    /// A floors file as `kiln baseline` writes it, with `edit` applied to its H200's VRAM
    /// floor (a line of its own).
    fn floors_file(edit: &str) -> String {
        let rate = if edit.is_empty() {
            r#""floor": 3564.0, "median": 3960.0, "sigma": 30.0, "cards": 7"#.to_owned()
        } else {
            edit.to_owned()
        };
        format!(
            r#"{{
  "baseline": {{
    "NVIDIA H200": {{
      "source": "site baseline, 7 NVIDIA H200 cards, 2026-12-01",
      "cards": 7,
      "drivers": ["550.90.07"],
      "rates": {{
        "vram_gib_per_s": {{
          {rate}
        }}
      }},
      "left_out": []
    }}
  }}
}}"#
        )
    }

    #[test]
    fn a_floors_file_as_a_baseline_writes_it_loads() {
        let t = load(&floors_file("")).unwrap();
        let h200 = &t.baseline["NVIDIA H200"];
        assert_eq!(h200.cards, 7);
        assert_eq!(h200.rates["vram_gib_per_s"].floor, 3564.0);
    }

    #[test]
    fn an_impossible_floor_is_refused_with_its_line_and_key() {
        let at = r#"baseline."NVIDIA H200".rates.vram_gib_per_s"#;
        let cases = [
            (
                r#""floor": 3564.0, "median": 3960.0, "sigma": 30.0, "cards": 0"#,
                9,
                format!("{at}.cards"),
                "0 cards is fewer than the 4 healthy cards a floor rests on",
            ),
            (
                r#""floor": -1, "median": 3960.0, "sigma": 30.0, "cards": 7"#,
                9,
                format!("{at}.floor"),
                "-1 is not a number above 0",
            ),
            (
                r#""floor": 0, "median": 3960.0, "sigma": 30.0, "cards": 7"#,
                9,
                format!("{at}.floor"),
                "0 is not a number above 0",
            ),
            (
                r#""floor": 4000, "median": 3960.0, "sigma": 30.0, "cards": 7"#,
                9,
                format!("{at}.floor"),
                "4000 is above the median 3960",
            ),
            (
                r#""floor": 3564.0, "median": 3960.0, "sigma": -2, "cards": 7"#,
                9,
                format!("{at}.sigma"),
                "-2 is not a number of at least 0",
            ),
            (
                r#""floor": 3564.0, "median": 3960.0, "sigma": 30.0, "cards": 9"#,
                9,
                format!("{at}.cards"),
                "9 cards is more than the product's 7",
            ),
            (
                r#""floor": 3564.0, "median": 3960.0, "sigma": 30.0, "cards": -7"#,
                9,
                format!("{at}.cards"),
                "invalid value: integer `-7`",
            ),
            (
                r#""floor": 3564.0, "median": 3960.0, "sigma": 30.0, "cards": 7, "cards": 8"#,
                9,
                format!("{at}.cards"),
                "`cards` is given twice",
            ),
            (
                r#""flor": 3564.0, "median": 3960.0, "sigma": 30.0, "cards": 7"#,
                9,
                format!("{at}.flor"),
                "unknown field `flor`",
            ),
        ];
        for (rate, line, key, words) in cases {
            let e = refusal(&floors_file(rate)).expect_err(rate);
            assert_eq!(
                (e.line, e.key.as_deref()),
                (Some(line), Some(key.as_str())),
                "{rate}: {e}"
            );
            let sentence = e.to_string();
            assert!(sentence.contains(words), "{rate}: {sentence}");
            assert!(sentence.len() < 400, "{sentence}");
        }
        // A rate kiln never measures: the one meant, on the rate's own line.
        let renamed = floors_file("").replace("vram_gib_per_s", "vram_gbit_per_s");
        let e = refusal(&renamed).unwrap_err();
        assert_eq!(e.line, Some(8), "{e}");
        assert_eq!(
            e.to_string(),
            r#"t.json:8: `baseline."NVIDIA H200".rates.vram_gbit_per_s`: `vram_gbit_per_s` is not a rate kiln measures; did you mean `vram_gib_per_s`?"#
        );
        let unknown = floors_file("").replace("vram_gib_per_s", "power_watts");
        let e = refusal(&unknown).unwrap_err().to_string();
        assert!(
            e.ends_with(
                "`power_watts` is not a rate kiln measures (they are listed in docs/fleet.md)"
            ),
            "{e}"
        );
        // The product's own count.
        let none = floors_file("").replace(
            "\"cards\": 7,\n      \"drivers\"",
            "\"cards\": 0,\n      \"drivers\"",
        );
        let e = refusal(&none).unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(5), Some(r#"baseline."NVIDIA H200".cards"#)),
            "{e}"
        );
    }

    #[test]
    fn no_refusal_lists_every_name_it_knows() {
        // A name with no close match: where the names are listed, not the list.
        let e = load(r#"{"colour": "blue"}"#).unwrap_err();
        assert_eq!(
            e,
            "t.json:1: `colour` is not a threshold (they are listed in docs/guide.md)"
        );
        let e = load(r#"{"floors": {"watts": 1}}"#).unwrap_err();
        assert!(e.len() < 400 && e.contains("one of vram_gib_per_s"), "{e}");
    }

    #[test]
    fn the_docs_list_every_threshold_and_every_measured_rate() {
        let guide = include_str!("../../docs/guide.md");
        for (name, _) in SOURCES {
            assert!(
                guide.contains(&format!("`{name}`")),
                "docs/guide.md lacks `{name}`"
            );
        }
        let fleet = include_str!("../../docs/fleet.md");
        for rate in MEASURED_RATES {
            assert!(
                fleet.contains(&format!("`{rate}`")),
                "docs/fleet.md lacks `{rate}`"
            );
        }
    }

    #[test]
    fn the_measured_rates_are_those_the_workloads_give() {
        use crate::workload::compute::ComputeKind;
        use crate::workload::matrix::MatrixKind;
        let mut given = vec!["vram_gib_per_s", "pcie_h2d_gbps", "pcie_d2h_gbps"];
        given.extend(
            [ComputeKind::Fp32, ComputeKind::Int32, ComputeKind::Fp16].map(ComputeKind::rate_name),
        );
        for k in MatrixKind::ALL {
            given.extend([k.rate_name(false), k.rate_name(true)]);
        }
        given.sort_unstable();
        let mut listed = MEASURED_RATES.to_vec();
        listed.sort_unstable();
        assert_eq!(given, listed);
        for rate in crate::product::Rate::ALL {
            assert!(MEASURED_RATES.contains(&rate.name()), "{}", rate.name());
        }
    }
}
