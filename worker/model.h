/* model.h — a transformer from a GGUF file: its hyperparameters and weights, for a backend
 * (kernels/backend.h) to run.
 *
 * Architectures: llama (stories260K, SmolLM2), qwen2 (QKV bias), qwen3 (QK-norm), gemma3
 * (sliding-window local layers with their own RoPE base, QK-norm, sandwich norms, GeGLU,
 * embedding scale sqrt(dim)), qwen3moe (qwen3's attention; every layer's FFN a mixture of
 * experts: softmax router, top-k, selected weights renormalised; docs/DESIGN.md §3.1), gpt-oss
 * (alternating sliding-window and full layers, attention sinks, Q/K/V/O biases, a biased router
 * whose top-k logits are softmaxed, biased experts with a clamped SwiGLU; §3.1.1), qwen2moe
 * (qwen2's attention, a softmax router whose top-k probabilities are not renormalised, and a
 * shared expert behind a sigmoid gate; §3.1.2), qwen35 (hybrid: Gated-DeltaNet linear-attention
 * layers between gated full-attention layers, partial RoPE; §3.1.3), qwen35moe (the same with
 * qwen3moe's experts plus a shared expert with a sigmoid gate); tied embeddings; RoPE linear and
 * YaRN scaling from metadata.
 * Weights stay in the file mapping in their GGUF types (quant.h); norms and biases are copied to
 * f32. The forward pass (one layer is written out in kernels/backend.h) is a backend's: model_net
 * gives it the description.
 */
#ifndef STRATA_MODEL_H
#define STRATA_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"
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
#define MODEL_MAX_EXPERT   4096        /* expert_count */
#define MODEL_MAX_EXPERT_ROWS (1 << 26) /* expert_count * expert_feed_forward_length */
#define MODEL_MAX_SSM_CONV BACKEND_MAX_CONV /* ssm.conv_kernel */

typedef enum { ARCH_LLAMA, ARCH_QWEN2, ARCH_QWEN3, ARCH_GEMMA3, ARCH_QWEN3MOE, ARCH_GPTOSS, ARCH_QWEN2MOE, ARCH_QWEN35,
               ARCH_QWEN35MOE } model_arch;

typedef struct {
    model_arch arch;
    char arch_name[32];
    int n_layer, dim, n_head, n_kv, hd, ffn, n_vocab, n_ctx_train, n_rot;
                                          /* ffn: a dense FFN's width, or one expert's (MoE) */
    int n_expert, n_expert_used;          /* MoE: experts per layer, experts per token; 0: dense */
    int ffn_sh;                           /* qwen2moe, qwen35moe: the shared expert's width; 0: none */
    int neox;                             /* RoPE pairs (i, i + n_rot/2) instead of (2i, 2i+1) */
    int attn_gate;                        /* qwen35: the attention output is gated (wq: queries, gates) */
    int ssm_conv, ssm_nk, ssm_nv, ssm_d;  /* qwen35 linear layers: ssm.conv_kernel, ssm.group_count
                                           * (key heads), ssm.time_step_rank (value heads),
                                           * ssm.state_size (head dim); 0 for other archs */
    int n_attn;                           /* layers with a KV cache (all but qwen35's linear ones) */
    float eps, emb_scale, attn_scale;
    backend_rope rope_global, rope_local;
    int rope_scaled;                      /* linear or YaRN scaling present in the metadata */
    backend_weight tok_emb;               /* [n_vocab][dim] */
    backend_weight output;                /* [n_vocab][dim] (the embedding when tied) */
    float *out_norm;                      /* [dim] */
    backend_layer *layers;                /* [n_layer] (kernels/backend.h) */
    char sha256[65];                      /* of the whole file, hex */
    gguf_file *g;                         /* owns the mapping or copy the weights point into */
} model;

/* Loads path. Allocates *out (free with model_free), which keeps the file mapped (model_load_as:
 * or copied). Returns 0, or -1 with one line in err naming the file and what is wrong (missing
 * tensor, unsupported type, shape mismatch, unknown architecture). warn (may be NULL) receives a
 * non-fatal note, e.g. RoPE scaling present. */
int model_load(const char *path, model **out, char *err, size_t errlen, char *warn, size_t warnlen);
/* The same, the file held as hold says (gguf.h: mapped, or copied onto huge pages); model_load maps. */
int model_load_as(const char *path, gguf_hold hold, model **out, char *err, size_t errlen, char *warn, size_t warnlen);
void model_free(model *m);

/* The attention layout (the hello's window and layers_full_context): *window = the largest sliding
 * window of a layer (0 when no layer slides), *n_full = the layers without one, which read the whole
 * context (n_layer when none slides; qwen35's linear-attention layers count: their state carries it). */
void model_window(const model *m, int *window, int *n_full);

/* The description a backend runs (kernels/backend.h): hyperparameters, RoPE, the weights and
 * the layers, all pointing into m (which must outlive every backend made from it). Pure. */
void model_net(const model *m, backend_model *net);

#endif
