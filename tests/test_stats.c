/* test_stats.c — per-row metrics against closed forms, and every summary statistic against
 * cases worked by hand (or an independent formula written here). */
#include "driver/stats.h"
#include "tests/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

static int rel_close(double got, double want, double rel) {
    if (got == want) return 1;
    return fabs(got - want) <= rel * fabs(want);
}

/* Independent long-double reference: full softmax of both rows, then the textbook sums. */
typedef struct { long double kl_ar, kl_ra, js, ent; } ref_metrics;
static ref_metrics naive_metrics(const float *a, const float *b, int n) {
    long double ma = a[0], mb = b[0], sa = 0, sb = 0;
    for (int i = 1; i < n; i++) { if (a[i] > ma) ma = a[i]; if (b[i] > mb) mb = b[i]; }
    for (int i = 0; i < n; i++) { sa += expl(a[i] - ma); sb += expl(b[i] - mb); }
    ref_metrics r = {0, 0, 0, 0};
    for (int i = 0; i < n; i++) {
        long double p = expl(a[i] - ma) / sa, q = expl(b[i] - mb) / sb, m = (p + q) / 2;
        if (p > 0) r.kl_ar += p * logl(p / q);
        if (q > 0) r.kl_ra += q * logl(q / p);
        if (p > 0) r.js += 0.5L * p * logl(p / m);
        if (q > 0) r.js += 0.5L * q * logl(q / m);
        if (q > 0) r.ent -= q * logl(q);
    }
    return r;
}

static void test_rows_closed_forms(void) {
    stats_row r;

    /* Two-point rows: arm logits (0, −1.5), ref logits (0.5, −0.25) -> ref z = (0, −0.75). */
    {
        const float a[2] = {0.0f, -1.5f}, b[2] = {0.5f, -0.25f};
        double p2 = exp(-1.5) / (1 + exp(-1.5)), p1 = 1 / (1 + exp(-1.5));
        double q2 = exp(-0.75) / (1 + exp(-0.75)), q1 = 1 / (1 + exp(-0.75));
        double m1 = (p1 + q1) / 2, m2 = (p2 + q2) / 2;
        double kl_pq = p1 * log(p1 / q1) + p2 * log(p2 / q2);
        double kl_qp = q1 * log(q1 / p1) + q2 * log(q2 / p2);
        double js = 0.5 * (p1 * log(p1 / m1) + p2 * log(p2 / m2)) +
                    0.5 * (q1 * log(q1 / m1) + q2 * log(q2 / m2));
        double ent = -(q1 * log(q1) + q2 * log(q2));
        int rc = stats_compare_rows(a, b, 2, 1, &r);
        CHECK(rc == 0, "two-point: returns 0");
        CHECK(rel_close(r.kl_arm_ref, kl_pq, 1e-12), "two-point KL(arm||ref) %.17g vs %.17g", r.kl_arm_ref, kl_pq);
        CHECK(rel_close(r.kl_ref_arm, kl_qp, 1e-12), "two-point KL(ref||arm) %.17g vs %.17g", r.kl_ref_arm, kl_qp);
        CHECK(rel_close(r.js, js, 1e-12), "two-point JS %.17g vs %.17g", r.js, js);
        CHECK(rel_close(r.entropy_ref, ent, 1e-12), "two-point entropy %.17g vs %.17g", r.entropy_ref, ent);
        CHECK(rel_close(r.nll_arm, 1.5 + log1p(exp(-1.5)), 1e-12), "two-point NLL arm %.17g", r.nll_arm);
        CHECK(rel_close(r.nll_ref, 0.75 + log1p(exp(-0.75)), 1e-12), "two-point NLL ref %.17g", r.nll_ref);
        CHECK(r.gap_arm == 1.5 && r.gap_ref == 0.75, "two-point gaps %g %g", r.gap_arm, r.gap_ref);
        CHECK(r.top1_arm == 0 && r.top1_ref == 0, "two-point top-1");
    }

    /* Tiny difference: logits (0, −1) vs (0, −1 + 2⁻²⁰). Bernoulli in natural parameter
     * η: KL(P‖Q) = A(η_q) − A(η_p) − (η_q − η_p)A'(η_p), A = softplus; Taylor:
     * Σ_k A⁽ᵏ⁾(η_p) δᵏ/k!, A'' = s(1−s), A''' = s(1−s)(1−2s), A'''' = s(1−s)(1−6s+6s²).
     * JS ≈ A''·δ²/8 (relative error O(δ)). */
    {
        const float a[2] = {0.0f, -1.0f};
        const float b[2] = {0.0f, -1.0f + 0x1p-20f};
        double d = 0x1p-20;
        double s = 1 / (1 + exp(1.0));  /* σ(−1) */
        double a2 = s * (1 - s), a3 = a2 * (1 - 2 * s), a4 = a2 * (1 - 6 * s + 6 * s * s);
        double kl_pq = a2 * d * d / 2 + a3 * d * d * d / 6 + a4 * d * d * d * d / 24;
        double sq = 1 / (1 + exp(1.0 - d));  /* σ(−1 + δ) */
        double b2 = sq * (1 - sq), b3 = b2 * (1 - 2 * sq), b4 = b2 * (1 - 6 * sq + 6 * sq * sq);
        double kl_qp = b2 * d * d / 2 - b3 * d * d * d / 6 + b4 * d * d * d * d / 24;
        double js = a2 * d * d / 8;
        stats_compare_rows(a, b, 2, -1, &r);
        CHECK(rel_close(r.kl_arm_ref, kl_pq, 1e-9), "tiny diff KL(arm||ref) %.17g vs %.17g", r.kl_arm_ref, kl_pq);
        CHECK(rel_close(r.kl_ref_arm, kl_qp, 1e-9), "tiny diff KL(ref||arm) %.17g vs %.17g", r.kl_ref_arm, kl_qp);
        CHECK(rel_close(r.js, js, 1e-5), "tiny diff JS %.17g vs %.17g", r.js, js);
        CHECK(isnan(r.nll_arm) && isnan(r.nll_ref), "next = -1 gives NAN NLL");
    }

    /* One-hot (other logits −200: p = e⁻²⁰⁰ ≈ 1e-87) vs uniform over 4. */
    {
        const float oh[4] = {0, -200, -200, -200}, un[4] = {1, 1, 1, 1};
        double l4 = log(4.0);
        stats_compare_rows(oh, un, 4, 0, &r);
        CHECK(rel_close(r.kl_arm_ref, l4, 1e-12), "KL(one-hot||uniform) = ln 4: %.17g", r.kl_arm_ref);
        CHECK(rel_close(r.kl_ref_arm, 150.0 - l4, 1e-12), "KL(uniform||one-hot) = 150 - ln 4: %.17g", r.kl_ref_arm);
        double js = 0.5 * log(1.6) + 0.5 * (0.25 * log(0.4) + 0.75 * log(2.0));
        CHECK(rel_close(r.js, js, 1e-12), "JS(one-hot, uniform) %.17g vs %.17g", r.js, js);
        CHECK(rel_close(r.entropy_ref, l4, 1e-12), "entropy(uniform) = ln 4");
        CHECK(r.gap_ref == 0.0 && r.top1_ref == 0, "uniform: gap 0, top-1 lowest id");
        CHECK(r.gap_arm == 200.0, "one-hot gap 200");
        CHECK(rel_close(r.nll_ref, l4, 1e-12) && fabs(r.nll_arm) < 1e-80, "NLL one-hot 0, uniform ln 4");

        /* exact zeros: exp(−1e30) underflows, p·ln p must still give 0 */
        const float hard[4] = {0, -1e30f, -1e30f, -1e30f};
        stats_compare_rows(hard, un, 4, 0, &r);
        CHECK(rel_close(r.kl_arm_ref, l4, 1e-15), "KL(hard one-hot||uniform) = ln 4 (p=0 terms are 0)");
        CHECK(isfinite(r.kl_ref_arm) && r.kl_ref_arm > 7e29, "KL(uniform||hard one-hot) finite and huge");
        stats_compare_rows(hard, hard, 4, 0, &r);
        CHECK(r.kl_arm_ref == 0.0 && r.kl_ref_arm == 0.0 && r.js == 0.0, "hard one-hot vs itself = 0");
        /* disjoint support: JS = ln 2 */
        const float x[2] = {0, -1e30f}, y[2] = {-1e30f, 0};
        stats_compare_rows(x, y, 2, -1, &r);
        CHECK(r.js == M_LN2, "disjoint supports: JS = ln 2 exactly (%.17g)", r.js);
    }

    /* Ties -> lowest id; NaN / inf rows -> -1 with out zeroed. */
    {
        const float t[5] = {1, 3, 2, 3, -1};
        stats_compare_rows(t, t, 5, 2, &r);
        CHECK(r.top1_arm == 1 && r.top1_ref == 1, "tie: top-1 = lowest id (%d)", r.top1_arm);
        CHECK(r.gap_ref == 0.0, "tie: gap 0");
        float bad[3] = {0, NAN, 1};
        const float ok3[3] = {0, 0, 1};
        memset(&r, 0x55, sizeof r);
        CHECK(stats_compare_rows(bad, ok3, 3, 0, &r) == -1, "NaN in arm row -> -1");
        stats_row zero;
        memset(&zero, 0, sizeof zero);
        CHECK(memcmp(&r, &zero, sizeof r) == 0, "NaN row: out zeroed");
        CHECK(stats_compare_rows(ok3, bad, 3, 0, &r) == -1, "NaN in ref row -> -1");
        bad[1] = INFINITY;
        CHECK(stats_compare_rows(ok3, bad, 3, 0, &r) == -1, "inf in ref row -> -1");
        CHECK(stats_compare_rows(ok3, ok3, 3, 3, &r) == -1, "next >= n_vocab -> -1");
        CHECK(stats_compare_rows(ok3, ok3, 0, -1, &r) == -1, "n_vocab 0 -> -1");
        const float one[1] = {4};
        CHECK(stats_compare_rows(one, one, 1, 0, &r) == 0 && isnan(r.gap_ref) && r.nll_ref == 0.0,
              "n_vocab 1: gap NAN, NLL 0");
    }
}

