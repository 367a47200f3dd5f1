//! The list of workloads, in one place. Each line names a workload's [`Kind`] (its module
//! holds everything about it); from the list come the names (`WorkloadName`), the
//! settings of a planned workload (`WorkloadConfig`) and the typed results
//! (`WorkloadResult`) that profiles, the command line, the run, the verdict and the
//! reports use. Adding a workload is one line here.

use serde::{Deserialize, Serialize};

use super::settings::{KeysAsked, SettingError, SettingsTable};
use super::show::{Metric, MetricFamily, Section};
use super::{Envelope, Kind, PlanDetail, Report, Workload};
use crate::finding::Finding;
use crate::gpu::DeviceInfo;

macro_rules! registry {
    ($($variant:ident => $kind:ty,)+) => {
        /// The workloads `kiln run` can run.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
        #[serde(rename_all = "snake_case")]
        pub enum WorkloadName {
            $(
                #[doc = concat!("`", stringify!($kind), "`.")]
                $variant,
            )+
        }

        impl WorkloadName {
            /// Every workload, in the registry's order.
            pub const ALL: &'static [WorkloadName] = &[$(WorkloadName::$variant),+];

            /// The name in profiles, evidence and reports (`vram`, `heat`).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(WorkloadName::$variant => <$kind as Kind>::NAME,)+
                }
            }

            /// Its share of the time budget when a profile or the command line gives none.
            pub fn default_weight(self) -> u32 {
                match self {
                    $(WorkloadName::$variant => <$kind as Kind>::DEFAULT_WEIGHT,)+
                }
            }

            /// The keys its `[[workload]]` table takes besides `kind` and `weight`, as the
            /// workload asks for them.
            pub fn profile_keys(self) -> Vec<String> {
                let mut table = KeysAsked::default();
                // A table with no keys has no wrong value: every getter is asked.
                let _ = WorkloadConfig::from_profile(self, &mut table);
                table.asked
            }
        }

        /// A workload and its settings.
        // A plan holds a handful of these, made once per run: the size of the largest
        // (`heat`, two workloads' settings) costs nothing worth a box.
        #[allow(clippy::large_enum_variant)]
        #[derive(Debug, Clone, Serialize, Deserialize)]
        #[serde(tag = "workload", rename_all = "snake_case")]
        pub enum WorkloadConfig {
            $(
                #[doc = concat!("`", stringify!($kind), "` and its settings.")]
                $variant(<$kind as Kind>::Settings),
            )+
        }

        impl WorkloadConfig {
            /// Which workload this is.
            pub fn name(&self) -> WorkloadName {
                match self {
                    $(WorkloadConfig::$variant(_) => WorkloadName::$variant,)+
                }
            }

            /// Workload `name`'s settings from a profile's `[[workload]]` table.
            pub fn from_profile(
                name: WorkloadName,
                table: &mut dyn SettingsTable,
            ) -> Result<WorkloadConfig, SettingError> {
                Ok(match name {
                    $(WorkloadName::$variant => WorkloadConfig::$variant(<$kind as Kind>::from_profile(table)?),)+
                })
            }

            /// The workload with default settings.
            pub fn default_of(name: WorkloadName) -> WorkloadConfig {
                match name {
                    $(WorkloadName::$variant => WorkloadConfig::$variant(Default::default()),)+
                }
            }

            /// The parts to run at once (one, or two for `heat`), ready to run.
            pub fn build(&self) -> Vec<Box<dyn Workload + Send>> {
                match self {
                    $(WorkloadConfig::$variant(s) => <$kind as Kind>::build(s),)+
                }
            }

            /// What it will do on `device` (`--dry-run`); an error is settings that cannot
            /// work on this device.
            pub fn describe(&self, device: &DeviceInfo) -> Result<PlanDetail, String> {
                match self {
                    $(WorkloadConfig::$variant(s) => <$kind as Kind>::describe(s, device),)+
                }
            }
        }

        /// What one run of a workload found, typed by its name.
        #[derive(Debug, Clone)]
        pub enum WorkloadResult {
            $(
                #[doc = concat!("The result of `", stringify!($kind), "`.")]
                $variant(<$kind as Kind>::Result),
            )+
            /// A summary that is not a known workload's result: another version's
            /// evidence, or a damaged record. Kept as written, with what of the shared
            /// envelope could be read from it; no workload rule reads it.
            Unread(Unread),
        }

        $(
            impl From<<$kind as Kind>::Result> for WorkloadResult {
                fn from(result: <$kind as Kind>::Result) -> WorkloadResult {
                    WorkloadResult::$variant(result)
                }
            }
        )+

        impl WorkloadResult {
            /// The summary of workload `name` as written, typed; what does not read as
            /// that workload's result is kept [`WorkloadResult::Unread`].
            pub fn from_json(name: &str, summary: serde_json::Value) -> WorkloadResult {
                $(
                    if name == <$kind as Kind>::NAME {
                        if let Ok(r) = serde_json::from_value(summary.clone()) {
                            return WorkloadResult::$variant(r);
                        }
                    }
                )+
                WorkloadResult::Unread(Unread {
                    envelope: serde_json::from_value(summary.clone()).unwrap_or_default(),
                    summary,
                })
            }

            /// The summary as written.
            pub fn to_json(&self) -> serde_json::Value {
                match self {
                    $(WorkloadResult::$variant(r) => serde_json::to_value(r).unwrap_or_default(),)+
                    WorkloadResult::Unread(u) => u.summary.clone(),
                }
            }

            /// The part every result shares.
            pub fn envelope(&self) -> &Envelope {
                match self {
                    $(WorkloadResult::$variant(r) => r.envelope(),)+
                    WorkloadResult::Unread(u) => &u.envelope,
                }
            }

            /// The part every result shares, to fill in.
            pub fn envelope_mut(&mut self) -> &mut Envelope {
                match self {
                    $(WorkloadResult::$variant(r) => r.envelope_mut(),)+
                    WorkloadResult::Unread(u) => &mut u.envelope,
                }
            }

            /// How the run ended and its sentence for people, as the workload judges its
            /// own result; None for a summary no workload reads.
            pub fn status_and_headline(&self) -> Option<(super::WorkloadStatus, String)> {
                match self {
                    $(WorkloadResult::$variant(r) => Some((r.status(), r.headline())),)+
                    WorkloadResult::Unread(_) => None,
                }
            }

            /// What the result proves by itself.
            pub fn judge(&self) -> Vec<Finding> {
                match self {
                    $(WorkloadResult::$variant(r) => <$kind as Kind>::judge(r),)+
                    WorkloadResult::Unread(_) => Vec::new(),
                }
            }

            /// Its numbers for Prometheus.
            pub fn metrics(&self) -> Vec<Metric> {
                match self {
                    $(WorkloadResult::$variant(r) => <$kind as Kind>::metrics(r),)+
                    WorkloadResult::Unread(_) => Vec::new(),
                }
            }

            /// The rates it measured, for peers and baselines.
            pub fn rates(&self) -> Vec<(&'static str, f64)> {
                match self {
                    $(WorkloadResult::$variant(r) => <$kind as Kind>::rates(r),)+
                    WorkloadResult::Unread(_) => Vec::new(),
                }
            }

            /// Its part of the text and HTML reports.
            pub fn sections(&self) -> Vec<Section> {
                match self {
                    $(WorkloadResult::$variant(r) => <$kind as Kind>::sections(r),)+
                    WorkloadResult::Unread(_) => Vec::new(),
                }
            }
        }

        /// Every workload's Prometheus families, in the registry's order.
        pub fn metric_families() -> Vec<&'static MetricFamily> {
            let mut out = Vec::new();
            $(out.extend(<$kind as Kind>::METRICS.iter());)+
            out
        }
    };
}

