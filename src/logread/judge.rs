//! Whose fault a failure found in a log is, what it means and what to do. An Xid answers
//! from kiln's one Xid catalogue ([`crate::verdict::xid`]); the rest from the small table
//! below, each row citing the public document it follows.

use serde::Serialize;

use super::{Driver, FailureKind, Reading, Source};
use crate::exit_code;
use crate::finding::Class;
use crate::verdict::xid;

/// Whose fault, as kiln's classes say it, or undecided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Whose {
    /// The card itself.
    Hardware,
    /// Its surroundings: the slot, link, power, cooling, the driver's installation.
    Environment,
    /// The application or the driver's software: the card is fine.
    Software,
    /// The line alone cannot say; the judgement's meaning says what would decide.
    Undecided,
}

impl Whose {
    /// The word `--json` gives.
    pub fn name(self) -> &'static str {
        match self {
            Whose::Hardware => "hardware",
            Whose::Environment => "environment",
            Whose::Software => "software",
            Whose::Undecided => "undecided",
        }
    }

    /// kiln's exit code for it (src/exit_code.rs): hardware 1, environment 2, software 3,
    /// undecided 4 (could not judge).
    pub fn exit_code(self) -> i32 {
        match self {
            Whose::Hardware => exit_code::HARDWARE,
            Whose::Environment => exit_code::ENVIRONMENT,
            Whose::Software => exit_code::SOFTWARE,
            Whose::Undecided => exit_code::INCONCLUSIVE,
        }
    }
}

/// The exit code of everything found: the gravest class's (hardware before environment
/// before software before undecided), 0 when nothing was found.
pub fn exit_code_of(classes: impl IntoIterator<Item = Whose>) -> i32 {
    classes
        .into_iter()
        .min()
        .map_or(exit_code::HEALTHY, Whose::exit_code)
}

/// What a failure is and what to do.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    /// Whose fault.
    pub class: Whose,
    /// What it means (and, when undecided, what would decide).
    pub meaning: String,
    /// What to do.
    pub action: String,
}

fn of(class: Whose, meaning: &str, action: &str) -> Judgement {
    Judgement {
        class,
        meaning: meaning.to_owned(),
        action: action.to_owned(),
    }
}

fn whose(class: Class) -> Whose {
    match class {
        Class::Hardware => Whose::Hardware,
        Class::Environment => Whose::Environment,
        Class::Software => Whose::Software,
        Class::CouldNotTest | Class::Info => Whose::Undecided,
    }
}

/// The judgement of an Xid from the catalogue; None for a code kiln does not know.
fn of_xid(code: u32, message: Option<&str>) -> Option<Judgement> {
    let info = xid::lookup(code)?;
    let mut action = info.action.to_owned();
    if code == 154
        && let Some(asked) = message.and_then(xid::recovery_action)
    {
        action = format!("{asked} (the driver's recovery action)");
    }
    let meaning = format!(
        "Xid {code}: {} (NVIDIA's first action: {})",
        info.meaning,
        info.resolution.words()
    );
    Some(Judgement {
        class: whose(info.class()),
        meaning,
        action,
    })
}

const DECIDE_HANG: &str = "a kernel log line (an Xid, a ring timeout) at the same time, or the same failure on unrelated work, would decide: `kiln run` on the card tells";

