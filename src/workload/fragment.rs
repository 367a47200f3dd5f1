//! Allocator torture: random size classes (power-law, 4 KiB up), random free order, and
//! large contiguous requests in between, through the allocator and through raw
//! `vkAllocateMemory`. It watches for requests refused while enough memory is free
//! (fragmentation) and for usage that does not return to its baseline after every free
//! (a leak), and always leaves the device as it found it.
//!
//! The test runs within a memory cap of its own: a request the allocator can only serve
//! by growing past the cap counts as refused. That makes fragmentation visible on devices
//! whose driver would rather over-commit than fail.

use std::time::Instant;

use rand::{Rng, RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use super::settings::{SettingError, SettingsTable};
use super::{
    Envelope, FindingKind, Kind, KindTest, PlanDetail, Report, RunControl, Workload, WorkloadError,
    WorkloadFinding, WorkloadStatus, join_findings, record_device_error,
};
use crate::evidence::{Event, EventSink};
use crate::finding::{Confidence, Finding, FindingCode, Severity, finding};
use crate::gpu::DeviceInfo;
use crate::gpu::{BufferKind, DeviceContext, GpuBuffer, GpuError, RawMemory};
use crate::limits::bounds;
use crate::units::{KIB, MIB};

/// Settings of the fragmentation torture.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FragmentConfig {
    /// Rounds to run when there is no time budget.
    pub rounds: Option<u32>,
    /// The test's memory cap (default: 512 MiB on CPU devices, else a quarter of the free
    /// memory up to 1 GiB); a multiple of 256 MiB.
    pub cap_bytes: Option<u64>,
    /// Allocate-or-free operations per round.
    pub ops_per_round: u32,
    /// Seed of sizes and order.
    pub seed: u64,
    /// Keep one allocation alive at the end of every round (detector tests).
    pub plant_leak: bool,
    /// Fill the cap with small blocks, free every other one, then ask for a large one
    /// (detector tests).
    pub plant_fragmentation: bool,
}

impl Default for FragmentConfig {
    fn default() -> Self {
        FragmentConfig {
            rounds: None,
            cap_bytes: None,
            ops_per_round: 300,
            seed: 0x6B69_6C6E,
            plant_leak: false,
            plant_fragmentation: false,
        }
    }
}

/// Latency percentiles of allocations, in microseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Latency {
    /// Allocations measured.
    pub count: usize,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Slowest.
    pub max_us: f64,
}

fn latency(mut samples: Vec<f64>) -> Latency {
    if samples.is_empty() {
        return Latency::default();
    }
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    Latency {
        count: samples.len(),
        p50_us: at(0.5),
        p90_us: at(0.9),
        p99_us: at(0.99),
        max_us: at(1.0),
    }
}

/// A request refused while enough memory was free.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Refusal {
    /// Round.
    pub round: u32,
    /// Bytes asked for.
    pub request_bytes: u64,
    /// Bytes free under the cap when it was refused.
    pub free_bytes: u64,
    /// The largest free span in the allocator's blocks.
    pub largest_free_span_bytes: u64,
}

/// Usage after every allocation of a round was freed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Residual {
    /// Round.
    pub round: u32,
    /// Bytes the allocator still reports allocated.
    pub allocator_bytes: u64,
    /// Raw allocations still alive.
    pub raw_allocations: usize,
    /// The driver's usage of the heap (`VK_EXT_memory_budget`), when it reports it.
    pub usage_bytes: Option<u64>,
}

/// Everything the torture found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FragmentReport {
    /// The memory cap.
    pub cap_bytes: u64,
    /// Rounds completed.
    pub rounds: u32,
    /// Allocations through the allocator.
    pub allocator_allocations: u64,
    /// Allocations through `vkAllocateMemory`.
    pub raw_allocations: u64,
    /// Allocator latency (over a bounded, unbiased sample of the allocations).
    pub allocator_latency: Latency,
    /// Raw allocation latency.
    pub raw_latency: Latency,
    /// Large contiguous requests tried.
    pub large_requests: u64,
    /// Requests refused while enough memory was free.
    pub refused_while_free: Vec<Refusal>,
    /// Usage at the start.
    pub baseline: Residual,
    /// Usage after each round's frees (the most recent rounds).
    pub residuals: Vec<Residual>,
    /// Usage after the workload released everything.
    pub end: Residual,
    /// True when the end state matches the baseline.
    pub returned_to_baseline: bool,
    /// `alloc_fail_fragmented`, `leak`: evidence for the verdict.
    pub findings: Vec<FragmentFinding>,
    /// How its run ended and how long it took.
    #[serde(flatten)]
    pub run: Envelope,
}

