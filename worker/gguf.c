/* gguf.c — bounds-checked GGUF reader. See gguf.h.
 *
 * File layout (little endian):
 *   magic "GGUF" u32 version u64 n_tensors u64 n_kv
 *   n_kv × { string key, u32 type, value }          string = u64 len + bytes
 *   n_tensors × { string name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset }
 *   padding to general.alignment (default 32), then the data section.
 * Every read goes through a cursor that knows how many bytes are left. */
#include "worker/gguf.h"
#include "kernels/errmsg.h"
#include "kernels/quant.h"
#include "proto/safeio.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    const uint8_t *p;    /* next byte */
    const uint8_t *end;  /* one past the last byte */
    int out;             /* set when a read needed bytes past end (gguf_open_as then reads more) */
} cursor;

static int rd(cursor *c, void *dst, size_t n) {
    if ((size_t)(c->end - c->p) < n) { c->out = 1; return -1; }
    memcpy(dst, c->p, n);
    c->p += n;
    return 0;
}

static int skip(cursor *c, uint64_t n) {
    if ((uint64_t)(c->end - c->p) < n) { c->out = 1; return -1; }
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

/* Parses one metadata value of type t into kv (kv->type already set). Arrays of arrays are refused. */
static int parse_value(cursor *c, gguf_kv *kv, char *why, size_t whylen) {
    size_t es = gguf_vt_size(kv->type);
    kv->n = 1;
    kv->data = c->p;
    if (es) {
        if (skip(c, es)) return errmsg_set(why, whylen, -1, "value truncated");
        return 0;
    }
    if (kv->type == GGUF_VT_STRING) {
        const uint8_t *s;
        if (rd_str(c, &s, &kv->str_len)) return errmsg_set(why, whylen, -1, "string truncated");
        kv->data = s;
        return 0;
    }
    if (kv->type != GGUF_VT_ARRAY) return errmsg_set(why, whylen, -1, "unknown value type %u", kv->type);
    if (rd(c, &kv->arr_type, 4) || rd(c, &kv->n, 8)) return errmsg_set(why, whylen, -1, "array header truncated");
    kv->data = c->p;
    es = gguf_vt_size(kv->arr_type);
    if (es) {
        if (kv->n > (uint64_t)(c->end - c->p) / es) { c->out = 1; return errmsg_set(why, whylen, -1, "array of %" PRIu64 " elements exceeds the file", kv->n); }
        c->p += kv->n * es;
        return 0;
    }
    if (kv->arr_type != GGUF_VT_STRING) return errmsg_set(why, whylen, -1, "unsupported array element type %u", kv->arr_type);
    /* each string takes at least 8 bytes: bound the count before allocating */
    if (kv->n > (uint64_t)(c->end - c->p) / 8) { c->out = 1; return errmsg_set(why, whylen, -1, "string array of %" PRIu64 " exceeds the file", kv->n); }
    kv->strs = malloc((kv->n ? kv->n : 1) * sizeof *kv->strs);
    kv->str_lens = malloc((kv->n ? kv->n : 1) * sizeof *kv->str_lens);
    if (!kv->strs || !kv->str_lens) return errmsg_set(why, whylen, -1, "out of memory");
    for (uint64_t i = 0; i < kv->n; i++)
        if (rd_str(c, &kv->strs[i], &kv->str_lens[i])) return errmsg_set(why, whylen, -1, "string %" PRIu64 " truncated", i);
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
        return errmsg_set(err, errlen, -1, "%s: out of memory", label);
    }
    name_ctx c = { g, name };
    for (uint64_t i = 0; i < n; i++) idx[i] = i;
    sort_idx(idx, tmp, n, &c);
    free(tmp);
    *order = idx;
    for (uint64_t i = 1; i < n; i++)
        if (!strcmp(name(g, idx[i - 1]), name(g, idx[i]))) {
            return errmsg_set(err, errlen, -1, "%s: duplicate %s '%s'", label, what, name(g, idx[i]));
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

/* The name of a metadata type, for messages. */
const char *gguf_vt_name(uint32_t type) {
    static const char *const names[] = { "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array",
                                         "u64", "i64", "f64" };
    return type < sizeof names / sizeof names[0] ? names[type] : "an unknown type";
}

/* What kv holds, for messages: "string", "array of f32". */
static const char *found_type(const gguf_kv *kv, char *buf, size_t buflen) {
    if (kv->type == GGUF_VT_ARRAY) snprintf(buf, buflen, "array of %s", gguf_vt_name(kv->arr_type));
    else snprintf(buf, buflen, "%s", gguf_vt_name(kv->type));
    return buf;
}

static int type_error(const gguf_kv *kv, const char *expected, char *err, size_t errlen) {
    char found[48];
    return errmsg_set(err, errlen, -1, "metadata %s: expected %s, found %s", kv->key, expected,
                      found_type(kv, found, sizeof found));
}

/* s[len] escaped for a message (NUL bytes shown as \x00), at most about 64 bytes of it. */
static const char *show_bytes(const uint8_t *s, uint64_t len, char *buf, size_t buflen) {
    char piece[65];
    size_t o = 0;
    buf[0] = 0;
    for (uint64_t i = 0; i < len && i < 64 && o + 5 < buflen;) {
        size_t k = 0;
        while (i + k < len && i + k < 64 && k < 64 && s[i + k]) { piece[k] = (char)s[i + k]; k++; }
        piece[k] = 0;
        safeio_escape(buf + o, buflen - o, piece);
        o += strlen(buf + o);
        i += k;
        if (i < len && i < 64 && !s[i] && o + 5 < buflen) { memcpy(buf + o, "\\x00", 5); o += 4; i++; }
    }
    return buf;
}

/* Keys and tensor names: no NUL (a C string would end there) and no control byte. */
static int check_name(const uint8_t *s, uint64_t len, const char *label, const char *what, uint64_t i, char *err,
                      size_t errlen) {
    for (uint64_t k = 0; k < len; k++)
        if (s[k] < 0x20 || s[k] == 0x7f) {
            char shown[300];
            return errmsg_set(err, errlen, -1, "%s: %s %" PRIu64
                              " '%s' holds the byte 0x%02x (NUL and control bytes are refused)", label, what, i,
                              show_bytes(s, len, shown, sizeof shown), s[k]);
        }
    return 0;
}

/* general.alignment, the one place it is read: absent = 32; else a u32 power of two, at most 1 MiB. */
static int read_alignment(gguf_file *g, const char *label, char *err, size_t errlen) {
    const gguf_kv *kv = gguf_find(g, "general.alignment");
    uint32_t a = 32;
    if (kv) {
        if (kv->type != GGUF_VT_UINT32) {
            char why[200];
            type_error(kv, "a u32", why, sizeof why);
            return errmsg_set(err, errlen, -1, "%s: %s", label, why);
        }
        memcpy(&a, kv->data, 4);
        if (a == 0 || (a & (a - 1)) || a > (1u << 20)) {
            return errmsg_set(err, errlen, -1, "%s: bad general.alignment %u (a power of two up to 1048576)", label, a);
        }
    }
    g->alignment = a;
    return 0;
}

/* Frees what a parse built (keys, names, string tables, the indexes); g->base stays. */
static void free_parsed(gguf_file *g) {
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
    g->kv = NULL;
    g->tensors = NULL;
    g->kv_order = g->t_order = NULL;
    g->n_kv = g->n_tensors = 0;
}

/* The parsing steps below read one part of the header at the cursor (into g) and return 0, or -1
 * with the message in err [errlen] (label names the file). */

/* The n_kv metadata entries: each key (checked: no NUL or control bytes) and value. */
static int parse_kvs(gguf_file *g, cursor *c, const char *label, char *err, size_t errlen) {
    char why[160] = "";
    for (uint64_t i = 0; i < g->n_kv; i++) {
        gguf_kv *kv = &g->kv[i];
        const uint8_t *key;
        uint64_t klen;
        if (rd_str(c, &key, &klen) || klen > 65535)
            return errmsg_set(err, errlen, -1, "%s: metadata key %" PRIu64 " truncated or too long", label, i);
        if (check_name(key, klen, label, "metadata key", i, err, errlen)) return -1;
        if (!(kv->key = dup_str(key, klen))) return errmsg_set(err, errlen, -1, "%s: out of memory", label);
        if (rd(c, &kv->type, 4) || parse_value(c, kv, why, sizeof why))
            return errmsg_set(err, errlen, -1, "%s: metadata '%s': %s", label, kv->key, why[0] ? why : "truncated");
    }
    return 0;
}

/* Tensor info i: name, dimensions (each in [1, 2^40], their product in 64 bits), type, offset, and
 * for a known type its size in bytes (an unknown type gets nbytes 0 and is named by the model loader). */
static int parse_tensor(gguf_tensor *t, uint64_t i, cursor *c, const char *label, char *err, size_t errlen) {
    const uint8_t *name;
    uint64_t nlen;
    if (rd_str(c, &name, &nlen) || nlen > 65535)
        return errmsg_set(err, errlen, -1, "%s: tensor %" PRIu64 " name truncated or too long", label, i);
    if (check_name(name, nlen, label, "tensor name", i, err, errlen)) return -1;
    if (!(t->name = dup_str(name, nlen))) return errmsg_set(err, errlen, -1, "%s: out of memory", label);
    if (rd(c, &t->n_dims, 4) || t->n_dims < 1 || t->n_dims > 4)
        return errmsg_set(err, errlen, -1, "%s: tensor '%s': bad or truncated n_dims", label, t->name);
    for (int d = 0; d < 4; d++) t->ne[d] = 1;
    uint64_t nel = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if (rd(c, &t->ne[d], 8)) return errmsg_set(err, errlen, -1, "%s: tensor '%s': truncated dims", label, t->name);
        if (t->ne[d] == 0 || t->ne[d] > (1ull << 40) || nel > UINT64_MAX / t->ne[d])
            return errmsg_set(err, errlen, -1, "%s: tensor '%s': bad dimension %" PRIu64, label, t->name, t->ne[d]);
        nel *= t->ne[d];
    }
    if (rd(c, &t->type, 4) || rd(c, &t->offset, 8))
        return errmsg_set(err, errlen, -1, "%s: tensor '%s': truncated info", label, t->name);
    if (quant_supported(t->type)) {
        uint64_t rows = nel / t->ne[0];
        size_t rb = quant_row_bytes(t->type, t->ne[0]);
        if (rb == 0 || rows > UINT64_MAX / rb)
            return errmsg_set(err, errlen, -1, "%s: tensor '%s': row of %" PRIu64 " values does not fit type %s",
                              label, t->name, t->ne[0], quant_type_name(t->type));
        t->nbytes = rows * rb;
    }
    return 0;
}

/* The data section starts at the next multiple of alignment after the cursor; it ends where the last
 * tensor's data does, rounded up (saturating: an offset past the file is refused by place_tensors).
 * Sets g->data_off and g->used. */
static int data_extent(gguf_file *g, const cursor *c, const char *label, char *err, size_t errlen) {
    uint64_t off = (uint64_t)(c->p - g->base);
    uint64_t data_off = (off + g->alignment - 1) / g->alignment * g->alignment;
    if (data_off > g->file_size && g->n_tensors)
        return errmsg_set(err, errlen, -1, "%s: truncated before the tensor data", label);
    uint64_t end = data_off;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        uint64_t e = t->offset > UINT64_MAX - data_off - t->nbytes ? UINT64_MAX : data_off + t->offset + t->nbytes;
        if (e > end) end = e;
    }
    end = end > UINT64_MAX - g->alignment ? UINT64_MAX : (end + g->alignment - 1) / g->alignment * g->alignment;
    g->data_off = data_off;
    g->used = end < g->file_size ? (size_t)end : g->file_size;
    return 0;
}

