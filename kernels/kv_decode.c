/* kv_decode.c — reading KV rows back (kv.h's kv_dequantize, kv_dequantize_rows / _cols, kv_dot,
 * kv_axpy); writing them is kernels/kv.c.
 *
 * Reading a row goes through one decoder, decode_chunk(), which turns the values
 * [32c, min(32c + 32, h)) of a row into f32. kv_dequantize and the reference kernels kv_dot and
 * kv_axpy call it, so kv_dot / kv_axpy are bit-identical to dequantising first by construction; they
 * only fix the summation order (kv.h) and keep the decoded values in a 32-float stack buffer.
 * kv_dequantize_cols (what attention uses, kernels/attn.c) takes kernels/kv_vec.h's 16-value vector
 * decoder for the formats it covers (the same bits: tests/test_kv.c compares them with
 * kv_dequantize for every format) and decode_chunk() for the others. The half and
 * e4m3 decoders are branch-free so that the full-chunk loops vectorise (f16 rows decode about 6x
 * faster than through fp16_to_f32); tests/test_kv.c checks them against the scalar conversions
 * for every code. */
#include "kernels/kv.h"

#include <string.h>

#include "kernels/fp16.h"
#include "kernels/kv_internal.h"
#include "kernels/vec16.h"
#include "kernels/kv_vec.h"

#define KV_LANES 8    /* partial sums in kv_dot */

/* Exact half -> f32 without branches (so loops of it vectorise); equal to fp16_to_f32() for all
 * 65536 inputs (tests/test_kv.c checks every one). Normal and inf/NaN: move the bits and rebias
 * the exponent (+112, and +112 more for exponent 31 so it becomes 255; a NaN comes out quiet,
 * as fp16_to_f32 and F16C make it). Zero and subnormal:
 * man * 2^-24 by an exact int -> float conversion. The selects are written as bit masks. */
static inline float f16_decode(uint16_t hb) {
    uint32_t em = hb & 0x7fffu;
    uint32_t sign = (uint32_t)(hb & 0x8000u) << 16;
    uint32_t is_inf = 0u - (uint32_t)(em >= 0x7c00u);      /* all ones for exponent 31 */
    uint32_t is_nan = 0u - (uint32_t)(em > 0x7c00u);       /* exponent 31, mantissa != 0 */
    uint32_t is_sub = 0u - (uint32_t)(em < 0x400u);        /* all ones for exponent 0 */
    uint32_t norm = ((em << 13) + 0x38000000u + (is_inf & 0x38000000u)) | (is_nan & 0x400000u);
    uint32_t sub = fp16_f32_bits((float)(int32_t)em * 0x1p-24f);
    return fp16_bits_f32((sub & is_sub) | (norm & ~is_sub) | sign);
}

/* Exact e4m3fn -> f32 without branches; equal to kv_fp8_to_f32() for all 256 codes (tested). */
static inline float fp8_decode(uint8_t b) {
    uint32_t em = b & 0x7fu;
    uint32_t sign = (uint32_t)(b & 0x80u) << 24;
    uint32_t is_nan = 0u - (uint32_t)(em == 0x7fu);
    uint32_t is_sub = 0u - (uint32_t)(em < 8u);
    uint32_t norm = (((em << 20) + (120u << 23)) & ~is_nan) | (0x7fc00000u & is_nan);
    uint32_t sub = fp16_f32_bits((float)(int32_t)em * 0x1p-9f);
    return fp16_bits_f32((sub & is_sub) | (norm & ~is_sub) | sign);
}

static inline uint16_t load16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);                                       /* little-endian host (kv_internal.h checks) */
    return v;
}

static inline float loadf(const uint8_t *p) {
    float v;
    memcpy(&v, p, 4);                                       /* little-endian host (kv_internal.h checks) */
    return v;
}

/* values of 32 packed nibbles (q[j] | q[j + 16] << 4) of a 4-bit block */
static inline void nibbles32(const uint8_t *restrict qs, const float *restrict tab, float d, float *restrict y) {
    for (int j = 0; j < 16; j++) {
        y[j] = tab[qs[j] & 15] * d;
        y[j + 16] = tab[qs[j] >> 4] * d;
    }
}

/* y[n] = values [32c, 32c + n) of row, n = min(32, h - 32c); the row is valid for (f, h).
 * The n == KV_CHUNK loops have a constant trip count so that the compiler vectorises them. */
