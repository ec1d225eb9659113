/* test_gguf_meta.c — issue 22's GGUF findings (Deliver 5, F6 and F10 on the worker side), each of
 * which failed before its fix:
 *   types: a present metadata key of the wrong type is an error naming the key, the expected and the
 *        found type, for every key strata reads (before: a string layer_norm_rms_epsilon was ignored
 *        and the default used); ranges: eps > 0, a bool is 0 or 1, token types 0 .. 6;
 *   names: general.architecture and the other names with NUL or control bytes are refused
 *        ("llama\0evil" ran as llama), and so are keys and tensor names holding them; the message
 *        shows them escaped;
 *   special token ids outside the vocabulary refused (bos 1000000 was ignored), LLAMA_TOKEN_NULL kept;
 *   tensors blk.N with N >= block_count refused (block_count 1 ran 1 of 5 layers);
 *   NaN / ±inf tokenizer scores refused;
 *   a model followed by 2 GiB of (sparse) zeros: only the model's bytes are copied and hashed;
 *   FIFOs as --model, --tokens-file (worker and driver) refused at once, not waited on;
 *   strings from a GGUF reach the terminal escaped (an architecture of ESC ] 0 ; … BEL ESC [ 2 J).
 * Crafted models are rewritten from the fixtures (tests/gguf_edit.h) into a temp dir. */
#include "tests/check.h"
#include "tests/proc.h"
#include "tests/gguf_edit.h"
#include "proto/tokfile.h"
#include "worker/gguf.h"
#include "worker/model.h"
#include "worker/tok.h"

#include <libgen.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[64], bindir[512];
static ge_src stories, qwen2, qwen35, gptoss, gemma3;

/* s with key replaced by (type, value bytes) (added when absent), written to tmpdir/name. */
static const char *with_raw(const ge_src *s, const char *key, uint32_t type, const void *val, size_t len, const char *name) {
    ge_out o;
    const char *skip[] = { key, NULL };
    ge_begin(&o, s);
    ge_copy_kvs(&o, s, skip);
    ge_kv_raw(&o, key, type, val, len);
    ge_copy_tensors(&o, s);
    ge_finish(&o, s, 32);
    return ge_put_file(&o, tmpdir, name);
}

static const char *with_str(const ge_src *s, const char *key, const char *v, size_t len, const char *name) {
    uint8_t buf[256];
    memcpy(buf, &(uint64_t){ len }, 8);
    memcpy(buf + 8, v, len);
    return with_raw(s, key, 8, buf, 8 + len, name);
}

/* What a worker reads before it serves: the model, then its tokenizer. 0, or -1 with err set. */
static int load_all(const char *path, char *err, size_t errlen) {
    model *m = NULL;
    tok_vocab *v = NULL;
    char warn[256];
    err[0] = 0;
    int rc = model_load(path, &m, err, errlen, warn, sizeof warn);
    if (!rc) rc = tok_load(m->g, &v, err, errlen);
    tok_free(v);
    model_free(m);
    return rc;
}

/* s holds a control byte other than the newlines that end lines */
static int has_control(const char *s) {
    for (; *s; s++)
        if (((unsigned char)*s < 0x20 && *s != '\n') || *s == 0x7f) return 1;
    return 0;
}

/* ---- types ------------------------------------------------------------------------------------ */

