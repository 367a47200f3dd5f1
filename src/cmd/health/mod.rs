//! `kiln health`: a node check for schedulers, in seconds and with no load. It reads what
//! the driver already knows (counters, new Xids, the PCIe link, the GPU count, whether the
//! driver is loaded) and the age and verdict of the last full run, judges it with the same
//! rules as a run's verdict, and says the most serious problem in one line with a stable
//! fault code, e.g. `GPU1 GPU-2222...: ECC uncorrectable +2 [KILN-MEM-002]`.
//!
//! Fault events (an Xid, ECC growth, a failed run) stay open in the state file until a
//! person clears them (`--clear`) or a full run passes on that GPU after them: a scheduler
//! must not un-drain a node by itself because the event scrolled past.
//!
//! The check runs in named steps ([`check`]): read the GPUs and their sources, choose the
//! GPUs in scope, load the state, then the GPUs the bus has but NVML cannot reach, the
//! count, each GPU by the verdict's own rules, the driver, the Xids of no one GPU, the last
//! full run, the faults still open; then save the state and rank what was found. The state
//! file is `state`'s, the codes `codes`', the groups of readings `checks`', the runs
//! `runs`', the summary and metrics `metrics`'.

mod checks;
mod codes;
mod metrics;
mod read;
mod runs;
mod state;

pub use metrics::{FAMILIES, metrics, summary};

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::evidence::utc_timestamp;
use crate::exit_code;
use crate::finding::{Finding, HealthCode, Severity};
use crate::inventory::System;
use crate::telemetry::cause;
use crate::telemetry::record::Readings;
use crate::thresholds::Thresholds;
use crate::verdict::{DeviceEvidence, DeviceResult, Setup};
use checks::{GROUPS, GroupRead, MEMORY_GROUPS};
use read::{Gpu, Seen};
use state::{GpuState, NODE, OpenFault, State};

/// What `kiln health` is asked to check.
#[derive(Debug, Clone, Default)]
pub struct HealthOptions {
    /// The number of GPUs the node should have.
    pub expect_gpus: Option<usize>,
    /// Where positions, counters and open faults are kept between checks (none: every Xid
    /// since boot counts, counters are judged as they stand, and nothing stays open).
    pub state: Option<PathBuf>,
    /// The directory holding full runs (`kiln run --out` folders).
    pub runs: Option<PathBuf>,
    /// The last full run must be younger than this, and its verdict a pass.
    pub max_age: Option<Duration>,
    /// A recorded telemetry file to read instead of the live sources (tests, and checking
    /// a recording).
    pub replay: Option<PathBuf>,
    /// Only these GPUs, by NVML index (a Slurm job's `SLURM_JOB_GPUS`); faults of the
    /// node as a whole are kept.
    pub only_nvml: Option<Vec<u32>>,
    /// Clear open faults with this code (`KILN-XID-079`) or `all` before checking,
    /// recording who and when in the state file.
    pub clear: Option<String>,
}

/// Why a check could not be made as asked: one sentence (exit 64).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct HealthError(String);

/// One problem found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    /// The device, by index, when the fault is one device's.
    pub gpu: Option<usize>,
    /// Its UUID (`GPU-...`), when known.
    pub uuid: Option<String>,
    /// Stable fault code (`KILN-MEM-002`).
    pub code: HealthCode,
    /// The exit code this fault asks for (1 hardware, 2 environment, 3 software, 4 could
    /// not check).
    pub exit_code: i32,
    /// What is wrong, in a few words.
    pub message: String,
    /// For a fault that stays open: when it was first seen (UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_since: Option<String>,
    /// What to do about it: for a fault a rule found, the finding's own action, the one
    /// `kiln run` gives; for the check's own faults, its code's step.
    #[serde(default)]
    pub next: String,
}

impl Fault {
    /// The one-line message: device, what, code.
    pub fn line(&self) -> String {
        let who = match (self.gpu, &self.uuid) {
            (Some(i), Some(u)) => format!("GPU{i} {}: ", short_uuid(u)),
            (Some(i), None) => format!("GPU{i}: "),
            _ => String::new(),
        };
        let open = self
            .open_since
            .as_deref()
            .map(|t| format!(" (open since {t})"))
            .unwrap_or_default();
        format!("{who}{}{open} [{}]", self.message, self.code)
    }
}

