/* proto.c — driver <-> worker messages: a bounded pre-scan of untrusted msgpack bytes, decode with
 * msgpack-c into proto_msg (payloads copied out), encode with an exact-size two-pass packer, and
 * the req/rep transport helpers over nng. See proto.h for the wire format and the caps. */
#include "proto/proto.h"
#include "proto/errmsg.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <msgpack.h>
#include <nng/supplemental/tls/tls.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "proto.c copies little-endian int32/float32 payloads as they are: little-endian hosts only"
#endif

static const char *const type_names[] = {
    "none", "hello", "tokenize", "prefill", "generate", "truncate", "stats", "shutdown", "error", "vocab",
};
#define N_TYPES ((int)(sizeof type_names / sizeof type_names[0]))

const char *proto_type_name(proto_type t) {
    return ((int)t >= 0 && (int)t < N_TYPES) ? type_names[t] : "?";
}

const char *proto_strerror(int code) {
    switch (code) {
    case PROTO_OK:          return "ok";
    case PROTO_E_BADMSG:    return "bad message";
    case PROTO_E_TOOBIG:    return "too big";
    case PROTO_E_BADARG:    return "bad argument";
    case PROTO_E_RANGE:     return "out of range";
    case PROTO_E_INTERNAL:  return "internal error";
    case PROTO_E_VERSION:   return "protocol version mismatch";
    case PROTO_E_TRANSPORT: return "transport error";
    case PROTO_E_TIMEOUT:   return "timed out";
    case PROTO_E_BUSY:      return "busy: owned by another driver";
    default:                return "unknown error code";
    }
}

void proto_init(proto_msg *m, proto_type type, int is_reply, uint64_t id) {
    memset(m, 0, sizeof *m);
    m->type = type;
    m->is_reply = is_reply ? 1 : 0;
    m->id = id;
}

void proto_error(proto_msg *m, uint64_t id, int code, const char *fmt, ...) {
    proto_init(m, PROTO_ERROR, 1, id);
    m->error.code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->error.message, sizeof m->error.message, fmt, ap);
    va_end(ap);
}

void proto_msg_free(proto_msg *m) {
    if (!m) return;
    if (m->is_reply) {
        switch (m->type) {
        case PROTO_TOKENIZE: free(m->tokenize_rep.tokens); break;
        case PROTO_PREFILL:  free(m->prefill_rep.logits); free(m->prefill_rep.experts); break;
        case PROTO_GENERATE: free(m->generate_rep.tokens); free(m->generate_rep.gaps); break;
        case PROTO_VOCAB:
            free(m->vocab_rep.pieces);
            free(m->vocab_rep.offsets);
            free(m->vocab_rep.control);
            free(m->vocab_rep.chat_template);
            break;
        default: break;
        }
    } else {
        switch (m->type) {
        case PROTO_TOKENIZE: free(m->tokenize_req.text); break;
        case PROTO_PREFILL:  free(m->prefill_req.tokens); free(m->prefill_req.pin); break;
        default: break;
        }
    }
    memset(m, 0, sizeof *m);
}

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

/* Unsigned integer <= max (else PROTO_E_TOOBIG). */
static int get_uint(const msgpack_object_map *m, const char *ctx, const char *key, uint64_t max,
                    uint64_t *out, char *err, size_t errlen) {
    const msgpack_object *o;
    int rc = need(m, ctx, key, &o, err, errlen);
    if (rc) return rc;
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return wrong_type(ctx, key, "an unsigned integer", o, err, errlen);
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
    int rc = need(m, ctx, key, &o, err, errlen);
    if (rc) return rc;
    if (o->type != MSGPACK_OBJECT_BOOLEAN) return wrong_type(ctx, key, "a bool", o, err, errlen);
    *out = o->via.boolean ? 1 : 0;
    return 0;
}

/* A str copied into dst[cap] with a NUL; no NUL bytes inside. Longer than cap-1: cut short when
 * cut, else PROTO_E_TOOBIG. */
