#version 450
// Keeps every ALU busy with long dependent multiply-add chains whose result is fully
// determined by the work item, so that two runs of the same item on different compute
// units must agree bit for bit. KIND 0: fp32 fma; KIND 1: int32 multiply-add (wrapping).

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint KIND = 0;

layout(push_constant) uniform Push {
    uint items;        // work items in the whole grid (a power of two)
    uint iterations;   // multiply-adds per chain
    uint first;        // first invocation of this dispatch
    uint shuffle;      // 0: invocation i computes item i; 1: item (i * mul + add) mod items
    uint mul;          // odd: the shuffle is a bijection
    uint add;
    uint seed;
    uint inject_item;  // an item whose result is corrupted on purpose (~0u: none)
    uint inject_xor;
} pc;

layout(set = 0, binding = 0, std430) restrict writeonly buffer Out { uvec4 v[]; } results;

uint hash(uint x) {
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return x;
}

void main() {
    uint inv = pc.first + gl_GlobalInvocationID.x;
    uint item = pc.shuffle != 0u ? (inv * pc.mul + pc.add) & (pc.items - 1u) : inv;
    uint h = hash(item ^ pc.seed);
    uvec4 bits;
    if (KIND == 0u) {
        // A contracting map x = x * a + b (|a| < 1): values stay bounded and rounding
        // differences never grow, so a CPU check can use a tight tolerance.
        vec4 x = vec4(float(h & 0xFFFFu), float(h >> 16), float((h >> 8) & 0xFFFFu), float(h & 0xFFu)) / 65536.0;
        vec4 a = vec4(0.9990234375, 0.998046875, 0.9970703125, 0.99609375);
        vec4 b = vec4(0.0009765625, 0.001953125, 0.0029296875, 0.00390625) * (1.0 + float(h & 7u));
        for (uint k = 0u; k < pc.iterations; k++) {
            x = fma(x, a, b);
            x = fma(x, a, b);
            x = fma(x, a, b);
            x = fma(x, a, b);
        }
        bits = floatBitsToUint(x);
    } else {
        uvec4 x = uvec4(h, h ^ 0x9E3779B9u, h * 3u, h + 0x7F4A7C15u);
        uvec4 a = uvec4(1664525u, 22695477u, 1103515245u, 134775813u);
        uvec4 b = uvec4(1013904223u, 1u, 12345u, 1u) + uvec4(h & 0xFFu);
        for (uint k = 0u; k < pc.iterations; k++) {
            x = x * a + b;
            x = x * a + b;
            x = x * a + b;
            x = x * a + b;
        }
        bits = x;
    }
    if (item == pc.inject_item && pc.shuffle != 0u) {
        bits.x ^= pc.inject_xor;
    }
    results.v[item] = bits;
}
