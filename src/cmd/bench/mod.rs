//! `kiln bench vram`: the VRAM test's write and verify throughput next to the same
//! device's plain copy and fill bandwidth, measured in one run, as ratios.

pub mod telemetry;
pub mod watch;

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use std::sync::Arc;

use crate::error::AppError;
use crate::evidence::JsonlWriter;
use crate::gpu::{DeviceContext, DeviceInfo, Vulkan};
use crate::select::select_devices;
use crate::telemetry::sidecar::{RealClock, Sidecar};
use crate::units::{format_bytes, to_gib};
use crate::workload::KindTest;
use crate::workload::vram::engine::{AccessLayout, Engine, EngineConfig};
use crate::workload::vram::pattern::Pattern;

/// What `kiln bench vram` was asked to do.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Device selector; None: the first selected device.
    pub device: Option<String>,
    /// Bytes to sweep.
    pub bytes: u64,
    /// Timed repetitions.
    pub repeat: u32,
    /// Access layout override.
    pub layout: Option<AccessLayout>,
    /// Bound on every wait for the device.
    pub fence_timeout: Duration,
}

/// Measured rates, all in GiB/s (2^30 bytes per second), each the median over the
/// repetitions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchReport {
    /// Device name.
    pub device: String,
    /// Notes (CPU device only).
    pub notes: Vec<String>,
    /// Bytes swept.
    pub bytes: u64,
    /// Repetitions the medians are taken over.
    pub repeat: u32,
    /// Access layout.
    pub layout: AccessLayout,
    /// Own-address pattern writes, per GPU second.
    pub write_gib_s: f64,
    /// Own-address verification, per GPU second.
    pub verify_gib_s: f64,
    /// (bytes written + bytes verified) per wall second of both passes, first touch excluded.
    pub combined_gib_per_wall_s: f64,
    /// The copy ceiling: the best of `copies`.
    pub copy_gib_s: f64,
    /// Which copy reached `copy_gib_s`.
    #[serde(default)]
    pub copy_method: Option<CopyMethod>,
    /// Every copy measured, bytes read plus bytes written per second (GPU time; wall
    /// time for the host memcpy).
    #[serde(default)]
    pub copies: Vec<CopyRate>,
    /// `vkCmdFillBuffer` per GPU second.
    pub fill_gib_s: f64,
    /// verify / copy.
    pub verify_over_copy: f64,
    /// combined / copy.
    pub combined_over_copy: f64,
    /// write / fill.
    pub write_over_fill: f64,
    /// Combined traffic with the telemetry sidecar sampling at 10 Hz.
    pub combined_with_telemetry_gib_per_wall_s: f64,
    /// The same, in interleaved repetitions without it.
    pub combined_without_telemetry_gib_per_wall_s: f64,
    /// with / without (1.0: the sidecar costs nothing); noisy on a shared machine.
    pub telemetry_ratio: f64,
    /// Share of one core the sidecar spent reading its sources at 10 Hz (steady state):
    /// the loss it can cause, measured without the noise of the throughput ratio.
    pub telemetry_busy_share: f64,
    /// `gpu_timestamps` or `wall_clock`.
    pub timing_source: String,
}

/// A way of copying memory that `kiln bench vram` measures as a ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CopyMethod {
    /// `vkCmdCopyBuffer`, every buffer pair's region in one submission.
    CopyBufferRegions,
    /// `vkCmdCopyBuffer`, one region per submission.
    CopyBufferOneRegion,
    /// A compute shader in the test's access shape.
    ShaderCopy,
    /// Plain memcpy between host buffers on as many threads as the host has: on a CPU
    /// device, the memory the test sweeps is this same host memory.
    HostMemcpy,
}

impl CopyMethod {
    fn label(self) -> &'static str {
        match self {
            CopyMethod::CopyBufferRegions => "vkCmdCopyBuffer, all regions",
            CopyMethod::CopyBufferOneRegion => "vkCmdCopyBuffer, one region",
            CopyMethod::ShaderCopy => "shader copy",
            CopyMethod::HostMemcpy => "host memcpy",
        }
    }
}

/// One copy ceiling's median rate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CopyRate {
    /// How it copied.
    pub method: CopyMethod,
    /// Bytes read plus bytes written per second, GiB/s.
    pub gib_s: f64,
    /// Threads (host memcpy only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
}

