/* ops.c — CPU kernels. See ops.h for the canonical orders that make them batch invariant.
 * Each kernel has a plain C reference (the *_ref functions, ops_expf); the fast forms are written
 * once in the vec16 layer (kernels/vec16.h) and perform the same operations on every ISA. */
#include "kernels/ops.h"
#include "kernels/vec16.h"
#include "kernels/quant.h"
#include "kernels/prefetch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- dot product --------------------------------------------------------------------------- */

/* The canonical reduction of 16 lanes: fold l + (l+8), then ((s0+s4)+(s2+s6)) + ((s1+s5)+(s3+s7)). */
static inline float reduce16(const float a[16]) {
    float s[8];
    for (int l = 0; l < 8; l++) s[l] = a[l] + a[l + 8];
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

float ops_dot_ref(const float *a, const float *b, int n) {
    float acc[16] = {0};
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) acc[l] = fmaf(a[i + l], b[i + l], acc[l]);
    float s = reduce16(acc);
    for (; i < n; i++) s = fmaf(a[i], b[i], s);
    return s;
}

float ops_dot(const float *a, const float *b, int n) {
    vec16 acc = v_zero();
    int i = 0;
    for (; i + 16 <= n; i += 16) acc = v_fma(v_load(a + i), v_load(b + i), acc);
    float s = v_sum(acc);
    for (; i < n; i++) s = fmaf(a[i], b[i], s);
    return s;
}

/* ---- matmul with quantised weights ----------------------------------------------------------- */

#define MM_ROWS 4    /* weight rows per register tile */
#define MM_ITEM 64   /* weight rows per pool item (dequantised once per call) */
#define MM_TOK 4     /* tokens per block: the block stays in L1 while the item's rows stream from L2 */
/* Decode (T = 1) reads each weight once from memory, so it is bound by how well the stream is
 * prefetched: each thread gets MM_DECODE_PARTS contiguous ranges of rows per matrix (long streams
 * the hardware prefetcher locks on to; 8 items per thread ran at 0.7x the speed of 2), and asks
 * for the rows MM_AHEAD ahead of the ones it multiplies. */
#define MM_DECODE_PARTS 2
#define MM_AHEAD 16

typedef struct {
    const float *x;   /* [T][cols], shared by the jobs */
    int T;
    ops_mm job[OPS_MM_MAX];
    int item_rows[OPS_MM_MAX];       /* rows per pool item of each job */
    int first_item[OPS_MM_MAX + 1];  /* items of job j: [first_item[j], first_item[j + 1]) */
    float *scratch;   /* [n_threads][MM_ITEM][cols] */
} mm_ctx;

void ops_weight_row(const backend_weight *w, int r, float *out) {
    quant_dequant_row(w->type, w->data + (size_t)r * w->row_bytes, out, w->cols);
}

/* Prefetches the weight rows [r0, r1) into L1 (kernels/prefetch.h: why L1, why inlined). */
static inline __attribute__((always_inline)) void prefetch_rows(const backend_weight *w, int r0, int r1) {
    if (r1 > r0) prefetch_l1(w->data + (size_t)r0 * w->row_bytes, (size_t)(r1 - r0) * w->row_bytes);
}

/* out[q] = canonical dot(wt[q], x) for q < nr (nr <= 8): independent chains side by side, each
 * the same operations as ops_dot. wt [nr][K]. */
static inline __attribute__((always_inline)) void dot_rows_n(const float *wt, const float *x, int K, const int nr,
                                                             float *out) {
    int K16 = K & ~15;
    vec16 acc[8];
    #pragma GCC unroll 8
    for (int q = 0; q < nr; q++) acc[q] = v_zero();
    for (int i = 0; i < K16; i += 16) {
        vec16 v = v_load(x + i);
        #pragma GCC unroll 8
        for (int q = 0; q < nr; q++) acc[q] = v_fma(v_load(wt + (size_t)q * K + i), v, acc[q]);
    }
    #pragma GCC unroll 8
    for (int q = 0; q < nr; q++) {
        float sum = v_sum(acc[q]);
        for (int i = K16; i < K; i++) sum = fmaf(wt[(size_t)q * K + i], x[i], sum);
        out[q] = sum;
    }
}

