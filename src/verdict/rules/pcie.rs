//! The PCIe link: its width and generation against what card and slot allow, replays
//! against a bit error rate, AER errors, and the probe's rates against the link.

use super::{CounterDeltas, during};
use crate::finding::{
    Confidence, Finding, FindingCode, GBps, PerMinute, Rows, Said, Severity, Share, Unit, Words,
    evidence, finding,
};
use crate::telemetry::signals::{self, Signal, Values};
use crate::telemetry::summary::{PhaseTelemetry, Stat};
use crate::thresholds::{Thresholds, pcie_reached};
use crate::verdict::DeviceEvidence;
use crate::workload::pcie::{LinkUnderLoad, PcieReport};

crate::evidence! {
    /// The evidence of `PCIE_BANDWIDTH_LOW`: the link, the peaks, and the shares they are
    /// held to.
    struct Bandwidth<'a> {
        link: Option<&'a LinkUnderLoad> => "Link",
        peak_h2d_gbps: GBps => "Best host-to-device rate",
        peak_d2h_gbps: GBps => "Best device-to-host rate",
        pcie_low_share: Share => "Low below this share of what healthy cards reach",
        reached_h2d_share: Share => "Host-to-device share of the link",
        reached_d2h_share: Share => "Device-to-host share of the link",
        source: &'static str => "Source",
    }
}

impl Said for LinkUnderLoad {
    fn say(&self, words: &str, unit: Unit, rows: &mut Rows) {
        rows.within(words, |rows| {
            Words::Said("Generation").say(&self.generation, unit, rows);
            Words::Said("Highest generation").say(&self.generation_max, unit, rows);
            Words::Said("Lanes").say(&self.width, unit, rows);
            Words::Said("Most lanes").say(&self.width_max, unit, rows);
            Words::Said("Link's theoretical rate").say(
                &self.theoretical_gbps.map(GBps),
                unit,
                rows,
            );
            let card_max = self.card_max.map(|(generation, width)| {
                [generation, width]
                    .into_iter()
                    .map(|v| v.map_or_else(|| "unknown".to_owned(), |v| v.to_string()))
                    .collect::<Vec<_>>()
                    .join(" x")
            });
            Words::Said("The card's own maximum (generation x lanes)").say(&card_max, unit, rows);
            Words::Said("Samples").say(&self.samples, unit, rows);
        });
    }
}

crate::evidence! {
    /// The evidence of the link's findings: which of its sides (`generation`, `width`),
    /// and the phase's readings of it, its card's maximum and its slot's.
    struct Link<'a> {
        what: &'static str => "What",
        phase: &'a str => "Phase",
        #[serde(flatten)]
        readings: Values<Option<&'a Stat>> => flat,
    }
}

crate::evidence! {
    /// The evidence of `PCIE_REPLAYS_HIGH`: the replays and the link they are judged on.
    struct Replays<'a> {
        phase: &'a str => "Phase",
        minutes: f64 => "Minutes",
        allowed_per_minute: PerMinute => "Allowed a minute",
        #[serde(flatten)]
        readings: Values<Option<f64>> => flat,
    }
}

/// The rule.
pub fn judge(device: &DeviceEvidence, t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut said = Vec::new();
    for p in &device.telemetry {
        link(p, &mut said, &mut out);
        replays(p, t, &mut out);
        aer(p, &mut out);
        port_errors(p, t, &mut out);
    }
    out
}

/// PCIe AER errors (fatal and non-fatal) a phase's counters grew by.
fn aer(p: &PhaseTelemetry, out: &mut Vec<Finding>) {
    if p.grew_or_0(signals::AER_FATAL) + p.grew_or_0(signals::AER_NONFATAL) > 0.0 {
        out.push(finding(
            FindingCode::PcieAerErrors,
            Severity::Major,
            Confidence::High,
            format!("PCIe AER errors {}", during(p)),
            evidence(&CounterDeltas {
                counter_deltas: crate::telemetry::said::ByName(&p.counter_deltas),
            }),
            "reseat the card, try another slot or riser",
        ));
    }
}

