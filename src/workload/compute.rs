//! Compute saturation with every result verified: long dependent multiply-add chains fill
//! every ALU; each round runs all work items twice, the second time on shuffled
//! invocations so that the same work lands on a different compute unit, and compares the
//! two bit for bit on the GPU. A CPU-computed sample checks the arithmetic itself. One
//! silently wrong lane is a mismatch with its work item, both invocations, and values.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::hash;
use super::settings::{SettingError, SettingsTable};
use super::show::{Bar, Section, Table, TableRow};
use super::{
    Envelope, Kind, PlanDetail, Report, RunControl, Workload, WorkloadError, WorkloadOutcome,
    WorkloadStatus, record_device_error,
};
use crate::evidence::{DeviceEvents, Event, EventSink};
use crate::finding::{Confidence, Finding, FindingCode, Severity, finding};
use crate::gpu::{
    Binding, BufferKind, DeviceContext, DeviceInfo, GpuBuffer, GpuError, GpuResult, ShaderCode,
    embedded_shader,
};
use crate::limits::bounds;
use crate::power::{LOAD_PERIOD, Pacer, PowerController, PowerTargetReport};

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

/// How the load is applied over time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "shape")]
pub enum LoadShape {
    /// Full load throughout.
    Steady,
    /// Full load for `on_ms`, idle for `off_ms`, repeated: power-delivery transients.
    Pulsed {
        /// Loaded time per period.
        on_ms: u64,
        /// Idle time per period.
        off_ms: u64,
    },
    /// Load levels 10%, 20% ... 100% of each period, each for a tenth of the budget.
    Sweep,
}

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
            chains: None,
            power_target: None,
        }
    }
}

/// A work item whose two runs, or whose run and the CPU, disagree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mismatch {
    /// The arithmetic kind.
    pub kind: ComputeKind,
    /// Round, from 0.
    pub round: u32,
    /// The work item.
    pub item: u32,
    /// Invocation (and workgroup) that computed it first.
    pub first_invocation: u32,
    /// Invocation that computed it in the shuffled run (None for a CPU check).
    pub second_invocation: Option<u32>,
    /// Workgroup of the second invocation.
    pub second_workgroup: Option<u32>,
    /// The first run's result (or the CPU's).
    pub expected: [u32; 4],
    /// The result that disagrees.
    pub actual: [u32; 4],
    /// `redundant_run` or `cpu_reference`.
    pub check: String,
}

/// Per-kind results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KindResult {
    /// The kind.
    pub kind: ComputeKind,
    /// Rounds completed (two runs and a comparison each).
    pub rounds: u32,
    /// Multiply-add blocks per chain, calibrated for this kind.
    #[serde(default)]
    pub iterations: u32,
    /// Independent vec4 chains per work item, chosen for this kind.
    #[serde(default)]
    pub chains: u32,
    /// Multiply-adds whose results were compared (both runs of every round).
    pub verified_ops: u64,
    /// Work items that disagreed between runs.
    pub mismatches: u64,
    /// Work items checked against the CPU.
    pub cpu_checked: u64,
    /// Of those, how many disagreed.
    pub cpu_mismatches: u64,
    /// Results that were NaN or infinite (fp32).
    pub nonfinite: u64,
    /// GPU seconds in the multiply-add dispatches.
    pub gpu_s: f64,
    /// Operations (2 per multiply-add) per GPU second, in 10^9.
    pub gops: f64,
    /// The best single round's rate: the measured peak of this device.
    pub best_gops: f64,
}

/// A load level of a sweep.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LevelResult {
    /// Target share of each period under load.
    pub duty: f64,
    /// Achieved operations per wall second, in 10^9.
    pub gops_per_wall_s: f64,
}

/// Everything the compute test found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ComputeReport {
    /// Work items per round.
    pub items: u32,
    /// Chain iterations per work item of the first kind (each kind's are its own).
    pub iterations: u32,
    /// Independent vec4 chains per work item of the first kind (each kind's are its own).
    #[serde(default)]
    pub chains: u32,
    /// Load shape.
    pub shape: LoadShape,
    /// Per kind.
    pub kinds: Vec<KindResult>,
    /// Sweep levels (empty for other shapes).
    pub levels: Vec<LevelResult>,
    /// The first mismatches.
    pub records: Vec<Mismatch>,
    /// What the power target achieved, where the load held one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<PowerTargetReport>,
    /// How its run ended and how long it took.
    #[serde(flatten)]
    pub run: Envelope,
}

impl ComputeReport {
    /// All mismatches and non-finite results.
    pub fn faults(&self) -> u64 {
        self.kinds
            .iter()
            .map(|k| k.mismatches + k.cpu_mismatches + k.nonfinite)
            .sum()
    }
}

impl Report for ComputeReport {
    super::envelope_in!(run);

    fn found(&self) -> Option<WorkloadStatus> {
        (self.faults() > 0).then_some(WorkloadStatus::Failed)
    }

    /// It ran once the device began its work (the calibration dispatches): stopped before
    /// a round completed, it is incomplete, not "could not run".
    fn began(&self) -> bool {
        self.kinds.iter().any(|k| k.rounds > 0 || k.iterations > 0)
    }

