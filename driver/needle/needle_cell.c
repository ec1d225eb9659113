/* needle_cell.c — one needle cell on every arm in lockstep (see needle_internal.h): back to the
 * longest common prefix, the prompt prefilled, the greedy answer, the gold answer teacher-forced,
 * the rows of cells.tsv and the twin check; and the calibration of the cost model.
 *
 * Reading order: the run's arrays; requests to every arm; one cell, step by step; calibration. */
#include "driver/needle/needle_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/stats.h"
#include "kernels/clock.h"
#include "kernels/errmsg.h"

int needle_run_alloc(needle_run *R, arm *arms, int n, int ref) {
    R->arms = arms;
    R->n = n;
    R->ref = ref;
    R->req = calloc((size_t)n, sizeof *R->req);
    R->rep = calloc((size_t)n, sizeof *R->rep);
    R->twin = calloc((size_t)n, sizeof *R->twin);
    R->twin_warned = calloc((size_t)n, sizeof *R->twin_warned);
    if (!R->req || !R->rep || !R->twin || !R->twin_warned) return -1;
    for (int i = 0; i < n; i++) R->twin[i] = workers_twin(arms, i);
    return 0;
}

void needle_run_free(needle_run *R) {
    free(R->req);
    free(R->rep);
    free(R->cur);
    free(R->twin);
    free(R->twin_warned);
    memset(R, 0, sizeof *R);
}

static void needle_free_reps(needle_run *R) {
    for (int a = 0; a < R->n; a++) proto_msg_free(&R->rep[a]);
}

/* arm_call_all on R->req; maps an interruption to 130-style code ARM_E_INTERRUPTED. */
static int needle_call_all(needle_run *R, char *err, size_t errlen) {
    return arm_call_all(R->arms, R->n, R->req, R->rep, R->recv_max, 0, R->stop, NULL, err, errlen);
}

int needle_truncate_all(needle_run *R, size_t depth, char *err, size_t errlen) {
    for (int a = 0; a < R->n; a++) {
        proto_init(&R->req[a], PROTO_TRUNCATE, 0, 0);
        R->req[a].truncate_req.depth = depth;
    }
    int rc = needle_call_all(R, err, errlen);
    for (int a = 0; !rc && a < R->n; a++)
        if (R->rep[a].truncate_rep.n_past != depth)
            rc = errmsg_set(err, errlen, PROTO_E_BADMSG, "arm %s: truncate to %zu left %llu tokens",
                            R->arms[a].name, depth, (unsigned long long)R->rep[a].truncate_rep.n_past);
    needle_free_reps(R);
    if (!rc) R->n_cur = depth < R->n_cur ? depth : R->n_cur;
    return rc;
}

/* Prefills ids [n] on every arm from the current stream end, in requests of R->chunk tokens; the
 * last asks for `rows` (PROTO_ROWS_LAST or _ALL). The replies of the last request stay in R->rep
 * (the caller frees them) when rows != NONE. */
