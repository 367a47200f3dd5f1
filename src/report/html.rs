//! `report.html`: one self-contained page (inline CSS and SVG, no network) that a support
//! desk accepts and that prints to a PDF holding everything. Page one is the summary a
//! support engineer reads in ten seconds: each card's verdict and identity, what failed,
//! where, how often it came back, and what to do. Then, per device, the findings with
//! their evidence, every wrong word, result, element or transfer in a table, the Xids,
//! charts with axes (throttle reasons as named bands), and the workloads; then the host.

use std::fmt::Write as _;

use super::html_card;
pub use super::html_charts::esc;
use super::html_charts::{band_chart, bars_chart, line_chart, offset_map, percent_chart};
use crate::evidence::Manifest;
use crate::telemetry::record::{Reading, TelemetryData, TelemetryRecord};
use crate::telemetry::{signals, throttle};
use crate::verdict::{DeviceReport, DeviceResult, Report};
use crate::workload::show::OffsetPoint;
use crate::workload::{Section, Table};

/// Rows of one table shown at most: a card with a million wrong words still prints.
const ROWS_SHOWN: usize = 64;

/// Rows of a finding's evidence shown at most (all of it is in report.json).
const EVIDENCE_ROWS_SHOWN: usize = 12;

fn banner_class(result: DeviceResult) -> &'static str {
    match result {
        DeviceResult::Pass => "pass",
        DeviceResult::Fail => "fail",
        DeviceResult::Environment | DeviceResult::Software => "warn",
        DeviceResult::Inconclusive => "unknown",
    }
}

/// One table of the device, merged over the runs of its workload: one row per place (a
/// word, an element, a transfer), however many wrong reads it gave, with how many it gave
/// and in how many of the runs it came back.
struct Merged {
    /// The places, each with the cells of its first record.
    table: Table,
    /// Per place: its records, over every run.
    reads: Vec<u64>,
    /// Per place: the runs that found it.
    found_in: Vec<usize>,
    /// The runs of the workload.
    runs: usize,
    /// Records over every run, recorded or not.
    total: u64,
}

fn tables(d: &DeviceReport) -> Vec<Merged> {
    let mut out: Vec<(String, Merged)> = Vec::new();
    for w in &d.workloads {
        let runs = d
            .workloads
            .iter()
            .filter(|o| {
                o.reported() && o.workload == w.workload && o.together_with() == w.together_with()
            })
            .count();
        for section in w.summary.sections() {
            let Section::Table(t) = section else {
                continue;
            };
            let id = format!("{}/{}", w.workload, t.title);
            let at = match out.iter().position(|(i, _)| *i == id) {
                Some(at) => at,
                None => {
                    out.push((
                        id,
                        Merged {
                            table: Table {
                                rows: Vec::new(),
                                ..t.clone()
                            },
                            reads: Vec::new(),
                            found_in: Vec::new(),
                            runs,
                            total: 0,
                        },
                    ));
                    out.len() - 1
                }
            };
            let m = &mut out[at].1;
            m.total += t.total;
            let mut counted_here: Vec<usize> = Vec::new();
            for row in t.rows {
                let count = row.count.max(1);
                let i = match m.table.rows.iter().position(|r| r.key == row.key) {
                    Some(i) => i,
                    None => {
                        m.table.rows.push(row);
                        m.reads.push(0);
                        m.found_in.push(0);
                        m.table.rows.len() - 1
                    }
                };
                m.reads[i] += count;
                if !counted_here.contains(&i) {
                    counted_here.push(i);
                    m.found_in[i] += 1;
                }
            }
        }
    }
    out.into_iter().map(|(_, m)| m).collect()
}

/// A merged table's count for people: `89 wrong reads at 1 word, over 4 runs`.
fn places_said(m: &Merged) -> String {
    format!(
        "{} at {}{}",
        crate::text::count(m.total, m.table.noun),
        crate::text::count(m.table.rows.len() as u64, m.table.place),
        if m.runs > 1 {
            format!(", over {} runs", m.runs)
        } else {
            String::new()
        }
    )
}

