/* kv.c — KV-cache storage formats (see kv.h for the layouts and the q4_0r contract): the row
 * geometry and format checks, the scalar element conversions (e4m3, e5m2, E2M1), the rotations and
 * the quantisers (kv_quantize). Reading rows back is kernels/kv_decode.c; kernels/kv_internal.h
 * holds what the two share. */
#include "kernels/kv.h"
#include "kernels/errmsg.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/fp16.h"
#include "kernels/kivi.h"
#include "kernels/kv_internal.h"
#include "kernels/vec16.h"

int kv_fmt_rotated(kv_fmt f) { return kv_fmt_rotation(f) != 0; }

static int is_pow2(int h) { return h > 0 && (h & (h - 1)) == 0; }

int kv_rot_block(kv_fmt f, int h) {
    int rot = kv_fmt_rotation(f);
    if (!rot || h < 1 || h > KV_HADAMARD_MAX) return 0;
    if (rot == KV_ROT_H) return is_pow2(h) ? h : 0;
    if (h < KV_ROT_BLOCK) return is_pow2(h) ? h : 0;            /* +rot, +rotp: one block */
    if (h % KV_ROT_BLOCK != 0) return 0;
    return rot == KV_ROT_B ? KV_ROT_BLOCK : h & -h;             /* +rotp: the largest power of two dividing h */
}

void kv_rotate(kv_fmt f, float *x, int h) {
    int b = kv_rot_block(f, h);
    if (b == 0) return;
    for (int i = 0; i < h; i += b) kv_hadamard(x + i, b);
}

size_t kv_row_bytes(kv_fmt f, int h) {
    if (h < 1 || !kv_fmt_valid(f)) return 0;
    if (kv_fmt_rotation(f) && kv_rot_block(f, h) == 0) return 0;
    size_t n = (size_t)h;
    switch (kv_fmt_base(f)) {
    case KV_F32: return 4 * n;
    case KV_BF16:
    case KV_F16: return 2 * n;
    case KV_INT8:
        if (h > 64 && h % 64 != 0) return 0;
        return n + 2 * (n / (size_t)kv_int8_group(h));
    case KV_Q8_0:
        if (h % 32 != 0) return 0;
        return n / 32 * 34;
    case KV_Q4_0:
        if (h % 32 != 0) return 0;
        return n / 32 * 18;
    case KV_FP8:
    case KV_E5M2: return n;
    case KV_E4M3S:
    case KV_E5M2S: return n + 4;
    case KV_Q4_1:
        if (h % 32 != 0) return 0;
        return n / 32 * 20;
    case KV_Q5_0:
        if (h % 32 != 0) return 0;
        return n / 32 * 22;
    case KV_Q5_1:
        if (h % 32 != 0) return 0;
        return n / 32 * 24;
    case KV_IQ4_NL:
        if (h % 32 != 0) return 0;
        return n / 32 * 18;
    case KV_NVFP4:
        if (h % 16 != 0) return 0;
        return n / 16 * 9;
    case KV_MXFP4:
        if (h % 32 != 0) return 0;
        return n / 32 * 17;
    case KV_TQ3:
    case KV_TQ4:
        if (h < 8) return 0;                                /* whole bytes of 3-bit codes; h a power of two */
        return 4 + n * (f == KV_TQ3 ? 3 : 4) / 8;
    default: return 0;
    }
}

/* the base format's rule, e.g. "a multiple of 32" (for a base format that does not fit h) */
static const char *base_rule(kv_fmt base) {
    if (base == KV_INT8) return "<= 64 or a multiple of 64";
    if (base == KV_NVFP4) return "that is a multiple of 16";
    return "that is a multiple of 32";
}

size_t kv_token_bytes(kv_fmt f, int h, int is_v) {
    if (kv_fmt_is_kivi(f)) return kivi_check(f, h, NULL, 0) ? 0 : kivi_token_bytes(f, h, is_v);
    return kv_row_bytes(f, h);
}

size_t kv_reserve_bytes(kv_fmt f, int h, int is_v) {
    if (!kv_fmt_is_kivi(f)) return kv_row_bytes(f, h);
    if (kivi_check(f, h, NULL, 0)) return 0;
    /* the f16 row, and the quantised V row or the token's share of a K group (rounded up) */
    size_t q = is_v ? kivi_v_row_bytes(f, h) : (kivi_k_group_bytes(f, h) + (size_t)kivi_group(f) - 1) / (size_t)kivi_group(f);
    return 2 * (size_t)h + q;
}

