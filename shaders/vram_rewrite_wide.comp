#version 450
// The moving-inversions sweep for the contiguous layout: texel-buffer loads and 32-byte
// stores, the shapes CPU Vulkan drivers run fastest. Each invocation reads its run before
// it writes it, and no other invocation touches that run.
#include "vram_common.glsl"
#include "vram_wide.glsl"
layout(set = 0, binding = 3) uniform usamplerBuffer data_t;
layout(set = 0, binding = 0, std430) restrict writeonly buffer Data { u64vec4 v[]; } data;

uvec4 load(uint e) {
    return texelFetch(data_t, int(pc.start_vec + e));
}

#include "vram_check.glsl"

void main() {
    // The host dispatches whole workgroups of work only: no bounds check needed, and
    // every invocation reaches the counters' barriers.
    uint inv = gl_GlobalInvocationID.x;
    Tally t = counters_begin();
    check(t, inv);
    // In 32-byte units: the host keeps start_vec even.
    uint n = VECS_PER_INV / 2u;
    uint first = inv * n;
    uint base = pc.start_vec / 2u;
    u64vec4 flip = u64vec4(packUint2x32(uvec2(pc.flip)));
    for (uint k = 0u; k < n; k++) {
        uint e = first + (pc.descending != 0u ? n - 1u - k : k);
        data.v[base + e] = pattern8(e * 8u) ^ flip;
    }
    counters_end(t);
}
