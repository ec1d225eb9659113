/* report_needle_analysis.c — the needle folder's statistics (see report_needle_internal.h):
 * accuracy with Wilson intervals; against the reference, over units — one (trial, length, depth)
 * cell with its templates together — the exact sign-flip test of retrieval with the grid's power
 * and a Clopper–Pearson equivalence bound (driver/needle/needle_stats.c), the mean difference of the gold
 * key's log-probability with a bootstrap over units, TOST and its power; Holm over the arms; and
 * summary.json. */
#include "driver/report/report_needle_internal.h"
#include "kernels/errmsg.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

needle_arm_stat *needle_stat_at(const needle_analysis *A, const needle_results *R, int set, int a) { return &A->s[(size_t)set * (size_t)R->n_arms + (size_t)a]; }

const char *needle_set_name(const needle_results *R, const needle_analysis *A, int set) {
    if (set >= R->n_tpl) return "all";
    (void)A;
    return R->tpl_chat[set] ? "chat" : "raw";
}

void needle_analysis_free(needle_analysis *A, const needle_results *R) {
    for (int i = 0; A->s && i < A->n_sets * R->n_arms; i++) {
        free(A->s[i].g_n);
        free(A->s[i].g_exact);
        free(A->s[i].g_dlp);
    }
    free(A->s);
    free(A->prompt_mean);
    memset(A, 0, sizeof *A);
}

/* Holm over the arms of one set, for the retrieval p (kind 0) or the log-prob p (kind 1). */
static int holm_set(const needle_results *R, needle_analysis *A, int set, int kind) {
    double *p = malloc((size_t)R->n_arms * sizeof *p);   /* [n_arms] NAN for the reference */
    if (!p) return -1;
    for (int a = 0; a < R->n_arms; a++) {
        const needle_arm_stat *S = needle_stat_at(A, R, set, a);
        p[a] = a == R->ref ? NAN : kind ? S->dlp.p : S->p;
    }
    int rc = stats_holm(p, (size_t)R->n_arms, p) < 0 ? -1 : 0;
    for (int a = 0; a < R->n_arms; a++) {
        needle_arm_stat *S = needle_stat_at(A, R, set, a);
        if (kind) S->dlp_holm = p[a];
        else S->p_holm = p[a];
    }
    free(p);
    return rc;
}

/* The scratch of needle_analysis_run, reused for each (set, arm) of needle_arm_analysis. */
typedef struct {
    size_t G;      /* grid cells: lengths x positions */
    double *d;     /* [units] Δ log-prob per unit */
    int *x;        /* [units] Σ exact differences, scaled */
    double *gs;    /* [G] Σ Δ log-prob of the pairs in a cell */
    size_t *gc;    /* [G] the pairs in a cell */
    size_t nu;     /* units with a pair: the entries of d and x */
    long xsum;     /* Σ x */
    double lps;    /* Σ of arm a's log-probabilities */
} unit_scratch;

/* The mean prompt length of each length's cells (the reference's rows). */
static void prompt_means(const needle_results *R, needle_analysis *A) {
    for (int li = 0; li < R->n_lengths; li++) {
        double sum = 0;
        size_t k = 0;
        for (int ti = 0; ti < R->n_tpl; ti++)
            for (int pi = 0; pi < R->n_positions; pi++)
                for (int t = 0; t < R->trials; t++) {
                    const needle_row *r = needle_results_row(R, ti, li, pi, t, R->ref);
                    if (r) { sum += (double)r->n_prompt; k++; }
                }
        A->prompt_mean[li] = k ? sum / (double)k : NAN;
    }
}

/* Arm a's rows over templates [t0, t1): the counts of S (overall and per cell), and per unit (a
 * length, position and trial: its K = t1 - t0 templates) the paired differences against the
 * reference into u. */
