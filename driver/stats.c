/* stats.c — per-row distribution metrics (KL, JS, top-1, NLL, entropy, gaps) and the summary
 * statistics with confidence intervals (percentiles, block bootstrap, Wilson, log-slope,
 * Spearman, near-tie split, Kaplan–Meier). See stats.h for the definitions. */
#include "driver/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_fit.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

/* ============================================================================================
 * A. Per-row metrics
 * ========================================================================================== */

/* Scans a row once: finiteness, argmax (ties -> lowest id) and the runner-up logit.
 * Returns 0, or -1 when the row holds NaN/inf. */
static int row_scan(const float *x, int n, int *top1, float *second) {
    int best = 0;
    float b1 = x[0], b2 = -INFINITY;
    if (!isfinite(x[0])) return -1;
    for (int i = 1; i < n; i++) {
        float v = x[i];
        if (!isfinite(v)) return -1;
        if (v > b1) { b2 = b1; b1 = v; best = i; }
        else if (v > b2) b2 = v;  /* a value equal to b1 lands here: gap 0 on a tie */
    }
    *top1 = best;
    *second = b2;
    return 0;
}

/* ln Σ exp(x_i − m) accumulated in double, with z_i = x_i − m rounded to f32 (as used later). */
static double row_lse(const float *x, int n, float m) {
    double s = 0.0;
    for (int i = 0; i < n; i++) {
        float z = x[i] - m;
        s += exp((double)z);
    }
    return log(s);  /* s >= 1 (the max term is exp(0) = 1) */
}

/* g(r) = ½[(1+r)ln(1+r) + (1−r)ln(1−r)] for r in [0, 1]: the per-token JS divided by
 * m = (p+q)/2 with r = |p−q|/(p+q) = |tanh(d/2)|, d = ln p − ln q. Series
 * Σ_k r^{2k}/(2k(2k−1)) for small r (truncation error < 1e-16 relative at r = 0.05), log1p
 * otherwise; g(1) = ln 2. */
static double js_g(double r) {
    if (r < 0.05) {
        double r2 = r * r;
        /* Horner in r²: 1/2 + r²/12 + r⁴/30 + r⁶/56 + r⁸/90 + r¹⁰/132 + r¹²/182 */
        double s = 1.0 / 182.0;
        s = s * r2 + 1.0 / 132.0;
        s = s * r2 + 1.0 / 90.0;
        s = s * r2 + 1.0 / 56.0;
        s = s * r2 + 1.0 / 30.0;
        s = s * r2 + 1.0 / 12.0;
        s = s * r2 + 0.5;
        return s * r2;
    }
    if (r >= 1.0) return M_LN2;
    return 0.5 * ((1.0 + r) * log1p(r) + (1.0 - r) * log1p(-r));
}

/* One token's term of KL(O‖B) = Σ p_o (ln p_o − ln p_b), written in the equivalent form
 * Σ [p_o x − p_o + p_b] with x = ln p_o − ln p_b (the added Σ(p_b − p_o) is 0 for normalised
 * rows; it cancels the rounding of the two log-sum-exps to first order and makes every term
 * >= 0). For |x| < 1 the term is p_b·h(x), h(x) = 1 + eˣ(x − 1) = x eˣ − expm1(x), with the
 * series Σ_{k>=2} (k−1)xᵏ/k! for |x| < 0.01 so tiny differences keep full relative accuracy. */
static double kl_term(double p_b, double p_o, double x) {
    double ax = fabs(x);
    if (ax >= 1.0) return p_o * (x - 1.0) + p_b;
    double h;
    if (ax < 0.01) {
        /* x²/2 + x³/3 + x⁴/8 + x⁵/30 + x⁶/144 + x⁷/840 + x⁸/5760 */
        h = 1.0 / 5760.0;
        h = h * x + 1.0 / 840.0;
        h = h * x + 1.0 / 144.0;
        h = h * x + 1.0 / 30.0;
        h = h * x + 1.0 / 8.0;
        h = h * x + 1.0 / 3.0;
        h = h * x + 0.5;
        h = h * x * x;
    } else {
        h = x * exp(x) - expm1(x);
    }
    return p_b * h;
}

