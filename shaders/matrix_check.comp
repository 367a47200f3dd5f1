#version 450
// Checks the GEMM's output. Stage 0: every row and every column of every tile of C is
// summed in int32 and compared exactly with its checksum (matrix_sums.comp); for the
// float kinds each element must also be an integer below 2^24 in magnitude, which every
// correct element is (matrix_common.glsl), so a flipped low mantissa bit that the
// integer sum would round away is still found, at its coordinates. Stage 1: the sampled
// tiles recomputed on other workgroups are compared with the first run bit for bit.
#extension GL_GOOGLE_include_directive : require
#include "matrix_common.glsl"

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
    uint m;
    uint n;
    uint kind;          // 0 fp32, 1 fp16, 2 int8
    uint er_base;
    uint ec_base;
    uint stage;
    uint record_capacity;
    uint c2_base;       // the recomputed tiles, TILE_ELEMS words per slot
    uint slots;
    uint mul;
    uint add;
} pc;

layout(set = 0, binding = 1, std430) restrict readonly buffer C { uint c[]; };
layout(set = 0, binding = 2, std430) restrict buffer Aux { uint aux[]; };

void record(uint what, uint a, uint b, uint expected, uint actual, uint workgroup) {
    bool element = what == REC_INVALID || what == REC_REDUNDANT;
    uint counter = element ? C_ELEMENT_SLOTS : C_SLOTS;
    uint half_capacity = pc.record_capacity / 2u;
    if (aux[counter] >= half_capacity) {
        return;
    }
    uint slot = atomicAdd(aux[counter], 1u);
    if (slot < half_capacity) {
        uint at = RECORDS_AT + (element ? slot + half_capacity : slot) * RECORD_WORDS;
        aux[at] = what;
        aux[at + 1u] = a;
        aux[at + 2u] = b;
        aux[at + 3u] = expected;
        aux[at + 4u] = actual;
        aux[at + 5u] = workgroup;
    }
}

// The element's value as an integer, and whether it is one (float kinds).
int value_of(uint bits, uint row, uint col, bool judge) {
    if (pc.kind == 2u) {
        return int(bits);
    }
    float f = uintBitsToFloat(bits);
    bool finite = !isnan(f) && !isinf(f);
    if (finite && f == trunc(f) && abs(f) < 16777216.0) {
        return int(f);
    }
    if (judge) {
        atomicAdd(aux[C_INVALID], 1u);
        if (!finite) {
            atomicAdd(aux[C_NONFINITE], 1u);
        }
        record(REC_INVALID, row, col, 0u, bits, 0u);
    }
    return 0;
}

void main() {
    uint stride = gl_NumWorkGroups.x * 256u;
    uint tm = pc.m / TILE;
    uint tn = pc.n / TILE;
    if (pc.stage == 0u) {
        uint rows = pc.m * tn;
        uint total = rows + tm * pc.n;
        for (uint x = gl_GlobalInvocationID.x; x < total; x += stride) {
            int sum = 0;
            if (x < rows) {
                uint i = x / tn;
                uint j0 = (x % tn) * TILE;
                for (uint q = 0u; q < TILE; q++) {
                    sum += value_of(c[i * pc.n + j0 + q], i, j0 + q, true);
                }
                uint expected = aux[pc.er_base + x];
                if (uint(sum) != expected) {
                    atomicAdd(aux[C_ROWS], 1u);
                    record(REC_ROW, i, x % tn, expected, uint(sum), (i / TILE) * tn + x % tn);
                }
            } else {
                uint y = x - rows;
                uint i0 = (y / pc.n) * TILE;
                uint j = y % pc.n;
                for (uint q = 0u; q < TILE; q++) {
                    sum += value_of(c[(i0 + q) * pc.n + j], i0 + q, j, false);
                }
                uint expected = aux[pc.ec_base + y];
                if (uint(sum) != expected) {
                    atomicAdd(aux[C_COLS], 1u);
                    record(REC_COL, y / pc.n, j, expected, uint(sum), (y / pc.n) * tn + j / TILE);
                }
            }
        }
    } else {
        uint tiles = tm * tn;
        uint total = pc.slots * TILE_ELEMS;
        for (uint x = gl_GlobalInvocationID.x; x < total; x += stride) {
            uint slot = x / TILE_ELEMS;
            uint e = x % TILE_ELEMS;
            uint tile = (slot * pc.mul + pc.add) & (tiles - 1u);
            uint row = (tile / tn) * TILE + e / TILE;
            uint col = (tile % tn) * TILE + e % TILE;
            uint first = c[row * pc.n + col];
            uint second = c[pc.c2_base + x];
            if (first != second) {
                atomicAdd(aux[C_REDUNDANT], 1u);
                record(REC_REDUNDANT, row, col, first, second, slot);
            }
        }
    }
}
