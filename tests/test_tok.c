/* test_tok.c — tokenizers against llama.cpp's reference data.
 *
 *   - llama.cpp's test-tokenizer-0 suites (ggml-vocab-*.gguf with .inp/.out): every case exactly,
 *     tokenised as that test does (no BOS, special tokens not parsed);
 *   - the pre-tokenizers without such a suite (gpt-4o = o200k, qwen35): the GPT-2 vocabulary with
 *     its tokenizer.ggml.pre replaced (made here with tests/gguf_edit.h), against llama.cpp's ids
 *     for the same variant (tests/ref/make_pretok_fixtures.py: pre-<name>.inp/.out);
 *   - round trips decode(encode(text)) == text (SPM: with the added leading space);
 *   - stories260K: a.txt and d.txt against the token ids llama.cpp stored in a/d.logits.gguf;
 *   - bad input (invalid UTF-8, empty text, 1 MB texts), special-token handling, decoding of byte
 *     and control tokens, the vocab hash, load errors;
 *   - speed on 1 MB of English prose (printed; checked only against a generous bound).
 * Data comes from tests/fixtures (tokenizer/, stories260K/, models/: see its README); the real
 * models from $STRATA_CACHE (make test fetches them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/check.h"
#include "tests/proc.h"
#include "tests/gguf_edit.h"
#include "worker/gguf.h"
#include "worker/tok.h"

/* Reads a whole file into a new malloc'd buffer (NUL-terminated); NULL if unreadable. */
static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            cap = 2 * cap + 65536 + 1;
            char *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); return NULL; }
            buf = nb;
        }
        size_t k = fread(buf + n, 1, cap - n - 1, f);
        n += k;
        if (k == 0) break;
    }
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}

/* Concatenates the decoded pieces of ids[n] into a new malloc'd buffer of *len bytes. */
static char *detok(const tok_vocab *v, const int32_t *ids, size_t n, size_t *len) {
    size_t cap = n * tok_max_piece(v) + 1;
    char *buf = malloc(cap);
    *len = 0;
    if (!buf) return NULL;
    for (size_t i = 0; i < n; i++)
        if (tok_decode(v, ids[i], buf, cap, len) != 0) { free(buf); return NULL; }
    return buf;
}

/* SPM writes ' ' as U+2581 '▁' before merging, and a '▁' that ends up in byte tokens decodes as its
 * three bytes: SPM round trips hold up to '▁' == ' '. Returns a malloc'd copy with every '▁' -> ' '. */
static char *spm_norm(const char *s, size_t n, size_t *len) {
    char *o = malloc(n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        if (i + 3 <= n && memcmp(s + i, "\xE2\x96\x81", 3) == 0) { o[k++] = ' '; i += 3; }
        else o[k++] = s[i++];
    }
    *len = k;
    return o;
}

