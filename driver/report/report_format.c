/* report_format.c — text the report module writes into caller buffers: the numbers of the
 * README and comparison tables (2 significant digits, CIs, percentages, correlations, slopes,
 * fork indices, depths), file paths and error messages. Allocates nothing. */
#include "driver/report/report_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ============================================================================================
 * Messages and paths
 * ========================================================================================== */

int report_path(char *path, size_t len, const char *dir, const char *name, char *err,
                size_t errlen) {
    if (snprintf(path, len, "%s/%s", dir, name) >= (int)len) {
        return errmsg_set(err, errlen, -1, "path too long: %s/%s", dir, name);
    }
    return 0;
}

/* ============================================================================================
 * Numbers
 * ========================================================================================== */

void report_fmt_sig2(double v, char *buf, size_t len) {
    if (isnan(v)) { snprintf(buf, len, REPORT_NA); return; }
    if (isinf(v)) { snprintf(buf, len, v > 0 ? "∞" : "−∞"); return; }
    if (v == 0.0) { snprintf(buf, len, "0"); return; }
    char e[32];
    snprintf(e, sizeof e, "%.1e", v);           /* rounds to 2 significant digits */
    const char *ep = strchr(e, 'e');
    int ex = ep ? atoi(ep + 1) : 0;             /* exponent after rounding */
    if (ex >= -4 && ex <= 2) snprintf(buf, len, "%.*f", ex < 1 ? 1 - ex : 0, v);
    else snprintf(buf, len, "%s", e);
}

void report_fmt_depth(int depth, char *buf, size_t len) {
    if (depth < 10000) snprintf(buf, len, "%d", depth);
    else snprintf(buf, len, "%dK", depth / 1000);   /* rounded down: never past the depth measured */
}

void report_fmt_ci(const stats_ci *c, char *buf, size_t len) {
    char a[32], b[32], d[32];
    if (isnan(c->est)) { snprintf(buf, len, REPORT_NA); return; }
    report_fmt_sig2(c->est, a, sizeof a);
    if (isnan(c->lo) || isnan(c->hi)) { snprintf(buf, len, "%s", a); return; }
    report_fmt_sig2(c->lo, b, sizeof b);
    report_fmt_sig2(c->hi, d, sizeof d);
    snprintf(buf, len, "%s [%s, %s]", a, b, d);
}

void report_fmt_pct_ci(const stats_ci *c, char *buf, size_t len) {
    if (isnan(c->est)) { snprintf(buf, len, REPORT_NA); return; }
    if (isnan(c->lo) || isnan(c->hi)) { snprintf(buf, len, "%.2f%%", 100 * c->est); return; }
    snprintf(buf, len, "%.2f%% [%.2f%%, %.2f%%]", 100 * c->est, 100 * c->lo, 100 * c->hi);
}

void report_fmt_rho(const stats_ci *c, char *buf, size_t len) {
    if (isnan(c->est)) { snprintf(buf, len, REPORT_NA); return; }
    if (isnan(c->lo)) { snprintf(buf, len, "%.2f", c->est); return; }
    snprintf(buf, len, "%.2f [%.2f, %.2f]", c->est, c->lo, c->hi);
}

void report_fmt_share(double v, char *buf, size_t len) {
    if (isnan(v)) snprintf(buf, len, REPORT_NA);
    else snprintf(buf, len, "%.1f%%", 100 * v);
}

void report_fmt_slope(const stats_fit *f, char *buf, size_t len) {
    if (isnan(f->slope)) snprintf(buf, len, REPORT_NA);
    else if (isnan(f->lo) || isnan(f->hi)) snprintf(buf, len, "%+.2g", f->slope);
    else snprintf(buf, len, "%+.2g [%+.2g, %+.2g]", f->slope, f->lo, f->hi);
}

void report_fmt_fork(int fork, int censored, char *buf, size_t len) {
    if (censored) snprintf(buf, len, "identical");
    else snprintf(buf, len, "%d", fork);
}
