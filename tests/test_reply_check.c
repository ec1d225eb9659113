/* test_reply_check.c — the driver checks every value a worker sends (driver/arm_check.c, issue 22
 * F5) before anything uses it.
 *
 * Without arguments: a fake worker in this process (a thread serving inproc://, a consistent small
 * model: 16 tokens, 64 positions, 2 layers, 4 experts of which 2 per token) answers an arm that
 * dials it like a remote worker. Honest replies pass; then each reply is tampered in one field
 * (token ids 99999 and -7, a row or a token too few, a row length other than n_vocab, an infinite
 * or negative gap, a stream length that does not add up, expert ids outside the experts, NaN or
 * negative seconds, counters out of range, hello values out of range or with control bytes) and
 * arm_call / arm_call_all / arm_connect must fail with one message naming the arm and the field,
 * the reply freed.
 *
 * `test_reply_check --proxy LISTEN UPSTREAM MODE [N]` serves tests/reply_check.test.sh: a proxy
 * between a driver (LISTEN) and a real worker (UPSTREAM) that forwards every request and its reply,
 * and with MODE gen-ids rewrites the N-th (default 1) generate reply's first two token ids to 99999
 * and -7 (MODE pass: forwards only). Runs until killed. */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#include "driver/arm.h"
#include "proto/proto.h"
#include "tests/check.h"

#define FAKE_URL "inproc://strata-test-reply-check"
#define FV 16          /* the fake model: n_vocab */
#define FCTX 64        /* n_ctx */
#define FLAYER 2
#define FEXPERT 4
#define FUSED 2
#define FKVB 100       /* kv_bytes_per_token */

/* what the fake worker tampers with next (T_NONE: nothing) */
enum {
    T_NONE, T_GEN_IDS, T_GEN_SHORT, T_GEN_GAP_INF, T_GEN_GAP_NEG, T_GEN_PAST, T_TOK_ID, T_PF_ROWS, T_PF_VOCAB,
    T_PF_PAST, T_PF_EXPERT_ID, T_PF_EXPERT_N, T_TRUNC_PAST, T_ST_NAN, T_ST_NEG, T_ST_KVB, T_ST_RSS, T_VOCAB_N,
    T_HELLO_BOS, T_HELLO_ESC, T_HELLO_CTX, T_HELLO_EXPERT, T_HELLO_KVNAME,
    T_HELLO_WIN0, T_HELLO_WINALL, T_HELLO_WINOVER, T_HELLO_WINOK,
};
static _Atomic int g_tamper = T_NONE;

