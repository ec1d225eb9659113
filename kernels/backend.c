/* backend.c — picks the implementation a config names and forwards each call to it (see
 * backend.h, backend_impl.h). */
#include "kernels/backend_impl.h"
#include "kernels/errmsg.h"

#include <stdio.h>
#include <string.h>

/* Every implementation this build has; the first is the default. */
static const backend_impl *const impls[] = {
    &backend_cpu_impl,
    &backend_ref_impl,     /* kernels/backend_ref.c: the plain C reference of the same pass */
#ifdef STRATA_LLAMA
    &backend_llama_impl,   /* kernels/llama/backend_llama.c, linked by `make llama` */
#endif
};

int backend_create(const backend_model *m, const backend_config *cfg, backend **out, char *err, size_t errlen) {
    *out = NULL;
    const char *kind = cfg->kind ? cfg->kind : impls[0]->kind;
    for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++)
        if (!strcmp(kind, impls[i]->kind)) return impls[i]->create(m, cfg, out, err, errlen);
    if (!strcmp(kind, "llama"))
        errmsg_set(err, errlen, -1, "backend 'llama' is not in this build: `make llama` builds llama.cpp (cached) "
                   "and a strata-worker with it (README: \"Your llama.cpp as an arm\")");
    else
        errmsg_set(err, errlen, -1, "backend '%s' is not in this build (cpu and ref are)", kind);
    return -1;
}

int backend_available(const char *kind) {
    for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++)
        if (!strcmp(kind, impls[i]->kind)) return 1;
    return 0;
}

int backend_forward(backend *b, const int32_t *tokens, int T, int pos0, const int *rows, int n_rows,
                    float *logits, char *err, size_t errlen) {
    return b->impl->forward(b, tokens, T, pos0, rows, n_rows, logits, err, errlen);
}

int backend_truncate(backend *b, int depth, char *err, size_t errlen) {
    return b->impl->truncate(b, depth, err, errlen);
}

void backend_route(backend *b, const int32_t *pin, int32_t *used) { b->impl->route(b, pin, used); }

uint64_t backend_kv_bytes_per_token(const backend *b) { return b->impl->kv_bytes_per_token(b); }

const char *backend_name(const backend *b) { return b->impl->name(b); }

int backend_threads(const backend *b) { return b->impl->threads(b); }

int backend_aligned_prefill(const backend *b) { return b->impl->aligned_prefill ? b->impl->aligned_prefill(b) : 0; }

void backend_free(backend *b) {
    if (b) b->impl->free(b);
}
