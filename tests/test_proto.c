/* test_proto.c — the driver <-> worker protocol: round trips of every message, hand-built wire
 * bytes, hostile and malformed input (truncation, wrong types, bombs), and a live nng req/rep
 * session over ipc with a server thread (garbage, oversize, timeout, a crashing server). */
#include "proto/proto.h"
#include "tests/check.h"
#include "tests/proc.h"

#include <math.h>
#include <msgpack.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static long max_rss_kib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static uint64_t rng_next(uint64_t *s) {   /* xorshift64* */
    *s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

/* ---- field-by-field equality of two messages ---- */

static int bytes_eq(const void *a, const void *b, size_t n) {
    return n == 0 || (a && b && memcmp(a, b, n) == 0);
}

static int msg_equal(const proto_msg *a, const proto_msg *b) {
    if (a->type != b->type || a->is_reply != b->is_reply || a->id != b->id) return 0;
    if (!a->is_reply) {
        switch (a->type) {
        case PROTO_TOKENIZE:
            return a->tokenize_req.n_text == b->tokenize_req.n_text &&
                   a->tokenize_req.add_bos == b->tokenize_req.add_bos &&
                   a->tokenize_req.special == b->tokenize_req.special &&
                   bytes_eq(a->tokenize_req.text, b->tokenize_req.text, a->tokenize_req.n_text);
        case PROTO_PREFILL:
            return a->prefill_req.n_tokens == b->prefill_req.n_tokens &&
                   a->prefill_req.rows == b->prefill_req.rows &&
                   a->prefill_req.experts == b->prefill_req.experts &&
                   a->prefill_req.n_pin == b->prefill_req.n_pin && !a->prefill_req.pin == !b->prefill_req.pin &&
                   bytes_eq(a->prefill_req.pin, b->prefill_req.pin, a->prefill_req.n_pin * 4) &&
                   bytes_eq(a->prefill_req.tokens, b->prefill_req.tokens, a->prefill_req.n_tokens * 4);
        case PROTO_GENERATE:
            return a->generate_req.n == b->generate_req.n &&
                   a->generate_req.seed == b->generate_req.seed &&
                   memcmp(&a->generate_req.top_p, &b->generate_req.top_p, 8) == 0 &&
                   memcmp(&a->generate_req.temperature, &b->generate_req.temperature, 8) == 0;
        case PROTO_TRUNCATE:
            return a->truncate_req.depth == b->truncate_req.depth;
        default:
            return 1;
        }
    }
    switch (a->type) {
    case PROTO_HELLO: {
        const proto_hello_rep *x = &a->hello_rep, *y = &b->hello_rep;
        return !strcmp(x->engine, y->engine) && !strcmp(x->git, y->git) &&
               !strcmp(x->model_sha256, y->model_sha256) && !strcmp(x->arch, y->arch) &&
               !strcmp(x->tokenizer_hash, y->tokenizer_hash) && !strcmp(x->kv_k, y->kv_k) &&
               !strcmp(x->kv_v, y->kv_v) && !strcmp(x->device, y->device) &&
               x->n_vocab == y->n_vocab && x->n_ctx == y->n_ctx && x->n_layer == y->n_layer &&
               x->threads == y->threads && x->kv_bytes_per_token == y->kv_bytes_per_token &&
               x->bos == y->bos && x->n_expert == y->n_expert && x->n_expert_used == y->n_expert_used &&
               x->has_window == y->has_window && x->window == y->window && x->layers_full == y->layers_full;
    }
    case PROTO_TOKENIZE:
        return a->tokenize_rep.n_tokens == b->tokenize_rep.n_tokens &&
               bytes_eq(a->tokenize_rep.tokens, b->tokenize_rep.tokens, a->tokenize_rep.n_tokens * 4);
    case PROTO_PREFILL: {
        const proto_prefill_rep *x = &a->prefill_rep, *y = &b->prefill_rep;
        return x->n_past == y->n_past && x->n_vocab == y->n_vocab && x->n_rows == y->n_rows &&
               bytes_eq(x->logits, y->logits, (size_t)x->n_rows * x->n_vocab * 4) &&
               x->n_experts == y->n_experts && bytes_eq(x->experts, y->experts, x->n_experts * 4);
    }
    case PROTO_GENERATE: {
        const proto_generate_rep *x = &a->generate_rep, *y = &b->generate_rep;
        return x->n == y->n && x->n_past == y->n_past && bytes_eq(x->tokens, y->tokens, x->n * 4) &&
               bytes_eq(x->gaps, y->gaps, x->n * 4);
    }
    case PROTO_TRUNCATE:
        return a->truncate_rep.n_past == b->truncate_rep.n_past;
    case PROTO_STATS: {
        const proto_stats_rep *x = &a->stats_rep, *y = &b->stats_rep;
        return x->n_past == y->n_past && x->kv_bytes == y->kv_bytes &&
               x->prefill_tokens == y->prefill_tokens && x->decode_tokens == y->decode_tokens &&
               x->peak_rss == y->peak_rss &&
               memcmp(&x->prefill_seconds, &y->prefill_seconds, 8) == 0 &&
               memcmp(&x->decode_seconds, &y->decode_seconds, 8) == 0 && x->has_rechunk == y->has_rechunk &&
               x->rechunk_rows == y->rechunk_rows && memcmp(&x->rechunk_max, &y->rechunk_max, 8) == 0;
    }
    case PROTO_ERROR:
        return a->error.code == b->error.code && !strcmp(a->error.message, b->error.message);
    case PROTO_VOCAB: {
        const proto_vocab_rep *x = &a->vocab_rep, *y = &b->vocab_rep;
        return x->n_vocab == y->n_vocab && x->n_pieces == y->n_pieces && x->n_template == y->n_template &&
               bytes_eq(x->pieces, y->pieces, x->n_pieces) &&
               bytes_eq(x->offsets, y->offsets, ((size_t)x->n_vocab + 1) * 4) &&
               bytes_eq(x->control, y->control, (size_t)x->n_vocab * 4) &&
               bytes_eq(x->chat_template, y->chat_template, x->n_template);
    }
    default:
        return 1;
    }
}

/* Encode m, decode it back, compare. */
static void roundtrip(const proto_msg *m, const char *what) {
    void *buf = NULL;
    size_t len = 0;
    char err[256] = "";
    int rc = proto_encode(m, &buf, &len, err, sizeof err);
    CHECK(rc == 0 && buf && len > 0, "encode %s (%s)", what, err);
    if (rc) return;
    proto_msg d;
    rc = proto_decode(buf, len, len, m->is_reply, &d, err, sizeof err);
    CHECK(rc == 0, "decode %s (%s)", what, err);
    CHECK(rc == 0 && msg_equal(m, &d), "round trip of %s keeps every field", what);
    proto_msg_free(&d);
    free(buf);
}

