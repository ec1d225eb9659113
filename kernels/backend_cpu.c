/* backend_cpu.c — the "cpu" backend of kernels/backend.h: the forward pass with the kernels of
 * kernels/ops.c (matmul, norms, RoPE, activations), the KV cache of kernels/cache.c and the
 * attention of kernels/attn.c, on a thread pool (kernels/pool.c). The layer is written out in
 * backend.h; the canonical operation orders that make every result independent of the chunk and the
 * thread count are in ops.h and attn.h (docs/DESIGN.md §2.5, §3). A mixture-of-experts layer
 * (moe_route, moe_ffn) runs each expert over the tokens routed to it, one matmul chain per token
 * and output as everywhere else, and sums a token's experts in its slot order (§2.5.9); the gating
 * (qwen3moe, qwen2moe, gpt-oss), expert biases, clamped SwiGLU and shared expert are its variants
 * (backend.h). Attention sinks (gpt-oss) are passed to the cache's attention per layer.
 * A hybrid model (qwen35) has linear-attention layers (linear_layer: causal conv, gated delta
 * rule, token by token in position order) whose f32 states live here, not in the KV cache; the
 * backend exposes them through the seam's state calls (cpu_state_*), and kernels/stream.c above
 * it keeps the token ids, snapshots and route log that bring them back exactly after a
 * truncation (docs/DESIGN.md §3.1.3).
 */
#include "kernels/backend_impl.h"
#include "kernels/errmsg.h"
#include "kernels/attn.h"
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
    float *gate;        /* [max_T][n_head*hd] attention output gates (attn_gate), or NULL */
    float *qg;          /* [max_T][2*n_head*hd] the gated wq's output (queries, gates per head), or NULL */
    /* hybrid models: NULL / 0 when no layer is recurrent (docs/DESIGN.md §3.1.3) */
    int *kv_layer;      /* [n_layer] the cache layer of an attention layer, -1 for a linear one */
    int n_rec;          /* linear-attention layers */
    int cd;             /* conv channels 2*nk*d + nv*d */
    size_t conv_floats; /* (conv-1) * cd: one layer's conv state [conv-1][cd], oldest input first */
    size_t rec_floats;  /* conv_floats + nv*d*d: one layer's states, the conv state then S [nv][d][d] */
    float *state;       /* [n_rec][rec_floats] the live states after position depth-1 (the seam's
                         * state_get / state_set; kernels/stream.c snapshots them) */
    float *mix;         /* [max_T][cd] W_qkv xb, then the conv outputs (silu, q and k L2-normed) */
    float *zb;          /* [max_T][nv*d] W_z xb */
    float *bet, *alp;   /* [max_T][nv] W_beta xb, W_alpha xb, then beta and the decay exp(g) */
    float *lo;          /* [max_T][nv*d] the recurrence's outputs, then gated-normed */
    float *mm_ws;       /* [ops_matmul_scratch_floats(threads, widest input)] the matmuls' */
    float *attn_ws;     /* [attn_ws_floats] the attention's (attn_scratch_floats) */
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
    if (m->attn_gate) per_tok += 3ull * m->n_head * m->hd;   /* gate, qg */
    if (m->ssm_d > 0)   /* mix, zb, bet, alp, lo */
        per_tok += (2ull * m->ssm_nk + m->ssm_nv) * m->ssm_d + 2ull * m->ssm_nv * m->ssm_d + 2ull * m->ssm_nv;
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
    free(b->gate); free(b->qg); free(b->kv_layer); free(b->state);
    free(b->mix); free(b->zb); free(b->bet); free(b->alp); free(b->lo);
    free(b->probs); free(b->sel); free(b->wsel); free(b->xe); free(b->de); free(b->ye); free(b->gtok); free(b->gslot);
    if (b->p) pool_free(b->p);
    cache_free(&b->c);
    free(b);
}

/* The steps of cpu_create below. m is the model (b->m is its copy), cfg the configuration. */

/* Which layers have a KV cache (b->kv_layer) and the formats of their cells: *fk, *fv [n_attn][n_kv]
 * (malloc'd; the caller frees them, also on failure), each checked against the head dim, with the
 * KV bytes per token they reserve added to need. */