static void test_rows_random(void) {
    enum { N = 262144 };
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *c = malloc(N * sizeof *c);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 7);
    for (int i = 0; i < N; i++) {
        a[i] = (float)(3.0 * gsl_ran_gaussian(rng, 1.0));
        if (i % 997 == 0) a[i] = -1e4f;   /* deep underflow */
        if (i == 123) a[i] = 25.0f;       /* a dominant token */
        b[i] = a[i] + (float)(0.05 * gsl_ran_gaussian(rng, 1.0));
        c[i] = (float)(2.0 * gsl_ran_gaussian(rng, 1.0));
    }
    stats_row r, s;

    /* identical rows: exactly zero, bit for bit */
    stats_compare_rows(a, a, N, 5, &r);
    CHECK(r.kl_arm_ref == 0.0 && !signbit(r.kl_arm_ref), "identical 262144-rows: KL(arm||ref) is +0.0 exactly");
    CHECK(r.kl_ref_arm == 0.0 && !signbit(r.kl_ref_arm), "identical rows: KL(ref||arm) is +0.0 exactly");
    CHECK(r.js == 0.0, "identical rows: JS is 0.0 exactly");
    CHECK(r.nll_arm == r.nll_ref && r.top1_arm == 123 && r.gap_arm == r.gap_ref, "identical rows: NLL, top-1, gap equal");

    /* against the long-double textbook sums. The spec rounds z = x − max to f32 (relative
     * error 2⁻²⁴ ≈ 6e-8 of |z|), which the long-double reference does not: allow 1e-7. */
    ref_metrics m = naive_metrics(a, b, N);
    stats_compare_rows(a, b, N, -1, &r);
    CHECK(rel_close(r.kl_arm_ref, (double)m.kl_ar, 1e-7), "262144 near rows: KL(arm||ref) %.12g vs %.12Lg", r.kl_arm_ref, m.kl_ar);
    CHECK(rel_close(r.kl_ref_arm, (double)m.kl_ra, 1e-7), "near rows: KL(ref||arm) %.12g vs %.12Lg", r.kl_ref_arm, m.kl_ra);
    CHECK(rel_close(r.js, (double)m.js, 1e-7), "near rows: JS %.12g vs %.12Lg", r.js, m.js);
    CHECK(rel_close(r.entropy_ref, (double)m.ent, 1e-7), "near rows: entropy %.12g vs %.12Lg", r.entropy_ref, m.ent);

    m = naive_metrics(a, c, N);
    stats_compare_rows(a, c, N, 77, &r);
    CHECK(rel_close(r.kl_arm_ref, (double)m.kl_ar, 1e-7), "far rows: KL(arm||ref) %.12g vs %.12Lg", r.kl_arm_ref, m.kl_ar);
    CHECK(rel_close(r.kl_ref_arm, (double)m.kl_ra, 1e-7), "far rows: KL(ref||arm) %.12g vs %.12Lg", r.kl_ref_arm, m.kl_ra);
    CHECK(rel_close(r.js, (double)m.js, 1e-7), "far rows: JS %.12g vs %.12Lg", r.js, m.js);

    /* symmetry: JS(a,c) == JS(c,a) bit for bit; KL(a‖c) from either side identical */
    stats_compare_rows(c, a, N, 77, &s);
    CHECK(r.js == s.js, "JS symmetric exactly");
    CHECK(r.kl_arm_ref == s.kl_ref_arm && r.kl_ref_arm == s.kl_arm_ref, "KL directions swap exactly");
    CHECK(r.nll_arm == s.nll_ref && r.gap_arm == s.gap_ref, "NLL / gap swap exactly");
    /* bounds: 0 <= JS <= ln 2, JS <= (KL(P‖Q) + KL(Q‖P))/4 (convexity: KL(P‖M) <= KL(P‖Q)/2) */
    CHECK(r.js >= 0.0 && r.js <= M_LN2, "0 <= JS <= ln 2");
    CHECK(r.js <= 0.25 * (r.kl_arm_ref + r.kl_ref_arm), "JS <= (KL+KL')/4");
    CHECK(r.kl_arm_ref >= 0 && r.kl_ref_arm >= 0, "KL >= 0");

    /* one prepared reference shared by several arms (the sweep's path) gives the one-shot results
     * bit for bit, in any order of the arms, and is not changed by using it */
    {
        double *lp = malloc(2 * (size_t)N * sizeof *lp);
        stats_ref pr;
        stats_row one_b, one_c, pre_b, pre_c, pre_b2;
        CHECK(lp && stats_ref_prepare(a, N, lp, lp + N, &pr) == 0, "prepare a 262144-row reference");
        stats_compare_rows(b, a, N, 77, &one_b);
        stats_compare_rows(c, a, N, -1, &one_c);
        int rc = stats_compare_prepared(c, &pr, -1, &pre_c);
        rc |= stats_compare_prepared(b, &pr, 77, &pre_b);
        rc |= stats_compare_prepared(b, &pr, 77, &pre_b2);
        CHECK(rc == 0, "prepared comparisons succeed");
        CHECK(!memcmp(&one_b, &pre_b, sizeof one_b) && !memcmp(&one_c, &pre_c, sizeof one_c) &&
              !memcmp(&pre_b, &pre_b2, sizeof pre_b), "prepared reference == one-shot comparison, bit for bit");
        float keep = b[9];
        b[9] = NAN;
        CHECK(stats_compare_prepared(b, &pr, 0, &pre_b) == -1, "prepared: NaN in the arm row -> -1");
        b[9] = keep;
        CHECK(stats_compare_prepared(b, &pr, N, &pre_b) == -1, "prepared: next >= n_vocab -> -1");
        float keep_a = a[17];
        a[17] = INFINITY;
        CHECK(stats_ref_prepare(a, N, lp, lp + N, &pr) == -1 && pr.row == NULL, "prepare: inf in the reference -> -1");
        a[17] = keep_a;
        free(lp);
    }

    /* a constant shift of the logits leaves the distribution: KL ~ rounding of z only */
    for (int i = 0; i < N; i++) c[i] = a[i] + 0.5f;  /* exact in f32 for these magnitudes? not always */
    stats_compare_rows(c, a, N, -1, &r);
    CHECK(r.kl_arm_ref < 1e-12 && r.js < 1e-12, "shifted logits: KL %.3g, JS %.3g below 1e-12", r.kl_arm_ref, r.js);

    gsl_rng_free(rng);
    free(a); free(b); free(c);
}

