/* stats_boot.c — statistics for dependent series and for comparisons (stats.h, part D):
 * the Politis–White block length, the circular block bootstrap of a mean and of a paired
 * difference, bootstrap p-values, TOST equivalence words, Holm's step-down adjustment, minimum
 * detectable differences, and a ratio of means bootstrapped over whole units.
 * docs/DESIGN.md §3.6.1 says why and how each is tested. */
#include "driver/stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>

static int finite_all(const double *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* Type-7 quantile of sorted t [n] at fraction f, as gsl_stats_quantile_from_sorted_data, except
 * that a zero interpolation weight does not touch the neighbour (so +inf entries stay usable). */
static double quantile_sorted(const double *t, size_t n, double f) {
    double h = (double)(n - 1) * f;
    size_t i = (size_t)floor(h);
    double d = h - (double)i;
    if (i + 1 >= n || d == 0.0) return t[i < n ? i : n - 1];
    if (isinf(t[i + 1])) return t[i + 1];
    return (1.0 - d) * t[i] + d * t[i + 1];
}

void stats_boot_summary(double *t, int n_boot, double theta0, stats_boot *out) {
    size_t nb = (size_t)n_boot;
    gsl_sort(t, 1, nb);
    out->lo = quantile_sorted(t, nb, 0.025);
    out->hi = quantile_sorted(t, nb, 0.975);
    out->lo90 = quantile_sorted(t, nb, 0.05);
    out->hi90 = quantile_sorted(t, nb, 0.95);
    double m = 0.0, ss = 0.0;
    for (size_t r = 0; r < nb; r++) m += t[r];
    m /= (double)nb;
    for (size_t r = 0; r < nb; r++) ss += (t[r] - m) * (t[r] - m);
    out->se = nb > 1 && isfinite(m) ? sqrt(ss / (double)(nb - 1)) : (nb > 1 ? INFINITY : 0.0);
    out->p = stats_boot_p(t, n_boot, theta0);
}

static void boot_clear(stats_boot *out, size_t n) {
    out->est = out->lo = out->hi = out->lo90 = out->hi90 = out->se = out->p = NAN;
    out->n = n;
    out->block = 0;
}

/* ---------------------------------------------------------------------------------------------
 * Politis–White block length
 * ------------------------------------------------------------------------------------------- */

/* The flat-top lag window of Politis & Romano (1995). */
static double flat_top(double t) {
    t = fabs(t);
    if (t <= 0.5) return 1.0;
    if (t <= 1.0) return 2.0 * (1.0 - t);
    return 0.0;
}

int stats_pw_block(const double *x, size_t n, stats_pw *out) {
    if (!out) return -1;
    memset(out, 0, sizeof *out);
    out->b_raw = out->G = out->g = NAN;
    if (!x || n == 0 || !finite_all(x, n)) return -1;

    double nn = (double)n;
    size_t b_max = (size_t)ceil(fmin(3.0 * sqrt(nn), nn / 3.0));
    if (b_max < 1) b_max = 1;
    out->b_max = b_max;
    out->block = 1;
    out->b_raw = 0.0;
    out->G = out->g = 0.0;
    if (n < 4) return 0;

    double l10 = log10(nn);
    size_t kn = (size_t)ceil(sqrt(l10));
    if (kn < 5) kn = 5;
    size_t m_max = (size_t)ceil(sqrt(nn)) + kn;
    if (m_max + kn > n - 1) m_max = n - 1 > kn ? n - 1 - kn : 0;
    size_t lags = m_max + kn; /* R̂(0 .. lags), lags <= n − 1 (or kn when n is tiny) */
    if (lags > n - 1) lags = n - 1;

    double mean = 0.0;
    for (size_t i = 0; i < n; i++) mean += x[i];
    mean /= nn;
    double *r = malloc((lags + 1) * sizeof *r); /* [lags + 1] autocovariances R̂(k) */
    if (!r) { out->block = 0; out->b_raw = out->G = out->g = NAN; return -1; }
    for (size_t k = 0; k <= lags; k++) {
        double s = 0.0;
        for (size_t i = 0; i + k < n; i++) s += (x[i] - mean) * (x[i + k] - mean);
        r[k] = s / nn;
    }
    if (!(r[0] > 0.0)) { free(r); return 0; } /* constant: no dependence to estimate */

    double band = STATS_PW_C * sqrt(l10 / nn);
    size_t m_hat = m_max;
    for (size_t m = 0; m <= m_max; m++) {
        size_t k = 1;
        while (k <= kn && m + k <= lags && fabs(r[m + k] / r[0]) < band) k++;
        if (k > kn) { m_hat = m; break; }
    }
    size_t M = 2 * m_hat < m_max ? 2 * m_hat : m_max;
    double G = 0.0, g = r[0];
    for (size_t k = 1; k <= M; k++) {
        double w = flat_top((double)k / (double)M);
        G += 2.0 * w * (double)k * r[k];
        g += 2.0 * w * r[k];
    }
    free(r);
    out->m_hat = m_hat;
    out->M = M;
    out->G = G;
    out->g = g;
    if (!(g > 0.0)) return 0;
    double d = 4.0 / 3.0 * g * g;
    double b = cbrt(2.0 * G * G / d) * cbrt(nn);
    out->b_raw = b;
    double bc = ceil(b);
    if (bc > (double)b_max) bc = (double)b_max;
    out->block = bc < 1.0 ? 1 : (size_t)bc;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Circular block bootstrap
 * ------------------------------------------------------------------------------------------- */

/* The percentile interval of a block bootstrap is too narrow on dependent series (its variance
 * is biased low by about Ĝ/(ĝ·b), and the variance is itself estimated from k blocks): 89–92 %
 * for a nominal 95 % on AR(1) (docs/DESIGN.md §3.6.1). So the resampled means t [n_boot] are
 * spread about the mean to sd = s·t_{0.975, k−1} / z_{0.975}, where s is the larger of the draws'
 * own sd and, when the block is Politis–White's, √(ĝ/n) (ĝ > 0: the flat-top long-run variance of
 * the same pass; never narrower than the bootstrap, which on long-memory data is itself too narrow): the intervals, p-values and TOST read from the draws are then those of a Student-t
 * interval on k − 1 degrees of freedom, k = ⌈n/b⌉ blocks (93.5–95.2 % on AR(1), 94 % on white
 * noise). k = 1 (one block: every draw is the mean) or a zero spread are left as they are. */
static void boot_widen(double *t, int n_boot, double mean, size_t n, size_t k, double g) {
    if (k < 2 || n_boot < 2) return;
    double ss = 0.0;
    for (int r = 0; r < n_boot; r++) ss += (t[r] - mean) * (t[r] - mean);
    double sd = sqrt(ss / (double)(n_boot - 1));
    if (!(sd > 0.0) || !isfinite(sd)) return;
    double s = g > 0.0 && isfinite(g) && sqrt(g / (double)n) > sd ? sqrt(g / (double)n) : sd;
    double f = s / sd * gsl_cdf_tdist_Pinv(0.975, (double)(k - 1)) / gsl_cdf_ugaussian_Pinv(0.975);
    for (int r = 0; r < n_boot; r++) t[r] = mean + (t[r] - mean) * f;
}

int stats_mean_ci_circular(const double *x, size_t n, size_t block, int n_boot,
                           unsigned long seed, double *boot, stats_boot *out) {
    if (!out) return -1;
    boot_clear(out, n);
    if (!x || n == 0 || n_boot < 1 || !finite_all(x, n)) return -1;
    gsl_set_error_handler_off();

    int rc = -1;
    double *c = NULL;    /* [2n + 1] prefix sums of x − x̄ over x twice: circular block sums */
    double *t = boot;    /* [n_boot] resampled means (the caller's or ours) */
    gsl_rng *rng = NULL;

    size_t b = block;
    double g = NAN; /* the flat-top long-run variance ĝ when the block is Politis–White's */
    if (b == 0) {
        stats_pw pw;
        if (stats_pw_block(x, n, &pw) != 0) return -1;
        b = pw.block;
        g = pw.g;
    }
    if (b > n) b = n;

    double mean = 0.0;
    for (size_t i = 0; i < n; i++) mean += x[i];
    mean /= (double)n;

    c = malloc((2 * n + 1) * sizeof *c);
    if (!t) t = malloc((size_t)n_boot * sizeof *t);
    rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!c || !t || !rng) goto done;
    gsl_rng_set(rng, seed);

    c[0] = 0.0;
    for (size_t i = 0; i < 2 * n; i++) c[i + 1] = c[i] + (x[i % n] - mean);
    size_t k = (n + b - 1) / b, last = n - (k - 1) * b; /* k blocks, the last cut to `last` */
    for (int rep = 0; rep < n_boot; rep++) {
        double s = 0.0;
        for (size_t j = 0; j < k; j++) {
            size_t st = n > 1 ? (size_t)gsl_rng_uniform_int(rng, (unsigned long)n) : 0;
            size_t len = j + 1 < k ? b : last;
            s += c[st + len] - c[st];
        }
        t[rep] = mean + s / (double)n;
    }
    boot_widen(t, n_boot, mean, n, k, g);
    out->est = mean;
    out->block = b;
    if (n == 1) {
        out->lo = out->hi = out->lo90 = out->hi90 = mean;
        out->se = 0.0;
        out->p = 1.0; /* one value tests nothing (every resample is that value) */
    } else {
        stats_boot_summary(t, n_boot, 0.0, out);
    }
    rc = 0;
done:
    if (rc != 0) boot_clear(out, n);
    gsl_rng_free(rng);
    if (t != boot) free(t);
    free(c);
    return rc;
}

int stats_paired_diff_ci(const double *a, const double *b, size_t n, size_t block, int n_boot,
                         unsigned long seed, double *boot, stats_boot *out) {
    if (!out) return -1;
    boot_clear(out, n);
    if (!a || !b || n == 0) return -1;
    double *d = malloc(n * sizeof *d); /* [n] a − b */
    if (!d) return -1;
    for (size_t i = 0; i < n; i++) d[i] = a[i] - b[i];
    int rc = stats_mean_ci_circular(d, n, block, n_boot, seed, boot, out);
    free(d);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * p-values, Holm, verdicts
 * ------------------------------------------------------------------------------------------- */

double stats_boot_p(const double *t, int n_boot, double theta0) {
    if (!t || n_boot < 1 || isnan(theta0)) return NAN;
    size_t le = 0, ge = 0;
    for (int r = 0; r < n_boot; r++) {
        if (t[r] <= theta0) le++;
        if (t[r] >= theta0) ge++;
    }
    double k = (double)(le < ge ? le : ge);
    double p = 2.0 * (k + 1.0) / ((double)n_boot + 1.0);
    return p > 1.0 ? 1.0 : p;
}

double stats_boot_p_tost(const double *t, int n_boot, double margin) {
    if (!t || n_boot < 1 || !(margin > 0.0)) return NAN;
    size_t lo = 0, hi = 0;
    for (int r = 0; r < n_boot; r++) {
        if (t[r] <= -margin) lo++;
        if (t[r] >= margin) hi++;
    }
    double k = (double)(lo > hi ? lo : hi);
    return (k + 1.0) / ((double)n_boot + 1.0);
}

/* One finite p-value and where it came from; sorted ascending by p, ties by index. */
typedef struct { double p; size_t i; } holm_entry;
static int holm_cmp(const void *a, const void *b) {
    const holm_entry *x = a, *y = b;
    if (x->p < y->p) return -1;
    if (x->p > y->p) return 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

int stats_holm(const double *p, size_t m, double *p_adj) {
    if (!p || !p_adj) return -1;
    holm_entry *e = malloc((m ? m : 1) * sizeof *e); /* [m] the finite entries */
    size_t mf = 0;
    int bad = !e;
    for (size_t i = 0; i < m && !bad; i++) {
        if (isnan(p[i])) continue;
        if (p[i] < 0.0 || p[i] > 1.0) bad = 1;
        e[mf].p = p[i];
        e[mf].i = i;
        mf++;
    }
    for (size_t i = 0; i < m; i++) p_adj[i] = NAN;  /* p may alias p_adj: e holds the values */
    if (bad) {
        free(e);
        return -1;
    }
    qsort(e, mf, sizeof *e, holm_cmp);
    double run = 0.0;
    for (size_t j = 0; j < mf; j++) {
        double v = (double)(mf - j) * e[j].p;
        if (v > 1.0) v = 1.0;
        if (v > run) run = v;
        p_adj[e[j].i] = run;
    }
    free(e);
    return (int)mf;
}

/* The verdict once "difference detected" (dir = −1, 0, +1) is known. */
static stats_verdict verdict_of(int dir, double lo90, double hi90, double margin) {
    int assess = margin > 0.0 && isfinite(margin);
    if (assess && (isnan(lo90) || isnan(hi90))) return STATS_NOT_COMPUTABLE;
    int equiv = assess && lo90 > -margin && hi90 < margin;
    if (equiv) return dir < 0 ? STATS_EQUIVALENT_LOWER : dir > 0 ? STATS_EQUIVALENT_HIGHER
                                                                 : STATS_EQUIVALENT;
    return dir < 0 ? STATS_LOWER : dir > 0 ? STATS_HIGHER : STATS_NO_DETECTED_DIFFERENCE;
}

stats_verdict stats_verdict_p(double est, double p, double alpha, double lo90, double hi90,
                              double margin) {
    if (isnan(est) || isnan(p) || !(alpha > 0.0 && alpha < 1.0)) return STATS_NOT_COMPUTABLE;
    int dir = p <= alpha ? (est < 0.0 ? -1 : est > 0.0 ? 1 : 0) : 0;
    return verdict_of(dir, lo90, hi90, margin);
}

stats_verdict stats_verdict_ci(double lo, double hi, double lo90, double hi90, double margin) {
    if (isnan(lo) || isnan(hi) || lo > hi) return STATS_NOT_COMPUTABLE;
    int dir = hi < 0.0 ? -1 : lo > 0.0 ? 1 : 0;
    return verdict_of(dir, lo90, hi90, margin);
}

const char *stats_verdict_word(stats_verdict v) {
    switch (v) {
    case STATS_NO_DETECTED_DIFFERENCE: return "no detected difference";
    case STATS_LOWER: return "lower";
    case STATS_HIGHER: return "higher";
    case STATS_EQUIVALENT: return "equivalent within the margin";
    case STATS_EQUIVALENT_LOWER: return "lower, within the margin";
    case STATS_EQUIVALENT_HIGHER: return "higher, within the margin";
    case STATS_NOT_COMPUTABLE: break;
    }
    return "not computable";
}

int stats_verdict_format(stats_verdict v, double margin, char *buf, size_t size) {
    if (!buf) return -1;
    switch (v) {
    case STATS_EQUIVALENT: return snprintf(buf, size, "equivalent within ±%.3g", margin);
    case STATS_EQUIVALENT_LOWER: return snprintf(buf, size, "lower, within ±%.3g", margin);
    case STATS_EQUIVALENT_HIGHER: return snprintf(buf, size, "higher, within ±%.3g", margin);
    default: return snprintf(buf, size, "%s", stats_verdict_word(v));
    }
}

/* ---------------------------------------------------------------------------------------------
 * Power
 * ------------------------------------------------------------------------------------------- */

static int power_args_ok(double alpha, double power) {
    return alpha > 0.0 && alpha < 1.0 && power > 0.0 && power < 1.0;
}

double stats_mdd(double se, double alpha, double power) {
    if (!(se > 0.0) || !isfinite(se) || !power_args_ok(alpha, power)) return NAN;
    gsl_set_error_handler_off();
    return (gsl_cdf_ugaussian_Pinv(1.0 - alpha / 2.0) + gsl_cdf_ugaussian_Pinv(power)) * se;
}

double stats_tost_min_margin(double se, double alpha, double power) {
    if (!(se > 0.0) || !isfinite(se) || !power_args_ok(alpha, power)) return NAN;
    gsl_set_error_handler_off();
    return (gsl_cdf_ugaussian_Pinv(1.0 - alpha) + gsl_cdf_ugaussian_Pinv((1.0 + power) / 2.0)) * se;
}

double stats_mcnemar_mdd(size_t n_disc, size_t n_pairs, double alpha, double power) {
    if (n_pairs == 0 || n_disc > n_pairs || !power_args_ok(alpha, power)) return NAN;
    gsl_set_error_handler_off();
    /* the exact test's smallest p is 2·2^(−n_disc) (all discordant pairs one way) */
    if (n_disc < 1 || (n_disc < 64 && 2.0 * ldexp(1.0, -(int)n_disc) > alpha)) return INFINITY;
    double z = gsl_cdf_ugaussian_Pinv(1.0 - alpha / 2.0) + gsl_cdf_ugaussian_Pinv(power);
    double rd = sqrt((double)n_disc);
    if (z > rd) return INFINITY;
    return z * rd / (double)n_pairs;
}

/* ---------------------------------------------------------------------------------------------
 * Ratio of means over whole units
 * ------------------------------------------------------------------------------------------- */

/* Checks one side's offsets and values; fills sum [n_units] and cnt [n_units].
 * Returns 0, or -1 on bad offsets / values or no value at all. */
static int unit_sums(const double *v, const size_t *off, size_t n_units, double *sum,
                     double *cnt) {
    if (off[0] != 0) return -1;
    for (size_t u = 0; u < n_units; u++) {
        if (off[u + 1] < off[u]) return -1;
        double s = 0.0;
        for (size_t i = off[u]; i < off[u + 1]; i++) {
            if (!isfinite(v[i]) || v[i] < 0.0) return -1;
            s += v[i];
        }
        sum[u] = s;
        cnt[u] = (double)(off[u + 1] - off[u]);
    }
    return off[n_units] > 0 ? 0 : -1;
}

/* num_sum / num_cnt over den_sum / den_cnt as a ratio of means; +inf for a zero denominator
 * (and 1 for 0/0: no change). */
static double ratio_of(double ns, double nc, double ds, double dc) {
    if (nc == 0.0 || dc == 0.0) return INFINITY; /* a side drew only empty units */
    if (ds == 0.0) return ns == 0.0 ? 1.0 : INFINITY;
    return (ns / nc) / (ds / dc);
}

int stats_ratio_units_ci(const double *num, const size_t *num_off, size_t n_num,
                         const double *den, const size_t *den_off, size_t n_den, int paired,
                         int n_boot, unsigned long seed, double *boot, stats_boot *out) {
    if (!out) return -1;
    boot_clear(out, n_num);
    if (!num || !num_off || !den || !den_off || n_num == 0 || n_den == 0 || n_boot < 1) return -1;
    if (paired && n_num != n_den) return -1;
    gsl_set_error_handler_off();

    int rc = -1;
    size_t nu = n_num > n_den ? n_num : n_den;
    double *w = malloc(4 * nu * sizeof *w); /* [4][nu]: num sum, num count, den sum, den count */
    double *t = boot;                        /* [n_boot] resampled ratios */
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!t) t = malloc((size_t)n_boot * sizeof *t);
    if (!w || !t || !rng) goto done;
    double *ns = w, *nc = w + nu, *ds = w + 2 * nu, *dc = w + 3 * nu;
    if (unit_sums(num, num_off, n_num, ns, nc) != 0 || unit_sums(den, den_off, n_den, ds, dc) != 0)
        goto done;
    double tns = 0, tnc = 0, tds = 0, tdc = 0;
    for (size_t u = 0; u < n_num; u++) { tns += ns[u]; tnc += nc[u]; }
    for (size_t u = 0; u < n_den; u++) { tds += ds[u]; tdc += dc[u]; }
    if (!(tds > 0.0)) goto done;
    gsl_rng_set(rng, seed);
    for (int rep = 0; rep < n_boot; rep++) {
        double a = 0, ac = 0, b = 0, bc = 0;
        for (size_t j = 0; j < n_num; j++) {
            size_t u = (size_t)gsl_rng_uniform_int(rng, (unsigned long)n_num);
            a += ns[u];
            ac += nc[u];
            if (paired) { b += ds[u]; bc += dc[u]; }
        }
        if (!paired)
            for (size_t j = 0; j < n_den; j++) {
                size_t u = (size_t)gsl_rng_uniform_int(rng, (unsigned long)n_den);
                b += ds[u];
                bc += dc[u];
            }
        t[rep] = ratio_of(a, ac, b, bc);
    }
    out->est = (tns / tnc) / (tds / tdc);
    out->block = 1;
    out->n = n_num;
    stats_boot_summary(t, n_boot, 1.0, out);
    rc = 0;
done:
    if (rc != 0) boot_clear(out, n_num);
    gsl_rng_free(rng);
    if (t != boot) free(t);
    free(w);
    return rc;
}
