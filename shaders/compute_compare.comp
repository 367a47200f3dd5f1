#version 450
// Compares two runs of the same work items (the second on shuffled invocations): every
// differing item is counted, the first few recorded, and non-finite fp results counted.
// Each item is two uvec4 (compute_fma.comp): the fold of its chains, then their values;
// a record shows the fold, or the values when only they differ.

layout(local_size_x = 64) in;
layout(constant_id = 1) const uint KIND = 0;

layout(push_constant) uniform Push {
    uint items;
    uint record_capacity;
} pc;

layout(set = 0, binding = 0, std430) restrict readonly buffer A { uvec4 v[]; } first_run;
layout(set = 0, binding = 1, std430) restrict buffer R { uint r[]; } res;
layout(set = 0, binding = 2, std430) restrict readonly buffer B { uvec4 v[]; } second_run;

const uint C_MISMATCH = 0u;
const uint C_NONFINITE = 1u;
const uint C_SLOTS = 2u;
const uint C_RECORDS = 8u;   // records of 9 words: item, expected x4, actual x4

// Per-workgroup counts, added to the global counters once per workgroup: a device whose
// every lane is wrong must not serialise on two global counters.
shared uint s_mismatch;
shared uint s_nonfinite;

void main() {
    if (gl_LocalInvocationIndex == 0u) {
        s_mismatch = 0u;
        s_nonfinite = 0u;
    }
    memoryBarrierShared();
    barrier();
    // No early return: every invocation must reach the barriers (the host dispatches
    // whole workgroups of a power-of-two item count, but keep the bound anyway).
    uint item = gl_GlobalInvocationID.x;
    if (item < pc.items) {
        uvec4 a = first_run.v[2u * item];
        uvec4 b = second_run.v[2u * item];
        uvec4 a_values = first_run.v[2u * item + 1u];
        uvec4 b_values = second_run.v[2u * item + 1u];
        if (KIND == 0u) {
            vec4 f = uintBitsToFloat(a_values);
            if (any(isnan(f)) || any(isinf(f))) {
                atomicAdd(s_nonfinite, 1u);
            }
        }
        if (all(equal(a, b)) && any(notEqual(a_values, b_values))) {
            a = a_values;
            b = b_values;
        }
        if (any(notEqual(a, b))) {
            atomicAdd(s_mismatch, 1u);
            if (res.r[C_SLOTS] < pc.record_capacity) {
                uint slot = atomicAdd(res.r[C_SLOTS], 1u);
                if (slot < pc.record_capacity) {
                    uint at = C_RECORDS + slot * 9u;
                    res.r[at] = item;
                    for (uint c = 0u; c < 4u; c++) {
                        res.r[at + 1u + c] = a[c];
                        res.r[at + 5u + c] = b[c];
                    }
                }
            }
        }
    }
    memoryBarrierShared();
    barrier();
    if (gl_LocalInvocationIndex == 0u) {
        if (s_mismatch != 0u) {
            atomicAdd(res.r[C_MISMATCH], s_mismatch);
        }
        if (s_nonfinite != 0u) {
            atomicAdd(res.r[C_NONFINITE], s_nonfinite);
        }
    }
}
