//! Xids, judged from the one catalogue ([`crate::verdict::xid`]), by whose process raised
//! them.

use super::during;
use crate::evidence::DeviceErrorKind;
use crate::finding::{Class, Confidence, Facts, Finding, FindingCode, Severity, evidence};
use crate::telemetry::record::XidChannel;
use crate::telemetry::record::{XID_FALLEN_OFF_THE_BUS, XidEvent};
use crate::telemetry::signals;
use crate::telemetry::summary::PhaseTelemetry;
use crate::thresholds::Thresholds;
use crate::verdict::DeviceEvidence;
use crate::verdict::xid::nvlink5::{self, Nvlink5Error, Reach};
use crate::verdict::xid::{self, Resolution, XidInfo};

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
        /// The first 16: last, as the longest. Kept in report.json; the page's Xid table
        /// and the log's lines show them to people, once.
        xids: Vec<&'a XidEvent> => hidden,
    }
}

/// One Xid code and how many times it came: one fact in words (`Xid 48, 3 times`), never
/// a numbered record of raw keys.
#[derive(serde::Serialize)]
struct Counted {
    code: u32,
    count: usize,
}

impl crate::finding::Said for Counted {
    fn line(&self, _: crate::finding::Unit) -> Option<String> {
        Some(match self.count {
            1 => format!("Xid {}, once", self.code),
            n => format!("Xid {}, {n} times", self.code),
        })
    }
    fn is_fact(&self) -> bool {
        true
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
    let run = Run::of(device);
    for (p, owners) in device.telemetry.iter().zip(&run.owners) {
        xids(p, owners, &run, device, &mut out);
    }
    out
}

/// Whose process raised an Xid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    /// One of kiln's own workers (in a watch, the watched application's processes).
    Kiln,
    /// A process that is not one of them.
    Other,
    /// Not known: the line names no process, or kiln did not record its own.
    Unknown,
}

/// The name the kernel gives kiln's workers (the executable's): a line that names it under
/// a pid kiln did not record is still kiln's, as in a container, whose pids the kernel log
/// does not show.
const KILN_PROCESS: &str = "kiln";

/// What the whole run says of its Xids, beyond one phase: whose each was, how many GSP
/// timeouts came, and what the run lost after them.
struct Run<'a> {
    /// Each phase's Xids' owners, in the phases' order.
    owners: Vec<Vec<Owner>>,
    /// GSP timeouts and errors during the run.
    gsp: usize,
    /// What asked for a reset or showed one was needed (Xid 154 asking one, NVML's
    /// recovery action, the card off the bus), in words; None where nothing did.
    reset_asked: Option<&'static str>,
    /// Whether kiln's own processes raised an application fault, or the card a hardware
    /// Xid of weight: then a loss has a cause of the run's own.
    own_cause: bool,
    /// The device.
    device: &'a DeviceEvidence,
}