/// Runs the benchmark.
pub fn bench_vram(opts: &BenchOptions) -> Result<BenchReport, AppError> {
    let (info, mut ctx, notes) = open_device(opts.device.as_deref(), opts.fence_timeout)?;
    let free = info.device_local_free_bytes();
    if opts.bytes > free {
        return Err(AppError::Usage(format!(
            "--bytes {} is more than the {} of device memory free on {}",
            format_bytes(opts.bytes),
            format_bytes(free),
            info.name
        )));
    }
    let mut cfg = EngineConfig::for_device(info.kind.is_gpu());
    if let Some(layout) = opts.layout {
        cfg.layout = layout;
    }
    let layout = cfg.layout;
    let limits = &info.limits;
    // At least eight buffers, so the copy has halves to move between.
    let max_buffer = limits
        .max_storage_buffer_range_bytes
        .min(limits.max_memory_allocation_size_bytes)
        .min(opts.bytes / 8);
    let (mut engine, stopped) = Engine::allocate(&mut ctx, cfg, opts.bytes, max_buffer, &|| false)?;
    if let Some(e) = stopped {
        return Err(AppError::Gpu(e));
    }
    let never = || false;
    // First touch: drivers may commit memory lazily; not timed.
    engine.write(&Pattern::address(0), &never)?;
    engine.verify(&Pattern::address(0), 0, &never)?;
    let rate = |bytes: u64, ns: u64| {
        if ns > 0 {
            to_gib(bytes) / (ns as f64 / 1e9)
        } else {
            0.0
        }
    };
    let (mut writes, mut verifies, mut combined, mut fills) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut device_copies: [(CopyMethod, Vec<f64>); 3] = [
        (CopyMethod::CopyBufferRegions, Vec::new()),
        (CopyMethod::CopyBufferOneRegion, Vec::new()),
        (CopyMethod::ShaderCopy, Vec::new()),
    ];
    for i in 0..opts.repeat {
        let p = Pattern::address(u64::from(i) + 1);
        let t = Instant::now();
        let w = engine.write(&p, &never)?;
        let v = engine.verify(&p, 16, &never)?;
        let wall = t.elapsed().as_secs_f64().max(1e-9);
        if v.counters.errors > 0 {
            return Err(AppError::Gpu(crate::gpu::GpuError::Unsupported(format!(
                "the benchmark read {} words wrong: run `kiln run` on this device",
                v.counters.errors
            ))));
        }
        writes.push(rate(w.bytes, w.gpu_ns));
        verifies.push(rate(v.bytes, v.gpu_ns));
        combined.push(to_gib(w.bytes + v.bytes) / wall);
        for (method, rates) in &mut device_copies {
            let c = match method {
                CopyMethod::CopyBufferRegions => engine.copy_halves(false)?,
                CopyMethod::CopyBufferOneRegion => engine.copy_halves(true)?,
                _ => engine.copy_halves_by_shader()?,
            };
            rates.push(rate(c.bytes, c.gpu_ns));
        }
        let f = engine.write(&Pattern::constant(i), &never)?;
        fills.push(rate(f.bytes, f.gpu_ns));
    }
    let (with_sidecar, without_sidecar, sidecar_share) =
        sidecar_overhead(&mut engine, &info, opts.repeat)?;
    let write_gib_s = median(&mut writes);
    let verify_gib_s = median(&mut verifies);
    let combined = median(&mut combined);
    let mut copies: Vec<CopyRate> = device_copies
        .iter_mut()
        .map(|(method, rates)| CopyRate {
            method: *method,
            gib_s: median(rates),
            threads: None,
        })
        .collect();
    if !info.kind.is_gpu() {
        // The CPU device's memory is host memory: what the host's own copy reaches is
        // a ceiling the test can be held to. Up to half the tested bytes each way.
        let bytes = (opts.bytes / 2).min(512 * crate::units::MIB) as usize;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let gb_s = host_memcpy_gbps(bytes, threads, opts.repeat.max(3));
        copies.push(CopyRate {
            method: CopyMethod::HostMemcpy,
            gib_s: 2.0 * gb_s * 1e9 / (1u64 << 30) as f64,
            threads: Some(threads),
        });
    }
    let best = copies
        .iter()
        .max_by(|a, b| a.gib_s.total_cmp(&b.gib_s))
        .map(|c| (c.method, c.gib_s));
    let copy_gib_s = best.map_or(0.0, |b| b.1);
    let fill_gib_s = median(&mut fills);
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    Ok(BenchReport {
        device: format!("{} {}", info.index, info.name),
        notes,
        bytes: engine.tested_bytes(),
        repeat: opts.repeat,
        layout,
        write_gib_s,
        verify_gib_s,
        combined_gib_per_wall_s: combined,
        copy_gib_s,
        copy_method: best.map(|b| b.0),
        copies,
        fill_gib_s,
        verify_over_copy: ratio(verify_gib_s, copy_gib_s),
        combined_over_copy: ratio(combined, copy_gib_s),
        write_over_fill: ratio(write_gib_s, fill_gib_s),
        combined_with_telemetry_gib_per_wall_s: with_sidecar,
        combined_without_telemetry_gib_per_wall_s: without_sidecar,
        telemetry_ratio: ratio(with_sidecar, without_sidecar),
        telemetry_busy_share: sidecar_share,
        timing_source: if engine.has_gpu_timestamps() {
            "gpu_timestamps"
        } else {
            "wall_clock"
        }
        .into(),
    })
}

