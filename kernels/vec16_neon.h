/* vec16_neon.h — the vec16 layer on AArch64 NEON: a vec16 is four 128-bit quarters (lanes 0-3,
 * 4-7, 8-11, 12-15). Included by kernels/vec16.h only; the API and the rules are described there.
 * fmla is a fused multiply-add like vfmadd; v_min / v_max follow the x86 rule (a compare and a
 * select) rather than fmin / fmax, whose NaN rules differ; the tables are computed from the code
 * (v_lutv looks its 64 bytes up with tbl). */
#ifndef STRATA_VEC16_NEON_H
#define STRATA_VEC16_NEON_H

#include <arm_neon.h>

#define VEC16_ISA "neon"
#define VEC16_REGS 8

typedef struct { float32x4_t q[4]; } vec16;
typedef struct { int32x4_t q[4]; } vec16i;
typedef struct { float32x4_t q[2]; } vec8;

VEC_INLINE vec16 v_zero(void) { vec16 r; for (int k = 0; k < 4; k++) r.q[k] = vdupq_n_f32(0.0f); return r; }
VEC_INLINE vec16 v_set1(float x) { vec16 r; for (int k = 0; k < 4; k++) r.q[k] = vdupq_n_f32(x); return r; }
VEC_INLINE vec16 v_load(const float *p) { vec16 r; for (int k = 0; k < 4; k++) r.q[k] = vld1q_f32(p + 4 * k); return r; }
VEC_INLINE void v_store(float *p, vec16 v) { for (int k = 0; k < 4; k++) vst1q_f32(p + 4 * k, v.q[k]); }
VEC_INLINE vec16 v_add(vec16 a, vec16 b) { for (int k = 0; k < 4; k++) a.q[k] = vaddq_f32(a.q[k], b.q[k]); return a; }
VEC_INLINE vec16 v_sub(vec16 a, vec16 b) { for (int k = 0; k < 4; k++) a.q[k] = vsubq_f32(a.q[k], b.q[k]); return a; }
VEC_INLINE vec16 v_mul(vec16 a, vec16 b) { for (int k = 0; k < 4; k++) a.q[k] = vmulq_f32(a.q[k], b.q[k]); return a; }
VEC_INLINE vec16 v_fma(vec16 a, vec16 b, vec16 c) {
    for (int k = 0; k < 4; k++) c.q[k] = vfmaq_f32(c.q[k], a.q[k], b.q[k]);
    return c;
}
VEC_INLINE vec16 v_min(vec16 a, vec16 b) {   /* a < b ? a : b */
    for (int k = 0; k < 4; k++) a.q[k] = vbslq_f32(vcltq_f32(a.q[k], b.q[k]), a.q[k], b.q[k]);
    return a;
}
VEC_INLINE vec16 v_max(vec16 a, vec16 b) {   /* a > b ? a : b */
    for (int k = 0; k < 4; k++) a.q[k] = vbslq_f32(vcgtq_f32(a.q[k], b.q[k]), a.q[k], b.q[k]);
    return a;
}
VEC_INLINE vec16 v_round(vec16 v) { for (int k = 0; k < 4; k++) v.q[k] = vrndnq_f32(v.q[k]); return v; }
VEC_INLINE vec16 v_load_f16(const void *p) {
    const uint16_t *h = (const uint16_t *)p;
    vec16 r;
    for (int k = 0; k < 4; k++) r.q[k] = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h + 4 * k)));
    return r;
}
VEC_INLINE vec16 v_div(vec16 a, vec16 b) { for (int k = 0; k < 4; k++) a.q[k] = vdivq_f32(a.q[k], b.q[k]); return a; }
VEC_INLINE vec16 v_expf(vec16 x) {
    float f[16];
    v_store(f, x);
    for (int l = 0; l < 16; l++) f[l] = expf(f[l]);
    return v_load(f);
}
VEC_INLINE void v_store_f16(void *p, vec16 v) {
    uint16_t *h = (uint16_t *)p;
    for (int k = 0; k < 4; k++) vst1_u16(h + 4 * k, vreinterpret_u16_f16(vcvt_f16_f32(v.q[k])));
}
VEC_INLINE float v_half1(const void *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return vget_lane_f32(vget_low_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h)))), 0);
}
VEC_INLINE vec16 v_load_i8(const void *p) {
    int8x16_t b = vld1q_s8((const int8_t *)p);
    int16x8_t lo = vmovl_s8(vget_low_s8(b)), hi = vmovl_s8(vget_high_s8(b));
    vec16 r = { { vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo))),
                  vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi))) } };
    return r;
}
VEC_INLINE vec16i vi_load_u8(const void *p) {
    uint8x16_t b = vld1q_u8((const uint8_t *)p);
    uint16x8_t lo = vmovl_u8(vget_low_u8(b)), hi = vmovl_u8(vget_high_u8(b));
    vec16i r = { { vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(lo))), vreinterpretq_s32_u32(vmovl_u16(vget_high_u16(lo))),
                   vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(hi))), vreinterpretq_s32_u32(vmovl_u16(vget_high_u16(hi))) } };
    return r;
}
VEC_INLINE vec16 v_cvt(vec16i v) { vec16 r; for (int k = 0; k < 4; k++) r.q[k] = vcvtq_f32_s32(v.q[k]); return r; }
VEC_INLINE vec16 v_load_u8(const void *p) { return v_cvt(vi_load_u8(p)); }
VEC_INLINE vec16 v_zero_lt(vec16 x, vec16 v, vec16 lim) {
    for (int k = 0; k < 4; k++)
        x.q[k] = vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(x.q[k]), vcltq_f32(v.q[k], lim.q[k])));
    return x;
}
VEC_INLINE vec16 v_pow2i(vec16 n) {   /* fcvtzs gives 0 for a NaN: 2^0, as the x86 form's result */
    vec16 r;
    for (int k = 0; k < 4; k++) {
        int32x4_t e = vaddq_s32(vcvtq_s32_f32(n.q[k]), vdupq_n_s32(127));
        r.q[k] = vreinterpretq_f32_s32(vshlq_n_s32(e, 23));
    }
    return r;
}
VEC_INLINE vec16i vi_bits16(uint32_t bits, int32_t val) {
    static const uint32_t lane_bit[16] = { 1u << 0, 1u << 1, 1u << 2, 1u << 3, 1u << 4, 1u << 5, 1u << 6, 1u << 7,
                                           1u << 8, 1u << 9, 1u << 10, 1u << 11, 1u << 12, 1u << 13, 1u << 14, 1u << 15 };
    vec16i r;
    for (int k = 0; k < 4; k++) {
        uint32x4_t set = vtstq_u32(vdupq_n_u32(bits), vld1q_u32(lane_bit + 4 * k));
        r.q[k] = vreinterpretq_s32_u32(vandq_u32(set, vdupq_n_u32((uint32_t)val)));
    }
    return r;
}
VEC_INLINE vec16 v_flipsign(vec16 v, unsigned m) {
    vec16i s = vi_bits16(m, (int32_t)0x80000000u);
    for (int k = 0; k < 4; k++)
        v.q[k] = vreinterpretq_f32_s32(veorq_s32(vreinterpretq_s32_f32(v.q[k]), s.q[k]));
    return v;
}
VEC_INLINE void v_reg(vec16 *v) { for (int k = 0; k < 4; k++) __asm__("" : "+w"(v->q[k])); }

