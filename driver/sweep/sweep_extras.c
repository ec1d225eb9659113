/* sweep_extras.c — the optional measurements after a depth's greedy fork probe (docs/DESIGN.md
 * §2.2): sampled fork probes (samples.tsv), cross-scoring (cross.tsv, cross_samples.tsv) and the
 * passages (passages.tsv, driver/passages.h). See sweep_internal.h. */
#include "driver/sweep/sweep_internal.h"
#include "kernels/errmsg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/passages.h"
#include "driver/report/report.h"

/* Scores the continuations x [n][fork_n] (arm a's at x + a * fork_n) teacher-forced under the
 * reference and the f32 arm at depth d (every arm at d): for each distinct text, truncate both
 * scorers to d - 1 and prefill [token d-1, x_0 .. x_{n-2}] with every row; row i gives ln p(x_i).
 * Arms with the same text share its scores (the rows are bit-identical). Writes nll [2][n]: the
 * mean NLL per token under the reference, then under f32 (NAN: no f32 arm). The scorers end at
 * d - 1 + fork_n. */
static int score_texts(sweep_state *st, int d, const int32_t *x, double *nll, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const int n = st->n, R = c->ref, F = st->F, N = c->fork_n, V = st->V;
    int *scorer = calloc((size_t)n, sizeof *scorer);             /* [n] 1: R and F */
    int *uniq = calloc((size_t)n, sizeof *uniq);                 /* [n] first arm with the same text */
    int32_t *buf = malloc(sizeof *buf * (size_t)N);              /* [N] the prefill */
    char what[200];
    int rc = 0;
    if (!scorer || !uniq || !buf) { rc = errmsg_set(err, errlen, SWEEP_ERROR, "out of memory"); goto done; }
    scorer[R] = 1;
    if (F >= 0) scorer[F] = 1;
    for (int a = 0; a < n; a++) {
        uniq[a] = a;
        for (int b = 0; b < a && uniq[a] == a; b++)
            if (!memcmp(x + (size_t)a * N, x + (size_t)b * N, sizeof *x * (size_t)N)) uniq[a] = b;
    }
    for (int a = 0; a < n && !rc; a++) {
        const int32_t *xa = x + (size_t)a * N;
        if (uniq[a] != a) {
            nll[a] = nll[uniq[a]];
            nll[n + a] = nll[n + uniq[a]];
            continue;
        }
        if ((rc = sweep_truncate_arms(st, d - 1, scorer, "before cross-scoring", err, errlen))) break;
        buf[0] = c->tokens[d - 1];
        memcpy(buf + 1, xa, sizeof *buf * (size_t)(N - 1));
        for (int s = 0; s < n; s++) {
            proto_init(&st->req[s], scorer[s] ? PROTO_PREFILL : PROTO_NONE, 0, 0);
            st->req[s].prefill_req.tokens = buf;
            st->req[s].prefill_req.n_tokens = (size_t)N;
            st->req[s].prefill_req.rows = PROTO_ROWS_ALL;
        }
        snprintf(what, sizeof what, "a prefill request (cross-scoring arm %s's continuation at depth %d)",
                 st->arms[a].name, d);
        if ((rc = sweep_call(st, SWEEP_KIND_PREFILL, sweep_prefill_tokens(d - 1, N, c->worker_chunk), what, err,
                             errlen))) break;
        for (int s = 0; s < n && !rc; s++)
            if (scorer[s]) rc = sweep_check_prefill(&st->arms[s], &st->rep[s], (uint64_t)(d - 1 + N), (uint32_t)V,
                                                    (uint32_t)N, err, errlen);
        for (int k = 0; k < 2 && !rc; k++) {
            int s = k ? F : R;
            double sum = 0, lp;
            for (int i = 0; s >= 0 && i < N && !rc; i++) {
                if (stats_token_logprob(st->rep[s].prefill_rep.logits + (size_t)i * V, V, xa[i], &lp))
                    rc = errmsg_set(err, errlen, SWEEP_ERROR, "arm %s returned a non-finite logit while "
                                    "cross-scoring at depth %d", st->arms[s].name, d);
                sum -= lp;
            }
            nll[k * n + a] = s >= 0 ? sum / N : NAN;
        }
        sweep_free_reps(st->rep, n);
    }
done:
    free(scorer);
    free(uniq);
    free(buf);
    return rc;
}

