/* report.c — report_render: turns a results folder's raw files into its derived files. It
 * loads them (report_tsv.c), computes the statistics (report_analysis.c), draws the plots
 * (report_plots.c), writes summary.json (report_summary.c) and renders README.md, which is
 * this file's own job: setup, depth tables, repeat check, statistics, claims
 * (report_claims.c), plots, limitations, provenance.
 *
 * Reading order: README.md sections; readme_write; writing the files; report_render. */
#include "driver/report/report_internal.h"
#include "driver/report/report_passages.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

/* ============================================================================================
 * README.md sections
 * ========================================================================================== */

/* The setup table: model, reference and floor arms, depths, document, fork probe, provenance. */
static void setup_table(FILE *o, const report_results *R, const report_analysis *A) {
    fprintf(o, "## Setup\n\n| | |\n|---|---|\n");
    /* strings from meta.json: control bytes were escaped on loading, '|' is escaped here */
    fputs("| Model | `", o);
    report_md_cell(o, report_model_name(R));
    fputs("` — ", o);
    report_md_cell(o, R->model_arch);
    report_md_model_sizes(o, R->n_layer, R->n_vocab, R->n_ctx);
    fputs(" |\n| Model sha256 | `", o);
    report_md_cell(o, R->model_sha);
    fputs("` |\n", o);
    const report_arm *ra = &R->arms[R->ref];
    fprintf(o, "| Reference arm | %s (K %s, V %s) |\n", ra->name, ra->kv_k, ra->kv_v);
    if (R->floor >= 0)
        fprintf(o, "| Noise-floor arm | %s: KL(%s‖fp32) is shown beside every result |\n",
                R->arms[R->floor].name, A->ref_label);
    else
        fprintf(o, "| Noise-floor arm | none (no f32 arm): the noise floor is not measured |\n");
    fprintf(o, "| Depths | ");
    if (R->n_depths == 0) fprintf(o, "unknown");
    for (int i = 0; i < R->n_depths; i++) fprintf(o, "%s%d", i ? ", " : "", R->depths[i]);
    fputs(" |\n| Document | `", o);
    report_md_cell(o, R->doc_path);
    fputs("`, ", o);
    report_md_num(o, R->doc_tokens, " tokens");
    fputs(" — ", o);
    report_md_cell(o, R->doc_desc);
    fputs(" |\n", o);
    fprintf(o, "| Fork probe | %d greedy tokens per depth and arm (temperature 0), KV truncated "
            "back after each probe |\n", R->fork_n);
    if (R->have_positions)
        fprintf(o, "| Per-position metrics | measured (%zu rows in positions.tsv) |\n", R->n_prows);
    else
        fprintf(o, "| Per-position metrics | not measured (no positions.tsv) |\n");
    const char *const rows[4][2] = {{"Engine", R->engine}, {"Git", R->git}, {"Machine", R->machine}, {"Date", R->date}};
    for (int i = 0; i < 4; i++) {
        fprintf(o, "| %s | %s", rows[i][0], i == 1 ? "`" : "");
        report_md_cell(o, rows[i][1]);
        fprintf(o, "%s |\n", i == 1 ? "`" : "");
    }
    fprintf(o, "| Wall time | ");
    if (isnan(R->wall)) fprintf(o, "unknown");
    else fprintf(o, "%.1f s", R->wall);
    fprintf(o, " |\n\n");
}

/* The arms table: formats, KV bytes per token, role, own weights. */
static void setup_arms(FILE *o, const report_results *R) {
    fprintf(o, "| Arm | K cache | V cache | KV bytes per token | Role |\n|---|---|---|---:|---|\n");
    for (int i = 0; i < R->n_arms; i++) {
        const report_arm *a = &R->arms[i];
        fprintf(o, "| %s | %s | %s | ", a->name, a->kv_k, a->kv_v);
        report_md_num(o, a->kv_bytes, "");
        fprintf(o, " | %s%s%s", report_arm_role(R, i), a->base >= 0 ? " of " : "",
                a->base >= 0 ? R->arms[a->base].name : "");
        if (a->weight_arm) {
            fputs("; own weights `", o);
            report_md_cell(o, a->model_file[0] ? a->model_file : "?");
            fputs("`", o);
        }
        fprintf(o, " |\n");
    }
}

/* Which engine ran each arm, said only when llama.cpp ran one (the README of a strata-only run
 * stays as it was). */
static void setup_engines(FILE *o, const report_results *R) {
    int n_llama = 0;
    for (int i = 0; i < R->n_arms; i++) n_llama += !strncmp(R->arms[i].device, "llama.cpp", 9);
    if (n_llama) {
        fprintf(o, "\nEngines: ");
        for (int i = 0; i < R->n_arms; i++) {
            const report_arm *a = &R->arms[i];
            int ll = !strncmp(a->device, "llama.cpp", 9);
            fprintf(o, "%s%s %s (`%s`", i ? "; " : "", a->name, ll ? "llama.cpp" : "strata",
                    a->device[0] ? a->device : "?");
            if (ll && isfinite(a->bv_rows) && a->bv_rows > 0 && isfinite(a->bv_max))
                fprintf(o, ", batch variance %.3g logits over %.0f row%s", a->bv_max, a->bv_rows, a->bv_rows == 1 ? "" : "s");
            else if (ll && isfinite(a->bv_rows) && a->bv_rows > 0)
                fprintf(o, ", batch variance not finite over %.0f rows", a->bv_rows);
            else if (ll)
                fprintf(o, ", batch variance not measured");
            fputs(")", o);
        }
        fprintf(o, ". The llama.cpp arms measure llama.cpp's own KV cache and kernels (`llama:SPEC` arms, "
                "`--backend llama`): they differ from strata's arms in the engine as well as the KV format. "
                "llama.cpp is not batch-invariant in every configuration, so its arms prefill in chunks aligned "
                "to absolute positions (one pass still equals separate runs); the batch variance is the largest "
                "|logit difference| between a row computed at the end of a shorter chunk and the same row "
                "recomputed in its full chunk, the engine's own noise to set beside the KV effect "
                "(docs/DESIGN.md §1.1.1).\n");
    }
}

