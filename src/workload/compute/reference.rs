//! The CPU's arithmetic: what each work item must compute, the shuffle that moves it to
//! another compute unit, and when two results agree.

use super::*;

/// The multiplier and offset of the shuffle: an odd multiplier is a bijection mod 2^k.
pub(super) fn shuffle(round: u32, items: u32) -> (u32, u32) {
    let mul = (0x9E37_79B1u32.wrapping_add(round.wrapping_mul(2))) | 1;
    (
        mul,
        (items / 2).wrapping_add(round.wrapping_mul(0x61C8_8647)) & (items - 1),
    )
}

/// Which invocation computed `item` in the shuffled run.
pub(super) fn shuffled_invocation(item: u32, round: u32, items: u32) -> u32 {
    let (mul, add) = shuffle(round, items);
    // Invert (inv * mul + add) mod items with the multiplicative inverse of mul.
    let mut inverse = mul;
    for _ in 0..5 {
        inverse = inverse.wrapping_mul(2u32.wrapping_sub(mul.wrapping_mul(inverse)));
    }
    item.wrapping_sub(add).wrapping_mul(inverse) & (items - 1)
}

/// Where a planted fault goes into a chain: after this many multiply-add blocks, this
/// XOR on the first lane of the first chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainFault {
    /// Blocks of UNROLL multiply-adds before the fault.
    pub after_blocks: u32,
    /// The bits flipped.
    pub xor: u32,
}

/// What compute_fma.comp computes for `item`, on the CPU: the fold of its chains (what two
/// runs compare bit for bit) and the chains' values (what the CPU check compares: their
/// fp32 sum, or for int32 the fold again). `fault` plants an error in the middle of the
/// first chain, as the shader's `inject_step` does.
pub fn reference(
    kind: ComputeKind,
    item: u32,
    seed: u32,
    iterations: u32,
    chains: u32,
    fault: Option<ChainFault>,
) -> ([u32; 4], [u32; 4]) {
    const FOLD: u32 = 0x9E37_79B1;
    let h = hash(item ^ seed);
    let mut fold = [0u32; 4];
    let mix = |fold: &mut [u32; 4], v: [u32; 4]| {
        for c in 0..4 {
            fold[c] = (fold[c] ^ v[c]).wrapping_mul(FOLD);
        }
    };
    match kind {
        ComputeKind::Fp32 | ComputeKind::Fp16 => {
            let a = [0.999_023_44f32, 0.998_046_9, 0.997_070_3, 0.996_093_75];
            let scale = 1.0 + (h & 7) as f32;
            let b = [
                0.000_976_562_5f32 * scale,
                0.001_953_125 * scale,
                0.002_929_687_5 * scale,
                0.003_906_25 * scale,
            ];
            let mut total = [0f32; 4];
            // One sum per lane over every chain and block, as the shader keeps it.
            let mut sum = [0u32; 4];
            for chain in 0..chains {
                let g = hash(h.wrapping_add(chain));
                let mut x = [
                    (g & 0xFFFF) as f32 / 65536.0,
                    (g >> 16) as f32 / 65536.0,
                    ((g >> 8) & 0xFFFF) as f32 / 65536.0,
                    (g & 0xFF) as f32 / 65536.0,
                ];
                for block in 0..iterations {
                    for _ in 0..UNROLL {
                        for c in 0..4 {
                            x[c] = x[c].mul_add(a[c], b[c]);
                        }
                    }
                    if chain == 0
                        && let Some(f) = fault.filter(|f| f.after_blocks == block)
                    {
                        x[0] = f32::from_bits(x[0].to_bits() ^ f.xor);
                    }
                    for c in 0..4 {
                        sum[c] = sum[c].wrapping_add(x[c].to_bits());
                    }
                }
                for c in 0..4 {
                    total[c] += x[c];
                }
            }
            (sum.map(|s| s.wrapping_mul(FOLD)), total.map(f32::to_bits))
        }
        ComputeKind::Int32 => {
            let a = [1_664_525u32, 22_695_477, 1_103_515_245, 134_775_813];
            let b = [1_013_904_223u32, 1, 12345, 1].map(|v: u32| v.wrapping_add(h & 0xFF));
            for chain in 0..chains {
                let g = hash(h.wrapping_add(chain));
                let mut x = [
                    g,
                    g ^ 0x9E37_79B9,
                    g.wrapping_mul(3),
                    g.wrapping_add(0x7F4A_7C15),
                ];
                for block in 0..iterations {
                    for _ in 0..UNROLL {
                        for c in 0..4 {
                            x[c] = x[c].wrapping_mul(a[c]).wrapping_add(b[c]);
                        }
                    }
                    if chain == 0
                        && let Some(f) = fault.filter(|f| f.after_blocks == block)
                    {
                        x[0] ^= f.xor;
                    }
                }
                mix(&mut fold, x);
            }
            (fold, fold)
        }
    }
}

