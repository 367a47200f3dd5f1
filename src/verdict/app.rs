//! `kiln watch`'s verdict: is it the card, the machine or the software? The application's
//! memory over time (the driver's per-process figure, else the allocation trace), its
//! iterations, the failures it met and the card's own evidence, read from the run
//! directory alone, and judged by the fingerprint rules of REFERENCE.md §7 in
//! [`super::app_rules`], one rule per cause.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::app_rules;
use super::model::DeviceReport;
use crate::evidence::trace::{Trace, TraceEvent, VkError, same_device};
use crate::evidence::{AppFailure, Event, WatchSettings};
use crate::finding::{Class, FindingCode};
use crate::telemetry::reading::Reading;
use crate::telemetry::record::{TelemetryData, TelemetryRecord};
use crate::telemetry::signals::{self, Signal};
use crate::thresholds::Thresholds;

/// What a watch's events say of the application, gathered in order.
#[derive(Debug, Clone, Default)]
pub struct AppEvents {
    /// Its command line (empty when attached).
    pub command: Vec<String>,
    /// Its first process.
    pub pid: Option<u32>,
    /// Attached to a running process (`--pid`).
    pub attached: bool,
    /// When it started (or was attached to), ms since the watch started.
    pub started_ms: f64,
    /// Every process of it seen.
    pub pids: BTreeSet<u32>,
    /// Iterations its output marked, ms.
    pub marks: Vec<f64>,
    /// Failures its output said, with when.
    pub said: Vec<(f64, AppFailure, String)>,
    /// Alerts raised.
    pub alerts: usize,
    /// How and when it ended: (ms, exit code, signal).
    pub end: Option<(f64, Option<i32>, Option<i32>)>,
    /// When a signal first interrupted the watch, ms.
    pub interrupted_ms: Option<f64>,
    /// The last line of its output that said an error of another kind.
    pub last_error: Option<String>,
    /// The GPU libraries its processes were seen to load: (pid, file name).
    pub libraries: Vec<(u32, String)>,
}

impl AppEvents {
    /// Takes what an event says of the application; other events are left alone.
    pub fn take(&mut self, t_ms: f64, event: &Event) {
        match event {
            Event::AppStart {
                command,
                pid,
                attached,
            } => {
                self.command = command.clone();
                self.pid = Some(*pid);
                self.attached = *attached;
                self.started_ms = t_ms;
                self.pids.insert(*pid);
            }
            Event::AppProcesses { pids } => self.pids.extend(pids),
            Event::AppLibraries { pid, libraries } => self
                .libraries
                .extend(libraries.iter().map(|l| (*pid, l.clone()))),
            Event::Iteration { .. } => self.marks.push(t_ms),
            Event::AppSaid {
                failure: AppFailure::Error,
                line,
            } => self.last_error = Some(line.clone()),
            Event::AppSaid { failure, line } => self.said.push((t_ms, *failure, line.clone())),
            Event::Alert { .. } => self.alerts += 1,
            Event::AppEnd { exit_code, signal } => self.end = Some((t_ms, *exit_code, *signal)),
            Event::Interrupted { .. } if self.interrupted_ms.is_none() => {
                self.interrupted_ms = Some(t_ms);
            }
            _ => {}
        }
    }
}

/// Where the application's memory figures came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemorySource {
    /// The driver's per-process figure (NVML on NVIDIA, DRM fdinfo on amdgpu, xe, i915).
    Driver,
    /// The sum of the application's live allocations, from kiln's Vulkan layer.
    Trace,
    /// Neither: nothing of its memory is known.
    None,
}

/// Where the iterations came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IterationSource {
    /// Lines of its output that matched `--iteration`.
    Output,
    /// The period of its own memory use.
    Period,
    /// None found: its memory is judged over time.
    None,
}

/// The cause the watch found, in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Diagnosis {
    /// Nothing wrong with the card, the machine or the application's memory.
    Healthy,
    /// A leak.
    Leak,
    /// A step needs more memory than the card has.
    OverTheLimit,
    /// Fragmentation or an allocation limit.
    Fragmentation,
    /// Another process took the memory.
    OtherProcess,
    /// The device lost to a driver timeout or the application's own work.
    DriverTimeout,
    /// The card.
    Card,
    /// The application crashed or exited with an error, and nothing on the GPU explains
    /// it: its own failure.
    ApplicationFailed,
    /// Not enough was seen to judge (interrupted, no memory figures, no GPU).
    NotJudged,
}

impl Diagnosis {
    /// The cause a finding code gives, if it gives one.
    pub fn of(code: FindingCode) -> Option<Diagnosis> {
        Some(match code {
            FindingCode::AppMemoryLeak => Diagnosis::Leak,
            FindingCode::AppOverMemoryLimit => Diagnosis::OverTheLimit,
            FindingCode::AppFragmentation => Diagnosis::Fragmentation,
            FindingCode::AppOtherProcess => Diagnosis::OtherProcess,
            FindingCode::AppDriverTimeout => Diagnosis::DriverTimeout,
            FindingCode::AppCardFault => Diagnosis::Card,
            FindingCode::AppExit => Diagnosis::ApplicationFailed,
            _ => return None,
        })
    }

    /// As the report and the metrics spell it (`over_the_limit`).
    pub fn name(self) -> &'static str {
        match self {
            Diagnosis::Healthy => "healthy",
            Diagnosis::Leak => "leak",
            Diagnosis::OverTheLimit => "over_the_limit",
            Diagnosis::Fragmentation => "fragmentation",
            Diagnosis::OtherProcess => "other_process",
            Diagnosis::DriverTimeout => "driver_timeout",
            Diagnosis::Card => "card",
            Diagnosis::ApplicationFailed => "application_failed",
            Diagnosis::NotJudged => "not_judged",
        }
    }

    /// In words for people.
    pub fn word(self) -> &'static str {
        match self {
            Diagnosis::Healthy => "healthy",
            Diagnosis::Leak => "a leak",
            Diagnosis::OverTheLimit => "over the memory limit",
            Diagnosis::Fragmentation => "fragmentation",
            Diagnosis::OtherProcess => "another process",
            Diagnosis::DriverTimeout => "a driver timeout",
            Diagnosis::Card => "the card",
            Diagnosis::ApplicationFailed => "the application's own failure",
            Diagnosis::NotJudged => "not judged",
        }
    }
}

/// One process's memory over the watch, for the timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessMemory {
    /// Its pid (0: the application as the trace sums it).
    pub pid: u32,
    /// Its name, where the system gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// One of the watched application's processes.
    pub watched: bool,
    /// (ms since the watch started, bytes), at most [`TIMELINE_POINTS`] of them.
    pub points: Vec<[f64; 2]>,
}

/// The most points a timeline keeps per process: enough for a chart, few enough for a
/// report of an hours-long watch.
pub const TIMELINE_POINTS: usize = 600;

/// A size class of the trace's allocations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeClass {
    /// The class holds sizes above half of this, up to it.
    pub up_to_bytes: u64,
    /// Allocations made.
    pub allocations: u64,
    /// Of them freed.
    pub frees: u64,
    /// Allocations refused.
    pub refused: u64,
}

