/* stats.h — the numbers strata reports: per-row distribution metrics (docs/DESIGN.md §3) and the
 * summary statistics with confidence intervals that the results folder shows (GSL 2.7).
 *
 * Conventions
 * - Natural log everywhere (nats), except stats_log10_slope which fits log10 KL.
 * - Every function that calls GSL first calls gsl_set_error_handler_off(), so a GSL domain
 *   error returns a status instead of aborting the process.
 * - Functions return 0 on success and -1 on bad input (NULL pointers, n out of range,
 *   NaN/inf where finite values are required); on -1 the output struct is set to a defined
 *   state (zeros / NAN) and nothing is left allocated.
 * - Nothing here keeps state between calls. Only stats_kaplan_meier allocates (freed with
 *   stats_km_free); the bootstrap functions allocate scratch memory and free it before return.
 */
#ifndef STRATA_STATS_H
#define STRATA_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---------------------------------------------------------------------------------------------
 * A. Per-row metrics: one arm's logit row against the reference arm's row for the same position.
 * ------------------------------------------------------------------------------------------- */
typedef struct {
    double kl_arm_ref;       /* KL(arm‖ref) = Σ p_arm (ln p_arm − ln p_ref), nats */
    double kl_ref_arm;       /* KL(ref‖arm) (llama.cpp's direction) */
    double js;               /* ½KL(P‖M) + ½KL(Q‖M), M = (P+Q)/2, in [0, ln 2] */
    int top1_arm, top1_ref;  /* argmax, ties -> lowest token id */
    double nll_arm, nll_ref; /* −ln p(next); NAN when next < 0 (unknown) */
    double entropy_ref;      /* −Σ p_ref ln p_ref */
    double gap_ref, gap_arm; /* top-1 minus top-2 raw logit (0 on a tie; NAN when n_vocab == 1) */
} stats_row;

/* Compares two full-vocabulary logit rows (arm [n_vocab], ref [n_vocab]).
 * Log-softmax: z_i = x_i − max(x) in f32, lse = ln Σ exp(z_i) accumulated in double,
 * ln p_i = z_i − lse in double; every sum over the vocabulary in double; the vocabulary is never
 * clipped. Terms with p_i = 0 (exp underflow) contribute exactly 0 (ln p_i stays finite).
 * Identical rows give kl_* = 0.0 and js = 0.0 exactly. JS is computed per token as
 * m·g(r) with m = (p+q)/2, r = (p−q)/(p+q), g(r) = ½[(1+r)ln(1+r) + (1−r)ln(1−r)] (a
 * series for |r| < 0.05) so small differences do not cancel; the total is clamped to
 * [0, ln 2] against rounding only. KL is not clamped (it can be −1e-17 from rounding).
 * next = the true next token id in [0, n_vocab) or -1 when unknown.
 * Allocates scratch ([2][n_vocab] doubles), freed before return. Returns 0, or -1 (with *out
 * zeroed) when a row holds NaN/inf, when a pointer is NULL, n_vocab < 1, next >= n_vocab or the
 * scratch cannot be allocated. */
int stats_compare_rows(const float *arm, const float *ref, int n_vocab, int next, stats_row *out);

/* The same comparison in two steps, for several arms against one reference row: the reference's
 * argmax, runner-up, log-sum-exp, ln p and p are computed once (stats_ref_prepare) and each arm
 * is compared with them (stats_compare_prepared); the results are bit-identical to
 * stats_compare_rows. */
typedef struct {
    const float *row;        /* [n_vocab] the reference row (borrowed) */
    int n_vocab;
    int top1;                /* argmax, ties -> lowest id */
    float max, second;       /* row[top1] and the runner-up logit */
    double lse;              /* ln Σ exp(x_i − max) */
    const double *lp, *p;    /* [n_vocab] ln p_i and p_i (the caller's buffers) */
} stats_ref;

/* Fills *out from ref [n_vocab] into the caller's lp [n_vocab] and p [n_vocab] (they must outlive
 * *out's use; nothing is allocated). Returns 0, or -1 (*out zeroed) on NULL, n_vocab < 1 or a
 * non-finite logit. */
int stats_ref_prepare(const float *ref, int n_vocab, double *lp, double *p, stats_ref *out);

/* Compares arm [r->n_vocab] with a prepared reference (next as stats_compare_rows). Allocates
 * nothing. Returns 0, or -1 (*out zeroed) on NULL, next >= n_vocab or a non-finite arm logit. */
int stats_compare_prepared(const float *arm, const stats_ref *r, int next, stats_row *out);

