//! Why the application failed: out of memory (another process, fragmentation or an
//! allocation limit, a framework's cache in pieces, or a step over the limit), or its
//! device lost (a driver timeout or a fault of its own work, with the Xids and resets that
//! go with it).

use super::{bytes, failure_said, held_by};
use crate::evidence::trace::VkError;
use crate::finding::{
    Bytes, Confidence, Finding, FindingCode, Millis, Severity, evidence, finding,
};
use crate::telemetry::record::{DriverReset, XidEvent};
use crate::thresholds::Thresholds;
use crate::verdict::evidence::DeviceEvidence;
use crate::verdict::watch::view::{AppView, Failure};
use crate::verdict::watch::words::{Kind, Said};

/// Over the limit (the step's own need; PyTorch's "CUDA semantics" says what its message
/// counts): a peak reaches the budget and the application fails
/// for memory while its baseline is flat.
pub(super) fn over_the_limit(v: &AppView, failure: &Failure, t: &Thresholds) -> Finding {
    let t_ms = failure.t_ms();
    let peak = v
        .memory
        .iter()
        .filter(|p| p.0 <= t_ms + 1.0)
        .map(|p| p.1)
        .max()
        .unwrap_or(0);
    // The card's memory in use by every process, as the failure came.
    let card_used = v
        .device_used
        .iter()
        .filter(|p| p.0 <= t_ms + 1.0 && p.0 >= t_ms - 5_000.0)
        .map(|p| p.1)
        .max();
    let reached = v.budget.is_some_and(|b| {
        peak.max(card_used.unwrap_or(0)) as f64 >= t.budget_reached_share * b as f64
    });
    let short = matches!(failure, Failure::Memory { request: Some(r), free: Some(f), .. } if f < r);
    // A baseline is one where iterations were seen and something was held between them.
    let baseline = v
        .windows
        .iter()
        .map(|w| w.low)
        .min()
        .filter(|b| v.windows.len() >= 2 && *b >= crate::units::MIB);
    let (request, words) = match failure {
        Failure::Memory { request, words, .. } => (*request, words.as_ref()),
        Failure::Lost { .. } => (None, None),
    };
    let card_total = words.and_then(|w| w.facts.total_bytes).or(v.budget);
    // One request the card could never hold: said as such, whatever the memory did.
    let refused_by_check = words
        .filter(|w| w.kind == Kind::Refused)
        .and_then(|w| Some((w, request?, w.facts.limit_bytes?)));
    let above_card = request.zip(card_total).filter(|(r, total)| r > total);
    if let Some((w, asked, limit)) = refused_by_check {
        // A shape says its elements; the bytes are at least one an element.
        let asked_said = match w.facts.request_elements {
            Some(n) => format!("at least {} (a shape of {n} elements)", bytes(asked)),
            None => bytes(asked),
        };
        let above = if card_total == Some(limit) {
            format!("more than the {} the card has", bytes(limit))
        } else {
            format!("above the largest the device allows ({})", bytes(limit))
        };
        return over_the_limit_finding(
            v,
            failure,
            format!(
                "the application asked for {asked_said} in one request, {above}, and {}'s own check refused it before the driver saw it ({}): one request the device can never hold",
                w.framework.name(),
                failure_said(failure)
            ),
            Confidence::High,
            (peak, card_used, baseline),
        );
    }
    if let Some((asked, total)) = above_card {
        return over_the_limit_finding(
            v,
            failure,
            format!(
                "the application asked for {} at once ({}), more than the {} the card has: one request the card can never hold",
                bytes(asked),
                failure_said(failure),
                bytes(total)
            ),
            Confidence::High,
            (peak, card_used, baseline),
        );
    }
    let mut summary = format!(
        "the application ran out of memory ({})",
        failure_said(failure)
    );
    match v.budget {
        Some(b) => summary.push_str(&format!(
            " at a peak of {} of the {} it can have",
            bytes(peak),
            bytes(b)
        )),
        None => summary.push_str(&format!(" at a peak of {}", bytes(peak))),
    }
    if let Some(used) = card_used.filter(|u| *u > peak + peak / 20) {
        summary.push_str(&format!(
            " ({} in use on the card, its neighbours' held flat)",
            bytes(used)
        ));
    }
    if let Some(base) = baseline {
        summary.push_str(&format!(
            ", its baseline flat near {}: one step needs more memory than the card has, not a leak",
            bytes(base)
        ));
    } else {
        summary.push_str(": it needs more memory than the card has");
    }
    over_the_limit_finding(
        v,
        failure,
        summary,
        if reached || short {
            Confidence::High
        } else {
            Confidence::Medium
        },
        (peak, card_used, baseline),
    )
}

