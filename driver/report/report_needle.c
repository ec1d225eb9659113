/* report_needle.c — the results folder of the needle bench (docs/DESIGN.md §9): the heat maps
 * through gnuplot, needle_report_render (summary.json, README.md, plots/ from meta.json and
 * cells.tsv) and the comparison of two needle folders. The loading, the statistics, the claims and
 * README.md are the other report_needle*.c files (report_needle_internal.h).
 *
 * Reading order: plots; needle_report_render; needle_report_compare. */
#include "driver/report/report_needle_internal.h"
#include "kernels/errmsg.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ============================================================================================
 * Plots: heat maps of accuracy (per arm) and of its difference to the reference, length ×
 * depth, one panel per template
 * ========================================================================================== */

static void heat_body(FILE *g, const needle_results *R, int a, int diff, const char *stem) {
    int panels = R->n_tpl;
    char title[600];   /* the folder's tag and arm names, escaped for gnuplot's strings */
    snprintf(title, sizeof title, "%s%s%s%s (%s)", diff ? "Accuracy difference " : "Retrieval accuracy, ",
             R->arms[a].name, diff ? " − " : "", diff ? R->arms[R->ref].name : "", R->tag);
    fprintf(g, "set multiplot layout 1,%d title \"", panels);
    report_gp_put(g, title);
    fprintf(g, "\"\n");
    if (diff) {
        fprintf(g, "set cbrange [-1:1]\nset palette defined (-1 \"#b2182b\", 0 \"#f7f7f7\", 1 \"#2166ac\")\n");
    } else {
        fprintf(g, "set cbrange [0:1]\nset palette defined (0 \"#d73027\", 0.5 \"#fee08b\", 1 \"#1a9850\")\n");
    }
    fprintf(g, "set xrange [-0.5:%d.5]\nset yrange [-0.5:%d.5]\nset xtics (", R->n_positions - 1, R->n_lengths - 1);
    for (int i = 0; i < R->n_positions; i++) fprintf(g, "%s\"%d\" %d", i ? ", " : "", R->positions[i], i);
    fprintf(g, ")\nset ytics (");
    for (int i = 0; i < R->n_lengths; i++) fprintf(g, "%s\"%d\" %d", i ? ", " : "", R->lengths[i], i);
    fprintf(g, ")\nset xlabel \"Needle depth (%% of the haystack)\"\nset ylabel \"Prompt length (tokens)\"\n");
    fprintf(g, "unset key\nset style fill solid 1.0 noborder\n");
    for (int ti = 0; ti < panels; ti++) {
        fprintf(g, "set title \"%s prompts%s\"\n", R->tpl_chat[ti] ? "chat" : "raw",
                diff ? " (arm − reference)" : "");
        fprintf(g, "plot \"%s_%s.dat\" using 1:2:(0.5):(0.5):3 with boxxyerror fc palette, \"\" using 1:2:4 "
                "with labels font \",10\"\n", stem, R->tpl_chat[ti] ? "chat" : "raw");
    }
    fprintf(g, "unset multiplot\n");
}

static int heat_write(const report_outdir *pd, const needle_results *R, const needle_analysis *A, int a, int diff, int *drawn,
                      char *err, size_t errlen) {
    char stem[64], name[128];
    snprintf(stem, sizeof stem, "%s_%d", diff ? "diff" : "accuracy", a);
    *drawn = 0;
    int any = 0;
    for (int ti = 0; ti < R->n_tpl; ti++) {
        const needle_arm_stat *S = needle_stat_at(A, R, ti, a), *Q = needle_stat_at(A, R, ti, R->ref);
        snprintf(name, sizeof name, "%s_%s.dat", stem, R->tpl_chat[ti] ? "chat" : "raw");
        FILE *d = report_outdir_create(pd, name, err, errlen);   /* never through a planted link */
        if (!d) return -1;
        fprintf(d, "# depth_index length_index %s label\n", diff ? "accuracy_difference" : "accuracy");
        for (int li = 0; li < R->n_lengths; li++)
            for (int pi = 0; pi < R->n_positions; pi++) {
                size_t g = (size_t)li * (size_t)R->n_positions + (size_t)pi;
                if (!S->g_n[g] || (diff && !Q->g_n[g])) continue;
                double x = (double)S->g_exact[g] / (double)S->g_n[g];
                if (diff) {
                    x -= (double)Q->g_exact[g] / (double)Q->g_n[g];
                    if (x == 0) fprintf(d, "%d %d 0 \"0\"\n", pi, li);
                    else fprintf(d, "%d %d %.6g \"%+.0f%%\"\n", pi, li, x, 100 * x);
                } else {
                    fprintf(d, "%d %d %.6g \"%zu/%zu\"\n", pi, li, x, S->g_exact[g], S->g_n[g]);
                }
                any = 1;
            }
        if (fclose(d)) return errmsg_set(err, errlen, -1, "write error in %s/%s", pd->path, name);
    }
    if (!any) return 0;
    snprintf(name, sizeof name, "%s.gp", stem);
    FILE *g = report_outdir_create(pd, name, err, errlen);
    if (!g) return -1;
    int w = 160 + 420 * R->n_tpl, h = 140 + 48 * R->n_lengths + 180;
    fprintf(g, "# %s.gp: rendered by strata (needle report); run: gnuplot %s.gp\n", stem, stem);
    fprintf(g, "set terminal pngcairo size %d,%d font \"DejaVu Sans,11\" noenhanced\nset output \"%s.png\"\n",
            w, h, stem);
    heat_body(g, R, a, diff, stem);
    fprintf(g, "set terminal svg size %d,%d font \"DejaVu Sans,11\" noenhanced\nset output \"%s.svg\"\n", w, h, stem);
    heat_body(g, R, a, diff, stem);
    fprintf(g, "unset output\n");
    if (fclose(g)) return errmsg_set(err, errlen, -1, "write error in %s/%s", pd->path, name);
    *drawn = 1;
    return 0;
}