static int get_str(const msgpack_object_map *m, const char *ctx, const char *key, char *dst,
                   size_t cap, int cut, char *err, size_t errlen) {
    const msgpack_object *o;
    int rc = need(m, ctx, key, &o, err, errlen);
    if (rc) return rc;
    if (o->type != MSGPACK_OBJECT_STR) return wrong_type(ctx, key, "a str", o, err, errlen);
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
    int rc = need(m, ctx, key, &o, err, errlen);
    if (rc) return rc;
    if (o->type != MSGPACK_OBJECT_BIN) return wrong_type(ctx, key, "a bin", o, err, errlen);
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
    if ((rc = need(m, "message", "type", &t, err, errlen))) goto done;
    if (t->type != MSGPACK_OBJECT_STR) {
        rc = wrong_type("message", "type", "a str", t, err, errlen);
        goto done;
    }
    proto_type type = PROTO_NONE;
    for (int i = 1; i < N_TYPES; i++)
        if (key_is(t, type_names[i], strlen(type_names[i]))) type = (proto_type)i;
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

/* ---- encode --------------------------------------------------------------------------------- */

/* Packer sink: with data == NULL it only counts bytes; else it writes into data[cap]. */
typedef struct {
    char *data;
    size_t len, cap;
} sink;

static int sink_write(void *arg, const char *buf, size_t len) {
    sink *o = arg;
    if (o->data) {
        if (len > o->cap - o->len) return -1;
        if (len) memcpy(o->data + o->len, buf, len);
    }
    o->len += len;
    return 0;
}

static int pk_key(msgpack_packer *pk, const char *k) {
    return msgpack_pack_str_with_body(pk, k, strlen(k));
}
static int pk_uint(msgpack_packer *pk, const char *k, uint64_t v) {
    return pk_key(pk, k) || msgpack_pack_uint64(pk, v);
}
static int pk_int(msgpack_packer *pk, const char *k, int64_t v) {
    return pk_key(pk, k) || msgpack_pack_int64(pk, v);
}
static int pk_f64(msgpack_packer *pk, const char *k, double v) {
    return pk_key(pk, k) || msgpack_pack_double(pk, v);
}
static int pk_str(msgpack_packer *pk, const char *k, const char *s) {
    return pk_key(pk, k) || msgpack_pack_str_with_body(pk, s, strlen(s));
}
static int pk_bin(msgpack_packer *pk, const char *k, const void *p, size_t bytes) {
    return pk_key(pk, k) || msgpack_pack_bin(pk, bytes) || (bytes && msgpack_pack_bin_body(pk, p, bytes));
}

/* The map header with the common keys; n_fields more key/value pairs follow. */
static int pk_head(msgpack_packer *pk, const proto_msg *m, size_t n_fields) {
    return msgpack_pack_map(pk, 3 + n_fields) || pk_uint(pk, "v", PROTO_VERSION) ||
           pk_str(pk, "type", proto_type_name(m->type)) || pk_uint(pk, "id", m->id);
}

/* Pack a message already checked by check_encodable. Returns 0 or -1 (sink full). */
static int pack(msgpack_packer *pk, const proto_msg *m) {
    if (!m->is_reply) {
        switch (m->type) {
        case PROTO_TOKENIZE: {
            const proto_tokenize_req *t = &m->tokenize_req;
            return pk_head(pk, m, t->special ? 3 : 2) || pk_key(pk, "text") || msgpack_pack_str(pk, t->n_text) ||
                   (t->n_text && msgpack_pack_str_body(pk, t->text, t->n_text)) ||
                   pk_key(pk, "add_bos") ||
                   (t->add_bos ? msgpack_pack_true(pk) : msgpack_pack_false(pk)) ||
                   (t->special && (pk_key(pk, "special") || msgpack_pack_true(pk)));
        }
        case PROTO_PREFILL: {
            const proto_prefill_req *p = &m->prefill_req;
            return pk_head(pk, m, 2 + (p->experts != 0) + (p->pin != NULL)) ||
                   pk_bin(pk, "tokens", p->tokens, p->n_tokens * 4) || pk_uint(pk, "rows", p->rows) ||
                   (p->experts && (pk_key(pk, "experts") || msgpack_pack_true(pk))) ||
                   (p->pin && pk_bin(pk, "pin", p->pin, p->n_pin * 4));
        }
        case PROTO_GENERATE: {
            const proto_generate_req *g = &m->generate_req;
            int cut = g->top_p > 0 && g->top_p < 1;   /* top_p is sent only when it cuts */
            return pk_head(pk, m, cut ? 4 : 3) || pk_uint(pk, "n", g->n) ||
                   pk_f64(pk, "temperature", g->temperature) || pk_uint(pk, "seed", g->seed) ||
                   (cut && pk_f64(pk, "top_p", g->top_p));
        }
        case PROTO_TRUNCATE:
            return pk_head(pk, m, 1) || pk_uint(pk, "depth", m->truncate_req.depth);
        default:
            return pk_head(pk, m, 0);
        }
    }
    switch (m->type) {
    case PROTO_HELLO: {
        const proto_hello_rep *h = &m->hello_rep;
        return pk_head(pk, m, 17) || pk_str(pk, "engine", h->engine) || pk_str(pk, "git", h->git) ||
               pk_str(pk, "model_sha256", h->model_sha256) || pk_str(pk, "arch", h->arch) ||
               pk_str(pk, "tokenizer_hash", h->tokenizer_hash) || pk_str(pk, "kv_k", h->kv_k) ||
               pk_str(pk, "kv_v", h->kv_v) || pk_str(pk, "device", h->device) ||
               pk_uint(pk, "n_vocab", h->n_vocab) || pk_uint(pk, "n_ctx", h->n_ctx) ||
               pk_uint(pk, "n_layer", h->n_layer) || pk_uint(pk, "threads", h->threads) ||
               pk_uint(pk, "kv_bytes_per_token", h->kv_bytes_per_token) || pk_int(pk, "bos", h->bos) ||
               pk_uint(pk, "n_expert", h->n_expert) || pk_uint(pk, "n_expert_used", h->n_expert_used) ||
               pk_str(pk, "kv_layers", h->kv_layers);
    }
    case PROTO_TOKENIZE:
        return pk_head(pk, m, 1) ||
               pk_bin(pk, "tokens", m->tokenize_rep.tokens, m->tokenize_rep.n_tokens * 4);
    case PROTO_PREFILL: {
        const proto_prefill_rep *p = &m->prefill_rep;
        return pk_head(pk, m, 4 + (p->experts != NULL)) || pk_uint(pk, "n_past", p->n_past) ||
               pk_uint(pk, "n_vocab", p->n_vocab) || pk_uint(pk, "n_rows", p->n_rows) ||
               pk_bin(pk, "logits", p->logits, (size_t)p->n_rows * p->n_vocab * 4) ||
               (p->experts && pk_bin(pk, "experts", p->experts, p->n_experts * 4));
    }
    case PROTO_GENERATE: {
        const proto_generate_rep *g = &m->generate_rep;
        return pk_head(pk, m, 3) || pk_bin(pk, "tokens", g->tokens, g->n * 4) ||
               pk_bin(pk, "gaps", g->gaps, g->n * 4) || pk_uint(pk, "n_past", g->n_past);
    }
    case PROTO_TRUNCATE:
        return pk_head(pk, m, 1) || pk_uint(pk, "n_past", m->truncate_rep.n_past);
    case PROTO_STATS: {
        const proto_stats_rep *s = &m->stats_rep;
        return pk_head(pk, m, 7) || pk_uint(pk, "n_past", s->n_past) ||
               pk_uint(pk, "kv_bytes", s->kv_bytes) || pk_uint(pk, "prefill_tokens", s->prefill_tokens) ||
               pk_f64(pk, "prefill_seconds", s->prefill_seconds) ||
               pk_uint(pk, "decode_tokens", s->decode_tokens) ||
               pk_f64(pk, "decode_seconds", s->decode_seconds) || pk_uint(pk, "peak_rss", s->peak_rss);
    }
    case PROTO_ERROR:
        return pk_head(pk, m, 2) || pk_int(pk, "code", m->error.code) ||
               pk_str(pk, "message", m->error.message);
    case PROTO_VOCAB: {
        const proto_vocab_rep *v = &m->vocab_rep;
        return pk_head(pk, m, 5) || pk_uint(pk, "n_vocab", v->n_vocab) ||
               pk_bin(pk, "pieces", v->pieces, v->n_pieces) ||
               pk_bin(pk, "offsets", v->offsets, ((size_t)v->n_vocab + 1) * 4) ||
               pk_bin(pk, "control", v->control, (size_t)v->n_vocab * 4) ||
               pk_bin(pk, "chat_template", v->chat_template, v->n_template);
    }
    default:
        return pk_head(pk, m, 0);
    }
}

/* A payload of n elements: at most max_n, non-NULL unless n = 0. */
static int check_payload(const char *c, const char *key, const void *p, uint64_t n, uint64_t max_n,
                         char *err, size_t errlen) {
    if (n > max_n)
        return errmsg_set(err, errlen, PROTO_E_TOOBIG, "%s: %s has %" PRIu64 " elements, the cap is %" PRIu64,
                    c, key, n, max_n);
    if (n && !p) return errmsg_set(err, errlen, PROTO_E_BADARG, "%s: %s is NULL", c, key);
    return 0;
}

static int check_string(const char *c, const char *key, const char *s, size_t cap,
                        char *err, size_t errlen) {
    if (!memchr(s, 0, cap))
        return errmsg_set(err, errlen, PROTO_E_BADARG, "%s: %s is not NUL-terminated within %zu bytes",
                    c, key, cap);
    return 0;
}

/* What the decoder would refuse, refused before sending. */
static int check_encodable(const proto_msg *m, char *err, size_t errlen) {
    if ((int)m->type <= PROTO_NONE || (int)m->type >= N_TYPES)
        return errmsg_set(err, errlen, PROTO_E_BADARG, "cannot encode message type %d", (int)m->type);
    if (m->type == PROTO_ERROR && !m->is_reply)
        return errmsg_set(err, errlen, PROTO_E_BADARG, "an error message must be a reply");
    char c[48];
    snprintf(c, sizeof c, "%s %s", proto_type_name(m->type), m->is_reply ? "reply" : "request");
    int rc;
    if (!m->is_reply) {
        switch (m->type) {
        case PROTO_TOKENIZE:
            return check_payload(c, "text", m->tokenize_req.text, m->tokenize_req.n_text,
                                 PROTO_MAX_TEXT, err, errlen);
        case PROTO_PREFILL:
            if (m->prefill_req.rows > PROTO_ROWS_ALL)
                return errmsg_set(err, errlen, PROTO_E_BADARG, "%s: rows = %u is not 0, 1 or 2", c,
                            m->prefill_req.rows);
            if (m->prefill_req.pin && (rc = check_payload(c, "pin", m->prefill_req.pin, m->prefill_req.n_pin,
                                                          PROTO_MAX_ROUTES, err, errlen)))
                return rc;
            return check_payload(c, "tokens", m->prefill_req.tokens, m->prefill_req.n_tokens,
                                 PROTO_MAX_TOKENS, err, errlen);
        case PROTO_GENERATE:
            if (m->generate_req.n > PROTO_MAX_GENERATE)
                return errmsg_set(err, errlen, PROTO_E_TOOBIG, "%s: n = %u exceeds the cap %u", c,
                            m->generate_req.n, PROTO_MAX_GENERATE);
            if (!isfinite(m->generate_req.temperature) || m->generate_req.temperature < 0)
                return errmsg_set(err, errlen, PROTO_E_BADARG, "%s: temperature %g is not finite and >= 0",
                            c, m->generate_req.temperature);
            if (!(m->generate_req.top_p >= 0 && m->generate_req.top_p <= 1))
                return errmsg_set(err, errlen, PROTO_E_BADARG, "%s: top_p %g is not in [0, 1]", c,
                                  m->generate_req.top_p);
            return 0;
        default:
            return 0;
        }
    }
    switch (m->type) {
    case PROTO_HELLO: {
        const proto_hello_rep *h = &m->hello_rep;
        if ((rc = check_string(c, "engine", h->engine, PROTO_STR_MAX, err, errlen)) ||
            (rc = check_string(c, "git", h->git, PROTO_STR_MAX, err, errlen)) ||
            (rc = check_string(c, "model_sha256", h->model_sha256, PROTO_STR_MAX, err, errlen)) ||
            (rc = check_string(c, "arch", h->arch, PROTO_STR_MAX, err, errlen)) ||
            (rc = check_string(c, "tokenizer_hash", h->tokenizer_hash, PROTO_STR_MAX, err, errlen)) ||
            (rc = check_string(c, "kv_k", h->kv_k, PROTO_STR_MAX, err, errlen)) ||
            (rc = check_string(c, "kv_v", h->kv_v, PROTO_STR_MAX, err, errlen)) ||
            (rc = check_string(c, "device", h->device, PROTO_STR_MAX, err, errlen)))
            return rc;
        if (h->n_vocab > PROTO_MAX_VOCAB)
            return errmsg_set(err, errlen, PROTO_E_TOOBIG, "%s: n_vocab %u exceeds the cap %u", c,
                        h->n_vocab, PROTO_MAX_VOCAB);
        if (h->bos < -1)
            return errmsg_set(err, errlen, PROTO_E_BADARG, "%s: bos %d is neither a token id nor -1", c,
                        h->bos);
        return 0;
    }
    case PROTO_TOKENIZE:
        return check_payload(c, "tokens", m->tokenize_rep.tokens, m->tokenize_rep.n_tokens,
                             PROTO_MAX_TOKENS, err, errlen);
    case PROTO_PREFILL: {
        const proto_prefill_rep *p = &m->prefill_rep;
        if (p->n_vocab > PROTO_MAX_VOCAB || p->n_rows > PROTO_MAX_TOKENS)
            return errmsg_set(err, errlen, PROTO_E_TOOBIG, "%s: n_rows %u or n_vocab %u over its cap", c,
                        p->n_rows, p->n_vocab);
        uint64_t n = (uint64_t)p->n_rows * p->n_vocab;
        if (n * 4 > UINT32_MAX)
            return errmsg_set(err, errlen, PROTO_E_TOOBIG,
                        "%s: %" PRIu64 " logits do not fit in one msgpack bin (4 GiB); send fewer rows",
                        c, n);
        if (p->experts && (rc = check_payload(c, "experts", p->experts, p->n_experts, PROTO_MAX_ROUTES, err, errlen)))
            return rc;
        return check_payload(c, "logits", p->logits, n, n, err, errlen);
    }
    case PROTO_GENERATE:
        if ((rc = check_payload(c, "tokens", m->generate_rep.tokens, m->generate_rep.n,
                                PROTO_MAX_GENERATE, err, errlen)))
            return rc;
        return check_payload(c, "gaps", m->generate_rep.gaps, m->generate_rep.n, PROTO_MAX_GENERATE,
                             err, errlen);
    case PROTO_ERROR:
        return check_string(c, "message", m->error.message, PROTO_ERRMSG_MAX, err, errlen);
    case PROTO_VOCAB: {
        const proto_vocab_rep *v = &m->vocab_rep;
        if (v->n_vocab > PROTO_MAX_VOCAB || v->n_template > PROTO_MAX_TEMPLATE)
            return errmsg_set(err, errlen, PROTO_E_TOOBIG, "%s: n_vocab %u or a %zu-byte chat template over its cap",
                              c, v->n_vocab, v->n_template);
        if ((rc = check_payload(c, "pieces", v->pieces, v->n_pieces, PROTO_MAX_TEXT, err, errlen)) ||
            (rc = check_payload(c, "offsets", v->offsets, (uint64_t)v->n_vocab + 1, (uint64_t)PROTO_MAX_VOCAB + 1,
                                err, errlen)) ||
            (rc = check_payload(c, "control", v->control, v->n_vocab, PROTO_MAX_VOCAB, err, errlen)) ||
            (rc = check_payload(c, "chat_template", v->chat_template, v->n_template, PROTO_MAX_TEMPLATE, err,
                                errlen)))
            return rc;
        return 0;
    }
    default:
        return 0;
    }
}

/* Check m and measure its encoding: one counting pass of the packer. */
static int encode_size(const proto_msg *m, size_t *len, char *err, size_t errlen) {
    *len = 0;
    int rc = check_encodable(m, err, errlen);
    if (rc) return rc;
    msgpack_packer pk;
    sink count = {NULL, 0, 0};
    msgpack_packer_init(&pk, &count, sink_write);
    if (pack(&pk, m))
        return errmsg_set(err, errlen, PROTO_E_INTERNAL, "could not size the %s message",
                    proto_type_name(m->type));
    *len = count.len;
    return 0;
}

/* Write the encoding of a checked m into buf[len], len from encode_size. */
static int encode_into(const proto_msg *m, void *buf, size_t len, char *err, size_t errlen) {
    msgpack_packer pk;
    sink out = {buf, 0, len};
    msgpack_packer_init(&pk, &out, sink_write);
    if (pack(&pk, m) || out.len != len)   /* cannot happen: same message, same size */
        return errmsg_set(err, errlen, PROTO_E_INTERNAL, "encoding the %s message changed size",
                    proto_type_name(m->type));
    return 0;
}

int proto_encode(const proto_msg *m, void **buf, size_t *len, char *err, size_t errlen) {
    size_t n;
    *buf = NULL;
    *len = 0;
    int rc = encode_size(m, &n, err, errlen);
    if (rc) return rc;
    void *p = malloc(n);
    if (!p)
        return errmsg_set(err, errlen, PROTO_E_INTERNAL, "out of memory for a %zu-byte %s message", n,
                    proto_type_name(m->type));
    if ((rc = encode_into(m, p, n, err, errlen))) { free(p); return rc; }
    *buf = p;
    *len = n;
    return 0;
}

/* ---- transport ------------------------------------------------------------------------------ */

static int nng_code(int rv) {
    return rv == NNG_ETIMEDOUT ? PROTO_E_TIMEOUT : PROTO_E_TRANSPORT;
}

static nng_duration to_duration(int timeout_ms) {
    return timeout_ms < 0 ? NNG_DURATION_INFINITE : (nng_duration)timeout_ms;
}

/* ---- listen URLs and TLS --------------------------------------------------------------------- */

/* The URL's scheme: 1 tcp (tcp4, tcp6), 2 tls+tcp (tls+tcp4, tls+tcp6), 3 ipc or inproc, 0 other.
 * *rest points after "://"; *v6 is 1 for the tcp6 forms. */
static int url_scheme(const char *url, const char **rest, int *v6) {
    static const struct { const char *p; int kind, v6; } k[] = {
        {"tcp://", 1, 0}, {"tcp4://", 1, 0}, {"tcp6://", 1, 1}, {"tls+tcp://", 2, 0}, {"tls+tcp4://", 2, 0},
        {"tls+tcp6://", 2, 1}, {"ipc://", 3, 0}, {"inproc://", 3, 0}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        size_t n = strlen(k[i].p);
        if (!strncmp(url, k[i].p, n)) { *rest = url + n; *v6 = k[i].v6; return k[i].kind; }
    }
    *rest = url;
    *v6 = 0;
    return 0;
}

/* Splits "HOST:PORT" or "[V6]:PORT" into host [hostlen] (no brackets) and *port_at (the port's
 * text). Returns 0, or -1 when there is no ":PORT" with a decimal port. */
static int split_host_port(const char *hp, char *host, size_t hostlen, const char **port_at) {
    const char *colon;
    size_t hl;
    if (hp[0] == '[') {
        const char *close = strchr(hp, ']');
        if (!close || close[1] != ':') return -1;
        hl = (size_t)(close - hp - 1);
        hp++;
        colon = close + 1;
    } else {
        if (!(colon = strrchr(hp, ':'))) return -1;
        hl = (size_t)(colon - hp);
    }
    if (hl >= hostlen) return -1;
    memcpy(host, hp, hl);
    host[hl] = 0;
    const char *p = colon + 1;
    if (!*p || strlen(p) > 5) return -1;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9') return -1;
    if (atoi(p) > 65535) return -1;
    *port_at = p;
    return 0;
}

static int addr_is_loopback(const struct sockaddr *sa) {
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr);
    return 0;
}

