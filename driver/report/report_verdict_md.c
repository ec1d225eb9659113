/* report_verdict_md.c — the verdicts of report_verdict.c as text: the README's "The answer first"
 * (right after the title) and "Depth bins", and summary.json's "verdicts" (docs/DESIGN.md §4.15).
 * Allocates nothing that outlives a call. */
#include "driver/report/report_internal.h"
#include "driver/report/report_passages.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* The words with the margin beside them: "equivalent within ±1 % PPL", "lower, within ±1 pp",
 * "higher (margin ±1 % PPL)", "no detected difference (margin ±1 pp)". */
static void verdict_words(stats_verdict v, double margin, const char *unit, char *buf, size_t len) {
    if (v == STATS_EQUIVALENT || v == STATS_EQUIVALENT_LOWER || v == STATS_EQUIVALENT_HIGHER) {
        char w[96];
        stats_verdict_format(v, margin, w, sizeof w);
        snprintf(buf, len, "%s%s", w, unit);
    } else if (margin > 0) {
        snprintf(buf, len, "%s (margin ±%.3g%s)", stats_verdict_word(v), margin, unit);
    } else {
        snprintf(buf, len, "%s", stats_verdict_word(v));
    }
}

static void sig2(double v, char *buf, size_t len) { report_fmt_sig2(v, buf, len); }

/* "est [lo, hi]" of a bootstrap, 2 significant digits. */
static void fmt_boot(const stats_boot *b, char *buf, size_t len) {
    stats_ci c = {b->est, b->lo, b->hi, b->n};
    report_fmt_ci(&c, buf, len);
}

/* A percentage with sign and 2 decimals from a fraction Δ NLL: 100·(exp(x) − 1). */
static double ppl(double dnll) { return 100.0 * expm1(dnll); }

/* The RoPE angle mode of the run: meta.json "rope_angles", else the --rope-angles of its
 * invocation, else an arm's device "+rope-f32"; NULL when the folder does not say (before exact
 * angles became the default, git cb1ace0, every run used llama.cpp's f32 angles, and its meta.json
 * does not record them). */
static const char *rope_mode(const report_results *R) {
    json_t *r = json_object_get(R->meta, "rope_angles");
    if (json_is_string(r)) return json_string_value(r);
    json_t *argv = json_object_get(json_object_get(R->meta, "invocation"), "argv");
    for (size_t i = 0; i + 1 < json_array_size(argv); i++) {
        const char *a = json_string_value(json_array_get(argv, i));
        if (a && !strcmp(a, "--rope-angles") && json_string_value(json_array_get(argv, i + 1)))
            return json_string_value(json_array_get(argv, i + 1));
        if (a && !strncmp(a, "--rope-angles=", 14)) return a + 14;
    }
    json_t *arms = json_object_get(R->meta, "arms");
    for (size_t i = 0; i < json_array_size(arms); i++) {
        const char *dev = json_string_value(json_object_get(json_array_get(arms, i), "device"));
        if (dev && strstr(dev, "+rope-f32")) return "f32";
    }
    return NULL;
}

/* The model's sliding window from meta.json "model" (window, layers_full_context; recorded since
 * the handshake carried them): 1 with *w in [1, INT32_MAX], *full in [0, n_layer) and *nl = n_layer
 * in [1, 4096], or 0 (absent, window 0, or out of range: the README then says nothing of it). */
static int sliding_window(const report_results *R, json_int_t *w, json_int_t *full, json_int_t *nl) {
    json_t *m = json_object_get(R->meta, "model");
    json_t *jw = json_object_get(m, "window"), *jf = json_object_get(m, "layers_full_context");
    json_t *jl = json_object_get(m, "n_layer");
    if (!json_is_integer(jw) || !json_is_integer(jf) || !json_is_integer(jl)) return 0;
    *w = json_integer_value(jw);
    *full = json_integer_value(jf);
    *nl = json_integer_value(jl);
    return *w >= 1 && *w <= INT32_MAX && *nl >= 1 && *nl <= 4096 && *full >= 0 && *full < *nl;
}