registry! {
    Vram => super::vram::Vram,
    Compute => super::compute::Compute,
    Pcie => super::pcie::Pcie,
    Fragment => super::fragment::Fragment,
    Heat => super::heat::Heat,
    Matrix => super::matrix::Matrix,
    Resident => super::resident::Resident,
    Psu => super::psu::Psu,
}

impl WorkloadName {
    /// The workload called `name`, or the sentence saying it is unknown and which are known.
    pub fn parse(name: &str) -> Result<WorkloadName, String> {
        WorkloadName::ALL
            .iter()
            .copied()
            .find(|w| w.as_str() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = WorkloadName::ALL.iter().map(|w| w.as_str()).collect();
                crate::text::unknown("workload", name, &known, &[])
            })
    }

    /// Parses a comma-separated list (`vram,compute`).
    pub fn parse_list(list: &str) -> Result<Vec<WorkloadName>, String> {
        let mut out = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let w = WorkloadName::parse(name)?;
            if !out.contains(&w) {
                out.push(w);
            }
        }
        if out.is_empty() {
            return Err("no workload named".into());
        }
        Ok(out)
    }
}

/// A summary no workload reads as its result (see [`WorkloadResult::Unread`]).
#[derive(Debug, Clone, Default)]
pub struct Unread {
    /// The summary as written.
    pub summary: serde_json::Value,
    /// The shared envelope, as far as it could be read from it.
    pub envelope: Envelope,
}

