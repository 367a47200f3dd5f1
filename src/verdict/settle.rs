//! A device's result, its reason and what to do next, settled once from its evidence and
//! its findings after resolution: the most serious class among the findings of weight
//! decides, and where none decides, what could not be tested keeps the device from passing.

use super::evidence::{DeviceEvidence, Role};
use serde::{Deserialize, Serialize};

use crate::exit_code;
use crate::finding::{Class, Confidence, Finding, Severity};
use crate::gpu::DeviceKind;
use crate::workload::WorkloadStatus;

/// A device's result in one word.
/// Ordered from most to least serious.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceResult {
    /// Hardware faults found.
    Fail,
    /// The environment is at fault (cooling, power, slot, configuration); no hardware fault.
    Environment,
    /// A software problem found (fragmentation, leaks); no hardware fault.
    Software,
    /// Not enough could run to judge.
    Inconclusive,
    /// Everything ran and nothing was wrong.
    Pass,
}

impl DeviceResult {
    /// Upper-case word for people.
    pub fn word(self) -> &'static str {
        match self {
            DeviceResult::Pass => "PASS",
            DeviceResult::Fail => "FAIL",
            DeviceResult::Environment => "ENVIRONMENT",
            DeviceResult::Software => "SOFTWARE",
            DeviceResult::Inconclusive => "INCONCLUSIVE",
        }
    }

    /// The exit code this result asks for.
    pub fn exit_code(self) -> i32 {
        match self {
            DeviceResult::Pass => exit_code::HEALTHY,
            DeviceResult::Fail => exit_code::HARDWARE,
            DeviceResult::Environment => exit_code::ENVIRONMENT,
            DeviceResult::Software => exit_code::SOFTWARE,
            DeviceResult::Inconclusive => exit_code::INCONCLUSIVE,
        }
    }
}

/// A device's result, the main reason for it in one sentence, and what to do next (for
/// every result but a pass).
#[derive(Debug, Clone, PartialEq)]
pub struct Settled {
    /// The result.
    pub result: DeviceResult,
    /// Why, in one sentence.
    pub reason: String,
    /// What to do next.
    pub action: Option<String>,
}

/// A finding of a class the verdict judges by (hardware, environment, software).
pub fn judged(f: &Finding) -> bool {
    matches!(
        f.class,
        Class::Hardware | Class::Environment | Class::Software
    )
}

/// The most serious of the findings `keep` keeps: class first (hardware, environment,
/// software, could not test), then severity, then confidence.
pub fn most_serious(findings: &[Finding], keep: impl Fn(&Finding) -> bool) -> Option<&Finding> {
    findings
        .iter()
        .filter(|f| keep(f))
        .min_by_key(|f| (f.class, f.severity, f.confidence))
}

/// The finding that decides the result: the most serious major-or-worse finding of at
/// least medium confidence of a judged class.
pub fn decisive(findings: &[Finding]) -> Option<&Finding> {
    most_serious(findings, |f| {
        judged(f) && f.severity <= Severity::Major && f.confidence <= Confidence::Medium
    })
}

/// A "could not test" finding of weight: evidence missing, a run interrupted, a watch
/// whose memory could not be judged.
fn could_not_test(f: &Finding) -> bool {
    f.class == Class::CouldNotTest && f.severity <= Severity::Major
}

/// Where judging starts before any finding: a device that ran everything to its end (or
/// was watched, or observed) passes until a finding says otherwise; anything cut short
/// cannot pass. The reason names what was found first, then what cut the test short (it
/// names what never ran), then the first workload that did not pass.
fn start(d: &DeviceEvidence) -> (DeviceResult, String) {
    let cut_short = match &d.role {
        Role::Watched => {
            return (
                DeviceResult::Pass,
                "watched while the application ran: nothing wrong seen".into(),
            );
        }
        Role::Observed => return (DeviceResult::Pass, "observed, not tested".into()),
        Role::Tested { cut_short } => cut_short.clone(),
    };
    let result = if d.ran_to_end() {
        DeviceResult::Pass
    } else {
        DeviceResult::Inconclusive
    };
    let said = |w: &crate::workload::WorkloadOutcome| format!("{}: {}", w.workload, w.headline);
    let reason = d
        .workloads
        .iter()
        .find(|w| w.status == WorkloadStatus::Failed)
        .map(said)
        .or(cut_short)
        .or_else(|| {
            d.workloads
                .iter()
                .find(|w| w.status != WorkloadStatus::Passed)
                .map(said)
        })
        .or_else(|| passed(d))
        .unwrap_or_else(|| "no workload ran".into());
    (result, reason)
}

