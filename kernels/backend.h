/* backend.h — the seam between the engine and the hardware that runs the model: one whole forward
 * pass per call (embeddings, every layer, KV store and attention, the requested logit rows), in
 * the style of calm, not a graph of per-operation calls.
 *
 * A backend owns, for one arm: the KV cache in the arm's formats (per layer), the scratch of a
 * forward pass of up to max_tokens tokens, and its threads or device context. It reads the
 * model's weights where the loader left them (host memory, usually the file mapping) and writes
 * logits to host memory. Everything it needs is allocated once by backend_create; forward,
 * truncate and the queries allocate nothing of their own. For a model with recurrent layers
 * (qwen35) on an implementation that exposes its recurrent state, kernels/backend.c also keeps,
 * above the implementation, the stream's bookkeeping that makes a truncation exact
 * (kernels/stream.c: token ids, state snapshots, the MoE route log; docs/DESIGN.md §3.1.3),
 * allocated by backend_create and freed by backend_free like the rest.
 *
 * The engine (worker/engine.c) is the only caller; it keeps the token stream's state (n_past,
 * the last row, generation) and calls:
 *     backend_create(model, config)                     once per arm
 *     backend_forward(tokens, T, pos0, rows, logits)    prefill chunks and decode steps
 *     backend_truncate(depth)                           the stream drops positions >= depth
 *     backend_kv_bytes_per_token / backend_name / backend_threads   for the handshake
 *     backend_free
 *
 * Implementations: kernels/backend_cpu.c ("cpu", kernels/ops.c + kernels/attn.c on a thread
 * pool), kernels/backend_ref.c ("ref": the same pass in plain C from the kernels' *_ref
 * references, one thread, dense llama / qwen2 / qwen3 / gemma3 only; bit-identical to cpu, which
 * tests/test_backend_ref.c checks) and, in a build with libllama (`make llama`), kernels/llama/backend_llama.c ("llama":
 * llama.cpp runs the passes; it is not batch-invariant in every configuration, docs/DESIGN.md
 * §1.1.1). Adding one: docs/DESIGN.md §1.1. Results must not depend on the backend's batching or
 * threading: the same (model, KV formats, tokens, positions) give the same bits whatever the
 * chunk (docs/DESIGN.md §2.5). Different backends may differ from each other; the handshake's
 * `device` field (backend_name) tells arms apart.
 */
#ifndef STRATA_BACKEND_H
#define STRATA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kvfmt.h"
#include "kernels/backend_types.h"

/* ---- the model a backend runs (filled by the loader, worker/model.c's model_net) ------------- */

/* The FFN's gate activation: silu, gelu (tanh form), or gpt-oss's clamped SwiGLU (below). */
typedef enum { BACKEND_ACT_SWIGLU, BACKEND_ACT_GEGLU, BACKEND_ACT_SWIGLU_OAI } backend_act;

/* How a MoE router turns its logits into the k experts' weights (below): softmax over all experts,
 * top-k, renormalised (qwen3moe); the same without renormalising (qwen2moe); or top-k of the
 * logits, softmax over those k (gpt-oss). */
typedef enum { BACKEND_GATE_SOFTMAX_ALL, BACKEND_GATE_SOFTMAX_PLAIN, BACKEND_GATE_SOFTMAX_TOPK } backend_gate;

/* gpt-oss's SwiGLU constants (llama.cpp has them fixed, not in the metadata) */
#define BACKEND_OAI_ALPHA 1.702f
#define BACKEND_OAI_LIMIT 7.0f

#define BACKEND_MAX_CONV 64               /* the longest linear-attention conv kernel */

