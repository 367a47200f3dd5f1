//! The Prometheus textfile for node_exporter's textfile collector: per device and check,
//! with the identity labels dcgm-exporter uses, base units in names, HELP and TYPE, no
//! timestamps, written atomically.

use std::fmt::Write as _;

use crate::telemetry::record::Reading;
use crate::telemetry::{nvml, signals};
use crate::verdict::{DeviceReport, DeviceResult, Report};
use crate::workload::{WorkloadStatus, registry};

/// A label value with Prometheus's escapes.
pub fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Writes a gauge family: HELP, TYPE and each sample (labels already rendered, possibly
/// empty).
pub fn gauge(out: &mut String, name: &str, help: &str, samples: &[(String, f64)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
    for (labels, value) in samples {
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {value}");
        } else {
            let _ = writeln!(out, "{name}{{{labels}}} {value}");
        }
    }
}

/// One sample per distinct label set, valued by how many times it came, in first-seen
/// order: a textfile must never repeat a label set (node_exporter rejects it whole).
pub fn counted(label_sets: impl IntoIterator<Item = String>) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for labels in label_sets {
        match out.iter_mut().find(|(l, _)| *l == labels) {
            Some((_, n)) => *n += 1.0,
            None => out.push((labels, 1.0)),
        }
    }
    out
}

/// What the metrics say beside the report: when the run ended, under which profile, on
/// which node.
#[derive(Debug, Clone)]
pub struct Context {
    /// When the run ended, in Unix seconds.
    pub run_unix_seconds: u64,
    /// The profile the run used (`fleet`), empty when not known.
    pub profile: String,
}

/// A device's identity in dcgm-exporter's label formats, so that PromQL joins
/// (`kiln_device_healthy * on (UUID) group_right DCGM_FI_DEV_GPU_TEMP`) match: NVML's
/// own values where the NVML source read them, else Vulkan's written the same way.
#[derive(Debug, Clone, PartialEq)]
pub struct DcgmIdentity {
    /// `gpu`: NVML's index (Vulkan's where NVML is not there).
    pub gpu: String,
    /// `UUID`: `GPU-xxxxxxxx-xxxx-...` on NVIDIA.
    pub uuid: String,
    /// `pci_bus_id`: `00000000:3B:00.0`.
    pub pci_bus_id: String,
    /// `device`: the device node (`nvidia3`), when NVML gave its minor number.
    pub device: Option<String>,
    /// `modelName`: NVML's name (`NVIDIA H200`), else Vulkan's.
    pub model_name: String,
}

/// The PCI vendor id of NVIDIA, whose Vulkan device UUID is NVML's UUID.
const NVIDIA: u32 = 0x10de;

impl DcgmIdentity {
    /// The identity of a device as its report has it.
    pub fn of(d: &DeviceReport) -> DcgmIdentity {
        let text = |key: signals::Signal| d.setup.identity_text(key).map(str::to_owned);
        let number = |key: signals::Signal| d.setup.identity_of(key).and_then(Reading::number);
        let uuid = text(signals::UUID).unwrap_or_else(|| {
            if d.setup.vendor_id == NVIDIA && !d.uuid.starts_with("GPU-") {
                format!("GPU-{}", d.uuid)
            } else {
                d.uuid.clone()
            }
        });
        DcgmIdentity {
            gpu: number(signals::NVML_INDEX)
                .map(|n| format!("{n}"))
                .unwrap_or_else(|| d.index.to_string()),
            uuid,
            pci_bus_id: text(signals::PCI_BUS_ID)
                .or_else(|| d.pci_address.as_deref().and_then(nvml::nvml_bus_id))
                .unwrap_or_default(),
            device: number(signals::MINOR_NUMBER).map(|n| format!("nvidia{n}")),
            model_name: text(signals::NAME).unwrap_or_else(|| d.name.clone()),
        }
    }

    /// The labels, dcgm-exporter's names first, then `Hostname`.
    fn labels(&self, hostname: &str) -> String {
        let mut out = format!(
            "gpu=\"{}\",UUID=\"{}\",pci_bus_id=\"{}\"",
            escape(&self.gpu),
            escape(&self.uuid),
            escape(&self.pci_bus_id)
        );
        if let Some(device) = &self.device {
            let _ = write!(out, ",device=\"{}\"", escape(device));
        }
        let _ = write!(
            out,
            ",modelName=\"{}\",Hostname=\"{}\"",
            escape(&self.model_name),
            escape(hostname)
        );
        out
    }
}

