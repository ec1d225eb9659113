/* kv_vec.h — a stored KV row's values 16 at a time, as one vec16 (inline, for attention's inner
 * loops: kernels/attn.c decodes K tiles straight into registers with it, kernels/kv_decode.c's
 * kv_dequantize_cols is built on it).
 *
 *   kv_vec_ok(f, h)            1 if kv_vec16 decodes rows of base format f (kv_fmt_base) with h
 *                              values: f32, f16, int8, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl and
 *                              mxfp4, with h a multiple of 16 (of 32 for the block formats);
 *                              0 otherwise (the caller goes through kv_dequantize_cols)
 *   kv_vec16(f, row, h, d0)    values [d0, d0 + 16) of the stored row (kv.h's layout), d0 a
 *                              multiple of 16, f and h as kv_vec_ok accepts
 *   KV_VEC_DISPATCH(f, fn, ...)  fn(F, ...) with F the literal of f (a kv_vec_ok format): an
 *                              always-inline fn then has kv_vec16's switch folded to one case
 *
 * Each value is what kv_dequantize gives, bit for bit: the same exact conversions (int -> float,
 * half -> f32) and the same roundings (scale times code or table entry; for the formats with a
 * minimum, code times scale plus m, whose product is exact, so one fma rounds as the add does);
 * tests/test_kv.c compares every format's random rows. Reads only the row's bytes; no state. */
#ifndef STRATA_KV_VEC_H
#define STRATA_KV_VEC_H

#include <stdint.h>
#include <string.h>

#include "kernels/kv.h"
#include "kernels/kv_internal.h"
#include "kernels/vec16.h"

static inline int kv_vec_ok(kv_fmt f, int h) {
    switch (f) {
    case KV_F32: case KV_F16: case KV_INT8: return h % 16 == 0;
    case KV_Q8_0: case KV_Q4_0: case KV_Q4_1: case KV_Q5_0: case KV_Q5_1: case KV_IQ4_NL: case KV_MXFP4:
        return h % 32 == 0;
    default: return 0;
    }
}

/* The 16 codes of values [d0, d0 + 16) of a 32-value 4-bit block: the low nibbles of its 16 bytes
 * qs for the first half (d0 % 32 == 0), the high ones for the second; with qh (q5_0 / q5_1: bit j
 * is value j's fifth bit) bit 4 from there. */
static inline vec16i kv_vec_codes(const uint8_t *qs, const uint8_t *qh, int second) {
    vec16i q = vi_load_u8(qs);
    /* the low nibbles: vi_code4 (kernels/vec16.h: the AVX-512 permutes read only the low 4 bits),
     * or a real mask where bit 4 comes from qh */
    q = second ? vi_srl(q, 4) : qh ? vi_and(q, vi_set1(15)) : vi_code4(q);
    if (qh) {
        unsigned bits = (unsigned)qh[0] | (unsigned)qh[1] << 8 | (unsigned)qh[2] << 16 | (unsigned)qh[3] << 24;
        q = vi_or_bits16(q, second ? bits >> 16 : bits & 0xffffu, 16);
    }
    return q;
}

/* q4_0 / q4_1 block b (18 / 20 bytes): its table of 16 values, and values [16 second, 16 second +
 * 16) of the block given it (kv_dequantize_cols builds each q4_1 block's table once for both
 * halves; q4_0's, one conversion and a multiply, is built per call: NOTES.md row 38; on AVX-512
 * both are built once per block through kv_vec_table below) */
static inline vlutm kv_q4_0_table(const uint8_t *b) { return v_lutm(v_half1(b), -8.0f); }
static inline vec16 kv_q4_0_vec16(const uint8_t *b, vlutm t, int second) {
    return v_lutm_get(t, kv_vec_codes(b + 2, NULL, second));
}
static inline vlutf kv_q4_1_table(const uint8_t *b) { return v_lutf_f16(b, 0.0f); }
static inline vec16 kv_q4_1_vec16(const uint8_t *b, vlutf t, int second) {
    return v_lutf_get(t, kv_vec_codes(b + 4, NULL, second));
}

/* iq4_nl / mxfp4 block b (18 / 17 bytes): its table, the format's 16 grid values times the
 * block's scale (fp16 d; e8m0 X, 2^(X - 127)) */
static inline vlutv kv_iq4nl_table(const uint8_t *b) { return v_lutv(v_half1(b), v_load(kv_iq4nl_values)); }
static inline vlutv kv_mxfp4_table(const uint8_t *b) { return v_lutv(kv_e8m0_to_f32(b[0]), v_load(kv_e2m1_values)); }

#if VEC16_REGS >= 32
/* With 32 registers (vec16_avx512.h) the table of each one-table block format (q4_0, q4_1, iq4_nl,
 * mxfp4) is one vec16, so that one pair of helpers serves them all: kv_vec_block(f) is f's block
 * bytes (0 for the other formats), kv_vec_table(f, b) block b's table, kv_vec_pick(f, b, t, second)
 * values [16 second, 16 second + 16) of the block given it: kv_vec16's values, with the table built
 * once for both halves (attn.c's K tiles and kv_decode.c's cols_vec, NOTES.md rows 39 and 40). */