static int kv_formats(backend_cpu *b, const backend_model *m, const backend_config *cfg, int n_attn, kv_fmt **fk,
                      kv_fmt **fv, backend_need *need, char *err, size_t errlen) {
    int nl = m->n_layer;
    b->kv_layer = malloc(sizeof(int) * (size_t)nl);
    *fk = malloc(sizeof **fk * (size_t)n_attn * m->n_kv);
    *fv = malloc(sizeof **fv * (size_t)n_attn * m->n_kv);
    if (!b->kv_layer || !*fk || !*fv) return errmsg_set(err, errlen, -1, "out of memory");
    for (int l = 0, a = 0; l < nl; l++) {   /* a linear layer's cells are ignored (backend.h) */
        b->kv_layer[l] = m->layers[l].recurrent ? -1 : a;
        if (m->layers[l].recurrent) continue;
        for (int g = 0; g < m->n_kv; g++) {
            size_t i = (size_t)l * m->n_kv + g, j = (size_t)a * m->n_kv + g;
            if (kv_fmt_check(cfg->kv_k[i], m->hd, err, errlen) || kv_fmt_check(cfg->kv_v[i], m->hd, err, errlen))
                return -1;
            (*fk)[j] = cfg->kv_k[i];
            (*fv)[j] = cfg->kv_v[i];
            need->kv_bytes_per_token += kv_reserve_bytes((*fk)[j], m->hd, 0) + kv_reserve_bytes((*fv)[j], m->hd, 1);
        }
        a++;
    }
    return 0;
}

/* A hybrid model's live recurrent states (docs/DESIGN.md §3.1.3): their sizes into b, their bytes
 * added to need (the snapshots, token ids and route log are kernels/stream.c's, which
 * kernels/backend.c adds to need itself). */
static void size_recurrent(backend_cpu *b, const backend_model *m, backend_need *need) {
    b->cd = (2 * m->ssm_nk + m->ssm_nv) * m->ssm_d;
    b->conv_floats = (size_t)(m->ssm_conv - 1) * b->cd;
    b->rec_floats = b->conv_floats + (size_t)m->ssm_nv * m->ssm_d * m->ssm_d;
    need->scratch_bytes += 4ull * b->n_rec * b->rec_floats;
}

/* The scratch of a forward pass of up to T tokens (the dense part and the attention gates).
 * Returns 1 when every buffer was allocated. */
static int alloc_dense(backend_cpu *b, const backend_model *m, size_t T) {
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
    int ok = b->x && b->xb && b->q && b->att && b->k && b->v && b->h1 && b->h2 && b->cs_g && b->cs_l;
    if (m->attn_gate) {
        b->gate = alloc64(T * m->n_head * m->hd);
        b->qg = alloc64(T * 2 * m->n_head * m->hd);
        ok = ok && b->gate && b->qg;
    }
    return ok;
}

/* A hybrid model's live states (zeros: position 0) and linear-attention scratch. Returns 1 when
 * every buffer was allocated. */
static int alloc_recurrent(backend_cpu *b, const backend_model *m, size_t T) {
    size_t nvd = (size_t)m->ssm_nv * m->ssm_d;
    b->state = calloc((size_t)b->n_rec * b->rec_floats, sizeof(float));
    b->mix = alloc64(T * b->cd);
    b->zb = alloc64(T * nvd);
    b->bet = alloc64(T * m->ssm_nv);
    b->alp = alloc64(T * m->ssm_nv);
    b->lo = alloc64(T * nvd);
    return b->state && b->mix && b->zb && b->bet && b->alp && b->lo;
}

/* A MoE model's routing and expert scratch. Returns 1 when every buffer was allocated. */
static int alloc_moe(backend_cpu *b, const backend_model *m, size_t T) {
    size_t k = (size_t)m->n_expert_used;
    b->probs = alloc64(T * m->n_expert);
    b->sel = malloc(sizeof(int) * T * k);
    b->wsel = alloc64(T * k);
    b->xe = alloc64(T * m->dim);
    b->de = alloc64(T * m->dim);
    b->ye = alloc64(T * k * m->dim);
    b->gtok = malloc(sizeof(int) * T);
    b->gslot = malloc(sizeof(int) * T);
    return b->probs && b->sel && b->wsel && b->xe && b->de && b->ye && b->gtok && b->gslot;
}

/* The kernels' own scratch, sized for the widest matmul input (dim, n_head*hd or ffn) and for
 * attention over the whole context with the widest window (after the cache is made). Returns 1
 * when both were allocated. */
