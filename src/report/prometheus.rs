//! The Prometheus textfile for node_exporter's textfile collector: per device and check,
//! with the identity labels dcgm-exporter uses, base units in names, HELP and TYPE, no
//! timestamps, written atomically.

use std::fmt::Write as _;

use crate::verdict::{DeviceReport, DeviceResult, Report};
use crate::workload::WorkloadStatus;

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn labels(d: &DeviceReport) -> String {
    format!(
        "gpu=\"{}\",UUID=\"{}\",pci_bus_id=\"{}\",modelName=\"{}\"",
        d.index,
        escape(&d.uuid),
        escape(d.pci_address.as_deref().unwrap_or("")),
        escape(&d.name)
    )
}

/// Renders the metrics of a report.
pub fn render(report: &Report, run_unix_seconds: u64) -> String {
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, samples: Vec<(String, f64)>| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{{{labels}}} {value}");
        }
    };
    let devices = &report.devices;
    family(
        "kiln_device_healthy",
        "gauge",
        "1 when the device passed every check of the last kiln run, else 0.",
        devices
            .iter()
            .map(|d| {
                (
                    labels(d),
                    f64::from(u8::from(d.result == DeviceResult::Pass)),
                )
            })
            .collect(),
    );
    family(
        "kiln_device_result_code",
        "gauge",
        "The device's result as kiln's exit code: 0 healthy, 1 hardware, 2 environment, 3 software, 4 could not judge.",
        devices
            .iter()
            .map(|d| (labels(d), f64::from(d.result.exit_code())))
            .collect(),
    );
    let mut checks = Vec::new();
    for d in devices {
        for w in &d.workloads {
            let value = match w.status {
                WorkloadStatus::Passed => 1.0,
                WorkloadStatus::Failed | WorkloadStatus::SoftwareFault => 0.0,
                WorkloadStatus::Incomplete | WorkloadStatus::NotRun => -1.0,
            };
            checks.push((
                format!("{},check=\"{}\"", labels(d), escape(&w.workload)),
                value,
            ));
        }
    }
    family(
        "kiln_check_passed",
        "gauge",
        "1 when the check passed, 0 when it found a fault, -1 when it could not run to the end.",
        checks,
    );
    let findings = devices
        .iter()
        .flat_map(|d| {
            d.findings.iter().map(move |f| {
                (
                    // Only the class and severity words are lowercased: the identity
                    // labels must match the other families' for joins.
                    format!(
                        "{},code=\"{}\",class=\"{}\",severity=\"{}\"",
                        labels(d),
                        escape(&f.code),
                        f.class.name(),
                        format!("{:?}", f.severity).to_lowercase()
                    ),
                    1.0,
                )
            })
        })
        .collect();
    family(
        "kiln_finding",
        "gauge",
        "A finding of the last kiln run (1 per finding).",
        findings,
    );
    let summary_number = |d: &DeviceReport, workload: &str, path: &[&str]| {
        let w = d.workloads.iter().find(|w| w.workload == workload)?;
        let mut v = &w.summary;
        for key in path {
            v = v.get(key)?;
        }
        v.as_f64()
    };
    let per_device = |workload: &str, path: &[&str]| -> Vec<(String, f64)> {
        devices
            .iter()
            .filter_map(|d| summary_number(d, workload, path).map(|v| (labels(d), v)))
            .collect()
    };
    family(
        "kiln_vram_tested_bytes",
        "gauge",
        "Bytes of VRAM the last run tested.",
        per_device("vram", &["coverage", "tested_bytes"]),
    );
    family(
        "kiln_vram_errors",
        "gauge",
        "Wrong words the last run's VRAM test found.",
        per_device("vram", &["errors_total"]),
    );
    family(
        "kiln_pcie_h2d_bytes_per_second",
        "gauge",
        "Best host-to-device rate of the last run.",
        per_device("pcie", &["peak_h2d_gbps"])
            .into_iter()
            .map(|(l, v)| (l, v * 1e9))
            .collect(),
    );
    family(
        "kiln_pcie_d2h_bytes_per_second",
        "gauge",
        "Best device-to-host rate of the last run.",
        per_device("pcie", &["peak_d2h_gbps"])
            .into_iter()
            .map(|(l, v)| (l, v * 1e9))
            .collect(),
    );
    family(
        "kiln_last_run_timestamp_seconds",
        "gauge",
        "When the last kiln run ended, in Unix seconds.",
        vec![(String::new(), run_unix_seconds as f64)],
    );
    family(
        "kiln_last_run_duration_seconds",
        "gauge",
        "How long the last kiln run took.",
        vec![(String::new(), report.wall_s)],
    );
    family(
        "kiln_last_run_exit_code",
        "gauge",
        "The exit code of the last kiln run.",
        vec![(String::new(), f64::from(report.exit_code))],
    );
    out.replace("{}", "")
}
