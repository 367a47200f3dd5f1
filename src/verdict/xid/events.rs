//! The other drivers' Xids: the kernel-log events of amdgpu, i915 and xe (and DRM's own
//! "device wedged"), what each means, whose problem it usually is and what to do. NVIDIA
//! numbers its events; these drivers print sentences, so each row is the sentence's
//! pattern, taken from the driver's own messages and the kernel's documentation of them.
//!
//! It is one table, as the Xid catalogue is, so every reader of the kernel log (`kiln
//! health`, a run's kernel-log source, `kiln explain`) says the same of the same line.

use std::sync::OnceLock;

use regex::Regex;

use crate::finding::{Class, Severity};

/// The kernel driver that printed the line: the one enum of the vendor drivers kiln reads.
pub use crate::telemetry::sysfs::Driver;

/// What happened, whichever driver printed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A job did not finish within the scheduler's timeout: the GPU hung on it (amdgpu's
    /// ring timeout, i915's GPU HANG, xe's timed-out job).
    Hang,
    /// A hung job the driver cleared without a reset (amdgpu's soft recovery).
    HangSoftRecovered,
    /// The driver reset one engine to clear a hang.
    EngineReset,
    /// The driver began resetting the whole GPU.
    GpuResetBegin,
    /// The GPU came back from a reset.
    GpuResetSucceeded,
    /// The driver could not reset the GPU.
    GpuResetFailed,
    /// The GPU touched an address not mapped for the job (a GPU page fault, an engine's
    /// memory CAT error).
    PageFault,
    /// Errors the hardware corrected (RAS).
    RasCorrectable,
    /// Errors the hardware could not correct, or deferred (RAS).
    RasUncorrectable,
    /// A job read data the GPU had marked corrupt (RAS poison).
    RasPoison,
    /// More VRAM pages retired than the driver's threshold allows.
    RasBadPageThreshold,
    /// The driver declared the device dead until recovered from outside (DRM's wedged
    /// event).
    Wedged,
    /// The driver reset the GPU and recovered it, but says so as a wedge event.
    WedgedRecovered,
    /// The GPU's own firmware (GuC, HuC) failed to load or start.
    FirmwareFailed,
    /// A GPU reset lost the contents of VRAM: every application's GPU memory is gone.
    VramLost,
    /// The driver could not reset one engine (ring); it goes on to reset the whole GPU.
    EngineResetFailed,
    /// The driver could not bring the GPU up at load (an IP block's init, a ring test).
    InitFailed,
    /// The display engine reported an error (a page flip that never completed, a pipe's
    /// fault).
    DisplayError,
    /// The GPU ran hotter than its range; the driver may shut the system down to save it.
    Thermal,
    /// Another error of the driver's, of no kind above.
    DriverError,
}

/// One kind of kernel-log event of one driver (or of any, where `driver` is None).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EventRow {
    /// The driver whose line it is; None for DRM's own events, printed under any.
    pub driver: Option<Driver>,
    /// What happened.
    pub kind: EventKind,
    /// The line's pattern (a regular expression, matched anywhere in the line).
    pattern: &'static str,
    /// What it means, in a few words.
    pub meaning: &'static str,
    /// Whose problem it usually is.
    pub class: Class,
    /// Where the line alone cannot say whose it is: what would decide it. None where it
    /// can.
    pub decided_by: Option<&'static str>,
    /// How much it matters.
    pub severity: Severity,
    /// What to do.
    pub action: &'static str,
    /// Where the row comes from.
    pub source: &'static str,
    /// Whether the words are this row's driver's alone, so a line of them is its event
    /// even where the line does not name the driver (FreeBSD's `drmn0:`, amdkfd's queue
    /// manager, i915's error capture without its device prefix).
    pub alone: bool,
}

/// What to do about an amdgpu reset in any of its forms.
const AMD_RESET_ACTION: &str = "the event before it (a ring timeout or a RAS error) says why; applications on the GPU lose their work";