static int alloc_kernel_scratch(backend_cpu *b, const backend_model *m, const backend_config *cfg) {
    int cols = m->dim, window = 0;
    if (m->n_head * m->hd > cols) cols = m->n_head * m->hd;
    if (m->ffn > cols) cols = m->ffn;
    if (m->ssm_nv * m->ssm_d > cols) cols = m->ssm_nv * m->ssm_d;
    if (m->ffn_sh > cols) cols = m->ffn_sh;
    for (int l = 0; l < m->n_layer; l++)
        if (m->layers[l].window > window) window = m->layers[l].window;
    b->mm_ws = alloc64(ops_matmul_scratch_floats(cfg->threads, cols));
    b->attn_ws_floats = attn_scratch_floats(&b->c, m->n_head, cfg->max_tokens, window, cfg->threads);
    b->attn_ws = alloc64(b->attn_ws_floats);
    return b->mm_ws && b->attn_ws;
}

static int cpu_create(const backend_model *m, const backend_config *cfg, backend **out, char *err, size_t errlen) {
    int nl = m->n_layer;
    backend_cpu *b = calloc(1, sizeof *b);
    kv_fmt *fk = NULL, *fv = NULL;   /* [n_attn][n_kv] the formats of the layers with a KV cache */
    *out = NULL;
    if (!b) return errmsg_set(err, errlen, -1, "out of memory");
    b->base.impl = &backend_cpu_impl;
    b->m = *m;
    b->max_T = cfg->max_tokens;
    backend_need need = { 0, scratch_bytes(m, cfg->max_tokens) };
    int n_attn = 0;
    for (int l = 0; l < nl; l++) n_attn += !m->layers[l].recurrent;
    b->n_rec = nl - n_attn;
    if (b->n_rec > 0 && (m->ssm_conv < 1 || m->ssm_conv > BACKEND_MAX_CONV || m->ssm_d < 1 || m->ssm_nk < 1 ||
                         m->ssm_nv % m->ssm_nk)) {
        errmsg_set(err, errlen, -1, "linear-attention layers with conv kernel %d, head dim %d, %d key / %d value heads are not "
                   "supported (conv kernel at most %d)", m->ssm_conv, m->ssm_d, m->ssm_nk, m->ssm_nv, BACKEND_MAX_CONV);
        goto fail;
    }
    if (n_attn == 0) { errmsg_set(err, errlen, -1, "the model has no attention layer (every layer is linear attention)"); goto fail; }
    if (kv_formats(b, m, cfg, n_attn, &fk, &fv, &need, err, errlen)) goto fail;
    if (b->n_rec > 0) size_recurrent(b, m, &need);
    if (cfg->mem_check && cfg->mem_check(cfg->mem_ctx, &need, err, errlen)) goto fail;
    if (cache_create_heads(&b->c, fk, fv, n_attn, m->n_kv, m->hd, cfg->n_ctx, err, errlen)) goto fail;
    free(fk);
    free(fv);
    fk = fv = NULL;
    if (pool_create(cfg->threads, &b->p)) {
        errmsg_set(err, errlen, -1, "cannot start %d threads", cfg->threads);
        goto fail;
    }
    size_t T = (size_t)cfg->max_tokens;
    int ok = alloc_dense(b, m, T);
    if (b->n_rec > 0) ok = alloc_recurrent(b, m, T) && ok;
    if (m->n_expert > 0) ok = alloc_moe(b, m, T) && ok;
    ok = alloc_kernel_scratch(b, m, cfg) && ok;
    if (!ok) {
        errmsg_set(err, errlen, -1, "out of memory (prefill chunk %d)", cfg->max_tokens);
        goto fail;
    }
    *out = &b->base;
    return 0;
fail:
    free(fk);
    free(fv);
    cpu_free(&b->base);
    return -1;
}

static void add_bias(float *y, const float *b, int T, int n) {
    if (!b) return;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < n; i++) y[(size_t)t * n + i] += b[i];
}

/* Per-head RMSNorm (qk-norm) then RoPE, for one token's x [nh][hd] at its table row cs [n_rot]. */
static void qk_prepare(const backend_model *m, float *x, int nh, const float *norm, const float *cs) {
    for (int h = 0; h < nh; h++) {
        float *v = x + (size_t)h * m->hd;
        if (norm) ops_rmsnorm(v, v, norm, m->hd, m->eps);
        ops_rope(v, cs, m->n_rot, m->neox);
    }
}

