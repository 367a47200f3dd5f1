//! The PCIe probe's report: the rates at each size, the sustained phase, the transfers
//! that arrived wrong, the link under load, and what it found.

use super::*;

/// The sustained phase: the largest transfers, verified, until the budget is spent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sustained {
    /// Seconds it ran.
    pub seconds: f64,
    /// Rounds (each `repeats` uploads, readbacks and two-way transfers).
    pub rounds: u32,
    /// Median host-to-device rate over the rounds, GB/s.
    pub h2d_gbps: f64,
    /// Median device-to-host rate, GB/s.
    pub d2h_gbps: f64,
    /// The slowest round's host-to-device rate, GB/s: a link that slows under sustained
    /// load shows here before it shows in the median.
    pub min_h2d_gbps: f64,
}

/// Rates at one transfer size, in GB/s (10^9 bytes per second).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SizeResult {
    /// Transfer size.
    pub bytes: u64,
    /// Host to device.
    pub h2d_gbps: f64,
    /// Device to host.
    pub d2h_gbps: f64,
    /// Both directions at once (bytes moved both ways per second).
    pub bidir_gbps: f64,
    /// Shortest host-to-device transfer, in microseconds.
    pub h2d_latency_us: f64,
    /// Shortest device-to-host transfer, in microseconds.
    pub d2h_latency_us: f64,
}

/// A transfer whose data arrived wrong.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Corruption {
    /// `h2d` when the device's checksum already disagreed, else `d2h`.
    pub direction: String,
    /// Transfer size.
    pub bytes: u64,
    /// First wrong byte.
    pub offset: u64,
    /// Bytes that differ.
    pub differing_bytes: u64,
    /// What was sent there.
    pub expected: u8,
    /// What came back.
    pub actual: u8,
}

/// The link as read while the largest transfers ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkUnderLoad {
    /// Generation while the largest transfers ran (the highest sampled: a link trains up
    /// under load and drops at idle).
    pub generation: Option<u32>,
    /// The most the link can train to: the lower of the card's and its upstream port's
    /// maximum (a Gen5 card in a Gen4 slot is not degraded).
    pub generation_max: Option<u32>,
    /// Width while the largest transfers ran.
    pub width: Option<u32>,
    /// The lower of the card's and the upstream port's maximum width.
    pub width_max: Option<u32>,
    /// Theoretical bandwidth per direction of the link in use, GB/s.
    pub theoretical_gbps: Option<f64>,
    /// The card's own maximum generation and width, when the upstream port is lower.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card_max: Option<(Option<u32>, Option<u32>)>,
    /// Link samples taken during the largest transfers.
    #[serde(default)]
    pub samples: usize,
}

/// Everything the probe found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PcieReport {
    /// The largest transfer: the configured one, or less where the device's storage-range
    /// or allocation limit is smaller.
    pub largest_bytes: u64,
    /// Memory types of the upload staging buffer.
    pub upload_memory: Vec<String>,
    /// Memory types of the readback staging buffer.
    pub readback_memory: Vec<String>,
    /// True when both staging buffers are in host memory (a heap that is not
    /// device-local): only then do the transfers cross the bus and their rates say
    /// anything of the link. False on a device with no such memory (then the rates are
    /// not judged).
    #[serde(default)]
    pub staging_in_host_memory: bool,
    /// Per size.
    pub sizes: Vec<SizeResult>,
    /// Best host-to-device rate.
    pub peak_h2d_gbps: f64,
    /// Best device-to-host rate.
    pub peak_d2h_gbps: f64,
    /// Best two-way rate.
    pub peak_bidir_gbps: f64,
    /// Transfers verified.
    pub transfers_verified: u64,
    /// Corrupted transfers.
    pub corruption: Vec<Corruption>,
    /// The link under load, where sysfs shows it.
    pub link: Option<LinkUnderLoad>,
    /// Verified transfers of the largest size repeated for the rest of the time budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sustained: Option<Sustained>,
    /// Evidence for the verdict: `pcie_link_degraded`.
    pub findings: Vec<PcieFinding>,
    /// How its run ended and how long it took.
    #[serde(flatten)]
    pub run: Envelope,
}

/// What the probe can find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PcieFindingKind {
    /// The link ran below its generation or width under load (`pcie_link_degraded`).
    LinkDegraded,
    /// Any other sentence, read back from evidence of an older kiln (`pcie_bandwidth_low`,
    /// before the verdict judged the rates itself): kept, judged by nothing. This kiln
    /// writes none.
    Other,
}

impl FindingKind for PcieFindingKind {
    fn name(self) -> &'static str {
        match self {
            PcieFindingKind::LinkDegraded => "pcie_link_degraded",
            PcieFindingKind::Other => "other",
        }
    }

    fn of(message: &str) -> PcieFindingKind {
        if message.starts_with("pcie_link_degraded") {
            PcieFindingKind::LinkDegraded
        } else {
            PcieFindingKind::Other
        }
    }
}

/// One finding of the probe.
pub type PcieFinding = WorkloadFinding<PcieFindingKind>;

impl Report for PcieReport {
    crate::workload::envelope_in!(run);

    /// Failed on corruption (bandwidth findings are evidence for the verdict, not
    /// failures of the card by themselves).
    fn found(&self) -> Option<WorkloadStatus> {
        (!self.corruption.is_empty()).then_some(WorkloadStatus::Failed)
    }

    fn began(&self) -> bool {
        !self.sizes.is_empty()
    }

    /// One sentence for people.
    fn headline(&self) -> String {
        let mut rates = format!(
            "H2D {:.1} GB/s, D2H {:.1} GB/s, both {:.1} GB/s",
            self.peak_h2d_gbps, self.peak_d2h_gbps, self.peak_bidir_gbps
        );
        if let Some(s) = &self.sustained {
            rates.push_str(&format!(
                "; sustained {:.0} s: H2D {:.1} GB/s (slowest {:.1}), D2H {:.1} GB/s",
                s.seconds, s.h2d_gbps, s.min_h2d_gbps, s.d2h_gbps
            ));
        }
        match self.status() {
            WorkloadStatus::Failed => {
                format!("{} corrupted transfers ({rates})", self.corruption.len())
            }
            WorkloadStatus::NotRun => format!(
                "nothing ran: {}",
                self.run
                    .device_error
                    .as_deref()
                    .unwrap_or("no size completed")
            ),
            _ if !self.findings.is_empty() => {
                format!("{rates}; {}", join_findings(&self.findings))
            }
            WorkloadStatus::Incomplete => format!(
                "{} verified ({rates}), but the probe stopped early: {}",
                crate::text::count(self.transfers_verified, "transfer"),
                self.run.why_cut_short().unwrap_or("unknown")
            ),
            _ => format!(
                "{} verified, {rates}",
                crate::text::count(self.transfers_verified, "transfer")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_of_older_runs_read_back_from_their_sentences() {
        // Before findings were typed, the evidence carried each one as its sentence alone;
        // only a degraded link was ever judged.
        let old = serde_json::json!([
            "pcie_link_degraded: width x8 of x16 under load",
            "pcie_bandwidth_low: H2D 3.1 GB/s is 20% of the link's 15.8 GB/s",
        ]);
        let findings: Vec<PcieFinding> = serde_json::from_value(old.clone()).unwrap();
        let kinds: Vec<PcieFindingKind> = findings.iter().map(|f| f.kind).collect();
        assert_eq!(
            kinds,
            [PcieFindingKind::LinkDegraded, PcieFindingKind::Other]
        );
        assert_eq!(
            serde_json::to_value(&findings).unwrap(),
            old,
            "written as read"
        );
    }
}
