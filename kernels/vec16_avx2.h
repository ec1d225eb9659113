/* vec16_avx2.h — the vec16 layer on AVX2 + FMA + F16C: a vec16 is two 256-bit halves, lanes 0-7
 * (lo) and 8-15 (hi). Included by kernels/vec16.h only; the API and the rules are described there.
 * The tables are computed from the code (two vpermps and a blend would cost more than the convert
 * and the multiply); v_lutv, whose values are arbitrary, permutes each 8-entry half. */
#ifndef STRATA_VEC16_AVX2_H
#define STRATA_VEC16_AVX2_H

#include <immintrin.h>

#define VEC16_ISA "avx2"
#define VEC16_REGS 8

typedef struct { __m256 lo, hi; } vec16;
typedef struct { __m256i lo, hi; } vec16i;
typedef __m256 vec8;

VEC_INLINE vec16 v_pair_(__m256 lo, __m256 hi) { vec16 r = { lo, hi }; return r; }
VEC_INLINE vec16i vi_pair_(__m256i lo, __m256i hi) { vec16i r = { lo, hi }; return r; }

VEC_INLINE vec16 v_zero(void) { return v_pair_(_mm256_setzero_ps(), _mm256_setzero_ps()); }
VEC_INLINE vec16 v_set1(float x) { return v_pair_(_mm256_set1_ps(x), _mm256_set1_ps(x)); }
VEC_INLINE vec16 v_load(const float *p) { return v_pair_(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)); }
VEC_INLINE void v_store(float *p, vec16 v) { _mm256_storeu_ps(p, v.lo); _mm256_storeu_ps(p + 8, v.hi); }
VEC_INLINE vec16 v_add(vec16 a, vec16 b) { return v_pair_(_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)); }
VEC_INLINE vec16 v_sub(vec16 a, vec16 b) { return v_pair_(_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)); }
VEC_INLINE vec16 v_mul(vec16 a, vec16 b) { return v_pair_(_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)); }
VEC_INLINE vec16 v_fma(vec16 a, vec16 b, vec16 c) {
    return v_pair_(_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi));
}
VEC_INLINE vec16 v_min(vec16 a, vec16 b) { return v_pair_(_mm256_min_ps(a.lo, b.lo), _mm256_min_ps(a.hi, b.hi)); }
VEC_INLINE vec16 v_max(vec16 a, vec16 b) { return v_pair_(_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)); }
VEC_INLINE vec16 v_round(vec16 v) {
    const int mode = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    return v_pair_(_mm256_round_ps(v.lo, mode), _mm256_round_ps(v.hi, mode));
}
VEC_INLINE vec16 v_load_f16(const void *p) {
    const __m128i *q = (const __m128i *)p;
    return v_pair_(_mm256_cvtph_ps(_mm_loadu_si128(q)), _mm256_cvtph_ps(_mm_loadu_si128(q + 1)));
}
VEC_INLINE void v_store_f16(void *p, vec16 v) {
    __m128i *q = (__m128i *)p;
    _mm_storeu_si128(q, _mm256_cvtps_ph(v.lo, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    _mm_storeu_si128(q + 1, _mm256_cvtps_ph(v.hi, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
VEC_INLINE float v_half1(const void *p) { uint16_t h; memcpy(&h, p, 2); return _cvtsh_ss(h); }
VEC_INLINE vec16 v_set1_f16(const void *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    __m256 v = _mm256_cvtph_ps(_mm_set1_epi16((short)h));   /* vpbroadcastw + vcvtph2ps */
    return v_pair_(v, v);
}
/* bytes -> 8 int32 lanes straight from memory (vpmovsxbd / vpmovzxbd with a memory operand: no
 * 16-byte load and shift) */
VEC_INLINE __m256i v_i8x8_(const uint8_t *p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
VEC_INLINE __m256i v_u8x8_(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
VEC_INLINE vec16 v_load_i8(const void *p) {
    const uint8_t *b = p;
    return v_pair_(_mm256_cvtepi32_ps(v_i8x8_(b)), _mm256_cvtepi32_ps(v_i8x8_(b + 8)));
}
VEC_INLINE vec16 v_load_u8(const void *p) {
    const uint8_t *b = p;
    return v_pair_(_mm256_cvtepi32_ps(v_u8x8_(b)), _mm256_cvtepi32_ps(v_u8x8_(b + 8)));
}
VEC_INLINE vec16 v_cvt(vec16i v) { return v_pair_(_mm256_cvtepi32_ps(v.lo), _mm256_cvtepi32_ps(v.hi)); }
VEC_INLINE vec16 v_zero_lt(vec16 x, vec16 v, vec16 lim) {
    return v_pair_(_mm256_and_ps(x.lo, _mm256_cmp_ps(v.lo, lim.lo, _CMP_NLT_UQ)),
                   _mm256_and_ps(x.hi, _mm256_cmp_ps(v.hi, lim.hi, _CMP_NLT_UQ)));
}
VEC_INLINE __m256 v_pow2i8_(__m256 n) {
    __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
}
VEC_INLINE vec16 v_pow2i(vec16 n) { return v_pair_(v_pow2i8_(n.lo), v_pow2i8_(n.hi)); }
/* lane l of the result: bit l of bits ? val : 0, for lanes 0-7 of one half */
VEC_INLINE __m256i vi_bits8_(uint32_t bits, int32_t val) {
    const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    __m256i set = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int32_t)bits), lane_bit), lane_bit);
    return _mm256_and_si256(set, _mm256_set1_epi32(val));
}
VEC_INLINE vec16i vi_bits16(uint32_t bits, int32_t val) { return vi_pair_(vi_bits8_(bits & 0xFFu, val), vi_bits8_((bits >> 8) & 0xFFu, val)); }
/* vi_or(v, vi_bits16(bits, val)) for val a power of two and bits * val < 2^32 (Q5's fifth bits:
 * val 16, bits < 2^16): one broadcast of bits * val, then per half a shift by the lane number
 * (vpsrlvd: bit l of bits lands on val's bit), an and and an or, instead of two broadcasts, and
 * per half an and, a compare and an and before the or */
VEC_INLINE vec16i vi_or_bits16(vec16i v, uint32_t bits, int32_t val) {
    const __m256i lane_lo = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), lane_hi = _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15);
    __m256i b = _mm256_set1_epi32((int32_t)(bits * (uint32_t)val)), m = _mm256_set1_epi32(val);
    return vi_pair_(_mm256_or_si256(v.lo, _mm256_and_si256(_mm256_srlv_epi32(b, lane_lo), m)),
                    _mm256_or_si256(v.hi, _mm256_and_si256(_mm256_srlv_epi32(b, lane_hi), m)));
}
VEC_INLINE vec16 v_flipsign(vec16 v, unsigned m) {
    vec16i s = vi_bits16(m, (int32_t)0x80000000u);
    return v_pair_(_mm256_xor_ps(v.lo, _mm256_castsi256_ps(s.lo)), _mm256_xor_ps(v.hi, _mm256_castsi256_ps(s.hi)));
}
VEC_INLINE vec16 v_div(vec16 a, vec16 b) { return v_pair_(_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)); }
/* glibc's expf on 4 lanes in double, the AVX-512 family's operations (vec16_avx512.h), the table
 * entry gathered */