/* ln p(tok) under one logit row [n_vocab], as stats_compare_rows computes NLL: z = x_tok − max
 * in f32, minus lse = ln Σ exp(z_i) in double (ascending ids). Returns 0, or -1 (*out = NAN)
 * on NULL, tok outside [0, n_vocab) or a non-finite logit. Allocates nothing. */
int stats_token_logprob(const float *row, int n_vocab, int tok, double *out);

/* Repetition rate of a token stream tok [n] (docs/DESIGN.md §3.4): the share of its n − order + 1
 * windows of `order` consecutive tokens that equal an earlier window of the stream (the first
 * occurrence does not count). NAN when n < order. O(n² · order); allocates nothing. */
double stats_repeat_rate(const int32_t *tok, int n, int order);

/* ---------------------------------------------------------------------------------------------
 * B. Summary statistics.
 * ------------------------------------------------------------------------------------------- */

/* Percentile levels reported, in this order: max, 99.9, 99, 95, 90, 50, 10, 5, 1, 0.1, min. */
#define STATS_N_PCT 11
extern const double stats_pct_levels[STATS_N_PCT]; /* in percent: 100, 99.9, ..., 0 */

/* Percentiles of x [n] at stats_pct_levels, interpolated as GSL's
 * gsl_stats_quantile_from_sorted_data: for fraction f, h = (n−1)f, i = floor(h),
 * q = (1 − (h−i))·x(i) + (h−i)·x(i+1) on the sorted sample (linear, "type 7").
 * Sorts a private copy (x is not modified). Returns -1 when n == 0 or x holds NaN (out = NAN). */
int stats_percentiles(const double *x, size_t n, double out[STATS_N_PCT]);

/* A point estimate with a 95% confidence interval. */
typedef struct {
    double est, lo, hi; /* NAN when not computable */
    size_t n;           /* sample size used */
} stats_ci;

/* Default moving-block length: the smallest integer b with b³ >= n (= ceil(n^(1/3))), 1 for n<=1. */
size_t stats_default_block(size_t n);

/* Default bootstrap settings used by the report. */
#define STATS_BOOT_B 1000
#define STATS_BOOT_SEED 20250101UL

/* Mean / median of x [n] with a moving-block bootstrap 95% CI (percentile method):
 * each of n_boot resamples concatenates ceil(n/b) blocks x[s..s+b) with s uniform in
 * [0, n−b] (gsl_rng mt19937 seeded with `seed`, so results are reproducible), truncated to n;
 * lo/hi = the 2.5% / 97.5% quantiles (GSL interpolation as above) of the n_boot statistics.
 * block = 0 means stats_default_block(n); a block longer than n is cut to n.
 * n == 1 gives lo = hi = est. Scratch memory is freed before return.
 * Returns -1 when n == 0, n_boot < 1, x holds NaN/inf, or allocation fails (out = NAN). */
int stats_mean_ci(const double *x, size_t n, size_t block, int n_boot, unsigned long seed,
                  stats_ci *out);
int stats_median_ci(const double *x, size_t n, size_t block, int n_boot, unsigned long seed,
                    stats_ci *out);

/* Proportion k/n with the Wilson score 95% interval (z = Φ⁻¹(0.975)):
 * centre = (p̂ + z²/2n)/(1 + z²/n), half = z/(1 + z²/n)·sqrt(p̂(1−p̂)/n + z²/4n²).
 * Returns -1 when n == 0 or k > n (out = NAN). */
int stats_wilson(size_t k, size_t n, stats_ci *out);

/* Least-squares line y = intercept + slope·x with y = log10(max(kl, 1e-12)) (zero or negative
 * KL is floored at 1e-12 = −12 decades; n_floored counts them) and a 95% CI on the slope:
 * slope ± t(0.975, n−2)·sqrt(cov11) from gsl_fit_linear and gsl_cdf_tdist_Pinv.
 * Pairs with NaN are skipped. With fewer than 3 usable pairs, or all x equal, the fields are
 * NAN and the return is still 0 (not computable is not an error). Returns -1 on NULL input. */
typedef struct {
    double slope, lo, hi, intercept, r2; /* r2: coefficient of determination */
    size_t n, n_floored;
} stats_fit;
int stats_log10_slope(const double *x, const double *kl, size_t n, stats_fit *out);

