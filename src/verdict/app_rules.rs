//! The fingerprint rules of a watched application (REFERENCE.md §7), one per cause, each
//! a pure function of the application's view ([`super::app::AppView`]) and its device's
//! report: a leak, a step over the memory limit, fragmentation, another process, a driver
//! timeout, the card; and the application's own error when none of them explains its end.

use serde::Serialize;

use super::app::{AppView, Failure};
use super::app_words::{Kind, Said};
use super::model::DeviceReport;
use crate::evidence::trace::VkError;
use crate::finding::{Class, Confidence, Finding, FindingCode, Severity, evidence, finding};
use crate::telemetry::record::{DriverReset, XidEvent};
use crate::thresholds::Thresholds;

/// Bytes for people, down to KiB.
fn bytes(b: u64) -> String {
    if b < crate::units::MIB {
        format!("{} KiB", b / crate::units::KIB)
    } else {
        crate::units::format_bytes(b)
    }
}

/// Seconds for people: `42 s`, `3.2 min`, `1.5 h`.
fn duration(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 3600.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

/// Whether the application's memory, as `v` holds it, climbs as a leak does.
pub fn leaking(v: &AppView, t: &Thresholds) -> bool {
    Trend::of(v).is_some_and(|tr| tr.leaks(t))
}

/// The application's findings on its device.
pub fn judge(v: &AppView, d: &DeviceReport, t: &Thresholds) -> Vec<Finding> {
    let mut out = card(d, v);
    if v.memory.is_empty() {
        out.push(unseen(v));
    }
    let card_found = !out.is_empty();
    let trend = Trend::of(v);
    let leaking = trend.as_ref().is_some_and(|tr| tr.leaks(t));
    let mut explained = false;
    if let Some(failure) = v
        .failures
        .iter()
        .find(|f| matches!(f, Failure::Memory { .. }))
    {
        if let Some(f) = other_process(v, failure, t) {
            out.push(f);
        } else if let Some(f) = fragmented(v, failure) {
            out.push(f);
        } else if !leaking {
            out.push(over_the_limit(v, failure, t));
        }
        explained = true;
    }
    if let Some(tr) = &trend {
        if leaking {
            out.push(leak(v, tr, t));
        } else if tr.creeps(t) && !out.iter().any(|f| f.code == FindingCode::AppFragmentation) {
            out.push(creeping_floor(v, tr));
        }
    }
    if let Some(lost) = v
        .failures
        .iter()
        .find(|f| matches!(f, Failure::Lost { .. }))
        && !card_found
    {
        if let Some(f) = other_process(v, lost, t) {
            if !out.iter().any(|o| o.code == FindingCode::AppOtherProcess) {
                out.push(f);
            }
        } else if !explained {
            out.push(driver_timeout(v, d, lost, leaking, t));
        }
    }
    let judged = out.iter().any(|f| f.class != Class::Info);
    if !judged && let Some((at, code, signal)) = v.end {
        let failed = code.is_some_and(|c| c != 0) || signal.is_some();
        // kiln ends the application it started when a signal interrupts the watch.
        let stopped_by_kiln = v.interrupted_ms.is_some_and(|i| at >= i);
        if failed && !stopped_by_kiln {
            out.push(own_exit(at, code, signal, v.last_error.as_deref()));
        }
    }
    out
}

/// The baselines' line: how the lowest memory of each iteration moves, and the peaks.
#[derive(Debug, Clone)]
struct Trend {
    /// Iterations judged.
    n: usize,
    /// Bytes per iteration the baseline climbs (the fit's slope).
    slope: f64,
    /// How well the line fits (R²).
    r2: f64,
    /// The slope of the later half alone.
    later_slope: f64,
    /// The peaks' slope.
    peak_slope: f64,
    /// The first and last baselines.
    first: u64,
    last: u64,
    /// The highest peak.
    peak: u64,
    /// Milliseconds an iteration lasts, on average.
    iteration_ms: f64,
    /// The deepest fall from one baseline to the next.
    deepest_fall: f64,
    /// The lowest floor and the highest peak of each third of the judged iterations.
    thirds: Vec<(u64, u64)>,
}

/// A least-squares line through `ys` at x = 0, 1, 2, ...: (slope, R²).
fn fit(ys: &[f64]) -> (f64, f64) {
    let n = ys.len() as f64;
    if ys.len() < 2 {
        return (0.0, 0.0);
    }
    let mx = (n - 1.0) / 2.0;
    let my = ys.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (i, y) in ys.iter().enumerate() {
        let dx = i as f64 - mx;
        let dy = y - my;
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    let slope = sxy / sxx;
    let r2 = if syy > 0.0 {
        (sxy * sxy) / (sxx * syy)
    } else {
        0.0
    };
    (slope, r2)
}

/// The fewest iterations (or stretches of time) a leak is judged over, start-up left out:
/// fewer is a run too short to call, said as such.
pub const LEAK_MIN_WINDOWS: usize = 5;

/// The shortest span a leak judged by time is called over, s: a model's upload in its
/// first second climbs as steeply as any leak.
pub const LEAK_MIN_SPAN_S: f64 = 5.0;

/// The smallest rise of the floor from one third of the judged iterations to the next
/// that counts as a step, bytes: above the jitter of a sampled floor.
const STEP_MIN_BYTES: f64 = 4.0 * 1024.0 * 1024.0;

/// Why the memory could not be judged for a leak: too few iterations or too short a
/// span once start-up is left out. None where it could.
pub fn too_short(v: &AppView) -> Option<String> {
    let judged = v.windows.len().saturating_sub(1);
    // The time the judged iterations (or stretches) cover, each as long as the average
    // one: from the first's mark to the last's is as many of them as were judged.
    let span_s = match (v.windows.first(), v.windows.last()) {
        (Some(a), Some(b)) => (b.mark_ms - a.mark_ms) / 1e3,
        _ => 0.0,
    };
    // By time, the stretches are kiln's own cut of the watch: its span is what counts.
    let enough = if v.by_time {
        judged >= 3 && span_s >= LEAK_MIN_SPAN_S
    } else {
        judged >= LEAK_MIN_WINDOWS
    };
    if enough {
        return None;
    }
    Some(if v.by_time {
        format!(
            "too short to judge a leak: {:.1} s of memory after start-up, {LEAK_MIN_SPAN_S:.0} s at least (pass --iteration with a pattern of its output that marks each step, or watch longer)",
            span_s.max(0.0)
        )
    } else {
        format!(
            "too short to judge a leak: {} after the first, {LEAK_MIN_WINDOWS} at least (watch more iterations)",
            crate::text::count(judged as u64, "iteration")
        )
    })
}

impl Trend {
    /// The trend of the iterations after the first (start-up: loading a model, filling
    /// caches), where enough of them were seen ([`too_short`]).
    fn of(v: &AppView) -> Option<Trend> {
        if too_short(v).is_some() {
            return None;
        }
        let w = &v.windows[1..];
        let lows: Vec<f64> = w.iter().map(|x| x.low as f64).collect();
        let highs: Vec<f64> = w.iter().map(|x| x.high as f64).collect();
        let (slope, r2) = fit(&lows);
        let later = &lows[lows.len() / 2..];
        let (later_slope, _) = fit(later);
        let (peak_slope, _) = fit(&highs);
        let iteration_ms = (w[w.len() - 1].mark_ms - w[0].mark_ms) / (w.len() - 1) as f64;
        let deepest_fall = lows.windows(2).map(|p| p[0] - p[1]).fold(0.0f64, f64::max);
        // The floor and the peaks of each third of the judged iterations: the lowest floor
        // and the highest peak of each, so that a sampled floor's jitter is no step.
        let thirds: Vec<(u64, u64)> = (0..3)
            .map(|k| {
                let part = &w[k * w.len() / 3..(k + 1) * w.len() / 3];
                (
                    part.iter().map(|x| x.low).min().unwrap_or(0),
                    part.iter().map(|x| x.high).max().unwrap_or(0),
                )
            })
            .collect();
        Some(Trend {
            thirds,
            n: w.len(),
            slope,
            r2,
            later_slope,
            peak_slope,
            first: w[0].low,
            last: w[w.len() - 1].low,
            peak: w.iter().map(|x| x.high).max().unwrap_or(0),
            iteration_ms,
            deepest_fall,
        })
    }

    /// The baseline climbs steadily, enough to matter, still at the end, never falling
    /// back by more than two steps' worth.
    fn steady_climb(&self, t: &Thresholds) -> bool {
        self.slope > 0.0
            && (self.last as f64 - self.first as f64) >= t.leak_min_bytes
            && self.r2 >= t.leak_fit_r2
            && self.later_slope >= 0.5 * self.slope
            && self.deepest_fall <= 2.0 * self.slope
    }

    /// A leak: the whole usage moves up, peaks with the baseline, whether steadily or in
    /// steps.
    fn leaks(&self, t: &Thresholds) -> bool {
        self.climbs_as_a_whole(t) || self.steps_up(t)
    }

    /// The baseline climbs steadily and the peaks with it.
    fn climbs_as_a_whole(&self, t: &Thresholds) -> bool {
        self.steady_climb(t) && self.peak_slope >= 0.5 * self.slope
    }

    /// A floor that rises in steps and never falls back: the lowest floor of each third
    /// of the judged iterations above the third's before by a step at least, together as
    /// much as a leak must climb, the peaks rising with it. A pooling allocator's blocks
    /// hide a leak so, flat between its steps; a cache that fills at start-up grows in
    /// the first third alone.
    fn steps_up(&self, t: &Thresholds) -> bool {
        let floors = self.step_floors();
        let rises = floors
            .windows(2)
            .all(|p| p[1] as f64 - p[0] as f64 >= STEP_MIN_BYTES);
        let (first, last) = (self.thirds[0], self.thirds[2]);
        rises && (last.0 as f64 - first.0 as f64) >= t.leak_min_bytes && last.1 > first.1
    }

    /// The lowest floor of each third of the judged iterations: (96 MiB, 224 MiB,
    /// 480 MiB).
    fn step_floors(&self) -> Vec<u64> {
        self.thirds.iter().map(|t| t.0).collect()
    }

    /// A floor that creeps under flat peaks: memory not handed back between steps.
    fn creeps(&self, t: &Thresholds) -> bool {
        self.steady_climb(t) && self.peak_slope < 0.25 * self.slope
    }
}

/// A leak (REFERENCE.md §7): the baseline climbs a steady amount per iteration.
fn leak(v: &AppView, tr: &Trend, t: &Thresholds) -> Finding {
    let per_minute = bytes((tr.slope * 60_000.0 / tr.iteration_ms).max(0.0) as u64);
    let over = duration(tr.n as f64 * tr.iteration_ms / 1e3);
    let stepped = !tr.climbs_as_a_whole(t);
    let mut summary = if stepped {
        let floors: Vec<String> = tr.step_floors().into_iter().map(bytes).collect();
        format!(
            "the application's lowest memory rose in steps ({}) over {} and never fell back: a leak that a pooling allocator hides between its steps",
            crate::text::list(&floors),
            if v.by_time {
                over.clone()
            } else {
                format!(
                    "the {} after the first",
                    crate::text::count(tr.n as u64, "iteration")
                )
            }
        )
    } else if v.by_time {
        format!(
            "the application's lowest memory climbed {per_minute} a minute over {over} (from {} to {}, fit R² {:.2}) and never fell back: a leak",
            bytes(tr.first),
            bytes(tr.last),
            tr.r2
        )
    } else {
        format!(
            "the application's memory between iterations climbed {} an iteration over the {} after the first (from {} to {}, fit R² {:.2}) and never fell back: a leak",
            bytes(tr.slope.max(0.0) as u64),
            crate::text::count(tr.n as u64, "iteration"),
            bytes(tr.first),
            bytes(tr.last),
            tr.r2
        )
    };
    let left_s = v.budget.map(|b| {
        let rate_per_s = tr.slope / (tr.iteration_ms / 1e3);
        (b.saturating_sub(tr.peak) as f64 / rate_per_s).max(0.0)
    });
    // Where it failed already, what it would take to run out says nothing more.
    if let (Some(b), Some(s), true) = (v.budget, left_s, v.failures.is_empty()) {
        summary.push_str(&format!(
            "; at this rate it uses up the {} it can have in {}",
            bytes(b),
            duration(s)
        ));
    }
    let class = leaking_class(v);
    if let Some((k, more)) = class {
        let limit = crate::evidence::ring::class_limit_bytes(k);
        summary.push_str(&format!(
            "; allocations of {} to {} are made and not freed ({} more live at the last iteration than at the first)",
            bytes(limit / 2),
            bytes(limit),
            more
        ));
    }
    summary.push_str(&held_by(v));
    if let Some(f) = v.failures.first() {
        summary.push_str(&format!(
            "; it failed {:.1} s into the watch ({})",
            f.t_ms() / 1e3,
            failure_said(f)
        ));
    }
    let confidence = if tr.r2 >= 0.95 && tr.n >= 6 {
        Confidence::High
    } else {
        Confidence::Medium
    };
    finding(
        FindingCode::AppMemoryLeak,
        Severity::Major,
        confidence,
        summary,
        evidence(&Leak {
            iterations: tr.n,
            bytes_per_iteration: tr.slope,
            bytes_per_minute: tr.slope * 60_000.0 / tr.iteration_ms,
            fit_r2: tr.r2,
            baseline_first_bytes: tr.first,
            baseline_last_bytes: tr.last,
            peak_bytes: tr.peak,
            budget_bytes: v.budget,
            seconds_until_budget: left_s,
            leaking_size_class_bytes: class
                .map(|(k, _)| crate::evidence::ring::class_limit_bytes(k)),
            leaking_allocations: class.map(|(_, n)| n),
            by_time: v.by_time,
            floor_steps_bytes: stepped.then(|| tr.step_floors()),
        }),
        "free what each iteration allocates (the application's bug, not the card's), or restart it before it runs out",
    )
}

/// The size class whose live allocations grew most (in bytes) from the first iteration's
/// lowest point to the last's, with how many more were live.
fn leaking_class(v: &AppView) -> Option<(usize, i64)> {
    let (first, last) = (v.classes_at_windows.first()?, v.classes_at_windows.last()?);
    last.iter()
        .map(|(k, n)| (*k, n - first.get(k).copied().unwrap_or(0)))
        .filter(|(_, more)| *more > 0)
        .max_by_key(|(k, more)| {
            *more as i128 * i128::from(crate::evidence::ring::class_limit_bytes(*k))
        })
}

/// Fragmentation without a failure: the floor creeps while the peaks stay flat.
fn creeping_floor(v: &AppView, tr: &Trend) -> Finding {
    finding(
        FindingCode::AppFragmentation,
        Severity::Minor,
        Confidence::Medium,
        format!(
            "the application's lowest memory between iterations crept from {} to {} over {} while its peaks stayed near {}: memory it no longer uses is not handed back (fragmentation)",
            bytes(tr.first),
            bytes(tr.last),
            crate::text::count(tr.n as u64, "iteration"),
            bytes(tr.peak)
        ),
        evidence(&Creep {
            iterations: tr.n,
            baseline_first_bytes: tr.first,
            baseline_last_bytes: tr.last,
            baseline_bytes_per_iteration: tr.slope,
            peak_bytes_per_iteration: tr.peak_slope,
            budget_bytes: v.budget,
        }),
        "let the application's allocator release or reuse what it frees (empty its cache between steps, allocate in fewer, larger blocks); the card is fine",
    )
}

/// Which of the application's processes held its memory, where it has several with
/// memory: `; pid 4311 (python3) held the most of its processes: 61.2 GiB`.
fn held_by(v: &AppView) -> String {
    let holding: Vec<&(u32, Option<String>, u64)> = v.holders.iter().filter(|h| h.2 > 0).collect();
    match holding.as_slice() {
        [top, _, ..] => format!(
            "; of its {} processes holding GPU memory, pid {}{} held the most: {}",
            holding.len(),
            top.0,
            top.1
                .as_ref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default(),
            bytes(top.2)
        ),
        _ => String::new(),
    }
}

/// How a failure was said, for a summary.
fn failure_said(f: &Failure) -> String {
    match f {
        Failure::Memory {
            request,
            result,
            said,
            ..
        } => match (result, request) {
            // A line of its output says it in its own words.
            (None, _) => said.clone(),
            (Some(e), Some(r)) => format!("{said} of {} answered {}", bytes(*r), e.name()),
            (Some(e), None) => format!("{said}: {}", e.name()),
        },
        Failure::Lost { said, .. } => format!("{said}: the device was lost"),
    }
}

/// Over the limit (REFERENCE.md §7): a peak reaches the budget and the application fails
/// for memory while its baseline is flat.
fn over_the_limit(v: &AppView, failure: &Failure, t: &Thresholds) -> Finding {
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
        return over_the_limit_finding(
            v,
            failure,
            format!(
                "the application asked for {} in one buffer, above the largest the device allows ({}), and {}'s own check refused it before the driver saw it ({})",
                bytes(asked),
                bytes(limit),
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
            failed_at_ms: t_ms,
            failure: failure_said(failure),
            peak_bytes: peak,
            budget_bytes: v.budget,
            card_used_bytes: card_used,
            baseline_bytes: baseline,
            free_bytes: match failure {
                Failure::Memory { free, .. } => *free,
                Failure::Lost { .. } => None,
            },
            request_bytes: match failure {
                Failure::Memory { request, .. } => *request,
                Failure::Lost { .. } => None,
            },
        }),
        "make the step smaller (batch, resolution, model or tile size), or run it on a card with more memory; the card is fine",
    )
}

/// Fragmentation or an allocation limit (REFERENCE.md §7): an allocation refused while
/// more than it asked for was free, or refused for the count of allocations.
fn fragmented(v: &AppView, failure: &Failure) -> Option<Finding> {
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
            failed_at_ms: *t_ms,
            request_bytes: *request,
            free_bytes: *free,
            result: result.map(VkError::name),
            live_allocations: live.map(|l| l.0),
            max_allocations: live.map(|l| l.1),
            budget_bytes: v.budget,
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
            failed_at_ms: failure.t_ms(),
            framework: words.framework.name(),
            request_bytes: request,
            reserved_bytes: words.facts.reserved_bytes,
            allocated_bytes: words.facts.allocated_bytes,
            cached_bytes: cached,
            free_bytes: words.facts.free_bytes,
            budget_bytes: v.budget,
        }),
        "let the allocator join or hand back its blocks: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or max_split_size_mb:512 on older versions), or call torch.cuda.empty_cache() between phases; the card is fine",
    ))
}