static void collect_units(const needle_results *R, needle_arm_stat *S, int t0, int t1, int a, unit_scratch *u) {
    int K = t1 - t0;
    memset(u->gs, 0, u->G * sizeof *u->gs);
    memset(u->gc, 0, u->G * sizeof *u->gc);
    u->nu = 0;
    u->xsum = 0;
    u->lps = 0;
    for (int li = 0; li < R->n_lengths; li++)
        for (int pi = 0; pi < R->n_positions; pi++)
            for (int t = 0; t < R->trials; t++) {
                size_t g = (size_t)li * (size_t)R->n_positions + (size_t)pi;
                int ux = 0, un = 0, udisc = 0;   /* this unit: Σ differences, twins, any differs */
                double ud = 0;
                for (int ti = t0; ti < t1; ti++) {
                    const needle_row *r = needle_results_row(R, ti, li, pi, t, a);
                    const needle_row *q = needle_results_row(R, ti, li, pi, t, R->ref);
                    if (!r) continue;
                    S->n++;
                    S->exact += (size_t)r->exact;
                    S->g_n[g]++;
                    S->g_exact[g] += (size_t)r->exact;
                    u->lps += r->logprob;
                    if (!q || a == R->ref) continue;
                    S->pairs++;
                    S->ref_exact += (size_t)q->exact;
                    S->b += r->exact && !q->exact;
                    S->c += !r->exact && q->exact;
                    ux += r->exact - q->exact;
                    udisc |= r->exact != q->exact;
                    un++;
                    ud += r->logprob - q->logprob;
                    u->gs[g] += r->logprob - q->logprob;
                    u->gc[g]++;
                    S->identical += !memcmp(&r->logprob, &q->logprob, sizeof(double)) &&
                                    r->n_gen == q->n_gen &&
                                    !memcmp(r->gen, q->gen, r->n_gen * sizeof *r->gen);
                }
                if (!un) continue;
                /* the unit's accuracy difference ux / un, in steps of 1 / K */
                u->x[u->nu] = ux * (K / un);
                u->xsum += u->x[u->nu];
                u->d[u->nu] = ud / un;
                S->disc_units += (size_t)udisc;
                u->nu++;
            }
}

/* The statistics of arm a in template set set: accuracy, and against the reference the sign-flip
 * test, its detectable difference and bound, and the bootstrap of Δ log-prob. Returns 0, or -1 out
 * of memory (or a non-finite log-probability). */
static int arm_analysis(const needle_results *R, needle_analysis *A, int set, int a, unit_scratch *u) {
    int t0 = set < R->n_tpl ? set : 0, t1 = set < R->n_tpl ? set + 1 : R->n_tpl, K = t1 - t0;
    needle_arm_stat *S = needle_stat_at(A, R, set, a);
    S->g_n = calloc(u->G, sizeof *S->g_n);
    S->g_exact = calloc(u->G, sizeof *S->g_exact);
    S->g_dlp = malloc(u->G * sizeof *S->g_dlp);
    if (!S->g_n || !S->g_exact || !S->g_dlp) return -1;
    collect_units(R, S, t0, t1, a, u);
    size_t nu = u->nu;
    S->units = nu;
    S->mean_lp = S->n ? u->lps / (double)S->n : NAN;
    S->acc = (stats_ci){NAN, NAN, NAN, 0};
    if (S->n) stats_wilson(S->exact, S->n, &S->acc);
    S->p = S->diff = S->mdd = S->bound = S->p_holm = S->dlp_holm = S->dlp_mdd = NAN;
    S->dlp = (stats_boot){NAN, NAN, NAN, NAN, NAN, NAN, NAN, 0, 0};
    if (a != R->ref && nu) {
        S->p = needle_stats_signflip_p(u->x, nu);
        if (isnan(S->p)) return -1;
        S->diff = (double)u->xsum / ((double)K * (double)nu);
        S->mdd = needle_stats_grid_mdd(nu, K, NEEDLE_ALPHA, NEEDLE_POWER);
        S->bound = needle_stats_disc_bound(S->disc_units, nu, NEEDLE_ALPHA);
        /* units are independent draws: the bootstrap over units (blocks of 1) */
        if (stats_mean_ci_circular(u->d, nu, 1, STATS_BOOT_B, STATS_BOOT_SEED, NULL, &S->dlp)) return -1;
        S->dlp_mdd = stats_mdd(S->dlp.se, NEEDLE_ALPHA, NEEDLE_POWER);
    }
    for (size_t g = 0; g < u->G; g++) S->g_dlp[g] = u->gc[g] ? u->gs[g] / (double)u->gc[g] : NAN;
    return 0;
}

/* The verdicts of every arm of set set, on the Holm-adjusted p-values. */
static void set_verdicts(const needle_results *R, needle_analysis *A, int set) {
    for (int a = 0; a < R->n_arms; a++) {
        needle_arm_stat *S = needle_stat_at(A, R, set, a);
        S->v_acc = S->v_lp = STATS_NOT_COMPUTABLE;
        if (a == R->ref || !S->units) continue;
        S->v_acc = stats_verdict_p(S->diff, S->p_holm, NEEDLE_ALPHA, -S->bound, S->bound, A->margin_acc);
        S->v_lp = stats_verdict_p(S->dlp.est, S->dlp_holm, NEEDLE_ALPHA, S->dlp.lo90, S->dlp.hi90,
                                  R->trials > 1 ? NEEDLE_LOGPROB_EPS : NAN);
    }
}

