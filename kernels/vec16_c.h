/* vec16_c.h — the vec16 layer in plain C: 16 floats in a struct, every operation a loop over the
 * lanes with the scalar form of the same IEEE operation (fmaf, rintf). Included by kernels/vec16.h
 * only; the API and the rules are described there. Used where no vector ISA is available
 * (-march=x86-64, other architectures) and with -DVEC_FORCE_C; it is also the specification the
 * other families are checked against. */
#ifndef STRATA_VEC16_C_H
#define STRATA_VEC16_C_H

#define VEC16_ISA "c"
#define VEC16_REGS 8

typedef struct { float f[16]; } vec16;
typedef struct { int32_t i[16]; } vec16i;
typedef struct { float f[8]; } vec8;

VEC_INLINE vec16 v_zero(void) { vec16 r; for (int l = 0; l < 16; l++) r.f[l] = 0.0f; return r; }
VEC_INLINE vec16 v_set1(float x) { vec16 r; for (int l = 0; l < 16; l++) r.f[l] = x; return r; }
VEC_INLINE vec16 v_load(const float *p) { vec16 r; memcpy(r.f, p, sizeof r.f); return r; }
VEC_INLINE void v_store(float *p, vec16 v) { memcpy(p, v.f, sizeof v.f); }
VEC_INLINE vec16 v_add(vec16 a, vec16 b) { for (int l = 0; l < 16; l++) a.f[l] += b.f[l]; return a; }
VEC_INLINE vec16 v_sub(vec16 a, vec16 b) { for (int l = 0; l < 16; l++) a.f[l] -= b.f[l]; return a; }
VEC_INLINE vec16 v_mul(vec16 a, vec16 b) { for (int l = 0; l < 16; l++) a.f[l] *= b.f[l]; return a; }
VEC_INLINE vec16 v_fma(vec16 a, vec16 b, vec16 c) { for (int l = 0; l < 16; l++) c.f[l] = fmaf(a.f[l], b.f[l], c.f[l]); return c; }
VEC_INLINE vec16 v_min(vec16 a, vec16 b) { for (int l = 0; l < 16; l++) a.f[l] = a.f[l] < b.f[l] ? a.f[l] : b.f[l]; return a; }
VEC_INLINE vec16 v_max(vec16 a, vec16 b) { for (int l = 0; l < 16; l++) a.f[l] = a.f[l] > b.f[l] ? a.f[l] : b.f[l]; return a; }
VEC_INLINE vec16 v_round(vec16 v) { for (int l = 0; l < 16; l++) v.f[l] = rintf(v.f[l]); return v; }

