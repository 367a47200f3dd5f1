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
    /// of the GPU's links are up beside it, and what says the board wires every link.
    struct LinkDown<'a> {
        link: u32 => "Link",
        #[serde(skip_serializing_if = "Option::is_none")]
        links_up: Option<usize> => "Links up",
        #[serde(skip_serializing_if = "Option::is_none")]
        phases: Option<&'a [String]> => "Phases",
        #[serde(skip_serializing_if = "Option::is_none")]
        board: Option<&'static str> => "Board",
    }
}

crate::evidence! {
    /// The evidence of `NVLINK_DOWN` said of a card whose bridges are fitted by hand: its
    /// links down all run, and how many are up.
    struct Unbridged<'a> {
        links: &'a [u32] => "Links down",
        links_up: usize => "Links up",
    }
}

/// Where a GPU's NVLinks go, and so what one down means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wiring {
    /// NVML says its links end at NVSwitches: an NVSwitch baseboard (HGX, DGX), every link
    /// wired, and one down a failure (DCGM's NVLink health watch and diag fail a GPU for it).
    NvSwitch,
    /// An SXM module by its product: it sits on a baseboard whose links are the board's
    /// own wiring, so one down is lost wiring, not a bridge left off.
    Baseboard,
    /// A PCIe card, or a GPU nothing says more of: its links may go to bridges a person
    /// fits, or leaves off.
    Bridges,
}

impl Wiring {
    /// The GPU's wiring, from NVML's remote device types, else its product.
    pub(super) fn of(device: &DeviceEvidence) -> Wiring {
        let to_switches = device
            .setup
            .identity_of(crate::telemetry::signals::NVLINK_SWITCH_LINKS)
            .and_then(crate::telemetry::record::Reading::number);
        if to_switches.is_some_and(|n| n > 0.0) {
            Wiring::NvSwitch
        } else if crate::product::lookup(&device.name).is_some_and(|p| p.sxm) {
            Wiring::Baseboard
        } else {
            Wiring::Bridges
        }
    }

    /// Whether every link of the GPU is wired, so that one down is a fault.
    pub(super) fn all_wired(self) -> bool {
        self != Wiring::Bridges
    }

    /// What says so, in words.
    fn words(self) -> Option<&'static str> {
        match self {
            Wiring::NvSwitch => Some(
                "an NVSwitch baseboard (HGX, DGX): NVML says the GPU's links end at NVSwitches",
            ),
            Wiring::Baseboard => {
                Some("an SXM module on its baseboard (HGX, DGX): its links are the board's wiring")
            }
            Wiring::Bridges => None,
        }
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
/// during a phase (`NVLINK_DOWN`), or one down all run while others of the GPU are up: a
/// failure on a board that wires every link (an NVSwitch baseboard, an SXM module), one
/// note for them all on a card whose bridges are fitted by hand (a bridge left off); and
/// its errors (`NVLINK_ERRORS`): a recovery (the link retrained) is a failure; CRC errors
/// and replays, corrected errors of one fault seen at either end, are one at 100 a second
/// or more together and a note below. A GPU whose links are all down (MIG, no bridge) says
/// nothing here.
fn nvlinks(device: &DeviceEvidence, out: &mut Vec<Finding>) {
    let (links, last_state) = read_links(device);
    let up = last_state.values().filter(|v| **v > 0.0).count();
    let wiring = Wiring::of(device);
    let mut unbridged = Vec::new();
    for (l, state) in &last_state {
        if *state <= 0.0 && up > 0 && links.get(l).is_none_or(|k| k.went_down.is_empty()) {
            let down = if wiring.all_wired() {
                // Every link of the board is wired: one down is the GPU's (or its
                // baseboard position's) failure, as DCGM fails it.
                finding(
                    FindingCode::NvlinkDown,
                    Severity::Major,
                    if wiring == Wiring::NvSwitch {
                        Confidence::High
                    } else {
                        Confidence::Medium
                    },
                    format!(
                        "NVLink {l} is down while {up} of the GPU's links are up, on a board that wires every link"
                    ),
                    evidence(&LinkDown {
                        link: *l,
                        links_up: Some(up),
                        phases: None,
                        board: wiring.words(),
                    }),
                    "reset the GPU and check the link (nvidia-smi nvlink -s); if it stays down, reseat the module on the baseboard, and RMA if it follows the GPU",
                )
            } else {
                unbridged.push(*l);
                continue;
            };
            out.push(down);
        }
    }
    if !unbridged.is_empty() {
        // Links of a card whose bridges a person fits, down all run: how it was
        // installed (a bridge left off), not a fault; said once, for the card.
        let mut f = finding(
            FindingCode::NvlinkDown,
            Severity::Note,
            Confidence::Medium,
            format!(
                "NVLink{} {} down all run while {up} of the GPU's links are up: no bridge on {} (a PCIe card's bridges are fitted by hand)",
                if unbridged.len() == 1 { "" } else { "s" },
                crate::text::list(&unbridged.iter().map(u32::to_string).collect::<Vec<_>>()),
                if unbridged.len() == 1 { "it" } else { "them" },
            ),
            evidence(&Unbridged {
                links: &unbridged,
                links_up: up,
            }),
            "nothing if the card was installed without those bridges; otherwise reseat the bridge and check the NVLink topology (nvidia-smi nvlink -s)",
        );
        f.class = crate::finding::Class::Info;
        out.push(f);
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
                    board: None,
                }),
                "check the NVLink bridge or baseboard, reseat, and reset the GPU; RMA if it follows the card",
            ));
        }
        if !link.counts.is_empty() {
            out.push(link_errors(l, &link));
        }
    }
}

