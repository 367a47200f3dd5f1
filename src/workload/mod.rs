//! Workloads: each loads one part of the device and reports what it found, behind the
//! same trait so that orchestration and reporting never depend on which one ran.

pub mod cadence;
pub mod compute;
pub mod fragment;
pub mod heat;
pub mod matrix;
pub mod pcie;
pub mod psu;
pub mod registry;
pub mod resident;
pub mod rounds;
pub mod settings;
pub mod show;
pub mod vram;

pub use registry::{PlannedWorkload, Unread, WorkloadConfig, WorkloadName, WorkloadResult};
pub use settings::{SettingError, SettingsTable};
pub use show::{Metric, MetricFamily, Section, Table, TableRow};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::evidence::{DeviceErrorKind, EventSink};
use crate::finding::Finding;
use crate::gpu::{DeviceContext, DeviceInfo, GpuError};

/// The 32-bit hash the compute and matrix shaders generate their inputs with
/// (`compute_fma.comp`, `matrix_common.glsl`), on the CPU: their references are computed
/// with the same one.
pub(crate) fn hash(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7FEB_352D);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846C_A68B);
    x ^ (x >> 16)
}

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
    /// The device's latest telemetry sample, for a load that holds a power target; None
    /// where no telemetry reaches the workload.
    pub power: Option<crate::power::PowerFeed>,
    /// Counts the moments a workload is alive without the device finishing work (an idle
    /// step it takes on purpose): the run's watchdog reads it beside the device's own
    /// progress, so a deliberate wait is never taken for a hang.
    pub alive: Arc<AtomicU64>,
    /// Set when the workloads this one runs beside have ended: a workload that runs all
    /// along (`resident`) makes its last check and reports.
    pub finish: Arc<AtomicBool>,
    /// The device's load phase, shared by its workloads (see [`cadence::SharedPhase`]).
    pub phase: cadence::SharedPhase,
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
            power: None,
            alive: Arc::new(AtomicU64::new(0)),
            finish: Arc::new(AtomicBool::new(false)),
            phase: cadence::SharedPhase::default(),
        }
    }

    /// True once the workloads this one runs beside have ended (see `finish`).
    pub fn finished(&self) -> bool {
        self.finish.load(Ordering::Relaxed)
    }

    /// Says the workload is alive though the device finishes nothing now (see `alive`).
    pub fn still_alive(&self) {
        self.alive.fetch_add(1, Ordering::Relaxed);
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

/// How a workload ended: defined with the evidence, where it is written.
pub use crate::evidence::WorkloadStatus;

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

    /// The status in words for people (`software fault`, `not run`).
    pub fn word(self) -> &'static str {
        match self {
            WorkloadStatus::SoftwareFault => "software fault",
            WorkloadStatus::NotRun => "not run",
            other => other.name(),
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

/// A workload's result: its status, its headline and its typed report. On disk (the
/// `workload_end` record, `report.json`) the report is the `summary` beside the name.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(from = "RawOutcome", into = "RawOutcome")]
pub struct WorkloadOutcome {
    /// Workload name.
    pub workload: String,
    /// How it ended.
    pub status: WorkloadStatus,
    /// One sentence for people.
    pub headline: String,
    /// Everything it measured, typed by the workload's name.
    pub summary: WorkloadResult,
}

/// A [`WorkloadOutcome`] as written: the summary is typed on reading, in one place.
#[derive(Serialize, Deserialize)]
struct RawOutcome {
    workload: String,
    status: WorkloadStatus,
    headline: String,
    summary: serde_json::Value,
}

impl From<RawOutcome> for WorkloadOutcome {
    fn from(raw: RawOutcome) -> Self {
        WorkloadOutcome {
            summary: WorkloadResult::from_json(&raw.workload, raw.summary),
            workload: raw.workload,
            status: raw.status,
            headline: raw.headline,
        }
    }
}

impl From<WorkloadOutcome> for RawOutcome {
    fn from(o: WorkloadOutcome) -> Self {
        RawOutcome {
            summary: o.summary.to_json(),
            workload: o.workload,
            status: o.status,
            headline: o.headline,
        }
    }
}

impl WorkloadOutcome {
    /// Whether the workload reported a result: false for a planned one that never
    /// started and one cut off before it reported, which are not runs that found nothing.
    pub fn reported(&self) -> bool {
        !matches!(self.summary, WorkloadResult::Unread(_))
    }

    /// Marks a workload that ended while a stop was asked for (a signal, the run ending
    /// the device's test) as stopped early, unless it already says how it was cut short:
    /// the one rule that keeps a workload's early return on a stop from reading as a run
    /// of its whole plan, whichever phase it was in. Its status and headline follow.
    pub fn stopped_on_request(&mut self) {
        self.mark_cut_short(STOPPED_ON_REQUEST);
    }

    /// Marks a workload whose run was cut short for `why` by whoever ran it (a stop, a
    /// share of the time far below the plan's), unless it already says how it was cut
    /// short: a run cut short that found nothing is never a pass. Its status and headline
    /// follow.
    pub fn mark_cut_short(&mut self, why: &str) {
        if self.summary.envelope().cut_short() {
            return;
        }
        self.summary.envelope_mut().stopped_early = Some(why.into());
        if let Some((status, headline)) = self.summary.status_and_headline() {
            self.status = status;
            self.headline = headline;
        }
    }

    /// The load this workload ran inside of (`heat`), if it did not run alone.
    pub fn together_with(&self) -> Option<&str> {
        self.summary.envelope().together_with.as_deref()
    }
}

/// What every workload's report carries besides its own measurements: how its run ended
/// and how long it took. Flattened into each report, so on disk these are the report's own
/// keys (`stopped_early`, `device_error`, `wall_s`, `together_with`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// Why it stopped before its plan finished (the budget, a stop request), if it did.
    #[serde(default)]
    pub stopped_early: Option<String>,
    /// The device failure that ended it, if any.
    #[serde(default)]
    pub device_error: Option<String>,
    /// Wall seconds it ran, set by whoever ran it.
    #[serde(default)]
    pub wall_s: f64,
    /// The load it ran inside of, beside another workload (`heat`): its rates are then
    /// not the device's alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub together_with: Option<String>,
}

impl Envelope {
    /// True when the run did not go to its planned end (a stop or a device failure).
    pub fn cut_short(&self) -> bool {
        self.stopped_early.is_some() || self.device_error.is_some()
    }

    /// Why the run was cut short, in words: the device failure first.
    pub fn why_cut_short(&self) -> Option<&str> {
        self.device_error
            .as_deref()
            .or(self.stopped_early.as_deref())
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

/// What `workload` counts when something goes wrong, as its table, its summary and the
/// live line say it: one word per fact (`wrong read`; `fault` for one that counts none).
pub fn fault_noun(workload: &str) -> &'static str {
    match workload {
        "vram" | "resident" => "wrong read",
        "compute" => "wrong result",
        "matrix" => "failed check",
        "pcie" => "corrupted transfer",
        _ => "fault",
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

/// The two accessors of a report's [`Envelope`], kept in its field `$field`: written once
/// here, used in each workload's `impl Report`.
macro_rules! envelope_in {
    ($field:ident) => {
        fn envelope(&self) -> &$crate::workload::Envelope {
            &self.$field
        }

        fn envelope_mut(&mut self) -> &mut $crate::workload::Envelope {
            &mut self.$field
        }
    };
}
pub(crate) use envelope_in;

/// A workload's typed report, as far as the shared outcome needs it.
pub trait Report: Serialize + Clone + Into<WorkloadResult> {
    /// What it found, as a status (`Failed`, `SoftwareFault`), when it found something.
    fn found(&self) -> Option<WorkloadStatus>;
    /// Whether the device began the work (a run that never began did not run).
    fn began(&self) -> bool;
    /// How the workload ended, in the order every workload judges itself in
    /// ([`WorkloadStatus::from_evidence`]).
    fn status(&self) -> WorkloadStatus {
        WorkloadStatus::from_evidence(self.found(), self.began(), self.envelope().cut_short())
    }
    /// One sentence for people.
    fn headline(&self) -> String;
    /// The part every report shares.
    fn envelope(&self) -> &Envelope;
    /// The part every report shares, to fill in.
    fn envelope_mut(&mut self) -> &mut Envelope;

    /// The shared outcome: status, headline, and the full report.
    fn outcome(&self, workload: &str) -> WorkloadOutcome {
        WorkloadOutcome {
            workload: workload.into(),
            status: self.status(),
            headline: self.headline(),
            summary: self.clone().into(),
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

/// A workload's rates over stretches of about a second, emitted as `Rates` events, so that
/// a rate that changes mid-run (another process arriving, a clock held) shows in the
/// evidence when it did. Fed each kind's running totals: its rate's name, its operations
/// and the seconds they took.
pub struct RateStretch {
    began: Instant,
    at_start: Vec<(u64, f64)>,
}

impl RateStretch {
    /// How long a stretch lasts: a rate a second keeps hours of burn-in small.
    pub const LENGTH: Duration = Duration::from_secs(1);

    /// A stretch starting from these totals.
    pub fn starting(totals: &[(&'static str, u64, f64)]) -> RateStretch {
        RateStretch {
            began: Instant::now(),
            at_start: totals.iter().map(|(_, ops, s)| (*ops, *s)).collect(),
        }
    }

    /// Once the stretch has lasted [`RateStretch::LENGTH`], emits each kind's rate over it
    /// (operations per second times `scale`: 1e-9 for 10^9 per second) and starts the
    /// next.
    pub fn emit_if_due(
        &mut self,
        workload: &str,
        totals: &[(&'static str, u64, f64)],
        scale: f64,
        events: &mut dyn EventSink,
        device: Option<usize>,
    ) {
        if self.began.elapsed() < Self::LENGTH {
            return;
        }
        let rates: std::collections::BTreeMap<String, f64> = totals
            .iter()
            .zip(&self.at_start)
            .filter_map(|((name, ops, seconds), (ops0, seconds0))| {
                let took = seconds - seconds0;
                (took > 0.0 && ops >= ops0)
                    .then(|| ((*name).to_owned(), (ops - ops0) as f64 / took * scale))
            })
            .collect();
        if !rates.is_empty() {
            events.emit(
                device,
                crate::evidence::Event::Rates {
                    workload: workload.to_owned(),
                    rates,
                },
            );
        }
        *self = RateStretch::starting(totals);
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

    /// The outcomes of what ran beside it on the host, once it has run (`psu`'s CPU
    /// load); none for most.
    fn beside(&mut self) -> Vec<WorkloadOutcome> {
        Vec::new()
    }
}

/// A workload that tests one [`Kind`] and gives its typed report: every one but `psu`'s
/// combined load. It writes only how it runs; its [`Workload`] follows (its name is the
/// kind's, its outcome the report's).
pub trait KindTest {
    /// The kind it tests: its name, and the report it gives.
    type Kind: Kind;

    /// Runs on an open device within `control`'s budget, sending evidence to `events`
    /// as it goes, and returns its typed report. A device failure mid-run is part of the
    /// report, not an error.
    fn run_report(
        &mut self,
        ctx: &mut DeviceContext,
        control: &RunControl,
        events: &mut dyn EventSink,
    ) -> Result<<Self::Kind as Kind>::Result, WorkloadError>;
}

impl<T: KindTest> Workload for T {
    fn name(&self) -> &'static str {
        T::Kind::NAME
    }

    fn run(
        &mut self,
        ctx: &mut DeviceContext,
        control: &RunControl,
        events: &mut dyn EventSink,
    ) -> Result<WorkloadOutcome, WorkloadError> {
        Ok(self.run_report(ctx, control, events)?.outcome(self.name()))
    }
}

/// A kind of workload: everything kiln knows about it, kept in its own module, so that
/// adding one is that module, its shaders, its test and one line in [`registry`]. The
/// registry builds from these the names, the settings and the typed results that the
/// profile, the run, the verdict and the reports use, none of which names a workload.
pub trait Kind {
    /// Its name in profiles, `--workloads`, evidence and reports.
    const NAME: &'static str;
    /// Its share of the time budget when a profile or the command line gives none.
    const DEFAULT_WEIGHT: u32;
    /// The Prometheus families its results give, in the order they are written (none
    /// unless it says).
    const METRICS: &'static [MetricFamily] = &[];
    /// Its settings: a profile's `[[workload]]` table, the plan in the manifest, the
    /// worker's job.
    type Settings: Clone + std::fmt::Debug + Default + Serialize + serde::de::DeserializeOwned;
    /// What one run of it found (the `summary` of its outcome). A load made of other
    /// workloads (`heat`) has none of its own: [`Composite`].
    type Result: Report + std::fmt::Debug + serde::de::DeserializeOwned;

    /// Its settings from a profile's `[[workload]]` table (defaults for what is absent).
    fn from_profile(table: &mut dyn SettingsTable) -> Result<Self::Settings, SettingError>;
    /// The parts to run: one, or several at once, each on a context of its own.
    fn build(settings: &Self::Settings) -> Vec<Box<dyn Workload + Send>>;
    /// What it will do on `device`, for `--dry-run` and the checks before a run. An
    /// error is settings that cannot work on this device (a usage error, refused before
    /// anything starts); the device's own state (no memory free) is said in the detail.
    fn describe(settings: &Self::Settings, device: &DeviceInfo) -> Result<PlanDetail, String>;
    /// What its result proves by itself. Rules that weigh a result against references,
    /// telemetry or other devices are the verdict's.
    fn judge(result: &Self::Result) -> Vec<Finding>;
    /// Its numbers for Prometheus.
    fn metrics(_result: &Self::Result) -> Vec<Metric> {
        Vec::new()
    }
    /// The rates it measured that a healthy device of the same model matches: what
    /// devices are compared with their peers and with a baseline run on (`vram_gib_per_s`,
    /// `fp32_gops`). Rates that depend on more than the device (a socket's PCIe switch)
    /// are named so the comparison can leave them out (`pcie_...`).
    fn rates(_result: &Self::Result) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
    /// Its part of the text and HTML reports.
    fn sections(_result: &Self::Result) -> Vec<Section> {
        Vec::new()
    }
}

/// What a planned workload will do on one device (`--dry-run`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanDetail {
    /// In a few words.
    pub detail: String,
    /// Bytes of VRAM it will test, where it tests VRAM.
    pub vram_bytes: Option<u64>,
    /// The device-local heap those bytes come from.
    pub heap_bytes: Option<u64>,
}

/// The result of a load made only of other workloads (`heat`): there is none, since each
/// part reports its own outcome, marked [`Envelope::together_with`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Composite {}

impl Report for Composite {
    fn found(&self) -> Option<WorkloadStatus> {
        match *self {}
    }
    fn began(&self) -> bool {
        match *self {}
    }
    fn headline(&self) -> String {
        match *self {}
    }
    fn envelope(&self) -> &Envelope {
        match *self {}
    }
    fn envelope_mut(&mut self) -> &mut Envelope {
        match *self {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stretch_of_a_second_gives_each_kind_its_rate_once() {
        let mut sink = crate::evidence::MemorySink::default();
        let mut stretch = RateStretch::starting(&[("compute_fp32_gops", 1_000, 1.0)]);
        let fp32 = |ops: u64, s: f64| [("compute_fp32_gops", ops, s)];
        // Too soon: nothing yet.
        stretch.emit_if_due("compute", &fp32(3_000, 2.0), 1.0, &mut sink, Some(0));
        assert!(sink.events.is_empty());
        stretch.began -= RateStretch::LENGTH;
        stretch.emit_if_due("compute", &fp32(5_000, 3.0), 1.0, &mut sink, Some(0));
        let [record] = sink.events.as_slice() else {
            panic!("one event: {:?}", sink.events);
        };
        let crate::evidence::Event::Rates { workload, rates } = &record.event else {
            panic!("{:?}", record.event);
        };
        assert_eq!(workload, "compute");
        assert_eq!(
            rates["compute_fp32_gops"], 2_000.0,
            "4000 operations in 2 s"
        );
        // The next stretch starts from there; a kind that did not run says nothing.
        stretch.began -= RateStretch::LENGTH;
        stretch.emit_if_due("compute", &fp32(5_000, 3.0), 1.0, &mut sink, Some(0));
        assert_eq!(sink.events.len(), 1);
    }
}
