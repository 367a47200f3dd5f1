//! A device that failed mid-test (lost, hung, its worker dead, its driver reset by the OS),
//! judged by what came with it; and the power supply, where the card failed only under the
//! CPU's and the GPU's load together.

use super::{phase_xid_codes, xid_kinds};
use crate::evidence::DeviceErrorKind;
use crate::finding::{Confidence, Finding, FindingCode, Severity, evidence, finding};
use crate::telemetry::record::{DriverReset, XID_FALLEN_OFF_THE_BUS};
use crate::telemetry::summary::PhaseTelemetry;
use crate::thresholds::Thresholds;
use crate::verdict::DeviceEvidence;
use crate::workload::Kind;
use crate::workload::psu::Psu;
use crate::workload::{WorkloadResult, WorkloadStatus};

crate::evidence! {
    /// The evidence of a failure mid-test: what the workloads and the worker said, the
    /// Xids of the device's telemetry, and the OS's driver resets.
    struct Failed<'a> {
        errors: &'a [String] => "What failed",
        xids: &'a [u32] => "Xids",
        driver_resets: &'a [&'a DriverReset] => "Driver resets",
    }
}

crate::evidence! {
    /// The evidence of `PSU_COMBINED_LOAD`.
    struct CombinedLoad<'a> {
        lost: Option<&'a str> => "Lost",
        xid_79: bool => "Xid 79 (fallen off the bus)",
        resets: usize => "Resets",
        figures: &'a str => "Figures",
    }
}

crate::evidence! {
    /// The evidence of `DRIVER_TIMEOUT_RESET`.
    struct Resets<'a> {
        driver_resets: &'a [&'a DriverReset] => "Driver resets",
    }
}

/// The rule.
pub fn judge(device: &DeviceEvidence, _t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    let xid_codes: Vec<u32> = device.telemetry.iter().flat_map(phase_xid_codes).collect();
    device_failure(device, &xid_codes, &mut out);
    combined_load(device, &mut out);
    out
}

fn device_failure(device: &DeviceEvidence, xid_codes: &[u32], out: &mut Vec<Finding>) {
    let mut errors: Vec<String> = device
        .workloads
        .iter()
        .filter_map(|w| w.summary.envelope().device_error.clone())
        .collect();
    // A worker the watchdog abandoned, or one that died, ended its test as a loss does.
    let stopped = device
        .failures
        .iter()
        .find(|f| matches!(f.error, DeviceErrorKind::Hang | DeviceErrorKind::Crash));
    errors.extend(stopped.map(|f| f.message.clone()));
    // Windows' resets of the display driver after a timeout (TDR) during the run.
    let resets: Vec<&DriverReset> = device.driver_resets().collect();
    let Some(error) = errors.first() else {
        driver_resets(&resets, out);
        return;
    };
    let (hardware_xid, app_xid) = xid_kinds(xid_codes);
    let lost = errors.len() > usize::from(stopped.is_some());
    // A loss, a hang or a dead worker with the OS saying it reset the driver for a
    // timeout is that timeout, said by the OS itself.
    let reset = !resets.is_empty() && !hardware_xid && !app_xid;
    let (code, action) = if hardware_xid {
        (
            FindingCode::DeviceLostHardware,
            "follow the hardware Xids' finding: the loss came with them",
        )
    } else if app_xid {
        (
            FindingCode::DeviceLostApplication,
            "a shader or application fault: the card is likely fine",
        )
    } else if reset {
        (
            FindingCode::DeviceLostTimeout,
            "Windows reset the display driver after a timeout (TDR): close other GPU work, update the driver, then rerun; the card is likely fine",
        )
    } else if lost {
        (
            FindingCode::DeviceLostTimeout,
            "a watchdog or driver timeout with no hardware evidence: check the driver",
        )
    } else if stopped.is_some_and(|f| f.error == DeviceErrorKind::Hang) {
        (
            FindingCode::DeviceHang,
            "the device stopped answering with no hardware evidence: check the driver and the kernel log, then rerun it alone",
        )
    } else {
        (
            FindingCode::WorkerCrashed,
            "the device's worker process died (a driver crash is the usual cause): check the driver and the kernel log, then rerun",
        )
    };
    // Without telemetry no Xid could be seen, so "no hardware evidence" proves nothing: the
    // loss is reported but does not decide the device, which stays inconclusive.
    let blind = !device.telemetry.iter().any(|p| p.samples > 0);
    let (confidence, blind_note) = if reset {
        (
            Confidence::High,
            format!(
                " (Windows reset the display driver after a timeout: {})",
                reset_words(&resets)
            ),
        )
    } else if blind && !hardware_xid && !app_xid {
        (
            Confidence::Low,
            " (no telemetry was read, so a hardware cause cannot be ruled out)".to_owned(),
        )
    } else {
        (Confidence::Medium, String::new())
    };
    out.push(finding(
        code,
        Severity::Major,
        confidence,
        format!("the device failed mid-test: {error}{blind_note}"),
        evidence(&Failed {
            errors: &errors,
            xids: xid_codes,
            driver_resets: &resets,
        }),
        action,
    ));
}

