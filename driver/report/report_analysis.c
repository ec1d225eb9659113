/* report_analysis.c — the statistics of a loaded results folder (stats.h): for every
 * non-reference arm, over its depths and over its positions, with the noise floor (the f32
 * arm's KL(ref‖f32)) at the same rows, the arm labels, and the bit-identity check of repeated
 * arms. What summary.json, the README and the comparison show is computed here.
 *
 * Reading order: labels; the statistics of one set of rows; the repeat check;
 * report_analysis_run; roles and counts. */
#include "driver/report/report_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ============================================================================================
 * Labels
 * ========================================================================================== */

/* "f16" -> "fp16", "f32" -> "fp32", anything else unchanged. */
static const char *fmt_pretty(const char *f) {
    if (!strcmp(f, "f16")) return "fp16";
    if (!strcmp(f, "f32")) return "fp32";
    return f;
}

static void formats_label(const report_arm *a, char *buf, size_t len) {
    if (!strcmp(a->kv_k, a->kv_v)) snprintf(buf, len, "%s", fmt_pretty(a->kv_k));
    else snprintf(buf, len, "K:%s,V:%s", a->kv_k, a->kv_v);
}

/* The label of arm i: its formats; a repeat adds its "#k" suffix ("fp16#2"); otherwise the
 * arm's name is added when another arm shares the formats ("int8 (int8_gpu)") or the arm runs its
 * own model file ("K:int8,V:f16 (q8)"). */
static void arm_label(const report_results *R, int i, char *buf, size_t len) {
    char mine[2 * ARM_NAME_MAX + 16], other[2 * ARM_NAME_MAX + 16];
    formats_label(&R->arms[i], mine, sizeof mine);
    if (R->arms[i].base >= 0) {
        snprintf(buf, len, "%s%s", mine, strchr(R->arms[i].name, '#'));
        return;
    }
    int shared = 0;
    for (int j = 0; j < R->n_arms; j++) {
        if (j == i) continue;
        formats_label(&R->arms[j], other, sizeof other);
        if (!strcmp(mine, other)) shared = 1;
    }
    if ((shared || R->arms[i].weight_arm) && !R->arms[i].is_ref) snprintf(buf, len, "%s (%s)", mine, R->arms[i].name);
    else snprintf(buf, len, "%s", mine);
}

/* ============================================================================================
 * The statistics of one set of rows
 * ========================================================================================== */

/* Column arrays of one set, filled by the caller, each [n]. */
typedef struct {
    size_t n;
    double *x, *kl, *klr, *js, *dnll, *ent, *gap, *floor;
    int *same, *fork, *cens;
} report_cols;

static void cols_free(report_cols *c) {
    free(c->x); free(c->kl); free(c->klr); free(c->js); free(c->dnll);
    free(c->ent); free(c->gap); free(c->floor); free(c->same); free(c->fork); free(c->cens);
    memset(c, 0, sizeof *c);
}

static int cols_alloc(report_cols *c, size_t n) {
    memset(c, 0, sizeof *c);
    size_t m = n ? n : 1;
    c->n = n;
    c->x = malloc(m * sizeof(double)); c->kl = malloc(m * sizeof(double));
    c->klr = malloc(m * sizeof(double)); c->js = malloc(m * sizeof(double));
    c->dnll = malloc(m * sizeof(double)); c->ent = malloc(m * sizeof(double));
    c->gap = malloc(m * sizeof(double)); c->floor = malloc(m * sizeof(double));
    c->same = malloc(m * sizeof(int)); c->fork = malloc(m * sizeof(int));
    c->cens = malloc(m * sizeof(int));
    if (!c->x || !c->kl || !c->klr || !c->js || !c->dnll || !c->ent || !c->gap || !c->floor ||
        !c->same || !c->fork || !c->cens) {
        cols_free(c);
        return -1;
    }
    return 0;
}

/* Mean/median CIs of the finite values of v [n] (NaNs dropped, order kept): the mean's from the
 * circular block bootstrap with the Politis–White block (stats_mean_ci_circular, docs/DESIGN.md
 * §3.6.1), the median's from moving blocks of that same length. */
