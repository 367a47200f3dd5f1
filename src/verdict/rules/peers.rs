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
    }
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
                    (*value < (1.0 - t.peer_slow_share) * m).then(|| Titled {
                        title: crate::units::rate_words(name),
                        record: Slow {
                            rate: RateName(name),
                            unit,
                            value: in_unit(*value),
                            peer_median: in_unit(m),
                            share_below: Share(1.0 - value / m),
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
}