int kv_fmt_check(kv_fmt f, int h, char *err, size_t errlen) {
    if (kv_fmt_is_kivi(f)) return kivi_check(f, h, err, errlen);
    if (kv_row_bytes(f, h) != 0) return 0;
    const char *name = kv_fmt_name(f);
    kv_fmt base = kv_fmt_base(f);
    if (!kv_fmt_valid(f))
        errmsg_set(err, errlen, -1, "kv format %d is not a format", (int)f);
    else if (h < 1)
        errmsg_set(err, errlen, -1, "kv format %s needs a head dim >= 1 (got %d)", name, h);
    else if (f == KV_Q4_0R)
        errmsg_set(err, errlen, -1, "kv format q4_0r needs a head dim that is a power of two in [32, %d] "
                   "(got %d)", KV_HADAMARD_MAX, h);
    else if (f == KV_TQ3 || f == KV_TQ4)
        errmsg_set(err, errlen, -1, "kv format %s needs a head dim that is a power of two in [8, %d] (got %d)", name,
                   KV_HADAMARD_MAX, h);
    else if (kv_row_bytes(base, h) == 0)
        errmsg_set(err, errlen, -1, "kv format %s needs a head dim %s (got %d)", name, base_rule(base), h);
    else if (kv_fmt_rotation(f) == KV_ROT_H)
        errmsg_set(err, errlen, -1, "kv format %s needs a head dim that is a power of two <= %d (got %d)%s", name,
                   KV_HADAMARD_MAX, h, h % KV_ROT_BLOCK == 0 && h <= KV_HADAMARD_MAX ?
                   "; for llama.cpp's rotation of such a head use +rotp (blocks of the largest power of two "
                   "dividing it)" : "");
    else
        errmsg_set(err, errlen, -1, "kv format %s needs a head dim that is a power of two below %d, or a multiple "
                   "of %d up to %d (got %d)", name, KV_ROT_BLOCK, KV_ROT_BLOCK, KV_HADAMARD_MAX, h);
    return -1;
}

/* ---- scalar helpers ----------------------------------------------------------------------- */

static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v & 0xff);
    p[1] = (uint8_t)(v >> 8);
}


/* r (already an integer or NaN) clamped to [-127, 127] as int8; NaN -> 0. */
static int8_t to_int8(float r) {
    if (r > 127.0f) return 127;
    if (r < -127.0f) return -127;
    if (r != r) return 0;
    return (int8_t)r;
}

uint8_t kv_fp8_from_f32(float x) {
    uint32_t u = fp16_f32_bits(x);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    float a = fabsf(x);
    if (a != a) return (uint8_t)(sign | 0x7f);
    if (a >= 448.0f) return (uint8_t)(sign | 0x7e);        /* saturate, inf included */
    if (a < 0.015625f) {                                    /* below 2^-6: subnormal, step 2^-9 */
        float q = rintf(a * 512.0f);                        /* exact scaling; 0..8, 8 = 2^-6 */
        return (uint8_t)(sign | (uint8_t)q);
    }
    uint32_t ua = fp16_f32_bits(a);
    uint32_t e = (ua >> 23) - 127u + 7u;                    /* 1..15 */
    uint32_t man = ua & 0x7fffffu;
    uint32_t code = (e << 3) | (man >> 20);
    uint32_t rem = man & 0xfffffu;
    if (rem > 0x80000u || (rem == 0x80000u && (code & 1u))) code++;  /* carry into e is right */
    return (uint8_t)(sign | code);                          /* a < 448 keeps code <= 0x7e */
}

float kv_fp8_to_f32(uint8_t b) {
    uint32_t sign = (uint32_t)(b & 0x80u) << 24;
    uint32_t e = (b >> 3) & 15u;
    uint32_t m = b & 7u;
    if (e == 15 && m == 7) return fp16_bits_f32(sign | 0x7fc00000u);
    if (e == 0) {
        float v = (float)m * 0.001953125f;                  /* m * 2^-9, exact */
        return sign ? -v : v;
    }
    return fp16_bits_f32(sign | ((e + 120u) << 23) | (m << 20));
}

