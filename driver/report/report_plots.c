/* report_plots.c — the plots of a results folder: one gnuplot script per plot in DIR/plots,
 * its data in .dat files beside it (one per arm drawn), rendered by running gnuplot to PNG and
 * SVG. Test arms are drawn in palette colours, the noise-floor arm in grey under them.
 *
 * Reading order: file helpers; plot_write (data + script of one plot); gnuplot_run;
 * report_plots_render. Files are created through the opened plots folder (report_io.c) and every
 * string from the folder is escaped before it reaches a script. */
#include "driver/report/report_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const plot_name[REPORT_N_PLOTS] = {"kl_depth", "positions_kl", "kl_entropy",
                                                      "fork_survival", "kl_bytes"};
static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                      "#8c564b", "#e377c2", "#17becf"};
#define N_PALETTE 8
#define FLOOR_COLOR "#7f7f7f"

/* Writes a number for gnuplot: "?" (missing) when NaN or, on a log axis, <= 0. */
static void dat_num(FILE *f, double v, int log_axis) {
    if (isnan(v) || (log_axis && v <= 0.0)) fputs(" ?", f);
    else fprintf(f, " %.9g", v);
}

/* Creates pd/name afresh (a planted link is replaced, never written through: report_io.c). */
static FILE *plot_file(const report_outdir *pd, const char *name, char *err, size_t errlen) {
    return report_outdir_create(pd, name, err, errlen);
}

/* Closes *f and sets it to NULL; a failed close is a write error. Returns 0 or -1 with err. */
static int plot_close(FILE **f, const report_outdir *pd, const char *name, char *err, size_t errlen) {
    int rc = fclose(*f);
    *f = NULL;
    if (rc == 0) return 0;
    return errmsg_set(err, errlen, -1, "write error in %s/%s", pd->path, name);
}

/* Script head: PNG terminal, common settings. The title holds the folder's tag: escaped
 * (report_gp_put), like every label drawn from the folder. */
static void gp_head(FILE *g, const char *name, const char *title, const char *xlabel,
                    const char *ylabel, int log_y) {
    fprintf(g, "# %s.gp: rendered by strata (report_render); run: gnuplot %s.gp\n", name, name);
    fprintf(g, "set terminal pngcairo size 1000,620 font \"DejaVu Sans,11\" noenhanced\n");
    fprintf(g, "set output \"%s.png\"\n", name);
    fprintf(g, "set datafile missing \"?\"\n");
    fputs("set title \"", g);
    report_gp_put(g, title);
    fprintf(g, "\"\nset xlabel \"%s\"\nset ylabel \"%s\"\n", xlabel, ylabel);
    fprintf(g, "set grid\nset key outside top center horizontal box\n");
    if (log_y) fprintf(g, "set logscale y\nset format y \"%%.0e\"\n");
}

/* Script tail: the same plot again as SVG. */
static void gp_tail(FILE *g, const char *name) {
    fprintf(g, "set terminal svg size 1000,620 font \"DejaVu Sans,11\" noenhanced\n");
    fprintf(g, "set output \"%s.svg\"\nreplot\nunset output\n", name);
}

