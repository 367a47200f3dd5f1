//! The memory's error counters and standing states: retired pages, uncorrectable ECC,
//! row remapping (failed, pending, banks running out of spares), RAS errors in the GPU's
//! blocks, on-chip SRAM past its threshold, a recovery action or ECC mode change pending.

use super::{CounterDeltas, during};
use crate::finding::{Confidence, Finding, FindingCode, PerMinute, Severity, evidence, finding};
use crate::telemetry::record::Reading;
use crate::telemetry::signals::{self, Name, Signal, Values};
use crate::telemetry::summary::PhaseTelemetry;
use crate::thresholds::Thresholds;
use crate::verdict::DeviceEvidence;
use crate::verdict::xid;

crate::evidence! {
    /// The evidence of `ECC_CORRECTED_RATE_HIGH`.
    struct CorrectedRate<'a> {
        phase: &'a str => "Phase",
        /// The corrected errors in the phase, under the counter's name.
        #[serde(flatten)]
        corrected: Values<f64> => flat,
        per_minute: PerMinute => "A minute",
        budget_per_minute: PerMinute => "Allowed a minute",
        xid_92: bool => "Xid 92 (high single-bit ECC rate)",
    }
}

crate::evidence! {
    /// Readings with the rule that judges them.
    struct Sourced {
        #[serde(flatten)]
        readings: Values<Option<f64>> => flat,
        source: &'static str => "Source",
    }
}

/// Xid 92: the driver's own word for a high rate of corrected (single-bit) ECC errors.
const XID_HIGH_CORRECTED_RATE: u32 = 92;

/// Corrected ECC errors climbing under load faster than `ecc_corrected_per_minute`: memory
/// that degrades as it works, the card's (once per device, at its worst phase). A phase
/// shorter than a minute is judged as a whole minute, so that a burst is not yet a rate.
/// Xid 92 beside it is the driver saying the same: then it is sure. Below the budget an Xid
/// 92 stays the early warning its own finding says.
fn corrected_rate(device: &DeviceEvidence, t: &Thresholds, out: &mut Vec<Finding>) {
    let worst = device
        .telemetry
        .iter()
        .filter(|p| p.samples > 0)
        .filter_map(|p| {
            let corrected = p.grew(signals::ECC_CORRECTED_VOLATILE)?;
            let minutes = ((p.end_ms - p.start_ms) / 60_000.0).max(1.0);
            Some((p, corrected, corrected / minutes))
        })
        .max_by(|a, b| a.2.total_cmp(&b.2));
    let Some((p, corrected, per_minute)) = worst else {
        return;
    };
    if per_minute < t.ecc_corrected_per_minute || per_minute <= 0.0 {
        return;
    }
    let xid_92 = device
        .telemetry
        .iter()
        .flat_map(|p| &p.xids)
        .any(|x| x.code() == Some(XID_HIGH_CORRECTED_RATE));
    out.push(finding(
        FindingCode::EccCorrectedRateHigh,
        Severity::Major,
        if xid_92 {
            Confidence::High
        } else {
            Confidence::Medium
        },
        format!(
            "the memory corrected {corrected:.0} ECC errors {} ({per_minute:.0} a minute, over the budget of {:.0}){}: memory degrading under load",
            during(p),
            t.ecc_corrected_per_minute,
            if xid_92 {
                ", and the driver raised Xid 92 (high single-bit error rate)"
            } else {
                ""
            }
        ),
        evidence(&CorrectedRate {
            phase: &p.phase,
            corrected: Values(vec![(signals::ECC_CORRECTED_VOLATILE, corrected)]),
            per_minute: PerMinute(per_minute),
            budget_per_minute: PerMinute(t.ecc_corrected_per_minute),
            xid_92,
        }),
        "RMA candidate: run the rma profile to find the failing rows, and send this report with it",
    ));
}

/// The rule: what each phase's counters grew by, then the states the last counters show
/// (a state an event of the run already gave is not given again).
pub fn judge(device: &DeviceEvidence, t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    for p in &device.telemetry {
        counters(p, &mut out);
    }
    corrected_rate(device, t, &mut out);
    standing(device, &mut out);
    spares_and_modes(device, &mut out);
    out
}