static void test_types(void) {
    static const uint8_t str1[] = { 1, 0, 0, 0, 0, 0, 0, 0, '1' };   /* the string "1" */
    static const uint32_t u7 = 7;
    float f4[4] = { 1, 2, 3, 4 };
    uint8_t farr[12 + 16];                                          /* an array of 4 f32 */
    memcpy(farr, &(uint32_t){ 6 }, 4);
    memcpy(farr + 4, &(uint64_t){ 4 }, 8);
    memcpy(farr + 12, f4, 16);
    uint8_t iarr[12 + 8];                                           /* an array of 2 i32 */
    memcpy(iarr, &(uint32_t){ 5 }, 4);
    memcpy(iarr + 4, &(uint64_t){ 2 }, 8);
    memset(iarr + 12, 0, 8);
    enum { STR, U32, FARR, IARR };
    static const struct { const ge_src *src; const char *key; int kind; } cases[] = {
        /* integers and floats given the string "1" */
        { &stories, "llama.block_count", STR }, { &stories, "llama.embedding_length", STR },
        { &stories, "llama.attention.head_count", STR }, { &stories, "llama.feed_forward_length", STR },
        { &stories, "llama.context_length", STR }, { &stories, "llama.attention.head_count_kv", STR },
        { &stories, "llama.attention.key_length", STR }, { &stories, "llama.attention.value_length", STR },
        { &stories, "llama.rope.dimension_count", STR }, { &stories, "llama.attention.layer_norm_rms_epsilon", STR },
        { &stories, "llama.rope.freq_base", STR }, { &stories, "llama.rope.scaling.attn_factor", STR },
        { &stories, "llama.rope.scaling.factor", STR }, { &stories, "llama.rope.scale_linear", STR },
        { &qwen2, "qwen2.rope.scaling.original_context_length", STR },
        { &stories, "tokenizer.ggml.bos_token_id", STR }, { &stories, "tokenizer.ggml.eos_token_id", STR },
        { &stories, "tokenizer.ggml.unknown_token_id", STR }, { &stories, "tokenizer.ggml.padding_token_id", STR },
        { &qwen2, "tokenizer.ggml.add_bos_token", STR }, { &qwen2, "tokenizer.ggml.add_eos_token", STR },
        { &stories, "tokenizer.ggml.add_space_prefix", STR },
        { &gptoss, "gpt-oss.expert_count", STR }, { &gptoss, "gpt-oss.expert_used_count", STR },
        { &gptoss, "gpt-oss.expert_feed_forward_length", STR }, { &gptoss, "gpt-oss.attention.sliding_window", STR },
        { &gptoss, "gpt-oss.attention.sliding_window_pattern", STR }, { &gptoss, "gpt-oss.rope.freq_base_swa", STR },
        { &gemma3, "gemma3.attention.sliding_window", STR },
        { &qwen35, "qwen35.ssm.conv_kernel", STR }, { &qwen35, "qwen35.ssm.inner_size", STR },
        { &qwen35, "qwen35.full_attention_interval", STR }, { &qwen35, "qwen35.nextn_predict_layers", STR },
        /* strings given a u32 */
        { &stories, "general.architecture", U32 }, { &stories, "tokenizer.ggml.model", U32 },
        { &qwen2, "tokenizer.ggml.pre", U32 }, { &stories, "llama.rope.scaling.type", U32 },
        { &stories, "tokenizer.chat_template", U32 },
        /* arrays given a string or the wrong element type */
        { &stories, "tokenizer.ggml.tokens", STR }, { &stories, "tokenizer.ggml.scores", IARR },
        { &stories, "tokenizer.ggml.token_type", FARR }, { &qwen2, "tokenizer.ggml.merges", FARR },
        { &qwen35, "qwen35.rope.dimension_sections", FARR }, { &qwen35, "qwen35.attention.recurrent_layers", FARR },
        { &gptoss, "gpt-oss.attention.sliding_window_pattern", FARR },
        { &stories, "general.alignment", STR },
    };
    static const char *const found[] = { "found string", "found u32", "found array of f32", "found array of i32" };
    int n_ok = 0, n = (int)(sizeof cases / sizeof cases[0]);
    char err[512];
    for (int i = 0; i < n; i++) {
        const void *val = cases[i].kind == STR ? (const void *)str1 : cases[i].kind == U32 ? (const void *)&u7
                        : cases[i].kind == FARR ? (const void *)farr : (const void *)iarr;
        size_t len = cases[i].kind == STR ? sizeof str1 : cases[i].kind == U32 ? 4 : cases[i].kind == FARR ? sizeof farr : sizeof iarr;
        uint32_t type = cases[i].kind == STR ? 8 : cases[i].kind == U32 ? 4 : 9;
        const char *p = with_raw(cases[i].src, cases[i].key, type, val, len, "type.gguf");
        int rc = load_all(p, err, sizeof err);
        int ok = rc != 0 && strstr(err, cases[i].key) && strstr(err, "expected") && strstr(err, found[cases[i].kind]);
        if (!ok) printf("# %s as %s: %s\n", cases[i].key, found[cases[i].kind] + 6, rc ? err : "loaded");
        n_ok += ok;
    }
    CHECK(n_ok == n, "%d of %d metadata keys of the wrong type are refused naming the key, 'expected' and the "
          "found type (e.g. a string layer_norm_rms_epsilon)", n_ok, n);
    const char *p = with_raw(&stories, "llama.attention.layer_norm_rms_epsilon", 8, str1, sizeof str1, "eps_str.gguf");
    load_all(p, err, sizeof err);
    CHECK(strstr(err, "metadata llama.attention.layer_norm_rms_epsilon: expected a float, found string") != NULL,
          "one message: '%s'", err);

    /* ranges */
    float zero = 0.0f, nanf_ = NAN;
    p = with_raw(&stories, "llama.attention.layer_norm_rms_epsilon", 6, &zero, 4, "eps0.gguf");
    CHECK(load_all(p, err, sizeof err) != 0 && strstr(err, "layer_norm_rms_epsilon"), "eps 0 is refused (%s)", err);
    p = with_raw(&stories, "llama.attention.layer_norm_rms_epsilon", 6, &nanf_, 4, "epsnan.gguf");
    CHECK(load_all(p, err, sizeof err) != 0 && strstr(err, "layer_norm_rms_epsilon"), "eps NaN is refused (%s)", err);
    uint8_t two = 2;
    p = with_raw(&qwen2, "tokenizer.ggml.add_bos_token", 7, &two, 1, "bool2.gguf");
    CHECK(load_all(p, err, sizeof err) != 0 && strstr(err, "add_bos_token"), "a bool holding 2 is refused (%s)", err);
    uint64_t big = UINT64_MAX;
    p = with_raw(&stories, "llama.context_length", 10, &big, 8, "ctx64.gguf");
    CHECK(load_all(p, err, sizeof err) != 0 && strstr(err, "llama.context_length"), "a u64 context_length of "
          "2^64-1 is refused (%s)", err);
}

