// Verification of one invocation's elements, shared by the verify and rewrite shaders;
// the including file defines `uvec4 load(uint element)`. The fast path only ORs the
// differences; an invocation whose elements differed re-reads them and records each
// failing word.

void check(uint inv) {
    uint first = inv * pc.inv_stride;
    uint es = pc.elem_stride;
    // Four loads in flight per iteration; the host keeps vecs_per_inv a multiple of 4.
    uvec4 acc0 = uvec4(0u);
    uvec4 acc1 = uvec4(0u);
    for (uint k = 0u; k < pc.vecs_per_inv; k += 4u) {
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
        for (uint k = 0u; k < pc.vecs_per_inv; k++) {
            uint e = element(inv, k);
            uvec4 expected = pattern4(e * 4u);
            uvec4 actual = load(e);
            if (any(notEqual(actual, expected))) {
                found = true;
                record_element(e, expected, actual);
            }
        }
        if (!found) {
            // The re-read was right: a read went wrong in transit. Keep it, with the bits.
            record_word(element(inv, 0u) * 4u, 0u, acc.x | acc.y | acc.z | acc.w,
                        FLAG_TRANSIENT, pc.vecs_per_inv);
        }
    }
}
