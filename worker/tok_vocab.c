/* tok_vocab.c — the tokenizer's vocabulary (see tok.h, tok_internal.h): loading it from GGUF
 * metadata (tokens, scores, types, merges, special ids, the pre-tokenizer by tokenizer.ggml.pre),
 * its hash tables (token text -> id, merge pair -> rank), the list of pre-tokenizers with their
 * regexes, and the accessors. tok_load allocates the vocab; tok_free frees it. Encoding and
 * decoding are in tok.c.
 */
#include "worker/tok_internal.h"

#include <limits.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/errmsg.h"

/* ---------------------------------------------------------------- hash tables */

static uint64_t hash_bytes(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= TOK_HASH_PRIME;
    }
    return h;
}

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c *= 2;
    return c;
}

const char *tok_text(const tok_vocab *v, int32_t id, size_t *n) {
    *n = v->off[id + 1] - v->off[id];
    return v->pool + v->off[id];
}

/* Token id whose text is s[n], or -1. */
int32_t tok_lookup(const tok_vocab *v, const char *s, size_t n) {
    size_t mask = v->tok_cap - 1;
    size_t i = (size_t)hash_bytes(TOK_HASH_SEED, s, n) & mask;
    for (;;) {
        int32_t id = v->tok_tab[i];
        if (id < 0) return -1;
        size_t tn;
        const char *t = tok_text(v, id, &tn);
        if (tn == n && memcmp(t, s, n) == 0) return id;
        i = (i + 1) & mask;
    }
}

static uint64_t pair_hash(const char *l, size_t ln, const char *r, size_t rn) {
    uint64_t h = hash_bytes(TOK_HASH_SEED, l, ln);
    h = (h ^ 0xFF) * TOK_HASH_PRIME;           /* separator: "ab"+"c" and "a"+"bc" differ */
    return hash_bytes(h, r, rn);
}

/* Rank of the merge (l, r), or -1 if the pair never merges. */
int32_t tok_merge_rank(const tok_vocab *v, const char *l, size_t ln, const char *r, size_t rn) {
    size_t mask = v->merge_cap - 1;
    size_t i = (size_t)pair_hash(l, ln, r, rn) & mask;
    for (;;) {
        int32_t m = v->merge_tab[i];
        if (m < 0) return -1;
        const char *s = v->mpool + v->moff[m];
        size_t sp = v->msplit[m], total = v->moff[m + 1] - v->moff[m];
        if (sp == ln && total - sp - 1 == rn && memcmp(s, l, ln) == 0 && memcmp(s + sp + 1, r, rn) == 0)
            return m;
        i = (i + 1) & mask;
    }
}

/* ---------------------------------------------------------------- pre-tokenizers */

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_LLAMA3_HEAD "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
#define RE_LLAMA3_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_LLAMA3 RE_LLAMA3_HEAD "\\p{N}{1,3}" RE_LLAMA3_TAIL
#define RE_QWEN2 RE_LLAMA3_HEAD "\\p{N}" RE_LLAMA3_TAIL
/* Qwen3.5: qwen2's with combining marks kept with their letters */
#define RE_QWEN35                                                                                      \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}|" \
    " ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* GPT-4o's o200k (gpt-oss, llama4): words split at lower-to-upper case changes, with the English
 * contractions attached, numbers in groups of up to three; "upper" and "lower" as llama.cpp spells
 * them (a letter that is not a-z, resp. not A-Z) */
#define RE_GPT4O_CONTR "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
#define RE_GPT4O                                                                                       \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+" RE_GPT4O_CONTR "|"              \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*" RE_GPT4O_CONTR "|"              \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_CJK "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
#define RE_BLOOM " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+"
/* DeepSeek LLM's letter class: cased letters of Latin, Greek, Cyrillic, Armenian, Georgian,
 * Cherokee, Glagolitic, Coptic, Deseret, Osage, Old Hungarian, Warang Citi, Adlam, ... */