/* The header from g->base[g->size]: metadata, alignment, tensor infos, and where the data section
 * starts (g->data_off) and ends (g->used: the end of the last tensor's data rounded up to the
 * alignment, at most g->file_size). The tensors are not placed yet (place_tensors). On failure
 * *out_of_bytes says whether the header ran past g->size (more bytes may make it parse). */
static int parse_header(gguf_file *g, const char *label, int *out_of_bytes, char *err, size_t errlen) {
    cursor c = { g->base, g->base + g->size, 0 };
    uint32_t magic;
    int rc = -1;
    if (rd(&c, &magic, 4) || memcmp(&magic, "GGUF", 4) != 0) {
        errmsg_set(err, errlen, -1, "%s: not a GGUF file (bad magic)", label);
        goto done;
    }
    if (rd(&c, &g->version, 4) || rd(&c, &g->n_tensors, 8) || rd(&c, &g->n_kv, 8)) {
        errmsg_set(err, errlen, -1, "%s: truncated GGUF header", label);
        goto done;
    }
    if (g->version < 2 || g->version > 3) {
        errmsg_set(err, errlen, -1, "%s: unsupported GGUF version %u (2 and 3 are read)", label, g->version);
        goto done;
    }
    /* a kv takes >= 8+4+1 bytes, a tensor info >= 8+4+4+8 bytes: bound counts by what is left */
    uint64_t left = (uint64_t)(c.end - c.p);
    if (g->n_kv > left / 13 || g->n_tensors > left / 24) {
        c.out = 1;
        errmsg_set(err, errlen, -1, "%s: header claims %" PRIu64 " metadata entries and %" PRIu64 " tensors, more than the file holds",
                   label, g->n_kv, g->n_tensors);
        goto done;
    }
    g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors) { errmsg_set(err, errlen, -1, "%s: out of memory", label); goto done; }
    if (parse_kvs(g, &c, label, err, errlen) ||
        index_names(g->n_kv, &g->kv_order, g, kv_name, label, "metadata key", err, errlen) ||
        read_alignment(g, label, err, errlen))
        goto done;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (parse_tensor(&g->tensors[i], i, &c, label, err, errlen)) goto done;
    if (index_names(g->n_tensors, &g->t_order, g, tensor_name, label, "tensor name", err, errlen) ||
        data_extent(g, &c, label, err, errlen))
        goto done;
    rc = 0;
