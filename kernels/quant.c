/* quant.c — GGUF weight types: block sizes and dequantisation of one row to f32.
 *
 * Layout of this file:
 *   1. the type table (name, values per block, bytes per block)
 *   2. the reference dequantisers, one per type, each with its block layout in a comment
 *   3. the vectorised dequantisers (the vec16 layer, kernels/vec16.h: AVX-512, AVX2, NEON or
 *      plain C) for the hot types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q6_K, F16, BF16; Gemma 3
 *      270M Q4_K_M stores most of its matrices as Q5_0 because 640-wide rows do not fit 256-value
 *      K-quant blocks), and IQ4_NL, IQ4_XS, MXFP4
 *   4. fused dequantise-and-dot kernels for decode (the same layer): the same values, never
 *      stored; for the codebook (IQ2/IQ3/IQ1) and ternary types one description of a block's
 *      values 16 at a time serves both the fused kernel and a dequantiser
 *   5. the row entry points
 *
 * All multi-byte fields are little-endian (GGUF is little-endian; so is every machine we build
 * on). "fp16" is an IEEE half. Blocks sit at any alignment, so fields are read with memcpy or
 * unaligned vector loads.
 *
 * Exactness (why the fast and the reference path agree bit for bit): a value is a product of an
 * fp16 d (at most 11 significant bits), for K-quants a small integer block scale (at most 7 bits:
 * Q6_K's int8) and the code q (at most 7 bits: Q8_0's int8); the significant bits add up to at
 * most 24 (Q6_K: 11 + 7 + 5, |q| <= 32) and the magnitudes stay far inside f32's normal range, so
 * each product is exact in f32 whatever the order. The types with a minimum then do one rounded
 * subtraction or addition of another exact product. Both paths compute the same operands
 * and the same single rounding, so FMA contraction (off in this build anyway) could not change a
 * result either. The IQ / MXFP4 / ternary types are products of short factors too (the bit counts
 * are worked out above ref_iq4_nl). fp16 fields and F16 values are converted with fp16_to_f32() in
 * the reference and with the layer's v_half1 / v_load_f16 in the fast path (F16C, fcvt or the same
 * C conversion): the same f32 for every half, a NaN quieted in both.
 */
#include "kernels/quant.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/fp16.h"
#include "kernels/quant_tables.h"

/* ---------------------------------------------------------------------------------------------
 * 1. Type table
 * ------------------------------------------------------------------------------------------- */

#define QK_K 256   /* values per K-quant super-block */

typedef struct {
    const char *name;
    int block_values;      /* 0: we cannot dequantise this type (named only for messages) */
    size_t block_bytes;
} quant_traits;

/* Indexed by type number. Names follow ggml's; numbers 4, 5, 31-33 and 36-38 are retired. */
static const quant_traits quant_table[] = {
    [GGUF_T_F32]  = {"F32", 1, 4},
    [GGUF_T_F16]  = {"F16", 1, 2},
    [GGUF_T_Q4_0] = {"Q4_0", 32, 2 + 16},
    [GGUF_T_Q4_1] = {"Q4_1", 32, 2 + 2 + 16},
    [GGUF_T_Q5_0] = {"Q5_0", 32, 2 + 4 + 16},
    [GGUF_T_Q5_1] = {"Q5_1", 32, 2 + 2 + 4 + 16},
    [GGUF_T_Q8_0] = {"Q8_0", 32, 2 + 32},
    [GGUF_T_Q8_1] = {"Q8_1", 0, 0},
    [GGUF_T_Q2_K] = {"Q2_K", QK_K, 16 + 64 + 2 + 2},
    [GGUF_T_Q3_K] = {"Q3_K", QK_K, 32 + 64 + 12 + 2},
    [GGUF_T_Q4_K] = {"Q4_K", QK_K, 2 + 2 + 12 + 128},
    [GGUF_T_Q5_K] = {"Q5_K", QK_K, 2 + 2 + 12 + 32 + 128},
    [GGUF_T_Q6_K] = {"Q6_K", QK_K, 128 + 64 + 16 + 2},
    [GGUF_T_Q8_K] = {"Q8_K", 0, 0},
    [QUANT_T_IQ2_XXS] = {"IQ2_XXS", QK_K, 2 + 64},
    [QUANT_T_IQ2_XS]  = {"IQ2_XS", QK_K, 2 + 64 + 8},
    [QUANT_T_IQ3_XXS] = {"IQ3_XXS", QK_K, 2 + 64 + 32},
    [QUANT_T_IQ1_S]   = {"IQ1_S", QK_K, 2 + 32 + 16},
    [QUANT_T_IQ4_NL]  = {"IQ4_NL", 32, 2 + 16},
    [QUANT_T_IQ3_S]   = {"IQ3_S", QK_K, 2 + 64 + 8 + 32 + 4},
    [QUANT_T_IQ2_S]   = {"IQ2_S", QK_K, 2 + 32 + 32 + 8 + 8},
    [QUANT_T_IQ4_XS]  = {"IQ4_XS", QK_K, 2 + 2 + 4 + 128},
    [GGUF_T_I8]  = {"I8", 0, 0},  [GGUF_T_I16] = {"I16", 0, 0}, [GGUF_T_I32] = {"I32", 0, 0},
    [GGUF_T_I64] = {"I64", 0, 0}, [GGUF_T_F64] = {"F64", 0, 0},
    [QUANT_T_IQ1_M]   = {"IQ1_M", QK_K, 32 + 16 + 8},
    [GGUF_T_BF16] = {"BF16", 1, 2},
    [QUANT_T_TQ1_0]   = {"TQ1_0", QK_K, 48 + 4 + 2},
    [QUANT_T_TQ2_0]   = {"TQ2_0", QK_K, 64 + 2},
    [QUANT_T_MXFP4]   = {"MXFP4", 32, 1 + 16},
    [40] = {"NVFP4", 0, 0}, [41] = {"Q1_0", 0, 0},
};
#define QUANT_TABLE_LEN (sizeof quant_table / sizeof quant_table[0])

static const quant_traits *quant_traits_of(uint32_t type) {
    if (type >= QUANT_TABLE_LEN || quant_table[type].block_values == 0) return NULL;
    return &quant_table[type];
}

int quant_block_values(uint32_t type) {
    const quant_traits *t = quant_traits_of(type);
    return t ? t->block_values : 0;
}

size_t quant_block_bytes(uint32_t type) {
    const quant_traits *t = quant_traits_of(type);
    return t ? t->block_bytes : 0;
}

int quant_supported(uint32_t type) { return quant_traits_of(type) != NULL; }

const char *quant_type_name(uint32_t type) {
    if (type < QUANT_TABLE_LEN && quant_table[type].name) return quant_table[type].name;
    return "unknown";
}

const char *quant_type_name_buf(uint32_t type, char *buf, size_t buflen) {
    if (type < QUANT_TABLE_LEN && quant_table[type].name) return quant_table[type].name;
    if (!buf || buflen == 0) return "unknown";
    snprintf(buf, buflen, "type %u", (unsigned)type);
    return buf;
}

size_t quant_row_bytes(uint32_t type, uint64_t n) {
    const quant_traits *t = quant_traits_of(type);
    if (!t || n == 0 || n % (uint64_t)t->block_values != 0) return 0;
    uint64_t blocks = n / (uint64_t)t->block_values;
    if (blocks > SIZE_MAX / t->block_bytes) return 0;
    return (size_t)blocks * t->block_bytes;
}

/* ---------------------------------------------------------------------------------------------
 * 2. Reference dequantisers: one block at b into y[block_values].
 * ------------------------------------------------------------------------------------------- */

static float load_f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return fp16_to_f32(h);
}

/* Q4_0: 32 values in 18 bytes
 *   [0..1]   d       fp16 scale
 *   [2..17]  qs[16]  4-bit codes: value j (0..15) is the low nibble of qs[j], value j+16 its high
 *   y = d * (q - 8) */
static void ref_q4_0(const uint8_t *b, float *y) {
    float d = load_f16(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((int)(qs[j] & 0x0F) - 8);
        y[j + 16] = d * (float)((int)(qs[j] >> 4) - 8);
    }
}

/* Q4_1: 32 values in 20 bytes
 *   [0..1]   d       fp16 scale
 *   [2..3]   m       fp16 minimum
 *   [4..19]  qs[16]  4-bit codes, nibble order as Q4_0
 *   y = d * q + m */
static void ref_q4_1(const uint8_t *b, float *y) {
    float d = load_f16(b), m = load_f16(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)(qs[j] & 0x0F) + m;
        y[j + 16] = d * (float)(qs[j] >> 4) + m;
    }
}

/* Q5_0: 32 values in 22 bytes
 *   [0..1]   d       fp16 scale
 *   [2..5]   qh      uint32: bit j is the fifth (high) bit of value j
 *   [6..21]  qs[16]  low 4 bits, nibble order as Q4_0
 *   y = d * (q - 16) */
