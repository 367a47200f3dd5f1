#version 450
// The same verification, loading through a texel buffer: CPU Vulkan drivers gather texel
// fetches as vectors but load storage buffers lane by lane.
#include "vram_common.glsl"
layout(set = 0, binding = 3) uniform usamplerBuffer data_t;

uvec4 load(uint e) {
    return texelFetch(data_t, int(pc.start_vec + e));
}

#include "vram_check.glsl"

void main() {
    // The host dispatches whole workgroups of work only: no bounds check needed, and
    // every invocation reaches the counters' barriers.
    Tally t = counters_begin();
    check(t, gl_GlobalInvocationID.x);
    counters_end(t);
}