done:
    *out_of_bytes = c.out;
    return rc;
}

/* Checks every tensor's data against g->base[g->size] and its alignment, and points it there. */
static int place_tensors(gguf_file *g, const char *label, char *err, size_t errlen) {
    uint64_t data_size = g->data_off < g->size ? g->size - g->data_off : 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        gguf_tensor *t = &g->tensors[i];
        if (t->offset > data_size || t->nbytes > data_size - t->offset) {
            return errmsg_set(err, errlen, -1, "%s: tensor '%s' (%" PRIu64 " bytes at offset %" PRIu64 ") lies outside the file (truncated?)",
                              label, t->name, t->nbytes, t->offset);
        }
        if (t->offset % g->alignment) {
            return errmsg_set(err, errlen, -1, "%s: tensor '%s' is at offset %" PRIu64
                              ", not a multiple of the alignment %" PRIu64, label, t->name, t->offset, g->alignment);
        }
        t->data = g->base + g->data_off + t->offset;
    }
    return 0;
}

/* Parses g->base[g->size] (the whole file: mapped or in memory), then holds only the bytes in use. */
static int parse_whole(gguf_file *g, const char *label, char *err, size_t errlen) {
    int out_of_bytes;
    if (parse_header(g, label, &out_of_bytes, err, errlen)) return -1;
    g->size = g->used;
    return place_tensors(g, label, err, errlen);
}

