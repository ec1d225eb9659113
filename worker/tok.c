/* tok.c — SentencePiece (SPM) and byte-level BPE tokenizers from GGUF metadata (see tok.h).
 *
 * This file encodes and decodes; the vocabulary (loading from GGUF, hash tables, the pre-tokenizer
 * list) is in tok_vocab.c, the struct both share in tok_internal.h.
 *
 * Encoding a text, top to bottom:
 *   1. partition: cut special tokens out of the text (longest first) -> fragments, each either a
 *      token id or a run of raw text;
 *   2. SPM fragment: ' ' -> '▁' (plus a leading '▁'), split into UTF-8 characters, repeatedly merge
 *      the adjacent pair whose concatenation is the best-scoring vocab piece, then emit each piece
 *      (or its bytes as <0xXX> tokens);
 *   3. BPE fragment: make it valid UTF-8, split it with each pre-tokenizer regex in turn, map every
 *      piece's bytes to GPT-2's printable code points, repeatedly merge the adjacent pair with the
 *      lowest merge rank, emit each piece's token id.
 * Both merge loops use one binary heap of candidate pairs over a linked list of symbols, so a piece
 * of n characters costs O(n log n).
 */
#include "worker/tok_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/errmsg.h"

/* ---------------------------------------------------------------- helpers */

/* Makes room for need elements of size elem in the malloc'd array whose pointer is at pp (any
 * T **; copied with memcpy, not read through a void **), capacity *cap, doubling. 0, or -1 (no
 * memory; the array is left as it was). */
static int grow(void *pp, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        if (c > SIZE_MAX / 2) return -1;
        c *= 2;
    }
    if (c > SIZE_MAX / elem) return -1;
    void *p;
    memcpy(&p, pp, sizeof p);
    void *q = realloc(p, c * elem);
    if (!q) return -1;
    memcpy(pp, &q, sizeof q);
    *cap = c;
    return 0;
}

/* Bytes of the UTF-8 sequence a lead byte announces (continuation bytes count as 1). */
static size_t utf8_len(uint8_t c) {
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[c >> 4];
}

/* Decodes one code point at s[*i] (i < n) and advances *i. Lead and continuation bytes are checked,
 * overlong forms accepted (as llama.cpp does); an invalid sequence consumes one byte and gives
 * U+FFFD. Surrogates and values above U+10FFFF also give U+FFFD (PCRE2 cannot take them). */
static uint32_t utf8_next(const uint8_t *s, size_t n, size_t *i) {
    size_t k = *i;
    uint8_t c = s[k];
    uint32_t cp;
    size_t len;
    if (!(c & 0x80)) { *i = k + 1; return c; }
    if (!(c & 0x40)) { *i = k + 1; return 0xFFFD; }
    if (!(c & 0x20)) { len = 2; cp = c & 0x1F; }
    else if (!(c & 0x10)) { len = 3; cp = c & 0x0F; }
    else if (!(c & 0x08)) { len = 4; cp = c & 0x07; }
    else { *i = k + 1; return 0xFFFD; }
    if (k + len > n) { *i = k + 1; return 0xFFFD; }
    for (size_t j = 1; j < len; j++) {
        if ((s[k + j] & 0xC0) != 0x80) { *i = k + 1; return 0xFFFD; }
        cp = (cp << 6) | (s[k + j] & 0x3F);
    }
    *i = k + len;
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0xFFFD;
    return cp;
}

/* Writes cp (<= 0x10FFFF) as UTF-8 at out; returns the byte count (1..4). */
static size_t utf8_put(uint32_t cp, char *out) {
    uint8_t *o = (uint8_t *)out;
    if (cp < 0x80) { o[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { o[0] = (uint8_t)(0xC0 | (cp >> 6)); o[1] = (uint8_t)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12)); o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18)); o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---------------------------------------------------------------- encoding: shared machinery */

