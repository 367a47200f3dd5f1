//! The verdict as a pure function of the run directory: `kiln verdict RUN_DIR` rebuilds
//! the report from the manifest, the events and the telemetry alone, also for a run that
//! never finished (a crash, a hang, a kill), which it marks incomplete.

pub mod app;
mod app_rules;
pub mod app_words;
pub mod baseline;
pub mod catalogue;
mod model;
pub mod resolve;
pub mod rules;

pub mod xid;

use std::path::Path;

use crate::evidence::{Event, EvidenceFile, utc_timestamp};
use crate::gpu::DeviceInfo;
use crate::rundir::RunEvidence;
use crate::telemetry::record::{TelemetryData, TelemetryRecord};
use crate::telemetry::summary::summarize;
use crate::thresholds;
use crate::workload::{WorkloadOutcome, WorkloadResult, WorkloadStatus};

pub use model::{
    DeviceEvidence, DeviceFailure, DeviceReport, DeviceResult, RateSample, Report, Setup,
};

/// Why a run directory could not be judged.
#[derive(Debug, thiserror::Error)]
pub enum VerdictError {
    /// The directory could not be read as a run directory.
    #[error(transparent)]
    RunDir(#[from] crate::rundir::RunDirError),
    /// The thresholds the run recorded, or a file given to judge it by, cannot be used.
    #[error("{0}")]
    Thresholds(String),
}

/// When a signal stopped the run, and what each device was running then.
struct Interruption {
    /// Seconds since the run started.
    at_s: f64,
    /// The workloads each device (by index) had started and not ended.
    running: std::collections::BTreeMap<usize, Vec<String>>,
}

/// What the events say about one device.
struct DeviceEvents {
    info: DeviceInfo,
    outcomes: Vec<WorkloadOutcome>,
    /// Workloads that started but never ended.
    unfinished: Vec<String>,
    /// The device failures recorded, in order.
    errors: Vec<DeviceFailure>,
    /// Its rates at moments of the run.
    rates: Vec<RateSample>,
}

/// Rebuilds the report of the run in `dir`, judged by the run's own thresholds, or by
/// them with the file `overlay` laid over them (said in the report's notes).
pub fn rebuild(dir: &Path, overlay: Option<&Path>) -> Result<Report, VerdictError> {
    judge_dir(dir, overlay, false)
}

/// A run read before, judged again as [`rebuild`] does, with these device rules run in the
/// order given: the tests prove with it that the order of the rules changes nothing.
pub fn rebuild_with(
    evidence: &RunEvidence,
    overlay: Option<&Path>,
    with: &[(&str, rules::Rule)],
) -> Result<Report, VerdictError> {
    judge(evidence, overlay, false, with)
}

/// The thresholds a run is judged by: those its manifest recorded (kiln's defaults for a
/// manifest older than that record), with `overlay`'s fields laid over them; and, where
/// the overlay changed any, the note that says so, so that a page judged by other
/// thresholds than the run's never passes for the run's own verdict.
pub fn run_thresholds(
    settings: &crate::evidence::RunSettings,
    overlay: Option<&Path>,
) -> Result<(thresholds::Thresholds, Option<String>), VerdictError> {
    let own = settings.thresholds.clone().unwrap_or_default();
    own.validate().map_err(|e| {
        VerdictError::Thresholds(format!(
            "manifest.json: the thresholds the run recorded are not what kiln wrote ({e})"
        ))
    })?;
    let Some(path) = overlay else {
        return Ok((own, None));
    };
    let (laid, changed) = own.overlay(path).map_err(VerdictError::Thresholds)?;
    let note = (!changed.is_empty()).then(|| {
        format!(
            "judged with the thresholds of {} laid over the run's own ({} changed): not the verdict the run itself gave",
            path.display(),
            changed.join(", ")
        )
    });
    Ok((laid, note))
}

/// Judges the run in `dir` by its own thresholds (see [`run_thresholds`] for `overlay`).
/// `live` is for the run itself, which judges its evidence before it writes the `run_end`
/// record; a rebuild without that record is of a run that never finished.
pub fn judge_dir(dir: &Path, overlay: Option<&Path>, live: bool) -> Result<Report, VerdictError> {
    judge_evidence(
        &RunEvidence::read(dir).map_err(VerdictError::RunDir)?,
        overlay,
        live,
    )
}

/// Judges a run directory already read (see [`judge_dir`]).
pub fn judge_evidence(
    evidence: &RunEvidence,
    overlay: Option<&Path>,
    live: bool,
) -> Result<Report, VerdictError> {
    judge(evidence, overlay, live, rules::RULES)
}

/// [`judge_evidence`] with these device rules.
fn judge(
    evidence: &RunEvidence,
    overlay: Option<&Path>,
    live: bool,
    with: &[(&str, rules::Rule)],
) -> Result<Report, VerdictError> {
    let RunEvidence {
        dir,
        manifest,
        plan: _,
        missing,
        log,
        telemetry,
        trace,
    } = evidence;
    let (thresholds, overlaid) = run_thresholds(&manifest.settings, overlay)?;
    let thresholds = &thresholds;
    let plan = planned_outcomes(evidence);
    let stop_on_first_failure = manifest.settings.stop_on_first_failure;
    let mut notes: Vec<String> = overlaid.into_iter().collect();
    let mut devices: Vec<DeviceEvents> = Vec::new();
    let mut finished = live;
    let mut interrupted: Option<Interruption> = None;
    let mut last_ms = 0.0;
    let mut workers: Vec<(usize, u32)> = Vec::new();
    let watch = manifest.settings.watch.clone();
    let mut app_events = app::AppEvents::default();
    for r in &log.records {
        last_ms = r.t_ms;
        app_events.take(r.t_ms, &r.event);
        match (&r.event, r.device) {
            (Event::Note { message }, None) => notes.push(message.clone()),
            // A device's own facts (a confirmation rerun, a stop at the first failure).
            (Event::Note { message }, Some(d)) => notes.push(format!("GPU{d}: {message}")),
            (Event::DeviceStart { info }, _) => devices.push(DeviceEvents {
                info: (**info).clone(),
                outcomes: Vec::new(),
                unfinished: Vec::new(),
                errors: Vec::new(),
                rates: Vec::new(),
            }),
            (Event::Rates { rates, .. }, Some(d)) => {
                if let Some(entry) = devices.iter_mut().find(|e| e.info.index == d) {
                    entry
                        .rates
                        .extend(rates.iter().map(|(name, value)| RateSample {
                            t_ms: r.t_ms,
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
                if let Some(entry) = devices.iter_mut().find(|e| e.info.index == d) {
                    entry.rates.push(RateSample {
                        t_ms: r.t_ms,
                        name: crate::product::Rate::Vram.name().to_owned(),
                        value: crate::units::to_gib(*bytes) / (*gpu_ns as f64 * 1e-9),
                    });
                }
            }
            (Event::WorkloadStart { workload, .. }, Some(d)) => {
                if let Some(entry) = devices.iter_mut().find(|e| e.info.index == d) {
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
                if let Some(entry) = devices.iter_mut().find(|e| e.info.index == d) {
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
                if let Some(entry) = devices.iter_mut().find(|e| e.info.index == d) {
                    entry.errors.push(DeviceFailure {
                        error: error.clone(),
                        message: message.clone(),
                    });
                }
            }
            (Event::Interrupted { message }, _) => {
                if interrupted.is_none() {
                    interrupted = Some(Interruption {
                        at_s: r.t_ms / 1e3,
                        running: devices
                            .iter()
                            .map(|d| (d.info.index, d.unfinished.clone()))
                            .collect(),
                    });
                }
                notes.push(message.clone());
            }
            (Event::RunEnd { .. }, _) => finished = true,
            (Event::Worker { pid }, Some(d)) => workers.push((d, *pid)),
            _ => {}
        }
    }
    let incomplete = !finished || log.truncated_tail;
    if incomplete {
        notes.push(
            "the run did not finish (no run_end record): this verdict rests on the evidence written before it stopped"
                .into(),
        );
    }
    let mut reports: Vec<DeviceReport> = devices
        .into_iter()
        .map(
            |DeviceEvents {
                 info,
                 outcomes,
                 unfinished,
                 errors,
                 rates,
             }| {
                let error = errors.first().map(|e| e.message.clone());
                let never_ran = plan
                    .as_ref()
                    .map(|p| not_run(p, &outcomes, &unfinished))
                    .unwrap_or_default();
                let failure = if unfinished.is_empty() && never_ran.is_empty() {
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
                // Every planned workload has an outcome: those cut short and those that
                // never started say so, each with why (JUnit's skipped cases, the
                // metrics' -1, the report's list).
                let stopped_at_failure = stop_on_first_failure
                    && outcomes.iter().any(|o| o.status == WorkloadStatus::Failed);
                let why = match errors.first() {
                    Some(e) => format!(": {}", e.message),
                    None if stopped_at_failure => {
                        ": the profile stops a device at its first failure".into()
                    }
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
                let mut report = if watch.is_some() {
                    DeviceReport::watched(&info)
                } else {
                    DeviceReport::new(&info, outcomes, failure)
                };
                report.failures = errors;
                report.rate_samples = rates;
                report
            },
        )
        .collect();
    // Devices the manifest selected but the events never started: not tested.
    let never_started = if missing.contains(&EvidenceFile::Events) {
        "not judged: the run's events are missing"
    } else if interrupted.is_some() {
        "not tested: a signal interrupted the run before this device's test started"
    } else {
        "never started before the run stopped"
    };
    for info in &manifest.devices {
        if !reports.iter().any(|d| d.index == info.index) {
            reports.push(DeviceReport::new(
                info,
                Vec::new(),
                Some(never_started.into()),
            ));
        }
    }
    attach_telemetry(telemetry, &mut reports, &mut notes);
    // A device whose Xids neither NVML's events nor the kernel log can show: said, never a
    // quiet "no Xid".
    for d in &reports {
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
    // Every worker of the run is kiln's own: an Xid any of them raised is kiln's. In a
    // watch, the application's processes are the ones the evidence is about.
    let own: Vec<u32> = if watch.is_some() {
        app_events.pids.iter().copied().collect()
    } else {
        workers.iter().map(|(_, pid)| *pid).collect()
    };
    for d in &mut reports {
        d.setup.kiln_pids = own.clone();
    }
    // Workers start together, so their records interleave: report in device order.
    reports.sort_by_key(|d| d.index);
    for d in &mut reports {
        d.judge_with(with, thresholds);
    }
    let from_peers = rules::peers(&reports, thresholds);
    for (d, more) in reports.iter_mut().zip(from_peers) {
        d.add_findings(more);
    }
    // What holds for the run as a whole holds for every device it tested: evidence lost,
    // and a stop before the plan's end, each keep a device from passing.
    for d in &mut reports {
        let mut more: Vec<_> = missing
            .iter()
            .map(|f| rules::evidence_missing(*f))
            .collect();
        if let Some(i) = &interrupted {
            let running = i.running.get(&d.index).map_or(&[][..], Vec::as_slice);
            more.push(if watch.is_some() {
                app_rules::watch_interrupted(i.at_s)
            } else {
                rules::run_interrupted(i.at_s, running, &d.workloads)
            });
        }
        if !more.is_empty() {
            d.add_findings(more);
        }
    }
    let application = watch.as_ref().map(|settings| {
        app::judge(
            &app_events,
            settings,
            telemetry,
            trace.as_ref(),
            &mut reports,
            thresholds,
            &mut notes,
        )
    });
    if manifest.stand_in {
        for d in &mut reports {
            // What a watched application's memory showed stands on any device; that no
            // GPU was watched is said beside it.
            if watch.is_some()
                && !matches!(
                    d.result,
                    model::DeviceResult::Pass | model::DeviceResult::Inconclusive
                )
            {
                notes.push(format!(
                    "no GPU was watched: {} is the CPU Vulkan device; what its memory showed of the application stands, nothing is said of a card",
                    d.name
                ));
                continue;
            }
            d.stand_in(watch.is_some());
        }
    }
    // GPUs the machine has that Vulkan could not see: named, not tested, never a pass.
    let first_free = reports.iter().map(|d| d.index + 1).max().unwrap_or(0);
    for (i, missing) in manifest.not_tested.iter().enumerate() {
        reports.push(DeviceReport::not_tested(first_free + i, missing));
    }
    let run_id = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut report = Report::new(
        run_id,
        dir.display().to_string(),
        manifest.started_utc.clone(),
        last_ms / 1e3,
        notes,
        reports,
    );
    report.incomplete = incomplete;
    report.interrupted = interrupted.is_some();
    report.application = application;
    report.no_gpu_tested =
        manifest.stand_in || (manifest.devices.is_empty() && !manifest.not_tested.is_empty());
    // The run's own finish: its start and its last record (the end of the run), so that a
    // report rebuilt later keeps the times of the run it reports.
    report.finished_utc = crate::evidence::parse_utc_timestamp(&report.started_utc)
        .map(|t| t + std::time::Duration::from_secs_f64(last_ms.max(0.0) / 1e3))
        .map_or_else(
            || utc_timestamp(std::time::SystemTime::now()),
            utc_timestamp,
        );
    Ok(report)
}

/// One workload outcome the plan asks for: its name and the load it runs inside of
/// (`heat` runs `vram` and `compute` together).
type PlannedOutcome = (String, Option<String>);

/// The outcomes the run's plan asks of every device (the plan, or in older manifests the
/// list of workload names); None when the manifest does not say, so that nothing is
/// judged missing on a guess.
fn planned_outcomes(evidence: &RunEvidence) -> Option<Vec<PlannedOutcome>> {
    if let Some(plan) = &evidence.plan {
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
    if evidence.manifest.settings.plan.is_some() {
        return None;
    }
    let names = evidence.manifest.settings.workloads.as_ref()?;
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

/// Lays the telemetry onto the devices' reports: each phase's summary, the vendor's
/// identity, and why a source could not be read (said once in the run's notes, and kept as
/// a cause on every device it concerns). The live run and `kiln verdict` both use it, so a
/// rebuilt verdict sees exactly what the live one saw.
pub fn attach_telemetry(
    records: &[TelemetryRecord],
    reports: &mut [DeviceReport],
    notes: &mut Vec<String>,
) {
    for r in records {
        let concerns = |d: &DeviceReport| r.device.is_none_or(|i| i == d.index);
        match &r.data {
            TelemetryData::Unavailable { message, cause, .. } => {
                if !notes.contains(message) {
                    notes.push(message.clone());
                }
                if let Some(cause) = cause {
                    for d in reports.iter_mut().filter(|d| concerns(d)) {
                        if !d.setup.source_problems.contains(cause) {
                            d.setup.source_problems.push(cause.clone());
                        }
                    }
                }
            }
            TelemetryData::Identity { fields } => {
                for d in reports.iter_mut().filter(|d| concerns(d)) {
                    d.setup.identity.extend(fields.clone());
                }
            }
            _ => {}
        }
    }
    for phase in summarize(records) {
        if let Some(d) = reports.iter_mut().find(|d| d.index == phase.device) {
            d.telemetry.push(phase);
        }
    }
}
