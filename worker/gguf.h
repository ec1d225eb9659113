/* gguf.h — a bounds-checked reader for GGUF v2/v3 files (mapped or copied into memory, read-only).
 *
 * Every count, string length, dimension, offset and size in the header is checked against the
 * bytes actually present and every multiplication for overflow, so a hostile or truncated file
 * gives an error message, never a crash or a huge allocation. Metadata keys and tensor names must
 * be unique (a file naming one twice is refused: which one counts would depend on the reader) and
 * free of NUL and control bytes (a key "a\0b" would otherwise be looked up as "a");
 * general.alignment, read in one place, must be a u32 power of two and every tensor offset a
 * multiple of it. Only the bytes up to the end of the last tensor's data (rounded up to the
 * alignment) are held, hashed or copied: what follows is never read. Lookups are binary searches
 * over names sorted at open. Tensor data and string bytes are pointers into the mapping (or the
 * copy: gguf_open_as): valid until gguf_close(). A mapping is shared with the file: a file
 * truncated while mapped makes a later read fault with SIGBUS (strata-worker catches it and exits
 * with a message; see worker/main.c).
 *
 * Metadata values are read with the checked getters gguf_meta_*: a key that is present with
 * another type than the one asked for is an error naming the key, the expected and the found type
 * (never a silent default), and names (architecture, tokenizer model, …) must be printable ASCII.
 */
#ifndef STRATA_GGUF_H
#define STRATA_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/quant.h"

/* Metadata value types, as numbered by the GGUF spec. */
enum {
    GGUF_VT_UINT8 = 0, GGUF_VT_INT8 = 1, GGUF_VT_UINT16 = 2, GGUF_VT_INT16 = 3,
    GGUF_VT_UINT32 = 4, GGUF_VT_INT32 = 5, GGUF_VT_FLOAT32 = 6, GGUF_VT_BOOL = 7,
    GGUF_VT_STRING = 8, GGUF_VT_ARRAY = 9, GGUF_VT_UINT64 = 10, GGUF_VT_INT64 = 11,
    GGUF_VT_FLOAT64 = 12,
};

/* Tensor types: the GGUF_T_* enum of kernels/quant.h (ggml_type numbering), which also knows
 * their block layouts. */

/* One metadata entry. For arrays, type = GGUF_VT_ARRAY, arr_type is the element type and n the
 * element count; for scalars n = 1. data points at the value bytes in the mapping (for a string
 * scalar: the bytes after the length). String arrays get an offsets table (strs) built at open. */
typedef struct {
    char *key;                 /* NUL-terminated copy, owned by the gguf_file */
    uint32_t type;
    uint32_t arr_type;
    uint64_t n;
    const uint8_t *data;       /* into the mapping or the copy */
    uint64_t str_len;          /* string scalar: its length */
    const uint8_t **strs;      /* string array: n pointers to each string's bytes (owned) */
    uint64_t *str_lens;        /* string array: n lengths (owned) */
} gguf_kv;

typedef struct {
    char *name;                /* NUL-terminated copy, owned */
    uint32_t type;             /* GGUF_T_* */
    uint32_t n_dims;           /* 1..4 */
    uint64_t ne[4];            /* ne[0] is the contiguous (row) dimension; unused dims are 1 */
    uint64_t offset;           /* relative to the data section */
    uint64_t nbytes;           /* checked to lie inside the file */
    const void *data;          /* into the mapping or the copy */
} gguf_tensor;

typedef struct {
    uint32_t version;
    uint64_t n_kv, n_tensors;
    gguf_kv *kv;               /* [n_kv] owned */
    gguf_tensor *tensors;      /* [n_tensors] owned */
    uint64_t *kv_order;        /* [n_kv] indices sorted by key (lookups; no key appears twice) */
    uint64_t *t_order;         /* [n_tensors] indices sorted by name (no name appears twice) */
    uint64_t alignment;        /* general.alignment (u32, a power of two) or 32 */
    const uint8_t *base;       /* the file's bytes: the mapping, or the copy */
    size_t size;               /* the bytes in use: up to the end of the last tensor's data, rounded
                                * up to the alignment (at most the file's size; for a well-formed
                                * file, the file's size) */
    size_t file_size;          /* the file's size */
    size_t map_len;            /* GGUF_HOLD_MAP: the mapping's length, for munmap */
    uint64_t data_off;         /* where the data section starts (tensor offsets are relative to it) */
    size_t used;               /* the end of the last tensor's data, aligned (at open: becomes size) */
    int fd;                    /* the mapped file (GGUF_HOLD_MAP), else -1 */
    void *own;                 /* GGUF_HOLD_COPY: the anonymous mapping holding the copy (owned) */
    size_t own_size;           /* its length, for munmap */
} gguf_file;