/// `APP_OVER_MEMORY_LIMIT` with its summary and its evidence: the peak, the card's memory
/// in use and the baseline as the failure came.
fn over_the_limit_finding(
    v: &AppView,
    failure: &Failure,
    summary: String,
    confidence: Confidence,
    (peak, card_used, baseline): (u64, Option<u64>, Option<u64>),
) -> Finding {
    let t_ms = failure.t_ms();
    let summary = summary + &held_by(v);
    finding(
        FindingCode::AppOverMemoryLimit,
        Severity::Major,
        confidence,
        summary,
        evidence(&OverLimit {
            failed_at_ms: Millis(t_ms),
            failure: failure_said(failure),
            peak_bytes: Bytes(peak),
            budget_bytes: v.budget.map(Bytes),
            card_used_bytes: card_used.map(Bytes),
            baseline_bytes: baseline.map(Bytes),
            free_bytes: (match failure {
                Failure::Memory { free, .. } => *free,
                Failure::Lost { .. } => None,
            })
            .map(Bytes),
            request_bytes: (match failure {
                Failure::Memory { request, .. } => *request,
                Failure::Lost { .. } => None,
            })
            .map(Bytes),
        }),
        "make the step smaller (batch, resolution, model or tile size), or run it on a card with more memory; the card is fine",
    )
}

/// Fragmentation or an allocation limit (PyTorch's "CUDA semantics" on
/// `expandable_segments`; Vulkan's `maxMemoryAllocationCount` for `vkAllocateMemory`): an allocation refused while
/// more than it asked for was free, or refused for the count of allocations.
pub(super) fn fragmented(v: &AppView, failure: &Failure) -> Option<Finding> {
    let Failure::Memory {
        t_ms,
        request,
        result,
        free,
        live,
        words,
        ..
    } = failure
    else {
        return None;
    };
    if let Some(f) = words.as_ref().and_then(|w| cached_in_pieces(v, failure, w)) {
        return Some(f);
    }
    let limit_hit = matches!(
        result,
        Some(VkError::TooManyObjects | VkError::Fragmentation)
    ) || live.is_some_and(|(n, max)| n >= max);
    let room = match (request, free) {
        (Some(r), Some(f)) => *f > r.saturating_mul(2),
        _ => false,
    };
    if !limit_hit && !room {
        return None;
    }
    let mut summary = format!(
        "an allocation was refused ({}) while {} was free",
        failure_said(failure),
        free.map_or_else(|| "memory".to_owned(), bytes)
    );
    if let Some((n, max)) = live {
        summary.push_str(&format!(
            ", with {} live of the {} the device allows",
            crate::text::count(*n, "allocation"),
            max
        ));
    }
    summary.push_str(if limit_hit {
        ": the application made too many separate allocations (an allocation limit), not too large ones"
    } else {
        ": no free stretch large enough was left (fragmentation), not a lack of memory"
    });
    Some(finding(
        FindingCode::AppFragmentation,
        Severity::Major,
        Confidence::High,
        summary,
        evidence(&Refused {
            failed_at_ms: Millis(*t_ms),
            request_bytes: (*request).map(Bytes),
            free_bytes: (*free).map(Bytes),
            result: result.map(VkError::name),
            live_allocations: live.map(|l| l.0),
            max_allocations: live.map(|l| l.1),
            budget_bytes: v.budget.map(Bytes),
        }),
        "suballocate: fewer, larger blocks (an allocator such as VMA or gpu-allocator), or free and reallocate in one size; the card is fine",
    ))
}

