/* quant_k.c — the K-quant types Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (256-value super-blocks): the
 * reference dequantisers (each with its block layout), and for Q4_K and Q6_K the vectorised
 * dequantisers and the fused dequantise-and-dot kernels (kernels/quant.c's header says why they
 * give the reference's bits). Shared helpers: kernels/quant_internal.h. Nothing here allocates.
 */
#include "kernels/quant_internal.h"

/* ---------------------------------------------------------------------------------------------
 * Reference dequantisers: one super-block at b into y[256].
 * ------------------------------------------------------------------------------------------- */

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

/* ---------------------------------------------------------------------------------------------
 * Vectorised dequantisers: nb super-blocks at src into y[256 * nb].
 * ------------------------------------------------------------------------------------------- */

/* Q6_K: the 16 codes of group s (0..3): the low nibbles of lb for s < 2, the high ones for s >= 2,
 * and bits 2s..2s+1 of hb moved to bits 4..5 */
ALWAYS_INLINE vec16i q6_code(vec16i lb, vec16i hb, int s) {
    vec16i hi = s == 0 ? vi_sll(hb, 4) : s == 1 ? vi_sll(hb, 2) : s == 2 ? hb : vi_srl(hb, 2);
    return vi_or(s < 2 ? nib_lo(lb) : nib_hi(lb), vi_and(hi, vi_set1(0x30)));
}
/* the four groups s = 0..3 of values 128h + 32s + l0 .. +15: a for s = 0 and 2, b for 1 and 3 */
ALWAYS_INLINE void q6_codes(const uint8_t *ql, const uint8_t *qh, int h, int l0, vec16i c6[4]) {
    vec16i a = vi_load_u8(ql + 64 * h + l0), b = vi_load_u8(ql + 64 * h + 32 + l0);
    vec16i hb = vi_load_u8(qh + 32 * h + l0);
    _Pragma("GCC unroll 4") for (int s = 0; s < 4; s++) c6[s] = q6_code(s % 2 ? b : a, hb, s);
}

/* Q6_K's value (d * scale) * (q - 32): the 16 group scales dl = d * scale in one vector multiply
 * (the scalar product per lane) and m = -32 dl beside them, on the stack. The dequantiser
 * multiplies dl by q - 32 as the reference does; the fused kernels take each value as
 * fma(dl, q, m), both broadcast from there, with no subtract. -32 dl is exact and the fma rounds
 * dl * q - 32 dl = dl * (q - 32) once, so the value is the multiply's but for the sign of a zero
 * (q = 32 with dl < 0: +0 where the multiply gives -0), which a dot product cannot see: its
 * accumulators start at +0, and +0 + -0 = +0. */
ALWAYS_INLINE void q6_scales(const uint8_t *blk, float dl[16], float m[16]) {
    vec16 v = v_mul(v_set1(v_half1(blk + 208)), v_load_i8(blk + 192));
    v_store(dl, v);
    v_store(m, v_mul(v, v_set1(-32.0f)));
}
/* the 16 values of group g from their codes c: fma(dl[g], c, m[g]) */
ALWAYS_INLINE vec16 q6_w(const float *dl, const float *m, int g, vec16i c) {
    return v_fma(v_set1(dl[g]), v_cvt(c), v_set1(m[g]));
}

/* Q4_K's 8 group scales d * sc[g] into dl[0..7] and minimums dmin * m[g] into ml[8..15] (lanes 8-15
 * of dl and 0-7 of ml are not used), the 6-bit fields of k_scale_min taken four bytes at a time
 * from the scale words w0 = s[0..3], w1 = s[4..7], w2 = s[8..11] (each mask keeps a byte's own
 * bits), converted and multiplied in one vector each: the same products as d * (float)sc[g] */
ALWAYS_INLINE void k_scales(const uint8_t *blk, float dl[16], float ml[16]) {
    const uint32_t b6 = 0x3F3F3F3Fu, b4 = 0x0F0F0F0Fu, b2 = 0x03030303u;
    uint32_t w0 = rd32(blk + 4), w1 = rd32(blk + 8), w2 = rd32(blk + 12);
    vec16 v = v_u8_32x4(w0 & b6, (w2 & b4) | ((w0 >> 6) & b2) << 4,          /* sc[0..3], sc[4..7] */
                        w1 & b6, ((w2 >> 4) & b4) | ((w1 >> 6) & b2) << 4);   /* m[0..3], m[4..7] */
    v_store(dl, v_mul(v_set1(v_half1(blk)), v));
    v_store(ml, v_mul(v_set1(v_half1(blk + 2)), v));
}

