//! Heat: thermal slowdown, read from the throttle status or from a sensor at its limit,
//! one finding per device naming every phase; and memory near its rated temperature.

use std::collections::BTreeMap;

use super::rates;
use crate::finding::{
    Celsius, Confidence, Evidence, Finding, FindingCode, Severity, evidence, finding,
};
use crate::telemetry::said::{ByName, Throttled};
use crate::telemetry::signals::{self, Signal, Values};
use crate::telemetry::summary::{PhaseTelemetry, Stat};
use crate::telemetry::throttle::ThrottleReason;
use crate::thresholds::Thresholds;
use crate::verdict::{DeviceEvidence, Setup};

/// The rule.
pub fn judge(device: &DeviceEvidence, t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    for p in &device.telemetry {
        thermal(p, &device.setup, t, &mut out);
    }
    super::one_per_device(&mut out, FindingCode::ThermalThrottle);
    memory_hot(device, t, &mut out);
    out
}

crate::evidence! {
    /// What a phase's sensors said while something held the card back: the evidence of
    /// the thermal and power findings.
    pub(super) struct Temperatures<'a> {
        phase: &'a str => "Phase",
        throttle_share: Throttled<'a> => "Share of samples throttled",
        /// The GPU's, the junction's and the memory's temperatures over the phase.
        #[serde(flatten)]
        sensors: Values<Option<&'a Stat>> => flat,
        /// Each fan's speed over the phase, where the card has fans that were read: a hot
        /// card's fan at full speed is the room's heat, one stopped is its cooler's.
        #[serde(skip_serializing_if = "Option::is_none")]
        fans: Option<ByName<'a, Stat>> => "Fans",
    }
}

/// The fans of a phase (speed in percent, or amdgpu's RPM), by name.
pub(super) fn fans(p: &PhaseTelemetry) -> BTreeMap<String, Stat> {
    p.gauges
        .iter()
        .filter(|(name, _)| {
            (signals::FAN_SPEED_PCT.matches)(name) || name.as_str() == signals::FAN0_RPM.name
        })
        .map(|(name, s)| (name.clone(), s.clone()))
        .collect()
}

/// The sensors of `p` as [`Temperatures`].
pub(super) fn temperatures(p: &PhaseTelemetry) -> Evidence {
    let fans = fans(p);
    evidence(&Temperatures {
        phase: &p.phase,
        throttle_share: Throttled(&p.throttle_share),
        sensors: gauges(
            p,
            &[
                signals::GPU_TEMP_C,
                signals::GPU_HOTSPOT_TEMP_C,
                signals::HBM_TEMP_C,
            ],
        ),
        fans: (!fans.is_empty()).then_some(ByName(&fans)),
    })
}

/// Some gauges of a phase, by signal.
pub(super) fn gauges<'a>(p: &'a PhaseTelemetry, of: &[Signal]) -> Values<Option<&'a Stat>> {
    Values(of.iter().map(|s| (*s, p.gauge(*s))).collect())
}

/// The share of a phase's samples under thermal slowdown, hardware or software.
pub(super) fn thermal_share(p: &PhaseTelemetry) -> f64 {
    p.throttle_share_of(ThrottleReason::HwThermalSlowdown)
        .max(p.throttle_share_of(ThrottleReason::SwThermalSlowdown))
}

/// The temperatures a phase reached, in words: the GPU's (edge), the junction's and the
/// memory's, those that were read (`hottest 88 °C, junction 104 °C`).
fn hottest(p: &PhaseTelemetry) -> String {
    let parts: Vec<String> = [
        ("hottest", signals::GPU_TEMP_C),
        ("junction", signals::GPU_HOTSPOT_TEMP_C),
        ("memory", signals::HBM_TEMP_C),
    ]
    .iter()
    .filter_map(|(word, key)| p.gauge(*key).map(|s| format!("{word} {:.0} °C", s.max)))
    .collect();
    if parts.is_empty() {
        "no temperature read".into()
    } else {
        parts.join(", ")
    }
}

/// Thermal slowdown in one phase: read from the throttle status, or, where none was read,
/// a sensor at its limit under load with the clock held down.
fn thermal(p: &PhaseTelemetry, setup: &Setup, t: &Thresholds, out: &mut Vec<Finding>) {
    let share = |r: ThrottleReason| p.throttle_share_of(r);
    let evidence = temperatures(p);
    let thermal =
        share(ThrottleReason::HwThermalSlowdown).max(share(ThrottleReason::SwThermalSlowdown));
    let cooling = "improve cooling: airflow, fans, dust, thermal paste";
    if thermal > t.throttle_share {
        let mut f = finding(
            FindingCode::ThermalThrottle,
            Severity::Major,
            Confidence::High,
            format!(
                "thermal slowdown {:.0}% of the {} phase ({})",
                thermal * 100.0,
                p.phase,
                hottest(p)
            ),
            evidence.clone(),
            cooling,
        );
        f.facts.phase = Some(p.phase.clone());
        f.facts.in_phase = Some(format!("{:.0}% of the {} phase", thermal * 100.0, p.phase));
        f.facts.in_phase_share = Some(thermal);
        // What it cost: the clock it left. A clock held near its maximum cost nothing a
        // rate can show (GPU Boost trims a few bins at its target temperature by design).
        super::weigh_by_clock(
            &mut f,
            p,
            setup.vendor_id,
            "held at its temperature target",
            "nothing now: the card runs at its own temperature target; better cooling would buy its last few clock bins",
        );
        out.push(f);
    } else if let Some(hot) = super::settings::held_for_heat(p, setup, t) {
        // No throttle status could be read, but a sensor sat at its limit under load while
        // the clock stayed down: the card held itself back for heat.
        let mut f = finding(
            FindingCode::ThermalThrottle,
            Severity::Major,
            Confidence::Medium,
            format!(
                "{hot} in the {} phase: held back for heat (no throttle status was read)",
                p.phase
            ),
            evidence.clone(),
            cooling,
        );
        f.facts.phase = Some(p.phase.clone());
        out.push(f);
    }
}

