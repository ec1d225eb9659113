/* journal.c — the sweep's journal: CRC32C, record framing, scanning with torn-tail recovery,
 * the locked append-only file, durable whole-file writes. See journal.h.
 *
 * Reading order: CRC32C; scanning; the file; payload buffers. */
#include "driver/journal.h"
#include "kernels/errmsg.h"
#include "proto/safeio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ============================================================================================
 * CRC32C (Castagnoli): reflected, polynomial 0x82F63B78, init and final xor 0xFFFFFFFF
 * ========================================================================================== */

/* crc32c_table[b] = the CRC register after shifting byte b through 8 steps of the polynomial
 * (tests/test_journal.c recomputes it bit by bit). */
static const uint32_t crc32c_table[256] = {
    0x00000000, 0xf26b8303, 0xe13b70f7, 0x1350f3f4, 0xc79a971f, 0x35f1141c,
    0x26a1e7e8, 0xd4ca64eb, 0x8ad958cf, 0x78b2dbcc, 0x6be22838, 0x9989ab3b,
    0x4d43cfd0, 0xbf284cd3, 0xac78bf27, 0x5e133c24, 0x105ec76f, 0xe235446c,
    0xf165b798, 0x030e349b, 0xd7c45070, 0x25afd373, 0x36ff2087, 0xc494a384,
    0x9a879fa0, 0x68ec1ca3, 0x7bbcef57, 0x89d76c54, 0x5d1d08bf, 0xaf768bbc,
    0xbc267848, 0x4e4dfb4b, 0x20bd8ede, 0xd2d60ddd, 0xc186fe29, 0x33ed7d2a,
    0xe72719c1, 0x154c9ac2, 0x061c6936, 0xf477ea35, 0xaa64d611, 0x580f5512,
    0x4b5fa6e6, 0xb93425e5, 0x6dfe410e, 0x9f95c20d, 0x8cc531f9, 0x7eaeb2fa,
    0x30e349b1, 0xc288cab2, 0xd1d83946, 0x23b3ba45, 0xf779deae, 0x05125dad,
    0x1642ae59, 0xe4292d5a, 0xba3a117e, 0x4851927d, 0x5b016189, 0xa96ae28a,
    0x7da08661, 0x8fcb0562, 0x9c9bf696, 0x6ef07595, 0x417b1dbc, 0xb3109ebf,
    0xa0406d4b, 0x522bee48, 0x86e18aa3, 0x748a09a0, 0x67dafa54, 0x95b17957,
    0xcba24573, 0x39c9c670, 0x2a993584, 0xd8f2b687, 0x0c38d26c, 0xfe53516f,
    0xed03a29b, 0x1f682198, 0x5125dad3, 0xa34e59d0, 0xb01eaa24, 0x42752927,
    0x96bf4dcc, 0x64d4cecf, 0x77843d3b, 0x85efbe38, 0xdbfc821c, 0x2997011f,
    0x3ac7f2eb, 0xc8ac71e8, 0x1c661503, 0xee0d9600, 0xfd5d65f4, 0x0f36e6f7,
    0x61c69362, 0x93ad1061, 0x80fde395, 0x72966096, 0xa65c047d, 0x5437877e,
    0x4767748a, 0xb50cf789, 0xeb1fcbad, 0x197448ae, 0x0a24bb5a, 0xf84f3859,
    0x2c855cb2, 0xdeeedfb1, 0xcdbe2c45, 0x3fd5af46, 0x7198540d, 0x83f3d70e,
    0x90a324fa, 0x62c8a7f9, 0xb602c312, 0x44694011, 0x5739b3e5, 0xa55230e6,
    0xfb410cc2, 0x092a8fc1, 0x1a7a7c35, 0xe811ff36, 0x3cdb9bdd, 0xceb018de,
    0xdde0eb2a, 0x2f8b6829, 0x82f63b78, 0x709db87b, 0x63cd4b8f, 0x91a6c88c,
    0x456cac67, 0xb7072f64, 0xa457dc90, 0x563c5f93, 0x082f63b7, 0xfa44e0b4,
    0xe9141340, 0x1b7f9043, 0xcfb5f4a8, 0x3dde77ab, 0x2e8e845f, 0xdce5075c,
    0x92a8fc17, 0x60c37f14, 0x73938ce0, 0x81f80fe3, 0x55326b08, 0xa759e80b,
    0xb4091bff, 0x466298fc, 0x1871a4d8, 0xea1a27db, 0xf94ad42f, 0x0b21572c,
    0xdfeb33c7, 0x2d80b0c4, 0x3ed04330, 0xccbbc033, 0xa24bb5a6, 0x502036a5,
    0x4370c551, 0xb11b4652, 0x65d122b9, 0x97baa1ba, 0x84ea524e, 0x7681d14d,
    0x2892ed69, 0xdaf96e6a, 0xc9a99d9e, 0x3bc21e9d, 0xef087a76, 0x1d63f975,
    0x0e330a81, 0xfc588982, 0xb21572c9, 0x407ef1ca, 0x532e023e, 0xa145813d,
    0x758fe5d6, 0x87e466d5, 0x94b49521, 0x66df1622, 0x38cc2a06, 0xcaa7a905,
    0xd9f75af1, 0x2b9cd9f2, 0xff56bd19, 0x0d3d3e1a, 0x1e6dcdee, 0xec064eed,
    0xc38d26c4, 0x31e6a5c7, 0x22b65633, 0xd0ddd530, 0x0417b1db, 0xf67c32d8,
    0xe52cc12c, 0x1747422f, 0x49547e0b, 0xbb3ffd08, 0xa86f0efc, 0x5a048dff,
    0x8ecee914, 0x7ca56a17, 0x6ff599e3, 0x9d9e1ae0, 0xd3d3e1ab, 0x21b862a8,
    0x32e8915c, 0xc083125f, 0x144976b4, 0xe622f5b7, 0xf5720643, 0x07198540,
    0x590ab964, 0xab613a67, 0xb831c993, 0x4a5a4a90, 0x9e902e7b, 0x6cfbad78,
    0x7fab5e8c, 0x8dc0dd8f, 0xe330a81a, 0x115b2b19, 0x020bd8ed, 0xf0605bee,
    0x24aa3f05, 0xd6c1bc06, 0xc5914ff2, 0x37faccf1, 0x69e9f0d5, 0x9b8273d6,
    0x88d28022, 0x7ab90321, 0xae7367ca, 0x5c18e4c9, 0x4f48173d, 0xbd23943e,
    0xf36e6f75, 0x0105ec76, 0x12551f82, 0xe03e9c81, 0x34f4f86a, 0xc69f7b69,
    0xd5cf889d, 0x27a40b9e, 0x79b737ba, 0x8bdcb4b9, 0x988c474d, 0x6ae7c44e,
    0xbe2da0a5, 0x4c4623a6, 0x5f16d052, 0xad7d5351,
};