/// Combined write + verify traffic per wall second with the live telemetry sidecar at
/// 10 Hz and without it, in interleaved repetitions (medians), so that both see the same
/// machine.
fn sidecar_overhead(
    engine: &mut Engine,
    info: &DeviceInfo,
    repeat: u32,
) -> Result<(f64, f64, f64), AppError> {
    let never = || false;
    let path =
        std::env::temp_dir().join(format!("kiln-bench-telemetry-{}.jsonl", std::process::id()));
    let (mut with, mut without) = (Vec::new(), Vec::new());
    let (mut busy, mut sampled) = (Duration::ZERO, Duration::ZERO);
    for i in 0..repeat {
        for telemetry in [true, false] {
            let sidecar = if telemetry {
                let _ = std::fs::remove_file(&path);
                let mut out = JsonlWriter::create(&path)?;
                let (sources, _) = crate::telemetry::live_sources(std::slice::from_ref(info));
                Some(
                    Sidecar::spawn(
                        sources,
                        Duration::from_millis(100),
                        Arc::new(RealClock::new(Instant::now())),
                        Box::new(move |r| out.append(&r)),
                    )
                    .map_err(|e| {
                        AppError::Usage(format!("could not start the telemetry thread: {e}"))
                    })?,
                )
            } else {
                None
            };
            // Let the sidecar finish its start (identity, kernel-log history) first: the
            // question is what steady sampling costs.
            std::thread::sleep(Duration::from_millis(300));
            let p = Pattern::address(1000 + u64::from(i));
            let t = Instant::now();
            let w = engine.write(&p, &never)?;
            let v = engine.verify(&p, 0, &never)?;
            let rate = to_gib(w.bytes + v.bytes) / t.elapsed().as_secs_f64().max(1e-9);
            if let Some(s) = sidecar {
                // Steady-state cost: what sampling took, over the time it ran.
                let before = s.busy();
                let window = Instant::now();
                std::thread::sleep(Duration::from_millis(500));
                busy += s.busy().saturating_sub(before);
                sampled += window.elapsed();
                s.stop();
            }
            if telemetry { &mut with } else { &mut without }.push(rate);
        }
    }
    let _ = std::fs::remove_file(&path);
    let share = busy.as_secs_f64() / sampled.as_secs_f64().max(1e-9);
    Ok((median(&mut with), median(&mut without), share))
}

/// Opens the device a benchmark runs on: the one selected, or the first of the
/// default selection.
fn open_device(
    selector: Option<&str>,
    fence_timeout: Duration,
) -> Result<(DeviceInfo, DeviceContext, Vec<String>), AppError> {
    let vulkan = Vulkan::new()?;
    let selectors: Vec<String> = selector.iter().map(|s| (*s).to_owned()).collect();
    let (devices, notes) = select_devices(&vulkan, &selectors)?;
    let info = devices
        .first()
        .ok_or_else(|| AppError::Usage("no device to benchmark".into()))?
        .clone();
    let mut ctx = DeviceContext::open(&vulkan, &info)?;
    ctx.set_fence_timeout(fence_timeout);
    Ok((info, ctx, notes))
}