/// What the trace holds, in counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceSummary {
    /// Processes that loaded kiln's layer.
    pub attached: u64,
    /// Allocations, frees and refusals, over every size class.
    pub allocations: u64,
    /// Frees.
    pub frees: u64,
    /// Refused allocations.
    pub refused: u64,
    /// Records lost before kiln read them.
    pub lost_records: u64,
    /// Calls that returned `VK_ERROR_DEVICE_LOST` (each device's first and the rest).
    pub device_lost_calls: u64,
    /// Calls other than `vkAllocateMemory` that answered out-of-memory (`vkCreateBuffer`).
    #[serde(default)]
    pub out_of_memory_calls: u64,
}

/// What kiln could not see of the application, with why and what would let it see: a
/// watch never reads as "healthy" past what it saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unseen {
    /// What was unseen.
    #[serde(flatten)]
    pub what: UnseenKind,
    /// It could hide a cause: the watch is not judged (`APP_NOT_JUDGED` says it).
    #[serde(default)]
    pub decisive: bool,
}

/// A kind of thing kiln could not see of the application.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum UnseenKind {
    /// Too few iterations, or too short a span, to judge a leak.
    TooShort {
        /// Why, with what to do.
        said: String,
    },
    /// kiln's layer stopped tracing a process (a failure of its own, caught before it
    /// could reach the application): nothing later of it is in the trace.
    TraceStopped {
        /// When, ms since the watch started.
        at_ms: f64,
        /// The call the layer was in.
        call: String,
    },
    /// The layer never loaded into the application: why, as far as its libraries and
    /// the loader's variables tell.
    NoTrace {
        /// Why, with what to do.
        said: String,
    },
    /// The driver's per-process figure and the trace tell different stories (one climbs
    /// as a leak, the other not): which was believed, and why.
    SourcesDisagree {
        /// Both stories, and the one believed.
        said: String,
    },
}

impl Unseen {
    /// In words for people.
    pub fn words(&self) -> String {
        match &self.what {
            UnseenKind::TooShort { said }
            | UnseenKind::NoTrace { said }
            | UnseenKind::SourcesDisagree { said } => said.clone(),
            UnseenKind::TraceStopped { at_ms, call } => format!(
                "kiln's trace stopped {:.1} s into the watch (its layer failed in {call}, caught before it reached the application): the application's allocations after that are not in the trace",
                at_ms / 1e3
            ),
        }
    }
}

/// The application's part of a watch's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApplicationReport {
    /// Its command line (empty when attached to a running process).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Its first process.
    pub pid: Option<u32>,
    /// Attached with `--pid`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub attached: bool,
    /// Every process of it seen.
    pub pids: Vec<u32>,
    /// Its exit code, when it exited and kiln could know it.
    pub exit_code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
    /// When it ended, ms since the watch started; None when the watch stopped first.
    pub ended_ms: Option<f64>,
    /// The device its memory lived on (its index), where one was seen.
    pub device: Option<usize>,
    /// Where its memory figures came from.
    pub memory_source: MemorySource,
    /// Its highest memory.
    pub peak_bytes: u64,
    /// The memory it could have had: the card's (or the heap's) size.
    pub budget_bytes: Option<u64>,
    /// Its iterations, ms since the watch started.
    pub iterations_ms: Vec<f64>,
    /// Where they came from.
    pub iterations_from: IterationSource,
    /// Its lowest memory in each iteration: (ms, bytes).
    pub baselines: Vec<[f64; 2]>,
    /// The cause found.
    pub diagnosis: Diagnosis,
    /// What kiln could not see, each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unseen: Vec<Unseen>,
    /// Memory per process over the watch: the application's first.
    pub timeline: Vec<ProcessMemory>,
    /// Allocations by size class, from the trace (classes with none left out).
    pub histogram: Vec<SizeClass>,
    /// What the trace held, when there was one.
    pub trace: Option<TraceSummary>,
    /// `--alert` crossings.
    pub alerts: usize,
    /// Moments worth marking on its timeline: its failures, as they were said.
    pub moments: Vec<Moment>,
}

/// A moment of the watch worth marking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Moment {
    /// When, ms since the watch started.
    pub t_ms: f64,
    /// What happened, in a few words.
    pub what: String,
}

/// A memory series: (ms, bytes), in time order.
pub type Series = Vec<(f64, u64)>;

/// Every other process's memory on a device, by pid, with its name.
pub type Others = BTreeMap<u32, (Option<String>, Series)>;

/// The application's own processes on a device, each with its name and the most it held,
/// the most first.
pub type Holders = Vec<(u32, Option<String>, u64)>;

/// A failure the application met.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// Out of memory: the size asked for and the driver's answer, where the trace saw it.
    Memory {
        /// When, ms.
        t_ms: f64,
        /// The allocation's size.
        request: Option<u64>,
        /// The driver's answer.
        result: Option<VkError>,
        /// Memory free for it then (the budget's rest, or the card's free memory).
        free: Option<u64>,
        /// Its live allocations then, and the device's limit on them.
        live: Option<(u64, u64)>,
        /// What said so: a call (`vkAllocateMemory`) or a line of output.
        said: String,
        /// The framework's own facts, where a line of its output said it.
        words: Option<super::app_words::Said>,
    },
    /// The device was lost.
    Lost {
        /// When, ms.
        t_ms: f64,
        /// What said so.
        said: String,
    },
}

impl Failure {
    /// When it happened, ms.
    pub fn t_ms(&self) -> f64 {
        match self {
            Failure::Memory { t_ms, .. } | Failure::Lost { t_ms, .. } => *t_ms,
        }
    }
}

/// One iteration's stretch of the application's memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// The iteration's mark, ms.
    pub mark_ms: f64,
    /// Its lowest memory: the baseline.
    pub low: u64,
    /// When the lowest was reached, ms.
    pub low_ms: f64,
    /// The reading that set the lowest, by its place in the series (None: before the
    /// first reading).
    pub low_index: Option<usize>,
    /// Its highest memory.
    pub high: u64,
}

/// Everything the application rules read, for the device its memory lived on.
#[derive(Debug, Clone, Default)]
pub struct AppView {
    /// Its memory over time.
    pub memory: Series,
    /// Whether `memory` holds between points (the trace's sums) or is sampled.
    pub stepwise: bool,
    /// Every other process's memory on the device, by pid, with its name.
    pub others: Others,
    /// Iteration starts, ms.
    pub marks: Vec<f64>,
    /// The iterations are not the application's own marks (its period, or stretches of
    /// time): rates are said per minute.
    pub by_time: bool,
    /// Its lowest and highest memory in each iteration.
    pub windows: Vec<Window>,
    /// The memory it could have had.
    pub budget: Option<u64>,
    /// Failures, in time order.
    pub failures: Vec<Failure>,
    /// Its live allocations by size class at each iteration's lowest point, from the
    /// trace: (class, count).
    pub classes_at_windows: Vec<BTreeMap<usize, i64>>,
    /// The device's utilisation samples (ms, %).
    pub utilisation: Series,
    /// The device's memory in use by every process (ms, bytes).
    pub device_used: Series,
    /// The application's processes.
    pub pids: Vec<u32>,
    /// How often the watch read its memory, ms.
    pub interval_ms: f64,
    /// How and when it ended.
    pub end: Option<(f64, Option<i32>, Option<i32>)>,
    /// When a signal interrupted the watch, ms: kiln stopped the application it started
    /// then, and an end after it is kiln's doing, not the application's.
    pub interrupted_ms: Option<f64>,
    /// The last line of its output that said an error of another kind.
    pub last_error: Option<String>,
    /// Why kiln's layer never loaded into it, where the trace was asked for.
    pub no_trace: Option<String>,
    /// It ended within two readings having loaded no GPU library kiln saw: it did not use
    /// the GPU.
    pub no_gpu_seen: bool,
    /// Its processes by the most each held (the driver's figure), the most first.
    pub holders: Holders,
}

