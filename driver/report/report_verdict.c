/* report_verdict.c — the verdicts a results README opens with ("The answer first") and the
 * per-depth-bin table (docs/DESIGN.md §4.15): for every test arm against the reference,
 *   (1) distribution: mean KL with a circular block bootstrap interval, × the fp32 floor, its
 *       place on the ladder of the other arms of the run, "distinguishable in distribution" when
 *       the interval's lower end is above REPORT_FAR_FACTOR × the floor;
 *   (2) practical equivalence: TOST on the PPL change exp(mean Δ NLL) − 1 and on top-1 agreement,
 *       with the margins written beside the words (stats_verdict_format), and the flip rate among
 *       near ties beside the f32 arm's;
 *   (3) growth with depth: the ratio of the deepest depth bin's mean KL to the first's, from
 *       positions.tsv (whole Politis–White blocks within each bin resampled), or from the passage
 *       design when report_arm_verdict.from_passages is set; from 16 single depth rows it is not
 *       estimated;
 *   (4) the fork cost: cross-scored Δ NLL over the forked depths only, TOST against a margin tied
 *       to the PPL margin and the f32 arm's own forks;
 *   (5) what the run does not support.
 * Reading order: margins; columns of one arm; the verdicts of one arm; report_verdicts_run;
 * README; summary.json. */
#include "driver/report/report_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define ALPHA 0.05

/* ============================================================================================
 * Margins
 * ========================================================================================== */

static double meta_margin(const report_results *R, const char *key) {
    json_t *m = json_object_get(R->meta, "margins");
    json_t *v = json_is_object(m) ? json_object_get(m, key) : NULL;
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    return isfinite(x) && x > 0 && x < 100 ? x : NAN;
}

void report_margins_get(const report_results *R, const report_render_opts *opts, report_margins *m) {
    double p = opts ? opts->margin_ppl : NAN, t = opts ? opts->margin_top1 : NAN;
    double mp = meta_margin(R, "ppl_pct"), mt = meta_margin(R, "top1_pp");
    int cp = isfinite(p) && p > 0, ct = isfinite(t) && t > 0;
    m->src = cp || ct ? "the command line" : !isnan(mp) || !isnan(mt) ? "meta.json" : "the default";
    m->ppl_pct = cp ? p : !isnan(mp) ? mp : REPORT_MARGIN_PPL_DEFAULT;
    m->top1_pp = ct ? t : !isnan(mt) ? mt : REPORT_MARGIN_TOP1_DEFAULT;
}

const char *report_model_name(const report_results *R) {
    const char *p = R->model_path, *s = strrchr(p, '/');
    return s && s[1] ? s + 1 : p;
}

/* ============================================================================================
 * The columns of one arm: its positions (or depths), with the floor arm's values at the same rows
 * ========================================================================================== */

typedef struct {
    size_t n;
    int *key;                          /* [n] position, or depth */
    double *kl, *dnll, *agree, *gap;   /* [n] KL(arm‖ref) (>= 0), Δ NLL, same − 1, reference gap */
    int *same, *fsame;                 /* [n] top-1 agreement of the arm, of the floor (-1 none) */
} vcols;

static void vcols_free(vcols *c) {
    free(c->key); free(c->kl); free(c->dnll); free(c->agree); free(c->gap); free(c->same); free(c->fsame);
    memset(c, 0, sizeof *c);
}

static int vcols_fill(const report_results *R, const report_arm_an *X, vcols *c) {
    memset(c, 0, sizeof *c);
    size_t n = X->np ? X->np : X->nd, m = n ? n : 1;
    c->key = malloc(m * sizeof(int)); c->same = malloc(m * sizeof(int)); c->fsame = malloc(m * sizeof(int));
    c->kl = malloc(m * sizeof(double)); c->dnll = malloc(m * sizeof(double));
    c->agree = malloc(m * sizeof(double)); c->gap = malloc(m * sizeof(double));
    if (!c->key || !c->same || !c->fsame || !c->kl || !c->dnll || !c->agree || !c->gap) { vcols_free(c); return -1; }
    for (size_t j = 0; j < n; j++) {
        double kl, nll_a, nll_r, gap;
        int same, key, fs = -1;
        if (X->np) {
            const report_pos *p = &R->prows[X->p0 + j];
            kl = p->kl_ar; nll_a = p->nll_arm; nll_r = p->nll_ref; gap = p->gap_ref; same = p->same; key = p->pos;
            const report_pos *f = R->floor >= 0 ? report_find_pos(R, R->floor, key) : NULL;
            if (f) fs = f->same;
        } else {
            const report_depth *d = &R->drows[X->d0 + j];
            kl = d->kl_ar; nll_a = d->nll_arm; nll_r = d->nll_ref; gap = d->gap_ref; same = d->same; key = d->depth;
            const report_depth *f = R->floor >= 0 ? report_find_depth(R, R->floor, key) : NULL;
            if (f) fs = f->same;
        }
        if (!isfinite(kl)) continue;   /* a row the comparison could not score */
        size_t k = c->n++;
        c->key[k] = key;
        c->kl[k] = kl > 0 ? kl : 0;    /* rounding can give −1e-17 */
        c->dnll[k] = nll_a - nll_r;
        c->agree[k] = same ? 0.0 : -1.0;
        c->gap[k] = gap;
        c->same[k] = same != 0;
        c->fsame[k] = fs;
    }
    return 0;
}

