/* test_loader.c — the loaders' refusals and load-time checks, in process (issue 15's engine-side
 * defects; each check failed before its fix):
 *   GGUF (worker/gguf.c): duplicate metadata keys and tensor names, general.alignment (power of two,
 *        offsets aligned), block_count checked against the tensor directory before allocating (fast,
 *        no huge calloc), a copy that owns its bytes;
 *   model (worker/model.c): hyperparameters with overflow-safe limits naming the key (key_length
 *        2^30), MoE / gpt-oss / qwen2moe / hybrid metadata;
 *   engine (worker/engine.c): a tokenizer vocabulary larger than the model's is refused; non-finite
 *        logits are an error (prefill and generate), never token 0; the memory check's arithmetic.
 * Crafted models are rewritten from stories260K (tests/gguf_edit.h) into a temp dir. The former
 * test_harden.c's other checks are in test_ops.c (exp), test_pool.c (pool stress) and test_tok.c
 * (tok_max_tokens bound). */
#include "tests/check.h"
#include "tests/proc.h"
#include "tests/gguf_edit.h"
#include "worker/engine.h"
#include "worker/gguf.h"
#include "worker/model.h"
#include "worker/tok.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* the committed fixtures (tests/fixtures/README.md); tests run from the repository root */
static inline const char *fixtures(void) { return "tests/fixtures"; }

/* ---- crafted models ---------------------------------------------------------------------------- */

static char tmpdir[64];
static ge_src src;          /* stories260K */

/* stories260K with one metadata entry replaced by a u32 (added when absent). */
static const char *with_u32(const char *key, uint32_t v, const char *name) {
    ge_out o;
    const char *skip[] = { key, NULL };
    ge_begin(&o, &src);
    ge_copy_kvs(&o, &src, skip);
    ge_kv_u32(&o, key, v);
    ge_copy_tensors(&o, &src);
    ge_finish(&o, &src, 32);
    return ge_put_file(&o, tmpdir, name);
}

/* the file is refused with want1 (and want2) in the message, mapped and copied alike */
static int open_fails(const char *path, const char *want1, const char *want2, char *err, size_t errlen) {
    int ok = 1;
    for (int hold = GGUF_HOLD_MAP; hold <= GGUF_HOLD_COPY; hold++) {
        gguf_file *g = NULL;
        err[0] = 0;
        int rc = gguf_open_as(path, (gguf_hold)hold, &g, err, errlen);
        gguf_close(g);
        ok &= rc != 0 && strstr(err, want1) && (!want2 || strstr(err, want2));
    }
    return ok;
}

/* a copy holds the file's bytes, from a 2 MiB boundary, and is its own: freed by gguf_close */
static void test_gguf_copy(void) {
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", fixtures());
    gguf_file *m = NULL, *c = NULL;
    int rc = gguf_open_as(path, GGUF_HOLD_MAP, &m, err, sizeof err) | gguf_open_as(path, GGUF_HOLD_COPY, &c, err, sizeof err);
    CHECK(rc == 0 && m->size == c->size && memcmp(m->base, c->base, m->size) == 0 && m->fd >= 0 && c->fd < 0 && c->own,
          "gguf_open_as COPY holds the same bytes as the mapping (%s)", rc ? err : "");
    CHECK(rc == 0 && (uintptr_t)c->base % (2u << 20) == 0, "the copy starts on a 2 MiB boundary (huge-page aligned)");
    const gguf_tensor *tm = rc ? NULL : gguf_tensor_find(m, "token_embd.weight"), *tc = rc ? NULL : gguf_tensor_find(c, "token_embd.weight");
    CHECK(tm && tc && tc->data != tm->data && memcmp(tc->data, tm->data, tm->nbytes) == 0,
          "tensor data points into the copy, with the mapped file's bytes");
    gguf_close(m);
    gguf_close(c);
}

