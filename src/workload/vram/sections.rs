//! How people read the VRAM test's report (the wrong words, the error map, the text), and
//! the findings its result proves.

use super::*;
use crate::finding::{Bytes, Hex};

/// Where: `at 0x000000000fa0`, or the first of several and how many more.
pub(super) fn places(offsets: &[u64]) -> String {
    match offsets {
        [] => "at places not recorded".into(),
        [one] => format!("at 0x{one:012x}"),
        [first, rest @ ..] => format!("first at 0x{first:012x} and {} more", rest.len()),
    }
}

/// The first eight words that read wrong, each once, in the order found.
fn first_words(v: &VramReport) -> Vec<u64> {
    let mut words: Vec<u64> = Vec::new();
    for r in &v.records {
        if words.len() == 8 {
            break;
        }
        if !words.contains(&r.offset_bytes) {
            words.push(r.offset_bytes);
        }
    }
    words
}

crate::evidence! {
    /// The evidence of `VRAM_IN_SYSTEM_MEMORY`.
    struct InSystemMemory {
        placed_in_system_bytes: Bytes<u64> => "Placed in system RAM",
        allocated_bytes: Bytes<u64> => "Allocated",
    }
}

crate::evidence! {
    /// The evidence of the VRAM test's error findings: the wrong reads, the words of each
    /// retest class, and the first offsets.
    struct WrongWords {
        /// retest class, and the first offsets.
        errors: u64 => "Wrong reads",
        stuck: usize => "Words with stuck bits",
        marginal: usize => "Words that fail only sometimes",
        transfer: usize => "Reads wrong while the cell held the right value",
        address: usize => "Reads that returned another address's data",
        first_offsets: Vec<Hex<u64>> => "First offsets",
    }
}

/// What the VRAM test's errors and their retests prove: stuck bits, a faulty address
/// path, marginal cells, transfer errors, or flips that did not come back.
pub(super) fn found(v: &VramReport, out: &mut Vec<Finding>) {
    if let Some(bytes) = v.sizing.placed_in_system_bytes {
        out.push(finding(
            FindingCode::VramInSystemMemory,
            Severity::Major,
            Confidence::High,
            format!(
                "Windows placed {} of the {} allocated as the card's memory in system RAM (WDDM under memory pressure): that much of the test was of system RAM, not VRAM",
                format_bytes(bytes),
                format_bytes(v.sizing.allocated_bytes)
            ),
            crate::finding::evidence(&InSystemMemory {
                placed_in_system_bytes: Bytes(bytes),
                allocated_bytes: Bytes(v.sizing.allocated_bytes),
            }),
            "close other programs that use the GPU (games, browsers, video) and rerun, or test less with --vram-percent",
        ));
    }
    if v.errors_total == 0 {
        return;
    }
    let count = |class: RetestClass| v.retests.iter().filter(|r| r.class == class).count();
    let stuck = count(RetestClass::StuckAt0)
        + count(RetestClass::StuckAt1)
        + count(RetestClass::StuckMixed);
    let marginal = count(RetestClass::Intermittent) + count(RetestClass::PatternSensitive);
    let transfer = count(RetestClass::Transfer)
        + v.records
            .iter()
            .filter(|r| r.shape == ErrorShape::TransientRead)
            .count();
    let address = v
        .records
        .iter()
        .filter(|r| matches!(r.shape, ErrorShape::Address { .. }))
        .count();
    let evidence = crate::finding::evidence(&WrongWords {
        errors: v.errors_total,
        stuck,
        marginal,
        transfer,
        address,
        first_offsets: first_words(v).iter().map(|v| Hex(*v)).collect(),
    });
    let stuck_offsets: Vec<u64> = v
        .retests
        .iter()
        .filter(|r| {
            matches!(
                r.class,
                RetestClass::StuckAt0 | RetestClass::StuckAt1 | RetestClass::StuckMixed
            )
        })
        .map(|r| r.offset_bytes)
        .collect();
    // The bits the retests found stuck, over every stuck word: a word with bit 3 stuck at
    // 0 and bit 9 at 1 holds two.
    let stuck_bits: u32 = v
        .retests
        .iter()
        .map(|r| (r.stuck_at_0_mask | r.stuck_at_1_mask).count_ones())
        .sum();
    let rma = "RMA the card with this report; the offsets and retest results reproduce the fault";
    if stuck > 0 {
        out.push(finding(
            FindingCode::VramStuckBit,
            Severity::Critical,
            Confidence::High,
            format!(
                "{} {} stuck whatever is written, {}",
                if stuck == 1 {
                    "1 word of memory holds".to_owned()
                } else {
                    format!("{stuck} words of memory hold")
                },
                match stuck_bits {
                    0 | 1 => "a bit".to_owned(),
                    n => format!("{n} bits"),
                },
                places(&stuck_offsets)
            ),
            evidence.clone(),
            rma,
        ));
    }
    if address > 0 {
        out.push(finding(
            FindingCode::VramAddressFault,
            Severity::Critical,
            Confidence::High,
            format!("{address} reads returned another address's data: the address path is faulty"),
            evidence.clone(),
            rma,
        ));
    }
    if marginal > 0 {
        out.push(finding(
            FindingCode::VramMarginal,
            Severity::Major,
            Confidence::Medium,
            format!(
                "{marginal} cells fail only sometimes or only for some patterns: a marginal part"
            ),
            evidence.clone(),
            "rerun at the rma profile; check for memory overclocks; RMA if it repeats",
        ));
    }
    if transfer > 0 {
        out.push(finding(FindingCode::VramTransferError, Severity::Major, Confidence::Medium,
            format!("{transfer} reads were wrong but the cell held the right value: the transfer, not the cell"), evidence.clone(),
            "check for memory overclocks and rerun; RMA if it repeats at stock clocks"));
    }
    if stuck + address + marginal + transfer == 0 {
        let (severity, confidence, code) = if v.errors_total == 1 {
            (
                Severity::Minor,
                Confidence::Low,
                FindingCode::VramTransientError,
            )
        } else {
            (Severity::Major, Confidence::Medium, FindingCode::VramErrors)
        };
        out.push(finding(
            code,
            severity,
            confidence,
            format!(
                "{} that did not come back on retest",
                crate::text::count(v.errors_total, "wrong read")
            ),
            evidence,
            "recheck with more passes (kiln run --profile rma): one flip that never repeats is not yet a hardware call",
        ));
    }
}

