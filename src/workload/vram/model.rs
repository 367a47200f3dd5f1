//! The VRAM test's report: how memory was sized and covered, the rates, every wrong
//! word's record and retest, and the histograms of what flipped.

use super::*;

/// How much memory was sized and why.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sizing {
    /// Size of the largest device-local heap.
    pub heap_bytes: u64,
    /// Free device-local memory when the test started.
    pub free_at_start_bytes: u64,
    /// Where `free_at_start_bytes` comes from.
    pub free_source: String,
    /// Memory deliberately left untested.
    pub reserve_bytes: u64,
    /// What the test set out to test.
    pub sized_bytes: u64,
    /// What it could allocate.
    pub allocated_bytes: u64,
    /// Test buffers allocated.
    pub buffer_count: usize,
    /// Largest test buffer.
    pub max_buffer_bytes: u64,
    /// Why allocation stopped short of `sized_bytes`, if it did.
    pub allocation_stopped_by: Option<String>,
    /// Bytes of what was allocated as device-local that the OS placed in system memory
    /// (Windows' WDDM under pressure), as its video-memory counters showed after
    /// allocating; None when all of it is in the card, or the OS keeps no such counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placed_in_system_bytes: Option<u64>,
}

/// Bytes tested, and as shares of what was sized, the heap, and the free memory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Coverage {
    /// Bytes verified at least once.
    pub tested_bytes: u64,
    /// tested / sized.
    pub of_sized: f64,
    /// tested / heap.
    pub of_heap: f64,
    /// tested / free at start.
    pub of_free: f64,
}

/// Error statistics over every wrong word (not only the recorded ones).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Histograms {
    /// Index n: words with n bits flipped.
    pub flipped_bits: Vec<u64>,
    /// Index b: failures of bit b.
    pub bit_position: Vec<u64>,
    /// Bits read 1 that were written 0.
    pub zero_to_one: u64,
    /// Bits read 0 that were written 1.
    pub one_to_zero: u64,
}

impl Default for Histograms {
    fn default() -> Self {
        Histograms {
            flipped_bits: vec![0; 33],
            bit_position: vec![0; 32],
            zero_to_one: 0,
            one_to_zero: 0,
        }
    }
}

/// Rate of one operation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rate {
    /// Bytes.
    pub bytes: u64,
    /// GPU seconds.
    pub gpu_s: f64,
    /// GiB per GPU second.
    pub gib_per_s: f64,
}

impl Rate {
    pub(super) fn of(bytes: u64, ns: u64) -> Rate {
        let gpu_s = ns as f64 / 1e9;
        Rate {
            bytes,
            gpu_s,
            gib_per_s: if gpu_s > 0.0 {
                to_gib(bytes) / gpu_s
            } else {
                0.0
            },
        }
    }
}

/// Throughput of the test.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Throughput {
    /// Pattern writes (shader and fill).
    pub write: Rate,
    /// Verification reads.
    pub verify: Rate,
    /// Verify-then-invert sweeps (each byte read and written).
    pub rewrite: Rate,
    /// Bytes written plus bytes verified, per wall second of the sweeps.
    pub combined_gib_per_wall_s: f64,
    /// Wall seconds spent sweeping.
    pub sweep_wall_s: f64,
    /// `gpu_timestamps` or `wall_clock`.
    pub timing_source: String,
    /// True when the write rate includes the first sweep that touched the memory (which
    /// pays for first touch): the run wrote the memory only once. Otherwise that sweep is
    /// left out of every rate.
    #[serde(default)]
    pub includes_first_touch: bool,
}

/// Per-algorithm outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AlgorithmRun {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Complete passes.
    pub passes_completed: u32,
    /// Wrong words found.
    pub errors: u64,
}

/// Everything the VRAM test found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VramReport {
    /// Sizing.
    pub sizing: Sizing,
    /// Coverage.
    pub coverage: Coverage,
    /// Access layout used.
    pub layout: AccessLayout,
    /// Per algorithm.
    pub algorithms: Vec<AlgorithmRun>,
    /// Wrong words found, never capped.
    pub errors_total: u64,
    /// The first wrong words, up to the record capacity.
    pub records: Vec<ErrorRecord>,
    /// Wrong words counted but not recorded.
    pub records_dropped: u64,
    /// Statistics over every wrong word.
    pub histograms: Histograms,
    /// In-place retests.
    pub retests: Vec<RetestResult>,
    /// Throughput.
    pub throughput: Throughput,
    /// How its run ended and how long it took.
    #[serde(flatten)]
    pub run: Envelope,
}

impl Report for VramReport {
    crate::workload::envelope_in!(run);

    fn found(&self) -> Option<WorkloadStatus> {
        (self.errors_total > 0).then_some(WorkloadStatus::Failed)
    }

    fn began(&self) -> bool {
        self.coverage.tested_bytes > 0
    }

    /// One sentence for people.
    fn headline(&self) -> String {
        let tested = to_gib(self.coverage.tested_bytes);
        match self.status() {
            WorkloadStatus::Failed | WorkloadStatus::SoftwareFault => format!(
                "{} in {tested:.2} GiB tested ({} recorded)",
                crate::text::count(self.errors_total, "wrong read"),
                self.records.len()
            ),
            WorkloadStatus::Passed => format!(
                "no errors in {tested:.2} GiB ({:.0}% of free memory), {}",
                self.coverage.of_free * 100.0,
                crate::text::count(
                    self.algorithms
                        .iter()
                        .map(|a| a.passes_completed)
                        .sum::<u32>(),
                    "algorithm pass"
                )
            ),
            WorkloadStatus::Incomplete => format!(
                "no errors in what ran ({tested:.2} GiB), but the test stopped early: {}",
                self.run.why_cut_short().unwrap_or("unknown")
            ),
            WorkloadStatus::NotRun => format!(
                "nothing was tested: {}",
                self.run
                    .why_cut_short()
                    .unwrap_or("no memory could be allocated")
            ),
        }
    }
}