/* The sliding window's sentence of "Not supported by this run" (nothing without one): the layers
 * that slide read only the last W cached positions at every depth, so the cache older than W is
 * read by the full-context layers alone and a depth effect past W is a property of their reads. */
static void line_window(FILE *o, const report_results *R) {
    json_int_t w, full, nl;
    if (!sliding_window(R, &w, &full, &nl)) return;
    long long W = (long long)w, F = (long long)full, L = (long long)nl;
    fprintf(o, " Sliding window: %lld of the %lld layers read%s only the last %lld positions of the KV cache", L - F,
            L, L - F == 1 ? "s" : "", W);
    const char *ls = F == 1 ? "" : "s";
    if (R->last_depth <= W && F) {
        fprintf(o, ", a limit no depth of this run exceeds (deeper, positions more than %lld tokens back would be "
                "read by %lld layer%s alone).", W, F, ls);
    } else if (R->last_depth <= W) {
        fprintf(o, ", a limit no depth of this run exceeds (deeper, no layer would read positions more than %lld "
                "tokens back).", W);
    } else if (F) {
        fprintf(o, ", so positions more than %lld tokens back are read by %lld layer%s alone: a depth effect past "
                "%lld tokens is a property of ", W, F, ls, W);
        if (F == 1) fprintf(o, "that layer's reads.");
        else fprintf(o, "those %lld layers' reads.", F);
    } else {
        fprintf(o, ", so no layer reads positions more than %lld tokens back: a depth effect past %lld tokens cannot "
                "come from reading them.", W, W);
    }
}

static int uses_format(const report_results *R, const char *f) {
    for (int i = 0; i < R->n_arms; i++)
        if (strstr(R->arms[i].kv_k, f) == R->arms[i].kv_k || strstr(R->arms[i].kv_v, f) == R->arms[i].kv_v) return 1;
    return 0;
}

/* Line (1): distribution, floor, ladder. */
static void line_distribution(FILE *o, const report_results *R, const report_analysis *A, const report_verdicts *V,
                              int a) {
    const report_arm_verdict *v = &V->v[a];
    char kl[96], fl[32], x[32];
    fmt_boot(&v->kl, kl, sizeof kl);
    fprintf(o, "- **Distribution:** mean KL(%s‖%s) %s over %zu %s", A->a[a].label, A->ref_label, kl, v->n,
            v->over_positions ? "positions" : "depths");
    if (a != R->floor && !isnan(v->floor) && v->floor > 0) {
        sig2(v->floor, fl, sizeof fl);
        double r = v->kl.est / v->floor;
        snprintf(x, sizeof x, r >= 100 ? "%.0f" : "%.2g", r);
        fprintf(o, ", %s× the fp32 floor (%s)", x, fl);
        if (v->kl.lo > REPORT_FAR_FACTOR * v->floor)
            fprintf(o, ": **distinguishable in distribution** (the interval's lower end is above %.0f× the floor)",
                    REPORT_FAR_FACTOR);
        else if (v->kl.hi <= REPORT_FAR_FACTOR * v->floor)
            fprintf(o, ": **within %.0f× the floor** (as close to %s as fp32 rounding is, in order of magnitude)",
                    REPORT_FAR_FACTOR, A->ref_label);
        else fprintf(o, ": not decided against %.0f× the floor (the interval straddles it)", REPORT_FAR_FACTOR);
    } else if (a == R->floor) {
        fprintf(o, ": this is the noise floor (fp32 against the %s reference)", A->ref_label);
    } else {
        fprintf(o, " (no f32 arm: no floor)");
    }
    /* the ladder: the other arms of this run, by mean KL */
    int below = -1, above = -1, n_l = 0;
    for (int j = 0; j < R->n_arms; j++) {
        const report_arm_verdict *w = &V->v[j];
        if (j == a || !w->valid || isnan(w->kl.est)) continue;
        n_l++;
        if (w->kl.est <= v->kl.est && (below < 0 || w->kl.est > V->v[below].kl.est)) below = j;
        if (w->kl.est > v->kl.est && (above < 0 || w->kl.est < V->v[above].kl.est)) above = j;
    }
    if (n_l) {
        char b1[32], b2[32];
        if (below >= 0) sig2(V->v[below].kl.est, b1, sizeof b1);
        if (above >= 0) sig2(V->v[above].kl.est, b2, sizeof b2);
        fprintf(o, ". Ladder of the %d other arm%s of this run: ", n_l, n_l == 1 ? "" : "s");
        if (below >= 0 && above >= 0)
            fprintf(o, "between %s (%s) and %s (%s)", A->a[below].label, b1, A->a[above].label, b2);
        else if (below >= 0) fprintf(o, "above all, the next below is %s (%s)", A->a[below].label, b1);
        else fprintf(o, "below all, the next above is %s (%s)", A->a[above].label, b2);
    }
    fprintf(o, ".\n");
}

