/* test_model.c — the forward pass against llama.cpp's reference logits for stories260K, batch
 * invariance (chunk sizes 1, 7, 64, 512 and decode vs prefill, every KV format), the reference
 * attention vs the tiled one, the dot-product kernels vs their plain C twins, and the hybrid
 * models' truncation (qwen35, qwen35moe). Argument "qwen35": only those. */
#include "tests/check.h"
#include "kernels/ops.h"
#include "kernels/attn.h"
#include "kernels/cache.h"
#include "kernels/kivi.h"
#include "worker/engine.h"
#include "worker/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the committed fixtures (tests/fixtures/README.md); tests run from the repository root */
static const char *fixtures(void) { return "tests/fixtures"; }

/* Every format: the base ones, then each with +rot, with +roth and with +rotp (where valid), into
 * out[4 * KV_NFMT]; returns how many. */
static int all_formats(kv_fmt *out) {
    static const int mods[4] = { 0, KV_ROT_B, KV_ROT_H, KV_ROT_P };
    int n = 0;
    for (int r = 0; r < 4; r++)
        for (int f = 0; f < KV_NFMT; f++) {
            kv_fmt x = (kv_fmt)(f | mods[r]);
            if (kv_fmt_valid(x)) out[n++] = x;
        }
    return n;
}

/* The base formats, then seven rotated ones (for the longer attention tests: every rotated format
 * runs in the short ones), into out[KV_NFMT + 12]; returns how many. */
static int some_formats(kv_fmt *out) {
    static const kv_fmt rot[7] = { KV_F16 | KV_ROT_B, KV_F16 | KV_ROT_H, KV_INT8 | KV_ROT_B, KV_Q8_0 | KV_ROT_H,
                                   KV_Q4_0 | KV_ROT_B, KV_NVFP4 | KV_ROT_H, KV_Q8_0 | KV_ROT_P };
    int n = 0;
    for (int f = 0; f < KV_NFMT; f++) out[n++] = (kv_fmt)f;
    for (int i = 0; i < 7; i++) out[n++] = rot[i];
    return n;
}

/* A format by name (kvfmt.h); KV_NFMT if the name does not parse (the caller's check then fails). */
static kv_fmt by_name(const char *name) {
    kv_fmt f = KV_NFMT;
    kv_fmt_parse(name, &f);
    return f;
}

/* KIVI formats for the attention tests at hd 64: boundaries inside the tests' chunks. */
static const char *const kivi_names[] = { "kivi4-g8-r16", "kivi2-g16-r0", "kivi4", "kivi2-g32-r40" };
#define N_KIVI 4

#define MAX_CELLS 1024   /* (layer, KV head) cells the tests' format arrays hold */

/* Runs tokens[n] through a fresh cpu backend (the formats of layer l, KV head g at fk / fv
 * [l * n_kv + g]; as many threads as p has) in chunks of `chunk`, all rows into out [n][V]. */
static int run_chunks_cells(const model *m, pool *p, const kv_fmt *fk, const kv_fmt *fv, const int32_t *tok, int n,
                             int chunk, float *out) {
    backend *b = NULL;
    backend_model net;
    char err[256];
    int *rows = malloc(sizeof(int) * (size_t)chunk), rc = -1;   /* [chunk] */
    model_net(m, &net);
    backend_config bc = { "cpu", fk, fv, n + 8, chunk, pool_threads(p), NULL, NULL, NULL, NULL, 0, 0, 0 };
    if (!rows || backend_create(&net, &bc, &b, err, sizeof err)) { printf("# %s\n", rows ? err : "out of memory"); goto done; }
    for (int i = 0; i < chunk; i++) rows[i] = i;
    for (int off = 0; off < n; off += chunk) {
        int T = n - off < chunk ? n - off : chunk;
        if (backend_forward(b, tok + off, T, off, rows, T, out + (size_t)off * m->n_vocab, err, sizeof err)) {
            printf("# forward: %s\n", err);
            goto done;
        }
    }
    rc = 0;
done:
    backend_free(b);
    free(rows);
    return rc;
}

/* The same with fk / fv in every layer and KV head. */
static int run_chunks(const model *m, pool *p, kv_fmt fk, kv_fmt fv, const int32_t *tok, int n, int chunk, float *out) {
    kv_fmt k[MAX_CELLS], v[MAX_CELLS];
    if (m->n_layer * m->n_kv > MAX_CELLS) return -1;
    for (int i = 0; i < m->n_layer * m->n_kv; i++) { k[i] = fk; v[i] = fv; }
    return run_chunks_cells(m, p, k, v, tok, n, chunk, out);
}

/* Batch invariance of a mix: K and V mixes (kvfmt.h syntax: per layer and KV head) resolved for m,
 * rows with prefill chunks 7, 64 and 512 bit-identical to chunk 1. */
static void invariance_mix(const model *m, pool *p, const char *what, const char *kmix, const char *vmix,
                           const int32_t *tok, int n) {
    kv_fmt k[MAX_CELLS], v[MAX_CELLS];
    kv_mix mk, mv;
    char err[256] = "";
    int V = m->n_vocab;
    if (m->n_layer * m->n_kv > MAX_CELLS || kv_mix_parse(kmix, &mk, err, sizeof err) || kv_mix_parse(vmix, &mv, err, sizeof err) ||
        kv_mix_cells(&mk, m->n_layer, m->n_kv, k, err, sizeof err) || kv_mix_cells(&mv, m->n_layer, m->n_kv, v, err, sizeof err)) {
        CHECK(0, "%s: mixes %s / %s resolve (%s)", what, kmix, vmix, err);
        return;
    }
    float *a = malloc(sizeof(float) * (size_t)n * V), *b = malloc(sizeof(float) * (size_t)n * V);
    static const int chunks[] = { 7, 64, 512 };
    int same = run_chunks_cells(m, p, k, v, tok, n, 1, a) == 0;
    for (int c = 0; same && c < 3; c++)
        same = run_chunks_cells(m, p, k, v, tok, n, chunks[c], b) == 0 && memcmp(a, b, sizeof(float) * (size_t)n * V) == 0;
    CHECK(same, "%s: K %s, V %s per layer and KV head: rows with prefill chunks 7, 64, 512 bit-identical to decoding one token "
          "at a time", what, kmix, vmix);
    free(a);
    free(b);
}

static void test_reference(const model *m, pool *p, const char *name) {
    char path[512], err[256];
    gguf_file *g;
    snprintf(path, sizeof path, "%s/stories260K/%s.logits.gguf", fixtures(), name);
    if (gguf_open(path, &g, err, sizeof err)) { CHECK(0, "open %s: %s", path, err); return; }
    const gguf_tensor *tt = gguf_tensor_find(g, "tokens"), *tl = gguf_tensor_find(g, "logits");
    CHECK(tt && tl, "%s: reference has tokens and logits", name);
    if (!tt || !tl) { gguf_close(g); return; }
    int n = (int)tt->ne[0], V = m->n_vocab;
    const int32_t *tok = tt->data;
    const float *ref = tl->data;
    float *out = malloc(sizeof(float) * (size_t)n * V);
    CHECK(run_chunks(m, p, KV_F32, KV_F32, tok, n, 512, out) == 0, "%s: forward of %d tokens", name, n);
    double maxd = 0;
    int same = 0;
    for (int i = 0; i < n; i++) {
        int a = 0, b = 0;
        for (int v = 0; v < V; v++) {
            double d = fabs((double)out[(size_t)i * V + v] - ref[(size_t)i * V + v]);
            if (d > maxd) maxd = d;
            if (out[(size_t)i * V + v] > out[(size_t)i * V + a]) a = v;
            if (ref[(size_t)i * V + v] > ref[(size_t)i * V + b]) b = v;
        }
        same += a == b;
    }
    printf("# %s: %d positions, max |dlogit| = %.3g, argmax equal at %d\n", name, n, maxd, same);
    CHECK(maxd <= 1e-3, "%s: max |dlogit| %.3g <= 1e-3 vs llama.cpp (f32 KV)", name, maxd);
    CHECK(same == n, "%s: same argmax at all %d positions (%d)", name, n, same);
    free(out);
    gguf_close(g);
}

