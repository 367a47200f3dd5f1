//! NVLink: each link of the GPU over the run, one finding per bad link.

use serde_json::json;

use crate::finding::{Confidence, Finding, FindingCode, Severity, finding};
use crate::telemetry::signals;
use crate::verdict::DeviceReport;
use crate::verdict::thresholds::Thresholds;

/// The rule.
pub fn judge(device: &DeviceReport, _t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    nvlinks(device, &mut out);
    out
}

/// CRC errors per second on an NVLink from which they matter (DCGM's health watch: "CRC
/// errors only matter at rates of 100+ per second"); fewer are worth a look.
const NVLINK_CRC_PER_S: f64 = 100.0;

/// Every NVLink of the device over the run, one finding per bad link: one that went down
/// during a phase (`NVLINK_DOWN`), or one down while others of the GPU are up (a note of
/// weight only where the run saw it go: a PCIe card's bridges may leave links unused); and
/// its errors (`NVLINK_ERRORS`): any replay or recovery of its data link is a fault (as in
/// DCGM's health watch), CRC errors at 100 a second or more too, fewer are minor. A GPU
/// whose links are all down (MIG, no bridge) says nothing here.
fn nvlinks(device: &DeviceReport, out: &mut Vec<Finding>) {
    use std::collections::BTreeMap;
    #[derive(Default)]
    struct Link {
        went_down: Vec<String>,
        counts: BTreeMap<&'static str, f64>,
        crc_per_s: f64,
        phases: Vec<String>,
    }
    let mut links: BTreeMap<u32, Link> = BTreeMap::new();
    let mut last_state: BTreeMap<u32, f64> = BTreeMap::new();
    for p in &device.telemetry {
        let seconds = (p.end_ms - p.start_ms) / 1e3;
        let mut crc: BTreeMap<u32, f64> = BTreeMap::new();
        for (name, value) in &p.counter_deltas {
            let Some((l, what)) = signals::nvlink_part(name) else {
                continue;
            };
            if what == "state" {
                if *value < 0.0 {
                    links.entry(l).or_default().went_down.push(p.phase.clone());
                }
                continue;
            }
            let Some(kind) = signals::NVLINK_COUNTERS.iter().find(|k| **k == what) else {
                continue;
            };
            if *value > 0.0 {
                let link = links.entry(l).or_default();
                *link.counts.entry(kind).or_default() += value;
                if !link.phases.contains(&p.phase) {
                    link.phases.push(p.phase.clone());
                }
                if kind.starts_with("crc") {
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
        for (name, value) in &p.counters_after {
            if let Some((l, "state")) = signals::nvlink_part(name) {
                last_state.insert(l, *value);
            }
        }
    }
    let up = last_state.values().filter(|v| **v > 0.0).count();
    for (l, state) in &last_state {
        if *state <= 0.0 && up > 0 && links.get(l).is_none_or(|k| k.went_down.is_empty()) {
            out.push(finding(
                FindingCode::NvlinkDown,
                Severity::Minor,
                Confidence::Medium,
                format!("NVLink {l} is down while {up} of the GPU's links are up"),
                json!({"link": l, "links_up": up}),
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
                json!({"link": l, "phases": link.went_down}),
                "check the NVLink bridge or baseboard, reseat, and reset the GPU; RMA if it follows the card",
            ));
        }
        if link.counts.is_empty() {
            continue;
        }
        let count = |k: &str| link.counts.get(k).copied().unwrap_or(0.0);
        let fatal = count("replay") + count("recovery") > 0.0 || link.crc_per_s >= NVLINK_CRC_PER_S;
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
        out.push(finding(
            FindingCode::NvlinkErrors,
            if fatal { Severity::Major } else { Severity::Minor },
            Confidence::Medium,
            format!(
                "NVLink {l}: {} {}{}",
                listed.join(", "),
                super::during_phases(&link.phases),
                if link.crc_per_s > 0.0 {
                    format!(" (CRC errors at {:.0} a second at most)", link.crc_per_s)
                } else {
                    String::new()
                }
            ),
            json!({"link": l, "counts": link.counts, "crc_per_s": link.crc_per_s, "phases": link.phases,
                   "source": "DCGM health watch: any replay or recovery fails a link; CRC errors fail it at 100 a second or more"}),
            "check the NVLink bridge or baseboard and reseat; rerun, and RMA if the errors follow the card",
        ));
    }
}