/* The notes on weight arms (--arm-model) and on a mixture-of-experts model's routing. */
static void setup_weights_routing(FILE *o, const report_results *R) {
    int n_weight = 0;
    for (int i = 0; i < R->n_arms; i++) n_weight += R->arms[i].weight_arm;
    if (n_weight)
        fprintf(o, "\nThe arm%s marked \"own weights\" ran %s own model file (`--arm-model`, same tokenizer and "
                "vocabulary): %s from the reference in weights, not only in KV, so %s divergences measure the "
                "weights' quantisation as well as the cache's.\n", n_weight > 1 ? "s" : "", n_weight > 1 ? "their" : "its",
                n_weight > 1 ? "they differ" : "it differs", n_weight > 1 ? "their" : "its");
    if (R->pin_experts >= 0) {   /* a mixture-of-experts model (docs/DESIGN.md §2.6) */
        fprintf(o, "\nMixture of experts, %s: at the teacher-forced positions ", R->pin_experts
                ? "experts pinned (`--pin-experts`: every arm replayed the reference's experts, so the arms "
                  "differ only in their KV cache; the fork probes routed freely)"
                : "free routing (each arm's own router chose its experts)");
        fprintf(o, "the (position, layer) expert sets differed from the reference's in");
        int first = 1;
        for (int i = 0; i < R->n_arms; i++) {
            const report_arm *a = &R->arms[i];
            if (a->is_ref || isnan(a->route_n)) continue;
            fprintf(o, "%s %s %.0f of %.0f (%.3g%%)", first ? "" : ";", a->name, a->route_diff, a->route_n,
                    a->route_n > 0 ? 100.0 * a->route_diff / a->route_n : 0.0);
            first = 0;
        }
        fprintf(o, "%s.\n", first ? " no arm (no counts recorded)" : "");
    }
}

static void readme_setup(FILE *o, const report_results *R, const report_analysis *A) {
    setup_table(o, R, A);
    setup_arms(o, R);
    setup_engines(o, R);
    setup_weights_routing(o, R);
    fprintf(o, "\n");
}

/* Depth labels for a table: "15K" style unless two depths would get the same label, then
 * exact counts for all. */
static int depth_labels_collide(const report_results *R, const report_arm_an *X) {
    char a[32], b[32];
    for (size_t i = 1; i < X->nd; i++) {
        report_fmt_depth(R->drows[X->d0 + i - 1].depth, a, sizeof a);
        report_fmt_depth(R->drows[X->d0 + i].depth, b, sizeof b);
        if (!strcmp(a, b)) return 1;
    }
    return 0;
}

static void fmt_depth_in(int depth, int exact, char *buf, size_t len) {
    if (exact) snprintf(buf, len, "%d", depth);
    else report_fmt_depth(depth, buf, len);
}

static void readme_depth_table(FILE *o, const report_results *R, const report_analysis *A,
                               int i) {
    const report_arm_an *X = &A->a[i];
    const char *lab = X->label, *ref = A->ref_label;
    int exact = depth_labels_collide(R, X);
    char dl[32], kl[32], js[32], fk[32], fl[32];
    fprintf(o, "### %s (arm %s)\n\n", lab, R->arms[i].name);
    fprintf(o, "| Depth | KL(%s‖%s) | JS | Same top-1 | Fork token (of %d) | Noise floor KL(%s‖fp32) "
            "| NLL %s / %s | Top-2 gap at fork (%s / %s) |\n", lab, ref, R->fork_n, ref, lab, ref,
            lab, ref);
    fprintf(o, "|---:|---:|---:|:---:|---:|---:|---:|---:|\n");
    for (size_t j = 0; j < X->nd; j++) {
        const report_depth *d = &R->drows[X->d0 + j];
        fmt_depth_in(d->depth, exact, dl, sizeof dl);
        report_fmt_sig2(d->kl_ar, kl, sizeof kl);
        report_fmt_sig2(d->js, js, sizeof js);
        if (isnan(X->floor_kl[j])) snprintf(fl, sizeof fl, "not measured");
        else report_fmt_sig2(X->floor_kl[j], fl, sizeof fl);
        report_fmt_fork(d->fork, d->censored, fk, sizeof fk);
        fprintf(o, "| %s | %s | %s | %s | %s | %s | ", dl, kl, js, d->same ? "yes" : "no", fk, fl);
        if (isnan(d->nll_arm) || isnan(d->nll_ref)) fprintf(o, REPORT_NA);
        else fprintf(o, "%.3f / %.3f", d->nll_arm, d->nll_ref);
        fprintf(o, " | ");
        if (d->censored) fprintf(o, "—");
        else fprintf(o, "%.3f / %.3f", d->fgap_arm, d->fgap_ref);
        fprintf(o, " |\n");
    }
    fprintf(o, "\n");
}

/* One statistics row with a depths column and a positions column. */
int report_size_order(const report_results *R, int *idx) {
    int n = 0;
    for (int i = 0; i < R->n_arms; i++) {
        if ((!report_is_test_arm(R, i) && i != R->floor) || isnan(R->arms[i].kv_bytes)) continue;
        int j = n++;
        while (j > 0 && R->arms[idx[j - 1]].kv_bytes > R->arms[i].kv_bytes) { idx[j] = idx[j - 1]; j--; }
        idx[j] = i;
    }
    return n;
}