/// The median: the machine may be shared, and one slow repetition should not decide.
pub(crate) fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// The benchmark for people.
pub fn summary(r: &BenchReport) -> String {
    let mut out = String::new();
    for n in &r.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out.push_str(&format!(
        "device {} ({} layout, {:.2} GiB, {}, medians of {} repetitions)\n",
        r.device,
        r.layout.name(),
        to_gib(r.bytes),
        r.timing_source,
        r.repeat
    ));
    let rows = [
        ("vram test write (own-address)", r.write_gib_s),
        ("vram test verify (own-address)", r.verify_gib_s),
        ("combined, per wall second", r.combined_gib_per_wall_s),
        ("vkCmdFillBuffer", r.fill_gib_s),
    ];
    for (label, rate) in rows {
        out.push_str(&format!("  {label:<36}{rate:8.2} GiB/s\n"));
    }
    for c in &r.copies {
        let label = match c.threads {
            Some(n) => format!("{} ({n} threads, r+w)", c.method.label()),
            None => format!("{} (r+w)", c.method.label()),
        };
        let best = if Some(c.method) == r.copy_method {
            "  <- copy ceiling"
        } else {
            ""
        };
        out.push_str(&format!("  {label:<36}{:8.2} GiB/s{best}\n", c.gib_s));
    }
    out.push_str(&format!(
        "  telemetry sidecar at 10 Hz: {:.2} GiB/s with, {:.2} GiB/s without (ratio {:.3}); it kept one core busy {:.3}% of the time\n",
        r.combined_with_telemetry_gib_per_wall_s,
        r.combined_without_telemetry_gib_per_wall_s,
        r.telemetry_ratio,
        r.telemetry_busy_share * 100.0
    ));
    out.push_str(&format!(
        "  ratios: verify/copy {:.2}, combined/copy {:.2}, write/fill {:.2}\n",
        r.verify_over_copy, r.combined_over_copy, r.write_over_fill
    ));
    out
}

/// What `kiln bench compute` was asked to do.
#[derive(Debug, Clone)]
pub struct ComputeBenchOptions {
    /// Device selector; None: the first selected device.
    pub device: Option<String>,
    /// How long to load the device.
    pub duration: Duration,
    /// Bound on every wait for the device.
    pub fence_timeout: Duration,
}

/// Compute rates next to the device's own roofline and, for GPUs kiln knows, the spec
/// sheet.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ComputeBenchReport {
    /// Device name.
    pub device: String,
    /// Notes (CPU device only).
    pub notes: Vec<String>,
    /// Verified fp32 operations (2 per FMA) per GPU second over the whole run, in 10^9.
    pub fp32_gflops: f64,
    /// The best round's verified fp32 rate.
    pub fp32_best_gflops: f64,
    /// The chain count the verified run chose for each kind (fastest on this device).
    #[serde(default)]
    pub chains: Vec<(crate::workload::compute::ComputeKind, u32)>,
    /// Verified int32 multiply-add operations per GPU second, in 10^9.
    pub int32_gops: f64,
    /// Verified fp16 operations per GPU second, in 10^9, where the device has fp16
    /// arithmetic.
    pub fp16_gflops: Option<f64>,
    /// The roofline: the same chains with nothing verified, fp32, in 10^9 per second.
    pub fp32_roofline_gflops: f64,
    /// The int32 roofline.
    pub int32_roofline_gops: f64,
    /// The fp16 roofline, where the device has fp16 arithmetic.
    pub fp16_roofline_gflops: Option<f64>,
    /// Each verified rate over its roofline.
    pub of_roofline: KindRatios,
    /// The spec sheet's fp32 rate, for GPUs kiln knows.
    pub theoretical_gflops: Option<f64>,
    /// Where the theoretical rate comes from, or why there is none.
    pub theoretical_source: String,
    /// The fp32 roofline over the spec sheet.
    pub ratio: Option<f64>,
    /// Multiply-adds verified (every one compared between two runs).
    pub verified_ops: u64,
    /// Wrong results found (should be none).
    pub faults: u64,
}