impl<'a> Run<'a> {
    fn of(device: &'a DeviceEvidence) -> Run<'a> {
        let owners = owners(device);
        let during = || {
            device
                .telemetry
                .iter()
                .flat_map(|p| p.xids.iter())
                .filter(|e| !e.before_run)
        };
        let gsp = during()
            .filter(|e| {
                e.code()
                    .and_then(xid::lookup)
                    .is_some_and(XidInfo::gsp_timeout)
            })
            .count();
        let asked_by_154 = during().any(|e| e.code() == Some(154) && xid::asks_a_reset(&e.message));
        let asked_by_nvml = device.telemetry.iter().any(|p| {
            p.after(signals::RECOVERY_ACTION)
                .and_then(xid::recovery_action_of)
                .is_some()
        });
        let off_the_bus = during().any(|e| e.code() == Some(XID_FALLEN_OFF_THE_BUS));
        let reset_asked = if asked_by_154 {
            Some("the driver asked for a reset (Xid 154)")
        } else if asked_by_nvml {
            Some("the driver's recovery action asks for a reset")
        } else if off_the_bus {
            Some("the GPU fell off the bus (Xid 79)")
        } else {
            None
        };
        let codes: Vec<u32> = during().filter_map(XidEvent::code).collect();
        let (hardware, _) = super::xid_kinds(&codes);
        let kiln_app = device.telemetry.iter().zip(&owners).any(|(p, owners)| {
            p.xids.iter().zip(owners).any(|(e, o)| {
                *o != Owner::Other
                    && e.code()
                        .and_then(xid::lookup)
                        .is_some_and(|i| i.finding == FindingCode::XidApplication)
            })
        });
        Run {
            owners,
            gsp,
            reset_asked,
            own_cause: hardware || kiln_app,
            device,
        }
    }

    /// Whether kiln's own device was lost, hung or its worker died in the phase that began
    /// at `from_ms` or after it (a loss whose phase is not known counts).
    fn lost_from(&self, from_ms: f64) -> bool {
        let d = self.device;
        if d.failures
            .iter()
            .any(|f| matches!(f.error, DeviceErrorKind::Hang | DeviceErrorKind::Crash))
        {
            return true;
        }
        let runs = super::runs(d);
        d.workloads
            .iter()
            .filter(|w| w.summary.envelope().device_error.is_some())
            .any(|w| {
                runs.iter()
                    .find(|(r, _)| std::ptr::eq(*r, w))
                    .and_then(|(_, p)| *p)
                    .is_none_or(|p| p.end_ms >= from_ms)
            })
    }
}

/// Whose process raised each Xid of each phase: kiln's where it names one of kiln's pids
/// (or, in a test, kiln's own executable), another's where it names another pid, and a
/// cleanup that names none (43, 45) the owner of the application fault before it.
fn owners(device: &DeviceEvidence) -> Vec<Vec<Owner>> {
    let setup = &device.setup;
    let own = &setup.kiln_pids;
    let mut last_fault: Option<Owner> = None;
    device
        .telemetry
        .iter()
        .map(|p| {
            p.xids
                .iter()
                .map(|e| {
                    let row = e.code().and_then(xid::lookup);
                    let application = row.is_some_and(|i| i.finding == FindingCode::XidApplication);
                    let owner = match e.pid {
                        Some(pid) if own.contains(&pid) => Owner::Kiln,
                        Some(_)
                            if !setup.watching && e.process.as_deref() == Some(KILN_PROCESS) =>
                        {
                            Owner::Kiln
                        }
                        Some(_) if !own.is_empty() => Owner::Other,
                        Some(_) => Owner::Unknown,
                        None if row.is_some_and(XidInfo::cleans_up) => {
                            last_fault.unwrap_or(Owner::Unknown)
                        }
                        None => Owner::Unknown,
                    };
                    if application && e.pid.is_some() {
                        last_fault = Some(owner);
                    }
                    owner
                })
                .collect()
        })
        .collect()
}

/// The finding of an application's Xid raised by a process that is not kiln's own:
/// information about the node, never a finding against the card.
const XID_OTHER_PROCESS: FindingCode = FindingCode::XidOtherProcess;

/// The Xids of a phase, judged from the one catalogue ([`super::xid`]): one finding per
/// finding code, naming every code and count behind it, at the most serious row's class
/// and severity. Xid 154's recovery action, read from its text, is the action.
fn xids(
    p: &PhaseTelemetry,
    owners: &[Owner],
    run: &Run,
    device: &DeviceEvidence,
    out: &mut Vec<Finding>,
) {
    let setup = &device.setup;
    let mut groups: Vec<(FindingCode, Vec<Member>)> = Vec::new();
    for (event, owner) in p.xids.iter().zip(owners) {
        let Some(info) = event.code().and_then(xid::lookup) else {
            continue;
        };
        // An application's fault raised by a process that is not one of kiln's (where
        // kiln knows its own) is that process's, not this test's.
        let finding = if info.finding == FindingCode::XidApplication && *owner == Owner::Other {
            XID_OTHER_PROCESS
        } else {
            info.finding
        };
        match groups.iter_mut().find(|(f, _)| *f == finding) {
            Some((_, members)) => members.push((info, event, *owner)),
            None => groups.push((finding, vec![(info, event, *owner)])),
        }
    }
    for (code, members) in groups {
        // The most serious row decides (a 48 beside a 94 is a critical memory fault).
        let Some(worst) = members
            .iter()
            .map(|(info, ..)| *info)
            .min_by_key(|info| (info.class(), info.severity, info.confidence))
        else {
            continue;
        };
        let mut counts: Vec<(u32, usize)> = Vec::new();
        for (info, ..) in &members {
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
            .filter(|(info, ..)| info.code == 154)
            .find_map(|(_, e, _)| xid::recovery_action(&e.message));
        let action = match asked {
            Some(words) => format!("{words} (the driver's recovery action, Xid 154); then retest"),
            None => worst.action.to_owned(),
        };
        let mut phase = during(p);
        // Whose processes raised them, where the kernel log names them.
        let raised_by = raised_by(&members);
        let pids = |kiln: bool| pids(&members, kiln);
        let (mut class, mut severity, mut confidence, mut action) =
            (worst.class(), worst.severity, worst.confidence, action);
        if code == XID_OTHER_PROCESS {
            // A fact about the node, not about the card: another process's engine fault,
            // or the cleanup of a process stopped (43, 45), is that process's.
            phase = format!(
                "raised by another process ({}) {phase}",
                pids(false).join(", ")
            );
            if !run.own_cause && run.lost_from(p.start_ms) {
                // Kiln's own device lost after it, with no fault of kiln's own and no
                // hardware Xid: the other process's fault cost the run.
                phase.push_str(
                    ", and kiln's own device was lost after it with no fault of its own: it cost the run",
                );
                (class, severity, confidence) =
                    (Class::Environment, Severity::Major, Confidence::Medium);
                action = "rerun with the GPU to the test alone (drain the node, or --wait-idle); the other process's owner should look at its fault; the card only if the loss comes back with the GPU to itself".into();
            } else {
                (class, severity, confidence) = (Class::Info, Severity::Note, Confidence::High);
                action = "nothing against this card: the other process's owner should look at it (a tenant on the GPU during the test is its own finding)".into();
            }
        } else if code == FindingCode::XidFirmware
            && members.iter().all(|(info, ..)| info.gsp_timeout())
        {
            gsp(run, p, &mut phase, (&mut class, &mut severity), &mut action);
        } else if let Some(decoded) = nvlink5_decoded(code, &members) {
            nvlink5_weighed(
                &decoded,
                &mut phase,
                (&mut class, &mut severity, &mut confidence),
                &mut action,
            );
        } else if worst.finding == FindingCode::XidApplication && !pids(true).is_empty() {
            let whose = if setup.watching {
                "the watched application's process"
            } else {
                "kiln's own worker"
            };
            phase = format!("in {whose} ({}) {phase}", pids(true).join(", "));
        }
        // Every way the faults reached kiln, each fault counted once however many there were.
        let mut seen_by: Vec<XidChannel> =
            members.iter().flat_map(|(_, e, _)| e.channels()).collect();
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
                xids: members.iter().take(16).map(|(_, e, _)| *e).collect(),
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

/// One Xid of a finding: its row, the event, and whose it was.
type Member<'a> = (&'a XidInfo, &'a XidEvent, Owner);

/// Each process that raised one of `members`, once, and whether it is kiln's own.
fn raised_by<'a>(members: &[Member<'a>]) -> Vec<RaisedBy<'a>> {
    let mut out: Vec<RaisedBy> = Vec::new();
    for (_, e, owner) in members {
        if let Some(pid) = e.pid {
            let who = RaisedBy {
                pid,
                process: e.process.as_deref(),
                kiln: *owner == Owner::Kiln,
            };
            if !out.contains(&who) {
                out.push(who);
            }
        }
    }
    out
}

/// The processes, kiln's own or the others', that raised one of `members`, each once, in
/// words (`pid 4242 python3`).
fn pids(members: &[Member], kiln: bool) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (_, e, owner) in members {
        let Some(pid) = e.pid.filter(|_| (*owner == Owner::Kiln) == kiln) else {
            continue;
        };
        let said = match &e.process {
            Some(name) => format!("pid {pid} {name}"),
            None => format!("pid {pid}"),
        };
        if !out.contains(&said) {
            out.push(said);
        }
    }
    out
}

