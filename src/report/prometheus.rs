//! The Prometheus textfile for node_exporter's textfile collector: per device and check,
//! with the identity labels dcgm-exporter uses, base units in names, HELP and TYPE, no
//! timestamps, written atomically.

use std::fmt::Write as _;

use crate::verdict::{DeviceReport, DeviceResult, Report};
use crate::workload::{WorkloadStatus, registry};

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
    // Each workload's numbers, per device from its first outcome that gives them (a rerun
    // to confirm repeats the first run's).
    for fam in registry::metric_families() {
        let samples = devices
            .iter()
            .filter_map(|d| {
                d.workloads.iter().find_map(|w| {
                    w.summary
                        .metrics()
                        .into_iter()
                        .find(|m| m.family == fam.name)
                        .map(|m| (labels(d), m.value))
                })
            })
            .collect();
        family(fam.name, "gauge", fam.help, samples);
    }
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
