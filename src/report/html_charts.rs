//! The report page's charts as inline SVG: every chart has axes with ticks, units and
//! labels, so that a printed page reads without hovering over anything.

use std::fmt::Write as _;

use crate::workload::show::OffsetPoint;

/// Text with HTML's special characters escaped.
pub fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Drawing area.
const W: f64 = 760.0;
const H: f64 = 200.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 34.0;

/// A step of 1, 2 or 5 times a power of ten near `span / n`.
fn nice_step(span: f64, n: f64) -> f64 {
    let raw = (span / n).max(f64::MIN_POSITIVE);
    let e = 10f64.powf(raw.log10().floor());
    let f = raw / e;
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * e
}

/// Tick values from `lo` to `hi`, about `n` of them, on round numbers.
pub fn ticks(lo: f64, hi: f64, n: f64) -> Vec<f64> {
    let step = nice_step(hi - lo, n);
    let mut v = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while v <= hi + step * 1e-9 && out.len() < 50 {
        out.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
        v += step;
    }
    out
}

/// A tick's label with as many decimals as its step needs.
fn tick_label(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    format!("{v:.decimals$}")
}

/// A plot area mapping data to the SVG.
struct Frame {
    /// Room for the y axis's labels.
    left: f64,
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    height: f64,
}

impl Frame {
    fn new(x: (f64, f64), y: (f64, f64), height: f64) -> Frame {
        let widen = |(a, b): (f64, f64)| if b > a { (a, b) } else { (a, a + 1.0) };
        let (x0, x1) = widen(x);
        let (y0, y1) = widen(y);
        Frame {
            left: LEFT,
            x0,
            x1,
            y0,
            y1,
            height,
        }
    }

    fn x(&self, v: f64) -> f64 {
        self.left + (v - self.x0) / (self.x1 - self.x0) * (W - self.left - RIGHT)
    }

    fn y(&self, v: f64) -> f64 {
        self.height - BOTTOM - (v - self.y0) / (self.y1 - self.y0) * (self.height - TOP - BOTTOM)
    }

    /// The x axis with its ticks and title.
    fn x_axis(&self, svg: &mut String, title: &str) {
        let base = self.height - BOTTOM;
        let _ = write!(
            svg,
            "<line class=\"ax\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{base:.1}\" y2=\"{base:.1}\"/>",
            self.left,
            W - RIGHT
        );
        let t = ticks(self.x0, self.x1, 8.0);
        let step = if t.len() > 1 { t[1] - t[0] } else { 1.0 };
        for v in t {
            let x = self.x(v);
            let _ = write!(
                svg,
                "<line class=\"tick\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{base:.1}\" y2=\"{:.1}\"/><text class=\"axis\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                base + 4.0,
                base + 14.0,
                tick_label(v, step)
            );
        }
        let _ = write!(
            svg,
            "<text class=\"axis-title\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            (self.left + W - RIGHT) / 2.0,
            self.height - 4.0,
            esc(title)
        );
    }

    /// The y axis with grid lines, ticks and its unit.
    fn y_axis(&self, svg: &mut String, unit: &str) {
        let t = ticks(self.y0, self.y1, 4.0);
        let step = if t.len() > 1 { t[1] - t[0] } else { 1.0 };
        for v in t {
            let y = self.y(v);
            let _ = write!(
                svg,
                "<line class=\"grid\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/><text class=\"axis\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                self.left,
                W - RIGHT,
                self.left - 4.0,
                y + 3.0,
                tick_label(v, step)
            );
        }
        let _ = write!(
            svg,
            "<text class=\"axis-title\" x=\"4\" y=\"{:.1}\">{}</text>",
            TOP - 4.0,
            esc(unit)
        );
    }
}

/// About how wide a letter of a phase's label is, in the chart's units (10px text).
const LETTER_W: f64 = 5.6;

