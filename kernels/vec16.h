/* vec16.h — the kernels' one SIMD layer: a 16-lane f32 vector (vec16), a 16-lane int32 vector
 * (vec16i), an 8-lane f32 vector (vec8) and the handful of operations the kernels are written in.
 * No kernel uses an intrinsic: every vector operation in kernels/ goes through this header.
 *
 * One family of mappings per ISA, chosen here once (the only place an ISA macro is tested):
 *   VEC_ISA_AVX512  vec16 = one 512-bit register      kernels/vec16_avx512.h
 *   VEC_ISA_AVX2    vec16 = two 256-bit halves        kernels/vec16_avx2.h   (AVX2 + FMA + F16C)
 *   VEC_ISA_NEON    vec16 = four 128-bit quarters     kernels/vec16_neon.h   (AArch64)
 *   VEC_ISA_C       vec16 = float[16], plain C         kernels/vec16_c.h      (any compiler; also with
 *                                                                             -DVEC_FORCE_C)
 * VEC16_ISA names the family ("avx512", "avx2", "neon", "c"); VEC16_REGS is how many vec16 fit in
 * the register file (tiles are sized by it: 32 with AVX-512, 8 with AVX2 and NEON).
 *
 * Why every build gives the same bits (docs/DESIGN.md §2.7): each operation is defined lane by lane
 * with one IEEE rounding (v_fma is a fused multiply-add everywhere: vfmadd, fmla, fmaf), the
 * horizontal sum v_sum has one fixed order (below), conversions are exact, and the operations whose
 * hardware forms differ at the edges are defined by their x86 form and emulated elsewhere
 * (v_min/v_max: a < b ? a : b, the second operand on a NaN; v_pow2i of a NaN lane: 1.0f). Which
 * lanes a kernel groups into a vector, and how many vectors it keeps in registers, then changes no
 * result: the canonical orders of ops.h / cache.h fix what is added to what.
 *
 * The API (each ISA header defines all of it; p may be unaligned everywhere):
 *   vec16  v_zero(), v_set1(f), v_load(const float *), v_store(float *, v)
 *          v_add, v_sub, v_mul, v_fma(a, b, c) = a * b + c rounded once, v_min, v_max (x86 rule)
 *          v_round(v): to nearest integer, ties to even
 *          v_load_f16(p): 16 IEEE halves -> f32 (exact; a NaN comes out quiet, as F16C)
 *          v_expf(v): glibc's expf lane by lane, the same bits (the FFN activations' exp:
 *          ops_swiglu, ops_geglu); AVX-512 and AVX2 compute it in double with expf's
 *          operations and table, a lane with |x| >= 88 or not finite by expf itself; NEON and C
 *          call expf
 *          v_div(a, b): a / b, IEEE division lane by lane
 *   void   v_store_f16(p, v): 16 f32 -> IEEE halves, rounded to nearest even (fp16.h's
 *          fp16_from_f32 lane by lane: overflow to inf, a NaN quiet with its top payload bits)
 *   float  v_half1(p): one IEEE half -> f32, the same conversion (F16C, fcvt or C)
 *   vec16  v_set1_f16(p): v_set1(v_half1(p)) (with F16C: one broadcast and one conversion)
 *          v_load_i8(p) / v_load_u8(p): 16 signed / unsigned bytes -> f32 (exact)
 *          v_cvt(vi): int32 lanes -> f32 (exact for |i| < 2^24)
 *          v_zero_lt(x, v, lim): x, with 0 in the lanes where v < lim (false for a NaN v)
 *          v_pow2i(n): 2^n for integral n in [-126, 128] (n = 128 gives +inf), 1.0f for a NaN lane
 *          v_flipsign(v, m): v with the sign of lane l flipped where bit l of m is set
 *   float  v_sum(v): the canonical 16-lane reduction s_l = v_l + v_(l+8), then
 *                    ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))
 *          v_hmax(v): the largest lane (lanes compared in order with >, starting at -inf)
 *   void   v_reg(&v): keeps v in registers (an empty asm; see NOTES.md change 18)
 *   vec16i vi_set1(i), vi_load_u8(p) (16 bytes zero-extended), vi_and, vi_or, vi_add, vi_sub,
 *          vi_mul (low 32 bits), vi_srl(v, n), vi_sll(v, n) (logical shifts, 0 <= n < 32),
 *          vi_bits16(bits, val): lane l = bit l of bits ? val : 0, vi_load(const int32_t *)
 *          vi_or_bits16(v, bits, val): vi_or(v, vi_bits16(bits, val)) for val a power of two and
 *                   bits * val < 2^32 (AVX-512: one masked or; AVX2: a shift by the lane number)
 *   vec16  v_u8_64x2(a, b), v_i8_64x2(a, b), v_u8_32x4(a, b, c, d): 16 bytes held in integers,
 *          little-endian (byte k of a is lane k), as unsigned / signed values -> f32
 *   tables: 16 (or 32) values picked by small codes, one per lane. The AVX-512 family builds the
 *          table in a register and permutes (vpermps); the others compute the entry from the code,
 *          which is the same expression:
 *          vlutm  v_lutm(d, base):      entry i = d * (base + i)         v_lutm_get(t, idx)
 *          vlutf  v_lutf(d, base, m):   entry i = fma(d, base + i, m)    v_lutf_get(t, idx)
 *                 v_lutf_f16(p, base):  v_lutf(v_half1(p), base, v_half1(p + 2))
 *          (base: an integer, |base| <= 16, as every kernel passes)
 *          vlutm32 / vlutf32: the same with 32 entries (v_lutm32, v_lutm32_get, v_lutf32_f16,
 *          v_lutm32_f16(p, base) = v_lutm32(v_half1(p), base), ...)
 *          vlutv  v_lutv(d, vals):      entry i = d * vals[i]            v_lutv_get(t, idx)
 *          The lutm/lutf gets take codes (lanes in 0..15, or 0..31 for the 32-entry tables); a
 *          lane that holds a whole byte goes through vi_code4(v) first: lane & 15, or v unchanged
 *          in the AVX-512 family, whose permutes read only the low 4 bits (so neither family pays
 *          for a mask it does not need: NOTES.md change 25). v_lutv_get takes the low 4 bits of
 *          any lane.
 *   memory helpers: v_transpose16(in, ldi, out, ldo): out[c][r] = in[r][c] for a 16 x 16 tile;
 *          v_transpose16r(rows, out, ldo): the same from 16 vectors rows[r] (lane c = column c)
 *   vec8   v8_zero(), v8_load(p), v8_add(a, b), v8_store(p, v): 8 lanes, for the 8-lane sums
 *
 * Header-only, no state. */
