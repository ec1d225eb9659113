/* test_stream.c — kernels/stream.c, the stream bookkeeping above the backend implementations
 * (docs/DESIGN.md §3.1.3): its sizes and the memory check's view of them (hand-computed for the
 * random hybrids), truncation of rand-qwen35 and rand-qwen35moe back to many depths then the same
 * tokens again giving the rows of a fresh prefill bit for bit (the MoE one with pinned experts, so
 * that a re-run without the logged experts would differ), the replay starting at the newest
 * snapshot (counted through a wrapping implementation), the experts reported through the route
 * log, the implementation's messages passed through unchanged, and an implementation without the
 * state calls getting no stream: its own truncate is called. */
#include "tests/check.h"
#include "kernels/backend_impl.h"
#include "kernels/kvfmt.h"
#include "kernels/stream.h"
#include "worker/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 120, CTX = 400, CELLS = 64 };

/* ---- a wrapping implementation: the cpu backend inside, its calls counted --------------------- */

typedef struct {
    backend base;       /* first: a fake pointer is a backend pointer */
    backend *inner;     /* the cpu backend (made by backend_cpu_impl.create: no stream of its own) */
    int n_truncate;     /* calls of truncate, and the depth of the last */
    int last_truncate;
    int n_forward;      /* calls of forward, and the tokens they ran */
    int forward_tokens;
} fake;

static const backend_impl fake_stateful, fake_plain;

static int fake_create_as(const backend_impl *impl, const backend_model *m, const backend_config *cfg, backend **out,
                          char *err, size_t errlen) {
    fake *f = calloc(1, sizeof *f);
    *out = NULL;
    if (!f) return -1;
    if (backend_cpu_impl.create(m, cfg, &f->inner, err, errlen)) { free(f); return -1; }
    f->base.impl = impl;
    *out = &f->base;
    return 0;
}
static int fake_create_stateful(const backend_model *m, const backend_config *cfg, backend **out, char *err, size_t errlen) {
    return fake_create_as(&fake_stateful, m, cfg, out, err, errlen);
}
static int fake_create_plain(const backend_model *m, const backend_config *cfg, backend **out, char *err, size_t errlen) {
    return fake_create_as(&fake_plain, m, cfg, out, err, errlen);
}
static backend *inner(const backend *b) { return ((const fake *)b)->inner; }
static int fake_forward(backend *b, const int32_t *tokens, int T, int pos0, const int *rows, int n_rows, float *logits,
                        char *err, size_t errlen) {
    fake *f = (fake *)b;
    f->n_forward++;
    f->forward_tokens += T;
    return backend_cpu_impl.forward(f->inner, tokens, T, pos0, rows, n_rows, logits, err, errlen);
}
static int fake_truncate(backend *b, int depth, char *err, size_t errlen) {
    fake *f = (fake *)b;
    f->n_truncate++;
    f->last_truncate = depth;
    return backend_cpu_impl.truncate(f->inner, depth, err, errlen);
}
static void fake_route(backend *b, const int32_t *pin, int32_t *used) { backend_cpu_impl.route(inner(b), pin, used); }
static uint64_t fake_kv(const backend *b) { return backend_cpu_impl.kv_bytes_per_token(inner(b)); }
static const char *fake_name(const backend *b) { (void)b; return "fake"; }
static int fake_threads(const backend *b) { return backend_cpu_impl.threads(inner(b)); }
static void fake_free(backend *b) {
    backend_cpu_impl.free(inner(b));
    free(b);
}
static size_t fake_state_floats(const backend *b) { return backend_cpu_impl.state_floats(inner(b)); }
static void fake_state_get(const backend *b, float *dst) { backend_cpu_impl.state_get(inner(b), dst); }
static void fake_state_set(backend *b, const float *src) { backend_cpu_impl.state_set(inner(b), src); }

static const backend_impl fake_stateful = {
    "fake", fake_create_stateful, fake_forward, fake_truncate, fake_route, fake_kv, fake_name, fake_threads, fake_free,
    NULL, fake_state_floats, fake_state_get, fake_state_set,
};
static const backend_impl fake_plain = {
    "fake", fake_create_plain, fake_forward, fake_truncate, fake_route, fake_kv, fake_name, fake_threads, fake_free,
    NULL, NULL, NULL, NULL,
};

