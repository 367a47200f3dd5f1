//! How people read the matrix test: its lines, the table of wrong elements and the chart
//! of its rates.

use super::*;

pub(super) fn sections(r: &MatrixReport) -> Vec<Section> {
    let mut lines = vec![
        r.headline(),
        format!(
            "path: {} ({}x{} tiles, {}-square matrices{}); cooperative matrices: {}",
            r.path,
            r.tile,
            r.tile,
            r.size,
            r.grown_from
                .map(|e| format!(", grown from {e} for the power target"))
                .unwrap_or_default(),
            r.cooperative_matrix
        ),
    ];
    for k in &r.kinds {
        lines.push(format!(
                "{} {} on the {}, {} multiplying, {} verified (best {}), {} checksum / {} invalid ({} non-finite) / {} recomputation mismatches, {} recomputed",
                k.kind.name(),
                crate::text::count(k.rounds, "round"),
                path_words(k.shape),
                k.kind.rate(k.tflops),
                k.kind.rate(k.verified_tflops),
                k.kind.rate(k.best_tflops),
                k.checksum_mismatches,
                k.invalid_values,
                k.nonfinite,
                k.redundant_mismatches,
                crate::text::count(k.tiles_recomputed, "tile"),
            ));
    }
    lines.extend(r.power.iter().map(PowerTargetReport::line));
    lines.extend(r.levels.iter().map(LevelResult::line));
    lines.extend(r.skipped.iter().map(|s| format!("skipped: {s}")));
    lines.extend(r.records.iter().take(10).map(MatrixMismatch::place));
    let mut out = vec![Section::Lines(lines)];
    if r.faults() > 0 {
        out.push(Section::Table(wrong_elements(r)));
    }
    out.push(Section::Bars {
        title: "Matrix rate, verified (mark: multiplication alone)".into(),
        unit: "TFLOP/s".into(),
        bars: r
            .kinds
            .iter()
            .map(|k| {
                // Floating-point kinds in FLOP/s, int8 in integer operations, as the rate
                // findings say them.
                let unit = match k.kind {
                    super::MatrixKind::Int8 => "TOP/s",
                    _ => "TFLOP/s",
                };
                Bar::marked(k.kind.name(), k.verified_tflops, Some(k.tflops)).in_unit(unit)
            })
            .collect(),
    });
    out
}

/// Where products with the matrix units' `shape` (None: the shared-memory kernel) run,
/// in words.
pub(super) fn path_words(shape: Option<[u32; 3]>) -> String {
    match shape {
        Some([m, n, k]) => format!("matrix units ({m}x{n}x{k})"),
        None => "shared-memory kernel".into(),
    }
}

/// The wrong output elements (or tiles, where too many of a tile's rows and columns
/// disagree to locate each), with the workgroup that computed them.
fn wrong_elements(r: &MatrixReport) -> Table {
    let shown = |v: Option<f64>| v.map_or("?".into(), |v| v.to_string());
    Table {
        title: "Wrong matrix elements".into(),
        noun: crate::workload::fault_noun("matrix"),
        place: "element",
        columns: vec![
            "Kind",
            "Round",
            "Tile",
            "Element (row, column)",
            "Check",
            "Expected",
            "Got",
            "Bits",
            "Workgroup",
        ],
        rows: r
            .records
            .iter()
            .map(|m| {
                let element = match (m.row, m.col, m.rows_cols_wrong) {
                    (Some(row), Some(col), _) => format!("({row}, {col})"),
                    (_, _, Some([rows, cols])) => {
                        format!("whole tile: {rows} rows, {cols} columns")
                    }
                    _ => "not located".into(),
                };
                TableRow {
                    count: 1,
                    key: match (m.row, m.col) {
                        (Some(row), Some(col)) => format!(
                            "{} element ({row}, {col}) of tile ({}, {})",
                            m.kind.name(),
                            m.tile[0],
                            m.tile[1]
                        ),
                        _ => format!("{} tile ({}, {})", m.kind.name(), m.tile[0], m.tile[1]),
                    },
                    cells: vec![
                        m.kind.name().into(),
                        m.round.to_string(),
                        format!("({}, {})", m.tile[0], m.tile[1]),
                        element,
                        m.check.clone(),
                        shown(m.expected),
                        shown(m.actual),
                        m.actual_bits.map_or("-".into(), |b| format!("0x{b:08x}")),
                        match m.second_workgroup {
                            Some(w) => format!("{} (recomputed on {w})", m.workgroup),
                            None => m.workgroup.to_string(),
                        },
                    ],
                }
            })
            .collect(),
        total: r.faults(),
    }
}