#ifndef STRATA_VEC16_H
#define STRATA_VEC16_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/fp16.h"   /* fp16_from_f32: the plain-C v_store_f16 */

#if defined(VEC_FORCE_C)
#define VEC_ISA_C 1
#elif defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512BW__) && defined(__AVX2__) && \
      defined(__FMA__) && defined(__F16C__)
#define VEC_ISA_AVX512 1
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define VEC_ISA_AVX2 1
#elif defined(__aarch64__) && defined(__ARM_NEON)
#define VEC_ISA_NEON 1
#else
#define VEC_ISA_C 1
#endif

#define VEC_INLINE static inline __attribute__((always_inline))

/* v_expf's numbers (the x86 families compute glibc's expf in double: kernels/vec16_avx512.h):
 * 2^(j/32) for j = 0..31, each rounded to the nearest double, and the constants of glibc 2.36's
 * expf (sysdeps/ieee754/flt-32/e_expf.c, as its x86-64 FMA build runs it): x * 32/ln2 is split
 * into k + r with |r| <= 1/2 by adding VEC_EXP_SHIFT; 2^(r/32) ~ 1 + C2 r + (C0 r + C1) r^2. */
static const double vec16_exp2_32[32] = {
    0x1p+0, 0x1.059b0d3158574p+0, 0x1.0b5586cf9890fp+0, 0x1.11301d0125b51p+0,
    0x1.172b83c7d517bp+0, 0x1.1d4873168b9aap+0, 0x1.2387a6e756238p+0, 0x1.29e9df51fdee1p+0,
    0x1.306fe0a31b715p+0, 0x1.371a7373aa9cbp+0, 0x1.3dea64c123422p+0, 0x1.44e086061892dp+0,
    0x1.4bfdad5362a27p+0, 0x1.5342b569d4f82p+0, 0x1.5ab07dd485429p+0, 0x1.6247eb03a5585p+0,
    0x1.6a09e667f3bcdp+0, 0x1.71f75e8ec5f74p+0, 0x1.7a11473eb0187p+0, 0x1.82589994cce13p+0,
    0x1.8ace5422aa0dbp+0, 0x1.93737b0cdc5e5p+0, 0x1.9c49182a3f09p+0, 0x1.a5503b23e255dp+0,
    0x1.ae89f995ad3adp+0, 0x1.b7f76f2fb5e47p+0, 0x1.c199bdd85529cp+0, 0x1.cb720dcef9069p+0,
    0x1.d5818dcfba487p+0, 0x1.dfc97337b9b5fp+0, 0x1.ea4afa2a490dap+0, 0x1.f50765b6e454p+0,
};
#define VEC_EXP_INVLN2N 0x1.71547652b82fep+5
#define VEC_EXP_SHIFT 0x1.8p+52
#define VEC_EXP_C0 0x1.c6af84b912394p-20
#define VEC_EXP_C1 0x1.ebfce50fac4f3p-13
#define VEC_EXP_C2 0x1.62e42ff0c52d6p-6
#define VEC_EXP_SLOW 0x42b00000u   /* |x| >= 88 (and inf, NaN): glibc's own special cases, expf itself */
/* y[l] = expf(x[l]) for the lanes l < n whose bit is set in slow (the x families' v_expf) */
static inline void vec16_expf_lanes(const float *x, float *y, unsigned slow, int n) {
    for (int l = 0; l < n; l++)
        if (slow >> l & 1) y[l] = expf(x[l]);
}