static void fast_q4_k(const uint8_t *src, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, src += 144, y += QK_K) {
        float dl[16], ml[16];   /* k_scales */
        k_scales(src, dl, ml);
        const uint8_t *qs = src + 16;
        for (int c = 0; c < 4; c++) {           /* groups 2c (low nibbles) and 2c+1 (high) */
            float dl0 = dl[2 * c], ml0 = ml[8 + 2 * c], dl1 = dl[2 * c + 1], ml1 = ml[9 + 2 * c];
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
        float dl[16], m[16];   /* [group] */
        q6_scales(src, dl, m);
        for (int h = 0; h < 2; h++)
            for (int l0 = 0; l0 < 32; l0 += 16) {
                vec16i c6[4];
                q6_codes(ql, qh, h, l0, c6);
                for (int s = 0; s < 4; s++) {
                    int e = 128 * h + 32 * s + l0;
                    st16_mul(y + e, dl[e / 16], vi_sub(c6[s], vi_set1(32)));
                }
            }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Fused dequantise-and-dot (kernels/quant_internal.h: FUSED_BODY, FUSED_KERNELS).
 * ------------------------------------------------------------------------------------------- */

/* y = dl * q - ml per group of 32 (dl = d * sc, ml = dmin * m as the reference): tables
 * fma(dl, i, -ml); group 2c takes the low nibbles of qs[32c..32c+31], group 2c+1 the high */
#define Q4_K_BLOCK(q, b, xb) {                                                                 \
        const uint8_t *blk = src + (size_t)(q) * rb + 144 * (size_t)(b);                       \
        float dl[16], ml[16];   /* k_scales */                                                 \
        k_scales(blk, dl, ml);                                                                 \
        for (int c = 0; c < 4; c++) {                                                          \
            vlutf l0 = v_lutf(dl[2 * c], 0.0f, -ml[8 + 2 * c]);                                \
            vlutf l1 = v_lutf(dl[2 * c + 1], 0.0f, -ml[9 + 2 * c]);                            \
            vec16i v0 = vi_load_u8(blk + 16 + 32 * c), v1 = vi_load_u8(blk + 32 + 32 * c);     \
            FMA16(64 * c, v_lutf_get(l0, vi_code4(v0)));                                       \
            FMA16(64 * c + 16, v_lutf_get(l0, vi_code4(v1)));                                  \
            FMA16(64 * c + 32, v_lutf_get(l1, nib_hi(v0)));                                    \
            FMA16(64 * c + 48, v_lutf_get(l1, nib_hi(v1)));                                    \
        } }

/* y = (d * scale) * (q - 32) as q6_w makes it (q6_scales); values e = 128h + 32s + 16k
 * ascending. With 32 registers the 8 code vectors of a half are made at once; with 16 each is made
 * where it is used (group s: low nibbles of ql[64h + 32(s%2) + 16k ..] for s < 2, high for s >= 2,
 * and bits 2s..2s+1 of qh[32h + 16k ..] as bits 4..5: the same codes) */
#if VEC16_REGS >= 32
#define Q6_K_BLOCK(q, b, xb) {                                                                 \
        const uint8_t *blk = src + (size_t)(q) * rb + 210 * (size_t)(b);                       \
        float dl[16], m[16];   /* [group] */                                                   \
        q6_scales(blk, dl, m);                                                                 \
        for (int h = 0; h < 2; h++) {                                                          \
            vec16i c6[2][4];                                                                   \
            q6_codes(blk, blk + 128, h, 0, c6[0]);                                             \
            q6_codes(blk, blk + 128, h, 16, c6[1]);                                            \
            for (int s = 0; s < 4; s++)                                                        \
                for (int k = 0; k < 2; k++) {                                                  \
                    int e = 128 * h + 32 * s + 16 * k;                                         \
                    FMA16(e, q6_w(dl, m, e / 16, c6[k][s]));                                   \
                }                                                                              \
        } }
#else
#define Q6_K_BLOCK(q, b, xb) {                                                                 \
        const uint8_t *blk = src + (size_t)(q) * rb + 210 * (size_t)(b);                       \
        float dl[16], m[16];   /* [group] */                                                   \
        q6_scales(blk, dl, m);                                                                 \
        for (int h = 0; h < 2; h++)                                                            \
            for (int s = 0; s < 4; s++)                                                        \
                for (int k = 0; k < 2; k++) {                                                  \
                    int e = 128 * h + 32 * s + 16 * k;                                         \
                    vec16i ql = vi_load_u8(blk + 64 * h + 32 * (s % 2) + 16 * k);              \
                    vec16i hb = vi_load_u8(blk + 128 + 32 * h + 16 * k);                       \
                    FMA16(e, q6_w(dl, m, e / 16, q6_code(ql, hb, s)));                         \
                } }
#endif

FUSED_KERNELS(fd_q4_k, QK_K, Q4_K_BLOCK, FUSED_ROWS_K)
FUSED_KERNELS(fd_q6_k, QK_K, Q6_K_BLOCK, FUSED_ROWS_K)

quant_block_fn quant_k_ref_block(uint32_t type) {
    switch (type) {
    case GGUF_T_Q2_K: return ref_q2_k;
    case GGUF_T_Q3_K: return ref_q3_k;
    case GGUF_T_Q4_K: return ref_q4_k;
    case GGUF_T_Q5_K: return ref_q5_k;
    case GGUF_T_Q6_K: return ref_q6_k;
    default: return NULL;
    }
}

quant_row_fn quant_k_fast_row(uint32_t type) {
    switch (type) {
    case GGUF_T_Q4_K: return fast_q4_k;
    case GGUF_T_Q6_K: return fast_q6_k;
    default: return NULL;
    }
}

int quant_k_fused(uint32_t type, quant_fused_fn *f8, quant_fused_fn *f1) {
    switch (type) {
    case GGUF_T_Q4_K: *f8 = fd_q4_k_8; *f1 = fd_q4_k_1; return 0;
    case GGUF_T_Q6_K: *f8 = fd_q6_k_8; *f1 = fd_q6_k_1; return 0;
    default: return -1;
    }
}