static void ref_q5_0(const uint8_t *b, float *y) {
    float d = load_f16(b);
    uint32_t qh;
    memcpy(&qh, b + 2, 4);
    const uint8_t *qs = b + 6;
    for (int j = 0; j < 16; j++) {
        int lo = (int)(qs[j] & 0x0F) | (int)(((qh >> j) & 1u) << 4);
        int hi = (int)(qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
        y[j] = d * (float)(lo - 16);
        y[j + 16] = d * (float)(hi - 16);
    }
}

/* Q5_1: 32 values in 24 bytes
 *   [0..1]   d       fp16 scale
 *   [2..3]   m       fp16 minimum
 *   [4..7]   qh      uint32, as Q5_0
 *   [8..23]  qs[16]  low 4 bits, as Q5_0
 *   y = d * q + m */
static void ref_q5_1(const uint8_t *b, float *y) {
    float d = load_f16(b), m = load_f16(b + 2);
    uint32_t qh;
    memcpy(&qh, b + 4, 4);
    const uint8_t *qs = b + 8;
    for (int j = 0; j < 16; j++) {
        int lo = (int)(qs[j] & 0x0F) | (int)(((qh >> j) & 1u) << 4);
        int hi = (int)(qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
        y[j] = d * (float)lo + m;
        y[j + 16] = d * (float)hi + m;
    }
}

/* Q8_0: 32 values in 34 bytes
 *   [0..1]   d       fp16 scale
 *   [2..33]  qs[32]  int8 codes, value j = qs[j]
 *   y = d * q */
static void ref_q8_0(const uint8_t *b, float *y) {
    float d = load_f16(b);
    const int8_t *qs = (const int8_t *)(b + 2);
    for (int j = 0; j < 32; j++) y[j] = d * (float)qs[j];
}

/* Q2_K: 256 values in 84 bytes, 16 groups of 16 values
 *   [0..15]   scales[16]  group g: low nibble = scale sc, high nibble = minimum m
 *   [16..79]  qs[64]      2-bit codes: value 128h + 32s + l (h 0..1, s 0..3, l 0..31) is
 *                         bits 2s..2s+1 of qs[32h + l]
 *   [80..81]  d           fp16 super-scale of the scales
 *   [82..83]  dmin        fp16 super-scale of the minimums
 *   value e in group g = e/16:  y = (d*sc[g]) * q - (dmin*m[g]) */
static void ref_q2_k(const uint8_t *b, float *y) {
    const uint8_t *scales = b, *qs = b + 16;
    float d = load_f16(b + 80), dmin = load_f16(b + 82);
    for (int e = 0; e < QK_K; e++) {
        int h = e / 128, s = (e % 128) / 32, l = e % 32, g = e / 16;
        int q = (qs[32 * h + l] >> (2 * s)) & 3;
        float dl = d * (float)(scales[g] & 0x0F);
        float ml = dmin * (float)(scales[g] >> 4);
        y[e] = dl * (float)q - ml;
    }
}

/* Q3_K: 256 values in 110 bytes, 16 groups of 16 values
 *   [0..31]    hmask[32]   high bit: value 128h + 32s + l has bit (4h + s) of hmask[l]
 *   [32..95]   qs[64]      low 2 bits: value 128h + 32s + l is bits 2s..2s+1 of qs[32h + l]
 *   [96..107]  scales[12]  16 signed 6-bit scales (stored + 32): scale k's low 4 bits are the
 *                          low nibble of byte k (k < 8) or the high nibble of byte k-8 (k >= 8);
 *                          its high 2 bits are bits 2(k/4)..2(k/4)+1 of byte 8 + k%4
 *   [108..109] d           fp16 super-scale
 *   q = low2 - 4 when the high bit is 0, low2 when it is 1 (range -4..3)
 *   value e in group g = e/16:  y = (d*(scale[g] - 32)) * q */
static void ref_q3_k(const uint8_t *b, float *y) {
    const uint8_t *hmask = b, *qs = b + 32, *sc = b + 96;
    float d = load_f16(b + 108);
    int scale[16];
    for (int k = 0; k < 16; k++) {
        int low = k < 8 ? (sc[k] & 0x0F) : (sc[k - 8] >> 4);
        int high = (sc[8 + k % 4] >> (2 * (k / 4))) & 3;
        scale[k] = (low | (high << 4)) - 32;
    }
    for (int e = 0; e < QK_K; e++) {
        int h = e / 128, s = (e % 128) / 32, l = e % 32;
        int low2 = (qs[32 * h + l] >> (2 * s)) & 3;
        int hbit = (hmask[l] >> (4 * h + s)) & 1;
        int q = low2 - (hbit ? 0 : 4);
        float dl = d * (float)scale[e / 16];
        y[e] = dl * (float)q;
    }
}

/* The 12-byte scale block shared by Q4_K and Q5_K: 8 groups, each with a 6-bit scale sc[j] and a
 * 6-bit minimum m[j].
 *   j < 4:  sc = s[j] & 63,                          m = s[j+4] & 63
 *   j >= 4: sc = (s[j+4] & 15) | (s[j-4] >> 6) << 4, m = (s[j+4] >> 4) | (s[j] >> 6) << 4 */
static void k_scale_min(const uint8_t *s, int sc[8], int m[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        m[j] = s[j + 4] & 63;
    }
    for (int j = 4; j < 8; j++) {
        sc[j] = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        m[j] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Q4_K: 256 values in 144 bytes, 8 groups of 32 values
 *   [0..1]    d           fp16 super-scale of the scales
 *   [2..3]    dmin        fp16 super-scale of the minimums
 *   [4..15]   scales[12]  8 x (6-bit scale, 6-bit minimum), see k_scale_min
 *   [16..143] qs[128]     4-bit codes: group 2c (c 0..3) value l is the low nibble of qs[32c + l],
 *                         group 2c+1 value l its high nibble
 *   value l of group g:  y = (d*sc[g]) * q - (dmin*m[g]) */
static void ref_q4_k(const uint8_t *b, float *y) {
    float d = load_f16(b), dmin = load_f16(b + 2);
    int sc[8], m[8];
    k_scale_min(b + 4, sc, m);
    const uint8_t *qs = b + 16;
    for (int g = 0; g < 8; g++) {
        float dl = d * (float)sc[g], ml = dmin * (float)m[g];
        int c = g / 2, shift = 4 * (g % 2);
        for (int l = 0; l < 32; l++) {
            int q = (qs[32 * c + l] >> shift) & 0x0F;
            y[32 * g + l] = dl * (float)q - ml;
        }
    }
}

/* Q5_K: 256 values in 176 bytes, 8 groups of 32 values
 *   [0..1]    d, [2..3] dmin, [4..15] scales[12]   as Q4_K
 *   [16..47]  qh[32]      fifth bit: value l of group g has bit g of qh[l]
 *   [48..175] qs[128]     low 4 bits, as Q4_K
 *   value l of group g:  y = (d*sc[g]) * q - (dmin*m[g]) */
static void ref_q5_k(const uint8_t *b, float *y) {
    float d = load_f16(b), dmin = load_f16(b + 2);
    int sc[8], m[8];
    k_scale_min(b + 4, sc, m);
    const uint8_t *qh = b + 16, *qs = b + 48;
    for (int g = 0; g < 8; g++) {
        float dl = d * (float)sc[g], ml = dmin * (float)m[g];
        int c = g / 2, shift = 4 * (g % 2);
        for (int l = 0; l < 32; l++) {
            int q = ((qs[32 * c + l] >> shift) & 0x0F) | (((qh[l] >> g) & 1) << 4);
            y[32 * g + l] = dl * (float)q - ml;
        }
    }
}

/* Q6_K: 256 values in 210 bytes, 16 groups of 16 values
 *   [0..127]    ql[128]     low 4 bits: value 128h + 32s + l (h 0..1, s 0..3, l 0..31) is nibble
 *                           s/2 (0 = low, 1 = high) of ql[64h + 32(s%2) + l]
 *   [128..191]  qh[64]      high 2 bits: bits 2s..2s+1 of qh[32h + l]
 *   [192..207]  scales[16]  int8 scale per group of 16
 *   [208..209]  d           fp16 super-scale
 *   q = (low4 | high2 << 4) - 32 (range -32..31)
 *   value e in group g = e/16:  y = (d*scales[g]) * q */
static void ref_q6_k(const uint8_t *b, float *y) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *scales = (const int8_t *)(b + 192);
    float d = load_f16(b + 208);
    for (int e = 0; e < QK_K; e++) {
        int h = e / 128, s = (e % 128) / 32, l = e % 32;
        int low4 = (ql[64 * h + 32 * (s % 2) + l] >> (4 * (s / 2))) & 0x0F;
        int high2 = (qh[32 * h + l] >> (2 * s)) & 3;
        int q = (low4 | (high2 << 4)) - 32;
        float dl = d * (float)scales[e / 16];
        y[e] = dl * (float)q;
    }
}

/* ---- the IQ, MXFP4 and ternary types ------------------------------------------------------------
 * Codebooks (quant_tables.h): a grid entry holds 4 or 8 small values, read as bytes in memory order.
 * Every value below is a product of short factors, so it is exact in f32 whatever the order of the
 * multiplications (the header's exactness note): IQ2 grids 11 (d) + 5 (2s+1) + 6 (grid <= 43) bits;
 * IQ3_XXS 11 + 5 + 5 (62 = 2*31); IQ3_S 11 + 5 + 4; IQ1 11 + 4 + 4 (grid +- 1/8 = k/8, k <= 9);
 * IQ4_XS 11 + 5 + 7 (|kvalue| <= 127); the operands stay far from f32's subnormal range (smallest
 * fp16 subnormal 2^-24 times 1/8) and from overflow. MXFP4's scale is a power of two from 2^-128 to
 * 2^127 and its codes small integers, so a product is exact or overflows to inf: the same inf on
 * every path. Sign flips (a factor -1) are exact. The expressions keep the gguf package's order. */

static const uint8_t *grid_bytes(const void *entry) { return (const uint8_t *)entry; }
static float sign_of(unsigned bits, int j) { return (bits >> j) & 1u ? -1.0f : 1.0f; }

/* IQ4_NL: 32 values in 18 bytes
 *   [0..1]   d       fp16 scale
 *   [2..17]  qs[16]  4-bit indices into kvalues_iq4nl: value j (0..15) is the low nibble of qs[j],
 *                    value j+16 its high nibble
 *   y = d * kvalues_iq4nl[q] */
static void ref_iq4_nl(const uint8_t *b, float *y) {
    float d = load_f16(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)kvalues_iq4nl[qs[j] & 0x0F];
        y[j + 16] = d * (float)kvalues_iq4nl[qs[j] >> 4];
    }
}

/* IQ4_XS: 256 values in 136 bytes, 8 groups of 32 values
 *   [0..1]    d          fp16 super-scale
 *   [2..3]    scales_h   uint16: bits 2g..2g+1 are the high 2 bits of group g's 6-bit scale
 *   [4..7]    scales_l   the low 4 bits of group g's scale: nibble g%2 (0 = low) of byte g/2
 *   [8..135]  qs[128]    4-bit indices into kvalues_iq4nl: group g value l (0..15) is the low
 *                        nibble of qs[16g + l], value l+16 its high nibble
 *   value l of group g:  y = (d * (scale[g] - 32)) * kvalues_iq4nl[q] */
static int iq4_xs_scale(const uint8_t *b, int g) {
    uint16_t sh;
    memcpy(&sh, b + 2, 2);
    return (((b[4 + g / 2] >> (4 * (g % 2))) & 0x0F) | (((sh >> (2 * g)) & 3) << 4)) - 32;
}

static void ref_iq4_xs(const uint8_t *b, float *y) {
    float d = load_f16(b);
    const uint8_t *qs = b + 8;
    for (int g = 0; g < 8; g++) {
        float dl = d * (float)iq4_xs_scale(b, g);
        for (int j = 0; j < 16; j++) {
            y[32 * g + j] = dl * (float)kvalues_iq4nl[qs[16 * g + j] & 0x0F];
            y[32 * g + 16 + j] = dl * (float)kvalues_iq4nl[qs[16 * g + j] >> 4];
        }
    }
}

/* MXFP4: 32 values in 17 bytes
 *   [0]      e       E8M0 shared exponent: the scale is 2^(e - 127); kvalues_mxfp4 are the e2m1
 *                    values doubled, so d = 2^(e - 128) (an f32 subnormal for e = 0, 1)
 *   [1..16]  qs[16]  4-bit indices into kvalues_mxfp4, nibble order as IQ4_NL
 *   y = d * kvalues_mxfp4[q] */
static float e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float d;
    memcpy(&d, &bits, 4);
    return d;
}

static void ref_mxfp4(const uint8_t *b, float *y) {
    float d = e8m0_half(b[0]);
    const uint8_t *qs = b + 1;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)kvalues_mxfp4[qs[j] & 0x0F];
        y[j + 16] = d * (float)kvalues_mxfp4[qs[j] >> 4];
    }
}