typedef struct {
    backend_weight wq, wk, wv, wo;
    backend_weight w_gate, w_up, w_down;  /* dense: [ffn][dim], [ffn][dim], [dim][ffn]; MoE: the experts
                                           * stacked, [n_expert*ffn][dim] twice and [n_expert*dim][ffn]
                                           * (expert e: rows e*ffn.. resp. e*dim..) */
    backend_weight w_router;              /* MoE: [n_expert][dim] (ffn_gate_inp); dense: unused */
    backend_weight w_sh_gate, w_sh_up;    /* shared expert (qwen2moe, qwen35moe; ffn_sh > 0): [ffn_sh][dim] */
    backend_weight w_sh_down;             /* [dim][ffn_sh] */
    backend_weight w_sh_inp;              /* [1][dim] its gate's logit (ffn_gate_inp_shexp) */
    float *attn_norm, *ffn_norm;          /* [dim] */
    float *bq, *bk, *bv;                  /* [n_head*hd], [n_kv*hd] (qwen2, qwen2moe, gpt-oss) or NULL */
    float *bo;                            /* [dim] attn_output bias (gpt-oss) or NULL */
    float *sinks;                         /* [n_head] attention sink logits (gpt-oss) or NULL */
    float *b_router;                      /* [n_expert] router bias (gpt-oss) or NULL */
    float *b_gate, *b_up;                 /* [n_expert][ffn] expert biases (gpt-oss) or NULL */
    float *b_down;                        /* [n_expert][dim] or NULL */
    float *q_norm, *k_norm;               /* [hd] (qwen3, gemma3) or NULL */
    float *post_attn_norm, *post_ffn_norm;/* [dim] (gemma3) or NULL */
    int window;                           /* sliding window (gemma3 local layers, gpt-oss even
                                           * layers), 0 = global */
    int rope_local;                       /* 1: this layer uses rope_local, 0: rope_global */
    /* qwen35: a Gated-DeltaNet linear-attention layer (recurrent = 1) has no KV cache and none of
     * wq wk wv wo q_norm k_norm; with nk, nv, d, conv = backend_model's ssm_* and
     * cd = 2*nk*d + nv*d (the conv channels: q, k, v): */
    int recurrent;                        /* 1: linear attention (the ssm_* fields), 0: attention */
    backend_weight w_qkv;                 /* [cd][dim] (attn_qkv): q | k | v, each head-major */
    backend_weight w_z;                   /* [nv*d][dim] (attn_gate): the output gate z */
    backend_weight w_beta, w_alpha;       /* [nv][dim] (ssm_beta, ssm_alpha) */
    backend_weight w_ssm_out;             /* [dim][nv*d] (ssm_out) */
    float *conv_w;                        /* [cd][conv] (ssm_conv1d), oldest input first */
    float *dt_bias, *ssm_a;               /* [nv] (ssm_dt.bias; ssm_a = -exp(A_log), as stored) */
    float *ssm_norm;                      /* [d] (ssm_norm) the gated RMSNorm's weight */
} backend_layer;

/* One layer for T tokens at positions pos0..pos0+T-1 (docs/DESIGN.md §3.1):
 *     xb = rmsnorm(x) ; q,k,v = W xb (+ bias) ; [qk-norm per head] ; rope(q,k)
 *     store k, v in the cache ; a = attention over the cache [with sinks] ; o = Wo a (+ bo) ;
 *     [post-norm] ; x += o
 *     xb = rmsnorm(x) ; h = act(Wg xb) * (Wu xb) ; d = Wd h ; [post-norm] ; x += d
 * Attention sinks (gpt-oss): head h's learned logit sinks[h] joins its softmax's max and
 * denominator and contributes no value (kernels/attn.h), so the weights of the keys sum to < 1.
 * A MoE model (n_expert > 0) replaces the FFN line, per token:
 *     z = Wr xb (+ b_router), the n_expert router logits
 *   gate BACKEND_GATE_SOFTMAX_ALL (qwen3moe):
 *     p = softmax(z) ; e[0..k-1] = the k = n_expert_used largest p, largest first (ties: lower
 *     expert id first), or the pinned ids (backend_route) ; w[j] = p[e[j]] / max(sum_j p[e[j]], 2^-14)
 *   gate BACKEND_GATE_SOFTMAX_PLAIN (qwen2moe): the same e[j], w[j] = p[e[j]] (no renormalising)
 *   gate BACKEND_GATE_SOFTMAX_TOPK (gpt-oss):
 *     e[0..k-1] = the k largest z, largest first (ties: lower id), or the pinned ids ;
 *     w = softmax(z[e[0]], .., z[e[k-1]]) over those k only
 *   then, with De = the expert's output for this token:
 *     swiglu:     De = Wd[e] (silu(Wg[e] xb) * (Wu[e] xb))
 *     swiglu_oai: g = Wg[e] xb + b_gate[e], u = Wu[e] xb + b_up[e],
 *                 c = min(g, 7), De = Wd[e] (c * sigmoid(1.702 c) * (clamp(u, -7, 7) + 1)) + b_down[e]
 *     d = w[0] D0 ; d += w[j] Dj for j = 1..k-1 (Dj = D of e[j])
 *   with a shared expert (ffn_sh > 0: qwen2moe, qwen35moe), every token also runs it:
 *     s = Wsd (silu(Wsg xb) * (Wsu xb)) ; c = Wsi . xb ; d += s * sigmoid(c), the sigmoid formed
 *     as each llama.cpp graph forms it: silu(c) / c (qwen2moe), 1 / (1 + exp(-c)) (qwen35moe,
 *     sh_gate_plain)
 *   x += d
 * Every expert matmul is the canonical per-row dot product on one token's xb, so the result does
 * not depend on which other tokens share the chunk or the expert.
 * A hybrid model (qwen35, docs/DESIGN.md §3.1.3) has attention layers whose wq gives, per head,
 * hd query values then hd gate values (attn_gate = 1): the attention output a of head h becomes
 * a * sigmoid(gate_h) before Wo; their RoPE rotates the first n_rot dims of each head (neox pairs).
 * Its linear-attention layers (recurrent = 1) replace the attention line, per token in order:
 *     m = W_qkv xb [cd] ; z = W_z xb [nv][d] ; b = sigmoid(W_beta xb) [nv]
 *     g = softplus(W_alpha xb + dt_bias) * ssm_a [nv]       (softplus(u) = u > 20 ? u : log(1+e^u))
 *     c[ch] = silu(sum_i conv_w[ch][i] * in[ch][i]), in = the conv-1 previous m (conv state, zeros
 *             at position 0) then this m ; the conv state shifts by one
 *     q = c[0, nk*d), k = c[nk*d, 2*nk*d), v = the rest; q and k per head L2-normed (x / sqrt(sum x^2 + eps))
 *     per value head h (key head kh = h % nk), state S_h [d][d] (row j: value dim j), f32:
 *         S_h *= exp(g_h) ; e_j = (v_j - S_h[j] . k) * b_h ; S_h[j] += e_j k ; o_j = (S_h[j] . q) / sqrt(d)
 *     o_h = rmsnorm(o_h) * ssm_norm * silu(z_h) ; x += W_ssm_out o
 * and their FFN input norm is the file's post_attention_norm (loaded as ffn_norm). The conv and S
 * states are the backend's (f32, never quantised; backend_truncate restores them).
 * then out = output . rmsnorm(x) for the requested rows. x starts as the token's embedding row
 * times emb_scale. Everything the model points to (weights, norms, layers) is borrowed: the
 * loader owns it and keeps it alive longer than any backend made from it. */