fn table_html(out: &mut String, m: &Merged) {
    let t = &m.table;
    let shown = t.rows.len().min(ROWS_SHOWN);
    let _ = write!(
        out,
        "<h3>{}</h3><p class=\"count\">{}; one row per {}, with its first {}{}.</p><table class=\"rows\"><tr>",
        esc(&t.title),
        esc(&places_said(m)),
        t.place,
        t.noun,
        if t.rows.len() > shown {
            format!(
                "; {shown} of {} shown (every one is in report.json)",
                t.rows.len()
            )
        } else {
            String::new()
        }
    );
    for c in &t.columns {
        let _ = write!(out, "<th>{}</th>", esc(c));
    }
    let _ = write!(out, "<th>{}s</th>", esc(&crate::text::upper_first(t.noun)));
    if m.runs > 1 {
        out.push_str("<th>Found in runs</th>");
    }
    out.push_str("</tr>");
    for (i, row) in t.rows.iter().enumerate().take(shown) {
        out.push_str("<tr>");
        for cell in &row.cells {
            let cell = if is_record_key(cell) {
                cell.replace('_', " ")
            } else {
                cell.clone()
            };
            let _ = write!(out, "<td>{}</td>", esc(&cell));
        }
        let _ = write!(out, "<td>{}</td>", m.reads[i]);
        if m.runs > 1 {
            let _ = write!(out, "<td>{} of {}</td>", m.found_in[i], m.runs);
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
}

/// The identity fields a support desk asks for, labelled for people: the vendor's where
/// its source read them, else what Vulkan says.
fn identity_rows(d: &DeviceReport) -> Vec<(&'static str, String)> {
    let text = |key: signals::Signal| d.setup.identity_text(key).map(str::to_owned);
    let mut rows = vec![("Product", d.product().to_owned())];
    for (label, key) in [
        ("Serial number", signals::SERIAL),
        ("Board part number", signals::BOARD_PART_NUMBER),
        ("VBIOS", signals::VBIOS),
        ("InfoROM image", signals::INFOROM_IMAGE),
    ] {
        // A serial or part number is on the card's label where the driver did not give it.
        let unread = if key == signals::SERIAL || key == signals::BOARD_PART_NUMBER {
            html_card::NOT_READ_ON_THE_LABEL
        } else {
            "not read"
        };
        rows.push((label, text(key).unwrap_or_else(|| unread.into())));
    }
    rows.push(("Board maker", html_card::board_maker(d)));
    rows.push((
        "UUID",
        text(signals::UUID).unwrap_or_else(|| d.uuid.clone()),
    ));
    rows.push((
        "PCI address",
        text(signals::PCI_BUS_ID)
            .or_else(|| d.pci_address.clone())
            .unwrap_or_else(|| "unknown".into()),
    ));
    let driver = match text(signals::DRIVER_VERSION) {
        Some(v) => format!("{v} (Vulkan: {})", d.driver),
        None => d.driver.clone(),
    };
    rows.push(("Driver", driver));
    if let Some(peak) = html_card::peak_temperature(d) {
        rows.push(("Peak temperature", peak));
    }
    rows
}

/// Page one's card for a device: verdict, identity, what failed, where, how often, action.
/// `merged` is the device's [`tables`].
fn summary_card(out: &mut String, d: &DeviceReport, merged: &[Merged]) {
    let _ = write!(
        out,
        "<div class=\"card\"><div class=\"banner {}\" id=\"verdict-{}\">GPU{} {}: {}</div><table class=\"identity\">",
        banner_class(d.result),
        d.index,
        d.index,
        d.result.word(),
        esc(&d.reason)
    );
    for (label, value) in identity_rows(d) {
        let _ = write!(out, "<tr><th>{label}</th><td>{}</td></tr>", esc(&value));
    }
    // The finding the verdict leads with, in its own order.
    let first = d.leading_finding();
    let what = match first {
        // The banner above says its summary already: the code alone names it.
        Some(f) if f.summary == d.reason => format!("{} (the line above)", f.code),
        Some(f) => format!("{}: {}", f.code, f.summary),
        None if d.result == DeviceResult::Pass => "nothing: every check that ran passed".into(),
        None => d.reason.clone(),
    };
    let _ = write!(out, "<tr><th>What failed</th><td>{}</td></tr>", esc(&what));
    let not_checked = d.not_checked();
    if !not_checked.is_empty() {
        let _ = write!(
            out,
            "<tr><th>Not checked</th><td>{}</td></tr>",
            esc(&not_checked.join("; "))
        );
    }
    let places: Vec<String> = merged
        .iter()
        .filter(|m| m.table.total > 0)
        .map(|m| {
            let first_keys: Vec<&str> = m
                .table
                .rows
                .iter()
                .take(3)
                .map(|r| r.key.as_str())
                .collect();
            format!(
                "{}: {}{}",
                places_said(m),
                first_keys.join(", "),
                if m.table.rows.len() > first_keys.len() {
                    ", ..."
                } else {
                    ""
                }
            )
        })
        .collect();
    if !places.is_empty() {
        let _ = write!(
            out,
            "<tr><th>Where</th><td>{}</td></tr>",
            esc(&places.join("; "))
        );
    }
    if let Some(f) = first {
        let again = match f.facts.runs {
            Some((found, all)) => format!("found in {found} of {all} runs"),
            _ => {
                let most = merged
                    .iter()
                    .flat_map(|m| m.found_in.iter().map(move |n| (*n, m.runs)))
                    .max();
                match most {
                    Some((n, all)) if all > 1 => {
                        format!("the same place in {n} of {all} runs")
                    }
                    _ => "one run (no confirmation rerun)".into(),
                }
            }
        };
        let _ = write!(out, "<tr><th>Reproduced</th><td>{}</td></tr>", esc(&again));
    }
    // What to do: the device's next step (every result but a pass has one), else the
    // leading finding's.
    if let Some(action) = d.action.as_ref().or(first.map(|f| &f.action)) {
        let _ = write!(out, "<tr><th>Action</th><td>{}</td></tr>", esc(action));
    }
    out.push_str("</table>");
    html_card::phase_table(out, d);
    out.push_str("</div>");
}

fn series(records: &[TelemetryRecord], device: usize, key: &str) -> Vec<(f64, f64)> {
    records
        .iter()
        .filter(|r| r.device == Some(device))
        .filter_map(|r| match &r.data {
            TelemetryData::Sample { readings } => readings
                .get(key)
                .and_then(Reading::number)
                .map(|v| (r.t_ms, v)),
            _ => None,
        })
        .collect()
}

/// Every fan's speed over time, by the fan's words (`Fan 0`), for the fans that gave a
/// number.
fn fan_series(records: &[TelemetryRecord], device: usize) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut fans: std::collections::BTreeMap<&str, Vec<(f64, f64)>> = Default::default();
    for r in records.iter().filter(|r| r.device == Some(device)) {
        if let TelemetryData::Sample { readings } = &r.data {
            for (name, reading) in readings {
                if (signals::FAN_SPEED_PCT.matches)(name)
                    && let Some(v) = reading.number()
                {
                    fans.entry(name.as_str()).or_default().push((r.t_ms, v));
                }
            }
        }
    }
    fans.into_iter()
        .map(|(name, points)| {
            let words = signals::Name::parse(name).map_or_else(|| name.to_owned(), |n| n.words());
            (words, points)
        })
        .collect()
}

/// The throttle reasons each sample carries, in words.
fn throttle_samples(records: &[TelemetryRecord], device: usize) -> Vec<(f64, Vec<String>)> {
    records
        .iter()
        .filter(|r| r.device == Some(device))
        .filter_map(|r| match &r.data {
            TelemetryData::Sample { readings } => throttle::reasons_of(readings).map(|names| {
                (
                    r.t_ms,
                    names
                        .filter(|n| *n != throttle::ThrottleReason::GpuIdle.name())
                        .map(|n| throttle::label_of(n).to_owned())
                        .collect(),
                )
            }),
            _ => None,
        })
        .collect()
}

fn findings_table(out: &mut String, d: &DeviceReport) {
    if d.findings.is_empty() {
        out.push_str("<p>No findings.</p>");
        return;
    }
    out.push_str("<h3>Findings</h3><table class=\"findings\"><tr><th>Code</th><th>Class</th><th>Severity</th><th>Confidence</th><th>What</th><th>Action</th></tr>");
    for f in &d.findings {
        let rows = f.evidence.rows();
        let mut evidence = String::new();
        // A finding of a workload run several times carries its first run's evidence: its
        // counts are that run's, where the page's tables count over every run.
        if let Some((_, ran)) = f.facts.runs.filter(|(_, ran)| *ran > 1) {
            let _ = write!(
                evidence,
                "<tr><td colspan=\"2\">The first of its {ran} runs:</td></tr>"
            );
        }
        let (rows, zeros) = evidence_rows(rows);
        for (label, value) in rows.iter().take(EVIDENCE_ROWS_SHOWN) {
            let _ = write!(
                evidence,
                "<tr><th>{}</th><td>{}</td></tr>",
                esc(label),
                esc(value)
            );
        }
        if !zeros.is_empty() {
            let _ = write!(
                evidence,
                "<tr><th>At zero</th><td>{}</td></tr>",
                esc(&zeros.join("; "))
            );
        }
        if rows.len() > EVIDENCE_ROWS_SHOWN {
            let _ = write!(
                evidence,
                "<tr><td colspan=\"2\">{} more in report.json</td></tr>",
                rows.len() - EVIDENCE_ROWS_SHOWN
            );
        }
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}<table class=\"evidence\">{}</table></td><td>{}</td></tr>",
            esc(f.code.name()),
            f.class.word(),
            f.severity.word(),
            f.confidence.word(),
            esc(&f.summary),
            evidence,
            esc(&f.action)
        );
    }
    out.push_str("</table>");
}