typedef struct {             /* a run of raw text (id = -1) or one special token */
    size_t off, len;
    int32_t id;
} tok_frag;

typedef struct {             /* a symbol: bytes text[start .. start+n) of the piece being merged */
    size_t start, n;         /* n = 0 once merged into its left neighbour */
    int prev, next;          /* neighbours, -1 at the ends */
} tok_sym;

typedef struct {             /* a candidate merge of adjacent symbols left and right */
    double key;              /* lower pops first: BPE merge rank, SPM -score */
    int left, right;
    size_t size;             /* bytes of left + right when it was pushed */
} tok_bigram;

typedef struct { size_t off, len; } tok_span;

typedef struct {             /* scratch of one tok_encode call */
    const tok_vocab *v;
    int32_t *ids; size_t n_ids, cap_ids;        /* output [n_ids] */
    tok_frag *frag; size_t n_frag, cap_frag;    /* partition result */
    tok_frag *frag2; size_t cap_frag2;
    tok_sym *sym; size_t cap_sym;               /* [n_sym] symbols of one piece */
    tok_bigram *heap; size_t n_heap, cap_heap;  /* binary heap of candidates */
    char *buf; size_t cap_buf;                  /* the piece's text (escaped / byte-encoded) */
    char *clean; size_t cap_clean;              /* BPE: the fragment as valid UTF-8 */
    tok_span *span; size_t n_span, cap_span;    /* BPE: pre-tokenized pieces of clean */
    tok_span *span2; size_t cap_span2;
    pcre2_match_data *md;
    char *err; size_t errlen;
} tok_enc;

static int push_id(tok_enc *e, int32_t id) {
    if (grow(&e->ids, &e->cap_ids, e->n_ids + 1, sizeof *e->ids))
        return errmsg_set(e->err, e->errlen, -1, "out of memory (%zu tokens)", e->n_ids);
    e->ids[e->n_ids++] = id;
    return 0;
}

static int bigram_before(const tok_bigram *a, const tok_bigram *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

static int heap_push(tok_enc *e, tok_bigram b) {
    if (grow(&e->heap, &e->cap_heap, e->n_heap + 1, sizeof *e->heap))
        return errmsg_set(e->err, e->errlen, -1, "out of memory");
    size_t i = e->n_heap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bigram_before(&b, &e->heap[p])) break;
        e->heap[i] = e->heap[p];
        i = p;
    }
    e->heap[i] = b;
    return 0;
}

static tok_bigram heap_pop(tok_enc *e) {
    tok_bigram top = e->heap[0], last = e->heap[--e->n_heap];
    size_t i = 0, n = e->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bigram_before(&e->heap[c + 1], &e->heap[c])) c++;
        if (!bigram_before(&e->heap[c], &last)) break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (n > 0) e->heap[i] = last;
    return top;
}

/* Splits text[len] into one symbol per UTF-8 character (a truncated last one is kept as is).
 * Returns the symbol count, or -1 (no memory). */
static int split_chars(tok_enc *e, const char *text, size_t len) {
    int n = 0;
    for (size_t at = 0; at < len; n++) {
        size_t k = utf8_len((uint8_t)text[at]);
        if (k > len - at) k = len - at;
        if (grow(&e->sym, &e->cap_sym, (size_t)n + 1, sizeof *e->sym))
            return errmsg_set(e->err, e->errlen, -1, "out of memory");
        e->sym[n] = (tok_sym){at, k, n - 1, at + k < len ? n + 1 : -1};
        at += k;
    }
    return n;
}

/* Pushes the merge candidate (l, r) if the pair can merge: SPM when the concatenation is a vocab
 * piece (priority: its score), BPE when the pair is in the merges (priority: rank). */
