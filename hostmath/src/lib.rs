//! The host's loops over every byte of a transfer: the PCIe probe's pattern and the host
//! side of its device checksum. They are their own crate so that the workspace's dev
//! profile can build them optimised (`[profile.dev.package.kiln-hostmath]`): unoptimised,
//! a per-word loop over hundreds of MiB was 85% of `kiln bench pcie`'s time in a debug
//! build and a seventh of the test suite's CPU time, while kiln itself compiles three
//! times slower at any optimisation level.

#![forbid(unsafe_code)]

/// Fills `bytes` with a xorshift64 stream from `seed`, eight bytes a step (little-endian;
/// a short tail takes the first bytes of its step).
pub fn fill_xorshift(bytes: &mut [u8], seed: u64) {
    let mut x = seed | 1;
    for chunk in bytes.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

/// The checksum pair the PCIe probe's shader computes over little-endian 32-bit words:
/// the sum of each word times its odd weight `2i + 1`, and the xor of each word plus its
/// index (both wrapping). A trailing partial word is not counted.
pub fn word_checksum(bytes: &[u8]) -> (u32, u32) {
    let mut sum = 0u32;
    let mut mixed = 0u32;
    for (i, w) in bytes.chunks_exact(4).enumerate() {
        let v = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        let i = i as u32;
        sum = sum.wrapping_add(v.wrapping_mul(i.wrapping_mul(2).wrapping_add(1)));
        mixed ^= v.wrapping_add(i);
    }
    (sum, mixed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_weighs_each_word_by_its_place() {
        let mut bytes = Vec::new();
        for v in [1u32, 2, 3] {
            bytes.extend(v.to_le_bytes());
        }
        // 1*1 + 2*3 + 3*5; (1+0) ^ (2+1) ^ (3+2).
        assert_eq!(word_checksum(&bytes), (22, 1 ^ 3 ^ 5));
        // Two words swapped change the sum.
        let mut swapped = bytes.clone();
        swapped[..8].rotate_left(4);
        assert_ne!(word_checksum(&swapped).0, 22);
        // A partial tail is not a word.
        bytes.push(0xFF);
        assert_eq!(word_checksum(&bytes), (22, 1 ^ 3 ^ 5));
    }

    #[test]
    fn the_pattern_is_the_seeds_own_and_covers_a_short_tail() {
        let (mut a, mut b, mut c) = ([0u8; 21], [0u8; 21], [0u8; 21]);
        fill_xorshift(&mut a, 7);
        fill_xorshift(&mut b, 7);
        fill_xorshift(&mut c, 8);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a[16..].iter().any(|&x| x != 0), "the tail is filled");
        // The first step of seed 7, by hand.
        let mut x = 7u64;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        assert_eq!(a[..8], x.to_le_bytes());
    }
}
