//! The rules: from one device's evidence (workload results, telemetry per phase) to
//! findings. Each rule is a pure function of the evidence, `fn(&DeviceEvidence, &Thresholds)
//! -> Vec<Finding>`, and reads no other rule's findings: their order decides nothing.
//! Which finding explains which (a cause and the symptom it produced) is decided after
//! them, in one place: [`crate::verdict::resolve`].

mod clocks;
pub mod configuration;
mod failure;
mod fans;
mod memory;
mod nvlink;
mod pcie;
mod peers;
mod power;
pub mod rates;
mod results;
mod run;
pub mod settings;
mod setup;
mod tenants;
mod thermal;
mod xids;

pub use clocks::RESTORE_STOCK_CLOCKS;
pub use failure::{reset_words, who_reset};
pub use memory::{REMAP_FAILED, RESET_AND_RETEST, RETIREMENT_RESET};
pub use nvlink::fabric;
pub use peers::{peers, rates};
pub use run::{evidence_missing, gpu_not_visible, run_interrupted};

use super::DeviceEvidence;
use super::xid::{self, XidInfo};
use crate::finding::{Class, Evidence, Finding, FindingCode, Severity, evidence};
use crate::telemetry::record::XidEvent;
use crate::telemetry::said::ByName;
use crate::telemetry::summary::{BETWEEN_PHASES, PhaseTelemetry, SINCE_DRIVER_LOAD};
use crate::thresholds::Thresholds;
use crate::workload::WorkloadOutcome;

crate::evidence! {
    /// The evidence of a finding that rests on what a phase's counters grew by: every
    /// counter's growth.
    struct CounterDeltas<'a> {
        counter_deltas: ByName<'a, f64> => "Growth during the phase",
    }
}

crate::evidence! {
    /// The evidence of a condition found in several phases: each phase's.
    struct Phases<'a> {
        phases: Vec<&'a Evidence> => "Phases",
    }
}

/// A rule: one device's evidence and the thresholds in, its findings out.
pub type Rule = fn(&DeviceEvidence, &Thresholds) -> Vec<Finding>;

/// Every rule of a device, by name, in the order their findings are listed (the order
/// they run in changes nothing else: see [`judge_with`]).
pub const RULES: &[(&str, Rule)] = &[
    ("results", results::judge),
    ("fans", fans::judge),
    ("thermal", thermal::judge),
    ("power", power::judge),
    ("pcie", pcie::judge),
    ("memory", memory::judge),
    ("xid", xids::judge),
    ("nvlink", nvlink::judge),
    ("failure", failure::judge),
    ("setup", setup::judge),
    ("tenants", tenants::judge),
    ("configuration", configuration::configuration_rule),
    ("product", rates::product_unknown_rule),
    ("clocks", clocks::judge),
    ("telemetry", setup::telemetry_rule),
];

/// Every finding about one device, as the rules give them (before resolution).
pub fn judge(device: &DeviceEvidence, t: &Thresholds) -> Vec<Finding> {
    judge_with(RULES, device, t)
}

/// The findings of `rules` run in the order given, listed in the order of [`RULES`]: the
/// same findings in the same order whatever the order they ran in (the tests run every
/// scenario with the rules shuffled).
pub fn judge_with(rules: &[(&str, Rule)], device: &DeviceEvidence, t: &Thresholds) -> Vec<Finding> {
    let mut found: Vec<(usize, Vec<Finding>)> = rules
        .iter()
        .map(|(name, rule)| {
            let rank = RULES
                .iter()
                .position(|(n, _)| n == name)
                .unwrap_or(RULES.len());
            (rank, rule(device, t))
        })
        .collect();
    found.sort_by_key(|(rank, _)| *rank);
    found.into_iter().flat_map(|(_, f)| f).collect()
}