/// True when a GPU result matches the CPU's: bit-exact for integers; for fp32 within
/// a relative 1e-5 (the chain contracts, so fused and unfused rounding stay that close).
pub(super) fn agrees(kind: ComputeKind, cpu: [u32; 4], gpu: [u32; 4]) -> bool {
    match kind {
        ComputeKind::Int32 => cpu == gpu,
        ComputeKind::Fp32 | ComputeKind::Fp16 => cpu.iter().zip(gpu).all(|(&c, g)| {
            let (c, g) = (f32::from_bits(c), f32::from_bits(g));
            g.is_finite() && (c - g).abs() <= 1e-5 * c.abs().max(1e-3)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shuffle_is_a_bijection_and_inverts() {
        let items = 1 << 10;
        for round in [0, 1, 7] {
            let (mul, add) = shuffle(round, items);
            let mut seen = vec![false; items as usize];
            for inv in 0..items {
                let item = (inv.wrapping_mul(mul).wrapping_add(add)) & (items - 1);
                assert!(!seen[item as usize]);
                seen[item as usize] = true;
                assert_eq!(shuffled_invocation(item, round, items), inv);
            }
        }
    }

    #[test]
    fn fp32_agreement_tolerates_rounding_but_not_corruption() {
        let (_, v) = reference(ComputeKind::Fp32, 5, 1, 64, DEFAULT_CHAINS, None);
        assert!(agrees(ComputeKind::Fp32, v, v));
        let mut nudged = v;
        nudged[0] += 1; // one ulp
        assert!(agrees(ComputeKind::Fp32, v, nudged));
        let mut flipped = v;
        flipped[2] ^= 1 << 27;
        assert!(!agrees(ComputeKind::Fp32, v, flipped));
        let (_, i) = reference(ComputeKind::Int32, 5, 1, 64, DEFAULT_CHAINS, None);
        let mut j = i;
        j[3] ^= 1;
        assert!(!agrees(ComputeKind::Int32, i, j));
    }

    #[test]
    fn a_fault_the_fp32_chain_forgets_still_reaches_the_fold() {
        // 4096 blocks of UNROLL contracting steps after the fault: x forgets a flip of a
        // low mantissa bit long before the end, but the sum of every state keeps it.
        let iterations = 8192;
        let fault = ChainFault {
            after_blocks: iterations / 2,
            xor: 1 << 12,
        };
        let (clean_fold, clean_values) = reference(ComputeKind::Fp32, 9, 3, iterations, 2, None);
        let (fold, values) = reference(ComputeKind::Fp32, 9, 3, iterations, 2, Some(fault));
        assert_eq!(values, clean_values, "the chain's value forgot the fault");
        assert_ne!(fold, clean_fold, "the fold kept it");
        // Only the faulted lane's fold word moves: the others are untouched.
        assert_eq!(
            (0..4).filter(|&c| fold[c] != clean_fold[c]).count(),
            1,
            "{fold:08x?} vs {clean_fold:08x?}"
        );
        // int32 chains are bijections: the value itself keeps every fault.
        let (_, int_clean) = reference(ComputeKind::Int32, 9, 3, 64, 2, None);
        let (_, int_faulted) = reference(
            ComputeKind::Int32,
            9,
            3,
            64,
            2,
            Some(ChainFault {
                after_blocks: 1,
                xor: 1,
            }),
        );
        assert_ne!(int_clean, int_faulted);
    }
}
