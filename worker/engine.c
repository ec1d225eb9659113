/* engine.c — see engine.h. */
#include "worker/engine.h"
#include "kernels/errmsg.h"
#include "kernels/clock.h"
#include "kernels/sample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* ---- the memory check ------------------------------------------------------------------------ */

static double gib(uint64_t b) { return (double)b / (double)(1ull << 30); }

/* The first number after "key" in the text file path (e.g. "MemAvailable:" in /proc/meminfo, key
 * NULL for a file that is just a number), times mult; 0 when absent or unreadable. */
static uint64_t read_number(const char *path, const char *key, uint64_t mult) {
    char buf[8192];
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = buf;
    if (key && !(p = strstr(buf, key))) return 0;
    if (key) p += strlen(key);
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    if (end == p) return 0;
    return (uint64_t)v > UINT64_MAX / mult ? UINT64_MAX : (uint64_t)v * mult;
}

void engine_mem_env_read(engine_mem_env *env) {
    env->mem_available = read_number("/proc/meminfo", "MemAvailable:", 1024);
    /* a container's limit (cgroup v2, then v1) where this process sees one: its free part */
    static const char *const lim[2] = { "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes" };
    static const char *const use[2] = { "/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory/memory.usage_in_bytes" };
    for (int i = 0; i < 2; i++) {
        uint64_t l = read_number(lim[i], NULL, 1), u = read_number(use[i], NULL, 1);
        if (l == 0 || l >= (1ull << 60)) continue;     /* absent, "max", or v1's "unlimited" */
        uint64_t free_cg = l > u ? l - u : 0;
        if (env->mem_available == 0 || free_cg < env->mem_available) env->mem_available = free_cg;
        break;
    }
    struct rlimit rl;
    env->as_limit = getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (uint64_t)rl.rlim_cur : UINT64_MAX;
    long page = sysconf(_SC_PAGESIZE);
    env->as_used = read_number("/proc/self/statm", NULL, page > 0 ? (uint64_t)page : 4096);
}

int engine_mem_check(const engine_mem_need *need, const engine_mem_env *env, int allow_overcommit,
                     char *err, size_t errlen) {
    uint64_t arms = need->arms > 1 ? (uint64_t)need->arms : 1;
    uint64_t n_ctx = need->n_ctx > 0 ? (uint64_t)need->n_ctx : 0;
    /* sizes in long double: no product can wrap */
    long double kv = (long double)need->kv_per_token * n_ctx;
    long double per_arm = kv + need->scratch_bytes;
    long double weights;   /* what the weights add (docs/DESIGN.md §1.2) */
    if (!need->weights_copied) weights = (long double)need->weights_bytes + need->other_weights;   /* page cache, per file */
    else if (need->other_weights) weights = need->other_weights;            /* the driver's sum of the other copies */
    else weights = (long double)(arms - 1) * need->weights_bytes;           /* this file's; its own copy is made */
    long double total = arms * per_arm + weights;
    char each[64] = "";
    if (arms > 1) snprintf(each, sizeof each, " for each of %llu workers", (unsigned long long)arms);
    if (env->as_limit != UINT64_MAX && (long double)env->as_used + per_arm > (long double)env->as_limit) {
        long double room = (long double)env->as_limit - env->as_used - need->scratch_bytes;
        long double fit = room > 0 && need->kv_per_token ? room / need->kv_per_token : 0;
        return errmsg_set(err, errlen, -1,
            "a context of %llu tokens needs a KV cache reservation of %.1f GiB (%llu bytes per token), and this "
            "process already uses %.1f GiB of address space: more than its limit RLIMIT_AS (ulimit -v) of %.1f GiB; "
            "at most %.0Lf tokens fit: lower --max-context or raise the limit",
            (unsigned long long)n_ctx, (double)(kv / (1ull << 30)), (unsigned long long)need->kv_per_token,
            gib(env->as_used), gib(env->as_limit), fit);
    }
    if (allow_overcommit || env->mem_available == 0 || total <= (long double)env->mem_available) return 0;
    long double room = (long double)env->mem_available - weights - (long double)arms * need->scratch_bytes;
    long double fit = room > 0 && need->kv_per_token ? room / ((long double)arms * need->kv_per_token) : 0;
    return errmsg_set(err, errlen, -1,
        "a context of %llu tokens needs a KV cache of %.1f GiB (%llu bytes per token)%s, plus %.2f GiB of weights "
        "and scratch: %.1f GiB in all, more than the %.1f GiB of memory available (MemAvailable); at most %.0Lf "
        "tokens fit: lower --max-context%s, or pass --allow-overcommit to start anyway",
        (unsigned long long)n_ctx, (double)(kv / (1ull << 30)), (unsigned long long)need->kv_per_token, each,
        (double)((weights + (long double)arms * need->scratch_bytes) / (1ull << 30)), (double)(total / (1ull << 30)),
        gib(env->mem_available), fit,
        need->weights_copied && arms > 1 ? ", pass --mmap-weights (the workers then share one copy of the weights)" : "");
}