/// The phases of the run, shaded and named, behind a time chart. A phase too narrow for
/// its name (or whose name would run into the next one's) is numbered instead, and
/// returned with its number for the legend under the chart ([`phase_legend`]): labels
/// never overlap.
fn shade_phases(svg: &mut String, f: &Frame, phases: &[(String, f64, f64)]) -> Vec<String> {
    let mut legend = Vec::new();
    // Where the last label drawn ends: the next one starts after it or is numbered.
    let mut free_from = f64::MIN;
    // Neighbouring phases in two shades, so that where one ends and the next begins shows.
    for (i, (name, start, end)) in phases.iter().enumerate() {
        let (a, b) = (f.x(start / 1e3), f.x(end / 1e3));
        let _ = write!(
            svg,
            "<rect class=\"phase p{}\" x=\"{a:.1}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{:.1}\"/>",
            i % 2,
            (b - a).max(1.0),
            f.height - TOP - BOTTOM,
        );
        let wide = name.chars().count() as f64 * LETTER_W + 4.0;
        let label = if b - a >= wide && a + 2.0 >= free_from {
            name.clone()
        } else {
            let number = (legend.len() + 1).to_string();
            legend.push(format!(
                "{number}: {name} ({:.0}–{:.0} s)",
                start / 1e3,
                end / 1e3
            ));
            number
        };
        let width = label.chars().count() as f64 * LETTER_W + 4.0;
        // A number that would run into the label before it is left to the legend's line.
        if a + 2.0 >= free_from || label != *name {
            let _ = write!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" class=\"phase-label\">{}</text>",
                a + 2.0,
                TOP + 10.0,
                esc(&label)
            );
            free_from = a + 2.0 + width;
        }
    }
    legend
}

/// The line under a chart naming the phases too narrow to be named on it.
fn phase_legend(numbered: &[String]) -> String {
    if numbered.is_empty() {
        return String::new();
    }
    format!(
        "<p class=\"legend\">Narrow phases: {}.</p>",
        esc(&numbered.join("; "))
    )
}

/// The time span of the points and phases, in seconds.
fn time_span(points: impl Iterator<Item = f64>, phases: &[(String, f64, f64)]) -> (f64, f64) {
    let all: Vec<f64> = points
        .chain(phases.iter().flat_map(|(_, a, b)| [*a, *b]))
        .collect();
    let lo = all.iter().copied().fold(f64::MAX, f64::min);
    let hi = all.iter().copied().fold(f64::MIN, f64::max);
    (lo.min(hi) / 1e3, hi / 1e3)
}

/// A figure opened with its caption: the title and a legend of the series `shown` keeps,
/// each in its series' colour.
fn captioned(
    title: &str,
    series: &[(String, Vec<(f64, f64)>)],
    shown: impl Fn(&[(f64, f64)]) -> bool,
) -> String {
    let legend: Vec<String> = series
        .iter()
        .enumerate()
        .filter(|(_, (_, p))| shown(p))
        .map(|(i, (name, _))| format!("<span class=\"k{}\">&#9632; {}</span>", i % 4, esc(name)))
        .collect();
    format!(
        "<figure><figcaption>{} {}</figcaption>",
        esc(title),
        legend.join(" ")
    )
}

/// A line chart of `series` (milliseconds since the run's start, value) with the phases
/// shaded, a time axis in seconds and a value axis in `unit`.
pub fn line_chart(
    title: &str,
    unit: &str,
    series: &[(String, Vec<(f64, f64)>)],
    phases: &[(String, f64, f64)],
    limits: &[(String, f64)],
) -> String {
    lines(title, unit, series, phases, None, limits)
}

/// A line chart of percentages (a fan's speed), its value axis from 0 to 100 whatever the
/// readings: a fan flat at 0% reads as stopped, not as a line across a chart of nothing.
pub fn percent_chart(
    title: &str,
    series: &[(String, Vec<(f64, f64)>)],
    phases: &[(String, f64, f64)],
) -> String {
    lines(title, "%", series, phases, Some(100.0), &[])
}