int stats_token_logprob(const float *row, int n_vocab, int tok, double *out) {
    if (!out) return -1;
    *out = NAN;
    if (!row || n_vocab < 1 || tok < 0 || tok >= n_vocab) return -1;
    float mx = row[0];
    for (int i = 0; i < n_vocab; i++) {
        if (!isfinite(row[i])) return -1;
        if (row[i] > mx) mx = row[i];
    }
    float z = row[tok] - mx;
    *out = (double)z - row_lse(row, n_vocab, mx);
    return 0;
}

double stats_repeat_rate(const int32_t *tok, int n, int order) {
    if (!tok || order < 1 || n < order) return NAN;
    int windows = n - order + 1, repeated = 0;
    for (int i = 1; i < windows; i++)
        for (int j = 0; j < i; j++)
            if (!memcmp(tok + i, tok + j, sizeof *tok * (size_t)order)) { repeated++; break; }
    return (double)repeated / windows;
}

int stats_ref_prepare(const float *ref, int n_vocab, double *lp, double *p, stats_ref *out) {
    if (!out) return -1;
    memset(out, 0, sizeof *out);
    if (!ref || !lp || !p || n_vocab < 1) return -1;
    if (row_scan(ref, n_vocab, &out->top1, &out->second) != 0) return -1;
    out->row = ref;
    out->n_vocab = n_vocab;
    out->max = ref[out->top1];
    out->lse = row_lse(ref, n_vocab, out->max);
    for (int i = 0; i < n_vocab; i++) {
        float zr = ref[i] - out->max;
        lp[i] = (double)zr - out->lse;
        p[i] = exp(lp[i]);
    }
    out->lp = lp;
    out->p = p;
    return 0;
}

int stats_compare_prepared(const float *arm, const stats_ref *r, int next, stats_row *out) {
    if (!out) return -1;
    memset(out, 0, sizeof *out);
    if (!arm || !r || !r->row || r->n_vocab < 1 || next >= r->n_vocab) return -1;
    const float *ref = r->row;
    const int n_vocab = r->n_vocab;
    int top_a;
    float second_a;
    if (row_scan(arm, n_vocab, &top_a, &second_a) != 0) return -1;
    float max_a = arm[top_a], max_r = r->max;
    double lse_a = row_lse(arm, n_vocab, max_a);
    double lse_r = r->lse;
    double dlse = lse_a - lse_r;

    /* One pass over the vocabulary: z = x − max (f32), ln p = z − lse, p = exp(ln p) (0 on
     * underflow, while ln p stays finite so p·ln p = 0 exactly); the reference's ln p and p come
     * from stats_ref_prepare, computed there by the same expressions. */
    double kl_ar = 0.0, kl_ra = 0.0, js = 0.0, ent = 0.0;
    for (int i = 0; i < n_vocab; i++) {
        float za = arm[i] - max_a, zr = ref[i] - max_r;
        double la = (double)za - lse_a, lr = r->lp[i];
        double pa = exp(la), pr = r->p[i];
        double d = ((double)za - (double)zr) - dlse;  /* ln p_a − ln p_r; 0 for identical rows */
        kl_ar += kl_term(pr, pa, d);
        kl_ra += kl_term(pa, pr, -d);
        ent -= pr * lr;
        double m = 0.5 * (pa + pr);
        if (m > 0.0 && d != 0.0) js += m * js_g(fabs(tanh(0.5 * d)));
    }
    if (js > M_LN2) js = M_LN2;

    out->kl_arm_ref = kl_ar;
    out->kl_ref_arm = kl_ra;
    out->js = js;
    out->top1_arm = top_a;
    out->top1_ref = r->top1;
    out->entropy_ref = ent;
    out->gap_arm = n_vocab > 1 ? (double)max_a - (double)second_a : NAN;
    out->gap_ref = n_vocab > 1 ? (double)max_r - (double)r->second : NAN;
    if (next >= 0) {
        out->nll_arm = -((double)(arm[next] - max_a) - lse_a);
        out->nll_ref = -((double)(ref[next] - max_r) - lse_r);
    } else {
        out->nll_arm = NAN;
        out->nll_ref = NAN;
    }
    return 0;
}