static void test_gguf(void) {
    char err[512];
    ge_out o;
    /* a second general.architecture */
    ge_begin(&o, &src);
    ge_copy_kvs(&o, &src, NULL);
    ge_copy_kv(&o, &src, ge_find_kv(&src, "general.architecture"));
    ge_copy_tensors(&o, &src);
    ge_finish(&o, &src, 32);
    const char *p = ge_put_file(&o, tmpdir, "dupkey.gguf");
    CHECK(open_fails(p, "duplicate", "general.architecture", err, sizeof err),
          "a duplicate metadata key is refused, naming it (%s)", err);
    /* a second output_norm.weight */
    ge_begin(&o, &src);
    ge_copy_kvs(&o, &src, NULL);
    ge_copy_tensors(&o, &src);
    ge_copy_tensor(&o, &src, ge_find_tensor(&src, "output_norm.weight"));
    ge_finish(&o, &src, 32);
    p = ge_put_file(&o, tmpdir, "duptensor.gguf");
    CHECK(open_fails(p, "duplicate", "output_norm.weight", err, sizeof err),
          "a duplicate tensor name is refused, naming it (%s)", err);
    /* two general.alignment entries: refused (before, the parser used the last, lookups the first) */
    ge_begin(&o, &src);
    ge_copy_kvs(&o, &src, NULL);
    ge_kv_u32(&o, "general.alignment", 32);
    ge_kv_u32(&o, "general.alignment", 64);
    ge_copy_tensors(&o, &src);
    ge_finish(&o, &src, 64);
    p = ge_put_file(&o, tmpdir, "dupalign.gguf");
    CHECK(open_fails(p, "duplicate", "general.alignment", err, sizeof err), "two general.alignment entries are refused (%s)", err);
    /* alignment 0, 48, a u64: refused; 64: the data section starts on 64 */
    p = with_u32("general.alignment", 0, "align0.gguf");
    CHECK(open_fails(p, "general.alignment", NULL, err, sizeof err), "general.alignment 0 is refused (%s)", err);
    p = with_u32("general.alignment", 48, "align48.gguf");
    CHECK(open_fails(p, "general.alignment", NULL, err, sizeof err), "general.alignment 48 is refused (%s)", err);
    ge_begin(&o, &src);
    ge_copy_kvs(&o, &src, NULL);
    ge_kv_u64(&o, "general.alignment", 32);
    ge_copy_tensors(&o, &src);
    ge_finish(&o, &src, 32);
    p = ge_put_file(&o, tmpdir, "align64bit.gguf");
    CHECK(open_fails(p, "general.alignment", NULL, err, sizeof err), "a u64 general.alignment is refused (%s)", err);
    ge_begin(&o, &src);
    ge_copy_kvs(&o, &src, NULL);
    ge_kv_u32(&o, "general.alignment", 64);
    ge_copy_tensors(&o, &src);
    ge_finish(&o, &src, 64);
    p = ge_put_file(&o, tmpdir, "align64.gguf");
    gguf_file *g = NULL;
    int rc = gguf_open(p, &g, err, sizeof err);
    CHECK(rc == 0 && g->alignment == 64 && ((const uint8_t *)g->tensors[0].data - g->base) % 64 == 0,
          "general.alignment 64 is read and the data section starts on 64 (%s)", rc ? err : "ok");
    gguf_close(g);
    /* 512: output.weight's offset 131328 is not a multiple */
    ge_begin(&o, &src);
    ge_copy_kvs(&o, &src, NULL);
    ge_kv_u32(&o, "general.alignment", 512);
    ge_copy_tensors(&o, &src);
    ge_finish(&o, &src, 512);
    p = ge_put_file(&o, tmpdir, "align512.gguf");
    CHECK(open_fails(p, "output.weight", "alignment", err, sizeof err),
          "a tensor offset that is not a multiple of general.alignment is refused (%s)", err);
}