uint32_t crc32c(uint32_t crc, const void *buf, size_t len) {
    const unsigned char *p = buf;
    crc = ~crc;
    for (size_t i = 0; i < len; i++) crc = crc32c_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* ============================================================================================
 * Scanning
 * ========================================================================================== */

static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

/* The record at buf [off, len) when it is whole and valid with sequence number seq: its payload
 * length into *L and NULL, else why it is not (and *L the length field, 0 when too short). */
static const char *frame_check(const unsigned char *buf, size_t len, size_t off, uint32_t seq, uint32_t *L) {
    size_t left = len - off;
    *L = 0;
    if (left < JOURNAL_REC_OVERHEAD) return "is incomplete";
    *L = get_u32(buf + off);
    if (*L > JOURNAL_MAX_PAYLOAD) return "has an impossible length";
    if (left < (size_t)*L + JOURNAL_REC_OVERHEAD) return "is incomplete";
    if (get_u32(buf + off + 4) != seq) return "has the wrong sequence number";
    if (crc32c(0, buf + off, 12 + (size_t)*L) != get_u32(buf + off + 12 + *L)) return "fails its CRC32C";
    return NULL;
}

/* The first offset in [from, len) where a valid record with sequence number seq starts, or len.
 * Candidates must show seq and a plausible type and length before their CRC is computed; *budget
 * (bytes of CRC work left) bounds the search on a crafted file. */
static size_t frame_search(const unsigned char *buf, size_t len, size_t from, uint32_t seq, uint64_t *budget) {
    for (size_t p = from; p + JOURNAL_REC_OVERHEAD <= len; p++) {
        uint32_t L = get_u32(buf + p), type = get_u32(buf + p + 8);
        if (get_u32(buf + p + 4) != seq || type == 0 || type > 255 || L > len - p - JOURNAL_REC_OVERHEAD) continue;
        if (*budget < (uint64_t)L + 12) return len;
        *budget -= (uint64_t)L + 12;
        if (!frame_check(buf, len, p, seq, &L)) return p;
    }
    return len;
}

/* Appends the record at off (checked) to *r [*k] (capacity *cap). 0 or -1 (out of memory). */
static int push_rec(journal_rec **r, size_t *k, size_t *cap, const unsigned char *buf, size_t off, uint32_t L,
                    uint32_t seq) {
    if (*k == *cap) {
        journal_rec *nr = realloc(*r, 2 * *cap * sizeof *nr);
        if (!nr) return -1;
        *r = nr;
        *cap *= 2;
    }
    (*r)[*k] = (journal_rec){ get_u32(buf + off + 8), seq, L, buf + off + 12, off };
    (*k)++;
    return 0;
}

int journal_scan(const unsigned char *buf, size_t len, journal_rec **recs, size_t *n,
                 size_t *valid, journal_damage *d, char *err, size_t errlen) {
    size_t cap = 64, off = 0, k = 0;
    uint32_t L = 0;
    const char *why = NULL;
    journal_rec *r = malloc(cap * sizeof *r);   /* [cap] */
    *recs = NULL;
    *n = 0;
    *valid = 0;
    memset(d, 0, sizeof *d);
    if (!r) return errmsg_set(err, errlen, JOURNAL_E_IO, "out of memory");
    while (off < len && !(why = frame_check(buf, len, off, (uint32_t)k, &L))) {
        if (push_rec(&r, &k, &cap, buf, off, L, (uint32_t)k)) goto oom;
        off += (size_t)L + JOURNAL_REC_OVERHEAD;
    }
    *n = k;
    *valid = off;
    if (off < len) {
        /* the failing record ends the journal; records after it tell damage from a torn append */
        d->at_record = (uint32_t)k;
        d->at_byte = off;
        d->bytes = len - off;
        d->why = why;
        d->type_read = len - off >= 12 ? get_u32(buf + off + 8) : 0;
        uint64_t budget = 4 * (uint64_t)len + ((uint64_t)1 << 20);
        uint32_t seq = (uint32_t)k + 1;
        size_t p = L <= JOURNAL_MAX_PAYLOAD && len - off > (size_t)L + JOURNAL_REC_OVERHEAD
                       ? off + L + JOURNAL_REC_OVERHEAD : len;   /* by its own length first */
        size_t k_all = k, base = off;
        for (;;) {
            uint32_t L2 = 0;
            if (p >= len || frame_check(buf, len, p, seq, &L2)) {
                if ((p = frame_search(buf, len, base + 1, seq, &budget)) >= len) break;
                (void)frame_check(buf, len, p, seq, &L2);   /* valid: sets L2 */
            }
            if (push_rec(&r, &k_all, &cap, buf, p, L2, seq)) goto oom;
            p += (size_t)L2 + JOURNAL_REC_OVERHEAD;
            seq++;
            if (p == len) { d->later_complete = 1; break; }
            base = p;
        }
        d->n_later = k_all - k;
        size_t extent = L <= JOURNAL_MAX_PAYLOAD && len - off >= JOURNAL_REC_OVERHEAD ? (size_t)L + JOURNAL_REC_OVERHEAD
                                                                                       : len - off;
        d->damaged = d->n_later > 0 || extent < len - off;
        d->torn = !d->damaged;
    }
    *recs = r;
    return 0;
oom:
    free(r);
    *n = 0;
    *valid = 0;
    return errmsg_set(err, errlen, JOURNAL_E_IO, "out of memory");
}

/* ============================================================================================
 * The file
 * ========================================================================================== */

static int write_all(int fd, const void *data, size_t len, size_t *done) {
    const unsigned char *p = data;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, p + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = ENOSPC;
            if (done) *done = off;
            return -1;
        }
        off += (size_t)w;
    }
    if (done) *done = off;
    return 0;
}

