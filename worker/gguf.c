/* gguf.c — bounds-checked GGUF reader. See gguf.h.
 *
 * File layout (little endian):
 *   magic "GGUF" u32 version u64 n_tensors u64 n_kv
 *   n_kv × { string key, u32 type, value }          string = u64 len + bytes
 *   n_tensors × { string name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset }
 *   padding to general.alignment (default 32), then the data section.
 * Every read goes through a cursor that knows how many bytes are left. */
#include "worker/gguf.h"
#include "kernels/quant.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    const uint8_t *p;    /* next byte */
    const uint8_t *end;  /* one past the last byte */
} cursor;

static int rd(cursor *c, void *dst, size_t n) {
    if ((size_t)(c->end - c->p) < n) return -1;
    memcpy(dst, c->p, n);
    c->p += n;
    return 0;
}

static int skip(cursor *c, uint64_t n) {
    if ((uint64_t)(c->end - c->p) < n) return -1;
    c->p += n;
    return 0;
}

/* A string: u64 length then bytes; *s points into the buffer. */
static int rd_str(cursor *c, const uint8_t **s, uint64_t *len) {
    if (rd(c, len, 8)) return -1;
    *s = c->p;
    return skip(c, *len);
}

size_t gguf_vt_size(uint32_t type) {
    switch (type) {
    case GGUF_VT_UINT8: case GGUF_VT_INT8: case GGUF_VT_BOOL: return 1;
    case GGUF_VT_UINT16: case GGUF_VT_INT16: return 2;
    case GGUF_VT_UINT32: case GGUF_VT_INT32: case GGUF_VT_FLOAT32: return 4;
    case GGUF_VT_UINT64: case GGUF_VT_INT64: case GGUF_VT_FLOAT64: return 8;
    default: return 0;
    }
}

static char *dup_str(const uint8_t *s, uint64_t len) {
    char *d = malloc(len + 1);
    if (!d) return NULL;
    memcpy(d, s, len);
    d[len] = 0;
    return d;
}

static void fmt_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Parses one metadata value of type t into kv (kv->type already set). Arrays of arrays are refused. */
static int parse_value(cursor *c, gguf_kv *kv, char *why, size_t whylen) {
    size_t es = gguf_vt_size(kv->type);
    kv->n = 1;
    kv->data = c->p;
    if (es) {
        if (skip(c, es)) { snprintf(why, whylen, "value truncated"); return -1; }
        return 0;
    }
    if (kv->type == GGUF_VT_STRING) {
        const uint8_t *s;
        if (rd_str(c, &s, &kv->str_len)) { snprintf(why, whylen, "string truncated"); return -1; }
        kv->data = s;
        return 0;
    }
    if (kv->type != GGUF_VT_ARRAY) { snprintf(why, whylen, "unknown value type %u", kv->type); return -1; }
    if (rd(c, &kv->arr_type, 4) || rd(c, &kv->n, 8)) { snprintf(why, whylen, "array header truncated"); return -1; }
    kv->data = c->p;
    es = gguf_vt_size(kv->arr_type);
    if (es) {
        if (kv->n > (uint64_t)(c->end - c->p) / es) { snprintf(why, whylen, "array of %" PRIu64 " elements exceeds the file", kv->n); return -1; }
        c->p += kv->n * es;
        return 0;
    }
    if (kv->arr_type != GGUF_VT_STRING) { snprintf(why, whylen, "unsupported array element type %u", kv->arr_type); return -1; }
    /* each string takes at least 8 bytes: bound the count before allocating */
    if (kv->n > (uint64_t)(c->end - c->p) / 8) { snprintf(why, whylen, "string array of %" PRIu64 " exceeds the file", kv->n); return -1; }
    kv->strs = malloc((kv->n ? kv->n : 1) * sizeof *kv->strs);
    kv->str_lens = malloc((kv->n ? kv->n : 1) * sizeof *kv->str_lens);
    if (!kv->strs || !kv->str_lens) { snprintf(why, whylen, "out of memory"); return -1; }
    for (uint64_t i = 0; i < kv->n; i++)
        if (rd_str(c, &kv->strs[i], &kv->str_lens[i])) { snprintf(why, whylen, "string %" PRIu64 " truncated", i); return -1; }
    return 0;
}

