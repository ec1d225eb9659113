/* report.c — the results folder: TSV row writers for the sweep, and the renderer that reads
 * meta.json + TSVs back and writes README.md, summary.json and the gnuplot plots.
 *
 * Reading order: writers; loading (meta.json, TSVs) into rep_results; analysis (stats.h) into
 * rep_analysis; formatting; summary.json; plots; README.md; report_render; report_compare. */
#include "driver/report.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "driver/stats.h"

/* ============================================================================================
 * Small helpers
 * ========================================================================================== */

static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Arm and format names: 1..63 printable ASCII, none of: space " ' \ | ` , (see report.h). */
static int name_ok(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n >= REPORT_NAME_MAX) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 32 || c >= 127 || strchr("\"'\\|`,", c)) return 0;
    }
    return 1;
}

/* A double as the TSV writes it: %.17g (round-trips exactly), "nan" for NaN. */
static int put_num(FILE *f, double v) {
    if (isnan(v)) return fputs("\tnan", f) < 0 ? -1 : 0;
    return fprintf(f, "\t%.17g", v) < 0 ? -1 : 0;
}

/* ============================================================================================
 * Writers
 * ========================================================================================== */

static FILE *tsv_open(const char *dir, const char *name, const char *header, char *err,
                      size_t errlen) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        set_err(err, errlen, "path too long: %s/%s", dir, name);
        return NULL;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        set_err(err, errlen, "cannot create %s: %s", path, strerror(errno));
        return NULL;
    }
    if (fprintf(f, "%s\n", header) < 0) {
        set_err(err, errlen, "cannot write %s: %s", path, strerror(errno));
        fclose(f);
        return NULL;
    }
    return f;
}

FILE *report_tsv_open_depths(const char *dir, char *err, size_t errlen) {
    return tsv_open(dir, "depths.tsv", REPORT_DEPTHS_HEADER, err, errlen);
}
FILE *report_tsv_open_positions(const char *dir, char *err, size_t errlen) {
    return tsv_open(dir, "positions.tsv", REPORT_POSITIONS_HEADER, err, errlen);
}
FILE *report_tsv_open_forks(const char *dir, char *err, size_t errlen) {
    return tsv_open(dir, "forks.tsv", REPORT_FORKS_HEADER, err, errlen);
}

int report_tsv_depth_row(FILE *f, int depth, const char *arm, const stats_row *r, int fork,
                         int censored, double fork_gap_arm, double fork_gap_ref) {
    if (!f || !r || !name_ok(arm)) return -1;
    int rc = fprintf(f, "%d\t%s", depth, arm) < 0;
    rc |= put_num(f, r->kl_arm_ref) | put_num(f, r->kl_ref_arm) | put_num(f, r->js);
    rc |= fprintf(f, "\t%d\t%d\t%d", r->top1_arm == r->top1_ref, r->top1_arm, r->top1_ref) < 0;
    rc |= put_num(f, r->nll_arm) | put_num(f, r->nll_ref) | put_num(f, r->entropy_ref);
    rc |= put_num(f, r->gap_ref) | put_num(f, r->gap_arm);
    rc |= fprintf(f, "\t%d\t%d", fork, censored ? 1 : 0) < 0;
    rc |= put_num(f, censored ? NAN : fork_gap_arm) | put_num(f, censored ? NAN : fork_gap_ref);
    rc |= fputc('\n', f) == EOF;
    return rc ? -1 : 0;
}

int report_tsv_position_row(FILE *f, int pos, const char *arm, const stats_row *r) {
    if (!f || !r || !name_ok(arm)) return -1;
    int rc = fprintf(f, "%d\t%s", pos, arm) < 0;
    rc |= put_num(f, r->kl_arm_ref) | put_num(f, r->kl_ref_arm) | put_num(f, r->js);
    rc |= fprintf(f, "\t%d", r->top1_arm == r->top1_ref) < 0;
    rc |= put_num(f, r->nll_arm) | put_num(f, r->nll_ref) | put_num(f, r->entropy_ref);
    rc |= put_num(f, r->gap_ref);
    rc |= fputc('\n', f) == EOF;
    return rc ? -1 : 0;
}

static int put_tokens(FILE *f, const int32_t *tok, int n) {
    if (fputc('\t', f) == EOF) return -1;
    for (int i = 0; i < n; i++)
        if (fprintf(f, i ? ",%d" : "%d", (int)tok[i]) < 0) return -1;
    return 0;
}

int report_tsv_fork_row(FILE *f, int depth, const char *arm, int fork, int censored,
                        const int32_t *tok_arm, int n_arm, const int32_t *tok_ref, int n_ref) {
    if (!f || !name_ok(arm) || n_arm < 0 || n_ref < 0 || (n_arm && !tok_arm) || (n_ref && !tok_ref))
        return -1;
    int rc = fprintf(f, "%d\t%s\t%d\t%d", depth, arm, fork, censored ? 1 : 0) < 0;
    rc |= put_tokens(f, tok_arm, n_arm) | put_tokens(f, tok_ref, n_ref);
    rc |= fputc('\n', f) == EOF;
    return rc ? -1 : 0;
}

/* ============================================================================================
 * Loading: meta.json and the TSVs into rep_results
 * ========================================================================================== */

typedef struct {
    char name[REPORT_NAME_MAX];
    char kv_k[REPORT_NAME_MAX], kv_v[REPORT_NAME_MAX];
    double kv_bytes;   /* kv_bytes_per_token, NAN when absent */
    int is_ref, is_floor;
    int base;          /* the arm this one repeats ("f16#2" -> index of "f16"), or -1 */
} rep_arm;

typedef struct {
    int depth, arm;
    double kl_ar, kl_ra, js;
    int same, top1_arm, top1_ref;
    double nll_arm, nll_ref, ent, gap_ref, gap_arm;
    int fork, censored;
    double fgap_arm, fgap_ref;
} rep_depth;

typedef struct {
    int pos, arm;
    double kl_ar, kl_ra, js;
    int same;
    double nll_arm, nll_ref, ent, gap_ref;
} rep_pos;

typedef struct {
    int depth, arm, fork, censored;
    int *tok_arm, *tok_ref; /* [n_arm], [n_ref] */
    int n_arm, n_ref;
} rep_fork;

typedef struct {
    json_t *meta;       /* owns the strings below */
    char *machine_buf;  /* "machine" when it is not a string (compact JSON), else NULL */
    const char *tag, *date, *command, *git, *engine, *machine;
    const char *model_path, *model_sha, *model_arch, *doc_path, *doc_desc;
    double n_vocab, n_ctx, n_layer, doc_tokens, wall; /* NAN when absent */
    int per_position;   /* -1 unknown */
    int ref, floor;     /* arm indices; floor = -1 without an f32 arm */
    rep_arm *arms;      /* [n_arms] */
    int n_arms;
    int *depths;        /* [n_depths] from meta (may be empty) */
    int n_depths;
    int fork_n;
    const char **warnings; /* [n_warnings], pointers into meta */
    int n_warnings;
    rep_depth *drows;   /* [n_drows] */
    size_t n_drows;
    rep_pos *prows;     /* [n_prows] */
    size_t n_prows;
    int have_positions;
    rep_fork *frows;    /* [n_frows] */
    size_t n_frows;
} rep_results;

static void results_free(rep_results *R) {
    for (size_t i = 0; i < R->n_frows; i++) {
        free(R->frows[i].tok_arm);
        free(R->frows[i].tok_ref);
    }
    free(R->frows);
    free(R->prows);
    free(R->drows);
    free(R->warnings);
    free(R->depths);
    free(R->arms);
    free(R->machine_buf);
    if (R->meta) json_decref(R->meta);
    memset(R, 0, sizeof *R);
}

