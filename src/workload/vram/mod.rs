//! The VRAM pattern test: write and verify patterns over nearly all free device memory,
//! count every wrong word on the GPU, keep the first records, retest failing words in
//! place and classify them.
//!
//! The workload in parts: this module its settings and its kind; `model` the report it
//! gives; `run` the device loop (sizing, passes, recording and retesting); `sections` how
//! people read it and what it finds; the engine, patterns, algorithms and classification
//! in their own modules.
pub mod algorithm;
pub mod classify;
pub mod engine;
pub mod layout;
mod model;
pub mod pattern;
mod retest;
mod run;
mod sections;
mod shaders;

pub use model::{AlgorithmRun, Coverage, Histograms, Rate, Sizing, Throughput, VramReport};
pub use run::{INTEGRATED_SHARE, plan_size};

use sections::{error_map, found, text_lines, wrong_words};

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use self::algorithm::{Algorithm, Step};
use self::classify::{ErrorShape, RetestClass};
use self::engine::{AccessLayout, Engine, EngineConfig, Op, PlantedFault, Sweep};
use self::layout::{BatchCounters, FLAG_TRANSIENT};
use self::pattern::Pattern;
use super::settings::{SettingError, SettingsTable};
use super::show::{Bar, Metric, MetricFamily, OffsetPoint, Section, Table, TableRow};
use super::{
    Envelope, Kind, KindTest, PlanDetail, Report, RunControl, Workload, WorkloadError,
    WorkloadStatus, record_device_error,
};
use crate::evidence::{DeviceEvents, Event, EventSink};
use crate::finding::{Confidence, Finding, FindingCode, Severity, finding};
use crate::gpu::{DeviceContext, DeviceInfo, GpuError};
use crate::limits::bounds;
use crate::units::{MIB, format_bytes, to_gib};

// A wrong word's record and its retest are the evidence's schema, defined with it.
pub use crate::evidence::vram::{ErrorRecord, RetestResult};

/// Settings of the VRAM test.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VramConfig {
    /// Algorithms, run in this order every pass.
    pub algorithms: Vec<Algorithm>,
    /// Test exactly this many bytes (rounded down to whole MiB).
    pub bytes: Option<u64>,
    /// Test this percentage of the free device-local memory.
    pub percent: Option<f64>,
    /// Leave this much free memory untested (default: max(256 MiB, 2% of the heap)).
    pub reserve_bytes: Option<u64>,
    /// Run exactly this many passes (else as many as the time budget allows, at least
    /// one algorithm).
    pub passes: Option<u32>,
    /// Error records kept; the error count itself is never capped.
    pub record_capacity: u32,
    /// Failing words retested in place, at most.
    pub retest_cap: u32,
    /// Reads per retest pattern.
    pub retest_reads: u32,
    /// Idle time of the retention algorithm.
    pub retention_delay: Duration,
    /// Seed of every pattern; the same seed repeats a run's patterns exactly.
    pub seed: u64,
    /// Access layout (default: per device kind).
    pub layout: Option<AccessLayout>,
    /// Upper bound on each test buffer, below the device's own limits.
    pub max_buffer_bytes: Option<u64>,
    /// Faults planted through the GPU (self-test and detector tests).
    pub planted: Vec<PlantedFault>,
    /// Test hook, never set in real runs: after every write, fill all tested memory with
    /// this word, so that (nearly) every word reads wrong, as on a dead memory chip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planted_all: Option<u32>,
    /// Device memory kiln holds for a workload running alongside (the resident region),
    /// not free for this test: set by the run, never by a profile.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub beside_bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Default for VramConfig {
    fn default() -> Self {
        VramConfig {
            algorithms: algorithm::DEFAULT.to_vec(),
            bytes: None,
            percent: None,
            reserve_bytes: None,
            passes: None,
            record_capacity: 4096,
            retest_cap: 64,
            retest_reads: 3,
            retention_delay: Duration::from_secs(30),
            seed: 0x6B69_6C6E,
            layout: None,
            max_buffer_bytes: None,
            planted: Vec::new(),
            planted_all: None,
            beside_bytes: 0,
        }
    }
}

/// A failing word to retest: where, what it should hold, what was read, and what to
/// leave in it afterwards.
#[derive(Debug, Clone, Copy)]
pub struct WordRef {
    /// Absolute word index.
    pub word: u64,
    /// Expected value.
    pub expected: u32,
    /// Value read.
    pub actual: u32,
    /// Value the algorithm's next step expects.
    pub restore: u32,
    /// True when the step that found it already overwrote it (verify-then-invert).
    pub overwritten: bool,
}

/// The VRAM test as a workload.
pub struct VramTest {
    /// Its settings.
    pub config: VramConfig,
}

/// The `vram` workload.
pub struct Vram;

