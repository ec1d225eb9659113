/* backend.c — picks the implementation a config names and forwards each call to it (see
 * backend.h, backend_impl.h); for a model with recurrent layers on an implementation that exposes
 * its state, through the stream bookkeeping of kernels/stream.c. */
#include "kernels/backend_impl.h"
#include "kernels/errmsg.h"
#include "kernels/stream.h"

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

/* The caller's memory check, seeing the implementation's need plus the stream's bytes. */
typedef struct {
    backend_mem_check_fn fn;
    void *ctx;
    uint64_t stream_bytes;
} mem_wrap;

static int mem_check_wrapped(void *ctx, const backend_need *need, char *err, size_t errlen) {
    const mem_wrap *w = ctx;
    backend_need all = *need;
    all.scratch_bytes += w->stream_bytes;
    return w->fn(w->ctx, &all, err, errlen);
}

int backend_create_impl(const backend_impl *impl, const backend_model *m, const backend_config *cfg, backend **out,
                        char *err, size_t errlen) {
    *out = NULL;
    int keep = impl->state_floats && impl->state_get && impl->state_set && stream_wanted(m);
    backend_config c = *cfg;
    mem_wrap w = { cfg->mem_check, cfg->mem_ctx, keep ? stream_bytes(m, cfg->n_ctx) : 0 };
    if (keep && cfg->mem_check) {
        c.mem_check = mem_check_wrapped;
        c.mem_ctx = &w;
    }
    backend *b = NULL;
    if (impl->create(m, &c, &b, err, errlen)) return -1;
    if (keep) {
        size_t n = impl->state_floats(b), want = stream_state_floats(m);
        if (n != want) {
            errmsg_set(err, errlen, -1, "backend %s keeps %zu floats of recurrent state, the model has %zu (a bug)",
                       impl->kind, n, want);
            goto fail;
        }
        if (stream_create(m, cfg->n_ctx, cfg->max_tokens, &b->stream, err, errlen)) goto fail;
    }
    *out = b;
    return 0;
fail:
    backend_free(b);
    return -1;
}

int backend_create(const backend_model *m, const backend_config *cfg, backend **out, char *err, size_t errlen) {
    *out = NULL;
    const char *kind = cfg->kind ? cfg->kind : impls[0]->kind;
    for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++)
        if (!strcmp(kind, impls[i]->kind)) return backend_create_impl(impls[i], m, cfg, out, err, errlen);
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
    if (b->stream) return stream_forward(b, tokens, T, pos0, rows, n_rows, logits, err, errlen);
    return b->impl->forward(b, tokens, T, pos0, rows, n_rows, logits, err, errlen);
}

int backend_truncate(backend *b, int depth, char *err, size_t errlen) {
    if (b->stream) return stream_truncate(b, depth, err, errlen);
    return b->impl->truncate(b, depth, err, errlen);
}

void backend_route(backend *b, const int32_t *pin, int32_t *used) {
    if (b->stream) stream_route(b->stream, pin, used);
    else b->impl->route(b, pin, used);
}

uint64_t backend_kv_bytes_per_token(const backend *b) { return b->impl->kv_bytes_per_token(b); }

const char *backend_name(const backend *b) { return b->impl->name(b); }

int backend_threads(const backend *b) { return b->impl->threads(b); }

int backend_aligned_prefill(const backend *b) { return b->impl->aligned_prefill ? b->impl->aligned_prefill(b) : 0; }

void backend_free(backend *b) {
    if (!b) return;
    stream_free(b->stream);
    b->stream = NULL;
    b->impl->free(b);
}