/* ---- names ------------------------------------------------------------------------------------ */

static void test_names(void) {
    char err[512];
    const char *p = with_str(&stories, "general.architecture", "llama\0evil", 10, "nul.gguf");
    int rc = load_all(p, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "general.architecture") && strstr(err, "llama\\x00evil"),
          "general.architecture \"llama\\0evil\" is refused, shown escaped (%s)", rc ? err : "it ran as llama");
    static const char osc[] = "\x1b]0;pwned\x07\x1b[2J";
    p = with_str(&stories, "general.architecture", osc, sizeof osc - 1, "osc.gguf");
    rc = load_all(p, err, sizeof err);
    CHECK(rc != 0 && !has_control(err) && strstr(err, "\\x1b]0;pwned\\x07\\x1b[2J"),
          "an architecture of terminal escapes is refused and its message holds no control byte (%s)", err);
    p = with_str(&stories, "tokenizer.ggml.model", "llama\0", 6, "tokmodel.gguf");
    rc = load_all(p, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "tokenizer.ggml.model"), "tokenizer.ggml.model \"llama\\0\" is refused (%s)", err);
    p = with_str(&qwen2, "tokenizer.ggml.pre", "gpt-2\x1b[2J", 9, "pre.gguf");
    rc = load_all(p, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "tokenizer.ggml.pre") && strstr(err, "gpt-2\\x1b[2J") && !has_control(err),
          "tokenizer.ggml.pre \"gpt-2 ESC [2J\" is refused, shown escaped (%s)", err);
    p = with_str(&stories, "llama.rope.scaling.type", "none\0linear", 11, "stype.gguf");
    rc = load_all(p, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "rope.scaling.type"), "rope.scaling.type \"none\\0linear\" is refused (%s)", err);

    /* a key "llama.block_count\0junk": looked up as llama.block_count before */
    ge_out o;
    const char *skip[] = { "llama.block_count", NULL };
    ge_begin(&o, &stories);
    ge_copy_kvs(&o, &stories, skip);
    ge_copy_kv_as(&o, &stories, ge_find_kv(&stories, "llama.block_count"), "llama.block_count\0junk", 22);
    ge_copy_tensors(&o, &stories);
    ge_finish(&o, &stories, 32);
    p = ge_put_file(&o, tmpdir, "nulkey.gguf");
    gguf_file *g = NULL;
    rc = gguf_open(p, &g, err, sizeof err);
    gguf_close(g);
    CHECK(rc != 0 && strstr(err, "llama.block_count\\x00junk"), "a metadata key with a NUL is refused, shown escaped (%s)",
          rc ? err : "opened");
    /* a tensor name with ESC [ 2 J */
    int ti = ge_find_tensor(&stories, "output_norm.weight");
    ge_begin(&o, &stories);
    ge_copy_kvs(&o, &stories, NULL);
    for (int i = 0; i < stories.n_t; i++)
        if (i == ti) ge_copy_tensor_as(&o, &stories, i, "output_norm.weight\x1b[2J", 22);
        else ge_copy_tensor(&o, &stories, i);
    ge_finish(&o, &stories, 32);
    p = ge_put_file(&o, tmpdir, "esctensor.gguf");
    g = NULL;
    rc = gguf_open(p, &g, err, sizeof err);
    gguf_close(g);
    CHECK(rc != 0 && !has_control(err) && strstr(err, "output_norm.weight\\x1b[2J"),
          "a tensor name with control bytes is refused, shown escaped (%s)", rc ? err : "opened");
}