uint8_t kv_e5m2_from_f32(float x) {
    uint32_t u = fp16_f32_bits(x);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    float a = fabsf(x);
    if (a != a) return (uint8_t)(sign | 0x7f);
    if (a >= 57344.0f) return (uint8_t)(sign | 0x7b);       /* saturate, inf included */
    if (a < 0x1p-14f) {                                     /* below 2^-14: subnormal, step 2^-16 */
        float q = rintf(a * 65536.0f);                      /* exact scaling; 0..4, 4 = 2^-14 */
        return (uint8_t)(sign | (uint8_t)q);
    }
    uint32_t ua = fp16_f32_bits(a);
    uint32_t e = (ua >> 23) - 127u + 15u;                   /* 1..30 */
    uint32_t man = ua & 0x7fffffu;
    uint32_t code = (e << 2) | (man >> 21);
    uint32_t rem = man & 0x1fffffu;
    if (rem > 0x100000u || (rem == 0x100000u && (code & 1u))) code++;  /* carry into e is right */
    return (uint8_t)(sign | code);                          /* a < 57344 keeps code <= 0x7b */
}

float kv_e5m2_to_f32(uint8_t b) { return fp16_to_f32((uint16_t)((uint16_t)b << 8)); }

/* E2M1 values by code: sign bit 3, then 2 exponent bits (bias 1) and 1 mantissa bit. */
const float kv_e2m1_values[16] = {
    0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f,
};

uint8_t kv_e2m1_from_f32(float x) {
    uint8_t sign = (uint8_t)((fp16_f32_bits(x) >> 28) & 8u);
    float a = fabsf(x);
    uint8_t q;
    /* the midpoints between neighbours; a tie goes to the even code (0 2 4 6) */
    if (a <= 0.25f) q = 0;
    else if (a < 0.75f) q = 1;
    else if (a <= 1.25f) q = 2;
    else if (a < 1.75f) q = 3;
    else if (a <= 2.5f) q = 4;
    else if (a < 3.5f) q = 5;
    else if (a <= 5.0f) q = 6;
    else q = 7;                                             /* saturate; inf and NaN too */
    return (uint8_t)(sign | q);
}

float kv_e2m1_to_f32(uint8_t q) { return kv_e2m1_values[q & 15u]; }

void kv_hadamard(float *x, int h) {
    for (int len = 1; len < h; len *= 2) {
        for (int i = 0; i < h; i += 2 * len) {
            for (int j = i; j < i + len; j++) {
                float a = x[j], b = x[j + len];
                x[j] = a + b;
                x[j + len] = a - b;
            }
        }
    }
    float s = (float)(1.0 / sqrt((double)h));
    for (int i = 0; i < h; i++) x[i] *= s;
}

/* ---- quantisers (one row) ----------------------------------------------------------------- */

/* int8: dst = [h int8 values][h/g fp16 scales]. */
static void quant_int8(const float *x, uint8_t *dst, int h) {
    int g = kv_int8_group(h);
    for (int gi = 0; gi < h / g; gi++) {
        const float *xg = x + gi * g;                       /* [g] */
        float amax = 0.0f;
        for (int j = 0; j < g; j++) {
            float a = fabsf(xg[j]);
            if (a > amax) amax = a;
        }
        uint16_t sb = fp16_from_f32(amax / 127.0f);
        if (sb == 0x7c00u) sb = 0x7bffu;                    /* beyond fp16: saturate to 65504 */
        float s = fp16_to_f32(sb);
        for (int j = 0; j < g; j++)
            dst[gi * g + j] = (uint8_t)(s == 0.0f ? 0 : to_int8(rintf(xg[j] / s)));
        put16(dst + h + 2 * gi, sb);
    }
}

/* q = min(top, trunc(t)) for 0 <= t < 2^31: ggml's MIN(top, (int8_t)t) in q4_0 / q4_1 / q5_0 /
 * q5_1. t is about [0.5, top + 1.5) unless 1/d overflowed to inf (d < 2^-128, a block of f32
 * subnormals): then t is +-inf or NaN (0 * inf), where ggml's conversion is undefined in C and
 * on x86-64 (cvttss2si: 0x80000000, whose low byte is 0) gives 0. This takes the same 0 for
 * t >= 2^31, NaN and t <= 0, so the bytes equal llama.cpp's there too (tests/fixtures/kv has
 * such blocks). */