/* The mean of the finite values of v [n] with its circular bootstrap (block 0: Politis–White). */
static int boot_finite(const double *v, size_t n, size_t block, stats_boot *out) {
    double *t = malloc((n ? n : 1) * sizeof *t);   /* [n] */
    if (!t) return -1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i])) t[m++] = v[i];
    memset(out, 0, sizeof *out);
    out->est = out->lo = out->hi = out->lo90 = out->hi90 = out->se = out->p = NAN;
    if (m) stats_mean_ci_circular(t, m, block, STATS_BOOT_B, STATS_BOOT_SEED, NULL, out);
    free(t);
    return 0;
}

static const stats_boot boot_none = {NAN, NAN, NAN, NAN, NAN, NAN, NAN, 0, 0};

/* ============================================================================================
 * The verdicts of one arm
 * ========================================================================================== */

/* The depth bins: the sweep's depths from meta.json as bin ends (none when meta.json has no depths). */
static int bins_compute(const report_results *R, const vcols *c, report_arm_verdict *v) {
    int nd = R->n_depths;
    const int *ends = R->depths;
    if (nd < 1 || !c->n) return 0;
    v->bins = calloc((size_t)nd, sizeof *v->bins);
    double *buf = malloc(c->n * sizeof *buf);   /* [n] one bin's KL values */
    if (!v->bins || !buf) { free(buf); return -1; }
    size_t j = 0;
    int lo = 0;
    for (int b = 0; b < nd; b++) {
        int hi = ends[b];
        if (hi <= lo) continue;
        report_bin *B = &v->bins[v->n_bins];
        memset(B, 0, sizeof *B);
        B->lo = lo; B->hi = hi;
        B->kl = boot_none;
        size_t nsame = 0, nd_ok = 0, n0 = 0;
        double dsum = 0;
        while (j < c->n && c->key[j] < lo) j++;
        for (; j < c->n && c->key[j] < hi; j++) {
            buf[n0++] = c->kl[j];
            nsame += (size_t)c->same[j];
            if (isfinite(c->dnll[j])) { dsum += c->dnll[j]; nd_ok++; }
            if (c->gap[j] < REPORT_NEAR_TIE_EPS) { B->n_near++; B->n_near_flips += !c->same[j]; }
        }
        lo = hi;
        if (!n0) continue;
        B->n = n0;
        stats_mean_ci_circular(buf, n0, 0, STATS_BOOT_B, STATS_BOOT_SEED, NULL, &B->kl);
        B->top1 = (double)nsame / (double)n0;
        B->dnll = nd_ok ? dsum / (double)nd_ok : NAN;
        B->ppl_pct = nd_ok ? 100.0 * expm1(B->dnll) : NAN;
        if (stats_wilson(B->n_near_flips, B->n_near, &B->near_rate)) B->near_rate = (stats_ci){NAN, NAN, NAN, 0};
        v->n_bins++;
    }
    free(buf);
    return 0;
}

/* One bin's KL values cut into whole blocks of its Politis–White length: the units of the ratio. */
static int bin_units(const report_bin *B, const vcols *c, double **val, size_t **off, size_t *n_units) {
    size_t i0 = 0;
    while (i0 < c->n && c->key[i0] < B->lo) i0++;
    stats_pw pw;
    if (stats_pw_block(c->kl + i0, B->n, &pw)) return -1;
    size_t b = pw.block ? pw.block : 1, nu = (B->n + b - 1) / b;
    *val = malloc(B->n * sizeof **val);
    *off = malloc((nu + 1) * sizeof **off);
    if (!*val || !*off) return -1;
    memcpy(*val, c->kl + i0, B->n * sizeof **val);
    for (size_t u = 0; u <= nu; u++) (*off)[u] = u * b < B->n ? u * b : B->n;
    *n_units = nu;
    return 0;
}

