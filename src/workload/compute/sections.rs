//! How people read the compute workload's report, and the findings its result proves.

use super::*;

/// The wrong results, each with the work item, the check and the invocations that
/// computed it: where on the chip to look.
pub(super) fn wrong_results(c: &ComputeReport) -> Table {
    let words = |v: &[u32; 4]| {
        v.iter()
            .map(|w| format!("{w:08x}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    Table {
        title: "Wrong results".into(),
        noun: "wrong result",
        place: "item",
        columns: vec![
            "Kind",
            "Round",
            "Item",
            "Check",
            "Computed by",
            "Expected",
            "Got",
            "XOR",
        ],
        rows: c
            .records
            .iter()
            .map(|m| {
                let xor: [u32; 4] = std::array::from_fn(|i| m.expected[i] ^ m.actual[i]);
                let by = match (m.second_invocation, m.second_workgroup) {
                    (Some(i), Some(g)) => format!(
                        "invocation {}, then {i} of workgroup {g}",
                        m.first_invocation
                    ),
                    (Some(i), None) => format!("invocation {}, then {i}", m.first_invocation),
                    _ => format!("invocation {} (CPU check)", m.first_invocation),
                };
                TableRow {
                    count: 1,
                    key: format!("{} item {}", m.kind.label(), m.item),
                    cells: vec![
                        m.kind.label().into(),
                        m.round.to_string(),
                        m.item.to_string(),
                        m.check.to_string(),
                        by,
                        words(&m.expected),
                        words(&m.actual),
                        words(&xor),
                    ],
                }
            })
            .collect(),
        total: c.faults(),
    }
}

/// Wrong or impossible results: silent data corruption.
pub(super) fn found(c: &ComputeReport, out: &mut Vec<Finding>) {
    let mismatches: u64 = c
        .kinds
        .iter()
        .map(|k| k.mismatches + k.cpu_mismatches)
        .sum();
    let nonfinite: u64 = c.kinds.iter().map(|k| k.nonfinite).sum();
    if mismatches > 0 {
        out.push(finding(FindingCode::ComputeMismatch, Severity::Critical, Confidence::High,
            format!("{mismatches} work items computed differently on two compute units: silent data corruption"),
            json!({"mismatches": mismatches, "records": c.records.iter().take(8).collect::<Vec<_>>()}),
            "take the GPU out of service and RMA it with this report"));
    }
    if nonfinite > 0 {
        out.push(finding(
            FindingCode::ComputeNonfinite,
            Severity::Critical,
            Confidence::High,
            format!(
                "{nonfinite} results were NaN or infinite where the arithmetic cannot produce them"
            ),
            json!({"nonfinite": nonfinite}),
            "take the GPU out of service and RMA it with this report",
        ));
    }
}