static void test_invariance(const model *m, pool *p, const int32_t *tok, int n) {
    int V = m->n_vocab;
    float *a = malloc(sizeof(float) * (size_t)n * V), *b = malloc(sizeof(float) * (size_t)n * V);
    static const int chunks[] = { 7, 64, 512 };
    /* every format, and KIVI ones whose groups close inside the 113 tokens (hd 8: G <= 32) */
    static const char *const kivi8[] = { "kivi4-g8-r16", "kivi2-g16-r8", "kivi4-g32-r0", "kivi2-g8-r0" };
    kv_fmt fmts[4 * KV_NFMT + 4];
    int nf = all_formats(fmts);
    for (int i = 0; i < 4; i++) fmts[nf++] = by_name(kivi8[i]);
    for (int i = 0; i < nf; i++) {
        kv_fmt f = fmts[i];
        char err[160], nm[40];
        kv_fmt_format(f, nm, sizeof nm);
        if (kv_fmt_check(f, m->hd, err, sizeof err)) {
            CHECK(!kv_fmt_is_kivi(f), "%s fits head dim %d (%s)", nm, m->hd, err);
            printf("# %s: not for head dim %d here (%s)\n", nm, m->hd, err);
            continue;
        }
        if (run_chunks(m, p, f, f, tok, n, 1, a)) { CHECK(0, "%s: chunk 1 ran", nm); continue; }
        for (int k = 0; k < 3; k++) {
            run_chunks(m, p, f, f, tok, n, chunks[k], b);
            CHECK(memcmp(a, b, sizeof(float) * (size_t)n * V) == 0,
                  "kv %s: rows with prefill chunk %d bit-identical to chunk 1 (decode)", nm, chunks[k]);
        }
    }
    free(a);
    free(b);
}

/* Tiled attention vs the one-query reference, on random data, every format, with a window, with
 * and without attention sinks (one of them above every score, so it holds the max). */
static void test_attention(pool *p) {
    int hd = 64, n_kv = 2, n_head = 6, T = 37, pos0 = 50;
    static const float sinks[6] = { 0.5f, -1.0f, 2.0f, 40.0f, 0.0f, -3.0f };   /* [n_head] */
    float *k = malloc(sizeof(float) * n_kv * hd), *v = malloc(sizeof(float) * n_kv * hd);
    float *q = malloc(sizeof(float) * T * n_head * hd);
    float *o1 = malloc(sizeof(float) * T * n_head * hd), *o2 = malloc(sizeof(float) * T * n_head * hd);
    srand(7);
    for (int i = 0; i < T * n_head * hd; i++) q[i] = (float)rand() / RAND_MAX * 2 - 1;
    kv_fmt fmts[4 * KV_NFMT + N_KIVI];
    int nf = all_formats(fmts);
    for (int i = 0; i < N_KIVI; i++) fmts[nf++] = by_name(kivi_names[i]);
    for (int fi = 0; fi < nf; fi++)
        for (int window = 0; window <= 20; window += 20) {
            kv_fmt f = fmts[fi];
            cache c;
            char err[160], nm[40];
            kv_fmt_format(f, nm, sizeof nm);
            if (cache_create(&c, f, f, 1, n_kv, hd, pos0 + T, err, sizeof err)) { CHECK(!kv_fmt_is_kivi(f), "%s: %s", nm, err); continue; }
            for (int pos = 0; pos < pos0 + T; pos++) {
                for (int i = 0; i < n_kv * hd; i++) { k[i] = (float)rand() / RAND_MAX * 4 - 2; v[i] = (float)rand() / RAND_MAX * 2 - 1; }
                cache_store(&c, 0, pos, k, v);
            }
            for (int sk = 0; sk < 2; sk++) {
                attn_args a = { 0, T, pos0, n_head, window, 0.125f, q, o1, sk ? sinks : NULL };
                attn_run(p, &c, &a);
                a.out = o2;
                attn_run_ref(&c, &a);
                CHECK(memcmp(o1, o2, sizeof(float) * T * n_head * hd) == 0,
                      "attention kv %s window %d%s: tiled == reference bit for bit", nm, window, sk ? " sinks" : "");
            }
            cache_free(&c);
        }
    free(k); free(v); free(q); free(o1); free(o2);
}

/* Decode over ATTN_SPLIT_MIN_KEYS keys or more takes the split path (keys, then columns, across
 * threads): bit-identical to the reference for every format, with and without a window, for
 * SmolLM2's shape (3 KV heads of 3 queries, hd 64) and a Gemma-like one (1 KV head of 4, hd 256);
 * and equal to the same position's row of a prefill chunk (the tiled path). */
static void test_attention_split(pool *p) {
    static const int shapes[2][3] = { { 64, 3, 9 }, { 256, 1, 4 } };   /* hd, n_kv, n_head */
    static const float sinks[9] = { 0.5f, -1.0f, 2.0f, 40.0f, 0.0f, -3.0f, 1.0f, 5.0f, -0.5f };   /* [n_head] */
    int ctx = ATTN_SPLIT_MIN_KEYS + 77, T = 5;
    for (int si = 0; si < 2; si++) {
        int hd = shapes[si][0], n_kv = shapes[si][1], n_head = shapes[si][2];
        float *k = malloc(sizeof(float) * (size_t)n_kv * hd), *v = malloc(sizeof(float) * (size_t)n_kv * hd);
        float *q = malloc(sizeof(float) * (size_t)T * n_head * hd);
        float *o1 = malloc(sizeof(float) * (size_t)n_head * hd), *o2 = malloc(sizeof(float) * (size_t)n_head * hd);
        float *ot = malloc(sizeof(float) * (size_t)T * n_head * hd);
        srand(17 + hd);
        for (int i = 0; i < T * n_head * hd; i++) q[i] = (float)rand() / RAND_MAX * 2 - 1;
        kv_fmt fmts[KV_NFMT + 12 + N_KIVI];
        int nf = some_formats(fmts);
        for (int i = 0; i < N_KIVI; i += 2) fmts[nf++] = by_name(kivi_names[i]);   /* two of them here */
        for (int fi = 0; fi < nf; fi++) {
            kv_fmt f = fmts[fi];
            cache c;
            char err[160], nm[40];
            kv_fmt_format(f, nm, sizeof nm);
            if (cache_create(&c, f, f, 1, n_kv, hd, ctx, err, sizeof err)) { CHECK(!kv_fmt_is_kivi(f), "%s: %s", nm, err); continue; }
            for (int pos = 0; pos < ctx; pos++) {
                for (int i = 0; i < n_kv * hd; i++) { k[i] = (float)rand() / RAND_MAX * 4 - 2; v[i] = (float)rand() / RAND_MAX * 2 - 1; }
                cache_store(&c, 0, pos, k, v);
            }
            int same_ref = 1, same_tiled = 1;
            for (int window = 0; window <= ATTN_SPLIT_MIN_KEYS + 40; window += ATTN_SPLIT_MIN_KEYS + 40)
                for (int sk = 0; sk < 2; sk++) {
                    const float *ql = q + (size_t)(T - 1) * n_head * hd;   /* the last query of the chunk */
                    attn_args a = { 0, 1, ctx - 1, n_head, window, 0.125f, ql, o1, sk ? sinks : NULL };
                    attn_run(p, &c, &a);
                    a.out = o2;
                    attn_run_ref(&c, &a);
                    same_ref &= memcmp(o1, o2, sizeof(float) * (size_t)n_head * hd) == 0;
                    attn_args b = { 0, T, ctx - T, n_head, window, 0.125f, q, ot, sk ? sinks : NULL };
                    attn_run(p, &c, &b);
                    same_tiled &= memcmp(o1, ot + (size_t)(T - 1) * n_head * hd, sizeof(float) * (size_t)n_head * hd) == 0;
                }
            CHECK(same_ref && same_tiled, "split decode attention kv %s, hd %d, %d/%d heads, %d keys, window 0 and %d, "
                  "with and without sinks: == reference and == the prefill row, bit for bit", nm, hd, n_head, n_kv, ctx,
                  ATTN_SPLIT_MIN_KEYS + 40);
            cache_free(&c);
        }
        free(k); free(v); free(q); free(o1); free(o2); free(ot);
    }
}

