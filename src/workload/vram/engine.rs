//! Drives the VRAM shaders over every test buffer: dispatches sized by time, batched into
//! bounded submissions, errors and histograms read back after each batch.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::layout::{self, BatchCounters, R_RECORDS, REC_WORDS};
use super::pattern::Pattern;
use super::shaders;
use crate::gpu::{
    Binding, BufferKind, DeviceContext, GpuBuffer, GpuError, GpuResult, Pipeline, ShaderCode,
};
use crate::units::MIB;

/// How invocations map onto memory, and which loads and stores they use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessLayout {
    /// Each invocation walks its own contiguous run, writing with 32-byte stores and
    /// verifying through texel fetches where the device allows (best on CPU devices).
    Contiguous,
    /// Neighbouring invocations touch neighbouring addresses with 16-byte storage-buffer
    /// loads and stores (coalesced; best on GPUs).
    Coalesced,
}

impl AccessLayout {
    /// Parses `contiguous` or `coalesced`.
    pub fn parse(name: &str) -> Option<AccessLayout> {
        match name {
            "contiguous" => Some(AccessLayout::Contiguous),
            "coalesced" => Some(AccessLayout::Coalesced),
            _ => None,
        }
    }

    /// The name `parse` takes.
    pub fn name(self) -> &'static str {
        match self {
            AccessLayout::Contiguous => "contiguous",
            AccessLayout::Coalesced => "coalesced",
        }
    }
}

/// Tuning of the engine; defaults suit the device kind.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Access shape.
    pub layout: AccessLayout,
    /// 16-byte elements each invocation handles per dispatch.
    pub vecs_per_invocation: u32,
    /// Target GPU time of one dispatch.
    pub dispatch_target: Duration,
    /// Target GPU time of one submission (several dispatches).
    pub batch_target: Duration,
    /// Bytes streamed to push retested words out of the caches.
    pub evict_bytes: u64,
}

impl EngineConfig {
    /// Defaults for a device: contiguous runs on CPU devices, coalesced access on GPUs.
    pub fn for_device(is_gpu: bool) -> EngineConfig {
        EngineConfig {
            layout: if is_gpu {
                AccessLayout::Coalesced
            } else {
                AccessLayout::Contiguous
            },
            vecs_per_invocation: if is_gpu { 16 } else { 4096 },
            dispatch_target: Duration::from_millis(20),
            batch_target: Duration::from_millis(100),
            evict_bytes: if is_gpu { 512 * MIB } else { 64 * MIB },
        }
    }
}

const WORKGROUP: u32 = 64;
/// Elements per invocation, at most: the shaders tally a workgroup's errors in 32-bit
/// shared bins, which must hold 32 bits' worth of errors for every word of a workgroup.
const MAX_VECS_PER_INVOCATION: u64 = 1 << 16;
/// Dispatches recorded into one submission, at most.
const MAX_DISPATCHES_PER_BATCH: usize = 64;
/// Records one batch can hold in the results buffer.
const BATCH_RECORDS: u32 = 16_384;
/// Entries the probe buffer holds (32 bytes each).
const PROBE_ENTRIES: usize = 16_384;
const PROBE_WORDS: usize = 8;
/// Every test buffer is a multiple of this, so that a buffer's tail still splits into
/// whole workgroups of runs that are a multiple of four elements (the unrolled loops).
pub const BUFFER_GRANULE_BYTES: u64 = MIB;

/// The operations the engine times separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// Pattern written by the write shader.
    Write,
    /// Constant pattern written by `vkCmdFillBuffer`.
    Fill,
    /// Pattern read and compared.
    Verify,
    /// Pattern read, compared, and its inversion written.
    Rewrite,
    /// Streaming reads that empty the caches.
    Evict,
}

/// Bytes and time spent in one kind of operation.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct OpStats {
    /// Bytes swept.
    pub bytes: u64,
    /// GPU time (timestamps; wall time where the queue has none).
    pub gpu_ns: u64,
    /// Host wall time from first submit to last fence.
    pub wall_ns: u64,
}

/// The outcome of one sweep over the tested memory.
#[derive(Debug, Default)]
pub struct Sweep {
    /// Bytes covered.
    pub bytes: u64,
    /// GPU time.
    pub gpu_ns: u64,
    /// Wall time.
    pub wall_ns: u64,
    /// Errors found (verify and rewrite sweeps).
    pub counters: BatchCounters,
    /// False when a stop request cut the sweep short.
    pub completed: bool,
}

