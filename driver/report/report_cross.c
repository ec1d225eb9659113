/* report_cross.c — the optional measurements after each depth's greedy fork probe
 * (docs/DESIGN.md §4.12, §4.13): cross.tsv (each arm's greedy continuation scored under the
 * reference and the f32 arm) and samples.tsv (sampled fork probes with common random numbers),
 * loaded, summarised with stats.h and rendered as README sections and summary.json keys.
 *
 * Reading order: parsing; loading; statistics; README; summary.json. */
#include "driver/report/report_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ============================================================================================
 * Parsing one TSV line
 * ========================================================================================== */

#define X_MAX_FIELDS 12

typedef struct {
    const char *path;
    long line;
    char *err;
    size_t errlen;
} x_ctx;

/* Splits line on tabs (in place) into f [X_MAX_FIELDS]; returns the count (X_MAX_FIELDS + 1 for more). */
static int x_split(char *line, char **f) {
    int n = 0;
    for (char *p = line;;) {
        if (n == X_MAX_FIELDS) return X_MAX_FIELDS + 1;
        f[n++] = p;
        char *t = strchr(p, '\t');
        if (!t) return n;
        *t = 0;
        p = t + 1;
    }
}

static int x_int(x_ctx *c, const char *s, const char *col, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) {
        return errmsg_set(c->err, c->errlen, -1, "%s:%ld: column %s: \"%s\" is not an integer in [%ld, %ld]", c->path,
                          c->line, col, s, lo, hi);
    }
    *out = (int)v;
    return 0;
}

/* A number as the TSVs write it (%.17g, "nan" allowed when nan_ok) within [lo, hi]. */
static int x_num(x_ctx *c, const char *s, const char *col, int nan_ok, double lo, double hi, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end || (isnan(v) && !nan_ok) || (!isnan(v) && !(v >= lo && v <= hi))) {
        return errmsg_set(c->err, c->errlen, -1, "%s:%ld: column %s: \"%s\" is not a number in [%g, %g]", c->path,
                          c->line, col, s, lo, hi);
    }
    *out = v;
    return 0;
}

/* A non-reference arm of R by name. */
static int x_arm(x_ctx *c, const report_results *R, const char *s, int *out) {
    int a = report_find_arm(R, s);
    if (a < 0 || a == R->ref) {
        return errmsg_set(c->err, c->errlen, -1, "%s:%ld: \"%s\" is not a non-reference arm of meta.json", c->path, c->line, s);
    }
    *out = a;
    return 0;
}

/* Comma-separated token ids: their count (the streams are checked against fork and censored). */
static int x_tokens(x_ctx *c, const char *s, const char *col, int **out, int *n) {
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    *n = 0;
    if (!(*out = malloc(cap * sizeof **out))) return errmsg_set(c->err, c->errlen, -1, "out of memory");
    if (!*s) return 0;
    for (const char *p = s;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end != ',' && *end)) {
            return errmsg_set(c->err, c->errlen, -1, "%s:%ld: column %s: bad token list near \"%.20s\"", c->path,
                              c->line, col, p);
        }
        (*out)[(*n)++] = (int)v;
        if (!*end) break;
        p = end + 1;
    }
    return 0;
}

/* ============================================================================================
 * Loading
 * ========================================================================================== */

void report_extra_free(report_extra *X) {
    free(X->x);
    free(X->xs);
    free(X->s);
    free(X->temps);
    memset(X, 0, sizeof *X);
}

/* Adds T to X->temps (distinct, in order of first appearance). */
static int add_temp(report_extra *X, double T) {
    for (int j = 0; j < X->n_temps; j++)
        if (X->temps[j] == T) return 0;
    double *t = realloc(X->temps, sizeof *t * (size_t)(X->n_temps + 1));
    if (!t) return -1;
    X->temps = t;
    X->temps[X->n_temps++] = T;
    return 0;
}

/* cross.tsv's columns from fork on (f [9]) into r. */
static int parse_cross(x_ctx *c, const report_results *R, char **f, report_cross_row *r) {
    if (x_int(c, f[0], "fork", 0, R->fork_n, &r->fork) || x_int(c, f[1], "censored", 0, 1, &r->censored) ||
        x_int(c, f[2], "n", 1, R->fork_n, &r->n) ||
        x_num(c, f[3], "ref_nll_arm_text", 0, 0, INFINITY, &r->ref_nll_arm) ||
        x_num(c, f[4], "ref_nll_ref_text", 0, 0, INFINITY, &r->ref_nll_ref) ||
        x_num(c, f[5], "f32_nll_arm_text", 1, 0, INFINITY, &r->f32_nll_arm) ||
        x_num(c, f[6], "f32_nll_ref_text", 1, 0, INFINITY, &r->f32_nll_ref) ||
        x_num(c, f[7], "rep_arm", 1, 0, 1, &r->rep_arm) || x_num(c, f[8], "rep_ref", 1, 0, 1, &r->rep_ref))
        return -1;
    return 0;
}