/* Attention of every KV format against an exact float64 attention over the unquantised K/V, on
 * random data (q, k ~ U(-1,1) scaled like a real head, v ~ U(-1,1)), hd 64 and 256. Bounds on
 * max |out - out64|, stated per format: the storage error of one value (f32: none; bf16: 2^-9
 * relative; f16: 2^-12; fp8 e4m3: 2^-4; int8: max|x|/254 per group; q8_0: the same per block of 32;
 * q4_0: max|x|/16; q4_1: (max - min)/30; q5_0: max|x|/32; q5_1: (max - min)/62; iq4_nl: about
 * max|x|/20 (half the widest grid gap, 24/127 of the scale); e5m2 / e5m2s: 2^-3 relative;
 * e4m3s: 2^-4 relative; nvfp4: up to amax/6 per block of 16 (half a step of 2 at scale amax/6);
 * mxfp4: up to amax/4 per block of 32) moves each score by at most |q|_1 times it and the output by
 * the same order; each bound is about 3x the worst error seen over these cases (hd 64 / 256 where
 * they differ: f32: 2.5e-7, f16: 1.1e-4, bf16: 9.4e-4, int8: 2.3e-3, q8_0: 2.4e-3, fp8: 1.1e-2,
 * q4_0: 3.0e-2, q4_0r: 5.0e-2, q4_1: 2.7e-2 / 4.4e-2, q5_0: 2.4e-2, q5_1: 1.7e-2,
 * iq4_nl: 2.6e-2 / 2.8e-2, e5m2: 2.6e-2, e4m3s: 1.4e-2, e5m2s: 2.8e-2, nvfp4: 5.4e-2,
 * mxfp4: 6.2e-2 / 9.8e-2), so the ordering of the formats is checked too. */
#define TQ3_BOUND 0.3
#define TQ4_BOUND 0.2
#define KIVI4_BOUND 0.1
#define KIVI2_BOUND 0.5
static void test_attention_f64(pool *p) {
    static const double bound[KV_NFMT] = {
        [KV_F32] = 2e-6, [KV_BF16] = 3e-3, [KV_F16] = 5e-4, [KV_INT8] = 8e-3,
        [KV_Q8_0] = 8e-3, [KV_Q4_0] = 0.1, [KV_Q4_0R] = 0.15, [KV_FP8] = 0.04,
        [KV_Q4_1] = 0.15, [KV_Q5_0] = 0.08, [KV_Q5_1] = 0.05, [KV_IQ4_NL] = 0.1, [KV_E5M2] = 0.08,
        [KV_E4M3S] = 0.04, [KV_E5M2S] = 0.08, [KV_NVFP4] = 0.15, [KV_MXFP4] = 0.3,
        [KV_TQ3] = TQ3_BOUND, [KV_TQ4] = TQ4_BOUND,
    };
    static const int hds[2] = { 64, 256 };
    for (int hi = 0; hi < 2; hi++) {
        int hd = hds[hi], n_kv = 1, n_head = 2, T = 8, ctx = 300, pos0 = ctx - T;
        float *k = malloc(sizeof(float) * (size_t)ctx * hd), *v = malloc(sizeof(float) * (size_t)ctx * hd);
        float *q = malloc(sizeof(float) * (size_t)T * n_head * hd), *o = malloc(sizeof(float) * (size_t)T * n_head * hd);
        double *s = malloc(sizeof(double) * ctx);
        srand(11 + hd);
        float qs = 1.0f / sqrtf((float)hd);
        for (int i = 0; i < ctx * hd; i++) { k[i] = (float)rand() / RAND_MAX * 2 - 1; v[i] = (float)rand() / RAND_MAX * 2 - 1; }
        for (int i = 0; i < T * n_head * hd; i++) q[i] = ((float)rand() / RAND_MAX * 2 - 1) * 4.0f;
        kv_fmt fmts[KV_NFMT + 12 + 2];
        int nf = some_formats(fmts);
        fmts[nf++] = by_name("kivi4-g32-r0");   /* every key quantised but the last group's */
        fmts[nf++] = by_name("kivi2-g32-r0");
        for (int fi = 0; fi < nf; fi++) {
            kv_fmt f = fmts[fi];
            /* a rotated format: its base's bound x 1.5 (the rotation mixes the values of a block, so
             * an error spreads; q4_0r's bound is already its own); KIVI: about 3x the worst seen */
            double bnd = kv_fmt_is_kivi(f) ? (kivi_bits(f) == 4 ? KIVI4_BOUND : KIVI2_BOUND)
                       : kv_fmt_rotation(f) && f != KV_Q4_0R && f != KV_TQ3 && f != KV_TQ4 ? 1.5 * bound[kv_fmt_base(f)]
                       : bound[f];
            cache c;
            char err[160];
            if (cache_create(&c, f, f, 1, n_kv, hd, ctx, err, sizeof err)) continue;
            for (int pos = 0; pos < ctx; pos++) cache_store(&c, 0, pos, k + (size_t)pos * hd, v + (size_t)pos * hd);
            attn_args a = { 0, T, pos0, n_head, 0, qs, q, o, NULL };
            attn_run(p, &c, &a);
            double worst = 0;
            for (int t = 0; t < T; t++)
                for (int h = 0; h < n_head; h++) {
                    const float *qv = q + ((size_t)t * n_head + h) * hd;
                    int n = pos0 + t + 1;
                    double m = -INFINITY, sum = 0;
                    for (int j = 0; j < n; j++) {
                        double d = 0;
                        for (int x = 0; x < hd; x++) d += (double)qv[x] * k[(size_t)j * hd + x];
                        s[j] = d * qs;
                        if (s[j] > m) m = s[j];
                    }
                    for (int j = 0; j < n; j++) { s[j] = exp(s[j] - m); sum += s[j]; }
                    for (int x = 0; x < hd; x++) {
                        double acc = 0;
                        for (int j = 0; j < n; j++) acc += s[j] * v[(size_t)j * hd + x];
                        double e = fabs(acc / sum - o[((size_t)t * n_head + h) * hd + x]);
                        if (e > worst) worst = e;
                    }
                }
            char nm[40];
            kv_fmt_format(f, nm, sizeof nm);
            printf("# attention kv %-12s hd %3d: max |out - float64| = %.3g (bound %.3g)\n", nm, hd, worst, bnd);
            CHECK(worst <= bnd, "attention kv %s hd %d within %.3g of float64 (%.3g)", nm, hd, bnd, worst);
            cache_free(&c);
        }
        free(k); free(v); free(q); free(o); free(s);
    }
}

/* Attention with sinks against float64 on an f32 cache (one head's sink far below its scores, one
 * near them, one far above, one with a sliding window): within 2e-6, and the sinks matter (the
 * output without them differs by more than 1e-3 where a sink is near or above the scores). */
static void test_attention_sinks_f64(pool *p) {
    enum { HD = 64, NH = 4, T = 6, CTX = 200 };
    static const float sinks[NH] = { -30.0f, 0.5f, 6.0f, 1.0f };
    float *k = malloc(sizeof(float) * CTX * HD), *v = malloc(sizeof(float) * CTX * HD);   /* [CTX][HD] */
    float *q = malloc(sizeof(float) * T * NH * HD), *o = malloc(sizeof(float) * T * NH * HD);   /* [T][NH][HD] */
    float *o0 = malloc(sizeof(float) * T * NH * HD);
    double s[CTX];
    cache c;
    char err[160];
    srand(23);
    for (int i = 0; i < CTX * HD; i++) { k[i] = (float)rand() / RAND_MAX * 2 - 1; v[i] = (float)rand() / RAND_MAX * 2 - 1; }
    for (int i = 0; i < T * NH * HD; i++) q[i] = ((float)rand() / RAND_MAX * 2 - 1) * 4.0f;
    if (!k || !v || !q || !o || !o0 || cache_create(&c, KV_F32, KV_F32, 1, 1, HD, CTX, err, sizeof err)) {
        CHECK(0, "sinks test setup");
        goto done;
    }
    for (int pos = 0; pos < CTX; pos++) cache_store(&c, 0, pos, k + (size_t)pos * HD, v + (size_t)pos * HD);
    double worst = 0, moved[NH] = { 0 };
    for (int window = 0; window <= 24; window += 24) {
        attn_args a = { 0, T, CTX - T, NH, window, 0.125f, q, o, sinks };
        attn_run(p, &c, &a);
        a.out = o0;
        a.sinks = NULL;
        attn_run(p, &c, &a);
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++) {
                const float *qv = q + ((size_t)t * NH + h) * HD;
                int pos = CTX - T + t, lo = window && pos - window + 1 > 0 ? pos - window + 1 : 0;
                double m = sinks[h], sum = 0;
                for (int j = lo; j <= pos; j++) {
                    double d = 0;
                    for (int x = 0; x < HD; x++) d += (double)qv[x] * k[(size_t)j * HD + x];
                    s[j] = d * 0.125;
                    if (s[j] > m) m = s[j];
                }
                for (int j = lo; j <= pos; j++) { s[j] = exp(s[j] - m); sum += s[j]; }
                sum += exp(sinks[h] - m);
                for (int x = 0; x < HD; x++) {
                    double acc = 0;
                    for (int j = lo; j <= pos; j++) acc += s[j] * v[(size_t)j * HD + x];
                    size_t at = ((size_t)t * NH + h) * HD + x;
                    worst = fmax(worst, fabs(acc / sum - o[at]));
                    moved[h] = fmax(moved[h], fabs((double)o[at] - o0[at]));
                }
            }
    }
    printf("# attention with sinks: max |out - float64| = %.3g; moved by the sinks %.3g %.3g %.3g %.3g\n", worst,
           moved[0], moved[1], moved[2], moved[3]);
    CHECK(worst <= 2e-6, "attention with sinks (f32 cache, window 0 and 24) within 2e-6 of float64 (%.3g)", worst);
    CHECK(moved[1] > 1e-3 && moved[2] > 1e-3 && moved[3] > 1e-3, "the sinks near and above the scores change the output");
    cache_free(&c);