static int try_pair(tok_enc *e, const char *text, int l, int r) {
    if (l < 0 || r < 0) return 0;
    const tok_vocab *v = e->v;
    const tok_sym *a = &e->sym[l], *b = &e->sym[r];
    double key;
    if (v->kind == TOK_SPM) {
        int32_t id = tok_lookup(v, text + a->start, a->n + b->n);   /* adjacent: contiguous bytes */
        if (id < 0) return 0;
        key = -(double)v->score[id];
    } else {
        int32_t rank = tok_merge_rank(v, text + a->start, a->n, text + b->start, b->n);
        if (rank < 0) return 0;
        key = rank;
    }
    return heap_push(e, (tok_bigram){key, l, r, a->n + b->n});
}

/* Merges the n symbols of text until no candidate is left. */
static int merge_symbols(tok_enc *e, const char *text, int n) {
    e->n_heap = 0;
    for (int i = 1; i < n; i++)
        if (try_pair(e, text, i - 1, i)) return -1;
    while (e->n_heap > 0) {
        tok_bigram b = heap_pop(e);
        tok_sym *l = &e->sym[b.left], *r = &e->sym[b.right];
        /* stale: one side already merged elsewhere, or grew since the pair was pushed */
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) e->sym[r->next].prev = b.left;
        if (try_pair(e, text, l->prev, b.left) || try_pair(e, text, b.left, l->next)) return -1;
    }
    return 0;
}

/* Cuts special tokens out of text[len] into e->frag: for each special token, longest first, every
 * occurrence inside a remaining text fragment splits it. Control/unknown tokens only when
 * parse_special. */
static int partition(tok_enc *e, const char *text, size_t len, int parse_special) {
    const tok_vocab *v = e->v;
    e->n_frag = 0;
    if (len == 0) return 0;
    if (grow(&e->frag, &e->cap_frag, 1, sizeof *e->frag)) return errmsg_set(e->err, e->errlen, -1, "out of memory");
    e->frag[e->n_frag++] = (tok_frag){0, len, -1};
    /* which bytes and byte pairs occur: most special tokens can be ruled out without a search */
    uint8_t *seen = calloc(65536 / 8 + 256 / 8, 1);
    if (!seen) return errmsg_set(e->err, e->errlen, -1, "out of memory");
    uint8_t *seen1 = seen + 65536 / 8;
    for (size_t i = 0; i < len; i++) {
        unsigned b = (uint8_t)text[i];
        seen1[b >> 3] |= (uint8_t)(1u << (b & 7));
        if (i + 1 < len) {
            unsigned p = b << 8 | (uint8_t)text[i + 1];
            seen[p >> 3] |= (uint8_t)(1u << (p & 7));
        }
    }
    int rc = 0;
    for (int s = 0; s < v->n_special && rc == 0; s++) {
        int32_t id = v->special[s];
        if (!parse_special && v->type[id] != TOK_TYPE_USER_DEFINED) continue;
        size_t tn;
        const char *t = tok_text(v, id, &tn);
        if (tn > len) continue;
        unsigned b0 = (uint8_t)t[0];
        if (!(seen1[b0 >> 3] & (1u << (b0 & 7)))) continue;
        if (tn >= 2) {
            unsigned p = b0 << 8 | (uint8_t)t[1];
            if (!(seen[p >> 3] & (1u << (p & 7)))) continue;
        }
        if (!memmem(text, len, t, tn)) continue;
        size_t n2 = 0;
        for (size_t f = 0; f < e->n_frag; f++) {
            tok_frag fr = e->frag[f];
            size_t at = fr.off, end = fr.off + fr.len;
            const char *hit;
            while (fr.id < 0 && end - at >= tn && (hit = memmem(text + at, end - at, t, tn))) {
                size_t h = (size_t)(hit - text);
                if (grow(&e->frag2, &e->cap_frag2, n2 + 2, sizeof *e->frag2)) { rc = -1; break; }
                if (h > at) e->frag2[n2++] = (tok_frag){at, h - at, -1};
                e->frag2[n2++] = (tok_frag){h, tn, id};
                at = h + tn;
            }
            if (rc) break;
            if (grow(&e->frag2, &e->cap_frag2, n2 + 1, sizeof *e->frag2)) { rc = -1; break; }
            if (fr.id >= 0) e->frag2[n2++] = fr;
            else if (at < end) e->frag2[n2++] = (tok_frag){at, end - at, -1};
        }
        if (rc) break;
        tok_frag *tmp = e->frag; e->frag = e->frag2; e->frag2 = tmp;
        size_t tc = e->cap_frag; e->cap_frag = e->cap_frag2; e->cap_frag2 = tc;
        e->n_frag = n2;
    }
    free(seen);
    return rc ? errmsg_set(e->err, e->errlen, -1, "out of memory") : 0;
}

