//! What the card did, for page one: its identity as a support desk files it (the board
//! maker, the peak temperature of the run, a field not read said with where to find it)
//! and, per phase, the lowest, typical and highest of its temperatures, power, clocks and
//! fans, with the limits it is held to. Every figure is a phase's own statistics
//! ([`crate::telemetry::summary::Stat`]), the numbers the findings were judged on.

use std::fmt::Write as _;

use super::html_charts::esc;
use crate::telemetry::signals::{self, Signal};
use crate::telemetry::summary::{self, PhaseTelemetry, Stat};
use crate::verdict::DeviceReport;

/// What a serial number or part number kiln could not read says: where a support desk's
/// form gets it instead.
pub const NOT_READ_ON_THE_LABEL: &str = "not read: copy it from the card's label";

/// The phases a reader knows: the workloads' (and a watch's), not the spans before,
/// between or since the driver loaded.
pub fn named_phases(d: &DeviceReport) -> impl Iterator<Item = &PhaseTelemetry> {
    d.telemetry.iter().filter(|p| {
        ![
            summary::BETWEEN_PHASES,
            summary::PREFLIGHT,
            summary::SINCE_DRIVER_LOAD,
        ]
        .contains(&p.phase.as_str())
    })
}

/// A phase's name as people read it (`between the phases`, not `between_phases`).
pub fn phase_words(phase: &str) -> String {
    match phase {
        summary::BETWEEN_PHASES => "between the phases".into(),
        summary::PREFLIGHT => "before the run".into(),
        summary::SINCE_DRIVER_LOAD => "since the driver loaded".into(),
        other => other.replace('_', " "),
    }
}

/// The gauges the table shows, with their column's words and unit.
const COLUMNS: [(&str, Signal, &str); 6] = [
    ("GPU temperature", signals::GPU_TEMP_C, "°C"),
    ("Junction temperature", signals::GPU_HOTSPOT_TEMP_C, "°C"),
    ("Memory temperature", signals::HBM_TEMP_C, "°C"),
    ("Power", signals::POWER_W, "W"),
    ("SM clock", signals::CLOCK_SM_MHZ, "MHz"),
    ("Memory clock", signals::CLOCK_MEM_MHZ, "MHz"),
];

/// A stat as `62 · 66 · 68 °C` (lowest · typical · highest).
fn stat_said(s: &Stat, unit: &str) -> String {
    format!("{:.0} · {:.0} · {:.0} {unit}", s.min, s.median, s.max)
}

/// The first fan's gauge of a phase, by its key: fans are charted each, tabled as one.
fn fan_of(p: &PhaseTelemetry) -> Option<&Stat> {
    p.gauges
        .iter()
        .find(|(k, _)| (signals::FAN_SPEED_PCT.matches)(k))
        .map(|(_, s)| s)
}

