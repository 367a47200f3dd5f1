//! The fault codes of `kiln health`: those the verdict's findings become (the finding
//! catalogue says which), and the check's own (the GPU count, the last full run, what
//! could not be checked).

use crate::exit_code;
use crate::finding::{Class, Finding, FindingCode, HealthCode, HealthFault, HealthKind};

/// Every GPU healthy.
pub(super) const HEALTHY: HealthCode = HealthCode::new(HealthKind::Ok, 0);
/// Fewer GPUs than `--expect-gpus`.
pub(super) const GPUS_MISSING: HealthCode = HealthCode::new(HealthKind::Cnt, 1);
/// A GPU the driver holds on the PCI bus that a working NVML cannot reach.
pub(super) const GPU_UNREACHABLE: HealthCode = HealthCode::new(HealthKind::Cnt, 2);
/// The last full run is older than `--max-age`.
pub(super) const RUN_TOO_OLD: HealthCode = HealthCode::new(HealthKind::Run, 1);
/// The last full run did not pass.
pub(super) const RUN_NOT_PASSED: HealthCode = HealthCode::new(HealthKind::Run, 2);
/// There is no full run.
pub(super) const RUN_NONE: HealthCode = HealthCode::new(HealthKind::Run, 3);
/// No GPU to check.
pub(super) const NO_GPU: HealthCode = HealthCode::new(HealthKind::Not, 1);
/// A GPU's memory counters could not be read.
pub(super) const NOT_READ: HealthCode = HealthCode::new(HealthKind::Not, 2);
/// `--gpus` given, but no GPU's NVML index could be read.
pub(super) const NO_INDEX: HealthCode = HealthCode::new(HealthKind::Not, 3);
/// The state file was damaged: the open faults it held may be lost, so the node fails until
/// a person has looked at them and clears this.
pub(super) const STATE_DAMAGED: HealthCode = HealthCode::new(HealthKind::Not, 4);
/// The NVIDIA kernel driver is not loaded: the catalogue's code for its finding.
pub(super) const DRIVER_NOT_LOADED: HealthCode = fixed(FindingCode::DriverNotLoaded);
/// NVML and the kernel driver differ in version.
pub(super) const DRIVER_MISMATCH: HealthCode = fixed(FindingCode::DriverVersionMismatch);

/// The one fault code the catalogue gives `code` (checked when kiln is built).
const fn fixed(code: FindingCode) -> HealthCode {
    match code.info().health {
        HealthFault::Fault { code, .. } => code,
        _ => panic!("the catalogue gives this finding no fixed health code"),
    }
}

/// How a finding of the verdict's rules reads in `kiln health`: its fault code, and whether
/// it is an event that stays open until cleared (a state that is read anew at every check
/// is not kept), as the catalogue says. Findings the catalogue leaves out (throttling at
/// one idle sample, other tenants of a busy node) are not the node check's to judge.
pub(super) fn of(finding: &Finding) -> Option<(HealthCode, bool)> {
    match finding.code.info().health {
        HealthFault::NotJudged => None,
        HealthFault::Fault { code, sticky } => Some((code, sticky)),
        HealthFault::Xid => Some((HealthCode::xid(finding.facts.worst_xid?), true)),
    }
}

/// The exit code a finding's class asks for.
pub(super) fn class_exit(class: Class) -> i32 {
    match class {
        Class::Hardware => exit_code::HARDWARE,
        Class::Environment => exit_code::ENVIRONMENT,
        Class::Software => exit_code::SOFTWARE,
        _ => exit_code::INCONCLUSIVE,
    }
}

