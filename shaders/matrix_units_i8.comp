#version 450
// GEMM on the matrix units with int8 inputs and int32 accumulation (see matrix_units.glsl).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int32 : require

#define ELEM int8_t
#define ACC int32_t
#define ZERO 0
const uint PER_WORD = 4u;

#include "matrix_units.glsl"
