#version 450
// GEMM with fp32 inputs and fp32 fused multiply-add (see matrix_gemm.glsl).
#extension GL_GOOGLE_include_directive : require

layout(set = 0, binding = 0, std430) restrict readonly buffer AB { float ab[]; };

#define ELEM float
#define ACC float
#define ZERO 0.0
#define MAC(acc, a, b) fma(a, b, acc)
#define STORE(v) floatBitsToUint(v)
float load_a(uint row, uint col);
float load_b(uint row, uint col);

#include "matrix_gemm.glsl"

float load_a(uint row, uint col) { return ab[row * pc.k + col]; }
float load_b(uint row, uint col) { return ab[pc.b_base + row * pc.n + col]; }
