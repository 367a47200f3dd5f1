//! The VRAM pattern test: write and verify patterns over nearly all free device memory,
//! count every wrong word on the GPU, keep the first records, retest failing words in
//! place and classify them.

pub mod algorithm;
pub mod classify;
pub mod engine;
pub mod layout;
pub mod pattern;
mod retest;
mod shaders;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;

use self::algorithm::{Algorithm, Step};
use self::classify::{ErrorShape, RetestClass};
use self::engine::{AccessLayout, Engine, EngineConfig, Op, PlantedFault, Sweep};
use self::layout::{BatchCounters, FLAG_TRANSIENT};
use self::pattern::Pattern;
use super::settings::{SettingError, SettingsTable};
use super::show::{Bar, Metric, MetricFamily, OffsetPoint, Section, Table, TableRow};
use super::{
    Envelope, Kind, PlanDetail, Report, RunControl, Workload, WorkloadError, WorkloadOutcome,
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
        }
    }
}

/// How much memory was sized and why.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sizing {
    /// Size of the largest device-local heap.
    pub heap_bytes: u64,
    /// Free device-local memory when the test started.
    pub free_at_start_bytes: u64,
    /// Where `free_at_start_bytes` comes from.
    pub free_source: String,
    /// Memory deliberately left untested.
    pub reserve_bytes: u64,
    /// What the test set out to test.
    pub sized_bytes: u64,
    /// What it could allocate.
    pub allocated_bytes: u64,
    /// Test buffers allocated.
    pub buffer_count: usize,
    /// Largest test buffer.
    pub max_buffer_bytes: u64,
    /// Why allocation stopped short of `sized_bytes`, if it did.
    pub allocation_stopped_by: Option<String>,
}

/// Bytes tested, and as shares of what was sized, the heap, and the free memory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Coverage {
    /// Bytes verified at least once.
    pub tested_bytes: u64,
    /// tested / sized.
    pub of_sized: f64,
    /// tested / heap.
    pub of_heap: f64,
    /// tested / free at start.
    pub of_free: f64,
}

/// Error statistics over every wrong word (not only the recorded ones).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Histograms {
    /// Index n: words with n bits flipped.
    pub flipped_bits: Vec<u64>,
    /// Index b: failures of bit b.
    pub bit_position: Vec<u64>,
    /// Bits read 1 that were written 0.
    pub zero_to_one: u64,
    /// Bits read 0 that were written 1.
    pub one_to_zero: u64,
}

impl Default for Histograms {
    fn default() -> Self {
        Histograms {
            flipped_bits: vec![0; 33],
            bit_position: vec![0; 32],
            zero_to_one: 0,
            one_to_zero: 0,
        }
    }
}

/// Rate of one operation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rate {
    /// Bytes.
    pub bytes: u64,
    /// GPU seconds.
    pub gpu_s: f64,
    /// GiB per GPU second.
    pub gib_per_s: f64,
}

impl Rate {
    fn of(bytes: u64, ns: u64) -> Rate {
        let gpu_s = ns as f64 / 1e9;
        Rate {
            bytes,
            gpu_s,
            gib_per_s: if gpu_s > 0.0 {
                to_gib(bytes) / gpu_s
            } else {
                0.0
            },
        }
    }
}

/// Throughput of the test.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Throughput {
    /// Pattern writes (shader and fill).
    pub write: Rate,
    /// Verification reads.
    pub verify: Rate,
    /// Verify-then-invert sweeps (each byte read and written).
    pub rewrite: Rate,
    /// Bytes written plus bytes verified, per wall second of the sweeps.
    pub combined_gib_per_wall_s: f64,
    /// Wall seconds spent sweeping.
    pub sweep_wall_s: f64,
    /// `gpu_timestamps` or `wall_clock`.
    pub timing_source: String,
    /// True when the write rate includes the first sweep that touched the memory (which
    /// pays for first touch): the run wrote the memory only once. Otherwise that sweep is
    /// left out of every rate.
    #[serde(default)]
    pub includes_first_touch: bool,
}

/// Per-algorithm outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AlgorithmRun {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Complete passes.
    pub passes_completed: u32,
    /// Wrong words found.
    pub errors: u64,
}

