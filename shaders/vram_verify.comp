#version 450
// Verifies this dispatch's elements against the pattern with 16-byte storage-buffer loads.
#include "vram_common.glsl"
layout(set = 0, binding = 0, std430) restrict readonly buffer Data { uvec4 v[]; } data;

uvec4 load(uint e) {
    return data.v[pc.start_vec + e];
}

#include "vram_check.glsl"

void main() {
    // The host dispatches whole workgroups of work only: no bounds check needed, and
    // every invocation reaches the counters' barriers.
    Tally t = counters_begin();
    check(t, gl_GlobalInvocationID.x);
    counters_end(t);
}