/* Spearman rank correlation of x [n] and y [n] (gsl_stats_spearman: Pearson correlation of
 * the ranks, ties get their average rank). Pairs where either value is NaN are skipped.
 * CI: Fisher z with var = 1.06/(n−3) (Fieller, Hartley & Pearson 1957), only for n > 3
 * (else lo = hi = NAN); it assumes independent pairs. est = NAN when fewer than 2 pairs or a
 * constant variable. Allocates scratch, freed before return. Returns -1 on NULL / alloc failure. */
int stats_spearman(const double *x, const double *y, size_t n, stats_ci *out);

/* Near-tie split: positions whose reference top-1/top-2 gap is < eps are "near ties".
 * same_top1 [n] is 1/0, kl [n] the KL per position, gap_ref [n] the reference gap.
 * share_flips_near = flips at near ties / all flips (NAN when no flips);
 * share_kl_near = Σ KL at near ties / Σ KL (NAN when Σ KL <= 0);
 * share_pos_near = near-tie positions / n. Rows with a NaN gap or KL are skipped. */
typedef struct {
    double eps;
    size_t n, n_near, n_flips, n_flips_near;
    double kl_total, kl_near;
    double share_pos_near, share_flips_near, share_kl_near;
} stats_neartie;
int stats_near_tie(const double *gap_ref, const int *same_top1, const double *kl, size_t n,
                   double eps, stats_neartie *out);

/* Kaplan–Meier survival of fork indices. T = the first token index where the two greedy streams
 * differ; fork [n] in [0, horizon], censored [n] = 1 when the streams were identical for all
 * `horizon` tokens (then fork must equal horizon: T >= horizon, right-censored).
 * S(t) = P(T > t) = Π over event times t_j <= t of (1 − d_j/n_j), n_j = number with T >= t_j.
 * Greenwood: Var S(t) = S(t)² Σ d_j/(n_j(n_j − d_j)); 95% CI = S ± 1.96·sd clamped to [0, 1]
 * (linear scale; at S = 0 the CI is [0, 0]).
 * median = smallest event time t with S(t) <= 0.5 (NAN when S stays above 0.5, i.e. more than
 * half are censored: then read surv_end = S after the last event, the estimate of S(horizon−1)
 * which, all censoring being at horizon, is the share of identical streams).
 * median_lo / median_hi = smallest t where the CI's lower / upper bound is <= 0.5 (NAN if none).
 * Allocates the step arrays (each [n_steps]); free with stats_km_free, also after -1.
 * Returns -1 on NULL input, n == 0, horizon < 1, an index out of [0, horizon], a censored
 * entry whose fork != horizon or an uncensored one equal to horizon, or allocation failure. */
typedef struct {
    size_t n_obs, n_events, n_censored;
    int horizon;
    size_t n_steps; /* number of distinct event times */
    int *time;      /* [n_steps] event times, increasing */
    size_t *at_risk, *events; /* [n_steps] n_j, d_j */
    double *surv, *lo, *hi;   /* [n_steps] S(t_j) and its 95% band */
    double median, median_lo, median_hi;
    double surv_end;
} stats_km;
int stats_kaplan_meier(const int *fork, const int *censored, size_t n, int horizon, stats_km *out);
/* S(t) from a computed km for any t (1 before the first event). */
double stats_km_surv_at(const stats_km *km, int t);
void stats_km_free(stats_km *km);

/* ---------------------------------------------------------------------------------------------
 * C. Paired binary outcomes (the needle bench: one arm against the reference, cell by cell).
 * ------------------------------------------------------------------------------------------- */

/* McNemar's exact test: b = pairs where only the first is a success, c = only the second.
 * Two-sided p = min(1, 2·P(X <= min(b, c))) with X ~ Binomial(b + c, 1/2) (gsl_cdf_binomial_P);
 * 1 when b + c = 0. Concordant pairs do not enter. NAN when b + c > 2^32 − 1. Allocates nothing. */
double stats_mcnemar_exact(size_t b, size_t c);

/* ---------------------------------------------------------------------------------------------
 * D. Dependent series, paired comparisons, equivalence, multiplicity and power
 *    (driver/stats_boot.c; docs/DESIGN.md §3.6.1). None of these is used by the report yet; the
 *    functions of B stay as they are (the committed results folders use them).
 * ------------------------------------------------------------------------------------------- */