const AMD_DEBUG: &str = "Linux kernel, amdgpu GPU Debugging, Decoding a GPUVM Page Fault (docs.kernel.org/gpu/amdgpu/debugging.html); messages of drivers/gpu/drm/amd/amdgpu/gmc_v9_0.c";
const AMD_RAS: &str = "Linux kernel, AMDGPU RAS Support (docs.kernel.org/gpu/amdgpu/ras.html); messages of drivers/gpu/drm/amd/amdgpu/amdgpu_ras.c and amdgpu_ras_eeprom.c";
const AMD_RESET: &str = "Linux kernel, amdgpu module parameters lockup_timeout and gpu_recovery (docs.kernel.org/gpu/amdgpu/module-parameters.html); messages of drivers/gpu/drm/amd/amdgpu/amdgpu_job.c and amdgpu_device.c";
const DRM_RESET: &str = "Linux kernel, DRM userland interfaces, Device reset and Device wedging (docs.kernel.org/gpu/drm-uapi.html); drm_dev_wedged_event in drivers/gpu/drm/drm_drv.c";
const I915: &str = "Linux kernel, drm/i915 Intel GFX Driver, GPU hangs and resets (docs.kernel.org/gpu/i915.html); messages of drivers/gpu/drm/i915/gt/intel_reset.c and i915_gpu_error.c";
const AMD_MES: &str = "Linux kernel, amdgpu driver core, the Micro Engine Scheduler (MES) that maps the GPU's queues (docs.kernel.org/gpu/amdgpu/driver-core.html); messages of drivers/gpu/drm/amd/amdgpu/mes_v11_0.c and amdgpu_mes.c, and of the queue manager drivers/gpu/drm/amd/amdkfd/kfd_device_queue_manager.c";
const AMD_INIT: &str = "Linux kernel, amdgpu driver core, IP blocks and their init (docs.kernel.org/gpu/amdgpu/driver-core.html); messages of drivers/gpu/drm/amd/amdgpu/amdgpu_device.c, amdgpu_ring.c and amdgpu_gfx.c";
const DISPLAY: &str = "Linux kernel, DRM KMS atomic commits and their flip_done completion (docs.kernel.org/gpu/drm-kms.html); amdgpu's Display Core (docs.kernel.org/gpu/amdgpu/display/); messages of drivers/gpu/drm/drm_atomic_helper.c and drivers/gpu/drm/i915/display/intel_display_irq.c";
const AMD_THERMAL: &str = "Linux kernel, amdgpu GPU Power/Thermal Controls and Monitoring, the temperature limits temp*_crit and temp*_emergency (docs.kernel.org/gpu/amdgpu/thermal.html); messages of drivers/gpu/drm/amd/pm/swsmu/smu_cmn.c and smu11/smu_v11_0.c (CTF: critical thermal fault) and pm/powerplay/hwmgr/smu_helper.c";
const DRM_ERRORS: &str = "Linux kernel, DRM Internals, printing and logging: drm_err() prints `*ERROR*` (docs.kernel.org/gpu/drm-internals.html)";
const XE: &str = "Linux kernel, drm/xe Intel GFX Driver, Xe Device Wedging (docs.kernel.org/gpu/xe/xe_device.html); messages of drivers/gpu/drm/xe/xe_guc_submit.c and xe_gt.c";

const HANG_DECIDED_BY: &str = "whether it recurs on other, known-good work (then the card or its power) or only on this application (its shaders, its runtime or the driver)";
const HANG_ACTION: &str = "look at the process it names and update the driver (kernel and Mesa or ROCm); test the card (`kiln run`) if it recurs on unrelated work";
const RESET_FAILED_ACTION: &str = "reboot the node, then test the card (`kiln run --profile rma`); RMA if it fails again after a cold boot";

