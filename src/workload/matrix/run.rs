//! The matrix test on the device: the kernel each kind runs on, the sizes that fit, the
//! calibration, and the rounds (inputs, product, checks, recomputation, location) until
//! the budget.

use super::gpu::{Gpu, Layout};
use super::kernel::Kernel;
use super::locate::locate;
use super::*;

/// The matrix test as a workload.
pub struct MatrixTest {
    /// Its settings.
    pub config: MatrixConfig,
}

/// Which kinds multiply on the matrix units and in what shape, and why the others do
/// not.
fn units_note(chosen: &[(Kernel, Option<String>)]) -> String {
    let on: Vec<String> = chosen
        .iter()
        .filter_map(|(k, _)| {
            k.shape
                .map(|[m, n, kk]| format!("{} in {m}x{n}x{kk} blocks", k.kind.name()))
        })
        .collect();
    let mut parts = Vec::new();
    if !on.is_empty() {
        parts.push(format!("on the matrix units: {}", on.join(", ")));
    }
    parts.extend(chosen.iter().filter_map(|(_, why)| why.clone()));
    parts.join("; ")
}

/// The kernel of each kind on `device`, and why a kind is not on the matrix units; an
/// error where `path` demands the units and a kind cannot have them.
pub(super) fn kernels_for(
    kinds: &[MatrixKind],
    device: &DeviceInfo,
    path: MatrixPath,
) -> Result<Vec<(Kernel, Option<String>)>, String> {
    let chosen: Vec<(Kernel, Option<String>)> = kinds
        .iter()
        .map(|&k| Kernel::choose(k, device, path != MatrixPath::SharedMemory))
        .collect();
    if path == MatrixPath::MatrixUnits
        && let Some(why) = chosen.iter().find_map(|(_, why)| why.as_ref())
    {
        return Err(format!(
            "path = \"matrix_units\" asks every kind to run on the matrix units, but {why}"
        ));
    }
    Ok(chosen)
}

/// The report's path: one name where every kind took the same, else `mixed`.
fn overall_path(kernels: &[Kernel]) -> &'static str {
    match kernels.first() {
        Some(first) if kernels.iter().all(|k| k.path() == first.path()) => first.path(),
        Some(_) => "mixed",
        None => "shared_memory",
    }
}

/// Whether `edge`-square matrices, asked for by name, fit the device at all: the fp32
/// inputs within maxStorageBufferRange, and every buffer within the free device-local
/// memory. The sentence says what they need.
pub(super) fn fits(edge: u32, device: &DeviceInfo) -> Result<(), String> {
    let l = Layout::new(edge, MatrixConfig::default().record_capacity);
    let range = device.limits.max_storage_buffer_range_bytes;
    let free = device.device_local_free_bytes();
    let format = crate::units::format_bytes;
    if u64::from(l.ab_words) * 4 > range {
        return Err(format!(
            "matrix size {edge} needs a {} input buffer, beyond the device's storage-buffer range ({})",
            format(u64::from(l.ab_words) * 4),
            format(range)
        ));
    }
    if l.total_bytes() > free {
        return Err(format!(
            "matrix size {edge} needs {} of device memory, more than the {} free",
            format(l.total_bytes()),
            format(free)
        ));
    }
    Ok(())
}

/// The largest edge the device's memory and limits allow: fp32 inputs (8 n^2 bytes in one
/// buffer) within maxStorageBufferRange, and every buffer within 1/MEMORY_SHARE of the
/// free device-local memory.
pub(super) fn max_edge(device: &DeviceInfo) -> u32 {
    let free = device.device_local_free_bytes() / MEMORY_SHARE;
    let range = device.limits.max_storage_buffer_range_bytes;
    let mut edge = MAX_EDGE;
    while edge > MIN_EDGE && {
        let l = Layout::new(edge, 0);
        l.total_bytes() > free || u64::from(l.ab_words) * 4 > range
    } {
        edge /= 2;
    }
    edge
}

/// The recomputation's mapping of round `round`: an odd multiplier (a bijection of the
/// power-of-two tile count) and an offset.
pub(super) fn recompute_mapping(seed: u32, round: u32, tiles: u32) -> (u32, u32) {
    let h = hash(seed ^ round.wrapping_mul(0x85EB_CA6B));
    let mut mul = (h | 1) & (tiles.wrapping_mul(2).wrapping_sub(1));
    if mul == 1 && tiles > 1 {
        mul = 3;
    }
    (mul | 1, hash(h) & (tiles - 1))
}

/// One record of the checks, as the shader wrote it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Record {
    pub(super) what: u32,
    pub(super) a: u32,
    pub(super) b: u32,
    pub(super) actual: u32,
    pub(super) workgroup: u32,
}