/* The steps between the matmuls that work on one token's rows alone, so that any split of the
 * tokens over the threads computes the same bits (a token's row is one item's, in a fixed order):
 *   TOK_IN   the attention norm: xb = rmsnorm(x)
 *   TOK_QK   q, k, v biases, qk-norm and RoPE of q and k, k and v into the cache (unless keep_store)
 *   TOK_MID  post-attention norm of xb, x += xb, xb = ffn-norm(x)
 *   TOK_OUT  post-FFN norm of xb, x += xb */
typedef enum { TOK_IN, TOK_QK, TOK_MID, TOK_OUT } tok_step;
typedef struct {
    backend_cpu *b;
    const backend_layer *ly;
    tok_step step;
    int T, per;         /* tokens; tokens per pool item */
    int cl, pos0;       /* TOK_QK: the cache layer, the chunk's first position */
    int keep_store;     /* TOK_QK: 1 = the caller stores k and v itself, in position order */
    const float *cs;    /* TOK_QK: the RoPE table [T][n_rot] */
} tok_ctx;

static void tok_row(const tok_ctx *c, int t) {
    backend_cpu *b = c->b;
    const backend_model *m = &b->m;
    const backend_layer *ly = c->ly;
    int dim = m->dim, qd = m->n_head * m->hd, kd = m->n_kv * m->hd;
    float *o = b->xb + (size_t)t * dim, *x = b->x + (size_t)t * dim;
    float *q = b->q + (size_t)t * qd, *k = b->k + (size_t)t * kd, *v = b->v + (size_t)t * kd;
    switch (c->step) {
    case TOK_IN: ops_rmsnorm(o, x, ly->attn_norm, dim, m->eps); break;
    case TOK_QK: {
        const float *cs = c->cs + (size_t)t * m->n_rot;   /* [n_rot] token t's RoPE row */
        add_bias(q, ly->bq, 1, qd);
        add_bias(k, ly->bk, 1, kd);
        add_bias(v, ly->bv, 1, kd);
        qk_prepare(m, q, m->n_head, ly->q_norm, cs);
        qk_prepare(m, k, m->n_kv, ly->k_norm, cs);
        if (!c->keep_store) cache_store(&b->c, c->cl, c->pos0 + t, k, v);
        break;
    }
    case TOK_MID:
        if (ly->post_attn_norm) ops_rmsnorm(o, o, ly->post_attn_norm, dim, m->eps);
        for (int i = 0; i < dim; i++) x[i] += o[i];
        ops_rmsnorm(o, x, ly->ffn_norm, dim, m->eps);
        break;
    case TOK_OUT:
        if (ly->post_ffn_norm) ops_rmsnorm(o, o, ly->post_ffn_norm, dim, m->eps);
        for (int i = 0; i < dim; i++) x[i] += o[i];
        break;
    }
}

static void tok_item(void *vctx, int item, int thread) {
    (void)thread;
    const tok_ctx *c = vctx;
    int t1 = (item + 1) * c->per < c->T ? (item + 1) * c->per : c->T;
    for (int t = item * c->per; t < t1; t++) tok_row(c, t);
}

/* Runs c's step on its T tokens: on the pool when there are enough of them (a decode step's one
 * token stays on the caller: the pool's hand-off would cost more than the row). */