/// Another process (REFERENCE.md §7): another process's memory rose in the window before
/// the failure by a share of the budget.
fn other_process(v: &AppView, failure: &Failure, t: &Thresholds) -> Option<Finding> {
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
            failed_at_ms: t_ms,
            failure: failure_said(failure),
            processes: grown
                .iter()
                .map(|(pid, name, before, at)| Grown {
                    pid: *pid,
                    name: name.as_deref(),
                    before_bytes: *before,
                    at_failure_bytes: *at,
                })
                .collect(),
            budget_bytes: v.budget,
        }),
        "give the application the GPU to itself (stop or move the other process, or schedule them apart); the card is fine",
    ))
}

/// An Xid that goes with a lost device (REFERENCE.md §2, §7), by the catalogue: an
/// application's fault (an engine exception, an MMU fault, a channel stopped) or a
/// timeout; Some(true) for a timeout.
fn loss_xid(code: Option<u32>, message: &str) -> Option<bool> {
    let info = super::xid::code_of(code, message).and_then(super::xid::lookup)?;
    match info.finding {
        FindingCode::XidTimeout => Some(true),
        FindingCode::XidApplication => Some(false),
        _ => None,
    }
}

/// A driver timeout (REFERENCE.md §7): the device lost with the memory flat, with the
/// Xids that go with it and whose they were.
fn driver_timeout(
    v: &AppView,
    d: &DeviceReport,
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
    // Windows' own word: it reset the display driver after a timeout (TDR) around then.
    let resets: Vec<&DriverReset> = d
        .driver_resets()
        .filter(|r| r.t_ms.is_none_or(|at| (at - t_ms).abs() <= 60_000.0))
        .collect();
    if !resets.is_empty() {
        summary.push_str(&format!(
            ", and Windows reset the display driver after a timeout (TDR: {}): a dispatch longer than the watchdog allows",
            super::rules::reset_words(&resets)
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
            lost_at_ms: t_ms,
            failure: failure_said(lost),
            memory_flat: flat,
            memory_bytes: high,
            engine_stalled: stalled,
            xids: xids
                .iter()
                .map(|x| LossXid {
                    xid: x.code,
                    pid: x.pid,
                    application: x.pid.is_some_and(|p| v.pids.contains(&p)),
                    t_ms: x.t_ms,
                })
                .collect(),
        }),
        "split the application's long dispatches (or raise the watchdog's limit where that is yours to set), update the driver, and if it comes back run `kiln run` to clear the card",
    )
}

