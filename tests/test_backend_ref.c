/* test_backend_ref.c — the ref backend (kernels/backend_ref.c: the forward pass in plain C from the
 * kernels' references) against the cpu backend, bit for bit:
 *   - every dense model fixture (stories260K and its Q8_0 twin, rand-llama, rand-llama-linear,
 *     rand-qwen2, rand-qwen2-yarn, rand-qwen3, rand-gemma3 with its 32-key windows, the IQ-quantised
 *     rand-llama256 pair, and SmolLM2 Q4_1 / Gemma 3 Q4_K_M when $STRATA_CACHE has them) in several
 *     KV formats and mixes: one script (prefill in chunks, decode steps, truncate and prefill
 *     again, truncate again and ask only the chunks' last rows) through both backends, the rows
 *     compared with memcmp; ref in other chunks than cpu; the script's passes against each other;
 *   - an attention-output bias (no dense fixture has one) and llama.cpp's f32 RoPE angles: equal
 *     between the backends and different from the plain model (so the comparison can fail);
 *   - what ref refuses at create, with one line naming it: the MoE fixtures (rand-qwen3moe,
 *     rand-gptoss, rand-qwen2moe, rand-qwen35moe), the hybrid rand-qwen35, and each feature alone
 *     on a copy of rand-llama (sinks, gated attention, the clamped SwiGLU, shared experts,
 *     a linear-attention layer);
 *   - the contract beside the bits: the memory check sees the cpu backend's KV bytes, its refusal
 *     reserves nothing; the forward and truncate errors are the cpu backend's messages; name
 *     "ref-c", one thread, the KV bytes per token.
 * Argument: only the fixtures whose name contains it. */
#include "tests/check.h"
#include "kernels/backend.h"
#include "kernels/kv.h"
#include "kernels/kvfmt.h"
#include "worker/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_T 16         /* the backends' prefill chunk */
#define MAX_CELLS 1024   /* (layer, KV head) cells */

/* What run_script does with tok[n]: pass 0 prefills [0, prefill) then decodes one token at a time
 * to n; pass 1 truncates to d1 and prefills [d1, n); pass 2 truncates to d2 and prefills [d2, n)
 * asking only the rows at p % 4 == 3 (a few rows inside each chunk, not its first). Passes 0 and 1
 * ask the rows at positions p % every == 0 and n - 1 (every 1: all). */
typedef struct {
    int n, prefill, d1, d2, every;
} script;

static const script SMALL = { 48, 36, 20, 33, 1 };   /* past rand-gemma3's 32-key window */
static const script REAL = { 16, 12, 7, 13, 5 };     /* the real models: few rows of a large vocabulary */

static int wanted(const script *s, int pos, int pass) {
    return pass == 2 ? pos % 4 == 3 : s->every <= 1 || pos % s->every == 0 || pos == s->n - 1;
}

/* Forwards tok[from..to) in chunks of `chunk`, the rows the pass wants into out [n][V] at their
 * positions. lg [MAX_T][V] is scratch. 0, or -1 with the message in err. */
static int span(backend *b, const script *s, const int32_t *tok, int from, int to, int chunk, int pass, float *out,
                float *lg, int V, char *err, size_t errlen) {
    for (int p = from; p < to; p += chunk) {
        int T = to - p < chunk ? to - p : chunk, rows[MAX_T], nr = 0;
        for (int i = 0; i < T; i++)
            if (wanted(s, p + i, pass)) rows[nr++] = i;
        if (backend_forward(b, tok + p, T, p, rows, nr, lg, err, errlen)) return -1;
        for (int i = 0; i < nr; i++) memcpy(out + (size_t)(p + rows[i]) * V, lg + (size_t)i * V, sizeof(float) * V);
    }
    return 0;
}

/* The script on a fresh backend of `kind` (formats fk / fv [n_layer][n_kv]), prefill chunks of
 * `chunk`: out [3][n][V] (zeroed here) gets each pass's rows. 0, or -1 with the message in err. */
