#version 450
// Verifies this dispatch's elements against the pattern with 16-byte loads. The fast path
// only ORs the differences; an invocation whose elements differed re-reads them and
// records each failing word.
#include "vram_common.glsl"
layout(set = 0, binding = 0, std430) restrict readonly buffer Data { uvec4 v[]; } data;

uvec4 load(uint e) {
    return data.v[pc.start_vec + e];
}

#include "vram_verify_body.glsl"