/* The cross.tsv / cross_samples.tsv values of arm a: its text and the reference's, x [n][fork_n],
 * with their scores nll [2][n] (score_texts). */
static report_cross_vals cross_vals(const sweep_state *st, const int32_t *x, const double *nll, int a, int fork,
                                    int censored) {
    const int n = st->n, R = st->c->ref, N = st->c->fork_n;
    return (report_cross_vals){ fork, censored, N, nll[a], nll[R], nll[n + a], nll[n + R],
                                stats_repeat_rate(x + (size_t)a * N, N, REPORT_REPEAT_ORDER),
                                stats_repeat_rate(x + (size_t)R * N, N, REPORT_REPEAT_ORDER) };
}

/* The sampled fork probes of depth d (every arm at d): for each temperature T_j, every arm
 * samples fork_n tokens with the same seed (sweep_sample_seed), then is truncated back to d.
 * One samples.tsv line per non-reference arm and temperature into out. xout (NULL: none): each
 * arm's sampled text is also cross-scored (score_texts) and gets a cross_samples.tsv line, after
 * which every arm is back at d for the next temperature. */
int sweep_sampled_probes(sweep_state *st, int d, FILE *out, FILE *xout, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const int n = st->n, R = c->ref, N = c->fork_n;
    int32_t *x = xout ? malloc(sizeof *x * (size_t)n * (size_t)N) : NULL;   /* [n][N] the sampled texts */
    double *nll = xout ? malloc(sizeof *nll * 2 * (size_t)n) : NULL;       /* [2][n] their scores */
    int *fork = calloc((size_t)n, sizeof *fork), *cens = calloc((size_t)n, sizeof *cens);   /* [n] */
    int rc = 0;
    if ((xout && (!x || !nll)) || !fork || !cens) { rc = errmsg_set(err, errlen, SWEEP_ERROR, "out of memory"); goto done; }
    for (int j = 0; j < c->n_sample_temps && !rc; j++) {
        double T = c->sample_temps[j];
        uint64_t seed = sweep_sample_seed(c->sample_seed, d, j);
        if ((rc = sweep_generate_all(st, d, T, c->top_p, seed, err, errlen))) break;
        const proto_generate_rep *gr = &st->rep[R].generate_rep;
        for (int a = 0; a < n && !rc; a++) {
            const proto_generate_rep *g = &st->rep[a].generate_rep;
            int t = st->sa[a].twin;
            if (t >= 0 && !st->sa[a].twin_warned &&
                memcmp(g->tokens, st->rep[t].generate_rep.tokens, sizeof(int32_t) * (size_t)N)) {
                st->sa[a].twin_warned = 1;
                rc = sweep_warn_loud(st, a, err, errlen, "arm %s is NOT bit-identical to arm %s (same K/V formats, device "
                                     "and engine) in the sampled fork probe at depth %d, temperature %g: the engine is not "
                                     "deterministic and every number of this run is suspect", st->arms[a].name,
                                     st->arms[t].name, d, T);
            }
            if (x) memcpy(x + (size_t)a * N, g->tokens, sizeof *x * (size_t)N);
            if (rc || a == R) continue;
            fork[a] = sweep_fork_index(g->tokens, gr->tokens, N, &cens[a]);
            if (report_tsv_sample_row(out, d, st->arms[a].name, T, c->top_p, seed, fork[a], cens[a], g->tokens,
                                      gr->tokens, N))
                rc = errmsg_set(err, errlen, SWEEP_ERROR, "cannot format a samples.tsv row");
        }
        sweep_free_reps(st->rep, n);
        if (!rc) rc = sweep_truncate_arms(st, d, NULL, "back to the depth after a sampled fork probe", err, errlen);
        if (rc || !xout) continue;
        rc = score_texts(st, d, x, nll, err, errlen);
        for (int a = 0; a < n && !rc; a++) {
            if (a == R) continue;
            report_cross_vals v = cross_vals(st, x, nll, a, fork[a], cens[a]);
            if (report_tsv_cross_sample_row(xout, d, st->arms[a].name, T, &v))
                rc = errmsg_set(err, errlen, SWEEP_ERROR, "cannot format a cross_samples.tsv row");
        }
        /* back to depth d with position d-1's row, which the next probe generates from: token d-1
         * again (the same bits: batch invariance; the experts as the teacher-forced pass chose them) */
        if (!rc) rc = sweep_truncate_arms(st, d - 1, NULL, "back before the depth after cross-scoring a sampled probe", err,
                                          errlen);
        if (!rc) rc = sweep_prefill_step(st, 0, d - 1, 1, PROTO_ROWS_NONE, 0,
                                         "a prefill request (token depth-1 again, after cross-scoring)", err, errlen);
        if (!rc) sweep_free_reps(st->rep, n);
    }
done:
    free(x);
    free(nll);
    free(fork);
    free(cens);
    return rc;
}

