/* report_tsv.c — the raw files of a results folder: the TSV row writers the sweep uses, and
 * loading meta.json + depths.tsv / positions.tsv / forks.tsv back into a report_results
 * (checked line by line and against each other; see report.h for the formats).
 *
 * Reading order: names and numbers; writers; loading meta.json; TSV parsing;
 * report_results_load; lookups. */
#include "driver/report/report_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <jansson.h>

#include "driver/journal.h"

/* ============================================================================================
 * Numbers
 * ========================================================================================== */


/* ============================================================================================
 * Writers
 * ========================================================================================== */

static FILE *tsv_open(const char *dir, const char *name, const char *header, char *err,
                      size_t errlen) {
    char path[4096];
    if (report_path(path, sizeof path, dir, name, err, errlen)) return NULL;
    /* never written through a link planted at the name (O_NOFOLLOW) */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        errmsg_set(err, errlen, -1, "cannot create %s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    if (fprintf(f, "%s\n", header) < 0) {
        errmsg_set(err, errlen, -1, "cannot write %s: %s", path, strerror(errno));
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
FILE *report_tsv_open_cross(const char *dir, char *err, size_t errlen) {
    return tsv_open(dir, "cross.tsv", REPORT_CROSS_HEADER, err, errlen);
}
FILE *report_tsv_open_samples(const char *dir, char *err, size_t errlen) {
    return tsv_open(dir, "samples.tsv", REPORT_SAMPLES_HEADER, err, errlen);
}
FILE *report_tsv_open_cross_samples(const char *dir, char *err, size_t errlen) {
    return tsv_open(dir, "cross_samples.tsv", REPORT_CROSS_SAMPLES_HEADER, err, errlen);
}

int report_tsv_depth_row(FILE *f, int depth, const char *arm, const stats_row *r, int fork,
                         int censored, double fork_gap_arm, double fork_gap_ref) {
    if (!f || !r || !arm_valid_name(arm)) return -1;
    int rc = fprintf(f, "%d\t%s", depth, arm) < 0;
    rc |= stats_tsv_num(f, r->kl_arm_ref) | stats_tsv_num(f, r->kl_ref_arm) | stats_tsv_num(f, r->js);
    rc |= fprintf(f, "\t%d\t%d\t%d", r->top1_arm == r->top1_ref, r->top1_arm, r->top1_ref) < 0;
    rc |= stats_tsv_num(f, r->nll_arm) | stats_tsv_num(f, r->nll_ref) | stats_tsv_num(f, r->entropy_ref);
    rc |= stats_tsv_num(f, r->gap_ref) | stats_tsv_num(f, r->gap_arm);
    rc |= fprintf(f, "\t%d\t%d", fork, censored ? 1 : 0) < 0;
    rc |= stats_tsv_num(f, censored ? NAN : fork_gap_arm) | stats_tsv_num(f, censored ? NAN : fork_gap_ref);
    rc |= fputc('\n', f) == EOF;
    return rc ? -1 : 0;
}

int report_tsv_position_row(FILE *f, int pos, const char *arm, const stats_row *r) {
    if (!f || !r || !arm_valid_name(arm)) return -1;
    int rc = fprintf(f, "%d\t%s", pos, arm) < 0;
    rc |= stats_position_cols(f, r);
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
    if (!f || !arm_valid_name(arm) || n_arm < 0 || n_ref < 0 || (n_arm && !tok_arm) || (n_ref && !tok_ref))
        return -1;
    int rc = fprintf(f, "%d\t%s\t%d\t%d", depth, arm, fork, censored ? 1 : 0) < 0;
    rc |= put_tokens(f, tok_arm, n_arm) | put_tokens(f, tok_ref, n_ref);
    rc |= fputc('\n', f) == EOF;
    return rc ? -1 : 0;
}

/* cross.tsv's columns after depth and arm (also cross_samples.tsv's after its temperature). */
static int put_cross(FILE *f, const report_cross_vals *v) {
    int rc = fprintf(f, "\t%d\t%d\t%d", v->fork, v->censored ? 1 : 0, v->n) < 0;
    rc |= stats_tsv_num(f, v->ref_nll_arm_text) | stats_tsv_num(f, v->ref_nll_ref_text);
    rc |= stats_tsv_num(f, v->f32_nll_arm_text) | stats_tsv_num(f, v->f32_nll_ref_text);
    rc |= stats_tsv_num(f, v->rep_arm) | stats_tsv_num(f, v->rep_ref);
    rc |= fputc('\n', f) == EOF;
    return rc ? -1 : 0;
}

int report_tsv_cross_row(FILE *f, int depth, const char *arm, const report_cross_vals *v) {
    if (!f || !v || !arm_valid_name(arm)) return -1;
    int rc = fprintf(f, "%d\t%s", depth, arm) < 0;
    return rc || put_cross(f, v) ? -1 : 0;
}

int report_tsv_cross_sample_row(FILE *f, int depth, const char *arm, double temperature, const report_cross_vals *v) {
    if (!f || !v || !arm_valid_name(arm)) return -1;
    int rc = fprintf(f, "%d\t%s", depth, arm) < 0;
    rc |= stats_tsv_num(f, temperature);
    return rc || put_cross(f, v) ? -1 : 0;
}

int report_tsv_sample_row(FILE *f, int depth, const char *arm, double temperature, double top_p,
                          uint64_t seed, int fork, int censored, const int32_t *tok_arm,
                          const int32_t *tok_ref, int n) {
    if (!f || !arm_valid_name(arm) || n < 0 || (n && (!tok_arm || !tok_ref))) return -1;
    int rc = fprintf(f, "%d\t%s", depth, arm) < 0;
    rc |= stats_tsv_num(f, temperature) | stats_tsv_num(f, top_p);
    rc |= fprintf(f, "\t%llu\t%d\t%d", (unsigned long long)seed, fork, censored ? 1 : 0) < 0;
    rc |= put_tokens(f, tok_arm, n) | put_tokens(f, tok_ref, n);
    rc |= fputc('\n', f) == EOF;
    return rc ? -1 : 0;
}

/* ============================================================================================
 * Loading: meta.json and the TSVs into report_results
 * ========================================================================================== */

void report_results_free(report_results *R) {
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

int report_find_arm(const report_results *R, const char *name) {
    for (int i = 0; i < R->n_arms; i++)
        if (strcmp(R->arms[i].name, name) == 0) return i;
    return -1;
}

/* Adds a reason the folder is incomplete (report_results.reasons). */
static void add_reason(report_results *R, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_reason(report_results *R, const char *fmt, ...) {
    if (R->n_reasons == REPORT_MAX_REASONS) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(R->reasons[R->n_reasons++], sizeof R->reasons[0], fmt, ap);
    va_end(ap);
}

/* The steps of load_meta below read one part of meta.json (m, read from path) into R; the ones that
 * can fail return 0, or -1 with the message in err [errlen]. The strings stay in R->meta. */

/* Where the run came from: tag, date, command, git, engine, machine, model, document, wall time. */
static void meta_provenance(report_results *R, json_t *m) {
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
}

/* arms[i] (a) into R->arms[i]: its name (unique) and formats, KV bytes, device, routing and batch
 * variance counts, and a weight arm's model file. */
static int meta_arm(report_results *R, int i, json_t *a, const char *path, char *err, size_t errlen) {
    const char *name = jstr(a, "name"), *k = jstr(a, "kv_k"), *v = jstr(a, "kv_v");
    if (!json_is_object(a) || !arm_valid_name(name) || !arm_valid_name(k) || !arm_valid_name(v)) {
        return errmsg_set(err, errlen, -1, "%s: arms[%d] needs \"name\", \"kv_k\", \"kv_v\" (1..63 "
                          "printable characters, no spaces, quotes, '|' or ',')", path, i);
    }
    if (report_find_arm(R, name) >= 0) {
        return errmsg_set(err, errlen, -1, "%s: arm name \"%s\" appears twice", path, name);
    }
    report_arm *A = &R->arms[i];
    snprintf(A->name, sizeof A->name, "%s", name);
    snprintf(A->kv_k, sizeof A->kv_k, "%s", k);
    snprintf(A->kv_v, sizeof A->kv_v, "%s", v);
    A->kv_bytes = jnum(a, "kv_bytes_per_token");
    A->base = -1;
    A->weight_arm = json_is_true(json_object_get(a, "weight_arm"));
    const char *dv = json_string_value(json_object_get(a, "device"));
    if (dv) snprintf(A->device, sizeof A->device, "%s", dv);
    json_t *rt = json_object_get(a, "routing");   /* MoE only */
    A->route_n = json_is_object(rt) ? jnum(rt, "decisions") : NAN;
    A->route_diff = json_is_object(rt) ? jnum(rt, "differ") : NAN;
    json_t *bv = json_object_get(a, "batch_variance");   /* llama.cpp arms only */
    A->bv_rows = json_is_object(bv) ? jnum(bv, "rows") : NAN;
    A->bv_max = json_is_object(bv) ? jnum(bv, "max_abs_logit") : NAN;
    const char *mp = json_string_value(json_object_get(json_object_get(a, "model"), "path"));
    if (A->weight_arm && mp) {
        const char *sl = strrchr(mp, '/');
        snprintf(A->model_file, sizeof A->model_file, "%s", sl ? sl + 1 : mp);
    }
    return 0;
}

/* The arms, then the roles among them: the reference, the repeats (NAME#k repeats NAME when NAME is
 * an arm) and the noise floor (the first non-reference, non-repeat arm with f32 K and V). */
static int meta_arms(report_results *R, json_t *m, const char *path, char *err, size_t errlen) {
    json_t *arms = json_object_get(m, "arms");
    if (!json_is_array(arms) || json_array_size(arms) == 0 || json_array_size(arms) > 1000) {
        return errmsg_set(err, errlen, -1, "%s: \"arms\" must be a non-empty array", path);
    }
    R->n_arms = (int)json_array_size(arms);
    R->arms = calloc((size_t)R->n_arms, sizeof *R->arms);
    if (!R->arms) return errmsg_set(err, errlen, -1, "out of memory");
    for (int i = 0; i < R->n_arms; i++)
        if (meta_arm(R, i, json_array_get(arms, (size_t)i), path, err, errlen)) return -1;
    const char *ref = jstr(m, "ref");
    R->ref = report_find_arm(R, ref);
    if (R->ref < 0) {
        return errmsg_set(err, errlen, -1, "%s: \"ref\" (\"%s\") is not one of the arms", path, ref);
    }
    R->arms[R->ref].is_ref = 1;
    for (int i = 0; i < R->n_arms; i++) {
        char base[ARM_NAME_MAX];
        snprintf(base, sizeof base, "%s", R->arms[i].name);
        char *hash = strchr(base, '#');
        if (!hash) continue;
        *hash = 0;
        R->arms[i].base = report_find_arm(R, base);
    }
    R->floor = -1;
    for (int i = 0; i < R->n_arms; i++) {
        report_arm *A = &R->arms[i];
        if (!A->is_ref && A->base < 0 && !strcmp(A->kv_k, "f32") && !strcmp(A->kv_v, "f32")) {
            A->is_floor = 1;
            R->floor = i;
            break;
        }
    }
    return 0;
}

/* The planned depths (integers) and the sweep's warnings (the strings among them). */
static int meta_lists(report_results *R, json_t *m, const char *path, char *err, size_t errlen) {
    json_t *dep = json_object_get(m, "depths");
    if (json_is_array(dep) && json_array_size(dep) > 0) {
        R->n_depths = (int)json_array_size(dep);
        R->depths = calloc((size_t)R->n_depths, sizeof *R->depths);
        if (!R->depths) return errmsg_set(err, errlen, -1, "out of memory");
        for (int i = 0; i < R->n_depths; i++) {
            json_t *d = json_array_get(dep, (size_t)i);
            if (!json_is_integer(d)) {
                return errmsg_set(err, errlen, -1, "%s: depths[%d] is not an integer", path, i);
            }
            R->depths[i] = (int)json_integer_value(d);
        }
    }
    json_t *w = json_object_get(m, "warnings");
    if (json_is_array(w) && json_array_size(w) > 0) {
        R->warnings = calloc(json_array_size(w), sizeof *R->warnings);
        if (!R->warnings) return errmsg_set(err, errlen, -1, "out of memory");
        for (size_t i = 0; i < json_array_size(w); i++) {
            json_t *s = json_array_get(w, i);
            if (json_is_string(s)) R->warnings[R->n_warnings++] = json_string_value(s);
        }
    }
    return 0;
}

static int load_meta(const char *dir, report_results *R, char *err, size_t errlen) {
    char path[4096];
    if (report_path(path, sizeof path, dir, "meta.json", err, errlen)) return -1;
    R->meta = report_json_load(path, err, errlen);   /* bounded; control bytes escaped */
    if (!R->meta) return -1;
    json_t *m = R->meta;
    if (!json_is_object(m)) {
        return errmsg_set(err, errlen, -1, "%s: top level is not a JSON object", path);
    }
    meta_provenance(R, m);
    json_t *pp = json_object_get(m, "per_position");
    R->per_position = json_is_boolean(pp) ? json_is_true(pp) : -1;
    json_t *fn = json_object_get(m, "fork_n");
    if (!json_is_integer(fn) || json_integer_value(fn) < 1 || json_integer_value(fn) > 1000000) {
        return errmsg_set(err, errlen, -1, "%s: \"fork_n\" must be an integer >= 1", path);
    }
    R->fork_n = (int)json_integer_value(fn);
    json_t *pe = json_object_get(m, "pin_experts");
    R->pin_experts = json_is_boolean(pe) ? json_is_true(pe) : -1;
    return meta_arms(R, m, path, err, errlen) || meta_lists(R, m, path, err, errlen) ? -1 : 0;
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
        return errmsg_set(c->err, c->errlen, -1, "%s:%ld: column %s: \"%s\" is not an integer in [%ld, %ld]",
                          c->path, c->line, col, s, lo, hi);
    }
    *out = (int)v;
    return 0;
}

/* finite = 1: NaN/inf rejected; else "nan" is accepted (unknown). */
static int parse_num(tsv_ctx *c, const char *s, const char *col, int finite, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (*s == 0 || *end != 0 || isinf(v) || (finite && isnan(v))) {
        return errmsg_set(c->err, c->errlen, -1, "%s:%ld: column %s: \"%s\" is not a %snumber", c->path,
                          c->line, col, s, finite ? "finite " : "");
    }
    *out = v;
    return 0;
}

static int parse_arm(tsv_ctx *c, const report_results *R, const char *s, int *out) {
    int a = report_find_arm(R, s);
    if (a < 0) {
        return errmsg_set(c->err, c->errlen, -1, "%s:%ld: arm \"%s\" is not in meta.json", c->path,
                          c->line, s);
    }
    if (a == R->ref) {
        return errmsg_set(c->err, c->errlen, -1, "%s:%ld: rows are for non-reference arms; \"%s\" is the "
                          "reference", c->path, c->line, s);
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
    if (!t) return errmsg_set(c->err, c->errlen, -1, "out of memory");
    const char *p = s;
    for (size_t i = 0; i < cap; i++) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end != ',' && *end != 0)) {
            errmsg_set(c->err, c->errlen, -1, "%s:%ld: column %s: bad token list near \"%.20s\"",
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

/* A row is censored exactly when its streams agreed for all fork_n tokens (fork == fork_n). */
static int check_censored(tsv_ctx *c, int fork, int censored, int fork_n) {
    if (censored == (fork == fork_n)) return 0;
    return errmsg_set(c->err, c->errlen, -1, "%s:%ld: fork = %d with censored = %d (fork_n = %d: censored "
                      "iff fork == fork_n)", c->path, c->line, fork, censored, fork_n);
}

static int parse_depth_line(tsv_ctx *c, report_results *R, char **f, report_depth *d) {
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
        return errmsg_set(c->err, c->errlen, -1, "%s:%ld: same_top1 = %d but top1_arm = %d, top1_ref = %d",
                          c->path, c->line, d->same, d->top1_arm, d->top1_ref);
    }
    return check_censored(c, d->fork, d->censored, fork_n);
}

static int parse_pos_line(tsv_ctx *c, report_results *R, char **f, report_pos *p) {
    return parse_int(c, f[0], "pos", 0, INT32_MAX, &p->pos) || parse_arm(c, R, f[1], &p->arm) ||
           parse_num(c, f[2], "kl_arm_ref", 1, &p->kl_ar) || parse_num(c, f[3], "kl_ref_arm", 1, &p->kl_ra) ||
           parse_num(c, f[4], "js", 1, &p->js) || parse_int(c, f[5], "same_top1", 0, 1, &p->same) ||
           parse_num(c, f[6], "nll_arm", 0, &p->nll_arm) || parse_num(c, f[7], "nll_ref", 0, &p->nll_ref) ||
           parse_num(c, f[8], "entropy_ref", 0, &p->ent) || parse_num(c, f[9], "gap_ref", 0, &p->gap_ref)
               ? -1 : 0;
}

static int parse_fork_line(tsv_ctx *c, report_results *R, char **f, report_fork *k) {
    if (parse_int(c, f[0], "depth", 1, INT32_MAX, &k->depth) || parse_arm(c, R, f[1], &k->arm) ||
        parse_int(c, f[2], "fork", 0, R->fork_n, &k->fork) ||
        parse_int(c, f[3], "censored", 0, 1, &k->censored) ||
        parse_tokens(c, f[4], "tokens_arm", &k->tok_arm, &k->n_arm) ||
        parse_tokens(c, f[5], "tokens_ref", &k->tok_ref, &k->n_ref))
        return -1;
    if (check_censored(c, k->fork, k->censored, R->fork_n)) return -1;
    /* with both full streams present the fork index is determined by them */
    if (k->n_arm == R->fork_n && k->n_ref == R->fork_n) {
        int first = R->fork_n;
        for (int i = 0; i < R->fork_n; i++)
            if (k->tok_arm[i] != k->tok_ref[i]) { first = i; break; }
        if (first != k->fork) {
            return errmsg_set(c->err, c->errlen, -1, "%s:%ld: fork = %d but the token streams first "
                              "differ at %d", c->path, c->line, k->fork, first);
        }
    }
    return 0;
}

/* Reads DIR/name of the given kind into R. Returns 0, 1 when the file does not exist and
 * optional is set, or -1 with err. */
static int load_tsv(const char *dir, const char *name, int kind, int optional, report_results *R,
                    char *err, size_t errlen) {
    static const char *const headers[] = {REPORT_DEPTHS_HEADER, REPORT_POSITIONS_HEADER,
                                          REPORT_FORKS_HEADER};
    static const int nfields[] = {17, 10, 6};
    char path[4096];
    if (report_path(path, sizeof path, dir, name, err, errlen)) return -1;
    int absent = 0;
    FILE *fp = report_open_read(path, optional, &absent, err, errlen);   /* regular, not a link */
    if (!fp) return absent ? 1 : -1;
    int rc = -1;
    char *line = NULL;
    size_t linecap = 0, cap = 0;
    tsv_ctx c = {path, 0, err, errlen};
    ssize_t len;
    while ((len = report_getline(&line, &linecap, fp, path, c.line + 1, err, errlen)) >= 0) {
        c.line++;
        /* the sweep ends every line with a newline: a last line without one was cut short by
         * a crash or a full disk (the header is kept when it is whole nonetheless) */
        if (len > 0 && line[len - 1] != '\n' && !(c.line == 1 && !strcmp(line, headers[kind]))) {
            add_reason(R, "%s ends in an incomplete line (line %ld, %zd bytes: written when the sweep "
                       "stopped), dropped", name, c.line, len);
            break;
        }
        if ((size_t)len != strlen(line)) {
            errmsg_set(err, errlen, -1, "%s:%ld: NUL byte in line", path, c.line);
            goto done;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (c.line == 1) {
            if (strcmp(line, headers[kind]) != 0) {
                errmsg_set(err, errlen, -1, "%s:1: header is not the expected \"%s\"", path,
                           headers[kind]);
                goto done;
            }
            continue;
        }
        if (len == 0) continue;  /* blank line */
        char *f[MAX_FIELDS];
        int nf = split_tabs(line, f);
        if (nf != nfields[kind]) {
            errmsg_set(err, errlen, -1, "%s:%ld: expected %d tab-separated fields, found %s%d", path,
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
            report_fork *k = &R->frows[R->n_frows];
            memset(k, 0, sizeof *k);
            if (parse_fork_line(&c, R, f, k)) {
                free(k->tok_arm);
                free(k->tok_ref);
                goto done;
            }
            R->n_frows++;
        }
    }
    if (len == -2) goto done;   /* a line over REPORT_LINE_MAX: err says so */
    if (ferror(fp)) {
        errmsg_set(err, errlen, -1, "%s: read error: %s", path, strerror(errno));
        goto done;
    }
    if (c.line == 0) {
        errmsg_set(err, errlen, -1, "%s: empty file (no header line)", path);
        goto done;
    }
    rc = 0;
    goto done;
oom:
    errmsg_set(err, errlen, -1, "out of memory reading %s", path);
done:
    free(line);
    fclose(fp);
    return rc;
}

/* The order of every row kind: by arm, then by depth or position. */
static int cmp_arm_key(int arm_x, int key_x, int arm_y, int key_y) {
    if (arm_x != arm_y) return arm_x < arm_y ? -1 : 1;
    return (key_x > key_y) - (key_x < key_y);
}
static int cmp_depth_row(const void *a, const void *b) {
    const report_depth *x = a, *y = b;
    return cmp_arm_key(x->arm, x->depth, y->arm, y->depth);
}
static int cmp_pos_row(const void *a, const void *b) {
    const report_pos *x = a, *y = b;
    return cmp_arm_key(x->arm, x->pos, y->arm, y->pos);
}
static int cmp_fork_row(const void *a, const void *b) {
    const report_fork *x = a, *y = b;
    return cmp_arm_key(x->arm, x->depth, y->arm, y->depth);
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static const report_fork *find_fork(const report_results *R, int arm, int depth) {
    report_fork key;
    key.arm = arm;
    key.depth = depth;
    if (!R->n_frows) return NULL;
    return bsearch(&key, R->frows, R->n_frows, sizeof *R->frows, cmp_fork_row);
}

/* Which depths the folder completed (sorted rows in R): the planned depths (meta.json's, else
 * those in depths.tsv) in order, up to the first that lacks a depth or fork row for some arm.
 * Rows of other depths, and positions at or past the last complete depth (they belong to an
 * unfinished one), are removed from R; every finding becomes a reason. Returns 0 or -1 (memory). */
static int check_complete(const char *dir, report_results *R, char *err, size_t errlen) {
    int *plan = NULL, n_plan = 0, ret = -1;
    if (R->n_depths > 0) {
        plan = malloc((size_t)R->n_depths * sizeof *plan);
        if (!plan) goto oom;
        memcpy(plan, R->depths, (size_t)R->n_depths * sizeof *plan);
        n_plan = R->n_depths;
    } else {
        plan = malloc((R->n_drows + 1) * sizeof *plan);
        if (!plan) goto oom;
        for (size_t i = 0; i < R->n_drows; i++) plan[n_plan++] = R->drows[i].depth;
        qsort(plan, (size_t)n_plan, sizeof *plan, cmp_int);
        int u = 0;
        for (int i = 0; i < n_plan; i++)
            if (!u || plan[u - 1] != plan[i]) plan[u++] = plan[i];
        n_plan = u;
    }
    int done = 0;
    for (; done < n_plan; done++) {
        int whole = 1;
        for (int a = 0; a < R->n_arms && whole; a++)
            if (a != R->ref && (!report_find_depth(R, a, plan[done]) || !find_fork(R, a, plan[done]))) whole = 0;
        if (!whole) break;
    }
    R->depths_planned = n_plan;
    R->depths_measured = done;
    R->last_depth = done ? plan[done - 1] : 0;
    if (done < n_plan)
        add_reason(R, "%d depth%s planned, rows for every arm at the first %d (the sweep did not reach depth %d)",
                   n_plan, n_plan == 1 ? "" : "s", done, plan[done]);
    /* keep the rows of complete depths only (plan[0..done) sorted for the lookups) */
    qsort(plan, (size_t)done, sizeof *plan, cmp_int);
    size_t kd = 0, kf = 0, kp = 0;
    for (size_t i = 0; i < R->n_drows; i++)
        if (bsearch(&R->drows[i].depth, plan, (size_t)done, sizeof *plan, cmp_int)) R->drows[kd++] = R->drows[i];
    for (size_t i = 0; i < R->n_frows; i++) {
        if (bsearch(&R->frows[i].depth, plan, (size_t)done, sizeof *plan, cmp_int)) {
            R->frows[kf++] = R->frows[i];
        } else {
            free(R->frows[i].tok_arm);
            free(R->frows[i].tok_ref);
        }
    }
    if (kd < R->n_drows || kf < R->n_frows)
        add_reason(R, "depths.tsv / forks.tsv hold %zu / %zu rows of depths not completed by every arm (not "
                   "used)", R->n_drows - kd, R->n_frows - kf);
    R->n_drows = kd;
    R->n_frows = kf;
    for (size_t i = 0; i < R->n_prows; i++)
        if (R->prows[i].pos < R->last_depth) R->prows[kp++] = R->prows[i];
    if (kp < R->n_prows)
        add_reason(R, "positions.tsv holds %zu rows at positions %d and beyond, past the last complete depth (not "
                   "used)", R->n_prows - kp, R->last_depth);
    R->n_prows = kp;
    R->have_positions = R->have_positions && kp > 0;
    /* what the sweep itself recorded */
    json_t *cj = json_object_get(R->meta, "complete");
    const char *status = json_string_value(json_object_get(R->meta, "status"));
    char jp[4096];
    struct stat jst;
    /* the journal as a regular file only (journal_in_use opens it: a FIFO there would block) */
    int journal_regular = snprintf(jp, sizeof jp, "%s/%s", dir, JOURNAL_FILE) < (int)sizeof jp &&
                          lstat(jp, &jst) == 0 && S_ISREG(jst.st_mode);
    if (json_is_false(cj)) {
        if (status && !strcmp(status, "running"))
            add_reason(R, "meta.json says the sweep is still \"running\"%s", journal_regular && journal_in_use(dir)
                       ? ", and a strata-driver is writing this folder now"
                       : ", but nothing is writing this folder: the driver was killed, or its machine stopped");
        else
            add_reason(R, "the sweep stopped: %s", status ? status : "meta.json says it is not complete");
    }
    R->have_journal = journal_regular;
    R->complete = R->n_reasons == 0;
    ret = 0;
    goto done;
oom:
    errmsg_set(err, errlen, -1, "out of memory");
done:
    free(plan);
    return ret;
}

/* Loads everything and checks cross-file consistency (see report_internal.h). */
int report_results_load(const char *dir, report_results *R, char *err, size_t errlen) {
    memset(R, 0, sizeof *R);
    if (load_meta(dir, R, err, errlen)) return -1;
    if (load_tsv(dir, "depths.tsv", TSV_DEPTHS, 0, R, err, errlen)) return -1;
    if (load_tsv(dir, "forks.tsv", TSV_FORKS, 0, R, err, errlen)) return -1;
    int prc = load_tsv(dir, "positions.tsv", TSV_POSITIONS, 1, R, err, errlen);
    if (prc < 0) return -1;
    R->have_positions = prc == 0 && R->n_prows > 0;
    if (R->n_drows == 0) {
        return errmsg_set(err, errlen, -1, "%s/depths.tsv: no data rows", dir);
    }
    /* sort by (arm, key) and reject duplicates */
    qsort(R->drows, R->n_drows, sizeof *R->drows, cmp_depth_row);
    if (R->n_frows) qsort(R->frows, R->n_frows, sizeof *R->frows, cmp_fork_row);   /* NULL when empty */
    if (R->n_prows) qsort(R->prows, R->n_prows, sizeof *R->prows, cmp_pos_row);
    for (size_t i = 1; i < R->n_drows; i++)
        if (R->drows[i].arm == R->drows[i - 1].arm && R->drows[i].depth == R->drows[i - 1].depth) {
            return errmsg_set(err, errlen, -1, "%s/depths.tsv: two rows for arm %s at depth %d", dir,
                              R->arms[R->drows[i].arm].name, R->drows[i].depth);
        }
    for (size_t i = 1; i < R->n_prows; i++)
        if (R->prows[i].arm == R->prows[i - 1].arm && R->prows[i].pos == R->prows[i - 1].pos) {
            return errmsg_set(err, errlen, -1, "%s/positions.tsv: two rows for arm %s at position %d", dir,
                              R->arms[R->prows[i].arm].name, R->prows[i].pos);
        }
    /* an incomplete folder: only the depths every arm completed, and their positions */
    if (check_complete(dir, R, err, errlen)) return -1;
    if (R->n_drows == 0) {
        return errmsg_set(err, errlen, -1, "%s: no depth has depths.tsv and forks.tsv rows for every arm", dir);
    }
    /* forks.tsv must agree with depths.tsv row for row */
    if (R->n_frows != R->n_drows) {
        return errmsg_set(err, errlen, -1, "%s/forks.tsv has %zu rows but depths.tsv has %zu", dir, R->n_frows,
                          R->n_drows);
    }
    for (size_t i = 0; i < R->n_drows; i++) {
        const report_depth *d = &R->drows[i];
        const report_fork *k = &R->frows[i];
        if (d->arm != k->arm || d->depth != k->depth || d->fork != k->fork) {
            return errmsg_set(err, errlen, -1, "%s/forks.tsv: arm %s depth %d: fork %d does not match "
                              "depths.tsv (arm %s depth %d fork %d)", dir, R->arms[k->arm].name, k->depth,
                              k->fork, R->arms[d->arm].name, d->depth, d->fork);
        }
    }
    return 0;
}

/* ============================================================================================
 * Lookups (rows are sorted by arm, then depth or position)
 * ========================================================================================== */

const report_depth *report_find_depth(const report_results *R, int arm, int depth) {
    report_depth key;
    key.arm = arm;
    key.depth = depth;
    if (!R->n_drows) return NULL;
    return bsearch(&key, R->drows, R->n_drows, sizeof *R->drows, cmp_depth_row);
}
const report_pos *report_find_pos(const report_results *R, int arm, int pos) {
    report_pos key;
    key.arm = arm;
    key.pos = pos;
    if (!R->n_prows) return NULL;
    return bsearch(&key, R->prows, R->n_prows, sizeof *R->prows, cmp_pos_row);
}
