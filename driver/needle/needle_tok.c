/* needle_tok.c — the needle's tokenizer (see needle_internal.h): the reference arm's worker
 * tokenises (tokenize requests) and tells the driver every token's decoded piece, the control
 * tokens and the chat template (a vocab request); the driver runs no engine code. */
#include "driver/needle/needle_internal.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/errmsg.h"

void needle_tok_free(needle_tokenizer *t) {
    proto_msg_free(&t->vocab);
    free(t->nl);
    free(t->ends);
    free(t->ends_nl);
    memset(t, 0, sizeof *t);
}

/* text [len] tokenised by the reference worker, no BOS; special: parse special-token texts.
 * *ids is malloc'd (NULL for n = 0). */
static int tok_encode(const needle_tokenizer *t, const char *text, size_t len, int special, int32_t **ids, size_t *n,
                       char *err, size_t errlen) {
    return arm_tokenize(t->a, text, len, 0, special, NEEDLE_TOK_RECV_MAX, ids, n, err, errlen) ? -1 : 0;
}

/* Tokens of text as they read after a newline: "\n" + text tokenised, the tokens of "\n" cut off
 * (when the two do not line up, text alone). No BOS. *ids is malloc'd (may be NULL for n = 0). */
int needle_tok_piece(const needle_tokenizer *t, const char *text, int special, int32_t **ids, size_t *n,
                        char *err, size_t errlen) {
    size_t len = strlen(text);
    char *s = malloc(len + 2);
    if (!s) return errmsg_set(err, errlen, -1, "out of memory");
    s[0] = '\n';
    memcpy(s + 1, text, len + 1);
    int32_t *a = NULL;
    size_t na = 0;
    int rc = tok_encode(t, s, len + 1, special, &a, &na, err, errlen);
    free(s);
    if (rc) return -1;
    if (na >= t->n_nl && !memcmp(a, t->nl, t->n_nl * sizeof *a)) {
        memmove(a, a + t->n_nl, (na - t->n_nl) * sizeof *a);
        *ids = a;
        *n = na - t->n_nl;
        return 0;
    }
    free(a);
    return tok_encode(t, text, len, special, ids, n, err, errlen);
}

/* Asks the reference arm for its tokenizer's pieces and chat template. */
int needle_tok_fetch(arm *a, needle_tokenizer *t, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    t->a = a;
    proto_msg req;
    proto_init(&req, PROTO_VOCAB, 0, 0);
    if (arm_set_recv_max(a, NEEDLE_TOK_RECV_MAX, err, errlen) ||
        arm_call(a, &req, &t->vocab, NEEDLE_TOK_RECV_MAX, err, errlen))
        return -1;
    const proto_vocab_rep *v = &t->vocab.vocab_rep;
    t->n_vocab = (int)v->n_vocab;
    if (v->n_template)
        t->chat = needle_chat_detect(v->chat_template, v->n_template, t->system, sizeof t->system);
    if (!(t->ends = calloc((size_t)t->n_vocab + 1, 1)) || !(t->ends_nl = calloc((size_t)t->n_vocab + 1, 1)))
        return errmsg_set(err, errlen, -1, "out of memory");
    for (int id = 0; id < t->n_vocab; id++) {
        const char *p = v->pieces + v->offsets[id];
        size_t n = (size_t)(v->offsets[id + 1] - v->offsets[id]);
        while (n > 0 && p[n - 1] == ' ') n--;
        if (!n) continue;
        char c = p[n - 1];
        t->ends[id] = c == '.' || c == '!' || c == '?' || c == '\n';
        t->ends_nl[id] = c == '\n';
    }
    return tok_encode(t, "\n", 1, 0, &t->nl, &t->n_nl, err, errlen);
}

/* The decoded text of ids [n] up to the first control token, into a malloc'd NUL-terminated
 * *text [*len]. */
int needle_tok_decode(const needle_tokenizer *t, const int32_t *ids, size_t n, char **text, size_t *len) {
    const proto_vocab_rep *v = &t->vocab.vocab_rep;
    size_t cap = 1, w = 0;
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < t->n_vocab) cap += (size_t)(v->offsets[ids[i] + 1] - v->offsets[ids[i]]);
    char *s = malloc(cap);   /* [cap] */
    if (!s) return -1;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab || v->control[ids[i]]) break;
        size_t k = (size_t)(v->offsets[ids[i] + 1] - v->offsets[ids[i]]);
        memcpy(s + w, v->pieces + v->offsets[ids[i]], k);
        w += k;
    }
    s[w] = 0;
    *text = s;
    *len = w;
    return 0;
}