crate::evidence! {
    /// The evidence of `MEMORY_HOT`.
    struct MemoryNearLimit<'a> {
        phase: &'a str => "Phase",
        /// The memory's and the GPU's temperatures over the phase.
        #[serde(flatten)]
        sensors: Values<Option<&'a Stat>> => flat,
        limit_c: Celsius => "Limit",
        thermal_margin_c: Celsius => "Margin kept below the limit",
    }
}

/// Memory within a few degrees of its rated temperature under load, where the card did
/// not slow for heat (where it did, that finding names the memory's temperature already:
/// [`crate::verdict::resolve`]): a note, not a
/// call (nothing went wrong), that the cooling leaves no margin for a hotter room or a
/// dustier card, and context for any memory error beside it.
fn memory_hot(device: &DeviceEvidence, t: &Thresholds, out: &mut Vec<Finding>) {
    let Some((phase, hottest, gpu, limit)) = rates::memory_near_limit(device, t) else {
        return;
    };
    let against = if hottest > limit + 0.5 {
        format!("over its limit of {limit:.0} °C")
    } else if hottest >= limit - 0.5 {
        format!("at its limit of {limit:.0} °C")
    } else {
        format!(
            "{:.0} °C short of its limit of {limit:.0} °C",
            limit - hottest
        )
    };
    out.push(finding(
        FindingCode::MemoryHot,
        Severity::Note,
        Confidence::Medium,
        format!(
            "the memory reached {hottest:.0} °C in the {} phase, {against}{}",
            phase.phase,
            gpu.map(|g| format!(" (GPU {g:.0} °C)")).unwrap_or_default()
        ),
        evidence(&MemoryNearLimit {
            phase: &phase.phase,
            sensors: gauges(phase, &[signals::HBM_TEMP_C, signals::GPU_TEMP_C]),
            limit_c: Celsius(limit),
            thermal_margin_c: Celsius(t.thermal_margin_c),
        }),
        "improve the cooling over the card's memory (airflow, fan curve, the chassis' inlet temperature; on a consumer card its memory pads) before a hotter day takes it over its limit, where it slows itself and makes errors",
    ));
}

#[cfg(test)]
mod tests {
    use super::super::testing::{device, gauge, phase, said};
    use crate::finding::{Class, Severity};
    use crate::thresholds::Thresholds;

    fn at_clock(lowest_mhz: f64) -> Vec<(&'static str, Class, Severity)> {
        let d = device(vec![phase(
            "compute",
            serde_json::json!({
                "throttle_share": {"sw_thermal_slowdown": 1.0},
                "gauges": {"gpu_temp_c": gauge(82.0, 83.0, 83.0),
                           "clock_sm_mhz": gauge(lowest_mhz, 2040.0, 2055.0),
                           "clock_sm_max_mhz": gauge(2100.0, 2100.0, 2100.0)},
            }),
        )]);
        said(&super::judge(&d, &Thresholds::default()))
    }

    #[test]
    fn a_thermal_slowdown_weighs_what_it_cost_the_clock() {
        // At its boost target, the clock never below 90% of its maximum: a note.
        assert_eq!(
            at_clock(1995.0),
            [("THERMAL_THROTTLE", Class::Info, Severity::Note)]
        );
        // The near miss: held to 85% at times, the cooling's finding of weight.
        assert_eq!(
            at_clock(1785.0),
            [("THERMAL_THROTTLE", Class::Environment, Severity::Major)]
        );
    }

    #[test]
    fn several_phases_are_said_once_under_the_most_serious() {
        let hot = |name: &str, lowest: f64, share: f64| {
            phase(
                name,
                serde_json::json!({
                    "throttle_share": {"hw_thermal_slowdown": share},
                    "gauges": {"clock_sm_mhz": gauge(lowest, 1980.0, 1980.0),
                               "clock_sm_max_mhz": gauge(1980.0, 1980.0, 1980.0)},
                }),
            )
        };
        let d = device(vec![hot("vram", 1950.0, 0.5), hot("compute", 1200.0, 0.5)]);
        let found = super::judge(&d, &Thresholds::default());
        assert_eq!(
            said(&found),
            [("THERMAL_THROTTLE", Class::Environment, Severity::Major)]
        );
        assert!(
            found[0].summary.contains("50% of the compute phase")
                && found[0].summary.contains("also 50% of the vram phase"),
            "{}",
            found[0].summary
        );
        // Each phase is said with its own share, never as "the same" as another's, and
        // the headline leads with the largest share, so that it never reads 46% above a
        // row of 100%.
        let d = device(vec![hot("vram", 1200.0, 0.46), hot("compute", 1200.0, 1.0)]);
        let found = super::judge(&d, &Thresholds::default());
        assert!(
            found[0]
                .summary
                .starts_with("thermal slowdown 100% of the compute phase")
                && found[0].summary.contains("also 46% of the vram phase"),
            "{}",
            found[0].summary
        );
    }
}