static void test_percentiles(void) {
    double x[5] = {50, 10, 40, 20, 30}, p[STATS_N_PCT];
    /* sorted 10..50, h = 4f: 99.9 -> 3.996 -> 40 + 0.996*10 ... */
    const double want[STATS_N_PCT] = {50, 49.96, 49.6, 48, 46, 30, 14, 12, 10.4, 10.04, 10};
    CHECK(stats_percentiles(x, 5, p) == 0, "percentiles: rc 0");
    int ok = 1;
    for (int k = 0; k < STATS_N_PCT; k++) ok &= fabs(p[k] - want[k]) < 1e-9;
    CHECK(ok, "percentiles of {10..50}: %g %g %g %g %g %g %g %g %g %g %g", p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10]);
    CHECK(x[0] == 50 && x[1] == 10, "percentiles: input not modified");
    double one = 7;
    stats_percentiles(&one, 1, p);
    CHECK(p[0] == 7 && p[5] == 7 && p[10] == 7, "percentiles of one value");
    double bad[2] = {1, NAN};
    CHECK(stats_percentiles(bad, 2, p) == -1 && isnan(p[0]), "percentiles: NaN -> -1");
    CHECK(stats_percentiles(x, 0, p) == -1, "percentiles: n = 0 -> -1");
}

static void test_bootstrap(void) {
    CHECK(stats_default_block(0) == 1 && stats_default_block(1) == 1 && stats_default_block(8) == 2 &&
          stats_default_block(9) == 3 && stats_default_block(27) == 3 && stats_default_block(28) == 4 &&
          stats_default_block(1000) == 10 && stats_default_block(1001) == 11,
          "default block = ceil(n^(1/3))");
    stats_ci ci, ci2;
    double c[6] = {2.5, 2.5, 2.5, 2.5, 2.5, 2.5};
    stats_mean_ci(c, 6, 0, 200, 1, &ci);
    CHECK(ci.est == 2.5 && ci.lo == 2.5 && ci.hi == 2.5, "constant sample: CI is the point");
    double x[7] = {1, 9, 3, 7, 4, 8, 2};
    stats_mean_ci(x, 7, 7, 300, 1, &ci);
    CHECK(ci.lo == ci.est && ci.hi == ci.est && fabs(ci.est - 34.0 / 7) < 1e-12,
          "block = n: every resample is the sample, CI = [mean, mean]");
    stats_median_ci(x, 7, 7, 300, 1, &ci);
    CHECK(ci.est == 4 && ci.lo == 4 && ci.hi == 4, "median, block = n: CI = [4, 4]");
    stats_mean_ci(x, 1, 0, 300, 1, &ci);
    CHECK(ci.est == 1 && ci.lo == 1 && ci.hi == 1, "n = 1: CI = [x, x]");
    /* {0, 1}, b = 1: resample means are 0, 1/2, 1 with probability 1/4, 1/2, 1/4, so the
     * 2.5% and 97.5% points of 1000 resamples are 0 and 1 (far more than 26 of each). */
    double zo[2] = {0, 1};
    stats_mean_ci(zo, 2, 1, 1000, 3, &ci);
    CHECK(ci.est == 0.5 && ci.lo == 0.0 && ci.hi == 1.0, "{0,1}: CI [0, 1] (%g, %g)", ci.lo, ci.hi);

    /* iid normal: half-width ~ 1.96 s/sqrt(n) (mean), 1.96 sqrt(pi/2) s/sqrt(n) (median) */
    enum { N = 2000 };
    double *g = malloc(N * sizeof *g), *ar = malloc(N * sizeof *ar);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 11);
    double prev = 0;
    for (int i = 0; i < N; i++) {
        g[i] = gsl_ran_gaussian(rng, 1.0);
        prev = 0.9 * prev + g[i];
        ar[i] = prev;
    }
    double mean = 0, ss = 0;
    for (int i = 0; i < N; i++) mean += g[i];
    mean /= N;
    for (int i = 0; i < N; i++) ss += (g[i] - mean) * (g[i] - mean);
    double se = sqrt(ss / (N - 1) / N);
    stats_mean_ci(g, N, 1, 1000, STATS_BOOT_SEED, &ci);
    double half = (ci.hi - ci.lo) / 2;
    CHECK(fabs(half / (1.96 * se) - 1) < 0.15, "iid mean CI half-width %.4g vs 1.96 se %.4g", half, 1.96 * se);
    CHECK(ci.lo < mean && mean < ci.hi && fabs(ci.est - mean) < 1e-12, "iid mean inside its CI");
    stats_median_ci(g, N, 1, 1000, STATS_BOOT_SEED, &ci);
    half = (ci.hi - ci.lo) / 2;
    CHECK(fabs(half / (1.96 * sqrt(M_PI / 2) * se) - 1) < 0.3, "iid median CI half-width %.4g vs %.4g", half, 1.96 * sqrt(M_PI / 2) * se);
    /* reproducible, seed-dependent */
    stats_mean_ci(g, N, 0, 1000, 42, &ci);
    stats_mean_ci(g, N, 0, 1000, 42, &ci2);
    CHECK(ci.lo == ci2.lo && ci.hi == ci2.hi, "same seed: identical CI");
    stats_mean_ci(g, N, 0, 1000, 43, &ci2);
    CHECK(ci.lo != ci2.lo || ci.hi != ci2.hi, "other seed: different CI");

    /* AR(1), phi = 0.9: the iid bootstrap is too narrow by ~sqrt((1+phi)/(1-phi)) = 4.36;
     * blocks recover most of it. */
    stats_ci iid, blk, big;
    stats_mean_ci(ar, N, 1, 1000, STATS_BOOT_SEED, &iid);
    stats_mean_ci(ar, N, 0, 1000, STATS_BOOT_SEED, &blk);  /* b = 13 */
    stats_mean_ci(ar, N, 100, 1000, STATS_BOOT_SEED, &big);
    double w1 = iid.hi - iid.lo, w13 = blk.hi - blk.lo, w100 = big.hi - big.lo;
    CHECK(w13 > 2.0 * w1, "AR(1): block CI wider than iid (%.3g vs %.3g)", w13, w1);
    CHECK(w100 / w1 > 3.0 && w100 / w1 < 5.5, "AR(1): b = 100 widens by %.2f (theory 4.36)", w100 / w1);

    double bad[3] = {1, NAN, 2};
    CHECK(stats_mean_ci(bad, 3, 0, 10, 1, &ci) == -1 && isnan(ci.est), "NaN sample -> -1");
    CHECK(stats_mean_ci(x, 0, 0, 10, 1, &ci) == -1, "n = 0 -> -1");
    CHECK(stats_median_ci(x, 7, 0, 0, 1, &ci) == -1, "n_boot = 0 -> -1");
    gsl_rng_free(rng);
    free(g);
    free(ar);
}

