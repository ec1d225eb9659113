/* report_compare.c — two results folders side by side as Markdown: the setup differences,
 * and for every arm name present in both, the summary statistics (report_analysis.c; with the
 * cross-scored and sampled forks of report_cross.c when either folder has them) and the
 * depth-by-depth KL and fork. Reads both folders; writes nothing into them. */
#include "driver/report/report_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* One comparison row: a statistic formatted for each dir. */
static void cmp_row(FILE *o, const char *name, const char *a, const char *b) {
    fprintf(o, "| %s | %s | %s |%s\n", name, a, b, strcmp(a, b) ? "" : " ");
}

static void fork_median_text(const stats_km *k, int fork_n, char *buf, size_t len) {
    if (!k->n_obs) snprintf(buf, len, REPORT_NA);
    else if (isnan(k->median)) snprintf(buf, len, "not reached (S(%d) = %.2f)", fork_n, k->surv_end);
    else snprintf(buf, len, "%.0f", k->median);
}

/* The repeat check of an arm (report_arm_an.repeat). */
static const char *repeat_text(int repeat) {
    return repeat < 0 ? "—" : repeat ? "bit-identical" : "NOT identical";
}

/* The setup table: what each folder ran, on what, and how completely. */
static void compare_setup(FILE *out, const report_results R[2], const char *dir1, const char *dir2) {
    char a[160], b[160];
    fprintf(out, "# strata comparison: %s vs %s\n\n", R[0].tag, R[1].tag);
    fprintf(out, "| | (1) `%s` | (2) `%s` | |\n|---|---|---|---|\n", dir1, dir2);
    report_md_setup_row(out, "Tag", R[0].tag, R[1].tag);
    report_md_setup_row(out, "Model", R[0].model_path, R[1].model_path);
    report_md_setup_row(out, "Model sha256", R[0].model_sha, R[1].model_sha);
    report_md_setup_row(out, "Document", R[0].doc_path, R[1].doc_path);
    report_md_setup_row(out, "Engine", R[0].engine, R[1].engine);
    report_md_setup_row(out, "Git", R[0].git, R[1].git);
    report_md_setup_row(out, "Machine", R[0].machine, R[1].machine);
    report_md_setup_row(out, "Date", R[0].date, R[1].date);
    report_md_setup_row(out, "Reference arm", R[0].arms[R[0].ref].name, R[1].arms[R[1].ref].name);
    snprintf(a, sizeof a, "%d", R[0].fork_n);
    snprintf(b, sizeof b, "%d", R[1].fork_n);
    report_md_setup_row(out, "Fork tokens", a, b);
    snprintf(a, sizeof a, "%d", report_count_depths(&R[0]));
    snprintf(b, sizeof b, "%d", report_count_depths(&R[1]));
    report_md_setup_row(out, "Depths", a, b);
    report_md_setup_row(out, "Per-position metrics", R[0].have_positions ? "measured" : "not measured",
              R[1].have_positions ? "measured" : "not measured");
    for (int k = 0; k < 2; k++) {
        if (R[k].complete) snprintf(k ? b : a, sizeof a, "yes");
        else snprintf(k ? b : a, sizeof a, "no: %d of %d depths measured", R[k].depths_measured, R[k].depths_planned);
    }
    report_md_setup_row(out, "Complete", a, b);
    fprintf(out, "\n");
}

/* The statistics of arm i of (1) and arm j of (2), the same name, side by side. */
static void compare_stats(FILE *out, const report_results R[2], const report_extra E[2], int i, int j,
                          const report_arm_an *X, const report_arm_an *Y) {
    char a[160], b[160];
    fprintf(out, "## Arm %s: %s (1) vs %s (2)\n\n| Statistic | (1) | (2) |\n|---|---|---|\n",
            R[0].arms[i].name, X->label, Y->label);
    report_fmt_ci(&X->dep.kl, a, sizeof a); report_fmt_ci(&Y->dep.kl, b, sizeof b);
    cmp_row(out, "Mean KL(arm‖ref) over depths", a, b);
    report_fmt_ci(&X->dep.kl_med, a, sizeof a); report_fmt_ci(&Y->dep.kl_med, b, sizeof b);
    cmp_row(out, "Median KL over depths", a, b);
    report_fmt_ci(&X->dep.js, a, sizeof a); report_fmt_ci(&Y->dep.js, b, sizeof b);
    cmp_row(out, "Mean JS over depths", a, b);
    report_fmt_sig2(X->dep.floor_mean, a, sizeof a);
    report_fmt_sig2(Y->dep.floor_mean, b, sizeof b);
    cmp_row(out, "Mean noise floor over depths", a, b);
    report_fmt_pct_ci(&X->dep.top1, a, sizeof a); report_fmt_pct_ci(&Y->dep.top1, b, sizeof b);
    cmp_row(out, "Same top-1 over depths", a, b);
    if (X->np) report_fmt_ci(&X->pos.kl, a, sizeof a); else snprintf(a, sizeof a, "not measured");
    if (Y->np) report_fmt_ci(&Y->pos.kl, b, sizeof b); else snprintf(b, sizeof b, "not measured");
    cmp_row(out, "Mean KL(arm‖ref) over positions", a, b);
    if (X->np) report_fmt_pct_ci(&X->pos.top1, a, sizeof a);
    else snprintf(a, sizeof a, "not measured");
    if (Y->np) report_fmt_pct_ci(&Y->pos.top1, b, sizeof b);
    else snprintf(b, sizeof b, "not measured");
    cmp_row(out, "Same top-1 over positions", a, b);
    report_fmt_slope(&X->dep.slope, a, sizeof a);
    report_fmt_slope(&Y->dep.slope, b, sizeof b);
    cmp_row(out, "Slope of log10 KL per 1,000 tokens", a, b);
    fork_median_text(&X->dep.km, R[0].fork_n, a, sizeof a);
    fork_median_text(&Y->dep.km, R[1].fork_n, b, sizeof b);
    cmp_row(out, "Median fork token", a, b);
    if (X->repeat >= 0 || Y->repeat >= 0)
        cmp_row(out, "Repeat check", repeat_text(X->repeat), repeat_text(Y->repeat));
    report_extra_compare(out, &R[0], &E[0], i, &R[1], &E[1], j);
}