#define RE_DEEPSEEK_LETTERS                                                                            \
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}"  \
    "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}" \
    "\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}"        \
    "\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"     \
    "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"     \
    "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}"                \
    "\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}"              \
    "\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}"     \
    "\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}"       \
    "\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}"               \
    "\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}"               \
    "\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}"      \
    "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}"     \
    "\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}"                   \
    "\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}"               \
    "\\x{1E900}-\\x{1E943}]+"

/* One pre-tokenizer: the tokenizer.ggml.pre names that select it and its regexes, applied in order
 * (each one splits every piece the previous ones left into matches and the gaps between them). */
typedef struct {
    const char *names;       /* space separated */
    int ignore_merges;
    int add_bos;             /* default for tokenizer.ggml.add_bos_token */
    const char *re[TOK_MAX_RE];
} tok_pre_def;

static const tok_pre_def tok_pres[] = {
    {"default", 0, 0, {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}},
    {"gpt-2 phi-2 mpt olmo jais roberta-bpe gigachat jina-es jina-de jina-v1-en jina-v2-es jina-v2-de "
     "jina-v2-code", 0, 0, {RE_GPT2}},
    {"llama3 llama-v3 llama-bpe falcon3", 1, 1, {RE_LLAMA3}},
    {"dbrx smaug-bpe", 0, 0, {RE_LLAMA3}},
    {"qwen2 stablelm2 megrez deepseek-r1-qwen kormo f2llmv2", 0, 0, {RE_QWEN2}},
    {"qwen35", 0, 0, {RE_QWEN35}},
    {"gpt-4o llama4 kanana2 talkie", 0, 0, {RE_GPT4O}},
    {"starcoder refact command-r smollm codeshell exaone minerva-7b", 0, 0, {"\\p{N}", RE_GPT2}},
    {"falcon", 0, 0, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}},
    {"deepseek-llm", 0, 0,
     {"[\\r\\n]", RE_DEEPSEEK_LETTERS,
      "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
      "\\s+$", RE_CJK, "\\p{N}+"}},
    {"deepseek-coder", 0, 0, {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK, "\\p{N}"}},
    {"poro-chat bloom gpt3-finnish", 0, 0, {RE_BLOOM}},
    {"viking", 0, 0, {RE_BLOOM, "\\p{N}"}},
    {"tekken", 1, 1,
     {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|"
      "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|"
      "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
};

static int name_in_list(const char *name, const char *list) {
    size_t n = strlen(name);
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ' ');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k == n && memcmp(p, name, n) == 0) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- loading */

/* An optional special-token id key into *id: its value, which must be an integer in [0, n_vocab)
 * when present; def when absent or "none" (-1, or its u32 spelling 4294967295: llama.cpp's
 * LLAMA_TOKEN_NULL, which stories260K's padding and separator ids hold), or -1 if def is not in the
 * vocabulary. Any other value outside the vocabulary is refused. */
static int read_id(const gguf_file *g, const char *key, int def, int n_vocab, int *id, char *err, size_t errlen) {
    int64_t x = def;
    int rc = gguf_meta_int(g, key, INT64_MIN, INT64_MAX, &x, err, errlen);
    if (rc < 0) return -1;
    if (rc == GGUF_ABSENT || x == -1 || x == UINT32_MAX) {
        *id = def < n_vocab ? def : -1;
        return 0;
    }
    if (x < 0 || x >= n_vocab)
        return errmsg_set(err, errlen, -1, "metadata %s = %lld is outside the vocabulary [0, %d)", key, (long long)x,
                          n_vocab);
    *id = (int)x;
    return 0;
}

/* Every tokenizer.ggml.*_token_id key (pad, sep, cls, mask, eot, fim_*, …: those strata does not
 * use as well) must hold an id in the vocabulary. */
static int check_special_ids(const gguf_file *g, int n_vocab, char *err, size_t errlen) {
    static const char pre[] = "tokenizer.ggml.", suf[] = "_token_id";
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const char *k = g->kv[i].key;
        size_t n = strlen(k);
        int id;
        if (n > sizeof pre - 1 + sizeof suf - 1 && !strncmp(k, pre, sizeof pre - 1) &&
            !strcmp(k + n - (sizeof suf - 1), suf) && read_id(g, k, -1, n_vocab, &id, err, errlen))
            return -1;
    }
    return 0;
}

