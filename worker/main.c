/* strata-worker — one arm's engine. By hand: prefill a prompt or token file, dump every
 * position's logits, generate greedily, tokenise. For the driver: --listen URL serves the protocol
 * of proto/proto.h until a shutdown request (or SIGTERM/SIGINT). See usage() for the options.
 * Exit codes: 0 ok, 1 runtime error (also a model file truncated under a worker that maps it,
 * --mmap-weights: the mapping faults with SIGBUS, caught here with a message), 2 usage error.
 *
 * Serving: one driver owns the worker at a time. The first connection whose hello is answered owns
 * the session (its nng pipe); every request from another connection gets a PROTO_E_BUSY error and
 * changes nothing. When the owner's connection closes the state is reset (n_past 0) and the next
 * hello takes over. At most SERVE_MAX_PIPES connections are kept: a new one replaces the oldest
 * that is not the owner, and one that has not become the owner within --hello-timeout seconds
 * (time spent on the owner's requests not counted) is closed, so connections that never say hello
 * can neither lock the owner out nor stay. A request over serve_recv_max() bytes (and within nng's
 * frame limit, PROTO_REQ_FRAME_MAX) gets a PROTO_E_TOOBIG reply on a connection that stays open;
 * nng drops a larger frame with its connection. A tokenize request whose text could give more tokens
 * than a reply carries is refused before tokenising (tok_max_tokens). */
#include "proto/proto.h"
#include "kernels/errmsg.h"
#include "kernels/clock.h"
#include "proto/safeio.h"
#include "proto/tokfile.h"
#include "worker/engine.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef STRATA_GIT
#define STRATA_GIT "unknown"
#endif
#define ENGINE_NAME "strata-worker 0.1"

