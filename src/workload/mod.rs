//! Workloads: each loads one part of the device and reports what it found, behind the
//! same trait so that orchestration and reporting never depend on which one ran.

pub mod compute;
pub mod fragment;
pub mod pcie;
pub mod vram;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::evidence::{DeviceErrorKind, EventSink};
use crate::gpu::{DeviceContext, GpuError};

/// When to stop, and where progress goes.
#[derive(Clone)]
pub struct RunControl {
    /// No new work starts after this instant.
    pub deadline: Option<Instant>,
    /// Work in progress is abandoned after this instant (a step never runs forever).
    pub hard_deadline: Option<Instant>,
    /// Set by a signal handler or a watchdog: stop at the next step boundary.
    pub stop: Arc<AtomicBool>,
    /// Progress display (hidden when stderr is not a terminal).
    pub progress: indicatif::ProgressBar,
}

impl RunControl {
    /// A control with a time budget of `duration` from now (None: no budget).
    pub fn new(duration: Option<Duration>) -> RunControl {
        let now = Instant::now();
        RunControl {
            deadline: duration.map(|d| now + d),
            hard_deadline: duration.map(|d| now + d * 2 + Duration::from_secs(30)),
            stop: Arc::new(AtomicBool::new(false)),
            progress: indicatif::ProgressBar::hidden(),
        }
    }

    /// True once the budget is spent: start nothing new.
    pub fn out_of_time(&self) -> bool {
        self.stopped() || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// True when a stop was asked for (a signal, or the run ending the device's test): a
    /// workload that ends for this says so in `stopped_early`, never as a pass.
    pub fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// True when work in progress must stop now.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.hard_deadline.is_some_and(|d| Instant::now() >= d)
    }
}

/// How a workload ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadStatus {
    /// Ran and found nothing wrong.
    Passed,
    /// Found hardware faults.
    Failed,
    /// Found a software problem (fragmentation, a leak): the card may be fine.
    SoftwareFault,
    /// Ran only partly (time, stop request or device failure) and found nothing wrong in
    /// what ran.
    Incomplete,
    /// Could not run at all.
    NotRun,
}

impl WorkloadStatus {
    /// The status as it appears in evidence.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadStatus::Passed => "passed",
            WorkloadStatus::Failed => "failed",
            WorkloadStatus::SoftwareFault => "software_fault",
            WorkloadStatus::Incomplete => "incomplete",
            WorkloadStatus::NotRun => "not_run",
        }
    }

    /// The order every workload judges itself in: what it found outranks how far it got, and
    /// a run cut short (the budget, a stop, a device failure) that found nothing is not a pass.
    /// `found` is the workload's fault status when it found one.
    pub fn from_evidence(found: Option<WorkloadStatus>, ran: bool, cut_short: bool) -> Self {
        match found {
            Some(status) => status,
            None if !ran => WorkloadStatus::NotRun,
            None if cut_short => WorkloadStatus::Incomplete,
            None => WorkloadStatus::Passed,
        }
    }
}

/// A workload's result: its status and its full, workload-specific summary.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkloadOutcome {
    /// Workload name.
    pub workload: String,
    /// How it ended.
    pub status: WorkloadStatus,
    /// One sentence for people.
    pub headline: String,
    /// Everything it measured.
    pub summary: serde_json::Value,
}

/// The summary key that marks a workload run beside another load (the `heat` workload):
/// its rates are not the device's alone.
pub const TOGETHER_WITH: &str = "together_with";

impl WorkloadOutcome {
    /// The load this workload ran inside of (`heat`), if it did not run alone.
    pub fn together_with(&self) -> Option<&str> {
        self.summary.get(TOGETHER_WITH).and_then(|t| t.as_str())
    }

    /// Marks this outcome as run inside `load`, beside another workload.
    pub fn mark_together_with(&mut self, load: &str) {
        if let Some(map) = self.summary.as_object_mut() {
            map.insert(TOGETHER_WITH.into(), load.into());
        }
    }
}