VEC_INLINE __m128 v_expf4_(__m128 x) {
    const __m256d inv = _mm256_set1_pd(VEC_EXP_INVLN2N), sh = _mm256_set1_pd(VEC_EXP_SHIFT);
    __m256d xd = _mm256_cvtps_pd(x);
    __m256d kd = _mm256_fmadd_pd(inv, xd, sh);
    __m256i ki = _mm256_castpd_si256(kd);
    kd = _mm256_sub_pd(kd, sh);
    __m256d r = _mm256_fmsub_pd(inv, xd, kd);
    __m256d tj = _mm256_i64gather_pd(vec16_exp2_32, _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
    __m256d s = _mm256_castsi256_pd(_mm256_add_epi64(_mm256_castpd_si256(tj), _mm256_slli_epi64(_mm256_srli_epi64(ki, 5), 52)));
    __m256d p = _mm256_fmadd_pd(_mm256_set1_pd(VEC_EXP_C0), r, _mm256_set1_pd(VEC_EXP_C1));
    __m256d r2 = _mm256_mul_pd(r, r);
    __m256d y = _mm256_fmadd_pd(_mm256_set1_pd(VEC_EXP_C2), r, _mm256_set1_pd(1.0));
    y = _mm256_fmadd_pd(p, r2, y);
    return _mm256_cvtpd_ps(_mm256_mul_pd(y, s));
}
VEC_INLINE __m256 v_expf8_(__m256 x) {
    __m256 y = _mm256_set_m128(v_expf4_(_mm256_extractf128_ps(x, 1)), v_expf4_(_mm256_castps256_ps128(x)));
    __m256i ax = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fffffff));
    int slow = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(ax, _mm256_set1_epi32((int)VEC_EXP_SLOW - 1))));
    if (slow) {
        float xs[8], ys[8];
        _mm256_storeu_ps(xs, x);
        _mm256_storeu_ps(ys, y);
        vec16_expf_lanes(xs, ys, (unsigned)slow, 8);
        y = _mm256_loadu_ps(ys);
    }
    return y;
}
VEC_INLINE vec16 v_expf(vec16 x) { return v_pair_(v_expf8_(x.lo), v_expf8_(x.hi)); }
VEC_INLINE void v_reg(vec16 *v) { __asm__("" : "+x"(v->lo)); __asm__("" : "+x"(v->hi)); }

