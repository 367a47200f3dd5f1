#version 450
// Writes the pattern over this dispatch's elements with 16-byte stores. Works with either
// access layout; the layout in the push constants decides which addresses each
// invocation touches (coalesced on GPUs).
#include "vram_common.glsl"
layout(set = 0, binding = 0, std430) restrict writeonly buffer Data { uvec4 v[]; } data;

void main() {
    // The host dispatches whole workgroups of work only: no bounds check needed.
    uint inv = gl_GlobalInvocationID.x;
    for (uint k = 0u; k < VECS_PER_INV; k++) {
        uint e = element(inv, k);
        data.v[pc.start_vec + e] = pattern4(e * 4u);
    }
}