done:
    free(k); free(v); free(q); free(o); free(o0);
}

/* A cache with different formats per layer and KV head (rotated ones among them): each layer's
 * attention (tiled, split decode and the reference) gives, for the query heads of KV head g, the
 * same bits as a cache with that cell's formats everywhere, given the same stored vectors; and its
 * bytes per token are the sum of the cells'. */
static void test_attention_mixed(pool *p) {
    enum { NL = 3, NKV = 2, NC = NL * NKV };
    static const kv_fmt fk[NC] = { KV_Q4_1, KV_NVFP4 | KV_ROT_B, KV_F16, KV_INT8 | KV_ROT_H, KV_Q4_0R, KV_E5M2 };
    static const kv_fmt fv[NC] = { KV_MXFP4, KV_F32, KV_E4M3S | KV_ROT_H, KV_Q8_0 | KV_ROT_B, KV_F16, KV_IQ4_NL };
    int hd = 64, n_head = 6, group = n_head / NKV, ctx = ATTN_SPLIT_MIN_KEYS + 20, T = 9;
    float *k = malloc(sizeof(float) * (size_t)NKV * hd), *v = malloc(sizeof(float) * (size_t)NKV * hd);
    float *q = malloc(sizeof(float) * (size_t)T * n_head * hd);
    float *o1 = malloc(sizeof(float) * (size_t)T * n_head * hd), *o2 = malloc(sizeof(float) * (size_t)T * n_head * hd);
    cache mixed, uni[NC];
    char err[160];
    int ok = cache_create_heads(&mixed, fk, fv, NL, NKV, hd, ctx, err, sizeof err) == 0;
    for (int c = 0; c < NC; c++) ok &= cache_create(&uni[c], fk[c], fv[c], NL, NKV, hd, ctx, err, sizeof err) == 0;
    CHECK(ok, "mixed cache and its uniform twins created (%s)", ok ? "" : err);
    if (!ok) goto done;
    srand(23);
    for (int i = 0; i < T * n_head * hd; i++) q[i] = (float)rand() / RAND_MAX * 2 - 1;
    for (int l = 0; l < NL; l++)
        for (int pos = 0; pos < ctx; pos++) {
            for (int i = 0; i < NKV * hd; i++) { k[i] = (float)rand() / RAND_MAX * 4 - 2; v[i] = (float)rand() / RAND_MAX * 2 - 1; }
            cache_store(&mixed, l, pos, k, v);
            for (int c = 0; c < NC; c++) cache_store(&uni[c], l, pos, k, v);
        }
    int same = 1, same_ref = 1, same_split = 1;
    size_t gw = (size_t)group * hd;   /* floats of one KV head's query heads in one row */
    for (int l = 0; l < NL; l++) {
        attn_args a = { l, T, 100, n_head, l == 1 ? 40 : 0, 0.125f, q, o1, NULL };   /* layer 1 with a window */
        attn_run(p, &mixed, &a);
        a.out = o2;
        attn_run_ref(&mixed, &a);
        same_ref &= memcmp(o1, o2, sizeof(float) * (size_t)T * n_head * hd) == 0;
        for (int g = 0; g < NKV; g++) {
            attn_run(p, &uni[l * NKV + g], &a);
            for (int t = 0; t < T; t++)
                same &= memcmp(o1 + ((size_t)t * n_head + g * group) * hd, o2 + ((size_t)t * n_head + g * group) * hd,
                               sizeof(float) * gw) == 0;
        }
        attn_args d = { l, 1, ctx - 1, n_head, 0, 0.125f, q, o1, NULL };   /* decode over > ATTN_SPLIT_MIN_KEYS keys */
        attn_run(p, &mixed, &d);
        d.out = o2;
        for (int g = 0; g < NKV; g++) {
            attn_run(p, &uni[l * NKV + g], &d);
            same_split &= memcmp(o1 + (size_t)g * gw, o2 + (size_t)g * gw, sizeof(float) * gw) == 0;
        }
    }
    CHECK(same, "cache mixed per layer and KV head (K q4_1 nvfp4+rot f16 int8+roth q4_0r e5m2, V mxfp4 f32 "
          "e4m3s+roth q8_0+rot f16 iq4_nl): each head's tiled attention == the uniform cache's");
    CHECK(same_ref, "mixed cache: each layer's reference attention == the tiled one");
    CHECK(same_split, "mixed cache: each head's split decode (%d keys) == the uniform cache's", ctx);
    size_t want = 0;
    for (int c = 0; c < NC; c++) want += kv_row_bytes(fk[c], hd) + kv_row_bytes(fv[c], hd);
    CHECK(cache_bytes_per_token(&mixed) == want && want == (40 + 36 + 128 + 66 + 36 + 64) + (34 + 256 + 68 + 68 + 128 + 36),
          "mixed cache: bytes per token = sum over the cells = (40 + 36 + 128 + 66 + 36 + 64) + (34 + 256 + 68 + 68 + "
          "128 + 36) (%zu)", cache_bytes_per_token(&mixed));
done:
    cache_free(&mixed);
    for (int c = 0; c < NC; c++) cache_free(&uni[c]);
    free(k); free(v); free(q); free(o1); free(o2);
}

/* KV bytes per token (the handshake's kv_bytes_per_token) for SmolLM2's shape (30 layers, 3 KV heads,
 * hd 64), every format for K and V, and K and V in different formats. Per row of 64 values, from the
 * layouts: f32 256; bf16 / f16 128; int8 64 + 2; q8_0 2 x 34; q4_0 / q4_0r 2 x 18; fp8 64; q4_1 2 x 20;
 * q5_0 2 x 22; q5_1 2 x 24; iq4_nl 2 x 18; e5m2 64; e4m3s / e5m2s 64 + 4; nvfp4 4 x 9; mxfp4 2 x 17. */
static void test_cache_bytes(void) {
    static const size_t row64[KV_NFMT] = {256, 128, 128, 66, 68, 36, 36, 64, 40, 44, 48, 36, 64, 68, 68, 36, 34, 28, 36};
    int ok = 1;
    for (int fk = 0; fk < KV_NFMT; fk++)
        for (int fv = 0; fv < KV_NFMT; fv++) {
            cache c;
            char err[128];
            if (cache_create(&c, (kv_fmt)fk, (kv_fmt)fv, 30, 3, 64, 16, err, sizeof err)) { ok = 0; continue; }
            if (cache_bytes_per_token(&c) != 30 * 3 * (row64[fk] + row64[fv])) {
                printf("  K %s V %s: %zu bytes per token\n", kv_fmt_name((kv_fmt)fk), kv_fmt_name((kv_fmt)fv), cache_bytes_per_token(&c));
                ok = 0;
            }
            cache_free(&c);
        }
    CHECK(ok, "cache_bytes_per_token = 30 layers x 3 heads x (K row + V row) for all %d x %d format pairs, hd 64", KV_NFMT, KV_NFMT);
    /* a rotated format takes its base's bytes */
    kv_fmt fmts[4 * KV_NFMT];
    int nf = all_formats(fmts), nr = 0;
    ok = 1;
    for (int i = 0; i < nf; i++) {
        cache c;
        char err[160];
        if (!kv_fmt_rotation(fmts[i]) || fmts[i] == KV_Q4_0R || fmts[i] == KV_TQ3 || fmts[i] == KV_TQ4) continue;
        nr++;
        if (cache_create(&c, fmts[i], KV_F16, 30, 3, 64, 16, err, sizeof err)) { ok = 0; continue; }
        ok &= cache_bytes_per_token(&c) == 30 * 3 * (row64[kv_fmt_base(fmts[i])] + 128);
        cache_free(&c);
    }
    CHECK(ok && nr == 3 * (KV_NFMT - 3), "cache_bytes_per_token of the %d rotated formats (K) with f16 V = their "
          "base's, hd 64", nr);
}