/* Line (2): practical equivalence. */
static void line_practical(FILE *o, const report_results *R, const report_verdicts *V, int a) {
    const report_arm_verdict *v = &V->v[a];
    char w[160], r[64], fr[64];
    verdict_words(v->v_ppl, V->m.ppl_pct, " % PPL", w, sizeof w);
    fprintf(o, "- **Practical:** PPL change %+.2f %% [%+.2f %%, %+.2f %%] (90 %% interval [%+.2f %%, %+.2f %%]): "
            "**%s**", ppl(v->dnll.est), ppl(v->dnll.lo), ppl(v->dnll.hi), ppl(v->dnll.lo90), ppl(v->dnll.hi90), w);
    verdict_words(v->v_top1, V->m.top1_pp, " pp", w, sizeof w);
    fprintf(o, "; top-1 agreement %.2f %% (%+.2f pp, TOST interval [%+.2f, %+.2f] pp): **%s**",
            100.0 * (1 + v->dtop1.est), 100.0 * v->dtop1.est, 100.0 * v->dtop1.lo90, 100.0 * v->dtop1.hi90, w);
    report_fmt_pct_ci(&v->near_rate, r, sizeof r);
    fprintf(o, "; top-1 flips among the %zu near ties (reference gap < %.2g): %zu, %s", v->n_near,
            REPORT_NEAR_TIE_EPS, v->n_near_flips, v->n_near ? r : REPORT_NA);
    if (a != R->floor && !isnan(v->floor_near_rate.est)) {
        report_fmt_pct_ci(&v->floor_near_rate, fr, sizeof fr);
        fprintf(o, " (fp32: %s)", fr);
    }
    fprintf(o, ".\n");
}

/* Line (3): growth with depth. */
static void line_depth(FILE *o, const report_results *R, const report_verdicts *V, int a) {
    const report_arm_verdict *v = &V->v[a];
    if (v->from_passages) {   /* the controlled design (passages.tsv) decides when present */
        const report_depth_trend *t = v->from_passages;
        fprintf(o, "- **Depth (controlled design, passages.tsv):** KL%s %s: the same %d passages scored after "
                "each of %d depths from %d to %d tokens of context, a log-log fit's ratio over that span ×%.2g "
                "[%.2g, %.2g] (95 %% CI, paired bootstrap over the passages; the two end depths alone ×%.2g "
                "[%.2g, %.2g]; see *Depth from passages*).\n", t->ratio.lo > 1 || t->ratio.hi < 1 ? "" : ":",
                report_passages_word(t), t->n_passages, t->n_depths, t->depth_first, t->depth_last,
                t->ratio.est, t->ratio.lo, t->ratio.hi, t->endpoint.est, t->endpoint.lo, t->endpoint.hi);
        return;
    }
    if (!v->over_positions) {
        fprintf(o, "- **Depth:** not estimated: this run has %d depth rows of one position each and no "
                "positions.tsv, and a trend is not fitted to %d single positions.\n", report_count_depths(R),
                report_count_depths(R));
        return;
    }
    if (v->n_bins < 2 || isnan(v->ratio.est)) {
        fprintf(o, "- **Depth:** not estimated (fewer than two depth bins with a positive mean KL).\n");
        return;
    }
    const report_bin *f = &v->bins[0], *d = &v->bins[v->n_bins - 1];
    char fk[96], dk[96], wd[64];
    fmt_boot(&f->kl, fk, sizeof fk);
    fmt_boot(&d->kl, dk, sizeof dk);
    const char *w = v->v_ratio == STATS_HIGHER ? "higher: KL grows with depth"
                    : v->v_ratio == STATS_LOWER ? "lower: KL falls with depth"
                    : stats_verdict_word(v->v_ratio);
    snprintf(wd, sizeof wd, "%s", w);
    fprintf(o, "- **Depth:** the deepest bin (positions %d–%d) mean KL %s against the first (%d–%d) %s: "
            "ratio ×%.2g [%.2g, %.2g], **%s** (whole Politis–White blocks within each bin resampled; the "
            "bins are different text, so content and depth are not separated).\n", d->lo, d->hi - 1, dk,
            f->lo, f->hi - 1, fk, v->ratio.est, v->ratio.lo, v->ratio.hi, wd);
}

