// GEMM on the matrix units (VK_KHR_cooperative_matrix), shared by the fp16 and int8
// variants: the same tiles, push constants, input layout and output layout as the
// shared-memory kernel (matrix_product.glsl), so the checks, the recomputation and the
// locator apply unchanged. Each workgroup computes TILE x TILE outputs; its subgroups
// share out the tile's strips of SHAPE_M rows, and each strip accumulates TILE / SHAPE_N
// matrices of SHAPE_M x SHAPE_N over K, SHAPE_K at a time. The shape is the device's
// own (vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR), given as specialization
// constants, and so is the workgroup's size (whole subgroups).
//
// A and B are loaded straight from the input buffer, read as 32-bit words (PER_WORD
// elements each), so that no 8- or 16-bit storage feature is needed: the layout of the
// packed words is the elements' order in memory. The accumulation is exact whatever
// order the units add in (matrix_common.glsl), so the result is bit for bit the
// shared-memory kernel's. The variant file enables GL_KHR_cooperative_matrix (which
// tells build.rs that it needs a newer compiler than glslc) and defines ELEM, ACC, ZERO
// and PER_WORD before including it.
#include "matrix_product.glsl"
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint SHAPE_M = 16u;
layout(constant_id = 2) const uint SHAPE_N = 16u;
layout(constant_id = 3) const uint SHAPE_K = 16u;
const uint STRIPS = TILE / SHAPE_M;
const uint BLOCKS = TILE / SHAPE_N;

layout(set = 0, binding = 0, std430) restrict readonly buffer AB { uint ab[]; };

void main() {
    // Whole workgroups take whole tiles and whole subgroups whole strips, so every
    // cooperative operation is reached by its whole subgroup.
    for (uint s = gl_WorkGroupID.x; s < pc.tile_count; s += gl_NumWorkGroups.x) {
        uint slot = pc.tile_first + s;
        uvec2 origin = tile_origin(slot);
        uint i0 = origin.x;
        uint j0 = origin.y;
        for (uint strip = gl_SubgroupID; strip < STRIPS; strip += gl_NumSubgroups) {
            uint row = i0 + strip * SHAPE_M;
            coopmat<ACC, gl_ScopeSubgroup, SHAPE_M, SHAPE_N, gl_MatrixUseAccumulator> acc[BLOCKS];
            for (uint b = 0u; b < BLOCKS; b++) {
                acc[b] = coopmat<ACC, gl_ScopeSubgroup, SHAPE_M, SHAPE_N, gl_MatrixUseAccumulator>(ZERO);
            }
            for (uint k0 = 0u; k0 < pc.k; k0 += SHAPE_K) {
                coopmat<ELEM, gl_ScopeSubgroup, SHAPE_M, SHAPE_K, gl_MatrixUseA> a;
                coopMatLoad(a, ab, (row * pc.k + k0) / PER_WORD, pc.k / PER_WORD,
                            gl_CooperativeMatrixLayoutRowMajor);
                for (uint b = 0u; b < BLOCKS; b++) {
                    coopmat<ELEM, gl_ScopeSubgroup, SHAPE_K, SHAPE_N, gl_MatrixUseB> bm;
                    coopMatLoad(bm, ab, pc.b_base + (k0 * pc.n + j0 + b * SHAPE_N) / PER_WORD,
                                pc.n / PER_WORD, gl_CooperativeMatrixLayoutRowMajor);
                    acc[b] = coopMatMulAdd(a, bm, acc[b]);
                }
            }
            for (uint b = 0u; b < BLOCKS; b++) {
                uint col = b * SHAPE_N;
                if (pc.compact != 0u) {
                    coopMatStore(acc[b], c, pc.out_base + slot * TILE_ELEMS + strip * SHAPE_M * TILE + col,
                                 TILE, gl_CooperativeMatrixLayoutRowMajor);
                } else {
                    coopMatStore(acc[b], c, pc.out_base + row * pc.n + j0 + col, pc.n,
                                 gl_CooperativeMatrixLayoutRowMajor);
                }
            }
        }
    }
}
