/* backend_cpu.c — the "cpu" backend of kernels/backend.h: the forward pass with the kernels of
 * kernels/ops.c (matmul, norms, RoPE, activations) and the KV cache and attention of
 * kernels/cache.c, on a thread pool (kernels/pool.c). The layer is written out in backend.h;
 * the canonical operation orders that make every result independent of the chunk and the
 * thread count are in ops.h and cache.h (docs/DESIGN.md §2.5, §3). A mixture-of-experts layer
 * (moe_route, moe_ffn) runs each expert over the tokens routed to it, one matmul chain per token
 * and output as everywhere else, and sums a token's experts in its slot order (§2.5.9); the gating
 * (qwen3moe, qwen2moe, gpt-oss), expert biases, clamped SwiGLU and shared expert are its variants
 * (backend.h). Attention sinks (gpt-oss) are passed to the cache's attention per layer.
 */
#include "kernels/backend_impl.h"
#include "kernels/cache.h"
#include "kernels/kv.h"
#include "kernels/ops.h"
#include "kernels/pool.h"
#include "kernels/vec16.h"

#include <math.h>
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
    float *h1, *h2;     /* [max_T][max(ffn, ffn_sh)] (MoE: one expert's ffn, for the tokens routed
                         * to it; then the shared expert's) */
    /* MoE scratch (n_expert > 0; NULL otherwise), k = n_expert_used */
    float *probs;       /* [max_T][n_expert] router logits, then probabilities */
    int *sel;           /* [max_T][k] selected expert ids, slot order */
    float *wsel;        /* [max_T][k] their weights */
    float *xe, *de;     /* [max_T][dim] one expert's gathered inputs, its outputs */
    float *ye;          /* [max_T][k][dim] each token's expert outputs, slot order */
    int *gtok, *gslot;  /* [max_T] the tokens routed to one expert, and the slot it has for them */
    const int32_t *pin; /* [T][n_layer][k] the next forward's pinned experts, or NULL (backend_route) */
    int32_t *used;      /* [T][n_layer][k] where the next forward records its experts, or NULL */
    float *cs_g, *cs_l; /* [max_T][n_rot/2][2] RoPE tables, global and local */
    float *mm_ws;       /* [ops_matmul_scratch_floats(threads, widest input)] the matmuls' */
    float *attn_ws;     /* [attn_ws_floats] the attention's (cache_attend_scratch_floats) */
    size_t attn_ws_floats;
} backend_cpu;

