#version 450
// One moving-inversions sweep element: verify the pattern over the invocation's elements,
// then write expected ^ flip over them, upwards or downwards.
#include "vram_common.glsl"
layout(set = 0, binding = 0, std430) restrict buffer Data { uvec4 v[]; } data;

uvec4 load(uint e) {
    return data.v[pc.start_vec + e];
}

#include "vram_check.glsl"

void main() {
    // The host dispatches whole workgroups of work only: no bounds check needed, and
    // every invocation reaches the counters' barriers.
    uint inv = gl_GlobalInvocationID.x;
    Tally t = counters_begin();
    check(t, inv);
    for (uint k = 0u; k < VECS_PER_INV; k++) {
        uint e = element(inv, pc.descending != 0u ? VECS_PER_INV - 1u - k : k);
        data.v[pc.start_vec + e] = pattern4(e * 4u) ^ uvec4(pc.flip);
    }
    counters_end(t);
}