/* ---- names: sorted once at open (duplicates refused), looked up by binary search -------------- */

static const char *kv_name(const gguf_file *g, uint64_t i) { return g->kv[i].key; }
static const char *tensor_name(const gguf_file *g, uint64_t i) { return g->tensors[i].name; }

typedef struct { const gguf_file *g; const char *(*name)(const gguf_file *, uint64_t); } name_ctx;

/* Merge sort of idx[n] by name (qsort has no context argument in C11); tmp[n] scratch. */
static void sort_idx(uint64_t *idx, uint64_t *tmp, uint64_t n, const name_ctx *c) {
    if (n < 2) return;
    uint64_t h = n / 2, i = 0, j = h, k = 0;
    sort_idx(idx, tmp, h, c);
    sort_idx(idx + h, tmp, n - h, c);
    while (i < h && j < n)
        tmp[k++] = strcmp(c->name(c->g, idx[i]), c->name(c->g, idx[j])) <= 0 ? idx[i++] : idx[j++];
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, n * sizeof *idx);
}

/* Builds *order (the n entries sorted by name, owned by g) and refuses a name given twice. */
static int index_names(uint64_t n, uint64_t **order, gguf_file *g, const char *(*name)(const gguf_file *, uint64_t),
                       const char *label, const char *what, char *err, size_t errlen) {
    uint64_t *idx = malloc((n ? n : 1) * sizeof *idx), *tmp = malloc((n ? n : 1) * sizeof *tmp);
    if (!idx || !tmp) {
        free(idx);
        free(tmp);
        fmt_err(err, errlen, "%s: out of memory", label);
        return -1;
    }
    name_ctx c = { g, name };
    for (uint64_t i = 0; i < n; i++) idx[i] = i;
    sort_idx(idx, tmp, n, &c);
    free(tmp);
    *order = idx;
    for (uint64_t i = 1; i < n; i++)
        if (!strcmp(name(g, idx[i - 1]), name(g, idx[i]))) {
            fmt_err(err, errlen, "%s: duplicate %s '%s'", label, what, name(g, idx[i]));
            return -1;
        }
    return 0;
}