/// A fault planted through the GPU: `word = ((word[source] & and) | or) ^ xor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlantedFault {
    /// Absolute word index of the victim.
    pub word: u64,
    /// AND mask.
    pub and_mask: u32,
    /// OR mask.
    pub or_mask: u32,
    /// XOR mask.
    pub xor_mask: u32,
    /// Absolute word index the value is taken from (same test buffer); `word` in place.
    pub source: u64,
    /// Re-planted after every write (stuck cells); else planted once.
    pub persistent: bool,
}

impl PlantedFault {
    /// A word whose bit 3 is stuck at 0 and bit 9 at 1, whatever is written: the stuck
    /// cell `--test-stuck-word` plants and the recorded scenarios were made with.
    pub fn stuck_bits(word: u64) -> PlantedFault {
        PlantedFault {
            word,
            and_mask: !(1 << 3),
            or_mask: 1 << 9,
            xor_mask: 0,
            source: word,
            persistent: true,
        }
    }

    /// What the victim holds after planting, given what the sources held.
    pub fn apply(&self, source_value: u32) -> u32 {
        ((source_value & self.and_mask) | self.or_mask) ^ self.xor_mask
    }
}

struct TestBuffer {
    buffer: GpuBuffer,
    binding: Binding,
    first_word: u64,
    elements: u64,
}

struct Piece {
    buffer: usize,
    start: u64,
    elements: u64,
}

/// The tested memory and the means to sweep it.
pub struct Engine<'c> {
    ctx: &'c mut DeviceContext,
    cfg: EngineConfig,
    buffers: Vec<TestBuffer>,
    /// Counters and records, written by the shaders in device-local memory: per-word
    /// traffic to host memory across the bus would make a badly failing card time out.
    results: GpuBuffer,
    /// Where each batch's counters and records are copied for the host to read.
    results_out: GpuBuffer,
    probe: GpuBuffer,
    /// Pipelines by shader name, pattern and elements per invocation.
    pipelines: HashMap<(&'static str, u32, u32), Pipeline>,
    rates: HashMap<(Op, u32), f64>,
    planted: Vec<PlantedFault>,
    planted_all: Option<u32>,
    stats: HashMap<Op, OpStats>,
    /// The first sweep that wrote the memory: it pays for first touch (page faults on a
    /// CPU device, first mappings elsewhere), so it is kept out of the rates.
    first_touch: Option<(Op, OpStats)>,
    texel_views: bool,
}

