/* needle_stats.c — the retrieval test of the needle bench over units (see needle.h and
 * docs/DESIGN.md §9.5): a unit is one (trial, length, depth) cell with its raw and chat twins; an
 * arm and the reference are compared unit by unit.
 *
 *   needle_stats_signflip_p   the exact sign-flip (randomisation) test of the summed per-unit
 *                             differences; with one template it is McNemar's exact test
 *   needle_stats_grid_mdd     the smallest accuracy difference that test detects with the given
 *                             power on n units, in the most favourable case (the grid's power)
 *   needle_stats_disc_bound   the one-sided Clopper–Pearson upper bound on the share of
 *                             discordant units, which bounds |accuracy difference| (equivalence)
 *
 * Everything else (Holm, the verdict words, the bootstrap and its MDD) is stats.h's. */
#include "driver/needle/needle.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>

#define SIGNFLIP_EXACT_MAX 65536   /* Σ|x| up to this: exact distribution; above: normal */

double needle_stats_signflip_p(const int *x, size_t n) {
    if (!x && n) return NAN;
    long total = 0, s = 0;
    double ss = 0.0;
    for (size_t u = 0; u < n; u++) {
        if (x[u] < -NEEDLE_STATS_XMAX || x[u] > NEEDLE_STATS_XMAX) return NAN;
        total += labs((long)x[u]);
        s += x[u];
        ss += (double)x[u] * (double)x[u];
    }
    if (s == 0) return 1.0;
    long obs = labs(s);
    if (total > SIGNFLIP_EXACT_MAX) {
        gsl_set_error_handler_off();
        double p = 2.0 * gsl_cdf_ugaussian_Q(((double)obs - 0.5) / sqrt(ss));
        return p > 1.0 ? 1.0 : p;
    }
    /* dp [2 total + 1]: P(S* = v − total) after the units seen so far, each sign ½ */
    size_t w = 2 * (size_t)total + 1;
    double *dp = calloc(w, sizeof *dp), *nx = calloc(w, sizeof *nx);
    double p = NAN;
    if (!dp || !nx) goto done;
    dp[total] = 1.0;
    for (size_t u = 0; u < n; u++) {
        long a = labs((long)x[u]);
        if (!a) continue;
        memset(nx, 0, w * sizeof *nx);
        for (size_t v = 0; v < w; v++) {
            if (dp[v] == 0.0) continue;
            if ((long)v + a < (long)w) nx[v + (size_t)a] += 0.5 * dp[v];
            if ((long)v - a >= 0) nx[v - (size_t)a] += 0.5 * dp[v];
        }
        double *t = dp; dp = nx; nx = t;
    }
    p = 0.0;
    for (size_t v = 0; v < w; v++)
        if (labs((long)v - total) >= obs) p += dp[v];
    if (p > 1.0) p = 1.0;
done:
    free(dp);
    free(nx);
    return p;
}

/* The fewest discordant units, all one way, for which the exact test reaches alpha:
 * the smallest m with 2·2^(−m) <= alpha. */
static size_t min_one_way(double alpha) {
    size_t m = 1;
    while (m < 64 && 2.0 * ldexp(1.0, -(int)m) > alpha) m++;
    return m;
}

double needle_stats_grid_mdd(size_t n_units, int n_tpl, double alpha, double power) {
    if (n_units == 0 || n_tpl < 1 || n_tpl > NEEDLE_STATS_XMAX || !(alpha > 0 && alpha < 1) ||
        !(power > 0 && power < 1))
        return NAN;
    size_t m = min_one_way(alpha);
    if (n_units < m) return INFINITY;
    gsl_set_error_handler_off();
    /* power(q) = P(Binomial(n, q) >= m), increasing in q: bisection for power(q) = power */
    double lo = 0.0, hi = 1.0;
    for (int it = 0; it < 100; it++) {
        double q = 0.5 * (lo + hi);
        double pw = gsl_cdf_binomial_Q((unsigned)(m - 1), q, (unsigned)n_units);
        if (pw >= power) hi = q;
        else lo = q;
    }
    return hi / (double)n_tpl;
}

double needle_stats_disc_bound(size_t k_disc, size_t n_units, double alpha) {
    if (n_units == 0 || k_disc > n_units || !(alpha > 0 && alpha < 1)) return NAN;
    if (k_disc == n_units) return 1.0;
    gsl_set_error_handler_off();
    return gsl_cdf_beta_Pinv(1.0 - alpha, (double)k_disc + 1.0, (double)(n_units - k_disc));
}