/* The depths both folders measured for the arm (X: its analysis in (1); j: its index in (2)): KL,
 * their ratio and the forks. */
static void compare_depths(FILE *out, const report_results R[2], int j, const report_arm_an *X) {
    fprintf(out, "\n| Depth | KL (1) | KL (2) | (2) / (1) | Fork (1) | Fork (2) |\n"
            "|---:|---:|---:|---:|---:|---:|\n");
    int shown = 0;
    for (size_t k = 0; k < X->nd; k++) {
        const report_depth *d = &R[0].drows[X->d0 + k];
        const report_depth *e = report_find_depth(&R[1], j, d->depth);
        if (!e) continue;
        char dl[32], k1[32], k2[32], ra[32], f1[32], f2[32];
        report_fmt_depth(d->depth, dl, sizeof dl);
        report_fmt_sig2(d->kl_ar, k1, sizeof k1);
        report_fmt_sig2(e->kl_ar, k2, sizeof k2);
        if (d->kl_ar > 0) report_fmt_sig2(e->kl_ar / d->kl_ar, ra, sizeof ra);
        else snprintf(ra, sizeof ra, "—");
        report_fmt_fork(d->fork, d->censored, f1, sizeof f1);
        report_fmt_fork(e->fork, e->censored, f2, sizeof f2);
        fprintf(out, "| %s | %s | %s | %s | %s | %s |\n", dl, k1, k2, ra, f1, f2);
        shown++;
    }
    if (!shown) fprintf(out, "| (no common depths) ||||||\n");
    fprintf(out, "\n");
}

/* The arms (not the references) that only one of the folders has. */
static void compare_only_in(FILE *out, const report_results R[2]) {
    for (int k = 0; k < 2; k++) {
        int any = 0;
        for (int i = 0; i < R[k].n_arms; i++) {
            if (i == R[k].ref || report_find_arm(&R[1 - k], R[k].arms[i].name) >= 0) continue;
            fprintf(out, "%s%s", any ? ", " : (k ? "Arms only in (2): " : "Arms only in (1): "),
                    R[k].arms[i].name);
            any = 1;
        }
        if (any) fprintf(out, "\n\n");
    }
}

int report_compare(const char *dir1, const char *dir2, FILE *out, char *err, size_t errlen) {
    report_results R[2];
    report_analysis A[2] = {{0}, {0}};
    report_extra E[2];   /* cross.tsv and samples.tsv of each folder (empty when absent) */
    const char *dirs[2] = {dir1, dir2};
    int rc = -1;
    memset(R, 0, sizeof R);
    memset(E, 0, sizeof E);
    if (!dir1 || !dir2 || !out) {
        return errmsg_set(err, errlen, -1, "compare needs two dirs and an output");
    }
    for (int k = 0; k < 2; k++) {
        if (report_results_load(dirs[k], &R[k], err, errlen)) goto done;
        if (report_analysis_run(&R[k], &A[k], err, errlen)) goto done;
        if (report_extra_load(dirs[k], &R[k], &E[k], err, errlen)) goto done;
    }
    compare_setup(out, R, dir1, dir2);
    for (int i = 0; i < R[0].n_arms; i++) {
        int j = report_find_arm(&R[1], R[0].arms[i].name);
        if (i == R[0].ref || j < 0 || j == R[1].ref) continue;
        compare_stats(out, R, E, i, j, &A[0].a[i], &A[1].a[j]);
        compare_depths(out, R, j, &A[0].a[i]);
    }
    compare_only_in(out, R);
    rc = ferror(out) ? -1 : 0;
    if (rc) errmsg_set(err, errlen, -1, "write error on the comparison output");
done:
    if (rc) report_err_clean(err, errlen);   /* it may quote a field of a folder */
    for (int k = 0; k < 2; k++) {
        report_extra_free(&E[k]);
        report_analysis_free(&A[k], R[k].n_arms);
        report_results_free(&R[k]);
    }
    return rc;
}
