//! `kiln bench matrix` (the verified rate against the same kernel unverified) and the
//! self-test's matrix part (planted faults found where they were planted).

use super::gpu::Gpu;
use super::locate::{correct_bits, reference_element};
use super::*;

/// What `kiln bench matrix` measured for one kind.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MatrixBenchKind {
    /// The kind.
    pub kind: MatrixKind,
    /// Where its products ran: `matrix_units` or `shared_memory`.
    #[serde(default = "super::shared_memory")]
    pub path: String,
    /// The matrix units' shape (M, N, K), where they ran the products.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<[u32; 3]>,
    /// Verified rate: operations per GPU second of whole rounds, in 10^12.
    pub verified_tflops: f64,
    /// The verified run's multiplications alone.
    pub gemm_tflops: f64,
    /// The same GEMM kernel back to back on the same edge, nothing generated or checked.
    pub roofline_tflops: f64,
    /// The verified rate over the roofline: what the checks cost.
    pub of_roofline: f64,
    /// Where the kind ran on the matrix units: the shared-memory kernel's roofline on
    /// the same edge, what the units are held against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alu_roofline_tflops: Option<f64>,
    /// The product's spec-sheet peak of this kind on its matrix units (dense), where
    /// kiln knows it.
    pub spec_matrix_tflops: Option<f64>,
}

/// What `kiln bench matrix` measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MatrixBenchReport {
    /// The multiplication path.
    pub path: String,
    /// Why the matrix units' path did not run.
    pub cooperative_matrix: String,
    /// The matrices' edge.
    pub size: u32,
    /// Per kind.
    pub kinds: Vec<MatrixBenchKind>,
    /// The product's spec-sheet fp32 rate on its ALUs, the fallback path's ceiling,
    /// where kiln knows it.
    pub spec_fp32_alu_tflops: Option<f64>,
    /// Where the spec-sheet figures come from, or why there are none.
    pub spec_source: String,
    /// Failed checks (should be none).
    pub faults: u64,
}

/// The spec-sheet peaks of `device` (its product's name, fp32 on the ALUs, fp16 and int8
/// on the matrix units, dense), from the one product table, where kiln knows it.
fn spec_peaks(device: &DeviceInfo) -> Option<(&'static str, f64, Option<f64>, Option<f64>)> {
    if !device.kind.is_gpu() {
        return None;
    }
    crate::product::lookup(&device.name).map(|p| {
        (
            p.name,
            p.fp32_tflops,
            p.matrix_fp16_tflops,
            p.matrix_int8_tops,
        )
    })
}

/// `kernel` on `edge`-square matrices back to back for `duration`, nothing generated or
/// checked between products: the ceiling the verified rate is held against, in 10^12
/// operations per GPU second, from the fastest product. A ceiling is the best the kernel
/// did: an average would fall with any other load on the device while the products were
/// timed (a neighbour's burst on a shared CPU device put the verified rate at 144% of it).
fn roofline(
    ctx: &mut DeviceContext,
    kernel: &Kernel,
    edge: u32,
    pieces: u32,
    duration: Duration,
) -> GpuResult<f64> {
    let mut gpu = Gpu::open(ctx, edge, 0)?;
    gpu.pieces = pieces;
    gpu.prepare(kernel.kind, 1, true)?;
    // Untimed: the first dispatch may finish compiling the pipeline.
    gpu.multiply(kernel)?;
    let started = Instant::now();
    let mut fastest_ns = u64::MAX;
    while fastest_ns == u64::MAX || started.elapsed() < duration {
        fastest_ns = fastest_ns.min(gpu.multiply(kernel)?);
    }
    Ok(gpu.layout.ops() as f64 / fastest_ns.max(1) as f64 / 1e3)
}