/* The fake worker's reply to req into *rep; payloads malloc'd into own[3] (freed after sending). */
static void fake_answer(const proto_msg *req, proto_msg *rep, uint64_t *n_past, void **own) {
    int t = atomic_load(&g_tamper);
    proto_init(rep, req->type, 1, req->id);
    switch (req->type) {
    case PROTO_HELLO: {
        proto_hello_rep *h = &rep->hello_rep;
        snprintf(h->engine, sizeof h->engine, "fake-worker 1");
        snprintf(h->git, sizeof h->git, "0123abcd");
        snprintf(h->model_sha256, sizeof h->model_sha256, "%064d", 1);
        snprintf(h->arch, sizeof h->arch, "qwen3moe");
        snprintf(h->tokenizer_hash, sizeof h->tokenizer_hash, "%064d", 2);
        snprintf(h->kv_k, sizeof h->kv_k, t == T_HELLO_KVNAME ? "f16 x" : "f16");
        snprintf(h->kv_v, sizeof h->kv_v, "f16");
        snprintf(h->device, sizeof h->device, t == T_HELLO_ESC ? "cpu\x1b]0;pwned\x07" : "cpu-c");
        snprintf(h->kv_layers, sizeof h->kv_layers, "all");
        h->n_vocab = FV;
        h->n_ctx = t == T_HELLO_CTX ? 0 : FCTX;
        h->n_layer = FLAYER;
        h->threads = 1;
        h->kv_bytes_per_token = FKVB;
        h->bos = t == T_HELLO_BOS ? FV : 1;
        h->n_expert = FEXPERT;
        h->n_expert_used = t == T_HELLO_EXPERT ? 0 : FUSED;
        /* the attention layout: unsent (an older worker) unless tampered; T_HELLO_WINOK is valid
         * (a window past n_ctx is allowed: a worker may reserve less context than the model's window) */
        h->has_window = t == T_HELLO_WIN0 || t == T_HELLO_WINALL || t == T_HELLO_WINOVER || t == T_HELLO_WINOK;
        h->window = t == T_HELLO_WIN0 ? 0 : t == T_HELLO_WINOK ? 100 : 16;
        h->layers_full = t == T_HELLO_WIN0 ? 1 : t == T_HELLO_WINALL ? FLAYER : t == T_HELLO_WINOVER ? FLAYER + 1 : 1;
        *n_past = 0;
        break;
    }
    case PROTO_TOKENIZE: {
        size_t n = req->tokenize_req.n_text;
        int32_t *ids = malloc(sizeof *ids * (n ? n : 1));
        own[0] = ids;
        for (size_t i = 0; i < n; i++) ids[i] = (unsigned char)req->tokenize_req.text[i] % FV;
        if (t == T_TOK_ID && n) ids[n - 1] = FV;
        rep->tokenize_rep.tokens = ids;
        rep->tokenize_rep.n_tokens = n;
        break;
    }
    case PROTO_VOCAB: {
        uint32_t V = t == T_VOCAB_N ? FV + 1 : FV;
        char *p = malloc(V);
        int32_t *o = malloc(sizeof *o * (2 * (size_t)V + 1));
        own[0] = p;
        own[1] = o;
        for (uint32_t i = 0; i < V; i++) { p[i] = 'a'; o[i] = (int32_t)i; o[V + 1 + i] = 0; }
        o[V] = (int32_t)V;
        rep->vocab_rep = (proto_vocab_rep){ V, p, V, o, o + V + 1, NULL, 0 };
        break;
    }
    case PROTO_PREFILL: {
        const proto_prefill_req *q = &req->prefill_req;
        uint32_t V = t == T_PF_VOCAB ? FV - 1 : FV;
        uint32_t rows = q->rows == PROTO_ROWS_ALL ? (uint32_t)q->n_tokens : q->rows == PROTO_ROWS_LAST ? 1 : 0;
        if (t == T_PF_ROWS) rows--;
        *n_past += q->n_tokens;
        float *l = malloc(sizeof *l * ((size_t)rows * V + 1));
        own[0] = l;
        for (size_t i = 0; i < (size_t)rows * V; i++) l[i] = (float)(i % V) * 0.5f;
        rep->prefill_rep.n_past = *n_past + (t == T_PF_PAST);
        rep->prefill_rep.n_vocab = V;
        rep->prefill_rep.n_rows = rows;
        rep->prefill_rep.logits = rows ? l : NULL;
        if (q->experts) {
            size_t n = q->n_tokens * FLAYER * FUSED - (t == T_PF_EXPERT_N);
            int32_t *x = malloc(sizeof *x * (n + 1));
            own[1] = x;
            for (size_t i = 0; i < n; i++) x[i] = (int32_t)(i % FEXPERT);
            if (t == T_PF_EXPERT_ID && n) x[n - 1] = FEXPERT;
            rep->prefill_rep.experts = n ? x : NULL;
            rep->prefill_rep.n_experts = n;
        }
        break;
    }
    case PROTO_GENERATE: {
        size_t n = req->generate_req.n - (t == T_GEN_SHORT);
        int32_t *ids = malloc(sizeof *ids * (n + 1));
        float *g = malloc(sizeof *g * (n + 1));
        own[0] = ids;
        own[1] = g;
        for (size_t i = 0; i < n; i++) { ids[i] = (int32_t)(3 + i) % FV; g[i] = 0.25f; }
        if (t == T_GEN_IDS && n >= 2) { ids[0] = 99999; ids[1] = -7; }
        if (t == T_GEN_GAP_INF && n) g[n - 1] = INFINITY;
        if (t == T_GEN_GAP_NEG && n) g[0] = -1.0f;
        if (req->generate_req.n) *n_past += req->generate_req.n - 1;
        rep->generate_rep = (proto_generate_rep){ n ? ids : NULL, n ? g : NULL, n, *n_past + (t == T_GEN_PAST) };
        break;
    }
    case PROTO_TRUNCATE:
        if (req->truncate_req.depth > *n_past) {
            proto_error(rep, req->id, PROTO_E_RANGE, "cannot truncate to %llu", (unsigned long long)req->truncate_req.depth);
            break;
        }
        *n_past = req->truncate_req.depth;
        rep->truncate_rep.n_past = *n_past + (t == T_TRUNC_PAST);
        break;
    case PROTO_STATS: {
        proto_stats_rep *s = &rep->stats_rep;
        s->n_past = *n_past;
        s->kv_bytes = *n_past * FKVB + (t == T_ST_KVB);
        s->prefill_tokens = 10;
        s->prefill_seconds = t == T_ST_NAN ? NAN : 0.5;
        s->decode_tokens = 3;
        s->decode_seconds = t == T_ST_NEG ? -0.25 : 0.125;
        s->peak_rss = t == T_ST_RSS ? UINT64_MAX : 1000000;
        break;
    }
    default:
        break;
    }
}

