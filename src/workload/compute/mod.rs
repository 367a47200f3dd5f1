//! Compute saturation with every result verified: long dependent multiply-add chains fill
//! every ALU; each round runs all work items twice, the second time on shuffled
//! invocations so that the same work lands on a different compute unit, and compares the
//! two bit for bit on the GPU. A CPU-computed sample checks the arithmetic itself. One
//! silently wrong lane is a mismatch with its work item, both invocations, and values.
//!
//! The workload in parts: this module its settings and its kind; `model` the report it
//! gives; `run` the device loop; `reference` the CPU's arithmetic; `sections` how people
//! read it and what it finds.

mod model;
mod reference;
mod run;
mod sections;

pub use super::cadence::LevelResult;
pub use model::{ComputeReport, KindResult, Mismatch};
pub use reference::{ChainFault, reference};
pub use run::roofline;

use model::totals;
use reference::{agrees, shuffle, shuffled_invocation};
use sections::{found, wrong_results};

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use super::cadence::{InjectWhen, LoadShape};
use super::cadence::{LoadPhase, LoadPoint, PausesReport};
use super::hash;
use super::rounds::{Cadence, Ran, Rounds, Worked};
use super::settings::{SettingError, SettingsTable};
use super::show::{Bar, Section, Table, TableRow};
use super::{
    Envelope, Kind, KindTest, PlanDetail, Report, RunControl, Workload, WorkloadError,
    WorkloadStatus, record_device_error,
};
use crate::evidence::{DeviceEvents, Event, EventSink};
use crate::finding::{Confidence, Finding, FindingCode, Severity, finding};
use crate::gpu::{
    Binding, BufferKind, DeviceContext, DeviceInfo, GpuBuffer, GpuError, GpuResult, ShaderCode,
    embedded_shader,
};
use crate::limits::bounds;
use crate::power::{PowerController, PowerTargetReport};

/// Independent multiply-add chains, one result per work item.
const FMA: ShaderCode = embedded_shader!("compute_fma");
/// The same in fp16 (a separate module: it needs the Float16 capability).
const FMA16: ShaderCode = embedded_shader!("compute_fma16");
/// Compares two runs of the same work items.
const COMPARE: ShaderCode = embedded_shader!("compute_compare");

const WORKGROUP: u32 = 64;
/// Multiply-adds per chain between two sums of the verified kernel (its BLOCK).
const UNROLL: u64 = 8;
/// Independent vec4 chains per work item unless the settings say otherwise: 32 multiply-
/// adds in flight per invocation, enough to cover the FMA pipe's latency on a CPU core
/// (measured: 1.7-2x the rate of one chain on lavapipe) and on a GPU's SM at the
/// occupancy these registers allow.
const DEFAULT_CHAINS: u32 = 8;
/// The fewest work items a pass shrinks to on a device too slow for its default grid.
const MIN_GRID: u32 = 1 << 12;
/// Lanes of each chain (a vec4).
const LANES: u64 = 4;
/// Words per work item in the results: the fold, then the chains' values.
const ITEM_BYTES: u64 = 32;
const RECORD_WORDS: usize = 9;
const RECORDS_AT: usize = 8;

/// The arithmetic a pass exercises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComputeKind {
    /// 32-bit float fused multiply-add.
    Fp32,
    /// 32-bit integer multiply-add (wrapping).
    Int32,
    /// 16-bit float fused multiply-add, where the device has it (checked by the
    /// redundant run; the CPU has no half-precision arithmetic to check it against).
    Fp16,
}

impl ComputeKind {
    /// The kind as people write it (`FP32`).
    pub fn label(self) -> &'static str {
        match self {
            ComputeKind::Fp32 => "FP32",
            ComputeKind::Int32 => "INT32",
            ComputeKind::Fp16 => "FP16",
        }
    }

    /// The unit its rate is said in, in billions a second: floating-point operations for
    /// the FP kinds (`GFLOP/s`), integer operations for INT32 (`GOP/s`), as the rate
    /// findings say them.
    pub fn rate_unit(self) -> &'static str {
        match self {
            ComputeKind::Fp32 | ComputeKind::Fp16 => "GFLOP/s",
            ComputeKind::Int32 => "GOP/s",
        }
    }

    /// The name of this kind's rate in comparisons (`compute_fp32_gops`).
    pub fn rate_name(self) -> &'static str {
        match self {
            ComputeKind::Fp32 => "compute_fp32_gops",
            ComputeKind::Int32 => "compute_int32_gops",
            ComputeKind::Fp16 => "compute_fp16_gops",
        }
    }

    fn spec(self) -> u32 {
        match self {
            ComputeKind::Fp32 | ComputeKind::Fp16 => 0,
            ComputeKind::Int32 => 1,
        }
    }

    fn shader(self) -> ShaderCode {
        match self {
            ComputeKind::Fp16 => FMA16,
            _ => FMA,
        }
    }
}