static void test_wilson(void) {
    const double z = 1.959963984540054, z2 = z * z;
    stats_ci ci;
    stats_wilson(10, 10, &ci);
    CHECK(ci.est == 1 && fabs(ci.lo - 1 / (1 + z2 / 10)) < 1e-12 && ci.hi == 1.0,
          "Wilson 10/10 = [%.6f, 1] (0.72246)", ci.lo);
    stats_wilson(0, 10, &ci);
    CHECK(fabs(ci.lo) < 1e-15 && fabs(ci.hi - (z2 / 10) / (1 + z2 / 10)) < 1e-12, "Wilson 0/10 upper %.6f (0.27753)", ci.hi);
    stats_wilson(5, 10, &ci);
    double h = z / (1 + z2 / 10) * sqrt(0.025 + z2 / 400);
    CHECK(fabs(ci.lo - (0.5 - h)) < 1e-12 && fabs(ci.hi - (0.5 + h)) < 1e-12, "Wilson 5/10 = [%.4f, %.4f] (0.2366, 0.7634)", ci.lo, ci.hi);
    CHECK(fabs(ci.lo - 0.2366) < 1e-4, "Wilson 5/10 lower matches the published 0.2366");
    CHECK(stats_wilson(1, 0, &ci) == -1 && stats_wilson(3, 2, &ci) == -1, "Wilson bad input -> -1");
}

static void test_slope(void) {
    stats_fit f;
    const double x[3] = {1, 2, 3}, kl[3] = {10, 100, 10000};
    stats_log10_slope(x, kl, 3, &f);
    /* y = 1, 2, 4: slope Sxy/Sxx = 3/2; SSE = 1/6; se = sqrt(SSE/(n-2)/Sxx) = sqrt(1/12); t(.975,1) */
    double t1 = 12.706204736174698, se = sqrt(1.0 / 12);
    CHECK(fabs(f.slope - 1.5) < 1e-12 && fabs(f.intercept + 2.0 / 3) < 1e-12, "slope 1.5, intercept -2/3");
    CHECK(fabs(f.lo - (1.5 - t1 * se)) < 1e-9 && fabs(f.hi - (1.5 + t1 * se)) < 1e-9,
          "slope CI [%.6f, %.6f] = 1.5 -/+ 12.7062*0.288675", f.lo, f.hi);
    CHECK(fabs(f.r2 - 27.0 / 28) < 1e-12 && f.n == 3 && f.n_floored == 0, "r2 = 27/28");
    const double x4[4] = {1, 2, 3, 4}, k4[4] = {0, -1, 1e-10, 1e-8};
    stats_log10_slope(x4, k4, 4, &f);
    CHECK(f.n_floored == 2 && fabs(f.slope - 1.4) < 1e-12, "floored at 1e-12: slope 7/5 (%g), 2 floored", f.slope);
    const double xn[4] = {1, 2, NAN, 3}, kn[4] = {10, 100, 5, 10000};
    stats_log10_slope(xn, kn, 4, &f);
    CHECK(fabs(f.slope - 1.5) < 1e-12 && f.n == 3, "NaN pair skipped");
    CHECK(stats_log10_slope(x, kl, 2, &f) == 0 && isnan(f.slope) && isnan(f.lo), "n = 2 -> NAN");
    const double xs[3] = {5, 5, 5};
    CHECK(stats_log10_slope(xs, kl, 3, &f) == 0 && isnan(f.slope), "all x equal -> NAN");
}

static void test_spearman(void) {
    stats_ci r;
    const double x[5] = {1, 2, 3, 4, 5}, y[5] = {2, 1, 4, 3, 5};
    stats_spearman(x, y, 5, &r);
    CHECK(fabs(r.est - 0.8) < 1e-12, "Spearman 1 - 6*4/(5*24) = 0.8 (%g)", r.est);
    double z = atanh(0.8), s = sqrt(1.06 / 2), q = 1.959963984540054;
    CHECK(fabs(r.lo - tanh(z - q * s)) < 1e-9 && fabs(r.hi - tanh(z + q * s)) < 1e-9, "Fisher-z CI");
    const double cube[5] = {1, 8, 27, 64, 125}, rev[5] = {9, 7, 5, 3, 1};
    stats_spearman(x, cube, 5, &r);
    CHECK(fabs(r.est - 1) < 1e-12, "monotone: rho = 1");
    stats_spearman(x, rev, 5, &r);
    CHECK(fabs(r.est + 1) < 1e-12, "reversed: rho = -1");
    /* ties: y ranks 1.5 1.5 3 4 against 1 2 3 4: 4.5 / sqrt(5 * 4.5) */
    const double xt[4] = {1, 2, 3, 4}, yt[4] = {1, 1, 2, 3};
    stats_spearman(xt, yt, 4, &r);
    CHECK(fabs(r.est - 4.5 / sqrt(22.5)) < 1e-12, "ties by average rank: %.6f (0.948683)", r.est);
    const double xn[6] = {1, 2, NAN, 3, 4, 5}, yn[6] = {2, 1, 0, 4, 3, 5};
    stats_spearman(xn, yn, 6, &r);
    CHECK(fabs(r.est - 0.8) < 1e-12 && r.n == 5, "NaN pairs skipped");
    const double k[3] = {1, 1, 1};
    stats_spearman(x, k, 3, &r);
    CHECK(isnan(r.est), "constant variable -> NAN");
}

static void test_near_tie(void) {
    const double gap[5] = {0.05, 2, 0.01, 3, 0.5}, kl[5] = {0.4, 0.1, 0.2, 0.05, 0.25};
    const int same[5] = {0, 0, 1, 1, 0};
    stats_neartie t;
    stats_near_tie(gap, same, kl, 5, 0.1, &t);
    CHECK(t.n == 5 && t.n_near == 2 && t.n_flips == 3 && t.n_flips_near == 1, "near-tie counts");
    CHECK(fabs(t.share_flips_near - 1.0 / 3) < 1e-12, "share of flips at near ties 1/3");
    CHECK(fabs(t.share_kl_near - 0.6) < 1e-12 && fabs(t.share_pos_near - 0.4) < 1e-12, "share of KL 0.6, of positions 0.4");
    const int all_same[5] = {1, 1, 1, 1, 1};
    stats_near_tie(gap, all_same, kl, 5, 0.1, &t);
    CHECK(isnan(t.share_flips_near), "no flips -> NAN share");
}