crate::evidence! {
    /// The evidence of `NVLINK_FABRIC_DOWN`: the links down on every GPU, and the GPUs.
    struct Fabric<'a> {
        links: &'a [u32] => "Links down on every GPU",
        gpus: Vec<usize> => "GPUs",
        #[serde(skip_serializing_if = "Option::is_none")]
        board: Option<&'static str> => "Board",
    }
}

/// What a GPU's NVLinks ended the run as, for the node's comparison: the links down, the
/// links read, and those that went down during the run.
struct Ended {
    down: Vec<u32>,
    read: usize,
    went_down: Vec<u32>,
}

fn ended(device: &DeviceEvidence) -> Option<Ended> {
    let (links, last_state) = read_links(device);
    if last_state.is_empty() || !device.kind.is_gpu() {
        return None;
    }
    Some(Ended {
        down: last_state
            .iter()
            .filter(|(_, v)| **v <= 0.0)
            .map(|(l, _)| *l)
            .collect(),
        read: last_state.len(),
        went_down: links
            .iter()
            .filter(|(_, k)| !k.went_down.is_empty())
            .map(|(l, _)| *l)
            .collect(),
    })
}

/// The same NVLinks down on every GPU of the run (two or more): not each GPU's fault but
/// the fabric's, the part they share (an NVSwitch tray, a bridge, the fabric manager),
/// said once with the GPUs it holds (`NVLINK_FABRIC_DOWN`, each GPU's own `NVLINK_DOWN`
/// resolved into it, [`crate::verdict::resolve`]). Only where the links are wired (every
/// GPU on a board that wires them) or went down during the run on every GPU: the same
/// bridges left off a pair of PCIe cards is how they were installed.
pub fn fabric(devices: &[DeviceEvidence]) -> Vec<Vec<Finding>> {
    let mut out = vec![Vec::new(); devices.len()];
    let ends: Vec<(usize, Ended)> = devices
        .iter()
        .enumerate()
        .filter_map(|(i, d)| ended(d).map(|e| (i, e)))
        .collect();
    let Some((first, one)) = ends.first() else {
        return out;
    };
    if ends.len() < 2 || one.down.is_empty() || ends.iter().any(|(_, e)| e.down != one.down) {
        return out;
    }
    let wired = ends
        .iter()
        .all(|(i, _)| Wiring::of(&devices[*i]).all_wired());
    let lost_in_the_run = ends.iter().all(|(_, e)| e.went_down == one.down);
    if !(wired || lost_in_the_run) {
        return out;
    }
    let gpus: Vec<usize> = ends.iter().map(|(i, _)| devices[*i].index).collect();
    let links: Vec<String> = one.down.iter().map(u32::to_string).collect();
    let all = ends.iter().all(|(_, e)| e.down.len() == e.read);
    let what = if all {
        "every NVLink".to_owned()
    } else {
        format!(
            "NVLink{} {}",
            if links.len() == 1 { "" } else { "s" },
            crate::text::list(&links)
        )
    };
    let board = ends
        .iter()
        .map(|(i, _)| Wiring::of(&devices[*i]))
        .find(|w| w.all_wired())
        .and_then(Wiring::words);
    for (i, _) in &ends {
        let summary = if i == first {
            format!(
                "{what} down on each of the run's {} GPUs: the same links on every GPU are the fabric they share (an NVSwitch tray, a bridge, the fabric manager), not each GPU",
                ends.len()
            )
        } else {
            format!(
                "{what} down here as on every GPU of the run: the fabric's, said with GPU {}",
                devices[*first].index
            )
        };
        out[*i].push(finding(
            FindingCode::NvlinkFabricDown,
            Severity::Major,
            Confidence::High,
            summary,
            evidence(&Fabric {
                links: &one.down,
                gpus: gpus.clone(),
                board,
            }),
            "check what the GPUs share: the fabric manager (systemctl status nvidia-fabricmanager) and the NVSwitch trays or bridges (nvidia-smi nvlink -s on every GPU); the GPUs themselves are not shown at fault",
        ));
    }
    out
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

    /// A GPU of `name` whose NVLink 0 is up and link 1 `first` after the VRAM phase and
    /// `last` after compute.
    fn states_of(name: &str, first: f64, last: f64) -> crate::verdict::DeviceEvidence {
        let at = |state: f64| serde_json::json!({"nvlink0_state": 1.0, "nvlink1_state": state});
        let mut d = device(vec![
            phase("vram", serde_json::json!({"counters_after": at(first)})),
            phase(
                "compute",
                serde_json::json!({"counters_after": at(last),
                                   "counter_deltas": {"nvlink1_state": last - first}}),
            ),
        ]);
        d.name = name.to_owned();
        d
    }

    #[test]
    fn a_link_down_on_a_board_that_wires_every_link_fails_the_gpu() {
        // An HGX H200 (an SXM module) with link 1 down all run: the GPU's, as DCGM says.
        let sxm = super::judge(&states_of("NVIDIA H200", 0.0, 0.0), &Thresholds::default());
        let fails = [("NVLINK_DOWN", Class::Hardware, Severity::Major)];
        assert_eq!(said(&sxm), fails);
        assert_eq!(sxm[0].confidence, crate::finding::Confidence::Medium);
        // NVML says its links end at NVSwitches: the same, at high confidence.
        let mut on_switches = states_of("NVIDIA H100 NVL", 0.0, 0.0);
        on_switches.setup.identity.insert(
            crate::telemetry::signals::NVLINK_SWITCH_LINKS.name.into(),
            crate::telemetry::record::Reading::Number(18.0),
        );
        let switched = super::judge(&on_switches, &Thresholds::default());
        assert_eq!(said(&switched), fails);
        assert_eq!(switched[0].confidence, crate::finding::Confidence::High);
        // The near miss: a PCIe card whose bridge for link 1 is not fitted: a note.
        let bridged = super::judge(
            &states_of("NVIDIA H100 NVL", 0.0, 0.0),
            &Thresholds::default(),
        );
        assert_eq!(
            said(&bridged),
            [("NVLINK_DOWN", Class::Info, Severity::Note)]
        );
    }

    #[test]
    fn the_same_links_down_on_every_gpu_are_the_fabric_s() {
        let node = |name: &str, states: [(f64, f64); 2]| {
            let devices: Vec<_> = states
                .iter()
                .enumerate()
                .map(|(i, (first, last))| {
                    let mut d = states_of(name, *first, *last);
                    d.index = i;
                    d
                })
                .collect();
            super::fabric(&devices)
                .iter()
                .map(|f| said(f))
                .collect::<Vec<_>>()
        };
        let fabric = vec![("NVLINK_FABRIC_DOWN", Class::Environment, Severity::Major)];
        // Two HGX H200s with link 1 down all run on both: said for each, the fabric's.
        assert_eq!(
            node("NVIDIA H200", [(0.0, 0.0), (0.0, 0.0)]),
            [fabric.clone(), fabric.clone()]
        );
        // Two PCIe cards whose link 1 went down during the run on both: a bridge.
        assert_eq!(
            node("NVIDIA H100 NVL", [(1.0, 0.0), (1.0, 0.0)]),
            [fabric.clone(), fabric]
        );
        // The near misses: one GPU's link alone; the same bridge left off two PCIe cards.
        assert!(
            node("NVIDIA H200", [(0.0, 0.0), (1.0, 1.0)])
                .iter()
                .all(Vec::is_empty)
        );
        assert!(
            node("NVIDIA H100 NVL", [(0.0, 0.0), (0.0, 0.0)])
                .iter()
                .all(Vec::is_empty)
        );
    }

    #[test]
    fn a_bridge_left_off_is_a_note_and_a_link_that_went_down_is_a_failure() {
        // A PCIe card with bridges: a link down all run may be a bridge left off.
        let states = |first: f64, last: f64| states_of("NVIDIA H100 NVL", first, last);
        let down_all_along = super::judge(&states(0.0, 0.0), &Thresholds::default());
        assert_eq!(
            said(&down_all_along),
            [("NVLINK_DOWN", Class::Info, Severity::Note)]
        );
        assert_eq!(
            down_all_along[0].evidence.json(),
            &serde_json::json!({"links": [1], "links_up": 1})
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
