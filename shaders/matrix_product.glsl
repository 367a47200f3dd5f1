// What the host sees of a GEMM kernel, shared by the shared-memory kernel
// (matrix_gemm.glsl) and the matrix units' (matrix_units.glsl), so that both are
// dispatched alike and write C alike: the push constants, the output buffer, and which
// tile a slot computes.
//
// Slot s (tile_first <= s < tile_first + tile_count) computes tile (s x mul + add) mod
// tiles. The primary run uses mul 1, add 0; the recomputation of sampled tiles uses
// another odd multiplier and offset, so the same tile lands on another workgroup (and,
// most likely, another compute unit), and writes slot s's tile to a compact area
// (compact = 1) to be compared bit for bit.
#include "matrix_common.glsl"

layout(push_constant) uniform Push {
    uint m;
    uint n;
    uint k;
    uint tile_first;
    uint tile_count;
    uint mul;
    uint add;
    uint compact;
    uint out_base;
    uint b_base;
} pc;

layout(set = 0, binding = 1, std430) restrict writeonly buffer C { uint c[]; };

// The first row and column of the tile that `slot` computes.
uvec2 tile_origin(uint slot) {
    uint tiles_n = pc.n / TILE;
    uint tiles = (pc.m / TILE) * tiles_n;
    uint tile = (slot * pc.mul + pc.add) & (tiles - 1u);
    return uvec2((tile / tiles_n) * TILE, (tile % tiles_n) * TILE);
}