int stats_compare_rows(const float *arm, const float *ref, int n_vocab, int next, stats_row *out) {
    if (!out) return -1;
    memset(out, 0, sizeof *out);
    if (!arm || !ref || n_vocab < 1 || next >= n_vocab) return -1;
    double *lp = malloc((size_t)n_vocab * 2 * sizeof *lp);  /* [2][n_vocab]: ln p_ref, p_ref */
    if (!lp) return -1;
    stats_ref r;
    int rc = stats_ref_prepare(ref, n_vocab, lp, lp + n_vocab, &r);
    if (!rc) rc = stats_compare_prepared(arm, &r, next, out);
    free(lp);
    return rc;
}

/* ============================================================================================
 * B. Summary statistics
 * ========================================================================================== */

const double stats_pct_levels[STATS_N_PCT] = {100.0, 99.9, 99.0, 95.0, 90.0, 50.0,
                                              10.0,  5.0,  1.0,  0.1,  0.0};

static int all_finite(const double *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

int stats_percentiles(const double *x, size_t n, double out[STATS_N_PCT]) {
    if (!out) return -1;
    for (int k = 0; k < STATS_N_PCT; k++) out[k] = NAN;
    if (!x || n == 0) return -1;
    for (size_t i = 0; i < n; i++)
        if (isnan(x[i])) return -1;
    gsl_set_error_handler_off();
    double *s = malloc(n * sizeof *s); /* [n] sorted copy */
    if (!s) return -1;
    memcpy(s, x, n * sizeof *s);
    gsl_sort(s, 1, n);
    for (int k = 0; k < STATS_N_PCT; k++)
        out[k] = gsl_stats_quantile_from_sorted_data(s, 1, n, stats_pct_levels[k] / 100.0);
    free(s);
    return 0;
}

size_t stats_default_block(size_t n) {
    size_t b = 1;
    while (b * b * b < n) b++;
    return b;
}

/* Statistic computed on each resample. */
enum { STAT_MEAN, STAT_MEDIAN };

/* Value of the statistic on y [n]; may reorder y. */
static double stat_of(double *y, size_t n, int which) {
    if (which == STAT_MEAN) return gsl_stats_mean(y, 1, n);
    return gsl_stats_median(y, 1, n);  /* quickselect, reorders y */
}

/* Moving-block bootstrap percentile CI of the mean or median (see stats.h). */
static int block_boot_ci(const double *x, size_t n, size_t block, int n_boot, unsigned long seed,
                         int which, stats_ci *out) {
    int rc = -1;
    double *y = NULL;    /* [n] one resample (or the sorted sample) */
    double *stat = NULL; /* [n_boot] the statistic of every resample */
    gsl_rng *rng = NULL;

    out->est = out->lo = out->hi = NAN;
    out->n = n;
    if (!x || n == 0 || n_boot < 1 || !all_finite(x, n)) return -1;
    gsl_set_error_handler_off();
    size_t b = block ? block : stats_default_block(n);
    if (b > n) b = n;

    y = malloc(n * sizeof *y);
    stat = malloc((size_t)n_boot * sizeof *stat);
    rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!y || !stat || !rng) goto done;
    gsl_rng_set(rng, seed);

    memcpy(y, x, n * sizeof *y);
    out->est = stat_of(y, n, which);
    if (n == 1) { out->lo = out->hi = out->est; rc = 0; goto done; }

    unsigned long n_starts = (unsigned long)(n - b + 1); /* block starts 0 .. n−b */
    for (int r = 0; r < n_boot; r++) {
        size_t filled = 0;
        while (filled < n) {
            size_t s = n_starts > 1 ? (size_t)gsl_rng_uniform_int(rng, n_starts) : 0;
            size_t take = b < n - filled ? b : n - filled;
            memcpy(y + filled, x + s, take * sizeof *y);
            filled += take;
        }
        stat[r] = stat_of(y, n, which);
    }
    gsl_sort(stat, 1, (size_t)n_boot);
    out->lo = gsl_stats_quantile_from_sorted_data(stat, 1, (size_t)n_boot, 0.025);
    out->hi = gsl_stats_quantile_from_sorted_data(stat, 1, (size_t)n_boot, 0.975);
    rc = 0;
done:
    if (rc != 0) out->est = out->lo = out->hi = NAN;
    gsl_rng_free(rng);
    free(stat);
    free(y);
    return rc;
}

