// The tiled shared-memory GEMM shared by the fp32, fp16 and int8 variants: each
// workgroup of 64 invocations computes TILE x TILE outputs, 8 x 8 per invocation (rows
// ty + 8m, columns tx + 8n, so that neighbours read neighbouring shared words), with A
// and B staged through shared memory 16 steps of K at a time. It loads the ALUs, shared
// memory, the register file and L2 at once. 8 x 8 outputs per invocation make 64
// multiply-adds per 16 shared-memory reads: twice the rate of 4 x 4 on a CPU Vulkan
// device (measured), and the register blocking GPUs' own SGEMM kernels use. The variant file defines ELEM (the staged
// type), ACC (the accumulator), ZERO, load_a, load_b, MAC and STORE before including it.
// Which tiles a dispatch computes: matrix_product.glsl.
#include "matrix_product.glsl"
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = 64) in;

shared ELEM sa[16][TILE];
shared ELEM sb[16][TILE];

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint tx = lid & 7u;
    uint ty = lid >> 3u;
    // Whole workgroups take whole tiles, so the barriers below are reached uniformly.
    for (uint s = gl_WorkGroupID.x; s < pc.tile_count; s += gl_NumWorkGroups.x) {
        uint slot = pc.tile_first + s;
        uvec2 origin = tile_origin(slot);
        uint i0 = origin.x;
        uint j0 = origin.y;
        ACC acc[8][8];
        [[unroll]] for (uint a = 0u; a < 8u; a++) {
            [[unroll]] for (uint b = 0u; b < 8u; b++) {
                acc[a][b] = ZERO;
            }
        }
        for (uint k0 = 0u; k0 < pc.k; k0 += 16u) {
            [[unroll]] for (uint l = 0u; l < 16u; l++) {
                uint e = lid + l * 64u;
                sa[e & 15u][e >> 4u] = load_a(i0 + (e >> 4u), k0 + (e & 15u));
                sb[e >> 6u][e & 63u] = load_b(k0 + (e >> 6u), j0 + (e & 63u));
            }
            barrier();
            [[unroll]] for (uint kk = 0u; kk < 16u; kk++) {
                ELEM av[8];
                ELEM bv[8];
                [[unroll]] for (uint q = 0u; q < 8u; q++) {
                    av[q] = sa[kk][ty + 8u * q];
                    bv[q] = sb[kk][tx + 8u * q];
                }
                [[unroll]] for (uint a = 0u; a < 8u; a++) {
                    [[unroll]] for (uint b = 0u; b < 8u; b++) {
                        acc[a][b] = MAC(acc[a][b], av[a], bv[b]);
                    }
                }
            }
            barrier();
        }
        [[unroll]] for (uint a = 0u; a < 8u; a++) {
            [[unroll]] for (uint b = 0u; b < 8u; b++) {
                uint row = ty + 8u * a;
                uint col = tx + 8u * b;
                uint at = pc.compact != 0u
                    ? pc.out_base + slot * TILE_ELEMS + row * TILE + col
                    : pc.out_base + (i0 + row) * pc.n + j0 + col;
                c[at] = STORE(acc[a][b]);
            }
        }
    }
}