/// A finding's evidence rows as the page shows them: a phase by its words, and the rows
/// that read zero taken out and named together (the second list), so that a table of
/// zeros reads as one line.
fn evidence_rows(rows: &[(String, String)]) -> (Vec<(String, String)>, Vec<String>) {
    let mut shown = Vec::new();
    let mut zeros = Vec::new();
    for (label, value) in rows {
        if value.trim() == "0" {
            zeros.push(label.clone());
        } else if label == "Phase" || label.ends_with(" · Phase") {
            shown.push((label.clone(), html_card::phase_words(value)));
        } else if is_record_key(value) {
            // A name of kiln's records (`power_cap`) in words.
            shown.push((label.clone(), value.replace('_', " ")));
        } else {
            shown.push((label.clone(), value.clone()));
        }
    }
    (shown, zeros)
}

/// Whether a value is one of kiln's record keys (`power_cap`, `redundant_run`): lower-case
/// words joined by underscores, which people read with spaces.
fn is_record_key(value: &str) -> bool {
    value.contains('_')
        && !value.starts_with('_')
        && !value.ends_with('_')
        && value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// One error map of a workload, with the points of every run of it.
struct ErrorMap {
    title: String,
    span_bytes: u64,
    rows: usize,
    points: Vec<OffsetPoint>,
    none: String,
}

/// A device's section; `merged` is its [`tables`].
/// A watch's application: what it was, how it ended and what was found, its memory per
/// process over time (stacked) with its iterations and failures marked, and its
/// allocations by size.
fn application_section(out: &mut String, app: &crate::verdict::watch::ApplicationReport) {
    use super::html_charts::{bars_chart, stacked_chart};
    let what = if app.command.is_empty() {
        format!("pid {}", app.pid.unwrap_or(0))
    } else {
        app.command.join(" ")
    };
    let _ = write!(
        out,
        "<section class=\"application\"><h2>Application: {}</h2><p>Diagnosis: <b>{}</b>. {}</p>",
        esc(&what),
        esc(app.diagnosis.word()),
        esc(&match (app.ended_ms, app.exit_code, app.signal) {
            (None, ..) => "It was still running when the watch stopped.".to_owned(),
            (Some(at), _, Some(sig)) =>
                format!("It was ended by signal {sig} after {:.1} s.", at / 1e3),
            (Some(at), Some(code), None) =>
                format!("It exited with {code} after {:.1} s.", at / 1e3),
            (Some(at), None, None) => format!("It ended after {:.1} s.", at / 1e3),
        })
    );
    if let Some(killed) = app.killed_words() {
        let _ = write!(out, "<p>{}.</p>", esc(&crate::text::upper_first(&killed)));
    }
    let layers: Vec<(String, Vec<(f64, f64)>)> = app
        .timeline
        .iter()
        .map(|p| {
            let name = match (p.watched, p.pid, &p.name) {
                (true, 0, _) => "the application (its allocations)".to_owned(),
                (true, pid, _) => format!("the application (pid {pid})"),
                (false, pid, Some(n)) => format!("pid {pid} {n}"),
                (false, pid, None) => format!("pid {pid}"),
            };
            (name, p.points.iter().map(|q| (q[0], q[1])).collect())
        })
        .collect();
    let moments: Vec<(f64, String)> = app
        .moments
        .iter()
        .map(|m| (m.t_ms, m.what.clone()))
        .collect();
    out.push_str(&stacked_chart(
        "GPU memory per process",
        &layers,
        &app.iterations_ms,
        &moments,
        app.budget_bytes.map(|b| b as f64),
    ));
    // The trace's counts, its frees as they came: those of the exit are said as such, so
    // that a leak's trace never reads as every allocation freed while it ran.
    if let Some(t) = &app.trace {
        let _ = write!(
            out,
            "<p>The trace saw {} and {}{}.</p>",
            crate::text::count(t.allocations, "allocation"),
            t.frees_words(),
            if t.refused > 0 {
                format!("; {} refused", t.refused)
            } else {
                String::new()
            }
        );
    }
    if !app.histogram.is_empty() {
        let bars: Vec<(String, f64, Option<f64>, Option<&str>)> = app
            .histogram
            .iter()
            .map(|c| {
                let mut notes = Vec::new();
                if c.allocations > c.frees {
                    notes.push(format!("{} not freed", c.allocations - c.frees));
                }
                if c.refused > 0 {
                    notes.push(format!("{} refused", c.refused));
                }
                let label = format!(
                    "up to {}{}",
                    crate::units::format_exact(c.up_to_bytes),
                    if notes.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", notes.join(", "))
                    }
                );
                (label, c.allocations as f64, None, None)
            })
            .collect();
        out.push_str(&bars_chart(
            "Allocations by size (the trace)",
            "allocation",
            &bars,
        ));
    }
    out.push_str("</section>");
}