/* The memory check as the backend asks for it (backend_config.mem_check): the backend's KV bytes
 * per token and scratch, plus the engine's own logit rows (last, base_row, one returned row). */
typedef struct {
    const engine *e;
    const engine_mem_opts *mem;
} mem_ctx;

static int mem_check(void *vctx, const backend_need *bn, char *err, size_t errlen) {
    const mem_ctx *x = vctx;
    const model *m = x->e->m;
    engine_mem_need need = { .kv_per_token = bn->kv_bytes_per_token, .n_ctx = x->e->n_ctx, .weights_bytes = m->g->size,
                             .weights_copied = !x->e->cfg.mmap_weights, .other_weights = x->mem->other_weights,
                             .scratch_bytes = bn->scratch_bytes + 4 * 3ull * (uint64_t)m->n_vocab, .arms = x->mem->arms };
    engine_mem_env env;
    engine_mem_env_read(&env);
    return engine_mem_check(&need, &env, x->mem->allow_overcommit, err, errlen);
}

/* The backend with cfg's formats: every layer and KV head kv_k / kv_v, or per cell from the mixes;
 * what its cache will need when full is checked against the memory first (engine_mem_check). */
static int engine_backend(engine *e, const char *kv_k_mix, const char *kv_v_mix, const engine_mem_opts *mem,
                          char *err, size_t errlen) {
    const engine_config *cfg = &e->cfg;
    int nl = e->m->n_layer, nkv = e->m->n_kv, rc = -1;
    size_t nc = (size_t)nl * nkv;                     /* (layer, KV head) cells */
    const char *spec[2] = { kv_k_mix, kv_v_mix };
    kv_fmt plain[2] = { cfg->kv_k, cfg->kv_v };
    kv_fmt *f = malloc(sizeof *f * 2 * nc);           /* [2][n_layer][n_kv]: K, V */
    if (!f) return errmsg_set(err, errlen, -1, "out of memory");
    for (int v = 0; v < 2; v++) {
        if (spec[v]) {
            kv_mix mx;
            if (strlen(spec[v]) >= ENGINE_KV_NAME_MAX) { errmsg_set(err, errlen, -1, "KV format mix '%.40s...' is too long", spec[v]); goto done; }
            if (kv_mix_parse(spec[v], &mx, err, errlen) || kv_mix_cells(&mx, nl, nkv, f + (size_t)v * nc, err, errlen)) goto done;
            snprintf(e->kv_name[v], sizeof e->kv_name[v], "%s", spec[v]);
        } else {
            for (size_t i = 0; i < nc; i++) f[(size_t)v * nc + i] = plain[v];
            snprintf(e->kv_name[v], sizeof e->kv_name[v], "%s", kv_fmt_name(plain[v]));
        }
    }
    backend_model net;
    model_net(e->m, &net);
    mem_ctx mc = { e, mem };
    /* "llama:cpu" -> kind "llama", device "cpu" */
    char kind[32] = "cpu";
    const char *dev = NULL, *colon = cfg->backend ? strchr(cfg->backend, ':') : NULL;
    if (cfg->backend) {
        size_t kl = colon ? (size_t)(colon - cfg->backend) : strlen(cfg->backend);
        if (kl >= sizeof kind) { errmsg_set(err, errlen, -1, "unknown backend '%.40s'", cfg->backend); goto done; }
        memcpy(kind, cfg->backend, kl);
        kind[kl] = 0;
        dev = colon ? colon + 1 : NULL;
    }
    backend_config bc = { .kind = kind, .kv_k = f, .kv_v = f + nc, .n_ctx = e->n_ctx, .max_tokens = cfg->chunk,
                          .threads = cfg->threads, .mem_check = mem_check, .mem_ctx = &mc,
                          .model_path = cfg->model_path, .device = dev, .flash_attn = cfg->flash_attn,
                          .llama_rot_off = cfg->kv_rot_off, .kv_host = cfg->kv_host };
    rc = backend_create(&net, &bc, &e->b, err, errlen);
done:
    free(f);
    return rc;
}