static inline int kv_vec_block(kv_fmt f) {
    return f == KV_Q4_0 || f == KV_IQ4_NL ? 18 : f == KV_Q4_1 ? 20 : f == KV_MXFP4 ? 17 : 0;
}
static inline vec16 kv_vec_table(kv_fmt f, const uint8_t *b) {
    switch (f) {
    case KV_Q4_0: return kv_q4_0_table(b);
    case KV_Q4_1: return kv_q4_1_table(b);
    case KV_IQ4_NL: return kv_iq4nl_table(b);
    default: return kv_mxfp4_table(b);
    }
}
static inline vec16 kv_vec_pick(kv_fmt f, const uint8_t *b, vec16 t, int second) {
    return v_lutv_get(t, kv_vec_codes(b + (f == KV_Q4_1 ? 4 : f == KV_MXFP4 ? 1 : 2), NULL, second));
}
#endif

/* int8 (kv.h's layout: h codes, then one fp16 scale per kv_int8_group(h) values): the scale of
 * value d0's group, and values [d0, d0 + 16) given it (kv_dequantize_cols converts each group's
 * scale once) */
static inline vec16 kv_int8_scale(const uint8_t *row, int h, int d0) {
    return v_set1_f16(row + h + 2 * (size_t)(d0 / kv_int8_group(h)));
}
static inline vec16 kv_int8_vec16(const uint8_t *row, int d0, vec16 scale) { return v_mul(v_load_i8(row + d0), scale); }

static inline vec16 kv_vec16(kv_fmt f, const uint8_t *row, int h, int d0) {
    int c = d0 / 32, second = d0 % 32 != 0;   /* the block formats: block c, which half */
    switch (f) {
    case KV_F32: {
        float x[16];
        memcpy(x, row + 4 * (size_t)d0, sizeof x);
        return v_load(x);
    }
    case KV_F16: return v_load_f16(row + 2 * (size_t)d0);
    case KV_INT8: return kv_int8_vec16(row, d0, kv_int8_scale(row, h, d0));
    case KV_Q8_0: {
        const uint8_t *b = row + 34 * (size_t)c;            /* { fp16 d; int8 q[32] } */
        return v_mul(v_load_i8(b + 2 + 16 * second), v_set1_f16(b));
    }
    /* The block formats through vec16.h's tables (one permute per 16 values on AVX-512, the
     * computed entry elsewhere). The entries are the decoder's values: (q - 8) * d is the product
     * d * (-8 + q); q * d + m rounds once, as fma(d, q, m) does, because q * d is exact (an fp16
     * scale has 11 significant bits, a code at most 5). */
    case KV_Q4_0: {                                         /* { fp16 d; uint8 qs[16] } */
        const uint8_t *b = row + 18 * (size_t)c;
        return kv_q4_0_vec16(b, kv_q4_0_table(b), second);
    }
    case KV_Q5_0: {                                         /* { fp16 d; uint8 qh[4]; uint8 qs[16] } */
        const uint8_t *b = row + 22 * (size_t)c;
        return v_lutm32_get(v_lutm32(v_half1(b), -16.0f), kv_vec_codes(b + 6, b + 2, second));
    }
    case KV_Q4_1: {                                         /* { fp16 d; fp16 m; uint8 qs[16] } */
        const uint8_t *b = row + 20 * (size_t)c;
        return kv_q4_1_vec16(b, kv_q4_1_table(b), second);
    }
    case KV_Q5_1: {                                         /* { fp16 d; fp16 m; uint8 qh[4]; uint8 qs[16] } */
        const uint8_t *b = row + 24 * (size_t)c;
        return v_lutf32_get(v_lutf32_f16(b, 0.0f), kv_vec_codes(b + 8, b + 4, second));
    }
    case KV_IQ4_NL: {                                       /* { fp16 d; uint8 qs[16] }: grid[code] * d */
        const uint8_t *b = row + 18 * (size_t)c;
        return v_lutv_get(kv_iq4nl_table(b), kv_vec_codes(b + 2, NULL, second));
    }
    default: {                                              /* KV_MXFP4 { e8m0 X; uint8 qs[16] }: e2m1[code] * 2^(X - 127) */
        const uint8_t *b = row + 17 * (size_t)c;
        return v_lutv_get(kv_mxfp4_table(b), kv_vec_codes(b + 1, NULL, second));
    }
    }
}

#define KV_VEC_DISPATCH(f, fn, ...)                                      \
    do {                                                                 \
        switch (f) {                                                     \
        case KV_F32: fn(KV_F32, __VA_ARGS__); break;                     \
        case KV_F16: fn(KV_F16, __VA_ARGS__); break;                     \
        case KV_INT8: fn(KV_INT8, __VA_ARGS__); break;                   \
        case KV_Q8_0: fn(KV_Q8_0, __VA_ARGS__); break;                   \
        case KV_Q4_0: fn(KV_Q4_0, __VA_ARGS__); break;                   \
        case KV_Q4_1: fn(KV_Q4_1, __VA_ARGS__); break;                   \
        case KV_Q5_0: fn(KV_Q5_0, __VA_ARGS__); break;                   \
        case KV_Q5_1: fn(KV_Q5_1, __VA_ARGS__); break;                   \
        case KV_IQ4_NL: fn(KV_IQ4_NL, __VA_ARGS__); break;               \
        default: fn(KV_MXFP4, __VA_ARGS__); break;                       \
        }                                                                \
    } while (0)

#endif