/* half -> float, exact, a NaN quieted (what F16C and fcvt do) */
VEC_INLINE float v_half_(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
    float f;
    if (exp == 0x1f) u = sign | 0x7f800000u | (man ? 0x400000u : 0) | (man << 13);
    else if (exp == 0) {
        f = (float)man * 5.9604644775390625e-08f;   /* man * 2^-24, exact */
        return sign ? -f : f;
    } else u = sign | ((exp + 112u) << 23) | (man << 13);
    memcpy(&f, &u, 4);
    return f;
}
VEC_INLINE vec16 v_load_f16(const void *p) {
    uint16_t h[16];
    memcpy(h, p, sizeof h);
    vec16 r;
    for (int l = 0; l < 16; l++) r.f[l] = v_half_(h[l]);
    return r;
}
VEC_INLINE float v_half1(const void *p) { uint16_t h; memcpy(&h, p, 2); return v_half_(h); }
VEC_INLINE vec16 v_div(vec16 a, vec16 b) { for (int l = 0; l < 16; l++) a.f[l] /= b.f[l]; return a; }
VEC_INLINE vec16 v_expf(vec16 x) { for (int l = 0; l < 16; l++) x.f[l] = expf(x.f[l]); return x; }
VEC_INLINE void v_store_f16(void *p, vec16 v) {
    uint16_t h[16];
    for (int l = 0; l < 16; l++) h[l] = fp16_from_f32(v.f[l]);
    memcpy(p, h, sizeof h);
}
VEC_INLINE vec16 v_load_i8(const void *p) {
    int8_t b[16];
    memcpy(b, p, 16);
    vec16 r;
    for (int l = 0; l < 16; l++) r.f[l] = (float)b[l];
    return r;
}
VEC_INLINE vec16 v_load_u8(const void *p) {
    const uint8_t *b = p;
    vec16 r;
    for (int l = 0; l < 16; l++) r.f[l] = (float)b[l];
    return r;
}
VEC_INLINE vec16 v_cvt(vec16i v) { vec16 r; for (int l = 0; l < 16; l++) r.f[l] = (float)v.i[l]; return r; }
VEC_INLINE vec16 v_zero_lt(vec16 x, vec16 v, vec16 lim) {
    for (int l = 0; l < 16; l++) if (v.f[l] < lim.f[l]) x.f[l] = 0.0f;
    return x;
}
VEC_INLINE vec16 v_pow2i(vec16 n) {
    vec16 r;
    for (int l = 0; l < 16; l++) {
        int32_t e = n.f[l] != n.f[l] ? 0 : (int32_t)n.f[l];   /* a NaN lane: 2^0, as the x86 form */
        uint32_t u = (uint32_t)(e + 127) << 23;
        memcpy(&r.f[l], &u, 4);
    }
    return r;
}
VEC_INLINE vec16 v_flipsign(vec16 v, unsigned m) {
    for (int l = 0; l < 16; l++)
        if ((m >> l) & 1u) {
            uint32_t u;
            memcpy(&u, &v.f[l], 4);
            u ^= 0x80000000u;
            memcpy(&v.f[l], &u, 4);
        }
    return v;
}
VEC_INLINE void v_reg(vec16 *v) { (void)v; }

/* the canonical reduction: s_l = v_l + v_(l+8), then ((s0+s4)+(s2+s6)) + ((s1+s5)+(s3+s7)) */
VEC_INLINE float v_sum(vec16 v) {
    float s[8];
    for (int l = 0; l < 8; l++) s[l] = v.f[l] + v.f[l + 8];
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}
VEC_INLINE float v_hmax(vec16 v) {
    float m = -INFINITY;
    for (int l = 0; l < 16; l++) if (v.f[l] > m) m = v.f[l];
    return m;
}

VEC_INLINE vec16i vi_set1(int32_t x) { vec16i r; for (int l = 0; l < 16; l++) r.i[l] = x; return r; }
VEC_INLINE vec16i vi_load_u8(const void *p) {
    const uint8_t *b = p;
    vec16i r;
    for (int l = 0; l < 16; l++) r.i[l] = b[l];
    return r;
}
VEC_INLINE vec16i vi_and(vec16i a, vec16i b) { for (int l = 0; l < 16; l++) a.i[l] &= b.i[l]; return a; }
VEC_INLINE vec16i vi_or(vec16i a, vec16i b) { for (int l = 0; l < 16; l++) a.i[l] |= b.i[l]; return a; }
/* wrapping integer arithmetic, as the vector instructions */
VEC_INLINE vec16i vi_add(vec16i a, vec16i b) {
    for (int l = 0; l < 16; l++) a.i[l] = (int32_t)((uint32_t)a.i[l] + (uint32_t)b.i[l]);
    return a;
}
VEC_INLINE vec16i vi_sub(vec16i a, vec16i b) {
    for (int l = 0; l < 16; l++) a.i[l] = (int32_t)((uint32_t)a.i[l] - (uint32_t)b.i[l]);
    return a;
}
VEC_INLINE vec16i vi_mul(vec16i a, vec16i b) {
    for (int l = 0; l < 16; l++) a.i[l] = (int32_t)((uint32_t)a.i[l] * (uint32_t)b.i[l]);
    return a;
}
VEC_INLINE vec16i vi_srl(vec16i v, int n) { for (int l = 0; l < 16; l++) v.i[l] = (int32_t)((uint32_t)v.i[l] >> n); return v; }
VEC_INLINE vec16i vi_sll(vec16i v, int n) { for (int l = 0; l < 16; l++) v.i[l] = (int32_t)((uint32_t)v.i[l] << n); return v; }
VEC_INLINE vec16i vi_bits16(uint32_t bits, int32_t val) {
    vec16i r;
    for (int l = 0; l < 16; l++) r.i[l] = (bits >> l) & 1u ? val : 0;
    return r;
}

