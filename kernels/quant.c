/* quant.c — GGUF weight types: block sizes and dequantisation of one row to f32.
 *
 * The families live in their own files, each with its reference dequantisers (one per type, its
 * block layout in a comment), its vectorised dequantisers (the vec16 layer, kernels/vec16.h:
 * AVX-512, AVX2, NEON or plain C) and its fused dequantise-and-dot kernels for decode (the same
 * values, never stored):
 *   kernels/quant_legacy.c  Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
 *   kernels/quant_k.c       Q2_K .. Q6_K (vectorised: Q4_K, Q6_K)
 *   kernels/quant_iq.c      IQ4_NL, IQ4_XS, MXFP4, IQ2/IQ3/IQ1, TQ1_0, TQ2_0
 * This file holds the type table, the float types (F32, F16, BF16) and the row entry points,
 * which ask the families in turn (kernels/quant_internal.h).
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
 * are worked out above ref_iq4_nl in quant_iq.c). fp16 fields and F16 values are converted with fp16_to_f32() in
 * the reference and with the layer's v_half1 / v_load_f16 in the fast path (F16C, fcvt or the same
 * C conversion): the same f32 for every half, a NaN quieted in both.
 */
#include "kernels/quant.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/quant_internal.h"

/* ---------------------------------------------------------------------------------------------
 * 1. Type table
 * ------------------------------------------------------------------------------------------- */


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
 * 2. The float types: one value per "block" of 4 / 2 / 2 bytes.
 * ------------------------------------------------------------------------------------------- */

static void ref_f32(const uint8_t *b, float *y) { memcpy(y, b, 4); }
static void ref_f16(const uint8_t *b, float *y) { y[0] = load_f16(b); }
static void ref_bf16(const uint8_t *b, float *y) {
    uint16_t v;
    memcpy(&v, b, 2);
    y[0] = bf16_to_f32(v);
}

static void fast_f16(const uint8_t *src, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) v_store(y + i, v_load_f16(src + 2 * i));
    for (; i < n; i++) y[i] = v_half1(src + 2 * i);   /* the same value as the vector conversion */
}

static void fast_bf16(const uint8_t *src, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) ref_bf16(src + 2 * i, y + i);   /* a shift: the compiler vectorises it */
}

/* ---------------------------------------------------------------------------------------------
 * 3. Look-ups over the families
 * ------------------------------------------------------------------------------------------- */

/* The reference dequantiser of one block of type, or NULL. */
static quant_block_fn quant_ref_block(uint32_t type) {
    switch (type) {
    case GGUF_T_F32: return ref_f32;
    case GGUF_T_F16: return ref_f16;
    case GGUF_T_BF16: return ref_bf16;
    default: break;
    }
    quant_block_fn fn = quant_legacy_ref_block(type);
    if (!fn) fn = quant_k_ref_block(type);
    if (!fn) fn = quant_iq_ref_block(type);
    return fn;
}

/* The kernels of type: f8 for *rows rows at a time, f1 for one; -1 when it has none. */
static int fused_kernels(uint32_t type, quant_fused_fn *f8, quant_fused_fn *f1, int *rows) {
    *rows = type == GGUF_T_Q4_K || type == GGUF_T_Q6_K ? FUSED_ROWS_K : FUSED_ROWS;
    if (quant_legacy_fused(type, f8, f1) == 0) return 0;
    if (quant_k_fused(type, f8, f1) == 0) return 0;
    return quant_iq_fused(type, f8, f1);
}

/* The vectorised dequantiser of type, or NULL. */
static quant_row_fn quant_fast_row(uint32_t type) {
    switch (type) {
    case GGUF_T_F16: return fast_f16;
    case GGUF_T_BF16: return fast_bf16;
    default: break;
    }
    quant_row_fn fn = quant_legacy_fast_row(type);
    if (!fn) fn = quant_k_fast_row(type);
    if (!fn) fn = quant_iq_fast_row(type);
    return fn;
}

/* ---------------------------------------------------------------------------------------------
 * 4. Row entry points
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

int quant_dot_rows(uint32_t type, const void *src, size_t row_bytes, int nr, const float *x, int64_t n,
                   const void *ahead, float *out) {
    quant_fused_fn f8, f1;
    int bv = quant_block_values(type), rows_per_call;
    if (nr < 1 || nr > 8 || bv <= 1 || n <= 0 || n % bv || fused_kernels(type, &f8, &f1, &rows_per_call)) return -1;
    const uint8_t *rows = src, *next = ahead;   /* [nr][row_bytes] each */
    for (int r = 0, k; r < nr; r += k) {        /* rows_per_call rows at a time, then one by one */
        k = r + rows_per_call <= nr ? rows_per_call : 1;
        size_t at = (size_t)r * row_bytes;
        (k > 1 ? f8 : f1)(rows + at, row_bytes, x, n / bv, next ? next + at : NULL, out + r);
    }
    return 0;
}

int quant_has_fast_path(uint32_t type) { return quant_fast_row(type) != NULL; }