/* A cross_samples.tsv line (f [12]) into X->xs: its fork must be that of samples.tsv's row of the
 * same arm, depth and temperature. */
static int parse_cross_sample(x_ctx *c, const report_results *R, report_extra *X, char **f, int depth, int arm) {
    report_cross_row r = { .depth = depth, .arm = arm };
    if (x_num(c, f[2], "temperature", 0, 1e-300, 100, &r.temperature) || parse_cross(c, R, f + 3, &r)) return -1;
    const report_sample_row *s = NULL;
    for (size_t i = 0; i < X->ns && !s; i++)
        if (X->s[i].arm == arm && X->s[i].depth == depth && X->s[i].temperature == r.temperature) s = &X->s[i];
    if (!s || s->fork != r.fork || s->censored != r.censored || isnan(r.f32_nll_arm) != isnan(r.f32_nll_ref)) {
        return errmsg_set(c->err, c->errlen, -1,
                          "%s:%ld: no samples.tsv row of arm %s, depth %d, temperature %s with fork "
                          "%d (censored %d), or only one f32 score is given", c->path, c->line, f[1], depth, f[2],
                          r.fork, r.censored);
    }
    for (size_t i = 0; i < X->nxs; i++)
        if (X->xs[i].arm == arm && X->xs[i].depth == depth && X->xs[i].temperature == r.temperature) {
            return errmsg_set(c->err, c->errlen, -1, "%s:%ld: arm %s, depth %d, temperature %s appears twice", c->path,
                              c->line, f[1], depth, f[2]);
        }
    report_cross_row *nx = realloc(X->xs, sizeof *nx * (X->nxs + 1));
    if (!nx) return errmsg_set(c->err, c->errlen, -1, "out of memory");
    X->xs = nx;
    X->xs[X->nxs++] = r;
    return 0;
}

/* One line of cross.tsv (kind 0), samples.tsv (kind 1) or cross_samples.tsv (kind 2) into X; rows
 * of depths the report did not load (an unfinished depth) are skipped. */
static int parse_line(x_ctx *c, const report_results *R, report_extra *X, int kind, char *line) {
    char *f[X_MAX_FIELDS + 1];
    int nf = x_split(line, f), want = kind == 2 ? 12 : kind ? 9 : 11;
    if (nf != want) {
        return errmsg_set(c->err, c->errlen, -1, "%s:%ld: %d fields, expected %d", c->path, c->line, nf, want);
    }
    int depth, arm;
    if (x_int(c, f[0], "depth", 1, INT32_MAX, &depth) || x_arm(c, R, f[1], &arm)) return -1;
    const report_depth *d = report_find_depth(R, arm, depth);
    if (!d) return 0;
    if (kind == 2) return parse_cross_sample(c, R, X, f, depth, arm);
    if (kind == 0) {
        report_cross_row r = { .depth = depth, .arm = arm };
        if (parse_cross(c, R, f + 2, &r)) return -1;
        if (r.fork != d->fork || r.censored != d->censored || isnan(r.f32_nll_arm) != isnan(r.f32_nll_ref)) {
            return errmsg_set(c->err, c->errlen, -1,
                              "%s:%ld: fork %d (censored %d) disagrees with depths.tsv's %d (%d), or "
                              "only one f32 score is given", c->path, c->line, r.fork, r.censored, d->fork,
                              d->censored);
        }
        for (size_t i = 0; i < X->nx; i++)
            if (X->x[i].arm == arm && X->x[i].depth == depth) {
                return errmsg_set(c->err, c->errlen, -1, "%s:%ld: arm %s, depth %d appears twice", c->path, c->line, f[1], depth);
            }
        report_cross_row *nx = realloc(X->x, sizeof *nx * (X->nx + 1));
        if (!nx) return errmsg_set(c->err, c->errlen, -1, "out of memory");
        X->x = nx;
        X->x[X->nx++] = r;
        return 0;
    }
    report_sample_row r = { .depth = depth, .arm = arm };
    int *ta = NULL, *tr = NULL, na = 0, nr = 0, rc = -1;
    if (x_num(c, f[2], "temperature", 0, 1e-300, 100, &r.temperature) ||
        x_num(c, f[3], "top_p", 0, 1e-300, 1, &r.top_p) || x_int(c, f[5], "fork", 0, R->fork_n, &r.fork) ||
        x_int(c, f[6], "censored", 0, 1, &r.censored) || x_tokens(c, f[7], "tokens_arm", &ta, &na) ||
        x_tokens(c, f[8], "tokens_ref", &tr, &nr))
        goto done;
    int first = 0;
    while (first < na && first < nr && ta[first] == tr[first]) first++;
    if (na != R->fork_n || nr != R->fork_n || first != r.fork || r.censored != (r.fork == R->fork_n)) {
        errmsg_set(c->err, c->errlen, -1, "%s:%ld: the two streams (%d and %d tokens of %d) first differ at %d, "
                   "not at fork %d (censored %d)", c->path, c->line, na, nr, R->fork_n, first, r.fork, r.censored);
        goto done;
    }
    for (size_t i = 0; i < X->ns; i++)
        if (X->s[i].arm == arm && X->s[i].depth == depth && X->s[i].temperature == r.temperature) {
            errmsg_set(c->err, c->errlen, -1, "%s:%ld: arm %s, depth %d, temperature %s appears twice", c->path,
                       c->line, f[1], depth, f[2]);
            goto done;
        }
    report_sample_row *ns = realloc(X->s, sizeof *ns * (X->ns + 1));
    if (!ns || add_temp(X, r.temperature)) {
        if (ns) X->s = ns;
        errmsg_set(c->err, c->errlen, -1, "out of memory");
        goto done;
    }
    X->s = ns;
    X->s[X->ns++] = r;
    rc = 0;
done:
    free(ta);
    free(tr);
    return rc;
}