static void test_km(void) {
    stats_km km;
    const int fork[6] = {7, 2, 32, 5, 2, 32}, cen[6] = {0, 0, 1, 0, 0, 1};
    CHECK(stats_kaplan_meier(fork, cen, 6, 32, &km) == 0, "KM rc 0");
    CHECK(km.n_steps == 3 && km.time[0] == 2 && km.time[1] == 5 && km.time[2] == 7, "KM event times 2 5 7");
    CHECK(km.at_risk[0] == 6 && km.at_risk[1] == 4 && km.at_risk[2] == 3 && km.events[0] == 2, "KM at risk 6 4 3");
    CHECK(fabs(km.surv[0] - 4.0 / 6) < 1e-12 && fabs(km.surv[1] - 0.5) < 1e-12 && fabs(km.surv[2] - 1.0 / 3) < 1e-12,
          "KM S = 2/3, 1/2, 1/3");
    double z = 1.959963984540054;
    double sd0 = (4.0 / 6) * sqrt(1.0 / 12), sd1 = 0.5 * sqrt(1.0 / 6), sd2 = (1.0 / 3) * sqrt(1.0 / 3);
    CHECK(fabs(km.lo[0] - (4.0 / 6 - z * sd0)) < 1e-12 && km.hi[0] == 1.0, "Greenwood band at t=2 (hi clamped to 1)");
    CHECK(fabs(km.hi[1] - (0.5 + z * sd1)) < 1e-12 && fabs(km.hi[2] - (1.0 / 3 + z * sd2)) < 1e-12 &&
          km.lo[2] == 0.0, "Greenwood at t=5,7 (lo at 7 clamped to 0)");
    CHECK(km.median == 5 && km.median_lo == 2 && isnan(km.median_hi), "median 5, CI [2, not reached]");
    CHECK(fabs(km.surv_end - 1.0 / 3) < 1e-12 && km.n_censored == 2 && km.n_events == 4, "S(end) 1/3, 2 censored");
    CHECK(stats_km_surv_at(&km, 1) == 1.0 && fabs(stats_km_surv_at(&km, 4) - 4.0 / 6) < 1e-12 &&
          fabs(stats_km_surv_at(&km, 99) - 1.0 / 3) < 1e-12, "S(t) lookup");
    stats_km_free(&km);

    const int f2[4] = {3, 32, 32, 32}, c2[4] = {0, 1, 1, 1};
    stats_kaplan_meier(f2, c2, 4, 32, &km);
    CHECK(isnan(km.median) && km.surv_end == 0.75, "mostly censored: median NAN, S(N) = 0.75");
    stats_km_free(&km);
    const int f3[2] = {0, 0}, c3[2] = {0, 0};
    stats_kaplan_meier(f3, c3, 2, 32, &km);
    CHECK(km.surv[0] == 0 && km.lo[0] == 0 && km.hi[0] == 0 && km.median == 0, "all fork at 0: S = 0, CI [0,0]");
    stats_km_free(&km);
    const int fb[2] = {5, 31}, cb[2] = {0, 1};
    CHECK(stats_kaplan_meier(fb, cb, 2, 32, &km) == -1, "censored with fork != N -> -1");
    stats_km_free(&km);
    const int fc[2] = {5, 32}, cc[2] = {0, 0};
    CHECK(stats_kaplan_meier(fc, cc, 2, 32, &km) == -1, "uncensored fork = N -> -1");
    stats_km_free(&km);
    const int fd[2] = {5, 33}, cd[2] = {0, 1};
    CHECK(stats_kaplan_meier(fd, cd, 2, 32, &km) == -1, "fork > N -> -1");
    stats_km_free(&km);
}

/* stats_token_logprob against a closed form and against stats_compare_rows's NLL; the
 * repetition rate of hand-made streams. */
static void test_logprob_repeat(void) {
    float row[4] = { 0.0f, (float)log(3.0), -INFINITY, 1.0f };
    double lp;
    CHECK(stats_token_logprob(row, 4, 1, &lp) == -1 && isnan(lp), "a non-finite logit is refused");
    row[2] = -50.0f;
    float two[2] = { 0.0f, (float)log(3.0) };
    CHECK(stats_token_logprob(two, 2, 1, &lp) == 0 && fabs(lp - log(0.75)) < 1e-7,
          "ln p of [0, ln 3] at id 1 is ln 0.75 (%.9f)", lp);
    CHECK(stats_token_logprob(two, 2, 2, &lp) == -1 && stats_token_logprob(NULL, 2, 0, &lp) == -1,
          "an id outside the row and a NULL row are refused");
    float r[300];
    uint64_t s = 3;
    for (int i = 0; i < 300; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        r[i] = (float)((double)(s >> 11) * 0x1.0p-53 * 20 - 10);
    }
    stats_row out;
    int same = 1;
    for (int t = 0; t < 300; t += 37) {
        stats_compare_rows(r, r, 300, t, &out);
        same &= stats_token_logprob(r, 300, t, &lp) == 0 && -lp == out.nll_arm;
    }
    CHECK(same, "stats_token_logprob is exactly minus stats_compare_rows's NLL");
    int32_t a[9] = { 1, 2, 3, 4, 1, 2, 3, 4, 1 }, b[6] = { 5, 5, 5, 5, 5, 5 }, c[5] = { 1, 2, 3, 4, 5 };
    CHECK(stats_repeat_rate(a, 9, 4) == 2.0 / 6, "1234 1234 1: 2 of 6 windows repeat (%g)", stats_repeat_rate(a, 9, 4));
    CHECK(stats_repeat_rate(b, 6, 4) == 2.0 / 3, "a constant stream: all windows but the first repeat");
    CHECK(stats_repeat_rate(c, 5, 4) == 0 && isnan(stats_repeat_rate(c, 3, 4)), "no repeat: 0; too short: NaN");
}

/* ---- part D: dependent series, comparisons, power ---- */

/* x [n] = an AR(1) path (unit innovations, stationary start). */
static void ar1_path(gsl_rng *rng, double phi, double *x, size_t n) {
    double v = gsl_ran_gaussian(rng, 1.0) / sqrt(1.0 - phi * phi);
    for (size_t i = 0; i < n; i++) {
        if (i) v = phi * v + gsl_ran_gaussian(rng, 1.0);
        x[i] = v;
    }
}

static int cmp_size(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static void test_pw_block(void) {
    stats_pw pw;
    /* Worked by hand: x = +1, −1, … (n = 16, mean 0, R(0) = 1, R(k) = (−1)^k (16−k)/16).
     * Band 2·sqrt(log10(16)/16) = 0.549: |ρ(k)| < band first for k >= 8, so m̂ = 7; K_n = 5,
     * M_max = 4 + 5 = 9, M = min(14, 9) = 9; λ(k/9) = 1, 1, 1, 1, 8/9, 6/9, 4/9, 2/9, 0. */
    double alt[16];
    for (int i = 0; i < 16; i++) alt[i] = i % 2 ? -1.0 : 1.0;
    const double lam[10] = {1, 1, 1, 1, 1, 8.0 / 9, 6.0 / 9, 4.0 / 9, 2.0 / 9, 0};
    double g = 1, G = 0;
    for (int k = 1; k <= 9; k++) {
        double rk = (k % 2 ? -1.0 : 1.0) * (16 - k) / 16.0;
        g += 2 * lam[k] * rk;
        G += 2 * lam[k] * k * rk;
    }
    /* g = 1/12, G = −1/12 by hand; b = (1.5 (G/g)²)^(1/3) 16^(1/3) = 2.884 -> 3 */
    CHECK(fabs(g - 1.0 / 12) < 1e-12 && fabs(G + 1.0 / 12) < 1e-12, "hand sums g = 1/12, G = -1/12");
    int rc = stats_pw_block(alt, 16, &pw);
    CHECK(rc == 0 && pw.m_hat == 7 && pw.M == 9, "alternating n = 16: m_hat %zu (7), M %zu (9)", pw.m_hat, pw.M);
    CHECK(fabs(pw.g - g) < 1e-12 && fabs(pw.G - G) < 1e-12, "alternating: g %.15g, G %.15g", pw.g, pw.G);
    CHECK(fabs(pw.b_raw - cbrt(1.5) * cbrt(16.0)) < 1e-12 && pw.block == 3 && pw.b_max == 6,
          "alternating: b_raw %.6f (2.884), block %zu (3), b_max %zu (6)", pw.b_raw, pw.block, pw.b_max);

    double c[50];
    for (int i = 0; i < 50; i++) c[i] = 2.5;
    CHECK(stats_pw_block(c, 50, &pw) == 0 && pw.block == 1, "constant series: block 1");
    CHECK(stats_pw_block(alt, 3, &pw) == 0 && pw.block == 1, "n = 3: block 1");
    c[7] = NAN;
    CHECK(stats_pw_block(c, 50, &pw) == -1 && pw.block == 0, "NaN refused");
    CHECK(stats_pw_block(NULL, 5, &pw) == -1 && stats_pw_block(alt, 0, &pw) == -1 &&
          stats_pw_block(alt, 5, NULL) == -1, "NULL / n = 0 refused");

    /* A sine of period 32, n = 200: b_raw 73 is above the cap ceil(min(42.4, 66.7)) = 43;
     * of period 4: the flat-top ĝ comes out negative, block 1. */
    enum { N = 4000, S = 15 };
    double *x = malloc(N * sizeof *x);
    for (int i = 0; i < 200; i++) x[i] = sin(2 * M_PI * i / 32);
    CHECK(stats_pw_block(x, 200, &pw) == 0 && pw.b_raw > 43 && pw.block == 43 && pw.b_max == 43,
          "sine, period 32: b_raw %.1f capped at b_max = 43 (%zu)", pw.b_raw, pw.block);
    for (int i = 0; i < 200; i++) x[i] = sin(2 * M_PI * i / 4);
    CHECK(stats_pw_block(x, 200, &pw) == 0 && pw.g < 0 && pw.block == 1 && pw.b_raw == 0,
          "sine, period 4: g %.3g < 0 -> block 1", pw.g);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 5);

    /* AR(1), theory (unit innovations): G/g = 2 phi/(1 − phi²), so
     * b = (1.5 (G/g)²)^(1/3) n^(1/3): 22.0 (phi 0.5) and 81.3 (phi 0.9) at n = 4000.
     * White noise: G = 0, block 1. Medians over S series. */
    size_t b5[S], b9[S], b0[S];
    int larger = 1;
    for (int s = 0; s < S; s++) {
        ar1_path(rng, 0.5, x, N);
        stats_pw_block(x, N, &pw);
        b5[s] = pw.block;
        ar1_path(rng, 0.9, x, N);
        stats_pw_block(x, N, &pw);
        b9[s] = pw.block;
        larger &= b9[s] > b5[s];
        for (int i = 0; i < N; i++) x[i] = gsl_ran_gaussian(rng, 1.0);
        stats_pw_block(x, N, &pw);
        b0[s] = pw.block;
    }
    qsort(b5, S, sizeof *b5, cmp_size);
    qsort(b9, S, sizeof *b9, cmp_size);
    qsort(b0, S, sizeof *b0, cmp_size);
    double t5 = cbrt(1.5 * pow(1.0 / 0.75, 2) * N), t9 = cbrt(1.5 * pow(1.8 / 0.19, 2) * N);
    CHECK(fabs(b5[S / 2] / t5 - 1) < 0.35, "AR(1) 0.5, n = 4000: median block %zu vs theory %.1f", b5[S / 2], t5);
    CHECK(fabs(b9[S / 2] / t9 - 1) < 0.35, "AR(1) 0.9, n = 4000: median block %zu vs theory %.1f", b9[S / 2], t9);
    CHECK(larger, "phi = 0.9 gives a longer block than phi = 0.5 on every one of %d pairs", S);
    CHECK(b0[S / 2] == 1 && b0[S - 1] <= 4, "white noise: median block %zu (1), max %zu (<= 4)", b0[S / 2], b0[S - 1]);
    gsl_rng_free(rng);
    free(x);
}