/// A rate per compute kind over its roofline.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KindRatios {
    /// fp32.
    pub fp32: f64,
    /// int32.
    pub int32: f64,
    /// fp16, where the device has it.
    pub fp16: Option<f64>,
}

/// The spec-sheet fp32 rate of a GPU kiln knows, in 10^9 operations per second, from the
/// one product table.
fn gpu_theoretical_gflops(name: &str) -> Option<(f64, String)> {
    crate::product::lookup(name).map(|p| {
        (
            p.fp32_tflops * 1e3,
            format!("{} spec sheet fp32 rate", p.name),
        )
    })
}

/// Runs the compute benchmark.
pub fn bench_compute(opts: &ComputeBenchOptions) -> Result<ComputeBenchReport, AppError> {
    use crate::workload::compute::{ComputeConfig, ComputeKind, ComputeTest};
    let (info, mut ctx, notes) = open_device(opts.device.as_deref(), opts.fence_timeout)?;
    let mut sink = crate::evidence::MemorySink::default();
    let report = ComputeTest {
        config: ComputeConfig::default(),
    }
    .run_report(
        &mut ctx,
        &crate::workload::RunControl::new(Some(opts.duration)),
        &mut sink,
    )
    .map_err(AppError::from)?;
    if let Some(e) = report.run.device_error {
        return Err(AppError::Gpu(crate::gpu::GpuError::Unsupported(e)));
    }
    let kind = |k: ComputeKind| report.kinds.iter().find(|r| r.kind == k);
    // The ceiling, measured on the same device in the same process. A CPU's peak depends
    // on how many FMA units each core has, which nothing here says, so a CPU device has
    // only this one.
    // The grid the verified run settled on, so that both run the same shape.
    let items = report.items;
    let dispatch = ComputeConfig::default().dispatch_target;
    let each = (opts.duration / 4).max(Duration::from_millis(500));
    let ran = |k: ComputeKind| kind(k).is_some();
    let mut roof = |k: ComputeKind| -> Result<Option<f64>, AppError> {
        if !ran(k) {
            return Ok(None);
        }
        crate::workload::compute::roofline(&mut ctx, k, items, dispatch, each)
            .map(Some)
            .map_err(AppError::Gpu)
    };
    let fp32_roof = roof(ComputeKind::Fp32)?.unwrap_or(0.0);
    let int32_roof = roof(ComputeKind::Int32)?.unwrap_or(0.0);
    let fp16_roof = roof(ComputeKind::Fp16)?;
    let over = |rate: f64, roof: f64| if roof > 0.0 { rate / roof } else { 0.0 };
    let fp32 = kind(ComputeKind::Fp32).map_or(0.0, |k| k.gops);
    let int32 = kind(ComputeKind::Int32).map_or(0.0, |k| k.gops);
    let fp16 = kind(ComputeKind::Fp16).map(|k| k.gops);
    let theoretical = if info.kind.is_gpu() {
        gpu_theoretical_gflops(&info.name)
    } else {
        None
    };
    Ok(ComputeBenchReport {
        device: format!("{} {}", info.index, info.name),
        notes,
        fp32_gflops: fp32,
        fp32_best_gflops: kind(ComputeKind::Fp32).map_or(0.0, |k| k.best_gops),
        int32_gops: int32,
        fp16_gflops: fp16,
        fp32_roofline_gflops: fp32_roof,
        int32_roofline_gops: int32_roof,
        fp16_roofline_gflops: fp16_roof,
        of_roofline: KindRatios {
            fp32: over(fp32, fp32_roof),
            int32: over(int32, int32_roof),
            fp16: fp16.zip(fp16_roof).map(|(r, roof)| over(r, roof)),
        },
        theoretical_gflops: theoretical.as_ref().map(|t| t.0),
        theoretical_source: theoretical.as_ref().map_or_else(
            || {
                if info.kind.is_gpu() {
                    "no spec sheet known for this GPU: the measured roofline is the ceiling".into()
                } else {
                    "a CPU's peak depends on its FMA units per core, which the system does not say: the measured roofline is the ceiling".into()
                }
            },
            |t| t.1.clone(),
        ),
        ratio: theoretical.map(|t| fp32_roof / t.0),
        chains: report.kinds.iter().map(|k| (k.kind, k.chains)).collect(),
        verified_ops: report.kinds.iter().map(|k| k.verified_ops).sum(),
        faults: report.faults(),
    })
}