/// A line chart, its value axis up to `top` where given (and to the highest reading
/// above it), with each of `limits` (a slowdown temperature, a power limit) drawn as a
/// dashed line labelled with its words and value.
fn lines(
    title: &str,
    unit: &str,
    series: &[(String, Vec<(f64, f64)>)],
    phases: &[(String, f64, f64)],
    top: Option<f64>,
    limits: &[(String, f64)],
) -> String {
    let mut svg = captioned(title, series, |p| !p.is_empty());
    let points: Vec<(f64, f64)> = series.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    if points.is_empty() {
        svg.push_str("<p class=\"none\">no readings</p></figure>");
        return svg;
    }
    let (v0, v1) = points
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    // Values from zero where they are all positive: a drop reads as a drop.
    let v0 = if v0 > 0.0 { 0.0 } else { v0 };
    // The limits are on the chart whatever the readings: how near the card came shows.
    let v1 = limits.iter().map(|l| l.1).fold(v1, f64::max);
    let f = Frame::new(
        time_span(points.iter().map(|p| p.0), phases),
        (v0, top.map_or(v1 * 1.05, |top| top.max(v1))),
        H,
    );
    let _ = write!(
        svg,
        "<svg viewBox=\"0 0 {W} {H}\" role=\"img\" class=\"chart\">"
    );
    let numbered = shade_phases(&mut svg, &f, phases);
    f.y_axis(&mut svg, unit);
    f.x_axis(&mut svg, "time since the run started (s)");
    for (i, (name, pts)) in series.iter().enumerate() {
        let path: Vec<String> = pts
            .iter()
            .map(|(t, v)| format!("{:.1},{:.1}", f.x(t / 1e3), f.y(*v)))
            .collect();
        let _ = write!(
            svg,
            "<polyline class=\"s{}\" points=\"{}\"><title>{}</title></polyline>",
            i % 4,
            path.join(" "),
            esc(name)
        );
    }
    for (words, v) in limits {
        let y = f.y(*v);
        let label = format!("{words} {v:.0} {unit}");
        let _ = write!(
            svg,
            "<line class=\"ref\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke-dasharray=\"5 3\"/><text class=\"limit\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            f.left,
            W - RIGHT,
            W - RIGHT - 2.0,
            y - 3.0,
            esc(&label)
        );
    }
    svg.push_str("</svg>");
    svg.push_str(&phase_legend(&numbered));
    svg.push_str("</figure>");
    svg
}

