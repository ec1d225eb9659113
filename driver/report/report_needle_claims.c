/* report_needle_claims.c — the needle folder's numbers in words (see report_needle_internal.h):
 * percentages, p-values, intervals, units and power, verdicts, and the claims the numbers support
 * (two per test arm and set: retrieval and the key's log-probability). */
#include "driver/report/report_needle_internal.h"
#include "kernels/errmsg.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void needle_fmt_pct(double v, char *buf, size_t len) {
    if (isnan(v)) snprintf(buf, len, REPORT_NA);
    else snprintf(buf, len, "%.1f%%", 100 * v);
}

void needle_fmt_p(double p, char *buf, size_t len) {
    if (isnan(p)) snprintf(buf, len, REPORT_NA);
    else if (p >= 0.995) snprintf(buf, len, "1");
    else if (p >= 0.001) snprintf(buf, len, "%.3f", p);
    else snprintf(buf, len, "%.1e", p);
}

void needle_fmt_lp_ci(const stats_boot *c, char *buf, size_t len) {
    if (isnan(c->est)) snprintf(buf, len, REPORT_NA);
    else if (isnan(c->lo)) snprintf(buf, len, "%+.3g", c->est);
    else snprintf(buf, len, "%+.3g [%+.3g, %+.3g]", c->est, c->lo, c->hi);
}

/* "20 units (raw and chat twins together) on 1 haystack" */
void needle_fmt_units(const needle_results *R, const needle_analysis *A, int set, size_t units, char *buf, size_t len) {
    int pooled = set >= R->n_tpl;
    snprintf(buf, len, "%zu unit%s%s on %d haystack%s", units, units == 1 ? "" : "s",
             pooled ? " (raw and chat twins together)" : "", R->trials, R->trials == 1 ? "" : "s");
    (void)A;
}

/* The retrieval test's power: the grid's smallest detectable difference, and what it means at the
 * margin. */
void needle_fmt_power_acc(const needle_arm_stat *S, char *buf, size_t len) {
    if (isinf(S->mdd))
        snprintf(buf, len, "no power: %zu units cannot reach p ≤ %.2g however they differ", S->units, NEEDLE_ALPHA);
    else if (isnan(S->mdd))
        snprintf(buf, len, "power not computable");
    else if (S->mdd > NEEDLE_EQ_SHARE)
        snprintf(buf, len, "no power at the ±%.0f-point margin: the grid cannot detect a difference smaller "
                 "than %.0f points (%.0f %% power, at best)", 100 * NEEDLE_EQ_SHARE, 100 * S->mdd, 100 * NEEDLE_POWER);
    else
        snprintf(buf, len, "%.0f %% power, at best, for a difference of %.1f points or more", 100 * NEEDLE_POWER,
                 100 * S->mdd);
}

void needle_fmt_power_lp(const needle_arm_stat *S, char *buf, size_t len) {
    if (isnan(S->dlp_mdd))
        snprintf(buf, len, "the per-unit differences do not vary: no standard error, no power estimate");
    else if (S->dlp_mdd > NEEDLE_LOGPROB_EPS)
        snprintf(buf, len, "no power at the ±%.2g-nat margin: the grid cannot detect a shift smaller than "
                 "%.2g nats (%.0f %% power)", NEEDLE_LOGPROB_EPS, S->dlp_mdd, 100 * NEEDLE_POWER);
    else
        snprintf(buf, len, "%.0f %% power for a shift of %.2g nats or more", 100 * NEEDLE_POWER, S->dlp_mdd);
}

/* The verdict in the report's words, the margin written in with its unit ("equivalent within ±5
 * points", "lower, within ±0.1 nats"); "not measured" without units. */