static int run_script(const backend_model *net, const char *kind, const kv_fmt *fk, const kv_fmt *fv, const int32_t *tok,
                      const script *s, int chunk, float *out, char *err, size_t errlen) {
    int V = net->n_vocab, rc = -1;
    size_t pass = (size_t)s->n * V;
    backend *b = NULL;
    float *lg = malloc(sizeof(float) * MAX_T * V);   /* [MAX_T][V] */
    backend_config bc = { kind, fk, fv, s->n + 8, MAX_T, 2, NULL, NULL, NULL, NULL, 0, 0, 0 };
    memset(out, 0, sizeof(float) * 3 * pass);
    if (!lg) { snprintf(err, errlen, "out of memory"); goto done; }
    if (backend_create(net, &bc, &b, err, errlen)) goto done;
    if (span(b, s, tok, 0, s->prefill, chunk, 0, out, lg, V, err, errlen) ||
        span(b, s, tok, s->prefill, s->n, 1, 0, out, lg, V, err, errlen) || backend_truncate(b, s->d1, err, errlen) ||
        span(b, s, tok, s->d1, s->n, chunk, 0, out + pass, lg, V, err, errlen) || backend_truncate(b, s->d2, err, errlen) ||
        span(b, s, tok, s->d2, s->n, chunk, 2, out + 2 * pass, lg, V, err, errlen))
        goto done;
    rc = 0;
done:
    backend_free(b);
    free(lg);
    return rc;
}

/* K and V formats of every cell from two mixes (kvfmt.h syntax); 0, or -1 with a failed CHECK. */
static int cells(const model *m, const char *kmix, const char *vmix, kv_fmt *fk, kv_fmt *fv) {
    kv_mix mk, mv;
    char err[256] = "";
    if (m->n_layer * m->n_kv > MAX_CELLS || kv_mix_parse(kmix, &mk, err, sizeof err) || kv_mix_parse(vmix, &mv, err, sizeof err) ||
        kv_mix_cells(&mk, m->n_layer, m->n_kv, fk, err, sizeof err) || kv_mix_cells(&mv, m->n_layer, m->n_kv, fv, err, sizeof err)) {
        CHECK(0, "mixes %s / %s resolve (%s)", kmix, vmix, err);
        return -1;
    }
    return 0;
}

/* 1 if every cell's formats fit the head dim (else the format is not for this model). */
static int fits(const model *m, const kv_fmt *fk, const kv_fmt *fv) {
    for (int i = 0; i < m->n_layer * m->n_kv; i++)
        if (kv_fmt_check(fk[i], m->hd, NULL, 0) || kv_fmt_check(fv[i], m->hd, NULL, 0)) return 0;
    return 1;
}

/* 1 when pass 1 and pass 0 agree on every row both asked, and pass 2's rows equal pass 0's. */
static int passes_agree(const script *s, const float *out, int V) {
    size_t pass = (size_t)s->n * V, row = sizeof(float) * V;
    for (int p = s->d1; p < s->n; p++)
        if (wanted(s, p, 1) && memcmp(out + (size_t)p * V, out + pass + (size_t)p * V, row)) return 0;
    for (int p = s->d2; p < s->n; p++)
        if (wanted(s, p, 0) && wanted(s, p, 2) && memcmp(out + (size_t)p * V, out + 2 * pass + (size_t)p * V, row)) return 0;
    return 1;
}

/* The KV formats of the small fixtures: K mix, V mix (those that do not fit a head dim are skipped). */
static const char *const FORMATS[][2] = {
    { "f32", "f32" }, { "f16", "f16" }, { "bf16", "bf16" }, { "int8", "int8" }, { "q8_0", "q8_0" }, { "q4_0", "q4_0" },
    { "fp8", "e5m2" }, { "e4m3s", "nvfp4" }, { "tq3", "q4_1" }, { "q8_0+roth", "q4_0+rot" }, { "int8+roth", "f16" },
    { "kivi4-g8-r16", "kivi2-g16-r8" }, { "int8+f16@0+e4m3s@-1", "q4_0+f32@h0" },
};
#define N_FORMATS (sizeof FORMATS / sizeof FORMATS[0])

/* One model: the script through cpu and ref in each format pair given (all of FORMATS when nf < 0),
 * ref also in chunks of 5 for the first. */
