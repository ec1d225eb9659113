/* report_needle_load.c — a needle results folder loaded (see report_needle_internal.h): meta.json's
 * fields, the grid, the arms and their roles, the rows of cells.tsv indexed by cell and arm. */
#include "driver/report/report_needle_internal.h"
#include "kernels/errmsg.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const role_names[] = {"reference", "floor", "repeat", "test"};

const char *needle_role_name(int role) { return role_names[role]; }

void needle_results_free(needle_results *R) {
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

double needle_results_num(json_t *o, const char *k) {
    json_t *v = o ? json_object_get(o, k) : NULL;
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static size_t idx_of(const needle_results *R, int ti, int li, int pi, int t, int a) {
    return ((((size_t)ti * (size_t)R->n_lengths + (size_t)li) * (size_t)R->n_positions + (size_t)pi) *
                (size_t)R->trials + (size_t)t) * (size_t)R->n_arms + (size_t)a;
}

const needle_row *needle_results_row(const needle_results *R, int ti, int li, int pi, int t, int a) {
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


/* The steps of needle_results_load below read one part of meta.json (m, read from path) or the
 * rows into R; those that can fail return 0, or -1 with the message in err [errlen]. */

/* Where the run came from and what it cost: strings, model, corpus, plan sizes, sessions. */
static void load_provenance(needle_results *R, json_t *m) {
    json_t *model = json_object_get(m, "model"), *corpus = json_object_get(m, "corpus");
    json_t *cost = json_object_get(m, "cost");
    R->tag = jstr(m, "tag"); R->date = jstr(m, "date"); R->command = jstr(m, "command");
    R->git = jstr(m, "git"); R->engine = jstr(m, "engine"); R->machine = jstr(m, "machine");
    R->status = jstr(m, "status");
    R->model_path = jstr(model, "path"); R->model_sha = jstr(model, "sha256");
    R->model_arch = jstr(model, "arch"); R->chat_template = jstr(model, "chat_template");
    R->chat_system = jstr(model, "chat_system");
    R->corpus_path = jstr(corpus, "path"); R->corpus_desc = jstr(corpus, "description");
    R->corpus_sha = jstr(corpus, "sha256");
    R->n_vocab = needle_results_num(model, "n_vocab"); R->n_ctx = needle_results_num(model, "n_ctx"); R->n_layer = needle_results_num(model, "n_layer");
    R->wall = needle_results_num(m, "wall_seconds");
    R->n_cells_plan = needle_results_num(json_object_get(m, "plan"), "cells");
    R->cap_len = needle_results_num(json_object_get(m, "plan"), "length_cap");
    R->est_seconds = needle_results_num(cost, "estimate_seconds");
    R->prefill_tokens = needle_results_num(cost, "prefill_tokens_per_arm");
    R->prompt_tokens = needle_results_num(cost, "prompt_tokens_per_arm");
    R->complete = json_is_true(json_object_get(m, "complete"));
    double ss = needle_results_num(m, "sessions");
    R->sessions = isnan(ss) ? 1 : (int)ss;
}

/* The plan: the grid of lengths and positions (sorted), keys, trials, generated tokens, seed, and
 * the templates (raw, chat: at most two). */
static int load_plan(needle_results *R, json_t *m, const char *path, char *err, size_t errlen) {
    json_t *op = json_object_get(m, "options");
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
    double v = needle_results_num(op, "keys"); R->keys = isnan(v) ? 1 : (int)v;
    v = needle_results_num(op, "trials");
    if (isnan(v) || v < 1 || v > 10000) return errmsg_set(err, errlen, -1, "%s: options.trials is missing", path);
    R->trials = (int)v;
    v = needle_results_num(op, "gen"); R->gen = isnan(v) ? 0 : (int)v;
    v = needle_results_num(op, "seed"); R->seed = isnan(v) ? -1 : (long)v;
    json_t *tp = json_object_get(m, "templates");
    for (size_t i = 0; json_is_array(tp) && i < json_array_size(tp) && R->n_tpl < 2; i++) {
        const char *s = json_string_value(json_array_get(tp, i));
        if (s && (!strcmp(s, "raw") || !strcmp(s, "chat"))) R->tpl_chat[R->n_tpl++] = !strcmp(s, "chat");
    }
    if (!R->n_tpl) return errmsg_set(err, errlen, -1, "%s: no \"templates\"", path);
    return 0;
}

/* The arms (unique valid names), the reference among them, each arm's role, and the warnings. */
static int load_arms(needle_results *R, json_t *m, const char *path, char *err, size_t errlen) {
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
        if (!nm || !arm_valid_name(nm)) return errmsg_set(err, errlen, -1, "%s: arm %d has no valid name", path, i);
        snprintf(R->arms[i].name, sizeof R->arms[i].name, "%s", nm);
        snprintf(R->arms[i].kv_k, sizeof R->arms[i].kv_k, "%s", jstr(a, "kv_k"));
        snprintf(R->arms[i].kv_v, sizeof R->arms[i].kv_v, "%s", jstr(a, "kv_v"));
        R->arms[i].kv_bytes = needle_results_num(a, "kv_bytes_per_token");
        for (int j = 0; j < i; j++)
            if (!strcmp(R->arms[j].name, nm)) return errmsg_set(err, errlen, -1, "%s: arm %s twice", path, nm);
        if (!strcmp(nm, ref) && R->ref < 0) R->ref = i;
    }
    if (R->ref < 0) return errmsg_set(err, errlen, -1, "%s: the reference arm %s is not among the arms", path, ref);
    for (int i = 0; i < R->n_arms; i++) {
        needle_results_arm *a = &R->arms[i];
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
    return 0;
}

/* cells.tsv's rows, indexed by template, length, position, trial and arm (R->idx): every row must be
 * in the plan, and each cell at most once per arm. */
static int load_rows(const char *dir, needle_results *R, char *err, size_t errlen) {
    char path[4096];
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

int needle_results_load(const char *dir, needle_results *R, char *err, size_t errlen) {
    char path[4096];
    memset(R, 0, sizeof *R);
    if (report_path(path, sizeof path, dir, "meta.json", err, errlen)) return -1;
    if (!(R->meta = report_json_load(path, err, errlen))) return -1;   /* bounded; control bytes escaped */
    json_t *m = R->meta;
    const char *kind = json_string_value(json_object_get(m, "kind"));
    if (!kind || strcmp(kind, "needle")) return errmsg_set(err, errlen, -1, "%s: not a needle run", path);
    load_provenance(R, m);
    if (load_plan(R, m, path, err, errlen) || load_arms(R, m, path, err, errlen)) return -1;
    return load_rows(dir, R, err, errlen);
}