/* 1 when every address host stands for is a loopback address (a name is resolved). */
static int host_is_loopback(const char *host) {
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
    if (!host[0] || !strcmp(host, "*")) return 0;
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, NULL, &hints, &res) || !res) return 0;
    int all = 1;
    for (struct addrinfo *r = res; r; r = r->ai_next) all &= addr_is_loopback(r->ai_addr);
    freeaddrinfo(res);
    return all;
}

int proto_listen_url(const char *url, int have_tls, int allow_plain, char *out, size_t outlen,
                     char *err, size_t errlen) {
    const char *rest, *port;
    char host[256];
    int v6, kind = url_scheme(url, &rest, &v6);
    if (!kind)
        return errmsg_set(err, errlen, PROTO_E_BADARG, "listen URL '%s': use ipc://PATH, tcp://HOST:PORT or "
                          "tls+tcp://HOST:PORT", url);
    if (have_tls && kind != 2)
        return errmsg_set(err, errlen, PROTO_E_BADARG, "listen URL '%s': --tls-cert/--tls-key/--tls-ca are for "
                          "tls+tcp://HOST:PORT (a plain URL would ignore them)", url);
    if (kind == 3) {
        if (snprintf(out, outlen, "%s", url) >= (int)outlen)
            return errmsg_set(err, errlen, PROTO_E_BADARG, "listen URL '%s' is too long", url);
        return 0;
    }
    if (kind == 2 && !have_tls)
        return errmsg_set(err, errlen, PROTO_E_BADARG, "listen URL '%s': tls+tcp:// needs --tls-cert, --tls-key "
                          "and --tls-ca", url);
    if (split_host_port(rest, host, sizeof host, &port))
        return errmsg_set(err, errlen, PROTO_E_BADARG, "listen URL '%s': expected HOST:PORT after the scheme "
                          "(PORT 0 to 65535)", url);
    size_t scheme_len = (size_t)(rest - url);
    if (!host[0]) {   /* no host: loopback, never every interface */
        if (snprintf(out, outlen, "%.*s%s:%s", (int)scheme_len, url, v6 ? "[::1]" : "127.0.0.1", port) >= (int)outlen)
            return errmsg_set(err, errlen, PROTO_E_BADARG, "listen URL '%s' is too long", url);
        return 0;
    }
    if (kind == 1 && !allow_plain && !host_is_loopback(host))
        return errmsg_set(err, errlen, PROTO_E_BADARG, "listen URL '%s': plain tcp:// on a non-loopback address "
                          "serves anyone who can reach the port: use tls+tcp:// with --tls-cert, --tls-key and "
                          "--tls-ca, or say --allow-plain-tcp (a trusted network only)", url);
    if (snprintf(out, outlen, "%s", url) >= (int)outlen)
        return errmsg_set(err, errlen, PROTO_E_BADARG, "listen URL '%s' is too long", url);
    return 0;
}

