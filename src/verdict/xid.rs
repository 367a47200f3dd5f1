//! The one Xid catalogue: what each NVIDIA Xid code means, whose problem it is, how much it
//! matters, the finding it gives and what to do. The verdict, `kiln health` and the HTML
//! report all answer from this table, so a code can never be hardware in one and unknown
//! in another.

use crate::finding::{Class, Confidence, FindingCode, Severity};

/// Where the rows come from.
const REF: &str = "shared/REFERENCE.md §2";
const NV: &str = "NVIDIA Xid catalog for Ampere and newer (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html)";
const NV_OLD: &str =
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
    /// error's fields where NVIDIA's catalog gives a table for them (`WORKFLOW_NVLINK_ERR`,
    /// `WORKFLOW_NVLINK5_ERR`).
    NvlinkWorkflow,
    /// Do what the driver's recovery action says (`XID_154`).
    RecoveryAction,
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
            Resolution::RecoveryAction => "do what the driver's recovery action asks",
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
}

const APP: &str = "the card is likely fine: look at the workload or the driver; hardware only if it recurs on unrelated work";
const MEMORY_RMA: &str = "RMA candidate: drain, reset the GPU, retest, and send this report";
const FIRMWARE: &str = "update the driver; hardware only if it persists across drivers";
const NVLINK: &str = "check the NVLink bridge or baseboard and reseat; RMA if it follows the card";
const GPU_FAULT: &str = "reset the GPU and retest; RMA if it recurs after resets";
const ENGINE: &str = "an engine the application used (copy, video, JPEG, optical flow) faulted on its work: restart it; hardware only if it recurs on unrelated work";
const INFORMS: &str = "nothing to do: the driver informs";