static uint8_t trunc_clamp(float t, int top) {
    if (t >= 2147483648.0f || !(t > 0.0f)) return 0;
    if (t >= (float)top) return (uint8_t)top;
    return (uint8_t)t;
}

/* ggml's q8_0 element, int8_t q = roundf(t): t is within [-127.5, 127.5] unless 1/d overflowed
 * (d < 2^-128): then +-inf or NaN, which x86-64 converts to 0 (see trunc_clamp). */
static int8_t q8_round(float t) {
    float r = roundf(t);
    if (!(fabsf(r) < 2147483648.0f)) return 0;
    return to_int8(r);
}

/* q8_0: blocks of { fp16 d; int8 q[32] }. */
static void quant_q8_0(const float *x, uint8_t *dst, int h) {
    for (int b = 0; b < h / 32; b++) {
        const float *xb = x + 32 * b;                       /* [32] */
        uint8_t *ob = dst + 34 * b;                         /* [34] */
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) {
            float a = fabsf(xb[j]);
            if (a > amax) amax = a;
        }
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        put16(ob, fp16_from_f32(d));
        for (int j = 0; j < 32; j++) ob[2 + j] = (uint8_t)q8_round(xb[j] * id);
    }
}


/* q4_0: blocks of { fp16 d; uint8 qs[16] }, qs[j] = q[j] | q[j + 16] << 4. */
static void quant_q4_0(const float *x, uint8_t *dst, int h) {
    for (int b = 0; b < h / 32; b++) {
        const float *xb = x + 32 * b;                       /* [32] */
        uint8_t *ob = dst + 18 * b;                         /* [18] */
        float amax = 0.0f, m = 0.0f;
        for (int j = 0; j < 32; j++) {
            if (amax < fabsf(xb[j])) {
                amax = fabsf(xb[j]);
                m = xb[j];
            }
        }
        float d = m / -8.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        put16(ob, fp16_from_f32(d));
        for (int j = 0; j < 16; j++) {
            uint8_t lo = trunc_clamp(xb[j] * id + 8.5f, 15);
            uint8_t hi = trunc_clamp(xb[j + 16] * id + 8.5f, 15);
            ob[2 + j] = (uint8_t)(lo | (hi << 4));
        }
    }
}


/* q4_1 (bits == 4) and q5_1 (bits == 5): blocks of { fp16 d; fp16 m; [uint8 qh[4];] uint8 qs[16] }. */
static void quant_q_1(const float *x, uint8_t *dst, int h, int bits) {
    int top = (1 << bits) - 1, bs = bits == 4 ? 20 : 24;
    for (int b = 0; b < h / 32; b++) {
        const float *xb = x + 32 * b;                       /* [32] */
        uint8_t *ob = dst + bs * b;                         /* [bs] */
        float min = 3.40282347e+38f, max = -3.40282347e+38f;
        for (int j = 0; j < 32; j++) {
            if (xb[j] < min) min = xb[j];
            if (xb[j] > max) max = xb[j];
        }
        float d = (max - min) / (float)top;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        put16(ob, fp16_from_f32(d));
        put16(ob + 2, fp16_from_f32(min));
        uint8_t *qs = ob + (bits == 4 ? 4 : 8);             /* [16] */
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            uint8_t lo = trunc_clamp((xb[j] - min) * id + 0.5f, top);
            uint8_t hi = trunc_clamp((xb[j + 16] - min) * id + 0.5f, top);
            qs[j] = (uint8_t)((lo & 15) | (hi & 15) << 4);
            qh |= (uint32_t)(lo >> 4) << j | (uint32_t)(hi >> 4) << (j + 16);
        }
        if (bits == 5)
            for (int k = 0; k < 4; k++) ob[4 + k] = (uint8_t)(qh >> (8 * k));
    }
}

