/* quant_legacy.c — the legacy block types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (32 values a block): the
 * reference dequantisers (each with its block layout), the vectorised dequantisers and the fused
 * dequantise-and-dot kernels (kernels/quant.c's header says why all three give the same bits).
 * Gemma 3 270M Q4_K_M stores most of its matrices as Q5_0 (640-wide rows do not fit 256-value
 * K-quant blocks). Shared helpers: kernels/quant_internal.h. Nothing here allocates.
 */
#include "kernels/quant_internal.h"

/* ---------------------------------------------------------------------------------------------
 * Reference dequantisers: one block at b into y[32].
 * ------------------------------------------------------------------------------------------- */


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

/* ---------------------------------------------------------------------------------------------
 * Vectorised dequantisers: nb blocks at src into y[32 * nb].
 * ------------------------------------------------------------------------------------------- */

/* Q5's fifth bits: lane l gets 0x10 where bit l of bits is set */
ALWAYS_INLINE vec16i q5_hi(vec16i nib, uint32_t bits) { return vi_or_bits16(nib, bits & 0xFFFFu, 0x10); }

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

/* ---------------------------------------------------------------------------------------------
 * Fused dequantise-and-dot (kernels/quant_internal.h: FUSED_BODY, FUSED_KERNELS).
 * ------------------------------------------------------------------------------------------- */

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
        vlutm32 t = v_lutm32_f16(blk, -16.0f);                                                 \
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


FUSED_KERNELS(fd_q4_0, 32, Q4_0_BLOCK, FUSED_ROWS)
FUSED_KERNELS(fd_q4_1, 32, Q4_1_BLOCK, FUSED_ROWS)
FUSED_KERNELS(fd_q5_0, 32, Q5_0_BLOCK, FUSED_ROWS)
FUSED_KERNELS(fd_q5_1, 32, Q5_1_BLOCK, FUSED_ROWS)
FUSED_KERNELS(fd_q8_0, 32, Q8_0_BLOCK, FUSED_ROWS)

quant_block_fn quant_legacy_ref_block(uint32_t type) {
    switch (type) {
    case GGUF_T_Q4_0: return ref_q4_0;
    case GGUF_T_Q4_1: return ref_q4_1;
    case GGUF_T_Q5_0: return ref_q5_0;
    case GGUF_T_Q5_1: return ref_q5_1;
    case GGUF_T_Q8_0: return ref_q8_0;
    default: return NULL;
    }
}

quant_row_fn quant_legacy_fast_row(uint32_t type) {
    switch (type) {
    case GGUF_T_Q4_0: return fast_q4_0;
    case GGUF_T_Q4_1: return fast_q4_1;
    case GGUF_T_Q5_0: return fast_q5_0;
    case GGUF_T_Q5_1: return fast_q5_1;
    case GGUF_T_Q8_0: return fast_q8_0;
    default: return NULL;
    }
}

int quant_legacy_fused(uint32_t type, quant_fused_fn *f8, quant_fused_fn *f1) {
    switch (type) {
    case GGUF_T_Q4_0: *f8 = fd_q4_0_8; *f1 = fd_q4_0_1; return 0;
    case GGUF_T_Q4_1: *f8 = fd_q4_1_8; *f1 = fd_q4_1_1; return 0;
    case GGUF_T_Q5_0: *f8 = fd_q5_0_8; *f1 = fd_q5_0_1; return 0;
    case GGUF_T_Q5_1: *f8 = fd_q5_1_8; *f1 = fd_q5_1_1; return 0;
    case GGUF_T_Q8_0: *f8 = fd_q8_0_8; *f1 = fd_q8_0_1; return 0;
    default: return -1;
    }
}
