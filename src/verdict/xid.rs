//! The one Xid catalogue: what each NVIDIA Xid code means, whose problem it is, how much it
//! matters, the finding it gives and what to do. The verdict, `kiln health` and the HTML
//! report all answer from this table, so a code can never be hardware in one and unknown
//! in another.

use crate::finding::{Class, Confidence, Severity};

/// Where the rows come from.
const REF: &str = "shared/REFERENCE.md §2";
const NV: &str = "NVIDIA Xid catalogue for Ampere and newer (docs.nvidia.com/deploy/xid-errors)";

/// One Xid code.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct XidInfo {
    /// The Xid number.
    pub code: u32,
    /// What it means, in a few words.
    pub meaning: &'static str,
    /// Whose problem it usually is.
    pub class: Class,
    /// How much it matters.
    pub severity: Severity,
    /// How sure the code alone makes the class (a fall off the bus may be the platform's).
    pub confidence: Confidence,
    /// The finding it gives (`XID_MEMORY_HARDWARE`, ...).
    pub finding: &'static str,
    /// What to do.
    pub action: &'static str,
    /// Where the row comes from.
    pub source: &'static str,
}

const APP: &str = "the card is likely fine: look at the workload or the driver; hardware only if it recurs on unrelated work";
const MEMORY_RMA: &str = "RMA candidate: drain, reset the GPU, retest, and send this report";
const FIRMWARE: &str = "update the driver; hardware only if it persists across drivers";

const fn row(
    code: u32,
    meaning: &'static str,
    class: Class,
    (severity, confidence): (Severity, Confidence),
    finding: &'static str,
    action: &'static str,
    source: &'static str,
) -> XidInfo {
    XidInfo {
        code,
        meaning,
        class,
        severity,
        confidence,
        finding,
        action,
        source,
    }
}

/// Every Xid kiln judges, in code order.
pub const CATALOGUE: &[XidInfo] = &[
    row(
        8,
        "GPU stopped processing (idle timeout)",
        Class::Software,
        (Severity::Major, Confidence::Medium),
        "XID_APPLICATION",
        APP,
        NV,
    ),
    row(
        11,
        "invalid or corrupted push buffer stream",
        Class::Software,
        (Severity::Major, Confidence::Medium),
        "XID_DRIVER",
        "the driver, or corruption on the way to the GPU: check PCIe replays and AER, then the driver",
        NV,
    ),
    row(
        13,
        "graphics engine exception",
        Class::Software,
        (Severity::Major, Confidence::Medium),
        "XID_APPLICATION",
        APP,
        REF,
    ),
    row(
        31,
        "GPU memory page fault (MMU fault)",
        Class::Software,
        (Severity::Major, Confidence::Medium),
        "XID_APPLICATION",
        APP,
        REF,
    ),
    row(
        32,
        "invalid or corrupted push buffer stream",
        Class::Software,
        (Severity::Major, Confidence::Medium),
        "XID_DRIVER",
        "the driver, or DMA/PCIe corruption: check PCIe replays and AER, then the driver",
        REF,
    ),
    row(
        38,
        "driver firmware error",
        Class::Software,
        (Severity::Major, Confidence::Medium),
        "XID_FIRMWARE",
        FIRMWARE,
        REF,
    ),
    row(
        43,
        "GPU stopped processing (channel reset)",
        Class::Software,
        (Severity::Major, Confidence::Medium),
        "XID_APPLICATION",
        APP,
        REF,
    ),
    row(
        45,
        "preemptive cleanup after earlier errors",
        Class::Software,
        (Severity::Minor, Confidence::Medium),
        "XID_APPLICATION",
        "usually the tail of another Xid or a killed process: look at the Xid before it",
        REF,
    ),
    row(
        48,
        "double-bit ECC error",
        Class::Hardware,
        (Severity::Critical, Confidence::High),
        "XID_MEMORY_HARDWARE",
        MEMORY_RMA,
        REF,
    ),
    row(
        54,
        "auxiliary power not connected",
        Class::Environment,
        (Severity::Critical, Confidence::High),
        "AUX_POWER_MISSING",
        "connect the card's power cables",
        REF,
    ),
    row(
        61,
        "internal micro-controller warning",
        Class::Software,
        (Severity::Minor, Confidence::Medium),
        "XID_FIRMWARE",
        FIRMWARE,
        REF,
    ),
    row(
        62,
        "internal micro-controller halt",
        Class::Software,
        (Severity::Major, Confidence::Medium),
        "XID_FIRMWARE",
        "reset the GPU and update the driver; RMA if it recurs",
        REF,
    ),
    row(
        63,
        "row remap or page retirement recorded",
        Class::Hardware,
        (Severity::Major, Confidence::High),
        "XID_ROW_REMAP",
        "handled degradation: reset the GPU to apply the remap, then retest; RMA only if remaps fail (Xid 64) or keep growing",
        REF,
    ),
    row(
        64,
        "row remap or page retirement failed",
        Class::Hardware,
        (Severity::Critical, Confidence::High),
        "XID_MEMORY_HARDWARE",
        "RMA the card: its memory can no longer heal itself",
        REF,
    ),
    row(
        69,
        "graphics engine class error",
        Class::Software,
        (Severity::Major, Confidence::Medium),
        "XID_APPLICATION",
        APP,
        REF,
    ),
    row(
        74,
        "NVLink error",
        Class::Hardware,
        (Severity::Major, Confidence::Medium),
        "XID_NVLINK",
        "check the NVLink bridge or baseboard and reseat; RMA if it follows the card",
        REF,
    ),
    row(
        79,
        "fallen off the bus",
        Class::Hardware,
        (Severity::Critical, Confidence::Medium),
        "XID_FALLEN_OFF_BUS",
        "check slot, riser, PSU and temperature; RMA if it follows the card",
        REF,
    ),
    row(
        92,
        "high single-bit ECC error rate",
        Class::Hardware,
        (Severity::Minor, Confidence::Medium),
        "XID_ECC_RATE",
        "an early warning: watch the corrected ECC count, rerun with the rma profile",
        REF,
    ),
    row(
        94,
        "contained ECC error",
        Class::Hardware,
        (Severity::Major, Confidence::High),
        "XID_MEMORY_HARDWARE",
        "the GPU contained an uncorrectable error: reset, retest, and RMA if they recur",
        REF,
    ),
    row(
        95,
        "uncontained ECC error",
        Class::Hardware,
        (Severity::Critical, Confidence::High),
        "XID_MEMORY_HARDWARE",
        MEMORY_RMA,
        REF,
    ),
    row(
        109,
        "context-switch timeout",
        Class::Software,
        (Severity::Major, Confidence::Medium),
        "XID_TIMEOUT",
        "a long non-preemptible dispatch (the Linux face of a Vulkan device-lost hang): the driver or the workload, not the card",
        REF,
    ),
    row(
        119,
        "GSP RPC timeout",
        Class::Software,
        (Severity::Major, Confidence::Medium),
        "XID_FIRMWARE",
        FIRMWARE,
        REF,
    ),
    row(
        120,
        "GSP error",
        Class::Software,
        (Severity::Major, Confidence::Medium),
        "XID_FIRMWARE",
        FIRMWARE,
        REF,
    ),
    row(
        140,
        "unrecovered ECC error",
        Class::Hardware,
        (Severity::Critical, Confidence::High),
        "XID_MEMORY_HARDWARE",
        MEMORY_RMA,
        REF,
    ),
    row(
        154,
        "GPU recovery action changed",
        Class::Software,
        (Severity::Critical, Confidence::High),
        "XID_RECOVERY_ACTION",
        "do what the driver asks, then retest; the Xid before it says why",
        REF,
    ),
];

