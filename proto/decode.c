/* decode.c — untrusted bytes to a proto_msg: a bounded pre-scan that walks the msgpack without
 * allocating (so msgpack-c never sees a message that could make it allocate much), msgpack-c's
 * unpack, the field getters (type, cap and presence checks, one message each) and one decoder per
 * message type. No sockets. See proto/codec.h for the wire format and the caps.
 *
 * Who allocates: every payload of a decoded message (text, tokens, logits, pieces, ...) is
 * malloc'd here, copied out of the input buffer, which is only read and may be freed after the
 * call; the message owns them and proto_msg_free (proto/codec.c) frees them. On failure
 * proto_decode frees whatever it had allocated. msgpack-c's own zone is freed before returning. */
#include "proto/codec.h"
#include "kernels/errmsg.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "decode.c copies little-endian int32/float32 payloads as they are: little-endian hosts only"
#endif

/* ---- bounded scan of untrusted msgpack ------------------------------------------------------ */

/* Read an n-byte big-endian unsigned integer (n = 1, 2, 4 or 8). */
static uint64_t read_be(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = (v << 8) | p[i];
    return v;
}

/* Walk the msgpack object tree in p[0..len) without allocating. Every str/bin length and every
 * array/map count must fit in the bytes that follow (each element takes at least one byte), nesting
 * must stay within PROTO_MAX_DEPTH, the message within PROTO_MAX_OBJECTS objects, and exactly one
 * top-level object must fill all len bytes. ext types and the never-used byte 0xc1 are refused.
 * Returns 0 or PROTO_E_BADMSG / PROTO_E_TOOBIG with a message. */
static int scan_msgpack(const uint8_t *p, size_t len, char *err, size_t errlen) {
    uint64_t left[PROTO_MAX_DEPTH + 1]; /* objects still to read at each open nesting level */
    int depth = 0;
    size_t off = 0;
    uint64_t n_objects = 1;             /* objects announced so far: the top level + every count */
    left[0] = 1;
    while (depth >= 0) {
        if (left[depth] == 0) { depth--; continue; }
        left[depth]--;
        if (off >= len)
            return errmsg_set(err, errlen, PROTO_E_BADMSG,
                        "truncated message: an object is missing at byte %zu of %zu", off, len);
        size_t at = off;
        uint8_t b = p[off++];
        int kind;              /* 0 scalar, 1 payload (str/bin: count bytes), 2 array, 3 map */
        int hdr = 0;           /* bytes of the count (or of the scalar) after b */
        uint64_t count = 0;    /* fixed-format count */
        if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
            kind = 0;                               /* fixint, nil, false, true */
        } else if (b <= 0x8f) { kind = 3; count = b & 0x0f;
        } else if (b <= 0x9f) { kind = 2; count = b & 0x0f;
        } else if (b <= 0xbf) { kind = 1; count = b & 0x1f;
        } else {
            switch (b) {
            case 0xc4: case 0xd9: kind = 1; hdr = 1; break;   /* bin8, str8 */
            case 0xc5: case 0xda: kind = 1; hdr = 2; break;   /* bin16, str16 */
            case 0xc6: case 0xdb: kind = 1; hdr = 4; break;   /* bin32, str32 */
            case 0xcc: case 0xd0: kind = 0; hdr = 1; break;   /* uint8, int8 */
            case 0xcd: case 0xd1: kind = 0; hdr = 2; break;
            case 0xca: case 0xce: case 0xd2: kind = 0; hdr = 4; break;   /* float32, 32-bit ints */
            case 0xcb: case 0xcf: case 0xd3: kind = 0; hdr = 8; break;   /* float64, 64-bit ints */
            case 0xdc: kind = 2; hdr = 2; break;              /* array16 */
            case 0xdd: kind = 2; hdr = 4; break;              /* array32 */
            case 0xde: kind = 3; hdr = 2; break;              /* map16 */
            case 0xdf: kind = 3; hdr = 4; break;              /* map32 */
            default:
                return errmsg_set(err, errlen, PROTO_E_BADMSG,
                            "msgpack byte 0x%02x at %zu is not allowed (ext types and 0xc1 are refused)",
                            b, at);
            }
        }
        if ((size_t)hdr > len - off)
            return errmsg_set(err, errlen, PROTO_E_BADMSG,
                        "truncated message: object at byte %zu needs %d more bytes, %zu left",
                        at, hdr, len - off);
        if (kind == 0) { off += (size_t)hdr; continue; }
        if (hdr) count = read_be(p + off, hdr);
        off += (size_t)hdr;
        if (kind == 1) {
            if (count > len - off)
                return errmsg_set(err, errlen, PROTO_E_BADMSG,
                            "str/bin at byte %zu claims %" PRIu64 " bytes, only %zu left",
                            at, count, len - off);
            off += (size_t)count;
            continue;
        }
        uint64_t children = kind == 3 ? 2 * count : count;
        if (children > len - off)
            return errmsg_set(err, errlen, PROTO_E_BADMSG,
                        "%s at byte %zu claims %" PRIu64 " elements, only %zu bytes left",
                        kind == 3 ? "map" : "array", at, count, len - off);
        if (children > PROTO_MAX_OBJECTS - n_objects)   /* n_objects <= PROTO_MAX_OBJECTS */
            return errmsg_set(err, errlen, PROTO_E_TOOBIG,
                        "message has more than %d msgpack objects", PROTO_MAX_OBJECTS);
        n_objects += children;
        if (children == 0) continue;
        if (depth == PROTO_MAX_DEPTH)
            return errmsg_set(err, errlen, PROTO_E_BADMSG,
                        "msgpack nested deeper than %d levels at byte %zu", PROTO_MAX_DEPTH, at);
        left[++depth] = children;
    }
    if (off != len)
        return errmsg_set(err, errlen, PROTO_E_BADMSG, "%zu trailing bytes after the message", len - off);
    return 0;
}