int stats_mean_ci(const double *x, size_t n, size_t block, int n_boot, unsigned long seed,
                  stats_ci *out) {
    if (!out) return -1;
    return block_boot_ci(x, n, block, n_boot, seed, STAT_MEAN, out);
}

int stats_median_ci(const double *x, size_t n, size_t block, int n_boot, unsigned long seed,
                    stats_ci *out) {
    if (!out) return -1;
    return block_boot_ci(x, n, block, n_boot, seed, STAT_MEDIAN, out);
}

int stats_wilson(size_t k, size_t n, stats_ci *out) {
    if (!out) return -1;
    out->est = out->lo = out->hi = NAN;
    out->n = n;
    if (n == 0 || k > n) return -1;
    gsl_set_error_handler_off();
    double z = gsl_cdf_ugaussian_Pinv(0.975);
    double nn = (double)n, p = (double)k / nn, z2 = z * z;
    double denom = 1.0 + z2 / nn;
    double centre = (p + z2 / (2.0 * nn)) / denom;
    double half = z / denom * sqrt(p * (1.0 - p) / nn + z2 / (4.0 * nn * nn));
    out->est = p;
    out->lo = centre - half < 0.0 ? 0.0 : centre - half;
    out->hi = centre + half > 1.0 ? 1.0 : centre + half;
    return 0;
}

int stats_log10_slope(const double *x, const double *kl, size_t n, stats_fit *out) {
    if (!out) return -1;
    out->slope = out->lo = out->hi = out->intercept = out->r2 = NAN;
    out->n = out->n_floored = 0;
    if (!x || !kl) return -1;
    gsl_set_error_handler_off();

    int rc = -1;
    double *xs = malloc((n ? n : 1) * sizeof *xs); /* [n] usable x */
    double *ys = malloc((n ? n : 1) * sizeof *ys); /* [n] log10(max(kl, 1e-12)) */
    if (!xs || !ys) goto done;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i]) || isnan(kl[i])) continue;
        double k = kl[i];
        if (k < 1e-12) { k = 1e-12; out->n_floored++; }
        xs[m] = x[i];
        ys[m] = log10(k);
        m++;
    }
    out->n = m;
    rc = 0;
    if (m < 3) goto done;  /* gsl_fit_linear does not check n: a line needs n−2 >= 1 dof */
    double c0, c1, cov00, cov01, cov11, sumsq;
    if (gsl_fit_linear(xs, 1, ys, 1, m, &c0, &c1, &cov00, &cov01, &cov11, &sumsq) != GSL_SUCCESS
        || !isfinite(c1) || !isfinite(cov11))
        goto done;  /* all x equal: no slope */
    double t = gsl_cdf_tdist_Pinv(0.975, (double)(m - 2));
    double se = sqrt(cov11);
    out->slope = c1;
    out->intercept = c0;
    out->lo = c1 - t * se;
    out->hi = c1 + t * se;
    double tss = gsl_stats_tss(ys, 1, m);
    out->r2 = tss > 0.0 ? 1.0 - sumsq / tss : NAN;