/* drawn [2][n_arms]: accuracy / diff plots that exist. DIR/plots is opened once (refused when it
 * is a symbolic link) and written through that descriptor (report_io.c). */
int needle_plots_render(const char *dir, const needle_results *R, const needle_analysis *A, int *drawn, char *err, size_t errlen) {
    char name[128];
    report_outdir pd;
    int rc = -1;
    if (report_outdir_open(&pd, dir, "plots", err, errlen)) return -1;
    FILE *lf = report_outdir_create(&pd, "gnuplot.log", err, errlen);
    if (!lf) goto done;
    fclose(lf);
    for (int diff = 0; diff < 2; diff++)
        for (int a = 0; a < R->n_arms; a++) {
            int *dr = &drawn[diff * R->n_arms + a];
            *dr = 0;
            static const char *const ext[] = {"gp", "png", "svg"};
            for (int e = 0; e < 3; e++) {
                snprintf(name, sizeof name, "%s_%d.%s", diff ? "diff" : "accuracy", a, ext[e]);
                report_outdir_remove(&pd, name);
            }
            if (diff && a == R->ref) continue;
            if (heat_write(&pd, R, A, a, diff, dr, err, errlen)) goto done;
            if (!*dr) continue;
            char stem[64];
            snprintf(stem, sizeof stem, "%s_%d", diff ? "diff" : "accuracy", a);
            if (report_gnuplot_run(&pd, stem, err, errlen)) goto done;
            for (int e = 1; e < 3; e++) {
                snprintf(name, sizeof name, "%s.%s", stem, ext[e]);
                if (!report_outdir_nonempty(&pd, name)) {
                    errmsg_set(err, errlen, -1, "gnuplot did not write %s/%s (see %s/gnuplot.log)", pd.path, name, pd.path);
                    goto done;
                }
            }
        }
    rc = 0;
done:
    report_outdir_close(&pd);
    return rc;
}

/* ============================================================================================
 * needle_report_render
 * ========================================================================================== */

int needle_report_render(const char *dir, char *err, size_t errlen) {
    needle_results R;
    needle_analysis A;
    int rc = -1, *drawn = NULL, n_cl = 0;
    needle_claim *cl = NULL;
    memset(&A, 0, sizeof A);
    if (needle_results_load(dir, &R, err, errlen)) goto done;
    if (needle_analysis_run(&R, &A, err, errlen)) goto done;
    int max_cl = 2 * A.n_sets * R.n_arms;
    if (!(cl = calloc((size_t)max_cl, sizeof *cl)) || !(drawn = calloc(2 * (size_t)R.n_arms, sizeof *drawn))) {
        errmsg_set(err, errlen, -1, "out of memory");
        goto done;
    }
    n_cl = needle_claims_make(&R, &A, cl, max_cl);
    if (needle_plots_render(dir, &R, &A, drawn, err, errlen)) goto done;
    json_t *sum = needle_summary_build(&R, &A, cl, n_cl);
    report_tmp_file out;
    if (!sum) { errmsg_set(err, errlen, -1, "out of memory building summary.json"); goto done; }
    if (report_tmp_open(&out, dir, "summary.json", err, errlen)) { json_decref(sum); goto done; }
    int jrc = json_dumpf(sum, out.f, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12) | JSON_ENSURE_ASCII);
    json_decref(sum);
    if (report_tmp_commit(&out, jrc != 0, err, errlen)) goto done;
    if (report_tmp_open(&out, dir, "README.md", err, errlen)) goto done;
    needle_readme_write(out.f, &R, &A, cl, n_cl, drawn);
    if (report_tmp_commit(&out, 0, err, errlen)) goto done;
    rc = 0;
done:
    if (rc) report_err_clean(err, errlen);   /* it may quote a field of the folder */
    free(cl);
    free(drawn);
    needle_analysis_free(&A, &R);
    needle_results_free(&R);
    return rc;
}