/* ---- token ids, blocks, scores ---------------------------------------------------------------- */

/* stories260K with its tokenizer.ggml.scores entry (or token_type) changed at index i. */
static const char *with_array_entry(const char *key, int i, const void *v, const char *name) {
    int k = ge_find_kv(&stories, key);
    uint32_t t;
    const uint8_t *val = ge_kv_value(&stories, k, &t);
    size_t len = ge_value_len(val, t);
    uint8_t *buf = malloc(len);
    memcpy(buf, val, len);
    memcpy(buf + 12 + 4 * (size_t)i, v, 4);
    const char *p = with_raw(&stories, key, t, buf, len, name);
    free(buf);
    return p;
}

static void test_ids_blocks_scores(void) {
    char err[512];
    const char *p = with_raw(&stories, "tokenizer.ggml.bos_token_id", 4, &(uint32_t){ 1000000 }, 4, "bos.gguf");
    int rc = load_all(p, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "bos_token_id") && strstr(err, "1000000") && strstr(err, "vocabulary"),
          "bos_token_id 1000000 (vocabulary 512) is refused (%s)", rc ? err : "ignored");
    p = with_raw(&stories, "tokenizer.ggml.padding_token_id", 4, &(uint32_t){ 512 }, 4, "pad.gguf");
    rc = load_all(p, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "padding_token_id"), "padding_token_id 512 is refused (%s)", rc ? err : "ignored");
    p = with_raw(&stories, "tokenizer.ggml.eos_token_id", 5, &(int32_t){ -1 }, 4, "eosnone.gguf");
    rc = load_all(p, err, sizeof err);
    CHECK(rc == 0, "eos_token_id -1 (none, as llama.cpp writes it) still loads (%s)", rc ? err : "ok");

    /* stories260K has 5 blocks */
    p = with_raw(&stories, "llama.block_count", 4, &(uint32_t){ 1 }, 4, "blocks1.gguf");
    rc = load_all(p, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "blk.1.") && strstr(err, "block_count is 1"),
          "block_count 1 in a 5-block file is refused naming a tensor of block 1 (%s)", rc ? err : "ran 1 layer");
    p = with_raw(&stories, "llama.block_count", 4, &(uint32_t){ 4 }, 4, "blocks4.gguf");
    rc = load_all(p, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "blk.4."), "block_count 4: refused naming block 4 (%s)", rc ? err : "ran 4 layers");

    float bad[3] = { NAN, INFINITY, -INFINITY };
    int idx[3] = { 7, 100, 511 };
    for (int i = 0; i < 3; i++) {
        p = with_array_entry("tokenizer.ggml.scores", idx[i], &bad[i], "score.gguf");
        rc = load_all(p, err, sizeof err);
        char want[48];
        snprintf(want, sizeof want, "scores[%d]", idx[i]);
        CHECK(rc != 0 && strstr(err, want), "a score of %g at token %d is refused (%s)", bad[i], idx[i], rc ? err : "accepted");
    }
    p = with_array_entry("tokenizer.ggml.token_type", 9, &(int32_t){ 9 }, "ttype.gguf");
    rc = load_all(p, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "token_type[9]"), "token type 9 is refused (%s)", rc ? err : "accepted");
}