impl<'c> Engine<'c> {
    /// Allocates buffers of at most `max_buffer_bytes` each until `target_bytes` are
    /// held, the device refuses more, or `stop` says to stop (allocation is host-side
    /// work that must answer a stop as a sweep does). Returns the engine and any
    /// allocation failure that stopped it short.
    pub fn allocate(
        ctx: &'c mut DeviceContext,
        cfg: EngineConfig,
        target_bytes: u64,
        max_buffer_bytes: u64,
        stop: &dyn Fn() -> bool,
    ) -> GpuResult<(Engine<'c>, Option<GpuError>)> {
        let results_bytes = ((R_RECORDS + BATCH_RECORDS as usize * REC_WORDS) * 4) as u64;
        let results = ctx.buffer(BufferKind::Device, results_bytes, "kiln vram results")?;
        let results_out = ctx.buffer(
            BufferKind::Readback,
            results_bytes,
            "kiln vram results readback",
        )?;
        let probe = ctx.buffer(
            BufferKind::Readback,
            (PROBE_ENTRIES * PROBE_WORDS * 4) as u64,
            "kiln vram probe list",
        )?;
        let max_buffer = (max_buffer_bytes / BUFFER_GRANULE_BYTES) * BUFFER_GRANULE_BYTES;
        if max_buffer == 0 {
            return Err(GpuError::Unsupported(
                "the device's buffer limits are below 1 MiB".into(),
            ));
        }
        let mut buffers: Vec<(GpuBuffer, u64)> = Vec::new();
        let mut held = 0u64;
        let mut size = max_buffer;
        let mut stopped_by = None;
        while target_bytes.saturating_sub(held) >= BUFFER_GRANULE_BYTES && !stop() {
            let want =
                size.min((target_bytes - held) / BUFFER_GRANULE_BYTES * BUFFER_GRANULE_BYTES);
            match ctx.buffer(BufferKind::Device, want, "kiln vram test") {
                Ok(buffer) => {
                    buffers.push((buffer, held / 4));
                    held += want;
                }
                Err(GpuError::OutOfMemory { running }) => {
                    // Smaller pieces may still fit where a large one does not.
                    if want > 16 * BUFFER_GRANULE_BYTES {
                        size = (want / 2 / BUFFER_GRANULE_BYTES) * BUFFER_GRANULE_BYTES;
                        continue;
                    }
                    stopped_by = Some(GpuError::OutOfMemory { running });
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        let mut engine = Engine {
            ctx,
            cfg,
            buffers: Vec::with_capacity(buffers.len()),
            results,
            results_out,
            probe,
            pipelines: HashMap::new(),
            rates: HashMap::new(),
            planted: Vec::new(),
            planted_all: None,
            stats: HashMap::new(),
            first_touch: None,
            texel_views: true,
        };
        for (mut buffer, first_word) in buffers {
            let binding = engine
                .ctx
                .bind([&mut buffer, &mut engine.results, &mut engine.probe])?;
            let elements = buffer.size_bytes() / 16;
            engine.texel_views &= elements <= engine.ctx.info().limits.max_texel_buffer_elements;
            engine.buffers.push(TestBuffer {
                buffer,
                binding,
                first_word,
                elements,
            });
        }
        Ok((engine, stopped_by))
    }

    /// Bytes of memory under test.
    pub fn tested_bytes(&self) -> u64 {
        self.buffers.iter().map(|b| b.elements * 16).sum()
    }

    /// True when sweeps are timed by GPU timestamps rather than the host clock.
    pub fn has_gpu_timestamps(&self) -> bool {
        self.ctx.info().limits.timestamp_valid_bits > 0
    }

    /// Number of test buffers.
    pub fn buffer_count(&self) -> usize {
        self.buffers.len()
    }

    /// Index of the buffer holding absolute word `word`, and the word's index in it.
    pub fn locate(&self, word: u64) -> Option<(usize, u64)> {
        self.buffers
            .iter()
            .position(|b| word >= b.first_word && word < b.first_word + b.elements * 4)
            .map(|i| (i, word - self.buffers[i].first_word))
    }

    /// The engine's settings.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// Accumulated bytes and time per operation.
    pub fn stats(&self, op: Op) -> OpStats {
        self.stats.get(&op).copied().unwrap_or_default()
    }

    /// The first sweep that wrote the memory, kept out of [`Engine::stats`].
    pub fn first_touch(&self) -> Option<(Op, OpStats)> {
        self.first_touch
    }

    /// Plants faults: each one-shot fault after the next write, each persistent fault
    /// after every write from now on (including the writes of a retest).
    pub fn plant(&mut self, faults: &[PlantedFault]) {
        self.planted.extend_from_slice(faults);
    }

    /// Test hook: after every write from now on (as a persistent fault), fills all tested
    /// memory with `value`, so that nearly every word reads wrong: the worst card there
    /// is, for tests that a dead memory chip is still counted within the fence timeout.
    pub fn plant_all(&mut self, value: Option<u32>) {
        self.planted_all = value;
    }

    /// Faults still planted (persistent ones, and one-shots not yet applied).
    pub fn planted(&self) -> &[PlantedFault] {
        &self.planted
    }

    /// Elements per invocation for whole-workgroup pieces (a tail's run is shorter, see
    /// `run_length`).
    fn unit(&self) -> u64 {
        u64::from(self.cfg.vecs_per_invocation).clamp(4, MAX_VECS_PER_INVOCATION)
    }

    /// The pipeline of a sweep shader for one pattern and run length: both are
    /// specialization constants, as is the layout.
    fn pipeline(
        &mut self,
        shader: ShaderCode,
        pattern_spec: u32,
        vecs_per_inv: u32,
    ) -> GpuResult<Pipeline> {
        let key = (shader.name(), pattern_spec, vecs_per_inv);
        if let Some(&p) = self.pipelines.get(&key) {
            return Ok(p);
        }
        let contiguous = u32::from(self.cfg.layout == AccessLayout::Contiguous);
        let p = self
            .ctx
            .pipeline(shader, &[WORKGROUP, pattern_spec, vecs_per_inv, contiguous])?;
        self.pipelines.insert(key, p);
        Ok(p)
    }

    /// Writes `pattern` over all tested memory (with `vkCmdFillBuffer` for constants).
    pub fn write(&mut self, pattern: &Pattern, stop: &dyn Fn() -> bool) -> GpuResult<Sweep> {
        let op = if pattern.constant_word().is_some() {
            Op::Fill
        } else {
            Op::Write
        };
        let sweep = self.sweep(op, pattern, 0, false, 0, stop)?;
        self.apply_planted()?;
        Ok(sweep)
    }

    /// Verifies `pattern` over all tested memory, keeping at most `record_capacity` records.
    pub fn verify(
        &mut self,
        pattern: &Pattern,
        record_capacity: u32,
        stop: &dyn Fn() -> bool,
    ) -> GpuResult<Sweep> {
        self.sweep(Op::Verify, pattern, 0, false, record_capacity, stop)
    }

    /// Verifies `pattern` and writes `pattern ^ flip`, sweeping up or down.
    pub fn rewrite(
        &mut self,
        pattern: &Pattern,
        flip: u32,
        descending: bool,
        record_capacity: u32,
        stop: &dyn Fn() -> bool,
    ) -> GpuResult<Sweep> {
        let sweep = self.sweep(
            Op::Rewrite,
            pattern,
            flip,
            descending,
            record_capacity,
            stop,
        )?;
        self.apply_planted()?;
        Ok(sweep)
    }

    fn sweep(
        &mut self,
        op: Op,
        pattern: &Pattern,
        flip: u32,
        descending: bool,
        record_capacity: u32,
        stop: &dyn Fn() -> bool,
    ) -> GpuResult<Sweep> {
        // The contiguous layout's fast shapes: 32-byte stores need int64, texel loads need
        // every buffer within the texel limit.
        let contiguous = self.cfg.layout == AccessLayout::Contiguous;
        let wide = contiguous && self.ctx.info().shader_int64;
        let texel = contiguous && self.texel_views;
        let shader = match op {
            Op::Write if wide => Some(shaders::WRITE_WIDE),
            Op::Write => Some(shaders::WRITE),
            Op::Verify if texel => Some(shaders::VERIFY_TEXEL),
            Op::Verify => Some(shaders::VERIFY),
            Op::Rewrite if wide && texel => Some(shaders::REWRITE_WIDE),
            Op::Rewrite => Some(shaders::REWRITE),
            Op::Fill | Op::Evict => None,
        };
        let checks = matches!(op, Op::Verify | Op::Rewrite);
        let rate_key = (op, pattern.spec_id());
        let mut sweep = Sweep {
            completed: true,
            ..Default::default()
        };
        let mut cursor = Cursor::new(&self.buffers, descending);
        let unit = self.unit();
        let max_invocations = u64::from(self.ctx.info().limits.max_compute_work_group_count[0])
            * u64::from(WORKGROUP);
        let started = Instant::now();
        loop {
            if stop() {
                sweep.completed = false;
                break;
            }
            let rate = self.rates.get(&rate_key).copied();
            let dispatch_elems = match rate {
                Some(bytes_per_ns) => {
                    (bytes_per_ns * self.cfg.dispatch_target.as_nanos() as f64 / 16.0) as u64
                }
                None => 16 * MIB / 16,
            };
            let group_elems = unit * u64::from(WORKGROUP);
            let dispatch_elems = dispatch_elems.clamp(group_elems, max_invocations * unit)
                / group_elems
                * group_elems;
            let capacity_left = record_capacity.saturating_sub(sweep.counters.records.len() as u32);
            let batch_capacity = capacity_left.min(BATCH_RECORDS);
            let what = format!("vram {op:?} of {}", pattern.describe()).to_lowercase();
            let mut pieces = Vec::new();
            // Fill the submission up to the batch target (pieces may be cut short by
            // buffer ends and device limits); the first, uncalibrated one holds one piece.
            let mut estimated_ns = 0.0;
            while pieces.len() < MAX_DISPATCHES_PER_BATCH {
                let Some(p) = cursor.next(dispatch_elems) else {
                    break;
                };
                estimated_ns += rate.map_or(f64::INFINITY, |r| (p.elements * 16) as f64 / r);
                pieces.push(p);
                if estimated_ns >= self.cfg.batch_target.as_nanos() as f64 {
                    break;
                }
            }
            if pieces.is_empty() {
                break;
            }
            // Pipelines first: recording holds the device context.
            let mut pipelines = Vec::with_capacity(pieces.len());
            for piece in &pieces {
                let per_inv = run_length(piece.elements, unit);
                let pipeline = match shader {
                    Some(s) => Some(self.pipeline(s, pattern.spec_id(), per_inv as u32)?),
                    None => None,
                };
                pipelines.push((pipeline, per_inv));
            }
            let mut rec = self.ctx.record(what)?;
            if checks {
                // Zero the counters on the device; the records past them are read only
                // up to the slots this batch claims.
                rec.fill(&self.results, 0, (R_RECORDS * 4) as u64, 0);
                rec.barrier();
            }
            let mut batch_bytes = 0u64;
            let mut previous_buffer = None;
            for (piece, &(pipeline, per_inv)) in pieces.iter().zip(&pipelines) {
                let tb = &self.buffers[piece.buffer];
                // A shader that writes its buffer is bound to the whole of it: two pieces
                // of one buffer in a batch touch disjoint words, but nothing tells the API
                // so, and the synchronization validator rightly calls the second a hazard
                // (a rewrite reads through a texel view, then writes). Pieces are sized to
                // milliseconds of work, so the barrier costs nothing that shows.
                if matches!(op, Op::Write | Op::Rewrite) && previous_buffer == Some(piece.buffer) {
                    rec.barrier();
                }
                previous_buffer = Some(piece.buffer);
                batch_bytes += piece.elements * 16;
                match pipeline {
                    None => rec.fill(
                        &tb.buffer,
                        piece.start * 16,
                        piece.elements * 16,
                        pattern.constant_word().unwrap_or(0),
                    ),
                    Some(pipeline) => {
                        let invocations = (piece.elements / per_inv) as u32;
                        let word = tb.first_word + piece.start * 4;
                        let push = [
                            piece.start as u32,
                            invocations,
                            word as u32,
                            (word >> 32) as u32,
                            pattern.key((word >> 32) as u32),
                            pattern.invert_mask(),
                            (word % 20) as u32,
                            match pattern.kind {
                                super::pattern::PatternKind::Mod20 { offset, .. } => offset,
                                _ => 0,
                            },
                            flip,
                            u32::from(descending),
                            piece.buffer as u32,
                            batch_capacity,
                        ];
                        rec.dispatch(pipeline, tb.binding, &push, invocations / WORKGROUP);
                    }
                }
            }
            if checks {
                rec.barrier();
                let bytes = ((R_RECORDS + batch_capacity as usize * REC_WORDS) * 4) as u64;
                rec.copy(&self.results, 0, &self.results_out, 0, bytes);
            }
            let timing = rec.submit_and_wait()?;
            let ns = timing.best_ns().max(1);
            let measured = batch_bytes as f64 / ns as f64;
            let smoothed = match rate {
                Some(old) => 0.5 * old + 0.5 * measured,
                None => measured,
            };
            self.rates.insert(rate_key, smoothed);
            sweep.bytes += batch_bytes;
            sweep.gpu_ns += ns;
            if checks {
                let words = self.results_out.words().ok_or_else(|| {
                    GpuError::Unsupported("results readback buffer is not mapped".into())
                })?;
                let batch = layout::read_batch(words, batch_capacity as usize);
                merge(&mut sweep.counters, batch);
            }
        }
        sweep.wall_ns = started.elapsed().as_nanos() as u64;
        let swept = OpStats {
            bytes: sweep.bytes,
            gpu_ns: sweep.gpu_ns,
            wall_ns: sweep.wall_ns,
        };
        if self.first_touch.is_none() && matches!(op, Op::Write | Op::Fill) && sweep.completed {
            self.first_touch = Some((op, swept));
        } else {
            let stats = self.stats.entry(op).or_default();
            stats.bytes += swept.bytes;
            stats.gpu_ns += swept.gpu_ns;
            stats.wall_ns += swept.wall_ns;
        }
        Ok(sweep)
    }

    /// Copies the first half of the test buffers onto the second half with
    /// `vkCmdCopyBuffer`, all regions in one submission or one region per submission:
    /// the device's plain copy bandwidth, for comparison (drivers differ in which is
    /// faster). Returns the bytes copied (read plus written counts twice) and the time.
    pub fn copy_halves(&mut self, one_region_per_submission: bool) -> GpuResult<OpStats> {
        let half = self.buffers.len() / 2;
        if half == 0 {
            return Err(GpuError::Unsupported(
                "copy bandwidth needs at least two test buffers".into(),
            ));
        }
        let started = Instant::now();
        let mut total = OpStats::default();
        let per_submission = if one_region_per_submission { 1 } else { half };
        for first in (0..half).step_by(per_submission) {
            let mut rec = self.ctx.record("plain buffer copy")?;
            for i in first..(first + per_submission).min(half) {
                let (src, dst) = (&self.buffers[i], &self.buffers[i + half]);
                let n = src.elements.min(dst.elements) * 16;
                rec.copy(&src.buffer, 0, &dst.buffer, 0, n);
                total.bytes += 2 * n;
            }
            total.gpu_ns += rec.submit_and_wait()?.best_ns();
        }
        total.wall_ns = started.elapsed().as_nanos() as u64;
        Ok(total)
    }

    /// Copies the first half of every test buffer onto its second half with a compute
    /// shader in the test's own access shape, all in one submission: a copy ceiling
    /// that a driver's copy engine path cannot understate. Bytes count read plus written.
    pub fn copy_halves_by_shader(&mut self) -> GpuResult<OpStats> {
        let unit = self.unit();
        let max_groups = u64::from(self.ctx.info().limits.max_compute_work_group_count[0]);
        let contiguous = u32::from(self.cfg.layout == AccessLayout::Contiguous);
        let texel = contiguous & u32::from(self.texel_views);
        // Halves of whole mebibytes: whole workgroups of the run lengths chosen below.
        let mut dispatches = Vec::new();
        for (index, tb) in self.buffers.iter().enumerate() {
            let half = tb.elements / 2;
            let per_inv = run_length(half, unit);
            let step = (max_groups * u64::from(WORKGROUP) * per_inv).min(half);
            let mut start = 0;
            while start < half {
                let n = step.min(half - start);
                dispatches.push((index, per_inv, start, n));
                start += n;
            }
        }
        let mut pipelines = Vec::with_capacity(dispatches.len());
        for &(_, per_inv, _, _) in &dispatches {
            let spec = [WORKGROUP, 0, per_inv as u32, contiguous, texel];
            pipelines.push(self.ctx.pipeline(shaders::COPY, &spec)?);
        }
        let started = Instant::now();
        let mut rec = self.ctx.record("shader copy")?;
        let mut bytes = 0;
        let mut previous = None;
        for (&(index, per_inv, start, n), &pipeline) in dispatches.iter().zip(&pipelines) {
            // Disjoint ranges of one buffer, which nothing tells the API (see `sweep`).
            if previous == Some(index) {
                rec.barrier();
            }
            previous = Some(index);
            let tb = &self.buffers[index];
            let invocations = (n / per_inv) as u32;
            let push = [start as u32, (tb.elements / 2 + start) as u32, invocations];
            rec.dispatch(pipeline, tb.binding, &push, invocations / WORKGROUP);
            bytes += 2 * n * 16;
        }
        let timing = rec.submit_and_wait()?;
        Ok(OpStats {
            bytes,
            gpu_ns: timing.best_ns(),
            wall_ns: started.elapsed().as_nanos() as u64,
        })
    }

    /// Streams through up to `evict_bytes` of tested memory so that later reads of a few
    /// words come from memory rather than from a cache.
    pub fn evict(&mut self) -> GpuResult<()> {
        let pipeline = self.ctx.pipeline(shaders::EVICT, &[])?;
        let unit = 64u64;
        let mut left = self.cfg.evict_bytes / 16;
        let max = u64::from(self.ctx.info().limits.max_compute_work_group_count[0]) * 64 * unit;
        let mut rec = self.ctx.record("evicting caches before a retest read")?;
        let started = Instant::now();
        let mut bytes = 0;
        for tb in &self.buffers {
            if left == 0 {
                break;
            }
            let elements = tb.elements.min(left) / unit * unit;
            let mut start = 0;
            while start < elements {
                let n = (elements - start).min(max);
                let invocations = (n / unit) as u32;
                let push = [start as u32, invocations, unit as u32, 0x5EED_F00D];
                rec.dispatch(pipeline, tb.binding, &push, invocations.div_ceil(64));
                start += n;
            }
            bytes += elements * 16;
            left -= elements;
        }
        let timing = rec.submit_and_wait()?;
        let stats = self.stats.entry(Op::Evict).or_default();
        stats.bytes += bytes;
        stats.gpu_ns += timing.best_ns();
        stats.wall_ns += started.elapsed().as_nanos() as u64;
        Ok(())
    }

    /// Reads single words (absolute indices), each straight from memory.
    pub fn read_words(&mut self, words: &[u64]) -> GpuResult<Vec<u32>> {
        let entries: Vec<[u32; PROBE_WORDS]> = words
            .iter()
            .map(|&w| self.probe_entry(w, 0, 0, 0, w))
            .collect::<GpuResult<_>>()?;
        self.run_probe(words, entries, 0)
    }

    /// Writes single words: `words[i] = values[i]`.
    pub fn write_words(&mut self, words: &[u64], values: &[u32]) -> GpuResult<()> {
        let entries: Vec<[u32; PROBE_WORDS]> = words
            .iter()
            .zip(values)
            .map(|(&w, &v)| self.probe_entry(w, 0, 0, v, w))
            .collect::<GpuResult<_>>()?;
        self.run_probe(words, entries, 1)?;
        self.apply_planted()
    }

    fn apply_planted(&mut self) -> GpuResult<()> {
        if let Some(value) = self.planted_all {
            let mut rec = self.ctx.record("planting a wrong value in every word")?;
            for tb in &self.buffers {
                rec.fill(&tb.buffer, 0, tb.elements * 16, value);
            }
            rec.submit_and_wait()?;
        }
        if self.planted.is_empty() {
            return Ok(());
        }
        let faults = std::mem::take(&mut self.planted);
        let words: Vec<u64> = faults.iter().map(|f| f.word).collect();
        let entries: Vec<[u32; PROBE_WORDS]> = faults
            .iter()
            .map(|f| self.probe_entry(f.word, f.and_mask, f.or_mask, f.xor_mask, f.source))
            .collect::<GpuResult<_>>()?;
        self.run_probe(&words, entries, 1)?;
        self.planted = faults.into_iter().filter(|f| f.persistent).collect();
        Ok(())
    }

    fn probe_entry(
        &self,
        word: u64,
        and: u32,
        or: u32,
        xor: u32,
        source: u64,
    ) -> GpuResult<[u32; PROBE_WORDS]> {
        let outside = |w| GpuError::Unsupported(format!("word {w} lies outside the tested memory"));
        let (buffer, local) = self.locate(word).ok_or_else(|| outside(word))?;
        let (source_buffer, source_local) = self.locate(source).ok_or_else(|| outside(source))?;
        if source_buffer != buffer {
            return Err(GpuError::Unsupported(
                "a planted address fault must take its value from the same test buffer".into(),
            ));
        }
        Ok([
            local as u32,
            and,
            or,
            xor,
            source_local as u32,
            0,
            buffer as u32,
            0,
        ])
    }

    /// Runs the probe shader over `entries` (grouped per buffer), returning what mode 0 read.
    fn run_probe(
        &mut self,
        words: &[u64],
        mut entries: Vec<[u32; PROBE_WORDS]>,
        mode: u32,
    ) -> GpuResult<Vec<u32>> {
        let pipeline = self.ctx.pipeline(shaders::PROBE, &[])?;
        let mut out = vec![0u32; words.len()];
        let mut order: Vec<usize> = (0..entries.len()).collect();
        order.sort_by_key(|&i| entries[i][6]);
        for chunk in order.chunks(PROBE_ENTRIES) {
            {
                let list = self
                    .probe
                    .words_mut()
                    .ok_or_else(|| GpuError::Unsupported("probe buffer is not mapped".into()))?;
                for (slot, &i) in chunk.iter().enumerate() {
                    list[slot * PROBE_WORDS..(slot + 1) * PROBE_WORDS].copy_from_slice(&entries[i]);
                }
            }
            let what = if mode == 0 {
                "retest reads"
            } else {
                "retest or planted writes"
            };
            let mut rec = self.ctx.record(what)?;
            let mut first = 0usize;
            while first < chunk.len() {
                let buffer = entries[chunk[first]][6];
                let count = chunk[first..]
                    .iter()
                    .take_while(|&&i| entries[i][6] == buffer)
                    .count();
                let tb = &self.buffers[buffer as usize];
                rec.dispatch(
                    pipeline,
                    tb.binding,
                    &[count as u32, mode, first as u32],
                    (count as u32).div_ceil(64),
                );
                first += count;
            }
            rec.submit_and_wait()?;
            let list = self
                .probe
                .words()
                .ok_or_else(|| GpuError::Unsupported("probe buffer is not mapped".into()))?;
            for (slot, &i) in chunk.iter().enumerate() {
                out[i] = list[slot * PROBE_WORDS + 5];
                entries[i][5] = out[i];
            }
        }
        Ok(out)
    }
}

/// Elements per invocation for a piece: `unit`, or for a buffer's tail (which is not a
/// whole number of workgroups of `unit`) the largest halving of it that divides the
/// piece into whole workgroups, so that the run lengths, each its own pipeline, stay few.
/// Pieces are whole mebibytes, so a run of at most 1024 elements (or one of
/// elements / workgroup, a multiple of 4 by the same token) always fits.
fn run_length(piece_elements: u64, unit: u64) -> u64 {
    let group = u64::from(WORKGROUP);
    let mut per_inv = unit;
    while !piece_elements.is_multiple_of(per_inv * group) && per_inv.is_multiple_of(8) {
        per_inv /= 2;
    }
    if piece_elements.is_multiple_of(per_inv * group) {
        per_inv
    } else {
        piece_elements / group
    }
}

fn merge(into: &mut BatchCounters, batch: BatchCounters) {
    into.errors += batch.errors;
    into.zero_to_one += batch.zero_to_one;
    into.one_to_zero += batch.one_to_zero;
    for (a, b) in into.flipped_bits.iter_mut().zip(batch.flipped_bits) {
        *a += b;
    }
    for (a, b) in into.bit_position.iter_mut().zip(batch.bit_position) {
        *a += b;
    }
    into.records.extend(batch.records);
}

/// Walks the tested memory in dispatch-sized pieces, up or down, never letting a piece
/// cross a buffer's end or a 2^32-word boundary (the shaders' index arithmetic is 32-bit).
struct Cursor {
    spans: Vec<(u64, u64)>, // (first_word, elements) per buffer
    descending: bool,
    buffer: usize,
    done: u64, // elements already handed out in the current buffer
}

impl Cursor {
    fn new(buffers: &[TestBuffer], descending: bool) -> Cursor {
        Cursor {
            spans: buffers.iter().map(|b| (b.first_word, b.elements)).collect(),
            descending,
            buffer: 0,
            done: 0,
        }
    }

    fn next(&mut self, max_elements: u64) -> Option<Piece> {
        while self.buffer < self.spans.len() {
            let index = if self.descending {
                self.spans.len() - 1 - self.buffer
            } else {
                self.buffer
            };
            let (first_word, elements) = self.spans[index];
            if self.done >= elements {
                self.buffer += 1;
                self.done = 0;
                continue;
            }
            let left = elements - self.done;
            let take = left.min(max_elements);
            let (start, take) = if self.descending {
                let end = left;
                let start = end - take;
                // Cut at a 2^32-word boundary inside [start, end).
                let start_word = first_word + start * 4;
                let end_word = first_word + end * 4;
                let boundary = (end_word - 1) & !0xFFFF_FFFF;
                let start = if boundary > start_word {
                    (boundary - first_word) / 4
                } else {
                    start
                };
                (start, end - start)
            } else {
                let start = self.done;
                let start_word = first_word + start * 4;
                let boundary = (start_word | 0xFFFF_FFFF) + 1;
                let take = take.min((boundary - start_word) / 4);
                (start, take)
            };
            self.done += take;
            return Some(Piece {
                buffer: index,
                start,
                elements: take,
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_split_into_whole_workgroups_of_few_run_lengths() {
        let group = u64::from(WORKGROUP);
        let mib_elements = MIB / 16;
        // A whole unit's worth keeps the unit; whole-mebibyte tails halve it.
        assert_eq!(run_length(4 * mib_elements, 4096), 4096);
        assert_eq!(run_length(3 * mib_elements, 4096), 1024);
        assert_eq!(run_length(2 * mib_elements, 4096), 2048);
        for mib in 1..40u64 {
            for unit in [4u64, 16, 64, 1000, 4096, 6144] {
                let piece = mib * mib_elements;
                let per_inv = run_length(piece, unit);
                if unit.is_power_of_two() {
                    assert!(per_inv <= unit, "{mib} MiB, unit {unit}: {per_inv}");
                }
                assert!(
                    per_inv.is_multiple_of(4),
                    "{mib} MiB, unit {unit}: {per_inv}"
                );
                assert!(
                    piece.is_multiple_of(per_inv * group),
                    "{mib} MiB, unit {unit}: {per_inv}"
                );
            }
        }
    }
}
