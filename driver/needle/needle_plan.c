/* needle_plan.c — the needle's plan (see needle_internal.h): each trial's haystack, every cell's
 * prompt and gold answer (tokenised by the reference worker, assembled by needle_assemble), their
 * run order, and what the cells cost.
 *
 * Reading order: haystacks; one cell (tokens, prompt); the plan; --dump-prompts; the cost. */
#include "driver/needle/needle_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/cli.h"
#include "kernels/errmsg.h"

void needle_plan_free(needle_plan *p) {
    for (int i = 0; p->c && i < p->n; i++) { free(p->c[i].prompt); free(p->c[i].gold); }
    free(p->c);
    free(p->hay_off);
    free(p->hay_end);
    memset(p, 0, sizeof *p);
}

/* The bytes of corpus a haystack of `need` tokens is tokenised from (at first; doubled when short). */
static size_t hay_span(size_t need) { return need * 8 + 4096; }

/* The haystack tokens of trial t: the corpus from byte off (a line start) on, at least `need`
 * tokens; *end = the end of the bytes tokenised. */
static int hay_tokens(const needle_tokenizer *T, const doc_t *doc, size_t off, int trial, size_t need,
                      int32_t **ids, size_t *n, size_t *end_out, char *err, size_t errlen) {
    size_t bytes = hay_span(need);
    for (;;) {
        size_t end = off + bytes < doc->n_text ? off + bytes : doc->n_text;
        *end_out = end;
        char *s = strndup(doc->text + off, end - off);
        if (!s) return errmsg_set(err, errlen, -1, "out of memory");
        int rc = needle_tok_piece(T, s, 0, ids, n, err, errlen);
        free(s);
        if (rc) return -1;
        if (*n >= need + 64 || end == doc->n_text) break;
        free(*ids);
        *ids = NULL;
        bytes *= 2;
    }
    if (*n < need)
        return errmsg_set(err, errlen, -1, "the haystack of trial %d has %zu tokens from byte %zu of "
                          "the corpus on, fewer than the %zu the longest prompt needs (use a longer "
                          "corpus or shorter --lengths)", trial, *n, off, need);
    return 0;
}

/* Sort key of the run order within one (template, trial): where a prompt leaves the plain
 * haystack, deepest first, so that each cell reuses the longest prefix of the one before. */
static int cmp_cells(const void *a, const void *b) {
    const needle_cell *x = a, *y = b;
    if (x->chat != y->chat) return x->chat - y->chat;
    if (x->trial != y->trial) return x->trial - y->trial;
    if (x->first_cut != y->first_cut) return x->first_cut > y->first_cut ? -1 : 1;
    if (x->length != y->length) return y->length - x->length;
    return y->position - x->position;
}


/* The tokens of one cell's texts (no BOS), malloc'd; cell_tokens_free frees them. */
typedef struct {
    int32_t *head, *tail;                      /* [n_head], [n_tail] */
    size_t n_head, n_tail;
    int32_t *nl[NEEDLE_MAX_KEYS], *sp[NEEDLE_MAX_KEYS];   /* [k][n_nl], [k][n_sp] each needle's two forms */
    size_t n_nl[NEEDLE_MAX_KEYS], n_sp[NEEDLE_MAX_KEYS];
} cell_tokens;

static void cell_tokens_free(cell_tokens *t) {
    free(t->head);
    free(t->tail);
    for (int j = 0; j < NEEDLE_MAX_KEYS; j++) { free(t->nl[j]); free(t->sp[j]); }
    memset(t, 0, sizeof *t);
}

/* The texts tx of cell c tokenised into *k, and c's gold answer: what " KEY" adds to the tail's
 * tokens (or " KEY" alone when the two do not line up). */
static int cell_tokenize(const needle_tokenizer *T, const needle_texts *tx, int n_keys, needle_cell *c,
                         cell_tokens *k, char *err, size_t errlen) {
    char s[NEEDLE_TEXT_MAX + 32];
    int32_t *tail_ans = NULL;
    size_t n_ta = 0;
    int chat = c->chat;
    if (needle_tok_piece(T, tx->head, chat, &k->head, &k->n_head, err, errlen) ||
        needle_tok_piece(T, tx->tail, chat, &k->tail, &k->n_tail, err, errlen))
        return -1;
    snprintf(s, sizeof s, "%s %s", tx->tail, tx->key_text);
    if (needle_tok_piece(T, s, chat, &tail_ans, &n_ta, err, errlen)) return -1;
    int rc = 0;
    if (n_ta > k->n_tail && !memcmp(tail_ans, k->tail, k->n_tail * sizeof *k->tail)) {
        c->n_gold = n_ta - k->n_tail;
        if (!(c->gold = malloc(c->n_gold * sizeof *c->gold))) rc = errmsg_set(err, errlen, -1, "out of memory");
        else memcpy(c->gold, tail_ans + k->n_tail, c->n_gold * sizeof *c->gold);
    } else {
        snprintf(s, sizeof s, " %s", tx->key_text);
        rc = needle_tok_piece(T, s, 0, &c->gold, &c->n_gold, err, errlen);
    }
    free(tail_ans);
    if (rc) return -1;
    if (!c->n_gold) return errmsg_set(err, errlen, -1, "the key %s has no tokens", tx->key_text);
    for (int j = 0; j < n_keys; j++) {
        snprintf(s, sizeof s, "%s\n", tx->needle[j]);
        if (needle_tok_piece(T, s, 0, &k->nl[j], &k->n_nl[j], err, errlen)) return -1;
        snprintf(s, sizeof s, " %s", tx->needle[j]);
        if (needle_tok_piece(T, s, 0, &k->sp[j], &k->n_sp[j], err, errlen)) return -1;
    }
    return 0;
}