/// A framework's caching allocator that held more than the request but not in one piece
/// (PyTorch's reserved-but-unallocated memory above what it asked for): fragmentation of
/// its cache, with the allocator's own remedy.
fn cached_in_pieces(v: &AppView, failure: &Failure, words: &Said) -> Option<Finding> {
    let request = words.facts.request_bytes?;
    let cached = words.cached_bytes()?;
    if cached < request {
        return None;
    }
    Some(finding(
        FindingCode::AppFragmentation,
        Severity::Major,
        Confidence::High,
        format!(
            "{} asked for {} and was refused ({}) while its caching allocator held {} reserved but unallocated: its cache is cut into pieces none of which is large enough (fragmentation), not a lack of memory",
            words.framework.name(),
            bytes(request),
            failure_said(failure),
            bytes(cached)
        ),
        evidence(&CachedInPieces {
            failed_at_ms: Millis(failure.t_ms()),
            framework: words.framework.name(),
            request_bytes: Bytes(request),
            reserved_bytes: words.facts.reserved_bytes.map(Bytes),
            allocated_bytes: words.facts.allocated_bytes.map(Bytes),
            cached_bytes: Bytes(cached),
            free_bytes: words.facts.free_bytes.map(Bytes),
            budget_bytes: v.budget.map(Bytes),
        }),
        "let the allocator join or hand back its blocks: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or max_split_size_mb:512 on older versions), or call torch.cuda.empty_cache() between phases; the card is fine",
    ))
}

/// Another process (the driver's per-process figures, NVML's running processes): another process's memory rose in the window before
/// the failure by a share of the budget.
pub(super) fn other_process(v: &AppView, failure: &Failure, t: &Thresholds) -> Option<Finding> {
    let t_ms = failure.t_ms();
    let from = t_ms - t.other_process_window_s * 1e3;
    let enough = v.budget.map_or(256.0 * crate::units::MIB as f64, |b| {
        t.other_process_share * b as f64
    });
    // The watch's first reading: a process seen then was there before the watch began,
    // and what it held then is where its growth counts from.
    let first_reading = v
        .others
        .values()
        .filter_map(|(_, s)| s.first().map(|p| p.0))
        .chain(v.memory.first().map(|p| p.0))
        .fold(f64::INFINITY, f64::min);
    let mut grown: Vec<(u32, Option<String>, u64, u64)> = Vec::new();
    for (pid, (name, series)) in &v.others {
        let there_from_start = series
            .first()
            .is_some_and(|p| p.0 <= first_reading + 1.5 * v.interval_ms);
        let before = series
            .iter()
            .take_while(|p| p.0 <= from)
            .last()
            .or_else(|| series.first().filter(|_| there_from_start))
            .map_or(0, |p| p.1);
        let at = series
            .iter()
            .filter(|p| p.0 > from && p.0 <= t_ms + 1.0)
            .map(|p| p.1)
            .max();
        if let Some(at) = at
            && (at as f64 - before as f64) >= enough
        {
            grown.push((*pid, name.clone(), before, at));
        }
    }
    if grown.is_empty() {
        return None;
    }
    let said: Vec<String> = grown
        .iter()
        .map(|(pid, name, before, at)| {
            let who = format!(
                "pid {pid}{}",
                name.as_ref().map(|n| format!(" {n}")).unwrap_or_default()
            );
            if *before == 0 {
                format!("{who} came and took {}", bytes(*at))
            } else {
                format!("{who} went from {} to {}", bytes(*before), bytes(*at))
            }
        })
        .collect();
    Some(finding(
        FindingCode::AppOtherProcess,
        Severity::Major,
        Confidence::High,
        format!(
            "another process took GPU memory in the {:.0} s before the application failed ({}): {}",
            t.other_process_window_s,
            failure_said(failure),
            crate::text::list(&said)
        ),
        evidence(&OtherProcesses {
            failed_at_ms: Millis(t_ms),
            failure: failure_said(failure),
            processes: grown
                .iter()
                .map(|(pid, name, before, at)| Grown {
                    pid: *pid,
                    name: name.as_deref(),
                    before_bytes: Bytes(*before),
                    at_failure_bytes: Bytes(*at),
                })
                .collect(),
            budget_bytes: v.budget.map(Bytes),
        }),
        "give the application the GPU to itself (stop or move the other process, or schedule them apart); the card is fine",
    ))
}

