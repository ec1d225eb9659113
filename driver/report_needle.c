/* report_needle.c — the results folder of the needle bench (docs/DESIGN.md §9): cells.tsv rows
 * written and read back, the statistics (accuracy with Wilson intervals; against the reference,
 * over units — one (trial, length, depth) cell with its raw and chat twins — the exact sign-flip
 * test of retrieval with the grid's power and a Clopper–Pearson equivalence bound
 * (driver/needle_stats.c), and the mean difference of the gold key's log-probability with a
 * bootstrap over units, TOST and its power; Holm over the arms), summary.json, README.md, heat maps
 * through gnuplot, and the comparison of two needle folders.
 *
 * Reading order: cells.tsv; loading a folder; the analysis; claims; summary.json; plots;
 * README.md; needle_report_render; needle_report_compare. */
#include "driver/needle.h"
#include "driver/report_internal.h"
#include "kernels/errmsg.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#define NEEDLE_LOGPROB_EPS 0.1    /* the log-prob margin: equivalent when the 90 % interval of the
                                     mean Δ log-prob lies within ±0.1 nats (~10 %) */
#define NEEDLE_ALPHA       0.05   /* every test; Holm over the arms of a set */
#define NEEDLE_POWER       0.8    /* the power at which the smallest detectable difference is given */
#define NEEDLE_EQ_SHARE    0.05   /* the retrieval margin: ±5 points of accuracy */
#define N_FIELDS           14
#define MAX_SHOWN_DISAGREE 12     /* cells listed where an arm and the reference disagree */

/* ============================================================================================
 * cells.tsv
 * ========================================================================================== */


static void write_ids(FILE *f, const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", ids[i]);
}

int needle_row_write(FILE *f, const needle_row *r) {
    if (!report_name_ok(r->arm)) return -1;
    fprintf(f, "%d\t%d\t%d\t%s\t%u\t%s\t%d\t", r->length, r->position, r->trial,
            r->chat ? "chat" : "raw", r->key, r->arm, r->exact ? 1 : 0);
    needle_escape(f, r->answer, strlen(r->answer));
    fprintf(f, "\t%.17g\t%ld\t%ld\t", r->logprob, r->n_prompt, r->needle_pos);
    needle_escape(f, r->generated ? r->generated : "", r->generated ? r->n_generated : 0);
    fputc('\t', f);
    write_ids(f, r->gold, r->n_gold);
    fputc('\t', f);
    write_ids(f, r->gen, r->n_gen);
    fputc('\n', f);
    return ferror(f) ? -1 : 0;
}

void needle_rows_free(needle_row *rows, size_t n) {
    for (size_t i = 0; rows && i < n; i++) {
        free(rows[i].generated);
        free(rows[i].gold);
        free(rows[i].gen);
    }
    free(rows);
}