const char *engine_kv_name(const engine *e, int v) { return e->kv_name[v ? 1 : 0]; }

int engine_create(const engine_config *cfg, engine **out, char *err, size_t errlen, char *warn, size_t warnlen) {
    engine_mem_opts mem = { 1, 0, 0 };
    return engine_create_mix(cfg, NULL, NULL, &mem, out, err, errlen, warn, warnlen);
}

int engine_create_mem(const engine_config *cfg, const engine_mem_opts *mem, engine **out, char *err, size_t errlen,
                      char *warn, size_t warnlen) {
    return engine_create_mix(cfg, NULL, NULL, mem, out, err, errlen, warn, warnlen);
}

int engine_create_mix(const engine_config *cfg, const char *kv_k_mix, const char *kv_v_mix,
                      const engine_mem_opts *mem, engine **out, char *err, size_t errlen, char *warn,
                      size_t warnlen) {
    engine *e = calloc(1, sizeof *e);
    *out = NULL;
    if (warn && warnlen) warn[0] = 0;
    if (!e) return errmsg_set(err, errlen, -1, "out of memory");
    e->cfg = *cfg;
    e->base_depth = -1;
    /* llama.cpp maps the file itself: strata's loader maps it too, so the pages are shared */
    if (cfg->backend && !strncmp(cfg->backend, "llama", 5)) e->cfg.mmap_weights = 1;
    if (cfg->threads < 1 || cfg->chunk < 1) { errmsg_set(err, errlen, -1, "threads and prefill chunk must be >= 1"); goto fail; }
    if (model_load_as(cfg->model_path, e->cfg.mmap_weights ? GGUF_HOLD_MAP : GGUF_HOLD_COPY, &e->m, err, errlen, warn,
                      warnlen)) goto fail;
    e->m->rope_global.f32_angles = e->m->rope_local.f32_angles = cfg->rope_f32_angles ? 1 : 0;
    if (tok_load(e->m->g, &e->tok, err, errlen)) goto fail;
    if (tok_n_vocab(e->tok) > e->m->n_vocab) {
        errmsg_set(err, errlen, -1, "%s: the tokenizer has %d tokens but the model has %d embedding rows "
                   "(token_embd.weight): ids from %d on would read outside it", cfg->model_path,
                   tok_n_vocab(e->tok), e->m->n_vocab, e->m->n_vocab);
        goto fail;
    }
    e->n_ctx = cfg->n_ctx > 0 ? cfg->n_ctx : e->m->n_ctx_train;
    if (cfg->n_ctx > e->m->n_ctx_train && warn && !warn[0])
        snprintf(warn, warnlen, "context %d is past the model's native %d tokens: results there measure an "
                 "extrapolating model", cfg->n_ctx, e->m->n_ctx_train);
    if (engine_backend(e, kv_k_mix, kv_v_mix, mem, err, errlen)) goto fail;
    /* an aligned backend re-runs part of the stream: its token ids, 4 bytes a position */
    if (backend_aligned_prefill(e->b) && !(e->stream = malloc(sizeof(int32_t) * (size_t)e->n_ctx))) {
        errmsg_set(err, errlen, -1, "out of memory");
        goto fail;
    }
    e->last = malloc(sizeof(float) * (size_t)e->m->n_vocab);
    e->base_row = malloc(sizeof(float) * (size_t)e->m->n_vocab);
    if (!e->last || !e->base_row) { errmsg_set(err, errlen, -1, "out of memory"); goto fail; }
    *out = e;
    return 0;
fail:
    engine_free(e);
    return -1;
}