fn device_section(
    out: &mut String,
    d: &DeviceReport,
    merged: &[Merged],
    telemetry: &[TelemetryRecord],
) {
    let _ = write!(
        out,
        "<section class=\"device\"><h2>GPU{} {}: {}, the evidence</h2>",
        d.index,
        esc(&d.name),
        d.result.word(),
    );
    findings_table(out, d);
    for m in merged {
        table_html(out, m);
    }
    xid_table(out, d);
    // The workloads' phases shade the charts; the spans before and between them are not
    // phases to name, and one drawn over the whole run would hide the others.
    let phases: Vec<(String, f64, f64)> = d
        .telemetry
        .iter()
        .filter(|p| {
            ![
                crate::telemetry::summary::BETWEEN_PHASES,
                crate::telemetry::summary::PREFLIGHT,
                crate::telemetry::summary::SINCE_DRIVER_LOAD,
            ]
            .contains(&p.phase.as_str())
        })
        .map(|p| (p.phase.clone(), p.start_ms, p.end_ms))
        .collect();
    // A chart is drawn for what was read; what was not is said in one line, not shown
    // as empty frames.
    let mut unread = Vec::new();
    for (title, unit, keys) in [
        (
            "Temperature",
            "°C",
            &[
                ("GPU", signals::GPU_TEMP_C.name),
                ("junction", signals::GPU_HOTSPOT_TEMP_C.name),
                ("memory", signals::HBM_TEMP_C.name),
            ][..],
        ),
        (
            "Power",
            "W",
            &[
                ("board draw", signals::POWER_W.name),
                ("limit in force", signals::POWER_LIMIT_ENFORCED_W.name),
            ][..],
        ),
        (
            "Clocks",
            "MHz",
            &[
                ("SM", signals::CLOCK_SM_MHZ.name),
                ("memory", signals::CLOCK_MEM_MHZ.name),
            ][..],
        ),
    ] {
        let s: Vec<(String, Vec<(f64, f64)>)> = keys
            .iter()
            .map(|(label, k)| ((*label).to_owned(), series(telemetry, d.index, k)))
            .filter(|(_, points)| !points.is_empty())
            .collect();
        if s.iter().all(|(_, points)| points.is_empty()) {
            unread.push(title.to_lowercase());
        } else {
            // The limits a reader asks "did it run hot?" against, drawn on their chart.
            let limits: Vec<(String, f64)> = match title {
                "Temperature" => html_card::slowdown_c(d)
                    .map(|v| ("slowdown".to_owned(), v))
                    .into_iter()
                    .collect(),
                "Power" => html_card::power_limit(d)
                    .map(|v| ("power limit".to_owned(), v))
                    .into_iter()
                    .collect(),
                _ => Vec::new(),
            };
            out.push_str(&line_chart(title, unit, &s, &phases, &limits));
        }
    }
    let throttle = throttle_samples(telemetry, d.index);
    if throttle.is_empty() {
        unread.push("throttle reasons".into());
    } else {
        out.push_str(&band_chart(
            "Throttle reasons (what held the clocks back, when)",
            &throttle,
            &phases,
        ));
    }
    // Fans beside the heat they answer: a fan flat at 0% while the temperature climbs is
    // the cooler failing. A passive card has none, which is no reading missed.
    let fans = fan_series(telemetry, d.index);
    if !fans.is_empty() {
        out.push_str(&percent_chart(
            "Fans (share of their maximum speed)",
            &fans,
            &phases,
        ));
    }
    if !unread.is_empty() {
        let _ = write!(
            out,
            "<p class=\"none\">Not read during the run, so not charted: {}.</p>",
            esc(&crate::text::list(&unread))
        );
    }
    // Each workload once, however many times it ran: its runs' headlines, the first
    // run's charts, and one error map with every run's points on it.
    for runs in d.runs_by_workload() {
        let w = runs[0];
        // A composite load's parts (heat's VRAM and compute) are named by their parent,
        // so that they never read as the workloads run alone.
        let name = match w.together_with() {
            Some(with) => format!("{with}: its {} part", w.workload),
            None => w.workload.clone(),
        };
        let _ = write!(
            out,
            "<h3>{}: {}</h3>",
            esc(&name),
            if runs.len() > 1 {
                format!("{} runs", runs.len())
            } else {
                w.status.word().to_owned()
            }
        );
        if runs.len() > 1 {
            out.push_str("<ul class=\"runs\">");
            for (i, r) in runs.iter().enumerate() {
                let _ = write!(
                    out,
                    "<li>run {} of {}, {}: {}</li>",
                    i + 1,
                    runs.len(),
                    r.status.word(),
                    esc(&r.headline)
                );
            }
            out.push_str("</ul>");
        } else {
            let _ = write!(out, "<p>{}</p>", esc(&w.headline));
        }
        let mut maps: Vec<ErrorMap> = Vec::new();
        for (i, r) in runs.iter().enumerate() {
            for section in r.summary.sections() {
                match section {
                    // Lines are the terminal's; tables are shown above, merged over runs.
                    Section::Lines(_) | Section::Table(_) => {}
                    Section::Bars { title, unit, bars } if i == 0 => {
                        // A bar at zero is a line of words, not an empty bar.
                        let (zero, items): (Vec<_>, Vec<_>) = bars
                            .into_iter()
                            .map(|b| (b.label, b.value, b.mark, b.unit))
                            .partition(|(_, v, _, _)| *v == 0.0);
                        if !items.is_empty() {
                            out.push_str(&bars_chart(&title, &unit, &items));
                        }
                        if !zero.is_empty() {
                            let names: Vec<String> = zero.into_iter().map(|z| z.0).collect();
                            let _ = write!(
                                out,
                                "<p class=\"none\">At zero (not run or not measured): {}.</p>",
                                esc(&crate::text::list(&names))
                            );
                        }
                    }
                    Section::Bars { .. } => {}
                    Section::OffsetMap {
                        title,
                        span_bytes,
                        rows,
                        points,
                        none,
                    } => {
                        let points = points.into_iter().map(|mut p| {
                            if runs.len() > 1 {
                                p.title = format!("run {}: {}", i + 1, p.title);
                            }
                            p
                        });
                        match maps.iter_mut().find(|m| m.title == title) {
                            Some(m) => {
                                m.rows = m.rows.max(rows);
                                m.points.extend(points);
                            }
                            None => maps.push(ErrorMap {
                                title,
                                span_bytes,
                                rows,
                                points: points.collect(),
                                none,
                            }),
                        }
                    }
                }
            }
        }
        for m in maps {
            let title = if runs.len() > 1 {
                format!("{} (the points of all {} runs)", m.title, runs.len())
            } else {
                m.title
            };
            out.push_str(&offset_map(
                &title,
                m.span_bytes,
                m.rows,
                &m.points,
                &m.none,
            ));
        }
    }
    out.push_str("</section>");
}