#if VEC_ISA_AVX512
#include "kernels/vec16_avx512.h"
#elif VEC_ISA_AVX2
#include "kernels/vec16_avx2.h"
#elif VEC_ISA_NEON
#include "kernels/vec16_neon.h"
#else
#include "kernels/vec16_c.h"
#endif

#if VEC_ISA_NEON || VEC_ISA_C
/* what the NEON and plain-C families compose from their other operations (the x86 families have a
 * form of their own: vpermi2ps tables, the identity vi_code4, one-instruction broadcasts, a masked
 * or or a shift by the lane number for vi_or_bits16) */
VEC_INLINE vec16 v_lutm32_get(vlutm32 t, vec16i idx) { return v_lutm_get(t, idx); }
VEC_INLINE vec16 v_lutf32_get(vlutf32 t, vec16i idx) { return v_lutf_get(t, idx); }
VEC_INLINE vlutf v_lutf_f16(const void *p, float base) { return v_lutf(v_half1(p), base, v_half1((const uint8_t *)p + 2)); }
VEC_INLINE vlutf32 v_lutf32_f16(const void *p, float base) { return v_lutf_f16(p, base); }
VEC_INLINE vec16i vi_code4(vec16i v) { return vi_and(v, vi_set1(15)); }
VEC_INLINE vec16 v_set1_f16(const void *p) { return v_set1(v_half1(p)); }
VEC_INLINE vec16i vi_or_bits16(vec16i v, uint32_t bits, int32_t val) { return vi_or(v, vi_bits16(bits, val)); }
#endif

#if !VEC_ISA_AVX512
/* composed wherever AVX-512's single instruction (a vector broadcast of the scale) is not there */
VEC_INLINE vlutm32 v_lutm32_f16(const void *p, float base) { return v_lutm32(v_half1(p), base); }

/* 16 row vectors through a stack tile and the family's memory transpose (a 16 x 16 tile fits the
 * register file only with AVX-512; attention takes this path there alone, kernels/attn.c) */
VEC_INLINE void v_transpose16r(const vec16 *rows, float *out, size_t ldo) {
    float t[256];   /* [16][16] */
    for (int i = 0; i < 16; i++) v_store(t + 16 * i, rows[i]);
    v_transpose16(t, 16, out, ldo);
}
#endif

#endif
