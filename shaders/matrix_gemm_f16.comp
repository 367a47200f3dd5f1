#version 450
// GEMM with fp16 inputs, fp16 products and fp32 accumulation, the shape of a matrix
// unit's fp16 path (see matrix_gemm.glsl). A module of its own: the Float16 capability
// must not be required of devices that run only the fp32 and int8 kinds.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

layout(set = 0, binding = 0, std430) restrict readonly buffer AB { uint ab[]; };

#define ELEM float16_t
#define ACC float
#define ZERO 0.0
#define MAC(acc, a, b) (acc + float((a) * (b)))
#define STORE(v) floatBitsToUint(v)
float16_t load_a(uint row, uint col);
float16_t load_b(uint row, uint col);

#include "matrix_gemm.glsl"

float16_t half_at(uint e) { return unpackFloat2x16(ab[e >> 1u])[e & 1u]; }
float16_t load_a(uint row, uint col) { return half_at(row * pc.k + col); }
float16_t load_b(uint row, uint col) { return half_at(2u * pc.b_base + row * pc.n + col); }