/// A card lost, off the bus (Xid 79) or reset by the OS only under the combined CPU and
/// GPU load (`psu`), after the GPU's heaviest load alone (`heat`) ran clean: the power
/// supply, which sags only when the whole machine draws. It explains what the loss alone
/// would say (a timeout, a card off the bus: [`crate::verdict::resolve`]). Nothing when `heat`
/// did not run clean first: then the card was not shown to hold its own load.
fn combined_load(device: &DeviceEvidence, out: &mut Vec<Finding>) {
    let in_psu = |w: &&crate::workload::WorkloadOutcome| w.together_with() == Some(Psu::NAME);
    let lost = device
        .workloads
        .iter()
        .filter(in_psu)
        .find_map(|w| w.summary.envelope().device_error.clone());
    let (psu_phases, others): (Vec<&PhaseTelemetry>, Vec<&PhaseTelemetry>) =
        device.telemetry.iter().partition(|p| p.phase == Psu::NAME);
    let off_bus = psu_phases
        .iter()
        .any(|p| phase_xid_codes(p).contains(&XID_FALLEN_OFF_THE_BUS));
    let resets = psu_phases
        .iter()
        .map(|p| p.driver_resets.iter().filter(|r| !r.before_run).count())
        .sum::<usize>();
    // The same failure before the combined load began is not the power supply's to
    // explain (what follows a loss is its aftermath); nor is another hardware Xid.
    let psu_began = psu_phases
        .iter()
        .map(|p| p.start_ms)
        .fold(f64::MAX, f64::min);
    let first_psu = device
        .workloads
        .iter()
        .position(|w| w.together_with() == Some(Psu::NAME) || w.workload == Psu::NAME)
        .unwrap_or(device.workloads.len());
    let others_failed = others.iter().filter(|p| p.end_ms <= psu_began).any(|p| {
        phase_xid_codes(p).contains(&XID_FALLEN_OFF_THE_BUS)
            || p.driver_resets.iter().any(|r| !r.before_run)
    }) || device.workloads[..first_psu]
        .iter()
        .any(|w| w.summary.envelope().device_error.is_some());
    let other_hardware: Vec<u32> = device
        .telemetry
        .iter()
        .flat_map(phase_xid_codes)
        .filter(|c| *c != XID_FALLEN_OFF_THE_BUS)
        .collect();
    // heat ran, and none of its parts failed or lost the device (a part the budget cut
    // short still loaded the card as hard).
    let heat: Vec<&crate::workload::WorkloadOutcome> = device
        .workloads
        .iter()
        .filter(|w| w.together_with() == Some(crate::workload::heat::Heat::NAME))
        .collect();
    let heat_clean = !heat.is_empty()
        && heat.iter().all(|w| {
            w.summary.envelope().device_error.is_none()
                && matches!(
                    w.status,
                    WorkloadStatus::Passed | WorkloadStatus::Incomplete
                )
        });
    if !(lost.is_some() || off_bus || resets > 0)
        || others_failed
        || xid_kinds(&other_hardware).0
        || !heat_clean
    {
        return;
    }
    let figures = device
        .workloads
        .iter()
        .find_map(|w| match &w.summary {
            WorkloadResult::Psu(r) => Some(r.power_words()),
            _ => None,
        })
        .unwrap_or_else(|| "no power figures".into());
    let what = match (&lost, off_bus, resets) {
        (_, true, _) => "fell off the bus (Xid 79)".to_owned(),
        (Some(e), _, _) => format!("was lost ({e})"),
        _ => format!(
            "was reset by the OS ({})",
            crate::text::count(resets as u64, "reset")
        ),
    };
    out.push(finding(
        FindingCode::PsuCombinedLoad,
        Severity::Critical,
        Confidence::High,
        format!(
            "the card {what} only while the CPU and the GPU were loaded together ({figures}); the GPU's heaviest load alone (heat) ran clean: the power supply, not the card"
        ),
        evidence(&CombinedLoad {
            lost: lost.as_deref(),
            xid_79: off_bus,
            resets,
            figures: &figures,
        }),
        "check the power supply: its rating against the card's and the CPU's power together, its age, the cables to the card (no daisy-chained connectors); rerun psu after a change",
    ));
}