/* Line (4): what a fork costs. */
static void line_fork(FILE *o, const report_analysis *A, const report_verdicts *V, int a) {
    const report_arm_verdict *v = &V->v[a];
    if (!v->have_fork) return;
    if (!v->n_forked) {
        fprintf(o, "- **Fork cost:** nothing to score: the greedy text never forked at the %zu depths.\n",
                v->n_fork_depths);
        return;
    }
    char w[160];
    verdict_words(v->v_fork, v->fork_margin, " nats/token", w, sizeof w);
    fprintf(o, "- **Fork cost:** over the %zu of %zu depths where the greedy text forked (identical texts, "
            "Δ = 0 by construction, left out), Δ NLL of its text under %s %+.3f [%+.3f, %+.3f] nats/token: "
            "**%s**; the margin is %s", v->n_forked, v->n_fork_depths, A->ref_label, v->fork.est, v->fork.lo,
            v->fork.hi, w, v->fork_margin_src);
    double mm = stats_tost_min_margin(v->fork.se, 0.05, 0.8);
    if (isfinite(mm) && mm > 0) fprintf(o, " (with this spread, a margin below ±%.2g could not be shown)", mm);
    fprintf(o, ".\n");
}

void report_verdicts_readme(FILE *o, const report_results *R, const report_analysis *A, const report_verdicts *V) {
    char sha[16];
    snprintf(sha, sizeof sha, "%.12s", R->model_sha);
    fprintf(o, "## The answer first\n\nEach arm against the %s reference on `", A->ref_label);
    report_md_cell(o, report_model_name(R));
    fprintf(o, "` (sha256 `%s…`), one text (`", sha);
    report_md_cell(o, R->doc_path[0] ? strrchr(R->doc_path, '/') ? strrchr(R->doc_path, '/') + 1 : R->doc_path : "?");
    fprintf(o, "`), depths up to %d tokens. Margins (from %s; `report --margin-ppl`, `--margin-top1`): "
            "PPL ±%.3g %%, top-1 agreement ±%.3g percentage points (pp); TOST at 5 %% each side, 95 %% "
            "intervals from a circular block bootstrap (%s).\n\n", R->last_depth, V->m.src, V->m.ppl_pct,
            V->m.top1_pp, R->have_positions ? "Politis–White blocks over positions" : "block 1 over depths");
    int any = 0;
    for (int a = 0; a < R->n_arms; a++) {
        if (!V->v[a].valid) continue;
        any = 1;
        fprintf(o, "**%s** (arm %s%s):\n\n", A->a[a].label, R->arms[a].name, a == R->floor ? ", the noise floor" : "");
        line_distribution(o, R, A, V, a);
        line_practical(o, R, V, a);
        line_depth(o, R, V, a);
        line_fork(o, A, V, a);
        fprintf(o, "\n");
    }
    if (!any) fprintf(o, "No test arm with measured rows.\n\n");
    fprintf(o, "Not supported by this run: other models than `");
    report_md_cell(o, report_model_name(R));
    fprintf(o, "`, other texts, depths beyond %d tokens, other KV formats than those above, sampled (not greedy) "
            "continuations%s.", R->last_depth, R->have_positions ? "" : ", and any trend with depth");
    line_window(o, R);
    if (uses_format(R, "int8"))
        fprintf(o, " `int8` here is strata's own format: symmetric absmax groups of 64 values (one group per head "
                "when the head dimension is at most 64) with one fp16 scale each, 8.25 bits per value at 64-value "
                "groups (kernels/kv.h) — not llama.cpp's q8_0 (32-value blocks, 8.5 bits).");
    const char *rm = rope_mode(R);
    if (rm) {
        fputs(" RoPE angles: `", o);
        report_md_cell(o, rm);
        fprintf(o, "`%s.\n\n", !strcmp(rm, "f32") ? " (llama.cpp's f32 angles)" : !strcmp(rm, "exact")
                ? " (double precision, rounded once)" : "");
    } else {
        fprintf(o, " RoPE angles: not recorded in this folder's meta.json.\n\n");
    }
}

