/* vec16_avx512.h — the vec16 layer on AVX-512 (F, DQ, BW) with F16C: one 512-bit register per
 * vec16. Included by kernels/vec16.h only; the API and the rules are described there. */
#ifndef STRATA_VEC16_AVX512_H
#define STRATA_VEC16_AVX512_H

#include <immintrin.h>

#define VEC16_ISA "avx512"
#define VEC16_REGS 32

typedef __m512 vec16;
typedef __m512i vec16i;
typedef __m256 vec8;

VEC_INLINE vec16 v_zero(void) { return _mm512_setzero_ps(); }
VEC_INLINE vec16 v_set1(float x) { return _mm512_set1_ps(x); }
VEC_INLINE vec16 v_load(const float *p) { return _mm512_loadu_ps(p); }
VEC_INLINE void v_store(float *p, vec16 v) { _mm512_storeu_ps(p, v); }
VEC_INLINE vec16 v_add(vec16 a, vec16 b) { return _mm512_add_ps(a, b); }
VEC_INLINE vec16 v_sub(vec16 a, vec16 b) { return _mm512_sub_ps(a, b); }
VEC_INLINE vec16 v_mul(vec16 a, vec16 b) { return _mm512_mul_ps(a, b); }
VEC_INLINE vec16 v_fma(vec16 a, vec16 b, vec16 c) { return _mm512_fmadd_ps(a, b, c); }
VEC_INLINE vec16 v_min(vec16 a, vec16 b) { return _mm512_min_ps(a, b); }
VEC_INLINE vec16 v_max(vec16 a, vec16 b) { return _mm512_max_ps(a, b); }
VEC_INLINE vec16 v_round(vec16 v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
VEC_INLINE vec16 v_load_f16(const void *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
VEC_INLINE void v_store_f16(void *p, vec16 v) {
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
VEC_INLINE float v_half1(const void *p) { uint16_t h; memcpy(&h, p, 2); return _cvtsh_ss(h); }
VEC_INLINE vec16 v_set1_f16(const void *p) { uint16_t h; memcpy(&h, p, 2); return _mm512_cvtph_ps(_mm256_set1_epi16((short)h)); }
VEC_INLINE vec16 v_load_i8(const void *p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}
VEC_INLINE vec16 v_load_u8(const void *p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)));
}
VEC_INLINE vec16 v_cvt(vec16i v) { return _mm512_cvtepi32_ps(v); }
VEC_INLINE vec16 v_zero_lt(vec16 x, vec16 v, vec16 lim) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, lim, _CMP_NLT_UQ), x);
}
VEC_INLINE vec16 v_pow2i(vec16 n) {
    __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
}
VEC_INLINE vec16 v_flipsign(vec16 v, unsigned m) {
    __m512i b = _mm512_castps_si512(v);
    return _mm512_castsi512_ps(_mm512_mask_xor_epi32(b, (__mmask16)m, b, _mm512_set1_epi32((int)0x80000000u)));
}
VEC_INLINE vec16 v_div(vec16 a, vec16 b) { return _mm512_div_ps(a, b); }
/* glibc's expf on 8 lanes in double (vec16.h): k = round(x 32/ln2) through the shift, r = x 32/ln2
 * - k by one fma, 2^(k/32) = table[k % 32] with k / 32 added to its exponent, times the polynomial;
 * the last rounding is vcvtpd2ps's (to nearest even) */
VEC_INLINE __m256 v_expf8_(__m256 x) {
    const __m512d inv = _mm512_set1_pd(VEC_EXP_INVLN2N), sh = _mm512_set1_pd(VEC_EXP_SHIFT);
    __m512d xd = _mm512_cvtps_pd(x);
    __m512d kd = _mm512_fmadd_pd(inv, xd, sh);
    __m512i ki = _mm512_castpd_si512(kd);
    kd = _mm512_sub_pd(kd, sh);
    __m512d r = _mm512_fmsub_pd(inv, xd, kd);
    const double *t = vec16_exp2_32;
    __m512d lo = _mm512_permutex2var_pd(_mm512_loadu_pd(t), ki, _mm512_loadu_pd(t + 8));        /* j & 15 of 0..15 */
    __m512d hi = _mm512_permutex2var_pd(_mm512_loadu_pd(t + 16), ki, _mm512_loadu_pd(t + 24)); /* of 16..31 */
    __m512d tj = _mm512_mask_blend_pd(_mm512_test_epi64_mask(ki, _mm512_set1_epi64(16)), lo, hi);
    __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(_mm512_castpd_si512(tj), _mm512_slli_epi64(_mm512_srli_epi64(ki, 5), 52)));
    __m512d p = _mm512_fmadd_pd(_mm512_set1_pd(VEC_EXP_C0), r, _mm512_set1_pd(VEC_EXP_C1));
    __m512d r2 = _mm512_mul_pd(r, r);
    __m512d y = _mm512_fmadd_pd(_mm512_set1_pd(VEC_EXP_C2), r, _mm512_set1_pd(1.0));
    y = _mm512_fmadd_pd(p, r2, y);
    return _mm512_cvtpd_ps(_mm512_mul_pd(y, s));
}
VEC_INLINE vec16 v_expf(vec16 x) {
    vec16 y = _mm512_insertf32x8(_mm512_castps256_ps512(v_expf8_(_mm512_castps512_ps256(x))),
                                 v_expf8_(_mm512_extractf32x8_ps(x, 1)), 1);
    __m512i ax = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff));
    __mmask16 slow = _mm512_cmpge_epu32_mask(ax, _mm512_set1_epi32((int)VEC_EXP_SLOW));
    if (slow) {
        float xs[16], ys[16];
        _mm512_storeu_ps(xs, x);
        _mm512_storeu_ps(ys, y);
        vec16_expf_lanes(xs, ys, slow, 16);
        y = _mm512_loadu_ps(ys);
    }
    return y;
}
VEC_INLINE void v_reg(vec16 *v) { __asm__("" : "+v"(*v)); }

