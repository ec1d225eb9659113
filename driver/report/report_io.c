/* report_io.c — a results folder as untrusted input, and the files written into it.
 *
 * A results folder may come from someone else (docs/DESIGN.md §4.11): every file in it is opened
 * through proto/safeio.h with SAFEIO_NOFOLLOW (a symbolic link, a FIFO, a device or a directory
 * where a file is expected is refused before any read can block), meta.json is read whole up to
 * REPORT_JSON_MAX and TSV lines up to REPORT_LINE_MAX, every string of meta.json has its control
 * bytes escaped on loading, and strings written into a gnuplot script are escaped for gnuplot's
 * double-quoted string syntax. Outputs are created relative to an opened directory (openat) with
 * O_CREAT | O_EXCL | O_NOFOLLOW after the old name is removed, so a planted link or hard link at an
 * output name is replaced, never written through, and a plots/ that is a link is refused.
 *
 * Reading order: reading; strings; the output folder. */
#include "driver/report/report_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "proto/safeio.h"

/* ============================================================================================
 * Reading
 * ========================================================================================== */

/* A copy of string x with its control bytes escaped ("a\nb" becomes the six characters a\x0ab,
 * safeio_escape), or NULL with *oom = 0 when x has none (it is kept as it is). */
static json_t *escaped_copy(json_t *x, int *oom) {
    const char *s = json_string_value(x);
    size_t n = json_string_length(x), i = 0;
    *oom = 0;
    while (i < n && (unsigned char)s[i] >= 0x20 && s[i] != 0x7f) i++;
    if (i == n) return NULL;
    /* jansson refuses \u0000 (no JSON_ALLOW_NUL), so s has no NUL; the escaped text is UTF-8 */
    char *e = malloc(4 * n + 1);   /* [4n+1] every byte may become \xHH */
    json_t *r = e ? json_string(safeio_escape(e, 4 * n + 1, s)) : NULL;
    free(e);
    *oom = !r;
    return r;
}

/* Escapes the control bytes of every string in v (recursively) in place, so that no string from
 * the folder can start a new line in a README table, a gnuplot script or the terminal. Strings
 * without control bytes are untouched. Returns 0, or -1 when out of memory. */
static int clean_strings(json_t *v) {
    int oom = 0;
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        void *tmp;
        json_object_foreach_safe(v, tmp, k, x) {
            if (!json_is_string(x)) {
                if (clean_strings(x)) return -1;
                continue;
            }
            json_t *r = escaped_copy(x, &oom);   /* replacing frees x */
            if (oom || (r && json_object_set_new(v, k, r))) return -1;
        }
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            json_t *x = json_array_get(v, i);
            if (!json_is_string(x)) {
                if (clean_strings(x)) return -1;
                continue;
            }
            json_t *r = escaped_copy(x, &oom);   /* replacing frees x */
            if (oom || (r && json_array_set_new(v, i, r))) return -1;
        }
    }
    return 0;
}

json_t *report_json_load(const char *path, char *err, size_t errlen) {
    char *buf = NULL;
    size_t len = 0;
    if (safeio_read_all(path, SAFEIO_NOFOLLOW, REPORT_JSON_MAX, &buf, &len, err, errlen)) return NULL;
    json_error_t je;
    json_t *m = json_loadb(buf, len, 0, &je);
    free(buf);
    if (!m) {
        errmsg_set(err, errlen, -1, "%s:%d: %s", path, je.line, je.text);
        return NULL;
    }
    if (clean_strings(m)) {
        json_decref(m);
        errmsg_set(err, errlen, -1, "%s: out of memory", path);
        return NULL;
    }
    return m;
}

/* A gzip stream behind a stdio FILE (fopencookie): reads stop with EFBIG past REPORT_GZ_MAX. */
typedef struct {
    gzFile g;
    unsigned long long left;   /* decompressed bytes still allowed */
} gz_cookie;

