/* report_passages.c — the depth verdict from passages.tsv (see report_passages.h).
 *
 * Reading order: loading the rows; one arm's table and trend; the section; appending it to the
 * README. */
#include "driver/report/report_passages.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "driver/passages.h"
#include "driver/report/report.h"
#include "driver/report/report_internal.h"
#include "driver/stats.h"
#include "kernels/errmsg.h"
#include "proto/safeio.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_fit.h>
#include <gsl/gsl_rng.h>

#define RP_MAX_ARMS 64
#define RP_LINE_MAX 4096
#define RP_MAX_ROWS (64u << 20)   /* rows read at most (a hostile file cannot exhaust memory) */

/* One passages.tsv row, what the section uses of it. */
typedef struct {
    int arm, depth, j, i;
    double kl, dnll;   /* kl_arm_ref clamped at 0; nll_arm - nll_ref */
    int same;
} rp_row;

typedef struct {
    rp_row *r;         /* [n] */
    size_t n, cap;
    char names[RP_MAX_ARMS][ARM_NAME_MAX];
    int n_arms;
} rp_rows;

/* ============================================================================================
 * Loading
 * ========================================================================================== */


static int rp_int(const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > INT32_MAX) return -1;
    *out = (int)v;
    return 0;
}

static int rp_num(const char *s, double *out) {
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return end == s || *end ? -1 : 0;
}

/* Parses one line (no newline) into R. Returns 0 or -1 (malformed). */
static int rp_parse(char *line, rp_rows *R) {
    char *f[13];
    int nf = 0;
    for (char *p = line; nf < 13;) {
        f[nf++] = p;
        char *t = strchr(p, '\t');
        if (!t) break;
        *t = 0;
        p = t + 1;
    }
    if (nf != 13 || strchr(f[12], '\t')) return -1;
    rp_row w;
    int start;
    double kl, nll_arm, nll_ref, x;
    if (rp_int(f[0], &w.depth) || rp_int(f[1], &w.j) || rp_int(f[2], &start) || rp_int(f[3], &w.i) ||
        !arm_valid_name(f[4]) || rp_num(f[5], &kl) || rp_num(f[6], &x) || rp_num(f[7], &x) || rp_int(f[8], &w.same) ||
        w.same > 1 || rp_num(f[9], &nll_arm) || rp_num(f[10], &nll_ref) || rp_num(f[11], &x) || rp_num(f[12], &x) ||
        !isfinite(kl) || w.j >= PASSAGES_MAX)
        return -1;
    w.kl = kl > 0 ? kl : 0;
    w.dnll = nll_arm - nll_ref;
    w.arm = -1;
    for (int a = 0; a < R->n_arms && w.arm < 0; a++)
        if (!strcmp(R->names[a], f[4])) w.arm = a;
    if (w.arm < 0) {
        if (R->n_arms == RP_MAX_ARMS) return -1;
        snprintf(R->names[R->n_arms], ARM_NAME_MAX, "%s", f[4]);
        w.arm = R->n_arms++;
    }
    if (R->n == R->cap) {
        if (R->n >= RP_MAX_ROWS) return -1;
        size_t cap = R->cap ? 2 * R->cap : 4096;
        rp_row *np = realloc(R->r, cap * sizeof *np);
        if (!np) return -1;
        R->r = np;
        R->cap = cap;
    }
    R->r[R->n++] = w;
    return 0;
}

/* Reads the file into R. Returns 0, 1 (no file) or -1 with a message. */
static int rp_load(const char *path, rp_rows *R, char *err, size_t errlen) {
    int absent = 0;
    char e[512];
    FILE *f = report_open_read(path, 1, &absent, e, sizeof e);   /* regular, not a link */
    if (!f) return absent ? 1 : errmsg_set(err, errlen, -1, "%s", e);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    int rc = 0;
    while (!rc && (len = safeio_getline(&line, &cap, f, RP_LINE_MAX, path, lineno + 1, e, sizeof e)) != -1) {
        lineno++;
        if (len == -2) { rc = errmsg_set(err, errlen, -1, "%s", e); break; }
        if (len == 0 || line[len - 1] != '\n') break;   /* a torn last line: dropped */
        line[len - 1] = 0;
        if (lineno == 1) {
            if (strcmp(line, PASSAGES_HEADER))
                rc = errmsg_set(err, errlen, -1, "%s:1: not the passages.tsv header", path);
            continue;
        }
        if (rp_parse(line, R)) rc = errmsg_set(err, errlen, -1, "%s:%ld: malformed row", path, lineno);
    }
    if (!rc && ferror(f)) rc = errmsg_set(err, errlen, -1, "cannot read %s", path);
    free(line);
    fclose(f);
    return rc;
}