fn counters(p: &PhaseTelemetry, out: &mut Vec<Finding>) {
    let delta = |s: Signal| p.grew_or_0(s);
    // Page retirement is how cards before row remapping take bad memory out of use.
    let dbe = delta(signals::RETIRED_PAGES_DBE);
    let sbe = delta(signals::RETIRED_PAGES_SBE);
    if dbe + sbe > 0.0 || delta(signals::RETIRED_PAGES_PENDING) > 0.0 {
        out.push(finding(
            FindingCode::RetiredPages,
            if dbe > 0.0 {
                Severity::Critical
            } else {
                Severity::Major
            },
            Confidence::High,
            format!(
                "{dbe} pages retired for double-bit and {sbe} for single-bit errors {}",
                during(p)
            ),
            evidence(&CounterDeltas {
                counter_deltas: crate::telemetry::said::ByName(&p.counter_deltas),
            }),
            "RMA candidate: reset the GPU to apply pending retirements, retest, and send this report",
        ));
    }
    // On-chip SRAM's uncorrectable errors are ECC errors of the GPU's own, where the totals
    // did not count them.
    let ecc = delta(signals::ECC_UNCORRECTED_VOLATILE)
        .max(delta(signals::ECC_UNCORRECTED_AGGREGATE))
        .max(delta(signals::SRAM_UNCORRECTED_PARITY) + delta(signals::SRAM_UNCORRECTED_SECDED));
    if ecc > 0.0 {
        out.push(finding(
            FindingCode::EccUncorrectable,
            Severity::Critical,
            Confidence::High,
            format!("{ecc} uncorrectable ECC errors {}", during(p)),
            evidence(&CounterDeltas {
                counter_deltas: crate::telemetry::said::ByName(&p.counter_deltas),
            }),
            "RMA candidate: reset the GPU, retest, and send this report",
        ));
    }
    if delta(signals::REMAP_FAILURE) > 0.0 {
        out.push(finding(
            FindingCode::RowRemapFailure,
            Severity::Critical,
            Confidence::High,
            format!("row remapping failed {}", during(p)),
            evidence(&CounterDeltas {
                counter_deltas: crate::telemetry::said::ByName(&p.counter_deltas),
            }),
            "RMA the card",
        ));
    } else if delta(signals::REMAP_PENDING) > 0.0 {
        out.push(finding(
            FindingCode::RowRemapPending,
            Severity::Major,
            Confidence::High,
            format!("a row remap became pending {}", during(p)),
            evidence(&CounterDeltas {
                counter_deltas: crate::telemetry::said::ByName(&p.counter_deltas),
            }),
            "reset the GPU to apply the remap, then retest",
        ));
    }
    // AMD's RAS counters outside the memory controller (gfx, sdma, mmhub, xgmi, ...):
    // uncorrectable errors in the GPU's own blocks.
    let ras: Vec<String> = p
        .growth()
        .filter_map(|(name, v)| match name {
            Name::Ras {
                block,
                uncorrected: true,
            } if v > 0.0 => Some(format!("{block} {v}")),
            _ => None,
        })
        .collect();
    if !ras.is_empty() {
        out.push(finding(
            FindingCode::RasUncorrectable,
            Severity::Critical,
            Confidence::High,
            format!(
                "uncorrectable RAS errors in the GPU's blocks {} ({})",
                during(p),
                ras.join(", ")
            ),
            evidence(&CounterDeltas {
                counter_deltas: crate::telemetry::said::ByName(&p.counter_deltas),
            }),
            "RMA candidate: reset the GPU, retest, and send this report",
        ));
    }
    if delta(signals::RETIRED_PAGES_FAILED) > 0.0 {
        out.push(finding(
            FindingCode::RowRemapFailure,
            Severity::Critical,
            Confidence::High,
            format!("bad pages could not be retired {}", during(p)),
            evidence(&CounterDeltas {
                counter_deltas: crate::telemetry::said::ByName(&p.counter_deltas),
            }),
            "RMA the card",
        ));
    }
}