/// The wrong words, each with everything a support desk reproduces it from: where (in
/// the tested memory, in GiB, in its buffer), what was written and read, which bits, the
/// test that found it, and what the in-place retest showed.
pub(super) fn wrong_words(v: &VramReport) -> Table {
    // One row per word, in the order they were first found.
    let mut words: Vec<(u64, Vec<&ErrorRecord>)> = Vec::new();
    for r in &v.records {
        match words.iter_mut().find(|(o, _)| *o == r.offset_bytes) {
            Some((_, reads)) => reads.push(r),
            None => words.push((r.offset_bytes, vec![r])),
        }
    }
    Table {
        title: "Failing words".into(),
        noun: crate::workload::fault_noun("vram"),
        place: "word",
        columns: vec![
            "Offset",
            "Buffer + offset",
            "Failing bits",
            "First wrong read (expected → read)",
            "Found first by",
            "Shape",
            "Retest",
            "Stuck bits",
        ],
        rows: words
            .iter()
            .map(|(offset, reads)| {
                let first = reads[0];
                let retest = v.retests.iter().find(|t| t.offset_bytes == *offset);
                let mut bits: Vec<u8> = reads
                    .iter()
                    .flat_map(|r| r.flipped_bits.iter().copied())
                    .collect();
                bits.sort_unstable();
                bits.dedup();
                let bits: Vec<String> = bits.iter().map(u8::to_string).collect();
                TableRow {
                    key: format!("0x{offset:012x}"),
                    count: reads.len() as u64,
                    cells: vec![
                        format!("0x{offset:012x}"),
                        format!("{} + 0x{:x}", first.buffer, first.buffer_offset_bytes),
                        bits.join(" "),
                        format!("0x{:08x} → 0x{:08x}", first.expected, first.actual),
                        format!(
                            "{} pass {} step {}",
                            first.algorithm.name(),
                            first.pass,
                            first.step
                        ),
                        word_shape(first.shape, bits.len()),
                        retest.map_or("not retested".into(), |t| t.class.word().into()),
                        retest.map_or("-".into(), |t| {
                            stuck_bits(t.stuck_at_0_mask, t.stuck_at_1_mask)
                        }),
                    ],
                }
            })
            .collect(),
        total: v.errors_total,
    }
}

/// A word's shape from every bit that read wrong in it over all its reads (the "Failing
/// bits" beside it), not its first read's alone: a word whose reads flipped three bits is
/// never "single bit". Shapes that are not a count of bits (an address fault, a whole
/// word, a transient read) stay as the first read said them.
fn word_shape(first: ErrorShape, failing_bits: usize) -> String {
    match first {
        ErrorShape::SingleBit | ErrorShape::MultiBit if failing_bits > 1 => {
            format!("multi-bit ({failing_bits} bits)")
        }
        ErrorShape::SingleBit | ErrorShape::MultiBit if failing_bits == 1 => {
            ErrorShape::SingleBit.word()
        }
        other => other.word(),
    }
}

