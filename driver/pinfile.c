/* pinfile.c — see pinfile.h. Reads and writes with pread/pwrite at computed offsets; one record
 * buffer of a chunk is the only allocation besides the handle. */
#include "driver/pinfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/errmsg.h"

#define PIN_MAGIC "STRATAPN"
#define PIN_VERSION 1u
#define PIN_HEADER 88          /* magic 8, four u32, sha256 hex 64 */

struct pinfile {
    int fd;
    int replay;                /* 1: reading path; 0: recording path.part */
    char path[4096], part[4104];
    uint32_t per_tok;          /* n_layer * n_expert_used */
    size_t rec;                /* bytes per position: 4 * (1 + per_tok) */
    int64_t n_pos;             /* positions the file holds */
    unsigned char *buf;        /* [cap_m * rec] one chunk's records */
    int cap_m;
};

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void header(unsigned char h[PIN_HEADER], uint32_t n_layer, uint32_t n_expert, uint32_t k, const char *sha) {
    memset(h, 0, PIN_HEADER);
    memcpy(h, PIN_MAGIC, 8);
    put_u32(h + 8, PIN_VERSION);
    put_u32(h + 12, n_layer);
    put_u32(h + 16, n_expert);
    put_u32(h + 20, k);
    memcpy(h + 24, sha, strnlen(sha, 64));
}

/* Full pread/pwrite at off, or -1 (errno set; a short read sets EIO). */
static int io_all(int fd, void *buf, size_t n, off_t off, int write_it) {
    unsigned char *p = buf;
    while (n) {
        ssize_t r = write_it ? pwrite(fd, p, n, off) : pread(fd, p, n, off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) { if (r == 0) errno = EIO; return -1; }
        p += r; n -= (size_t)r; off += r;
    }
    return 0;
}

/* Makes room for m records in f->buf. */
static int reserve(pinfile *f, int m) {
    if (m <= f->cap_m) return 0;
    unsigned char *b = realloc(f->buf, (size_t)m * f->rec);
    if (!b) return -1;
    f->buf = b;
    f->cap_m = m;
    return 0;
}