impl Fault {
    /// A fault of the node as a whole.
    fn node(code: HealthCode, exit_code: i32, message: String) -> Fault {
        Fault {
            gpu: None,
            uuid: None,
            code,
            exit_code,
            message,
            open_since: None,
            next: String::new(),
        }
    }

    /// A fault of GPU `gpu`.
    fn gpu(gpu: &Gpu, code: HealthCode, exit_code: i32, message: String) -> Fault {
        Fault {
            gpu: Some(gpu.index),
            uuid: gpu.uuid.clone(),
            code,
            exit_code,
            message,
            open_since: None,
            next: String::new(),
        }
    }
}

fn short_uuid(uuid: &str) -> String {
    let bare = uuid.trim_start_matches("GPU-");
    format!("GPU-{}...", bare.chars().take(8).collect::<String>())
}

/// The result of a health check.
#[derive(Debug, Clone, Serialize)]
pub struct Health {
    /// The first line: the most serious fault, or that all is well; at most 256 characters.
    pub line: String,
    /// 0 healthy, 1 hardware, 2 environment, 3 software, 4 could not check.
    pub exit_code: i32,
    /// GPUs found.
    pub gpus: usize,
    /// Every fault, most serious first.
    pub faults: Vec<Fault>,
    /// What to do next: the first fault's step (none when healthy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// What `--clear` cleared, in a sentence (or that nothing open matched).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cleared: Option<String>,
    /// What was seen that does not fail the node (a lone Xid 45, a high single-bit ECC
    /// rate): worth a look, not a drain.
    pub noted: Vec<String>,
    /// What was checked, for people: only what was read.
    pub checked: Vec<String>,
    /// What limited the check or the state (a source that could not be read, a state
    /// file that could not be saved), each said once.
    pub notes: Vec<String>,
}

/// The longest first line, as schedulers keep reasons short.
pub const LINE_MAX: usize = 256;

/// A check in progress: what it has found and said so far.
struct Check<'a> {
    opts: &'a HealthOptions,
    /// Every fault, in the order found.
    faults: Vec<Fault>,
    /// Faults that stay open until cleared, by the key of whose they are.
    events: Vec<(String, Fault)>,
    /// Worth a look, not a drain.
    noted: Vec<String>,
    /// What was checked, for people.
    checked: Vec<String>,
    /// What limited the check.
    notes: Vec<String>,
    /// What `--clear` cleared, in a sentence.
    cleared: Option<String>,
}

/// The GPUs of the check: every one the machine has, by index, and those in scope.
struct Gpus {
    all: BTreeMap<usize, Gpu>,
    in_scope: Vec<usize>,
}

impl Gpus {
    /// The state keys of the GPUs in scope.
    fn scope_keys(&self) -> Vec<String> {
        self.in_scope.iter().map(|g| self.all[g].key()).collect()
    }
}

/// The groups of readings the GPUs had, and those their cards do not have.
#[derive(Default)]
struct GroupsSeen {
    read: BTreeSet<&'static str>,
    unsupported: BTreeSet<&'static str>,
}