static void tok_run(pool *p, tok_ctx *c) {
    int n = pool_threads(p) * 4 < c->T ? pool_threads(p) * 4 : c->T;
    if (c->T < 8 || pool_threads(p) == 1) {
        for (int t = 0; t < c->T; t++) tok_row(c, t);
        return;
    }
    c->per = (c->T + n - 1) / n;
    pool_run(p, tok_item, c, (c->T + c->per - 1) / c->per);
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

/* ffn_act on T rows of n: g [T][n] (in place), u [T][n], the elements split across the pool in
 * contiguous ranges. Each element's value depends on its own g and u only, so any split gives the
 * same bits; run serially this was ~3 % of a decode step's wall time with the other thread idle
 * (kernels/NOTES.md change 28). */
typedef struct {
    const backend_model *m;
    float *g;
    const float *u;
    size_t total, per;   /* T * n elements, per item */
} act_ctx;

static void act_item(void *vctx, int item, int thread) {
    (void)thread;
    const act_ctx *c = vctx;
    size_t a = (size_t)item * c->per, e = a + c->per < c->total ? a + c->per : c->total;
    if (a < e) ffn_act(c->m, c->g + a, c->u + a, (int)(e - a));
}

static void ffn_act_rows(pool *p, const backend_model *m, float *g, const float *u, int T, int n) {
    act_ctx c = { m, g, u, (size_t)T * n, 0 };
    size_t items = (size_t)pool_threads(p) * 4;
    if (c.total < 512 || items < 2) { ffn_act(m, g, u, (int)c.total); return; }
    c.per = (c.total + items - 1) / items;
    pool_run(p, act_item, &c, (int)((c.total + c.per - 1) / c.per));
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
        backend_weight g = ly->w_gate, u = ly->w_up, d = ly->w_down;
        g.rows = u.rows = ffn;
        g.data += (size_t)e * ffn * g.row_bytes;
        u.data += (size_t)e * ffn * u.row_bytes;
        d.rows = dim;
        d.data += (size_t)e * dim * d.row_bytes;
        ops_mm gate_up[2] = { { &g, b->h1, ffn }, { &u, b->h2, ffn } };
        if (ops_matmul_many(b->p, gate_up, 2, b->xe, n, b->mm_ws)) return -1;
        add_bias(b->h1, ly->b_gate ? ly->b_gate + (size_t)e * ffn : NULL, n, ffn);
        add_bias(b->h2, ly->b_up ? ly->b_up + (size_t)e * ffn : NULL, n, ffn);
        ffn_act_rows(b->p, m, b->h1, b->h2, n, ffn);
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
            /* its gate's sigmoid as each llama.cpp graph forms it: silu(c) / c (qwen2moe), or
             * 1 / (1 + exp(-c)) (qwen35moe) */
            float c = b->probs[t], g = m->sh_gate_plain ? 1.0f / (1.0f + expf(-c)) : c / (1.0f + expf(-c)) / c;
            const float *sh = b->de + (size_t)t * dim;
            for (int i = 0; i < dim; i++) o[i] = o[i] + sh[i] * g;
        }
        for (int i = 0; i < dim; i++) x[i] += o[i];
    }
    return 0;
}

/* ---- linear-attention layers (qwen35; kernels/backend.h, docs/DESIGN.md §3.1.3) ---------------- */

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/* x[n] / sqrt(sum x^2 + eps), as llama.cpp forms it (an RMSNorm with eps/n, times 1/sqrt(n)); the
 * sum of squares in the canonical dot order. In place. */
static void l2norm(float *x, int n, float eps) {
    float ss = ops_dot(x, x, n);
    float scale = 1.0f / sqrtf(ss / (float)n + eps / (float)n), post = 1.0f / sqrtf((float)n);
    for (int i = 0; i < n; i++) x[i] = x[i] * scale * post;
}

/* The gated delta rule of one value head h over the T tokens of a forward, in position order. */
typedef struct {
    const backend_model *m;
    const float *mix;   /* [T][cd] conv outputs: q [nk][d], k [nk][d], v [nv][d] */
    const float *bet;   /* [T][nv] beta */
    const float *dec;   /* [T][nv] exp(g) */
    float *S;           /* [nv][d][d] the layer's state, row j = value dim j */
    float *lo;          /* [T][nv][d] outputs */
    int T, cd;
} delta_job;

static void delta_head(void *vctx, int h, int thread) {
    (void)thread;
    const delta_job *J = vctx;
    int d = J->m->ssm_d, nk = J->m->ssm_nk, nv = J->m->ssm_nv, kh = h % nk;
    float scale = 1.0f / sqrtf((float)d);
    float *S = J->S + (size_t)h * d * d;
    for (int t = 0; t < J->T; t++) {
        const float *row = J->mix + (size_t)t * J->cd;
        const float *q = row + (size_t)kh * d, *k = row + (size_t)(nk + kh) * d, *v = row + (size_t)(2 * nk + h) * d;
        float beta = J->bet[(size_t)t * nv + h], decay = J->dec[(size_t)t * nv + h];
        float *o = J->lo + ((size_t)t * nv + h) * d;
        for (size_t i = 0; i < (size_t)d * d; i++) S[i] *= decay;
        for (int j = 0; j < d; j++) {
            float *Sj = S + (size_t)j * d;
            float e = (v[j] - ops_dot(Sj, k, d)) * beta;
            for (int i = 0; i < d; i++) Sj[i] = fmaf(e, k[i], Sj[i]);
            o[j] = ops_dot(Sj, q, d) * scale;
        }
    }
}

/* Linear-attention layer ly for T tokens: xb [T][dim] normed input; st this layer's states
 * (conv [conv-1][cd], then S [nv][d][d]), advanced by the T tokens; the output projection lands
 * in xb. Every step is per token in position order or per channel / head, so the result and the
 * states are the same whatever the chunk. Returns 0 or -1 (a kernel refused). */
