/* strata-worker — one arm's engine. By hand: prefill a prompt or token file, dump every
 * position's logits, generate greedily, tokenise. For the driver: --listen URL serves the protocol
 * of proto/proto.h until a shutdown request (or SIGTERM/SIGINT). See usage() for the options.
 * Exit codes: 0 ok, 1 runtime error (also a model file truncated under a worker that maps it,
 * --mmap-weights: the mapping faults with SIGBUS, caught here with a message), 2 usage error.
 *
 * The server (--listen: one owner at a time, the hello deadline, the requests) is worker/serve.c.
 * This file: the options, the SIGBUS message, and the by-hand modes. */
#include "proto/proto.h"
#include "kernels/errmsg.h"
#include "proto/safeio.h"
#include "proto/tokfile.h"
#include "worker/engine.h"
#include "worker/serve.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* What the command line asks for besides the engine's configuration (main's getopt loop fills it). */
typedef struct {
    const char *kv_k_mix, *kv_v_mix;   /* per-layer / per-head formats, when given */
    engine_mem_opts mem;
    const char *tokens_file, *prompt, *dump, *listen;
    serve_opts so;
    int hello_given;                   /* --hello-timeout given */
    int max_new, tok_mode, timing;
    double temperature;
    unsigned long long seed;
} worker_args;

/* --kv / --kv-k / --kv-v (c = 'k', 'K', 'V'): a format name, or a per-layer / per-head mix (checked
 * against the model later). Prints the error and returns -1 when it is neither. */
static int parse_kv(int c, const char *arg, engine_config *cfg, worker_args *a) {
    char err[1024];
    kv_fmt f = KV_F16;
    kv_mix mx;
    const char *mix = NULL;
    if (kv_fmt_parse(arg, &f) || strcmp(kv_fmt_name(f), arg)) {   /* kivi4-g16: named as given */
        if (kv_mix_parse(arg, &mx, err, sizeof err)) {
            fprintf(stderr, "strata-worker: %s\n", err);
            return -1;
        }
        mix = arg;                           /* per cell; checked against the model later */
    }
    if (c != 'V') { cfg->kv_k = f; a->kv_k_mix = mix; }
    if (c != 'K') { cfg->kv_v = f; a->kv_v_mix = mix; }
    return 0;
}