/* fsync of the directory holding path (so a created or renamed entry survives a crash). */
static int fsync_parent(const char *path) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

static int jpath(journal *j, const char *dir, char *err, size_t errlen) {
    if (snprintf(j->path, sizeof j->path, "%s/%s", dir, JOURNAL_FILE) >= (int)sizeof j->path)
        return errmsg_set(err, errlen, JOURNAL_E_IO, "path too long: %s/%s", dir, JOURNAL_FILE);
    return 0;
}

/* The whole record for payload [len] into a new buffer (*out [*n], caller frees). */
static int build_record(uint32_t seq, uint32_t type, const void *payload, size_t len,
                        unsigned char **out, size_t *n) {
    if (len > JOURNAL_MAX_PAYLOAD) { errno = EFBIG; return -1; }
    size_t total = len + JOURNAL_REC_OVERHEAD;
    unsigned char *b = malloc(total);
    if (!b) return -1;
    put_u32(b, (uint32_t)len);
    put_u32(b + 4, seq);
    put_u32(b + 8, type);
    if (len) memcpy(b + 12, payload, len);
    put_u32(b + 12 + len, crc32c(0, b, 12 + len));
    *out = b;
    *n = total;
    return 0;
}

int journal_append(journal *j, uint32_t type, const void *payload, size_t len, char *err,
                   size_t errlen) {
    unsigned char *rec = NULL;
    size_t total = 0, done = 0;
    if (j->fd < 0 || j->broken)
        return errmsg_set(err, errlen, JOURNAL_E_IO, "%s: an earlier write failed, no more records", j->path);
    if (j->file_size > j->size)
        return errmsg_set(err, errlen, JOURNAL_E_IO, "%s: the bytes after its last valid record were not cut off",
                          j->path);
    if (build_record(j->next_seq, type, payload, len, &rec, &total))
        return errmsg_set(err, errlen, JOURNAL_E_IO, "%s: cannot build a record of %zu bytes: %s", j->path,
                          len, strerror(errno));
    int rc = write_all(j->fd, rec, total, &done);
    int e = errno;
    free(rec);
    if (rc) {
        j->broken = 1;
        if (done) (void)!ftruncate(j->fd, (off_t)j->size);   /* drop the partial record */
        return errmsg_set(err, errlen, JOURNAL_E_IO, "cannot write %s: %s", j->path, strerror(e));
    }
    j->size += total;
    j->file_size = j->size;
    j->next_seq++;
    j->dirty = 1;
    return 0;
}