/* Reads DIR/NAME if it exists (*present = 0 when it does not). */
static int load_file(const char *dir, const char *name, const char *header, int kind, const report_results *R,
                     report_extra *X, int *present, char *err, size_t errlen) {
    char path[4096];
    *present = 0;
    if (report_path(path, sizeof path, dir, name, err, errlen)) return -1;
    int absent = 0;
    FILE *f = report_open_read(path, 1, &absent, err, errlen);   /* regular, not a link */
    if (!f) return absent ? 0 : -1;
    *present = 1;
    x_ctx c = { path, 0, err, errlen };
    char *line = NULL;
    size_t cap = 0;
    ssize_t got = 0;
    int rc = 0;
    while (!rc && (got = report_getline(&line, &cap, f, path, c.line + 1, err, errlen)) >= 0) {
        c.line++;
        if (got == 0 || line[got - 1] != '\n') break;   /* a torn last line: dropped */
        line[got - 1] = 0;
        if (c.line == 1) {
            if (strcmp(line, header)) {
                errmsg_set(err, errlen, -1, "%s:1: unexpected header (expected \"%s\")", path, header);
                rc = -1;
            }
            continue;
        }
        rc = parse_line(&c, R, X, kind, line);
    }
    if (!rc && got == -2) rc = -1;   /* a line over REPORT_LINE_MAX: err says so */
    if (!rc && ferror(f)) {
        errmsg_set(err, errlen, -1, "cannot read %s: %s", path, strerror(errno));
        rc = -1;
    }
    free(line);
    fclose(f);
    return rc;
}

static int cmp_cross(const void *a, const void *b) {
    const report_cross_row *p = a, *q = b;
    if (p->arm != q->arm) return p->arm - q->arm;
    if (p->temperature != q->temperature) return (p->temperature > q->temperature) - (p->temperature < q->temperature);
    return (p->depth > q->depth) - (p->depth < q->depth);
}

int report_extra_load(const char *dir, const report_results *R, report_extra *X, char *err, size_t errlen) {
    memset(X, 0, sizeof *X);
    X->margin_nats = log1p(REPORT_MARGIN_PPL_DEFAULT / 100.0);   /* report_render sets the run's */
    if (load_file(dir, "cross.tsv", REPORT_CROSS_HEADER, 0, R, X, &X->have_cross, err, errlen) ||
        load_file(dir, "samples.tsv", REPORT_SAMPLES_HEADER, 1, R, X, &X->have_samples, err, errlen) ||
        load_file(dir, "cross_samples.tsv", REPORT_CROSS_SAMPLES_HEADER, 2, R, X, &X->have_cross_samples, err, errlen))
        return -1;
    if (X->nx) qsort(X->x, X->nx, sizeof *X->x, cmp_cross);
    if (X->nxs) qsort(X->xs, X->nxs, sizeof *X->xs, cmp_cross);
    return 0;
}

/* ============================================================================================
 * Statistics
 * ========================================================================================== */

/* The cross-scoring summary of arm a (rows X->x sorted by arm, depth). Δ over the forked depths
 * only (where the texts are identical Δ = 0 by construction, which would dilute the mean), a
 * circular bootstrap with block 1 (depths far apart); repetition over every depth. */