done:
    free(xs);
    free(ys);
    return rc;
}

int stats_spearman(const double *x, const double *y, size_t n, stats_ci *out) {
    if (!out) return -1;
    out->est = out->lo = out->hi = NAN;
    out->n = 0;
    if (!x || !y) return -1;
    gsl_set_error_handler_off();

    int rc = -1;
    size_t cap = n ? n : 1;
    double *a = malloc(cap * sizeof *a);        /* [n] usable x */
    double *b = malloc(cap * sizeof *b);        /* [n] usable y */
    double *work = malloc(2 * cap * sizeof *work); /* [2n] GSL scratch */
    if (!a || !b || !work) goto done;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(x[i]) || isnan(y[i])) continue;
        a[m] = x[i];
        b[m] = y[i];
        m++;
    }
    out->n = m;
    rc = 0;
    if (m < 2) goto done;
    double rho = gsl_stats_spearman(a, 1, b, 1, m, work);
    if (!isfinite(rho)) goto done;  /* a constant variable */
    if (rho > 1.0) rho = 1.0;
    if (rho < -1.0) rho = -1.0;
    out->est = rho;
    if (m > 3 && fabs(rho) < 1.0) {
        double z = atanh(rho), se = sqrt(1.06 / (double)(m - 3));
        double q = gsl_cdf_ugaussian_Pinv(0.975);
        out->lo = tanh(z - q * se);
        out->hi = tanh(z + q * se);
    } else if (m > 3) {
        out->lo = out->hi = rho;
    }
done:
    free(a);
    free(b);
    free(work);
    return rc;
}

int stats_near_tie(const double *gap_ref, const int *same_top1, const double *kl, size_t n,
                   double eps, stats_neartie *out) {
    if (!out) return -1;
    memset(out, 0, sizeof *out);
    out->eps = eps;
    out->share_pos_near = out->share_flips_near = out->share_kl_near = NAN;
    if (!gap_ref || !same_top1 || !kl || isnan(eps)) return -1;
    for (size_t i = 0; i < n; i++) {
        if (isnan(gap_ref[i]) || isnan(kl[i])) continue;
        int near = gap_ref[i] < eps;
        int flip = !same_top1[i];
        out->n++;
        out->kl_total += kl[i];
        if (flip) out->n_flips++;
        if (near) {
            out->n_near++;
            out->kl_near += kl[i];
            if (flip) out->n_flips_near++;
        }
    }
    if (out->n) out->share_pos_near = (double)out->n_near / (double)out->n;
    if (out->n_flips) out->share_flips_near = (double)out->n_flips_near / (double)out->n_flips;
    if (out->kl_total > 0.0) out->share_kl_near = out->kl_near / out->kl_total;
    return 0;
}

void stats_km_free(stats_km *km) {
    if (!km) return;
    free(km->time);
    free(km->at_risk);
    free(km->events);
    free(km->surv);
    free(km->lo);
    free(km->hi);
    km->time = NULL;
    km->at_risk = km->events = NULL;
    km->surv = km->lo = km->hi = NULL;
    km->n_steps = 0;
}