/* ---- field getters over a decoded map (keys already checked to be unique strings) ---------- */

static const char *obj_type_name(msgpack_object_type t) {
    switch (t) {
    case MSGPACK_OBJECT_NIL:              return "nil";
    case MSGPACK_OBJECT_BOOLEAN:          return "bool";
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return "unsigned integer";
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "negative integer";
    case MSGPACK_OBJECT_FLOAT32:          return "float32";
    case MSGPACK_OBJECT_FLOAT64:          return "float64";
    case MSGPACK_OBJECT_STR:              return "str";
    case MSGPACK_OBJECT_ARRAY:            return "array";
    case MSGPACK_OBJECT_MAP:              return "map";
    case MSGPACK_OBJECT_BIN:              return "bin";
    default:                              return "ext";
    }
}

static int key_is(const msgpack_object *k, const char *key, size_t kl) {
    return k->type == MSGPACK_OBJECT_STR && k->via.str.size == kl &&
           (kl == 0 || memcmp(k->via.str.ptr, key, kl) == 0);
}

static const msgpack_object *find(const msgpack_object_map *m, const char *key) {
    size_t kl = strlen(key);
    for (uint32_t i = 0; i < m->size; i++)
        if (key_is(&m->ptr[i].key, key, kl)) return &m->ptr[i].val;
    return NULL;
}

/* Every key a string, no key twice. */
static int check_keys(const msgpack_object_map *m, char *err, size_t errlen) {
    for (uint32_t i = 0; i < m->size; i++) {
        const msgpack_object *k = &m->ptr[i].key;
        if (k->type != MSGPACK_OBJECT_STR)
            return errmsg_set(err, errlen, PROTO_E_BADMSG, "map key %u is a %s, not a str", i,
                        obj_type_name(k->type));
        for (uint32_t j = 0; j < i; j++) {
            const msgpack_object *kj = &m->ptr[j].key;
            if (kj->via.str.size == k->via.str.size &&
                (k->via.str.size == 0 || memcmp(kj->via.str.ptr, k->via.str.ptr, k->via.str.size) == 0))
                return errmsg_set(err, errlen, PROTO_E_BADMSG, "key \"%.*s\" appears twice",
                            (int)(k->via.str.size > 64 ? 64 : k->via.str.size), k->via.str.ptr);
        }
    }
    return 0;
}

