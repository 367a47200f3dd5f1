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
//! `VK_KHR_cooperative_matrix` with a shape for a kind's types, that kind multiplies on
//! them (shaders/matrix_units.glsl, in the device's own tile shape); every other kind
//! runs on the tiled shared-memory kernel (the ALUs, shared memory, registers and L2),
//! which every Vulkan device runs. Both write C in the same layout, so the checks and the
//! locator are the same for both. The report names each kind's path and why a kind did
//! not run on the matrix units.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::cadence::{DutySweep, InjectWhen, LevelResult, LoadPhase, LoadPoint};
use super::settings::{SettingError, SettingsTable};
use super::show::{Bar, Metric, MetricFamily, Section, Table, TableRow};
use super::{
    Envelope, Kind, PlanDetail, Report, RunControl, STOPPED_ON_REQUEST, Workload, WorkloadError,
    WorkloadOutcome, WorkloadStatus, record_device_error,
};
use crate::evidence::{DeviceEvents, Event, EventSink};
use crate::finding::{Confidence, Finding, FindingCode, Severity, finding};
use crate::gpu::{
    Binding, BufferKind, DeviceContext, DeviceInfo, GpuBuffer, GpuError, GpuResult,
    MatrixUnitShape, ShaderCode, embedded_shader,
};
use crate::limits::Bounds;
use crate::power::{LOAD_PERIOD, Pacer, PowerController, PowerTargetReport};

mod bench;
mod gpu;
mod kernel;
mod locate;

use super::hash;
pub use bench::{
    MatrixBenchKind, MatrixBenchReport, MatrixSelfCheck, bench, bench_summary, self_check,
};
use gpu::{Gpu, Layout};
use kernel::Kernel;
use locate::locate;
pub use locate::reference_element;