/* ---------------------------------------------------------------- SPM */

/* Splits e->buf[n] into characters, applies the merges, and emits each resulting symbol's id.
 * A symbol that is not a token falls back to bytes: SentencePiece (spm_bytes = 1) emits the <0xXX>
 * byte token of each byte (or the unknown token; an error when neither exists); BPE emits the
 * single bytes that are tokens and skips the rest, as llama.cpp does. */
static int merge_and_emit(tok_enc *e, size_t n, int spm_bytes) {
    const tok_vocab *v = e->v;
    int ns = split_chars(e, e->buf, n);
    if (ns < 0 || merge_symbols(e, e->buf, ns)) return -1;
    for (int i = ns > 0 ? 0 : -1; i >= 0; i = e->sym[i].next) {
        const tok_sym *s = &e->sym[i];
        int32_t id = tok_lookup(v, e->buf + s->start, s->n);
        if (id >= 0) { if (push_id(e, id)) return -1; continue; }
        for (size_t k = 0; k < s->n; k++) {
            if (spm_bytes) {
                uint8_t b = (uint8_t)e->buf[s->start + k];
                int32_t bt = v->byte_tok[b] >= 0 ? v->byte_tok[b] : v->unk;
                if (bt < 0)
                    return errmsg_set(e->err, e->errlen, -1, "no token for byte 0x%02X and no unknown token", b);
                if (push_id(e, bt)) return -1;
            } else {
                int32_t bt = tok_lookup(v, e->buf + s->start + k, 1);
                if (bt >= 0 && push_id(e, bt)) return -1;
            }
        }
    }
    return 0;
}

static int encode_spm(tok_enc *e, const char *text, size_t len, int space_prefix) {
    /* ' ' -> U+2581 '▁' (3 bytes), with one more in front if asked */
    if (grow(&e->buf, &e->cap_buf, 3 * len + 3, 1)) return errmsg_set(e->err, e->errlen, -1, "out of memory");
    size_t n = 0;
    if (space_prefix) { memcpy(e->buf, "\xE2\x96\x81", 3); n = 3; }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') { memcpy(e->buf + n, "\xE2\x96\x81", 3); n += 3; }
        else e->buf[n++] = text[i];
    }
    return merge_and_emit(e, n, 1);
}

/* ---------------------------------------------------------------- BPE */