/// Runs the matrix benchmark (`kiln bench matrix`): the verified matrix test next to
/// the same GEMM kernel unverified, on the selected device.
pub fn bench_matrix(
    opts: &ComputeBenchOptions,
) -> Result<
    (
        String,
        crate::workload::matrix::MatrixBenchReport,
        Vec<String>,
    ),
    AppError,
> {
    let (info, mut ctx, notes) = open_device(opts.device.as_deref(), opts.fence_timeout)?;
    let report = crate::workload::matrix::bench(&mut ctx, opts.duration).map_err(AppError::from)?;
    Ok((format!("{} {}", info.index, info.name), report, notes))
}

/// The compute benchmark for people.
pub fn compute_summary(r: &ComputeBenchReport) -> String {
    let mut out = String::new();
    for n in &r.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out.push_str(&format!("device {}\n", r.device));
    out.push_str("  verified over the whole run, against the same chains unverified (roofline):\n");
    out.push_str(&format!(
        "  fp32 FMA chains      {:10.1} G flop/s of {:.1} = {:.2} (best round {:.1})\n",
        r.fp32_gflops, r.fp32_roofline_gflops, r.of_roofline.fp32, r.fp32_best_gflops
    ));
    out.push_str(&format!(
        "  int32 multiply-add   {:10.1} G op/s   of {:.1} = {:.2}\n",
        r.int32_gops, r.int32_roofline_gops, r.of_roofline.int32
    ));
    match (r.fp16_gflops, r.fp16_roofline_gflops, r.of_roofline.fp16) {
        (Some(g), Some(roof), Some(ratio)) => out.push_str(&format!(
            "  fp16 FMA chains      {g:10.1} G flop/s of {roof:.1} = {ratio:.2}\n"
        )),
        _ => out.push_str("  fp16: the device has no fp16 arithmetic\n"),
    }
    match (r.theoretical_gflops, r.ratio) {
        (Some(t), Some(ratio)) => out.push_str(&format!(
            "  spec sheet fp32      {t:10.1} G flop/s ({}); roofline / spec sheet: {ratio:.3}\n",
            r.theoretical_source
        )),
        _ => out.push_str(&format!("  spec sheet: {}\n", r.theoretical_source)),
    }
    let chains: Vec<String> = r
        .chains
        .iter()
        .map(|(kind, n)| format!("{} {n}", kind.label()))
        .collect();
    out.push_str(&format!(
        "  verified {} multiply-adds, {} wrong; chains per work item: {}\n",
        r.verified_ops,
        r.faults,
        chains.join(", ")
    ));
    out
}

/// PCIe rates next to plain host memcpy, measured in one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PcieBenchReport {
    /// Device name.
    pub device: String,
    /// Notes (CPU device only).
    pub notes: Vec<String>,
    /// The probe's full result.
    pub probe: crate::workload::pcie::PcieReport,
    /// Host memcpy of the largest transfer size, GB/s (bytes copied per second): the
    /// best of one thread and as many as the host has, as a transfer may use them.
    pub memcpy_gbps: f64,
    /// The threads that reached `memcpy_gbps`.
    #[serde(default)]
    pub memcpy_threads: usize,
    /// The same memcpy on one thread, GB/s.
    #[serde(default)]
    pub memcpy_one_thread_gbps: f64,
    /// Host-to-device at the largest size / memcpy of that size.
    pub h2d_over_memcpy: f64,
    /// Device-to-host at the largest size / memcpy of that size.
    pub d2h_over_memcpy: f64,
    /// Corrupted transfers (should be none).
    pub corrupted: usize,
}