const stats_ci *report_arm_mean_kl(const report_analysis *A, int i, const char **over) {
    const report_arm_an *X = &A->a[i];
    *over = X->np ? "positions" : "depths";
    return X->np ? &X->pos.kl : &X->dep.kl;
}

/* "Formats by size": the arms in increasing KV bytes per token, with bits per stored value (from
 * an fp16 or fp32 arm's size, when the run has one) beside their divergence. Only with 2 or more. */
static void readme_sizes(FILE *o, const report_results *R, const report_analysis *A, const report_verdicts *V) {
    int *idx = malloc(sizeof *idx * (size_t)(R->n_arms ? R->n_arms : 1));   /* [n_arms] */
    int n = idx ? report_size_order(R, idx) : 0;
    if (n < 2) { free(idx); return; }
    double per_value = NAN;   /* bytes per stored value at 16 bits, from an fp16 or fp32 arm */
    for (int i = 0; i < R->n_arms && isnan(per_value); i++)
        if (!strcmp(R->arms[i].kv_k, R->arms[i].kv_v) && !isnan(R->arms[i].kv_bytes) && !R->arms[i].weight_arm) {
            if (!strcmp(R->arms[i].kv_k, "f16")) per_value = R->arms[i].kv_bytes / 2;
            else if (!strcmp(R->arms[i].kv_k, "f32")) per_value = R->arms[i].kv_bytes / 4;
        }
    /* each arm against the next smaller one: paired differences, Holm across the table */
    stats_boot *pd = calloc((size_t)n, sizeof *pd);   /* [n] */
    double *pv = malloc(sizeof *pv * (size_t)n), *pa = malloc(sizeof *pa * (size_t)n);   /* [n] */
    if (!pd || !pv || !pa) { free(pd); free(pv); free(pa); free(idx); return; }
    pv[0] = NAN;
    for (int k = 1; k < n; k++)
        if (report_paired_kl(R, A, idx[k], idx[k - 1], &pd[k], &pv[k])) pv[k] = NAN;
    if (stats_holm(pv, (size_t)n, pa) < 0)
        for (int k = 0; k < n; k++) pa[k] = NAN;
    fprintf(o, "## Formats by size\n\nEvery arm with a KV size, smallest first: bits per stored value (KV bytes "
            "per token × 8 / the values per token, from the fp16 or fp32 arm's size) against the mean divergence "
            "from the reference (over positions when measured, else over depths; 95%% circular block "
            "bootstrap interval, as in the answer), same top-1, the median fork, and the arm against the one above it (the next smaller): the paired difference of "
            "mean KL over the %s both measured (circular block bootstrap, %s), with its words at a family-wise "
            "5%% level (Holm over the %d comparisons of this table): *lower*, *higher* or *no detected "
            "difference* (which is not \"no difference\"). The plot kl_bytes below draws the same.\n\n"
            "| Arm | K / V | KV bytes per token | Bits per value | Mean KL(arm‖%s) | Same top-1 | Median fork | "
            "vs the row above: Δ mean KL [95%%], Holm p |\n"
            "|---|---|---:|---:|---:|---:|---:|---|\n", R->have_positions ? "positions" : "depths",
            R->have_positions ? "Politis–White blocks" : "block 1", n - 1, A->ref_label);
    for (int k = 0; k < n; k++) {
        int i = idx[k];
        const report_arm_an *X = &A->a[i];
        const char *over;
        char kl[96], t1[96], bits[32], fk[64], cmp[640];
        const stats_boot *vk = &V->v[i].kl;   /* the answer's interval: circular, Politis–White blocks */
        stats_ci kc = {vk->est, vk->lo, vk->hi, vk->n};
        (void)over;
        report_fmt_ci(V->v[i].valid ? &kc : report_arm_mean_kl(A, i, &over), kl, sizeof kl);
        report_fmt_pct_ci(X->np ? &X->pos.top1 : &X->dep.top1, t1, sizeof t1);
        if (isnan(per_value)) snprintf(bits, sizeof bits, REPORT_NA);
        else snprintf(bits, sizeof bits, "%.2f", R->arms[i].kv_bytes * 8 / per_value);
        if (!X->dep.km.n_obs) snprintf(fk, sizeof fk, REPORT_NA);
        else if (isnan(X->dep.km.median)) snprintf(fk, sizeof fk, "not reached");
        else snprintf(fk, sizeof fk, "%.0f", X->dep.km.median);
        if (k == 0 || isnan(pa[k])) snprintf(cmp, sizeof cmp, REPORT_NA);
        else {
            stats_ci c = {pd[k].est, pd[k].lo, pd[k].hi, pd[k].n};
            char d[96];
            report_fmt_ci(&c, d, sizeof d);
            stats_verdict v = stats_verdict_p(pd[k].est, pa[k], 0.05, pd[k].lo90, pd[k].hi90, 0);
            snprintf(cmp, sizeof cmp, "**%s** than %s: %s, p = %.2g", stats_verdict_word(v),
                     A->a[idx[k - 1]].label, d, pa[k]);
            if (v == STATS_NO_DETECTED_DIFFERENCE)
                snprintf(cmp, sizeof cmp, "**no detected difference** from %s: %s, p = %.2g", A->a[idx[k - 1]].label,
                         d, pa[k]);
        }
        fprintf(o, "| %s%s | %s / %s | %.0f | %s | %s | %s | %s | %s |\n", X->label, i == R->floor ? " (floor)" : "",
                R->arms[i].kv_k, R->arms[i].kv_v, R->arms[i].kv_bytes, bits, kl, t1, fk, cmp);
    }
    free(pd); free(pv); free(pa);
    fprintf(o, "\n");
    free(idx);
}