static void test_roundtrip(void) {
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    proto_msg m;

    proto_init(&m, PROTO_HELLO, 0, 1);
    roundtrip(&m, "hello request");
    proto_init(&m, PROTO_HELLO, 1, UINT64_MAX);
    proto_hello_rep *h = &m.hello_rep;
    strcpy(h->engine, "strata 0.1");
    strcpy(h->git, "0123456789abcdef0123456789abcdef01234567");
    memset(h->model_sha256, 'f', 64);
    strcpy(h->arch, "llama");
    memset(h->tokenizer_hash, 'e', PROTO_STR_MAX - 1);   /* the longest string allowed */
    strcpy(h->kv_k, "q4_0");
    strcpy(h->kv_v, "int8");
    strcpy(h->device, "cpu (Intel \xc3\xa9 AVX2)");
    h->n_vocab = 262144;
    h->n_ctx = 32768;
    h->n_layer = 18;
    h->threads = 2;
    h->kv_bytes_per_token = (uint64_t)1 << 40;
    h->bos = -1;
    roundtrip(&m, "hello reply");
    h->bos = 2;
    h->device[0] = 0;   /* empty string */
    roundtrip(&m, "hello reply (bos 2, empty device)");
    h->n_expert = 128;
    h->n_expert_used = 8;
    roundtrip(&m, "hello reply of a MoE model (128 experts, 8 per token)");
    h->n_expert = h->n_expert_used = 0;
    h->has_window = 1;
    h->window = 512;
    h->layers_full = 3;
    roundtrip(&m, "hello reply with a sliding window (512, 3 of 18 layers full)");
    h->window = 0;
    h->layers_full = 18;
    roundtrip(&m, "hello reply saying no layer slides (window 0, 18 of 18 full)");
    h->window = (uint32_t)INT32_MAX + 1;
    void *wb = NULL;
    size_t wl = 0;
    char we[256] = "";
    int wrc = proto_encode(&m, &wb, &wl, we, sizeof we);
    CHECK(wrc == PROTO_E_TOOBIG && !wb && strstr(we, "window"), "the encoder refuses a window of 2^31 (rc %d: %s)",
          wrc, we);
    free(wb);
    h->has_window = 0;
    h->window = h->layers_full = 0;

    char text[] = "h\xc3\xa9llo\0world\xff\xfe";   /* any bytes: NUL and invalid UTF-8 inside */
    proto_init(&m, PROTO_TOKENIZE, 0, 2);
    m.tokenize_req.text = text;
    m.tokenize_req.n_text = sizeof text - 1;
    m.tokenize_req.add_bos = 1;
    roundtrip(&m, "tokenize request");
    m.tokenize_req.n_text = 0;
    m.tokenize_req.add_bos = 0;
    roundtrip(&m, "tokenize request (empty text)");

    int32_t toks[1000];
    for (int i = 0; i < 1000; i++) toks[i] = (int32_t)rng_next(&seed);
    toks[0] = INT32_MIN;
    toks[1] = -1;
    proto_init(&m, PROTO_TOKENIZE, 1, 3);
    m.tokenize_rep.tokens = toks;
    m.tokenize_rep.n_tokens = 1000;
    roundtrip(&m, "tokenize reply");

    for (uint32_t rows = 0; rows <= 2; rows++) {
        proto_init(&m, PROTO_PREFILL, 0, 4 + rows);
        m.prefill_req.tokens = toks;
        m.prefill_req.n_tokens = 3 + rows * 300;
        m.prefill_req.rows = rows;
        roundtrip(&m, rows == 0 ? "prefill request rows 0" : rows == 1 ? "prefill request rows 1"
                                                                        : "prefill request rows 2");
    }
    proto_init(&m, PROTO_PREFILL, 0, 7);
    roundtrip(&m, "prefill request with no tokens");
    /* MoE: the routing asked for, and experts pinned ([3 tokens][2 layers][2 experts]) */
    int32_t pin[12] = { 0, 1, 7, 3, 2, 5, 4, 6, 1, 0, 3, 2 };
    proto_init(&m, PROTO_PREFILL, 0, 71);
    m.prefill_req.tokens = toks;
    m.prefill_req.n_tokens = 3;
    m.prefill_req.rows = PROTO_ROWS_ALL;
    m.prefill_req.experts = 1;
    roundtrip(&m, "prefill request asking for the routing");
    m.prefill_req.pin = pin;
    m.prefill_req.n_pin = 12;
    roundtrip(&m, "prefill request with pinned experts and the routing asked for");
    m.prefill_req.experts = 0;
    roundtrip(&m, "prefill request with pinned experts only");

    enum { R = 7, V = 37 };
    float logits[R * V];
    for (int i = 0; i < R * V; i++) {
        uint32_t bits = (uint32_t)rng_next(&seed);
        memcpy(&logits[i], &bits, 4);   /* every bit pattern, NaNs included */
    }
    logits[0] = -0.0f;
    logits[1] = INFINITY;
    logits[2] = 1e-45f;   /* denormal */
    proto_init(&m, PROTO_PREFILL, 1, 8);
    m.prefill_rep.n_past = 123456;
    m.prefill_rep.n_vocab = V;
    m.prefill_rep.n_rows = R;
    m.prefill_rep.logits = logits;
    roundtrip(&m, "prefill reply (logit bit patterns kept)");
    m.prefill_rep.n_rows = 0;
    m.prefill_rep.logits = NULL;
    roundtrip(&m, "prefill reply with no rows");
    m.prefill_rep.n_rows = R;
    m.prefill_rep.logits = logits;
    m.prefill_rep.experts = pin;
    m.prefill_rep.n_experts = 12;
    roundtrip(&m, "prefill reply with the routing (experts)");
    /* an experts / pin count over PROTO_MAX_ROUTES is refused on encode */
    m.prefill_rep.n_experts = (size_t)PROTO_MAX_ROUTES + 1;
    {
        void *buf = NULL;
        size_t len = 0;
        char e2[256] = "";
        int rc = proto_encode(&m, &buf, &len, e2, sizeof e2);
        CHECK(rc == PROTO_E_TOOBIG && strstr(e2, "experts"), "prefill reply with 2^24 + 1 expert ids: refused (%s)", e2);
        free(buf);
        proto_init(&m, PROTO_PREFILL, 0, 72);
        m.prefill_req.tokens = toks;
        m.prefill_req.n_tokens = 3;
        m.prefill_req.pin = pin;
        m.prefill_req.n_pin = (size_t)PROTO_MAX_ROUTES + 1;
        rc = proto_encode(&m, &buf, &len, e2, sizeof e2);
        CHECK(rc == PROTO_E_TOOBIG && strstr(e2, "pin"), "prefill request with 2^24 + 1 pinned ids: refused (%s)", e2);
        free(buf);
    }

    proto_init(&m, PROTO_GENERATE, 0, 9);
    m.generate_req.n = PROTO_MAX_GENERATE;
    m.generate_req.temperature = 0.7;
    m.generate_req.seed = UINT64_MAX - 5;
    roundtrip(&m, "generate request");
    m.generate_req.top_p = 0.9;
    roundtrip(&m, "generate request with top_p");
    {
        /* top_p 1 is not sent (decoded as 0 = no cut); top_p > 1 is refused */
        void *b = NULL;
        size_t bl = 0;
        char e[256];
        proto_msg d;
        m.generate_req.top_p = 1.0;
        int rc = proto_encode(&m, &b, &bl, e, sizeof e);
        rc = rc ? rc : proto_decode(b, bl, bl, 0, &d, e, sizeof e);
        CHECK(rc == 0 && d.generate_req.top_p == 0, "generate request with top_p 1: the key is not sent");
        free(b);
        proto_msg_free(&d);
        m.generate_req.top_p = 1.5;
        CHECK(proto_encode(&m, &b, &bl, e, sizeof e) == PROTO_E_BADARG, "top_p 1.5 is refused (%s)", e);
        m.generate_req.top_p = 0;
    }
    {
        char txt[] = "<|im_start|>user";
        proto_init(&m, PROTO_TOKENIZE, 0, 11);
        m.tokenize_req.text = txt;
        m.tokenize_req.n_text = strlen(txt);
        m.tokenize_req.special = 1;
        roundtrip(&m, "tokenize request with special");
        proto_init(&m, PROTO_VOCAB, 0, 12);
        roundtrip(&m, "vocab request");
        char pieces[] = "ab c<eos>";
        int32_t offs[5] = { 0, 1, 2, 4, 9 }, ctl[4] = { 0, 0, 0, 1 };
        char tpl[] = "{% for m in messages %}<|im_start|>";
        proto_init(&m, PROTO_VOCAB, 1, 12);
        m.vocab_rep.n_vocab = 4;
        m.vocab_rep.pieces = pieces;
        m.vocab_rep.n_pieces = 9;
        m.vocab_rep.offsets = offs;
        m.vocab_rep.control = ctl;
        m.vocab_rep.chat_template = tpl;
        m.vocab_rep.n_template = strlen(tpl);
        roundtrip(&m, "vocab reply");
        void *b = NULL;
        size_t bl = 0;
        char e[256] = "";
        proto_msg d;
        offs[2] = 5;   /* decreasing */
        int rc = proto_encode(&m, &b, &bl, e, sizeof e);
        CHECK(rc == 0 && proto_decode(b, bl, bl, 1, &d, e, sizeof e) == PROTO_E_BADMSG,
              "a vocab reply with a decreasing offset is refused (%s)", e);
        free(b);
        offs[2] = 2;
        offs[4] = 8;   /* not spanning the pieces */
        rc = proto_encode(&m, &b, &bl, e, sizeof e);
        CHECK(rc == 0 && proto_decode(b, bl, bl, 1, &d, e, sizeof e) == PROTO_E_BADMSG,
              "a vocab reply whose offsets do not span the pieces is refused (%s)", e);
        free(b);
    }
    float gaps[32];
    for (int i = 0; i < 32; i++) gaps[i] = (float)i / 3.0f;
    proto_init(&m, PROTO_GENERATE, 1, 10);
    m.generate_rep.tokens = toks;
    m.generate_rep.gaps = gaps;
    m.generate_rep.n = 32;
    m.generate_rep.n_past = 4096;
    roundtrip(&m, "generate reply");

    proto_init(&m, PROTO_TRUNCATE, 0, 11);
    m.truncate_req.depth = 4000000000ULL;
    roundtrip(&m, "truncate request");
    proto_init(&m, PROTO_TRUNCATE, 1, 12);
    m.truncate_rep.n_past = 17;
    roundtrip(&m, "truncate reply");

    proto_init(&m, PROTO_STATS, 0, 13);
    roundtrip(&m, "stats request");
    proto_init(&m, PROTO_STATS, 1, 14);
    m.stats_rep = (proto_stats_rep){.n_past = 1, .kv_bytes = 2, .prefill_tokens = 3,
                                    .prefill_seconds = 1.25e-7, .decode_tokens = 5,
                                    .decode_seconds = 123.456, .peak_rss = (uint64_t)3 << 33};
    roundtrip(&m, "stats reply");
    m.stats_rep.has_rechunk = 1;   /* the batch variance of a backend that needs aligned prefills */
    m.stats_rep.rechunk_rows = 7;
    m.stats_rep.rechunk_max = 0.630741119384765625;
    roundtrip(&m, "stats reply with rechunk_rows and rechunk_max");
    m.stats_rep.rechunk_max = -1;  /* a negative largest difference is refused on decode */
    {
        void *buf = NULL;
        size_t len = 0;
        char err[256] = "";
        proto_msg out;
        int enc = proto_encode(&m, &buf, &len, err, sizeof err);
        int rc = enc ? -1 : proto_decode(buf, len, len, 1, &out, err, sizeof err);
        CHECK(enc == 0 && rc == PROTO_E_BADMSG && strstr(err, "rechunk_max"),
              "stats reply with rechunk_max -1 is refused (rc %d: %s)", rc, err);
        if (!enc && !rc) proto_msg_free(&out);
        free(buf);
    }

    proto_init(&m, PROTO_SHUTDOWN, 0, 15);
    roundtrip(&m, "shutdown request");
    proto_init(&m, PROTO_SHUTDOWN, 1, 15);
    roundtrip(&m, "shutdown reply");

    proto_error(&m, 16, PROTO_E_RANGE, "depth %d > n_past %d", 9, 4);
    CHECK(m.type == PROTO_ERROR && m.is_reply && m.id == 16 && m.error.code == PROTO_E_RANGE &&
          strcmp(m.error.message, "depth 9 > n_past 4") == 0, "proto_error fills an error reply");
    roundtrip(&m, "error reply");
    proto_error(&m, 17, -12345, "%s", "");
    roundtrip(&m, "error reply with a negative code and empty message");

    char longmsg[1000];
    memset(longmsg, 'x', sizeof longmsg - 1);
    longmsg[sizeof longmsg - 1] = 0;
    proto_error(&m, 18, PROTO_E_INTERNAL, "%s", longmsg);
    CHECK(strlen(m.error.message) == PROTO_ERRMSG_MAX - 1, "proto_error cuts a long message short");
}

/* ---- hand-built wire bytes (from the msgpack spec, not from our encoder) ---- */

