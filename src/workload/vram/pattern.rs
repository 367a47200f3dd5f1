//! Test patterns, as the shaders generate them and as the host recomputes them: to know
//! what a word should hold, and to decode which address a wrong value came from.

use serde::{Deserialize, Serialize};

/// Pattern kinds, numbered as the shaders' `PATTERN` specialization constant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum PatternKind {
    /// The same word everywhere.
    Const {
        /// The word.
        value: u32,
    },
    /// A cheap bijective hash of the word's own address.
    Address {
        /// Changes every pass, so every bit toggles between passes.
        seed: u64,
    },
    /// A counter-based pseudo-random sequence.
    Random {
        /// Seed of the sequence.
        seed: u64,
    },
    /// `value` where `index % 20 == offset`, its complement elsewhere.
    Mod20 {
        /// The pattern word.
        value: u32,
        /// Which residue gets the pattern.
        offset: u32,
    },
}

/// A pattern, optionally complemented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pattern {
    /// What generates each word.
    #[serde(flatten)]
    pub kind: PatternKind,
    /// True when every word is complemented.
    pub invert: bool,
}

const ADDRESS_MUL: u32 = 0x9E37_79B1;
const RANDOM_MUL_A: u32 = 0x7FEB_352D;
const RANDOM_MUL_B: u32 = 0x846C_A68B;

impl Pattern {
    /// A constant pattern.
    pub fn constant(value: u32) -> Pattern {
        Pattern {
            kind: PatternKind::Const { value },
            invert: false,
        }
    }

    /// The own-address pattern for `seed`.
    pub fn address(seed: u64) -> Pattern {
        Pattern {
            kind: PatternKind::Address { seed },
            invert: false,
        }
    }

    /// The random-sequence pattern for `seed`.
    pub fn random(seed: u64) -> Pattern {
        Pattern {
            kind: PatternKind::Random { seed },
            invert: false,
        }
    }

    /// The modulo-20 pattern.
    pub fn mod20(value: u32, offset: u32) -> Pattern {
        Pattern {
            kind: PatternKind::Mod20 { value, offset },
            invert: false,
        }
    }

    /// The complement of this pattern.
    pub fn inverted(self) -> Pattern {
        Pattern {
            invert: !self.invert,
            ..self
        }
    }

    /// The shaders' `PATTERN` specialization constant.
    pub fn spec_id(&self) -> u32 {
        match self.kind {
            PatternKind::Const { .. } => 0,
            PatternKind::Address { .. } => 1,
            PatternKind::Random { .. } => 2,
            PatternKind::Mod20 { .. } => 3,
        }
    }

    /// The constant word, when every word is the same.
    pub fn constant_word(&self) -> Option<u32> {
        match self.kind {
            PatternKind::Const { value } => Some(value ^ self.invert_mask()),
            _ => None,
        }
    }

    /// XOR applied to every word.
    pub fn invert_mask(&self) -> u32 {
        if self.invert { u32::MAX } else { 0 }
    }

    /// The shader key for words whose absolute index has high half `hi`.
    pub fn key(&self, hi: u32) -> u32 {
        match self.kind {
            PatternKind::Const { value } | PatternKind::Mod20 { value, .. } => value,
            PatternKind::Address { seed } | PatternKind::Random { seed } => {
                splitmix64(seed ^ u64::from(hi).wrapping_mul(0x9E37_79B9_7F4A_7C15)) as u32
            }
        }
    }

    /// The word at absolute word index `index`, exactly as the shaders write it.
    pub fn word(&self, index: u64) -> u32 {
        let lo = index as u32;
        let key = self.key((index >> 32) as u32);
        let raw = match self.kind {
            PatternKind::Const { value } => value,
            PatternKind::Address { .. } => hash_address(lo, key),
            PatternKind::Random { .. } => hash_random(lo, key),
            PatternKind::Mod20 { value, offset } => {
                if index % 20 == u64::from(offset) {
                    value
                } else {
                    !value
                }
            }
        };
        raw ^ self.invert_mask()
    }

    /// For patterns unique per address: the index, in the same 2^32-word block as
    /// `index`, whose pattern word is `value`. Tells where a wrongly read word came from.
    pub fn source_of(&self, index: u64, value: u32) -> Option<u64> {
        let key = self.key((index >> 32) as u32);
        let raw = value ^ self.invert_mask();
        let lo = match self.kind {
            PatternKind::Address { .. } => unhash_address(raw, key),
            PatternKind::Random { .. } => unhash_random(raw, key),
            _ => return None,
        };
        Some((index & !0xFFFF_FFFF) | u64::from(lo))
    }