/* Cross-scoring at depth d (every arm at d, greedy continuations in st->greedy): score_texts,
 * then one cross.tsv line per non-reference arm into out. The scorers end at d - 1 + fork_n. */
int sweep_cross_score(sweep_state *st, int d, FILE *out, char *err, size_t errlen) {
    const int n = st->n, R = st->c->ref;
    double *nll = malloc(sizeof *nll * 2 * (size_t)n);           /* [2][n] by R, by F (NAN: no F) */
    if (!nll) return errmsg_set(err, errlen, SWEEP_ERROR, "out of memory");
    int rc = score_texts(st, d, st->greedy, nll, err, errlen);
    for (int a = 0; a < n && !rc; a++) {
        if (a == R) continue;
        report_cross_vals v = cross_vals(st, st->greedy, nll, a, st->sa[a].fork, st->sa[a].censored);
        if (report_tsv_cross_row(out, d, st->arms[a].name, &v))
            rc = errmsg_set(err, errlen, SWEEP_ERROR, "cannot format a cross.tsv row");
    }
    free(nll);
    return rc;
}

/* ---- the passages (driver/passages.h): passages_ops on the sweep's own requests ---- */

/* passages_ops.score: every arm prefills tokens [start, start + m) after its `at` tokens, all rows;
 * compared (sweep_compare_block: next = token start + i + 1) and checked as per-position rows are */
static int pass_score(void *ctx, int at, int start, int m, const stats_row **out, const float *const **rows,
                      char *err, size_t errlen) {
    sweep_state *st = ctx;
    const sweep_config *c = st->c;
    const int n = st->n, V = st->V;
    char what[200];
    for (int a = 0; a < n; a++) {
        proto_init(&st->req[a], PROTO_PREFILL, 0, 0);
        st->req[a].prefill_req.tokens = (int32_t *)(c->tokens + start);
        st->req[a].prefill_req.n_tokens = (size_t)m;
        st->req[a].prefill_req.rows = PROTO_ROWS_ALL;
    }
    snprintf(what, sizeof what, "a prefill request (passage tokens %d..%d after %d tokens)", start, start + m - 1, at);
    int rc = sweep_call(st, SWEEP_KIND_PREFILL, sweep_prefill_tokens(at, m, c->worker_chunk), what, err, errlen);
    if (rc) return rc;
    for (int a = 0; a < n && !rc; a++)
        rc = sweep_check_prefill(&st->arms[a], &st->rep[a], (uint64_t)(at + m), (uint32_t)V, (uint32_t)m, err, errlen);
    for (int a = 0; a < n; a++) st->rows[a] = st->rep[a].prefill_rep.logits;
    if (!rc) rc = sweep_compare_block(st, st->rows, start, m, st->pr, st->bad, st->next, err, errlen);
    for (int i = 0; i < m && !rc; i++) {
        for (int a = 0; a < n; a++) st->rows[a] = st->rep[a].prefill_rep.logits + (size_t)i * V;
        rc = sweep_check_position(st, st->rows, st->bad + (size_t)i * n, at + i, at, err, errlen);
    }
    for (int a = 0; a < n; a++) st->rows[a] = st->rep[a].prefill_rep.logits;
    if (rc) sweep_free_reps(st->rep, n);
    *out = st->pr;
    *rows = st->rows;
    return rc;
}