/// Every reported run of a workload with the phase it ran in: the n-th run of a workload
/// ran in its n-th phase. Only what reported counts as a run (the verdict names the rest,
/// with why).
fn runs(device: &DeviceEvidence) -> Vec<(&WorkloadOutcome, Option<&PhaseTelemetry>)> {
    device
        .workloads
        .iter()
        .enumerate()
        .filter(|(_, w)| w.reported())
        .map(|(i, w)| {
            let nth = device.workloads[..i]
                .iter()
                .filter(|o| o.workload == w.workload)
                .count();
            let phase = device
                .telemetry
                .iter()
                .filter(|p| p.phase == w.workload)
                .nth(nth);
            (w, phase)
        })
        .collect()
}

/// A shader clock that never fell below this share of its maximum while the card held
/// itself back (its lowest over the phase) cost nothing a rate can show: GPU Boost trims a
/// few bins at the card's target temperature (83 °C on an RTX 3090 Founders Edition) by
/// design. Below it, the slowdown cost the card clock, and is a finding of weight.
const COST_FREE_CLOCK_SHARE: f64 = 0.9;

/// The lowest shader clock of a phase and its maximum, MHz, where the clock never fell
/// below [`COST_FREE_CLOCK_SHARE`] of the maximum: a slowdown in that phase cost nothing
/// measurable. None where it fell further, or where the clocks were not read (a cost
/// unknown is not a cost ruled out).
fn clock_kept(p: &PhaseTelemetry) -> Option<(f64, f64)> {
    let now = p.gauge(crate::telemetry::signals::CLOCK_SM_MHZ)?.min;
    let max = p.gauge(crate::telemetry::signals::CLOCK_SM_MAX_MHZ)?.min;
    (max > 0.0 && now >= COST_FREE_CLOCK_SHARE * max).then_some((now, max))
}

/// Makes `f`, a slowdown in phase `p`, a note where it cost nothing measurable (the clock
/// kept, [`clock_kept`]): its summary says the clock and `why`, its action is `action`.
fn weigh_by_clock(f: &mut Finding, p: &PhaseTelemetry, vendor_id: u32, why: &str, action: &str) {
    let Some((now, max)) = clock_kept(p) else {
        return;
    };
    f.class = Class::Info;
    f.severity = Severity::Note;
    f.summary.push_str(&format!(
        ", with the {} at {now:.0} of {max:.0} MHz at its lowest ({:.0}%): {why} at no measurable cost",
        settings::shader_clock(vendor_id),
        100.0 * now / max
    ));
    f.action = action.to_owned();
}

/// A condition found in several phases (a card hot all run long) said once: the most
/// serious phase's finding, naming the others, at the surest confidence of them, with every
/// phase's evidence.
fn one_per_device(out: &mut Vec<Finding>, code: FindingCode) {
    let found: Vec<Finding> = out.iter().filter(|f| f.code == code).cloned().collect();
    if found.len() < 2 {
        return;
    }
    // The most serious phase's finding leads (a phase where the condition cost something
    // before one where it cost nothing), the others named after it.
    // Among phases of the same weight, the largest figure leads: the headline is never
    // smaller than a figure of the evidence under it.
    let Some(lead) = found
        .iter()
        .enumerate()
        .min_by(|(_, a), (_, b)| {
            (a.class, a.severity)
                .cmp(&(b.class, b.severity))
                .then_with(|| {
                    let share = |f: &Finding| f.facts.in_phase_share.unwrap_or(0.0);
                    share(b).total_cmp(&share(a))
                })
        })
        .map(|(i, _)| i)
    else {
        return;
    };
    let mut merged = found[lead].clone();
    let phases: Vec<&str> = found
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != lead)
        .filter_map(|(_, f)| f.facts.phase.as_deref())
        .collect();
    // Each other phase with its own figure where its rule gave one.
    let figures: Option<Vec<&str>> = found
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != lead)
        .map(|(_, f)| f.facts.in_phase.as_deref())
        .collect();
    merged.summary = match figures {
        Some(figures) if !figures.is_empty() => {
            format!("{}; also {}", merged.summary, crate::text::list(&figures))
        }
        _ => format!(
            "{}; the same in the {} {}",
            merged.summary,
            crate::text::list(&phases),
            if phases.len() == 1 { "phase" } else { "phases" }
        ),
    };
    merged.confidence = found
        .iter()
        .map(|f| f.confidence)
        .min()
        .unwrap_or(merged.confidence);
    merged.evidence = evidence(&Phases {
        phases: found.iter().map(|f| &f.evidence).collect(),
    });
    let mut placed = false;
    out.retain_mut(|f| {
        if f.code != code {
            return true;
        }
        if placed {
            return false;
        }
        placed = true;
        *f = merged.clone();
        true
    });
}