static void compare_model(const char *path, const char *name, const script *s, const char *const (*fmts)[2], int nf) {
    char err[512] = "", warn[256];
    model *m = NULL;
    kv_fmt fk[MAX_CELLS], fv[MAX_CELLS];
    if (model_load(path, &m, err, sizeof err, warn, sizeof warn)) { CHECK(0, "load %s: %s", path, err); return; }
    backend_model net;
    model_net(m, &net);
    int V = m->n_vocab, ran = 0;
    size_t all = (size_t)3 * s->n * V;
    int32_t tok[64];
    uint32_t r = 12345;   /* tokens: a fixed LCG over the vocabulary */
    for (int i = 0; i < s->n; i++) { r = r * 1664525u + 1013904223u; tok[i] = (int32_t)((r >> 8) % (uint32_t)V); }
    float *a = malloc(sizeof(float) * all), *b = malloc(sizeof(float) * all);
    if (!a || !b) { CHECK(0, "out of memory"); goto done; }
    if (nf < 0) { fmts = FORMATS; nf = (int)N_FORMATS; }
    for (int f = 0; f < nf; f++) {
        if (cells(m, fmts[f][0], fmts[f][1], fk, fv)) continue;
        if (!fits(m, fk, fv)) { printf("# %s: K %s V %s does not fit head dim %d\n", name, fmts[f][0], fmts[f][1], m->hd); continue; }
        int ok = run_script(&net, "cpu", fk, fv, tok, s, MAX_T, a, err, sizeof err) == 0;
        CHECK(ok, "%s K %s V %s: the cpu backend runs the script (%s)", name, fmts[f][0], fmts[f][1], ok ? "" : err);
        if (!ok) continue;
        ok = run_script(&net, "ref", fk, fv, tok, s, MAX_T, b, err, sizeof err) == 0;
        CHECK(ok && memcmp(a, b, sizeof(float) * all) == 0,
              "%s K %s V %s: ref = cpu bit for bit (prefill chunks of %d, %d decode steps, truncate %d / %d and again) %s",
              name, fmts[f][0], fmts[f][1], MAX_T, s->n - s->prefill, s->d1, s->d2, ok ? "" : err);
        CHECK(passes_agree(s, a, V), "%s K %s V %s: the rows after each truncation are the first pass's", name, fmts[f][0], fmts[f][1]);
        if (ran++ == 0) {
            ok = run_script(&net, "ref", fk, fv, tok, s, 5, b, err, sizeof err) == 0;
            CHECK(ok && memcmp(a, b, sizeof(float) * all) == 0, "%s K %s V %s: ref in chunks of 5 = cpu in chunks of %d", name,
                  fmts[f][0], fmts[f][1], MAX_T);
        }
    }
    CHECK(ran > 0, "%s: at least one format pair ran", name);
done:
    free(a);
    free(b);
    model_free(m);
}

/* A copy of m's layers the caller may change (free it). */
static backend_layer *layers_copy(const model *m) {
    backend_layer *l = malloc(sizeof *l * (size_t)m->n_layer);
    if (l) memcpy(l, m->layers, sizeof *l * (size_t)m->n_layer);
    return l;
}

/* The backend's create on net with f16 KV everywhere: 0 or -1, *out freed unless keep. */
static int try_create(const backend_model *net, const char *kind, int n_layer_kv, char *err, size_t errlen, backend **keep) {
    static kv_fmt f[MAX_CELLS];
    backend *b = NULL;
    for (int i = 0; i < n_layer_kv && i < MAX_CELLS; i++) f[i] = KV_F16;
    backend_config bc = { kind, f, f, 64, MAX_T, 1, NULL, NULL, NULL, NULL, 0, 0, 0 };
    int rc = backend_create(net, &bc, &b, err, errlen);
    if (rc) CHECK(b == NULL, "a refused create leaves no backend");
    if (keep) *keep = b;
    else backend_free(b);
    return rc;
}

/* rand-llama with an attention-output bias in every layer, and with f32 RoPE angles: cpu = ref,
 * and both differ from the plain model's rows. */
