//! The card's cooler: a fan that reads stopped, or far below what a hot card needs, while
//! the GPU is hot under load is the fan or its control failing, the card's hardware and
//! not the room. NVML's `nvmlDeviceGetFanSpeed` gives the speed a fan is driven at as a
//! percent of its maximum; amdgpu's hwmon `fan1_input` its measured RPM. Cards with
//! zero-RPM fan stop hold their fans at 0 while the GPU is cool, by design: a stopped fan
//! is judged only on a GPU that is hot under load.

use std::collections::BTreeMap;

use crate::finding::{
    Celsius, Confidence, Finding, FindingCode, Percent, Severity, evidence, finding,
};
use crate::telemetry::reading::Reading;
use crate::telemetry::said::{ByName, Throttled};
use crate::telemetry::signals::{self, Values};
use crate::telemetry::summary::{PhaseTelemetry, Stat};
use crate::thresholds::Thresholds;
use crate::verdict::{DeviceEvidence, Setup};

/// The rule.
pub fn judge(device: &DeviceEvidence, t: &Thresholds) -> Vec<Finding> {
    let mut out: Vec<Finding> = device
        .telemetry
        .iter()
        .filter_map(|p| fan_failed(p, &device.setup, t))
        .collect();
    super::one_per_device(&mut out, FindingCode::FanFailed);
    out
}

crate::evidence! {
    /// The evidence of `FAN_FAILED`: the fans that stayed low and how hot the GPU was.
    struct FansLow<'a> {
        phase: &'a str => "Phase",
        /// Each fan that stayed low, over the phase.
        fans: ByName<'a, Stat> => "Fans that stayed low",
        /// The GPU's temperature over the phase.
        #[serde(flatten)]
        sensors: Values<Option<&'a Stat>> => flat,
        slowdown_c: Option<Celsius> => "Slowdown temperature",
        throttle_share: Throttled<'a> => "Share of samples throttled",
        fan_floor_pct: Percent => "Least a fan runs at on a hot GPU",
    }
}

/// The GPU's slowdown temperature, where its driver gave one.
fn slowdown_c(setup: &Setup) -> Option<f64> {
    setup
        .identity_of(signals::TEMP_SLOWDOWN_C)
        .and_then(Reading::number)
}

/// How the GPU was hot in a loaded phase, in words, or None where it was not: slowing
/// for heat, or within `thermal_margin_c` of its slowdown temperature.
fn hot(p: &PhaseTelemetry, setup: &Setup, t: &Thresholds) -> Option<String> {
    if p.samples == 0 || !super::settings::loaded(p) {
        return None;
    }
    let hottest = p.gauge(signals::GPU_TEMP_C).map(|s| s.max);
    let at = hottest
        .map(|c| format!(" at {c:.0} °C"))
        .unwrap_or_default();
    let thermal = super::thermal::thermal_share(p);
    if thermal > t.throttle_share {
        return Some(format!(
            "slowing for heat {:.0}% of the phase{at}",
            thermal * 100.0
        ));
    }
    let (hottest, limit) = (hottest?, slowdown_c(setup)?);
    (hottest >= limit - t.thermal_margin_c)
        .then(|| format!("at {hottest:.0} °C against its slowdown temperature of {limit:.0} °C"))
}

/// The fans of a phase that stayed low all phase long: a fan's percent never above
/// `fan_floor_pct` (never above 0 where that is 0), an RPM reading never above 0.
fn low_fans(p: &PhaseTelemetry, t: &Thresholds) -> BTreeMap<String, Stat> {
    let mut fans = super::thermal::fans(p);
    fans.retain(|name, s| {
        s.max <= 0.0 || ((signals::FAN_SPEED_PCT.matches)(name) && s.max < t.fan_floor_pct)
    });
    fans
}