static void test_circular(void) {
    stats_boot o, o2;
    enum { B = 20000 };
    double *t = malloc(B * sizeof *t);

    /* Exact moments of the circular bootstrap mean, b | n: the k = n/b blocks are iid uniform
     * over the n circular blocks, so E* = x̄ and Var* = (1/k)·(1/n) Σ_s (B̄_s − x̄)². */
    enum { N = 24, BL = 4 };
    double x[N];
    for (int i = 0; i < N; i++) x[i] = sin(0.7 * i) + 0.05 * i * i;
    double mean = 0;
    for (int i = 0; i < N; i++) mean += x[i];
    mean /= N;
    double v = 0;
    for (int s = 0; s < N; s++) {
        double bm = 0;
        for (int j = 0; j < BL; j++) bm += x[(s + j) % N];
        bm /= BL;
        v += (bm - mean) * (bm - mean);
    }
    v /= (double)N * (N / BL);
    int rc = stats_mean_ci_circular(x, N, BL, B, 9, t, &o);
    double m = 0, ss = 0;
    for (int r = 0; r < B; r++) m += t[r];
    m /= B;
    for (int r = 0; r < B; r++) ss += (t[r] - m) * (t[r] - m);
    ss /= B - 1;
    CHECK(rc == 0 && fabs(o.est - mean) < 1e-12 && o.block == BL, "circular: est = mean, block as given");
    CHECK(fabs(m - mean) < 4 * sqrt(v / B), "circular: E* %.6f = mean %.6f (every position weighs the same)", m, mean);
    /* ... spread by t_{0.975, k−1} / z_{0.975} (the small-sample widening, docs/DESIGN.md §3.6.1) */
    double wf = gsl_cdf_tdist_Pinv(0.975, N / BL - 1) / gsl_cdf_ugaussian_Pinv(0.975);
    CHECK(fabs(ss / (v * wf * wf) - 1) < 0.05, "circular: Var* %.6g vs exact %.6g x (t/z)^2 %.4f", ss, v, wf * wf);
    CHECK(fabs(o.se - sqrt(ss)) < 1e-9 * sqrt(ss), "se = sd of the resampled means");
    int sorted = 1;
    for (int r = 1; r < B; r++) sorted &= t[r - 1] <= t[r];
    CHECK(sorted && o.lo <= o.lo90 && o.lo90 < o.hi90 && o.hi90 <= o.hi && o.lo < mean && mean < o.hi,
          "boot sorted; lo <= lo90 < hi90 <= hi around the mean");

    /* the last position alone, b = 4, n = 16: circular weight 1/16 exactly (the old
     * non-circular blocks reach it only from start 12: weight 1/13 of a block's, 0.0192) */
    double e[16] = {0};
    e[15] = 1;
    stats_mean_ci_circular(e, 16, 4, B, 10, t, &o);
    m = 0;
    for (int r = 0; r < B; r++) m += t[r];
    m /= B;
    CHECK(fabs(m - 1.0 / 16) < 0.002, "last position's weight %.4f = 1/16", m);

    /* block = n: every resample is a rotation, mean = x̄ */
    stats_mean_ci_circular(x, N, N, 200, 1, t, &o);
    CHECK(fabs(o.lo - mean) < 1e-12 && fabs(o.hi - mean) < 1e-12 && o.se < 1e-12, "block = n: CI = [mean, mean]");
    stats_mean_ci_circular(x, N, 5 * N, 200, 1, NULL, &o);
    CHECK(o.block == N, "a block longer than n is cut to n");
    stats_mean_ci_circular(x + 1, 1, 0, 200, 1, NULL, &o);
    CHECK(o.est == x[1] && o.lo == x[1] && o.hi90 == x[1] && o.se == 0 && o.p == 1 && x[1] != 0,
          "n = 1: every bound is x, p = 1");

    /* p-values: all resamples above 0 -> 2/(B+1); a series symmetric about 0 -> large */
    double pos[N];
    for (int i = 0; i < N; i++) pos[i] = 1 + 0.1 * sin(i);
    stats_mean_ci_circular(pos, N, 2, 999, 3, NULL, &o);
    CHECK(o.p == 2.0 / 1000, "a clearly positive mean: p = 2/(B+1) (%g)", o.p);
    double sym[N];
    for (int i = 0; i < N; i++) sym[i] = i % 2 ? -1 - 0.1 * i : 1 + 0.1 * (i + 1);
    stats_mean_ci_circular(sym, N, 2, 999, 3, NULL, &o);
    CHECK(fabs(o.est) < 1e-12 && o.p > 0.3, "a zero mean (pairs cancel): p = %.3f", o.p);

    /* block 0 = the Politis–White block; reproducible */
    enum { NA = 2000 };
    double *a = malloc(NA * sizeof *a), *bb = malloc(NA * sizeof *bb), *d = malloc(NA * sizeof *d);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 21);
    ar1_path(rng, 0.7, a, NA);
    ar1_path(rng, 0.7, bb, NA);
    for (int i = 0; i < NA; i++) { bb[i] = 0.5 * a[i] + bb[i]; d[i] = a[i] - bb[i]; }
    stats_pw pw;
    stats_pw_block(a, NA, &pw);
    stats_mean_ci_circular(a, NA, 0, 500, 4, NULL, &o);
    stats_mean_ci_circular(a, NA, 0, 500, 4, NULL, &o2);
    CHECK(o.block == pw.block && o.block > 1, "block 0 -> Politis-White block %zu", o.block);
    CHECK(o.lo == o2.lo && o.hi == o2.hi && o.p == o2.p, "same seed: identical");

    /* paired = the circular bootstrap of the differences, bit for bit */
    stats_paired_diff_ci(a, bb, NA, 0, 500, 4, NULL, &o);
    stats_mean_ci_circular(d, NA, 0, 500, 4, NULL, &o2);
    double ma = 0, mb = 0;
    for (int i = 0; i < NA; i++) { ma += a[i]; mb += bb[i]; }
    CHECK(o.lo == o2.lo && o.hi == o2.hi && o.lo90 == o2.lo90 && o.block == o2.block && o.p == o2.p,
          "paired: identical to the bootstrap of a − b");
    CHECK(fabs(o.est - (ma - mb) / NA) < 1e-12, "paired: est = mean(a) − mean(b)");

    /* bad input */
    double bad[3] = {1, INFINITY, 2};
    CHECK(stats_mean_ci_circular(bad, 3, 1, 10, 1, NULL, &o) == -1 && isnan(o.lo) && isnan(o.est),
          "non-finite value refused, fields NaN");
    CHECK(stats_mean_ci_circular(x, 0, 1, 10, 1, NULL, &o) == -1 &&
          stats_mean_ci_circular(x, 5, 1, 0, 1, NULL, &o) == -1 &&
          stats_mean_ci_circular(NULL, 5, 1, 10, 1, NULL, &o) == -1 &&
          stats_paired_diff_ci(a, NULL, 5, 1, 10, 1, NULL, &o) == -1, "n = 0, n_boot = 0, NULL refused");
    gsl_rng_free(rng);
    free(a);
    free(bb);
    free(d);
    free(t);
}