/* the canonical reduction: s = lanes l + (l+8), t = (s0+s4, s1+s5, s2+s6, s3+s7), then
 * (t0 + t2) + (t1 + t3) */
VEC_INLINE float v_sum(vec16 v) {
    float32x4_t s_lo = vaddq_f32(v.q[0], v.q[2]), s_hi = vaddq_f32(v.q[1], v.q[3]);
    float32x4_t t = vaddq_f32(s_lo, s_hi);
    float32x2_t u = vadd_f32(vget_low_f32(t), vget_high_f32(t));   /* (t0 + t2, t1 + t3) */
    return vget_lane_f32(u, 0) + vget_lane_f32(u, 1);
}
VEC_INLINE float v_hmax(vec16 v) {
    float l[16], m = -INFINITY;
    v_store(l, v);
    for (int i = 0; i < 16; i++) if (l[i] > m) m = l[i];
    return m;
}

VEC_INLINE vec16i vi_set1(int32_t x) { vec16i r; for (int k = 0; k < 4; k++) r.q[k] = vdupq_n_s32(x); return r; }
VEC_INLINE vec16i vi_and(vec16i a, vec16i b) { for (int k = 0; k < 4; k++) a.q[k] = vandq_s32(a.q[k], b.q[k]); return a; }
VEC_INLINE vec16i vi_or(vec16i a, vec16i b) { for (int k = 0; k < 4; k++) a.q[k] = vorrq_s32(a.q[k], b.q[k]); return a; }
VEC_INLINE vec16i vi_add(vec16i a, vec16i b) { for (int k = 0; k < 4; k++) a.q[k] = vaddq_s32(a.q[k], b.q[k]); return a; }
VEC_INLINE vec16i vi_sub(vec16i a, vec16i b) { for (int k = 0; k < 4; k++) a.q[k] = vsubq_s32(a.q[k], b.q[k]); return a; }
VEC_INLINE vec16i vi_mul(vec16i a, vec16i b) { for (int k = 0; k < 4; k++) a.q[k] = vmulq_s32(a.q[k], b.q[k]); return a; }
VEC_INLINE vec16i vi_srl(vec16i v, int n) {
    for (int k = 0; k < 4; k++)
        v.q[k] = vreinterpretq_s32_u32(vshlq_u32(vreinterpretq_u32_s32(v.q[k]), vdupq_n_s32(-n)));
    return v;
}
VEC_INLINE vec16i vi_sll(vec16i v, int n) {
    for (int k = 0; k < 4; k++)
        v.q[k] = vreinterpretq_s32_u32(vshlq_u32(vreinterpretq_u32_s32(v.q[k]), vdupq_n_s32(n)));
    return v;
}

