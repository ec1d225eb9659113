/* arm_check.c — what the driver accepts from a worker (arm.h, "what workers say"): the values of
 * the handshake, every reply against its request, and the label of a remote arm whose worker runs
 * other K/V formats than its name says. A worker is someone else's process on someone else's
 * machine: proto_decode has checked a reply's shape (types, caps, payload lengths); here its values
 * are checked against what was asked, so that no id outside the vocabulary, no row count or
 * stream length that does not fit, and no infinite or negative time reaches a TSV, the journal or
 * meta.json. */
#include "driver/arm.h"
#include "kernels/errmsg.h"

#include <math.h>
#include <string.h>

#define CHECK_MAX_LAYER  4096   /* the worker's loader caps (worker/model.h MODEL_MAX_LAYER, */
#define CHECK_MAX_EXPERT 4096   /* MODEL_MAX_EXPERT); the driver does not include worker/ */

/* A hello string: printable ASCII only (it is printed in the handshake table and written to
 * meta.json). Returns 0 or ARM_E_REPLY naming the field. */
static int str_ok(const char *field, const char *s, char *err, size_t errlen) {
    for (size_t i = 0; s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 32 || c > 126)
            return errmsg_set(err, errlen, ARM_E_REPLY, "hello reply: %s holds the byte 0x%02x at %zu (only printable "
                              "ASCII is accepted)", field, c, i);
    }
    return 0;
}

int arm_check_hello(const proto_hello_rep *h, char *err, size_t errlen) {
    const struct { const char *name, *v; } s[] = {
        { "engine", h->engine }, { "git", h->git }, { "model_sha256", h->model_sha256 }, { "arch", h->arch },
        { "tokenizer_hash", h->tokenizer_hash }, { "kv_k", h->kv_k }, { "kv_v", h->kv_v },
        { "device", h->device }, { "kv_layers", h->kv_layers } };
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        if (str_ok(s[i].name, s[i].v, err, errlen)) return ARM_E_REPLY;
    if (!arm_valid_name(h->kv_k) || !arm_valid_name(h->kv_v))
        return errmsg_set(err, errlen, ARM_E_REPLY, "hello reply: kv_k '%s' / kv_v '%s' is not a KV format name "
                          "(1..%d printable characters, no spaces, quotes, '|' or ',')", h->kv_k, h->kv_v,
                          ARM_NAME_MAX - 1);
    if (h->n_vocab < 1)
        return errmsg_set(err, errlen, ARM_E_REPLY, "hello reply: n_vocab is 0");
    if (h->bos < -1 || (int64_t)h->bos >= (int64_t)h->n_vocab)
        return errmsg_set(err, errlen, ARM_E_REPLY, "hello reply: bos %d is outside [-1, n_vocab %u)", h->bos,
                          h->n_vocab);
    if (h->n_ctx < 1 || h->n_ctx > INT32_MAX)
        return errmsg_set(err, errlen, ARM_E_REPLY, "hello reply: n_ctx %llu is outside [1, %d]",
                          (unsigned long long)h->n_ctx, INT32_MAX);
    if (h->n_layer < 1 || h->n_layer > CHECK_MAX_LAYER)
        return errmsg_set(err, errlen, ARM_E_REPLY, "hello reply: n_layer %u is outside [1, %d]", h->n_layer,
                          CHECK_MAX_LAYER);
    if (h->threads < 1)
        return errmsg_set(err, errlen, ARM_E_REPLY, "hello reply: threads is 0");
    if (h->n_expert > CHECK_MAX_EXPERT || h->n_expert_used > h->n_expert || (h->n_expert && !h->n_expert_used))
        return errmsg_set(err, errlen, ARM_E_REPLY, "hello reply: n_expert %u, n_expert_used %u (expected 0, 0 or "
                          "1 <= n_expert_used <= n_expert <= %d)", h->n_expert, h->n_expert_used, CHECK_MAX_EXPERT);
    if (h->kv_bytes_per_token > INT64_MAX)
        return errmsg_set(err, errlen, ARM_E_REPLY, "hello reply: kv_bytes_per_token %llu is out of range",
                          (unsigned long long)h->kv_bytes_per_token);
    /* the attention layout (when sent): no window and every layer full, or a window and at least one
     * layer that slides; the window is not bounded by n_ctx (a worker may reserve less context than
     * the model's window: its layers then never slide in practice), only like n_ctx itself */
    if (h->has_window && (h->window > INT32_MAX || h->layers_full > h->n_layer ||
                          (h->window == 0 && h->layers_full != h->n_layer) ||
                          (h->window > 0 && h->layers_full == h->n_layer)))
        return errmsg_set(err, errlen, ARM_E_REPLY, "hello reply: window %u with %u of n_layer %u layers reading the "
                          "whole context (expected window 0 with all of them, or a window in [1, %d] with fewer)",
                          h->window, h->layers_full, h->n_layer, INT32_MAX);
    return 0;
}

