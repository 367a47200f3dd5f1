//! The verdict as a pure function of the run directory: `kiln verdict RUN_DIR` rebuilds
//! the report from the manifest, the events and the telemetry alone, also for a run that
//! never finished (a crash, a hang, a kill), which it marks incomplete.
//!
//! It reads top to bottom ([`judge`]): the events folded once into each device's evidence
//! ([`fold`]); every rule of the card ([`rules`]) and of a watched application ([`watch`])
//! run over that evidence; which finding explains which resolved once per device
//! ([`resolve`]); the result settled from what is left ([`settle`]); and the report built
//! once ([`model`]), never patched after.

pub mod baseline;
pub mod catalogue;
pub mod evidence;
pub mod fold;
mod model;
pub mod resolve;
pub mod rules;
pub mod settle;
pub mod watch;
pub mod xid;

use std::path::Path;

use crate::evidence::utc_timestamp;
use crate::finding::Finding;
use crate::rundir::RunEvidence;
use crate::thresholds::{self, Thresholds};

pub use evidence::{DeviceEvidence, DeviceFailure, RateSample, Role, Setup};
pub use fold::{Interruption, RunFacts, RunFold};
pub use model::{DeviceReport, Report, RunOutline};
pub use settle::DeviceResult;

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

/// What the run itself knows at its end that its directory does not hold yet: it judges
/// its evidence before it writes the `run_end` record.
#[derive(Debug, Clone, Default)]
pub struct LiveEnd {
    /// Wall seconds, as the run measured them.
    pub wall_s: f64,
    /// UTC end.
    pub finished_utc: String,
    /// Facts the run learnt at its end (evidence it could not write).
    pub notes: Vec<String>,
    /// How many of the first notes were said at the terminal as the run started.
    pub notes_said: usize,
}

/// Rebuilds the report of the run in `dir`, judged by the run's own thresholds, or by
/// them with the file `overlay` laid over them (said in the report's notes).
pub fn rebuild(dir: &Path, overlay: Option<&Path>) -> Result<Report, VerdictError> {
    judge_dir(dir, overlay, None)
}