/// The bits a retest found stuck, in words: `bit 3 at 0, bit 9 at 1`.
pub(super) fn stuck_bits(at_0_mask: u32, at_1_mask: u32) -> String {
    let mut said: Vec<(u32, u8)> = (0..32)
        .filter(|b| at_0_mask >> b & 1 == 1)
        .map(|b| (b, 0))
        .chain((0..32).filter(|b| at_1_mask >> b & 1 == 1).map(|b| (b, 1)))
        .collect();
    said.sort_unstable();
    if said.is_empty() {
        return "none".into();
    }
    said.iter()
        .map(|(b, v)| format!("bit {b} at {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Wrong words: where in the tested memory (x), by the pass and step that found them (y).
pub(super) fn error_map(v: &VramReport) -> Section {
    let mut steps: Vec<(u32, u32)> = v.records.iter().map(|r| (r.pass, r.step)).collect();
    steps.sort_unstable();
    steps.dedup();
    Section::OffsetMap {
        title: "VRAM error map: offset in the tested memory (x) against pass and step (y)".into(),
        span_bytes: v.sizing.allocated_bytes.max(1),
        rows: steps.len(),
        points: v
            .records
            .iter()
            .map(|r| OffsetPoint {
                offset_bytes: r.offset_bytes,
                row: steps
                    .iter()
                    .position(|s| *s == (r.pass, r.step))
                    .unwrap_or(0),
                title: format!(
                    "0x{:x}: expected 0x{:08x}, read 0x{:08x}",
                    r.offset_bytes, r.expected, r.actual
                ),
            })
            .collect(),
        none: "no wrong reads".into(),
    }
}

/// The text report's lines: coverage, passes, rates, and the errors with their first
/// records and retest classes.
pub(super) fn text_lines(v: &VramReport) -> Vec<String> {
    let s = &v.sizing;
    let c = &v.coverage;
    let t = &v.throughput;
    let mut out = vec![format!(
        "tested {} = {:.1}% of sized, {:.1}% of the {} heap, {:.1}% of {} free at start ({})",
        format_bytes(c.tested_bytes),
        c.of_sized * 100.0,
        c.of_heap * 100.0,
        format_bytes(s.heap_bytes),
        c.of_free * 100.0,
        format_bytes(s.free_at_start_bytes),
        s.free_source
    )];
    let passes: Vec<String> = v
        .algorithms
        .iter()
        .map(|a| format!("{} x{}", a.algorithm.name(), a.passes_completed))
        .collect();
    out.push(format!("passes {}", passes.join(", ")));
    out.push(format!(
        "write {:.2} GiB/s, verify {:.2} GiB/s, combined {:.2} GiB/s per wall second ({})",
        t.write.gib_per_s, t.verify.gib_per_s, t.combined_gib_per_wall_s, t.timing_source
    ));
    if v.errors_total > 0 {
        out.push(format!(
            "{}, {} recorded; flips 0->1 {}, 1->0 {}",
            crate::text::count(v.errors_total, "wrong read"),
            v.records.len(),
            v.histograms.zero_to_one,
            v.histograms.one_to_zero
        ));
        let bits: Vec<String> = v
            .histograms
            .bit_position
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(b, n)| format!("bit{b}:{n}"))
            .collect();
        out.push(format!("failing bits {}", bits.join(" ")));
        for r in v.records.iter().take(10) {
            out.push(format!(
                "offset 0x{:012x} (buffer {} +0x{:x}) expected 0x{:08x} read 0x{:08x} {} [{} pass {} step {}]",
                r.offset_bytes,
                r.buffer,
                r.buffer_offset_bytes,
                r.expected,
                r.actual,
                r.shape.word(),
                r.algorithm.name(),
                r.pass,
                r.step
            ));
        }
        if v.records.len() > 10 {
            out.push(format!(
                "... {} more records in report.json",
                v.records.len() - 10
            ));
        }
        let mut classes: Vec<(String, usize)> = Vec::new();
        for r in &v.retests {
            let name = r.class.word().to_owned();
            match classes.iter_mut().find(|(n, _)| *n == name) {
                Some((_, n)) => *n += 1,
                None => classes.push((name, 1)),
            }
        }
        if !classes.is_empty() {
            let list: Vec<String> = classes.iter().map(|(n, c)| format!("{c} {n}")).collect();
            out.push(format!("retested words: {}", list.join(", ")));
        }
    }
    if let Some(e) = &v.run.device_error {
        out.push(format!("device error: {e}"));
    }
    if let Some(s) = &v.run.stopped_early {
        out.push(format!("stopped early: {s}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_s_shape_counts_every_bit_that_read_wrong_in_it() {
        // Its first read flipped one bit, its later reads two more: three failing bits.
        assert_eq!(word_shape(ErrorShape::SingleBit, 3), "multi-bit (3 bits)");
        // The near miss: one bit over every read is a single bit.
        assert_eq!(word_shape(ErrorShape::SingleBit, 1), "single bit");
        assert_eq!(word_shape(ErrorShape::WholeWord, 32), "whole word");
    }
}
