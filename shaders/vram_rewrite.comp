#version 450
// One moving-inversions element: verify the pattern, then write expected ^ flip,
// sweeping each invocation's elements upwards or downwards.
#include "vram_common.glsl"
layout(set = 0, binding = 0, std430) restrict buffer Data { uvec4 v[]; } data;

uint nth(uint k) {
    return pc.descending != 0u ? pc.vecs_per_inv - 1u - k : k;
}

void main() {
    uint inv = gl_GlobalInvocationID.x;
    if (inv >= pc.invocations) {
        return;
    }
    uvec4 acc = uvec4(0u);
    for (uint k = 0u; k < pc.vecs_per_inv; k++) {
        uint e = element(inv, nth(k));
        acc |= data.v[pc.start_vec + e] ^ pattern4(e * 4u);
    }
    if (any(notEqual(acc, uvec4(0u)))) {
        bool found = false;
        for (uint k = 0u; k < pc.vecs_per_inv; k++) {
            uint e = element(inv, nth(k));
            uvec4 expected = pattern4(e * 4u);
            uvec4 actual = data.v[pc.start_vec + e];
            if (any(notEqual(actual, expected))) {
                found = true;
                record_element(e, expected, actual);
            }
        }
        if (!found) {
            record_word(element(inv, 0u) * 4u, 0u, acc.x | acc.y | acc.z | acc.w,
                        FLAG_TRANSIENT, pc.vecs_per_inv);
        }
    }
    for (uint k = 0u; k < pc.vecs_per_inv; k++) {
        uint e = element(inv, nth(k));
        data.v[pc.start_vec + e] = pattern4(e * 4u) ^ uvec4(pc.flip);
    }
}
