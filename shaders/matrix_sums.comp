#version 450
// The checksums the GEMM's output is held against, from the packed inputs, in int32
// (exact: see matrix_common.glsl). Stage 0 sums A over each tile's rows (SA, per tile
// row and k) and B over each tile's columns (SB, per k and tile column). Stage 1 gives
// what each row of each tile must sum to, ER[i][tj] = A[i,:] . SB[tj,:], and what each
// column must sum to, EC[ti][j] = SA[ti,:] . B[:,j]: 2/TILE of the GEMM's work, on the
// integer units rather than the GEMM's path.
#extension GL_GOOGLE_include_directive : require
#include "matrix_common.glsl"

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
    uint m;
    uint n;
    uint k;
    uint src_base;  // A's packed bytes; B's follow at src_base + m*k/4
    uint sa_base;   // (m/TILE) x k
    uint sb_base;   // (n/TILE) x k
    uint er_base;   // m x (n/TILE)
    uint ec_base;   // (m/TILE) x n
    uint stage;
} pc;

layout(set = 0, binding = 2, std430) restrict buffer Aux { uint aux[]; };

int a_at(uint i, uint kk) { return BYTE_AT(aux, pc.src_base, i * pc.k + kk); }
int b_at(uint kk, uint j) { return BYTE_AT(aux, pc.src_base + pc.m * pc.k / 4u, kk * pc.n + j); }

void main() {
    uint stride = gl_NumWorkGroups.x * 256u;
    uint tm = pc.m / TILE;
    uint tn = pc.n / TILE;
    if (pc.stage == 0u) {
        uint total = (tm + tn) * pc.k;
        for (uint x = gl_GlobalInvocationID.x; x < total; x += stride) {
            int sum = 0;
            if (x < tm * pc.k) {
                uint ti = x / pc.k;
                uint kk = x % pc.k;
                for (uint r = 0u; r < TILE; r++) {
                    sum += a_at(ti * TILE + r, kk);
                }
                aux[pc.sa_base + x] = uint(sum);
            } else {
                uint y = x - tm * pc.k;
                uint tj = y / pc.k;
                uint kk = y % pc.k;
                for (uint c = 0u; c < TILE; c++) {
                    sum += b_at(kk, tj * TILE + c);
                }
                aux[pc.sb_base + y] = uint(sum);
            }
        }
    } else {
        uint rows = pc.m * tn;
        uint total = rows + tm * pc.n;
        for (uint x = gl_GlobalInvocationID.x; x < total; x += stride) {
            int sum = 0;
            if (x < rows) {
                uint i = x / tn;
                uint tj = x % tn;
                for (uint kk = 0u; kk < pc.k; kk++) {
                    sum += a_at(i, kk) * int(aux[pc.sb_base + tj * pc.k + kk]);
                }
                aux[pc.er_base + x] = uint(sum);
            } else {
                uint y = x - rows;
                uint ti = y / pc.n;
                uint j = y % pc.n;
                for (uint kk = 0u; kk < pc.k; kk++) {
                    sum += int(aux[pc.sa_base + ti * pc.k + kk]) * b_at(kk, j);
                }
                aux[pc.ec_base + y] = uint(sum);
            }
        }
    }
}