/// A row, in the table's order of arguments.
#[allow(clippy::too_many_arguments)]
const fn row(
    driver: Option<Driver>,
    kind: EventKind,
    pattern: &'static str,
    meaning: &'static str,
    (class, decided_by): (Class, Option<&'static str>),
    severity: Severity,
    action: &'static str,
    source: &'static str,
) -> EventRow {
    EventRow {
        driver,
        kind,
        pattern,
        meaning,
        class,
        decided_by,
        severity,
        action,
        source,
        alone: false,
    }
}

/// A row whose words are its driver's alone (see [`EventRow::alone`]).
/// amdgpu's GPU page fault in one of its forms (`pattern`): one meaning, one owner and one
/// action whichever form the driver printed.
const fn amd_page_fault(pattern: &'static str) -> EventRow {
    row(
        Some(Driver::Amdgpu),
        EventKind::PageFault,
        pattern,
        "the GPU accessed an address not mapped for the job (GPU page fault)",
        (
            Class::Software,
            Some(
                "the line's vmid: not 0, the application or its runtime; 0, the kernel driver or firmware",
            ),
        ),
        Severity::Major,
        "a bug in the process the line names (run it under its API's validation); with vmid 0, update the driver and firmware",
        AMD_DEBUG,
    )
}

const fn alone(row: EventRow) -> EventRow {
    EventRow { alone: true, ..row }
}

use Class::{Environment, Hardware, Info, Software};
use Driver::{Amdgpu, I915 as I915_, Xe};
use EventKind::*;
use Severity::{Critical, Major, Minor, Note};

/// Every event kiln knows, most particular first: the first row whose driver and pattern
/// match a line is its event.
pub const EVENTS: &[EventRow] = &[
    row(
        Some(Amdgpu),
        HangSoftRecovered,
        r"\bring \S+ timeout, but soft recovered",
        "a GPU job hung and the driver cleared it without a reset (soft recovery)",
        (Software, None),
        Minor,
        "the application's job hung and was cleared: look at the process named after it; nothing for the card unless it recurs on other work",
        AMD_RESET,
    ),
    row(
        Some(Amdgpu),
        Hang,
        r"\bring \S+ timeout\b",
        "a GPU job did not finish within the scheduler's timeout (ring timeout): the GPU hung on it",
        (Software, Some(HANG_DECIDED_BY)),
        Major,
        HANG_ACTION,
        AMD_RESET,
    ),
    row(
        Some(Amdgpu),
        Hang,
        r"Waiting for fences timed out",
        "the display waited for a GPU job that never finished: the GPU hung under it",
        (Software, Some(HANG_DECIDED_BY)),
        Major,
        HANG_ACTION,
        AMD_RESET,
    ),
    row(
        Some(Amdgpu),
        Hang,
        r"MES failed to respon|failed to (?:remove|add) hardware queue (?:from|to) MES|MES might be in unrecoverable state|failed to reset legacy queue",
        "the GPU's queue scheduler firmware (MES) stopped answering: the GPU hung under it",
        (
            Software,
            Some(
                "whether it recurs with current linux-firmware and kernel (then the card) or goes away (MES firmware bugs are common)",
            ),
        ),
        Major,
        "update linux-firmware and the kernel, then rerun; test the card (`kiln run`) if it recurs on unrelated work",
        AMD_MES,
    ),
    alone(row(
        Some(Amdgpu),
        Hang,
        r"qcm fence wait loop timeout expired",
        "the compute queues did not stop when asked (preemption timed out): the GPU's command processor hung",
        (Software, Some(HANG_DECIDED_BY)),
        Major,
        HANG_ACTION,
        AMD_MES,
    )),
    row(
        Some(Amdgpu),
        GpuResetBegin,
        r"GPU reset begin",
        "the driver began resetting the GPU, after a hang or an uncorrectable error",
        (Info, None),
        Minor,
        AMD_RESET_ACTION,
        AMD_RESET,
    ),
    row(
        Some(Amdgpu),
        GpuResetSucceeded,
        r"GPU reset(?:\(\d+\))? succeeded",
        "the GPU came back from a reset",
        (Info, None),
        Note,
        "nothing for the card: applications on it lost their contexts and must restart",
        AMD_RESET,
    ),
    row(
        Some(Amdgpu),
        GpuResetFailed,
        r"GPU reset\(\d+\) failed|GPU reset end with ret = -|(?i)mode ?[12] reset failed",
        "the driver could not reset the GPU: it is unusable until the node reboots",
        (
            Hardware,
            Some("whether it comes back after a cold boot and passes a test: if not, the card"),
        ),
        Critical,
        RESET_FAILED_ACTION,
        AMD_RESET,
    ),
    row(
        Some(Amdgpu),
        EngineResetFailed,
        r"\bRing \S+ reset failed",
        "the driver could not reset the hung ring alone, and resets the whole GPU next",
        (Info, None),
        Major,
        "the ring timeout before it says why; applications on the GPU lose their work",
        AMD_RESET,
    ),
    row(
        Some(Amdgpu),
        EngineReset,
        r"Starting \S+ ring reset|\bRing \S+ reset succeeded",
        "the driver reset one ring (engine queue) to clear a hang",
        (Info, None),
        Minor,
        "the ring timeout before it says why",
        AMD_RESET,
    ),
    row(
        Some(Amdgpu),
        VramLost,
        r"VRAM is lost",
        "the GPU's reset lost the contents of its memory: every application on it lost its work",
        (Info, None),
        Major,
        "restart the applications that used the GPU; the hang or error before the reset says why",
        AMD_RESET,
    ),
    alone(amd_page_fault(
        r"page fault \(src_id:|\b(?:GC|MM)?VM_L2_PROTECTION_FAULT_STATUS:",
    )),
    amd_page_fault(r"GPU fault detected:"),
    row(
        Some(Amdgpu),
        RasBadPageThreshold,
        r"RAS records:\s*\d+ exceeds? 90% of threshold",
        "the card's retired VRAM pages are near the driver's threshold for replacing it",
        (Hardware, None),
        Major,
        "plan the card's replacement; test its memory (`kiln run --profile rma`)",
        AMD_RAS,
    ),
    row(
        Some(Amdgpu),
        RasBadPageThreshold,
        r"RAS records:\s*\d+ exceeds? threshold",
        "the card has retired more VRAM pages than the driver's threshold allows: AMD's criterion to replace it",
        (Hardware, None),
        Critical,
        "RMA the card: its memory can no longer heal itself",
        AMD_RAS,
    ),
    row(
        Some(Amdgpu),
        RasPoison,
        r"(?i)poison consumption",
        "a job read data the GPU had marked corrupt after an uncorrectable error (RAS poison)",
        (Hardware, None),
        Major,
        "the uncorrectable error before it is the cause: let the driver reset the GPU, then test its memory (`kiln run --profile rma`)",
        AMD_RAS,
    ),
    row(
        Some(Amdgpu),
        RasUncorrectable,
        r"\b[1-9]\d* (?:new )?(?:uncorrectable|deferred) hardware errors? detected in",
        "errors the GPU could not correct (RAS), in the block the line names (umc: its VRAM)",
        (Hardware, None),
        Critical,
        "drain the GPU and reset it, then test its memory (`kiln run --profile rma`); RMA if they recur or the retired pages pass the driver's threshold",
        AMD_RAS,
    ),
    row(
        Some(Amdgpu),
        RasUncorrectable,
        r"uncorrectable hardware error\(\w+\) detected",
        "the GPU raised a fatal hardware error interrupt (RAS), in the block the line names",
        (Hardware, None),
        Critical,
        "let the driver reset the GPU, then test it (`kiln run --profile rma`); RMA if it recurs",
        AMD_RAS,
    ),
    row(
        Some(Amdgpu),
        RasCorrectable,
        r"\b[1-9]\d* (?:new )?correctable hardware errors? detected in",
        "errors the GPU corrected (RAS), in the block the line names",
        (Hardware, None),
        Minor,
        "nothing was lost: watch the count, and test the memory if it grows fast",
        AMD_RAS,
    ),
    row(
        Some(Amdgpu),
        GpuResetBegin,
        r"(?i:\b(?:MODE ?[12]|BACO) reset\b)|\bGPU reset\b",
        "the driver reset the GPU (a mode-1, mode-2 or BACO reset), after a hang or an uncorrectable error",
        (Info, None),
        Minor,
        AMD_RESET_ACTION,
        AMD_RESET,
    ),
    row(
        Some(Amdgpu),
        Thermal,
        r"shutdown due to GPU (?:SW|HW) CTF",
        "the GPU passed its critical temperature (a critical thermal fault) and the driver shut the system down to save it",
        (
            Environment,
            Some(
                "whether its fans spin and its heatsink is clean and seated: a card that overheats with working cooling is the card's",
            ),
        ),
        Critical,
        "check the card's fans, airflow and dust, and the room's temperature; re-paste or RMA a card that overheats with working cooling, then test it (`kiln run`)",
        AMD_THERMAL,
    ),
    row(
        Some(Amdgpu),
        Thermal,
        r"GPU over temperature range",
        "the GPU ran hotter than its operating range (a thermal interrupt), where it slows down or, past its critical limit, shuts down",
        (
            Environment,
            Some(
                "whether its fans spin up and its heatsink is clean and seated: a card that overheats with working cooling is the card's",
            ),
        ),
        Major,
        "check the card's fans (a fan curve that stays low under compute), airflow and dust; test the card under load (`kiln run`) once it is cool",
        AMD_THERMAL,
    ),
    row(
        Some(Amdgpu),
        InitFailed,
        r"\bring \S+ test failed|KCQ enable failed|hw_init of IP block <\w+> failed|amdgpu_device_ip_init failed|Fatal error during GPU init",
        "the driver could not bring the GPU up at load (a ring test or an IP block's init failed)",
        (
            Hardware,
            Some(
                "whether a current kernel and linux-firmware bring it up: if they do, the software; if not, the card",
            ),
        ),
        Major,
        "update the kernel and linux-firmware and reboot; if it still fails, test the card in another machine",
        AMD_INIT,
    ),
    row(
        None,
        DisplayError,
        r"flip_done timed out|Fault errors on pipe",
        "the display engine missed a page flip or reported a pipe fault",
        (
            Software,
            Some(
                "whether a GPU hang (a ring timeout, a GPU HANG) comes with it: alone, the display driver's or the monitor link's",
            ),
        ),
        Minor,
        "update the kernel; if the screen froze, read the lines around it for a hang",
        DISPLAY,
    ),
    row(
        None,
        WedgedRecovered,
        r"device wedged, but recovered",
        "the driver reset the GPU and recovered it",
        (Info, None),
        Minor,
        "nothing for the card: applications on it lost their work; the event before it says why",
        DRM_RESET,
    ),
    row(
        None,
        Wedged,
        r"device wedged|has declared device \S+ as wedged",
        "the driver declared the GPU dead (wedged) after failing to recover it",
        (
            Hardware,
            Some(
                "whether a driver rebind, a bus reset or a reboot brings it back and it passes a test",
            ),
        ),
        Critical,
        "rebind the driver or reboot the node, then test the card (`kiln run --profile rma`)",
        DRM_RESET,
    ),
    alone(row(
        Some(I915_),
        Hang,
        r"GPU HANG: ecode|context reset due to GPU hang",
        "a GPU job hung; the driver captured an error state and reset the context",
        (Software, Some(HANG_DECIDED_BY)),
        Major,
        HANG_ACTION,
        I915,
    )),
    row(
        Some(I915_),
        Hang,
        r"(?i)hangcheck timer elapsed",
        "the driver's hangcheck found a ring that made no progress: the GPU hung",
        (Software, Some(HANG_DECIDED_BY)),
        Major,
        HANG_ACTION,
        I915,
    ),
    row(
        Some(I915_),
        EngineResetFailed,
        r"reset request timed out",
        "an engine did not get ready for its reset in time; the driver resets the whole GPU next",
        (Info, None),
        Major,
        "the hang before it says why; applications on the GPU lose their work",
        I915,
    ),
    row(
        None,
        Hang,
        r"TLB invalidation (?:response timed out|fence timeout)",
        "the GPU's GuC firmware did not answer a TLB invalidation in time: the GPU or its firmware hung",
        (
            Software,
            Some(
                "whether it recurs with current linux-firmware and kernel (then the card) or goes away",
            ),
        ),
        Major,
        "update linux-firmware and the kernel; test the card (`kiln run`) if it recurs",
        I915,
    ),
    row(
        Some(I915_),
        GpuResetFailed,
        r"Failed to reset chip|GPU recovery failed",
        "the driver could not reset the GPU: it is wedged until the node reboots",
        (
            Hardware,
            Some("whether it comes back after a cold boot and passes a test: if not, the card"),
        ),
        Critical,
        RESET_FAILED_ACTION,
        I915,
    ),
    row(
        Some(I915_),
        GpuResetBegin,
        r"Resetting chip for",
        "the driver reset the whole GPU to clear a hang",
        (Info, None),
        Minor,
        "the hang before it says why; applications on the GPU lose their work",
        I915,
    ),
    row(
        Some(I915_),
        EngineReset,
        r"Resetting (?:rcs|bcs|vcs|vecs|ccs)\d+ for",
        "the driver reset one engine to clear a hang",
        (Info, None),
        Minor,
        "the hang before it says why",
        I915,
    ),
    row(
        Some(Xe),
        Hang,
        r"Timedout job:",
        "a GPU job did not finish in time (the process after `in`)",
        (Software, Some(HANG_DECIDED_BY)),
        Major,
        HANG_ACTION,
        XE,
    ),
    row(
        Some(Xe),
        PageFault,
        r"(?i)engine memory cat error|Fault response: Unsuccessful",
        "an engine touched an address not bound for the job (a memory CAT error, an unresolved page fault)",
        (Software, None),
        Major,
        "a bug in the process of the timed-out job beside it (an unset or freed pointer): run it under its API's validation",
        XE,
    ),
    row(
        Some(Xe),
        EngineReset,
        r"Engine reset: engine_class=",
        "the driver reset one engine to clear a hang or a fault",
        (Info, None),
        Minor,
        "the fault or hang before it says why",
        XE,
    ),
    row(
        Some(Xe),
        GpuResetFailed,
        r"GT\d+: reset failed",
        "the driver could not reset the GPU's GT",
        (
            Hardware,
            Some("whether it comes back after a cold boot and passes a test: if not, the card"),
        ),
        Critical,
        RESET_FAILED_ACTION,
        XE,
    ),
    row(
        Some(Xe),
        GpuResetBegin,
        r"GT\d+: reset started",
        "the driver began resetting the GPU's GT",
        (Info, None),
        Minor,
        "the event before it says why; applications on the GPU lose their work",
        XE,
    ),
    row(
        None,
        PageFault,
        r"(?i)\bpage ?fault\b|\bCAT error\b",
        "the GPU accessed an address not mapped for the job (GPU page fault)",
        (
            Software,
            Some(
                "whether it recurs across unrelated applications (then the card) or only with one (its bug, its runtime's or the driver's)",
            ),
        ),
        Major,
        "update the driver and the runtime (Mesa, ROCm, the compute runtime) and report it to the application",
        AMD_DEBUG,
    ),
    row(
        None,
        FirmwareFailed,
        r"\b(?:GuC|HuC)\b.*\b(?:failed|[Ee]rror)\b",
        "the GPU's GuC or HuC firmware failed to load or start",
        (
            Software,
            Some(
                "whether the firmware file the line names is installed for this kernel (linux-firmware)",
            ),
        ),
        Major,
        "install or update linux-firmware for the running kernel, rebuild the initramfs and reboot",
        I915,
    ),
    row(
        None,
        DriverError,
        r"\*ERROR\*|\bfailed\b|Fatal error",
        "a GPU driver error of no kind this table knows",
        (
            Info,
            Some("the lines around it (a timeout, a reset, a fault)"),
        ),
        Minor,
        "read the kernel log around it and update the driver and firmware",
        DRM_ERRORS,
    ),
];

/// The driver a kernel-log line is from, by the name it prints (`amdgpu 0000:03:00.0:`,
/// `[drm:amdgpu_job_timedout [amdgpu]]`, `[drm:i915_hangcheck_elapsed]`, `i915 0000:00:02.0:`,
/// `xe 0000:03:00.0:`).
pub fn driver_of(line: &str) -> Option<Driver> {
    static NAMES: OnceLock<Regex> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        Regex::new(r"(?:^|[\s\[:(])(amdgpu|i915|xe)(?:\s+[0-9a-fA-F]{4}:|[\]:]|\s|_\w*\])")
            .expect("a valid pattern")
    });
    let caps = names.captures(line)?;
    match caps.get(1).map(|m| m.as_str()) {
        Some("amdgpu") => Some(Driver::Amdgpu),
        Some("i915") => Some(Driver::I915),
        Some("xe") => Some(Driver::Xe),
        _ => None,
    }
}

fn patterns() -> &'static [Regex] {
    static PATTERNS: OnceLock<Vec<Regex>> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        EVENTS
            .iter()
            .map(|e| Regex::new(e.pattern).expect("every row's pattern is valid"))
            .collect()
    })
}

/// A line's event: its driver and the first row of that driver (or of any) whose pattern
/// it matches; for a line that names no driver, the first row whose words are its
/// driver's alone ([`EventRow::alone`]). None for a line of another driver, or one that is
/// no event.
pub fn classify(line: &str) -> Option<(Driver, &'static EventRow)> {
    let named = driver_of(line);
    EVENTS.iter().zip(patterns()).find_map(|(row, pattern)| {
        let driver = match (named, row.driver) {
            (Some(d), Some(r)) if d != r => return None,
            (Some(d), _) => d,
            (None, Some(r)) if row.alone => r,
            (None, _) => return None,
        };
        pattern.is_match(line).then_some((driver, row))
    })
}

#[cfg(test)]
#[path = "events_tests.rs"]
mod tests;
