/* sweep_depth.c — the measurement of each depth (docs/DESIGN.md §2): the progress line, comparing
 * the arms' rows against the reference's, and sweep_run_depths with its steps. See
 * sweep_internal.h. */
#include "driver/sweep/sweep_internal.h"
#include "kernels/errmsg.h"
#include "kernels/clock.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver/passages.h"
#include "driver/report/report.h"

/* ============================================================================================
 * Progress on stderr: a bar redrawn with \r on a terminal, else a plain line every 5 s
 * ========================================================================================== */

static void fmt_eta(double s, char *buf, size_t len) {
    if (!isfinite(s) || s < 0) { snprintf(buf, len, "?"); return; }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, len, "%ld:%02ld", t / 60, t % 60);
}

/* 1 when a line is due (force, or 0.1 s on a terminal / 5 s otherwise since the last one). */
static int progress_due(const sweep_progress *p, int force) {
    if (p->quiet) return 0;
    return force || clock_s() - p->last >= (p->tty ? 0.1 : 5.0);
}

static void progress_print(sweep_progress *p, int depth_k, long done) {
    double t = clock_s();
    p->last = t;
    double el = t - p->t0, rate = el > 0 ? (done - p->base) / el : 0;
    char eta[32];
    fmt_eta(rate > 0 ? (p->total - done) / rate : NAN, eta, sizeof eta);
    int pct = p->total > 0 ? (int)(100.0 * done / p->total) : 100;
    if (p->tty) {
        char bar[31];
        int fill = pct * 30 / 100;
        for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
        bar[30] = 0;
        fprintf(stderr, "\r[%s] depth %d/%d  %ld/%ld tokens  %.0f tok/s  ETA %s   ", bar, depth_k,
                p->n_depths, done, p->total, rate, eta);
        p->drawn = 1;
    } else {
        fprintf(stderr, "strata-driver: depth %d/%d, %ld/%ld tokens (%d%%), %.0f tok/s, ETA %s\n", depth_k,
                p->n_depths, done, p->total, pct, rate, eta);
    }
    fflush(stderr);
}

/* The progress line of this session: it counts from the journalled position. */
void sweep_progress_start(sweep_state *st) {
    const sweep_config *c = st->c;
    memset(&st->pg, 0, sizeof st->pg);
    st->pg.quiet = c->quiet;
    st->pg.tty = isatty(2);
    st->pg.t0 = st->pg.last = clock_s();
    st->pg.total = c->depths[c->n_depths - 1];
    st->pg.base = st->pos_done;
    st->pg.n_depths = c->n_depths;
}

void sweep_progress_end(sweep_progress *p) {
    if (!p->quiet && p->drawn) fprintf(stderr, "\n");
    p->drawn = 0;
}

/* Progress: the journal is synced before the line claims anything. */
int sweep_show_progress(sweep_state *st, int depth_k, long done, int force, char *err, size_t errlen) {
    if (!progress_due(&st->pg, force)) return 0;
    int rc = sweep_jn_sync(st, err, errlen);
    if (!rc) progress_print(&st->pg, depth_k, done);
    return rc;
}

/* ============================================================================================
 * Comparing the arms' rows against the reference's
 * ========================================================================================== */

static int row_finite(const float *row, int n) {
    for (int i = 0; i < n; i++)
        if (!isfinite(row[i])) return 0;
    return 1;
}