/* q5_0: blocks of { fp16 d; uint8 qh[4]; uint8 qs[16] }. */
static void quant_q5_0(const float *x, uint8_t *dst, int h) {
    for (int b = 0; b < h / 32; b++) {
        const float *xb = x + 32 * b;                       /* [32] */
        uint8_t *ob = dst + 22 * b;                         /* [22] */
        float amax = 0.0f, m = 0.0f;
        for (int j = 0; j < 32; j++) {
            if (amax < fabsf(xb[j])) {
                amax = fabsf(xb[j]);
                m = xb[j];
            }
        }
        float d = m / -16.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        put16(ob, fp16_from_f32(d));
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            uint8_t lo = trunc_clamp(xb[j] * id + 16.5f, 31);
            uint8_t hi = trunc_clamp(xb[j + 16] * id + 16.5f, 31);
            ob[6 + j] = (uint8_t)((lo & 15) | (hi & 15) << 4);
            qh |= (uint32_t)(lo >> 4) << j | (uint32_t)(hi >> 4) << (j + 16);
        }
        for (int k = 0; k < 4; k++) ob[2 + k] = (uint8_t)(qh >> (8 * k));
    }
}

/* iq4_nl's 16 values (ggml's kvalues_iq4nl); kv_internal.h */
const float kv_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* Index of the grid value nearest to a (f32 arithmetic, the upper one on a tie; below the grid
 * -> 0, above -> 15, NaN -> 15), by bisection as ggml's best_index_int8. */
static int iq4nl_index(float a) {
    if (a <= kv_iq4nl_values[0]) return 0;
    if (a >= kv_iq4nl_values[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (a < kv_iq4nl_values[mid]) hi = mid;
        else lo = mid;
    }
    return a - kv_iq4nl_values[hi - 1] < kv_iq4nl_values[hi] - a ? hi - 1 : hi;
}

/* iq4_nl: blocks of { fp16 d; uint8 qs[16] }, as llama.cpp's CPU KV cache stores them (its copy
 * into the cache goes through ggml's quantize_row_iq4_nl -> quantize_row_iq4_nl_ref: no importance
 * weights and NO scale search; the model-file quantiser quantize_iq4_nl, with its search over 15
 * trial scales (ntry = 7), is not used there). For one block of 32: m = the signed value of
 * largest magnitude (first on ties); d0 = m / K[0] (f32, so m itself lands on K[0] = -127);
 * L = the grid indices of x * (1 / d0); d = the weighted least-squares scale of those indices,
 * sum w K x / sum w K^2 with w = x^2 (sequential f32 sums over j = 0..31, each term (w * K) * x
 * or (w * K) * K). Stored: fp16(d) and L as found with d0 (not recomputed with d).
 * amax < 1e-15: d = 0 and L = 8 (ggml writes d = 0 there and leaves L as the block before left
 * it; with d = 0 every value decodes to 0 either way). */
static void quant_iq4_nl(const float *x, uint8_t *dst, int h) {
    for (int b = 0; b < h / 32; b++) {
        const float *xb = x + 32 * b;                       /* [32] */
        uint8_t *ob = dst + 18 * b;                         /* [18] */
        uint8_t L[32];                                      /* [32] grid indices */
        float amax = 0.0f, m = 0.0f, d = 0.0f;
        for (int j = 0; j < 32; j++) {
            float ax = fabsf(xb[j]);
            if (ax > amax) {
                amax = ax;
                m = xb[j];
            }
        }
        if (amax >= 1e-15f) {
            float id = 1.0f / (m / kv_iq4nl_values[0]), sumqx = 0.0f, sumq2 = 0.0f;
            for (int j = 0; j < 32; j++) {
                float w = xb[j] * xb[j];
                L[j] = (uint8_t)iq4nl_index(id * xb[j]);
                float q = kv_iq4nl_values[L[j]];
                sumqx += w * q * xb[j];
                sumq2 += w * q * q;
            }
            d = sumqx / sumq2;
        } else {
            memset(L, 8, sizeof L);
        }
        /* values near FLT_MAX make w infinite and the sums inf - inf or inf / inf: a NaN the
         * hardware makes up, negative on x86 (the fixtures', ggml's) and positive on AArch64;
         * every ISA stores x86's */
        if (d != d) d = fp16_bits_f32(0xFFC00000u);
        put16(ob, fp16_from_f32(d));
        for (int j = 0; j < 16; j++) ob[2 + j] = (uint8_t)(L[j] | L[j + 16] << 4);
    }
}

static void put32f(uint8_t *p, float v) {
    uint32_t u = fp16_f32_bits(v);
    for (int k = 0; k < 4; k++) p[k] = (uint8_t)(u >> (8 * k));
}

/* e4m3s / e5m2s: h codes of x / s, then s = amax / fmax as f32. */
static void quant_fp8_scaled(const float *x, uint8_t *dst, int h, int e5) {
    float amax = 0.0f;
    for (int i = 0; i < h; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]);
    float s = amax / (e5 ? 57344.0f : 448.0f);
    for (int i = 0; i < h; i++) {
        float t = s != 0.0f ? x[i] / s : 0.0f;
        dst[i] = s == 0.0f ? 0 : e5 ? kv_e5m2_from_f32(t) : kv_fp8_from_f32(t);
    }
    put32f(dst + h, s);
}