impl Kind for Vram {
    const NAME: &'static str = "vram";
    // Memory is what most often fails: three parts of the budget to each other one.
    const DEFAULT_WEIGHT: u32 = 3;
    const METRICS: &'static [MetricFamily] = &[
        MetricFamily {
            name: "kiln_vram_tested_bytes",
            help: "Bytes of VRAM the last run tested.",
        },
        MetricFamily {
            name: "kiln_vram_errors",
            help: "Wrong reads the last run's VRAM test found.",
        },
    ];
    type Settings = VramConfig;
    type Result = VramReport;

    fn from_profile(table: &mut dyn SettingsTable) -> Result<VramConfig, SettingError> {
        let mut c = VramConfig::default();
        if let Some(list) = table.strings("algorithms")? {
            if list.is_empty() {
                return Err(SettingError::new(
                    "algorithms",
                    "must name at least one algorithm",
                ));
            }
            c.algorithms = Algorithm::parse_list(&list.join(","))
                .map_err(|e| SettingError::new("algorithms", e))?;
        }
        c.passes = table.count("passes", &bounds::PASSES)?;
        if let Some(v) = table.number("percent")? {
            let v = bounds::VRAM_PERCENT
                .check(v)
                .map_err(|e| SettingError::new("percent", e))?;
            c.percent = Some(v);
        }
        if let Some(d) = table.duration("retention_delay", &bounds::RETENTION_DELAY)? {
            c.retention_delay = d;
        }
        Ok(c)
    }

    fn build(settings: &VramConfig) -> Vec<Box<dyn Workload + Send>> {
        vec![Box::new(VramTest {
            config: settings.clone(),
        })]
    }

    fn describe(settings: &VramConfig, device: &DeviceInfo) -> Result<PlanDetail, String> {
        let sized = sized_for_plan(settings, device)?;
        Ok(PlanDetail {
            detail: format!(
                "{} with {}, {}",
                sized.detail,
                settings
                    .algorithms
                    .iter()
                    .map(|a| a.name())
                    .collect::<Vec<_>>()
                    .join(", "),
                match settings.passes {
                    Some(1) => "1 pass".into(),
                    Some(n) => format!("{n} passes"),
                    None => "passes until the budget ends".into(),
                }
            ),
            ..sized
        })
    }

    fn judge(result: &VramReport) -> Vec<Finding> {
        let mut out = Vec::new();
        found(result, &mut out);
        out
    }

    fn metrics(result: &VramReport) -> Vec<Metric> {
        vec![
            Metric {
                family: "kiln_vram_tested_bytes",
                value: result.coverage.tested_bytes as f64,
            },
            Metric {
                family: "kiln_vram_errors",
                value: result.errors_total as f64,
            },
        ]
    }

    fn rates(result: &VramReport) -> Vec<(&'static str, f64)> {
        let t = &result.throughput;
        vec![("vram_gib_per_s", t.write.gib_per_s.max(t.verify.gib_per_s))]
    }

    fn sections(result: &VramReport) -> Vec<Section> {
        let mut out = vec![Section::Lines(text_lines(result)), error_map(result)];
        if result.errors_total > 0 {
            out.push(Section::Table(wrong_words(result)));
        }
        let bits: Vec<Bar> = result
            .histograms
            .bit_position
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(b, n)| Bar::new(format!("bit {b}"), *n as f64))
            .collect();
        if !bits.is_empty() {
            out.push(Section::Bars {
                title: "Failing bit positions".into(),
                unit: "wrong read".into(),
                bars: bits,
            });
        }
        let t = &result.throughput;
        out.push(Section::Bars {
            title: "VRAM test throughput".into(),
            unit: "GiB/s".into(),
            bars: vec![
                Bar::new("write", t.write.gib_per_s),
                Bar::new("verify", t.verify.gib_per_s),
                Bar::new("combined per wall second", t.combined_gib_per_wall_s),
            ],
        });
        out
    }
}

/// How much of `device`'s memory the settings test, for a plan: the size in words (or
/// why there is none) and the bytes. An error is settings that cannot work on it.
pub(super) fn sized_for_plan(
    settings: &VramConfig,
    device: &DeviceInfo,
) -> Result<PlanDetail, String> {
    match plan_size(device, settings) {
        Ok(sizing) => Ok(PlanDetail {
            detail: format!("{:.2} GiB", to_gib(sizing.sized_bytes)),
            vram_bytes: Some(sizing.sized_bytes),
            heap_bytes: Some(sizing.heap_bytes),
        }),
        Err(WorkloadError::Config(why)) => Err(why),
        // The device's state (no memory free): the run would record it.
        Err(e @ WorkloadError::Gpu(_)) => Ok(PlanDetail {
            detail: format!("no memory ({e})"),
            ..PlanDetail::default()
        }),
    }
}
