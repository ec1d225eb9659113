/* vec16.h — a 16-lane f32 vector for the kernels' canonical orders: one 512-bit register with
 * AVX-512, two 256-bit halves (lanes 0-7, 8-15) with AVX2. Lane-wise arithmetic is the same either
 * way, so both builds give the same bits. VEC16 is defined when a vector path exists; without it
 * the kernels use their plain C forms. Header-only, no state. */
#ifndef STRATA_VEC16_H
#define STRATA_VEC16_H

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#if defined(__AVX512F__)
#define VEC16 1
#define VEC16_ISA "avx512"
typedef __m512 vec16;
static inline vec16 v_zero(void) { return _mm512_setzero_ps(); }
static inline vec16 v_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void v_store(float *p, vec16 v) { _mm512_storeu_ps(p, v); }
static inline vec16 v_set1(float x) { return _mm512_set1_ps(x); }
static inline vec16 v_fma(vec16 a, vec16 b, vec16 c) { return _mm512_fmadd_ps(a, b, c); }
/* lanes l + (l+8), l = 0..7 */
static inline __m256 v_fold(vec16 v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
}
/* Keeps v in a register (emits nothing): without it GCC folds a vector that is loaded once and
 * used by several fmas back into each fma as a memory operand, and the kernel becomes bound by
 * loads instead of fmas. */
static inline void v_reg(vec16 *v) { __asm__("" : "+v"(*v)); }
#else
#define VEC16 1
#define VEC16_ISA "avx2"
typedef struct { __m256 lo, hi; } vec16;
static inline vec16 v_zero(void) { vec16 r = { _mm256_setzero_ps(), _mm256_setzero_ps() }; return r; }
static inline vec16 v_load(const float *p) { vec16 r = { _mm256_loadu_ps(p), _mm256_loadu_ps(p + 8) }; return r; }
static inline void v_store(float *p, vec16 v) { _mm256_storeu_ps(p, v.lo); _mm256_storeu_ps(p + 8, v.hi); }
static inline vec16 v_set1(float x) { vec16 r = { _mm256_set1_ps(x), _mm256_set1_ps(x) }; return r; }
static inline vec16 v_fma(vec16 a, vec16 b, vec16 c) {
    vec16 r = { _mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi) };
    return r;
}
static inline __m256 v_fold(vec16 v) { return _mm256_add_ps(v.lo, v.hi); }
static inline void v_reg(vec16 *v) { __asm__("" : "+x"(v->lo)); __asm__("" : "+x"(v->hi)); }
#endif

/* The canonical reduction of ops.h: fold lanes l + (l+8), then ((s0+s4)+(s2+s6)) + ((s1+s5)+(s3+s7)). */
static inline float v_hsum8(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    __m128 s = _mm_add_ps(lo, hi);                 /* (l0+l4, l1+l5, l2+l6, l3+l7) */
    __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s)); /* (s0+s2, s1+s3, ...) */
    __m128 u = _mm_add_ss(t, _mm_movehdup_ps(t));  /* (s0+s2) + (s1+s3) */
    return _mm_cvtss_f32(u);
}
static inline float v_sum(vec16 v) { return v_hsum8(v_fold(v)); }

#endif   /* AVX2 + FMA */

#ifndef VEC16_ISA
#define VEC16_ISA "c"   /* no vector path: the plain C forms */
#endif

#endif
