//! A memory series and its iterations: each iteration's lowest and highest memory, the
//! application's teardown left out, iterations found from the memory's own period or cut
//! as even stretches of time, and a series thinned for a chart.

use super::report::TIMELINE_POINTS;

/// A memory series: (ms, bytes), in time order.
pub type Series = Vec<(f64, u64)>;

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

/// A series' iterations (its lowest and highest in each) at `marks`, up to the
/// application's teardown where it `ended`: the frees of its exit are no iteration's
/// baseline, whether the marks are its own (its last step can end a moment before its
/// exit, the frees then inside the last stretch) or were found by time.
pub fn judged_windows(
    series: &[(f64, u64)],
    stepwise: bool,
    marks: &[f64],
    end: Option<(f64, Option<i32>, Option<i32>)>,
) -> Vec<Window> {
    windows(
        without_teardown(series, end.is_some()),
        stepwise,
        marks,
        end.map(|e| e.0),
    )
}

/// At most [`TIMELINE_POINTS`] of a series, keeping each stretch's lowest and highest so
/// that neither a peak nor a baseline is thinned away.
pub fn thin(series: &Series) -> Vec<[f64; 2]> {
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

/// The series up to the application's teardown, where it ended: the falling run at its
/// end (the frees of its exit, and the readings after them that repeat the last) left
/// out. A series that does not fall at its end is whole.
pub fn without_teardown(series: &[(f64, u64)], ended: bool) -> &[(f64, u64)] {
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

/// With no iterations to go by, even stretches of the watch (four to eight, two readings
/// each at least), so that a climb is still judged, per minute.
pub fn time_marks(series: &[(f64, u64)]) -> Vec<f64> {
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

    #[test]
    fn the_frees_of_its_exit_are_no_iteration_s_baseline_when_it_marks_its_own_steps() {
        // A pooled leak marked by its own output: a block taken each step, the last step
        // printed 50 ms before its exit, whose frees fall inside the last stretch.
        let mut s: Series = (0..6)
            .map(|k| (k as f64 * 200.0 + 10.0, (k + 1) as u64 * 256 * MIB))
            .collect();
        s.push((1_070.0, 512 * MIB));
        s.push((1_075.0, 0));
        let marks: Vec<f64> = (0..6).map(|k| k as f64 * 200.0).collect();
        let end = Some((1_110.0, Some(0), None));
        let lows: Vec<u64> = judged_windows(&s, true, &marks, end)
            .iter()
            .map(|w| w.low / MIB)
            .collect();
        assert_eq!(lows, [0, 256, 512, 768, 1024, 1280]);
        // The near miss: an application still running when the watch ended (read on
        // after the fall): a fall at the end of its series is its own, kept.
        s.push((1_200.0, 0));
        let lows: Vec<u64> = judged_windows(&s, true, &marks, None)
            .iter()
            .map(|w| w.low / MIB)
            .collect();
        assert_eq!(lows.last(), Some(&0));
    }
}
