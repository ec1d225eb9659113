/* serve.c — strata-worker's --listen server: the requests (hello, tokenize, prefill, generate,
 * truncate, stats, vocab, shutdown) answered from one engine, and the connections (one owner at a
 * time, the hello deadline, the receive cap). See serve.h. */
#include "worker/serve.h"
#include "kernels/errmsg.h"
#include "kernels/clock.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t g_stop;   /* set by the signal handler (SIGINT, SIGTERM) only */
static void on_signal(int sig) { (void)sig; g_stop = 1; }

/* ---- requests ------------------------------------------------------------------------------ */

/* The hello reply: what this worker is and runs (so: the program's engine name and git hash). */
static void fill_hello(const engine *e, const serve_opts *so, proto_hello_rep *h) {
    snprintf(h->engine, sizeof h->engine, "%s", so->engine_name);
    snprintf(h->git, sizeof h->git, "%s", so->git);
    snprintf(h->model_sha256, sizeof h->model_sha256, "%s", e->m->sha256);
    snprintf(h->arch, sizeof h->arch, "%s", e->m->arch_name);
    char th[65];
    tok_hash(e->tok, th);
    snprintf(h->tokenizer_hash, sizeof h->tokenizer_hash, "%s", th);
    snprintf(h->kv_k, sizeof h->kv_k, "%s", engine_kv_name(e, 0));
    snprintf(h->kv_v, sizeof h->kv_v, "%s", engine_kv_name(e, 1));
    snprintf(h->device, sizeof h->device, "%s", backend_name(e->b));   /* backend and kernel ISA */
    h->n_vocab = (uint32_t)e->m->n_vocab;
    h->n_ctx = (uint64_t)e->n_ctx;
    h->n_layer = (uint32_t)e->m->n_layer;
    h->threads = (uint32_t)backend_threads(e->b);   /* what runs: the ref backend has one */
    h->kv_bytes_per_token = backend_kv_bytes_per_token(e->b);
    h->bos = tok_add_bos(e->tok) ? tok_bos(e->tok) : -1;
    h->n_expert = (uint32_t)e->m->n_expert;
    h->n_expert_used = (uint32_t)e->m->n_expert_used;
    /* the attention layout, a fact of the model file as the loader reads it (the llama backend checks
     * llama.cpp's window against it when it loads) */
    int window, n_full;
    model_window(e->m, &window, &n_full);
    h->has_window = 1;
    h->window = (uint32_t)window;
    h->layers_full = (uint32_t)n_full;
    /* the layers with a KV cache: all, or (a hybrid model) "N of L: l1,l2,..." (",..." when cut) */
    if (e->m->n_attn == e->m->n_layer) {
        snprintf(h->kv_layers, sizeof h->kv_layers, "all");
    } else {
        size_t at = (size_t)snprintf(h->kv_layers, sizeof h->kv_layers, "%d of %d:", e->m->n_attn, e->m->n_layer);
        for (int l = 0, first = 1; l < e->m->n_layer && at < sizeof h->kv_layers; l++) {
            if (e->m->layers[l].recurrent) continue;
            char num[16];
            int k = snprintf(num, sizeof num, "%s%d", first ? " " : ",", l);
            if (at + (size_t)k + 4 >= sizeof h->kv_layers) { snprintf(h->kv_layers + at, sizeof h->kv_layers - at, ",..."); break; }
            memcpy(h->kv_layers + at, num, (size_t)k + 1);
            at += (size_t)k;
            first = 0;
        }
    }
}

/* The vocab reply: every token's decoded piece, the control flags and the GGUF's chat template
 * (pointing into the model mapping). *pieces and *ints ([2 n_vocab + 1]: offsets, then control)
 * are malloc'd for the caller to free after the reply is sent. Returns 0 or a PROTO_E_* code. */
