/* gguf_edit.h — crafted GGUF files for the hardening tests: read a valid file, copy its metadata
 * entries and tensor infos (raw bytes) with edits (replace, add, duplicate, drop), append the
 * original data section, and write the result. Header-only, no dependency on worker/gguf.c (a
 * parser under test must not build its own test input).
 *
 *   ge_src s;  ge_load(path, &s);                       the source, indexed
 *   ge_out o;  ge_begin(&o, &s);                        header with counts patched at the end
 *   ge_copy_kvs(&o, &s, skip);  ge_kv_u32(&o, "k", v);  metadata (also _u64 _f32 _str _arr, and
 *   ge_copy_kv_as: an entry under another key)
 *   ge_copy_tensors(&o, &s);                            tensor infos (same offsets; ge_copy_tensor_as
 *                                                       renames one)
 *   ge_finish(&o, &s, 32);                              padding + the source's data section
 *   ge_write(&o, path);  ge_free_out(&o);  ge_free_src(&s);
 */
#ifndef STRATA_GGUF_EDIT_H
#define STRATA_GGUF_EDIT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GE_MAX 4096

typedef struct {
    uint8_t *p;                   /* the whole file [n] */
    size_t n;
    uint32_t version;
    int n_kv, n_t;
    size_t kv_key[GE_MAX], kv_end[GE_MAX];   /* a metadata entry is bytes [kv_key, kv_end) */
    size_t t_info[GE_MAX], t_end[GE_MAX];    /* a tensor info is bytes [t_info, t_end) */
    size_t data_off;              /* the data section (alignment 32 assumed, as all test models) */
} ge_src;

typedef struct {
    uint8_t *p;
    size_t n, cap;
    uint64_t n_kv, n_t;
    size_t data_off;              /* after ge_finish: where the data section starts */
} ge_out;

static inline void ge_put(ge_out *o, const void *b, size_t n) {
    if (o->n + n > o->cap) {
        size_t c = o->cap ? o->cap : 4096;
        while (c < o->n + n) c *= 2;
        uint8_t *q = realloc(o->p, c);
        if (!q) { fprintf(stderr, "gguf_edit: out of memory\n"); exit(1); }
        o->p = q;
        o->cap = c;
    }
    memcpy(o->p + o->n, b, n);
    o->n += n;
}
static inline void ge_u32(ge_out *o, uint32_t v) { ge_put(o, &v, 4); }
static inline void ge_u64(ge_out *o, uint64_t v) { ge_put(o, &v, 8); }
static inline void ge_str(ge_out *o, const char *s) { ge_u64(o, strlen(s)); ge_put(o, s, strlen(s)); }

static inline uint64_t ge_rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint32_t ge_rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* Bytes of a value of type t at p (arrays and strings included). */
static inline size_t ge_value_len(const uint8_t *p, uint32_t t) {
    static const size_t sz[13] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
    if (t == 8) return 8 + (size_t)ge_rd64(p);
    if (t == 9) {
        uint32_t at = ge_rd32(p);
        uint64_t n = ge_rd64(p + 4);
        size_t off = 12;
        if (at == 8) {
            for (uint64_t i = 0; i < n; i++) off += 8 + (size_t)ge_rd64(p + off);
            return off;
        }
        return off + (size_t)n * sz[at];
    }
    return sz[t];
}

/* Reads and indexes path. Returns 0, or -1 (message on stderr). */
static inline int ge_load(const char *path, ge_src *s) {
    memset(s, 0, sizeof *s);
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "gguf_edit: cannot open %s\n", path); return -1; }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    s->p = malloc((size_t)n);
    if (!s->p || fread(s->p, 1, (size_t)n, f) != (size_t)n) { fclose(f); free(s->p); return -1; }
    fclose(f);
    s->n = (size_t)n;
    s->version = ge_rd32(s->p + 4);
    uint64_t nt = ge_rd64(s->p + 8), nkv = ge_rd64(s->p + 16);
    if (nt > GE_MAX || nkv > GE_MAX) { free(s->p); return -1; }
    size_t at = 24;
    for (uint64_t i = 0; i < nkv; i++) {
        s->kv_key[i] = at;
        at += 8 + (size_t)ge_rd64(s->p + at);
        uint32_t t = ge_rd32(s->p + at);
        at += 4;
        at += ge_value_len(s->p + at, t);
        s->kv_end[i] = at;
    }
    for (uint64_t i = 0; i < nt; i++) {
        s->t_info[i] = at;
        at += 8 + (size_t)ge_rd64(s->p + at);
        uint32_t nd = ge_rd32(s->p + at);
        at += 4 + 8 * (size_t)nd + 4 + 8;
        s->t_end[i] = at;
    }
    s->n_kv = (int)nkv;
    s->n_t = (int)nt;
    s->data_off = (at + 31) / 32 * 32;
    return 0;
}

static inline void ge_free_src(ge_src *s) { free(s->p); memset(s, 0, sizeof *s); }