/// The family of rates in bytes per second.
const RATE_BYTES: &str = "kiln_rate_bytes_per_second";
/// The family of rates in operations per second.
const RATE_OPERATIONS: &str = "kiln_rate_operations_per_second";

/// A workload's rate name (`compute_fp32_gops`) as its family, the `rate` label it gets
/// (`compute_fp32`) and the factor to base units; `None` for a unit kiln does not know.
fn in_base_units(rate: &str) -> Option<(&'static str, &str, f64)> {
    crate::units::rate_unit(rate).map(|(stem, _, base, factor)| {
        let family = match base {
            crate::units::RateBase::BytesPerSecond => RATE_BYTES,
            crate::units::RateBase::OperationsPerSecond => RATE_OPERATIONS,
        };
        (family, stem, factor)
    })
}

/// The families a run's `kiln.prom` can hold besides its workloads' own: each metric
/// once, under one name (alert rules are checked against these and
/// `kiln health`'s [`crate::cmd::health::FAMILIES`]).
const RUN_FAMILIES: [&str; 14] = [
    "kiln_device_healthy",
    "kiln_device_result_code",
    "kiln_check_passed",
    "kiln_finding",
    "kiln_watch_diagnosis",
    "kiln_watch_app_peak_bytes",
    "kiln_watch_app_budget_bytes",
    "kiln_watch_app_baseline_bytes",
    "kiln_watch_app_exit_code",
    RATE_BYTES,
    RATE_OPERATIONS,
    "kiln_last_run_timestamp_seconds",
    "kiln_last_run_duration_seconds",
    "kiln_last_run_exit_code",
];

/// Every family a run's `kiln.prom` can hold: the run's, its workloads' and the build's.
pub fn families() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = RUN_FAMILIES.to_vec();
    out.extend(registry::metric_families().iter().map(|f| f.name));
    out.push("kiln_build_info");
    out
}

