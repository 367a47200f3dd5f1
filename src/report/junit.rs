//! JUnit XML for CI dashboards: one test suite per device, one test case per check and
//! one for the device's verdict.

use std::time::Duration;

use quick_junit::{
    NonSuccessKind, Report as JunitReport, TestCase, TestCaseStatus, TestSuite, XmlString,
};

use crate::finding::{Class, Finding};
use crate::verdict::{DeviceReport, DeviceResult, Report};
use crate::workload::WorkloadStatus;

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
    // The findings a failed workload's case holds, by their place in the device's list.
    let mut counted: Vec<usize> = Vec::new();
    let mut out: Vec<(String, f64, Case)> = d
        .workloads
        .iter()
        .map(|w| {
            let case = match w.status {
                WorkloadStatus::Failed | WorkloadStatus::SoftwareFault => {
                    // The findings its own result proved, as the verdict marked them.
                    let (places, own): (Vec<usize>, Vec<&Finding>) = d
                        .findings
                        .iter()
                        .enumerate()
                        .filter(|(_, f)| f.facts.workload.as_deref() == Some(w.workload.as_str()))
                        .unzip();
                    counted.extend(places);
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
        .enumerate()
        .filter(|(i, f)| f.class != Class::Info && !counted.contains(i))
        .map(|(_, f)| f)
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

/// Renders the report as JUnit XML (through `quick-junit`, which writes and escapes it).
pub fn render(report: &Report) -> std::io::Result<String> {
    let mut out = JunitReport::new("kiln");
    out.set_time(seconds(report.wall_s));
    for d in &report.devices {
        let cases = cases(d);
        let mut suite = TestSuite::new(format!("GPU{} {}", d.index, d.name));
        suite.set_time(seconds(cases.iter().map(|(_, t, _)| t).sum::<f64>()));
        // JUnit's timestamp has no zone (the schema CI tools validate against): the run's
        // start in UTC without the `Z`, where quick-junit's own would add an offset.
        suite.extra.insert(
            XmlString::new("timestamp"),
            XmlString::new(report.started_utc.trim_end_matches('Z')),
        );
        suite
            .extra
            .insert(XmlString::new("hostname"), XmlString::new(&report.host));
        for (name, time_s, case) in cases {
            let status = match &case {
                Case::Passed(_) => TestCaseStatus::success(),
                Case::Failed {
                    message,
                    kind,
                    body,
                } => {
                    let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    status
                        .set_message(message.as_str())
                        .set_type(kind.as_str())
                        .set_description(body.as_str());
                    status
                }
                Case::Errored { message, kind } => {
                    let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
                    status.set_message(message.as_str()).set_type(kind.as_str());
                    status
                }
                Case::Skipped(message) => {
                    let mut status = TestCaseStatus::skipped();
                    status.set_message(message.as_str());
                    status
                }
            };
            let mut test = TestCase::new(name, status);
            test.set_classname(format!("kiln.{}", d.uuid))
                .set_time(seconds(time_s));
            if let Case::Passed(text) = case {
                test.set_system_out(text);
            }
            suite.add_test_case(test);
        }
        out.add_test_suite(suite);
    }
    out.to_string().map_err(std::io::Error::other)
}

/// A duration of `s` seconds (none below zero).
fn seconds(s: f64) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::FindingCode;
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
        let mut report = crate::verdict::Report::new(
            crate::verdict::RunOutline {
                run_id: "r".into(),
                run_dir: "d".into(),
                started_utc: "t".into(),
                wall_s: 1.0,
                ..Default::default()
            },
            vec![],
        );
        // A device's report before any finding, as renderers see it.
        let unjudged = |evidence: crate::verdict::DeviceEvidence| {
            let settled = crate::verdict::settle::settle(&evidence, &[]);
            crate::verdict::DeviceReport::judged(evidence, Vec::new(), settled, false)
        };
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
        let mut failed = unjudged(crate::verdict::DeviceEvidence::tested(
            &info,
            vec![
                outcome("vram", WorkloadStatus::Failed),
                outcome("pcie", WorkloadStatus::NotRun),
            ],
            None,
        ));
        // Rendering, not judging: the device's result as a verdict would have set it.
        failed.result = DeviceResult::Fail;
        failed.reason = "vram: a < b & c".into();
        report.devices.push(failed);
        let text = render(&report).unwrap();
        let doc = roxmltree::Document::parse(&text).expect("well-formed XML");
        let suite = suite_of(&doc, 0);
        assert_eq!(suite.attribute("name"), Some("GPU0 GPU <\"&'>"), "{text}");
        for (key, value) in [
            ("failures", "1"),
            ("errors", "0"),
            ("skipped", "1"),
            ("time", "0.000"),
            ("timestamp", "t"),
            ("hostname", report.host.as_str()),
        ] {
            assert_eq!(suite.attribute(key), Some(value), "{key}: {text}");
        }
        let vram = outcome_of(&doc, 0, "vram");
        assert_eq!(
            (
                vram.tag_name().name(),
                vram.attribute("message"),
                vram.attribute("type")
            ),
            ("failure", Some("a < b & c"), Some("failed")),
            "{text}"
        );
        let pcie = outcome_of(&doc, 0, "pcie");
        assert_eq!(
            (pcie.tag_name().name(), pcie.attribute("message")),
            ("skipped", Some("a < b & c: not run")),
        );
        // The workload's fault is not counted again by the verdict.
        let verdict = outcome_of(&doc, 0, "verdict");
        assert_eq!(verdict.tag_name().name(), "system-out", "{text}");
        assert_eq!(
            verdict.text(),
            Some("FAIL: vram: a < b & c (counted in the failed checks above)")
        );
        // A finding no workload's case holds (the telemetry's) fails the verdict's case.
        report.devices[0].findings.push(crate::finding::finding(
            FindingCode::ThermalThrottle,
            crate::finding::Severity::Major,
            crate::finding::Confidence::High,
            "held at 72% of its clocks by heat".into(),
            crate::finding::Evidence::default(),
            "cool it",
        ));
        let text = render(&report).unwrap();
        let doc = roxmltree::Document::parse(&text).expect("well-formed XML");
        let verdict = outcome_of(&doc, 0, "verdict");
        assert_eq!(
            (
                verdict.tag_name().name(),
                verdict.attribute("message"),
                verdict.attribute("type")
            ),
            (
                "failure",
                Some("held at 72% of its clocks by heat"),
                Some("fail")
            ),
            "{text}"
        );
        assert!(
            verdict
                .text()
                .is_some_and(|t| t.starts_with("THERMAL_THROTTLE (environment)")),
            "{text}"
        );
        // A device that never reported (hung before its first workload) is an error,
        // not an empty suite that reads as green.
        report
            .devices
            .push(unjudged(crate::verdict::DeviceEvidence::tested(
                &info,
                vec![],
                Some("no progress for 4 s: the watchdog abandoned the device".into()),
            )));
        let text = render(&report).unwrap();
        let doc = roxmltree::Document::parse(&text).expect("well-formed XML");
        let hung = outcome_of(&doc, 1, "verdict");
        assert_eq!(
            (
                hung.tag_name().name(),
                hung.attribute("message"),
                hung.attribute("type")
            ),
            (
                "error",
                Some(
                    "no progress for 4 s: the watchdog abandoned the device; next: rerun; if the same result comes back, keep this run directory and report.json for a closer look"
                ),
                Some("inconclusive")
            ),
            "{text}"
        );
        let root = doc.root_element();
        for (key, value) in [("tests", "4"), ("failures", "2"), ("errors", "1")] {
            assert_eq!(root.attribute(key), Some(value), "{key}: {text}");
        }
    }

    /// The `n`-th test suite.
    fn suite_of<'a>(doc: &'a roxmltree::Document, n: usize) -> roxmltree::Node<'a, 'a> {
        doc.root_element()
            .children()
            .filter(|c| c.has_tag_name("testsuite"))
            .nth(n)
            .expect("the suite")
    }

    /// How case `name` of suite `n` ended: its failure, error or skipped element, or its
    /// system-out where it passed.
    fn outcome_of<'a>(
        doc: &'a roxmltree::Document,
        n: usize,
        name: &str,
    ) -> roxmltree::Node<'a, 'a> {
        suite_of(doc, n)
            .children()
            .find(|c| c.has_tag_name("testcase") && c.attribute("name") == Some(name))
            .and_then(|c| c.children().find(|e| e.is_element()))
            .unwrap_or_else(|| panic!("case {name} has no outcome"))
    }
}
