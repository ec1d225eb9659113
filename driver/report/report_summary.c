/* report_summary.c — summary.json: every statistic of report_analysis.c and every claim of
 * report_claims.c as one JSON document (NaN and inf become null), for machines to read.
 * report.c writes it to DIR/summary.json. */
#include "driver/report/report_internal.h"

#include <math.h>

#include <jansson.h>

/* A number, or null for NaN/inf (JSON has no NaN). */
static json_t *jreal(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *jci(const stats_ci *c) {
    return json_pack("{s:o,s:o,s:o,s:I}", "est", jreal(c->est), "lo", jreal(c->lo), "hi",
                     jreal(c->hi), "n", (json_int_t)c->n);
}

static json_t *jset(const report_set *s, int with_depth) {
    static const char *const pct_names[STATS_N_PCT] = {"max", "p99.9", "p99", "p95", "p90",
                                                       "p50", "p10", "p5", "p1", "p0.1", "min"};
    json_t *o = json_object();
    json_object_set_new(o, "n", json_integer((json_int_t)s->n));
    json_object_set_new(o, "kl_arm_ref_mean", jci(&s->kl));
    json_object_set_new(o, "kl_arm_ref_median", jci(&s->kl_med));
    json_t *p = json_object();
    for (int k = 0; k < STATS_N_PCT; k++) json_object_set_new(p, pct_names[k], jreal(s->pct[k]));
    json_object_set_new(o, "kl_arm_ref_percentiles", p);
    json_object_set_new(o, "kl_ref_arm_mean", jci(&s->klr));
    json_object_set_new(o, "js_mean", jci(&s->js));
    json_object_set_new(o, "top1_agreement", jci(&s->top1));
    json_object_set_new(o, "delta_nll_mean", jci(&s->dnll));
    json_object_set_new(o, "spearman_kl_entropy_ref", jci(&s->sp_ent));
    json_object_set_new(o, "spearman_kl_gap_ref", jci(&s->sp_gap));
    json_object_set_new(o, "near_tie", json_pack("{s:o,s:I,s:I,s:I,s:I,s:o,s:o,s:o,s:o,s:o}",
        "eps", jreal(s->tie.eps), "n", (json_int_t)s->tie.n, "n_near", (json_int_t)s->tie.n_near,
        "n_flips", (json_int_t)s->tie.n_flips, "n_flips_near", (json_int_t)s->tie.n_flips_near,
        "kl_total", jreal(s->tie.kl_total), "kl_near", jreal(s->tie.kl_near),
        "share_positions_near", jreal(s->tie.share_pos_near),
        "share_flips_near", jreal(s->tie.share_flips_near),
        "share_kl_near", jreal(s->tie.share_kl_near)));
    json_object_set_new(o, "floor_kl_mean", jreal(s->floor_mean));
    json_object_set_new(o, "n_floor", json_integer((json_int_t)s->n_floor));
    json_object_set_new(o, "n_identical", json_integer((json_int_t)s->n_identical));
    if (with_depth) {
        const stats_fit *f = &s->slope;
        json_object_set_new(o, "log10_kl_slope_per_1k_tokens", json_pack(
            "{s:o,s:o,s:o,s:o,s:o,s:I,s:I}", "slope", jreal(f->slope), "lo", jreal(f->lo),
            "hi", jreal(f->hi), "intercept", jreal(f->intercept), "r2", jreal(f->r2),
            "n", (json_int_t)f->n, "n_floored_at_1e-12", (json_int_t)f->n_floored));
        const stats_km *k = &s->km;
        json_t *steps = json_array();
        for (size_t j = 0; j < k->n_steps; j++)
            json_array_append_new(steps, json_pack("{s:i,s:I,s:I,s:o,s:o,s:o}", "t", k->time[j],
                "at_risk", (json_int_t)k->at_risk[j], "events", (json_int_t)k->events[j],
                "surv", jreal(k->surv[j]), "lo", jreal(k->lo[j]), "hi", jreal(k->hi[j])));
        json_object_set_new(o, "fork_survival", json_pack(
            "{s:I,s:I,s:I,s:i,s:o,s:o,s:o,s:o,s:o}", "n", (json_int_t)k->n_obs,
            "n_forked", (json_int_t)k->n_events, "n_identical", (json_int_t)k->n_censored,
            "horizon", k->horizon, "median_fork", jreal(k->median),
            "median_fork_lo", jreal(k->median_lo), "median_fork_hi", jreal(k->median_hi),
            "surv_end", jreal(k->surv_end), "steps", steps));
    }
    return o;
}

/* Builds the summary document (see report_internal.h). */
json_t *report_summary_build(const report_results *R, const report_analysis *A, const report_verdicts *V) {
    json_t *root = json_object();
    if (!root) return NULL;
    json_object_set_new(root, "strata_summary_version", json_integer(1));
    json_object_set_new(root, "tag", json_string(R->tag));
    json_object_set_new(root, "date", json_string(R->date));
    json_object_set_new(root, "ref", json_string(R->arms[R->ref].name));
    json_object_set_new(root, "floor_arm", R->floor >= 0 ? json_string(R->arms[R->floor].name)
                                                         : json_null());
    json_object_set_new(root, "fork_n", json_integer(R->fork_n));
    json_object_set_new(root, "per_position_measured", json_boolean(R->have_positions));
    json_object_set_new(root, "complete", json_boolean(R->complete));
    json_object_set_new(root, "depths_planned", json_integer(R->depths_planned));
    json_object_set_new(root, "depths_measured", json_integer(R->depths_measured));
    json_object_set_new(root, "pin_experts", R->pin_experts < 0 ? json_null() : json_boolean(R->pin_experts));
    json_t *why = json_array();
    for (int i = 0; i < R->n_reasons; i++) json_array_append_new(why, json_string(R->reasons[i]));
    json_object_set_new(root, "incomplete_reasons", why);
    json_object_set_new(root, "settings", json_pack(
        "{s:f,s:s,s:i,s:I,s:s,s:f,s:f,s:f,s:s,s:s,s:s,s:s,s:s}",
        "ci_level", 0.95,
        "bootstrap", "circular block (means, spread to Student-t on k-1 df); moving-block (medians); percentile interval",
        "bootstrap_resamples", STATS_BOOT_B, "bootstrap_seed", (json_int_t)STATS_BOOT_SEED,
        "block_length", "Politis-White over rows ordered by depth or position",
        "floor_factor", REPORT_FLOOR_FACTOR, "near_tie_eps", REPORT_NEAR_TIE_EPS,
        "log10_kl_floor", 1e-12,
        "percentiles", "gsl_stats_quantile_from_sorted_data (linear between order statistics)",
        "proportion_ci", "Wilson score",
        "slope_ci", "OLS (gsl_fit_linear) with Student t, x = depth / 1000",
        "spearman_ci", "Fisher z, var = 1.06/(n-3)",
        "fork_survival", "Kaplan-Meier, Greenwood linear CI clamped to [0,1]"));
    json_t *arms = json_array();
    json_object_set_new(root, "arms", arms);
    json_t *claims = json_array();
    for (int i = 0; i < R->n_arms; i++) {
        const report_arm *a = &R->arms[i];
        const report_arm_an *X = &A->a[i];
        json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:o,s:s}", "name", a->name, "label", X->label,
                              "kv_k", a->kv_k, "kv_v", a->kv_v, "kv_bytes_per_token",
                              jreal(a->kv_bytes), "role", report_arm_role(R, i));
        json_array_append_new(arms, o);
        if (isfinite(a->route_n))   /* MoE: teacher-forced routing decisions against the reference's */
            json_object_set_new(o, "routing", json_pack("{s:I,s:I,s:o}", "decisions", (json_int_t)a->route_n,
                "differ", (json_int_t)a->route_diff, "fraction",
                a->route_n > 0 ? jreal(a->route_diff / a->route_n) : json_null()));
        if (i == R->ref) continue;
        if (a->base >= 0)
            json_object_set_new(o, "repeat_check", json_pack("{s:s,s:b,s:s}", "base",
                R->arms[a->base].name, "bit_identical", X->repeat == 1, "detail", X->repeat_detail));
        json_t *pd = json_array();
        for (size_t j = 0; j < X->nd; j++) {
            const report_depth *d = &R->drows[X->d0 + j];
            json_array_append_new(pd, json_pack(
                "{s:i,s:o,s:o,s:o,s:b,s:o,s:o,s:i,s:b,s:o,s:o,s:o}", "depth", d->depth,
                "kl_arm_ref", jreal(d->kl_ar), "kl_ref_arm", jreal(d->kl_ra), "js", jreal(d->js),
                "same_top1", d->same, "nll_arm", jreal(d->nll_arm), "nll_ref", jreal(d->nll_ref),
                "fork", d->fork, "censored", d->censored, "fork_gap_arm", jreal(d->fgap_arm),
                "fork_gap_ref", jreal(d->fgap_ref), "floor_kl", jreal(X->floor_kl[j])));
        }
        json_object_set_new(o, "per_depth", pd);
        json_object_set_new(o, "over_depths", jset(&X->dep, 1));
        json_object_set_new(o, "over_positions", X->np ? jset(&X->pos, 0) : json_null());
        if (!report_is_test_arm(R, i)) continue;
        report_claim cl[REPORT_MAX_CLAIMS];
        int nc = report_arm_claims(R, A, V, i, cl);
        for (int c = 0; c < nc; c++)
            json_array_append_new(claims, json_pack("{s:s,s:s,s:s,s:s}", "arm", a->name, "claim",
                cl[c].claim, "verdict", report_verdict_name(cl[c].verdict), "evidence",
                cl[c].evidence));
    }
    json_object_set_new(root, "claims", claims);
    return root;
}