void engine_free(engine *e) {
    if (!e) return;
    backend_free(e->b);
    tok_free(e->tok);
    model_free(e->m);
    free(e->last);
    free(e->base_row);
    free(e->stream);
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

/* Index of the first non-finite value of x[n], or -1. Blocks of 64 are tested branch-free on the
 * exponent bits (all ones: inf or NaN), which the compiler vectorises: a 262144-token vocabulary
 * costs ~0.1 ms per row, not the ~1 ms of isfinite() one value at a time. */
static int64_t first_nonfinite(const float *x, size_t n) {
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        uint32_t any = 0;
        for (int k = 0; k < 64; k++) {
            uint32_t u;
            memcpy(&u, x + i + k, 4);
            any |= (~u & 0x7f800000u) == 0;
        }
        if (any) break;
    }
    for (; i < n; i++)
        if (!isfinite(x[i])) return (int64_t)i;
    return -1;
}

int engine_prefill(engine *e, const int32_t *tokens, size_t n, int rows, float **out_rows, size_t *n_out,
                   char *err, size_t errlen) {
    return engine_prefill_routed(e, tokens, n, rows, NULL, NULL, out_rows, n_out, err, errlen);
}

/* The forwards of one prefill: positions [a, start + n) (tokens[n] from start; the earlier ones of
 * e->stream, which holds them all when kept) in pieces of at most chunk
 * tokens from a (a = start, or on an aligned backend the chunk boundary at or below start, so that
 * every piece is an aligned chunk or the stream's end). Rows of positions >= start go to
 * buf [extra + (rows == ALL ? n : 1)][n_vocab] from index extra: all of them (ALL) or the last
 * (LAST, NONE); with extra = 1, buf[0] gets the row at start - 1, recomputed. */
static int prefill_pieces(engine *e, const int32_t *tokens, int a, int start, size_t n, int rows, int extra,
                          const int32_t *pin,
                          int32_t *used, float *buf, int *row_idx, char *err, size_t errlen) {
    int V = e->m->n_vocab, chunk = e->cfg.chunk;
    size_t per_tok = (size_t)e->m->n_layer * e->m->n_expert_used;   /* routing entries per token (0: dense) */
    const int end = start + (int)n;
    for (int p = a; p < end;) {
        int T = end - p < chunk ? end - p : chunk;
        int first = p < start ? start - p : 0;       /* the piece's first new position */
        int nr = 0;
        float *dst = buf + (size_t)extra * V;
        if (extra && p == a) { row_idx[nr++] = first - 1; dst = buf; }
        if (rows == ENGINE_ROWS_ALL) {
            for (int t = first; t < T; t++) row_idx[nr++] = t;
            if (!(extra && p == a)) dst = buf + (size_t)(extra + p + first - start) * V;
        } else if (p + T == end) {
            row_idx[nr++] = T - 1;
        }
        if (per_tok) backend_route(e->b, pin ? pin + (size_t)(p - start) * per_tok : NULL,
                                   used ? used + (size_t)(p - start) * per_tok : NULL);
        const int32_t *src = e->stream ? e->stream + p : tokens + (p - start);
        if (backend_forward(e->b, src, T, p, row_idx, nr, nr ? dst : NULL, err, errlen)) return -1;
        e->n_past = p + T;
        p += T;
    }
    return 0;
}

/* The batch variance an aligned backend shows: the row at start - 1 (last_row: computed before as
 * the last row of a shorter chunk) against the same row now (recomputed in the longer chunk). */