typedef struct {
    size_t n, n_forked;
    stats_ci d_ref, d_f32;         /* Δ NLL per token: arm's text − the reference's, by ref / by f32 */
    stats_boot b_ref, b_f32;       /* the same with the 90 % interval of the verdict */
    stats_ci rep_arm, rep_ref;
    stats_boot b_rep;              /* repetition arm − ref over the forked depths (paired, block 1) */
    stats_ci d_rep;
} cross_sum;

/* The mean of the finite values of x [n] with its circular block bootstrap (block 0: Politis–White;
 * 1: values far apart, as the forked depths) into b (both interval levels) and c. */
static void boot_finite(const double *x, size_t n, size_t block, stats_boot *b, stats_ci *c) {
    double *v = malloc(sizeof *v * (n ? n : 1));   /* [n] the finite values */
    size_t m = 0;
    for (size_t i = 0; v && i < n; i++)
        if (isfinite(x[i])) v[m++] = x[i];
    memset(b, 0, sizeof *b);
    b->est = b->lo = b->hi = b->lo90 = b->hi90 = b->se = b->p = NAN;
    if (v && m) stats_mean_ci_circular(v, m, block, STATS_BOOT_B, STATS_BOOT_SEED, NULL, b);
    *c = (stats_ci){ b->est, b->lo, b->hi, m };
    free(v);
}

/* Over the rows x [nx] of arm a at temperature T (cross.tsv's rows have T = 0). */
static int cross_summary(const report_cross_row *x, size_t nx, int a, double T, cross_sum *s) {
    memset(s, 0, sizeof *s);
    size_t n = 0;
    for (size_t i = 0; i < nx; i++) n += x[i].arm == a && x[i].temperature == T;
    double *buf = malloc(sizeof *buf * 5 * (n ? n : 1));   /* [5][n] Δ ref, Δ f32 (forked), rep arm, rep ref, Δ rep (forked) */
    if (!buf) return -1;
    size_t k = 0, f = 0;
    for (size_t i = 0; i < nx; i++) {
        const report_cross_row *r = &x[i];
        if (r->arm != a || r->temperature != T) continue;
        if (!r->censored) {
            buf[f] = r->ref_nll_arm - r->ref_nll_ref;
            buf[n + f] = r->f32_nll_arm - r->f32_nll_ref;
            buf[4 * n + f] = r->rep_arm - r->rep_ref;
            f++;
        }
        buf[2 * n + k] = r->rep_arm;
        buf[3 * n + k] = r->rep_ref;
        k++;
    }
    s->n = n;
    s->n_forked = f;
    stats_boot b;
    boot_finite(buf, f, 1, &s->b_ref, &s->d_ref);
    boot_finite(buf + n, f, 1, &s->b_f32, &s->d_f32);
    boot_finite(buf + 2 * n, n, 0, &b, &s->rep_arm);
    boot_finite(buf + 3 * n, n, 0, &b, &s->rep_ref);
    boot_finite(buf + 4 * n, f, 1, &s->b_rep, &s->d_rep);
    free(buf);
    return 0;
}

/* The words on "the arm's diverged text is as likely as the reference's under the scorer": TOST
 * against ±X->margin_nats (report_fork_margin, docs/DESIGN.md §4.15) on the forked depths' mean. */
static const char *cross_verdict(const report_extra *X, const stats_boot *b, size_t n_forked) {
    if (!n_forked) return "nothing forked";
    if (isnan(b->est) || isnan(b->lo)) return "not measured";
    return stats_verdict_word(stats_verdict_ci(b->lo, b->hi, b->lo90, b->hi90, X->margin_nats));
}

static void fmt_ci3(const stats_ci *c, char *buf, size_t len);

/* "Repetition arm / ref" cell: both means over every depth, then the paired Δ over the forked depths
 * with its words (no margin: none is tied to repetition, so equivalence is not assessed). */
static void cross_rep_cell(const cross_sum *s, char *buf, size_t len) {
    char d[96];
    if (!s->n_forked || isnan(s->b_rep.est) || isnan(s->b_rep.lo)) {
        snprintf(buf, len, "%.3f / %.3f", s->rep_arm.est, s->rep_ref.est);
        return;
    }
    fmt_ci3(&s->d_rep, d, sizeof d);
    snprintf(buf, len, "%.3f / %.3f; Δ %s: %s", s->rep_arm.est, s->rep_ref.est, d,
             stats_verdict_word(stats_verdict_ci(s->b_rep.lo, s->b_rep.hi, s->b_rep.lo90, s->b_rep.hi90, NAN)));
}

