#version 450
// Plants a fault in the GEMM's output between the multiplication and the checks: XOR of
// `xor` into a rectangle of C (one element, or a whole tile). The self-test and the
// detector tests use it to show every wrong output is found at its coordinates.
layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
    uint n;
    uint row0;
    uint col0;
    uint rows;
    uint cols;
    uint xor_mask;
} pc;

layout(set = 0, binding = 1, std430) restrict buffer C { uint c[]; };

void main() {
    uint stride = gl_NumWorkGroups.x * 256u;
    for (uint x = gl_GlobalInvocationID.x; x < pc.rows * pc.cols; x += stride) {
        c[(pc.row0 + x / pc.cols) * pc.n + pc.col0 + x % pc.cols] ^= pc.xor_mask;
    }
}