static void test_model_meta(void) {
    char err[512], warn[256];
    model *m = NULL;
    /* block_count 60,000,000 in a 1.2 MB file: refused before any allocation, at once */
    const char *p = with_u32("llama.block_count", 60000000u, "blocks.gguf");
    double t0 = clock_s();
    err[0] = 0;
    int rc = model_load(p, &m, err, sizeof err, warn, sizeof warn);
    double dt = clock_s() - t0;
    model_free(m);
    m = NULL;
    CHECK(rc != 0 && strstr(err, "block_count") && dt < 1.0,
          "block_count 60000000 with 48 tensors: refused in %.2f s naming block_count (%s)", dt, err);
    /* 4000 blocks (within the limit) need 36002 tensors: refused against the directory, before allocating */
    p = with_u32("llama.block_count", 4000, "blocks4000.gguf");
    err[0] = 0;
    rc = model_load(p, &m, err, sizeof err, warn, sizeof warn);
    model_free(m);
    m = NULL;
    CHECK(rc != 0 && strstr(err, "block_count") && strstr(err, "48"),
          "block_count 4000 is checked against the 48 tensors of the file (%s)", err);
    /* key_length 2^30: n_head * key_length overflows an int */
    p = with_u32("llama.attention.key_length", 1u << 30, "keylen.gguf");
    err[0] = 0;
    rc = model_load(p, &m, err, sizeof err, warn, sizeof warn);
    model_free(m);
    m = NULL;
    CHECK(rc != 0 && strstr(err, "llama.attention.key_length"), "key_length 2^30 is refused naming the key (%s)", err);
    p = with_u32("llama.attention.head_count", 1u << 30, "heads.gguf");
    err[0] = 0;
    rc = model_load(p, &m, err, sizeof err, warn, sizeof warn);
    model_free(m);
    m = NULL;
    CHECK(rc != 0 && strstr(err, "llama.attention.head_count"), "head_count 2^30 is refused naming the key (%s)", err);
    p = with_u32("llama.embedding_length", 1u << 30, "dim.gguf");
    err[0] = 0;
    rc = model_load(p, &m, err, sizeof err, warn, sizeof warn);
    model_free(m);
    m = NULL;
    CHECK(rc != 0 && strstr(err, "llama.embedding_length"), "embedding_length 2^30 is refused naming the key (%s)", err);
    p = with_u32("llama.attention.value_length", 16, "vlen.gguf");
    err[0] = 0;
    rc = model_load(p, &m, err, sizeof err, warn, sizeof warn);
    model_free(m);
    m = NULL;
    CHECK(rc != 0 && strstr(err, "value_length"), "value_length != key_length is refused (%s)", err);
    /* the original still loads */
    char orig[512];
    snprintf(orig, sizeof orig, "%s/models/stories260K.gguf", fixtures());
    rc = model_load(orig, &m, err, sizeof err, warn, sizeof warn);
    CHECK(rc == 0, "stories260K itself still loads (%s)", rc ? err : "ok");
    model_free(m);
}

/* qwen3moe metadata that does not fit its tensors, or no experts at all: one clear error each. */
static void test_moe_meta(void) {
    static const struct { const char *key; uint32_t v; const char *want; const char *what; } cases[] = {
        { "qwen3moe.expert_count", 0, "qwen3moe.expert_count", "expert_count 0" },
        { "qwen3moe.expert_used_count", 0, "qwen3moe.expert_used_count", "expert_used_count 0" },
        { "qwen3moe.expert_used_count", 9, "qwen3moe.expert_used_count", "expert_used_count 9 > expert_count 8" },
        { "qwen3moe.expert_count", 4, "ffn_gate_inp", "expert_count 4 for tensors of 8 experts" },
        { "qwen3moe.expert_feed_forward_length", 16, "ffn_gate_exps", "expert_feed_forward_length 16 for experts of 32" },
        { "qwen3moe.expert_count", 1u << 20, "qwen3moe.expert_count", "expert_count 2^20" },
    };
    char path[512], err[512], warn[256];
    ge_src moe;
    snprintf(path, sizeof path, "%s/models/rand-qwen3moe.gguf", fixtures());
    if (ge_load(path, &moe)) { CHECK(0, "load %s", path); return; }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ge_out o;
        const char *skip[] = { cases[i].key, NULL };
        model *m = NULL;
        ge_begin(&o, &moe);
        ge_copy_kvs(&o, &moe, skip);
        ge_kv_u32(&o, cases[i].key, cases[i].v);
        ge_copy_tensors(&o, &moe);
        ge_finish(&o, &moe, 32);
        const char *p = ge_put_file(&o, tmpdir, "moe.gguf");
        err[0] = 0;
        int rc = model_load(p, &m, err, sizeof err, warn, sizeof warn);
        model_free(m);
        CHECK(rc != 0 && strstr(err, cases[i].want), "qwen3moe %s: refused naming %s (%s)", cases[i].what,
              cases[i].want, err);
    }
    /* without expert_count at all */
    ge_out o;
    const char *skip[] = { "qwen3moe.expert_count", NULL };
    model *m = NULL;
    ge_begin(&o, &moe);
    ge_copy_kvs(&o, &moe, skip);
    ge_copy_tensors(&o, &moe);
    ge_finish(&o, &moe, 32);
    err[0] = 0;
    int rc = model_load(ge_put_file(&o, tmpdir, "moe-noexp.gguf"), &m, err, sizeof err, warn, sizeof warn);
    model_free(m);
    CHECK(rc != 0 && strstr(err, "missing metadata qwen3moe.expert_count"), "qwen3moe without expert_count: refused (%s)", err);
    ge_free_src(&moe);
}