static int fill_vocab(engine *e, proto_vocab_rep *v, void **pieces, void **ints, char *err, size_t errlen) {
    int V = tok_n_vocab(e->tok);
    size_t maxp = tok_max_piece(e->tok), cap = (size_t)V * maxp + 1, n = 0;
    char *p = malloc(cap);                                          /* [cap] the pieces */
    int32_t *o = malloc(sizeof *o * (2 * (size_t)V + 1));          /* [V + 1] offsets, [V] control */
    *pieces = p;
    *ints = o;
    if (!p || !o) return errmsg_set(err, errlen, PROTO_E_INTERNAL, "out of memory");
    for (int t = 0; t < V; t++) {
        o[t] = (int32_t)n;
        if (n > INT32_MAX - maxp || tok_decode(e->tok, t, p, cap, &n))
            return errmsg_set(err, errlen, PROTO_E_INTERNAL, "cannot decode token %d", t);
        o[V + 1 + t] = tok_type(e->tok, t) == TOK_TYPE_CONTROL;
    }
    o[V] = (int32_t)n;
    const char *tpl = NULL;
    uint64_t tlen = 0;
    if (gguf_meta_str(e->m->g, "tokenizer.chat_template", &tpl, &tlen, NULL, 0) || tlen > PROTO_MAX_TEMPLATE)
        tlen = 0;   /* its type was checked at load (tok_load) */
    v->n_vocab = (uint32_t)V;
    v->pieces = p;
    v->n_pieces = n;
    v->offsets = o;
    v->control = o + V + 1;
    v->chat_template = tlen ? (char *)tpl : NULL;
    v->n_template = (size_t)tlen;
    return 0;
}

/* The request steps below answer one request type each into *rep from the engine. A payload a step
 * allocates is handed back in *owned1 / *owned2 (the caller frees both after the reply is sent,
 * also on an error). They return 0, or a PROTO_E_* code with the message in err [errlen]. */

/* tokenize: a text into token ids [n] (*owned1). */
static int do_tokenize(engine *e, const proto_tokenize_req *tr, proto_msg *rep, void **owned1, char *err,
                       size_t errlen) {
    int32_t *ids = NULL;
    size_t n = 0, nt = tr->n_text;
    if (tok_max_tokens(e->tok, nt) > PROTO_MAX_TOKENS) {
        size_t lo = 0, hi = nt;   /* the longest text whose bound fits: tok_max_tokens grows with n */
        while (lo < hi) {
            size_t mid = lo + (hi - lo + 1) / 2;
            if (tok_max_tokens(e->tok, mid) <= PROTO_MAX_TOKENS) lo = mid; else hi = mid - 1;
        }
        return errmsg_set(err, errlen, PROTO_E_TOOBIG,
                          "a text of %zu bytes may tokenise to up to %zu tokens, more than a reply "
                          "carries (%u): send at most %zu bytes per tokenize request", nt, tok_max_tokens(e->tok, nt),
                          PROTO_MAX_TOKENS, lo);
    }
    if (tok_encode(e->tok, tr->text, tr->n_text, tr->add_bos, tr->special, &ids, &n, err, errlen))
        return PROTO_E_BADARG;
    rep->tokenize_rep.tokens = ids;
    rep->tokenize_rep.n_tokens = n;
    *owned1 = ids;
    return 0;
}

/* prefill: tokens appended to the stream; the logit rows asked for (*owned1) and, when asked, the
 * experts each token was routed to (*owned2). */