/* Find a required key; ctx names the message ("prefill request") for the error. */
static int need(const msgpack_object_map *m, const char *ctx, const char *key,
                const msgpack_object **o, char *err, size_t errlen) {
    *o = find(m, key);
    if (!*o) return errmsg_set(err, errlen, PROTO_E_BADMSG, "%s: missing key \"%s\"", ctx, key);
    return 0;
}

static int wrong_type(const char *ctx, const char *key, const char *want, const msgpack_object *o,
                      char *err, size_t errlen) {
    return errmsg_set(err, errlen, PROTO_E_BADMSG, "%s: key \"%s\" must be %s, not %s", ctx, key, want,
                obj_type_name(o->type));
}

/* Find a required key whose value must be of msgpack type t (want names it for the error: "a bin"). */
static int need_type(const msgpack_object_map *m, const char *ctx, const char *key, msgpack_object_type t,
                     const char *want, const msgpack_object **o, char *err, size_t errlen) {
    int rc = need(m, ctx, key, o, err, errlen);
    if (!rc && (*o)->type != t) rc = wrong_type(ctx, key, want, *o, err, errlen);
    return rc;
}

/* Unsigned integer <= max (else PROTO_E_TOOBIG). */
static int get_uint(const msgpack_object_map *m, const char *ctx, const char *key, uint64_t max,
                    uint64_t *out, char *err, size_t errlen) {
    const msgpack_object *o;
    int rc = need_type(m, ctx, key, MSGPACK_OBJECT_POSITIVE_INTEGER, "an unsigned integer", &o, err, errlen);
    if (rc) return rc;
    if (o->via.u64 > max)
        return errmsg_set(err, errlen, PROTO_E_TOOBIG, "%s: %s = %" PRIu64 " exceeds the cap %" PRIu64,
                    ctx, key, o->via.u64, max);
    *out = o->via.u64;
    return 0;
}

/* Signed integer in [lo, hi] (else PROTO_E_BADARG). */
static int get_int(const msgpack_object_map *m, const char *ctx, const char *key, int64_t lo,
                   int64_t hi, int64_t *out, char *err, size_t errlen) {
    const msgpack_object *o;
    int rc = need(m, ctx, key, &o, err, errlen);
    if (rc) return rc;
    int ok;
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        ok = o->via.u64 <= (uint64_t)hi && (int64_t)o->via.u64 >= lo;
    else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        ok = o->via.i64 >= lo && o->via.i64 <= hi;
    else
        return wrong_type(ctx, key, "an integer", o, err, errlen);
    if (!ok)
        return errmsg_set(err, errlen, PROTO_E_BADARG, "%s: %s is outside [%" PRId64 ", %" PRId64 "]",
                    ctx, key, lo, hi);
    *out = o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int64_t)o->via.u64 : o->via.i64;
    return 0;
}

/* A number: float32, float64 or an integer (converted to double). */
static int get_f64(const msgpack_object_map *m, const char *ctx, const char *key, double *out,
                   char *err, size_t errlen) {
    const msgpack_object *o;
    int rc = need(m, ctx, key, &o, err, errlen);
    if (rc) return rc;
    switch (o->type) {
    case MSGPACK_OBJECT_FLOAT32: case MSGPACK_OBJECT_FLOAT64: *out = o->via.f64; return 0;
    case MSGPACK_OBJECT_POSITIVE_INTEGER: *out = (double)o->via.u64; return 0;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: *out = (double)o->via.i64; return 0;
    default: return wrong_type(ctx, key, "a number", o, err, errlen);
    }
}

static int get_bool(const msgpack_object_map *m, const char *ctx, const char *key, int *out,
                    char *err, size_t errlen) {
    const msgpack_object *o;
    int rc = need_type(m, ctx, key, MSGPACK_OBJECT_BOOLEAN, "a bool", &o, err, errlen);
    if (rc) return rc;
    *out = o->via.boolean ? 1 : 0;
    return 0;
}

/* A str copied into dst[cap] with a NUL; no NUL bytes inside. Longer than cap-1: cut short when
 * cut, else PROTO_E_TOOBIG. */
