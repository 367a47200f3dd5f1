//! The installation, as the driver and the vendor's source saw it at the start
//! (NVML's return codes `NVML_ERROR_DRIVER_NOT_LOADED` and `NVML_ERROR_LIB_RM_VERSION_MISMATCH`;
//! DCGM Diagnostics, "Deployment and Software Issues"): a driver not loaded or at odds with its libraries (software); and a
//! device whose telemetry could not be read at all.

use crate::finding::{Confidence, Finding, FindingCode, Severity, evidence, finding};

crate::evidence! {
    /// The evidence of a driver not loaded: why each telemetry source could not be read.
    struct Problems<'a> {
        source_problems: &'a [String] => "Source problems",
    }
}

crate::evidence! {
    /// The evidence of `DRIVER_VERSION_MISMATCH`.
    struct Versions<'a> {
        vulkan_driver_version: &'a str => "Driver version (Vulkan)",
        nvml_driver_version: Option<&'a str> => "Driver version (NVML)",
        source_problems: &'a [String] => "Source problems",
    }
}

crate::evidence! {
    /// The evidence of `TELEMETRY_MISSING`: the phases that read no sample.
    struct Unread<'a> {
        phases: Vec<&'a str> => "Phases",
    }
}

use crate::telemetry::record::Reading;
use crate::telemetry::{cause, signals};
use crate::thresholds::Thresholds;
use crate::verdict::DeviceEvidence;

/// The rule of the installation.
pub fn judge(device: &DeviceEvidence, _t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    setup(device, &mut out);
    out
}

/// The rule of a device whose telemetry could not be read.
pub fn telemetry_rule(device: &DeviceEvidence, _t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    telemetry_missing(device, &mut out);
    out
}

/// The installation, as the driver and the vendor's source saw it at the start
/// (NVML's return codes `NVML_ERROR_DRIVER_NOT_LOADED` and
/// `NVML_ERROR_LIB_RM_VERSION_MISMATCH`; DCGM Diagnostics, "Deployment and Software Issues"): a driver not loaded or at odds with its libraries (software), and
/// other processes on the GPU (the environment: they take memory and time from the test).
fn setup(device: &DeviceEvidence, out: &mut Vec<Finding>) {
    let s = &device.setup;
    let problem = |cause: &str| s.source_problems.iter().any(|c| c == cause);
    let reinstall = "reinstall the driver or reboot into the installed one, then rerun";
    if problem(cause::DRIVER_NOT_LOADED) {
        out.push(finding(
            FindingCode::DriverNotLoaded,
            Severity::Major,
            Confidence::High,
            "the NVIDIA libraries are installed but the kernel driver is not loaded: its GPUs cannot be tested".into(),
            evidence(&Problems {
                source_problems: &s.source_problems,
            }),
            "load the driver (modprobe nvidia) or reinstall it, then rerun",
        ));
    }
    let text = |key: signals::Signal| s.identity_of(key).and_then(Reading::text);
    let nvml_version = text(signals::DRIVER_VERSION);
    let differ = s.vendor_id == NVIDIA_VENDOR_ID
        && !s.vulkan_driver_version.is_empty()
        && nvml_version.is_some_and(|n| !same_version(n, &s.vulkan_driver_version));
    if problem(cause::VERSION_MISMATCH) || differ {
        out.push(finding(
            FindingCode::DriverVersionMismatch,
            Severity::Major,
            Confidence::High,
            match nvml_version {
                Some(n) if differ => format!("the Vulkan driver is version {} but NVML reports {n}: a half-finished driver upgrade", s.vulkan_driver_version),
                _ => "NVML and the kernel driver differ in version: the driver was upgraded without a reboot".into(),
            },
            evidence(&Versions {
                vulkan_driver_version: &s.vulkan_driver_version,
                nvml_driver_version: nvml_version,
                source_problems: &s.source_problems,
            }),
            reinstall,
        ));
    }
}

const NVIDIA_VENDOR_ID: u32 = 0x10de;

/// True when two dotted driver versions agree in the parts both give (Vulkan packs
/// NVIDIA's version as major.minor.patch.build; NVML writes major.minor[.patch], and
/// `550.54.01` is `550.54.1`).
fn same_version(a: &str, b: &str) -> bool {
    let parts =
        |v: &str| -> Vec<Option<u32>> { v.split('.').map(|p| p.trim().parse().ok()).collect() };
    let (a, b) = (parts(a), parts(b));
    a.iter().zip(&b).take(3).all(|(x, y)| x == y)
}

/// No telemetry sample in any phase: the checks that rest on it (heat, power, clocks,
/// ECC and remap counters, Xids) could not run, and the report must not read as if they
/// passed.
fn telemetry_missing(device: &DeviceEvidence, out: &mut Vec<Finding>) {
    if device.telemetry.is_empty() || device.telemetry.iter().any(|p| p.samples > 0) {
        return;
    }
    out.push(finding(
        FindingCode::TelemetryMissing,
        Severity::Note,
        Confidence::High,
        "no telemetry was read for this device: thermal, power, clock, ECC, remap and Xid checks could not run".into(),
        evidence(&Unread {
            phases: device.telemetry.iter().map(|p| p.phase.as_str()).collect(),
        }),
        "install the vendor's driver tools (NVML for NVIDIA) or grant access to sysfs and the kernel log, then rerun",
    ));
}

#[cfg(test)]
mod tests {
    use super::super::testing::{device, phase, said};
    use crate::finding::{Class, Severity};
    use crate::telemetry::record::Reading;
    use crate::thresholds::Thresholds;

    fn versions(vulkan: &str, nvml: &str) -> Vec<(&'static str, Class, Severity)> {
        let mut d = device(vec![phase("vram", serde_json::json!({}))]);
        d.setup.vulkan_driver_version = vulkan.into();
        d.setup
            .identity
            .insert("driver_version".into(), Reading::Text(nvml.into()));
        said(&super::judge(&d, &Thresholds::default()))
    }

    #[test]
    fn a_half_finished_driver_upgrade_is_software() {
        assert_eq!(
            versions("550.54.15.0", "535.104.05"),
            [("DRIVER_VERSION_MISMATCH", Class::Software, Severity::Major)]
        );
        // The near miss: the same version written two ways (Vulkan packs a build part,
        // NVML writes `.01` for `.1`).
        assert!(versions("550.54.1.0", "550.54.01").is_empty());
    }

    #[test]
    fn a_device_with_no_telemetry_says_so_and_one_with_some_does_not() {
        let mut blind = phase("vram", serde_json::json!({}));
        blind.samples = 0;
        let said_blind = said(&super::telemetry_rule(
            &device(vec![blind]),
            &Thresholds::default(),
        ));
        assert_eq!(
            said_blind,
            [("TELEMETRY_MISSING", Class::Info, Severity::Note)]
        );
        let seen = device(vec![phase("vram", serde_json::json!({}))]);
        assert!(super::telemetry_rule(&seen, &Thresholds::default()).is_empty());
    }
}