static int rp_cmp(const void *pa, const void *pb) {
    const rp_row *a = pa, *b = pb;
    if (a->arm != b->arm) return a->arm < b->arm ? -1 : 1;
    if (a->depth != b->depth) return a->depth < b->depth ? -1 : 1;
    if (a->j != b->j) return a->j < b->j ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

/* ============================================================================================
 * One arm
 * ========================================================================================== */

/* The rows of one depth: r [n], sorted by passage. */
typedef struct {
    const rp_row *r;
    size_t n;
    int depth, n_pass;
} rp_depth;

/* The trend of one arm: the deepest depth's mean KL over the first's, paired bootstrap over the
 * passages both hold. Returns 0, or -1 (not computable: passages differ, KL 0 at the first). */
static int rp_trend(const rp_depth *d0, const rp_depth *dk, stats_boot *out) {
    double *num = malloc(sizeof *num * (dk->n + 1)), *den = malloc(sizeof *den * (d0->n + 1));
    size_t *noff = malloc(sizeof *noff * ((size_t)dk->n_pass + 1)), *doff = malloc(sizeof *doff * ((size_t)d0->n_pass + 1));
    int rc = -1;
    if (!num || !den || !noff || !doff || d0->n_pass != dk->n_pass) goto done;
    size_t un = 0, ud = 0;
    noff[0] = doff[0] = 0;
    for (size_t k = 0; k < dk->n; k++) {
        if (k && dk->r[k].j != dk->r[k - 1].j) noff[++un] = k;
        num[k] = dk->r[k].kl;
    }
    noff[++un] = dk->n;
    for (size_t k = 0; k < d0->n; k++) {
        if (k && d0->r[k].j != d0->r[k - 1].j) doff[++ud] = k;
        den[k] = d0->r[k].kl;
    }
    doff[++ud] = d0->n;
    for (size_t u = 0; u < un; u++)   /* the same passages in the same order */
        if (dk->r[noff[u]].j != d0->r[doff[u]].j) goto done;
    rc = stats_ratio_units_ci(num, noff, un, den, doff, ud, 1, STATS_BOOT_B, STATS_BOOT_SEED, NULL, out);
done:
    free(num);
    free(den);
    free(noff);
    free(doff);
    return rc;
}

/* The ratio a log-log fit implies over D[first..last] (every depth holding the first's passages in
 * the same order): m[u][k] = passage u's mean KL at depth k; the estimate fits ln(mean_u m[u][k]) on
 * ln(depth_k); a resample draws passages with replacement, the same draw at every depth (paired),
 * and refits. exp(slope·ln(d_last/d_first)); 95 % and 90 % percentile intervals over STATS_BOOT_B
 * resamples (seed STATS_BOOT_SEED); p against 1. Returns 0, or -1 (fewer than 3 depths, the
 * passages differ, a mean KL <= 0 in the data, no memory). */
static int rp_fit(const rp_depth *D, int first, int last, stats_boot *out) {
    int nk = last - first + 1, np = D[first].n_pass, rc = -1;
    memset(out, 0, sizeof *out);
    out->est = out->lo = out->hi = out->lo90 = out->hi90 = out->se = out->p = NAN;
    if (nk < 3 || np < 1) return -1;
    double *m = calloc((size_t)np * (size_t)nk, sizeof *m); /* [np][nk] per-passage mean KL */
    double *x = malloc(sizeof *x * (size_t)nk), *y = malloc(sizeof *y * (size_t)nk); /* [nk] */
    double *t = malloc(sizeof *t * STATS_BOOT_B);                                     /* [B] */
    int *pick = malloc(sizeof *pick * (size_t)np);                                   /* [np] */
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!m || !x || !y || !t || !pick || !rng) goto done;
    gsl_rng_set(rng, STATS_BOOT_SEED);
    for (int k = 0; k < nk; k++) {
        const rp_depth *d = &D[first + k];
        if (d->n_pass != np || d->n != D[first].n) goto done;
        x[k] = log((double)(d->depth > 0 ? d->depth : 1));
        size_t q = 0;
        for (int u = 0; u < np; u++) {
            size_t q0 = q;
            if (q >= d->n || d->r[q].j != D[first].r[q].j) goto done;
            for (; q < d->n && d->r[q].j == d->r[q0].j; q++) m[(size_t)u * nk + k] += d->r[q].kl;
            m[(size_t)u * nk + k] /= (double)(q - q0);
        }
    }
    double span = x[nk - 1] - x[0];
    for (int rep = -1; rep < STATS_BOOT_B; rep++) {   /* rep -1: the estimate, every passage once */
        for (int u = 0; u < np; u++) pick[u] = rep < 0 ? u : (int)gsl_rng_uniform_int(rng, (unsigned long)np);
        for (int k = 0; k < nk; k++) {
            double s = 0;
            for (int u = 0; u < np; u++) s += m[(size_t)pick[u] * nk + k];
            y[k] = s > 0 ? log(s / np) : -INFINITY;
        }
        int finite = 1;
        for (int k = 0; k < nk; k++) finite &= isfinite(y[k]);
        double c0, c1, v00, v01, v11, ss;
        int fit = finite && gsl_fit_linear(x, 1, y, 1, (size_t)nk, &c0, &c1, &v00, &v01, &v11, &ss) == GSL_SUCCESS;
        double r = fit ? exp(c1 * span) : NAN;
        if (rep < 0) {
            if (!isfinite(r)) goto done;
            out->est = r;
        } else {
            t[rep] = isfinite(r) ? r : out->est;   /* a resample of passages with KL 0 everywhere */
        }
    }
    rc = 0;
done:
    if (rc == 0) {
        stats_boot_summary(t, STATS_BOOT_B, 1.0, out);
        out->n = (size_t)np;
    }
    gsl_rng_free(rng);
    free(m);
    free(x);
    free(y);
    free(t);
    free(pick);
    return rc;
}

