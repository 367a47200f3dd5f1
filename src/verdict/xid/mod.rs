//! The one Xid catalogue: what each NVIDIA Xid code means, whose problem it is, how much it
//! matters, the finding it gives and what to do. The verdict, `kiln health` and the HTML
//! report all answer from this table, so a code can never be hardware in one and unknown
//! in another.

pub mod events;
pub mod nvlink5;
mod table;

use crate::finding::{Class, Confidence, FindingCode, Severity};

/// Where the rows come from.
pub(super) const NV: &str = "NVIDIA Xid catalog for Ampere and newer (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html)";
pub(super) const NV_OLD: &str =
    "NVIDIA Xid error listing r555 (docs.nvidia.com/deploy/xid-errors), for GPUs before Ampere";

/// What NVIDIA's Xid catalog says to do first about a code (its "Resolution Bucket
/// (Immediate Action)"), for every code kiln knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// Restart the application (`RESTART_APP`).
    RestartApp,
    /// Reset the GPU (`RESET_GPU`).
    ResetGpu,
    /// Reboot the node (`RESTART_BM`).
    RebootNode,
    /// Check the mechanicals: seating, cables, power, cooling (`CHECK_MECHANICALS`).
    CheckMechanicals,
    /// Contact the vendor's support (`CONTACT_SUPPORT`).
    ContactSupport,
    /// Update the driver or firmware (`UPDATE_SWFW`).
    UpdateSoftware,
    /// Nothing at once (`IGNORE`): the code informs, or follows another.
    Ignore,
    /// Look at the Xid before it and follow that one (`WORKFLOW_XID_45`).
    FollowEarlierXid,
    /// Reset the GPU, then look at its row remapping (`WORKFLOW_XID_48`).
    MemoryWorkflow,
    /// Check the NVLink connection (bridge, baseboard, cables), reset, and decode the
    /// error's registers by the bits NVIDIA's catalog lists (`WORKFLOW_NVLINK_ERR`, Xid 74).
    NvlinkWorkflow,
    /// Decode the NVLink5 error's unit and status by NVIDIA's "XID 144-150 Decode" table
    /// (`WORKFLOW_NVLINK5_ERR`): a fatal one asks a GPU reset, a non-fatal one nothing, and
    /// some follow the Xid 154 beside them ([`nvlink5`]).
    Nvlink5Workflow,
    /// Do what the driver's recovery action says (`XID_154`).
    RecoveryAction,
    /// Do what an Xid 154 beside it asks, or restart the application where there is none
    /// (`XID_154_EVAL`, some NVLink5 errors by NVIDIA's decode table).
    RecoveryActionElseRestartApp,
    /// Restart the virtual machine the GPU is passed to (`RESTART_VM`).
    RestartVm,
    /// Check the unified-memory driver and its use (`CHECK_UVM`).
    CheckUvm,
}

impl Resolution {
    /// In words, as an instruction.
    pub fn words(self) -> &'static str {
        match self {
            Resolution::RestartApp => "restart the application",
            Resolution::ResetGpu => "reset the GPU",
            Resolution::RebootNode => "reboot the node",
            Resolution::CheckMechanicals => {
                "check the mechanicals (seating, power cables, cooling)"
            }
            Resolution::ContactSupport => "contact the vendor's support",
            Resolution::UpdateSoftware => "update the driver and firmware",
            Resolution::Ignore => "no immediate action",
            Resolution::FollowEarlierXid => "follow the Xid before it",
            Resolution::MemoryWorkflow => "reset the GPU, then check its row remapping",
            Resolution::NvlinkWorkflow => {
                "check the NVLink connection, reset the GPU, and decode the error's fields"
            }
            Resolution::Nvlink5Workflow => {
                "decode the NVLink error's unit and status: reset the GPU if it is fatal, else follow the Xid 154 beside it"
            }
            Resolution::RecoveryAction => "do what the driver's recovery action asks",
            Resolution::RecoveryActionElseRestartApp => {
                "do what the Xid 154 beside it asks, or restart the application if there is none"
            }
            Resolution::RestartVm => "restart the virtual machine",
            Resolution::CheckUvm => "check the unified-memory driver (nvidia-uvm) and its use",
        }
    }

    /// Whether it takes a GPU reset or more (a reboot): a code that comes back after that
    /// has not been cured by it.
    pub fn needs_reset(self) -> bool {
        matches!(
            self,
            Resolution::ResetGpu
                | Resolution::RebootNode
                | Resolution::MemoryWorkflow
                | Resolution::RestartVm
        )
    }
}

/// One Xid code.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct XidInfo {
    /// The Xid number.
    pub code: u32,
    /// What it means, in a few words.
    pub meaning: &'static str,
    /// How much it matters.
    pub severity: Severity,
    /// How sure the code alone makes the class (a fall off the bus may be the platform's).
    pub confidence: Confidence,
    /// The finding it gives, whose class is the Xid's.
    pub finding: FindingCode,
    /// What to do, in kiln's words.
    pub action: &'static str,
    /// What NVIDIA's catalog says to do first.
    pub resolution: Resolution,
    /// Where the row comes from.
    pub source: &'static str,
}

impl XidInfo {
    /// Whose problem it usually is: its finding's class.
    pub const fn class(&self) -> Class {
        self.finding.class()
    }