/* Reads a PEM file (at most 1 MiB) into *text (malloc'd, NUL-terminated; the caller frees it).
 * Returns 0 or an NNG_E* code. */
static int read_pem(const char *path, char **text) {
    FILE *f = fopen(path, "rb");
    size_t cap = (size_t)1 << 20, n;
    char *t = f ? malloc(cap + 1) : NULL;   /* [cap + 1] */
    int rv = !f ? NNG_ENOENT : !t ? NNG_ENOMEM : 0;
    if (!rv) {
        n = fread(t, 1, cap, f);
        if (ferror(f) || n == cap) rv = NNG_EINVAL;   /* unreadable, or over 1 MiB: not a PEM file */
        else t[n] = 0;
    }
    if (f) fclose(f);
    if (rv) { free(t); return rv; }
    *text = t;
    return 0;
}

/* 1 when the PEM private key belongs to the PEM certificate (checked with libcrypto: mbedTLS 2.28
 * takes a key that does not match, and every handshake then fails without saying why). */
static int key_matches_cert(const char *cert_pem, const char *key_pem) {
    BIO *bc = BIO_new_mem_buf(cert_pem, -1), *bk = BIO_new_mem_buf(key_pem, -1);
    X509 *x = bc ? PEM_read_bio_X509(bc, NULL, NULL, NULL) : NULL;
    EVP_PKEY *k = bk ? PEM_read_bio_PrivateKey(bk, NULL, NULL, NULL) : NULL;
    int ok = x && k && X509_check_private_key(x, k) == 1;
    EVP_PKEY_free(k);
    X509_free(x);
    BIO_free(bk);
    BIO_free(bc);
    return ok;
}