VEC_INLINE vec16i vi_load(const int32_t *p) { vec16i r; for (int k = 0; k < 4; k++) r.q[k] = vld1q_s32(p + 4 * k); return r; }
/* 16 bytes held in integers (byte k of a is lane k, of b lane 8 + k ...) -> f32 */
VEC_INLINE vec16 v_u8_64x2(uint64_t a, uint64_t b) {
    uint8_t t[16];
    memcpy(t, &a, 8);
    memcpy(t + 8, &b, 8);
    return v_load_u8(t);
}
VEC_INLINE vec16 v_i8_64x2(uint64_t a, uint64_t b) {
    uint8_t t[16];
    memcpy(t, &a, 8);
    memcpy(t + 8, &b, 8);
    return v_load_i8(t);
}
VEC_INLINE vec16 v_u8_32x4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    uint32_t t[4] = { a, b, c, d };
    return v_load_u8(t);
}

/* tables: the entry computed from the code, as vec16_avx2.h */
typedef struct { float d, base; } vlutm, vlutm32;
typedef struct { float d, base, m; } vlutf, vlutf32;
typedef struct { uint8x16x4_t bytes; } vlutv;   /* the 16 entries' 64 bytes */
VEC_INLINE vlutm v_lutm(float d, float base) { vlutm t = { d, base }; return t; }
VEC_INLINE vlutf v_lutf(float d, float base, float m) { vlutf t = { d, base, m }; return t; }
VEC_INLINE vlutm32 v_lutm32(float d, float base) { return v_lutm(d, base); }
VEC_INLINE vlutf32 v_lutf32(float d, float base, float m) { return v_lutf(d, base, m); }
VEC_INLINE vec16 v_lutm_get(vlutm t, vec16i idx) {
    vec16 r;
    for (int k = 0; k < 4; k++) {
        float32x4_t c = vaddq_f32(vcvtq_f32_s32(idx.q[k]), vdupq_n_f32(t.base));
        r.q[k] = vmulq_f32(vdupq_n_f32(t.d), c);
    }
    return r;
}
VEC_INLINE vec16 v_lutf_get(vlutf t, vec16i idx) {
    vec16 r;
    for (int k = 0; k < 4; k++) {
        float32x4_t c = vaddq_f32(vcvtq_f32_s32(idx.q[k]), vdupq_n_f32(t.base));
        r.q[k] = vfmaq_f32(vdupq_n_f32(t.m), vdupq_n_f32(t.d), c);
    }
    return r;
}
/* the 32-entry gets, v_lutf_f16, vi_code4, v_set1_f16: composed in vec16.h */
VEC_INLINE vlutv v_lutv(float d, vec16 vals) {
    vlutv t;
    float32x4_t vd = vdupq_n_f32(d);
    t.bytes.val[0] = vreinterpretq_u8_f32(vmulq_f32(vd, vals.q[0]));
    t.bytes.val[1] = vreinterpretq_u8_f32(vmulq_f32(vd, vals.q[1]));
    t.bytes.val[2] = vreinterpretq_u8_f32(vmulq_f32(vd, vals.q[2]));
    t.bytes.val[3] = vreinterpretq_u8_f32(vmulq_f32(vd, vals.q[3]));
    return t;
}
/* byte b of lane l reads table byte 4 * code + b */
VEC_INLINE vec16 v_lutv_get(vlutv t, vec16i idx) {
    vec16 r;
    for (int k = 0; k < 4; k++) {
        uint32x4_t c = vandq_u32(vreinterpretq_u32_s32(idx.q[k]), vdupq_n_u32(15));
        uint32x4_t sel = vaddq_u32(vmulq_n_u32(c, 0x04040404u), vdupq_n_u32(0x03020100u));
        r.q[k] = vreinterpretq_f32_u8(vqtbl4q_u8(t.bytes, vreinterpretq_u8_u32(sel)));
    }
    return r;
}

