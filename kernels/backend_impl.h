/* backend_impl.h — what one implementation of kernels/backend.h provides. Private to
 * kernels/backend*.c: the engine sees only the opaque handle.
 *
 * An implementation defines its own handle struct whose first member is a `backend` (so a
 * pointer to it is a pointer to that member), fills `impl` at create, and exports one
 * backend_impl table that kernels/backend.c lists.
 *
 * `create` refuses, by contract, every feature of the backend_model it does not implement (a MoE
 * layer, a linear-attention layer, attention sinks, ...): it fails with one line naming the
 * feature ("backend ref does not implement mixture-of-experts layers (n_expert 8)") and reserves
 * nothing, so that a model is never run with part of its pass left out. `route` may be a no-op
 * only in a backend whose create refuses MoE models.
 *
 * Recurrent layers (qwen35's linear attention): an implementation either exposes its recurrent
 * state through state_floats / state_get / state_set, and kernels/backend.c then keeps the
 * stream's bookkeeping above it (kernels/stream.c: token ids, snapshots, the MoE route log, the
 * restore and re-run of a truncation through this table's truncate, route and forward), or leaves
 * the three NULL and keeps a hybrid stream exact its own way (llama: llama.cpp's sequence
 * branches). With the state calls, forward and truncate need not restore anything themselves:
 * truncate only moves the depth (the KV cache past it is overwritten), forward at pos0 below the
 * depth only happens after the stream layer has brought the state back.
 *
 * Who allocates what: create allocates the implementation's handle and everything in it (its
 * `backend` member's `stream` is left NULL); kernels/backend.c then creates the stream (after
 * create's memory check, which already counted the stream's bytes: backend.c adds them to the
 * backend_need the implementation passes to cfg->mem_check) and sets `stream`; backend_free frees
 * the stream, then calls the implementation's free, which frees the handle. */
#ifndef STRATA_BACKEND_IMPL_H
#define STRATA_BACKEND_IMPL_H

#include "kernels/backend.h"

typedef struct backend_impl backend_impl;

typedef struct stream stream;   /* kernels/stream.h */

struct backend {
    const backend_impl *impl;   /* the implementation's functions */
    stream *stream;             /* the stream bookkeeping of a model with recurrent layers on an
                                 * implementation with the state calls (owned by kernels/backend.c),
                                 * else NULL */
};

struct backend_impl {
    const char *kind;           /* backend_config.kind that selects it, e.g. "cpu" */
    int (*create)(const backend_model *m, const backend_config *cfg, backend **out, char *err, size_t errlen);
    int (*forward)(backend *b, const int32_t *tokens, int T, int pos0, const int *rows, int n_rows,
                   float *logits, char *err, size_t errlen);
    int (*truncate)(backend *b, int depth, char *err, size_t errlen);
    void (*route)(backend *b, const int32_t *pin, int32_t *used);
    uint64_t (*kv_bytes_per_token)(const backend *b);
    const char *(*name)(const backend *b);
    int (*threads)(const backend *b);
    void (*free)(backend *b);
    int (*aligned_prefill)(const backend *b);   /* NULL: 0 (a batch-invariant backend) */
    /* the recurrent state (all linear layers, the live state after position depth-1); NULL, NULL,
     * NULL: not exposed (above). state_floats must equal stream_state_floats of the model. */
    size_t (*state_floats)(const backend *b);
    void (*state_get)(const backend *b, float *dst);       /* dst [state_floats], the caller's */
    void (*state_set)(backend *b, const float *src);       /* src [state_floats], or NULL: zeros (position 0) */
};

/* backend_create with the implementation given (backend_create looks it up by cfg->kind; tests
 * pass their own tables). The same contract as backend_create. */
int backend_create_impl(const backend_impl *impl, const backend_model *m, const backend_config *cfg, backend **out,
                        char *err, size_t errlen);

/* kernels/backend_cpu.c */
extern const backend_impl backend_cpu_impl;
/* kernels/backend_ref.c */
extern const backend_impl backend_ref_impl;
/* kernels/llama/backend_llama.c (only in a build with -DSTRATA_LLAMA: `make llama`) */
extern const backend_impl backend_llama_impl;

#endif