static void decode_chunk(kv_fmt f, const uint8_t *restrict row, int h, int c, float *restrict y, int n) {
    int i0 = KV_CHUNK * c;
    switch (f) {
    case KV_F32: memcpy(y, row + 4 * (size_t)i0, 4 * (size_t)n); break;
    case KV_BF16: {
        const uint8_t *p = row + 2 * i0;                    /* [n][2] */
        if (n == KV_CHUNK)
            for (int j = 0; j < KV_CHUNK; j++) y[j] = bf16_to_f32(load16(p + 2 * j));
        else
            for (int j = 0; j < n; j++) y[j] = bf16_to_f32(load16(p + 2 * j));
        break;
    }
    case KV_F16: {
        const uint8_t *p = row + 2 * i0;                    /* [n][2] */
        /* the vector conversion (F16C, fcvtl or the plain C one): exact, quiet NaNs as f16_decode
         * (test_kv checks every code) */
        if (n == KV_CHUNK) {
            for (int j = 0; j < KV_CHUNK; j += 16) v_store(y + j, v_load_f16(p + 2 * j));
            break;
        }
        for (int j = 0; j < n; j++) y[j] = f16_decode(load16(p + 2 * j));
        break;
    }
    case KV_INT8: {
        /* a chunk never straddles two groups: g is h (one group) or 64 */
        const int8_t *p = (const int8_t *)row + i0;         /* [n] */
        float s = f16_decode(load16(row + h + 2 * (i0 / kv_int8_group(h))));
        if (n == KV_CHUNK)
            for (int j = 0; j < KV_CHUNK; j++) y[j] = (float)p[j] * s;
        else
            for (int j = 0; j < n; j++) y[j] = (float)p[j] * s;
        break;
    }
    case KV_Q8_0: {
        const uint8_t *b = row + 34 * c;                    /* [34], n == 32 */
        const int8_t *p = (const int8_t *)(b + 2);          /* [32] */
        float d = f16_decode(load16(b));
        for (int j = 0; j < KV_CHUNK; j++) y[j] = (float)p[j] * d;
        break;
    }
    case KV_Q4_0: {
        const uint8_t *b = row + 18 * c;                    /* [18], n == 32 */
        float d = f16_decode(load16(b));
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((b[2 + j] & 15) - 8) * d;
            y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
        }
        break;
    }
    case KV_FP8: {
        const uint8_t *p = row + i0;                        /* [n] */
        if (n == KV_CHUNK)
            for (int j = 0; j < KV_CHUNK; j++) y[j] = fp8_decode(p[j]);
        else
            for (int j = 0; j < n; j++) y[j] = fp8_decode(p[j]);
        break;
    }
    case KV_Q4_1: {
        const uint8_t *b = row + 20 * c;                    /* [20], n == 32 */
        float d = f16_decode(load16(b)), m = f16_decode(load16(b + 2));
        for (int j = 0; j < 16; j++) {
            y[j] = (float)(b[4 + j] & 15) * d + m;
            y[j + 16] = (float)(b[4 + j] >> 4) * d + m;
        }
        break;
    }
    case KV_Q5_0: {
        const uint8_t *b = row + 22 * c;                    /* [22], n == 32 */
        float d = f16_decode(load16(b));
        uint32_t qh = (uint32_t)b[2] | (uint32_t)b[3] << 8 | (uint32_t)b[4] << 16 | (uint32_t)b[5] << 24;
        for (int j = 0; j < 16; j++) {
            int lo = (b[6 + j] & 15) | (int)((qh >> j) & 1u) << 4;
            int hi = (b[6 + j] >> 4) | (int)((qh >> (j + 16)) & 1u) << 4;
            y[j] = (float)(lo - 16) * d;
            y[j + 16] = (float)(hi - 16) * d;
        }
        break;
    }
    case KV_Q5_1: {
        const uint8_t *b = row + 24 * c;                    /* [24], n == 32 */
        float d = f16_decode(load16(b)), m = f16_decode(load16(b + 2));
        uint32_t qh = (uint32_t)b[4] | (uint32_t)b[5] << 8 | (uint32_t)b[6] << 16 | (uint32_t)b[7] << 24;
        for (int j = 0; j < 16; j++) {
            int lo = (b[8 + j] & 15) | (int)((qh >> j) & 1u) << 4;
            int hi = (b[8 + j] >> 4) | (int)((qh >> (j + 16)) & 1u) << 4;
            y[j] = (float)lo * d + m;
            y[j + 16] = (float)hi * d + m;
        }
        break;
    }
    case KV_IQ4_NL: {
        const uint8_t *b = row + 18 * c;                    /* [18], n == 32 */
        nibbles32(b + 2, kv_iq4nl_values, f16_decode(load16(b)), y);
        break;
    }
    case KV_E5M2: {
        const uint8_t *p = row + i0;                        /* [n] */
        if (n == KV_CHUNK)
            for (int j = 0; j < KV_CHUNK; j++) y[j] = f16_decode((uint16_t)(p[j] << 8));
        else
            for (int j = 0; j < n; j++) y[j] = f16_decode((uint16_t)(p[j] << 8));
        break;
    }
    case KV_E4M3S: {
        const uint8_t *p = row + i0;                        /* [n] */
        float s = loadf(row + h);
        if (n == KV_CHUNK)
            for (int j = 0; j < KV_CHUNK; j++) y[j] = fp8_decode(p[j]) * s;
        else
            for (int j = 0; j < n; j++) y[j] = fp8_decode(p[j]) * s;
        break;
    }
    case KV_E5M2S: {
        const uint8_t *p = row + i0;                        /* [n] */
        float s = loadf(row + h);
        if (n == KV_CHUNK)
            for (int j = 0; j < KV_CHUNK; j++) y[j] = f16_decode((uint16_t)(p[j] << 8)) * s;
        else
            for (int j = 0; j < n; j++) y[j] = f16_decode((uint16_t)(p[j] << 8)) * s;
        break;
    }
    case KV_NVFP4: {
        for (int k = 0; 16 * k < n; k++) {                  /* n is 16 or 32: one or two blocks */
            const uint8_t *b = row + 9 * (2 * c + k);       /* [9] */
            float s = fp8_decode(b[0]);
            for (int j = 0; j < 8; j++) {
                y[16 * k + j] = kv_e2m1_values[b[1 + j] & 15] * s;
                y[16 * k + j + 8] = kv_e2m1_values[b[1 + j] >> 4] * s;
            }
        }
        break;
    }
    case KV_MXFP4: {
        const uint8_t *b = row + 17 * c;                    /* [17], n == 32 */
        nibbles32(b + 1, kv_e2m1_values, kv_e8m0_to_f32(b[0]), y);
        break;
    }
    case KV_TQ3:
    case KV_TQ4: {
        int bits = f == KV_TQ3 ? 3 : 4;
        const float *cb = bits == 3 ? kv_tq3_c : kv_tq4_c;
        float s = loadf(row);
        const uint8_t *codes = row + 4;                     /* [h * bits / 8] */
        for (int j = 0; j < n; j++) {
            size_t bit = (size_t)bits * (size_t)(i0 + j);
            unsigned v = codes[bit / 8] | (bit % 8 + (size_t)bits > 8 ? (unsigned)codes[bit / 8 + 1] << 8 : 0u);
            y[j] = cb[(v >> (bit % 8)) & ((1u << bits) - 1u)] * s;
        }
        break;
    }
    default: break;
    }
}