/// One workload of a plan and its share of the device's time budget.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlannedWorkload {
    /// Parts of the budget (memory usually three to one for each other workload).
    pub weight: u32,
    /// What to run.
    pub config: WorkloadConfig,
}

/// `plan` on `device`, its VRAM tests told what memory the workloads that run all along
/// (the resident region) hold, so that they size themselves around it.
pub fn with_room_beside(plan: &[PlannedWorkload], device: &DeviceInfo) -> Vec<PlannedWorkload> {
    let held: u64 = plan
        .iter()
        .filter_map(|p| match &p.config {
            WorkloadConfig::Resident(r) => r.bytes_on(device).ok(),
            _ => None,
        })
        .sum();
    let mut plan = plan.to_vec();
    for p in &mut plan {
        if let Some(v) = p.config.vram_mut() {
            v.beside_bytes = held;
        }
    }
    plan
}

/// What the workloads' shares of the budget are out of: the weights of those that take
/// turns (one that runs alongside takes no share), at least 1.
pub fn weight_in_turn(plan: &[PlannedWorkload]) -> u32 {
    plan.iter()
        .filter(|p| !p.config.runs_alongside())
        .map(|p| p.weight)
        .sum::<u32>()
        .max(1)
}

impl PlannedWorkload {
    /// The workload with its default settings and default weight.
    pub fn default_of(name: WorkloadName) -> PlannedWorkload {
        PlannedWorkload {
            weight: name.default_weight(),
            config: WorkloadConfig::default_of(name),
        }
    }
}

