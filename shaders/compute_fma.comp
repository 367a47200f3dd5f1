#version 450
// Keeps every ALU busy with CHAINS independent multiply-add chains per invocation (enough
// work in flight to cover the pipe's latency), each fully determined by the work item, so
// that two runs of the same item on different compute units must agree bit for bit.
// KIND 0: fp32 fma; KIND 1: int32 multiply-add (wrapping).
//
// Nothing the chains compute is forgotten before it reaches the stored result:
// - int32: x <- x * a + b mod 2^32 with odd a is a bijection, so a wrong value at any
//   step gives a wrong final value.
// - fp32: x <- fma(x, a, b) with 0 < a < 1 contracts (so values stay bounded and a CPU
//   check can use a tight tolerance), which alone would forget an error within about
//   2x10^4 steps. So after every BLOCK (8) steps the bits of every chain's state are
//   added into one integer sum per lane. On these positive values the map is monotone (a > 0,
//   fma correctly rounded), so once a chain's state differs between two runs, every later
//   state differs in the same direction until the two coincide: the differences added
//   into the sum all have one sign and cannot cancel (short of wrapping round 2^32
//   exactly, or a second fault in another chain cancelling it exactly: about one chance
//   in 2^32). An error in any of the BLOCK steps between two sums reaches the sum unless
//   the next steps round it away: at most 8 steps of a >= 0.996 shrink it by no more
//   than 4%, so that needs it to be about an ulp or less. Every
//   multiply-add is therefore counted as verified, against errors of more than about an
//   ulp. One sum for all chains keeps the registers for the chains themselves, and one sum
//   per 8 steps costs an eighth of an operation per multiply-add (one per 4 cost the
//   verified rate a third of the roofline on a CPU device).
// The stored result is the sum (fp32) or a fold of every chain's value in which a change
// to any one chain changes the result (int32), mixed, and, for the CPU check, the chains'
// values.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint KIND = 0;
layout(constant_id = 2) const uint CHAINS = 8;
// Multiply-add blocks per chain: a specialization constant, so the loop bound is known to
// the compiler (a bound read from memory runs slower on some drivers).
layout(constant_id = 3) const uint ITERATIONS = 64;
// 1: the planted fault goes into the chain at `inject_step`, not into the result.
layout(constant_id = 4) const uint INJECT_IN_CHAIN = 0;
// 1: the roofline kernel of `kiln bench compute`: the same chains without the sums, which
// nothing verifies; its rate is the ceiling the verified kernel is measured against.
layout(constant_id = 5) const uint PEAK = 0;
// Multiply-adds per chain between two sums. The verified kernel runs 8 (the host's
// reference does the same); the roofline also tries other lengths, so that its ceiling
// does not depend on one loop shape.
layout(constant_id = 6) const uint BLOCK = 8;

layout(push_constant) uniform Push {
    uint items;        // work items in the whole grid (a power of two)
    uint shuffle;      // 0: invocation i computes item i; 1: item (i * mul + add) mod items
    uint mul;          // odd: the shuffle is a bijection
    uint add;
    uint seed;
    uint inject_item;  // an item whose result is corrupted on purpose (~0u: none)
    uint inject_xor;
    uint inject_step;  // with INJECT_IN_CHAIN: the block after which chain 0 is corrupted
} pc;

// Two uvec4 per item: the fold (compared bit for bit between runs), then the chains'
// values (what the CPU checks).
layout(set = 0, binding = 0, std430) restrict writeonly buffer Out { uvec4 v[]; } results;

uint hash(uint x) {
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return x;
}

const uint FOLD = 0x9E3779B1u;

void main() {
    uint item = pc.shuffle != 0u ? (gl_GlobalInvocationID.x * pc.mul + pc.add) & (pc.items - 1u)
                                 : gl_GlobalInvocationID.x;
    uint h = hash(item ^ pc.seed);
    bool planted = item == pc.inject_item && pc.shuffle != 0u;
    uvec4 fold = uvec4(0u);
    uvec4 values;
    if (KIND == 0u) {
        vec4 x[CHAINS];
        uvec4 sum = uvec4(0u);
        vec4 a = vec4(0.9990234375, 0.998046875, 0.9970703125, 0.99609375);
        vec4 b = vec4(0.0009765625, 0.001953125, 0.0029296875, 0.00390625) * (1.0 + float(h & 7u));
        for (uint c = 0u; c < CHAINS; c++) {
            uint g = hash(h + c);
            x[c] = vec4(float(g & 0xFFFFu), float(g >> 16), float((g >> 8) & 0xFFFFu), float(g & 0xFFu)) / 65536.0;
        }
        for (uint k = 0u; k < ITERATIONS; k++) {
            for (uint c = 0u; c < CHAINS; c++) {
                for (uint s = 0u; s < BLOCK; s++) {
                    x[c] = fma(x[c], a, b);
                }
            }
            if (INJECT_IN_CHAIN != 0u && planted && k == pc.inject_step) {
                x[0].x = uintBitsToFloat(floatBitsToUint(x[0].x) ^ pc.inject_xor);
            }
            if (PEAK == 0u) {
                uvec4 block = floatBitsToUint(x[0]);
                for (uint c = 1u; c < CHAINS; c++) {
                    block += floatBitsToUint(x[c]);
                }
                sum += block;
            }
        }
        vec4 total = vec4(0.0);
        for (uint c = 0u; c < CHAINS; c++) {
            total += x[c];
        }
        fold = sum * FOLD;
        values = floatBitsToUint(total);
    } else {
        uvec4 x[CHAINS];
        uvec4 a = uvec4(1664525u, 22695477u, 1103515245u, 134775813u);
        uvec4 b = uvec4(1013904223u, 1u, 12345u, 1u) + uvec4(h & 0xFFu);
        for (uint c = 0u; c < CHAINS; c++) {
            uint g = hash(h + c);
            x[c] = uvec4(g, g ^ 0x9E3779B9u, g * 3u, g + 0x7F4A7C15u);
        }
        for (uint k = 0u; k < ITERATIONS; k++) {
            for (uint c = 0u; c < CHAINS; c++) {
                for (uint s = 0u; s < BLOCK; s++) {
                    x[c] = x[c] * a + b;
                }
            }
            if (INJECT_IN_CHAIN != 0u && planted && k == pc.inject_step) {
                x[0].x ^= pc.inject_xor;
            }
        }
        for (uint c = 0u; c < CHAINS; c++) {
            fold = (fold ^ x[c]) * FOLD;
        }
        values = fold;
    }
    if (INJECT_IN_CHAIN == 0u && planted) {
        fold.x ^= pc.inject_xor;
    }
    results.v[2u * item] = fold;
    results.v[2u * item + 1u] = values;
}