/* Index of name among the n entries sorted by order, or -1. */
static int64_t find_sorted(const gguf_file *g, const uint64_t *order, uint64_t n,
                           const char *(*name)(const gguf_file *, uint64_t), const char *want) {
    uint64_t lo = 0, hi = n;
    if (!order) return -1;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name(g, order[mid]), want);
        if (c == 0) return (int64_t)order[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* general.alignment, the one place it is read: absent = 32; else a u32 power of two, at most 1 MiB. */
static int read_alignment(gguf_file *g, const char *label, char *err, size_t errlen) {
    const gguf_kv *kv = gguf_find(g, "general.alignment");
    uint32_t a = 32;
    if (kv) {
        if (kv->type != GGUF_VT_UINT32) {
            fmt_err(err, errlen, "%s: general.alignment is not a u32 (type %u)", label, kv->type);
            return -1;
        }
        memcpy(&a, kv->data, 4);
        if (a == 0 || (a & (a - 1)) || a > (1u << 20)) {
            fmt_err(err, errlen, "%s: bad general.alignment %u (a power of two up to 1048576)", label, a);
            return -1;
        }
    }
    g->alignment = a;
    return 0;
}

static int parse(gguf_file *g, const char *label, char *err, size_t errlen) {
    cursor c = { g->base, g->base + g->size };
    char why[160] = "";
    uint32_t magic;
    if (rd(&c, &magic, 4) || memcmp(&magic, "GGUF", 4) != 0) {
        fmt_err(err, errlen, "%s: not a GGUF file (bad magic)", label);
        return -1;
    }
    if (rd(&c, &g->version, 4) || rd(&c, &g->n_tensors, 8) || rd(&c, &g->n_kv, 8)) {
        fmt_err(err, errlen, "%s: truncated GGUF header", label);
        return -1;
    }
    if (g->version < 2 || g->version > 3) {
        fmt_err(err, errlen, "%s: unsupported GGUF version %u (2 and 3 are read)", label, g->version);
        return -1;
    }
    /* a kv takes >= 8+4+1 bytes, a tensor info >= 8+4+4+8 bytes: bound counts by what is left */
    uint64_t left = (uint64_t)(c.end - c.p);
    if (g->n_kv > left / 13 || g->n_tensors > left / 24) {
        fmt_err(err, errlen, "%s: header claims %" PRIu64 " metadata entries and %" PRIu64 " tensors, more than the file holds",
                label, g->n_kv, g->n_tensors);
        return -1;
    }
    g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors) { fmt_err(err, errlen, "%s: out of memory", label); return -1; }

    for (uint64_t i = 0; i < g->n_kv; i++) {
        gguf_kv *kv = &g->kv[i];
        const uint8_t *key;
        uint64_t klen;
        if (rd_str(&c, &key, &klen) || klen > 65535) {
            fmt_err(err, errlen, "%s: metadata key %" PRIu64 " truncated or too long", label, i);
            return -1;
        }
        if (!(kv->key = dup_str(key, klen))) { fmt_err(err, errlen, "%s: out of memory", label); return -1; }
        if (rd(&c, &kv->type, 4) || parse_value(&c, kv, why, sizeof why)) {
            fmt_err(err, errlen, "%s: metadata '%s': %s", label, kv->key, why[0] ? why : "truncated");
            return -1;
        }
    }
    if (index_names(g->n_kv, &g->kv_order, g, kv_name, label, "metadata key", err, errlen) ||
        read_alignment(g, label, err, errlen))
        return -1;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        gguf_tensor *t = &g->tensors[i];
        const uint8_t *name;
        uint64_t nlen;
        if (rd_str(&c, &name, &nlen) || nlen > 65535) {
            fmt_err(err, errlen, "%s: tensor %" PRIu64 " name truncated or too long", label, i);
            return -1;
        }
        if (!(t->name = dup_str(name, nlen))) { fmt_err(err, errlen, "%s: out of memory", label); return -1; }
        if (rd(&c, &t->n_dims, 4) || t->n_dims < 1 || t->n_dims > 4) {
            fmt_err(err, errlen, "%s: tensor '%s': bad or truncated n_dims", label, t->name);
            return -1;
        }
        for (int d = 0; d < 4; d++) t->ne[d] = 1;
        uint64_t nel = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            if (rd(&c, &t->ne[d], 8)) { fmt_err(err, errlen, "%s: tensor '%s': truncated dims", label, t->name); return -1; }
            if (t->ne[d] == 0 || t->ne[d] > (1ull << 40) || nel > UINT64_MAX / t->ne[d]) {
                fmt_err(err, errlen, "%s: tensor '%s': bad dimension %" PRIu64, label, t->name, t->ne[d]);
                return -1;
            }
            nel *= t->ne[d];
        }
        if (rd(&c, &t->type, 4) || rd(&c, &t->offset, 8)) {
            fmt_err(err, errlen, "%s: tensor '%s': truncated info", label, t->name);
            return -1;
        }
        /* size: known types only; an unknown type gets nbytes 0 and is named by the model loader */
        if (quant_supported(t->type)) {
            uint64_t rows = nel / t->ne[0];
            size_t rb = quant_row_bytes(t->type, t->ne[0]);
            if (rb == 0 || rows > UINT64_MAX / rb) {
                fmt_err(err, errlen, "%s: tensor '%s': row of %" PRIu64 " values does not fit type %s",
                        label, t->name, t->ne[0], quant_type_name(t->type));
                return -1;
            }
            t->nbytes = rows * rb;
        }
    }
    if (index_names(g->n_tensors, &g->t_order, g, tensor_name, label, "tensor name", err, errlen)) return -1;
    /* data section starts at the next multiple of alignment */
    uint64_t off = (uint64_t)(c.p - g->base);
    uint64_t data_off = (off + g->alignment - 1) / g->alignment * g->alignment;
    if (data_off > g->size) {
        if (g->n_tensors) { fmt_err(err, errlen, "%s: truncated before the tensor data", label); return -1; }
        data_off = g->size;
    }
    uint64_t data_size = g->size - data_off;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        gguf_tensor *t = &g->tensors[i];
        if (t->offset > data_size || t->nbytes > data_size - t->offset) {
            fmt_err(err, errlen, "%s: tensor '%s' (%" PRIu64 " bytes at offset %" PRIu64 ") lies outside the file (truncated?)",
                    label, t->name, t->nbytes, t->offset);
            return -1;
        }
        if (t->offset % g->alignment) {
            fmt_err(err, errlen, "%s: tensor '%s' is at offset %" PRIu64 ", not a multiple of the alignment %" PRIu64,
                    label, t->name, t->offset, g->alignment);
            return -1;
        }
        t->data = g->base + data_off + t->offset;
    }
    return 0;
}

