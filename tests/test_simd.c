/* test_simd.c — the kernels through the vec16 layer (kernels/vec16.h), built for whatever ISA this
 * build targets, on fixed pseudo-random inputs:
 *   1. each fast path against its plain C reference, bit for bit: ops_dot, the dequantisers, the
 *      fused dequantise-and-dot (1..8 rows), the matmul (decode and prefill shapes), the 16-wide
 *      exp against ops_expf (edge values included), the vector f32 -> f16 store against
 *      fp16_from_f32 (NaNs, infinities, rounding edges), v_expf against libm's expf and the FFN
 *      activations against their references, the tiled and split attention against
 *      attn_run_ref for f32 / f16 / bf16 / int8 / q8_0 / q4_0 / q4_1 / iq4_nl / mxfp4 K/V at head dim 64
 *      (and f16, int8 and the 4-bit ones at head dim 256);
 *   2. one FNV-1a hash of every output above, printed as "simd hash <16 hex digits>". The hash is
 *      the same on every ISA (AVX-512, AVX2, NEON, plain C): tests/neon.test.sh compares the x86
 *      native build's with the NEON and plain C builds' run under qemu-aarch64.
 * Uses kernels/ only (it is cross-compiled without the worker's libraries). Inputs avoid NaN and
 * infinite weights (whose propagated NaN bits are not specified alike by every ISA), except the
 * exp edge values, whose NaN comes from the input itself. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attn.h"
#include "kernels/fp16.h"
#include "kernels/ops.h"
#include "kernels/pool.h"
#include "kernels/quant.h"
#include "kernels/vec16.h"
#include "tests/check.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rng(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}
static float rnd(float lo, float hi) { return lo + (hi - lo) * (float)(rng() & 0xFFFFFF) / 16777216.0f; }

static uint64_t hash = 0xcbf29ce484222325ull;
static void hash_bytes(const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) hash = (hash ^ b[i]) * 0x100000001b3ull;
}

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

/* the types with a fast path, and where each block keeps its fp16 (or e8m0) scale fields */
typedef struct { uint32_t type; int f16_off[2]; int e8m0_off; } type_desc;
static const type_desc types[] = {
    { GGUF_T_F16, {-1, -1}, -1 },     { GGUF_T_Q4_0, {0, -1}, -1 },   { GGUF_T_Q4_1, {0, 2}, -1 },
    { GGUF_T_Q5_0, {0, -1}, -1 },     { GGUF_T_Q5_1, {0, 2}, -1 },    { GGUF_T_Q8_0, {0, -1}, -1 },
    { GGUF_T_Q4_K, {0, 2}, -1 },      { GGUF_T_Q6_K, {208, -1}, -1 }, { QUANT_T_IQ4_NL, {0, -1}, -1 },
    { QUANT_T_IQ4_XS, {0, -1}, -1 },  { QUANT_T_MXFP4, {-1, -1}, 0 }, { QUANT_T_IQ2_XXS, {0, -1}, -1 },
    { QUANT_T_IQ3_S, {0, -1}, -1 },   { QUANT_T_IQ1_S, {0, -1}, -1 }, { QUANT_T_TQ1_0, {52, -1}, -1 },
    { QUANT_T_TQ2_0, {64, -1}, -1 },
};

/* n values of type t at dst: random codes, scales in a modest range */
static void fill_row(const type_desc *t, uint8_t *dst, int n) {
    if (t->type == GGUF_T_F16) {
        for (int i = 0; i < n; i++) {
            uint16_t h = fp16_from_f32(rnd(-2.0f, 2.0f));
            memcpy(dst + 2 * i, &h, 2);
        }
        return;
    }
    size_t bb = quant_block_bytes(t->type);
    int nb = n / quant_block_values(t->type);
    for (size_t i = 0; i < bb * (size_t)nb; i++) dst[i] = (uint8_t)rng();
    for (int b = 0; b < nb; b++) {
        uint8_t *blk = dst + bb * (size_t)b;
        for (int k = 0; k < 2; k++)
            if (t->f16_off[k] >= 0) {
                uint16_t h = fp16_from_f32(rnd(-0.05f, 0.05f));
                memcpy(blk + t->f16_off[k], &h, 2);
            }
        if (t->e8m0_off >= 0) blk[t->e8m0_off] = (uint8_t)(118 + rng() % 16);
    }
}

enum { ROWS = 24, COLS = 512, TOK = 5 };