static ssize_t gz_cookie_read(void *cookie, char *buf, size_t n) {
    gz_cookie *c = cookie;
    if (c->left == 0) {
        char probe;
        if (gzread(c->g, &probe, 1) == 0 && gzeof(c->g)) return 0;
        errno = EFBIG;   /* a decompression bomb, or a file over the bound */
        return -1;
    }
    if (n > c->left) n = (size_t)c->left;
    if (n > (1u << 30)) n = 1u << 30;
    int r = gzread(c->g, buf, (unsigned)n);
    int zerr = Z_OK;
    if (r == 0) gzerror(c->g, &zerr);   /* a stream cut short ends in Z_BUF_ERROR, not a clean end */
    if (r < 0 || (zerr != Z_OK && zerr != Z_STREAM_END)) {
        errno = EIO;
        return -1;
    }
    c->left -= (unsigned long long)r;
    return r;
}

static int gz_cookie_close(void *cookie) {
    gz_cookie *c = cookie;
    int rc = gzclose(c->g) == Z_OK ? 0 : EOF;
    free(c);
    return rc;
}

/* Opens the regular file gzpath (not a link) as a decompressing stream; NULL (err set), or NULL with
 * *absent = 1 when it does not exist. */
static FILE *open_gz(const char *gzpath, int *absent, char *err, size_t errlen) {
    *absent = 0;
    int fd = safeio_open_regular(gzpath, SAFEIO_NOFOLLOW | SAFEIO_OPTIONAL, NULL, err, errlen);
    if (fd == SAFEIO_ABSENT) {
        *absent = 1;
        return NULL;
    }
    if (fd < 0) return NULL;
    gz_cookie *c = calloc(1, sizeof *c);
    gzFile g = c ? gzdopen(fd, "rb") : NULL;
    if (!g) {
        free(c);
        close(fd);
        errmsg_set(err, errlen, -1, "%s: cannot open for decompression", gzpath);
        return NULL;
    }
    c->g = g;
    c->left = REPORT_GZ_MAX;
    cookie_io_functions_t io = { .read = gz_cookie_read, .write = NULL, .seek = NULL, .close = gz_cookie_close };
    FILE *f = fopencookie(c, "r", io);
    if (!f) {
        gz_cookie_close(c);
        errmsg_set(err, errlen, -1, "%s: out of memory", gzpath);
    }
    return f;
}

FILE *report_open_read(const char *path, int optional, int *absent, char *err, size_t errlen) {
    int miss = 0;
    if (absent) *absent = 0;
    FILE *f = safeio_fopen_read(path, SAFEIO_NOFOLLOW | SAFEIO_OPTIONAL, &miss, err, errlen);
    if (f || !miss) return f;
    char gz[4096];
    if ((size_t)snprintf(gz, sizeof gz, "%s.gz", path) >= sizeof gz) {
        errmsg_set(err, errlen, -1, "%s: path too long", path);
        return NULL;
    }
    f = open_gz(gz, &miss, err, errlen);
    if (f || !miss) return f;
    if (optional) {
        if (absent) *absent = 1;
        return NULL;
    }
    errmsg_set(err, errlen, -1, "cannot open %s: %s", path, strerror(ENOENT));
    return NULL;
}

ssize_t report_getline(char **line, size_t *cap, FILE *f, const char *path, long lineno, char *err,
                       size_t errlen) {
    return safeio_getline(line, cap, f, REPORT_LINE_MAX, path, lineno, err, errlen);
}

/* ============================================================================================
 * Strings
 * ========================================================================================== */

char *report_gp_str(char *dst, size_t len, const char *s) {
    size_t o = 0;
    if (!len) return dst;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        char e[8];
        if (*p == '"' || *p == '\\') snprintf(e, sizeof e, "\\%c", *p);
        else if (*p == '`' || *p < 0x20 || *p == 0x7f) snprintf(e, sizeof e, "\\%03o", *p);  /* `: command substitution */
        else { e[0] = (char)*p; e[1] = 0; }
        size_t n = strlen(e);
        if (o + n + 1 > len) break;   /* cut before an escape, never inside one */
        memcpy(dst + o, e, n);
        o += n;
    }
    dst[o] = 0;
    return dst;
}

void report_gp_put(FILE *g, const char *s) {
    char buf[4 * 1024 + 1];
    fputs(report_gp_str(buf, sizeof buf, s), g);
}