/* IQ2_XXS: 256 values in 66 bytes, 8 groups of 32 values, each 4 runs of 8
 *   [0..1]   d        fp16 super-scale
 *   [2..65]  8 x (a0, a1), two uint32 per group:
 *            byte r of a0            run r's entry in iq2xxs_grid (8 values of 0x08, 0x19, 0x2b)
 *            bits 7r..7r+6 of a1     run r's signs: ksigns_iq2xs[those bits], bit j set = value j
 *                                    negative
 *            bits 28..31 of a1       the group's scale s
 *   value j of run r of group g:  y = ((d * (0.5 + s)) * 0.25) * grid[j] * sign */
static void ref_iq2_xxs(const uint8_t *b, float *y) {
    float d = load_f16(b);
    for (int g = 0; g < 8; g++) {
        uint32_t a0, a1;
        memcpy(&a0, b + 2 + 8 * g, 4);
        memcpy(&a1, b + 6 + 8 * g, 4);
        float db = d * (0.5f + (float)(a1 >> 28)) * 0.25f;
        for (int r = 0; r < 4; r++) {
            const uint8_t *grid = grid_bytes(&iq2xxs_grid[(a0 >> (8 * r)) & 0xFF]);
            unsigned signs = ksigns_iq2xs[(a1 >> (7 * r)) & 0x7F];
            for (int j = 0; j < 8; j++) y[32 * g + 8 * r + j] = db * (float)grid[j] * sign_of(signs, j);
        }
    }
}

/* IQ2_XS: 256 values in 74 bytes, 32 runs of 8 values, a scale per two runs
 *   [0..1]    d          fp16 super-scale
 *   [2..65]   qs[32]     uint16 per run k: bits 0..8 the entry in iq2xs_grid, bits 9..15 the
 *                        signs (ksigns_iq2xs[those bits], as IQ2_XXS)
 *   [66..73]  scales[8]  scale of runs 2i, 2i+1: nibble i%2 (0 = low) of byte i/2
 *   value j of run k:  y = ((d * (0.5 + s)) * 0.25) * grid[j] * sign */
static void ref_iq2_xs(const uint8_t *b, float *y) {
    float d = load_f16(b);
    const uint8_t *scales = b + 66;
    for (int k = 0; k < 32; k++) {
        uint16_t q;
        memcpy(&q, b + 2 + 2 * k, 2);
        int s = (scales[k / 4] >> (4 * ((k / 2) % 2))) & 0x0F;
        float db = d * (0.5f + (float)s) * 0.25f;
        const uint8_t *grid = grid_bytes(&iq2xs_grid[q & 511]);
        unsigned signs = ksigns_iq2xs[q >> 9];
        for (int j = 0; j < 8; j++) y[8 * k + j] = db * (float)grid[j] * sign_of(signs, j);
    }
}

/* IQ2_S: 256 values in 82 bytes, 32 runs of 8 values, a scale per two runs
 *   [0..1]    d          fp16 super-scale
 *   [2..33]   qs[32]     low 8 bits of run k's entry in iq2s_grid (1024 entries)
 *   [34..65]  signs[32]  run k's signs: bit j of signs[k] set = value j negative
 *   [66..73]  qh[8]      high 2 bits of run k's entry: bits 2(k%4)..2(k%4)+1 of qh[k/4]
 *   [74..81]  scales[8]  as IQ2_XS
 *   value j of run k:  y = ((d * (0.5 + s)) * 0.25) * grid[j] * sign */
static void ref_iq2_s(const uint8_t *b, float *y) {
    float d = load_f16(b);
    const uint8_t *qs = b + 2, *signs = b + 34, *qh = b + 66, *scales = b + 74;
    for (int k = 0; k < 32; k++) {
        int s = (scales[k / 4] >> (4 * ((k / 2) % 2))) & 0x0F;
        float db = d * (0.5f + (float)s) * 0.25f;
        const uint8_t *grid = grid_bytes(&iq2s_grid[qs[k] | (((qh[k / 4] >> (2 * (k % 4))) & 3) << 8)]);
        for (int j = 0; j < 8; j++) y[8 * k + j] = db * (float)grid[j] * sign_of(signs[k], j);
    }
}

/* IQ3_XXS: 256 values in 98 bytes, 8 groups of 32 values, each 4 runs of 8
 *   [0..1]    d        fp16 super-scale
 *   [2..65]   qs[64]   entries in iq3xxs_grid (4 values each): values 4i..4i+3 of the block are
 *                      entry qs[i]
 *   [66..97]  a[8]     uint32 per group: bits 7r..7r+6 run r's signs (ksigns_iq2xs, as IQ2_XXS),
 *                      bits 28..31 the group's scale s
 *   value e (group g = e/32, run r = e%32/8):  y = ((d * (0.5 + s)) * 0.5) * grid * sign */
static void ref_iq3_xxs(const uint8_t *b, float *y) {
    float d = load_f16(b);
    const uint8_t *qs = b + 2;
    for (int g = 0; g < 8; g++) {
        uint32_t a;
        memcpy(&a, b + 66 + 4 * g, 4);
        float db = d * (0.5f + (float)(a >> 28)) * 0.5f;
        for (int r = 0; r < 4; r++) {
            unsigned signs = ksigns_iq2xs[(a >> (7 * r)) & 0x7F];
            for (int j = 0; j < 8; j++) {
                const uint8_t *grid = grid_bytes(&iq3xxs_grid[qs[8 * g + 2 * r + j / 4]]);
                y[32 * g + 8 * r + j] = db * (float)grid[j % 4] * sign_of(signs, j);
            }
        }
    }
}

/* IQ3_S: 256 values in 110 bytes, 8 groups of 32 values
 *   [0..1]      d          fp16 super-scale
 *   [2..65]     qs[64]     low 8 bits of the entries in iq3s_grid (512 entries, 4 values each):
 *                          values 4i..4i+3 are entry qs[i] | (bit i%8 of qh[i/8]) << 8
 *   [66..73]    qh[8]
 *   [74..105]   signs[32]  bit e%8 of signs[e/8] set = value e negative
 *   [106..109]  scales[4]  group g's scale s: nibble g%2 (0 = low) of byte g/2
 *   value e (group g = e/32):  y = (d * (1 + 2s)) * grid * sign */
static void ref_iq3_s(const uint8_t *b, float *y) {
    float d = load_f16(b);
    const uint8_t *qs = b + 2, *qh = b + 66, *signs = b + 74, *scales = b + 106;
    for (int g = 0; g < 8; g++) {
        float db = d * (float)(1 + 2 * ((scales[g / 2] >> (4 * (g % 2))) & 0x0F));
        for (int e = 32 * g; e < 32 * g + 32; e++) {
            int i = e / 4;
            const uint8_t *grid = grid_bytes(&iq3s_grid[qs[i] | (((qh[i / 8] >> (i % 8)) & 1) << 8)]);
            y[e] = db * (float)grid[e % 4] * sign_of(signs[e / 8], e % 8);
        }
    }
}

/* IQ1_S: 256 values in 50 bytes, 8 groups of 32 values, each 4 runs of 8
 *   [0..1]    d       fp16 super-scale
 *   [2..33]   qs[32]  low 8 bits of run k's entry in iq1s_grid (2048 entries of -1, 0, 1)
 *   [34..49]  qh[8]   uint16 per group g: bits 3r..3r+2 the high 3 bits of run 4g+r's entry,
 *                     bits 12..14 the scale s, bit 15 the sign of delta
 *   value j of run r of group g:  y = (d * (2s + 1)) * (grid[j] + delta), delta = +-1/8 */
static void ref_iq1_s(const uint8_t *b, float *y) {
    float d = load_f16(b);
    const uint8_t *qs = b + 2;
    for (int g = 0; g < 8; g++) {
        uint16_t h;
        memcpy(&h, b + 34 + 2 * g, 2);
        float dl = d * (float)(2 * ((h >> 12) & 7) + 1);
        float delta = h & 0x8000 ? -0.125f : 0.125f;
        for (int r = 0; r < 4; r++) {
            const int8_t *grid = (const int8_t *)&iq1s_grid[qs[4 * g + r] | (((h >> (3 * r)) & 7) << 8)];
            for (int j = 0; j < 8; j++) y[32 * g + 8 * r + j] = dl * ((float)grid[j] + delta);
        }
    }
}