static int parse_long_field(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* "1,2,3" -> malloc'd ids [*n] ("" -> NULL, 0). */
static int parse_ids(const char *s, int32_t **ids, size_t *n) {
    *ids = NULL;
    *n = 0;
    if (!*s) return 0;
    size_t cap = 1;
    for (const char *q = s; *q; q++) cap += *q == ',';
    if (!(*ids = malloc(cap * sizeof **ids))) return -1;
    for (const char *q = s;;) {
        char *end;
        errno = 0;
        long v = strtol(q, &end, 10);
        if (errno || end == q || v < 0 || v > INT32_MAX || (*end && *end != ',')) return -1;
        (*ids)[(*n)++] = (int32_t)v;
        if (!*end) break;
        q = end + 1;
    }
    return 0;
}

int needle_rows_read(const char *path, needle_row **rows, size_t *n, size_t *n_dropped, char *err,
                     size_t errlen) {
    char *line = NULL;
    size_t cap = 0, rcap = 0;
    long lineno = 0;
    int rc = -1;
    *rows = NULL;
    *n = 0;
    if (n_dropped) *n_dropped = 0;
    FILE *f = report_open_read(path, 0, NULL, err, errlen);   /* regular, not a link; lines bounded */
    if (!f) return -1;
    ssize_t len;
    while ((len = report_getline(&line, &cap, f, path, lineno + 1, err, errlen)) >= 0) {
        lineno++;
        if (len == 0 || line[len - 1] != '\n') {   /* cut off by a kill mid-write */
            if (n_dropped) (*n_dropped)++;
            continue;
        }
        line[--len] = 0;
        if (lineno == 1) {
            if (strcmp(line, NEEDLE_CELLS_HEADER)) {
                errmsg_set(err, errlen, -1, "%s:1: not the cells.tsv header", path);
                goto done;
            }
            continue;
        }
        char *fld[N_FIELDS];
        int nf = 0;
        for (char *p = line;; ) {
            if (nf == N_FIELDS) { nf++; break; }
            fld[nf++] = p;
            char *t = strchr(p, '\t');
            if (!t) break;
            *t = 0;
            p = t + 1;
        }
        if (nf != N_FIELDS) {
            errmsg_set(err, errlen, -1, "%s:%ld: %d fields, expected %d", path, lineno, nf, N_FIELDS);
            goto done;
        }
        if (*n == rcap) {
            size_t nc = rcap ? 2 * rcap : 256;
            needle_row *nr = realloc(*rows, nc * sizeof *nr);
            if (!nr) { errmsg_set(err, errlen, -1, "out of memory"); goto done; }
            *rows = nr;
            rcap = nc;
        }
        needle_row *r = &(*rows)[*n];
        memset(r, 0, sizeof *r);
        (*n)++;
        long v[7];
        char *end;
        int bad = parse_long_field(fld[0], 1, 1L << 30, &v[0]) || parse_long_field(fld[1], 0, 100, &v[1]) ||
                  parse_long_field(fld[2], 0, 1L << 30, &v[2]) ||
                  parse_long_field(fld[4], NEEDLE_KEY_MIN, NEEDLE_KEY_MAX, &v[3]) ||
                  parse_long_field(fld[6], 0, 1, &v[4]) || parse_long_field(fld[9], 1, 1L << 40, &v[5]) ||
                  parse_long_field(fld[10], 0, 1L << 40, &v[6]);
        int chat = !strcmp(fld[3], "chat") ? 1 : !strcmp(fld[3], "raw") ? 0 : -1;
        errno = 0;
        double lp = strtod(fld[8], &end);
        if (bad || chat < 0 || errno || end == fld[8] || *end || !report_name_ok(fld[5]) || v[6] >= v[5]) {
            errmsg_set(err, errlen, -1, "%s:%ld: a value is malformed or out of range", path, lineno);
            goto done;
        }
        r->length = (int)v[0];
        r->position = (int)v[1];
        r->trial = (int)v[2];
        r->chat = chat;
        r->key = (uint32_t)v[3];
        snprintf(r->arm, sizeof r->arm, "%s", fld[5]);
        r->exact = (int)v[4];
        r->logprob = lp;
        r->n_prompt = v[5];
        r->needle_pos = v[6];
        long al = needle_unescape(fld[7]);
        long gl = needle_unescape(fld[11]);
        if (al < 0 || gl < 0 || (size_t)al >= sizeof r->answer) {
            errmsg_set(err, errlen, -1, "%s:%ld: a bad escape in a text field", path, lineno);
            goto done;
        }
        memcpy(r->answer, fld[7], (size_t)al + 1);
        if (!(r->generated = malloc((size_t)gl + 1))) { errmsg_set(err, errlen, -1, "out of memory"); goto done; }
        memcpy(r->generated, fld[11], (size_t)gl + 1);
        r->n_generated = (size_t)gl;
        if (parse_ids(fld[12], &r->gold, &r->n_gold) || parse_ids(fld[13], &r->gen, &r->n_gen) || !r->n_gold) {
            errmsg_set(err, errlen, -1, "%s:%ld: bad token ids", path, lineno);
            goto done;
        }
        char want[32];
        needle_first_digits(r->generated, r->n_generated, want, sizeof want);
        char key[16];
        snprintf(key, sizeof key, "%u", r->key);
        if (strcmp(want, r->answer) || r->exact != !strcmp(r->answer, key)) {
            errmsg_set(err, errlen, -1, "%s:%ld: exact/answer do not agree with the generated text", path, lineno);
            goto done;
        }
    }
    if (len == -2) goto done;   /* a line over REPORT_LINE_MAX: err says so */
    if (lineno == 0) { errmsg_set(err, errlen, -1, "%s is empty", path); goto done; }
    rc = 0;
done:
    free(line);
    fclose(f);
    return rc;
}

/* ============================================================================================
 * Loading a folder
 * ========================================================================================== */

typedef struct {
    char name[64], kv_k[64], kv_v[64];
    double kv_bytes;
    int role;                       /* ROLE_* */
} narm;

enum { ROLE_REF, ROLE_FLOOR, ROLE_REPEAT, ROLE_TEST };
static const char *const role_name[] = {"reference", "floor", "repeat", "test"};

typedef struct {
    json_t *meta;
    const char *tag, *date, *command, *git, *engine, *machine, *status;
    const char *model_path, *model_sha, *model_arch, *chat_template, *chat_system;
    const char *corpus_path, *corpus_desc, *corpus_sha;
    double n_vocab, n_ctx, n_layer, wall, n_cells_plan, cap_len;
    double est_seconds, prefill_tokens, prompt_tokens;
    int complete, sessions;
    narm *arms;                     /* [n_arms] */
    int n_arms, ref, floor;
    int lengths[64], n_lengths, positions[64], n_positions;
    int keys, trials, gen;
    long seed;
    int tpl_chat[2], n_tpl;         /* templates in the folder: 0 raw, 1 chat */
    const char **warnings;          /* [n_warnings] into meta */
    int n_warnings;
    needle_row *rows;               /* [n_rows] */
    size_t n_rows, n_dropped;
    const needle_row **idx;         /* [n_tpl][n_lengths][n_positions][trials][n_arms] or NULL */
} nres;

static void nres_free(nres *R) {
    needle_rows_free(R->rows, R->n_rows);
    free(R->idx);
    free(R->arms);
    free(R->warnings);
    if (R->meta) json_decref(R->meta);
    memset(R, 0, sizeof *R);
}

static const char *jstr(json_t *o, const char *k) {
    json_t *v = o ? json_object_get(o, k) : NULL;
    return json_is_string(v) ? json_string_value(v) : "unknown";
}

static double jnum(json_t *o, const char *k) {
    json_t *v = o ? json_object_get(o, k) : NULL;
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static size_t idx_of(const nres *R, int ti, int li, int pi, int t, int a) {
    return ((((size_t)ti * (size_t)R->n_lengths + (size_t)li) * (size_t)R->n_positions + (size_t)pi) *
                (size_t)R->trials + (size_t)t) * (size_t)R->n_arms + (size_t)a;
}

static const needle_row *cell_row(const nres *R, int ti, int li, int pi, int t, int a) {
    return R->idx[idx_of(R, ti, li, pi, t, a)];
}

static int find_int(const int *v, int n, int x) {
    for (int i = 0; i < n; i++)
        if (v[i] == x) return i;
    return -1;
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int needle_is_results(const char *dir) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/meta.json", dir) >= (int)sizeof path) return 0;
    char err[16];
    json_t *m = report_json_load(path, err, sizeof err);   /* bounded; any failure: not a needle folder */
    const char *k = m ? json_string_value(json_object_get(m, "kind")) : NULL;
    int yes = k && !strcmp(k, "needle");
    json_decref(m);
    return yes;
}

static int nres_load(const char *dir, nres *R, char *err, size_t errlen) {
    char path[4096];
    memset(R, 0, sizeof *R);
    if (report_path(path, sizeof path, dir, "meta.json", err, errlen)) return -1;
    if (!(R->meta = report_json_load(path, err, errlen))) return -1;   /* bounded; control bytes escaped */
    json_t *m = R->meta, *model = json_object_get(m, "model"), *corpus = json_object_get(m, "corpus");
    json_t *op = json_object_get(m, "options"), *cost = json_object_get(m, "cost");
    const char *kind = json_string_value(json_object_get(m, "kind"));
    if (!kind || strcmp(kind, "needle")) return errmsg_set(err, errlen, -1, "%s: not a needle run", path);
    R->tag = jstr(m, "tag"); R->date = jstr(m, "date"); R->command = jstr(m, "command");
    R->git = jstr(m, "git"); R->engine = jstr(m, "engine"); R->machine = jstr(m, "machine");
    R->status = jstr(m, "status");
    R->model_path = jstr(model, "path"); R->model_sha = jstr(model, "sha256");
    R->model_arch = jstr(model, "arch"); R->chat_template = jstr(model, "chat_template");
    R->chat_system = jstr(model, "chat_system");
    R->corpus_path = jstr(corpus, "path"); R->corpus_desc = jstr(corpus, "description");
    R->corpus_sha = jstr(corpus, "sha256");
    R->n_vocab = jnum(model, "n_vocab"); R->n_ctx = jnum(model, "n_ctx"); R->n_layer = jnum(model, "n_layer");
    R->wall = jnum(m, "wall_seconds");
    R->n_cells_plan = jnum(json_object_get(m, "plan"), "cells");
    R->cap_len = jnum(json_object_get(m, "plan"), "length_cap");
    R->est_seconds = jnum(cost, "estimate_seconds");
    R->prefill_tokens = jnum(cost, "prefill_tokens_per_arm");
    R->prompt_tokens = jnum(cost, "prompt_tokens_per_arm");
    R->complete = json_is_true(json_object_get(m, "complete"));
    double ss = jnum(m, "sessions");
    R->sessions = isnan(ss) ? 1 : (int)ss;
    /* the grid */
    const char *lk[2] = {"lengths", "positions"};
    int *dst[2] = {R->lengths, R->positions}, *cnt[2] = {&R->n_lengths, &R->n_positions};
    for (int w = 0; w < 2; w++) {
        json_t *a = json_object_get(op, lk[w]);
        if (!json_is_array(a) || !json_array_size(a) || json_array_size(a) > 64)
            return errmsg_set(err, errlen, -1, "%s: options.%s is missing", path, lk[w]);
        for (size_t i = 0; i < json_array_size(a); i++) {
            json_t *x = json_array_get(a, i);
            if (!json_is_integer(x)) return errmsg_set(err, errlen, -1, "%s: options.%s[%zu] is not an integer", path, lk[w], i);
            dst[w][(*cnt[w])++] = (int)json_integer_value(x);
        }
        qsort(dst[w], (size_t)*cnt[w], sizeof(int), cmp_int);
    }
    double v = jnum(op, "keys"); R->keys = isnan(v) ? 1 : (int)v;
    v = jnum(op, "trials");
    if (isnan(v) || v < 1 || v > 10000) return errmsg_set(err, errlen, -1, "%s: options.trials is missing", path);
    R->trials = (int)v;
    v = jnum(op, "gen"); R->gen = isnan(v) ? 0 : (int)v;
    v = jnum(op, "seed"); R->seed = isnan(v) ? -1 : (long)v;
    json_t *tp = json_object_get(m, "templates");
    for (size_t i = 0; json_is_array(tp) && i < json_array_size(tp) && R->n_tpl < 2; i++) {
        const char *s = json_string_value(json_array_get(tp, i));
        if (s && (!strcmp(s, "raw") || !strcmp(s, "chat"))) R->tpl_chat[R->n_tpl++] = !strcmp(s, "chat");
    }
    if (!R->n_tpl) return errmsg_set(err, errlen, -1, "%s: no \"templates\"", path);
    /* arms */
    json_t *arms = json_object_get(m, "arms");
    const char *ref = json_string_value(json_object_get(m, "ref"));
    if (!json_is_array(arms) || !json_array_size(arms) || json_array_size(arms) > 256 || !ref)
        return errmsg_set(err, errlen, -1, "%s: \"arms\" or \"ref\" is missing", path);
    R->n_arms = (int)json_array_size(arms);
    if (!(R->arms = calloc((size_t)R->n_arms, sizeof *R->arms))) return errmsg_set(err, errlen, -1, "out of memory");
    R->ref = R->floor = -1;
    for (int i = 0; i < R->n_arms; i++) {
        json_t *a = json_array_get(arms, (size_t)i);
        const char *nm = json_string_value(json_object_get(a, "name"));
        if (!nm || !report_name_ok(nm)) return errmsg_set(err, errlen, -1, "%s: arm %d has no valid name", path, i);
        snprintf(R->arms[i].name, sizeof R->arms[i].name, "%s", nm);
        snprintf(R->arms[i].kv_k, sizeof R->arms[i].kv_k, "%s", jstr(a, "kv_k"));
        snprintf(R->arms[i].kv_v, sizeof R->arms[i].kv_v, "%s", jstr(a, "kv_v"));
        R->arms[i].kv_bytes = jnum(a, "kv_bytes_per_token");
        for (int j = 0; j < i; j++)
            if (!strcmp(R->arms[j].name, nm)) return errmsg_set(err, errlen, -1, "%s: arm %s twice", path, nm);
        if (!strcmp(nm, ref) && R->ref < 0) R->ref = i;
    }
    if (R->ref < 0) return errmsg_set(err, errlen, -1, "%s: the reference arm %s is not among the arms", path, ref);
    for (int i = 0; i < R->n_arms; i++) {
        narm *a = &R->arms[i];
        if (i == R->ref) a->role = ROLE_REF;
        else if (strchr(a->name, '#')) a->role = ROLE_REPEAT;
        else if (R->floor < 0 && !strcmp(a->kv_k, "f32") && !strcmp(a->kv_v, "f32")) { a->role = ROLE_FLOOR; R->floor = i; }
        else a->role = ROLE_TEST;
    }
    json_t *w = json_object_get(m, "warnings");
    if (json_is_array(w) && json_array_size(w)) {
        if (!(R->warnings = calloc(json_array_size(w), sizeof *R->warnings))) return errmsg_set(err, errlen, -1, "out of memory");
        for (size_t i = 0; i < json_array_size(w); i++)
            if (json_is_string(json_array_get(w, i))) R->warnings[R->n_warnings++] = json_string_value(json_array_get(w, i));
    }
    /* the rows, indexed by cell and arm */
    if (report_path(path, sizeof path, dir, "cells.tsv", err, errlen)) return -1;
    if (needle_rows_read(path, &R->rows, &R->n_rows, &R->n_dropped, err, errlen)) return -1;
    size_t n_idx = idx_of(R, R->n_tpl, 0, 0, 0, 0);
    if (!(R->idx = calloc(n_idx ? n_idx : 1, sizeof *R->idx))) return errmsg_set(err, errlen, -1, "out of memory");
    for (size_t i = 0; i < R->n_rows; i++) {
        const needle_row *r = &R->rows[i];
        int ti = r->chat == R->tpl_chat[0] ? 0 : R->n_tpl > 1 && r->chat == R->tpl_chat[1] ? 1 : -1;
        int li = find_int(R->lengths, R->n_lengths, r->length), pi = find_int(R->positions, R->n_positions, r->position);
        int a = -1;
        for (int k = 0; k < R->n_arms && a < 0; k++) if (!strcmp(R->arms[k].name, r->arm)) a = k;
        if (ti < 0 || li < 0 || pi < 0 || a < 0 || r->trial >= R->trials)
            return errmsg_set(err, errlen, -1, "%s row %zu: length %d, position %d, trial %d, template %s or "
                              "arm %s is not in meta.json's plan", path, i + 2, r->length, r->position,
                              r->trial, r->chat ? "chat" : "raw", r->arm);
        const needle_row **slot = &R->idx[idx_of(R, ti, li, pi, r->trial, a)];
        if (*slot) return errmsg_set(err, errlen, -1, "%s row %zu: the cell appears twice for arm %s", path, i + 2, r->arm);
        *slot = r;
    }
    return 0;
}

/* ============================================================================================
 * The analysis
 * ========================================================================================== */

/* One arm's numbers over one set of cells (a template, or all templates pooled). */
typedef struct {
    size_t n, exact;
    stats_ci acc;                   /* Wilson */
    size_t *g_n, *g_exact;          /* [n_lengths * n_positions] the grid */
    /* against the reference, over the cells both have */
    size_t pairs, b, c;             /* b: only this arm right; c: only the reference right */
    size_t ref_exact;               /* the reference's successes on those pairs */
    /* over units: (trial, length, depth) with the set's templates together */
    size_t units, disc_units;       /* units with a pair; units where a template's outcome differs */
    double diff;                    /* mean over units of the accuracy difference (arm − ref) */
    double p, p_holm;               /* exact sign-flip test over units; Holm over the set's arms */
    double mdd;                     /* the grid's smallest detectable |diff| (INFINITY: no power) */
    double bound;                   /* Clopper–Pearson 95 % bound on |diff| (discordant units) */
    stats_verdict v_acc;            /* lower / higher / no detected difference / equivalent */
    stats_boot dlp;                 /* mean Δ log-prob (arm − ref) over units, bootstrap over units */
    double dlp_holm, dlp_mdd;       /* its p Holm-adjusted; stats_mdd of its se */
    stats_verdict v_lp;
    double *g_dlp;                  /* [grid] mean Δ log-prob per grid cell, NAN without pairs */
    size_t identical;               /* same greedy tokens and bit-identical log-prob */
    double mean_lp;                 /* mean log-prob of the gold key (this arm, all its cells) */
} nstat;

typedef struct {
    int n_sets;                     /* n_tpl, + 1 (pooled) when there are two templates */
    nstat *s;                       /* [n_sets][n_arms] */
    double *prompt_mean;            /* [n_lengths] mean prompt tokens (reference rows) */
    double margin_acc;              /* NEEDLE_EQ_SHARE, or NAN on one haystack (not assessed) */
} nan_t;

static nstat *st_at(const nan_t *A, const nres *R, int set, int a) { return &A->s[(size_t)set * (size_t)R->n_arms + (size_t)a]; }

static const char *set_name(const nres *R, const nan_t *A, int set) {
    if (set >= R->n_tpl) return "all";
    (void)A;
    return R->tpl_chat[set] ? "chat" : "raw";
}

static void nan_free(nan_t *A, const nres *R) {
    for (int i = 0; A->s && i < A->n_sets * R->n_arms; i++) {
        free(A->s[i].g_n);
        free(A->s[i].g_exact);
        free(A->s[i].g_dlp);
    }
    free(A->s);
    free(A->prompt_mean);
    memset(A, 0, sizeof *A);
}

/* Holm over the arms of one set, for the retrieval p (kind 0) or the log-prob p (kind 1). */
static int holm_set(const nres *R, nan_t *A, int set, int kind) {
    double *p = malloc((size_t)R->n_arms * sizeof *p);   /* [n_arms] NAN for the reference */
    if (!p) return -1;
    for (int a = 0; a < R->n_arms; a++) {
        const nstat *S = st_at(A, R, set, a);
        p[a] = a == R->ref ? NAN : kind ? S->dlp.p : S->p;
    }
    int rc = stats_holm(p, (size_t)R->n_arms, p) < 0 ? -1 : 0;
    for (int a = 0; a < R->n_arms; a++) {
        nstat *S = st_at(A, R, set, a);
        if (kind) S->dlp_holm = p[a];
        else S->p_holm = p[a];
    }
    free(p);
    return rc;
}

static int nan_run(const nres *R, nan_t *A, char *err, size_t errlen) {
    memset(A, 0, sizeof *A);
    size_t G = (size_t)R->n_lengths * (size_t)R->n_positions;
    size_t units = G * (size_t)R->trials;
    A->n_sets = R->n_tpl + (R->n_tpl > 1);
    /* equivalence needs independent units: not assessed on one haystack */
    A->margin_acc = R->trials > 1 ? NEEDLE_EQ_SHARE : NAN;
    double *d = malloc((units ? units : 1) * sizeof *d);    /* [units] Δ log-prob per unit */
    int *x = malloc((units ? units : 1) * sizeof *x);       /* [units] Σ exact differences, scaled */
    double *gs = calloc(G, sizeof *gs);                     /* [G] */
    size_t *gc = calloc(G, sizeof *gc);                     /* [G] */
    A->s = calloc((size_t)A->n_sets * (size_t)R->n_arms, sizeof *A->s);
    A->prompt_mean = calloc((size_t)R->n_lengths, sizeof *A->prompt_mean);
    if (!d || !x || !gs || !gc || !A->s || !A->prompt_mean) goto oom;
    for (int li = 0; li < R->n_lengths; li++) {
        double sum = 0;
        size_t k = 0;
        for (int ti = 0; ti < R->n_tpl; ti++)
            for (int pi = 0; pi < R->n_positions; pi++)
                for (int t = 0; t < R->trials; t++) {
                    const needle_row *r = cell_row(R, ti, li, pi, t, R->ref);
                    if (r) { sum += (double)r->n_prompt; k++; }
                }
        A->prompt_mean[li] = k ? sum / (double)k : NAN;
    }
    for (int set = 0; set < A->n_sets; set++) {
        int t0 = set < R->n_tpl ? set : 0, t1 = set < R->n_tpl ? set + 1 : R->n_tpl, K = t1 - t0;
        for (int a = 0; a < R->n_arms; a++) {
            nstat *S = st_at(A, R, set, a);
            S->g_n = calloc(G, sizeof *S->g_n);
            S->g_exact = calloc(G, sizeof *S->g_exact);
            S->g_dlp = malloc(G * sizeof *S->g_dlp);
            if (!S->g_n || !S->g_exact || !S->g_dlp) goto oom;
            memset(gs, 0, G * sizeof *gs);
            memset(gc, 0, G * sizeof *gc);
            size_t nu = 0;
            long xsum = 0;
            double lps = 0;
            for (int li = 0; li < R->n_lengths; li++)
                for (int pi = 0; pi < R->n_positions; pi++)
                    for (int t = 0; t < R->trials; t++) {
                        size_t g = (size_t)li * (size_t)R->n_positions + (size_t)pi;
                        int ux = 0, un = 0, udisc = 0;   /* this unit: Σ differences, twins, any differs */
                        double ud = 0;
                        for (int ti = t0; ti < t1; ti++) {
                            const needle_row *r = cell_row(R, ti, li, pi, t, a);
                            const needle_row *q = cell_row(R, ti, li, pi, t, R->ref);
                            if (!r) continue;
                            S->n++;
                            S->exact += (size_t)r->exact;
                            S->g_n[g]++;
                            S->g_exact[g] += (size_t)r->exact;
                            lps += r->logprob;
                            if (!q || a == R->ref) continue;
                            S->pairs++;
                            S->ref_exact += (size_t)q->exact;
                            S->b += r->exact && !q->exact;
                            S->c += !r->exact && q->exact;
                            ux += r->exact - q->exact;
                            udisc |= r->exact != q->exact;
                            un++;
                            ud += r->logprob - q->logprob;
                            gs[g] += r->logprob - q->logprob;
                            gc[g]++;
                            S->identical += !memcmp(&r->logprob, &q->logprob, sizeof(double)) &&
                                            r->n_gen == q->n_gen &&
                                            !memcmp(r->gen, q->gen, r->n_gen * sizeof *r->gen);
                        }
                        if (!un) continue;
                        /* the unit's accuracy difference ux / un, in steps of 1 / K */
                        x[nu] = ux * (K / un);
                        xsum += x[nu];
                        d[nu] = ud / un;
                        S->disc_units += (size_t)udisc;
                        nu++;
                    }
            S->units = nu;
            S->mean_lp = S->n ? lps / (double)S->n : NAN;
            S->acc = (stats_ci){NAN, NAN, NAN, 0};
            if (S->n) stats_wilson(S->exact, S->n, &S->acc);
            S->p = S->diff = S->mdd = S->bound = S->p_holm = S->dlp_holm = S->dlp_mdd = NAN;
            S->dlp = (stats_boot){NAN, NAN, NAN, NAN, NAN, NAN, NAN, 0, 0};
            if (a != R->ref && nu) {
                S->p = needle_stats_signflip_p(x, nu);
                if (isnan(S->p)) goto oom;
                S->diff = (double)xsum / ((double)K * (double)nu);
                S->mdd = needle_stats_grid_mdd(nu, K, NEEDLE_ALPHA, NEEDLE_POWER);
                S->bound = needle_stats_disc_bound(S->disc_units, nu, NEEDLE_ALPHA);
                /* units are independent draws: the bootstrap over units (blocks of 1) */
                if (stats_mean_ci_circular(d, nu, 1, STATS_BOOT_B, STATS_BOOT_SEED, NULL, &S->dlp)) goto oom;
                S->dlp_mdd = stats_mdd(S->dlp.se, NEEDLE_ALPHA, NEEDLE_POWER);
            }
            for (size_t g = 0; g < G; g++) S->g_dlp[g] = gc[g] ? gs[g] / (double)gc[g] : NAN;
        }
        if (holm_set(R, A, set, 0) || holm_set(R, A, set, 1)) goto oom;
        for (int a = 0; a < R->n_arms; a++) {
            nstat *S = st_at(A, R, set, a);
            S->v_acc = S->v_lp = STATS_NOT_COMPUTABLE;
            if (a == R->ref || !S->units) continue;
            S->v_acc = stats_verdict_p(S->diff, S->p_holm, NEEDLE_ALPHA, -S->bound, S->bound, A->margin_acc);
            S->v_lp = stats_verdict_p(S->dlp.est, S->dlp_holm, NEEDLE_ALPHA, S->dlp.lo90, S->dlp.hi90,
                                      R->trials > 1 ? NEEDLE_LOGPROB_EPS : NAN);
        }
    }
    free(d); free(x); free(gs); free(gc);
    return 0;
oom:
    free(d); free(x); free(gs); free(gc);
    return errmsg_set(err, errlen, -1, "out of memory (or non-finite log-probabilities) in the analysis");
}

/* ============================================================================================
 * Claims: what the numbers support (definitions in the README)
 * ========================================================================================== */

typedef struct {
    char arm[64], set[8];
    int kind;                       /* 0: retrieval, 1: the key's log-probability */
    stats_verdict verdict;          /* STATS_NOT_COMPUTABLE: not measured */
    char words[64];                 /* stats_verdict_format, or "not measured" */
    char claim[512], evidence[1024];
} nclaim;

static void fmt_pct(double v, char *buf, size_t len) {
    if (isnan(v)) snprintf(buf, len, REPORT_NA);
    else snprintf(buf, len, "%.1f%%", 100 * v);
}

static void fmt_p(double p, char *buf, size_t len) {
    if (isnan(p)) snprintf(buf, len, REPORT_NA);
    else if (p >= 0.995) snprintf(buf, len, "1");
    else if (p >= 0.001) snprintf(buf, len, "%.3f", p);
    else snprintf(buf, len, "%.1e", p);
}

static void fmt_lp_ci(const stats_boot *c, char *buf, size_t len) {
    if (isnan(c->est)) snprintf(buf, len, REPORT_NA);
    else if (isnan(c->lo)) snprintf(buf, len, "%+.3g", c->est);
    else snprintf(buf, len, "%+.3g [%+.3g, %+.3g]", c->est, c->lo, c->hi);
}

/* "20 units (raw and chat twins together) on 1 haystack" */
static void fmt_units(const nres *R, const nan_t *A, int set, size_t units, char *buf, size_t len) {
    int pooled = set >= R->n_tpl;
    snprintf(buf, len, "%zu unit%s%s on %d haystack%s", units, units == 1 ? "" : "s",
             pooled ? " (raw and chat twins together)" : "", R->trials, R->trials == 1 ? "" : "s");
    (void)A;
}

/* The retrieval test's power: the grid's smallest detectable difference, and what it means at the
 * margin. */
static void fmt_power_acc(const nstat *S, char *buf, size_t len) {
    if (isinf(S->mdd))
        snprintf(buf, len, "no power: %zu units cannot reach p ≤ %.2g however they differ", S->units, NEEDLE_ALPHA);
    else if (isnan(S->mdd))
        snprintf(buf, len, "power not computable");
    else if (S->mdd > NEEDLE_EQ_SHARE)
        snprintf(buf, len, "no power at the ±%.0f-point margin: the grid cannot detect a difference smaller "
                 "than %.0f points (%.0f %% power, at best)", 100 * NEEDLE_EQ_SHARE, 100 * S->mdd, 100 * NEEDLE_POWER);
    else
        snprintf(buf, len, "%.0f %% power, at best, for a difference of %.1f points or more", 100 * NEEDLE_POWER,
                 100 * S->mdd);
}

static void fmt_power_lp(const nstat *S, char *buf, size_t len) {
    if (isnan(S->dlp_mdd))
        snprintf(buf, len, "the per-unit differences do not vary: no standard error, no power estimate");
    else if (S->dlp_mdd > NEEDLE_LOGPROB_EPS)
        snprintf(buf, len, "no power at the ±%.2g-nat margin: the grid cannot detect a shift smaller than "
                 "%.2g nats (%.0f %% power)", NEEDLE_LOGPROB_EPS, S->dlp_mdd, 100 * NEEDLE_POWER);
    else
        snprintf(buf, len, "%.0f %% power for a shift of %.2g nats or more", 100 * NEEDLE_POWER, S->dlp_mdd);
}

/* The verdict in the report's words, the margin written in with its unit ("equivalent within ±5
 * points", "lower, within ±0.1 nats"); "not measured" without units. */
static void verdict_words(stats_verdict v, int kind, char *buf, size_t len) {
    if (v == STATS_NOT_COMPUTABLE) { snprintf(buf, len, "not measured"); return; }
    stats_verdict_format(v, kind ? NEEDLE_LOGPROB_EPS : 100 * NEEDLE_EQ_SHARE, buf, len);
    if (v == STATS_EQUIVALENT || v == STATS_EQUIVALENT_LOWER || v == STATS_EQUIVALENT_HIGHER) {
        size_t k = strlen(buf);
        snprintf(buf + k, len - k, kind ? " nats" : " points");
    }
}

/* Two claims per test arm and set: retrieval (the sign-flip test over units, the Clopper–Pearson
 * bound for equivalence) and the key's log-probability (bootstrap over units, TOST). */
static int make_claims(const nres *R, const nan_t *A, nclaim *out, int max) {
    int n = 0;
    const char *ref = R->arms[R->ref].name;
    for (int set = 0; set < A->n_sets; set++)
        for (int a = 0; a < R->n_arms; a++) {
            if (a == R->ref || n + 2 > max) continue;
            const nstat *S = st_at(A, R, set, a);
            const char *sn = set_name(R, A, set), *nm = R->arms[a].name;
            char pa[32], pb[32], pp[32], ph[32], ci[96], un[128], pw[256], bd[32];
            fmt_units(R, A, set, S->units, un, sizeof un);
            for (int kind = 0; kind < 2; kind++) {
                nclaim *C = &out[n++];
                snprintf(C->arm, sizeof C->arm, "%s", nm);
                snprintf(C->set, sizeof C->set, "%s", sn);
                C->kind = kind;
                C->verdict = kind ? S->v_lp : S->v_acc;
                verdict_words(C->verdict, kind, C->words, sizeof C->words);
                snprintf(C->claim, sizeof C->claim, kind ? "the key's log-probability under %s vs %s (%s prompts)"
                                                         : "retrieval by %s vs %s (%s prompts)", nm, ref, sn);
                if (!S->units) {
                    snprintf(C->evidence, sizeof C->evidence, "no cell measured on both arms");
                    continue;
                }
                if (!kind) {
                    fmt_pct((double)(S->ref_exact + S->b - S->c) / (double)S->pairs, pa, sizeof pa);
                    fmt_pct((double)S->ref_exact / (double)S->pairs, pb, sizeof pb);
                    fmt_p(S->p, pp, sizeof pp);
                    fmt_p(S->p_holm, ph, sizeof ph);
                    fmt_pct(S->bound, bd, sizeof bd);
                    fmt_power_acc(S, pw, sizeof pw);
                    snprintf(C->evidence, sizeof C->evidence, "%s vs %s of %zu cells; %zu of %s differ; exact "
                             "sign-flip test over units p = %s (Holm: %s); |difference| ≤ %s (Clopper–Pearson "
                             "95 %% bound on the differing units; margin ±%.0f points%s); %s", pa, pb, S->pairs,
                             S->disc_units, un, pp, ph, bd, 100 * NEEDLE_EQ_SHARE,
                             isnan(A->margin_acc) ? ", not assessed on one haystack" : "", pw);
                } else {
                    fmt_lp_ci(&S->dlp, ci, sizeof ci);
                    fmt_p(S->dlp.p, pp, sizeof pp);
                    fmt_p(S->dlp_holm, ph, sizeof ph);
                    fmt_power_lp(S, pw, sizeof pw);
                    snprintf(C->evidence, sizeof C->evidence, "mean Δ log-prob (%s − %s) %s nats over %s; "
                             "bootstrap over units p = %s (Holm: %s); 90 %% interval [%+.3g, %+.3g] against "
                             "the margin ±%.2g nats (TOST%s); %s", nm, ref, ci, un, pp, ph, S->dlp.lo90,
                             S->dlp.hi90, NEEDLE_LOGPROB_EPS, R->trials > 1 ? "" : ", not assessed on one haystack",
                             pw);
                }
            }
        }
    return n;
}

/* ============================================================================================
 * summary.json
 * ========================================================================================== */

static json_t *jreal(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *jci(const stats_ci *c) {
    return json_pack("{s:o,s:o,s:o,s:I}", "est", jreal(c->est), "lo", jreal(c->lo), "hi", jreal(c->hi),
                     "n", (json_int_t)c->n);
}

static json_t *jboot(const stats_boot *c) {
    return json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:I}", "est", jreal(c->est), "lo", jreal(c->lo), "hi",
                     jreal(c->hi), "lo90", jreal(c->lo90), "hi90", jreal(c->hi90), "se", jreal(c->se), "p",
                     jreal(c->p), "n", (json_int_t)c->n);
}

/* INFINITY ("no power") as the string "inf": JSON has no infinity. */
static json_t *jreal_inf(double v) { return isinf(v) ? json_string("inf") : jreal(v); }

static json_t *summary_build(const nres *R, const nan_t *A, const nclaim *cl, int n_cl) {
    json_t *root = json_object(), *arms = json_array(), *claims = json_array(), *L = json_array(), *P = json_array();
    json_object_set_new(root, "strata_needle_summary_version", json_integer(2));
    json_object_set_new(root, "tag", json_string(R->tag));
    json_object_set_new(root, "date", json_string(R->date));
    json_object_set_new(root, "ref", json_string(R->arms[R->ref].name));
    json_object_set_new(root, "floor_arm", R->floor >= 0 ? json_string(R->arms[R->floor].name) : json_null());
    for (int i = 0; i < R->n_lengths; i++) json_array_append_new(L, json_integer(R->lengths[i]));
    for (int i = 0; i < R->n_positions; i++) json_array_append_new(P, json_integer(R->positions[i]));
    json_object_set_new(root, "lengths", L);
    json_object_set_new(root, "positions", P);
    json_t *pm = json_array();
    for (int i = 0; i < R->n_lengths; i++) json_array_append_new(pm, jreal(A->prompt_mean[i]));
    json_object_set_new(root, "prompt_tokens_mean", pm);
    json_object_set_new(root, "keys", json_integer(R->keys));
    json_object_set_new(root, "trials", json_integer(R->trials));
    json_object_set_new(root, "cells_rows", json_integer((json_int_t)R->n_rows));
    json_object_set_new(root, "complete", json_boolean(R->complete));
    json_object_set_new(root, "haystacks", json_integer(R->trials));
    json_object_set_new(root, "settings", json_pack(
        "{s:f,s:s,s:s,s:i,s:I,s:s,s:s,s:s,s:s,s:s,s:f,s:f,s:f,s:f,s:b}", "ci_level", 0.95, "accuracy_ci",
        "Wilson score", "unit", "one (trial, length, depth) cell; its raw and chat twins together",
        "bootstrap_resamples", STATS_BOOT_B, "bootstrap_seed", (json_int_t)STATS_BOOT_SEED,
        "delta_logprob_ci", "circular bootstrap of the mean over units (blocks of 1); TOST on its 90 % interval",
        "paired_test", "exact sign-flip test of the per-unit accuracy differences (McNemar's exact test with "
        "one template)", "equivalence", "one-sided 95 % Clopper-Pearson bound on the share of differing units",
        "power", "the smallest difference detected with this power; retrieval: at best (one-way discordance)",
        "multiplicity", "Holm over the arms of a set, per test", "alpha", NEEDLE_ALPHA, "power_level",
        NEEDLE_POWER, "logprob_eps_nats", NEEDLE_LOGPROB_EPS, "accuracy_eps", NEEDLE_EQ_SHARE,
        "equivalence_assessed", R->trials > 1));
    for (int a = 0; a < R->n_arms; a++) {
        json_t *ja = json_object(), *sets = json_object();
        json_object_set_new(ja, "name", json_string(R->arms[a].name));
        json_object_set_new(ja, "kv_k", json_string(R->arms[a].kv_k));
        json_object_set_new(ja, "kv_v", json_string(R->arms[a].kv_v));
        json_object_set_new(ja, "kv_bytes_per_token", jreal(R->arms[a].kv_bytes));
        json_object_set_new(ja, "role", json_string(role_name[R->arms[a].role]));
        for (int set = 0; set < A->n_sets; set++) {
            const nstat *S = st_at(A, R, set, a);
            json_t *js = json_object(), *grid = json_array();
            json_object_set_new(js, "n", json_integer((json_int_t)S->n));
            json_object_set_new(js, "exact", json_integer((json_int_t)S->exact));
            json_object_set_new(js, "accuracy", jci(&S->acc));
            json_object_set_new(js, "mean_logprob", jreal(S->mean_lp));
            for (int li = 0; li < R->n_lengths; li++)
                for (int pi = 0; pi < R->n_positions; pi++) {
                    size_t g = (size_t)li * (size_t)R->n_positions + (size_t)pi;
                    json_array_append_new(grid, json_pack("{s:i,s:i,s:I,s:I,s:o}", "length", R->lengths[li],
                        "position", R->positions[pi], "n", (json_int_t)S->g_n[g], "exact",
                        (json_int_t)S->g_exact[g], "delta_logprob_mean", jreal(S->g_dlp[g])));
                }
            json_object_set_new(js, "grid", grid);
            if (a != R->ref) {
                char w0[64], w1[64];
                verdict_words(S->v_acc, 0, w0, sizeof w0);
                verdict_words(S->v_lp, 1, w1, sizeof w1);
                json_object_set_new(js, "vs_ref", json_pack(
                    "{s:I,s:I,s:I,s:I,s:I,s:I,s:o,s:o,s:o,s:o,s:o,s:s,s:o,s:o,s:o,s:s,s:I}", "pairs",
                    (json_int_t)S->pairs, "only_arm", (json_int_t)S->b, "only_ref", (json_int_t)S->c,
                    "ref_exact", (json_int_t)S->ref_exact, "units", (json_int_t)S->units, "differing_units",
                    (json_int_t)S->disc_units, "accuracy_diff", jreal(S->diff), "signflip_p", jreal(S->p),
                    "signflip_p_holm", jreal(S->p_holm), "accuracy_mdd", jreal_inf(S->mdd), "accuracy_bound",
                    jreal(S->bound), "accuracy_verdict", w0, "delta_logprob_mean", jboot(&S->dlp),
                    "delta_logprob_p_holm", jreal(S->dlp_holm), "delta_logprob_mdd", jreal(S->dlp_mdd),
                    "logprob_verdict", w1, "identical", (json_int_t)S->identical));
            }
            json_object_set_new(sets, set_name(R, A, set), js);
        }
        json_object_set_new(ja, "sets", sets);
        json_array_append_new(arms, ja);
    }
    json_object_set_new(root, "arms", arms);
    for (int i = 0; i < n_cl; i++)
        json_array_append_new(claims, json_pack("{s:s,s:s,s:s,s:s,s:s}", "arm", cl[i].arm, "set", cl[i].set,
            "claim", cl[i].claim, "verdict", cl[i].words, "evidence", cl[i].evidence));
    json_object_set_new(root, "claims", claims);
    return root;
}

/* ============================================================================================
 * Plots: heat maps of accuracy (per arm) and of its difference to the reference, length ×
 * depth, one panel per template
 * ========================================================================================== */

/* The body of a heat-map script (the panels), written once per terminal. */
static void heat_body(FILE *g, const nres *R, int a, int diff, const char *stem) {
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

static int heat_write(const report_outdir *pd, const nres *R, const nan_t *A, int a, int diff, int *drawn,
                      char *err, size_t errlen) {
    char stem[64], name[128];
    snprintf(stem, sizeof stem, "%s_%d", diff ? "diff" : "accuracy", a);
    *drawn = 0;
    int any = 0;
    for (int ti = 0; ti < R->n_tpl; ti++) {
        const nstat *S = st_at(A, R, ti, a), *Q = st_at(A, R, ti, R->ref);
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
static int plots_render(const char *dir, const nres *R, const nan_t *A, int *drawn, char *err, size_t errlen) {
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
 * README.md
 * ========================================================================================== */

static void md_num(FILE *o, double v, const char *unit) {
    if (isnan(v)) fprintf(o, "unknown");
    else fprintf(o, "%.0f%s", v, unit);
}

/* Generated text for a Markdown table cell: '|' and '`' escaped, newlines as ⏎, cut at 60 bytes
 * (on a UTF-8 boundary). */
static void md_text(FILE *o, const char *s, size_t n) {
    size_t lim = n > 60 ? 60 : n;
    while (lim < n && lim > 0 && ((unsigned char)s[lim] & 0xC0) == 0x80) lim--;
    fputc('`', o);
    for (size_t i = 0; i < lim; i++) {
        if (s[i] == '\n') fputs("⏎", o);
        else if (s[i] == '|') fputs("\\|", o);
        else if (s[i] == '`') fputc('\'', o);
        else if ((unsigned char)s[i] < 0x20) fputc(' ', o);
        else fputc(s[i], o);
    }
    fputc('`', o);
    if (lim < n) fputs("…", o);
}

static void readme_setup(FILE *o, const nres *R, const nan_t *A) {
    fprintf(o, "## Setup\n\n| | |\n|---|---|\n");
    /* strings from meta.json: control bytes were escaped on loading, '|' is escaped here */
    fputs("| Model | `", o); report_md_cell(o, R->model_path); fputs("` — ", o); report_md_cell(o, R->model_arch);
    fputs(", ", o);
    md_num(o, R->n_layer, " layers");
    fprintf(o, ", vocabulary ");
    md_num(o, R->n_vocab, "");
    fprintf(o, ", context ");
    md_num(o, R->n_ctx, "");
    fputs(" |\n| Model sha256 | `", o); report_md_cell(o, R->model_sha); fputs("` |\n", o);
    fputs("| Chat template | ", o); report_md_cell(o, R->chat_template);
    if (R->chat_system[0] && strcmp(R->chat_system, "unknown")) {
        fputs(" (default system message: \"", o); report_md_cell(o, R->chat_system); fputs("\")", o);
    }
    fprintf(o, " |\n| Reference arm | %s (K ", R->arms[R->ref].name);
    report_md_cell(o, R->arms[R->ref].kv_k); fputs(", V ", o); report_md_cell(o, R->arms[R->ref].kv_v); fputs(") |\n", o);
    fprintf(o, "| Lengths | ");
    for (int i = 0; i < R->n_lengths; i++) {
        fprintf(o, "%s%d", i ? ", " : "", R->lengths[i]);
        if (!isnan(A->prompt_mean[i])) fprintf(o, " (prompts %.0f tokens on average)", A->prompt_mean[i]);
    }
    if (!isnan(R->cap_len)) fprintf(o, "; lengths above %.0f capped at %.0f (the context minus the answer)", R->cap_len, R->cap_len);
    fprintf(o, " |\n| Depths | ");
    for (int i = 0; i < R->n_positions; i++) fprintf(o, "%s%d %%", i ? ", " : "", R->positions[i]);
    fprintf(o, " of the haystack, backed up to a sentence boundary |\n");
    fprintf(o, "| Needles per prompt | %d%s |\n", R->keys, R->keys > 1 ? " (labelled by city; the one at the depth is asked for, the others spread evenly)" : "");
    fprintf(o, "| Trials | %d per (length, depth, template), each with its own haystack |\n", R->trials);
    json_t *hs = json_object_get(json_object_get(R->meta, "plan"), "haystacks");
    fprintf(o, "| Haystacks | ");
    if (!json_is_array(hs) || !json_array_size(hs)) fprintf(o, "%d (offsets not recorded in meta.json)", R->trials);
    for (size_t i = 0; json_is_array(hs) && i < json_array_size(hs) && i < 16; i++) {
        json_t *h = json_array_get(hs, i);
        fprintf(o, "%strial %.0f from byte %.0f", i ? ", " : "", jnum(h, "trial"), jnum(h, "offset"));
    }
    if (json_is_array(hs) && json_array_size(hs) > 16) fprintf(o, ", … (%zu in meta.json)", json_array_size(hs));
    fprintf(o, " of the corpus |\n");
    fprintf(o, "| Templates | ");
    for (int i = 0; i < R->n_tpl; i++) fprintf(o, "%s%s", i ? ", " : "", R->tpl_chat[i] ? "chat" : "raw");
    fprintf(o, " |\n| Seed | %ld (keys and haystack offsets; the same for every arm) |\n", R->seed);
    fprintf(o, "| Answer | %d greedy tokens; exact match = its first run of digits is the key |\n", R->gen);
    fputs("| Corpus | `", o); report_md_cell(o, R->corpus_path); fputs("` — ", o); report_md_cell(o, R->corpus_desc);
    fputs(" |\n", o);
    fprintf(o, "| Cells | %zu rows in cells.tsv", R->n_rows);
    if (!isnan(R->n_cells_plan)) fprintf(o, " (%.0f cells × %d arms planned)", R->n_cells_plan, R->n_arms);
    fputs("; status: ", o); report_md_cell(o, R->status); fprintf(o, "%s |\n", R->sessions > 1 ? " (resumed)" : "");
    if (!isnan(R->prefill_tokens))
        fprintf(o, "| Cost | %.0f prompt tokens per arm, %.0f of them prefilled (consecutive prompts share their "
                "longest common prefix) |\n", R->prompt_tokens, R->prefill_tokens);
    fputs("| Engine | ", o); report_md_cell(o, R->engine); fputs(" |\n| Git | `", o); report_md_cell(o, R->git);
    fputs("` |\n| Machine | ", o); report_md_cell(o, R->machine); fputs(" |\n| Date | ", o); report_md_cell(o, R->date);
    fputs(" |\n", o);
    fprintf(o, "| Wall time | ");
    if (isnan(R->wall)) fprintf(o, "unknown");
    else fprintf(o, "%.1f s (%.1f min)", R->wall, R->wall / 60);
    if (!isnan(R->est_seconds)) fprintf(o, "; estimated before the run: %.0f s", R->est_seconds);
    fprintf(o, " |\n\n| Arm | K cache | V cache | KV bytes per token | Role |\n|---|---|---|---:|---|\n");
    for (int i = 0; i < R->n_arms; i++) {
        fprintf(o, "| %s | ", R->arms[i].name);
        report_md_cell(o, R->arms[i].kv_k); fputs(" | ", o); report_md_cell(o, R->arms[i].kv_v); fputs(" | ", o);
        md_num(o, R->arms[i].kv_bytes, "");
        fprintf(o, " | %s |\n", role_name[R->arms[i].role]);
    }
    fprintf(o, "\n");
}

static void readme_accuracy(FILE *o, const nres *R, const nan_t *A) {
    char a[96];
    fprintf(o, "## Accuracy\n\nShare of cells whose greedy answer starts with the key, with the Wilson "
            "95%% interval; mean log-probability of the key's tokens (teacher-forced, nats).\n\n| Arm |");
    for (int set = 0; set < A->n_sets; set++) fprintf(o, " %s: accuracy | %s: mean ln p(key) |", set_name(R, A, set), set_name(R, A, set));
    fprintf(o, "\n|---|");
    for (int set = 0; set < A->n_sets; set++) fprintf(o, "---:|---:|");
    fprintf(o, "\n");
    for (int i = 0; i < R->n_arms; i++) {
        fprintf(o, "| %s |", R->arms[i].name);
        for (int set = 0; set < A->n_sets; set++) {
            const nstat *S = st_at(A, R, set, i);
            report_fmt_pct_ci(&S->acc, a, sizeof a);
            fprintf(o, " %zu/%zu = %s | ", S->exact, S->n, a);
            if (isnan(S->mean_lp)) fprintf(o, REPORT_NA " |");
            else fprintf(o, "%.3f |", S->mean_lp);
        }
        fprintf(o, "\n");
    }
    fprintf(o, "\nBy length (rows) and needle depth (columns), cells answered exactly / cells:\n\n");
    for (int ti = 0; ti < R->n_tpl; ti++)
        for (int i = 0; i < R->n_arms; i++) {
            const nstat *S = st_at(A, R, ti, i);
            fprintf(o, "**%s, %s prompts**\n\n| Length |", R->arms[i].name, R->tpl_chat[ti] ? "chat" : "raw");
            for (int p = 0; p < R->n_positions; p++) fprintf(o, " %d %% |", R->positions[p]);
            fprintf(o, " all |\n|---:|");
            for (int p = 0; p <= R->n_positions; p++) fprintf(o, "---:|");
            fprintf(o, "\n");
            for (int l = 0; l < R->n_lengths; l++) {
                size_t rn = 0, rk = 0;
                fprintf(o, "| %d |", R->lengths[l]);
                for (int p = 0; p < R->n_positions; p++) {
                    size_t g = (size_t)l * (size_t)R->n_positions + (size_t)p;
                    rn += S->g_n[g];
                    rk += S->g_exact[g];
                    if (S->g_n[g]) fprintf(o, " %zu/%zu |", S->g_exact[g], S->g_n[g]);
                    else fprintf(o, " " REPORT_NA " |");
                }
                fprintf(o, " %zu/%zu |\n", rk, rn);
            }
            fprintf(o, "\n");
        }
}

static void readme_paired(FILE *o, const nres *R, const nan_t *A) {
    const char *ref = R->arms[R->ref].name;
    fprintf(o, "## Paired statistics\n\nEach arm against %s on the same prompts. A *unit* is one (trial, "
            "length, depth) cell; in the pooled set its raw and chat twins are one unit (they share the key "
            "and the haystack), its accuracy difference the mean over its templates. The units of one trial "
            "share that trial's haystack (%d haystack%s here)%s. *b*: cells only the arm answers exactly; "
            "*c*: cells only %s does. *Differing*: units where a template's outcome differs. *Sign-flip p*: "
            "the exact two-sided sign-flip test of the summed per-unit differences (McNemar's exact test "
            "when a unit is one cell), Holm-adjusted over the arms of the set beside it. *MDD*: the smallest "
            "accuracy difference the test detects with %.0f %% power on these units, at best (every "
            "differing unit one way, in one template); ∞: no power at all. *Bound*: the one-sided 95 %% "
            "Clopper–Pearson bound on the share of differing units, which bounds |difference|. Δ log-prob: "
            "the arm's log-probability of the key minus %s's, per unit, mean with a circular bootstrap 95%% "
            "interval over units (%d resamples, seed %lu, blocks of 1) and its MDD (2.80 × the standard "
            "error). *Identical*: cells with the same greedy tokens and a bit-identical log-prob.\n\n",
            ref, R->trials, R->trials == 1 ? "" : "s",
            R->trials == 1 ? ": every unit rests on the same haystack, so the units are not independent draws"
                           : "",
            ref, 100 * NEEDLE_POWER, ref, STATS_BOOT_B, (unsigned long)STATS_BOOT_SEED);
    fprintf(o, "| Arm | Prompts | Cells | Accuracy arm / %s | b | c | Units | Differing | Sign-flip p (Holm) | MDD | "
            "Bound | Mean Δ log-prob (nats) | Δ log-prob MDD | Identical |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n", ref);
    for (int i = 0; i < R->n_arms; i++) {
        if (i == R->ref) continue;
        for (int set = 0; set < A->n_sets; set++) {
            const nstat *S = st_at(A, R, set, i);
            char pa[32], pb[32], pp[32], ph[32], ci[96], md[32], bd[32], lm[32];
            fmt_pct(S->pairs ? (double)(S->ref_exact + S->b - S->c) / (double)S->pairs : NAN, pa, sizeof pa);
            fmt_pct(S->pairs ? (double)S->ref_exact / (double)S->pairs : NAN, pb, sizeof pb);
            fmt_p(S->p, pp, sizeof pp);
            fmt_p(S->p_holm, ph, sizeof ph);
            fmt_lp_ci(&S->dlp, ci, sizeof ci);
            if (isinf(S->mdd)) snprintf(md, sizeof md, "∞");
            else fmt_pct(S->mdd, md, sizeof md);
            fmt_pct(S->bound, bd, sizeof bd);
            if (isnan(S->dlp_mdd)) snprintf(lm, sizeof lm, REPORT_NA);
            else snprintf(lm, sizeof lm, "%.2g", S->dlp_mdd);
            fprintf(o, "| %s | %s | %zu | %s / %s | %zu | %zu | %zu | %zu | %s (%s) | %s | %s | %s | %s | %zu of %zu |\n",
                    R->arms[i].name, set_name(R, A, set), S->pairs, pa, pb, S->b, S->c, S->units, S->disc_units,
                    pp, ph, md, bd, ci, lm, S->identical, S->pairs);
        }
    }
    fprintf(o, "\n");
}

static void readme_disagree(FILE *o, const nres *R) {
    int shown = 0, total = 0;
    for (int ti = 0; ti < R->n_tpl; ti++)
        for (int li = 0; li < R->n_lengths; li++)
            for (int pi = 0; pi < R->n_positions; pi++)
                for (int t = 0; t < R->trials; t++) {
                    const needle_row *q = cell_row(R, ti, li, pi, t, R->ref);
                    for (int a = 0; q && a < R->n_arms; a++) {
                        const needle_row *r = cell_row(R, ti, li, pi, t, a);
                        if (a == R->ref || !r || r->exact == q->exact) continue;
                        if (!total++)
                            fprintf(o, "## Cells where an arm and the reference disagree\n\n| Template | Length "
                                    "| Depth | Trial | Key | Arm | Arm's answer | %s's answer |\n|---|---:|---:|"
                                    "---:|---:|---|---|---|\n", R->arms[R->ref].name);
                        if (shown >= MAX_SHOWN_DISAGREE) continue;
                        shown++;
                        fprintf(o, "| %s | %d | %d %% | %d | %u | %s | ", r->chat ? "chat" : "raw", r->length,
                                r->position, r->trial, r->key, r->arm);
                        md_text(o, r->generated, r->n_generated);
                        fprintf(o, " | ");
                        md_text(o, q->generated, q->n_generated);
                        fprintf(o, " |\n");
                    }
                }
    if (total > shown) fprintf(o, "\n(%d more in cells.tsv)\n", total - shown);
    if (total) fprintf(o, "\n");
}

/* The plain-language summary: sentences generated from the statistics. */
static void readme_support(FILE *o, const nres *R, const nan_t *A, const nclaim *cl, int n_cl) {
    const char *ref = R->arms[R->ref].name;
    int pooled = A->n_sets - 1;   /* the pooled set, or the only template */
    const nstat *Q = st_at(A, R, pooled, R->ref);
    char a[96], b[96];
    fprintf(o, "## What the numbers support\n\n");
    report_fmt_pct_ci(&Q->acc, a, sizeof a);
    fprintf(o, "- **The bench itself.** %s retrieves the key in %zu of %zu cells (%s)", ref, Q->exact, Q->n, a);
    if (R->n_lengths > 1) {
        fprintf(o, "; by length:");
        for (int l = 0; l < R->n_lengths; l++) {
            size_t n = 0, k = 0;
            for (int p = 0; p < R->n_positions; p++) {
                n += Q->g_n[(size_t)l * (size_t)R->n_positions + (size_t)p];
                k += Q->g_exact[(size_t)l * (size_t)R->n_positions + (size_t)p];
            }
            fmt_pct(n ? (double)k / (double)n : NAN, b, sizeof b);
            fprintf(o, " %d: %s%s", R->lengths[l], b, l + 1 < R->n_lengths ? "," : "");
        }
    }
    if (Q->n && Q->exact == 0)
        fprintf(o, ". The model never retrieves the key here, so accuracy cannot tell the arms apart: only "
                "the log-probability comparison is informative.\n");
    else if (Q->n && Q->exact == Q->n)
        fprintf(o, ". Every cell is retrieved, so accuracy has no room to show a loss below the ceiling; "
                "the log-probability comparison still does.\n");
    else fprintf(o, ".\n");
    for (int i = 0; i < R->n_arms; i++) {
        if (i == R->ref) continue;
        const nstat *S = st_at(A, R, pooled, i);
        const char *nm = R->arms[i].name, *what = R->arms[i].role == ROLE_FLOOR ? " (the fp32 control)"
                                                  : R->arms[i].role == ROLE_REPEAT ? " (a repeat of an arm)" : "";
        if (!S->pairs) { fprintf(o, "- **%s**%s: no cell measured on both arms.\n", nm, what); continue; }
        char un[128], pw[256], w[64], ph[32];
        fmt_units(R, A, pooled, S->units, un, sizeof un);
        fmt_p(S->p_holm, ph, sizeof ph);
        fmt_pct((double)(S->ref_exact + S->b - S->c) / (double)S->pairs, a, sizeof a);
        fmt_pct((double)S->ref_exact / (double)S->pairs, b, sizeof b);
        fprintf(o, "- **%s**%s: ", nm, what);
        if (S->identical == S->pairs) {
            fprintf(o, "identical to %s in all %zu cells (same greedy tokens, bit-identical log-probabilities).\n",
                    ref, S->pairs);
            continue;
        }
        verdict_words(S->v_acc, 0, w, sizeof w);
        fmt_power_acc(S, pw, sizeof pw);
        fprintf(o, "retrieval **%s** against %s: %s vs %s of %zu cells, %zu of %s differ (exact sign-flip test, "
                "Holm p = %s); %s", w, ref, a, b, S->pairs, S->disc_units, un, ph, pw);
        fmt_lp_ci(&S->dlp, a, sizeof a);
        verdict_words(S->v_lp, 1, w, sizeof w);
        fmt_power_lp(S, pw, sizeof pw);
        fmt_p(S->dlp_holm, ph, sizeof ph);
        if (isnan(S->dlp.est)) fprintf(o, ".\n");
        else
            fprintf(o, ". The key's log-probability: **%s**, mean Δ %s nats (bootstrap over units, Holm p = %s); "
                    "%s.\n", w, a, ph, pw);
    }
    if (R->floor >= 0) {
        const nstat *F = st_at(A, R, pooled, R->floor);
        fmt_lp_ci(&F->dlp, a, sizeof a);
        fprintf(o, "- **Against the control:** fp32 vs %s changes the outcome of %zu cells and moves the key's "
                "log-probability by %s nats on average; ", ref, F->b + F->c, a);
        int first = 1;
        for (int i = 0; i < R->n_arms; i++) {
            if (i == R->ref || i == R->floor) continue;
            const nstat *S = st_at(A, R, pooled, i);
            fmt_lp_ci(&S->dlp, b, sizeof b);
            fprintf(o, "%s%s changes %zu (Δ %s)", first ? "" : "; ", R->arms[i].name, S->b + S->c, b);
            first = 0;
        }
        fprintf(o, ".\n");
    }
    fprintf(o, "\nDefinitions: every test compares an arm with %s over *units* — one (trial, length, depth) "
            "cell, its raw and chat twins together (they share the key and the haystack) — at α = %.2g, "
            "Holm-adjusted over the arms. *Retrieval*: the exact sign-flip test of the per-unit accuracy "
            "differences (McNemar's exact test when a unit is one cell) says **lower** or **higher**; "
            "**equivalent within ±%.0f points** when the one-sided 95 %% Clopper–Pearson bound on the share "
            "of differing units is below %.0f %%; else **no detected difference**, which is not \"equal\". "
            "*Log-probability*: the bootstrap over units says lower or higher; equivalent within ±%.2g nats "
            "when the 90 %% interval lies inside the margin (TOST). Each verdict states its power: the "
            "smallest difference the grid detects with %.0f %% power (for retrieval at best: every differing "
            "unit one way, in one template), \"no power\" when that is above the margin. ",
            ref, NEEDLE_ALPHA, 100 * NEEDLE_EQ_SHARE, 100 * NEEDLE_EQ_SHARE, NEEDLE_LOGPROB_EPS,
            100 * NEEDLE_POWER);
    if (R->trials == 1)
        fprintf(o, "**This run rests on one haystack**: every unit shares it, so the units are not independent "
                "draws and the tests speak for this haystack only; equivalence is not assessed (run with "
                "`--trials 3` or more for independent haystacks). ");
    else
        fprintf(o, "The units of a trial share its haystack (%d haystacks); the tests treat the units as "
                "independent. ", R->trials);
    fprintf(o, "The table judges %s prompts; a template's verdict is added where it differs (every verdict is "
            "in summary.json).\n\n", set_name(R, A, pooled));
    fprintf(o, "| Claim | Verdict | Evidence |\n|---|---|---|\n");
    const char *pn = set_name(R, A, pooled);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n_cl; i++) {
            int is_pooled = !strcmp(cl[i].set, pn), differs = 0;
            for (int j = 0; j < n_cl && !is_pooled; j++)
                if (!strcmp(cl[j].set, pn) && !strcmp(cl[j].arm, cl[i].arm) && cl[j].kind == cl[i].kind)
                    differs = cl[j].verdict != cl[i].verdict && cl[i].verdict != STATS_NOT_COMPUTABLE;
            if (pass == 0 ? is_pooled : differs)
                fprintf(o, "| %s | **%s** | %s |\n", cl[i].claim, cl[i].words, cl[i].evidence);
        }
    if (!n_cl) fprintf(o, "| (no arm besides the reference) | **not measured** | |\n");
    fprintf(o, "\n");
}

static void readme_write(FILE *o, const nres *R, const nan_t *A, const nclaim *cl, int n_cl, const int *drawn) {
    fprintf(o, "# strata needle results: %s\n\n", R->tag);
    for (int i = 0; i < R->n_warnings; i++)
        if (strstr(R->warnings[i], "NOT bit-identical"))
            fprintf(o, "> **WARNING — %s**\n\n", R->warnings[i]);
    if (!R->complete)
        fprintf(o, "> **Partial results:** the run stopped before every cell was measured (%s); continue it "
                "with `strata-driver needle --resume <this folder>`.\n\n", R->status);
    fprintf(o, "Needle in a haystack: does the KV-cache format change whether %s retrieves a 7-digit key "
            "hidden in a long prompt? Each cell is one prompt (length, needle depth, trial, template). "
            "Every arm answers it greedily — exact match: the first digits of the answer are the key — "
            "and scores the key teacher-forced: the sum of the log-probabilities of its tokens, in nats. "
            "Every arm is compared with the reference, %s, unit by unit (a unit: one length, depth and trial, "
            "its templates together).\n\n", R->model_path,
            R->arms[R->ref].name);
    readme_setup(o, R, A);
    if (R->n_warnings) {
        fprintf(o, "## Warnings recorded by the run\n\n");
        for (int i = 0; i < R->n_warnings; i++) fprintf(o, "- %s\n", R->warnings[i]);
        fprintf(o, "\n");
    }
    readme_support(o, R, A, cl, n_cl);
    readme_accuracy(o, R, A);
    readme_paired(o, R, A);
    readme_disagree(o, R);

    fprintf(o, "## Plots\n\n");
    for (int diff = 0; diff < 2; diff++)
        for (int a = 0; a < R->n_arms; a++) {
            if (!drawn[diff * R->n_arms + a]) continue;
            char stem[64];
            snprintf(stem, sizeof stem, "%s_%d", diff ? "diff" : "accuracy", a);
            fprintf(o, "%s %s%s%s by length and depth ([script](plots/%s.gp)):\n\n"
                    "![%s](plots/%s.png)\n\n", diff ? "Accuracy difference" : "Accuracy of", R->arms[a].name,
                    diff ? " − " : "", diff ? R->arms[R->ref].name : "", stem, stem, stem);
        }

    fprintf(o, "## Method\n\n");
    fprintf(o, "- **Prompt**: [BOS] + template head + haystack with the needle(s) + the question. The "
            "haystack is the corpus from a line drawn per trial (the same tokens for every length, depth "
            "and template of a trial), cut to fill the length and backed up to a sentence boundary (a "
            "token ending in '.', '!', '?' or a newline). The needle, \"The special magic number is "
            "NNNNNNN.\", goes in at the depth's share of the haystack, backed up to a sentence boundary. "
            "Raw prompts end \"… What is the special magic number mentioned in the text above? The special "
            "magic number is\"; chat prompts put the haystack and the question in the user turn of the "
            "model's template and open the assistant turn with \"The special magic number is\".\n");
    fprintf(o, "- **Keys**: 7-digit numbers from splitmix64 seeded by (seed, length, depth, trial): the same "
            "for every arm and template.\n");
    fprintf(o, "- **Per cell and arm**: prefill the prompt, generate %d tokens greedily (ties to the lowest "
            "id), truncate back, prefill the key's tokens and sum ln p of each (log-softmax in double, "
            "docs/DESIGN.md §3.4). Consecutive cells reuse their longest common token prefix: the arms "
            "truncate back to it rather than to 0, which gives bit-identical rows (docs/DESIGN.md §2.4).\n\n", R->gen);
    fprintf(o, "## Limitations\n\n");
    fprintf(o, "- One model, one corpus, one needle phrasing: accuracy here is this task's, not the model's "
            "long-context ability in general.\n");
    fprintf(o, "- %d trial%s per (length, depth, template): per-cell accuracies in the grids rest on very few "
            "prompts; the pooled tests are the ones to read.\n", R->trials, R->trials > 1 ? "s" : "");
    if (R->trials == 1)
        fprintf(o, "- One haystack: every unit shares the same text, so the tests' units are not independent "
                "and a verdict holds for this haystack, not for the corpus; equivalence is not assessed.\n");
    else
        fprintf(o, "- %d haystacks: the units of a trial share its haystack, which the tests (treating units as "
                "independent) do not model; a haystack that helps or hurts every cell of its trial narrows the "
                "intervals.\n", R->trials);
    fprintf(o, "- The retrieval test only sees units where the arms disagree; \"no detected difference\" is not "
            "\"equal\", and the MDD says how large a difference could have gone unseen.\n");
    fprintf(o, "- Exact match is strict (the first digit run must be the whole key); the log-probability "
            "shows partial knowledge that accuracy misses.\n\n");
    fprintf(o, "## Reproduce\n\n```sh\n%s\n```\n\nRe-render this folder from cells.tsv and meta.json (no model "
            "needed): `strata-driver report <this folder>`.\n\n", R->command);
    fprintf(o, "## Provenance\n\n- Raw data: `meta.json`, `cells.tsv` (%zu rows: one per cell, template and arm)%s.\n",
            R->n_rows, R->n_dropped ? "; a cut-off last line was ignored" : "");
    fprintf(o, "- Derived (generated, do not edit): `README.md`, `summary.json`, `plots/*.gp` and `plots/*.png`; "
            "`report` also writes each plot's `.dat` data and an `.svg`, which git does not keep.\n");
    fprintf(o, "- Engine %s, git `%s`, model sha256 `%s`, corpus sha256 `%s`, run on %s, %s.\n", R->engine,
            R->git, R->model_sha, R->corpus_sha, R->machine, R->date);
}

/* ============================================================================================
 * needle_report_render
 * ========================================================================================== */

int needle_report_render(const char *dir, char *err, size_t errlen) {
    nres R;
    nan_t A;
    int rc = -1, *drawn = NULL, n_cl = 0;
    nclaim *cl = NULL;
    memset(&A, 0, sizeof A);
    if (nres_load(dir, &R, err, errlen)) goto done;
    if (nan_run(&R, &A, err, errlen)) goto done;
    int max_cl = 2 * A.n_sets * R.n_arms;
    if (!(cl = calloc((size_t)max_cl, sizeof *cl)) || !(drawn = calloc(2 * (size_t)R.n_arms, sizeof *drawn))) {
        errmsg_set(err, errlen, -1, "out of memory");
        goto done;
    }
    n_cl = make_claims(&R, &A, cl, max_cl);
    if (plots_render(dir, &R, &A, drawn, err, errlen)) goto done;
    json_t *sum = summary_build(&R, &A, cl, n_cl);
    report_tmp_file out;
    if (!sum) { errmsg_set(err, errlen, -1, "out of memory building summary.json"); goto done; }
    if (report_tmp_open(&out, dir, "summary.json", err, errlen)) { json_decref(sum); goto done; }
    int jrc = json_dumpf(sum, out.f, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12) | JSON_ENSURE_ASCII);
    json_decref(sum);
    if (report_tmp_commit(&out, jrc != 0, err, errlen)) goto done;
    if (report_tmp_open(&out, dir, "README.md", err, errlen)) goto done;
    readme_write(out.f, &R, &A, cl, n_cl, drawn);
    if (report_tmp_commit(&out, 0, err, errlen)) goto done;
    rc = 0;
done:
    if (rc) report_err_clean(err, errlen);   /* it may quote a field of the folder */
    free(cl);
    free(drawn);
    nan_free(&A, &R);
    nres_free(&R);
    return rc;
}

/* ============================================================================================
 * needle_report_compare
 * ========================================================================================== */

static void cmp_setup(FILE *o, const char *name, const char *a, const char *b) {
    fprintf(o, "| %s | ", name);
    report_md_cell(o, a);   /* from meta.json: '|' escaped (control bytes were on loading) */
    fputs(" | ", o);
    report_md_cell(o, b);
    fprintf(o, " | %s |\n", strcmp(a, b) ? "**differs**" : "same");
}

static void list_text(const int *v, int n, char *buf, size_t len) {
    size_t w = 0;
    buf[0] = 0;
    for (int i = 0; i < n && w < len; i++) w += (size_t)snprintf(buf + w, len - w, "%s%d", i ? "," : "", v[i]);
}

int needle_report_compare(const char *dir1, const char *dir2, FILE *out, char *err, size_t errlen) {
    nres R[2];
    nan_t A[2];
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
        if (nres_load(dirs[k], &R[k], err, errlen) || nan_run(&R[k], &A[k], err, errlen)) goto done;
    }
    char a[256], b[256];
    fprintf(out, "# strata needle comparison: %s vs %s\n\n| | (1) `%s` | (2) `%s` | |\n|---|---|---|---|\n",
            R[0].tag, R[1].tag, dir1, dir2);
    cmp_setup(out, "Model", R[0].model_path, R[1].model_path);
    cmp_setup(out, "Model sha256", R[0].model_sha, R[1].model_sha);
    cmp_setup(out, "Corpus sha256", R[0].corpus_sha, R[1].corpus_sha);
    cmp_setup(out, "Reference arm", R[0].arms[R[0].ref].name, R[1].arms[R[1].ref].name);
    list_text(R[0].lengths, R[0].n_lengths, a, sizeof a);
    list_text(R[1].lengths, R[1].n_lengths, b, sizeof b);
    cmp_setup(out, "Lengths", a, b);
    list_text(R[0].positions, R[0].n_positions, a, sizeof a);
    list_text(R[1].positions, R[1].n_positions, b, sizeof b);
    cmp_setup(out, "Depths", a, b);
    snprintf(a, sizeof a, "%d keys, %d trials, seed %ld", R[0].keys, R[0].trials, R[0].seed);
    snprintf(b, sizeof b, "%d keys, %d trials, seed %ld", R[1].keys, R[1].trials, R[1].seed);
    cmp_setup(out, "Needles, trials, seed", a, b);
    cmp_setup(out, "Engine", R[0].engine, R[1].engine);
    cmp_setup(out, "Git", R[0].git, R[1].git);
    cmp_setup(out, "Date", R[0].date, R[1].date);
    fprintf(out, "\n| Arm | Prompts | Accuracy (1) | Accuracy (2) | Sign-flip p vs ref (1) | (2) | Mean Δ log-prob (1) "
            "| (2) |\n|---|---|---|---|---:|---:|---|---|\n");
    for (int i = 0; i < R[0].n_arms; i++) {
        int j = -1;
        for (int k = 0; k < R[1].n_arms && j < 0; k++) if (!strcmp(R[1].arms[k].name, R[0].arms[i].name)) j = k;
        if (j < 0) continue;
        for (int s = 0; s < A[0].n_sets; s++) {
            int s2 = -1;
            for (int k = 0; k < A[1].n_sets && s2 < 0; k++)
                if (!strcmp(set_name(&R[0], &A[0], s), set_name(&R[1], &A[1], k))) s2 = k;
            if (s2 < 0) continue;
            const nstat *X = st_at(&A[0], &R[0], s, i), *Y = st_at(&A[1], &R[1], s2, j);
            char x1[96], y1[96], x2[32], y2[32], x3[96], y3[96];
            report_fmt_pct_ci(&X->acc, x1, sizeof x1);
            report_fmt_pct_ci(&Y->acc, y1, sizeof y1);
            fmt_p(X->p, x2, sizeof x2);
            fmt_p(Y->p, y2, sizeof y2);
            fmt_lp_ci(&X->dlp, x3, sizeof x3);
            fmt_lp_ci(&Y->dlp, y3, sizeof y3);
            fprintf(out, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", R[0].arms[i].name, set_name(&R[0], &A[0], s),
                    x1, y1, x2, y2, x3, y3);
        }
    }
    fprintf(out, "\n");
    rc = ferror(out) ? errmsg_set(err, errlen, -1, "write error on the comparison output") : 0;
done:
    if (rc) report_err_clean(err, errlen);   /* it may quote a field of a folder */
    for (int k = 0; k < 2; k++) {
        nan_free(&A[k], &R[k]);
        nres_free(&R[k]);
    }
    return rc;
}
