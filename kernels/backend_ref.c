/* backend_ref.c — the "ref" backend of kernels/backend.h: the whole forward pass in plain C, one
 * thread, readable top to bottom (ref_forward is the model; the layer is written out in backend.h).
 * Every step is the plain C reference of the one the cpu backend runs:
 *   matmul      y[t][r] = ops_dot_ref(W row r dequantised by quant_dequant_row_ref, x[t]), one
 *               weight row at a time (ref_matmul; docs/DESIGN.md §2.5.1, §2.5.2)
 *   RMSNorm, SwiGLU / GeGLU, bias and residual adds: the loops below, the formulas
 *               of §2.5.3 evaluated as ops.c writes them (the RoPE table and rotation are ops.c's, plain C)
 *   KV cache    kernels/cache.c (cache_store in the arm's formats)
 *   attention   attn_run_ref (kernels/attn.h: one query at a time)
 * The cpu backend is bit-identical to these references on every ISA by design (§2.5, §2.7), so the
 * two backends give the same logits bit for bit: tests/test_backend_ref.c checks that on every
 * dense fixture, which tests the fast kernels and the backend's plumbing (chunking, truncation,
 * rows) against a second, independent composition of the same formulas.
 *
 * It runs llama, qwen2 (q/k/v biases), qwen3 (q/k norm) and gemma3 (post norms, embedding scale,
 * local / global RoPE, sliding windows), SwiGLU and GeGLU. Whatever else a backend_model can
 * describe it refuses at create with one line naming the feature (ref_unsupported): mixture-of-
 * experts layers, shared experts, linear-attention layers, gated attention, attention sinks and the
 * clamped SwiGLU. Everything is allocated at create; forward allocates nothing. It is slow (one
 * scalar chain per weight row and token): a check and a statement of the model, not an engine.
 */
#include "kernels/backend_impl.h"
#include "kernels/attn.h"
#include "kernels/cache.h"
#include "kernels/errmsg.h"
#include "kernels/kv.h"
#include "kernels/ops.h"
#include "kernels/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    backend base;        /* first: a backend_ref pointer is a backend pointer */
    backend_model m;     /* the model (a copy of the description; weights and layers borrowed) */
    cache c;             /* the KV cache, every layer and KV head in its own formats */
    int depth;           /* positions 0..depth-1 hold this stream's tokens */
    int max_T;           /* most tokens per forward */
    /* scratch of one forward pass, allocated at create */
    float *x;            /* [max_T][dim] the residual stream */
    float *xb;           /* [max_T][dim] a sublayer's normed input, then its output */
    float *q, *att;      /* [max_T][n_head][hd] queries, attention outputs */
    float *k, *v;        /* [max_T][n_kv][hd] keys and values of the chunk */
    float *h1, *h2;      /* [max_T][ffn] gate, up (h1 then holds act(gate) * up) */
    float *cs_g, *cs_l;  /* [max_T][n_rot/2][2] RoPE (cos, sin) per token, global and local */
    float *wrow;         /* [widest cols] one dequantised weight row */
    float *attn_ws;      /* [attn_ws_floats] attn_run_ref_ws's scratch */
    size_t attn_ws_floats;
} backend_ref;

/* ---- the steps --------------------------------------------------------------------------------- */

/* y[t][r] = dot(W row r, x[t]) for t < T, r < W->rows; x [T][W->cols], y [T][ldy]. Row r is
 * dequantised once into wrow [W->cols] and met by every token. */
static void ref_matmul(float *wrow, const backend_weight *w, const float *x, int T, float *y, int ldy) {
    for (int r = 0; r < w->rows; r++) {
        quant_dequant_row_ref(w->type, w->data + (size_t)r * w->row_bytes, wrow, w->cols);
        for (int t = 0; t < T; t++) y[(size_t)t * ldy + r] = ops_dot_ref(wrow, x + (size_t)t * w->cols, w->cols);
    }
}