/* ---- bytes past the last tensor --------------------------------------------------------------- */

static void test_tail(void) {
    char path[160], orig[160], err[512], warn[256];
    snprintf(orig, sizeof orig, "tests/fixtures/models/stories260K.gguf");
    snprintf(path, sizeof path, "%s/tail.gguf", tmpdir);
    ge_out o;
    ge_begin(&o, &stories);
    ge_copy_kvs(&o, &stories, NULL);
    ge_copy_tensors(&o, &stories);
    ge_finish(&o, &stories, 32);
    size_t n = o.n;
    ge_put_file(&o, tmpdir, "tail.gguf");
    const off_t tail = (off_t)2 << 30;
    CHECK(truncate(path, (off_t)n + tail) == 0, "a model followed by 2 GiB of sparse zeros (%zu + 2^31 bytes)", n);
    gguf_file *g = NULL;
    double t0 = clock_s();
    int rc = gguf_open_as(path, GGUF_HOLD_COPY, &g, err, sizeof err);
    double dt = clock_s() - t0;
    struct stat st;
    CHECK(rc == 0 && !stat(path, &st) && g->size == n && g->own_size <= n + ((size_t)4 << 20),
          "copied: %zu bytes in use of a %lld-byte file, %zu bytes mapped, in %.2f s (the model's, not the zeros)",
          rc ? 0 : g->size, (long long)st.st_size, rc ? 0 : g->own_size, dt);
    gguf_close(g);
    g = NULL;
    rc = gguf_open_as(path, GGUF_HOLD_MAP, &g, err, sizeof err);
    CHECK(rc == 0 && g->size == n, "mapped: %zu bytes in use", rc ? 0 : g->size);
    gguf_close(g);
    model *a = NULL, *b = NULL;
    rc = model_load_as(path, GGUF_HOLD_COPY, &a, err, sizeof err, warn, sizeof warn) ||
         model_load_as(orig, GGUF_HOLD_COPY, &b, err, sizeof err, warn, sizeof warn);
    CHECK(rc == 0 && !strcmp(a->sha256, b->sha256), "its sha256 is the model's (%s)", rc ? err : a->sha256);
    model_free(a);
    model_free(b);
    /* the worker: the copy's peak RSS stays far below the 2 GiB */
    char cmd[2048], line[1024], out[200];
    snprintf(out, sizeof out, "%s/tail.err", tmpdir);
    snprintf(cmd, sizeof cmd, "timeout 60 %s/strata-worker --model %s --prompt 'Once upon' --max-new 2 --threads 1 "
             "--timing >/dev/null 2>%s", bindir, path, out);
    int rc_w = system(cmd);
    unsigned long long rss = 0;
    FILE *f = fopen(out, "r");
    while (f && fgets(line, sizeof line, f)) {
        char *q = strstr(line, "peak_rss=");
        if (q) rss = strtoull(q + 9, NULL, 10);
    }
    if (f) fclose(f);
    CHECK(rc_w == 0 && rss > 0 && rss < (256ull << 20), "strata-worker --timing on it: exit %d, peak_rss %llu MB (< 256)",
          rc_w, rss >> 20);
    unlink(path);

    /* a header over the first 4 MiB read (a 9 MB string): read on until it parses, the same as mapped */
    size_t big = 9u << 20;
    char *s = malloc(big);
    memset(s, 'a', big);
    ge_begin(&o, &stories);
    ge_copy_kvs(&o, &stories, NULL);
    ge_kv_str(&o, "strata.test.padding", s, big);
    ge_copy_tensors(&o, &stories);
    ge_finish(&o, &stories, 32);
    free(s);
    n = o.n;
    ge_put_file(&o, tmpdir, "bighead.gguf");
    snprintf(path, sizeof path, "%s/bighead.gguf", tmpdir);
    rc = truncate(path, (off_t)n + tail);
    gguf_file *c = NULL;
    g = NULL;
    rc = rc || gguf_open_as(path, GGUF_HOLD_COPY, &c, err, sizeof err) || gguf_open_as(path, GGUF_HOLD_MAP, &g, err, sizeof err);
    CHECK(rc == 0 && c->size == n && g->size == n && memcmp(c->base, g->base, n) == 0 && c->own_size <= n + ((size_t)4 << 20),
          "a 9 MB header: copied in pieces, %zu bytes, equal to the mapping (%s)", rc ? 0 : c->size, rc ? err : "ok");
    gguf_close(c);
    gguf_close(g);
    unlink(path);
}