static int ci_finite(const double *v, size_t n, int median, stats_ci *out) {
    double *t = malloc((n ? n : 1) * sizeof *t); /* [n] */
    if (!t) return -1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i])) t[m++] = v[i];
    out->est = out->lo = out->hi = NAN;
    out->n = 0;
    if (m) {
        if (median) {
            stats_pw pw;
            size_t b = stats_pw_block(t, m, &pw) == 0 ? pw.block : 0;
            stats_median_ci(t, m, b, STATS_BOOT_B, STATS_BOOT_SEED, out);
        } else {
            stats_boot o;
            stats_mean_ci_circular(t, m, 0, STATS_BOOT_B, STATS_BOOT_SEED, NULL, &o);
            *out = (stats_ci){o.est, o.lo, o.hi, o.n};
        }
    }
    free(t);
    return 0;
}

/* Computes every statistic of one set; with_depth adds the slope and the fork survival. */
static int set_compute(const report_cols *c, int with_depth, int fork_n, report_set *s) {
    memset(s, 0, sizeof *s);
    s->n = c->n;
    s->floor_mean = NAN;
    s->km.median = s->km.median_lo = s->km.median_hi = s->km.surv_end = NAN;
    for (int k = 0; k < STATS_N_PCT; k++) s->pct[k] = NAN;
    stats_ci none = {NAN, NAN, NAN, 0};
    s->kl = s->kl_med = s->klr = s->js = s->top1 = s->dnll = s->sp_ent = s->sp_gap = none;
    s->slope.slope = s->slope.lo = s->slope.hi = s->slope.intercept = s->slope.r2 = NAN;
    s->tie.share_pos_near = s->tie.share_flips_near = s->tie.share_kl_near = NAN;
    s->tie.eps = REPORT_NEAR_TIE_EPS;
    if (c->n == 0) return 0;

    size_t same = 0;
    double fsum = 0;
    for (size_t i = 0; i < c->n; i++) {
        same += c->same[i] != 0;
        if (!isnan(c->floor[i])) { fsum += c->floor[i]; s->n_floor++; }
        if (c->kl[i] == 0.0 && c->klr[i] == 0.0 && c->js[i] == 0.0) s->n_identical++;
    }
    if (s->n_floor) s->floor_mean = fsum / (double)s->n_floor;
    if (ci_finite(c->kl, c->n, 0, &s->kl) || ci_finite(c->kl, c->n, 1, &s->kl_med) ||
        ci_finite(c->klr, c->n, 0, &s->klr) || ci_finite(c->js, c->n, 0, &s->js) ||
        ci_finite(c->dnll, c->n, 0, &s->dnll))
        return -1;
    stats_percentiles(c->kl, c->n, s->pct);
    stats_wilson(same, c->n, &s->top1);
    if (stats_spearman(c->kl, c->ent, c->n, &s->sp_ent) ||
        stats_spearman(c->kl, c->gap, c->n, &s->sp_gap))
        return -1;
    stats_near_tie(c->gap, c->same, c->kl, c->n, REPORT_NEAR_TIE_EPS, &s->tie);
    if (with_depth) {
        stats_log10_slope(c->x, c->kl, c->n, &s->slope);
        if (stats_kaplan_meier(c->fork, c->cens, c->n, fork_n, &s->km)) return -1;
    }
    return 0;
}

/* ============================================================================================
 * Repeat check
 * ========================================================================================== */