/// When the counts of [`SINCE_DRIVER_LOAD`] came, in words.
const SINCE_LOAD_WORDS: &str = "since the driver loaded, before the run began";

/// Phases in words: `during the vram phase`, `during the vram and compute phases`, or
/// `since the last check` (or `since boot`, with no earlier check) for `kiln health`'s one
/// phase.
fn during_phases(phases: &[String]) -> String {
    match phases {
        [one] if crate::telemetry::summary::is_health(one) => {
            crate::telemetry::summary::health_words(one).into()
        }
        [one] if one == BETWEEN_PHASES => "between the phases".into(),
        [one] if one == SINCE_DRIVER_LOAD => SINCE_LOAD_WORDS.into(),
        [_] => format!("during the {} phase", phases[0]),
        _ => format!("during the {} phases", crate::text::list(phases)),
    }
}

/// When a phase's events happened, in words: `during the vram phase`, or `between the
/// phases` for what no phase's window covered.
fn during(p: &PhaseTelemetry) -> String {
    match p.phase.as_str() {
        BETWEEN_PHASES => "between the phases".to_owned(),
        SINCE_DRIVER_LOAD => SINCE_LOAD_WORDS.to_owned(),
        // `kiln health` judges what came since its last check, or since boot on a first.
        phase if crate::telemetry::summary::is_health(phase) => {
            crate::telemetry::summary::health_words(phase).to_owned()
        }
        phase => format!("during the {phase} phase"),
    }
}

/// The Xid codes a phase's events carry.
fn phase_xid_codes(p: &PhaseTelemetry) -> Vec<u32> {
    p.xids.iter().filter_map(XidEvent::code).collect()
}

/// The Xid codes of a device's telemetry that point at the card (hardware rows of major
/// severity or worse), and those of an application fault, from the catalogue.
fn xid_kinds(codes: &[u32]) -> (bool, bool) {
    let rows: Vec<&XidInfo> = codes.iter().filter_map(|c| xid::lookup(*c)).collect();
    let hardware = rows
        .iter()
        .any(|r| r.class() == Class::Hardware && r.severity <= Severity::Major);
    let application = rows
        .iter()
        .any(|r| r.finding == FindingCode::XidApplication && r.severity <= Severity::Major);
    (hardware, application)
}

/// What the rules' unit tests build their evidence from: phases as the report writes
/// them, and a device observed over them.
#[cfg(test)]
pub(super) mod testing {
    use crate::finding::{Class, Finding, Severity};
    use crate::telemetry::summary::PhaseTelemetry;
    use crate::verdict::{DeviceEvidence, Setup};

    /// A phase of a minute and 300 samples (every one with a throttle status), with
    /// `fields` laid over it as the report writes them.
    pub fn phase(name: &str, fields: serde_json::Value) -> PhaseTelemetry {
        let mut phase = serde_json::json!({
            "device": 0, "phase": name, "start_ms": 0.0, "end_ms": 60_000.0, "samples": 300,
            "gauges": {}, "throttle_share": {}, "reasons_read": 300, "counter_deltas": {},
            "counters_after": {}, "counters_unavailable": [], "xids": [],
        });
        if let (Some(base), Some(more)) = (phase.as_object_mut(), fields.as_object()) {
            base.extend(more.clone());
        }
        serde_json::from_value(phase).expect("a phase as the report writes it")
    }