/// The device's Xids, each explained from the one catalogue (meaning, class, what to do),
/// with the phase and how many times: the kernel log's words for a support desk.
fn xid_table(out: &mut String, d: &DeviceReport) {
    let mut rows: Vec<(String, Option<u32>, String, usize)> = Vec::new();
    for p in &d.telemetry {
        for x in &p.xids {
            let code = x.code();
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
            esc(&html_card::phase_words(&phase)),
            code.map_or("?".to_owned(), |c| c.to_string()),
            esc(info.map_or("not in kiln's catalogue", |i| i.meaning)),
            info.map_or("", |i| i.class().word()),
            esc(info.map_or("", |i| i.action)),
            esc(&message.chars().take(200).collect::<String>())
        );
    }
    out.push_str("</table>");
}

/// The machine and the run: what a support desk asks before anything else.
fn host_section(out: &mut String, report: &Report, manifest: Option<&Manifest>) {
    out.push_str("<section class=\"host\"><h2>Host and run</h2><table class=\"identity\">");
    // What was not read is named in one row at the end, not a row of its own each.
    let mut unread: Vec<String> = Vec::new();
    let mut row = |label: &str, value: &str| {
        if value == "not read" {
            // Each as its own row would label it (`CPU`, `Vulkan loader`).
            unread.push(label.to_owned());
        } else {
            let _ = write!(out, "<tr><th>{label}</th><td>{}</td></tr>", esc(value));
        }
    };
    row("Host", &report.host);
    let host = manifest
        .and_then(|m| m.host_info.clone())
        .unwrap_or_default();
    let or_unknown = |v: &Option<String>| v.clone().unwrap_or_else(|| "not read".into());
    row("Operating system", &or_unknown(&host.os));
    row("Kernel", &or_unknown(&host.kernel));
    let cpu = match (&host.cpu, host.cpu_threads) {
        (Some(c), Some(n)) => format!("{c} ({n} threads)"),
        (Some(c), None) => c.clone(),
        _ => "not read".into(),
    };
    row("CPU", &cpu);
    row(
        "Memory",
        &host
            .memory_bytes
            .map_or("not read".into(), crate::units::format_bytes),
    );
    row("System", &or_unknown(&host.system));
    row("Motherboard", &or_unknown(&host.board));
    row("BIOS", &or_unknown(&host.bios));
    row("Vulkan loader", &or_unknown(&host.vulkan_loader));
    if let Some(w) = &host.display_watchdog {
        row("Display driver timeout (TDR)", &w.words());
    }
    for d in &report.devices {
        let version = &d.setup.vulkan_driver_version;
        let driver = if d.driver.contains(version.as_str()) {
            d.driver.clone()
        } else {
            format!("{} (version {version})", d.driver)
        };
        row(&format!("GPU{} Vulkan driver", d.index), &driver);
    }
    row("kiln", &report.tool_version);
    if let Some(m) = manifest {
        row("Command line", &m.command_line.join(" "));
    }
    row("Started (UTC)", &report.started_utc);
    row("Finished (UTC)", &report.finished_utc);
    row("Wall time", &format!("{:.1} s", report.wall_s));
    row("Run directory", &report.run_dir);
    if !unread.is_empty() {
        let _ = write!(
            out,
            "<tr><th>Not read</th><td>{}</td></tr>",
            esc(&crate::text::list(&unread))
        );
    }
    out.push_str("</table>");
    if !report.notes.is_empty() {
        out.push_str("<h3>Notes of the run</h3><ul class=\"notes\">");
        for n in &report.notes {
            let _ = write!(out, "<li>{}</li>", esc(n));
        }
        out.push_str("</ul>");
    }
    // The closing line sits with the host's table, never alone on a page of its own.
    out.push_str("<p>To reproduce: <code>kiln verdict RUN_DIR</code> rebuilds this page from the run directory; the manifest holds the exact command line and seeds.</p></section>");
}