/* Greedy decoding from a prefix follows llama.cpp's argmax chain: the first generated token is the
 * argmax of the reference row at the prefix's end, and each later one is the argmax of the reference
 * row at the same position for as long as the generated stream equals the text (beyond that the
 * reference has no row for our stream); from a prefix where the text itself follows the chain, the
 * whole continuation must equal the text. */
static void test_greedy_chain(const char *name) {
    char path[512], mpath[512], err[512], warn[256];
    gguf_file *g;
    engine *e = NULL;
    snprintf(path, sizeof path, "%s/stories260K/%s.logits.gguf", fixtures(), name);
    snprintf(mpath, sizeof mpath, "%s/models/stories260K.gguf", fixtures());
    if (gguf_open(path, &g, err, sizeof err)) { CHECK(0, "open %s", path); return; }
    const gguf_tensor *tt = gguf_tensor_find(g, "tokens"), *tl = gguf_tensor_find(g, "logits");
    engine_config cfg = { mpath, KV_F32, KV_F32, 2, 64, 0, 0, 0, NULL, 0, 0, 0 };
    if (!tt || !tl || engine_create(&cfg, &e, err, sizeof err, warn, sizeof warn)) { CHECK(0, "%s: engine", name); gguf_close(g); return; }
    int n = (int)tt->ne[0], V = e->m->n_vocab;
    const int32_t *tok = tt->data;
    const float *ref = tl->data;
    int best_k = 1, best_run = 0;          /* the prefix after which the text follows the chain longest */
    for (int k = 1; k < n; k++) {
        int run = 0;
        while (k + run < n && engine_argmax(ref + (size_t)(k + run - 1) * V, V, NULL) == tok[k + run]) run++;
        if (run > best_run) { best_run = run; best_k = k; }
    }
    int k = best_k, N = 16;
    int32_t gen[16];
    float gaps[16];
    float *rows = NULL;
    size_t nr;
    int ok = !engine_prefill(e, tok, (size_t)k, ENGINE_ROWS_NONE, &rows, &nr, err, sizeof err) &&
             !engine_generate(e, N, 0.0, 0, gen, gaps, err, sizeof err);
    int follows = ok, checked = 0;
    for (int i = 0; ok && i < N && k + i < n; i++) {
        follows &= gen[i] == engine_argmax(ref + (size_t)(k + i - 1) * V, V, NULL);
        checked++;
        if (gen[i] != tok[k + i]) break;
    }
    int same_text = best_run >= N ? memcmp(gen, tok + k, sizeof gen) == 0 : 1;
    CHECK(ok && follows && checked > 0, "%s: greedy from a %d-token prefix follows llama.cpp's argmax chain (%d steps checked)", name, k, checked);
    CHECK(same_text, "%s: where the text follows the chain for %d tokens, the greedy stream is the text", name, best_run);
    free(rows);
    engine_free(e);
    gguf_close(g);
}

/* Batch invariance on SmolLM2 (when it is in the cache): every KV format, prefill chunks 7, 64 and
 * 512 against token-by-token decoding, bit for bit, on 96 tokens of text. */
static void test_invariance_smollm2(pool *p) {
    char path[512], err[512], warn[256];
    const char *cache = getenv("STRATA_CACHE");
    if (cache) snprintf(path, sizeof path, "%s/smollm2-135m-instruct-q4_1.gguf", cache);
    else snprintf(path, sizeof path, "%s/.cache/strata/smollm2-135m-instruct-q4_1.gguf", getenv("HOME") ? getenv("HOME") : ".");
    model *m;
    if (model_load(path, &m, err, sizeof err, warn, sizeof warn)) { printf("    (skipped SmolLM2 invariance: %s)\n", err); return; }
    int32_t tok[96];
    for (int i = 0; i < 96; i++) tok[i] = (int32_t)((i * 7919 + 13) % m->n_vocab);
    int V = m->n_vocab, n = 96;
    float *a = malloc(sizeof(float) * (size_t)n * V), *b = malloc(sizeof(float) * (size_t)n * V);
    static const int chunks[] = { 7, 64, 512 };
    for (int f = 0; f < KV_NFMT; f++) {
        /* tq3 / tq4 are row formats with the q4_0r rotation: their batch invariance is checked on
         * stories260K and by the attention tests at hd 64 and 256 (the suite's time) */
        if (f == KV_TQ3 || f == KV_TQ4) continue;
        if (run_chunks(m, p, (kv_fmt)f, (kv_fmt)f, tok, n, 1, a)) { CHECK(0, "SmolLM2 %s: chunk 1 ran", kv_fmt_name((kv_fmt)f)); continue; }
        int same = 1;
        for (int c = 0; c < 3; c++) {
            run_chunks(m, p, (kv_fmt)f, (kv_fmt)f, tok, n, chunks[c], b);
            same &= memcmp(a, b, sizeof(float) * (size_t)n * V) == 0;
        }
        CHECK(same, "SmolLM2 kv %s: rows with prefill chunks 7, 64, 512 bit-identical to decoding one token at a time", kv_fmt_name((kv_fmt)f));
    }
    invariance_mix(m, p, "SmolLM2", "q4_1+f16@0+nvfp4@-1", "iq4_nl+mxfp4@3-20+int8@-3", tok, n);
    invariance_mix(m, p, "SmolLM2", "q4_0+rot+f16@h1+q8_0+roth@0:h0", "int8+roth+q4_1+rot@-1:h2", tok, n);
    invariance_mix(m, p, "SmolLM2", "kivi4-g16-r32+f16@0+kivi2-g8-r8@1-29:h1", "kivi2-g32-r16+q8_0@-1", tok, n);
    free(a);
    free(b);
    model_free(m);
}

static void test_kernels(void) {
    float a[203], b[203], y[203];
    srand(3);
    for (int i = 0; i < 203; i++) { a[i] = (float)rand() / RAND_MAX - 0.5f; b[i] = (float)rand() / RAND_MAX * 3; }
    int same = 1;
    for (int n = 0; n <= 203; n++) same &= ops_dot(a, b, n) == ops_dot_ref(a, b, n);
    CHECK(same, "ops_dot == ops_dot_ref for n = 0..203");
    double worst = 0;
    for (int i = 0; i < 2000; i++) {
        float x = -87.0f * i / 2000;
        double rel = fabs(ops_expf(x) - exp(x)) / exp(x);
        if (rel > worst) worst = rel;
    }
    CHECK(worst < 5e-7, "ops_expf relative error %.2g < 5e-7 on [-87, 0]", worst);
    /* arguments down to -108 (below EXP_MIN: exactly 0), every length (16-, 8-wide and scalar tails) */
    for (int i = 0; i < 203; i++) b[i] = (float)rand() / RAND_MAX * 108 - 105;
    int ok = 1, zeros = 0;
    for (int n = 0; n <= 203; n++) {
        float s1 = ops_exp_sub_sum(y, b, 3.0f, n), s2 = 0, acc[8] = {0};
        for (int i = 0; i < n; i++) ok &= y[i] == ops_expf(b[i] - 3.0f);
        int n8 = n / 8 * 8;
        for (int i = 0; i < n8; i++) acc[i % 8] += ops_expf(b[i] - 3.0f);
        s2 = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
        for (int i = n8; i < n; i++) s2 += ops_expf(b[i] - 3.0f);
        ok &= s1 == s2 && ops_sum8(y, n) == s2;
    }
    for (int i = 0; i < 203; i++) zeros += y[i] == 0.0f;
    ok &= zeros > 0;
    CHECK(ok, "ops_exp_sub_sum, n = 0..203, arguments to -108: values == ops_expf (%d flushed to 0), sum in the "
          "canonical order, == ops_sum8", zeros);
}