static int get_str(const msgpack_object_map *m, const char *ctx, const char *key, char *dst,
                   size_t cap, int cut, char *err, size_t errlen) {
    const msgpack_object *o;
    int rc = need_type(m, ctx, key, MSGPACK_OBJECT_STR, "a str", &o, err, errlen);
    if (rc) return rc;
    size_t n = o->via.str.size;
    if (n && memchr(o->via.str.ptr, 0, n))
        return errmsg_set(err, errlen, PROTO_E_BADMSG, "%s: key \"%s\" contains a NUL byte", ctx, key);
    if (n >= cap) {
        if (!cut)
            return errmsg_set(err, errlen, PROTO_E_TOOBIG, "%s: %s is %zu bytes, the cap is %zu",
                        ctx, key, n, cap - 1);
        n = cap - 1;
    }
    if (n) memcpy(dst, o->via.str.ptr, n);
    dst[n] = 0;
    return 0;
}

/* A bin of 4-byte little-endian elements, at most max_n of them, copied into a malloc'd array
 * (*dst = NULL when empty). */
static int get_bin32(const msgpack_object_map *m, const char *ctx, const char *key, uint64_t max_n,
                     void **dst, size_t *n, char *err, size_t errlen) {
    const msgpack_object *o;
    int rc = need_type(m, ctx, key, MSGPACK_OBJECT_BIN, "a bin", &o, err, errlen);
    if (rc) return rc;
    size_t bytes = o->via.bin.size;
    if (bytes % 4)
        return errmsg_set(err, errlen, PROTO_E_BADMSG,
                    "%s: %s is %zu bytes, not a whole number of 4-byte elements", ctx, key, bytes);
    if (bytes / 4 > max_n)
        return errmsg_set(err, errlen, PROTO_E_TOOBIG, "%s: %s has %zu elements, the cap is %" PRIu64,
                    ctx, key, bytes / 4, max_n);
    *dst = NULL;
    *n = bytes / 4;
    if (bytes == 0) return 0;
    *dst = malloc(bytes);
    if (!*dst)
        return errmsg_set(err, errlen, PROTO_E_INTERNAL, "%s: out of memory for %zu bytes of %s",
                    ctx, bytes, key);
    memcpy(*dst, o->via.bin.ptr, bytes);
    return 0;
}

/* A str or bin of any bytes, copied into a malloc'd buffer with a NUL after it. */
static int get_text(const msgpack_object_map *m, const char *ctx, const char *key, size_t max_n,
                    char **dst, size_t *n, char *err, size_t errlen) {
    const msgpack_object *o;
    int rc = need(m, ctx, key, &o, err, errlen);
    if (rc) return rc;
    const char *src;
    size_t len;
    if (o->type == MSGPACK_OBJECT_STR) { src = o->via.str.ptr; len = o->via.str.size; }
    else if (o->type == MSGPACK_OBJECT_BIN) { src = o->via.bin.ptr; len = o->via.bin.size; }
    else return wrong_type(ctx, key, "a str or bin", o, err, errlen);
    if (len > max_n)
        return errmsg_set(err, errlen, PROTO_E_TOOBIG, "%s: %s is %zu bytes, the cap is %zu",
                    ctx, key, len, max_n);
    *dst = malloc(len + 1);
    if (!*dst) return errmsg_set(err, errlen, PROTO_E_INTERNAL, "%s: out of memory", ctx);
    if (len) memcpy(*dst, src, len);
    (*dst)[len] = 0;
    *n = len;
    return 0;
}

/* ---- decode --------------------------------------------------------------------------------- */

