//! `kiln watch`'s verdict, in the same engine as the card's: is it the card, the machine or
//! the software? The application's memory over time (the driver's per-process figure, else
//! the allocation trace), its iterations and the failures it met are read from the run
//! directory into its view ([`view::AppView`]); its rules ([`rules`]) read that view and
//! its device's evidence, as the card's rules read the evidence alone; which finding
//! explains which (the card's fault the application's cause, an error nothing explains the
//! application's own) is [`super::resolve`]'s; and the application's report is built once
//! from what resolution left.

mod events;
mod report;
pub mod rules;
mod series;
mod unseen;
pub mod view;
pub mod words;

pub use events::AppEvents;
pub use report::{
    ApplicationReport, Diagnosis, IterationSource, MemorySource, Moment, ProcessMemory, SizeClass,
    TIMELINE_POINTS, TraceSummary, Unseen, UnseenKind,
};
pub use series::{Series, period_marks};

use series::{judged_windows, thin, time_marks, without_teardown};
use view::{AppView, Failure, Holders, Others};

use super::evidence::DeviceEvidence;
use super::resolve;
use super::settle::DeviceResult;
use crate::evidence::WatchSettings;
use crate::evidence::trace::{Trace, TraceEvent};
use crate::finding::{Class, Finding, FindingCode};
use crate::telemetry::record::{TelemetryData, TelemetryRecord};
use crate::telemetry::signals;
use crate::thresholds::Thresholds;

/// A watch read up to its findings: the application's view on the device its memory lived
/// on, and what its report needs once resolution has run.
pub struct Watch {
    /// The device its memory lived on, by its place among the devices.
    slot: Option<usize>,
    view: AppView,
    source: MemorySource,
    from: IterationSource,
    histogram: Vec<SizeClass>,
    trace: Option<TraceSummary>,
}

impl Watch {
    /// Reads the watched application's view from the run's events, telemetry and trace,
    /// on the device its memory lived on (the first with memory, unless another's peaks
    /// more than twice as high); what the watch could not read of every device is said in
    /// `notes`.
    pub fn read(
        events: &AppEvents,
        settings: &WatchSettings,
        telemetry: &[TelemetryRecord],
        trace: Option<&Trace>,
        devices: &[DeviceEvidence],
        t: &Thresholds,
        notes: &mut Vec<String>,
    ) -> Watch {
        let Chosen {
            slot,
            memory,
            source,
            stepwise,
            other,
            mut listed,
        } = choose_source(events, telemetry, trace, devices);
        let mut view = AppView {
            memory,
            stepwise,
            pids: events.pids.iter().copied().collect(),
            end: events.end,
            interrupted_ms: events.interrupted_ms,
            last_error: events.last_error.clone(),
            interval_ms: settings.interval_s * 1e3,
            ..AppView::default()
        };
        say_unlisted(telemetry, devices, slot, source, notes);
        let device = slot.and_then(|s| devices.get(s));
        if let (Some(s), Some(d)) = (slot, device) {
            let (_, others, holders) = std::mem::take(&mut listed[s]);
            view.others = others;
            if source == MemorySource::Driver {
                view.holders = holders;
            }
            view.budget = view::budget(telemetry, d.index, trace, &d.uuid);
            view.utilisation = view::gauge_series(telemetry, d.index, signals::UTIL_GPU_PCT);
            view.device_used = view::gauge_series(telemetry, d.index, signals::MEM_USED_BYTES);
            view.failures = view::failures(events, trace, &d.uuid, telemetry, d.index, view.budget);
        }
        // Without its own marks, the iterations are found in its memory: what it held up
        // to its teardown, never the frees of its exit, which would fall in the last
        // stretch and cancel what it held before.
        let ended = events.end.is_some();
        let held = without_teardown(&view.memory, ended);
        let (marks, from) = if !events.marks.is_empty() {
            (events.marks.clone(), IterationSource::Output)
        } else {
            // Iterations it did not mark are no unit a person can count in: rates are
            // said per minute.
            view.by_time = true;
            match period_marks(held, view.stepwise) {
                Some(m) => (m, IterationSource::Period),
                None => (time_marks(held), IterationSource::None),
            }
        };
        view.marks = marks;
        view.windows = judged_windows(&view.memory, view.stepwise, &view.marks, view.end);
        let (histogram, trace_summary) = match (trace, device) {
            (Some(tr), Some(d)) => {
                view.classes_at_windows =
                    view::classes_at(tr, &d.uuid, &view.windows, source == MemorySource::Trace);
                (view.kept_at_windows, view.resource_sizes) =
                    view::kept_at(tr, &d.uuid, &view.windows);
                // The teardown begins after the last iteration of an application that ended.
                let exit_from = view.end.and(view.marks.last().copied());
                (histogram_of(tr), Some(summary_of(tr, exit_from)))
            }
            _ => (Vec::new(), None),
        };
        view.no_gpu_seen =
            events.libraries.is_empty() && events.end.is_some_and(|e| e.0 < 2.0 * view.interval_ms);
        if settings.trace && trace.is_none_or(|tr| tr.attached == 0) {
            view.no_trace = Some(unseen::no_trace_why(events, settings, &view));
        }
        view.unseen = unseen::unseen(trace, &view, source, other.map(|c| (c.1, c.2, c.3)), t);
        Watch {
            slot,
            view,
            source,
            from,
            histogram,
            trace: trace_summary,
        }
    }