/* the canonical reduction: fold lanes l + (l+8), then ((s0+s4)+(s2+s6)) + ((s1+s5)+(s3+s7)) */
VEC_INLINE float v_sum(vec16 v) {
    __m256 f = _mm256_add_ps(v.lo, v.hi);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(f), _mm256_extractf128_ps(f, 1)); /* (s0+s4, s1+s5, s2+s6, s3+s7) */
    __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}
VEC_INLINE float v_hmax(vec16 v) {
    float l[16], m = -INFINITY;
    v_store(l, v);
    for (int i = 0; i < 16; i++) if (l[i] > m) m = l[i];
    return m;
}

VEC_INLINE vec16i vi_set1(int32_t x) { return vi_pair_(_mm256_set1_epi32(x), _mm256_set1_epi32(x)); }
VEC_INLINE vec16i vi_load_u8(const void *p) {
    const uint8_t *b = p;
    return vi_pair_(v_u8x8_(b), v_u8x8_(b + 8));
}
VEC_INLINE vec16i vi_and(vec16i a, vec16i b) { return vi_pair_(_mm256_and_si256(a.lo, b.lo), _mm256_and_si256(a.hi, b.hi)); }
VEC_INLINE vec16i vi_or(vec16i a, vec16i b) { return vi_pair_(_mm256_or_si256(a.lo, b.lo), _mm256_or_si256(a.hi, b.hi)); }
VEC_INLINE vec16i vi_add(vec16i a, vec16i b) { return vi_pair_(_mm256_add_epi32(a.lo, b.lo), _mm256_add_epi32(a.hi, b.hi)); }
VEC_INLINE vec16i vi_sub(vec16i a, vec16i b) { return vi_pair_(_mm256_sub_epi32(a.lo, b.lo), _mm256_sub_epi32(a.hi, b.hi)); }
VEC_INLINE vec16i vi_mul(vec16i a, vec16i b) { return vi_pair_(_mm256_mullo_epi32(a.lo, b.lo), _mm256_mullo_epi32(a.hi, b.hi)); }
VEC_INLINE vec16i vi_srl(vec16i v, int n) {
    __m128i c = _mm_cvtsi32_si128(n);
    return vi_pair_(_mm256_srl_epi32(v.lo, c), _mm256_srl_epi32(v.hi, c));
}
VEC_INLINE vec16i vi_sll(vec16i v, int n) {
    __m128i c = _mm_cvtsi32_si128(n);
    return vi_pair_(_mm256_sll_epi32(v.lo, c), _mm256_sll_epi32(v.hi, c));
}