const GEMM_F32: ShaderCode = embedded_shader!("matrix_gemm_f32");
const GEMM_F16: ShaderCode = embedded_shader!("matrix_gemm_f16");
const GEMM_I8: ShaderCode = embedded_shader!("matrix_gemm_i8");
const UNITS_F16: ShaderCode = embedded_shader!("matrix_units_f16");
const UNITS_I8: ShaderCode = embedded_shader!("matrix_units_i8");
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
/// Subgroups in a workgroup of the matrix-unit kernel at most: each takes strips of a
/// tile, so that several are in flight on a compute unit at once.
const UNIT_SUBGROUPS: u32 = 4;

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

    /// The name of this kind's rate in comparisons (`matrix_fp16_tflops`), on the
    /// matrix units (`matrix_fp16_units_tflops`) or not: a driver that starts or stops
    /// offering the units changes the kernel, and two kernels' rates are not a drift.
    pub fn rate_name(self, on_units: bool) -> &'static str {
        match (self, on_units) {
            (MatrixKind::Fp32, false) => "matrix_fp32_tflops",
            (MatrixKind::Fp32, true) => "matrix_fp32_units_tflops",
            (MatrixKind::Fp16, false) => "matrix_fp16_tflops",
            (MatrixKind::Fp16, true) => "matrix_fp16_units_tflops",
            (MatrixKind::Int8, false) => "matrix_int8_tops",
            (MatrixKind::Int8, true) => "matrix_int8_units_tops",
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

    /// The shared-memory kernel.
    fn shader(self) -> ShaderCode {
        match self {
            MatrixKind::Fp32 => GEMM_F32,
            MatrixKind::Fp16 => GEMM_F16,
            MatrixKind::Int8 => GEMM_I8,
        }
    }

    /// The matrix-unit kernel and the component types it multiplies (A, B, C, result,
    /// as `MatrixUnitShape` names them), where this build has one.
    fn unit_kernel(self) -> Option<(ShaderCode, [&'static str; 4])> {
        match self {
            MatrixKind::Fp32 => None,
            MatrixKind::Fp16 => Some((UNITS_F16, ["f16", "f16", "f32", "f32"])),
            MatrixKind::Int8 => Some((UNITS_I8, ["s8", "s8", "s32", "s32"])),
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
    /// Where the products run.
    #[serde(default)]
    pub path: MatrixPath,
    /// Flat out (or held at the power target), or swept over duty levels 10%..100%.
    #[serde(default)]
    pub shape: MatrixShape,
    /// With `plant`: only the rounds at this point of the load carry it (detector tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plant_when: Option<InjectWhen>,
}

/// How the matrix load runs over time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatrixShape {
    /// Full load, or the duty a power target sets.
    #[default]
    Steady,
    /// Duty levels 10%, 20% ... 100%, each for a tenth of the budget, the clock each
    /// reached recorded: cards boost highest, and some fail, at partial load.
    Sweep,
}

/// Where a matrix test's products run (`path` in a profile).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatrixPath {
    /// Each kind on the matrix units where the device has them for its types, else on the
    /// shared-memory kernel.
    #[default]
    Auto,
    /// Every kind on the matrix units, or the test does not start (to be sure that the
    /// units are what is tested).
    MatrixUnits,
    /// Every kind on the shared-memory kernel (to compare with the units, or to rule them
    /// out).
    SharedMemory,
}

impl MatrixPath {
    const NAMES: [(&'static str, MatrixPath); 3] = [
        ("auto", MatrixPath::Auto),
        ("matrix_units", MatrixPath::MatrixUnits),
        ("shared_memory", MatrixPath::SharedMemory),
    ];
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
            path: MatrixPath::Auto,
            shape: MatrixShape::Steady,
            plant_when: None,
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
    /// The duty, clock and phase of the round that found it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<LoadPoint>,
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
    /// Where its products ran: `matrix_units` or `shared_memory`.
    #[serde(default = "shared_memory")]
    pub path: String,
    /// The matrix units' shape (M, N, K), where they ran the products.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<[u32; 3]>,
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

fn shared_memory() -> String {
    "shared_memory".into()
}

impl MatrixKindResult {
    fn new(kernel: &Kernel) -> MatrixKindResult {
        MatrixKindResult {
            kind: kernel.kind,
            path: kernel.path().into(),
            shape: kernel.shape,
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
    /// The multiplication path that ran: `matrix_units`, `shared_memory`, or `mixed`
    /// (each kind says its own).
    pub path: String,
    /// The matrix units (cooperative matrices): which kinds ran on them, in what shape,
    /// and why the others did not.
    pub cooperative_matrix: String,
    /// The matrices' edge (M = N = K).
    pub size: u32,
    /// Output tile edge.
    pub tile: u32,
    /// GEMM dispatches per product.
    pub dispatches_per_product: u32,
    /// The edge the calibration chose, where a power target out of reach at full duty
    /// made the products larger (more of each round on the ALUs, less in the checks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grown_from: Option<u32>,
    /// Per kind that ran.
    pub kinds: Vec<MatrixKindResult>,
    /// Kinds not run, and why.
    pub skipped: Vec<String>,
    /// The first wrong results.
    pub records: Vec<MatrixMismatch>,
    /// What the power target achieved, where the load held one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<PowerTargetReport>,
    /// A sweep's levels (none for a steady load).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<LevelResult>,
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
    crate::workload::envelope_in!(run);

    fn found(&self) -> Option<WorkloadStatus> {
        (self.faults() > 0).then_some(WorkloadStatus::Failed)
    }

    fn began(&self) -> bool {
        self.kinds.iter().any(|k| k.rounds > 0)
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
                    "{} failed checks in {} verified matrix operations (silent data corruption){first}",
                    self.faults(),
                    crate::units::large(verified)
                )
            }
            WorkloadStatus::NotRun => format!(
                "nothing ran: {}",
                self.run.why_cut_short().unwrap_or("no round completed")
            ),
            WorkloadStatus::Incomplete => format!(
                "no wrong result in {} verified matrix operations, but it stopped early: {}",
                crate::units::large(verified),
                self.run.why_cut_short().unwrap_or("unknown")
            ),
            WorkloadStatus::Passed => format!(
                "no wrong result in {} verified matrix operations ({})",
                crate::units::large(verified),
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
        // Where in a swept or paused load it came; nothing for full, steady load.
        let at = self
            .at
            .filter(|p| p.duty < 1.0 || p.phase != LoadPhase::Load)
            .map(|p| format!(", {}", p.words()))
            .unwrap_or_default();
        let place = match (self.row, self.col, self.rows_cols_wrong) {
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
        };
        place + &at
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
            power_target: crate::workload::settings::power_target_setting(table)?,
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
        if let Some(name) = table.text("path")? {
            config.path = MatrixPath::NAMES
                .iter()
                .find(|(n, _)| *n == name)
                .map(|&(_, p)| p)
                .ok_or_else(|| {
                    SettingError::new(
                        "path",
                        format!(
                            "unknown matrix path {} (known: auto, matrix_units, shared_memory)",
                            crate::text::quote(&name)
                        ),
                    )
                })?;
        }
        config.shape = match table.text("shape")?.as_deref() {
            None | Some("steady") => MatrixShape::Steady,
            Some("sweep") => MatrixShape::Sweep,
            Some(other) => {
                return Err(SettingError::new(
                    "shape",
                    format!(
                        "the matrix load is steady or swept, not {} (known: steady, sweep)",
                        crate::text::quote(other)
                    ),
                ));
            }
        };
        if config.shape == MatrixShape::Sweep && config.power_target.is_some() {
            return Err(SettingError::new(
                "power_target",
                "holds power by setting the load itself: it applies only to shape = \"steady\"",
            ));
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
        let kinds: Vec<MatrixKind> = settings
            .kinds
            .iter()
            .copied()
            .filter(|&k| k != MatrixKind::Fp16 || device.shader_float16)
            .collect();
        let chosen = kernels_for(&kinds, device, settings.path)?;
        let on = |units: bool| {
            chosen
                .iter()
                .filter(|(k, _)| k.shape.is_some() == units)
                .map(|(k, _)| k.kind.name())
                .collect::<Vec<_>>()
                .join("/")
        };
        let paths = match (on(true), on(false)) {
            (units, alu) if units.is_empty() => format!("{alu} on the shared-memory kernel"),
            (units, alu) if alu.is_empty() => format!("{units} on the matrix units"),
            (units, alu) => {
                format!("{units} on the matrix units, {alu} on the shared-memory kernel")
            }
        };
        Ok(PlanDetail {
            detail: format!(
                "verified GEMM ({paths}) on {edge}-square matrices{}",
                settings
                    .power_target
                    .map(|p| format!(", power held at {p}% of the limit"))
                    .unwrap_or_default()
            ) + match settings.shape {
                MatrixShape::Steady => "",
                MatrixShape::Sweep => {
                    ", swept over load levels 10%..100% (the clock each reached recorded)"
                }
            },
            ..PlanDetail::default()
        })
    }

    fn judge(result: &MatrixReport) -> Vec<Finding> {
        let mut out = Vec::new();
        let faults = result.faults();
        // In a sweep, errors only below full load are named as such, instead of plainly.
        let swept = (!result.levels.is_empty() && faults > 0)
            .then(|| {
                let points: Vec<Option<LoadPoint>> = result.records.iter().map(|m| m.at).collect();
                let evidence = json!({"failed_checks": faults, "levels": result.levels,
                    "records": result.records.iter().take(8).collect::<Vec<_>>()});
                super::cadence::partial_load_only(&result.levels, &points, faults, evidence)
            })
            .flatten();
        if let Some(found) = swept {
            out.push(found);
        } else if faults > 0 {
            let nonfinite: u64 = result.kinds.iter().map(|k| k.nonfinite).sum();
            let first = result
                .records
                .first()
                .map(|m| format!("; first: {}", m.place()))
                .unwrap_or_default();
            out.push(finding(
                FindingCode::MatrixMismatch,
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
            .map(|k| (k.kind.rate_name(k.shape.is_some()), k.tflops))
            .collect()
    }

    fn sections(r: &MatrixReport) -> Vec<Section> {
        let mut lines = vec![
            r.headline(),
            format!(
                "path: {} ({}x{} tiles, {}-square matrices{}); cooperative matrices: {}",
                r.path,
                r.tile,
                r.tile,
                r.size,
                r.grown_from
                    .map(|e| format!(", grown from {e} for the power target"))
                    .unwrap_or_default(),
                r.cooperative_matrix
            ),
        ];
        for k in &r.kinds {
            lines.push(format!(
                "{} {} on the {}, {} multiplying, {} verified (best {}), {} checksum / {} invalid ({} non-finite) / {} recomputation mismatches, {} recomputed",
                k.kind.name(),
                crate::text::count(k.rounds, "round"),
                path_words(k.shape),
                k.kind.rate(k.tflops),
                k.kind.rate(k.verified_tflops),
                k.kind.rate(k.best_tflops),
                k.checksum_mismatches,
                k.invalid_values,
                k.nonfinite,
                k.redundant_mismatches,
                crate::text::count(k.tiles_recomputed, "tile"),
            ));
        }
        lines.extend(r.power.iter().map(PowerTargetReport::line));
        lines.extend(r.levels.iter().map(LevelResult::line));
        lines.extend(r.skipped.iter().map(|s| format!("skipped: {s}")));
        lines.extend(r.records.iter().take(10).map(MatrixMismatch::place));
        let mut out = vec![Section::Lines(lines)];
        if r.faults() > 0 {
            out.push(Section::Table(wrong_elements(r)));
        }
        out.push(Section::Bars {
            title: "Matrix rate, verified (mark: multiplication alone)".into(),
            unit: "Top/s".into(),
            bars: r
                .kinds
                .iter()
                .map(|k| Bar::marked(k.kind.name(), k.verified_tflops, Some(k.tflops)))
                .collect(),
        });
        out
    }
}

/// The wrong output elements (or tiles, where too many of a tile's rows and columns
/// disagree to locate each), with the workgroup that computed them.
fn wrong_elements(r: &MatrixReport) -> Table {
    let shown = |v: Option<f64>| v.map_or("?".into(), |v| v.to_string());
    Table {
        title: "Wrong matrix elements".into(),
        noun: "failed check",
        place: "element",
        columns: vec![
            "Kind",
            "Round",
            "Tile",
            "Element (row, column)",
            "Check",
            "Expected",
            "Got",
            "Bits",
            "Workgroup",
        ],
        rows: r
            .records
            .iter()
            .map(|m| {
                let element = match (m.row, m.col, m.rows_cols_wrong) {
                    (Some(row), Some(col), _) => format!("({row}, {col})"),
                    (_, _, Some([rows, cols])) => {
                        format!("whole tile: {rows} rows, {cols} columns")
                    }
                    _ => "not located".into(),
                };
                TableRow {
                    count: 1,
                    key: match (m.row, m.col) {
                        (Some(row), Some(col)) => format!(
                            "{} element ({row}, {col}) of tile ({}, {})",
                            m.kind.name(),
                            m.tile[0],
                            m.tile[1]
                        ),
                        _ => format!("{} tile ({}, {})", m.kind.name(), m.tile[0], m.tile[1]),
                    },
                    cells: vec![
                        m.kind.name().into(),
                        m.round.to_string(),
                        format!("({}, {})", m.tile[0], m.tile[1]),
                        element,
                        m.check.clone(),
                        shown(m.expected),
                        shown(m.actual),
                        m.actual_bits.map_or("-".into(), |b| format!("0x{b:08x}")),
                        match m.second_workgroup {
                            Some(w) => format!("{} (recomputed on {w})", m.workgroup),
                            None => m.workgroup.to_string(),
                        },
                    ],
                }
            })
            .collect(),
        total: r.faults(),
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

/// Where products with the matrix units' `shape` (None: the shared-memory kernel) run,
/// in words.
fn path_words(shape: Option<[u32; 3]>) -> String {
    match shape {
        Some([m, n, k]) => format!("matrix units ({m}x{n}x{k})"),
        None => "shared-memory kernel".into(),
    }
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
fn kernels_for(
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
    let mut edge = edge;
    let mut round = 0u32;
    let started = Instant::now();
    let mut hold = cfg.power_target.map(PowerController::new);
    let mut pacer = Pacer::new(LOAD_PERIOD);
    let budget = control
        .deadline
        .map(|d| d.saturating_duration_since(started));
    let mut sweep = (cfg.shape == MatrixShape::Sweep).then(|| DutySweep::new(budget));
    // Each kind's totals for its `Rates` events: its products' operations and GPU seconds.
    let totals = |report: &MatrixReport| -> Vec<(&'static str, u64, f64)> {
        report
            .kinds
            .iter()
            .map(|k| (k.kind.rate_name(k.shape.is_some()), k.timed_ops, k.gemm_s))
            .collect()
    };
    let mut stretch = crate::workload::RateStretch::starting(&totals(report));
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
        let duty = match (&mut hold, &mut sweep) {
            (Some(hold), _) => Some(hold.duty(started.elapsed(), control.power.as_ref())),
            (None, Some(sweep)) => Some(sweep.duty(control)),
            (None, None) => None,
        };
        if let Some(duty) = duty {
            let rest = pacer.rest(duty);
            if !rest.is_zero() {
                std::thread::sleep(rest);
                continue;
            }
        }
        let point = LoadPoint {
            duty: duty.unwrap_or(1.0),
            clock_mhz: crate::workload::cadence::clock_now(control),
            phase: LoadPhase::Load,
        };
        let k = round as usize % report.kinds.len();
        let t = Instant::now();
        let at = (round, k);
        let (records_before, faults_before) = (report.records.len(), report.faults());
        let ops_before: u64 = report.kinds.iter().map(|k| k.timed_ops).sum();
        if let Err(e) = one_round(
            &mut gpu,
            cfg,
            &kernels[k],
            plant.filter(|_| cfg.plant_when.is_none_or(|w| w.applies(&point))),
            at,
            &mut DeviceEvents::new(events, device),
            report,
        ) {
            break Err(e);
        }
        for r in &mut report.records[records_before..] {
            r.at = Some(point);
        }
        if let Some(s) = &mut sweep {
            let ops: u64 = report.kinds.iter().map(|k| k.timed_ops).sum();
            s.worked(ops - ops_before, report.faults() - faults_before);
        }
        let took = t.elapsed();
        pacer.worked(took);
        round += 1;
        stretch.emit_if_due(Matrix::NAME, &totals(report), 1e-12, events, device);
        if let Some(hold) = &mut hold
            && hold.starved()
            && edge * 2 <= largest
            && took * 8 <= GROW_ROUND_MAX
        {
            // The old buffers go first: both sizes at once may not fit.
            let pieces = gpu.pieces;
            drop(gpu);
            match Gpu::open(ctx, edge * 2, cfg.record_capacity) {
                Ok(bigger) => {
                    gpu = bigger;
                    report.grown_from.get_or_insert(edge);
                    edge *= 2;
                    // Eight times the work per product, the same work per dispatch.
                    gpu.pieces = pieces.saturating_mul(8);
                    report.size = edge;
                    report.dispatches_per_product = gpu.pieces;
                    hold.load_changed();
                    events.emit(
                        device,
                        Event::Note {
                            message: format!(
                                "matrix: the power target is out of reach at full duty: products grown to {edge}-square"
                            ),
                        },
                    );
                }
                Err(_) => {
                    gpu = Gpu::open(ctx, edge, cfg.record_capacity)?;
                    gpu.pieces = pieces;
                }
            }
        }
    };
    if let Some(hold) = &hold {
        report.power = Some(hold.report(started.elapsed()));
    }
    if let Some(sweep) = sweep {
        report.levels = sweep.finish();
    }
    result
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

#[cfg(test)]
mod tests {
    use super::locate::{correct_bits, source_element};
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
    fn the_workgroup_of_a_tile_follows_the_dispatches_it_is_split_into() {
        let l = Layout::new(1024, 0); // 256 tiles
        assert_eq!(l.primary_workgroup(1, 200), 200);
        // Four dispatches of 64 tiles: tile 200 is the 8th of the fourth.
        assert_eq!(l.primary_workgroup(4, 200), 8);
        let big = Layout::new(16384, 0); // 65536 tiles, more than one dispatch's groups
        assert_eq!(big.primary_workgroup(1, 65_535), 0);
        assert_eq!(big.primary_workgroup(1, 65_534), 65_534);
    }

    #[test]
    fn a_kind_on_the_matrix_units_is_compared_only_with_itself_on_them() {
        let mut report = MatrixReport {
            path: "mixed".into(),
            cooperative_matrix: String::new(),
            size: 256,
            tile: TILE,
            dispatches_per_product: 1,
            grown_from: None,
            kinds: Vec::new(),
            skipped: Vec::new(),
            records: Vec::new(),
            power: None,
            levels: Vec::new(),
            run: Envelope::default(),
        };
        for kernel in [
            Kernel::shared_memory(MatrixKind::Fp16),
            Kernel::shared_memory(MatrixKind::Int8),
        ] {
            let mut k = MatrixKindResult::new(&kernel);
            k.rounds = 2;
            k.tflops = 1.0;
            report.kinds.push(k);
        }
        report.kinds[1].shape = Some([16, 16, 32]);
        let names: Vec<&str> = Matrix::rates(&report).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["matrix_fp16_tflops", "matrix_int8_units_tops"]);
        let all: std::collections::BTreeSet<&str> = MatrixKind::ALL
            .into_iter()
            .flat_map(|k| [k.rate_name(false), k.rate_name(true)])
            .collect();
        assert_eq!(all.len(), 6, "every kind and path has its own name");
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
