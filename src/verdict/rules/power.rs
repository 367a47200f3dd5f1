//! Power delivery: the hardware power brake, and hardware slowdown while the card was not
//! hot (the PSU or its cables), one finding per device and code naming every phase.

use crate::finding::{Confidence, Finding, FindingCode, Severity, finding};
use crate::telemetry::summary::PhaseTelemetry;
use crate::telemetry::throttle::ThrottleReason;
use crate::thresholds::Thresholds;
use crate::verdict::DeviceEvidence;

/// The rule.
pub fn judge(device: &DeviceEvidence, t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    for p in &device.telemetry {
        power(p, device.setup.vendor_id, t, &mut out);
    }
    for code in [FindingCode::PowerBrake, FindingCode::PowerDelivery] {
        super::one_per_device(&mut out, code);
    }
    out
}

/// What the power supply did to one phase, weighed by what it cost the clock.
fn power(p: &PhaseTelemetry, vendor_id: u32, t: &Thresholds, out: &mut Vec<Finding>) {
    let check = "check the PSU and the power cables to the card";
    let weigh = |mut f: Finding, share: f64| {
        f.facts.phase = Some(p.phase.clone());
        f.facts.in_phase = Some(format!("{:.0}% of the {} phase", share * 100.0, p.phase));
        f.facts.in_phase_share = Some(share);
        super::weigh_by_clock(
            &mut f,
            p,
            vendor_id,
            "the clock kept",
            "nothing now; if it comes back under a heavier load, check the PSU and the power cables to the card",
        );
        f
    };
    let share = |r: ThrottleReason| p.throttle_share_of(r);
    let evidence = super::thermal::temperatures(p);
    let thermal = super::thermal::thermal_share(p);
    if share(ThrottleReason::HwPowerBrakeSlowdown) > t.throttle_share {
        out.push(weigh(
            finding(
                FindingCode::PowerBrake,
                Severity::Major,
                Confidence::High,
                format!(
                    "the hardware power brake held the clocks {:.0}% of the {} phase",
                    share(ThrottleReason::HwPowerBrakeSlowdown) * 100.0,
                    p.phase
                ),
                evidence.clone(),
                check,
            ),
            share(ThrottleReason::HwPowerBrakeSlowdown),
        ));
    } else if share(ThrottleReason::HwSlowdown) > t.throttle_share && thermal <= t.throttle_share {
        out.push(weigh(
            finding(
                FindingCode::PowerDelivery,
                Severity::Major,
                Confidence::Medium,
                format!(
                    "HW slowdown {:.0}% of the {} phase while the card was not hot",
                    share(ThrottleReason::HwSlowdown) * 100.0,
                    p.phase
                ),
                evidence.clone(),
                check,
            ),
            share(ThrottleReason::HwSlowdown),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{device, phase, said};
    use crate::finding::{Class, Severity};
    use crate::thresholds::Thresholds;

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
        // A brake that left the clock within 10% of its maximum cost nothing: a note.
        let mut d = device(vec![phase(
            "compute",
            serde_json::json!({"throttle_share": {"hw_power_brake_slowdown": 0.3},
                "gauges": {"clock_sm_mhz": super::super::testing::gauge(1900.0, 1980.0, 1980.0),
                           "clock_sm_max_mhz": super::super::testing::gauge(1980.0, 1980.0, 1980.0)}}),
        )]);
        d.setup.vendor_id = 0x10de;
        assert_eq!(
            said(&super::judge(&d, &Thresholds::default())),
            [("POWER_BRAKE", Class::Info, Severity::Note)]
        );
    }
}