/// The kinds of one workload's own findings; each finding's sentence begins with its
/// kind's name (`leak: ...`).
pub trait FindingKind: Copy {
    /// The name a finding's sentence begins with (`leak`).
    fn name(self) -> &'static str;
    /// The kind a sentence read back names by its beginning: evidence written before
    /// findings were typed carries the sentence alone.
    fn of(message: &str) -> Self;
}

/// One of a workload's own findings, evidence for the verdict: its kind, which the rules
/// match on, and the sentence, which begins with the kind's name. Written as the sentence
/// alone (as every kiln wrote it), and read back from it by [`FindingKind::of`], the one
/// place a sentence is classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadFinding<K> {
    /// What was found.
    pub kind: K,
    /// The sentence for people, beginning with the kind's name.
    pub message: String,
}

impl<K: FindingKind> WorkloadFinding<K> {
    /// A finding of `kind`: its name, then `what`.
    pub fn new(kind: K, what: impl std::fmt::Display) -> WorkloadFinding<K> {
        WorkloadFinding {
            kind,
            message: format!("{}: {what}", kind.name()),
        }
    }

    /// A finding read back from its sentence.
    pub fn from_message(message: String) -> WorkloadFinding<K> {
        WorkloadFinding {
            kind: K::of(&message),
            message,
        }
    }
}

impl<K> std::fmt::Display for WorkloadFinding<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl<K> Serialize for WorkloadFinding<K> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.message)
    }
}

impl<'de, K: FindingKind> Deserialize<'de> for WorkloadFinding<K> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let message = String::deserialize(deserializer)?;
        Ok(WorkloadFinding::from_message(message))
    }
}

/// The sentences of `findings`, joined for a headline.
pub fn join_findings<K>(findings: &[WorkloadFinding<K>]) -> String {
    findings
        .iter()
        .map(|f| f.message.as_str())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Failures that stop a workload before it produced a result.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The device failed.
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// The settings cannot work on this device.
    #[error("{0}")]
    Config(String),
}

/// A workload's typed report, as far as the shared outcome needs it.
pub trait Report: Serialize {
    /// How the workload ended.
    fn status(&self) -> WorkloadStatus;
    /// One sentence for people.
    fn headline(&self) -> String;

    /// The shared outcome: status, headline, and the full report as JSON.
    fn outcome(&self, workload: &str) -> WorkloadOutcome {
        WorkloadOutcome {
            workload: workload.into(),
            status: self.status(),
            headline: self.headline(),
            summary: serde_json::to_value(self).unwrap_or_default(),
        }
    }
}

/// What a workload says in `stopped_early` when a stop request ended it.
pub const STOPPED_ON_REQUEST: &str =
    "stopped on request (a signal, or the run ending the device's test) before its plan finished";

/// Names a device failure for the evidence (`device_lost`, `timeout`, ...).
pub fn error_kind(e: &GpuError) -> DeviceErrorKind {
    match e {
        GpuError::DeviceLost { .. } => DeviceErrorKind::DeviceLost,
        GpuError::Timeout { .. } => DeviceErrorKind::Timeout,
        GpuError::OutOfMemory { .. } => DeviceErrorKind::OutOfMemory,
        _ => DeviceErrorKind::Other,
    }
}

/// Records a device failure that ended a workload; returns the sentence for its report.
pub fn record_device_error(
    events: &mut dyn EventSink,
    device: Option<usize>,
    e: &GpuError,
) -> String {
    events.emit(
        device,
        crate::evidence::Event::DeviceError {
            error: error_kind(e),
            message: e.to_string(),
        },
    );
    e.to_string()
}

/// A workload: loads one part of a device and reports what it found.
pub trait Workload {
    /// Stable name used in evidence and reports.
    fn name(&self) -> &'static str;

    /// Runs on an open device within `control`'s budget, sending evidence to `events`
    /// as it goes. A device failure mid-run is part of the outcome, not an error.
    fn run(
        &mut self,
        ctx: &mut DeviceContext,
        control: &RunControl,
        events: &mut dyn EventSink,
    ) -> Result<WorkloadOutcome, WorkloadError>;
}