/* The two RoPE tables (ops.h) against angles and cos / sin in long double, SmolLM2's RoPE (base
 * 100000, 64 rotated dims) at positions to 240,000: the f64 table is within one rounding of the
 * exact values at every position; ops_rope_table is the f64 one by default, the f32 one with
 * cfg.f32_angles. */
static void test_rope_tables(void) {
    static const int pos[] = { 64, 1024, 1664, 8192, 32768, 240000 };
    backend_rope cfg = { 100000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, 8192, 0 };
    enum { N_ROT = 64 };
    float c32[N_ROT], c64[N_ROT], cs[N_ROT], cs32[N_ROT];   /* [N_ROT/2][2] */
    backend_rope cfg32 = cfg;
    cfg32.f32_angles = 1;
    double worst64 = 0;
    int same = 1;
    for (size_t k = 0; k < sizeof pos / sizeof pos[0]; k++) {
        ops_rope_table_f32(c32, pos[k], N_ROT, &cfg);
        ops_rope_table_f64(c64, pos[k], N_ROT, &cfg);
        ops_rope_table(cs, pos[k], N_ROT, &cfg);
        ops_rope_table(cs32, pos[k], N_ROT, &cfg32);
        same &= memcmp(cs, c64, sizeof cs) == 0 && memcmp(cs32, c32, sizeof cs32) == 0;
        double e32 = 0, e64 = 0;
        for (int i = 0; i < N_ROT / 2; i++) {
            long double th = (long double)pos[k] * powl(100000.0L, -2.0L * i / N_ROT);
            long double c = cosl(th), sn = sinl(th);
            e32 = fmax(e32, (double)fmaxl(fabsl(c32[2 * i] - c), fabsl(c32[2 * i + 1] - sn)));
            e64 = fmax(e64, (double)fmaxl(fabsl(c64[2 * i] - c), fabsl(c64[2 * i + 1] - sn)));
        }
        printf("# RoPE table at position %6d: max |cos, sin - exact| f32 angles %.3g, f64 angles %.3g\n", pos[k], e32, e64);
        worst64 = fmax(worst64, e64);
    }
    /* half an f32 ulp of a value in [0.5, 1) is 2.98e-8; the double angle adds ~1e-10 */
    CHECK(worst64 <= 3.1e-8, "RoPE f64 table within half an f32 ulp of exact cos / sin to position 240,000 (%.3g)", worst64);
    CHECK(same, "ops_rope_table is the f64 table by default and the f32 one with f32_angles");
}

/* Runs tok[n] through a fresh cpu backend (f32 KV) in chunks of `chunk`: rows into out [n][V], the
 * experts each token used into used [n][n_layer][k], pinned to pin [n][n_layer][k] when not NULL.
 * Returns 0, or -1 with the message in err. */
static int run_routed(const model *m, pool *p, const int32_t *tok, int n, int chunk, const int32_t *pin,
                      int32_t *used, float *out, char *err, size_t errlen) {
    kv_fmt k[256], v[256];   /* [n_layer][n_kv] each (layer, KV head) cell's formats */
    backend *b = NULL;
    backend_model net;
    int *rows = malloc(sizeof(int) * (size_t)chunk), rc = -1;   /* [chunk] */
    size_t per_tok = (size_t)m->n_layer * m->n_expert_used;   /* routing entries per token */
    for (int c = 0; c < m->n_layer * m->n_kv && c < 256; c++) { k[c] = KV_F32; v[c] = KV_F32; }
    model_net(m, &net);
    backend_config bc = { "cpu", k, v, n + 8, chunk, pool_threads(p), NULL, NULL, NULL, NULL, 0, 0, 0 };
    if (!rows) { snprintf(err, errlen, "out of memory"); goto done; }
    if (backend_create(&net, &bc, &b, err, errlen)) goto done;
    for (int i = 0; i < chunk; i++) rows[i] = i;
    for (int off = 0; off < n; off += chunk) {
        int T = n - off < chunk ? n - off : chunk;
        backend_route(b, pin ? pin + (size_t)off * per_tok : NULL, used + (size_t)off * per_tok);
        if (backend_forward(b, tok + off, T, off, rows, T, out + (size_t)off * m->n_vocab, err, errlen)) goto done;
    }
    rc = 0;
done:
    backend_free(b);
    free(rows);
    return rc;
}

/* A mixture of experts with 8 experts, top 2, in 2 layers (rand-qwen3moe, rand-gptoss, rand-qwen2moe): loading,
 * batch invariance in every KV format, the routing record (the same experts whatever the chunk, k
 * distinct ids per token and layer, every expert used somewhere), pinning (the recorded experts
 * pinned give the same bits; other experts pinned give other logits; an id past the experts is
 * refused), and the quantised-expert twin `twin` (Q8_0, MXFP4; NULL: none) chunk-invariant in two mixes. The
 * bad files the loader refuses are in tests/test_loader.c. */