static void stat_row(FILE *o, const char *name, const char *dep, const char *pos) {
    fprintf(o, "| %s | %s | %s |\n", name, dep, pos);
}

static void readme_stats(FILE *o, const report_results *R, const report_analysis *A,
                         int i) {
    const report_arm_an *X = &A->a[i];
    const report_set *D = &X->dep, *P = &X->pos;
    const char *lab = X->label, *ref = A->ref_label;
    int hp = X->np > 0;
    const char *nm = "not measured";
    char name[1024], a[128], b[128];

    if (R->arms[i].is_floor)
        fprintf(o, "### Noise floor: %s vs %s (arm %s)\n\n", lab, ref, R->arms[i].name);
    else fprintf(o, "### %s vs %s (arm %s)\n\n", lab, ref, R->arms[i].name);
    fprintf(o, "| Statistic | Over depths (n = %zu) | Over positions (n = %zu) |\n|---|---|---|\n",
            D->n, P->n);
    snprintf(name, sizeof name, "Mean KL(%s‖%s)", lab, ref);
    report_fmt_ci(&D->kl, a, sizeof a); report_fmt_ci(&P->kl, b, sizeof b);
    stat_row(o, name, a, hp ? b : nm);
    snprintf(name, sizeof name, "Median KL(%s‖%s)", lab, ref);
    report_fmt_ci(&D->kl_med, a, sizeof a); report_fmt_ci(&P->kl_med, b, sizeof b);
    stat_row(o, name, a, hp ? b : nm);
    snprintf(name, sizeof name, "Mean KL(%s‖%s)", ref, lab);
    report_fmt_ci(&D->klr, a, sizeof a); report_fmt_ci(&P->klr, b, sizeof b);
    stat_row(o, name, a, hp ? b : nm);
    report_fmt_ci(&D->js, a, sizeof a); report_fmt_ci(&P->js, b, sizeof b);
    stat_row(o, "Mean JS", a, hp ? b : nm);
    if (!R->arms[i].is_floor) {
        snprintf(name, sizeof name, "Mean noise floor KL(%s‖fp32), same rows", ref);
        if (R->floor < 0 || !D->n_floor) snprintf(a, sizeof a, "%s", nm);
        else report_fmt_sig2(D->floor_mean, a, sizeof a);
        if (!hp || R->floor < 0 || !P->n_floor) snprintf(b, sizeof b, "%s", nm);
        else report_fmt_sig2(P->floor_mean, b, sizeof b);
        stat_row(o, name, a, b);
    }
    report_fmt_pct_ci(&D->top1, a, sizeof a); report_fmt_pct_ci(&P->top1, b, sizeof b);
    stat_row(o, "Same top-1 token (Wilson)", a, hp ? b : nm);
    report_fmt_ci(&D->dnll, a, sizeof a); report_fmt_ci(&P->dnll, b, sizeof b);
    snprintf(name, sizeof name, "Mean NLL difference %s − %s (nats/token)", lab, ref);
    stat_row(o, name, a, hp ? b : nm);
    char slope[64];
    report_fmt_slope(&D->slope, slope, sizeof slope);
    if (isnan(D->slope.slope)) snprintf(a, sizeof a, REPORT_NA " (fewer than 3 depths)");
    else snprintf(a, sizeof a, "%s%s", slope, D->slope.n_floored ? " (zeros floored at 1e-12)" : "");
    stat_row(o, "Slope of log10 KL per 1,000 tokens of depth", a, "—");
    report_fmt_rho(&D->sp_ent, a, sizeof a); report_fmt_rho(&P->sp_ent, b, sizeof b);
    stat_row(o, "Spearman ρ(KL, reference entropy)", a, hp ? b : nm);
    report_fmt_rho(&D->sp_gap, a, sizeof a); report_fmt_rho(&P->sp_gap, b, sizeof b);
    stat_row(o, "Spearman ρ(KL, reference top-2 gap)", a, hp ? b : nm);
    for (int set = 0; set < 2; set++) {
        const report_set *s = set ? P : D;
        char *dst = set ? b : a;
        char x[32], y[32], z[32];
        report_fmt_share(s->tie.share_pos_near, x, sizeof x);
        report_fmt_share(s->tie.share_flips_near, y, sizeof y);
        report_fmt_share(s->tie.share_kl_near, z, sizeof z);
        snprintf(dst, 128, "%s / %s / %s", x, y, z);
    }
    snprintf(name, sizeof name, "Near ties (reference gap < %.2g): share of rows / of top-1 flips "
             "/ of total KL", REPORT_NEAR_TIE_EPS);
    stat_row(o, name, a, hp ? b : nm);
    const stats_km *k = &D->km;
    if (!k->n_obs) snprintf(a, sizeof a, REPORT_NA);
    else if (isnan(k->median))
        snprintf(a, sizeof a, "not reached: S(%d) = %.2f (%zu of %zu identical)", R->fork_n,
                 k->surv_end, k->n_censored, k->n_obs);
    else {
        char lo[32], hi[32];
        if (isnan(k->median_lo)) snprintf(lo, sizeof lo, "—");
        else snprintf(lo, sizeof lo, "%.0f", k->median_lo);
        if (isnan(k->median_hi)) snprintf(hi, sizeof hi, "not reached");
        else snprintf(hi, sizeof hi, "%.0f", k->median_hi);
        snprintf(a, sizeof a, "%.0f [%s, %s]", k->median, lo, hi);
    }
    stat_row(o, "Median fork token index (Kaplan–Meier)", a, "—");
    snprintf(a, sizeof a, "%zu of %zu", k->n_censored, k->n_obs);
    snprintf(name, sizeof name, "Greedy streams identical for all %d tokens", R->fork_n);
    stat_row(o, name, a, "—");
    snprintf(a, sizeof a, "%zu of %zu", D->n_identical, D->n);
    snprintf(b, sizeof b, "%zu of %zu", P->n_identical, P->n);
    stat_row(o, "Rows with KL = JS = 0 exactly", a, hp ? b : nm);

    fprintf(o, "\nKL(%s‖%s) percentiles:\n\n| Set | max | 99.9 | 99 | 95 | 90 | 50 | 10 | 5 | 1 | "
            "0.1 | min |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n", lab, ref);
    for (int set = 0; set < 2; set++) {
        const report_set *s = set ? P : D;
        if (set && !hp) { fprintf(o, "| positions | not measured |||||||||||\n"); continue; }
        fprintf(o, "| %s |", set ? "positions" : "depths");
        for (int q = 0; q < STATS_N_PCT; q++) {
            report_fmt_sig2(s->pct[q], a, sizeof a);
            fprintf(o, " %s |", a);
        }
        fprintf(o, "\n");
    }
    fprintf(o, "\n");
}

