//! Clocks above the card's rated maximum.

use crate::finding::{Clock, Confidence, Finding, FindingCode, Mhz, Severity, evidence, finding};
use crate::telemetry::signals;
use crate::thresholds::Thresholds;
use crate::verdict::DeviceEvidence;

/// What restores the card's own clocks: the action of the overclock's finding and of every
/// error it explains.
pub const RESTORE_STOCK_CLOCKS: &str = "restore default clocks (no overclock, default application clocks) and rerun: only errors at stock clocks are the card's";

crate::evidence! {
    /// The evidence of `CLOCKS_ABOVE_MAXIMUM`: per clock, the phase, the highest reading
    /// and the maximum, where it was over.
    struct Over<'a> {
        sm: Option<&'a (String, Mhz, Mhz)> => "SM clock",
        memory: Option<&'a (String, Mhz, Mhz)> => "Memory clock",
    }
}

/// The rule.
pub fn judge(device: &DeviceEvidence, _t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    overclocked(device, &mut out);
    out
}

/// Clocks above the card's own maximum (an overclock, or raised application clocks): the
/// settings, not the card. The errors it explains (wrong compute results with the SM clock
/// over, VRAM errors with the memory clock over) are resolved in
/// [`crate::verdict::resolve`]; only errors at stock clocks are the card's.
fn overclocked(device: &DeviceEvidence, out: &mut Vec<Finding>) {
    let over = |clock: signals::Signal, max: signals::Signal| {
        device.telemetry.iter().find_map(|p| {
            let (now, limit) = (p.gauge(clock)?, p.gauge(max)?);
            (limit.min > 0.0 && now.max > limit.min * 1.02)
                .then(|| (p.phase.clone(), Mhz(now.max), Mhz(limit.min)))
        })
    };
    let sm = over(signals::CLOCK_SM_MHZ, signals::CLOCK_SM_MAX_MHZ);
    let mem = over(signals::CLOCK_MEM_MHZ, signals::CLOCK_MEM_MAX_MHZ);
    if sm.is_none() && mem.is_none() {
        return;
    }
    let mut parts = Vec::new();
    if let Some((phase, Mhz(now), Mhz(max))) = &sm {
        parts.push(format!(
            "SM clock {now:.0} MHz over its {max:.0} MHz maximum in the {phase} phase"
        ));
    }
    if let Some((phase, Mhz(now), Mhz(max))) = &mem {
        parts.push(format!(
            "memory clock {now:.0} MHz over its {max:.0} MHz maximum in the {phase} phase"
        ));
    }
    let mut f = finding(
        FindingCode::ClocksAboveMaximum,
        Severity::Major,
        Confidence::High,
        format!("the card ran above its rated clocks ({})", parts.join("; ")),
        evidence(&Over {
            sm: sm.as_ref(),
            memory: mem.as_ref(),
        }),
        RESTORE_STOCK_CLOCKS,
    );
    f.facts.clocks_over = [
        (sm.is_some(), Clock::Shader),
        (mem.is_some(), Clock::Memory),
    ]
    .into_iter()
    .filter_map(|(over, clock)| over.then_some(clock))
    .collect();
    out.push(f);
}

#[cfg(test)]
mod tests {
    use super::super::testing::{device, gauge, phase, said};
    use crate::finding::{Class, Severity};
    use crate::thresholds::Thresholds;

    fn at(highest_mhz: f64) -> Vec<(&'static str, Class, Severity)> {
        let d = device(vec![phase(
            "compute",
            serde_json::json!({"gauges": {"clock_sm_mhz": gauge(1900.0, 1980.0, highest_mhz),
                                          "clock_sm_max_mhz": gauge(1980.0, 1980.0, 1980.0)}}),
        )]);
        said(&super::judge(&d, &Thresholds::default()))
    }

    #[test]
    fn clocks_above_the_rated_maximum_are_the_settings() {
        assert_eq!(
            at(2100.0),
            [("CLOCKS_ABOVE_MAXIMUM", Class::Environment, Severity::Major)]
        );
        // The near miss: within 2% of the maximum, a reading's jitter.
        assert!(at(2010.0).is_empty());
    }
}
