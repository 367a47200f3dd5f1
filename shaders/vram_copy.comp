#version 450
// Streams the first half of a test buffer onto its second half: the shader copy that
// `kiln bench vram` measures beside vkCmdCopyBuffer, in the shapes the VRAM test itself
// uses (each layout's order; texel-buffer loads where the test verifies through them).
layout(local_size_x_id = 0) in;
layout(constant_id = 2) const uint VECS_PER_INV = 4u;
layout(constant_id = 3) const uint CONTIGUOUS = 1u;
layout(constant_id = 4) const uint TEXEL = 0u;

layout(push_constant) uniform Push {
    uint src_vec;      // first element read by this dispatch
    uint dst_vec;      // first element written
    uint invocations;  // invocations in the dispatch
} pc;

layout(set = 0, binding = 0, std430) restrict buffer Data { uvec4 v[]; } data;
layout(set = 0, binding = 3) uniform usamplerBuffer data_t;

void main() {
    // The host dispatches whole workgroups of work only: no bounds check needed.
    uint inv = gl_GlobalInvocationID.x;
    uint inv_stride = CONTIGUOUS != 0u ? VECS_PER_INV : 1u;
    uint elem_stride = CONTIGUOUS != 0u ? 1u : pc.invocations;
    for (uint k = 0u; k < VECS_PER_INV; k++) {
        uint e = inv * inv_stride + k * elem_stride;
        uvec4 x = TEXEL != 0u ? texelFetch(data_t, int(pc.src_vec + e)) : data.v[pc.src_vec + e];
        data.v[pc.dst_vec + e] = x;
    }
}