static const char *jstr(json_t *obj, const char *key) {
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : "unknown";
}
static double jnum(json_t *obj, const char *key) {
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static int find_arm(const rep_results *R, const char *name) {
    for (int i = 0; i < R->n_arms; i++)
        if (strcmp(R->arms[i].name, name) == 0) return i;
    return -1;
}

static int load_meta(const char *dir, rep_results *R, char *err, size_t errlen) {
    char path[4096];
    snprintf(path, sizeof path, "%s/meta.json", dir);
    json_error_t je;
    R->meta = json_load_file(path, 0, &je);
    if (!R->meta) {
        set_err(err, errlen, "%s:%d: %s", path, je.line, je.text);
        return -1;
    }
    json_t *m = R->meta;
    if (!json_is_object(m)) {
        set_err(err, errlen, "%s: top level is not a JSON object", path);
        return -1;
    }
    R->tag = jstr(m, "tag");
    R->date = jstr(m, "date");
    R->command = jstr(m, "command");
    R->git = jstr(m, "git");
    R->engine = jstr(m, "engine");
    json_t *mach = json_object_get(m, "machine");
    if (json_is_string(mach) || !mach) {
        R->machine = jstr(m, "machine");
    } else {
        R->machine_buf = json_dumps(mach, JSON_COMPACT | JSON_SORT_KEYS);
        R->machine = R->machine_buf ? R->machine_buf : "unknown";
    }
    json_t *model = json_object_get(m, "model"), *doc = json_object_get(m, "document");
    R->model_path = jstr(model, "path");
    R->model_sha = jstr(model, "sha256");
    R->model_arch = jstr(model, "arch");
    R->n_vocab = jnum(model, "n_vocab");
    R->n_ctx = jnum(model, "n_ctx");
    R->n_layer = jnum(model, "n_layer");
    R->doc_path = jstr(doc, "path");
    R->doc_desc = jstr(doc, "description");
    R->doc_tokens = jnum(doc, "n_tokens");
    R->wall = jnum(m, "wall_seconds");
    json_t *pp = json_object_get(m, "per_position");
    R->per_position = json_is_boolean(pp) ? json_is_true(pp) : -1;

    json_t *fn = json_object_get(m, "fork_n");
    if (!json_is_integer(fn) || json_integer_value(fn) < 1 || json_integer_value(fn) > 1000000) {
        set_err(err, errlen, "%s: \"fork_n\" must be an integer >= 1", path);
        return -1;
    }
    R->fork_n = (int)json_integer_value(fn);

    json_t *arms = json_object_get(m, "arms");
    if (!json_is_array(arms) || json_array_size(arms) == 0 || json_array_size(arms) > 1000) {
        set_err(err, errlen, "%s: \"arms\" must be a non-empty array", path);
        return -1;
    }
    R->n_arms = (int)json_array_size(arms);
    R->arms = calloc((size_t)R->n_arms, sizeof *R->arms);
    if (!R->arms) { set_err(err, errlen, "out of memory"); return -1; }
    for (int i = 0; i < R->n_arms; i++) {
        json_t *a = json_array_get(arms, (size_t)i);
        const char *name = jstr(a, "name"), *k = jstr(a, "kv_k"), *v = jstr(a, "kv_v");
        if (!json_is_object(a) || !name_ok(name) || !name_ok(k) || !name_ok(v)) {
            set_err(err, errlen, "%s: arms[%d] needs \"name\", \"kv_k\", \"kv_v\" (1..63 printable "
                    "characters, no spaces, quotes, '|' or ',')", path, i);
            return -1;
        }
        if (find_arm(R, name) >= 0) {
            set_err(err, errlen, "%s: arm name \"%s\" appears twice", path, name);
            return -1;
        }
        rep_arm *A = &R->arms[i];
        snprintf(A->name, sizeof A->name, "%s", name);
        snprintf(A->kv_k, sizeof A->kv_k, "%s", k);
        snprintf(A->kv_v, sizeof A->kv_v, "%s", v);
        A->kv_bytes = jnum(a, "kv_bytes_per_token");
        A->base = -1;
    }
    const char *ref = jstr(m, "ref");
    R->ref = find_arm(R, ref);
    if (R->ref < 0) {
        set_err(err, errlen, "%s: \"ref\" (\"%s\") is not one of the arms", path, ref);
        return -1;
    }
    R->arms[R->ref].is_ref = 1;
    /* repeats: NAME#k repeats NAME when NAME is an arm */
    for (int i = 0; i < R->n_arms; i++) {
        char base[REPORT_NAME_MAX];
        snprintf(base, sizeof base, "%s", R->arms[i].name);
        char *hash = strchr(base, '#');
        if (!hash) continue;
        *hash = 0;
        R->arms[i].base = find_arm(R, base);
    }
    /* the noise-floor arm: the first non-reference, non-repeat arm with f32 K and V */
    R->floor = -1;
    for (int i = 0; i < R->n_arms; i++) {
        rep_arm *A = &R->arms[i];
        if (!A->is_ref && A->base < 0 && !strcmp(A->kv_k, "f32") && !strcmp(A->kv_v, "f32")) {
            A->is_floor = 1;
            R->floor = i;
            break;
        }
    }
    json_t *dep = json_object_get(m, "depths");
    if (json_is_array(dep) && json_array_size(dep) > 0) {
        R->n_depths = (int)json_array_size(dep);
        R->depths = calloc((size_t)R->n_depths, sizeof *R->depths);
        if (!R->depths) { set_err(err, errlen, "out of memory"); return -1; }
        for (int i = 0; i < R->n_depths; i++) {
            json_t *d = json_array_get(dep, (size_t)i);
            if (!json_is_integer(d)) {
                set_err(err, errlen, "%s: depths[%d] is not an integer", path, i);
                return -1;
            }
            R->depths[i] = (int)json_integer_value(d);
        }
    }
    json_t *w = json_object_get(m, "warnings");
    if (json_is_array(w) && json_array_size(w) > 0) {
        R->warnings = calloc(json_array_size(w), sizeof *R->warnings);
        if (!R->warnings) { set_err(err, errlen, "out of memory"); return -1; }
        for (size_t i = 0; i < json_array_size(w); i++) {
            json_t *s = json_array_get(w, i);
            if (json_is_string(s)) R->warnings[R->n_warnings++] = json_string_value(s);
        }
    }
    return 0;
}

/* ---- TSV parsing ---------------------------------------------------------------------------- */

#define MAX_FIELDS 20

/* Splits line (modified in place) on tabs into at most MAX_FIELDS fields; returns the count
 * (MAX_FIELDS + 1 when there are more). */
static int split_tabs(char *line, char **f) {
    int n = 0;
    char *p = line;
    for (;;) {
        if (n == MAX_FIELDS) return MAX_FIELDS + 1;
        f[n++] = p;
        char *t = strchr(p, '\t');
        if (!t) break;
        *t = 0;
        p = t + 1;
    }
    return n;
}

/* Parsing context for one file: name and line for messages. */
typedef struct {
    const char *path;
    long line;
    char *err;
    size_t errlen;
} tsv_ctx;

static int parse_int(tsv_ctx *c, const char *s, const char *col, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end != 0 || errno || v < lo || v > hi) {
        set_err(c->err, c->errlen, "%s:%ld: column %s: \"%s\" is not an integer in [%ld, %ld]",
                c->path, c->line, col, s, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* finite = 1: NaN/inf rejected; else "nan" is accepted (unknown). */
static int parse_num(tsv_ctx *c, const char *s, const char *col, int finite, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (*s == 0 || *end != 0 || isinf(v) || (finite && isnan(v))) {
        set_err(c->err, c->errlen, "%s:%ld: column %s: \"%s\" is not a %snumber", c->path,
                c->line, col, s, finite ? "finite " : "");
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_arm(tsv_ctx *c, const rep_results *R, const char *s, int *out) {
    int a = find_arm(R, s);
    if (a < 0) {
        set_err(c->err, c->errlen, "%s:%ld: arm \"%s\" is not in meta.json", c->path, c->line, s);
        return -1;
    }
    if (a == R->ref) {
        set_err(c->err, c->errlen, "%s:%ld: rows are for non-reference arms; \"%s\" is the "
                "reference", c->path, c->line, s);
        return -1;
    }
    *out = a;
    return 0;
}

/* Comma-separated token ids into a new array (*out [*n], caller frees; NULL for ""). */
static int parse_tokens(tsv_ctx *c, const char *s, const char *col, int **out, int *n) {
    *out = NULL;
    *n = 0;
    if (*s == 0) return 0;
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    int *t = malloc(cap * sizeof *t);
    if (!t) { set_err(c->err, c->errlen, "out of memory"); return -1; }
    const char *p = s;
    for (size_t i = 0; i < cap; i++) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end != ',' && *end != 0)) {
            set_err(c->err, c->errlen, "%s:%ld: column %s: bad token list near \"%.20s\"",
                    c->path, c->line, col, p);
            free(t);
            return -1;
        }
        t[i] = (int)v;
        p = end + 1;
    }
    *out = t;
    *n = (int)cap;
    return 0;
}

/* Grows *buf (elements of size el) so that it holds at least need; returns 0 or -1. */
static int grow(void **buf, size_t *cap, size_t need, size_t el) {
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 256;
    while (nc < need) nc *= 2;
    void *p = realloc(*buf, nc * el);
    if (!p) return -1;
    *buf = p;
    *cap = nc;
    return 0;
}

enum { TSV_DEPTHS, TSV_POSITIONS, TSV_FORKS };

static int parse_depth_line(tsv_ctx *c, rep_results *R, char **f, rep_depth *d) {
    int fork_n = R->fork_n;
    if (parse_int(c, f[0], "depth", 1, INT32_MAX, &d->depth) || parse_arm(c, R, f[1], &d->arm) ||
        parse_num(c, f[2], "kl_arm_ref", 1, &d->kl_ar) || parse_num(c, f[3], "kl_ref_arm", 1, &d->kl_ra) ||
        parse_num(c, f[4], "js", 1, &d->js) || parse_int(c, f[5], "same_top1", 0, 1, &d->same) ||
        parse_int(c, f[6], "top1_arm", 0, INT32_MAX, &d->top1_arm) ||
        parse_int(c, f[7], "top1_ref", 0, INT32_MAX, &d->top1_ref) ||
        parse_num(c, f[8], "nll_arm", 0, &d->nll_arm) || parse_num(c, f[9], "nll_ref", 0, &d->nll_ref) ||
        parse_num(c, f[10], "entropy_ref", 0, &d->ent) || parse_num(c, f[11], "gap_ref", 0, &d->gap_ref) ||
        parse_num(c, f[12], "gap_arm", 0, &d->gap_arm) || parse_int(c, f[13], "fork", 0, fork_n, &d->fork) ||
        parse_int(c, f[14], "censored", 0, 1, &d->censored) ||
        parse_num(c, f[15], "fork_gap_arm", 0, &d->fgap_arm) || parse_num(c, f[16], "fork_gap_ref", 0, &d->fgap_ref))
        return -1;
    if (d->same != (d->top1_arm == d->top1_ref)) {
        set_err(c->err, c->errlen, "%s:%ld: same_top1 = %d but top1_arm = %d, top1_ref = %d",
                c->path, c->line, d->same, d->top1_arm, d->top1_ref);
        return -1;
    }
    if (d->censored != (d->fork == fork_n)) {
        set_err(c->err, c->errlen, "%s:%ld: fork = %d with censored = %d (fork_n = %d: censored "
                "iff fork == fork_n)", c->path, c->line, d->fork, d->censored, fork_n);
        return -1;
    }
    return 0;
}

static int parse_pos_line(tsv_ctx *c, rep_results *R, char **f, rep_pos *p) {
    return parse_int(c, f[0], "pos", 0, INT32_MAX, &p->pos) || parse_arm(c, R, f[1], &p->arm) ||
           parse_num(c, f[2], "kl_arm_ref", 1, &p->kl_ar) || parse_num(c, f[3], "kl_ref_arm", 1, &p->kl_ra) ||
           parse_num(c, f[4], "js", 1, &p->js) || parse_int(c, f[5], "same_top1", 0, 1, &p->same) ||
           parse_num(c, f[6], "nll_arm", 0, &p->nll_arm) || parse_num(c, f[7], "nll_ref", 0, &p->nll_ref) ||
           parse_num(c, f[8], "entropy_ref", 0, &p->ent) || parse_num(c, f[9], "gap_ref", 0, &p->gap_ref)
               ? -1 : 0;
}

static int parse_fork_line(tsv_ctx *c, rep_results *R, char **f, rep_fork *k) {
    if (parse_int(c, f[0], "depth", 1, INT32_MAX, &k->depth) || parse_arm(c, R, f[1], &k->arm) ||
        parse_int(c, f[2], "fork", 0, R->fork_n, &k->fork) ||
        parse_int(c, f[3], "censored", 0, 1, &k->censored) ||
        parse_tokens(c, f[4], "tokens_arm", &k->tok_arm, &k->n_arm) ||
        parse_tokens(c, f[5], "tokens_ref", &k->tok_ref, &k->n_ref))
        return -1;
    if (k->censored != (k->fork == R->fork_n)) {
        set_err(c->err, c->errlen, "%s:%ld: fork = %d with censored = %d (fork_n = %d)", c->path,
                c->line, k->fork, k->censored, R->fork_n);
        return -1;
    }
    /* with both full streams present the fork index is determined by them */
    if (k->n_arm == R->fork_n && k->n_ref == R->fork_n) {
        int first = R->fork_n;
        for (int i = 0; i < R->fork_n; i++)
            if (k->tok_arm[i] != k->tok_ref[i]) { first = i; break; }
        if (first != k->fork) {
            set_err(c->err, c->errlen, "%s:%ld: fork = %d but the token streams first differ at %d",
                    c->path, c->line, k->fork, first);
            return -1;
        }
    }
    return 0;
}

/* Reads DIR/name of the given kind into R. Returns 0, 1 when the file does not exist and
 * optional is set, or -1 with err. */
static int load_tsv(const char *dir, const char *name, int kind, int optional, rep_results *R,
                    char *err, size_t errlen) {
    static const char *const headers[] = {REPORT_DEPTHS_HEADER, REPORT_POSITIONS_HEADER,
                                          REPORT_FORKS_HEADER};
    static const int nfields[] = {17, 10, 6};
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "r");
    if (!fp) {
        if (optional && errno == ENOENT) return 1;
        set_err(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    int rc = -1;
    char *line = NULL;
    size_t linecap = 0, cap = 0;
    tsv_ctx c = {path, 0, err, errlen};
    ssize_t len;
    while ((len = getline(&line, &linecap, fp)) >= 0) {
        c.line++;
        if ((size_t)len != strlen(line)) {
            set_err(err, errlen, "%s:%ld: NUL byte in line", path, c.line);
            goto done;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (c.line == 1) {
            if (strcmp(line, headers[kind]) != 0) {
                set_err(err, errlen, "%s:1: header is not the expected \"%s\"", path, headers[kind]);
                goto done;
            }
            continue;
        }
        if (len == 0) continue;  /* blank line */
        char *f[MAX_FIELDS];
        int nf = split_tabs(line, f);
        if (nf != nfields[kind]) {
            set_err(err, errlen, "%s:%ld: expected %d tab-separated fields, found %s%d", path,
                    c.line, nfields[kind], nf > MAX_FIELDS ? "more than " : "",
                    nf > MAX_FIELDS ? MAX_FIELDS : nf);
            goto done;
        }
        if (kind == TSV_DEPTHS) {
            if (grow((void **)&R->drows, &cap, R->n_drows + 1, sizeof *R->drows)) goto oom;
            if (parse_depth_line(&c, R, f, &R->drows[R->n_drows])) goto done;
            R->n_drows++;
        } else if (kind == TSV_POSITIONS) {
            if (grow((void **)&R->prows, &cap, R->n_prows + 1, sizeof *R->prows)) goto oom;
            if (parse_pos_line(&c, R, f, &R->prows[R->n_prows])) goto done;
            R->n_prows++;
        } else {
            if (grow((void **)&R->frows, &cap, R->n_frows + 1, sizeof *R->frows)) goto oom;
            rep_fork *k = &R->frows[R->n_frows];
            memset(k, 0, sizeof *k);
            if (parse_fork_line(&c, R, f, k)) {
                free(k->tok_arm);
                free(k->tok_ref);
                goto done;
            }
            R->n_frows++;
        }
    }
    if (ferror(fp)) {
        set_err(err, errlen, "%s: read error: %s", path, strerror(errno));
        goto done;
    }
    if (c.line == 0) {
        set_err(err, errlen, "%s: empty file (no header line)", path);
        goto done;
    }
    rc = 0;
    goto done;
oom:
    set_err(err, errlen, "out of memory reading %s", path);
done:
    free(line);
    fclose(fp);
    return rc;
}

static int cmp_depth_row(const void *a, const void *b) {
    const rep_depth *x = a, *y = b;
    if (x->arm != y->arm) return x->arm < y->arm ? -1 : 1;
    return (x->depth > y->depth) - (x->depth < y->depth);
}
static int cmp_pos_row(const void *a, const void *b) {
    const rep_pos *x = a, *y = b;
    if (x->arm != y->arm) return x->arm < y->arm ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}
static int cmp_fork_row(const void *a, const void *b) {
    const rep_fork *x = a, *y = b;
    if (x->arm != y->arm) return x->arm < y->arm ? -1 : 1;
    return (x->depth > y->depth) - (x->depth < y->depth);
}

/* Loads everything and checks cross-file consistency. Returns 0 or -1 with err. */
static int results_load(const char *dir, rep_results *R, char *err, size_t errlen) {
    memset(R, 0, sizeof *R);
    if (load_meta(dir, R, err, errlen)) return -1;
    if (load_tsv(dir, "depths.tsv", TSV_DEPTHS, 0, R, err, errlen)) return -1;
    if (load_tsv(dir, "forks.tsv", TSV_FORKS, 0, R, err, errlen)) return -1;
    int prc = load_tsv(dir, "positions.tsv", TSV_POSITIONS, 1, R, err, errlen);
    if (prc < 0) return -1;
    R->have_positions = prc == 0 && R->n_prows > 0;
    if (R->n_drows == 0) {
        set_err(err, errlen, "%s/depths.tsv: no data rows", dir);
        return -1;
    }
    /* sort by (arm, key) and reject duplicates */
    qsort(R->drows, R->n_drows, sizeof *R->drows, cmp_depth_row);
    qsort(R->frows, R->n_frows, sizeof *R->frows, cmp_fork_row);
    if (R->n_prows) qsort(R->prows, R->n_prows, sizeof *R->prows, cmp_pos_row);
    for (size_t i = 1; i < R->n_drows; i++)
        if (R->drows[i].arm == R->drows[i - 1].arm && R->drows[i].depth == R->drows[i - 1].depth) {
            set_err(err, errlen, "%s/depths.tsv: two rows for arm %s at depth %d", dir,
                    R->arms[R->drows[i].arm].name, R->drows[i].depth);
            return -1;
        }
    for (size_t i = 1; i < R->n_prows; i++)
        if (R->prows[i].arm == R->prows[i - 1].arm && R->prows[i].pos == R->prows[i - 1].pos) {
            set_err(err, errlen, "%s/positions.tsv: two rows for arm %s at position %d", dir,
                    R->arms[R->prows[i].arm].name, R->prows[i].pos);
            return -1;
        }
    /* forks.tsv must agree with depths.tsv row for row */
    if (R->n_frows != R->n_drows) {
        set_err(err, errlen, "%s/forks.tsv has %zu rows but depths.tsv has %zu", dir, R->n_frows,
                R->n_drows);
        return -1;
    }
    for (size_t i = 0; i < R->n_drows; i++) {
        const rep_depth *d = &R->drows[i];
        const rep_fork *k = &R->frows[i];
        if (d->arm != k->arm || d->depth != k->depth || d->fork != k->fork) {
            set_err(err, errlen, "%s/forks.tsv: arm %s depth %d: fork %d does not match "
                    "depths.tsv (arm %s depth %d fork %d)", dir, R->arms[k->arm].name, k->depth,
                    k->fork, R->arms[d->arm].name, d->depth, d->fork);
            return -1;
        }
    }
    return 0;
}

/* ============================================================================================
 * Analysis: the statistics of every non-reference arm, over depths and over positions
 * ========================================================================================== */

/* Arm labels: formats ("K:%s,V:%s" <= 131 bytes) plus " (name)". */
#define LABEL_MAX 224

/* The statistics of one set of rows (one arm's depths, or one arm's positions). */
typedef struct {
    size_t n;
    stats_ci kl, kl_med, klr, js, top1, dnll, sp_ent, sp_gap;
    double pct[STATS_N_PCT];  /* KL(arm‖ref) percentiles, NAN when n == 0 */
    stats_fit slope;          /* log10 KL vs depth in thousands (depths only) */
    stats_neartie tie;
    stats_km km;              /* fork survival (depths only; km.n_obs == 0 otherwise) */
    double floor_mean;        /* mean floor KL(ref‖f32) at the same keys, NAN without floor */
    size_t n_floor;           /* keys with a floor value */
    size_t n_identical;       /* rows with KL = 0 in both directions and JS = 0 */
} rep_set;

typedef struct {
    size_t d0, nd;          /* this arm's rows: drows[d0 .. d0+nd), frows likewise */
    size_t p0, np;          /* prows[p0 .. p0+np) */
    rep_set dep, pos;
    double *floor_kl;       /* [nd] floor KL(ref‖f32) at each depth, NAN where absent */
    int *floor_fork;        /* [nd] floor fork index at each depth, -1 where absent */
    char label[LABEL_MAX];  /* e.g. "int8", "K:int8,V:f16", "fp16 (f16#2)" */
    int repeat;             /* -1 not a repeat, 1 bit-identical to its base, 0 not */
    char repeat_detail[600];
} rep_arm_an;

typedef struct {
    rep_arm_an *a;          /* [n_arms] (the reference's entry stays empty) */
    char ref_label[LABEL_MAX];
} rep_analysis;

static void analysis_free(rep_analysis *A, int n_arms) {
    if (!A->a) return;
    for (int i = 0; i < n_arms; i++) {
        stats_km_free(&A->a[i].dep.km);
        free(A->a[i].floor_kl);
        free(A->a[i].floor_fork);
    }
    free(A->a);
    A->a = NULL;
}

/* "f16" -> "fp16", "f32" -> "fp32", anything else unchanged. */
static const char *fmt_pretty(const char *f) {
    if (!strcmp(f, "f16")) return "fp16";
    if (!strcmp(f, "f32")) return "fp32";
    return f;
}

static void formats_label(const rep_arm *a, char *buf, size_t len) {
    if (!strcmp(a->kv_k, a->kv_v)) snprintf(buf, len, "%s", fmt_pretty(a->kv_k));
    else snprintf(buf, len, "K:%s,V:%s", a->kv_k, a->kv_v);
}

/* The label of arm i: its formats; a repeat adds its "#k" suffix ("fp16#2"); otherwise the
 * arm's name is added when another arm shares the formats ("int8 (int8_gpu)"). */
static void arm_label(const rep_results *R, int i, char *buf, size_t len) {
    char mine[2 * REPORT_NAME_MAX + 16], other[2 * REPORT_NAME_MAX + 16];
    formats_label(&R->arms[i], mine, sizeof mine);
    if (R->arms[i].base >= 0) {
        snprintf(buf, len, "%s%s", mine, strchr(R->arms[i].name, '#'));
        return;
    }
    int shared = 0;
    for (int j = 0; j < R->n_arms; j++) {
        if (j == i) continue;
        formats_label(&R->arms[j], other, sizeof other);
        if (!strcmp(mine, other)) shared = 1;
    }
    if (shared && !R->arms[i].is_ref) snprintf(buf, len, "%s (%s)", mine, R->arms[i].name);
    else snprintf(buf, len, "%s", mine);
}

static const rep_depth *find_depth(const rep_results *R, int arm, int depth) {
    rep_depth key;
    key.arm = arm;
    key.depth = depth;
    return bsearch(&key, R->drows, R->n_drows, sizeof *R->drows, cmp_depth_row);
}
static const rep_pos *find_pos(const rep_results *R, int arm, int pos) {
    rep_pos key;
    key.arm = arm;
    key.pos = pos;
    if (!R->n_prows) return NULL;
    return bsearch(&key, R->prows, R->n_prows, sizeof *R->prows, cmp_pos_row);
}

/* Column arrays of one set, filled by the caller, each [n]. */
typedef struct {
    size_t n;
    double *x, *kl, *klr, *js, *dnll, *ent, *gap, *floor;
    int *same, *fork, *cens;
} rep_cols;

static void cols_free(rep_cols *c) {
    free(c->x); free(c->kl); free(c->klr); free(c->js); free(c->dnll);
    free(c->ent); free(c->gap); free(c->floor); free(c->same); free(c->fork); free(c->cens);
    memset(c, 0, sizeof *c);
}

static int cols_alloc(rep_cols *c, size_t n) {
    memset(c, 0, sizeof *c);
    size_t m = n ? n : 1;
    c->n = n;
    c->x = malloc(m * sizeof(double)); c->kl = malloc(m * sizeof(double));
    c->klr = malloc(m * sizeof(double)); c->js = malloc(m * sizeof(double));
    c->dnll = malloc(m * sizeof(double)); c->ent = malloc(m * sizeof(double));
    c->gap = malloc(m * sizeof(double)); c->floor = malloc(m * sizeof(double));
    c->same = malloc(m * sizeof(int)); c->fork = malloc(m * sizeof(int));
    c->cens = malloc(m * sizeof(int));
    if (!c->x || !c->kl || !c->klr || !c->js || !c->dnll || !c->ent || !c->gap || !c->floor ||
        !c->same || !c->fork || !c->cens) {
        cols_free(c);
        return -1;
    }
    return 0;
}

/* Mean/median CIs of the finite values of v [n] (NaNs dropped, order kept). */
static int ci_finite(const double *v, size_t n, int median, stats_ci *out) {
    double *t = malloc((n ? n : 1) * sizeof *t); /* [n] */
    if (!t) return -1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i])) t[m++] = v[i];
    out->est = out->lo = out->hi = NAN;
    out->n = 0;
    if (m) {
        if (median) stats_median_ci(t, m, 0, STATS_BOOT_B, STATS_BOOT_SEED, out);
        else stats_mean_ci(t, m, 0, STATS_BOOT_B, STATS_BOOT_SEED, out);
    }
    free(t);
    return 0;
}

/* Computes every statistic of one set; with_depth adds the slope and the fork survival. */
static int set_compute(const rep_cols *c, int with_depth, int fork_n, rep_set *s) {
    memset(s, 0, sizeof *s);
    s->n = c->n;
    s->floor_mean = NAN;
    s->km.median = s->km.median_lo = s->km.median_hi = s->km.surv_end = NAN;
    for (int k = 0; k < STATS_N_PCT; k++) s->pct[k] = NAN;
    stats_ci none = {NAN, NAN, NAN, 0};
    s->kl = s->kl_med = s->klr = s->js = s->top1 = s->dnll = s->sp_ent = s->sp_gap = none;
    s->slope.slope = s->slope.lo = s->slope.hi = s->slope.intercept = s->slope.r2 = NAN;
    s->tie.share_pos_near = s->tie.share_flips_near = s->tie.share_kl_near = NAN;
    s->tie.eps = REPORT_NEAR_TIE_EPS;
    if (c->n == 0) return 0;

    size_t same = 0;
    double fsum = 0;
    for (size_t i = 0; i < c->n; i++) {
        same += c->same[i] != 0;
        if (!isnan(c->floor[i])) { fsum += c->floor[i]; s->n_floor++; }
        if (c->kl[i] == 0.0 && c->klr[i] == 0.0 && c->js[i] == 0.0) s->n_identical++;
    }
    if (s->n_floor) s->floor_mean = fsum / (double)s->n_floor;
    if (ci_finite(c->kl, c->n, 0, &s->kl) || ci_finite(c->kl, c->n, 1, &s->kl_med) ||
        ci_finite(c->klr, c->n, 0, &s->klr) || ci_finite(c->js, c->n, 0, &s->js) ||
        ci_finite(c->dnll, c->n, 0, &s->dnll))
        return -1;
    stats_percentiles(c->kl, c->n, s->pct);
    stats_wilson(same, c->n, &s->top1);
    if (stats_spearman(c->kl, c->ent, c->n, &s->sp_ent) ||
        stats_spearman(c->kl, c->gap, c->n, &s->sp_gap))
        return -1;
    stats_near_tie(c->gap, c->same, c->kl, c->n, REPORT_NEAR_TIE_EPS, &s->tie);
    if (with_depth) {
        stats_log10_slope(c->x, c->kl, c->n, &s->slope);
        if (stats_kaplan_meier(c->fork, c->cens, c->n, fork_n, &s->km)) return -1;
    }
    return 0;
}

static int same_num(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

/* Is arm i (a repeat of base b) bit-identical? Fills repeat / repeat_detail. */
static void repeat_check(const rep_results *R, int i, rep_arm_an *X) {
    int b = R->arms[i].base;
    size_t n_diff = 0, n_fork = 0, n_pos_diff = 0, n_missing = 0;
    double max_kl = 0;
    int first_fork_depth = -1, first_fork = -1;
    for (size_t k = X->d0; k < X->d0 + X->nd; k++) {
        const rep_depth *d = &R->drows[k];
        const rep_fork *f = &R->frows[k];
        int differs, forked;
        if (b == R->ref) {
            differs = d->kl_ar != 0.0 || d->kl_ra != 0.0 || d->js != 0.0 || !d->same;
            forked = !d->censored;
            if (fabs(d->kl_ar) > max_kl) max_kl = fabs(d->kl_ar);
        } else {
            const rep_depth *e = find_depth(R, b, d->depth);
            if (!e) { n_missing++; continue; }
            const rep_fork *g = &R->frows[e - R->drows];
            differs = !same_num(d->kl_ar, e->kl_ar) || !same_num(d->kl_ra, e->kl_ra) ||
                      !same_num(d->js, e->js) || d->top1_arm != e->top1_arm ||
                      !same_num(d->nll_arm, e->nll_arm) || !same_num(d->gap_arm, e->gap_arm);
            forked = f->n_arm != g->n_arm ||
                     (f->n_arm && memcmp(f->tok_arm, g->tok_arm, (size_t)f->n_arm * sizeof(int)));
            if (fabs(d->kl_ar - e->kl_ar) > max_kl) max_kl = fabs(d->kl_ar - e->kl_ar);
        }
        n_diff += differs != 0;
        if (forked) {
            n_fork++;
            if (first_fork_depth < 0) { first_fork_depth = d->depth; first_fork = d->fork; }
        }
    }
    for (size_t k = X->p0; k < X->p0 + X->np; k++) {
        const rep_pos *p = &R->prows[k];
        if (b == R->ref) {
            n_pos_diff += p->kl_ar != 0.0 || p->kl_ra != 0.0 || p->js != 0.0 || !p->same;
        } else {
            const rep_pos *q = find_pos(R, b, p->pos);
            if (!q) { n_missing++; continue; }
            n_pos_diff += !same_num(p->kl_ar, q->kl_ar) || !same_num(p->js, q->js) ||
                          !same_num(p->nll_arm, q->nll_arm) || p->same != q->same;
        }
    }
    X->repeat = n_diff == 0 && n_fork == 0 && n_pos_diff == 0 && n_missing == 0;
    char *o = X->repeat_detail;
    size_t cap = sizeof X->repeat_detail, len = 0;
    if (X->repeat) {
        snprintf(o, cap, "bit-identical to %s at all %zu depths%s (%s, same greedy tokens)",
                 R->arms[b].name, X->nd, X->np ? " and positions" : "",
                 b == R->ref ? "KL = JS = 0" : "every metric equal");
        return;
    }
    if (b == R->ref)
        len += (size_t)snprintf(o + len, cap - len, "KL or JS != 0 or top-1 differs at %zu of %zu "
                                "depths (largest KL %.3g)", n_diff, X->nd, max_kl);
    else
        len += (size_t)snprintf(o + len, cap - len, "metrics differ from %s at %zu of %zu depths "
                                "(largest KL difference %.3g)", R->arms[b].name, n_diff, X->nd,
                                max_kl);
    if (len < cap)
        len += (size_t)snprintf(o + len, cap - len, "; greedy streams differ at %zu depths", n_fork);
    if (first_fork_depth >= 0 && len < cap)
        len += (size_t)snprintf(o + len, cap - len, " (first at depth %d, token %d)",
                                first_fork_depth, first_fork);
    if (X->np && len < cap)
        len += (size_t)snprintf(o + len, cap - len, "; %zu of %zu positions differ", n_pos_diff,
                                X->np);
    if (n_missing && len < cap)
        snprintf(o + len, cap - len, "; %zu rows have no counterpart in %s", n_missing,
                 R->arms[b].name);
}

static int analysis_run(const rep_results *R, rep_analysis *A, char *err, size_t errlen) {
    memset(A, 0, sizeof *A);
    A->a = calloc((size_t)R->n_arms, sizeof *A->a);
    if (!A->a) { set_err(err, errlen, "out of memory"); return -1; }
    formats_label(&R->arms[R->ref], A->ref_label, sizeof A->ref_label);
    for (int i = 0; i < R->n_arms; i++) {
        rep_arm_an *X = &A->a[i];
        X->repeat = -1;
        X->dep.km.median = X->pos.km.median = NAN;
        arm_label(R, i, X->label, sizeof X->label);
    }
    /* row ranges (rows are sorted by arm) */
    for (size_t k = 0; k < R->n_drows; k++) {
        rep_arm_an *X = &A->a[R->drows[k].arm];
        if (X->nd == 0) X->d0 = k;
        X->nd++;
    }
    for (size_t k = 0; k < R->n_prows; k++) {
        rep_arm_an *X = &A->a[R->prows[k].arm];
        if (X->np == 0) X->p0 = k;
        X->np++;
    }
    for (int i = 0; i < R->n_arms; i++) {
        if (i == R->ref) continue;
        rep_arm_an *X = &A->a[i];
        rep_cols c;
        /* depths */
        if (cols_alloc(&c, X->nd)) goto oom;
        X->floor_kl = malloc((X->nd ? X->nd : 1) * sizeof *X->floor_kl);
        X->floor_fork = malloc((X->nd ? X->nd : 1) * sizeof *X->floor_fork);
        if (!X->floor_kl || !X->floor_fork) { cols_free(&c); goto oom; }
        for (size_t k = 0; k < X->nd; k++) {
            const rep_depth *d = &R->drows[X->d0 + k];
            const rep_depth *f = R->floor >= 0 ? find_depth(R, R->floor, d->depth) : NULL;
            X->floor_kl[k] = f ? f->kl_ra : NAN;
            X->floor_fork[k] = f ? f->fork : -1;
            c.x[k] = d->depth / 1000.0;
            c.kl[k] = d->kl_ar; c.klr[k] = d->kl_ra; c.js[k] = d->js;
            c.dnll[k] = d->nll_arm - d->nll_ref;
            c.ent[k] = d->ent; c.gap[k] = d->gap_ref; c.same[k] = d->same;
            c.fork[k] = d->fork; c.cens[k] = d->censored;
            c.floor[k] = (f && i != R->floor) ? f->kl_ra : NAN;
        }
        int rc = set_compute(&c, 1, R->fork_n, &X->dep);
        cols_free(&c);
        if (rc) goto fail;
        /* positions */
        if (X->np) {
            if (cols_alloc(&c, X->np)) goto oom;
            for (size_t k = 0; k < X->np; k++) {
                const rep_pos *p = &R->prows[X->p0 + k];
                const rep_pos *f = R->floor >= 0 && i != R->floor ? find_pos(R, R->floor, p->pos) : NULL;
                c.x[k] = p->pos;
                c.kl[k] = p->kl_ar; c.klr[k] = p->kl_ra; c.js[k] = p->js;
                c.dnll[k] = p->nll_arm - p->nll_ref;
                c.ent[k] = p->ent; c.gap[k] = p->gap_ref; c.same[k] = p->same;
                c.fork[k] = 0; c.cens[k] = 0;
                c.floor[k] = f ? f->kl_ra : NAN;
            }
            rc = set_compute(&c, 0, R->fork_n, &X->pos);
            cols_free(&c);
            if (rc) goto fail;
        }
        if (R->arms[i].base >= 0) repeat_check(R, i, X);
    }
    return 0;
oom:
    set_err(err, errlen, "out of memory");
    analysis_free(A, R->n_arms);
    return -1;
fail:
    set_err(err, errlen, "statistics failed (out of memory or invalid values)");
    analysis_free(A, R->n_arms);
    return -1;
}

/* ============================================================================================
 * Formatting
 * ========================================================================================== */

void report_fmt_sig2(double v, char *buf, size_t len) {
    if (isnan(v)) { snprintf(buf, len, "nan"); return; }
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
    else snprintf(buf, len, "%dK", (depth + 500) / 1000);
}

/* Depth labels for a table: "15K" style unless two depths would get the same label, then
 * exact counts for all. */
static int depth_labels_collide(const rep_results *R, const rep_arm_an *X) {
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

/* "est [lo, hi]" with 2 significant digits; "n/a" parts for NaN. */
static void fmt_ci(const stats_ci *c, char *buf, size_t len) {
    char a[32], b[32], d[32];
    if (isnan(c->est)) { snprintf(buf, len, "n/a"); return; }
    report_fmt_sig2(c->est, a, sizeof a);
    if (isnan(c->lo)) { snprintf(buf, len, "%s", a); return; }
    report_fmt_sig2(c->lo, b, sizeof b);
    report_fmt_sig2(c->hi, d, sizeof d);
    snprintf(buf, len, "%s [%s, %s]", a, b, d);
}

/* A proportion as a percentage with 2 decimals: "99.25% [98.90%, 99.51%]". */
static void fmt_pct_ci(const stats_ci *c, char *buf, size_t len) {
    if (isnan(c->est)) { snprintf(buf, len, "n/a"); return; }
    snprintf(buf, len, "%.2f%% [%.2f%%, %.2f%%]", 100 * c->est, 100 * c->lo, 100 * c->hi);
}

/* A correlation: "0.42 [0.31, 0.52]" with 2 decimals. */
static void fmt_rho(const stats_ci *c, char *buf, size_t len) {
    if (isnan(c->est)) { snprintf(buf, len, "n/a"); return; }
    if (isnan(c->lo)) { snprintf(buf, len, "%.2f", c->est); return; }
    snprintf(buf, len, "%.2f [%.2f, %.2f]", c->est, c->lo, c->hi);
}

static void fmt_share(double v, char *buf, size_t len) {
    if (isnan(v)) snprintf(buf, len, "n/a");
    else snprintf(buf, len, "%.1f%%", 100 * v);
}

/* ============================================================================================
 * Claims: what the numbers support (definitions are printed in the README)
 * ========================================================================================== */

enum { V_SUPPORTED, V_NOT_SUPPORTED, V_INCONCLUSIVE, V_NOT_MEASURED };
static const char *const verdict_name[] = {"supported", "not supported", "inconclusive",
                                           "not measured"};

typedef struct {
    int verdict;
    char claim[1024];
    char evidence[1024];
} rep_claim;

/* Up to 8 claims per arm, written into out [8]; returns the count. */
static int arm_claims(const rep_results *R, const rep_analysis *A, int i, rep_claim *out) {
    const rep_arm_an *X = &A->a[i];
    const char *lab = X->label, *ref = A->ref_label;
    double k = REPORT_FLOOR_FACTOR;
    char a[64], b[64], c[64];
    int n = 0;
    rep_claim *C;

    /* 1. within k x the noise floor, over depths and over positions */
    for (int set = 0; set < 2; set++) {
        const rep_set *s = set ? &X->pos : &X->dep;
        const char *where = set ? "positions" : "depths";
        C = &out[n++];
        snprintf(C->claim, sizeof C->claim, "%s is indistinguishable from %s over the %s "
                 "(mean KL within %.0fx the noise floor)", lab, ref, where, k);
        if (set && !X->np) {
            C->verdict = V_NOT_MEASURED;
            snprintf(C->evidence, sizeof C->evidence, "per-position metrics were not streamed");
            continue;
        }
        if (R->floor < 0 || s->n_floor == 0 || isnan(s->kl.lo)) {
            C->verdict = V_NOT_MEASURED;
            snprintf(C->evidence, sizeof C->evidence, "no f32 noise-floor arm at these %s", where);
            continue;
        }
        double lim = k * s->floor_mean;
        C->verdict = s->kl.hi <= lim ? V_SUPPORTED : s->kl.lo > lim ? V_NOT_SUPPORTED : V_INCONCLUSIVE;
        fmt_ci(&s->kl, a, sizeof a);
        report_fmt_sig2(s->floor_mean, b, sizeof b);
        report_fmt_sig2(lim, c, sizeof c);
        snprintf(C->evidence, sizeof C->evidence, "mean KL(%s‖%s) %s vs floor %s (limit %s)",
                 lab, ref, a, b, c);
    }

    /* 2. per depth: KL <= k x floor and fork not earlier than the floor arm's */
    C = &out[n++];
    snprintf(C->claim, sizeof C->claim, "%s stays within %.0fx the noise floor at every depth, "
             "and its greedy stream forks no earlier than fp32's", lab, k);
    if (R->floor < 0) {
        C->verdict = V_NOT_MEASURED;
        snprintf(C->evidence, sizeof C->evidence, "no f32 noise-floor arm");
    } else {
        size_t n_ok = 0, n_cmp = 0, n_kl_bad = 0, n_fork_bad = 0;
        for (size_t j = 0; j < X->nd; j++) {
            const rep_depth *d = &R->drows[X->d0 + j];
            if (isnan(X->floor_kl[j])) continue;
            n_cmp++;
            int kl_ok = d->kl_ar <= k * X->floor_kl[j];
            int fork_ok = d->fork >= X->floor_fork[j];
            n_kl_bad += !kl_ok;
            n_fork_bad += !fork_ok;
            n_ok += kl_ok && fork_ok;
        }
        C->verdict = n_cmp == 0 ? V_NOT_MEASURED : n_ok == n_cmp ? V_SUPPORTED : V_NOT_SUPPORTED;
        snprintf(C->evidence, sizeof C->evidence, "holds at %zu of %zu depths (KL above the limit "
                 "at %zu, earlier fork at %zu)", n_ok, n_cmp, n_kl_bad, n_fork_bad);
    }

    /* 3. KL trend with depth */
    C = &out[n++];
    snprintf(C->claim, sizeof C->claim, "KL(%s‖%s) grows with depth", lab, ref);
    const stats_fit *f = &X->dep.slope;
    if (isnan(f->slope)) {
        C->verdict = V_NOT_MEASURED;
        snprintf(C->evidence, sizeof C->evidence, "fewer than 3 depths");
    } else {
        C->verdict = f->lo > 0 ? V_SUPPORTED : f->hi < 0 ? V_NOT_SUPPORTED : V_INCONCLUSIVE;
        snprintf(C->evidence, sizeof C->evidence, "slope of log10 KL %+.2g [%+.2g, %+.2g] decades "
                 "per 1,000 tokens%s", f->slope, f->lo, f->hi,
                 f->hi < 0 ? " (it shrinks)" : f->lo > 0 ? "" : " (CI contains 0)");
    }

    /* 4. top-1 agreement >= 99% (positions when measured, else depths) */
    const rep_set *s = X->np ? &X->pos : &X->dep;
    const char *where = X->np ? "positions" : "depths";
    C = &out[n++];
    snprintf(C->claim, sizeof C->claim, "%s picks the same top-1 token as %s at >= 99%% of %s",
             lab, ref, where);
    C->verdict = isnan(s->top1.lo) ? V_NOT_MEASURED : s->top1.lo >= 0.99 ? V_SUPPORTED
                 : s->top1.hi < 0.99 ? V_NOT_SUPPORTED : V_INCONCLUSIVE;
    fmt_pct_ci(&s->top1, a, sizeof a);
    snprintf(C->evidence, sizeof C->evidence, "agreement %s over %zu %s (Wilson)", a, s->n, where);

    /* 5. flips concentrate at near ties */
    C = &out[n++];
    snprintf(C->claim, sizeof C->claim, "%s's top-1 flips happen mostly at near ties "
             "(reference top-2 gap < %.2g)", lab, REPORT_NEAR_TIE_EPS);
    if (s->tie.n_flips == 0) {
        C->verdict = V_NOT_MEASURED;
        snprintf(C->evidence, sizeof C->evidence, "no top-1 flips over the %s", where);
    } else {
        C->verdict = s->tie.share_flips_near > 0.5 ? V_SUPPORTED : V_NOT_SUPPORTED;
        fmt_share(s->tie.share_flips_near, a, sizeof a);
        fmt_share(s->tie.share_pos_near, b, sizeof b);
        snprintf(C->evidence, sizeof C->evidence, "%zu of %zu flips (%s) at near ties, which "
                 "are %s of the %s", s->tie.n_flips_near, s->tie.n_flips, a, b, where);
    }

    /* 6. KL larger where the reference is uncertain */
    C = &out[n++];
    snprintf(C->claim, sizeof C->claim, "KL(%s‖%s) is larger where %s is uncertain (rank "
             "correlation with reference entropy > 0)", lab, ref, ref);
    if (isnan(s->sp_ent.lo)) {
        C->verdict = V_NOT_MEASURED;
        snprintf(C->evidence, sizeof C->evidence, "too few %s for a CI", where);
    } else {
        C->verdict = s->sp_ent.lo > 0 ? V_SUPPORTED : s->sp_ent.hi < 0 ? V_NOT_SUPPORTED
                     : V_INCONCLUSIVE;
        fmt_rho(&s->sp_ent, a, sizeof a);
        snprintf(C->evidence, sizeof C->evidence, "Spearman %s over %zu %s", a, s->sp_ent.n, where);
    }
    return n;
}

/* ============================================================================================
 * summary.json
 * ========================================================================================== */

/* A number, or null for NaN/inf (JSON has no NaN). */
static json_t *jreal(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *jci(const stats_ci *c) {
    return json_pack("{s:o,s:o,s:o,s:I}", "est", jreal(c->est), "lo", jreal(c->lo), "hi",
                     jreal(c->hi), "n", (json_int_t)c->n);
}

static json_t *jset(const rep_set *s, int with_depth) {
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

static const char *arm_role(const rep_results *R, int i) {
    if (i == R->ref) return "reference";
    if (R->arms[i].base >= 0) return "repeat";
    if (R->arms[i].is_floor) return "floor";
    return "test";
}

/* Builds the summary document (new reference; caller decrefs), NULL on allocation failure. */
static json_t *summary_build(const rep_results *R, const rep_analysis *A) {
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
    json_object_set_new(root, "settings", json_pack(
        "{s:f,s:s,s:i,s:I,s:s,s:f,s:f,s:f,s:s,s:s,s:s,s:s,s:s}",
        "ci_level", 0.95,
        "bootstrap", "moving-block, percentile interval",
        "bootstrap_resamples", STATS_BOOT_B, "bootstrap_seed", (json_int_t)STATS_BOOT_SEED,
        "block_length", "ceil(n^(1/3)) over rows ordered by depth or position",
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
        const rep_arm *a = &R->arms[i];
        const rep_arm_an *X = &A->a[i];
        json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:o,s:s}", "name", a->name, "label", X->label,
                              "kv_k", a->kv_k, "kv_v", a->kv_v, "kv_bytes_per_token",
                              jreal(a->kv_bytes), "role", arm_role(R, i));
        json_array_append_new(arms, o);
        if (i == R->ref) continue;
        if (a->base >= 0)
            json_object_set_new(o, "repeat_check", json_pack("{s:s,s:b,s:s}", "base",
                R->arms[a->base].name, "bit_identical", X->repeat == 1, "detail", X->repeat_detail));
        json_t *pd = json_array();
        for (size_t j = 0; j < X->nd; j++) {
            const rep_depth *d = &R->drows[X->d0 + j];
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
        if (a->is_floor || a->base >= 0) continue;
        rep_claim cl[8];
        int nc = arm_claims(R, A, i, cl);
        for (int c = 0; c < nc; c++)
            json_array_append_new(claims, json_pack("{s:s,s:s,s:s,s:s}", "arm", a->name, "claim",
                cl[c].claim, "verdict", verdict_name[cl[c].verdict], "evidence", cl[c].evidence));
    }
    json_object_set_new(root, "claims", claims);
    return root;
}

/* ============================================================================================
 * Plots: one gnuplot script per plot in DIR/plots, data in .dat files beside it
 * ========================================================================================== */

enum { PLOT_KL_DEPTH, PLOT_POSITIONS, PLOT_KL_ENTROPY, PLOT_FORKS, N_PLOTS };
static const char *const plot_name[N_PLOTS] = {"kl_depth", "positions_kl", "kl_entropy",
                                               "fork_survival"};
static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                      "#8c564b", "#e377c2", "#17becf"};
#define N_PALETTE 8
#define FLOOR_COLOR "#7f7f7f"

/* Writes a number for gnuplot: "?" (missing) when NaN or, on a log axis, <= 0. */
static void dat_num(FILE *f, double v, int log_axis) {
    if (isnan(v) || (log_axis && v <= 0.0)) fputs(" ?", f);
    else fprintf(f, " %.9g", v);
}

static FILE *plot_file(const char *pdir, const char *name, char *err, size_t errlen) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", pdir, name);
    FILE *f = fopen(path, "w");
    if (!f) set_err(err, errlen, "cannot create %s: %s", path, strerror(errno));
    return f;
}

/* Script head: PNG terminal, common settings. */
static void gp_head(FILE *g, const char *name, const char *title, const char *xlabel,
                    const char *ylabel, int log_y) {
    fprintf(g, "# %s.gp: rendered by strata (report_render); run: gnuplot %s.gp\n", name, name);
    fprintf(g, "set terminal pngcairo size 1000,620 font \"DejaVu Sans,11\" noenhanced\n");
    fprintf(g, "set output \"%s.png\"\n", name);
    fprintf(g, "set datafile missing \"?\"\n");
    fprintf(g, "set title \"%s\"\nset xlabel \"%s\"\nset ylabel \"%s\"\n", title, xlabel, ylabel);
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

/* Which arms are drawn as test series: non-reference, not the floor, not a repeat. */
static int is_test_arm(const rep_results *R, int i) {
    return i != R->ref && !R->arms[i].is_floor && R->arms[i].base < 0;
}

/* Writes the data and script of one plot; *drawn = 0 when there is nothing to draw. */
static int plot_write(const char *pdir, int which, const rep_results *R, const rep_analysis *A,
                      int *drawn, char *err, size_t errlen) {
    char fname[300], title[400];
    const char *name = plot_name[which];
    const char *ref = A->ref_label;
    FILE *g = NULL, *d = NULL;
    int rc = -1, n_series = 0;
    char *plot = NULL, *lines = NULL; /* the "plot ..." command being built; lines drawn last */
    size_t plot_len = 0, lines_len = 0;
    FILE *pl = open_memstream(&plot, &plot_len);
    FILE *ll = open_memstream(&lines, &lines_len);
    if (!pl || !ll) {
        if (pl) fclose(pl);
        if (ll) fclose(ll);
        free(plot);
        free(lines);
        set_err(err, errlen, "out of memory");
        return -1;
    }
    *drawn = 0;

    /* the floor arm first, so its band lies under the other series */
    for (int o = -1; o < R->n_arms; o++) {
        int i = o < 0 ? R->floor : o;
        if (i < 0 || (o >= 0 && i == R->floor)) continue;
        const rep_arm_an *X = &A->a[i];
        int floor = i == R->floor;
        if (i == R->ref || R->arms[i].base >= 0) continue;
        if (!floor && !is_test_arm(R, i)) continue;
        const char *col = floor ? FLOOR_COLOR : palette[i % N_PALETTE];
        snprintf(fname, sizeof fname, "%s_%d.dat", name, i);

        if (which == PLOT_KL_DEPTH) {
            double *kl = malloc((X->nd ? X->nd : 1) * sizeof *kl); /* [nd] series to test */
            if (!kl) goto oom;
            for (size_t j = 0; j < X->nd; j++)
                kl[j] = floor ? R->drows[X->d0 + j].kl_ra : R->drows[X->d0 + j].kl_ar;
            int any = has_positive(kl, X->nd);
            free(kl);
            if (!any) continue;
            if (!(d = plot_file(pdir, fname, err, errlen))) goto done;
            fprintf(d, "# depth  %s  js  (? = zero or missing)\n", floor ? "kl_ref_arm" : "kl_arm_ref");
            for (size_t j = 0; j < X->nd; j++) {
                const rep_depth *r = &R->drows[X->d0 + j];
                fprintf(d, "%d", r->depth);
                dat_num(d, floor ? r->kl_ra : r->kl_ar, 1);
                dat_num(d, r->js, 1);
                dat_num(d, floor ? REPORT_FLOOR_FACTOR * r->kl_ra : NAN, 1);
                fputc('\n', d);
            }
            if (floor) {
                fprintf(pl, "%s\"%s\" using 1:2:4 with filledcurves fc rgb \"#e0e0e0\" title "
                        "\"band: noise floor to %.0fx floor\", \"%s\" using 1:2 with lines lw 2 "
                        "lc rgb \"%s\" title \"noise floor KL(%s‖fp32)\"", n_series ? ", " : "",
                        fname, REPORT_FLOOR_FACTOR, fname, col, ref);
            } else {
                fprintf(pl, "%s\"%s\" using 1:2 with linespoints lw 2 pt 7 lc rgb \"%s\" title "
                        "\"KL(%s‖%s)\", \"%s\" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "
                        "\"%s\" title \"JS(%s, %s)\"", n_series ? ", " : "", fname, col, X->label,
                        ref, fname, col, X->label, ref);
            }
        } else if (which == PLOT_POSITIONS) {
            if (!X->np) continue;
            double *kl = malloc(X->np * sizeof *kl), *med = malloc(X->np * sizeof *med); /* [np] */
            if (!kl || !med) { free(kl); free(med); goto oom; }
            for (size_t j = 0; j < X->np; j++)
                kl[j] = floor ? R->prows[X->p0 + j].kl_ra : R->prows[X->p0 + j].kl_ar;
            size_t h = X->np / 100 < 2 ? 2 : X->np / 100 > 100 ? 100 : X->np / 100;
            if (!has_positive(kl, X->np) || rolling_median(kl, X->np, h, med)) {
                free(kl);
                free(med);
                continue;
            }
            if (!(d = plot_file(pdir, fname, err, errlen))) { free(kl); free(med); goto done; }
            fprintf(d, "# pos  kl  rolling_median(window %zu)\n", 2 * h + 1);
            for (size_t j = 0; j < X->np; j++) {
                fprintf(d, "%d", R->prows[X->p0 + j].pos);
                dat_num(d, kl[j], 1);
                dat_num(d, med[j], 1);
                fputc('\n', d);
            }
            free(kl);
            free(med);
            char lab[2 * LABEL_MAX + 64];
            if (floor) snprintf(lab, sizeof lab, "noise floor KL(%s‖fp32)", ref);
            else snprintf(lab, sizeof lab, "KL(%s‖%s)", X->label, ref);
            /* points first (denser data: smaller, more transparent), median lines on top */
            int dense = X->np > 5000;
            fprintf(pl, "%s\"%s\" using 1:2 with points pt 7 ps %s lc rgb \"#%s%s\" title "
                    "\"%s, per position\"", n_series ? ", " : "", fname, dense ? "0.3" : "0.5",
                    dense ? "a0" : "60", col + 1, lab);
            fprintf(ll, ", \"%s\" using 1:3 with lines lw 2.5 lc rgb \"%s\" title \"%s, rolling "
                    "median of %zu\"", fname, col, lab, 2 * h + 1);
        } else if (which == PLOT_KL_ENTROPY) {
            if (floor) continue;
            int pos = R->have_positions && X->np;
            size_t n = pos ? X->np : X->nd;
            int any = 0;
            for (size_t j = 0; j < n; j++)
                any |= (pos ? R->prows[X->p0 + j].kl_ar : R->drows[X->d0 + j].kl_ar) > 0.0;
            if (!any) continue;
            if (!(d = plot_file(pdir, fname, err, errlen))) goto done;
            fprintf(d, "# entropy_ref  kl_arm_ref  (%s)\n", pos ? "positions" : "depths");
            for (size_t j = 0; j < n; j++) {
                double e = pos ? R->prows[X->p0 + j].ent : R->drows[X->d0 + j].ent;
                double k = pos ? R->prows[X->p0 + j].kl_ar : R->drows[X->d0 + j].kl_ar;
                fprintf(d, "%.9g", e);
                dat_num(d, k, 1);
                fputc('\n', d);
            }
            fprintf(pl, "%s\"%s\" using 1:2 with points pt 7 ps %s lc rgb \"#80%s\" title "
                    "\"KL(%s‖%s) at %s\"", n_series ? ", " : "", fname, pos ? "0.6" : "1.2",
                    col + 1, X->label, ref, pos ? "positions" : "depths");
        } else { /* PLOT_FORKS */
            const stats_km *k = &X->dep.km;
            if (!k->n_obs) continue;
            if (!(d = plot_file(pdir, fname, err, errlen))) goto done;
            fprintf(d, "# i  S(i)  lo  hi   (Kaplan-Meier steps)\n0 1 1 1\n");
            double s = 1, lo = 1, hi = 1;
            for (size_t j = 0; j < k->n_steps; j++) {
                fprintf(d, "%d %.9g %.9g %.9g\n", k->time[j], s, lo, hi);
                s = k->surv[j]; lo = k->lo[j]; hi = k->hi[j];
                fprintf(d, "%d %.9g %.9g %.9g\n", k->time[j], s, lo, hi);
            }
            fprintf(d, "%d %.9g %.9g %.9g\n", R->fork_n, s, lo, hi);
            char lab[2 * LABEL_MAX + 64];
            if (floor) snprintf(lab, sizeof lab, "fp32 vs %s (noise floor)", ref);
            else snprintf(lab, sizeof lab, "%s vs %s", X->label, ref);
            fprintf(pl, "%s\"%s\" using 1:3:4 with filledcurves fc rgb \"%s\" fs transparent "
                    "solid 0.15 noborder notitle, \"%s\" using 1:2 with lines lw 2.5 lc rgb \"%s\" "
                    "title \"%s (%zu depths)\"", n_series ? ", " : "", fname, col, fname, col, lab,
                    k->n_obs);
        }
        if (d) {
            if (fclose(d) != 0) { d = NULL; set_err(err, errlen, "write error in %s/%s", pdir, fname); goto done; }
            d = NULL;
        }
        n_series++;
    }
    if (fflush(pl) != 0 || fflush(ll) != 0) goto oom;
    if (n_series == 0) { rc = 0; goto done; }

    snprintf(fname, sizeof fname, "%s.gp", name);
    if (!(g = plot_file(pdir, fname, err, errlen))) goto done;
    if (which == PLOT_KL_DEPTH) {
        snprintf(title, sizeof title, "KL and JS vs depth (%s)", R->tag);
        gp_head(g, name, title, "Depth (tokens in the prefix)",
                "Divergence from the reference (nats, log scale)", 1);
    } else if (which == PLOT_POSITIONS) {
        snprintf(title, sizeof title, "Per-position KL with rolling median (%s)", R->tag);
        gp_head(g, name, title, "Position in the document (token index)",
                "KL (nats, log scale)", 1);
    } else if (which == PLOT_KL_ENTROPY) {
        snprintf(title, sizeof title, "KL vs reference entropy (%s)", R->tag);
        gp_head(g, name, title, "Entropy of the reference distribution (nats)",
                "KL(arm‖ref) (nats, log scale)", 1);
    } else {
        snprintf(title, sizeof title, "Fork survival, Kaplan-Meier with 95%% Greenwood band (%s)",
                 R->tag);
        gp_head(g, name, title, "Generated token index i",
                "Share of depths not yet forked, S(i) = P(fork > i)", 0);
        fprintf(g, "set yrange [0:1.05]\nset xrange [0:%d]\n", R->fork_n);
    }
    fprintf(g, "plot %s%s\n", plot, lines);
    gp_tail(g, name);
    if (fclose(g) != 0) { g = NULL; set_err(err, errlen, "write error in %s/%s", pdir, fname); goto done; }
    g = NULL;
    *drawn = 1;
    rc = 0;
    goto done;
oom:
    set_err(err, errlen, "out of memory");
done:
    if (d) fclose(d);
    if (g) fclose(g);
    fclose(pl);
    fclose(ll);
    free(plot);
    free(lines);
    return rc;
}

/* Runs "gnuplot NAME.gp" in pdir, its output appended to pdir/gnuplot.log. */
static int gnuplot_run(const char *pdir, const char *name, char *err, size_t errlen) {
    char script[300];
    snprintf(script, sizeof script, "%s.gp", name);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        set_err(err, errlen, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        if (chdir(pdir) != 0) _exit(126);
        int fd = open("gnuplot.log", O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); close(fd); }
        execlp("gnuplot", "gnuplot", script, (char *)NULL);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) { set_err(err, errlen, "waitpid: %s", strerror(errno)); return -1; }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
        set_err(err, errlen, "gnuplot not found on PATH (install gnuplot-nox)");
    else
        set_err(err, errlen, "gnuplot failed on %s/%s (see %s/gnuplot.log)", pdir, script, pdir);
    return -1;
}

static int file_nonempty(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

/* Writes and renders every plot; drawn [N_PLOTS] says which exist. Stale files of plots not
 * drawn this time are removed. */
static int plots_render(const char *dir, const rep_results *R, const rep_analysis *A,
                        int *drawn, char *err, size_t errlen) {
    char pdir[4096], path[4200];
    snprintf(pdir, sizeof pdir, "%s/plots", dir);
    if (mkdir(pdir, 0755) != 0 && errno != EEXIST) {
        set_err(err, errlen, "cannot create %s: %s", pdir, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof path, "%s/gnuplot.log", pdir);
    FILE *lf = fopen(path, "w");  /* start a fresh log */
    if (lf) fclose(lf);
    for (int p = 0; p < N_PLOTS; p++) {
        static const char *const ext[] = {"gp", "png", "svg"};
        for (int e = 0; e < 3; e++) {
            snprintf(path, sizeof path, "%s/%s.%s", pdir, plot_name[p], ext[e]);
            unlink(path);
        }
        if (plot_write(pdir, p, R, A, &drawn[p], err, errlen)) return -1;
        if (!drawn[p]) continue;
        if (gnuplot_run(pdir, plot_name[p], err, errlen)) return -1;
        for (int e = 1; e < 3; e++) {
            snprintf(path, sizeof path, "%s/%s.%s", pdir, plot_name[p], ext[e]);
            if (!file_nonempty(path)) {
                set_err(err, errlen, "gnuplot did not write %s (see %s/gnuplot.log)", path, pdir);
                return -1;
            }
        }
    }
    return 0;
}

/* ============================================================================================
 * README.md
 * ========================================================================================== */

static void md_num_or_unknown(FILE *o, double v, const char *unit) {
    if (isnan(v)) fprintf(o, "unknown");
    else fprintf(o, "%.0f%s", v, unit);
}

static void readme_setup(FILE *o, const rep_results *R, const rep_analysis *A) {
    fprintf(o, "## Setup\n\n| | |\n|---|---|\n");
    fprintf(o, "| Model | `%s` — %s, ", R->model_path, R->model_arch);
    md_num_or_unknown(o, R->n_layer, " layers");
    fprintf(o, ", vocabulary ");
    md_num_or_unknown(o, R->n_vocab, "");
    fprintf(o, ", context ");
    md_num_or_unknown(o, R->n_ctx, "");
    fprintf(o, " |\n| Model sha256 | `%s` |\n", R->model_sha);
    const rep_arm *ra = &R->arms[R->ref];
    fprintf(o, "| Reference arm | %s (K %s, V %s) |\n", ra->name, ra->kv_k, ra->kv_v);
    if (R->floor >= 0)
        fprintf(o, "| Noise-floor arm | %s: KL(%s‖fp32) is shown beside every result |\n",
                R->arms[R->floor].name, A->ref_label);
    else
        fprintf(o, "| Noise-floor arm | none (no f32 arm): the noise floor is not measured |\n");
    fprintf(o, "| Depths | ");
    if (R->n_depths == 0) fprintf(o, "unknown");
    for (int i = 0; i < R->n_depths; i++) fprintf(o, "%s%d", i ? ", " : "", R->depths[i]);
    fprintf(o, " |\n| Document | `%s`, ", R->doc_path);
    md_num_or_unknown(o, R->doc_tokens, " tokens");
    fprintf(o, " — %s |\n", R->doc_desc);
    fprintf(o, "| Fork probe | %d greedy tokens per depth and arm (temperature 0), KV truncated "
            "back after each probe |\n", R->fork_n);
    if (R->have_positions)
        fprintf(o, "| Per-position metrics | measured (%zu rows in positions.tsv) |\n", R->n_prows);
    else
        fprintf(o, "| Per-position metrics | not measured (no positions.tsv) |\n");
    fprintf(o, "| Engine | %s |\n| Git | `%s` |\n| Machine | %s |\n| Date | %s |\n", R->engine,
            R->git, R->machine, R->date);
    fprintf(o, "| Wall time | ");
    if (isnan(R->wall)) fprintf(o, "unknown");
    else fprintf(o, "%.1f s", R->wall);
    fprintf(o, " |\n\n");
    fprintf(o, "| Arm | K cache | V cache | KV bytes per token | Role |\n|---|---|---|---:|---|\n");
    for (int i = 0; i < R->n_arms; i++) {
        const rep_arm *a = &R->arms[i];
        fprintf(o, "| %s | %s | %s | ", a->name, a->kv_k, a->kv_v);
        if (isnan(a->kv_bytes)) fprintf(o, "unknown");
        else fprintf(o, "%.0f", a->kv_bytes);
        fprintf(o, " | %s%s%s |\n", arm_role(R, i), a->base >= 0 ? " of " : "",
                a->base >= 0 ? R->arms[a->base].name : "");
    }
    fprintf(o, "\n");
}

static void readme_depth_table(FILE *o, const rep_results *R, const rep_analysis *A, int i) {
    const rep_arm_an *X = &A->a[i];
    const char *lab = X->label, *ref = A->ref_label;
    int exact = depth_labels_collide(R, X);
    char dl[32], kl[32], js[32], fl[32];
    fprintf(o, "### %s (arm %s)\n\n", lab, R->arms[i].name);
    fprintf(o, "| Depth | KL(%s‖%s) | JS | Same top-1 | Fork token (of %d) | Noise floor KL(%s‖fp32) "
            "| NLL %s / %s | Top-2 gap at fork (%s / %s) |\n", lab, ref, R->fork_n, ref, lab, ref,
            lab, ref);
    fprintf(o, "|---:|---:|---:|:---:|---:|---:|---:|---:|\n");
    for (size_t j = 0; j < X->nd; j++) {
        const rep_depth *d = &R->drows[X->d0 + j];
        fmt_depth_in(d->depth, exact, dl, sizeof dl);
        report_fmt_sig2(d->kl_ar, kl, sizeof kl);
        report_fmt_sig2(d->js, js, sizeof js);
        if (isnan(X->floor_kl[j])) snprintf(fl, sizeof fl, "not measured");
        else report_fmt_sig2(X->floor_kl[j], fl, sizeof fl);
        fprintf(o, "| %s | %s | %s | %s | ", dl, kl, js, d->same ? "yes" : "no");
        if (d->censored) fprintf(o, "identical");
        else fprintf(o, "%d", d->fork);
        fprintf(o, " | %s | ", fl);
        if (isnan(d->nll_arm) || isnan(d->nll_ref)) fprintf(o, "n/a");
        else fprintf(o, "%.3f / %.3f", d->nll_arm, d->nll_ref);
        fprintf(o, " | ");
        if (d->censored) fprintf(o, "—");
        else fprintf(o, "%.3f / %.3f", d->fgap_arm, d->fgap_ref);
        fprintf(o, " |\n");
    }
    fprintf(o, "\n");
}

/* One statistics row with a depths column and a positions column. */
static void stat_row(FILE *o, const char *name, const char *dep, const char *pos) {
    fprintf(o, "| %s | %s | %s |\n", name, dep, pos);
}

static void readme_stats(FILE *o, const rep_results *R, const rep_analysis *A, int i) {
    const rep_arm_an *X = &A->a[i];
    const rep_set *D = &X->dep, *P = &X->pos;
    const char *lab = X->label, *ref = A->ref_label;
    int hp = X->np > 0;
    const char *nm = "not measured";
    char name[1024], a[128], b[128];

    if (R->arms[i].is_floor) fprintf(o, "### Noise floor: %s vs %s (arm %s)\n\n", lab, ref, R->arms[i].name);
    else fprintf(o, "### %s vs %s (arm %s)\n\n", lab, ref, R->arms[i].name);
    fprintf(o, "| Statistic | Over depths (n = %zu) | Over positions (n = %zu) |\n|---|---|---|\n",
            D->n, P->n);
    snprintf(name, sizeof name, "Mean KL(%s‖%s)", lab, ref);
    fmt_ci(&D->kl, a, sizeof a); fmt_ci(&P->kl, b, sizeof b);
    stat_row(o, name, a, hp ? b : nm);
    snprintf(name, sizeof name, "Median KL(%s‖%s)", lab, ref);
    fmt_ci(&D->kl_med, a, sizeof a); fmt_ci(&P->kl_med, b, sizeof b);
    stat_row(o, name, a, hp ? b : nm);
    snprintf(name, sizeof name, "Mean KL(%s‖%s)", ref, lab);
    fmt_ci(&D->klr, a, sizeof a); fmt_ci(&P->klr, b, sizeof b);
    stat_row(o, name, a, hp ? b : nm);
    fmt_ci(&D->js, a, sizeof a); fmt_ci(&P->js, b, sizeof b);
    stat_row(o, "Mean JS", a, hp ? b : nm);
    if (!R->arms[i].is_floor) {
        snprintf(name, sizeof name, "Mean noise floor KL(%s‖fp32), same rows", ref);
        if (R->floor < 0 || !D->n_floor) snprintf(a, sizeof a, "%s", nm);
        else report_fmt_sig2(D->floor_mean, a, sizeof a);
        if (!hp || R->floor < 0 || !P->n_floor) snprintf(b, sizeof b, "%s", nm);
        else report_fmt_sig2(P->floor_mean, b, sizeof b);
        stat_row(o, name, a, b);
    }
    fmt_pct_ci(&D->top1, a, sizeof a); fmt_pct_ci(&P->top1, b, sizeof b);
    stat_row(o, "Same top-1 token (Wilson)", a, hp ? b : nm);
    fmt_ci(&D->dnll, a, sizeof a); fmt_ci(&P->dnll, b, sizeof b);
    snprintf(name, sizeof name, "Mean NLL difference %s − %s (nats/token)", lab, ref);
    stat_row(o, name, a, hp ? b : nm);
    if (isnan(D->slope.slope)) snprintf(a, sizeof a, "n/a (fewer than 3 depths)");
    else snprintf(a, sizeof a, "%+.2g [%+.2g, %+.2g]%s", D->slope.slope, D->slope.lo, D->slope.hi,
                  D->slope.n_floored ? " (zeros floored at 1e-12)" : "");
    stat_row(o, "Slope of log10 KL per 1,000 tokens of depth", a, "—");
    fmt_rho(&D->sp_ent, a, sizeof a); fmt_rho(&P->sp_ent, b, sizeof b);
    stat_row(o, "Spearman ρ(KL, reference entropy)", a, hp ? b : nm);
    fmt_rho(&D->sp_gap, a, sizeof a); fmt_rho(&P->sp_gap, b, sizeof b);
    stat_row(o, "Spearman ρ(KL, reference top-2 gap)", a, hp ? b : nm);
    for (int set = 0; set < 2; set++) {
        const rep_set *s = set ? P : D;
        char *dst = set ? b : a;
        char x[32], y[32], z[32];
        fmt_share(s->tie.share_pos_near, x, sizeof x);
        fmt_share(s->tie.share_flips_near, y, sizeof y);
        fmt_share(s->tie.share_kl_near, z, sizeof z);
        snprintf(dst, 128, "%s / %s / %s", x, y, z);
    }
    snprintf(name, sizeof name, "Near ties (reference gap < %.2g): share of rows / of top-1 flips "
             "/ of total KL", REPORT_NEAR_TIE_EPS);
    stat_row(o, name, a, hp ? b : nm);
    const stats_km *k = &D->km;
    if (!k->n_obs) snprintf(a, sizeof a, "n/a");
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
        const rep_set *s = set ? P : D;
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

/* Number of distinct depths in depths.tsv (rows are sorted by arm, then depth). */
static int count_depths(const rep_results *R) {
    int best = 0, n = 0;
    for (size_t k = 0; k < R->n_drows; k++) {
        n = (k && R->drows[k].arm == R->drows[k - 1].arm) ? n + 1 : 1;
        if (n > best) best = n;
    }
    return best;
}

static void readme_write(FILE *o, const rep_results *R, const rep_analysis *A, const int *drawn) {
    const char *ref = A->ref_label;
    fprintf(o, "# strata results: %s\n\n", R->tag);

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
                "is missing or empty.\n\n");

    fprintf(o, "What KV-cache precision does to the next-token distribution and to greedy "
            "continuations, against the %s reference, on %s. Divergences are in nats; "
            "\"fork\" is the first of %d greedily generated tokens at which an arm's stream "
            "differs from the reference's.\n\n", ref, R->model_path, R->fork_n);

    readme_setup(o, R, A);

    if (R->n_warnings) {
        fprintf(o, "## Warnings recorded by the sweep\n\n");
        for (int i = 0; i < R->n_warnings; i++) fprintf(o, "- %s\n", R->warnings[i]);
        fprintf(o, "\n");
    }

    fprintf(o, "## Depth tables\n\nThe original table's columns (KL(arm‖ref) and JS of the "
            "teacher-forced next-token distribution at position depth−1; whether the top-1 token "
            "agrees; the fork token index, or \"identical\" when all %d greedy tokens agree), then "
            "the noise floor KL(%s‖fp32) at the same depth, the NLL of the true next token, and "
            "both arms' top-1/top-2 logit gap at the fork step. Depths of 10,000 or more are in "
            "thousands (15K). KL and JS: 2 significant digits.\n\n", R->fork_n, ref);
    for (int i = 0; i < R->n_arms; i++)
        if (i != R->ref && !R->arms[i].is_floor) readme_depth_table(o, R, A, i);

    int n_rep = 0;
    for (int i = 0; i < R->n_arms; i++) n_rep += R->arms[i].base >= 0;
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

    fprintf(o, "## Statistics\n\n95%% confidence intervals in brackets. Means and medians: "
            "moving-block bootstrap (%d resamples, block length ceil(n^(1/3)) rows in depth or "
            "position order, because neighbouring positions are correlated; mt19937 seed %lu; "
            "percentile interval). Top-1 agreement: Wilson score interval. Slope: least squares "
            "of log10(max(KL, 1e-12)) on depth in thousands of tokens, Student t interval. "
            "Spearman ρ: Fisher z interval with variance 1.06/(n−3). Median fork: Kaplan–Meier "
            "with streams identical for all %d tokens right-censored, Greenwood band. "
            "Percentiles: linear interpolation between order statistics "
            "(gsl_stats_quantile_from_sorted_data). The Wilson and Spearman intervals assume "
            "independent rows, which positions are not: read them as too narrow.\n\n",
            STATS_BOOT_B, (unsigned long)STATS_BOOT_SEED, R->fork_n);
    for (int i = 0; i < R->n_arms; i++)
        if (i != R->ref && !R->arms[i].is_floor && R->arms[i].base < 0) readme_stats(o, R, A, i);
    if (R->floor >= 0) readme_stats(o, R, A, R->floor);

    fprintf(o, "## What the numbers support\n\nDefinitions (k = %.0f, ε = %.2g):\n\n"
            "- *Indistinguishable over depths / positions*: supported when the upper end of the "
            "CI of mean KL(arm‖%s) is at most k × the mean noise floor KL(%s‖fp32) over the same "
            "rows; not supported when the lower end is above it; otherwise inconclusive.\n"
            "- *Within the floor at every depth*: at every depth KL(arm‖%s) ≤ k × KL(%s‖fp32) "
            "at that depth and the arm's fork index is not earlier than the fp32 arm's "
            "(identical counts as %d).\n"
            "- *Grows with depth*: the slope CI of log10 KL per 1,000 tokens is above 0 "
            "(not supported when below 0; inconclusive when it contains 0).\n"
            "- *Top-1 ≥ 99%%*: the Wilson lower bound is ≥ 99%% (not supported when the upper "
            "bound is below 99%%), over positions when measured, else over depths.\n"
            "- *Flips at near ties*: more than half of the top-1 flips are at rows whose "
            "reference top-1/top-2 logit gap is < ε.\n"
            "- *Larger where uncertain*: the Spearman CI of (KL, reference entropy) is above 0.\n\n",
            REPORT_FLOOR_FACTOR, REPORT_NEAR_TIE_EPS, ref, ref, ref, ref, R->fork_n);
    fprintf(o, "| Claim | Verdict | Evidence |\n|---|---|---|\n");
    int n_claims = 0;
    for (int i = 0; i < R->n_arms; i++) {
        if (!is_test_arm(R, i)) continue;
        rep_claim cl[8];
        int nc = arm_claims(R, A, i, cl);
        for (int c = 0; c < nc; c++, n_claims++)
            fprintf(o, "| %s | **%s** | %s |\n", cl[c].claim, verdict_name[cl[c].verdict],
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

    fprintf(o, "## Plots\n\n");
    static const char *const captions[N_PLOTS] = {
        "KL and JS vs depth (log scale); grey: the noise floor KL(ref‖fp32) and the band up to "
        "k × floor",
        "Per-position KL with a rolling median",
        "KL vs the reference distribution's entropy",
        "Fork survival: share of depths whose greedy streams have not yet forked (Kaplan–Meier, "
        "95% Greenwood band)"};
    for (int p = 0; p < N_PLOTS; p++) {
        if (drawn[p])
            fprintf(o, "%s ([SVG](plots/%s.svg), [script](plots/%s.gp)):\n\n![%s](plots/%s.png)\n\n",
                    captions[p], plot_name[p], plot_name[p], captions[p], plot_name[p]);
        else
            fprintf(o, "%s: %s.\n\n", captions[p],
                    p == PLOT_POSITIONS && !R->have_positions ? "not measured (no positions.tsv)"
                    : "not drawn (no positive values to put on a log axis, or no arm)");
    }

    fprintf(o, "## Limitations\n\n");
    fprintf(o, "- One document and one model: the numbers describe this text at these depths, "
            "not KV precision in general.\n");
    fprintf(o, "- %d depths: depth-level CIs rest on few rows; the slope CI assumes "
            "independent residuals.\n", count_depths(R));
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
    fprintf(o, "- Log-probabilities: z = logit − max in f32, log-sum-exp in double (DESIGN §3); "
            "KL values below ~1e-7 carry rounding of order 1e-6 relative or more.\n\n");

    fprintf(o, "## Reproduce\n\n```sh\n%s\n```\n\nRe-render this folder from its TSV/JSON files "
            "(no model needed): `strata-driver report <this folder>`.\n\n", R->command);

    fprintf(o, "## Provenance\n\n");
    fprintf(o, "- Raw data: `meta.json`, `depths.tsv` (%zu rows), `forks.tsv` (%zu rows), ",
            R->n_drows, R->n_frows);
    if (R->have_positions) fprintf(o, "`positions.tsv` (%zu rows).\n", R->n_prows);
    else fprintf(o, "no `positions.tsv`.\n");
    fprintf(o, "- Derived (generated, do not edit): `README.md`, `summary.json` (every statistic "
            "above, machine-readable), `plots/*.gp` (one gnuplot script per plot, with its "
            "`.dat` files), `plots/*.png`, `plots/*.svg`.\n");
    fprintf(o, "- Engine %s, git `%s`, model sha256 `%s`, run on %s, %s.\n", R->engine, R->git,
            R->model_sha, R->machine, R->date);
}

/* ============================================================================================
 * report_render, report_compare
 * ========================================================================================== */

/* Writes path via path.tmp + rename, so a reader never sees half a file. */
static int write_readme(const char *dir, const rep_results *R, const rep_analysis *A,
                        const int *drawn, char *err, size_t errlen) {
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/README.md", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *o = fopen(tmp, "w");
    if (!o) {
        set_err(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
        return -1;
    }
    readme_write(o, R, A, drawn);
    int bad = ferror(o);
    if (fclose(o) != 0 || bad || rename(tmp, path) != 0) {
        set_err(err, errlen, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

static int write_summary(const char *dir, const rep_results *R, const rep_analysis *A, char *err,
                         size_t errlen) {
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    json_t *root = summary_build(R, A);
    if (!root) {
        set_err(err, errlen, "out of memory building summary.json");
        return -1;
    }
    int rc = json_dump_file(root, tmp, JSON_INDENT(2) | JSON_PRESERVE_ORDER |
                                           JSON_REAL_PRECISION(12) | JSON_ENSURE_ASCII);
    json_decref(root);
    if (rc != 0 || rename(tmp, path) != 0) {
        set_err(err, errlen, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int report_render(const char *dir, char *err, size_t errlen) {
    rep_results R;
    rep_analysis A = {0};
    int drawn[N_PLOTS] = {0};
    int rc = -1;
    if (!dir) { set_err(err, errlen, "no results directory"); return -1; }
    if (results_load(dir, &R, err, errlen)) goto done;
    if (analysis_run(&R, &A, err, errlen)) goto done;
    if (plots_render(dir, &R, &A, drawn, err, errlen)) goto done;
    if (write_summary(dir, &R, &A, err, errlen)) goto done;
    if (write_readme(dir, &R, &A, drawn, err, errlen)) goto done;
    rc = 0;
done:
    analysis_free(&A, R.n_arms);
    results_free(&R);
    return rc;
}

/* One comparison row: a statistic formatted for each dir. */
static void cmp_row(FILE *o, const char *name, const char *a, const char *b) {
    fprintf(o, "| %s | %s | %s |%s\n", name, a, b, strcmp(a, b) ? "" : " ");
}

static void cmp_setup(FILE *o, const char *name, const char *a, const char *b) {
    fprintf(o, "| %s | %s | %s | %s |\n", name, a, b, strcmp(a, b) ? "**differs**" : "same");
}

static void fork_median_text(const stats_km *k, int fork_n, char *buf, size_t len) {
    if (!k->n_obs) snprintf(buf, len, "n/a");
    else if (isnan(k->median)) snprintf(buf, len, "not reached (S(%d) = %.2f)", fork_n, k->surv_end);
    else snprintf(buf, len, "%.0f", k->median);
}

int report_compare(const char *dir1, const char *dir2, FILE *out, char *err, size_t errlen) {
    rep_results R[2];
    rep_analysis A[2] = {{0}, {0}};
    const char *dirs[2] = {dir1, dir2};
    int rc = -1, loaded = 0;
    memset(R, 0, sizeof R);
    if (!dir1 || !dir2 || !out) { set_err(err, errlen, "compare needs two dirs and an output"); return -1; }
    for (int k = 0; k < 2; k++) {
        if (results_load(dirs[k], &R[k], err, errlen)) goto done;
        loaded = k + 1;
        if (analysis_run(&R[k], &A[k], err, errlen)) goto done;
    }
    char a[160], b[160];
    fprintf(out, "# strata comparison: %s vs %s\n\n", R[0].tag, R[1].tag);
    fprintf(out, "| | (1) `%s` | (2) `%s` | |\n|---|---|---|---|\n", dir1, dir2);
    cmp_setup(out, "Tag", R[0].tag, R[1].tag);
    cmp_setup(out, "Model", R[0].model_path, R[1].model_path);
    cmp_setup(out, "Model sha256", R[0].model_sha, R[1].model_sha);
    cmp_setup(out, "Document", R[0].doc_path, R[1].doc_path);
    cmp_setup(out, "Engine", R[0].engine, R[1].engine);
    cmp_setup(out, "Git", R[0].git, R[1].git);
    cmp_setup(out, "Machine", R[0].machine, R[1].machine);
    cmp_setup(out, "Date", R[0].date, R[1].date);
    cmp_setup(out, "Reference arm", R[0].arms[R[0].ref].name, R[1].arms[R[1].ref].name);
    snprintf(a, sizeof a, "%d", R[0].fork_n);
    snprintf(b, sizeof b, "%d", R[1].fork_n);
    cmp_setup(out, "Fork tokens", a, b);
    snprintf(a, sizeof a, "%d", count_depths(&R[0]));
    snprintf(b, sizeof b, "%d", count_depths(&R[1]));
    cmp_setup(out, "Depths", a, b);
    cmp_setup(out, "Per-position metrics", R[0].have_positions ? "measured" : "not measured",
              R[1].have_positions ? "measured" : "not measured");
    fprintf(out, "\n");

    for (int i = 0; i < R[0].n_arms; i++) {
        int j = find_arm(&R[1], R[0].arms[i].name);
        if (i == R[0].ref || j < 0 || j == R[1].ref) continue;
        const rep_arm_an *X = &A[0].a[i], *Y = &A[1].a[j];
        fprintf(out, "## Arm %s: %s (1) vs %s (2)\n\n| Statistic | (1) | (2) |\n|---|---|---|\n",
                R[0].arms[i].name, X->label, Y->label);
        fmt_ci(&X->dep.kl, a, sizeof a); fmt_ci(&Y->dep.kl, b, sizeof b);
        cmp_row(out, "Mean KL(arm‖ref) over depths", a, b);
        fmt_ci(&X->dep.kl_med, a, sizeof a); fmt_ci(&Y->dep.kl_med, b, sizeof b);
        cmp_row(out, "Median KL over depths", a, b);
        fmt_ci(&X->dep.js, a, sizeof a); fmt_ci(&Y->dep.js, b, sizeof b);
        cmp_row(out, "Mean JS over depths", a, b);
        report_fmt_sig2(X->dep.floor_mean, a, sizeof a); report_fmt_sig2(Y->dep.floor_mean, b, sizeof b);
        cmp_row(out, "Mean noise floor over depths", a, b);
        fmt_pct_ci(&X->dep.top1, a, sizeof a); fmt_pct_ci(&Y->dep.top1, b, sizeof b);
        cmp_row(out, "Same top-1 over depths", a, b);
        if (X->np) fmt_ci(&X->pos.kl, a, sizeof a); else snprintf(a, sizeof a, "not measured");
        if (Y->np) fmt_ci(&Y->pos.kl, b, sizeof b); else snprintf(b, sizeof b, "not measured");
        cmp_row(out, "Mean KL(arm‖ref) over positions", a, b);
        if (X->np) fmt_pct_ci(&X->pos.top1, a, sizeof a); else snprintf(a, sizeof a, "not measured");
        if (Y->np) fmt_pct_ci(&Y->pos.top1, b, sizeof b); else snprintf(b, sizeof b, "not measured");
        cmp_row(out, "Same top-1 over positions", a, b);
        const stats_fit *f = &X->dep.slope, *g = &Y->dep.slope;
        if (isnan(f->slope)) snprintf(a, sizeof a, "n/a");
        else snprintf(a, sizeof a, "%+.2g [%+.2g, %+.2g]", f->slope, f->lo, f->hi);
        if (isnan(g->slope)) snprintf(b, sizeof b, "n/a");
        else snprintf(b, sizeof b, "%+.2g [%+.2g, %+.2g]", g->slope, g->lo, g->hi);
        cmp_row(out, "Slope of log10 KL per 1,000 tokens", a, b);
        fork_median_text(&X->dep.km, R[0].fork_n, a, sizeof a);
        fork_median_text(&Y->dep.km, R[1].fork_n, b, sizeof b);
        cmp_row(out, "Median fork token", a, b);
        if (X->repeat >= 0 || Y->repeat >= 0)
            cmp_row(out, "Repeat check", X->repeat < 0 ? "—" : X->repeat ? "bit-identical" : "NOT identical",
                    Y->repeat < 0 ? "—" : Y->repeat ? "bit-identical" : "NOT identical");
        fprintf(out, "\n| Depth | KL (1) | KL (2) | (2) / (1) | Fork (1) | Fork (2) |\n"
                "|---:|---:|---:|---:|---:|---:|\n");
        int shown = 0;
        for (size_t k = 0; k < X->nd; k++) {
            const rep_depth *d = &R[0].drows[X->d0 + k];
            const rep_depth *e = find_depth(&R[1], j, d->depth);
            if (!e) continue;
            char dl[32], k1[32], k2[32], ra[32], f1[32], f2[32];
            report_fmt_depth(d->depth, dl, sizeof dl);
            report_fmt_sig2(d->kl_ar, k1, sizeof k1);
            report_fmt_sig2(e->kl_ar, k2, sizeof k2);
            if (d->kl_ar > 0) report_fmt_sig2(e->kl_ar / d->kl_ar, ra, sizeof ra);
            else snprintf(ra, sizeof ra, "—");
            if (d->censored) snprintf(f1, sizeof f1, "identical"); else snprintf(f1, sizeof f1, "%d", d->fork);
            if (e->censored) snprintf(f2, sizeof f2, "identical"); else snprintf(f2, sizeof f2, "%d", e->fork);
            fprintf(out, "| %s | %s | %s | %s | %s | %s |\n", dl, k1, k2, ra, f1, f2);
            shown++;
        }
        if (!shown) fprintf(out, "| (no common depths) ||||||\n");
        fprintf(out, "\n");
    }
    for (int k = 0; k < 2; k++) {
        int any = 0;
        for (int i = 0; i < R[k].n_arms; i++) {
            if (i == R[k].ref || find_arm(&R[1 - k], R[k].arms[i].name) >= 0) continue;
            fprintf(out, "%s%s", any ? ", " : (k ? "Arms only in (2): " : "Arms only in (1): "),
                    R[k].arms[i].name);
            any = 1;
        }
        if (any) fprintf(out, "\n\n");
    }
    rc = ferror(out) ? -1 : 0;
    if (rc) set_err(err, errlen, "write error on the comparison output");
done:
    for (int k = 0; k < 2; k++) {
        if (k < loaded || A[k].a) analysis_free(&A[k], R[k].n_arms);
        results_free(&R[k]);
    }
    return rc;
}