/* ids [n] (what names the reply) in [0, V). Returns 0 or ARM_E_REPLY naming the first one outside. */
static int ids_ok(const char *what, const int32_t *ids, size_t n, uint32_t V, char *err, size_t errlen) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= V)
            return errmsg_set(err, errlen, ARM_E_REPLY, "%s: token id %d at index %zu is outside the vocabulary "
                              "[0, %u)", what, ids[i], i, V);
    return 0;
}

/* A stream length n_past against the expected one (want < 0: unknown) and the context. */
static int past_ok(const char *what, uint64_t n_past, int64_t want, uint64_t n_ctx, char *err, size_t errlen) {
    if (want >= 0 && n_past != (uint64_t)want)
        return errmsg_set(err, errlen, ARM_E_REPLY, "%s: n_past %llu, expected %lld", what,
                          (unsigned long long)n_past, (long long)want);
    if (n_past > n_ctx)
        return errmsg_set(err, errlen, ARM_E_REPLY, "%s: n_past %llu exceeds the context of %llu tokens", what,
                          (unsigned long long)n_past, (unsigned long long)n_ctx);
    return 0;
}

/* The checks of arm_check_reply, without the bookkeeping: 0 with *n_past the stream's new length
 * (-1 unknown), or ARM_E_REPLY. */