/* ---- helpers ------------------------------------------------------------------------------------ */

/* The memory check: records the need it saw; refuses when *limit is below its scratch bytes. */
typedef struct {
    backend_need seen;
    uint64_t limit;
} mem_probe;

static int probe_check(void *ctx, const backend_need *need, char *err, size_t errlen) {
    mem_probe *p = ctx;
    p->seen = *need;
    if (need->scratch_bytes > p->limit) {
        snprintf(err, errlen, "probe: %llu scratch bytes", (unsigned long long)need->scratch_bytes);
        return -1;
    }
    return 0;
}

/* A backend of net through impl (f32 KV, a context of CTX, max_T per forward), or NULL (printed). */
static backend *make(const backend_impl *impl, const backend_model *net, int max_T, mem_probe *probe) {
    static const kv_fmt f32[CELLS];   /* all KV_F32 (0) */
    backend *b = NULL;
    char err[256];
    backend_config c = { NULL, f32, f32, CTX, max_T, 2, probe ? probe_check : NULL, probe, NULL, NULL, 0, 0, 0 };
    if (net->n_layer * net->n_kv > CELLS || backend_create_impl(impl, net, &c, &b, err, sizeof err)) {
        printf("# backend: %s\n", err);
        return NULL;
    }
    return b;
}

/* Forwards tok[from..to) in chunks of `chunk`, every row into out [to-from][V] (NULL: none), the
 * experts pinned from pin [N][per] when given. Returns 0, or -1 (printed). */
static int run(backend *b, const int32_t *tok, int from, int to, int chunk, const int32_t *pin, size_t per, float *out,
               int V) {
    int rows[N];
    char err[256];
    for (int i = 0; i < N; i++) rows[i] = i;
    for (int s = from; s < to; s += chunk) {
        int T = to - s < chunk ? to - s : chunk;
        if (pin) backend_route(b, pin + (size_t)s * per, NULL);
        if (backend_forward(b, tok + s, T, s, rows, out ? T : 0, out ? out + (size_t)(s - from) * V : NULL, err, sizeof err)) {
            printf("# forward at %d: %s\n", s, err);
            return -1;
        }
    }
    return 0;
}

/* ---- the tests ---------------------------------------------------------------------------------- */

/* The sizes, by hand: 2 linear layers of conv 4, 2 key / 4 value heads of 16: cd = (2*2+4)*16 =
 * 128, per layer 3*128 + 4*16*16 = 1408 floats, 2816 in all = 11264 bytes; 2^30 / 11264 slots
 * clamp to 64: 720896 bytes, plus 4*CTX token ids, plus (MoE, 4 layers x top 2) 4*CTX*8 route log. */
static void test_sizes(const backend_model *net, const char *name, int moe) {
    uint64_t want = 64ull * 11264 + 4ull * CTX + (moe ? 4ull * CTX * 8 : 0);
    CHECK(stream_wanted(net) && stream_state_floats(net) == 2816 && stream_bytes(net, CTX) == want,
          "%s: stream state 2816 floats, %llu bytes at a context of %d (got %zu, %llu)", name, (unsigned long long)want,
          CTX, stream_state_floats(net), (unsigned long long)stream_bytes(net, CTX));
    mem_probe with = { { 0, 0 }, UINT64_MAX }, without = { { 0, 0 }, UINT64_MAX };
    backend *a = make(&backend_cpu_impl, net, 16, &with), *b = make(&fake_plain, net, 16, &without);
    CHECK(a && b && a->stream && !b->stream && with.seen.scratch_bytes == without.seen.scratch_bytes + want &&
          with.seen.kv_bytes_per_token == without.seen.kv_bytes_per_token,
          "%s: the memory check sees the stream's %llu bytes beside the implementation's (%llu vs %llu); none "
          "without the state calls", name, (unsigned long long)want, (unsigned long long)with.seen.scratch_bytes,
          (unsigned long long)without.seen.scratch_bytes);
    backend_free(a);
    backend_free(b);
    /* a check that refuses only the stream's bytes: nothing made, its message */
    mem_probe tight = { { 0, 0 }, without.seen.scratch_bytes + want - 1 };
    char err[256] = "";
    static const kv_fmt f32[CELLS];
    backend_config c = { "cpu", f32, f32, CTX, 16, 2, probe_check, &tight, NULL, NULL, 0, 0, 0 };
    backend *r = NULL;
    int rc = backend_create(net, &c, &r, err, sizeof err);
    CHECK(rc == -1 && !r && strncmp(err, "probe: ", 7) == 0,
          "%s: a memory check short by one byte of the stream refuses the arm (%s)", name, err);
    backend_free(r);
}