/* Politis & White (2004) automatic block length for the circular block bootstrap of the mean,
 * with the correction of Patton, Politis & White (2009). For x [n] (finite):
 *   ρ̂(k) = R̂(k)/R̂(0), R̂(k) = (1/n) Σ_{i<n−k} (x_i − x̄)(x_{i+k} − x̄);
 *   K_n = max(5, ⌈√log10 n⌉), band c·√(log10 n / n) with c = 2 (STATS_PW_C),
 *   m̂ = the smallest m >= 0 with |ρ̂(m+1)|, …, |ρ̂(m+K_n)| all inside the band, searched up to
 *   M_max = ⌈√n⌉ + K_n (m̂ = M_max when there is none); M = min(2·m̂, M_max);
 *   flat-top window λ(t) = 1 for |t| <= 1/2, 2(1 − |t|) for 1/2 < |t| <= 1, 0 beyond;
 *   Ĝ = Σ_{|k|<=M} λ(k/M)·|k|·R̂(k), ĝ = Σ_{|k|<=M} λ(k/M)·R̂(k) (the long-run variance),
 *   D̂_CB = (4/3)·ĝ², b_raw = (2·Ĝ²/D̂_CB)^(1/3)·n^(1/3);
 *   block = ⌈b_raw⌉ clamped to [1, b_max], b_max = ⌈min(3√n, n/3)⌉.
 * Lags are limited to n − 1 (for small n M_max shrinks). block = 1 (with b_raw = 0) when n < 4,
 * when x is constant (R̂(0) = 0) or when ĝ <= 0 (a flat-top estimate can be negative: strong
 * negative dependence, where blocks of 1 are conservative). Assumes a stationary, short-memory
 * series: for long memory the rule and the block bootstrap under-cover (docs/DESIGN.md §3.6.1).
 * Cost O(n·(√n + K_n)); allocates [M_max + K_n + 1] doubles, freed before return.
 * Returns 0, or -1 (out->block = 0, the rest NAN / 0) on NULL, n == 0, a non-finite value or
 * allocation failure. */
#define STATS_PW_C 2.0
typedef struct {
    size_t block;       /* the block length to use, >= 1 */
    double b_raw;       /* (2Ĝ²/D̂)^(1/3) n^(1/3) before rounding and clamping */
    size_t m_hat, M;    /* the lag found and the window's bandwidth */
    double G, g;        /* Ĝ and ĝ (units of x²) */
    size_t b_max;       /* the cap */
} stats_pw;
int stats_pw_block(const double *x, size_t n, stats_pw *out);

/* A bootstrap interval with both levels a comparison needs and a p-value. */
typedef struct {
    double est;          /* the statistic on the sample */
    double lo, hi;       /* 95 % percentile interval (2.5 % and 97.5 % quantiles) */
    double lo90, hi90;   /* 90 % percentile interval (5 % and 95 %): TOST at α = 0.05 */
    double se;           /* standard deviation of the resampled statistics */
    double p;            /* two-sided bootstrap p-value against the function's null (stats_boot_p) */
    size_t n;            /* observations (or units) used */
    size_t block;        /* block length used (1 for unit resampling) */
} stats_boot;

/* Circular moving-block bootstrap of the mean of x [n] (finite): each of n_boot resamples joins
 * k = ⌈n/b⌉ blocks x[(s + t) mod n], t = 0 … b−1, with s uniform in [0, n) (gsl_rng mt19937
 * seeded with `seed`), truncated to n values. Wrapping gives every position the same weight
 * (the resampled mean's expectation is exactly x̄; stats_mean_ci's blocks under-weight both
 * ends). block = 0 means stats_pw_block(x, n); a block longer than n is cut to n. Quantiles as
 * stats_percentiles (type 7) of the sorted resampled means; p against mean = 0. n == 1 gives
 * every bound = est, se = 0, p = 1. boot [n_boot] may be NULL; otherwise the caller's array
 * receives the sorted resampled means (for stats_boot_p / stats_boot_p_tost). Assumes a
 * stationary short-memory series (the coverage test: tests/test_coverage.c). Allocates
 * [2n + 1 + n_boot] doubles, freed before return. Returns 0, or -1 (fields NAN) on NULL x or
 * out, n == 0, n_boot < 1, a non-finite value or allocation failure. */
int stats_mean_ci_circular(const double *x, size_t n, size_t block, int n_boot,
                           unsigned long seed, double *boot, stats_boot *out);

/* Paired comparison of a [n] and b [n] (the same positions or depths of two arms): the circular
 * block bootstrap of the mean of d_i = a_i − b_i, exactly stats_mean_ci_circular(d, …) (block 0:
 * stats_pw_block of d). est = mean(a) − mean(b); p against a zero mean difference. Per-depth
 * pairs (few, treated as independent) take block = 1. Pairs are the caller's: drop non-finite
 * pairs first (a non-finite value gives -1). Allocates [n] more doubles, freed before return. */
