//! JUnit XML for CI dashboards: one test suite per device, one test case per check and
//! one for the device's verdict.

use std::fmt::Write as _;

use crate::finding::{Class, Finding, FindingCode};
use crate::verdict::{DeviceReport, DeviceResult, Report};
use crate::workload::WorkloadStatus;

fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

/// How one test case ended.
enum Case {
    Passed(String),
    Failed {
        message: String,
        kind: String,
        body: String,
    },
    Errored {
        message: String,
        kind: String,
    },
    Skipped(String),
}

/// A device's cases: one per workload, then `verdict`, the device's result. Each fault is
/// counted once: a workload's case fails with the findings its own result proves; the
/// verdict's case fails only for what no failed workload's case holds (telemetry, Xids,
/// rates against peers), and errs when the device could not be judged (a hang, a crash, a
/// run cut short) even if no workload ever reported. A planned workload that did not run
/// is skipped, with why.
fn cases(d: &DeviceReport) -> Vec<(String, f64, Case)> {
    let lines = |findings: &[&Finding]| {
        findings
            .iter()
            .map(|f| format!("{} ({}): {}", f.code, f.class.name(), f.summary))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let mut counted: Vec<FindingCode> = Vec::new();
    let mut out: Vec<(String, f64, Case)> = d
        .workloads
        .iter()
        .map(|w| {
            let case = match w.status {
                WorkloadStatus::Failed | WorkloadStatus::SoftwareFault => {
                    let codes: Vec<FindingCode> =
                        w.summary.judge().into_iter().map(|f| f.code).collect();
                    let own: Vec<&Finding> = d
                        .findings
                        .iter()
                        .filter(|f| codes.contains(&f.code))
                        .collect();
                    counted.extend(own.iter().map(|f| f.code));
                    Case::Failed {
                        message: w.headline.clone(),
                        kind: w.status.name().into(),
                        body: lines(&own),
                    }
                }
                // A skip says why, whatever the workload's own headline says.
                WorkloadStatus::Incomplete | WorkloadStatus::NotRun => {
                    let why = w
                        .summary
                        .envelope()
                        .why_cut_short()
                        .unwrap_or(w.status.word());
                    Case::Skipped(if w.headline.contains(why) {
                        w.headline.clone()
                    } else {
                        format!("{}: {why}", w.headline)
                    })
                }
                WorkloadStatus::Passed => Case::Passed(w.headline.clone()),
            };
            (w.workload.clone(), w.summary.envelope().wall_s, case)
        })
        .collect();
    let kind = d.result.word().to_lowercase();
    let left: Vec<&Finding> = d
        .findings
        .iter()
        .filter(|f| f.class != Class::Info && !counted.contains(&f.code))
        .collect();
    let verdict = match d.result {
        DeviceResult::Pass => Case::Passed(d.reason.clone()),
        DeviceResult::Inconclusive => Case::Errored {
            message: match &d.action {
                Some(action) => format!("{}; next: {action}", d.reason),
                None => d.reason.clone(),
            },
            kind,
        },
        _ if left.is_empty() => Case::Passed(format!(
            "{}: {} (counted in the failed checks above)",
            d.result.word(),
            d.reason
        )),
        _ => Case::Failed {
            message: left
                .first()
                .map(|f| f.summary.clone())
                .unwrap_or_else(|| d.reason.clone()),
            kind,
            body: lines(&left),
        },
    };
    // Judging takes no device time: the verdict's case is instant.
    out.push(("verdict".into(), 0.0, verdict));
    unique_names(&mut out);
    out
}

/// Numbers the cases of a check that ran more than once (a rerun to confirm, a profile
/// that runs compute in several shapes): `vram (run 2 of 4)`, so that every case of a
/// suite has a name of its own, as CI dashboards key them.
fn unique_names(cases: &mut [(String, f64, Case)]) {
    let names: Vec<String> = cases.iter().map(|(n, _, _)| n.clone()).collect();
    for (i, (name, _, _)) in cases.iter_mut().enumerate() {
        let runs = names.iter().filter(|n| *n == name).count();
        if runs > 1 {
            let run = names[..i].iter().filter(|n| *n == name).count() + 1;
            *name = format!("{name} (run {run} of {runs})");
        }
    }
}

/// Renders the report as JUnit XML.
pub fn render(report: &Report) -> String {
    let all: Vec<Vec<(String, f64, Case)>> = report.devices.iter().map(cases).collect();
    let count = |cases: &[(String, f64, Case)], f: fn(&Case) -> bool| {
        cases.iter().filter(|(_, _, c)| f(c)).count()
    };
    let failed = |c: &Case| matches!(c, Case::Failed { .. });
    let errored = |c: &Case| matches!(c, Case::Errored { .. });
    let skipped = |c: &Case| matches!(c, Case::Skipped(_));
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"kiln\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{:.3}\">",
        all.iter().map(Vec::len).sum::<usize>(),
        all.iter().map(|c| count(c, failed)).sum::<usize>(),
        all.iter().map(|c| count(c, errored)).sum::<usize>(),
        report.wall_s
    );
    for (d, cases) in report.devices.iter().zip(&all) {
        let _ = writeln!(
            out,
            "  <testsuite name=\"GPU{} {}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3}\" timestamp=\"{}\" hostname=\"{}\">",
            d.index,
            xml(&d.name),
            cases.len(),
            count(cases, failed),
            count(cases, errored),
            count(cases, skipped),
            cases.iter().map(|(_, t, _)| t).sum::<f64>(),
            // JUnit's timestamp has no zone: the run's start in UTC, without the `Z`.
            xml(report.started_utc.trim_end_matches('Z')),
            xml(&report.host)
        );
        for (name, time_s, case) in cases {
            let _ = write!(
                out,
                "    <testcase classname=\"kiln.{}\" name=\"{}\" time=\"{:.3}\">",
                xml(&d.uuid),
                xml(name),
                time_s
            );
            let _ = match case {
                Case::Failed {
                    message,
                    kind,
                    body,
                } => write!(
                    out,
                    "<failure message=\"{}\" type=\"{}\">{}</failure>",
                    xml(message),
                    xml(kind),
                    xml(body)
                ),
                Case::Errored { message, kind } => write!(
                    out,
                    "<error message=\"{}\" type=\"{}\"/>",
                    xml(message),
                    xml(kind)
                ),
                Case::Skipped(message) => write!(out, "<skipped message=\"{}\"/>", xml(message)),
                Case::Passed(text) => write!(out, "<system-out>{}</system-out>", xml(text)),
            };
            out.push_str("</testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::WorkloadOutcome;

    #[test]
    fn a_check_that_ran_more_than_once_has_a_name_per_run() {
        let mut cases: Vec<(String, f64, Case)> = ["vram", "vram", "compute", "vram", "verdict"]
            .iter()
            .map(|n| ((*n).to_owned(), 0.0, Case::Passed(String::new())))
            .collect();
        unique_names(&mut cases);
        let names: Vec<&str> = cases.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "vram (run 1 of 3)",
                "vram (run 2 of 3)",
                "compute",
                "vram (run 3 of 3)",
                "verdict"
            ]
        );
    }

    #[test]
    fn failures_and_skips_are_marked_and_text_is_escaped() {
        let mut report =
            crate::verdict::Report::new("r".into(), "d".into(), "t".into(), 1.0, vec![], vec![]);
        let info = crate::gpu::DeviceInfo {
            name: "GPU <\"&'>".into(),
            ..serde_json::from_value(serde_json::json!({
                "index": 0, "name": "x", "vendor_id": 0, "vendor_name": "x", "device_id": 0, "kind": "discrete_gpu",
                "driver_name": "", "driver_info": "", "driver_version": "", "driver_version_raw": 0, "api_version": "",
                "device_uuid": "u", "pci_address": null, "heaps": [], "memory_types": [], "memory_budget_supported": false,
                "limits": {"max_storage_buffer_range_bytes": 0, "max_memory_allocation_size_bytes": 0, "max_buffer_size_bytes": null,
                    "max_texel_buffer_elements": 0, "max_compute_work_group_count": [0, 0, 0], "max_compute_work_group_invocations": 0,
                    "timestamp_period_ns": 1.0, "timestamp_valid_bits": 0, "max_push_constants_size_bytes": 0},
                "shader_int64": false, "compute_queue_family": null
            }))
            .unwrap()
        };
        let outcome = |name: &str, status| WorkloadOutcome {
            workload: name.into(),
            status,
            headline: "a < b & c".into(),
            summary: crate::workload::WorkloadResult::from_json(name, serde_json::Value::Null),
        };
        let mut failed = crate::verdict::DeviceReport::new(
            &info,
            vec![
                outcome("vram", WorkloadStatus::Failed),
                outcome("pcie", WorkloadStatus::NotRun),
            ],
            None,
        );
        // Rendering, not judging: the device's result as a verdict would have set it.
        failed.result = DeviceResult::Fail;
        failed.reason = "vram: a < b & c".into();
        report.devices.push(failed);
        let text = render(&report);
        assert!(text.contains("GPU0 GPU &lt;&quot;&amp;&apos;&gt;"));
        assert!(text.contains("<failure message=\"a &lt; b &amp; c\" type=\"failed\">"));
        assert!(text.contains("<skipped message=\"a &lt; b &amp; c: not run\"/>"));
        let suite = format!(
            "failures=\"1\" errors=\"0\" skipped=\"1\" time=\"0.000\" timestamp=\"t\" hostname=\"{}\"",
            xml(&report.host)
        );
        assert!(text.contains(&suite), "{text}");
        assert!(text.contains("name=\"vram\" time=\"0.000\">"), "{text}");
        assert!(
            text.contains(
                "name=\"verdict\" time=\"0.000\"><system-out>FAIL: vram: a &lt; b &amp; c (counted in the failed checks above)"
            ),
            "the workload's fault is not counted again by the verdict: {text}"
        );
        // A finding no workload's case holds (the telemetry's) fails the verdict's case.
        report.devices[0].findings.push(crate::finding::finding(
            FindingCode::ThermalThrottle,
            crate::finding::Severity::Major,
            crate::finding::Confidence::High,
            "held at 72% of its clocks by heat".into(),
            serde_json::Value::Null,
            "cool it",
        ));
        let text = render(&report);
        assert!(
            text.contains(
                "name=\"verdict\" time=\"0.000\"><failure message=\"held at 72% of its clocks by heat\" type=\"fail\">THERMAL_THROTTLE (environment)"
            ),
            "{text}"
        );
        // A device that never reported (hung before its first workload) is an error,
        // not an empty suite that reads as green.
        report.devices.push(crate::verdict::DeviceReport::new(
            &info,
            vec![],
            Some("no progress for 4 s: the watchdog abandoned the device".into()),
        ));
        let text = render(&report);
        assert!(
            text.contains("<error message=\"no progress for 4 s: the watchdog abandoned the device\" type=\"inconclusive\"/>"),
            "{text}"
        );
        assert!(
            text.contains("tests=\"4\" failures=\"2\" errors=\"1\""),
            "{text}"
        );
    }
}