impl KindTest for MatrixTest {
    type Kind = Matrix;

    /// Runs the test and returns its typed report.
    fn run_report(
        &mut self,
        ctx: &mut DeviceContext,
        control: &RunControl,
        events: &mut dyn EventSink,
    ) -> Result<MatrixReport, WorkloadError> {
        let cfg = self.config.clone();
        let info = ctx.info().clone();
        let device = Some(info.index);
        let mut kinds = cfg.kinds.clone();
        let mut skipped = Vec::new();
        if !info.shader_float16 && kinds.contains(&MatrixKind::Fp16) {
            kinds.retain(|&k| k != MatrixKind::Fp16);
            let why = "fp16: the device has no fp16 arithmetic (shaderFloat16)".to_owned();
            events.emit(
                device,
                Event::Note {
                    message: format!("matrix {why}"),
                },
            );
            skipped.push(why);
        }
        if kinds.is_empty() {
            return Err(WorkloadError::Config(
                "no matrix kind this device can run was selected".into(),
            ));
        }
        if let Some(edge) = cfg.size
            && (!edge.is_power_of_two() || !(MIN_EDGE..=MAX_EDGE).contains(&edge))
        {
            return Err(WorkloadError::Config(format!(
                "the matrices' edge must be a power of two from {MIN_EDGE} to {MAX_EDGE}, not {edge}"
            )));
        }
        if let (Some(p), Some(edge)) = (cfg.plant, cfg.size)
            && (p.row.saturating_add(p.rows) > edge || p.col.saturating_add(p.cols) > edge)
        {
            return Err(WorkloadError::Config(format!(
                "the planted fault lies outside the {edge}-square product"
            )));
        }
        let mut chosen = kernels_for(&kinds, &info, cfg.path).map_err(WorkloadError::Config)?;
        for (kernel, why) in &mut chosen {
            // A driver that lists the units but cannot build the kernel for them leaves
            // the ALUs to test, and says so; unless the units were demanded.
            if kernel.shape.is_none() {
                continue;
            }
            if let Err(e) = ctx.pipeline(kernel.shader, kernel.spec()) {
                if cfg.path == MatrixPath::MatrixUnits || e.is_device_fatal() {
                    return Err(WorkloadError::Gpu(e));
                }
                let name = kernel.kind.name();
                let note = format!(
                    "{name}: the driver could not build the matrix-unit kernel ({e}); {name} runs on the shared-memory kernel"
                );
                events.emit(
                    device,
                    Event::Note {
                        message: format!("matrix {note}"),
                    },
                );
                *kernel = Kernel::shared_memory(kernel.kind);
                *why = Some(note);
            }
        }
        let kernels: Vec<Kernel> = chosen.iter().map(|(k, _)| *k).collect();
        let started = Instant::now();
        events.emit(
            device,
            Event::WorkloadStart {
                workload: Matrix::NAME.into(),
                settings: json!({ "config": &cfg }),
            },
        );
        let mut report = MatrixReport {
            path: overall_path(&kernels).into(),
            cooperative_matrix: units_note(&chosen),
            size: cfg.size.unwrap_or(0),
            grown_from: None,
            tile: TILE,
            dispatches_per_product: 1,
            kinds: kernels.iter().map(MatrixKindResult::new).collect(),
            skipped,
            records: Vec::new(),
            power: None,
            levels: Vec::new(),
            run: Envelope::default(),
        };
        if let Err(e) = drive(ctx, &cfg, &kernels, control, events, device, &mut report) {
            report.run.device_error = Some(record_device_error(events, device, &e));
        }
        for k in &mut report.kinds {
            let ops = k.timed_ops as f64;
            k.tflops = if k.gemm_s > 0.0 {
                ops / k.gemm_s / 1e12
            } else {
                0.0
            };
            k.verified_tflops = if k.round_s > 0.0 {
                ops / k.round_s / 1e12
            } else {
                0.0
            };
        }
        report.run.wall_s = started.elapsed().as_secs_f64();
        Ok(report)
    }
}

/// The edge for which one product of the first kind takes about the dispatch target
/// (growing 2x, so 8x the work, while it takes under a quarter of it), and the pieces a
/// product is split into where even the smallest takes far longer.
fn calibrate(
    ctx: &mut DeviceContext,
    cfg: &MatrixConfig,
    kernel: &Kernel,
) -> GpuResult<(u32, u32)> {
    let target_ns = cfg.dispatch_target.as_nanos() as u64;
    let largest = max_edge(ctx.info());
    let mut edge = cfg.size.unwrap_or(MIN_EDGE);
    loop {
        let mut gpu = Gpu::open(ctx, edge, 0)?;
        gpu.prepare(kernel.kind, cfg.seed, true)?;
        // The first dispatch of a pipeline may finish compiling it: the second is timed.
        gpu.multiply(kernel)?;
        let took = gpu.multiply(kernel)?.max(1);
        if cfg.size.is_none() && took < target_ns / 4 && edge * 2 <= largest {
            edge *= 2;
            continue;
        }
        let pieces = took.div_ceil(target_ns.max(1) * 2).max(1);
        return Ok((edge, pieces.min(u64::from(u32::MAX)) as u32));
    }
}