/// Renders the metrics of a report.
pub fn render(report: &Report, ctx: &Context) -> String {
    let mut out = String::new();
    let labels = |d: &DeviceReport| DcgmIdentity::of(d).labels(&report.host);
    let mut family =
        |name: &str, help: &str, samples: Vec<(String, f64)>| gauge(&mut out, name, help, &samples);
    let devices = &report.devices;
    family(
        "kiln_device_healthy",
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
        "The device's result as kiln's exit code: 0 healthy, 1 hardware, 2 environment, 3 software, 4 could not judge.",
        devices
            .iter()
            .map(|d| (labels(d), f64::from(d.result.exit_code())))
            .collect(),
    );
    // One series per device and check: a workload rerun to confirm, or run inside a
    // combined load as well as alone, must not repeat a label set (node_exporter rejects
    // the whole file then). A fault in any run is a fault; else anything cut short is -1.
    let mut checks: Vec<(String, f64)> = Vec::new();
    for d in devices {
        let mut by_check: Vec<(String, f64)> = Vec::new();
        for w in &d.workloads {
            let value = match w.status {
                WorkloadStatus::Passed => 1.0,
                WorkloadStatus::Failed | WorkloadStatus::SoftwareFault => 0.0,
                WorkloadStatus::Incomplete | WorkloadStatus::NotRun => -1.0,
            };
            let check = match w.together_with() {
                Some(load) => format!("{load}/{}", w.workload),
                None => w.workload.clone(),
            };
            match by_check.iter_mut().find(|(c, _)| *c == check) {
                // 0 (a fault) over -1 (cut short) over 1 (passed).
                Some((_, v)) => {
                    *v = if *v == 0.0 || value == 0.0 {
                        0.0
                    } else {
                        v.min(value)
                    }
                }
                None => by_check.push((check, value)),
            }
        }
        checks.extend(
            by_check
                .into_iter()
                .map(|(c, v)| (format!("{},check=\"{}\"", labels(d), escape(&c)), v)),
        );
    }
    family(
        "kiln_check_passed",
        "1 when the check passed, 0 when it found a fault, -1 when it could not run to the end.",
        checks,
    );
    // One series per device, code, class and severity, counting the findings behind it
    // (a degraded link gives PCIE_LINK_DEGRADED for its width and its generation): a
    // repeated label set would make node_exporter reject the file.
    let findings = counted(devices.iter().flat_map(|d| {
        d.findings.iter().map(move |f| {
            // Only the class and severity words are lowercased: the identity labels must
            // match the other families' for joins.
            format!(
                "{},code=\"{}\",class=\"{}\",severity=\"{}\"",
                labels(d),
                escape(f.code.name()),
                f.class.name(),
                f.severity.word()
            )
        })
    }));
    family(
        "kiln_finding",
        "Findings of the last kiln run, by code (the count of findings with that code).",
        findings,
    );
    // A watch's application, on the device its memory lived on.
    if let Some(app) = &report.application {
        let on = app
            .device
            .and_then(|i| devices.iter().find(|d| d.index == i))
            .map_or_else(|| format!("Hostname=\"{}\"", escape(&report.host)), labels);
        family(
            "kiln_watch_diagnosis",
            "The cause kiln watch found for the watched application, as a label (always 1): healthy, leak, over_the_limit, fragmentation, other_process, driver_timeout, card or not_judged.",
            vec![(format!("{on},diagnosis=\"{}\"", app.diagnosis.name()), 1.0)],
        );
        family(
            "kiln_watch_app_peak_bytes",
            "The watched application's highest GPU memory.",
            vec![(on.clone(), app.peak_bytes as f64)],
        );
        family(
            "kiln_watch_app_budget_bytes",
            "The GPU memory the watched application could have had.",
            app.budget_bytes
                .map(|b| (on.clone(), b as f64))
                .into_iter()
                .collect(),
        );
        family(
            "kiln_watch_app_baseline_bytes",
            "The watched application's lowest GPU memory in its last judged iteration.",
            app.baselines
                .last()
                .map(|b| (on.clone(), b[1]))
                .into_iter()
                .collect(),
        );
        family(
            "kiln_watch_app_exit_code",
            "How the watched application exited (a signal is 128 + its number), when it ended and kiln could know.",
            app.exit_code
                .or(app.signal.map(|s| 128 + s))
                .map(|c| (on.clone(), f64::from(c)))
                .into_iter()
                .collect(),
        );
    }
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
        family(fam.name, fam.help, samples);
    }
    // Every rate the workloads measured, in base units, one series per device and rate
    // (its first run's: a rerun to confirm measures the same work again).
    for (name, help) in [
        (
            RATE_BYTES,
            "Rates the last run measured (VRAM streaming, PCIe each way), in bytes per second.",
        ),
        (
            RATE_OPERATIONS,
            "Rates the last run measured (compute and matrix multiplication per kind), in operations per second.",
        ),
    ] {
        let mut samples: Vec<(String, f64)> = Vec::new();
        for d in devices {
            for w in d.workloads.iter().filter(|w| w.together_with().is_none()) {
                for (rate, value) in w.summary.rates() {
                    let Some((family, said, factor)) = in_base_units(rate) else {
                        continue;
                    };
                    let labels = format!("{},rate=\"{said}\"", labels(d));
                    if family == name && !samples.iter().any(|(l, _)| *l == labels) {
                        samples.push((labels, value * factor));
                    }
                }
            }
        }
        family(name, help, samples);
    }
    // The run's own families carry the node's label, as every other does.
    let node = format!("Hostname=\"{}\"", escape(&report.host));
    family(
        "kiln_last_run_timestamp_seconds",
        "When the last kiln run ended, in Unix seconds.",
        vec![(node.clone(), ctx.run_unix_seconds as f64)],
    );
    family(
        "kiln_last_run_duration_seconds",
        "How long the last kiln run took.",
        vec![(node.clone(), report.wall_s)],
    );
    family(
        "kiln_last_run_exit_code",
        "The exit code of the last kiln run.",
        vec![(node, f64::from(report.exit_code))],
    );
    family(
        "kiln_build_info",
        "kiln's version and the profile of the last run, as labels (always 1).",
        vec![(
            format!(
                "version=\"{}\",profile=\"{}\",Hostname=\"{}\"",
                escape(&report.tool_version),
                escape(&ctx.profile),
                escape(&report.host)
            ),
            1.0,
        )],
    );
    out
}