/* Splits one arm's rows r [n] (sorted by depth and passage) into its depths D [*nd] (calloc'd
 * here, at most n; the caller frees). */
static rp_depth *rp_depths(const rp_row *r, size_t n, int *nd) {
    rp_depth *D = calloc(n ? n : 1, sizeof *D);   /* at most one depth per row */
    *nd = 0;
    if (!D) return NULL;
    for (size_t k = 0; k < n;) {
        size_t e = k;
        int np = 0;
        for (; e < n && r[e].depth == r[k].depth; e++) np += e == k || r[e].j != r[e - 1].j;
        D[(*nd)++] = (rp_depth){ r + k, e - k, r[k].depth, np };
        k = e;
    }
    return D;
}

enum { RP_TREND_OK, RP_TREND_FEW, RP_TREND_ZERO, RP_TREND_NONE };

/* The trend over D [nd]: the deepest depth with the first depth's passages and rows, against the
 * first, into t. Returns RP_TREND_OK, RP_TREND_FEW (fewer than two such depths), RP_TREND_ZERO
 * (KL 0 at every row: identical to the reference) or RP_TREND_NONE (KL 0 at the first depth, or
 * the passages differ). */
static int rp_arm_trend(const rp_depth *D, int nd, report_depth_trend *t) {
    int last = nd - 1;
    while (last > 0 && (D[last].n != D[0].n || D[last].n_pass != D[0].n_pass)) last--;
    /* the first depth with context: the baseline (depth 0, or 1 = BOS only) is another regime, so the
     * headline ratio starts at the sweep's first depth when there is one between them */
    int first = last >= 2 && D[0].depth <= 1 && D[1].n == D[0].n && D[1].n_pass == D[0].n_pass ? 1 : 0;
    memset(t, 0, sizeof *t);
    t->n_passages = nd ? D[0].n_pass : 0;
    t->depth_first = nd ? D[first].depth : 0;
    t->depth_last = nd ? D[last].depth : 0;
    if (nd < 2 || last == 0) return RP_TREND_FEW;
    int all_zero = 1;
    for (int k = 0; k < nd; k++)
        for (size_t q = 0; q < D[k].n; q++) all_zero &= D[k].r[q].kl == 0;
    if (all_zero) return RP_TREND_ZERO;
    if (first == 1) {
        t->depth_base = D[0].depth;
        t->have_base = rp_trend(&D[0], &D[last], &t->from_base) == 0;
    }
    t->n_depths = last - first + 1;
    if (rp_trend(&D[first], &D[last], &t->endpoint)) return RP_TREND_NONE;
    /* the trend from every depth with context; with two depths only, the endpoint ratio is it */
    if (t->n_depths < 3) t->ratio = t->endpoint;
    else if (rp_fit(D, first, last, &t->ratio)) return RP_TREND_NONE;
    return RP_TREND_OK;
}

