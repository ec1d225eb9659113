/* report_claims.c — what the numbers support: for each test arm, the claims the README and
 * summary.json judge (definitions are printed in the README), each with a verdict and the
 * evidence behind it, from the statistics of report_analysis.c. Allocates nothing. */
#include "driver/report/report_internal.h"

#include <math.h>
#include <stdio.h>

enum { V_SUPPORTED, V_NOT_SUPPORTED, V_INCONCLUSIVE, V_NOT_MEASURED };

const char *report_verdict_name(int verdict) {
    static const char *const name[] = {"supported", "not supported", "inconclusive",
                                       "not measured"};
    return verdict >= 0 && verdict <= V_NOT_MEASURED ? name[verdict] : "unknown";
}

/* Each claim below fills *C for the test arm X (its label lab; ref the reference's label). */

/* 1. Far above k x the noise floor (distinguishable in distribution), over the depths (set 0) or
 * the positions (set 1). */
static void claim_distinguishable(report_claim *C, const report_results *R, const report_arm_an *X, int set,
                                  const char *lab, const char *ref) {
    double k = REPORT_FLOOR_FACTOR;
    char a[64], b[64], c[64];
    const report_set *s = set ? &X->pos : &X->dep;
    const char *where = set ? "positions" : "depths";
    snprintf(C->claim, sizeof C->claim, "%s is distinguishable in distribution from %s over the %s "
             "(the CI of mean KL lies above %.0fx the noise floor)", lab, ref, where, k);
    if (set && !X->np) {
        C->verdict = V_NOT_MEASURED;
        snprintf(C->evidence, sizeof C->evidence, "per-position metrics were not streamed");
        return;
    }
    if (R->floor < 0 || s->n_floor == 0 || isnan(s->kl.lo)) {
        C->verdict = V_NOT_MEASURED;
        snprintf(C->evidence, sizeof C->evidence, "no f32 noise-floor arm at these %s", where);
        return;
    }
    double lim = k * s->floor_mean;
    C->verdict = s->kl.lo > lim ? V_SUPPORTED : s->kl.hi <= lim ? V_NOT_SUPPORTED : V_INCONCLUSIVE;
    report_fmt_ci(&s->kl, a, sizeof a);
    report_fmt_sig2(s->floor_mean, b, sizeof b);
    report_fmt_sig2(lim, c, sizeof c);
    snprintf(C->evidence, sizeof C->evidence, "mean KL(%s‖%s) %s vs floor %s (%.0fx: %s); whether it "
             "matters is the practical verdict of \"The answer first\"", lab, ref, a, b, k, c);
}

/* 2. Per depth: KL above k x floor; forks earlier than the floor arm's. */
static void claim_every_depth(report_claim *C, const report_results *R, const report_arm_an *X, const char *lab) {
    double k = REPORT_FLOOR_FACTOR;
    snprintf(C->claim, sizeof C->claim, "%s is above %.0fx the noise floor at every depth", lab, k);
    if (R->floor < 0) {
        C->verdict = V_NOT_MEASURED;
        snprintf(C->evidence, sizeof C->evidence, "no f32 noise-floor arm");
        return;
    }
    size_t n_cmp = 0, n_above = 0, n_fork_early = 0;
    for (size_t j = 0; j < X->nd; j++) {
        const report_depth *d = &R->drows[X->d0 + j];
        if (isnan(X->floor_kl[j])) continue;
        n_cmp++;
        n_above += d->kl_ar > k * X->floor_kl[j];
        n_fork_early += d->fork < X->floor_fork[j];
    }
    C->verdict = n_cmp == 0 ? V_NOT_MEASURED : n_above == n_cmp ? V_SUPPORTED : V_NOT_SUPPORTED;
    snprintf(C->evidence, sizeof C->evidence, "above at %zu of %zu depths; the greedy stream forks "
             "earlier than fp32's at %zu", n_above, n_cmp, n_fork_early);
}

/* 3. KL trend with depth: the ratio of the deepest depth bin to the first (positions only; v: the
 * arm's verdicts, or NULL). */
static void claim_trend(report_claim *C, const report_arm_an *X, const report_arm_verdict *v, const char *lab,
                        const char *ref) {
    snprintf(C->claim, sizeof C->claim, "KL(%s‖%s) grows with depth (deepest depth bin / first)", lab, ref);
    if (!v || !v->over_positions || isnan(v->ratio.est)) {
        C->verdict = V_NOT_MEASURED;
        snprintf(C->evidence, sizeof C->evidence, "not estimated: %s", X->np ? "fewer than two depth bins"
                 : "no positions.tsv, and a trend is not fitted to single depth positions");
        return;
    }
    C->verdict = v->v_ratio == STATS_HIGHER ? V_SUPPORTED : v->v_ratio == STATS_LOWER ? V_NOT_SUPPORTED
                 : V_INCONCLUSIVE;
    snprintf(C->evidence, sizeof C->evidence, "ratio x%.2g [%.2g, %.2g]: %s", v->ratio.est, v->ratio.lo,
             v->ratio.hi, stats_verdict_word(v->v_ratio));
}

