/* backend_cpu.c — the "cpu" backend of kernels/backend.h: the forward pass with the kernels of
 * kernels/ops.c (matmul, norms, RoPE, activations) and the KV cache and attention of
 * kernels/cache.c, on a thread pool (kernels/pool.c). The layer is written out in backend.h;
 * the canonical operation orders that make every result independent of the chunk and the
 * thread count are in ops.h and cache.h (docs/DESIGN.md §2.5, §3).
 */
#include "kernels/backend_impl.h"
#include "kernels/cache.h"
#include "kernels/kv.h"
#include "kernels/ops.h"
#include "kernels/pool.h"
#include "kernels/vec16.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    backend base;       /* first: a backend_cpu pointer is a backend pointer */
    backend_model m;    /* the model (a copy of the description; weights and layers borrowed) */
    cache c;            /* the KV cache, every layer in its own formats */
    pool *p;
    int depth;          /* positions 0..depth-1 hold this stream's tokens */
    int max_T;          /* most tokens per forward */
    /* scratch of one forward pass, allocated at create */
    float *x, *xb;      /* [max_T][dim] residual stream, normed input */
    float *q, *att;     /* [max_T][n_head*hd] */
    float *k, *v;       /* [max_T][n_kv*hd] */
    float *h1, *h2;     /* [max_T][ffn] */
    float *cs_g, *cs_l; /* [max_T][n_rot/2][2] RoPE tables, global and local */
    float *mm_ws;       /* [ops_matmul_scratch_floats(threads, widest input)] the matmuls' */
    float *attn_ws;     /* [attn_ws_floats] the attention's (cache_attend_scratch_floats) */
    size_t attn_ws_floats;
} backend_cpu;

/* Bytes of the scratch above for max_T tokens. */
static uint64_t scratch_bytes(const backend_model *m, int max_T) {
    uint64_t per_tok = 2ull * m->dim + 2ull * m->n_head * m->hd + 2ull * m->n_kv * m->hd + 2ull * m->ffn +
                       2ull * m->n_rot;
    return 4 * (uint64_t)max_T * per_tok;
}

/* n floats on a 64-byte boundary (rows of 16k floats then start on cache lines); free() frees. */
static float *alloc64(size_t n) {
    return aligned_alloc(64, (sizeof(float) * n + 63) / 64 * 64);
}

static void cpu_free(backend *base) {
    backend_cpu *b = (backend_cpu *)base;
    free(b->x); free(b->xb); free(b->q); free(b->att); free(b->k); free(b->v);
    free(b->h1); free(b->h2); free(b->cs_g); free(b->cs_l); free(b->mm_ws); free(b->attn_ws);
    if (b->p) pool_free(b->p);
    cache_free(&b->c);
    free(b);
}

static int cpu_create(const backend_model *m, const backend_config *cfg, backend **out, char *err, size_t errlen) {
    int nl = m->n_layer;
    backend_cpu *b = calloc(1, sizeof *b);
    *out = NULL;
    if (!b) { snprintf(err, errlen, "out of memory"); return -1; }
    b->base.impl = &backend_cpu_impl;
    b->m = *m;
    b->max_T = cfg->max_tokens;
    backend_need need = { 0, scratch_bytes(m, cfg->max_tokens) };
    for (size_t i = 0; i < (size_t)nl * m->n_kv; i++) {   /* every (layer, KV head) */
        if (kv_fmt_check(cfg->kv_k[i], m->hd, err, errlen) || kv_fmt_check(cfg->kv_v[i], m->hd, err, errlen)) goto fail;
        need.kv_bytes_per_token += kv_reserve_bytes(cfg->kv_k[i], m->hd, 0) + kv_reserve_bytes(cfg->kv_v[i], m->hd, 1);
    }
    if (cfg->mem_check && cfg->mem_check(cfg->mem_ctx, &need, err, errlen)) goto fail;
    if (cache_create_heads(&b->c, cfg->kv_k, cfg->kv_v, nl, m->n_kv, m->hd, cfg->n_ctx, err, errlen)) goto fail;
    if (pool_create(cfg->threads, &b->p)) { snprintf(err, errlen, "cannot start %d threads", cfg->threads); goto fail; }
    size_t T = (size_t)cfg->max_tokens;
    b->x = alloc64(T * m->dim);
    b->xb = alloc64(T * m->dim);
    b->q = alloc64(T * m->n_head * m->hd);
    b->att = alloc64(T * m->n_head * m->hd);
    b->k = alloc64(T * m->n_kv * m->hd);
    b->v = alloc64(T * m->n_kv * m->hd);
    b->h1 = alloc64(T * m->ffn);
    b->h2 = alloc64(T * m->ffn);
    b->cs_g = alloc64(T * m->n_rot);
    b->cs_l = alloc64(T * m->n_rot);
    /* the kernels' own scratch, sized for the widest matmul input (dim, n_head*hd or ffn) and for
     * attention over the whole context with the widest window */
    int cols = m->dim, window = 0;
    if (m->n_head * m->hd > cols) cols = m->n_head * m->hd;
    if (m->ffn > cols) cols = m->ffn;
    for (int l = 0; l < nl; l++)
        if (m->layers[l].window > window) window = m->layers[l].window;
    b->mm_ws = alloc64(ops_matmul_scratch_floats(cfg->threads, cols));
    b->attn_ws_floats = cache_attend_scratch_floats(&b->c, m->n_head, cfg->max_tokens, window, cfg->threads);
    b->attn_ws = alloc64(b->attn_ws_floats);
    if (!b->x || !b->xb || !b->q || !b->att || !b->k || !b->v || !b->h1 || !b->h2 || !b->cs_g || !b->cs_l ||
        !b->mm_ws || !b->attn_ws) {
        snprintf(err, errlen, "out of memory (prefill chunk %d)", cfg->max_tokens);
        goto fail;
    }
    *out = &b->base;
    return 0;
fail:
    cpu_free(&b->base);
    return -1;
}