/* Bytes of the scratch above for max_T tokens. */
static uint64_t scratch_bytes(const backend_model *m, int max_T) {
    uint64_t hw = m->ffn_sh > m->ffn ? m->ffn_sh : m->ffn;
    uint64_t per_tok = 2ull * m->dim + 2ull * m->n_head * m->hd + 2ull * m->n_kv * m->hd + 2ull * hw +
                       2ull * m->n_rot;
    if (m->n_expert > 0)   /* probs, sel, wsel, xe, de, ye, gtok, gslot */
        per_tok += (uint64_t)m->n_expert + 2ull * m->n_expert_used + 2ull * m->dim +
                   (uint64_t)m->n_expert_used * m->dim + 2;
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
    free(b->probs); free(b->sel); free(b->wsel); free(b->xe); free(b->de); free(b->ye); free(b->gtok); free(b->gslot);
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
    size_t hw = (size_t)(m->ffn_sh > m->ffn ? m->ffn_sh : m->ffn);
    b->h1 = alloc64(T * hw);
    b->h2 = alloc64(T * hw);
    b->cs_g = alloc64(T * m->n_rot);
    b->cs_l = alloc64(T * m->n_rot);
    int moe_ok = 1;
    if (m->n_expert > 0) {
        size_t k = (size_t)m->n_expert_used;
        b->probs = alloc64(T * m->n_expert);
        b->sel = malloc(sizeof(int) * T * k);
        b->wsel = alloc64(T * k);
        b->xe = alloc64(T * m->dim);
        b->de = alloc64(T * m->dim);
        b->ye = alloc64(T * k * m->dim);
        b->gtok = malloc(sizeof(int) * T);
        b->gslot = malloc(sizeof(int) * T);
        moe_ok = b->probs && b->sel && b->wsel && b->xe && b->de && b->ye && b->gtok && b->gslot;
    }
    /* the kernels' own scratch, sized for the widest matmul input (dim, n_head*hd or ffn) and for
     * attention over the whole context with the widest window */
    int cols = m->dim, window = 0;
    if (m->n_head * m->hd > cols) cols = m->n_head * m->hd;
    if (m->ffn > cols) cols = m->ffn;
    if (m->ffn_sh > cols) cols = m->ffn_sh;
    for (int l = 0; l < nl; l++)
        if (m->layers[l].window > window) window = m->layers[l].window;
    b->mm_ws = alloc64(ops_matmul_scratch_floats(cfg->threads, cols));
    b->attn_ws_floats = cache_attend_scratch_floats(&b->c, m->n_head, cfg->max_tokens, window, cfg->threads);
    b->attn_ws = alloc64(b->attn_ws_floats);
    if (!b->x || !b->xb || !b->q || !b->att || !b->k || !b->v || !b->h1 || !b->h2 || !b->cs_g || !b->cs_l ||
        !b->mm_ws || !b->attn_ws || !moe_ok) {
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

/* softmax of x[n] in place: max subtracted, expf, the sum in double in index order, times its f32
 * inverse. */
static void softmax_row(float *x, int n) {
    float mx = x[0];
    for (int i = 1; i < n; i++) if (x[i] > mx) mx = x[i];
    double sum = 0;
    for (int i = 0; i < n; i++) { x[i] = expf(x[i] - mx); sum += x[i]; }
    float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

/* The router for T tokens: probs [T][n_expert] holds the router logits (bias added) on entry. Per
 * token, by m->gate (backend.h): SOFTMAX_ALL takes the softmax of all logits (softmax_row), then
 * the experts — the k largest probabilities, largest first, ties to the lower id, or the pinned
 * ids pin [T][n_layer][k] of layer l — and their weights p / max(sum of the k p in slot order,
 * 2^-14); SOFTMAX_PLAIN the same experts with their probabilities as weights; SOFTMAX_TOPK takes the k largest logits (the same order and ties) or the pinned ids, and
 * the softmax_row of their k logits in slot order as the weights. Ids and weights go to sel /
 * wsel [T][k]; used [T][n_layer][k] (may be NULL) receives the ids. */
static void moe_route(const backend_model *m, float *probs, int T, int l, const int32_t *pin, int32_t *used,
                      int *sel, float *wsel) {
    int ne = m->n_expert, k = m->n_expert_used;
    for (int t = 0; t < T; t++) {
        float *p = probs + (size_t)t * ne;
        int *s = sel + (size_t)t * k;
        float *w = wsel + (size_t)t * k;
        if (m->gate != BACKEND_GATE_SOFTMAX_TOPK) softmax_row(p, ne);
        const int32_t *pt = pin ? pin + ((size_t)t * m->n_layer + l) * k : NULL;
        for (int j = 0; j < k; j++) {
            if (pt) { s[j] = pt[j]; continue; }
            int best = -1;
            for (int e = 0; e < ne; e++) {
                int taken = 0;
                for (int i = 0; i < j; i++) taken |= s[i] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            s[j] = best;
        }
        if (m->gate == BACKEND_GATE_SOFTMAX_TOPK) {
            for (int j = 0; j < k; j++) w[j] = p[s[j]];
            softmax_row(w, k);
        } else if (m->gate == BACKEND_GATE_SOFTMAX_PLAIN) {
            for (int j = 0; j < k; j++) w[j] = p[s[j]];
        } else {
            float wsum = 0;
            for (int j = 0; j < k; j++) wsum += p[s[j]];
            if (wsum < 6.103515625e-5f) wsum = 6.103515625e-5f;   /* 2^-14, as llama.cpp clamps it */
            for (int j = 0; j < k; j++) w[j] = p[s[j]] / wsum;
        }
        if (used)
            for (int j = 0; j < k; j++) used[((size_t)t * m->n_layer + l) * k + j] = s[j];
    }
}

/* The gate activation of m on one token's g, u [n], into g. */
static void ffn_act(const backend_model *m, float *g, const float *u, int n) {
    if (m->act == BACKEND_ACT_GEGLU) ops_geglu(g, u, n);
    else if (m->act == BACKEND_ACT_SWIGLU_OAI) ops_swiglu_oai(g, u, n, BACKEND_OAI_ALPHA, BACKEND_OAI_LIMIT);
    else ops_swiglu(g, u, n);
}

/* The MoE FFN of layer l for T tokens: xb [T][dim] normed input; adds each token's weighted sum of
 * its experts to x [T][dim]. Experts run in id order, each on the tokens routed to it (gathered in
 * token order), biases (gpt-oss) added per row; a token's k outputs are then summed in slot order
 * (backend.h). Returns 0 or -1. */
static int moe_ffn(backend_cpu *b, const backend_layer *ly, int l, int T) {
    const backend_model *m = &b->m;
    int dim = m->dim, ffn = m->ffn, k = m->n_expert_used;
    if (ops_matmul(b->p, &ly->w_router, b->xb, b->probs, T, m->n_expert, b->mm_ws)) return -1;
    add_bias(b->probs, ly->b_router, T, m->n_expert);
    moe_route(m, b->probs, T, l, b->pin, b->used, b->sel, b->wsel);
    for (int e = 0; e < m->n_expert; e++) {
        int n = 0;
        for (int t = 0; t < T; t++)
            for (int j = 0; j < k; j++)
                if (b->sel[(size_t)t * k + j] == e) {
                    b->gtok[n] = t;
                    b->gslot[n] = j;
                    memcpy(b->xe + (size_t)n * dim, b->xb + (size_t)t * dim, sizeof(float) * dim);
                    n++;
                }
        if (n == 0) continue;
        /* expert e's matrices: views into the stacks */
        ops_weight g = ly->w_gate, u = ly->w_up, d = ly->w_down;
        g.rows = u.rows = ffn;
        g.data += (size_t)e * ffn * g.row_bytes;
        u.data += (size_t)e * ffn * u.row_bytes;
        d.rows = dim;
        d.data += (size_t)e * dim * d.row_bytes;
        ops_mm gate_up[2] = { { &g, b->h1, ffn }, { &u, b->h2, ffn } };
        if (ops_matmul_many(b->p, gate_up, 2, b->xe, n, b->mm_ws)) return -1;
        add_bias(b->h1, ly->b_gate ? ly->b_gate + (size_t)e * ffn : NULL, n, ffn);
        add_bias(b->h2, ly->b_up ? ly->b_up + (size_t)e * ffn : NULL, n, ffn);
        for (int i = 0; i < n; i++) ffn_act(m, b->h1 + (size_t)i * ffn, b->h2 + (size_t)i * ffn, ffn);
        if (ops_matmul(b->p, &d, b->h1, b->de, n, dim, b->mm_ws)) return -1;
        add_bias(b->de, ly->b_down ? ly->b_down + (size_t)e * dim : NULL, n, dim);
        for (int i = 0; i < n; i++)
            memcpy(b->ye + ((size_t)b->gtok[i] * k + b->gslot[i]) * dim, b->de + (size_t)i * dim, sizeof(float) * dim);
    }
    if (m->ffn_sh > 0) {   /* the shared expert on every token: de [T][dim], its gate logits in probs [T] */
        int fs = m->ffn_sh;
        if (ops_matmul(b->p, &ly->w_sh_inp, b->xb, b->probs, T, 1, b->mm_ws)) return -1;
        ops_mm gate_up[2] = { { &ly->w_sh_gate, b->h1, fs }, { &ly->w_sh_up, b->h2, fs } };
        if (ops_matmul_many(b->p, gate_up, 2, b->xb, T, b->mm_ws)) return -1;
        for (int t = 0; t < T; t++) ops_swiglu(b->h1 + (size_t)t * fs, b->h2 + (size_t)t * fs, fs);
        if (ops_matmul(b->p, &ly->w_sh_down, b->h1, b->de, T, dim, b->mm_ws)) return -1;
    }
    for (int t = 0; t < T; t++) {
        float *x = b->x + (size_t)t * dim, *o = b->xb + (size_t)t * dim;   /* xb is free again: reuse it */
        const float *w = b->wsel + (size_t)t * k, *y = b->ye + (size_t)t * k * dim;
        for (int i = 0; i < dim; i++) o[i] = w[0] * y[i];
        for (int j = 1; j < k; j++)
            for (int i = 0; i < dim; i++) o[i] = o[i] + w[j] * y[(size_t)j * dim + i];
        if (m->ffn_sh > 0) {
            /* sigmoid as llama.cpp's graph forms it: silu(c) / c */
            float c = b->probs[t], g = c / (1.0f + expf(-c)) / c;
            const float *sh = b->de + (size_t)t * dim;
            for (int i = 0; i < dim; i++) o[i] = o[i] + sh[i] * g;
        }
        for (int i = 0; i < dim; i++) x[i] += o[i];
    }
    return 0;
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
    const int32_t *pin = b->pin;
    b->pin = NULL;   /* backend_route applies to this forward only */
    int32_t *used = b->used;
    b->used = NULL;
    if (m->n_expert > 0 && pin)
        for (size_t i = 0; i < (size_t)T * m->n_layer * m->n_expert_used; i++)
            if (pin[i] < 0 || pin[i] >= m->n_expert) {
                snprintf(err, errlen, "pinned expert id %d at position %d is outside [0, %d)", pin[i],
                         pos0 + (int)(i / ((size_t)m->n_layer * m->n_expert_used)), m->n_expert);
                return -1;
            }
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
        cache_attn at = { l, T, pos0, m->n_head, ly->window, m->attn_scale, b->q, b->att, ly->sinks };
        if (cache_attend_ws(p, c, &at, b->attn_ws, b->attn_ws_floats)) goto kfail;
        if (ops_matmul(p, &ly->wo, b->att, b->xb, T, dim, b->mm_ws)) goto kfail;
        add_bias(b->xb, ly->bo, T, dim);
        for (int t = 0; t < T; t++) {
            float *o = b->xb + (size_t)t * dim, *x = b->x + (size_t)t * dim;
            if (ly->post_attn_norm) ops_rmsnorm(o, o, ly->post_attn_norm, dim, m->eps);
            for (int i = 0; i < dim; i++) x[i] += o[i];
            ops_rmsnorm(o, x, ly->ffn_norm, dim, m->eps);
        }
        if (m->n_expert > 0) {
            b->pin = pin;
            b->used = used;
            int rc = moe_ffn(b, ly, l, T);
            b->pin = NULL;
            b->used = NULL;
            if (rc) goto kfail;
            continue;
        }
        ops_mm gate_up[2] = { { &ly->w_gate, b->h1, m->ffn }, { &ly->w_up, b->h2, m->ffn } };
        if (ops_matmul_many(p, gate_up, 2, b->xb, T, b->mm_ws)) goto kfail;
        for (int t = 0; t < T; t++) ffn_act(m, b->h1 + (size_t)t * m->ffn, b->h2 + (size_t)t * m->ffn, m->ffn);
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

static void cpu_route(backend *base, const int32_t *pin, int32_t *used) {
    backend_cpu *b = (backend_cpu *)base;
    b->pin = pin;
    b->used = used;
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
    /* the kernels' instruction set: avx512, avx2, or c; "+rope-f32" with llama.cpp's f32 RoPE angles
     * (not comparable with the default, exact ones: the handshake tells them apart) */
    const backend_cpu *b = (const backend_cpu *)base;
    return b->m.rope_global.f32_angles ? "cpu-" VEC16_ISA "+rope-f32" : "cpu-" VEC16_ISA;
}

static int cpu_threads(const backend *base) { return pool_threads(((const backend_cpu *)base)->p); }

const backend_impl backend_cpu_impl = {
    "cpu", cpu_create, cpu_forward, cpu_truncate, cpu_route, cpu_kv_bytes_per_token, cpu_name, cpu_threads, cpu_free,
};
