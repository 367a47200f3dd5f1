//! The baselines' line: how the application's lowest memory between iterations moves, and
//! the rules that read it: a leak (steady, or in a pooling allocator's steps) and a floor
//! that creeps under flat peaks.

use super::{bytes, duration, failure_said, held_by};
use crate::evidence::trace::ResourceKind;
use crate::finding::{
    Bytes, BytesPerIteration, BytesPerMinute, Confidence, Finding, FindingCode, Seconds, Severity,
    evidence, finding,
};
use crate::thresholds::Thresholds;
use crate::verdict::watch::view::AppView;

/// Whether the application's memory, as `v` holds it, climbs as a leak does.
pub fn leaking(v: &AppView, t: &Thresholds) -> bool {
    Trend::of(v).is_some_and(|tr| tr.leaks(t))
}

/// The baselines' line: how the lowest memory of each iteration moves, and the peaks.
#[derive(Debug, Clone)]
pub(super) struct Trend {
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
    pub(super) fn of(v: &AppView) -> Option<Trend> {
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
    pub(super) fn leaks(&self, t: &Thresholds) -> bool {
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
    pub(super) fn creeps(&self, t: &Thresholds) -> bool {
        self.steady_climb(t) && self.peak_slope < 0.25 * self.slope
    }
}

/// A leak (what PyTorch's FAQ calls accumulating history across the training loop): the
/// baseline climbs a steady amount per iteration.
pub(super) fn leak(v: &AppView, tr: &Trend, t: &Thresholds) -> Finding {
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
    // The application's own sizes first (the buffers and images it keeps), then the
    // blocks its allocator took from the driver for them, where they differ.
    let class = leaking_class(v);
    let kept = kept_growth(v);
    summary.push_str(&sizes_said(kept, class));
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
            bytes_per_iteration: BytesPerIteration(tr.slope),
            bytes_per_minute: BytesPerMinute(tr.slope * 60_000.0 / tr.iteration_ms),
            fit_r2: tr.r2,
            baseline_first_bytes: Bytes(tr.first),
            baseline_last_bytes: Bytes(tr.last),
            peak_bytes: Bytes(tr.peak),
            budget_bytes: v.budget.map(Bytes),
            seconds_until_budget: left_s.map(Seconds),
            leaking_size_class_bytes: (class
                .map(|(k, _)| crate::evidence::ring::class_limit_bytes(k)))
            .map(Bytes),
            leaking_allocations: class.map(|(_, n)| n),
            kept_resource: kept.map(|k| k.kind.plural()),
            kept_size_bytes: kept.map(|k| Bytes(k.largest)),
            kept_resources: kept.map(|k| k.more),
            by_time: v.by_time,
            floor_steps_bytes: (stepped.then(|| tr.step_floors()))
                .map(|steps| steps.into_iter().map(Bytes).collect()),
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

/// The buffers or images of one kind and size class the application kept: more live at
/// the last iteration's lowest point than at the first's.
#[derive(Debug, Clone, Copy, PartialEq)]
struct KeptGrowth {
    kind: ResourceKind,
    /// The smallest and largest of its sizes.
    smallest: u64,
    largest: u64,
    /// How many more were live.
    more: i64,
}

/// The kind and size class of buffers or images whose live count grew most (in bytes)
/// from the first iteration's lowest point to the last's.
fn kept_growth(v: &AppView) -> Option<KeptGrowth> {
    let (first, last) = (v.kept_at_windows.first()?, v.kept_at_windows.last()?);
    let ((kind, class), more) = last
        .iter()
        .map(|(key, n)| (*key, n - first.get(key).copied().unwrap_or(0)))
        .filter(|(_, more)| *more > 0)
        .max_by_key(|((_, k), more)| {
            *more as i128 * i128::from(crate::evidence::ring::class_limit_bytes(*k))
        })?;
    let (smallest, largest) = v.resource_sizes.get(&(kind, class)).copied()?;
    Some(KeptGrowth {
        kind,
        smallest,
        largest,
        more,
    })
}

/// The leak in sizes: what the application keeps, in its own sizes, leading, then the
/// blocks its allocator took from the driver for them where those are another size;
/// the blocks alone where the trace saw no buffer or image kept.
fn sizes_said(kept: Option<KeptGrowth>, blocks: Option<(usize, i64)>) -> String {
    let blocks_said = |(k, more): (usize, i64)| {
        let limit = crate::evidence::ring::class_limit_bytes(k);
        (
            format!("{} to {}", bytes(limit / 2), bytes(limit)),
            more,
            limit,
        )
    };
    match (kept, blocks.map(blocks_said)) {
        (Some(kept), blocks) => {
            let sizes = if kept.smallest == kept.largest {
                format!("{} {}", bytes(kept.largest), kept.kind.plural())
            } else {
                format!(
                    "{} of {} to {}",
                    kept.kind.plural(),
                    bytes(kept.smallest),
                    bytes(kept.largest)
                )
            };
            let mut said = format!(
                "; the application keeps {sizes} ({} more live at the last iteration than at the first)",
                kept.more
            );
            if let Some((range, more, limit)) = blocks
                && crate::evidence::ring::size_class(kept.largest)
                    != crate::evidence::ring::size_class(limit)
            {
                said.push_str(&format!(
                    ", which its allocator places in blocks of {range} taken from the driver ({more} more live)"
                ));
            }
            said
        }
        (None, Some((range, more, _))) => format!(
            "; allocations of {range} are made and not freed ({more} more live at the last iteration than at the first)"
        ),
        (None, None) => String::new(),
    }
}

/// Fragmentation without a failure: the floor creeps while the peaks stay flat.
pub(super) fn creeping_floor(v: &AppView, tr: &Trend) -> Finding {
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
            baseline_first_bytes: Bytes(tr.first),
            baseline_last_bytes: Bytes(tr.last),
            baseline_bytes_per_iteration: BytesPerIteration(tr.slope),
            peak_bytes_per_iteration: BytesPerIteration(tr.peak_slope),
            budget_bytes: v.budget.map(Bytes),
        }),
        "let the application's allocator release or reuse what it frees (empty its cache between steps, allocate in fewer, larger blocks); the card is fine",
    )
}

