#version 450
// GEMM with int8 inputs and int32 multiply-accumulate (see matrix_gemm.glsl): exact,
// like a matrix unit's int8 path.
#extension GL_GOOGLE_include_directive : require

layout(set = 0, binding = 0, std430) restrict readonly buffer AB { uint ab[]; };

#define ELEM int
#define ACC int
#define ZERO 0
#define MAC(acc, a, b) (acc + (a) * (b))
#define STORE(v) uint(v)
int load_a(uint row, uint col);
int load_b(uint row, uint col);

#include "matrix_gemm.glsl"

int load_a(uint row, uint col) { return BYTE_AT(ab, 0u, row * pc.k + col); }
int load_b(uint row, uint col) { return BYTE_AT(ab, pc.b_base, row * pc.n + col); }