/* a[na] == b[nb] once both are spm_norm'ed */
static int spm_same(const char *a, size_t na, const char *b, size_t nb) {
    size_t la, lb;
    char *x = spm_norm(a, na, &la), *y = spm_norm(b, nb, &lb);
    int same = la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

static int same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

static void print_ids(const char *what, const int32_t *ids, size_t n) {
    printf("    %s (%zu):", what, n);
    for (size_t i = 0; i < n && i < 64; i++) printf(" %d", ids[i]);
    printf("%s\n", n > 64 ? " ..." : "");
}

static tok_vocab *load_vocab(const char *path) {
    gguf_file *g;
    tok_vocab *v = NULL;
    char err[256];
    if (gguf_open(path, &g, err, sizeof err)) { printf("    %s\n", err); return NULL; }
    if (tok_load(g, &v, err, sizeof err)) printf("    %s\n", err);
    gguf_close(g);
    return v;
}

/* One llama.cpp suite: cases of .inp split on "\n__ggml_vocab_test__\n" (the text after the last
 * separator, empty in these files, is not a case), expected ids one line each in .out. */
static void run_suite_files(const char *name, const char *path, const char *pin, const char *pout, int spm,
                            int add_bos, int parse_special, int min_cases);

static void run_suite(const char *fix, const char *name, int spm) {
    char path[512], pin[600], pout[600];
    snprintf(path, sizeof path, "%s/tokenizer/ggml-vocab-%s.gguf", fix, name);
    snprintf(pin, sizeof pin, "%s.inp", path);
    snprintf(pout, sizeof pout, "%s.out", path);
    run_suite_files(name, path, pin, pout, spm, 0, 0, 40);
}

/* The GPT-2 vocabulary with tokenizer.ggml.pre = pre, against llama.cpp's ids for it. */
static void run_pre_suite(const char *fix, const char *pre) {
    char base[512], path[600], pin[600], pout[600], label[64];
    snprintf(base, sizeof base, "%s/tokenizer/ggml-vocab-gpt-2.gguf", fix);
    snprintf(path, sizeof path, "%s/strata-test-tok-pre-%d.gguf", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    ge_src s;
    if (ge_load(base, &s)) { CHECK(0, "load %s", base); return; }
    ge_out o;
    const char *skip[] = { "tokenizer.ggml.pre", NULL };
    uint8_t val[8 + 64];                   /* a GGUF string: u64 length, the bytes */
    uint64_t n = strlen(pre);
    memcpy(val, &n, 8);
    memcpy(val + 8, pre, n);
    ge_begin(&o, &s);
    ge_copy_kvs(&o, &s, skip);
    ge_kv_raw(&o, "tokenizer.ggml.pre", 8, val, 8 + n);
    ge_copy_tensors(&o, &s);
    ge_finish(&o, &s, 32);
    int wr = ge_write(&o, path);
    ge_free_out(&o);
    ge_free_src(&s);
    CHECK(wr == 0, "pre %s: the variant vocabulary is written (%s)", pre, path);
    if (wr) return;
    snprintf(pin, sizeof pin, "%s/tokenizer/pre-%s.inp", fix, pre);
    snprintf(pout, sizeof pout, "%s/tokenizer/pre-%s.out", fix, pre);
    snprintf(label, sizeof label, "pre %s", pre);
    run_suite_files(label, path, pin, pout, 0, 0, 0, 50);
    remove(path);
}

/* llama.cpp's tokens for >= 50 KB of mixed text on a real model (tests/ref/make_tok_fixtures.py):
 * the plain cases (no BOS, specials as text) and the special cases (model's BOS, specials parsed). */
static void run_model_suite(const char *cache, const char *key, const char *file, int spm) {
    char path[512], pin[600], pout[600], label[96];
    snprintf(path, sizeof path, "%s/%s", cache, file);
    FILE *f = fopen(path, "rb");
    if (!f) { printf("    (skipped %s: %s not present; run make models)\n", key, path); return; }
    fclose(f);
    snprintf(pin, sizeof pin, "tests/fixtures/tok/%s.txt", key);
    snprintf(pout, sizeof pout, "tests/fixtures/tok/%s.ids", key);
    run_suite_files(key, path, pin, pout, spm, 0, 0, 40);
    snprintf(pin, sizeof pin, "tests/fixtures/tok/%s.special.txt", key);
    snprintf(pout, sizeof pout, "tests/fixtures/tok/%s.special.ids", key);
    snprintf(label, sizeof label, "%s special", key);
    run_suite_files(label, path, pin, pout, spm, 1, 1, 3);
}

static void run_suite_files(const char *name, const char *path, const char *pin, const char *pout, int spm,
                            int add_bos, int parse_special, int min_cases) {
    tok_vocab *v = load_vocab(path);
    size_t lin = 0, lout = 0;
    char *inp = read_file(pin, &lin), *outp = read_file(pout, &lout);
    CHECK(v && inp && outp, "%s: vocab and suite files load", name);
    if (!v || !inp || !outp) goto done;

    const char *sep = "\n__ggml_vocab_test__\n";
    size_t seplen = strlen(sep);
    static const char *cases[4096];
    static size_t case_len[4096];
    size_t n_cases = 0;
    for (size_t pos = 0; pos < lin && n_cases < 4096;) {
        const char *next = strstr(inp + pos, sep);
        size_t end = next ? (size_t)(next - inp) : lin;
        cases[n_cases] = inp + pos;
        case_len[n_cases++] = end - pos;
        if (!next) break;
        pos = end + seplen;
    }
    static char *lines[4096];
    size_t n_lines = 0;
    for (char *p = outp; *p && n_lines < 4096;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        lines[n_lines++] = p;
        if (!nl) break;
        p = nl + 1;
    }
    CHECK(n_cases == n_lines && (int)n_cases >= min_cases, "%s: %zu cases, %zu expected lines", name, n_cases, n_lines);
    if (n_cases != n_lines) goto done;

    int n_trip_bad = 0;
    for (size_t c = 0; c < n_cases; c++) {
        static int32_t want[1 << 16];
        size_t n_want = 0;
        for (char *p = lines[c]; *p && n_want < (1 << 16);) {
            char *e;
            long x = strtol(p, &e, 10);
            if (e == p) break;
            want[n_want++] = (int32_t)x;
            p = e;
        }
        int32_t *got = NULL;
        size_t n_got = 0;
        char err[256];
        int rc = tok_encode(v, cases[c], case_len[c], add_bos, parse_special, &got, &n_got, err, sizeof err);
        int ok = rc == 0 && same_ids(got, n_got, want, n_want);
        CHECK(ok, "%s case %zu (%zu bytes) -> %zu tokens as llama.cpp", name, c, case_len[c], n_want);
        if (!ok) {
            printf("    text: '%.*s'\n", (int)case_len[c], cases[c]);
            print_ids("expected", want, n_want);
            print_ids("got", got, n_got);
        }
        /* round trip: lossless except SPM's added leading space */
        if (add_bos || parse_special) { free(got); continue; }   /* round trip: plain cases only */
        size_t dl;
        char *d = detok(v, got, n_got, &dl);
        size_t pre = (spm && case_len[c] > 0) ? 1 : 0;
        if (!d || dl != case_len[c] + pre || (pre && d[0] != ' ') || memcmp(d + pre, cases[c], case_len[c]) != 0) {
            n_trip_bad++;
            printf("    round trip of case %zu gave '%.*s'\n", c, d ? (int)dl : 0, d ? d : "");
        }
        free(d);
        free(got);
    }
    CHECK(n_trip_bad == 0, "%s: decode(encode(text)) == %stext for all %zu cases (%d differ)", name,
          spm ? "' ' + " : "", n_cases, n_trip_bad);
done:
    free(inp);
    free(outp);
    tok_free(v);
}

/* stories260K: text file tokenised with BOS against the `tokens` tensor llama.cpp wrote. */
static void run_stories(const char *fix, const tok_vocab *v, const char *which) {
    char ptxt[512], pref[512], err[256];
    snprintf(ptxt, sizeof ptxt, "%s/stories260K/%s.txt", fix, which);
    snprintf(pref, sizeof pref, "%s/stories260K/%s.logits.gguf", fix, which);
    size_t len = 0;
    char *text = read_file(ptxt, &len);
    gguf_file *g = NULL;
    if (!text || gguf_open(pref, &g, err, sizeof err)) {
        CHECK(0, "stories260K %s: reference files load", which);
        free(text);
        return;
    }
    const gguf_tensor *t = gguf_tensor_find(g, "tokens");
    CHECK(t && t->type == GGUF_T_I32 && t->n_dims == 1, "stories260K %s: reference has an int32 tokens tensor", which);
    if (t && t->type == GGUF_T_I32) {
        size_t n_ref = (size_t)t->ne[0];
        int32_t *ref = malloc(n_ref * sizeof *ref + 1);
        memcpy(ref, t->data, n_ref * sizeof *ref);
        /* llama.cpp read the file as its -f option does: one trailing newline dropped */
        size_t used = len > 0 && text[len - 1] == '\n' ? len - 1 : len;
        int32_t *got = NULL;
        size_t n_got = 0;
        int rc = tok_encode(v, text, used, 1, 0, &got, &n_got, err, sizeof err);
        int ok = rc == 0 && same_ids(got, n_got, ref, n_ref);
        CHECK(ok, "stories260K %s.txt (%zu bytes, %zu without its last newline) -> the %zu tokens llama.cpp used",
              which, len, used, n_ref);
        if (!ok) { print_ids("expected", ref, n_ref); print_ids("got", got, n_got); }
        CHECK(n_got > 0 && got[0] == tok_bos(v), "stories260K %s: starts with BOS %d", which, tok_bos(v));
        free(got);
        /* the whole file: the same tokens plus one <0x0A> (13) -- the dropped newline is all that differs */
        rc = tok_encode(v, text, len, 1, 0, &got, &n_got, err, sizeof err);
        CHECK(rc == 0 && used == len - 1 && n_got == n_ref + 1 && same_ids(got, n_ref, ref, n_ref) && got[n_ref] == 13,
              "stories260K %s: the full file gives the reference tokens + 13 ('\\n')", which);
        free(got);
        free(ref);
    }
    gguf_close(g);
    free(text);
}

/* Invalid UTF-8 through every kind of tokenizer: no crash, and the documented result. */
static void run_bad_input(const tok_vocab *spm, const tok_vocab *bpe) {
    /* ff: invalid lead; c3 followed by ' ': truncated; 80: stray continuation; ed a0 80: a UTF-16
     * surrogate; f4 90 80 80: above U+10FFFF; e2 82: truncated at the end */
    static const char bad[] = "a\xff" "b\xc3 c\x80" "d\xed\xa0\x80" "e\xf4\x90\x80\x80" "f\xe2\x82";
    static const char fffd[] = "\xef\xbf\xbd";
    size_t blen = sizeof bad - 1;
    char want[128];
    /* BPE: each invalid byte -> U+FFFD; the surrogate and the too-large value -> one U+FFFD each */
    snprintf(want, sizeof want, "a%sb%s c%sd%se%sf%s%s", fffd, fffd, fffd, fffd, fffd, fffd, fffd);
    int32_t *ids = NULL;
    size_t n = 0, dl = 0;
    char err[256], spm_want[128];
    snprintf(spm_want, sizeof spm_want, " %s", bad);
    int rc = tok_encode(spm, bad, blen, 0, 0, &ids, &n, err, sizeof err);
    char *d = rc == 0 ? detok(spm, ids, n, &dl) : NULL;
    CHECK(rc == 0 && d && spm_same(d, dl, spm_want, blen + 1),
          "SPM: invalid UTF-8 survives byte fallback (up to '▁' == ' ') (%zu tokens)", n);
    free(d); free(ids);
    rc = tok_encode(bpe, bad, blen, 0, 0, &ids, &n, err, sizeof err);
    d = rc == 0 ? detok(bpe, ids, n, &dl) : NULL;
    CHECK(rc == 0 && d && dl == strlen(want) && memcmp(d, want, dl) == 0,
          "BPE: invalid UTF-8 becomes U+FFFD per bad byte, as llama.cpp (%zu tokens)", n);
    free(d); free(ids);

    rc = tok_encode(spm, "", 0, 0, 0, &ids, &n, err, sizeof err);
    CHECK(rc == 0 && n == 0 && ids == NULL, "SPM: empty text, no BOS -> no tokens");
    rc = tok_encode(spm, "", 0, 1, 0, &ids, &n, err, sizeof err);
    CHECK(rc == 0 && n == 1 && ids && ids[0] == tok_bos(spm), "SPM: empty text with BOS -> [BOS]");
    free(ids);
    rc = tok_encode(bpe, "", 0, 1, 0, &ids, &n, err, sizeof err);
    CHECK(rc == 0 && n == 0, "gpt-2 (no add_bos_token): empty text with add_bos -> no tokens");
    free(ids);
}

/* 1 MB texts: one giant word, random bytes; must finish and (for the word) round-trip. */
static void run_big(const tok_vocab *v, const char *name, int spm) {
    size_t len = 1 << 20;
    char *text = malloc(len);
    for (size_t i = 0; i < len; i++) text[i] = 'a';
    int32_t *ids = NULL;
    size_t n = 0, dl = 0;
    char err[256];
    double t0 = clock_s();
    int rc = tok_encode(v, text, len, 0, 0, &ids, &n, err, sizeof err);
    double dt = clock_s() - t0;
    char *d = rc == 0 ? detok(v, ids, n, &dl) : NULL;
    size_t pre = spm ? 1 : 0;
    CHECK(rc == 0 && d && dl == len + pre && memcmp(d + pre, text, len) == 0 && dt < 30,
          "%s: 1 MB of 'a' (one word) -> %zu tokens in %.2f s, round trip exact", name, n, dt);
    free(d); free(ids);
    uint64_t x = 88172645463325252ULL;     /* xorshift64: arbitrary bytes, fixed seed */
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        text[i] = (char)(x >> 32);
    }
    t0 = clock_s();
    rc = tok_encode(v, text, len, 0, 0, &ids, &n, err, sizeof err);
    dt = clock_s() - t0;
    CHECK(rc == 0 && n > 0 && dt < 30, "%s: 1 MB of random bytes -> %zu tokens in %.2f s", name, n, dt);
    if (spm) {
        d = rc == 0 ? detok(v, ids, n, &dl) : NULL;
        CHECK(d && dl > 0 && d[0] == ' ' && spm_same(d + 1, dl - 1, text, len),
              "%s: random bytes round-trip (up to '▁' == ' ')", name);
        free(d);
    }
    free(ids);
    free(text);
}

/* Tokenising 1 MB of English prose (the stories text and suite cases repeated). */
static void run_speed(const tok_vocab *v, const char *fix) {
    char path[512];
    snprintf(path, sizeof path, "%s/stories260K/a.txt", fix);
    size_t alen = 0;
    char *a = read_file(path, &alen);
    if (!a || alen == 0) { CHECK(0, "speed: a.txt loads"); free(a); return; }
    size_t len = 1 << 20;
    char *text = malloc(len);
    for (size_t i = 0; i < len; i++) text[i] = a[i % alen];
    int32_t *ids = NULL;
    size_t n = 0, dl = 0;
    char err[256];
    double t0 = clock_s();
    int rc = tok_encode(v, text, len, 0, 0, &ids, &n, err, sizeof err);
    double dt = clock_s() - t0;
    printf("    gpt-2 vocab: 1 MB of prose -> %zu tokens in %.3f s (%.1f MB/s)\n", n, dt, 1.0 / dt);
    char *d = rc == 0 ? detok(v, ids, n, &dl) : NULL;
    CHECK(rc == 0 && d && dl == len && memcmp(d, text, len) == 0 && dt < 20,
          "gpt-2: 1 MB of prose tokenised (%.2f s) and round-trips", dt);
    free(d); free(ids); free(text); free(a);
}

static void run_specials(const tok_vocab *gpt2, const tok_vocab *spm, const tok_vocab *deepseek) {
    int32_t *ids = NULL;
    size_t n = 0;
    char err[256];
    const char *s = "a<|endoftext|>b";
    int rc = tok_encode(gpt2, s, strlen(s), 0, 1, &ids, &n, err, sizeof err);
    CHECK(rc == 0 && n == 3 && ids[1] == 50256, "gpt-2 parse_special: '<|endoftext|>' -> token 50256 between a and b");
    free(ids);
    rc = tok_encode(gpt2, s, strlen(s), 0, 0, &ids, &n, err, sizeof err);
    int has = 0;
    for (size_t i = 0; i < n; i++) has |= ids[i] == 50256;
    CHECK(rc == 0 && n > 3 && !has, "gpt-2 without parse_special: '<|endoftext|>' stays text (%zu tokens)", n);
    free(ids);
    s = "<s>x";
    rc = tok_encode(spm, s, strlen(s), 0, 1, &ids, &n, err, sizeof err);
    CHECK(rc == 0 && n >= 2 && ids[0] == 1, "llama-spm parse_special: '<s>' -> token 1");
    free(ids);
    /* user-defined tokens are cut out even without parse_special (deepseek-llm's 'ö' is one) */
    s = "\xc3\xb6";
    rc = tok_encode(deepseek, s, strlen(s), 0, 0, &ids, &n, err, sizeof err);
    CHECK(rc == 0 && n == 1 && ids[0] == 100003, "deepseek-llm: user-defined 'ö' -> token 100003 without parse_special");
    free(ids);

    char buf[64];
    size_t len = 0;
    CHECK(tok_decode(spm, 13, buf, sizeof buf, &len) == 0 && len == 1 && buf[0] == '\n', "llama-spm: <0x0A> decodes to a newline");
    len = 0;
    CHECK(tok_decode(spm, 1, buf, sizeof buf, &len) == 0 && len == 3 && memcmp(buf, "<s>", 3) == 0, "llama-spm: control token 1 decodes to '<s>'");
    len = 0;
    CHECK(tok_decode(gpt2, 220, buf, sizeof buf, &len) == 0 && len == 1 && buf[0] == ' ', "gpt-2: token 220 'Ġ' decodes to a space");
    len = 0;
    CHECK(tok_decode(gpt2, 50257, buf, sizeof buf, &len) == -1 && tok_decode(gpt2, -1, buf, sizeof buf, &len) == -1 && len == 0,
          "decode rejects ids outside the vocab");
    len = 60;
    CHECK(tok_decode(gpt2, 50256, buf, sizeof buf, &len) == -1 && len == 60, "decode refuses a piece that does not fit");
}

/* A real model's vocab, if present: loads, and text round-trips. */
static void run_model(const char *path, const char *name, int spm_prefix) {
    FILE *f = fopen(path, "rb");
    if (!f) { printf("    (skipped %s: %s not present)\n", name, path); return; }
    fclose(f);
    tok_vocab *v = load_vocab(path);
    CHECK(v != NULL, "%s: tokenizer loads", name);
    if (!v) return;
    const char *s = "Hello world!  The  quick\tbrown fox\n\njumps over 12345 lazy dogs. Ünïcödé 你好 🦙\n";
    int32_t *ids = NULL;
    size_t n = 0, dl = 0;
    char err[256];
    int rc = tok_encode(v, s, strlen(s), 0, 0, &ids, &n, err, sizeof err);
    char *d = rc == 0 ? detok(v, ids, n, &dl) : NULL;
    size_t pre = spm_prefix ? 1 : 0;
    CHECK(d && dl == strlen(s) + pre && memcmp(d + pre, s, strlen(s)) == 0, "%s: decode(encode(text)) == text (%zu tokens)", name, n);
    free(d);
    free(ids);
    tok_free(v);
}

/* tok_max_tokens bounds tok_encode's count for adversarial texts (SPM: stories260K; BPE: rand-qwen2) */
static void test_tok_bound(void) {
    static const char *const models[2] = { "stories", "tests/fixtures/models/rand-qwen2.gguf" };
    char text[4096];
    for (int mi = 0; mi < 2; mi++) {
        char path[512], err[256];
        if (mi == 0) snprintf(path, sizeof path, "%s/models/stories260K.gguf", "tests/fixtures");
        else snprintf(path, sizeof path, "%s", models[1]);
        gguf_file *g;
        tok_vocab *v;
        if (gguf_open(path, &g, err, sizeof err) || tok_load(g, &v, err, sizeof err)) {
            CHECK(0, "load the tokenizer of %s (%s)", path, err);
            continue;
        }
        gguf_close(g);
        int ok = 1;
        size_t worst_n = 0, worst_len = 1;
        srand(7);
        for (int kind = 0; kind < 6; kind++) {
            for (size_t len = 1; len < sizeof text; len = len * 3 + 1) {
                for (size_t i = 0; i < len; i++)
                    text[i] = kind == 0 ? ' ' : kind == 1 ? (char)0xff : kind == 2 ? (char)(rand() & 0xff) :
                              kind == 3 ? (i % 2 ? ' ' : (char)0x80) : kind == 4 ? "<s> </s>"[i % 8] : (char)(rand() % 3 ? ' ' : 0xc3);
                for (int special = 0; special < 2; special++) {
                    int32_t *ids = NULL;
                    size_t n = 0;
                    if (tok_encode(v, text, len, 1, special, &ids, &n, err, sizeof err)) { ok = 0; break; }
                    free(ids);
                    if (n > tok_max_tokens(v, len)) ok = 0;
                    if (n * worst_len > worst_n * len) { worst_n = n; worst_len = len; }
                }
            }
        }
        CHECK(ok, "%s: tok_encode never exceeds tok_max_tokens (spaces, 0xff, random bytes, specials; worst %zu "
              "tokens for %zu bytes, bound %zu)", mi == 0 ? "SPM" : "BPE", worst_n, worst_len, tok_max_tokens(v, worst_len));
        tok_free(v);
    }
}


int main(void) {
    const char *fix = "tests/fixtures";   /* the committed fixtures; tests run from the repo root */
    const char *cache = getenv("STRATA_CACHE");
    char path[512], hex1[65], hex2[65], hex3[65];

    run_suite(fix, "gpt-2", 0);
    run_suite(fix, "llama-spm", 1);
    run_suite(fix, "starcoder", 0);
    run_suite(fix, "phi-3", 1);
    run_suite(fix, "deepseek-llm", 0);
    run_pre_suite(fix, "gpt-4o");
    run_pre_suite(fix, "qwen35");
    {
        char home[400];
        snprintf(home, sizeof home, "%s/.cache/strata", getenv("HOME") ? getenv("HOME") : ".");
        const char *c = cache ? cache : home;
        run_model_suite(c, "smollm2", "smollm2-135m-instruct-q4_1.gguf", 0);
        run_model_suite(c, "gemma3", "gemma-3-270m-q4_k_m.gguf", 0);   /* no space prefix */
    }

    snprintf(path, sizeof path, "%s/models/stories260K.gguf", fix);
    tok_vocab *st = load_vocab(path);
    CHECK(st && tok_n_vocab(st) == 512 && tok_bos(st) == 1 && tok_eos(st) == 2 && tok_add_bos(st) == 1,
          "stories260K: SPM vocab of 512, BOS 1, EOS 2, adds BOS");
    if (st) {
        run_stories(fix, st, "a");
        run_stories(fix, st, "d");
    }

    snprintf(path, sizeof path, "%s/tokenizer/ggml-vocab-gpt-2.gguf", fix);
    tok_vocab *gpt2 = load_vocab(path), *gpt2b = load_vocab(path);
    snprintf(path, sizeof path, "%s/tokenizer/ggml-vocab-llama-spm.gguf", fix);
    tok_vocab *spm = load_vocab(path);
    snprintf(path, sizeof path, "%s/tokenizer/ggml-vocab-phi-3.gguf", fix);
    tok_vocab *phi3 = load_vocab(path);
    snprintf(path, sizeof path, "%s/tokenizer/ggml-vocab-deepseek-llm.gguf", fix);
    tok_vocab *ds = load_vocab(path);
    if (gpt2 && gpt2b && spm && phi3 && ds) {
        tok_hash(gpt2, hex1);
        tok_hash(gpt2b, hex2);
        tok_hash(spm, hex3);
        int hexok = strlen(hex1) == 64 && strspn(hex1, "0123456789abcdef") == 64;
        CHECK(hexok && strcmp(hex1, hex2) == 0, "hash: 64 hex digits, same file twice -> same hash (%.16s...)", hex1);
        CHECK(strcmp(hex1, hex3) != 0, "hash: gpt-2 and llama-spm differ");
        tok_hash(phi3, hex2);
        CHECK(strcmp(hex3, hex2) != 0, "hash: llama-spm and phi-3 (same pieces, more tokens) differ");
        run_bad_input(spm, gpt2);
        run_specials(gpt2, spm, ds);
        run_big(gpt2, "gpt-2", 0);
        run_big(spm, "llama-spm", 1);
        run_big(ds, "deepseek-llm", 0);
        run_speed(gpt2, fix);
    } else {
        CHECK(0, "suite vocabs load for the remaining tests");
    }

    /* load errors: a GGUF without tokenizer metadata */
    snprintf(path, sizeof path, "%s/stories260K/a.logits.gguf", fix);
    gguf_file *g;
    char err[256] = "";
    tok_vocab *none = NULL;
    if (gguf_open(path, &g, err, sizeof err) == 0) {
        int rc = tok_load(g, &none, err, sizeof err);
        CHECK(rc == -1 && none == NULL && strstr(err, "tokenizer.ggml.model"), "tok_load without tokenizer metadata fails: %s", err);
        gguf_close(g);
    } else {
        CHECK(0, "open %s: %s", path, err);
    }

    if (cache) {
        snprintf(path, sizeof path, "%s/smollm2-135m-instruct-q4_1.gguf", cache);
        run_model(path, "SmolLM2-135M (gpt2/smollm)", 0);
        snprintf(path, sizeof path, "%s/gemma-3-270m-q4_k_m.gguf", cache);
        run_model(path, "Gemma 3 270M (llama, no space prefix)", 0);
        /* Gemma's user-defined whitespace tokens (138 = two spaces, 108 = two newlines) are cut out
         * before SentencePiece sees the text, even without parse_special */
        FILE *f = fopen(path, "rb");
        tok_vocab *gm = f ? load_vocab(path) : NULL;
        if (f) fclose(f);
        if (gm) {
            int32_t *ids = NULL;
            size_t n = 0;
            int rc = tok_encode(gm, "a  b\n\nc", 7, 1, 0, &ids, &n, err, sizeof err);
            CHECK(rc == 0 && n == 6 && ids[0] == tok_bos(gm) && ids[2] == 138 && ids[4] == 108,
                  "Gemma 3: 'a  b\\n\\nc' -> BOS a [138] b [108] c");
            free(ids);
            tok_free(gm);
        }
    }

    tok_free(st); tok_free(gpt2); tok_free(gpt2b); tok_free(spm); tok_free(phi3); tok_free(ds);
    test_tok_bound();   /* (from the former tests/test_harden.c) */
    return check_done();
}