int gguf_open_mem(const void *buf, size_t size, gguf_file **out, char *err, size_t errlen) {
    gguf_file *g = calloc(1, sizeof *g);
    *out = NULL;
    if (!g) return errmsg_set(err, errlen, -1, "out of memory");
    g->fd = -1;
    g->base = buf;
    g->size = g->file_size = size;
    if (parse_whole(g, "<memory>", err, errlen)) {
        gguf_close(g);
        return -1;
    }
    *out = g;
    return 0;
}

/* Reads bytes [from, to) of the file into dst + from. */
static int read_range(int fd, const char *path, uint8_t *dst, size_t from, size_t to, char *err, size_t errlen) {
    for (size_t got = from; got < to;) {
        ssize_t r = pread(fd, dst + got, to - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            return errmsg_set(err, errlen, -1, "%s: read failed at byte %zu of %zu: %s", path, got, to, r ? strerror(errno) : "the file shrank");
        }
        got += (size_t)r;
    }
    return 0;
}

/* GGUF_HOLD_COPY: the file's bytes in use in private anonymous memory. The region starts on a
 * 2 MiB boundary and is advised for transparent huge pages, so the decode's stream over the
 * weights takes one TLB entry per 2 MiB instead of per 4 KiB (kernels/NOTES.md change 26). The
 * header is read in growing pieces (4 MiB, then doubling) until it parses; then the data up to
 * g->used, and the reservation past it is given back: g->own / g->own_size is what stays mapped. */