static int has_positive(const double *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (v[i] > 0.0) return 1;
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Rolling median of v [n] (finite values) over a centred window of 2h+1 rows, cut at the
 * ends, into out [n]. */
static int rolling_median(const double *v, size_t n, size_t h, double *out) {
    double *w = malloc((2 * h + 1) * sizeof *w); /* [2h+1] sorted window */
    if (!w) return -1;
    for (size_t i = 0; i < n; i++) {
        size_t lo = i > h ? i - h : 0, hi = i + h + 1 < n ? i + h + 1 : n, m = 0;
        for (size_t j = lo; j < hi; j++) w[m++] = v[j];
        qsort(w, m, sizeof *w, cmp_double);
        out[i] = m % 2 ? w[m / 2] : 0.5 * (w[m / 2 - 1] + w[m / 2]);
    }
    free(w);
    return 0;
}

/* What the series writers below share: where the plot goes, what it draws from, and the "plot ..."
 * command being built (pl; ll: the lines drawn last, on top). Each writer writes the data file fname
 * of one arm's series (i, the floor arm when floor; col its colour, label its escaped label), leaves
 * it open in *d and adds the series to the command. Returns 1, 0 when the arm has nothing to draw
 * here (no file made), or -1 with the message in err. */
typedef struct {
    const report_outdir *pd;
    const report_results *R;
    const report_analysis *A;
    FILE *pl, *ll;
    int n_series;              /* series added so far */
    const char *ref;           /* the reference's label, escaped for gnuplot */
    char *err;
    size_t errlen;
} plot_ctx;

static int series_kl_depth(plot_ctx *c, int i, int floor, const char *col, const char *label, const char *fname,
                           FILE **d) {
    const report_results *R = c->R;
    const report_arm_an *X = &c->A->a[i];
    double *kl = malloc((X->nd ? X->nd : 1) * sizeof *kl); /* [nd] series to test */
    if (!kl) return errmsg_set(c->err, c->errlen, -1, "out of memory");
    for (size_t j = 0; j < X->nd; j++)
        kl[j] = floor ? R->drows[X->d0 + j].kl_ra : R->drows[X->d0 + j].kl_ar;
    int any = has_positive(kl, X->nd);
    free(kl);
    if (!any) return 0;
    if (!(*d = plot_file(c->pd, fname, c->err, c->errlen))) return -1;
    fprintf(*d, "# depth  %s  js  (? = zero or missing)\n", floor ? "kl_ref_arm" : "kl_arm_ref");
    for (size_t j = 0; j < X->nd; j++) {
        const report_depth *r = &R->drows[X->d0 + j];
        fprintf(*d, "%d", r->depth);
        dat_num(*d, floor ? r->kl_ra : r->kl_ar, 1);
        dat_num(*d, r->js, 1);
        dat_num(*d, floor ? REPORT_FLOOR_FACTOR * r->kl_ra : NAN, 1);
        fputc('\n', *d);
    }
    if (floor) {
        fprintf(c->pl, "%s\"%s\" using 1:2:4 with filledcurves fc rgb \"#e0e0e0\" title "
                "\"band: noise floor to %.0fx floor\", \"%s\" using 1:2 with lines lw 2 "
                "lc rgb \"%s\" title \"noise floor KL(%s‖fp32)\"", c->n_series ? ", " : "",
                fname, REPORT_FLOOR_FACTOR, fname, col, c->ref);
    } else {
        fprintf(c->pl, "%s\"%s\" using 1:2 with linespoints lw 2 pt 7 lc rgb \"%s\" title "
                "\"KL(%s‖%s)\", \"%s\" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "
                "\"%s\" title \"JS(%s, %s)\"", c->n_series ? ", " : "", fname, col, label,
                c->ref, fname, col, label, c->ref);
    }
    return 1;
}

static int series_positions(plot_ctx *c, int i, int floor, const char *col, const char *label, const char *fname,
                            FILE **d) {
    const report_results *R = c->R;
    const report_arm_an *X = &c->A->a[i];
    if (!X->np) return 0;
    double *kl = malloc(X->np * sizeof *kl), *med = malloc(X->np * sizeof *med); /* [np] */
    if (!kl || !med) { free(kl); free(med); return errmsg_set(c->err, c->errlen, -1, "out of memory"); }
    for (size_t j = 0; j < X->np; j++)
        kl[j] = floor ? R->prows[X->p0 + j].kl_ra : R->prows[X->p0 + j].kl_ar;
    size_t h = X->np / 100 < 2 ? 2 : X->np / 100 > 100 ? 100 : X->np / 100;
    if (!has_positive(kl, X->np) || rolling_median(kl, X->np, h, med)) {
        free(kl);
        free(med);
        return 0;
    }
    if (!(*d = plot_file(c->pd, fname, c->err, c->errlen))) { free(kl); free(med); return -1; }
    fprintf(*d, "# pos  kl  rolling_median(window %zu)\n", 2 * h + 1);
    for (size_t j = 0; j < X->np; j++) {
        fprintf(*d, "%d", R->prows[X->p0 + j].pos);
        dat_num(*d, kl[j], 1);
        dat_num(*d, med[j], 1);
        fputc('\n', *d);
    }
    free(kl);
    free(med);
    char lab[8 * REPORT_LABEL_MAX + 64];
    if (floor) snprintf(lab, sizeof lab, "noise floor KL(%s‖fp32)", c->ref);
    else snprintf(lab, sizeof lab, "KL(%s‖%s)", label, c->ref);
    /* points first (denser data: smaller, more transparent), median lines on top */
    int dense = X->np > 5000;
    fprintf(c->pl, "%s\"%s\" using 1:2 with points pt 7 ps %s lc rgb \"#%s%s\" title "
            "\"%s, per position\"", c->n_series ? ", " : "", fname, dense ? "0.3" : "0.5",
            dense ? "a0" : "60", col + 1, lab);
    fprintf(c->ll, ", \"%s\" using 1:3 with lines lw 2.5 lc rgb \"%s\" title \"%s, rolling "
            "median of %zu\"", fname, col, lab, 2 * h + 1);
    return 1;
}

static int series_kl_entropy(plot_ctx *c, int i, int floor, const char *col, const char *label, const char *fname,
                             FILE **d) {
    const report_results *R = c->R;
    const report_arm_an *X = &c->A->a[i];
    if (floor) return 0;
    int pos = R->have_positions && X->np;
    size_t n = pos ? X->np : X->nd;
    int any = 0;
    for (size_t j = 0; j < n; j++)
        any |= (pos ? R->prows[X->p0 + j].kl_ar : R->drows[X->d0 + j].kl_ar) > 0.0;
    if (!any) return 0;
    if (!(*d = plot_file(c->pd, fname, c->err, c->errlen))) return -1;
    fprintf(*d, "# entropy_ref  kl_arm_ref  (%s)\n", pos ? "positions" : "depths");
    for (size_t j = 0; j < n; j++) {
        double e = pos ? R->prows[X->p0 + j].ent : R->drows[X->d0 + j].ent;
        double k = pos ? R->prows[X->p0 + j].kl_ar : R->drows[X->d0 + j].kl_ar;
        fprintf(*d, "%.9g", e);
        dat_num(*d, k, 1);
        fputc('\n', *d);
    }
    fprintf(c->pl, "%s\"%s\" using 1:2 with points pt 7 ps %s lc rgb \"#80%s\" title "
            "\"KL(%s‖%s) at %s\"", c->n_series ? ", " : "", fname, pos ? "0.6" : "1.2",
            col + 1, label, c->ref, pos ? "positions" : "depths");
    return 1;
}

/* One point per arm: KV bytes per token, mean KL with its CI, the arm's name. */
static int series_pareto(plot_ctx *c, int i, int floor, const char *col, const char *label, const char *fname,
                         FILE **d) {
    const report_results *R = c->R;
    const report_arm_an *X = &c->A->a[i];
    const char *over;
    const stats_ci *ci = report_arm_mean_kl(c->A, i, &over);
    if (isnan(R->arms[i].kv_bytes) || !(ci->est > 0)) return 0;
    if (!(*d = plot_file(c->pd, fname, c->err, c->errlen))) return -1;
    fprintf(*d, "# kv_bytes_per_token  mean_kl  lo  hi  (over %s)  label\n%.9g", over, R->arms[i].kv_bytes);
    dat_num(*d, ci->est, 1);
    dat_num(*d, ci->lo > 0 ? ci->lo : ci->est, 1);
    dat_num(*d, ci->hi, 1);
    fputs(" \"", *d);
    report_gp_data_put(*d, floor ? "fp32 (floor)" : X->label);   /* a data field, not a command */
    fputs("\"\n", *d);
    fprintf(c->pl, "%s\"%s\" using 1:2:3:4 with yerrorbars pt 7 ps 1.3 lc rgb \"%s\" title \"%s\", "
            "\"%s\" using 1:2:5 with labels offset 0.8,0.8 left tc rgb \"%s\" notitle", c->n_series ? ", " : "",
            fname, col, floor ? "fp32 (noise floor)" : label, fname, col);
    return 1;
}

static int series_forks(plot_ctx *c, int i, int floor, const char *col, const char *label, const char *fname,
                        FILE **d) {
    const report_results *R = c->R;
    const stats_km *k = &c->A->a[i].dep.km;
    if (!k->n_obs) return 0;
    if (!(*d = plot_file(c->pd, fname, c->err, c->errlen))) return -1;
    fprintf(*d, "# i  S(i)  lo  hi   (Kaplan-Meier steps)\n0 1 1 1\n");
    double s = 1, lo = 1, hi = 1;
    for (size_t j = 0; j < k->n_steps; j++) {
        fprintf(*d, "%d %.9g %.9g %.9g\n", k->time[j], s, lo, hi);
        s = k->surv[j]; lo = k->lo[j]; hi = k->hi[j];
        fprintf(*d, "%d %.9g %.9g %.9g\n", k->time[j], s, lo, hi);
    }
    fprintf(*d, "%d %.9g %.9g %.9g\n", R->fork_n, s, lo, hi);
    char lab[8 * REPORT_LABEL_MAX + 64];
    if (floor) snprintf(lab, sizeof lab, "fp32 vs %s (noise floor)", c->ref);
    else snprintf(lab, sizeof lab, "%s vs %s", label, c->ref);
    fprintf(c->pl, "%s\"%s\" using 1:3:4 with filledcurves fc rgb \"%s\" fs transparent "
            "solid 0.15 noborder notitle, \"%s\" using 1:2 with lines lw 2.5 lc rgb \"%s\" "
            "title \"%s (%zu depths)\"", c->n_series ? ", " : "", fname, col, fname, col, lab,
            k->n_obs);
    return 1;
}

/* The script's head for plot which: title, axes, scales. */
static void plot_head(FILE *g, int which, const char *name, const report_results *R) {
    char title[400];
    if (which == REPORT_PLOT_KL_DEPTH) {
        snprintf(title, sizeof title, "KL and JS vs depth (%s)", R->tag);
        gp_head(g, name, title, "Depth (tokens in the prefix)",
                "Divergence from the reference (nats, log scale)", 1);
    } else if (which == REPORT_PLOT_POSITIONS) {
        snprintf(title, sizeof title, "Per-position KL with rolling median (%s)", R->tag);
        gp_head(g, name, title, "Position in the document (token index)",
                "KL (nats, log scale)", 1);
    } else if (which == REPORT_PLOT_KL_ENTROPY) {
        snprintf(title, sizeof title, "KL vs reference entropy (%s)", R->tag);
        gp_head(g, name, title, "Entropy of the reference distribution (nats)",
                "KL(arm‖ref) (nats, log scale)", 1);
    } else if (which == REPORT_PLOT_PARETO) {
        snprintf(title, sizeof title, "KV size against divergence, mean and 95%% CI (%s)", R->tag);
        gp_head(g, name, title, "KV cache bytes per token (all layers, K and V)",
                "Mean KL(arm‖ref) (nats, log scale)", 1);
        fprintf(g, "set logscale x 2\nset offsets graph 0.05, graph 0.15, graph 0.05, graph 0.05\n");
    } else {
        snprintf(title, sizeof title, "Fork survival, Kaplan-Meier with 95%% Greenwood band (%s)",
                 R->tag);
        gp_head(g, name, title, "Generated token index i",
                "Share of depths not yet forked, S(i) = P(fork > i)", 0);
        fprintf(g, "set yrange [0:1.05]\nset xrange [0:%d]\n", R->fork_n);
    }
}

typedef int (*series_fn)(plot_ctx *, int, int, const char *, const char *, const char *, FILE **);

/* Writes the data and script of one plot; *drawn = 0 when there is nothing to draw. */
static int plot_write(const report_outdir *pd, int which, const report_results *R,
                      const report_analysis *A, int *drawn, char *err, size_t errlen) {
    static const series_fn series[REPORT_N_PLOTS] = {
        [REPORT_PLOT_KL_DEPTH] = series_kl_depth, [REPORT_PLOT_POSITIONS] = series_positions,
        [REPORT_PLOT_KL_ENTROPY] = series_kl_entropy, [REPORT_PLOT_PARETO] = series_pareto,
        [REPORT_PLOT_FORKS] = series_forks };
    char fname[300];
    const char *name = plot_name[which];
    /* labels as they go into the script: escaped for gnuplot's strings (report_io.c) */
    char ref[4 * REPORT_LABEL_MAX + 1], label[4 * REPORT_LABEL_MAX + 1];
    report_gp_str(ref, sizeof ref, A->ref_label);
    FILE *g = NULL, *d = NULL;
    int rc = -1;
    char *plot = NULL, *lines = NULL; /* the "plot ..." command being built; lines drawn last */
    size_t plot_len = 0, lines_len = 0;
    FILE *pl = open_memstream(&plot, &plot_len);
    FILE *ll = open_memstream(&lines, &lines_len);
    if (!pl || !ll) {
        if (pl) fclose(pl);
        if (ll) fclose(ll);
        free(plot);
        free(lines);
        return errmsg_set(err, errlen, -1, "out of memory");
    }
    plot_ctx c = { pd, R, A, pl, ll, 0, ref, err, errlen };
    *drawn = 0;

    /* the floor arm first, so its band lies under the other series */
    for (int o = -1; o < R->n_arms; o++) {
        int i = o < 0 ? R->floor : o;
        if (i < 0 || (o >= 0 && i == R->floor)) continue;
        int floor = i == R->floor;  /* the floor arm is never the reference or a repeat */
        if (!floor && !report_is_test_arm(R, i)) continue;
        const char *col = floor ? FLOOR_COLOR : palette[i % N_PALETTE];
        report_gp_str(label, sizeof label, A->a[i].label);
        snprintf(fname, sizeof fname, "%s_%d.dat", name, i);
        int got = series[which](&c, i, floor, col, label, fname, &d);
        if (got < 0) goto done;
        if (!got) continue;
        if (plot_close(&d, pd, fname, err, errlen)) goto done;
        c.n_series++;
    }
    if (fflush(pl) != 0 || fflush(ll) != 0) { errmsg_set(err, errlen, -1, "out of memory"); goto done; }
    if (c.n_series == 0) { rc = 0; goto done; }

    snprintf(fname, sizeof fname, "%s.gp", name);
    if (!(g = plot_file(pd, fname, err, errlen))) goto done;
    plot_head(g, which, name, R);
    fprintf(g, "plot %s%s\n", plot, lines);
    gp_tail(g, name);
    if (plot_close(&g, pd, fname, err, errlen)) goto done;
    *drawn = 1;
    rc = 0;
done:
    if (d) fclose(d);
    if (g) fclose(g);
    fclose(pl);
    fclose(ll);
    free(plot);
    free(lines);
    return rc;
}

/* Executes gnuplot from the first absolute directory of $PATH that has it (in the child, after it
 * entered the plots folder): a relative entry ("." or an empty one) would find a "gnuplot" planted
 * in the results folder. Returns only when none could be executed. */
static void exec_gnuplot(const char *script) {
    const char *path = getenv("PATH");
    char prog[4096];
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path;;) {
        const char *c = strchr(p, ':');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        if (n && p[0] == '/' && n + sizeof "/gnuplot" <= sizeof prog) {
            memcpy(prog, p, n);
            memcpy(prog + n, "/gnuplot", sizeof "/gnuplot");
            execl(prog, "gnuplot", script, (char *)NULL);
        }
        if (!c) return;
        p = c + 1;
    }
}