/* 4. Top-1 agreement >= 99% (positions when measured, else depths). */
static void claim_top1(report_claim *C, const report_arm_an *X, const char *lab, const char *ref) {
    char a[64];
    const report_set *s = X->np ? &X->pos : &X->dep;
    const char *where = X->np ? "positions" : "depths";
    snprintf(C->claim, sizeof C->claim, "%s picks the same top-1 token as %s at >= 99%% of %s",
             lab, ref, where);
    C->verdict = isnan(s->top1.lo) ? V_NOT_MEASURED : s->top1.lo >= 0.99 ? V_SUPPORTED
                 : s->top1.hi < 0.99 ? V_NOT_SUPPORTED : V_INCONCLUSIVE;
    report_fmt_pct_ci(&s->top1, a, sizeof a);
    snprintf(C->evidence, sizeof C->evidence, "agreement %s over %zu %s (Wilson)", a, s->n, where);
}

/* 5. Flips among near ties, against the fp32 arm's rate at the same rows (v: the arm's verdicts, or
 * NULL). */
static void claim_near_ties(report_claim *C, const report_results *R, const report_arm_verdict *v, const char *lab) {
    char a[64], b[64];
    snprintf(C->claim, sizeof C->claim, "%s flips the top-1 at near ties (reference top-2 gap < %.2g) more "
             "often than fp32 does", lab, REPORT_NEAR_TIE_EPS);
    if (!v || !v->n_near || R->floor < 0 || isnan(v->floor_near_rate.est)) {
        C->verdict = V_NOT_MEASURED;
        snprintf(C->evidence, sizeof C->evidence, "%s", !v || !v->n_near ? "no near ties" : "no f32 arm");
        return;
    }
    C->verdict = v->near_rate.lo > v->floor_near_rate.hi ? V_SUPPORTED
                 : v->near_rate.hi < v->floor_near_rate.lo ? V_NOT_SUPPORTED : V_INCONCLUSIVE;
    report_fmt_pct_ci(&v->near_rate, a, sizeof a);
    report_fmt_pct_ci(&v->floor_near_rate, b, sizeof b);
    snprintf(C->evidence, sizeof C->evidence, "%zu flips among %zu near ties, %s; fp32 %s (Wilson)",
             v->n_near_flips, v->n_near, a, b);
}

/* 6. KL larger where the reference is uncertain (positions when measured, else depths). */
static void claim_entropy(report_claim *C, const report_arm_an *X, const char *lab, const char *ref) {
    char a[64];
    const report_set *s = X->np ? &X->pos : &X->dep;
    const char *where = X->np ? "positions" : "depths";
    snprintf(C->claim, sizeof C->claim, "KL(%s‖%s) is larger where %s is uncertain (rank "
             "correlation with reference entropy > 0)", lab, ref, ref);
    if (isnan(s->sp_ent.lo)) {
        C->verdict = V_NOT_MEASURED;
        snprintf(C->evidence, sizeof C->evidence, "too few %s for a CI", where);
        return;
    }
    C->verdict = s->sp_ent.lo > 0 ? V_SUPPORTED : s->sp_ent.hi < 0 ? V_NOT_SUPPORTED
                 : V_INCONCLUSIVE;
    report_fmt_rho(&s->sp_ent, a, sizeof a);
    snprintf(C->evidence, sizeof C->evidence, "Spearman %s over %zu %s", a, s->sp_ent.n, where);
}

/* Up to REPORT_MAX_CLAIMS claims per arm, written into out; returns the count. */
int report_arm_claims(const report_results *R, const report_analysis *A, const report_verdicts *V, int i,
                      report_claim *out) {
    const report_arm_an *X = &A->a[i];
    const char *lab = X->label, *ref = A->ref_label;
    const report_arm_verdict *v = V && V->v ? &V->v[i] : NULL;
    int n = 0;
    for (int set = 0; set < 2; set++) claim_distinguishable(&out[n++], R, X, set, lab, ref);
    claim_every_depth(&out[n++], R, X, lab);
    claim_trend(&out[n++], X, v, lab, ref);
    claim_top1(&out[n++], X, lab, ref);
    claim_near_ties(&out[n++], R, v, lab);
    claim_entropy(&out[n++], X, lab, ref);
    return n;
}