/* Splits every span of e->span with regex re: matches and the gaps between them become spans. */
static int split_regex(tok_enc *e, const pcre2_code *re) {
    size_t n2 = 0;
    for (size_t s = 0; s < e->n_span; s++) {
        PCRE2_SPTR subj = (PCRE2_SPTR)(e->clean + e->span[s].off);
        size_t sl = e->span[s].len, base = e->span[s].off, pos = 0, last = 0;
        while (pos < sl) {
            int rc = pcre2_match(re, subj, sl, pos, PCRE2_NO_UTF_CHECK, e->md, NULL);
            if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
                rc = pcre2_match(re, subj, sl, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, e->md, NULL);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                PCRE2_UCHAR msg[160];
                pcre2_get_error_message(rc, msg, sizeof msg);
                return errmsg_set(e->err, e->errlen, -1, "pre-tokenizer regex: %s", (char *)msg);
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
            size_t ms = ov[0], me = ov[1];
            if (me <= ms) {                   /* empty match: nothing to cut, step one character */
                pos = ms + utf8_len(subj[ms]);
                continue;
            }
            if (grow(&e->span2, &e->cap_span2, n2 + 2, sizeof *e->span2)) return errmsg_set(e->err, e->errlen, -1, "out of memory");
            if (ms > last) e->span2[n2++] = (tok_span){base + last, ms - last};
            e->span2[n2++] = (tok_span){base + ms, me - ms};
            last = pos = me;
        }
        if (grow(&e->span2, &e->cap_span2, n2 + 1, sizeof *e->span2))
            return errmsg_set(e->err, e->errlen, -1, "out of memory");
        if (last < sl) e->span2[n2++] = (tok_span){base + last, sl - last};
    }
    tok_span *t = e->span; e->span = e->span2; e->span2 = t;
    size_t c = e->cap_span; e->cap_span = e->cap_span2; e->cap_span2 = c;
    e->n_span = n2;
    return 0;
}

