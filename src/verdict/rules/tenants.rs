//! Other processes on the GPU: there when the test started, or arriving during it, each
//! with what its coming did to the rates.

use super::rates;
use crate::finding::{
    Confidence, Finding, FindingCode, Millis, Severity, Share, evidence, finding,
};
use crate::telemetry::process::Process;
use crate::telemetry::record::Reading;
use crate::telemetry::signals::{self, Values};
use crate::thresholds::Thresholds;
use crate::verdict::DeviceEvidence;

crate::evidence! {
    /// The evidence of `OTHER_TENANTS`: those there at the start (under the signal's
    /// name), those that came, and the share of a rate within a workload's own noise.
    struct Tenants<'a> {
        #[serde(flatten)]
        at_start: Values<&'a [Process]> => flat,
        arrived: Vec<Came<'a>> => "Arrived during the run",
        cost_free_share: Share => "A rate within this share of its own is the workload's own noise",
    }
}

crate::evidence! {
    /// A process that came during the test: when, in which phase, and what the rates
    /// measured on both sides of its coming, in words and as a change.
    struct Came<'a> {
        process: &'a Process => "Process",
        phase: &'a str => "Phase",
        first_seen_ms: Millis => "First seen",
        rates: Vec<&'a str> => "Rates",
        rate_changes: Vec<Share> => "Rate changes",
    }
}

/// The rule.
pub fn judge(device: &DeviceEvidence, _t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    let s = &device.setup;
    if s.watching {
        // A watched application's neighbours are judged by its own rule.
        return out;
    }
    let tenants = processes(device);
    // Those that came after the start, each with when and what its coming did to the rates.
    let arrived = rates::arrivals(device, &tenants);
    if tenants.is_empty() && arrived.is_empty() {
        return out;
    }
    let mut said = Vec::new();
    if !tenants.is_empty() {
        let listed: Vec<String> = tenants.iter().map(Process::said).collect();
        said.push(format!(
            "{} {} using the GPU when the test started",
            crate::text::list(&listed),
            if tenants.len() == 1 { "was" } else { "were" }
        ));
    }
    // What the arrivals cost: every rate measured on both sides of each.
    let costs: Vec<Vec<(String, f64)>> = arrived
        .iter()
        .map(|a| rates::before_and_after(device, a))
        .collect();
    for (a, changes) in arrived.iter().zip(&costs) {
        let changes: Vec<&str> = changes.iter().map(|(words, _)| words.as_str()).collect();
        said.push(format!(
            "{} started using the GPU during the test, {:.1} s into the {} phase{}",
            a.process.said(),
            (a.first_ms - a.phase.start_ms) / 1e3,
            a.phase.phase,
            if changes.is_empty() {
                String::new()
            } else {
                format!(": {}", changes.join("; "))
            }
        ));
    }
    let mut f = finding(
        FindingCode::OtherTenants,
        Severity::Major,
        Confidence::High,
        said.join("; "),
        evidence(&Tenants {
            at_start: Values(vec![(signals::OTHER_PROCESSES, &tenants)]),
            arrived: arrived
                .iter()
                .zip(&costs)
                .map(|(a, changes)| Came {
                    process: &a.process,
                    phase: &a.phase.phase,
                    first_seen_ms: Millis(a.first_ms),
                    rates: changes.iter().map(|(words, _)| words.as_str()).collect(),
                    rate_changes: changes.iter().map(|(_, share)| Share(*share)).collect(),
                })
                .collect(),
            cost_free_share: Share(COST_FREE_SHARE),
        }),
        "rerun when the GPU is idle (drain the node, or --wait-idle)",
    );
    // Severity follows what the tenants cost. Those there at the start took memory the
    // test could not cover; one that came later cost what the rates measured on both
    // sides of its coming show, and where none fell by more than the rates' own noise it
    // cost nothing measurable: said, not held against the run.
    let measured_free = tenants.is_empty()
        && costs.iter().all(|changes| {
            !changes.is_empty() && changes.iter().all(|(_, share)| *share > -COST_FREE_SHARE)
        });
    if measured_free {
        f.class = crate::finding::Class::Info;
        f.severity = Severity::Note;
        f.summary.push_str(&format!(
            ": no rate fell by {:.0}% or more, so it cost the test nothing measurable",
            100.0 * COST_FREE_SHARE
        ));
        f.action = "nothing for this run; keep other work off the GPU during tests (drain the node, or --wait-idle)".into();
    }
    out.push(f);
    out
}

/// A rate that fell by less than this share when another process came is within a
/// workload's own run-to-run noise: the process cost nothing measurable.
const COST_FREE_SHARE: f64 = 0.05;

/// Other processes on the GPU when the test started (`pid:bytes[:name]`), per the vendor
/// source.
pub(super) fn processes(device: &DeviceEvidence) -> Vec<Process> {
    device
        .setup
        .identity_of(signals::OTHER_PROCESSES)
        .and_then(Reading::processes)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::super::testing::{device, phase, said};
    use crate::finding::{Class, Severity};
    use crate::thresholds::Thresholds;
    use crate::verdict::RateSample;

    /// A process that came 30 s into a minute of compute, with kiln's fp32 rate a second
    /// at `before` until then and `after` from then.
    fn arrival(before: f64, after: f64) -> Vec<(&'static str, Class, Severity)> {
        let mut d = device(vec![phase(
            "compute",
            serde_json::json!({
                "other_processes": [{"pid": 5120, "used_bytes": 2u64 << 30}],
                "processes_first_ms": {"5120": 30_000.0},
            }),
        )]);
        d.rate_samples = (1..60)
            .map(|s| RateSample {
                t_ms: f64::from(s) * 1000.0,
                name: "compute_fp32_gops".into(),
                value: if s < 30 { before } else { after },
            })
            .collect();
        said(&super::judge(&d, &Thresholds::default()))
    }

    #[test]
    fn a_tenant_weighs_what_it_cost_the_rates() {
        assert_eq!(
            arrival(50_000.0, 25_000.0),
            [("OTHER_TENANTS", Class::Environment, Severity::Major)]
        );
        // The near miss: a rate 1% down is within a workload's own noise.
        assert_eq!(
            arrival(50_000.0, 49_500.0),
            [("OTHER_TENANTS", Class::Info, Severity::Note)]
        );
        // Just past the noise: a cost.
        assert_eq!(
            arrival(50_000.0, 47_400.0),
            [("OTHER_TENANTS", Class::Environment, Severity::Major)]
        );
    }
}