static void usage(FILE *f) {
    fprintf(f,
        "usage: strata-worker --model FILE [options]\n"
        "  --model FILE        GGUF model (required)\n"
        "  --kv FMT            KV format for K and V (default f16): f32 bf16 f16 int8 q8_0 q4_0 q4_0r\n"
        "                      fp8 (e4m3) q4_1 q5_0 q5_1 iq4_nl e5m2 e4m3s e5m2s (fp8 with a per-token-\n"
        "                      per-head scale) nvfp4 mxfp4; FMT+rot / FMT+roth / FMT+rotp: rotated by the\n"
        "                      Hadamard transform of each 64-value block / of the whole head / of each\n"
        "                      block of the largest power of two dividing the head dim (llama.cpp's K\n"
        "                      rotation; q4_0r = q4_0+roth);\n"
        "                      or per layer and KV head, FMT@N, FMT@N-M, FMT@-N (from the end),\n"
        "                      FMT@hK (KV head K), FMT@N-M:hK joined by '+', one plain FMT for the rest:\n"
        "                      --kv int8+f16@0+f16@-1 keeps the first and last layers in f16,\n"
        "                      --kv q4_0+roth+f16@h0 KV head 0 in f16; kivi2 / kivi4 (KIVI: K per channel over\n"
        "                      G tokens, V per token, the recent ones in f16; kivi4-g32-r128 = kivi4);\n"
        "                      tq3 / tq4: whole-head rotation + 3 / 4-bit Lloyd-Max codebook\n"
        "  --kv-k FMT, --kv-v FMT   set K and V separately\n"
        "  --backend B         what runs the forward passes: cpu (strata's own, the default), ref (the\n"
        "                      same pass in plain C, one thread: bit-identical to cpu and slow, a check;\n"
        "                      dense llama, qwen2, qwen3 and gemma3 only, it refuses other models naming\n"
        "                      the feature) or llama /\n"
        "                      llama:cpu (llama.cpp's libllama, in a build made by `make llama`; its KV\n"
        "                      formats: f32 f16 bf16 q8_0 q4_0 q4_1 iq4_nl q5_0 q5_1, one K and one V for\n"
        "                      all layers; it is not batch-invariant in every configuration);\n"
        "                      llama:cuda:N, llama:hip:N, llama:vulkan:N, llama:metal or a ggml device\n"
        "                      name run on that device, in a libllama built for it\n"
        "  --flash-attn M      llama backend: on, off or auto (llama.cpp's default); a quantised V needs it\n"
        "  --kv-rotation R     llama backend: on (llama.cpp's default: it rotates quantised K/V of head dims\n"
        "                      that are multiples of 64) or off (LLAMA_ATTN_ROT_DISABLE=1 for this process)\n"
        "  --kv-resident R     llama backend on a device: device (default: the KV cache where it computes)\n"
        "                      or host (the KV cache in host memory, llama.cpp's offload_kqv off: longer\n"
        "                      contexts than device memory holds, slower; the device name ends +kv-host)\n"
        "  --prefill N         prefill chunk size in tokens (default 512)\n"
        "  --rope-angles A     exact (default: each angle in double, no drift with depth) or f32 (in f32\n"
        "                      as llama.cpp computes them, for parity with it; drifts with depth); the\n"
        "                      handshake's device then ends in +rope-f32 (docs/DESIGN.md §3.2)\n"
        "  --max-context N     context to reserve (default: the model's)\n"
        "  --threads N         threads (default 2)\n"
        "  --mem-arms N        the memory check counts N workers like this one (default 1; the driver\n"
        "                      passes its number of local arms)\n"
        "  --mem-other-weights B  the memory check also counts B bytes of the other workers' weights (the\n"
        "                      driver passes the other files' sizes when arms run different models, and\n"
        "                      with copied weights, the default, every other local worker's file)\n"
        "  --mmap-weights      map the model file instead of copying it into memory: workers on one model\n"
        "                      then share one copy (less memory with many arms), but the decode reads the\n"
        "                      weights through 4 KiB pages (the copy sits on transparent huge pages where\n"
        "                      the kernel grants them: ~15%% less CPU per decoded token on a Zen 3 VM;\n"
        "                      kernels/NOTES.md change 26). The results are the same bits either way\n"
        "  --allow-overcommit  start even when the KV cache at full context (x arms) plus the weights\n"
        "                      exceeds MemAvailable (the cache is committed as it fills; the check is\n"
        "                      about what it will need). RLIMIT_AS is still enforced\n"
        "  --tokens-file F     token ids, decimal, separated by commas or whitespace\n"
        "  --prompt TEXT       text to tokenise (BOS added when the model wants it)\n"
        "  --dump-logits OUT   write every position's row: int32 vocab, int32 rows, rows x vocab f32 (LE)\n"
        "  --max-new N         generate N tokens after the prompt; print their ids on stdout\n"
        "  --temperature T     0 = greedy (default); --seed S for T > 0\n"
        "  --tokenize          read text on stdin, print its token ids (BOS as the model wants it)\n"
        "  --detokenize        read token ids on stdin, print their text\n"
        "                      (both load only the tokenizer: a vocabulary-only GGUF will do)\n"
        "  --timing            print on stderr: prefill/decode timing, peak RSS, how the weights are held\n"
        "                      (copy or mmap) and the bytes on transparent huge pages\n"
        "  --listen URL        serve the driver protocol on ipc://PATH, tcp://HOST:PORT or tls+tcp://HOST:PORT;\n"
        "                      the first client to say hello owns the worker until it disconnects. No HOST\n"
        "                      (tcp://:5555) is loopback; PORT 0 picks a free port. The URL listened on is\n"
        "                      printed on stdout: \"strata-worker: listening URL\"\n"
        "  --tls-cert F, --tls-key F, --tls-ca F   PEM files for tls+tcp://: this worker's certificate and\n"
        "                      key, and the CA that must have signed the driver's certificate (mutual TLS:\n"
        "                      a client without such a certificate is never connected)\n"
        "  --allow-plain-tcp   allow plain tcp:// on a non-loopback address (anyone who reaches the port\n"
        "                      can use the worker: a trusted network only)\n"
        "  --exit-on-stdin-eof exit when stdin closes (a worker started through ssh or srun ends with its\n"
        "                      driver; the driver's --launch passes it)\n"
        "  --hello-timeout S   close a connection that has not become the owner (an answered hello) S seconds\n"
        "                      after it connected, not counting time spent on the owner's requests (default\n"
        "                      15: above the driver's 10 s wait for a hello reply). At most 4 connections are\n"
        "                      kept; a new one replaces the oldest that is not the owner\n"
        "examples:\n"
        "  strata-worker --model m.gguf --kv int8 --prompt 'Once upon a time' --max-new 32\n"
        "  strata-worker --model m.gguf --kv f32 --tokens-file t.txt --dump-logits rows.bin\n"
        "  strata-worker --model m.gguf --kv int8 --listen tcp://127.0.0.1:5555\n"
        "  strata-worker --model m.gguf --kv int8 --listen tls+tcp://gpu1:5555 --tls-cert gpu1.pem \\\n"
        "      --tls-key gpu1.key --tls-ca ca.pem\n");
}

static volatile sig_atomic_t g_stop;   /* set by the signal handler only */
static void on_signal(int sig) { (void)sig; g_stop = 1; }

/* SIGBUS: the model is memory-mapped from its file; a file truncated (or rewritten in place) while
 * the worker runs makes the next read of a vanished page fault. Rather than dying silently by a
 * signal, say so and exit 1. Only write() and _exit() here (async-signal-safe); other bus errors
 * (si_code not BUS_ADRERR) keep the default action (SA_RESETHAND: returning re-faults). */
static const char *g_model_path = "the model file";   /* set once in main, before any mapping */
static void say(const char *s) { (void)!write(2, s, strlen(s)); }
static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    (void)sig;
    (void)uc;
    if (si->si_code != BUS_ADRERR) return;
    say("strata-worker: error: bus error reading the memory-mapped model ");
    say(g_model_path);
    say(": the file was truncated or rewritten while the worker ran (restart it with an intact file)\n");
    _exit(1);
}