static int reply_ok(const arm *a, const proto_msg *req, const proto_msg *rep, int64_t *n_past, char *err,
                    size_t errlen) {
    const proto_hello_rep *h = &a->hello;
    const int64_t known = a->n_past;
    *n_past = known;
    if (rep->type != req->type)   /* proto_call already refuses this; kept so that nothing else slips by */
        return errmsg_set(err, errlen, ARM_E_REPLY, "a %s reply to a %s request", proto_type_name(rep->type),
                          proto_type_name(req->type));
    switch (req->type) {
    case PROTO_HELLO:
        *n_past = 0;   /* a hello answered on a new connection: the worker reset its stream */
        return arm_check_hello(&rep->hello_rep, err, errlen);
    case PROTO_TOKENIZE:
        return ids_ok("tokenize reply", rep->tokenize_rep.tokens, rep->tokenize_rep.n_tokens, h->n_vocab, err, errlen);
    case PROTO_VOCAB:
        if (rep->vocab_rep.n_vocab < 1 || rep->vocab_rep.n_vocab > h->n_vocab)
            return errmsg_set(err, errlen, ARM_E_REPLY, "vocab reply: n_vocab %u is outside [1, the handshake's %u]",
                              rep->vocab_rep.n_vocab, h->n_vocab);
        return 0;
    case PROTO_PREFILL: {
        const proto_prefill_req *q = &req->prefill_req;
        const proto_prefill_rep *p = &rep->prefill_rep;
        uint64_t rows = q->rows == PROTO_ROWS_ALL ? q->n_tokens : q->rows == PROTO_ROWS_LAST ? 1 : 0;
        if (p->n_vocab != h->n_vocab)
            return errmsg_set(err, errlen, ARM_E_REPLY, "prefill reply: n_vocab %u, the handshake said %u", p->n_vocab,
                              h->n_vocab);
        if (p->n_rows != rows || (rows && !p->logits))
            return errmsg_set(err, errlen, ARM_E_REPLY, "prefill reply: n_rows %u for %zu tokens, expected %llu",
                              p->n_rows, q->n_tokens, (unsigned long long)rows);
        int64_t want = known >= 0 ? known + (int64_t)q->n_tokens : -1;
        if (past_ok("prefill reply", p->n_past, want, h->n_ctx, err, errlen)) return ARM_E_REPLY;
        if (p->n_past < q->n_tokens)
            return errmsg_set(err, errlen, ARM_E_REPLY, "prefill reply: n_past %llu is less than the %zu tokens sent",
                              (unsigned long long)p->n_past, q->n_tokens);
        uint64_t routes = (uint64_t)q->n_tokens * h->n_layer * h->n_expert_used;
        uint64_t want_ex = q->experts ? routes : 0;
        if (p->n_experts != want_ex || (want_ex && !p->experts))
            return errmsg_set(err, errlen, ARM_E_REPLY, "prefill reply: %zu expert ids, expected %llu (%zu tokens x "
                              "%u layers x %u experts per token%s)", p->n_experts, (unsigned long long)want_ex,
                              q->n_tokens, h->n_layer, h->n_expert_used, q->experts ? "" : "; none were asked for");
        for (size_t i = 0; i < p->n_experts; i++)
            if (p->experts[i] < 0 || (uint32_t)p->experts[i] >= h->n_expert)
                return errmsg_set(err, errlen, ARM_E_REPLY, "prefill reply: expert id %d at index %zu is outside "
                                  "[0, n_expert %u)", p->experts[i], i, h->n_expert);
        *n_past = (int64_t)p->n_past;
        return 0;
    }
    case PROTO_GENERATE: {
        const proto_generate_rep *g = &rep->generate_rep;
        size_t n = req->generate_req.n;
        if (g->n != n || (n && (!g->tokens || !g->gaps)))
            return errmsg_set(err, errlen, ARM_E_REPLY, "generate reply: %zu tokens, %zu were asked for", g->n, n);
        if (ids_ok("generate reply", g->tokens, n, h->n_vocab, err, errlen)) return ARM_E_REPLY;
        for (size_t i = 0; i < n; i++)
            if (!isfinite(g->gaps[i]) || g->gaps[i] < 0)
                return errmsg_set(err, errlen, ARM_E_REPLY, "generate reply: gap %g at index %zu is not a finite "
                                  "number >= 0 (top-1 minus top-2 logit)", (double)g->gaps[i], i);
        int64_t want = known >= 0 ? known + (int64_t)(n ? n - 1 : 0) : -1;   /* the stream grows by n - 1 */
        if (past_ok("generate reply", g->n_past, want, h->n_ctx, err, errlen)) return ARM_E_REPLY;
        *n_past = (int64_t)g->n_past;
        return 0;
    }
    case PROTO_TRUNCATE:
        if (rep->truncate_rep.n_past != req->truncate_req.depth)
            return errmsg_set(err, errlen, ARM_E_REPLY, "truncate reply: n_past %llu after a truncate to %llu",
                              (unsigned long long)rep->truncate_rep.n_past,
                              (unsigned long long)req->truncate_req.depth);
        *n_past = (int64_t)rep->truncate_rep.n_past;
        return 0;
    case PROTO_STATS: {
        const proto_stats_rep *s = &rep->stats_rep;
        if (past_ok("stats reply", s->n_past, known, h->n_ctx, err, errlen)) return ARM_E_REPLY;
        if (s->kv_bytes != s->n_past * h->kv_bytes_per_token)   /* n_past <= 2^31, kv_bytes_per_token < 2^63 */
            return errmsg_set(err, errlen, ARM_E_REPLY, "stats reply: kv_bytes %llu is not n_past %llu x "
                              "kv_bytes_per_token %llu", (unsigned long long)s->kv_bytes,
                              (unsigned long long)s->n_past, (unsigned long long)h->kv_bytes_per_token);
        const struct { const char *name; double v; } sec[] = { { "prefill_seconds", s->prefill_seconds },
                                                               { "decode_seconds", s->decode_seconds } };
        for (int i = 0; i < 2; i++)
            if (!isfinite(sec[i].v) || sec[i].v < 0)
                return errmsg_set(err, errlen, ARM_E_REPLY, "stats reply: %s %g is not a finite number >= 0",
                                  sec[i].name, sec[i].v);
        const struct { const char *name; uint64_t v; } cnt[] = { { "prefill_tokens", s->prefill_tokens },
                                                                 { "decode_tokens", s->decode_tokens },
                                                                 { "peak_rss", s->peak_rss } };
        for (int i = 0; i < 3; i++)
            if (cnt[i].v > INT64_MAX)
                return errmsg_set(err, errlen, ARM_E_REPLY, "stats reply: %s %llu is out of range", cnt[i].name,
                                  (unsigned long long)cnt[i].v);
        *n_past = (int64_t)s->n_past;
        return 0;
    }
    default:
        return 0;   /* shutdown: no fields */
    }
}