/// The reason of a device whose every workload passed: all of them named, so that no one
/// workload's headline reads as the one to blame (`every workload passed: vram, compute
/// and pcie`). None where no workload ran.
fn passed(d: &DeviceEvidence) -> Option<String> {
    let mut names: Vec<&str> = Vec::new();
    for w in &d.workloads {
        let name = w.together_with().unwrap_or(w.workload.as_str());
        if !names.contains(&name) {
            names.push(name);
        }
    }
    match names.as_slice() {
        [] => None,
        [one] => Some(format!("{one} passed")),
        many => Some(format!(
            "every workload passed: {}",
            crate::text::list(many)
        )),
    }
}

/// The device's result, reason and next step from its evidence and its resolved findings.
/// The most serious class among the major-or-worse findings of at least medium confidence
/// decides, and its most serious finding is the reason. With none, a device with a major
/// "could not test" finding (evidence missing, an interrupted run) could not be judged
/// whole, and a device that ran to its end and has only minor or low-confidence findings
/// is "could not judge yet" (recheck): neither is ever a fault or a pass.
pub fn settle(d: &DeviceEvidence, findings: &[Finding]) -> Settled {
    let (result, reason) = result_of(d, findings);
    let action = next_step(d, findings, result);
    Settled {
        result,
        reason,
        action,
    }
}

/// The result and reason (see [`settle`]).
fn result_of(d: &DeviceEvidence, findings: &[Finding]) -> (DeviceResult, String) {
    if let Some(f) = decisive(findings) {
        let result = match f.class {
            Class::Hardware => DeviceResult::Fail,
            Class::Environment => DeviceResult::Environment,
            _ => DeviceResult::Software,
        };
        return (result, f.summary.clone());
    }
    let (start, reason) = start(d);
    if start != DeviceResult::Pass {
        return (start, reason);
    }
    // What could not be tested (evidence lost, a run stopped before its end) keeps a
    // device that found nothing from passing.
    if let Some(f) = most_serious(findings, could_not_test) {
        return (DeviceResult::Inconclusive, f.summary.clone());
    }
    if let Some(f) = most_serious(findings, judged) {
        return (
            DeviceResult::Inconclusive,
            format!("not yet a call: {}; recheck: {}", f.summary, f.action),
        );
    }
    if let Some(w) = d.workloads.iter().find(|w| {
        matches!(
            w.status,
            WorkloadStatus::Failed | WorkloadStatus::SoftwareFault
        )
    }) {
        // A workload that found something no rule could judge: said, not passed.
        return (
            DeviceResult::Inconclusive,
            format!("{}: {} (no rule judged it)", w.workload, w.headline),
        );
    }
    (start, reason)
}

/// What to do next for the result just settled: the deciding finding's action, or for a
/// device that could not be judged, what would let it be.
fn next_step(d: &DeviceEvidence, findings: &[Finding], result: DeviceResult) -> Option<String> {
    if result == DeviceResult::Pass {
        return None;
    }
    if let Some(f) = decisive(findings)
        .or_else(|| most_serious(findings, could_not_test))
        .or_else(|| most_serious(findings, judged))
    {
        return Some(f.action.clone());
    }
    let cut = d
        .workloads
        .iter()
        .find(|w| {
            matches!(
                w.status,
                WorkloadStatus::Incomplete | WorkloadStatus::NotRun
            )
        })
        .map(|w| {
            (
                w.workload.as_str(),
                w.summary.envelope().why_cut_short().unwrap_or("not run"),
            )
        });
    if let Some((workload, why)) = cut {
        return Some(if why.contains(crate::workload::STOPPED_ON_REQUEST) {
            format!("rerun without stopping it: {workload} was stopped ({why})")
        } else {
            format!(
                "give the run more time (--duration) or fewer workloads (--workloads), then rerun: {workload} did not run to its end ({why})"
            )
        });
    }
    if let Some(failure) = d.failures.first() {
        return Some(format!(
            "rerun; if it happens again, keep this run directory: the device's test ended early ({})",
            failure.message
        ));
    }
    Some("rerun; if the same result comes back, keep this run directory and report.json for a closer look".into())
}

/// The result of the CPU Vulkan device run in a GPU's place (no GPU selected): it proves
/// the tool, not a card, so it is "could not test" whatever its own result, which its
/// reason keeps.
pub fn stood_in(own: Settled, d: &DeviceEvidence, watched: bool) -> Settled {
    let what = match d.kind {
        DeviceKind::Translation => "Vulkan translated onto Direct3D 12 (Dozen)",
        _ => "the CPU Vulkan device",
    };
    let reason = if watched {
        format!(
            "no GPU was watched: the application ran on {} ({what}), so nothing is said of a card",
            d.name
        )
    } else {
        format!(
            "no GPU was tested: {} is {what}, run in a GPU's place to prove the tool (its own result: {}, {})",
            d.name,
            own.result.word(),
            own.reason
        )
    };
    Settled {
        result: DeviceResult::Inconclusive,
        reason,
        action: Some(if watched {
            "watch the application on a machine with a GPU to judge a card".into()
        } else {
            "run kiln on a machine with a GPU to test a card; `--device cpu` makes the CPU device itself the device under test".into()
        }),
    }
}