/* IQ1_M: 256 values in 56 bytes, 32 runs of 8 values, a scale per two runs
 *   [0..31]   qs[32]     low 8 bits of run k's entry in iq1s_grid
 *   [32..47]  qh[16]     nibble k%2 (0 = low) of qh[k/2]: bits 0..2 the high 3 bits of run k's
 *                        entry, bit 3 the sign of its delta
 *   [48..55]  sc[4]      uint16: bits 3i..3i+2 of sc[m/4] are scale s of runs 2m, 2m+1 (m 0..15);
 *                        the fp16 super-scale d is the top nibbles: sc[0]>>12 | sc[1]>>12<<4 |
 *                        sc[2]>>12<<8 | sc[3]>>12<<12
 *   value j of run k:  y = (d * (2s + 1)) * (grid[j] + delta), delta = +-1/8 */
static void ref_iq1_m(const uint8_t *b, float *y) {
    const uint8_t *qs = b, *qh = b + 32;
    uint16_t sc[4];
    memcpy(sc, b + 48, 8);
    uint16_t dh = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
    float d = fp16_to_f32(dh);
    for (int k = 0; k < 32; k++) {
        int m = k / 2;
        float dl = d * (float)(2 * ((sc[m / 4] >> (3 * (m % 4))) & 7) + 1);
        int nib = (qh[k / 2] >> (4 * (k % 2))) & 0x0F;
        float delta = nib & 8 ? -0.125f : 0.125f;
        const int8_t *grid = (const int8_t *)&iq1s_grid[qs[k] | ((nib & 7) << 8)];
        for (int j = 0; j < 8; j++) y[8 * k + j] = dl * ((float)grid[j] + delta);
    }
}

/* TQ1_0: 256 ternary values in 54 bytes, 5 trits per byte
 *   [0..47]   qs[48]  byte v holds 5 trits t_0..t_4 as ceil(256 * (sum_k t_k 3^(4-k)) / 243), so that
 *                     trit k is ((uint8)(v * 3^k) * 3) >> 8: values 32k + l (k 0..4, l 0..31) are
 *                     trit k of qs[l]; values 160 + 16k + l (l 0..15) trit k of qs[32 + l]
 *   [48..51]  qh[4]   values 240 + 4k + l (k 0..3, l 0..3): trit k of qh[l]
 *   [52..53]  d       fp16 scale
 *   y = d * (t - 1) */
static int tq1_trit(uint8_t v, int k) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    uint8_t m = (uint8_t)(v * pow3[k]);   /* mod 256 */
    return ((int)m * 3) >> 8;
}

static void ref_tq1_0(const uint8_t *b, float *y) {
    const uint8_t *qs = b, *qh = b + 48;
    float d = load_f16(b + 52);
    for (int k = 0; k < 5; k++)
        for (int l = 0; l < 32; l++) y[32 * k + l] = d * (float)(tq1_trit(qs[l], k) - 1);
    for (int k = 0; k < 5; k++)
        for (int l = 0; l < 16; l++) y[160 + 16 * k + l] = d * (float)(tq1_trit(qs[32 + l], k) - 1);
    for (int k = 0; k < 4; k++)
        for (int l = 0; l < 4; l++) y[240 + 4 * k + l] = d * (float)(tq1_trit(qh[l], k) - 1);
}

/* TQ2_0: 256 values in 66 bytes
 *   [0..63]   qs[64]  2-bit codes: value 128h + 32s + l (h 0..1, s 0..3, l 0..31) is bits 2s..2s+1
 *                     of qs[32h + l]
 *   [64..65]  d       fp16 scale
 *   y = d * (q - 1) */
static void ref_tq2_0(const uint8_t *b, float *y) {
    float d = load_f16(b + 64);
    for (int e = 0; e < QK_K; e++) {
        int h = e / 128, s = (e % 128) / 32, l = e % 32;
        y[e] = d * (float)(((b[32 * h + l] >> (2 * s)) & 3) - 1);
    }
}

/* F32 / F16 / BF16: one value per "block" of 4 / 2 / 2 bytes. */
static void ref_f32(const uint8_t *b, float *y) { memcpy(y, b, 4); }
static void ref_f16(const uint8_t *b, float *y) { y[0] = load_f16(b); }
static void ref_bf16(const uint8_t *b, float *y) {
    uint16_t v;
    memcpy(&v, b, 2);
    y[0] = bf16_to_f32(v);
}

typedef void (*quant_block_fn)(const uint8_t *b, float *y);

static quant_block_fn quant_ref_block(uint32_t type) {
    switch (type) {
    case GGUF_T_F32: return ref_f32;
    case GGUF_T_F16: return ref_f16;
    case GGUF_T_BF16: return ref_bf16;
    case GGUF_T_Q4_0: return ref_q4_0;
    case GGUF_T_Q4_1: return ref_q4_1;
    case GGUF_T_Q5_0: return ref_q5_0;
    case GGUF_T_Q5_1: return ref_q5_1;
    case GGUF_T_Q8_0: return ref_q8_0;
    case GGUF_T_Q2_K: return ref_q2_k;
    case GGUF_T_Q3_K: return ref_q3_k;
    case GGUF_T_Q4_K: return ref_q4_k;
    case GGUF_T_Q5_K: return ref_q5_k;
    case GGUF_T_Q6_K: return ref_q6_k;
    case QUANT_T_IQ4_NL: return ref_iq4_nl;
    case QUANT_T_IQ4_XS: return ref_iq4_xs;
    case QUANT_T_MXFP4: return ref_mxfp4;
    case QUANT_T_IQ2_XXS: return ref_iq2_xxs;
    case QUANT_T_IQ2_XS: return ref_iq2_xs;
    case QUANT_T_IQ2_S: return ref_iq2_s;
    case QUANT_T_IQ3_XXS: return ref_iq3_xxs;
    case QUANT_T_IQ3_S: return ref_iq3_s;
    case QUANT_T_IQ1_S: return ref_iq1_s;
    case QUANT_T_IQ1_M: return ref_iq1_m;
    case QUANT_T_TQ1_0: return ref_tq1_0;
    case QUANT_T_TQ2_0: return ref_tq2_0;
    default: return NULL;
    }
}

/* ---------------------------------------------------------------------------------------------
 * 3. Fast dequantisers: whole rows of nb blocks, 16 values at a time in the vec16 layer
 *    (kernels/vec16.h: AVX-512, AVX2, NEON or plain C). Each computes exactly the reference's
 *    expression (same operands, same order) lane by lane: codes are widened to 32-bit lanes,
 *    converted exactly, and multiplied (and offset) as the reference does.
 * ------------------------------------------------------------------------------------------- */

#include "kernels/vec16.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* y[0..16) = d * q, q + m, q - m (q: 16 integer codes, exact as floats) */
ALWAYS_INLINE void st16_mul(float *y, float d, vec16i q) { v_store(y, v_mul(v_set1(d), v_cvt(q))); }
ALWAYS_INLINE void st16_mul_add(float *y, float d, float m, vec16i q) {
    v_store(y, v_add(v_mul(v_set1(d), v_cvt(q)), v_set1(m)));
}
ALWAYS_INLINE void st16_mul_sub(float *y, float d, float m, vec16i q) {
    v_store(y, v_sub(v_mul(v_set1(d), v_cvt(q)), v_set1(m)));
}
/* the low / high nibbles of 16 bytes at p, one per lane */
ALWAYS_INLINE vec16i nib_lo(vec16i bytes) { return vi_and(bytes, vi_set1(0x0F)); }
ALWAYS_INLINE vec16i nib_hi(vec16i bytes) { return vi_srl(bytes, 4); }
/* Q5's fifth bits: lane l gets 0x10 where bit l of bits is set */
ALWAYS_INLINE vec16i q5_hi(vec16i nib, uint32_t bits) { return vi_or(nib, vi_bits16(bits & 0xFFFFu, 0x10)); }
/* Q6_K: the four 16-code groups s = 0..3 of values 128h + 32s + l0 .. +15: low nibble of a, low
 * of b, high of a, high of b; the top two bits are bits 2s..2s+1 of hb, moved to bits 4..5 */
ALWAYS_INLINE void q6_codes(const uint8_t *ql, const uint8_t *qh, int h, int l0, vec16i c6[4]) {
    vec16i a = vi_load_u8(ql + 64 * h + l0), b = vi_load_u8(ql + 64 * h + 32 + l0);
    vec16i hb = vi_load_u8(qh + 32 * h + l0), b45 = vi_set1(0x30);
    c6[0] = vi_or(nib_lo(a), vi_and(vi_sll(hb, 4), b45));
    c6[1] = vi_or(nib_lo(b), vi_and(vi_sll(hb, 2), b45));
    c6[2] = vi_or(nib_hi(a), vi_and(hb, b45));
    c6[3] = vi_or(nib_hi(b), vi_and(vi_srl(hb, 2), b45));
}

static void fast_q4_0(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 18, y += 32) {
        float d = v_half1(src);
        vec16i qs = vi_load_u8(src + 2), eight = vi_set1(8);
        st16_mul(y, d, vi_sub(nib_lo(qs), eight));
        st16_mul(y + 16, d, vi_sub(nib_hi(qs), eight));
    }
}

static void fast_q4_1(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 20, y += 32) {
        float d = v_half1(src), m = v_half1(src + 2);
        vec16i qs = vi_load_u8(src + 4);
        st16_mul_add(y, d, m, nib_lo(qs));
        st16_mul_add(y + 16, d, m, nib_hi(qs));
    }
}