/// Memory per process over time, stacked (the first layer at the bottom), in GiB: the
/// iterations as ticks along the top, the moments worth seeing (a failure, an alert) as
/// labelled lines, and the budget as a dashed line.
pub fn stacked_chart(
    title: &str,
    layers: &[(String, Vec<(f64, f64)>)],
    marks: &[f64],
    moments: &[(f64, String)],
    budget: Option<f64>,
) -> String {
    let mut svg = captioned(title, layers, |_| true);
    // One time grid for every layer: each holds its last reading until its next.
    let mut times: Vec<f64> = layers
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.0))
        .collect();
    times.sort_by(f64::total_cmp);
    times.dedup();
    if times.is_empty() {
        svg.push_str("<p class=\"none\">no readings</p></figure>");
        return svg;
    }
    let held = |points: &[(f64, f64)], t: f64| {
        points
            .iter()
            .take_while(|p| p.0 <= t)
            .last()
            .map_or(0.0, |p| p.1)
    };
    let mut tops: Vec<Vec<f64>> = Vec::new();
    let mut below = vec![0.0; times.len()];
    for (_, points) in layers {
        let top: Vec<f64> = times
            .iter()
            .zip(&below)
            .map(|(t, b)| b + held(points, *t) / (1u64 << 30) as f64)
            .collect();
        below.clone_from(&top);
        tops.push(top);
    }
    let gib = |b: f64| b / (1u64 << 30) as f64;
    // The chart is scaled to the application's data: the budget is drawn only where it is
    // near (within a third above the highest reading), else said under the chart, so
    // that 2 GiB of data is not a flat line at the foot of a 140 GiB chart.
    let data_top = below.iter().copied().fold(0.0, f64::max);
    let (budget, off_chart) = match budget {
        Some(b) if gib(b) <= data_top * BUDGET_NEAR => (Some(b), None),
        other => (None, other),
    };
    let highest = data_top.max(budget.map_or(0.0, gib)).max(1e-6);
    let span = time_span(
        times
            .iter()
            .copied()
            .chain(marks.iter().copied())
            .chain(moments.iter().map(|m| m.0)),
        &[],
    );
    let f = Frame::new(span, (0.0, highest * 1.08), H + 40.0);
    let _ = write!(
        svg,
        "<svg viewBox=\"0 0 {W} {}\" role=\"img\" class=\"chart\">",
        H + 40.0
    );
    f.y_axis(&mut svg, "GiB");
    let mut floor = vec![0.0; times.len()];
    for (i, top) in tops.iter().enumerate() {
        let upper: Vec<String> = times
            .iter()
            .zip(top)
            .map(|(t, v)| format!("{:.1},{:.1}", f.x(t / 1e3), f.y(*v)))
            .collect();
        let lower: Vec<String> = times
            .iter()
            .zip(&floor)
            .rev()
            .map(|(t, v)| format!("{:.1},{:.1}", f.x(t / 1e3), f.y(*v)))
            .collect();
        let _ = write!(
            svg,
            "<polygon class=\"a{}\" points=\"{} {}\"><title>{}</title></polygon>",
            i % 4,
            upper.join(" "),
            lower.join(" "),
            esc(&layers[i].0)
        );
        floor.clone_from(top);
    }
    if let Some(b) = budget {
        let y = f.y(gib(b));
        let _ = write!(
            svg,
            "<line class=\"ref\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke-dasharray=\"4 3\"/><text class=\"axis\" x=\"{:.1}\" y=\"{:.1}\">budget</text>",
            f.left,
            W - RIGHT,
            f.left + 4.0,
            y - 3.0
        );
    }
    for m in marks {
        let x = f.x(m / 1e3);
        let _ = write!(
            svg,
            "<line class=\"tick\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{TOP:.1}\" y2=\"{:.1}\"/>",
            TOP + 6.0
        );
    }
    // Each moment's label ends at its line; one that would run into the label of the
    // moment before is set a row lower, and past three rows numbered, its words under
    // the chart: labels never overlap.
    let mut rows_end: [f64; 3] = [f64::MIN; 3];
    let mut numbered: Vec<String> = Vec::new();
    for (t, said) in moments {
        let x = f.x(t / 1e3);
        let _ = write!(
            svg,
            "<line class=\"ref\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{TOP:.1}\" y2=\"{:.1}\"/>",
            f.height - BOTTOM,
        );
        let width = said.chars().count() as f64 * LETTER_W;
        let start = (x - 3.0 - width).max(f.left);
        let (label, row) = match rows_end.iter().position(|end| start > *end + 4.0) {
            Some(row) => (said.clone(), row),
            None => {
                numbered.push(format!("{}: {said} ({:.0} s)", numbered.len() + 1, t / 1e3));
                (numbered.len().to_string(), 0)
            }
        };
        let width = label.chars().count() as f64 * LETTER_W;
        // A label wider than the room left of its line starts at the axis instead.
        let (anchor, lx) = if x - 3.0 - width < f.left {
            ("start", x + 3.0)
        } else {
            ("end", x - 3.0)
        };
        rows_end[row] = if anchor == "end" {
            x - 3.0
        } else {
            x + 3.0 + width
        };
        let _ = write!(
            svg,
            "<text class=\"phase-label\" x=\"{lx:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\">{}</text>",
            TOP + 30.0 + 12.0 * row as f64,
            esc(&label)
        );
    }
    f.x_axis(
        &mut svg,
        "time since the watch started (s); ticks along the top: iterations",
    );
    svg.push_str("</svg>");
    if !numbered.is_empty() {
        let _ = write!(
            svg,
            "<p class=\"legend\">Moments: {}.</p>",
            esc(&numbered.join("; "))
        );
    }
    if let Some(b) = off_chart {
        let _ = write!(
            svg,
            "<p class=\"legend\">The budget, {}, is far above the application's memory: not drawn.</p>",
            crate::units::format_bytes(b as u64)
        );
    }
    svg.push_str("</figure>");
    svg
}