/// Loaded time between two pauses unless a profile says otherwise.
pub const PAUSES_HOLD: Duration = Duration::from_secs(60);
/// The least pause unless a profile says otherwise: long enough for a card to fall to
/// idle clocks.
pub const PAUSES_PAUSE: Duration = Duration::from_secs(15);

/// Settings of the compute test.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ComputeConfig {
    /// Arithmetic kinds, alternated round by round; fp16 is skipped (and said) where the
    /// device lacks it.
    pub kinds: Vec<ComputeKind>,
    /// Load shape.
    pub shape: LoadShape,
    /// Work items per round, a power of two (default by device kind).
    pub items: Option<u32>,
    /// Target GPU time of one dispatch.
    pub dispatch_target: Duration,
    /// Rounds to run when there is no time budget.
    pub rounds: Option<u32>,
    /// Work items checked against a CPU computation each round.
    pub cpu_samples: u32,
    /// Mismatch records kept (the count is never capped).
    pub record_capacity: u32,
    /// Seed of the work items' inputs.
    pub seed: u32,
    /// Corrupt this work item's result in the shuffled run by XOR with this mask
    /// (self-test and detector tests).
    pub inject: Option<(u32, u32)>,
    /// With `inject`: corrupt the item's first chain after this many multiply-add blocks
    /// instead of its result, as a fault in the middle of a chain would (detector tests).
    #[serde(default)]
    pub inject_step: Option<u32>,
    /// With `inject`: corrupt only the rounds at this point of the load (detector tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inject_when: Option<InjectWhen>,
    /// Independent vec4 chains per work item; None: per kind, whichever of 4, 8 and 16
    /// runs fastest on the device.
    #[serde(default)]
    pub chains: Option<u32>,
    /// Hold board power at this percentage of the enforced limit by setting the duty
    /// cycle (a steady load only); None: the shape's load.
    #[serde(default)]
    pub power_target: Option<u32>,
}

impl Default for ComputeConfig {
    fn default() -> Self {
        ComputeConfig {
            kinds: vec![ComputeKind::Fp32, ComputeKind::Int32, ComputeKind::Fp16],
            shape: LoadShape::Steady,
            items: None,
            dispatch_target: Duration::from_millis(20),
            rounds: None,
            cpu_samples: 32,
            record_capacity: 256,
            seed: 0x6B69_6C6E,
            inject: None,
            inject_step: None,
            inject_when: None,
            chains: None,
            power_target: None,
        }
    }
}

/// The `compute` workload.
pub struct Compute;

impl Kind for Compute {
    const NAME: &'static str = "compute";
    const DEFAULT_WEIGHT: u32 = 1;
    type Settings = ComputeConfig;
    type Result = ComputeReport;

    fn from_profile(table: &mut dyn SettingsTable) -> Result<ComputeConfig, SettingError> {
        let rounds = table.count("rounds", &bounds::ROUNDS)?;
        let shape = table.text("shape")?;
        let on_ms = table.count("on_ms", &bounds::PULSE_MS)?;
        let off_ms = table.count("off_ms", &bounds::PULSE_MS)?;
        if shape.as_deref() != Some("pulsed")
            && let Some(key) = [("on_ms", on_ms), ("off_ms", off_ms)]
                .into_iter()
                .find_map(|(k, v)| v.map(|_| k))
        {
            return Err(SettingError::new(key, "applies only to shape = \"pulsed\""));
        }
        let hold = table.duration("hold", &bounds::PAUSE)?;
        let pause = table.duration("pause", &bounds::PAUSE)?;
        if shape.as_deref() != Some("pauses")
            && let Some(key) = [("hold", hold), ("pause", pause)]
                .into_iter()
                .find_map(|(k, v)| v.map(|_| k))
        {
            return Err(SettingError::new(key, "applies only to shape = \"pauses\""));
        }
        let shape = match shape.as_deref() {
            None | Some("steady") => LoadShape::Steady,
            Some("pulsed") => LoadShape::Pulsed {
                on_ms: on_ms.map_or(100, u64::from),
                off_ms: off_ms.map_or(100, u64::from),
            },
            Some("sweep") => LoadShape::Sweep,
            Some("pauses") => LoadShape::Pauses {
                hold_ms: hold.unwrap_or(PAUSES_HOLD).as_millis() as u64,
                pause_ms: pause.unwrap_or(PAUSES_PAUSE).as_millis() as u64,
            },
            Some(other) => {
                return Err(SettingError::new(
                    "shape",
                    format!(
                        "unknown load shape {} (known: steady, pulsed, sweep, pauses)",
                        crate::text::quote(other)
                    ),
                ));
            }
        };
        let power_target = super::settings::power_target_setting(table)?;
        if power_target.is_some() && shape != LoadShape::Steady {
            return Err(SettingError::new(
                "power_target",
                "holds power by setting the load itself: it applies only to shape = \"steady\"",
            ));
        }
        Ok(ComputeConfig {
            shape,
            rounds,
            power_target,
            ..ComputeConfig::default()
        })
    }