/* ============================================================================================
 * plots/kl_bins: mean KL per depth bin with its 95 % band, one series per arm
 * ========================================================================================== */

static const char *const bin_palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                          "#8c564b", "#e377c2", "#17becf"};

int report_bins_plot(const char *dir, const report_results *R, const report_analysis *A,
                     const report_verdicts *V, int *drawn, char *err, size_t errlen) {
    static const char *const ext[] = {"gp", "png", "svg"};
    report_outdir pd;
    char name[64];
    int rc = -1, n = 0;
    FILE *g = NULL, *d = NULL;
    *drawn = 0;
    if (report_outdir_open(&pd, dir, "plots", err, errlen)) return -1;
    for (int e = 0; e < 3; e++) {
        snprintf(name, sizeof name, "kl_bins.%s", ext[e]);
        report_outdir_remove(&pd, name);
    }
    for (int a = 0; a < R->n_arms; a++) n += V->v[a].valid && V->v[a].n_bins > 0;
    if (!n) { rc = 0; goto done; }
    g = report_outdir_create(&pd, "kl_bins.gp", err, errlen);
    if (!g) goto done;
    fprintf(g, "# kl_bins.gp: rendered by strata (report_render); run: gnuplot kl_bins.gp\n"
            "set terminal pngcairo size 1000,620 font \"DejaVu Sans,11\" noenhanced\n"
            "set output \"kl_bins.png\"\nset datafile missing \"?\"\nset title \"Mean KL per depth bin, 95%% "
            "band (");
    report_gp_put(g, R->tag);
    fprintf(g, ")\"\nset xlabel \"Position (middle of the depth bin)\"\nset ylabel \"Mean KL(arm‖ref) (nats, log "
            "scale)\"\nset grid\nset key outside top center horizontal box\nset logscale y\nset format y \"%%.0e\"\n"
            "set style fill transparent solid 0.2 noborder\nplot ");
    int k = 0;
    for (int a = 0; a < R->n_arms; a++) {
        const report_arm_verdict *v = &V->v[a];
        if (!v->valid || !v->n_bins) continue;
        snprintf(name, sizeof name, "kl_bins_%d.dat", a);
        d = report_outdir_create(&pd, name, err, errlen);
        if (!d) goto done;
        fprintf(d, "# position_mid mean_kl lo hi\n");
        for (int b = 0; b < v->n_bins; b++) {
            const report_bin *B = &v->bins[b];
            double x[3] = {B->kl.est, B->kl.lo, B->kl.hi};
            fprintf(d, "%.1f", 0.5 * (B->lo + B->hi - 1));
            for (int j = 0; j < 3; j++)
                if (isfinite(x[j]) && x[j] > 0) fprintf(d, " %.9g", x[j]);
                else fputs(" ?", d);
            fputc('\n', d);
        }
        int bad = fclose(d) != 0;
        d = NULL;
        if (bad) { errmsg_set(err, errlen, -1, "write error in %s/%s", pd.path, name); goto done; }
        const char *col = a == R->floor ? "#7f7f7f" : bin_palette[k % 8];
        fprintf(g, "%s\"%s\" using 1:3:4 with filledcurves lc rgb \"%s\" notitle, \"%s\" using 1:2 with linespoints "
                "lw 2 pt 7 lc rgb \"%s\" title \"", k ? ", " : "", name, col, name, col);
        report_gp_put(g, A->a[a].label);
        fputs("\"", g);
        k++;
    }
    fprintf(g, "\nset terminal svg size 1000,620 font \"DejaVu Sans,11\" noenhanced\n"
            "set output \"kl_bins.svg\"\nreplot\nunset output\n");
    int bad = fclose(g) != 0;
    g = NULL;
    if (bad) { errmsg_set(err, errlen, -1, "write error in %s/kl_bins.gp", pd.path); goto done; }
    if (report_gnuplot_run(&pd, "kl_bins", err, errlen)) goto done;
    *drawn = report_outdir_nonempty(&pd, "kl_bins.png") && report_outdir_nonempty(&pd, "kl_bins.svg");
    if (!*drawn) {
        errmsg_set(err, errlen, -1, "gnuplot did not write %s/kl_bins.png (see gnuplot.log)", pd.path);
        goto done;
    }
    rc = 0;
done:
    if (d) fclose(d);
    if (g) fclose(g);
    report_outdir_close(&pd);
    return rc;
}