/// The NVLink5 errors of a finding (Xid 144 to 150), each decoded by NVIDIA's table: None
/// unless every one of them decodes (an undecoded one keeps its row's judgement).
fn nvlink5_decoded(code: FindingCode, members: &[Member]) -> Option<Vec<Nvlink5Error>> {
    if code != FindingCode::XidNvlink {
        return None;
    }
    members
        .iter()
        .map(|(info, e, _)| {
            (info.resolution == Resolution::Nvlink5Workflow)
                .then(|| nvlink5::decode(&e.message))
                .flatten()
        })
        .collect()
}

/// NVLink5 errors weighed by NVIDIA's decode table: a fatal one keeps its row's weight and
/// is named with the reset the table asks; those the table calls non-fatal and asks nothing
/// for are a note to watch; a non-fatal one the table sends to the Xid 154 beside it is
/// the driver's and the software's, not the card's.
fn nvlink5_weighed(
    decoded: &[Nvlink5Error],
    phase: &mut String,
    (class, severity, confidence): (&mut Class, &mut Severity, &mut Confidence),
    action: &mut String,
) {
    let said = |e: &Nvlink5Error| match e.error_status {
        Some(status) => format!("{} status {status:#x}", e.unit),
        None => e.unit.to_owned(),
    };
    let mut units: Vec<String> = decoded.iter().map(said).collect();
    units.dedup();
    let units = units.join(", ");
    if let Some(fatal) = decoded
        .iter()
        .find(|e| e.resolution == Resolution::ResetGpu)
    {
        let reach = match fatal.reach {
            Reach::LinkFatal => "took the link down",
            _ => "is fatal to the GPU",
        };
        phase.push_str(&format!(
            ": by NVIDIA's NVLink5 decode table, {} {reach}",
            said(fatal)
        ));
        *action = format!(
            "reset the GPU (NVIDIA's decode table: RESET_GPU for {}), then check the NVLink connection and retest; RMA if it follows the card",
            said(fatal)
        );
    } else if decoded.iter().all(|e| e.resolution == Resolution::Ignore) {
        phase.push_str(&format!(
            ": non-fatal by NVIDIA's NVLink5 decode table ({units}), nothing lost"
        ));
        (*class, *severity, *confidence) = (Class::Info, Severity::Note, Confidence::High);
        *action = "nothing now: NVIDIA's decode table asks no action for it (IGNORE); if it keeps coming, check the link's signal integrity and cables".into();
    } else {
        phase.push_str(&format!(
            ": non-fatal by NVIDIA's NVLink5 decode table ({units}), raised by software on the link"
        ));
        (*class, *severity) = (Class::Software, Severity::Minor);
        *action = Resolution::RecoveryActionElseRestartApp.words().to_owned();
    }
}

