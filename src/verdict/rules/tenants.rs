//! Other processes on the GPU: there when the test started, or arriving during it, each
//! with what its coming did to the rates.

use serde_json::json;

use super::rates;
use crate::finding::{Confidence, Finding, FindingCode, Severity, finding};
use crate::telemetry::process::Process;
use crate::telemetry::record::Reading;
use crate::telemetry::signals;
use crate::verdict::DeviceReport;
use crate::verdict::thresholds::Thresholds;

/// The rule.
pub fn judge(device: &DeviceReport, _t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    let s = &device.setup;
    if s.watching {
        // A watched application's neighbours are judged by its own rule.
        return out;
    }
    let tenants = processes(device);
    // Those that came after the start, each with when and what its coming did to the rates.
    let arrived = rates::arrivals(device, &tenants);
    if tenants.is_empty() && arrived.is_empty() {
        return out;
    }
    let mut said = Vec::new();
    if !tenants.is_empty() {
        let listed: Vec<String> = tenants.iter().map(Process::said).collect();
        said.push(format!(
            "{} {} using the GPU when the test started",
            crate::text::list(&listed),
            if tenants.len() == 1 { "was" } else { "were" }
        ));
    }
    for a in &arrived {
        let changes = rates::before_and_after(device, a);
        said.push(format!(
            "{} started using the GPU during the test, {:.1} s into the {} phase{}",
            a.process.said(),
            (a.first_ms - a.phase.start_ms) / 1e3,
            a.phase.phase,
            if changes.is_empty() {
                String::new()
            } else {
                format!(": {}", changes.join("; "))
            }
        ));
    }
    out.push(finding(
        FindingCode::OtherTenants,
        Severity::Major,
        Confidence::High,
        said.join("; "),
        json!({
            signals::OTHER_PROCESSES.name: tenants,
            "arrived": arrived.iter().map(|a| json!({
                "process": a.process,
                "phase": a.phase.phase,
                "first_seen_ms": a.first_ms,
                "rates": rates::before_and_after(device, a),
            })).collect::<Vec<_>>(),
        }),
        "rerun when the GPU is idle (drain the node, or --wait-idle)",
    ));
    out
}

/// Other processes on the GPU when the test started (`pid:bytes[:name]`), per the vendor
/// source.
pub(super) fn processes(device: &DeviceReport) -> Vec<Process> {
    device
        .setup
        .identity
        .get(signals::OTHER_PROCESSES.name)
        .and_then(Reading::processes)
        .unwrap_or_default()
}
