/* engine_run.h — the tests' cached engine run (test_real.c, test_quant_iq.c): one model's logit
 * rows for a token list and its greedy continuation, kept while the next fixture asks for the same
 * model and tokens (<model>.<text> and <model>-f32.<text> do). Header-only; the run owns its
 * buffers: run_clear frees them. */
#ifndef STRATA_TESTS_ENGINE_RUN_H
#define STRATA_TESTS_ENGINE_RUN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/engine.h"

typedef struct {
    char mpath[1024];     /* model file, "" when empty */
    int n, ng, n_vocab;
    int32_t *tokens;      /* [n] */
    float *rows;          /* [n][n_vocab] logits of every position */
    int32_t *gen;         /* [ng] greedy continuation */
    float *gen_gap;       /* [ng] its top-1 minus top-2 gaps */
} engine_run;

static inline void run_clear(engine_run *r) {
    free(r->tokens); free(r->gen); free(r->rows); free(r->gen_gap);
    memset(r, 0, sizeof *r);
}

/* r = the f32-KV engine on mpath (2 threads; rope_f32: llama.cpp's f32 RoPE angles) over tok [n]
 * with every row, then ng greedy tokens; *reused (may be NULL) = 1 when r already held exactly
 * that. 0, or -1 with a message in err (r cleared). */
static inline int run_engine(engine_run *r, const char *mpath, const int32_t *tok, int n, int ng, int rope_f32,
                             int *reused, char *err, size_t errlen) {
    char warn[256];
    engine *e = NULL;
    size_t nr;
    int rc = -1;
    int same = r->rows && !strcmp(r->mpath, mpath) && r->n == n && r->ng == ng &&
               !memcmp(r->tokens, tok, sizeof(int32_t) * (size_t)n);
    if (reused) *reused = same;
    if (same) return 0;
    run_clear(r);
    engine_config cfg = { mpath, KV_F32, KV_F32, 2, 512, 0, rope_f32, 0, NULL, 0, 0, 0 };
    if (engine_create(&cfg, &e, err, errlen, warn, sizeof warn)) goto done;
    r->tokens = malloc(sizeof(int32_t) * (size_t)n);
    r->gen = malloc(sizeof(int32_t) * (size_t)ng);
    r->gen_gap = malloc(sizeof(float) * (size_t)ng);
    if (!r->tokens || !r->gen || !r->gen_gap) { snprintf(err, errlen, "out of memory"); goto done; }
    if (engine_prefill(e, tok, (size_t)n, ENGINE_ROWS_ALL, &r->rows, &nr, err, errlen)) goto done;
    if (engine_generate(e, ng, 0.0, 0, r->gen, r->gen_gap, err, errlen)) goto done;
    memcpy(r->tokens, tok, sizeof(int32_t) * (size_t)n);
    snprintf(r->mpath, sizeof r->mpath, "%s", mpath);
    r->n = n;
    r->ng = ng;
    r->n_vocab = e->m->n_vocab;
    rc = 0;
done:
    engine_free(e);
    if (rc) run_clear(r);
    return rc;
}

#endif
