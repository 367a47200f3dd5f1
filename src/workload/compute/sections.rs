//! How people read the compute workload's report, and the findings its result proves.

use super::*;
use crate::workload::cadence::{self, clock_words};

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
        noun: crate::workload::fault_noun("compute"),
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
        out.push(where_in_the_load(c, mismatches).unwrap_or_else(|| finding(FindingCode::ComputeMismatch, Severity::Critical, Confidence::High,
            format!("{mismatches} work items computed differently on two compute units: silent data corruption"),
            crate::finding::evidence(&Wrong {
                mismatches,
                records: c.records.iter().take(8).collect(),
            }),
            "take the GPU out of service and RMA it with this report")));
    }
    if nonfinite > 0 {
        out.push(finding(
            FindingCode::ComputeNonfinite,
            Severity::Critical,
            Confidence::High,
            format!(
                "{nonfinite} results were NaN or infinite where the arithmetic cannot produce them"
            ),
            crate::finding::evidence(&NonFinite { nonfinite }),
            "take the GPU out of service and RMA it with this report",
        ));
    }
}

crate::evidence! {
    /// The evidence of wrong compute results: how many, and the first records.
    struct Wrong<'a> {
        mismatches: u64 => "Mismatches",
        records: Vec<&'a Mismatch> => "Record",
    }
}

crate::evidence! {
    /// The evidence of wrong compute results judged by where in the load they came: with the
    /// load's levels and pauses.
    struct WrongInTheLoad<'a> {
        /// load's levels and pauses.
        mismatches: u64 => "Mismatches",
        levels: &'a [LevelResult] => "Load levels",
        pauses: &'a Option<PausesReport> => "Pauses",
        records: Vec<&'a Mismatch> => "Record",
    }
}

crate::evidence! {
    /// The evidence of `COMPUTE_NONFINITE`.
    struct NonFinite {
        nonfinite: u64 => "Not-a-number or infinite results",
    }
}

/// The finding of wrong results that came only at some points of the load: only below
/// full load in a sweep, where the card boosts highest (`PEAK_CLOCK_ERRORS`), or only
/// around the switches between load and idle (`CLOCK_TRANSITION_ERRORS`). None when they
/// came at full, steady load too, or the records do not say where.
fn where_in_the_load(c: &ComputeReport, mismatches: u64) -> Option<Finding> {
    let evidence = crate::finding::evidence(&WrongInTheLoad {
        mismatches,
        levels: &c.levels,
        pauses: &c.pauses,
        records: c.records.iter().take(8).collect(),
    });
    if c.shape == LoadShape::Sweep {
        let points: Vec<Option<LoadPoint>> = c.records.iter().map(|m| m.at).collect();
        return cadence::partial_load_only(&c.levels, &points, mismatches, evidence);
    }
    let points: Vec<&LoadPoint> = c.records.iter().filter_map(|m| m.at.as_ref()).collect();
    if points.is_empty() || points.len() < c.records.len() {
        return None;
    }
    let switching = matches!(c.shape, LoadShape::Pauses { .. } | LoadShape::Pulsed { .. });
    if !switching || points.iter().any(|p| p.phase == LoadPhase::Load) {
        return None;
    }
    let mut by_phase: Vec<(LoadPhase, u64, Option<f64>)> = Vec::new();
    for p in &points {
        match by_phase.iter_mut().find(|(phase, ..)| *phase == p.phase) {
            Some(entry) => entry.1 += 1,
            None => by_phase.push((p.phase, 1, p.clock_mhz)),
        }
    }
    let at: Vec<String> = by_phase
        .iter()
        .map(|(phase, n, mhz)| format!("{n} {}{}", phase.word(), clock_words(*mhz)))
        .collect();
    Some(finding(
        FindingCode::ClockTransitionErrors,
        Severity::Critical,
        Confidence::High,
        format!(
            "{mismatches} wrong results only around the switches between load and idle: {}; none under steady load{}",
            at.join(", "),
            c.pauses
                .map(|p| format!(" ({})", p.line()))
                .unwrap_or_default()
        ),
        evidence,
        cadence::MARGINAL,
    ))
}

crate::said_by_name!(ComputeKind);

crate::said_record!(Mismatch {
    kind => "Kind",
    round => "Round",
    item => "Item",
    first_invocation => "First invocation",
    second_invocation => "Second invocation",
    second_workgroup => "Second workgroup",
    expected => "Expected" in crate::finding::Unit::Hex,
    actual => "Read" in crate::finding::Unit::Hex,
    check => "Check",
    at => "At",
});
