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
 * only in a backend whose create refuses MoE models. */
#ifndef STRATA_BACKEND_IMPL_H
#define STRATA_BACKEND_IMPL_H

#include "kernels/backend.h"

typedef struct backend_impl backend_impl;

struct backend {
    const backend_impl *impl;   /* the implementation's functions */
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
};

/* kernels/backend_cpu.c */
extern const backend_impl backend_cpu_impl;
/* kernels/backend_ref.c */
extern const backend_impl backend_ref_impl;
/* kernels/llama/backend_llama.c (only in a build with -DSTRATA_LLAMA: `make llama`) */
extern const backend_impl backend_llama_impl;

#endif