/* Truncations to many depths, then the same tokens again in other chunks: the fresh rows bit for
 * bit. pin [N][per] (MoE: experts other than the router's, so that a re-run with the router's would
 * differ) or NULL. Through the counting wrapper: the replay starts at the newest snapshot. */
static void test_truncate(const backend_model *net, const char *name, const int32_t *tok, const int32_t *pin, size_t per) {
    int V = net->n_vocab;
    float *ref = malloc(sizeof(float) * (size_t)N * V), *got = malloc(sizeof(float) * (size_t)N * V);
    backend *b = NULL;
    if (!ref || !got) { CHECK(0, "out of memory"); goto done; }
    b = make(&backend_cpu_impl, net, 16, NULL);
    int ok = b && run(b, tok, 0, N, 16, pin, per, ref, V) == 0;
    backend_free(b);
    b = make(&fake_stateful, net, 16, NULL);   /* snapshots at 16, 32, .., 112, 120 */
    ok = ok && b && run(b, tok, 0, N, 16, pin, per, NULL, V) == 0;
    CHECK(ok, "%s: prefills of %d tokens in chunks of 16%s", name, N, pin ? ", experts pinned" : "");
    static const int depths[] = { 97, 64, 119, 33, 5, 0, 111, 1, 120 };
    char err[256];
    for (int i = 0; ok && i < (int)(sizeof depths / sizeof depths[0]); i++) {
        int d = depths[i];
        fake *f = (fake *)b;
        f->n_truncate = f->n_forward = f->forward_tokens = 0;
        ok = backend_truncate(b, d, err, sizeof err) == 0;
        int nt = f->n_truncate, lt = f->last_truncate, nf = f->forward_tokens;
        ok = ok && run(b, tok, d, N, 9, pin, per, got, V) == 0;
        CHECK(ok && memcmp(got, ref + (size_t)d * V, sizeof(float) * (size_t)(N - d) * V) == 0,
              "%s: truncate to %d, then chunks of 9 to %d: the fresh rows bit for bit", name, d, N);
        if (i == 0) CHECK(nt == 1 && lt == 96 && nf == 1, "%s: truncate 120 -> 97 restores the snapshot of 96 and "
                          "re-runs 1 token (truncate calls %d, to %d; %d tokens)", name, nt, lt, nf);
        if (d == 120) CHECK(nt == 1 && lt == 120 && nf == 0, "%s: truncate to the depth reached: the implementation's "
                            "truncate only (calls %d, to %d; %d tokens)", name, nt, lt, nf);
    }
    /* the implementation's messages, unchanged, and nothing moved by a refused call */
    ok = ok && backend_truncate(b, N + 1, err, sizeof err) == -1;
    CHECK(ok && !strcmp(err, "cannot truncate to depth 121: the cache holds 120 positions"), "%s: %s", name, err);
    ok = backend_forward(b, tok, 1, N + 5, NULL, 0, NULL, err, sizeof err) == -1;
    CHECK(ok && !strcmp(err, "a forward pass at position 125 leaves a gap: the stream holds 120 positions"), "%s: %s", name, err);
    ok = backend_forward(b, tok, 17, 50, NULL, 0, NULL, err, sizeof err) == -1 && !strcmp(err, "chunk of 17 tokens (max 16)");
    ok = ok && run(b, tok, 60, N, 16, pin, per, got, V) == 0;   /* a forward below the depth reached truncates first */
    CHECK(ok && memcmp(got, ref + (size_t)60 * V, sizeof(float) * (size_t)(N - 60) * V) == 0,
          "%s: after refused calls (chunk of 17 at 50), a forward at 60 with 120 reached: the fresh rows bit for bit", name);
done:
    backend_free(b);
    free(ref);
    free(got);
}