int journal_append_torn(journal *j, uint32_t type, const void *payload, size_t len, size_t keep,
                        char *err, size_t errlen) {
    unsigned char *rec = NULL;
    size_t total = 0;
    if (j->fd < 0 || build_record(j->next_seq, type, payload, len, &rec, &total))
        return errmsg_set(err, errlen, JOURNAL_E_IO, "%s: cannot build a record", j->path);
    int rc = write_all(j->fd, rec, keep < total ? keep : total, NULL) || fsync(j->fd);
    int e = errno;
    free(rec);
    j->broken = 1;
    if (rc) return errmsg_set(err, errlen, JOURNAL_E_IO, "cannot write %s: %s", j->path, strerror(e));
    return 0;
}

int journal_sync(journal *j, char *err, size_t errlen) {
    if (j->fd < 0 || !j->dirty) return 0;
    if (fdatasync(j->fd)) {
        /* after a failed fsync the page cache may have dropped the data: no more records */
        j->broken = 1;
        return errmsg_set(err, errlen, JOURNAL_E_IO, "cannot sync %s: %s", j->path, strerror(errno));
    }
    j->dirty = 0;
    return 0;
}

void journal_close(journal *j) {
    if (j->fd >= 0) close(j->fd);
    j->fd = -1;
}

static void journal_init(journal *j) {
    memset(j, 0, sizeof *j);
    j->fd = -1;
}