static void fast_q5_0(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 22, y += 32) {
        float d = v_half1(src);
        uint32_t qh;
        memcpy(&qh, src + 2, 4);
        vec16i qs = vi_load_u8(src + 6), sixteen = vi_set1(16);
        st16_mul(y, d, vi_sub(q5_hi(nib_lo(qs), qh), sixteen));
        st16_mul(y + 16, d, vi_sub(q5_hi(nib_hi(qs), qh >> 16), sixteen));
    }
}

static void fast_q5_1(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 24, y += 32) {
        float d = v_half1(src), m = v_half1(src + 2);
        uint32_t qh;
        memcpy(&qh, src + 4, 4);
        vec16i qs = vi_load_u8(src + 8);
        st16_mul_add(y, d, m, q5_hi(nib_lo(qs), qh));
        st16_mul_add(y + 16, d, m, q5_hi(nib_hi(qs), qh >> 16));
    }
}

static void fast_q8_0(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 34, y += 32) {
        vec16 d = v_set1_f16(src);
        v_store(y, v_mul(d, v_load_i8(src + 2)));
        v_store(y + 16, v_mul(d, v_load_i8(src + 18)));
    }
}

static void fast_q4_k(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 144, y += QK_K) {
        float d = v_half1(src), dmin = v_half1(src + 2);
        int sc[8], m[8];
        k_scale_min(src + 4, sc, m);
        const uint8_t *qs = src + 16;
        for (int c = 0; c < 4; c++) {           /* groups 2c (low nibbles) and 2c+1 (high) */
            float dl0 = d * (float)sc[2 * c], ml0 = dmin * (float)m[2 * c];
            float dl1 = d * (float)sc[2 * c + 1], ml1 = dmin * (float)m[2 * c + 1];
            for (int h = 0; h < 2; h++) {       /* values 16h .. 16h+15 of each group */
                vec16i v = vi_load_u8(qs + 32 * c + 16 * h);
                st16_mul_sub(y + 64 * c + 16 * h, dl0, ml0, nib_lo(v));
                st16_mul_sub(y + 64 * c + 32 + 16 * h, dl1, ml1, nib_hi(v));
            }
        }
    }
}

static void fast_q6_k(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 210, y += QK_K) {
        const uint8_t *ql = src, *qh = src + 128;
        const int8_t *scales = (const int8_t *)(src + 192);
        float d = v_half1(src + 208);
        for (int h = 0; h < 2; h++)
            for (int l0 = 0; l0 < 32; l0 += 16) {
                vec16i c6[4];
                q6_codes(ql, qh, h, l0, c6);
                for (int s = 0; s < 4; s++) {
                    int e = 128 * h + 32 * s + l0;
                    st16_mul(y + e, d * (float)scales[e / 16], vi_sub(c6[s], vi_set1(32)));
                }
            }
    }
}

static void fast_f16(const uint8_t *src, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) v_store(y + i, v_load_f16(src + 2 * i));
    for (; i < n; i++) y[i] = v_half1(src + 2 * i);   /* the same value as the vector conversion */
}

static void fast_bf16(const uint8_t *src, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) ref_bf16(src + 2 * i, y + i);   /* a shift: the compiler vectorises it */
}

/* IQ4_NL / IQ4_XS / MXFP4: each nibble picks the reference's product d * (float)k from a table of
 * the 16 codebook values times d. */
ALWAYS_INLINE vlutv kv_table(float d, const int8_t *kv) { return v_lutv(d, v_load_i8(kv)); }

static void fast_iq4_nl(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 18, y += 32) {
        vlutv t = kv_table(v_half1(src), kvalues_iq4nl);
        vec16i qs = vi_load_u8(src + 2);
        v_store(y, v_lutv_get(t, qs));
        v_store(y + 16, v_lutv_get(t, nib_hi(qs)));
    }
}

static void fast_iq4_xs(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 136, y += QK_K) {
        float d = v_half1(src);
        for (int g = 0; g < 8; g++) {
            vlutv t = kv_table(d * (float)iq4_xs_scale(src, g), kvalues_iq4nl);
            vec16i qs = vi_load_u8(src + 8 + 16 * g);
            v_store(y + 32 * g, v_lutv_get(t, qs));
            v_store(y + 32 * g + 16, v_lutv_get(t, nib_hi(qs)));
        }
    }
}

static void fast_mxfp4(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 17, y += 32) {
        vlutv t = kv_table(e8m0_half(src[0]), kvalues_mxfp4);
        vec16i qs = vi_load_u8(src + 1);
        v_store(y, v_lutv_get(t, qs));
        v_store(y + 16, v_lutv_get(t, nib_hi(qs)));
    }
}

/* ---------------------------------------------------------------------------------------------
 * 4. Fused dequantise-and-dot for decode: decode multiplies every weight row by one token, so the
 *    dequantised values go from the block straight into the fma, never through memory. Each value
 *    is the reference's value (section 3's expressions, or a table of them: for 4- and 5-bit codes
 *    the block's 16 or 32 possible values d*q + m are one fma, which equals the mul-then-add
 *    because d*q is exact — with AVX-512 a register the codes permute, elsewhere computed from
 *    the code), and the products are accumulated in the canonical order of kernels/ops.h: one
 *    16-lane accumulator per row, 16 values at a time in ascending order, reduced by v_sum.
 * ------------------------------------------------------------------------------------------- */

/* rows per kernel call: their accumulators stay in registers (8 of AVX-512's 32; elsewhere 4, and
 * 2 for the K-quants, whose tables and codes need the other registers) */
#if VEC16_REGS >= 32
#define FUSED_ROWS 8
#define FUSED_ROWS_K 8
#else
#define FUSED_ROWS 4
#define FUSED_ROWS_K 2
#endif

ALWAYS_INLINE uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
ALWAYS_INLINE unsigned rd16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

/* The body of every kernel: nr rows (a literal at each call, so acc stays in registers), nb
 * blocks of BV values each; BLOCK(q, b, xb) adds row q's block b (x at xb) to acc[q]. */
#define FUSED_BODY(BV, BLOCK)                                                                  \
    vec16 acc[FUSED_ROWS];                                                                     \
    _Pragma("GCC unroll 8") for (int q = 0; q < nr; q++) acc[q] = v_zero();                    \
    for (int64_t b = 0; b < nb; b++) {                                                         \
        const float *xb = x + b * (BV);                                                        \
        _Pragma("GCC unroll 8") for (int q = 0; q < nr; q++) { BLOCK(q, b, xb); }              \
    }                                                                                          \
    _Pragma("GCC unroll 8") for (int q = 0; q < nr; q++) out[q] = v_sum(acc[q]);

/* acc[q] += w * x[e..e+15] */
#define FMA16(e, w) (acc[q] = v_fma((w), v_load(xb + (e)), acc[q]))

/* y = d * (q - 8): the table d * (i - 8), i = 0..15 */
#define Q4_0_BLOCK(q, b, xb) {                                                                 \
        const uint8_t *blk = src + (size_t)(q) * rb + 18 * (size_t)(b);                        \
        vlutm t = v_lutm(v_half1(blk), -8.0f);                                                \
        vec16i v = vi_load_u8(blk + 2);                                                        \
        FMA16(0, v_lutm_get(t, vi_code4(v)));                                                  \
        FMA16(16, v_lutm_get(t, nib_hi(v))); }

/* y = d * q + m: the table fma(d, i, m) */
#define Q4_1_BLOCK(q, b, xb) {                                                                 \
        const uint8_t *blk = src + (size_t)(q) * rb + 20 * (size_t)(b);                        \
        vlutf t = v_lutf_f16(blk, 0.0f);                                                       \
        vec16i v = vi_load_u8(blk + 4);                                                        \
        FMA16(0, v_lutf_get(t, vi_code4(v)));                                                  \
        FMA16(16, v_lutf_get(t, nib_hi(v))); }

/* Q5: the fifth bit of value j is bit j of qh, set as bit 4 of the 5-bit index into the 32-entry
 * table */
#define Q5_0_BLOCK(q, b, xb) {                                                                 \
        const uint8_t *blk = src + (size_t)(q) * rb + 22 * (size_t)(b);                        \
        vlutm32 t = v_lutm32(v_half1(blk), -16.0f);                                           \
        uint32_t qh = rd32(blk + 2);                                                           \
        vec16i v = vi_load_u8(blk + 6);                                                        \
        FMA16(0, v_lutm32_get(t, q5_hi(nib_lo(v), qh)));                                       \
        FMA16(16, v_lutm32_get(t, q5_hi(nib_hi(v), qh >> 16))); }

#define Q5_1_BLOCK(q, b, xb) {                                                                 \
        const uint8_t *blk = src + (size_t)(q) * rb + 24 * (size_t)(b);                        \
        vlutf32 t = v_lutf32_f16(blk, 0.0f);                                                   \
        uint32_t qh = rd32(blk + 4);                                                           \
        vec16i v = vi_load_u8(blk + 8);                                                        \
        FMA16(0, v_lutf32_get(t, q5_hi(nib_lo(v), qh)));                                       \
        FMA16(16, v_lutf32_get(t, q5_hi(nib_hi(v), qh >> 16))); }

/* y = d * q */
#define Q8_0_BLOCK(q, b, xb) {                                                                 \
        const uint8_t *blk = src + (size_t)(q) * rb + 34 * (size_t)(b);                        \
        vec16 d = v_set1_f16(blk);                                                             \
        FMA16(0, v_mul(d, v_load_i8(blk + 2)));                                                \
        FMA16(16, v_mul(d, v_load_i8(blk + 18))); }

/* y = dl * q - ml per group of 32 (dl = d * sc, ml = dmin * m as the reference): tables
 * fma(dl, i, -ml); group 2c takes the low nibbles of qs[32c..32c+31], group 2c+1 the high */