static int open_copy(gguf_file *g, int fd, const char *path, char *err, size_t errlen) {
    const size_t huge = (size_t)2 << 20;
    size_t fsize = g->file_size;
    size_t len = (fsize + huge - 1) / huge * huge + huge;   /* room to align the start; untouched pages cost nothing */
    uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return errmsg_set(err, errlen, -1, "%s: cannot allocate %zu bytes for the weights: %s", path, fsize, strerror(errno));
    g->own = m;
    g->own_size = len;
    uint8_t *a = m + (huge - (uintptr_t)m % huge) % huge;
    (void)madvise(a, len - (size_t)(a - m), MADV_HUGEPAGE);   /* advice only: refused where THP is off */
    g->base = a;
    size_t have = 0, want = fsize < ((size_t)4 << 20) ? fsize : (size_t)4 << 20;
    for (;;) {
        int out_of_bytes = 0;
        if (read_range(fd, path, a, have, want, err, errlen)) return -1;
        have = g->size = want;
        if (!parse_header(g, path, &out_of_bytes, err, errlen)) break;
        if (!out_of_bytes || have == fsize) return -1;
        free_parsed(g);
        want = have > fsize / 2 ? fsize : 2 * have;
    }
    if (g->used > have && read_range(fd, path, a, have, g->used, err, errlen)) return -1;
    g->size = g->used;
    size_t keep = ((size_t)(a - m) + g->size + huge - 1) / huge * huge;
    if (keep < len && !munmap(m + keep, len - keep)) g->own_size = keep;
    return place_tensors(g, path, err, errlen);
}

/* GGUF_HOLD_MAP: the file mapped read-only; only g->size bytes of it are read. */
static int open_map(gguf_file *g, int fd, const char *path, char *err, size_t errlen) {
    void *m = mmap(NULL, g->file_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) return errmsg_set(err, errlen, -1, "%s: mmap failed: %s", path, strerror(errno));
    g->fd = fd;
    g->base = m;
    g->map_len = g->size = g->file_size;
    return parse_whole(g, path, err, errlen);
}