/* An optional flag: a bool (or integer 0/1) when present, else def. */
static int read_flag(const gguf_file *g, const char *key, int def, int *out, char *err, size_t errlen) {
    int rc = gguf_meta_bool(g, key, out, err, errlen);
    if (rc == GGUF_ABSENT) *out = def;
    return rc < 0 ? -1 : 0;
}

static void put_u32(EVP_MD_CTX *c, uint32_t x) {
    uint8_t b[4] = {(uint8_t)x, (uint8_t)(x >> 8), (uint8_t)(x >> 16), (uint8_t)(x >> 24)};
    EVP_DigestUpdate(c, b, 4);
}

static void put_bytes(EVP_MD_CTX *c, const char *s, size_t n) {
    put_u32(c, (uint32_t)n);
    EVP_DigestUpdate(c, s, n);
}

/* sha256 over everything that decides tokenization (layout documented at tok_hash in tok.h). */
static int compute_hash(tok_vocab *v) {
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    unsigned char md[32];
    unsigned int mdlen = 0;
    if (!c || !EVP_DigestInit_ex(c, EVP_sha256(), NULL)) { EVP_MD_CTX_free(c); return -1; }
    put_bytes(c, "strata-tok-1", 12);
    put_u32(c, (uint32_t)v->kind);
    put_bytes(c, v->pre, strlen(v->pre));
    put_u32(c, (uint32_t)v->add_bos);
    put_u32(c, (uint32_t)v->add_eos);
    put_u32(c, (uint32_t)v->add_space_prefix);
    put_u32(c, (uint32_t)v->bos);
    put_u32(c, (uint32_t)v->eos);
    put_u32(c, (uint32_t)v->unk);
    put_u32(c, (uint32_t)v->n_vocab);
    for (int i = 0; i < v->n_vocab; i++) {
        size_t n;
        const char *t = tok_text(v, i, &n);
        uint32_t sbits;
        memcpy(&sbits, &v->score[i], 4);
        put_bytes(c, t, n);
        put_u32(c, sbits);
        put_u32(c, (uint32_t)v->type[i]);
    }
    put_u32(c, (uint32_t)v->n_merges);
    for (int i = 0; i < v->n_merges; i++) put_bytes(c, v->mpool + v->moff[i], v->moff[i + 1] - v->moff[i]);
    int ok = EVP_DigestFinal_ex(c, md, &mdlen);
    EVP_MD_CTX_free(c);
    if (!ok || mdlen != 32) return -1;
    for (int i = 0; i < 32; i++) snprintf(v->hash + 2 * i, 3, "%02x", md[i]);
    return 0;
}

/* Copies the token strings (an empty one becomes "[EMPTY_<id>]", as llama.cpp names it). */
static int load_tokens(tok_vocab *v, const gguf_kv *kv, char *err, size_t errlen) {
    size_t total = 0;
    char name[32];
    for (int i = 0; i < v->n_vocab; i++) {
        size_t n = kv->str_lens[i] ? (size_t)kv->str_lens[i] : (size_t)snprintf(name, sizeof name, "[EMPTY_%d]", i);
        if (n > SIZE_MAX - total - 1) return errmsg_set(err, errlen, -1, "tokenizer.ggml.tokens too large");
        total += n;
    }
    v->pool = malloc(total + 1);
    v->off = malloc(((size_t)v->n_vocab + 1) * sizeof *v->off);
    if (!v->pool || !v->off) return errmsg_set(err, errlen, -1, "out of memory loading %d tokens", v->n_vocab);
    size_t at = 0;
    for (int i = 0; i < v->n_vocab; i++) {
        v->off[i] = at;
        if (kv->str_lens[i]) {
            memcpy(v->pool + at, kv->strs[i], kv->str_lens[i]);
            at += kv->str_lens[i];
        } else {
            at += (size_t)snprintf(v->pool + at, total + 1 - at, "[EMPTY_%d]", i);
        }
    }
    v->off[v->n_vocab] = at;
    /* text -> id; a repeated text maps to its last id (as llama.cpp's map assignment) */
    v->tok_cap = pow2_at_least((size_t)v->n_vocab * 2);
    v->tok_tab = malloc(v->tok_cap * sizeof *v->tok_tab);
    if (!v->tok_tab) return errmsg_set(err, errlen, -1, "out of memory");
    memset(v->tok_tab, 0xFF, v->tok_cap * sizeof *v->tok_tab);
    for (int id = 0; id < v->n_vocab; id++) {
        size_t n, mask = v->tok_cap - 1;
        const char *t = tok_text(v, id, &n);
        size_t i = (size_t)hash_bytes(TOK_HASH_SEED, t, n) & mask;
        for (;;) {
            int32_t o = v->tok_tab[i];
            size_t on;
            if (o < 0) { v->tok_tab[i] = id; break; }
            const char *ot = tok_text(v, o, &on);
            if (on == n && memcmp(ot, t, n) == 0) { v->tok_tab[i] = id; break; }
            i = (i + 1) & mask;
        }
        if (n > v->max_piece) v->max_piece = n;
    }
    return 0;
}