/* A number of bytes (decimal, no sign) into *out; prints the error and returns -1 when s is not one. */
static int parse_bytes(const char *opt, const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-') {
        fprintf(stderr, "strata-worker: %s '%s': give a number of bytes\n", opt, s);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

/* The llama backend's options go with it, and it must be linked in. Prints the error and returns
 * -1 when not. */
static int check_backend(engine_config cfg, int llama_opt, int rope_given) {
    int is_llama = cfg.backend && !strncmp(cfg.backend, "llama", 5);   /* cpu and ref are strata's own */
    if (llama_opt && !is_llama) {
        fprintf(stderr, "strata-worker: --flash-attn, --kv-rotation and --kv-resident go with --backend llama\n");
        return -1;
    }
    if (is_llama && !backend_available("llama")) {
        fprintf(stderr, "strata-worker: --backend llama: this strata-worker was built without llama.cpp: `make llama` "
                "builds it (libllama, cached) and relinks the worker with it (README: \"Your llama.cpp as an arm\")\n");
        return -1;
    }
    if (is_llama && rope_given) {
        fprintf(stderr, "strata-worker: --rope-angles is strata's own RoPE: llama.cpp computes its own angles "
                "(--backend llama)\n");
        return -1;
    }
    return 0;
}

/* TLS needs all three readable files, the --listen companions need --listen, and a bad URL or missing
 * certificates are said before the model loads. Sets a->so.url. Prints the error and returns -1. */
static int check_listen(worker_args *a) {
    char err[1024] = "";
    serve_opts *so = &a->so;
    int n_tls = !!so->tls.cert + !!so->tls.key + !!so->tls.ca;
    if (n_tls != 0 && n_tls != 3) {
        fprintf(stderr, "strata-worker: TLS needs all three of --tls-cert, --tls-key and --tls-ca\n");
        return -1;
    }
    const char *tls_files[3] = { so->tls.cert, so->tls.key, so->tls.ca };
    for (int i = 0; n_tls && i < 3; i++)
        if (access(tls_files[i], R_OK)) {
            fprintf(stderr, "strata-worker: cannot read %s: %s\n", tls_files[i], strerror(errno));
            return -1;
        }
    if ((so->tls.cert || so->allow_plain || so->exit_on_eof || a->hello_given) && !a->listen) {
        fprintf(stderr, "strata-worker: --tls-*, --allow-plain-tcp, --exit-on-stdin-eof and --hello-timeout go with "
                "--listen URL\n");
        return -1;
    }
    if (a->listen) {   /* a bad URL or missing certificates: say so before loading the model */
        char checked[1024];
        so->url = a->listen;
        if (proto_listen_url(a->listen, so->tls.cert != NULL, so->allow_plain, checked, sizeof checked, err,
                             sizeof err)) {
            fprintf(stderr, "strata-worker: %s\n", err);
            return -1;
        }
    }
    return 0;
}

/* From here on a bus error on the model's mapping is said (on_sigbus) rather than a silent death. */
static void catch_sigbus(const char *model_path) {
    g_model_path = model_path;
    struct sigaction sb;
    memset(&sb, 0, sizeof sb);
    sb.sa_sigaction = on_sigbus;
    sb.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigaction(SIGBUS, &sb, NULL);
}

/* A hybrid model: says on stderr which layers the KV formats reach. */
static void say_kv_layers(const model *m) {
    char arch[4 * sizeof m->arch_name];
    fprintf(stderr, "strata-worker: %s: KV cache in layers", safeio_escape(arch, sizeof arch, m->arch_name));
    for (int l = 0; l < m->n_layer; l++)
        if (!m->layers[l].recurrent) fprintf(stderr, " %d", l);
    fprintf(stderr, " (%d of %d); the other layers are linear attention with f32 recurrent state (KV formats "
            "given for them are ignored)\n", m->n_attn, m->n_layer);
}

/* --max-new: that many tokens after the prompt, their ids printed on stdout. Returns 0, or nonzero
 * with err set (empty when out of memory). */
static int generate(engine *e, const worker_args *a, char *err, size_t errlen) {
    int32_t *gen = malloc(sizeof(int32_t) * (size_t)a->max_new);
    float *gaps = malloc(sizeof(float) * (size_t)a->max_new);
    int rc = !gen || !gaps ? -1 : engine_generate(e, a->max_new, a->temperature, a->seed, gen, gaps, err, errlen);
    if (!rc) {
        for (int i = 0; i < a->max_new; i++) printf("%s%d", i ? " " : "", gen[i]);
        printf("\n");
    }
    free(gen);
    free(gaps);
    return rc;
}

/* By hand: prefills the token file or the prompt, then writes the dump, generates and prints the
 * timing as asked. Returns 0, 1 with err set, or 2 when there is nothing to do (said here). */
static int run_prompt(engine *e, const worker_args *a, char *err, size_t errlen) {
    int32_t *toks = NULL;   /* [n_toks] */
    size_t n_toks = 0, n_rows = 0;
    float *rows = NULL;     /* [n_rows][n_vocab] */
    int ret = 1;
    if (a->tokens_file) {
        if (tokfile_read(a->tokens_file, &toks, &n_toks, err, errlen)) goto done;
    } else if (a->prompt) {
        if (tok_encode(e->tok, a->prompt, strlen(a->prompt), 1, 0, &toks, &n_toks, err, errlen)) goto done;
    } else {
        errmsg_set(err, errlen, -1, "nothing to do: give --tokens-file, --prompt, --tokenize, --detokenize or --listen");
        fprintf(stderr, "strata-worker: %s\n", err);
        ret = 2;
        goto done;
    }
    if (n_toks == 0) { errmsg_set(err, errlen, -1, "no tokens to prefill"); goto done; }
    if (engine_prefill(e, toks, n_toks, a->dump ? ENGINE_ROWS_ALL : ENGINE_ROWS_LAST, &rows, &n_rows, err, errlen))
        goto done;
    if (a->dump && write_dump(a->dump, rows, n_rows, e->m->n_vocab, err, errlen)) goto done;
    if (a->max_new > 0 && generate(e, a, err, errlen)) goto done;
    if (a->timing)
        fprintf(stderr, "timing: prefill_tokens=%llu prefill_s=%.6f decode_tokens=%llu decode_s=%.6f peak_rss=%llu "
                "weights=%s huge_bytes=%llu\n",
                (unsigned long long)e->prefill_tokens, e->prefill_seconds, (unsigned long long)e->decode_tokens,
                e->decode_seconds, (unsigned long long)engine_peak_rss(), e->cfg.mmap_weights ? "mmap" : "copy",
                (unsigned long long)engine_huge_bytes());
    ret = 0;
done:
    free(toks);
    free(rows);
    return ret;
}

/* Runs what the checked options ask for: the tokenizer alone, the server (serve.h), or a prompt by
 * hand. Returns the exit code; a runtime error (1) is printed here. */
static int run(const engine_config *cfg, const worker_args *a) {
    engine *e = NULL;
    char err[1024] = "", warn[512] = "";
    int ret = 1;
    if (a->tok_mode) {   /* the tokenizer alone: works on vocabulary-only GGUFs too */
        ret = tokenizer_only(cfg->model_path, a->tok_mode, err, sizeof err);
        goto done;
    }
    catch_sigbus(cfg->model_path);
    if (engine_create_mix(cfg, a->kv_k_mix, a->kv_v_mix, &a->mem, &e, err, sizeof err, warn, sizeof warn)) goto done;
    if (warn[0]) print_escaped("warning: ", warn);
    if (e->m->n_attn < e->m->n_layer) say_kv_layers(e->m);   /* a hybrid model */
    ret = a->listen ? serve_run(e, &a->so, err, sizeof err) : run_prompt(e, a, err, sizeof err);
done:
    if (ret == 1) print_escaped("error: ", err[0] ? err : "failed");
    engine_free(e);
    return ret;
}

int main(int argc, char **argv) {
    engine_config cfg = { NULL, KV_F16, KV_F16, 2, 512, 0, 0, 0, NULL, BACKEND_FA_AUTO, 0, 0 };
    worker_args a;
    memset(&a, 0, sizeof a);
    a.mem.arms = 1;
    a.so.hello_s = SERVE_HELLO_S;
    a.so.engine_name = ENGINE_NAME;
    a.so.git = STRATA_GIT;
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
        case 'k': case 'K': case 'V': if (parse_kv(c, optarg, &cfg, &a)) return 2; break;
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
        case 'f': a.tokens_file = optarg; break;
        case 'P': a.prompt = optarg; break;
        case 'd': a.dump = optarg; break;
        case 'n': if (parse_int("--max-new", optarg, 0, 1 << 20, &a.max_new)) return 2; break;
        case 'T': a.temperature = atof(optarg); break;
        case 's': a.seed = strtoull(optarg, NULL, 10); break;
        case 'z': a.tok_mode = 'z'; break;
        case 'Z': a.tok_mode = 'Z'; break;
        case 'i': a.timing = 1; break;
        case 'l': a.listen = optarg; break;
        case 'A': if (parse_int("--mem-arms", optarg, 1, 1024, &a.mem.arms)) return 2; break;
        case 'O': a.mem.allow_overcommit = 1; break;
        case 'M': cfg.mmap_weights = 1; break;
        case 'C': a.so.tls.cert = optarg; break;
        case 'Y': a.so.tls.key = optarg; break;
        case 'R': a.so.tls.ca = optarg; break;
        case 'L': a.so.allow_plain = 1; break;
        case 'E': a.so.exit_on_eof = 1; break;
        case 'H': if (parse_int("--hello-timeout", optarg, 1, 3600, &a.so.hello_s)) return 2; a.hello_given = 1; break;
        case 'W': if (parse_bytes("--mem-other-weights", optarg, &a.mem.other_weights)) return 2; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!cfg.model_path) { fprintf(stderr, "strata-worker: --model FILE is required\n"); usage(stderr); return 2; }
    if (optind < argc) { fprintf(stderr, "strata-worker: unexpected argument '%s'\n", argv[optind]); return 2; }
    if (check_backend(cfg, llama_opt, rope_given) || check_listen(&a)) return 2;
    return run(&cfg, &a);
}
