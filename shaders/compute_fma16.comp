#version 450
// The fp16 variant of compute_fma.comp (a separate module: the Float16 capability must
// not be required of devices that only run the fp32 and int32 passes). Results are
// widened to fp32 (exactly) before they are stored, so the comparison is shared.
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

layout(local_size_x_id = 0) in;

layout(push_constant) uniform Push {
    uint items;
    uint iterations;
    uint first;
    uint shuffle;
    uint mul;
    uint add;
    uint seed;
    uint inject_item;
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
    // A contracting map in half precision: values stay in (0, 2).
    f16vec4 x = f16vec4(vec4(float(h & 0xFFu), float((h >> 8) & 0xFFu), float((h >> 16) & 0xFFu), float(h >> 24)) / 256.0);
    f16vec4 a = f16vec4(0.9375hf, 0.875hf, 0.8125hf, 0.75hf);
    f16vec4 b = f16vec4(0.0625hf, 0.125hf, 0.1875hf, 0.25hf) * float16_t(1.0 + float(h & 3u) * 0.25);
    for (uint k = 0u; k < pc.iterations; k++) {
        x = fma(x, a, b);
        x = fma(x, a, b);
        x = fma(x, a, b);
        x = fma(x, a, b);
    }
    uvec4 bits = floatBitsToUint(vec4(x));
    if (item == pc.inject_item && pc.shuffle != 0u) {
        bits.x ^= pc.inject_xor;
    }
    results.v[item] = bits;
}
