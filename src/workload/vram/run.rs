//! The VRAM test on a device: sizing the memory to test, the passes of each algorithm,
//! and every verifying sweep's errors recorded and retested.

use super::*;

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
    // Where the OS keeps a budget of its own (Windows' DXGI), the test fits within it too:
    // beyond it, WDDM would place "device-local" memory in system RAM.
    if let Some(os) = info.luid.and_then(crate::platform::video_memory::query) {
        let os_free = os.local_budget_bytes.saturating_sub(os.local_usage_bytes);
        if os_free < free {
            free = os_free;
            free_source = "the OS's video-memory budget (DXGI), below the driver's";
        }
    }
    // What kiln's own region beside this test holds was free when the budget was read.
    if cfg.beside_bytes > 0 {
        free = free.saturating_sub(cfg.beside_bytes);
        free_source = "the memory budget, less the resident region kiln holds beside this test";
    }
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
    let mut max_buffer = info.limits.largest_storage_buffer_bytes();
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
        placed_in_system_bytes: None,
    })
}

/// Running totals while the test goes.
pub(super) struct Tally {
    errors_total: u64,
    records: Vec<ErrorRecord>,
    histograms: Histograms,
    retests: Vec<RetestResult>,
    retested: HashSet<u64>,
    algorithms: Vec<AlgorithmRun>,
    verified_once: bool,
}

impl KindTest for VramTest {
    type Kind = Vram;

    /// Runs the test and returns its typed report.
    fn run_report(
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
        let luid = ctx.info().luid;
        let os_before = luid.and_then(crate::platform::video_memory::query);
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
        // What the OS did with it: in the card, or (part) in system memory.
        if let (Some(before), Some(after)) = (
            os_before,
            luid.and_then(crate::platform::video_memory::query),
        ) {
            sizing.placed_in_system_bytes = crate::platform::video_memory::placed_in_system(
                before,
                after,
                sizing.allocated_bytes,
            );
        }
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

pub(super) fn throughput(engine: &Engine) -> Throughput {
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
pub(super) fn run_algorithm(
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
pub(super) struct StepAt<'a> {
    alg: Algorithm,
    pass: u32,
    index: usize,
    step: &'a Step,
    pattern: &'a Pattern,
}

/// Folds a verifying sweep's errors into the tally, records and retests them.
pub(super) fn record_errors(
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
