/* document.c — the document a sweep measures (see document.h).
 *
 * Reading order: a growing buffer and file reading; folders of files; the three corpora; doc_load. */
#include "driver/document.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <openssl/evp.h>

#include "kernels/errmsg.h"
#include "proto/safeio.h"
#include "proto/proto.h"
#include "proto/tokfile.h"

/* A growing byte buffer, always NUL-terminated once anything was added. */
typedef struct { char *p; size_t n, cap; } buf;

static int buf_add(buf *b, const void *data, size_t len) {
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < b->n + len + 1) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) return -1;
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, len);
    b->n += len;
    b->p[b->n] = 0;
    return 0;
}

/* Appends everything f yields to b (at most PROTO_MAX_TEXT bytes in b). */
static int buf_read_stream(buf *b, FILE *f, const char *name, char *err, size_t errlen) {
    char tmp[65536];
    size_t got;
    while ((got = fread(tmp, 1, sizeof tmp, f)) > 0) {
        if (buf_add(b, tmp, got)) return errmsg_set(err, errlen, -1, "out of memory");
        if (b->n > PROTO_MAX_TEXT) return errmsg_set(err, errlen, -1, "%s: larger than 64 MiB", name);
    }
    if (ferror(f)) return errmsg_set(err, errlen, -1, "cannot read %s", name);
    if (!b->p && buf_add(b, "", 0)) return errmsg_set(err, errlen, -1, "out of memory");
    return 0;
}

/* Reads a whole regular file into b (a FIFO or device is refused before anything can block). */
static int buf_read_file(buf *b, const char *path, char *err, size_t errlen) {
    FILE *f = safeio_fopen_read(path, 0, NULL, err, errlen);
    if (!f) return -1;
    int rc = buf_read_stream(b, f, path, err, errlen);
    fclose(f);
    return rc;
}

void doc_sha256_hex(const void *data, size_t len, char *out) {
    unsigned char md[32];
    unsigned int mdlen = 0;
    EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL);
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
    out[64] = 0;
}

/* ---- folders of files ----------------------------------------------------------------------- */

typedef struct { char **p; size_t n, cap; } strlist;

static int strlist_add(strlist *l, const char *s) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        char **np = realloc(l->p, cap * sizeof *np);
        if (!np) return -1;
        l->p = np;
        l->cap = cap;
    }
    if (!(l->p[l->n] = strdup(s))) return -1;
    l->n++;
    return 0;
}

static void strlist_free(strlist *l) {
    for (size_t i = 0; i < l->n; i++) free(l->p[i]);
    free(l->p);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Collects the regular files under dir into l as full paths: recursively when `recurse` (not
 * following symbolic links, skipping folders named .git), else only dir's own files whose names
 * end in `ext` (NULL: any). Sorted by path when `sort`. */
static int collect_files(const char *dir, int recurse, const char *ext, strlist *l, char *err, size_t errlen) {
    DIR *d = opendir(dir);
    if (!d) return errmsg_set(err, errlen, -1, "cannot open directory %s: %s", dir, strerror(errno));
    struct dirent *e;
    int ret = 0;
    while (!ret && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, ".git")) continue;
        size_t nl = strlen(e->d_name), el = ext ? strlen(ext) : 0;
        char p[PATH_MAX];
        if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p) continue;
        struct stat st;
        if (lstat(p, &st)) continue;
        if (S_ISDIR(st.st_mode) && recurse) ret = collect_files(p, recurse, ext, l, err, errlen);
        else if (S_ISREG(st.st_mode) && (!ext || (nl > el && !strcmp(e->d_name + nl - el, ext))) &&
                 strlist_add(l, p))
            ret = errmsg_set(err, errlen, -1, "out of memory");
    }
    closedir(d);
    return ret;
}

/* Appends the files (in the given order) to text, skipping binaries (a NUL byte) and adding a
 * newline after a file that does not end with one. *used counts the files taken. */
static int concat_files(char **paths, size_t n, buf *text, int *used, char *err, size_t errlen) {
    for (size_t i = 0; i < n; i++) {
        buf f = { 0 };
        if (buf_read_file(&f, paths[i], err, errlen)) { free(f.p); return -1; }
        int take = f.n > 0 && !memchr(f.p, 0, f.n);
        int rc = take && (buf_add(text, f.p, f.n) || (f.p[f.n - 1] != '\n' && buf_add(text, "\n", 1)));
        free(f.p);
        if (rc) return errmsg_set(err, errlen, -1, "out of memory");
        if (text->n > PROTO_MAX_TEXT) return errmsg_set(err, errlen, -1, "the document is larger than 64 MiB");
        *used += take;
    }
    return 0;
}

/* ---- the corpora ---------------------------------------------------------------------------- */