static void test_variants(void) {
    char err[512] = "", warn[256];
    model *m = NULL;
    const script *s = &SMALL;
    kv_fmt fk[MAX_CELLS], fv[MAX_CELLS];
    if (model_load("tests/fixtures/models/rand-llama.gguf", &m, err, sizeof err, warn, sizeof warn)) {
        CHECK(0, "load rand-llama: %s", err);
        return;
    }
    size_t all = (size_t)3 * s->n * m->n_vocab;
    float *plain = malloc(sizeof(float) * all), *a = malloc(sizeof(float) * all), *b = malloc(sizeof(float) * all);
    float *bo = malloc(sizeof(float) * (size_t)m->dim);
    backend_layer *L = layers_copy(m);
    int32_t tok[64];
    for (int i = 0; i < s->n; i++) tok[i] = (int32_t)((i * 37 + 11) % m->n_vocab);
    if (!plain || !a || !b || !bo || !L || cells(m, "int8", "f16", fk, fv)) { CHECK(0, "out of memory"); goto done; }
    backend_model net;
    model_net(m, &net);
    int ok = run_script(&net, "cpu", fk, fv, tok, s, MAX_T, plain, err, sizeof err) == 0;
    for (int i = 0; i < m->dim; i++) bo[i] = 0.01f * (float)((i * 7) % 13) - 0.06f;
    for (int l = 0; l < m->n_layer; l++) L[l].bo = bo;
    net.layers = L;
    ok = ok && run_script(&net, "cpu", fk, fv, tok, s, MAX_T, a, err, sizeof err) == 0 &&
         run_script(&net, "ref", fk, fv, tok, s, MAX_T, b, err, sizeof err) == 0;
    CHECK(ok && !memcmp(a, b, sizeof(float) * all) && memcmp(a, plain, sizeof(float) * all),
          "rand-llama with an attention-output bias: ref = cpu bit for bit, and not the rows without it (%s)", err);
    model_net(m, &net);
    net.rope_global.f32_angles = net.rope_local.f32_angles = 1;
    ok = ok && run_script(&net, "cpu", fk, fv, tok, s, MAX_T, a, err, sizeof err) == 0 &&
         run_script(&net, "ref", fk, fv, tok, s, MAX_T, b, err, sizeof err) == 0;
    CHECK(ok && !memcmp(a, b, sizeof(float) * all) && memcmp(a, plain, sizeof(float) * all),
          "rand-llama with f32 RoPE angles: ref = cpu bit for bit, and not the exact angles' rows (%s)", err);
    backend *rb = NULL;
    ok = try_create(&net, "ref", m->n_layer * m->n_kv, err, sizeof err, &rb) == 0;
    CHECK(ok && !strcmp(backend_name(rb), "ref-c+rope-f32"), "with f32 angles the device is ref-c+rope-f32 (%s)",
          ok ? backend_name(rb) : err);
    backend_free(rb);
done:
    free(plain); free(a); free(b); free(bo); free(L);
    model_free(m);
}

/* ref refuses a model at create with one line naming `what`. */
static void refused(const backend_model *net, int cells_n, const char *name, const char *what) {
    char err[512] = "";
    int rc = try_create(net, "ref", cells_n, err, sizeof err, NULL);
    CHECK(rc != 0 && strstr(err, "backend ref does not implement") && strstr(err, what) && !strchr(err, '\n'),
          "%s: ref refuses at create naming %s (%s)", name, what, err);
}

static void test_refusals(void) {
    static const char *const fixtures[][2] = {
        { "rand-qwen3moe", "mixture-of-experts layers (n_expert 8)" }, { "rand-gptoss", "mixture-of-experts layers (n_expert 8)" },
        { "rand-qwen2moe", "mixture-of-experts layers (n_expert 8)" }, { "rand-qwen35moe", "mixture-of-experts layers (n_expert 6)" },
        { "rand-qwen35", "linear-attention layers (layer 0" },
    };
    char path[256], err[512] = "", warn[256];
    model *m = NULL;
    backend_model net;
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        snprintf(path, sizeof path, "tests/fixtures/models/%s.gguf", fixtures[i][0]);
        if (model_load(path, &m, err, sizeof err, warn, sizeof warn)) { CHECK(0, "load %s: %s", path, err); continue; }
        model_net(m, &net);
        refused(&net, m->n_layer * m->n_kv, fixtures[i][0], fixtures[i][1]);
        CHECK(try_create(&net, "cpu", m->n_layer * m->n_kv, err, sizeof err, NULL) == 0, "%s: the cpu backend runs it (%s)",
              fixtures[i][0], err);
        model_free(m);
        m = NULL;
    }
    if (model_load("tests/fixtures/models/rand-llama.gguf", &m, err, sizeof err, warn, sizeof warn)) {
        CHECK(0, "load rand-llama: %s", err);
        return;
    }
    int nc = m->n_layer * m->n_kv;
    backend_layer *L = layers_copy(m);
    float *sinks = calloc((size_t)m->n_head, sizeof(float));
    if (!L || !sinks) { CHECK(0, "out of memory"); goto done; }
    model_net(m, &net);
    net.layers = L;
    L[1].sinks = sinks;
    refused(&net, nc, "rand-llama with sinks in layer 1", "attention sinks (layer 1");
    CHECK(try_create(&net, "cpu", nc, err, sizeof err, NULL) == 0, "the cpu backend takes that model (%s)", err);
    L[1].sinks = NULL;
    L[0].recurrent = 1;
    refused(&net, nc, "rand-llama with a recurrent layer 0", "linear-attention layers (layer 0");
    L[0].recurrent = 0;
    net.attn_gate = 1;
    refused(&net, nc, "rand-llama with attn_gate", "gated attention");
    net.attn_gate = 0;
    net.act = BACKEND_ACT_SWIGLU_OAI;
    refused(&net, nc, "rand-llama with the clamped SwiGLU", "clamped SwiGLU");
    net.act = BACKEND_ACT_SWIGLU;
    net.ffn_sh = 64;
    refused(&net, nc, "rand-llama with a shared expert", "shared experts (ffn_sh 64)");
    net.ffn_sh = 0;
    net.n_expert = 4;
    net.n_expert_used = 2;
    refused(&net, nc, "rand-llama with n_expert 4", "mixture-of-experts layers (n_expert 4)");