/// Who reset what, in words: Windows its display driver (a TDR), or the Linux kernel's GPU
/// driver (amdgpu, i915, xe: read from the kernel log by the one log reader) its GPU.
pub fn who_reset(resets: &[&DriverReset]) -> &'static str {
    let linux = |r: &&DriverReset| matches!(r.driver.as_str(), "amdgpu" | "i915" | "xe");
    if !resets.is_empty() && resets.iter().all(linux) {
        "the kernel's GPU driver reset the GPU"
    } else {
        "Windows reset the display driver"
    }
}

/// The resets in words: how many, of which driver, and what says so.
pub fn reset_words(resets: &[&DriverReset]) -> String {
    let drivers: Vec<&str> = resets
        .iter()
        .map(|r| r.driver.as_str())
        .filter(|d| !d.is_empty())
        .fold(Vec::new(), |mut all, d| {
            if !all.contains(&d) {
                all.push(d);
            }
            all
        });
    let evidence: Vec<&str> = resets
        .iter()
        .flat_map(|r| r.evidence.iter().map(String::as_str))
        .take(3)
        .collect();
    format!(
        "{} of {} ({})",
        crate::text::count(resets.len() as u64, "reset"),
        if drivers.is_empty() {
            "the display driver".to_owned()
        } else {
            drivers.join(", ")
        },
        evidence.join("; ")
    )
}

/// Windows reset the display driver after a timeout (TDR) while kiln's work on the card
/// finished and verified: the OS gave up on some GPU work (kiln's dispatches stay well
/// under the delay, so more likely another program's, or the driver's), which is software,
/// and a burn-in that saw it is not clean.
fn driver_resets(resets: &[&DriverReset], out: &mut Vec<Finding>) {
    if resets.is_empty() {
        return;
    }
    out.push(finding(
        FindingCode::DriverTimeoutReset,
        Severity::Major,
        Confidence::Medium,
        format!(
            "{} after a timeout during the test: {}",
            crate::text::upper_first(who_reset(resets)),
            reset_words(resets)
        ),
        evidence(&Resets {
            driver_resets: resets,
        }),
        "close other GPU work (games, browsers, video), update the driver, then rerun; a reset that comes back on an idle machine with a fresh driver points at the card",
    ));
}

#[cfg(test)]
mod tests {
    use super::super::testing::{device, phase, said};
    use crate::evidence::DeviceErrorKind;
    use crate::finding::{Class, Severity};
    use crate::thresholds::Thresholds;
    use crate::verdict::DeviceFailure;

    fn failed(
        error: Option<DeviceErrorKind>,
        xid: Option<u32>,
    ) -> Vec<(&'static str, Class, Severity)> {
        let xids: Vec<serde_json::Value> = xid
            .into_iter()
            .map(|code| {
                serde_json::json!({"bus_id": null, "code": code, "pid": null, "process": null,
                    "message": format!("Xid {code}"), "kernel_us": 1, "before_run": false})
            })
            .collect();
        let mut d = device(vec![phase("vram", serde_json::json!({"xids": xids}))]);
        d.failures = error
            .into_iter()
            .map(|error| DeviceFailure {
                error,
                message: "the worker stopped".into(),
            })
            .collect();
        said(&super::judge(&d, &Thresholds::default()))
    }

    #[test]
    fn a_reset_is_said_as_the_os_that_made_it() {
        use crate::telemetry::record::DriverReset;
        let reset = |driver: &str| DriverReset {
            driver: driver.into(),
            logged_unix_us: None,
            before_run: false,
            evidence: vec!["e".into()],
            t_ms: None,
        };
        let (amd, windows) = (reset("amdgpu"), reset("nvlddmkm"));
        assert_eq!(
            super::who_reset(&[&amd]),
            "the kernel's GPU driver reset the GPU"
        );
        // The near miss: Windows' TDR, alone or beside a kernel's reset.
        assert_eq!(
            super::who_reset(&[&windows]),
            "Windows reset the display driver"
        );
        assert_eq!(
            super::who_reset(&[&amd, &windows]),
            "Windows reset the display driver"
        );
    }

    #[test]
    fn a_failure_mid_test_is_judged_by_what_came_with_it() {
        assert_eq!(
            failed(Some(DeviceErrorKind::Hang), None),
            [("DEVICE_HANG", Class::Software, Severity::Major)]
        );
        assert_eq!(
            failed(Some(DeviceErrorKind::Crash), None),
            [("WORKER_CRASHED", Class::Software, Severity::Major)]
        );
        // With the card off the bus beside it: the hardware's.
        assert_eq!(
            failed(Some(DeviceErrorKind::Hang), Some(79))[0],
            ("DEVICE_LOST_HARDWARE", Class::Hardware, Severity::Major)
        );
        // The near miss: no failure, nothing here (the Xid is its own rule's).
        assert!(failed(None, Some(79)).is_empty());
    }
}
