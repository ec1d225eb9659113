/* tokfile.c — token-ids files (see tokfile.h). */
#include "proto/tokfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/errmsg.h"
#include "proto/proto.h"

int tokfile_parse(const char *name, const char *text, size_t len, int32_t **ids, size_t *n, char *err,
                  size_t errlen) {
    size_t k = 0, cap = 1024;
    int32_t *v = malloc(cap * sizeof *v);   /* [cap] ids, grown by doubling */
    int ret = -1;
    if (!v) { errmsg_set(err, errlen, -1, "out of memory"); goto done; }
    for (size_t i = 0; i < len;) {
        char c = text[i];
        if (c == ',' || c == ' ' || c == '\n' || c == '\t' || c == '\r') { i++; continue; }
        if (c < '0' || c > '9') {
            errmsg_set(err, errlen, -1, "%s: unexpected character '%c' at byte %zu (token ids are decimal, "
                       "separated by commas or whitespace)", name, c, i);
            goto done;
        }
        long long x = 0;
        while (i < len && text[i] >= '0' && text[i] <= '9') {
            x = x * 10 + (text[i++] - '0');
            if (x > INT32_MAX) { errmsg_set(err, errlen, -1, "%s: token id too large at byte %zu", name, i); goto done; }
        }
        if (k == cap) {
            int32_t *nv = realloc(v, 2 * cap * sizeof *v);
            if (!nv) { errmsg_set(err, errlen, -1, "out of memory"); goto done; }
            v = nv;
            cap *= 2;
        }
        v[k++] = (int32_t)x;
    }
    if (k == 0) { errmsg_set(err, errlen, -1, "%s holds no token ids", name); goto done; }
    *ids = v;
    *n = k;
    v = NULL;
    ret = 0;
done:
    free(v);
    return ret;
}

int tokfile_read(const char *path, int32_t **ids, size_t *n, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");             /* a pipe works too: read to EOF */
    char *text = NULL;                       /* [cap] the file so far, len bytes used */
    size_t len = 0, cap = 0, got;
    int ret = -1;
    if (!f) return errmsg_set(err, errlen, -1, "cannot open %s: %s", path, strerror(errno));
    do {
        if (len == cap) {
            cap = cap ? 2 * cap : 65536;
            char *nt = realloc(text, cap);
            if (!nt) { errmsg_set(err, errlen, -1, "out of memory"); goto done; }
            text = nt;
        }
        got = fread(text + len, 1, cap - len, f);
        len += got;
        if (len > PROTO_MAX_TEXT) { errmsg_set(err, errlen, -1, "%s: larger than 64 MiB", path); goto done; }
    } while (got > 0);
    if (ferror(f)) { errmsg_set(err, errlen, -1, "cannot read %s", path); goto done; }
    ret = tokfile_parse(path, text, len, ids, n, err, errlen);
done:
    free(text);
    fclose(f);
    return ret;
}