/* Runs "gnuplot NAME.gp" in the plots folder pd (by its descriptor: the folder checked when it
 * was opened), its output appended to pd/gnuplot.log. */
static int gnuplot_run(const report_outdir *pd, const char *name, char *err, size_t errlen) {
    char script[300];
    snprintf(script, sizeof script, "%s.gp", name);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        return errmsg_set(err, errlen, -1, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        if (fchdir(pd->fd) != 0) _exit(126);
        int fd = open("gnuplot.log", O_WRONLY | O_APPEND | O_NOFOLLOW);
        if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); close(fd); }
        exec_gnuplot(script);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return errmsg_set(err, errlen, -1, "waitpid: %s", strerror(errno));
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
        errmsg_set(err, errlen, -1, "gnuplot not found on PATH (install gnuplot-nox)");
    else
        errmsg_set(err, errlen, -1, "gnuplot failed on %s/%s (see %s/gnuplot.log)", pd->path, script, pd->path);
    return -1;
}

const char *report_plot_name(int p) {
    return p >= 0 && p < REPORT_N_PLOTS ? plot_name[p] : "unknown";
}

/* Writes and renders every plot (see report_internal.h). DIR/plots is opened once and refused
 * when it is a symbolic link; every file in it is created afresh through that descriptor. */