impl Report for FragmentReport {
    super::envelope_in!(run);

    /// A software fault on findings: the allocator's, not the card's.
    fn found(&self) -> Option<WorkloadStatus> {
        (!self.findings.is_empty()).then_some(WorkloadStatus::SoftwareFault)
    }

    fn began(&self) -> bool {
        self.rounds > 0
    }

    /// One sentence for people.
    fn headline(&self) -> String {
        if self.findings.is_empty() {
            format!(
                "{}, {}, no refusal with memory free, usage back to baseline (allocator p99 {:.0} us)",
                crate::text::count(self.rounds, "round"),
                crate::text::count(
                    self.allocator_allocations + self.raw_allocations,
                    "allocation"
                ),
                self.allocator_latency.p99_us
            )
        } else {
            join_findings(&self.findings)
        }
    }
}

/// The `fragment` workload.
pub struct Fragment;

impl Kind for Fragment {
    const NAME: &'static str = "fragment";
    const DEFAULT_WEIGHT: u32 = 1;
    type Settings = FragmentConfig;
    type Result = FragmentReport;

    fn from_profile(table: &mut dyn SettingsTable) -> Result<FragmentConfig, SettingError> {
        Ok(FragmentConfig {
            rounds: table.count("rounds", &bounds::ROUNDS)?,
            ..FragmentConfig::default()
        })
    }

    fn build(settings: &FragmentConfig) -> Vec<Box<dyn Workload + Send>> {
        vec![Box::new(FragmentTest {
            config: settings.clone(),
        })]
    }

    fn describe(_settings: &FragmentConfig, _device: &DeviceInfo) -> Result<PlanDetail, String> {
        Ok(PlanDetail {
            detail: "allocate and free under a memory cap; fragmentation and leaks".into(),
            ..PlanDetail::default()
        })
    }

    fn judge(result: &FragmentReport) -> Vec<Finding> {
        let mut out = Vec::new();
        found(result, &mut out);
        out
    }
}

/// What the torture can find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FragmentFindingKind {
    /// A large request refused while enough memory was free under the cap
    /// (`alloc_fail_fragmented`).
    AllocFailFragmented,
    /// Memory not given back after every free (`leak`).
    Leak,
}

impl FindingKind for FragmentFindingKind {
    fn name(self) -> &'static str {
        match self {
            FragmentFindingKind::AllocFailFragmented => "alloc_fail_fragmented",
            FragmentFindingKind::Leak => "leak",
        }
    }

    /// Anything but a refused request is a leak, as the verdict has always read them.
    fn of(message: &str) -> FragmentFindingKind {
        if message.starts_with("alloc_fail_fragmented") {
            FragmentFindingKind::AllocFailFragmented
        } else {
            FragmentFindingKind::Leak
        }
    }
}

/// One finding of the torture.
pub type FragmentFinding = WorkloadFinding<FragmentFindingKind>;

crate::evidence! {
    /// Requests refused with memory free, and memory not given back: the allocator or the
    /// driver, not the card.
    /// The evidence of the allocator's findings: the requests refused while more was free,
    /// and the last rounds' residual memory.
    struct Refusals<'a> {
        /// driver, not the card.
        /// The evidence of the allocator's findings: the requests refused while more was free,
        /// and the last rounds' residual memory.
        refusals: &'a [Refusal] => "Refusal",
        residuals: Vec<&'a Residual> => "Left after the round",
    }
}

fn found(f: &FragmentReport, out: &mut Vec<Finding>) {
    for found in &f.findings {
        let code = match found.kind {
            FragmentFindingKind::AllocFailFragmented => FindingCode::AllocFailFragmented,
            FragmentFindingKind::Leak => FindingCode::MemoryLeak,
        };
        out.push(finding(
            code,
            Severity::Major,
            Confidence::High,
            found.message.clone(),
            crate::finding::evidence(&Refusals {
                refusals: &f.refused_while_free,
                residuals: f.residuals.iter().rev().take(4).collect(),
            }),
            "the card is fine: look at the driver or the allocator",
        ));
    }
}