/// The card (REFERENCE.md §7): the device's own hardware findings while the application
/// was watched, said as the cause with the action to test the card.
pub fn card(d: &DeviceReport, v: &AppView) -> Vec<Finding> {
    let hardware: Vec<&Finding> = d
        .findings
        .iter()
        .filter(|f| {
            f.class == Class::Hardware
                && f.severity <= Severity::Major
                && f.confidence <= Confidence::Medium
                && f.code != FindingCode::AppCardFault
        })
        .collect();
    if hardware.is_empty() {
        return Vec::new();
    }
    let codes: Vec<&str> = hardware.iter().map(|f| f.code.name()).collect();
    let mut summary = format!(
        "the card: {}",
        hardware
            .iter()
            .map(|f| f.summary.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    );
    if let Some(f) = v.failures.first() {
        summary.push_str(&format!(
            "; the application failed {:.1} s into the watch ({})",
            f.t_ms() / 1e3,
            failure_said(f)
        ));
    }
    vec![finding(
        FindingCode::AppCardFault,
        Severity::Critical,
        Confidence::High,
        summary,
        evidence(&CardFindings { findings: codes }),
        "test the card: `kiln run --profile rma` on this GPU, and keep this run directory with its report for the vendor",
    )]
}

/// Nothing of the application's memory was seen: what rests on it cannot be judged.
fn unseen(v: &AppView) -> Finding {
    let why = match v.end {
        Some((at, ..)) if at < 2.0 * v.interval_ms => format!(
            "the application ended {:.1} s into the watch, before its memory could be read: nothing to judge",
            at / 1e3
        ),
        _ => format!(
            "none of the application's GPU memory could be read: nothing gave a per-process figure for it (no NVML, no DRM fdinfo, no Windows GPU counters), and {}",
            v.no_trace.as_deref().map_or_else(
                || "there is no allocation trace (--pid, or --no-trace)".to_owned(),
                |why| why.replacen("no allocation trace: ", "there is no allocation trace: ", 1)
            )
        ),
    };
    let action = if v.no_gpu_seen {
        "watch an application while it uses the GPU"
    } else if v.no_trace.is_some() {
        "let kiln's layer load as said above, or watch it where per-process memory is reported (NVIDIA's NVML, amdgpu or Intel's DRM fdinfo, Windows 10's GPU performance counters)"
    } else {
        "watch it where per-process memory is reported (NVIDIA's NVML, amdgpu or Intel's DRM fdinfo, Windows 10's GPU performance counters), or start it under kiln (kiln watch -- CMD) so that kiln's layer traces its allocations"
    };
    finding(
        FindingCode::AppMemoryUnseen,
        Severity::Major,
        Confidence::High,
        why,
        evidence(&Unseen {
            ended_at_ms: v.end.map(|e| e.0),
            processes: &v.pids,
        }),
        action,
    )
}

/// What the application's memory did could not be judged, for what was unseen: never a
/// pass.
pub fn not_judged(unseen: &[&super::app::Unseen]) -> Finding {
    use super::app::UnseenKind;
    let said: Vec<String> = unseen.iter().map(|u| u.words()).collect();
    let mut actions: Vec<&str> = unseen
        .iter()
        .map(|u| match u.what {
            UnseenKind::TooShort { .. } => "watch it longer, or with --iteration marking its steps",
            UnseenKind::TraceStopped { .. } => "watch it again, and report the trace's stop (a bug of kiln's) with this run directory",
            UnseenKind::SourcesDisagree { .. } => "watch it longer and compare the driver's own per-process figure (nvidia-smi --query-compute-apps, amdgpu's fdinfo); `--no-trace` judges by the driver's figure alone",
            UnseenKind::NoTrace { .. } => "let kiln's layer load into it",
        })
        .collect();
    actions.dedup();
    finding(
        FindingCode::AppNotJudged,
        Severity::Major,
        Confidence::High,
        format!(
            "what the application's memory did could not be judged: {}",
            said.join("; ")
        ),
        evidence(&NotJudged { unseen }),
        &actions.join("; "),
    )
}

/// A signal stopped the watch: what it saw stands, the application's end was not watched.
pub fn watch_interrupted(at_s: f64) -> Finding {
    finding(
        FindingCode::RunInterrupted,
        Severity::Major,
        Confidence::High,
        format!(
            "a signal interrupted the watch at {at_s:.1} s while the application ran: what was seen before it stands, the rest of the application's run was not watched"
        ),
        evidence(&Interrupted {
            at_s: (at_s * 10.0).round() / 10.0,
        }),
        "watch the application again to its end (a scheduler's time limit must cover the application's own)",
    )
}

/// The application's own failure: it crashed or exited with an error and nothing on the
/// GPU explains it. Never "healthy": the card's evidence is said as clean, and a test of
/// the card is the step if it comes back.
fn own_exit(
    at_ms: f64,
    code: Option<i32>,
    signal: Option<i32>,
    last_error: Option<&str>,
) -> Finding {
    let how = match (code, signal) {
        (_, Some(s)) => format!("was ended by signal {s}{}", signal_name(s)),
        (Some(c), None) => format!("exited with {c}"),
        (None, None) => "ended".into(),
    };
    let said = last_error
        .map(|l| format!("; its last error: `{}`", crate::text::cut(l.trim(), 160)))
        .unwrap_or_default();
    finding(
        FindingCode::AppExit,
        Severity::Major,
        Confidence::High,
        format!(
            "the application {how} {:.1} s into the watch, and nothing on the GPU explains it (no failed allocation or lost device reached the driver, and the card's evidence is clean): the application's own failure{said}",
            at_ms / 1e3
        ),
        evidence(&OwnExit {
            exit_code: code,
            signal,
            ended_at_ms: at_ms,
            last_error_line: last_error,
        }),
        "read the application's own output and logs for why it stopped; if it comes back, `kiln run` tests the card",
    )
}

/// A signal's name in brackets (` (SIGSEGV)`), for the signals an application dies of.
fn signal_name(signal: i32) -> &'static str {
    match signal {
        4 => " (SIGILL)",
        6 => " (SIGABRT)",
        7 => " (SIGBUS)",
        8 => " (SIGFPE)",
        9 => " (SIGKILL, as the kernel's out-of-memory killer and schedulers send)",
        11 => " (SIGSEGV)",
        15 => " (SIGTERM)",
        _ => "",
    }
}

