/* codec.c — the message basics (type names, status strings, init, error replies, free) and encode:
 * a proto_msg checked as the decoder would check it, then packed by msgpack-c in two passes (one
 * that only counts bytes, one into a buffer of exactly that size). No sockets, no untrusted input:
 * decoding is proto/decode.c. See proto/codec.h for the wire format and the caps.
 *
 * Who allocates: proto_encode mallocs the buffer it returns (the caller frees it);
 * proto_encode_size / proto_encode_into and pack allocate nothing (the packer writes into a sink
 * over the caller's buffer); proto_msg_free frees what proto_decode allocated. */
#include "proto/codec.h"
#include "kernels/errmsg.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "codec.c packs little-endian int32/float32 payloads as they are: little-endian hosts only"
#endif

static const char *const type_names[] = {
    "none", "hello", "tokenize", "prefill", "generate", "truncate", "stats", "shutdown", "error", "vocab",
};
_Static_assert(sizeof type_names / sizeof type_names[0] == PROTO_N_TYPES, "a name for every proto_type");

const char *proto_type_name(proto_type t) {
    return ((int)t >= 0 && (int)t < PROTO_N_TYPES) ? type_names[t] : "?";
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

/* A receive cap, computed here because it is a size of a message (see codec.h). */
size_t proto_tokenize_reply_max(size_t n_text) {
    size_t tokens = n_text > (PROTO_MAX_TOKENS - 5) / 4 ? PROTO_MAX_TOKENS : 4 * n_text + 5;
    return tokens * 4 + PROTO_SLACK;
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
        return pk_head(pk, m, 17 + (h->has_window ? 2 : 0)) || pk_str(pk, "engine", h->engine) ||
               pk_str(pk, "git", h->git) ||
               pk_str(pk, "model_sha256", h->model_sha256) || pk_str(pk, "arch", h->arch) ||
               pk_str(pk, "tokenizer_hash", h->tokenizer_hash) || pk_str(pk, "kv_k", h->kv_k) ||
               pk_str(pk, "kv_v", h->kv_v) || pk_str(pk, "device", h->device) ||
               pk_uint(pk, "n_vocab", h->n_vocab) || pk_uint(pk, "n_ctx", h->n_ctx) ||
               pk_uint(pk, "n_layer", h->n_layer) || pk_uint(pk, "threads", h->threads) ||
               pk_uint(pk, "kv_bytes_per_token", h->kv_bytes_per_token) || pk_int(pk, "bos", h->bos) ||
               pk_uint(pk, "n_expert", h->n_expert) || pk_uint(pk, "n_expert_used", h->n_expert_used) ||
               pk_str(pk, "kv_layers", h->kv_layers) ||
               (h->has_window && (pk_uint(pk, "window", h->window) ||
                                  pk_uint(pk, "layers_full_context", h->layers_full)));
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
        return pk_head(pk, m, 7 + (s->has_rechunk ? 2 : 0)) || pk_uint(pk, "n_past", s->n_past) ||
               pk_uint(pk, "kv_bytes", s->kv_bytes) || pk_uint(pk, "prefill_tokens", s->prefill_tokens) ||
               pk_f64(pk, "prefill_seconds", s->prefill_seconds) ||
               pk_uint(pk, "decode_tokens", s->decode_tokens) ||
               pk_f64(pk, "decode_seconds", s->decode_seconds) || pk_uint(pk, "peak_rss", s->peak_rss) ||
               (s->has_rechunk && (pk_uint(pk, "rechunk_rows", s->rechunk_rows) ||
                                   pk_f64(pk, "rechunk_max", s->rechunk_max)));
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

/* The checks below refuse what the decoder would, for one message type each; c labels the message
 * ("prefill request") in the error. They return 0 or a PROTO_E_* code with the message in err. */

static int check_request(const proto_msg *m, const char *c, char *err, size_t errlen) {
    int rc;
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

static int check_hello(const proto_hello_rep *h, const char *c, char *err, size_t errlen) {
    int rc;
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
    if (h->has_window && h->window > INT32_MAX)
        return errmsg_set(err, errlen, PROTO_E_TOOBIG, "%s: window %u exceeds the cap %d", c, h->window,
                          INT32_MAX);
    return 0;
}

static int check_prefill_rep(const proto_prefill_rep *p, const char *c, char *err, size_t errlen) {
    int rc;
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

static int check_vocab_rep(const proto_vocab_rep *v, const char *c, char *err, size_t errlen) {
    int rc;
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

static int check_reply(const proto_msg *m, const char *c, char *err, size_t errlen) {
    int rc;
    switch (m->type) {
    case PROTO_HELLO:
        return check_hello(&m->hello_rep, c, err, errlen);
    case PROTO_TOKENIZE:
        return check_payload(c, "tokens", m->tokenize_rep.tokens, m->tokenize_rep.n_tokens,
                             PROTO_MAX_TOKENS, err, errlen);
    case PROTO_PREFILL:
        return check_prefill_rep(&m->prefill_rep, c, err, errlen);
    case PROTO_GENERATE:
        if ((rc = check_payload(c, "tokens", m->generate_rep.tokens, m->generate_rep.n,
                                PROTO_MAX_GENERATE, err, errlen)))
            return rc;
        return check_payload(c, "gaps", m->generate_rep.gaps, m->generate_rep.n, PROTO_MAX_GENERATE,
                             err, errlen);
    case PROTO_ERROR:
        return check_string(c, "message", m->error.message, PROTO_ERRMSG_MAX, err, errlen);
    case PROTO_VOCAB:
        return check_vocab_rep(&m->vocab_rep, c, err, errlen);
    default:
        return 0;
    }
}

/* What the decoder would refuse, refused before sending. */
static int check_encodable(const proto_msg *m, char *err, size_t errlen) {
    if ((int)m->type <= PROTO_NONE || (int)m->type >= PROTO_N_TYPES)
        return errmsg_set(err, errlen, PROTO_E_BADARG, "cannot encode message type %d", (int)m->type);
    if (m->type == PROTO_ERROR && !m->is_reply)
        return errmsg_set(err, errlen, PROTO_E_BADARG, "an error message must be a reply");
    char c[48];
    snprintf(c, sizeof c, "%s %s", proto_type_name(m->type), m->is_reply ? "reply" : "request");
    return m->is_reply ? check_reply(m, c, err, errlen) : check_request(m, c, err, errlen);
}

/* Check m and measure its encoding: one counting pass of the packer. */
int proto_encode_size(const proto_msg *m, size_t *len, char *err, size_t errlen) {
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

/* Write the encoding of a checked m into buf[len], len from proto_encode_size. */
int proto_encode_into(const proto_msg *m, void *buf, size_t len, char *err, size_t errlen) {
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
    int rc = proto_encode_size(m, &n, err, errlen);
    if (rc) return rc;
    void *p = malloc(n);
    if (!p)
        return errmsg_set(err, errlen, PROTO_E_INTERNAL, "out of memory for a %zu-byte %s message", n,
                    proto_type_name(m->type));
    if ((rc = proto_encode_into(m, p, n, err, errlen))) { free(p); return rc; }
    *buf = p;
    *len = n;
    return 0;
}
