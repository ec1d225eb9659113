/* engine.c — see engine.h. */
#include "worker/engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The cache in cfg's formats: every layer kv_k / kv_v, or per layer from the mixes. */
static int engine_cache(engine *e, const char *kv_k_mix, const char *kv_v_mix, char *err, size_t errlen) {
    const engine_config *cfg = &e->cfg;
    int nl = e->m->n_layer, rc = -1;
    const char *spec[2] = { kv_k_mix, kv_v_mix };
    kv_fmt plain[2] = { cfg->kv_k, cfg->kv_v };
    kv_fmt *f = malloc(sizeof *f * 2 * (size_t)nl);   /* [2][n_layer]: K, V */
    if (!f) { snprintf(err, errlen, "out of memory"); return -1; }
    for (int v = 0; v < 2; v++) {
        if (spec[v]) {
            kv_mix mx;
            if (strlen(spec[v]) >= ENGINE_KV_NAME_MAX) { snprintf(err, errlen, "KV format mix '%.40s...' is too long", spec[v]); goto done; }
            if (kv_mix_parse(spec[v], &mx, err, errlen) || kv_mix_layers(&mx, nl, f + (size_t)v * nl, err, errlen)) goto done;
            snprintf(e->kv_name[v], sizeof e->kv_name[v], "%s", spec[v]);
        } else {
            for (int l = 0; l < nl; l++) f[(size_t)v * nl + l] = plain[v];
            snprintf(e->kv_name[v], sizeof e->kv_name[v], "%s", kv_fmt_name(plain[v]));
        }
    }
    rc = cache_create_layers(&e->c, f, f + nl, nl, e->m->n_kv, e->m->hd, e->n_ctx, err, errlen);
done:
    free(f);
    return rc;
}

const char *engine_kv_name(const engine *e, int v) { return e->kv_name[v ? 1 : 0]; }

int engine_create(const engine_config *cfg, engine **out, char *err, size_t errlen, char *warn, size_t warnlen) {
    return engine_create_mix(cfg, NULL, NULL, out, err, errlen, warn, warnlen);
}

int engine_create_mix(const engine_config *cfg, const char *kv_k_mix, const char *kv_v_mix, engine **out,
                      char *err, size_t errlen, char *warn, size_t warnlen) {
    engine *e = calloc(1, sizeof *e);
    *out = NULL;
    if (warn && warnlen) warn[0] = 0;
    if (!e) { snprintf(err, errlen, "out of memory"); return -1; }
    e->cfg = *cfg;
    e->base_depth = -1;
    if (cfg->threads < 1 || cfg->chunk < 1) { snprintf(err, errlen, "threads and prefill chunk must be >= 1"); goto fail; }
    if (model_load(cfg->model_path, &e->m, err, errlen, warn, warnlen)) goto fail;
    if (tok_load(e->m->g, &e->tok, err, errlen)) goto fail;
    e->n_ctx = cfg->n_ctx > 0 ? cfg->n_ctx : e->m->n_ctx_train;
    if (cfg->n_ctx > e->m->n_ctx_train && warn && !warn[0])
        snprintf(warn, warnlen, "context %d is past the model's native %d tokens: results there measure an "
                 "extrapolating model", cfg->n_ctx, e->m->n_ctx_train);
    if (engine_cache(e, kv_k_mix, kv_v_mix, err, errlen)) goto fail;
    if (pool_create(cfg->threads, &e->p)) { snprintf(err, errlen, "cannot start %d threads", cfg->threads); goto fail; }
    if (model_scratch_alloc(e->m, cfg->chunk, &e->s)) { snprintf(err, errlen, "out of memory (prefill chunk %d)", cfg->chunk); goto fail; }
    e->last = malloc(sizeof(float) * (size_t)e->m->n_vocab);
    e->base_row = malloc(sizeof(float) * (size_t)e->m->n_vocab);
    if (!e->last || !e->base_row) { snprintf(err, errlen, "out of memory"); goto fail; }
    *out = e;
    return 0;
fail:
    engine_free(e);
    return -1;
}

void engine_free(engine *e) {
    if (!e) return;
    model_scratch_free(&e->s);
    if (e->p) pool_free(e->p);
    cache_free(&e->c);
    tok_free(e->tok);
    model_free(e->m);
    free(e->last);
    free(e->base_row);
    free(e);
}

int engine_argmax(const float *row, int n, float *gap) {
    int best = 0;
    float b1 = -INFINITY, b2 = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (row[i] > b1) { b2 = b1; b1 = row[i]; best = i; }
        else if (row[i] > b2) b2 = row[i];
    }
    if (gap) *gap = b1 - b2;
    return best;
}