typedef struct {
    int n_layer, dim, n_head, n_kv, hd, ffn, n_vocab, n_rot;
    int n_expert, n_expert_used;          /* MoE: experts per layer, per token (ffn is one expert's
                                           * width); 0, 0: dense */
    int ffn_sh;                           /* MoE: the shared expert's width; 0: none */
    int sh_gate_plain;                    /* its gate: 1 / (1 + exp(-c)) (qwen35moe), else silu(c) / c */
    int neox;                             /* RoPE pairs (i, i + n_rot/2) instead of (2i, 2i+1) */
    int attn_gate;                        /* qwen35: wq gives per head hd queries, then hd gates */
    int ssm_conv, ssm_nk, ssm_nv, ssm_d;  /* qwen35 linear layers: conv kernel, key heads, value
                                           * heads, head dim of both (0 when no layer is recurrent) */
    backend_act act;                      /* the FFN's gate activation */
    backend_gate gate;                    /* MoE: how the router's logits become weights */
    float eps, emb_scale, attn_scale;
    backend_rope rope_global, rope_local;
    backend_weight tok_emb;               /* [n_vocab][dim] */
    backend_weight output;                /* [n_vocab][dim] (the embedding when tied) */
    const float *out_norm;                /* [dim] */
    const backend_layer *layers;          /* [n_layer] */
} backend_model;

/* ---- configuration ---------------------------------------------------------------------------- */

/* What an arm will hold at its full context, given to the memory check before anything large is
 * reserved. */
typedef struct {
    uint64_t kv_bytes_per_token;          /* all layers with a KV cache, K and V */
    uint64_t scratch_bytes;               /* the backend's forward-pass scratch, plus (hybrid models)
                                           * the live recurrent states and the stream bookkeeping's
                                           * snapshots, token ids and route log (kernels/stream.c,
                                           * added by kernels/backend.c; docs/DESIGN.md §3.1.3) */
} backend_need;

/* The caller's memory check: 0 to go on, or -1 with one line in err (backend_create then fails
 * with that message and nothing reserved). */
typedef int (*backend_mem_check_fn)(void *ctx, const backend_need *need, char *err, size_t errlen);

/* Flash attention on a backend that has the choice (llama): its default (auto), on, off. */
enum { BACKEND_FA_AUTO = 0, BACKEND_FA_ON = 1, BACKEND_FA_OFF = 2 };

typedef struct {
    const char *kind;                     /* "cpu", "ref", "llama" (in a build with it), or NULL
                                           * for the default (cpu) */
    const kv_fmt *kv_k, *kv_v;            /* [n_layer][n_kv] each layer's and KV head's K and V
                                           * format (copied); a linear-attention layer's cells are
                                           * ignored (it has no KV cache) */
    int n_ctx;                            /* positions the KV cache holds */
    int max_tokens;                       /* most tokens one forward takes (the prefill chunk) */
    int threads;                          /* >= 1 (the cpu backend's pool) */
    backend_mem_check_fn mem_check;       /* NULL: no check */
    void *mem_ctx;                        /* passed to mem_check */
    /* for a backend that reads the model file itself (llama: llama.cpp loads the GGUF; the cpu
     * backend uses only the backend_model and ignores these) */
    const char *model_path;               /* the GGUF the backend_model was loaded from */
    const char *device;                   /* the kind's device ("cpu"), NULL for its default */
    int flash_attn;                       /* BACKEND_FA_* */
    int llama_rot_off;                    /* 1: llama.cpp's rotation of quantised K/V off */
    int kv_host;                          /* 1: a device backend keeps the KV cache in host memory
                                           * (llama: offload_kqv off; the name then ends +kv-host) */
} backend_config;