/* Forks of arm a at temperature T (0: the greedy probe, from forks.tsv): counts and KM. */
typedef struct {
    size_t n, forked;
    stats_ci rate;
    stats_km km;
} sample_sum;

static int sample_summary(const report_results *R, const report_extra *X, int a, double T, sample_sum *s) {
    memset(s, 0, sizeof *s);
    size_t cap = X->ns + R->n_drows + 1;
    int *fork = malloc(sizeof *fork * cap), *cens = malloc(sizeof *cens * cap);   /* [cap] */
    int rc = -1;
    if (!fork || !cens) goto done;
    if (T == 0) {
        for (size_t i = 0; i < R->n_drows; i++)
            if (R->drows[i].arm == a) {
                fork[s->n] = R->drows[i].fork;
                cens[s->n++] = R->drows[i].censored;
            }
    } else {
        for (size_t i = 0; i < X->ns; i++)
            if (X->s[i].arm == a && X->s[i].temperature == T) {
                fork[s->n] = X->s[i].fork;
                cens[s->n++] = X->s[i].censored;
            }
    }
    for (size_t i = 0; i < s->n; i++) s->forked += !cens[i];
    if (stats_wilson(s->forked, s->n, &s->rate)) s->rate = (stats_ci){ NAN, NAN, NAN, 0 };
    if (s->n && stats_kaplan_meier(fork, cens, s->n, R->fork_n, &s->km)) stats_km_free(&s->km);
    rc = 0;
done:
    free(fork);
    free(cens);
    return rc;
}

/* ============================================================================================
 * README
 * ========================================================================================== */

static void fmt_nats(double v, char *buf, size_t len) {
    if (isnan(v)) snprintf(buf, len, REPORT_NA);
    else snprintf(buf, len, "%.3f", v);
}

static void fmt_ci3(const stats_ci *c, char *buf, size_t len) {
    if (isnan(c->est)) snprintf(buf, len, REPORT_NA);
    else if (isnan(c->lo)) snprintf(buf, len, "%+.3f", c->est);
    else snprintf(buf, len, "%+.3f [%+.3f, %+.3f]", c->est, c->lo, c->hi);
}

static void readme_cross(FILE *o, const report_results *R, const report_analysis *A, const report_extra *X) {
    const char *ref = A->ref_label;
    int have_f32 = 0;
    for (size_t i = 0; i < X->nx; i++) have_f32 |= !isnan(X->x[i].f32_nll_arm);
    fprintf(o, "## Cross-scored continuations\n\n"
            "Each arm's %d greedy tokens after every depth, scored teacher-forced by the reference (%s) "
            "and by the fp32 arm: the mean NLL per token (nats) of the arm's text and of the reference's "
            "own text under the same scorer. Δ = arm's text − reference's text: a diverged text the scorer "
            "finds as likely as the reference's own has Δ ≈ 0 (where the texts are identical Δ = 0 "
            "exactly). Repetition: the share of the text's %d-token windows that repeat an earlier window "
            "of the same text.\n\n", R->fork_n, ref, REPORT_REPEAT_ORDER);
    if (!have_f32) fprintf(o, "No fp32 arm in this run: the fp32 columns are %s.\n\n", REPORT_NA);
    fprintf(o, "| Arm | Depths | Forked | Δ NLL/token under %s | Verdict | Δ NLL/token under fp32 | Verdict "
            "| Repetition arm / ref |\n|---|---:|---:|---:|---|---:|---|---:|\n", ref);
    for (int a = 0; a < R->n_arms; a++) {
        if (a == R->ref) continue;
        cross_sum s;
        if (cross_summary(X->x, X->nx, a, 0, &s) || !s.n) continue;
        char dr[96], df[96], rp[200];
        fmt_ci3(&s.d_ref, dr, sizeof dr);
        fmt_ci3(&s.d_f32, df, sizeof df);
        cross_rep_cell(&s, rp, sizeof rp);
        fprintf(o, "| %s | %zu | %zu | %s | %s | %s | %s | %s |\n", A->a[a].label, s.n, s.n_forked, dr,
                cross_verdict(X, &s.b_ref, s.n_forked), df, cross_verdict(X, &s.b_f32, s.n_forked), rp);
    }
    fprintf(o, "\nΔ: the mean over the depths where the texts forked only (where they are identical Δ = 0 by "
            "construction), with a circular bootstrap 95%% interval (block 1 over the depths, %d resamples, seed "
            "%lu). Verdict: TOST at 5%% each side against ±%.3g nats per token (docs/DESIGN.md §4.15: the PPL "
            "margin in nats, or the fp32 arm's largest |Δ| over its own forks when larger) — *higher* (the scorer "
            "finds the arm's text less likely), *lower*, *no detected difference*, *equivalent within the "
            "margin* (or *higher / lower, within the margin*); *nothing forked* when the texts never diverged. "
            "Repetition: the means over all depths, then arm − ref over the forked depths with the same "
            "bootstrap, in words without a margin (*higher* / *lower* / *no detected difference*: no margin is "
            "tied to repetition, so equivalence is not assessed).\n\n",
            STATS_BOOT_B, (unsigned long)STATS_BOOT_SEED, X->margin_nats);
    for (int a = 0; a < R->n_arms; a++) {
        if (a == R->ref || R->arms[a].base >= 0) continue;
        int any = 0;
        for (size_t i = 0; i < X->nx; i++) any |= X->x[i].arm == a;
        if (!any) continue;
        fprintf(o, "### %s (arm %s)\n\n", A->a[a].label, R->arms[a].name);
        fprintf(o, "| Depth | Fork token (of %d) | NLL under %s: arm text / ref text | Δ | NLL under fp32: arm text "
                "/ ref text | Δ | Repetition arm / ref |\n|---:|---:|---:|---:|---:|---:|---:|\n", R->fork_n, ref);
        for (size_t i = 0; i < X->nx; i++) {
            const report_cross_row *r = &X->x[i];
            if (r->arm != a) continue;
            char dl[32], fk[32], a1[32], a2[32], a3[32], b1[32], b2[32], b3[32], r1[32], r2[32];
            report_fmt_depth(r->depth, dl, sizeof dl);
            report_fmt_fork(r->fork, r->censored, fk, sizeof fk);
            fmt_nats(r->ref_nll_arm, a1, sizeof a1);
            fmt_nats(r->ref_nll_ref, a2, sizeof a2);
            fmt_nats(r->f32_nll_arm, b1, sizeof b1);
            fmt_nats(r->f32_nll_ref, b2, sizeof b2);
            snprintf(a3, sizeof a3, "%+.3f", r->ref_nll_arm - r->ref_nll_ref);
            if (isnan(r->f32_nll_arm)) snprintf(b3, sizeof b3, REPORT_NA);
            else snprintf(b3, sizeof b3, "%+.3f", r->f32_nll_arm - r->f32_nll_ref);
            fmt_nats(r->rep_arm, r1, sizeof r1);
            fmt_nats(r->rep_ref, r2, sizeof r2);
            fprintf(o, "| %s | %s | %s / %s | %s | %s / %s | %s | %s / %s |\n", dl, fk, a1, a2, a3, b1, b2, b3, r1, r2);
        }
        fprintf(o, "\n");
    }
}