static void fill_hello(const engine *e, proto_hello_rep *h) {
    snprintf(h->engine, sizeof h->engine, "%s", ENGINE_NAME);
    snprintf(h->git, sizeof h->git, "%s", STRATA_GIT);
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
    h->threads = (uint32_t)e->cfg.threads;
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

/* Answers one request into *rep. Payload buffers it allocates are returned in *owned (freed by
 * the caller after the reply is sent). Returns 1 when the request was shutdown. */
static int handle(engine *e, const proto_msg *req, proto_msg *rep, void **owned1, void **owned2) {
    char err[512] = "";
    int rc = 0;
    proto_init(rep, req->type, 1, req->id);
    switch (req->type) {
    case PROTO_HELLO:
        fill_hello(e, &rep->hello_rep);
        break;
    case PROTO_TOKENIZE: {
        int32_t *ids = NULL;
        size_t n = 0, nt = req->tokenize_req.n_text;
        if (tok_max_tokens(e->tok, nt) > PROTO_MAX_TOKENS) {
            size_t lo = 0, hi = nt;   /* the longest text whose bound fits: tok_max_tokens grows with n */
            while (lo < hi) {
                size_t mid = lo + (hi - lo + 1) / 2;
                if (tok_max_tokens(e->tok, mid) <= PROTO_MAX_TOKENS) lo = mid; else hi = mid - 1;
            }
            rc = errmsg_set(err, sizeof err, PROTO_E_TOOBIG,
                            "a text of %zu bytes may tokenise to up to %zu tokens, more than a reply "
                            "carries (%u): send at most %zu bytes per tokenize request", nt, tok_max_tokens(e->tok, nt),
                            PROTO_MAX_TOKENS, lo);
            break;
        }
        if (tok_encode(e->tok, req->tokenize_req.text, req->tokenize_req.n_text, req->tokenize_req.add_bos,
                       req->tokenize_req.special, &ids, &n, err, sizeof err)) { rc = PROTO_E_BADARG; break; }
        rep->tokenize_rep.tokens = ids;
        rep->tokenize_rep.n_tokens = n;
        *owned1 = ids;
        break;
    }
    case PROTO_PREFILL: {
        const proto_prefill_req *pr = &req->prefill_req;
        float *rows = NULL;
        size_t nr = 0;
        /* routing entries of this request: [n_tokens][n_layer][n_expert_used] (0 for a dense model) */
        size_t n_routes = pr->n_tokens * (size_t)e->m->n_layer * (size_t)e->m->n_expert_used;
        int32_t *used = NULL;
        if (pr->rows > PROTO_ROWS_ALL) { rc = errmsg_set(err, sizeof err, PROTO_E_BADARG, "rows must be 0, 1 or 2"); break; }
        if (pr->pin && pr->n_pin != n_routes) {
            rc = errmsg_set(err, sizeof err, PROTO_E_BADARG,
                            "pin has %zu expert ids; %zu tokens x %d layers x %d experts per token = %zu", pr->n_pin,
                            pr->n_tokens, e->m->n_layer, e->m->n_expert_used, n_routes);
            break;
        }
        if ((pr->experts || pr->pin) && n_routes > PROTO_MAX_ROUTES) {
            rc = errmsg_set(err, sizeof err, PROTO_E_TOOBIG,
                            "the routing of %zu tokens (%zu expert ids) exceeds the cap of %u: send fewer "
                            "tokens per request", pr->n_tokens, n_routes, PROTO_MAX_ROUTES);
            break;
        }
        if (pr->experts && n_routes && !(used = malloc(sizeof(int32_t) * n_routes))) {
            rc = errmsg_set(err, sizeof err, PROTO_E_INTERNAL, "out of memory for the routing of %zu tokens",
                            pr->n_tokens);
            break;
        }
        if (engine_prefill_routed(e, pr->tokens, pr->n_tokens, (int)pr->rows, pr->pin, used, &rows, &nr, err,
                                  sizeof err)) {
            free(used);
            rc = PROTO_E_RANGE;
            break;
        }
        rep->prefill_rep.n_past = (uint64_t)e->n_past;
        rep->prefill_rep.n_vocab = (uint32_t)e->m->n_vocab;
        rep->prefill_rep.n_rows = (uint32_t)nr;
        rep->prefill_rep.logits = rows;
        rep->prefill_rep.experts = used;
        rep->prefill_rep.n_experts = used ? n_routes : 0;
        *owned1 = rows;
        *owned2 = used;
        break;
    }
    case PROTO_GENERATE: {
        int n = (int)req->generate_req.n;
        int32_t *toks = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
        float *gaps = malloc(sizeof(float) * (size_t)(n ? n : 1));
        *owned1 = toks;
        *owned2 = gaps;
        if (!toks || !gaps) { rc = errmsg_set(err, sizeof err, PROTO_E_INTERNAL, "out of memory"); break; }
        double top_p = req->generate_req.top_p > 0 ? req->generate_req.top_p : 1.0;   /* 0: not sent */
        if (engine_generate_p(e, n, req->generate_req.temperature, top_p, req->generate_req.seed, toks, gaps, err,
                              sizeof err)) {
            rc = PROTO_E_RANGE;
            break;
        }
        rep->generate_rep.tokens = toks;
        rep->generate_rep.gaps = gaps;
        rep->generate_rep.n = (size_t)n;
        rep->generate_rep.n_past = (uint64_t)e->n_past;
        break;
    }
    case PROTO_TRUNCATE:
        if (req->truncate_req.depth > (uint64_t)e->n_past ||
            engine_truncate(e, (int)req->truncate_req.depth, err, sizeof err)) {
            rc = PROTO_E_RANGE;
            if (!err[0]) errmsg_set(err, sizeof err, -1, "cannot truncate to depth %llu: the stream holds %d tokens",
                                    (unsigned long long)req->truncate_req.depth, e->n_past);
            break;
        }
        rep->truncate_rep.n_past = (uint64_t)e->n_past;
        break;
    case PROTO_STATS:
        rep->stats_rep.n_past = (uint64_t)e->n_past;
        rep->stats_rep.kv_bytes = (uint64_t)e->n_past * backend_kv_bytes_per_token(e->b);
        rep->stats_rep.prefill_tokens = e->prefill_tokens;
        rep->stats_rep.prefill_seconds = e->prefill_seconds;
        rep->stats_rep.decode_tokens = e->decode_tokens;
        rep->stats_rep.decode_seconds = e->decode_seconds;
        rep->stats_rep.peak_rss = engine_peak_rss();
        rep->stats_rep.has_rechunk = e->stream != NULL;
        rep->stats_rep.rechunk_rows = e->rechunk_rows;
        rep->stats_rep.rechunk_max = e->rechunk_max;
        break;
    case PROTO_VOCAB:
        rc = fill_vocab(e, &rep->vocab_rep, owned1, owned2, err, sizeof err);
        break;
    case PROTO_SHUTDOWN:
        return 1;
    default:
        rc = errmsg_set(err, sizeof err, PROTO_E_BADMSG, "unexpected message type %s", proto_type_name(req->type));
        break;
    }
    if (rc) proto_error(rep, req->id, rc, "%s", err);
    return 0;
}

/* ---- serving ------------------------------------------------------------------------------- */

#define SERVE_MAX_PIPES 4    /* the owner and a few more, which are told the worker is taken */
#define SERVE_HELLO_S   15   /* default --hello-timeout: longer than the driver's 10 s wait for a hello
                                reply, so a driver whose hello went unanswered retries on a new
                                connection before this one is closed under it */
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

/* How the worker listens (--listen and its companions). */
typedef struct {
    const char *url;
    proto_tls tls;                    /* all NULL: no TLS */
    int allow_plain;                  /* --allow-plain-tcp */
    int exit_on_eof;                  /* --exit-on-stdin-eof */
    int hello_s;                      /* --hello-timeout: seconds a connection may stay without
                                         becoming the owner */
} serve_opts;

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

/* Serves until shutdown, a signal or (--exit-on-stdin-eof) the end of stdin. Returns 0, or 1 with
 * a message in err when it could not listen. */
static int serve(engine *e, const serve_opts *so, char *err, size_t errlen) {
    nng_socket s;
    char url[1024], shown[1400];
    serve_state st;
    nng_listener lst;
    uint64_t refused = 0;   /* connections refused before they became pipes, as last logged */
    uint64_t evicted = 0;   /* st.n_evicted as last logged */
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
     * cannot go closes the connection (below) so that its client fails at once. */
    nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, 60000);
    fprintf(stderr, "strata-worker: serving %s (kv %s/%s%s)\n", shown, engine_kv_name(e, 0), engine_kv_name(e, 1),
            tls ? "; TLS, client certificates required" : "");
    int done = 0;
    while (!done && !g_stop) {
        uint64_t r = tls ? proto_listener_refused(lst) : 0;
        if (r > refused) {   /* the refused clients got nothing; the owner, if any, is unaffected */
            fprintf(stderr, "strata-worker: refused %llu connection%s (TLS handshake failed: no certificate, one "
                    "the CA did not sign, or not TLS)\n", (unsigned long long)(r - refused), r - refused > 1 ? "s" : "");
            refused = r;
        }
        int stale = close_stale(&st, (int64_t)so->hello_s * 1000);
        pthread_mutex_lock(&st.mu);
        uint64_t ev = st.n_evicted;
        pthread_mutex_unlock(&st.mu);
        if (stale)
            fprintf(stderr, "strata-worker: closed %d connection%s that did not become the owner (an answered hello) "
                    "within %d s (--hello-timeout)\n", stale, stale > 1 ? "s" : "", so->hello_s);
        if (ev > evicted) {
            fprintf(stderr, "strata-worker: closed %llu connection%s without a hello to make room for newer ones "
                    "(%d kept at most)\n", (unsigned long long)(ev - evicted), ev - evicted > 1 ? "s" : "",
                    SERVE_MAX_PIPES);
            evicted = ev;
        }
        if (so->exit_on_eof && stdin_ended()) {   /* checked at least once a second (receive timeout) */
            fprintf(stderr, "strata-worker: stdin closed (--exit-on-stdin-eof): stopping\n");
            break;
        }
        proto_msg req, rep;
        void *o1 = NULL, *o2 = NULL;
        nng_pipe pipe;
        int owned = 0;   /* the owner's request: the idle clock stops while it is served */
        int rc = proto_recv_pipe(s, recv_max, &req, &pipe, err, errlen);
        if (rc == PROTO_E_TIMEOUT) continue;
        if (rc == PROTO_E_TRANSPORT) { fprintf(stderr, "strata-worker: %s\n", err); break; }
        if (rc) {
            proto_error(&rep, req.id, rc, "%s", err);
        } else if (admit(&st, e, &req, pipe, &rep)) {
            set_busy(&st, owned = 1);
            done = handle(e, &req, &rep, &o1, &o2);
            if (done) proto_init(&rep, PROTO_SHUTDOWN, 1, req.id);
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
        if (owned) set_busy(&st, 0);
        free(o1);
        free(o2);
        proto_msg_free(&req);
    }
    /* nng_close drops a reply still queued: after shutdown, give the owner up to 1 s to read it and
     * hang up (the driver closes its socket once the reply is in) */
    for (int t = 0; done && t < 100; t++) {
        pthread_mutex_lock(&st.mu);
        int gone = st.owner == 0;
        pthread_mutex_unlock(&st.mu);
        if (gone) break;
        struct timespec ts = { 0, 10 * 1000000L };
        nanosleep(&ts, NULL);
    }
    nng_close(s);
    pthread_mutex_destroy(&st.mu);
    return 0;
}

/* Prints "strata-worker: <what><msg>" on stderr with msg escaped (safeio_escape): messages about a
 * model carry strings from its file (names, keys, values), which must not reach a terminal raw. */
static void print_escaped(const char *what, const char *msg) {
    char shown[4 * 1024 + 1];
    fprintf(stderr, "strata-worker: %s%s\n", what, safeio_escape(shown, sizeof shown, msg));
}

static int write_dump(const char *path, const float *rows, size_t n, int vocab, char *err, size_t errlen) {
    FILE *f = fopen(path, "wb");
    if (!f) return errmsg_set(err, errlen, -1, "%s: %s", path, strerror(errno));
    int32_t hdr[2] = { vocab, (int32_t)n };
    int ok = fwrite(hdr, 4, 2, f) == 2 && fwrite(rows, sizeof(float) * (size_t)vocab, n, f) == n;
    if (fclose(f) || !ok) return errmsg_set(err, errlen, -1, "%s: write failed", path);
    return 0;
}

static int parse_int(const char *opt, const char *s, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) {
        fprintf(stderr, "strata-worker: %s needs an integer in [%ld, %ld], got '%s'\n", opt, lo, hi, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* Reads all of stdin into *text[*len] (malloc'd; caller frees). */
static int read_stdin(char **text, size_t *len, char *err, size_t errlen) {
    size_t cap = 1 << 16, n = 0, got;
    char *t = malloc(cap);   /* [cap] bytes read so far: n */
    while (t && (got = fread(t + n, 1, cap - n, stdin)) > 0) {
        n += got;
        if (n > PROTO_MAX_TEXT) { free(t); return errmsg_set(err, errlen, -1, "stdin: more than 64 MiB"); }
        if (n == cap) { char *nt = realloc(t, cap *= 2); if (!nt) free(t); t = nt; }
    }
    if (!t) return errmsg_set(err, errlen, -1, "out of memory");
    *text = t;
    *len = n;
    return 0;
}

/* --tokenize ('z'): text on stdin -> ids on stdout; --detokenize ('Z'): ids on stdin -> text.
 * Loads the GGUF's tokenizer only. Returns 0, or 1 with err set. */
static int tokenizer_only(const char *path, int mode, char *err, size_t errlen) {
    gguf_file *g = NULL;
    tok_vocab *v = NULL;
    char *text = NULL, *piece = NULL;   /* stdin; one token's bytes [tok_max_piece] */
    int32_t *ids = NULL;                /* [n] */
    size_t len = 0, n = 0;
    int ret = 1;
    if (gguf_open(path, &g, err, errlen) || tok_load(g, &v, err, errlen)) goto done;
    if (read_stdin(&text, &len, err, errlen)) goto done;
    if (mode == 'z') {
        if (tok_encode(v, text, len, 1, 0, &ids, &n, err, errlen)) goto done;
        for (size_t i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
        printf("\n");
    } else {
        size_t cap = tok_max_piece(v) + 1;
        size_t blank = 0;   /* an empty list of ids is an empty text */
        while (blank < len && strchr(" ,\t\r\n", text[blank])) blank++;
        if (blank < len && tokfile_parse("stdin", text, len, &ids, &n, err, errlen)) goto done;
        if (!(piece = malloc(cap))) { errmsg_set(err, errlen, -1, "out of memory"); goto done; }
        for (size_t i = 0; i < n; i++) {
            size_t pl = 0;
            if (tok_decode(v, ids[i], piece, cap, &pl)) {
                errmsg_set(err, errlen, -1, "token id %d (index %zu) is outside the vocabulary of %d", ids[i], i,
                           tok_n_vocab(v));
                goto done;
            }
            fwrite(piece, 1, pl, stdout);
        }
    }
    ret = fflush(stdout) ? errmsg_set(err, errlen, 1, "cannot write stdout") : 0;
done:
    free(text);
    free(piece);
    free(ids);
    tok_free(v);
    gguf_close(g);
    return ret;
}

int main(int argc, char **argv) {
    engine_config cfg = { NULL, KV_F16, KV_F16, 2, 512, 0, 0, 0, NULL, BACKEND_FA_AUTO, 0, 0 };
    const char *kv_k_mix = NULL, *kv_v_mix = NULL;   /* per-layer / per-head formats, when given */
    engine_mem_opts mem = { 1, 0, 0 };
    const char *tokens_file = NULL, *prompt = NULL, *dump = NULL, *listen = NULL;
    serve_opts so;
    memset(&so, 0, sizeof so);
    so.hello_s = SERVE_HELLO_S;
    int hello_given = 0;
    int max_new = 0, tok_mode = 0, timing = 0;
    double temperature = 0;
    unsigned long long seed = 0;
    char err[1024] = "", warn[512] = "";
    static const struct option opts[] = {
        {"model", 1, 0, 'm'}, {"kv", 1, 0, 'k'}, {"kv-k", 1, 0, 'K'}, {"kv-v", 1, 0, 'V'},
        {"prefill", 1, 0, 'p'}, {"max-context", 1, 0, 'c'}, {"threads", 1, 0, 't'},
        {"tokens-file", 1, 0, 'f'}, {"prompt", 1, 0, 'P'}, {"dump-logits", 1, 0, 'd'},
        {"max-new", 1, 0, 'n'}, {"temperature", 1, 0, 'T'}, {"seed", 1, 0, 's'},
        {"tokenize", 0, 0, 'z'}, {"detokenize", 0, 0, 'Z'}, {"timing", 0, 0, 'i'}, {"listen", 1, 0, 'l'}, {"help", 0, 0, 'h'},
        {"mem-arms", 1, 0, 'A'}, {"allow-overcommit", 0, 0, 'O'}, {"tls-cert", 1, 0, 'C'},
        {"tls-key", 1, 0, 'Y'}, {"tls-ca", 1, 0, 'R'}, {"allow-plain-tcp", 0, 0, 'L'},
        {"exit-on-stdin-eof", 0, 0, 'E'},
        {"mem-other-weights", 1, 0, 'W'}, {"rope-angles", 1, 0, 'r'}, {"mmap-weights", 0, 0, 'M'},
        {"hello-timeout", 1, 0, 'H'}, {"backend", 1, 0, 'B'}, {"flash-attn", 1, 0, 'F'},
        {"kv-rotation", 1, 0, 'X'}, {"kv-resident", 1, 0, 'Q'},
        {0, 0, 0, 0}};
    int llama_opt = 0, rope_given = 0;   /* --flash-attn / --kv-rotation given; --rope-angles given */
    int c;
    while ((c = getopt_long(argc, argv, "m:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': cfg.model_path = optarg; break;
        case 'k': case 'K': case 'V': {
            kv_fmt f = KV_F16;
            kv_mix mx;
            const char *mix = NULL;
            if (kv_fmt_parse(optarg, &f) || strcmp(kv_fmt_name(f), optarg)) {   /* kivi4-g16: named as given */
                if (kv_mix_parse(optarg, &mx, err, sizeof err)) {
                    fprintf(stderr, "strata-worker: %s\n", err);
                    return 2;
                }
                mix = optarg;                        /* per cell; checked against the model later */
            }
            if (c != 'V') { cfg.kv_k = f; kv_k_mix = mix; }
            if (c != 'K') { cfg.kv_v = f; kv_v_mix = mix; }
            break;
        }
        case 'p': if (parse_int("--prefill", optarg, 1, 1 << 16, &cfg.chunk)) return 2; break;
        case 'B':
            if (strcmp(optarg, "cpu") && strcmp(optarg, "ref") && strcmp(optarg, "llama") && strncmp(optarg, "llama:", 6)) {
                fprintf(stderr, "strata-worker: --backend: cpu, ref, llama or llama:DEVICE (llama:cpu), got '%s'\n", optarg);
                return 2;
            }
            cfg.backend = optarg;
            break;
        case 'F':
            llama_opt = 1;
            if (!strcmp(optarg, "auto")) cfg.flash_attn = BACKEND_FA_AUTO;
            else if (!strcmp(optarg, "on")) cfg.flash_attn = BACKEND_FA_ON;
            else if (!strcmp(optarg, "off")) cfg.flash_attn = BACKEND_FA_OFF;
            else { fprintf(stderr, "strata-worker: --flash-attn: on, off or auto, got '%s'\n", optarg); return 2; }
            break;
        case 'Q':
            llama_opt = 1;
            if (!strcmp(optarg, "host")) cfg.kv_host = 1;
            else if (!strcmp(optarg, "device")) cfg.kv_host = 0;
            else { fprintf(stderr, "strata-worker: --kv-resident: host or device, got '%s'\n", optarg); return 2; }
            break;
        case 'X':
            llama_opt = 1;
            if (!strcmp(optarg, "on")) cfg.kv_rot_off = 0;
            else if (!strcmp(optarg, "off")) cfg.kv_rot_off = 1;
            else { fprintf(stderr, "strata-worker: --kv-rotation: on or off, got '%s'\n", optarg); return 2; }
            break;
        case 'r':
            rope_given = 1;
            if (!strcmp(optarg, "exact")) cfg.rope_f32_angles = 0;
            else if (!strcmp(optarg, "f32")) cfg.rope_f32_angles = 1;
            else { fprintf(stderr, "strata-worker: --rope-angles: exact or f32, got '%s'\n", optarg); return 2; }
            break;
        case 'c': if (parse_int("--max-context", optarg, 1, 1 << 22, &cfg.n_ctx)) return 2; break;
        case 't': if (parse_int("--threads", optarg, 1, 1024, &cfg.threads)) return 2; break;
        case 'f': tokens_file = optarg; break;
        case 'P': prompt = optarg; break;
        case 'd': dump = optarg; break;
        case 'n': if (parse_int("--max-new", optarg, 0, 1 << 20, &max_new)) return 2; break;
        case 'T': temperature = atof(optarg); break;
        case 's': seed = strtoull(optarg, NULL, 10); break;
        case 'z': tok_mode = 'z'; break;
        case 'Z': tok_mode = 'Z'; break;
        case 'i': timing = 1; break;
        case 'l': listen = optarg; break;
        case 'A': if (parse_int("--mem-arms", optarg, 1, 1024, &mem.arms)) return 2; break;
        case 'O': mem.allow_overcommit = 1; break;
        case 'M': cfg.mmap_weights = 1; break;
        case 'C': so.tls.cert = optarg; break;
        case 'Y': so.tls.key = optarg; break;
        case 'R': so.tls.ca = optarg; break;
        case 'L': so.allow_plain = 1; break;
        case 'E': so.exit_on_eof = 1; break;
        case 'H': if (parse_int("--hello-timeout", optarg, 1, 3600, &so.hello_s)) return 2; hello_given = 1; break;
        case 'W': {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end || optarg[0] == '-') {
                fprintf(stderr, "strata-worker: --mem-other-weights '%s': give a number of bytes\n", optarg);
                return 2;
            }
            mem.other_weights = (uint64_t)v;
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!cfg.model_path) { fprintf(stderr, "strata-worker: --model FILE is required\n"); usage(stderr); return 2; }
    if (optind < argc) { fprintf(stderr, "strata-worker: unexpected argument '%s'\n", argv[optind]); return 2; }
    int is_llama = cfg.backend && !strncmp(cfg.backend, "llama", 5);   /* cpu and ref are strata's own */
    if (llama_opt && !is_llama) {
        fprintf(stderr, "strata-worker: --flash-attn, --kv-rotation and --kv-resident go with --backend llama\n");
        return 2;
    }
    if (is_llama && !backend_available("llama")) {
        fprintf(stderr, "strata-worker: --backend llama: this strata-worker was built without llama.cpp: `make llama` "
                "builds it (libllama, cached) and relinks the worker with it (README: \"Your llama.cpp as an arm\")\n");
        return 2;
    }
    if (is_llama && rope_given) {
        fprintf(stderr, "strata-worker: --rope-angles is strata's own RoPE: llama.cpp computes its own angles "
                "(--backend llama)\n");
        return 2;
    }
    int n_tls = !!so.tls.cert + !!so.tls.key + !!so.tls.ca;
    if (n_tls != 0 && n_tls != 3) {
        fprintf(stderr, "strata-worker: TLS needs all three of --tls-cert, --tls-key and --tls-ca\n");
        return 2;
    }
    const char *tls_files[3] = { so.tls.cert, so.tls.key, so.tls.ca };
    for (int i = 0; n_tls && i < 3; i++)
        if (access(tls_files[i], R_OK)) {
            fprintf(stderr, "strata-worker: cannot read %s: %s\n", tls_files[i], strerror(errno));
            return 2;
        }
    if ((so.tls.cert || so.allow_plain || so.exit_on_eof || hello_given) && !listen) {
        fprintf(stderr, "strata-worker: --tls-*, --allow-plain-tcp, --exit-on-stdin-eof and --hello-timeout go with "
                "--listen URL\n");
        return 2;
    }
    if (listen) {   /* a bad URL or missing certificates: say so before loading the model */
        char checked[1024];
        so.url = listen;
        if (proto_listen_url(listen, so.tls.cert != NULL, so.allow_plain, checked, sizeof checked, err, sizeof err)) {
            fprintf(stderr, "strata-worker: %s\n", err);
            return 2;
        }
    }

    engine *e = NULL;
    int32_t *toks = NULL;
    size_t n_toks = 0;
    float *rows = NULL;
    int ret = 1;
    if (tok_mode) {   /* the tokenizer alone: works on vocabulary-only GGUFs too */
        ret = tokenizer_only(cfg.model_path, tok_mode, err, sizeof err);
        goto done;
    }
    g_model_path = cfg.model_path;
    struct sigaction sb;
    memset(&sb, 0, sizeof sb);
    sb.sa_sigaction = on_sigbus;
    sb.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigaction(SIGBUS, &sb, NULL);
    if (engine_create_mix(&cfg, kv_k_mix, kv_v_mix, &mem, &e, err, sizeof err, warn, sizeof warn)) goto done;
    if (warn[0]) print_escaped("warning: ", warn);
    if (e->m->n_attn < e->m->n_layer) {   /* a hybrid model: say which layers the KV formats reach */
        char arch[4 * sizeof e->m->arch_name];
        fprintf(stderr, "strata-worker: %s: KV cache in layers", safeio_escape(arch, sizeof arch, e->m->arch_name));
        for (int l = 0; l < e->m->n_layer; l++)
            if (!e->m->layers[l].recurrent) fprintf(stderr, " %d", l);
        fprintf(stderr, " (%d of %d); the other layers are linear attention with f32 recurrent state (KV formats "
                "given for them are ignored)\n", e->m->n_attn, e->m->n_layer);
    }
    if (listen) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        ret = serve(e, &so, err, sizeof err);
        goto done;
    }
    if (tokens_file) {
        if (tokfile_read(tokens_file, &toks, &n_toks, err, sizeof err)) goto done;
    } else if (prompt) {
        if (tok_encode(e->tok, prompt, strlen(prompt), 1, 0, &toks, &n_toks, err, sizeof err)) goto done;
    } else {
        errmsg_set(err, sizeof err, -1,
                   "nothing to do: give --tokens-file, --prompt, --tokenize, --detokenize or --listen");
        fprintf(stderr, "strata-worker: %s\n", err);
        ret = 2;
        goto done_quiet;
    }
    if (n_toks == 0) { errmsg_set(err, sizeof err, -1, "no tokens to prefill"); goto done; }
    size_t n_rows = 0;
    if (engine_prefill(e, toks, n_toks, dump ? ENGINE_ROWS_ALL : ENGINE_ROWS_LAST, &rows, &n_rows, err, sizeof err)) goto done;
    if (dump && write_dump(dump, rows, n_rows, e->m->n_vocab, err, sizeof err)) goto done;
    if (max_new > 0) {
        int32_t *gen = malloc(sizeof(int32_t) * (size_t)max_new);
        float *gaps = malloc(sizeof(float) * (size_t)max_new);
        int rc = !gen || !gaps ? -1 : engine_generate(e, max_new, temperature, seed, gen, gaps, err, sizeof err);
        if (!rc) {
            for (int i = 0; i < max_new; i++) printf("%s%d", i ? " " : "", gen[i]);
            printf("\n");
        }
        free(gen);
        free(gaps);
        if (rc) goto done;
    }
    if (timing)
        fprintf(stderr, "timing: prefill_tokens=%llu prefill_s=%.6f decode_tokens=%llu decode_s=%.6f peak_rss=%llu "
                "weights=%s huge_bytes=%llu\n",
                (unsigned long long)e->prefill_tokens, e->prefill_seconds, (unsigned long long)e->decode_tokens,
                e->decode_seconds, (unsigned long long)engine_peak_rss(), e->cfg.mmap_weights ? "mmap" : "copy",
                (unsigned long long)engine_huge_bytes());
    ret = 0;
done:
    if (ret == 1) print_escaped("error: ", err[0] ? err : "failed");
done_quiet:
    free(toks);
    free(rows);
    engine_free(e);
    return ret;
}