static int do_prefill(engine *e, const proto_prefill_req *pr, proto_msg *rep, void **owned1, void **owned2,
                      char *err, size_t errlen) {
    float *rows = NULL;
    size_t nr = 0;
    /* routing entries of this request: [n_tokens][n_layer][n_expert_used] (0 for a dense model) */
    size_t n_routes = pr->n_tokens * (size_t)e->m->n_layer * (size_t)e->m->n_expert_used;
    int32_t *used = NULL;
    if (pr->rows > PROTO_ROWS_ALL) return errmsg_set(err, errlen, PROTO_E_BADARG, "rows must be 0, 1 or 2");
    if (pr->pin && pr->n_pin != n_routes)
        return errmsg_set(err, errlen, PROTO_E_BADARG,
                          "pin has %zu expert ids; %zu tokens x %d layers x %d experts per token = %zu", pr->n_pin,
                          pr->n_tokens, e->m->n_layer, e->m->n_expert_used, n_routes);
    if ((pr->experts || pr->pin) && n_routes > PROTO_MAX_ROUTES)
        return errmsg_set(err, errlen, PROTO_E_TOOBIG,
                          "the routing of %zu tokens (%zu expert ids) exceeds the cap of %u: send fewer "
                          "tokens per request", pr->n_tokens, n_routes, PROTO_MAX_ROUTES);
    if (pr->experts && n_routes && !(used = malloc(sizeof(int32_t) * n_routes)))
        return errmsg_set(err, errlen, PROTO_E_INTERNAL, "out of memory for the routing of %zu tokens",
                          pr->n_tokens);
    if (engine_prefill_routed(e, pr->tokens, pr->n_tokens, (int)pr->rows, pr->pin, used, &rows, &nr, err, errlen)) {
        free(used);
        return PROTO_E_RANGE;
    }
    rep->prefill_rep.n_past = (uint64_t)e->n_past;
    rep->prefill_rep.n_vocab = (uint32_t)e->m->n_vocab;
    rep->prefill_rep.n_rows = (uint32_t)nr;
    rep->prefill_rep.logits = rows;
    rep->prefill_rep.experts = used;
    rep->prefill_rep.n_experts = used ? n_routes : 0;
    *owned1 = rows;
    *owned2 = used;
    return 0;
}

/* generate: n tokens (*owned1) and their top-1/top-2 logit gaps (*owned2). */
static int do_generate(engine *e, const proto_generate_req *gr, proto_msg *rep, void **owned1, void **owned2,
                       char *err, size_t errlen) {
    int n = (int)gr->n;
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    float *gaps = malloc(sizeof(float) * (size_t)(n ? n : 1));
    *owned1 = toks;
    *owned2 = gaps;
    if (!toks || !gaps) return errmsg_set(err, errlen, PROTO_E_INTERNAL, "out of memory");
    double top_p = gr->top_p > 0 ? gr->top_p : 1.0;   /* 0: not sent */
    if (engine_generate_p(e, n, gr->temperature, top_p, gr->seed, toks, gaps, err, errlen)) return PROTO_E_RANGE;
    rep->generate_rep.tokens = toks;
    rep->generate_rep.gaps = gaps;
    rep->generate_rep.n = (size_t)n;
    rep->generate_rep.n_past = (uint64_t)e->n_past;
    return 0;
}

/* truncate: the stream cut back to a depth it holds. */
static int do_truncate(engine *e, uint64_t depth, proto_msg *rep, char *err, size_t errlen) {
    if (depth > (uint64_t)e->n_past || engine_truncate(e, (int)depth, err, errlen)) {
        if (!err[0]) errmsg_set(err, errlen, -1, "cannot truncate to depth %llu: the stream holds %d tokens",
                                (unsigned long long)depth, e->n_past);
        return PROTO_E_RANGE;
    }
    rep->truncate_rep.n_past = (uint64_t)e->n_past;
    return 0;
}

/* stats: the stream's depth, KV bytes, timing, peak RSS and the rechunk counters. */
static void fill_stats(const engine *e, proto_stats_rep *st) {
    st->n_past = (uint64_t)e->n_past;
    st->kv_bytes = (uint64_t)e->n_past * backend_kv_bytes_per_token(e->b);
    st->prefill_tokens = e->prefill_tokens;
    st->prefill_seconds = e->prefill_seconds;
    st->decode_tokens = e->decode_tokens;
    st->decode_seconds = e->decode_seconds;
    st->peak_rss = engine_peak_rss();
    st->has_rechunk = e->stream != NULL;
    st->rechunk_rows = e->rechunk_rows;
    st->rechunk_max = e->rechunk_max;
}

/* Answers one request into *rep. Payload buffers it allocates are returned in *owned1 / *owned2
 * (freed by the caller after the reply is sent). Returns 1 when the request was shutdown. */