/// The evidence of `APP_MEMORY_LEAK`.
#[derive(Serialize)]
struct Leak {
    iterations: usize,
    bytes_per_iteration: f64,
    bytes_per_minute: f64,
    fit_r2: f64,
    baseline_first_bytes: u64,
    baseline_last_bytes: u64,
    peak_bytes: u64,
    budget_bytes: Option<u64>,
    seconds_until_budget: Option<f64>,
    leaking_size_class_bytes: Option<u64>,
    leaking_allocations: Option<i64>,
    by_time: bool,
    /// The floor at each of its steps, where it rose in steps rather than steadily.
    #[serde(skip_serializing_if = "Option::is_none")]
    floor_steps_bytes: Option<Vec<u64>>,
}

/// The evidence of `APP_FRAGMENTATION` without a failure: the floor's creep.
#[derive(Serialize)]
struct Creep {
    iterations: usize,
    baseline_first_bytes: u64,
    baseline_last_bytes: u64,
    baseline_bytes_per_iteration: f64,
    peak_bytes_per_iteration: f64,
    budget_bytes: Option<u64>,
}

/// The evidence of `APP_OVER_MEMORY_LIMIT`.
#[derive(Serialize)]
struct OverLimit {
    failed_at_ms: f64,
    failure: String,
    peak_bytes: u64,
    budget_bytes: Option<u64>,
    card_used_bytes: Option<u64>,
    baseline_bytes: Option<u64>,
    free_bytes: Option<u64>,
    request_bytes: Option<u64>,
}

