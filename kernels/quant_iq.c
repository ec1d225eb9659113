/* quant_iq.c — the codebook (IQ4_NL, IQ4_XS, IQ2_*, IQ3_*, IQ1_*), MXFP4 and ternary (TQ1_0,
 * TQ2_0) types: the reference dequantisers (each with its block layout), the vectorised
 * dequantisers and the fused dequantise-and-dot kernels. For the IQ2/IQ3/IQ1 and ternary types
 * one description of a block's values 16 at a time (<TYPE>_CHUNKS) serves both the fused kernel
 * and the dequantiser. The codebooks are in kernels/quant_tables.h (generated); shared helpers in
 * kernels/quant_internal.h. Nothing here allocates.
 */
#include "kernels/quant_internal.h"

#include "kernels/quant_tables.h"

/* ---------------------------------------------------------------------------------------------
 * Reference dequantisers: one block at b into y[block_values].
 * ------------------------------------------------------------------------------------------- */

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

/* ---------------------------------------------------------------------------------------------
 * Vectorised dequantisers: nb blocks at src into y[block_values * nb].
 * ------------------------------------------------------------------------------------------- */

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
 * Fused dequantise-and-dot (kernels/quant_internal.h: FUSED_BODY, FUSED_KERNELS).
 * ------------------------------------------------------------------------------------------- */


/* ---- the IQ, MXFP4 and ternary types ---------------------------------------------------------
 * IQ4_NL / IQ4_XS / MXFP4: a 16-entry table per block (or group) of the reference's products
 * d * (float)k, each nibble picks its value (as the vectorised dequantisers above). The other
 * types are written once as <TYPE>_CHUNKS(blk, EMIT): the block's values 16 at a time in ascending order, EMIT(e, w)
 * receiving values e..e+15 in w. The fused kernels pass FMA16 (one fma into the row's
 * accumulator: the canonical order), the vectorised dequantisers STORE16.
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

quant_block_fn quant_iq_ref_block(uint32_t type) {
    switch (type) {
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

quant_row_fn quant_iq_fast_row(uint32_t type) {
    switch (type) {
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

int quant_iq_fused(uint32_t type, quant_fused_fn *f8, quant_fused_fn *f1) {
    switch (type) {
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