/* gpt-oss: a file without its sliding window, expert width, sinks, an expert bias or its output
 * matrix is refused naming what is missing; a sliding_window_pattern of 3 makes layers 0 and 1
 * (l % 3 < 2) both sliding, where the default of 2 slides layer 0 only. */
static void test_gptoss_meta(void) {
    static const struct { const char *kv, *tensor, *want; } cases[] = {
        { "gpt-oss.attention.sliding_window", NULL, "missing metadata gpt-oss.attention.sliding_window" },
        { "gpt-oss.expert_feed_forward_length", NULL, "missing metadata gpt-oss.expert_feed_forward_length" },
        { NULL, "blk.0.attn_sinks.weight", "missing tensor blk.0.attn_sinks.weight" },
        { NULL, "blk.1.ffn_down_exps.bias", "missing tensor blk.1.ffn_down_exps.bias" },
        { NULL, "blk.1.attn_output.bias", "missing tensor blk.1.attn_output.bias" },
        { NULL, "output.weight", "missing tensor output.weight" },
    };
    char path[512], err[512], warn[256];
    ge_src oss;
    snprintf(path, sizeof path, "%s/models/rand-gptoss.gguf", fixtures());
    if (ge_load(path, &oss)) { CHECK(0, "load %s", path); return; }
    for (size_t i = 0; i <= sizeof cases / sizeof cases[0]; i++) {
        int last = i == sizeof cases / sizeof cases[0];   /* then: the pattern of 3 */
        ge_out o;
        const char *skip[] = { last ? "gpt-oss.attention.sliding_window_pattern" : cases[i].kv, NULL };
        model *m = NULL;
        ge_begin(&o, &oss);
        ge_copy_kvs(&o, &oss, skip);
        if (last) ge_kv_u32(&o, "gpt-oss.attention.sliding_window_pattern", 3);
        int drop = last || !cases[i].tensor ? -1 : ge_find_tensor(&oss, cases[i].tensor);
        for (int t = 0; t < oss.n_t; t++)
            if (t != drop) ge_copy_tensor(&o, &oss, t);
        ge_finish(&o, &oss, 32);
        err[0] = 0;
        int rc = model_load(ge_put_file(&o, tmpdir, "oss.gguf"), &m, err, sizeof err, warn, sizeof warn);
        if (last)
            CHECK(rc == 0 && m->layers[0].window == 16 && m->layers[1].window == 16 && m->layers[1].rope_local,
                  "gpt-oss with sliding_window_pattern 3: layers 0 and 1 both slide over 16 keys (%s)", rc ? err : "ok");
        else
            CHECK(rc != 0 && strstr(err, cases[i].want), "gpt-oss without %s: refused (%s)",
                  cases[i].kv ? cases[i].kv : cases[i].tensor, err);
        model_free(m);
    }
    ge_free_src(&oss);
}

/* qwen2moe: without its shared expert's gate or down matrix, or without both width keys (the
 * shared expert's and feed_forward_length), refused naming what is missing. */
static void test_qwen2moe_meta(void) {
    static const struct { const char *kv, *kv2, *tensor, *want; } cases[] = {
        { NULL, NULL, "blk.1.ffn_gate_inp_shexp.weight", "missing tensor blk.1.ffn_gate_inp_shexp.weight" },
        { NULL, NULL, "blk.0.ffn_down_shexp.weight", "missing tensor blk.0.ffn_down_shexp.weight" },
        { "qwen2moe.expert_shared_feed_forward_length", "qwen2moe.feed_forward_length", NULL,
          "missing metadata qwen2moe.expert_shared_feed_forward_length" },
    };
    char path[512], err[512], warn[256];
    ge_src src2;
    snprintf(path, sizeof path, "%s/models/rand-qwen2moe.gguf", fixtures());
    if (ge_load(path, &src2)) { CHECK(0, "load %s", path); return; }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ge_out o;
        const char *skip[] = { cases[i].kv, cases[i].kv2, NULL };
        model *m = NULL;
        ge_begin(&o, &src2);
        ge_copy_kvs(&o, &src2, skip);
        int drop = cases[i].tensor ? ge_find_tensor(&src2, cases[i].tensor) : -1;
        for (int t = 0; t < src2.n_t; t++)
            if (t != drop) ge_copy_tensor(&o, &src2, t);
        ge_finish(&o, &src2, 32);
        err[0] = 0;
        int rc = model_load(ge_put_file(&o, tmpdir, "q2moe.gguf"), &m, err, sizeof err, warn, sizeof warn);
        CHECK(rc != 0 && strstr(err, cases[i].want), "qwen2moe without %s: refused (%s)",
              cases[i].kv ? "its shared expert's width keys" : cases[i].tensor, err);
        model_free(m);
    }
    ge_free_src(&src2);
}

