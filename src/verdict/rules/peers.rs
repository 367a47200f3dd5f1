//! Devices of one model in one run, each against its peers.

use super::rates::median;
use crate::finding::{
    Confidence, Finding, FindingCode, InUnit, RateName, Severity, Share, Titled, Unit, evidence,
    finding,
};
use crate::thresholds::Thresholds;
use crate::verdict::evidence::DeviceEvidence;

/// The rates a device can be compared with its peers on: VRAM streaming (GiB/s), fp32
/// compute (G ops/s) and PCIe each way (GB/s), from workloads that ran to their end.
pub fn rates(workloads: &[crate::workload::WorkloadOutcome]) -> Vec<(&'static str, f64)> {
    let mut out = Vec::new();
    let finished = |w: &&crate::workload::WorkloadOutcome| {
        matches!(
            w.status,
            crate::workload::WorkloadStatus::Passed | crate::workload::WorkloadStatus::Failed
        ) && w.together_with().is_none()
    };
    for w in workloads.iter().filter(finished) {
        out.extend(w.summary.rates());
    }
    out.retain(|(_, v)| v.is_finite() && *v > 0.0);
    out
}

crate::evidence! {
    /// A rate of a device behind the median of its peers.
    struct Slow<'a> {
        rate: RateName<'a> => "Rate",
        /// The unit of `value` and `peer_median`: the one the rate's name ends with.
        #[serde(skip_serializing_if = "Option::is_none")]
        unit: Option<&'static str> => hidden,
        value: InUnit<f64> => "Value",
        peer_median: InUnit<f64> => "Peers' median",
        share_below: Share => "Below the peers' median",
        /// The clock the rate ran at (the memory clock for VRAM, the SM clock for the
        /// rest), its median over the workload's phase, where telemetry read it.
        #[serde(skip_serializing_if = "Option::is_none")]
        clock_mhz: Option<f64> => "Its clock (MHz)",
        /// The peers' median of the same clock.
        #[serde(skip_serializing_if = "Option::is_none")]
        peer_clock_mhz: Option<f64> => "The peers' clock (MHz)",
    }
}

/// The clock a rate runs at, its median over the phase of the workload that measured it:
/// the memory clock for VRAM streaming, the SM clock for the rest.
fn clock_of(d: &DeviceEvidence, rate: &str) -> Option<f64> {
    use crate::telemetry::signals::{CLOCK_MEM_MHZ, CLOCK_SM_MHZ};
    let r = crate::product::Rate::from_name(rate)?;
    let signal = if r == crate::product::Rate::Vram {
        CLOCK_MEM_MHZ
    } else {
        CLOCK_SM_MHZ
    };
    d.telemetry
        .iter()
        .filter(|p| p.phase == r.workload())
        .find_map(|p| p.gauge(signal).map(|s| s.median))
        .filter(|c| *c > 0.0)
}

crate::evidence! {
    /// The evidence of `PEER_SLOWER`: its rates behind, and its peers by index.
    struct Behind<'a> {
        slow: &'a [Titled<Slow<'a>>] => "Slower than its peers",
        peers: Vec<usize> => "Peers",
    }
}