const char *report_passages_word(const report_depth_trend *t) {
    return t->ratio.lo > 1 ? "grows with depth" : t->ratio.hi < 1 ? "falls with depth" : "no detected change";
}

/* The table and the verdict of arm a (its rows r [n], sorted by depth and passage). */
static int rp_arm(FILE *o, const char *name, const rp_row *r, size_t n) {
    int nd = 0;
    rp_depth *D = rp_depths(r, n, &nd);
    if (!D) return -1;
    fprintf(o, "### %s\n\n| Depth | Passages | Rows | Mean KL(arm‖ref) | Top-1 agreement | Δ NLL as PPL change |\n"
            "|---|---|---|---|---|---|\n", name);
    for (int k = 0; k < nd; k++) {
        double kl = 0, same = 0, dn = 0;
        for (size_t q = 0; q < D[k].n; q++) {
            kl += D[k].r[q].kl;
            same += D[k].r[q].same;
            dn += D[k].r[q].dnll;
        }
        char b1[32], dep[32];
        report_fmt_sig2(kl / D[k].n, b1, sizeof b1);
        report_fmt_depth(D[k].depth, dep, sizeof dep);
        double ppl = expm1(dn / D[k].n) * 100;
        fprintf(o, "| %s | %d | %zu | %s | %.2f %% | ", dep, D[k].n_pass, D[k].n, b1, 100.0 * same / D[k].n);
        if (isfinite(ppl)) fprintf(o, "%+.3f %% |\n", ppl);
        else fprintf(o, "%s |\n", REPORT_NA);
    }
    fprintf(o, "\n");
    report_depth_trend t;
    int tr = rp_arm_trend(D, nd, &t);
    char d0s[32], dks[32];
    report_fmt_depth(t.depth_first, d0s, sizeof d0s);
    report_fmt_depth(t.depth_last, dks, sizeof dks);
    if (tr == RP_TREND_FEW) {
        fprintf(o, "Trend: not computable (fewer than two depths with the same passages).\n\n");
    } else if (tr == RP_TREND_ZERO) {
        fprintf(o, "Trend: **identical to the reference** (KL 0 at every passage row of every depth).\n\n");
    } else if (tr == RP_TREND_NONE) {
        fprintf(o, "Trend: not computable (KL is 0 at depth %s, or the passages differ between depths %s and %s).\n\n",
                d0s, d0s, dks);
    } else {
        char est[32], lo[32], hi[32];
        report_fmt_sig2(t.ratio.est, est, sizeof est);
        report_fmt_sig2(t.ratio.lo, lo, sizeof lo);
        report_fmt_sig2(t.ratio.hi, hi, sizeof hi);
        fprintf(o, "Trend: %s: KL(arm‖ref) **%s (×%s [%s, %s])** from depth %s to depth %s: the ratio a least-squares "
                "fit of ln(mean KL) on ln(depth) over the %d depths implies across that span, the mean over the same %d "
                "passages at each depth, 95 %% CI from a paired bootstrap over the passages as units (%d "
                "resamples)%s.", name, report_passages_word(&t), est, lo, hi, d0s, dks, t.n_depths, t.n_passages,
                STATS_BOOT_B, t.n_passages < PASSAGES_RECOMMENDED ? "; fewer than 4 passages: the interval is not reliable" : "");
        if (t.n_depths >= 3) {
            report_fmt_sig2(t.endpoint.est, est, sizeof est);
            report_fmt_sig2(t.endpoint.lo, lo, sizeof lo);
            report_fmt_sig2(t.endpoint.hi, hi, sizeof hi);
            fprintf(o, " The two end depths alone: ×%s [%s, %s] (one depth's content can move it; the fit uses every depth).",
                    est, lo, hi);
        }
        fprintf(o, "\n\n");
        if (t.have_base) {
            char bs[32];
            report_fmt_depth(t.depth_base, bs, sizeof bs);
            report_fmt_sig2(t.from_base.est, est, sizeof est);
            report_fmt_sig2(t.from_base.lo, lo, sizeof lo);
            report_fmt_sig2(t.from_base.hi, hi, sizeof hi);
            fprintf(o, "From the baseline (depth %s: %s) to depth %s: ×%s [%s, %s], the same bootstrap; the "
                    "baseline is another regime, so the trend above starts at the first depth with context.\n\n",
                    bs, t.depth_base ? "the BOS token alone" : "no context at all", dks, est, lo, hi);
        }
    }
    free(D);
    return 0;
}