static int handle(engine *e, const serve_opts *so, const proto_msg *req, proto_msg *rep, void **owned1,
                  void **owned2) {
    char err[512] = "";
    int rc = 0;
    proto_init(rep, req->type, 1, req->id);
    switch (req->type) {
    case PROTO_HELLO: fill_hello(e, so, &rep->hello_rep); break;
    case PROTO_TOKENIZE: rc = do_tokenize(e, &req->tokenize_req, rep, owned1, err, sizeof err); break;
    case PROTO_PREFILL: rc = do_prefill(e, &req->prefill_req, rep, owned1, owned2, err, sizeof err); break;
    case PROTO_GENERATE: rc = do_generate(e, &req->generate_req, rep, owned1, owned2, err, sizeof err); break;
    case PROTO_TRUNCATE: rc = do_truncate(e, req->truncate_req.depth, rep, err, sizeof err); break;
    case PROTO_STATS: fill_stats(e, &rep->stats_rep); break;
    case PROTO_VOCAB: rc = fill_vocab(e, &rep->vocab_rep, owned1, owned2, err, sizeof err); break;
    case PROTO_SHUTDOWN: return 1;
    default:
        rc = errmsg_set(err, sizeof err, PROTO_E_BADMSG, "unexpected message type %s", proto_type_name(req->type));
        break;
    }
    if (rc) proto_error(rep, req->id, rc, "%s", err);
    return 0;
}

/* ---- serving ------------------------------------------------------------------------------- */

#define SERVE_MAX_PIPES 4    /* the owner and a few more, which are told the worker is taken */
_Static_assert(SERVE_MAX_PIPES >= 2, "a full table must hold a connection that is not the owner");

/* Shared between the serving thread and nng's pipe callbacks (under mu). */
typedef struct {
    pthread_mutex_t mu;
    nng_pipe pipes[SERVE_MAX_PIPES];  /* the connections kept, oldest first */
    int64_t since[SERVE_MAX_PIPES];   /* when each connected (idle_clock) */
    int n_pipes;
    uint32_t owner;                   /* pipe id of the session's owner, 0 = none */
    int owner_left;                   /* the owner's connection closed: reset before the next request */
    uint64_t n_evicted;               /* connections closed to make room for a newer one */
    int64_t busy_ms;                  /* time spent on the owner's requests, those done */
    int64_t busy_from;                /* when the owner's request being served began, or -1 */
} serve_state;

/* The hello deadline's clock (ms): monotonic time less the time spent on the owner's requests. It
 * stands still while the worker computes for its owner, so a hello that waits in the queue behind
 * a long request is read before its connection has aged (under mu). */
static int64_t idle_clock(const serve_state *st) {
    int64_t now = clock_ms();
    return now - st->busy_ms - (st->busy_from >= 0 ? now - st->busy_from : 0);
}

/* Starts (busy 1) or ends (busy 0) the serving of an owner's request on the idle clock. */
static void set_busy(serve_state *st, int busy) {
    int64_t now = clock_ms();
    pthread_mutex_lock(&st->mu);
    if (busy) {
        st->busy_from = now;
    } else if (st->busy_from >= 0) {
        st->busy_ms += now - st->busy_from;
        st->busy_from = -1;
    }
    pthread_mutex_unlock(&st->mu);
}

/* Removes entry i of the table, keeping the order (under mu). */
static void drop_pipe(serve_state *st, int i) {
    for (int j = i + 1; j < st->n_pipes; j++) {
        st->pipes[j - 1] = st->pipes[j];
        st->since[j - 1] = st->since[j];
    }
    st->n_pipes--;
}

/* --exit-on-stdin-eof: 1 when stdin has reached its end (input that arrives is read and dropped).
 * Does not block. */
static int stdin_ended(void) {
    for (;;) {
        struct pollfd p = { .fd = 0, .events = POLLIN };
        if (poll(&p, 1, 0) <= 0) return 0;
        if (p.revents & (POLLERR | POLLNVAL)) return 1;
        char buf[256];
        ssize_t got = read(0, buf, sizeof buf);
        if (got == 0) return 1;
        if (got < 0) return errno != EINTR && errno != EAGAIN;
    }
}