/// The row of `code`, if kiln knows it.
pub fn lookup(code: u32) -> Option<&'static XidInfo> {
    CATALOGUE.iter().find(|x| x.code == code)
}

/// The Xid code of a kernel-log event: its number, or 79 for the "fallen off the bus"
/// line older drivers print without one.
pub fn code_of(code: Option<u32>, message: &str) -> Option<u32> {
    code.or_else(|| message.contains("fallen off the bus").then_some(79))
}

/// What Xid 154 asks for, read from its text (`... changed from 0x0 (None) to 0x1 (Reset
/// Required)`), in words a person acts on.
pub fn recovery_action(message: &str) -> Option<&'static str> {
    let text = message.to_ascii_lowercase();
    let asked = text.rsplit(" to ").next().unwrap_or(&text);
    [
        ("drain and reset", "drain the node, then reset the GPU"),
        ("drain p2p", "drain peer-to-peer work from the GPU"),
        ("reboot", "reboot the node"),
        ("reset", "reset the GPU"),
        ("none", "nothing more: the driver cleared the action"),
    ]
    .into_iter()
    .find(|(needle, _)| asked.contains(needle))
    .map(|(_, words)| words)
}

/// What NVML's GPU recovery action field (`NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`) asks for:
/// None for 0 (no action) or an unknown value.
pub fn recovery_action_of(value: f64) -> Option<&'static str> {
    match value as u32 {
        1 => Some("reset the GPU"),
        2 => Some("reboot the node"),
        3 => Some("drain peer-to-peer work from the GPU"),
        4 => Some("drain the node, then reset the GPU"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogue_is_in_code_order_each_code_once_with_a_source() {
        for pair in CATALOGUE.windows(2) {
            assert!(
                pair[0].code < pair[1].code,
                "{} then {}",
                pair[0].code,
                pair[1].code
            );
        }
        for x in CATALOGUE {
            assert!(!x.meaning.is_empty() && !x.action.is_empty() && !x.source.is_empty());
            assert!(x.finding.starts_with("XID_") || x.finding == "AUX_POWER_MISSING");
        }
    }

    #[test]
    fn every_code_of_the_reference_is_known() {
        // REFERENCE.md §2, every code in its table.
        for code in [
            13, 31, 43, 45, 69, 32, 38, 119, 120, 48, 94, 95, 140, 54, 61, 62, 63, 64, 74, 79, 92,
            109, 154,
        ] {
            assert!(lookup(code).is_some(), "Xid {code} is not in the catalogue");
        }
        assert!(lookup(1).is_none());
    }

    #[test]
    fn xid_154_says_what_to_do() {
        let text = "GPU recovery action changed from 0x0 (None) to 0x1 (Reset Required)";
        assert_eq!(recovery_action(text), Some("reset the GPU"));
        assert_eq!(
            recovery_action("GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)"),
            Some("drain the node, then reset the GPU")
        );
        assert_eq!(
            recovery_action("... to 0x2 (Node Reboot Required)"),
            Some("reboot the node")
        );
        assert_eq!(recovery_action("something else"), None);
        assert_eq!(recovery_action_of(1.0), Some("reset the GPU"));
        assert_eq!(recovery_action_of(0.0), None);
    }
}
