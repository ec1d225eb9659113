/* model.h — a transformer from a GGUF file and its forward pass on the CPU.
 *
 * Architectures: llama (stories260K, SmolLM2), qwen2 (QKV bias), qwen3 (QK-norm), gemma3
 * (sliding-window local layers with their own RoPE base, QK-norm, sandwich norms, GeGLU,
 * embedding scale sqrt(dim)); tied embeddings; RoPE linear and YaRN scaling from metadata.
 * Weights stay in the file mapping in their GGUF types (quant.h); norms and biases are copied to
 * f32. One layer of the forward pass, for T tokens at positions pos0..pos0+T-1:
 *     xb = rmsnorm(x) ; q,k,v = W xb (+ bias) ; [qk-norm per head] ; rope(q,k)
 *     cache_store(k, v) ; a = attention over the cache ; o = Wo a ; [post-norm] ; x += o
 *     xb = rmsnorm(x) ; h = act(Wg xb) * (Wu xb) ; d = Wd h ; [post-norm] ; x += d
 */
#ifndef STRATA_MODEL_H
#define STRATA_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"
#include "kernels/pool.h"
#include "worker/cache.h"
#include "worker/gguf.h"

/* Hyperparameter limits, far above any model this harness runs and low enough that every product
 * the forward pass forms (n_head * head dim, tokens * widths in size_t) cannot overflow. The loader
 * refuses a file outside them with the metadata key named. */
#define MODEL_MAX_LAYER    4096
#define MODEL_MAX_DIM      (1 << 16)   /* embedding_length */
#define MODEL_MAX_HEADS    4096        /* attention.head_count */
#define MODEL_MAX_HEAD_DIM 4096        /* attention.key_length */
#define MODEL_MAX_QKV      (1 << 20)   /* head_count * key_length */
#define MODEL_MAX_FFN      (1 << 20)   /* feed_forward_length */
#define MODEL_MAX_CTX      (1 << 30)   /* context_length, sliding_window */
#define MODEL_MAX_VOCAB    (1 << 22)   /* token_embd rows (proto.h's PROTO_MAX_VOCAB) */

typedef enum { ARCH_LLAMA, ARCH_QWEN2, ARCH_QWEN3, ARCH_GEMMA3 } model_arch;

typedef struct {
    ops_weight wq, wk, wv, wo, w_gate, w_up, w_down;
    float *attn_norm, *ffn_norm;          /* [dim] */
    float *bq, *bk, *bv;                  /* [n_head*hd], [n_kv*hd] (qwen2) or NULL */
    float *q_norm, *k_norm;               /* [hd] (qwen3, gemma3) or NULL */
    float *post_attn_norm, *post_ffn_norm;/* [dim] (gemma3) or NULL */
    int window;                           /* sliding window (gemma3 local layers), 0 = global */
    const ops_rope_cfg *rope;             /* the model's global or local RoPE configuration */
} model_layer;

typedef struct {
    model_arch arch;
    char arch_name[32];
    int n_layer, dim, n_head, n_kv, hd, ffn, n_vocab, n_ctx_train, n_rot;
    int neox;                             /* RoPE pairs (i, i + n_rot/2) instead of (2i, 2i+1) */
    float eps, emb_scale, attn_scale;
    ops_rope_cfg rope_global, rope_local;
    int rope_scaled;                      /* linear or YaRN scaling present in the metadata */
    ops_weight tok_emb;                   /* [n_vocab][dim] */
    ops_weight output;                    /* [n_vocab][dim] (the embedding when tied) */
    float *out_norm;                      /* [dim] */
    model_layer *layers;                  /* [n_layer] */
    char sha256[65];                      /* of the whole file, hex */
    gguf_file *g;                         /* owns the mapping the weights point into */
} model;

/* Loads path. Allocates *out (free with model_free), which keeps the file mapped. Returns 0, or -1
 * with one line in err naming the file and what is wrong (missing tensor, unsupported type,
 * shape mismatch, unknown architecture). warn (may be NULL) receives a non-fatal note, e.g. RoPE
 * scaling present. */
int model_load(const char *path, model **out, char *err, size_t errlen, char *warn, size_t warnlen);
void model_free(model *m);

/* Scratch for forward passes of up to max_T tokens. Allocates; free with model_scratch_free. */
typedef struct {
    int max_T;
    float *x, *xb;      /* [max_T][dim] residual stream, normed input */
    float *q, *att;     /* [max_T][n_head*hd] */
    float *k, *v;       /* [max_T][n_kv*hd] */
    float *h1, *h2;     /* [max_T][ffn] */
    float *cs_g, *cs_l; /* [max_T][n_rot/2][2] RoPE tables, global and local */
} model_scratch;
int model_scratch_alloc(const model *m, int max_T, model_scratch *s);
void model_scratch_free(model_scratch *s);

/* Runs T (<= s->max_T) tokens at positions pos0.. through the model, storing their K/V in c.
 * Logit rows: for each of the n_rows indices rows[i] (in [0, T), ascending) writes
 * logits[i][n_vocab]. Returns 0, or -1 with a message (token id out of range, allocation). */
int model_forward(const model *m, model_scratch *s, pool *p, cache *c, const int32_t *tokens,
                  int T, int pos0, const int *rows, int n_rows, float *logits, char *err, size_t errlen);

#endif