static void *fake_worker(void *arg) {
    nng_socket s = *(nng_socket *)arg;
    uint64_t n_past = 0;
    for (;;) {
        proto_msg req, rep;
        char err[512];
        void *own[3] = { NULL, NULL, NULL };
        int rc = proto_recv(s, PROTO_REQ_MAX, &req, err, sizeof err);
        if (rc == PROTO_E_TIMEOUT) continue;
        if (rc == PROTO_E_TRANSPORT) return NULL;
        if (rc) proto_error(&rep, req.id, rc, "%s", err);
        else fake_answer(&req, &rep, &n_past, own);
        proto_reply(s, &rep, err, sizeof err);
        proto_msg_free(&req);
        for (int i = 0; i < 3; i++) free(own[i]);
    }
}

static void fake_arm(arm *a) {
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "fake");
    snprintf(a->url, sizeof a->url, FAKE_URL);
    a->remote = 1;
    a->next_id = 1;
}

/* One request by arm_call with the fake tampering t; 1 when it failed naming the arm and want. */
static int refused(arm *a, int t, proto_msg *req, const char *want, char *err, size_t errlen) {
    proto_msg rep;
    atomic_store(&g_tamper, t);
    err[0] = 0;
    int rc = arm_call(a, req, &rep, 1 << 20, err, errlen);
    atomic_store(&g_tamper, T_NONE);
    int zeroed = rep.type == PROTO_NONE;
    proto_msg_free(&rep);
    return rc != 0 && zeroed && !strncmp(err, "arm fake: ", 10) && strstr(err, want) != NULL;
}

static int accepted(arm *a, proto_msg *req, char *err, size_t errlen) {
    proto_msg rep;
    err[0] = 0;
    int rc = arm_call(a, req, &rep, 1 << 20, err, errlen);
    proto_msg_free(&rep);
    return rc == 0;
}

static void truncate_req(proto_msg *m, uint64_t depth) {
    proto_init(m, PROTO_TRUNCATE, 0, 0);
    m->truncate_req.depth = depth;
}

static void prefill_req(proto_msg *m, int32_t *ids, size_t n, uint32_t rows, int experts) {
    proto_init(m, PROTO_PREFILL, 0, 0);
    m->prefill_req.tokens = ids;
    m->prefill_req.n_tokens = n;
    m->prefill_req.rows = rows;
    m->prefill_req.experts = experts;
}

static void generate_req(proto_msg *m, uint32_t n) {
    proto_init(m, PROTO_GENERATE, 0, 0);
    m->generate_req.n = n;
}