/* out[i] = x[i] * (1 / sqrt(mean(x^2) + eps)) * w[i], the sum of squares the canonical dot; out
 * and x [n] may alias. */
static void ref_rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    float ss = ops_dot_ref(x, x, n);
    float scale = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * scale * w[i];
}

/* g[i] = act(g[i]) * u[i] for n values: silu(g) = g / (1 + e^-g), or the tanh GELU as the equal
 * v / (1 + e^(-2z)), z = sqrt(2/pi) (v + 0.044715 v^3) (docs/DESIGN.md §2.5.3). */
static void ref_act(backend_act act, float *g, const float *u, size_t n) {
    const float k = 0.7978845608028654f;   /* sqrt(2/pi) */
    for (size_t i = 0; i < n; i++) {
        float v = g[i];
        if (act == BACKEND_ACT_GEGLU) g[i] = v / (1.0f + expf(-2.0f * (k * (v + 0.044715f * v * v * v)))) * u[i];
        else g[i] = v / (1.0f + expf(-v)) * u[i];
    }
}

/* y[t][i] += bias[i] for T rows of n (nothing when bias is NULL). */
static void ref_bias(float *y, const float *bias, int T, int n) {
    if (!bias) return;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < n; i++) y[(size_t)t * n + i] += bias[i];
}

/* x[t] += o[t] for T rows of dim, o post-normed first when post_norm is not NULL (gemma3). */
static void ref_residual(const backend_model *m, float *x, float *o, const float *post_norm, int T) {
    for (int t = 0; t < T; t++) {
        float *ot = o + (size_t)t * m->dim, *xt = x + (size_t)t * m->dim;
        if (post_norm) ref_rmsnorm(ot, ot, post_norm, m->dim, m->eps);
        for (int i = 0; i < m->dim; i++) xt[i] += ot[i];
    }
}

/* Each head of v [T][nh][hd]: RMSNorm over the head dim (qk-norm, when norm is not NULL), then
 * RoPE at its token's position (cs [T][n_rot]). */
static void ref_heads(const backend_model *m, float *v, int T, int nh, const float *norm, const float *cs) {
    for (int t = 0; t < T; t++)
        for (int h = 0; h < nh; h++) {
            float *x = v + ((size_t)t * nh + h) * m->hd;
            if (norm) ref_rmsnorm(x, x, norm, m->hd, m->eps);
            ops_rope(x, cs + (size_t)t * m->n_rot, m->n_rot, m->neox);
        }
}

/* ---- one layer ---------------------------------------------------------------------------------- */

/* Layer l's attention for the chunk's T tokens at pos0..: x += [post-norm] Wo attn(rope(Wq xb),
 * rope(Wk xb), Wv xb) with xb = rmsnorm(x), K and V stored in the cache first. Returns 0, or -1
 * when the attention refuses its scratch (a bug: create sizes it). */
static int ref_attention(backend_ref *b, const backend_layer *ly, int l, int T, int pos0) {
    const backend_model *m = &b->m;
    int dim = m->dim, qd = m->n_head * m->hd, kd = m->n_kv * m->hd;
    const float *cs = ly->rope_local ? b->cs_l : b->cs_g;
    for (int t = 0; t < T; t++) ref_rmsnorm(b->xb + (size_t)t * dim, b->x + (size_t)t * dim, ly->attn_norm, dim, m->eps);
    ref_matmul(b->wrow, &ly->wq, b->xb, T, b->q, qd);
    ref_matmul(b->wrow, &ly->wk, b->xb, T, b->k, kd);
    ref_matmul(b->wrow, &ly->wv, b->xb, T, b->v, kd);
    ref_bias(b->q, ly->bq, T, qd);
    ref_bias(b->k, ly->bk, T, kd);
    ref_bias(b->v, ly->bv, T, kd);
    ref_heads(m, b->q, T, m->n_head, ly->q_norm, cs);
    ref_heads(m, b->k, T, m->n_kv, ly->k_norm, cs);
    for (int t = 0; t < T; t++) cache_store(&b->c, l, pos0 + t, b->k + (size_t)t * kd, b->v + (size_t)t * kd);
    attn_args at = { l, T, pos0, m->n_head, ly->window, m->attn_scale, b->q, b->att, NULL };
    if (attn_run_ref_ws(&b->c, &at, b->attn_ws, b->attn_ws_floats)) return -1;
    ref_matmul(b->wrow, &ly->wo, b->att, T, b->xb, dim);
    ref_bias(b->xb, ly->bo, T, dim);
    ref_residual(m, b->x, b->xb, ly->post_attn_norm, T);
    return 0;
}

