//! The compute workload's report: per kind, per load level, every wrong result.

use super::*;

/// A work item whose two runs, or whose run and the CPU, disagree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mismatch {
    /// The arithmetic kind.
    pub kind: ComputeKind,
    /// Round, from 0.
    pub round: u32,
    /// The work item.
    pub item: u32,
    /// Invocation (and workgroup) that computed it first.
    pub first_invocation: u32,
    /// Invocation that computed it in the shuffled run (None for a CPU check).
    pub second_invocation: Option<u32>,
    /// Workgroup of the second invocation.
    pub second_workgroup: Option<u32>,
    /// The first run's result (or the CPU's).
    pub expected: [u32; 4],
    /// The result that disagrees.
    pub actual: [u32; 4],
    /// `redundant_run` or `cpu_reference`.
    pub check: String,
    /// The duty, clock and phase of the round that gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<LoadPoint>,
}

/// Per-kind results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KindResult {
    /// The kind.
    pub kind: ComputeKind,
    /// Rounds completed (two runs and a comparison each).
    pub rounds: u32,
    /// Multiply-add blocks per chain, calibrated for this kind.
    #[serde(default)]
    pub iterations: u32,
    /// Independent vec4 chains per work item, chosen for this kind.
    #[serde(default)]
    pub chains: u32,
    /// Multiply-adds whose results were compared (both runs of every round).
    pub verified_ops: u64,
    /// Work items that disagreed between runs.
    pub mismatches: u64,
    /// Work items checked against the CPU.
    pub cpu_checked: u64,
    /// Of those, how many disagreed.
    pub cpu_mismatches: u64,
    /// Results that were NaN or infinite (fp32).
    pub nonfinite: u64,
    /// GPU seconds in the multiply-add dispatches.
    pub gpu_s: f64,
    /// Operations (2 per multiply-add) per GPU second, in 10^9.
    pub gops: f64,
    /// The best single round's rate: the measured peak of this device.
    pub best_gops: f64,
}

/// Everything the compute test found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ComputeReport {
    /// Work items per round.
    pub items: u32,
    /// Chain iterations per work item of the first kind (each kind's are its own).
    pub iterations: u32,
    /// Independent vec4 chains per work item of the first kind (each kind's are its own).
    #[serde(default)]
    pub chains: u32,
    /// Load shape.
    pub shape: LoadShape,
    /// Per kind.
    pub kinds: Vec<KindResult>,
    /// Sweep levels (empty for other shapes).
    pub levels: Vec<LevelResult>,
    /// The first mismatches.
    pub records: Vec<Mismatch>,
    /// How the pauses went, for a load with pauses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pauses: Option<PausesReport>,
    /// What the power target achieved, where the load held one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<PowerTargetReport>,
    /// How its run ended and how long it took.
    #[serde(flatten)]
    pub run: Envelope,
}

impl ComputeReport {
    /// All mismatches and non-finite results.
    pub fn faults(&self) -> u64 {
        self.kinds
            .iter()
            .map(|k| k.mismatches + k.cpu_mismatches + k.nonfinite)
            .sum()
    }
}

impl Report for ComputeReport {
    crate::workload::envelope_in!(run);

    fn found(&self) -> Option<WorkloadStatus> {
        (self.faults() > 0).then_some(WorkloadStatus::Failed)
    }

    /// It ran once the device began its work (the calibration dispatches): stopped before
    /// a round completed, it is incomplete, not "could not run".
    fn began(&self) -> bool {
        self.kinds.iter().any(|k| k.rounds > 0 || k.iterations > 0)
    }

    /// One sentence for people.
    fn headline(&self) -> String {
        let verified: u64 = self.kinds.iter().map(|k| k.verified_ops).sum();
        let rates: Vec<String> = self
            .kinds
            .iter()
            .filter(|k| k.rounds > 0)
            .map(|k| {
                format!(
                    "{} {}",
                    k.kind.label(),
                    crate::units::scaled(k.gops, k.kind.rate_unit())
                )
            })
            .collect();
        match self.status() {
            WorkloadStatus::Failed | WorkloadStatus::SoftwareFault => format!(
                "{} (silent data corruption) in {} verified multiply-adds",
                crate::text::count(self.faults(), "wrong result"),
                crate::units::large(verified as f64)
            ),
            WorkloadStatus::NotRun => format!(
                "nothing ran: {}",
                self.run.why_cut_short().unwrap_or("no round completed")
            ),
            WorkloadStatus::Incomplete => format!(
                "no wrong result in {} verified multiply-adds, but it stopped early: {}",
                crate::units::large(verified as f64),
                self.run.why_cut_short().unwrap_or("unknown")
            ),
            WorkloadStatus::Passed => format!(
                "no wrong result in {} verified multiply-adds ({})",
                crate::units::large(verified as f64),
                rates.join(", ")
            ),
        }
    }
}

/// Each kind's running totals for its `Rates` events: its rate's name, its operations (two
/// per multiply-add) and its GPU seconds.
pub(super) fn totals(report: &ComputeReport) -> Vec<(&'static str, u64, f64)> {
    report
        .kinds
        .iter()
        .map(|k| (k.kind.rate_name(), k.verified_ops * 2, k.gpu_s))
        .collect()
}