static void test_pvalues_holm(void) {
    const double t[10] = {-3, -2, -1, 0, 1, 2, 3, 4, 5, 6};
    /* θ0 = 0: 4 at or below, 7 at or above -> 2·5/11 */
    CHECK(fabs(stats_boot_p(t, 10, 0) - 10.0 / 11) < 1e-15, "boot p at 0 = 10/11");
    CHECK(fabs(stats_boot_p(t, 10, -2.5) - 4.0 / 11) < 1e-15, "boot p at -2.5 = 4/11");
    CHECK(fabs(stats_boot_p(t, 10, 10) - 2.0 / 11) < 1e-15, "boot p beyond all = 2/11 (never 0)");
    CHECK(stats_boot_p(t, 10, 2) == 1.0, "boot p capped at 1");
    CHECK(fabs(stats_boot_p_tost(t, 10, 4) - 4.0 / 11) < 1e-15, "TOST p, margin 4: max(1, 4)/11");
    CHECK(fabs(stats_boot_p_tost(t, 10, 7) - 1.0 / 11) < 1e-15, "TOST p, margin 7: 1/11");
    CHECK(isnan(stats_boot_p_tost(t, 10, 0)) && isnan(stats_boot_p(NULL, 10, 0)) && isnan(stats_boot_p(t, 10, NAN)),
          "bad margin / NULL / NaN null: NaN");

    /* Holm by hand: sorted 0.005 (×4 = 0.02), 0.01 (×3 = 0.03), 0.03 (×2 = 0.06), 0.04
     * (×1 = 0.04, raised to the running max 0.06). */
    double p[5] = {0.01, 0.04, NAN, 0.03, 0.005}, adj[5];
    int m = stats_holm(p, 5, adj);
    CHECK(m == 4, "Holm: 4 finite p-values");
    CHECK(fabs(adj[0] - 0.03) < 1e-15 && fabs(adj[1] - 0.06) < 1e-15 && isnan(adj[2]) &&
          fabs(adj[3] - 0.06) < 1e-15 && fabs(adj[4] - 0.02) < 1e-15,
          "Holm: %.3g %.3g %g %.3g %.3g (0.03 0.06 nan 0.06 0.02)", adj[0], adj[1], adj[2], adj[3], adj[4]);
    double q[3] = {0.5, 0.6, 0.02};
    stats_holm(q, 3, q);
    CHECK(fabs(q[2] - 0.06) < 1e-15 && q[0] == 1.0 && q[1] == 1.0, "Holm in place, capped at 1");
    double tie[2] = {0.02, 0.02};
    stats_holm(tie, 2, tie);
    CHECK(tie[0] == 0.04 && tie[1] == 0.04, "Holm: ties get the same adjusted value");
    double badp[2] = {0.1, 1.5};
    CHECK(stats_holm(badp, 2, adj) == -1 && isnan(adj[0]), "Holm: p > 1 refused");
    CHECK(stats_holm(p, 0, adj) == 0, "Holm: an empty table");
}

static void test_verdicts(void) {
    /* constructed intervals; margin 0.1 */
    CHECK(stats_verdict_ci(-0.08, -0.02, -0.075, -0.025, 0.1) == STATS_EQUIVALENT_LOWER, "lower, within the margin");
    CHECK(stats_verdict_ci(-0.3, -0.1, -0.28, -0.12, 0.1) == STATS_LOWER, "lower");
    CHECK(stats_verdict_ci(-0.15, -0.01, -0.12, -0.02, 0.1) == STATS_LOWER, "lower, 90 %% CI crosses -M");
    CHECK(stats_verdict_ci(0.02, 0.3, 0.03, 0.25, 0.1) == STATS_HIGHER, "higher");
    CHECK(stats_verdict_ci(0.01, 0.05, 0.015, 0.045, 0.1) == STATS_EQUIVALENT_HIGHER, "higher, within the margin");
    CHECK(stats_verdict_ci(-0.05, 0.05, -0.04, 0.04, 0.1) == STATS_EQUIVALENT, "equivalent");
    CHECK(stats_verdict_ci(-0.2, 0.2, -0.15, 0.15, 0.1) == STATS_NO_DETECTED_DIFFERENCE, "no detected difference");
    CHECK(stats_verdict_ci(-0.05, 0.12, -0.04, 0.1, 0.1) == STATS_NO_DETECTED_DIFFERENCE,
          "a 90 %% bound on the margin is not inside it");
    CHECK(stats_verdict_ci(-0.05, 0.05, -0.04, 0.04, 0) == STATS_NO_DETECTED_DIFFERENCE &&
          stats_verdict_ci(-0.05, 0.05, -0.04, 0.04, NAN) == STATS_NO_DETECTED_DIFFERENCE &&
          stats_verdict_ci(-0.3, -0.1, NAN, NAN, NAN) == STATS_LOWER, "no margin: no equivalence assessed");
    CHECK(stats_verdict_ci(NAN, 0.1, -0.1, 0.1, 0.1) == STATS_NOT_COMPUTABLE &&
          stats_verdict_ci(-0.1, 0.1, NAN, 0.1, 0.1) == STATS_NOT_COMPUTABLE, "NaN: not computable");
    /* from p-values (Holm-adjusted): the 95 % CI excludes 0 but the adjusted p does not pass */
    CHECK(stats_verdict_p(-0.2, 0.01, 0.05, -0.28, -0.12, 0.1) == STATS_LOWER, "p <= alpha, est < 0: lower");
    CHECK(stats_verdict_p(-0.2, 0.08, 0.05, -0.28, -0.12, 0.1) == STATS_NO_DETECTED_DIFFERENCE,
          "adjusted p above alpha: no detected difference");
    CHECK(stats_verdict_p(0.02, 0.001, 0.05, 0.01, 0.03, 0.1) == STATS_EQUIVALENT_HIGHER, "p: higher, within");
    CHECK(stats_verdict_p(0.0, 0.001, 0.05, -0.01, 0.01, 0.1) == STATS_EQUIVALENT, "est 0: no direction");
    CHECK(stats_verdict_p(0.1, 0.01, 0, 0, 0.2, 0.1) == STATS_NOT_COMPUTABLE, "alpha 0: not computable");
    char buf[64];
    stats_verdict_format(STATS_EQUIVALENT, 0.1, buf, sizeof buf);
    CHECK(strcmp(buf, "equivalent within ±0.1") == 0, "format: %s", buf);
    stats_verdict_format(STATS_EQUIVALENT_LOWER, 0.0046, buf, sizeof buf);
    CHECK(strcmp(buf, "lower, within ±0.0046") == 0, "format: %s", buf);
    stats_verdict_format(STATS_NO_DETECTED_DIFFERENCE, 0.1, buf, sizeof buf);
    CHECK(strcmp(buf, "no detected difference") == 0 && strcmp(stats_verdict_word(STATS_HIGHER), "higher") == 0 &&
          strcmp(stats_verdict_word(STATS_NOT_COMPUTABLE), "not computable") == 0, "words");
}