const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}h1{font-size:20px;margin:0 0 6px}\
h2{font-size:17px;margin:18px 0 6px}h3{font-size:15px;margin:14px 0 4px}\
.banner{padding:8px 12px;border-radius:6px;font-weight:600;margin:6px 0}.pass{background:#d9f2dc}\
.fail{background:#f7d4d4}.warn{background:#fcebc5}.unknown{background:#e2e2e2}\
.card{margin:10px 0 16px}.count{margin:2px 0;color:#444}\
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}\
table.identity th{width:170px;background:#f4f4f4}table.rows{font:12px ui-monospace,monospace}table.rows th{font-family:system-ui,sans-serif}\
figure{margin:10px 0}figcaption{font-weight:600}.chart{width:100%;max-width:760px;background:#fafafa;border:1px solid #ddd}\
polyline{fill:none;stroke-width:1.5}polygon.a0{fill:#c0392b;opacity:.55}polygon.a1{fill:#2471a3;opacity:.55}polygon.a2{fill:#239b56;opacity:.55}polygon.a3{fill:#7d3c98;opacity:.55}.s0{stroke:#c0392b}.s1{stroke:#2471a3}.s2{stroke:#239b56}.s3{stroke:#7d3c98}\
.phase{fill:#eef3fb;stroke:#c9d6ea}.p1{fill:#f6f1e4;stroke:#e0d5b8}.phase-label,.axis{font-size:10px;fill:#555}.axis-title{font-size:10px;fill:#333;font-weight:600}\
.ax{stroke:#888}.tick{stroke:#888}.grid{stroke:#e3e3e3}.bar{fill:#5d8fc9}\
.band{opacity:.85}.b0{fill:#c0392b}.b1{fill:#e67e22}.b2{fill:#7d3c98}.b3{fill:#2471a3}\
.k0{color:#c0392b}.k1{color:#2471a3}.k2{color:#239b56}.k3{color:#7d3c98}\
.ref{stroke:#c0392b;stroke-width:2}.err{fill:#c0392b}.none{color:#777}.limit{font-size:10px;fill:#c0392b}.legend{font-size:11px;color:#555;margin:2px 0}\
table.phases{font-size:12px}table.phases td{white-space:nowrap}\
table.evidence{font-size:10px;background:#f7f7f7;margin:4px 0 0}table.evidence th{font-weight:normal;color:#555;text-align:left;padding-right:8px}\
@page{size:A4 landscape;margin:10mm}\
@media print{body{margin:0;font-size:10px}section.device{break-before:page}\
tr,figure,section.host{break-inside:avoid}table.rows{font-size:9px}table.phases{font-size:9px}\
figure{display:inline-block;width:49%;vertical-align:top;margin:4px 0}.chart{max-width:100%}\
h2{margin:8px 0 4px}h3{margin:8px 0 2px}p{margin:3px 0}\
section.application figure{display:block;width:100%}section.application+section.device{break-before:auto}}";

/// The profile a run ran and its budget, for page one: `burn-in, 2m of its 4h` where the
/// run was given less (or more) time than its profile's own, `quick, 40s` where not.
/// None for a watch, which runs no profile.
fn profile_words(settings: &crate::evidence::RunSettings) -> Option<String> {
    if settings.watch.is_some() {
        return None;
    }
    let name = settings.profile.as_deref()?;
    let said = |d: std::time::Duration| crate::units::duration_rounded_up(d);
    let seconds = |s: Option<f64>| {
        s.filter(|s| s.is_finite() && *s > 0.0)
            .map(std::time::Duration::from_secs_f64)
    };
    let (budget, own) = (
        seconds(settings.duration_s),
        seconds(settings.profile_duration_s),
    );
    Some(match (budget, own) {
        (Some(b), Some(o)) if b.as_secs_f64().round() != o.as_secs_f64().round() => {
            format!("{name}, {} of its {}", said(b), said(o))
        }
        (Some(b), _) => format!("{name}, {}", said(b)),
        (None, _) => format!("{name}, its passes with no time budget"),
    })
}

/// Renders the page; `manifest` gives the host and the command line where the run
/// directory has one.
pub fn render(
    report: &Report,
    telemetry: &[TelemetryRecord],
    manifest: Option<&Manifest>,
) -> String {
    let mut out = String::new();
    // Named for the cards it is about, as a support desk files it.
    let cards = match report.devices.as_slice() {
        [one] => format!("GPU{} {}", one.index, one.product()),
        many => format!("{} GPUs on {}", many.len(), report.host),
    };
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>kiln: {} {}</title><style>{CSS}</style></head><body>",
        esc(&cards),
        report.result.word()
    );
    let _ = write!(
        out,
        "<section id=\"summary\"><h1>GPU report: {}</h1><div class=\"banner {}\" id=\"verdict\">Result: {} (exit {}){}</div>",
        esc(&cards),
        banner_class(report.result),
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
        "<p>Host {}, started {}, finished {} (UTC), kiln {}, run {}.</p>",
        esc(&report.host),
        esc(&report.started_utc),
        esc(&report.finished_utc),
        esc(&report.tool_version),
        esc(&report.run_id)
    );
    if let Some(profile) = manifest.and_then(|m| profile_words(&m.settings)) {
        let _ = write!(out, "<p>Profile: {}.</p>", esc(&profile));
    }
    // Each device's tables, merged over its runs, serve its card and its section.
    let merged: Vec<Vec<Merged>> = report.devices.iter().map(tables).collect();
    for (d, m) in report.devices.iter().zip(&merged) {
        summary_card(&mut out, d, m);
    }
    out.push_str("</section>");
    if let Some(app) = &report.application {
        application_section(&mut out, app);
    }
    for (d, m) in report.devices.iter().zip(&merged) {
        device_section(&mut out, d, m, telemetry);
    }
    host_section(&mut out, report, manifest);
    out.push_str("</body></html>\n");
    out
}
