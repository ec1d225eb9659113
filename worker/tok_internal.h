/* tok_internal.h — the vocabulary as worker/tok.c (encoding, decoding) and worker/tok_vocab.c
 * (loading from GGUF, the hash tables, the pre-tokenizer list) both see it; no other file
 * includes it. tok_load allocates a tok_vocab and every array in it; tok_free frees them.
 */
#ifndef STRATA_TOK_INTERNAL_H
#define STRATA_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stddef.h>
#include <stdint.h>

#include "worker/tok.h"

enum { TOK_SPM = 1, TOK_BPE = 2 };
#define TOK_MAX_RE 6                 /* regexes in the longest pre-tokenizer list */
#define TOK_MAX_TEXT ((size_t)INT32_MAX / 4)   /* longest text tok_encode takes, bytes */
#define TOK_HASH_SEED 0xcbf29ce484222325ULL
#define TOK_HASH_PRIME 0x100000001b3ULL

struct tok_vocab {
    int kind;                        /* TOK_SPM or TOK_BPE */
    int n_vocab;
    char *pool;                      /* all token strings back to back */
    size_t *off;                     /* [n_vocab + 1] token i is pool[off[i] .. off[i+1]) */
    float *score;                    /* [n_vocab] SPM merge priority (0 when absent) */
    int8_t *type;                    /* [n_vocab] TOK_TYPE_* */
    int32_t *tok_tab;                /* [tok_cap] open-addressing hash text -> id, -1 = empty */
    size_t tok_cap;                  /* power of two */
    int32_t *special;                /* [n_special] ids of types 2/3/4, longest text first */
    int n_special;
    int bos, eos, unk;               /* -1 = none */
    int add_bos, add_eos, add_space_prefix;
    size_t max_piece;                /* longest token text, bytes (>= any decoded piece) */
    char pre[64];                    /* tokenizer.ggml.pre as used ("" for SPM) */
    char hash[65];
    /* SPM */
    int32_t byte_tok[256];           /* token of <0xXX> per byte, -1 if none */
    /* BPE */
    int n_merges;
    char *mpool;                     /* all merge strings "left right" back to back */
    size_t *moff;                    /* [n_merges + 1] merge i is mpool[moff[i] .. moff[i+1]) */
    size_t *msplit;                  /* [n_merges] offset of the separating space inside merge i */
    int32_t *merge_tab;              /* [merge_cap] hash (left, right) -> merge index (= rank) */
    size_t merge_cap;
    int ignore_merges;               /* a piece that is a whole token skips merging (llama3) */
    pcre2_code *re[TOK_MAX_RE];      /* pre-tokenizer regexes, applied in order */
    int n_re;
    uint32_t byte_cp[256];           /* GPT-2 byte-level map: byte -> code point (< 324) */
    int16_t cp_byte[324];            /* inverse: code point -> byte, -1 if none */
};

/* Token id's text: *n bytes at the returned pointer (inside v->pool; id must be valid). */
const char *tok_text(const tok_vocab *v, int32_t id, size_t *n);
/* Token id whose text is s[n], or -1. */
int32_t tok_lookup(const tok_vocab *v, const char *s, size_t n);
/* Rank of the merge (l, r), or -1 if the pair never merges (BPE). */
int32_t tok_merge_rank(const tok_vocab *v, const char *l, size_t ln, const char *r, size_t rn);

#endif
