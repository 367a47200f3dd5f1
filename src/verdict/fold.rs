//! The run's events folded once, in order, into owned evidence per device
//! ([`DeviceEvidence`]): its workloads' outcomes (those cut short and never run among them,
//! each with why), its failures, its rates at moments of the run and, laid on after, its
//! telemetry per phase; beside them the run's notes, whether it finished, and what a signal
//! interrupted. Every rule, of the card and of a watched application, reads what this
//! built; nothing reads the events again.

use std::collections::BTreeMap;

use super::evidence::{DeviceEvidence, DeviceFailure, RateSample};
use super::watch::AppEvents;
use crate::evidence::{Event, EvidenceFile};
use crate::gpu::DeviceInfo;
use crate::rundir::RunEvidence;
use crate::telemetry::record::{TelemetryData, TelemetryRecord};
use crate::telemetry::summary::{PREFLIGHT, PhaseTelemetry, summarize};
use crate::workload::{WorkloadOutcome, WorkloadResult, WorkloadStatus};

/// When a signal stopped the run, and what each device was running then.
#[derive(Debug, Clone)]
pub struct Interruption {
    /// Seconds since the run started.
    pub at_s: f64,
    /// The workloads each device (by index) had started and not ended.
    pub running: BTreeMap<usize, Vec<String>>,
}

/// What the run's events and telemetry say, folded: every device's evidence in device
/// order and the facts of the run as a whole.
#[derive(Debug)]
pub struct RunFacts {
    /// Every device the run selected, in device order.
    pub devices: Vec<DeviceEvidence>,
    /// Facts about the run as a whole, in the order they were learnt.
    pub notes: Vec<String>,
    /// The run did not finish (no `run_end` record, or a torn last line).
    pub incomplete: bool,
    /// A signal stopped the run.
    pub interrupted: Option<Interruption>,
    /// What the events say of a watched application.
    pub app: AppEvents,
    /// The time of the last record, ms since the run started.
    pub last_ms: f64,
}

/// What the events say about one device, as they come.
struct DeviceFold {
    info: DeviceInfo,
    outcomes: Vec<WorkloadOutcome>,
    /// Workloads that started but never ended.
    unfinished: Vec<String>,
    /// The device failures recorded, in order.
    errors: Vec<DeviceFailure>,
    /// Its rates at moments of the run.
    rates: Vec<RateSample>,
}

/// The fold: one event at a time ([`RunFold::apply`]), then [`RunFold::finish`].
pub struct RunFold {
    devices: Vec<DeviceFold>,
    notes: Vec<String>,
    finished: bool,
    interrupted: Option<Interruption>,
    last_ms: f64,
    workers: Vec<(usize, u32)>,
    app: AppEvents,
}

impl RunFold {
    /// A fold of no events yet. `live` is for the run itself, which judges its evidence
    /// before it writes the `run_end` record; a rebuild without that record is of a run
    /// that never finished.
    pub fn new(live: bool, notes: Vec<String>) -> RunFold {
        RunFold {
            devices: Vec::new(),
            notes,
            finished: live,
            interrupted: None,
            last_ms: 0.0,
            workers: Vec::new(),
            app: AppEvents::default(),
        }
    }

    /// The device of index `d`, where its start was recorded.
    fn device(&mut self, d: usize) -> Option<&mut DeviceFold> {
        self.devices.iter_mut().find(|e| e.info.index == d)
    }