/// The torture as a workload.
pub struct FragmentTest {
    /// Its settings.
    pub config: FragmentConfig,
}

fn residual(ctx: &DeviceContext, round: u32, raw_alive: usize) -> Residual {
    Residual {
        round,
        allocator_bytes: ctx.allocator_stats().allocated_bytes,
        raw_allocations: raw_alive,
        usage_bytes: ctx.device_local_usage(),
    }
}

/// Power-law sizes: most small, a few up to `max`, in 4 KiB steps.
fn size(rng: &mut impl Rng, max: u64) -> u64 {
    let u: f64 = rng.random();
    let span = (max as f64 / (4 * KIB) as f64).ln();
    let bytes = (4 * KIB) as f64 * (span * u.powi(3)).exp();
    ((bytes as u64) / (4 * KIB)).max(1) * 4 * KIB
}

struct State {
    buffers: Vec<GpuBuffer>,
    raw: Vec<RawMemory>,
    live_bytes: u64,
    allocator_lat: Samples,
    raw_lat: Samples,
}

/// Latency samples, bounded: past the limit each new sample replaces a random kept one
/// (reservoir sampling), so hours of churn keep an unbiased sample in bounded memory.
#[derive(Default)]
struct Samples {
    kept: Vec<f64>,
    seen: u64,
}

const MAX_SAMPLES: usize = 100_000;
/// Rounds of a torture given no time budget and no rounds.
pub const UNBUDGETED_ROUNDS: u32 = 20;
/// Rounds whose residual usage is kept (the most recent).
const MAX_RESIDUALS: usize = 256;

impl Samples {
    fn push(&mut self, value: f64) {
        self.seen += 1;
        if self.kept.len() < MAX_SAMPLES {
            self.kept.push(value);
        } else {
            // A cheap deterministic index spread over the reservoir.
            let slot = (self.seen.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) % self.seen;
            if (slot as usize) < MAX_SAMPLES {
                self.kept[slot as usize] = value;
            }
        }
    }
}

impl KindTest for FragmentTest {
    type Kind = Fragment;

    /// Runs the torture and returns its typed report.
    fn run_report(
        &mut self,
        ctx: &mut DeviceContext,
        control: &RunControl,
        events: &mut dyn EventSink,
    ) -> Result<FragmentReport, WorkloadError> {
        let run_started = std::time::Instant::now();
        let cfg = self.config.clone();
        let block = 256 * MIB;
        let cap = match cfg.cap_bytes {
            Some(c) => c,
            None if !ctx.info().kind.is_gpu() => 2 * block,
            None => {
                (ctx.info().device_local_free_bytes() / 4).clamp(block, 4 * block) / block * block
            }
        };
        if cap < block || cap % block != 0 {
            return Err(WorkloadError::Config(format!(
                "the fragmentation cap must be a multiple of 256 MiB, not {cap} bytes"
            )));
        }
        if cfg.ops_per_round == 0 {
            return Err(WorkloadError::Config(
                "the fragmentation test needs at least one operation per round".into(),
            ));
        }
        let device = Some(ctx.info().index);
        events.emit(
            device,
            Event::WorkloadStart {
                workload: "fragment".into(),
                settings: serde_json::json!({ "config": &cfg, "cap_bytes": cap }),
            },
        );
        let baseline = residual(ctx, 0, 0);
        let mut report = FragmentReport {
            cap_bytes: cap,
            rounds: 0,
            allocator_allocations: 0,
            raw_allocations: 0,
            allocator_latency: Latency::default(),
            raw_latency: Latency::default(),
            large_requests: 0,
            refused_while_free: Vec::new(),
            baseline: baseline.clone(),
            residuals: Vec::new(),
            end: baseline.clone(),
            returned_to_baseline: true,
            findings: Vec::new(),
            run: Envelope::default(),
        };
        // The torture has an allocator of its own: its blocks are all that the cap and the
        // leak checks see (not a readback block another workload left), and releasing it
        // gives back the empty block gpu-allocator keeps per memory type, so the driver's
        // usage afterwards shows what was really released.
        let mut round = 0u32;
        let tortured =
            ctx.with_own_allocator(|ctx| torture(ctx, &cfg, cap, control, &mut report, &mut round));
        match tortured {
            Ok(Ok(())) => {}
            Ok(Err(e)) | Err(e) => {
                report.run.device_error = Some(record_device_error(events, device, &e));
            }
        }
        report.end = residual(ctx, round, 0);
        let tolerance = cap / 100;
        report.returned_to_baseline = report.end.allocator_bytes <= report.baseline.allocator_bytes
            && match (report.end.usage_bytes, report.baseline.usage_bytes) {
                (Some(end), Some(base)) => end <= base + tolerance,
                _ => true,
            };
        if !report.returned_to_baseline {
            report.findings.push(FragmentFinding::new(
                FragmentFindingKind::Leak,
                format_args!(
                    "usage did not return to its baseline after the workload released everything ({} then {})",
                    shown_bytes(report.baseline.usage_bytes),
                    shown_bytes(report.end.usage_bytes)
                ),
            ));
        }
        for f in &report.findings {
            events.emit(
                device,
                Event::Note {
                    message: format!("fragment finding: {f}"),
                },
            );
        }
        report.run.wall_s = run_started.elapsed().as_secs_f64();
        Ok(report)
    }
}