static void test_dot(void) {
    static float a[1000], b[1000];
    for (int i = 0; i < 1000; i++) { a[i] = rnd(-1, 1); b[i] = rnd(-1, 1); }
    int bad = 0;
    for (int n = 0; n <= 1000; n += 37) {
        float f = ops_dot(a, b, n), r = ops_dot_ref(a, b, n);
        bad += memcmp(&f, &r, 4) != 0;
        hash_bytes(&f, 4);
    }
    CHECK(bad == 0, "ops_dot = ops_dot_ref for 28 lengths 0..999 (%d differ)", bad);
}

static void test_weights(pool *p) {
    static uint8_t buf[ROWS * COLS * 4];
    static float y[ROWS * COLS], yr[ROWS * COLS], x[TOK * COLS], out[TOK * ROWS], ref[TOK * ROWS], wrow[COLS];
    for (int i = 0; i < TOK * COLS; i++) x[i] = rnd(-1, 1);
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const type_desc *t = &types[k];
        size_t rb = quant_row_bytes(t->type, COLS);
        for (int r = 0; r < ROWS; r++) fill_row(t, buf + rb * (size_t)r, COLS);
        int deq_bad = 0, dot_bad = 0, dot_refused = 0;
        for (int r = 0; r < ROWS; r++) {
            quant_dequant_row(t->type, buf + rb * (size_t)r, y + (size_t)r * COLS, COLS);
            quant_dequant_row_ref(t->type, buf + rb * (size_t)r, yr + (size_t)r * COLS, COLS);
            deq_bad += !same_bits(y + (size_t)r * COLS, yr + (size_t)r * COLS, COLS);
        }
        hash_bytes(y, sizeof(float) * ROWS * COLS);
        CHECK(deq_bad == 0, "%s: the fast dequantiser = the reference (%d of %d rows differ)", quant_type_name(t->type),
              deq_bad, ROWS);
        if (t->type != GGUF_T_F16) {
            for (int nr = 1; nr <= 8; nr++) {
                float o[8];
                if (quant_dot_rows(t->type, buf, rb, nr, x, COLS, NULL, o)) { dot_refused++; continue; }
                for (int r = 0; r < nr; r++) {
                    float want = ops_dot_ref(yr + (size_t)r * COLS, x, COLS);
                    dot_bad += memcmp(&o[r], &want, 4) != 0;
                }
                hash_bytes(o, sizeof(float) * (size_t)nr);
            }
            CHECK(dot_bad == 0 && dot_refused == 0, "%s: fused dot of 1..8 rows = dequantise + ops_dot_ref (%d differ, %d refused)",
                  quant_type_name(t->type), dot_bad, dot_refused);
        }
        /* matmul: decode (T = 1, fused) and prefill (T = 5: register tiles and the tail) */
        backend_weight w = { t->type, ROWS, COLS, rb, buf };
        int mm_bad = 0;
        for (int T = 1; T <= TOK; T += TOK - 1) {
            if (ops_matmul(p, &w, x, out, T, ROWS, NULL)) { mm_bad++; continue; }
            for (int tt = 0; tt < T; tt++)
                for (int r = 0; r < ROWS; r++) {
                    ops_weight_row(&w, r, wrow);
                    ref[tt * ROWS + r] = ops_dot_ref(wrow, x + (size_t)tt * COLS, COLS);
                }
            mm_bad += !same_bits(out, ref, (size_t)T * ROWS);
            hash_bytes(out, sizeof(float) * (size_t)T * ROWS);
        }
        CHECK(mm_bad == 0, "%s: ops_matmul (T = 1 and 5) = ops_dot_ref of each row and token", quant_type_name(t->type));
    }
}

static void test_exp(void) {
    enum { N = 1000 };
    static float x[N], y[N];
    static const float edge[] = { -INFINITY, INFINITY, -87.29f, -87.31f, 88.3f, 88.4f, 88.6f, 89.0f, 1e30f, -1e30f, 0.0f, -0.0f };
    for (int i = 0; i < N; i++) x[i] = rnd(-90.0f, 90.0f);
    memcpy(x + 100, edge, sizeof edge);
    x[200] = NAN;
    float m = 0.5f, s = ops_exp_sub_sum(y, x, m, N);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        float want = ops_expf(x[i] - m);
        bad += memcmp(&want, &y[i], 4) != 0 && !(want != want && y[i] != y[i]);
    }
    float want_sum = ops_sum8(y, N);
    hash_bytes(y, sizeof y);
    hash_bytes(&s, 4);
    CHECK(bad == 0 && memcmp(&s, &want_sum, 4) == 0, "ops_exp_sub_sum = ops_expf lane by lane (%d differ; edges, "
          "a NaN), sum = ops_sum8", bad);
}