static void note_rechunk(engine *e, const float *last_row, const float *now) {
    double d = 0;
    for (int i = 0; i < e->m->n_vocab; i++) {
        double x = fabs((double)now[i] - (double)last_row[i]);
        if (x > d || x != x) d = x;
    }
    e->rechunk_rows++;
    if (d > e->rechunk_max || d != d) e->rechunk_max = d;
}

int engine_prefill_routed(engine *e, const int32_t *tokens, size_t n, int rows, const int32_t *pin, int32_t *used,
                          float **out_rows, size_t *n_out, char *err, size_t errlen) {
    int V = e->m->n_vocab;
    int *row_idx = NULL;   /* [chunk + 1] the rows one forward asks for */
    float *buf = NULL;     /* [extra + n_buf][V], see prefill_pieces */
    *out_rows = NULL;
    *n_out = 0;
    if (n == 0) {
        if (rows == ENGINE_ROWS_LAST && e->last_valid) {
            if (!(buf = malloc(sizeof(float) * (size_t)V))) goto oom;
            memcpy(buf, e->last, sizeof(float) * (size_t)V);
            *out_rows = buf;
            *n_out = 1;
        }
        return 0;
    }
    if (n > (size_t)(e->n_ctx - e->n_past)) {
        return errmsg_set(err, errlen, -1, "prefill of %zu tokens at depth %d exceeds the context of %d tokens", n, e->n_past, e->n_ctx);
    }
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V) {
            return errmsg_set(err, errlen, -1, "token id %d at index %zu is outside the vocabulary [0, %d)", tokens[i],
                              i, V);
        }
    const int start = e->n_past;
    /* an aligned backend (kernels/backend.h) re-runs the tokens of start's chunk already there */
    const int lead = e->stream ? start % e->cfg.chunk : 0, a = start - lead;
    if (lead && (pin || used)) return errmsg_set(err, errlen, -1, "expert routing cannot be pinned or reported on this backend");
    const int extra = lead && e->last_valid;   /* 1: recompute the row at start - 1 (batch variance) */
    size_t n_rows = rows == ENGINE_ROWS_ALL ? n : rows == ENGINE_ROWS_LAST ? 1 : 0;
    size_t n_buf = rows == ENGINE_ROWS_ALL ? n : 1;
    if (!(buf = malloc(sizeof(float) * (size_t)V * (extra + n_buf)))) goto oom;
    if (!(row_idx = malloc(sizeof(int) * (size_t)(e->cfg.chunk + 1)))) goto oom;
    if (e->stream) memcpy(e->stream + start, tokens, sizeof(int32_t) * n);
    double t0 = clock_s();
    if ((lead && backend_truncate(e->b, a, err, errlen)) ||
        prefill_pieces(e, tokens, a, start, n, rows, extra, pin, used, buf, row_idx, err, errlen)) {
        free(row_idx);
        free(buf);
        /* the cache past n_past may hold part of this request: harmless; an aligned backend may be
         * back at its chunk boundary a */
        e->n_past = lead ? a : start;
        e->last_valid = 0;
        e->base_depth = -1;
        return -1;
    }
    free(row_idx);
    float *mine = buf + (size_t)extra * V;   /* [n_buf][V] */
    /* a NaN or inf logit (an overflow in the model or the KV format) is an error, not a row to
     * compare or a token 0 to emit: checked over every row handed out and the state's last row */
    int64_t bad = first_nonfinite(mine, n_buf * (size_t)V);
    if (bad >= 0) {
        free(buf);
        e->n_past = start;
        e->last_valid = 0;
        e->base_depth = -1;
        return errmsg_set(err, errlen, -1,
                          "non-finite logits (NaN or inf) at position %lld: the forward pass overflowed "
                          "(model weights or KV format)", (long long)(rows == ENGINE_ROWS_ALL ? start + bad / V
                                                                                           : start + (int64_t)n - 1));
    }
    if (extra) note_rechunk(e, e->last, buf);
    memcpy(e->last, mine + (n_buf - 1) * (size_t)V, sizeof(float) * (size_t)V);
    e->prefill_seconds += clock_s() - t0;
    e->prefill_tokens += n;
    e->last_valid = 1;
    e->base_depth = -1;
    if (!n_rows) {
        free(buf);
        buf = NULL;
    } else if (extra) {
        memmove(buf, mine, sizeof(float) * (size_t)V * n_rows);
    }
    *out_rows = buf;
    *n_out = n_rows;
    return 0;
