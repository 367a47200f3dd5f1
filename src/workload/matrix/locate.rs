//! What a correct product holds, on the CPU (the inputs follow from the seed), and the
//! location of the wrong elements the checks point at.

use super::gpu::Gpu;
use super::*;

/// Input word `w` (shaders/matrix_common.glsl's source_word), on the CPU.
pub(super) fn source_word(seed: u32, w: u32) -> u32 {
    let h = hash(w.wrapping_mul(0x9E37_79B1).wrapping_add(seed));
    let mut word = 0u32;
    for q in 0..4 {
        let v = ((h >> (8 * q)) & 0xFF) as i32 % 63 - 31;
        word |= (v as u32 & 0xFF) << (8 * q);
    }
    word
}

/// Element `e` of the packed inputs (A's elements, then B's), on the CPU.
pub(super) fn source_element(seed: u32, e: u64) -> i32 {
    let word = source_word(seed, (e / 4) as u32);
    i32::from((word >> (8 * (e % 4))) as u8 as i8)
}

/// What C[row][col] is for inputs from `seed`: exact, an integer (see matrix_common.glsl).
pub fn reference_element(seed: u32, edge: u32, row: u32, col: u32) -> i64 {
    let n = u64::from(edge);
    (0..n)
        .map(|k| {
            let a = source_element(seed, u64::from(row) * n + k);
            let b = source_element(seed, n * n + k * n + u64::from(col));
            i64::from(a) * i64::from(b)
        })
        .sum()
}

/// The bits a correct element holds for `kind`.
pub(super) fn correct_bits(kind: MatrixKind, value: i64) -> u32 {
    match kind {
        MatrixKind::Int8 => value as i32 as u32,
        _ => (value as f32).to_bits(),
    }
}

/// An element to read back and hold against the CPU's value.
pub(super) struct Candidate {
    /// Row and column.
    place: (u32, u32),
    /// The check that pointed at it.
    check: &'static str,
    /// The recomputation's bits and workgroup, where it differed there.
    second: Option<(u32, u32)>,
}

/// Turns the checks' records into located wrong elements: an element whose row and
/// column of its tile both disagree with their checksums, one that is not an integer, or
/// one whose recomputation differs, is read back and held against the CPU's value; a
/// tile with too many wrong rows and columns to try each is named as a wrong tile.
pub(super) fn locate(
    gpu: &mut Gpu,
    kind: MatrixKind,
    seed: u32,
    round: u32,
    (mul, add): (u32, u32),
    records: &[Record],
    record_capacity: u32,
) -> GpuResult<Vec<MatrixMismatch>> {
    let l = gpu.layout;
    let tiles_edge = l.edge / TILE;
    // The recomputation's slot s runs on workgroup s (one dispatch of `sampled` slots).
    let pieces = gpu.pieces;
    let first_workgroup =
        |row: u32, col: u32| l.primary_workgroup(pieces, (row / TILE) * tiles_edge + col / TILE);
    let mut out = Vec::new();
    // (row, column) -> (check, second run's bits and workgroup)
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut add_candidate = |place: (u32, u32), check: &'static str, second: Option<(u32, u32)>| {
        if candidates.len() < LOCATE_MAX && !candidates.iter().any(|c| c.place == place) {
            candidates.push(Candidate {
                place,
                check,
                second,
            });
        }
    };
    for r in records {
        match r.what {
            REC_INVALID => add_candidate((r.a, r.b), "invalid_value", None),
            REC_REDUNDANT => add_candidate(
                (r.a, r.b),
                "redundant_run",
                Some((r.actual, r.workgroup % l.sampled.min(MAX_GROUPS))),
            ),
            _ => {}
        }
    }
    // Rows and columns of each tile that disagree with their checksums.
    let mut tiles: std::collections::BTreeMap<(u32, u32), (Vec<u32>, Vec<u32>)> =
        std::collections::BTreeMap::new();
    for r in records {
        match r.what {
            REC_ROW => tiles.entry((r.a / TILE, r.b)).or_default().0.push(r.a),
            REC_COL => tiles.entry((r.a, r.b / TILE)).or_default().1.push(r.b),
            _ => {}
        }
    }
    for (&(ti, tj), (rows, cols)) in &tiles {
        let (rows, cols): (Vec<u32>, Vec<u32>) = match (rows.is_empty(), cols.is_empty()) {
            // A wrong element whose row sum (or column sum) the error left unchanged:
            // try its whole column (or row) of the tile.
            (true, false) => ((ti * TILE..(ti + 1) * TILE).collect(), cols.clone()),
            (false, true) => (rows.clone(), (tj * TILE..(tj + 1) * TILE).collect()),
            _ => (rows.clone(), cols.clone()),
        };
        if rows.len() * cols.len() > LOCATE_PER_TILE {
            out.push(MatrixMismatch {
                kind,
                round,
                check: "wrong_tile".into(),
                tile: [ti, tj],
                row: None,
                col: None,
                expected: None,
                actual: None,
                at: None,
                actual_bits: None,
                workgroup: l.primary_workgroup(pieces, ti * tiles_edge + tj),
                second_workgroup: None,
                rows_cols_wrong: Some([
                    tiles[&(ti, tj)].0.len() as u32,
                    tiles[&(ti, tj)].1.len() as u32,
                ]),
            });
            continue;
        }
        for &row in &rows {
            for &col in &cols {
                add_candidate((row, col), "checksum", None);
            }
        }
    }
    let places: Vec<(u32, u32)> = candidates.iter().map(|c| c.place).collect();
    let after = RECORDS_AT + record_capacity as usize * RECORD_WORDS;
    let values = gpu.read_elements(&places, after)?;
    // The recomputation's workgroup of each sampled tile.
    let second_of = |row: u32, col: u32| -> Option<u32> {
        let tile = (row / TILE) * tiles_edge + col / TILE;
        (0..l.sampled).find(|&s| (s.wrapping_mul(mul).wrapping_add(add)) & (l.tiles - 1) == tile)
    };
    for (
        Candidate {
            place,
            check,
            second,
        },
        bits,
    ) in candidates.into_iter().zip(values)
    {
        let (row, col) = place;
        let expected = reference_element(seed, l.edge, row, col);
        let good = correct_bits(kind, expected);
        let second_workgroup = second.map(|s| s.1).or_else(|| second_of(row, col));
        let (wrong_bits, workgroup) = if bits != good {
            (bits, first_workgroup(row, col))
        } else if let Some((second_bits, w)) = second.filter(|s| s.0 != good) {
            // Only the recomputation is wrong.
            (second_bits, w)
        } else {
            // A checksum candidate that is right: another element of its row or
            // column is the wrong one.
            continue;
        };
        out.push(MatrixMismatch {
            kind,
            round,
            check: check.into(),
            tile: [row / TILE, col / TILE],
            row: Some(row),
            col: Some(col),
            expected: Some(expected as f64),
            actual: Some(kind.value(wrong_bits)),
            at: None,
            actual_bits: Some(wrong_bits),
            workgroup,
            second_workgroup,
            rows_cols_wrong: None,
        });
    }
    Ok(out)
}