static void test_wire_bytes(void) {
    char err[256];
    proto_msg m;
    /* {"v":1,"type":"truncate","id":7,"depth":300} */
    static const uint8_t trunc[] = {
        0x84, 0xa1, 'v', 0x01, 0xa4, 't', 'y', 'p', 'e', 0xa8, 't', 'r', 'u', 'n', 'c', 'a', 't', 'e',
        0xa2, 'i', 'd', 0x07, 0xa5, 'd', 'e', 'p', 't', 'h', 0xcd, 0x01, 0x2c};
    int rc = proto_decode(trunc, sizeof trunc, 1024, 0, &m, err, sizeof err);
    CHECK(rc == 0 && m.type == PROTO_TRUNCATE && !m.is_reply && m.id == 7 && m.truncate_req.depth == 300,
          "hand-built truncate request decodes (%s)", rc ? err : "ok");
    proto_msg_free(&m);

    /* keys in another order, an unknown key (ignored), id as uint64, tokens as bin8 of 2 int32 LE:
     * {"rows":1,"zzz":nil,"tokens":bin[01 00 00 00 fe ff ff ff],"id":2^40,"type":"prefill","v":1} */
    static const uint8_t pre[] = {
        0x86, 0xa4, 'r', 'o', 'w', 's', 0x01, 0xa3, 'z', 'z', 'z', 0xc0,
        0xa6, 't', 'o', 'k', 'e', 'n', 's', 0xc4, 0x08, 0x01, 0x00, 0x00, 0x00, 0xfe, 0xff, 0xff, 0xff,
        0xa2, 'i', 'd', 0xcf, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
        0xa4, 't', 'y', 'p', 'e', 0xa7, 'p', 'r', 'e', 'f', 'i', 'l', 'l', 0xa1, 'v', 0x01};
    rc = proto_decode(pre, sizeof pre, 1024, 0, &m, err, sizeof err);
    CHECK(rc == 0 && m.type == PROTO_PREFILL && m.id == ((uint64_t)1 << 40) &&
          m.prefill_req.rows == 1 && m.prefill_req.n_tokens == 2 && m.prefill_req.tokens[0] == 1 &&
          m.prefill_req.tokens[1] == -2, "hand-built prefill request decodes (%s)", rc ? err : "ok");
    proto_msg_free(&m);

    /* temperature sent as float32, and as an integer, is accepted */
    static const uint8_t gen[] = {
        0x86, 0xa1, 'v', 0x01, 0xa4, 't', 'y', 'p', 'e', 0xa8, 'g', 'e', 'n', 'e', 'r', 'a', 't', 'e',
        0xa2, 'i', 'd', 0x03, 0xa1, 'n', 0x20, 0xab, 't', 'e', 'm', 'p', 'e', 'r', 'a', 't', 'u', 'r',
        'e', 0xca, 0x3f, 0x00, 0x00, 0x00, 0xa4, 's', 'e', 'e', 'd', 0x2a};
    rc = proto_decode(gen, sizeof gen, 1024, 0, &m, err, sizeof err);
    CHECK(rc == 0 && m.generate_req.n == 32 && m.generate_req.temperature == 0.5 &&
          m.generate_req.seed == 42, "generate request with a float32 temperature (%s)", rc ? err : "ok");
    uint8_t gen0[sizeof gen];
    memcpy(gen0, gen, sizeof gen);
    /* replace the float32 (5 bytes at offset 37) by fixint 0 and shorten the seed position */
    size_t at = 37;
    CHECK(gen0[at] == 0xca, "float32 marker where expected");
    gen0[at] = 0x00;
    memmove(gen0 + at + 1, gen0 + at + 5, sizeof gen - at - 5);
    rc = proto_decode(gen0, sizeof gen - 4, 1024, 0, &m, err, sizeof err);
    CHECK(rc == 0 && m.generate_req.temperature == 0.0, "generate request with an integer temperature (%s)",
          rc ? err : "ok");

    /* our encoder puts int32 tokens little-endian in a bin: 0x01020304 -> c4 04 04 03 02 01 */
    int32_t tok = 0x01020304;
    proto_init(&m, PROTO_PREFILL, 0, 1);
    m.prefill_req.tokens = &tok;
    m.prefill_req.n_tokens = 1;
    void *buf;
    size_t len;
    rc = proto_encode(&m, &buf, &len, err, sizeof err);
    static const uint8_t want[] = {0xa6, 't', 'o', 'k', 'e', 'n', 's', 0xc4, 0x04, 0x04, 0x03, 0x02, 0x01};
    CHECK(rc == 0 && memmem(buf, len, want, sizeof want) != NULL,
          "encoded tokens are a msgpack bin of little-endian int32");
    /* and the whole message is a map that msgpack-c itself reads with v=1 and type "prefill" */
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    int ok = rc == 0 && msgpack_unpack_next(&up, buf, len, &off) == MSGPACK_UNPACK_SUCCESS &&
             up.data.type == MSGPACK_OBJECT_MAP && off == len;
    int saw_v = 0, saw_type = 0;
    for (uint32_t i = 0; ok && i < up.data.via.map.size; i++) {
        msgpack_object k = up.data.via.map.ptr[i].key, v = up.data.via.map.ptr[i].val;
        if (k.type == MSGPACK_OBJECT_STR && k.via.str.size == 1 && k.via.str.ptr[0] == 'v')
            saw_v = v.type == MSGPACK_OBJECT_POSITIVE_INTEGER && v.via.u64 == 1;
        if (k.type == MSGPACK_OBJECT_STR && k.via.str.size == 4 && !memcmp(k.via.str.ptr, "type", 4))
            saw_type = v.type == MSGPACK_OBJECT_STR && v.via.str.size == 7 &&
                       !memcmp(v.via.str.ptr, "prefill", 7);
    }
    CHECK(ok && saw_v && saw_type, "encoded message is a msgpack map with v=1, type=\"prefill\"");
    msgpack_unpacked_destroy(&up);
    free(buf);
}

/* ---- malformed messages, built with msgpack-c's packer ---- */

typedef struct {
    msgpack_sbuffer sb;
    msgpack_packer pk;
} mp;

static void mp_begin(mp *b, size_t n_keys) {
    msgpack_sbuffer_init(&b->sb);
    msgpack_packer_init(&b->pk, &b->sb, msgpack_sbuffer_write);
    msgpack_pack_map(&b->pk, n_keys);
}
static void mp_key(mp *b, const char *k) { msgpack_pack_str_with_body(&b->pk, k, strlen(k)); }
static void mp_uint(mp *b, const char *k, uint64_t v) { mp_key(b, k); msgpack_pack_uint64(&b->pk, v); }
static void mp_int(mp *b, const char *k, int64_t v) { mp_key(b, k); msgpack_pack_int64(&b->pk, v); }
static void mp_str(mp *b, const char *k, const char *s) {
    mp_key(b, k);
    msgpack_pack_str_with_body(&b->pk, s, strlen(s));
}
static void mp_bin(mp *b, const char *k, const void *p, size_t n) {
    mp_key(b, k);
    msgpack_pack_bin(&b->pk, n);
    if (n) msgpack_pack_bin_body(&b->pk, p, n);
}
/* The three common keys. */
static void mp_head(mp *b, size_t n_fields, const char *type, uint64_t id) {
    mp_begin(b, 3 + n_fields);
    mp_uint(b, "v", 1);
    mp_str(b, "type", type);
    mp_uint(b, "id", id);
}
/* Decode and release the buffer; returns the code, out is left for the caller to inspect/free. */
static int mp_decode(mp *b, int is_reply, proto_msg *out, char *err, size_t errlen) {
    int rc = proto_decode(b->sb.data, b->sb.size, 1 << 20, is_reply, out, err, errlen);
    msgpack_sbuffer_destroy(&b->sb);
    return rc;
}

/* Expect code; the error text must be non-empty and contain needle. */
static void expect(mp *b, int is_reply, int code, const char *needle, const char *what) {
    proto_msg m;
    char err[256] = "";
    int rc = mp_decode(b, is_reply, &m, err, sizeof err);
    CHECK(rc == code && err[0] && strstr(err, needle) != NULL, "%s: code %d (want %d), \"%s\"",
          what, rc, code, err);
    CHECK(m.tokenize_rep.tokens == NULL && m.prefill_rep.logits == NULL,
          "%s: nothing left allocated in the failed message", what);
    proto_msg_free(&m);
}