/* Cell c's prompt: BOS + head | the haystack hay [n_hay] with the needles | tail, at most
 * c->length_eff tokens (needle_assemble). */
static int cell_assemble(const needle_tokenizer *T, const cell_tokens *k, int n_keys, const int32_t *hay,
                         size_t n_hay, int add_bos, int bos, needle_cell *c, char *err, size_t errlen) {
    int32_t *pre = malloc((k->n_head + 1) * sizeof *pre);   /* [n_pre] the prefix: BOS + head */
    if (!pre) return errmsg_set(err, errlen, -1, "out of memory");
    size_t n_pre = 0;
    if (add_bos && bos >= 0) pre[n_pre++] = bos;
    if (k->n_head) memcpy(pre + n_pre, k->head, k->n_head * sizeof *pre);
    n_pre += k->n_head;
    needle_parts parts;
    memset(&parts, 0, sizeof parts);
    parts.prefix = (needle_span){pre, n_pre};
    parts.hay = (needle_span){hay, n_hay};
    parts.tail = (needle_span){k->tail, k->n_tail};
    for (int j = 0; j < n_keys; j++) {
        parts.needle_nl[j] = (needle_span){k->nl[j], k->n_nl[j]};
        parts.needle_sp[j] = (needle_span){k->sp[j], k->n_sp[j]};
    }
    parts.frac = c->keys.frac;
    parts.k = n_keys;
    parts.ends = T->ends;
    parts.ends_nl = T->ends_nl;
    parts.n_vocab = T->n_vocab;
    parts.length = (size_t)c->length_eff;
    needle_prompt np;
    char e2[512];
    int arc = needle_assemble(&parts, &np, e2, sizeof e2);
    free(pre);
    if (arc) {
        needle_prompt_free(&np);
        return errmsg_set(err, errlen, -1, "length %d, position %d, trial %d: %s", c->length, c->position,
                          c->trial, e2);
    }
    c->prompt = np.ids;
    c->n = np.n;
    c->needle_pos = np.at[0];
    c->first_cut = np.first_cut;
    return 0;
}

/* One cell (c's length, position, trial and template set) on its trial's haystack hay [n_hay]:
 * keys, texts, tokens, the context cap (recorded in P), the prompt. */
static int cell_build(const needle_opts *o, const needle_tokenizer *T, const int32_t *hay, size_t n_hay,
                      uint64_t n_ctx, int add_bos, int bos, needle_cell *c, needle_plan *P, char *err,
                      size_t errlen) {
    needle_texts tx;
    cell_tokens k;
    memset(&k, 0, sizeof k);
    if (needle_cell_keys(o->seed, c->length, c->position, c->trial, o->keys, &c->keys) ||
        needle_texts_build(c->chat ? T->chat : NEEDLE_CHAT_NONE, T->system, &c->keys, &tx))
        return errmsg_set(err, errlen, -1, "cannot build the texts of a cell");
    snprintf(c->key_text, sizeof c->key_text, "%s", tx.key_text);
    int rc = cell_tokenize(T, &tx, o->keys, c, &k, err, errlen);
    if (!rc) {
        /* the context cap: the prompt, then gen − 1 generated or n_gold − 1 gold tokens */
        uint64_t extra = (uint64_t)(o->gen > (int)c->n_gold ? o->gen : (int)c->n_gold);
        uint64_t cap = n_ctx > extra ? n_ctx - extra : 0;
        c->length_eff = (uint64_t)c->length > cap ? (int)cap : c->length;
        if (c->length_eff < c->length) { P->capped = 1; P->cap_len = c->length_eff; }
        rc = cell_assemble(T, &k, o->keys, hay, n_hay, add_bos, bos, c, err, errlen);
    }
    cell_tokens_free(&k);
    return rc;
}