/* Layer ly's FFN for T tokens: x += [post-norm] Wd (act(Wg xb) * (Wu xb)) with xb = rmsnorm(x). */
static void ref_ffn(backend_ref *b, const backend_layer *ly, int T) {
    const backend_model *m = &b->m;
    int dim = m->dim;
    for (int t = 0; t < T; t++) ref_rmsnorm(b->xb + (size_t)t * dim, b->x + (size_t)t * dim, ly->ffn_norm, dim, m->eps);
    ref_matmul(b->wrow, &ly->w_gate, b->xb, T, b->h1, m->ffn);
    ref_matmul(b->wrow, &ly->w_up, b->xb, T, b->h2, m->ffn);
    ref_act(m->act, b->h1, b->h2, (size_t)T * m->ffn);
    ref_matmul(b->wrow, &ly->w_down, b->h1, T, b->xb, dim);
    ref_residual(m, b->x, b->xb, ly->post_ffn_norm, T);
}

/* ---- the forward pass --------------------------------------------------------------------------- */

/* The arguments of a forward (backend.h's contract): 0, or -1 with the cpu backend's messages. */
static int ref_check_forward(const backend_ref *b, const int32_t *tokens, int T, int pos0, const int *rows, int n_rows,
                             char *err, size_t errlen) {
    if (T < 1 || T > b->max_T) return errmsg_set(err, errlen, -1, "chunk of %d tokens (max %d)", T, b->max_T);
    if (pos0 < 0 || pos0 + T > b->c.n_ctx)
        return errmsg_set(err, errlen, -1, "positions %d..%d exceed the context of %d tokens", pos0, pos0 + T - 1, b->c.n_ctx);
    if (pos0 > b->depth)
        return errmsg_set(err, errlen, -1, "a forward pass at position %d leaves a gap: the stream holds %d positions", pos0, b->depth);
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= b->m.n_vocab)
            return errmsg_set(err, errlen, -1, "token id %d at position %d is outside the vocabulary [0, %d)", tokens[t], pos0 + t,
                              b->m.n_vocab);
    if (n_rows < 0 || n_rows > T) return errmsg_set(err, errlen, -1, "%d rows asked of a chunk of %d tokens", n_rows, T);
    for (int i = 0; i < n_rows; i++)
        if (rows[i] < 0 || rows[i] >= T) return errmsg_set(err, errlen, -1, "row index %d outside the chunk", rows[i]);
    return 0;
}

/* The model: x = embedding * emb_scale ; every layer's attention then FFN ; the requested rows'
 * logits = output . rmsnorm(x). */
