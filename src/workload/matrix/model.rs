//! What the matrix test found: each wrong result located as far as the checks allow, the
//! results of each kind, and the report they make.

use super::kernel::Kernel;
use super::*;

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

pub(super) fn shared_memory() -> String {
    "shared_memory".into()
}

impl MatrixKindResult {
    pub(super) fn new(kernel: &Kernel) -> MatrixKindResult {
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
                self.check.replace('_', " "),
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
                self.check.replace('_', " "),
                self.round
            ),
        };
        place + &at
    }
}
