// Verification of one invocation's elements, shared by the verify and rewrite shaders;
// the including file defines `uvec4 load(uint element)`. The fast path only ORs the
// differences; an invocation whose elements differed re-reads them and records each
// failing word.
//
// Counting: a card with millions of wrong words must still finish each dispatch well
// within the fence timeout, so no wrong word touches a global counter. Each invocation
// tallies its own words, the workgroup sums the tallies in shared memory, and after a
// barrier one invocation per non-zero bin adds the workgroup's total to the global 64-bit
// counter. `main` starts with `Tally t = counters_begin();` and ends with
// `counters_end(t);`, in every invocation (both hold barriers: no invocation may return early). The host keeps a
// workgroup's words below 2^32 / 33, so no 32-bit tally or shared bin can overflow.

// Shared bins; global_bin() maps each onto the results layout.
const uint S_COUNT = 0u;    // failing words
const uint S_NBITS = 1u;    // 33 bins: flipped bits per failing word
const uint S_BITPOS = 34u;  // 32 bins: failing bit positions
const uint S_UP = 66u;      // bits read 1 that were written 0
const uint S_DOWN = 67u;    // bits read 0 that were written 1
const uint S_BINS = 68u;
shared uint s_bins[S_BINS];

// One invocation's tallies, kept in a local variable (not a global, which a CPU Vulkan
// driver keeps in memory) and handed down by reference.
struct Tally {
    uint count;
    uint up;
    uint down;
    // Failing bit positions as bit-sliced counters: bit b of slice i (x, y, z, w of lo,
    // then of hi) is bit i of the count for position b. A word is added with a ripple of
    // ANDs and XORs instead of a loop over its set bits (a loop that a CPU Vulkan driver
    // also miscompiled, losing words).
    uvec4 lo;
    uvec4 hi;
    uint sliced;       // words held in the slices, at most SLICE_CAPACITY
    bool slots_left;   // false once a claim found the records full: stop asking
};
const uint SLICE_CAPACITY = 255u;

Tally counters_begin() {
    // The loop bound is uniform: every invocation reaches the barrier.
    for (uint base = 0u; base < S_BINS; base += gl_WorkGroupSize.x) {
        uint i = base + gl_LocalInvocationIndex;
        if (i < S_BINS) {
            s_bins[i] = 0u;
        }
    }
    memoryBarrierShared();
    barrier();
    return Tally(0u, 0u, 0u, uvec4(0u), uvec4(0u), 0u, true);
}

// Empties the bit slices into the shared bit-position bins.
void flush_slices(inout Tally t) {
    const uvec4 low = uvec4(0u, 1u, 2u, 3u);
    const uvec4 high = uvec4(4u, 5u, 6u, 7u);
    for (uint b = 0u; b < 32u; b++) {
        uvec4 v = (((t.lo >> b) & 1u) << low) | (((t.hi >> b) & 1u) << high);
        uint n = v.x | v.y | v.z | v.w;
        if (n != 0u) {
            atomicAdd(s_bins[S_BITPOS + b], n);
        }
    }
    t.lo = uvec4(0u);
    t.hi = uvec4(0u);
    t.sliced = 0u;
}

// One full-adder stage of the bit slices.
#define SLICE_ADD(s) { uint c_ = (s) & carry; (s) ^= carry; carry = c_; }

void count_word(inout Tally t, uint expected, uint actual) {
    uint d = expected ^ actual;
    t.count += 1u;
    t.up += uint(bitCount(d & actual));
    t.down += uint(bitCount(d & expected));
    atomicAdd(s_bins[S_NBITS + uint(bitCount(d))], 1u);
    uint carry = d;
    SLICE_ADD(t.lo.x) SLICE_ADD(t.lo.y) SLICE_ADD(t.lo.z) SLICE_ADD(t.lo.w)
    SLICE_ADD(t.hi.x) SLICE_ADD(t.hi.y) SLICE_ADD(t.hi.z) SLICE_ADD(t.hi.w)
    t.sliced += 1u;
    if (t.sliced == SLICE_CAPACITY) {
        flush_slices(t);
    }
}