/// What a failure read from a log is, whose fault and what to do.
pub fn judge(r: &Reading) -> Judgement {
    if let Some(code) = r.xid
        && let Some(j) = of_xid(code, r.message.as_deref())
    {
        return j;
    }
    // amdgpu's and Intel's events, from their one table.
    if let Some(e) = r.event {
        return match e.decided_by {
            Some(decides) => of(
                Whose::Undecided,
                &format!("{} ({}); {decides} would decide", e.meaning, e.source),
                e.action,
            ),
            None => of(
                whose(e.class),
                &format!("{} ({})", e.meaning, e.source),
                e.action,
            ),
        };
    }
    use FailureKind as F;
    let kernel = r.source == Some(Source::Kernel) || r.source.is_none() && r.driver.is_some();
    match (r.driver, r.failure) {
        // NVIDIA's lines without an Xid number.
        (Some(Driver::Nvidia), Some(F::DeviceLost)) if kernel => of_xid(79, None)
            .unwrap_or_else(|| of(Whose::Undecided, "the GPU fell off the bus", DECIDE_HANG)),
        (Some(Driver::Nvidia), Some(F::GpuHang)) => of(
            Whose::Undecided,
            "the GPU or its GSP firmware stopped answering in time, and the driver recovered or reset it (NVIDIA Xid catalog: Xid 119 GSP RPC timeout; Microsoft: Timeout Detection and Recovery); a timeout that repeats after a reset and a driver update is the card's",
            "update the driver; if it repeats, reset the GPU and run `kiln run` on it",
        ),
        (_, Some(F::VersionMismatch)) => of(
            Whose::Environment,
            "the NVIDIA kernel module and the user-space driver (or the CUDA runtime and the driver) are different versions, most often after a driver update without a reboot (NVIDIA driver README, \"API mismatch\"; NVML: NVML_ERROR_LIB_RM_VERSION_MISMATCH; CUDA: cudaErrorInsufficientDriver)",
            "reboot (or reload the nvidia kernel modules) so both sides are the installed version; for the CUDA runtime, install a driver at least as new as the runtime needs",
        ),
        (_, Some(F::DriverMissing)) => of(
            Whose::Environment,
            "no GPU driver answers: the kernel module is not loaded, another driver (nouveau) holds the card, or the container was started without the GPU (NVML: NVML_ERROR_DRIVER_NOT_LOADED; CUDA: cudaErrorNoDevice)",
            "load or reinstall the driver (`lsmod | grep nvidia`, `dmesg | grep NVRM`), blacklist nouveau, and start containers with the GPU (`--gpus all`)",
        ),
        (Some(Driver::Nvidia), Some(F::DeviceLost)) => of(
            Whose::Undecided,
            "the driver reports the GPU lost (NVML: NVML_ERROR_GPU_IS_LOST); the kernel log's Xid 79 or AER errors at the same time would decide",
            "read the kernel log around it (`kiln explain` of `dmesg`), reboot, and run `kiln run` on the card",
        ),
        (Some(Driver::Nvidia), _) => of(
            Whose::Undecided,
            "an NVIDIA driver error without an Xid number; the lines around it, or an Xid at the same time, would decide",
            "read the kernel log around it and update the driver; run `kiln run` on the card if it repeats",
        ),
        // Every line of these drivers the reader takes is an event of their table, answered
        // above; this arm only keeps the match whole.
        (Some(Driver::Drm(_)), _) => of(
            Whose::Undecided,
            "a GPU driver error; the lines around it (a timeout, a reset, a fault) would decide",
            "read the kernel log around it and update the driver and firmware",
        ),
        (Some(Driver::Pcie), _) => of(
            Whose::Environment,
            "a PCIe link error reported by Advanced Error Reporting: the signal between the card and the slot (riser, cable, slot, power) (docs.kernel.org/PCI/pcieaer-howto.html); corrected ones are recovered, uncorrected ones lose the device",
            "reseat the card, check the riser or cable and the slot's link speed (`lspci -vv`), and move the card to another slot if they continue; hardware if the errors follow the card",
        ),
        (_, Some(F::OutOfMemory)) => of(
            Whose::Software,
            "the application asked for more GPU memory than was free: its working set, its batch, another process or the framework's cache, not the card",
            "make the work smaller (batch, resolution, context), free what other processes hold, or use a card with more memory; `kiln watch` tells a leak from a step over the limit",
        ),
        (_, Some(F::IllegalAddress)) => of(
            Whose::Software,
            "a GPU kernel touched memory it may not (CUDA: cudaErrorIllegalAddress), most often the application's or a library's bug",
            "rerun with CUDA_LAUNCH_BLOCKING=1 (and compute-sanitizer) to find the kernel; hardware only if it recurs on unrelated work, with a hardware Xid beside it",
        ),
        (_, Some(F::Validation)) => of(
            Whose::Software,
            "the API's own validation refused a call: the application's bug",
            "fix the call the message names (the binding, the buffer size, the limit)",
        ),
        (_, Some(F::DeviceLost | F::GpuHang | F::Ecc | F::PageFault | F::Link | F::Thermal)) => of(
            Whose::Undecided,
            &format!(
                "the application lost its device (VK_ERROR_DEVICE_LOST, DXGI_ERROR_DEVICE_REMOVED/HUNG, a launch timeout); {DECIDE_HANG}"
            ),
            "read the kernel log (or Windows' System log) of the same minute with `kiln explain`, and run `kiln run` on the card",
        ),
        (_, Some(F::Other) | None) => of(
            Whose::Undecided,
            &format!("the application reports a GPU failure of no known kind; {DECIDE_HANG}"),
            "read the lines around it and the kernel log of the same minute",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_xid_answers_from_the_catalogue_and_its_154_from_its_text() {
        let r = Reading {
            xid: Some(79),
            ..Reading::default()
        };
        assert_eq!(judge(&r).class, whose(xid::lookup(79).unwrap().class()));
        let r = Reading {
            xid: Some(154),
            message: Some(
                "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)".into(),
            ),
            ..Reading::default()
        };
        assert!(judge(&r).action.starts_with("reboot the node"));
    }

    #[test]
    fn amdgpu_s_and_intel_s_events_answer_from_their_one_table() {
        use crate::logread::kernel::read as read_line;
        // A ring timeout is a row of the kernel events' table: its meaning, its source,
        // what would decide whose it is, and its action.
        let (_, r) = read_line(
            "amdgpu 0000:03:00.0: amdgpu: ring gfx_0.0.0 timeout, signaled seq=7, emitted seq=9",
        )
        .unwrap();
        let row = r.event.expect("the table knows a ring timeout");
        let j = judge(&r);
        assert_eq!(j.class, Whose::Undecided);
        assert!(j.meaning.contains(row.source) && j.meaning.contains("would decide"));
        assert_eq!(j.action, row.action);
        // A form once read by the reader's own words is a row of the table too.
        let (_, r) = read_line("amdgpu 0000:28:00.0: VRAM is lost due to GPU reset!").unwrap();
        let row = r.event.expect("the table knows a lost VRAM");
        assert_eq!(r.failure, Some(FailureKind::GpuHang));
        assert_eq!(judge(&r).action, row.action);
        // The near miss: a count of corrected errors is news of no weight, and no failure.
        assert_eq!(
            read_line(
                "amdgpu 0000:0b:00.0: amdgpu: 12 correctable hardware errors detected in gfx block"
            ),
            None
        );
    }

    #[test]
    fn the_exit_code_is_the_gravest_class_s() {
        assert_eq!(exit_code_of([]), exit_code::HEALTHY);
        assert_eq!(
            exit_code_of([Whose::Software, Whose::Hardware]),
            exit_code::HARDWARE
        );
        assert_eq!(
            exit_code_of([Whose::Undecided, Whose::Software]),
            exit_code::SOFTWARE
        );
        assert_eq!(exit_code_of([Whose::Undecided]), exit_code::INCONCLUSIVE);
    }
}