/* Key of entry i (not NUL-terminated) and its length. */
static inline const char *ge_kv_key(const ge_src *s, int i, size_t *len) {
    *len = (size_t)ge_rd64(s->p + s->kv_key[i]);
    return (const char *)s->p + s->kv_key[i] + 8;
}
static inline int ge_kv_is(const ge_src *s, int i, const char *key) {
    size_t l;
    const char *k = ge_kv_key(s, i, &l);
    return l == strlen(key) && !memcmp(k, key, l);
}
static inline int ge_find_kv(const ge_src *s, const char *key) {
    for (int i = 0; i < s->n_kv; i++) if (ge_kv_is(s, i, key)) return i;
    return -1;
}
static inline int ge_find_tensor(const ge_src *s, const char *name) {
    for (int i = 0; i < s->n_t; i++) {
        uint64_t l = ge_rd64(s->p + s->t_info[i]);
        if (l == strlen(name) && !memcmp(s->p + s->t_info[i] + 8, name, l)) return i;
    }
    return -1;
}
/* Offset (relative to the data section) of tensor i. */
static inline uint64_t ge_tensor_offset(const ge_src *s, int i) { return ge_rd64(s->p + s->t_end[i] - 8); }
/* Pointer to the value bytes of entry i (after its type). */
static inline const uint8_t *ge_kv_value(const ge_src *s, int i, uint32_t *type) {
    size_t at = s->kv_key[i] + 8 + (size_t)ge_rd64(s->p + s->kv_key[i]);
    *type = ge_rd32(s->p + at);
    return s->p + at + 4;
}

static inline void ge_begin(ge_out *o, const ge_src *s) {
    memset(o, 0, sizeof *o);
    ge_put(o, "GGUF", 4);
    ge_u32(o, s->version);
    ge_u64(o, 0);   /* n_tensors, patched by ge_finish */
    ge_u64(o, 0);   /* n_kv */
}

/* Copies entry i of s as is. */
static inline void ge_copy_kv(ge_out *o, const ge_src *s, int i) {
    ge_put(o, s->p + s->kv_key[i], s->kv_end[i] - s->kv_key[i]);
    o->n_kv++;
}
/* Copies every entry except those whose key is in skip (NULL-terminated list, may be NULL). */
static inline void ge_copy_kvs(ge_out *o, const ge_src *s, const char *const *skip) {
    for (int i = 0; i < s->n_kv; i++) {
        int drop = 0;
        for (int k = 0; skip && skip[k]; k++) drop |= ge_kv_is(s, i, skip[k]);
        if (!drop) ge_copy_kv(o, s, i);
    }
}
/* A new entry: key, type, raw value bytes. */
static inline void ge_kv_raw(ge_out *o, const char *key, uint32_t type, const void *val, size_t len) {
    ge_str(o, key);
    ge_u32(o, type);
    ge_put(o, val, len);
    o->n_kv++;
}
static inline void ge_kv_u32(ge_out *o, const char *key, uint32_t v) { ge_kv_raw(o, key, 4, &v, 4); }
static inline void ge_kv_u64(ge_out *o, const char *key, uint64_t v) { ge_kv_raw(o, key, 10, &v, 8); }
static inline void ge_kv_f32(ge_out *o, const char *key, float v) { ge_kv_raw(o, key, 6, &v, 4); }
/* A string value of len bytes (NUL and any other byte allowed). */
static inline void ge_kv_str(ge_out *o, const char *key, const char *v, size_t len) {
    ge_str(o, key);
    ge_u32(o, 8);
    ge_u64(o, len);
    ge_put(o, v, len);
    o->n_kv++;
}
/* An array of n elements of the numeric type elem_type, each elem_size bytes, from v. */
static inline void ge_kv_arr(ge_out *o, const char *key, uint32_t elem_type, const void *v, uint64_t n, size_t elem_size) {
    ge_str(o, key);
    ge_u32(o, 9);
    ge_u32(o, elem_type);
    ge_u64(o, n);
    ge_put(o, v, (size_t)n * elem_size);
    o->n_kv++;
}
/* Entry i of s under another key of klen bytes (NUL and any other byte allowed), value as is. */
static inline void ge_copy_kv_as(ge_out *o, const ge_src *s, int i, const char *key, size_t klen) {
    size_t at = s->kv_key[i] + 8 + (size_t)ge_rd64(s->p + s->kv_key[i]);
    ge_u64(o, klen);
    ge_put(o, key, klen);
    ge_put(o, s->p + at, s->kv_end[i] - at);
    o->n_kv++;
}

static inline void ge_copy_tensor(ge_out *o, const ge_src *s, int i) {
    ge_put(o, s->p + s->t_info[i], s->t_end[i] - s->t_info[i]);
    o->n_t++;
}
/* Tensor info i of s under another name of nlen bytes (dims, type, offset as is). */
static inline void ge_copy_tensor_as(ge_out *o, const ge_src *s, int i, const char *name, size_t nlen) {
    size_t at = s->t_info[i] + 8 + (size_t)ge_rd64(s->p + s->t_info[i]);
    ge_u64(o, nlen);
    ge_put(o, name, nlen);
    ge_put(o, s->p + at, s->t_end[i] - at);
    o->n_t++;
}
static inline void ge_copy_tensors(ge_out *o, const ge_src *s) {
    for (int i = 0; i < s->n_t; i++) ge_copy_tensor(o, s, i);
}

/* Pads to align, appends the source's data section, patches the counts. */
static inline void ge_finish(ge_out *o, const ge_src *s, uint64_t align) {
    static const uint8_t zero[256];
    size_t pad = (size_t)((o->n + align - 1) / align * align - o->n);
    while (pad) { size_t k = pad < sizeof zero ? pad : sizeof zero; ge_put(o, zero, k); pad -= k; }
    o->data_off = o->n;
    if (s->data_off < s->n) ge_put(o, s->p + s->data_off, s->n - s->data_off);   /* none: no tensors */
    memcpy(o->p + 8, &o->n_t, 8);
    memcpy(o->p + 16, &o->n_kv, 8);
}

static inline int ge_write(const ge_out *o, const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(o->p, 1, o->n, f) == o->n;
    return fclose(f) || !ok ? -1 : 0;
}

static inline void ge_free_out(ge_out *o) { free(o->p); memset(o, 0, sizeof *o); }

#endif
