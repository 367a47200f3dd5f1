//! Matrix multiplication with every result verified: the load burn-in tools put on a GPU
//! (its FLOPs, power and heat are there) and the fault class large fleets report as
//! silent data corruption in matrix units, which multiply-add chains never touch.
//!
//! Inputs are generated on the GPU from a seed (a new set every few rounds, multiplied
//! in each kind in turn); each round multiplies them (GEMM) and checks the product two
//! ways. Algorithm-based fault tolerance: every row and column of
//! every output tile is summed and held against checksums computed from the inputs on
//! another path (int32 units). The inputs are small integers, so every product and sum is
//! exact in every type and the comparison is exact, not a tolerance (shaders/
//! matrix_common.glsl). And a share of the tiles is recomputed on other workgroups and
//! compared bit for bit. A wrong element is then located at its tile, row and column,
//! with the value it should have (computed again on the CPU) and the workgroups that
//! computed it.
//!
//! Two paths, one result model. Where a device offers matrix units through
//! `VK_KHR_cooperative_matrix`, the report says so; the multiplication runs here on the
//! tiled shared-memory kernel (the ALUs, shared memory, registers and L2), which every
//! Vulkan device runs. The report names the path and why the other did not run.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::power::{LOAD_PERIOD, Pacer, PowerController, PowerTargetReport};
use super::settings::{SettingError, SettingsTable};
use super::show::{Bar, Metric, MetricFamily, Section};
use super::{
    Envelope, Kind, PlanDetail, Report, RunControl, STOPPED_ON_REQUEST, Workload, WorkloadError,
    WorkloadOutcome, WorkloadStatus, record_device_error,
};
use crate::evidence::{Event, EventSink};
use crate::finding::{Class, Confidence, Finding, Severity, finding};
use crate::gpu::{
    Binding, BufferKind, DeviceContext, DeviceInfo, GpuBuffer, GpuError, GpuResult, ShaderCode,
    embedded_shader,
};
use crate::limits::Bounds;

const GEMM_F32: ShaderCode = embedded_shader!("matrix_gemm_f32");
const GEMM_F16: ShaderCode = embedded_shader!("matrix_gemm_f16");
const GEMM_I8: ShaderCode = embedded_shader!("matrix_gemm_i8");
const GEN: ShaderCode = embedded_shader!("matrix_gen");
const SUMS: ShaderCode = embedded_shader!("matrix_sums");
const CHECK: ShaderCode = embedded_shader!("matrix_check");
const PLANT: ShaderCode = embedded_shader!("matrix_plant");

/// Output tile edge (TILE in matrix_common.glsl).
const TILE: u32 = 64;
const TILE_ELEMS: u32 = TILE * TILE;
/// Invocations per workgroup of every matrix shader.
const WORKGROUP: u32 = 256;
/// Counters, then records (matrix_common.glsl).
const C_ROWS: usize = 0;
const C_COLS: usize = 1;
const C_INVALID: usize = 2;
const C_NONFINITE: usize = 3;
const C_REDUNDANT: usize = 4;
const C_SLOTS: usize = 5;
const C_ELEMENT_SLOTS: usize = 6;
const RECORDS_AT: usize = 16;
const RECORD_WORDS: usize = 6;
const REC_ROW: u32 = 1;
const REC_COL: u32 = 2;
const REC_INVALID: u32 = 3;
const REC_REDUNDANT: u32 = 4;
/// Edges the calibration tries, smallest first: powers of two, so that tiles are too.
const MIN_EDGE: u32 = 128;
/// The largest edge: K x 961 must stay below 2^24 for the products' sums to be exact in
/// fp32 (matrix_common.glsl).
const MAX_EDGE: u32 = 16384;
/// Rounds that multiply one set of inputs (each in the next kind, each recomputing other
/// tiles) before the next set: the checksums are computed once per set.
const INPUT_ROUNDS: u32 = 4;
/// One tile in this many is recomputed on another workgroup each round.
const RECOMPUTE_ONE_IN: u32 = 16;
/// Elements located per round at most (each costs a readback and K multiply-adds on
/// the CPU): a card whose every tile is wrong is still named, tile by tile.
const LOCATE_MAX: usize = 256;
/// Candidate elements per tile at most: more is a wrong tile, said as one.
const LOCATE_PER_TILE: usize = 64;
/// The share of the device-local memory free the matrices take at most: `heat` runs the
/// VRAM test beside them.
const MEMORY_SHARE: u64 = 8;
/// Workgroups per dispatch at most (maxComputeWorkGroupCount is at least 65535).
const MAX_GROUPS: u32 = 65_535;

/// `size`: the matrices' edge.
const EDGE_BOUNDS: Bounds<u64> = Bounds {
    min: MIN_EDGE as u64,
    max: MAX_EDGE as u64,
};

/// The input and accumulator types a pass multiplies in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatrixKind {
    /// fp32 inputs, fp32 fused multiply-add.
    Fp32,
    /// fp16 inputs and products, fp32 accumulation, where the device has fp16 arithmetic.
    Fp16,
    /// int8 inputs, int32 multiply-accumulate.
    Int8,
}

impl MatrixKind {
    /// Every kind, in the order rounds take them.
    pub const ALL: [MatrixKind; 3] = [MatrixKind::Fp32, MatrixKind::Fp16, MatrixKind::Int8];

    /// Its name in profiles and reports (`fp16`).
    pub fn name(self) -> &'static str {
        match self {
            MatrixKind::Fp32 => "fp32",
            MatrixKind::Fp16 => "fp16",
            MatrixKind::Int8 => "int8",
        }
    }

    /// The name of this kind's rate in comparisons (`matrix_fp16_tflops`).
    pub fn rate_name(self) -> &'static str {
        match self {
            MatrixKind::Fp32 => "matrix_fp32_tflops",
            MatrixKind::Fp16 => "matrix_fp16_tflops",
            MatrixKind::Int8 => "matrix_int8_tops",
        }
    }

    /// The unit of its rate: floating-point operations, or integer ones.
    pub fn unit(self) -> &'static str {
        match self {
            MatrixKind::Int8 => "TOP/s",
            _ => "TFLOP/s",
        }
    }

    /// A rate in 10^12 of this kind's operations per second, in words: tera where it is
    /// at least one, giga below (a CPU device's).
    pub fn rate(self, tera_per_s: f64) -> String {
        let unit = self.unit();
        if tera_per_s >= 1.0 {
            format!("{tera_per_s:.2} {unit}")
        } else {
            format!("{:.1} G{}", tera_per_s * 1e3, &unit[1..])
        }
    }

    fn code(self) -> u32 {
        match self {
            MatrixKind::Fp32 => 0,
            MatrixKind::Fp16 => 1,
            MatrixKind::Int8 => 2,
        }
    }

    fn shader(self) -> ShaderCode {
        match self {
            MatrixKind::Fp32 => GEMM_F32,
            MatrixKind::Fp16 => GEMM_F16,
            MatrixKind::Int8 => GEMM_I8,
        }
    }

    /// Words of the GEMM's input buffer per input word of four elements.
    fn words_per_source_word(self) -> u32 {
        match self {
            MatrixKind::Fp32 => 4,
            MatrixKind::Fp16 => 2,
            MatrixKind::Int8 => 1,
        }
    }

    /// An output word as a number: fp32 bits for the float kinds, an int32 for int8.
    fn value(self, bits: u32) -> f64 {
        match self {
            MatrixKind::Int8 => f64::from(bits as i32),
            _ => f64::from(f32::from_bits(bits)),
        }
    }

    fn parse(name: &str) -> Option<MatrixKind> {
        MatrixKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// A fault planted in the product between the multiplication and the checks (self-test
/// and detector tests): XOR of `xor` into `rows` x `cols` elements from (`row`, `col`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlantedFault {
    /// First row.
    pub row: u32,
    /// First column.
    pub col: u32,
    /// Rows (1 for one element).
    pub rows: u32,
    /// Columns.
    pub cols: u32,
    /// The bits flipped.
    pub xor: u32,
}