/* The URL a client dials, for the "listening" line: the bound port in place of port 0, and this
 * machine's name in place of a wildcard host (0.0.0.0, ::, *). Writes into out [outlen]. */
static void announce_url(const char *url, int port, char *out, size_t outlen) {
    const char *sep = strstr(url, "://");
    snprintf(out, outlen, "%s", url);
    if (!sep || port <= 0 || !strncmp(url, "ipc", 3) || !strncmp(url, "inproc", 6)) return;
    const char *hp = sep + 3, *colon = strrchr(hp, ':');
    if (!colon) return;
    char host[256], name[256];
    snprintf(host, sizeof host, "%.*s", (int)(colon - hp), hp);
    if (!strcmp(host, "0.0.0.0") || !strcmp(host, "*") || !strcmp(host, "[::]") || !host[0]) {
        if (gethostname(name, sizeof name)) snprintf(name, sizeof name, "localhost");
        name[sizeof name - 1] = 0;
        snprintf(host, sizeof host, "%s", name);
    }
    snprintf(out, outlen, "%.*s%s:%d", (int)(hp - url), url, host, port);
}

/* A new connection is always kept: when the table is full, the oldest connection that is not the
 * owner is closed to make room (a connection that has not said hello holds no session, and the
 * owner's is never touched). So connections that never say hello cannot lock the owner out. */
static void on_pipe(nng_pipe p, nng_pipe_ev ev, void *arg) {
    serve_state *st = arg;
    uint32_t id = (uint32_t)nng_pipe_id(p);
    nng_pipe victim = NNG_PIPE_INITIALIZER;
    pthread_mutex_lock(&st->mu);
    if (ev == NNG_PIPE_EV_ADD_PRE) {
        if (st->n_pipes == SERVE_MAX_PIPES) {
            int v = 0;   /* exists: at most one entry is the owner */
            while ((uint32_t)nng_pipe_id(st->pipes[v]) == st->owner) v++;
            victim = st->pipes[v];
            drop_pipe(st, v);
            st->n_evicted++;
        }
        st->pipes[st->n_pipes] = p;
        st->since[st->n_pipes++] = idle_clock(st);
    } else if (ev == NNG_PIPE_EV_REM_POST) {
        for (int i = 0; i < st->n_pipes; i++)
            if ((uint32_t)nng_pipe_id(st->pipes[i]) == id) { drop_pipe(st, i); break; }
        if (st->owner == id) { st->owner = 0; st->owner_left = 1; }
    }
    pthread_mutex_unlock(&st->mu);
    if (nng_pipe_id(victim) > 0) nng_pipe_close(victim);   /* outside mu: its REM_POST takes it */
}

/* Closes every connection that is not the owner and connected hello_ms or more ago on the idle
 * clock: it did not say hello in time, or its hello was refused (BUSY). Called by the serving thread
 * between requests (at least once a second when idle). Returns how many. */