    /// The cleanup of a channel stopped or faulted (43 and 45): an application's Xid that
    /// NVIDIA's catalog says to follow back to the Xid before it, or to leave alone. On a
    /// line that names no process, it is the cleanup of the fault before it.
    pub fn cleans_up(&self) -> bool {
        self.finding == FindingCode::XidApplication
            && matches!(
                self.resolution,
                Resolution::FollowEarlierXid | Resolution::Ignore
            )
    }

    /// A GSP RPC timeout or GSP error (119, 120; NVIDIA's catalog: GSP_RPC_TIMEOUT and
    /// GSP_ERROR, RESET_GPU first and INVESTIGATE_SW after). The driver often recovers
    /// from one by itself: one alone that it recovered from is a note to watch, and the
    /// catalog's reset is for those that repeat or that the GPU does not recover from.
    pub fn gsp_timeout(&self) -> bool {
        matches!(self.code, 119 | 120)
    }
}

pub(super) const APP: &str = "the card is likely fine: look at the workload or the driver; hardware only if it recurs on unrelated work";
pub(super) const MEMORY_RMA: &str =
    "RMA candidate: drain, reset the GPU, retest, and send this report";
pub(super) const FIRMWARE: &str = "update the driver; hardware only if it persists across drivers";
pub(super) const NVLINK: &str =
    "check the NVLink bridge or baseboard and reseat; RMA if it follows the card";
pub(super) const GPU_FAULT: &str = "reset the GPU and retest; RMA if it recurs after resets";
pub(super) const ENGINE: &str = "an engine the application used (copy, video, JPEG, optical flow) faulted on its work: restart it; hardware only if it recurs on unrelated work";
pub(super) const INFORMS: &str = "nothing to do: the driver informs";

/// A row of the catalogue: the code, what it means, its judgement (severity, confidence,
/// finding, kiln's action) and NVIDIA's first action. Its class is its finding's.
pub(super) const fn row(
    code: u32,
    meaning: &'static str,
    (severity, confidence): (Severity, Confidence),
    (finding, action): (FindingCode, &'static str),
    (resolution, source): (Resolution, &'static str),
) -> XidInfo {
    XidInfo {
        code,
        meaning,
        severity,
        confidence,
        finding,
        action,
        resolution,
        source,
    }
}

pub use table::CATALOGUE;

/// The row of `code`, if kiln knows it.
pub fn lookup(code: u32) -> Option<&'static XidInfo> {
    CATALOGUE.iter().find(|x| x.code == code)
}

/// The Xid code of a kernel-log event: its number, or 79 for the "fallen off the bus"
/// line older drivers print without one.
pub fn code_of(code: Option<u32>, message: &str) -> Option<u32> {
    crate::telemetry::record::xid_code(code, message)
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

/// Whether Xid 154's text asks for a GPU reset or more (a reboot, a drain and reset), not
/// that the action was cleared.
pub fn asks_a_reset(message: &str) -> bool {
    let text = message.to_ascii_lowercase();
    let asked = text.rsplit(" to ").next().unwrap_or(&text);
    asked.contains("reset") || asked.contains("reboot")
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
    use crate::finding::{HealthFault, Severity};

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
            assert_eq!(x.finding.info().health, HealthFault::Xid, "{}", x.code);
        }
    }

    #[test]
    fn a_reset_or_more_is_what_escalation_counts() {
        assert!(lookup(79).unwrap().resolution.needs_reset(), "a reboot");
        assert!(lookup(48).unwrap().resolution.needs_reset());
        assert!(
            !lookup(13).unwrap().resolution.needs_reset(),
            "a restart of the app"
        );
        assert!(!lookup(45).unwrap().resolution.needs_reset());
        for x in CATALOGUE {
            assert!(!x.resolution.words().is_empty());
        }
    }

    #[test]
    fn every_code_of_the_reference_is_known() {
        // Every code NVIDIA's Xid catalog gives a resolution for that kiln classes by hand.
        for code in [
            13, 31, 43, 45, 69, 32, 38, 119, 120, 48, 94, 95, 140, 54, 61, 62, 63, 64, 74, 79, 92,
            109, 154,
        ] {
            assert!(lookup(code).is_some(), "Xid {code} is not in the catalogue");
        }
        assert!(lookup(1).is_none());
    }

    #[test]
    fn the_catalogue_follows_nvidias_current_catalog() {
        // Used on every GPU of the catalog though it calls them unused: an injected error
        // and an NVLink remote translation error, both with nothing to do.
        for code in [14, 108] {
            let x = lookup(code).expect("in the catalogue");
            assert_eq!(x.resolution, Resolution::Ignore, "Xid {code}");
        }
        assert!(
            lookup(12).is_none(),
            "unused on every GPU the catalog lists"
        );
        // Blackwell's NVLink5 errors are decoded by their own table; Hopper's Xid 74 by
        // its registers.
        for code in 144..=150 {
            assert_eq!(
                lookup(code).unwrap().resolution,
                Resolution::Nvlink5Workflow
            );
        }
        assert_eq!(lookup(74).unwrap().resolution, Resolution::NvlinkWorkflow);
        // A failed resource retirement: the catalog's immediate action is none (work may go
        // on), its investigation the vendor's support.
        assert_eq!(lookup(157).unwrap().resolution, Resolution::Ignore);
        // Corrected C2C errors cost nothing: a note to watch, not a drain.
        assert!(lookup(121).unwrap().severity > Severity::Major);
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