oom:
    free(row_idx);
    free(buf);
    return errmsg_set(err, errlen, -1, "out of memory");
}

int engine_generate(engine *e, int n, double temperature, uint64_t seed, int32_t *tokens, float *gaps,
                    char *err, size_t errlen) {
    return engine_generate_p(e, n, temperature, 1.0, seed, tokens, gaps, err, errlen);
}

int engine_generate_p(engine *e, int n, double temperature, double top_p, uint64_t seed, int32_t *tokens,
                      float *gaps, char *err, size_t errlen) {
    int V = e->m->n_vocab;
    if (!e->last_valid) return errmsg_set(err, errlen, -1, "generate needs a prefilled state (prefill at least one token first)");
    if (n < 0 || !(temperature >= 0) || !isfinite(temperature) || !(top_p > 0 && top_p <= 1)) {
        return errmsg_set(err, errlen, -1, "bad generate arguments");
    }
    if (n > 1 && n - 1 > e->n_ctx - e->n_past) {
        return errmsg_set(err, errlen, -1, "generating %d tokens at depth %d exceeds the context of %d tokens", n, e->n_past, e->n_ctx);
    }
    int start = e->n_past;
    memcpy(e->base_row, e->last, sizeof(float) * (size_t)V);
    double t0 = clock_s();
    int row0 = 0;
    for (int i = 0; i < n; i++) {
        float gap;
        if (first_nonfinite(e->last, (size_t)V) >= 0) {
            e->last_valid = 0;
            e->base_depth = start;   /* truncate(start) restores the state of before the call */
            return errmsg_set(err, errlen, -1,
                              "non-finite logits (NaN or inf) after position %d, step %d of %d of generate: "
                              "the forward pass overflowed (model weights or KV format)", e->n_past - 1, i + 1, n);
        }
        int tok = engine_argmax(e->last, V, &gap);
        if (temperature > 0 && (tok = sample_token(e->last, V, temperature, top_p, sample_uniform(seed, (uint64_t)i))) < 0) {
            e->last_valid = 0;
            e->base_depth = start;
            return errmsg_set(err, errlen, -1, "out of memory sampling step %d", i + 1);
        }
        tokens[i] = tok;
        gaps[i] = gap;
        if (i == n - 1) break;
        if (e->stream) e->stream[e->n_past] = tokens[i];
        if (backend_forward(e->b, &tokens[i], 1, e->n_past, &row0, 1, e->last, err, errlen)) {
            e->last_valid = 0;
            e->base_depth = start;
            return -1;
        }
        e->n_past++;
        e->decode_tokens++;
    }
    e->decode_seconds += clock_s() - t0;
    e->base_depth = start;
    return 0;
}

int engine_truncate(engine *e, int depth, char *err, size_t errlen) {
    if (depth < 0 || depth > e->n_past) {
        return errmsg_set(err, errlen, -1, "cannot truncate to depth %d: the stream holds %d tokens", depth, e->n_past);
    }
    if (backend_truncate(e->b, depth, err, errlen)) return -1;
    if (depth == e->base_depth) {
        memcpy(e->last, e->base_row, sizeof(float) * (size_t)e->m->n_vocab);
        e->last_valid = 1;
    } else if (depth != e->n_past) {
        e->last_valid = 0;
    }
    e->n_past = depth;
    return 0;
}

uint64_t engine_huge_bytes(void) {
    return read_number("/proc/self/smaps_rollup", "AnonHugePages:", 1024);
}

uint64_t engine_peak_rss(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru)) return 0;
    return (uint64_t)ru.ru_maxrss * 1024u;
}