VEC_INLINE vec16i vi_load(const int32_t *p) { vec16i r; memcpy(r.i, p, sizeof r.i); return r; }
/* 16 bytes held in integers (byte k of a is lane k, of b lane 8 + k ...) -> f32 */
VEC_INLINE vec16 v_u8_64x2(uint64_t a, uint64_t b) {
    vec16 r;
    for (int l = 0; l < 8; l++) { r.f[l] = (float)((a >> (8 * l)) & 0xFFu); r.f[8 + l] = (float)((b >> (8 * l)) & 0xFFu); }
    return r;
}
VEC_INLINE vec16 v_i8_64x2(uint64_t a, uint64_t b) {
    vec16 r;
    for (int l = 0; l < 8; l++) {
        r.f[l] = (float)(int8_t)((a >> (8 * l)) & 0xFFu);
        r.f[8 + l] = (float)(int8_t)((b >> (8 * l)) & 0xFFu);
    }
    return r;
}
VEC_INLINE vec16 v_u8_32x4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    uint32_t w[4] = { a, b, c, d };
    vec16 r;
    for (int l = 0; l < 16; l++) r.f[l] = (float)((w[l / 4] >> (8 * (l % 4))) & 0xFFu);
    return r;
}

/* tables: the entry computed from the code */
typedef struct { float d, base; } vlutm, vlutm32;
typedef struct { float d, base, m; } vlutf, vlutf32;
typedef struct { float e[16]; } vlutv;
VEC_INLINE vlutm v_lutm(float d, float base) { vlutm t = { d, base }; return t; }
VEC_INLINE vlutf v_lutf(float d, float base, float m) { vlutf t = { d, base, m }; return t; }
VEC_INLINE vlutm32 v_lutm32(float d, float base) { return v_lutm(d, base); }
VEC_INLINE vlutf32 v_lutf32(float d, float base, float m) { return v_lutf(d, base, m); }
VEC_INLINE vec16 v_lutm_get(vlutm t, vec16i idx) {
    vec16 r;
    for (int l = 0; l < 16; l++) r.f[l] = t.d * ((float)idx.i[l] + t.base);
    return r;
}
VEC_INLINE vec16 v_lutf_get(vlutf t, vec16i idx) {
    vec16 r;
    for (int l = 0; l < 16; l++) r.f[l] = fmaf(t.d, (float)idx.i[l] + t.base, t.m);
    return r;
}
/* the 32-entry gets, v_lutf_f16, vi_code4, v_set1_f16: composed in vec16.h */
VEC_INLINE vlutv v_lutv(float d, vec16 vals) { vlutv t; for (int l = 0; l < 16; l++) t.e[l] = d * vals.f[l]; return t; }
VEC_INLINE vec16 v_lutv_get(vlutv t, vec16i idx) { vec16 r; for (int l = 0; l < 16; l++) r.f[l] = t.e[idx.i[l] & 15]; return r; }

VEC_INLINE void v_transpose16(const float *in, size_t ldi, float *out, size_t ldo) {
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) out[(size_t)c * ldo + r] = in[(size_t)r * ldi + c];
}

VEC_INLINE vec8 v8_zero(void) { vec8 r; for (int l = 0; l < 8; l++) r.f[l] = 0.0f; return r; }
VEC_INLINE vec8 v8_load(const float *p) { vec8 r; memcpy(r.f, p, sizeof r.f); return r; }
VEC_INLINE vec8 v8_add(vec8 a, vec8 b) { for (int l = 0; l < 8; l++) a.f[l] += b.f[l]; return a; }
VEC_INLINE void v8_store(float *p, vec8 v) { memcpy(p, v.f, sizeof v.f); }

#endif