/// A row of the catalogue: the code, what it means, its judgement (severity, confidence,
/// finding, kiln's action) and NVIDIA's first action. Its class is its finding's.
const fn row(
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

use Confidence::{High, Medium};
use Resolution as R;
use Severity::{Critical, Major, Minor, Note};

/// Every Xid kiln judges, in code order: every code NVIDIA's catalog for Ampere and newer
/// uses (those it marks unused left out, but for 57 and 58 of older cards). Classes follow
/// REFERENCE.md §2 and the causes NVIDIA's listing names; the resolution is NVIDIA's
/// catalog's first action.
pub const CATALOGUE: &[XidInfo] = &[
    row(
        8,
        "GPU stopped processing (idle timeout)",
        (Major, Medium),
        (FindingCode::XidApplication, APP),
        (R::RestartApp, NV),
    ),
    row(
        11,
        "invalid or corrupted push buffer stream",
        (Major, Medium),
        (
            FindingCode::XidDriver,
            "the driver, or corruption on the way to the GPU: check PCIe replays and AER, then the driver",
        ),
        (R::RestartApp, NV),
    ),
    row(
        13,
        "graphics engine exception",
        (Major, Medium),
        (FindingCode::XidApplication, APP),
        (R::RestartApp, REF),
    ),
    row(
        25,
        "invalid or illegal push buffer stream",
        (Major, Medium),
        (
            FindingCode::XidDriver,
            "the driver, or corruption on the way to the GPU: check PCIe replays and AER, then the driver",
        ),
        (R::RestartApp, NV),
    ),
    row(
        31,
        "GPU memory page fault (MMU fault)",
        (Major, Medium),
        (FindingCode::XidApplication, APP),
        (R::RestartApp, REF),
    ),
    row(
        32,
        "invalid or corrupted push buffer stream",
        (Major, Medium),
        (
            FindingCode::XidDriver,
            "the driver, or DMA/PCIe corruption: check PCIe replays and AER, then the driver",
        ),
        (R::RestartApp, REF),
    ),
    row(
        37,
        "driver firmware error (unimplemented method)",
        (Minor, Medium),
        (FindingCode::XidFirmware, FIRMWARE),
        (R::Ignore, NV),
    ),
    row(
        38,
        "driver firmware error",
        (Major, Medium),
        (FindingCode::XidFirmware, FIRMWARE),
        (R::Ignore, REF),
    ),
    row(
        39,
        "copy engine 0 exception",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        40,
        "copy engine 1 exception",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        41,
        "copy engine 2 exception",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        43,
        "GPU stopped processing (channel reset)",
        (Minor, Medium),
        (
            FindingCode::XidApplication,
            "usually a process that was stopped or killed: look at the Xid before it and at who ran",
        ),
        (R::Ignore, REF),
    ),
    row(
        44,
        "graphics engine fault during a context switch",
        (Minor, Medium),
        (FindingCode::XidDriver, "the driver: update it if it recurs"),
        (R::Ignore, NV),
    ),
    row(
        45,
        "preemptive cleanup after earlier errors",
        (Minor, Medium),
        (
            FindingCode::XidApplication,
            "usually the tail of another Xid or a killed process: look at the Xid before it",
        ),
        (R::FollowEarlierXid, REF),
    ),
    row(
        46,
        "GPU stopped processing (GPU timeout)",
        (Major, Medium),
        (
            FindingCode::XidDriver,
            "reset the GPU; the driver first, hardware if it recurs across drivers",
        ),
        (R::ResetGpu, NV),
    ),
    row(
        48,
        "double-bit ECC error",
        (Critical, High),
        (FindingCode::XidMemoryHardware, MEMORY_RMA),
        (R::MemoryWorkflow, REF),
    ),
    row(
        54,
        "auxiliary power not connected",
        (Critical, High),
        (
            FindingCode::AuxPowerMissing,
            "connect the card's power cables",
        ),
        (R::CheckMechanicals, REF),
    ),
    row(
        57,
        "error programming the video memory interface",
        (Major, Medium),
        (
            FindingCode::XidMemoryHardware,
            "reset the GPU and retest; RMA if it recurs",
        ),
        (R::ContactSupport, NV_OLD),
    ),
    row(
        58,
        "unstable video memory interface",
        (Major, Medium),
        (
            FindingCode::XidMemoryHardware,
            "reset the GPU and retest; RMA if it recurs",
        ),
        (R::ContactSupport, NV_OLD),
    ),
    row(
        60,
        "video processor (SEC2) exception",
        (Minor, Medium),
        (FindingCode::XidDriver, "the driver: update it if it recurs"),
        (R::RestartApp, NV),
    ),
    row(
        61,
        "internal micro-controller warning",
        (Minor, Medium),
        (FindingCode::XidFirmware, FIRMWARE),
        (R::ContactSupport, REF),
    ),
    row(
        62,
        "internal micro-controller halt",
        (Major, Medium),
        (
            FindingCode::XidFirmware,
            "reset the GPU and update the driver; RMA if it recurs",
        ),
        (R::ResetGpu, REF),
    ),
    row(
        63,
        "row remap or page retirement recorded",
        (Major, High),
        (
            FindingCode::XidRowRemap,
            "handled degradation: reset the GPU to apply the remap, then retest; RMA only if remaps fail (Xid 64) or keep growing",
        ),
        (R::Ignore, REF),
    ),
    row(
        64,
        "row remap or page retirement failed",
        (Critical, High),
        (
            FindingCode::XidMemoryHardware,
            "RMA the card: its memory can no longer heal itself",
        ),
        (R::ResetGpu, REF),
    ),
    row(
        66,
        "illegal register access by the driver",
        (Minor, Medium),
        (FindingCode::XidDriver, "the driver: update it if it recurs"),
        (R::Ignore, NV),
    ),
    row(
        67,
        "illegal access by the driver (verification)",
        (Minor, Medium),
        (FindingCode::XidDriver, "the driver: update it if it recurs"),
        (R::Ignore, NV),
    ),
    row(
        68,
        "video decoder (NVDEC) exception",
        (Minor, Medium),
        (FindingCode::XidApplication, APP),
        (R::RestartApp, NV),
    ),
    row(
        69,
        "graphics engine class error",
        (Major, Medium),
        (FindingCode::XidApplication, APP),
        (R::RestartApp, REF),
    ),
    row(
        70,
        "copy engine 3 error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        71,
        "copy engine 4 error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        72,
        "copy engine 5 error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        74,
        "NVLink error",
        (Major, Medium),
        (FindingCode::XidNvlink, NVLINK),
        (R::NvlinkWorkflow, REF),
    ),
    row(
        75,
        "copy engine 6 error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        76,
        "copy engine 7 error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        77,
        "copy engine 8 error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        78,
        "vGPU start error",
        (Major, Medium),
        (
            FindingCode::XidDriver,
            "the vGPU software: update the host driver and the guest's to matching versions",
        ),
        (R::UpdateSoftware, NV),
    ),
    row(
        79,
        "fallen off the bus",
        (Critical, Medium),
        (
            FindingCode::XidFallenOffBus,
            "check slot, riser, PSU and temperature; RMA if it follows the card",
        ),
        (R::RebootNode, REF),
    ),
    row(
        80,
        "corrupted data sent to the GPU",
        (Major, Medium),
        (
            FindingCode::XidDriver,
            "corruption on the way to the GPU: check PCIe replays and AER, system memory, then the driver",
        ),
        (R::RestartApp, NV),
    ),
    row(
        82,
        "JPEG engine (NVJPG0) error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        83,
        "video decoder (NVDEC1) error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        84,
        "video decoder (NVDEC2) error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        85,
        "copy engine 9 error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        86,
        "optical flow engine (OFA) exception",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        88,
        "video decoder (NVDEC3) error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        89,
        "video decoder (NVDEC4) error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        92,
        "high single-bit ECC error rate",
        (Minor, Medium),
        (
            FindingCode::XidEccRate,
            "an early warning: watch the corrected ECC count, rerun with the rma profile",
        ),
        (R::Ignore, REF),
    ),
    row(
        93,
        "InfoROM wear limit exceeded",
        (Minor, Medium),
        (
            FindingCode::XidFirmware,
            "the InfoROM has been written more than provisioned: tell the vendor's support if it recurs",
        ),
        (R::Ignore, NV),
    ),
    row(
        94,
        "contained ECC error",
        (Major, High),
        (
            FindingCode::XidMemoryHardware,
            "the GPU contained an uncorrectable error: reset, retest, and RMA if they recur",
        ),
        (R::RestartApp, REF),
    ),
    row(
        95,
        "uncontained ECC error",
        (Critical, High),
        (FindingCode::XidMemoryHardware, MEMORY_RMA),
        (R::ResetGpu, REF),
    ),
    row(
        96,
        "video decoder (NVDEC5) error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        97,
        "video decoder (NVDEC6) error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        98,
        "video decoder (NVDEC7) error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        99,
        "JPEG engine (NVJPG1) error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        100,
        "JPEG engine (NVJPG2) error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        101,
        "JPEG engine (NVJPG3) error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        102,
        "JPEG engine (NVJPG4) error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        103,
        "JPEG engine (NVJPG5) error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        104,
        "JPEG engine (NVJPG6) error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        105,
        "JPEG engine (NVJPG7) error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        106,
        "SMBPBI test message",
        (Note, High),
        (FindingCode::XidInformational, INFORMS),
        (R::Ignore, NV),
    ),
    row(
        107,
        "SMBPBI test message (silent)",
        (Note, High),
        (FindingCode::XidInformational, INFORMS),
        (R::Ignore, NV),
    ),
    row(
        109,
        "context-switch timeout",
        (Major, Medium),
        (
            FindingCode::XidTimeout,
            "a long non-preemptible dispatch (the Linux face of a Vulkan device-lost hang): the driver or the workload, not the card",
        ),
        (R::ResetGpu, REF),
    ),
    row(
        110,
        "security fault",
        (Major, Medium),
        (FindingCode::XidGpuHardware, GPU_FAULT),
        (R::ResetGpu, NV),
    ),
    row(
        119,
        "GSP RPC timeout",
        (Major, Medium),
        (FindingCode::XidFirmware, FIRMWARE),
        (R::ResetGpu, REF),
    ),
    row(
        120,
        "GSP error",
        (Major, Medium),
        (FindingCode::XidFirmware, FIRMWARE),
        (R::ResetGpu, REF),
    ),
    row(
        121,
        "C2C (chip-to-chip) link error",
        (Major, Medium),
        (
            FindingCode::XidNvlink,
            "the link between the GPU and its CPU: tell the vendor's support if it recurs",
        ),
        (R::Ignore, NV),
    ),
    row(
        126,
        "copy engine 10 error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        127,
        "copy engine 11 error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        128,
        "copy engine 12 error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        129,
        "copy engine 13 error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        130,
        "copy engine 14 error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        131,
        "copy engine 15 error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        132,
        "copy engine 16 error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        133,
        "copy engine 17 error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        134,
        "copy engine 18 error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        135,
        "copy engine 19 error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        136,
        "link training failed",
        (Major, Medium),
        (FindingCode::XidNvlink, NVLINK),
        (R::ResetGpu, NV),
    ),
    row(
        137,
        "NVLink privilege error",
        (Minor, Medium),
        (FindingCode::XidApplication, APP),
        (R::Ignore, NV),
    ),
    row(
        139,
        "optical flow engine (OFA1) error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::RestartApp, NV),
    ),
    row(
        140,
        "unrecovered ECC error",
        (Critical, High),
        (FindingCode::XidMemoryHardware, MEMORY_RMA),
        (R::ResetGpu, REF),
    ),
    row(
        141,
        "CUDA fast path error",
        (Minor, Medium),
        (FindingCode::XidDriver, "the driver: update it if it recurs"),
        (R::Ignore, NV),
    ),
    row(
        142,
        "video encoder (NVENC3) error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::ContactSupport, NV),
    ),
    row(
        143,
        "GPU initialization failure",
        (Major, Medium),
        (FindingCode::XidGpuHardware, GPU_FAULT),
        (R::ResetGpu, NV),
    ),
    row(
        144,
        "NVLink error (SAW)",
        (Major, Medium),
        (FindingCode::XidNvlink, NVLINK),
        (R::NvlinkWorkflow, NV),
    ),
    row(
        145,
        "NVLink error (RLW)",
        (Major, Medium),
        (FindingCode::XidNvlink, NVLINK),
        (R::NvlinkWorkflow, NV),
    ),
    row(
        146,
        "NVLink error (TLW)",
        (Major, Medium),
        (FindingCode::XidNvlink, NVLINK),
        (R::NvlinkWorkflow, NV),
    ),
    row(
        147,
        "NVLink error (TREX)",
        (Major, Medium),
        (FindingCode::XidNvlink, NVLINK),
        (R::NvlinkWorkflow, NV),
    ),
    row(
        148,
        "NVLink error (NVLPW control)",
        (Major, Medium),
        (FindingCode::XidNvlink, NVLINK),
        (R::NvlinkWorkflow, NV),
    ),
    row(
        149,
        "NVLink error (NETIR)",
        (Major, Medium),
        (FindingCode::XidNvlink, NVLINK),
        (R::NvlinkWorkflow, NV),
    ),
    row(
        150,
        "NVLink error (MSE watchdog)",
        (Major, Medium),
        (FindingCode::XidNvlink, NVLINK),
        (R::NvlinkWorkflow, NV),
    ),
    row(
        151,
        "confidential computing key rotation error",
        (Major, Medium),
        (
            FindingCode::XidDriver,
            "restart the virtual machine; the driver's confidential-computing setup if it recurs",
        ),
        (R::RestartVm, NV),
    ),
    row(
        152,
        "deep learning accelerator (DLA) SMMU error",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::Ignore, NV),
    ),
    row(
        153,
        "deep learning accelerator (DLA) timeout",
        (Minor, Medium),
        (FindingCode::XidApplication, ENGINE),
        (R::Ignore, NV),
    ),
    row(
        154,
        "GPU recovery action changed",
        (Critical, High),
        (
            FindingCode::XidRecoveryAction,
            "do what the driver asks, then retest; the Xid before it says why",
        ),
        (R::RecoveryAction, REF),
    ),
    row(
        155,
        "NVLink software-defined error",
        (Major, Medium),
        (
            FindingCode::XidDriver,
            "the driver or the software using the link: reset the GPU, then look at them",
        ),
        (R::ResetGpu, NV),
    ),
    row(
        156,
        "resource retirement recorded",
        (Major, High),
        (
            FindingCode::XidRowRemap,
            "handled degradation: reset the GPU to apply it, then retest",
        ),
        (R::ResetGpu, NV),
    ),
    row(
        157,
        "resource retirement failed",
        (Critical, High),
        (
            FindingCode::XidGpuHardware,
            "RMA candidate: the GPU can no longer retire a failing resource",
        ),
        (R::ContactSupport, NV),
    ),
    row(
        158,
        "GPU fatal timeout",
        (Major, Medium),
        (FindingCode::XidGpuHardware, GPU_FAULT),
        (R::ResetGpu, NV),
    ),
    row(
        159,
        "CHI non-data error (CPU-GPU coherency)",
        (Major, Medium),
        (
            FindingCode::XidDriver,
            "the unified-memory driver (nvidia-uvm) and the application's use of it; the GPU-CPU link if it recurs",
        ),
        (R::CheckUvm, NV),
    ),
    row(
        160,
        "channel retirement recorded",
        (Note, High),
        (FindingCode::XidInformational, INFORMS),
        (R::Ignore, NV),
    ),
    row(
        161,
        "channel retirement failed",
        (Minor, Medium),
        (FindingCode::XidDriver, "the driver: update it if it recurs"),
        (R::Ignore, NV),
    ),
    row(
        162,
        "power smoothing circuitry re-engaged",
        (Note, High),
        (FindingCode::XidInformational, INFORMS),
        (R::Ignore, NV),
    ),
    row(
        163,
        "power smoothing circuitry disengaged",
        (Minor, Medium),
        (
            FindingCode::XidGpuHardware,
            "the board's power smoothing circuitry stopped: tell the vendor's support if it stays off",
        ),
        (R::ContactSupport, NV),
    ),
    row(
        164,
        "power smoothing circuitry near the end of its life",
        (Minor, Medium),
        (
            FindingCode::XidGpuHardware,
            "the board's power smoothing circuitry is wearing out: plan its service with the vendor",
        ),
        (R::ContactSupport, NV),
    ),
    row(
        165,
        "power smoothing circuitry at the end of its life",
        (Major, High),
        (
            FindingCode::XidGpuHardware,
            "the board's power smoothing circuitry is exhausted: contact the vendor's support",
        ),
        (R::ContactSupport, NV),
    ),
    row(
        166,
        "NVLink traffic before its encryption was set up",
        (Major, Medium),
        (
            FindingCode::XidDriver,
            "the confidential-computing setup of the NVLink fabric: reset the GPU, then check the fabric manager's configuration",
        ),
        (R::ResetGpu, NV),
    ),
    row(
        167,
        "PCIe fatal timeout",
        (Critical, Medium),
        (
            FindingCode::XidFallenOffBus,
            "check slot, riser, PSU and temperature; RMA if it follows the card",
        ),
        (R::ResetGpu, NV),
    ),
    row(
        168,
        "errors in write-protected memory: reduced memory capacity",
        (Major, High),
        (FindingCode::XidMemoryHardware, MEMORY_RMA),
        (R::ResetGpu, NV),
    ),
    row(
        169,
        "internal micro-controller (SEC2) halt",
        (Major, Medium),
        (
            FindingCode::XidFirmware,
            "reset the GPU and update the driver; RMA if it recurs",
        ),
        (R::ResetGpu, NV),
    ),
    row(
        170,
        "NVLink interrupt in confidential-computing mode",
        (Minor, Medium),
        (FindingCode::XidDriver, "the driver: update it if it recurs"),
        (R::Ignore, NV),
    ),
    row(
        171,
        "uncorrectable DRAM error (beside Xid 48)",
        (Critical, High),
        (FindingCode::XidMemoryHardware, MEMORY_RMA),
        (R::MemoryWorkflow, NV),
    ),
    row(
        172,
        "uncorrectable on-chip SRAM error (beside Xid 48)",
        (Critical, High),
        (
            FindingCode::XidMemoryHardware,
            "RMA candidate: an uncorrectable error in the GPU's own SRAM (an RMA criterion past its threshold); reset, retest, and send this report",
        ),
        (R::MemoryWorkflow, NV),
    ),
];

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
    use crate::finding::HealthFault;

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