/* ============================================================================================
 * needle_report_compare
 * ========================================================================================== */

static void list_text(const int *v, int n, char *buf, size_t len) {
    size_t w = 0;
    buf[0] = 0;
    for (int i = 0; i < n && w < len; i++) w += (size_t)snprintf(buf + w, len - w, "%s%d", i ? "," : "", v[i]);
}

int needle_report_compare(const char *dir1, const char *dir2, FILE *out, char *err, size_t errlen) {
    needle_results R[2];
    needle_analysis A[2];
    const char *dirs[2] = {dir1, dir2};
    int rc = -1;
    memset(R, 0, sizeof R);
    memset(A, 0, sizeof A);
    for (int k = 0; k < 2; k++) {
        if (!needle_is_results(dirs[k])) {
            errmsg_set(err, errlen, -1, "%s is not a needle results folder: compare needs two needle folders "
                       "or two sweep folders", dirs[k]);
            goto done;
        }
        if (needle_results_load(dirs[k], &R[k], err, errlen) || needle_analysis_run(&R[k], &A[k], err, errlen)) goto done;
    }
    char a[256], b[256];
    fprintf(out, "# strata needle comparison: %s vs %s\n\n| | (1) `%s` | (2) `%s` | |\n|---|---|---|---|\n",
            R[0].tag, R[1].tag, dir1, dir2);
    report_md_setup_row(out, "Model", R[0].model_path, R[1].model_path);
    report_md_setup_row(out, "Model sha256", R[0].model_sha, R[1].model_sha);
    report_md_setup_row(out, "Corpus sha256", R[0].corpus_sha, R[1].corpus_sha);
    report_md_setup_row(out, "Reference arm", R[0].arms[R[0].ref].name, R[1].arms[R[1].ref].name);
    list_text(R[0].lengths, R[0].n_lengths, a, sizeof a);
    list_text(R[1].lengths, R[1].n_lengths, b, sizeof b);
    report_md_setup_row(out, "Lengths", a, b);
    list_text(R[0].positions, R[0].n_positions, a, sizeof a);
    list_text(R[1].positions, R[1].n_positions, b, sizeof b);
    report_md_setup_row(out, "Depths", a, b);
    snprintf(a, sizeof a, "%d keys, %d trials, seed %ld", R[0].keys, R[0].trials, R[0].seed);
    snprintf(b, sizeof b, "%d keys, %d trials, seed %ld", R[1].keys, R[1].trials, R[1].seed);
    report_md_setup_row(out, "Needles, trials, seed", a, b);
    report_md_setup_row(out, "Engine", R[0].engine, R[1].engine);
    report_md_setup_row(out, "Git", R[0].git, R[1].git);
    report_md_setup_row(out, "Date", R[0].date, R[1].date);
    fprintf(out, "\n| Arm | Prompts | Accuracy (1) | Accuracy (2) | Sign-flip p vs ref (1) | (2) | Mean Δ log-prob (1) "
            "| (2) |\n|---|---|---|---|---:|---:|---|---|\n");
    for (int i = 0; i < R[0].n_arms; i++) {
        int j = -1;
        for (int k = 0; k < R[1].n_arms && j < 0; k++) if (!strcmp(R[1].arms[k].name, R[0].arms[i].name)) j = k;
        if (j < 0) continue;
        for (int s = 0; s < A[0].n_sets; s++) {
            int s2 = -1;
            for (int k = 0; k < A[1].n_sets && s2 < 0; k++)
                if (!strcmp(needle_set_name(&R[0], &A[0], s), needle_set_name(&R[1], &A[1], k))) s2 = k;
            if (s2 < 0) continue;
            const needle_arm_stat *X = needle_stat_at(&A[0], &R[0], s, i), *Y = needle_stat_at(&A[1], &R[1], s2, j);
            char x1[96], y1[96], x2[32], y2[32], x3[96], y3[96];
            report_fmt_pct_ci(&X->acc, x1, sizeof x1);
            report_fmt_pct_ci(&Y->acc, y1, sizeof y1);
            needle_fmt_p(X->p, x2, sizeof x2);
            needle_fmt_p(Y->p, y2, sizeof y2);
            needle_fmt_lp_ci(&X->dlp, x3, sizeof x3);
            needle_fmt_lp_ci(&Y->dlp, y3, sizeof y3);
            fprintf(out, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", R[0].arms[i].name, needle_set_name(&R[0], &A[0], s),
                    x1, y1, x2, y2, x3, y3);
        }
    }
    fprintf(out, "\n");
    rc = ferror(out) ? errmsg_set(err, errlen, -1, "write error on the comparison output") : 0;
done:
    if (rc) report_err_clean(err, errlen);   /* it may quote a field of a folder */
    for (int k = 0; k < 2; k++) {
        needle_analysis_free(&A[k], &R[k]);
        needle_results_free(&R[k]);
    }
    return rc;
}