/* "Cross-scored sampled continuations": cross_samples.tsv per arm and temperature. */
static void readme_cross_samples(FILE *o, const report_results *R, const report_analysis *A, const report_extra *X) {
    const char *ref = A->ref_label;
    fprintf(o, "## Cross-scored sampled continuations\n\n"
            "The sampled probes' texts scored as the greedy ones are above: each arm's %d sampled tokens and the "
            "reference's, drawn with the same random numbers, scored teacher-forced by the reference (%s) and by "
            "the fp32 arm. Δ = arm's text − reference's text, mean NLL per token (nats); where the two samples "
            "are identical Δ = 0 exactly. The reference's own sample was drawn from the scorer's distribution "
            "(or nearly), so at T > 0 read each arm against the fp32 arm's Δ, not against zero.\n\n"
            "| Arm | T | Depths | Forked | Δ NLL/token under %s | Verdict | Δ NLL/token under fp32 | Verdict | "
            "Repetition arm / ref |\n|---|---:|---:|---:|---:|---|---:|---|---:|\n", R->fork_n, ref, ref);
    for (int a = 0; a < R->n_arms; a++) {
        for (int j = 0; a != R->ref && j < X->n_temps; j++) {
            cross_sum s;
            if (cross_summary(X->xs, X->nxs, a, X->temps[j], &s) || !s.n) continue;
            char dr[96], df[96], rp[200];
            fmt_ci3(&s.d_ref, dr, sizeof dr);
            fmt_ci3(&s.d_f32, df, sizeof df);
            cross_rep_cell(&s, rp, sizeof rp);
            fprintf(o, "| %s | %g | %zu | %zu | %s | %s | %s | %s | %s |\n", A->a[a].label, X->temps[j],
                    s.n, s.n_forked, dr, cross_verdict(X, &s.b_ref, s.n_forked), df, cross_verdict(X, &s.b_f32, s.n_forked), rp);
        }
    }
    fprintf(o, "\nΔ over the forked depths, intervals and verdicts as in *Cross-scored continuations*.\n\n");
}

