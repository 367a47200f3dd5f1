//! `report.html`: one self-contained page (inline CSS and SVG, no network) for people and
//! support desks: identity, the verdict banner, findings with their evidence, telemetry
//! over time with the phases shaded, the VRAM error map and bit histogram, and rates.

use std::fmt::Write as _;

use crate::telemetry::record::{TelemetryData, TelemetryRecord};
use crate::telemetry::signals;
use crate::verdict::{DeviceReport, DeviceResult, Report};
use crate::workload::Section;
use crate::workload::show::OffsetPoint;

fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const W: f64 = 720.0;
const H: f64 = 180.0;
const PAD: f64 = 40.0;

/// A line chart of `series` over time, with `phases` shaded.
fn line_chart(
    title: &str,
    unit: &str,
    series: &[(String, Vec<(f64, f64)>)],
    phases: &[(String, f64, f64)],
) -> String {
    let points: Vec<(f64, f64)> = series.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    let legend: Vec<String> = series
        .iter()
        .enumerate()
        .filter(|(_, (_, p))| !p.is_empty())
        .map(|(i, (name, _))| format!("<span class=\"k{}\">&#9632; {}</span>", i % 4, esc(name)))
        .collect();
    let mut svg = format!(
        "<figure><figcaption>{} {}</figcaption>",
        esc(title),
        legend.join(" ")
    );
    if points.is_empty() {
        svg.push_str("<p class=\"none\">no readings</p></figure>");
        return svg;
    }
    let (t0, t1) = points
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (v0, v1) = points
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let (t1, v1) = (
        if t1 > t0 { t1 } else { t0 + 1.0 },
        if v1 > v0 { v1 } else { v0 + 1.0 },
    );
    let x = |t: f64| PAD + (t - t0) / (t1 - t0) * (W - 2.0 * PAD);
    let y = |v: f64| H - PAD / 2.0 - (v - v0) / (v1 - v0) * (H - PAD);
    let _ = write!(
        svg,
        "<svg viewBox=\"0 0 {W} {H}\" role=\"img\" class=\"chart\">"
    );
    for (name, start, end) in phases {
        let _ = write!(
            svg,
            "<rect class=\"phase\" x=\"{:.1}\" y=\"0\" width=\"{:.1}\" height=\"{H}\"/><text x=\"{:.1}\" y=\"12\" class=\"phase-label\">{}</text>",
            x(*start),
            (x(*end) - x(*start)).max(1.0),
            x(*start) + 2.0,
            esc(name)
        );
    }
    let _ = write!(
        svg,
        "<text x=\"2\" y=\"{:.1}\" class=\"axis\">{v1:.0} {unit}</text><text x=\"2\" y=\"{:.1}\" class=\"axis\">{v0:.0}</text>",
        y(v1) + 4.0,
        y(v0)
    );
    for (i, (name, pts)) in series.iter().enumerate() {
        let path: Vec<String> = pts
            .iter()
            .map(|(t, v)| format!("{:.1},{:.1}", x(*t), y(*v)))
            .collect();
        let _ = write!(
            svg,
            "<polyline class=\"s{}\" points=\"{}\"><title>{}</title></polyline>",
            i % 4,
            path.join(" "),
            esc(name)
        );
    }
    let _ = write!(
        svg,
        "<text x=\"{:.1}\" y=\"{H}\" class=\"axis\">{:.0} s</text></svg>",
        W - PAD,
        t1 / 1e3
    );
    svg.push_str("</figure>");
    svg
}