/// A GSP timeout or error weighed by the run: one the GPU recovered from (the run went on,
/// nothing asked for a reset) is a note to watch; repeated ones, or one the GPU did not
/// recover from, are named with NVIDIA's recovery action for them.
fn gsp(
    run: &Run,
    p: &PhaseTelemetry,
    phase: &mut String,
    (class, severity): (&mut Class, &mut Severity),
    action: &mut String,
) {
    let lost = run.lost_from(p.start_ms);
    if run.gsp <= 1 && run.reset_asked.is_none() && !lost {
        phase
            .push_str(": the GPU recovered from it (no reset asked, the device not lost after it)");
        (*class, *severity) = (Class::Info, Severity::Note);
        *action = "nothing now: watch for another; repeated GSP timeouts, or one the GPU does not recover from, call for NVIDIA's recovery action (reset the GPU)".into();
        return;
    }
    let mut why = Vec::new();
    if run.gsp > 1 {
        why.push(format!("{} GSP timeouts in the run", run.gsp));
    }
    if let Some(asked) = run.reset_asked {
        why.push(asked.to_owned());
    }
    if lost {
        why.push("the run lost the device after it".to_owned());
    }
    phase.push_str(&format!(": {}", why.join(", ")));
    *action = "reset the GPU, NVIDIA's recovery action for Xid 119 and 120 (its Xid catalog: RESET_GPU), then retest; if the timeouts come back, investigate the driver and the GSP firmware (INVESTIGATE_SW: update them), and the card only if they follow it across drivers".into();
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

    /// A phase with these Xids (code, pid, process name, message), kiln's own worker being
    /// pid 31337, and whether kiln's worker died during the run.
    fn run_of(
        xids: &[(u32, Option<u32>, Option<&str>, &str)],
        worker_died: bool,
    ) -> Vec<(&'static str, Class, Severity)> {
        let events: Vec<serde_json::Value> = xids
            .iter()
            .map(|(code, pid, process, message)| {
                serde_json::json!({"bus_id": "0000:05:00", "code": code, "pid": pid,
                    "process": process, "message": message, "kernel_us": 1,
                    "before_run": false})
            })
            .collect();
        let mut d = device(vec![phase("compute", serde_json::json!({"xids": events}))]);
        d.setup.kiln_pids = vec![31337];
        if worker_died {
            d.failures.push(crate::verdict::DeviceFailure {
                error: crate::evidence::DeviceErrorKind::Crash,
                message: "the worker died".into(),
            });
        }
        said(&super::judge(&d, &Thresholds::default()))
    }

    #[test]
    fn another_process_s_xid_is_its_own_unless_it_cost_the_run() {
        let mmu = "MMU Fault: ENGINE GRAPHICS faulted";
        // Another process's page fault while kiln ran clean: a note.
        assert_eq!(
            run_of(&[(31, Some(4242), Some("python3"), mmu)], false),
            [("XID_OTHER_PROCESS", Class::Info, Severity::Note)]
        );
        // The near miss: kiln's own worker lost after it, with no fault of its own.
        assert_eq!(
            run_of(&[(31, Some(4242), Some("python3"), mmu)], true),
            [("XID_OTHER_PROCESS", Class::Environment, Severity::Major)]
        );
        // A loss with kiln's own fault beside it is kiln's: the other's stays a note.
        assert!(
            run_of(
                &[
                    (31, Some(4242), Some("python3"), mmu),
                    (13, Some(31337), Some("kiln"), "exception")
                ],
                true
            )
            .contains(&("XID_OTHER_PROCESS", Class::Info, Severity::Note))
        );
        // A cleanup naming no process after another's fault is that process's...
        assert_eq!(
            run_of(
                &[
                    (13, Some(4242), Some("python3"), "exception"),
                    (45, None, None, "Ch 00000010")
                ],
                false
            ),
            [("XID_OTHER_PROCESS", Class::Info, Severity::Note)]
        );
        // ...and after kiln's own, kiln's.
        assert_eq!(
            run_of(
                &[
                    (13, Some(31337), None, "exception"),
                    (45, None, None, "Ch 00000010")
                ],
                false
            )[0]
            .0,
            "XID_APPLICATION"
        );
        // kiln's own executable under a pid kiln did not record (a container's): kiln's.
        assert_eq!(
            run_of(&[(13, Some(98211), Some("kiln"), "exception")], false)[0].0,
            "XID_APPLICATION"
        );
    }

    #[test]
    fn a_gsp_timeout_is_a_note_once_and_named_with_nvidia_s_action_when_it_repeats_or_sticks() {
        let gsp = "Timeout after 6s of waiting for RPC response from GPU0 GSP!";
        let once = [(119, None, None, gsp)];
        assert_eq!(
            run_of(&once, false),
            [("XID_FIRMWARE", Class::Info, Severity::Note)]
        );
        // Three in the run.
        assert_eq!(
            run_of(&[once[0], once[0], once[0]], false),
            [("XID_FIRMWARE", Class::Software, Severity::Major)]
        );
        // One the GPU did not recover from: a reset asked, or the run lost the device.
        let reset = (
            154,
            None,
            None,
            "GPU recovery action changed from 0x0 (None) to 0x1 (Reset Required)",
        );
        assert!(run_of(&[once[0], reset], false).contains(&(
            "XID_FIRMWARE",
            Class::Software,
            Severity::Major
        )));
        assert_eq!(
            run_of(&once, true),
            [("XID_FIRMWARE", Class::Software, Severity::Major)]
        );
    }

    #[test]
    fn an_nvlink5_error_weighs_what_nvidia_s_decode_table_says_of_it() {
        let nvlink = |message| run_of(&[(149, None, None, message)], false);
        // A link down: fatal to the link, reset the GPU; the card's until shown otherwise.
        let down = "NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)";
        assert_eq!(
            nvlink(down),
            [("XID_NVLINK", Class::Hardware, Severity::Major)]
        );
        // Its near miss: a bit-error-rate event the table calls non-fatal, asking nothing.
        let ber = "NETIR_BER_EVENT Nonfatal XC0 i0 Link 07 (0x00000113 0x00000002 0x0 0x0 0x0 0x0)";
        assert_eq!(nvlink(ber), [("XID_NVLINK", Class::Info, Severity::Note)]);
        // A remap error the table sends to the Xid 154 beside it: software on the link.
        let remap = "RLW_REMAP Nonfatal XC0 i0 Link 02 (0x00000004 0x00000004 0x0 0x0 0x0 0x0)";
        assert_eq!(
            run_of(&[(145, None, None, remap)], false),
            [("XID_NVLINK", Class::Software, Severity::Minor)]
        );
        // One the table has no row for keeps its Xid's judgement, and so does a harmless
        // one beside a fatal one.
        assert_eq!(
            nvlink("SOMETHING_NEW Fatal (0x1 0x2)"),
            [("XID_NVLINK", Class::Hardware, Severity::Major)]
        );
        assert_eq!(
            run_of(&[(149, None, None, ber), (149, None, None, down)], false),
            [("XID_NVLINK", Class::Hardware, Severity::Major)]
        );
    }
}