static void pass_release(void *ctx) {
    sweep_state *st = ctx;
    sweep_free_reps(st->rep, st->n);
}

static int pass_truncate(void *ctx, int depth, char *err, size_t errlen) {
    return sweep_truncate_arms(ctx, depth, NULL, "back to the depth after a passage", err, errlen);
}

/* The passages after the d tokens of the prefix (every arm truncated to d first, and back at d
 * after): their passages.tsv lines into tq (opened here; the caller frees it). */
int sweep_run_passages(sweep_state *st, int d, sweep_text *tq, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const char **names = malloc(sizeof *names * (size_t)st->n);   /* [n] */
    int rc = 0;
    if (!names || sweep_tb_open(tq)) rc = errmsg_set(err, errlen, SWEEP_ERROR, "out of memory");
    for (int a = 0; !rc && a < st->n; a++) names[a] = st->arms[a].name;
    if (!rc) rc = sweep_truncate_arms(st, d, NULL, "to the depth before its passages", err, errlen);
    passages_ops ops = { st, st->n, c->ref, st->V, names, pass_score, pass_release, pass_truncate };
    if (!rc) rc = passages_measure(&ops, d, c->passage_starts, c->n_passages, c->passage_len, c->chunk, tq->f,
                                   c->dump_rows_dir, err, errlen);
    if (rc < 0) rc = SWEEP_ERROR;
    if (!rc && sweep_tb_close(tq)) rc = errmsg_set(err, errlen, SWEEP_ERROR, "out of memory formatting %s rows", PASSAGES_FILE);
    free(names);
    return rc;
}

/* The passages' baseline (every arm at 0): prefill the base prefix, score the passages, truncate
 * to 0; journalled (a PASSAGES record, synced) before its lines reach passages.tsv. */
int sweep_passages_baseline(sweep_state *st, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const int b = st->pass_base;
    sweep_text tq = { 0 };
    int rc = 0;
    if (st->pos_done != 0)
        return errmsg_set(err, errlen, SWEEP_ERROR, "the journal holds positions but not the passages' baseline");
    if (b > 0) {
        rc = sweep_prefill_step(st, 0, 0, b, PROTO_ROWS_NONE, 0, "a prefill request (the passages' base prefix)", err,
                                errlen);
        for (int a = 0; a < st->n && !rc; a++)
            rc = sweep_check_prefill(&st->arms[a], &st->rep[a], (uint64_t)b, (uint32_t)st->V, 0, err, errlen);
        if (!rc) sweep_free_reps(st->rep, st->n);
    }
    if (!rc) rc = sweep_run_passages(st, b, &tq, err, errlen);
    if (!rc) rc = sweep_truncate_arms(st, 0, NULL, "to 0 after the passages' baseline", err, errlen);
    if (!rc) {
        journal_buf jb = { 0 };
        jbuf_u32(&jb, (uint32_t)b);
        jbuf_str(&jb, tq.p ? tq.p : "", tq.n);
        rc = sweep_jn_append(st, JOURNAL_PASSAGES, &jb, err, errlen);
        free(jb.p);
    }
    if (!rc) rc = sweep_jn_sync(st, err, errlen);
    if (!rc) rc = sweep_tsv_put(st->passages, PASSAGES_FILE, c, tq.p, tq.n, err, errlen);
    if (!rc) rc = sweep_tsv_sync(st, err, errlen);
    if (!rc) st->pass_base_done = 1;
    sweep_tb_free(&tq);
    return rc;
}