/// A fan stopped or far below its share in one loaded phase where the GPU was hot.
fn fan_failed(p: &PhaseTelemetry, setup: &Setup, t: &Thresholds) -> Option<Finding> {
    let fans = low_fans(p, t);
    if fans.is_empty() {
        return None;
    }
    let hot = hot(p, setup, t)?;
    let stopped = fans.values().all(|s| s.max <= 0.0);
    let said: Vec<String> = fans
        .iter()
        .map(|(name, s)| match signals::Name::parse(name) {
            Some(signals::Name::Fan(i)) => format!("fan {i} at {:.0}% at most", s.max),
            _ => format!("the fan at {:.0} RPM", s.max),
        })
        .collect();
    let mut f = finding(
        FindingCode::FanFailed,
        Severity::Major,
        // A fan that read 0 on a hot card is sure; one that turned slowly may be a fan
        // curve set far too low by hand.
        if stopped {
            Confidence::High
        } else {
            Confidence::Medium
        },
        format!(
            "{} in the {} phase while the GPU was {hot}: the card's fan or its fan control has failed",
            crate::text::list(&said),
            p.phase
        ),
        evidence(&FansLow {
            phase: &p.phase,
            fans: ByName(&fans),
            sensors: super::thermal::gauges(p, &[signals::GPU_TEMP_C]),
            slowdown_c: slowdown_c(setup).map(Celsius),
            throttle_share: Throttled(&p.throttle_share),
            fan_floor_pct: Percent(t.fan_floor_pct),
        }),
        "check the card's fans under load: a blade blocked or a fan cable loose is a repair, a fan or fan controller that no longer answers the GPU's heat is the card's (RMA); a fan curve set by hand (nvidia-settings, the vendor's tool) goes back to automatic first",
    );
    f.facts.phase = Some(p.phase.clone());
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{device, gauge, phase, said};
    use crate::finding::{Class, Severity};
    use crate::thresholds::Thresholds;

    fn judged(
        util: f64,
        temp: f64,
        fan: f64,
        thermal: f64,
    ) -> Vec<(&'static str, Class, Severity)> {
        let d = device(vec![phase(
            "compute",
            serde_json::json!({
                "samples": 10,
                "throttle_share": {"sw_thermal_slowdown": thermal},
                "gauges": {"gpu_temp_c": gauge(temp - 10.0, temp, temp),
                           "util_gpu_pct": gauge(util, util, util),
                           "fan0_speed_pct": gauge(fan, fan, fan)},
            }),
        )]);
        said(&super::judge(&d, &Thresholds::default()))
    }

    #[test]
    fn a_fan_low_on_a_hot_loaded_card_is_the_cooler() {
        assert_eq!(
            judged(100.0, 89.0, 0.0, 1.0),
            [("FAN_FAILED", Class::Hardware, Severity::Major)]
        );
        assert_eq!(
            judged(100.0, 89.0, 10.0, 1.0),
            [("FAN_FAILED", Class::Hardware, Severity::Major)]
        );
    }

    #[test]
    fn an_amdgpu_fan_at_0_rpm_on_a_hot_card_is_the_cooler_and_a_turning_one_is_not() {
        let at = |rpm: f64| {
            let d = device(vec![phase(
                "compute",
                serde_json::json!({
                    "throttle_share": {"hw_thermal_slowdown": 1.0},
                    "gauges": {"gpu_temp_c": gauge(80.0, 95.0, 100.0),
                               "fan0_rpm": gauge(rpm, rpm, rpm)},
                }),
            )]);
            said(&super::judge(&d, &Thresholds::default()))
        };
        assert_eq!(at(0.0), [("FAN_FAILED", Class::Hardware, Severity::Major)]);
        // RPM has no maximum to share against: a turning fan is not judged low.
        assert!(at(900.0).is_empty());
    }

    #[test]
    fn near_misses_are_not_the_fan() {
        // Fan stop on a cool card, idle or under load.
        assert!(judged(0.0, 40.0, 0.0, 0.0).is_empty());
        assert!(judged(100.0, 55.0, 0.0, 0.0).is_empty());
        // A hot card whose fan runs flat out: the room's, not the fan's.
        assert!(judged(100.0, 89.0, 100.0, 1.0).is_empty());
    }
}