int needle_analysis_run(const needle_results *R, needle_analysis *A, char *err, size_t errlen) {
    memset(A, 0, sizeof *A);
    size_t G = (size_t)R->n_lengths * (size_t)R->n_positions;
    size_t units = G * (size_t)R->trials;
    int rc = -1;
    A->n_sets = R->n_tpl + (R->n_tpl > 1);
    /* equivalence needs independent units: not assessed on one haystack */
    A->margin_acc = R->trials > 1 ? NEEDLE_EQ_SHARE : NAN;
    unit_scratch u = { G, malloc((units ? units : 1) * sizeof *u.d), malloc((units ? units : 1) * sizeof *u.x),
                       calloc(G, sizeof *u.gs), calloc(G, sizeof *u.gc), 0, 0, 0 };
    A->s = calloc((size_t)A->n_sets * (size_t)R->n_arms, sizeof *A->s);
    A->prompt_mean = calloc((size_t)R->n_lengths, sizeof *A->prompt_mean);
    if (!u.d || !u.x || !u.gs || !u.gc || !A->s || !A->prompt_mean) goto done;
    prompt_means(R, A);
    for (int set = 0; set < A->n_sets; set++) {
        for (int a = 0; a < R->n_arms; a++)
            if (arm_analysis(R, A, set, a, &u)) goto done;
        if (holm_set(R, A, set, 0) || holm_set(R, A, set, 1)) goto done;
        set_verdicts(R, A, set);
    }
    rc = 0;
done:
    free(u.d); free(u.x); free(u.gs); free(u.gc);
    if (rc) return errmsg_set(err, errlen, -1, "out of memory (or non-finite log-probabilities) in the analysis");
    return 0;
}

/* ============================================================================================
 * summary.json
 * ========================================================================================== */

static json_t *jreal(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *jci(const stats_ci *c) {
    return json_pack("{s:o,s:o,s:o,s:I}", "est", jreal(c->est), "lo", jreal(c->lo), "hi", jreal(c->hi),
                     "n", (json_int_t)c->n);
}

static json_t *jboot(const stats_boot *c) {
    return json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:I}", "est", jreal(c->est), "lo", jreal(c->lo), "hi",
                     jreal(c->hi), "lo90", jreal(c->lo90), "hi90", jreal(c->hi90), "se", jreal(c->se), "p",
                     jreal(c->p), "n", (json_int_t)c->n);
}

/* INFINITY ("no power") as the string "inf": JSON has no infinity. */
static json_t *jreal_inf(double v) { return isinf(v) ? json_string("inf") : jreal(v); }