#define Q4_K_BLOCK(q, b, xb) {                                                                 \
        const uint8_t *blk = src + (size_t)(q) * rb + 144 * (size_t)(b);                       \
        float d = v_half1(blk), dmin = v_half1(blk + 2);                                     \
        int sc[8], mn[8];                                                                      \
        k_scale_min(blk + 4, sc, mn);                                                          \
        for (int c = 0; c < 4; c++) {                                                          \
            vlutf l0 = v_lutf(d * (float)sc[2 * c], 0.0f, -(dmin * (float)mn[2 * c]));         \
            vlutf l1 = v_lutf(d * (float)sc[2 * c + 1], 0.0f, -(dmin * (float)mn[2 * c + 1])); \
            vec16i v0 = vi_load_u8(blk + 16 + 32 * c), v1 = vi_load_u8(blk + 32 + 32 * c);     \
            FMA16(64 * c, v_lutf_get(l0, vi_code4(v0)));                                       \
            FMA16(64 * c + 16, v_lutf_get(l0, vi_code4(v1)));                                  \
            FMA16(64 * c + 32, v_lutf_get(l1, nib_hi(v0)));                                    \
            FMA16(64 * c + 48, v_lutf_get(l1, nib_hi(v1)));                                    \
        } }

/* y = (d * scale) * (q - 32), q as in fast_q6_k; values e = 128h + 32s + 16k ascending. With 32
 * registers the 8 code vectors of a half are made at once; with 16 each is made where it is used
 * (group s: low nibbles of ql[64h + 32(s%2) + 16k ..] for s < 2, high for s >= 2, and bits 2s..2s+1
 * of qh[32h + 16k ..] as bits 4..5: the same codes) */
#if VEC16_REGS >= 32
#define Q6_K_BLOCK(q, b, xb) {                                                                 \
        const uint8_t *blk = src + (size_t)(q) * rb + 210 * (size_t)(b);                       \
        const int8_t *scales = (const int8_t *)(blk + 192);                                    \
        float d = v_half1(blk + 208);                                                          \
        for (int h = 0; h < 2; h++) {                                                          \
            vec16i c6[2][4];                                                                   \
            q6_codes(blk, blk + 128, h, 0, c6[0]);                                             \
            q6_codes(blk, blk + 128, h, 16, c6[1]);                                            \
            for (int s = 0; s < 4; s++)                                                        \
                for (int k = 0; k < 2; k++) {                                                  \
                    int e = 128 * h + 32 * s + 16 * k;                                         \
                    vec16 w = v_mul(v_set1(d * (float)scales[e / 16]), v_cvt(vi_sub(c6[k][s], vi_set1(32)))); \
                    FMA16(e, w);                                                               \
                }                                                                              \
        } }
#else
#define Q6_K_BLOCK(q, b, xb) {                                                                 \
        const uint8_t *blk = src + (size_t)(q) * rb + 210 * (size_t)(b);                       \
        const int8_t *scales = (const int8_t *)(blk + 192);                                    \
        float d = v_half1(blk + 208);                                                          \
        for (int h = 0; h < 2; h++)                                                            \
            for (int s = 0; s < 4; s++)                                                        \
                for (int k = 0; k < 2; k++) {                                                  \
                    int e = 128 * h + 32 * s + 16 * k;                                         \
                    vec16i ql = vi_load_u8(blk + 64 * h + 32 * (s % 2) + 16 * k);              \
                    vec16i hb = vi_load_u8(blk + 128 + 32 * h + 16 * k);                       \
                    vec16i c = vi_or(s < 2 ? nib_lo(ql) : nib_hi(ql), vi_sll(vi_and(vi_srl(hb, 2 * s), vi_set1(3)), 4)); \
                    vec16 w = v_mul(v_set1(d * (float)scales[e / 16]), v_cvt(vi_sub(c, vi_set1(32)))); \
                    FMA16(e, w);                                                               \
                } }
#endif

/* ---- the IQ, MXFP4 and ternary types ---------------------------------------------------------
 * IQ4_NL / IQ4_XS / MXFP4: a 16-entry table per block (or group) of the reference's products
 * d * (float)k, each nibble picks its value (as section 3). The other types are written once as
 * <TYPE>_CHUNKS(blk, EMIT): the block's values 16 at a time in ascending order, EMIT(e, w)
 * receiving values e..e+15 in w. The fused kernels pass FMA16 (one fma into the row's
 * accumulator: the canonical order), the dequantisers (section 3's fast path) STORE16.
 * Each w is the reference's expression lane by lane: the same scalar scale (computed by the same
 * scalar expression), times the codebook values as floats, then the signs. A sign flip (xor of
 * the sign bit) is exactly the reference's multiplication by -1.0f for every non-NaN value. */
#define STORE16(e, w) v_store(y + (e), (w))

/* y = d * kvalues_iq4nl[q] */
#define IQ4_NL_BLOCK(q, b, xb) {                                                               \
        const uint8_t *blk = src + (size_t)(q) * rb + 18 * (size_t)(b);                        \
        vlutv t = kv_table(v_half1(blk), kvalues_iq4nl);                                      \
        vec16i v = vi_load_u8(blk + 2);                                                        \
        FMA16(0, v_lutv_get(t, v));                                                            \
        FMA16(16, v_lutv_get(t, nib_hi(v))); }

/* y = (d * scale) * kvalues_iq4nl[q], a table per group of 32 */
#define IQ4_XS_BLOCK(q, b, xb) {                                                               \
        const uint8_t *blk = src + (size_t)(q) * rb + 136 * (size_t)(b);                       \
        float d = v_half1(blk);                                                               \
        for (int g = 0; g < 8; g++) {                                                          \
            vlutv t = kv_table(d * (float)iq4_xs_scale(blk, g), kvalues_iq4nl);                \
            vec16i v = vi_load_u8(blk + 8 + 16 * g);                                           \
            FMA16(32 * g, v_lutv_get(t, v));                                                   \
            FMA16(32 * g + 16, v_lutv_get(t, nib_hi(v)));                                      \
        } }

/* y = 2^(e-128) * kvalues_mxfp4[q] */
#define MXFP4_BLOCK(q, b, xb) {                                                                \
        const uint8_t *blk = src + (size_t)(q) * rb + 17 * (size_t)(b);                        \
        vlutv t = kv_table(e8m0_half(blk[0]), kvalues_mxfp4);                                  \
        vec16i v = vi_load_u8(blk + 1);                                                        \
        FMA16(0, v_lutv_get(t, v));                                                            \
        FMA16(16, v_lutv_get(t, nib_hi(v))); }

/* IQ2_XXS: chunk 2g+h = runs 2h, 2h+1 of group g */
#define IQ2_XXS_CHUNKS(blk, EMIT) {                                                            \
        float d_ = v_half1(blk);                                                              \
        for (int g = 0; g < 8; g++) {                                                          \
            uint32_t a0 = rd32(blk + 2 + 8 * g), a1 = rd32(blk + 6 + 8 * g);                   \
            vec16 db = v_set1(d_ * (0.5f + (float)(a1 >> 28)) * 0.25f);                        \
            for (int h = 0; h < 2; h++) {                                                      \
                int r = 2 * h;                                                                 \
                vec16 gv = v_u8_64x2(iq2xxs_grid[(a0 >> (8 * r)) & 0xFF], iq2xxs_grid[(a0 >> (8 * r + 8)) & 0xFF]); \
                unsigned m = ksigns_iq2xs[(a1 >> (7 * r)) & 0x7F] | (unsigned)ksigns_iq2xs[(a1 >> (7 * r + 7)) & 0x7F] << 8; \
                EMIT(32 * g + 16 * h, v_flipsign(v_mul(db, gv), m));                           \
            }                                                                                  \
        } }

/* IQ2_XS: chunk c = runs 2c, 2c+1, one scale */
#define IQ2_XS_CHUNKS(blk, EMIT) {                                                             \
        float d_ = v_half1(blk);                                                              \
        for (int c = 0; c < 16; c++) {                                                         \
            unsigned q0 = rd16(blk + 2 + 4 * c), q1 = rd16(blk + 4 + 4 * c);                   \
            int s = (blk[66 + c / 2] >> (4 * (c % 2))) & 0x0F;                                 \
            vec16 db = v_set1(d_ * (0.5f + (float)s) * 0.25f);                                 \
            vec16 gv = v_u8_64x2(iq2xs_grid[q0 & 511], iq2xs_grid[q1 & 511]);                  \
            unsigned m = ksigns_iq2xs[q0 >> 9] | (unsigned)ksigns_iq2xs[q1 >> 9] << 8;         \
            EMIT(16 * c, v_flipsign(v_mul(db, gv), m));                                        \
        } }

/* IQ2_S: chunk c = runs 2c, 2c+1, one scale, raw sign bytes */
#define IQ2_S_CHUNKS(blk, EMIT) {                                                              \
        float d_ = v_half1(blk);                                                              \
        for (int c = 0; c < 16; c++) {                                                         \
            int k = 2 * c, s = (blk[74 + c / 2] >> (4 * (c % 2))) & 0x0F;                      \
            unsigned qh = blk[66 + k / 4] >> (2 * (k % 4));                                    \
            vec16 db = v_set1(d_ * (0.5f + (float)s) * 0.25f);                                 \
            vec16 gv = v_u8_64x2(iq2s_grid[blk[2 + k] | ((qh & 3) << 8)], iq2s_grid[blk[3 + k] | (((qh >> 2) & 3) << 8)]); \
            EMIT(16 * c, v_flipsign(v_mul(db, gv), rd16(blk + 34 + k)));                       \
        } }

/* IQ3_XXS: chunk 2g+h = entries qs[8g+4h .. 8g+4h+3], runs 2h, 2h+1 of group g */
#define IQ3_XXS_CHUNKS(blk, EMIT) {                                                            \
        float d_ = v_half1(blk);                                                              \
        for (int g = 0; g < 8; g++) {                                                          \
            uint32_t a = rd32(blk + 66 + 4 * g);                                               \
            vec16 db = v_set1(d_ * (0.5f + (float)(a >> 28)) * 0.5f);                          \
            for (int h = 0; h < 2; h++) {                                                      \
                const uint8_t *e4 = blk + 2 + 8 * g + 4 * h;                                   \
                int r = 2 * h;                                                                 \
                vec16 gv = v_u8_32x4(iq3xxs_grid[e4[0]], iq3xxs_grid[e4[1]], iq3xxs_grid[e4[2]], iq3xxs_grid[e4[3]]); \
                unsigned m = ksigns_iq2xs[(a >> (7 * r)) & 0x7F] | (unsigned)ksigns_iq2xs[(a >> (7 * r + 7)) & 0x7F] << 8; \
                EMIT(32 * g + 16 * h, v_flipsign(v_mul(db, gv), m));                           \
            }                                                                                  \
        } }