/// Judges the watched application: builds its view on the device its memory lived on,
/// adds the rules' findings to that device (and the card's to whichever it concerns),
/// and returns the application's report.
pub fn judge(
    events: &AppEvents,
    settings: &WatchSettings,
    telemetry: &[TelemetryRecord],
    trace: Option<&Trace>,
    devices: &mut [DeviceReport],
    t: &Thresholds,
    notes: &mut Vec<String>,
) -> ApplicationReport {
    let pids: Vec<u32> = events.pids.iter().copied().collect();
    // Each device's series of the application, from the driver and from the trace.
    // Every device's series from each source: (device slot, series, source, stepwise).
    let mut candidates: Vec<(usize, Series, MemorySource, bool)> = Vec::new();
    // The driver's lists are read once: the application's series and every other
    // process's, per device.
    let mut listed: Vec<(Series, Others, Holders)> = devices
        .iter()
        .map(|d| driver_series(telemetry, d.index, &events.pids))
        .collect();
    for (i, d) in devices.iter().enumerate() {
        let driver = std::mem::take(&mut listed[i].0);
        let traced = trace
            .map(|tr| trace_series(tr, &d.uuid))
            .unwrap_or_default();
        candidates.push((i, driver, MemorySource::Driver, false));
        candidates.push((i, traced, MemorySource::Trace, true));
    }
    // The first series with memory, unless a later one peaks more than twice as high.
    let peak = |s: &Series| s.iter().map(|p| p.1).max().unwrap_or(0);
    let mut best: Option<usize> = None;
    for (k, c) in candidates.iter().enumerate() {
        let better = match best {
            None => peak(&c.1) > 0,
            Some(b) => peak(&c.1) > peak(&candidates[b].1) * 2,
        };
        if better {
            best = Some(k);
        }
    }
    let (slot, memory, source, stepwise) = match best {
        Some(b) => {
            let (i, series, source, stepwise) = candidates.swap_remove(b);
            (i, series, source, stepwise)
        }
        None => (0, Vec::new(), MemorySource::None, false),
    };
    // The other source's series of the same device, where it has one: judged beside.
    let other = candidates
        .into_iter()
        .find(|(i, s, ..)| *i == slot && source != MemorySource::None && !s.is_empty());
    let mut view = AppView {
        memory,
        stepwise,
        pids: pids.clone(),
        end: events.end,
        interrupted_ms: events.interrupted_ms,
        last_error: events.last_error.clone(),
        interval_ms: settings.interval_s * 1e3,
        ..AppView::default()
    };
    // A device whose driver gives no per-process figures: said, never read as "no other
    // process".
    for d in devices.iter() {
        let listed = telemetry.iter().any(|r| {
            r.device == Some(d.index)
                && matches!(&r.data, TelemetryData::Sample { readings }
                    if readings.contains_key(signals::OTHER_PROCESSES_NOW.name))
        });
        if !listed {
            notes.push(format!(
                "GPU{}: nothing gives per-process GPU memory here (no NVML, no DRM fdinfo, no Windows GPU counters): other processes' memory is not seen{}",
                d.index,
                if source == MemorySource::Trace && devices.get(slot).is_some_and(|s| s.index == d.index) {
                    "; the application's comes from its allocation trace"
                } else {
                    ""
                }
            ));
        }
    }
    let mut histogram = Vec::new();
    let mut trace_summary = None;
    if let Some(d) = devices.get(slot) {
        view.others = std::mem::take(&mut listed[slot].1);
        if source == MemorySource::Driver {
            view.holders = std::mem::take(&mut listed[slot].2);
        }
        view.budget = budget(telemetry, d.index, trace, &d.uuid);
        view.utilisation = gauge_series(telemetry, d.index, signals::UTIL_GPU_PCT);
        view.device_used = gauge_series(telemetry, d.index, signals::MEM_USED_BYTES);
        view.failures = failures(events, trace, &d.uuid, telemetry, d.index, view.budget);
    }
    // Without its own marks, the iterations are found in its memory: what it held up to
    // its teardown, never the frees of its exit, which would fall in the last stretch and
    // cancel what it held before.
    let ended = events.end.is_some();
    let held = without_teardown(&view.memory, ended);
    let (marks, from) = if !events.marks.is_empty() {
        (events.marks.clone(), IterationSource::Output)
    } else {
        // Iterations it did not mark are no unit a person can count in: rates are said
        // per minute.
        view.by_time = true;
        match period_marks(held, view.stepwise) {
            Some(m) => (m, IterationSource::Period),
            None => (time_marks(held), IterationSource::None),
        }
    };
    view.marks = marks;
    view.windows = judged_windows(&view.memory, view.stepwise, &view, ended);
    if let (Some(tr), Some(d)) = (trace, devices.get(slot)) {
        view.classes_at_windows =
            classes_at(tr, &d.uuid, &view.windows, source == MemorySource::Trace);
        histogram = tr
            .classes
            .iter()
            .enumerate()
            .filter(|(_, c)| c.iter().any(|n| *n > 0))
            .map(|(k, c)| SizeClass {
                up_to_bytes: crate::evidence::ring::class_limit_bytes(k),
                allocations: c[0],
                frees: c[1],
                refused: c[2],
            })
            .collect();
        let sum = |i: usize| tr.classes.iter().map(|c| c[i]).sum::<u64>();
        let first_losses = tr
            .records
            .iter()
            .filter(|r| matches!(r.event, TraceEvent::DeviceLost { .. }))
            .count() as u64;
        trace_summary = Some(TraceSummary {
            attached: tr.attached,
            allocations: sum(0),
            frees: sum(1),
            refused: sum(2),
            lost_records: tr.lost_records,
            device_lost_calls: first_losses + tr.lost_device_calls,
            out_of_memory_calls: tr
                .records
                .iter()
                .filter(|r| matches!(r.event, TraceEvent::OutOfMemory { .. }))
                .count() as u64,
        });
    }
    view.no_gpu_seen =
        events.libraries.is_empty() && events.end.is_some_and(|e| e.0 < 2.0 * view.interval_ms);
    if settings.trace && trace.is_none_or(|tr| tr.attached == 0) {
        view.no_trace = Some(no_trace_why(events, settings, &view));
    }
    let mut device = None;
    if let Some(d) = devices.get_mut(slot) {
        let found = app_rules::judge(&view, d, t);
        d.add_findings(found);
        device = Some(d.index);
    }
    // The card's evidence on the devices the application did not use is still the card's.
    for (i, d) in devices.iter_mut().enumerate() {
        if i != slot {
            let card = app_rules::card(d, &view);
            if !card.is_empty() {
                d.add_findings(card);
            }
        }
    }
    let mut diagnosis = devices
        .get(slot)
        .map_or(Diagnosis::NotJudged, |d| diagnosis_of(d, source));
    let mut unseen_kinds = unseen(trace, &view, source, diagnosis);
    // The source not chosen, judged over the same iterations: where it tells another
    // story, that is said, with which was believed and why.
    if let Some((_, other, other_source, other_stepwise)) = other {
        let alt = AppView {
            windows: judged_windows(&other, other_stepwise, &view, ended),
            memory: other,
            stepwise: other_stepwise,
            ..view.clone()
        };
        let (chosen_leaks, other_leaks) =
            (app_rules::leaking(&view, t), app_rules::leaking(&alt, t));
        if chosen_leaks != other_leaks {
            unseen_kinds.push(UnseenKind::SourcesDisagree {
                said: disagreement(&view, source, &alt, other_source, other_leaks),
            });
        }
    }
    // What was not seen could hide a cause: a watch so judged is not "healthy", and
    // cannot pass. (A trace that never began leaves the driver's figure, or nothing at
    // all: APP_MEMORY_UNSEEN says that.)
    let unseen: Vec<Unseen> = unseen_kinds
        .into_iter()
        .map(|what| {
            let could_hide = match &what {
                UnseenKind::TraceStopped { .. } => source == MemorySource::Trace,
                UnseenKind::TooShort { .. } => memory_rose(&view, t),
                UnseenKind::NoTrace { .. } => false,
                UnseenKind::SourcesDisagree { .. } => true,
            };
            Unseen {
                what,
                decisive: could_hide && diagnosis == Diagnosis::Healthy,
            }
        })
        .collect();
    let decisive: Vec<&Unseen> = unseen.iter().filter(|u| u.decisive).collect();
    if !decisive.is_empty()
        && let Some(d) = devices.get_mut(slot)
    {
        d.add_findings(vec![app_rules::not_judged(&decisive)]);
        diagnosis = Diagnosis::NotJudged;
    }
    let mut timeline = Vec::new();
    if !view.memory.is_empty() {
        timeline.push(ProcessMemory {
            pid: if source == MemorySource::Trace {
                0
            } else {
                events.pid.unwrap_or(0)
            },
            name: None,
            watched: true,
            points: thin(&view.memory),
        });
    }
    for (pid, (name, series)) in &view.others {
        timeline.push(ProcessMemory {
            pid: *pid,
            name: name.clone(),
            watched: false,
            points: thin(series),
        });
    }
    ApplicationReport {
        command: if events.command.is_empty() {
            settings.command.clone()
        } else {
            events.command.clone()
        },
        pid: events.pid.or(settings.pid),
        attached: events.attached,
        pids,
        exit_code: events.end.and_then(|e| e.1),
        signal: events.end.and_then(|e| e.2),
        ended_ms: events.end.map(|e| e.0),
        device,
        memory_source: source,
        peak_bytes: view.memory.iter().map(|p| p.1).max().unwrap_or(0),
        budget_bytes: view.budget,
        iterations_ms: view.marks.clone(),
        iterations_from: from,
        baselines: view
            .windows
            .iter()
            .map(|w| [w.mark_ms, w.low as f64])
            .collect(),
        diagnosis,
        unseen,
        timeline,
        histogram,
        trace: trace_summary,
        alerts: events.alerts,
        moments: view
            .failures
            .iter()
            .map(|f| Moment {
                t_ms: f.t_ms(),
                what: match f {
                    Failure::Memory { .. } => "out of memory".into(),
                    Failure::Lost { .. } => "device lost".into(),
                },
            })
            .collect(),
    }
}