/* Opens and validates path. On success returns 0 and *out is a new gguf_file the caller frees
 * with gguf_close(). On failure returns -1, writes a one-line reason (naming the file) into
 * err[errlen], and *out is NULL. Tensor types unknown to quant.h are accepted here; the model
 * loader names them. */
int gguf_open(const char *path, gguf_file **out, char *err, size_t errlen);

/* How gguf_open_as holds the file's bytes:
 *   GGUF_HOLD_MAP   mapped read-only (gguf_open): shared with the page cache and with every process
 *                   that maps the same file, so workers on one model hold it once;
 *   GGUF_HOLD_COPY  read once into private anonymous memory that starts on a 2 MiB boundary and is
 *                   advised for transparent huge pages (MADV_HUGEPAGE; plain pages where the kernel
 *                   grants none): each process holds its own copy, freed by gguf_close(), and the
 *                   file may change afterwards without effect (no SIGBUS). The header is read
 *                   first (in growing pieces), then the data up to g->size: bytes past the last
 *                   tensor are not read, and the copy's length (own_size) follows g->size.
 * Both open path without blocking: a FIFO, device or directory is refused (proto/safeio.h). */
typedef enum { GGUF_HOLD_MAP, GGUF_HOLD_COPY } gguf_hold;
int gguf_open_as(const char *path, gguf_hold hold, gguf_file **out, char *err, size_t errlen);

/* Same, on bytes already in memory (the fuzz and unit tests use it). The buffer must outlive the
 * gguf_file; it is not freed by gguf_close(). */
int gguf_open_mem(const void *buf, size_t size, gguf_file **out, char *err, size_t errlen);

void gguf_close(gguf_file *g);

/* Lookups by exact name. NULL when absent; never allocate. */
const gguf_kv *gguf_find(const gguf_file *g, const char *key);
const gguf_tensor *gguf_tensor_find(const gguf_file *g, const char *name);

/* Checked metadata reads. Each returns 0 with the value, GGUF_ABSENT when the key is absent (the
 * outputs and err untouched), or -1 with one line in err[errlen] naming the key, e.g.
 * "metadata llama.block_count: expected an integer, found a string": a present key of another
 * type is always an error.
 *   gguf_meta_int    any integer type (u8 .. i64) in [lo, hi]; a bool is not an integer.
 *   gguf_meta_float  f32, f64 or an integer, finite, in [lo, hi].
 *   gguf_meta_bool   a bool, or an integer 0 or 1.
 *   gguf_meta_name   a string of 1 .. buflen-1 printable ASCII bytes (0x21..0x7e: no NUL, no space,
 *                    no control or escape bytes) copied NUL-terminated into buf; for values used
 *                    as names (general.architecture, tokenizer.ggml.model, …).
 *   gguf_meta_str    any string: *s points into the mapping (not NUL-terminated), *len its length.
 *   gguf_meta_arr    an array whose element type is one of those in the bit set elem_types
 *                    (1u << GGUF_VT_*): *data into the mapping (unaligned: read with memcpy; for
 *                    strings NULL, use the kv's strs), *n elements, *elem_type (may be NULL) the
 *                    element type found. */
#define GGUF_ABSENT 1
int gguf_meta_int(const gguf_file *g, const char *key, int64_t lo, int64_t hi, int64_t *out, char *err, size_t errlen);
int gguf_meta_float(const gguf_file *g, const char *key, double lo, double hi, double *out, char *err, size_t errlen);
int gguf_meta_bool(const gguf_file *g, const char *key, int *out, char *err, size_t errlen);
int gguf_meta_name(const gguf_file *g, const char *key, char *buf, size_t buflen, char *err, size_t errlen);
int gguf_meta_str(const gguf_file *g, const char *key, const char **s, uint64_t *len, char *err, size_t errlen);
int gguf_meta_arr(const gguf_file *g, const char *key, uint32_t elem_types, const void **data, uint64_t *n,
                  uint32_t *elem_type, char *err, size_t errlen);

/* A string value copied into buf (NUL-terminated, truncated to buflen-1); -1 if absent or not a
 * string. For the tests' fixture labels only: the worker reads metadata with gguf_meta_*. */
int gguf_get_strz(const gguf_file *g, const char *key, char *buf, size_t buflen);

/* The name of a metadata type ("u32", "string", …; "type N" for an unknown one), static. */
const char *gguf_vt_name(uint32_t type);

/* Size in bytes of one element of a scalar metadata type; 0 for STRING/ARRAY/unknown. */
size_t gguf_vt_size(uint32_t type);

#endif