impl WorkloadConfig {
    /// The names of the parts it runs: its own, or those of the workloads a load runs at
    /// once (`heat`: `vram` and `compute`), each of which reports an outcome.
    pub fn parts(&self) -> Vec<&'static str> {
        self.build().iter().map(|w| w.name()).collect()
    }

    /// The power target its load holds, in percent of the enforced limit, if any: the run
    /// then feeds the device's telemetry to it.
    pub fn power_target(&self) -> Option<u32> {
        match self {
            WorkloadConfig::Compute(c) => c.power_target,
            WorkloadConfig::Matrix(m) => m.power_target,
            WorkloadConfig::Heat(h) => h.power_target(),
            WorkloadConfig::Psu(p) => p.heat.power_target(),
            _ => None,
        }
    }

    /// Whether its load reads the device's telemetry as it runs (a power target, the
    /// clock of a sweep's levels or a pause, the temperatures of the resident region's
    /// checks, the power under the combined load): the run then feeds it every sample.
    pub fn reads_telemetry(&self) -> bool {
        use super::compute::{ComputeConfig, LoadShape};
        use super::heat::HeatLoad;
        use super::matrix::{MatrixConfig, MatrixShape};
        let compute =
            |c: &ComputeConfig| matches!(c.shape, LoadShape::Sweep | LoadShape::Pauses { .. });
        let matrix = |m: &MatrixConfig| m.shape == MatrixShape::Sweep;
        self.power_target().is_some()
            || match self {
                WorkloadConfig::Compute(c) => compute(c),
                WorkloadConfig::Matrix(m) => matrix(m),
                WorkloadConfig::Heat(h) => match h.load {
                    HeatLoad::Compute => compute(&h.compute),
                    HeatLoad::Matrix => matrix(&h.matrix),
                },
                WorkloadConfig::Resident(_) | WorkloadConfig::Psu(_) => true,
                _ => false,
            }
    }

    /// The VRAM test's settings, where this workload has a VRAM test (`vram`, `heat`):
    /// for the command line's VRAM flags and the watchdog's allowance for idle steps.
    pub fn vram(&self) -> Option<&super::vram::VramConfig> {
        match self {
            WorkloadConfig::Vram(v) => Some(v),
            WorkloadConfig::Heat(h) => Some(&h.vram),
            WorkloadConfig::Psu(p) => Some(&p.heat.vram),
            _ => None,
        }
    }

    /// The VRAM test's settings to change (the command line's flags; the memory a
    /// workload running alongside holds).
    pub fn vram_mut(&mut self) -> Option<&mut super::vram::VramConfig> {
        match self {
            WorkloadConfig::Vram(v) => Some(v),
            WorkloadConfig::Heat(h) => Some(&mut h.vram),
            WorkloadConfig::Psu(p) => Some(&mut p.heat.vram),
            _ => None,
        }
    }

    /// True for a workload that runs all along beside the others on a context of its own
    /// (`resident`), taking no share of the time.
    pub fn runs_alongside(&self) -> bool {
        matches!(self, WorkloadConfig::Resident(_))
    }

    /// The time a run of it cannot do without, whatever its budget: the retention test's
    /// two idle waits. Every other workload fits what it does to the time it is given.
    pub fn least_time(&self) -> std::time::Duration {
        self.vram()
            .filter(|v| {
                v.algorithms
                    .contains(&super::vram::algorithm::Algorithm::Retention)
            })
            .map_or(std::time::Duration::ZERO, |v| v.retention_delay * 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_to_its_workload() {
        for &w in WorkloadName::ALL {
            assert_eq!(WorkloadName::parse(w.as_str()), Ok(w));
            assert_eq!(WorkloadConfig::default_of(w).name(), w);
            assert_eq!(PlannedWorkload::default_of(w).weight, w.default_weight());
            // The serde tag of the settings and the name must agree: the plan in a
            // manifest is read back by it.
            let json = serde_json::to_value(WorkloadConfig::default_of(w)).unwrap_or_default();
            assert_eq!(json["workload"], w.as_str());
            assert_eq!(serde_json::to_value(w).unwrap_or_default(), w.as_str());
        }
        assert_eq!(
            WorkloadName::parse("pcie9").unwrap_err(),
            "unknown workload `pcie9`; did you mean `pcie`?"
        );
        assert_eq!(
            WorkloadName::parse("gpu-burn").unwrap_err(),
            "unknown workload `gpu-burn` (known: vram, compute, pcie, fragment, heat, matrix, resident, psu)"
        );
    }

    #[test]
    fn each_workload_says_which_profile_keys_it_takes() {
        let keys = |w: WorkloadName| w.profile_keys();
        assert_eq!(
            keys(WorkloadName::Vram),
            ["algorithms", "passes", "percent", "retention_delay"]
        );
        assert_eq!(keys(WorkloadName::Pcie), ["max_bytes"]);
        assert_eq!(keys(WorkloadName::Fragment), ["rounds"]);
        assert_eq!(
            keys(WorkloadName::Matrix),
            ["rounds", "power_target", "kinds", "path", "shape", "size"]
        );
        // heat takes which load runs beside the VRAM test, and what its parts take.
        let mut all = vec!["load".to_owned()];
        all.extend(keys(WorkloadName::Vram));
        for k in keys(WorkloadName::Compute)
            .into_iter()
            .chain(keys(WorkloadName::Matrix))
        {
            if !all.contains(&k) {
                all.push(k);
            }
        }
        assert_eq!(keys(WorkloadName::Heat), all);
        assert_eq!(
            WorkloadConfig::default_of(WorkloadName::Heat).parts(),
            ["vram", "compute"]
        );
        assert_eq!(
            WorkloadConfig::default_of(WorkloadName::Pcie).parts(),
            ["pcie"]
        );
    }

    #[test]
    fn a_summary_that_is_not_the_workloads_result_is_kept_unread() {
        let odd = serde_json::json!({"from": "another version", "device_error": "lost"});
        let r = WorkloadResult::from_json("vram", odd.clone());
        assert!(matches!(r, WorkloadResult::Unread(_)));
        assert_eq!(r.to_json(), odd);
        assert!(r.judge().is_empty() && r.metrics().is_empty());
        assert_eq!(r.envelope().device_error.as_deref(), Some("lost"));
        assert!(matches!(
            WorkloadResult::from_json("matrix", odd),
            WorkloadResult::Unread(_)
        ));
    }
}
