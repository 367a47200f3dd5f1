//! NVLink: each link of the GPU over the run, one finding per bad link.

use std::collections::BTreeMap;

use crate::finding::{
    Confidence, Finding, FindingCode, PerSecond, Rows, Said, Severity, Unit, evidence, finding,
};
use crate::telemetry::signals::{Name, NvlinkPart};
use crate::thresholds::Thresholds;
use crate::verdict::DeviceEvidence;

/// The rule.
pub fn judge(device: &DeviceEvidence, _t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    nvlinks(device, &mut out);
    out
}

/// Corrected errors per second on an NVLink from which they matter (DCGM's health watch:
/// "CRC errors only matter at rates of 100+ per second"). A CRC error at one end and the
/// replay of the same flit at the other are one fault seen twice (NVML counts the CRC errors a link
/// received and the replays it sent), so a
/// link's CRC errors and replays are counted together against it.
const NVLINK_CORRECTED_PER_S: f64 = 100.0;

crate::evidence! {
    /// The evidence of `NVLINK_DOWN`: the link, and the phases it went down in or how many
    /// of the GPU's links are up beside it.
    struct LinkDown<'a> {
        link: u32 => "Link",
        #[serde(skip_serializing_if = "Option::is_none")]
        links_up: Option<usize> => "Links up",
        #[serde(skip_serializing_if = "Option::is_none")]
        phases: Option<&'a [String]> => "Phases",
    }
}

/// A link's error counts by the counter (`replay`, `crc_flit`), said by what each counts.
struct PartCounts<'a>(&'a BTreeMap<&'static str, f64>);

impl serde::Serialize for PartCounts<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl Said for PartCounts<'_> {
    fn say(&self, words: &str, unit: Unit, rows: &mut Rows) {
        rows.within(words, |rows| {
            for (name, count) in self.0 {
                let part = NvlinkPart::COUNTERS.into_iter().find(|p| p.name() == *name);
                count.say(part.map_or(*name, NvlinkPart::words), unit, rows);
            }
        });
    }
}

crate::evidence! {
    /// The evidence of `NVLINK_ERRORS`.
    struct LinkErrors<'a> {
        link: u32 => "Link",
        /// Each kind of error (`replay`, `recovery`, `crc_flit`, `crc_data`) and its count.
        counts: PartCounts<'a> => "Counts",
        corrected_per_s: PerSecond => "Corrected a second",
        budget_per_s: PerSecond => "Allowed a second",
        phases: &'a [String] => "Phases",
        source: &'static str => "Source",
    }
}

/// Every NVLink of the device over the run, one finding per bad link: one that went down
/// during a phase (`NVLINK_DOWN`), or one down while others of the GPU are up (a note of
/// weight only where the run saw it go: a PCIe card's bridges may leave links unused); and
/// its errors (`NVLINK_ERRORS`): a recovery (the link retrained) is a failure; CRC errors
/// and replays, corrected errors of one fault seen at either end, are one at 100 a second
/// or more together and a note below. A GPU whose links are all down (MIG, no bridge) says
/// nothing here.
fn nvlinks(device: &DeviceEvidence, out: &mut Vec<Finding>) {
    let (links, last_state) = read_links(device);
    let up = last_state.values().filter(|v| **v > 0.0).count();
    for (l, state) in &last_state {
        if *state <= 0.0 && up > 0 && links.get(l).is_none_or(|k| k.went_down.is_empty()) {
            out.push(finding(
                FindingCode::NvlinkDown,
                Severity::Minor,
                Confidence::Medium,
                format!("NVLink {l} is down while {up} of the GPU's links are up"),
                evidence(&LinkDown {
                    link: *l,
                    links_up: Some(up),
                    phases: None,
                }),
                "on a board whose links should all be up (SXM, a full set of bridges): reseat the card or bridge and check the NVLink topology (nvidia-smi nvlink -s)",
            ));
        }
    }
    for (l, link) in links {
        if !link.went_down.is_empty() {
            out.push(finding(
                FindingCode::NvlinkDown,
                Severity::Major,
                Confidence::High,
                format!(
                    "NVLink {l} went down during the {} {}",
                    crate::text::list(&link.went_down),
                    if link.went_down.len() == 1 { "phase" } else { "phases" }
                ),
                evidence(&LinkDown {
                    link: l,
                    links_up: None,
                    phases: Some(&link.went_down),
                }),
                "check the NVLink bridge or baseboard, reseat, and reset the GPU; RMA if it follows the card",
            ));
        }
        if !link.counts.is_empty() {
            out.push(link_errors(l, &link));
        }
    }
}