/// The cause the device's findings give: its decisive finding's, else healthy when its
/// memory was seen and nothing judged was found.
fn diagnosis_of(d: &DeviceReport, source: MemorySource) -> Diagnosis {
    use super::model::DeviceResult;
    let judged = |f: &&crate::finding::Finding| {
        matches!(
            f.class,
            Class::Hardware | Class::Environment | Class::Software
        )
    };
    let found = d
        .findings
        .iter()
        .filter(judged)
        .min_by_key(|f| (f.class, f.severity, f.confidence))
        .and_then(|f| Diagnosis::of(f.code));
    match found {
        Some(cause) => cause,
        None if source == MemorySource::None => Diagnosis::NotJudged,
        None if d.result == DeviceResult::Inconclusive
            && d.findings.iter().any(|f| f.class == Class::CouldNotTest) =>
        {
            Diagnosis::NotJudged
        }
        None => Diagnosis::Healthy,
    }
}

/// The two sources' stories in words, and which the verdict believed: the driver's
/// figure counts everything the card holds for the process, every API's and the driver's
/// own; the trace counts the Vulkan allocations kiln's layer saw, exactly, one by one.
fn disagreement(
    chosen: &AppView,
    chosen_source: MemorySource,
    other: &AppView,
    other_source: MemorySource,
    other_leaks: bool,
) -> String {
    let bytes = crate::units::format_bytes;
    let story = |v: &AppView, source: MemorySource, leaks: bool| {
        let (first, last) = (
            v.windows.get(1).map_or(0, |w| w.low),
            v.windows.last().map_or(0, |w| w.low),
        );
        let what = match source {
            MemorySource::Driver => "the driver's per-process figure",
            _ => "the trace's live allocations",
        };
        if leaks {
            format!(
                "{what} climbed from {} to {} between iterations, as a leak does",
                bytes(first),
                bytes(last)
            )
        } else if first == last {
            format!("{what} stayed at {}", bytes(last))
        } else {
            format!(
                "{what} went from {} to {} with no leak's climb",
                bytes(first),
                bytes(last)
            )
        }
    };
    let why = match chosen_source {
        MemorySource::Driver => {
            "the driver's figure, which counts everything the card holds for the process (every API's memory and the driver's own): the trace's climb may be memory the driver pools or never commits"
        }
        _ => {
            "the trace's, whose peak is more than twice the driver's figure: the driver did not count all of the application's memory"
        }
    };
    format!(
        "the sources disagree: {}, while {}; kiln judged by {why}",
        story(other, other_source, other_leaks),
        story(chosen, chosen_source, !other_leaks),
    )
}

/// Whether the application's memory rose over the watch by as much as a leak must climb
/// (up to its teardown): where it did, a watch too short to judge a leak is not healthy.
fn memory_rose(v: &AppView, t: &Thresholds) -> bool {
    let held = without_teardown(&v.memory, v.end.is_some());
    let (Some(first), Some(last)) = (held.first(), held.last()) else {
        return false;
    };
    last.1 as f64 - first.1 as f64 >= t.leak_min_bytes
}