/* v_expf = libm's expf bit for bit on every stride-th float bit pattern (251: both signs, every
 * exponent, infinities and NaNs, glibc's own cases; 1 with --exp-all: all 2^32, make check-long), then the activations' fast forms (ops_swiglu,
 * ops_geglu, ops_swiglu_oai) = their references on finite gates and ups, a length that leaves a
 * tail, and gates around expf's special cases (|x| >= 88 goes to expf itself) */
static void test_activations(unsigned stride) {
    long bad = 0, n = 0;
    for (uint64_t u = 0; u + 15 * (uint64_t)stride <= 0xFFFFFFFFull; u += 16 * (uint64_t)stride) {
        float x[16], y[16];
        for (int l = 0; l < 16; l++) {
            uint32_t b = (uint32_t)(u + (uint64_t)l * stride);
            memcpy(&x[l], &b, 4);
        }
        v_store(y, v_expf(v_load(x)));
        for (int l = 0; l < 16; l++) {
            float want = expf(x[l]);
            bad += memcmp(&want, &y[l], 4) != 0;
        }
        n += 16;
    }
    CHECK(bad == 0, "v_expf = expf bit for bit on %ld float bit patterns (%ld differ)", n, bad);
    enum { N = 1000 + 7 };
    static const float edge[] = { 88.0f, -88.0f, 87.99f, -87.99f, 88.5f, -88.5f, 100.0f, -100.0f, -103.5f, -104.0f,
                                  1e30f, -1e30f, 0.0f, -0.0f, 1e-40f, -1e-40f, 20.0f, -20.0f };
    static float g[N], u[N], a[N], b[N];
    for (int i = 0; i < N; i++) { g[i] = rnd(-30.0f, 30.0f); u[i] = rnd(-10.0f, 10.0f); }
    memcpy(g + 3, edge, sizeof edge);
    memcpy(g + N - 9, edge, 9 * sizeof(float));   /* in the tail too */
    for (int k = 0; k < 3; k++) {
        memcpy(a, g, sizeof g);
        memcpy(b, g, sizeof g);
        if (k == 0) { ops_swiglu(a, u, N); ops_swiglu_ref(b, u, N); }
        if (k == 1) { ops_geglu(a, u, N); ops_geglu_ref(b, u, N); }
        if (k == 2) { ops_swiglu_oai(a, u, N, 1.702f, 7.0f); ops_swiglu_oai_ref(b, u, N, 1.702f, 7.0f); }
        hash_bytes(a, sizeof a);
        CHECK(same_bits(a, b, N), "%s: fast form = reference on %d values (edges, a tail of %d)",
              k == 0 ? "ops_swiglu" : k == 1 ? "ops_geglu" : "ops_swiglu_oai", N, N % 16);
    }
}

/* v_store_f16 = fp16_from_f32 lane by lane: random bit patterns (NaNs, infinities and subnormals
 * among them) and the edges of the rounding (ties to even, the largest half, overflow, the
 * subnormal range and below it, signalling and quiet NaNs) */
static void test_half_store(void) {
    enum { N = 4096 };
    static const uint32_t edge[] = { 0x477fe000u, 0x477fefffu, 0x477ff000u, 0x47800000u, 0x33800000u, 0x33000000u,
                                     0x33000001u, 0x33c00000u, 0x38800000u, 0x387fc000u, 0x3f801000u, 0x3f803000u,
                                     0x3f800fffu, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7f800001u, 0x7fc00000u,
                                     0xffffffffu, 0x7fa02000u, 0x00000001u, 0xb3000000u };
    static uint32_t in[N];
    static uint16_t got[N];
    for (int i = 0; i < N; i++) in[i] = rng() ^ (rng() << 16);
    for (int i = 0; i < N / 2; i++) in[i] = (in[i] & 0x8fffffffu) | 0x30000000u;   /* near the half range */
    memcpy(in + 64, edge, sizeof edge);
    int bad = 0;
    for (int i = 0; i < N; i += 16) {
        float x[16];
        memcpy(x, in + i, sizeof x);
        v_store_f16(got + i, v_load(x));
        for (int l = 0; l < 16; l++) bad += got[i + l] != fp16_from_f32(x[l]);
    }
    hash_bytes(got, sizeof got);
    CHECK(bad == 0, "v_store_f16 = fp16_from_f32 on %d values: random bits, rounding edges, NaNs (%d differ)", N, bad);
}