/// What a link did over the run.
#[derive(Default)]
struct Link {
    /// The phases it went down in.
    went_down: Vec<String>,
    /// Its error counters' growth, by the counter.
    counts: BTreeMap<&'static str, f64>,
    /// Its corrected errors (CRC and replays) per second, at most over the phases.
    crc_per_s: f64,
    /// The phases its errors grew in.
    phases: Vec<String>,
}

/// Every link's doings over the run, and each link's last state (up or down).
fn read_links(device: &DeviceEvidence) -> (BTreeMap<u32, Link>, BTreeMap<u32, f64>) {
    let mut links: BTreeMap<u32, Link> = BTreeMap::new();
    let mut last_state: BTreeMap<u32, f64> = BTreeMap::new();
    for p in &device.telemetry {
        let seconds = (p.end_ms - p.start_ms) / 1e3;
        let mut crc: BTreeMap<u32, f64> = BTreeMap::new();
        for (name, value) in p.growth() {
            let Name::Nvlink { link: l, part } = name else {
                continue;
            };
            if part == NvlinkPart::State {
                if value < 0.0 {
                    links.entry(l).or_default().went_down.push(p.phase.clone());
                }
                continue;
            }
            if value > 0.0 {
                let link = links.entry(l).or_default();
                *link.counts.entry(part.name()).or_default() += value;
                if !link.phases.contains(&p.phase) {
                    link.phases.push(p.phase.clone());
                }
                if part.corrected() {
                    *crc.entry(l).or_default() += value;
                }
            }
        }
        for (l, n) in crc {
            if seconds > 0.0 {
                let link = links.entry(l).or_default();
                link.crc_per_s = link.crc_per_s.max(n / seconds);
            }
        }
        for (name, value) in p.ending() {
            if let Name::Nvlink {
                link,
                part: NvlinkPart::State,
            } = name
            {
                last_state.insert(link, value);
            }
        }
    }
    (links, last_state)
}

/// `NVLINK_ERRORS`: a link's error counts, a failure where it recovered (retrained) or its
/// corrected errors came at a rate that costs it, a note where they did not.
fn link_errors(l: u32, link: &Link) -> Finding {
    let count = |k: &str| link.counts.get(k).copied().unwrap_or(0.0);
    // A recovery (the link retrained) is a failure; corrected errors (CRC, and the
    // replays that corrected them) are one only at a rate that costs the link.
    let recovered = count("recovery") > 0.0;
    let over_budget = link.crc_per_s >= NVLINK_CORRECTED_PER_S;
    let listed: Vec<String> = link
        .counts
        .iter()
        .map(|(k, n)| {
            let (one, many) = match *k {
                "replay" => ("replay", "replays"),
                "recovery" => ("recovery", "recoveries"),
                "crc_flit" => (
                    "CRC error in a flow-control digit",
                    "CRC errors in flow-control digits",
                ),
                _ => ("CRC error in data", "CRC errors in data"),
            };
            format!("{n:.0} {}", if *n == 1.0 { one } else { many })
        })
        .collect();
    let rate = if link.crc_per_s > 0.0 {
        format!(
            " (corrected errors at {:.1} a second at most, against a budget of {NVLINK_CORRECTED_PER_S:.0})",
            link.crc_per_s
        )
    } else {
        String::new()
    };
    let mut f = finding(
        FindingCode::NvlinkErrors,
        if recovered || over_budget {
            Severity::Major
        } else {
            Severity::Note
        },
        if recovered {
            Confidence::High
        } else {
            Confidence::Medium
        },
        format!(
            "NVLink {l}: {} {}{rate}",
            listed.join(", "),
            super::during_phases(&link.phases),
        ),
        evidence(&LinkErrors {
            link: l,
            counts: PartCounts(&link.counts),
            corrected_per_s: PerSecond(link.crc_per_s),
            budget_per_s: PerSecond(NVLINK_CORRECTED_PER_S),
            phases: &link.phases,
            source: "DCGM's health watch: NVLink CRC errors matter at 100 a second (DcgmGPUHardwareLimits.h); kiln counts the replays that correct them with them, by rate; a recovery or a link down is a failure",
        }),
        "check the NVLink bridge or baseboard and reseat; rerun, and RMA if the errors follow the card",
    );
    if !(recovered || over_budget) {
        // Corrected at a rate that costs the link nothing measurable: said, not held
        // against the card (nor against its peer, whose end saw the same flits).
        f.class = crate::finding::Class::Info;
        f.summary
            .push_str(": corrected, far under the rate at which they cost the link");
        f.action = "nothing now; if the rate grows across runs, check the NVLink bridge or baseboard and reseat".into();
    }
    f
}