/* ============================================================================================
 * readme_write: the whole README.md
 * ========================================================================================== */

/* Repeated arms (NAME#k) in the run. */
static int count_repeats(const report_results *R) {
    int n_rep = 0;
    for (int i = 0; i < R->n_arms; i++) n_rep += R->arms[i].base >= 0;
    return n_rep;
}

/* What comes before the answer: an unfinished run, a repeated arm that is not bit-identical, and
 * per-position streaming whose positions.tsv is missing. */
static void readme_alarms(FILE *o, const report_results *R, const report_analysis *A) {
    /* an unfinished run says so before anything else */
    if (!R->complete) {
        fprintf(o, "> **INCOMPLETE RUN — %d of %d depths measured", R->depths_measured, R->depths_planned);
        if (R->last_depth > 0) fprintf(o, " (up to depth %d)", R->last_depth);
        fprintf(o, ".** Every table, statistic and plot below covers only the measured depths.");
        if (R->have_journal)
            fprintf(o, " To finish the run: `strata-driver sweep --resume <this folder>` (it continues "
                    "from the journal; the results equal an uninterrupted run's).");
        fprintf(o, "\n");
        for (int i = 0; i < R->n_reasons; i++) fprintf(o, "%s> - %s\n", i ? "" : ">\n", R->reasons[i]);
        fprintf(o, "\n");
    }

    /* loud warnings first */
    for (int i = 0; i < R->n_arms; i++) {
        if (A->a[i].repeat != 0) continue;
        fprintf(o, "> **WARNING — REPEATED ARM NOT BIT-IDENTICAL: `%s` does not reproduce `%s`.** "
                "%s. A repeated arm (same configuration, fresh process) must come out "
                "bit-identical; until this is explained, every difference below may be "
                "nondeterminism rather than KV precision.\n\n", R->arms[i].name,
                R->arms[R->arms[i].base].name, A->a[i].repeat_detail);
    }
    if (R->per_position == 1 && !R->have_positions)
        fprintf(o, "> **Note:** meta.json says per-position streaming was on, but positions.tsv "
                "is missing or empty (a folder whose positions.tsv was too big to commit lacks it on a fresh "
                "clone): every statistic below is over the depth rows only.\n\n");
}

/* The depth tables: one per arm that is neither the reference nor the floor. */
static void readme_depth_tables(FILE *o, const report_results *R, const report_analysis *A) {
    const char *ref = A->ref_label;
    fprintf(o, "## Depth tables\n\nThe original table's columns (KL(arm‖ref) and JS of the "
            "teacher-forced next-token distribution at position depth−1; whether the top-1 token "
            "agrees; the fork token index, or \"identical\" when all %d greedy tokens agree), then "
            "the noise floor KL(%s‖fp32) at the same depth, the NLL of the true next token, and "
            "both arms' top-1/top-2 logit gap at the fork step. Depths of 10,000 or more are in "
            "thousands (15K). KL and JS: 2 significant digits.\n\n", R->fork_n, ref);
    for (int i = 0; i < R->n_arms; i++)
        if (i != R->ref && !R->arms[i].is_floor) readme_depth_table(o, R, A, i);
}

/* The repeat check: each repeated arm against the arm it repeats. */
static void readme_repeats(FILE *o, const report_results *R, const report_analysis *A) {
    int n_rep = count_repeats(R);
    fprintf(o, "## Repeat check\n\n");
    if (!n_rep) {
        fprintf(o, "Not measured: no repeated arm (NAME#2) in this run, so run-to-run determinism "
                "was not checked.\n\n");
    } else {
        fprintf(o, "| Arm | Repeats | Result |\n|---|---|---|\n");
        for (int i = 0; i < R->n_arms; i++)
            if (R->arms[i].base >= 0)
                fprintf(o, "| %s | %s | %s: %s |\n", R->arms[i].name, R->arms[R->arms[i].base].name,
                        A->a[i].repeat ? "**bit-identical**" : "**NOT bit-identical**",
                        A->a[i].repeat_detail);
        fprintf(o, "\n");
    }
}