void record_word(inout Tally t, uint local_word, uint expected, uint actual, uint flags,
                 uint span) {
    count_word(t, expected, actual);
    // Read before claiming so the slot counter can never wrap around.
    if (t.slots_left) {
        uint slot = pc.record_capacity;
        if (res.r[R_SLOTS] < pc.record_capacity) {
            slot = atomicAdd(res.r[R_SLOTS], 1u);
        }
        if (slot < pc.record_capacity) {
            uint carry;
            uint lo = uaddCarry(pc.word_lo, local_word, carry);
            uint at = R_RECORDS + slot * REC_WORDS;
            res.r[at + 0u] = lo;
            res.r[at + 1u] = pc.word_hi + carry;
            res.r[at + 2u] = expected;
            res.r[at + 3u] = actual;
            res.r[at + 4u] = pc.buffer_index;
            res.r[at + 5u] = flags;
            res.r[at + 6u] = span;
            res.r[at + 7u] = elem_stride();
        } else {
            t.slots_left = false;
        }
    }
}

void record_element(inout Tally t, uint e, uvec4 expected, uvec4 actual) {
    for (uint c = 0u; c < 4u; c++) {
        if (expected[c] != actual[c]) {
            record_word(t, e * 4u + c, expected[c], actual[c], 0u, 0u);
        }
    }
}

// The results word of shared bin i.
uint global_bin(uint i) {
    if (i == S_COUNT) {
        return R_COUNT;
    }
    if (i < S_BITPOS) {
        return R_NBITS + 2u * (i - S_NBITS);
    }
    if (i < S_UP) {
        return R_BITPOS + 2u * (i - S_BITPOS);
    }
    return i == S_UP ? R_UP : R_DOWN;
}

void counters_end(Tally t) {
    if (t.sliced != 0u) {
        flush_slices(t);
    }
    if (t.count != 0u) {
        atomicAdd(s_bins[S_COUNT], t.count);
        atomicAdd(s_bins[S_UP], t.up);
        atomicAdd(s_bins[S_DOWN], t.down);
    }
    memoryBarrierShared();
    barrier();
    for (uint base = 0u; base < S_BINS; base += gl_WorkGroupSize.x) {
        uint i = base + gl_LocalInvocationIndex;
        if (i < S_BINS) {
            uint n = s_bins[i];
            if (n != 0u) {
                add64(global_bin(i), n);
            }
        }
    }
}

void check(inout Tally t, uint inv) {
    uint first = inv * inv_stride();
    uint es = elem_stride();
    // Four loads in flight per iteration (VECS_PER_INV is a multiple of 4).
    uvec4 acc0 = uvec4(0u);
    uvec4 acc1 = uvec4(0u);
    for (uint k = 0u; k < VECS_PER_INV; k += 4u) {
        uint e = first + k * es;
        uvec4 a0 = load(e);
        uvec4 a1 = load(e + es);
        uvec4 a2 = load(e + 2u * es);
        uvec4 a3 = load(e + 3u * es);
        acc0 |= (a0 ^ pattern4(e * 4u)) | (a1 ^ pattern4((e + es) * 4u));
        acc1 |= (a2 ^ pattern4((e + 2u * es) * 4u)) | (a3 ^ pattern4((e + 3u * es) * 4u));
    }
    uvec4 acc = acc0 | acc1;
    if (any(notEqual(acc, uvec4(0u)))) {
        bool found = false;
        for (uint k = 0u; k < VECS_PER_INV; k++) {
            uint e = element(inv, k);
            uvec4 expected = pattern4(e * 4u);
            uvec4 actual = load(e);
            if (any(notEqual(actual, expected))) {
                found = true;
                record_element(t, e, expected, actual);
            }
        }
        if (!found) {
            // The re-read was right: a read went wrong in transit. Keep it, with the bits.
            record_word(t, element(inv, 0u) * 4u, 0u, acc.x | acc.y | acc.z | acc.w,
                        FLAG_TRANSIENT, VECS_PER_INV);
        }
    }
}