void report_bins_readme(FILE *o, const report_results *R, const report_analysis *A, const report_verdicts *V,
                        int drawn) {
    int any = 0;
    for (int a = 0; a < R->n_arms; a++) any |= V->v[a].valid && V->v[a].n_bins > 0;
    if (!any) return;
    fprintf(o, "## Depth bins\n\nEvery position, binned by the sweep's depth intervals: mean KL(arm‖%s) with a "
            "95 %% circular block bootstrap interval (Politis–White block length, within the bin), top-1 "
            "agreement, Δ NLL as PPL change (exp(mean Δ NLL) − 1), and the top-1 flip rate among the near ties "
            "(positions whose reference top-1/top-2 gap is < %.2g; Wilson interval). Each bin is a different "
            "stretch of the text.\n\n", A->ref_label, REPORT_NEAR_TIE_EPS);
    if (drawn)
        fprintf(o, "Mean KL per bin with its 95 %% band ([script](plots/kl_bins.gp)):\n\n"
                "![Mean KL per depth bin](plots/kl_bins.png)\n\n");
    for (int a = 0; a < R->n_arms; a++) {
        const report_arm_verdict *v = &V->v[a];
        if (!v->valid || !v->n_bins) continue;
        fprintf(o, "### %s (arm %s)\n\n| Positions | n | Mean KL [95 %%] | Same top-1 | PPL change | Near ties | "
                "Flips among near ties |\n|---|---:|---:|---:|---:|---:|---:|\n", A->a[a].label, R->arms[a].name);
        for (int b = 0; b < v->n_bins; b++) {
            const report_bin *B = &v->bins[b];
            char kl[96], nr[64];
            fmt_boot(&B->kl, kl, sizeof kl);
            report_fmt_pct_ci(&B->near_rate, nr, sizeof nr);
            fprintf(o, "| %d–%d | %zu | %s | %.2f%% | ", B->lo, B->hi - 1, B->n, kl, 100.0 * B->top1);
            if (isnan(B->ppl_pct)) fprintf(o, REPORT_NA);
            else fprintf(o, "%+.2f%%", B->ppl_pct);
            fprintf(o, " | %zu | %s |\n", B->n_near, B->n_near ? nr : REPORT_NA);
        }
        fprintf(o, "\n");
    }
}

/* ============================================================================================
 * summary.json
 * ========================================================================================== */