/* The experts a forward reports (backend_route's used) come from the route log: the pinned ids. */
static void test_used(const backend_model *net, const char *name, const int32_t *tok, const int32_t *pin, size_t per) {
    int32_t *used = malloc(sizeof(int32_t) * 16 * per);
    backend *b = make(&backend_cpu_impl, net, 16, NULL);
    char err[256];
    int ok = used && b;
    for (size_t i = 0; ok && i < 16 * per; i++) used[i] = -1;
    ok = ok && run(b, tok, 0, 32, 16, NULL, per, NULL, net->n_vocab) == 0;
    if (ok) backend_route(b, pin + 32 * per, used);
    ok = ok && backend_forward(b, tok + 32, 16, 32, NULL, 0, NULL, err, sizeof err) == 0;
    CHECK(ok && memcmp(used, pin + 32 * per, sizeof(int32_t) * 16 * per) == 0,
          "%s: a pinned forward at 32 reports the pinned experts (through the route log)", name);
    backend_free(b);
    free(used);
}

/* An implementation without the state calls: no stream, its own truncate and forward only. */
static void test_plain(const backend_model *net, const char *name, const int32_t *tok) {
    backend *b = make(&fake_plain, net, 16, NULL);
    char err[256];
    int ok = b && !b->stream && run(b, tok, 0, 64, 16, NULL, 0, NULL, net->n_vocab) == 0;
    fake *f = (fake *)b;
    if (ok) f->n_truncate = f->n_forward = 0;
    ok = ok && backend_truncate(b, 50, err, sizeof err) == 0;
    CHECK(ok && f->n_truncate == 1 && f->last_truncate == 50 && f->n_forward == 0,
          "%s: without state calls no stream; truncate to 50 is the implementation's truncate(50), nothing re-run", name);
    backend_free(b);
}

static void test_model(const char *name) {
    char path[512], err[512], warn[256];
    model *m = NULL;
    backend_model net;
    int moe = strstr(name, "moe") != NULL;
    snprintf(path, sizeof path, "tests/fixtures/models/%s.gguf", name);
    if (model_load(path, &m, err, sizeof err, warn, sizeof warn)) { CHECK(0, "load %s: %s", path, err); return; }
    model_net(m, &net);
    int32_t tok[N];
    uint32_t r = 777;   /* a fixed LCG over the vocabulary */
    for (int i = 0; i < N; i++) { r = r * 1664525u + 1013904223u; tok[i] = (int32_t)((r >> 8) % (uint32_t)net.n_vocab); }
    test_sizes(&net, name, moe);
    int32_t *pin = NULL;
    size_t per = moe ? (size_t)net.n_layer * net.n_expert_used : 0;
    if (moe) {   /* experts other than the router's: what a free routing records, shifted by one */
        backend *b = make(&backend_cpu_impl, &net, 16, NULL);
        pin = malloc(sizeof(int32_t) * N * per);
        int ok = b && pin;
        for (int s = 0; ok && s < N; s += 16) {
            int T = N - s < 16 ? N - s : 16;
            backend_route(b, NULL, pin + (size_t)s * per);
            ok = backend_forward(b, tok + s, T, s, NULL, 0, NULL, err, sizeof err) == 0;
        }
        for (size_t i = 0; ok && i < N * per; i++) pin[i] = (pin[i] + 1) % net.n_expert;
        backend_free(b);
        CHECK(ok, "%s: a free routing recorded", name);
        if (!ok) goto done;
        test_used(&net, name, tok, pin, per);
    }
    test_truncate(&net, name, tok, pin, per);
    test_plain(&net, name, tok);
done:
    free(pin);
    model_free(m);
}

int main(void) {
    char path[] = "tests/fixtures/models/stories260K.gguf", err[512], warn[256];
    model *m = NULL;
    if (model_load(path, &m, err, sizeof err, warn, sizeof warn) == 0) {
        backend_model net;
        model_net(m, &net);
        backend *b = make(&backend_cpu_impl, &net, 16, NULL);
        CHECK(!stream_wanted(&net) && stream_bytes(&net, CTX) == 0 && b && !b->stream,
              "stories260K (no recurrent layer): no stream, no bytes");
        backend_free(b);
        model_free(m);
    } else {
        CHECK(0, "load %s: %s", path, err);
    }
    test_model("rand-qwen35");
    test_model("rand-qwen35moe");
    return check_done();
}