static void test_moe(pool *p, const char *name, const char *twin) {
    char path[512], err[512], warn[256];
    model *m = NULL;
    gguf_file *g = NULL;
    float *a = NULL, *b = NULL;
    int32_t *ua = NULL, *ub = NULL, *pin = NULL;
    snprintf(path, sizeof path, "%s/models/%s.gguf", fixtures(), name);
    if (model_load(path, &m, err, sizeof err, warn, sizeof warn)) { CHECK(0, "load %s: %s", path, err); return; }
    CHECK(m->n_expert == 8 && m->n_expert_used == 2 && m->ffn == 32 && m->n_layer == 2 &&
          m->layers[0].w_gate.rows == 8 * 32 && m->layers[1].w_down.rows == 8 * 64,
          "%s: 8 experts, 2 used, expert width 32 (expert_feed_forward_length, not feed_forward_length 96), "
          "stacked experts [8*32][64] and [8*64][32]", name);
    if (m->arch == ARCH_GPTOSS) {
        backend_model net;
        model_net(m, &net);
        const backend_layer *l0 = &m->layers[0], *l1 = &m->layers[1];
        CHECK(l0->window == 16 && l0->rope_local && l1->window == 0 && !l1->rope_local && l0->sinks && l1->sinks &&
              l0->bq && l0->bo && l0->b_router && l1->b_gate && l1->b_up && l1->b_down && net.gate == BACKEND_GATE_SOFTMAX_TOPK &&
              net.act == BACKEND_ACT_SWIGLU_OAI && m->rope_global.ext_factor == 1.0f && m->rope_local.freq_scale == 0.25f,
              "%s: layer 0 slides over 16 keys, layer 1 attends to all; sinks, Q/K/V/O, router and expert biases "
              "loaded; top-k-then-softmax gating, clamped SwiGLU; YaRN x4 in both kinds of layer", name);
    }
    if (m->arch == ARCH_QWEN2MOE) {
        backend_model net;
        model_net(m, &net);
        CHECK(net.ffn_sh == 64 && net.gate == BACKEND_GATE_SOFTMAX_PLAIN && m->layers[1].w_sh_inp.rows == 1 &&
              m->layers[1].w_sh_down.rows == 64 && m->layers[1].w_sh_down.cols == 64 && m->layers[0].bq,
              "%s: a shared expert of width 64 (expert_shared_feed_forward_length) with its gate, Q/K/V biases, "
              "softmax gating without renormalisation", name);
    }
    snprintf(path, sizeof path, "%s/logits/%s.prose.gguf", fixtures(), name);
    if (gguf_open(path, &g, err, sizeof err)) { CHECK(0, "open %s: %s", path, err); goto done; }
    const gguf_tensor *tt = gguf_tensor_find(g, "tokens");
    if (!tt) { CHECK(0, "%s has tokens", path); goto done; }
    /* the first 160 tokens: chunks 7 and 64 still split them, every expert is still chosen */
    int n = tt->ne[0] < 160 ? (int)tt->ne[0] : 160, V = m->n_vocab, nl = m->n_layer, k = m->n_expert_used;
    const int32_t *tok = tt->data;
    test_invariance(m, p, tok, n);
    size_t nr = (size_t)n * nl * k;   /* routing entries */
    a = malloc(sizeof(float) * (size_t)n * V);
    b = malloc(sizeof(float) * (size_t)n * V);
    ua = malloc(sizeof(int32_t) * nr);
    ub = malloc(sizeof(int32_t) * nr);
    pin = malloc(sizeof(int32_t) * nr);
    if (!a || !b || !ua || !ub || !pin) { CHECK(0, "out of memory"); goto done; }
    int ok = run_routed(m, p, tok, n, 1, NULL, ua, a, err, sizeof err) == 0;
    CHECK(ok, "%s: decode token by token with the routing recorded (%s)", name, ok ? "" : err);
    static const int chunks[] = { 7, 64, 512 };
    for (int c = 0; ok && c < 3; c++) {
        int same = run_routed(m, p, tok, n, chunks[c], NULL, ub, b, err, sizeof err) == 0 &&
                   memcmp(a, b, sizeof(float) * (size_t)n * V) == 0 && memcmp(ua, ub, sizeof(int32_t) * nr) == 0;
        CHECK(same, "%s: chunk %d gives the rows and the experts of chunk 1, bit for bit", name, chunks[c]);
    }
    int distinct = 1, counts[8] = { 0 };
    for (size_t i = 0; ok && i < nr; i += (size_t)k) {
        distinct &= ua[i] < 8 && ua[i + 1] < 8 && ua[i] != ua[i + 1];
        if (ua[i] < 8) counts[ua[i]]++;
        if (ua[i + 1] < 8) counts[ua[i + 1]]++;
    }
    int all_used = 1;
    for (int e = 0; e < 8; e++) all_used &= counts[e] > 0;
    CHECK(ok && distinct && all_used, "%s: %d tokens x %d layers: 2 distinct expert ids in [0, 8) each, "
          "every expert chosen somewhere", name, n, nl);
    /* pinned to what the router chose: the same bits; pinned to other experts: other logits */
    ok = ok && run_routed(m, p, tok, n, 64, ua, ub, b, err, sizeof err) == 0;
    CHECK(ok && memcmp(a, b, sizeof(float) * (size_t)n * V) == 0 && memcmp(ua, ub, sizeof(int32_t) * nr) == 0,
          "%s: the recorded experts pinned give the same rows bit for bit, and are recorded as used", name);
    for (size_t i = 0; i < nr; i++) pin[i] = (ua[i] + 1) % 8;   /* other experts, still distinct */
    ok = ok && run_routed(m, p, tok, n, 64, pin, ub, b, err, sizeof err) == 0;
    CHECK(ok && memcmp(a, b, sizeof(float) * (size_t)n * V) != 0 && memcmp(pin, ub, sizeof(int32_t) * nr) == 0,
          "%s: other experts pinned are used and give other logits", name);
    pin[(size_t)5 * nl * k + 1] = 8;
    int bad = run_routed(m, p, tok, n, 64, pin, ub, b, err, sizeof err);
    CHECK(bad && strstr(err, "pinned expert id 8 at position 5"), "a pinned id past the experts is refused (%s)", err);
    pin[(size_t)5 * nl * k + 1] = -1;
    bad = run_routed(m, p, tok, n, 64, pin, ub, b, err, sizeof err);
    CHECK(bad && strstr(err, "pinned expert id -1 at position 5"), "a negative pinned id is refused (%s)", err);
    /* the quantised experts (the fused decode kernel at T = 1, dequantised rows otherwise) */
    model_free(m);
    m = NULL;
    if (!twin) goto done;
    snprintf(path, sizeof path, "%s/models/%s.gguf", fixtures(), twin);
    if (model_load(path, &m, err, sizeof err, warn, sizeof warn)) { CHECK(0, "load %s: %s", path, err); goto done; }
    invariance_mix(m, p, twin, "f32", "f32", tok, n);
    invariance_mix(m, p, twin, "q4_0", "int8", tok, n);
done:
    free(a); free(b); free(ua); free(ub); free(pin);
    gguf_close(g);
    model_free(m);
}

/* A backend of m with f32 KV (max_T tokens per forward, a context of 400). NULL on failure (a failed
 * CHECK says why). */
static backend *hybrid_backend(const model *m, pool *p, int max_T) {
    kv_fmt f[MAX_CELLS];
    backend_model net;
    backend *b = NULL;
    char err[256];
    for (int i = 0; i < MAX_CELLS; i++) f[i] = KV_F32;
    model_net(m, &net);
    backend_config bc = { "cpu", f, f, 400, max_T, pool_threads(p), NULL, NULL, NULL, NULL, 0, 0, 0 };
    if (m->n_layer * m->n_kv > MAX_CELLS || backend_create(&net, &bc, &b, err, sizeof err)) CHECK(0, "backend: %s", err);
    return b;
}

/* Forwards tok[from..to) at their positions in chunks of `chunk`, every row into out [to-from][V]
 * (NULL: no rows). Returns 0, or -1 with a printed message. */
static int forward_range(backend *b, const int32_t *tok, int from, int to, int chunk, float *out, int V) {
    int rows[512];
    char err[256];
    for (int i = 0; i < 512; i++) rows[i] = i;
    for (int s = from; s < to; s += chunk) {
        int T = to - s < chunk ? to - s : chunk;
        if (backend_forward(b, tok + s, T, s, rows, out ? T : 0, out ? out + (size_t)(s - from) * V : NULL, err, sizeof err)) {
            printf("# forward at %d: %s\n", s, err);
            return -1;
        }
    }
    return 0;
}

/* The hybrid models (rand-qwen35, rand-qwen35moe: linear-attention layers 0 and 2, attention
 * layers 1 and 3): the layers the loader marks, batch invariance (rand-qwen35 in every KV format;
 * both with per-layer mixes), and truncation: after a generation or a deeper prefill,
 * truncate(d) then the same tokens again give the rows of one fresh prefill bit for bit, at
 * chunk ends, between them, below every snapshot, when the snapshots have been evicted, and for
 * a forward that starts below the depth reached. */