/// Horizontal bars with an optional reference mark.
fn bars_chart(title: &str, unit: &str, items: &[(String, f64, Option<f64>)]) -> String {
    let mut svg = format!("<figure><figcaption>{}</figcaption>", esc(title));
    let max = items
        .iter()
        .map(|(_, v, r)| v.max(r.unwrap_or(0.0)))
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let h = 22.0 * items.len() as f64 + 10.0;
    let _ = write!(
        svg,
        "<svg viewBox=\"0 0 {W} {h}\" role=\"img\" class=\"chart\">"
    );
    for (i, (label, value, reference)) in items.iter().enumerate() {
        let y = 5.0 + 22.0 * i as f64;
        let width = value / max * (W - 260.0);
        let _ = write!(
            svg,
            "<text x=\"0\" y=\"{:.1}\" class=\"axis\">{}</text><rect class=\"bar\" x=\"200\" y=\"{y:.1}\" width=\"{width:.1}\" height=\"16\"/><text x=\"{:.1}\" y=\"{:.1}\" class=\"axis\">{value:.2} {unit}</text>",
            y + 12.0,
            esc(label),
            205.0 + width,
            y + 12.0
        );
        if let Some(r) = reference {
            let rx = 200.0 + r / max * (W - 260.0);
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

/// Points over a span of memory: offset (x) against their row (y), each with its tooltip.
fn offset_map(
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
    let total = span_bytes.max(1) as f64;
    let _ = write!(
        svg,
        "<svg viewBox=\"0 0 {W} {H}\" role=\"img\" class=\"chart\">"
    );
    for p in points {
        let x = PAD + p.offset_bytes as f64 / total * (W - 2.0 * PAD);
        let y = PAD / 2.0 + p.row as f64 / rows.max(1) as f64 * (H - PAD);
        let _ = write!(
            svg,
            "<circle class=\"err\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\"><title>{}</title></circle>",
            esc(&p.title)
        );
    }
    svg.push_str("</svg></figure>");
    svg
}

fn series(records: &[TelemetryRecord], device: usize, key: &str) -> Vec<(f64, f64)> {
    records
        .iter()
        .filter(|r| r.device == Some(device))
        .filter_map(|r| match &r.data {
            TelemetryData::Sample { readings } => readings
                .get(key)
                .and_then(|v| v.number())
                .map(|v| (r.t_ms, v)),
            _ => None,
        })
        .collect()
}

fn device_section(out: &mut String, d: &DeviceReport, telemetry: &[TelemetryRecord]) {
    let class = match d.result {
        DeviceResult::Pass => "pass",
        DeviceResult::Fail => "fail",
        DeviceResult::Environment | DeviceResult::Software => "warn",
        DeviceResult::Inconclusive => "unknown",
    };
    let _ = write!(
        out,
        "<section><h2>GPU{} {}</h2><div class=\"banner {class}\" id=\"verdict-{}\">{}: {}</div>",
        d.index,
        esc(&d.name),
        d.index,
        d.result.word(),
        esc(&d.reason)
    );
    let _ = write!(
        out,
        "<table class=\"identity\"><tr><th>UUID</th><td>{}</td></tr><tr><th>PCI address</th><td>{}</td></tr><tr><th>Driver</th><td>{}</td></tr>",
        esc(&d.uuid),
        esc(d.pci_address.as_deref().unwrap_or("unknown")),
        esc(&d.driver)
    );
    for r in telemetry.iter().filter(|r| r.device == Some(d.index)) {
        if let TelemetryData::Identity { fields } = &r.data {
            for key in [
                signals::SERIAL.name,
                signals::VBIOS.name,
                signals::BOARD_PART_NUMBER.name,
                signals::INFOROM_IMAGE.name,
                signals::DRIVER_VERSION.name,
            ] {
                if let Some(v) = fields
                    .get(key)
                    .and_then(crate::telemetry::record::Reading::text)
                {
                    let _ = write!(out, "<tr><th>{key}</th><td>{}</td></tr>", esc(v));
                }
            }
        }
    }
    out.push_str("</table>");
    if d.findings.is_empty() {
        out.push_str("<p>No findings.</p>");
    } else {
        out.push_str("<table class=\"findings\"><tr><th>Code</th><th>Class</th><th>Severity</th><th>Confidence</th><th>What</th><th>Action</th></tr>");
        for f in &d.findings {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}<details><summary>evidence</summary><pre>{}</pre></details></td><td>{}</td></tr>",
                esc(&f.code),
                f.class.word(),
                f.severity.word(),
                f.confidence.word(),
                esc(&f.summary),
                esc(&serde_json::to_string_pretty(&f.evidence).unwrap_or_default()),
                esc(&f.action)
            );
        }
        out.push_str("</table>");
    }
    xid_table(out, d);
    let phases: Vec<(String, f64, f64)> = d
        .telemetry
        .iter()
        .map(|p| (p.phase.clone(), p.start_ms, p.end_ms))
        .collect();
    for (title, unit, keys) in [
        (
            "Temperature",
            "°C",
            vec![signals::GPU_TEMP_C.name, signals::HBM_TEMP_C.name],
        ),
        (
            "Power",
            "W",
            vec![signals::POWER_W.name, signals::POWER_LIMIT_ENFORCED_W.name],
        ),
        (
            "Clocks",
            "MHz",
            vec![signals::CLOCK_SM_MHZ.name, signals::CLOCK_MEM_MHZ.name],
        ),
        (
            "Throttle reasons (bit mask)",
            "",
            vec![signals::THROTTLE_REASONS_MASK.name],
        ),
    ] {
        let s: Vec<(String, Vec<(f64, f64)>)> = keys
            .iter()
            .map(|k| ((*k).to_owned(), series(telemetry, d.index, k)))
            .collect();
        out.push_str(&line_chart(title, unit, &s, &phases));
    }
    for w in &d.workloads {
        let _ = write!(
            out,
            "<h3>{}: {}</h3><p>{}</p>",
            esc(&w.workload),
            w.status.word(),
            esc(&w.headline)
        );
        for section in w.summary.sections() {
            match section {
                Section::Lines(_) => {}
                Section::Bars { title, unit, bars } => {
                    let items: Vec<(String, f64, Option<f64>)> = bars
                        .into_iter()
                        .map(|b| (b.label, b.value, b.mark))
                        .collect();
                    out.push_str(&bars_chart(&title, &unit, &items));
                }
                Section::OffsetMap {
                    title,
                    span_bytes,
                    rows,
                    points,
                    none,
                } => out.push_str(&offset_map(&title, span_bytes, rows, &points, &none)),
            }
        }
    }
    out.push_str("</section>");
}

const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}h1{font-size:20px}\
.banner{padding:10px 14px;border-radius:6px;font-weight:600;margin:8px 0}.pass{background:#d9f2dc}\
.fail{background:#f7d4d4}.warn{background:#fcebc5}.unknown{background:#e2e2e2}\
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}\
figure{margin:10px 0}figcaption{font-weight:600}.chart{width:100%;max-width:720px;background:#fafafa;border:1px solid #ddd}\
polyline{fill:none;stroke-width:1.5}.s0{stroke:#c0392b}.s1{stroke:#2471a3}.s2{stroke:#239b56}.s3{stroke:#7d3c98}\
.phase{fill:#eef3fb;stroke:#c9d6ea}.phase-label,.axis{font-size:10px;fill:#555}.bar{fill:#5d8fc9}\
.k0{color:#c0392b}.k1{color:#2471a3}.k2{color:#239b56}.k3{color:#7d3c98}\
.ref{stroke:#c0392b;stroke-width:2}.err{fill:#c0392b}.none{color:#777}pre{white-space:pre-wrap;font-size:11px}\
@media print{section{page-break-inside:avoid}}";

/// The device's Xids, each explained from the one catalogue (meaning, class, what to do),
/// with the phase and how many times: the kernel log's words for a support desk.
fn xid_table(out: &mut String, d: &DeviceReport) {
    let mut rows: Vec<(String, Option<u32>, String, usize)> = Vec::new();
    for p in &d.telemetry {
        for x in &p.xids {
            let code = crate::verdict::xid::code_of(x.code, &x.message);
            match rows
                .iter_mut()
                .find(|(phase, c, _, _)| *phase == p.phase && *c == code)
            {
                Some(row) => row.3 += 1,
                None => rows.push((p.phase.clone(), code, x.message.clone(), 1)),
            }
        }
    }
    if rows.is_empty() {
        return;
    }
    out.push_str("<h3>Xids</h3><table class=\"xids\"><tr><th>Phase</th><th>Xid</th><th>Count</th><th>Meaning</th><th>Class</th><th>Action</th><th>First line</th></tr>");
    for (phase, code, message, count) in rows {
        let info = code.and_then(crate::verdict::xid::lookup);
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{count}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&phase),
            code.map_or("?".to_owned(), |c| c.to_string()),
            esc(info.map_or("not in kiln's catalogue", |i| i.meaning)),
            info.map_or("", |i| i.class.name()),
            esc(info.map_or("", |i| i.action)),
            esc(&message.chars().take(200).collect::<String>())
        );
    }
    out.push_str("</table>");
}

/// Renders the page.
pub fn render(report: &Report, telemetry: &[TelemetryRecord]) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>kiln report {}</title><style>{CSS}</style></head><body>",
        esc(&report.run_id)
    );
    let _ = write!(
        out,
        "<h1>kiln report {}</h1><div class=\"banner {}\" id=\"verdict\">Result: {} (exit {}){}</div>",
        esc(&report.run_id),
        match report.result {
            DeviceResult::Pass => "pass",
            DeviceResult::Fail => "fail",
            DeviceResult::Inconclusive => "unknown",
            _ => "warn",
        },
        report.result.word(),
        report.exit_code,
        match (report.interrupted, report.incomplete) {
            (true, _) => " — interrupted: covers what ran before the signal",
            (false, true) => " — incomplete evidence",
            _ => "",
        }
    );
    let _ = write!(
        out,
        "<p>Host {}, started {}, finished {}, kiln {}.</p>",
        esc(&report.host),
        esc(&report.started_utc),
        esc(&report.finished_utc),
        esc(&report.tool_version)
    );
    if !report.notes.is_empty() {
        out.push_str("<ul class=\"notes\">");
        for n in &report.notes {
            let _ = write!(out, "<li>{}</li>", esc(n));
        }
        out.push_str("</ul>");
    }
    for d in &report.devices {
        device_section(&mut out, d, telemetry);
    }
    out.push_str("<p>To reproduce: <code>kiln verdict RUN_DIR</code> rebuilds this page from the run directory; the manifest holds the exact command line and seeds.</p></body></html>\n");
    out
}
