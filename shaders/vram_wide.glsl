// 32-byte pattern elements for the contiguous layout's wide stores (needs int64).
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

// The pattern of the eight words starting at word `local_word`, packed little-endian.
u64vec4 pattern8(uint local_word) {
    uvec4 a = pattern4(local_word);
    uvec4 b = pattern4(local_word + 4u);
    return u64vec4(packUint2x32(a.xy), packUint2x32(a.zw), packUint2x32(b.xy), packUint2x32(b.zw));
}