/* One pre-tokenized piece p[len] (valid UTF-8): byte-level encode, merge, emit. */
static int encode_bpe_piece(tok_enc *e, const char *p, size_t len) {
    const tok_vocab *v = e->v;
    if (grow(&e->buf, &e->cap_buf, 2 * len + 1, 1)) return errmsg_set(e->err, e->errlen, -1, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += utf8_put(v->byte_cp[(uint8_t)p[i]], e->buf + n);
    if (v->ignore_merges) {
        int32_t id = tok_lookup(v, e->buf, n);
        if (id >= 0) return push_id(e, id);
    }
    return merge_and_emit(e, n, 0);
}

static int encode_bpe(tok_enc *e, const char *text, size_t len) {
    const tok_vocab *v = e->v;
    /* valid UTF-8 for PCRE2: each invalid byte becomes U+FFFD, as llama.cpp does */
    if (grow(&e->clean, &e->cap_clean, 3 * len + 1, 1)) return errmsg_set(e->err, e->errlen, -1, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < len;) n += utf8_put(utf8_next((const uint8_t *)text, len, &i), e->clean + n);
    if (grow(&e->span, &e->cap_span, 1, sizeof *e->span)) return errmsg_set(e->err, e->errlen, -1, "out of memory");
    e->span[0] = (tok_span){0, n};
    e->n_span = 1;
    for (int r = 0; r < v->n_re; r++)
        if (split_regex(e, v->re[r])) return -1;
    for (size_t s = 0; s < e->n_span; s++)
        if (encode_bpe_piece(e, e->clean + e->span[s].off, e->span[s].len)) return -1;
    return 0;
}

/* ---------------------------------------------------------------- public */

int tok_encode(const tok_vocab *v, const char *text, size_t len, int add_bos, int parse_special,
               int32_t **ids, size_t *n, char *err, size_t errlen) {
    *ids = NULL;
    *n = 0;
    if (len > TOK_MAX_TEXT)
        return errmsg_set(err, errlen, -1, "text of %zu bytes is too long (max %zu)", len, TOK_MAX_TEXT);
    if (len > 0 && !text) return errmsg_set(err, errlen, -1, "NULL text");
    tok_enc e = {.v = v, .err = err, .errlen = errlen};
    int rc = -1;
    if (v->kind == TOK_BPE && !(e.md = pcre2_match_data_create(1, NULL))) {
        errmsg_set(err, errlen, -1, "out of memory");
        goto done;
    }
    if (partition(&e, text, len, parse_special)) goto done;
    if (add_bos && v->add_bos) {
        if (v->bos < 0) { errmsg_set(err, errlen, -1, "the model asks for BOS but has no BOS token"); goto done; }
        if (push_id(&e, v->bos)) goto done;
    }
    int prev_special = 1;            /* SPM: a text fragment at the start or after a token gets the '▁' */
    for (size_t f = 0; f < e.n_frag; f++) {
        const tok_frag *fr = &e.frag[f];
        if (fr->id >= 0) {
            if (push_id(&e, fr->id)) goto done;
            prev_special = 1;
        } else if (v->kind == TOK_SPM) {
            if (encode_spm(&e, text + fr->off, fr->len, v->add_space_prefix && prev_special)) goto done;
            prev_special = 0;
        } else {
            if (encode_bpe(&e, text + fr->off, fr->len)) goto done;
        }
    }
    if (add_bos && v->add_eos) {
        if (v->eos < 0) { errmsg_set(err, errlen, -1, "the model asks for EOS but has no EOS token"); goto done; }
        if (push_id(&e, v->eos)) goto done;
    }
    rc = 0;
done:
    if (rc == 0 && e.n_ids > 0) {
        *ids = e.ids;
        *n = e.n_ids;
    } else {
        free(e.ids);
    }
    free(e.frag); free(e.frag2); free(e.sym); free(e.heap); free(e.buf); free(e.clean);
    free(e.span); free(e.span2);
    if (e.md) pcre2_match_data_free(e.md);
    return rc;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

int tok_decode(const tok_vocab *v, int32_t id, char *buf, size_t buflen, size_t *len) {
    if (id < 0 || id >= v->n_vocab || *len > buflen) return -1;
    size_t tn, at = *len;
    const char *t = tok_text(v, id, &tn);
    int type = v->type[id];
    if (type == TOK_TYPE_CONTROL || type == TOK_TYPE_UNKNOWN || type == TOK_TYPE_USER_DEFINED) {
        if (tn > buflen - at) return -1;
        memcpy(buf + at, t, tn);
        at += tn;
    } else if (type == TOK_TYPE_NORMAL && v->kind == TOK_SPM) {
        for (size_t i = 0; i < tn;) {
            if (at >= buflen) return -1;
            if (i + 3 <= tn && memcmp(t + i, "\xE2\x96\x81", 3) == 0) { buf[at++] = ' '; i += 3; }
            else buf[at++] = t[i++];
        }
    } else if (type == TOK_TYPE_NORMAL) {          /* BPE: code points back to bytes */
        for (size_t i = 0; i < tn;) {
            size_t i0 = i;
            uint32_t cp = utf8_next((const uint8_t *)t, tn, &i);
            if (cp < 324 && v->cp_byte[cp] >= 0) {
                if (at >= buflen) return -1;
                buf[at++] = (char)v->cp_byte[cp];
            } else {                               /* not byte-level: copy as is */
                if (i - i0 > buflen - at) return -1;
                memcpy(buf + at, t + i0, i - i0);
                at += i - i0;
            }
        }
    } else if (type == TOK_TYPE_BYTE && v->kind == TOK_SPM) {   /* "<0xAB>" */
        int hi = tn == 6 ? hex_digit(t[3]) : -1, lo = tn == 6 ? hex_digit(t[4]) : -1;
        if (hi < 0 || lo < 0 || memcmp(t, "<0x", 3) != 0 || t[5] != '>') return 0;   /* malformed: nothing */
        if (at >= buflen) return -1;
        buf[at++] = (char)(hi << 4 | lo);
    }
    *len = at;
    return 0;
}

size_t tok_max_tokens(const tok_vocab *v, size_t len) {
    /* SPM: tokens of a fragment <= bytes of its escaped text <= 3 per byte, + 3 for its '▁' prefix,
     * which only the first fragment and one after a special token (>= 1 byte, 1 token) get: charged
     * to that special, <= 4 per byte in all; BPE: <= 3 per byte (U+FFFD), 1 per special's >= 1 byte */
    size_t per = v->kind == TOK_SPM ? 4 : 3, extra = v->kind == TOK_SPM ? 5 : 2;
    return len > (SIZE_MAX - extra) / per ? SIZE_MAX : per * len + extra;
}

