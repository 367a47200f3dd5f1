//! Everything the application's rules read, for the device its memory lived on
//! ([`AppView`]), and how it is read from the run's telemetry and the allocation trace: the
//! driver's per-process figures, the trace's live allocations, the budget, and the failures
//! the application met, in the words its framework said them in.

use std::collections::{BTreeMap, BTreeSet};

use super::events::AppEvents;
use super::report::Unseen;
use super::series::{Series, Window};
use crate::evidence::AppFailure;
use crate::evidence::trace::{ResourceKind, Trace, TraceEvent, VkError, same_device};
use crate::telemetry::reading::Reading;
use crate::telemetry::record::{TelemetryData, TelemetryRecord};
use crate::telemetry::signals::{self, Signal};

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
        words: Option<super::words::Said>,
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
    /// The buffers and images it kept, from the trace: at each iteration's lowest point,
    /// how many of each kind and size class were live, in its own sizes (not the blocks
    /// its allocator took from the driver).
    pub kept_at_windows: Vec<BTreeMap<(ResourceKind, usize), i64>>,
    /// The smallest and the largest size it created of each kind and size class.
    pub resource_sizes: BTreeMap<(ResourceKind, usize), (u64, u64)>,
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
    /// What kiln could not see of it, each marked where it could hide a cause.
    pub unseen: Vec<Unseen>,
}

