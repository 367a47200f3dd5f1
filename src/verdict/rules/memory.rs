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

/// The next step for a row remap pending, and for the uncorrectable errors it handles
/// (NVIDIA's row-remapping guidance: the remap applies at the next attach).
pub const RESET_AND_RETEST: &str = "reset the GPU (or reboot the node) so the pending row remap takes effect, then retest with `kiln run --profile rma`; RMA only if the remap fails (ROW_REMAP_FAILURE, Xid 64) or uncorrectable errors come back";

/// The next step for a page retirement pending (NVIDIA's page retirement document: the
/// page is retired at the next attach).
pub const RETIREMENT_RESET: &str = "reset the GPU (or reboot the node) so the pending page retirement takes effect, then retest with `kiln run --profile rma`; RMA only past DCGM's limit of retired pages, or if uncorrectable errors come back";

/// The next step for a row remap that failed: NVIDIA's criterion for a return.
pub const REMAP_FAILED: &str = "RMA the card: its memory has no spare row left for a failing one, NVIDIA's criterion for a return";

/// The rule: what each phase's counters grew by, then the states the last counters show
/// (a state an event of the run already gave is not given again), then the card's retired
/// pages over its life against the vendor's limits.
pub fn judge(device: &DeviceEvidence, t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    for p in &device.telemetry {
        counters(p, &mut out);
    }
    corrected_rate(device, t, &mut out);
    standing(device, &mut out);
    spares_and_modes(device, &mut out);
    retired_over_life(device, t, &mut out);
    remapped_over_life(device, &mut out);
    out
}

/// The rows the frame buffer can remap over a card's life (NVIDIA's "Row Remapping"
/// document: up to 512 remappings).
const REMAPPABLE_ROWS: f64 = 512.0;

/// The card's remapped rows over its life, said in a note whether or not the run remapped
/// any: an old count is the card's history, never silent. A failed or pending remap, or
/// banks running out of spares, are findings of their own that hold the count (the
/// resolution table keeps it from being said twice).
fn remapped_over_life(device: &DeviceEvidence, out: &mut Vec<Finding>) {
    if device.setup.vendor_id != NVIDIA_VENDOR_ID {
        return;
    }
    let uncorrectable = last(device, signals::REMAPPED_UNCORRECTABLE).unwrap_or(0.0);
    let correctable = last(device, signals::REMAPPED_CORRECTABLE).unwrap_or(0.0);
    let total = uncorrectable + correctable;
    if total <= 0.0 {
        return;
    }
    let during_run: f64 = device
        .telemetry
        .iter()
        .map(|p| {
            p.grew_or_0(signals::REMAPPED_UNCORRECTABLE)
                + p.grew_or_0(signals::REMAPPED_CORRECTABLE)
        })
        .sum();
    out.push(finding(
        FindingCode::RowRemapHistory,
        Severity::Note,
        Confidence::High,
        format!(
            "{} remapped over the card's life ({uncorrectable} for uncorrectable and {correctable} for correctable errors, {}), of the {REMAPPABLE_ROWS} the memory can remap, with no remap failed or pending",
            // A counter read as a float holds a whole count.
            crate::text::count(total as u64, "row"),
            if during_run > 0.0 {
                format!("{during_run} of them {}", judged_over(device))
            } else {
                format!("none of them {}", judged_over(device))
            }
        ),
        evidence(&Sourced {
            readings: last_of(
                device,
                &[
                    signals::REMAPPED_UNCORRECTABLE,
                    signals::REMAPPED_CORRECTABLE,
                    signals::REMAP_PENDING,
                    signals::REMAP_FAILURE,
                ],
            ),
            source: "NVIDIA's Row Remapping document: up to 512 remappings; a failed remap is the RMA criterion",
        }),
        "nothing to do now: keep the count in the card's record; a failed remap is the RMA criterion",
    ));
}