int report_plots_render(const char *dir, const report_results *R, const report_analysis *A,
                        int *drawn, char *err, size_t errlen) {
    char name[300];
    report_outdir pd;
    int rc = -1;
    if (report_outdir_open(&pd, dir, "plots", err, errlen)) return -1;
    FILE *lf = report_outdir_create(&pd, "gnuplot.log", err, errlen);  /* start a fresh log */
    if (!lf) goto done;
    fclose(lf);
    for (int p = 0; p < REPORT_N_PLOTS; p++) {
        static const char *const ext[] = {"gp", "png", "svg"};
        for (int e = 0; e < 3; e++) {
            snprintf(name, sizeof name, "%s.%s", plot_name[p], ext[e]);
            report_outdir_remove(&pd, name);
        }
        if (plot_write(&pd, p, R, A, &drawn[p], err, errlen)) goto done;
        if (!drawn[p]) continue;
        if (gnuplot_run(&pd, plot_name[p], err, errlen)) goto done;
        for (int e = 1; e < 3; e++) {
            snprintf(name, sizeof name, "%s.%s", plot_name[p], ext[e]);
            if (!report_outdir_nonempty(&pd, name)) {
                errmsg_set(err, errlen, -1, "gnuplot did not write %s/%s (see %s/gnuplot.log)", pd.path,
                           name, pd.path);
                goto done;
            }
        }
    }
    rc = 0;
done:
    report_outdir_close(&pd);
    return rc;
}

int report_gnuplot_run(const report_outdir *pd, const char *name, char *err, size_t errlen) {
    return gnuplot_run(pd, name, err, errlen);
}
