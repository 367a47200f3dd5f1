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

void main() {
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
    atomicAdd(res.r[0], sum);
    atomicXor(res.r[1], mixed);
}