crate::evidence! {
    /// The evidence of a card's retired pages over its life.
    struct RetiredOverLife {
        /// The counts at the run's end, under the counters' names.
        #[serde(flatten)]
        at_end: Values<Option<f64>> => flat,
        retired_before_run: f64 => "Retired before the run",
        retired_during_run: f64 => "Retired during the run",
        limit: f64 => "Limit (single- and double-bit together)",
        dbe_soft_limit: f64 => "Soft limit (double-bit)",
        source: &'static str => "Source",
    }
}

/// NVIDIA's PCI vendor id: DCGM's retirement limits are NVIDIA's (amdgpu's reserved bad
/// pages are held to a threshold of their own).
const NVIDIA_VENDOR_ID: u32 = 0x10de;

/// Pages page retirement's table holds: once full, no further page can be retired
/// (NVIDIA's "Row Remapping" document: a maximum of 64 retirements).
const RETIREMENT_TABLE_PAGES: f64 = 64.0;

/// The card's retired pages over its life, judged against DCGM's limits whether or not
/// the run retired any: its history is evidence. At or past `retired_pages_limit` (single-
/// and double-bit together), or past `retired_pages_dbe_soft_limit` double-bit pages and
/// retiring more than one more (DCGM fails more than one a week; a run is shorter), the
/// card fails as an RMA candidate. Under them, the count is said in a note and never fails.
fn retired_over_life(device: &DeviceEvidence, t: &Thresholds, out: &mut Vec<Finding>) {
    if device.setup.vendor_id != NVIDIA_VENDOR_ID {
        return;
    }
    let (Some(sbe), Some(dbe)) = (
        last(device, signals::RETIRED_PAGES_SBE),
        last(device, signals::RETIRED_PAGES_DBE),
    ) else {
        return;
    };
    let total = sbe + dbe;
    if total <= 0.0 {
        return;
    }
    let grew = |s: Signal| -> f64 { device.telemetry.iter().map(|p| p.grew_or_0(s)).sum() };
    let dbe_during_run = grew(signals::RETIRED_PAGES_DBE);
    let during_run = grew(signals::RETIRED_PAGES_SBE) + dbe_during_run;
    let pages = format!(
        "{} retired over the card's life ({sbe} for single-bit and {dbe} for double-bit errors, {})",
        crate::text::count(total as u64, "page"),
        if during_run > 0.0 {
            format!("{during_run} of them {}", judged_over(device))
        } else {
            format!("none of them {}", judged_over(device))
        }
    );
    let past_limit = total >= t.retired_pages_limit;
    let still_retiring = dbe > t.retired_pages_dbe_soft_limit && dbe_during_run > 1.0;
    let pending = last(device, signals::RETIRED_PAGES_PENDING).is_some_and(|v| v > 0.0);
    let said = if past_limit {
        format!(
            "{pages}: at or past DCGM's limit of {}, an RMA criterion whether or not this run retired any{}{}",
            t.retired_pages_limit,
            if total >= RETIREMENT_TABLE_PAGES {
                ", and the retirement table is full: no further bad page can be retired"
            } else {
                ""
            },
            if pending {
                "; a retirement is pending"
            } else {
                ""
            }
        )
    } else if still_retiring {
        format!(
            "{pages}: past DCGM's soft limit of {} double-bit pages and still retiring them, an RMA criterion{}",
            t.retired_pages_dbe_soft_limit,
            if pending {
                "; a retirement is pending"
            } else {
                ""
            }
        )
    } else {
        format!(
            "{pages}, under DCGM's limit of {}{}",
            t.retired_pages_limit,
            if dbe > t.retired_pages_dbe_soft_limit {
                format!(
                    " (past its soft limit of {} double-bit pages: more than one more in a week fails the card)",
                    t.retired_pages_dbe_soft_limit
                )
            } else {
                String::new()
            }
        )
    };
    let fails = past_limit || still_retiring;
    out.push(finding(
        if fails {
            FindingCode::RetiredPagesLimit
        } else {
            FindingCode::RetiredPagesHistory
        },
        if fails {
            Severity::Critical
        } else {
            Severity::Note
        },
        Confidence::High,
        said,
        evidence(&RetiredOverLife {
            at_end: last_of(
                device,
                &[
                    signals::RETIRED_PAGES_SBE,
                    signals::RETIRED_PAGES_DBE,
                    signals::RETIRED_PAGES_PENDING,
                ],
            ),
            retired_before_run: total - during_run,
            retired_during_run: during_run,
            limit: t.retired_pages_limit,
            dbe_soft_limit: t.retired_pages_dbe_soft_limit,
            source: "DCGM's health check (DCGM_LIMIT_MAX_RETIRED_PAGES, DCGM_LIMIT_MAX_RETIRED_PAGES_SOFT_LIMIT); NVIDIA's Dynamic Page Retirement document",
        }),
        if fails {
            "RMA the card: its retired pages meet NVIDIA's replacement criterion; send this report"
        } else {
            "nothing to do now: keep the count in the card's record and watch it grow"
        },
    ));
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
            RETIREMENT_RESET,
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
            format!(
                "{} {}",
                crate::text::count(ecc as u64, "uncorrectable ECC error"),
                during(p)
            ),
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
            REMAP_FAILED,
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
            RESET_AND_RETEST,
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
            "RMA the card: it could not retire a failing page, NVIDIA's criterion for a return",
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
            REMAP_FAILED,
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
            RESET_AND_RETEST,
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
            RETIREMENT_RESET,
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
    let flagged = last(signals::SRAM_THRESHOLD_EXCEEDED).is_some_and(|v| v > 0.0);
    let (parity, secded) = (
        last(signals::SRAM_UNCORRECTED_PARITY).unwrap_or(0.0),
        last(signals::SRAM_UNCORRECTED_SECDED).unwrap_or(0.0),
    );
    if !flagged && parity + secded > 0.0 {
        // Under the driver's threshold the count is the card's history: said, so that
        // an old count is never silent, and never a failure.
        out.push(finding(
            FindingCode::SramHistory,
            Severity::Note,
            Confidence::High,
            format!(
                "{} uncorrectable errors in the GPU's on-chip SRAM over the card's life ({parity} parity, {secded} SEC-DED), the driver's threshold flag not set",
                parity + secded
            ),
            evidence(&Sourced {
                readings: last_of(&[
                    signals::SRAM_THRESHOLD_EXCEEDED,
                    signals::SRAM_UNCORRECTED_PARITY,
                    signals::SRAM_UNCORRECTED_SECDED,
                ]),
                source: "NVML's SRAM ECC error status: the driver flags a bank past 4 unique uncorrectable errors (parity) or 2 (SEC-DED)",
            }),
            "nothing to do now: keep the count in the card's record; the driver's threshold flag is the RMA criterion",
        ));
    }
    if flagged {
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

/// What the counters' growth was read over, in words: `during this run`, or `since the
/// last check` for `kiln health`'s one phase.
fn judged_over(device: &DeviceEvidence) -> &'static str {
    use crate::telemetry::summary::{HEALTH_SINCE_BOOT, is_health};
    if device
        .telemetry
        .iter()
        .all(|p| p.phase == HEALTH_SINCE_BOOT)
    {
        // A first check reads the counts since the driver loaded.
        "since the driver loaded"
    } else if device.telemetry.iter().all(|p| is_health(&p.phase)) {
        "since the last check"
    } else {
        "during this run"
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

    /// What the rule says of a card whose retired pages end the run at `sbe` and `dbe`,
    /// `dbe_grew` of the double-bit ones retired during it.
    fn retired(sbe: f64, dbe: f64, dbe_grew: f64) -> Vec<crate::finding::Finding> {
        let d = device(vec![phase(
            "vram",
            serde_json::json!({"counter_deltas": {"retired_pages_sbe": 0.0, "retired_pages_dbe": dbe_grew},
                               "counters_after": {"retired_pages_sbe": sbe, "retired_pages_dbe": dbe,
                                                  "retired_pages_pending": 0.0}}),
        )]);
        super::judge(&d, &Thresholds::default())
            .into_iter()
            .filter(|f| f.code.name().starts_with("RETIRED_PAGES_"))
            .collect()
    }

    #[test]
    fn a_card_s_retired_pages_are_judged_against_dcgm_s_limits_whatever_the_run_retired() {
        let fails = [("RETIRED_PAGES_LIMIT", Class::Hardware, Severity::Critical)];
        let noted = [("RETIRED_PAGES_HISTORY", Class::Info, Severity::Note)];
        // Past the limit on a clean run, and at it exactly.
        assert_eq!(said(&retired(48.0, 20.0, 0.0)), fails);
        assert_eq!(said(&retired(50.0, 13.0, 0.0)), fails);
        // One under it: the count said, never a failure.
        let under = retired(50.0, 12.0, 0.0);
        assert_eq!(said(&under), noted);
        assert!(
            under[0].summary.starts_with(
                "62 pages retired over the card's life (50 for single-bit and 12 for double-bit errors, none of them during this run), under DCGM's limit of 63"
            ),
            "{}",
            under[0].summary
        );
        // Past the soft limit of double-bit pages: failing only while still retiring them.
        assert_eq!(said(&retired(0.0, 18.0, 2.0)), fails);
        assert_eq!(said(&retired(0.0, 18.0, 1.0)), noted);
        assert_eq!(said(&retired(0.0, 15.0, 2.0)), noted);
        // A card that never retired a page, or one that does not count them.
        assert!(retired(0.0, 0.0, 0.0).is_empty());
        let d = device(vec![phase("vram", serde_json::json!({}))]);
        assert!(super::judge(&d, &Thresholds::default()).is_empty());
    }

    #[test]
    fn sram_errors_under_the_driver_s_threshold_are_said_and_past_it_fail() {
        let sram = |flag: f64| {
            let d = device(vec![phase(
                "vram",
                serde_json::json!({"counters_after": {"sram_uncorrected_parity": 2.0,
                    "sram_uncorrected_secded": 0.0, "sram_threshold_exceeded": flag}}),
            )]);
            said(&super::judge(&d, &Thresholds::default()))
        };
        assert_eq!(sram(0.0), [("SRAM_HISTORY", Class::Info, Severity::Note)]);
        assert_eq!(
            sram(1.0),
            [(
                "SRAM_THRESHOLD_EXCEEDED",
                Class::Hardware,
                Severity::Critical
            )]
        );
    }

    #[test]
    fn a_card_s_remapped_rows_are_said_whatever_the_run_remapped() {
        let remapped = |after: serde_json::Value| {
            let d = device(vec![phase(
                "vram",
                serde_json::json!({"counter_deltas": {"remapped_uncorrectable": 0.0},
                                   "counters_after": after}),
            )]);
            super::judge(&d, &Thresholds::default())
        };
        let said_now = remapped(serde_json::json!({"remapped_uncorrectable": 3.0,
            "remapped_correctable": 2.0, "remap_pending": 0.0, "remap_failure": 0.0}));
        assert_eq!(
            said(&said_now),
            [("ROW_REMAP_HISTORY", Class::Info, Severity::Note)]
        );
        assert!(
            said_now[0].summary.starts_with(
                "5 rows remapped over the card's life (3 for uncorrectable and 2 for correctable errors, none of them during this run)"
            ),
            "{}",
            said_now[0].summary
        );
        // `kiln health` reads the counters since its last check, and says so.
        let d = device(vec![phase(
            "health",
            serde_json::json!({"counters_after": {"remapped_uncorrectable": 1.0}}),
        )]);
        assert!(
            super::judge(&d, &Thresholds::default())[0]
                .summary
                .contains("none of them since the last check")
        );
        // The near miss: a first check (no state file kept a last one) never says "since
        // the last check".
        let d = device(vec![phase(
            crate::telemetry::summary::HEALTH_SINCE_BOOT,
            serde_json::json!({"counters_after": {"remapped_uncorrectable": 1.0}}),
        )]);
        let said = &super::judge(&d, &Thresholds::default())[0].summary;
        assert!(
            said.contains("none of them since the driver loaded") && !said.contains("last check"),
            "{said}"
        );
        // No row remapped: nothing to say.
        assert!(
            remapped(
                serde_json::json!({"remapped_uncorrectable": 0.0, "remapped_correctable": 0.0})
            )
            .is_empty()
        );
    }
}
