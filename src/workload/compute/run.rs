//! The compute workload on a device: its buffers and passes, the loop that paces them to
//! the load shape and the budget, and the CPU check run beside them.

use super::*;

pub(super) struct Gpu<'c> {
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
pub(super) fn blocks_for(blocks: u32, took_ns: f64, target_ns: f64) -> u32 {
    whole_blocks((f64::from(blocks) * target_ns / took_ns.max(1.0)) as u64)
}

/// `blocks` within 16..=65536 and a whole multiple of 16: a few pipelines per kind, not
/// one per probe.
pub(super) fn whole_blocks(blocks: u64) -> u32 {
    blocks.clamp(16, 1 << 16) as u32 / 16 * 16
}

/// Multiply-adds in one pass: every lane of every chain of every work item, `block` per
/// chain in each of `iterations` blocks.
pub(super) fn pass_multiply_adds(items: u32, chains: u32, block: u32, iterations: u32) -> u64 {
    u64::from(items) * u64::from(chains) * LANES * u64::from(block) * u64::from(iterations)
}

/// Work items per pass unless the settings say otherwise: enough to fill a GPU many
/// times over, and few on a CPU device, whose lanes are the CPU's.
pub(super) fn default_items(device: &DeviceInfo) -> u32 {
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

impl KindTest for ComputeTest {
    type Kind = Compute;

    /// Runs the test and returns its typed report.
    fn run_report(
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
            pauses: None,
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
pub(super) fn drive(
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
    let cadence = Cadence {
        shape: cfg.shape,
        power_target: cfg.power_target,
        rounds: cfg.rounds,
        kinds: report.kinds.len(),
    };
    let rounds = ComputeRounds {
        shares_cpu: !gpu.ctx.info().kind.is_gpu(),
        samples: vec![cfg.cpu_samples; report.kinds.len()],
        gpu,
        cfg,
        report,
        device,
        iterations,
        done: None,
        checking: None,
    };
    crate::workload::rounds::drive(rounds, &cadence, control, events, device)
}

/// The compute test's rounds in the shared loop: both passes compared on the device, and
/// the CPU check of a sample run beside the next round.
struct ComputeRounds<'a, 'c> {
    gpu: &'a mut Gpu<'c>,
    cfg: &'a ComputeConfig,
    report: &'a mut ComputeReport,
    device: Option<usize>,
    /// Blocks per chain, per kind (calibrated).
    iterations: Vec<u32>,
    /// CPU-check samples per round, per kind (see `finish_cpu_check`).
    samples: Vec<u32>,
    /// The device computes on the host's CPU (a CPU Vulkan device).
    shares_cpu: bool,
    /// The CPU check of the round just run, to start beside the next.
    done: Option<CpuCheck>,
    /// The CPU check running beside this round.
    checking: Option<CpuCheckRunning>,
}

impl Rounds for ComputeRounds<'_, '_> {
    const NAME: &'static str = Compute::NAME;
    const RATE_SCALE: f64 = 1e-9;

    fn totals(&self) -> Vec<(&'static str, u64, f64)> {
        totals(self.report)
    }

    fn round(
        &mut self,
        round: u32,
        k: usize,
        at: LoadPoint,
        events: &mut dyn EventSink,
    ) -> GpuResult<Worked> {
        let inject = self.cfg.inject_when.is_none_or(|w| w.applies(&at));
        let faults_before = self.report.faults();
        let (ops, check) = one_round(
            self.gpu,
            self.cfg,
            (self.iterations[k], self.samples[k]),
            (round, at, inject),
            &mut DeviceEvents::new(events, self.device),
            self.report,
            k,
        )?;
        self.done = Some(check);
        Ok(Worked {
            ops,
            faults: self.report.faults() - faults_before,
        })
    }

    fn between(
        mut self,
        _took: Duration,
        _hold: Option<&mut PowerController>,
        events: &mut dyn EventSink,
    ) -> GpuResult<Self> {
        // The CPU checks the last round while the device runs this one.
        if let Some(previous) = self.checking.take() {
            let k = previous.k;
            self.samples[k] = finish_cpu_check(
                previous,
                self.shares_cpu,
                self.cfg,
                &mut DeviceEvents::new(events, self.device),
                self.report,
            );
        }
        self.checking = self.done.take().map(CpuCheck::spawn);
        Ok(self)
    }

    fn finish(&mut self, events: &mut dyn EventSink) {
        if let Some(previous) = self.checking.take() {
            finish_cpu_check(
                previous,
                self.shares_cpu,
                self.cfg,
                &mut DeviceEvents::new(events, self.device),
                self.report,
            );
        }
    }

    fn ran(&mut self, ran: Ran) {
        self.report.run.stopped_early = ran.stopped_early;
        self.report.power = ran.power;
        self.report.levels = ran.levels;
        self.report.pauses = ran.pauses;
    }
}

/// One pass over every work item of `kind`, `iterations` blocks per chain; returns GPU
/// nanoseconds. The shuffled pass carries the planted fault, if any; `peak` runs the
/// roofline kernel instead.
pub(super) fn run_pass(
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
pub(super) struct CpuCheck {
    kind: ComputeKind,
    k: usize,
    round: u32,
    seed: u32,
    iterations: u32,
    chains: u32,
    samples: Vec<(u32, [u32; 4])>,
    /// GPU time of the round's two passes.
    pass_ns: u64,
    /// Where the load stood.
    at: LoadPoint,
}

/// A CPU check under way on a thread of its own.
pub(super) struct CpuCheckRunning {
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
                    at: Some(self.at),
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
pub(super) fn finish_cpu_check(
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
pub(super) const CPU_CHECK_SHARE: f64 = 0.02;

/// Says each mismatch in the events and keeps the first ones as records.
pub(super) fn record_mismatches(
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
pub(super) fn one_round(
    gpu: &mut Gpu,
    cfg: &ComputeConfig,
    (iterations, cpu_samples): (u32, u32),
    (round, point, inject): (u32, LoadPoint, bool),
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
    let inject = cfg
        .inject
        .filter(|_| inject)
        .map(|(item, xor)| (item, xor, cfg.inject_step));
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
            at: Some(point),
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
        at: point,
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