/// The application's memory on a device by the driver's per-process lists (the sum over
/// its processes in each sample that listed processes), and every other process's.
pub fn driver_series(
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
pub fn gauge_series(telemetry: &[TelemetryRecord], device: usize, signal: Signal) -> Series {
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
pub fn trace_series(trace: &Trace, uuid: &str) -> Series {
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
pub fn budget(
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

/// The failures the trace saw the application meet on a device: refused allocations,
/// out-of-memory answers and the device's loss, each with the memory free for it then.
fn traced_failures(
    tr: &Trace,
    uuid: &str,
    free_at: &dyn Fn(f64) -> Option<u64>,
    budget: Option<u64>,
) -> Vec<Failure> {
    let mut out = Vec::new();
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
    out
}

/// The failures the application met on a device: refused allocations and out-of-memory
/// answers and the device's loss from the trace, and what its output said.
pub fn failures(
    events: &AppEvents,
    trace: Option<&Trace>,
    uuid: &str,
    telemetry: &[TelemetryRecord],
    device: usize,
    budget: Option<u64>,
) -> Vec<Failure> {
    let mut out: Vec<Failure> = Vec::new();
    let free_gauge = gauge_series(telemetry, device, signals::MEM_FREE_BYTES);
    let free_at = |t: f64| {
        free_gauge
            .iter()
            .take_while(|p| p.0 <= t + 1.0)
            .last()
            .map(|p| p.1)
    };
    if let Some(tr) = trace {
        out = traced_failures(tr, uuid, &free_at, budget);
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
                .find_map(|(_, _, line)| super::words::read(line));
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
        let words = super::words::read(line);
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
    if !out.iter().any(|f| matches!(f, Failure::Memory { .. }))
        && let Some(f) = refused_by_size(events, trace, uuid, budget)
    {
        out.push(f);
    }
    out.sort_by(|a, b| a.t_ms().total_cmp(&b.t_ms()));
    out
}

/// A request its framework refused by its own check, in words no pattern knows: the
/// application's last error line names a size above the card's memory (or above the
/// largest allocation the device allows, as the trace says it), or the trace saw it
/// create a buffer or image of such a size, no allocation refused reached the driver for
/// it (an allocator's own check, before `vkAllocateMemory`), and it failed. Over the limit whoever
/// refused it; a line whose number is no size, or a size the card could hold, is left as
/// the application's own words.
fn refused_by_size(
    events: &AppEvents,
    trace: Option<&Trace>,
    uuid: &str,
    budget: Option<u64>,
) -> Option<Failure> {
    let line = events
        .last_error
        .as_deref()
        .filter(|l| super::words::read(l).is_none());
    let said = line.and_then(super::words::requested);
    // The trace's largest buffer or image, with when and what made it.
    let created = trace.and_then(|tr| {
        tr.records
            .iter()
            .filter_map(|r| match &r.event {
                TraceEvent::Resource {
                    device,
                    resource,
                    bytes,
                    ..
                } if same_device(uuid, device) => Some((*bytes, r.t_ms, *resource)),
                _ => None,
            })
            .max_by_key(|c| c.0)
    });
    // A buffer larger than the card is no failure by itself (a sparse one, one in the
    // host's memory): only where the application then failed.
    let failed = events
        .end
        .is_some_and(|(_, code, signal)| code.is_some_and(|c| c != 0) || signal.is_some());
    let (asked, elements) = match (said, created) {
        (Some(s), _) => s,
        (None, Some((bytes, ..))) if failed => (bytes, None),
        _ => return None,
    };
    let max_allocation = trace.and_then(|tr| {
        tr.records.iter().find_map(|r| match &r.event {
            TraceEvent::Device {
                device,
                max_allocation_bytes,
                ..
            } if same_device(uuid, device) && *max_allocation_bytes > 0 => {
                Some(*max_allocation_bytes)
            }
            _ => None,
        })
    });
    // The card's memory first: a request above it is one the card can never hold.
    let limit = [budget, max_allocation]
        .into_iter()
        .flatten()
        .find(|limit| asked > *limit)?;
    let unseen_by_driver = if trace.is_some_and(|tr| tr.attached > 0) {
        ", though no refused call reached the driver, where kiln's trace would have seen it"
    } else {
        ""
    };
    let (t_ms, said) = match (said, line, created) {
        (Some(_), Some(line), _) | (None, Some(line), None) => (
            events.end.map_or(0.0, |e| e.0),
            format!("its output: {}{unseen_by_driver}", output_line(line)),
        ),
        (_, _, Some((bytes, at, resource))) => (
            at,
            format!(
                "{} of {} in kiln's trace, no allocation for it refused by the driver",
                match resource {
                    ResourceKind::Buffer => "vkCreateBuffer",
                    ResourceKind::Image => "vkCreateImage",
                },
                crate::units::format_bytes(bytes)
            ),
        ),
        _ => return None,
    };
    Some(Failure::Memory {
        t_ms,
        request: Some(asked),
        result: None,
        free: None,
        live: None,
        said,
        words: Some(super::words::Said {
            framework: super::words::Framework::Unknown,
            kind: super::words::Kind::Refused,
            facts: super::words::Facts {
                request_bytes: Some(asked),
                total_bytes: budget,
                limit_bytes: Some(limit),
                request_elements: elements,
                ..super::words::Facts::default()
            },
        }),
    })
}

/// A line of the application's output as a finding says it: quoted, and whole unless it
/// is long (its start carries what it says).
fn output_line(line: &str) -> String {
    format!("`{}`", crate::text::cut(line.trim(), 120))
}

/// The application's live allocations by size class at each iteration's lowest point:
/// replayed from the trace up to the change that set the lowest (the series is the
/// trace's own sums, one point a change) or up to its time (the driver's samples).
pub fn classes_at(
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

/// The application's live buffers and images on a device by kind and size class at each
/// iteration's lowest point (by time: they are not in the memory's series), and the
/// smallest and largest size it created of each, from the trace's creations and
/// destructions (a destruction of a handle the trace never saw made counts nothing).
pub type Kept = (
    Vec<BTreeMap<(ResourceKind, usize), i64>>,
    BTreeMap<(ResourceKind, usize), (u64, u64)>,
);

/// What [`Kept`] says, from the trace.
pub fn kept_at(trace: &Trace, uuid: &str, windows: &[Window]) -> Kept {
    // (ms, kind and class, one more or one fewer)
    let mut changes: Vec<(f64, (ResourceKind, usize), i64)> = Vec::new();
    let mut live: BTreeMap<(u32, ResourceKind, u64), usize> = BTreeMap::new();
    let mut sizes: BTreeMap<(ResourceKind, usize), (u64, u64)> = BTreeMap::new();
    for r in &trace.records {
        match &r.event {
            TraceEvent::Resource {
                device,
                resource,
                bytes,
                handle,
            } if same_device(uuid, device) && *bytes > 0 => {
                let class = crate::evidence::ring::size_class(*bytes);
                live.insert((r.pid, *resource, *handle), class);
                let size = sizes.entry((*resource, class)).or_insert((*bytes, *bytes));
                *size = (size.0.min(*bytes), size.1.max(*bytes));
                changes.push((r.t_ms, (*resource, class), 1));
            }
            TraceEvent::ResourceDestroyed {
                device,
                resource,
                handle,
            } if same_device(uuid, device) => {
                if let Some(class) = live.remove(&(r.pid, *resource, *handle)) {
                    changes.push((r.t_ms, (*resource, class), -1));
                }
            }
            _ => {}
        }
    }
    let at = windows
        .iter()
        .map(|w| {
            let mut counts: BTreeMap<(ResourceKind, usize), i64> = BTreeMap::new();
            for (_, key, n) in changes.iter().take_while(|c| c.0 <= w.low_ms) {
                *counts.entry(*key).or_default() += n;
            }
            counts
        })
        .collect();
    (at, sizes)
}