/* ============================================================================================
 * The section
 * ========================================================================================== */

int report_passages_section(FILE *o, const char *tsv_path, char *err, size_t errlen) {
    rp_rows R;
    memset(&R, 0, sizeof R);
    int rc = rp_load(tsv_path, &R, err, errlen);
    if (rc) { free(R.r); return rc; }
    qsort(R.r, R.n, sizeof *R.r, rp_cmp);
    fprintf(o, "## Depth from passages\n\nThe controlled depth design (`--passages`): the same target passages, "
            "taken from the document beyond the deepest prefix, scored teacher-forced after each depth's prefix "
            "(the first depth: after the base prefix alone, the document's BOS token or nothing), so a change "
            "with depth is a within-passage difference, not a change of content. Per depth: the mean over every "
            "passage row, top-1 agreement, and Δ NLL = mean(NLL arm − NLL ref) as the perplexity change "
            "exp(Δ NLL) − 1. The trend is the ratio of the deepest depth's mean KL to the first depth's; its "
            "95 %% interval comes from a bootstrap over passages (the units: the same passages at both depths, "
            "paired), not over positions. Words: grows with depth (the interval above 1), falls with depth "
            "(below 1), no detected change (it contains 1).\n\n");
    if (!R.n) fprintf(o, "passages.tsv holds no rows.\n\n");
    for (size_t k = 0; k < R.n && !rc;) {
        size_t e = k;
        while (e < R.n && R.r[e].arm == R.r[k].arm) e++;
        if (rp_arm(o, R.names[R.r[k].arm], R.r + k, e - k)) rc = errmsg_set(err, errlen, -1, "out of memory");
        k = e;
    }
    free(R.r);
    return rc;
}

int report_passages_render(const char *dir, char *err, size_t errlen) {
    char path[4096], readme[4096], e[600];
    snprintf(path, sizeof path, "%s/%s", dir, PASSAGES_FILE);
    snprintf(readme, sizeof readme, "%s/README.md", dir);
    char *sec = NULL, *old = NULL;
    size_t n_sec = 0, n_old = 0;
    FILE *m = open_memstream(&sec, &n_sec);
    if (!m) return errmsg_set(err, errlen, -1, "out of memory");
    int rc = report_passages_section(m, path, err, errlen);
    if (fclose(m) && rc == 0) rc = errmsg_set(err, errlen, -1, "out of memory");
    if (rc == 1) rc = 0;   /* no passages.tsv: the README stays as it is */
    else if (rc == 0) {
        if (safeio_read_all(readme, SAFEIO_NOFOLLOW, (size_t)64 << 20, &old, &n_old, e, sizeof e))
            rc = errmsg_set(err, errlen, -1, "%s", e);
        report_tmp_file t;
        if (!rc && !(rc = report_tmp_open(&t, dir, "README.md", err, errlen))) {
            int bad = fwrite(old, 1, n_old, t.f) != n_old || fwrite(sec, 1, n_sec, t.f) != n_sec;
            rc = report_tmp_commit(&t, bad, err, errlen);
        }
    }
    free(sec);
    free(old);
    return rc;
}

int report_passages_trend(const char *dir, const char *arm, report_depth_trend *out, char *err, size_t errlen) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, PASSAGES_FILE);
    rp_rows R;
    memset(&R, 0, sizeof R);
    int rc = rp_load(path, &R, err, errlen);
    if (rc) { free(R.r); return rc; }   /* 1: no passages.tsv */
    qsort(R.r, R.n, sizeof *R.r, rp_cmp);
    rc = 1;
    size_t k = 0;
    while (k < R.n && strcmp(R.names[R.r[k].arm], arm)) k++;
    size_t e = k;
    while (e < R.n && R.r[e].arm == R.r[k].arm) e++;
    if (k < R.n) {
        int nd = 0;
        rp_depth *D = rp_depths(R.r + k, e - k, &nd);
        if (!D) rc = errmsg_set(err, errlen, -1, "out of memory");
        else rc = rp_arm_trend(D, nd, out) == RP_TREND_OK ? 0 : 1;
        free(D);
    }
    free(R.r);
    return rc;
}