void needle_verdict_words(stats_verdict v, int kind, char *buf, size_t len) {
    if (v == STATS_NOT_COMPUTABLE) { snprintf(buf, len, "not measured"); return; }
    stats_verdict_format(v, kind ? NEEDLE_LOGPROB_EPS : 100 * NEEDLE_EQ_SHARE, buf, len);
    if (v == STATS_EQUIVALENT || v == STATS_EQUIVALENT_LOWER || v == STATS_EQUIVALENT_HIGHER) {
        size_t k = strlen(buf);
        snprintf(buf + k, len - k, kind ? " nats" : " points");
    }
}

/* Two claims per test arm and set: retrieval (the sign-flip test over units, the Clopper–Pearson
 * bound for equivalence) and the key's log-probability (bootstrap over units, TOST). */
int needle_claims_make(const needle_results *R, const needle_analysis *A, needle_claim *out, int max) {
    int n = 0;
    const char *ref = R->arms[R->ref].name;
    for (int set = 0; set < A->n_sets; set++)
        for (int a = 0; a < R->n_arms; a++) {
            if (a == R->ref || n + 2 > max) continue;
            const needle_arm_stat *S = needle_stat_at(A, R, set, a);
            const char *sn = needle_set_name(R, A, set), *nm = R->arms[a].name;
            char pa[32], pb[32], pp[32], ph[32], ci[96], un[128], pw[256], bd[32];
            needle_fmt_units(R, A, set, S->units, un, sizeof un);
            for (int kind = 0; kind < 2; kind++) {
                needle_claim *C = &out[n++];
                snprintf(C->arm, sizeof C->arm, "%s", nm);
                snprintf(C->set, sizeof C->set, "%s", sn);
                C->kind = kind;
                C->verdict = kind ? S->v_lp : S->v_acc;
                needle_verdict_words(C->verdict, kind, C->words, sizeof C->words);
                snprintf(C->claim, sizeof C->claim, kind ? "the key's log-probability under %s vs %s (%s prompts)"
                                                         : "retrieval by %s vs %s (%s prompts)", nm, ref, sn);
                if (!S->units) {
                    snprintf(C->evidence, sizeof C->evidence, "no cell measured on both arms");
                    continue;
                }
                if (!kind) {
                    needle_fmt_pct((double)(S->ref_exact + S->b - S->c) / (double)S->pairs, pa, sizeof pa);
                    needle_fmt_pct((double)S->ref_exact / (double)S->pairs, pb, sizeof pb);
                    needle_fmt_p(S->p, pp, sizeof pp);
                    needle_fmt_p(S->p_holm, ph, sizeof ph);
                    needle_fmt_pct(S->bound, bd, sizeof bd);
                    needle_fmt_power_acc(S, pw, sizeof pw);
                    snprintf(C->evidence, sizeof C->evidence, "%s vs %s of %zu cells; %zu of %s differ; exact "
                             "sign-flip test over units p = %s (Holm: %s); |difference| ≤ %s (Clopper–Pearson "
                             "95 %% bound on the differing units; margin ±%.0f points%s); %s", pa, pb, S->pairs,
                             S->disc_units, un, pp, ph, bd, 100 * NEEDLE_EQ_SHARE,
                             isnan(A->margin_acc) ? ", not assessed on one haystack" : "", pw);
                } else {
                    needle_fmt_lp_ci(&S->dlp, ci, sizeof ci);
                    needle_fmt_p(S->dlp.p, pp, sizeof pp);
                    needle_fmt_p(S->dlp_holm, ph, sizeof ph);
                    needle_fmt_power_lp(S, pw, sizeof pw);
                    snprintf(C->evidence, sizeof C->evidence, "mean Δ log-prob (%s − %s) %s nats over %s; "
                             "bootstrap over units p = %s (Holm: %s); 90 %% interval [%+.3g, %+.3g] against "
                             "the margin ±%.2g nats (TOST%s); %s", nm, ref, ci, un, pp, ph, S->dlp.lo90,
                             S->dlp.hi90, NEEDLE_LOGPROB_EPS, R->trials > 1 ? "" : ", not assessed on one haystack",
                             pw);
                }
            }
        }
    return n;
}
