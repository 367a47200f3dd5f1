//! The terminal summary: one line per device, then what it rests on.

use std::fmt::Write;

use crate::telemetry::signals;
use crate::telemetry::summary::PhaseTelemetry;
use crate::units::format_bytes;
use crate::verdict::{Report, Setup};
use crate::workload::compute::ComputeReport;
use crate::workload::vram::VramReport;

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
            if let Ok(v) = serde_json::from_value::<VramReport>(w.summary.clone()) {
                vram_lines(&mut out, &v);
            } else if let Ok(c) = serde_json::from_value::<ComputeReport>(w.summary.clone()) {
                compute_lines(&mut out, &c, &w.headline);
            } else {
                let _ = writeln!(out, "  {}: {}", w.workload, w.headline);
            }
        }
        for p in &d.telemetry {
            telemetry_line(&mut out, p);
        }
        for f in &d.findings {
            let _ = writeln!(
                out,
                "  finding {} ({:?}, {:?}, {:?} confidence): {}; {}",
                f.code, f.class, f.severity, f.confidence, f.summary, f.action
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

fn compute_lines(out: &mut String, c: &ComputeReport, headline: &str) {
    let _ = writeln!(out, "  compute: {headline}");
    for k in &c.kinds {
        let _ = writeln!(
            out,
            "  compute: {:?} {} rounds, {:.1} G ops/s, {} mismatches, {} CPU-checked ({} wrong), {} non-finite",
            k.kind, k.rounds, k.gops, k.mismatches, k.cpu_checked, k.cpu_mismatches, k.nonfinite
        );
    }
    for l in &c.levels {
        let _ = writeln!(
            out,
            "  compute: load {:.0}%: {:.1} G ops per wall second",
            l.duty * 100.0,
            l.gops_per_wall_s
        );
    }
    for m in c.records.iter().take(10) {
        let _ = writeln!(
            out,
            "  compute: {:?} item {} (invocation {} then {:?}, workgroup {:?}) expected {:08x?} got {:08x?} [{} round {}]",
            m.kind,
            m.item,
            m.first_invocation,
            m.second_invocation,
            m.second_workgroup,
            m.expected,
            m.actual,
            m.check,
            m.round
        );
    }
}

fn vram_lines(out: &mut String, v: &VramReport) {
    let s = &v.sizing;
    let c = &v.coverage;
    let t = &v.throughput;
    let _ = writeln!(
        out,
        "  vram: tested {} = {:.1}% of sized, {:.1}% of the {} heap, {:.1}% of {} free at start ({})",
        format_bytes(c.tested_bytes),
        c.of_sized * 100.0,
        c.of_heap * 100.0,
        format_bytes(s.heap_bytes),
        c.of_free * 100.0,
        format_bytes(s.free_at_start_bytes),
        s.free_source
    );
    let passes: Vec<String> = v
        .algorithms
        .iter()
        .map(|a| format!("{} x{}", a.algorithm.name(), a.passes_completed))
        .collect();
    let _ = writeln!(out, "  vram: passes {}", passes.join(", "));
    let _ = writeln!(
        out,
        "  vram: write {:.2} GiB/s, verify {:.2} GiB/s, combined {:.2} GiB/s per wall second ({})",
        t.write.gib_per_s, t.verify.gib_per_s, t.combined_gib_per_wall_s, t.timing_source
    );
    if v.errors_total > 0 {
        let _ = writeln!(
            out,
            "  vram: {} wrong words, {} recorded; flips 0->1 {}, 1->0 {}",
            v.errors_total,
            v.records.len(),
            v.histograms.zero_to_one,
            v.histograms.one_to_zero
        );
        let bits: Vec<String> = v
            .histograms
            .bit_position
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(b, n)| format!("bit{b}:{n}"))
            .collect();
        let _ = writeln!(out, "  vram: failing bits {}", bits.join(" "));
        for r in v.records.iter().take(10) {
            let _ = writeln!(
                out,
                "  vram: offset 0x{:012x} (buffer {} +0x{:x}) expected 0x{:08x} read 0x{:08x} {:?} [{} pass {} step {}]",
                r.offset_bytes,
                r.buffer,
                r.buffer_offset_bytes,
                r.expected,
                r.actual,
                r.shape,
                r.algorithm.name(),
                r.pass,
                r.step
            );
        }
        if v.records.len() > 10 {
            let _ = writeln!(
                out,
                "  vram: ... {} more records in report.json",
                v.records.len() - 10
            );
        }
        let mut classes: Vec<(String, usize)> = Vec::new();
        for r in &v.retests {
            let name = format!("{:?}", r.class);
            match classes.iter_mut().find(|(n, _)| *n == name) {
                Some((_, n)) => *n += 1,
                None => classes.push((name, 1)),
            }
        }
        if !classes.is_empty() {
            let list: Vec<String> = classes.iter().map(|(n, c)| format!("{n} {c}")).collect();
            let _ = writeln!(out, "  vram: retests {}", list.join(", "));
        }
    }
    if let Some(e) = &v.device_error {
        let _ = writeln!(out, "  vram: device error: {e}");
    }
    if let Some(s) = &v.stopped_early {
        let _ = writeln!(out, "  vram: stopped early: {s}");
    }
}