/* qwen35 metadata that does not fit its tensors or that strata does not model: one clear error
 * each, naming the key or the tensor. */
static void test_hybrid_meta(void) {
    static const struct { const char *key; uint32_t v; const char *want; const char *what; } cases[] = {
        { "qwen35.ssm.inner_size", 48, "qwen35.ssm.inner_size", "inner_size 48 != 4 value heads x 16" },
        { "qwen35.ssm.time_step_rank", 3, "not a multiple of ssm.group_count", "3 value heads over 2 key heads" },
        { "qwen35.ssm.conv_kernel", 3, "blk.0.ssm_conv1d.weight", "conv_kernel 3 for a kernel of 4" },
        { "qwen35.ssm.conv_kernel", 1000, "qwen35.ssm.conv_kernel", "conv_kernel 1000" },
        { "qwen35.ssm.state_size", 8, "qwen35.ssm.inner_size", "state_size 8 (inner_size then disagrees)" },
        { "qwen35.full_attention_interval", 4, "missing tensor blk.1.attn_qkv.weight", "interval 4: layer 1 linear" },
    };
    char path[512], err[512], warn[256];
    ge_src hy;
    snprintf(path, sizeof path, "%s/models/rand-qwen35.gguf", fixtures());
    if (ge_load(path, &hy)) { CHECK(0, "load %s", path); return; }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ge_out o;
        const char *skip[] = { cases[i].key, NULL };
        model *m = NULL;
        ge_begin(&o, &hy);
        ge_copy_kvs(&o, &hy, skip);
        ge_kv_u32(&o, cases[i].key, cases[i].v);
        ge_copy_tensors(&o, &hy);
        ge_finish(&o, &hy, 32);
        err[0] = 0;
        int rc = model_load(ge_put_file(&o, tmpdir, "hybrid.gguf"), &m, err, sizeof err, warn, sizeof warn);
        model_free(m);
        CHECK(rc != 0 && strstr(err, cases[i].want), "qwen35 %s: refused naming %s (%s)", cases[i].what, cases[i].want, err);
    }
    /* RoPE sections [1, 0, 1, 0]: pair 1 is in no position section (unrotated for text): refused;
     * then no sections at all */
    for (int k = 0; k < 2; k++) {
        ge_out o;
        const char *skip[] = { "qwen35.rope.dimension_sections", NULL };
        model *m = NULL;
        uint8_t arr[4 + 8 + 16];
        uint32_t at = 5;   /* INT32 */
        uint64_t n = 4;
        int32_t sec[4] = { 1, 0, 1, 0 };
        memcpy(arr, &at, 4);
        memcpy(arr + 4, &n, 8);
        memcpy(arr + 12, sec, 16);
        ge_begin(&o, &hy);
        ge_copy_kvs(&o, &hy, skip);
        if (k == 0) ge_kv_raw(&o, "qwen35.rope.dimension_sections", 9, arr, sizeof arr);
        ge_copy_tensors(&o, &hy);
        ge_finish(&o, &hy, 32);
        err[0] = 0;
        int rc = model_load(ge_put_file(&o, tmpdir, "hybrid-sec.gguf"), &m, err, sizeof err, warn, sizeof warn);
        model_free(m);
        CHECK(rc != 0 && strstr(err, k == 0 ? "leaves RoPE pair 1 of 4 unrotated" : "missing metadata qwen35.rope.dimension_sections"),
              "qwen35 %s: refused (%s)", k == 0 ? "sections [1, 0, 1, 0]" : "without rope.dimension_sections", err);
    }
    /* block_count 5 with nextn_predict_layers 1: the 4 trunk layers load, the MTP block is not run */
    {
        ge_out o;
        const char *skip[] = { "qwen35.block_count", NULL };
        model *m = NULL;
        ge_begin(&o, &hy);
        ge_copy_kvs(&o, &hy, skip);
        ge_kv_u32(&o, "qwen35.block_count", 5);
        ge_kv_u32(&o, "qwen35.nextn_predict_layers", 1);
        ge_copy_tensors(&o, &hy);
        ge_finish(&o, &hy, 32);
        err[0] = 0;
        int rc = model_load(ge_put_file(&o, tmpdir, "hybrid-mtp.gguf"), &m, err, sizeof err, warn, sizeof warn);
        CHECK(rc == 0 && m->n_layer == 4 && m->n_attn == 2, "qwen35 with one multi-token-prediction block: its 4 trunk "
              "layers load (%s)", rc ? err : "ok");
        model_free(m);
    }
    ge_free_src(&hy);
}

