#version 450
// Writes the pattern with 32-byte stores, for the contiguous layout only (each invocation
// owns a run of elements). CPU Vulkan drivers store lane by lane and component by
// component, so the widest components cost the fewest stores per byte.
#include "vram_common.glsl"
#include "vram_wide.glsl"
layout(set = 0, binding = 0, std430) restrict writeonly buffer Data { u64vec4 v[]; } data;

void main() {
    // The host dispatches whole workgroups of work only: no bounds check needed.
    uint inv = gl_GlobalInvocationID.x;
    // In 32-byte units: the host keeps start_vec even.
    uint first = inv * VECS_PER_INV / 2u;
    uint base = pc.start_vec / 2u;
    for (uint k = 0u; k < VECS_PER_INV / 2u; k += 2u) {
        uint e = first + k;
        data.v[base + e] = pattern8(e * 8u);
        data.v[base + e + 1u] = pattern8(e * 8u + 8u);
    }
}