/// The longest round a power target may grow the products to: the duty is paced in
/// [`LOAD_PERIOD`]s, and a round far longer than that would make the load lurch.
const GROW_ROUND_MAX: Duration = Duration::from_secs(2);

/// Calibrates, then runs rounds of the kinds in turn until the budget. Under a power
/// target that full duty cannot reach (and nothing of the environment holds the card),
/// the products grow (edge x2, work x8, while a round stays under [`GROW_ROUND_MAX`] and
/// the memory allows): a larger product spends more of each round multiplying and less
/// in the O(n^2) generation and checks, so the card draws more.
fn drive(
    ctx: &mut DeviceContext,
    cfg: &MatrixConfig,
    kernels: &[Kernel],
    control: &RunControl,
    events: &mut dyn EventSink,
    device: Option<usize>,
    report: &mut MatrixReport,
) -> GpuResult<()> {
    let (edge, pieces) = calibrate(ctx, cfg, &kernels[0])?;
    report.size = edge;
    report.dispatches_per_product = pieces;
    if let Some(p) = cfg.plant
        && (p.row + p.rows > edge || p.col + p.cols > edge)
    {
        events.emit(
            device,
            Event::Note {
                message: format!("matrix: the planted fault lies outside the {edge}-square product and is not planted"),
            },
        );
    }
    let plant = cfg
        .plant
        .filter(|p| p.row + p.rows <= edge && p.col + p.cols <= edge);
    let largest = max_edge(ctx.info());
    let mut gpu = Gpu::open(ctx, edge, cfg.record_capacity)?;
    gpu.pieces = pieces;
    let cadence = Cadence {
        shape: cfg.shape.load_shape(),
        power_target: cfg.power_target,
        rounds: cfg.rounds,
        kinds: report.kinds.len(),
    };
    let rounds = MatrixRounds {
        gpu,
        cfg,
        kernels,
        plant,
        report,
        device,
        edge,
        largest,
    };
    crate::workload::rounds::drive(rounds, &cadence, control, events, device)
}

/// The matrix test's rounds in the shared loop: the kinds in turn on buffers of one edge,
/// grown between rounds where a power target needs it.
struct MatrixRounds<'a, 'c> {
    gpu: Gpu<'c>,
    cfg: &'a MatrixConfig,
    kernels: &'a [Kernel],
    /// The planted fault, where it lies inside the product.
    plant: Option<PlantedFault>,
    report: &'a mut MatrixReport,
    device: Option<usize>,
    /// The products' edge now.
    edge: u32,
    /// The largest edge the device's memory and limits allow.
    largest: u32,
}

impl Rounds for MatrixRounds<'_, '_> {
    const NAME: &'static str = Matrix::NAME;
    const RATE_SCALE: f64 = 1e-12;

    /// Each kind's totals for its `Rates` events: its products' operations and GPU seconds.
    fn totals(&self) -> Vec<(&'static str, u64, f64)> {
        self.report
            .kinds
            .iter()
            .map(|k| (k.kind.rate_name(k.shape.is_some()), k.timed_ops, k.gemm_s))
            .collect()
    }

    fn round(
        &mut self,
        round: u32,
        k: usize,
        at: LoadPoint,
        events: &mut dyn EventSink,
    ) -> GpuResult<Worked> {
        let (records_before, faults_before) = (self.report.records.len(), self.report.faults());
        let timed_ops =
            |report: &MatrixReport| -> u64 { report.kinds.iter().map(|k| k.timed_ops).sum() };
        let ops_before = timed_ops(self.report);
        one_round(
            &mut self.gpu,
            self.cfg,
            &self.kernels[k],
            self.plant
                .filter(|_| self.cfg.plant_when.is_none_or(|w| w.applies(&at))),
            (round, k),
            &mut DeviceEvents::new(events, self.device),
            self.report,
        )?;
        for r in &mut self.report.records[records_before..] {
            r.at = Some(at);
        }
        Ok(Worked {
            ops: timed_ops(self.report) - ops_before,
            faults: self.report.faults() - faults_before,
        })
    }