static int decode_hello_rep(const msgpack_object_map *m, const char *c, proto_hello_rep *h,
                            char *err, size_t errlen) {
    struct { const char *key; char *dst; } strs[] = {
        {"engine", h->engine}, {"git", h->git}, {"model_sha256", h->model_sha256},
        {"arch", h->arch}, {"tokenizer_hash", h->tokenizer_hash}, {"kv_k", h->kv_k},
        {"kv_v", h->kv_v}, {"device", h->device},
    };
    int rc;
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        if ((rc = get_str(m, c, strs[i].key, strs[i].dst, PROTO_STR_MAX, 0, err, errlen))) return rc;
    uint64_t u;
    int64_t s;
    if ((rc = get_uint(m, c, "n_vocab", PROTO_MAX_VOCAB, &u, err, errlen))) return rc;
    h->n_vocab = (uint32_t)u;
    if ((rc = get_uint(m, c, "n_ctx", UINT64_MAX, &h->n_ctx, err, errlen))) return rc;
    if ((rc = get_uint(m, c, "n_layer", UINT32_MAX, &u, err, errlen))) return rc;
    h->n_layer = (uint32_t)u;
    if ((rc = get_uint(m, c, "threads", UINT32_MAX, &u, err, errlen))) return rc;
    h->threads = (uint32_t)u;
    if ((rc = get_uint(m, c, "kv_bytes_per_token", UINT64_MAX, &h->kv_bytes_per_token, err, errlen)))
        return rc;
    if ((rc = get_int(m, c, "bos", -1, INT32_MAX, &s, err, errlen))) return rc;
    h->bos = (int32_t)s;
    h->n_expert = h->n_expert_used = 0;   /* optional: absent = dense */
    if (find(m, "n_expert")) {
        if ((rc = get_uint(m, c, "n_expert", UINT16_MAX, &u, err, errlen))) return rc;
        h->n_expert = (uint32_t)u;
        if ((rc = get_uint(m, c, "n_expert_used", h->n_expert, &u, err, errlen))) return rc;
        h->n_expert_used = (uint32_t)u;
    }
    h->kv_layers[0] = 0;   /* optional */
    if (find(m, "kv_layers") && (rc = get_str(m, c, "kv_layers", h->kv_layers, PROTO_STR_MAX, 0, err, errlen)))
        return rc;
    /* optional, both or neither (absent: unknown); their values against n_layer: arm_check_hello */
    h->has_window = 0;
    h->window = h->layers_full = 0;
    if (find(m, "window") || find(m, "layers_full_context")) {
        if ((rc = get_uint(m, c, "window", INT32_MAX, &u, err, errlen))) return rc;
        h->window = (uint32_t)u;
        if ((rc = get_uint(m, c, "layers_full_context", UINT32_MAX, &u, err, errlen))) return rc;
        h->layers_full = (uint32_t)u;
        h->has_window = 1;
    }
    return 0;
}

static int decode_prefill_rep(const msgpack_object_map *m, const char *c, proto_prefill_rep *p,
                              char *err, size_t errlen) {
    uint64_t u;
    int rc;
    if ((rc = get_uint(m, c, "n_past", UINT64_MAX, &p->n_past, err, errlen))) return rc;
    if ((rc = get_uint(m, c, "n_vocab", PROTO_MAX_VOCAB, &u, err, errlen))) return rc;
    p->n_vocab = (uint32_t)u;
    if ((rc = get_uint(m, c, "n_rows", PROTO_MAX_TOKENS, &u, err, errlen))) return rc;
    p->n_rows = (uint32_t)u;
    uint64_t want = (uint64_t)p->n_rows * p->n_vocab;   /* <= 2^46: no overflow */
    void *logits = NULL;
    size_t n = 0;
    /* any length up to the message size is copied, then checked against the shape */
    rc = get_bin32(m, c, "logits", (uint64_t)PROTO_MAX_TOKENS * PROTO_MAX_VOCAB, &logits, &n, err,
                   errlen);
    p->logits = logits;
    if (rc) return rc;
    if (n != want)
        return errmsg_set(err, errlen, PROTO_E_BADMSG,
                    "%s: logits has %zu floats, n_rows * n_vocab = %u * %u = %" PRIu64,
                    c, n, p->n_rows, p->n_vocab, want);
    if (find(m, "experts")) {   /* optional; its shape is the requester's to check */
        void *ex = NULL;
        rc = get_bin32(m, c, "experts", PROTO_MAX_ROUTES, &ex, &p->n_experts, err, errlen);
        p->experts = ex;
        if (rc) return rc;
    }
    return 0;
}