/* nvfp4: blocks of 16 { uint8 e4m3 s; uint8 qs[8] }, per-tensor scale 1.0. */
static void quant_nvfp4(const float *x, uint8_t *dst, int h) {
    for (int b = 0; b < h / 16; b++) {
        const float *xb = x + 16 * b;                       /* [16] */
        uint8_t *ob = dst + 9 * b;                          /* [9] */
        float amax = 0.0f;
        for (int j = 0; j < 16; j++)
            if (fabsf(xb[j]) > amax) amax = fabsf(xb[j]);
        uint8_t sb = kv_fp8_from_f32(amax / 6.0f);
        float s = kv_fp8_to_f32(sb);
        ob[0] = sb;
        for (int j = 0; j < 8; j++) {
            uint8_t lo = s != 0.0f ? kv_e2m1_from_f32(xb[j] / s) : 0;
            uint8_t hi = s != 0.0f ? kv_e2m1_from_f32(xb[j + 8] / s) : 0;
            ob[1 + j] = (uint8_t)(lo | hi << 4);
        }
    }
}

/* mxfp4: blocks of 32 { uint8 e8m0 X; uint8 qs[16] }. */
static void quant_mxfp4(const float *x, uint8_t *dst, int h) {
    for (int b = 0; b < h / 32; b++) {
        const float *xb = x + 32 * b;                       /* [32] */
        uint8_t *ob = dst + 17 * b;                         /* [17] */
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            if (fabsf(xb[j]) > amax) amax = fabsf(xb[j]);
        int E = -127;
        if (amax > 0.0f && amax <= 3.40282347e+38f) {
            int ex;
            frexpf(amax, &ex);                              /* amax = f * 2^ex, f in [0.5, 1): exact */
            E = ex - 1 - 2;                                 /* floor(log2 amax) - emax(E2M1) */
            if (E < -127) E = -127;
        }
        else if (amax > 0.0f) E = 127;                      /* +inf */
        ob[0] = (uint8_t)(E + 127);
        float inv = ldexpf(1.0f, -E);                       /* 2^-E, exact (2^-127 is subnormal) */
        for (int j = 0; j < 16; j++)
            ob[1 + j] = (uint8_t)(kv_e2m1_from_f32(xb[j] * inv) | kv_e2m1_from_f32(xb[j + 16] * inv) << 4);
    }
}

/* tq3 / tq4: the Lloyd-Max quantiser of N(0, 1) with 8 / 16 levels: centroids c and the midpoints
 * t between neighbours, float64 values rounded to f32 (tests/ref/make_kv_fixtures.py computes them
 * itself; the fixture bytes agree only if these do). */
const float kv_tq3_c[8] = { -2.15194559f, -1.34390926f, -0.756005287f, -0.24509418f,
                            0.24509418f, 0.756005287f, 1.34390926f, 2.15194559f };
static const float tq3_t[7] = { -1.74792755f, -1.04995728f, -0.500549734f, 0.0f, 0.500549734f, 1.04995728f, 1.74792755f };
const float kv_tq4_c[16] = { -2.73258948f, -2.06901717f, -1.6180464f, -1.25623119f, -0.942340434f, -0.656759143f,
                             -0.388048291f, -0.128395036f, 0.128395036f, 0.388048291f, 0.656759143f, 0.942340434f,
                             1.25623119f, 1.6180464f, 2.06901717f, 2.73258948f };