/// What kiln could not see of the application: a watch too short for a leak, a trace
/// that stopped, and a trace that never began, with why.
fn unseen(
    trace: Option<&Trace>,
    view: &AppView,
    source: MemorySource,
    diagnosis: Diagnosis,
) -> Vec<UnseenKind> {
    let mut out = Vec::new();
    if source != MemorySource::None
        && diagnosis != Diagnosis::Leak
        && let Some(said) = app_rules::too_short(view)
    {
        out.push(UnseenKind::TooShort { said });
    }
    if let Some(tr) = trace {
        out.extend(tr.records.iter().find_map(|r| match &r.event {
            TraceEvent::Stopped { call } => Some(UnseenKind::TraceStopped {
                at_ms: r.t_ms,
                call: call.clone(),
            }),
            _ => None,
        }));
    }
    out.extend(
        view.no_trace
            .clone()
            .map(|said| UnseenKind::NoTrace { said }),
    );
    out
}

/// Why kiln's layer never loaded into the application, as its libraries and the
/// loader's variables tell, with what to do.
fn no_trace_why(events: &AppEvents, settings: &WatchSettings, view: &AppView) -> String {
    use crate::evidence::gpu_apis::{GpuLibrary, kind_of};
    let of = |kind: GpuLibrary| -> Vec<&str> {
        let mut names: Vec<&str> = events
            .libraries
            .iter()
            .filter(|(_, n)| kind_of(n) == Some(kind))
            .map(|(_, n)| n.as_str())
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    };
    let (loader, drivers) = (of(GpuLibrary::VulkanLoader), of(GpuLibrary::VulkanDriver));
    let others: Vec<(&str, Vec<&str>)> = [
        ("CUDA", GpuLibrary::Cuda),
        ("HIP", GpuLibrary::Hip),
        ("OpenCL", GpuLibrary::OpenCl),
        ("Level Zero", GpuLibrary::LevelZero),
        ("Direct3D", GpuLibrary::Direct3D),
    ]
    .into_iter()
    .map(|(name, kind)| (name, of(kind)))
    .filter(|(_, names)| !names.is_empty())
    .collect();
    let variables: Vec<String> = settings
        .loader_environment
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if !drivers.is_empty() && loader.is_empty() {
        return format!(
            "no allocation trace: the application loaded the Vulkan driver ({}) without the Vulkan loader, where kiln's layer is loaded{}: watch it with those variables unset (the loader then finds the driver itself), or with the engine's option to go through the loader",
            drivers.join(", "),
            if variables.is_empty() {
                String::new()
            } else {
                format!(
                    " (an engine that reads {} opens the driver itself)",
                    crate::text::list(&variables)
                )
            }
        );
    }
    if !loader.is_empty() {
        return "no allocation trace: the application loaded the Vulkan loader but not kiln's layer (a loader setting such as VK_LOADER_LAYERS_DISABLE, or the application's own list of layers, kept it out)".into();
    }
    if !others.is_empty() {
        let apis: Vec<String> = others
            .iter()
            .map(|(api, names)| format!("{api} ({})", names.join(", ")))
            .collect();
        return format!(
            "no allocation trace: the application uses {}, not Vulkan; kiln's trace records Vulkan's allocations, so its memory comes from the driver's per-process figure alone",
            crate::text::list(&apis)
        );
    }
    match view.end {
        Some((at, ..)) if view.no_gpu_seen => format!(
            "no allocation trace: the application ended {:.1} s into the watch without loading any GPU library kiln saw: it did not use the GPU, or not long enough to be seen",
            at / 1e3
        ),
        _ => "no allocation trace: the application loaded no GPU library kiln knows (Vulkan, CUDA, HIP, OpenCL, Level Zero, Direct3D), or kiln could not read which it loaded".into(),
    }
}

/// At most [`TIMELINE_POINTS`] of a series, keeping each stretch's lowest and highest so
/// that neither a peak nor a baseline is thinned away.
fn thin(series: &Series) -> Vec<[f64; 2]> {
    let as_point = |p: &(f64, u64)| [p.0, p.1 as f64];
    if series.len() <= TIMELINE_POINTS {
        return series.iter().map(as_point).collect();
    }
    let per = series.len().div_ceil(TIMELINE_POINTS / 2);
    let mut out = Vec::new();
    for chunk in series.chunks(per) {
        let low = chunk.iter().min_by_key(|p| p.1);
        let high = chunk.iter().max_by_key(|p| p.1);
        if let (Some(l), Some(h)) = (low, high) {
            let (a, b) = if l.0 <= h.0 { (l, h) } else { (h, l) };
            out.push(as_point(a));
            if a != b {
                out.push(as_point(b));
            }
        }
    }
    out
}

/// The application's memory on a device by the driver's per-process lists (the sum over
/// its processes in each sample that listed processes), and every other process's.
fn driver_series(
    telemetry: &[TelemetryRecord],
    device: usize,
    pids: &BTreeSet<u32>,
) -> (Series, Others, Holders) {
    let mut app = Vec::new();
    let mut others: Others = BTreeMap::new();
    let mut holders: Holders = Vec::new();
    for r in telemetry.iter().filter(|r| r.device == Some(device)) {
        let TelemetryData::Sample { readings } = &r.data else {
            continue;
        };
        let Some(Reading::Processes(list)) = readings.get(signals::OTHER_PROCESSES_NOW.name) else {
            continue;
        };
        let mut sum = 0;
        for p in list {
            let bytes = p.used_bytes.unwrap_or(0);
            if pids.contains(&p.pid) {
                sum += bytes;
                match holders.iter_mut().find(|h| h.0 == p.pid) {
                    Some(h) => h.2 = h.2.max(bytes),
                    None => holders.push((p.pid, p.name.clone(), bytes)),
                }
            } else {
                let entry = others
                    .entry(p.pid)
                    .or_insert_with(|| (p.name.clone(), Vec::new()));
                entry.1.push((r.t_ms, bytes));
            }
        }
        app.push((r.t_ms, sum));
    }
    // A process absent from a list holds nothing then.
    if app.iter().all(|p| p.1 == 0) {
        app.clear();
    }
    holders.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    (app, others, holders)
}

/// A gauge's samples on a device.
fn gauge_series(telemetry: &[TelemetryRecord], device: usize, signal: Signal) -> Series {
    telemetry
        .iter()
        .filter(|r| r.device == Some(device))
        .filter_map(|r| match &r.data {
            TelemetryData::Sample { readings } => readings
                .get(signal.name)
                .and_then(Reading::number)
                .map(|v| (r.t_ms, v.max(0.0) as u64)),
            _ => None,
        })
        .collect()
}

/// The device-local heaps the trace describes for a device (all heaps when it describes
/// none).
fn local_heaps(trace: &Trace, uuid: &str) -> Option<BTreeSet<u16>> {
    let heaps: BTreeSet<u16> = trace
        .records
        .iter()
        .filter_map(|r| match &r.event {
            TraceEvent::Heap {
                device,
                heap,
                device_local: true,
                ..
            } if same_device(uuid, device) => Some(*heap),
            _ => None,
        })
        .collect();
    (!heaps.is_empty()).then_some(heaps)
}