    /// One sentence for people.
    fn headline(&self) -> String {
        let verified: u64 = self.kinds.iter().map(|k| k.verified_ops).sum();
        let rates: Vec<String> = self
            .kinds
            .iter()
            .filter(|k| k.rounds > 0)
            .map(|k| {
                format!(
                    "{} {}",
                    k.kind.label(),
                    crate::units::scaled(k.gops, "Gop/s")
                )
            })
            .collect();
        match self.status() {
            WorkloadStatus::Failed | WorkloadStatus::SoftwareFault => format!(
                "{} (silent data corruption) in {} verified multiply-adds",
                crate::text::count(self.faults(), "wrong result"),
                crate::units::large(verified as f64)
            ),
            WorkloadStatus::NotRun => format!(
                "nothing ran: {}",
                self.run.why_cut_short().unwrap_or("no round completed")
            ),
            WorkloadStatus::Incomplete => format!(
                "no wrong result in {} verified multiply-adds, but it stopped early: {}",
                crate::units::large(verified as f64),
                self.run.why_cut_short().unwrap_or("unknown")
            ),
            WorkloadStatus::Passed => format!(
                "no wrong result in {} verified multiply-adds ({})",
                crate::units::large(verified as f64),
                rates.join(", ")
            ),
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
        let shape = match shape.as_deref() {
            None | Some("steady") => LoadShape::Steady,
            Some("pulsed") => LoadShape::Pulsed {
                on_ms: on_ms.map_or(100, u64::from),
                off_ms: off_ms.map_or(100, u64::from),
            },
            Some("sweep") => LoadShape::Sweep,
            Some(other) => {
                return Err(SettingError::new(
                    "shape",
                    format!(
                        "unknown load shape {} (known: steady, pulsed, sweep)",
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
                "{} {}, {:.1} Gop/s, {}, {} CPU-checked ({} wrong), {} non-finite",
                k.kind.label(),
                crate::text::count(k.rounds, "round"),
                k.gops,
                crate::text::count(k.mismatches, "mismatch"),
                k.cpu_checked,
                k.cpu_mismatches,
                k.nonfinite
            ));
        }
        lines.extend(c.power.iter().map(PowerTargetReport::line));
        for l in &c.levels {
            lines.push(format!(
                "load {:.0}%: {:.1} Gop per wall second",
                l.duty * 100.0,
                l.gops_per_wall_s
            ));
        }
        for m in c.records.iter().take(10) {
            // The shuffled run's invocation; a CPU check has none.
            let second = match (m.second_invocation, m.second_workgroup) {
                (Some(i), Some(g)) => format!("then invocation {i} of workgroup {g}"),
                (Some(i), None) => format!("then invocation {i}"),
                _ => "checked on the CPU".into(),
            };
            lines.push(format!(
                "{} item {} (invocation {} {second}) expected {:08x?} got {:08x?} [{} round {}]",
                m.kind.label(),
                m.item,
                m.first_invocation,
                m.expected,
                m.actual,
                m.check,
                m.round
            ));
        }
        let mut out = vec![Section::Lines(lines)];
        if c.faults() > 0 {
            out.push(Section::Table(wrong_results(c)));
        }
        out.push(Section::Bars {
            title: "Compute rate (mark: best round)".into(),
            unit: "Gop/s".into(),
            bars: c
                .kinds
                .iter()
                .map(|k| Bar::marked(k.kind.label(), k.gops, Some(k.best_gops)))
                .collect(),
        });
        out
    }
}

/// The wrong results, each with the work item, the check and the invocations that
/// computed it: where on the chip to look.
fn wrong_results(c: &ComputeReport) -> Table {
    let words = |v: &[u32; 4]| {
        v.iter()
            .map(|w| format!("{w:08x}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    Table {
        title: "Wrong results".into(),
        noun: "wrong result",
        place: "item",
        columns: vec![
            "Kind",
            "Round",
            "Item",
            "Check",
            "Computed by",
            "Expected",
            "Got",
            "XOR",
        ],
        rows: c
            .records
            .iter()
            .map(|m| {
                let xor: [u32; 4] = std::array::from_fn(|i| m.expected[i] ^ m.actual[i]);
                let by = match (m.second_invocation, m.second_workgroup) {
                    (Some(i), Some(g)) => format!(
                        "invocation {}, then {i} of workgroup {g}",
                        m.first_invocation
                    ),
                    (Some(i), None) => format!("invocation {}, then {i}", m.first_invocation),
                    _ => format!("invocation {} (CPU check)", m.first_invocation),
                };
                TableRow {
                    count: 1,
                    key: format!("{} item {}", m.kind.label(), m.item),
                    cells: vec![
                        m.kind.label().into(),
                        m.round.to_string(),
                        m.item.to_string(),
                        m.check.to_string(),
                        by,
                        words(&m.expected),
                        words(&m.actual),
                        words(&xor),
                    ],
                }
            })
            .collect(),
        total: c.faults(),
    }
}

/// Wrong or impossible results: silent data corruption.
fn found(c: &ComputeReport, out: &mut Vec<Finding>) {
    let mismatches: u64 = c
        .kinds
        .iter()
        .map(|k| k.mismatches + k.cpu_mismatches)
        .sum();
    let nonfinite: u64 = c.kinds.iter().map(|k| k.nonfinite).sum();
    if mismatches > 0 {
        out.push(finding(FindingCode::ComputeMismatch, Severity::Critical, Confidence::High,
            format!("{mismatches} work items computed differently on two compute units: silent data corruption"),
            json!({"mismatches": mismatches, "records": c.records.iter().take(8).collect::<Vec<_>>()}),
            "take the GPU out of service and RMA it with this report"));
    }
    if nonfinite > 0 {
        out.push(finding(
            FindingCode::ComputeNonfinite,
            Severity::Critical,
            Confidence::High,
            format!(
                "{nonfinite} results were NaN or infinite where the arithmetic cannot produce them"
            ),
            json!({"nonfinite": nonfinite}),
            "take the GPU out of service and RMA it with this report",
        ));
    }
}

impl LoadShape {
    /// The shape in a few words (`pulsed (100 ms on / 100 ms off)`).
    pub fn name(&self) -> String {
        match self {
            LoadShape::Steady => "steady".to_owned(),
            LoadShape::Pulsed { on_ms, off_ms } => {
                format!("pulsed ({on_ms} ms on / {off_ms} ms off)")
            }
            LoadShape::Sweep => "swept 10%..100%".to_owned(),
        }
    }
}

/// The compute test as a workload.
pub struct ComputeTest {
    /// Its settings.
    pub config: ComputeConfig,
}

impl Workload for ComputeTest {
    fn name(&self) -> &'static str {
        "compute"
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

struct Gpu<'c> {
    ctx: &'c mut DeviceContext,
    first: GpuBuffer,
    /// Bound in both descriptor sets; held so it lives as long as they are used.
    _second: GpuBuffer,
    /// Counters and records, written by the comparison in device-local memory.
    results: GpuBuffer,
    /// The host's copy: counters and records, then the CPU-check samples.
    results_out: GpuBuffer,
    first_set: Binding,
    second_set: Binding,
    items: u32,
    /// Independent vec4 chains per work item.
    chains: u32,
    /// Multiply-adds per chain between sums: UNROLL, except in roofline probes.
    block: u32,
}

impl<'c> Gpu<'c> {
    /// The two runs' buffers (two uvec4 per item), the device-side results of
    /// `results_bytes` and their host copy, bound both ways round.
    fn open(
        ctx: &'c mut DeviceContext,
        items: u32,
        chains: u32,
        results_bytes: u64,
    ) -> GpuResult<Gpu<'c>> {
        let bytes = u64::from(items) * ITEM_BYTES;
        let mut first = ctx.buffer(BufferKind::Device, bytes, "kiln compute first run")?;
        let mut second = ctx.buffer(BufferKind::Device, bytes, "kiln compute second run")?;
        let mut results = ctx.buffer(
            BufferKind::Device,
            results_bytes.max(64),
            "kiln compute results",
        )?;
        let results_out = ctx.buffer(
            BufferKind::Readback,
            results_bytes.max(64),
            "kiln compute results readback",
        )?;
        let first_set = ctx.bind([&mut first, &mut results, &mut second])?;
        let second_set = ctx.bind([&mut second, &mut results, &mut first])?;
        Ok(Gpu {
            ctx,
            first,
            _second: second,
            results,
            results_out,
            first_set,
            second_set,
            items,
            chains,
            block: UNROLL as u32,
        })
    }

    /// Blocks per chain for which one pass of `kind` takes about `target`: short chains
    /// are dominated by dispatch overhead, so the probe grows until it takes a good part
    /// of the target before scaling. Whole multiples of 16 blocks: a few pipelines per
    /// kind, not one per probe.
    fn calibrate(&mut self, kind: ComputeKind, target: Duration, peak: bool) -> GpuResult<u32> {
        let target_ns = target.as_nanos() as f64;
        // Each probe is a new pipeline, and a driver may finish compiling it at its first
        // dispatch (lavapipe does): the second run is the one timed.
        let timed = |gpu: &mut Self, probe: u32| -> GpuResult<f64> {
            run_pass(gpu, kind, probe, 1, None, None, peak)?;
            Ok(run_pass(gpu, kind, probe, 1, None, None, peak)? as f64)
        };
        let mut probe = 16u32;
        let mut took = timed(self, probe)?;
        while took < target_ns / 4.0 && probe < 1 << 16 {
            probe *= 4;
            took = timed(self, probe)?;
        }
        Ok(blocks_for(probe, took, target_ns))
    }

    /// The chain count of half, once and twice the default that runs `kind` fastest
    /// (the same work at each, one timed pass after an untimed one), left set, and the
    /// blocks per chain for a pass of about `target` at that count.
    fn fastest_chains(&mut self, kind: ComputeKind, target: Duration) -> GpuResult<(u32, u32)> {
        let target_ns = target.as_nanos() as f64;
        self.chains = DEFAULT_CHAINS;
        let n = self.calibrate(kind, target, false)?;
        let mut best = (DEFAULT_CHAINS, n, 0f64);
        for chains in [DEFAULT_CHAINS / 2, DEFAULT_CHAINS, 2 * DEFAULT_CHAINS] {
            self.chains = chains;
            let blocks = whole_blocks(u64::from(n) * u64::from(DEFAULT_CHAINS) / u64::from(chains));
            run_pass(self, kind, blocks, 1, None, None, false)?;
            let ns = run_pass(self, kind, blocks, 1, None, None, false)?.max(1) as f64;
            let rate = f64::from(chains) * f64::from(blocks) / ns;
            if rate > best.2 {
                best = (chains, blocks_for(blocks, ns, target_ns), rate);
            }
        }
        self.chains = best.0;
        Ok((best.0, best.1))
    }
}

/// Blocks per chain for a pass of `target_ns`, from a pass of `blocks` that took
/// `took_ns`.
fn blocks_for(blocks: u32, took_ns: f64, target_ns: f64) -> u32 {
    whole_blocks((f64::from(blocks) * target_ns / took_ns.max(1.0)) as u64)
}

/// `blocks` within 16..=65536 and a whole multiple of 16: a few pipelines per kind, not
/// one per probe.
fn whole_blocks(blocks: u64) -> u32 {
    blocks.clamp(16, 1 << 16) as u32 / 16 * 16
}

/// Multiply-adds in one pass: every lane of every chain of every work item, `block` per
/// chain in each of `iterations` blocks.
fn pass_multiply_adds(items: u32, chains: u32, block: u32, iterations: u32) -> u64 {
    u64::from(items) * u64::from(chains) * LANES * u64::from(block) * u64::from(iterations)
}

/// Work items per pass unless the settings say otherwise: enough to fill a GPU many
/// times over, and few on a CPU device, whose lanes are the CPU's.
fn default_items(device: &DeviceInfo) -> u32 {
    if device.kind.is_gpu() {
        1 << 20
    } else {
        1 << 12
    }
}

/// The roofline of `kind` on this device, in 10^9 operations (two per multiply-add) per
/// GPU second: the same chains as the test with nothing verified (no sums, one run, no
/// comparison), at half, once and twice the test's chain count, each with loop bodies of
/// 4 and 8 multiply-adds per chain, the best of the six, each run for a sixth of
/// `duration`. The verified test's rate is judged against it.
pub fn roofline(
    ctx: &mut DeviceContext,
    kind: ComputeKind,
    items: u32,
    dispatch_target: Duration,
    duration: Duration,
) -> GpuResult<f64> {
    let mut best = 0f64;
    let shapes: Vec<(u32, u32)> = [DEFAULT_CHAINS / 2, DEFAULT_CHAINS, 2 * DEFAULT_CHAINS]
        .into_iter()
        .flat_map(|chains| [(chains, 4), (chains, 8)])
        .collect();
    for &(chains, block) in &shapes {
        let mut gpu = Gpu::open(ctx, items, chains, 64)?;
        gpu.block = block;
        let iterations = gpu.calibrate(kind, dispatch_target, true)?;
        // Two operations per multiply-add.
        let ops = 2 * pass_multiply_adds(items, chains, block, iterations);
        // Untimed: the calibrated pipeline's first dispatch may finish its compilation.
        run_pass(&mut gpu, kind, iterations, 1, None, None, true)?;
        let started = Instant::now();
        let (mut done, mut ns) = (0u64, 0u64);
        while started.elapsed() < duration / shapes.len() as u32 || done == 0 {
            ns += run_pass(&mut gpu, kind, iterations, 1, None, None, true)?;
            done += ops;
        }
        best = best.max(done as f64 / ns.max(1) as f64);
    }
    Ok(best)
}

/// The multiplier and offset of the shuffle: an odd multiplier is a bijection mod 2^k.
fn shuffle(round: u32, items: u32) -> (u32, u32) {
    let mul = (0x9E37_79B1u32.wrapping_add(round.wrapping_mul(2))) | 1;
    (
        mul,
        (items / 2).wrapping_add(round.wrapping_mul(0x61C8_8647)) & (items - 1),
    )
}

/// Which invocation computed `item` in the shuffled run.
fn shuffled_invocation(item: u32, round: u32, items: u32) -> u32 {
    let (mul, add) = shuffle(round, items);
    // Invert (inv * mul + add) mod items with the multiplicative inverse of mul.
    let mut inverse = mul;
    for _ in 0..5 {
        inverse = inverse.wrapping_mul(2u32.wrapping_sub(mul.wrapping_mul(inverse)));
    }
    item.wrapping_sub(add).wrapping_mul(inverse) & (items - 1)
}

/// Where a planted fault goes into a chain: after this many multiply-add blocks, this
/// XOR on the first lane of the first chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainFault {
    /// Blocks of UNROLL multiply-adds before the fault.
    pub after_blocks: u32,
    /// The bits flipped.
    pub xor: u32,
}

/// What compute_fma.comp computes for `item`, on the CPU: the fold of its chains (what two
/// runs compare bit for bit) and the chains' values (what the CPU check compares: their
/// fp32 sum, or for int32 the fold again). `fault` plants an error in the middle of the
/// first chain, as the shader's `inject_step` does.
pub fn reference(
    kind: ComputeKind,
    item: u32,
    seed: u32,
    iterations: u32,
    chains: u32,
    fault: Option<ChainFault>,
) -> ([u32; 4], [u32; 4]) {
    const FOLD: u32 = 0x9E37_79B1;
    let h = hash(item ^ seed);
    let mut fold = [0u32; 4];
    let mix = |fold: &mut [u32; 4], v: [u32; 4]| {
        for c in 0..4 {
            fold[c] = (fold[c] ^ v[c]).wrapping_mul(FOLD);
        }
    };
    match kind {
        ComputeKind::Fp32 | ComputeKind::Fp16 => {
            let a = [0.999_023_44f32, 0.998_046_9, 0.997_070_3, 0.996_093_75];
            let scale = 1.0 + (h & 7) as f32;
            let b = [
                0.000_976_562_5f32 * scale,
                0.001_953_125 * scale,
                0.002_929_687_5 * scale,
                0.003_906_25 * scale,
            ];
            let mut total = [0f32; 4];
            // One sum per lane over every chain and block, as the shader keeps it.
            let mut sum = [0u32; 4];
            for chain in 0..chains {
                let g = hash(h.wrapping_add(chain));
                let mut x = [
                    (g & 0xFFFF) as f32 / 65536.0,
                    (g >> 16) as f32 / 65536.0,
                    ((g >> 8) & 0xFFFF) as f32 / 65536.0,
                    (g & 0xFF) as f32 / 65536.0,
                ];
                for block in 0..iterations {
                    for _ in 0..UNROLL {
                        for c in 0..4 {
                            x[c] = x[c].mul_add(a[c], b[c]);
                        }
                    }
                    if chain == 0
                        && let Some(f) = fault.filter(|f| f.after_blocks == block)
                    {
                        x[0] = f32::from_bits(x[0].to_bits() ^ f.xor);
                    }
                    for c in 0..4 {
                        sum[c] = sum[c].wrapping_add(x[c].to_bits());
                    }
                }
                for c in 0..4 {
                    total[c] += x[c];
                }
            }
            (sum.map(|s| s.wrapping_mul(FOLD)), total.map(f32::to_bits))
        }
        ComputeKind::Int32 => {
            let a = [1_664_525u32, 22_695_477, 1_103_515_245, 134_775_813];
            let b = [1_013_904_223u32, 1, 12345, 1].map(|v: u32| v.wrapping_add(h & 0xFF));
            for chain in 0..chains {
                let g = hash(h.wrapping_add(chain));
                let mut x = [
                    g,
                    g ^ 0x9E37_79B9,
                    g.wrapping_mul(3),
                    g.wrapping_add(0x7F4A_7C15),
                ];
                for block in 0..iterations {
                    for _ in 0..UNROLL {
                        for c in 0..4 {
                            x[c] = x[c].wrapping_mul(a[c]).wrapping_add(b[c]);
                        }
                    }
                    if chain == 0
                        && let Some(f) = fault.filter(|f| f.after_blocks == block)
                    {
                        x[0] ^= f.xor;
                    }
                }
                mix(&mut fold, x);
            }
            (fold, fold)
        }
    }
}

/// True when a GPU result matches the CPU's: bit-exact for integers; for fp32 within
/// a relative 1e-5 (the chain contracts, so fused and unfused rounding stay that close).
fn agrees(kind: ComputeKind, cpu: [u32; 4], gpu: [u32; 4]) -> bool {
    match kind {
        ComputeKind::Int32 => cpu == gpu,
        ComputeKind::Fp32 | ComputeKind::Fp16 => cpu.iter().zip(gpu).all(|(&c, g)| {
            let (c, g) = (f32::from_bits(c), f32::from_bits(g));
            g.is_finite() && (c - g).abs() <= 1e-5 * c.abs().max(1e-3)
        }),
    }
}

impl ComputeTest {
    /// Runs the test and returns its typed report.
    pub fn run_report(
        &mut self,
        ctx: &mut DeviceContext,
        control: &RunControl,
        events: &mut dyn EventSink,
    ) -> Result<ComputeReport, WorkloadError> {
        let cfg = self.config.clone();
        if cfg.kinds.is_empty() {
            return Err(WorkloadError::Config("no compute kind selected".into()));
        }
        if cfg.power_target.is_some() && cfg.shape != LoadShape::Steady {
            return Err(WorkloadError::Config(format!(
                "a power target sets the load itself: it cannot be held with a {} load",
                cfg.shape.name()
            )));
        }
        let items = cfg.items.unwrap_or_else(|| default_items(ctx.info()));
        if !items.is_power_of_two() || items < WORKGROUP {
            return Err(WorkloadError::Config(format!(
                "compute work items must be a power of two of at least {WORKGROUP}, not {items}"
            )));
        }
        if let Some((item, _)) = cfg.inject
            && item >= items
        {
            return Err(WorkloadError::Config(format!(
                "inject item {item} is outside the {items} work items"
            )));
        }
        let device = Some(ctx.info().index);
        let mut cfg = cfg;
        if !ctx.info().shader_float16 && cfg.kinds.contains(&ComputeKind::Fp16) {
            cfg.kinds.retain(|&k| k != ComputeKind::Fp16);
            events.emit(
                device,
                Event::Note {
                    message: "the device has no fp16 arithmetic (shaderFloat16): the fp16 compute pass is skipped".into(),
                },
            );
            if cfg.kinds.is_empty() {
                return Err(WorkloadError::Config(
                    "the device has no fp16 arithmetic and no other compute kind was selected"
                        .into(),
                ));
            }
        }
        let started = Instant::now();
        let results_bytes = ((RECORDS_AT
            + cfg.record_capacity as usize * RECORD_WORDS
            + 4 * cfg.cpu_samples as usize)
            * 4) as u64;
        let chains = cfg.chains.unwrap_or(DEFAULT_CHAINS).clamp(1, 64);
        let mut gpu = Gpu::open(ctx, items, chains, results_bytes)?;
        events.emit(
            device,
            Event::WorkloadStart {
                workload: "compute".into(),
                settings: serde_json::json!({ "config": &cfg, "items": items }),
            },
        );
        let mut report = ComputeReport {
            items,
            iterations: 0,
            chains,
            shape: cfg.shape,
            kinds: cfg
                .kinds
                .iter()
                .map(|&kind| KindResult {
                    kind,
                    rounds: 0,
                    iterations: 0,
                    chains,
                    verified_ops: 0,
                    mismatches: 0,
                    cpu_checked: 0,
                    cpu_mismatches: 0,
                    nonfinite: 0,
                    gpu_s: 0.0,
                    gops: 0.0,
                    best_gops: 0.0,
                })
                .collect(),
            levels: Vec::new(),
            records: Vec::new(),
            power: None,
            run: Envelope::default(),
        };
        if let Err(e) = drive(&mut gpu, &cfg, control, events, device, &mut report) {
            report.run.device_error = Some(record_device_error(events, device, &e));
        }
        for k in &mut report.kinds {
            k.gops = if k.gpu_s > 0.0 {
                k.verified_ops as f64 * 2.0 / k.gpu_s / 1e9
            } else {
                0.0
            };
        }
        report.run.wall_s = started.elapsed().as_secs_f64();
        Ok(report)
    }
}

/// Calibrates the chain length, then runs rounds in the load shape until the budget.
fn drive(
    gpu: &mut Gpu,
    cfg: &ComputeConfig,
    control: &RunControl,
    events: &mut dyn EventSink,
    device: Option<usize>,
    report: &mut ComputeReport,
) -> GpuResult<()> {
    // The grid fits the device: where even the shortest chains of the first kind take far
    // longer than a dispatch should (a slow GPU, or a CPU device shown as one), fewer
    // work items per pass, down to the CPU device's count. The buffers keep their size.
    let first = report.kinds[0].kind;
    let target_ns = cfg.dispatch_target.as_nanos() as u64;
    // A planted fault's item stays inside the grid.
    while gpu.items > MIN_GRID && cfg.inject.is_none_or(|(item, _)| item < gpu.items / 4) {
        run_pass(gpu, first, 16, cfg.seed, None, None, false)?;
        if run_pass(gpu, first, 16, cfg.seed, None, None, false)? <= 2 * target_ns {
            break;
        }
        gpu.items /= 4;
    }
    report.items = gpu.items;
    // Each kind is calibrated on its own: their rates differ (fp16 runs at its own), and
    // so may the chain count that fills the pipes.
    let mut iterations = Vec::new();
    for k in 0..report.kinds.len() {
        let kind = report.kinds[k].kind;
        let n = match cfg.chains {
            Some(_) => gpu.calibrate(kind, cfg.dispatch_target, false)?,
            None => {
                let (chains, n) = gpu.fastest_chains(kind, cfg.dispatch_target)?;
                report.kinds[k].chains = chains;
                n
            }
        };
        // Untimed, so that no round pays for a driver finishing its pipelines at their
        // first dispatch (lavapipe compiles a variant per run order).
        run_pass(gpu, kind, n, cfg.seed, None, None, false)?;
        run_pass(
            gpu,
            kind,
            n,
            cfg.seed,
            Some(shuffle(0, gpu.items)),
            None,
            false,
        )?;
        report.kinds[k].iterations = n;
        iterations.push(n);
    }
    report.iterations = iterations.first().copied().unwrap_or(0);
    report.chains = report.kinds.first().map_or(gpu.chains, |k| k.chains);
    let started = Instant::now();
    let budget = control
        .deadline
        .map(|d| d.saturating_duration_since(started));
    let mut round = 0u32;
    let mut hold = cfg.power_target.map(PowerController::new);
    let mut pacer = Pacer::new(match cfg.shape {
        LoadShape::Pulsed { on_ms, off_ms } if hold.is_none() => {
            Duration::from_millis(on_ms + off_ms)
        }
        _ => LOAD_PERIOD,
    });
    let mut level = 0usize;
    let mut level_ops = 0u64;
    let mut level_started = Instant::now();
    let mut checking: Option<CpuCheckRunning> = None;
    let shares_cpu = !gpu.ctx.info().kind.is_gpu();
    // CPU-check samples per round, per kind (see `finish_cpu_check`).
    let mut samples = vec![cfg.cpu_samples; report.kinds.len()];
    let mut stretch = super::RateStretch::starting(&totals(report));
    loop {
        if cfg.rounds.is_some_and(|n| round >= n) {
            break;
        }
        if control.stop_requested() {
            report.run.stopped_early = Some(super::STOPPED_ON_REQUEST.into());
            break;
        }
        // Every kind gets at least one verified round, even past the budget (the hard
        // deadline still holds): a run that never checked int32 has not checked it.
        if cfg.rounds.is_none() && control.out_of_time() && round as usize >= report.kinds.len() {
            break;
        }
        if control.stopped() {
            report.run.stopped_early = Some("stopped at the hard deadline".into());
            break;
        }
        // The share of each period spent under load: the power target's, or the shape's.
        let duty = match (&mut hold, cfg.shape) {
            (Some(hold), _) => hold.duty(started.elapsed(), control.power.as_ref()),
            (None, LoadShape::Steady) => 1.0,
            (None, LoadShape::Pulsed { on_ms, off_ms }) => {
                on_ms as f64 / (on_ms + off_ms).max(1) as f64
            }
            (None, LoadShape::Sweep) => {
                let step = budget.map_or(Duration::from_secs(1), |b| b / 10);
                let now_level =
                    ((started.elapsed().as_nanos() / step.as_nanos().max(1)) as usize).min(9);
                if now_level != level {
                    report.levels.push(LevelResult {
                        duty: (level + 1) as f64 / 10.0,
                        gops_per_wall_s: level_ops as f64 * 2.0
                            / level_started.elapsed().as_secs_f64()
                            / 1e9,
                    });
                    level = now_level;
                    level_ops = 0;
                    level_started = Instant::now();
                }
                (level + 1) as f64 / 10.0
            }
        };
        let rest = pacer.rest(duty);
        if !rest.is_zero() {
            std::thread::sleep(rest);
            continue;
        }
        let k = round as usize % report.kinds.len();
        let t = Instant::now();
        let (ops, check) = one_round(
            gpu,
            cfg,
            (iterations[k], samples[k]),
            round,
            &mut DeviceEvents::new(events, device),
            report,
            k,
        )?;
        pacer.worked(t.elapsed());
        level_ops += ops;
        round += 1;
        stretch.emit_if_due(Compute::NAME, &totals(report), 1e-9, events, device);
        // The CPU checks the last round while the device runs this one.
        if let Some(previous) = checking.take() {
            let k = previous.k;
            samples[k] = finish_cpu_check(
                previous,
                shares_cpu,
                cfg,
                &mut DeviceEvents::new(events, device),
                report,
            );
        }
        checking = Some(check.spawn());
    }
    if let Some(previous) = checking.take() {
        finish_cpu_check(
            previous,
            shares_cpu,
            cfg,
            &mut DeviceEvents::new(events, device),
            report,
        );
    }
    if let Some(hold) = &hold {
        report.power = Some(hold.report(started.elapsed()));
    }
    if cfg.shape == LoadShape::Sweep && level_ops > 0 {
        report.levels.push(LevelResult {
            duty: (level + 1) as f64 / 10.0,
            gops_per_wall_s: level_ops as f64 * 2.0 / level_started.elapsed().as_secs_f64() / 1e9,
        });
    }
    Ok(())
}

/// Each kind's running totals for its `Rates` events: its rate's name, its operations (two
/// per multiply-add) and its GPU seconds.
fn totals(report: &ComputeReport) -> Vec<(&'static str, u64, f64)> {
    report
        .kinds
        .iter()
        .map(|k| (k.kind.rate_name(), k.verified_ops * 2, k.gpu_s))
        .collect()
}

/// One pass over every work item of `kind`, `iterations` blocks per chain; returns GPU
/// nanoseconds. The shuffled pass carries the planted fault, if any; `peak` runs the
/// roofline kernel instead.
fn run_pass(
    gpu: &mut Gpu,
    kind: ComputeKind,
    iterations: u32,
    seed: u32,
    shuffled: Option<(u32, u32)>,
    inject: Option<(u32, u32, Option<u32>)>,
    peak: bool,
) -> GpuResult<u64> {
    let (set, (mul, add), flag) = match shuffled {
        Some(s) => (gpu.second_set, s, 1),
        None => (gpu.first_set, (1, 0), 0),
    };
    let (inject_item, inject_xor, inject_step) = inject.unwrap_or((u32::MAX, 0, None));
    // The loop bound and the chain count are specialization constants: compiled in, not
    // read from memory in the loop.
    let pipeline = gpu.ctx.pipeline(
        kind.shader(),
        &[
            WORKGROUP,
            kind.spec(),
            gpu.chains,
            iterations,
            u32::from(inject_step.is_some()),
            u32::from(peak),
            gpu.block,
        ],
    )?;
    let mut rec = gpu.ctx.record(format!(
        "compute pass of {} items x {} chains x {iterations} blocks",
        gpu.items, gpu.chains
    ))?;
    let push = [
        gpu.items,
        flag,
        mul,
        add,
        seed,
        inject_item,
        inject_xor,
        inject_step.unwrap_or(u32::MAX),
    ];
    rec.dispatch(pipeline, set, &push, gpu.items / WORKGROUP);
    Ok(rec.submit_and_wait()?.best_ns())
}

/// A round's CPU check, to run beside the device's next round: the sampled items and
/// what the device computed for them.
struct CpuCheck {
    kind: ComputeKind,
    k: usize,
    round: u32,
    seed: u32,
    iterations: u32,
    chains: u32,
    samples: Vec<(u32, [u32; 4])>,
    /// GPU time of the round's two passes.
    pass_ns: u64,
}

/// A CPU check under way on a thread of its own.
struct CpuCheckRunning {
    k: usize,
    checked: u64,
    pass_ns: u64,
    /// The mismatches, and the time the check took.
    thread: std::thread::JoinHandle<(Vec<Mismatch>, Duration)>,
}

impl CpuCheck {
    fn spawn(self) -> CpuCheckRunning {
        CpuCheckRunning {
            k: self.k,
            checked: self.samples.len() as u64,
            pass_ns: self.pass_ns,
            thread: std::thread::spawn(move || {
                let started = Instant::now();
                let found = self.run();
                (found, started.elapsed())
            }),
        }
    }

    /// The sampled items the CPU computes differently.
    fn run(self) -> Vec<Mismatch> {
        let mut found = Vec::new();
        for (item, gpu_value) in self.samples {
            let (_, cpu_value) = reference(
                self.kind,
                item,
                self.seed,
                self.iterations,
                self.chains,
                None,
            );
            if !agrees(self.kind, cpu_value, gpu_value) {
                found.push(Mismatch {
                    kind: self.kind,
                    round: self.round,
                    item,
                    first_invocation: item,
                    second_invocation: None,
                    second_workgroup: None,
                    expected: cpu_value,
                    actual: gpu_value,
                    check: "cpu_reference".into(),
                });
            }
        }
        found
    }
}

/// Takes a finished CPU check's mismatches into the report. Returns the samples the
/// next checks may take where the device computes on the same CPU (a CPU Vulkan
/// device): at most enough to keep a check within CPU_CHECK_SHARE of its round's pass
/// time, at least one, so that the check does not slow the passes it runs beside. A GPU
/// leaves the host's cores idle: `cfg.cpu_samples` there.
fn finish_cpu_check(
    running: CpuCheckRunning,
    shares_cpu: bool,
    cfg: &ComputeConfig,
    events: &mut DeviceEvents,
    report: &mut ComputeReport,
) -> u32 {
    // A check thread that panicked checked nothing: its samples are not counted.
    let Ok((found, took)) = running.thread.join() else {
        return cfg.cpu_samples;
    };
    let kr = &mut report.kinds[running.k];
    kr.cpu_checked += running.checked;
    kr.cpu_mismatches += found.len() as u64;
    record_mismatches(found, cfg, events, report);
    if !shares_cpu || running.checked == 0 {
        return cfg.cpu_samples;
    }
    let per_sample_ns = took.as_nanos() as f64 / running.checked as f64;
    let fits = CPU_CHECK_SHARE * running.pass_ns as f64 / per_sample_ns.max(1.0);
    (fits as u32).clamp(1, cfg.cpu_samples.max(1))
}

/// The share of a round's pass time the CPU check may take on a CPU device.
const CPU_CHECK_SHARE: f64 = 0.02;

/// Says each mismatch in the events and keeps the first ones as records.
fn record_mismatches(
    found: Vec<Mismatch>,
    cfg: &ComputeConfig,
    events: &mut DeviceEvents,
    report: &mut ComputeReport,
) {
    for m in found {
        events.emit(Event::Note {
            message: format!(
                "compute mismatch ({}): {} item {} expected {:08x?} got {:08x?}",
                m.check,
                m.kind.label(),
                m.item,
                m.expected,
                m.actual
            ),
        });
        if report.records.len() < cfg.record_capacity as usize {
            report.records.push(m);
        }
    }
}

/// Runs both passes and compares them on the device; returns the operations verified
/// (two per multiply-add, both runs) and the CPU check of a sample, to run beside the
/// next round.
fn one_round(
    gpu: &mut Gpu,
    cfg: &ComputeConfig,
    (iterations, cpu_samples): (u32, u32),
    round: u32,
    events: &mut DeviceEvents,
    report: &mut ComputeReport,
    k: usize,
) -> GpuResult<(u64, CpuCheck)> {
    let kind = report.kinds[k].kind;
    gpu.chains = report.kinds[k].chains;
    let items = gpu.items;
    let seed = cfg.seed ^ round.wrapping_mul(0x9E37_79B9);
    let compare = gpu.ctx.pipeline(COMPARE, &[0, kind.spec()])?;
    let t1 = run_pass(gpu, kind, iterations, seed, None, None, false)?;
    let inject = cfg.inject.map(|(item, xor)| (item, xor, cfg.inject_step));
    let t2 = run_pass(
        gpu,
        kind,
        iterations,
        seed,
        Some(shuffle(round, items)),
        inject,
        false,
    )?;
    let capacity = cfg
        .record_capacity
        .saturating_sub(report.records.len() as u32);
    let cpu_checked = if kind == ComputeKind::Fp16 {
        0
    } else {
        cpu_samples
    };
    let samples: Vec<u32> = (0..cpu_checked.min(items))
        .map(|i| hash(seed ^ i.wrapping_mul(0x85EB_CA6B)) & (items - 1))
        .collect();
    let samples_at = (RECORDS_AT + cfg.record_capacity as usize * RECORD_WORDS) as u64 * 4;
    let mut rec = gpu
        .ctx
        .record(format!("compute comparison of round {round}"))?;
    // The counters live on the device; zero them there, before the comparison adds to them.
    rec.fill(&gpu.results, 0, (RECORDS_AT * 4) as u64, 0);
    rec.barrier();
    rec.dispatch(
        compare,
        gpu.first_set,
        &[items, capacity],
        items.div_ceil(64),
    );
    // The copy out must wait for the comparison's writes (a real GPU overlaps commands).
    rec.barrier();
    rec.copy(&gpu.results, 0, &gpu.results_out, 0, samples_at);
    // The CPU-check samples (each item's chain values, its second uvec4) go straight to
    // the host's copy, past the records: the two copies write disjoint ranges.
    for (n, &item) in samples.iter().enumerate() {
        rec.copy(
            &gpu.first,
            u64::from(item) * ITEM_BYTES + 16,
            &gpu.results_out,
            samples_at + n as u64 * 16,
            16,
        );
    }
    rec.submit_and_wait()?;
    let words = gpu
        .results_out
        .words()
        .ok_or_else(|| GpuError::Unsupported("compute results readback is not mapped".into()))?;
    let mismatches = u64::from(words[0]);
    let nonfinite = u64::from(words[1]);
    let kept = (words[2] as usize).min(capacity as usize);
    let mut found = Vec::new();
    for s in 0..kept {
        let at = RECORDS_AT + s * RECORD_WORDS;
        let item = words[at];
        let second = shuffled_invocation(item, round, items);
        found.push(Mismatch {
            kind,
            round,
            item,
            first_invocation: item,
            second_invocation: Some(second),
            second_workgroup: Some(second / WORKGROUP),
            expected: [words[at + 1], words[at + 2], words[at + 3], words[at + 4]],
            actual: [words[at + 5], words[at + 6], words[at + 7], words[at + 8]],
            check: "redundant_run".into(),
        });
    }
    let check = CpuCheck {
        kind,
        k,
        round,
        seed,
        iterations,
        chains: gpu.chains,
        pass_ns: t1 + t2,
        samples: samples
            .iter()
            .enumerate()
            .map(|(n, &item)| {
                let at = samples_at as usize / 4 + n * 4;
                (
                    item,
                    [words[at], words[at + 1], words[at + 2], words[at + 3]],
                )
            })
            .collect(),
    };
    // Both runs of every item were compared: both count as verified.
    let ops = 2 * pass_multiply_adds(items, gpu.chains, gpu.block, iterations);
    let kr = &mut report.kinds[k];
    kr.rounds += 1;
    kr.verified_ops += ops;
    kr.mismatches += mismatches;
    kr.nonfinite += nonfinite;
    kr.gpu_s += (t1 + t2) as f64 / 1e9;
    kr.best_gops = kr.best_gops.max(ops as f64 * 2.0 / (t1 + t2).max(1) as f64);
    record_mismatches(found, cfg, events, report);
    Ok((ops * 2, check))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shuffle_is_a_bijection_and_inverts() {
        let items = 1 << 10;
        for round in [0, 1, 7] {
            let (mul, add) = shuffle(round, items);
            let mut seen = vec![false; items as usize];
            for inv in 0..items {
                let item = (inv.wrapping_mul(mul).wrapping_add(add)) & (items - 1);
                assert!(!seen[item as usize]);
                seen[item as usize] = true;
                assert_eq!(shuffled_invocation(item, round, items), inv);
            }
        }
    }

    #[test]
    fn fp32_agreement_tolerates_rounding_but_not_corruption() {
        let (_, v) = reference(ComputeKind::Fp32, 5, 1, 64, DEFAULT_CHAINS, None);
        assert!(agrees(ComputeKind::Fp32, v, v));
        let mut nudged = v;
        nudged[0] += 1; // one ulp
        assert!(agrees(ComputeKind::Fp32, v, nudged));
        let mut flipped = v;
        flipped[2] ^= 1 << 27;
        assert!(!agrees(ComputeKind::Fp32, v, flipped));
        let (_, i) = reference(ComputeKind::Int32, 5, 1, 64, DEFAULT_CHAINS, None);
        let mut j = i;
        j[3] ^= 1;
        assert!(!agrees(ComputeKind::Int32, i, j));
    }

    #[test]
    fn a_fault_the_fp32_chain_forgets_still_reaches_the_fold() {
        // 4096 blocks of UNROLL contracting steps after the fault: x forgets a flip of a
        // low mantissa bit long before the end, but the sum of every state keeps it.
        let iterations = 8192;
        let fault = ChainFault {
            after_blocks: iterations / 2,
            xor: 1 << 12,
        };
        let (clean_fold, clean_values) = reference(ComputeKind::Fp32, 9, 3, iterations, 2, None);
        let (fold, values) = reference(ComputeKind::Fp32, 9, 3, iterations, 2, Some(fault));
        assert_eq!(values, clean_values, "the chain's value forgot the fault");
        assert_ne!(fold, clean_fold, "the fold kept it");
        // Only the faulted lane's fold word moves: the others are untouched.
        assert_eq!(
            (0..4).filter(|&c| fold[c] != clean_fold[c]).count(),
            1,
            "{fold:08x?} vs {clean_fold:08x?}"
        );
        // int32 chains are bijections: the value itself keeps every fault.
        let (_, int_clean) = reference(ComputeKind::Int32, 9, 3, 64, 2, None);
        let (_, int_faulted) = reference(
            ComputeKind::Int32,
            9,
            3,
            64,
            2,
            Some(ChainFault {
                after_blocks: 1,
                xor: 1,
            }),
        );
        assert_ne!(int_clean, int_faulted);
    }
}