int stats_paired_diff_ci(const double *a, const double *b, size_t n, size_t block, int n_boot,
                         unsigned long seed, double *boot, stats_boot *out);

/* Bootstrap p-values from sorted resampled statistics t [n_boot] (as returned in `boot`):
 * stats_boot_p: two-sided, against θ0: with k_le = #{t <= θ0}, k_ge = #{t >= θ0},
 *   p = min(1, 2·min(k_le + 1, k_ge + 1)/(n_boot + 1)) — the percentile interval's own test
 *   (θ0 outside the 1−α interval ⇔ p <= α, up to quantile interpolation), with the usual +1 so
 *   that p is never 0 (smallest 2/(n_boot + 1): for Holm over m tests at α, n_boot >= 2m/α).
 * stats_boot_p_tost: TOST against the margin ±margin (margin > 0): p = max(p₋, p₊),
 *   p₋ = (#{t <= −margin} + 1)/(n_boot + 1), p₊ = (#{t >= margin} + 1)/(n_boot + 1);
 *   p <= α ⇔ "equivalent within ±margin" at α (the 1−2α interval inside (−margin, margin)).
 * NAN on NULL, n_boot < 1, a NaN θ0 or margin <= 0 / NaN. Allocate nothing. */
double stats_boot_p(const double *t, int n_boot, double theta0);
double stats_boot_p_tost(const double *t, int n_boot, double margin);

/* The interval fields of *out (lo, hi, lo90, hi90: type-7 percentiles; se: the draws' sd; p against
 * theta0, stats_boot_p) from the resampled statistics t [n_boot] (n_boot >= 1), which it sorts in
 * place; est, n and block are left to the caller. Allocates nothing. */
void stats_boot_summary(double *t, int n_boot, double theta0, stats_boot *out);

/* Holm–Bonferroni step-down adjustment of the m p-values p [m] into p_adj [m] (caller's array;
 * p == p_adj is allowed). NaN entries are not tests: they stay NaN and do not count in m.
 * With the m' finite p-values sorted p(1) <= … <= p(m'):
 *   p_adj(i) = min(1, max_{j<=i} (m' − j + 1)·p(j));
 * reject test i at family-wise level α iff p_adj_i <= α (controls the family-wise error rate
 * under any dependence between the tests). Allocates [m] (p, index) pairs, freed before return.
 * Returns the number of finite p-values, or -1 on NULL, a p outside [0, 1] or allocation
 * failure (then p_adj is all NaN, also when it is p). */
int stats_holm(const double *p, size_t m, double *p_adj);

/* The words of a comparison of an arm with a reference (difference = arm − reference):
 *   LOWER / HIGHER: a difference is detected (p <= α, or the 95 % interval excludes 0) and the
 *     90 % interval is not inside the margin;
 *   EQUIVALENT: the 90 % interval lies strictly inside (−M, M) (TOST at α = 0.05, each side)
 *     and no difference is detected;
 *   EQUIVALENT_LOWER / EQUIVALENT_HIGHER: both: a detected difference that is smaller than M;
 *   NO_DETECTED_DIFFERENCE: neither: the data cannot tell (this is not "no difference");
 *   NOT_COMPUTABLE: an input NaN.
 * With margin <= 0 or NaN no equivalence is assessed (LOWER / HIGHER / NO_DETECTED_DIFFERENCE).
 * For ratios (KL of two formats) pass logarithms: ln of the interval and M = ln(factor). */
typedef enum {
    STATS_NOT_COMPUTABLE = 0,
    STATS_NO_DETECTED_DIFFERENCE,
    STATS_LOWER,
    STATS_HIGHER,
    STATS_EQUIVALENT,
    STATS_EQUIVALENT_LOWER,
    STATS_EQUIVALENT_HIGHER
} stats_verdict;

/* Decides from a p-value (e.g. Holm-adjusted by stats_holm): difference detected iff p <= alpha
 * (alpha in (0, 1)), its direction the sign of est (none when est == 0). */
stats_verdict stats_verdict_p(double est, double p, double alpha, double lo90, double hi90,
                              double margin);
/* Decides from intervals alone: difference detected iff the 95 % interval [lo, hi] excludes 0. */
stats_verdict stats_verdict_ci(double lo, double hi, double lo90, double hi90, double margin);
/* "lower", "higher", "no detected difference", "equivalent within the margin",
 * "lower, within the margin", "higher, within the margin", "not computable" (static strings). */