    /// The application's findings on the device at `slot` (its rules', on the device its
    /// memory lived on; none on the others).
    pub fn findings(&self, slot: usize, device: &DeviceEvidence, t: &Thresholds) -> Vec<Finding> {
        if self.slot != Some(slot) {
            return Vec::new();
        }
        rules::judge(&self.view, device, t)
    }

    /// What resolution needs of the watch: how the application first failed.
    pub fn context(&self) -> resolve::Context {
        resolve::Context {
            watch: Some(resolve::Watched {
                failed: self.view.failures.first().map(|f| {
                    format!(
                        "{:.1} s into the watch ({})",
                        f.t_ms() / 1e3,
                        rules::failure_said(f)
                    )
                }),
            }),
        }
    }

    /// The device the application's memory lived on, by its place among the devices.
    pub fn slot(&self) -> Option<usize> {
        self.slot
    }

    /// The application's report, from what resolution left on the device its memory lived
    /// on: that device's index, its findings and its result.
    pub fn report(
        self,
        events: &AppEvents,
        settings: &WatchSettings,
        device: Option<(usize, &[Finding], DeviceResult)>,
    ) -> ApplicationReport {
        let findings = device.map_or(&[][..], |d| d.1);
        let not_judged = findings.iter().any(|f| f.code == FindingCode::AppNotJudged);
        let diagnosis = match device {
            Some((_, findings, result)) => diagnosis_of(findings, result, self.source, not_judged),
            None => Diagnosis::NotJudged,
        };
        let Watch {
            slot: _,
            view,
            source,
            from,
            histogram,
            trace,
        } = self;
        let unseen = view
            .unseen
            .iter()
            .map(|u| Unseen {
                what: u.what.clone(),
                decisive: u.decisive && not_judged,
            })
            .collect();
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
            pids: view.pids.clone(),
            exit_code: events.end.and_then(|e| e.1),
            signal: events.end.and_then(|e| e.2),
            ended_ms: events.end.map(|e| e.0),
            killed: events.killed.clone(),
            device: device.map(|d| d.0),
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
            trace,
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
}

/// A series of the application's memory on one device: (device slot, series, source,
/// whether it holds between points).
type Candidate = (usize, Series, MemorySource, bool);

/// The series the application's memory is judged by, and what else was read beside it.
struct Chosen {
    /// The device its memory lived on, by its place among the devices.
    slot: Option<usize>,
    /// Its memory over time.
    memory: Series,
    /// Where that came from.
    source: MemorySource,
    /// Whether it holds between points (the trace's sums).
    stepwise: bool,
    /// The other source's series of the same device, where it has one.
    other: Option<Candidate>,
    /// Every device's per-process lists from the driver.
    listed: Vec<(Series, Others, Holders)>,
}

/// Every device's series of the application from each source, and the one its memory is
/// judged by (the first with memory, unless a later one peaks more than twice as high),
/// with the other source's series of the same device where it has one, and every
/// device's per-process lists from the driver.
fn choose_source(
    events: &AppEvents,
    telemetry: &[TelemetryRecord],
    trace: Option<&Trace>,
    devices: &[DeviceEvidence],
) -> Chosen {
    // The driver's lists are read once: the application's series and every other
    // process's, per device.
    let mut listed: Vec<(Series, Others, Holders)> = devices
        .iter()
        .map(|d| view::driver_series(telemetry, d.index, &events.pids))
        .collect();
    let mut candidates: Vec<Candidate> = Vec::new();
    for (i, d) in devices.iter().enumerate() {
        let driver = std::mem::take(&mut listed[i].0);
        let traced = trace
            .map(|tr| view::trace_series(tr, &d.uuid))
            .unwrap_or_default();
        candidates.push((i, driver, MemorySource::Driver, false));
        candidates.push((i, traced, MemorySource::Trace, true));
    }
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
    let Some(b) = best else {
        return Chosen {
            slot: (!devices.is_empty()).then_some(0),
            memory: Vec::new(),
            source: MemorySource::None,
            stepwise: false,
            other: None,
            listed,
        };
    };
    let (slot, memory, source, stepwise) = candidates.swap_remove(b);
    let other = candidates
        .into_iter()
        .find(|(i, s, ..)| *i == slot && !s.is_empty());
    Chosen {
        slot: Some(slot),
        memory,
        source,
        stepwise,
        other,
        listed,
    }
}

/// A device whose driver gives no per-process figures: said, never read as "no other
/// process".
fn say_unlisted(
    telemetry: &[TelemetryRecord],
    devices: &[DeviceEvidence],
    slot: Option<usize>,
    source: MemorySource,
    notes: &mut Vec<String>,
) {
    for (i, d) in devices.iter().enumerate() {
        let listed = telemetry.iter().any(|r| {
            r.device == Some(d.index)
                && matches!(&r.data, TelemetryData::Sample { readings }
                    if readings.contains_key(signals::OTHER_PROCESSES_NOW.name))
        });
        if !listed {
            notes.push(format!(
                "GPU{}: nothing gives per-process GPU memory here (no NVML, no DRM fdinfo, no Windows GPU counters): other processes' memory is not seen{}",
                d.index,
                if source == MemorySource::Trace && slot == Some(i) {
                    "; the application's comes from its allocation trace"
                } else {
                    ""
                }
            ));
        }
    }
}

/// The trace's allocations by size class (classes with none left out).
fn histogram_of(tr: &Trace) -> Vec<SizeClass> {
    tr.classes
        .iter()
        .enumerate()
        .filter(|(_, c)| c.iter().any(|n| *n > 0))
        .map(|(k, c)| SizeClass {
            up_to_bytes: crate::evidence::ring::class_limit_bytes(k),
            allocations: c[0],
            frees: c[1],
            refused: c[2],
        })
        .collect()
}

/// What the trace holds, in counts.
fn summary_of(tr: &Trace, exit_from_ms: Option<f64>) -> TraceSummary {
    let sum = |i: usize| tr.classes.iter().map(|c| c[i]).sum::<u64>();
    let count =
        |kind: fn(&TraceEvent) -> bool| tr.records.iter().filter(|r| kind(&r.event)).count() as u64;
    TraceSummary {
        attached: tr.attached,
        allocations: sum(0),
        frees: sum(1),
        refused: sum(2),
        lost_records: tr.lost_records,
        device_lost_calls: count(|e| matches!(e, TraceEvent::DeviceLost { .. }))
            + tr.lost_device_calls,
        out_of_memory_calls: count(|e| matches!(e, TraceEvent::OutOfMemory { .. })),
        frees_at_exit: exit_from_ms.map_or(0, |from| {
            (tr.records
                .iter()
                .filter(|r| r.t_ms > from && matches!(r.event, TraceEvent::Free { .. }))
                .count() as u64)
                .min(sum(1))
        }),
    }
}

/// The cause the application's findings give after resolution: the most serious finding
/// of the application's causes (its memory, its loss, the card, its own error); without
/// one, not judged where its memory was not seen or what went unseen could hide a cause,
/// or its device could not be judged whole; else healthy.
fn diagnosis_of(
    findings: &[Finding],
    result: DeviceResult,
    source: MemorySource,
    not_judged: bool,
) -> Diagnosis {
    let cause = findings
        .iter()
        .filter(|f| Diagnosis::of(f.code).is_some())
        .min_by_key(|f| (f.class, f.severity, f.confidence))
        .and_then(|f| Diagnosis::of(f.code));
    let could_not_test = result == DeviceResult::Inconclusive
        && findings.iter().any(|f| f.class == Class::CouldNotTest);
    match cause {
        Some(cause) => cause,
        None if source == MemorySource::None || not_judged || could_not_test => {
            Diagnosis::NotJudged
        }
        None => Diagnosis::Healthy,
    }
}