int gguf_open_as(const char *path, gguf_hold hold, gguf_file **out, char *err, size_t errlen) {
    *out = NULL;
    off_t fsize = 0;
    int fd = safeio_open_regular(path, 0, &fsize, err, errlen);   /* a FIFO is refused, not waited on */
    if (fd < 0) return -1;
    if (fsize < 24 || (uint64_t)fsize > SIZE_MAX / 2) {
        errmsg_set(err, errlen, -1, "%s: not a GGUF file (%lld bytes)", path, (long long)fsize);
        close(fd);
        return -1;
    }
    gguf_file *g = calloc(1, sizeof *g);
    if (!g) { close(fd); return errmsg_set(err, errlen, -1, "out of memory"); }
    g->fd = -1;
    g->file_size = (size_t)fsize;
    int rc = hold == GGUF_HOLD_COPY ? open_copy(g, fd, path, err, errlen) : open_map(g, fd, path, err, errlen);
    if (g->fd < 0) close(fd);   /* the copy is made, or the mapping failed */
    if (rc) {
        gguf_close(g);
        return -1;
    }
    *out = g;
    return 0;
}

int gguf_open(const char *path, gguf_file **out, char *err, size_t errlen) {
    return gguf_open_as(path, GGUF_HOLD_MAP, out, err, errlen);
}

