/* kivi.c — KIVI-style 2- and 4-bit K groups and V rows (see kivi.h for the layouts and rules).
 * Plain portable C: these run once per stored token or group and once per decoded key. */
#include "kernels/kivi.h"
#include "kernels/errmsg.h"

#include <stdio.h>
#include <string.h>

#include "kernels/fp16.h"

int kivi_bits(kv_fmt f) {
    if (!kv_fmt_is_kivi(f)) return 0;
    return ((int)f & 0xff) == KV_KIVI2 ? 2 : 4;
}

int kivi_group(kv_fmt f) { return kv_fmt_is_kivi(f) ? 1 << (((int)f >> KV_KIVI_G_SHIFT) & 15) : 0; }

int kivi_residual(kv_fmt f) { return kv_fmt_is_kivi(f) ? (int)f >> KV_KIVI_R_SHIFT : 0; }

int kivi_boundary(kv_fmt f, int p) {
    int g = kivi_group(f), n = p + 1 - kivi_residual(f);
    return n <= 0 || g == 0 ? 0 : n / g * g;
}

/* V's group of channels */
static int v_group(int h) { return h < 32 ? h : 32; }

int kivi_check(kv_fmt f, int h, char *err, size_t errlen) {
    char name[40];
    kv_fmt_format(f, name, sizeof name);
    if (!kv_fmt_is_kivi(f) || !kv_fmt_valid(f)) {
        return errmsg_set(err, errlen, -1, "kv format %d is not a kivi format", (int)f);
    }
    if (h < 4 || h > 1024 || h % 4 != 0 || (h > 32 && h % 32 != 0)) {
        return errmsg_set(err, errlen, -1,
                          "kv format %s needs a head dim that is a multiple of 4 up to 32, or a multiple of 32 "
                          "up to 1024 (got %d)", name, h);
    }
    if (4 * h % kivi_group(f) != 0) {
        return errmsg_set(err, errlen, -1,
                          "kv format %s needs a group G that divides 4 x the head dim (G %d, head dim %d): "
                          "use a smaller -gG", name, kivi_group(f), h);
    }
    return 0;
}

size_t kivi_k_group_bytes(kv_fmt f, int h) {
    return (size_t)kivi_group(f) * (size_t)h * (size_t)kivi_bits(f) / 8 + 4 * (size_t)h;
}

size_t kivi_v_row_bytes(kv_fmt f, int h) {
    return (size_t)h * (size_t)kivi_bits(f) / 8 + 4 * (size_t)(h / v_group(h));
}

size_t kivi_token_bytes(kv_fmt f, int h, int is_v) {
    if (is_v) return kivi_v_row_bytes(f, h);
    return kivi_k_group_bytes(f, h) / (size_t)kivi_group(f);
}

static float load_f16(const uint8_t *p) { return fp16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v & 0xff);
    p[1] = (uint8_t)(v >> 8);
}

/* min(top, trunc(t)) for t > 0, else 0 (NaN too): q4_1's rounding (kv.c's trunc_clamp) */
static unsigned code_of(float t, unsigned top) {
    if (!(t > 0.0f)) return 0;
    if (t >= (float)top) return top;
    return (unsigned)t;
}

/* code i (b bits) into the packed codes */
static void put_code(uint8_t *codes, size_t i, int b, unsigned q) {
    size_t bit = (size_t)b * i;
    codes[bit / 8] = (uint8_t)(codes[bit / 8] | q << (bit % 8));
}

static unsigned get_code(const uint8_t *codes, size_t i, int b) {
    size_t bit = (size_t)b * i;
    return (unsigned)(codes[bit / 8] >> (bit % 8)) & ((1u << b) - 1u);
}

/* the scale d = (max - min) / top and the minimum mn of z[n] (f32, in order) */
static void range_of(const float *z, int n, unsigned top, float *d, float *mn) {
    float lo = 3.40282347e+38f, hi = -3.40282347e+38f;
    for (int i = 0; i < n; i++) {
        if (z[i] < lo) lo = z[i];
        if (z[i] > hi) hi = z[i];
    }
    *d = (hi - lo) / (float)top;
    *mn = lo;
}

void kivi_quant_k_group(kv_fmt f, const uint8_t *rows, size_t stride, int h, uint8_t *dst) {
    int b = kivi_bits(f), G = kivi_group(f);
    unsigned top = (1u << b) - 1u;
    size_t ncode = (size_t)G * (size_t)h * (size_t)b / 8;
    uint8_t *dd = dst + ncode, *mm = dst + ncode + 2 * (size_t)h;   /* [h] fp16 d, [h] fp16 m */
    memset(dst, 0, ncode);
    for (int c = 0; c < h; c++) {
        float z[256];                                       /* [G] channel c of the G tokens */
        for (int t = 0; t < G; t++) z[t] = load_f16(rows + (size_t)t * stride + 2 * (size_t)c);
        float d, mn;
        range_of(z, G, top, &d, &mn);
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        put16(dd + 2 * c, fp16_from_f32(d));
        put16(mm + 2 * c, fp16_from_f32(mn));
        for (int t = 0; t < G; t++) put_code(dst, (size_t)t * h + c, b, code_of((z[t] - mn) * id + 0.5f, top));
    }
}

void kivi_dequant_k_rows(kv_fmt f, const uint8_t *grp, int h, int t0, int n, float *y) {
    int b = kivi_bits(f), G = kivi_group(f);
    size_t ncode = (size_t)G * (size_t)h * (size_t)b / 8;
    const uint8_t *dd = grp + ncode, *mm = grp + ncode + 2 * (size_t)h;
    for (int c = 0; c < h; c++) {
        float d = load_f16(dd + 2 * c), m = load_f16(mm + 2 * c);
        for (int t = 0; t < n; t++)
            y[(size_t)t * h + c] = (float)get_code(grp, (size_t)(t0 + t) * h + c, b) * d + m;
    }
}

void kivi_quant_v_row(kv_fmt f, const uint8_t *row16, int h, uint8_t *dst) {
    int b = kivi_bits(f), gv = v_group(h);
    unsigned top = (1u << b) - 1u;
    size_t ncode = (size_t)h * (size_t)b / 8;
    memset(dst, 0, ncode);
    for (int gi = 0; gi < h / gv; gi++) {
        float z[32];                                        /* [gv] */
        for (int j = 0; j < gv; j++) z[j] = load_f16(row16 + 2 * (size_t)(gi * gv + j));
        float d, mn;
        range_of(z, gv, top, &d, &mn);
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        put16(dst + ncode + 4 * (size_t)gi, fp16_from_f32(d));
        put16(dst + ncode + 4 * (size_t)gi + 2, fp16_from_f32(mn));
        for (int j = 0; j < gv; j++) put_code(dst, (size_t)(gi * gv + j), b, code_of((z[j] - mn) * id + 0.5f, top));
    }
}

void kivi_dequant_v_rows(kv_fmt f, const uint8_t *src, size_t stride, int n, int h, float *y) {
    int b = kivi_bits(f), gv = v_group(h);
    size_t ncode = (size_t)h * (size_t)b / 8;
    for (int r = 0; r < n; r++, src += stride, y += h)
        for (int gi = 0; gi < h / gv; gi++) {
            float d = load_f16(src + ncode + 4 * (size_t)gi), m = load_f16(src + ncode + 4 * (size_t)gi + 2);
            for (int j = 0; j < gv; j++) y[gi * gv + j] = (float)get_code(src, (size_t)(gi * gv + j), b) * d + m;
        }
}
