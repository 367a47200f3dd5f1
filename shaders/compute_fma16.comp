#version 450
// The fp16 variant of compute_fma.comp (a separate module: the Float16 capability must
// not be required of devices that only run the fp32 and int32 passes), with the same
// layout and the same argument for why nothing is forgotten: after every BLOCK steps the
// chains' values, widened exactly to fp32, are added into one integer sum per lane.

#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

layout(local_size_x_id = 0) in;
layout(constant_id = 2) const uint CHAINS = 8;
layout(constant_id = 3) const uint ITERATIONS = 64;
layout(constant_id = 4) const uint INJECT_IN_CHAIN = 0;
// 1: the roofline kernel of `kiln bench compute`: the same chains without the sums, which
// nothing verifies; its rate is the ceiling the verified kernel is measured against.
layout(constant_id = 5) const uint PEAK = 0;
// Multiply-adds per chain between two sums. The verified kernel runs 8 (the host's
// reference does the same); the roofline also tries other lengths, so that its ceiling
// does not depend on one loop shape.
layout(constant_id = 6) const uint BLOCK = 8;

layout(push_constant) uniform Push {
    uint items;
    uint shuffle;
    uint mul;
    uint add;
    uint seed;
    uint inject_item;
    uint inject_xor;
    uint inject_step;
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

const uint FOLD = 0x9E3779B1u;

void main() {
    uint item = pc.shuffle != 0u ? (gl_GlobalInvocationID.x * pc.mul + pc.add) & (pc.items - 1u)
                                 : gl_GlobalInvocationID.x;
    uint h = hash(item ^ pc.seed);
    bool planted = item == pc.inject_item && pc.shuffle != 0u;
    // A contracting map in half precision, close to 1 so that an error fades slowly:
    // values stay in (0, 2).
    f16vec4 a = f16vec4(0.96875hf, 0.9375hf, 0.90625hf, 0.875hf);
    f16vec4 b = (f16vec4(1.0hf) - a) * float16_t(1.0 + float(h & 3u) * 0.25);
    f16vec4 x[CHAINS];
    uvec4 sum = uvec4(0u);
    for (uint c = 0u; c < CHAINS; c++) {
        uint g = hash(h + c);
        x[c] = f16vec4(vec4(float(g & 0xFFu), float((g >> 8) & 0xFFu), float((g >> 16) & 0xFFu), float(g >> 24)) / 256.0);
    }
    for (uint k = 0u; k < ITERATIONS; k++) {
        for (uint c = 0u; c < CHAINS; c++) {
            for (uint s = 0u; s < BLOCK; s++) {
                x[c] = fma(x[c], a, b);
            }
        }
        if (INJECT_IN_CHAIN != 0u && planted && k == pc.inject_step) {
            // Widened exactly to fp32, where the half's mantissa bits are bits 13-22: flips
            // mantissa bits of the half (inject_xor < 2^10), narrowed back exactly.
            x[0].x = float16_t(uintBitsToFloat(floatBitsToUint(float(x[0].x)) ^ (pc.inject_xor << 13)));
        }
        if (PEAK == 0u) {
            uvec4 block = floatBitsToUint(vec4(x[0]));
            for (uint c = 1u; c < CHAINS; c++) {
                block += floatBitsToUint(vec4(x[c]));
            }
            sum += block;
        }
    }
    vec4 total = vec4(0.0);
    for (uint c = 0u; c < CHAINS; c++) {
        total += vec4(x[c]);
    }
    uvec4 fold = sum * FOLD;
    if (INJECT_IN_CHAIN == 0u && planted) {
        fold.x ^= pc.inject_xor;
    }
    results.v[2u * item] = fold;
    results.v[2u * item + 1u] = floatBitsToUint(total);
}