static void readme_samples(FILE *o, const report_results *R, const report_analysis *A, const report_extra *X) {
    json_t *jp = json_object_get(R->meta, "top_p");
    double top_p = json_is_number(jp) ? json_number_value(jp) : NAN;
    char tp[48];
    if (isnan(top_p)) snprintf(tp, sizeof tp, "unknown");
    else if (top_p >= 1) snprintf(tp, sizeof tp, "off");
    else snprintf(tp, sizeof tp, "%.17g", top_p);
    fprintf(o, "## Sampled forks (common random numbers)\n\n"
            "At every depth each arm also samples %d tokens at temperature T (top-p %s) with the same seed "
            "as every other arm: the same uniform at every step, drawn through the inverse CDF over token ids, "
            "so two arms differ only where their distributions do. T = 0 is the greedy probe. Fork rate: the "
            "share of depths where the arm's stream differs from the reference's within %d tokens (Wilson 95%% "
            "interval); median fork: Kaplan–Meier, identical streams right-censored. This coupling is not the "
            "tightest possible (docs/DESIGN.md §3.7): at high T nearly equal distributions can still draw "
            "different tokens, so read each arm against the fp32 arm's rate (what rounding alone does), not "
            "against zero.\n\n",
            R->fork_n, tp, R->fork_n);
    fprintf(o, "| Arm | T | Depths | Forked | Fork rate | Median fork |\n|---|---:|---:|---:|---:|---:|\n");
    for (int a = 0; a < R->n_arms; a++) {
        if (a == R->ref) continue;
        for (int j = -1; j < X->n_temps; j++) {
            double T = j < 0 ? 0 : X->temps[j];
            sample_sum s;
            if (sample_summary(R, X, a, T, &s) || !s.n) { stats_km_free(&s.km); continue; }
            char rate[96], med[64];
            report_fmt_pct_ci(&s.rate, rate, sizeof rate);
            if (s.km.n_obs && !isnan(s.km.median)) snprintf(med, sizeof med, "%.0f", s.km.median);
            else snprintf(med, sizeof med, "not reached");
            fprintf(o, "| %s | %g | %zu | %zu | %s | %s |\n", A->a[a].label, T, s.n, s.forked, rate, med);
            stats_km_free(&s.km);
        }
    }
    fprintf(o, "\n");
}

void report_extra_readme(FILE *o, const report_results *R, const report_analysis *A, const report_extra *X) {
    if (X->have_cross) readme_cross(o, R, A, X);
    if (X->have_samples) readme_samples(o, R, A, X);
    if (X->have_cross_samples) readme_cross_samples(o, R, A, X);
}

/* ============================================================================================
 * compare
 * ========================================================================================== */

/* One folder's cell of a cross-scoring row: "Δ [lo, hi] (verdict)", or REPORT_NA. */
static void cross_cell(const report_extra *X, int a, int f32, char *buf, size_t len) {
    cross_sum s;
    if (!X->have_cross || cross_summary(X->x, X->nx, a, 0, &s) || !s.n) { snprintf(buf, len, REPORT_NA); return; }
    const stats_ci *c = f32 ? &s.d_f32 : &s.d_ref;
    char ci[96];
    fmt_ci3(c, ci, sizeof ci);
    if (isnan(c->est)) snprintf(buf, len, "%s", ci);
    else snprintf(buf, len, "%s (%s)", ci, cross_verdict(X, f32 ? &s.b_f32 : &s.b_ref, s.n_forked));
}

/* One folder's cell of a sampled-fork row at temperature T: "rate [lo, hi], median m", or REPORT_NA. */
static void sample_cell(const report_results *R, const report_extra *X, int a, double T, char *buf, size_t len) {
    int have = 0;
    for (int j = 0; j < X->n_temps; j++) have |= X->temps[j] == T;
    sample_sum s;
    if (!X->have_samples || !have || sample_summary(R, X, a, T, &s) || !s.n) {
        snprintf(buf, len, REPORT_NA);
        return;
    }
    char rate[96];
    report_fmt_pct_ci(&s.rate, rate, sizeof rate);
    if (s.km.n_obs && !isnan(s.km.median)) snprintf(buf, len, "%s, median fork %.0f", rate, s.km.median);
    else snprintf(buf, len, "%s, median fork not reached", rate);
    stats_km_free(&s.km);
}

