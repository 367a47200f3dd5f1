//! The results buffer the VRAM shaders fill, as the host reads it. Mirrors the
//! `R_*` constants of `shaders/vram_common.glsl`. The shaders keep it in device-local
//! memory (each workgroup adds its totals once); the host reads a copy made at the end
//! of each batch.

/// Word index of the u64 count of failing words.
pub const R_COUNT: usize = 0;
/// Word index of the count of record slots claimed.
pub const R_SLOTS: usize = 2;
/// Word index of the 33 u64 bins of the flipped-bit-count histogram.
pub const R_NBITS: usize = 4;
/// Word index of the 32 u64 bins of the failing-bit-position histogram.
pub const R_BITPOS: usize = 70;
/// Word index of the u64 count of bits read 1 that were written 0.
pub const R_UP: usize = 134;
/// Word index of the u64 count of bits read 0 that were written 1.
pub const R_DOWN: usize = 136;
/// Word index of the first record.
pub const R_RECORDS: usize = 144;
/// Words per record.
pub const REC_WORDS: usize = 8;
/// Record flag: the first read differed somewhere in the span, a re-read did not.
pub const FLAG_TRANSIENT: u32 = 1;

// The histograms fit where the next field starts: 33 and 32 u64 bins.
const _: () = assert!(R_NBITS + 33 * 2 == R_BITPOS && R_BITPOS + 32 * 2 <= R_UP);

/// One record as the shader writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawRecord {
    /// Absolute word index.
    pub word: u64,
    /// What the word should hold.
    pub expected: u32,
    /// What was read.
    pub actual: u32,
    /// Test buffer index.
    pub buffer: u32,
    /// `FLAG_*` bits.
    pub flags: u32,
    /// Transient records: elements in the span.
    pub span_elements: u32,
    /// Transient records: element stride within the span.
    pub span_stride: u32,
}

/// Counters of one batch, read back from the results buffer.
#[derive(Debug, Clone)]
pub struct BatchCounters {
    /// Failing words.
    pub errors: u64,
    /// Histogram of flipped bits per failing word (index = bits flipped).
    pub flipped_bits: [u64; 33],
    /// Histogram of failing bit positions.
    pub bit_position: [u64; 32],
    /// Bits that read 1 but were written 0.
    pub zero_to_one: u64,
    /// Bits that read 0 but were written 1.
    pub one_to_zero: u64,
    /// Records kept, at most the capacity given to the batch.
    pub records: Vec<RawRecord>,
}

impl Default for BatchCounters {
    fn default() -> Self {
        BatchCounters {
            errors: 0,
            flipped_bits: [0; 33],
            bit_position: [0; 32],
            zero_to_one: 0,
            one_to_zero: 0,
            records: Vec::new(),
        }
    }
}

fn u64_at(r: &[u32], at: usize) -> u64 {
    u64::from(r[at]) | (u64::from(r[at + 1]) << 32)
}

/// Reads a batch's counters and up to `capacity` records.
pub fn read_batch(r: &[u32], capacity: usize) -> BatchCounters {
    let mut c = BatchCounters {
        errors: u64_at(r, R_COUNT),
        zero_to_one: u64_at(r, R_UP),
        one_to_zero: u64_at(r, R_DOWN),
        ..Default::default()
    };
    for (i, bin) in c.flipped_bits.iter_mut().enumerate() {
        *bin = u64_at(r, R_NBITS + 2 * i);
    }
    for (i, bin) in c.bit_position.iter_mut().enumerate() {
        *bin = u64_at(r, R_BITPOS + 2 * i);
    }
    let kept = (r[R_SLOTS] as usize).min(capacity);
    c.records = (0..kept)
        .map(|i| {
            let at = R_RECORDS + i * REC_WORDS;
            RawRecord {
                word: u64_at(r, at),
                expected: r[at + 2],
                actual: r[at + 3],
                buffer: r[at + 4],
                flags: r[at + 5],
                span_elements: r[at + 6],
                span_stride: r[at + 7],
            }
        })
        .collect();
    c
}

#[cfg(test)]
mod shader_mirror {
    use super::*;
    use crate::workload::vram::pattern::Pattern;

    /// The shaders' own text, where the layout and the pattern numbers are written.
    const COMMON: &str = include_str!("../../../shaders/vram_common.glsl");

    /// The value of `const uint NAME = Nu;` in the shader source.
    fn shader_const(name: &str) -> u64 {
        let line = COMMON
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("const uint {name} =")))
            .unwrap_or_else(|| panic!("vram_common.glsl has no `const uint {name}`"));
        let value = line
            .split('=')
            .nth(1)
            .and_then(|v| v.split(';').next())
            .map(|v| v.trim().trim_end_matches('u'))
            .unwrap_or_default();
        value
            .parse()
            .unwrap_or_else(|_| panic!("`{line}` is not a number"))
    }

    #[test]
    fn the_results_layout_matches_the_shaders_word_for_word() {
        for (name, rust) in [
            ("R_COUNT", R_COUNT as u64),
            ("R_SLOTS", R_SLOTS as u64),
            ("R_NBITS", R_NBITS as u64),
            ("R_BITPOS", R_BITPOS as u64),
            ("R_UP", R_UP as u64),
            ("R_DOWN", R_DOWN as u64),
            ("R_RECORDS", R_RECORDS as u64),
            ("REC_WORDS", REC_WORDS as u64),
            ("FLAG_TRANSIENT", u64::from(FLAG_TRANSIENT)),
        ] {
            assert_eq!(shader_const(name), rust, "{name}");
        }
    }

    #[test]
    fn the_pattern_numbers_match_the_shaders() {
        for (name, pattern) in [
            ("PATTERN_CONST", Pattern::constant(7)),
            ("PATTERN_ADDRESS", Pattern::address(7)),
            ("PATTERN_RANDOM", Pattern::random(7)),
            ("PATTERN_MOD20", Pattern::mod20(7, 3)),
        ] {
            assert_eq!(shader_const(name), u64::from(pattern.spec_id()), "{name}");
        }
    }
}