/* ---- FIFOs and the terminal ------------------------------------------------------------------- */

static void on_alarm(int sig) {   /* the test is over: an open blocked */
    (void)sig;
    CHECK(0, "an open waited on a FIFO (alarm after 10 s)");
    _exit(check_done());
}

/* Runs cmd (a shell line) with stderr to tmpdir/cmd.err; returns its exit status, *err its stderr. */
static int run(const char *cmd, char *errout, size_t errlen) {
    char line[2400], path[160];
    snprintf(path, sizeof path, "%s/cmd.err", tmpdir);
    snprintf(line, sizeof line, "timeout 20 %s >/dev/null 2>%s", cmd, path);
    int st = system(line);
    errout[0] = 0;
    FILE *f = fopen(path, "r");
    if (f) {
        size_t k = fread(errout, 1, errlen - 1, f);
        while (k > 0 && errout[k - 1] == '\n') k--;
        errout[k] = 0;
        fclose(f);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void test_fifo_and_terminal(void) {
    char fifo[160], err[2048], cmd[2048];
    snprintf(fifo, sizeof fifo, "%s/fifo", tmpdir);
    if (mkfifo(fifo, 0600)) { CHECK(0, "mkfifo %s", fifo); return; }
    signal(SIGALRM, on_alarm);
    alarm(10);
    gguf_file *g = NULL;
    int rc = gguf_open_as(fifo, GGUF_HOLD_COPY, &g, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "FIFO"), "gguf_open_as on a FIFO is refused at once (%s)", err);
    int32_t *ids = NULL;
    size_t n = 0;
    rc = tokfile_read(fifo, &ids, &n, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "FIFO"), "tokfile_read on a FIFO is refused at once (%s)", err);
    free(ids);
    alarm(0);
    const char *model = "tests/fixtures/models/stories260K.gguf";
    snprintf(cmd, sizeof cmd, "%s/strata-worker --model %s --prompt hi", bindir, fifo);
    rc = run(cmd, err, sizeof err);
    CHECK(rc == 1 && strstr(err, "FIFO"), "strata-worker --model FIFO: exit %d at once (%.200s)", rc, err);
    snprintf(cmd, sizeof cmd, "%s/strata-worker --model %s --tokens-file %s", bindir, model, fifo);
    rc = run(cmd, err, sizeof err);
    CHECK(rc == 1 && strstr(err, "FIFO"), "strata-worker --tokens-file FIFO: exit %d at once (%.200s)", rc, err);
    snprintf(cmd, sizeof cmd, "%s/strata-driver sweep --model %s --arms f16,int8 --tokens-file /dev/null --out %s/o1 --quiet",
             bindir, fifo, tmpdir);
    rc = run(cmd, err, sizeof err);
    CHECK(rc != 0 && rc != 124 && strstr(err, "FIFO"), "strata-driver sweep --model FIFO: exit %d at once (%.200s)", rc, err);
    snprintf(cmd, sizeof cmd, "%s/strata-driver sweep --model %s --arms f16,int8 --tokens-file %s --out %s/o2 --quiet",
             bindir, model, fifo, tmpdir);
    rc = run(cmd, err, sizeof err);
    CHECK(rc != 0 && rc != 124 && strstr(err, "FIFO"), "strata-driver sweep --tokens-file FIFO: exit %d at once (%.200s)", rc, err);
    unlink(fifo);

    /* F10: the worker's stderr carries no raw escape from the file */
    static const char osc[] = "\x1b]0;pwned\x07\x1b[2J";
    const char *p = with_str(&stories, "general.architecture", osc, sizeof osc - 1, "osc.gguf");
    snprintf(cmd, sizeof cmd, "%s/strata-worker --model %s --prompt hi", bindir, p);
    rc = run(cmd, err, sizeof err);
    CHECK(rc == 1 && !has_control(err) && strstr(err, "\\x1b"),
          "strata-worker on an architecture of terminal escapes: exit %d, stderr escaped (%s)", rc, err);
    p = with_str(&stories, "tokenizer.ggml.model", osc, sizeof osc - 1, "osctok.gguf");
    snprintf(cmd, sizeof cmd, "echo hi | %s/strata-worker --model %s --tokenize", bindir, p);
    rc = run(cmd, err, sizeof err);
    CHECK(rc == 1 && !has_control(err) && strstr(err, "\\x1b"),
          "strata-worker --tokenize on a tokenizer model of escapes: exit %d, stderr escaped (%s)", rc, err);
}