static int load_merges(tok_vocab *v, const gguf_file *g, char *err, size_t errlen) {
    const void *unused;
    uint64_t nm;
    int rc = gguf_meta_arr(g, "tokenizer.ggml.merges", 1u << GGUF_VT_STRING, &unused, &nm, NULL, err, errlen);
    if (rc < 0) return -1;
    if (rc == GGUF_ABSENT) return errmsg_set(err, errlen, -1, "BPE vocab has no tokenizer.ggml.merges");
    const gguf_kv *kv = gguf_find(g, "tokenizer.ggml.merges");
    if (kv->n > INT32_MAX) return errmsg_set(err, errlen, -1, "tokenizer.ggml.merges has %llu entries", (unsigned long long)kv->n);
    v->n_merges = (int)kv->n;
    size_t total = 0;
    for (int i = 0; i < v->n_merges; i++) {
        if (kv->str_lens[i] > SIZE_MAX - total - 1)
            return errmsg_set(err, errlen, -1, "tokenizer.ggml.merges too large");
        total += kv->str_lens[i];
    }
    v->mpool = malloc(total + 1);
    v->moff = malloc(((size_t)v->n_merges + 1) * sizeof *v->moff);
    v->msplit = malloc(((size_t)v->n_merges + 1) * sizeof *v->msplit);
    v->merge_cap = pow2_at_least((size_t)v->n_merges * 2);
    v->merge_tab = malloc(v->merge_cap * sizeof *v->merge_tab);
    if (!v->mpool || !v->moff || !v->msplit || !v->merge_tab) return errmsg_set(err, errlen, -1, "out of memory");
    memset(v->merge_tab, 0xFF, v->merge_cap * sizeof *v->merge_tab);
    size_t at = 0;
    for (int m = 0; m < v->n_merges; m++) {
        size_t n = kv->str_lens[m];
        v->moff[m] = at;
        memcpy(v->mpool + at, kv->strs[m], n);
        at += n;
        /* "left right": split at the first space after the first byte; none -> never matches */
        const char *s = v->mpool + v->moff[m];
        const char *sp = n > 1 ? memchr(s + 1, ' ', n - 1) : NULL;
        v->msplit[m] = sp ? (size_t)(sp - s) : 0;
        if (!sp) continue;
        size_t ln = v->msplit[m], rn = n - ln - 1, mask = v->merge_cap - 1;
        size_t i = (size_t)pair_hash(s, ln, sp + 1, rn) & mask;
        for (;;) {                   /* a repeated pair keeps its first (lowest) rank */
            int32_t o = v->merge_tab[i];
            if (o < 0) { v->merge_tab[i] = m; break; }
            const char *os = v->mpool + v->moff[o];
            size_t osp = v->msplit[o], on = v->moff[o + 1] - v->moff[o];
            if (osp == ln && on == n && memcmp(os, s, n) == 0) break;
            i = (i + 1) & mask;
        }
    }
    v->moff[v->n_merges] = at;
    return 0;
}

