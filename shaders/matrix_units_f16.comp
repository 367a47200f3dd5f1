#version 450
// GEMM on the matrix units with fp16 inputs and fp32 accumulation (see matrix_units.glsl).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

#define ELEM float16_t
#define ACC float
#define ZERO 0.0
const uint PER_WORD = 2u;

#include "matrix_units.glsl"
