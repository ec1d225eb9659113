/* fuzz_report.c — the report reader on an untrusted results folder (see fuzz.h). The input is the
 * folder's files joined by NUL bytes, in the order meta.json, depths.tsv, forks.tsv, positions.tsv,
 * cross.tsv, samples.tsv, cross_samples.tsv (a NUL cannot occur inside any of them: the reader
 * refuses it); files after the last part are absent. They are written into one temporary folder
 * (made once per run) and loaded with report_results_load and report_extra_load, as `strata-driver
 * report` does. Properties: no crash, no overread, no unbounded allocation (the line and JSON
 * bounds of report_io.c; the fuzzer's malloc limit catches a violation); a loaded folder keeps the
 * invariants of report_internal.h (rows sorted by arm and key without duplicates, forks.tsv row k
 * belongs to depths.tsv row k, indices and forks in range); every string meta.json gave, escaped
 * for gnuplot (report_gp_str), has no bare '"', no '`' and no control byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver/report/report_internal.h"
#include "tests/fuzz/fuzz.h"

enum { N_FILES = 7 };
static const char *const names[N_FILES] = {"meta.json", "depths.tsv", "forks.tsv", "positions.tsv",
                                           "cross.tsv", "samples.tsv", "cross_samples.tsv"};
static char dir[64];   /* the temporary folder, made on the first input (the harness's state) */

static void cleanup(void) {
    char p[128];
    for (int i = 0; i < N_FILES; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

static void fail(const char *what) {
    fprintf(stderr, "fuzz_report: %s\n", what);
    abort();
}

/* s escaped for a gnuplot double-quoted string must not end the string or run anything */
static void check_gp(const char *s) {
    char e[4 * 1024 + 1];
    report_gp_str(e, sizeof e, s);
    for (const unsigned char *p = (const unsigned char *)e; *p; p++) {
        if (*p == '\\') {
            if (!p[1]) fail("a gnuplot string ends in a lone backslash");
            p++;
            continue;
        }
        if (*p == '"' || *p == '`' || *p < 0x20 || *p == 0x7f) fail("an unescaped byte in a gnuplot string");
    }
}

static void check_loaded(const report_results *R) {
    if (R->n_arms < 1 || R->ref < 0 || R->ref >= R->n_arms || R->n_drows == 0 || R->n_frows != R->n_drows)
        fail("arms, reference or row counts out of range");
    for (size_t i = 0; i < R->n_drows; i++) {
        const report_depth *d = &R->drows[i];
        const report_fork *k = &R->frows[i];
        if (d->arm < 0 || d->arm >= R->n_arms || d->fork < 0 || d->fork > R->fork_n)
            fail("a depth row's arm or fork is out of range");
        if (k->arm != d->arm || k->depth != d->depth || k->fork != d->fork) fail("forks.tsv row k is not depths.tsv row k");
        if (i && (d[-1].arm > d->arm || (d[-1].arm == d->arm && d[-1].depth >= d->depth)))
            fail("depth rows not sorted or duplicated");
        if (k->n_arm < 0 || k->n_ref < 0 || (k->n_arm && !k->tok_arm) || (k->n_ref && !k->tok_ref))
            fail("a fork row's streams are inconsistent");
    }
    for (size_t i = 0; i < R->n_prows; i++) {
        const report_pos *p = &R->prows[i];
        if (p->arm < 0 || p->arm >= R->n_arms || p->pos >= R->last_depth) fail("a position row out of range");
        if (i && (p[-1].arm > p->arm || (p[-1].arm == p->arm && p[-1].pos >= p->pos)))
            fail("position rows not sorted or duplicated");
    }
    const char *s[] = {R->tag, R->date, R->command, R->git, R->engine, R->machine, R->model_path,
                       R->model_sha, R->model_arch, R->doc_path, R->doc_desc};
    for (size_t i = 0; i < sizeof s / sizeof *s; i++) check_gp(s[i]);
    for (int i = 0; i < R->n_warnings; i++) check_gp(R->warnings[i]);
    for (int i = 0; i < R->n_arms; i++) check_gp(R->arms[i].model_file);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512], p[128];
    if (!dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/fuzz_report.XXXXXX", t && strlen(t) < 40 ? t : "/tmp");
        if (!mkdtemp(dir)) fail("cannot make a temporary folder");
        atexit(cleanup);
    }
    const uint8_t *q = data, *end = data + size;
    for (int i = 0; i < N_FILES; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
        if (q > end) continue;   /* absent */
        const uint8_t *z = memchr(q, 0, (size_t)(end - q));
        size_t n = z ? (size_t)(z - q) : (size_t)(end - q);
        FILE *f = fopen(p, "wb");
        if (!f || fwrite(q, 1, n, f) != n || fclose(f)) fail("cannot write a temporary file");
        q += n + 1;   /* past the NUL (or past the end: the rest are absent) */
    }
    report_results R;
    report_extra X = {0};
    if (report_results_load(dir, &R, err, sizeof err) == 0) {
        check_loaded(&R);
        if (report_extra_load(dir, &R, &X, err, sizeof err) == 0) {
            for (size_t i = 0; i < X.nx; i++)
                if (X.x[i].arm < 0 || X.x[i].arm >= R.n_arms) fail("a cross.tsv row's arm out of range");
        }
        report_extra_free(&X);
    }
    report_results_free(&R);
    return 0;
}