    fn build(settings: &ComputeConfig) -> Vec<Box<dyn Workload + Send>> {
        vec![Box::new(ComputeTest {
            config: settings.clone(),
        })]
    }

    fn describe(settings: &ComputeConfig, _device: &DeviceInfo) -> Result<PlanDetail, String> {
        Ok(PlanDetail {
            detail: format!(
                "{} load, fp32/int32/fp16 verified{}{}",
                settings.shape.name(),
                settings
                    .rounds
                    .map(|r| format!(", {r} rounds"))
                    .unwrap_or_default(),
                settings
                    .power_target
                    .map(|p| format!(", power held at {p}% of the limit"))
                    .unwrap_or_default()
            ),
            ..PlanDetail::default()
        })
    }

    fn judge(result: &ComputeReport) -> Vec<Finding> {
        let mut out = Vec::new();
        found(result, &mut out);
        out
    }

    fn rates(result: &ComputeReport) -> Vec<(&'static str, f64)> {
        result
            .kinds
            .iter()
            .filter(|k| k.rounds > 0)
            .map(|k| (k.kind.rate_name(), k.gops))
            .collect()
    }

    fn sections(c: &ComputeReport) -> Vec<Section> {
        let mut lines = vec![c.headline()];
        for k in &c.kinds {
            lines.push(format!(
                "{} {}, {}, {}, {} CPU-checked ({} wrong), {} non-finite",
                k.kind.label(),
                crate::text::count(k.rounds, "round"),
                crate::units::scaled(k.gops, k.kind.rate_unit()),
                crate::text::count(k.mismatches, "mismatch"),
                k.cpu_checked,
                k.cpu_mismatches,
                k.nonfinite
            ));
        }
        lines.extend(c.power.iter().map(PowerTargetReport::line));
        lines.extend(c.levels.iter().map(LevelResult::line));
        lines.extend(c.pauses.iter().map(|p| p.line()));
        for m in c.records.iter().take(10) {
            // The shuffled run's invocation; a CPU check has none.
            let second = match (m.second_invocation, m.second_workgroup) {
                (Some(i), Some(g)) => format!("then invocation {i} of workgroup {g}"),
                (Some(i), None) => format!("then invocation {i}"),
                _ => "checked on the CPU".into(),
            };
            lines.push(format!(
                "{} item {} (invocation {} {second}) expected {:08x?} got {:08x?} [{} round {}{}]",
                m.kind.label(),
                m.item,
                m.first_invocation,
                m.expected,
                m.actual,
                m.check,
                m.round,
                m.at.filter(|_| c.shape != LoadShape::Steady)
                    .map(|p| format!(", {}", p.words()))
                    .unwrap_or_default()
            ));
        }
        let mut out = vec![Section::Lines(lines)];
        if c.faults() > 0 {
            out.push(Section::Table(wrong_results(c)));
        }
        out.push(Section::Bars {
            title: "Compute rate (mark: best round)".into(),
            unit: "GFLOP/s".into(),
            bars: c
                .kinds
                .iter()
                .map(|k| {
                    Bar::marked(k.kind.label(), k.gops, Some(k.best_gops))
                        .in_unit(k.kind.rate_unit())
                })
                .collect(),
        });
        out
    }
}

/// The compute test as a workload.
pub struct ComputeTest {
    /// Its settings.
    pub config: ComputeConfig,
}