/* tiled, windowed and split decode of one layer of n_kv KV heads of dimension hd (n_head 4), K and
 * V in format f, = attn_run_ref bit for bit; returns how many calls differ (or failed) */
static int attention_case(pool *p, kv_fmt f, int hd, int n_kv) {
    enum { MAX_HD = 256, MAX_KV = 2, NH = 4, CTX = 1300, T = 37 };
    static float kv[2 * MAX_KV * MAX_HD], q[T * NH * MAX_HD], o[T * NH * MAX_HD], r[T * NH * MAX_HD];
    cache c;
    char err[200];
    if (cache_create(&c, f, f, 1, n_kv, hd, CTX, err, sizeof err)) {
        printf("# cache_create %s: %s\n", kv_fmt_name(f), err);
        return 1;
    }
    for (int i = 0; i < T * NH * hd; i++) q[i] = rnd(-1, 1);
    for (int pos = 0; pos < CTX; pos++) {
        for (int i = 0; i < 2 * n_kv * hd; i++) kv[i] = rnd(-1, 1);
        cache_store(&c, 0, pos, kv, kv + n_kv * hd);
    }
    int bad = 0;
    /* a prefill chunk (tiled), one with a window, decode steps past ATTN_SPLIT_MIN_KEYS keys (split)
     * and one short of it (tiled); the last two with attention sinks (gpt-oss) */
    static const float sinks[NH] = { 0.5f, -2.0f, 9.0f, 1.5f };
    attn_args a[] = { { 0, T, 100, NH, 0, 0.125f, q, o, NULL }, { 0, T, 400, NH, 50, 0.125f, q, o, NULL },
                       { 0, 1, 1290, NH, 0, 0.125f, q, o, NULL }, { 0, 1, 700, NH, 0, 0.125f, q, o, NULL },
                       { 0, 1, ATTN_SPLIT_MIN_KEYS - 57, NH, 0, 0.125f, q, o, NULL },
                       { 0, T, 400, NH, 50, 0.125f, q, o, sinks }, { 0, 1, 1290, NH, 0, 0.125f, q, o, sinks } };
    for (size_t k = 0; k < sizeof a / sizeof a[0]; k++) {
        attn_args b = a[k];
        b.out = r;
        if (attn_run(p, &c, &a[k]) || attn_run_ref(&c, &b)) { bad++; continue; }
        bad += !same_bits(o, r, (size_t)a[k].T * NH * hd);
        hash_bytes(o, sizeof(float) * (size_t)a[k].T * NH * hd);
    }
    cache_free(&c);
    return bad;
}

/* every format at head dim 64 (2 KV heads); the register-decoded ones also at Gemma 3's 256 (1 KV
 * head), where split decode gives each item more than 64 columns */
static void test_attention(pool *p) {
    static const struct { kv_fmt f; int hd, n_kv; } cases[] = {
        { KV_F32, 64, 2 }, { KV_F16, 64, 2 }, { KV_BF16, 64, 2 }, { KV_INT8, 64, 2 }, { KV_Q8_0, 64, 2 },
        { KV_Q4_0, 64, 2 }, { KV_Q4_1, 64, 2 }, { KV_IQ4_NL, 64, 2 }, { KV_MXFP4, 64, 2 },
        { KV_F16, 256, 1 }, { KV_INT8, 256, 1 }, { KV_Q4_0, 256, 1 }, { KV_Q4_1, 256, 1 }, { KV_IQ4_NL, 256, 1 },
        { KV_MXFP4, 256, 1 } };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int bad = attention_case(p, cases[k].f, cases[k].hd, cases[k].n_kv);
        CHECK(bad == 0, "attention, %s K/V, head dim %d, %d KV heads: tiled, windowed and split decode, with and without "
              "sinks = attn_run_ref (%d differ)", kv_fmt_name(cases[k].f), cases[k].hd, cases[k].n_kv, bad);
    }
}

int main(int argc, char **argv) {
    unsigned stride = argc > 1 && strcmp(argv[1], "--exp-all") == 0 ? 1 : 251;
    pool *p;
    if (pool_create(check_threads(2), &p)) { printf("FAIL - pool_create\n0 passed, 1 failed\n"); return 1; }
    printf("vec16 family: %s\n", VEC16_ISA);
    test_dot();
    test_weights(p);
    test_exp();
    test_half_store();
    test_activations(stride);
    test_attention(p);
    pool_free(p);
    printf("simd hash %016llx\n", (unsigned long long)hash);
    return check_done();
}
