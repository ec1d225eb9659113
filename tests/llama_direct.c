/* llama_direct.c — libllama called directly, without strata: the reference tests/llama.test.sh holds
 * strata-worker's llama backend to. Prefills a token file in chunks and writes every position's
 * logit row in strata-worker's --dump-logits format (int32 vocab, int32 rows, rows x vocab f32), so
 * the two files can be compared byte for byte. Built by `make llama` only (it links libllama).
 *
 *   llama_direct MODEL TOKENS OUT CTX CHUNK THREADS K V FA [TRUNC]
 *     TOKENS   decimal ids separated by whitespace or commas
 *     K, V     llama.cpp cache type names (f16, q8_0, ...)
 *     FA       on, off or auto
 *     TRUNC    optional depth d: after the prefill, drop positions >= d (llama_memory_seq_rm) and
 *              prefill the tokens from d on again; the rows written are those of the second pass for
 *              positions >= d (the first pass's below d)
 * The settings mirror kernels/llama/backend_llama.c's (one sequence, n_batch = n_ubatch = CHUNK,
 * no device, no extra buffer types, full sliding-window cache). Exit 0, or 1 with one line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (level == GGML_LOG_LEVEL_ERROR) fprintf(stderr, "llama.cpp: %s", text);
}

static int type_of(const char *name, enum ggml_type *t) {
    for (int i = 0; i < GGML_TYPE_COUNT; i++) {
        const char *n = ggml_type_name((enum ggml_type)i);
        if (n && !strcmp(n, name)) { *t = (enum ggml_type)i; return 0; }
    }
    return -1;
}

/* Reads the ids of path into *out [*n] (malloc'd). */
static int read_tokens(const char *path, int32_t **out, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int cap = 1024, k = 0;
    int32_t *t = malloc(sizeof *t * (size_t)cap);
    long v;
    int c;
    while (t) {
        while ((c = fgetc(f)) != EOF && (c == ',' || c == ' ' || c == '\n' || c == '\t' || c == '\r')) {}
        if (c == EOF) break;
        ungetc(c, f);
        if (fscanf(f, "%ld", &v) != 1) { free(t); t = NULL; break; }
        if (k == cap) {
            int32_t *nt = realloc(t, sizeof *t * (size_t)(cap *= 2));
            if (!nt) free(t);
            t = nt;
            if (!t) break;
        }
        t[k++] = (int32_t)v;
    }
    fclose(f);
    if (!t) return -1;
    *out = t;
    *n = k;
    return 0;
}

/* Prefills toks[from..n) at positions from.. in chunks, each row into rows + pos * V. */
static int prefill(struct llama_context *ctx, struct llama_batch *b, const int32_t *toks, int from, int n, int chunk,
                   int V, float *rows) {
    for (int p = from; p < n; p += chunk) {
        int T = n - p < chunk ? n - p : chunk;
        b->n_tokens = T;
        for (int i = 0; i < T; i++) {
            b->token[i] = toks[p + i];
            b->pos[i] = p + i;
            b->n_seq_id[i] = 1;
            b->seq_id[i][0] = 0;
            b->logits[i] = 1;
        }
        if (llama_decode(ctx, *b)) { fprintf(stderr, "llama_direct: llama_decode failed at %d\n", p); return -1; }
        for (int i = 0; i < T; i++) {
            const float *r = llama_get_logits_ith(ctx, i);
            if (!r) { fprintf(stderr, "llama_direct: no logits for row %d\n", i); return -1; }
            memcpy(rows + (size_t)(p + i) * V, r, sizeof(float) * (size_t)V);
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 10 && argc != 11) {
        fprintf(stderr, "usage: llama_direct MODEL TOKENS OUT CTX CHUNK THREADS K V FA [TRUNC]\n");
        return 1;
    }
    int n_ctx = atoi(argv[4]), chunk = atoi(argv[5]), threads = atoi(argv[6]), trunc = argc == 11 ? atoi(argv[10]) : -1;
    enum ggml_type tk, tv;
    if (type_of(argv[7], &tk) || type_of(argv[8], &tv)) { fprintf(stderr, "llama_direct: unknown cache type\n"); return 1; }
    enum llama_flash_attn_type fa = !strcmp(argv[9], "on")    ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                                    : !strcmp(argv[9], "off") ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                                              : LLAMA_FLASH_ATTN_TYPE_AUTO;
    int32_t *toks = NULL;
    int n = 0;
    if (read_tokens(argv[2], &toks, &n) || n == 0 || n > n_ctx) {
        fprintf(stderr, "llama_direct: %s: no tokens, or more than the context\n", argv[2]);
        return 1;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    ggml_backend_dev_t none[1] = { NULL };
    mp.devices = none;
    mp.n_gpu_layers = 0;
    mp.use_extra_bufts = false;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "llama_direct: cannot load %s\n", argv[1]); return 1; }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = cp.n_ubatch = (uint32_t)chunk;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = threads;
    cp.flash_attn_type = fa;
    cp.type_k = tk;
    cp.type_v = tv;
    cp.offload_kqv = false;
    cp.op_offload = false;
    cp.no_perf = true;
    cp.swa_full = true;
    cp.kv_unified = true;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "llama_direct: no context\n"); return 1; }
    int V = llama_vocab_n_tokens(llama_model_get_vocab(model));
    float *rows = malloc(sizeof(float) * (size_t)V * (size_t)n);
    struct llama_batch b = llama_batch_init(chunk, 0, 1);
    int rc = !rows || prefill(ctx, &b, toks, 0, n, chunk, V, rows);
    if (!rc && trunc >= 0) {
        if (!llama_memory_seq_rm(llama_get_memory(ctx), 0, trunc, -1)) { fprintf(stderr, "llama_direct: seq_rm failed\n"); rc = 1; }
        else rc = prefill(ctx, &b, toks, trunc, n, chunk, V, rows);
    }
    if (!rc) {
        FILE *f = fopen(argv[3], "wb");
        int32_t hdr[2] = { V, n };
        rc = !f || fwrite(hdr, 4, 2, f) != 2 || fwrite(rows, sizeof(float) * (size_t)V, (size_t)n, f) != (size_t)n;
        if (f && fclose(f)) rc = 1;
        if (rc) fprintf(stderr, "llama_direct: cannot write %s\n", argv[3]);
    }
    llama_batch_free(b);
    free(rows);
    free(toks);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc ? 1 : 0;
}