VEC_INLINE vec16i vi_load(const int32_t *p) {
    return vi_pair_(_mm256_loadu_si256((const __m256i *)p), _mm256_loadu_si256((const __m256i *)(p + 8)));
}
/* 16 bytes held in integers (byte k of a is lane k, of b lane 8 + k ...) -> f32 */
VEC_INLINE vec16 v_u8x16_(__m128i b) {
    return v_pair_(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(b, 8))));
}
VEC_INLINE vec16 v_u8_64x2(uint64_t a, uint64_t b) { return v_u8x16_(_mm_set_epi64x((long long)b, (long long)a)); }
VEC_INLINE vec16 v_i8_64x2(uint64_t a, uint64_t b) {
    __m128i v = _mm_set_epi64x((long long)b, (long long)a);
    return v_pair_(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8))));
}
VEC_INLINE vec16 v_u8_32x4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    return v_u8x16_(_mm_setr_epi32((int)a, (int)b, (int)c, (int)d));
}

/* tables: the entry computed from the code (the same expression as the AVX-512 table's entry).
 * base is a small integer (-16, -8 or 0 in the kernels), so base + i is formed exactly in int32
 * before the conversion: the same float as base + (float)i, and with base 0 (Q4_1, Q5_1, Q4_K)
 * the compiler drops the add (fd_q4_1: one instruction fewer per 8 values). */
typedef struct { __m256 d; __m256i base; } vlutm, vlutm32;
typedef struct { __m256 d; __m256i base; __m256 m; } vlutf, vlutf32;
typedef struct { __m256 lo, hi; } vlutv;   /* entries 0-7, 8-15 */
VEC_INLINE vlutm v_lutm(float d, float base) { vlutm t = { _mm256_set1_ps(d), _mm256_set1_epi32((int)base) }; return t; }
VEC_INLINE vlutf v_lutf(float d, float base, float m) {
    vlutf t = { _mm256_set1_ps(d), _mm256_set1_epi32((int)base), _mm256_set1_ps(m) };
    return t;
}
/* d and m from the fp16 pair at p: one 4-byte broadcast, one conversion to (d, m, d, m, ...), and
 * the even and odd lanes duplicated (4 instructions instead of 2 x (load, convert, broadcast)) */
VEC_INLINE vlutf v_lutf_f16(const void *p, float base) {
    __m256 v = _mm256_cvtph_ps(_mm_castps_si128(_mm_broadcast_ss((const float *)p)));   /* vbroadcastss: bits only */
    vlutf t = { _mm256_moveldup_ps(v), _mm256_set1_epi32((int)base), _mm256_movehdup_ps(v) };
    return t;
}
VEC_INLINE vlutm32 v_lutm32(float d, float base) { return v_lutm(d, base); }
VEC_INLINE vlutf32 v_lutf32(float d, float base, float m) { return v_lutf(d, base, m); }
VEC_INLINE vlutf32 v_lutf32_f16(const void *p, float base) { return v_lutf_f16(p, base); }
VEC_INLINE vec16i vi_code4(vec16i v) { return vi_and(v, vi_set1(15)); }
VEC_INLINE __m256 v_code8_(__m256i idx, __m256i base) { return _mm256_cvtepi32_ps(_mm256_add_epi32(idx, base)); }
VEC_INLINE vec16 v_lutm_get(vlutm t, vec16i idx) {
    return v_pair_(_mm256_mul_ps(t.d, v_code8_(idx.lo, t.base)), _mm256_mul_ps(t.d, v_code8_(idx.hi, t.base)));
}
VEC_INLINE vec16 v_lutf_get(vlutf t, vec16i idx) {
    return v_pair_(_mm256_fmadd_ps(t.d, v_code8_(idx.lo, t.base), t.m), _mm256_fmadd_ps(t.d, v_code8_(idx.hi, t.base), t.m));
}
VEC_INLINE vec16 v_lutm32_get(vlutm32 t, vec16i idx) { return v_lutm_get(t, idx); }
VEC_INLINE vec16 v_lutf32_get(vlutf32 t, vec16i idx) { return v_lutf_get(t, idx); }
VEC_INLINE vlutv v_lutv(float d, vec16 vals) {
    __m256 vd = _mm256_set1_ps(d);
    vlutv t = { _mm256_mul_ps(vd, vals.lo), _mm256_mul_ps(vd, vals.hi) };
    return t;
}
/* vpermps on each 8-entry half, bit 3 of the code (moved to the sign bit) picks the half */
VEC_INLINE __m256 v_lutv8_(vlutv t, __m256i idx) {
    __m256 a = _mm256_permutevar8x32_ps(t.lo, idx), b = _mm256_permutevar8x32_ps(t.hi, idx);
    return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}
