//! Xids, judged from the one catalogue ([`crate::verdict::xid`]), by whose process raised
//! them.

use super::during;
use crate::finding::{Class, Confidence, Facts, Finding, FindingCode, Severity, evidence};
use crate::telemetry::record::XidChannel;
use crate::telemetry::record::XidEvent;
use crate::telemetry::summary::PhaseTelemetry;
use crate::thresholds::Thresholds;
use crate::verdict::DeviceEvidence;
use crate::verdict::xid::{self, XidInfo};

crate::evidence! {
    /// The evidence of an Xid finding: its codes and counts, the first Xids themselves,
    /// how they reached kiln and whose processes raised them.
    struct Xids<'a> {
        phase: &'a str => "Phase",
        worst_code: u32 => "Worst code",
        codes: Vec<Counted> => "Codes",
        seen_by: Vec<XidChannel> => "Seen by",
        raised_by: Vec<RaisedBy<'a>> => "Raised by",
        source: &'static str => "Source",
        /// The first 16: last, as the longest.
        xids: Vec<&'a XidEvent> => "Xids",
    }
}

crate::evidence! {
    /// One Xid code and how many times it came.
    struct Counted {
        code: u32 => "Code",
        count: usize => "Count",
    }
}

crate::evidence! {
    /// A process that raised an Xid, and whether it is one of kiln's own.
    #[derive(PartialEq)]
    struct RaisedBy<'a> {
        pid: u32 => "PID",
        process: Option<&'a str> => "Process",
        kiln: bool => "kiln's own",
    }
}

/// The rule.
pub fn judge(device: &DeviceEvidence, _t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    for p in &device.telemetry {
        xids(p, &device.setup, &mut out);
    }
    out
}

/// The finding of an application's Xid raised by a process that is not kiln's own:
/// information about the node, never a finding against the card.
const XID_OTHER_PROCESS: FindingCode = FindingCode::XidOtherProcess;