void report_extra_compare(FILE *o, const report_results *R0, const report_extra *X0, int a,
                          const report_results *R1, const report_extra *X1, int b) {
    char c0[160], c1[160], name[96];
    if (X0->have_cross || X1->have_cross) {
        for (int f32 = 0; f32 < 2; f32++) {
            cross_cell(X0, a, f32, c0, sizeof c0);
            cross_cell(X1, b, f32, c1, sizeof c1);
            fprintf(o, "| Cross-scored Δ NLL/token under %s | %s | %s |\n", f32 ? "fp32" : "the reference", c0, c1);
        }
    }
    /* every temperature either folder sampled, (1)'s first */
    const report_extra *Xs[2] = { X0, X1 };
    for (int k = 0; k < 2; k++)
        for (int j = 0; Xs[k]->have_samples && j < Xs[k]->n_temps; j++) {
            double T = Xs[k]->temps[j];
            int seen = 0;
            for (int i = 0; k == 1 && i < X0->n_temps; i++) seen |= X0->temps[i] == T;
            if (seen) continue;
            sample_cell(R0, X0, a, T, c0, sizeof c0);
            sample_cell(R1, X1, b, T, c1, sizeof c1);
            snprintf(name, sizeof name, "Sampled fork rate at T = %g", T);
            fprintf(o, "| %s | %s | %s |\n", name, c0, c1);
        }
}

/* ============================================================================================
 * summary.json
 * ========================================================================================== */

static json_t *jnum_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *jci(const stats_ci *c) {
    return json_pack("{s:o,s:o,s:o,s:I}", "est", jnum_or_null(c->est), "lo", jnum_or_null(c->lo), "hi",
                     jnum_or_null(c->hi), "n", (json_int_t)c->n);
}

int report_extra_summary(json_t *root, const report_results *R, const report_extra *X) {
    if (X->have_cross) {
        json_t *arr = json_array();
        for (int a = 0; arr && a < R->n_arms; a++) {
            cross_sum s;
            if (a == R->ref || cross_summary(X->x, X->nx, a, 0, &s) || !s.n) continue;
            json_array_append_new(arr, json_pack("{s:s,s:I,s:I,s:o,s:s,s:o,s:s,s:o,s:o}", "arm", R->arms[a].name,
                                                 "n", (json_int_t)s.n, "n_forked", (json_int_t)s.n_forked,
                                                 "delta_nll_ref", jci(&s.d_ref), "verdict_ref",
                                                 cross_verdict(X, &s.b_ref, s.n_forked), "delta_nll_f32", jci(&s.d_f32),
                                                 "verdict_f32", cross_verdict(X, &s.b_f32, s.n_forked), "repetition_arm",
                                                 jci(&s.rep_arm), "repetition_ref", jci(&s.rep_ref)));
        }
        if (!arr || json_object_set_new(root, "cross_scoring", arr)) return -1;
    }
    if (X->have_samples) {
        json_t *arr = json_array();
        for (int a = 0; arr && a < R->n_arms; a++) {
            if (a == R->ref) continue;
            for (int j = -1; j < X->n_temps; j++) {
                double T = j < 0 ? 0 : X->temps[j];
                sample_sum s;
                if (sample_summary(R, X, a, T, &s) || !s.n) { stats_km_free(&s.km); continue; }
                json_array_append_new(arr, json_pack("{s:s,s:f,s:I,s:I,s:o,s:o}", "arm", R->arms[a].name,
                                                     "temperature", T, "n", (json_int_t)s.n, "n_forked",
                                                     (json_int_t)s.forked, "fork_rate", jci(&s.rate),
                                                     "median_fork", s.km.n_obs ? jnum_or_null(s.km.median)
                                                                               : json_null()));
                stats_km_free(&s.km);
            }
        }
        if (!arr || json_object_set_new(root, "sampled_forks", arr)) return -1;
    }
    if (X->have_cross_samples) {
        json_t *arr = json_array();
        for (int a = 0; arr && a < R->n_arms; a++) {
            for (int j = 0; a != R->ref && j < X->n_temps; j++) {
                cross_sum s;
                if (cross_summary(X->xs, X->nxs, a, X->temps[j], &s) || !s.n) continue;
                json_array_append_new(arr, json_pack("{s:s,s:f,s:I,s:I,s:o,s:s,s:o,s:s,s:o,s:o}", "arm",
                                                     R->arms[a].name, "temperature", X->temps[j], "n", (json_int_t)s.n,
                                                     "n_forked", (json_int_t)s.n_forked, "delta_nll_ref",
                                                     jci(&s.d_ref), "verdict_ref", cross_verdict(X, &s.b_ref, s.n_forked),
                                                     "delta_nll_f32", jci(&s.d_f32), "verdict_f32",
                                                     cross_verdict(X, &s.b_f32, s.n_forked), "repetition_arm", jci(&s.rep_arm),
                                                     "repetition_ref", jci(&s.rep_ref)));
            }
        }
        if (!arr || json_object_set_new(root, "cross_scoring_sampled", arr)) return -1;
    }
    return 0;
}