/* The statistics: how every interval is computed, then each test arm's and the floor's. */
static void readme_statistics(FILE *o, const report_results *R, const report_analysis *A, const report_extra *X) {
    fprintf(o, "## Statistics\n\n95%% confidence intervals in brackets. Means: circular block "
            "bootstrap (%d resamples, mt19937 seed %lu) over rows in depth or position order with the "
            "Politis–White block length, because neighbouring positions are correlated, its draws "
            "spread to a Student-t interval on the blocks' degrees of freedom (docs/DESIGN.md §3.6.1: "
            "93–95 %% coverage on simulated AR(1) series); medians: moving blocks of the same length, "
            "percentile interval. Top-1 agreement: Wilson score interval. Slope: least squares "
            "of log10(max(KL, 1e-12)) on depth in thousands of tokens, Student t interval. "
            "Spearman ρ: Fisher z interval with variance 1.06/(n−3). Median fork: Kaplan–Meier "
            "with streams identical for all %d tokens right-censored, Greenwood band. "
            "Percentiles: linear interpolation between order statistics "
            "(gsl_stats_quantile_from_sorted_data). The Wilson and Spearman intervals assume "
            "independent rows, which positions are not: read them as too narrow. Per-position KL has long "
            "memory (correlated hundreds of positions apart), which no block length fixes: a block "
            "interval over positions is a lower bound on the uncertainty (docs/DESIGN.md §3.6.1).\n\n",
            STATS_BOOT_B, (unsigned long)STATS_BOOT_SEED, R->fork_n);
    for (int i = 0; i < R->n_arms; i++)
        if (report_is_test_arm(R, i)) readme_stats(o, R, A, i);
    if (R->floor >= 0) readme_stats(o, R, A, R->floor);
    report_extra_readme(o, R, A, X);
}

/* What the numbers support: the claims' definitions and each test arm's verdicts. */
static void readme_claims(FILE *o, const report_results *R, const report_analysis *A, const report_verdicts *V) {
    const char *ref = A->ref_label;
    fprintf(o, "## What the numbers support\n\nDefinitions (k = %.0f, ε = %.2g):\n\n"
            "- *Distinguishable in distribution over depths / positions*: supported when the lower end of the "
            "CI of mean KL(arm‖%s) is above k × the mean noise floor KL(%s‖fp32) over the same rows; not "
            "supported when the upper end is at most that; otherwise inconclusive. Distinguishable is not "
            "worse: the practical verdicts are in \"The answer first\".\n"
            "- *Above the floor at every depth*: at every depth KL(arm‖%s) > k × KL(%s‖fp32) at that depth "
            "(the evidence also counts the depths where the arm forks earlier than fp32).\n"
            "- *Grows with depth*: the ratio of the deepest depth bin's mean KL to the first bin's, over "
            "positions (\"Depth bins\"), is above 1 (not supported when below 1; inconclusive when its CI "
            "contains 1); not estimated without positions.tsv.\n"
            "- *Top-1 ≥ 99%%*: the Wilson lower bound is ≥ 99%% (not supported when the upper "
            "bound is below 99%%), over positions when measured, else over depths.\n"
            "- *Flips at near ties more often than fp32*: the Wilson interval of the arm's top-1 flip rate "
            "among near ties (reference top-1/top-2 logit gap < ε) lies above fp32's at the same rows.\n"
            "- *Larger where uncertain*: the Spearman CI of (KL, reference entropy) is above 0.\n\n",
            REPORT_FLOOR_FACTOR, REPORT_NEAR_TIE_EPS, ref, ref, ref, ref);
    fprintf(o, "| Claim | Verdict | Evidence |\n|---|---|---|\n");
    int n_claims = 0;
    for (int i = 0; i < R->n_arms; i++) {
        if (!report_is_test_arm(R, i)) continue;
        report_claim cl[REPORT_MAX_CLAIMS];
        int nc = report_arm_claims(R, A, V, i, cl);
        for (int c = 0; c < nc; c++, n_claims++)
            fprintf(o, "| %s | **%s** | %s |\n", cl[c].claim, report_verdict_name(cl[c].verdict),
                    cl[c].evidence);
    }
    for (int i = 0; i < R->n_arms; i++)
        if (R->arms[i].base >= 0) {
            fprintf(o, "| Repeated arm %s reproduces %s bit for bit | **%s** | %s |\n",
                    R->arms[i].name, R->arms[R->arms[i].base].name,
                    A->a[i].repeat ? "supported" : "not supported", A->a[i].repeat_detail);
            n_claims++;
        }
    if (!n_claims) fprintf(o, "| (no test arm) | **not measured** | |\n");
    fprintf(o, "\n");
}

/* The plots, each with its caption, or why it was not drawn. */
static void readme_plots(FILE *o, const report_results *R, const int *drawn) {
    fprintf(o, "## Plots\n\n");
    static const char *const captions[REPORT_N_PLOTS] = {
        "KL and JS vs depth (log scale); grey: the noise floor KL(ref‖fp32) and the band up to "
        "k × floor",
        "Per-position KL with a rolling median",
        "KL vs the reference distribution's entropy",
        "Fork survival: share of depths whose greedy streams have not yet forked (Kaplan–Meier, "
        "95% Greenwood band)",
        "KV size against divergence: each arm's mean KL(arm‖ref) with its 95% CI against its KV bytes "
        "per token"};
    for (int p = 0; p < REPORT_N_PLOTS; p++) {
        if (drawn[p])
            fprintf(o, "%s ([script](plots/%s.gp)):\n\n![%s](plots/%s.png)\n\n", captions[p],
                    report_plot_name(p), captions[p], report_plot_name(p));
        else
            fprintf(o, "%s: %s.\n\n", captions[p],
                    p == REPORT_PLOT_POSITIONS && !R->have_positions
                        ? "not measured (no positions.tsv)"
                        : "not drawn (no positive values to put on a log axis, or no arm)");
    }
}

