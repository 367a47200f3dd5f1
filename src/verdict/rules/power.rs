//! Power delivery: the hardware power brake, and hardware slowdown while the card was not
//! hot (the PSU or its cables), one finding per device and code naming every phase.

use crate::finding::{Confidence, Finding, FindingCode, Severity, finding};
use crate::telemetry::summary::PhaseTelemetry;
use crate::telemetry::throttle::ThrottleReason;
use crate::verdict::DeviceReport;
use crate::verdict::thresholds::Thresholds;

/// The rule.
pub fn judge(device: &DeviceReport, t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    for p in &device.telemetry {
        power(p, t, &mut out);
    }
    for code in [FindingCode::PowerBrake, FindingCode::PowerDelivery] {
        super::one_per_device(&mut out, code);
    }
    out
}

fn power(p: &PhaseTelemetry, t: &Thresholds, out: &mut Vec<Finding>) {
    let share = |r: ThrottleReason| p.throttle_share_of(r);
    let evidence = super::thermal::temperatures(p);
    let thermal = super::thermal::thermal_share(p);
    if share(ThrottleReason::HwPowerBrakeSlowdown) > t.throttle_share {
        out.push(finding(
            FindingCode::PowerBrake,
            Severity::Major,
            Confidence::High,
            format!(
                "the hardware power brake held the clocks {:.0}% of the {} phase",
                share(ThrottleReason::HwPowerBrakeSlowdown) * 100.0,
                p.phase
            ),
            evidence.clone(),
            "check the PSU and the power cables to the card",
        ));
    } else if share(ThrottleReason::HwSlowdown) > t.throttle_share && thermal <= t.throttle_share {
        out.push(finding(
            FindingCode::PowerDelivery,
            Severity::Major,
            Confidence::Medium,
            format!(
                "HW slowdown {:.0}% of the {} phase while the card was not hot",
                share(ThrottleReason::HwSlowdown) * 100.0,
                p.phase
            ),
            evidence.clone(),
            "check the PSU and the power cables to the card",
        ));
    }
}