/// Runs the PCIe probe and a host memcpy of the same size.
pub fn bench_pcie(
    device: Option<String>,
    fence_timeout: Duration,
) -> Result<PcieBenchReport, AppError> {
    use crate::workload::pcie::{PcieConfig, PcieTest};
    let (info, mut ctx, notes) = open_device(device.as_deref(), fence_timeout)?;
    let mut sink = crate::evidence::MemorySink::default();
    let probe = PcieTest {
        config: PcieConfig::default(),
    }
    .run_report(&mut ctx, &crate::workload::RunControl::new(None), &mut sink)
    .map_err(AppError::from)?;
    let max = probe.largest_bytes as usize;
    let largest = probe.sizes.last().cloned();
    // Plain memcpy between two host buffers of the largest size, best of three, on one
    // thread and on as many as the host has: a driver may copy with several, and a
    // one-thread baseline would flatter the transfer.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rates: Vec<(usize, f64)> = [1, threads]
        .into_iter()
        .map(|n| (n, host_memcpy_gbps(max, n, 3)))
        .collect();
    let memcpy_one_thread_gbps = rates.first().map_or(0.0, |r| r.1);
    let (memcpy_threads, memcpy_gbps) = rates
        .iter()
        .copied()
        .fold((1, 0.0), |best, r| if r.1 > best.1 { r } else { best });
    let ratio = |a: f64| {
        if memcpy_gbps > 0.0 {
            a / memcpy_gbps
        } else {
            0.0
        }
    };
    Ok(PcieBenchReport {
        device: format!("{} {}", info.index, info.name),
        notes,
        h2d_over_memcpy: ratio(largest.as_ref().map_or(0.0, |s| s.h2d_gbps)),
        d2h_over_memcpy: ratio(largest.as_ref().map_or(0.0, |s| s.d2h_gbps)),
        corrupted: probe.corruption.len(),
        probe,
        memcpy_gbps,
        memcpy_threads,
        memcpy_one_thread_gbps,
    })
}

/// Plain memcpy between two host buffers of `bytes`, split over `threads`: bytes copied
/// per nanosecond (GB/s), best of `tries` after an untimed first touch.
fn host_memcpy_gbps(bytes: usize, threads: usize, tries: u32) -> f64 {
    let src = vec![0x5Au8; bytes];
    let mut dst = vec![0u8; bytes];
    dst.copy_from_slice(&src);
    let chunk = bytes.div_ceil(threads.max(1)).max(1);
    let mut best = Duration::MAX;
    for _ in 0..tries {
        let t = Instant::now();
        std::thread::scope(|scope| {
            for (d, s) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
                scope.spawn(move || d.copy_from_slice(std::hint::black_box(s)));
            }
        });
        best = best.min(t.elapsed());
    }
    std::hint::black_box(&dst);
    bytes as f64 / best.as_nanos().max(1) as f64
}

/// The PCIe benchmark for people.
pub fn pcie_summary(r: &PcieBenchReport) -> String {
    let mut out = String::new();
    for n in &r.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    let p = &r.probe;
    out.push_str(&format!(
        "device {} (upload staging: {}; readback staging: {})\n",
        r.device,
        p.upload_memory.join("+"),
        p.readback_memory.join("+")
    ));
    out.push_str("  bytes          H2D GB/s  D2H GB/s  both GB/s  H2D us  D2H us\n");
    for s in &p.sizes {
        out.push_str(&format!(
            "  {:<12} {:9.2} {:9.2} {:10.2} {:7.1} {:7.1}\n",
            s.bytes, s.h2d_gbps, s.d2h_gbps, s.bidir_gbps, s.h2d_latency_us, s.d2h_latency_us
        ));
    }
    out.push_str(&format!(
        "  host memcpy of {} bytes {:.2} GB/s on {} thread(s) ({:.2} on one); at that size H2D/memcpy {:.2}, D2H/memcpy {:.2}; {} transfers verified, {} corrupted\n",
        p.largest_bytes,
        r.memcpy_gbps,
        r.memcpy_threads,
        r.memcpy_one_thread_gbps,
        r.h2d_over_memcpy,
        r.d2h_over_memcpy,
        p.transfers_verified,
        r.corrupted
    ));
    for f in &p.findings {
        out.push_str(&format!("  finding: {f}\n"));
    }
    out
}

