// Shared by the VRAM test shaders: push constants, pattern functions and the results
// layout, which is mirrored in src/workload/vram/layout.rs.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;
// Which per-word pattern this pipeline generates; a specialization constant so that
// each pattern gets its own pipeline with no per-word branch on the kind.
layout(constant_id = 1) const uint PATTERN = 0;
const uint PATTERN_CONST = 0u;
const uint PATTERN_ADDRESS = 1u;
const uint PATTERN_RANDOM = 2u;
const uint PATTERN_MOD20 = 3u;
// 16-byte elements each invocation handles, and how they lie, as specialization
// constants: a loop whose trip count the compiler knows runs 1.6-1.9x faster on a CPU
// Vulkan driver than one bounded by a push constant, and the contiguous layout's address
// arithmetic folds away. The host keeps VECS_PER_INV a multiple of 4.
layout(constant_id = 2) const uint VECS_PER_INV = 4u;
// 1: each invocation owns a contiguous run; 0: neighbouring invocations touch
// neighbouring elements (coalesced).
layout(constant_id = 3) const uint CONTIGUOUS = 1u;

layout(push_constant) uniform Push {
    uint start_vec;      // first 16-byte element of this dispatch, within the buffer
    uint invocations;    // invocations in the dispatch
    uint word_lo;        // absolute word index of the dispatch's first word, low half
    uint word_hi;        // ... high half (the host never lets a dispatch cross 2^32 words)
    uint key;            // pattern key: the constant, or the hashed seed
    uint invert;         // XOR applied to every pattern word (0 or ~0)
    uint mod_base;       // (absolute word index of the first word) % 20
    uint mod_offset;     // modulo-20: the residue that receives the pattern
    uint flip;           // rewrite: the new value is expected ^ flip
    uint descending;     // rewrite: 1 sweeps each invocation's elements downwards
    uint buffer_index;   // which test buffer, for the error records
    uint record_capacity;// records the results buffer can hold
} pc;

layout(set = 0, binding = 1, std430) restrict buffer Results { uint r[]; } res;

const uint R_COUNT = 0u;      // u64 error word count
const uint R_SLOTS = 2u;      // record slots claimed
const uint R_NBITS = 4u;      // 33 x u64: flipped-bit-count histogram
const uint R_BITPOS = 70u;    // 32 x u64: failing bit position histogram
const uint R_UP = 134u;       // u64: bits read 1 that were written 0
const uint R_DOWN = 136u;     // u64: bits read 0 that were written 1
const uint R_RECORDS = 144u;  // records of 8 words each
const uint REC_WORDS = 8u;
const uint FLAG_TRANSIENT = 1u; // the first read differed, a re-read of the whole span did not

uint hash_address(uint lo) {
    // Cheap bijection of the index: every word differs from its neighbours in many
    // bits, and the host can invert it to find which address a wrong value came from.
    uint x = lo * 0x9E3779B1u + pc.key;
    return x ^ (x >> 15);
}

uint hash_random(uint lo) {
    // Counter-based generator: a full-avalanche 32-bit bijection of (index ^ key).
    uint x = lo ^ pc.key;
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return x;
}

// The pattern of the four words starting at word `local_word` of this dispatch.
uvec4 pattern4(uint local_word) {
    uvec4 v;
    if (PATTERN == PATTERN_CONST) {
        v = uvec4(pc.key);
    } else if (PATTERN == PATTERN_ADDRESS) {
        // hash_address of four consecutive indices, with one multiply.
        uint x = (pc.word_lo + local_word) * 0x9E3779B1u + pc.key;
        uvec4 xs = uvec4(x) + uvec4(0u, 0x9E3779B1u, 0x3C6EF362u, 0xDAA66D13u);
        v = xs ^ (xs >> 15u);
    } else if (PATTERN == PATTERN_RANDOM) {
        uint lo = pc.word_lo + local_word;
        v = uvec4(hash_random(lo), hash_random(lo + 1u), hash_random(lo + 2u), hash_random(lo + 3u));
    } else {
        uint m = (pc.mod_base + local_word) % 20u;
        uvec4 ms = uvec4(m, m + 1u, m + 2u, m + 3u);
        ms = mix(ms, ms - 20u, greaterThanEqual(ms, uvec4(20u)));
        uvec4 hit = uvec4(equal(ms, uvec4(pc.mod_offset)));
        // hit is 1 where the word takes the pattern, 0 where it takes the complement.
        v = uvec4(pc.key) ^ (~(hit * 0xFFFFFFFFu));
    }
    return v ^ uvec4(pc.invert);
}

// Element distance between neighbouring invocations.
uint inv_stride() {
    return CONTIGUOUS != 0u ? VECS_PER_INV : 1u;
}

// Element distance between an invocation's consecutive elements.
uint elem_stride() {
    return CONTIGUOUS != 0u ? 1u : pc.invocations;
}

// Element index (relative to the dispatch) of an invocation's k-th element.
uint element(uint inv, uint k) {
    return inv * inv_stride() + k * elem_stride();
}

// Adds n to the global 64-bit counter at word `at`. Called once per non-zero bin per
// workgroup (see vram_check.glsl), never per wrong word.
void add64(uint at, uint n) {
    uint old = atomicAdd(res.r[at], n);
    if (old + n < old) {
        atomicAdd(res.r[at + 1u], 1u);
    }
}
