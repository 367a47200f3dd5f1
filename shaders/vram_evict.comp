#version 450
// Reads a span far larger than any cache so that the next reads of retested words
// come from memory, not from a cache that still holds what was just written.
layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint start_vec;
    uint invocations;
    uint vecs_per_inv;
    uint magic;   // never equal to the sum in practice; keeps the reads alive
} pc;

layout(set = 0, binding = 0, std430) restrict readonly buffer Data { uvec4 v[]; } data;
layout(set = 0, binding = 1, std430) restrict buffer Results { uint r[]; } res;

void main() {
    uint inv = gl_GlobalInvocationID.x;
    if (inv >= pc.invocations) {
        return;
    }
    uvec4 acc = uvec4(0u);
    for (uint k = 0u; k < pc.vecs_per_inv; k++) {
        acc ^= data.v[pc.start_vec + inv * pc.vecs_per_inv + k];
    }
    if (acc.x == pc.magic && acc.y == pc.magic && acc.z == pc.magic && acc.w == pc.magic) {
        res.r[3] = 1u;
    }
}