/// PCIe rates against what healthy cards reach on the link the transfers ran on.
pub(super) fn bandwidth(p: &PcieReport, t: &Thresholds, out: &mut Vec<Finding>) {
    // Rates against the link the transfers actually ran on, per direction, against what
    // healthy cards reach on it ([`PCIE_REACHED`]'s public measurements); a probe cut short measured too little,
    // and transfers that never left the device (no staging memory outside VRAM) measured
    // no bus at all.
    let Some((theory, generation)) = p
        .link
        .as_ref()
        .and_then(|l| l.theoretical_gbps.zip(l.generation))
    else {
        return;
    };
    if p.sizes.is_empty() || p.run.cut_short() || !p.staging_in_host_memory {
        return;
    }
    let (h2d, d2h, source) = pcie_reached(generation);
    let low: Vec<String> = [("H2D", p.peak_h2d_gbps, h2d), ("D2H", p.peak_d2h_gbps, d2h)]
        .into_iter()
        .filter(|(_, rate, reached)| *rate < t.pcie_low_share * reached * theory)
        .map(|(name, rate, reached)| {
            format!(
                "{name} {rate:.1} GB/s (floor {:.1})",
                t.pcie_low_share * reached * theory
            )
        })
        .collect();
    if !low.is_empty() {
        out.push(finding(
            FindingCode::PcieBandwidthLow,
            Severity::Major,
            Confidence::Medium,
            format!(
                "{} on a Gen{generation} link of {theory:.1} GB/s, below {:.0}% of what healthy cards reach on it",
                low.join(" and "),
                100.0 * t.pcie_low_share
            ),
            evidence(&Bandwidth {
                link: p.link.as_ref(),
                peak_h2d_gbps: GBps(p.peak_h2d_gbps),
                peak_d2h_gbps: GBps(p.peak_d2h_gbps),
                pcie_low_share: Share(t.pcie_low_share),
                reached_h2d_share: Share(h2d),
                reached_d2h_share: Share(d2h),
                source,
            }),
            "check the slot, riser, BIOS link settings and IOMMU; rerun the pcie workload alone",
        ));
    }
}