int needle_plan_build(const needle_opts *o, const needle_tokenizer *T, const doc_t *doc, uint64_t n_ctx,
                      int add_bos, int bos, needle_plan *P, char *err, size_t errlen) {
    int32_t *hay = NULL;   /* [n_hay] the current trial's haystack */
    size_t n_hay = 0;
    memset(P, 0, sizeof *P);
    if (o->tpl != NEEDLE_TPL_CHAT) P->tpl_chat[P->n_templates++] = 0;
    if (o->tpl != NEEDLE_TPL_RAW) P->tpl_chat[P->n_templates++] = 1;
    P->n = o->n_lengths * o->n_positions * o->trials * P->n_templates;
    P->trials = o->trials;
    P->c = calloc((size_t)P->n, sizeof *P->c);
    P->hay_off = calloc((size_t)o->trials, sizeof *P->hay_off);
    P->hay_end = calloc((size_t)o->trials, sizeof *P->hay_end);
    if (!P->c || !P->hay_off || !P->hay_end) return errmsg_set(err, errlen, -1, "out of memory");
    int maxL = 0;
    for (int i = 0; i < o->n_lengths; i++) maxL = o->lengths[i] > maxL ? o->lengths[i] : maxL;

    int w = 0, rc = 0;
    for (int t = 0; t < o->trials && !rc; t++) {
        int clash;
        free(hay);
        hay = NULL;
        /* each trial its own stretch of the corpus: drawn from (seed, t), away from the earlier ones */
        P->hay_off[t] = needle_hay_place(o->seed, t, doc->text, doc->n_text, hay_span((size_t)maxL),
                                         P->hay_off, P->hay_end, t, &clash);
        P->hay_overlap |= clash;
        rc = hay_tokens(T, doc, P->hay_off[t], t, (size_t)maxL, &hay, &n_hay, &P->hay_end[t], err, errlen);
        for (int ti = 0; ti < P->n_templates && !rc; ti++)
            for (int li = 0; li < o->n_lengths && !rc; li++)
                for (int pi = 0; pi < o->n_positions && !rc; pi++) {
                    needle_cell *c = &P->c[w++];
                    c->length = o->lengths[li];
                    c->position = o->positions[pi];
                    c->trial = t;
                    c->chat = P->tpl_chat[ti];
                    rc = cell_build(o, T, hay, n_hay, n_ctx, add_bos, bos, c, P, err, errlen);
                }
    }
    free(hay);
    if (rc) return -1;
    qsort(P->c, (size_t)P->n, sizeof *P->c, cmp_cells);
    return 0;
}

int needle_plan_dump(const needle_plan *P, const char *dir, char *err, size_t errlen) {
    if (cli_mkdir_p(dir, err, errlen)) return -1;
    for (int i = 0; i < P->n; i++) {
        const needle_cell *c = &P->c[i];
        char p[PATH_MAX + 64];
        snprintf(p, sizeof p, "%s/%s-L%d-p%d-t%d.tok", dir, c->chat ? "chat" : "raw", c->length, c->position,
                 c->trial);
        FILE *f = fopen(p, "w");
        if (!f) return errmsg_set(err, errlen, -1, "cannot create %s", p);
        for (size_t k = 0; k < c->n; k++) fprintf(f, "%d%c", c->prompt[k], k + 1 < c->n ? ' ' : '\n');
        fprintf(f, "# key %s needle_pos %zu first_cut %zu order %d gold", c->key_text, c->needle_pos, c->first_cut, i);
        for (size_t k = 0; k < c->n_gold; k++) fprintf(f, " %d", c->gold[k]);
        fprintf(f, "\n");
        fclose(f);
    }
    return 0;
}

/* ============================================================================================
 * The cost
 * ========================================================================================== */

static double cost_prefill(const needle_cost_model *m, double s, double e) {
    return m->a * (e - s) + m->b * (e * e - s * s) / 2;
}

void needle_plan_cost(const needle_plan *P, int gen, const needle_cost_model *m, const int32_t *cur,
                      size_t n_cur, needle_cost *out, double *cell_cost) {
    memset(out, 0, sizeof *out);
    const int32_t *prev = cur;
    size_t n_prev = n_cur;
    for (int i = 0; i < P->n; i++) {
        const needle_cell *c = &P->c[i];
        if (cell_cost) cell_cost[i] = 0;
        if (c->done) continue;
        size_t lcp = needle_common_prefix(prev, n_prev, c->prompt, c->n);
        if (lcp > c->n - 1) lcp = c->n - 1;
        out->cells++;
        out->prompt_tokens += (long)c->n;
        out->prefill_tokens += (long)(c->n - lcp);
        out->gold_tokens += (long)c->n_gold - 1;
        out->gen_tokens += gen;
        double s = cost_prefill(m, (double)lcp, (double)c->n) +
                   cost_prefill(m, (double)c->n, (double)(c->n + c->n_gold - 1)) +
                   gen * (m->d + m->b * (double)c->n);
        out->seconds += s;
        if (cell_cost) cell_cost[i] = s;
        /* the stream after the cell: prompt + gold[0, n_gold − 1), of which the prompt matters */
        prev = c->prompt;
        n_prev = c->n;
    }
}
