//! The VRAM test's records in `events.jsonl` and `report.json`: a wrong word, located and
//! classified, and the in-place retest of one. They are the evidence's schema, so they
//! live here; the VRAM workload (`crate::workload::vram`) fills them in.

use serde::{Deserialize, Serialize};

/// A VRAM test algorithm, selectable by name. What each one does (its steps) is the
/// workload's: `crate::workload::vram::algorithm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Algorithm {
    /// Each word holds a hash of its own address; the seed changes every pass.
    OwnAddress,
    /// Moving inversions over 0/1 and random backgrounds, ascending and descending.
    MovingInversions,
    /// Modulo-20: the pattern at one residue of 20, its complement elsewhere, all 20 offsets.
    #[serde(rename = "modulo-20")]
    Modulo20,
    /// A counter-based pseudo-random sequence, then its complement.
    Random,
    /// Data backgrounds: 0x55, 0x33, 0x0F, 0x00FF, 0x0000FFFF words and their complements.
    Backgrounds,
    /// Fill, idle with no access, verify; then the same with the complement.
    Retention,
}

impl Algorithm {
    /// The algorithm's name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::OwnAddress => "own-address",
            Algorithm::MovingInversions => "moving-inversions",
            Algorithm::Modulo20 => "modulo-20",
            Algorithm::Random => "random",
            Algorithm::Backgrounds => "backgrounds",
            Algorithm::Retention => "retention",
        }
    }
}

/// The shape of a wrong word, from the values alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "shape")]
pub enum ErrorShape {
    /// One bit flipped.
    SingleBit,
    /// Several bits flipped.
    MultiBit,
    /// The word read as all zeros or all ones (EDC or controller, not one cell).
    WholeWord,
    /// The word holds another address's pattern: an address (decoder or bus) fault.
    Address {
        /// Absolute byte offset the value belongs to.
        source_offset_bytes: u64,
    },
    /// A read in the span went wrong but a re-read of the whole span was right.
    TransientRead,
}

impl ErrorShape {
    /// The shape in words (`single bit`).
    pub fn word(&self) -> String {
        match self {
            ErrorShape::SingleBit => "single bit".into(),
            ErrorShape::MultiBit => "multi-bit".into(),
            ErrorShape::WholeWord => "whole word".into(),
            ErrorShape::Address {
                source_offset_bytes,
            } => format!("address (holds 0x{source_offset_bytes:x}'s pattern)"),
            ErrorShape::TransientRead => "transient read".into(),
        }
    }
}

/// What retesting a failing word in place showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetestClass {
    /// Some bits always read 0, whatever was written.
    StuckAt0,
    /// Some bits always read 1, whatever was written.
    StuckAt1,
    /// Some bits stuck at 0 and others at 1.
    StuckMixed,
    /// Fails for some written values only, not explained by stuck bits.
    PatternSensitive,
    /// The same value read back differently on repeated reads.
    Intermittent,
    /// The cell held the right value; the first read went wrong on the way (bus, EDC).
    Transfer,
    /// The stored value was wrong but every rewrite reads back right: a one-time flip.
    NotReproduced,
}

impl RetestClass {
    /// The class in words (`stuck at 0`).
    pub fn word(self) -> &'static str {
        match self {
            RetestClass::StuckAt0 => "stuck at 0",
            RetestClass::StuckAt1 => "stuck at 1",
            RetestClass::StuckMixed => "stuck at 0 and 1",
            RetestClass::PatternSensitive => "pattern-sensitive",
            RetestClass::Intermittent => "intermittent",
            RetestClass::Transfer => "transfer (the cell was right)",
            RetestClass::NotReproduced => "not reproduced",
        }
    }
}

/// One written value and what repeated reads returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trial {
    /// Value written.
    pub written: u32,
    /// Values read, in order.
    pub reads: Vec<u32>,
}

/// A wrong word, located and classified.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorRecord {
    /// Byte offset in the tested memory as a whole (buffers laid end to end).
    pub offset_bytes: u64,
    /// Test buffer index.
    pub buffer: u32,
    /// Byte offset within that buffer.
    pub buffer_offset_bytes: u64,
    /// What the word should hold.
    pub expected: u32,
    /// What was read.
    pub actual: u32,
    /// Positions of the flipped bits.
    pub flipped_bits: Vec<u8>,
    /// What the values say about the fault.
    #[serde(flatten)]
    pub shape: ErrorShape,
    /// Algorithm.
    pub algorithm: Algorithm,
    /// Pass, from 0.
    pub pass: u32,
    /// Step within the pass.
    pub step: u32,
    /// The pattern, described.
    pub pattern: String,
    /// Transient reads: how many 16-byte elements the span covered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_elements: Option<u32>,
}

/// The in-place retest of one failing word.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetestResult {
    /// Byte offset in the tested memory.
    pub offset_bytes: u64,
    /// What the word should have held.
    pub expected: u32,
    /// What the test read.
    pub actual: u32,
    /// What the retest showed.
    pub class: RetestClass,
    /// Bits that always read 0.
    pub stuck_at_0_mask: u32,
    /// Bits that always read 1.
    pub stuck_at_1_mask: u32,
    /// Reads of the word as found, before any rewrite.
    pub rereads: Vec<u32>,
    /// Rewrites with several patterns and what each read back.
    pub trials: Vec<Trial>,
}
