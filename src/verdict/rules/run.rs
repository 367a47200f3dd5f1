//! Findings about the run as a whole rather than one device's evidence: a GPU Vulkan cannot
//! see, evidence lost from the run directory, a run a signal stopped.

use crate::finding::{Confidence, Finding, FindingCode, Seconds, Severity, evidence, finding};

crate::evidence! {
    /// The evidence of `GPU_NOT_VISIBLE`: the GPU as the machine knows it, and the cause.
    struct NotVisible<'a> {
        cause: &'a str => "Cause",
        pci_address: Option<&'a str> => "PCI address",
        /// `0x10de`.
        vendor_id: String => "Vendor id",
        device_id: Option<String> => "Device id",
        uuid: Option<&'a str> => "UUID",
        kernel_driver: Option<&'a str> => "Kernel driver",
        mig_enabled: Option<bool> => "MIG on",
        seen_by: &'a [String] => "Seen by",
    }
}

crate::evidence! {
    /// The evidence of `EVIDENCE_MISSING`.
    struct Missing {
        file: &'static str => "File",
        /// What is in its place.
        found: String => "Found",
    }
}

crate::evidence! {
    /// The evidence of `RUN_INTERRUPTED`: when, what was running, and what it left.
    struct Interrupted<'a> {
        /// Seconds into the run, to a tenth.
        at_s: Seconds => "At",
        running: &'a [String] => "Running",
        cut_short: Vec<&'a str> => "Cut short",
        not_run: Vec<&'a str> => "Not run",
    }
}

/// The finding of a GPU the machine has (NVML, sysfs) that Vulkan cannot see: not tested,
/// so nothing is known of its compute and memory and the run cannot pass. The cause read
/// from the machine is the action. `observed`: the run read its telemetry all along, which
/// the card's rules judged beside this finding (a fault it shows fails the card; a clean
/// one passes nothing).
pub fn gpu_not_visible(
    gpu: &crate::inventory::InventoryGpu,
    cause: &crate::inventory::Cause,
    observed: bool,
) -> Finding {
    let at = gpu
        .pci_address
        .as_deref()
        .unwrap_or("an unknown PCI address");
    finding(
        FindingCode::GpuNotVisible,
        Severity::Major,
        Confidence::High,
        if observed {
            format!(
                "{} at {at} is not visible to Vulkan: its compute and memory were not tested; only what its telemetry shows (RAS and ECC counters, sensors, the PCIe link) was judged",
                gpu.name
            )
        } else {
            format!("{} at {at} is not visible to Vulkan: not tested", gpu.name)
        },
        evidence(&NotVisible {
            cause: &cause.cause,
            pci_address: gpu.pci_address.as_deref(),
            vendor_id: format!("0x{:04x}", gpu.vendor_id),
            device_id: gpu.device_id.map(|d| format!("0x{d:04x}")),
            uuid: gpu.uuid.as_deref(),
            kernel_driver: gpu.kernel_driver.as_deref(),
            mig_enabled: gpu.mig_enabled,
            seen_by: &gpu.seen_by,
        }),
        &cause.message,
    )
}

/// The finding of an evidence file the run wrote that holds no evidence now (gone,
/// something else in its place, unreadable, emptied): what rests on it could not be
/// judged, so the device cannot pass on what is left.
pub fn evidence_missing(lost: &crate::rundir::LostEvidence) -> Finding {
    let file = lost.file;
    finding(
        FindingCode::EvidenceMissing,
        Severity::Major,
        Confidence::High,
        format!(
            "{} {}, though the run wrote it: {}",
            file.file_name(),
            lost.said(),
            file.judges()
        ),
        evidence(&Missing {
            file: file.file_name(),
            found: lost.found(),
        }),
        "judge the run directory as the run left it (copy every file, keep none out), or run the test again",
    )
}

/// The finding of a run a signal stopped (Ctrl+C, SIGTERM, a scheduler's time limit): what
/// ran before it stands, but the test did not go to its end, so it cannot pass. `at_s` is
/// when the signal came, `running` what the device was running then.
pub fn run_interrupted(
    at_s: f64,
    running: &[String],
    workloads: &[crate::workload::WorkloadOutcome],
) -> Finding {
    use crate::workload::WorkloadStatus;
    let named = |status: WorkloadStatus| -> Vec<&str> {
        workloads
            .iter()
            .filter(|w| w.status == status)
            .map(|w| w.workload.as_str())
            .collect()
    };
    let summary = if !workloads.iter().any(|w| w.reported()) && running.is_empty() {
        format!(
            "a signal interrupted the run at {at_s:.1} s, before this device's test started: nothing was tested"
        )
    } else if running.is_empty() {
        format!(
            "a signal interrupted the run at {at_s:.1} s, between workloads: the test did not finish"
        )
    } else {
        format!(
            "a signal interrupted the run at {at_s:.1} s, during {}: the test did not finish",
            running.join(", ")
        )
    };
    finding(
        FindingCode::RunInterrupted,
        Severity::Major,
        Confidence::High,
        summary,
        evidence(&Interrupted {
            at_s: Seconds((at_s * 10.0).round() / 10.0),
            running,
            cut_short: named(WorkloadStatus::Incomplete),
            not_run: named(WorkloadStatus::NotRun),
        }),
        "run the test again to its end without stopping it (a scheduler's time limit must exceed the profile's duration)",
    )
}

#[cfg(test)]
mod tests {
    use crate::workload::{WorkloadOutcome, WorkloadResult, WorkloadStatus};

    fn outcome(name: &str, status: WorkloadStatus) -> WorkloadOutcome {
        WorkloadOutcome {
            workload: name.into(),
            status,
            headline: String::new(),
            summary: WorkloadResult::from_json(name, serde_json::json!({})),
        }
    }

    #[test]
    fn an_interrupted_run_says_what_ran_what_was_cut_and_what_never_ran() {
        // A compute run that reported its results, then a VRAM run cut short.
        let ran = super::super::testing::computed_at(40_000.0)
            .workloads
            .remove(0);
        let done = [
            ran,
            outcome("vram", WorkloadStatus::Incomplete),
            outcome("pcie", WorkloadStatus::NotRun),
        ];
        let f = super::run_interrupted(93.46, &["vram".to_owned()], &done);
        assert_eq!(f.code, crate::finding::FindingCode::RunInterrupted);
        assert_eq!(
            f.summary,
            "a signal interrupted the run at 93.5 s, during vram: the test did not finish"
        );
        assert_eq!(
            f.evidence.json(),
            &serde_json::json!({"at_s": 93.5, "running": ["vram"],
                "cut_short": ["vram"], "not_run": ["pcie"]})
        );
        // People read it in words and units.
        assert!(
            f.evidence
                .rows()
                .contains(&("At".to_owned(), "93.5 s".to_owned())),
            "{:?}",
            f.evidence.rows()
        );
        // Before any workload began, it says nothing was tested.
        let early = super::run_interrupted(1.0, &[], &[outcome("vram", WorkloadStatus::NotRun)]);
        assert!(
            early.summary.ends_with("nothing was tested"),
            "{}",
            early.summary
        );
        // Between two workloads.
        let between = super::run_interrupted(40.0, &[], &done[..1]);
        assert!(
            between.summary.contains("between workloads"),
            "{}",
            between.summary
        );
    }
}
