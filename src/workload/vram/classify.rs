//! What the shape of one wrong word says, and what its in-place retest says.

use serde::{Deserialize, Serialize};

use super::pattern::Pattern;

// What the shapes and retest classes are named on disk is the evidence's schema, defined
// with its records; how a word is classified is here.
pub use crate::evidence::vram::{ErrorShape, RetestClass, Trial};

/// Address faults flip few address bits; more than this and a decoded "source" is
/// far more likely a coincidence of a data error.
const MAX_ADDRESS_BITS: u32 = 4;

/// Classifies a wrong word by its values.
pub fn shape(
    pattern: &Pattern,
    word: u64,
    expected: u32,
    actual: u32,
    tested_words: u64,
) -> ErrorShape {
    let flipped = (expected ^ actual).count_ones();
    if flipped == 1 {
        return ErrorShape::SingleBit;
    }
    if let Some(source) = pattern.source_of(word, actual)
        && source != word
        && source < tested_words
        && (source ^ word).count_ones() <= MAX_ADDRESS_BITS
    {
        return ErrorShape::Address {
            source_offset_bytes: source * 4,
        };
    }
    if actual == 0 || actual == u32::MAX {
        return ErrorShape::WholeWord;
    }
    ErrorShape::MultiBit
}

/// The verdict of a retest, with the masks that justify it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetestVerdict {
    /// The class.
    pub class: RetestClass,
    /// Bits that always read 0.
    pub stuck_at_0_mask: u32,
    /// Bits that always read 1.
    pub stuck_at_1_mask: u32,
}

/// Classifies a retest: `rereads` are reads of the word as found (before any rewrite),
/// `trials` the rewrites with several patterns. `found_expected` is what the word should
/// hold as found; None when the test itself already overwrote it (a verify-then-invert
/// sweep), so that the rereads can only show whether repeated reads agree.
pub fn classify(found_expected: Option<u32>, rereads: &[u32], trials: &[Trial]) -> RetestVerdict {
    let verdict = |class| RetestVerdict {
        class,
        stuck_at_0_mask: 0,
        stuck_at_1_mask: 0,
    };
    if let Some(expected) = found_expected {
        let right = rereads.iter().filter(|&&v| v == expected).count();
        if !rereads.is_empty() && right == rereads.len() {
            return verdict(RetestClass::Transfer);
        }
        if right > 0 {
            return verdict(RetestClass::Intermittent);
        }
    }
    if rereads.windows(2).any(|w| w[0] != w[1]) {
        return verdict(RetestClass::Intermittent);
    }
    if trials
        .iter()
        .any(|t| t.reads.windows(2).any(|w| w[0] != w[1]))
    {
        return verdict(RetestClass::Intermittent);
    }
    let failing: Vec<&Trial> = trials
        .iter()
        .filter(|t| t.reads.first().is_some_and(|&r| r != t.written))
        .collect();
    if failing.is_empty() {
        return verdict(RetestClass::NotReproduced);
    }
    let stuck_1 = trials.iter().fold(u32::MAX, |m, t| m & t.reads[0]);
    let stuck_0 = trials.iter().fold(u32::MAX, |m, t| m & !t.reads[0]);
    let explained = trials
        .iter()
        .all(|t| ((t.written | stuck_1) & !stuck_0) == t.reads[0]);
    let class = match (explained, stuck_0 != 0, stuck_1 != 0) {
        (true, true, false) => RetestClass::StuckAt0,
        (true, false, true) => RetestClass::StuckAt1,
        (true, true, true) => RetestClass::StuckMixed,
        _ => RetestClass::PatternSensitive,
    };
    RetestVerdict {
        class,
        stuck_at_0_mask: if explained { stuck_0 } else { 0 },
        stuck_at_1_mask: if explained { stuck_1 } else { 0 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trials(f: impl Fn(u32) -> u32) -> Vec<Trial> {
        [0u32, u32::MAX, 0x5555_5555, 0xAAAA_AAAA]
            .iter()
            .map(|&w| Trial {
                written: w,
                reads: vec![f(w); 3],
            })
            .collect()
    }

    #[test]
    fn classes_follow_the_reads() {
        let value = 0x1234_5678;
        let bad = value ^ 0x10;
        let e = Some(value);
        let clean = trials(|w| w);
        assert_eq!(
            classify(e, &[value, value], &clean).class,
            RetestClass::Transfer
        );
        assert_eq!(
            classify(e, &[bad, value], &clean).class,
            RetestClass::Intermittent
        );
        assert_eq!(
            classify(e, &[bad, bad], &clean).class,
            RetestClass::NotReproduced
        );
        // A word the test already overwrote cannot show a transfer error.
        assert_eq!(
            classify(None, &[value, value], &clean).class,
            RetestClass::NotReproduced
        );
        assert_eq!(
            classify(None, &[1, 2], &clean).class,
            RetestClass::Intermittent
        );
        let v = classify(e, &[bad, bad], &trials(|w| w | 0x100));
        assert_eq!((v.class, v.stuck_at_1_mask), (RetestClass::StuckAt1, 0x100));
        let v = classify(None, &[bad, bad], &trials(|w| w & !0x8000_0000));
        assert_eq!(
            (v.class, v.stuck_at_0_mask),
            (RetestClass::StuckAt0, 0x8000_0000)
        );
        let v = classify(e, &[bad, bad], &trials(|w| (w | 1) & !2));
        assert_eq!(v.class, RetestClass::StuckMixed);
        let sensitive = trials(|w| if w == 0x5555_5555 { w ^ 0x4 } else { w });
        assert_eq!(
            classify(e, &[bad, bad], &sensitive).class,
            RetestClass::PatternSensitive
        );
        let mut flaky = trials(|w| w);
        flaky[1].reads[2] ^= 1;
        assert_eq!(
            classify(e, &[bad, bad], &flaky).class,
            RetestClass::Intermittent
        );
    }

    #[test]
    fn shapes_follow_the_values() {
        let p = Pattern::address(3);
        let w = 1000u64;
        let e = p.word(w);
        assert_eq!(shape(&p, w, e, e ^ 0x8, 1 << 20), ErrorShape::SingleBit);
        assert_eq!(
            shape(&p, w, e, e ^ 0x8000_0101, 1 << 20),
            ErrorShape::MultiBit
        );
        assert_eq!(
            shape(&p, w, e, p.word(w ^ 64), 1 << 20),
            ErrorShape::Address {
                source_offset_bytes: (w ^ 64) * 4
            }
        );
        let c = Pattern::constant(0x5555_5555);
        assert_eq!(shape(&c, w, 0x5555_5555, 0, 1 << 20), ErrorShape::WholeWord);
    }
}
