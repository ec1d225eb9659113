/* quant_internal.h — what the weight-type files share (kernels/quant.c and its families
 * kernels/quant_legacy.c, quant_k.c, quant_iq.c); no other file includes it.
 *
 * Each family file exports three look-ups by type number, each returning NULL / -1 for a type
 * outside its family: its reference block dequantiser, its vectorised row dequantiser and its
 * fused dequantise-and-dot kernels. kernels/quant.c's entry points ask the families in turn.
 * Nothing here allocates or keeps state.
 */
#ifndef STRATA_QUANT_INTERNAL_H
#define STRATA_QUANT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/fp16.h"
#include "kernels/prefetch.h"
#include "kernels/quant.h"
#include "kernels/vec16.h"

#define QK_K 256   /* values per K-quant super-block */

/* A reference dequantiser: one block at b into y[block_values]. */
typedef void (*quant_block_fn)(const uint8_t *b, float *y);
/* A vectorised dequantiser: nb blocks at src into y[nb * block_values] (F16 / BF16: n values). */
typedef void (*quant_row_fn)(const uint8_t *src, float *y, int64_t nb);
/* A fused kernel: rows at src (row r at src + r * rb, nb blocks each) times x[nb * block_values]
 * into out[rows] (FUSED_ROWS / FUSED_ROWS_K rows for the _8 kernels, one for the _1 kernels).
 * ahead: as many rows (the same stride) that the caller reads next, asked of the memory a block's
 * share at a time while these are computed, never read (a hint: no value depends on it), or NULL. */
typedef void (*quant_fused_fn)(const uint8_t *src, size_t rb, const float *x, int64_t nb, const uint8_t *ahead,
                               float *out);

/* The families (the type table and the float types are in quant.c). *f8 / *f1: the kernels for
 * FUSED_ROWS (K-quants: FUSED_ROWS_K) rows at a time and for one row; 0, or -1 when not this family's. */
quant_block_fn quant_legacy_ref_block(uint32_t type);   /* Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 */
quant_row_fn quant_legacy_fast_row(uint32_t type);
int quant_legacy_fused(uint32_t type, quant_fused_fn *f8, quant_fused_fn *f1);
quant_block_fn quant_k_ref_block(uint32_t type);        /* Q2_K .. Q6_K */
quant_row_fn quant_k_fast_row(uint32_t type);
int quant_k_fused(uint32_t type, quant_fused_fn *f8, quant_fused_fn *f1);
quant_block_fn quant_iq_ref_block(uint32_t type);       /* IQ*, MXFP4, TQ1_0, TQ2_0 */
quant_row_fn quant_iq_fast_row(uint32_t type);
int quant_iq_fused(uint32_t type, quant_fused_fn *f8, quant_fused_fn *f1);

/* an fp16 field at p (any alignment) as f32 */
static inline float load_f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return fp16_to_f32(h);
}

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
 * blocks of BV values each; BLOCK(q, b, xb) adds row q's block b (x at xb) to acc[q]. Block b asks
 * for its share (ahead_step bytes) of the nr * rb bytes at ahead. */
#define FUSED_BODY(BV, BLOCK)                                                                  \
    vec16 acc[FUSED_ROWS];                                                                     \
    size_t ahead_step = ahead ? (size_t)nr * rb / (size_t)nb : 0, ahead_at = 0;                \
    _Pragma("GCC unroll 8") for (int q = 0; q < nr; q++) acc[q] = v_zero();                    \
    for (int64_t b = 0; b < nb; b++) {                                                         \
        const float *xb = x + b * (BV);                                                        \
        prefetch_l1_upto(ahead, &ahead_at, (size_t)(b + 1) * ahead_step);                      \
        _Pragma("GCC unroll 8") for (int q = 0; q < nr; q++) { BLOCK(q, b, xb); }              \
    }                                                                                          \
    _Pragma("GCC unroll 8") for (int q = 0; q < nr; q++) out[q] = v_sum(acc[q]);

/* acc[q] += w * x[e..e+15] */
#define FMA16(e, w) (acc[q] = v_fma((w), v_load(xb + (e)), acc[q]))


/* For each type: fd_<type>_8 (ROWS rows: FUSED_ROWS or FUSED_ROWS_K) and fd_<type>_1 (one row). */
#define FUSED_KERNELS(name, BV, BLOCK, ROWS)                                                   \
    ALWAYS_INLINE void name##_n(const uint8_t *src, size_t rb, const int nr, const float *x,   \
                                int64_t nb, const uint8_t *ahead, float *out) { FUSED_BODY(BV, BLOCK) } \
    static void name##_8(const uint8_t *src, size_t rb, const float *x, int64_t nb, const uint8_t *ahead, \
                         float *out) { name##_n(src, rb, ROWS, x, nb, ahead, out); }          \
    static void name##_1(const uint8_t *src, size_t rb, const float *x, int64_t nb, const uint8_t *ahead, \
                         float *out) { name##_n(src, rb, 1, x, nb, ahead, out); }

#endif