static int open_common(gguf_file *g, const char *label, gguf_file **out, char *err, size_t errlen) {
    if (parse(g, label, err, errlen)) {
        gguf_close(g);
        *out = NULL;
        return -1;
    }
    *out = g;
    return 0;
}

int gguf_open_mem(const void *buf, size_t size, gguf_file **out, char *err, size_t errlen) {
    gguf_file *g = calloc(1, sizeof *g);
    *out = NULL;
    if (!g) { fmt_err(err, errlen, "out of memory"); return -1; }
    g->fd = -1;
    g->base = buf;
    g->size = size;
    return open_common(g, "<memory>", out, err, errlen);
}

/* The file's bytes in private anonymous memory: the region starts on a 2 MiB boundary and is
 * advised for transparent huge pages, so the decode's stream over the weights takes one TLB entry
 * per 2 MiB instead of per 4 KiB (kernels/NOTES.md change 26). *own / *own_size: the whole
 * mapping, for munmap. */
static int read_copy(int fd, const char *path, size_t size, void **own, size_t *own_size, const uint8_t **base,
                     char *err, size_t errlen) {
    const size_t huge = (size_t)2 << 20;
    size_t len = (size + huge - 1) / huge * huge + huge;   /* room to align the start */
    uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) { fmt_err(err, errlen, "%s: cannot allocate %zu bytes for the weights: %s", path, size, strerror(errno)); return -1; }
    uint8_t *a = m + (huge - (uintptr_t)m % huge) % huge;
    (void)madvise(a, len - (size_t)(a - m), MADV_HUGEPAGE);   /* advice only: refused where THP is off */
    for (size_t got = 0; got < size;) {
        ssize_t r = pread(fd, a + got, size - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            fmt_err(err, errlen, "%s: read failed at byte %zu of %zu: %s", path, got, size, r ? strerror(errno) : "the file shrank");
            munmap(m, len);
            return -1;
        }
        got += (size_t)r;
    }
    *own = m;
    *own_size = len;
    *base = a;
    return 0;
}