int main(int argc, char **argv) {
    (void)argc;
    char self[1024];
    snprintf(self, sizeof self, "%s", argv[0]);
    const char *b = getenv("STRATA_TEST_BIN");   /* where strata-worker and strata-driver are */
    if (b) snprintf(bindir, sizeof bindir, "%s", b);
    else snprintf(bindir, sizeof bindir, "%s/..", dirname(self));
    snprintf(tmpdir, sizeof tmpdir, "/tmp/strata-ggufmeta-XXXXXX");
    if (ge_load("tests/fixtures/models/stories260K.gguf", &stories) || ge_load("tests/fixtures/models/rand-qwen2-yarn.gguf", &qwen2) ||
        ge_load("tests/fixtures/models/rand-qwen35.gguf", &qwen35) || ge_load("tests/fixtures/models/rand-gptoss.gguf", &gptoss) ||
        ge_load("tests/fixtures/models/rand-gemma3.gguf", &gemma3) || !mkdtemp(tmpdir)) {
        CHECK(0, "load the fixtures and make a temp dir");
        return check_done();
    }
    test_types();
    test_names();
    test_ids_blocks_scores();
    test_tail();
    test_fifo_and_terminal();
    ge_free_src(&stories);
    ge_free_src(&qwen2);
    ge_free_src(&qwen35);
    ge_free_src(&gptoss);
    ge_free_src(&gemma3);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) printf("# could not remove %s\n", tmpdir);
    return check_done();
}