int journal_create(journal *j, const char *dir, const void *header, size_t len, char *err,
                   size_t errlen) {
    journal_init(j);
    if (jpath(j, dir, err, errlen)) return JOURNAL_E_IO;
    j->fd = open(j->path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (j->fd < 0) return errmsg_set(err, errlen, JOURNAL_E_IO, "cannot create %s: %s", j->path, strerror(errno));
    if (flock(j->fd, LOCK_EX | LOCK_NB)) {
        int e = errno;
        journal_close(j);
        return errmsg_set(err, errlen, JOURNAL_E_BUSY, "cannot lock %s: %s", j->path, strerror(e));
    }
    int rc = journal_append(j, JOURNAL_HEADER, header, len, err, errlen);
    if (!rc) rc = journal_sync(j, err, errlen);
    if (!rc && fsync_parent(j->path))
        rc = errmsg_set(err, errlen, JOURNAL_E_IO, "cannot sync the folder of %s: %s", j->path, strerror(errno));
    if (rc) journal_close(j);
    return rc;
}

/* Reads fd whole into *out (malloc'd [*n], one spare byte). */
static int read_whole(int fd, unsigned char **out, size_t *n) {
    struct stat st;
    if (fstat(fd, &st)) return -1;
    size_t cap = (size_t)st.st_size + 1, len = 0;
    unsigned char *b = malloc(cap);
    if (!b) return -1;
    for (;;) {
        if (len == cap) {
            unsigned char *nb = realloc(b, cap * 2);
            if (!nb) { free(b); return -1; }
            b = nb;
            cap *= 2;
        }
        ssize_t r = pread(fd, b + len, cap - len, (off_t)len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) { int e = errno; free(b); errno = e; return -1; }
        if (r == 0) break;
        len += (size_t)r;
    }
    *out = b;
    *n = len;
    return 0;
}

int journal_open(journal *j, const char *dir, unsigned char **data, size_t *data_len,
                 journal_rec **recs, size_t *n, journal_damage *d, char *err, size_t errlen) {
    size_t valid = 0;
    int rc;
    struct stat st;
    journal_init(j);
    *data = NULL;
    *recs = NULL;
    *n = 0;
    *data_len = 0;
    memset(d, 0, sizeof *d);
    if (jpath(j, dir, err, errlen)) return JOURNAL_E_IO;
    j->fd = open(j->path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (j->fd < 0) {
        int e = errno;
        return errmsg_set(err, errlen, e == ENOENT ? JOURNAL_E_MISSING : JOURNAL_E_IO, "cannot open %s: %s",
                          j->path, e == ELOOP ? "it is a symbolic link" : strerror(e));
    }
    if (fstat(j->fd, &st) || !S_ISREG(st.st_mode) || fcntl(j->fd, F_SETFL, O_APPEND)) {
        journal_close(j);
        return errmsg_set(err, errlen, JOURNAL_E_IO, "%s is not a regular file", j->path);
    }
    if (flock(j->fd, LOCK_EX | LOCK_NB)) {
        int e = errno;
        journal_close(j);
        if (e == EWOULDBLOCK)
            return errmsg_set(err, errlen, JOURNAL_E_BUSY, "%s is in use: another strata-driver is writing "
                              "this results folder", j->path);
        return errmsg_set(err, errlen, JOURNAL_E_IO, "cannot lock %s: %s", j->path, strerror(e));
    }
    if (read_whole(j->fd, data, data_len)) {
        rc = errmsg_set(err, errlen, JOURNAL_E_IO, "cannot read %s: %s", j->path, strerror(errno));
        goto fail;
    }
    char e2[512];
    if ((rc = journal_scan(*data, *data_len, recs, n, &valid, d, e2, sizeof e2))) {
        errmsg_set(err, errlen, rc, "%s: %s", j->path, e2);
        goto fail;
    }
    j->size = valid;
    j->file_size = *data_len;
    j->next_seq = (uint32_t)*n;
    return 0;
fail:
    free(*data);
    free(*recs);
    *data = NULL;
    *recs = NULL;
    *n = 0;
    journal_close(j);
    return rc;
}

int journal_cut(journal *j, journal_damage *d, const unsigned char *data, char *err, size_t errlen) {
    char e2[512];
    int rc;
    if (j->fd < 0) return errmsg_set(err, errlen, JOURNAL_E_IO, "%s is not open", j->path);
    if (j->file_size <= j->size) return 0;
    /* the bytes after a damaged record are kept aside before the journal is cut there */
    if (d->damaged && !d->saved[0]) {
        char saved[sizeof d->saved];
        if (snprintf(saved, sizeof saved, "%s.damaged.%llu", j->path, (unsigned long long)j->size) >= (int)sizeof saved)
            return errmsg_set(err, errlen, JOURNAL_E_IO, "path too long: %s", j->path);
        if ((rc = journal_write_file(saved, data + j->size, (size_t)(j->file_size - j->size), e2, sizeof e2)))
            return errmsg_set(err, errlen, rc, "%s is damaged at byte %llu; keeping what follows: %s", j->path,
                              (unsigned long long)j->size, e2);
        snprintf(d->saved, sizeof d->saved, "%s", saved);
    }
    if (ftruncate(j->fd, (off_t)j->size) || fsync(j->fd))
        return errmsg_set(err, errlen, JOURNAL_E_IO, "cannot cut %s after its last valid record: %s", j->path,
                          strerror(errno));
    j->file_size = j->size;
    return 0;
}

int journal_read_header(const char *dir, char **payload, size_t *len, char *err, size_t errlen) {
    journal j;
    unsigned char *data = NULL;
    size_t n = 0, valid = 0, dlen = 0;
    journal_rec *recs = NULL;
    journal_damage dmg;
    int rc;
    *payload = NULL;
    *len = 0;
    journal_init(&j);
    if (jpath(&j, dir, err, errlen)) return JOURNAL_E_IO;
    char e1[600];
    int fd = safeio_open_regular(j.path, SAFEIO_NOFOLLOW | SAFEIO_OPTIONAL, NULL, e1, sizeof e1);
    if (fd == SAFEIO_ABSENT) return errmsg_set(err, errlen, JOURNAL_E_MISSING, "cannot open %s: %s", j.path,
                                               strerror(ENOENT));
    if (fd < 0) return errmsg_set(err, errlen, JOURNAL_E_IO, "%s", e1);
    if (read_whole(fd, &data, &dlen)) {
        rc = errmsg_set(err, errlen, JOURNAL_E_IO, "cannot read %s: %s", j.path, strerror(errno));
        close(fd);
        return rc;
    }
    close(fd);
    char e2[512];
    if ((rc = journal_scan(data, dlen, &recs, &n, &valid, &dmg, e2, sizeof e2))) {
        errmsg_set(err, errlen, rc, "%s: %s", j.path, e2);
        goto done;
    }
    if (n == 0 || recs[0].type != JOURNAL_HEADER) {
        rc = errmsg_set(err, errlen, JOURNAL_E_CORRUPT, "%s has no header record", j.path);
        goto done;
    }
    if (!(*payload = malloc((size_t)recs[0].len + 1))) {
        rc = errmsg_set(err, errlen, JOURNAL_E_IO, "out of memory");
        goto done;
    }
    memcpy(*payload, recs[0].data, recs[0].len);
    (*payload)[recs[0].len] = 0;
    *len = recs[0].len;
    rc = 0;
done:
    free(recs);
    free(data);
    return rc;
}

int journal_in_use(const char *dir) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, JOURNAL_FILE) >= (int)sizeof path) return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);   /* a FIFO must not block here */
    if (fd < 0) return 0;
    int busy = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);   /* releases a lock taken here */
    return busy;
}