/// The next step of a fault that no finding's action gives: the check's own codes (the
/// count, the last run, what could not be read), and a fault kept open from a state file
/// written before faults carried their step (then by its exit code).
pub(super) fn own_next(code: HealthCode, exit: i32, opts: &super::HealthOptions) -> String {
    let runs = opts
        .runs
        .as_deref()
        .map_or("kiln-runs".to_owned(), |r| r.display().to_string());
    let full_run = format!("`kiln run --profile burn-in --out {runs}/<name>`");
    match code {
        GPUS_MISSING => "check that every GPU is seated and powered and that `nvidia-smi` lists it, then check again".into(),
        GPU_UNREACHABLE => "reboot the node (or reset the GPU); if NVML still cannot reach it, reseat it and check its power cables, then confirm with `kiln run --profile rma`".into(),
        RUN_NONE if exit == exit_code::NOT_TESTED => format!("start a full run: {full_run}"),
        RUN_NONE => format!("look at the runs named in the notes, then start a full run: {full_run}"),
        RUN_TOO_OLD => format!("run a full test again: {full_run}"),
        NO_GPU => "install or load the NVIDIA driver (`nvidia-smi` must list the GPUs), then check again".into(),
        NOT_READ => "check as root, or with read access to the GPU's counters, to read what the notes say could not be read".into(),
        NO_INDEX => "check without --gpus, or repair NVML (`nvidia-smi` must list the indices)".into(),
        STATE_DAMAGED => "look at the damaged state file kept beside it, then clear: `kiln health --state FILE --clear all`".into(),
        DRIVER_NOT_LOADED => "load the NVIDIA kernel driver (`modprobe nvidia`) or reinstall it, then check again".into(),
        DRIVER_MISMATCH => "reboot the node after the driver upgrade, so NVML and the kernel driver match".into(),
        _ => match exit {
            exit_code::HARDWARE => "confirm with `kiln run --profile rma` (it reruns what found a fault) before sending the card back".into(),
            exit_code::ENVIRONMENT => "check the cooling, power and PCIe link of the node, then run `kiln run` again".into(),
            exit_code::SOFTWARE => "check the driver and the applications the node ran, then run `kiln run` again".into(),
            _ => format!("start a full run: {full_run}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::{Confidence, Severity, finding};

    #[test]
    fn the_check_s_own_codes_are_spelt_as_the_docs_list_them() {
        let spelt: Vec<String> = [
            HEALTHY,
            GPUS_MISSING,
            GPU_UNREACHABLE,
            RUN_TOO_OLD,
            RUN_NOT_PASSED,
            RUN_NONE,
            NO_GPU,
            NOT_READ,
            NO_INDEX,
            STATE_DAMAGED,
            DRIVER_NOT_LOADED,
            DRIVER_MISMATCH,
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            spelt,
            [
                "KILN-OK-000",
                "KILN-CNT-001",
                "KILN-CNT-002",
                "KILN-RUN-001",
                "KILN-RUN-002",
                "KILN-RUN-003",
                "KILN-NOT-001",
                "KILN-NOT-002",
                "KILN-NOT-003",
                "KILN-NOT-004",
                "KILN-DRV-001",
                "KILN-DRV-002",
            ]
        );
    }

    #[test]
    fn a_finding_becomes_the_fault_its_catalogue_row_names() {
        let f = |code| {
            let mut f = finding(
                code,
                Severity::Major,
                Confidence::High,
                String::new(),
                crate::finding::Evidence::default(),
                "",
            );
            f.facts.worst_xid = Some(79);
            f
        };
        assert_eq!(
            of(&f(FindingCode::EccUncorrectable)).map(|(c, s)| (c.to_string(), s)),
            Some(("KILN-MEM-002".to_owned(), true))
        );
        assert_eq!(
            of(&f(FindingCode::RowRemapPending)).map(|(c, s)| (c.to_string(), s)),
            Some(("KILN-MEM-003".to_owned(), false))
        );
        assert_eq!(
            of(&f(FindingCode::XidFallenOffBus)).map(|(c, s)| (c.to_string(), s)),
            Some(("KILN-XID-079".to_owned(), true))
        );
        assert_eq!(
            of(&f(FindingCode::ThermalThrottle)),
            None,
            "not the node check's"
        );
        // An Xid finding with no Xid behind it is no fault to name.
        let mut bare = f(FindingCode::XidDriver);
        bare.facts.worst_xid = None;
        assert_eq!(of(&bare), None);
    }
}
