#version 450
// Checksums a transferred buffer on the device, so that corruption on the way in is told
// apart from corruption on the way out: a position-weighted sum (any change to any word
// changes it, since every weight is odd) and a position-mixed XOR.

layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint words;          // words to checksum
    uint words_per_inv;  // run length of each invocation
} pc;

layout(set = 0, binding = 0, std430) restrict readonly buffer Data { uint w[]; } data;
layout(set = 0, binding = 1, std430) restrict buffer Result { uint r[]; } res;

// The workgroup's sum and XOR, added to the global pair once per workgroup.
shared uint s_sum;
shared uint s_mixed;

void main() {
    if (gl_LocalInvocationIndex == 0u) {
        s_sum = 0u;
        s_mixed = 0u;
    }
    memoryBarrierShared();
    barrier();
    uint first = gl_GlobalInvocationID.x * pc.words_per_inv;
    uint sum = 0u;
    uint mixed = 0u;
    for (uint k = 0u; k < pc.words_per_inv; k++) {
        uint i = first + k;
        if (i < pc.words) {
            uint v = data.w[i];
            sum += v * (2u * i + 1u);
            mixed ^= v + i;
        }
    }
    // Both are commutative, so the order of the reduction cannot change the result.
    atomicAdd(s_sum, sum);
    atomicXor(s_mixed, mixed);
    memoryBarrierShared();
    barrier();
    if (gl_LocalInvocationIndex == 0u) {
        atomicAdd(res.r[0], s_sum);
        atomicXor(res.r[1], s_mixed);
    }
}