/// The rounds of churn, each ending with everything freed; then the leak judgement on
/// what stayed allocated, and everything released.
fn torture(
    ctx: &mut DeviceContext,
    cfg: &FragmentConfig,
    cap: u64,
    control: &RunControl,
    report: &mut FragmentReport,
    round: &mut u32,
) -> Result<(), GpuError> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(cfg.seed);
    let mut leaked: Vec<GpuBuffer> = Vec::new();
    let mut st = State {
        buffers: Vec::new(),
        raw: Vec::new(),
        live_bytes: 0,
        allocator_lat: Samples::default(),
        raw_lat: Samples::default(),
    };
    // With no time budget (a pass count alone), a fixed number of rounds: the torture has
    // no passes of its own and must not run until someone stops it.
    let rounds = cfg
        .rounds
        .or(control.deadline.is_none().then_some(UNBUDGETED_ROUNDS));
    let outcome: Result<(), GpuError> = (|| {
        loop {
            if rounds.is_some_and(|n| *round >= n) {
                break;
            }
            if control.stop_requested() {
                report.run.stopped_early = Some(super::STOPPED_ON_REQUEST.into());
                break;
            }
            if rounds.is_none() && *round > 0 && control.out_of_time() {
                break;
            }
            if control.stopped() {
                report.run.stopped_early = Some("stopped at the hard deadline".into());
                break;
            }
            if cfg.plant_fragmentation && *round == 0 {
                fragmenting_pattern(ctx, &mut st, cap, *round, report)?;
            } else {
                churn(
                    ctx,
                    &mut st,
                    &mut rng,
                    cap,
                    cfg.ops_per_round,
                    *round,
                    report,
                )?;
            }
            if cfg.plant_leak {
                leaked.push(ctx.buffer(
                    BufferKind::DeviceShared,
                    cap / 64,
                    "kiln fragment planted leak",
                )?);
            }
            st.buffers.clear();
            st.raw.clear();
            st.live_bytes = 0;
            let r = residual(ctx, *round, st.raw.len());
            if report.residuals.len() == MAX_RESIDUALS {
                report.residuals.remove(0);
            }
            report.residuals.push(r);
            *round += 1;
            report.rounds = *round;
        }
        Ok(())
    })();
    report.allocator_allocations = st.allocator_lat.seen;
    report.raw_allocations = st.raw_lat.seen;
    report.allocator_latency = latency(std::mem::take(&mut st.allocator_lat.kept));
    report.raw_latency = latency(std::mem::take(&mut st.raw_lat.kept));
    judge_leak(report);
    // Leave the device as it was found.
    drop(st);
    leaked.clear();
    outcome
}

