//! `heat`: the VRAM test and a load on the ALUs at once (the compute chains, or the
//! matrix multiplication with `load = "matrix"`), on two contexts of the device: the most
//! heat and power it can be made to take. Each part reports its own outcome, marked as run
//! inside `heat`, so that its rates are not read as the device's alone.

use serde::{Deserialize, Serialize};

use super::compute::{Compute, ComputeConfig, ComputeTest};
use super::matrix::{Matrix, MatrixConfig, MatrixTest};
use super::settings::{SettingError, SettingsTable, Without};
use super::vram::{Vram, VramConfig, VramTest};
use super::{Composite, Kind, PlanDetail, Workload};
use crate::finding::Finding;
use crate::gpu::DeviceInfo;

/// The load beside the VRAM test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeatLoad {
    /// The verified multiply-add chains.
    #[default]
    Compute,
    /// The verified matrix multiplication.
    Matrix,
}

/// The settings of both parts.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HeatConfig {
    /// The VRAM test's settings.
    pub vram: VramConfig,
    /// Which load runs beside it.
    #[serde(default)]
    pub load: HeatLoad,
    /// The compute load's settings.
    pub compute: ComputeConfig,
    /// The matrix load's settings.
    #[serde(default)]
    pub matrix: MatrixConfig,
}

impl HeatConfig {
    /// The power target of the load that runs, if any.
    pub fn power_target(&self) -> Option<u32> {
        match self.load {
            HeatLoad::Compute => self.compute.power_target,
            HeatLoad::Matrix => self.matrix.power_target,
        }
    }
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
        let load = match table.text("load")?.as_deref() {
            None | Some("compute") => HeatLoad::Compute,
            Some("matrix") => HeatLoad::Matrix,
            Some(other) => {
                return Err(SettingError::new(
                    "load",
                    format!(
                        "unknown load {} (known: compute, matrix)",
                        crate::text::quote(other)
                    ),
                ));
            }
        };
        // Both loads' keys are read (so that each is known to the table); a key of the
        // load that does not run would be ignored, and is refused. `shape` is both
        // loads': the one that does not run reads it as absent (and the compute load's
        // shape keys are refused below when the matrix load runs).
        let vram = Vram::from_profile(table)?;
        let compute = match load {
            HeatLoad::Compute => Compute::from_profile(table)?,
            HeatLoad::Matrix => Compute::from_profile(&mut Without {
                table,
                hidden: &["shape", "on_ms", "off_ms", "hold", "pause"],
            })?,
        };
        let matrix = match load {
            HeatLoad::Matrix => Matrix::from_profile(table)?,
            HeatLoad::Compute => Matrix::from_profile(&mut Without {
                table,
                hidden: &["shape"],
            })?,
        };
        let (own, other) = match load {
            HeatLoad::Compute => ("compute", ["kinds", "size"].as_slice()),
            HeatLoad::Matrix => ("matrix", ["on_ms", "off_ms", "hold", "pause"].as_slice()),
        };
        for &key in other {
            let given = match key {
                "kinds" => table.strings(key)?.is_some(),
                "on_ms" | "off_ms" => table.integer(key)?.is_some(),
                _ => table.text(key)?.is_some(),
            };
            if given {
                return Err(SettingError::new(
                    key,
                    format!(
                        "is not a setting of the {own} load that runs beside the VRAM test (load = \"{own}\")"
                    ),
                ));
            }
        }
        Ok(HeatConfig {
            vram,
            load,
            compute,
            matrix,
        })
    }

    fn build(settings: &HeatConfig) -> Vec<Box<dyn Workload + Send>> {
        let load: Box<dyn Workload + Send> = match settings.load {
            HeatLoad::Compute => Box::new(ComputeTest {
                config: settings.compute.clone(),
            }),
            HeatLoad::Matrix => Box::new(MatrixTest {
                config: settings.matrix.clone(),
            }),
        };
        vec![
            Box::new(VramTest {
                config: settings.vram.clone(),
            }),
            load,
        ]
    }

    fn describe(settings: &HeatConfig, device: &DeviceInfo) -> Result<PlanDetail, String> {
        let vram = super::vram::sized_for_plan(&settings.vram, device)?;
        let load = match settings.load {
            HeatLoad::Compute => format!("{} compute", settings.compute.shape.name()),
            HeatLoad::Matrix => "verified matrix multiplication".to_owned(),
        };
        let power = settings
            .power_target()
            .map(|p| format!(", power held at {p}% of the limit"))
            .unwrap_or_default();
        Ok(PlanDetail {
            detail: format!(
                "{} of VRAM patterns and {load} at once, for heat{power}",
                vram.detail
            ),
            ..vram
        })
    }

    fn judge(result: &Composite) -> Vec<Finding> {
        match *result {}
    }
}