/// `kiln bench`.
pub fn command(args: crate::cmd::cli::BenchArgs) -> Result<i32, AppError> {
    use crate::cmd::edge::print_result;
    use crate::exit_code;
    check_flags(&args)?;
    if args.what == "matrix" {
        let (device, report, notes) = bench_matrix(&ComputeBenchOptions {
            device: args.device,
            duration: args.duration.unwrap_or(Duration::from_secs(6)),
            fence_timeout: crate::gpu::DEFAULT_FENCE_TIMEOUT,
        })?;
        let mut text: String = notes.iter().map(|n| format!("note: {n}\n")).collect();
        text.push_str(&format!("device {device}\n"));
        text.push_str(&crate::workload::matrix::bench_summary(&report));
        print_result(args.json, &report, &text);
        return Ok(if report.faults == 0 {
            exit_code::HEALTHY
        } else {
            exit_code::HARDWARE
        });
    }
    if args.what == "watch" {
        let report = watch::bench(
            &args.command,
            args.runs.unwrap_or(5) as usize,
            args.interval.unwrap_or(Duration::from_secs(1)),
        )?;
        print_result(args.json, &report, &watch::summary(&report));
        return Ok(exit_code::HEALTHY);
    }
    if args.what == "telemetry" {
        let report = telemetry::bench_telemetry(&telemetry::TelemetryBenchOptions {
            duration: args.duration.unwrap_or(Duration::from_secs(10)),
            interval: args.interval.unwrap_or(crate::telemetry::DEFAULT_INTERVAL),
        });
        print_result(args.json, &report, &telemetry::summary(&report));
        // Missed ticks are the sidecar's own failure to keep up: software.
        return Ok(if report.missed_ticks == 0 {
            exit_code::HEALTHY
        } else {
            exit_code::SOFTWARE
        });
    }
    if args.what == "pcie" {
        let report = bench_pcie(args.device, crate::gpu::DEFAULT_FENCE_TIMEOUT)?;
        print_result(args.json, &report, &pcie_summary(&report));
        return Ok(if report.corrupted == 0 {
            exit_code::HEALTHY
        } else {
            exit_code::HARDWARE
        });
    }
    if args.what == "compute" {
        let report = bench_compute(&ComputeBenchOptions {
            device: args.device,
            duration: args.duration.unwrap_or(Duration::from_secs(5)),
            fence_timeout: crate::gpu::DEFAULT_FENCE_TIMEOUT,
        })?;
        print_result(args.json, &report, &compute_summary(&report));
        return Ok(if report.faults == 0 {
            exit_code::HEALTHY
        } else {
            exit_code::HARDWARE
        });
    }
    let opts = BenchOptions {
        device: args.device,
        bytes: args.bytes.unwrap_or(crate::units::GIB),
        repeat: args.repeat.unwrap_or(5),
        layout: args
            .layout
            .map(crate::workload::vram::engine::AccessLayout::from),
        fence_timeout: crate::gpu::DEFAULT_FENCE_TIMEOUT,
    };
    let report = bench_vram(&opts)?;
    print_result(args.json, &report, &summary(&report));
    Ok(exit_code::HEALTHY)
}

/// Each benchmark takes its own options: one given to another would be ignored, and is
/// refused instead.
pub fn check_flags(args: &crate::cmd::cli::BenchArgs) -> Result<(), AppError> {
    for (set, flag, only) in [
        (args.bytes.is_some(), "--bytes", &["vram"][..]),
        (args.repeat.is_some(), "--repeat", &["vram"]),
        (args.layout.is_some(), "--layout", &["vram"]),
        (
            args.duration.is_some(),
            "--duration",
            &["compute", "matrix", "telemetry"],
        ),
        (
            args.interval.is_some(),
            "--interval",
            &["telemetry", "watch"],
        ),
        (args.runs.is_some(), "--runs", &["watch"]),
        (!args.command.is_empty(), "a command", &["watch"]),
    ] {
        if set && !only.contains(&args.what.as_str()) {
            return Err(AppError::Usage(format!(
                "{flag} applies to `kiln bench {}`, not `kiln bench {}`: it would be ignored",
                only.join("` and `kiln bench "),
                args.what
            )));
        }
    }
    if args.what == "watch" && args.command.is_empty() {
        return Err(AppError::Usage(watch::NEEDS_A_COMMAND.into()));
    }
    Ok(())
}