size_t doc_strip_verse_labels(char *text, size_t len) {
    size_t r = 0, w = 0;
    while (r < len) {
        size_t q = r;                                   /* try to match a label at line start */
        if (q < len && text[q] >= '1' && text[q] <= '9') q++;
        size_t a = q;
        while (q < len && ((text[q] >= 'A' && text[q] <= 'Z') || (text[q] >= 'a' && text[q] <= 'z'))) q++;
        size_t b = q;
        while (q < len && text[q] >= '0' && text[q] <= '9') q++;
        size_t c = q;
        int ok = b > a && c > b && q < len && text[q] == ':';
        if (ok) {
            q++;
            size_t d = q;
            while (q < len && text[q] >= '0' && text[q] <= '9') q++;
            ok = q > d && q < len && text[q] == ' ';
        }
        if (ok) r = q + 1;
        while (r < len && text[r] != '\n') text[w++] = text[r++];   /* the rest of the line */
        if (r < len) text[w++] = text[r++];
    }
    if (w < len) text[w] = 0;
    return w;
}

/* --corpus kjv: runs DOC_KJV_COMMAND and strips the verse labels. */
static int load_kjv(doc_t *d, buf *text, char *err, size_t errlen) {
    FILE *p = popen(DOC_KJV_COMMAND " 2>/dev/null", "r");
    if (!p) return errmsg_set(err, errlen, -1, "cannot run '%s': %s", DOC_KJV_COMMAND, strerror(errno));
    int rc = buf_read_stream(text, p, DOC_KJV_COMMAND, err, errlen);
    int st = pclose(p);
    if (rc) return -1;
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || text->n < 1000000)
        return errmsg_set(err, errlen, -1, "the default corpus needs Debian's bible-kjv package ('%s' %s): "
                          "install it (apt-get install bible-kjv; make does), or choose another document "
                          "with --corpus self, --corpus DIR, --doc FILE or --tokens-file FILE", DOC_KJV_COMMAND,
                          st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 127 ? "was not found" : "failed");
    text->n = doc_strip_verse_labels(text->p, text->n);
    char sha[65];
    doc_sha256_hex(text->p, text->n, sha);
    d->kjv_mismatch = strcmp(sha, DOC_KJV_SHA256) != 0;
    snprintf(d->path, sizeof d->path, "kjv");
    snprintf(d->desc, sizeof d->desc, "the King James Bible from Debian's bible-kjv ('%s', verse labels "
             "stripped, one verse per line), %zu bytes, sha256 of the text %s%s", DOC_KJV_COMMAND, text->n, sha,
             d->kjv_mismatch ? " (NOT the text strata's committed results measured: " DOC_KJV_SHA256 ")" : "");
    return 0;
}

/* The installed version of a Debian package (dpkg-query) into out[len]; "unknown" when it cannot
 * be asked. */
static void deb_version(const char *pkg, char *out, size_t len) {
    char cmd[256];
    snprintf(out, len, "unknown");
    snprintf(cmd, sizeof cmd, "dpkg-query -W -f='${Version}' %s 2>/dev/null", pkg);
    FILE *p = popen(cmd, "r");
    if (!p) return;
    char v[128] = "";
    size_t got = fread(v, 1, sizeof v - 1, p);
    v[got] = 0;
    int st = pclose(p);
    int ok = got > 0 && st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    for (size_t i = 0; ok && i < got; i++)   /* a version: printable, no spaces */
        ok = v[i] > 32 && v[i] < 127 && v[i] != '"' && v[i] != '\\';
    if (ok) snprintf(out, len, "%s", v);
}