const char *stats_verdict_word(stats_verdict v);
/* The words with the margin written in: "equivalent within ±0.1", "lower, within ±0.1"
 * (margin printed with %.3g); the others as stats_verdict_word. Writes at most size bytes
 * into buf (always terminated when size > 0); returns snprintf's count, or -1 on NULL buf. */
int stats_verdict_format(stats_verdict v, double margin, char *buf, size_t size);

/* Power. z_q = Φ⁻¹(q). For an estimate with standard error se (> 0, finite), alpha in (0, 1)
 * and power in (0, 1) (the defaults are α = 0.05, power = 0.8):
 * stats_mdd: the smallest true difference that a two-sided test at alpha detects with the given
 *   power (normal approximation, the far tail ignored): (z_{1−α/2} + z_power)·se
 *   (2.80·se at the defaults).
 * stats_tost_min_margin: the smallest margin M for which TOST at alpha (each side) says
 *   "equivalent" with the given power when the true difference is 0:
 *   (z_{1−α} + z_{(1+power)/2})·se (2.93·se at the defaults); a margin below it cannot be shown.
 * NAN on bad input. */
double stats_mdd(double se, double alpha, double power);
double stats_tost_min_margin(double se, double alpha, double power);

/* Paired proportions (McNemar): the smallest difference of success shares (b − c)/n_pairs that
 * the test at alpha detects with the given power, given n_disc = b + c discordant pairs among
 * n_pairs (conditional on n_disc; normal approximation with the null standard deviation, which
 * overstates the required imbalance slightly, i.e. is conservative):
 *   (z_{1−α/2} + z_power)·√n_disc / n_pairs.
 * INFINITY when no imbalance can be detected: when the exact test cannot reach alpha at all
 * (2·2^(−n_disc) > alpha: n_disc <= 5 at α = 0.05) or when the approximation asks for more than
 * all discordant pairs in one direction ((z_{1−α/2} + z_power) > √n_disc). NAN on n_pairs == 0,
 * n_disc > n_pairs or alpha / power outside (0, 1). Allocates nothing. */
double stats_mcnemar_mdd(size_t n_disc, size_t n_pairs, double alpha, double power);

/* Ratio of two pooled means with a bootstrap over whole units (passages, or blocks of positions
 * within a depth bin): num [num_off[n_num]] holds the numerator's values, those of unit u in
 * num[num_off[u] .. num_off[u+1]) (num_off [n_num + 1], num_off[0] = 0, non-decreasing); den /
 * den_off / n_den likewise. est = (Σ num / #num) / (Σ den / #den). Each resample draws units
 * with replacement (gsl_rng mt19937, seed): when paired (the same units measured in both, e.g.
 * each passage at the first and the deepest depth; needs n_num == n_den) one draw of n_num units
 * serves both, else n_num numerator and n_den denominator units are drawn independently; the
 * ratio is recomputed from the drawn units' sums and counts. Quantiles and fields as
 * stats_mean_ci_circular, p against ratio = 1, block = 1, n = n_num. Values must be finite and
 * >= 0 (KL, rates) and the sample's denominator mean > 0; a resample whose denominator is 0
 * gives ratio +inf (it widens the upper end). Assumes the units are independent (units of
 * many positions each; ≥ ~8 units for a usable interval). boot [n_boot] as in
 * stats_mean_ci_circular (may be NULL). Allocates [n_boot + 4·max(n_num, n_den)] doubles, freed
 * before return. Returns 0, or -1 (fields NAN) on NULL, no unit, an empty side, bad offsets, a
 * value that is negative or non-finite, a zero denominator, n_boot < 1 or allocation failure. */
int stats_ratio_units_ci(const double *num, const size_t *num_off, size_t n_num,
                         const double *den, const size_t *den_off, size_t n_den, int paired,
                         int n_boot, unsigned long seed, double *boot, stats_boot *out);

/* ---- TSV columns (the results folder's number format; one writer for every row kind) ---------- */

/* "\t" then v as %.17g (round-trips exactly), "\tnan" for NaN: 0, or -1 on a write error. */
int stats_tsv_num(FILE *f, double v);

/* A per-position row's metric columns, each after a tab: kl_arm_ref kl_ref_arm js same_top1 nll_arm
 * nll_ref entropy_ref gap_ref (positions.tsv's and passages.tsv's rows after their key columns; no
 * newline): 0, or -1 on a write error. */
int stats_position_cols(FILE *f, const stats_row *r);

#endif