static int needle_prefill_all(needle_run *R, const int32_t *ids, size_t n, uint32_t rows, char *err, size_t errlen) {
    for (size_t pos = 0; pos < n;) {
        size_t m = n - pos < (size_t)R->chunk ? n - pos : (size_t)R->chunk;
        int last = pos + m == n;
        uint32_t want = last ? rows : PROTO_ROWS_NONE;
        uint32_t n_rows = want == PROTO_ROWS_ALL ? (uint32_t)m : want == PROTO_ROWS_LAST ? 1 : 0;
        for (int a = 0; a < R->n; a++) {
            proto_init(&R->req[a], PROTO_PREFILL, 0, 0);
            R->req[a].prefill_req.tokens = (int32_t *)(ids + pos);
            R->req[a].prefill_req.n_tokens = m;
            R->req[a].prefill_req.rows = want;
        }
        int rc = needle_call_all(R, err, errlen);
        size_t n_past = R->n_cur + pos + m;
        for (int a = 0; !rc && a < R->n; a++) {
            const proto_prefill_rep *p = &R->rep[a].prefill_rep;
            if (p->n_past != n_past || p->n_rows != n_rows || (n_rows && (p->n_vocab != (uint32_t)R->V || !p->logits)))
                rc = errmsg_set(err, errlen, PROTO_E_BADMSG, "arm %s: prefill reply has n_past %llu and "
                                "%u rows, expected %zu and %u", R->arms[a].name,
                                (unsigned long long)p->n_past, p->n_rows, n_past, n_rows);
        }
        if (rc || !last || rows == PROTO_ROWS_NONE) needle_free_reps(R);
        if (rc) return rc;
        pos += m;
    }
    if (R->n_cur + n > R->cap) {
        size_t cap = (R->n_cur + n) * 2;
        int32_t *c = realloc(R->cur, cap * sizeof *c);
        if (!c) { needle_free_reps(R); return errmsg_set(err, errlen, PROTO_E_INTERNAL, "out of memory"); }
        R->cur = c;
        R->cap = cap;
    }
    memcpy(R->cur + R->n_cur, ids, n * sizeof *ids);
    R->n_cur += n;
    return 0;
}

/* ln p(tok) of a logit row [V] (log-softmax in double, docs/DESIGN.md §3.4). */
static int row_logprob(const float *row, int V, int tok, double *lp) {
    stats_row r;
    if (stats_compare_rows(row, row, V, tok, &r)) return -1;
    *lp = -r.nll_ref;
    return 0;
}


/* Step 1 of a cell: every arm back to the common prefix with the stream, the rest of the prompt
 * prefilled; lp[a] = ln p(gold[0]) from the last row. */
static int cell_prompt(needle_run *R, const needle_cell *c, double *lp, char *err, size_t errlen) {
    int rc;
    size_t lcp = needle_common_prefix(R->cur, R->n_cur, c->prompt, c->n);
    if (lcp > c->n - 1) lcp = c->n - 1;
    if (R->n_cur != lcp && (rc = needle_truncate_all(R, lcp, err, errlen))) return rc;
    if ((rc = needle_prefill_all(R, c->prompt + lcp, c->n - lcp, PROTO_ROWS_LAST, err, errlen))) return rc;
    for (int a = 0; a < R->n && !rc; a++)
        if (row_logprob(R->rep[a].prefill_rep.logits, R->V, c->gold[0], &lp[a]))
            rc = errmsg_set(err, errlen, PROTO_E_RANGE, "arm %s returned a non-finite logit at the end "
                            "of the prompt (length %d, position %d, trial %d)", R->arms[a].name,
                            c->length, c->position, c->trial);
    needle_free_reps(R);
    return rc;
}

/* Step 2: every arm's greedy answer into gen[a] [R->gen] (malloc'd), then back to the prompt. */
static int cell_answer(needle_run *R, const needle_cell *c, int32_t **gen, char *err, size_t errlen) {
    for (int a = 0; a < R->n; a++) {
        proto_init(&R->req[a], PROTO_GENERATE, 0, 0);
        R->req[a].generate_req.n = (uint32_t)R->gen;
        R->req[a].generate_req.temperature = 0.0;
        R->req[a].generate_req.seed = 0;
    }
    int rc = needle_call_all(R, err, errlen);
    for (int a = 0; !rc && a < R->n; a++) {
        const proto_generate_rep *g = &R->rep[a].generate_rep;
        if (g->n != (size_t)R->gen || !g->tokens || g->n_past != c->n + (size_t)R->gen - 1)
            rc = errmsg_set(err, errlen, PROTO_E_BADMSG, "arm %s: generate reply has %zu tokens and "
                            "n_past %llu, expected %d and %zu", R->arms[a].name, g->n,
                            (unsigned long long)g->n_past, R->gen, c->n + (size_t)R->gen - 1);
        else if (!(gen[a] = malloc((size_t)R->gen * sizeof *gen[a])))
            rc = errmsg_set(err, errlen, PROTO_E_INTERNAL, "out of memory");
        else memcpy(gen[a], g->tokens, (size_t)R->gen * sizeof *gen[a]);
    }
    needle_free_reps(R);
    if (rc) return rc;
    R->n_cur = c->n;   /* the generated tokens are dropped next: truncate restores the row */
    return needle_truncate_all(R, c->n, err, errlen);
}