    /// A gauge's statistics over a phase: its lowest, median and highest reading.
    pub fn gauge(min: f64, median: f64, max: f64) -> serde_json::Value {
        serde_json::json!({"min": min, "median": median, "max": max, "samples": 300})
    }

    /// An NVIDIA H200 observed over these phases.
    pub fn device(phases: Vec<PhaseTelemetry>) -> DeviceEvidence {
        let setup = Setup {
            vendor_id: 0x10de,
            ..Setup::default()
        };
        let mut d =
            DeviceEvidence::observed(0, "NVIDIA H200", "uuid", None, setup, phases[0].clone());
        d.telemetry = phases;
        d
    }

    /// An NVIDIA H200 that ran compute at `fp32_gops` (10^9 a second) and int32 at 30000,
    /// its phase's telemetry quiet.
    pub fn computed_at(fp32_gops: f64) -> DeviceEvidence {
        use crate::workload::{WorkloadOutcome, WorkloadResult, WorkloadStatus};
        let kind = |name: &str, gops: f64| {
            serde_json::json!({"best_gops": gops, "cpu_checked": 32, "cpu_mismatches": 0,
                "gops": gops, "gpu_s": 1.0, "kind": name, "mismatches": 0, "nonfinite": 0,
                "rounds": 1, "verified_ops": 230686720})
        };
        let summary = serde_json::json!({"device_error": null, "items": 4096,
            "iterations": 3520, "kinds": [kind("fp32", fp32_gops), kind("int32", 30_000.0)],
            "levels": [], "records": [], "shape": {"shape": "steady"}, "stopped_early": null,
            "wall_s": 6.0});
        let mut d = device(vec![phase("compute", serde_json::json!({}))]);
        d.workloads.push(WorkloadOutcome {
            workload: "compute".into(),
            status: WorkloadStatus::Passed,
            headline: "no errors".into(),
            summary: WorkloadResult::from_json("compute", summary),
        });
        d
    }

    /// Each finding's code, class and severity.
    pub fn said(found: &[Finding]) -> Vec<(&'static str, Class, Severity)> {
        found
            .iter()
            .map(|f| (f.code.name(), f.class, f.severity))
            .collect()
    }
}

#[cfg(test)]
mod lead_tests {
    use super::*;
    use crate::finding::Confidence;

    fn hot(phase: &str, share: f64) -> Finding {
        let mut f = crate::finding::finding(
            FindingCode::ThermalThrottle,
            Severity::Major,
            Confidence::High,
            format!(
                "thermal slowdown {:.0}% of the {phase} phase",
                share * 100.0
            ),
            Evidence::default(),
            "improve cooling",
        );
        f.facts.phase = Some(phase.into());
        f.facts.in_phase = Some(format!("{:.0}% of the {phase} phase", share * 100.0));
        f.facts.in_phase_share = Some(share);
        f
    }

    #[test]
    fn a_condition_in_several_phases_leads_with_its_largest_figure() {
        let mut out = vec![hot("vram", 0.46), hot("compute", 1.0), hot("pcie", 1.0)];
        one_per_device(&mut out, FindingCode::ThermalThrottle);
        assert_eq!(out.len(), 1);
        assert_eq!(
            out[0].summary,
            "thermal slowdown 100% of the compute phase; also 46% of the vram phase and 100% of the pcie phase"
        );
        // The near miss: equal figures keep the run's order.
        let mut out = vec![hot("vram", 1.0), hot("compute", 1.0)];
        one_per_device(&mut out, FindingCode::ThermalThrottle);
        assert!(
            out[0]
                .summary
                .starts_with("thermal slowdown 100% of the vram phase"),
            "{}",
            out[0].summary
        );
    }
}
