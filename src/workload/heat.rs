//! `heat`: the VRAM test and the compute load at once, on two contexts of the device: the
//! most heat and power it can be made to take. Each part reports its own outcome, marked
//! as run inside `heat`, so that its rates are not read as the device's alone.

use serde::{Deserialize, Serialize};

use super::compute::{Compute, ComputeConfig, ComputeTest};
use super::settings::{SettingError, SettingsTable};
use super::vram::{Vram, VramConfig, VramTest};
use super::{Composite, Kind, PlanDetail, Workload};
use crate::finding::Finding;
use crate::gpu::DeviceInfo;

/// The settings of both parts.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HeatConfig {
    /// The VRAM test's settings.
    pub vram: VramConfig,
    /// The compute load's settings.
    pub compute: ComputeConfig,
}

/// The `heat` workload.
pub struct Heat;

impl Kind for Heat {
    const NAME: &'static str = "heat";
    // It runs the VRAM test, which takes the memory workloads' share.
    const DEFAULT_WEIGHT: u32 = 3;
    type Settings = HeatConfig;
    type Result = Composite;

    fn from_profile(table: &mut dyn SettingsTable) -> Result<HeatConfig, SettingError> {
        Ok(HeatConfig {
            vram: Vram::from_profile(table)?,
            compute: Compute::from_profile(table)?,
        })
    }

    fn build(settings: &HeatConfig) -> Vec<Box<dyn Workload + Send>> {
        vec![
            Box::new(VramTest {
                config: settings.vram.clone(),
            }),
            Box::new(ComputeTest {
                config: settings.compute.clone(),
            }),
        ]
    }

    fn describe(settings: &HeatConfig, device: &DeviceInfo) -> Result<PlanDetail, String> {
        let vram = super::vram::sized_for_plan(&settings.vram, device)?;
        Ok(PlanDetail {
            detail: format!(
                "{} of VRAM patterns and {} compute at once, for heat",
                vram.detail,
                settings.compute.shape.name()
            ),
            ..vram
        })
    }

    fn judge(result: &Composite) -> Vec<Finding> {
        match *result {}
    }
}