/// Runs the check.
pub fn check(opts: &HealthOptions) -> Result<Health, HealthError> {
    let system = System::from_env();
    let mut check = Check {
        opts,
        faults: Vec::new(),
        events: Vec::new(),
        noted: Vec::new(),
        checked: Vec::new(),
        notes: Vec::new(),
        cleared: None,
    };
    let mut opened = read::open(opts, &system);
    check.notes.append(&mut opened.notes);
    let seen = read::read_sources(&mut opened.sources, opts.replay.is_some());
    check.notes.extend(seen.notes.iter().cloned());
    let gpus = check.scope(read::gpus(opened.gpus, &seen))?;
    let keys: Vec<String> = gpus.all.values().map(Gpu::key).collect();
    let (mut state, rebooted) =
        state::load(opts.state.as_deref(), &keys, &system, &mut check.notes)?;
    if let Some(code) = &opts.clear {
        check.cleared = Some(state::clear(&mut state, code, opts, &gpus.scope_keys())?);
    }
    // Read before this check moves the positions on: whether a state file kept one.
    let checked_before = state::position_known(&state);
    let now_utc = utc_timestamp(SystemTime::now());
    check.unreachable(&opened.inventory, &seen);
    check.count(&gpus, &seen);
    let mut groups = GroupsSeen::default();
    let mut node_findings = Vec::new();
    for &g in &gpus.in_scope {
        let gpu = &gpus.all[&g];
        check.readable(gpu, &seen, &mut groups);
        let now = Now {
            seen: &seen,
            rebooted,
            utc: &now_utc,
        };
        node_findings.extend(check.judge_gpu(gpu, &now, &mut state));
    }
    check.driver(&seen, &node_findings);
    check.node_xids(&seen, &mut state);
    check.said_groups(&groups, checked_before);
    let runs_dir = opts
        .runs
        .clone()
        .unwrap_or_else(|| PathBuf::from("kiln-runs"));
    // The runs are read only where something asks of them (their reports can be many and
    // large): the last one's age and result, or a pass that clears an open fault.
    let (runs, unreadable) =
        if opts.max_age.is_some() || !state.open.is_empty() || !check.events.is_empty() {
            runs::all(&runs_dir)
        } else {
            (Vec::new(), Vec::new())
        };
    let unreadable_runs = !unreadable.is_empty();
    if opts.max_age.is_some() {
        check.notes.extend(unreadable);
    }
    check.last_run(&runs, &runs_dir, unreadable_runs);
    check.still_open(&mut state, &runs, &gpus, &now_utc);
    if let Some(path) = &opts.state {
        state::save(&mut state, path, &mut check.notes);
    }
    Ok(check.finish(&gpus))
}

/// What a GPU's judgement reads besides the GPU: the sources' words, whether the node
/// rebooted since the last check, and the time now.
struct Now<'a> {
    seen: &'a Seen,
    rebooted: bool,
    utc: &'a str,
}