/// An Xid that goes with a lost device (NVIDIA's Xid catalog), by the catalogue: an
/// application's fault (an engine exception, an MMU fault, a channel stopped) or a
/// timeout; Some(true) for a timeout.
fn loss_xid(code: Option<u32>, message: &str) -> Option<bool> {
    let info = crate::verdict::xid::code_of(code, message).and_then(crate::verdict::xid::lookup)?;
    match info.finding {
        FindingCode::XidTimeout => Some(true),
        FindingCode::XidApplication => Some(false),
        _ => None,
    }
}

/// A driver timeout (Xid 8 and 109 in NVIDIA's Xid catalog; Windows' TDR, whose `TdrDelay` is
/// 2 s by default, Microsoft Learn): the device lost with the memory flat, with the
/// Xids that go with it and whose they were.
pub(super) fn driver_timeout(
    v: &AppView,
    d: &DeviceEvidence,
    lost: &Failure,
    leaking: bool,
    t: &Thresholds,
) -> Finding {
    let t_ms = lost.t_ms();
    let xids: Vec<&XidEvent> = d
        .telemetry
        .iter()
        .flat_map(|p| &p.xids)
        .filter(|x| loss_xid(x.code, &x.message).is_some() && !x.before_run)
        .collect();
    let recent: Vec<u64> = v
        .memory
        .iter()
        .filter(|p| p.0 <= t_ms + 1.0 && p.0 >= t_ms - 10_000.0)
        .map(|p| p.1)
        .collect();
    let high = recent.iter().max().copied().unwrap_or(0);
    // Flat: far from the budget, and not climbing from step to step.
    let flat = v
        .budget
        .is_none_or(|b| (high as f64) < t.budget_reached_share * b as f64)
        && !leaking;
    let busy = v
        .utilisation
        .iter()
        .filter(|p| p.0 <= t_ms && p.0 >= t_ms - 5_000.0)
        .map(|p| p.1)
        .collect::<Vec<_>>();
    let stalled = busy.len() >= 2 && busy.iter().all(|u| *u >= 95);
    let mut summary = format!("the application lost its device ({})", failure_said(lost));
    if !recent.is_empty() {
        summary.push_str(&format!(
            " with its memory {} (at most {}{})",
            if flat { "flat" } else { "high" },
            bytes(high),
            v.budget
                .map(|b| format!(" of {}", bytes(b)))
                .unwrap_or_default()
        ));
    }
    if stalled {
        summary.push_str(", the engine busy without a break before it");
    }
    // The OS's own word: Windows reset the display driver after a timeout (TDR), or the
    // kernel's GPU driver reset the GPU, around then.
    let resets: Vec<&DriverReset> = d
        .driver_resets()
        .filter(|r| r.t_ms.is_none_or(|at| (at - t_ms).abs() <= 60_000.0))
        .collect();
    if !resets.is_empty() {
        let who = crate::verdict::rules::who_reset(&resets);
        summary.push_str(&format!(
            ", and {who} after a timeout ({}{}): a dispatch longer than the watchdog allows",
            if who.starts_with("Windows") {
                "TDR: "
            } else {
                ""
            },
            crate::verdict::rules::reset_words(&resets)
        ));
    } else if xids.is_empty() {
        summary.push_str(", and no hardware evidence: a driver timeout (a dispatch longer than the watchdog allows) or a fault of the application's own work");
    } else {
        let said: Vec<String> = xids
            .iter()
            .map(|x| {
                let whose = match x.pid {
                    Some(pid) if v.pids.contains(&pid) => {
                        " of the application's process".to_owned()
                    }
                    Some(pid) => format!(" of pid {pid}"),
                    None => String::new(),
                };
                format!("Xid {}{whose}", x.code.unwrap_or(0))
            })
            .collect();
        let timeout = xids
            .iter()
            .any(|x| loss_xid(x.code, &x.message) == Some(true));
        summary.push_str(&format!(
            ", with {}: {}",
            crate::text::list(&said),
            if timeout {
                "a driver timeout (a dispatch longer than the watchdog allows)"
            } else {
                "a fault of the application's own work (an engine exception or a bad address), not of the card"
            }
        ));
    }
    finding(
        FindingCode::AppDriverTimeout,
        Severity::Major,
        if xids.is_empty() && resets.is_empty() {
            Confidence::Medium
        } else {
            Confidence::High
        },
        summary,
        evidence(&Lost {
            driver_resets: &resets,
            lost_at_ms: Millis(t_ms),
            failure: failure_said(lost),
            memory_flat: flat,
            memory_bytes: Bytes(high),
            engine_stalled: stalled,
            xids: xids
                .iter()
                .map(|x| LossXid {
                    xid: x.code,
                    pid: x.pid,
                    application: x.pid.is_some_and(|p| v.pids.contains(&p)),
                    t_ms: x.t_ms.map(Millis),
                })
                .collect(),
        }),
        "split the application's long dispatches (or raise the watchdog's limit where that is yours to set), update the driver, and if it comes back run `kiln run` to clear the card",
    )
}