/// Standing states of the card, read from the last counters of the run: a failed or
/// pending row remap, a pending page retirement, a recovery action the driver asks for, an
/// ECC mode change waiting for a reset. They were set before the run as often as during it,
/// and are the card's lasting condition, not history: each gives its finding once, unless
/// an event of the run already gave it.
fn standing(device: &DeviceEvidence, out: &mut Vec<Finding>) {
    let last = |signal: Signal| last(device, signal);
    let last_of = |of: &[Signal]| last_of(device, of);
    if last(signals::REMAP_FAILURE).is_some_and(|v| v > 0.0)
        && !already(out, FindingCode::RowRemapFailure)
    {
        out.push(finding(
            FindingCode::RowRemapFailure,
            Severity::Critical,
            Confidence::High,
            format!("row remapping has failed: no spare rows are left {LASTING}"),
            evidence(&last_of(&[
                signals::REMAP_FAILURE,
                signals::REMAPPED_UNCORRECTABLE,
            ])),
            "RMA the card",
        ));
    } else if last(signals::REMAP_PENDING).is_some_and(|v| v > 0.0)
        && !already(out, FindingCode::RowRemapPending)
    {
        out.push(finding(
            FindingCode::RowRemapPending,
            Severity::Major,
            Confidence::High,
            format!("a row remap is pending {LASTING}"),
            evidence(&last_of(&[
                signals::REMAP_PENDING,
                signals::REMAPPED_UNCORRECTABLE,
            ])),
            "reset the GPU to apply the remap, then retest",
        ));
    }
    if last(signals::RETIRED_PAGES_PENDING).is_some_and(|v| v > 0.0)
        && !already(out, FindingCode::RetiredPages)
    {
        out.push(finding(
            FindingCode::RetiredPages,
            Severity::Major,
            Confidence::High,
            format!(
                "a page retirement is pending ({} pages retired for double-bit errors) {LASTING}",
                last(signals::RETIRED_PAGES_DBE).unwrap_or(0.0)
            ),
            evidence(&last_of(&[
                signals::RETIRED_PAGES_PENDING,
                signals::RETIRED_PAGES_DBE,
            ])),
            "reset the GPU to apply the retirement, retest, and send this report",
        ));
    }
    if let Some(action) = last(signals::RECOVERY_ACTION).and_then(xid::recovery_action_of) {
        out.push(finding(
            FindingCode::RecoveryActionPending,
            Severity::Critical,
            Confidence::High,
            format!("the driver asks to {action} before the GPU is used again"),
            evidence(&last_of(&[signals::RECOVERY_ACTION])),
            &format!("{action}, then retest; the kernel log's Xids say why"),
        ));
    }
}

/// The memory's spares and modes as the last counters show them: banks running low on
/// spare rows (the warning before a remap failure), the on-chip SRAM past its threshold,
/// and an ECC mode change that waits for a reset.
fn spares_and_modes(device: &DeviceEvidence, out: &mut Vec<Finding>) {
    let last = |signal: Signal| last(device, signal);
    let last_of = |of: &[Signal]| last_of(device, of);
    // How close the memory is to a remap failure, by bank (NVIDIA's RMA criterion is a
    // bank that needs one more uncorrectable row than it has spares).
    let (low, none) = (
        last(signals::REMAP_BANKS_LOW).unwrap_or(0.0),
        last(signals::REMAP_BANKS_NONE).unwrap_or(0.0),
    );
    if (low > 0.0 || none > 0.0) && !already(out, FindingCode::RowRemapFailure) {
        let banks = |n: f64| crate::text::count(n as u64, "memory bank");
        let (severity, said) = if none > 0.0 {
            (
                Severity::Major,
                format!(
                    "{} with no spare row left and {} with only a few: the next uncorrectable error in one without fails row remapping",
                    banks(none),
                    banks(low)
                ),
            )
        } else {
            (
                Severity::Minor,
                format!(
                    "{} with only a few spare rows left: the warning before a remap failure",
                    banks(low)
                ),
            )
        };
        out.push(finding(
            FindingCode::RowRemapBanksLow,
            severity,
            Confidence::High,
            format!("{said} {LASTING}"),
            evidence(&Values(vec![
                (signals::REMAP_BANKS_MAX, last(signals::REMAP_BANKS_MAX)),
                (signals::REMAP_BANKS_HIGH, last(signals::REMAP_BANKS_HIGH)),
                (signals::REMAP_BANKS_PARTIAL, last(signals::REMAP_BANKS_PARTIAL)),
                (signals::REMAP_BANKS_LOW, Some(low)),
                (signals::REMAP_BANKS_NONE, Some(none)),
                (signals::REMAPPED_UNCORRECTABLE, last(signals::REMAPPED_UNCORRECTABLE)),
            ])),
            "plan the card's replacement: watch its uncorrectable remaps and rerun the rma profile; RMA when a remap fails",
        ));
    }
    if last(signals::SRAM_THRESHOLD_EXCEEDED).is_some_and(|v| v > 0.0) {
        out.push(finding(
            FindingCode::SramThresholdExceeded,
            Severity::Critical,
            Confidence::High,
            format!(
                "the driver flags the GPU's on-chip SRAM past its threshold of uncorrectable errors ({} parity, {} SEC-DED) {LASTING}",
                last(signals::SRAM_UNCORRECTED_PARITY).unwrap_or(0.0),
                last(signals::SRAM_UNCORRECTED_SECDED).unwrap_or(0.0)
            ),
            evidence(&Sourced {
                readings: last_of(&[
                    signals::SRAM_THRESHOLD_EXCEEDED,
                    signals::SRAM_UNCORRECTED_PARITY,
                    signals::SRAM_UNCORRECTED_SECDED,
                ]),
                source: "NVIDIA RMA policy: more than 4 unique uncorrectable errors in a parity-protected SRAM bank, or 2 in a SEC-DED one",
            }),
            "RMA candidate: run NVIDIA's field diagnostic and send this report",
        ));
    }
    let text = |key: Signal| device.setup.identity_of(key).and_then(Reading::text);
    if let (Some(now), Some(pending)) = (
        text(signals::ECC_ENABLED),
        text(signals::ECC_ENABLED_PENDING),
    ) && now != pending
    {
        out.push(finding(
            FindingCode::EccModePending,
            Severity::Major,
            Confidence::High,
            format!("an ECC mode change waits for a reset (ECC {now} now, {pending} after it): the card was tested in a mode it will not work in"),
            evidence(&Values(vec![
                (signals::ECC_ENABLED, now),
                (signals::ECC_ENABLED_PENDING, pending),
            ])),
            "reset the GPU to apply the ECC mode, then retest",
        ));
    }
}