int journal_write_file(const char *path, const void *data, size_t len, char *err, size_t errlen) {
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return errmsg_set(err, errlen, JOURNAL_E_IO, "path too long: %s", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return errmsg_set(err, errlen, JOURNAL_E_IO, "cannot create %s: %s", tmp, strerror(errno));
    int bad = write_all(fd, data, len, NULL) || fsync(fd);
    int e = errno;
    if (close(fd) && !bad) { bad = 1; e = errno; }
    if (!bad && rename(tmp, path)) { bad = 1; e = errno; }
    if (bad) {
        unlink(tmp);
        return errmsg_set(err, errlen, JOURNAL_E_IO, "cannot write %s: %s", path, strerror(e));
    }
    if (fsync_parent(path))
        return errmsg_set(err, errlen, JOURNAL_E_IO, "cannot sync the folder of %s: %s", path, strerror(errno));
    return 0;
}

int journal_fsync_stream(FILE *f) {
    if (fflush(f)) return -1;
    return fsync(fileno(f));
}

/* ============================================================================================
 * Payload buffers
 * ========================================================================================== */

static int jbuf_reserve(journal_buf *b, size_t more) {
    if (b->oom) return -1;
    if (b->n + more <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + more) cap *= 2;
    unsigned char *np = realloc(b->p, cap);
    if (!np) { b->oom = 1; return -1; }
    b->p = np;
    b->cap = cap;
    return 0;
}

void jbuf_bytes(journal_buf *b, const void *data, size_t len) {
    if (!len || jbuf_reserve(b, len)) return;
    memcpy(b->p + b->n, data, len);
    b->n += len;
}

void jbuf_u32(journal_buf *b, uint32_t v) {
    if (jbuf_reserve(b, 4)) return;
    put_u32(b->p + b->n, v);
    b->n += 4;
}

void jbuf_f64(journal_buf *b, double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    jbuf_u32(b, (uint32_t)u);
    jbuf_u32(b, (uint32_t)(u >> 32));
}

void jbuf_str(journal_buf *b, const void *data, size_t len) {
    if (len > JOURNAL_MAX_PAYLOAD) { b->oom = 1; return; }
    jbuf_u32(b, (uint32_t)len);
    jbuf_bytes(b, data, len);
}

uint32_t jrd_u32(journal_rd *r) {
    if (r->bad || r->n - r->off < 4) { r->bad = 1; return 0; }
    uint32_t v = get_u32(r->p + r->off);
    r->off += 4;
    return v;
}

double jrd_f64(journal_rd *r) {
    uint64_t lo = jrd_u32(r), hi = jrd_u32(r);
    uint64_t u = lo | hi << 32;
    double v;
    memcpy(&v, &u, sizeof v);
    return r->bad ? 0.0 : v;
}

const unsigned char *jrd_str(journal_rd *r, uint32_t *len) {
    uint32_t L = jrd_u32(r);
    *len = 0;
    if (r->bad || r->n - r->off < L) { r->bad = 1; return NULL; }
    const unsigned char *p = r->p + r->off;
    r->off += L;
    *len = L;
    return p;
}