/* the canonical reduction: fold lanes l + (l+8), then ((s0+s4)+(s2+s6)) + ((s1+s5)+(s3+s7)) */
VEC_INLINE float v_sum(vec16 v) {
    __m256 f = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(f), _mm256_extractf128_ps(f, 1)); /* (s0+s4, s1+s5, s2+s6, s3+s7) */
    __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));                                  /* (.. + (s2+s6), .. + (s3+s7)) */
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}
VEC_INLINE float v_hmax(vec16 v) {
    float l[16], m = -INFINITY;
    _mm512_storeu_ps(l, v);
    for (int i = 0; i < 16; i++) if (l[i] > m) m = l[i];
    return m;
}

VEC_INLINE vec16i vi_set1(int32_t x) { return _mm512_set1_epi32(x); }
VEC_INLINE vec16i vi_load_u8(const void *p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)); }
VEC_INLINE vec16i vi_and(vec16i a, vec16i b) { return _mm512_and_si512(a, b); }
VEC_INLINE vec16i vi_or(vec16i a, vec16i b) { return _mm512_or_si512(a, b); }
VEC_INLINE vec16i vi_add(vec16i a, vec16i b) { return _mm512_add_epi32(a, b); }
VEC_INLINE vec16i vi_sub(vec16i a, vec16i b) { return _mm512_sub_epi32(a, b); }
VEC_INLINE vec16i vi_mul(vec16i a, vec16i b) { return _mm512_mullo_epi32(a, b); }
VEC_INLINE vec16i vi_srl(vec16i v, int n) { return _mm512_srl_epi32(v, _mm_cvtsi32_si128(n)); }
VEC_INLINE vec16i vi_sll(vec16i v, int n) { return _mm512_sll_epi32(v, _mm_cvtsi32_si128(n)); }
VEC_INLINE vec16i vi_bits16(uint32_t bits, int32_t val) { return _mm512_maskz_mov_epi32((__mmask16)bits, _mm512_set1_epi32(val)); }
VEC_INLINE vec16i vi_or_bits16(vec16i v, uint32_t bits, int32_t val) { return _mm512_mask_or_epi32(v, (__mmask16)bits, v, _mm512_set1_epi32(val)); }

VEC_INLINE vec16i vi_load(const int32_t *p) { return _mm512_loadu_si512((const void *)p); }
/* 16 bytes held in integers (byte k of a is lane k, of b lane 8 + k ...) -> f32 */
VEC_INLINE vec16 v_u8_64x2(uint64_t a, uint64_t b) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_set_epi64x((long long)b, (long long)a))); }
VEC_INLINE vec16 v_i8_64x2(uint64_t a, uint64_t b) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_set_epi64x((long long)b, (long long)a))); }
VEC_INLINE vec16 v_u8_32x4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_setr_epi32((int)a, (int)b, (int)c, (int)d)));
}

/* tables in a register, codes picked with vpermps (the low 4 bits) or vpermi2ps (the low 5) */
typedef __m512 vlutm, vlutf, vlutv;
typedef struct { __m512 lo, hi; } vlutm32, vlutf32;
VEC_INLINE __m512 v_iota_(float base) {
    return _mm512_add_ps(_mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_ps(base));
}
VEC_INLINE vlutm v_lutm(float d, float base) { return _mm512_mul_ps(_mm512_set1_ps(d), v_iota_(base)); }
VEC_INLINE __m512 v_lutf_v_(__m512 d, float base, __m512 m) { return _mm512_fmadd_ps(d, v_iota_(base), m); }
VEC_INLINE vlutf v_lutf(float d, float base, float m) { return v_lutf_v_(_mm512_set1_ps(d), base, _mm512_set1_ps(m)); }
VEC_INLINE vlutv v_lutv(float d, vec16 vals) { return _mm512_mul_ps(_mm512_set1_ps(d), vals); }
VEC_INLINE vec16 v_lutm_get(vlutm t, vec16i idx) { return _mm512_permutexvar_ps(idx, t); }
VEC_INLINE vec16 v_lutf_get(vlutf t, vec16i idx) { return _mm512_permutexvar_ps(idx, t); }
VEC_INLINE vec16 v_lutv_get(vlutv t, vec16i idx) { return _mm512_permutexvar_ps(idx, t); }
VEC_INLINE vlutm32 v_lutm32(float d, float base) { vlutm32 t = { v_lutm(d, base), v_lutm(d, base + 16.0f) }; return t; }
/* d from the fp16 at p as one broadcast and one conversion (v_set1_f16), not a scalar conversion
 * and a broadcast: two instructions fewer per block (NOTES.md row 46) */