/// One change of the application's device-local allocations, by the trace.
struct Change {
    t_ms: f64,
    /// Bytes allocated (positive) or freed (negative).
    bytes: i128,
    /// Its size class.
    class: usize,
    /// One more allocation of the class live, or one fewer.
    count: i64,
}

/// The application's allocations and frees on a device's device-local heaps, in order.
fn local_changes(trace: &Trace, uuid: &str) -> Vec<Change> {
    let heaps = local_heaps(trace, uuid);
    let counts = |h: &u16| heaps.as_ref().is_none_or(|set| set.contains(h));
    trace
        .records
        .iter()
        .filter_map(|r| {
            let (bytes, sign) = match &r.event {
                TraceEvent::Alloc {
                    device,
                    bytes,
                    heap,
                    ..
                } if same_device(uuid, device) && counts(heap) => (*bytes, 1),
                TraceEvent::Free {
                    device,
                    bytes,
                    heap,
                    ..
                } if same_device(uuid, device) && counts(heap) => (*bytes, -1),
                _ => return None,
            };
            Some(Change {
                t_ms: r.t_ms,
                bytes: i128::from(bytes) * i128::from(sign),
                class: crate::evidence::ring::size_class(bytes),
                count: sign,
            })
        })
        .collect()
}

/// The application's live device-local allocations on a device after each change, by the
/// trace.
fn trace_series(trace: &Trace, uuid: &str) -> Series {
    let mut live: i128 = 0;
    local_changes(trace, uuid)
        .into_iter()
        .map(|c| {
            live = (live + c.bytes).max(0);
            (c.t_ms, live as u64)
        })
        .collect()
}

/// The memory the application could have had on a device: the card's total as its
/// telemetry says it, else the largest device-local heap the trace describes.
fn budget(
    telemetry: &[TelemetryRecord],
    device: usize,
    trace: Option<&Trace>,
    uuid: &str,
) -> Option<u64> {
    if let Some(total) = gauge_series(telemetry, device, signals::MEM_TOTAL_BYTES)
        .last()
        .map(|p| p.1)
        .filter(|b| *b > 0)
    {
        return Some(total);
    }
    let trace = trace?;
    let heaps = local_heaps(trace, uuid);
    trace
        .records
        .iter()
        .filter_map(|r| match &r.event {
            TraceEvent::Heap {
                device,
                heap,
                bytes,
                ..
            } if same_device(uuid, device) && heaps.as_ref().is_none_or(|h| h.contains(heap)) => {
                Some(*bytes)
            }
            _ => None,
        })
        .max()
}

/// The failures the application met on a device: refused allocations and out-of-memory
/// answers and the device's loss from the trace, and what its output said.
fn failures(
    events: &AppEvents,
    trace: Option<&Trace>,
    uuid: &str,
    telemetry: &[TelemetryRecord],
    device: usize,
    budget: Option<u64>,
) -> Vec<Failure> {
    let mut out = Vec::new();
    let free_gauge = gauge_series(telemetry, device, signals::MEM_FREE_BYTES);
    let free_at = |t: f64| {
        free_gauge
            .iter()
            .take_while(|p| p.0 <= t + 1.0)
            .last()
            .map(|p| p.1)
    };
    if let Some(tr) = trace {
        let mut live_bytes: i128 = 0;
        let mut live_count: i64 = 0;
        let max_allocations = tr.records.iter().find_map(|r| match &r.event {
            TraceEvent::Device {
                device,
                max_allocations,
                ..
            } if same_device(uuid, device) && *max_allocations > 0 => Some(*max_allocations),
            _ => None,
        });
        for (i, r) in tr.records.iter().enumerate() {
            match &r.event {
                TraceEvent::Alloc { device, bytes, .. } if same_device(uuid, device) => {
                    live_bytes += i128::from(*bytes);
                    live_count += 1;
                }
                TraceEvent::Free { device, bytes, .. } if same_device(uuid, device) => {
                    live_bytes -= i128::from(*bytes);
                    live_count -= 1;
                }
                TraceEvent::AllocFailed {
                    device,
                    bytes,
                    heap,
                    result,
                    ..
                } if same_device(uuid, device) && result.is_memory() => {
                    // The driver's budget, asked at the refusal, says best what was free.
                    let asked = tr.records[i + 1..]
                        .iter()
                        .take(2)
                        .find_map(|b| match &b.event {
                            TraceEvent::Budget {
                                heap: h,
                                budget_bytes,
                                usage_bytes,
                                ..
                            } if h == heap => Some(budget_bytes.saturating_sub(*usage_bytes)),
                            _ => None,
                        });
                    let free = asked
                        .or_else(|| free_at(r.t_ms))
                        .or_else(|| budget.map(|b| b.saturating_sub(live_bytes.max(0) as u64)));
                    out.push(Failure::Memory {
                        t_ms: r.t_ms,
                        request: Some(*bytes),
                        result: Some(*result),
                        free,
                        live: max_allocations.map(|m| (live_count.max(0) as u64, m)),
                        said: "vkAllocateMemory".into(),
                        words: None,
                    });
                }
                TraceEvent::OutOfMemory {
                    device,
                    call,
                    result,
                    request_bytes,
                } if same_device(uuid, device) => out.push(Failure::Memory {
                    t_ms: r.t_ms,
                    request: *request_bytes,
                    result: Some(*result),
                    free: free_at(r.t_ms),
                    live: None,
                    said: call.clone(),
                    words: None,
                }),
                TraceEvent::DeviceLost { device, call } if same_device(uuid, device) => {
                    out.push(Failure::Lost {
                        t_ms: r.t_ms,
                        said: call.clone(),
                    })
                }
                _ => {}
            }
        }
    }
    // A refusal the trace saw, in the words the application said it in around then (its
    // framework's sizes: what it had, what it cached).
    for f in &mut out {
        if let Failure::Memory {
            t_ms,
            words: w @ None,
            ..
        } = f
        {
            *w = events
                .said
                .iter()
                .filter(|(at, kind, _)| {
                    *kind == AppFailure::OutOfMemory && (at - *t_ms).abs() <= 2_000.0
                })
                .find_map(|(_, _, line)| super::app_words::read(line));
        }
    }
    // What the output said counts where the trace saw nothing of its kind (an application
    // that is not Vulkan's: CUDA, HIP).
    for (t_ms, failure, line) in &events.said {
        let seen = out.iter().any(|f| {
            matches!(
                (f, failure),
                (Failure::Memory { .. }, AppFailure::OutOfMemory)
                    | (Failure::Lost { .. }, AppFailure::DeviceLost)
            )
        });
        if seen {
            continue;
        }
        let words = super::app_words::read(line);
        let facts = words.as_ref().map(|w| &w.facts);
        // Traced, and no refusal reached the driver: its own code refused it (an engine's
        // validation), which is said, never taken for the driver's answer.
        let unseen_by_driver = if trace.is_some_and(|tr| tr.attached > 0) {
            ", though no refused call reached the driver, where kiln's trace would have seen it"
        } else {
            ""
        };
        out.push(match failure {
            AppFailure::OutOfMemory => Failure::Memory {
                t_ms: *t_ms,
                request: facts.and_then(|f| f.request_bytes),
                result: None,
                free: facts.and_then(|f| f.free_bytes).or_else(|| free_at(*t_ms)),
                live: None,
                said: format!("its output: {}{unseen_by_driver}", output_line(line)),
                words,
            },
            AppFailure::DeviceLost => Failure::Lost {
                t_ms: *t_ms,
                said: format!("its output: {}", output_line(line)),
            },
            // Kept apart as its last error line (AppEvents::take), never a failure.
            AppFailure::Error => continue,
        });
    }
    out.sort_by(|a, b| a.t_ms().total_cmp(&b.t_ms()));
    out
}