static void readme_limitations(FILE *o, const report_results *R) {
    int n_rep = count_repeats(R);
    fprintf(o, "## Limitations\n\n");
    fprintf(o, "- One document and one model: the numbers describe this text at these depths, "
            "not KV precision in general.\n");
    fprintf(o, "- %d depths: depth-level CIs rest on few rows; the slope CI assumes "
            "independent residuals.\n", report_count_depths(R));
    fprintf(o, "- Forks are greedy (temperature 0) and right-censored at %d tokens; a fork says "
            "the streams differ, not that either is worse.\n", R->fork_n);
    if (!R->have_positions)
        fprintf(o, "- Per-position metrics not measured: statistics over positions, the "
                "per-position plot and the near-tie split over positions are missing.\n");
    else
        fprintf(o, "- Positions are autocorrelated: bootstrap CIs use blocks, but the Wilson and "
                "Spearman intervals over positions treat rows as independent (too narrow).\n");
    if (R->floor < 0)
        fprintf(o, "- No f32 arm: the noise floor, and every claim that needs it, is not "
                "measured.\n");
    if (!n_rep)
        fprintf(o, "- No repeated arm: run-to-run determinism is not checked in this run.\n");
    fprintf(o, "- Log-probabilities: z = logit − max in f32, log-sum-exp in double (docs/DESIGN.md §3); "
            "KL values below ~1e-7 carry rounding of order 1e-6 relative or more.\n\n");
}

/* How to reproduce the folder, and where its numbers come from. */
static void readme_provenance(FILE *o, const report_results *R) {
    fprintf(o, "## Reproduce\n\n```sh\n%s\n```\n\nRe-render this folder from its TSV/JSON files "
            "(no model needed): `strata-driver report <this folder>`.\n\n", R->command);

    fprintf(o, "## Provenance\n\n");
    fprintf(o, "- Raw data: `meta.json`, `depths.tsv` (%zu rows), `forks.tsv` (%zu rows), ",
            R->n_drows, R->n_frows);
    if (R->have_positions) fprintf(o, "`positions.tsv` (%zu rows).\n", R->n_prows);
    else fprintf(o, "no `positions.tsv`.\n");
    fprintf(o, "- Derived (generated, do not edit): `README.md`, `summary.json` (every statistic "
            "above, machine-readable), `plots/*.gp` (one gnuplot script per plot) and `plots/*.png`; "
            "`report` also writes each plot's `.dat` data and an `.svg`, which git does not keep.\n");
    fprintf(o, "- Engine %s, git `%s`, model sha256 `%s`, run on %s, %s.\n", R->engine, R->git,
            R->model_sha, R->machine, R->date);
    json_t *res = json_object_get(R->meta, "resumes");
    if (json_array_size(res)) {
        fprintf(o, "- Continued with `--resume` %zu time%s (the rows after each equal an uninterrupted "
                "run's):", json_array_size(res), json_array_size(res) == 1 ? "" : "s");
        for (size_t i = 0; i < json_array_size(res); i++) {
            json_t *r = json_array_get(res, i);
            fprintf(o, "%s %s from position %lld (%lld depths done)", i ? ";" : "",
                    json_string_value(json_object_get(r, "date")) ? json_string_value(json_object_get(r, "date")) : "?",
                    (long long)json_integer_value(json_object_get(r, "position")),
                    (long long)json_integer_value(json_object_get(r, "depths_done")));
        }
        fprintf(o, ".\n");
    }
}

static void readme_write(FILE *o, const report_results *R, const report_analysis *A,
                         const report_extra *X, const report_verdicts *V, const int *drawn) {
    const char *ref = A->ref_label;
    fprintf(o, "# strata results: %s\n\n", R->tag);
    readme_alarms(o, R, A);
    report_verdicts_readme(o, R, A, V);   /* the answer first: only the loud warnings above it */
    fprintf(o, "What KV-cache precision does to the next-token distribution and to greedy "
            "continuations, against the %s reference, on %s. Divergences are in nats; "
            "\"fork\" is the first of %d greedily generated tokens at which an arm's stream "
            "differs from the reference's.\n\n", ref, report_model_name(R), R->fork_n);
    readme_setup(o, R, A);
    if (R->n_warnings) {
        fprintf(o, "## Warnings recorded by the sweep\n\n");
        for (int i = 0; i < R->n_warnings; i++) fprintf(o, "- %s\n", R->warnings[i]);
        fprintf(o, "\n");
    }
    report_bins_readme(o, R, A, V, drawn[REPORT_N_PLOTS]);
    readme_depth_tables(o, R, A);
    readme_repeats(o, R, A);
    readme_statistics(o, R, A, X);
    readme_claims(o, R, A, V);
    readme_sizes(o, R, A, V);
    readme_plots(o, R, drawn);
    readme_limitations(o, R);
    readme_provenance(o, R);
}

/* ============================================================================================
 * Writing the files: DIR/NAME.tmp, then rename, so a reader never sees half a file
 * ========================================================================================== */

/* A file being written: tmp while it is written, renamed to path once complete. */
typedef report_tmp_file tmp_file;

/* Opens DIR/NAME.tmp for writing into out->f. Returns 0, or -1 with a message in err. */
static int tmp_open(tmp_file *out, const char *dir, const char *name, char *err, size_t errlen) {
    out->f = NULL;
    out->dir.fd = -1;
    if (report_path(out->path, sizeof out->path, dir, name, err, errlen)) return -1;
    snprintf(out->tmp, sizeof out->tmp, "%s.tmp", out->path);
    snprintf(out->name, sizeof out->name, "%s", name);
    snprintf(out->tmpname, sizeof out->tmpname, "%s.tmp", name);
    /* created in the opened folder, never through a link planted at NAME.tmp (report_io.c) */
    if (report_outdir_open(&out->dir, dir, NULL, err, errlen)) return -1;
    out->f = report_outdir_create(&out->dir, out->tmpname, err, errlen);
    if (!out->f) {
        report_outdir_close(&out->dir);
        return -1;
    }
    return 0;
}