int stats_kaplan_meier(const int *fork, const int *censored, size_t n, int horizon, stats_km *out) {
    if (!out) return -1;
    memset(out, 0, sizeof *out);
    out->median = out->median_lo = out->median_hi = NAN;
    out->surv_end = NAN;
    out->horizon = horizon;
    if (!fork || !censored || n == 0 || horizon < 1) return -1;
    for (size_t i = 0; i < n; i++) {
        if (fork[i] < 0 || fork[i] > horizon) return -1;
        if (censored[i] ? fork[i] != horizon : fork[i] == horizon) return -1;
    }
    gsl_set_error_handler_off();

    /* d[t] = events at t for t in [0, horizon) */
    size_t *d = calloc((size_t)horizon, sizeof *d); /* [horizon] */
    if (!d) return -1;
    out->n_obs = n;
    for (size_t i = 0; i < n; i++) {
        if (censored[i]) out->n_censored++;
        else { d[fork[i]]++; out->n_events++; }
    }
    size_t steps = 0;
    for (int t = 0; t < horizon; t++)
        if (d[t]) steps++;
    size_t cap = steps ? steps : 1;
    out->time = malloc(cap * sizeof *out->time);
    out->at_risk = malloc(cap * sizeof *out->at_risk);
    out->events = malloc(cap * sizeof *out->events);
    out->surv = malloc(cap * sizeof *out->surv);
    out->lo = malloc(cap * sizeof *out->lo);
    out->hi = malloc(cap * sizeof *out->hi);
    if (!out->time || !out->at_risk || !out->events || !out->surv || !out->lo || !out->hi) {
        free(d);
        stats_km_free(out);
        return -1;
    }

    double z = gsl_cdf_ugaussian_Pinv(0.975);
    size_t risk = n;   /* n_j: still unforked at t (T >= t) */
    double s = 1.0, green = 0.0;
    size_t k = 0;
    for (int t = 0; t < horizon; t++) {
        if (!d[t]) continue;
        size_t dj = d[t], nj = risk;
        s *= 1.0 - (double)dj / (double)nj;
        double sd;
        if (dj < nj) {
            green += (double)dj / ((double)nj * (double)(nj - dj));
            sd = s * sqrt(green);
        } else {
            s = 0.0;
            sd = 0.0;
        }
        out->time[k] = t;
        out->at_risk[k] = nj;
        out->events[k] = dj;
        out->surv[k] = s;
        out->lo[k] = s - z * sd < 0.0 ? 0.0 : s - z * sd;
        out->hi[k] = s + z * sd > 1.0 ? 1.0 : s + z * sd;
        if (isnan(out->median) && s <= 0.5) out->median = t;
        if (isnan(out->median_lo) && out->lo[k] <= 0.5) out->median_lo = t;
        if (isnan(out->median_hi) && out->hi[k] <= 0.5) out->median_hi = t;
        risk -= dj;
        k++;
    }
    out->n_steps = steps;
    out->surv_end = s;
    free(d);
    return 0;
}

double stats_km_surv_at(const stats_km *km, int t) {
    double s = 1.0;
    for (size_t k = 0; k < km->n_steps && km->time[k] <= t; k++) s = km->surv[k];
    return s;
}

/* ============================================================================================
 * C. Paired binary outcomes (the needle bench, docs/DESIGN.md §9)
 * ========================================================================================== */

double stats_mcnemar_exact(size_t b, size_t c) {
    if (b + c == 0) return 1.0;
    if (b + c > 0xffffffffu) return NAN;
    gsl_set_error_handler_off();
    unsigned int n = (unsigned int)(b + c), k = (unsigned int)(b < c ? b : c);
    double p = 2.0 * gsl_cdf_binomial_P(k, 0.5, n);
    return p > 1.0 ? 1.0 : p;
}

/* ---- TSV columns ------------------------------------------------------------------------------ */

int stats_tsv_num(FILE *f, double v) {
    if (isnan(v)) return fputs("\tnan", f) < 0 ? -1 : 0;
    return fprintf(f, "\t%.17g", v) < 0 ? -1 : 0;
}

int stats_position_cols(FILE *f, const stats_row *r) {
    int rc = stats_tsv_num(f, r->kl_arm_ref) | stats_tsv_num(f, r->kl_ref_arm) | stats_tsv_num(f, r->js);
    rc |= fprintf(f, "\t%d", r->top1_arm == r->top1_ref) < 0;
    rc |= stats_tsv_num(f, r->nll_arm) | stats_tsv_num(f, r->nll_ref) | stats_tsv_num(f, r->entropy_ref);
    rc |= stats_tsv_num(f, r->gap_ref);
    return rc ? -1 : 0;
}