    /// A short human description (`own-address seed 0x…`, `const 0x55555555`).
    pub fn describe(&self) -> String {
        let base = match self.kind {
            PatternKind::Const { value } => format!("constant 0x{value:08x}"),
            PatternKind::Address { seed } => format!("own-address seed 0x{seed:016x}"),
            PatternKind::Random { seed } => format!("random seed 0x{seed:016x}"),
            PatternKind::Mod20 { value, offset } => format!("modulo-20 0x{value:08x} at {offset}"),
        };
        if self.invert {
            format!("complement of {base}")
        } else {
            base
        }
    }
}

/// The 64-bit finaliser of SplitMix64: spreads a seed over all bits.
pub fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn hash_address(lo: u32, key: u32) -> u32 {
    let x = lo.wrapping_mul(ADDRESS_MUL).wrapping_add(key);
    x ^ (x >> 15)
}

fn unhash_address(y: u32, key: u32) -> u32 {
    let x = unshift_right(y, 15);
    x.wrapping_sub(key).wrapping_mul(mod_inverse(ADDRESS_MUL))
}

fn hash_random(lo: u32, key: u32) -> u32 {
    let mut x = lo ^ key;
    x ^= x >> 16;
    x = x.wrapping_mul(RANDOM_MUL_A);
    x ^= x >> 15;
    x = x.wrapping_mul(RANDOM_MUL_B);
    x ^ (x >> 16)
}

fn unhash_random(y: u32, key: u32) -> u32 {
    let mut x = unshift_right(y, 16);
    x = x.wrapping_mul(mod_inverse(RANDOM_MUL_B));
    x = unshift_right(x, 15);
    x = x.wrapping_mul(mod_inverse(RANDOM_MUL_A));
    x = unshift_right(x, 16);
    x ^ key
}

/// Inverts `y = x ^ (x >> s)`.
fn unshift_right(y: u32, s: u32) -> u32 {
    let mut x = y;
    let mut shift = s;
    while shift < 32 {
        x = y ^ (x >> s);
        shift += s;
    }
    y ^ (x >> s)
}

/// Multiplicative inverse of an odd number modulo 2^32 (Newton's iteration).
const fn mod_inverse(a: u32) -> u32 {
    let mut x = a;
    let mut i = 0;
    while i < 5 {
        x = x.wrapping_mul(2u32.wrapping_sub(a.wrapping_mul(x)));
        i += 1;
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_invert() {
        for key in [0u32, 1, 0xDEAD_BEEF, u32::MAX] {
            for lo in [0u32, 1, 2, 12345, 0x8000_0000, u32::MAX] {
                assert_eq!(unhash_address(hash_address(lo, key), key), lo);
                assert_eq!(unhash_random(hash_random(lo, key), key), lo);
            }
        }
        assert_eq!(0x9E37_79B1u32.wrapping_mul(mod_inverse(0x9E37_79B1)), 1);
    }

    #[test]
    fn source_decodes_a_neighbours_word() {
        for p in [
            Pattern::address(7),
            Pattern::random(9),
            Pattern::random(9).inverted(),
        ] {
            let at = (3u64 << 32) + 1000;
            let from = at + 64;
            assert_eq!(p.source_of(at, p.word(from)), Some(from));
            assert_eq!(p.source_of(at, p.word(at)), Some(at));
        }
        assert_eq!(Pattern::constant(5).source_of(0, 5), None);
    }

    #[test]
    fn address_pattern_is_unique_and_toggles_bits() {
        let p = Pattern::address(1);
        let words: std::collections::HashSet<u32> = (0..100_000u64).map(|i| p.word(i)).collect();
        assert_eq!(words.len(), 100_000);
        let q = Pattern::address(2);
        let or_of_changes = (0..64u64).fold(0u32, |acc, i| acc | (p.word(i) ^ q.word(i)));
        assert_eq!(
            or_of_changes,
            u32::MAX,
            "a new seed toggles every bit somewhere"
        );
    }

    #[test]
    fn mod20_places_the_pattern_on_its_residue() {
        let p = Pattern::mod20(0x1234_5678, 3);
        assert_eq!(p.word(3), 0x1234_5678);
        assert_eq!(p.word(23), 0x1234_5678);
        assert_eq!(p.word(4), !0x1234_5678);
        assert_eq!(p.inverted().word(3), !0x1234_5678);
    }
}