static int linear_layer(backend_cpu *b, const backend_layer *ly, float *st, int T) {
    const backend_model *m = &b->m;
    int cd = b->cd, d = m->ssm_d, nk = m->ssm_nk, nv = m->ssm_nv, K = m->ssm_conv, nvd = nv * d;
    ops_mm in[4] = { { &ly->w_qkv, b->mix, cd }, { &ly->w_z, b->zb, nvd }, { &ly->w_beta, b->bet, nv },
                     { &ly->w_alpha, b->alp, nv } };
    if (ops_matmul_many(b->p, in, 4, b->xb, T, b->mm_ws)) return -1;
    /* causal conv per channel over [the conv-1 previous inputs, this one], then silu; in place */
    float *conv = st;   /* [K-1][cd] */
    for (int ch = 0; ch < cd; ch++) {
        const float *w = ly->conv_w + (size_t)ch * K;
        float win[BACKEND_MAX_CONV];
        for (int i = 0; i < K - 1; i++) win[i] = conv[(size_t)i * cd + ch];
        for (int t = 0; t < T; t++) {
            float *x = b->mix + (size_t)t * cd + ch;
            win[K - 1] = *x;
            float sum = 0.0f;
            for (int i = 0; i < K; i++) sum += win[i] * w[i];
            for (int i = 0; i < K - 1; i++) win[i] = win[i + 1];
            *x = sum / (1.0f + expf(-sum));
        }
        for (int i = 0; i < K - 1; i++) conv[(size_t)i * cd + ch] = win[i];
    }
    for (int t = 0; t < T; t++) {
        float *row = b->mix + (size_t)t * cd;
        for (int h = 0; h < 2 * nk; h++) l2norm(row + (size_t)h * d, d, m->eps);   /* q heads, then k heads */
        for (int h = 0; h < nv; h++) {
            size_t i = (size_t)t * nv + h;
            float a = b->alp[i] + ly->dt_bias[h];
            float sp = a > 20.0f ? a : logf(1.0f + expf(a));
            b->alp[i] = expf(sp * ly->ssm_a[h]);
            b->bet[i] = sigmoidf(b->bet[i]);
        }
    }
    delta_job J = { m, b->mix, b->bet, b->alp, st + b->conv_floats, b->lo, T, cd };
    pool_run(b->p, delta_head, &J, nv);
    for (int t = 0; t < T; t++)   /* gated RMSNorm per value head: rmsnorm(o) * ssm_norm * silu(z) */
        for (int h = 0; h < nv; h++) {
            float *o = b->lo + ((size_t)t * nv + h) * d;
            const float *z = b->zb + ((size_t)t * nv + h) * d;
            ops_rmsnorm(o, o, ly->ssm_norm, d, m->eps);
            for (int i = 0; i < d; i++) o[i] = o[i] * (z[i] / (1.0f + expf(-z[i])));
        }
    return ops_matmul(b->p, &ly->w_ssm_out, b->lo, b->xb, T, m->dim, b->mm_ws);
}

/* The steps of cpu_forward below work on b's scratch for a chunk of T tokens at positions pos0... */

/* The tokens' embeddings into b->x, and their RoPE tables (global and local). Refuses a token id
 * outside the vocabulary. */
static int embed(backend_cpu *b, const int32_t *tokens, int T, int pos0, char *err, size_t errlen) {
    const backend_model *m = &b->m;
    int dim = m->dim;
    for (int t = 0; t < T; t++) {
        if (tokens[t] < 0 || tokens[t] >= m->n_vocab) {
            return errmsg_set(err, errlen, -1, "token id %d at position %d is outside the vocabulary [0, %d)", tokens[t], pos0 + t, m->n_vocab);
        }
        float *x = b->x + (size_t)t * dim;
        ops_weight_row(&m->tok_emb, tokens[t], x);
        if (m->emb_scale != 1.0f)
            for (int i = 0; i < dim; i++) x[i] *= m->emb_scale;
        ops_rope_table(b->cs_g + (size_t)t * m->n_rot, pos0 + t, m->n_rot, &m->rope_global);
        ops_rope_table(b->cs_l + (size_t)t * m->n_rot, pos0 + t, m->n_rot, &m->rope_local);
    }
    return 0;
}