/// A link below its maximum: its width at any time (a GPU keeps its lanes at idle, so
/// fewer is a slot, riser or contact), its generation only while the GPU is busy (links
/// drop their generation at idle by design: nvidia-smi's "may be reduced when the GPU is not
/// in use"). Where sysfs gives the slot's
/// own maxima, the two are kept apart: a link at the slot's maximum but below the card's is
/// the slot limiting the card (`PCIE_SLOT_LIMITS`, a note), one below both is degraded. Once
/// per device and kind, from the first phase that shows it (`said` keeps what was given).
fn link(p: &PhaseTelemetry, said: &mut Vec<(FindingCode, &'static str)>, out: &mut Vec<Finding>) {
    let busy = p
        .gauge(signals::UTIL_GPU_PCT)
        .is_some_and(|u| u.median >= 50.0);
    let least = |s: Signal| p.gauge(s).map(|g| g.min);
    for (what, now, max, slot, judged) in [
        (
            "generation",
            signals::PCIE_GEN,
            signals::PCIE_GEN_MAX,
            signals::PCIE_SLOT_GEN_MAX,
            busy,
        ),
        (
            "width",
            signals::PCIE_WIDTH,
            signals::PCIE_WIDTH_MAX,
            signals::PCIE_SLOT_WIDTH_MAX,
            true,
        ),
    ] {
        let (Some(card), Some(highest)) = (least(max), p.gauge(now).map(|s| s.max)) else {
            continue;
        };
        // What the link can reach here: the lower of the card's and the slot's maxima.
        let slot_max = least(slot);
        let limit = slot_max.map_or(card, |s| s.min(card));
        let evidence = evidence(&Link {
            what,
            phase: &p.phase,
            readings: Values(
                [now, max, slot]
                    .into_iter()
                    .map(|s| (s, p.gauge(s)))
                    .collect(),
            ),
        });
        if let Some(s) = slot_max.filter(|s| *s < card)
            && !said.contains(&(FindingCode::PcieSlotLimits, what))
        {
            said.push((FindingCode::PcieSlotLimits, what));
            // A fact of where the card sits, not a fault: the link is judged against it.
            out.push(finding(
                FindingCode::PcieSlotLimits,
                Severity::Note,
                Confidence::High,
                format!("the slot allows PCIe {what} {s} of the card's {card}: the card runs below its own maximum by where it sits, not by itself"),
                evidence.clone(),
                "move the card to a slot (or riser) with its own PCIe generation and width where the host bandwidth matters",
            ));
        }
        if judged
            && highest >= card
            && let Some(s) = slot_max.filter(|s| *s > card)
            && !said.contains(&(FindingCode::PcieCardLimits, what))
        {
            said.push((FindingCode::PcieCardLimits, what));
            // The card's own maximum is all the link can reach, whatever the slot allows:
            // a healthy link, said so that the slot's higher figure never reads as a fault.
            out.push(finding(
                FindingCode::PcieCardLimits,
                Severity::Note,
                Confidence::High,
                format!("the link runs at PCIe {what} {highest}, the card's own maximum, in a slot that allows {s}: a healthy link, as fast as the card goes"),
                evidence.clone(),
                "nothing: the card is at its own maximum",
            ));
        }
        if !judged || said.contains(&(FindingCode::PcieLinkDegraded, what)) || highest >= limit {
            continue;
        }
        said.push((FindingCode::PcieLinkDegraded, what));
        let phase = if crate::telemetry::summary::is_health(&p.phase) {
            String::new()
        } else {
            format!(" in the {} phase", p.phase)
        };
        let when = if busy {
            format!("while the GPU was busy{phase}")
        } else {
            phase.trim_start().to_owned()
        };
        let of = match slot_max {
            Some(s) if s < card => format!("{limit} (the slot's; the card's {card})"),
            _ => format!("{limit}"),
        };
        out.push(finding(
            FindingCode::PcieLinkDegraded,
            Severity::Major,
            Confidence::High,
            format!("PCIe {what} {highest} of {of} {when}")
                .trim_end()
                .to_owned(),
            evidence,
            "check the slot, riser and BIOS link settings; reseat the card",
        ));
    }
}

crate::evidence! {
    /// The evidence of `PCIE_PORT_ERRORS`: the port's corrected errors, the GPU's own
    /// replays beside them, and the link they are judged on.
    struct PortErrors<'a> {
        phase: &'a str => "Phase",
        minutes: f64 => "Minutes",
        allowed_per_minute: PerMinute => "Allowed a minute",
        #[serde(flatten)]
        readings: Values<Option<f64>> => flat,
        source: &'static str => "Source",
    }
}

/// What a bit error rate of 1e-12 allows on the link a phase ran at, a minute, and the
/// minutes the phase is judged over (a phase shorter than a minute as a whole minute: a
/// handful of errors in a few seconds is not yet a rate); with the link's generation and
/// lanes.
fn ber_budget(p: &PhaseTelemetry, t: &Thresholds) -> Option<(f64, f64, f64, f64)> {
    let generation = p.gauge(signals::PCIE_GEN).map(|s| s.median)?;
    let lanes = p.gauge(signals::PCIE_WIDTH).map(|s| s.median)?;
    let gts = crate::workload::pcie::transfer_rate_gts(generation.round() as u32)?;
    if lanes <= 0.0 {
        return None;
    }
    let allowed_per_minute = (t.replays_per_gts_lane_minute * gts * lanes).ceil();
    let minutes = ((p.end_ms - p.start_ms) / 60_000.0).max(1.0);
    Some((allowed_per_minute, minutes, generation, lanes))
}