static int same_num(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

/* Is arm i (a repeat of base b) bit-identical? Fills repeat / repeat_detail. */
static void repeat_check(const report_results *R, int i, report_arm_an *X) {
    int b = R->arms[i].base;
    size_t n_diff = 0, n_fork = 0, n_pos_diff = 0, n_missing = 0;
    double max_kl = 0;
    int first_fork_depth = -1, first_fork = -1;
    for (size_t k = X->d0; k < X->d0 + X->nd; k++) {
        const report_depth *d = &R->drows[k];
        const report_fork *f = &R->frows[k];
        int differs, forked;
        if (b == R->ref) {
            differs = d->kl_ar != 0.0 || d->kl_ra != 0.0 || d->js != 0.0 || !d->same;
            forked = !d->censored;
            if (fabs(d->kl_ar) > max_kl) max_kl = fabs(d->kl_ar);
        } else {
            const report_depth *e = report_find_depth(R, b, d->depth);
            if (!e) { n_missing++; continue; }
            const report_fork *g = &R->frows[e - R->drows];
            differs = !same_num(d->kl_ar, e->kl_ar) || !same_num(d->kl_ra, e->kl_ra) ||
                      !same_num(d->js, e->js) || d->top1_arm != e->top1_arm ||
                      !same_num(d->nll_arm, e->nll_arm) || !same_num(d->gap_arm, e->gap_arm);
            forked = f->n_arm != g->n_arm ||
                     (f->n_arm && memcmp(f->tok_arm, g->tok_arm, (size_t)f->n_arm * sizeof(int)));
            if (fabs(d->kl_ar - e->kl_ar) > max_kl) max_kl = fabs(d->kl_ar - e->kl_ar);
        }
        n_diff += differs != 0;
        if (forked) {
            n_fork++;
            if (first_fork_depth < 0) { first_fork_depth = d->depth; first_fork = d->fork; }
        }
    }
    for (size_t k = X->p0; k < X->p0 + X->np; k++) {
        const report_pos *p = &R->prows[k];
        if (b == R->ref) {
            n_pos_diff += p->kl_ar != 0.0 || p->kl_ra != 0.0 || p->js != 0.0 || !p->same;
        } else {
            const report_pos *q = report_find_pos(R, b, p->pos);
            if (!q) { n_missing++; continue; }
            n_pos_diff += !same_num(p->kl_ar, q->kl_ar) || !same_num(p->js, q->js) ||
                          !same_num(p->nll_arm, q->nll_arm) || p->same != q->same;
        }
    }
    X->repeat = n_diff == 0 && n_fork == 0 && n_pos_diff == 0 && n_missing == 0;
    char *o = X->repeat_detail;
    size_t cap = sizeof X->repeat_detail, len = 0;
    if (X->repeat) {
        snprintf(o, cap, "bit-identical to %s at all %zu depths%s (%s, same greedy tokens)",
                 R->arms[b].name, X->nd, X->np ? " and positions" : "",
                 b == R->ref ? "KL = JS = 0" : "every metric equal");
        return;
    }
    if (b == R->ref)
        len += (size_t)snprintf(o + len, cap - len, "KL or JS != 0 or top-1 differs at %zu of %zu "
                                "depths (largest KL %.3g)", n_diff, X->nd, max_kl);
    else
        len += (size_t)snprintf(o + len, cap - len, "metrics differ from %s at %zu of %zu depths "
                                "(largest KL difference %.3g)", R->arms[b].name, n_diff, X->nd,
                                max_kl);
    if (len < cap)
        len += (size_t)snprintf(o + len, cap - len, "; greedy streams differ at %zu depths", n_fork);
    if (first_fork_depth >= 0 && len < cap)
        len += (size_t)snprintf(o + len, cap - len, " (first at depth %d, token %d)",
                                first_fork_depth, first_fork);
    if (X->np && len < cap)
        len += (size_t)snprintf(o + len, cap - len, "; %zu of %zu positions differ", n_pos_diff,
                                X->np);
    if (n_missing && len < cap)
        snprintf(o + len, cap - len, "; %zu rows have no counterpart in %s", n_missing,
                 R->arms[b].name);
}

/* ============================================================================================
 * report_analysis_run
 * ========================================================================================== */

int report_analysis_run(const report_results *R, report_analysis *A, char *err, size_t errlen) {
    memset(A, 0, sizeof *A);
    A->a = calloc((size_t)R->n_arms, sizeof *A->a);
    if (!A->a) return errmsg_set(err, errlen, -1, "out of memory");
    formats_label(&R->arms[R->ref], A->ref_label, sizeof A->ref_label);
    for (int i = 0; i < R->n_arms; i++) {
        report_arm_an *X = &A->a[i];
        X->repeat = -1;
        X->dep.km.median = X->pos.km.median = NAN;
        arm_label(R, i, X->label, sizeof X->label);
    }
    /* row ranges (rows are sorted by arm) */
    for (size_t k = 0; k < R->n_drows; k++) {
        report_arm_an *X = &A->a[R->drows[k].arm];
        if (X->nd == 0) X->d0 = k;
        X->nd++;
    }
    for (size_t k = 0; k < R->n_prows; k++) {
        report_arm_an *X = &A->a[R->prows[k].arm];
        if (X->np == 0) X->p0 = k;
        X->np++;
    }
    for (int i = 0; i < R->n_arms; i++) {
        if (i == R->ref) continue;
        report_arm_an *X = &A->a[i];
        report_cols c;
        /* depths */
        if (cols_alloc(&c, X->nd)) goto oom;
        X->floor_kl = malloc((X->nd ? X->nd : 1) * sizeof *X->floor_kl);
        X->floor_fork = malloc((X->nd ? X->nd : 1) * sizeof *X->floor_fork);
        if (!X->floor_kl || !X->floor_fork) { cols_free(&c); goto oom; }
        for (size_t k = 0; k < X->nd; k++) {
            const report_depth *d = &R->drows[X->d0 + k];
            const report_depth *f = R->floor >= 0 ? report_find_depth(R, R->floor, d->depth) : NULL;
            X->floor_kl[k] = f ? f->kl_ra : NAN;
            X->floor_fork[k] = f ? f->fork : -1;
            c.x[k] = d->depth / 1000.0;
            c.kl[k] = d->kl_ar; c.klr[k] = d->kl_ra; c.js[k] = d->js;
            c.dnll[k] = d->nll_arm - d->nll_ref;
            c.ent[k] = d->ent; c.gap[k] = d->gap_ref; c.same[k] = d->same;
            c.fork[k] = d->fork; c.cens[k] = d->censored;
            c.floor[k] = (f && i != R->floor) ? f->kl_ra : NAN;
        }
        int rc = set_compute(&c, 1, R->fork_n, &X->dep);
        cols_free(&c);
        if (rc) goto fail;
        /* positions */
        if (X->np) {
            if (cols_alloc(&c, X->np)) goto oom;
            for (size_t k = 0; k < X->np; k++) {
                const report_pos *p = &R->prows[X->p0 + k];
                const report_pos *f =
                    R->floor >= 0 && i != R->floor ? report_find_pos(R, R->floor, p->pos) : NULL;
                c.x[k] = p->pos;
                c.kl[k] = p->kl_ar; c.klr[k] = p->kl_ra; c.js[k] = p->js;
                c.dnll[k] = p->nll_arm - p->nll_ref;
                c.ent[k] = p->ent; c.gap[k] = p->gap_ref; c.same[k] = p->same;
                c.fork[k] = 0; c.cens[k] = 0;
                c.floor[k] = f ? f->kl_ra : NAN;
            }
            rc = set_compute(&c, 0, R->fork_n, &X->pos);
            cols_free(&c);
            if (rc) goto fail;
        }
        if (R->arms[i].base >= 0) repeat_check(R, i, X);
    }
    return 0;
oom:
    errmsg_set(err, errlen, -1, "out of memory");
    report_analysis_free(A, R->n_arms);
    return -1;
fail:
    errmsg_set(err, errlen, -1, "statistics failed (out of memory or invalid values)");
    report_analysis_free(A, R->n_arms);
    return -1;
}

void report_analysis_free(report_analysis *A, int n_arms) {
    if (!A->a) return;
    for (int i = 0; i < n_arms; i++) {
        stats_km_free(&A->a[i].dep.km);
        free(A->a[i].floor_kl);
        free(A->a[i].floor_fork);
    }
    free(A->a);
    A->a = NULL;
}

/* ============================================================================================
 * Roles and counts
 * ========================================================================================== */

const char *report_arm_role(const report_results *R, int i) {
    if (i == R->ref) return "reference";
    if (R->arms[i].base >= 0) return "repeat";
    if (R->arms[i].is_floor) return "floor";
    return "test";
}

/* Test arms: non-reference, not the floor, not a repeat. */
int report_is_test_arm(const report_results *R, int i) {
    return i != R->ref && !R->arms[i].is_floor && R->arms[i].base < 0;
}

/* Number of distinct depths in depths.tsv (rows are sorted by arm, then depth). */
int report_count_depths(const report_results *R) {
    int best = 0, n = 0;
    for (size_t k = 0; k < R->n_drows; k++) {
        n = (k && R->drows[k].arm == R->drows[k - 1].arm) ? n + 1 : 1;
        if (n > best) best = n;
    }
    return best;
}
