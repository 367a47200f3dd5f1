#version 450
// Touches single words named in a list: reads them (retest), or rewrites them as
// ((source & and_mask) | or_mask) ^ xor_mask (retest writes and planted faults).
layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
    uint count;   // entries in the list
    uint mode;    // 0: read, 1: write
    uint first;   // first entry of this buffer's list
} pc;

layout(set = 0, binding = 0, std430) restrict buffer Data { uint w[]; } data;

struct Entry {
    uint word;      // word index within the buffer
    uint and_mask;
    uint or_mask;
    uint xor_mask;
    uint source;    // word to take the value from (itself for in-place)
    uint value;     // read: the value read
    uint pad0;
    uint pad1;
};
layout(set = 0, binding = 2, std430) restrict buffer Probe { Entry e[]; } probe;

void main() {
    uint n = gl_GlobalInvocationID.x;
    if (n >= pc.count) {
        return;
    }
    uint i = pc.first + n;
    Entry en = probe.e[i];
    if (pc.mode == 0u) {
        probe.e[i].value = data.w[en.word];
    } else {
        uint v = data.w[en.source];
        data.w[en.word] = ((v & en.and_mask) | en.or_mask) ^ en.xor_mask;
    }
}