/// Settings of the matrix test.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MatrixConfig {
    /// Kinds, alternated round by round; fp16 is skipped (and said) where the device
    /// lacks it.
    pub kinds: Vec<MatrixKind>,
    /// The matrices' edge (M = N = K), a power of two; None: sized from the device's free
    /// memory and the dispatch target.
    pub size: Option<u32>,
    /// Target GPU time of one GEMM dispatch (larger products are split into several).
    pub dispatch_target: Duration,
    /// Rounds to run when there is no time budget.
    pub rounds: Option<u32>,
    /// Mismatch records kept (the counts are never capped).
    pub record_capacity: u32,
    /// Seed of the inputs.
    pub seed: u32,
    /// A fault to plant in every round's product (self-test and detector tests).
    #[serde(default)]
    pub plant: Option<PlantedFault>,
    /// Hold board power at this percentage of the enforced limit by setting the duty
    /// cycle; None: flat out.
    #[serde(default)]
    pub power_target: Option<u32>,
}

impl Default for MatrixConfig {
    fn default() -> Self {
        MatrixConfig {
            kinds: MatrixKind::ALL.to_vec(),
            size: None,
            dispatch_target: Duration::from_millis(40),
            rounds: None,
            record_capacity: 256,
            seed: 0x6D61_7478,
            plant: None,
            power_target: None,
        }
    }
}

/// One wrong result, located as far as the checks allow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixMismatch {
    /// The kind multiplied.
    pub kind: MatrixKind,
    /// Round, from 0.
    pub round: u32,
    /// Which check found it: `checksum` (a row or column sum of its tile), `invalid_value`
    /// (not the integer every correct element is), `redundant_run` (the recomputation
    /// differs), or `wrong_tile` (too many rows and columns of one tile to locate each).
    pub check: String,
    /// The output tile (its row and column of tiles).
    pub tile: [u32; 2],
    /// The output element's row, where located.
    pub row: Option<u32>,
    /// The output element's column, where located.
    pub col: Option<u32>,
    /// What it should be (computed again on the CPU), where located.
    pub expected: Option<f64>,
    /// What the device wrote, where located.
    pub actual: Option<f64>,
    /// The bits it wrote.
    pub actual_bits: Option<u32>,
    /// The workgroup whose result is wrong (the first run's, unless only the
    /// recomputation is).
    pub workgroup: u32,
    /// The workgroup of the recomputation, for a tile that was recomputed.
    pub second_workgroup: Option<u32>,
    /// For a wrong tile: its rows and columns that disagree with their checksums, as far
    /// as the records held them (half the record capacity is for rows and columns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_cols_wrong: Option<[u32; 2]>,
}

/// Per-kind results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MatrixKindResult {
    /// The kind.
    pub kind: MatrixKind,
    /// Rounds completed (a product and its checks each).
    pub rounds: u32,
    /// Operations (two per multiply-add) whose results were checked.
    pub verified_ops: u64,
    /// Tile rows and columns whose sums disagreed with their checksums.
    pub checksum_mismatches: u64,
    /// Elements that were not the integer every correct element is (float kinds).
    pub invalid_values: u64,
    /// Of those, NaN or infinite.
    pub nonfinite: u64,
    /// Elements whose recomputation on another workgroup differed.
    pub redundant_mismatches: u64,
    /// Tiles recomputed.
    pub tiles_recomputed: u64,
    /// Wrong elements located at their coordinates.
    pub located: u64,
    /// GPU seconds in the timed rounds' multiplications: every round but the kind's
    /// first, whose dispatches may include a driver finishing its pipelines (lavapipe
    /// compiles at the first dispatch); the first alone where it is the only one.
    pub gemm_s: f64,
    /// GPU seconds in the timed rounds (inputs, checksums, multiplication,
    /// recomputation, checks).
    pub round_s: f64,
    /// Operations in the timed rounds.
    #[serde(default)]
    pub timed_ops: u64,
    /// Multiplication rate: operations per GEMM second, in 10^12.
    pub tflops: f64,
    /// Verified rate: operations per second of whole rounds, in 10^12.
    pub verified_tflops: f64,
    /// The best single multiplication's rate.
    pub best_tflops: f64,
}

impl MatrixKindResult {
    fn new(kind: MatrixKind) -> MatrixKindResult {
        MatrixKindResult {
            kind,
            rounds: 0,
            verified_ops: 0,
            checksum_mismatches: 0,
            invalid_values: 0,
            nonfinite: 0,
            redundant_mismatches: 0,
            tiles_recomputed: 0,
            located: 0,
            gemm_s: 0.0,
            round_s: 0.0,
            timed_ops: 0,
            tflops: 0.0,
            verified_tflops: 0.0,
            best_tflops: 0.0,
        }
    }

    /// Every check that failed.
    pub fn faults(&self) -> u64 {
        self.checksum_mismatches + self.invalid_values + self.redundant_mismatches
    }
}

/// Everything the matrix test found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MatrixReport {
    /// The multiplication path that ran (`shared_memory`).
    pub path: String,
    /// Why the matrix units' path (cooperative matrices) did not run.
    pub cooperative_matrix: String,
    /// The matrices' edge (M = N = K).
    pub size: u32,
    /// Output tile edge.
    pub tile: u32,
    /// GEMM dispatches per product.
    pub dispatches_per_product: u32,
    /// Per kind that ran.
    pub kinds: Vec<MatrixKindResult>,
    /// Kinds not run, and why.
    pub skipped: Vec<String>,
    /// The first wrong results.
    pub records: Vec<MatrixMismatch>,
    /// What the power target achieved, where the load held one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<PowerTargetReport>,
    /// How its run ended and how long it took.
    #[serde(flatten)]
    pub run: Envelope,
}