int kv_dequantize(kv_fmt f, const void *src, float *y, int h) {
    if (kv_row_bytes(f, h) == 0) return -1;
    f = kv_fmt_base(f);                                     /* the stored bytes' codec */
    for (int c = 0; KV_CHUNK * c < h; c++) {
        int n = h - KV_CHUNK * c < KV_CHUNK ? h - KV_CHUNK * c : KV_CHUNK;
        decode_chunk(f, src, h, c, y + KV_CHUNK * c, n);
    }
    return 0;
}

/* kv_dequantize_cols for a kv_vec_ok format f (a literal: KV_VEC_DISPATCH), each scale or table
 * built once for the values it serves: on AVX-512 the one-table block formats' whole blocks through
 * kv_vec.h's kv_vec_table / kv_vec_pick (NOTES.md row 40), int8's scale per group, q4_1's table per
 * block (the other families, and ranges that start or end mid-block) */
static inline __attribute__((always_inline)) void cols_vec(const kv_fmt f, const uint8_t *row, size_t stride, int n,
                                                           float *y, int h, int d0, int d1) {
    if (f == KV_INT8) {   /* kv_vec16's int8 case, each group's scale converted once */
        int g = kv_int8_group(h);   /* h or 64: a multiple of 16 */
        for (int r = 0; r < n; r++, row += stride, y += d1 - d0)
            for (int i = d0; i < d1;) {
                vec16 s = kv_int8_scale(row, h, i);
                int e = (i / g + 1) * g < d1 ? (i / g + 1) * g : d1;   /* the end of i's group */
                for (; i < e; i += 16) v_store(y + i - d0, kv_int8_vec16(row, i, s));
            }
        return;
    }
#if VEC16_REGS >= 32
    if (kv_vec_block(f) && d0 % 32 == 0 && d1 % 32 == 0) {   /* kv_vec.h's one-table formats: a table per block */
        size_t bb = (size_t)kv_vec_block(f);
        for (int r = 0; r < n; r++, row += stride, y += d1 - d0)
            for (int c = d0 / 32; c < d1 / 32; c++) {
                const uint8_t *b = row + bb * (size_t)c;
                vec16 t = kv_vec_table(f, b);
                v_store(y + 32 * c - d0, kv_vec_pick(f, b, t, 0));
                v_store(y + 32 * c - d0 + 16, kv_vec_pick(f, b, t, 1));
            }
        return;
    }
#endif
    if (f == KV_Q4_1) {   /* kv_vec16's q4_1, each block's table (two conversions and an fma) built once */
        for (int r = 0; r < n; r++, row += stride, y += d1 - d0)
            for (int i = d0; i < d1;) {
                const uint8_t *b = row + 20 * (size_t)(i / 32);
                int e = (i / 32 + 1) * 32 < d1 ? (i / 32 + 1) * 32 : d1;   /* the end of i's block */
                vlutf t = kv_q4_1_table(b);
                for (; i < e; i += 16) v_store(y + i - d0, kv_q4_1_vec16(b, t, i % 32 != 0));
            }
        return;
    }
    for (int r = 0; r < n; r++, row += stride, y += d1 - d0)
        for (int i = d0; i < d1; i += 16) v_store(y + i - d0, kv_vec16(f, row, h, i));
}