static void test_hybrid(pool *p, const char *name) {
    char path[512], err[512], warn[256];
    model *m = NULL;
    backend *b = NULL;
    float *ref = NULL, *got = NULL, *row = NULL;
    enum { N = 160 };
    int32_t tok[N + 40];
    int moe = strstr(name, "moe") != NULL;
    snprintf(path, sizeof path, "%s/models/%s.gguf", fixtures(), name);
    if (model_load(path, &m, err, sizeof err, warn, sizeof warn)) { CHECK(0, "load %s: %s", path, err); return; }
    CHECK(m->arch == (moe ? ARCH_QWEN35MOE : ARCH_QWEN35) && m->n_layer == 4 && m->n_attn == 2 && m->layers[0].recurrent &&
          !m->layers[1].recurrent && m->layers[2].recurrent && !m->layers[3].recurrent && m->ssm_conv == 4 && m->ssm_nk == 2 &&
          m->ssm_nv == 4 && m->ssm_d == 16 && m->n_rot == 8 && m->hd == 32 && m->attn_gate && m->layers[1].wq.rows == 2 * 4 * 32 &&
          m->layers[0].w_qkv.rows == 128 && m->layers[2].w_ssm_out.cols == 64,
          "%s: layers 0, 2 linear (full_attention_interval 2), 1, 3 attention with gated wq [256][64], conv 4, "
          "2 key / 4 value heads of 16 (attn_qkv [128][64]), partial RoPE 8 of 32", name);
    if (moe)
        CHECK(m->n_expert == 6 && m->n_expert_used == 2 && m->ffn == 16 && m->ffn_sh == 32 &&
              m->layers[0].w_sh_down.rows == 64 && m->layers[3].w_sh_inp.rows == 1,
              "%s: 6 experts of 16, top 2, a shared expert of 32 with its gate in every layer", name);
    uint32_t r = 12345;   /* tokens: a fixed LCG over the vocabulary */
    for (int i = 0; i < N + 40; i++) { r = r * 1664525u + 1013904223u; tok[i] = (int32_t)((r >> 8) % (uint32_t)m->n_vocab); }
    if (!moe) test_invariance(m, p, tok, 100);
    invariance_mix(m, p, name, "q4_0+f16@1", "int8+f32@-1", tok, 100);   /* layer 0 (linear) ignored */
    if (moe) invariance_mix(m, p, name, "f32", "f32", tok, 100);
    int V = m->n_vocab;
    ref = malloc(sizeof(float) * (size_t)N * V);
    got = malloc(sizeof(float) * (size_t)N * V);
    row = malloc(sizeof(float) * (size_t)V);
    if (!ref || !got || !row) { CHECK(0, "out of memory"); goto done; }
    b = hybrid_backend(m, p, 64);
    int ok = b && forward_range(b, tok, 0, N, 64, ref, V) == 0;
    backend_free(b);
    CHECK(ok, "%s: a fresh prefill of %d tokens in chunks of 64", name, N);
    /* prefill 100, generate 20 greedily, truncate to 100, prefill on to 160 */
    b = hybrid_backend(m, p, 64);
    ok = ok && b && forward_range(b, tok, 0, 100, 64, NULL, V) == 0;
    int32_t gen[21];
    int zero = 0;
    for (int i = 0; ok && i < 20; i++) {
        gen[i] = i == 0 ? tok[100] : gen[i];
        ok = backend_forward(b, &gen[i], 1, 100 + i, &zero, 1, row, err, sizeof err) == 0;
        gen[i + 1] = (int32_t)engine_argmax(row, V, NULL);
    }
    ok = ok && backend_truncate(b, 100, err, sizeof err) == 0 && forward_range(b, tok, 100, N, 64, got, V) == 0;
    CHECK(ok && memcmp(got, ref + (size_t)100 * V, sizeof(float) * (size_t)60 * V) == 0,
          "%s: prefill 100, generate 20, truncate to 100, prefill to 160: rows 100..159 of a fresh prefill, bit for bit", name);
    /* truncate to depths between snapshots and below the first one */
    static const int depths[] = { 77, 130, 30, 1, 0 };
    for (int i = 0; ok && i < 5; i++) {
        int d = depths[i];
        ok = backend_truncate(b, d, err, sizeof err) == 0 && forward_range(b, tok, d, N, 7, got, V) == 0;
        CHECK(ok && memcmp(got, ref + (size_t)d * V, sizeof(float) * (size_t)(N - d) * V) == 0,
              "%s: truncate 160 -> %d, then chunks of 7 to 160: the fresh rows bit for bit", name, d);
    }
    /* a forward below the depth reached, without a truncate first */
    ok = ok && forward_range(b, tok, 50, 60, 64, got, V) == 0;
    CHECK(ok && memcmp(got, ref + (size_t)50 * V, sizeof(float) * 10 * V) == 0,
          "%s: a forward at position 50 with 160 reached: the fresh rows 50..59 bit for bit", name);
    backend_free(b);
    /* 80 snapshots (chunks of 2) for 64 slots: the oldest are evicted; truncate below them */
    b = hybrid_backend(m, p, 2);
    ok = ok && b && forward_range(b, tok, 0, N, 2, NULL, V) == 0 && backend_truncate(b, 3, err, sizeof err) == 0 &&
         forward_range(b, tok, 3, N, 2, got, V) == 0;
    CHECK(ok && memcmp(got, ref + (size_t)3 * V, sizeof(float) * (size_t)(N - 3) * V) == 0,
          "%s: 80 prefill chunks (snapshots evicted), truncate to 3: the fresh rows bit for bit", name);
    ok = ok && backend_truncate(b, 41, err, sizeof err) == 0 && forward_range(b, tok, 41, N, 2, got, V) == 0;
    CHECK(ok && memcmp(got, ref + (size_t)41 * V, sizeof(float) * (size_t)(N - 41) * V) == 0,
          "%s: then truncate to 41 (its snapshot evicted earlier): the fresh rows bit for bit", name);
    CHECK(backend_kv_bytes_per_token(b) == 2ull * 2 * 2 * 32 * 4,
          "%s: KV bytes per token count the 2 attention layers only (2 x K+V x 2 heads x 32 x f32)", name);
    if (moe && ok) {   /* pinned experts: a truncation's re-run uses the experts the positions had */
        int nl = m->n_layer, k = m->n_expert_used, rows[64];
        size_t per = (size_t)nl * k;
        int32_t *used = malloc(sizeof(int32_t) * N * per), *pin = malloc(sizeof(int32_t) * N * per);
        backend_free(b);
        b = hybrid_backend(m, p, 64);
        for (int i = 0; i < 64; i++) rows[i] = i;
        ok = used && pin && b;
        for (int s0 = 0; ok && s0 < 100; s0 += 50) {   /* free routing recorded */
            backend_route(b, NULL, used + (size_t)s0 * per);
            ok = backend_forward(b, tok + s0, 50, s0, rows, 0, NULL, err, sizeof err) == 0;
        }
        for (size_t i = 0; ok && i < (size_t)100 * per; i++) pin[i] = (used[i] + 1) % m->n_expert;   /* other experts */
        ok = ok && backend_truncate(b, 0, err, sizeof err) == 0;
        for (int s0 = 0; ok && s0 < 100; s0 += 50) {
            backend_route(b, pin + (size_t)s0 * per, NULL);
            ok = backend_forward(b, tok + s0, 50, s0, rows, 50, ref + (size_t)s0 * V, err, sizeof err) == 0;
        }
        ok = ok && backend_truncate(b, 77, err, sizeof err) == 0;   /* snapshots at 50, 100: re-runs 50..76 */
        backend_route(b, pin + (size_t)77 * per, NULL);
        ok = ok && backend_forward(b, tok + 77, 23, 77, rows, 23, got, err, sizeof err) == 0;
        CHECK(ok && memcmp(got, ref + (size_t)77 * V, sizeof(float) * 23 * V) == 0,
              "%s: pinned to other experts, truncate to 77 (re-run from 50), pinned again: rows 77..99 bit for bit", name);
        free(used);
        free(pin);
    }
done:
    backend_free(b);
    free(ref); free(got); free(row);
    model_free(m);
}

int main(int argc, char **argv) {
    char path[512], err[512], warn[256];
    model *m;
    pool *p;
    if (argc > 1 && !strcmp(argv[1], "qwen35")) {   /* only the hybrid model's tests */
        if (pool_create(2, &p)) return 1;
        test_hybrid(p, "rand-qwen35");
        test_hybrid(p, "rand-qwen35moe");
        pool_free(p);
        return check_done();
    }
    test_kernels();
    test_rope_tables();
    if (pool_create(2, &p)) return 1;
    test_attention(p);
    test_attention_split(p);
    test_attention_f64(p);
    test_cache_bytes();
    test_attention_mixed(p);
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", fixtures());
    if (model_load(path, &m, err, sizeof err, warn, sizeof warn)) {
        CHECK(0, "load %s: %s", path, err);
        pool_free(p);
        return check_done();
    }
    CHECK(m->n_layer == 5 && m->dim == 64 && m->n_vocab == 512 && m->n_head == 8 && m->n_kv == 4,
          "stories260K shape: 5 layers, dim 64, 8/4 heads, vocab 512");
    CHECK(strcmp(m->sha256, "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d") == 0, "stories260K sha256");
    test_reference(m, p, "a");
    test_reference(m, p, "d");
    /* invariance on the tokens of reference a */
    snprintf(path, sizeof path, "%s/stories260K/a.logits.gguf", fixtures());
    gguf_file *g;
    if (!gguf_open(path, &g, err, sizeof err)) {
        const gguf_tensor *tt = gguf_tensor_find(g, "tokens");
        if (tt) {
            test_invariance(m, p, tt->data, (int)tt->ne[0]);
            invariance_mix(m, p, "stories260K", "int8+f16@0+e4m3s@-1", "e5m2+fp8@-1", tt->data, (int)tt->ne[0]);
            invariance_mix(m, p, "stories260K", "int8+roth+f16@h0+e4m3s+rot@-1:h2-3", "e5m2+fp8+roth@h-1+f32@1-2:h1",
                           tt->data, (int)tt->ne[0]);
        }
        gguf_close(g);
    }
    model_free(m);
    test_greedy_chain("a");
    test_greedy_chain("d");
    test_invariance_smollm2(p);
    test_moe(p, "rand-qwen3moe", "rand-qwen3moe-q8_0");
    test_moe(p, "rand-gptoss", "rand-gptoss-mxfp4");
    test_moe(p, "rand-qwen2moe", NULL);
    test_attention_sinks_f64(p);
    test_hybrid(p, "rand-qwen35");
    test_hybrid(p, "rand-qwen35moe");
    pool_free(p);
    return check_done();
}