/* A tokenizer of 513 pieces for a model of 512 rows. */
static void test_vocab_size(void) {
    ge_out o;
    const char *skip[] = { "tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type", NULL };
    ge_begin(&o, &src);
    ge_copy_kvs(&o, &src, skip);
    uint32_t t;
    const uint8_t *v = ge_kv_value(&src, ge_find_kv(&src, "tokenizer.ggml.tokens"), &t);
    size_t len = ge_value_len(v, t);
    uint64_t n = ge_rd64(v + 4);
    ge_out val = {0};
    ge_put(&val, v, len);
    n++;
    memcpy(val.p + 4, &n, 8);
    ge_str(&val, "<extra>");
    ge_kv_raw(&o, "tokenizer.ggml.tokens", 9, val.p, val.n);
    ge_free_out(&val);
    const char *arrs[2] = { "tokenizer.ggml.scores", "tokenizer.ggml.token_type" };
    for (int a = 0; a < 2; a++) {
        v = ge_kv_value(&src, ge_find_kv(&src, arrs[a]), &t);
        len = ge_value_len(v, t);
        ge_put(&val, v, len);
        memcpy(val.p + 4, &n, 8);
        if (a == 0) { float sc = -1000.0f; ge_put(&val, &sc, 4); }
        else { int32_t ty = 1; ge_put(&val, &ty, 4); }
        ge_kv_raw(&o, arrs[a], 9, val.p, val.n);
        ge_free_out(&val);
    }
    ge_copy_tensors(&o, &src);
    ge_finish(&o, &src, 32);
    const char *p = ge_put_file(&o, tmpdir, "bigvocab.gguf");
    engine_config cfg = { p, KV_F16, KV_F16, 1, 64, 256, 0, 0, NULL, 0, 0, 0 };
    engine *e = NULL;
    char err[512] = "", warn[256];
    int rc = engine_create(&cfg, &e, err, sizeof err, warn, sizeof warn);
    engine_free(e);
    CHECK(rc != 0 && strstr(err, "513") && strstr(err, "512"),
          "a tokenizer of 513 tokens over 512 embedding rows is refused at load (%s)", err);
}

/* stories260K with the row of tensor name [row] (or all of it, row < 0) set to NaN. */
static const char *with_nan(const char *tensor, int row, int cols, const char *name) {
    ge_out o;
    ge_begin(&o, &src);
    ge_copy_kvs(&o, &src, NULL);
    ge_copy_tensors(&o, &src);
    ge_finish(&o, &src, 32);
    int ti = ge_find_tensor(&src, tensor);
    float *d = (float *)(o.p + o.data_off + ge_tensor_offset(&src, ti));   /* F32 tensors, 32-aligned */
    for (int i = 0; i < cols; i++) d[(size_t)(row < 0 ? 0 : row) * cols + i] = NAN;
    return ge_put_file(&o, tmpdir, name);
}