/// Everything the VRAM test found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VramReport {
    /// Sizing.
    pub sizing: Sizing,
    /// Coverage.
    pub coverage: Coverage,
    /// Access layout used.
    pub layout: AccessLayout,
    /// Per algorithm.
    pub algorithms: Vec<AlgorithmRun>,
    /// Wrong words found, never capped.
    pub errors_total: u64,
    /// The first wrong words, up to the record capacity.
    pub records: Vec<ErrorRecord>,
    /// Wrong words counted but not recorded.
    pub records_dropped: u64,
    /// Statistics over every wrong word.
    pub histograms: Histograms,
    /// In-place retests.
    pub retests: Vec<RetestResult>,
    /// Throughput.
    pub throughput: Throughput,
    /// How its run ended and how long it took.
    #[serde(flatten)]
    pub run: Envelope,
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

/// The share of an integrated GPU's heap (system memory) the VRAM test may take.
pub const INTEGRATED_SHARE: f64 = 0.5;

/// Decides how many bytes to test on `info`.
pub fn plan_size(info: &DeviceInfo, cfg: &VramConfig) -> Result<Sizing, WorkloadError> {
    let heap = info
        .vram_heap()
        .ok_or_else(|| WorkloadError::Config("the device reports no device-local memory".into()))?;
    let (mut free, mut free_source) = match (heap.budget_bytes, heap.usage_bytes) {
        (Some(budget), Some(usage)) => (budget.saturating_sub(usage), "VK_EXT_memory_budget"),
        _ => (
            heap.size_bytes,
            "heap size (the driver reports no memory budget)",
        ),
    };
    // An integrated GPU's "device-local" heap is the system's own memory: the test takes
    // at most a stated share of it, and says so, rather than starve the host.
    if info.kind == crate::gpu::DeviceKind::IntegratedGpu {
        let share = (heap.size_bytes as f64 * INTEGRATED_SHARE) as u64;
        if free > share {
            free = share;
            free_source = "integrated GPU: system memory, at most half of it is tested";
        }
    }
    let reserve = cfg
        .reserve_bytes
        .unwrap_or_else(|| (256 * MIB).max(heap.size_bytes / 50));
    // What the user asked for must fit what the device has: refused (a usage error),
    // never clamped or tried, since the allocation would fail or test less than was asked.
    let free_text = format!(
        "{} of device memory free on {} ({})",
        format_bytes(free),
        info.name,
        free_source
    );
    if let Some(bytes) = cfg.bytes
        && bytes > free
    {
        return Err(WorkloadError::Config(format!(
            "--vram-bytes {} is more than the {free_text}",
            format_bytes(bytes)
        )));
    }
    if let Some(r) = cfg.reserve_bytes
        && cfg.bytes.is_none()
        && cfg.percent.is_none()
        && r.saturating_add(MIB) > free
    {
        return Err(WorkloadError::Config(format!(
            "--reserve {} leaves nothing of the {free_text} to test",
            format_bytes(r)
        )));
    }
    let sized = match (cfg.bytes, cfg.percent) {
        (Some(bytes), _) => bytes,
        (None, Some(p)) => (free as f64 * p / 100.0) as u64,
        (None, None) => free.saturating_sub(reserve),
    } / MIB
        * MIB;
    if sized < MIB {
        // The device's state (other tenants, a small card), not the user's numbers.
        return Err(WorkloadError::Gpu(GpuError::OutOfMemory {
            running: format!(
                "sizing the VRAM test: only {} MiB of device memory is free after the {} MiB reserve, nothing to test",
                free / MIB,
                reserve / MIB
            ),
        }));
    }
    let limits = &info.limits;
    let mut max_buffer = limits
        .max_storage_buffer_range_bytes
        .min(limits.max_memory_allocation_size_bytes)
        .min(limits.max_buffer_size_bytes.unwrap_or(u64::MAX));
    if let Some(cap) = cfg.max_buffer_bytes {
        max_buffer = max_buffer.min(cap);
    }
    Ok(Sizing {
        heap_bytes: heap.size_bytes,
        free_at_start_bytes: free,
        free_source: free_source.into(),
        reserve_bytes: if cfg.bytes.is_some() || cfg.percent.is_some() {
            0
        } else {
            reserve
        },
        sized_bytes: sized,
        allocated_bytes: 0,
        buffer_count: 0,
        max_buffer_bytes: max_buffer / MIB * MIB,
        allocation_stopped_by: None,
    })
}