static int decode_generate_rep(const msgpack_object_map *m, const char *c, proto_generate_rep *g,
                               char *err, size_t errlen) {
    void *tokens = NULL, *gaps = NULL;
    size_t n_tokens = 0, n_gaps = 0;
    int rc;
    if ((rc = get_uint(m, c, "n_past", UINT64_MAX, &g->n_past, err, errlen))) return rc;
    rc = get_bin32(m, c, "tokens", PROTO_MAX_GENERATE, &tokens, &n_tokens, err, errlen);
    g->tokens = tokens;
    if (rc) return rc;
    rc = get_bin32(m, c, "gaps", PROTO_MAX_GENERATE, &gaps, &n_gaps, err, errlen);
    g->gaps = gaps;
    if (rc) return rc;
    g->n = n_tokens;
    if (n_gaps != n_tokens)
        return errmsg_set(err, errlen, PROTO_E_BADMSG, "%s: %zu tokens but %zu gaps", c, n_tokens, n_gaps);
    return 0;
}

static int decode_stats_rep(const msgpack_object_map *m, const char *c, proto_stats_rep *s,
                            char *err, size_t errlen) {
    int rc;
    if ((rc = get_uint(m, c, "n_past", UINT64_MAX, &s->n_past, err, errlen))) return rc;
    if ((rc = get_uint(m, c, "kv_bytes", UINT64_MAX, &s->kv_bytes, err, errlen))) return rc;
    if ((rc = get_uint(m, c, "prefill_tokens", UINT64_MAX, &s->prefill_tokens, err, errlen))) return rc;
    if ((rc = get_f64(m, c, "prefill_seconds", &s->prefill_seconds, err, errlen))) return rc;
    if ((rc = get_uint(m, c, "decode_tokens", UINT64_MAX, &s->decode_tokens, err, errlen))) return rc;
    if ((rc = get_f64(m, c, "decode_seconds", &s->decode_seconds, err, errlen))) return rc;
    if ((rc = get_uint(m, c, "peak_rss", UINT64_MAX, &s->peak_rss, err, errlen))) return rc;
    s->has_rechunk = 0;   /* optional, both or neither */
    s->rechunk_rows = 0;
    s->rechunk_max = 0;
    if (find(m, "rechunk_rows") || find(m, "rechunk_max")) {
        if ((rc = get_uint(m, c, "rechunk_rows", UINT64_MAX, &s->rechunk_rows, err, errlen))) return rc;
        if ((rc = get_f64(m, c, "rechunk_max", &s->rechunk_max, err, errlen))) return rc;
        if (s->rechunk_max < 0)
            return errmsg_set(err, errlen, PROTO_E_BADMSG, "%s: rechunk_max %g is negative", c, s->rechunk_max);
        s->has_rechunk = 1;
    }
    return 0;
}

static int decode_vocab_rep(const msgpack_object_map *m, const char *c, proto_vocab_rep *v, char *err,
                            size_t errlen) {
    uint64_t u;
    void *p = NULL;
    size_t n_off = 0, n_ctl = 0;
    int rc;
    if ((rc = get_uint(m, c, "n_vocab", PROTO_MAX_VOCAB, &u, err, errlen))) return rc;
    v->n_vocab = (uint32_t)u;
    if ((rc = get_text(m, c, "pieces", PROTO_MAX_TEXT, &v->pieces, &v->n_pieces, err, errlen))) return rc;
    rc = get_bin32(m, c, "offsets", (uint64_t)PROTO_MAX_VOCAB + 1, &p, &n_off, err, errlen);
    v->offsets = p;
    if (rc) return rc;
    rc = get_bin32(m, c, "control", PROTO_MAX_VOCAB, &p, &n_ctl, err, errlen);
    v->control = p;
    if (rc) return rc;
    if ((rc = get_text(m, c, "chat_template", PROTO_MAX_TEMPLATE, &v->chat_template, &v->n_template, err, errlen)))
        return rc;
    if (n_off != (size_t)v->n_vocab + 1 || n_ctl != v->n_vocab || v->offsets[0] != 0 ||
        (uint64_t)v->offsets[v->n_vocab] != v->n_pieces)
        return errmsg_set(err, errlen, PROTO_E_BADMSG, "%s: %zu offsets and %zu control flags for n_vocab %u, or "
                          "offsets not spanning the %zu piece bytes", c, n_off, n_ctl, v->n_vocab, v->n_pieces);
    for (uint32_t t = 0; t < v->n_vocab; t++)
        if (v->offsets[t + 1] < v->offsets[t] || (v->control[t] != 0 && v->control[t] != 1))
            return errmsg_set(err, errlen, PROTO_E_BADMSG, "%s: token %u has a decreasing offset or a control flag "
                              "other than 0 or 1", c, t);
    return 0;
}