impl MatrixReport {
    /// Every check that failed, over every kind.
    pub fn faults(&self) -> u64 {
        self.kinds.iter().map(MatrixKindResult::faults).sum()
    }

    fn verified_ops(&self) -> u64 {
        self.kinds.iter().map(|k| k.verified_ops).sum()
    }
}

impl Report for MatrixReport {
    fn envelope(&self) -> &Envelope {
        &self.run
    }

    fn envelope_mut(&mut self) -> &mut Envelope {
        &mut self.run
    }

    fn status(&self) -> WorkloadStatus {
        let began = self.kinds.iter().any(|k| k.rounds > 0);
        WorkloadStatus::from_evidence(
            (self.faults() > 0).then_some(WorkloadStatus::Failed),
            began,
            self.run.cut_short(),
        )
    }

    fn headline(&self) -> String {
        let verified = self.verified_ops() as f64;
        match self.status() {
            WorkloadStatus::Failed | WorkloadStatus::SoftwareFault => {
                let first = self
                    .records
                    .first()
                    .map(|m| format!(": first {}", m.place()))
                    .unwrap_or_default();
                format!(
                    "{} failed checks in {verified:.3e} verified matrix operations (silent data corruption){first}",
                    self.faults()
                )
            }
            WorkloadStatus::NotRun => format!(
                "nothing ran: {}",
                self.run.why_cut_short().unwrap_or("no round completed")
            ),
            WorkloadStatus::Incomplete => format!(
                "no wrong result in {verified:.3e} verified matrix operations, but it stopped early: {}",
                self.run.why_cut_short().unwrap_or("unknown")
            ),
            WorkloadStatus::Passed => format!(
                "no wrong result in {verified:.3e} verified matrix operations ({})",
                self.kinds
                    .iter()
                    .filter(|k| k.rounds > 0)
                    .map(|k| format!("{} {}", k.kind.name(), k.kind.rate(k.verified_tflops)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

impl MatrixMismatch {
    /// Where it is and what it is, in a few words.
    pub fn place(&self) -> String {
        let tile = format!("tile ({}, {})", self.tile[0], self.tile[1]);
        match (self.row, self.col, self.rows_cols_wrong) {
            (Some(r), Some(c), _) => format!(
                "{} element ({r}, {c}) in {tile}: expected {} got {} (bits {:08x}), workgroup {}{} [{} round {}]",
                self.kind.name(),
                self.expected.map_or("?".into(), |v| v.to_string()),
                self.actual.map_or("?".into(), |v| v.to_string()),
                self.actual_bits.unwrap_or(0),
                self.workgroup,
                self.second_workgroup
                    .map(|w| format!(" (recomputed on workgroup {w})"))
                    .unwrap_or_default(),
                self.check,
                self.round
            ),
            (_, _, Some([rows, cols])) => format!(
                "{} {tile} wrong: {rows} rows and {cols} columns disagree with their checksums, workgroup {} [round {}]",
                self.kind.name(),
                self.workgroup,
                self.round
            ),
            _ => format!(
                "{} {tile} [{} round {}]",
                self.kind.name(),
                self.check,
                self.round
            ),
        }
    }
}

/// The `matrix` workload.
pub struct Matrix;

/// Its Prometheus families.
const METRICS: &[MetricFamily] = &[
    MetricFamily {
        name: "kiln_matrix_failed_checks",
        help: "Matrix checks that failed (checksum rows and columns, invalid values, recomputations that differ).",
    },
    MetricFamily {
        name: "kiln_matrix_verified_tflops",
        help: "Verified matrix multiplication rate of the first kind run, in 10^12 operations per second.",
    },
];

impl Kind for Matrix {
    const NAME: &'static str = "matrix";
    const DEFAULT_WEIGHT: u32 = 1;
    const METRICS: &'static [MetricFamily] = METRICS;
    type Settings = MatrixConfig;
    type Result = MatrixReport;

    fn from_profile(table: &mut dyn SettingsTable) -> Result<MatrixConfig, SettingError> {
        let mut config = MatrixConfig {
            rounds: table.count("rounds", &crate::limits::bounds::ROUNDS)?,
            power_target: super::power::power_target_setting(table)?,
            ..MatrixConfig::default()
        };
        if let Some(names) = table.strings("kinds")? {
            let mut kinds = Vec::new();
            for name in &names {
                let kind = MatrixKind::parse(name).ok_or_else(|| {
                    SettingError::new(
                        "kinds",
                        format!(
                            "unknown matrix kind {} (known: fp32, fp16, int8)",
                            crate::text::quote(name)
                        ),
                    )
                })?;
                if !kinds.contains(&kind) {
                    kinds.push(kind);
                }
            }
            if kinds.is_empty() {
                return Err(SettingError::new("kinds", "names no matrix kind"));
            }
            config.kinds = kinds;
        }
        if let Some(edge) = table.count("size", &EDGE_BOUNDS)? {
            if !edge.is_power_of_two() {
                return Err(SettingError::new(
                    "size",
                    format!("the matrices' edge must be a power of two, not {edge}"),
                ));
            }
            config.size = Some(edge);
        }
        Ok(config)
    }

    fn build(settings: &MatrixConfig) -> Vec<Box<dyn Workload + Send>> {
        vec![Box::new(MatrixTest {
            config: settings.clone(),
        })]
    }

    fn describe(settings: &MatrixConfig, device: &DeviceInfo) -> Result<PlanDetail, String> {
        let edge = match settings.size {
            Some(e) => {
                fits(e, device)?;
                e.to_string()
            }
            None => format!("up to {}", max_edge(device)),
        };
        let kinds: Vec<&str> = settings
            .kinds
            .iter()
            .filter(|&&k| k != MatrixKind::Fp16 || device.shader_float16)
            .map(|k| k.name())
            .collect();
        Ok(PlanDetail {
            detail: format!(
                "verified GEMM ({}) on {edge}-square matrices, shared-memory path{}",
                kinds.join("/"),
                settings
                    .power_target
                    .map(|p| format!(", power held at {p}% of the limit"))
                    .unwrap_or_default()
            ),
            ..PlanDetail::default()
        })
    }

    fn judge(result: &MatrixReport) -> Vec<Finding> {
        let mut out = Vec::new();
        let faults = result.faults();
        if faults > 0 {
            let nonfinite: u64 = result.kinds.iter().map(|k| k.nonfinite).sum();
            let first = result
                .records
                .first()
                .map(|m| format!("; first: {}", m.place()))
                .unwrap_or_default();
            out.push(finding(
                "MATRIX_MISMATCH",
                Class::Hardware,
                Severity::Critical,
                Confidence::High,
                format!(
                    "{faults} failed checks of matrix products (silent data corruption in the matrix or ALU path){first}"
                ),
                json!({
                    "failed_checks": faults,
                    "nonfinite": nonfinite,
                    "per_kind": result.kinds.iter().map(|k| json!({
                        "kind": k.kind,
                        "checksum_mismatches": k.checksum_mismatches,
                        "invalid_values": k.invalid_values,
                        "redundant_mismatches": k.redundant_mismatches,
                        "located": k.located,
                    })).collect::<Vec<_>>(),
                    "records": result.records.iter().take(8).collect::<Vec<_>>(),
                }),
                "rerun the matrix test with the rma profile (kiln run --profile rma --workloads matrix) to reproduce the wrong elements at these coordinates, then take the GPU out of service and RMA it with both reports",
            ));
        }
        out
    }

    fn metrics(result: &MatrixReport) -> Vec<Metric> {
        vec![
            Metric {
                family: "kiln_matrix_failed_checks",
                value: result.faults() as f64,
            },
            Metric {
                family: "kiln_matrix_verified_tflops",
                value: result.kinds.first().map_or(0.0, |k| k.verified_tflops),
            },
        ]
    }

    fn rates(result: &MatrixReport) -> Vec<(&'static str, f64)> {
        // Rates measured beside another load are not the device's alone.
        if result.run.together_with.is_some() {
            return Vec::new();
        }
        result
            .kinds
            .iter()
            .filter(|k| k.rounds > 0)
            .map(|k| (k.kind.rate_name(), k.tflops))
            .collect()
    }

    fn sections(r: &MatrixReport) -> Vec<Section> {
        let mut lines = vec![
            r.headline(),
            format!(
                "path: {} ({}x{} tiles, {}-square matrices); cooperative matrices: {}",
                r.path, r.tile, r.tile, r.size, r.cooperative_matrix
            ),
        ];
        for k in &r.kinds {
            lines.push(format!(
                "{} {} rounds, {} multiplying, {} verified (best {}), {} checksum / {} invalid ({} non-finite) / {} recomputation mismatches, {} tiles recomputed",
                k.kind.name(),
                k.rounds,
                k.kind.rate(k.tflops),
                k.kind.rate(k.verified_tflops),
                k.kind.rate(k.best_tflops),
                k.checksum_mismatches,
                k.invalid_values,
                k.nonfinite,
                k.redundant_mismatches,
                k.tiles_recomputed,
            ));
        }
        lines.extend(r.power.iter().map(PowerTargetReport::line));
        lines.extend(r.skipped.iter().map(|s| format!("skipped: {s}")));
        lines.extend(r.records.iter().take(10).map(MatrixMismatch::place));
        vec![
            Section::Lines(lines),
            Section::Bars {
                title: "Matrix rate, verified (mark: multiplication alone)".into(),
                unit: "T ops/s".into(),
                bars: r
                    .kinds
                    .iter()
                    .map(|k| Bar::marked(k.kind.name(), k.verified_tflops, Some(k.tflops)))
                    .collect(),
            },
        ]
    }
}

/// The matrix test as a workload.
pub struct MatrixTest {
    /// Its settings.
    pub config: MatrixConfig,
}

impl Workload for MatrixTest {
    fn name(&self) -> &'static str {
        Matrix::NAME
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

/// Why the matrix units' path does not run on `device`.
fn cooperative_matrix_note(device: &DeviceInfo) -> String {
    if device.cooperative_matrix {
        "the device offers VK_KHR_cooperative_matrix, but this build has no cooperative-matrix \
         shaders (its shader compiler predates GL_KHR_cooperative_matrix): the multiplication \
         runs on the ALUs, not the matrix units"
            .into()
    } else {
        "the device does not offer VK_KHR_cooperative_matrix".into()
    }
}

/// Whether `edge`-square matrices, asked for by name, fit the device at all: the fp32
/// inputs within maxStorageBufferRange, and every buffer within the free device-local
/// memory. The sentence says what they need.
fn fits(edge: u32, device: &DeviceInfo) -> Result<(), String> {
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
fn max_edge(device: &DeviceInfo) -> u32 {
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

/// Where everything lies, in 32-bit words, for an edge: mirrors the shaders' push
/// constants. The GEMM's inputs (`ab`: A then B, in the widest kind's words), its output
/// (`c`: C, then the recomputed tiles) and the auxiliary buffer (`aux`: counters,
/// records, the packed inputs, the tile sums and the checksums).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Layout {
    edge: u32,
    tiles: u32,
    /// Tiles recomputed per round.
    sampled: u32,
    /// Packed input words (A then B, four elements each).
    source_words: u32,
    ab_words: u32,
    c2_base: u32,
    c_words: u32,
    src_base: u32,
    sa_base: u32,
    sb_base: u32,
    er_base: u32,
    ec_base: u32,
    aux_words: u32,
}

impl Layout {
    fn new(edge: u32, record_capacity: u32) -> Layout {
        let tiles_edge = edge / TILE;
        let tiles = tiles_edge * tiles_edge;
        let sampled = (tiles / RECOMPUTE_ONE_IN).max(1);
        let source_words = 2 * edge * edge / 4;
        let src_base =
            (RECORDS_AT as u32 + record_capacity * RECORD_WORDS as u32).next_multiple_of(16);
        let sa_base = src_base + source_words;
        let sb_base = sa_base + tiles_edge * edge;
        let er_base = sb_base + tiles_edge * edge;
        let ec_base = er_base + edge * tiles_edge;
        Layout {
            edge,
            tiles,
            sampled,
            source_words,
            ab_words: 2 * edge * edge,
            c2_base: edge * edge,
            c_words: edge * edge + sampled * TILE_ELEMS,
            src_base,
            sa_base,
            sb_base,
            er_base,
            ec_base,
            aux_words: ec_base + tiles_edge * edge,
        }
    }

    fn total_bytes(&self) -> u64 {
        4 * (u64::from(self.ab_words) + u64::from(self.c_words) + u64::from(self.aux_words))
    }

    /// Operations (two per multiply-add) in one product.
    fn ops(&self) -> u64 {
        2 * u64::from(self.edge).pow(3)
    }
}

/// The buffers of one edge, bound once.
struct Gpu<'c> {
    ctx: &'c mut DeviceContext,
    layout: Layout,
    /// Held for the binding.
    _ab: GpuBuffer,
    c: GpuBuffer,
    aux: GpuBuffer,
    readback: GpuBuffer,
    set: Binding,
    /// Dispatches each product is split into.
    pieces: u32,
}

/// Words of the readback buffer: the counters and records, then located elements.
fn readback_words(record_capacity: u32) -> usize {
    RECORDS_AT + record_capacity as usize * RECORD_WORDS + LOCATE_MAX
}

impl<'c> Gpu<'c> {
    fn open(ctx: &'c mut DeviceContext, edge: u32, record_capacity: u32) -> GpuResult<Gpu<'c>> {
        let layout = Layout::new(edge, record_capacity);
        let mut ab = ctx.buffer(
            BufferKind::Device,
            u64::from(layout.ab_words) * 4,
            "kiln matrix inputs",
        )?;
        let mut c = ctx.buffer(
            BufferKind::Device,
            u64::from(layout.c_words) * 4,
            "kiln matrix product",
        )?;
        let mut aux = ctx.buffer(
            BufferKind::Device,
            u64::from(layout.aux_words) * 4,
            "kiln matrix checksums",
        )?;
        let readback = ctx.buffer(
            BufferKind::Readback,
            readback_words(record_capacity) as u64 * 4,
            "kiln matrix results readback",
        )?;
        let set = ctx.bind([&mut ab, &mut c, &mut aux])?;
        Ok(Gpu {
            ctx,
            layout,
            _ab: ab,
            c,
            aux,
            readback,
            set,
            pieces: 1,
        })
    }

    /// Groups for a grid-stride dispatch over `items`.
    fn groups(items: u64) -> u32 {
        items
            .div_ceil(u64::from(WORKGROUP))
            .clamp(1, u64::from(MAX_GROUPS)) as u32
    }

    /// The product of `kind` on the current inputs, in `self.pieces` submissions; GPU ns.
    fn multiply(&mut self, kind: MatrixKind) -> GpuResult<u64> {
        let tiles = self.layout.tiles;
        let pieces = self.pieces.clamp(1, tiles);
        let per = tiles.div_ceil(pieces);
        let pipeline = self.ctx.pipeline(kind.shader(), &[])?;
        let mut ns = 0;
        let mut first = 0;
        while first < tiles {
            let count = per.min(tiles - first);
            let set = self.set;
            let l = self.layout;
            let mut rec = self.ctx.record(format!(
                "matrix {} product of {}-square matrices, tiles {first}..{}",
                kind.name(),
                l.edge,
                first + count
            ))?;
            let push = [
                l.edge,
                l.edge,
                l.edge,
                first,
                count,
                1,
                0,
                0,
                0,
                l.source_words / 2 * kind.words_per_source_word(),
            ];
            rec.dispatch(pipeline, set, &push, count.clamp(1, MAX_GROUPS));
            ns += rec.submit_and_wait()?.best_ns();
            first += count;
        }
        Ok(ns)
    }

    /// The inputs from `seed` in `kind`'s type, and, when `fresh` (a new seed), their
    /// checksums, which every kind shares; GPU ns.
    fn prepare(&mut self, kind: MatrixKind, seed: u32, fresh: bool) -> GpuResult<u64> {
        let l = self.layout;
        let generate = self.ctx.pipeline(GEN, &[])?;
        let sums = self.ctx.pipeline(SUMS, &[])?;
        let set = self.set;
        let mut rec = self
            .ctx
            .record(format!("matrix {} inputs and checksums", kind.name()))?;
        rec.dispatch(
            generate,
            set,
            &[l.source_words, seed, kind.code(), l.src_base],
            Self::groups(u64::from(l.source_words)),
        );
        if !fresh {
            return Ok(rec.submit_and_wait()?.best_ns());
        }
        rec.barrier();
        let tiles_edge = l.edge / TILE;
        let base = [
            l.edge, l.edge, l.edge, l.src_base, l.sa_base, l.sb_base, l.er_base, l.ec_base,
        ];
        let mut stage0 = base.to_vec();
        stage0.push(0);
        rec.dispatch(
            sums,
            set,
            &stage0,
            Self::groups(2 * u64::from(tiles_edge) * u64::from(l.edge)),
        );
        rec.barrier();
        let mut stage1 = base.to_vec();
        stage1.push(1);
        rec.dispatch(
            sums,
            set,
            &stage1,
            Self::groups(2 * u64::from(l.edge) * u64::from(tiles_edge)),
        );
        Ok(rec.submit_and_wait()?.best_ns())
    }

    /// Plants `plant`, recomputes the sampled tiles on the mapping (`mul`, `add`), runs
    /// both checks and copies counters and records to the host; GPU ns.
    fn check(
        &mut self,
        kind: MatrixKind,
        (mul, add): (u32, u32),
        plant: Option<PlantedFault>,
        record_capacity: u32,
    ) -> GpuResult<u64> {
        let l = self.layout;
        let gemm = self.ctx.pipeline(kind.shader(), &[])?;
        let check = self.ctx.pipeline(CHECK, &[])?;
        let planter = match plant {
            Some(_) => Some(self.ctx.pipeline(PLANT, &[])?),
            None => None,
        };
        let set = self.set;
        let counters_bytes = (RECORDS_AT * 4) as u64;
        let records_bytes = (RECORDS_AT + record_capacity as usize * RECORD_WORDS) as u64 * 4;
        let mut rec = self.ctx.record(format!("matrix {} checks", kind.name()))?;
        rec.fill(&self.aux, 0, counters_bytes, 0);
        if let (Some(p), Some(pipeline)) = (plant, planter) {
            rec.dispatch(
                pipeline,
                set,
                &[l.edge, p.row, p.col, p.rows, p.cols, p.xor],
                Self::groups(u64::from(p.rows) * u64::from(p.cols)),
            );
        }
        let push = [
            l.edge,
            l.edge,
            l.edge,
            0,
            l.sampled,
            mul,
            add,
            1,
            l.c2_base,
            l.source_words / 2 * kind.words_per_source_word(),
        ];
        rec.dispatch(gemm, set, &push, l.sampled.clamp(1, MAX_GROUPS));
        rec.barrier();
        let checks = |stage: u32| {
            [
                l.edge,
                l.edge,
                kind.code(),
                l.er_base,
                l.ec_base,
                stage,
                record_capacity,
                l.c2_base,
                l.sampled,
                mul,
                add,
            ]
        };
        let tiles_edge = u64::from(l.edge / TILE);
        rec.dispatch(
            check,
            set,
            &checks(0),
            Self::groups(2 * u64::from(l.edge) * tiles_edge),
        );
        rec.dispatch(
            check,
            set,
            &checks(1),
            Self::groups(u64::from(l.sampled) * u64::from(TILE_ELEMS)),
        );
        rec.barrier();
        rec.copy(&self.aux, 0, &self.readback, 0, records_bytes);
        Ok(rec.submit_and_wait()?.best_ns())
    }

    /// The output words at `places` (row, column), read back.
    fn read_elements(&mut self, places: &[(u32, u32)], after: usize) -> GpuResult<Vec<u32>> {
        if places.is_empty() {
            return Ok(Vec::new());
        }
        let edge = u64::from(self.layout.edge);
        let mut rec = self.ctx.record("matrix elements to locate")?;
        for (n, &(row, col)) in places.iter().enumerate() {
            rec.copy(
                &self.c,
                (u64::from(row) * edge + u64::from(col)) * 4,
                &self.readback,
                (after + n) as u64 * 4,
                4,
            );
        }
        rec.submit_and_wait()?;
        let words = self.words()?;
        Ok(words[after..after + places.len()].to_vec())
    }

    fn words(&self) -> GpuResult<&[u32]> {
        self.readback
            .words()
            .ok_or_else(|| GpuError::Unsupported("matrix results readback is not mapped".into()))
    }
}

/// The shaders' hash (matrix_common.glsl), on the CPU.
fn hash(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7FEB_352D);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846C_A68B);
    x ^ (x >> 16)
}

/// Input word `w` (shaders/matrix_common.glsl's source_word), on the CPU.
fn source_word(seed: u32, w: u32) -> u32 {
    let h = hash(w.wrapping_mul(0x9E37_79B1).wrapping_add(seed));
    let mut word = 0u32;
    for q in 0..4 {
        let v = ((h >> (8 * q)) & 0xFF) as i32 % 63 - 31;
        word |= (v as u32 & 0xFF) << (8 * q);
    }
    word
}

/// Element `e` of the packed inputs (A's elements, then B's), on the CPU.
fn source_element(seed: u32, e: u64) -> i32 {
    let word = source_word(seed, (e / 4) as u32);
    i32::from((word >> (8 * (e % 4))) as u8 as i8)
}

/// What C[row][col] is for inputs from `seed`: exact, an integer (see matrix_common.glsl).
pub fn reference_element(seed: u32, edge: u32, row: u32, col: u32) -> i64 {
    let n = u64::from(edge);
    (0..n)
        .map(|k| {
            let a = source_element(seed, u64::from(row) * n + k);
            let b = source_element(seed, n * n + k * n + u64::from(col));
            i64::from(a) * i64::from(b)
        })
        .sum()
}

/// The bits a correct element holds for `kind`.
fn correct_bits(kind: MatrixKind, value: i64) -> u32 {
    match kind {
        MatrixKind::Int8 => value as i32 as u32,
        _ => (value as f32).to_bits(),
    }
}

/// The recomputation's mapping of round `round`: an odd multiplier (a bijection of the
/// power-of-two tile count) and an offset.
fn recompute_mapping(seed: u32, round: u32, tiles: u32) -> (u32, u32) {
    let h = hash(seed ^ round.wrapping_mul(0x85EB_CA6B));
    let mut mul = (h | 1) & (tiles.wrapping_mul(2).wrapping_sub(1));
    if mul == 1 && tiles > 1 {
        mul = 3;
    }
    (mul | 1, hash(h) & (tiles - 1))
}

/// One record of the checks, as the shader wrote it.
#[derive(Debug, Clone, Copy)]
struct Record {
    what: u32,
    a: u32,
    b: u32,
    actual: u32,
    workgroup: u32,
}

impl MatrixTest {
    /// Runs the test and returns its typed report.
    pub fn run_report(
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
        let started = Instant::now();
        events.emit(
            device,
            Event::WorkloadStart {
                workload: Matrix::NAME.into(),
                settings: json!({ "config": &cfg }),
            },
        );
        let mut report = MatrixReport {
            path: "shared_memory".into(),
            cooperative_matrix: cooperative_matrix_note(&info),
            size: cfg.size.unwrap_or(0),
            tile: TILE,
            dispatches_per_product: 1,
            kinds: kinds.iter().map(|&k| MatrixKindResult::new(k)).collect(),
            skipped,
            records: Vec::new(),
            power: None,
            run: Envelope::default(),
        };
        if let Err(e) = drive(ctx, &cfg, control, events, device, &mut report) {
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
    kind: MatrixKind,
) -> GpuResult<(u32, u32)> {
    let target_ns = cfg.dispatch_target.as_nanos() as u64;
    let largest = max_edge(ctx.info());
    let mut edge = cfg.size.unwrap_or(MIN_EDGE);
    loop {
        let mut gpu = Gpu::open(ctx, edge, 0)?;
        gpu.prepare(kind, cfg.seed, true)?;
        // The first dispatch of a pipeline may finish compiling it: the second is timed.
        gpu.multiply(kind)?;
        let took = gpu.multiply(kind)?.max(1);
        if cfg.size.is_none() && took < target_ns / 4 && edge * 2 <= largest {
            edge *= 2;
            continue;
        }
        let pieces = took.div_ceil(target_ns.max(1) * 2).max(1);
        return Ok((edge, pieces.min(u64::from(u32::MAX)) as u32));
    }
}

/// Calibrates, then runs rounds of the kinds in turn until the budget.
fn drive(
    ctx: &mut DeviceContext,
    cfg: &MatrixConfig,
    control: &RunControl,
    events: &mut dyn EventSink,
    device: Option<usize>,
    report: &mut MatrixReport,
) -> GpuResult<()> {
    let (edge, pieces) = calibrate(ctx, cfg, report.kinds[0].kind)?;
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
    let mut gpu = Gpu::open(ctx, edge, cfg.record_capacity)?;
    gpu.pieces = pieces;
    let mut round = 0u32;
    let started = Instant::now();
    let mut hold = cfg.power_target.map(PowerController::new);
    let mut pacer = Pacer::new(LOAD_PERIOD);
    let result = loop {
        if cfg.rounds.is_some_and(|n| round >= n) {
            break Ok(());
        }
        if control.stop_requested() {
            report.run.stopped_early = Some(STOPPED_ON_REQUEST.into());
            break Ok(());
        }
        // Every kind gets one verified round, even past the budget (the hard deadline
        // still holds).
        if cfg.rounds.is_none() && control.out_of_time() && round as usize >= report.kinds.len() {
            break Ok(());
        }
        if control.stopped() {
            report.run.stopped_early = Some("stopped at the hard deadline".into());
            break Ok(());
        }
        if let Some(hold) = &mut hold {
            let rest = pacer.rest(hold.duty(started.elapsed(), control.power.as_ref()));
            if !rest.is_zero() {
                std::thread::sleep(rest);
                continue;
            }
        }
        let k = round as usize % report.kinds.len();
        let t = Instant::now();
        if let Err(e) = one_round(&mut gpu, cfg, plant, round, k, events, device, report) {
            break Err(e);
        }
        pacer.worked(t.elapsed());
        round += 1;
    };
    if let Some(hold) = &hold {
        report.power = Some(hold.report(started.elapsed()));
    }
    result
}

/// One round of kind `k`: inputs, product, recomputation, checks, and the location of
/// whatever they found.
#[allow(clippy::too_many_arguments)]
fn one_round(
    gpu: &mut Gpu,
    cfg: &MatrixConfig,
    plant: Option<PlantedFault>,
    round: u32,
    k: usize,
    events: &mut dyn EventSink,
    device: Option<usize>,
    report: &mut MatrixReport,
) -> GpuResult<()> {
    let kind = report.kinds[k].kind;
    // A new input set every INPUT_ROUNDS rounds: its checksums (2/TILE of a product's
    // work) serve every kind that multiplies it, and each round recomputes other tiles.
    let seed = cfg.seed ^ (round / INPUT_ROUNDS).wrapping_mul(0x9E37_79B9);
    let fresh = round.is_multiple_of(INPUT_ROUNDS);
    let l = gpu.layout;
    let mapping = recompute_mapping(cfg.seed, round, l.tiles);
    let prep_ns = gpu.prepare(kind, seed, fresh)?;
    let gemm_ns = gpu.multiply(kind)?;
    let check_ns = gpu.check(kind, mapping, plant, cfg.record_capacity)?;
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
        events.emit(
            device,
            Event::Note {
                message: format!("matrix mismatch: {}", m.place()),
            },
        );
        if report.records.len() < cfg.record_capacity as usize {
            report.records.push(m);
        }
    }
    Ok(())
}

/// An element to read back and hold against the CPU's value.
struct Candidate {
    /// Row and column.
    place: (u32, u32),
    /// The check that pointed at it.
    check: &'static str,
    /// The recomputation's bits and workgroup, where it differed there.
    second: Option<(u32, u32)>,
}

/// Turns the checks' records into located wrong elements: an element whose row and
/// column of its tile both disagree with their checksums, one that is not an integer, or
/// one whose recomputation differs, is read back and held against the CPU's value; a
/// tile with too many wrong rows and columns to try each is named as a wrong tile.
fn locate(
    gpu: &mut Gpu,
    kind: MatrixKind,
    seed: u32,
    round: u32,
    (mul, add): (u32, u32),
    records: &[Record],
    record_capacity: u32,
) -> GpuResult<Vec<MatrixMismatch>> {
    let l = gpu.layout;
    let tiles_edge = l.edge / TILE;
    // The primary run's workgroups take tiles in order (slot = tile), wrapping at
    // MAX_GROUPS; the recomputation's slot s runs on workgroup s.
    let groups = l.tiles.min(MAX_GROUPS);
    let first_workgroup = |row: u32, col: u32| ((row / TILE) * tiles_edge + col / TILE) % groups;
    let mut out = Vec::new();
    // (row, column) -> (check, second run's bits and workgroup)
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut add_candidate = |place: (u32, u32), check: &'static str, second: Option<(u32, u32)>| {
        if candidates.len() < LOCATE_MAX && !candidates.iter().any(|c| c.place == place) {
            candidates.push(Candidate {
                place,
                check,
                second,
            });
        }
    };
    for r in records {
        match r.what {
            REC_INVALID => add_candidate((r.a, r.b), "invalid_value", None),
            REC_REDUNDANT => add_candidate(
                (r.a, r.b),
                "redundant_run",
                Some((r.actual, r.workgroup % l.sampled.min(MAX_GROUPS))),
            ),
            _ => {}
        }
    }
    // Rows and columns of each tile that disagree with their checksums.
    let mut tiles: std::collections::BTreeMap<(u32, u32), (Vec<u32>, Vec<u32>)> =
        std::collections::BTreeMap::new();
    for r in records {
        match r.what {
            REC_ROW => tiles.entry((r.a / TILE, r.b)).or_default().0.push(r.a),
            REC_COL => tiles.entry((r.a, r.b / TILE)).or_default().1.push(r.b),
            _ => {}
        }
    }
    for (&(ti, tj), (rows, cols)) in &tiles {
        let (rows, cols): (Vec<u32>, Vec<u32>) = match (rows.is_empty(), cols.is_empty()) {
            // A wrong element whose row sum (or column sum) the error left unchanged:
            // try its whole column (or row) of the tile.
            (true, false) => ((ti * TILE..(ti + 1) * TILE).collect(), cols.clone()),
            (false, true) => (rows.clone(), (tj * TILE..(tj + 1) * TILE).collect()),
            _ => (rows.clone(), cols.clone()),
        };
        if rows.len() * cols.len() > LOCATE_PER_TILE {
            out.push(MatrixMismatch {
                kind,
                round,
                check: "wrong_tile".into(),
                tile: [ti, tj],
                row: None,
                col: None,
                expected: None,
                actual: None,
                actual_bits: None,
                workgroup: (ti * tiles_edge + tj) % groups,
                second_workgroup: None,
                rows_cols_wrong: Some([
                    tiles[&(ti, tj)].0.len() as u32,
                    tiles[&(ti, tj)].1.len() as u32,
                ]),
            });
            continue;
        }
        for &row in &rows {
            for &col in &cols {
                add_candidate((row, col), "checksum", None);
            }
        }
    }
    let places: Vec<(u32, u32)> = candidates.iter().map(|c| c.place).collect();
    let after = RECORDS_AT + record_capacity as usize * RECORD_WORDS;
    let values = gpu.read_elements(&places, after)?;
    // The recomputation's workgroup of each sampled tile.
    let second_of = |row: u32, col: u32| -> Option<u32> {
        let tile = (row / TILE) * tiles_edge + col / TILE;
        (0..l.sampled).find(|&s| (s.wrapping_mul(mul).wrapping_add(add)) & (l.tiles - 1) == tile)
    };
    for (
        Candidate {
            place,
            check,
            second,
        },
        bits,
    ) in candidates.into_iter().zip(values)
    {
        let (row, col) = place;
        let expected = reference_element(seed, l.edge, row, col);
        let good = correct_bits(kind, expected);
        let second_workgroup = second.map(|s| s.1).or_else(|| second_of(row, col));
        let (wrong_bits, workgroup) = if bits != good {
            (bits, first_workgroup(row, col))
        } else if let Some((second_bits, w)) = second.filter(|s| s.0 != good) {
            // Only the recomputation is wrong.
            (second_bits, w)
        } else {
            // A checksum candidate that is right: another element of its row or
            // column is the wrong one.
            continue;
        };
        out.push(MatrixMismatch {
            kind,
            round,
            check: check.into(),
            tile: [row / TILE, col / TILE],
            row: Some(row),
            col: Some(col),
            expected: Some(expected as f64),
            actual: Some(kind.value(wrong_bits)),
            actual_bits: Some(wrong_bits),
            workgroup,
            second_workgroup,
            rows_cols_wrong: None,
        });
    }
    Ok(out)
}

/// What `kiln bench matrix` measured for one kind.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MatrixBenchKind {
    /// The kind.
    pub kind: MatrixKind,
    /// Verified rate: operations per GPU second of whole rounds, in 10^12.
    pub verified_tflops: f64,
    /// The verified run's multiplications alone.
    pub gemm_tflops: f64,
    /// The same GEMM kernel back to back on the same edge, nothing generated or checked.
    pub roofline_tflops: f64,
    /// The verified rate over the roofline: what the checks cost.
    pub of_roofline: f64,
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

/// Spec-sheet peaks, in 10^12 operations per second: fp32 on the ALUs, then fp16 (fp32
/// accumulate) and int8 on the matrix units, dense (no structured sparsity). Sources: the
/// vendors' datasheets (NVIDIA H200, H100 and A100 datasheets; AMD Instinct MI300X
/// datasheet; NVIDIA Ada Lovelace architecture whitepaper for the RTX 4090 and L40S).
/// Longer names first, so that `H100 PCIe` is not read as `H100`.
const SPEC_PEAKS: &[(&str, f64, f64, f64)] = &[
    ("H200", 67.0, 989.5, 1979.0),
    ("H100 PCIe", 51.2, 756.5, 1513.0),
    ("H100", 67.0, 989.5, 1979.0),
    ("A100", 19.5, 312.0, 624.0),
    ("MI300X", 81.7, 1307.4, 2614.9),
    ("L40S", 91.6, 362.1, 733.0),
    ("RTX 4090", 82.6, 165.2, 660.6),
];

/// The spec-sheet peaks of `device` (fp32 ALU, fp16 matrix, int8 matrix), where known.
fn spec_peaks(device: &DeviceInfo) -> Option<(&'static str, f64, f64, f64)> {
    if !device.kind.is_gpu() {
        return None;
    }
    SPEC_PEAKS
        .iter()
        .find(|(key, ..)| device.name.contains(key))
        .copied()
}

/// The GEMM kernel of `kind` on `edge`-square matrices back to back for `duration`,
/// nothing generated or checked between products: the ceiling the verified rate is held
/// against, in 10^12 operations per GPU second.
pub fn roofline(
    ctx: &mut DeviceContext,
    kind: MatrixKind,
    edge: u32,
    pieces: u32,
    duration: Duration,
) -> GpuResult<f64> {
    let mut gpu = Gpu::open(ctx, edge, 0)?;
    gpu.pieces = pieces;
    gpu.prepare(kind, 1, true)?;
    // Untimed: the first dispatch may finish compiling the pipeline.
    gpu.multiply(kind)?;
    let started = Instant::now();
    let (mut ops, mut ns) = (0u64, 0u64);
    while ops == 0 || started.elapsed() < duration {
        ns += gpu.multiply(kind)?;
        ops += gpu.layout.ops();
    }
    Ok(ops as f64 / ns.max(1) as f64 / 1e3)
}

/// `kiln bench matrix`: the verified test for half of `duration`, then each kind's
/// roofline on the same edge for the rest.
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
    let each = (duration / 2 / report.kinds.len().max(1) as u32).max(Duration::from_millis(300));
    let mut kinds = Vec::new();
    for k in &report.kinds {
        let roof = roofline(
            ctx,
            k.kind,
            report.size,
            report.dispatches_per_product,
            each,
        )?;
        kinds.push(MatrixBenchKind {
            kind: k.kind,
            verified_tflops: k.verified_tflops,
            gemm_tflops: k.tflops,
            roofline_tflops: roof,
            of_roofline: if roof > 0.0 {
                k.verified_tflops / roof
            } else {
                0.0
            },
            spec_matrix_tflops: spec.and_then(|(_, _, fp16, int8)| match k.kind {
                MatrixKind::Fp16 => Some(fp16),
                MatrixKind::Int8 => Some(int8),
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
    /// What was planted, in words.
    pub planted: String,
    /// True when it was found exactly where and as it was planted, and nothing else.
    pub found: bool,
    /// What the test reported.
    pub detail: String,
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
        out.push(MatrixSelfCheck {
            kind,
            planted: format!("bits {xor:#x} of element ({row}, {col})"),
            found,
            detail: r
                .records
                .iter()
                .take(3)
                .map(MatrixMismatch::place)
                .collect::<Vec<_>>()
                .join("; "),
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
            planted: format!("wrong tile ({}, {})", tile[0], tile[1]),
            found,
            detail: r
                .records
                .iter()
                .take(3)
                .map(MatrixMismatch::place)
                .collect::<Vec<_>>()
                .join("; "),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_small_integers_so_every_product_is_exact() {
        let mut seen = std::collections::BTreeSet::new();
        for e in 0..4096u64 {
            let v = source_element(7, e);
            assert!((-31..=31).contains(&v), "{v}");
            seen.insert(v);
        }
        // Every value of the range turns up: the inputs are not a handful of constants.
        assert_eq!(seen.len(), 63);
        // The largest possible element is exact in fp32.
        let worst = i64::from(MAX_EDGE) * 31 * 31;
        assert!(worst < 1 << 24);
        assert_eq!(
            correct_bits(MatrixKind::Fp32, worst),
            (worst as f32).to_bits()
        );
    }

    #[test]
    fn the_recomputation_mapping_is_a_bijection_and_moves_tiles() {
        for tiles in [1u32, 4, 64, 1024] {
            for round in 0..4 {
                let (mul, add) = recompute_mapping(9, round, tiles);
                assert_eq!(mul % 2, 1);
                let mut seen = vec![false; tiles as usize];
                for s in 0..tiles {
                    let t = (s.wrapping_mul(mul).wrapping_add(add)) & (tiles - 1);
                    assert!(!seen[t as usize]);
                    seen[t as usize] = true;
                }
            }
        }
    }

    #[test]
    fn the_layout_keeps_every_region_apart() {
        let l = Layout::new(256, 32);
        assert!(l.src_base as usize >= RECORDS_AT + 32 * RECORD_WORDS);
        assert_eq!(l.sa_base - l.src_base, l.source_words);
        assert!(l.sa_base < l.sb_base && l.sb_base < l.er_base && l.er_base < l.ec_base);
        assert_eq!(l.tiles, 16);
        assert_eq!(l.sampled, 1);
        assert_eq!(l.c_words, 256 * 256 + TILE_ELEMS);
    }
}