static void test_nonfinite(void) {
    char err[512], warn[256];
    engine *e = NULL;
    int32_t prompt[3] = { 1, 72, 300 }, gen[4];
    float gaps[4], *rows = NULL;
    size_t nr = 0;
    /* output_norm all NaN: every logit is NaN; before, argmax gave token 0 */
    const char *p = with_nan("output_norm.weight", -1, 64, "nan_norm.gguf");
    engine_config cfg = { p, KV_F16, KV_F16, 1, 64, 256, 0, 0, NULL, 0, 0, 0 };
    int rc = engine_create(&cfg, &e, err, sizeof err, warn, sizeof warn);
    CHECK(rc == 0, "the NaN model loads (%s)", rc ? err : "ok");
    if (rc) return;
    err[0] = 0;
    rc = engine_prefill(e, prompt, 3, ENGINE_ROWS_LAST, &rows, &nr, err, sizeof err);
    free(rows);
    rows = NULL;
    CHECK(rc != 0 && strstr(err, "non-finite") && e->n_past == 0 && !e->last_valid,
          "prefill with NaN logits is an error naming them, the state unchanged (n_past %d: %s)", e->n_past, err);
    err[0] = 0;
    rc = engine_prefill(e, prompt, 3, ENGINE_ROWS_ALL, &rows, &nr, err, sizeof err);
    free(rows);
    rows = NULL;
    CHECK(rc != 0 && strstr(err, "non-finite") && e->n_past == 0, "the same with every row (%s)", err);
    err[0] = 0;
    rc = engine_prefill(e, prompt, 3, ENGINE_ROWS_NONE, &rows, &nr, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "non-finite"), "and without rows (the last row is still computed: %s)", err);
    engine_free(e);
    e = NULL;

    /* the first greedy token's embedding NaN: the prompt is fine, the second step is not */
    snprintf(warn, sizeof warn, "%s/models/stories260K.gguf", fixtures());
    engine_config c0 = { warn, KV_F16, KV_F16, 1, 64, 256, 0, 0, NULL, 0, 0, 0 };
    char w2[256];
    if (engine_create(&c0, &e, err, sizeof err, w2, sizeof w2) ||
        engine_prefill(e, prompt, 3, ENGINE_ROWS_NONE, &rows, &nr, err, sizeof err) ||
        engine_generate(e, 1, 0, 0, gen, gaps, err, sizeof err)) {
        CHECK(0, "stories260K generates (%s)", err);
        engine_free(e);
        return;
    }
    engine_free(e);
    e = NULL;
    int t0 = gen[0];
    p = with_nan("token_embd.weight", t0, 64, "nan_emb.gguf");
    engine_config c1 = { p, KV_F16, KV_F16, 1, 64, 256, 0, 0, NULL, 0, 0, 0 };
    rc = engine_create(&c1, &e, err, sizeof err, w2, sizeof w2);
    if (!rc) rc = engine_prefill(e, prompt, 3, ENGINE_ROWS_NONE, &rows, &nr, err, sizeof err);
    CHECK(rc == 0, "with token %d's embedding NaN the prompt still prefills (%s)", t0, rc ? err : "ok");
    if (rc) { engine_free(e); return; }
    memset(gen, 0xff, sizeof gen);
    err[0] = 0;
    rc = engine_generate(e, 4, 0, 0, gen, gaps, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "non-finite"), "generate stops with an error at the NaN step instead of emitting "
          "token 0 (rc %d, tokens %d %d %d: %s)", rc, gen[0], gen[1], gen[2], err);
    engine_free(e);
}