/* Attention layer l on the normed inputs b->xb: Q, K, V (and the gates), K and V stored in the cache,
 * attention, the output projection back into b->xb. cs: the layer's RoPE table. Returns -1 when a
 * kernel refused its arguments. */
static int attn_layer(backend_cpu *b, const backend_layer *ly, int l, int T, int pos0, const float *cs) {
    const backend_model *m = &b->m;
    cache *c = &b->c;
    pool *p = b->p;
    int dim = m->dim, qd = m->n_head * m->hd, kd = m->n_kv * m->hd;
    int cl = b->kv_layer ? b->kv_layer[l] : l;   /* its layer in the cache */
    if (m->attn_gate) {   /* wq: per head hd queries, then hd gates */
        ops_mm qkv[3] = { { &ly->wq, b->qg, 2 * qd }, { &ly->wk, b->k, kd }, { &ly->wv, b->v, kd } };
        if (ops_matmul_many(p, qkv, 3, b->xb, T, b->mm_ws)) return -1;
        for (int t = 0; t < T; t++)
            for (int h = 0; h < m->n_head; h++) {
                const float *src = b->qg + (size_t)t * 2 * qd + (size_t)h * 2 * m->hd;
                memcpy(b->q + (size_t)t * qd + (size_t)h * m->hd, src, sizeof(float) * m->hd);
                memcpy(b->gate + (size_t)t * qd + (size_t)h * m->hd, src + m->hd, sizeof(float) * m->hd);
            }
    } else {
        ops_mm qkv[3] = { { &ly->wq, b->q, qd }, { &ly->wk, b->k, kd }, { &ly->wv, b->v, kd } };
        if (ops_matmul_many(p, qkv, 3, b->xb, T, b->mm_ws)) return -1;
    }
    /* a KIVI K group is quantised from the rows before it: those stores stay in position order */
    int kivi = 0;
    for (int g = 0; g < m->n_kv; g++) kivi |= kv_fmt_is_kivi(cache_head_at(c, cl, g)->fk);
    tok_ctx tc = { b, ly, TOK_QK, T, 0, cl, pos0, kivi, cs };
    tok_run(p, &tc);
    for (int t = 0; kivi && t < T; t++) cache_store(c, cl, pos0 + t, b->k + (size_t)t * kd, b->v + (size_t)t * kd);
    attn_args at = { cl, T, pos0, m->n_head, ly->window, m->attn_scale, b->q, b->att, ly->sinks };
    if (attn_run_ws(p, c, &at, b->attn_ws, b->attn_ws_floats)) return -1;
    if (m->attn_gate)
        for (size_t i = 0; i < (size_t)T * qd; i++) b->att[i] = b->att[i] * sigmoidf(b->gate[i]);
    if (ops_matmul(p, &ly->wo, b->att, b->xb, T, dim, b->mm_ws)) return -1;
    add_bias(b->xb, ly->bo, T, dim);
    return 0;
}

/* A dense layer's FFN on the normed inputs b->xb, its output back into b->xb. Returns -1 when a
 * kernel refused its arguments. */
static int dense_ffn(backend_cpu *b, const backend_layer *ly, int T) {
    const backend_model *m = &b->m;
    pool *p = b->p;
    ops_mm gate_up[2] = { { &ly->w_gate, b->h1, m->ffn }, { &ly->w_up, b->h2, m->ffn } };
    if (ops_matmul_many(p, gate_up, 2, b->xb, T, b->mm_ws)) return -1;
    ffn_act_rows(p, m, b->h1, b->h2, T, m->ffn);
    return ops_matmul(p, &ly->w_down, b->h1, b->xb, T, m->dim, b->mm_ws) ? -1 : 0;
}