static int load_pre(tok_vocab *v, const gguf_file *g, char *err, size_t errlen) {
    char pre[64] = "";
    int rc = gguf_meta_name(g, "tokenizer.ggml.pre", pre, sizeof pre, err, errlen);
    if (rc < 0) return -1;
    if (rc == GGUF_ABSENT || !pre[0]) snprintf(pre, sizeof pre, "default");   /* llama.cpp warns and uses the default */
    const tok_pre_def *d = NULL;
    for (size_t i = 0; i < sizeof tok_pres / sizeof tok_pres[0]; i++)
        if (name_in_list(pre, tok_pres[i].names)) d = &tok_pres[i];
    if (!d) return errmsg_set(err, errlen, -1, "unsupported tokenizer.ggml.pre '%s'", pre);
    snprintf(v->pre, sizeof v->pre, "%s", pre);
    v->ignore_merges = d->ignore_merges;
    v->add_bos = d->add_bos;
    for (int i = 0; i < TOK_MAX_RE && d->re[i]; i++) {
        int ec;
        PCRE2_SIZE eo;
        v->re[i] = pcre2_compile((PCRE2_SPTR)d->re[i], PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &ec, &eo, NULL);
        if (!v->re[i]) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(ec, msg, sizeof msg);
            return errmsg_set(err, errlen, -1, "pre-tokenizer '%s' regex %d: %s at %zu", pre, i, (char *)msg,
                              (size_t)eo);
        }
        v->n_re = i + 1;
        pcre2_jit_compile(v->re[i], PCRE2_JIT_COMPLETE);   /* optional: falls back to the interpreter */
    }
    /* GPT-2's byte-level map: printable bytes stand for themselves, the other 68 get 256.. */
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        v->byte_cp[b] = keep ? (uint32_t)b : (uint32_t)(256 + extra++);
    }
    for (int c = 0; c < 324; c++) v->cp_byte[c] = -1;
    for (int b = 0; b < 256; b++) v->cp_byte[v->byte_cp[b]] = (int16_t)b;
    return 0;
}

typedef struct { size_t len; int32_t id; } tok_len_id;