done:
    free(L);
    free(sinks);
    model_free(m);
}

/* ---- the contract besides the bits ------------------------------------------------------------- */

typedef struct {
    backend_need seen;
    int refuse;
} mem_probe;

static int probe(void *ctx, const backend_need *need, char *err, size_t errlen) {
    mem_probe *p = ctx;
    p->seen = *need;
    if (p->refuse) snprintf(err, errlen, "probe: not enough memory");
    return p->refuse ? -1 : 0;
}

/* Runs one call on both backends (fresh, prefilled with 10 tokens) and returns 1 when both fail
 * with the same message. */
static int same_error(const backend_model *net, const kv_fmt *fk, const kv_fmt *fv, int what, char *msg, size_t len) {
    static const char *const kinds[2] = { "cpu", "ref" };
    char err[2][256] = { "", "" };
    int rc[2], rows[2] = { 0, 1 };
    int32_t tok[MAX_T + 1] = { 0 };
    float *lg = malloc(sizeof(float) * MAX_T * net->n_vocab);
    for (int k = 0; k < 2; k++) {
        backend *b = NULL;
        backend_config bc = { kinds[k], fk, fv, 20, MAX_T, 1, NULL, NULL, NULL, NULL, 0, 0, 0 };
        rc[k] = backend_create(net, &bc, &b, err[k], sizeof err[k]) || backend_forward(b, tok, 10, 0, rows, 1, lg, err[k], 256);
        if (rc[k]) continue;
        tok[0] = what == 1 ? net->n_vocab : 0;
        rows[1] = what == 2 ? 3 : 1;
        rc[k] = what == 0 ? backend_forward(b, tok, 1, 11, rows, 1, lg, err[k], 256)             /* a gap */
              : what == 1 ? backend_forward(b, tok, 2, 10, rows, 1, lg, err[k], 256)             /* a bad token */
              : what == 2 ? backend_forward(b, tok, 2, 10, rows, 2, lg, err[k], 256)             /* a bad row */
              : what == 3 ? backend_forward(b, tok, MAX_T + 1, 10, rows, 1, lg, err[k], 256)     /* too long */
              : what == 4 ? backend_forward(b, tok, 12, 9, rows, 1, lg, err[k], 256)             /* past n_ctx */
                          : backend_truncate(b, 11, err[k], 256);                                /* past the depth */
        backend_free(b);
        tok[0] = 0;
        rows[1] = 1;
    }
    free(lg);
    snprintf(msg, len, "%s", err[1]);
    return rc[0] && rc[1] && !strcmp(err[0], err[1]);
}