/// A line of the application's output as a finding says it: quoted, and whole unless it
/// is long (its start carries what it says).
fn output_line(line: &str) -> String {
    format!("`{}`", crate::text::cut(line.trim(), 120))
}

/// The series up to the application's teardown, where it ended: the falling run at its
/// end (the frees of its exit, and the readings after them that repeat the last) left
/// out. A series that does not fall at its end is whole.
fn without_teardown(series: &[(f64, u64)], ended: bool) -> &[(f64, u64)] {
    let mut n = series.len();
    if !ended {
        return series;
    }
    while n >= 2 && series[n - 1].1 == series[n - 2].1 {
        n -= 1;
    }
    let flat_from = n;
    while n >= 2 && series[n - 1].1 < series[n - 2].1 {
        n -= 1;
    }
    if n == flat_from {
        return series;
    }
    &series[..n]
}

/// A series' iterations (its lowest and highest in each) at the view's marks: by time,
/// up to the application's teardown, as the marks were found.
fn judged_windows(
    series: &[(f64, u64)],
    stepwise: bool,
    view: &AppView,
    ended: bool,
) -> Vec<Window> {
    let series = if view.by_time {
        without_teardown(series, ended)
    } else {
        series
    };
    windows(series, stepwise, &view.marks, view.end.map(|e| e.0))
}

/// The value of a series at `t`: the last point at or before it (a step series), else
/// none.
fn value_at(series: &[(f64, u64)], t: f64) -> Option<u64> {
    series.iter().take_while(|p| p.0 <= t).last().map(|p| p.1)
}

/// Each iteration's mark, lowest and highest memory. An iteration's stretch is centred on
/// its mark (from halfway to the mark before to halfway to the next): the lowest point
/// between two steps sits near the line that marks them, on one side or the other as the
/// output and the allocations interleave, and a centred stretch holds it either way. One
/// the application ended in is not whole (its teardown frees everything) and is left out,
/// as is one with no reading inside.
fn windows(
    series: &[(f64, u64)],
    stepwise: bool,
    marks: &[f64],
    end_ms: Option<f64>,
) -> Vec<Window> {
    let last = series.last().map_or(0.0, |p| p.0);
    let end = end_ms.unwrap_or(last).max(last);
    let mut gaps: Vec<f64> = marks.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_by(f64::total_cmp);
    let Some(typical) = gaps.get(gaps.len() / 2).copied() else {
        return Vec::new();
    };
    let mut bounds: Vec<f64> = Vec::with_capacity(marks.len() + 1);
    bounds.push(marks[0] - typical / 2.0);
    bounds.extend(marks.windows(2).map(|w| (w[0] + w[1]) / 2.0));
    bounds.push(marks[marks.len() - 1] + typical / 2.0);
    let mut out = Vec::new();
    for (i, mark) in marks.iter().enumerate() {
        let (from, stop) = (bounds[i], bounds[i + 1]);
        if end_ms.is_some_and(|e| e < stop) || stop > end + 1.0 {
            break;
        }
        // (value, when, its place in the series)
        let mut values: Vec<(u64, f64, Option<usize>)> = series
            .iter()
            .enumerate()
            .filter(|(_, p)| p.0 >= from && p.0 < stop)
            .map(|(k, p)| (p.1, p.0, Some(k)))
            .collect();
        // A sum of allocations holds between its changes: what it was as the stretch
        // began counts (nothing yet, before the first allocation).
        if stepwise {
            let before = series.partition_point(|p| p.0 < from);
            let carried = before.checked_sub(1);
            values.push((carried.map_or(0, |k| series[k].1), from, carried));
        }
        let low = values
            .iter()
            .min_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let high = values.iter().map(|v| v.0).max();
        if let (Some(&(low, low_ms, low_index)), Some(high)) = (low, high) {
            out.push(Window {
                mark_ms: *mark,
                low,
                low_ms,
                low_index,
                high,
            });
        }
    }
    out
}

/// The application's live allocations by size class at each iteration's lowest point:
/// replayed from the trace up to the change that set the lowest (the series is the
/// trace's own sums, one point a change) or up to its time (the driver's samples).
fn classes_at(
    trace: &Trace,
    uuid: &str,
    windows: &[Window],
    by_change: bool,
) -> Vec<BTreeMap<usize, i64>> {
    let changes = local_changes(trace, uuid);
    windows
        .iter()
        .map(|w| {
            let upto = if by_change {
                w.low_index.map_or(0, |k| k + 1)
            } else {
                changes.partition_point(|c| c.t_ms <= w.low_ms)
            };
            let mut live: BTreeMap<usize, i64> = BTreeMap::new();
            for c in &changes[..upto.min(changes.len())] {
                *live.entry(c.class).or_default() += c.count;
            }
            live
        })
        .collect()
}

/// With no iterations to go by, even stretches of the watch (four to eight, two readings
/// each at least), so that a climb is still judged, per minute.
fn time_marks(series: &[(f64, u64)]) -> Vec<f64> {
    // Two readings a stretch at least, and at most eight stretches.
    let stretches = (series.len() / 2).min(8);
    let (Some(first), Some(last)) = (series.first(), series.last()) else {
        return Vec::new();
    };
    if stretches < 4 || last.0 <= first.0 {
        return Vec::new();
    }
    let step = (last.0 - first.0) / stretches as f64;
    // Marks at each stretch's middle: the stretches are centred on them.
    (0..stretches)
        .map(|k| first.0 + (k as f64 + 0.5) * step)
        .collect()
}