static int dump_row(const sweep_config *c, const arm *a, int depth, const float *row, int V, char *err,
                    size_t errlen) {
    char name[ARM_NAME_MAX], path[4096];
    snprintf(name, sizeof name, "%s", a->name);
    for (char *q = name; *q; q++)
        if (*q == '/' || *q == ':') *q = '_';
    snprintf(path, sizeof path, "%s/%s-%d.f32", c->dump_rows_dir, name, depth);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(row, sizeof(float), (size_t)V, f) == (size_t)V;
    if (f && fclose(f)) ok = 0;
    if (!ok) return errmsg_set(err, errlen, SWEEP_ERROR, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

/* One thread's share of a block of positions: for rows i = first, first + step, ... < n_rows,
 * every non-reference arm's row base[a] + i*V against the reference's. Each (i, a) is computed

 * by one thread alone, so the numbers do not depend on the thread count. */
typedef struct {
    const float *const *base;  /* [n] each arm's first row; row i at base[a] + i*V */
    int n, V, ref, n_rows, first, step;
    const int32_t *next;       /* [n_rows] the true next token of each row (-1: none) */
    stats_row *out;            /* [n_rows][n] */
    int *bad;                  /* [n_rows][n] 1 where the pair was refused (a non-finite logit) */
    double *scratch;           /* [2][V] the reference row's ln p and p (this thread's) */
} compare_job;

static void *compare_worker(void *arg) {
    compare_job *j = arg;
    for (int i = j->first; i < j->n_rows; i += j->step) {
        stats_ref r;
        int ref_bad = stats_ref_prepare(j->base[j->ref] + (size_t)i * j->V, j->V, j->scratch, j->scratch + j->V, &r);
        for (int a = 0; a < j->n; a++) {
            size_t k = (size_t)i * j->n + a;
            memset(&j->out[k], 0, sizeof j->out[k]);
            j->bad[k] = 0;
            if (a == j->ref) continue;
            j->bad[k] = ref_bad || stats_compare_prepared(j->base[a] + (size_t)i * j->V, &r, j->next[i], &j->out[k]);
        }
    }
    return NULL;
}

/* Computes rows 0..n_rows-1 of every arm (base[a] [n_rows][V]) against the reference's, for
 * positions pos.., on up to c->compare_threads threads (this thread does a share; a thread that
 * cannot start has its share done here). out [n_rows][n], bad [n_rows][n], next [n_rows] are the
 * caller's; the reference's ln p and p ([2][V] per thread) are allocated here and freed.
 * Returns 0, or SWEEP_ERROR when out of memory. */
int sweep_compare_block(const sweep_state *st, const float *const *base, int pos, int n_rows, stats_row *out,
                         int *bad, int32_t *next, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    for (int i = 0; i < n_rows; i++)
        next[i] = (size_t)(pos + i) + 1 < c->n_tokens ? c->tokens[pos + i + 1] : -1;
    int T = c->compare_threads < 1 ? 1 : c->compare_threads > SWEEP_COMPARE_THREADS_MAX
                                             ? SWEEP_COMPARE_THREADS_MAX : c->compare_threads;
    if (T > n_rows) T = n_rows;
    double *scratch = malloc((size_t)T * 2 * (size_t)st->V * sizeof *scratch);  /* [T][2][V] */
    if (!scratch) return errmsg_set(err, errlen, SWEEP_ERROR, "out of memory comparing rows");
    compare_job jobs[SWEEP_COMPARE_THREADS_MAX];
    pthread_t tid[SWEEP_COMPARE_THREADS_MAX];
    int started[SWEEP_COMPARE_THREADS_MAX] = { 0 };
    for (int t = 0; t < T; t++) {
        jobs[t] = (compare_job){ base, st->n, st->V, c->ref, n_rows, t, T, next, out, bad,
                                 scratch + (size_t)t * 2 * st->V };
        if (t > 0) started[t] = pthread_create(&tid[t], NULL, compare_worker, &jobs[t]) == 0;
    }
    compare_worker(&jobs[0]);
    for (int t = 1; t < T; t++) {
        if (started[t]) pthread_join(tid[t], NULL);
        else compare_worker(&jobs[t]);
    }
    free(scratch);
    return 0;
}

/* Checks one position's comparison (out[n], bad[n] from sweep_compare_block; rows[n] the arms' rows
 * [V]): a refused pair is an error naming the arm whose row is not finite; an arm not
 * bit-identical to its twin is a loud warning (once per arm). Returns 0 or SWEEP_ERROR. */
int sweep_check_position(sweep_state *st, const float *const *rows, const int *bad, int pos, int depth_for_msg,
                          char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const int V = st->V;
    for (int a = 0; a < st->n; a++) {
        if (a != c->ref && bad[a]) {
            int which = row_finite(rows[a], V) ? c->ref : a;
            return errmsg_set(err, errlen, SWEEP_ERROR, "arm %s returned a non-finite logit at position %d "
                           "(depth %d); stopping, the rows measured so far are kept", st->arms[which].name, pos,
                           depth_for_msg);
        }
        int t = st->sa[a].twin;
        if (t >= 0 && !st->sa[a].twin_warned && memcmp(rows[a], rows[t], (size_t)V * sizeof(float))) {
            st->sa[a].twin_warned = 1;
            int rc = sweep_warn_loud(st, a, err, errlen, "arm %s is NOT bit-identical to arm %s (same K/V formats, "
                                     "device and engine) at position %d: the engine is not deterministic and every "
                                     "number of this run is suspect", st->arms[a].name, st->arms[t].name, pos);
            if (rc) return rc;
        }
    }
    return 0;
}

/* ============================================================================================
 * The measurement of each depth
 * ========================================================================================== */

/* One depth's TSV lines, built while it is measured and written once its record is journalled;
 * each buffer is opened by the step that fills it and freed when the depth is committed. */
typedef struct {
    sweep_text pos;             /* positions.tsv (per-position mode): the lines of the last chunk */
    sweep_text depths, forks;   /* depths.tsv, forks.tsv: the fork probe */
    sweep_text cross, samples;  /* cross.tsv, samples.tsv (st->extra) */
    sweep_text cross_samples;   /* cross_samples.tsv (st->xsamp) */
    sweep_text passages;        /* passages.tsv (cfg.n_passages) */
} depth_lines;

static void lines_free(depth_lines *L) {
    sweep_tb_free(&L->pos);
    sweep_tb_free(&L->depths);
    sweep_tb_free(&L->forks);
    sweep_tb_free(&L->cross);
    sweep_tb_free(&L->samples);
    sweep_tb_free(&L->cross_samples);
    sweep_tb_free(&L->passages);
}

/* Per-position mode: the n_rows rows of the prefill reply in st->rep (positions pos..) compared
 * with the reference's and checked; their positions.tsv lines into tp (this chunk's only). */
static int position_rows(sweep_state *st, int pos, int n_rows, int d, sweep_text *tp, char *err, size_t errlen) {
    const int n = st->n, V = st->V, R = st->c->ref;
    sweep_tb_free(tp);
    if (sweep_tb_open(tp)) return errmsg_set(err, errlen, SWEEP_ERROR, "out of memory");
    for (int a = 0; a < n; a++) st->rows[a] = st->rep[a].prefill_rep.logits;
    int ret = sweep_compare_block(st, st->rows, pos, n_rows, st->pr, st->bad, st->next, err, errlen);
    for (int i = 0; !ret && i < n_rows; i++) {
        for (int a = 0; a < n; a++) st->rows[a] = st->rep[a].prefill_rep.logits + (size_t)i * V;
        int p = pos + i;
        const stats_row *pr = st->pr + (size_t)i * n;
        ret = sweep_check_position(st, st->rows, st->bad + (size_t)i * n, p, d, err, errlen);
        for (int a = 0; a < n && !ret; a++)
            if (a != R && report_tsv_position_row(tp->f, p, st->arms[a].name, &pr[a]))
                ret = errmsg_set(err, errlen, SWEEP_ERROR, "cannot format a positions.tsv row");
    }
    if (!ret && sweep_tb_close(tp))
        ret = errmsg_set(err, errlen, SWEEP_ERROR, "out of memory formatting positions.tsv rows");
    return ret;
}

/* The teacher-forced row of depth d: position d - 1, the last of the n_rows rows in st->rep;
 * compared (into st->sa[a].tf) and checked; --dump-rows writes each arm's. */
static int teacher_forced_row(sweep_state *st, int d, int n_rows, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const int n = st->n, V = st->V;
    for (int a = 0; a < n; a++) st->rows[a] = st->rep[a].prefill_rep.logits + (size_t)(n_rows - 1) * V;
    int ret = sweep_compare_block(st, st->rows, d - 1, 1, st->pr, st->bad, st->next, err, errlen);
    for (int a = 0; a < n && !ret; a++) st->sa[a].tf = st->pr[a];
    if (!ret) ret = sweep_check_position(st, st->rows, st->bad, d - 1, d, err, errlen);
    for (int a = 0; a < n && !ret && c->dump_rows_dir; a++)
        ret = dump_row(c, &st->arms[a], d, st->rows[a], V, err, errlen);
    return ret;
}

/* A chunk that does not end its depth (per-position mode): its lines tp are journalled (a CHUNK
 * record), then appended to positions.tsv; work continues after it. */
static int commit_chunk(sweep_state *st, int pos, int m, const sweep_text *tp, char *err, size_t errlen) {
    journal_buf b = { 0 };
    jbuf_u32(&b, (uint32_t)pos);
    jbuf_u32(&b, (uint32_t)(pos + m));
    jbuf_f64(&b, st->wall_prev + clock_s() - st->t0);
    jbuf_str(&b, tp->p, tp->n);
    sweep_jbuf_routing(st, &b);
    int ret = sweep_jn_append(st, JOURNAL_CHUNK, &b, err, errlen);
    free(b.p);
    if (ret) return ret;
    sweep_routing_committed(st);
    if ((ret = sweep_tsv_put(st->positions, "positions.tsv", st->c, tp->p, tp->n, err, errlen))) return ret;
    st->pos_done = pos + m;
    return 0;
}

/* One prefill request of depth k: positions pos..pos+m-1 on every arm, with every row
 * (per-position mode), the last row (the chunk that ends the depth) or none. The replies are
 * checked, the routing counted, the rows compared, then dropped. */
static int prefill_chunk(sweep_state *st, int k, int pos, int m, depth_lines *L, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const int n = st->n, d = c->depths[k], last = pos + m == d;
    uint32_t want = c->per_position ? PROTO_ROWS_ALL : last ? PROTO_ROWS_LAST : PROTO_ROWS_NONE;
    uint32_t n_rows = want == PROTO_ROWS_ALL ? (uint32_t)m : want == PROTO_ROWS_LAST ? 1 : 0;
    char what[160];
    snprintf(what, sizeof what, "a prefill request (positions %d..%d of depth %d)", pos, pos + m - 1, d);
    int ret = sweep_prefill_step(st, 0, pos, m, want, 1, what, err, errlen);
    if (ret) return ret;   /* the replies are freed */
    for (int a = 0; a < n && !ret; a++)
        ret = sweep_check_prefill(&st->arms[a], &st->rep[a], (uint64_t)(pos + m), (uint32_t)st->V, n_rows, err,
                                  errlen);
    if (ret) goto done;
    if (st->moe && (ret = sweep_count_routing(st, m, err, errlen))) goto done;
    if (c->per_position && (ret = position_rows(st, pos, (int)n_rows, d, &L->pos, err, errlen))) goto done;
    if (last) ret = teacher_forced_row(st, d, (int)n_rows, err, errlen);
done:
    sweep_free_reps(st->rep, n);
    if (!ret && !last && c->per_position) ret = commit_chunk(st, pos, m, &L->pos, err, errlen);
    return ret;
}

/* Prefills depth k's positions [pos_done, d) in requests that end at multiples of cfg.chunk (or
 * at d), the progress line after each. Aligned requests cost a batch-invariant worker nothing and
 * spare a worker that needs aligned prefills (llama.cpp, worker/engine.h) re-running a chunk's
 * start for each request: only the first request after a depth re-runs one. */
static int prefill_depth(sweep_state *st, int k, depth_lines *L, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const int d = c->depths[k];
    for (int pos = st->pos_done; pos < d;) {
        if (c->stop && *c->stop) return SWEEP_INTERRUPTED;
        int m = c->chunk - pos % c->chunk;
        if (m > d - pos) m = d - pos;
        int ret = prefill_chunk(st, k, pos, m, L, err, errlen);
        if (ret) return ret;
        pos += m;
        if ((ret = sweep_show_progress(st, k + 1, pos, 0, err, errlen))) return ret;
    }
    return 0;
}

/* The greedy fork probe of depth d: every arm generates fork_n tokens; fork index against the
 * reference's (st->sa[a].fork, .censored), the twin check, the depths.tsv and forks.tsv lines;
 * with st->extra each arm's tokens are kept in st->greedy for cross-scoring. */
static int fork_probe(sweep_state *st, int d, depth_lines *L, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const int n = st->n, R = c->ref;
    int ret = sweep_generate_all(st, d, 0.0, 0.0, 0, err, errlen);
    if (ret) return ret;
    if (sweep_tb_open(&L->depths) || sweep_tb_open(&L->forks)) ret = errmsg_set(err, errlen, SWEEP_ERROR, "out of memory");
    const proto_generate_rep *gr = &st->rep[R].generate_rep;
    for (int a = 0; a < n && !ret; a++) {
        sweep_arm *A = &st->sa[a];
        const proto_generate_rep *g = &st->rep[a].generate_rep;
        A->fork = sweep_fork_index(g->tokens, gr->tokens, c->fork_n, &A->censored);
        int t = A->twin;
        if (t >= 0 && !A->twin_warned &&
            (memcmp(g->tokens, st->rep[t].generate_rep.tokens, sizeof(int32_t) * (size_t)c->fork_n) ||
             memcmp(g->gaps, st->rep[t].generate_rep.gaps, sizeof(float) * (size_t)c->fork_n))) {
            A->twin_warned = 1;
            ret = sweep_warn_loud(st, a, err, errlen, "arm %s is NOT bit-identical to arm %s (same K/V formats, "
                                  "device and engine) in the fork probe at depth %d: the engine is not deterministic "
                                  "and every number of this run is suspect", st->arms[a].name, st->arms[t].name, d);
            if (ret) break;
        }
        if (st->extra) memcpy(st->greedy + (size_t)a * c->fork_n, g->tokens, sizeof(int32_t) * (size_t)c->fork_n);
        if (a == R) continue;
        double ga = A->censored ? NAN : g->gaps[A->fork];
        double gref = A->censored ? NAN : gr->gaps[A->fork];
        if (report_tsv_depth_row(L->depths.f, d, st->arms[a].name, &A->tf, A->fork, A->censored, ga, gref) ||
            report_tsv_fork_row(L->forks.f, d, st->arms[a].name, A->fork, A->censored, g->tokens, c->fork_n,
                                gr->tokens, c->fork_n))
            ret = errmsg_set(err, errlen, SWEEP_ERROR, "cannot format the depths.tsv / forks.tsv rows");
    }
    sweep_free_reps(st->rep, n);
    if (!ret && (sweep_tb_close(&L->depths) || sweep_tb_close(&L->forks)))
        ret = errmsg_set(err, errlen, SWEEP_ERROR, "out of memory formatting depths.tsv / forks.tsv rows");
    return ret;
}

/* The optional measurements after the fork probe (st->extra; sweep_extras.c): every arm back at
 * d, the sampled fork probes (samples.tsv, cross_samples.tsv), cross-scoring (cross.tsv). */
static int extras(sweep_state *st, int d, depth_lines *L, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    int ret;
    if (sweep_tb_open(&L->cross) || sweep_tb_open(&L->samples) || (st->xsamp && sweep_tb_open(&L->cross_samples)))
        return errmsg_set(err, errlen, SWEEP_ERROR, "out of memory");
    if ((ret = sweep_truncate_arms(st, d, NULL, "back to the depth after the fork probe", err, errlen))) return ret;
    if ((ret = sweep_sampled_probes(st, d, L->samples.f, st->xsamp ? L->cross_samples.f : NULL, err, errlen)))
        return ret;
    if (c->cross_score && (ret = sweep_cross_score(st, d, L->cross.f, err, errlen))) return ret;
    if (sweep_tb_close(&L->cross) || sweep_tb_close(&L->samples) || (st->xsamp && sweep_tb_close(&L->cross_samples)))
        return errmsg_set(err, errlen, SWEEP_ERROR, "out of memory formatting cross.tsv / samples.tsv rows");
    return 0;
}

/* Depth k's DEPTH record (sweep_journal.c's format) into b. */
static void depth_record(const sweep_state *st, int k, const depth_lines *L, journal_buf *b) {
    const sweep_config *c = st->c;
    jbuf_u32(b, (uint32_t)k);
    jbuf_u32(b, (uint32_t)c->depths[k]);
    jbuf_u32(b, (uint32_t)st->pos_done);
    jbuf_f64(b, st->wall_prev + clock_s() - st->t0);
    jbuf_str(b, c->per_position ? L->pos.p : "", c->per_position ? L->pos.n : 0);
    jbuf_str(b, L->depths.p, L->depths.n);
    jbuf_str(b, L->forks.p, L->forks.n);
    if (st->extra) {
        jbuf_str(b, L->cross.p ? L->cross.p : "", L->cross.n);
        jbuf_str(b, L->samples.p ? L->samples.p : "", L->samples.n);
    }
    if (st->xsamp) jbuf_str(b, L->cross_samples.p ? L->cross_samples.p : "", L->cross_samples.n);
    if (c->n_passages) jbuf_str(b, L->passages.p ? L->passages.p : "", L->passages.n);
    sweep_jbuf_routing(st, b);
}

/* The depth's lines appended to their TSV files, in the order of its DEPTH record. */
static int write_lines(sweep_state *st, const depth_lines *L, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    int ret;
    if (c->per_position && (ret = sweep_tsv_put(st->positions, "positions.tsv", c, L->pos.p, L->pos.n, err, errlen)))
        return ret;
    if ((ret = sweep_tsv_put(st->depths, "depths.tsv", c, L->depths.p, L->depths.n, err, errlen))) return ret;
    if ((ret = sweep_tsv_put(st->forks, "forks.tsv", c, L->forks.p, L->forks.n, err, errlen))) return ret;
    if (st->extra && (ret = sweep_tsv_put(st->cross, "cross.tsv", c, L->cross.p, L->cross.n, err, errlen)))
        return ret;
    if (st->extra && (ret = sweep_tsv_put(st->samples, "samples.tsv", c, L->samples.p, L->samples.n, err, errlen)))
        return ret;
    if (st->xsamp && (ret = sweep_tsv_put(st->cross_samples, "cross_samples.tsv", c, L->cross_samples.p,
                                          L->cross_samples.n, err, errlen)))
        return ret;
    if (c->n_passages && (ret = sweep_tsv_put(st->passages, PASSAGES_FILE, c, L->passages.p, L->passages.n, err,
                                              errlen)))
        return ret;
    return 0;
}

/* Depth k complete: its record is journalled (synced), then its lines reach the TSVs (synced),
 * then meta.json counts it and the progress line claims it. */
static int commit_depth(sweep_state *st, int k, depth_lines *L, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    journal_buf b = { 0 };
    depth_record(st, k, L, &b);
    int ret = sweep_jn_append(st, JOURNAL_DEPTH, &b, err, errlen);
    free(b.p);
    if (ret) return ret;
    sweep_routing_committed(st);
    if ((ret = sweep_jn_sync(st, err, errlen))) return ret;
    if ((ret = write_lines(st, L, err, errlen))) return ret;
    if ((ret = sweep_tsv_sync(st, err, errlen))) return ret;
    lines_free(L);
    st->k_done = k + 1;
    st->pos_done = c->depths[k];
    if ((ret = sweep_write_meta(st, "running", 0, err, errlen))) return ret;
    return sweep_show_progress(st, k + 1, c->depths[k], k + 1 == c->n_depths, err, errlen);
}

/* Depth k, from position pos_done on: prefill, fork probe, the optional measurements, commit;
 * then every arm back at the depth for the next one. */
static int measure_depth(sweep_state *st, int k, depth_lines *L, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    const int d = c->depths[k];
    int ret;
    if ((ret = prefill_depth(st, k, L, err, errlen))) return ret;
    if (c->stop && *c->stop) return SWEEP_INTERRUPTED;
    if ((ret = fork_probe(st, d, L, err, errlen))) return ret;
    if (st->extra && (ret = extras(st, d, L, err, errlen))) return ret;
    if (c->n_passages && (ret = sweep_run_passages(st, d, &L->passages, err, errlen))) return ret;
    if ((ret = commit_depth(st, k, L, err, errlen))) return ret;
    return sweep_truncate_arms(st, d, NULL, "back to the depth after the fork probe", err, errlen);
}

/* Measures depths k_done.. from position pos_done on, journalling as it goes (the passages'
 * baseline first, when it is due). */
int sweep_run_depths(sweep_state *st, char *err, size_t errlen) {
    const sweep_config *c = st->c;
    depth_lines L;
    memset(&L, 0, sizeof L);
    int ret = 0;
    if (st->pass_base >= 0 && !st->pass_base_done && (ret = sweep_passages_baseline(st, err, errlen))) return ret;
    for (int k = st->k_done; k < c->n_depths && !ret; k++) ret = measure_depth(st, k, &L, err, errlen);
    lines_free(&L);
    return ret;
}