static int ratio_compute(const vcols *c, report_arm_verdict *v) {
    v->ratio = boot_none;
    v->v_ratio = STATS_NOT_COMPUTABLE;
    if (v->n_bins < 2) return 0;
    const report_bin *f = &v->bins[0], *d = &v->bins[v->n_bins - 1];
    double *nv = NULL, *dv = NULL;
    size_t *no = NULL, *dof = NULL, nn = 0, dn = 0;
    int rc = -1;
    if (bin_units(d, c, &nv, &no, &nn) || bin_units(f, c, &dv, &dof, &dn)) goto done;
    if (!(f->kl.est > 0)) { rc = 0; goto done; }   /* identical to the reference in the first bin */
    if (stats_ratio_units_ci(nv, no, nn, dv, dof, dn, 0, STATS_BOOT_B, STATS_BOOT_SEED, NULL, &v->ratio)) {
        v->ratio = boot_none;
        rc = 0;
        goto done;
    }
    if (v->ratio.lo > 0 && v->ratio.lo90 > 0 && isfinite(v->ratio.hi) && isfinite(v->ratio.hi90))
        v->v_ratio = stats_verdict_ci(log(v->ratio.lo), log(v->ratio.hi), log(v->ratio.lo90),
                                      log(v->ratio.hi90), 0);
    else if (v->ratio.lo > 1) v->v_ratio = STATS_HIGHER;
    else if (v->ratio.hi < 1) v->v_ratio = STATS_LOWER;
    else v->v_ratio = STATS_NO_DETECTED_DIFFERENCE;
    rc = 0;
done:
    free(nv); free(no); free(dv); free(dof);
    return rc;
}

double report_fork_margin(const report_results *R, const report_extra *X, double ppl_pct, const char **src) {
    double m = log1p(ppl_pct / 100.0), f32_max = NAN;
    *src = "the PPL margin in nats";
    for (size_t i = 0; X->have_cross && i < X->nx; i++) {
        const report_cross_row *r = &X->x[i];
        double delta = r->ref_nll_arm - r->ref_nll_ref;
        if (r->arm == R->floor && R->floor >= 0 && !r->censored && isfinite(delta) &&
            (isnan(f32_max) || fabs(delta) > f32_max))
            f32_max = fabs(delta);
    }
    if (!isnan(f32_max) && f32_max > m) {
        m = f32_max;
        *src = "the fp32 arm's largest |Δ| over its own forks";
    }
    return m;
}

/* Δ NLL of the arm's greedy text under the reference, over the depths where it forked. */
static int fork_compute(const report_results *R, const report_extra *X, const report_margins *m, int a,
                        report_arm_verdict *v) {
    v->fork = boot_none;
    v->v_fork = STATS_NOT_COMPUTABLE;
    v->fork_margin = report_fork_margin(R, X, m->ppl_pct, &v->fork_margin_src);
    if (!X->have_cross) return 0;
    double *d = malloc((X->nx ? X->nx : 1) * sizeof *d);   /* [nx] */
    if (!d) return -1;
    size_t n = 0;
    for (size_t i = 0; i < X->nx; i++) {
        const report_cross_row *r = &X->x[i];
        double delta = r->ref_nll_arm - r->ref_nll_ref;
        if (r->arm != a) continue;
        v->have_fork = 1;
        v->n_fork_depths++;
        if (!r->censored && isfinite(delta)) d[n++] = delta;
    }
    v->n_forked = n;
    if (n) {
        stats_mean_ci_circular(d, n, 1, STATS_BOOT_B, STATS_BOOT_SEED, NULL, &v->fork);
        v->v_fork = stats_verdict_ci(v->fork.lo, v->fork.hi, v->fork.lo90, v->fork.hi90, v->fork_margin);
    }
    free(d);
    return 0;
}

