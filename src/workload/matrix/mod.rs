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
//!
//! The workload in parts, as `vram` and `compute`: this module its settings and its kind;
//! `model` the report it gives; `run` the device loop (kernels, sizes, calibration, rounds);
//! `sections` how people read it; the buffers and dispatches in `gpu`, the kernel each kind
//! runs on in `kernel`, the CPU reference and the locator in `locate`, the benchmark in
//! `bench`.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::cadence::{InjectWhen, LevelResult, LoadPhase, LoadPoint, LoadShape};
use super::rounds::{Cadence, Ran, Rounds, Worked};
use super::settings::{SettingError, SettingsTable};
use super::show::{Bar, Metric, MetricFamily, Section, Table, TableRow};
use super::{
    Envelope, Kind, KindTest, PlanDetail, Report, RunControl, Workload, WorkloadError,
    WorkloadStatus, record_device_error,
};
use crate::evidence::{DeviceEvents, Event, EventSink};
use crate::finding::{Confidence, Finding, FindingCode, Severity, finding};
use crate::gpu::{
    Binding, BufferKind, DeviceContext, DeviceInfo, GpuBuffer, GpuError, GpuResult,
    MatrixUnitShape, ShaderCode, embedded_shader,
};
use crate::limits::Bounds;
use crate::power::{PowerController, PowerTargetReport};

mod bench;
mod gpu;
mod kernel;
mod locate;
mod model;
mod run;
mod sections;

use super::hash;
pub use bench::{
    MatrixBenchKind, MatrixBenchReport, MatrixSelfCheck, bench, bench_summary, self_check,
};
use kernel::Kernel;
pub use locate::reference_element;
use model::shared_memory;
pub use model::{MatrixKindResult, MatrixMismatch, MatrixReport};
pub use run::MatrixTest;
use run::{Record, fits, kernels_for, max_edge};
use sections::path_words;

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

impl MatrixShape {
    /// The shape as the shared loop takes it.
    fn load_shape(self) -> LoadShape {
        match self {
            MatrixShape::Steady => LoadShape::Steady,
            MatrixShape::Sweep => LoadShape::Sweep,
        }
    }
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

/// The `matrix` workload.
pub struct Matrix;

/// Its Prometheus families.
const METRICS: &[MetricFamily] = &[MetricFamily {
    name: "kiln_matrix_failed_checks",
    help: "Matrix checks that failed (checksum rows and columns, invalid values, recomputations that differ).",
}];

crate::evidence! {
    /// The evidence of wrong matrix products judged by where in the load they came.
    struct FailedInTheLoad<'a> {
        failed_checks: u64 => "Failed checks",
        levels: &'a [LevelResult] => "Load levels",
        records: Vec<&'a MatrixMismatch> => "Record",
    }
}

crate::evidence! {
    /// The evidence of `MATRIX_MISMATCH`: the failed checks, per kind of product, and the
    /// first wrong elements.
    struct Failed<'a> {
        /// first wrong elements.
        failed_checks: u64 => "Failed checks",
        nonfinite: u64 => "Not-a-number or infinite results",
        per_kind: Vec<KindFailed> => "By kind",
        records: Vec<&'a MatrixMismatch> => "Record",
    }
}

crate::evidence! {
    /// One kind of product's failed checks.
    struct KindFailed {
        kind: MatrixKind => "Kind",
        checksum_mismatches: u64 => "Checksum mismatches",
        invalid_values: u64 => "Invalid values",
        redundant_mismatches: u64 => "Redundant-computation mismatches",
        located: u64 => "Located",
    }
}

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
                let evidence = crate::finding::evidence(&FailedInTheLoad {
                    failed_checks: faults,
                    levels: &result.levels,
                    records: result.records.iter().take(8).collect(),
                });
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
                crate::finding::evidence(&Failed {
                    failed_checks: faults,
                    nonfinite,
                    per_kind: result
                        .kinds
                        .iter()
                        .map(|k| KindFailed {
                            kind: k.kind,
                            checksum_mismatches: k.checksum_mismatches,
                            invalid_values: k.invalid_values,
                            redundant_mismatches: k.redundant_mismatches,
                            located: k.located,
                        })
                        .collect(),
                    records: result.records.iter().take(8).collect(),
                }),
                "rerun the matrix test with the rma profile (kiln run --profile rma --workloads matrix) to reproduce the wrong elements at these coordinates, then take the GPU out of service and RMA it with both reports",
            ));
        }
        out
    }

    fn metrics(result: &MatrixReport) -> Vec<Metric> {
        vec![Metric {
            family: "kiln_matrix_failed_checks",
            value: result.faults() as f64,
        }]
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
        sections::sections(r)
    }
}

crate::said_by_name!(MatrixKind);

crate::said_record!(MatrixMismatch {
    kind => "Kind",
    round => "Round",
    check => "Check",
    tile => "Tile",
    row => "Row",
    col => "Column",
    expected => "Expected",
    actual => "Read",
    at => "At",
    actual_bits => "Read (bits)" in crate::finding::Unit::Hex,
    workgroup => "Workgroup",
    second_workgroup => "Second workgroup",
    rows_cols_wrong => "Rows and columns wrong",
});

#[cfg(test)]
mod tests {
    use super::gpu::Layout;
    use super::locate::{correct_bits, source_element};
    use super::run::recompute_mapping;
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