    /// Takes one event of device `device` (None: the run's) at `t_ms`.
    pub fn apply(&mut self, t_ms: f64, device: Option<usize>, event: &Event) {
        self.last_ms = t_ms;
        self.app.take(t_ms, event);
        match (event, device) {
            (Event::Note { message }, None) => self.notes.push(message.clone()),
            // A device's own facts (a confirmation rerun, a stop at the first failure).
            (Event::Note { message }, Some(d)) => self.notes.push(format!("GPU{d}: {message}")),
            (Event::DeviceStart { info }, _) => self.devices.push(DeviceFold {
                info: (**info).clone(),
                outcomes: Vec::new(),
                unfinished: Vec::new(),
                errors: Vec::new(),
                rates: Vec::new(),
            }),
            (Event::Rates { rates, .. }, Some(d)) => {
                if let Some(entry) = self.device(d) {
                    entry
                        .rates
                        .extend(rates.iter().map(|(name, value)| RateSample {
                            t_ms,
                            name: name.clone(),
                            value: *value,
                        }));
                }
            }
            // The VRAM test's rate at each step that streamed the whole memory.
            (
                Event::Step {
                    workload,
                    op,
                    bytes,
                    gpu_ns,
                    completed: true,
                    ..
                },
                Some(d),
            ) if workload == crate::product::Rate::Vram.workload()
                && ["write", "verify"].contains(&op.as_str())
                && *gpu_ns > 0 =>
            {
                if let Some(entry) = self.device(d) {
                    entry.rates.push(RateSample {
                        t_ms,
                        name: crate::product::Rate::Vram.name().to_owned(),
                        value: crate::units::to_gib(*bytes) / (*gpu_ns as f64 * 1e-9),
                    });
                }
            }
            (Event::WorkloadStart { workload, .. }, Some(d)) => {
                if let Some(entry) = self.device(d) {
                    entry.unfinished.push(workload.clone());
                }
            }
            (
                Event::WorkloadEnd {
                    workload,
                    status,
                    headline,
                    summary,
                },
                Some(d),
            ) => {
                if let Some(entry) = self.device(d) {
                    entry.unfinished.retain(|w| w != workload);
                    entry.outcomes.push(WorkloadOutcome {
                        workload: workload.clone(),
                        status: *status,
                        headline: if headline.is_empty() {
                            format!("{workload} {}", status.word())
                        } else {
                            headline.clone()
                        },
                        summary: WorkloadResult::from_json(workload, summary.clone()),
                    });
                }
            }
            (Event::DeviceError { error, message }, Some(d)) => {
                if let Some(entry) = self.device(d) {
                    entry.errors.push(DeviceFailure {
                        error: error.clone(),
                        message: message.clone(),
                    });
                }
            }
            (Event::Interrupted { message }, _) => {
                if self.interrupted.is_none() {
                    self.interrupted = Some(Interruption {
                        at_s: t_ms / 1e3,
                        running: self
                            .devices
                            .iter()
                            .map(|d| (d.info.index, d.unfinished.clone()))
                            .collect(),
                    });
                }
                self.notes.push(message.clone());
            }
            (Event::RunEnd { .. }, _) => self.finished = true,
            (Event::Worker { pid }, Some(d)) => self.workers.push((d, *pid)),
            _ => {}
        }
    }