/// Random allocations and frees with a large request every 50 operations.
fn churn(
    ctx: &mut DeviceContext,
    st: &mut State,
    rng: &mut impl Rng,
    cap: u64,
    ops: u32,
    round: u32,
    report: &mut FragmentReport,
) -> Result<(), GpuError> {
    // Keep live memory at a quarter of the cap and requests at a sixteenth: a healthy
    // allocator serves every one of them without growing past the cap.
    let max_size = cap / 16;
    for op in 0..ops {
        if op % 50 == 49 {
            large_request(ctx, st, cap, max_size, round, report)?;
            continue;
        }
        let allocate = rng.random_bool(0.6) || (st.buffers.is_empty() && st.raw.is_empty());
        if allocate {
            let bytes = size(rng, max_size);
            if st.live_bytes + bytes > cap / 4 {
                continue;
            }
            let t = Instant::now();
            if rng.random_bool(0.7) {
                let b = ctx.buffer(BufferKind::DeviceShared, bytes, "kiln fragment churn")?;
                st.allocator_lat.push(t.elapsed().as_secs_f64() * 1e6);
                st.buffers.push(b);
            } else {
                let m = ctx.raw_memory(bytes)?;
                st.raw_lat.push(t.elapsed().as_secs_f64() * 1e6);
                st.raw.push(m);
            }
            st.live_bytes += bytes;
        } else if rng.random_bool(0.7) && !st.buffers.is_empty() {
            let i = rng.random_range(0..st.buffers.len());
            st.live_bytes -= st.buffers.swap_remove(i).size_bytes();
        } else if !st.raw.is_empty() {
            let i = rng.random_range(0..st.raw.len());
            st.live_bytes -= st.raw.swap_remove(i).size_bytes();
        }
    }
    Ok(())
}

/// Asks the allocator for `bytes` in one piece; refused if serving it grows the
/// allocator past the cap while the cap still has room for it.
fn large_request(
    ctx: &mut DeviceContext,
    st: &mut State,
    cap: u64,
    bytes: u64,
    round: u32,
    report: &mut FragmentReport,
) -> Result<(), GpuError> {
    report.large_requests += 1;
    let before = ctx.allocator_stats();
    let free = cap.saturating_sub(before.allocated_bytes);
    let t = Instant::now();
    let refused = match ctx.buffer(
        BufferKind::DeviceShared,
        bytes,
        "kiln fragment large request",
    ) {
        Ok(b) => {
            st.allocator_lat.push(t.elapsed().as_secs_f64() * 1e6);
            let grew_past_cap = ctx.allocator_stats().capacity_bytes > cap;
            drop(b);
            grew_past_cap
        }
        Err(GpuError::OutOfMemory { .. }) => true,
        Err(e) => return Err(e),
    };
    if refused && free >= bytes {
        report.refused_while_free.push(Refusal {
            round,
            request_bytes: bytes,
            free_bytes: free,
            largest_free_span_bytes: before.largest_free_span(),
        });
        if !report
            .findings
            .iter()
            .any(|f| f.kind == FragmentFindingKind::AllocFailFragmented)
        {
            report.findings.push(FragmentFinding::new(
                FragmentFindingKind::AllocFailFragmented,
                format_args!(
                    "a {bytes}-byte request was refused with {free} bytes free under the cap (largest free span {} bytes)",
                    before.largest_free_span()
                ),
            ));
        }
    }
    Ok(())
}

/// Fills the cap with 64 KiB blocks, frees every other one, then asks for a large block:
/// half the memory is free, but in pieces too small to serve it.
fn fragmenting_pattern(
    ctx: &mut DeviceContext,
    st: &mut State,
    cap: u64,
    round: u32,
    report: &mut FragmentReport,
) -> Result<(), GpuError> {
    let small = 64 * KIB;
    while st.live_bytes + 2 * small <= cap {
        let t = Instant::now();
        st.buffers.push(ctx.buffer(
            BufferKind::DeviceShared,
            small,
            "kiln fragment planted pattern",
        )?);
        st.allocator_lat.push(t.elapsed().as_secs_f64() * 1e6);
        st.live_bytes += small;
    }
    let mut keep = Vec::with_capacity(st.buffers.len() / 2);
    for (i, b) in std::mem::take(&mut st.buffers).into_iter().enumerate() {
        if i % 2 == 0 {
            keep.push(b);
        } else {
            st.live_bytes -= small;
        }
    }
    st.buffers = keep;
    large_request(ctx, st, cap, cap / 16, round, report)
}