/* Step 3: the gold answer teacher-forced: lp[a] += ln p(gold[i + 1] | .., gold[i]). */
static int cell_gold(needle_run *R, const needle_cell *c, double *lp, char *err, size_t errlen) {
    if (c->n_gold <= 1) return 0;
    int rc = needle_prefill_all(R, c->gold, c->n_gold - 1, PROTO_ROWS_ALL, err, errlen);
    if (rc) return rc;
    for (int a = 0; a < R->n && !rc; a++)
        for (size_t i = 0; i + 1 < c->n_gold && !rc; i++) {
            double x = 0;
            if (row_logprob(R->rep[a].prefill_rep.logits + i * (size_t)R->V, R->V, c->gold[i + 1], &x))
                rc = errmsg_set(err, errlen, PROTO_E_RANGE, "arm %s returned a non-finite logit in "
                                "the gold answer", R->arms[a].name);
            lp[a] += x;
        }
    needle_free_reps(R);
    return rc;
}

/* Step 4: the rows of cells.tsv, out[a] taking gen[a]. */
static int cell_rows(needle_run *R, const needle_tokenizer *T, const needle_cell *c, const double *lp,
                     int32_t **gen, needle_row *out, char *err, size_t errlen) {
    for (int a = 0; a < R->n; a++) {
        needle_row *r = &out[a];
        memset(r, 0, sizeof *r);
        r->length = c->length;
        r->position = c->position;
        r->trial = c->trial;
        r->chat = c->chat;
        r->key = c->keys.key[0];
        snprintf(r->arm, sizeof r->arm, "%s", R->arms[a].name);
        r->logprob = lp[a];
        r->n_prompt = (long)c->n;
        r->needle_pos = (long)c->needle_pos;
        r->gen = gen[a];
        gen[a] = NULL;
        r->n_gen = (size_t)R->gen;
        if (!(r->gold = malloc(c->n_gold * sizeof *r->gold)) ||
            needle_tok_decode(T, r->gen, r->n_gen, &r->generated, &r->n_generated))
            return errmsg_set(err, errlen, PROTO_E_INTERNAL, "out of memory");
        memcpy(r->gold, c->gold, c->n_gold * sizeof *r->gold);
        r->n_gold = c->n_gold;
        needle_first_digits(r->generated, r->n_generated, r->answer, sizeof r->answer);
        r->exact = !strcmp(r->answer, c->key_text);
    }
    return 0;
}

/* The twin check: an arm configured like an earlier one must give the same bits (a loud warning,
 * once per arm). */
static void cell_twins(needle_run *R, const needle_cell *c, const needle_row *out) {
    for (int a = 0; a < R->n; a++) {
        int t = R->twin[a];
        if (t < 0 || R->twin_warned[a]) continue;
        if (memcmp(&out[a].logprob, &out[t].logprob, sizeof(double)) ||
            memcmp(out[a].gen, out[t].gen, out[a].n_gen * sizeof *out[a].gen)) {
            char msg[512];
            R->twin_warned[a] = 1;
            snprintf(msg, sizeof msg, "arm %s is NOT bit-identical to arm %s (same K/V formats, device "
                     "and engine) at length %d, position %d, trial %d: the engine is not deterministic "
                     "and every number of this run is suspect", R->arms[a].name, R->arms[t].name,
                     c->length, c->position, c->trial);
            fprintf(stderr, "\nstrata-driver: WARNING: %s\n", msg);
            json_array_append_new(R->warnings, json_string(msg));
        }
    }
}