static int cpu_forward(backend *base, const int32_t *tokens, int T, int pos0, const int *rows, int n_rows,
                       float *logits, char *err, size_t errlen) {
    backend_cpu *b = (backend_cpu *)base;
    const backend_model *m = &b->m;
    cache *c = &b->c;
    pool *p = b->p;
    int dim = m->dim;
    if (T < 1 || T > b->max_T) return errmsg_set(err, errlen, -1, "chunk of %d tokens (max %d)", T, b->max_T);
    if (pos0 < 0 || pos0 + T > c->n_ctx) {
        return errmsg_set(err, errlen, -1, "positions %d..%d exceed the context of %d tokens", pos0, pos0 + T - 1,
                          c->n_ctx);
    }
    if (pos0 > b->depth) {
        return errmsg_set(err, errlen, -1, "a forward pass at position %d leaves a gap: the stream holds %d positions", pos0, b->depth);
    }
    const int32_t *pin = b->pin;
    b->pin = NULL;   /* backend_route applies to this forward only */
    int32_t *used = b->used;
    b->used = NULL;
    /* a hybrid model's states are those after position pos0-1 here: kernels/stream.c brought them
     * back before a forward below the depth reached */
    if (embed(b, tokens, T, pos0, err, errlen)) return -1;
    for (int i = 0; i < n_rows; i++)
        if (rows[i] < 0 || rows[i] >= T) return errmsg_set(err, errlen, -1, "row index %d outside the chunk", rows[i]);
    if (m->n_expert > 0 && pin)
        for (size_t i = 0; i < (size_t)T * m->n_layer * m->n_expert_used; i++)
            if (pin[i] < 0 || pin[i] >= m->n_expert) {
                return errmsg_set(err, errlen, -1, "pinned expert id %d at position %d is outside [0, %d)", pin[i],
                                  pos0 + (int)(i / ((size_t)m->n_layer * m->n_expert_used)), m->n_expert);
            }
    for (int l = 0, r = 0; l < m->n_layer; l++) {
        const backend_layer *ly = &m->layers[l];
        const float *cs = ly->rope_local ? b->cs_l : b->cs_g;
        tok_ctx tc = { b, ly, TOK_IN, T, 0, 0, 0, 0, NULL };
        tok_run(p, &tc);
        if (ly->recurrent) {   /* linear attention: its states instead of the KV cache */
            float *st = b->state + (size_t)r++ * b->rec_floats;   /* r: its index among the linear layers */
            if (linear_layer(b, ly, st, T)) goto kfail;
        } else if (attn_layer(b, ly, l, T, pos0, cs)) {
            goto kfail;
        }
        tc.step = TOK_MID;
        tok_run(p, &tc);
        if (m->n_expert > 0) {
            b->pin = pin;
            b->used = used;
            int rc = moe_ffn(b, ly, l, T);
            b->pin = NULL;
            b->used = NULL;
            if (rc) goto kfail;
            continue;
        }
        if (dense_ffn(b, ly, T)) goto kfail;
        tc.step = TOK_OUT;
        tok_run(p, &tc);
    }
    b->depth = pos0 + T;
    /* logits for the requested rows only: gather their normed states, one matmul */
    for (int i = 0; i < n_rows; i++)
        ops_rmsnorm(b->xb + (size_t)i * dim, b->x + (size_t)rows[i] * dim, m->out_norm, dim, m->eps);
    if (n_rows > 0 && ops_matmul(p, &m->output, b->xb, logits, n_rows, m->n_vocab, b->mm_ws)) goto kfail;
    return 0;
kfail:
    errmsg_set(err, errlen, -1, "a kernel of the forward pass refused its arguments or its scratch (a bug: create sizes the scratch)");
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
        return errmsg_set(err, errlen, -1, "cannot truncate to depth %d: the cache holds %d positions", depth,
                          b->depth);
    }
    b->depth = depth;   /* the cache past it is overwritten by the next forward; a hybrid model's states are
                         * kernels/stream.c's to bring back (cpu_state_set) */
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

/* The seam's state calls over b->state [n_rec][rec_floats] (0 floats for a model without linear layers). */
static size_t cpu_state_floats(const backend *base) {
    const backend_cpu *b = (const backend_cpu *)base;
    return (size_t)b->n_rec * b->rec_floats;
}

static void cpu_state_get(const backend *base, float *dst) {
    const backend_cpu *b = (const backend_cpu *)base;
    if (b->n_rec > 0) memcpy(dst, b->state, sizeof(float) * cpu_state_floats(base));
}

static void cpu_state_set(backend *base, const float *src) {
    backend_cpu *b = (backend_cpu *)base;
    if (b->n_rec == 0) return;
    if (src) memcpy(b->state, src, sizeof(float) * cpu_state_floats(base));
    else memset(b->state, 0, sizeof(float) * cpu_state_floats(base));
}

const backend_impl backend_cpu_impl = {
    "cpu", cpu_create, cpu_forward, cpu_truncate, cpu_route, cpu_kv_bytes_per_token, cpu_name, cpu_threads, cpu_free,
    NULL,   /* batch-invariant (docs/DESIGN.md §2.5): no aligned prefills */
    cpu_state_floats, cpu_state_get, cpu_state_set,
};