void kv_dequantize_cols(kv_fmt f, const void *src, size_t stride, int n, float *y, int h, int d0, int d1) {
    const uint8_t *row = src;
    int w = d1 - d0;   /* y [n][w] */
    f = kv_fmt_base(f);   /* the stored bytes' codec (rotated formats store the rotated vector) */
    if (kv_vec_ok(f, h) && d0 % 16 == 0 && w % 16 == 0) {   /* kv_vec.h: 16 values per vector, the same bits */
        KV_VEC_DISPATCH(f, cols_vec, row, stride, n, y, h, d0, d1);
        return;
    }
    for (int r = 0; r < n; r++, row += stride, y += w)
        for (int c = d0 / KV_CHUNK; KV_CHUNK * c < d1; c++) {
            int m = d1 - KV_CHUNK * c < KV_CHUNK ? d1 - KV_CHUNK * c : KV_CHUNK;
            decode_chunk(f, row, h, c, y + KV_CHUNK * c - d0, m);
        }
}

void kv_dequantize_rows(kv_fmt f, const void *src, size_t stride, int n, float *y, int h) {
    kv_dequantize_cols(f, src, stride, n, y, h, 0, h);
}

float kv_dot(kv_fmt f, const void *k, const float *q, int h) {
    f = kv_fmt_base(f);
    float acc[KV_LANES] = {0};
    float buf[KV_CHUNK];                                    /* [32] decoded chunk of k */
    for (int c = 0; KV_CHUNK * c < h; c++) {
        int n = h - KV_CHUNK * c < KV_CHUNK ? h - KV_CHUNK * c : KV_CHUNK;
        const float *qc = q + KV_CHUNK * c;                 /* [n] */
        decode_chunk(f, k, h, c, buf, n);
        /* 32c is a multiple of 8, so value i = 32c + j goes to lane j % 8 */
        if (n == KV_CHUNK) {
            for (int j = 0; j < KV_CHUNK; j += KV_LANES)
                for (int l = 0; l < KV_LANES; l++) acc[l] += buf[j + l] * qc[j + l];
        } else {
            for (int j = 0; j < n; j++) acc[j % KV_LANES] += buf[j] * qc[j];
        }
    }
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

void kv_axpy(kv_fmt f, const void *v_row, float w, float *y, int h) {
    f = kv_fmt_base(f);
    float buf[KV_CHUNK];                                    /* [32] decoded chunk of v */
    for (int c = 0; KV_CHUNK * c < h; c++) {
        int n = h - KV_CHUNK * c < KV_CHUNK ? h - KV_CHUNK * c : KV_CHUNK;
        float *yc = y + KV_CHUNK * c;                       /* [n] */
        decode_chunk(f, v_row, h, c, buf, n);
        if (n == KV_CHUNK)
            for (int j = 0; j < KV_CHUNK; j++) yc[j] += w * buf[j];
        else
            for (int j = 0; j < n; j++) yc[j] += w * buf[j];
    }
}