int needle_cell_run(needle_run *R, const needle_tokenizer *T, const needle_cell *c, needle_row *out, char *err,
                    size_t errlen) {
    int rc;
    double *lp = calloc((size_t)R->n, sizeof *lp);      /* [n] */
    int32_t **gen = calloc((size_t)R->n, sizeof *gen);  /* [n][gen] */
    if (!lp || !gen) { free(lp); free(gen); return errmsg_set(err, errlen, PROTO_E_INTERNAL, "out of memory"); }
    if (!(rc = cell_prompt(R, c, lp, err, errlen)) && !(rc = cell_answer(R, c, gen, err, errlen)) &&
        !(rc = cell_gold(R, c, lp, err, errlen)) && !(rc = cell_rows(R, T, c, lp, gen, out, err, errlen)))
        cell_twins(R, c, out);
    for (int a = 0; a < R->n; a++) free(gen[a]);
    free(gen);
    free(lp);
    return rc;
}

/* ============================================================================================
 * Calibration: two prefills of NEEDLE_CAL_TOKENS and NEEDLE_CAL_GEN generated tokens on every
 * arm, at the start of the first cell's prompt (so the work is not lost: that cell reuses it)
 * ========================================================================================== */


int needle_calibrate(needle_run *R, const needle_plan *P, needle_cost_model *m, json_t **cal, char *err,
                     size_t errlen) {
    memset(m, 0, sizeof *m);
    *cal = NULL;
    const needle_cell *c = NULL;
    for (int i = 0; i < P->n && !c; i++)
        if (!P->c[i].done) c = &P->c[i];
    if (!c || c->n < 2 * NEEDLE_CAL_TOKENS + 1 + (size_t)NEEDLE_CAL_GEN) return 0;   /* tiny prompts: no estimate */
    int rc;
    double t0 = clock_s();
    if ((rc = needle_prefill_all(R, c->prompt, NEEDLE_CAL_TOKENS, PROTO_ROWS_NONE, err, errlen))) return rc;
    double t1 = clock_s();
    if ((rc = needle_prefill_all(R, c->prompt + NEEDLE_CAL_TOKENS, NEEDLE_CAL_TOKENS, PROTO_ROWS_LAST, err, errlen))) return rc;
    needle_free_reps(R);
    double t2 = clock_s();
    for (int a = 0; a < R->n; a++) {
        proto_init(&R->req[a], PROTO_GENERATE, 0, 0);
        R->req[a].generate_req.n = NEEDLE_CAL_GEN;
    }
    rc = needle_call_all(R, err, errlen);
    needle_free_reps(R);
    if (rc) return rc;
    double t3 = clock_s();
    if ((rc = needle_truncate_all(R, 2 * NEEDLE_CAL_TOKENS, err, errlen))) return rc;
    double n = NEEDLE_CAL_TOKENS, x1 = t1 - t0, x2 = t2 - t1, x3 = t3 - t2;
    /* x1 = a n + b n²/2, x2 = a n + b (4n² − n²)/2 -> b = (x2 − x1)/n², a = (x1 − b n²/2)/n */
    m->b = (x2 - x1) / (n * n);
    if (m->b < 0) m->b = 0;
    m->a = (x1 - m->b * n * n / 2) / n;
    if (m->a < 0) m->a = x1 / n;
    m->d = x3 / NEEDLE_CAL_GEN - m->b * 2 * n;
    if (m->d < m->a) m->d = m->a;
    m->have = 1;
    *cal = json_pack("{s:i,s:f,s:f,s:i,s:f,s:f,s:f,s:f}", "tokens", 2 * NEEDLE_CAL_TOKENS, "prefill_seconds_first",
                     x1, "prefill_seconds_second", x2, "generated", NEEDLE_CAL_GEN, "generate_seconds", x3,
                     "a_seconds_per_token", m->a, "b_seconds_per_token_position", m->b,
                     "d_seconds_per_generated_token", m->d);
    return 0;
}