/* A TLS configuration for one end (server: a listening worker; client: a dialling driver, which
 * checks the worker's certificate against server_name). The caller frees *cfg with
 * nng_tls_config_free (an endpoint it was set on keeps its own reference). */
static int tls_config(const proto_tls *t, int server, const char *server_name, nng_tls_config **cfg,
                      char *err, size_t errlen) {
    const char *what = "nng_tls_config_alloc";
    char *cert_pem = NULL, *key_pem = NULL;   /* the files' text, NUL-terminated (read_pem) */
    int rv;
    *cfg = NULL;
    if (!t || !t->cert || !t->key || !t->ca || !t->cert[0] || !t->key[0] || !t->ca[0])
        return errmsg_set(err, errlen, PROTO_E_BADARG, "TLS needs all three of --tls-cert, --tls-key and --tls-ca");
    const char *files[3] = { t->cert, t->key, t->ca };
    for (int i = 0; i < 3; i++)
        if (access(files[i], R_OK))
            return errmsg_set(err, errlen, PROTO_E_BADARG, "TLS: cannot read %s: %s", files[i], strerror(errno));
    if ((rv = nng_tls_config_alloc(cfg, server ? NNG_TLS_MODE_SERVER : NNG_TLS_MODE_CLIENT))) goto fail;
    what = "the CA file (--tls-ca: PEM certificates)";
    if ((rv = nng_tls_config_ca_file(*cfg, t->ca))) goto fail;
    what = "the certificate and key (--tls-cert, --tls-key: PEM; do they match?)";
    if ((rv = read_pem(t->cert, &cert_pem)) || (rv = read_pem(t->key, &key_pem))) goto fail;
    if (!key_matches_cert(cert_pem, key_pem)) { rv = NNG_EINVAL; goto fail; }
    if ((rv = nng_tls_config_own_cert(*cfg, cert_pem, key_pem, NULL))) goto fail;
    what = "nng_tls_config_auth_mode";
    if ((rv = nng_tls_config_auth_mode(*cfg, NNG_TLS_AUTH_MODE_REQUIRED))) goto fail;
    what = "nng_tls_config_version";
    if ((rv = nng_tls_config_version(*cfg, NNG_TLS_1_2, NNG_TLS_1_3))) goto fail;
    what = "nng_tls_config_server_name";
    if (!server && server_name && (rv = nng_tls_config_server_name(*cfg, server_name))) goto fail;
    free(cert_pem);
    free(key_pem);
    return 0;
fail:
    if (*cfg) nng_tls_config_free(*cfg);
    *cfg = NULL;
    free(cert_pem);
    free(key_pem);
    return errmsg_set(err, errlen, PROTO_E_BADARG, "TLS: %s: %s", what, nng_strerror(rv));
}