static void dot_rows(const float *wt, const float *x, int K, int nr, float *out) {
#if VEC16_REGS >= 32
    if (nr == 8) { dot_rows_n(wt, x, K, 8, out); return; }
#else   /* 8 accumulators would fill every register: two runs of 4 */
    if (nr == 8) { dot_rows_n(wt, x, K, 4, out); dot_rows_n(wt + (size_t)4 * K, x, K, 4, out + 4); return; }
#endif
    if (nr == 4) { dot_rows_n(wt, x, K, 4, out); return; }
    for (int q = 0; q < nr; q++) out[q] = ops_dot(wt + (size_t)q * K, x, K);
}

/* Register tile: rows R x tokens U (literals at each call), each y value the canonical dot of one
 * row and one token. w [R] rows of K, xs [U] tokens of K. */
static inline __attribute__((always_inline)) void mm_regtile(const float *const *w, const float *const *xs, const int R,
                                                             const int U, int K, float *y, int ldy, int r) {
    int K16 = K & ~15;
    vec16 acc[4][4];
    #pragma GCC unroll 4
    for (int q = 0; q < R; q++)
        #pragma GCC unroll 4
        for (int u = 0; u < U; u++) acc[q][u] = v_zero();
    for (int i = 0; i < K16; i += 16) {
        vec16 wv[4];
        #pragma GCC unroll 4
        for (int q = 0; q < R; q++) { wv[q] = v_load(w[q] + i); v_reg(&wv[q]); }
        #pragma GCC unroll 4
        for (int u = 0; u < U; u++) {
            vec16 v = v_load(xs[u] + i);
            v_reg(&v);
            #pragma GCC unroll 4
            for (int q = 0; q < R; q++) acc[q][u] = v_fma(wv[q], v, acc[q][u]);
        }
    }
    #pragma GCC unroll 4
    for (int u = 0; u < U; u++)
        #pragma GCC unroll 4
        for (int q = 0; q < R; q++) {
            float sum = v_sum(acc[q][u]);
            for (int i = K16; i < K; i++) sum = fmaf(w[q][i], xs[u][i], sum);
            y[(size_t)u * ldy + r + q] = sum;
        }
}

/* y[t][r..r+3] for rows already dequantised into wt [4][K]. With 32 vector registers one tile of
 * 4 rows x 4 tokens (16 accumulators, 8 loads per 16 fma); with 16 (AVX2, NEON: 8 vec16) four tiles
 * of 2 x 2, whose accumulators and operands still fit. */
static void mm_tile4(const float *wt, const float *x, float *y, int T, int K, int ldy, int r) {
    int t = 0;
    for (; t + 4 <= T; t += 4) {
        const float *ws[4] = { wt, wt + K, wt + 2 * (size_t)K, wt + 3 * (size_t)K };
        const float *xs[4] = { x + (size_t)t * K, x + (size_t)(t + 1) * K, x + (size_t)(t + 2) * K, x + (size_t)(t + 3) * K };
#if VEC16_REGS >= 32
        mm_regtile(ws, xs, 4, 4, K, y + (size_t)t * ldy, ldy, r);
#else
        for (int u = 0; u < 4; u += 2)
            for (int q = 0; q < 4; q += 2) mm_regtile(ws + q, xs + u, 2, 2, K, y + (size_t)(t + u) * ldy, ldy, r + q);
#endif
    }
    for (; t < T; t++) {
        float out[4];
        dot_rows(wt, x + (size_t)t * K, K, 4, out);
        #pragma GCC unroll 4
        for (int q = 0; q < 4; q++) y[(size_t)t * ldy + r + q] = out[q];
    }
}