static int arm_verdict(const report_results *R, const report_analysis *A, const report_extra *X,
                       const report_margins *m, int a, report_arm_verdict *v) {
    const report_arm_an *an = &A->a[a];
    vcols c;
    v->kl = v->dnll = v->dtop1 = boot_none;
    v->floor = NAN;
    v->near_rate = v->floor_near_rate = (stats_ci){NAN, NAN, NAN, 0};
    if (vcols_fill(R, an, &c)) return -1;
    int rc = -1;
    v->over_positions = an->np > 0;
    v->n = c.n;
    if (!c.n) { rc = fork_compute(R, X, m, a, v); goto done; }
    v->valid = 1;
    size_t block = v->over_positions ? 0 : 1;   /* depths: few, far apart, taken as independent */
    if (boot_finite(c.kl, c.n, block, &v->kl) || boot_finite(c.dnll, c.n, block, &v->dnll) ||
        boot_finite(c.agree, c.n, block, &v->dtop1))
        goto done;
    const report_set *s = v->over_positions ? &an->pos : &an->dep;
    v->floor = R->floor >= 0 && s->n_floor ? s->floor_mean : NAN;
    /* top-1: the wider of the bootstrap and the Wilson interval of the flip share at each end (the
     * Wilson 95 % interval also stands in for the 90 % one: conservative), so that no flip among few
     * rows does not read as equivalence */
    size_t flips = 0;
    for (size_t j = 0; j < c.n; j++) flips += !c.same[j];
    stats_ci w;
    if (!stats_wilson(flips, c.n, &w)) {
        v->dtop1.lo = fmin(v->dtop1.lo, -w.hi);
        v->dtop1.hi = fmax(v->dtop1.hi, -w.lo);
        v->dtop1.lo90 = fmin(v->dtop1.lo90, -w.hi);
        v->dtop1.hi90 = fmax(v->dtop1.hi90, -w.lo);
    }
    double mp = log1p(m->ppl_pct / 100.0);
    v->v_ppl = stats_verdict_ci(v->dnll.lo, v->dnll.hi, v->dnll.lo90, v->dnll.hi90, mp);
    v->v_top1 = stats_verdict_ci(v->dtop1.lo, v->dtop1.hi, v->dtop1.lo90, v->dtop1.hi90, m->top1_pp / 100.0);
    size_t fn = 0, ff = 0;
    for (size_t j = 0; j < c.n; j++) {
        if (!(c.gap[j] < REPORT_NEAR_TIE_EPS)) continue;
        v->n_near++;
        v->n_near_flips += !c.same[j];
        if (c.fsame[j] >= 0) { fn++; ff += !c.fsame[j]; }
    }
    if (stats_wilson(v->n_near_flips, v->n_near, &v->near_rate)) v->near_rate = (stats_ci){NAN, NAN, NAN, 0};
    if (R->floor < 0 || stats_wilson(ff, fn, &v->floor_near_rate)) v->floor_near_rate = (stats_ci){NAN, NAN, NAN, 0};
    if (v->over_positions && (bins_compute(R, &c, v) || ratio_compute(&c, v))) goto done;
    v->from_passages = NULL;   /* the controlled passage design plugs in here (report_depth_trend) */
    if (fork_compute(R, X, m, a, v)) goto done;
    rc = 0;
done:
    vcols_free(&c);
    return rc;
}

int report_verdicts_run(const report_results *R, const report_analysis *A, const report_extra *X,
                        const report_margins *m, report_verdicts *V, char *err, size_t errlen) {
    V->m = *m;
    V->v = calloc((size_t)(R->n_arms ? R->n_arms : 1), sizeof *V->v);
    if (!V->v) goto oom;
    for (int i = 0; i < R->n_arms; i++)
        if ((report_is_test_arm(R, i) || i == R->floor) && arm_verdict(R, A, X, m, i, &V->v[i])) goto oom;
    return 0;
oom:
    errmsg_set(err, errlen, -1, "out of memory computing the verdicts");
    return -1;
}

void report_verdicts_free(report_verdicts *V, int n_arms) {
    if (V->v)
        for (int i = 0; i < n_arms; i++) free(V->v[i].bins);
    free(V->v);
    V->v = NULL;
}

/* ============================================================================================
 * Paired comparisons of two arms (the "Formats by size" table)
 * ========================================================================================== */

int report_paired_kl(const report_results *R, const report_analysis *A, int a, int b, stats_boot *out, double *p) {
    const report_arm_an *X = &A->a[a], *Y = &A->a[b];
    int pos = X->np > 0 && Y->np > 0;
    size_t n = pos ? X->np : X->nd, k = 0;
    double *x = malloc((n ? n : 1) * sizeof *x), *y = malloc((n ? n : 1) * sizeof *y);   /* [n] */
    double *boot = malloc(STATS_BOOT_B * sizeof *boot);                                    /* [B] */
    int rc = -1;
    *out = boot_none;
    *p = NAN;
    if (!x || !y || !boot) goto done;
    for (size_t j = 0; j < n; j++) {
        double u, w;
        if (pos) {
            const report_pos *r = &R->prows[X->p0 + j], *s = report_find_pos(R, b, r->pos);
            if (!s) continue;
            u = r->kl_ar; w = s->kl_ar;
        } else {
            const report_depth *r = &R->drows[X->d0 + j], *s = report_find_depth(R, b, r->depth);
            if (!s) continue;
            u = r->kl_ar; w = s->kl_ar;
        }
        if (!isfinite(u) || !isfinite(w)) continue;
        x[k] = u; y[k++] = w;
    }
    if (k && !stats_paired_diff_ci(x, y, k, pos ? 0 : 1, STATS_BOOT_B, STATS_BOOT_SEED, boot, out))
        *p = stats_boot_p(boot, STATS_BOOT_B, 0.0);
    rc = 0;
done:
    free(x); free(y); free(boot);
    return rc;
}
