/* passages.c — the controlled depth design: the plan, passages.tsv's rows, the measurement of one
 * depth's passages (see passages.h).
 *
 * Reading order: the plan; the TSV; dumps; passages_measure; JSON. */
#include "driver/passages.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "driver/arm.h"
#include "kernels/errmsg.h"

/* ============================================================================================
 * The plan
 * ========================================================================================== */

int passages_default_max_depth(size_t n_tokens, uint64_t n_ctx, int fork_n, int N, int L) {
    int64_t by_doc = (int64_t)n_tokens - 1 - fork_n - (int64_t)N * L;
    int64_t by_ctx = (int64_t)n_ctx - L;
    int64_t d = by_doc < by_ctx ? by_doc : by_ctx;
    if (d > INT32_MAX / 2) d = INT32_MAX / 2;
    return d > 0 ? (int)d : 0;
}

int passages_plan(size_t n_tokens, int D, int fork_n, uint64_t n_ctx, int N, int L, int *starts, char *err,
                  size_t errlen) {
    if (N < 1 || L < 1 || D < 0 || fork_n < 0 || !starts)
        return errmsg_set(err, errlen, -1, "--passages %d --passage-len %d: give at least one passage of at least "
                          "one token", N, L);
    int64_t S = (int64_t)D + fork_n;
    int64_t A = (int64_t)n_tokens - 1 - S;   /* tokens after S that have a next token */
    if (A < (int64_t)N * L)
        return errmsg_set(err, errlen, -1, "the document is too short for --passages %d --passage-len %d: its %zu "
                          "tokens leave %lld with a next token after the deepest prefix (%d) and the fork room (%d), fewer "
                          "than the %lld the passages need (lower --max-depth, --passages or --passage-len, or use a longer "
                          "document)", N, L, n_tokens, (long long)(A > 0 ? A : 0), D, fork_n,
                          (long long)N * L);
    if ((uint64_t)D + (uint64_t)L > n_ctx)
        return errmsg_set(err, errlen, -1, "--passage-len %d does not fit after the deepest prefix (%d tokens) in "
                          "the context of %llu tokens: lower --max-depth or --passage-len", L, D,
                          (unsigned long long)n_ctx);
    for (int j = 0; j < N; j++)
        starts[j] = (int)(S + (N > 1 ? (int64_t)j * (A - L) / (N - 1) : 0));
    return 0;
}

int passages_base_depth(const int32_t *tokens, size_t n_tokens, int32_t bos) {
    return tokens && n_tokens > 0 && bos >= 0 && tokens[0] == bos ? 1 : 0;
}

/* ============================================================================================
 * passages.tsv
 * ========================================================================================== */

FILE *passages_tsv_open(const char *dir, char *err, size_t errlen) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, PASSAGES_FILE) >= (int)sizeof path) {
        errmsg_set(err, errlen, -1, "path too long: %s/%s", dir, PASSAGES_FILE);
        return NULL;
    }
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%s\n", PASSAGES_HEADER) < 0) {
        errmsg_set(err, errlen, -1, "cannot create %s: %s", path, strerror(errno));
        if (f) fclose(f);
        return NULL;
    }
    return f;
}

/* the depth, passage and start columns, then positions.tsv's row (its position, arm and metric
 * columns: driver/stats.h's stats_position_cols, the writer positions.tsv uses); a bad arm name
 * writes nothing */
int passages_tsv_row(FILE *f, int depth, int j, int start, int i, const char *arm, const stats_row *r) {
    if (!f || !r || !arm_valid_name(arm)) return -1;
    int rc = fprintf(f, "%d\t%d\t%d\t%d\t%s", depth, j, start, i, arm) < 0;
    rc |= stats_position_cols(f, r);
    rc |= fputc('\n', f) == EOF;
    return rc ? -1 : 0;
}

/* ============================================================================================
 * Dumps (tests): each arm's rows of one passage
 * ========================================================================================== */

static int dump_open(const char *dir, const char *arm, int depth, int j, FILE **f, char *err, size_t errlen) {
    char name[256], path[4096];
    snprintf(name, sizeof name, "%s", arm);
    for (char *q = name; *q; q++)
        if (*q == '/' || *q == ':') *q = '_';
    snprintf(path, sizeof path, "%s/%s-p%d-%d.f32", dir, name, depth, j);
    if (!(*f = fopen(path, "wb"))) return errmsg_set(err, errlen, -1, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

/* ============================================================================================
 * The measurement
 * ========================================================================================== */

int passages_measure(const passages_ops *ops, int depth, const int *starts, int N, int L, int chunk, FILE *out,
                     const char *dump_dir, char *err, size_t errlen) {
    const int n = ops->n_arms, V = ops->V;
    FILE **dump = dump_dir ? calloc((size_t)n, sizeof *dump) : NULL;   /* [n] this passage's dump files */
    int rc = 0;
    if (dump_dir && !dump) return errmsg_set(err, errlen, -1, "out of memory");
    if (chunk < 1) chunk = 1;
    for (int j = 0; j < N && !rc; j++) {
        for (int a = 0; dump && a < n && !rc; a++) rc = dump_open(dump_dir, ops->names[a], depth, j, &dump[a], err, errlen);
        for (int i0 = 0; i0 < L && !rc;) {
            int m = L - i0 < chunk ? L - i0 : chunk;
            const stats_row *pr = NULL;
            const float *const *rows = NULL;
            if ((rc = ops->score(ops->ctx, depth + i0, starts[j] + i0, m, &pr, &rows, err, errlen))) break;
            for (int i = 0; i < m && !rc; i++)
                for (int a = 0; a < n && !rc; a++)
                    if (a != ops->ref &&
                        passages_tsv_row(out, depth, j, starts[j], i0 + i, ops->names[a], &pr[(size_t)i * n + a]))
                        rc = errmsg_set(err, errlen, -1, "cannot format a %s row", PASSAGES_FILE);
            for (int a = 0; dump && a < n && !rc; a++)
                if (fwrite(rows[a], sizeof(float), (size_t)m * V, dump[a]) != (size_t)m * V)
                    rc = errmsg_set(err, errlen, -1, "cannot write a row dump: %s", strerror(errno));
            ops->release(ops->ctx);
            i0 += m;
        }
        for (int a = 0; dump && a < n; a++) {
            if (dump[a] && fclose(dump[a]) && !rc) rc = errmsg_set(err, errlen, -1, "cannot write a row dump");
            dump[a] = NULL;
        }
        if (!rc) rc = ops->truncate(ops->ctx, depth, err, errlen);
    }
    free(dump);
    return rc;
}

/* ============================================================================================
 * JSON
 * ========================================================================================== */

json_t *passages_json(int N, int L, int base_depth, const int *starts) {
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "n", json_integer(N));
    json_object_set_new(o, "len", json_integer(L));
    if (starts) {
        json_t *s = json_array();
        for (int j = 0; s && j < N; j++) json_array_append_new(s, json_integer(starts[j]));
        json_object_set_new(o, "base_depth", json_integer(base_depth));
        json_object_set_new(o, "starts", s ? s : json_null());
    }
    return o;
}