#[cfg(test)]
mod tests {
    use super::super::testing::{device, phase, said};
    use crate::finding::{Class, Severity};
    use crate::thresholds::Thresholds;

    fn judged(deltas: serde_json::Value) -> Vec<(&'static str, Class, Severity)> {
        let d = device(vec![phase(
            "compute",
            serde_json::json!({"counter_deltas": deltas}),
        )]);
        said(&super::judge(&d, &Thresholds::default()))
    }

    #[test]
    fn a_link_is_judged_as_one_by_its_corrected_errors_rate() {
        // Three CRC errors at one end and the replays of the same flits at the other, in a
        // minute: one corrected fault seen twice, a note at both ends.
        let note = [("NVLINK_ERRORS", Class::Info, Severity::Note)];
        assert_eq!(judged(serde_json::json!({"nvlink3_crc_flit": 3.0})), note);
        assert_eq!(judged(serde_json::json!({"nvlink3_replay": 3.0})), note);
        // Over 100 a second together: the link's fault.
        let fault = [("NVLINK_ERRORS", Class::Hardware, Severity::Major)];
        assert_eq!(
            judged(serde_json::json!({"nvlink7_crc_data": 3000.0, "nvlink7_replay": 3100.0})),
            fault
        );
        // Just under it, split between the two kinds: still a note.
        assert_eq!(
            judged(serde_json::json!({"nvlink7_crc_data": 2900.0, "nvlink7_replay": 3000.0})),
            note
        );
        // A recovery is a failure whatever the rate.
        assert_eq!(judged(serde_json::json!({"nvlink2_recovery": 1.0})), fault);
        // A clean link says nothing.
        assert!(judged(serde_json::json!({"nvlink2_replay": 0.0})).is_empty());
    }

    #[test]
    fn a_link_down_beside_links_up_is_minor_and_one_that_went_down_is_a_failure() {
        let states = |first: f64, last: f64| {
            let at = |state: f64| serde_json::json!({"nvlink0_state": 1.0, "nvlink1_state": state});
            device(vec![
                phase("vram", serde_json::json!({"counters_after": at(first)})),
                phase(
                    "compute",
                    serde_json::json!({"counters_after": at(last),
                                       "counter_deltas": {"nvlink1_state": last - first}}),
                ),
            ])
        };
        let down_all_along = super::judge(&states(0.0, 0.0), &Thresholds::default());
        assert_eq!(
            said(&down_all_along),
            [("NVLINK_DOWN", Class::Hardware, Severity::Minor)]
        );
        assert_eq!(
            down_all_along[0].evidence.json(),
            &serde_json::json!({"link": 1, "links_up": 1})
        );
        let went_down = super::judge(&states(1.0, 0.0), &Thresholds::default());
        assert_eq!(
            said(&went_down),
            [("NVLINK_DOWN", Class::Hardware, Severity::Major)]
        );
        assert_eq!(
            went_down[0].evidence.json(),
            &serde_json::json!({"link": 1, "phases": ["compute"]})
        );
        // The near miss: every link up.
        assert!(super::judge(&states(1.0, 1.0), &Thresholds::default()).is_empty());
    }
}