/// The evidence of `APP_FRAGMENTATION` at a refused allocation.
#[derive(Serialize)]
struct Refused {
    failed_at_ms: f64,
    request_bytes: Option<u64>,
    free_bytes: Option<u64>,
    result: Option<String>,
    live_allocations: Option<u64>,
    max_allocations: Option<u64>,
    budget_bytes: Option<u64>,
}

/// The evidence of `APP_FRAGMENTATION` in a framework's cache.
#[derive(Serialize)]
struct CachedInPieces {
    failed_at_ms: f64,
    framework: &'static str,
    request_bytes: u64,
    reserved_bytes: Option<u64>,
    allocated_bytes: Option<u64>,
    cached_bytes: u64,
    free_bytes: Option<u64>,
    budget_bytes: Option<u64>,
}

/// The evidence of `APP_OTHER_PROCESS`.
#[derive(Serialize)]
struct OtherProcesses<'a> {
    failed_at_ms: f64,
    failure: String,
    processes: Vec<Grown<'a>>,
    budget_bytes: Option<u64>,
}

/// Another process whose memory grew before the failure.
#[derive(Serialize)]
struct Grown<'a> {
    pid: u32,
    name: Option<&'a str>,
    before_bytes: u64,
    at_failure_bytes: u64,
}

/// The evidence of `APP_DRIVER_TIMEOUT`.
#[derive(Serialize)]
struct Lost<'a> {
    driver_resets: &'a [&'a DriverReset],
    lost_at_ms: f64,
    failure: String,
    memory_flat: bool,
    memory_bytes: u64,
    engine_stalled: bool,
    xids: Vec<LossXid>,
}