static json_t *jr(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *jboot(const stats_boot *b) {
    return json_pack("{s:o,s:o,s:o,s:o,s:o,s:I,s:I}", "est", jr(b->est), "lo", jr(b->lo), "hi", jr(b->hi),
                     "lo90", jr(b->lo90), "hi90", jr(b->hi90), "n", (json_int_t)b->n, "block", (json_int_t)b->block);
}

int report_verdicts_summary(json_t *root, const report_results *R, const report_analysis *A,
                            const report_verdicts *V) {
    json_t *o = json_object();
    if (!o) return -1;
    json_object_set_new(o, "margins", json_pack("{s:f,s:f,s:s,s:f}", "ppl_pct", V->m.ppl_pct, "top1_pp",
                                                V->m.top1_pp, "source", V->m.src, "far_factor", REPORT_FAR_FACTOR));
    json_t *arms = json_object();
    for (int a = 0; a < R->n_arms; a++) {
        const report_arm_verdict *v = &V->v[a];
        if (!v->valid) continue;
        json_t *j = json_object();
        json_object_set_new(j, "label", json_string(A->a[a].label));
        json_object_set_new(j, "over", json_string(v->over_positions ? "positions" : "depths"));
        json_object_set_new(j, "kl_mean", jboot(&v->kl));
        json_object_set_new(j, "floor_kl_mean", jr(v->floor));
        json_object_set_new(j, "distinguishable", a == R->floor || isnan(v->floor) ? json_null()
                            : json_boolean(v->kl.lo > REPORT_FAR_FACTOR * v->floor));
        json_object_set_new(j, "delta_nll_mean", jboot(&v->dnll));
        json_object_set_new(j, "ppl_change_pct", jr(ppl(v->dnll.est)));
        json_object_set_new(j, "ppl_verdict", json_string(stats_verdict_word(v->v_ppl)));
        json_object_set_new(j, "top1_diff", jboot(&v->dtop1));
        json_object_set_new(j, "top1_verdict", json_string(stats_verdict_word(v->v_top1)));
        json_object_set_new(j, "near_ties", json_pack("{s:I,s:I,s:o,s:o}", "n", (json_int_t)v->n_near, "flips",
                            (json_int_t)v->n_near_flips, "rate", jr(v->near_rate.est), "floor_rate",
                            jr(v->floor_near_rate.est)));
        if (v->n_bins) {
            json_t *bins = json_array();
            for (int b = 0; b < v->n_bins; b++) {
                const report_bin *B = &v->bins[b];
                json_array_append_new(bins, json_pack("{s:i,s:i,s:I,s:o,s:o,s:o,s:I,s:I}", "lo", B->lo, "hi", B->hi,
                                      "n", (json_int_t)B->n, "kl_mean", jboot(&B->kl), "top1", jr(B->top1),
                                      "ppl_change_pct", jr(B->ppl_pct), "n_near", (json_int_t)B->n_near,
                                      "near_flips", (json_int_t)B->n_near_flips));
            }
            json_object_set_new(j, "depth_bins", bins);
            json_object_set_new(j, "depth_ratio_last_first", jboot(&v->ratio));
            json_object_set_new(j, "depth_verdict", json_string(stats_verdict_word(v->v_ratio)));
        }
        if (v->have_fork)
            json_object_set_new(j, "fork_cost", json_pack("{s:I,s:I,s:o,s:o,s:s}", "depths", (json_int_t)v->n_fork_depths,
                                "forked", (json_int_t)v->n_forked, "delta_nll", jboot(&v->fork), "margin",
                                jr(v->fork_margin), "verdict", stats_verdict_word(v->v_fork)));
        json_object_set_new(arms, R->arms[a].name, j);
    }
    json_object_set_new(o, "arms", arms);
    json_int_t w, full, nl;
    if (sliding_window(R, &w, &full, &nl))   /* the README's sentence, as numbers */
        json_object_set_new(o, "sliding_window", json_pack("{s:I,s:I,s:I}", "window", w, "layers_full_context", full,
                                                           "n_layer", nl));
    return json_object_set_new(root, "verdicts", o) ? -1 : 0;
}