    /// Every device's evidence, with what the run's manifest, its plan and its telemetry
    /// add: the planned workloads that never ran, the devices that never started, each
    /// phase's telemetry, and whose processes the run's own are.
    pub fn finish(self, run: &RunEvidence) -> RunFacts {
        let RunFold {
            devices,
            mut notes,
            finished,
            interrupted,
            last_ms,
            workers,
            app,
        } = self;
        let incomplete = !finished || run.log.truncated_tail;
        if incomplete {
            notes.push(
                "the run did not finish (no run_end record): this verdict rests on the evidence written before it stopped"
                    .into(),
            );
        }
        let watch = run.manifest.settings.watch.is_some();
        let plan = planned_outcomes(run);
        let stop_on_first_failure = run.manifest.settings.stop_on_first_failure;
        let mut out: Vec<DeviceEvidence> = devices
            .into_iter()
            .map(|d| {
                if watch {
                    let mut e = DeviceEvidence::watched(&d.info);
                    e.failures = d.errors;
                    e.rate_samples = d.rates;
                    e
                } else {
                    tested(d, plan.as_deref(), stop_on_first_failure)
                }
            })
            .collect();
        // Devices the manifest selected but the events never started: not tested.
        let never_started = if run.lost(EvidenceFile::Events) {
            "not judged: the run's events are missing"
        } else if interrupted.is_some() {
            "not tested: a signal interrupted the run before this device's test started"
        } else {
            "never started before the run stopped"
        };
        for info in &run.manifest.devices {
            if !out.iter().any(|d| d.index == info.index) {
                out.push(DeviceEvidence::tested(
                    info,
                    Vec::new(),
                    Some(never_started.into()),
                ));
            }
        }
        // GPUs the run could only observe (no Vulkan driver drives them): what their
        // telemetry shows, judged by the same rules.
        for n in &run.manifest.not_tested {
            if let Some(index) = n.observed_as
                && !out.iter().any(|d| d.index == index)
            {
                out.push(DeviceEvidence::untestable(index, &n.gpu));
            }
        }
        attach_telemetry(&run.telemetry, &mut out, &mut notes);
        // An observation of a few seconds sees nothing grow: what the counts since the
        // driver loaded stood at when the run began is judged too, as `kiln health`'s
        // first check judges them.
        for d in out.iter_mut().filter(|d| {
            run.manifest
                .not_tested
                .iter()
                .any(|n| n.observed_as == Some(d.index))
        }) {
            if let Some(first) = d.telemetry.iter().find(|p| p.phase == PREFLIGHT) {
                let since = PhaseTelemetry::since_driver_load(first);
                d.telemetry.insert(0, since);
            }
        }
        // A device whose Xids neither NVML's events nor the kernel log can show: said,
        // never a quiet "no Xid".
        for d in &out {
            let problem = |p: &dyn Fn(&str) -> bool| d.setup.source_problems.iter().any(|c| p(c));
            if problem(&|c| c.starts_with(crate::telemetry::cause::EVENTS_REFUSED))
                && problem(&|c| c == crate::telemetry::cause::KERNEL_LOG_UNREADABLE)
            {
                notes.push(format!(
                    "GPU{}: no Xid is watched (NVML would not watch its events and the kernel log is not readable): an Xid during the run would go unseen",
                    d.index
                ));
            }
        }
        // Every worker of the run is kiln's own: an Xid any of them raised is kiln's. In
        // a watch, the application's processes are the ones the evidence is about.
        let own: Vec<u32> = if watch {
            app.pids.iter().copied().collect()
        } else {
            workers.iter().map(|(_, pid)| *pid).collect()
        };
        for d in &mut out {
            d.setup.kiln_pids = own.clone();
        }
        // Workers start together, so their records interleave: devices in device order.
        out.sort_by_key(|d| d.index);
        RunFacts {
            devices: out,
            notes,
            incomplete,
            interrupted,
            app,
            last_ms,
        }
    }
}

/// A tested device's evidence: its outcomes, and every planned workload with one, those
/// cut short and those that never started each saying why (JUnit's skipped cases, the
/// metrics' -1, the report's list).
fn tested(
    d: DeviceFold,
    plan: Option<&[PlannedOutcome]>,
    stop_on_first_failure: bool,
) -> DeviceEvidence {
    let DeviceFold {
        info,
        outcomes,
        unfinished,
        errors,
        rates,
    } = d;
    let error = errors.first().map(|e| e.message.clone());
    let never_ran = plan
        .map(|p| not_run(p, &outcomes, &unfinished))
        .unwrap_or_default();
    let cut_short = if unfinished.is_empty() && never_ran.is_empty() {
        error
    } else {
        let mut cut = Vec::new();
        if !unfinished.is_empty() {
            cut.push(format!("before {} finished", unfinished.join(", ")));
        }
        if !never_ran.is_empty() {
            cut.push(format!("before {} ran", never_ran.join(", ")));
        }
        Some(format!(
            "the device's test was cut short: it ended {}{}",
            cut.join(" and "),
            error.map(|e| format!(" ({e})")).unwrap_or_default()
        ))
    };
    let stopped_at_failure =
        stop_on_first_failure && outcomes.iter().any(|o| o.status == WorkloadStatus::Failed);
    let why = match errors.first() {
        Some(e) => format!(": {}", e.message),
        None if stopped_at_failure => ": the profile stops a device at its first failure".into(),
        None => ": the run stopped before it could".into(),
    };
    let mut outcomes = outcomes;
    for (list, status, said) in [
        (
            &unfinished,
            WorkloadStatus::Incomplete,
            "started but did not finish",
        ),
        (&never_ran, WorkloadStatus::NotRun, "did not run"),
    ] {
        outcomes.extend(list.iter().map(|w| WorkloadOutcome {
            workload: w.clone(),
            status,
            headline: format!("{said}{why}"),
            summary: WorkloadResult::from_json(w, serde_json::Value::Null),
        }));
    }
    let mut e = DeviceEvidence::tested(&info, outcomes, cut_short);
    e.failures = errors;
    e.rate_samples = rates;
    e
}