static int ref_forward(backend *base, const int32_t *tokens, int T, int pos0, const int *rows, int n_rows,
                       float *logits, char *err, size_t errlen) {
    backend_ref *b = (backend_ref *)base;
    const backend_model *m = &b->m;
    int dim = m->dim;
    if (ref_check_forward(b, tokens, T, pos0, rows, n_rows, err, errlen)) return -1;
    for (int t = 0; t < T; t++) {
        float *x = b->x + (size_t)t * dim;
        quant_dequant_row_ref(m->tok_emb.type, m->tok_emb.data + (size_t)tokens[t] * m->tok_emb.row_bytes, x, dim);
        if (m->emb_scale != 1.0f)
            for (int i = 0; i < dim; i++) x[i] *= m->emb_scale;
        ops_rope_table(b->cs_g + (size_t)t * m->n_rot, pos0 + t, m->n_rot, &m->rope_global);
        ops_rope_table(b->cs_l + (size_t)t * m->n_rot, pos0 + t, m->n_rot, &m->rope_local);
    }
    for (int l = 0; l < m->n_layer; l++) {
        if (ref_attention(b, &m->layers[l], l, T, pos0))
            return errmsg_set(err, errlen, -1, "the reference attention refused its scratch (a bug: create sizes it)");
        ref_ffn(b, &m->layers[l], T);
    }
    b->depth = pos0 + T;
    for (int i = 0; i < n_rows; i++)   /* xb [n_rows][dim]: the requested rows, final-normed */
        ref_rmsnorm(b->xb + (size_t)i * dim, b->x + (size_t)rows[i] * dim, m->out_norm, dim, m->eps);
    if (n_rows > 0) ref_matmul(b->wrow, &m->output, b->xb, n_rows, logits, m->n_vocab);
    return 0;
}

/* ---- create, the queries, free ------------------------------------------------------------------ */

/* The first feature of m this backend does not implement, as create's one line; 0 when none. */
static int ref_unsupported(const backend_model *m, char *err, size_t errlen) {
    if (m->n_expert > 0)
        return errmsg_set(err, errlen, -1, "backend ref does not implement mixture-of-experts layers (n_expert %d)", m->n_expert);
    if (m->ffn_sh > 0)
        return errmsg_set(err, errlen, -1, "backend ref does not implement shared experts (ffn_sh %d)", m->ffn_sh);
    if (m->act != BACKEND_ACT_SWIGLU && m->act != BACKEND_ACT_GEGLU)
        return errmsg_set(err, errlen, -1, "backend ref does not implement the %s FFN activation",
                          m->act == BACKEND_ACT_SWIGLU_OAI ? "clamped SwiGLU (swiglu_oai: gpt-oss)" : "unknown");
    for (int l = 0; l < m->n_layer; l++) {
        if (m->layers[l].recurrent)
            return errmsg_set(err, errlen, -1, "backend ref does not implement linear-attention layers (layer %d is "
                              "recurrent: qwen35 hybrids)", l);
        if (m->layers[l].sinks)
            return errmsg_set(err, errlen, -1, "backend ref does not implement attention sinks (layer %d: gpt-oss)", l);
    }
    if (m->attn_gate)
        return errmsg_set(err, errlen, -1, "backend ref does not implement gated attention (attn_gate: qwen35)");
    return 0;
}

static void ref_free(backend *base) {
    backend_ref *b = (backend_ref *)base;
    free(b->x); free(b->xb); free(b->q); free(b->att); free(b->k); free(b->v);
    free(b->h1); free(b->h2); free(b->cs_g); free(b->cs_l); free(b->wrow); free(b->attn_ws);
    cache_free(&b->c);
    free(b);
}

/* n floats (at least one, so that malloc's NULL means out of memory). */
static float *ref_floats(size_t n) { return malloc(sizeof(float) * (n ? n : 1)); }