/* The fields of one message type; out->type and out->is_reply are set. */
static int decode_body(const msgpack_object_map *m, proto_msg *out, char *err, size_t errlen) {
    char c[48];   /* "prefill request" */
    snprintf(c, sizeof c, "%s %s", proto_type_name(out->type), out->is_reply ? "reply" : "request");
    uint64_t u;
    int64_t s;
    void *p = NULL;
    int rc = 0;
    if (!out->is_reply) {
        switch (out->type) {
        case PROTO_TOKENIZE: {
            proto_tokenize_req *t = &out->tokenize_req;
            if ((rc = get_text(m, c, "text", PROTO_MAX_TEXT, &t->text, &t->n_text, err, errlen)))
                return rc;
            if ((rc = get_bool(m, c, "add_bos", &t->add_bos, err, errlen))) return rc;
            t->special = 0;
            return find(m, "special") ? get_bool(m, c, "special", &t->special, err, errlen) : 0;
        }
        case PROTO_PREFILL: {
            proto_prefill_req *r = &out->prefill_req;
            rc = get_bin32(m, c, "tokens", PROTO_MAX_TOKENS, &p, &r->n_tokens, err, errlen);
            r->tokens = p;
            if (rc) return rc;
            if ((rc = get_uint(m, c, "rows", UINT32_MAX, &u, err, errlen))) return rc;
            if (u > PROTO_ROWS_ALL)
                return errmsg_set(err, errlen, PROTO_E_BADARG, "%s: rows = %" PRIu64 " is not 0, 1 or 2",
                            c, u);
            r->rows = (uint32_t)u;
            r->experts = 0;
            if (find(m, "experts") && (rc = get_bool(m, c, "experts", &r->experts, err, errlen))) return rc;
            if (find(m, "pin")) {
                rc = get_bin32(m, c, "pin", PROTO_MAX_ROUTES, &p, &r->n_pin, err, errlen);
                r->pin = p;
                if (rc) return rc;
            }
            return 0;
        }
        case PROTO_GENERATE: {
            proto_generate_req *g = &out->generate_req;
            if ((rc = get_uint(m, c, "n", PROTO_MAX_GENERATE, &u, err, errlen))) return rc;
            g->n = (uint32_t)u;
            if ((rc = get_f64(m, c, "temperature", &g->temperature, err, errlen))) return rc;
            if (!isfinite(g->temperature) || g->temperature < 0)
                return errmsg_set(err, errlen, PROTO_E_BADARG,
                            "%s: temperature %g is not a finite number >= 0", c, g->temperature);
            if ((rc = get_uint(m, c, "seed", UINT64_MAX, &g->seed, err, errlen))) return rc;
            g->top_p = 0;   /* optional: absent = no cut */
            if (find(m, "top_p")) {
                if ((rc = get_f64(m, c, "top_p", &g->top_p, err, errlen))) return rc;
                if (!(g->top_p > 0 && g->top_p <= 1))
                    return errmsg_set(err, errlen, PROTO_E_BADARG, "%s: top_p %g is not in (0, 1]", c, g->top_p);
            }
            return 0;
        }
        case PROTO_TRUNCATE:
            return get_uint(m, c, "depth", UINT64_MAX, &out->truncate_req.depth, err, errlen);
        default:
            return 0;   /* hello, stats, shutdown: no fields */
        }
    }
    switch (out->type) {
    case PROTO_HELLO:
        return decode_hello_rep(m, c, &out->hello_rep, err, errlen);
    case PROTO_TOKENIZE:
        rc = get_bin32(m, c, "tokens", PROTO_MAX_TOKENS, &p, &out->tokenize_rep.n_tokens, err, errlen);
        out->tokenize_rep.tokens = p;
        return rc;
    case PROTO_PREFILL:
        return decode_prefill_rep(m, c, &out->prefill_rep, err, errlen);
    case PROTO_GENERATE:
        return decode_generate_rep(m, c, &out->generate_rep, err, errlen);
    case PROTO_TRUNCATE:
        return get_uint(m, c, "n_past", UINT64_MAX, &out->truncate_rep.n_past, err, errlen);
    case PROTO_STATS:
        return decode_stats_rep(m, c, &out->stats_rep, err, errlen);
    case PROTO_VOCAB:
        return decode_vocab_rep(m, c, &out->vocab_rep, err, errlen);
    case PROTO_ERROR:
        if ((rc = get_int(m, c, "code", INT32_MIN, INT32_MAX, &s, err, errlen))) return rc;
        out->error.code = (int32_t)s;
        return get_str(m, c, "message", out->error.message, PROTO_ERRMSG_MAX, 1, err, errlen);
    default:
        return 0;   /* shutdown: no fields */
    }
}