VEC_INLINE vlutm32 v_lutm32_f16(const void *p, float base) {
    vec16 d = v_set1_f16(p);
    vlutm32 t = { _mm512_mul_ps(d, v_iota_(base)), _mm512_mul_ps(d, v_iota_(base + 16.0f)) };
    return t;
}
VEC_INLINE vlutf32 v_lutf32(float d, float base, float m) {
    vlutf32 t = { v_lutf(d, base, m), v_lutf(d, base + 16.0f, m) };
    return t;
}
VEC_INLINE vec16 v_lutm32_get(vlutm32 t, vec16i idx) { return _mm512_permutex2var_ps(t.lo, idx, t.hi); }
VEC_INLINE vec16 v_lutf32_get(vlutf32 t, vec16i idx) { return _mm512_permutex2var_ps(t.lo, idx, t.hi); }
/* d and m from the fp16 pair at p as AVX2 takes them: one 4-byte broadcast, one conversion to
 * (d, m, d, m, ...), the even and the odd lanes duplicated (NOTES.md row 50) */
VEC_INLINE void v_dm_f16_(const void *p, __m512 *d, __m512 *m) {
    __m512 v = _mm512_cvtph_ps(_mm256_castps_si256(_mm256_broadcast_ss((const float *)p)));   /* vbroadcastss: bits only */
    *d = _mm512_moveldup_ps(v);
    *m = _mm512_movehdup_ps(v);
}
VEC_INLINE vlutf v_lutf_f16(const void *p, float base) {
    __m512 d, m;
    v_dm_f16_(p, &d, &m);
    return v_lutf_v_(d, base, m);
}
VEC_INLINE vlutf32 v_lutf32_f16(const void *p, float base) {
    __m512 d, m;
    v_dm_f16_(p, &d, &m);
    vlutf32 t = { v_lutf_v_(d, base, m), v_lutf_v_(d, base + 16.0f, m) };
    return t;
}
VEC_INLINE vec16i vi_code4(vec16i v) { return v; }   /* vpermps reads only the low 4 bits */

/* out[c][r] = in[r][c], 16 x 16: unpack pairs of rows, then 4 x 4 blocks, then 128-bit lanes */
VEC_INLINE void v_transpose16r(const vec16 *rows, float *out, size_t ldo) {
    __m512 r[16], t[16];
    #pragma GCC unroll 16
    for (int i = 0; i < 16; i++) r[i] = rows[i];
    #pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {   /* lane L: (a[4L], b[4L], a[4L+1], b[4L+1]) and the next two */
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    #pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {   /* r[4i+k], lane L: rows 4i..4i+3 at column 4L+k */
        r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    #pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {   /* column 4L+k = lane L of r[k], r[4+k], r[8+k], r[12+k] */
        __m512 x0 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x88), x1 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xDD);
        __m512 y0 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x88), y1 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xDD);
        t[k] = _mm512_shuffle_f32x4(x0, y0, 0x88);
        t[8 + k] = _mm512_shuffle_f32x4(x0, y0, 0xDD);
        t[4 + k] = _mm512_shuffle_f32x4(x1, y1, 0x88);
        t[12 + k] = _mm512_shuffle_f32x4(x1, y1, 0xDD);
    }
    #pragma GCC unroll 16
    for (int c = 0; c < 16; c++) _mm512_storeu_ps(out + (size_t)c * ldo, t[c]);
}
VEC_INLINE void v_transpose16(const float *in, size_t ldi, float *out, size_t ldo) {
    vec16 r[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(in + (size_t)i * ldi);
    v_transpose16r(r, out, ldo);
}

VEC_INLINE vec8 v8_zero(void) { return _mm256_setzero_ps(); }
VEC_INLINE vec8 v8_load(const float *p) { return _mm256_loadu_ps(p); }
VEC_INLINE vec8 v8_add(vec8 a, vec8 b) { return _mm256_add_ps(a, b); }
VEC_INLINE void v8_store(float *p, vec8 v) { _mm256_storeu_ps(p, v); }

#endif