/// Devices of the same model in one run, each against the median of the others: one
/// `peer_slow_share` below them in VRAM or compute rate is slower than its model should be: the
/// card, unless its own environment findings (heat, power, the slot) explain it
/// ([`crate::verdict::resolve`]).
/// CPU devices share the host's cores, so they are never compared.
pub fn peers(devices: &[DeviceEvidence], t: &Thresholds) -> Vec<Vec<Finding>> {
    // PCIe rates depend on where a GPU sits (its socket, its switch), not only on the
    // card: they are judged against the link's theory instead.
    let all: Vec<Vec<(&str, f64)>> = devices
        .iter()
        .map(|d| {
            let mut r = rates(&d.workloads);
            r.retain(|(name, _)| !name.starts_with("pcie_"));
            r
        })
        .collect();
    devices
        .iter()
        .enumerate()
        .map(|(i, d)| {
            if !d.kind.is_gpu() {
                return Vec::new();
            }
            let peers: Vec<usize> = (0..devices.len())
                .filter(|&j| j != i && devices[j].name == d.name && devices[j].kind.is_gpu())
                .collect();
            let slow: Vec<Titled<Slow>> = all[i]
                .iter()
                .filter_map(|(name, value)| {
                    let others: Vec<f64> = peers
                        .iter()
                        .filter_map(|&j| all[j].iter().find(|(n, _)| n == name).map(|(_, v)| *v))
                        .collect();
                    let m = median(others)?;
                    let unit = crate::units::rate_unit(name).map(|(_, unit, _, _)| unit);
                    let in_unit = |v: f64| InUnit(v, unit.map_or(Unit::None, Unit::Named));
                    let clock_mhz = clock_of(d, name);
                    let peer_clock_mhz =
                        median(peers.iter().filter_map(|&j| clock_of(&devices[j], name)).collect());
                    (*value < (1.0 - t.peer_slow_share) * m).then(|| Titled {
                        title: crate::units::rate_words(name),
                        record: Slow {
                            rate: RateName(name),
                            unit,
                            value: in_unit(*value),
                            peer_median: in_unit(m),
                            share_below: Share(1.0 - value / m),
                            clock_mhz,
                            peer_clock_mhz,
                        },
                    })
                })
                .collect();
            if slow.is_empty() {
                return Vec::new();
            }
            let what = slow
                .iter()
                .map(|s| {
                    let s = &s.record;
                    format!("{} {:.0}% below", s.rate.0, 100.0 * s.share_below.0)
                })
                .collect::<Vec<_>>()
                .join(", ");
            // Not at the same clocks: a rate that, per clock, is within the share peers
            // may differ by is the clocks' doing (whatever held them: heat, power, a
            // setting), not the card's work per clock.
            let held = slow.iter().all(|s| {
                let s = &s.record;
                s.clock_mhz.zip(s.peer_clock_mhz).is_some_and(|(c, pc)| {
                    s.value.0 / c >= (1.0 - t.peer_slow_share) * s.peer_median.0 / pc
                })
            });
            if held {
                let clocks = slow
                    .iter()
                    .filter_map(|s| s.record.clock_mhz.zip(s.record.peer_clock_mhz))
                    .map(|(c, pc)| format!("{c:.0} MHz against their {pc:.0}"))
                    .next()
                    .unwrap_or_default();
                let mut f = finding(
                    FindingCode::PeerSlower,
                    Severity::Major,
                    Confidence::Medium,
                    format!(
                        "slower than the {} other {} in this run ({what}), at lower clocks ({clocks}): what held its clocks, not its work per clock",
                        peers.len(),
                        d.name
                    ),
                    evidence(&Behind {
                        slow: &slow,
                        peers: peers.iter().map(|&j| devices[j].index).collect(),
                    }),
                    "find what held its clocks below its peers' (heat, power, a clock or power setting: nvidia-smi -q -d PERFORMANCE), then compare again",
                );
                f.class = crate::finding::Class::Environment;
                return vec![f];
            }
            // Whether its own environment explains it is resolved with its other findings
            // (crate::verdict::resolve).
            let slower = finding(
                FindingCode::PeerSlower,
                Severity::Major,
                Confidence::Medium,
                format!(
                    "slower than the {} other {} in this run ({what})",
                    peers.len(),
                    d.name
                ),
                evidence(&Behind {
                    slow: &slow,
                    peers: peers.iter().map(|&j| devices[j].index).collect(),
                }),
                "rerun it alone and cool; RMA if it stays behind its peers",
            );
            vec![slower]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::testing::{computed_at, said};
    use crate::finding::{Class, Severity};
    use crate::thresholds::Thresholds;

    #[test]
    fn a_device_behind_its_peers_of_one_model_is_named() {
        let node = |slow: f64| {
            let mut devices: Vec<_> = [50_000.0, 50_400.0, 49_800.0, slow]
                .into_iter()
                .map(computed_at)
                .collect();
            for (i, d) in devices.iter_mut().enumerate() {
                d.index = i;
            }
            super::peers(&devices, &Thresholds::default())
        };
        let judged = node(40_000.0);
        assert!(judged[..3].iter().all(Vec::is_empty), "{judged:?}");
        assert_eq!(
            said(&judged[3]),
            [("PEER_SLOWER", Class::Hardware, Severity::Major)]
        );
        // The near miss: 6% behind, within the 10% a model's cards spread over.
        assert!(node(47_000.0).iter().all(Vec::is_empty));
    }

    #[test]
    fn only_a_device_behind_its_peers_at_the_same_clocks_is_the_card() {
        use super::super::testing::{gauge, phase};
        let node = |slow_mhz: f64| {
            let mut devices: Vec<_> =
                [(40_000.0, slow_mhz), (50_000.0, 1980.0), (50_200.0, 1980.0)]
                    .into_iter()
                    .map(|(gops, mhz)| {
                        let mut d = computed_at(gops);
                        d.telemetry = vec![phase(
                            "compute",
                            serde_json::json!({"gauges": {"clock_sm_mhz": gauge(mhz, mhz, mhz)}}),
                        )];
                        d
                    })
                    .collect();
            for (i, d) in devices.iter_mut().enumerate() {
                d.index = i;
            }
            super::peers(&devices, &Thresholds::default())
        };
        // 20% behind at the same clocks: the card.
        assert_eq!(
            said(&node(1980.0)[0]),
            [("PEER_SLOWER", Class::Hardware, Severity::Major)]
        );
        // The near miss: 20% behind at clocks 19% below its peers': the clocks.
        assert_eq!(
            said(&node(1600.0)[0]),
            [("PEER_SLOWER", Class::Environment, Severity::Major)]
        );
    }
}