/* --corpus perldoc: DOC_PERLDOC_FILES of DOC_PERLDOC_DIR, concatenated in that order. */
static int load_perldoc(doc_t *d, buf *text, char *err, size_t errlen) {
    char names[] = DOC_PERLDOC_FILES, p[PATH_MAX];
    strlist l = { 0 };
    int used = 0, ret = -1;
    for (char *save = NULL, *w = strtok_r(names, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        struct stat st;
        snprintf(p, sizeof p, "%s/%s.pod", DOC_PERLDOC_DIR, w);
        if (stat(p, &st) || !S_ISREG(st.st_mode)) {
            errmsg_set(err, errlen, -1, "--corpus perldoc needs Debian's perl-doc package (%s is missing): install "
                       "it (apt-get install perl-doc; make does), or choose another document", p);
            goto done;
        }
        if (strlist_add(&l, p)) { errmsg_set(err, errlen, -1, "out of memory"); goto done; }
    }
    if (concat_files(l.p, l.n, text, &used, err, errlen)) goto done;
    char sha[65], ver[128];
    doc_sha256_hex(text->p, text->n, sha);
    deb_version("perl-doc", ver, sizeof ver);
    d->perldoc_mismatch = strcmp(sha, DOC_PERLDOC_SHA256) != 0;
    snprintf(d->path, sizeof d->path, "perldoc");
    snprintf(d->desc, sizeof d->desc, "Perl's documentation from Debian's perl-doc package (version %s): the %d pod "
             "files %s of %s concatenated in that order, %zu bytes, sha256 of the text %s%s", ver, used,
             DOC_PERLDOC_FILES, DOC_PERLDOC_DIR, text->n, sha,
             d->perldoc_mismatch ? " (NOT the text strata's committed results measured: " DOC_PERLDOC_SHA256 ")" : "");
    ret = 0;
done:
    strlist_free(&l);
    return ret;
}

/* --corpus DIR: every regular text file under DIR, sorted by path. */
static int load_dir(const char *dir, doc_t *d, buf *text, char *err, size_t errlen) {
    strlist l = { 0 };
    int used = 0, ret = -1;
    if (collect_files(dir, 1, NULL, &l, err, errlen)) goto done;
    qsort(l.p, l.n, sizeof *l.p, cmp_str);
    if (concat_files(l.p, l.n, text, &used, err, errlen)) goto done;
    if (used == 0) { errmsg_set(err, errlen, -1, "no text files under %s", dir); goto done; }
    snprintf(d->path, sizeof d->path, "%s", dir);
    snprintf(d->desc, sizeof d->desc, "corpus %s: %d text files (of %zu; binaries skipped) sorted by path and "
             "concatenated, %zu bytes", dir, used, l.n, text->n);
    ret = 0;
done:
    strlist_free(&l);
    return ret;
}

/* --corpus self: the repository's own docs and sources (each folder with its subfolders), in a fixed order. */
static int load_self(const char *root, doc_t *d, buf *text, char *err, size_t errlen) {
    static const char *const dirs[] = { "docs", "worker", "driver", "proto", "kernels" };
    static const char *const exts[] = { ".md", ".c", ".c", ".c", ".c" };
    strlist l = { 0 };
    int used = 0, ret = -1;
    char p[PATH_MAX];
    struct stat st;
    snprintf(p, sizeof p, "%s/README.md", root);
    if (!stat(p, &st) && S_ISREG(st.st_mode) && strlist_add(&l, p)) { errmsg_set(err, errlen, -1, "out of memory"); goto done; }
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        strlist sub = { 0 };
        snprintf(p, sizeof p, "%s/%s", root, dirs[i]);
        if (collect_files(p, 1, exts[i], &sub, err, errlen)) { strlist_free(&sub); continue; }
        qsort(sub.p, sub.n, sizeof *sub.p, cmp_str);
        for (size_t k = 0; k < sub.n; k++)
            if (strlist_add(&l, sub.p[k])) { strlist_free(&sub); errmsg_set(err, errlen, -1, "out of memory"); goto done; }
        strlist_free(&sub);
    }
    if (concat_files(l.p, l.n, text, &used, err, errlen)) goto done;
    if (used == 0 || text->n < 1000) {
        errmsg_set(err, errlen, -1, "--corpus self: no sources next to the driver (looked for README.md and "
                   "worker/*.c under %s)", root);
        goto done;
    }
    char sha[65];
    doc_sha256_hex(text->p, text->n, sha);
    snprintf(d->path, sizeof d->path, "%s", root);
    snprintf(d->desc, sizeof d->desc, "strata's own README.md, docs/*.md, then the .c files under worker/, driver/, proto/, "
             "kernels/ (each folder sorted by path) of %s, concatenated: %d files, %zu bytes, sha256 of the text %s "
             "(--corpus self; it changes with the code)", root, used, text->n, sha);
    ret = 0;
done:
    strlist_free(&l);
    return ret;
}

/* ---- doc_load ------------------------------------------------------------------------------- */

int doc_load(const char *doc_file, const char *corpus, const char *tokens_file, const char *repo_root,
             doc_t *d, char *err, size_t errlen) {
    buf text = { 0 };
    int rc;
    memset(d, 0, sizeof *d);
    if (!!doc_file + !!corpus + !!tokens_file > 1)
        return errmsg_set(err, errlen, -1, "give at most one of --doc, --corpus, --tokens-file");
    if (tokens_file) {
        if (tokfile_read(tokens_file, &d->tokens, &d->n_tokens, err, errlen)) return -1;
        snprintf(d->path, sizeof d->path, "%s", tokens_file);
        snprintf(d->desc, sizeof d->desc, "token ids from %s", tokens_file);
        return 0;
    }
    if (doc_file) {
        if ((rc = buf_read_file(&text, doc_file, err, errlen)) == 0 && text.n == 0)
            rc = errmsg_set(err, errlen, -1, "the document %s is empty", doc_file);
        if (rc == 0) {
            char sha[65];
            doc_sha256_hex(text.p, text.n, sha);
            snprintf(d->path, sizeof d->path, "%s", doc_file);
            snprintf(d->desc, sizeof d->desc, "text file %s, %zu bytes, sha256 of the text %s", doc_file, text.n, sha);
        }
    } else if (!corpus || !strcmp(corpus, "kjv")) {
        rc = load_kjv(d, &text, err, errlen);
    } else if (!strcmp(corpus, "perldoc")) {
        rc = load_perldoc(d, &text, err, errlen);
    } else if (!strcmp(corpus, "self")) {
        rc = load_self(repo_root, d, &text, err, errlen);
    } else {
        rc = load_dir(corpus, d, &text, err, errlen);
    }
    if (rc) { free(text.p); return -1; }
    d->text = text.p;
    d->n_text = text.n;
    return 0;
}

void doc_free(doc_t *d) {
    free(d->text);
    free(d->tokens);
    memset(d, 0, sizeof *d);
}