/// Iterations found from the memory's own period: the series on an even grid, its
/// changes' autocorrelation, and the shortest lag that repeats strongly. None when
/// nothing repeats, or fewer than four periods were seen.
pub fn period_marks(series: &[(f64, u64)], stepwise: bool) -> Option<Vec<f64>> {
    if series.len() < 8 {
        return None;
    }
    let (t0, t1) = (series.first()?.0, series.last()?.0);
    let span = t1 - t0;
    if span <= 0.0 {
        return None;
    }
    // An even grid fine enough for the changes: the median gap between points, no finer
    // than 512 points across the whole span... and at most 4096 of them.
    let mut gaps: Vec<f64> = series
        .windows(2)
        .map(|w| w[1].0 - w[0].0)
        .filter(|g| *g > 0.0)
        .collect();
    gaps.sort_by(f64::total_cmp);
    let median_gap = *gaps.get(gaps.len() / 2)?;
    let step = median_gap.max(span / 4096.0);
    let n = (span / step) as usize + 1;
    if n < 8 {
        return None;
    }
    let grid: Vec<f64> = (0..n)
        .map(|i| {
            let t = t0 + i as f64 * step;
            if stepwise {
                value_at(series, t).unwrap_or(0) as f64
            } else {
                // The nearest sample.
                let at = series.partition_point(|p| p.0 < t);
                let pick = match (
                    at.checked_sub(1).and_then(|j| series.get(j)),
                    series.get(at),
                ) {
                    (Some(a), Some(b)) => {
                        if t - a.0 <= b.0 - t {
                            a
                        } else {
                            b
                        }
                    }
                    (Some(a), None) => a,
                    (None, Some(b)) => b,
                    (None, None) => return 0.0,
                };
                pick.1 as f64
            }
        })
        .collect();
    let diffs: Vec<f64> = grid.windows(2).map(|w| w[1] - w[0]).collect();
    let mean = diffs.iter().sum::<f64>() / diffs.len() as f64;
    let centred: Vec<f64> = diffs.iter().map(|d| d - mean).collect();
    let energy: f64 = centred.iter().map(|d| d * d).sum();
    if energy <= 0.0 {
        return None;
    }
    let correlation = |lag: usize| {
        centred
            .iter()
            .zip(&centred[lag..])
            .map(|(a, b)| a * b)
            .sum::<f64>()
            / energy
    };
    let max_lag = diffs.len() / 4;
    if max_lag < 2 {
        return None;
    }
    let scores: Vec<(usize, f64)> = (2..=max_lag).map(|lag| (lag, correlation(lag))).collect();
    let best = scores.iter().map(|s| s.1).fold(f64::MIN, f64::max);
    if best < 0.3 {
        return None;
    }
    // The shortest lag nearly as strong as the best: a multiple of the period also repeats.
    let lag = scores.iter().find(|s| s.1 >= 0.8 * best)?.0;
    let period = lag as f64 * step;
    // Iterations start at the period's lowest points: the first low, then every period.
    let first_window: Vec<&(f64, u64)> = series.iter().filter(|p| p.0 < t0 + period).collect();
    let start = first_window.iter().min_by_key(|p| p.1).map_or(t0, |p| p.0);
    let marks: Vec<f64> = (0..)
        .map(|k| start + k as f64 * period)
        .take_while(|t| *t <= t1)
        .collect();
    (marks.len() >= 4).then_some(marks)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// A sawtooth: each period rises from `floor` to `floor + 64 MiB` and falls back; the
    /// floor climbs `leak` bytes a period.
    fn sawtooth(periods: usize, period_ms: f64, leak: u64) -> Series {
        let mut out = Vec::new();
        for k in 0..periods {
            let t = k as f64 * period_ms;
            let floor = 256 * MIB + k as u64 * leak;
            out.push((t, floor));
            out.push((t + period_ms * 0.2, floor + 32 * MIB));
            out.push((t + period_ms * 0.4, floor + 64 * MIB));
            out.push((t + period_ms * 0.8, floor));
        }
        out
    }

    #[test]
    fn a_diagnosis_is_named_as_the_report_spells_it() {
        for d in [
            Diagnosis::Healthy,
            Diagnosis::Leak,
            Diagnosis::OverTheLimit,
            Diagnosis::Fragmentation,
            Diagnosis::OtherProcess,
            Diagnosis::DriverTimeout,
            Diagnosis::Card,
            Diagnosis::NotJudged,
        ] {
            assert_eq!(serde_json::to_value(d).unwrap(), d.name());
        }
    }

    #[test]
    fn the_period_of_a_sawtooth_is_found_with_or_without_a_leak() {
        for leak in [0, 8 * MIB] {
            let marks = period_marks(&sawtooth(12, 1000.0, leak), true).unwrap();
            let gaps: Vec<f64> = marks.windows(2).map(|w| w[1] - w[0]).collect();
            assert!(marks.len() >= 10, "{marks:?}");
            for g in gaps {
                assert!((g - 1000.0).abs() < 60.0, "leak {leak}: {g}");
            }
        }
        // A flat line, or a ramp with no repeat, has no period.
        let flat: Series = (0..50).map(|i| (i as f64 * 100.0, 100 * MIB)).collect();
        assert_eq!(period_marks(&flat, false), None);
        let ramp: Series = (0..50).map(|i| (i as f64 * 100.0, i * MIB)).collect();
        assert_eq!(period_marks(&ramp, false), None);
    }

    #[test]
    fn the_frees_of_its_exit_are_left_out_and_a_flat_end_is_kept() {
        let mib = 1u64 << 20;
        // Climbing to 48 MiB, then its exit frees it all, a reading of 0 after.
        let leaking: Series = vec![
            (0.0, 16 * mib),
            (1.0, 32 * mib),
            (2.0, 48 * mib),
            (3.0, 32 * mib),
            (3.1, 0),
            (4.0, 0),
        ];
        assert_eq!(without_teardown(&leaking, true), leaking[..3].to_vec());
        // Still running (attached, the watch stopped first): nothing is left out.
        assert_eq!(without_teardown(&leaking, false), leaking);
        // A flat end, and a series that never falls, are whole.
        let flat: Series = vec![(0.0, 8 * mib), (1.0, 8 * mib), (2.0, 8 * mib)];
        assert_eq!(without_teardown(&flat, true), flat);
    }

    #[test]
    fn windows_take_the_lowest_and_highest_of_each_iteration() {
        // Each centred stretch holds one whole period, its lowest at its start.
        let s = sawtooth(6, 1000.0, 8 * MIB);
        let marks = [600.0, 1600.0, 2600.0, 3600.0, 4600.0, 5600.0];
        let w = windows(&s, true, &marks, Some(6100.0));
        let lows: Vec<u64> = w.iter().map(|x| x.low / MIB).collect();
        let highs: Vec<u64> = w.iter().map(|x| x.high / MIB).collect();
        assert_eq!(lows, [256, 264, 272, 280, 288, 296]);
        assert_eq!(highs, [320, 328, 336, 344, 352, 360]);
        // The stretch the application ended in is not whole (its teardown follows).
        assert_eq!(windows(&s, true, &marks, Some(6000.0)).len(), 5);
        // Before its first allocation, an application's sum is nothing.
        let w = windows(&s, true, &[0.0, 1000.0], Some(3000.0));
        assert_eq!((w[0].low, w[0].low_index), (0, None));
        // A low carried into a stretch is the reading that set it.
        let w = windows(&s, true, &[600.0, 1600.0], Some(3000.0));
        assert_eq!((w[0].low, w[0].low_index), (256 * MIB, Some(0)));
        let thinned = thin(&(0..5000).map(|i| (i as f64, i % 100)).collect());
        assert!(thinned.len() <= TIMELINE_POINTS, "{}", thinned.len());
        assert!(thinned.iter().any(|p| p[1] == 99.0) && thinned.iter().any(|p| p[1] == 0.0));
    }
}