/// Corrected AER errors at the port above the GPU (its slot's root port, or a switch's
/// port) above what a bit error rate of 1e-12 allows on the link: the link errs at its far
/// end, which the GPU's own counters never see; with the GPU's replays flat beside them, the
/// slot, riser or cable between the two, not the card.
fn port_errors(p: &PhaseTelemetry, t: &Thresholds, out: &mut Vec<Finding>) {
    let port = p.grew_or_0(signals::AER_PORT_CORRECTABLE);
    let Some((allowed_per_minute, minutes, generation, lanes)) = ber_budget(p, t) else {
        return;
    };
    let per_minute = port / minutes;
    if port <= 0.0 || per_minute <= allowed_per_minute {
        return;
    }
    let replays = p.grew(signals::PCIE_REPLAYS);
    let gpu_side = match replays {
        Some(r) if r / minutes > allowed_per_minute => {
            format!(", the GPU's own replays high beside them ({r:.0})")
        }
        Some(r) => format!(
            ", the GPU's own replay counter flat beside them ({r:.0}): the link errs where the port sees it"
        ),
        None => String::new(),
    };
    out.push(finding(
        FindingCode::PciePortErrors,
        Severity::Major,
        Confidence::Medium,
        format!(
            "{port:.0} corrected PCIe errors at the port above the GPU in the {} phase ({per_minute:.0} per minute; a Gen{} x{} link at a bit error rate of 1e-12 allows {allowed_per_minute}){gpu_side}",
            p.phase,
            generation.round(),
            lanes.round()
        ),
        evidence(&PortErrors {
            phase: &p.phase,
            minutes,
            allowed_per_minute: PerMinute(allowed_per_minute),
            readings: Values(vec![
                (signals::AER_PORT_CORRECTABLE, Some(port)),
                (signals::PCIE_REPLAYS, replays),
                (signals::PCIE_GEN, Some(generation)),
                (signals::PCIE_WIDTH, Some(lanes)),
            ]),
            source: "PCI Express Base Specification: a link's bit error rate at most 1e-12; the port's count from the kernel's AER statistics (Documentation/PCI/pcieaer-howto.rst, sysfs aer_dev_correctable)",
        }),
        "the slot, riser or cable between the GPU and its port: reseat the card, try another slot or riser; the card is not shown at fault",
    ));
}