static const float tq4_t[15] = { -2.40080333f, -1.84353185f, -1.4371388f, -1.09928584f, -0.799549758f, -0.522403717f,
                                 -0.258221656f, 0.0f, 0.258221656f, 0.522403717f, 0.799549758f, 1.09928584f,
                                 1.4371388f, 1.84353185f, 2.40080333f };

/* tq3 (bits 3) / tq4 (bits 4) of the already rotated y[h]: f32 s = sqrtf((sum y^2) / h) (sequential
 * f32 sum of the f32 squares), then code i = the number of thresholds t with y[i] / s > t (0 for
 * NaN: s == 0 gives every code 0), packed bits each from bit 0 of byte 4 upwards. */
static void quant_tq(const float *y, uint8_t *dst, int h, int bits) {
    const float *t = bits == 3 ? tq3_t : tq4_t;
    int nt = (1 << bits) - 1;
    float ss = 0.0f;
    for (int i = 0; i < h; i++) ss += y[i] * y[i];
    float s = sqrtf(ss / (float)h);
    memcpy(dst, &s, 4);                                     /* little-endian host (kv_internal.h checks) */
    uint8_t *codes = dst + 4;                               /* [h * bits / 8] */
    memset(codes, 0, (size_t)h * (size_t)bits / 8);
    for (int i = 0; i < h; i++) {
        float z = y[i] / s;
        unsigned q = 0;
        for (int k = 0; k < nt; k++) q += z > t[k];
        size_t bit = (size_t)bits * (size_t)i;
        codes[bit / 8] = (uint8_t)(codes[bit / 8] | q << (bit % 8));
        if (bit % 8 + (size_t)bits > 8) codes[bit / 8 + 1] = (uint8_t)(codes[bit / 8 + 1] | q >> (8 - bit % 8));
    }
}

/* f16 rows: 16 values per vector conversion (v_store_f16 rounds as fp16_from_f32), the rest one
 * by one. */
static void quant_f16(const float *x, uint8_t *o, int h) {
    int i = 0;
    for (; i + 16 <= h; i += 16) v_store_f16(o + 2 * i, v_load(x + i));
    for (; i < h; i++) put16(o + 2 * i, fp16_from_f32(x[i]));
}

int kv_quantize(kv_fmt f, const float *x, void *dst, int h) {
    if (kv_row_bytes(f, h) == 0) return -1;
    uint8_t *o = dst;                                       /* [kv_row_bytes(f, h)] */
    float r[KV_HADAMARD_MAX];                               /* [h] rotated copy of x (rotated formats) */
    if (kv_fmt_rotation(f)) {
        memcpy(r, x, sizeof(float) * (size_t)h);
        kv_rotate(f, r, h);
        x = r;
    }
    switch (kv_fmt_base(f)) {
    case KV_F32: memcpy(o, x, 4 * (size_t)h); break;
    case KV_BF16: for (int i = 0; i < h; i++) put16(o + 2 * i, bf16_from_f32(x[i])); break;
    case KV_F16: quant_f16(x, o, h); break;
    case KV_INT8: quant_int8(x, o, h); break;
    case KV_Q8_0: quant_q8_0(x, o, h); break;
    case KV_Q4_0: quant_q4_0(x, o, h); break;
    case KV_FP8: for (int i = 0; i < h; i++) o[i] = kv_fp8_from_f32(x[i]); break;
    case KV_Q4_1: quant_q_1(x, o, h, 4); break;
    case KV_Q5_0: quant_q5_0(x, o, h); break;
    case KV_Q5_1: quant_q_1(x, o, h, 5); break;
    case KV_IQ4_NL: quant_iq4_nl(x, o, h); break;
    case KV_E5M2: for (int i = 0; i < h; i++) o[i] = kv_e5m2_from_f32(x[i]); break;
    case KV_E4M3S: quant_fp8_scaled(x, o, h, 0); break;
    case KV_E5M2S: quant_fp8_scaled(x, o, h, 1); break;
    case KV_NVFP4: quant_nvfp4(x, o, h); break;
    case KV_MXFP4: quant_mxfp4(x, o, h); break;
    case KV_TQ3: quant_tq(x, o, h, 3); break;
    case KV_TQ4: quant_tq(x, o, h, 4); break;
    default: return -1;
    }
    return 0;
}