VEC_INLINE vec16 v_lutv_get(vlutv t, vec16i idx) { return v_pair_(v_lutv8_(t, idx.lo), v_lutv8_(t, idx.hi)); }

/* out[c][r] = in[r][c] for an 8 x 8 tile. The loads pair rows i and i + 4 in the two 128-bit halves
 * (columns 0-3 in r[0..3], 4-7 in r[4..7]), so each half is a 4 x 4 transpose and no lane-crossing
 * shuffle is left: 8 unpacks, 4 shuffles and 8 blends (the blends run on more ports than the
 * shuffles), against 24 shuffles for unpack, shuffle and permute2f128 on whole rows (NOTES.md row 34). */
VEC_INLINE void v_transpose8_(const float *in, size_t ldi, float *out, size_t ldo) {
    __m256 r[8], t[8];
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 4; i++) {
            const float *p = in + (size_t)i * ldi + 4 * h;   /* row i, columns 4h..4h+3; row i + 4 above */
            r[4 * h + i] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(p)), _mm_loadu_ps(p + 4 * ldi), 1);
        }
    for (int h = 0; h < 2; h++) {
        __m256 *q = r + 4 * h, *u = t + 4 * h;
        u[0] = _mm256_unpacklo_ps(q[0], q[1]);   /* (r0c0 r1c0 r0c1 r1c1) per half */
        u[1] = _mm256_unpackhi_ps(q[0], q[1]);   /* (r0c2 r1c2 r0c3 r1c3) */
        u[2] = _mm256_unpacklo_ps(q[2], q[3]);   /* (r2c0 r3c0 r2c1 r3c1) */
        u[3] = _mm256_unpackhi_ps(q[2], q[3]);   /* (r2c2 r3c2 r2c3 r3c3) */
        __m256 a = _mm256_shuffle_ps(u[0], u[2], _MM_SHUFFLE(1, 0, 3, 2));   /* (r0c1 r1c1 r2c0 r3c0) */
        __m256 b = _mm256_shuffle_ps(u[1], u[3], _MM_SHUFFLE(1, 0, 3, 2));   /* (r0c3 r1c3 r2c2 r3c2) */
        _mm256_storeu_ps(out + (size_t)(4 * h + 0) * ldo, _mm256_blend_ps(u[0], a, 0xCC));
        _mm256_storeu_ps(out + (size_t)(4 * h + 1) * ldo, _mm256_blend_ps(a, u[2], 0xCC));
        _mm256_storeu_ps(out + (size_t)(4 * h + 2) * ldo, _mm256_blend_ps(u[1], b, 0xCC));
        _mm256_storeu_ps(out + (size_t)(4 * h + 3) * ldo, _mm256_blend_ps(b, u[3], 0xCC));
    }
}
VEC_INLINE void v_transpose16(const float *in, size_t ldi, float *out, size_t ldo) {
    for (int r = 0; r < 16; r += 8)
        for (int c = 0; c < 16; c += 8) v_transpose8_(in + (size_t)r * ldi + c, ldi, out + (size_t)c * ldo + r, ldo);
}

VEC_INLINE vec8 v8_zero(void) { return _mm256_setzero_ps(); }
VEC_INLINE vec8 v8_load(const float *p) { return _mm256_loadu_ps(p); }
VEC_INLINE vec8 v8_add(vec8 a, vec8 b) { return _mm256_add_ps(a, b); }
VEC_INLINE void v8_store(float *p, vec8 v) { _mm256_storeu_ps(p, v); }

#endif