/* ---- the interface ----------------------------------------------------------------------------- */

typedef struct backend backend;           /* opaque */

/* Checks that the kind implements every feature of m, that every layer's formats fit the head
 * dim, asks cfg->mem_check, then reserves the KV cache for cfg->n_ctx positions, the scratch for
 * cfg->max_tokens tokens and the threads. Allocates *out (free with backend_free; *out is NULL on
 * failure). Returns 0, or -1 with one line in err: an unknown kind, a feature the kind does not
 * implement (by contract every implementation refuses those here, naming the feature, e.g.
 * "backend ref does not implement mixture-of-experts layers (n_expert 8)": kernels/backend_impl.h),
 * a format that does not fit the head dim, the memory check's message, "cannot start N threads",
 * "out of memory (prefill chunk N)". */
int backend_create(const backend_model *m, const backend_config *cfg, backend **out, char *err, size_t errlen);

/* Runs tokens[T] (T in 1..max_tokens) at positions pos0..pos0+T-1 through the model, storing
 * their K and V. Positions below pos0 must hold this stream's earlier tokens (pos0 <= the depth
 * reached so far). For each of the n_rows indices rows[i] (in [0, T), ascending) writes
 * logits[i][n_vocab] (host memory, the caller's). Returns 0, or -1 with a message (token id out
 * of range, positions past n_ctx or past the depth reached, a row index outside the chunk). */
int backend_forward(backend *b, const int32_t *tokens, int T, int pos0, const int *rows, int n_rows,
                    float *logits, char *err, size_t errlen);

/* Expert routing of a MoE model for the NEXT backend_forward only (then both are forgotten):
 *   pin   [T][n_layer][n_expert_used] the expert ids each token uses in each layer, in slot order
 *         (largest weight first), instead of the router's top-k; their weights are still the
 *         router's probabilities at those ids, renormalised. NULL: the router chooses.
 *   used  [T][n_layer][n_expert_used] receives the ids each token used, slot order. NULL: none.
 * Both are the caller's, sized for the T of that forward. A dense model ignores both. A pinned id
 * >= n_expert makes that forward fail with a message (before anything is stored). */
void backend_route(backend *b, const int32_t *pin, int32_t *used);

/* The stream keeps positions < depth (depth <= the depth reached); later forwards start at or
 * below it. Frees nothing. A hybrid model's recurrent states are brought back to what they were
 * after position depth-1: on an implementation that exposes them (cpu), kernels/stream.c
 * restores the newest snapshot at or below depth and re-runs the stream's own tokens from there
 * (no rows, a MoE model's logged experts pinned), bit-identical by batch invariance
 * (docs/DESIGN.md §3.1.3); llama keeps them with llama.cpp's sequence branches (§1.1.1). A forward
 * at pos0 below the depth reached does the same first. Returns 0, or -1 with a message. */
int backend_truncate(backend *b, int depth, char *err, size_t errlen);

/* KV bytes one token takes over all layers with a KV cache (K + V) in the stored formats
 * (docs/DESIGN.md §3.3.1); a hybrid model's linear layers hold none. */
uint64_t backend_kv_bytes_per_token(const backend *b);

/* What runs the model, for the handshake's `device` field: kind and instruction set, e.g.
 * "cpu-avx512", "cpu-avx2", "cpu-c", "ref-c". A static string. */
const char *backend_name(const backend *b);

/* Threads the backend computes with (the cpu backend's pool size; 1 for ref). */
int backend_threads(const backend *b);

/* 1 if this backend's logit rows depend on the shape of the forward that computed them (llama.cpp:
 * f16 K/V with flash attention, the number of rows asked), so that the engine must give it every
 * prefill in chunks aligned to absolute positions (worker/engine.h, docs/DESIGN.md §1.1.1): a
 * prefill that starts inside a chunk re-runs that chunk's earlier tokens with it. 0 for a
 * batch-invariant backend (cpu) and for one that cannot drop part of its stream (a recurrent
 * model on llama.cpp), which the engine then leaves as it is. */
int backend_aligned_prefill(const backend *b);

/* Frees everything create allocated; NULL is a no-op. */
void backend_free(backend *b);

/* 1 if this build has the implementation of that kind ("cpu" and "ref" always; "llama" with
 * `make llama`). */
int backend_available(const char *kind);

#endif