crate::evidence! {
    /// The evidence of `APP_MEMORY_LEAK`.
    struct Leak {
        iterations: usize => "Iterations",
        bytes_per_iteration: BytesPerIteration => "Growth",
        bytes_per_minute: BytesPerMinute => "Growth",
        fit_r2: f64 => "Fit (R²)",
        baseline_first_bytes: Bytes<u64> => "First baseline",
        baseline_last_bytes: Bytes<u64> => "Last baseline",
        peak_bytes: Bytes<u64> => "Peak",
        budget_bytes: Option<Bytes<u64>> => "Budget",
        seconds_until_budget: Option<Seconds> => "Until the budget is reached",
        leaking_size_class_bytes: Option<Bytes<u64>> => "Leaking size",
        leaking_allocations: Option<i64> => "Leaking allocations",
        /// What the application kept (`buffers`, `images`), from the trace's creations.
        #[serde(skip_serializing_if = "Option::is_none")]
        kept_resource: Option<&'static str> => "Kept",
        /// The largest size of what it kept, its own (not its allocator's blocks).
        #[serde(skip_serializing_if = "Option::is_none")]
        kept_size_bytes: Option<Bytes<u64>> => "Kept size",
        /// How many more of them were live at the last iteration than at the first.
        #[serde(skip_serializing_if = "Option::is_none")]
        kept_resources: Option<i64> => "Kept resources",
        by_time: bool => "Judged by time",
        /// The floor at each of its steps, where it rose in steps rather than steadily.
        #[serde(skip_serializing_if = "Option::is_none")]
        floor_steps_bytes: Option<Vec<Bytes<u64>>> => "Baseline steps",
    }
}

crate::evidence! {
    /// The evidence of `APP_FRAGMENTATION` without a failure: the floor's creep.
    struct Creep {
        iterations: usize => "Iterations",
        baseline_first_bytes: Bytes<u64> => "First baseline",
        baseline_last_bytes: Bytes<u64> => "Last baseline",
        baseline_bytes_per_iteration: BytesPerIteration => "Baseline growth",
        peak_bytes_per_iteration: BytesPerIteration => "Peak growth",
        budget_bytes: Option<Bytes<u64>> => "Budget",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leak_is_said_in_the_application_s_own_sizes_first_then_its_allocator_s_blocks() {
        const MIB: u64 = 1 << 20;
        let block = crate::evidence::ring::size_class(256 * MIB);
        // Its allocator's 256 MiB blocks hold the 32 MiB buffers it keeps: both said, its
        // own first.
        let kept = KeptGrowth {
            kind: ResourceKind::Buffer,
            smallest: 32 * MIB,
            largest: 32 * MIB,
            more: 23,
        };
        let both = sizes_said(Some(kept), Some((block, 3)));
        assert_eq!(
            both,
            "; the application keeps 32 MiB buffers (23 more live at the last iteration than at the first), which its allocator places in blocks of 128 MiB to 256 MiB taken from the driver (3 more live)"
        );
        // The near miss: an application that allocates each buffer on its own (its
        // blocks are its buffers) is said once; with no buffer or image seen, the blocks
        // alone.
        let own = KeptGrowth {
            largest: 256 * MIB,
            smallest: 256 * MIB,
            ..kept
        };
        assert!(!sizes_said(Some(own), Some((block, 3))).contains("allocator"));
        assert_eq!(
            sizes_said(None, Some((block, 3))),
            "; allocations of 128 MiB to 256 MiB are made and not freed (3 more live at the last iteration than at the first)"
        );
    }

    #[test]
    fn a_line_fits_a_steady_climb_and_not_noise() {
        let (slope, r2) = fit(&[10.0, 12.0, 14.0, 16.0, 18.0]);
        assert!((slope - 2.0).abs() < 1e-9 && (r2 - 1.0).abs() < 1e-9);
        let (_, r2) = fit(&[10.0, 14.0, 9.0, 15.0, 10.0, 14.0]);
        assert!(r2 < 0.3, "{r2}");
        assert_eq!(fit(&[5.0]), (0.0, 0.0));
    }
}