/* Checks that tls is given exactly for a tls+tcp URL; for one, also its host (the server name). */
static int tls_for_url(const char *url, const proto_tls *tls, char *host, size_t hostlen, char *err,
                       size_t errlen) {
    const char *rest, *port;
    int v6, kind = url_scheme(url, &rest, &v6);
    host[0] = 0;
    if (kind == 2 && !tls)
        return errmsg_set(err, errlen, PROTO_E_BADARG, "%s: tls+tcp:// needs --tls-cert, --tls-key and --tls-ca", url);
    if (kind != 2 && tls)
        return errmsg_set(err, errlen, PROTO_E_BADARG, "%s: TLS certificates are only for tls+tcp:// URLs", url);
    if (kind == 2 && split_host_port(rest, host, hostlen, &port))
        return errmsg_set(err, errlen, PROTO_E_BADARG, "%s: expected tls+tcp://HOST:PORT", url);
    return 0;
}

int proto_listen(const char *url, size_t recv_max, int timeout_ms, nng_socket *s,
                 char *err, size_t errlen) {
    return proto_listen_tls(url, recv_max, timeout_ms, NULL, NULL, NULL, s, NULL, err, errlen);
}

int proto_listen_notify(const char *url, size_t recv_max, int timeout_ms, nng_pipe_cb cb, void *arg,
                        nng_socket *s, char *err, size_t errlen) {
    return proto_listen_tls(url, recv_max, timeout_ms, cb, arg, NULL, s, NULL, err, errlen);
}