static void test_malformed(void) {
    mp b;
    int32_t toks[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    float fl[8] = {0};

    mp_head(&b, 2, "prefill", 5); mp_bin(&b, "tokens", toks, 8); mp_str(&b, "rows", "all");
    expect(&b, 0, PROTO_E_BADMSG, "rows", "rows as a str");
    mp_head(&b, 2, "prefill", 5); mp_str(&b, "tokens", "abcd"); mp_uint(&b, "rows", 1);
    expect(&b, 0, PROTO_E_BADMSG, "tokens", "tokens as a str");
    mp_head(&b, 2, "prefill", 5); mp_bin(&b, "tokens", toks, 7); mp_uint(&b, "rows", 1);
    expect(&b, 0, PROTO_E_BADMSG, "4-byte", "tokens bin of 7 bytes");
    mp_head(&b, 2, "prefill", 5); mp_bin(&b, "tokens", toks, 8); mp_uint(&b, "rows", 3);
    expect(&b, 0, PROTO_E_BADARG, "rows", "rows = 3");
    mp_head(&b, 2, "prefill", 5); mp_bin(&b, "tokens", toks, 8); mp_int(&b, "rows", -1);
    expect(&b, 0, PROTO_E_BADMSG, "rows", "rows = -1");
    mp_head(&b, 1, "prefill", 5); mp_bin(&b, "tokens", toks, 8);
    expect(&b, 0, PROTO_E_BADMSG, "missing key \"rows\"", "rows missing");

    mp_begin(&b, 3); mp_uint(&b, "v", 1); mp_str(&b, "type", "hello"); mp_int(&b, "id", -3);
    expect(&b, 0, PROTO_E_BADMSG, "id", "negative id");
    mp_begin(&b, 3); mp_uint(&b, "v", 1); mp_str(&b, "type", "hello"); mp_str(&b, "id", "1");
    expect(&b, 0, PROTO_E_BADMSG, "id", "id as a str");
    mp_begin(&b, 2); mp_uint(&b, "v", 1); mp_str(&b, "type", "hello");
    expect(&b, 0, PROTO_E_BADMSG, "missing key \"id\"", "id missing");
    mp_begin(&b, 3); mp_str(&b, "v", "1"); mp_str(&b, "type", "hello"); mp_uint(&b, "id", 1);
    expect(&b, 0, PROTO_E_BADMSG, "\"v\"", "v as a str");
    mp_begin(&b, 2); mp_str(&b, "type", "hello"); mp_uint(&b, "id", 1);
    expect(&b, 0, PROTO_E_BADMSG, "missing key \"v\"", "v missing");
    mp_begin(&b, 3); mp_uint(&b, "v", 1); mp_uint(&b, "type", 1); mp_uint(&b, "id", 1);
    expect(&b, 0, PROTO_E_BADMSG, "type", "type as an integer");
    mp_head(&b, 1, "hello", 1); mp_uint(&b, "id", 2);
    expect(&b, 0, PROTO_E_BADMSG, "twice", "duplicate key");
    mp_head(&b, 1, "hello", 1); msgpack_pack_uint8(&b.pk, 9); msgpack_pack_nil(&b.pk);
    expect(&b, 0, PROTO_E_BADMSG, "not a str", "integer map key");

    msgpack_sbuffer_init(&b.sb);
    msgpack_packer_init(&b.pk, &b.sb, msgpack_sbuffer_write);
    msgpack_pack_array(&b.pk, 1); msgpack_pack_uint8(&b.pk, 1);
    expect(&b, 0, PROTO_E_BADMSG, "not a map", "top level is an array");

    mp_head(&b, 3, "generate", 1); mp_uint(&b, "n", PROTO_MAX_GENERATE + 1);
    mp_key(&b, "temperature"); msgpack_pack_double(&b.pk, 0); mp_uint(&b, "seed", 1);
    expect(&b, 0, PROTO_E_TOOBIG, "n", "generate n over the cap");
    mp_head(&b, 3, "generate", 1); mp_uint(&b, "n", 4);
    mp_key(&b, "temperature"); msgpack_pack_double(&b.pk, NAN); mp_uint(&b, "seed", 1);
    expect(&b, 0, PROTO_E_BADARG, "temperature", "temperature NaN");
    mp_head(&b, 3, "generate", 1); mp_uint(&b, "n", 4);
    mp_key(&b, "temperature"); msgpack_pack_double(&b.pk, -1.0); mp_uint(&b, "seed", 1);
    expect(&b, 0, PROTO_E_BADARG, "temperature", "temperature negative");
    mp_head(&b, 3, "generate", 1); mp_uint(&b, "n", 4);
    mp_str(&b, "temperature", "0"); mp_uint(&b, "seed", 1);
    expect(&b, 0, PROTO_E_BADMSG, "temperature", "temperature as a str");

    mp_head(&b, 2, "tokenize", 1); mp_str(&b, "text", "hi"); mp_uint(&b, "add_bos", 1);
    expect(&b, 0, PROTO_E_BADMSG, "add_bos", "add_bos as an integer");
    mp_head(&b, 2, "tokenize", 1); mp_uint(&b, "text", 5); mp_key(&b, "add_bos");
    msgpack_pack_true(&b.pk);
    expect(&b, 0, PROTO_E_BADMSG, "text", "text as an integer");

    /* logits length must be n_rows * n_vocab * 4 */
    mp_head(&b, 4, "prefill", 1); mp_uint(&b, "n_past", 2); mp_uint(&b, "n_vocab", 3);
    mp_uint(&b, "n_rows", 2); mp_bin(&b, "logits", fl, 5 * 4);
    expect(&b, 1, PROTO_E_BADMSG, "n_rows * n_vocab", "5 logits for 2 rows of 3");
    mp_head(&b, 4, "prefill", 1); mp_uint(&b, "n_past", 2); mp_uint(&b, "n_vocab", 3);
    mp_uint(&b, "n_rows", 2); mp_bin(&b, "logits", fl, 7 * 4);
    expect(&b, 1, PROTO_E_BADMSG, "n_rows * n_vocab", "7 logits for 2 rows of 3");
    mp_head(&b, 4, "prefill", 1); mp_uint(&b, "n_past", 2); mp_uint(&b, "n_vocab", 3);
    mp_uint(&b, "n_rows", 2); mp_bin(&b, "logits", fl, 6 * 4 - 2);
    expect(&b, 1, PROTO_E_BADMSG, "4-byte", "logits of 22 bytes");
    mp_head(&b, 4, "prefill", 1); mp_uint(&b, "n_past", 2); mp_uint(&b, "n_vocab", PROTO_MAX_VOCAB + 1);
    mp_uint(&b, "n_rows", 0); mp_bin(&b, "logits", fl, 0);
    expect(&b, 1, PROTO_E_TOOBIG, "n_vocab", "n_vocab over the cap");
    mp_head(&b, 3, "generate", 1); mp_bin(&b, "tokens", toks, 12); mp_bin(&b, "gaps", fl, 8);
    mp_uint(&b, "n_past", 3);
    expect(&b, 1, PROTO_E_BADMSG, "gaps", "3 tokens but 2 gaps");

    char big[200];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    const char *keys[] = {"engine", "git", "model_sha256", "arch", "tokenizer_hash", "kv_k", "kv_v",
                          "device"};
    for (int bad = 0; bad < 3; bad++) {
        mp_head(&b, 14, "hello", 1);
        for (int i = 0; i < 8; i++) {
            if (bad == 0 && i == 1) mp_str(&b, keys[i], big);
            else if (bad == 1 && i == 2) { mp_key(&b, keys[i]); msgpack_pack_str_with_body(&b.pk, "a\0b", 3); }
            else mp_str(&b, keys[i], "x");
        }
        mp_uint(&b, "n_vocab", 512); mp_uint(&b, "n_ctx", 512); mp_uint(&b, "n_layer", 5);
        mp_uint(&b, "threads", 1); mp_uint(&b, "kv_bytes_per_token", 10);
        mp_int(&b, "bos", bad == 2 ? -2 : 1);
        if (bad == 0) expect(&b, 1, PROTO_E_TOOBIG, "git", "hello git string of 199 bytes");
        if (bad == 1) expect(&b, 1, PROTO_E_BADMSG, "NUL", "hello string with a NUL byte");
        if (bad == 2) expect(&b, 1, PROTO_E_BADARG, "bos", "hello bos = -2");
    }

    /* the attention layout: optional, both keys or neither (an older worker sends neither) */
    for (int v = 0; v < 5; v++) {
        static const size_t nf[5] = {14, 16, 15, 15, 16};
        mp_head(&b, nf[v], "hello", 1);
        for (int i = 0; i < 8; i++) mp_str(&b, keys[i], "x");
        mp_uint(&b, "n_vocab", 512); mp_uint(&b, "n_ctx", 512); mp_uint(&b, "n_layer", 18);
        mp_uint(&b, "threads", 1); mp_uint(&b, "kv_bytes_per_token", 10); mp_int(&b, "bos", 1);
        if (v == 1) { mp_uint(&b, "window", 512); mp_uint(&b, "layers_full_context", 3); }
        if (v == 2) mp_uint(&b, "window", 512);
        if (v == 3) mp_uint(&b, "layers_full_context", 3);
        if (v == 4) { mp_uint(&b, "window", (uint64_t)INT32_MAX + 1); mp_uint(&b, "layers_full_context", 3); }
        if (v == 2) { expect(&b, 1, PROTO_E_BADMSG, "layers_full_context", "hello with a window, no layer count"); continue; }
        if (v == 3) { expect(&b, 1, PROTO_E_BADMSG, "window", "hello with a layer count, no window"); continue; }
        if (v == 4) { expect(&b, 1, PROTO_E_TOOBIG, "window", "hello with a window of 2^31"); continue; }
        proto_msg hm;
        char he[256] = "";
        int hrc = mp_decode(&b, 1, &hm, he, sizeof he);
        const proto_hello_rep *hh = &hm.hello_rep;
        if (v == 0)
            CHECK(hrc == 0 && !hh->has_window && !hh->window && !hh->layers_full,
                  "a hello without window keys (an older worker) decodes as unknown (rc %d: %s)", hrc, he);
        else
            CHECK(hrc == 0 && hh->has_window && hh->window == 512 && hh->layers_full == 3,
                  "a hello with window 512 and layers_full_context 3 decodes to them (rc %d: %s)", hrc, he);
        proto_msg_free(&hm);
    }

    /* an error reply's long message is cut short, not refused */
    proto_msg m;
    char err[256];
    char longmsg[2000];
    memset(longmsg, 'y', sizeof longmsg - 1);
    longmsg[sizeof longmsg - 1] = 0;
    mp_head(&b, 2, "error", 4); mp_int(&b, "code", PROTO_E_RANGE); mp_str(&b, "message", longmsg);
    int rc = mp_decode(&b, 1, &m, err, sizeof err);
    CHECK(rc == 0 && m.type == PROTO_ERROR && m.error.code == PROTO_E_RANGE &&
          strlen(m.error.message) == PROTO_ERRMSG_MAX - 1, "long error message cut to %d bytes",
          PROTO_ERRMSG_MAX - 1);

    mp_head(&b, 2, "error", 4); mp_int(&b, "code", 1); mp_str(&b, "message", "x");
    expect(&b, 0, PROTO_E_BADMSG, "not a request", "an error sent as a request");

    /* unknown type and wrong version keep the id for the error reply */
    mp_head(&b, 0, "frobnicate", 41);
    rc = mp_decode(&b, 0, &m, err, sizeof err);
    CHECK(rc == PROTO_E_BADMSG && m.id == 41 && strstr(err, "frobnicate"),
          "unknown type: bad message, id kept (\"%s\")", err);
    mp_begin(&b, 3); mp_uint(&b, "v", 2); mp_str(&b, "type", "hello"); mp_uint(&b, "id", 42);
    rc = mp_decode(&b, 0, &m, err, sizeof err);
    CHECK(rc == PROTO_E_VERSION && m.id == 42 && strstr(err, "version"),
          "version 2: version error, id kept (\"%s\")", err);

    /* byte-level oddities */
    static const uint8_t hello_req[] = {0x83, 0xa1, 'v', 0x01, 0xa4, 't', 'y', 'p', 'e',
                                        0xa5, 'h', 'e', 'l', 'l', 'o', 0xa2, 'i', 'd', 0x05};
    rc = proto_decode(hello_req, sizeof hello_req, 1024, 0, &m, err, sizeof err);
    CHECK(rc == 0 && m.type == PROTO_HELLO && m.id == 5, "hand-built hello request decodes");
    uint8_t tmp[64];
    memcpy(tmp, hello_req, sizeof hello_req);
    tmp[sizeof hello_req] = 0xc0;
    rc = proto_decode(tmp, sizeof hello_req + 1, 1024, 0, &m, err, sizeof err);
    CHECK(rc == PROTO_E_BADMSG && strstr(err, "trailing"), "one trailing byte is refused (\"%s\")", err);
    memcpy(tmp, hello_req, sizeof hello_req);
    tmp[sizeof hello_req - 1] = 0xc1;
    rc = proto_decode(tmp, sizeof hello_req, 1024, 0, &m, err, sizeof err);
    CHECK(rc == PROTO_E_BADMSG && strstr(err, "0xc1"), "reserved byte 0xc1 is refused (\"%s\")", err);
    tmp[sizeof hello_req - 1] = 0xd4;   /* fixext1: type byte and data byte missing anyway */
    rc = proto_decode(tmp, sizeof hello_req, 1024, 0, &m, err, sizeof err);
    CHECK(rc == PROTO_E_BADMSG && strstr(err, "ext"), "ext type is refused (\"%s\")", err);
    rc = proto_decode(tmp, 0, 1024, 0, &m, err, sizeof err);
    CHECK(rc == PROTO_E_BADMSG, "empty message is refused (\"%s\")", err);

    /* oversized: refused by length alone, before any parsing (0xdd... would be a bomb) */
    rc = proto_decode(hello_req, sizeof hello_req, sizeof hello_req - 1, 0, &m, err, sizeof err);
    CHECK(rc == PROTO_E_TOOBIG && strstr(err, "exceeds"), "message one byte over max_len: too big (\"%s\")", err);
    rc = proto_decode(hello_req, sizeof hello_req, sizeof hello_req, 0, &m, err, sizeof err);
    CHECK(rc == 0, "message of exactly max_len is accepted");
    memset(tmp, 0xdd, sizeof tmp);
    rc = proto_decode(tmp, sizeof tmp, 10, 0, &m, err, sizeof err);
    CHECK(rc == PROTO_E_TOOBIG, "64 garbage bytes with max_len 10: too big without parsing");

    /* encode refuses what decode would refuse */
    void *buf = NULL;
    size_t len = 0;
    proto_init(&m, PROTO_PREFILL, 1, 1);
    m.prefill_rep.n_rows = 1;
    m.prefill_rep.n_vocab = 4;
    rc = proto_encode(&m, &buf, &len, err, sizeof err);
    CHECK(rc == PROTO_E_BADARG && buf == NULL, "encode: logits NULL with 4 values refused (\"%s\")", err);
    m.prefill_rep.n_rows = PROTO_MAX_TOKENS;
    m.prefill_rep.n_vocab = PROTO_MAX_VOCAB;
    m.prefill_rep.logits = fl;
    rc = proto_encode(&m, &buf, &len, err, sizeof err);
    CHECK(rc == PROTO_E_TOOBIG && buf == NULL, "encode: logits over 4 GiB refused (\"%s\")", err);
    proto_init(&m, PROTO_GENERATE, 0, 1);
    m.generate_req.n = PROTO_MAX_GENERATE + 1;
    rc = proto_encode(&m, &buf, &len, err, sizeof err);
    CHECK(rc == PROTO_E_TOOBIG, "encode: generate n over the cap refused");
    proto_init(&m, PROTO_HELLO, 1, 1);
    memset(m.hello_rep.arch, 'a', PROTO_STR_MAX);
    rc = proto_encode(&m, &buf, &len, err, sizeof err);
    CHECK(rc == PROTO_E_BADARG && strstr(err, "arch"), "encode: unterminated hello string refused");
    proto_init(&m, PROTO_ERROR, 0, 1);
    rc = proto_encode(&m, &buf, &len, err, sizeof err);
    CHECK(rc == PROTO_E_BADARG, "encode: an error request refused");
    proto_init(&m, (proto_type)99, 0, 1);
    rc = proto_encode(&m, &buf, &len, err, sizeof err);
    CHECK(rc == PROTO_E_BADARG, "encode: unknown type refused");
}

/* Every proper prefix of a valid message is refused as a bad message. */
static void check_prefixes(const proto_msg *m, const char *what) {
    void *buf;
    size_t len;
    char err[256];
    if (proto_encode(m, &buf, &len, err, sizeof err)) { CHECK(0, "encode %s: %s", what, err); return; }
    int all = 1;
    for (size_t n = 0; n < len; n++) {
        void *copy = malloc(n ? n : 1);   /* exactly n bytes, so ASan sees any read past them */
        memcpy(copy, buf, n);
        proto_msg d;
        err[0] = 0;
        int rc = proto_decode(copy, n, len, m->is_reply, &d, err, sizeof err);
        if (rc != PROTO_E_BADMSG || !err[0]) {
            all = 0;
            printf("# prefix %zu of %zu: code %d \"%s\"\n", n, len, rc, err);
        }
        proto_msg_free(&d);
        free(copy);
    }
    CHECK(all, "all %zu proper prefixes of %s are refused with a message", len, what);
    proto_msg d;
    CHECK(proto_decode(buf, len, len, m->is_reply, &d, err, sizeof err) == 0, "the whole %s decodes", what);
    proto_msg_free(&d);
    free(buf);
}

static void test_truncated(void) {
    proto_msg m;
    float logits[2 * 9];
    for (int i = 0; i < 18; i++) logits[i] = (float)i - 4.5f;
    proto_init(&m, PROTO_PREFILL, 1, 300);
    m.prefill_rep.n_past = 70000;
    m.prefill_rep.n_vocab = 9;
    m.prefill_rep.n_rows = 2;
    m.prefill_rep.logits = logits;
    check_prefixes(&m, "prefill reply");

    proto_init(&m, PROTO_HELLO, 1, 1);
    strcpy(m.hello_rep.engine, "strata");
    strcpy(m.hello_rep.model_sha256, "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d");
    m.hello_rep.n_vocab = 512;
    m.hello_rep.kv_bytes_per_token = 5000000000ULL;
    m.hello_rep.bos = -1;
    check_prefixes(&m, "hello reply");

    proto_init(&m, PROTO_GENERATE, 0, 1);
    m.generate_req.n = 32;
    m.generate_req.temperature = 0.25;
    m.generate_req.seed = 1ULL << 63;
    check_prefixes(&m, "generate request");
}

/* ---- bombs: counts far beyond the bytes present ---- */

static void test_bombs(void) {
    static const uint8_t b1[] = {0xdd, 0xff, 0xff, 0xff, 0xff};   /* array32 of 4G elements */
    static const uint8_t b2[] = {0xdf, 0xff, 0xff, 0xff, 0xff};   /* map32 of 4G pairs */
    static const uint8_t b3[] = {0xc6, 0xff, 0xff, 0xff, 0xff};   /* bin32 of 4 GiB */
    static const uint8_t b4[] = {0xdb, 0xff, 0xff, 0xff, 0xff};   /* str32 of 4 GiB */
    static const uint8_t b5[] = {0xdc, 0xff, 0xff};               /* array16 of 65535 */
    /* a valid-looking hello request whose 4th value is an array32 bomb */
    static const uint8_t b6[] = {0x84, 0xa1, 'v', 0x01, 0xa4, 't', 'y', 'p', 'e',
                                 0xa5, 'h', 'e', 'l', 'l', 'o', 0xa2, 'i', 'd', 0x05,
                                 0xa1, 'x', 0xdd, 0xff, 0xff, 0xff, 0xff};
    /* nested: an array of 4 arrays each claiming 4G elements */
    static const uint8_t b7[] = {0x94, 0xdd, 0xff, 0xff, 0xff, 0xff, 0xdd, 0xff, 0xff, 0xff, 0xff,
                                 0xdd, 0xff, 0xff, 0xff, 0xff, 0xdd, 0xff, 0xff, 0xff, 0xff};
    uint8_t deep[200];             /* 199 nested one-element arrays, then nil */
    memset(deep, 0x91, sizeof deep);
    deep[sizeof deep - 1] = 0xc0;
    uint8_t deepmap[3 * 60 + 1];   /* {"a": {"a": ... nil}} 60 levels */
    for (int i = 0; i < 60; i++) { deepmap[3 * i] = 0x81; deepmap[3 * i + 1] = 0xa1; deepmap[3 * i + 2] = 'a'; }
    deepmap[sizeof deepmap - 1] = 0xc0;
    uint8_t many[3 + 60000];       /* array16 of 60000 nils: every count honest, too many objects */
    many[0] = 0xdc; many[1] = 0xea; many[2] = 0x60;
    memset(many + 3, 0xc0, 60000);

    /* map16 of 100 pairs {i: array16 of 100 nils}: every count honest, 10201 objects in all */
    uint8_t wide[3 + 100 * (1 + 3 + 100)];
    size_t w = 0;
    wide[w++] = 0xde; wide[w++] = 0; wide[w++] = 100;
    for (int i = 0; i < 100; i++) {
        wide[w++] = (uint8_t)i;               /* key: a fixint (the scan does not read meaning) */
        wide[w++] = 0xdc; wide[w++] = 0; wide[w++] = 100;
        memset(wide + w, 0xc0, 100);
        w += 100;
    }
    struct { const uint8_t *p; size_t n; int code; const char *name; } bombs[] = {
        {b1, sizeof b1, PROTO_E_BADMSG, "dd ff ff ff ff (array32 of 4G)"},
        {b2, sizeof b2, PROTO_E_BADMSG, "df ff ff ff ff (map32 of 4G)"},
        {b3, sizeof b3, PROTO_E_BADMSG, "c6 ff ff ff ff (bin32 of 4 GiB)"},
        {b4, sizeof b4, PROTO_E_BADMSG, "db ff ff ff ff (str32 of 4 GiB)"},
        {b5, sizeof b5, PROTO_E_BADMSG, "dc ff ff (array16 of 65535)"},
        {b6, sizeof b6, PROTO_E_BADMSG, "array32 bomb inside a hello request"},
        {b7, sizeof b7, PROTO_E_BADMSG, "array of four array32 bombs"},
        {deep, sizeof deep, PROTO_E_BADMSG, "199 nested arrays"},
        {deepmap, sizeof deepmap, PROTO_E_BADMSG, "60 nested maps"},
        {many, sizeof many, PROTO_E_TOOBIG, "array of 60000 nils"},
        {wide, w, PROTO_E_TOOBIG, "map of 100 arrays of 100 nils"},
    };
    long rss0 = max_rss_kib();
    double t0 = clock_s();
    for (size_t i = 0; i < sizeof bombs / sizeof bombs[0]; i++) {
        proto_msg m;
        char err[256] = "";
        int rc = proto_decode(bombs[i].p, bombs[i].n, 1 << 20, 0, &m, err, sizeof err);
        CHECK(rc == bombs[i].code && err[0], "bomb %s refused: code %d \"%s\"", bombs[i].name, rc, err);
        proto_msg_free(&m);
    }
    double dt = clock_s() - t0;
    long rss1 = max_rss_kib();
    CHECK(dt < 0.5, "all bombs refused in %.3f s", dt);
    CHECK(rss1 - rss0 < 32 * 1024, "peak RSS grew by %ld KiB (< 32 MiB)", rss1 - rss0);
}

/* ---- mutation fuzz: damaged valid messages never crash, and what decodes re-encodes equal ---- */

static void test_fuzz(void) {
    proto_msg src[6];
    int32_t toks[40];
    float fl[3 * 11];
    for (int i = 0; i < 40; i++) toks[i] = i * 7 - 3;
    for (int i = 0; i < 33; i++) fl[i] = (float)i * 0.5f;
    proto_init(&src[0], PROTO_PREFILL, 1, 5);
    src[0].prefill_rep = (proto_prefill_rep){.n_past = 9, .n_vocab = 11, .n_rows = 3, .logits = fl};
    proto_init(&src[1], PROTO_PREFILL, 0, 6);
    src[1].prefill_req = (proto_prefill_req){.tokens = toks, .n_tokens = 40, .rows = 2};
    proto_init(&src[2], PROTO_HELLO, 1, 7);
    strcpy(src[2].hello_rep.engine, "e");
    strcpy(src[2].hello_rep.kv_k, "q8_0");
    src[2].hello_rep.n_vocab = 512;
    src[2].hello_rep.bos = 1;
    proto_init(&src[3], PROTO_GENERATE, 1, 8);
    src[3].generate_rep = (proto_generate_rep){.tokens = toks, .gaps = fl, .n = 8, .n_past = 99};
    proto_error(&src[4], 9, PROTO_E_RANGE, "depth too big");
    proto_init(&src[5], PROTO_STATS, 1, 10);
    src[5].stats_rep.decode_seconds = 2.5;

    static const uint8_t interesting[] = {0x00, 0xff, 0xdd, 0xdf, 0xc6, 0xdb, 0xc1, 0xd4, 0x7f, 0x80,
                                          0x91, 0xcf, 0xcb, 0xc0};
    uint64_t seed = 12345;
    int n_ok = 0, n_bad_code = 0, n_no_msg = 0, n_not_equal = 0;
    const int iters = 20000;
    for (int it = 0; it < iters; it++) {
        const proto_msg *m = &src[it % 6];
        void *enc;
        size_t len;
        char err[256];
        if (proto_encode(m, &enc, &len, err, sizeof err)) { n_bad_code++; continue; }
        uint8_t *b = enc;
        int n_mut = 1 + (int)(rng_next(&seed) % 4);
        for (int k = 0; k < n_mut; k++) {
            size_t at = rng_next(&seed) % len;
            switch (rng_next(&seed) % 4) {
            case 0: b[at] = (uint8_t)rng_next(&seed); break;
            case 1: b[at] = interesting[rng_next(&seed) % sizeof interesting]; break;
            case 2: b[at] ^= (uint8_t)(1u << (rng_next(&seed) % 8)); break;
            default: len = at + 1; break;   /* truncate */
            }
        }
        proto_msg d;
        err[0] = 0;
        int rc = proto_decode(b, len, len, m->is_reply, &d, err, sizeof err);
        if (rc < 0 || rc > PROTO_E_VERSION) n_bad_code++;
        if (rc && !err[0]) n_no_msg++;
        if (rc == 0) {
            n_ok++;
            void *enc2;
            size_t len2;
            proto_msg d2;
            int ok = proto_encode(&d, &enc2, &len2, err, sizeof err) == 0;
            if (ok) {
                ok = proto_decode(enc2, len2, len2, d.is_reply, &d2, err, sizeof err) == 0 &&
                     msg_equal(&d, &d2);
                if (ok) proto_msg_free(&d2);
                free(enc2);
            }
            if (!ok) n_not_equal++;
        }
        proto_msg_free(&d);
        free(enc);
    }
    CHECK(n_bad_code == 0 && n_no_msg == 0,
          "fuzz: %d damaged messages, every failure a protocol code with a message (%d decoded)",
          iters, n_ok);
    CHECK(n_not_equal == 0, "fuzz: every damaged message that decodes re-encodes to an equal one");
}

/* ---- live nng session ---- */

typedef struct {
    char url[128];
    int delay_ms;            /* wait before listening */
    int crash_on_666;        /* truncate depth 666: close the socket without replying */
    int n_ok, n_bad;         /* requests served / refused with an error reply */
    int listen_rc;
    char last_err[256];
} server;

#define SERVER_RECV_MAX 4096   /* nng drops a connection that sends more */
#define SERVER_MAX_LEN  1024   /* proto_decode refuses more with an error reply */
#define TEST_VOCAB      5

/* A toy worker. prefill: row of token t is {t*10 + j}; generate: token i = 3i, gap i = i/2. */
static void *serve(void *arg) {
    server *sv = arg;
    nng_socket s;
    char err[256];
    uint64_t n_past = 0;
    if (sv->delay_ms) proc_sleep_ms(sv->delay_ms);
    sv->listen_rc = proto_listen(sv->url, SERVER_RECV_MAX, 5000, &s, err, sizeof err);
    if (sv->listen_rc) { snprintf(sv->last_err, sizeof sv->last_err, "%s", err); return NULL; }
    for (;;) {
        proto_msg req, rep;
        int rc = proto_recv(s, SERVER_MAX_LEN, &req, err, sizeof err);
        if (rc == PROTO_E_TIMEOUT || rc == PROTO_E_TRANSPORT) {
            snprintf(sv->last_err, sizeof sv->last_err, "%s", err);
            break;
        }
        if (rc) {
            sv->n_bad++;
            proto_error(&rep, req.id, rc, "%s", err);
            proto_reply(s, &rep, err, sizeof err);
            continue;
        }
        sv->n_ok++;
        int stop = 0;
        proto_init(&rep, req.type, 1, req.id);
        switch (req.type) {
        case PROTO_HELLO:
            strcpy(rep.hello_rep.engine, "toy");
            strcpy(rep.hello_rep.arch, "llama");
            strcpy(rep.hello_rep.kv_k, "f16");
            strcpy(rep.hello_rep.kv_v, "f16");
            rep.hello_rep.n_vocab = TEST_VOCAB;
            rep.hello_rep.n_ctx = 1000;
            rep.hello_rep.bos = 1;
            break;
        case PROTO_TOKENIZE:
            rep.tokenize_rep.n_tokens = req.tokenize_req.n_text;
            rep.tokenize_rep.tokens = malloc(4 * req.tokenize_req.n_text + 4);
            for (size_t i = 0; i < req.tokenize_req.n_text; i++)
                rep.tokenize_rep.tokens[i] = (uint8_t)req.tokenize_req.text[i];
            break;
        case PROTO_PREFILL: {
            size_t n = req.prefill_req.n_tokens, first = 0, rows = 0;
            if (req.prefill_req.rows == PROTO_ROWS_ALL) rows = n;
            if (req.prefill_req.rows == PROTO_ROWS_LAST && n) { rows = 1; first = n - 1; }
            n_past += n;
            rep.prefill_rep.n_past = n_past;
            rep.prefill_rep.n_vocab = TEST_VOCAB;
            rep.prefill_rep.n_rows = (uint32_t)rows;
            rep.prefill_rep.logits = rows ? malloc(rows * TEST_VOCAB * sizeof(float)) : NULL;
            for (size_t r = 0; r < rows; r++)
                for (int j = 0; j < TEST_VOCAB; j++)
                    rep.prefill_rep.logits[r * TEST_VOCAB + j] =
                        (float)(req.prefill_req.tokens[first + r] * 10 + j);
            break;
        }
        case PROTO_GENERATE: {
            if (req.generate_req.seed == 12345) proc_sleep_ms(600);   /* slower than the client waits */
            uint32_t n = req.generate_req.n;
            rep.generate_rep.n = n;
            rep.generate_rep.tokens = malloc(4 * (size_t)n + 4);
            rep.generate_rep.gaps = malloc(4 * (size_t)n + 4);
            for (uint32_t i = 0; i < n; i++) {
                rep.generate_rep.tokens[i] = (int32_t)(3 * i);
                rep.generate_rep.gaps[i] = (float)i / 2;
            }
            n_past += n;
            rep.generate_rep.n_past = n_past;
            break;
        }
        case PROTO_TRUNCATE:
            if (req.truncate_req.depth == 666 && sv->crash_on_666) {
                nng_close(s);   /* a worker dying mid-request */
                proto_msg_free(&req);
                return NULL;
            }
            if (req.truncate_req.depth > n_past)
                proto_error(&rep, req.id, PROTO_E_RANGE, "depth %llu > n_past %llu",
                            (unsigned long long)req.truncate_req.depth, (unsigned long long)n_past);
            else
                n_past = rep.truncate_rep.n_past = req.truncate_req.depth;
            break;
        case PROTO_STATS:
            if (req.id == 999) rep.id = 998;   /* a buggy worker */
            rep.stats_rep.n_past = n_past;
            break;
        case PROTO_SHUTDOWN:
            stop = 1;
            break;
        default:
            break;
        }
        if (proto_reply(s, &rep, err, sizeof err)) snprintf(sv->last_err, sizeof sv->last_err, "%s", err);
        if (rep.type != PROTO_ERROR) proto_msg_free(&rep);   /* the payloads malloc'd above */
        proto_msg_free(&req);
        if (stop) break;
    }
    nng_close(s);
    return NULL;
}

static void test_live(void) {
    char url[128], none_url[128], err[256];
    snprintf(url, sizeof url, "ipc:///tmp/strata-test-%d.ipc", (int)getpid());
    snprintf(none_url, sizeof none_url, "ipc:///tmp/strata-test-%d-none.ipc", (int)getpid());
    nng_socket c;

    /* nobody listens: dial times out */
    double t0 = clock_s();
    int rc = proto_dial(none_url, 300, 1 << 20, &c, err, sizeof err);
    double dt = clock_s() - t0;
    CHECK(rc == PROTO_E_TIMEOUT && dt >= 0.25 && dt < 3.0,
          "dial with no listener: timeout after %.2f s (\"%s\")", dt, err);

    /* the server listens 300 ms after we start dialing: dial waits for it */
    server sv = {.delay_ms = 300, .crash_on_666 = 1};
    snprintf(sv.url, sizeof sv.url, "%s", url);
    pthread_t th;
    pthread_create(&th, NULL, serve, &sv);
    t0 = clock_s();
    rc = proto_dial(url, 5000, 1 << 20, &c, err, sizeof err);
    dt = clock_s() - t0;
    CHECK(rc == 0 && dt >= 0.2, "dial retries until the server listens (%.2f s) (%s)", dt, rc ? err : "ok");
    if (rc) { pthread_join(th, NULL); return; }

    proto_msg req, rep;
    proto_init(&req, PROTO_HELLO, 0, 1);
    rc = proto_call(c, &req, &rep, 1 << 20, err, sizeof err);
    CHECK(rc == 0 && rep.type == PROTO_HELLO && rep.is_reply && rep.id == 1 &&
          !strcmp(rep.hello_rep.engine, "toy") && rep.hello_rep.n_vocab == TEST_VOCAB &&
          rep.hello_rep.bos == 1, "hello over ipc (%s)", rc ? err : "ok");
    proto_msg_free(&rep);

    char text[] = "ab\0\xff";
    proto_init(&req, PROTO_TOKENIZE, 0, 2);
    req.tokenize_req.text = text;
    req.tokenize_req.n_text = 4;
    rc = proto_call(c, &req, &rep, 1 << 20, err, sizeof err);
    CHECK(rc == 0 && rep.tokenize_rep.n_tokens == 4 && rep.tokenize_rep.tokens[0] == 'a' &&
          rep.tokenize_rep.tokens[2] == 0 && rep.tokenize_rep.tokens[3] == 255,
          "tokenize over ipc carries any bytes (%s)", rc ? err : "ok");
    proto_msg_free(&rep);

    int32_t toks[3] = {5, 6, 7};
    proto_init(&req, PROTO_PREFILL, 0, 3);
    req.prefill_req.tokens = toks;
    req.prefill_req.n_tokens = 3;
    req.prefill_req.rows = PROTO_ROWS_ALL;
    rc = proto_call(c, &req, &rep, 1 << 20, err, sizeof err);
    int ok = rc == 0 && rep.prefill_rep.n_rows == 3 && rep.prefill_rep.n_vocab == TEST_VOCAB &&
             rep.prefill_rep.n_past == 3;
    for (int r = 0; ok && r < 3; r++)
        for (int j = 0; j < TEST_VOCAB; j++)
            ok &= rep.prefill_rep.logits[r * TEST_VOCAB + j] == (float)(toks[r] * 10 + j);
    CHECK(ok, "prefill rows=2 over ipc: 3 rows of logits (%s)", rc ? err : "ok");
    proto_msg_free(&rep);
    req.id = 4;
    req.prefill_req.rows = PROTO_ROWS_LAST;
    rc = proto_call(c, &req, &rep, 1 << 20, err, sizeof err);
    CHECK(rc == 0 && rep.prefill_rep.n_rows == 1 && rep.prefill_rep.logits[2] == 72.0f &&
          rep.prefill_rep.n_past == 6, "prefill rows=1: the last row only (%s)", rc ? err : "ok");
    proto_msg_free(&rep);
    req.id = 5;
    req.prefill_req.rows = PROTO_ROWS_NONE;
    rc = proto_call(c, &req, &rep, 1 << 20, err, sizeof err);
    CHECK(rc == 0 && rep.prefill_rep.n_rows == 0 && rep.prefill_rep.logits == NULL &&
          rep.prefill_rep.n_past == 9, "prefill rows=0: no rows (%s)", rc ? err : "ok");
    proto_msg_free(&rep);

    proto_init(&req, PROTO_TRUNCATE, 0, 6);
    req.truncate_req.depth = 100;
    rc = proto_call(c, &req, &rep, 1 << 20, err, sizeof err);
    CHECK(rc == PROTO_E_RANGE && rep.type == PROTO_ERROR && rep.id == 6 && strstr(err, "depth 100 > n_past 9"),
          "error reply becomes its code with the message in err (\"%s\")", err);
    proto_msg_free(&rep);
    req.id = 7;
    req.truncate_req.depth = 2;
    rc = proto_call(c, &req, &rep, 1 << 20, err, sizeof err);
    CHECK(rc == 0 && rep.truncate_rep.n_past == 2, "truncate to 2 (%s)", rc ? err : "ok");
    proto_msg_free(&rep);

    proto_init(&req, PROTO_GENERATE, 0, 8);
    req.generate_req.n = 4;
    rc = proto_call(c, &req, &rep, 1 << 20, err, sizeof err);
    CHECK(rc == 0 && rep.generate_rep.n == 4 && rep.generate_rep.tokens[3] == 9 &&
          rep.generate_rep.gaps[3] == 1.5f && rep.generate_rep.n_past == 6,
          "generate 4 over ipc (%s)", rc ? err : "ok");
    proto_msg_free(&rep);

    proto_init(&req, PROTO_STATS, 0, 999);
    rc = proto_call(c, &req, &rep, 1 << 20, err, sizeof err);
    CHECK(rc == PROTO_E_BADMSG && rep.type == PROTO_NONE && strstr(err, "998"),
          "a reply with the wrong id is refused (\"%s\")", err);

    /* a raw req socket sends garbage: the server answers an error with id 0 and keeps serving */
    nng_socket raw;
    nng_req0_open(&raw);
    nng_socket_set_ms(raw, NNG_OPT_RECVTIMEO, 3000);
    nng_socket_set_ms(raw, NNG_OPT_SENDTIMEO, 3000);
    rc = nng_dial(raw, url, NULL, 0);
    CHECK(rc == 0, "raw req socket dials (%s)", nng_strerror(rc));
    static const char garbage[] = "\xdd\xff\xff\xff\xff this is not msgpack";
    rc = nng_send(raw, (void *)garbage, sizeof garbage - 1, 0);
    void *buf = NULL;
    size_t len = 0;
    if (rc == 0) rc = nng_recv(raw, &buf, &len, NNG_FLAG_ALLOC);
    CHECK(rc == 0, "garbage request gets a reply (%s)", nng_strerror(rc));
    if (rc == 0) {
        rc = proto_decode(buf, len, 1 << 20, 1, &rep, err, sizeof err);
        CHECK(rc == 0 && rep.type == PROTO_ERROR && rep.id == 0 && rep.error.code == PROTO_E_BADMSG &&
              rep.error.message[0], "... an error reply, id 0, bad message: \"%s\"", rep.error.message);
        nng_free(buf, len);
    }
    /* a wrong-version request with id 77 on the raw socket: the error carries id 77 */
    static const uint8_t v2[] = {0x83, 0xa1, 'v', 0x02, 0xa4, 't', 'y', 'p', 'e',
                                 0xa5, 'h', 'e', 'l', 'l', 'o', 0xa2, 'i', 'd', 0x4d};
    rc = nng_send(raw, (void *)v2, sizeof v2, 0);
    if (rc == 0) rc = nng_recv(raw, &buf, &len, NNG_FLAG_ALLOC);
    if (rc == 0) {
        rc = proto_decode(buf, len, 1 << 20, 1, &rep, err, sizeof err);
        CHECK(rc == 0 && rep.type == PROTO_ERROR && rep.id == 77 && rep.error.code == PROTO_E_VERSION,
              "version 2 request: version error with id 77 (\"%s\")", rep.error.message);
        nng_free(buf, len);
    } else {
        CHECK(0, "version 2 request gets a reply (%s)", nng_strerror(rc));
    }
    /* and the same raw socket then gets a valid request served */
    proto_init(&req, PROTO_HELLO, 0, 78);
    rc = proto_encode(&req, &buf, &len, err, sizeof err);
    if (rc == 0) {
        rc = nng_send(raw, buf, len, 0);
        free(buf);
    }
    if (rc == 0) rc = nng_recv(raw, &buf, &len, NNG_FLAG_ALLOC);
    if (rc == 0) {
        rc = proto_decode(buf, len, 1 << 20, 1, &rep, err, sizeof err);
        CHECK(rc == 0 && rep.type == PROTO_HELLO && rep.id == 78, "after garbage, a valid hello is served");
        nng_free(buf, len);
    } else {
        CHECK(0, "valid request after garbage gets a reply (%d)", rc);
    }
    nng_close(raw);

    /* over the decode limit but under nng's: an error reply */
    int32_t many[2000];
    for (int i = 0; i < 2000; i++) many[i] = i;
    proto_init(&req, PROTO_PREFILL, 0, 9);
    req.prefill_req.tokens = many;
    req.prefill_req.n_tokens = 300;   /* ~1.2 KB > SERVER_MAX_LEN */
    rc = proto_call(c, &req, &rep, 1 << 20, err, sizeof err);
    CHECK(rc == PROTO_E_TOOBIG && rep.type == PROTO_ERROR && rep.id == 0,   /* not parsed: id unknown */
          "request over the server's max_len: too-big reply (\"%s\")", err);
    proto_msg_free(&rep);
    /* over nng's receive cap: nng drops the connection, the call fails, the server keeps serving */
    req.id = 10;
    req.prefill_req.n_tokens = 2000;  /* ~8 KB > SERVER_RECV_MAX */
    t0 = clock_s();
    rc = proto_call(c, &req, &rep, 1 << 20, err, sizeof err);
    dt = clock_s() - t0;
    CHECK(rc == PROTO_E_TRANSPORT && dt < 3.0, "request over nng's receive cap: connection dropped (\"%s\")", err);
    proto_init(&req, PROTO_HELLO, 0, 11);
    rc = proto_call(c, &req, &rep, 1 << 20, err, sizeof err);
    CHECK(rc == 0 && rep.id == 11, "the server keeps serving after that (%s)", rc ? err : "ok");
    proto_msg_free(&rep);

    /* a reply bigger than the client's recv_max: dropped by nng, reported, not allocated */
    nng_socket_set_size(c, NNG_OPT_RECVMAXSZ, 256);
    proto_init(&req, PROTO_PREFILL, 0, 12);
    req.prefill_req.tokens = many;
    req.prefill_req.n_tokens = 50;
    req.prefill_req.rows = PROTO_ROWS_ALL;   /* reply: 50 rows * 5 * 4 B = 1000 B */
    rc = proto_call(c, &req, &rep, 1 << 20, err, sizeof err);
    CHECK(rc == PROTO_E_TRANSPORT, "reply over the client's recv_max: transport error (\"%s\")", err);
    nng_socket_set_size(c, NNG_OPT_RECVMAXSZ, 1 << 20);

    /* a slow reply: the client's receive timeout fires */
    nng_socket_set_ms(c, NNG_OPT_RECVTIMEO, 200);
    proto_init(&req, PROTO_GENERATE, 0, 13);
    req.generate_req.n = 2;
    req.generate_req.seed = 12345;
    t0 = clock_s();
    rc = proto_call(c, &req, &rep, 1 << 20, err, sizeof err);
    dt = clock_s() - t0;
    CHECK(rc == PROTO_E_TIMEOUT && dt >= 0.15, "slow reply: timeout after %.2f s (\"%s\")", dt, err);
    nng_socket_set_ms(c, NNG_OPT_RECVTIMEO, 5000);
    proto_init(&req, PROTO_HELLO, 0, 14);
    rc = proto_call(c, &req, &rep, 1 << 20, err, sizeof err);
    CHECK(rc == 0 && rep.id == 14, "the next call gets its own reply, not the late one (%s)", rc ? err : "ok");
    proto_msg_free(&rep);

    /* the server dies mid-request: the call fails at once (no resend, no waiting for a timeout) */
    proto_init(&req, PROTO_TRUNCATE, 0, 15);
    req.truncate_req.depth = 666;
    t0 = clock_s();
    rc = proto_call(c, &req, &rep, 1 << 20, err, sizeof err);
    dt = clock_s() - t0;
    CHECK(rc == PROTO_E_TRANSPORT && dt < 2.0, "server died: transport error after %.2f s (\"%s\")", dt, err);
    pthread_join(th, NULL);
    CHECK(sv.n_bad == 3, "first server answered 3 bad requests with errors (got %d)", sv.n_bad);

    /* a new server on the same url: the client reconnects; the fatal request is not resent */
    server sv2 = {.delay_ms = 0};
    snprintf(sv2.url, sizeof sv2.url, "%s", url);
    pthread_create(&th, NULL, serve, &sv2);
    proto_init(&req, PROTO_HELLO, 0, 16);
    rc = proto_call(c, &req, &rep, 1 << 20, err, sizeof err);
    CHECK(rc == 0 && rep.id == 16, "hello to the restarted server (%s)", rc ? err : "ok");
    proto_msg_free(&rep);
    proto_init(&req, PROTO_SHUTDOWN, 0, 17);
    rc = proto_call(c, &req, &rep, 1 << 20, err, sizeof err);
    CHECK(rc == 0 && rep.type == PROTO_SHUTDOWN && rep.id == 17, "shutdown (%s)", rc ? err : "ok");
    pthread_join(th, NULL);
    CHECK(sv2.listen_rc == 0 && sv2.n_ok == 2 && sv2.n_bad == 0,
          "restarted server saw exactly hello + shutdown (%d ok, %d bad): nothing resent", sv2.n_ok, sv2.n_bad);
    nng_close(c);

    /* listening on a bad url fails cleanly */
    nng_socket s;
    rc = proto_listen("bogus://nowhere", 0, 100, &s, err, sizeof err);
    CHECK(rc == PROTO_E_TRANSPORT && strstr(err, "bogus"), "listen on a bad url: \"%s\"", err);
}

/* Where a worker may listen (proto_listen_url), the tokenize reply cap, and TLS options that are
 * wrong before any network traffic. */
static void test_listen_rules(void) {
    char out[256], err[512];
    struct { const char *url; int tls, plain, rc; const char *want; } c[] = {
        {"ipc:///tmp/x.ipc", 0, 0, 0, "ipc:///tmp/x.ipc"},
        {"inproc://a", 0, 0, 0, "inproc://a"},
        {"tcp://:5555", 0, 0, 0, "tcp://127.0.0.1:5555"},
        {"tcp6://:5555", 0, 0, 0, "tcp6://[::1]:5555"},
        {"tcp://127.0.0.1:0", 0, 0, 0, "tcp://127.0.0.1:0"},
        {"tcp://127.9.8.7:1", 0, 0, 0, "tcp://127.9.8.7:1"},
        {"tcp://[::1]:5555", 0, 0, 0, "tcp://[::1]:5555"},
        {"tcp://localhost:5555", 0, 0, 0, "tcp://localhost:5555"},
        {"tcp://0.0.0.0:5555", 0, 0, PROTO_E_BADARG, NULL},
        {"tcp://*:5555", 0, 0, PROTO_E_BADARG, NULL},
        {"tcp://[::]:5555", 0, 0, PROTO_E_BADARG, NULL},
        {"tcp://10.1.2.3:5555", 0, 0, PROTO_E_BADARG, NULL},
        {"tcp://0.0.0.0:5555", 0, 1, 0, "tcp://0.0.0.0:5555"},
        {"tls+tcp://0.0.0.0:5555", 1, 0, 0, "tls+tcp://0.0.0.0:5555"},
        {"tls+tcp://:5555", 1, 0, 0, "tls+tcp://127.0.0.1:5555"},
        {"tls+tcp://0.0.0.0:5555", 0, 0, PROTO_E_BADARG, NULL},   /* TLS URL, no certificates */
        {"tcp://127.0.0.1:5555", 1, 0, PROTO_E_BADARG, NULL},     /* certificates, plain URL */
        {"ipc:///tmp/x.ipc", 1, 0, PROTO_E_BADARG, NULL},
        {"ws://127.0.0.1:5555", 0, 0, PROTO_E_BADARG, NULL},
        {"tcp://127.0.0.1", 0, 0, PROTO_E_BADARG, NULL},
        {"tcp://127.0.0.1:99999", 0, 0, PROTO_E_BADARG, NULL},
        {"tcp://127.0.0.1:12a", 0, 0, PROTO_E_BADARG, NULL},
        {"tcp://[::1:5555", 0, 0, PROTO_E_BADARG, NULL},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        out[0] = err[0] = 0;
        int rc = proto_listen_url(c[i].url, c[i].tls, c[i].plain, out, sizeof out, err, sizeof err);
        CHECK(rc == c[i].rc && (!c[i].want || !strcmp(out, c[i].want)) && (rc == 0) == (err[0] == 0),
              "listen URL %s (tls %d, plain %d): rc %d, '%s' %s", c[i].url, c[i].tls, c[i].plain, rc, out, err);
    }
    proto_listen_url("tcp://0.0.0.0:5555", 0, 0, out, sizeof out, err, sizeof err);
    CHECK(strstr(err, "--allow-plain-tcp") && strstr(err, "tls+tcp://"), "the refusal names both ways out: %s", err);
    CHECK(proto_listen_url("tcp://:1", 0, 0, out, 8, err, sizeof err) == PROTO_E_BADARG, "an output buffer too short is an error");

    CHECK(proto_tokenize_reply_max(0) == 5 * 4 + PROTO_SLACK, "tokenize reply cap for 0 bytes: 5 tokens");
    CHECK(proto_tokenize_reply_max(1000) == 4005 * 4 + PROTO_SLACK, "tokenize reply cap: 4 tokens a byte + 5");
    CHECK(proto_tokenize_reply_max(PROTO_MAX_TEXT) == (size_t)PROTO_MAX_TOKENS * 4 + PROTO_SLACK,
          "tokenize reply cap never above PROTO_MAX_TOKENS");
    CHECK(proto_tokenize_reply_max(SIZE_MAX / 2) == (size_t)PROTO_MAX_TOKENS * 4 + PROTO_SLACK, "no overflow");

    nng_socket s;
    proto_tls none = { "/nonexistent/cert.pem", "/nonexistent/key.pem", "/nonexistent/ca.pem" };
    int rc = proto_listen_tls("tls+tcp://127.0.0.1:0", 0, 100, NULL, NULL, &none, &s, NULL, err, sizeof err);
    CHECK(rc == PROTO_E_TRANSPORT && strstr(err, "/nonexistent/cert.pem"), "unreadable certificate named: %s", err);
    rc = proto_listen_tls("tls+tcp://127.0.0.1:0", 0, 100, NULL, NULL, NULL, &s, NULL, err, sizeof err);
    CHECK(rc == PROTO_E_TRANSPORT && strstr(err, "--tls-cert"), "TLS URL without certificates: %s", err);
    rc = proto_dial_tls("tcp://127.0.0.1:1", 100, 1 << 20, &none, &s, err, sizeof err);
    CHECK(rc == PROTO_E_TRANSPORT && strstr(err, "only for tls+tcp"), "certificates with a plain URL: %s", err);
    proto_tls half = { "/etc/hostname", NULL, NULL };
    rc = proto_dial_tls("tls+tcp://127.0.0.1:1", 100, 1 << 20, &half, &s, err, sizeof err);
    CHECK(rc == PROTO_E_TRANSPORT && strstr(err, "all three"), "one certificate option alone: %s", err);
}

/* nng sockets open in this process: the "socket" scopes of nng's statistics; -1 without them. */
static int open_nng_sockets(void) {
    nng_stat *all = NULL;
    if (nng_stats_get(&all)) return -1;
    int n = 0;
    for (nng_stat *c = nng_stat_child(all); c; c = nng_stat_next(c)) n += !strcmp(nng_stat_name(c), "socket");
    nng_stats_free(all);
    return n;
}

/* proto_listen opens one socket and leaves none behind when closed, or when it fails (issue 23: it
 * opened two and leaked the first). */
static void test_listen_leak(void) {
    char url[128], err[256];
    snprintf(url, sizeof url, "ipc:///tmp/strata-test-%d-leak.ipc", (int)getpid());
    int before = open_nng_sockets(), listened = 0, refused = 0, open_while = -1;
    for (int i = 0; i < 20; i++) {
        nng_socket s;
        if (proto_listen(url, 0, 100, &s, err, sizeof err) == 0) {
            listened++;
            if (i == 0) open_while = open_nng_sockets();
            nng_close(s);
        }
        refused += proto_listen("bogus://nowhere", 0, 100, &s, err, sizeof err) == PROTO_E_TRANSPORT;
    }
    int after = open_nng_sockets();
    CHECK(before >= 0 && open_while == before + 1, "a listening proto_listen holds one nng socket (%d before, %d while)",
          before, open_while);
    CHECK(listened == 20 && refused == 20 && after == before,
          "20 listen/close cycles and 20 failed listens leave no nng socket open (%d before, %d after)", before, after);
}

int main(void) {
    test_listen_leak();
    test_listen_rules();
    test_roundtrip();
    test_wire_bytes();
    test_malformed();
    test_truncated();
    test_bombs();
    test_fuzz();
    test_live();
    return check_done();
}