/// `kiln bench matrix`: the verified test for half of `duration`, then each kind's
/// roofline on the same edge for the rest (and, for a kind on the matrix units, the
/// shared-memory kernel's too).
pub fn bench(
    ctx: &mut DeviceContext,
    duration: Duration,
) -> Result<MatrixBenchReport, WorkloadError> {
    let info = ctx.info().clone();
    let mut sink = crate::evidence::MemorySink::default();
    let report = MatrixTest {
        config: MatrixConfig::default(),
    }
    .run_report(ctx, &RunControl::new(Some(duration / 2)), &mut sink)?;
    if let Some(e) = &report.run.device_error {
        return Err(WorkloadError::Gpu(GpuError::Unsupported(e.clone())));
    }
    let spec = spec_peaks(&info);
    let rooflines = report.kinds.len() + report.kinds.iter().filter(|k| k.shape.is_some()).count();
    let each = (duration / 2 / rooflines.max(1) as u32).max(Duration::from_millis(300));
    let mut kinds = Vec::new();
    for k in &report.kinds {
        // The kernel the verified rounds ran on: the shared-memory one where the units
        // were not used, whatever the device lists (a driver may fail to build theirs).
        let kernel = match k.shape {
            Some(_) => Kernel::choose(k.kind, &info, true).0,
            None => Kernel::shared_memory(k.kind),
        };
        let mut roof_of = |kernel: &Kernel| {
            roofline(
                ctx,
                kernel,
                report.size,
                report.dispatches_per_product,
                each,
            )
        };
        let roof = roof_of(&kernel)?;
        let alu_roofline_tflops = match kernel.shape {
            Some(_) => Some(roof_of(&Kernel::shared_memory(k.kind))?),
            None => None,
        };
        kinds.push(MatrixBenchKind {
            kind: k.kind,
            path: k.path.clone(),
            shape: k.shape,
            alu_roofline_tflops,
            verified_tflops: k.verified_tflops,
            gemm_tflops: k.tflops,
            roofline_tflops: roof,
            of_roofline: if roof > 0.0 {
                k.verified_tflops / roof
            } else {
                0.0
            },
            spec_matrix_tflops: spec.and_then(|(_, _, fp16, int8)| match k.kind {
                MatrixKind::Fp16 => fp16,
                MatrixKind::Int8 => int8,
                MatrixKind::Fp32 => None,
            }),
        });
    }
    Ok(MatrixBenchReport {
        path: report.path.clone(),
        cooperative_matrix: report.cooperative_matrix.clone(),
        size: report.size,
        kinds,
        spec_fp32_alu_tflops: spec.map(|s| s.1),
        spec_source: match spec {
            Some((key, ..)) => format!("{key} spec sheet (dense)"),
            None if info.kind.is_gpu() => {
                "no spec sheet known for this GPU: the measured roofline is the ceiling".into()
            }
            None => "a CPU device has no spec sheet: the measured roofline is the ceiling".into(),
        },
        faults: report.faults(),
    })
}

/// `kiln bench matrix` for people.
pub fn bench_summary(r: &MatrixBenchReport) -> String {
    let mut out = format!(
        "  path {} on {}-square matrices; cooperative matrices: {}\n  verified (whole rounds) against the same GEMM kernel unverified (roofline):\n",
        r.path, r.size, r.cooperative_matrix
    );
    for k in &r.kinds {
        out.push_str(&format!(
            "  {:5} verified {:>14} of {:>14} = {:.2}   (multiplying alone {}){}\n",
            k.kind.name(),
            k.kind.rate(k.verified_tflops),
            k.kind.rate(k.roofline_tflops),
            k.of_roofline,
            k.kind.rate(k.gemm_tflops),
            k.spec_matrix_tflops
                .map(|s| format!("; matrix units' spec {}", k.kind.rate(s)))
                .unwrap_or_default()
        ));
        if let (Some([m, n, kk]), Some(alu)) = (k.shape, k.alu_roofline_tflops) {
            out.push_str(&format!(
                "        on the matrix units ({m}x{n}x{kk}); the shared-memory kernel's roofline {}: units {:.2}x the ALUs\n",
                k.kind.rate(alu),
                if alu > 0.0 { k.roofline_tflops / alu } else { 0.0 }
            ));
        }
    }
    if let Some(fp32) = r.spec_fp32_alu_tflops {
        let roof = r
            .kinds
            .iter()
            .find(|k| k.kind == MatrixKind::Fp32)
            .map_or(0.0, |k| k.roofline_tflops);
        out.push_str(&format!(
            "  fp32 roofline over the ALUs' spec ({fp32:.1} TFLOP/s): {:.2}\n",
            roof / fp32
        ));
    }
    out.push_str(&format!(
        "  spec: {}\n  failed checks: {}\n",
        r.spec_source, r.faults
    ));
    out
}