static void add_bias(float *y, const float *b, int T, int n) {
    if (!b) return;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < n; i++) y[(size_t)t * n + i] += b[i];
}

/* Per-head RMSNorm (qk-norm) then RoPE, for x [T][nh][hd]. */
static void qk_prepare(const backend_model *m, float *x, int T, int nh, const float *norm, const float *cs) {
    for (int t = 0; t < T; t++)
        for (int h = 0; h < nh; h++) {
            float *v = x + ((size_t)t * nh + h) * m->hd;
            if (norm) ops_rmsnorm(v, v, norm, m->hd, m->eps);
            ops_rope(v, cs + (size_t)t * m->n_rot, m->n_rot, m->neox);
        }
}

static int cpu_forward(backend *base, const int32_t *tokens, int T, int pos0, const int *rows, int n_rows,
                       float *logits, char *err, size_t errlen) {
    backend_cpu *b = (backend_cpu *)base;
    const backend_model *m = &b->m;
    cache *c = &b->c;
    pool *p = b->p;
    int dim = m->dim, qd = m->n_head * m->hd, kd = m->n_kv * m->hd;
    if (T < 1 || T > b->max_T) { snprintf(err, errlen, "chunk of %d tokens (max %d)", T, b->max_T); return -1; }
    if (pos0 < 0 || pos0 + T > c->n_ctx) {
        snprintf(err, errlen, "positions %d..%d exceed the context of %d tokens", pos0, pos0 + T - 1, c->n_ctx);
        return -1;
    }
    if (pos0 > b->depth) {
        snprintf(err, errlen, "a forward pass at position %d leaves a gap: the stream holds %d positions", pos0, b->depth);
        return -1;
    }
    for (int t = 0; t < T; t++) {
        if (tokens[t] < 0 || tokens[t] >= m->n_vocab) {
            snprintf(err, errlen, "token id %d at position %d is outside the vocabulary [0, %d)", tokens[t], pos0 + t, m->n_vocab);
            return -1;
        }
        float *x = b->x + (size_t)t * dim;
        ops_weight_row(&m->tok_emb, tokens[t], x);
        if (m->emb_scale != 1.0f)
            for (int i = 0; i < dim; i++) x[i] *= m->emb_scale;
        ops_rope_table(b->cs_g + (size_t)t * m->n_rot, pos0 + t, m->n_rot, &m->rope_global);
        ops_rope_table(b->cs_l + (size_t)t * m->n_rot, pos0 + t, m->n_rot, &m->rope_local);
    }
    for (int i = 0; i < n_rows; i++)
        if (rows[i] < 0 || rows[i] >= T) { snprintf(err, errlen, "row index %d outside the chunk", rows[i]); return -1; }
    for (int l = 0; l < m->n_layer; l++) {
        const backend_layer *ly = &m->layers[l];
        const float *cs = ly->rope_local ? b->cs_l : b->cs_g;
        for (int t = 0; t < T; t++) ops_rmsnorm(b->xb + (size_t)t * dim, b->x + (size_t)t * dim, ly->attn_norm, dim, m->eps);
        ops_mm qkv[3] = { { &ly->wq, b->q, qd }, { &ly->wk, b->k, kd }, { &ly->wv, b->v, kd } };
        if (ops_matmul_many(p, qkv, 3, b->xb, T, b->mm_ws)) goto kfail;
        add_bias(b->q, ly->bq, T, qd);
        add_bias(b->k, ly->bk, T, kd);
        add_bias(b->v, ly->bv, T, kd);
        qk_prepare(m, b->q, T, m->n_head, ly->q_norm, cs);
        qk_prepare(m, b->k, T, m->n_kv, ly->k_norm, cs);
        for (int t = 0; t < T; t++) cache_store(c, l, pos0 + t, b->k + (size_t)t * kd, b->v + (size_t)t * kd);
        cache_attn at = { l, T, pos0, m->n_head, ly->window, m->attn_scale, b->q, b->att };
        if (cache_attend_ws(p, c, &at, b->attn_ws, b->attn_ws_floats)) goto kfail;
        if (ops_matmul(p, &ly->wo, b->att, b->xb, T, dim, b->mm_ws)) goto kfail;
        for (int t = 0; t < T; t++) {
            float *o = b->xb + (size_t)t * dim, *x = b->x + (size_t)t * dim;
            if (ly->post_attn_norm) ops_rmsnorm(o, o, ly->post_attn_norm, dim, m->eps);
            for (int i = 0; i < dim; i++) x[i] += o[i];
            ops_rmsnorm(o, x, ly->ffn_norm, dim, m->eps);
        }
        ops_mm gate_up[2] = { { &ly->w_gate, b->h1, m->ffn }, { &ly->w_up, b->h2, m->ffn } };
        if (ops_matmul_many(p, gate_up, 2, b->xb, T, b->mm_ws)) goto kfail;
        for (int t = 0; t < T; t++) {
            float *g = b->h1 + (size_t)t * m->ffn, *u = b->h2 + (size_t)t * m->ffn;
            if (m->act == BACKEND_ACT_GEGLU) ops_geglu(g, u, m->ffn);
            else ops_swiglu(g, u, m->ffn);
        }
        if (ops_matmul(p, &ly->w_down, b->h1, b->xb, T, dim, b->mm_ws)) goto kfail;
        for (int t = 0; t < T; t++) {
            float *o = b->xb + (size_t)t * dim, *x = b->x + (size_t)t * dim;
            if (ly->post_ffn_norm) ops_rmsnorm(o, o, ly->post_ffn_norm, dim, m->eps);
            for (int i = 0; i < dim; i++) x[i] += o[i];
        }
    }
    b->depth = pos0 + T;
    /* logits for the requested rows only: gather their normed states, one matmul */
    for (int i = 0; i < n_rows; i++)
        ops_rmsnorm(b->xb + (size_t)i * dim, b->x + (size_t)rows[i] * dim, m->out_norm, dim, m->eps);
    if (n_rows > 0 && ops_matmul(p, &m->output, b->xb, logits, n_rows, m->n_vocab, b->mm_ws)) goto kfail;
    return 0;
kfail:
    snprintf(err, errlen, "a kernel of the forward pass refused its arguments or its scratch (a bug: create sizes the scratch)");
    return -1;
}

static int cpu_truncate(backend *base, int depth, char *err, size_t errlen) {
    backend_cpu *b = (backend_cpu *)base;
    if (depth < 0 || depth > b->depth) {
        snprintf(err, errlen, "cannot truncate to depth %d: the cache holds %d positions", depth, b->depth);
        return -1;
    }
    b->depth = depth;   /* the cache past it is overwritten by the next forward */
    return 0;
}

static uint64_t cpu_kv_bytes_per_token(const backend *base) {
    return cache_bytes_per_token(&((const backend_cpu *)base)->c);
}

static const char *cpu_name(const backend *base) {
    (void)base;
    /* the kernels' instruction set: avx512, avx2, or c; "+rope64" in a make ROPE=f64 build */
    return "cpu-" VEC16_ISA OPS_ROPE_TAG;
}

static int cpu_threads(const backend *base) { return pool_threads(((const backend_cpu *)base)->p); }

const backend_impl backend_cpu_impl = {
    "cpu", cpu_create, cpu_forward, cpu_truncate, cpu_kv_bytes_per_token, cpu_name, cpu_threads, cpu_free,
};