int pinfile_open(const char *path, uint32_t n_layer, uint32_t n_expert, uint32_t n_expert_used,
                 const char *model_sha256, int64_t keep, pinfile **out, char *err, size_t errlen) {
    int rc = PINFILE_ERROR;
    unsigned char want[PIN_HEADER], got[PIN_HEADER];
    struct stat sb;
    *out = NULL;
    pinfile *f = calloc(1, sizeof *f);
    if (!f) return errmsg_set(err, errlen, PINFILE_ERROR, "out of memory");
    f->fd = -1;
    if (strlen(path) >= sizeof f->path) { errmsg_set(err, errlen, rc, "--pin-experts: the path is too long"); goto fail; }
    snprintf(f->path, sizeof f->path, "%s", path);
    snprintf(f->part, sizeof f->part, "%s.part", path);
    f->per_tok = n_layer * n_expert_used;
    f->rec = 4 * (1 + (size_t)f->per_tok);
    header(want, n_layer, n_expert, n_expert_used, model_sha256);
    f->replay = stat(path, &sb) == 0;
    const char *name = f->replay ? f->path : f->part;
    f->fd = f->replay ? open(path, O_RDONLY | O_CLOEXEC) : open(f->part, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (f->fd < 0 || fstat(f->fd, &sb)) {
        errmsg_set(err, errlen, rc, "--pin-experts: cannot open %s: %s", name, strerror(errno));
        goto fail;
    }
    if (!f->replay && sb.st_size == 0) {
        if (keep > 0) {
            errmsg_set(err, errlen, rc, "--pin-experts: %s is empty, but the run being resumed recorded %lld "
                       "positions into it", name, (long long)keep);
            goto fail;
        }
        if (io_all(f->fd, want, PIN_HEADER, 0, 1) || fsync(f->fd)) {
            errmsg_set(err, errlen, rc, "--pin-experts: cannot write %s: %s", name, strerror(errno));
            goto fail;
        }
        sb.st_size = PIN_HEADER;
    }
    if (sb.st_size < PIN_HEADER || io_all(f->fd, got, PIN_HEADER, 0, 0) || memcmp(got, PIN_MAGIC, 8)) {
        errmsg_set(err, errlen, rc, "--pin-experts: %s is not a strata expert-routing file", name);
        goto fail;
    }
    if (get_u32(got + 8) != PIN_VERSION) {
        errmsg_set(err, errlen, rc, "--pin-experts: %s has version %u (this driver reads %u)", name,
                   get_u32(got + 8), PIN_VERSION);
        goto fail;
    }
    if (memcmp(got + 12, want + 12, 12)) {
        errmsg_set(err, errlen, rc, "--pin-experts: %s records %u layers, %u experts, %u per token; the model has "
                   "%u, %u, %u", name, get_u32(got + 12), get_u32(got + 16), get_u32(got + 20), n_layer, n_expert,
                   n_expert_used);
        goto fail;
    }
    if (memcmp(got + 24, want + 24, 64)) {
        errmsg_set(err, errlen, rc, "--pin-experts: %s was recorded on another model file (sha256 %.64s; the "
                   "reference arm's is %.64s)", name, (const char *)got + 24, (const char *)want + 24);
        goto fail;
    }
    f->n_pos = (int64_t)((size_t)(sb.st_size - PIN_HEADER) / f->rec);
    if (f->replay) {
        if ((size_t)(sb.st_size - PIN_HEADER) % f->rec) {
            errmsg_set(err, errlen, rc, "--pin-experts: %s ends in a partial record (%lld bytes)", name,
                       (long long)sb.st_size);
            goto fail;
        }
    } else {
        /* recording: keep the first `keep` positions (a resumed run continues after them) */
        if (f->n_pos < keep) {
            errmsg_set(err, errlen, rc, "--pin-experts: %s holds %lld positions, but the run being resumed "
                       "journalled %lld", name, (long long)f->n_pos, (long long)keep);
            goto fail;
        }
        f->n_pos = keep > 0 ? keep : 0;
        if (ftruncate(f->fd, PIN_HEADER + (off_t)f->n_pos * (off_t)f->rec) || fsync(f->fd)) {
            errmsg_set(err, errlen, rc, "--pin-experts: cannot write %s: %s", name, strerror(errno));
            goto fail;
        }
    }
    *out = f;
    return PINFILE_OK;
fail:
    pinfile_close(f);
    return rc;
}

int pinfile_replaying(const pinfile *f) { return f->replay; }

int64_t pinfile_positions(const pinfile *f) { return f->n_pos; }

/* Reads the records of positions pos..pos+m-1 (all inside the file) into f->buf. */
static int read_records(pinfile *f, int64_t pos, int m, char *err, size_t errlen) {
    const char *name = f->replay ? f->path : f->part;
    if (reserve(f, m)) return errmsg_set(err, errlen, PINFILE_ERROR, "out of memory");
    if (io_all(f->fd, f->buf, (size_t)m * f->rec, PIN_HEADER + (off_t)pos * (off_t)f->rec, 0))
        return errmsg_set(err, errlen, PINFILE_ERROR, "--pin-experts: cannot read %s: %s", name, strerror(errno));
    return PINFILE_OK;
}

/* The first position of f->buf's m records whose token differs from tokens[], or -1. */
static int token_mismatch(const pinfile *f, int m, const int32_t *tokens) {
    for (int i = 0; i < m; i++)
        if ((int32_t)get_u32(f->buf + (size_t)i * f->rec) != tokens[i]) return i;
    return -1;
}

/* "recorded on another document" for position pos, whose token in f->buf's record i differs. */
static int other_document(const pinfile *f, int64_t pos, int i, int32_t here, char *err, size_t errlen) {
    return errmsg_set(err, errlen, PINFILE_ERROR, "--pin-experts: %s was recorded on another document (position "
                      "%lld holds token %d there, %d here)", f->path, (long long)pos,
                      (int32_t)get_u32(f->buf + (size_t)i * f->rec), here);
}

int pinfile_check_tokens(pinfile *f, const int32_t *tokens, int64_t n, char *err, size_t errlen) {
    enum { STEP = 4096 };
    if (n > f->n_pos) n = f->n_pos;
    for (int64_t p = 0; p < n; p += STEP) {
        int m = n - p < STEP ? (int)(n - p) : STEP;
        if (read_records(f, p, m, err, errlen)) return PINFILE_ERROR;
        int bad = token_mismatch(f, m, tokens + p);
        if (bad >= 0) return other_document(f, p + bad, bad, tokens[p + bad], err, errlen);
    }
    return PINFILE_OK;
}

int pinfile_read(pinfile *f, int64_t pos, int m, const int32_t *tokens, int32_t *experts, char *err,
                 size_t errlen) {
    if (pos < 0 || m < 0 || pos + m > f->n_pos)
        return errmsg_set(err, errlen, PINFILE_ERROR, "--pin-experts: %s holds the routing of %lld positions; "
                          "this run needs position %lld", f->path, (long long)f->n_pos, (long long)(pos + m - 1));
    if (read_records(f, pos, m, err, errlen)) return PINFILE_ERROR;
    int bad = token_mismatch(f, m, tokens);
    if (bad >= 0) return other_document(f, pos + bad, bad, tokens[bad], err, errlen);
    for (int i = 0; i < m; i++)
        for (uint32_t j = 0; j < f->per_tok; j++)
            experts[(size_t)i * f->per_tok + j] = (int32_t)get_u32(f->buf + (size_t)i * f->rec + 4 * (1 + j));
    return PINFILE_OK;
}

int pinfile_record(pinfile *f, int64_t pos, int m, const int32_t *tokens, const int32_t *experts, char *err,
                   size_t errlen) {
    if (f->replay) return errmsg_set(err, errlen, PINFILE_ERROR, "--pin-experts: %s is being replayed", f->path);
    if (pos < 0 || m < 0 || pos > f->n_pos)
        return errmsg_set(err, errlen, PINFILE_ERROR, "--pin-experts: %s holds %lld positions; cannot record "
                          "from position %lld", f->part, (long long)f->n_pos, (long long)pos);
    /* positions already recorded (a rebuilt reference): the same tokens and experts again */
    int old = f->n_pos - pos < m ? (int)(f->n_pos - pos) : m;
    if (old > 0) {
        if (read_records(f, pos, old, err, errlen)) return PINFILE_ERROR;
        for (int i = 0; i < old; i++) {
            const unsigned char *r = f->buf + (size_t)i * f->rec;
            int same = (int32_t)get_u32(r) == tokens[i];
            for (uint32_t j = 0; same && j < f->per_tok; j++)
                same = (int32_t)get_u32(r + 4 * (1 + j)) == experts[(size_t)i * f->per_tok + j];
            if (!same)
                return errmsg_set(err, errlen, PINFILE_ERROR, "--pin-experts: the reference arm's routing at "
                                  "position %lld differs from what %s recorded before (a nondeterministic worker?)",
                                  (long long)(pos + i), f->part);
        }
    }
    int add = m - old;
    if (add <= 0) return PINFILE_OK;
    if (reserve(f, add)) return errmsg_set(err, errlen, PINFILE_ERROR, "out of memory");
    for (int i = 0; i < add; i++) {
        unsigned char *r = f->buf + (size_t)i * f->rec;
        put_u32(r, (uint32_t)tokens[old + i]);
        for (uint32_t j = 0; j < f->per_tok; j++)
            put_u32(r + 4 * (1 + j), (uint32_t)experts[(size_t)(old + i) * f->per_tok + j]);
    }
    if (io_all(f->fd, f->buf, (size_t)add * f->rec, PIN_HEADER + (off_t)f->n_pos * (off_t)f->rec, 1) ||
        fsync(f->fd))
        return errmsg_set(err, errlen, PINFILE_ERROR, "--pin-experts: cannot write %s: %s", f->part, strerror(errno));
    f->n_pos += add;
    return PINFILE_OK;
}

int pinfile_finish(pinfile *f, char *err, size_t errlen) {
    if (f->replay) return PINFILE_OK;
    if (fsync(f->fd) || rename(f->part, f->path))
        return errmsg_set(err, errlen, PINFILE_ERROR, "--pin-experts: cannot rename %s to %s: %s", f->part, f->path,
                          strerror(errno));
    return PINFILE_OK;
}

void pinfile_close(pinfile *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    free(f->buf);
    free(f);
}