impl Report for VramReport {
    super::envelope_in!(run);

    fn found(&self) -> Option<WorkloadStatus> {
        (self.errors_total > 0).then_some(WorkloadStatus::Failed)
    }

    fn began(&self) -> bool {
        self.coverage.tested_bytes > 0
    }

    /// One sentence for people.
    fn headline(&self) -> String {
        let tested = to_gib(self.coverage.tested_bytes);
        match self.status() {
            WorkloadStatus::Failed | WorkloadStatus::SoftwareFault => format!(
                "{} in {tested:.2} GiB tested ({} recorded)",
                crate::text::count(self.errors_total, "wrong read"),
                self.records.len()
            ),
            WorkloadStatus::Passed => format!(
                "no errors in {tested:.2} GiB ({:.0}% of free memory), {}",
                self.coverage.of_free * 100.0,
                crate::text::count(
                    self.algorithms
                        .iter()
                        .map(|a| a.passes_completed)
                        .sum::<u32>(),
                    "algorithm pass"
                )
            ),
            WorkloadStatus::Incomplete => format!(
                "no errors in what ran ({tested:.2} GiB), but the test stopped early: {}",
                self.run.why_cut_short().unwrap_or("unknown")
            ),
            WorkloadStatus::NotRun => format!(
                "nothing was tested: {}",
                self.run
                    .why_cut_short()
                    .unwrap_or("no memory could be allocated")
            ),
        }
    }
}

/// The VRAM test as a workload.
pub struct VramTest {
    /// Its settings.
    pub config: VramConfig,
}

impl Workload for VramTest {
    fn name(&self) -> &'static str {
        "vram"
    }

    fn run(
        &mut self,
        ctx: &mut DeviceContext,
        control: &RunControl,
        events: &mut dyn EventSink,
    ) -> Result<WorkloadOutcome, WorkloadError> {
        Ok(self.run_report(ctx, control, events)?.outcome(self.name()))
    }
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
            if !(v > 0.0 && v <= 100.0) {
                return Err(SettingError::new(
                    "percent",
                    format!("{v} is not between 0 and 100"),
                ));
            }
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

/// Where: `at 0x000000000fa0`, or the first of several and how many more.
fn places(offsets: &[u64]) -> String {
    match offsets {
        [] => "at places not recorded".into(),
        [one] => format!("at 0x{one:012x}"),
        [first, rest @ ..] => format!("first at 0x{first:012x} and {} more", rest.len()),
    }
}