static int ref_create(const backend_model *m, const backend_config *cfg, backend **out, char *err, size_t errlen) {
    *out = NULL;
    if (ref_unsupported(m, err, errlen)) return -1;
    backend_ref *b = calloc(1, sizeof *b);
    if (!b) return errmsg_set(err, errlen, -1, "out of memory");
    b->base.impl = &backend_ref_impl;
    b->m = *m;
    b->max_T = cfg->max_tokens;
    size_t T = (size_t)cfg->max_tokens, qd = (size_t)m->n_head * m->hd, kd = (size_t)m->n_kv * m->hd;
    size_t cols = (size_t)m->dim;   /* the widest matmul input: dim, n_head*hd or ffn */
    if (qd > cols) cols = qd;
    if ((size_t)m->ffn > cols) cols = (size_t)m->ffn;
    /* what create reserves: the cache, the scratch above, and attn_ref_scratch_floats of that cache */
    backend_need need = { 0, 4 * (T * (2 * (size_t)m->dim + 2 * qd + 2 * kd + 2 * (size_t)m->ffn + 2 * (size_t)m->n_rot) +
                                  cols + (size_t)cfg->n_ctx + 3 * (size_t)m->hd) };
    for (size_t i = 0; i < (size_t)m->n_layer * m->n_kv; i++) {
        if (kv_fmt_check(cfg->kv_k[i], m->hd, err, errlen) || kv_fmt_check(cfg->kv_v[i], m->hd, err, errlen)) goto fail;
        need.kv_bytes_per_token += kv_reserve_bytes(cfg->kv_k[i], m->hd, 0) + kv_reserve_bytes(cfg->kv_v[i], m->hd, 1);
    }
    if (cfg->mem_check && cfg->mem_check(cfg->mem_ctx, &need, err, errlen)) goto fail;
    if (cache_create_heads(&b->c, cfg->kv_k, cfg->kv_v, m->n_layer, m->n_kv, m->hd, cfg->n_ctx, err, errlen)) goto fail;
    b->x = ref_floats(T * m->dim);
    b->xb = ref_floats(T * m->dim);
    b->q = ref_floats(T * qd);
    b->att = ref_floats(T * qd);
    b->k = ref_floats(T * kd);
    b->v = ref_floats(T * kd);
    b->h1 = ref_floats(T * m->ffn);
    b->h2 = ref_floats(T * m->ffn);
    b->cs_g = ref_floats(T * m->n_rot);
    b->cs_l = ref_floats(T * m->n_rot);
    b->wrow = ref_floats(cols);
    b->attn_ws_floats = attn_ref_scratch_floats(&b->c);
    b->attn_ws = ref_floats(b->attn_ws_floats);
    if (!b->x || !b->xb || !b->q || !b->att || !b->k || !b->v || !b->h1 || !b->h2 || !b->cs_g || !b->cs_l || !b->wrow ||
        !b->attn_ws) {
        errmsg_set(err, errlen, -1, "out of memory (prefill chunk %d)", cfg->max_tokens);
        goto fail;
    }
    *out = &b->base;
    return 0;
fail:
    ref_free(&b->base);
    return -1;
}

static int ref_truncate(backend *base, int depth, char *err, size_t errlen) {
    backend_ref *b = (backend_ref *)base;
    if (depth < 0 || depth > b->depth)
        return errmsg_set(err, errlen, -1, "cannot truncate to depth %d: the cache holds %d positions", depth, b->depth);
    b->depth = depth;   /* the cache past it is overwritten by the next forward */
    return 0;
}

/* A no-op: create refused every MoE model, and a dense model ignores routing (backend.h). */
static void ref_route(backend *base, const int32_t *pin, int32_t *used) {
    (void)base; (void)pin; (void)used;
}

static uint64_t ref_kv_bytes_per_token(const backend *base) {
    return cache_bytes_per_token(&((const backend_ref *)base)->c);
}

/* "ref-c"; "+rope-f32" with llama.cpp's f32 RoPE angles, as the cpu backend says it */
static const char *ref_name(const backend *base) {
    return ((const backend_ref *)base)->m.rope_global.f32_angles ? "ref-c+rope-f32" : "ref-c";
}

static int ref_threads(const backend *base) {
    (void)base;
    return 1;
}

const backend_impl backend_ref_impl = {
    "ref", ref_create, ref_forward, ref_truncate, ref_route, ref_kv_bytes_per_token, ref_name, ref_threads, ref_free,
    NULL,   /* batch-invariant: every step is per token, per row or per query */
    NULL, NULL, NULL,   /* no recurrent state: create refuses linear-attention layers */
};