static void test_contract(void) {
    char err[512] = "", warn[256];
    model *m = NULL;
    kv_fmt fk[MAX_CELLS], fv[MAX_CELLS];
    if (model_load("tests/fixtures/models/rand-gemma3.gguf", &m, err, sizeof err, warn, sizeof warn)) {
        CHECK(0, "load rand-gemma3: %s", err);
        return;
    }
    backend_model net;
    model_net(m, &net);
    if (cells(m, "q4_0+f16@0+kivi4-g8-r16@-1", "int8+f32@h1", fk, fv)) goto done;
    mem_probe pc = { { 0, 0 }, 0 }, pr = { { 0, 0 }, 0 };
    backend *bc = NULL, *br = NULL;
    backend_config cc = { "cpu", fk, fv, 100, MAX_T, 2, probe, &pc, NULL, NULL, 0, 0, 0 };
    backend_config rc = { "ref", fk, fv, 100, MAX_T, 2, probe, &pr, NULL, NULL, 0, 0, 0 };
    int ok = backend_create(&net, &cc, &bc, err, sizeof err) == 0 && backend_create(&net, &rc, &br, err, sizeof err) == 0;
    CHECK(ok && pr.seen.kv_bytes_per_token == pc.seen.kv_bytes_per_token && pr.seen.scratch_bytes > 0 &&
          backend_kv_bytes_per_token(br) == backend_kv_bytes_per_token(bc),
          "ref's memory check sees the cpu backend's KV bytes per token (%llu) and its scratch, and reports the same bytes "
          "per token (%s)", (unsigned long long)pr.seen.kv_bytes_per_token, err);
    CHECK(ok && !strcmp(backend_name(br), "ref-c") && backend_threads(br) == 1 && backend_aligned_prefill(br) == 0,
          "ref: device ref-c, 1 thread (2 asked), no aligned prefills (%s)", ok ? backend_name(br) : err);
    backend_free(bc);
    backend_free(br);
    br = NULL;
    pr.refuse = 1;
    err[0] = 0;
    CHECK(backend_create(&net, &rc, &br, err, sizeof err) != 0 && br == NULL && !strcmp(err, "probe: not enough memory"),
          "a memory check that refuses fails create with its message (%s)", err);
    CHECK(backend_available("ref") && backend_available("cpu"), "backend_available: cpu and ref");
    static const char *const calls[] = { "a gap", "a token id past the vocabulary", "a row outside the chunk",
                                         "a chunk past max_tokens", "positions past the context", "truncate past the depth" };
    for (int w = 0; w < 6; w++) {
        char msg[256];
        CHECK(same_error(&net, fk, fv, w, msg, sizeof msg), "%s: ref fails with the cpu backend's message (%s)", calls[w], msg);
    }
    model_free(m);
    m = NULL;
    if (model_load("tests/fixtures/models/stories260K.gguf", &m, err, sizeof err, warn, sizeof warn)) {
        CHECK(0, "load stories260K: %s", err);
        return;
    }
    model_net(m, &net);
    for (int i = 0; i < m->n_layer * m->n_kv; i++) fk[i] = fv[i] = KV_F16;
    fv[3] = KV_Q8_0;   /* 32-value blocks: not for head dim 8 */
    err[0] = 0;
    backend_config bad = { "ref", fk, fv, 100, MAX_T, 1, NULL, NULL, NULL, NULL, 0, 0, 0 };
    CHECK(backend_create(&net, &bad, &br, err, sizeof err) != 0 && br == NULL && strstr(err, "q8_0"),
          "a format that does not fit the head dim (q8_0 at 8) is refused naming it (%s)", err);
done:
    model_free(m);
}

int main(int argc, char **argv) {
    static const char *const dense[] = { "stories260K", "stories260K-q8_0", "rand-llama", "rand-llama-linear", "rand-qwen2",
                                         "rand-qwen2-yarn", "rand-qwen3", "rand-gemma3" };
    static const char *const iq[] = { "rand-llama256-iq4xs", "rand-llama256-iqmix" };
    static const char *const real_fmt[][2] = { { "q8_0", "f16" } };
    const char *only = argc > 1 ? argv[1] : NULL;
    char path[1024];
    for (size_t i = 0; i < sizeof dense / sizeof dense[0]; i++) {
        if (only && !strstr(dense[i], only)) continue;
        snprintf(path, sizeof path, "tests/fixtures/models/%s.gguf", dense[i]);
        compare_model(path, dense[i], &SMALL, NULL, -1);
    }
    for (size_t i = 0; i < 2; i++) {
        if (only && !strstr(iq[i], only)) continue;
        snprintf(path, sizeof path, "tests/fixtures/quant/models/%s.gguf", iq[i]);
        compare_model(path, iq[i], &SMALL, FORMATS + 1, 2);   /* f16, bf16 */
    }
    const char *cache = getenv("STRATA_CACHE"), *home = getenv("HOME");
    static const char *const real[][2] = { { "smollm2", "smollm2-135m-instruct-q4_1.gguf" }, { "gemma3", "gemma-3-270m-q4_k_m.gguf" } };
    for (int i = 0; i < 2; i++) {
        if (only && !strstr(real[i][0], only)) continue;
        if (cache) snprintf(path, sizeof path, "%s/%s", cache, real[i][1]);
        else snprintf(path, sizeof path, "%s/.cache/strata/%s", home ? home : ".", real[i][1]);
        FILE *f = fopen(path, "rb");
        if (!f) { printf("# skip %s: %s is not there (make models)\n", real[i][0], path); continue; }
        fclose(f);
        compare_model(path, real[i][0], &REAL, real_fmt, 1);
    }
    if (!only) {
        test_variants();
        test_refusals();
        test_contract();
    }
    return check_done();
}