/// The highest reading of a gauge over every phase of the run, with the phase it came in.
fn peak(d: &DeviceReport, signal: Signal) -> Option<(f64, &str)> {
    d.telemetry
        .iter()
        .filter_map(|p| p.gauge(signal).map(|s| (s.max, p.phase.as_str())))
        .filter(|(v, _)| v.is_finite())
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

/// The run's peak temperatures in words (`92 °C (GPU, in the vram phase); memory 100 °C`),
/// None where no temperature was read.
pub fn peak_temperature(d: &DeviceReport) -> Option<String> {
    // A run of one phase needs no phase named.
    let one_phase = named_phases(d).count() <= 1;
    let parts: Vec<String> = [
        ("GPU", signals::GPU_TEMP_C),
        ("junction", signals::GPU_HOTSPOT_TEMP_C),
        ("memory", signals::HBM_TEMP_C),
    ]
    .iter()
    .filter_map(|(word, s)| {
        peak(d, *s).map(|(v, phase)| match one_phase {
            true => format!("{word} {v:.0} °C"),
            false => format!("{word} {v:.0} °C (in the {} phase)", phase_words(phase)),
        })
    })
    .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// The limits the card is held to, in words (`slows down at 87 °C, shuts down at 92 °C;
/// power limit 700 W`), as its driver reported them.
pub fn limits(d: &DeviceReport) -> Vec<String> {
    let number = |s: Signal| d.setup.identity_of(s).and_then(|r| r.number());
    let mut out = Vec::new();
    if let Some(v) = number(signals::TEMP_SLOWDOWN_C) {
        out.push(format!("slows down at {v:.0} °C"));
    }
    if let Some(v) = number(signals::TEMP_SHUTDOWN_C) {
        out.push(format!("shuts down at {v:.0} °C"));
    }
    if let Some(v) = number(signals::TEMP_MEM_MAX_C) {
        out.push(format!("memory rated to {v:.0} °C"));
    }
    if let Some(v) = power_limit(d) {
        out.push(format!("power limit {v:.0} W"));
    }
    out
}

/// The power limit in force: the highest the phases read (an administrator's cap is
/// the limit in force too).
pub fn power_limit(d: &DeviceReport) -> Option<f64> {
    peak(d, signals::POWER_LIMIT_ENFORCED_W).map(|(v, _)| v)
}

/// The temperature the card slows down at, where its driver said it.
pub fn slowdown_c(d: &DeviceReport) -> Option<f64> {
    d.setup
        .identity_of(signals::TEMP_SLOWDOWN_C)
        .and_then(|r| r.number())
}

/// The board's maker from the PCI subsystem vendor (the company that built the board, not
/// the chip's), by the PCI-SIG vendor ids of the PCI ID Repository
/// (<https://pci-ids.ucw.cz/read/PC/>); an id not listed here is shown as its number.
pub fn board_maker(d: &DeviceReport) -> String {
    let id = d
        .setup
        .identity_of(signals::PCI_SUBSYSTEM_VENDOR_ID)
        .and_then(|r| r.number());
    match id {
        Some(id) => {
            let id = id as u32;
            match subsystem_vendor_name(id) {
                Some(name) => format!("{name} (PCI subsystem vendor 0x{id:04x})"),
                None => format!("PCI subsystem vendor 0x{id:04x}"),
            }
        }
        None => "not read (the driver gave no PCI subsystem vendor): see the card's label".into(),
    }
}

/// The board makers' PCI vendor ids (PCI ID Repository, pci-ids.ucw.cz).
fn subsystem_vendor_name(id: u32) -> Option<&'static str> {
    Some(match id {
        0x10de => "NVIDIA",
        0x1002 => "AMD",
        0x8086 => "Intel",
        0x1043 => "ASUS",
        0x1458 => "Gigabyte",
        0x1462 => "MSI",
        0x3842 => "EVGA",
        0x19da => "ZOTAC",
        0x196e => "PNY",
        0x1569 => "Palit",
        0x10b0 => "Gainward",
        0x1da2 => "Sapphire",
        0x148c => "PowerColor",
        0x1682 => "XFX",
        0x1849 => "ASRock",
        0x1028 => "Dell",
        0x103c => "HP",
        0x17aa => "Lenovo",
        0x15d9 => "Supermicro",
        0x1590 => "HPE",
        _ => return None,
    })
}

/// The table of what the card did in each phase: lowest · typical · highest of each gauge
/// read, a column only where some phase read it, the card's limits under it. Nothing where
/// no phase read a gauge.
pub fn phase_table(out: &mut String, d: &DeviceReport) {
    let phases: Vec<&PhaseTelemetry> = named_phases(d).collect();
    let columns: Vec<(&str, Signal, &str)> = COLUMNS
        .iter()
        .copied()
        .filter(|(_, s, _)| phases.iter().any(|p| p.gauge(*s).is_some()))
        .collect();
    let fans = phases.iter().any(|p| fan_of(p).is_some());
    if columns.is_empty() && !fans {
        return;
    }
    out.push_str(
        "<h3>What the card did, per phase</h3><p class=\"count\">Each cell: lowest · typical (median) · highest reading of the phase.</p><table class=\"phases\"><tr><th>Phase</th><th>Time</th>",
    );
    for (words, ..) in &columns {
        let _ = write!(out, "<th>{words}</th>");
    }
    if fans {
        out.push_str("<th>Fan</th>");
    }
    out.push_str("</tr>");
    for p in &phases {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{:.0} s</td>",
            esc(&phase_words(&p.phase)),
            ((p.end_ms - p.start_ms) / 1e3).max(0.0)
        );
        for (_, s, unit) in &columns {
            let cell = p
                .gauge(*s)
                .map_or_else(|| "not read".to_owned(), |st| stat_said(st, unit));
            let _ = write!(out, "<td>{}</td>", esc(&cell));
        }
        if fans {
            let cell = fan_of(p).map_or_else(|| "not read".to_owned(), |st| stat_said(st, "%"));
            let _ = write!(out, "<td>{}</td>", esc(&cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    let limits = limits(d);
    if !limits.is_empty() {
        let _ = write!(
            out,
            "<p class=\"count\">The card's limits, as its driver reports them: {}.</p>",
            esc(&crate::text::list(&limits))
        );
    }
}