static void test_fake(void) {
    nng_socket s;
    pthread_t th;
    char err[1024];
    if (proto_listen(FAKE_URL, 0, 200, &s, err, sizeof err) || pthread_create(&th, NULL, fake_worker, &s)) {
        CHECK(0, "the fake worker listens on " FAKE_URL " (%s)", err);
        return;
    }
    arm a;
    fake_arm(&a);
    int rc = arm_connect(&a, 5000, 5000, 1 << 20, NULL, err, sizeof err);
    CHECK(rc == 0 && a.have_hello && a.hello.n_vocab == FV, "an honest hello is accepted (%s)", rc ? err : "ok");
    if (rc) goto done;
    int32_t ids[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    proto_msg req;

    /* honest replies pass */
    prefill_req(&req, ids, 8, PROTO_ROWS_ALL, 1);
    CHECK(accepted(&a, &req, err, sizeof err), "an honest prefill (8 rows, routing) is accepted (%s)", err);
    generate_req(&req, 4);
    CHECK(accepted(&a, &req, err, sizeof err), "an honest generate is accepted (%s)", err);
    truncate_req(&req, 8);
    CHECK(accepted(&a, &req, err, sizeof err), "an honest truncate is accepted (%s)", err);
    proto_init(&req, PROTO_STATS, 0, 0);
    CHECK(accepted(&a, &req, err, sizeof err), "an honest stats reply is accepted (%s)", err);
    proto_init(&req, PROTO_VOCAB, 0, 0);
    CHECK(accepted(&a, &req, err, sizeof err), "an honest vocab reply is accepted (%s)", err);
    proto_init(&req, PROTO_TOKENIZE, 0, 0);
    req.tokenize_req.text = "hello";
    req.tokenize_req.n_text = 5;
    CHECK(accepted(&a, &req, err, sizeof err), "an honest tokenize reply is accepted (%s)", err);

    /* generate: ids, count, gaps, stream length */
    generate_req(&req, 4);
    CHECK(refused(&a, T_GEN_IDS, &req, "token id 99999 at index 0", err, sizeof err),
          "generate reply with token ids 99999,-7 is refused naming the arm and the id (%s)", err);
    truncate_req(&req, 8);
    CHECK(accepted(&a, &req, err, sizeof err), "a truncate brings the arm back to a known stream (%s)", err);
    generate_req(&req, 4);
    CHECK(refused(&a, T_GEN_SHORT, &req, "3 tokens, 4 were asked for", err, sizeof err),
          "generate reply one token short is refused (%s)", err);
    truncate_req(&req, 8);
    accepted(&a, &req, err, sizeof err);
    generate_req(&req, 4);
    CHECK(refused(&a, T_GEN_GAP_INF, &req, "gap inf", err, sizeof err), "an infinite gap is refused (%s)", err);
    truncate_req(&req, 8);
    accepted(&a, &req, err, sizeof err);
    generate_req(&req, 4);
    CHECK(refused(&a, T_GEN_GAP_NEG, &req, "gap -1", err, sizeof err), "a negative gap is refused (%s)", err);
    truncate_req(&req, 8);
    accepted(&a, &req, err, sizeof err);
    generate_req(&req, 4);
    CHECK(refused(&a, T_GEN_PAST, &req, "n_past 12, expected 11", err, sizeof err),
          "generate reply whose n_past is not the stream + n - 1 is refused (%s)", err);

    /* tokenize and vocab */
    proto_init(&req, PROTO_TOKENIZE, 0, 0);
    req.tokenize_req.text = "hello";
    req.tokenize_req.n_text = 5;
    CHECK(refused(&a, T_TOK_ID, &req, "token id 16 at index 4 is outside the vocabulary [0, 16)", err, sizeof err),
          "tokenize reply with an id = n_vocab is refused (%s)", err);
    proto_init(&req, PROTO_VOCAB, 0, 0);
    CHECK(refused(&a, T_VOCAB_N, &req, "n_vocab 17", err, sizeof err),
          "vocab reply with more tokens than the handshake's n_vocab is refused (%s)", err);

    /* prefill: rows, row length, stream length, routing */
    truncate_req(&req, 0);
    accepted(&a, &req, err, sizeof err);
    prefill_req(&req, ids, 8, PROTO_ROWS_ALL, 0);
    CHECK(refused(&a, T_PF_ROWS, &req, "n_rows 7 for 8 tokens, expected 8", err, sizeof err),
          "prefill reply with a row too few is refused (%s)", err);
    truncate_req(&req, 0);
    accepted(&a, &req, err, sizeof err);
    prefill_req(&req, ids, 8, PROTO_ROWS_LAST, 0);
    CHECK(refused(&a, T_PF_VOCAB, &req, "n_vocab 15, the handshake said 16", err, sizeof err),
          "prefill reply with rows of 15 floats (n_vocab 16) is refused (%s)", err);
    truncate_req(&req, 0);
    accepted(&a, &req, err, sizeof err);
    prefill_req(&req, ids, 8, PROTO_ROWS_NONE, 0);
    CHECK(refused(&a, T_PF_PAST, &req, "n_past 9, expected 8", err, sizeof err),
          "prefill reply whose n_past is not the stream + the tokens sent is refused (%s)", err);
    truncate_req(&req, 0);
    accepted(&a, &req, err, sizeof err);
    prefill_req(&req, ids, 8, PROTO_ROWS_NONE, 1);
    CHECK(refused(&a, T_PF_EXPERT_ID, &req, "expert id 4 at index 31", err, sizeof err),
          "prefill reply with an expert id = n_expert is refused (%s)", err);
    truncate_req(&req, 0);
    accepted(&a, &req, err, sizeof err);
    prefill_req(&req, ids, 8, PROTO_ROWS_NONE, 1);
    CHECK(refused(&a, T_PF_EXPERT_N, &req, "31 expert ids, expected 32", err, sizeof err),
          "prefill reply with an expert id too few is refused (%s)", err);

    /* truncate and stats */
    truncate_req(&req, 0);
    accepted(&a, &req, err, sizeof err);
    prefill_req(&req, ids, 8, PROTO_ROWS_NONE, 0);
    accepted(&a, &req, err, sizeof err);
    truncate_req(&req, 5);
    CHECK(refused(&a, T_TRUNC_PAST, &req, "n_past 6 after a truncate to 5", err, sizeof err),
          "truncate reply with another n_past than the depth is refused (%s)", err);
    truncate_req(&req, 5);
    accepted(&a, &req, err, sizeof err);
    static const struct { int t; const char *want, *what; } st[] = {
        { T_ST_NAN, "prefill_seconds nan", "NaN prefill_seconds" },
        { T_ST_NEG, "decode_seconds -0.25", "negative decode_seconds" },
        { T_ST_KVB, "kv_bytes 501 is not n_past 5 x kv_bytes_per_token 100", "kv_bytes that do not add up" },
        { T_ST_RSS, "peak_rss 18446744073709551615", "a peak_rss over INT64_MAX (meta.json's integers)" } };
    for (int i = 0; i < 4; i++) {
        proto_init(&req, PROTO_STATS, 0, 0);
        CHECK(refused(&a, st[i].t, &req, st[i].want, err, sizeof err), "stats reply with %s is refused (%s)",
              st[i].what, err);
    }

    /* arm_call_all (what sweeps and needle runs use): the bad reply is freed, the arm named */
    {
        arm arms[1];
        proto_msg reqs[1], reps[1];
        int codes[1] = { 0 };
        arms[0] = a;
        truncate_req(&reqs[0], 5);
        int r0 = arm_call_all(arms, 1, reqs, reps, 1 << 20, 0, NULL, codes, err, sizeof err);
        proto_msg_free(&reps[0]);
        generate_req(&reqs[0], 4);
        atomic_store(&g_tamper, T_GEN_IDS);
        err[0] = 0;
        int r1 = arm_call_all(arms, 1, reqs, reps, 1 << 20, 0, NULL, codes, err, sizeof err);
        atomic_store(&g_tamper, T_NONE);
        CHECK(r0 == 0 && r1 != 0 && codes[0] == r1 && reps[0].type == PROTO_NONE && strstr(err, "arm fake: ") &&
              strstr(err, "token id 99999"), "arm_call_all refuses the generate reply with ids 99999,-7 (%s)", err);
        proto_msg_free(&reps[0]);
        a = arms[0];
    }

    /* hello: values out of range, control bytes */
    static const struct { int t; const char *want, *what; } hl[] = {
        { T_HELLO_BOS, "bos 16 is outside [-1, n_vocab 16)", "a BOS id outside the vocabulary" },
        { T_HELLO_ESC, "device holds the byte 0x1b", "an escape sequence in a string" },
        { T_HELLO_CTX, "n_ctx 0", "a context of 0" },
        { T_HELLO_EXPERT, "n_expert 4, n_expert_used 0", "experts but none used per token" },
        { T_HELLO_KVNAME, "kv_k 'f16 x'", "a format name with a space (a results label)" },
        { T_HELLO_WIN0, "window 0 with 1 of n_layer 2", "no window but a layer that does not read everything" },
        { T_HELLO_WINALL, "window 16 with 2 of n_layer 2", "a window but no layer that slides" },
        { T_HELLO_WINOVER, "window 16 with 3 of n_layer 2", "more full-context layers than layers" } };
    for (int i = 0; i < 8; i++) {
        nng_close(a.sock);
        a.connected = 0;
        a.have_hello = 0;
        atomic_store(&g_tamper, hl[i].t);
        err[0] = 0;
        rc = arm_connect(&a, 5000, 5000, 1 << 20, NULL, err, sizeof err);
        atomic_store(&g_tamper, T_NONE);
        CHECK(rc != 0 && !a.have_hello && !strncmp(err, "arm fake: ", 10) && strstr(err, hl[i].want),
              "hello reply with %s is refused (%s)", hl[i].what, err);
    }
    nng_close(a.sock);
    a.connected = 0;
    a.have_hello = 0;
    atomic_store(&g_tamper, T_HELLO_WINOK);
    err[0] = 0;
    rc = arm_connect(&a, 5000, 5000, 1 << 20, NULL, err, sizeof err);
    atomic_store(&g_tamper, T_NONE);
    CHECK(rc == 0 && a.have_hello && a.hello.has_window && a.hello.window == 100 && a.hello.layers_full == 1,
          "hello reply with window 100 (past n_ctx 64), 1 of 2 layers full, is accepted and kept (%s)", err);
done:
    if (a.connected) nng_close(a.sock);
    nng_close(s);
    pthread_join(th, NULL);
}

/* ---- --proxy LISTEN UPSTREAM MODE [N] ----------------------------------------------------------- */

static int proxy(const char *listen, const char *upstream, const char *mode, int nth) {
    nng_socket in, out;
    char err[1024];
    int gen_ids = !strcmp(mode, "gen-ids"), n_gen = 0;
    if (!gen_ids && strcmp(mode, "pass")) { fprintf(stderr, "proxy: mode gen-ids or pass\n"); return 2; }
    if (proto_dial(upstream, 30000, (size_t)1 << 30, &out, err, sizeof err) ||
        proto_listen(listen, 0, 1000, &in, err, sizeof err)) {
        fprintf(stderr, "proxy: %s\n", err);
        return 1;
    }
    nng_socket_set_ms(out, NNG_OPT_RECVTIMEO, 600000);
    printf("proxy: listening %s\n", listen);
    fflush(stdout);
    for (;;) {
        proto_msg req, rep;
        int rc = proto_recv(in, PROTO_REQ_MAX, &req, err, sizeof err);
        if (rc == PROTO_E_TIMEOUT) continue;
        if (rc == PROTO_E_TRANSPORT) return 1;
        if (rc) {
            proto_error(&rep, req.id, rc, "%s", err);
            proto_reply(in, &rep, err, sizeof err);
            continue;
        }
        rc = proto_call(out, &req, &rep, (size_t)1 << 30, err, sizeof err);
        if (rc && rep.type != PROTO_ERROR) proto_error(&rep, req.id, rc, "proxy: %s", err);
        if (!rc && gen_ids && rep.type == PROTO_GENERATE && ++n_gen == nth && rep.generate_rep.n >= 2) {
            rep.generate_rep.tokens[0] = 99999;
            rep.generate_rep.tokens[1] = -7;
            fprintf(stderr, "proxy: rewrote generate reply %d\n", n_gen);
        }
        proto_reply(in, &rep, err, sizeof err);
        proto_msg_free(&req);
        proto_msg_free(&rep);
    }
}

int main(int argc, char **argv) {
    if (argc >= 5 && !strcmp(argv[1], "--proxy")) return proxy(argv[2], argv[3], argv[4], argc > 5 ? atoi(argv[5]) : 1);
    test_fake();
    return check_done();
}