void gguf_close(gguf_file *g) {
    if (!g) return;
    free_parsed(g);
    if (g->own) munmap(g->own, g->own_size);
    if (g->fd >= 0) {
        munmap((void *)g->base, g->map_len);
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

/* ---- checked metadata reads ------------------------------------------------------------------ */

/* An integer value: 0, -1 when kv is not an integer type, -2 when a u64 exceeds INT64_MAX. */
static int kv_int(const gguf_kv *kv, int64_t *out) {
    const uint8_t *d = kv->data;
    switch (kv->type) {
    case GGUF_VT_UINT8: { uint8_t v; memcpy(&v, d, 1); *out = v; return 0; }
    case GGUF_VT_INT8: { int8_t v; memcpy(&v, d, 1); *out = v; return 0; }
    case GGUF_VT_UINT16: { uint16_t v; memcpy(&v, d, 2); *out = v; return 0; }
    case GGUF_VT_INT16: { int16_t v; memcpy(&v, d, 2); *out = v; return 0; }
    case GGUF_VT_UINT32: { uint32_t v; memcpy(&v, d, 4); *out = v; return 0; }
    case GGUF_VT_INT32: { int32_t v; memcpy(&v, d, 4); *out = v; return 0; }
    case GGUF_VT_UINT64: { uint64_t v; memcpy(&v, d, 8); if (v > INT64_MAX) return -2; *out = (int64_t)v; return 0; }
    case GGUF_VT_INT64: { int64_t v; memcpy(&v, d, 8); *out = v; return 0; }
    default: return -1;
    }
}

int gguf_meta_int(const gguf_file *g, const char *key, int64_t lo, int64_t hi, int64_t *out, char *err, size_t errlen) {
    const gguf_kv *kv = gguf_find(g, key);
    int64_t v = 0;
    if (!kv) return GGUF_ABSENT;
    int r = kv_int(kv, &v);
    if (r == -1) return type_error(kv, "an integer", err, errlen);
    if (r == -2 || v < lo || v > hi) {
        if (r == -2) errmsg_set(err, errlen, -1, "metadata %s is outside [%" PRId64 ", %" PRId64 "] (a u64 above 2^63)", key, lo, hi);
        else errmsg_set(err, errlen, -1, "metadata %s = %" PRId64 " is outside [%" PRId64 ", %" PRId64 "]", key, v, lo,
                        hi);
        return -1;
    }
    *out = v;
    return 0;
}

int gguf_meta_float(const gguf_file *g, const char *key, double lo, double hi, double *out, char *err, size_t errlen) {
    const gguf_kv *kv = gguf_find(g, key);
    double v;
    if (!kv) return GGUF_ABSENT;
    if (kv->type == GGUF_VT_FLOAT32) { float f; memcpy(&f, kv->data, 4); v = f; }
    else if (kv->type == GGUF_VT_FLOAT64) memcpy(&v, kv->data, 8);
    else {
        int64_t i;
        int r = kv_int(kv, &i);
        if (r == -1) return type_error(kv, "a float", err, errlen);
        v = r == -2 ? 0x1p64 : (double)i;
    }
    if (!(v >= lo && v <= hi)) {   /* NaN fails both */
        return errmsg_set(err, errlen, -1, "metadata %s = %g is outside [%g, %g]", key, v, lo, hi);
    }
    *out = v;
    return 0;
}

int gguf_meta_bool(const gguf_file *g, const char *key, int *out, char *err, size_t errlen) {
    const gguf_kv *kv = gguf_find(g, key);
    int64_t v;
    if (!kv) return GGUF_ABSENT;
    if (kv->type == GGUF_VT_BOOL) v = kv->data[0];
    else if (kv_int(kv, &v)) return type_error(kv, "a bool", err, errlen);
    if (v != 0 && v != 1) {
        return errmsg_set(err, errlen, -1, "metadata %s = %" PRId64 " is not a bool (0 or 1)", key, v);
    }
    *out = (int)v;
    return 0;
}

int gguf_meta_str(const gguf_file *g, const char *key, const char **s, uint64_t *len, char *err, size_t errlen) {
    const gguf_kv *kv = gguf_find(g, key);
    if (!kv) return GGUF_ABSENT;
    if (kv->type != GGUF_VT_STRING) return type_error(kv, "a string", err, errlen);
    *s = (const char *)kv->data;
    *len = kv->str_len;
    return 0;
}

int gguf_meta_name(const gguf_file *g, const char *key, char *buf, size_t buflen, char *err, size_t errlen) {
    const char *s = NULL;
    uint64_t len = 0;
    int rc = gguf_meta_str(g, key, &s, &len, err, errlen);
    if (rc) return rc;
    char shown[300];
    if (!buflen || len > buflen - 1) {
        return errmsg_set(err, errlen, -1, "metadata %s: a name of %" PRIu64 " bytes, longer than %zu ('%s')", key, len,
                          buflen ? buflen - 1 : 0, show_bytes((const uint8_t *)s, len, shown, sizeof shown));
    }
    for (uint64_t i = 0; i < len; i++) {
        unsigned char b = (unsigned char)s[i];
        if (b < 0x21 || b > 0x7e) {
            return errmsg_set(err, errlen, -1,
                              "metadata %s: '%s' holds the byte 0x%02x (a name is printable ASCII: no NUL, space, "
                              "control or escape byte)", key, show_bytes((const uint8_t *)s, len, shown, sizeof shown),
                              b);
        }
    }
    memcpy(buf, s, len);
    buf[len] = 0;
    return 0;
}

int gguf_meta_arr(const gguf_file *g, const char *key, uint32_t elem_types, const void **data, uint64_t *n,
                  uint32_t *elem_type, char *err, size_t errlen) {
    const gguf_kv *kv = gguf_find(g, key);
    if (!kv) return GGUF_ABSENT;
    if (kv->type != GGUF_VT_ARRAY || kv->arr_type > 31 || !(elem_types & (1u << kv->arr_type))) {
        char want[96];
        size_t o = (size_t)snprintf(want, sizeof want, "an array of");
        int k = 0, total = 0;
        for (uint32_t t = 0; t < 32; t++) total += (elem_types >> t) & 1;
        for (uint32_t t = 0; t < 32 && o < sizeof want; t++)
            if (elem_types & (1u << t)) {
                k++;
                o += (size_t)snprintf(want + o, sizeof want - o, "%s%s", k == 1 ? " " : k == total ? " or " : ", ", gguf_vt_name(t));
            }
        return type_error(kv, want, err, errlen);
    }
    *data = kv->arr_type == GGUF_VT_STRING ? NULL : kv->data;
    *n = kv->n;
    if (elem_type) *elem_type = kv->arr_type;
    return 0;
}

int gguf_get_strz(const gguf_file *g, const char *key, char *buf, size_t buflen) {
    const gguf_kv *kv = gguf_find(g, key);
    if (!buflen || !kv || kv->type != GGUF_VT_STRING) return -1;
    uint64_t len = kv->str_len > buflen - 1 ? buflen - 1 : kv->str_len;
    memcpy(buf, kv->data, len);
    buf[len] = 0;
    return 0;
}
