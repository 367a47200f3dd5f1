#version 450
// Generates a round's inputs from its seed (matrix_common.glsl's source_word): the packed
// signed bytes into the auxiliary buffer, where the checksums are computed from them, and
// the same values in the kind's type into the GEMM's input buffer.
#extension GL_GOOGLE_include_directive : require
#include "matrix_common.glsl"

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
    uint words;     // A's words, then B's
    uint seed;
    uint kind;      // 0 fp32, 1 fp16, 2 int8
    uint src_base;  // where the packed bytes go in the auxiliary buffer
} pc;

layout(set = 0, binding = 0, std430) restrict writeonly buffer AB { uint ab[]; };
layout(set = 0, binding = 2, std430) restrict buffer Aux { uint aux[]; };

void main() {
    uint stride = gl_NumWorkGroups.x * 256u;
    for (uint w = gl_GlobalInvocationID.x; w < pc.words; w += stride) {
        uint word = source_word(pc.seed, w);
        aux[pc.src_base + w] = word;
        ivec4 v = ivec4(bitfieldExtract(int(word), 0, 8), bitfieldExtract(int(word), 8, 8),
                        bitfieldExtract(int(word), 16, 8), bitfieldExtract(int(word), 24, 8));
        if (pc.kind == 0u) {
            for (uint q = 0u; q < 4u; q++) {
                ab[4u * w + q] = floatBitsToUint(float(v[q]));
            }
        } else if (pc.kind == 1u) {
            ab[2u * w] = packHalf2x16(vec2(v.xy));
            ab[2u * w + 1u] = packHalf2x16(vec2(v.zw));
        } else {
            ab[w] = word;
        }
    }
}