static void test_power(void) {
    double z975 = gsl_cdf_ugaussian_Pinv(0.975), z95 = gsl_cdf_ugaussian_Pinv(0.95);
    double mdd = stats_mdd(1.0, 0.05, 0.8);
    CHECK(fabs(mdd - 2.8015852) < 1e-6, "MDD(se 1) = 1.95996 + 0.84162 = %.7f", mdd);
    /* its meaning: a true difference of mdd is detected with probability 0.8 */
    double pw = gsl_cdf_ugaussian_P(mdd - z975) + gsl_cdf_ugaussian_P(-mdd - z975);
    CHECK(fabs(pw - 0.8) < 0.001, "power at the MDD %.4f (0.8)", pw);
    CHECK(fabs(stats_mdd(0.01, 0.05, 0.8) - 0.028015852) < 1e-8, "MDD scales with se");
    double mm = stats_tost_min_margin(1.0, 0.05, 0.8);
    CHECK(fabs(mm - 2.9264058) < 1e-6, "TOST margin(se 1) = 1.64485 + 1.28155 = %.7f", mm);
    double pt = 2 * gsl_cdf_ugaussian_P(mm - z95) - 1;
    CHECK(fabs(pt - 0.8) < 1e-9, "TOST power at true 0 with that margin %.6f (0.8)", pt);
    CHECK(isnan(stats_mdd(0, 0.05, 0.8)) && isnan(stats_mdd(1, 1.5, 0.8)) && isnan(stats_tost_min_margin(-1, 0.05, 0.8)),
          "bad se / alpha: NaN");
    double mc = stats_mcnemar_mdd(100, 1000, 0.05, 0.8);
    CHECK(fabs(mc - 0.028015852) < 1e-8, "McNemar MDD, 100 discordant of 1000: %.6f", mc);
    CHECK(isinf(stats_mcnemar_mdd(5, 9, 0.05, 0.8)), "5 discordant: the exact test cannot reach 0.05");
    CHECK(isinf(stats_mcnemar_mdd(7, 9, 0.05, 0.8)), "7 discordant: 2.80 > sqrt(7), no power");
    CHECK(fabs(stats_mcnemar_mdd(8, 9, 0.05, 0.8) - 2.8015852 * sqrt(8) / 9) < 1e-6, "8 discordant: finite");
    CHECK(isinf(stats_mcnemar_mdd(0, 9, 0.05, 0.8)) && isnan(stats_mcnemar_mdd(10, 9, 0.05, 0.8)) &&
          isnan(stats_mcnemar_mdd(1, 0, 0.05, 0.8)), "none discordant: inf; bad counts: NaN");
}

static void test_ratio_units(void) {
    stats_boot o;
    /* num units {1, 2}, {3}; den units {1}, {1, 1}: est = (6/3)/(3/3) = 2 */
    const double num[3] = {1, 2, 3}, den[3] = {1, 1, 1};
    const size_t noff[3] = {0, 2, 3}, doff[3] = {0, 1, 3};
    CHECK(stats_ratio_units_ci(num, noff, 2, den, doff, 2, 0, 500, 1, NULL, &o) == 0 && o.est == 2 &&
          o.block == 1 && o.n == 2, "ratio est = 2");
    /* resamples: num mean is 1.5 (unit 0 twice), 2 (both) or 3 (unit 1 twice); den always 1 */
    CHECK(o.lo == 1.5 && o.hi == 3, "ratio CI [1.5, 3] (%g, %g)", o.lo, o.hi);
    /* the same units on both sides, paired: every resample has ratio 1 */
    CHECK(stats_ratio_units_ci(num, noff, 2, num, noff, 2, 1, 500, 1, NULL, &o) == 0 && o.lo == 1 &&
          o.hi == 1 && o.p == 1, "paired identical sides: CI [1, 1], p = 1");
    /* a zero-denominator resample gives +inf at the upper end */
    const double z[2] = {0, 2}, one[2] = {1, 1};
    const size_t o2[3] = {0, 1, 2};
    CHECK(stats_ratio_units_ci(one, o2, 2, z, o2, 2, 0, 400, 2, NULL, &o) == 0 && o.est == 1 && isinf(o.hi) &&
          o.lo == 0.5, "a zero denominator widens the upper end to inf (lo %g)", o.lo);
    /* a trend that the units show: deepest bin 3x the first in each of 12 passages, paired */
    enum { U = 12, L = 20 };
    double a[U * L], b[U * L];
    size_t off[U + 1];
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 8);
    for (int u = 0; u <= U; u++) off[u] = (size_t)u * L;
    for (int u = 0; u < U; u++) {
        double level = gsl_ran_exponential(rng, 1.0);
        for (int i = 0; i < L; i++) {
            b[u * L + i] = level * gsl_ran_exponential(rng, 1.0);
            a[u * L + i] = 3 * level * gsl_ran_exponential(rng, 1.0);
        }
    }
    stats_ratio_units_ci(a, off, U, b, off, U, 1, 1000, 3, NULL, &o);
    CHECK(o.lo > 1 && o.lo < 3 && o.hi > 3 && o.p < 0.01, "paired trend x3: [%.2f, %.2f], p %.3g", o.lo, o.hi, o.p);
    const double neg[3] = {1, -2, 3};
    const size_t bad_off[3] = {0, 3, 2};
    CHECK(stats_ratio_units_ci(neg, noff, 2, den, doff, 2, 0, 10, 1, NULL, &o) == -1 && isnan(o.est),
          "negative value refused");
    CHECK(stats_ratio_units_ci(num, bad_off, 2, den, doff, 2, 0, 10, 1, NULL, &o) == -1, "decreasing offsets refused");
    const double zz[3] = {0, 0, 0};
    CHECK(stats_ratio_units_ci(num, noff, 2, zz, doff, 2, 0, 10, 1, NULL, &o) == -1, "zero denominator refused");
    CHECK(stats_ratio_units_ci(num, noff, 2, den, doff, 1, 1, 10, 1, NULL, &o) == -1, "paired with unequal units refused");
    gsl_rng_free(rng);
}

int main(void) {
    test_logprob_repeat();
    test_rows_closed_forms();
    test_rows_random();
    test_percentiles();
    test_bootstrap();
    test_wilson();
    test_slope();
    test_spearman();
    test_near_tie();
    test_km();
    test_pw_block();
    test_circular();
    test_pvalues_holm();
    test_verdicts();
    test_power();
    test_ratio_units();
    return check_done();
}