int proto_decode(const void *buf, size_t len, size_t max_len, int is_reply, proto_msg *out,
                 char *err, size_t errlen) {
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    memset(out, 0, sizeof *out);
    if (err && errlen) err[0] = 0;
    int rc = 0;
    if (len > max_len) {
        rc = errmsg_set(err, errlen, PROTO_E_TOOBIG, "message of %zu bytes exceeds the limit of %zu bytes",
                  len, max_len);
        goto done;
    }
    if (len == 0) { rc = errmsg_set(err, errlen, PROTO_E_BADMSG, "empty message"); goto done; }
    if ((rc = scan_msgpack(buf, len, err, errlen))) goto done;

    size_t off = 0;
    msgpack_unpack_return ur = msgpack_unpack_next(&up, buf, len, &off);
    if (ur != MSGPACK_UNPACK_SUCCESS || off != len) {
        rc = errmsg_set(err, errlen, ur == MSGPACK_UNPACK_NOMEM_ERROR ? PROTO_E_INTERNAL : PROTO_E_BADMSG,
                  "msgpack-c could not decode the message (code %d)", (int)ur);
        goto done;
    }
    if (up.data.type != MSGPACK_OBJECT_MAP) {
        rc = errmsg_set(err, errlen, PROTO_E_BADMSG, "message is a %s, not a map",
                  obj_type_name(up.data.type));
        goto done;
    }
    const msgpack_object_map *m = &up.data.via.map;
    if ((rc = check_keys(m, err, errlen))) goto done;

    /* The id first, so that any later error can be answered with it. */
    uint64_t id;
    if ((rc = get_uint(m, "message", "id", UINT64_MAX, &id, err, errlen))) goto done;
    out->id = id;

    uint64_t v;
    if ((rc = get_uint(m, "message", "v", UINT64_MAX, &v, err, errlen))) goto done;
    if (v != PROTO_VERSION) {
        rc = errmsg_set(err, errlen, PROTO_E_VERSION, "protocol version %" PRIu64 ", this build speaks %d",
                  v, PROTO_VERSION);
        goto done;
    }

    const msgpack_object *t;
    if ((rc = need_type(m, "message", "type", MSGPACK_OBJECT_STR, "a str", &t, err, errlen))) goto done;
    proto_type type = PROTO_NONE;
    for (int i = 1; i < PROTO_N_TYPES; i++) {
        const char *name = proto_type_name((proto_type)i);
        if (key_is(t, name, strlen(name))) type = (proto_type)i;
    }
    if (type == PROTO_NONE) {
        rc = errmsg_set(err, errlen, PROTO_E_BADMSG, "unknown message type \"%.*s\"",
                  (int)(t->via.str.size > 64 ? 64 : t->via.str.size), t->via.str.ptr);
        goto done;
    }
    if (type == PROTO_ERROR && !is_reply) {
        rc = errmsg_set(err, errlen, PROTO_E_BADMSG, "an error message is not a request");
        goto done;
    }
    out->type = type;
    out->is_reply = is_reply ? 1 : 0;
    rc = decode_body(m, out, err, errlen);

done:
    msgpack_unpacked_destroy(&up);
    if (rc) {
        proto_type type = out->type;
        int rep = out->is_reply;
        uint64_t id = out->id;
        proto_msg_free(out);
        out->type = type;
        out->is_reply = rep;
        out->id = id;
    }
    return rc;
}