/// One workload outcome the plan asks for: its name and the load it runs inside of
/// (`heat` runs `vram` and `compute` together).
type PlannedOutcome = (String, Option<String>);

/// The outcomes the run's plan asks of every device (the plan, or in older manifests the
/// list of workload names); None when the manifest does not say, so that nothing is
/// judged missing on a guess.
fn planned_outcomes(run: &RunEvidence) -> Option<Vec<PlannedOutcome>> {
    if let Some(plan) = &run.plan {
        let mut out = Vec::new();
        for p in plan {
            // A load of several parts at once (`heat`) reports each part, marked as run
            // inside it.
            let name = p.config.name().as_str();
            match p.config.parts().as_slice() {
                [_] => out.push((name.to_owned(), None)),
                parts => out.extend(
                    parts
                        .iter()
                        .map(|part| ((*part).to_owned(), Some(name.to_owned()))),
                ),
            }
        }
        return Some(out);
    }
    if run.manifest.settings.plan.is_some() {
        return None;
    }
    let names = run.manifest.settings.workloads.as_ref()?;
    Some(names.iter().map(|n| (n.clone(), None)).collect())
}

/// The planned workloads that never started on a device (those that started and never
/// ended are `unfinished`). Reruns to confirm a finding add outcomes, never remove them.
fn not_run(
    plan: &[PlannedOutcome],
    outcomes: &[WorkloadOutcome],
    unfinished: &[String],
) -> Vec<String> {
    let mut left: Vec<PlannedOutcome> = plan.to_vec();
    for o in outcomes {
        let key = (o.workload.clone(), o.together_with().map(str::to_owned));
        if let Some(i) = left.iter().position(|p| *p == key) {
            left.remove(i);
        }
    }
    let mut missing: Vec<String> = Vec::new();
    for (name, with) in left {
        let label = with.unwrap_or_else(|| name.clone());
        if !unfinished.contains(&name) && !missing.contains(&label) {
            missing.push(label);
        }
    }
    missing
}

/// Lays the telemetry onto the devices' evidence: each phase's summary, the vendor's
/// identity, and why a source could not be read (said once in the run's notes, and kept
/// as a cause on every device it concerns).
fn attach_telemetry(
    records: &[TelemetryRecord],
    devices: &mut [DeviceEvidence],
    notes: &mut Vec<String>,
) {
    for r in records {
        let concerns = |d: &DeviceEvidence| r.device.is_none_or(|i| i == d.index);
        match &r.data {
            TelemetryData::Unavailable { message, cause, .. } => {
                if !notes.contains(message) {
                    notes.push(message.clone());
                }
                if let Some(cause) = cause {
                    for d in devices.iter_mut().filter(|d| concerns(d)) {
                        if !d.setup.source_problems.contains(cause) {
                            d.setup.source_problems.push(cause.clone());
                        }
                    }
                }
            }
            TelemetryData::Identity { fields } => {
                for d in devices.iter_mut().filter(|d| concerns(d)) {
                    d.setup.identity.extend(fields.clone());
                }
            }
            _ => {}
        }
    }
    for phase in summarize(records) {
        if let Some(d) = devices.iter_mut().find(|d| d.index == phase.device) {
            d.telemetry.push(phase);
        }
    }
}