int proto_listen_tls(const char *url, size_t recv_max, int timeout_ms, nng_pipe_cb cb, void *arg,
                     const proto_tls *tls, nng_socket *s, nng_listener *lst, char *err, size_t errlen) {
    int rv;
    char host[256];
    nng_listener l;
    nng_tls_config *cfg = NULL;
    char why[600];
    int rc = tls_for_url(url, tls, host, sizeof host, why, sizeof why);
    if (!rc && tls) rc = tls_config(tls, 1, NULL, &cfg, why, sizeof why);
    if (rc) return errmsg_set(err, errlen, PROTO_E_TRANSPORT, "listen on %s: %s", url, why);
    const char *what = "nng_rep0_open";
    if ((rv = nng_rep0_open(s)) != 0) {
        if (cfg) nng_tls_config_free(cfg);
        return errmsg_set(err, errlen, PROTO_E_TRANSPORT, "listen on %s: nng_rep0_open: %s", url,
                    nng_strerror(rv));
    }
    if ((rv = nng_socket_set_size(*s, NNG_OPT_RECVMAXSZ, recv_max ? recv_max : PROTO_REQ_MAX))) {
        what = "set NNG_OPT_RECVMAXSZ"; goto fail;
    }
    if ((rv = nng_socket_set_ms(*s, NNG_OPT_RECVTIMEO, to_duration(timeout_ms)))) {
        what = "set NNG_OPT_RECVTIMEO"; goto fail;
    }
    if ((rv = nng_socket_set_ms(*s, NNG_OPT_SENDTIMEO, to_duration(timeout_ms)))) {
        what = "set NNG_OPT_SENDTIMEO"; goto fail;
    }
    if (cb && ((rv = nng_pipe_notify(*s, NNG_PIPE_EV_ADD_PRE, cb, arg)) ||
               (rv = nng_pipe_notify(*s, NNG_PIPE_EV_REM_POST, cb, arg)))) {
        what = "nng_pipe_notify"; goto fail;
    }
    if ((rv = nng_listener_create(&l, *s, url))) { what = "nng_listener_create"; goto fail; }
    if (cfg && (rv = nng_listener_set_ptr(l, NNG_OPT_TLS_CONFIG, cfg))) { what = "set NNG_OPT_TLS_CONFIG"; goto fail; }
    if ((rv = nng_listener_start(l, 0))) { what = "nng_listen"; goto fail; }
    if (lst) *lst = l;
    if (cfg) nng_tls_config_free(cfg);   /* the listener holds its own reference */
    return 0;
fail:
    nng_close(*s);
    if (cfg) nng_tls_config_free(cfg);
    return errmsg_set(err, errlen, PROTO_E_TRANSPORT, "listen on %s: %s: %s", url, what, nng_strerror(rv));
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int proto_listener_port(nng_listener l) {
    int port = 0;
    if (nng_listener_get_int(l, NNG_OPT_TCP_BOUND_PORT, &port)) return 0;
    return port;
}

/* The sum of the named counters among the statistics of one endpoint (scope "dialer" or
 * "listener" with that id). The tree is walked here: nng 1.5.2's nng_stat_find_dialer stops after
 * the first top-level scope, so it misses the endpoints of every socket but the first. */
static uint64_t endpoint_stats(const char *scope, int id, const char *const *names, int n) {
    nng_stat *all = NULL;
    uint64_t sum = 0;
    if (id <= 0 || nng_stats_get(&all)) return 0;
    for (nng_stat *ep = nng_stat_child(all); ep; ep = nng_stat_next(ep)) {
        if (strcmp(nng_stat_name(ep), scope)) continue;
        nng_stat *idc = nng_stat_child(ep);
        while (idc && strcmp(nng_stat_name(idc), "id")) idc = nng_stat_next(idc);
        if (!idc || nng_stat_value(idc) != (uint64_t)id) continue;
        for (nng_stat *c = nng_stat_child(ep); c; c = nng_stat_next(c))
            for (int i = 0; i < n; i++)
                if (!strcmp(nng_stat_name(c), names[i])) sum += nng_stat_value(c);
        break;
    }
    nng_stats_free(all);
    return sum;
}

uint64_t proto_listener_refused(nng_listener l) {
    static const char *const names[] = { "auth", "proto", "other", "reject" };
    return endpoint_stats("listener", nng_listener_id(l), names, 4);
}

int proto_dial(const char *url, int timeout_ms, size_t recv_max, nng_socket *s,
               char *err, size_t errlen) {
    return proto_dial_tls(url, timeout_ms, recv_max, NULL, s, err, errlen);
}

int proto_dial_tls(const char *url, int timeout_ms, size_t recv_max, const proto_tls *tls, nng_socket *s,
                   char *err, size_t errlen) {
    int rv, fd;
    char host[256];
    nng_dialer d;
    nng_tls_config *cfg = NULL;
    char why[600];
    int rc = tls_for_url(url, tls, host, sizeof host, why, sizeof why);
    if (!rc && tls) rc = tls_config(tls, 0, host, &cfg, why, sizeof why);
    if (rc) return errmsg_set(err, errlen, PROTO_E_TRANSPORT, "dial %s: %s", url, why);
    const char *what = "nng_req0_open";
    if ((rv = nng_req0_open(s)) != 0) {
        if (cfg) nng_tls_config_free(cfg);
        return errmsg_set(err, errlen, PROTO_E_TRANSPORT, "dial %s: nng_req0_open: %s", url,
                    nng_strerror(rv));
    }
    if ((rv = nng_socket_set_ms(*s, NNG_OPT_RECVTIMEO, to_duration(timeout_ms)))) {
        what = "set NNG_OPT_RECVTIMEO"; goto fail;
    }
    if ((rv = nng_socket_set_ms(*s, NNG_OPT_SENDTIMEO, to_duration(timeout_ms)))) {
        what = "set NNG_OPT_SENDTIMEO"; goto fail;
    }
    if ((rv = nng_socket_set_ms(*s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE))) {
        what = "set NNG_OPT_REQ_RESENDTIME"; goto fail;
    }
    if ((rv = nng_socket_set_size(*s, NNG_OPT_RECVMAXSZ, recv_max))) {
        what = "set NNG_OPT_RECVMAXSZ"; goto fail;
    }
    /* Retry quickly while the worker starts, then at most every 200 ms. */
    if ((rv = nng_socket_set_ms(*s, NNG_OPT_RECONNMINT, 10))) { what = "set NNG_OPT_RECONNMINT"; goto fail; }
    if ((rv = nng_socket_set_ms(*s, NNG_OPT_RECONNMAXT, 200))) { what = "set NNG_OPT_RECONNMAXT"; goto fail; }
    /* Non-blocking: the dialer keeps retrying in the background until a listener appears. */
    if ((rv = nng_dialer_create(&d, *s, url))) { what = "nng_dialer_create"; goto fail; }
    if (cfg && (rv = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg))) { what = "set NNG_OPT_TLS_CONFIG"; goto fail; }
    if ((rv = nng_dialer_start(d, NNG_FLAG_NONBLOCK))) { what = "nng_dial"; goto fail; }
    if (cfg) nng_tls_config_free(cfg);   /* the dialer holds its own reference */
    cfg = NULL;
    /* The req socket's send descriptor becomes readable once a connection to a rep peer is up. */
    if ((rv = nng_socket_get_int(*s, NNG_OPT_SENDFD, &fd))) { what = "get NNG_OPT_SENDFD"; goto fail; }
    int64_t deadline = now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
    for (;;) {
        int wait = -1;
        if (timeout_ms >= 0) {
            int64_t left = deadline - now_ms();
            wait = left > 0 ? (int)left : 0;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (tls && (wait < 0 || wait > 100)) wait = 100;   /* TLS: look at the handshakes in between */
        int n = poll(&pfd, 1, wait);
        if (n > 0) return 0;
        if (n == 0 && tls) {
            /* a handshake that failed authentication fails again: say so now, not at the timeout.
             * "auth": a certificate did not verify (the worker's here, or ours there: the worker's
             * alert says so); "other": the worker hung up during the handshake (e.g. we sent no
             * certificate). Twice "other": not a worker that is still starting. */
            static const char *const auth[] = { "auth" }, *const other[] = { "other" };
            uint64_t na = endpoint_stats("dialer", nng_dialer_id(d), auth, 1);
            uint64_t no = endpoint_stats("dialer", nng_dialer_id(d), other, 1);
            if (na >= 1 || no >= 2) {
                nng_close(*s);
                return errmsg_set(err, errlen, PROTO_E_TRANSPORT, "dial %s: TLS handshake failed (%s): check that "
                                  "our --tls-ca signed the worker's certificate and that it names this host, and that "
                                  "the CA the worker trusts signed our --tls-cert", url,
                                  na ? "a certificate was refused" : "the worker closed the connection");
            }
            if (timeout_ms >= 0 && now_ms() < deadline) continue;
        }
        if (n == 0) {
            nng_close(*s);
            return errmsg_set(err, errlen, PROTO_E_TIMEOUT, "dial %s: no worker answered within %d ms%s",
                        url, timeout_ms, tls ? " (over TLS: also check that the worker's certificate names "
                        "this host and that each side's --tls-ca signed the other's --tls-cert)" : "");
        }
        if (errno != EINTR) {
            int e = errno;
            nng_close(*s);
            return errmsg_set(err, errlen, PROTO_E_TRANSPORT, "dial %s: poll: %s", url, strerror(e));
        }
    }
fail:
    nng_close(*s);
    if (cfg) nng_tls_config_free(cfg);
    return errmsg_set(err, errlen, nng_code(rv), "dial %s: %s: %s", url, what, nng_strerror(rv));
}

size_t proto_tokenize_reply_max(size_t n_text) {
    size_t tokens = n_text > (PROTO_MAX_TOKENS - 5) / 4 ? PROTO_MAX_TOKENS : 4 * n_text + 5;
    return tokens * 4 + PROTO_SLACK;
}

/* Encode straight into an nng message body (no extra copy of a large payload) and send it. */
static int send_msg(nng_socket s, const proto_msg *m, const char *what, char *err, size_t errlen) {
    size_t len;
    int rc = encode_size(m, &len, err, errlen);
    if (rc) return rc;
    nng_msg *msg;
    int rv = nng_msg_alloc(&msg, len);
    if (rv)
        return errmsg_set(err, errlen, PROTO_E_INTERNAL, "allocate a %zu-byte %s %s: %s", len,
                    proto_type_name(m->type), what, nng_strerror(rv));
    if ((rc = encode_into(m, nng_msg_body(msg), len, err, errlen))) {
        nng_msg_free(msg);
        return rc;
    }
    if ((rv = nng_sendmsg(s, msg, 0))) {   /* on success nng owns msg */
        nng_msg_free(msg);
        return errmsg_set(err, errlen, nng_code(rv), "send %s %s %" PRIu64 ": %s", proto_type_name(m->type),
                    what, m->id, nng_strerror(rv));
    }
    return 0;
}

int proto_call(nng_socket s, const proto_msg *req, proto_msg *rep, size_t max_len,
               char *err, size_t errlen) {
    memset(rep, 0, sizeof *rep);
    if (req->is_reply)
        return errmsg_set(err, errlen, PROTO_E_BADARG, "proto_call: the message is a reply, not a request");
    int rc = send_msg(s, req, "request", err, errlen);
    if (rc) return rc;
    nng_msg *msg;
    int rv = nng_recvmsg(s, &msg, 0);
    if (rv)
        return errmsg_set(err, errlen, nng_code(rv), "no reply to %s request %" PRIu64 ": %s",
                    proto_type_name(req->type), req->id, nng_strerror(rv));
    char why[256];
    rc = proto_decode(nng_msg_body(msg), nng_msg_len(msg), max_len, 1, rep, why, sizeof why);
    nng_msg_free(msg);
    if (rc) {
        memset(rep, 0, sizeof *rep);
        return errmsg_set(err, errlen, rc, "bad reply to %s request %" PRIu64 ": %s",
                    proto_type_name(req->type), req->id, why);
    }
    if (rep->type == PROTO_ERROR && (rep->id == req->id || rep->id == 0)) {
        rc = rep->error.code != 0 ? rep->error.code : PROTO_E_BADMSG;
        return errmsg_set(err, errlen, rc, "%s", rep->error.message);
    }
    if (rep->id != req->id || rep->type != req->type) {
        rc = errmsg_set(err, errlen, PROTO_E_BADMSG, "%s request %" PRIu64 " got a %s reply with id %" PRIu64,
                  proto_type_name(req->type), req->id, proto_type_name(rep->type), rep->id);
        proto_msg_free(rep);
        return rc;
    }
    return 0;
}

int proto_recv(nng_socket s, size_t max_len, proto_msg *req, char *err, size_t errlen) {
    nng_pipe p;
    return proto_recv_pipe(s, max_len, req, &p, err, errlen);
}

int proto_recv_pipe(nng_socket s, size_t max_len, proto_msg *req, nng_pipe *pipe, char *err, size_t errlen) {
    memset(req, 0, sizeof *req);
    *pipe = (nng_pipe)NNG_PIPE_INITIALIZER;
    nng_msg *msg;   /* received in place: no copy of the body */
    int rv = nng_recvmsg(s, &msg, 0);
    if (rv) return errmsg_set(err, errlen, nng_code(rv), "receive a request: %s", nng_strerror(rv));
    *pipe = nng_msg_get_pipe(msg);
    int rc = proto_decode(nng_msg_body(msg), nng_msg_len(msg), max_len, 0, req, err, errlen);
    nng_msg_free(msg);
    return rc;
}

int proto_reply(nng_socket s, const proto_msg *rep, char *err, size_t errlen) {
    if (!rep->is_reply)
        return errmsg_set(err, errlen, PROTO_E_BADARG, "proto_reply: the message is a request, not a reply");
    return send_msg(s, rep, "reply", err, errlen);
}