static void mm_item(void *vctx, int item, int thread) {
    mm_ctx *c = vctx;
    int j = 0;
    while (item >= c->first_item[j + 1]) j++;
    const backend_weight *w = c->job[j].w;
    float *y = c->job[j].y;
    int ldy = c->job[j].ldy, K = w->cols;
    float *wt = c->scratch + (size_t)thread * MM_ITEM * K;   /* [MM_ITEM][K] dequantised rows */
    int rb = (item - c->first_item[j]) * c->item_rows[j];
    int re = rb + c->item_rows[j] < w->rows ? rb + c->item_rows[j] : w->rows;
    int nr = re - rb, n4 = nr & ~(MM_ROWS - 1);
    if (c->T < 4) {   /* decode: 8 rows at a time, dequantised into L1 and used at once */
        for (int r = rb; r < re; r += 8) {
            int n = re - r < 8 ? re - r : 8;
            float out[8];
            /* decode streams every weight once per token: keep MM_AHEAD rows requested ahead, the
             * fused kernel asking for the n rows MM_AHEAD on a block at a time (row 50) */
            if (r == rb) prefetch_rows(w, rb + 8, rb + MM_AHEAD < re ? rb + MM_AHEAD : re);
            const uint8_t *rows = w->data + (size_t)r * w->row_bytes;
            const uint8_t *ahead = r + MM_AHEAD + n <= re ? rows + (size_t)MM_AHEAD * w->row_bytes : NULL;
            if (c->T == 1 && quant_dot_rows(w->type, rows, w->row_bytes, n, c->x, K, ahead, out) == 0) {
                for (int q = 0; q < n; q++) y[r + q] = out[q];   /* fused: no dequantised copy */
                continue;
            }
            if (r + MM_AHEAD < re) prefetch_rows(w, r + MM_AHEAD, r + MM_AHEAD + 8 < re ? r + MM_AHEAD + 8 : re);
            for (int q = 0; q < n; q++) ops_weight_row(w, r + q, wt + (size_t)q * K);
            for (int t = 0; t < c->T; t++) {
                dot_rows(wt, c->x + (size_t)t * K, K, n, out);
                for (int q = 0; q < n; q++) y[(size_t)t * ldy + r + q] = out[q];
            }
        }
        return;
    }
    for (int r = 0; r < nr; r++) ops_weight_row(w, rb + r, wt + (size_t)r * K);
    /* tokens in blocks that stay in L2 while every row tile of the item passes over them */
    for (int t0 = 0; t0 < c->T; t0 += MM_TOK) {
        int nt = c->T - t0 < MM_TOK ? c->T - t0 : MM_TOK;
        const float *xb = c->x + (size_t)t0 * K;
        float *yb = y + (size_t)t0 * ldy;
        for (int r = 0; r < n4; r += MM_ROWS) mm_tile4(wt + (size_t)r * K, xb, yb, nt, K, ldy, rb + r);
        for (int r = n4; r < nr; r++)
            for (int t = 0; t < nt; t++) yb[(size_t)t * ldy + rb + r] = ops_dot(wt + (size_t)r * K, xb + (size_t)t * K, K);
    }
}

size_t ops_matmul_scratch_floats(int threads, int cols) {
    return (size_t)threads * MM_ITEM * (size_t)cols;
}

int ops_matmul_many(pool *p, const ops_mm *jobs, int n, const float *x, int T, float *scratch) {
    if (n < 1 || n > OPS_MM_MAX) return -1;
    if (T <= 0) return 0;
    mm_ctx c = { .x = x, .T = T };
    int threads = pool_threads(p), cols = jobs[0].w->cols;
    for (int j = 0; j < n; j++) {
        if (jobs[j].w->cols != cols) return -1;
        c.job[j] = jobs[j];
        int rows = jobs[j].w->rows, ir = MM_ITEM;
        if (T == 1)   /* decode: a few long contiguous ranges per thread (see MM_DECODE_PARTS) */
            ir = ((rows + MM_DECODE_PARTS * threads - 1) / (MM_DECODE_PARTS * threads) + 7) / 8 * 8;
        else          /* fewer, larger items: the dequantised rows are reused by every token */
            while (ir > 8 && rows / ir < 4 * threads) ir /= 2;
        c.item_rows[j] = ir;
        c.first_item[j + 1] = c.first_item[j] + (rows + ir - 1) / ir;
    }
    /* 64-byte aligned: a row of K floats starts on a cache line whenever K % 16 == 0 */
    float *own = NULL;
    if (!scratch) {
        size_t bytes = sizeof(float) * ops_matmul_scratch_floats(threads, cols);
        if (!(own = aligned_alloc(64, (bytes + 63) / 64 * 64))) return -1;
    }
    c.scratch = scratch ? scratch : own;
    pool_run(p, mm_item, &c, c.first_item[n]);
    free(own);
    return 0;
}

