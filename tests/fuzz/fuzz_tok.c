/* fuzz_tok.c — the tokenizers on untrusted text (see fuzz.h). The first input byte picks the
 * vocabulary (SentencePiece with byte fallback: stories260K, llama-spm; byte-level BPE: gpt-2,
 * deepseek-llm) and whether special tokens are parsed; the rest is the text. Properties: no crash
 * or overread; every id is inside the vocabulary; with specials not parsed, decoding the ids gives
 * the text back exactly (SPM: after the one space it prefixes) whenever the text is valid UTF-8
 * (invalid sequences are accepted and become U+FFFD, so they cannot come back) and, for SPM, holds
 * no U+2581 '▁' (SPM's own escape for a space: it decodes to ' ', as in llama.cpp). Vocabularies come
 * from tests/fixtures (run from the repository root). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "worker/gguf.h"
#include "worker/tok.h"

enum { N_VOCABS = 4 };

static const char *const paths[N_VOCABS] = {
    "tests/fixtures/models/stories260K.gguf", "tests/fixtures/tokenizer/ggml-vocab-llama-spm.gguf",
    "tests/fixtures/tokenizer/ggml-vocab-gpt-2.gguf", "tests/fixtures/tokenizer/ggml-vocab-deepseek-llm.gguf" };
static const int spm[N_VOCABS] = { 1, 1, 0, 0 };

/* 1 when s[n] is well-formed UTF-8 (no overlong forms, no surrogates, at most U+10FFFF). */
static int utf8_valid(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (!k || i + k > n) return 0;
        unsigned cp = k == 1 ? c : k == 2 ? c & 0x1f : k == 3 ? c & 0x0f : c & 0x07;
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return 0;
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        static const unsigned min_cp[5] = { 0, 0, 0x80, 0x800, 0x10000 };
        if (cp < min_cp[k] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
        i += k;
    }
    return 1;
}

static tok_vocab *load(const char *path) {
    gguf_file *g = NULL;
    tok_vocab *v = NULL;
    char err[256];
    if (gguf_open(path, &g, err, sizeof err) || tok_load(g, &v, err, sizeof err)) {
        fprintf(stderr, "fuzz_tok: %s (run from the repository root)\n", err);
        abort();
    }
    gguf_close(g);
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static tok_vocab *vocabs[N_VOCABS];   /* loaded once, kept for the run (the harness's state) */
    char err[256];
    if (size < 1) return 0;
    int which = data[0] % N_VOCABS, special = (data[0] >> 2) & 1;
    if (!vocabs[which]) vocabs[which] = load(paths[which]);
    const tok_vocab *v = vocabs[which];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    int32_t *ids = NULL;
    size_t n = 0;
    if (tok_encode(v, text, len, 0, special, &ids, &n, err, sizeof err)) return 0;
    size_t cap = n * tok_max_piece(v) + 1, got = 0;
    char *back = malloc(cap);               /* [cap] decoded bytes: got */
    if (!back) abort();
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= tok_n_vocab(v)) { fprintf(stderr, "fuzz_tok: id %d out of range\n", ids[i]); abort(); }
        if (tok_decode(v, ids[i], back, cap, &got)) { fprintf(stderr, "fuzz_tok: id %d does not decode\n", ids[i]); abort(); }
    }
    int has_escape = memmem(text, len, "\xe2\x96\x81", 3) != NULL;
    if (!special && utf8_valid((const unsigned char *)text, len) && !(spm[which] && has_escape)) {
        size_t pre = spm[which] && len > 0;   /* SPM prefixes one space to a non-empty text */
        if (got != len + pre || memcmp(back + pre, text, len) || (pre && back[0] != ' ')) {
            fprintf(stderr, "fuzz_tok: %s: decode(encode(text)) != text (%zu bytes -> %zu ids -> %zu bytes)\n",
                    paths[which], len, n, got);
            abort();
        }
    }
    free(back);
    free(ids);
    return 0;
}