impl Check<'_> {
    /// The GPUs in scope: every GPU, or a job's by NVML index (`--gpus`). An index the node
    /// does not have is a usage error; with no index readable, nothing can be chosen,
    /// every GPU is checked, and that is said.
    fn scope(&mut self, all: BTreeMap<usize, Gpu>) -> Result<Gpus, HealthError> {
        let mut in_scope: Vec<usize> = all.keys().copied().collect();
        if let Some(only) = &self.opts.only_nvml {
            let known: Vec<u32> = all.values().filter_map(|g| g.nvml_index).collect();
            if known.is_empty() {
                self.faults.push(Fault::node(
                    codes::NO_INDEX,
                    exit_code::INCONCLUSIVE,
                    "--gpus names NVML indices, and no GPU's could be read: every GPU was checked"
                        .into(),
                ));
            } else {
                if let Some(missing) = only.iter().find(|o| !known.contains(o)) {
                    let mut have = known.clone();
                    have.sort();
                    return Err(HealthError(format!(
                        "--gpus {missing}: this node has no GPU with NVML index {missing} (it has {})",
                        have.iter()
                            .map(u32::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
                in_scope.retain(|g| all[g].nvml_index.is_some_and(|i| only.contains(&i)));
            }
        }
        Ok(Gpus { all, in_scope })
    }

    /// The NVIDIA GPUs the driver holds on the PCI bus that a working NVML cannot reach.
    fn unreachable(&mut self, inventory: &[crate::inventory::InventoryGpu], seen: &Seen) {
        let nvml_works = !seen
            .causes
            .iter()
            .any(|c| cause::NVML_DOWN.contains(&c.as_str()));
        for i in read::unreachable(inventory, nvml_works) {
            self.faults.push(Fault {
                gpu: Some(i),
                uuid: None,
                code: codes::GPU_UNREACHABLE,
                exit_code: exit_code::HARDWARE,
                message: format!(
                    "{} is on the PCI bus but NVML cannot reach it (fallen off the bus or failed to initialise: see the kernel log)",
                    inventory[i].pci_address.as_deref().unwrap_or("a GPU")
                ),
                open_since: None,
                next: String::new(),
            });
        }
    }

    /// The count of GPUs against `--expect-gpus`, and a node with none to check.
    fn count(&mut self, gpus: &Gpus, seen: &Seen) {
        let found = gpus.all.len();
        if let Some(want) = self.opts.expect_gpus {
            if found < want {
                self.faults.push(Fault::node(
                    codes::GPUS_MISSING,
                    exit_code::HARDWARE,
                    format!("{found} of {want} GPUs found"),
                ));
            }
            self.checked.push(format!("GPU count (expect {want})"));
        }
        if found == 0 && self.opts.expect_gpus.is_none() {
            let why = read::no_gpu_why(seen, &self.notes);
            self.faults.push(Fault::node(
                codes::NO_GPU,
                exit_code::INCONCLUSIVE,
                format!("no GPU to check: {why}"),
            ));
        }
    }

    /// Which groups of a GPU's readings could be read. Memory health the card has but
    /// that could not be read is not checked: named, each with why, and the GPU could not
    /// be checked. A call this driver lacks (an optional one, added in a later driver) is
    /// no failure: the group is judged by the calls the driver has, and the missing call
    /// is said in the notes.
    fn readable(&mut self, gpu: &Gpu, seen: &Seen, groups_seen: &mut GroupsSeen) {
        let g = gpu.index;
        let counters = seen.counters.get(&g);
        let vendor_counters = counters.is_some_and(|c| c.values().any(|v| v.number().is_some()));
        let readings = seen.gauges.get(&g).is_some_and(|r| !r.is_empty());
        let nvidia = gpu.vendor_id == Some(0x10de) || gpu.uuid.is_some();
        let groups: Vec<(&'static str, GroupRead)> = GROUPS
            .iter()
            .map(|group| {
                let from = if group.gauges {
                    seen.gauges.get(&g)
                } else {
                    counters
                };
                let read = checks::group_read(from, group.holds);
                // What the card does not have needs no word on the driver's calls for it;
                // what was read, or nothing but missing calls, does.
                if matches!(read, GroupRead::Read | GroupRead::Lacking) {
                    let lacking = checks::lacking(from, group.holds);
                    self.notes.extend(checks::lacking_notes(
                        group.name,
                        &lacking,
                        read == GroupRead::Lacking,
                    ));
                }
                (group.name, read)
            })
            .collect();
        for (name, read) in &groups {
            match read {
                GroupRead::Read => groups_seen.read.insert(*name),
                GroupRead::NotSupported => groups_seen.unsupported.insert(*name),
                _ => false,
            };
        }
        let memory = || {
            groups
                .iter()
                .filter(|(name, _)| MEMORY_GROUPS.contains(name))
        };
        // Each group with its own reasons: a refusal is said as one even where another
        // call of the group is missing, or another group timed out.
        let failed: Vec<String> = memory()
            .filter_map(|(name, read)| match read {
                GroupRead::Failed(why) => Some(format!(
                    "{name} ({})",
                    why.iter()
                        .map(|w| checks::in_words(w))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                _ => None,
            })
            .collect();
        let none = memory().all(|(_, read)| *read == GroupRead::Absent);
        let message = if !failed.is_empty() {
            Some(format!("could not read {}", failed.join(", ")))
        } else if nvidia && (none || !vendor_counters) {
            // Nothing of the GPU's memory was read: with every call of a group missing
            // from the driver, that is why.
            let lacking: Vec<String> = memory()
                .filter(|(_, read)| *read == GroupRead::Lacking)
                .map(|(name, _)| format!("{name} (function not found)"))
                .collect();
            let unsupported = !none && memory().all(|(_, read)| *read != GroupRead::Read);
            Some(if !lacking.is_empty() {
                format!("could not read {}", lacking.join(", "))
            } else {
                let why = if unsupported {
                    "NVML answers not supported for every counter and sensor".to_owned()
                } else {
                    read::no_counters_why(seen, g)
                };
                format!("no ECC, remap or retired-page counters ({why})")
            })
        } else if !nvidia && !vendor_counters && !readings {
            Some("nothing readable for this GPU (no vendor counters or sensors)".into())
        } else {
            None
        };
        if let Some(message) = message {
            self.faults.push(Fault::gpu(
                gpu,
                codes::NOT_READ,
                exit_code::INCONCLUSIVE,
                message,
            ));
        }
    }

    /// One GPU judged by the verdict's own rules on what was read now: its new Xids (an
    /// Xid a reset should cure, back after two, is the card's), its counters' growth since
    /// the last check, its gauges. Its state moves on; the findings of the node as a whole
    /// (the driver installation) are returned to be said once.
    fn judge_gpu(&mut self, gpu: &Gpu, now: &Now, state: &mut State) -> Vec<Finding> {
        let g = gpu.index;
        let key = gpu.key();
        let before = state.gpus.get(&key).cloned();
        let position = before.as_ref().map_or(0, |b| b.xid_kernel_us);
        let (xids, newest) = checks::new_xids(&now.seen.xids, Some(g), position);
        let none = Readings::new();
        let now_counters = now.seen.counters.get(&g).unwrap_or(&none);
        // The counters as numbers: what the rules judge now and the state keeps for next.
        let counters: BTreeMap<String, f64> = now_counters
            .iter()
            .filter_map(|(k, v)| v.number().map(|v| (k.clone(), v)))
            .collect();
        let mut xid_resets = before
            .as_ref()
            .map(|b| b.xid_resets.clone())
            .unwrap_or_default();
        let codes_now: Vec<u32> = xids
            .iter()
            .filter_map(crate::telemetry::record::XidEvent::code)
            .collect();
        let reset = state::reset_since(now_counters, before.as_ref(), now.rebooted);
        let back = state::escalate(&mut xid_resets, &codes_now, reset, now.utc);
        let mut phase = checks::health_phase(g, xids, before.is_some());
        phase.samples = usize::from(now.seen.gauges.get(&g).is_some_and(|r| !r.is_empty()));
        phase.gauges = checks::gauges_of(now.seen.gauges.get(&g));
        phase.counter_deltas = checks::growth(now_counters, before.as_ref());
        phase.counters_after = counters.clone();
        let setup = Setup {
            vendor_id: gpu.vendor_id.unwrap_or(0),
            vulkan_driver_version: String::new(),
            identity: now.seen.identity.get(&g).cloned().unwrap_or_default(),
            source_problems: now.seen.causes.clone(),
            // A node check starts no worker: whose an Xid is, is not known here.
            kiln_pids: Vec::new(),
            watching: false,
        };
        let observed = DeviceEvidence::observed(
            g,
            &gpu.name,
            gpu.uuid.as_deref().unwrap_or(""),
            gpu.pci_address.clone(),
            setup,
            phase,
        );
        // The run's own judging: every rule, then the resolution.
        let device = crate::verdict::judge_device(observed, &Thresholds::default());
        let mut node_findings = Vec::new();
        for f in device.findings {
            if f.code.info().node_wide {
                node_findings.push(f);
            } else {
                self.place(&f, Some(gpu), &key);
            }
        }
        // Said instead of the Xid's own fault: the hardware's, whatever its catalogue row.
        for (code, resets) in back {
            let meaning = crate::verdict::xid::lookup(code).map_or("", |x| x.meaning);
            let fault = Fault::gpu(
                gpu,
                HealthCode::xid(code),
                exit_code::HARDWARE,
                format!(
                    "Xid {code} ({meaning}) came back after {resets} resets that should have cured it: the GPU, not the software; inspect the hardware"
                ),
            );
            let fault = Fault {
                next: "drain the node and inspect the GPU (its seating, its power cables), then confirm with `kiln run --profile rma` before sending it back".into(),
                ..fault
            };
            let same = |f: &Fault| f.gpu == Some(g) && f.code == fault.code;
            self.faults.retain(|f| !same(f));
            self.events.retain(|(_, f)| !same(f));
            self.noted
                .retain(|n| !n.contains(&format!("[{}]", fault.code)));
            self.events.push((key.clone(), fault.clone()));
            self.faults.push(fault);
        }
        state.gpus.insert(
            key,
            GpuState {
                xid_kernel_us: position.max(newest),
                counters,
                xid_resets,
            },
        );
        node_findings
    }

    /// The driver installation, once for the node: the rules' findings of it, else what the
    /// sources said of it.
    fn driver(&mut self, seen: &Seen, found: &[Finding]) {
        let mut said: Vec<crate::finding::FindingCode> = Vec::new();
        for f in found {
            if !said.contains(&f.code) {
                said.push(f.code);
                self.place(f, None, NODE);
            }
        }
        let caused = |c: &str| seen.causes.iter().any(|x| x == c);
        let from_sources = [
            (
                cause::DRIVER_NOT_LOADED,
                crate::finding::FindingCode::DriverNotLoaded,
                codes::DRIVER_NOT_LOADED,
                "NVIDIA kernel driver not loaded",
            ),
            (
                cause::VERSION_MISMATCH,
                crate::finding::FindingCode::DriverVersionMismatch,
                codes::DRIVER_MISMATCH,
                "NVML and kernel driver versions differ (reboot after the upgrade)",
            ),
        ];
        for (why, finding, code, message) in from_sources {
            if caused(why) && !said.contains(&finding) {
                self.faults
                    .push(Fault::node(code, exit_code::SOFTWARE, message.into()));
            }
        }
        self.checked.push("driver".to_owned());
    }

    /// The Xids no GPU can be tied to, for the node as a whole (not for a job's GPUs).
    fn node_xids(&mut self, seen: &Seen, state: &mut State) {
        if self.opts.only_nvml.is_some() {
            return;
        }
        let position = state.gpus.get(NODE).map_or(0, |n| n.xid_kernel_us);
        let (xids, newest) = checks::new_xids(&seen.xids, None, position);
        if !xids.is_empty() {
            let observed = DeviceEvidence::observed(
                usize::MAX,
                "node",
                "",
                None,
                Setup::default(),
                checks::health_phase(usize::MAX, xids, position > 0),
            );
            let node = crate::verdict::judge_device(observed, &Thresholds::default());
            for f in &node.findings {
                self.place(f, None, NODE);
            }
        }
        state.gpus.entry(NODE.into()).or_default().xid_kernel_us = position.max(newest);
    }

    /// Only what was read is said as checked; what the cards do not have is said as such.
    fn said_groups(&mut self, groups: &GroupsSeen, checked_before: bool) {
        let in_order = |set: &BTreeSet<&str>| -> Vec<&'static str> {
            GROUPS
                .iter()
                .map(|g| g.name)
                .filter(|n| set.contains(n))
                .collect()
        };
        let read = in_order(&groups.read);
        if !read.is_empty() {
            self.checked.push(read.join(", "));
        }
        let unsupported: Vec<&str> = in_order(&groups.unsupported)
            .into_iter()
            .filter(|n| !read.contains(n))
            .collect();
        if !unsupported.is_empty() {
            self.notes.push(format!(
                "not supported by the card: {}",
                unsupported.join(", ")
            ));
        }
        self.checked.push(if checked_before {
            "Xids since the last check".to_owned()
        } else {
            "Xids since boot".to_owned()
        });
    }

    /// The last full run, with `--max-age`: there is one, it is young enough, and it
    /// passed (a run that did not is the node's open fault until a run passes).
    /// A runs directory with no run in it at all is a node not yet tested (its own exit
    /// code, not a fault: a fresh node is started, not drained); one whose only runs
    /// cannot be read (`unreadable`) could not be checked.
    fn last_run(&mut self, runs: &[runs::Run], dir: &std::path::Path, unreadable: bool) {
        let Some(max_age) = self.opts.max_age else {
            return;
        };
        match runs::last(runs) {
            None if unreadable => self.faults.push(Fault::node(
                codes::RUN_NONE,
                exit_code::INCONCLUSIVE,
                format!("no readable full run in {}", dir.display()),
            )),
            None => self.faults.push(Fault::node(
                codes::RUN_NONE,
                exit_code::NOT_TESTED,
                format!("not yet tested: no full run in {} yet", dir.display()),
            )),
            Some(run) => {
                if run.age > max_age {
                    self.faults.push(Fault::node(
                        codes::RUN_TOO_OLD,
                        exit_code::INCONCLUSIVE,
                        format!(
                            "last full run is {:.0} h old (max {:.0} h)",
                            hours(run.age),
                            hours(max_age)
                        ),
                    ));
                }
                if run.report.exit_code != exit_code::HEALTHY {
                    let worst = run
                        .report
                        .devices
                        .iter()
                        .find(|d| d.result != DeviceResult::Pass);
                    let fault = Fault {
                        gpu: worst.map(|d| d.index),
                        uuid: None,
                        code: codes::RUN_NOT_PASSED,
                        exit_code: run.report.exit_code,
                        message: format!(
                            "last full run: {}",
                            worst.map_or("not a pass", |d| d.reason.as_str())
                        ),
                        open_since: None,
                        // The run's own next step, as `kiln run` said it.
                        next: worst.and_then(|d| d.action.clone()).unwrap_or_default(),
                    };
                    // The node's: a run that passes after it clears it.
                    self.faults.push(fault.clone());
                    self.events.push((NODE.into(), fault));
                }
            }
        }
        self.checked
            .push(format!("last full run in {}", dir.display()));
    }

    /// Events join the open faults; a full run that passed on the GPU since clears them;
    /// those still open from before are said with their date, seen again now or not.
    fn still_open(&mut self, state: &mut State, runs: &[runs::Run], gpus: &Gpus, now_utc: &str) {
        let opened_before: Vec<(String, HealthCode)> = state
            .open
            .iter()
            .map(|o| (o.key.clone(), o.fault.code))
            .collect();
        for (key, fault) in std::mem::take(&mut self.events) {
            if !state
                .open
                .iter()
                .any(|o| o.key == key && o.fault.code == fault.code)
            {
                state.open.push(OpenFault {
                    key,
                    fault,
                    since_utc: now_utc.to_owned(),
                    by_hand: false,
                });
            }
        }
        state::clear_by_passing_runs(state, runs, now_utc);
        let scope_keys = gpus.scope_keys();
        for o in &state.open {
            if o.key != NODE && !scope_keys.contains(&o.key) {
                continue;
            }
            if !opened_before.contains(&(o.key.clone(), o.fault.code)) {
                continue; // new in this check: already among the faults, as seen now
            }
            match self
                .faults
                .iter_mut()
                .find(|f| f.code == o.fault.code && f.gpu == o.fault.gpu)
            {
                Some(f) => f.open_since = Some(o.since_utc.clone()),
                None => {
                    let mut f = o.fault.clone();
                    f.open_since = Some(o.since_utc.clone());
                    self.faults.push(f);
                }
            }
        }
        if !state.open.is_empty() {
            let n = state.open.len();
            self.notes.push(format!(
                "{} {} open until a person clears {} (`kiln health --state FILE --clear CODE|all`) or a full run passes",
                crate::text::count(n as u64, "open fault"),
                if n == 1 { "stays" } else { "stay" },
                if n == 1 { "it" } else { "them" }
            ));
        }
    }

    /// Puts a finding where it belongs: a fault now (a state read at every check), an
    /// event that stays open, or a note (minor: worth a look, not a drain).
    fn place(&mut self, f: &Finding, gpu: Option<&Gpu>, key: &str) {
        let Some((code, sticky)) = codes::of(f) else {
            return;
        };
        let who = gpu.map_or(String::new(), |g| format!("GPU{} ", g.index));
        if f.severity > Severity::Major {
            self.noted.push(format!("{who}{} [{code}]", f.summary));
            return;
        }
        let exit = codes::class_exit(f.class);
        let mut fault = match gpu {
            Some(gpu) => Fault::gpu(gpu, code, exit, f.summary.clone()),
            None => Fault::node(code, exit, f.summary.clone()),
        };
        // The finding's own action: the next step `kiln run` gives for it.
        fault.next = f.action.clone();
        if sticky {
            self.events.push((key.to_owned(), fault.clone()));
        }
        self.faults.push(fault);
    }

    /// Most serious first: hardware, environment, software, could not check; within one,
    /// by the code's rank (the counters' direct evidence before the kernel log's lines,
    /// the link, the driver); the first line says the first.
    fn finish(mut self, gpus: &Gpus) -> Health {
        if let Some(only) = &self.opts.only_nvml {
            self.checked.push(format!(
                "only GPUs {}",
                only.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        self.faults.sort_by_key(|f| (f.exit_code, f.code.kind));
        // What the machine gave (a GPU's name, a process's, a kernel-log line) is data: what
        // in it could act is escaped before any of it is said, and before the first line a
        // scheduler takes as its reason is made.
        let shown = |text: &mut String| *text = crate::text::printable(text).into_owned();
        for f in &mut self.faults {
            shown(&mut f.message);
            if f.next.is_empty() {
                f.next = codes::own_next(f.code, f.exit_code, self.opts);
            }
            shown(&mut f.next);
        }
        self.noted.iter_mut().chain(&mut self.notes).for_each(shown);
        let exit = self
            .faults
            .first()
            .map_or(exit_code::HEALTHY, |f| f.exit_code);
        let mut line = match self.faults.first() {
            None => format!(
                "OK: {} healthy [{}]",
                crate::text::count(gpus.in_scope.len() as u64, "GPU"),
                codes::HEALTHY
            ),
            Some(f) if self.faults.len() > 1 => {
                format!(
                    "{} (and {})",
                    f.line(),
                    crate::text::count(self.faults.len() as u64 - 1, "more fault")
                )
            }
            Some(f) => f.line(),
        };
        if line.chars().count() > LINE_MAX {
            let code = self
                .faults
                .first()
                .map(|f| format!(" [{}]", f.code))
                .unwrap_or_default();
            let keep = LINE_MAX - code.chars().count() - 3;
            line = format!("{}...{code}", line.chars().take(keep).collect::<String>());
        }
        let mut said = BTreeSet::new();
        self.notes.retain(|n| said.insert(n.clone()));
        Health {
            line,
            exit_code: exit,
            gpus: gpus.all.len(),
            next: self.faults.first().map(|f| f.next.clone()),
            cleared: self.cleared,
            faults: self.faults,
            noted: self.noted,
            checked: self.checked,
            notes: self.notes,
        }
    }
}

/// A duration in hours.
fn hours(d: Duration) -> f64 {
    d.as_secs_f64() / 3600.0
}

/// What `kiln health` checks of its command line before it reads the node: the textfile
/// directory.
pub fn check_args(args: &crate::cmd::cli::HealthArgs) -> Result<(), crate::error::AppError> {
    match &args.textfile_dir {
        Some(dir) => crate::cmd::edge::textfile_dir_usable(dir),
        None => Ok(()),
    }
}

/// `kiln health`.
pub fn command(args: crate::cmd::cli::HealthArgs) -> Result<i32, crate::error::AppError> {
    use crate::cmd::edge::{err, out};
    use crate::error::AppError;
    check_args(&args)?;
    let h = check(&HealthOptions {
        expect_gpus: args.expect_gpus,
        state: args.state,
        runs: args.runs,
        max_age: args.max_age,
        replay: args.telemetry_replay,
        only_nvml: args.gpus,
        clear: args.clear,
    })
    .map_err(|e| AppError::Usage(e.to_string()))?;
    if args.json {
        // JSON alone, so that `kiln health --json | jq .` works: the line is its `line`.
        out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&h).unwrap_or_default()
        ));
    } else {
        out(&summary(&h));
    }
    if let Some(dir) = &args.textfile_dir {
        let now = SystemTime::now();
        let metrics = metrics(&h, &crate::evidence::hostname(), now);
        // stdout stays the check's alone: a problem publishing goes to stderr, and the
        // node's health decides the exit code.
        if let Err(e) = crate::report::publish_metrics(dir, "kiln-health.prom", metrics.as_bytes())
        {
            err(&format!("kiln: metrics not published: {e}\n"));
        }
    }
    Ok(h.exit_code)
}

#[cfg(test)]
mod tests;