/* out[c][r] = in[r][c], 16 x 16, as 4 x 4 tiles: trn of 32-bit pairs, then of 64-bit pairs */
VEC_INLINE void v_transpose16(const float *in, size_t ldi, float *out, size_t ldo) {
    for (int r = 0; r < 16; r += 4)
        for (int c = 0; c < 16; c += 4) {
            const float *s = in + (size_t)r * ldi + c;
            float32x4_t a = vld1q_f32(s), b = vld1q_f32(s + ldi), e = vld1q_f32(s + 2 * ldi), f = vld1q_f32(s + 3 * ldi);
            float32x4_t ab0 = vtrn1q_f32(a, b), ab1 = vtrn2q_f32(a, b);   /* (a0 b0 a2 b2), (a1 b1 a3 b3) */
            float32x4_t ef0 = vtrn1q_f32(e, f), ef1 = vtrn2q_f32(e, f);
            float *o = out + (size_t)c * ldo + r;
            vst1q_f32(o, vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(ab0), vreinterpretq_f64_f32(ef0))));
            vst1q_f32(o + ldo, vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(ab1), vreinterpretq_f64_f32(ef1))));
            vst1q_f32(o + 2 * ldo, vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(ab0), vreinterpretq_f64_f32(ef0))));
            vst1q_f32(o + 3 * ldo, vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(ab1), vreinterpretq_f64_f32(ef1))));
        }
}

VEC_INLINE vec8 v8_zero(void) { vec8 r = { { vdupq_n_f32(0.0f), vdupq_n_f32(0.0f) } }; return r; }
VEC_INLINE vec8 v8_load(const float *p) { vec8 r = { { vld1q_f32(p), vld1q_f32(p + 4) } }; return r; }
VEC_INLINE vec8 v8_add(vec8 a, vec8 b) { a.q[0] = vaddq_f32(a.q[0], b.q[0]); a.q[1] = vaddq_f32(a.q[1], b.q[1]); return a; }
VEC_INLINE void v8_store(float *p, vec8 v) { vst1q_f32(p, v.q[0]); vst1q_f32(p + 4, v.q[1]); }

#endif