void report_gp_data_put(FILE *g, const char *s) {
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++)
        fputc(*p == '"' || *p == '\\' || *p == '`' || *p < 0x20 || *p == 0x7f ? '_' : *p, g);
}

void report_md_cell(FILE *o, const char *s) {
    for (const char *p = s ? s : ""; *p; p++) {
        if (*p == '|') fputs("\\|", o);
        else fputc(*p, o);
    }
}

void report_md_setup_row(FILE *o, const char *name, const char *a, const char *b) {
    fprintf(o, "| %s | ", name);
    report_md_cell(o, a);   /* from meta.json: '|' escaped (control bytes were on loading) */
    fputs(" | ", o);
    report_md_cell(o, b);
    fprintf(o, " | %s |\n", strcmp(a, b) ? "**differs**" : "same");
}

void report_md_num(FILE *o, double v, const char *unit) {
    if (isnan(v)) fprintf(o, "unknown");
    else fprintf(o, "%.0f%s", v, unit);
}

void report_md_model_sizes(FILE *o, double n_layer, double n_vocab, double n_ctx) {
    fputs(", ", o);
    report_md_num(o, n_layer, " layers");
    fprintf(o, ", vocabulary ");
    report_md_num(o, n_vocab, "");
    fprintf(o, ", context ");
    report_md_num(o, n_ctx, "");
}

void report_err_clean(char *err, size_t errlen) {
    if (!err || !errlen) return;
    char raw[4096];
    snprintf(raw, sizeof raw, "%s", err);
    safeio_escape(err, errlen, raw);
}

/* ============================================================================================
 * The output folder
 * ========================================================================================== */

int report_outdir_open(report_outdir *d, const char *dir, const char *sub, char *err, size_t errlen) {
    d->fd = -1;
    if (!sub) {
        snprintf(d->path, sizeof d->path, "%s", dir);
        if (strlen(dir) >= sizeof d->path) {
            return errmsg_set(err, errlen, -1, "path too long: %s", dir);
        }
        /* the folder itself was named by the user: following a link to it is their choice */
        d->fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d->fd < 0) {
            return errmsg_set(err, errlen, -1, "cannot open the folder %s: %s", dir, strerror(errno));
        }
        return 0;
    }
    report_outdir parent;
    if (report_outdir_open(&parent, dir, NULL, err, errlen)) return -1;
    int rc = -1;
    if (report_path(d->path, sizeof d->path, dir, sub, err, errlen)) goto done;
    if (mkdirat(parent.fd, sub, 0755) != 0 && errno != EEXIST) {
        errmsg_set(err, errlen, -1, "cannot create %s: %s", d->path, strerror(errno));
        goto done;
    }
    d->fd = openat(parent.fd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d->fd < 0) {
        int e = errno;
        struct stat st;
        if (fstatat(parent.fd, sub, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
            errmsg_set(err, errlen, -1, "%s is a symbolic link (refused: output is written only into a "
                       "real folder inside the results folder; remove the link)", d->path);
        else
            errmsg_set(err, errlen, -1, "cannot open the folder %s: %s", d->path, strerror(e));
        goto done;
    }
    rc = 0;
done:
    report_outdir_close(&parent);
    return rc;
}

void report_outdir_close(report_outdir *d) {
    if (d->fd >= 0) close(d->fd);
    d->fd = -1;
}

int report_outdir_remove(const report_outdir *d, const char *name) {
    return unlinkat(d->fd, name, 0) == 0 || errno == ENOENT ? 0 : -1;
}

FILE *report_outdir_create(const report_outdir *d, const char *name, char *err, size_t errlen) {
    if (report_outdir_remove(d, name)) {
        errmsg_set(err, errlen, -1, "cannot replace %s/%s: %s", d->path, name, strerror(errno));
        return NULL;
    }
    int fd = openat(d->fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        errmsg_set(err, errlen, -1, "cannot create %s/%s: %s", d->path, name, strerror(errno));
        return NULL;
    }
    FILE *f = fdopen(fd, "w");
    if (!f) {
        errmsg_set(err, errlen, -1, "cannot create %s/%s: %s", d->path, name, strerror(errno));
        close(fd);
    }
    return f;
}

int report_outdir_nonempty(const report_outdir *d, const char *name) {
    struct stat st;
    return fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}
