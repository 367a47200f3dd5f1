//! The terminal summary: one line per device, then what it rests on.

use std::fmt::Write;

use crate::telemetry::signals;
use crate::telemetry::summary::PhaseTelemetry;
use crate::verdict::{Report, Setup};
use crate::workload::Section;

/// Renders the human summary of a run.
pub fn summary(report: &Report) -> String {
    let mut out = String::new();
    for note in &report.notes {
        let _ = writeln!(out, "note: {note}");
    }
    for d in &report.devices {
        let _ = writeln!(
            out,
            "GPU{} {} [{}] {}: {}",
            d.index,
            d.name,
            d.pci_address.as_deref().unwrap_or(&d.uuid),
            d.result.word(),
            d.reason
        );
        setup_line(&mut out, &d.setup);
        for w in &d.workloads {
            if let Some(with) = w.together_with() {
                let _ = writeln!(
                    out,
                    "  {} ran inside {with}, beside another load: its rates are not the device's alone",
                    w.workload
                );
            }
            let lines: Vec<String> = w
                .summary
                .sections()
                .into_iter()
                .flat_map(|s| match s {
                    Section::Lines(lines) => lines,
                    _ => Vec::new(),
                })
                .collect();
            if lines.is_empty() {
                let _ = writeln!(out, "  {}: {}", w.workload, w.headline);
            }
            for line in lines {
                let _ = writeln!(out, "  {}: {line}", w.workload);
            }
        }
        for p in &d.telemetry {
            telemetry_line(&mut out, p);
        }
        for f in &d.findings {
            let _ = writeln!(
                out,
                "  finding {} ({}): {}; {}",
                f.code,
                f.rating(),
                f.summary,
                f.action
            );
        }
    }
    let _ = writeln!(
        out,
        "result: {}{}{} (exit {}), evidence in {}",
        report.result.word(),
        if report.no_gpu_tested {
            ", no GPU was tested"
        } else {
            ""
        },
        match (report.interrupted, report.incomplete) {
            (true, _) => ", interrupted: covers what ran before the signal",
            (false, true) => ", incomplete evidence",
            _ => "",
        },
        report.exit_code,
        report.run_dir
    );
    out
}

/// What preflight read of the installation: driver versions, the board, other tenants.
fn setup_line(out: &mut String, setup: &Setup) {
    use crate::telemetry::record::Reading;
    if setup.identity.is_empty() {
        return;
    }
    let text = |key: &str| {
        setup
            .identity
            .get(key)
            .and_then(Reading::text)
            .filter(|t| !t.is_empty())
    };
    let mut parts = vec![format!(
        "driver {} (Vulkan {})",
        text(signals::DRIVER_VERSION.name).unwrap_or("unknown"),
        setup.vulkan_driver_version
    )];
    for (key, label) in [
        (signals::SERIAL.name, "serial"),
        (signals::VBIOS.name, "VBIOS"),
    ] {
        if let Some(v) = text(key) {
            parts.push(format!("{label} {v}"));
        }
    }
    parts.push(format!(
        "other processes: {}",
        text(signals::OTHER_PROCESSES.name).unwrap_or("none")
    ));
    let _ = writeln!(out, "  setup: {}", parts.join(", "));
}

fn telemetry_line(out: &mut String, p: &PhaseTelemetry) {
    let mut parts = vec![format!("{} samples", p.samples)];
    for (key, label) in [
        (signals::GPU_TEMP_C.name, "temp C"),
        (signals::POWER_W.name, "power W"),
        (signals::CLOCK_SM_MHZ.name, "SM MHz"),
    ] {
        if let Some(s) = p.gauges.get(key) {
            parts.push(format!("{label} {:.0}/{:.0}/{:.0}", s.min, s.median, s.max));
        }
    }
    for (reason, share) in &p.throttle_share {
        parts.push(format!("{reason} {:.0}% of the time", share * 100.0));
    }
    for (counter, delta) in p.counter_deltas.iter().filter(|(_, d)| **d != 0.0) {
        parts.push(format!("{counter} +{delta}"));
    }
    if !p.xids.is_empty() {
        let codes: Vec<String> = p
            .xids
            .iter()
            .map(|x| x.code.map_or("?".into(), |c| c.to_string()))
            .collect();
        parts.push(format!("Xid {}", codes.join(",")));
    }
    let _ = writeln!(out, "  telemetry {}: {}", p.phase, parts.join(", "));
}