static void test_memcheck(void) {
    char err[600];
    const uint64_t G = 1ull << 30;
    /* 4M tokens x 23040 bytes (SmolLM2, f16) = 90 GiB on a 24 GiB machine */
    engine_mem_need need = { .kv_per_token = 23040, .n_ctx = 1 << 22, .weights_bytes = 100u << 20, .scratch_bytes = 1u << 20,
                             .arms = 1 };
    engine_mem_env env = { 22 * G, UINT64_MAX, 1 * G };
    err[0] = 0;
    int rc = engine_mem_check(&need, &env, 0, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "90.0 GiB") && strstr(err, "MemAvailable") && strstr(err, "--max-context") &&
          strstr(err, "--allow-overcommit"), "a 90 GiB cache on 22 GiB is refused with the sizes and the ways out (%s)", err);
    long fit = 0;
    const char *at = strstr(err, "at most ");
    if (at) fit = strtol(at + 8, NULL, 10);
    CHECK(fit > 1000000 && fit < 1030000, "it says how many tokens fit (%ld; (22 GiB - weights) / 23040 ~ 1.02M)", fit);
    CHECK(engine_mem_check(&need, &env, 1, err, sizeof err) == 0, "--allow-overcommit lets it start");
    need.n_ctx = 1 << 18;   /* 5.6 GiB */
    CHECK(engine_mem_check(&need, &env, 0, err, sizeof err) == 0, "a 5.6 GiB cache fits in 22 GiB");
    need.arms = 4;
    err[0] = 0;
    rc = engine_mem_check(&need, &env, 0, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "4 workers"), "but not four of them (%s)", err);
    env.mem_available = 0;
    CHECK(engine_mem_check(&need, &env, 0, err, sizeof err) == 0, "MemAvailable unknown: no check");
    /* RLIMIT_AS: the whole reservation counts, and --allow-overcommit does not lift it */
    need.arms = 1;
    env = (engine_mem_env){ 22 * G, 4 * G, 1 * G };
    err[0] = 0;
    rc = engine_mem_check(&need, &env, 1, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "RLIMIT_AS"), "a reservation past RLIMIT_AS is refused even with overcommit (%s)", err);
    /* overflow: 2^31 tokens x 2^40 bytes per token must not wrap to something small */
    engine_mem_need huge = { .kv_per_token = 1ull << 40, .n_ctx = INT32_MAX, .arms = 1000 };
    env = (engine_mem_env){ 22 * G, UINT64_MAX, 1 * G };
    CHECK(engine_mem_check(&huge, &env, 0, err, sizeof err) != 0, "products that overflow 64 bits are still refused");
    /* weights copied per worker (the default) count once per arm, mapped ones once in all: 4 arms of a
     * 5 GiB model with 1 GiB caches fit in 22 GiB mapped (9 GiB), not copied (4 x 6 - 5 = 19 GiB + the
     * copy already made: refused at 16 GiB available) */
    engine_mem_need w = { .kv_per_token = 1024, .n_ctx = 1 << 20, .weights_bytes = 5 * G, .arms = 4 };
    env = (engine_mem_env){ 16 * G, UINT64_MAX, 1 * G };
    CHECK(engine_mem_check(&w, &env, 0, err, sizeof err) == 0, "4 arms mapping a 5 GiB model with 1 GiB caches fit in 16 GiB");
    w.weights_copied = 1;
    err[0] = 0;
    rc = engine_mem_check(&w, &env, 0, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "--mmap-weights") && strstr(err, "19.0 GiB"),
          "copied, the 3 other copies count: 19 GiB, refused, naming --mmap-weights (%s)", err);
    w.arms = 1;
    CHECK(engine_mem_check(&w, &env, 0, err, sizeof err) == 0, "one arm: its copy is already made, nothing more counts");

    /* through engine_create: stories260K at 2^30 tokens needs 640 GiB of f16 cache: refused before
     * reserving it (before the check, the 640 GiB reservation succeeded and the engine started) */
    char path[512], warn[256];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", fixtures());
    engine_config cfg = { path, KV_F16, KV_F16, 1, 64, 1 << 30, 0, 0, NULL, 0, 0, 0 };
    engine *e = NULL;
    err[0] = 0;
    rc = engine_create(&cfg, &e, err, sizeof err, warn, sizeof warn);
    engine_free(e);
    e = NULL;
    CHECK(rc != 0 && strstr(err, "640.0 GiB"), "engine_create at 2^30 tokens: refused (%s)", err);
    cfg.n_ctx = 1 << 16;
    engine_mem_opts opts = { 1000000, 0, 0 };   /* a million arms of 40 MiB each */
    err[0] = 0;
    rc = engine_create_mem(&cfg, &opts, &e, err, sizeof err, warn, sizeof warn);
    engine_free(e);
    e = NULL;
    CHECK(rc != 0 && strstr(err, "1000000 workers"), "the arms count multiplies the cache (%s)", err);
    opts.arms = 4;
    rc = engine_create_mem(&cfg, &opts, &e, err, sizeof err, warn, sizeof warn);
    engine_free(e);
    CHECK(rc == 0, "four arms of 40 MiB start (%s)", rc ? err : "ok");
}

int main(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", fixtures());
    snprintf(tmpdir, sizeof tmpdir, "/tmp/strata-harden-XXXXXX");
    if (ge_load(path, &src) || !mkdtemp(tmpdir)) {
        CHECK(0, "load %s and make a temp dir", path);
        return check_done();
    }
    test_gguf();
    test_gguf_copy();
    test_model_meta();
    test_moe_meta();
    test_gptoss_meta();
    test_qwen2moe_meta();
    test_hybrid_meta();
    test_vocab_size();
    test_nonfinite();
    test_memcheck();
    ge_free_src(&src);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) printf("# could not remove %s\n", tmpdir);
    return check_done();
}