int ops_matmul(pool *p, const backend_weight *w, const float *x, float *y, int T, int ldy, float *scratch) {
    ops_mm job = { w, y, ldy };
    return ops_matmul_many(p, &job, 1, x, T, scratch);
}

/* ---- norms, rope, activations ----------------------------------------------------------------- */

void ops_rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    float ss = ops_dot(x, x, n);
    float scale = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * scale * w[i];
}

static float yarn_ramp(float low, float high, int i0) {
    float y = ((float)(i0 / 2) - low) / fmaxf(0.001f, high - low);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

/* YaRN correction dims: the rotary dimension at which a wavelength spans n_rot rotations. */
static float yarn_corr_dim(int n_rot, int n_ctx_orig, float n_rotations, float base) {
    return (float)n_rot * logf((float)n_ctx_orig / (n_rotations * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

/* YaRN's ramp bounds and the magnitude scale of cfg (low = high = 0 without YaRN). */
static float rope_yarn(const backend_rope *cfg, int n_rot, float *low, float *high) {
    float mscale = cfg->attn_factor > 0 ? cfg->attn_factor : 1.0f;
    *low = *high = 0;
    if (cfg->ext_factor > 0) {
        *low = floorf(yarn_corr_dim(n_rot, cfg->n_ctx_orig, cfg->beta_fast, cfg->base));
        *high = ceilf(yarn_corr_dim(n_rot, cfg->n_ctx_orig, cfg->beta_slow, cfg->base));
        if (*low < 0) *low = 0;
        if (*high > n_rot - 1) *high = (float)(n_rot - 1);
        /* magnitude scale 1 + 0.1 ln(factor), for a stretch (factor > 1) only, as llama.cpp */
        if (cfg->freq_scale < 1.0f) mscale *= 1.0f + 0.1f * logf(1.0f / cfg->freq_scale);
    }
    return mscale;
}

void ops_rope_table_f32(float *cs, int pos, int n_rot, const backend_rope *cfg) {
    float low, high, mscale = rope_yarn(cfg, n_rot, &low, &high);
    float theta_scale = powf(cfg->base, -2.0f / (float)n_rot);
    float theta_extrap = (float)pos;
    for (int i = 0; i < n_rot / 2; i++) {
        float theta_interp = cfg->freq_scale * theta_extrap;
        float theta = theta_interp;
        if (cfg->ext_factor > 0) {
            float mix = yarn_ramp(low, high, 2 * i) * cfg->ext_factor;
            theta = theta_interp * (1 - mix) + theta_extrap * mix;
        }
        cs[2 * i] = cosf(theta) * mscale;
        cs[2 * i + 1] = sinf(theta) * mscale;
        theta_extrap *= theta_scale;
    }
}

void ops_rope_table_f64(float *cs, int pos, int n_rot, const backend_rope *cfg) {
    float low, high, mscale = rope_yarn(cfg, n_rot, &low, &high);
    for (int i = 0; i < n_rot / 2; i++) {
        double freq = pow((double)cfg->base, -2.0 * i / n_rot);
        double theta_extrap = (double)pos * freq;
        double theta = (double)cfg->freq_scale * theta_extrap;
        if (cfg->ext_factor > 0) {
            double mix = (double)(yarn_ramp(low, high, 2 * i) * cfg->ext_factor);
            theta = theta * (1 - mix) + theta_extrap * mix;
        }
        cs[2 * i] = (float)(cos(theta) * mscale);
        cs[2 * i + 1] = (float)(sin(theta) * mscale);
    }
}

void ops_rope_table(float *cs, int pos, int n_rot, const backend_rope *cfg) {
    if (cfg->f32_angles) ops_rope_table_f32(cs, pos, n_rot, cfg);
    else ops_rope_table_f64(cs, pos, n_rot, cfg);
}

void ops_rope(float *x, const float *cs, int n_rot, int neox) {
    int half = n_rot / 2;
    for (int i = 0; i < half; i++) {
        float c = cs[2 * i], s = cs[2 * i + 1];
        int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        float x0 = x[a], x1 = x[b];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
    }
}

void ops_swiglu_ref(float *x, const float *up, int n) {
    for (int i = 0; i < n; i++) x[i] = x[i] / (1.0f + expf(-x[i])) * up[i];
}

void ops_swiglu_oai_ref(float *x, const float *up, int n, float alpha, float limit) {
    for (int i = 0; i < n; i++) {
        float c = limit < x[i] ? limit : x[i];   /* a NaN stays NaN, as in llama.cpp */
        float u = up[i] < -limit ? -limit : limit < up[i] ? limit : up[i];
        x[i] = c / (1.0f + expf(alpha * -c)) * (u + 1.0f);
    }
}

/* gelu_tanh(v) = 0.5 v (1 + tanh(z)), z = sqrt(2/pi) (v + 0.044715 v^3), computed as the equal
 * v / (1 + exp(-2z)): glibc's expf gives the same bits on x86-64 and AArch64, its tanhf does not
 * (tests/neon.test.sh found Gemma 3's logits differing in the last bits), and the sum 1 + tanh(z)
 * is where the formula's value lies anyway. */
void ops_geglu_ref(float *x, const float *up, int n) {
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    for (int i = 0; i < n; i++) {
        float v = x[i];
        float z = k * (v + 0.044715f * v * v * v);
        x[i] = v / (1.0f + expf(-2.0f * z)) * up[i];
    }
}

/* The activations' fast forms: the references' operations 16 lanes at a time, in the same order
 * (v_expf is glibc's expf: the same bits), and a tail of fewer than 16 through zero-padded
 * vectors. ACT_* picks the formula; act_rows is inlined with a constant kind. */
enum { ACT_SWIGLU, ACT_GEGLU, ACT_OAI };

static inline __attribute__((always_inline)) vec16 act16(int kind, vec16 g, vec16 u, float alpha, float limit) {
    const vec16 one = v_set1(1.0f);
    switch (kind) {
    case ACT_SWIGLU: return v_mul(v_div(g, v_add(one, v_expf(v_flipsign(g, 0xFFFFu)))), u);
    case ACT_GEGLU: {
        vec16 z = v_mul(v_set1(0.7978845608028654f), v_add(g, v_mul(v_mul(v_mul(v_set1(0.044715f), g), g), g)));
        return v_mul(v_div(g, v_add(one, v_expf(v_mul(v_set1(-2.0f), z)))), u);
    }
    default: {
        vec16 c = v_min(v_set1(limit), g);
        vec16 uc = v_max(v_set1(-limit), v_min(v_set1(limit), u));
        return v_mul(v_div(c, v_add(one, v_expf(v_mul(v_set1(alpha), v_flipsign(c, 0xFFFFu))))), v_add(uc, one));
    }
    }
}

static inline __attribute__((always_inline)) void act_rows(int kind, float *x, const float *up, int n, float alpha,
                                                           float limit) {
    int i = 0;
    for (; i + 16 <= n; i += 16) v_store(x + i, act16(kind, v_load(x + i), v_load(up + i), alpha, limit));
    if (i < n) {
        float g[16] = { 0 }, u[16] = { 0 };   /* the last n - i values, zero-padded */
        memcpy(g, x + i, sizeof(float) * (size_t)(n - i));
        memcpy(u, up + i, sizeof(float) * (size_t)(n - i));
        v_store(g, act16(kind, v_load(g), v_load(u), alpha, limit));
        memcpy(x + i, g, sizeof(float) * (size_t)(n - i));
    }
}

void ops_swiglu(float *x, const float *up, int n) { act_rows(ACT_SWIGLU, x, up, n, 0.0f, 0.0f); }
void ops_geglu(float *x, const float *up, int n) { act_rows(ACT_GEGLU, x, up, n, 0.0f, 0.0f); }
void ops_swiglu_oai(float *x, const float *up, int n, float alpha, float limit) {
    act_rows(ACT_OAI, x, up, n, alpha, limit);
}

static inline float reduce8(const float a[8]) {
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

/* ---- exp ------------------------------------------------------------------------------------ */
/* exp(x) = 2^n * e^r, n = rint(x / ln2), r = x - n ln2 (two-step Cody-Waite), e^r by a degree-6
 * polynomial in Horner form with fma. Scalar and AVX2 do the same operations. */
#define EXP_LOG2E 1.44269504088896341f
#define EXP_LN2_HI 0.693359375f
#define EXP_LN2_LO -2.12194440e-4f
#define EXP_P0 1.9875691500e-4f
#define EXP_P1 1.3981999507e-3f
#define EXP_P2 8.3334519073e-3f
#define EXP_P3 4.1665795894e-2f
#define EXP_P4 1.6666665459e-1f
#define EXP_P5 5.0000001201e-1f
#define EXP_MIN -87.3f

/* Outside the polynomial's domain: x < EXP_MIN (and -inf) gives 0, NaN gives NaN, and where
 * rint(x log2 e) > EXP_N_MAX (x > ~88.7, +inf) the result is +inf; n = EXP_N_MAX itself already
 * makes the scale 2^128 = inf. These tests change no bit of any other result, and keep the
 * integer conversion and the shift below defined (|n| <= 128). The vector forms give the same. */
#define EXP_N_MAX 128.0f
/* The vector forms clamp x to EXP_CLAMP instead: rint(88.5 log2 e) = 128, so every x above it
 * (+inf included) gets the scale 2^128 = inf, exactly as ops_expf's n > EXP_N_MAX test, and x up
 * to it is untouched (n = 128 starts at ~88.38, where the result was already inf). */
#define EXP_CLAMP 88.5f

float ops_expf(float x) {
    if (x < EXP_MIN) return 0.0f;
    if (x != x) return x;
    float n = rintf(x * EXP_LOG2E);
    if (n > EXP_N_MAX) return INFINITY;
    float r = fmaf(n, -EXP_LN2_HI, x);
    r = fmaf(n, -EXP_LN2_LO, r);
    float p = EXP_P0;
    p = fmaf(p, r, EXP_P1);
    p = fmaf(p, r, EXP_P2);
    p = fmaf(p, r, EXP_P3);
    p = fmaf(p, r, EXP_P4);
    p = fmaf(p, r, EXP_P5);
    float r2 = r * r;
    p = fmaf(p, r2, r);
    p = p + 1.0f;
    int32_t e = ((int32_t)n + 127) << 23;
    float s;
    memcpy(&s, &e, 4);
    return p * s;
}

float ops_sum8(const float *y, int n) {
    float acc[8];
    int i = 0;
    vec8 vacc = v8_zero();   /* lane l: y[l] + y[l + 8] + ... in order */
    for (; i + 8 <= n; i += 8) vacc = v8_add(vacc, v8_load(y + i));
    v8_store(acc, vacc);
    float s = reduce8(acc);
    for (; i < n; i++) s += y[i];
    return s;
}

float ops_exp_sub_sum(float *y, const float *x, float m, int n) {
    int i = 0;
    const vec16 vm = v_set1(m), vmin = v_set1(EXP_MIN), vl2e = v_set1(EXP_LOG2E), vclamp = v_set1(EXP_CLAMP);
    const vec16 hi = v_set1(-EXP_LN2_HI), lo = v_set1(-EXP_LN2_LO), one = v_set1(1.0f);
    for (; i + 16 <= n; i += 16) {   /* ops_expf's operations, 16 lanes at a time */
        /* min(clamp, v): v above the clamp (n = 128 there, the scale 2^128 = inf) gives +inf, a NaN
         * v stays NaN (the second operand is returned) and, kept by v_zero_lt (false for a NaN),
         * stays NaN through the polynomial: ops_expf's results without a branch */
        vec16 v = v_min(vclamp, v_sub(v_load(x + i), vm));
        vec16 nn = v_round(v_mul(v, vl2e));
        vec16 r = v_fma(nn, hi, v);
        r = v_fma(nn, lo, r);
        vec16 p = v_set1(EXP_P0);
        p = v_fma(p, r, v_set1(EXP_P1));
        p = v_fma(p, r, v_set1(EXP_P2));
        p = v_fma(p, r, v_set1(EXP_P3));
        p = v_fma(p, r, v_set1(EXP_P4));
        p = v_fma(p, r, v_set1(EXP_P5));
        p = v_fma(p, v_mul(r, r), r);
        p = v_add(p, one);
        /* where v < EXP_MIN, n may be out of range: zero n there, then zero the result (a NaN
         * lane's scale is 1, the product NaN) */
        nn = v_zero_lt(nn, v, vmin);
        v_store(y + i, v_zero_lt(v_mul(p, v_pow2i(nn)), v, vmin));
    }
    for (; i < n; i++) y[i] = ops_expf(x[i] - m);
    return ops_sum8(y, n);   /* the one definition of the sum's order */
}