/// A leak: the allocator still reports our allocations after every free, growing round by
/// round; or the driver's usage grows round by round beyond the allocator's blocks.
fn judge_leak(report: &mut FragmentReport) {
    // The residuals are of the torture's own allocator, which starts empty.
    let residual: Vec<u64> = report.residuals.iter().map(|r| r.allocator_bytes).collect();
    if let Some(&last) = residual.last()
        && last > 0
    {
        report.findings.push(FragmentFinding::new(
            FragmentFindingKind::Leak,
            format_args!(
                "{last} bytes stay allocated after every free, over {} rounds",
                residual.len()
            ),
        ));
    }
    let usage: Vec<u64> = report
        .residuals
        .iter()
        .filter_map(|r| r.usage_bytes)
        .collect();
    if let (Some(&first), Some(&last)) = (usage.first(), usage.last())
        && usage.len() >= 3
        && usage.windows(2).all(|w| w[1] >= w[0])
        && last > first + report.cap_bytes / 100
    {
        report.findings.push(FragmentFinding::new(
            FragmentFindingKind::Leak,
            format_args!(
                "the driver's usage grew from {first} to {last} bytes across rounds with nothing allocated"
            ),
        ));
    }
}

/// A byte count that may be unknown, for people.
fn shown_bytes(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "unknown".into(), crate::units::format_bytes)
}

crate::said_record!(Refusal {
    round => "Round",
    request_bytes => "Request" in crate::finding::Unit::Bytes,
    free_bytes => "Free" in crate::finding::Unit::Bytes,
    largest_free_span_bytes => "Largest free span" in crate::finding::Unit::Bytes,
});

crate::said_record!(Residual {
    round => "Round",
    allocator_bytes => "Held by the allocator" in crate::finding::Unit::Bytes,
    raw_allocations => "Raw allocations",
    usage_bytes => "Usage" in crate::finding::Unit::Bytes,
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_a_power_law_in_4_kib_steps() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let sizes: Vec<u64> = (0..2000).map(|_| size(&mut rng, 64 * MIB)).collect();
        assert!(
            sizes
                .iter()
                .all(|s| s % (4 * KIB) == 0 && *s >= 4 * KIB && *s <= 64 * MIB)
        );
        let small = sizes.iter().filter(|&&s| s < MIB).count();
        assert!(small > sizes.len() / 2, "mostly small: {small}");
        assert!(sizes.iter().any(|&s| s > 16 * MIB), "a few large");
    }

    #[test]
    fn findings_of_older_runs_read_back_from_their_sentences() {
        // Before findings were typed, the evidence carried each one as its sentence alone;
        // anything but a refused request was read as a leak.
        let old = serde_json::json!([
            "alloc_fail_fragmented: a 33554432-byte request was refused with 268435456 bytes free under the cap (largest free span 65536 bytes)",
            "leak: 4096 bytes stay allocated after every free, over 3 rounds",
            "usage did not return to its baseline",
        ]);
        let findings: Vec<FragmentFinding> = serde_json::from_value(old.clone()).unwrap();
        let kinds: Vec<FragmentFindingKind> = findings.iter().map(|f| f.kind).collect();
        assert_eq!(
            kinds,
            [
                FragmentFindingKind::AllocFailFragmented,
                FragmentFindingKind::Leak,
                FragmentFindingKind::Leak
            ]
        );
        assert_eq!(
            serde_json::to_value(&findings).unwrap(),
            old,
            "written as read"
        );
        let new = FragmentFinding::new(FragmentFindingKind::Leak, "1 byte stays");
        assert_eq!(serde_json::to_value(&new).unwrap(), "leak: 1 byte stays");
    }

    #[test]
    fn percentiles_are_ordered() {
        let l = latency((1..=100).map(f64::from).collect());
        assert_eq!((l.count, l.p50_us, l.max_us), (100, 51.0, 100.0));
        assert!(l.p90_us <= l.p99_us);
    }
}