int engine_prefill(engine *e, const int32_t *tokens, size_t n, int rows, float **out_rows, size_t *n_out,
                   char *err, size_t errlen) {
    int V = e->m->n_vocab, chunk = e->cfg.chunk;
    int *row_idx = NULL;
    float *outb = NULL;
    *out_rows = NULL;
    *n_out = 0;
    if (n == 0) {
        if (rows == ENGINE_ROWS_LAST && e->last_valid) {
            if (!(outb = malloc(sizeof(float) * (size_t)V))) goto oom;
            memcpy(outb, e->last, sizeof(float) * (size_t)V);
            *out_rows = outb;
            *n_out = 1;
        }
        return 0;
    }
    if (n > (size_t)(e->n_ctx - e->n_past)) {
        snprintf(err, errlen, "prefill of %zu tokens at depth %d exceeds the context of %d tokens", n, e->n_past, e->n_ctx);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V) {
            snprintf(err, errlen, "token id %d at index %zu is outside the vocabulary [0, %d)", tokens[i], i, V);
            return -1;
        }
    size_t n_rows = rows == ENGINE_ROWS_ALL ? n : rows == ENGINE_ROWS_LAST ? 1 : 0;
    if (n_rows && !(outb = malloc(sizeof(float) * (size_t)V * n_rows))) goto oom;
    if (!(row_idx = malloc(sizeof(int) * (size_t)chunk))) goto oom;
    double t0 = now_s();
    for (size_t off = 0; off < n; off += (size_t)chunk) {
        int T = n - off < (size_t)chunk ? (int)(n - off) : chunk;
        int last_chunk = off + (size_t)T == n;
        int nr = 0;
        float *dst;
        if (rows == ENGINE_ROWS_ALL) {
            for (int t = 0; t < T; t++) row_idx[nr++] = t;
            dst = outb + off * (size_t)V;
        } else if (last_chunk) {
            row_idx[nr++] = T - 1;
            dst = e->last;
        } else {
            dst = NULL;
        }
        if (model_forward(e->m, &e->s, e->p, &e->c, tokens + off, T, e->n_past, row_idx, nr, dst, err, errlen)) {
            free(row_idx);
            free(outb);
            e->last_valid = 0;   /* the cache past n_past may hold part of this chunk: harmless */
            return -1;
        }
        e->n_past += T;
        if (rows == ENGINE_ROWS_ALL && last_chunk) memcpy(e->last, dst + (size_t)(T - 1) * V, sizeof(float) * (size_t)V);
    }
    e->prefill_seconds += now_s() - t0;
    e->prefill_tokens += n;
    e->last_valid = 1;
    e->base_depth = -1;
    if (rows == ENGINE_ROWS_LAST) memcpy(outb, e->last, sizeof(float) * (size_t)V);
    free(row_idx);
    *out_rows = outb;
    *n_out = n_rows;
    return 0;
oom:
    free(row_idx);
    free(outb);
    snprintf(err, errlen, "out of memory");
    return -1;
}

/* splitmix64: the sampler's generator, seeded per request. */
static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int sample(const float *row, int n, double temperature, uint64_t *rng) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) if (row[i] > mx) mx = row[i];
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp((row[i] - mx) / temperature);
    double r = (double)(splitmix(rng) >> 11) * 0x1.0p-53 * sum, acc = 0;
    for (int i = 0; i < n; i++) {
        acc += exp((row[i] - mx) / temperature);
        if (acc > r) return i;
    }
    return n - 1;
}

int engine_generate(engine *e, int n, double temperature, uint64_t seed, int32_t *tokens, float *gaps,
                    char *err, size_t errlen) {
    int V = e->m->n_vocab;
    uint64_t rng = seed;
    if (!e->last_valid) { snprintf(err, errlen, "generate needs a prefilled state (prefill at least one token first)"); return -1; }
    if (n < 0 || !(temperature >= 0) || !isfinite(temperature)) { snprintf(err, errlen, "bad generate arguments"); return -1; }
    if (n > 1 && n - 1 > e->n_ctx - e->n_past) {
        snprintf(err, errlen, "generating %d tokens at depth %d exceeds the context of %d tokens", n, e->n_past, e->n_ctx);
        return -1;
    }
    int start = e->n_past;
    memcpy(e->base_row, e->last, sizeof(float) * (size_t)V);
    double t0 = now_s();
    int row0 = 0;
    for (int i = 0; i < n; i++) {
        float gap;
        int tok = engine_argmax(e->last, V, &gap);
        if (temperature > 0) tok = sample(e->last, V, temperature, &rng);
        tokens[i] = tok;
        gaps[i] = gap;
        if (i == n - 1) break;
        if (model_forward(e->m, &e->s, e->p, &e->c, &tokens[i], 1, e->n_past, &row0, 1, e->last, err, errlen)) {
            e->last_valid = 0;
            return -1;
        }
        e->n_past++;
        e->decode_tokens++;
    }
    e->decode_seconds += now_s() - t0;
    e->base_depth = start;
    return 0;
}

int engine_truncate(engine *e, int depth, char *err, size_t errlen) {
    if (depth < 0 || depth > e->n_past) {
        snprintf(err, errlen, "cannot truncate to depth %d: the stream holds %d tokens", depth, e->n_past);
        return -1;
    }
    if (depth == e->base_depth) {
        memcpy(e->last, e->base_row, sizeof(float) * (size_t)e->m->n_vocab);
        e->last_valid = 1;
    } else if (depth != e->n_past) {
        e->last_valid = 0;
    }
    e->n_past = depth;
    return 0;
}

uint64_t engine_peak_rss(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru)) return 0;
    return (uint64_t)ru.ru_maxrss * 1024u;
}