/// The Xids of a phase, judged from the one catalogue ([`super::xid`]): one finding per
/// finding code, naming every code and count behind it, at the most serious row's class
/// and severity. Xid 154's recovery action, read from its text, is the action.
fn xids(p: &PhaseTelemetry, setup: &crate::verdict::Setup, out: &mut Vec<Finding>) {
    // The run's own processes: kiln's workers, or in a watch the watched application's.
    let kiln_pids = &setup.kiln_pids;
    let mut groups: Vec<(
        FindingCode,
        Vec<(&XidInfo, &crate::telemetry::record::XidEvent)>,
    )> = Vec::new();
    // An application's fault raised by a process that is not one of kiln's (where kiln
    // knows its own) is that process's, not this test's.
    let others = |e: &XidEvent| {
        e.pid
            .is_some_and(|pid| !kiln_pids.is_empty() && !kiln_pids.contains(&pid))
    };
    for event in &p.xids {
        let Some(info) = event.code().and_then(xid::lookup) else {
            continue;
        };
        let finding = if info.finding == FindingCode::XidApplication && others(event) {
            XID_OTHER_PROCESS
        } else {
            info.finding
        };
        match groups.iter_mut().find(|(f, _)| *f == finding) {
            Some((_, members)) => members.push((info, event)),
            None => groups.push((finding, vec![(info, event)])),
        }
    }
    for (code, members) in groups {
        // The most serious row decides (a 48 beside a 94 is a critical memory fault).
        let Some(worst) = members
            .iter()
            .map(|(info, _)| *info)
            .min_by_key(|info| (info.class(), info.severity, info.confidence))
        else {
            continue;
        };
        let mut counts: Vec<(u32, usize)> = Vec::new();
        for (info, _) in &members {
            match counts.iter_mut().find(|(c, _)| *c == info.code) {
                Some((_, n)) => *n += 1,
                None => counts.push((info.code, 1)),
            }
        }
        let listed = counts
            .iter()
            .map(|(c, n)| {
                let meaning = xid::lookup(*c).map_or("", |i| i.meaning);
                if *n > 1 {
                    format!("Xid {c} x{n} ({meaning})")
                } else {
                    format!("Xid {c} ({meaning})")
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        let asked = members
            .iter()
            .filter(|(info, _)| info.code == 154)
            .find_map(|(_, e)| xid::recovery_action(&e.message));
        let action = match asked {
            Some(words) => format!("{words} (the driver's recovery action, Xid 154); then retest"),
            None => worst.action.to_owned(),
        };
        let mut phase = during(p);
        // Whose processes raised them, where the kernel log names them.
        let mut raised_by: Vec<RaisedBy> = Vec::new();
        for (_, e) in &members {
            if let Some(pid) = e.pid {
                let who = RaisedBy {
                    pid,
                    process: e.process.as_deref(),
                    kiln: kiln_pids.contains(&pid),
                };
                if !raised_by.contains(&who) {
                    raised_by.push(who);
                }
            }
        }
        let pids = |kiln: bool| -> Vec<String> {
            members
                .iter()
                .filter_map(|(_, e)| {
                    let pid = e.pid.filter(|p| kiln_pids.contains(p) == kiln)?;
                    Some(match &e.process {
                        Some(name) => format!("pid {pid} {name}"),
                        None => format!("pid {pid}"),
                    })
                })
                .fold(Vec::new(), |mut all, p| {
                    if !all.contains(&p) {
                        all.push(p);
                    }
                    all
                })
        };
        let (mut class, mut severity, mut confidence, mut action) =
            (worst.class(), worst.severity, worst.confidence, action);
        if code == XID_OTHER_PROCESS {
            // A fact about the node, not about the card: another process's engine fault,
            // or the cleanup of a process stopped (43, 45), is that process's.
            phase = format!(
                "raised by another process ({}) {phase}",
                pids(false).join(", ")
            );
            (class, severity, confidence) = (Class::Info, Severity::Note, Confidence::High);
            action = "nothing against this card: the other process's owner should look at it (a tenant on the GPU during the test is its own finding)".into();
        } else if worst.finding == FindingCode::XidApplication && !pids(true).is_empty() {
            let whose = if setup.watching {
                "the watched application's process"
            } else {
                "kiln's own worker"
            };
            phase = format!("in {whose} ({}) {phase}", pids(true).join(", "));
        }
        // Every way the faults reached kiln, each fault counted once however many there were.
        let mut seen_by: Vec<XidChannel> = members.iter().flat_map(|(_, e)| e.channels()).collect();
        seen_by.sort();
        seen_by.dedup();
        out.push(Finding {
            code,
            class,
            severity,
            confidence,
            summary: format!("{listed} {phase}"),
            evidence: evidence(&Xids {
                phase: &p.phase,
                worst_code: worst.code,
                codes: counts
                    .iter()
                    .map(|(code, count)| Counted {
                        code: *code,
                        count: *count,
                    })
                    .collect(),
                xids: members.iter().take(16).map(|(_, e)| *e).collect(),
                seen_by,
                raised_by,
                source: worst.source,
            }),
            action,
            facts: Facts {
                worst_xid: Some(worst.code),
                ..Facts::default()
            },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{device, phase, said};
    use crate::finding::{Class, Severity};
    use crate::thresholds::Thresholds;

    /// A phase with these Xids (code, pid), kiln's own worker being pid 31337.
    fn judged(xids: &[(u32, u32)]) -> Vec<(&'static str, Class, Severity)> {
        let events: Vec<serde_json::Value> = xids
            .iter()
            .map(|(code, pid)| {
                serde_json::json!({"bus_id": "0000:05:00", "code": code, "pid": pid,
                    "process": null, "message": format!("Xid {code}"), "kernel_us": 1,
                    "before_run": false})
            })
            .collect();
        let mut d = device(vec![phase("compute", serde_json::json!({"xids": events}))]);
        d.setup.kiln_pids = vec![31337];
        said(&super::judge(&d, &Thresholds::default()))
    }

    #[test]
    fn an_xid_is_judged_by_its_row_and_by_whose_process_raised_it() {
        // A double-bit error is the card's, whoever ran.
        assert_eq!(
            judged(&[(48, 5120)]),
            [("XID_MEMORY_HARDWARE", Class::Hardware, Severity::Critical)]
        );
        // An engine fault in kiln's own worker is the application's (kiln's) own...
        let own = judged(&[(13, 31337)]);
        assert_eq!(own[0].0, "XID_APPLICATION");
        // ...and in another process, a fact about the node, never against the card.
        assert_eq!(
            judged(&[(13, 5120)]),
            [("XID_OTHER_PROCESS", Class::Info, Severity::Note)]
        );
        // Several of one kind are one finding.
        assert_eq!(judged(&[(48, 1), (48, 1), (94, 1)]).len(), 1);
    }
}