crate::evidence! {
    /// The evidence of `APP_OVER_MEMORY_LIMIT`.
    struct OverLimit {
        failed_at_ms: Millis => "Failed at",
        failure: String => "Failure",
        peak_bytes: Bytes<u64> => "Peak",
        budget_bytes: Option<Bytes<u64>> => "Budget",
        card_used_bytes: Option<Bytes<u64>> => "Card's memory in use",
        baseline_bytes: Option<Bytes<u64>> => "Baseline",
        free_bytes: Option<Bytes<u64>> => "Free",
        request_bytes: Option<Bytes<u64>> => "Request",
    }
}

crate::evidence! {
    /// The evidence of `APP_FRAGMENTATION` at a refused allocation.
    struct Refused {
        failed_at_ms: Millis => "Failed at",
        request_bytes: Option<Bytes<u64>> => "Request",
        free_bytes: Option<Bytes<u64>> => "Free",
        result: Option<String> => "Result",
        live_allocations: Option<u64> => "Live allocations",
        max_allocations: Option<u64> => "Most allocations",
        budget_bytes: Option<Bytes<u64>> => "Budget",
    }
}

crate::evidence! {
    /// The evidence of `APP_FRAGMENTATION` in a framework's cache.
    struct CachedInPieces {
        failed_at_ms: Millis => "Failed at",
        framework: &'static str => "Framework",
        request_bytes: Bytes<u64> => "Request",
        reserved_bytes: Option<Bytes<u64>> => "Reserved by the framework",
        allocated_bytes: Option<Bytes<u64>> => "Allocated",
        cached_bytes: Bytes<u64> => "Cached by the framework",
        free_bytes: Option<Bytes<u64>> => "Free",
        budget_bytes: Option<Bytes<u64>> => "Budget",
    }
}

crate::evidence! {
    /// The evidence of `APP_OTHER_PROCESS`.
    struct OtherProcesses<'a> {
        failed_at_ms: Millis => "Failed at",
        failure: String => "Failure",
        processes: Vec<Grown<'a>> => "Processes",
        budget_bytes: Option<Bytes<u64>> => "Budget",
    }
}

crate::evidence! {
    /// Another process whose memory grew before the failure.
    struct Grown<'a> {
        pid: u32 => "PID",
        name: Option<&'a str> => "Name",
        before_bytes: Bytes<u64> => "Held before",
        at_failure_bytes: Bytes<u64> => "Held at the failure",
    }
}

crate::evidence! {
    /// The evidence of `APP_DRIVER_TIMEOUT`.
    struct Lost<'a> {
        driver_resets: &'a [&'a DriverReset] => "Driver resets",
        lost_at_ms: Millis => "Lost at",
        failure: String => "Failure",
        memory_flat: bool => "Memory flat before it",
        memory_bytes: Bytes<u64> => "Memory held",
        engine_stalled: bool => "Engine stalled",
        xids: Vec<LossXid> => "Xids",
    }
}