/// A run read before, judged again as [`rebuild`] does, with these device rules run in the
/// order given: the tests prove with it that the order of the rules changes nothing.
pub fn rebuild_with(
    evidence: &RunEvidence,
    overlay: Option<&Path>,
    with: &[(&str, rules::Rule)],
) -> Result<Report, VerdictError> {
    judge(evidence, overlay, None, with)
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
    let (laid, changed) = own
        .overlay(path)
        .map_err(|e| VerdictError::Thresholds(e.to_string()))?;
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
pub fn judge_dir(
    dir: &Path,
    overlay: Option<&Path>,
    live: Option<LiveEnd>,
) -> Result<Report, VerdictError> {
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
    live: Option<LiveEnd>,
) -> Result<Report, VerdictError> {
    judge(evidence, overlay, live, rules::RULES)
}

/// One device judged alone, as a run judges each of its devices (every rule, then the
/// resolution, then its result): `kiln health`'s check of a card it observed.
pub fn judge_device(evidence: DeviceEvidence, t: &Thresholds) -> DeviceReport {
    let found = rules::judge(&evidence, t);
    let findings = resolve::resolve(found, &resolve::Context::default());
    let settled = settle::settle(&evidence, &findings);
    DeviceReport::judged(evidence, findings, settled, false)
}

/// [`judge_evidence`] with these device rules: the whole verdict, top to bottom.
fn judge(
    evidence: &RunEvidence,
    overlay: Option<&Path>,
    live: Option<LiveEnd>,
    with: &[(&str, rules::Rule)],
) -> Result<Report, VerdictError> {
    let manifest = &evidence.manifest;
    let (thresholds, overlaid) = run_thresholds(&manifest.settings, overlay)?;
    let t = &thresholds;
    let mut fold = RunFold::new(live.is_some(), overlaid.into_iter().collect());
    for r in &evidence.log.records {
        fold.apply(r.t_ms, r.device, &r.event);
    }
    let RunFacts {
        devices,
        mut notes,
        incomplete,
        interrupted,
        app,
        last_ms,
    } = fold.finish(evidence);
    let watch = manifest.settings.watch.as_ref().map(|settings| {
        watch::Watch::read(
            &app,
            settings,
            &evidence.telemetry,
            evidence.trace.as_ref(),
            &devices,
            t,
            &mut notes,
        )
    });
    let found = findings(
        &devices,
        evidence,
        interrupted.as_ref(),
        watch.as_ref(),
        t,
        with,
    );
    let context = watch
        .as_ref()
        .map(watch::Watch::context)
        .unwrap_or_default();
    let mut reports = Vec::new();
    // The result each device's own findings gave, before a stand-in's.
    let mut own_results = Vec::new();
    for (d, found) in devices.into_iter().zip(found) {
        let findings = resolve::resolve(found, &context);
        let settled = settle::settle(&d, &findings);
        own_results.push(settled.result);
        let stand_in = manifest.stand_in && stands_in(&d, &settled, watch.is_some(), &mut notes);
        let settled = if stand_in {
            settle::stood_in(settled, &d, watch.is_some())
        } else {
            settled
        };
        let untestable = observed(evidence, d.index).is_some();
        let mut report = DeviceReport::judged(d, findings, settled, stand_in);
        report.not_tested = untestable;
        reports.push(report);
    }
    let application = match (watch, &manifest.settings.watch) {
        (Some(w), Some(settings)) => {
            let device = w
                .slot()
                .and_then(|s| Some((reports.get(s)?, *own_results.get(s)?)))
                .map(|(d, result)| (d.index, &d.findings[..], result));
            Some(w.report(&app, settings, device))
        }
        _ => None,
    };
    // GPUs the machine has that Vulkan could not see: named, not tested, never a pass
    // (those the run observed were judged above, on their telemetry).
    let first_free = reports.iter().map(|d| d.index + 1).max().unwrap_or(0);
    for (i, missing) in manifest
        .not_tested
        .iter()
        .filter(|n| n.observed_as.is_none())
        .enumerate()
    {
        let finding = rules::gpu_not_visible(&missing.gpu, &missing.cause, false);
        reports.push(DeviceReport::not_tested(first_free + i, missing, finding));
    }
    let live = live.unwrap_or_default();
    notes.extend(live.notes);
    let run_id = evidence
        .dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The run's own finish: its start and its last record (the end of the run), so that a
    // report rebuilt later keeps the times of the run it reports.
    let finished_utc = if live.finished_utc.is_empty() {
        crate::evidence::parse_utc_timestamp(&manifest.started_utc)
            .map(|t| t + std::time::Duration::from_secs_f64(last_ms.max(0.0) / 1e3))
            .map_or_else(
                || utc_timestamp(std::time::SystemTime::now()),
                utc_timestamp,
            )
    } else {
        live.finished_utc
    };
    let outline = RunOutline {
        run_id,
        run_dir: evidence.dir.display().to_string(),
        started_utc: manifest.started_utc.clone(),
        finished_utc,
        wall_s: if live.wall_s > 0.0 {
            live.wall_s
        } else {
            last_ms / 1e3
        },
        notes,
        notes_said: live.notes_said,
        incomplete,
        interrupted: interrupted.is_some(),
        no_gpu_tested: manifest.stand_in
            || (manifest.devices.is_empty() && !manifest.not_tested.is_empty()),
        application,
    };
    Ok(Report::new(outline, reports))
}

/// Every device's findings as the rules give them, before resolution: its own rules', its
/// comparison with its peers, what holds for the run as a whole (evidence lost, a stop
/// before the plan's end) and, in a watch, the application's rules'.
fn findings(
    devices: &[DeviceEvidence],
    evidence: &RunEvidence,
    interrupted: Option<&Interruption>,
    watch: Option<&watch::Watch>,
    t: &Thresholds,
    with: &[(&str, rules::Rule)],
) -> Vec<Vec<Finding>> {
    let from_peers = rules::peers(devices, t);
    let from_fabric = rules::fabric(devices);
    devices
        .iter()
        .zip(from_peers.into_iter().zip(from_fabric))
        .enumerate()
        .map(|(slot, (d, (peers, fabric)))| {
            let mut found = rules::judge_with(with, d, t);
            found.extend(peers);
            found.extend(fabric);
            found.extend(evidence.missing.iter().map(rules::evidence_missing));
            if let Some(i) = interrupted {
                let running = i.running.get(&d.index).map_or(&[][..], Vec::as_slice);
                found.push(if watch.is_some() {
                    watch::rules::watch_interrupted(i.at_s)
                } else {
                    rules::run_interrupted(i.at_s, running, &d.workloads)
                });
            }
            if let Some(w) = watch {
                found.extend(w.findings(slot, d, t));
            }
            // A GPU observed because it cannot be tested: never passed as tested.
            if let Some(n) = observed(evidence, d.index) {
                found.push(rules::gpu_not_visible(&n.gpu, &n.cause, true));
            }
            found
        })
        .collect()
}

/// The GPU the run observed, not tested, under device index `index`, where it is one.
fn observed(evidence: &RunEvidence, index: usize) -> Option<&crate::evidence::NotTested> {
    evidence
        .manifest
        .not_tested
        .iter()
        .find(|n| n.observed_as == Some(index))
}

/// Whether the CPU Vulkan device, run in a GPU's place, stands in: its result is then
/// "could not test". What a watched application's memory showed stands on any device, so
/// a watch's finding of weight is kept, and that no GPU was watched is said beside it.
fn stands_in(
    d: &DeviceEvidence,
    settled: &settle::Settled,
    watching: bool,
    notes: &mut Vec<String>,
) -> bool {
    if watching
        && !matches!(
            settled.result,
            DeviceResult::Pass | DeviceResult::Inconclusive
        )
    {
        notes.push(format!(
            "no GPU was watched: {} is the CPU Vulkan device; what its memory showed of the application stands, nothing is said of a card",
            d.name
        ));
        return false;
    }
    true
}