/// What the VRAM test's errors and their retests prove: stuck bits, a faulty address
/// path, marginal cells, transfer errors, or flips that did not come back.
fn found(v: &VramReport, out: &mut Vec<Finding>) {
    if v.errors_total == 0 {
        return;
    }
    let count = |class: RetestClass| v.retests.iter().filter(|r| r.class == class).count();
    let stuck = count(RetestClass::StuckAt0)
        + count(RetestClass::StuckAt1)
        + count(RetestClass::StuckMixed);
    let marginal = count(RetestClass::Intermittent) + count(RetestClass::PatternSensitive);
    let transfer = count(RetestClass::Transfer)
        + v.records
            .iter()
            .filter(|r| r.shape == ErrorShape::TransientRead)
            .count();
    let address = v
        .records
        .iter()
        .filter(|r| matches!(r.shape, ErrorShape::Address { .. }))
        .count();
    let evidence = json!({
        "errors": v.errors_total,
        "stuck": stuck,
        "marginal": marginal,
        "transfer": transfer,
        "address": address,
        "first_offsets": v.records.iter().take(8).map(|r| r.offset_bytes).collect::<Vec<_>>(),
    });
    let stuck_offsets: Vec<u64> = v
        .retests
        .iter()
        .filter(|r| {
            matches!(
                r.class,
                RetestClass::StuckAt0 | RetestClass::StuckAt1 | RetestClass::StuckMixed
            )
        })
        .map(|r| r.offset_bytes)
        .collect();
    let rma = "RMA the card with this report; the offsets and retest results reproduce the fault";
    if stuck > 0 {
        out.push(finding(
            FindingCode::VramStuckBit,
            Severity::Critical,
            Confidence::High,
            format!(
                "{} a bit stuck whatever is written, {}",
                if stuck == 1 {
                    "1 word of memory holds".to_owned()
                } else {
                    format!("{stuck} words of memory hold")
                },
                places(&stuck_offsets)
            ),
            evidence.clone(),
            rma,
        ));
    }
    if address > 0 {
        out.push(finding(
            FindingCode::VramAddressFault,
            Severity::Critical,
            Confidence::High,
            format!("{address} reads returned another address's data: the address path is faulty"),
            evidence.clone(),
            rma,
        ));
    }
    if marginal > 0 {
        out.push(finding(
            FindingCode::VramMarginal,
            Severity::Major,
            Confidence::Medium,
            format!(
                "{marginal} cells fail only sometimes or only for some patterns: a marginal part"
            ),
            evidence.clone(),
            "rerun at the rma profile; check for memory overclocks; RMA if it repeats",
        ));
    }
    if transfer > 0 {
        out.push(finding(FindingCode::VramTransferError, Severity::Major, Confidence::Medium,
            format!("{transfer} reads were wrong but the cell held the right value: the transfer, not the cell"), evidence.clone(),
            "check for memory overclocks and rerun; RMA if it repeats at stock clocks"));
    }
    if stuck + address + marginal + transfer == 0 {
        let (severity, confidence, code) = if v.errors_total == 1 {
            (
                Severity::Minor,
                Confidence::Low,
                FindingCode::VramTransientError,
            )
        } else {
            (Severity::Major, Confidence::Medium, FindingCode::VramErrors)
        };
        out.push(finding(
            code,
            severity,
            confidence,
            format!(
                "{} that did not come back on retest",
                crate::text::count(v.errors_total, "wrong read")
            ),
            evidence,
            "recheck with more passes (kiln run --profile rma): one flip that never repeats is not yet a hardware call",
        ));
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

/// The wrong words, each with everything a support desk reproduces it from: where (in
/// the tested memory, in GiB, in its buffer), what was written and read, which bits, the
/// test that found it, and what the in-place retest showed.
fn wrong_words(v: &VramReport) -> Table {
    // One row per word, in the order they were first found.
    let mut words: Vec<(u64, Vec<&ErrorRecord>)> = Vec::new();
    for r in &v.records {
        match words.iter_mut().find(|(o, _)| *o == r.offset_bytes) {
            Some((_, reads)) => reads.push(r),
            None => words.push((r.offset_bytes, vec![r])),
        }
    }
    Table {
        title: "Failing words".into(),
        noun: "wrong read",
        place: "word",
        columns: vec![
            "Offset",
            "Buffer + offset",
            "Failing bits",
            "First wrong read (expected → read)",
            "Found first by",
            "Shape",
            "Retest",
            "Stuck bits",
        ],
        rows: words
            .iter()
            .map(|(offset, reads)| {
                let first = reads[0];
                let retest = v.retests.iter().find(|t| t.offset_bytes == *offset);
                let mut bits: Vec<u8> = reads
                    .iter()
                    .flat_map(|r| r.flipped_bits.iter().copied())
                    .collect();
                bits.sort_unstable();
                bits.dedup();
                let bits: Vec<String> = bits.iter().map(u8::to_string).collect();
                TableRow {
                    key: format!("0x{offset:012x}"),
                    count: reads.len() as u64,
                    cells: vec![
                        format!("0x{offset:012x}"),
                        format!("{} + 0x{:x}", first.buffer, first.buffer_offset_bytes),
                        bits.join(" "),
                        format!("0x{:08x} → 0x{:08x}", first.expected, first.actual),
                        format!(
                            "{} pass {} step {}",
                            first.algorithm.name(),
                            first.pass,
                            first.step
                        ),
                        first.shape.word(),
                        retest.map_or("not retested".into(), |t| t.class.word().into()),
                        retest.map_or("-".into(), |t| {
                            stuck_bits(t.stuck_at_0_mask, t.stuck_at_1_mask)
                        }),
                    ],
                }
            })
            .collect(),
        total: v.errors_total,
    }
}

/// The bits a retest found stuck, in words: `bit 3 at 0, bit 9 at 1`.
fn stuck_bits(at_0_mask: u32, at_1_mask: u32) -> String {
    let mut said: Vec<(u32, u8)> = (0..32)
        .filter(|b| at_0_mask >> b & 1 == 1)
        .map(|b| (b, 0))
        .chain((0..32).filter(|b| at_1_mask >> b & 1 == 1).map(|b| (b, 1)))
        .collect();
    said.sort_unstable();
    if said.is_empty() {
        return "none".into();
    }
    said.iter()
        .map(|(b, v)| format!("bit {b} at {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Wrong words: where in the tested memory (x), by the pass and step that found them (y).
fn error_map(v: &VramReport) -> Section {
    let mut steps: Vec<(u32, u32)> = v.records.iter().map(|r| (r.pass, r.step)).collect();
    steps.sort_unstable();
    steps.dedup();
    Section::OffsetMap {
        title: "VRAM error map: offset in the tested memory (x) against pass and step (y)".into(),
        span_bytes: v.sizing.allocated_bytes.max(1),
        rows: steps.len(),
        points: v
            .records
            .iter()
            .map(|r| OffsetPoint {
                offset_bytes: r.offset_bytes,
                row: steps
                    .iter()
                    .position(|s| *s == (r.pass, r.step))
                    .unwrap_or(0),
                title: format!(
                    "0x{:x}: expected 0x{:08x}, read 0x{:08x}",
                    r.offset_bytes, r.expected, r.actual
                ),
            })
            .collect(),
        none: "no wrong reads".into(),
    }
}

/// The text report's lines: coverage, passes, rates, and the errors with their first
/// records and retest classes.
fn text_lines(v: &VramReport) -> Vec<String> {
    let s = &v.sizing;
    let c = &v.coverage;
    let t = &v.throughput;
    let mut out = vec![format!(
        "tested {} = {:.1}% of sized, {:.1}% of the {} heap, {:.1}% of {} free at start ({})",
        format_bytes(c.tested_bytes),
        c.of_sized * 100.0,
        c.of_heap * 100.0,
        format_bytes(s.heap_bytes),
        c.of_free * 100.0,
        format_bytes(s.free_at_start_bytes),
        s.free_source
    )];
    let passes: Vec<String> = v
        .algorithms
        .iter()
        .map(|a| format!("{} x{}", a.algorithm.name(), a.passes_completed))
        .collect();
    out.push(format!("passes {}", passes.join(", ")));
    out.push(format!(
        "write {:.2} GiB/s, verify {:.2} GiB/s, combined {:.2} GiB/s per wall second ({})",
        t.write.gib_per_s, t.verify.gib_per_s, t.combined_gib_per_wall_s, t.timing_source
    ));
    if v.errors_total > 0 {
        out.push(format!(
            "{}, {} recorded; flips 0->1 {}, 1->0 {}",
            crate::text::count(v.errors_total, "wrong read"),
            v.records.len(),
            v.histograms.zero_to_one,
            v.histograms.one_to_zero
        ));
        let bits: Vec<String> = v
            .histograms
            .bit_position
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(b, n)| format!("bit{b}:{n}"))
            .collect();
        out.push(format!("failing bits {}", bits.join(" ")));
        for r in v.records.iter().take(10) {
            out.push(format!(
                "offset 0x{:012x} (buffer {} +0x{:x}) expected 0x{:08x} read 0x{:08x} {} [{} pass {} step {}]",
                r.offset_bytes,
                r.buffer,
                r.buffer_offset_bytes,
                r.expected,
                r.actual,
                r.shape.word(),
                r.algorithm.name(),
                r.pass,
                r.step
            ));
        }
        if v.records.len() > 10 {
            out.push(format!(
                "... {} more records in report.json",
                v.records.len() - 10
            ));
        }
        let mut classes: Vec<(String, usize)> = Vec::new();
        for r in &v.retests {
            let name = r.class.word().to_owned();
            match classes.iter_mut().find(|(n, _)| *n == name) {
                Some((_, n)) => *n += 1,
                None => classes.push((name, 1)),
            }
        }
        if !classes.is_empty() {
            let list: Vec<String> = classes.iter().map(|(n, c)| format!("{c} {n}")).collect();
            out.push(format!("retested words: {}", list.join(", ")));
        }
    }
    if let Some(e) = &v.run.device_error {
        out.push(format!("device error: {e}"));
    }
    if let Some(s) = &v.run.stopped_early {
        out.push(format!("stopped early: {s}"));
    }
    out
}

/// Running totals while the test goes.
struct Tally {
    errors_total: u64,
    records: Vec<ErrorRecord>,
    histograms: Histograms,
    retests: Vec<RetestResult>,
    retested: HashSet<u64>,
    algorithms: Vec<AlgorithmRun>,
    verified_once: bool,
}

impl VramTest {
    /// Runs the test and returns its typed report.
    pub fn run_report(
        &mut self,
        ctx: &mut DeviceContext,
        control: &RunControl,
        events: &mut dyn EventSink,
    ) -> Result<VramReport, WorkloadError> {
        let started = Instant::now();
        let cfg = self.config.clone();
        if cfg.algorithms.is_empty() {
            return Err(WorkloadError::Config("no VRAM algorithm selected".into()));
        }
        let device = Some(ctx.info().index);
        let mut sizing = plan_size(ctx.info(), &cfg)?;
        let is_gpu = ctx.info().kind.is_gpu();
        let mut engine_cfg = EngineConfig::for_device(is_gpu);
        if let Some(layout) = cfg.layout {
            engine_cfg.layout = layout;
        }
        let layout = engine_cfg.layout;
        let stop = || control.stopped();
        let (mut engine, stopped_by) = Engine::allocate(
            ctx,
            engine_cfg,
            sizing.sized_bytes,
            sizing.max_buffer_bytes,
            &stop,
        )?;
        sizing.allocated_bytes = engine.tested_bytes();
        sizing.buffer_count = engine.buffer_count();
        sizing.allocation_stopped_by = stopped_by.map(|e| e.to_string());
        engine.plant(&cfg.planted);
        engine.plant_all(cfg.planted_all);
        events.emit(
            device,
            Event::WorkloadStart {
                workload: "vram".into(),
                settings: serde_json::json!({ "config": &cfg, "sizing": &sizing, "layout": layout }),
            },
        );
        control.progress.set_length(sizing.allocated_bytes);
        let mut tally = Tally {
            errors_total: 0,
            records: Vec::new(),
            histograms: Histograms::default(),
            retests: Vec::new(),
            retested: HashSet::new(),
            algorithms: cfg
                .algorithms
                .iter()
                .map(|&a| AlgorithmRun {
                    algorithm: a,
                    passes_completed: 0,
                    errors: 0,
                })
                .collect(),
            verified_once: false,
        };
        let mut stopped_early = None;
        let mut device_error = None;
        let mut pass = 0u32;
        let mut last_took: HashMap<Algorithm, Duration> = HashMap::new();
        // What one sweep over the memory took so far, to foresee an algorithm not yet run
        // (a rerun to confirm has a short budget, and must not overrun it).
        let mut swept = (Duration::ZERO, 0u32);
        let foresee = |alg: Algorithm,
                       pass: u32,
                       last: &HashMap<Algorithm, Duration>,
                       swept: (Duration, u32)| {
            last.get(&alg).copied().unwrap_or_else(|| {
                let (sweeps, idle) = alg.sweeps_and_idle(pass, cfg.seed, cfg.retention_delay);
                let per_sweep = swept.0.checked_div(swept.1).unwrap_or_default();
                per_sweep * sweeps + idle
            })
        };
        'passes: loop {
            if cfg.passes.is_some_and(|n| pass >= n) {
                break;
            }
            for (ai, &alg) in cfg.algorithms.iter().enumerate() {
                let first = pass == 0 && ai == 0;
                // Start nothing that the last pass says would end past the budget.
                let expected_end = Instant::now() + foresee(alg, pass, &last_took, swept);
                let would_overrun = control.deadline.is_some_and(|d| expected_end > d);
                if control.stop_requested() {
                    stopped_early = Some(crate::workload::STOPPED_ON_REQUEST.into());
                    break 'passes;
                }
                if !first && (control.out_of_time() || would_overrun) {
                    if cfg.passes.is_some() || pass == 0 {
                        stopped_early = Some(if control.stopped() {
                            "stopped at the hard deadline".to_string()
                        } else {
                            format!("time budget spent before {} of pass {pass}", alg.name())
                        });
                    }
                    break 'passes;
                }
                control
                    .progress
                    .set_message(format!("pass {pass} {}", alg.name()));
                let alg_started = Instant::now();
                let outcome = run_algorithm(
                    &mut engine,
                    &cfg,
                    control,
                    &mut DeviceEvents::new(events, device),
                    (alg, pass),
                    &mut tally,
                );
                let took = alg_started.elapsed();
                last_took.insert(alg, took);
                let (sweeps, idle) = alg.sweeps_and_idle(pass, cfg.seed, cfg.retention_delay);
                swept = (swept.0 + took.saturating_sub(idle), swept.1 + sweeps);
                match outcome {
                    Ok(true) => tally.algorithms[ai].passes_completed += 1,
                    Ok(false) => {
                        stopped_early = Some(if control.stop_requested() {
                            crate::workload::STOPPED_ON_REQUEST.into()
                        } else {
                            "stopped at the hard deadline".into()
                        });
                        break 'passes;
                    }
                    Err(e) => {
                        device_error = Some(record_device_error(events, device, &e));
                        break 'passes;
                    }
                }
            }
            pass += 1;
            if cfg.passes.is_none() && control.out_of_time() {
                break;
            }
        }
        let tested_bytes = if tally.verified_once {
            engine.tested_bytes()
        } else {
            0
        };
        let ratio = |d: u64| {
            if d > 0 {
                tested_bytes as f64 / d as f64
            } else {
                0.0
            }
        };
        let coverage = Coverage {
            tested_bytes,
            of_sized: ratio(sizing.sized_bytes),
            of_heap: ratio(sizing.heap_bytes),
            of_free: ratio(sizing.free_at_start_bytes),
        };
        let throughput = throughput(&engine);
        let records_dropped = tally.errors_total - tally.records.len() as u64;
        Ok(VramReport {
            sizing,
            coverage,
            layout,
            algorithms: tally.algorithms,
            errors_total: tally.errors_total,
            records: tally.records,
            records_dropped,
            histograms: tally.histograms,
            retests: tally.retests,
            throughput,
            run: Envelope {
                stopped_early,
                device_error,
                wall_s: started.elapsed().as_secs_f64(),
                together_with: None,
            },
        })
    }
}

fn throughput(engine: &Engine) -> Throughput {
    let mut write = engine.stats(Op::Write);
    let mut fill = engine.stats(Op::Fill);
    // First touch is left out of the rates, unless it was the only write.
    let includes_first_touch = write.bytes + fill.bytes == 0 && engine.first_touch().is_some();
    if includes_first_touch && let Some((op, first)) = engine.first_touch() {
        let into = if op == Op::Fill {
            &mut fill
        } else {
            &mut write
        };
        *into = first;
    }
    let verify = engine.stats(Op::Verify);
    let rewrite = engine.stats(Op::Rewrite);
    let wall_ns = write.wall_ns + fill.wall_ns + verify.wall_ns + rewrite.wall_ns;
    let traffic = write.bytes + fill.bytes + verify.bytes + 2 * rewrite.bytes;
    let sweep_wall_s = wall_ns as f64 / 1e9;
    Throughput {
        write: Rate::of(write.bytes + fill.bytes, write.gpu_ns + fill.gpu_ns),
        verify: Rate::of(verify.bytes, verify.gpu_ns),
        rewrite: Rate::of(rewrite.bytes, rewrite.gpu_ns),
        combined_gib_per_wall_s: if sweep_wall_s > 0.0 {
            to_gib(traffic) / sweep_wall_s
        } else {
            0.0
        },
        sweep_wall_s,
        timing_source: if engine.has_gpu_timestamps() {
            "gpu_timestamps".into()
        } else {
            "wall_clock".into()
        },
        includes_first_touch,
    }
}

/// Runs pass `pass` of one algorithm. Ok(false) when a stop request cut it short.
fn run_algorithm(
    engine: &mut Engine,
    cfg: &VramConfig,
    control: &RunControl,
    events: &mut DeviceEvents,
    (alg, pass): (Algorithm, u32),
    tally: &mut Tally,
) -> Result<bool, GpuError> {
    let stop = || control.stopped();
    let steps = alg.steps(pass, cfg.seed, cfg.retention_delay);
    for (index, step) in steps.iter().enumerate() {
        let capacity = cfg
            .record_capacity
            .saturating_sub(tally.records.len() as u32);
        let (op, pattern, sweep) = match *step {
            Step::Write(p) => {
                let op = if p.constant_word().is_some() {
                    "fill"
                } else {
                    "write"
                };
                (op, p, engine.write(&p, &stop)?)
            }
            Step::Verify(p) => ("verify", p, engine.verify(&p, capacity, &stop)?),
            Step::Rewrite { expect, descending } => (
                "rewrite",
                expect,
                engine.rewrite(&expect, u32::MAX, descending, capacity, &stop)?,
            ),
            Step::Idle(delay) => {
                let until = Instant::now() + delay;
                while Instant::now() < until {
                    if control.stopped() {
                        return Ok(false);
                    }
                    control.still_alive();
                    std::thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
                }
                continue;
            }
        };
        events.emit(Event::Step {
            workload: "vram".into(),
            algorithm: alg.name().into(),
            pass,
            step: index as u32,
            op: op.into(),
            pattern: pattern.describe(),
            bytes: sweep.bytes,
            gpu_ns: sweep.gpu_ns,
            wall_ns: sweep.wall_ns,
            errors: sweep.counters.errors,
            completed: sweep.completed,
        });
        control.progress.set_position(sweep.bytes);
        if step.checks().is_some() {
            if sweep.completed {
                tally.verified_once = true;
            }
            let at = StepAt {
                alg,
                pass,
                index,
                step,
                pattern: &pattern,
            };
            let found = record_errors(engine, cfg, events, at, sweep, tally)?;
            if let Some(run) = tally.algorithms.iter_mut().find(|r| r.algorithm == alg) {
                run.errors += found;
            }
        } else if !sweep.completed {
            return Ok(false);
        }
        if control.stopped() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Where in the test a sweep ran: the algorithm, its pass, the step's index and the step,
/// with the pattern it wrote or checked.
struct StepAt<'a> {
    alg: Algorithm,
    pass: u32,
    index: usize,
    step: &'a Step,
    pattern: &'a Pattern,
}

/// Folds a verifying sweep's errors into the tally, records and retests them.
fn record_errors(
    engine: &mut Engine,
    cfg: &VramConfig,
    events: &mut DeviceEvents,
    at: StepAt,
    sweep: Sweep,
    tally: &mut Tally,
) -> Result<u64, GpuError> {
    let StepAt {
        alg,
        pass,
        index,
        step,
        pattern,
    } = at;
    let BatchCounters {
        errors,
        flipped_bits,
        bit_position,
        zero_to_one,
        one_to_zero,
        records,
    } = sweep.counters;
    tally.errors_total += errors;
    let h = &mut tally.histograms;
    h.zero_to_one += zero_to_one;
    h.one_to_zero += one_to_zero;
    for (a, b) in h.flipped_bits.iter_mut().zip(flipped_bits) {
        *a += b;
    }
    for (a, b) in h.bit_position.iter_mut().zip(bit_position) {
        *a += b;
    }
    let tested_words = engine.tested_bytes() / 4;
    let mut to_retest = Vec::new();
    for raw in records {
        let transient = raw.flags & FLAG_TRANSIENT != 0;
        let shape = if transient {
            ErrorShape::TransientRead
        } else {
            classify::shape(pattern, raw.word, raw.expected, raw.actual, tested_words)
        };
        let diff = raw.expected ^ raw.actual;
        let buffer_offset = engine
            .locate(raw.word)
            .map(|(_, local)| local * 4)
            .unwrap_or(raw.word * 4);
        let record = ErrorRecord {
            offset_bytes: raw.word * 4,
            buffer: raw.buffer,
            buffer_offset_bytes: buffer_offset,
            expected: raw.expected,
            actual: raw.actual,
            flipped_bits: (0..32u8).filter(|b| diff >> b & 1 == 1).collect(),
            shape,
            algorithm: alg,
            pass,
            step: index as u32,
            pattern: pattern.describe(),
            span_elements: transient.then_some(raw.span_elements),
        };
        events.emit(Event::VramError {
            record: record.clone(),
        });
        tally.records.push(record);
        if !transient
            && tally.retested.len() < cfg.retest_cap as usize
            && tally.retested.insert(raw.word)
        {
            to_retest.push(WordRef {
                word: raw.word,
                expected: raw.expected,
                actual: raw.actual,
                restore: step.leaves(raw.word).unwrap_or(raw.expected),
                overwritten: matches!(step, Step::Rewrite { .. }),
            });
        }
    }
    let results = retest::retest(
        engine,
        &to_retest,
        cfg.retest_reads,
        cfg.seed ^ u64::from(pass),
    )?;
    for result in results {
        events.emit(Event::Retest {
            result: result.clone(),
        });
        tally.retests.push(result);
    }
    Ok(errors)
}