/// How far above the application's highest memory a budget is still drawn on its chart.
const BUDGET_NEAR: f64 = 1.33;

/// Named bands over time, one row per band, each drawn where it held: throttle reasons
/// as NVML names them in words, never a bit mask. `samples` are (milliseconds, the
/// bands that held from then to the next sample).
pub fn band_chart(
    title: &str,
    samples: &[(f64, Vec<String>)],
    phases: &[(String, f64, f64)],
) -> String {
    let mut svg = format!("<figure><figcaption>{}</figcaption>", esc(title));
    let mut names: Vec<&str> = Vec::new();
    for (_, held) in samples {
        for n in held {
            if !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
    }
    if samples.is_empty() {
        svg.push_str("<p class=\"none\">no readings</p></figure>");
        return svg;
    }
    if names.is_empty() {
        svg.push_str("<p class=\"none\">nothing held the clocks back in any sample</p></figure>");
        return svg;
    }
    let row = 18.0;
    // A strip above the bands for the phases' names, so that no name sits on a band.
    let names_strip = 14.0;
    let height = TOP + names_strip + BOTTOM + row * names.len() as f64;
    let mut f = Frame::new(
        time_span(samples.iter().map(|s| s.0), phases),
        (0.0, names.len() as f64),
        height,
    );
    // The names sit left of the bands: room for the longest at about 5.5 units a letter.
    let longest = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    f.left = f.left.max(longest as f64 * 5.5 + 10.0);
    let _ = write!(
        svg,
        "<svg viewBox=\"0 0 {W} {height}\" role=\"img\" class=\"chart\">"
    );
    let numbered = shade_phases(&mut svg, &f, phases);
    for (i, name) in names.iter().enumerate() {
        let y = TOP + names_strip + row * i as f64;
        let _ = write!(
            svg,
            "<text class=\"axis\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            f.left - 4.0,
            y + row * 0.7,
            esc(name)
        );
        // One band per stretch the reason held, from its first sample to the next
        // sample without it.
        let mut from: Option<f64> = None;
        for (j, (t, held)) in samples.iter().enumerate() {
            let holds = held.iter().any(|h| h == name);
            if holds && from.is_none() {
                from = Some(*t);
            }
            let last = j + 1 == samples.len();
            if let Some(start) = from.filter(|_| !holds || last) {
                let end = if holds { t + 1.0 } else { *t };
                let (a, b) = (f.x(start / 1e3), f.x(end / 1e3));
                let _ = write!(
                    svg,
                    "<rect class=\"band b{}\" x=\"{a:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\"/>",
                    i % 4,
                    y + 2.0,
                    (b - a).max(1.0),
                    row - 4.0
                );
                from = None;
            }
        }
    }
    f.x_axis(&mut svg, "time since the run started (s)");
    svg.push_str("</svg>");
    svg.push_str(&phase_legend(&numbered));
    svg.push_str("</figure>");
    svg
}

/// A bar's value: a count of things in words (`1 wrong read`, `3 wrong reads`), a rate in
/// the prefix that suits it (`620 Mop/s`).
fn value_said(value: f64, unit: &str) -> String {
    if !unit.contains('/') && value >= 0.0 && value.fract() == 0.0 {
        crate::text::count(value as u64, unit)
    } else {
        crate::units::scaled(value, unit)
    }
}

/// Horizontal bars with an optional reference mark, each labelled with its value in
/// `unit`, or in its own unit where it has one.
pub fn bars_chart(
    title: &str,
    unit: &str,
    items: &[(String, f64, Option<f64>, Option<&str>)],
) -> String {
    let mut svg = format!("<figure><figcaption>{}</figcaption>", esc(title));
    let max = items
        .iter()
        .map(|(_, v, r, _)| v.max(r.unwrap_or(0.0)))
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let h = 22.0 * items.len() as f64 + 10.0;
    // The labels' column as wide as the longest (at most half the chart): a label never
    // runs under its bar.
    let longest = items.iter().map(|i| i.0.chars().count()).max().unwrap_or(0);
    let x0 = (longest as f64 * LETTER_W + 12.0).clamp(200.0, W / 2.0);
    let _ = write!(
        svg,
        "<svg viewBox=\"0 0 {W} {h}\" role=\"img\" class=\"chart\">"
    );
    for (i, (label, value, reference, own)) in items.iter().enumerate() {
        let y = 5.0 + 22.0 * i as f64;
        let width = value / max * (W - x0 - 100.0);
        let _ = write!(
            svg,
            "<text x=\"4\" y=\"{:.1}\" class=\"axis\">{}</text><rect class=\"bar\" x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{width:.1}\" height=\"16\"/><text x=\"{:.1}\" y=\"{:.1}\" class=\"axis\">{}</text>",
            y + 12.0,
            esc(label),
            x0 + 5.0 + width,
            y + 12.0,
            esc(&value_said(*value, own.unwrap_or(unit)))
        );
        if let Some(r) = reference {
            let rx = x0 + r / max * (W - x0 - 100.0);
            let _ = write!(
                svg,
                "<line class=\"ref\" x1=\"{rx:.1}\" x2=\"{rx:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>",
                y - 2.0,
                y + 18.0
            );
        }
    }
    svg.push_str("</svg></figure>");
    svg
}

/// Points over a span of memory: the offset in GiB on the x axis, the pass and step that
/// found them on the y axis.
pub fn offset_map(
    title: &str,
    span_bytes: u64,
    rows: usize,
    points: &[OffsetPoint],
    none: &str,
) -> String {
    let mut svg = format!("<figure><figcaption>{}</figcaption>", esc(title));
    if points.is_empty() {
        let _ = write!(svg, "<p class=\"none\">{}</p></figure>", esc(none));
        return svg;
    }
    let gib = crate::units::to_gib(span_bytes.max(1));
    let f = Frame::new((0.0, gib), (0.0, rows.max(1) as f64), H);
    let _ = write!(
        svg,
        "<svg viewBox=\"0 0 {W} {H}\" role=\"img\" class=\"chart\">"
    );
    f.x_axis(&mut svg, "offset in the tested memory (GiB)");
    let _ = write!(
        svg,
        "<text class=\"axis-title\" x=\"4\" y=\"{:.1}\">pass / step</text>",
        TOP - 4.0
    );
    for p in points {
        let x = f.x(crate::units::to_gib(p.offset_bytes));
        let y = f.y(p.row as f64 + 0.5);
        let _ = write!(
            svg,
            "<circle class=\"err\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\"><title>{}</title></circle>",
            esc(&p.title)
        );
    }
    svg.push_str("</svg></figure>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_fan_reads_at_the_foot_of_a_chart_to_100() {
        let stopped = [("Fan 0".to_owned(), vec![(0.0, 0.0), (1000.0, 0.0)])];
        let svg = percent_chart("Fans", &stopped, &[]);
        assert!(svg.contains("text-anchor=\"end\">100</text>"), "{svg}");
        assert!(!svg.contains("NaN"), "{svg}");
    }

    #[test]
    fn a_narrow_phase_is_numbered_and_named_in_the_legend_and_limits_are_drawn() {
        let temps = [("GPU".to_owned(), vec![(0.0, 60.0), (100_000.0, 70.0)])];
        let phases = [
            ("vram".to_owned(), 0.0, 90_000.0),
            ("pcie".to_owned(), 90_000.0, 90_500.0),
            ("compute".to_owned(), 90_500.0, 100_000.0),
        ];
        let limits = [("slowdown".to_owned(), 87.0)];
        let svg = line_chart("Temperature", "°C", &temps, &phases, &limits);
        assert!(svg.contains(">vram</text>"), "{svg}");
        // Too narrow for their names: numbered, and named under the chart.
        assert!(
            !svg.contains(">pcie</text>") && !svg.contains(">compute</text>"),
            "{svg}"
        );
        assert!(
            svg.contains("Narrow phases: 1: pcie (90–90 s); 2: compute"),
            "{svg}"
        );
        assert!(svg.contains(">slowdown 87 °C</text>"), "{svg}");
        // The near miss: wide phases keep their names and no legend.
        let wide = line_chart("T", "°C", &temps, &phases[..1], &[]);
        assert!(wide.contains(">vram</text>") && !wide.contains("Narrow phases"));
    }

    #[test]
    fn moments_close_together_are_set_on_rows_of_their_own() {
        let gib = (1u64 << 30) as f64;
        let layers = [("app".to_owned(), vec![(0.0, gib), (100_000.0, gib)])];
        let moments = [
            (50_000.0, "first allocation refused".to_owned()),
            (50_500.0, "device lost".to_owned()),
        ];
        let svg = stacked_chart("Memory", &layers, &[], &moments, None);
        assert!(
            svg.contains("y=\"46.0\" text-anchor=\"end\">first allocation refused"),
            "{svg}"
        );
        assert!(
            svg.contains("y=\"58.0\" text-anchor=\"end\">device lost"),
            "{svg}"
        );
        // The near miss: moments far apart share the first row.
        let apart = [(10_000.0, "a".to_owned()), (90_000.0, "b".to_owned())];
        let svg = stacked_chart("Memory", &layers, &[], &apart, None);
        assert_eq!(svg.matches("y=\"46.0\"").count(), 2, "{svg}");
    }

    #[test]
    fn a_budget_far_above_the_data_is_said_not_drawn() {
        let gib = (1u64 << 30) as f64;
        let layers = [(
            "app".to_owned(),
            vec![(0.0, 2.0 * gib), (1000.0, 3.0 * gib)],
        )];
        let far = stacked_chart("Memory", &layers, &[], &[], Some(140.0 * gib));
        assert!(!far.contains(">budget</text>"), "{far}");
        assert!(far.contains("far above the application's memory"), "{far}");
        let near = stacked_chart("Memory", &layers, &[], &[], Some(3.5 * gib));
        assert!(near.contains(">budget</text>"), "{near}");
    }

    #[test]
    fn ticks_fall_on_round_numbers_across_the_span() {
        let round =
            |v: Vec<f64>| -> Vec<f64> { v.iter().map(|x| (x * 1e6).round() / 1e6).collect() };
        assert_eq!(round(ticks(0.0, 100.0, 4.0)), vec![0.0, 50.0, 100.0]);
        assert_eq!(round(ticks(0.0, 1.0, 4.0)), vec![0.0, 0.5, 1.0]);
        assert_eq!(round(ticks(12.0, 31.0, 4.0)), vec![15.0, 20.0, 25.0, 30.0]);
        assert_eq!(
            round(ticks(0.0, 1.0, 8.0)),
            vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
        );
        assert_eq!(tick_label(0.4, 0.2), "0.4");
        assert_eq!(tick_label(250.0, 50.0), "250");
    }

    #[test]
    fn a_band_is_drawn_only_where_it_held_and_named_in_words() {
        let hot = || vec!["hardware thermal slowdown".to_owned()];
        let samples = vec![
            (0.0, vec![]),
            (1000.0, hot()),
            (1200.0, hot()),
            (2000.0, vec![]),
        ];
        let svg = band_chart("Throttle reasons", &samples, &[]);
        assert!(svg.contains(">hardware thermal slowdown</text>"), "{svg}");
        // One stretch, one band, from 1 s to 2 s.
        assert_eq!(svg.matches("<rect class=\"band").count(), 1, "{svg}");
        let held_to_the_end = band_chart("T", &samples[..3], &[]);
        assert_eq!(held_to_the_end.matches("<rect class=\"band").count(), 1);
        assert!(svg.contains("time since the run started (s)"));
        let quiet = band_chart("Throttle reasons", &[(0.0, vec![])], &[]);
        assert!(quiet.contains("nothing held the clocks back"));
    }
}
