/* test_model.c — the forward pass against llama.cpp's reference logits for stories260K, batch
 * invariance (chunk sizes 1, 7, 64, 512 and decode vs prefill, every KV format), the reference
 * attention vs the tiled one, and the dot-product kernels vs their plain C twins. */
#include "tests/check.h"
#include "kernels/ops.h"
#include "worker/cache.h"
#include "worker/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *shared(void) {
    const char *s = getenv("STRATA_SHARED");
    return s ? s : "../shared";
}

/* Runs tokens[n] through a fresh cache in chunks of `chunk`, all rows into out [n][V]. */
static int run_chunks(const model *m, pool *p, kv_fmt fk, kv_fmt fv, const int32_t *tok, int n, int chunk, float *out) {
    cache c;
    model_scratch s;
    char err[256];
    int *rows = malloc(sizeof(int) * (size_t)chunk), rc = -1;
    if (cache_create(&c, fk, fv, m->n_layer, m->n_kv, m->hd, n + 8, err, sizeof err)) { printf("# %s\n", err); free(rows); return -1; }
    if (model_scratch_alloc(m, chunk, &s)) goto done;
    for (int i = 0; i < chunk; i++) rows[i] = i;
    for (int off = 0; off < n; off += chunk) {
        int T = n - off < chunk ? n - off : chunk;
        if (model_forward(m, &s, p, &c, tok + off, T, off, rows, T, out + (size_t)off * m->n_vocab, err, sizeof err)) {
            printf("# forward: %s\n", err);
            goto done;
        }
    }
    rc = 0;
done:
    model_scratch_free(&s);
    cache_free(&c);
    free(rows);
    return rc;
}

static void test_reference(const model *m, pool *p, const char *name) {
    char path[512], err[256];
    gguf_file *g;
    snprintf(path, sizeof path, "%s/testdata/stories260K/%s.logits.gguf", shared(), name);
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
    for (int f = 0; f < KV_NFMT; f++) {
        char err[128];
        if (kv_fmt_check((kv_fmt)f, m->hd, err, sizeof err)) {
            printf("# %s: not for head dim %d here (%s)\n", kv_fmt_name((kv_fmt)f), m->hd, err);
            continue;
        }
        if (run_chunks(m, p, (kv_fmt)f, (kv_fmt)f, tok, n, 1, a)) { CHECK(0, "%s: chunk 1 ran", kv_fmt_name((kv_fmt)f)); continue; }
        for (int k = 0; k < 3; k++) {
            run_chunks(m, p, (kv_fmt)f, (kv_fmt)f, tok, n, chunks[k], b);
            CHECK(memcmp(a, b, sizeof(float) * (size_t)n * V) == 0,
                  "kv %s: rows with prefill chunk %d bit-identical to chunk 1 (decode)", kv_fmt_name((kv_fmt)f), chunks[k]);
        }
    }
    free(a);
    free(b);
}

/* Tiled attention vs the one-query reference, on random data, every format, with a window. */
static void test_attention(pool *p) {
    int hd = 64, n_kv = 2, n_head = 6, T = 37, pos0 = 50;
    float *k = malloc(sizeof(float) * n_kv * hd), *v = malloc(sizeof(float) * n_kv * hd);
    float *q = malloc(sizeof(float) * T * n_head * hd);
    float *o1 = malloc(sizeof(float) * T * n_head * hd), *o2 = malloc(sizeof(float) * T * n_head * hd);
    srand(7);
    for (int i = 0; i < T * n_head * hd; i++) q[i] = (float)rand() / RAND_MAX * 2 - 1;
    for (int f = 0; f < KV_NFMT; f++)
        for (int window = 0; window <= 20; window += 20) {
            cache c;
            char err[128];
            if (cache_create(&c, (kv_fmt)f, (kv_fmt)f, 1, n_kv, hd, pos0 + T, err, sizeof err)) continue;
            for (int pos = 0; pos < pos0 + T; pos++) {
                for (int i = 0; i < n_kv * hd; i++) { k[i] = (float)rand() / RAND_MAX * 4 - 2; v[i] = (float)rand() / RAND_MAX * 2 - 1; }
                cache_store(&c, 0, pos, k, v);
            }
            cache_attn a = { 0, T, pos0, n_head, window, 0.125f, q, o1 };
            cache_attend(p, &c, &a);
            a.out = o2;
            cache_attend_ref(&c, &a);
            CHECK(memcmp(o1, o2, sizeof(float) * T * n_head * hd) == 0,
                  "attention kv %s window %d: tiled == reference bit for bit", kv_fmt_name((kv_fmt)f), window);
            cache_free(&c);
        }
    free(k); free(v); free(q); free(o1); free(o2);
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
    float s1 = ops_exp_sub_sum(y, b, 3.0f, 203), s2 = 0, acc[8] = {0};
    int ok = 1;
    for (int i = 0; i < 203; i++) ok &= y[i] == ops_expf(b[i] - 3.0f);
    for (int i = 0; i < 200; i++) acc[i % 8] += ops_expf(b[i] - 3.0f);
    s2 = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    for (int i = 200; i < 203; i++) s2 += ops_expf(b[i] - 3.0f);
    CHECK(ok && s1 == s2, "ops_exp_sub_sum: vector == scalar, canonical sum order");
}

int main(void) {
    char path[512], err[512], warn[256];
    model *m;
    pool *p;
    test_kernels();
    if (pool_create(2, &p)) return 1;
    test_attention(p);
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared());
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
    snprintf(path, sizeof path, "%s/testdata/stories260K/a.logits.gguf", shared());
    gguf_file *g;
    if (!gguf_open(path, &g, err, sizeof err)) {
        const gguf_tensor *tt = gguf_tensor_find(g, "tokens");
        if (tt) test_invariance(m, p, tt->data, (int)tt->ne[0]);
        gguf_close(g);
    }
    model_free(m);
    pool_free(p);
    return check_done();
}