static int close_stale(serve_state *st, int64_t hello_ms) {
    nng_pipe gone[SERVE_MAX_PIPES];
    int n = 0;
    pthread_mutex_lock(&st->mu);
    int64_t now = idle_clock(st);
    for (int i = 0; i < st->n_pipes;) {
        if ((uint32_t)nng_pipe_id(st->pipes[i]) != st->owner && now - st->since[i] >= hello_ms) {
            gone[n++] = st->pipes[i];
            drop_pipe(st, i);
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&st->mu);
    for (int i = 0; i < n; i++) nng_pipe_close(gone[i]);
    return n;
}

/* The request cap (the decoder's max_len): a prefill of the whole context or a tokenize text (up to
 * 16 MiB, which gets a clear refusal when too long), never more than the protocol's 64 MiB. nng's
 * own frame limit is PROTO_REQ_FRAME_MAX, above it: a request between the two is read and answered
 * PROTO_E_TOOBIG on its connection, which stays open (nng would drop the connection instead). */
static size_t serve_recv_max(const engine *e) {
    size_t pre = (size_t)e->n_ctx * 4, cap = (size_t)PROTO_MAX_TOKENS * 4;
    if (pre < PROTO_MAX_TOKENS) pre = PROTO_MAX_TOKENS;
    return (pre < cap ? pre : cap) + PROTO_SLACK;
}

/* Decides whether the request from pipe may be served; fills rep with the refusal when not.
 * A hello from a connected pipe claims a free worker. */
static int admit(serve_state *st, engine *e, const proto_msg *req, nng_pipe pipe, proto_msg *rep) {
    uint32_t id = (uint32_t)nng_pipe_id(pipe), owner;
    int reset = 0, ok = 0;
    pthread_mutex_lock(&st->mu);
    if (st->owner_left) { st->owner_left = 0; reset = 1; }
    if (st->owner == 0 && req->type == PROTO_HELLO)
        for (int i = 0; i < st->n_pipes; i++)
            if ((uint32_t)nng_pipe_id(st->pipes[i]) == id) st->owner = id;   /* only a connection still open can own */
    owner = st->owner;
    ok = owner != 0 && owner == id;
    pthread_mutex_unlock(&st->mu);
    if (reset) {
        char err[256];
        engine_truncate(e, 0, err, sizeof err);
        fprintf(stderr, "strata-worker: the driver disconnected: state reset, free for the next one\n");
    }
    if (ok) return 1;
    if (owner == 0)
        proto_error(rep, req->id, PROTO_E_BUSY, "say hello first: the worker serves the connection whose "
                    "hello it answered, one at a time");
    else
        proto_error(rep, req->id, PROTO_E_BUSY, "worker is owned by another driver (one driver per worker: "
                    "start another worker, or wait until that driver disconnects)");
    return 0;
}

/* Between requests: logs the connections refused by TLS and closed since the last call, closes the
 * stale ones (close_stale), and (--exit-on-stdin-eof) looks at stdin. *refused and *evicted are
 * the counts as last logged. Returns 1 when stdin has closed and serving must stop. */
static int housekeep(serve_state *st, const serve_opts *so, nng_listener lst, int tls, uint64_t *refused,
                     uint64_t *evicted) {
    uint64_t r = tls ? proto_listener_refused(lst) : 0;
    if (r > *refused) {   /* the refused clients got nothing; the owner, if any, is unaffected */
        fprintf(stderr, "strata-worker: refused %llu connection%s (TLS handshake failed: no certificate, one "
                "the CA did not sign, or not TLS)\n", (unsigned long long)(r - *refused), r - *refused > 1 ? "s" : "");
        *refused = r;
    }
    int stale = close_stale(st, (int64_t)so->hello_s * 1000);
    pthread_mutex_lock(&st->mu);
    uint64_t ev = st->n_evicted;
    pthread_mutex_unlock(&st->mu);
    if (stale)
        fprintf(stderr, "strata-worker: closed %d connection%s that did not become the owner (an answered hello) "
                "within %d s (--hello-timeout)\n", stale, stale > 1 ? "s" : "", so->hello_s);
    if (ev > *evicted) {
        fprintf(stderr, "strata-worker: closed %llu connection%s without a hello to make room for newer ones "
                "(%d kept at most)\n", (unsigned long long)(ev - *evicted), ev - *evicted > 1 ? "s" : "",
                SERVE_MAX_PIPES);
        *evicted = ev;
    }
    if (so->exit_on_eof && stdin_ended()) {   /* checked at least once a second (receive timeout) */
        fprintf(stderr, "strata-worker: stdin closed (--exit-on-stdin-eof): stopping\n");
        return 1;
    }
    return 0;
}

/* Receives one request (or times out after 1 s), answers it and frees what it held. Sets *done when
 * it was shutdown. Returns -1 when the socket failed (logged; serving stops), else 0. */
static int serve_one(nng_socket s, serve_state *st, engine *e, const serve_opts *so, size_t recv_max, int *done,
                     char *err, size_t errlen) {
    proto_msg req, rep;
    void *o1 = NULL, *o2 = NULL;   /* the reply's payloads (handle) */
    nng_pipe pipe;
    int owned = 0;   /* the owner's request: the idle clock stops while it is served */
    int rc = proto_recv_pipe(s, recv_max, &req, &pipe, err, errlen);
    if (rc == PROTO_E_TIMEOUT) return 0;
    if (rc == PROTO_E_TRANSPORT) { fprintf(stderr, "strata-worker: %s\n", err); return -1; }
    if (rc) {
        proto_error(&rep, req.id, rc, "%s", err);
    } else if (admit(st, e, &req, pipe, &rep)) {
        set_busy(st, owned = 1);
        *done = handle(e, so, &req, &rep, &o1, &o2);
        if (*done) proto_init(&rep, PROTO_SHUTDOWN, 1, req.id);
    }
    int sent = proto_reply(s, &rep, err, errlen);
    if (sent == PROTO_E_TIMEOUT || sent == PROTO_E_TRANSPORT) {
        fprintf(stderr, "strata-worker: reply failed: %s: closing that connection\n", err);
        if (nng_pipe_id(pipe) > 0) nng_pipe_close(pipe);
    } else if (sent) {   /* could not be encoded: nothing went out, say why instead */
        char err2[512];
        fprintf(stderr, "strata-worker: reply failed: %s\n", err);
        proto_error(&rep, req.id, PROTO_E_INTERNAL, "reply failed: %s", err);
        proto_reply(s, &rep, err2, sizeof err2);
    }
    if (owned) set_busy(st, 0);
    free(o1);
    free(o2);
    proto_msg_free(&req);
    return 0;
}

/* nng_close drops a reply still queued: after shutdown, give the owner up to 1 s to read it and
 * hang up (the driver closes its socket once the reply is in) */
static void wait_owner_gone(serve_state *st) {
    for (int t = 0; t < 100; t++) {
        pthread_mutex_lock(&st->mu);
        int gone = st->owner == 0;
        pthread_mutex_unlock(&st->mu);
        if (gone) break;
        struct timespec ts = { 0, 10 * 1000000L };
        nanosleep(&ts, NULL);
    }
}

int serve_run(engine *e, const serve_opts *so, char *err, size_t errlen) {
    nng_socket s;
    char url[1024], shown[1400];
    serve_state st;
    nng_listener lst;
    uint64_t refused = 0;   /* connections refused before they became pipes, as last logged */
    uint64_t evicted = 0;   /* st.n_evicted as last logged */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    memset(&st, 0, sizeof st);
    st.busy_from = -1;
    pthread_mutex_init(&st.mu, NULL);
    size_t recv_max = serve_recv_max(e);
    const proto_tls *tls = so->tls.cert ? &so->tls : NULL;
    if (proto_listen_url(so->url, tls != NULL, so->allow_plain, url, sizeof url, err, errlen) ||
        proto_listen_tls(url, PROTO_REQ_FRAME_MAX, 1000, on_pipe, &st, tls, &s, &lst, err, errlen)) {
        pthread_mutex_destroy(&st.mu);
        return 1;
    }
    announce_url(url, proto_listener_port(lst), shown, sizeof shown);
    printf("strata-worker: listening %s\n", shown);   /* for a launcher (ssh, srun) to read */
    fflush(stdout);
    /* A reply waits while the connection still sends the previous one (nng's rep0 queues it with the
     * send timeout): 1 s, the receive poll, was short enough for a starved nng thread to make a reply
     * vanish and its driver wait for it until its 30 min request timeout; 60 s, and a reply that still
     * cannot go closes the connection (serve_one) so that its client fails at once. */
    nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, 60000);
    fprintf(stderr, "strata-worker: serving %s (kv %s/%s%s)\n", shown, engine_kv_name(e, 0), engine_kv_name(e, 1),
            tls ? "; TLS, client certificates required" : "");
    int done = 0;
    while (!done && !g_stop) {
        if (housekeep(&st, so, lst, tls != NULL, &refused, &evicted)) break;
        if (serve_one(s, &st, e, so, recv_max, &done, err, errlen)) break;
    }
    if (done) wait_owner_gone(&st);
    nng_close(s);
    pthread_mutex_destroy(&st.mu);
    return 0;
}