/* IQ3_S: chunk c (values 16c..16c+15) = entries 4c..4c+3 (their ninth bits: bits 4(c%2)..4(c%2)+3
 * of qh[c/2]), sign bytes 2c, 2c+1 */
#define IQ3_S_CHUNKS(blk, EMIT) {                                                              \
        float d_ = v_half1(blk);                                                              \
        for (int g = 0; g < 8; g++) {                                                          \
            vec16 db = v_set1(d_ * (float)(1 + 2 * ((blk[106 + g / 2] >> (4 * (g % 2))) & 0x0F))); \
            for (int h = 0; h < 2; h++) {                                                      \
                int c = 2 * g + h;                                                             \
                const uint8_t *e4 = blk + 2 + 4 * c;                                           \
                unsigned hb = (unsigned)blk[66 + g] << 8 >> (4 * h);                           \
                vec16 gv = v_u8_32x4(iq3s_grid[e4[0] | (hb & 0x100)], iq3s_grid[e4[1] | ((hb >> 1) & 0x100)], \
                                   iq3s_grid[e4[2] | ((hb >> 2) & 0x100)], iq3s_grid[e4[3] | ((hb >> 3) & 0x100)]); \
                EMIT(16 * c, v_flipsign(v_mul(db, gv), rd16(blk + 74 + 2 * c)));               \
            }                                                                                  \
        } }

/* IQ1_S: chunk 2g+h = runs 2h, 2h+1 of group g: dl * (grid + delta) */
#define IQ1_S_CHUNKS(blk, EMIT) {                                                              \
        float d_ = v_half1(blk);                                                              \
        for (int g = 0; g < 8; g++) {                                                          \
            unsigned hw = rd16(blk + 34 + 2 * g);                                              \
            vec16 dl = v_set1(d_ * (float)(2 * ((hw >> 12) & 7) + 1));                         \
            vec16 delta = v_flipsign(v_set1(0.125f), 0u - (hw >> 15));                         \
            for (int h = 0; h < 2; h++) {                                                      \
                int r = 2 * h;                                                                 \
                vec16 gv = v_i8_64x2(iq1s_grid[blk[2 + 4 * g + r] | (((hw >> (3 * r)) & 7) << 8)], \
                                   iq1s_grid[blk[3 + 4 * g + r] | (((hw >> (3 * r + 3)) & 7) << 8)]); \
                EMIT(32 * g + 16 * h, v_mul(dl, v_add(gv, delta)));                            \
            }                                                                                  \
        } }

/* IQ1_M: chunk m = runs 2m, 2m+1 (one scale; a delta per run). The deltas' signs are set without
 * a branch (random signs would mispredict): -0.125f is 0.125f with the sign bit flipped. */
#define IQ1_M_CHUNKS(blk, EMIT) {                                                              \
        uint16_t sc[4];                                                                        \
        memcpy(sc, blk + 48, 8);                                                               \
        float d_ = fp16_to_f32((uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |            \
                                             ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000)));     \
        for (int m = 0; m < 16; m++) {                                                         \
            vec16 dl = v_set1(d_ * (float)(2 * ((sc[m / 4] >> (3 * (m % 4))) & 7) + 1));       \
            unsigned n0 = blk[32 + m] & 0x0F, n1 = blk[32 + m] >> 4;                           \
            vec16 delta = v_flipsign(v_set1(0.125f), ((0u - (n0 >> 3)) & 0x00FF) | ((0u - (n1 >> 3)) & 0xFF00)); \
            vec16 gv = v_i8_64x2(iq1s_grid[blk[2 * m] | ((n0 & 7) << 8)], iq1s_grid[blk[2 * m + 1] | ((n1 & 7) << 8)]); \
            EMIT(16 * m, v_mul(dl, v_add(gv, delta)));                                         \
        } }


/* TQ1_0: trit k of byte v is ((uint8)(v * 3^k) * 3) >> 8; d * (t - 1). Chunks: qs[0..15] and
 * qs[16..31] for k = 0..4, then qs[32..47] for k = 0..4, then the 16 values of qh[0..3]. */
ALWAYS_INLINE vec16 tq1_w(vec16 d, vec16i v, vec16i pow3) {
    vec16i m = vi_and(vi_mul(v, pow3), vi_set1(0xFF));
    vec16i t = vi_srl(vi_mul(m, vi_set1(3)), 8);
    return v_mul(d, v_cvt(vi_sub(t, vi_set1(1))));
}
#define TQ1_0_CHUNKS(blk, EMIT) {                                                              \
        static const int32_t p3[5] = {1, 3, 9, 27, 81};                                        \
        static const int32_t p3h[16] = {1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27};   \
        vec16 d = v_set1_f16(blk + 52);                                                        \
        vec16i v0 = vi_load_u8(blk), v1 = vi_load_u8(blk + 16), v2 = vi_load_u8(blk + 32);     \
        for (int k = 0; k < 5; k++) {                                                          \
            EMIT(32 * k, tq1_w(d, v0, vi_set1(p3[k])));                                        \
            EMIT(32 * k + 16, tq1_w(d, v1, vi_set1(p3[k])));                                   \
        }                                                                                      \
        for (int k = 0; k < 5; k++) EMIT(160 + 16 * k, tq1_w(d, v2, vi_set1(p3[k])));          \
        uint8_t hb[16];   /* lane l: qh[l % 4] */                                              \
        for (int l = 0; l < 16; l++) hb[l] = blk[48 + l % 4];                                  \
        EMIT(240, tq1_w(d, vi_load_u8(hb), vi_load(p3h))); }

/* TQ2_0: value 128h + 32s + l is bits 2s..2s+1 of qs[32h + l]; d * (q - 1) */
#define TQ2_0_CHUNKS(blk, EMIT) {                                                              \
        vec16 d = v_set1_f16(blk + 64);                                                        \
        for (int h = 0; h < 2; h++) {                                                          \
            vec16i v0 = vi_load_u8(blk + 32 * h), v1 = vi_load_u8(blk + 32 * h + 16);          \
            for (int s = 0; s < 4; s++) {                                                      \
                vec16i q0 = vi_and(vi_srl(v0, 2 * s), vi_set1(3)), q1 = vi_and(vi_srl(v1, 2 * s), vi_set1(3)); \
                EMIT(128 * h + 32 * s, v_mul(d, v_cvt(vi_sub(q0, vi_set1(1)))));               \
                EMIT(128 * h + 32 * s + 16, v_mul(d, v_cvt(vi_sub(q1, vi_set1(1)))));          \
            }                                                                                  \
        } }

/* the fused block of a CHUNKS type, and its dequantiser */
#define CHUNKS_TYPE(lname, BB, CHUNKS)                                                         \
    static void fast_##lname(const uint8_t *src, float *y, int64_t nb) {                       \
        for (int64_t i = 0; i < nb; i++, src += (BB), y += QK_K) CHUNKS(src, STORE16)          \
    }
#define CHUNKS_BLOCK(BB, CHUNKS, q, b, xb) {                                                   \
        const uint8_t *blk = src + (size_t)(q) * rb + (BB) * (size_t)(b);                      \
        CHUNKS(blk, FMA16) }
#define IQ2_XXS_BLOCK(q, b, xb) CHUNKS_BLOCK(66, IQ2_XXS_CHUNKS, q, b, xb)
#define IQ2_XS_BLOCK(q, b, xb) CHUNKS_BLOCK(74, IQ2_XS_CHUNKS, q, b, xb)
#define IQ2_S_BLOCK(q, b, xb) CHUNKS_BLOCK(82, IQ2_S_CHUNKS, q, b, xb)
#define IQ3_XXS_BLOCK(q, b, xb) CHUNKS_BLOCK(98, IQ3_XXS_CHUNKS, q, b, xb)
#define IQ3_S_BLOCK(q, b, xb) CHUNKS_BLOCK(110, IQ3_S_CHUNKS, q, b, xb)
#define IQ1_S_BLOCK(q, b, xb) CHUNKS_BLOCK(50, IQ1_S_CHUNKS, q, b, xb)
#define IQ1_M_BLOCK(q, b, xb) CHUNKS_BLOCK(56, IQ1_M_CHUNKS, q, b, xb)
#define TQ1_0_BLOCK(q, b, xb) CHUNKS_BLOCK(54, TQ1_0_CHUNKS, q, b, xb)
#define TQ2_0_BLOCK(q, b, xb) CHUNKS_BLOCK(66, TQ2_0_CHUNKS, q, b, xb)
CHUNKS_TYPE(iq2_xxs, 66, IQ2_XXS_CHUNKS)
CHUNKS_TYPE(iq2_xs, 74, IQ2_XS_CHUNKS)
CHUNKS_TYPE(iq2_s, 82, IQ2_S_CHUNKS)
CHUNKS_TYPE(iq3_xxs, 98, IQ3_XXS_CHUNKS)
CHUNKS_TYPE(iq3_s, 110, IQ3_S_CHUNKS)
CHUNKS_TYPE(iq1_s, 50, IQ1_S_CHUNKS)
CHUNKS_TYPE(iq1_m, 56, IQ1_M_CHUNKS)
CHUNKS_TYPE(tq1_0, 54, TQ1_0_CHUNKS)
CHUNKS_TYPE(tq2_0, 66, TQ2_0_CHUNKS)

