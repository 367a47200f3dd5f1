#version 450
// Writes the pattern with 32-byte stores, for the contiguous layout only (each invocation
// owns a run of elements). CPU Vulkan drivers store lane by lane and component by
// component, so the widest components cost the fewest stores per byte.
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#include "vram_common.glsl"
layout(set = 0, binding = 0, std430) restrict writeonly buffer Data { u64vec4 v[]; } data;

u64vec4 pattern8(uint local_word) {
    uvec4 a = pattern4(local_word);
    uvec4 b = pattern4(local_word + 4u);
    return u64vec4(packUint2x32(a.xy), packUint2x32(a.zw), packUint2x32(b.xy), packUint2x32(b.zw));
}

void main() {
    // The host dispatches whole workgroups of work only: no bounds check needed.
    uint inv = gl_GlobalInvocationID.x;
    // In 32-byte units: the host keeps start_vec and vecs_per_inv even.
    uint first = inv * pc.vecs_per_inv / 2u;
    uint base = pc.start_vec / 2u;
    for (uint k = 0u; k < pc.vecs_per_inv / 2u; k += 2u) {
        uint e = first + k;
        data.v[base + e] = pattern8(e * 8u);
        data.v[base + e + 1u] = pattern8(e * 8u + 8u);
    }
}
