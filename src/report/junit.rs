//! JUnit XML for CI dashboards: one test suite per device, one test case per check.

use std::fmt::Write as _;

use super::Report;
use crate::workload::WorkloadStatus;

fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

/// Renders the report as JUnit XML.
pub fn render(report: &Report) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let cases: usize = report.devices.iter().map(|d| d.workloads.len()).sum();
    let failures: usize = report
        .devices
        .iter()
        .flat_map(|d| &d.workloads)
        .filter(|w| {
            matches!(
                w.status,
                WorkloadStatus::Failed | WorkloadStatus::SoftwareFault
            )
        })
        .count();
    let _ = writeln!(
        out,
        "<testsuites name=\"kiln\" tests=\"{cases}\" failures=\"{failures}\" time=\"{:.3}\">",
        report.wall_s
    );
    for d in &report.devices {
        let suite_failures = d
            .workloads
            .iter()
            .filter(|w| {
                matches!(
                    w.status,
                    WorkloadStatus::Failed | WorkloadStatus::SoftwareFault
                )
            })
            .count();
        let skipped = d
            .workloads
            .iter()
            .filter(|w| {
                matches!(
                    w.status,
                    WorkloadStatus::Incomplete | WorkloadStatus::NotRun
                )
            })
            .count();
        let _ = writeln!(
            out,
            "  <testsuite name=\"GPU{} {}\" tests=\"{}\" failures=\"{suite_failures}\" skipped=\"{skipped}\">",
            d.index,
            xml(&d.name),
            d.workloads.len()
        );
        for w in &d.workloads {
            let _ = write!(
                out,
                "    <testcase classname=\"kiln.{}\" name=\"{}\">",
                xml(&d.uuid),
                xml(&w.workload)
            );
            match w.status {
                WorkloadStatus::Failed | WorkloadStatus::SoftwareFault => {
                    let findings: Vec<String> = d
                        .findings
                        .iter()
                        .map(|f| format!("{} ({:?}): {}", f.code, f.class, f.summary))
                        .collect();
                    let _ = write!(
                        out,
                        "<failure message=\"{}\" type=\"{}\">{}</failure>",
                        xml(&w.headline),
                        w.status.name(),
                        xml(&findings.join("\n"))
                    );
                }
                WorkloadStatus::Incomplete | WorkloadStatus::NotRun => {
                    let _ = write!(out, "<skipped message=\"{}\"/>", xml(&w.headline));
                }
                WorkloadStatus::Passed => {
                    let _ = write!(out, "<system-out>{}</system-out>", xml(&w.headline));
                }
            }
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
    fn failures_and_skips_are_marked_and_text_is_escaped() {
        let mut report =
            crate::report::Report::new("r".into(), "d".into(), "t".into(), 1.0, vec![], vec![]);
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
            summary: serde_json::Value::Null,
        };
        report.devices.push(crate::report::DeviceReport::new(
            &info,
            vec![
                outcome("vram", WorkloadStatus::Failed),
                outcome("pcie", WorkloadStatus::NotRun),
            ],
            None,
        ));
        let text = render(&report);
        assert!(text.contains("GPU0 GPU &lt;&quot;&amp;&apos;&gt;"));
        assert!(text.contains("<failure message=\"a &lt; b &amp; c\" type=\"failed\">"));
        assert!(text.contains("<skipped message=\"a &lt; b &amp; c\"/>"));
        assert!(text.contains("failures=\"1\" skipped=\"1\""));
    }
}