int gguf_open_as(const char *path, gguf_hold hold, gguf_file **out, char *err, size_t errlen) {
    struct stat st;
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { fmt_err(err, errlen, "%s: cannot open: %s", path, strerror(errno)); return -1; }
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        fmt_err(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    if (st.st_size < 24) {
        fmt_err(err, errlen, "%s: not a GGUF file (%lld bytes)", path, (long long)st.st_size);
        close(fd);
        return -1;
    }
    gguf_file *g = calloc(1, sizeof *g);
    if (!g) { close(fd); fmt_err(err, errlen, "out of memory"); return -1; }
    g->size = (size_t)st.st_size;
    g->fd = -1;
    if (hold == GGUF_HOLD_COPY) {
        int rc = read_copy(fd, path, g->size, &g->own, &g->own_size, &g->base, err, errlen);
        close(fd);
        if (rc) { free(g); return -1; }
    } else {
        void *m = mmap(NULL, g->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            fmt_err(err, errlen, "%s: mmap failed: %s", path, strerror(errno));
            close(fd);
            free(g);
            return -1;
        }
        g->fd = fd;
        g->base = m;
    }
    return open_common(g, path, out, err, errlen);
}

int gguf_open(const char *path, gguf_file **out, char *err, size_t errlen) {
    return gguf_open_as(path, GGUF_HOLD_MAP, out, err, errlen);
}

void gguf_close(gguf_file *g) {
    if (!g) return;
    for (uint64_t i = 0; g->kv && i < g->n_kv; i++) {
        free(g->kv[i].key);
        free(g->kv[i].strs);
        free(g->kv[i].str_lens);
    }
    for (uint64_t i = 0; g->tensors && i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    free(g->kv_order);
    free(g->t_order);
    if (g->own) munmap(g->own, g->own_size);
    if (g->fd >= 0) {
        munmap((void *)g->base, g->size);
        close(g->fd);
    }
    free(g);
}

const gguf_kv *gguf_find(const gguf_file *g, const char *key) {
    int64_t i = find_sorted(g, g->kv_order, g->n_kv, kv_name, key);
    return i < 0 ? NULL : &g->kv[i];
}

const gguf_tensor *gguf_tensor_find(const gguf_file *g, const char *name) {
    int64_t i = find_sorted(g, g->t_order, g->n_tensors, tensor_name, name);
    return i < 0 ? NULL : &g->tensors[i];
}

int gguf_get_i64(const gguf_file *g, const char *key, int64_t *out) {
    const gguf_kv *kv = gguf_find(g, key);
    if (!kv) return -1;
    const uint8_t *d = kv->data;
    switch (kv->type) {
    case GGUF_VT_UINT8: case GGUF_VT_BOOL: { uint8_t v; memcpy(&v, d, 1); *out = v; return 0; }
    case GGUF_VT_INT8: { int8_t v; memcpy(&v, d, 1); *out = v; return 0; }
    case GGUF_VT_UINT16: { uint16_t v; memcpy(&v, d, 2); *out = v; return 0; }
    case GGUF_VT_INT16: { int16_t v; memcpy(&v, d, 2); *out = v; return 0; }
    case GGUF_VT_UINT32: { uint32_t v; memcpy(&v, d, 4); *out = v; return 0; }
    case GGUF_VT_INT32: { int32_t v; memcpy(&v, d, 4); *out = v; return 0; }
    case GGUF_VT_UINT64: { uint64_t v; memcpy(&v, d, 8); if (v > INT64_MAX) return -1; *out = (int64_t)v; return 0; }
    case GGUF_VT_INT64: { int64_t v; memcpy(&v, d, 8); *out = v; return 0; }
    default: return -1;
    }
}

int gguf_get_f64(const gguf_file *g, const char *key, double *out) {
    const gguf_kv *kv = gguf_find(g, key);
    if (!kv) return -1;
    if (kv->type == GGUF_VT_FLOAT32) { float v; memcpy(&v, kv->data, 4); *out = v; return 0; }
    if (kv->type == GGUF_VT_FLOAT64) { double v; memcpy(&v, kv->data, 8); *out = v; return 0; }
    int64_t i;
    if (gguf_get_i64(g, key, &i)) return -1;
    *out = (double)i;
    return 0;
}

int gguf_get_str(const gguf_file *g, const char *key, const char **s, uint64_t *len) {
    const gguf_kv *kv = gguf_find(g, key);
    if (!kv || kv->type != GGUF_VT_STRING) return -1;
    *s = (const char *)kv->data;
    *len = kv->str_len;
    return 0;
}

int gguf_get_strz(const gguf_file *g, const char *key, char *buf, size_t buflen) {
    const char *s;
    uint64_t len;
    if (!buflen || gguf_get_str(g, key, &s, &len)) return -1;
    if (len > buflen - 1) len = buflen - 1;
    memcpy(buf, s, len);
    buf[len] = 0;
    return 0;
}

int gguf_get_arr(const gguf_file *g, const char *key, uint32_t arr_type, const void **data, uint64_t *n) {
    const gguf_kv *kv = gguf_find(g, key);
    if (!kv || kv->type != GGUF_VT_ARRAY || kv->arr_type != arr_type) return -1;
    *data = kv->data;
    *n = kv->n;
    return 0;
}