int arm_check_reply(arm *a, const proto_msg *req, const proto_msg *rep, char *err, size_t errlen) {
    int64_t n_past;
    int rc = reply_ok(a, req, rep, &n_past, err, errlen);
    a->n_past = rc ? -1 : n_past;
    return rc;
}

/* ---- remote arms that run other formats than their name says ------------------------------ */

int arm_kv_mismatch(const arm *a) {
    return a->remote && a->have_hello && a->kv_k[0] &&
           (strcmp(a->kv_k, a->hello.kv_k) || strcmp(a->kv_v, a->hello.kv_v));
}

int arm_ran_label(const arm *a, char *out, char *err, size_t errlen) {
    char base[ARM_NAME_MAX], ran[2 * PROTO_STR_MAX], label[3 * PROTO_STR_MAX];
    snprintf(base, sizeof base, "%s", a->name);
    const char *suffix = "";
    char *hash = strrchr(base, '#');
    if (hash && hash[1] && strspn(hash + 1, "0123456789") == strlen(hash + 1)) {
        suffix = a->name + (hash - base);
        *hash = 0;
    }
    if (!strcmp(a->hello.kv_k, a->hello.kv_v)) snprintf(ran, sizeof ran, "%s", a->hello.kv_k);
    else snprintf(ran, sizeof ran, "%s/%s", a->hello.kv_k, a->hello.kv_v);
    snprintf(label, sizeof label, "%s[ran:%s]%s", base, ran, suffix);
    if (strlen(label) >= ARM_NAME_MAX || !arm_valid_name(label))
        return errmsg_set(err, errlen, ARM_E_SPEC, "arm %s runs %s: its label %s does not fit in %d characters (give "
                          "it a shorter name)", a->name, ran, label, ARM_NAME_MAX - 1);
    snprintf(out, ARM_NAME_MAX, "%s", label);
    return 0;
}

int arm_relabel_ran(arm *arms, int n, char *err, size_t errlen) {
    for (int i = 0; i < n; i++) {
        if (!arm_kv_mismatch(&arms[i])) continue;
        char label[ARM_NAME_MAX];
        int rc = arm_ran_label(&arms[i], label, err, errlen);
        if (rc) return rc;
        for (int j = 0; j < n; j++)
            if (j != i && !strcmp(arms[j].name, label))
                return errmsg_set(err, errlen, ARM_E_SPEC, "arm %s runs other formats than its name says, and its "
                                  "label %s is another arm's name", arms[i].name, label);
        snprintf(arms[i].name, sizeof arms[i].name, "%s", label);
    }
    return 0;
}