crate::evidence! {
    /// An Xid that goes with a lost device, and whose it was.
    struct LossXid {
        xid: Option<u32> => "Xid",
        pid: Option<u32> => "PID",
        /// The application's own process.
        application: bool => "The application's",
        t_ms: Option<Millis> => "Time into the run",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::watch::AppEvents;
    use crate::verdict::watch::view::failures;

    const GIB: u64 = 1 << 30;

    /// An application that ended with `line` as its last error, 2 s into the watch.
    fn ended_saying(line: &str) -> AppEvents {
        AppEvents {
            last_error: Some(line.into()),
            end: Some((2_000.0, Some(1), None)),
            ..AppEvents::default()
        }
    }

    #[test]
    fn a_size_above_the_card_in_any_framework_s_words_is_over_the_limit_and_another_number_is_not()
    {
        let budget = Some(2 * GIB);
        // Taichi's own check, before any driver call: a shape of 2^34 elements, at least
        // 16 GiB, on a 2 GiB card; and an engine kiln has no words for, naming its bytes.
        for line in [
            "taichi.lang.exception.TaichiRuntimeError: (17179869184,) is not a valid shape for ndarray",
            "EngineError: cannot reserve 68719476736 bytes for the scene",
        ] {
            let found = failures(&ended_saying(line), None, "", &[], 0, budget);
            let [
                f @ Failure::Memory {
                    request: Some(r), ..
                },
            ] = found.as_slice()
            else {
                panic!("{line}: {found:?}");
            };
            assert!(*r > 2 * GIB, "{line}");
            let view = AppView {
                failures: found.clone(),
                budget,
                ..AppView::default()
            };
            let over = over_the_limit(&view, f, &Thresholds::default());
            assert_eq!(over.code, crate::finding::FindingCode::AppOverMemoryLimit);
            assert!(
                over.summary
                    .contains("its framework's own check refused it")
                    && over.summary.contains("more than the 2.00 GiB the card has"),
                "{}",
                over.summary
            );
        }
        // The near misses: a number that is no size, and a size the card could hold.
        for line in [
            "IndexError: index 17179869184 is out of bounds for axis 0",
            "EngineError: cannot reserve 1073741824 bytes for the scene",
        ] {
            let found = failures(&ended_saying(line), None, "", &[], 0, budget);
            assert!(found.is_empty(), "{line}: {found:?}");
        }
    }

    #[test]
    fn a_buffer_above_the_card_in_the_trace_is_over_the_limit_where_the_application_failed() {
        use crate::evidence::trace::{ResourceKind, Trace, TraceEvent, TraceRecord};
        let budget = Some(2 * GIB);
        let device = "6d65736132322e33".to_owned();
        let uuid = "6d657361-3232-2e33-2e36-000000000000";
        let at = |t_ms: f64, event: TraceEvent| TraceRecord {
            seq: 0,
            t_ms,
            pid: 7,
            event,
        };
        // An allocator that created a 64 GiB buffer and refused it memory by its own
        // check: no vkAllocateMemory was refused.
        let trace = Trace {
            attached: 1,
            records: vec![
                at(10.0, TraceEvent::Attach),
                at(
                    900.0,
                    TraceEvent::Resource {
                        device: device.clone(),
                        resource: ResourceKind::Buffer,
                        bytes: 64 * GIB,
                        handle: 0x55,
                    },
                ),
            ],
            ..Trace::default()
        };
        let ended = |code: i32| AppEvents {
            end: Some((1_000.0, Some(code), None)),
            ..AppEvents::default()
        };
        let found = failures(&ended(1), Some(&trace), uuid, &[], 0, budget);
        let [f] = found.as_slice() else {
            panic!("{found:?}");
        };
        let view = AppView {
            failures: found.clone(),
            budget,
            ..AppView::default()
        };
        let over = over_the_limit(&view, f, &Thresholds::default());
        assert!(
            over.summary
                .contains("vkCreateBuffer of 64.00 GiB in kiln's trace"),
            "{}",
            over.summary
        );
        // The near miss: the same buffer in an application that ran on to its end (a
        // sparse buffer, or one in the host's memory) is no failure.
        assert!(failures(&ended(0), Some(&trace), uuid, &[], 0, budget).is_empty());
    }
}