/// An Xid that goes with a lost device, and whose it was.
#[derive(Serialize)]
struct LossXid {
    xid: Option<u32>,
    pid: Option<u32>,
    /// The application's own process.
    application: bool,
    t_ms: Option<f64>,
}

/// The evidence of `APP_CARD_FAULT`: the card's findings, by code.
#[derive(Serialize)]
struct CardFindings<'a> {
    findings: Vec<&'a str>,
}

/// The evidence of `APP_MEMORY_UNSEEN`.
#[derive(Serialize)]
struct Unseen<'a> {
    ended_at_ms: Option<f64>,
    processes: &'a [u32],
}

/// The evidence of `APP_NOT_JUDGED`: what was unseen.
#[derive(Serialize)]
struct NotJudged<'a> {
    unseen: &'a [&'a super::app::Unseen],
}

/// The evidence of `RUN_INTERRUPTED` in a watch.
#[derive(Serialize)]
struct Interrupted {
    at_s: f64,
}

/// The evidence of `APP_EXIT`.
#[derive(Serialize)]
struct OwnExit<'a> {
    exit_code: Option<i32>,
    signal: Option<i32>,
    ended_at_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error_line: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_fits_a_steady_climb_and_not_noise() {
        let (slope, r2) = fit(&[10.0, 12.0, 14.0, 16.0, 18.0]);
        assert!((slope - 2.0).abs() < 1e-9 && (r2 - 1.0).abs() < 1e-9);
        let (_, r2) = fit(&[10.0, 14.0, 9.0, 15.0, 10.0, 14.0]);
        assert!(r2 < 0.3, "{r2}");
        assert_eq!(fit(&[5.0]), (0.0, 0.0));
    }

    #[test]
    fn sizes_and_times_read_as_people_say_them() {
        assert_eq!(bytes(64 << 10), "64 KiB");
        assert_eq!(bytes(8 << 20), "8 MiB");
        assert_eq!(duration(42.0), "42 s");
        assert_eq!(duration(192.0), "3.2 min");
        assert_eq!(duration(5400.0), "1.5 h");
    }
}