json_t *needle_summary_build(const needle_results *R, const needle_analysis *A, const needle_claim *cl, int n_cl) {
    json_t *root = json_object(), *arms = json_array(), *claims = json_array(), *L = json_array(), *P = json_array();
    json_object_set_new(root, "strata_needle_summary_version", json_integer(2));
    json_object_set_new(root, "tag", json_string(R->tag));
    json_object_set_new(root, "date", json_string(R->date));
    json_object_set_new(root, "ref", json_string(R->arms[R->ref].name));
    json_object_set_new(root, "floor_arm", R->floor >= 0 ? json_string(R->arms[R->floor].name) : json_null());
    for (int i = 0; i < R->n_lengths; i++) json_array_append_new(L, json_integer(R->lengths[i]));
    for (int i = 0; i < R->n_positions; i++) json_array_append_new(P, json_integer(R->positions[i]));
    json_object_set_new(root, "lengths", L);
    json_object_set_new(root, "positions", P);
    json_t *pm = json_array();
    for (int i = 0; i < R->n_lengths; i++) json_array_append_new(pm, jreal(A->prompt_mean[i]));
    json_object_set_new(root, "prompt_tokens_mean", pm);
    json_object_set_new(root, "keys", json_integer(R->keys));
    json_object_set_new(root, "trials", json_integer(R->trials));
    json_object_set_new(root, "cells_rows", json_integer((json_int_t)R->n_rows));
    json_object_set_new(root, "complete", json_boolean(R->complete));
    json_object_set_new(root, "haystacks", json_integer(R->trials));
    json_object_set_new(root, "settings", json_pack(
        "{s:f,s:s,s:s,s:i,s:I,s:s,s:s,s:s,s:s,s:s,s:f,s:f,s:f,s:f,s:b}", "ci_level", 0.95, "accuracy_ci",
        "Wilson score", "unit", "one (trial, length, depth) cell; its raw and chat twins together",
        "bootstrap_resamples", STATS_BOOT_B, "bootstrap_seed", (json_int_t)STATS_BOOT_SEED,
        "delta_logprob_ci", "circular bootstrap of the mean over units (blocks of 1); TOST on its 90 % interval",
        "paired_test", "exact sign-flip test of the per-unit accuracy differences (McNemar's exact test with "
        "one template)", "equivalence", "one-sided 95 % Clopper-Pearson bound on the share of differing units",
        "power", "the smallest difference detected with this power; retrieval: at best (one-way discordance)",
        "multiplicity", "Holm over the arms of a set, per test", "alpha", NEEDLE_ALPHA, "power_level",
        NEEDLE_POWER, "logprob_eps_nats", NEEDLE_LOGPROB_EPS, "accuracy_eps", NEEDLE_EQ_SHARE,
        "equivalence_assessed", R->trials > 1));
    for (int a = 0; a < R->n_arms; a++) {
        json_t *ja = json_object(), *sets = json_object();
        json_object_set_new(ja, "name", json_string(R->arms[a].name));
        json_object_set_new(ja, "kv_k", json_string(R->arms[a].kv_k));
        json_object_set_new(ja, "kv_v", json_string(R->arms[a].kv_v));
        json_object_set_new(ja, "kv_bytes_per_token", jreal(R->arms[a].kv_bytes));
        json_object_set_new(ja, "role", json_string(needle_role_name(R->arms[a].role)));
        for (int set = 0; set < A->n_sets; set++) {
            const needle_arm_stat *S = needle_stat_at(A, R, set, a);
            json_t *js = json_object(), *grid = json_array();
            json_object_set_new(js, "n", json_integer((json_int_t)S->n));
            json_object_set_new(js, "exact", json_integer((json_int_t)S->exact));
            json_object_set_new(js, "accuracy", jci(&S->acc));
            json_object_set_new(js, "mean_logprob", jreal(S->mean_lp));
            for (int li = 0; li < R->n_lengths; li++)
                for (int pi = 0; pi < R->n_positions; pi++) {
                    size_t g = (size_t)li * (size_t)R->n_positions + (size_t)pi;
                    json_array_append_new(grid, json_pack("{s:i,s:i,s:I,s:I,s:o}", "length", R->lengths[li],
                        "position", R->positions[pi], "n", (json_int_t)S->g_n[g], "exact",
                        (json_int_t)S->g_exact[g], "delta_logprob_mean", jreal(S->g_dlp[g])));
                }
            json_object_set_new(js, "grid", grid);
            if (a != R->ref) {
                char w0[64], w1[64];
                needle_verdict_words(S->v_acc, 0, w0, sizeof w0);
                needle_verdict_words(S->v_lp, 1, w1, sizeof w1);
                json_object_set_new(js, "vs_ref", json_pack(
                    "{s:I,s:I,s:I,s:I,s:I,s:I,s:o,s:o,s:o,s:o,s:o,s:s,s:o,s:o,s:o,s:s,s:I}", "pairs",
                    (json_int_t)S->pairs, "only_arm", (json_int_t)S->b, "only_ref", (json_int_t)S->c,
                    "ref_exact", (json_int_t)S->ref_exact, "units", (json_int_t)S->units, "differing_units",
                    (json_int_t)S->disc_units, "accuracy_diff", jreal(S->diff), "signflip_p", jreal(S->p),
                    "signflip_p_holm", jreal(S->p_holm), "accuracy_mdd", jreal_inf(S->mdd), "accuracy_bound",
                    jreal(S->bound), "accuracy_verdict", w0, "delta_logprob_mean", jboot(&S->dlp),
                    "delta_logprob_p_holm", jreal(S->dlp_holm), "delta_logprob_mdd", jreal(S->dlp_mdd),
                    "logprob_verdict", w1, "identical", (json_int_t)S->identical));
            }
            json_object_set_new(sets, needle_set_name(R, A, set), js);
        }
        json_object_set_new(ja, "sets", sets);
        json_array_append_new(arms, ja);
    }
    json_object_set_new(root, "arms", arms);
    for (int i = 0; i < n_cl; i++)
        json_array_append_new(claims, json_pack("{s:s,s:s,s:s,s:s,s:s}", "arm", cl[i].arm, "set", cl[i].set,
            "claim", cl[i].claim, "verdict", cl[i].words, "evidence", cl[i].evidence));
    json_object_set_new(root, "claims", claims);
    return root;
}
