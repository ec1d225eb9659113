/* needle_rows.c — cells.tsv of the needle bench (see needle.h): a row written, the rows read back
 * and checked (docs/DESIGN.md §9). */
#include "driver/needle/needle.h"
#include "driver/report/report_internal.h"
#include "kernels/errmsg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define N_FIELDS           14

static void write_ids(FILE *f, const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", ids[i]);
}

int needle_row_write(FILE *f, const needle_row *r) {
    if (!arm_valid_name(r->arm)) return -1;
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

/* Cuts line at its tabs into fld [N_FIELDS]; returns the count of fields (N_FIELDS + 1: more). */
static int split_fields(char *line, char *fld[N_FIELDS]) {
    int nf = 0;
    for (char *p = line;; ) {
        if (nf == N_FIELDS) { nf++; break; }
        fld[nf++] = p;
        char *t = strchr(p, '\t');
        if (!t) break;
        *t = 0;
        p = t + 1;
    }
    return nf;
}

/* One row's fields into *r (zeroed by the caller; r->generated, gold and gen malloc'd, freed by
 * needle_rows_free), every value checked, and the exact flag and answer against the generated text.
 * Returns 0, or -1 with the message (path:lineno) in err. */
static int parse_row(needle_row *r, char *fld[N_FIELDS], const char *path, long lineno, char *err, size_t errlen) {
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
    if (bad || chat < 0 || errno || end == fld[8] || *end || !arm_valid_name(fld[5]) || v[6] >= v[5]) {
        return errmsg_set(err, errlen, -1, "%s:%ld: a value is malformed or out of range", path, lineno);
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
        return errmsg_set(err, errlen, -1, "%s:%ld: a bad escape in a text field", path, lineno);
    }
    memcpy(r->answer, fld[7], (size_t)al + 1);
    if (!(r->generated = malloc((size_t)gl + 1))) return errmsg_set(err, errlen, -1, "out of memory");
    memcpy(r->generated, fld[11], (size_t)gl + 1);
    r->n_generated = (size_t)gl;
    if (parse_ids(fld[12], &r->gold, &r->n_gold) || parse_ids(fld[13], &r->gen, &r->n_gen) || !r->n_gold) {
        return errmsg_set(err, errlen, -1, "%s:%ld: bad token ids", path, lineno);
    }
    char want[32];
    needle_first_digits(r->generated, r->n_generated, want, sizeof want);
    char key[16];
    snprintf(key, sizeof key, "%u", r->key);
    if (strcmp(want, r->answer) || r->exact != !strcmp(r->answer, key)) {
        return errmsg_set(err, errlen, -1, "%s:%ld: exact/answer do not agree with the generated text", path, lineno);
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
        int nf = split_fields(line, fld);
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
        if (parse_row(r, fld, path, lineno, err, errlen)) goto done;
    }
    if (len == -2) goto done;   /* a line over REPORT_LINE_MAX: err says so */
    if (lineno == 0) { errmsg_set(err, errlen, -1, "%s is empty", path); goto done; }
    rc = 0;
done:
    free(line);
    fclose(f);
    return rc;
}
