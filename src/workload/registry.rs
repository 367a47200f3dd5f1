//! The list of workloads `kiln run` can plan, in one place: each one's name (in profiles,
//! `--workloads`, evidence and reports), its settings type, its default share of the time
//! budget, and how it is built. Profiles, the command line, the run and the verdict all
//! take a workload's name and default weight from here.

use super::Workload;
use super::compute::{ComputeConfig, ComputeTest};
use super::fragment::{FragmentConfig, FragmentTest};
use super::pcie::{PcieConfig, PcieTest};
use super::vram::{VramConfig, VramTest};

/// The workloads `kiln run` can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadName {
    /// The VRAM pattern test.
    Vram,
    /// Verified compute saturation.
    Compute,
    /// PCIe bandwidth and transfer integrity.
    Pcie,
    /// Allocator fragmentation and leak torture.
    Fragment,
    /// VRAM and compute at once, for heat.
    Heat,
}

impl WorkloadName {
    /// Every workload, in the order they are listed.
    pub const ALL: [WorkloadName; 5] = [
        WorkloadName::Vram,
        WorkloadName::Compute,
        WorkloadName::Pcie,
        WorkloadName::Fragment,
        WorkloadName::Heat,
    ];

    /// The name in profiles, evidence and reports (`vram`, `heat`).
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadName::Vram => "vram",
            WorkloadName::Compute => "compute",
            WorkloadName::Pcie => "pcie",
            WorkloadName::Fragment => "fragment",
            WorkloadName::Heat => "heat",
        }
    }

    /// Its share of the time budget when a profile or the command line gives none: the
    /// workloads that test memory (`vram`, and `heat`, which runs the VRAM test) take
    /// three parts to each other workload's one.
    pub fn default_weight(self) -> u32 {
        match self {
            WorkloadName::Vram | WorkloadName::Heat => 3,
            WorkloadName::Compute | WorkloadName::Pcie | WorkloadName::Fragment => 1,
        }
    }

    /// The workload called `name`, or the sentence saying it is unknown and which are known.
    pub fn parse(name: &str) -> Result<WorkloadName, String> {
        WorkloadName::ALL
            .into_iter()
            .find(|w| w.as_str() == name)
            .ok_or_else(|| {
                format!(
                    "unknown workload {} (known: {})",
                    crate::text::quote(name),
                    WorkloadName::ALL.map(WorkloadName::as_str).join(", ")
                )
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

/// One workload of a plan and its share of the device's time budget.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PlannedWorkload {
    /// Parts of the budget (memory usually three to one for each other workload).
    pub weight: u32,
    /// What to run.
    pub config: WorkloadConfig,
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

/// A workload and its settings.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(tag = "workload", rename_all = "snake_case")]
pub enum WorkloadConfig {
    /// The VRAM pattern test.
    Vram(VramConfig),
    /// Verified compute saturation.
    Compute(ComputeConfig),
    /// PCIe bandwidth and transfer integrity.
    Pcie(PcieConfig),
    /// Allocator fragmentation and leak torture.
    Fragment(FragmentConfig),
    /// The VRAM test and the compute load at once, on two contexts of the device: the
    /// most heat and power it can be made to take.
    Heat {
        /// The VRAM test's settings.
        vram: VramConfig,
        /// The compute load's settings.
        compute: ComputeConfig,
    },
}

impl WorkloadConfig {
    /// Which workload this is.
    pub fn name(&self) -> WorkloadName {
        match self {
            WorkloadConfig::Vram(_) => WorkloadName::Vram,
            WorkloadConfig::Compute(_) => WorkloadName::Compute,
            WorkloadConfig::Pcie(_) => WorkloadName::Pcie,
            WorkloadConfig::Fragment(_) => WorkloadName::Fragment,
            WorkloadConfig::Heat { .. } => WorkloadName::Heat,
        }
    }

    /// The VRAM test's settings, where this workload has a VRAM test (`vram`, `heat`).
    pub fn vram(&self) -> Option<&VramConfig> {
        match self {
            WorkloadConfig::Vram(v) | WorkloadConfig::Heat { vram: v, .. } => Some(v),
            _ => None,
        }
    }

    /// The workload with default settings.
    pub fn default_of(name: WorkloadName) -> WorkloadConfig {
        match name {
            WorkloadName::Vram => WorkloadConfig::Vram(VramConfig::default()),
            WorkloadName::Compute => WorkloadConfig::Compute(ComputeConfig::default()),
            WorkloadName::Pcie => WorkloadConfig::Pcie(PcieConfig::default()),
            WorkloadName::Fragment => WorkloadConfig::Fragment(FragmentConfig::default()),
            WorkloadName::Heat => WorkloadConfig::Heat {
                vram: VramConfig::default(),
                compute: ComputeConfig::default(),
            },
        }
    }

    /// The workloads to run at once (one, or two for `heat`), ready to run.
    pub fn build(&self) -> Vec<Box<dyn Workload + Send>> {
        match self {
            WorkloadConfig::Vram(c) => vec![Box::new(VramTest { config: c.clone() })],
            WorkloadConfig::Compute(c) => vec![Box::new(ComputeTest { config: c.clone() })],
            WorkloadConfig::Pcie(c) => vec![Box::new(PcieTest { config: c.clone() })],
            WorkloadConfig::Fragment(c) => vec![Box::new(FragmentTest { config: c.clone() })],
            WorkloadConfig::Heat { vram, compute } => vec![
                Box::new(VramTest {
                    config: vram.clone(),
                }),
                Box::new(ComputeTest {
                    config: compute.clone(),
                }),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_to_its_workload() {
        for w in WorkloadName::ALL {
            assert_eq!(WorkloadName::parse(w.as_str()), Ok(w));
            assert_eq!(WorkloadConfig::default_of(w).name(), w);
            assert_eq!(PlannedWorkload::default_of(w).weight, w.default_weight());
        }
        assert_eq!(
            WorkloadName::parse("pcie9").unwrap_err(),
            "unknown workload `pcie9` (known: vram, compute, pcie, fragment, heat)"
        );
    }
}