/// PCIe replays above what a bit error rate of 1e-12 allows on the link the phase ran at.
fn replays(p: &PhaseTelemetry, t: &Thresholds, out: &mut Vec<Finding>) {
    let replays = p.grew_or_0(signals::PCIE_REPLAYS);
    let Some((allowed_per_minute, minutes, generation, lanes)) = ber_budget(p, t) else {
        return;
    };
    if replays <= 0.0 {
        return;
    }
    let per_minute = replays / minutes;
    if per_minute > allowed_per_minute {
        out.push(finding(
            FindingCode::PcieReplaysHigh,
            Severity::Major,
            Confidence::Medium,
            format!(
                "{replays} PCIe replays in the {} phase ({per_minute:.0} per minute; a Gen{} x{} link at a bit error rate of 1e-12 allows {allowed_per_minute})",
                p.phase,
                generation.round(),
                lanes.round()
            ),
            evidence(&Replays {
                phase: &p.phase,
                minutes,
                allowed_per_minute: PerMinute(allowed_per_minute),
                readings: Values(vec![
                    (signals::PCIE_REPLAYS, Some(replays)),
                    (signals::PCIE_GEN, Some(generation)),
                    (signals::PCIE_WIDTH, Some(lanes)),
                ]),
            }),
            "signal integrity: reseat the card, try another slot or riser; RMA if it follows the card",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{device, gauge, phase, said};
    use crate::finding::{Class, Severity};
    use crate::thresholds::Thresholds;

    fn judged(fields: serde_json::Value) -> Vec<(&'static str, Class, Severity)> {
        let d = device(vec![phase("vram", fields)]);
        said(&super::judge(&d, &Thresholds::default()))
    }

    fn link(width: f64, generation: f64, busy: f64) -> serde_json::Value {
        serde_json::json!({"gauges": {
            "pcie_width": gauge(width, width, width), "pcie_width_max": gauge(16.0, 16.0, 16.0),
            "pcie_gen": gauge(generation, generation, generation),
            "pcie_gen_max": gauge(5.0, 5.0, 5.0), "util_gpu_pct": gauge(busy, busy, busy)}})
    }

    #[test]
    fn a_link_below_what_card_and_slot_allow_is_degraded() {
        let degraded = [("PCIE_LINK_DEGRADED", Class::Environment, Severity::Major)];
        // Fewer lanes at any time; a lower generation only while busy.
        assert_eq!(judged(link(8.0, 5.0, 0.0)), degraded);
        assert_eq!(judged(link(16.0, 3.0, 100.0)), degraded);
        // The near misses: a link that drops its generation at idle, and a full one.
        assert!(judged(link(16.0, 1.0, 0.0)).is_empty());
        assert!(judged(link(16.0, 5.0, 100.0)).is_empty());
        // A slot of eight lanes under a card of sixteen: where it sits, a note.
        let mut in_a_narrow_slot = link(8.0, 5.0, 100.0);
        in_a_narrow_slot["gauges"]["pcie_slot_width_max"] = gauge(8.0, 8.0, 8.0);
        assert_eq!(
            judged(in_a_narrow_slot),
            [("PCIE_SLOT_LIMITS", Class::Info, Severity::Note)]
        );
    }

    #[test]
    fn a_link_at_its_card_s_own_maximum_below_the_slot_s_is_healthy_and_said() {
        // A Gen3 card in a Gen4 slot, at Gen3 under load: the card's maximum, a note.
        let mut gen3_card = link(16.0, 3.0, 100.0);
        gen3_card["gauges"]["pcie_gen_max"] = gauge(3.0, 3.0, 3.0);
        gen3_card["gauges"]["pcie_slot_gen_max"] = gauge(4.0, 4.0, 4.0);
        assert_eq!(
            judged(gen3_card.clone()),
            [("PCIE_CARD_LIMITS", Class::Info, Severity::Note)]
        );
        // The near miss: the same card trained to Gen2 under load is degraded.
        gen3_card["gauges"]["pcie_gen"] = gauge(2.0, 2.0, 2.0);
        assert_eq!(
            judged(gen3_card),
            [("PCIE_LINK_DEGRADED", Class::Environment, Severity::Major)]
        );
    }

    #[test]
    fn replays_are_judged_against_what_a_bit_error_rate_of_1e_12_allows() {
        // Gen5 x16 for a minute allows ceil(1e-12 x 32 GT/s x 16 lanes x 60 s x 1e9) = 31.
        let with = |replays: f64| {
            let mut fields = link(16.0, 5.0, 100.0);
            fields["counter_deltas"] = serde_json::json!({"pcie_replays": replays});
            judged(fields)
        };
        assert_eq!(
            with(32.0),
            [("PCIE_REPLAYS_HIGH", Class::Environment, Severity::Major)]
        );
        assert!(with(31.0).is_empty());
    }

    #[test]
    fn corrected_errors_at_the_port_above_the_gpu_are_the_slot_s() {
        // Gen5 x16 for a minute allows 31; the port's count is judged on the same budget.
        let with = |port: f64, replays: f64| {
            let mut fields = link(16.0, 5.0, 100.0);
            fields["counter_deltas"] =
                serde_json::json!({"aer_port_correctable": port, "pcie_replays": replays});
            judged(fields)
        };
        let slot = [("PCIE_PORT_ERRORS", Class::Environment, Severity::Major)];
        // A storm at the port, the GPU's replays flat: the slot, riser or cable.
        assert_eq!(with(4800.0, 0.0), slot);
        // The near miss: a trickle within the bit error rate's budget.
        assert!(with(20.0, 0.0).is_empty());
    }
}