/// One planted fault of `kiln selftest`'s matrix part and whether it was found as
/// planted.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MatrixSelfCheck {
    /// The kind multiplied.
    pub kind: MatrixKind,
    /// Where its products ran: `matrix_units` or `shared_memory`.
    #[serde(default = "super::shared_memory")]
    pub path: String,
    /// What was planted, in words.
    pub planted: String,
    /// True when it was found exactly where and as it was planted, and nothing else.
    pub found: bool,
    /// What the test reported.
    pub detail: String,
}

/// The first few records of `r`, in words.
fn first_places(r: &MatrixReport) -> String {
    r.records
        .iter()
        .take(3)
        .map(MatrixMismatch::place)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The self-test's matrix part: in each kind the device runs, one element with one bit
/// flipped (at a place and bit chosen from `seed`) must come back located at its
/// coordinates with the value it should have and the bits planted, and one wrong tile
/// must be named as that tile and nothing else.
pub fn self_check(
    ctx: &mut DeviceContext,
    seed: u64,
) -> Result<Vec<MatrixSelfCheck>, WorkloadError> {
    const EDGE: u32 = 256;
    let mut out = Vec::new();
    let kinds: Vec<MatrixKind> = MatrixKind::ALL
        .into_iter()
        .filter(|&k| k != MatrixKind::Fp16 || ctx.info().shader_float16)
        .collect();
    for (n, kind) in kinds.into_iter().enumerate() {
        let h = hash(seed as u32 ^ (seed >> 32) as u32 ^ (n as u32).wrapping_mul(0x9E37_79B9));
        let (row, col) = (h % EDGE, hash(h) % EDGE);
        // A low bit: the hardest to see (a float's stays within the integer's rounding).
        let xor = 1 << (hash(h ^ 1) % 4);
        let tile = [hash(h ^ 2) % (EDGE / TILE), hash(h ^ 3) % (EDGE / TILE)];
        let config = |plant| MatrixConfig {
            kinds: vec![kind],
            size: Some(EDGE),
            rounds: Some(1),
            plant: Some(plant),
            ..MatrixConfig::default()
        };
        let mut sink = crate::evidence::MemorySink::default();
        let element = PlantedFault {
            row,
            col,
            rows: 1,
            cols: 1,
            xor,
        };
        let r = MatrixTest {
            config: config(element),
        }
        .run_report(ctx, &RunControl::new(None), &mut sink)?;
        let expected = reference_element(MatrixConfig::default().seed, EDGE, row, col);
        let bits = correct_bits(kind, expected) ^ xor;
        let located: Vec<&MatrixMismatch> = r.records.iter().filter(|m| m.row.is_some()).collect();
        let found = r.run.device_error.is_none()
            && located.len() == 1
            && located[0].row == Some(row)
            && located[0].col == Some(col)
            && located[0].expected == Some(expected as f64)
            && located[0].actual_bits == Some(bits);
        let path = |r: &MatrixReport| {
            r.kinds
                .first()
                .map_or_else(shared_memory, |k| k.path.clone())
        };
        out.push(MatrixSelfCheck {
            kind,
            path: path(&r),
            planted: format!("bits {xor:#x} of element ({row}, {col})"),
            found,
            detail: first_places(&r),
        });
        let wrong_tile = PlantedFault {
            row: tile[0] * TILE,
            col: tile[1] * TILE,
            rows: TILE,
            cols: TILE,
            xor: 1 << 20,
        };
        let r = MatrixTest {
            config: config(wrong_tile),
        }
        .run_report(ctx, &RunControl::new(None), &mut sink)?;
        let found = r.run.device_error.is_none()
            && r.records
                .iter()
                .any(|m| m.check == "wrong_tile" && m.tile == tile)
            && r.records.iter().all(|m| m.tile == tile);
        out.push(MatrixSelfCheck {
            kind,
            path: path(&r),
            planted: format!("wrong tile ({}, {})", tile[0], tile[1]),
            found,
            detail: first_places(&r),
        });
    }
    Ok(out)
}