/// The last value of `signal` the device's counters read.
fn last(device: &DeviceEvidence, signal: Signal) -> Option<f64> {
    device
        .telemetry
        .iter()
        .filter_map(|p| Some((p.end_ms, p.after(signal)?)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, value)| value)
}

/// The last value of each of some signals: the evidence of a standing state.
fn last_of(device: &DeviceEvidence, of: &[Signal]) -> Values<Option<f64>> {
    Values(of.iter().map(|s| (*s, last(device, *s))).collect())
}

/// Whether `out` holds a finding of `code` already (an event of the run gave it).
fn already(out: &[Finding], code: FindingCode) -> bool {
    out.iter().any(|f| f.code == code)
}

/// Said of every standing state: it holds whenever it was set.
const LASTING: &str = "(a lasting state of the card, whether set before or during the run)";

#[cfg(test)]
mod tests {
    use super::super::testing::{device, phase, said};
    use crate::finding::{Class, Severity};
    use crate::thresholds::Thresholds;

    fn corrected(count: f64, minutes: f64) -> Vec<(&'static str, Class, Severity)> {
        let d = device(vec![phase(
            "vram",
            serde_json::json!({"end_ms": minutes * 60_000.0,
                               "counter_deltas": {"ecc_corrected_volatile": count}}),
        )]);
        said(&super::judge(&d, &Thresholds::default()))
    }

    #[test]
    fn corrected_errors_climbing_under_load_are_the_memory_degrading() {
        let fault = [("ECC_CORRECTED_RATE_HIGH", Class::Hardware, Severity::Major)];
        assert_eq!(corrected(3000.0, 2.0), fault);
        // The near misses: under the budget a minute, or a burst in a short phase judged
        // as a whole minute.
        assert!(corrected(1900.0, 2.0).is_empty());
        assert!(corrected(900.0, 0.1).is_empty());
        assert!(corrected(0.0, 1.0).is_empty());
    }

    #[test]
    fn uncorrectable_errors_and_a_failed_remap_are_critical() {
        let d = device(vec![phase(
            "vram",
            serde_json::json!({"counter_deltas": {"ecc_uncorrected_volatile": 2.0, "remap_failure": 1.0}}),
        )]);
        assert_eq!(
            said(&super::judge(&d, &Thresholds::default())),
            [
                ("ECC_UNCORRECTABLE", Class::Hardware, Severity::Critical),
                ("ROW_REMAP_FAILURE", Class::Hardware, Severity::Critical)
            ]
        );
        // The standing state a failed remap leaves is the same finding, given once.
        let d = device(vec![phase(
            "vram",
            serde_json::json!({"counter_deltas": {"remap_failure": 1.0},
                               "counters_after": {"remap_failure": 1.0}}),
        )]);
        assert_eq!(said(&super::judge(&d, &Thresholds::default())).len(), 1);
    }
}