    fn between(
        mut self,
        took: Duration,
        hold: Option<&mut PowerController>,
        events: &mut dyn EventSink,
    ) -> GpuResult<Self> {
        if let Some(hold) = hold
            && hold.starved()
            && self.edge * 2 <= self.largest
            && took * 8 <= GROW_ROUND_MAX
        {
            let edge = self.edge;
            let pieces = self.gpu.pieces;
            // The old buffers go first: both sizes at once may not fit.
            match self.gpu.reopen(edge * 2, self.cfg.record_capacity) {
                Ok(bigger) => {
                    self.gpu = bigger;
                    self.report.grown_from.get_or_insert(edge);
                    self.edge = edge * 2;
                    // Eight times the work per product, the same work per dispatch.
                    self.gpu.pieces = pieces.saturating_mul(8);
                    self.report.size = self.edge;
                    self.report.dispatches_per_product = self.gpu.pieces;
                    hold.load_changed();
                    events.emit(
                        self.device,
                        Event::Note {
                            message: format!(
                                "matrix: the power target is out of reach at full duty: products grown to {}-square",
                                self.edge
                            ),
                        },
                    );
                }
                Err(ctx) => {
                    self.gpu = Gpu::open(ctx, edge, self.cfg.record_capacity)?;
                    self.gpu.pieces = pieces;
                }
            }
        }
        Ok(self)
    }

    fn ran(&mut self, ran: Ran) {
        self.report.run.stopped_early = ran.stopped_early;
        self.report.power = ran.power;
        self.report.levels = ran.levels;
    }
}

/// One round of kind `k`: inputs, product, recomputation, checks, and the location of
/// whatever they found.
fn one_round(
    gpu: &mut Gpu,
    cfg: &MatrixConfig,
    kernel: &Kernel,
    plant: Option<PlantedFault>,
    (round, k): (u32, usize),
    events: &mut DeviceEvents,
    report: &mut MatrixReport,
) -> GpuResult<()> {
    let kind = kernel.kind;
    // A new input set every INPUT_ROUNDS rounds: its checksums (2/TILE of a product's
    // work) serve every kind that multiplies it, and each round recomputes other tiles.
    let seed = cfg.seed ^ (round / INPUT_ROUNDS).wrapping_mul(0x9E37_79B9);
    let fresh = round.is_multiple_of(INPUT_ROUNDS);
    let l = gpu.layout;
    let mapping = recompute_mapping(cfg.seed, round, l.tiles);
    let prep_ns = gpu.prepare(kind, seed, fresh)?;
    let gemm_ns = gpu.multiply(kernel)?;
    let check_ns = gpu.check(kernel, mapping, plant, cfg.record_capacity)?;
    let words = gpu.words()?;
    // Row and column records in the first half of the capacity, element records in the
    // second (matrix_common.glsl).
    let half = cfg.record_capacity as usize / 2;
    let records: Vec<Record> = (0..(words[C_SLOTS] as usize).min(half))
        .chain(half..half + (words[C_ELEMENT_SLOTS] as usize).min(half))
        .map(|s| {
            let at = RECORDS_AT + s * RECORD_WORDS;
            Record {
                what: words[at],
                a: words[at + 1],
                b: words[at + 2],
                actual: words[at + 4],
                workgroup: words[at + 5],
            }
        })
        .collect();
    let kr = &mut report.kinds[k];
    kr.rounds += 1;
    kr.verified_ops += l.ops();
    kr.checksum_mismatches += u64::from(words[C_ROWS]) + u64::from(words[C_COLS]);
    kr.invalid_values += u64::from(words[C_INVALID]);
    kr.nonfinite += u64::from(words[C_NONFINITE]);
    kr.redundant_mismatches += u64::from(words[C_REDUNDANT]);
    kr.tiles_recomputed += u64::from(l.sampled);
    // A kind's first round is timed only until a second replaces it.
    if kr.rounds == 2 {
        kr.gemm_s = 0.0;
        kr.round_s = 0.0;
        kr.timed_ops = 0;
        kr.best_tflops = 0.0;
    }
    kr.gemm_s += gemm_ns as f64 / 1e9;
    kr.round_s += (prep_ns + gemm_ns + check_ns) as f64 / 1e9;
    kr.timed_ops += l.ops();
    kr.best_tflops = kr
        .best_tflops
        .max(l.ops() as f64 / gemm_ns.max(1) as f64 / 1e3);
    if records.is_empty() {
        return Ok(());
    }
    let found = locate(
        gpu,
        kind,
        seed,
        round,
        mapping,
        &records,
        cfg.record_capacity,
    )?;
    report.kinds[k].located += found.iter().filter(|m| m.row.is_some()).count() as u64;
    for m in found {
        events.emit(Event::Note {
            message: format!("matrix mismatch: {}", m.place()),
        });
        if report.records.len() < cfg.record_capacity as usize {
            report.records.push(m);
        }
    }
    Ok(())
}
