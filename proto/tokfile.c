/* tokfile.c — token-ids files (see tokfile.h). */
#include "proto/tokfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/errmsg.h"
#include "proto/proto.h"
#include "proto/safeio.h"

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
            char shown[8];   /* the byte as text, or \xHH: a file's bytes never reach a terminal raw */
            if (c > 0x20 && c < 0x7f) snprintf(shown, sizeof shown, "%c", c);
            else snprintf(shown, sizeof shown, "\\x%02x", (unsigned char)c);
            errmsg_set(err, errlen, -1, "%s: unexpected character '%s' at byte %zu (token ids are decimal, "
                       "separated by commas or whitespace)", name, shown, i);
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
    char *text = NULL;   /* the whole file, NUL after it */
    size_t len = 0;
    /* a regular file only: a FIFO or device is refused before any read could block */
    if (safeio_read_all(path, 0, PROTO_MAX_TEXT, &text, &len, err, errlen)) return -1;
    int ret = tokfile_parse(path, text, len, ids, n, err, errlen);
    free(text);
    return ret;
}
