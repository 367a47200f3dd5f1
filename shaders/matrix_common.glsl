// Shared by the matrix workload's shaders: the inputs' generator and the layout of the
// auxiliary buffer, mirrored in src/workload/matrix/ (locate.rs and gpu.rs).
//
// Why the checks can be exact. Every input is a small integer, -31..31, chosen from a
// hash of the seed and its position. Such values are exact in fp32, fp16, bf16 and int8;
// every product (at most 961 in magnitude) is exact in fp16 and fp32; every sum of K
// products (at most K x 961 < 2^24 for K <= 16384) is exact in fp32. So every element
// of C is an exact integer whatever order the hardware adds in: the checksums below are
// compared with a bound of zero, not a tolerance derived from the input ranges, and a
// single flipped bit anywhere in C is found. Checksums are summed in int32, where they
// cannot overflow either: |C| <= 16384 x 961, and 64 of them stay below 2^31.
#extension GL_GOOGLE_include_directive : require

// Output tile edge: each workgroup of the GEMM computes a TILE x TILE block of C, and the
// checksums are kept per tile, so that a mismatch names its tile.
const uint TILE = 64u;
const uint TILE_ELEMS = TILE * TILE;

// Counters at the start of the auxiliary buffer, then records of RECORD_WORDS words.
const uint C_ROWS = 0u;       // tile rows whose sum disagrees with its checksum
const uint C_COLS = 1u;       // tile columns whose sum disagrees with its checksum
const uint C_INVALID = 2u;    // elements that are not an integer in range (float kinds)
const uint C_NONFINITE = 3u;  // of those, NaN or infinite
const uint C_REDUNDANT = 4u;  // elements whose recomputation differs bit for bit
const uint C_SLOTS = 5u;      // row and column records claimed
const uint C_ELEMENT_SLOTS = 6u; // element records (invalid, redundant) claimed
// Row and column records take the first half of the record capacity and element records
// the second, so that a tile full of wrong elements cannot crowd out the rows and
// columns that locate it.
const uint RECORDS_AT = 16u;
const uint RECORD_WORDS = 6u; // what, a, b, expected, actual, workgroup

const uint REC_ROW = 1u;       // a = row, b = tile column
const uint REC_COL = 2u;       // a = tile row, b = column
const uint REC_INVALID = 3u;   // a = row, b = column, actual = bits
const uint REC_REDUNDANT = 4u; // a = row, b = column, expected = first run, actual = second

uint hash(uint x) {
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return x;
}

// Word `w` of the inputs (A's M x K elements, then B's K x N, both row-major, four
// signed bytes per word, the first element in the low byte).
uint source_word(uint seed, uint w) {
    uint h = hash(w * 0x9E3779B1u + seed);
    uint word = 0u;
    for (uint q = 0u; q < 4u; q++) {
        int v = int((h >> (8u * q)) & 0xFFu) % 63 - 31;
        word |= (uint(v) & 0xFFu) << (8u * q);
    }
    return word;
}

// Element `e` of a run of packed signed bytes starting at word `base` of `words`.
#define BYTE_AT(words, base, e) bitfieldExtract(int(words[(base) + ((e) >> 2)]), int(((e) & 3u) * 8u), 8)
