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

#[cfg(test)]
mod tests {
    use super::super::testing::{device, phase, said};
    use crate::finding::{Class, Severity};
    use crate::verdict::thresholds::Thresholds;

    fn throttled(shares: serde_json::Value) -> Vec<(&'static str, Class, Severity)> {
        let d = device(vec![phase(
            "compute",
            serde_json::json!({"throttle_share": shares}),
        )]);
        said(&super::judge(&d, &Thresholds::default()))
    }

    #[test]
    fn the_power_brake_and_a_cool_hardware_slowdown_are_the_power_supply() {
        let env = |code| [(code, Class::Environment, Severity::Major)];
        assert_eq!(
            throttled(serde_json::json!({"hw_power_brake_slowdown": 0.3})),
            env("POWER_BRAKE")
        );
        assert_eq!(
            throttled(serde_json::json!({"hw_slowdown": 0.3})),
            env("POWER_DELIVERY")
        );
        // The near misses: a hardware slowdown of a hot card is heat's (the thermal rule),
        // and a share under the threshold is nothing.
        assert!(
            throttled(serde_json::json!({"hw_slowdown": 0.3, "hw_thermal_slowdown": 0.3}))
                .is_empty()
        );
        assert!(throttled(serde_json::json!({"hw_power_brake_slowdown": 0.04})).is_empty());
    }
}