/* For each type: fd_<type>_8 (ROWS rows: FUSED_ROWS or FUSED_ROWS_K) and fd_<type>_1 (one row). */
#define FUSED_KERNELS(name, BV, BLOCK, ROWS)                                                   \
    ALWAYS_INLINE void name##_n(const uint8_t *src, size_t rb, const int nr, const float *x,   \
                                int64_t nb, float *out) { FUSED_BODY(BV, BLOCK) }              \
    static void name##_8(const uint8_t *src, size_t rb, const float *x, int64_t nb, float *out) { \
        name##_n(src, rb, ROWS, x, nb, out); }                                                 \
    static void name##_1(const uint8_t *src, size_t rb, const float *x, int64_t nb, float *out) { \
        name##_n(src, rb, 1, x, nb, out); }

FUSED_KERNELS(fd_q4_0, 32, Q4_0_BLOCK, FUSED_ROWS)
FUSED_KERNELS(fd_q4_1, 32, Q4_1_BLOCK, FUSED_ROWS)
FUSED_KERNELS(fd_q5_0, 32, Q5_0_BLOCK, FUSED_ROWS)
FUSED_KERNELS(fd_q5_1, 32, Q5_1_BLOCK, FUSED_ROWS)
FUSED_KERNELS(fd_q8_0, 32, Q8_0_BLOCK, FUSED_ROWS)
FUSED_KERNELS(fd_q4_k, QK_K, Q4_K_BLOCK, FUSED_ROWS_K)
FUSED_KERNELS(fd_q6_k, QK_K, Q6_K_BLOCK, FUSED_ROWS_K)
FUSED_KERNELS(fd_iq4_nl, 32, IQ4_NL_BLOCK, FUSED_ROWS)
FUSED_KERNELS(fd_iq4_xs, QK_K, IQ4_XS_BLOCK, FUSED_ROWS)
FUSED_KERNELS(fd_mxfp4, 32, MXFP4_BLOCK, FUSED_ROWS)
FUSED_KERNELS(fd_iq2_xxs, QK_K, IQ2_XXS_BLOCK, FUSED_ROWS)
FUSED_KERNELS(fd_iq2_xs, QK_K, IQ2_XS_BLOCK, FUSED_ROWS)
FUSED_KERNELS(fd_iq2_s, QK_K, IQ2_S_BLOCK, FUSED_ROWS)
FUSED_KERNELS(fd_iq3_xxs, QK_K, IQ3_XXS_BLOCK, FUSED_ROWS)
FUSED_KERNELS(fd_iq3_s, QK_K, IQ3_S_BLOCK, FUSED_ROWS)
FUSED_KERNELS(fd_iq1_s, QK_K, IQ1_S_BLOCK, FUSED_ROWS)
FUSED_KERNELS(fd_iq1_m, QK_K, IQ1_M_BLOCK, FUSED_ROWS)
FUSED_KERNELS(fd_tq1_0, QK_K, TQ1_0_BLOCK, FUSED_ROWS)
FUSED_KERNELS(fd_tq2_0, QK_K, TQ2_0_BLOCK, FUSED_ROWS)

typedef void (*fused_fn)(const uint8_t *src, size_t rb, const float *x, int64_t nb, float *out);

/* The kernels of type: f8 for *rows rows at a time, f1 for one. */
static int fused_kernels(uint32_t type, fused_fn *f8, fused_fn *f1, int *rows) {
    *rows = type == GGUF_T_Q4_K || type == GGUF_T_Q6_K ? FUSED_ROWS_K : FUSED_ROWS;
    switch (type) {
    case GGUF_T_Q4_0: *f8 = fd_q4_0_8; *f1 = fd_q4_0_1; return 0;
    case GGUF_T_Q4_1: *f8 = fd_q4_1_8; *f1 = fd_q4_1_1; return 0;
    case GGUF_T_Q5_0: *f8 = fd_q5_0_8; *f1 = fd_q5_0_1; return 0;
    case GGUF_T_Q5_1: *f8 = fd_q5_1_8; *f1 = fd_q5_1_1; return 0;
    case GGUF_T_Q8_0: *f8 = fd_q8_0_8; *f1 = fd_q8_0_1; return 0;
    case GGUF_T_Q4_K: *f8 = fd_q4_k_8; *f1 = fd_q4_k_1; return 0;
    case GGUF_T_Q6_K: *f8 = fd_q6_k_8; *f1 = fd_q6_k_1; return 0;
    case QUANT_T_IQ4_NL: *f8 = fd_iq4_nl_8; *f1 = fd_iq4_nl_1; return 0;
    case QUANT_T_IQ4_XS: *f8 = fd_iq4_xs_8; *f1 = fd_iq4_xs_1; return 0;
    case QUANT_T_MXFP4: *f8 = fd_mxfp4_8; *f1 = fd_mxfp4_1; return 0;
    case QUANT_T_IQ2_XXS: *f8 = fd_iq2_xxs_8; *f1 = fd_iq2_xxs_1; return 0;
    case QUANT_T_IQ2_XS: *f8 = fd_iq2_xs_8; *f1 = fd_iq2_xs_1; return 0;
    case QUANT_T_IQ2_S: *f8 = fd_iq2_s_8; *f1 = fd_iq2_s_1; return 0;
    case QUANT_T_IQ3_XXS: *f8 = fd_iq3_xxs_8; *f1 = fd_iq3_xxs_1; return 0;
    case QUANT_T_IQ3_S: *f8 = fd_iq3_s_8; *f1 = fd_iq3_s_1; return 0;
    case QUANT_T_IQ1_S: *f8 = fd_iq1_s_8; *f1 = fd_iq1_s_1; return 0;
    case QUANT_T_IQ1_M: *f8 = fd_iq1_m_8; *f1 = fd_iq1_m_1; return 0;
    case QUANT_T_TQ1_0: *f8 = fd_tq1_0_8; *f1 = fd_tq1_0_1; return 0;
    case QUANT_T_TQ2_0: *f8 = fd_tq2_0_8; *f1 = fd_tq2_0_1; return 0;
    default: return -1;
    }
}

typedef void (*quant_row_fn)(const uint8_t *src, float *y, int64_t nb);

/* The vectorised dequantiser of type (section 3, and section 4's CHUNKS types), or NULL. */
static quant_row_fn quant_fast_row(uint32_t type) {
    switch (type) {
    case GGUF_T_F16: return fast_f16;
    case GGUF_T_BF16: return fast_bf16;
    case GGUF_T_Q4_0: return fast_q4_0;
    case GGUF_T_Q4_1: return fast_q4_1;
    case GGUF_T_Q5_0: return fast_q5_0;
    case GGUF_T_Q5_1: return fast_q5_1;
    case GGUF_T_Q8_0: return fast_q8_0;
    case GGUF_T_Q4_K: return fast_q4_k;
    case GGUF_T_Q6_K: return fast_q6_k;
    case QUANT_T_IQ4_NL: return fast_iq4_nl;
    case QUANT_T_IQ4_XS: return fast_iq4_xs;
    case QUANT_T_MXFP4: return fast_mxfp4;
    case QUANT_T_IQ2_XXS: return fast_iq2_xxs;
    case QUANT_T_IQ2_XS: return fast_iq2_xs;
    case QUANT_T_IQ2_S: return fast_iq2_s;
    case QUANT_T_IQ3_XXS: return fast_iq3_xxs;
    case QUANT_T_IQ3_S: return fast_iq3_s;
    case QUANT_T_IQ1_S: return fast_iq1_s;
    case QUANT_T_IQ1_M: return fast_iq1_m;
    case QUANT_T_TQ1_0: return fast_tq1_0;
    case QUANT_T_TQ2_0: return fast_tq2_0;
    default: return NULL;
    }
}

/* ---------------------------------------------------------------------------------------------
 * 5. Row entry points
 * ------------------------------------------------------------------------------------------- */

/* Number of blocks in a row of n values, or -1 (and y[0..n) filled with NaN) when the request is
 * invalid. */
static int64_t quant_row_blocks(uint32_t type, float *y, int64_t n) {
    int bv = quant_block_values(type);
    if (bv > 0 && n > 0 && n % bv == 0) return n / bv;
    for (int64_t i = 0; i < n; i++) y[i] = NAN;
    return -1;
}

void quant_dequant_row_ref(uint32_t type, const void *src, float *y, int64_t n) {
    int64_t nb = quant_row_blocks(type, y, n);
    if (nb < 0) return;
    if (type == GGUF_T_F32) {                   /* a straight copy */
        memcpy(y, src, (size_t)n * sizeof(float));
        return;
    }
    quant_block_fn fn = quant_ref_block(type);
    const uint8_t *b = src;                     /* [nb][bb] */
    size_t bb = quant_block_bytes(type);
    int bv = quant_block_values(type);
    for (int64_t i = 0; i < nb; i++) fn(b + (size_t)i * bb, y + i * bv);
}

void quant_dequant_row(uint32_t type, const void *src, float *y, int64_t n) {
    quant_row_fn fast = quant_fast_row(type);
    if (fast) {
        int64_t nb = quant_row_blocks(type, y, n);
        if (nb >= 0) fast(src, y, nb);
        return;
    }
    quant_dequant_row_ref(type, src, y, n);
}

int quant_dot_rows(uint32_t type, const void *src, size_t row_bytes, int nr, const float *x, int64_t n, float *out) {
    fused_fn f8, f1;
    int bv = quant_block_values(type), rows_per_call;
    if (nr < 1 || nr > 8 || bv <= 1 || n <= 0 || n % bv || fused_kernels(type, &f8, &f1, &rows_per_call)) return -1;
    const uint8_t *rows = src;   /* [nr][row_bytes] */
    int r = 0;
    for (; r + rows_per_call <= nr; r += rows_per_call) f8(rows + (size_t)r * row_bytes, row_bytes, x, n / bv, out + r);
    for (; r < nr; r++) f1(rows + (size_t)r * row_bytes, row_bytes, x, n / bv, out + r);
    return 0;
}

int quant_has_fast_path(uint32_t type) { return quant_fast_row(type) != NULL; }