static int by_len_desc(const void *a, const void *b) {
    const tok_len_id *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The tokens the partition step cuts out of text: unknown, control and user-defined ones. */
static int build_specials(tok_vocab *v, char *err, size_t errlen) {
    int n = 0;
    for (int i = 0; i < v->n_vocab; i++)
        if (v->type[i] == TOK_TYPE_UNKNOWN || v->type[i] == TOK_TYPE_CONTROL || v->type[i] == TOK_TYPE_USER_DEFINED) n++;
    v->special = malloc(((size_t)n + 1) * sizeof *v->special);
    tok_len_id *tmp = malloc(((size_t)n + 1) * sizeof *tmp);
    if (!v->special || !tmp) { free(tmp); return errmsg_set(err, errlen, -1, "out of memory"); }
    int k = 0;
    for (int i = 0; i < v->n_vocab; i++)
        if (v->type[i] == TOK_TYPE_UNKNOWN || v->type[i] == TOK_TYPE_CONTROL || v->type[i] == TOK_TYPE_USER_DEFINED) {
            tmp[k].len = v->off[i + 1] - v->off[i];
            tmp[k].id = i;
            k++;
        }
    qsort(tmp, (size_t)n, sizeof *tmp, by_len_desc);
    for (int i = 0; i < n; i++) v->special[i] = tmp[i].id;
    v->n_special = n;
    free(tmp);
    return 0;
}

/* The per-token scores (SPM merge priority; 0 when absent) and types (normal when absent), with
 * the end-of-generation spellings made control tokens. 0, or -1 with a message. */
static int load_scores_types(tok_vocab *v, const gguf_file *g, char *err, size_t errlen) {
    const void *data;
    uint64_t n;
    int rc;
    v->score = calloc((size_t)v->n_vocab, sizeof *v->score);
    v->type = malloc((size_t)v->n_vocab);
    if (!v->score || !v->type) { errmsg_set(err, errlen, -1, "out of memory"); return -1; }
    rc = gguf_meta_arr(g, "tokenizer.ggml.scores", 1u << GGUF_VT_FLOAT32, &data, &n, NULL, err, errlen);
    if (rc < 0) return -1;
    if (rc == 0) {
        if (n != (uint64_t)v->n_vocab) {
            errmsg_set(err, errlen, -1, "tokenizer.ggml.scores has %llu entries, not one per token (%d)", (unsigned long long)n, v->n_vocab);
            return -1;
        }
        memcpy(v->score, data, (size_t)v->n_vocab * sizeof(float));
        for (int i = 0; i < v->n_vocab; i++)   /* a NaN would make the merge order undefined */
            if (!isfinite(v->score[i])) {
                errmsg_set(err, errlen, -1, "tokenizer.ggml.scores[%d] is %g (NaN and infinite scores are refused)", i, v->score[i]);
                return -1;
            }
    }
    memset(v->type, TOK_TYPE_NORMAL, (size_t)v->n_vocab);   /* no type array: all normal */
    rc = gguf_meta_arr(g, "tokenizer.ggml.token_type", 1u << GGUF_VT_INT32, &data, &n, NULL, err, errlen);
    if (rc < 0) return -1;
    if (rc == 0) {
        if (n != (uint64_t)v->n_vocab) {
            errmsg_set(err, errlen, -1, "tokenizer.ggml.token_type has %llu entries, not one per token (%d)", (unsigned long long)n,
                       v->n_vocab);
            return -1;
        }
        for (int i = 0; i < v->n_vocab; i++) {
            int32_t t;
            memcpy(&t, (const char *)data + 4 * (size_t)i, 4);
            if (t < TOK_TYPE_UNDEFINED || t > TOK_TYPE_BYTE) {
                errmsg_set(err, errlen, -1, "tokenizer.ggml.token_type[%d] = %d is not a token type (0 .. 6)", i,
                           (int)t);
                return -1;
            }
            v->type[i] = (int8_t)t;
        }
    }
    /* end-of-generation texts are control tokens whatever the file says: llama.cpp overrides the
     * type of these spellings for every vocab (its list includes "</s>", which makes Gemma 3's
     * user-defined "</s>" plain text when specials are not parsed; we follow it to tokenise alike) */
    static const char *const eog[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
                                      "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>",
                                      "_<EOT>", "<|end_of_text|>", "<end_of_utterance>"};
    for (size_t i = 0; i < sizeof eog / sizeof eog[0]; i++) {
        int32_t id = tok_lookup(v, eog[i], strlen(eog[i]));
        if (id >= 0) v->type[id] = TOK_TYPE_CONTROL;
    }
    return 0;
}

/* The kind's special ids and defaults: SPM's BOS / EOS / UNK and byte tokens, or BPE's merges,
 * pre-tokenizer and ids. 0, or -1 with a message. */
static int load_kind(tok_vocab *v, const gguf_file *g, char *err, size_t errlen) {
    if (v->kind == TOK_SPM) {
        if (read_id(g, "tokenizer.ggml.bos_token_id", 1, v->n_vocab, &v->bos, err, errlen) ||
            read_id(g, "tokenizer.ggml.eos_token_id", 2, v->n_vocab, &v->eos, err, errlen) ||
            read_id(g, "tokenizer.ggml.unknown_token_id", 0, v->n_vocab, &v->unk, err, errlen))
            return -1;
        v->add_bos = 1;
        v->add_space_prefix = 1;
        for (int b = 0; b < 256; b++) {
            char hex[8];
            snprintf(hex, sizeof hex, "<0x%02X>", b);
            v->byte_tok[b] = tok_lookup(v, hex, 6);
            if (v->byte_tok[b] < 0) {     /* a vocab may hold the raw byte instead */
                char c = (char)b;
                v->byte_tok[b] = tok_lookup(v, &c, 1);
            }
        }
    } else {
        if (load_merges(v, g, err, errlen) || load_pre(v, g, err, errlen)) return -1;
        if (read_id(g, "tokenizer.ggml.bos_token_id", 11, v->n_vocab, &v->bos, err, errlen) ||
            read_id(g, "tokenizer.ggml.eos_token_id", 11, v->n_vocab, &v->eos, err, errlen) ||
            read_id(g, "tokenizer.ggml.unknown_token_id", -1, v->n_vocab, &v->unk, err, errlen))
            return -1;
    }
    return 0;
}

int tok_load(const gguf_file *g, tok_vocab **out, char *err, size_t errlen) {
    *out = NULL;
    tok_vocab *v = calloc(1, sizeof *v);
    if (!v) return errmsg_set(err, errlen, -1, "out of memory");
    char model[32] = "";
    int rc = gguf_meta_name(g, "tokenizer.ggml.model", model, sizeof model, err, errlen);
    if (rc) {
        if (rc == GGUF_ABSENT) errmsg_set(err, errlen, -1, "no tokenizer.ggml.model in the GGUF metadata");
        goto bad;
    }
    const char *tpl;   /* not used here (the handshake sends it), but a template of another type is refused */
    uint64_t tpl_len;
    if (gguf_meta_str(g, "tokenizer.chat_template", &tpl, &tpl_len, err, errlen) < 0) goto bad;
    if (strcmp(model, "llama") == 0) v->kind = TOK_SPM;
    else if (strcmp(model, "gpt2") == 0) v->kind = TOK_BPE;
    else {
        errmsg_set(err, errlen, -1, "unsupported tokenizer.ggml.model '%s' (supported: llama, gpt2)", model);
        goto bad;
    }

    const void *data;
    uint64_t n;
    rc = gguf_meta_arr(g, "tokenizer.ggml.tokens", 1u << GGUF_VT_STRING, &data, &n, NULL, err, errlen);
    if (rc) {
        if (rc == GGUF_ABSENT)
            errmsg_set(err, errlen, -1, "no tokenizer.ggml.tokens string array in the GGUF metadata");
        goto bad;
    }
    const gguf_kv *tk = gguf_find(g, "tokenizer.ggml.tokens");
    if (tk->n < 1 || tk->n > INT32_MAX / 2) {
        errmsg_set(err, errlen, -1, "tokenizer.ggml.tokens has %llu entries", (unsigned long long)tk->n);
        goto bad;
    }
    v->n_vocab = (int)tk->n;
    if (load_tokens(v, tk, err, errlen)) goto bad;

    if (load_scores_types(v, g, err, errlen) || load_kind(v, g, err, errlen)) goto bad;
    if (check_special_ids(g, v->n_vocab, err, errlen) ||
        read_flag(g, "tokenizer.ggml.add_bos_token", v->add_bos, &v->add_bos, err, errlen) ||
        read_flag(g, "tokenizer.ggml.add_eos_token", 0, &v->add_eos, err, errlen) ||
        read_flag(g, "tokenizer.ggml.add_space_prefix", v->add_space_prefix, &v->add_space_prefix, err, errlen))
        goto bad;
    if (build_specials(v, err, errlen)) goto bad;
    if (compute_hash(v)) { errmsg_set(err, errlen, -1, "sha256 failed"); goto bad; }
    *out = v;
    return 0;
bad:
    tok_free(v);
    return -1;
}

void tok_free(tok_vocab *v) {
    if (!v) return;
    for (int i = 0; i < v->n_re; i++) pcre2_code_free(v->re[i]);
    free(v->pool); free(v->off); free(v->score); free(v->type); free(v->tok_tab); free(v->special);
    free(v->mpool); free(v->moff); free(v->msplit); free(v->merge_tab);
    free(v);
}

int tok_n_vocab(const tok_vocab *v) { return v->n_vocab; }
int tok_bos(const tok_vocab *v) { return v->bos; }
int tok_eos(const tok_vocab *v) { return v->eos; }
int tok_add_bos(const tok_vocab *v) { return v->add_bos; }
size_t tok_max_piece(const tok_vocab *v) { return v->max_piece; }
int tok_type(const tok_vocab *v, int32_t id) { return id >= 0 && id < v->n_vocab ? v->type[id] : -1; }

void tok_hash(const tok_vocab *v, char hex[65]) { memcpy(hex, v->hash, 65); }