/* Closes out->f and renames tmp to path (a link at path is replaced, not followed); failed = the
 * caller's writing already failed. On any failure tmp is removed. Returns 0, or -1 with a message
 * in err. */
static int tmp_commit(tmp_file *out, int failed, char *err, size_t errlen) {
    int bad = failed || ferror(out->f), rc = 0;
    if (fclose(out->f) != 0 || bad || renameat(out->dir.fd, out->tmpname, out->dir.fd, out->name) != 0) {
        errmsg_set(err, errlen, -1, "cannot write %s: %s", out->path, strerror(errno));
        report_outdir_remove(&out->dir, out->tmpname);
        rc = -1;
    }
    out->f = NULL;
    report_outdir_close(&out->dir);
    return rc;
}

static int write_readme(const char *dir, const report_results *R, const report_analysis *A,
                        const report_extra *X, const report_verdicts *V, const int *drawn, char *err,
                        size_t errlen) {
    tmp_file out;
    if (tmp_open(&out, dir, "README.md", err, errlen)) return -1;
    readme_write(out.f, R, A, X, V, drawn);
    return tmp_commit(&out, 0, err, errlen);
}

static int write_summary(const char *dir, const report_results *R, const report_analysis *A,
                         const report_extra *X, const report_verdicts *V, char *err, size_t errlen) {
    json_t *root = report_summary_build(R, A, V);
    if (root && (report_extra_summary(root, R, X) || report_verdicts_summary(root, R, A, V))) {
        json_decref(root);
        root = NULL;
    }
    if (!root) {
        return errmsg_set(err, errlen, -1, "out of memory building summary.json");
    }
    tmp_file out;
    if (tmp_open(&out, dir, "summary.json", err, errlen)) {
        json_decref(root);
        return -1;
    }
    int rc = json_dumpf(root, out.f, JSON_INDENT(2) | JSON_PRESERVE_ORDER |
                                         JSON_REAL_PRECISION(12) | JSON_ENSURE_ASCII);
    json_decref(root);
    return tmp_commit(&out, rc != 0, err, errlen);
}

/* ============================================================================================
 * report_render
 * ========================================================================================== */

int report_render(const char *dir, char *err, size_t errlen) {
    return report_render_opts_run(dir, NULL, err, errlen);
}

int report_render_opts_run(const char *dir, const report_render_opts *opts, char *err, size_t errlen) {
    report_results R;
    report_analysis A = {0};
    report_extra X = {0};
    report_verdicts V = {0};
    report_depth_trend *trends = NULL;   /* [R.n_arms] (passages.tsv), freed here */
    report_margins m;
    int drawn[REPORT_N_PLOTS + 1] = {0};   /* [REPORT_N_PLOTS]: plots/kl_bins (report_verdict_md.c) */
    int rc = -1;
    if (!dir) return errmsg_set(err, errlen, -1, "no results directory");
    if (report_results_load(dir, &R, err, errlen)) goto done;
    if (report_extra_load(dir, &R, &X, err, errlen)) goto done;
    if (report_analysis_run(&R, &A, err, errlen)) goto done;
    report_margins_get(&R, opts, &m);
    const char *msrc;
    X.margin_nats = report_fork_margin(&R, &X, m.ppl_pct, &msrc);
    if (report_verdicts_run(&R, &A, &X, &m, &V, err, errlen)) goto done;
    /* The controlled depth design (passages.tsv, its own renderer), when the folder has it, is the
     * source of each arm's depth verdict ("The answer first", line 3) instead of the depth bins of
     * positions.tsv: V.v[a].from_passages points at its trend. */
    trends = calloc((size_t)(R.n_arms > 0 ? R.n_arms : 1), sizeof *trends);   /* [n_arms] */
    if (!trends) { errmsg_set(err, errlen, -1, "out of memory"); goto done; }
    for (int a = 0; a < R.n_arms; a++) {
        if (!V.v[a].valid) continue;
        int t = report_passages_trend(dir, R.arms[a].name, &trends[a], err, errlen);
        if (t < 0) goto done;
        if (t == 0) V.v[a].from_passages = &trends[a];
    }
    if (report_plots_render(dir, &R, &A, drawn, err, errlen)) goto done;
    if (report_bins_plot(dir, &R, &A, &V, &drawn[REPORT_N_PLOTS], err, errlen)) goto done;
    if (write_summary(dir, &R, &A, &X, &V, err, errlen)) goto done;
    if (write_readme(dir, &R, &A, &X, &V, drawn, err, errlen)) goto done;
    if (report_passages_render(dir, err, errlen)) goto done;   /* only with passages.tsv */
    rc = 0;
done:
    if (rc) report_err_clean(err, errlen);   /* it may quote a field of the folder */
    free(trends);
    report_verdicts_free(&V, R.n_arms);
    report_extra_free(&X);
    report_analysis_free(&A, R.n_arms);
    report_results_free(&R);
    return rc;
}

int report_tmp_open(report_tmp_file *out, const char *dir, const char *name, char *err,
                    size_t errlen) {
    return tmp_open(out, dir, name, err, errlen);
}

int report_tmp_commit(report_tmp_file *out, int failed, char *err, size_t errlen) {
    return tmp_commit(out, failed, err, errlen);
}
