/* needle.c — `strata-driver needle`: the needle-in-a-haystack bench (see needle.h and
 * docs/DESIGN.md §9). Builds every cell's prompt on the driver with the model's own tokenizer
 * (read from the GGUF: the workers report the same tokenizer hash), prints the cost, runs the
 * cells on every arm in lockstep, appends cells.tsv one cell at a time and renders the folder.
 *
 * Reading order: usage; small helpers; options (argv or meta.json for --resume); the tokenizer;
 * the plan (haystacks, cells, order, cost); meta.json; one cell; the run; needle_main. */
#include "driver/needle.h"
#include "driver/sweep.h"
#include "driver/workers.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "driver/arm.h"
#include "driver/cli.h"
#include "driver/document.h"
#include "driver/stats.h"
#include "kernels/errmsg.h"
#include "kernels/clock.h"
#include "proto/proto.h"
#include "proto/safeio.h"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2, EXIT_MISMATCH = 3, EXIT_INTERRUPTED = 130 };

#define DIAL_TIMEOUT_MS    60000               /* docs/DESIGN.md §1.5 */
#define REQUEST_TIMEOUT_MS (30 * 60 * 1000)
#define STOP_GRACE_MS      3000
#define MAX_LIST           64                  /* --lengths / --positions entries */
#define CAL_TOKENS         512                 /* calibration: two prefills of this many tokens */
#define CAL_GEN            4                   /*   and this many generated tokens */

void needle_usage(FILE *f) {
    fprintf(f,
        "usage: strata-driver needle --model FILE [options]\n"
        "Needle in a haystack: does a KV format change whether the model retrieves a 7-digit key\n"
        "hidden in a long prompt? For every cell (length L, depth p %%, trial t) and template, every arm\n"
        "prefills the same prompt, generates greedily (exact match: the first digits of the answer are\n"
        "the key) and scores the key teacher-forced (sum of ln p of its tokens).\n"
        "cells:\n"
        "  --lengths LIST      prompt lengths in tokens (default 1024,2048,4096; capped at the context\n"
        "                      minus the generated tokens)\n"
        "  --positions LIST    needle depths in percent of the haystack (default 0,25,50,75,100)\n"
        "  --keys K            needles per prompt (default 1; 2..%d: labelled keys \"for Paris\", ...,\n"
        "                      spread evenly, the one at p %% is asked for)\n"
        "  --trials T          trials per (length, depth), each with its own haystack: a stretch of the\n"
        "                      corpus drawn from (seed, trial), apart from the other trials' (default 3;\n"
        "                      the tests count a (trial, length, depth) cell, its templates together, as\n"
        "                      one unit, and a run of 1 trial rests on one haystack)\n"
        "  --seed S            keys and haystack offsets (default 1; the same for every arm)\n"
        "  --template T        raw, chat or both (default both when the GGUF has a chat template\n"
        "                      (ChatML or Gemma), else raw)\n"
        "  --gen N             greedy tokens per answer (default 12)\n"
        "haystack (one of; default --corpus kjv): --corpus kjv|self|DIR, --doc FILE (as for sweep)\n"
        "arms (as for sweep): --arms LIST (default f16,int8), --ref NAME (default f16), --arm NAME=URL,\n"
        "  --arm-model NAME[:SPEC]=FILE (an arm on its own GGUF with the same tokenizer; without --arms\n"
        "  the --model arms are just f16), --threads N, --prefill N, --max-context N, --worker PATH,\n"
        "  --tls-cert F --tls-key F --tls-ca F (mutual TLS for tls+tcp:// arms), --launch TEMPLATE and\n"
        "  --launch-listen URL (start the local workers through srun/ssh), --allow-overcommit,\n"
        "  --mmap-weights, --rope-angles exact|f32, --allow-kv-mismatch\n"
        "output:\n"
        "  --out DIR           results folder (default results/<YYYY-MM-DD-HHMM>-<model>-needle)\n"
        "  --tag T, --force, --quiet, --chunk N (tokens per prefill request, default 1024)\n"
        "  --dump-prompts DIR  (tests) write each prompt's token ids and its gold answer to DIR\n"
        "  --resume DIR        finish an interrupted run: options from DIR/meta.json, the cells already\n"
        "                      in DIR/cells.tsv are skipped (--quiet, --threads, --worker may be given;\n"
        "                      --launch, --launch-listen, --tls-*, --arm are never taken from DIR:\n"
        "                      give them again when the run had them)\n"
        "Before the run: the cost (cells, tokens per arm) and a time estimate from a calibration\n"
        "prefill; during it: progress with an ETA. Ctrl-C keeps every finished cell (exit 130).\n"
        "examples:\n"
        "  strata-driver needle --model smollm2.gguf --arms f32,f16,int8,q4_0 --lengths 1024,4096,8192\n"
        "  strata-driver needle --resume results/2026-12-01-1200-smollm2-needle\n"
        "  strata-driver report results/2026-12-01-1200-smollm2-needle\n", NEEDLE_MAX_KEYS);
}

/* ============================================================================================
 * Small helpers
 * ========================================================================================== */

/* "1024,2048" -> out [*n] (at most MAX_LIST, each in [lo, hi], no repeats). */
static int parse_list(const char *opt, const char *s, long lo, long hi, int *out, int *n) {
    char buf[1024], *save = NULL;
    if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf) { cli_errorf("%s: list too long", opt); return -1; }
    *n = 0;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (*n == MAX_LIST) { cli_errorf("%s: at most %d values", opt, MAX_LIST); return -1; }
        if (cli_parse_int(opt, t, lo, hi, &out[*n])) return -1;
        for (int i = 0; i < *n; i++)
            if (out[i] == out[*n]) { cli_errorf("%s: %d given twice", opt, out[i]); return -1; }
        (*n)++;
    }
    if (!*n) { cli_errorf("%s: empty list", opt); return -1; }
    return 0;
}

/* 1 when DIR has entries, 0 when empty or missing, -1 when it is not a directory. */
static int dir_nonempty(const char *path) {
    struct stat st;
    if (stat(path, &st)) return 0;
    if (!S_ISDIR(st.st_mode)) return -1;
    char p[PATH_MAX];
    static const char *const ours[] = {"meta.json", "cells.tsv", "README.md"};
    for (size_t i = 0; i < sizeof ours / sizeof *ours; i++) {
        snprintf(p, sizeof p, "%s/%s", path, ours[i]);
        if (!stat(p, &st)) return 1;
    }
    return 0;
}

static void fmt_duration(double s, char *buf, size_t len) {
    if (!isfinite(s) || s < 0) { snprintf(buf, len, "?"); return; }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, len, "%ld:%02ld", t / 60, t % 60);
}

/* ============================================================================================
 * Options
 * ========================================================================================== */

enum { TPL_RAW = 1, TPL_CHAT = 2, TPL_BOTH = 3 };

typedef struct {
    const char *model, *doc, *corpus, *arms_list, *ref, *out, *tag, *worker, *resume;
    const char *dump_prompts;     /* tests: DIR for every prompt's token ids */
    workers_arm_opts ao;          /* --arm, --arm-model, --tls-*, --launch, --launch-listen,
                                   * --allow-overcommit */
    int lengths[MAX_LIST], n_lengths;
    int positions[MAX_LIST], n_positions;
    int keys, trials, gen, chunk, threads, prefill, max_context;
    int tpl;                      /* TPL_*, 0 = default (both when available) */
    uint64_t seed;
    int force, quiet;
} needle_opts;

static int parse_template(const char *s, int *tpl) {
    if (!strcmp(s, "raw")) *tpl = TPL_RAW;
    else if (!strcmp(s, "chat")) *tpl = TPL_CHAT;
    else if (!strcmp(s, "both")) *tpl = TPL_BOTH;
    else { cli_errorf("--template: raw, chat or both, got '%s'", s); return -1; }
    return 0;
}

static void opts_defaults(needle_opts *o) {
    memset(o, 0, sizeof *o);
    o->ref = "f16";
    o->keys = 1;
    o->trials = 3;
    o->gen = 12;
    o->chunk = 1024;
    o->seed = 1;
    static const int L[] = {1024, 2048, 4096}, P[] = {0, 25, 50, 75, 100};
    memcpy(o->lengths, L, sizeof L);
    o->n_lengths = 3;
    memcpy(o->positions, P, sizeof P);
    o->n_positions = 5;
}

/* Returns 0, -1 after --help, or an exit code. */
static int parse_opts(int argc, char **argv, needle_opts *o, int *explicit_run_opts) {
    static const struct option opts[] = {
        {"model", 1, 0, 'm'}, {"doc", 1, 0, 'D'}, {"corpus", 1, 0, 'C'}, {"arms", 1, 0, 'a'},
        {"ref", 1, 0, 'r'}, {"lengths", 1, 0, 'L'}, {"positions", 1, 0, 'P'},
        {"keys", 1, 0, 'K'}, {"trials", 1, 0, 'N'}, {"seed", 1, 0, 'S'}, {"template", 1, 0, 'T'},
        {"gen", 1, 0, 'G'}, {"chunk", 1, 0, 'c'}, {"threads", 1, 0, 't'}, {"prefill", 1, 0, 'p'},
        {"max-context", 1, 0, 'X'}, {"worker", 1, 0, 'w'}, {"out", 1, 0, 'o'}, {"tag", 1, 0, 'g'},
        {"force", 0, 0, 'F'}, {"quiet", 0, 0, 'q'}, {"resume", 1, 0, 'R'}, {"dump-prompts", 1, 0, 'U'}, {"help", 0, 0, 'h'},
        WORKERS_ARM_LONGOPTS, {0, 0, 0, 0}};
    int c;
    long v;
    *explicit_run_opts = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:o:qh", opts, NULL)) != -1) {
        /* beside --resume: --threads, --quiet, --worker, --dump-prompts and what says where the workers run */
        int beside_resume = c > 255 ? c >= 1001 && c <= 1005 : strchr("tqwRUhA", c) != NULL;
        if (!beside_resume) (*explicit_run_opts)++;
        int taken = workers_arm_opt(&o->ao, c, optarg);
        if (taken < 0) { cli_errorf("out of memory"); return EXIT_RUNTIME; }
        if (taken) continue;
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'D': o->doc = optarg; break;
        case 'C': o->corpus = optarg; break;
        case 'a': o->arms_list = optarg; break;
        case 'r': o->ref = optarg; break;
        case 'L': if (parse_list("--lengths", optarg, 16, 1 << 22, o->lengths, &o->n_lengths)) return EXIT_USAGE; break;
        case 'P': if (parse_list("--positions", optarg, 0, 100, o->positions, &o->n_positions)) return EXIT_USAGE; break;
        case 'K': if (cli_parse_int("--keys", optarg, 1, NEEDLE_MAX_KEYS, &o->keys)) return EXIT_USAGE; break;
        case 'N': if (cli_parse_int("--trials", optarg, 1, 10000, &o->trials)) return EXIT_USAGE; break;
        case 'S': if (cli_parse_long("--seed", optarg, 0, LONG_MAX, &v)) return EXIT_USAGE; o->seed = (uint64_t)v; break;
        case 'T': if (parse_template(optarg, &o->tpl)) return EXIT_USAGE; break;
        case 'G': if (cli_parse_int("--gen", optarg, 1, 1024, &o->gen)) return EXIT_USAGE; break;
        case 'c': if (cli_parse_int("--chunk", optarg, 1, 1 << 20, &o->chunk)) return EXIT_USAGE; break;
        case 't': if (cli_parse_int("--threads", optarg, 1, 1024, &o->threads)) return EXIT_USAGE; break;
        case 'p': if (cli_parse_int("--prefill", optarg, 1, 1 << 16, &o->prefill)) return EXIT_USAGE; break;
        case 'X': if (cli_parse_int("--max-context", optarg, 1, 1 << 22, &o->max_context)) return EXIT_USAGE; break;
        case 'w': o->worker = optarg; break;
        case 'o': o->out = optarg; break;
        case 'g': o->tag = optarg; break;
        case 'F': o->force = 1; break;
        case 'q': o->quiet = 1; break;
        case 'R': o->resume = optarg; break;
        case 'U': o->dump_prompts = optarg; break;
        case 'h': needle_usage(stdout); return -1;
        default: needle_usage(stderr); return EXIT_USAGE;
        }
    }
    if (optind < argc) { cli_errorf("unexpected argument '%s' (see strata-driver needle --help)", argv[optind]); return EXIT_USAGE; }
    if (o->doc && o->corpus) { cli_errorf("give at most one of --doc, --corpus"); return EXIT_USAGE; }
    char e2[512];
    if (workers_arm_opts_check(&o->ao, e2, sizeof e2)) { cli_errorf("%s", e2); return EXIT_USAGE; }
    if (o->corpus && !o->corpus[0]) { cli_errorf("--corpus is empty: kjv, self or a folder"); return EXIT_USAGE; }
    if (o->tag && cli_check_tag(o->tag)) return EXIT_USAGE;
    return 0;
}

/* Options of an earlier run from its meta.json "options" (strings point into meta). */
static int opts_from_meta(json_t *meta, needle_opts *o, char *err, size_t errlen) {
    json_t *op = json_object_get(meta, "options");
    if (!json_is_object(op)) return errmsg_set(err, errlen, -1, "meta.json has no \"options\"");
#define OSTR(key) (json_is_string(json_object_get(op, key)) ? json_string_value(json_object_get(op, key)) : NULL)
#define OINT(key, dst, lo, hi) do { json_t *x_ = json_object_get(op, key);                          \
        if (!json_is_integer(x_) || json_integer_value(x_) < (lo) || json_integer_value(x_) > (hi)) \
            return errmsg_set(err, errlen, -1, "meta.json options.%s is missing or out of range", key); \
        dst = (int)json_integer_value(x_); } while (0)
    o->model = OSTR("model");
    o->doc = OSTR("doc");
    o->corpus = OSTR("corpus");
    o->arms_list = OSTR("arms");
    o->ref = OSTR("ref");
    if (!o->model || !o->ref) return errmsg_set(err, errlen, -1, "meta.json options lack model or ref");
    OINT("keys", o->keys, 1, NEEDLE_MAX_KEYS);
    OINT("trials", o->trials, 1, 10000);
    OINT("gen", o->gen, 1, 1024);
    OINT("chunk", o->chunk, 1, 1 << 20);
    OINT("prefill", o->prefill, 0, 1 << 16);
    OINT("max_context", o->max_context, 0, 1 << 22);
    json_t *sd = json_object_get(op, "seed");
    if (!json_is_integer(sd) || json_integer_value(sd) < 0)
        return errmsg_set(err, errlen, -1, "meta.json options.seed is missing");
    o->seed = (uint64_t)json_integer_value(sd);
    const char *t = OSTR("template");
    o->tpl = !t ? -1 : !strcmp(t, "raw") ? TPL_RAW : !strcmp(t, "chat") ? TPL_CHAT : !strcmp(t, "both") ? TPL_BOTH : -1;
    if (o->tpl < 0) return errmsg_set(err, errlen, -1, "meta.json options.template is not raw, chat or both");
    const char *lk[2] = {"lengths", "positions"};
    int *dst[2] = {o->lengths, o->positions}, *cnt[2] = {&o->n_lengths, &o->n_positions};
    for (int w = 0; w < 2; w++) {
        json_t *a = json_object_get(op, lk[w]);
        if (!json_is_array(a) || !json_array_size(a) || json_array_size(a) > MAX_LIST)
            return errmsg_set(err, errlen, -1, "meta.json options.%s is not a list", lk[w]);
        *cnt[w] = (int)json_array_size(a);
        for (size_t i = 0; i < json_array_size(a); i++) {
            json_t *x = json_array_get(a, i);
            long lo = w ? 0 : 16, hi = w ? 100 : 1 << 22;
            if (!json_is_integer(x) || json_integer_value(x) < lo || json_integer_value(x) > hi)
                return errmsg_set(err, errlen, -1, "meta.json options.%s[%zu] is out of range", lk[w], i);
            dst[w][i] = (int)json_integer_value(x);
        }
    }
    /* the arm options, through the same parser as the command line's (codes of WORKERS_ARM_LONGOPTS) */
    static const struct { const char *key; int code; } arm_keys[] = {
        {"tls_cert", 1001}, {"tls_key", 1002}, {"tls_ca", 1003}, {"launch", 1004}, {"launch_listen", 1005},
        {"rope_angles", 1007}};
    const char *lists[2] = {"remote", "arm_models"};
    for (int w = 0; w < 2; w++) {
        json_t *a = json_object_get(op, lists[w]);
        for (size_t i = 0; json_is_array(a) && i < json_array_size(a); i++)
            if (json_is_string(json_array_get(a, i)) &&
                workers_arm_opt(&o->ao, w ? 'B' : 'A', json_string_value(json_array_get(a, i))) < 0)
                return errmsg_set(err, errlen, -1, "out of memory");
    }
    for (size_t i = 0; i < sizeof arm_keys / sizeof arm_keys[0]; i++)
        if (OSTR(arm_keys[i].key)) workers_arm_opt(&o->ao, arm_keys[i].code, OSTR(arm_keys[i].key));
    if (json_is_true(json_object_get(op, "allow_overcommit"))) workers_arm_opt(&o->ao, 1006, NULL);
    if (json_is_true(json_object_get(op, "mmap_weights"))) workers_arm_opt(&o->ao, 1008, NULL);
    if (json_is_true(json_object_get(op, "allow_kv_mismatch"))) workers_arm_opt(&o->ao, 1009, NULL);
#undef OSTR
#undef OINT
    return 0;
}

static json_t *opts_to_json(const needle_opts *o) {
    json_t *j = json_object(), *L = json_array(), *P = json_array(), *rem = json_array();
    for (int i = 0; i < o->n_lengths; i++) json_array_append_new(L, json_integer(o->lengths[i]));
    for (int i = 0; i < o->n_positions; i++) json_array_append_new(P, json_integer(o->positions[i]));
    for (int i = 0; i < o->ao.n_remote; i++) json_array_append_new(rem, json_string(o->ao.remote[i]));
    json_object_set_new(j, "model", json_string(o->model));
    json_object_set_new(j, "arms", o->arms_list ? json_string(o->arms_list) : json_null());
    json_object_set_new(j, "remote", rem);
    if (o->ao.n_arm_models) {
        json_t *am = json_array();
        for (int i = 0; i < o->ao.n_arm_models; i++) json_array_append_new(am, json_string(o->ao.arm_models[i]));
        json_object_set_new(j, "arm_models", am);
    }
    /* how the workers start and connect (paths, not secrets: a resume reads the same files) */
    const char *arm_strs[][2] = {{"tls_cert", o->ao.tls_cert}, {"tls_key", o->ao.tls_key}, {"tls_ca", o->ao.tls_ca},
                                 {"launch", o->ao.launch}, {"launch_listen", o->ao.launch_listen},
                                 {"rope_angles", o->ao.rope_angles}};
    for (size_t i = 0; i < sizeof arm_strs / sizeof arm_strs[0]; i++)
        if (arm_strs[i][1]) json_object_set_new(j, arm_strs[i][0], json_string(arm_strs[i][1]));
    if (o->ao.allow_overcommit) json_object_set_new(j, "allow_overcommit", json_true());
    if (o->ao.mmap_weights) json_object_set_new(j, "mmap_weights", json_true());
    if (o->ao.allow_kv_mismatch) json_object_set_new(j, "allow_kv_mismatch", json_true());
    json_object_set_new(j, "ref", json_string(o->ref));
    json_object_set_new(j, "lengths", L);
    json_object_set_new(j, "positions", P);
    json_object_set_new(j, "keys", json_integer(o->keys));
    json_object_set_new(j, "trials", json_integer(o->trials));
    json_object_set_new(j, "seed", json_integer((json_int_t)o->seed));
    json_object_set_new(j, "template", json_string(o->tpl == TPL_RAW ? "raw" : o->tpl == TPL_CHAT ? "chat" : "both"));
    json_object_set_new(j, "gen", json_integer(o->gen));
    json_object_set_new(j, "corpus", o->corpus ? json_string(o->corpus) : json_null());
    json_object_set_new(j, "doc", o->doc ? json_string(o->doc) : json_null());
    json_object_set_new(j, "chunk", json_integer(o->chunk));
    json_object_set_new(j, "prefill", json_integer(o->prefill));
    json_object_set_new(j, "max_context", json_integer(o->max_context));
    return j;
}

/* ============================================================================================
 * The tokenizer: the reference arm's worker tokenises (tokenize requests) and tells the driver
 * every token's decoded piece, the control tokens and the chat template (a vocab request); the
 * driver runs no engine code
 * ========================================================================================== */

#define NTOK_RECV_MAX ((size_t)PROTO_MAX_TEXT * 2 + PROTO_SLACK)   /* vocab and tokenize replies */

typedef struct {
    arm *a;               /* the reference arm (borrowed) */
    int n_vocab;          /* the tokenizer's tokens (<= the model's n_vocab) */
    needle_chat chat;
    char system[NEEDLE_TEXT_MAX];
    proto_msg vocab;      /* the vocab reply: pieces [offsets], control flags, chat template */
    int32_t *nl;          /* [n_nl] the tokens of "\n" alone: the sentinel of encode_piece */
    size_t n_nl;
    uint8_t *ends;        /* [n_vocab] the token ends a sentence */
    uint8_t *ends_nl;     /* [n_vocab] it ends with a newline */
} ntok;

static void ntok_free(ntok *t) {
    proto_msg_free(&t->vocab);
    free(t->nl);
    free(t->ends);
    free(t->ends_nl);
    memset(t, 0, sizeof *t);
}

/* text [len] tokenised by the reference worker, no BOS; special: parse special-token texts.
 * *ids is malloc'd (NULL for n = 0). */
static int ntok_encode(const ntok *t, const char *text, size_t len, int special, int32_t **ids, size_t *n,
                       char *err, size_t errlen) {
    return arm_tokenize(t->a, text, len, 0, special, NTOK_RECV_MAX, ids, n, err, errlen) ? -1 : 0;
}

/* Tokens of text as they read after a newline: "\n" + text tokenised, the tokens of "\n" cut off
 * (when the two do not line up, text alone). No BOS. *ids is malloc'd (may be NULL for n = 0). */
static int encode_piece(const ntok *t, const char *text, int special, int32_t **ids, size_t *n,
                        char *err, size_t errlen) {
    size_t len = strlen(text);
    char *s = malloc(len + 2);
    if (!s) return errmsg_set(err, errlen, -1, "out of memory");
    s[0] = '\n';
    memcpy(s + 1, text, len + 1);
    int32_t *a = NULL;
    size_t na = 0;
    int rc = ntok_encode(t, s, len + 1, special, &a, &na, err, errlen);
    free(s);
    if (rc) return -1;
    if (na >= t->n_nl && !memcmp(a, t->nl, t->n_nl * sizeof *a)) {
        memmove(a, a + t->n_nl, (na - t->n_nl) * sizeof *a);
        *ids = a;
        *n = na - t->n_nl;
        return 0;
    }
    free(a);
    return ntok_encode(t, text, len, special, ids, n, err, errlen);
}

/* Asks the reference arm for its tokenizer's pieces and chat template. */
static int ntok_fetch(arm *a, ntok *t, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    t->a = a;
    proto_msg req;
    proto_init(&req, PROTO_VOCAB, 0, 0);
    if (arm_set_recv_max(a, NTOK_RECV_MAX, err, errlen) ||
        arm_call(a, &req, &t->vocab, NTOK_RECV_MAX, err, errlen))
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
    return ntok_encode(t, "\n", 1, 0, &t->nl, &t->n_nl, err, errlen);
}

/* The decoded text of ids [n] up to the first control token, into a malloc'd NUL-terminated
 * *text [*len]. */
static int decode_answer(const ntok *t, const int32_t *ids, size_t n, char **text, size_t *len) {
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

/* ============================================================================================
 * The plan: haystacks, cells, their order, the cost
 * ========================================================================================== */

typedef struct {
    int length, position, trial, chat;   /* chat: 0 raw, 1 chat */
    int length_eff;                      /* L after the context cap */
    needle_keys keys;
    char key_text[16];
    int32_t *prompt;                     /* [n] */
    size_t n;
    size_t needle_pos, first_cut;
    int32_t *gold;                       /* [n_gold] */
    size_t n_gold;
    int done;                            /* in cells.tsv already (resume) */
} ncell;

typedef struct {
    ncell *c;            /* [n] in run order */
    int n;
    int n_templates;     /* 1 or 2 */
    int tpl_chat[2];     /* [n_templates]: 0 raw, 1 chat */
    int capped;          /* some length was capped at the context */
    int cap_len;
    size_t *hay_off, *hay_end;   /* [trials] the bytes [off, end) of the corpus each trial reads */
    int trials;
    int hay_overlap;     /* a trial's haystack shares text with an earlier one (short corpus) */
} nplan;

static void plan_free(nplan *p) {
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
static int hay_tokens(const ntok *T, const doc_t *doc, size_t off, int trial, size_t need,
                      int32_t **ids, size_t *n, size_t *end_out, char *err, size_t errlen) {
    size_t bytes = hay_span(need);
    for (;;) {
        size_t end = off + bytes < doc->n_text ? off + bytes : doc->n_text;
        *end_out = end;
        char *s = strndup(doc->text + off, end - off);
        if (!s) return errmsg_set(err, errlen, -1, "out of memory");
        int rc = encode_piece(T, s, 0, ids, n, err, errlen);
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
    const ncell *x = a, *y = b;
    if (x->chat != y->chat) return x->chat - y->chat;
    if (x->trial != y->trial) return x->trial - y->trial;
    if (x->first_cut != y->first_cut) return x->first_cut > y->first_cut ? -1 : 1;
    if (x->length != y->length) return y->length - x->length;
    return y->position - x->position;
}

static int plan_build(const needle_opts *o, const ntok *T, const doc_t *doc, uint64_t n_ctx,
                      int add_bos, int bos, nplan *P, char *err, size_t errlen) {
    int rc = -1;
    int32_t *hay = NULL, *head = NULL, *tail = NULL, *tail_ans = NULL;
    int32_t *nl_ids[NEEDLE_MAX_KEYS] = {0}, *sp_ids[NEEDLE_MAX_KEYS] = {0};
    size_t n_hay = 0;
    memset(P, 0, sizeof *P);
    if (o->tpl != TPL_CHAT) P->tpl_chat[P->n_templates++] = 0;
    if (o->tpl != TPL_RAW) P->tpl_chat[P->n_templates++] = 1;
    P->n = o->n_lengths * o->n_positions * o->trials * P->n_templates;
    P->trials = o->trials;
    P->c = calloc((size_t)P->n, sizeof *P->c);
    P->hay_off = calloc((size_t)o->trials, sizeof *P->hay_off);
    P->hay_end = calloc((size_t)o->trials, sizeof *P->hay_end);
    if (!P->c || !P->hay_off || !P->hay_end) return errmsg_set(err, errlen, -1, "out of memory");
    int maxL = 0;
    for (int i = 0; i < o->n_lengths; i++) maxL = o->lengths[i] > maxL ? o->lengths[i] : maxL;

    int w = 0;
    for (int t = 0; t < o->trials; t++) {
        int clash;
        free(hay);
        hay = NULL;
        /* each trial its own stretch of the corpus: drawn from (seed, t), away from the earlier ones */
        P->hay_off[t] = needle_hay_place(o->seed, t, doc->text, doc->n_text, hay_span((size_t)maxL),
                                         P->hay_off, P->hay_end, t, &clash);
        P->hay_overlap |= clash;
        if (hay_tokens(T, doc, P->hay_off[t], t, (size_t)maxL, &hay, &n_hay, &P->hay_end[t], err, errlen))
            goto done;
        for (int ti = 0; ti < P->n_templates; ti++) {
            int chat = P->tpl_chat[ti];
            for (int li = 0; li < o->n_lengths; li++) {
                for (int pi = 0; pi < o->n_positions; pi++) {
                    ncell *c = &P->c[w++];
                    needle_texts tx;
                    size_t n_head = 0, n_tail = 0, n_ta = 0, n_nl[NEEDLE_MAX_KEYS], n_sp[NEEDLE_MAX_KEYS];
                    char s[NEEDLE_TEXT_MAX + 32];
                    c->length = o->lengths[li];
                    c->position = o->positions[pi];
                    c->trial = t;
                    c->chat = chat;
                    if (needle_cell_keys(o->seed, c->length, c->position, t, o->keys, &c->keys) ||
                        needle_texts_build(chat ? T->chat : NEEDLE_CHAT_NONE, T->system, &c->keys, &tx)) {
                        errmsg_set(err, errlen, -1, "cannot build the texts of a cell");
                        goto done;
                    }
                    snprintf(c->key_text, sizeof c->key_text, "%s", tx.key_text);
                    free(head); free(tail); free(tail_ans);
                    head = tail = tail_ans = NULL;
                    if (encode_piece(T, tx.head, chat, &head, &n_head, err, errlen) ||
                        encode_piece(T, tx.tail, chat, &tail, &n_tail, err, errlen))
                        goto done;
                    snprintf(s, sizeof s, "%s %s", tx.tail, tx.key_text);
                    if (encode_piece(T, s, chat, &tail_ans, &n_ta, err, errlen)) goto done;
                    /* the gold answer: what " KEY" adds to the tail's tokens */
                    if (n_ta > n_tail && !memcmp(tail_ans, tail, n_tail * sizeof *tail)) {
                        c->n_gold = n_ta - n_tail;
                        if (!(c->gold = malloc(c->n_gold * sizeof *c->gold))) goto oom;
                        memcpy(c->gold, tail_ans + n_tail, c->n_gold * sizeof *c->gold);
                    } else {
                        snprintf(s, sizeof s, " %s", tx.key_text);
                        if (encode_piece(T, s, 0, &c->gold, &c->n_gold, err, errlen)) goto done;
                    }
                    if (!c->n_gold) { errmsg_set(err, errlen, -1, "the key %s has no tokens", tx.key_text); goto done; }
                    for (int j = 0; j < o->keys; j++) {
                        free(nl_ids[j]); free(sp_ids[j]);
                        nl_ids[j] = sp_ids[j] = NULL;
                        snprintf(s, sizeof s, "%s\n", tx.needle[j]);
                        if (encode_piece(T, s, 0, &nl_ids[j], &n_nl[j], err, errlen)) goto done;
                        snprintf(s, sizeof s, " %s", tx.needle[j]);
                        if (encode_piece(T, s, 0, &sp_ids[j], &n_sp[j], err, errlen)) goto done;
                    }
                    /* the prefix: BOS + head */
                    int32_t *pre = malloc((n_head + 1) * sizeof *pre);
                    if (!pre) goto oom;
                    size_t n_pre = 0;
                    if (add_bos && bos >= 0) pre[n_pre++] = bos;
                    if (n_head) memcpy(pre + n_pre, head, n_head * sizeof *pre);
                    n_pre += n_head;
                    /* the context cap: the prompt, then gen − 1 generated or n_gold − 1 gold tokens */
                    uint64_t extra = (uint64_t)(o->gen > (int)c->n_gold ? o->gen : (int)c->n_gold);
                    uint64_t cap = n_ctx > extra ? n_ctx - extra : 0;
                    c->length_eff = (uint64_t)c->length > cap ? (int)cap : c->length;
                    if (c->length_eff < c->length) { P->capped = 1; P->cap_len = c->length_eff; }
                    needle_parts parts;
                    memset(&parts, 0, sizeof parts);
                    parts.prefix = (needle_span){pre, n_pre};
                    parts.hay = (needle_span){hay, n_hay};
                    parts.tail = (needle_span){tail, n_tail};
                    for (int j = 0; j < o->keys; j++) {
                        parts.needle_nl[j] = (needle_span){nl_ids[j], n_nl[j]};
                        parts.needle_sp[j] = (needle_span){sp_ids[j], n_sp[j]};
                    }
                    parts.frac = c->keys.frac;
                    parts.k = o->keys;
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
                        errmsg_set(err, errlen, -1, "length %d, position %d, trial %d: %s", c->length,
                                   c->position, t, e2);
                        goto done;
                    }
                    c->prompt = np.ids;
                    c->n = np.n;
                    c->needle_pos = np.at[0];
                    c->first_cut = np.first_cut;
                }
            }
        }
    }
    qsort(P->c, (size_t)P->n, sizeof *P->c, cmp_cells);
    rc = 0;
    goto done;
oom:
    errmsg_set(err, errlen, -1, "out of memory");
done:
    free(hay); free(head); free(tail); free(tail_ans);
    for (int j = 0; j < NEEDLE_MAX_KEYS; j++) { free(nl_ids[j]); free(sp_ids[j]); }
    return rc;
}

/* Cost model of one arm, from the calibration: a prefill of tokens [s, e) takes
 * a·(e − s) + b·(e² − s²)/2 seconds (per-token work plus attention over the positions before),
 * a generated token at position q takes d + b·q. */
typedef struct {
    int have;
    double a, b, d;
} ncost_model;

static double cost_prefill(const ncost_model *m, double s, double e) {
    return m->a * (e - s) + m->b * (e * e - s * s) / 2;
}

/* What the remaining cells cost: tokens per arm and seconds (when calibrated). The stream starts
 * as cur [n_cur]. */
typedef struct {
    long cells, prompt_tokens, prefill_tokens, gold_tokens, gen_tokens;
    double seconds;
} ncost;

static void plan_cost(const nplan *P, int gen, const ncost_model *m, const int32_t *cur,
                      size_t n_cur, ncost *out, double *cell_cost /* [P->n] or NULL */) {
    memset(out, 0, sizeof *out);
    const int32_t *prev = cur;
    size_t n_prev = n_cur;
    for (int i = 0; i < P->n; i++) {
        const ncell *c = &P->c[i];
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

/* ============================================================================================
 * meta.json
 * ========================================================================================== */

typedef struct {
    const needle_opts *o;
    const char *command, *git, *tag, *out_dir;
    const ntok *T;
    const doc_t *doc;
    char doc_sha[65];
    const nplan *P;
    json_t *warnings;           /* borrowed */
    json_t *calibration;        /* owned (NULL before) */
    json_t *cost;               /* owned */
    char date[64], machine[512];
    double t0, wall_before;     /* this session's start; wall time of earlier sessions */
    int resumed;                /* sessions before this one */
    proto_stats_rep *stats;     /* [n_arms] */
    int *have_stats;            /* [n_arms] */
} nmeta;

static int write_meta(const nmeta *M, const arm *arms, int n, int ref, int cells_done,
                      const char *status, int complete, char *err, size_t errlen) {
    const proto_hello_rep *h = &arms[ref].hello;
    json_t *root = json_object(), *model = workers_model_json(M->o->model, h), *corpus = json_object();
    json_t *jarms = json_array();
    json_t *tpls = json_array(), *grid = json_object();
    char engine[2 * PROTO_STR_MAX + 16];
    snprintf(engine, sizeof engine, "%s (git %s)", h->engine, h->git);
    json_object_set_new(root, "kind", json_string("needle"));
    json_object_set_new(root, "strata_needle_version", json_integer(1));
    json_object_set_new(root, "tag", json_string(M->tag));
    json_object_set_new(root, "date", json_string(M->date));
    json_object_set_new(root, "command", json_string(M->command));
    json_object_set_new(root, "git", json_string(M->git));
    json_object_set_new(root, "engine", json_string(engine));
    json_object_set_new(root, "machine", json_string(M->machine));
    json_object_set_new(root, "options", opts_to_json(M->o));
    json_object_set_new(model, "chat_template", json_string(needle_chat_name(M->T->chat)));
    json_object_set_new(model, "chat_system", json_string(M->T->system));
    json_object_set_new(root, "model", model);
    json_object_set_new(corpus, "path", json_string(M->doc->path));
    json_object_set_new(corpus, "description", json_string(M->doc->desc));
    json_object_set_new(corpus, "sha256", json_string(M->doc_sha));
    json_object_set_new(corpus, "bytes", json_integer((json_int_t)M->doc->n_text));
    json_object_set_new(root, "corpus", corpus);
    for (int i = 0; i < M->P->n_templates; i++)
        json_array_append_new(tpls, json_string(M->P->tpl_chat[i] ? "chat" : "raw"));
    json_object_set_new(root, "templates", tpls);
    json_object_set_new(grid, "cells", json_integer(M->P->n));
    json_object_set_new(grid, "length_cap", M->P->capped ? json_integer(M->P->cap_len) : json_null());
    json_t *hs = json_array();
    for (int t = 0; t < M->P->trials; t++)
        json_array_append_new(hs, json_pack("{s:i,s:I,s:I}", "trial", t, "offset", (json_int_t)M->P->hay_off[t],
                                            "end", (json_int_t)M->P->hay_end[t]));
    json_object_set_new(grid, "haystacks", hs);
    json_object_set_new(root, "plan", grid);
    if (M->calibration) json_object_set(root, "calibration", M->calibration);
    if (M->cost) json_object_set(root, "cost", M->cost);
    json_object_set_new(root, "ref", json_string(arms[ref].name));
    for (int i = 0; i < n; i++) {
        const arm *a = &arms[i];
        json_t *ja = workers_arm_json(a);
        json_object_set_new(ja, "threads", json_integer(a->hello.threads));
        if (M->have_stats && M->have_stats[i]) {
            const proto_stats_rep *s = &M->stats[i];
            json_object_set_new(ja, "prefill_tokens", json_integer((json_int_t)s->prefill_tokens));
            json_object_set_new(ja, "prefill_seconds", json_real(s->prefill_seconds));
            json_object_set_new(ja, "decode_tokens", json_integer((json_int_t)s->decode_tokens));
            json_object_set_new(ja, "decode_seconds", json_real(s->decode_seconds));
            json_object_set_new(ja, "peak_rss", json_integer((json_int_t)s->peak_rss));
        }
        json_array_append_new(jarms, ja);
    }
    json_object_set_new(root, "arms", jarms);
    json_object_set_new(root, "cells_done", json_integer(cells_done));
    json_object_set_new(root, "sessions", json_integer(M->resumed + 1));
    json_object_set_new(root, "wall_seconds", json_real(M->wall_before + clock_s() - M->t0));
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        json_object_set_new(root, "driver_peak_rss", json_integer((json_int_t)ru.ru_maxrss * 1024));
    json_object_set(root, "warnings", M->warnings);
    json_object_set_new(root, "status", json_string(status));
    json_object_set_new(root, "complete", json_boolean(complete));

    char path[PATH_MAX], tmp[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/meta.json", M->out_dir);
    snprintf(tmp, sizeof tmp, "%s/.meta.json.tmp", M->out_dir);
    int ret = 0;
    if (json_dump_file(root, tmp, JSON_INDENT(2) | JSON_PRESERVE_ORDER) || rename(tmp, path))
        ret = errmsg_set(err, errlen, -1, "cannot write %s: %s", path, strerror(errno));
    json_decref(root);
    return ret;
}

/* ============================================================================================
 * One cell on every arm
 * ========================================================================================== */

typedef struct {
    arm *arms;
    int n, ref;
    int V;
    size_t recv_max;
    int chunk, gen;
    const volatile sig_atomic_t *stop;
    proto_msg *req, *rep;      /* [n] */
    int32_t *cur;              /* [cap] the tokens every arm's stream holds */
    size_t n_cur, cap;
    int *twin, *twin_warned;   /* [n] */
    json_t *warnings;
} nrun;

static void free_reps(nrun *R) {
    for (int a = 0; a < R->n; a++) proto_msg_free(&R->rep[a]);
}

/* arm_call_all on R->req; maps an interruption to 130-style code ARM_E_INTERRUPTED. */
static int call_all(nrun *R, char *err, size_t errlen) {
    return arm_call_all(R->arms, R->n, R->req, R->rep, R->recv_max, 0, R->stop, NULL, err, errlen);
}

static int truncate_all(nrun *R, size_t depth, char *err, size_t errlen) {
    for (int a = 0; a < R->n; a++) {
        proto_init(&R->req[a], PROTO_TRUNCATE, 0, 0);
        R->req[a].truncate_req.depth = depth;
    }
    int rc = call_all(R, err, errlen);
    for (int a = 0; !rc && a < R->n; a++)
        if (R->rep[a].truncate_rep.n_past != depth)
            rc = errmsg_set(err, errlen, PROTO_E_BADMSG, "arm %s: truncate to %zu left %llu tokens",
                            R->arms[a].name, depth, (unsigned long long)R->rep[a].truncate_rep.n_past);
    free_reps(R);
    if (!rc) R->n_cur = depth < R->n_cur ? depth : R->n_cur;
    return rc;
}

/* Prefills ids [n] on every arm from the current stream end, in requests of R->chunk tokens; the
 * last asks for `rows` (PROTO_ROWS_LAST or _ALL). The replies of the last request stay in R->rep
 * (the caller frees them) when rows != NONE. */
static int prefill_all(nrun *R, const int32_t *ids, size_t n, uint32_t rows, char *err, size_t errlen) {
    for (size_t pos = 0; pos < n;) {
        size_t m = n - pos < (size_t)R->chunk ? n - pos : (size_t)R->chunk;
        int last = pos + m == n;
        uint32_t want = last ? rows : PROTO_ROWS_NONE;
        uint32_t n_rows = want == PROTO_ROWS_ALL ? (uint32_t)m : want == PROTO_ROWS_LAST ? 1 : 0;
        for (int a = 0; a < R->n; a++) {
            proto_init(&R->req[a], PROTO_PREFILL, 0, 0);
            R->req[a].prefill_req.tokens = (int32_t *)(ids + pos);
            R->req[a].prefill_req.n_tokens = m;
            R->req[a].prefill_req.rows = want;
        }
        int rc = call_all(R, err, errlen);
        size_t n_past = R->n_cur + pos + m;
        for (int a = 0; !rc && a < R->n; a++) {
            const proto_prefill_rep *p = &R->rep[a].prefill_rep;
            if (p->n_past != n_past || p->n_rows != n_rows || (n_rows && (p->n_vocab != (uint32_t)R->V || !p->logits)))
                rc = errmsg_set(err, errlen, PROTO_E_BADMSG, "arm %s: prefill reply has n_past %llu and "
                                "%u rows, expected %zu and %u", R->arms[a].name,
                                (unsigned long long)p->n_past, p->n_rows, n_past, n_rows);
        }
        if (rc || !last || rows == PROTO_ROWS_NONE) free_reps(R);
        if (rc) return rc;
        pos += m;
    }
    if (R->n_cur + n > R->cap) {
        size_t cap = (R->n_cur + n) * 2;
        int32_t *c = realloc(R->cur, cap * sizeof *c);
        if (!c) { free_reps(R); return errmsg_set(err, errlen, PROTO_E_INTERNAL, "out of memory"); }
        R->cur = c;
        R->cap = cap;
    }
    memcpy(R->cur + R->n_cur, ids, n * sizeof *ids);
    R->n_cur += n;
    return 0;
}

/* ln p(tok) of a logit row [V] (log-softmax in double, docs/DESIGN.md §3.4). */
static int row_logprob(const float *row, int V, int tok, double *lp) {
    stats_row r;
    if (stats_compare_rows(row, row, V, tok, &r)) return -1;
    *lp = -r.nll_ref;
    return 0;
}

/* Runs cell c on every arm and fills out[a] (its strings/arrays malloc'd; the caller frees). */
static int run_cell(nrun *R, const ntok *T, const ncell *c, needle_row *out, char *err, size_t errlen) {
    int rc;
    double *lp = calloc((size_t)R->n, sizeof *lp);      /* [n] */
    int32_t **gen = calloc((size_t)R->n, sizeof *gen);  /* [n][gen] */
    if (!lp || !gen) { free(lp); free(gen); return errmsg_set(err, errlen, PROTO_E_INTERNAL, "out of memory"); }

    /* 1. back to the common prefix, prefill the rest; the last row predicts gold[0] */
    size_t lcp = needle_common_prefix(R->cur, R->n_cur, c->prompt, c->n);
    if (lcp > c->n - 1) lcp = c->n - 1;
    if (R->n_cur != lcp && (rc = truncate_all(R, lcp, err, errlen))) goto done;
    if ((rc = prefill_all(R, c->prompt + lcp, c->n - lcp, PROTO_ROWS_LAST, err, errlen))) goto done;
    for (int a = 0; a < R->n && !rc; a++)
        if (row_logprob(R->rep[a].prefill_rep.logits, R->V, c->gold[0], &lp[a]))
            rc = errmsg_set(err, errlen, PROTO_E_RANGE, "arm %s returned a non-finite logit at the end "
                            "of the prompt (length %d, position %d, trial %d)", R->arms[a].name,
                            c->length, c->position, c->trial);
    free_reps(R);
    if (rc) goto done;

    /* 2. the greedy answer */
    for (int a = 0; a < R->n; a++) {
        proto_init(&R->req[a], PROTO_GENERATE, 0, 0);
        R->req[a].generate_req.n = (uint32_t)R->gen;
        R->req[a].generate_req.temperature = 0.0;
        R->req[a].generate_req.seed = 0;
    }
    rc = call_all(R, err, errlen);
    for (int a = 0; !rc && a < R->n; a++) {
        const proto_generate_rep *g = &R->rep[a].generate_rep;
        if (g->n != (size_t)R->gen || !g->tokens || g->n_past != c->n + (size_t)R->gen - 1)
            rc = errmsg_set(err, errlen, PROTO_E_BADMSG, "arm %s: generate reply has %zu tokens and "
                            "n_past %llu, expected %d and %zu", R->arms[a].name, g->n,
                            (unsigned long long)g->n_past, R->gen, c->n + (size_t)R->gen - 1);
        else if (!(gen[a] = malloc((size_t)R->gen * sizeof *gen[a])))
            rc = errmsg_set(err, errlen, PROTO_E_INTERNAL, "out of memory");
        else memcpy(gen[a], g->tokens, (size_t)R->gen * sizeof *gen[a]);
    }
    free_reps(R);
    if (rc) goto done;
    R->n_cur = c->n;   /* the generated tokens are dropped next: truncate restores the row */
    if ((rc = truncate_all(R, c->n, err, errlen))) goto done;

    /* 3. the gold answer teacher-forced: rows for gold[1..] */
    if (c->n_gold > 1) {
        if ((rc = prefill_all(R, c->gold, c->n_gold - 1, PROTO_ROWS_ALL, err, errlen))) goto done;
        for (int a = 0; a < R->n && !rc; a++)
            for (size_t i = 0; i + 1 < c->n_gold && !rc; i++) {
                double x = 0;
                if (row_logprob(R->rep[a].prefill_rep.logits + i * (size_t)R->V, R->V, c->gold[i + 1], &x))
                    rc = errmsg_set(err, errlen, PROTO_E_RANGE, "arm %s returned a non-finite logit in "
                                    "the gold answer", R->arms[a].name);
                lp[a] += x;
            }
        free_reps(R);
        if (rc) goto done;
    }

    /* 4. the rows of cells.tsv */
    for (int a = 0; a < R->n; a++) {
        needle_row *r = &out[a];
        memset(r, 0, sizeof *r);
        r->length = c->length;
        r->position = c->position;
        r->trial = c->trial;
        r->chat = c->chat;
        r->key = c->keys.key[0];
        snprintf(r->arm, sizeof r->arm, "%s", R->arms[a].name);
        r->logprob = lp[a];
        r->n_prompt = (long)c->n;
        r->needle_pos = (long)c->needle_pos;
        r->gen = gen[a];
        gen[a] = NULL;
        r->n_gen = (size_t)R->gen;
        if (!(r->gold = malloc(c->n_gold * sizeof *r->gold)) ||
            decode_answer(T, r->gen, r->n_gen, &r->generated, &r->n_generated)) {
            rc = errmsg_set(err, errlen, PROTO_E_INTERNAL, "out of memory");
            goto done;
        }
        memcpy(r->gold, c->gold, c->n_gold * sizeof *r->gold);
        r->n_gold = c->n_gold;
        needle_first_digits(r->generated, r->n_generated, r->answer, sizeof r->answer);
        r->exact = !strcmp(r->answer, c->key_text);
    }
    /* the twin check: an arm configured like an earlier one must give the same bits */
    for (int a = 0; a < R->n; a++) {
        int t = R->twin[a];
        if (t < 0 || R->twin_warned[a]) continue;
        if (memcmp(&out[a].logprob, &out[t].logprob, sizeof(double)) ||
            memcmp(out[a].gen, out[t].gen, out[a].n_gen * sizeof *out[a].gen)) {
            char msg[512];
            R->twin_warned[a] = 1;
            snprintf(msg, sizeof msg, "arm %s is NOT bit-identical to arm %s (same K/V formats, device "
                     "and engine) at length %d, position %d, trial %d: the engine is not deterministic "
                     "and every number of this run is suspect", R->arms[a].name, R->arms[t].name,
                     c->length, c->position, c->trial);
            fprintf(stderr, "\nstrata-driver: WARNING: %s\n", msg);
            json_array_append_new(R->warnings, json_string(msg));
        }
    }
done:
    for (int a = 0; a < R->n; a++) free(gen[a]);
    free(gen);
    free(lp);
    return rc;
}

/* ============================================================================================
 * Calibration: two prefills of CAL_TOKENS and CAL_GEN generated tokens on every arm, at the start
 * of the first cell's prompt (so the work is not lost: that cell reuses it)
 * ========================================================================================== */

static int calibrate(nrun *R, const nplan *P, ncost_model *m, json_t **cal, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    *cal = NULL;
    const ncell *c = NULL;
    for (int i = 0; i < P->n && !c; i++)
        if (!P->c[i].done) c = &P->c[i];
    if (!c || c->n < 2 * CAL_TOKENS + 1 + (size_t)CAL_GEN) return 0;   /* tiny prompts: no estimate */
    int rc;
    double t0 = clock_s();
    if ((rc = prefill_all(R, c->prompt, CAL_TOKENS, PROTO_ROWS_NONE, err, errlen))) return rc;
    double t1 = clock_s();
    if ((rc = prefill_all(R, c->prompt + CAL_TOKENS, CAL_TOKENS, PROTO_ROWS_LAST, err, errlen))) return rc;
    free_reps(R);
    double t2 = clock_s();
    for (int a = 0; a < R->n; a++) {
        proto_init(&R->req[a], PROTO_GENERATE, 0, 0);
        R->req[a].generate_req.n = CAL_GEN;
    }
    rc = call_all(R, err, errlen);
    free_reps(R);
    if (rc) return rc;
    double t3 = clock_s();
    if ((rc = truncate_all(R, 2 * CAL_TOKENS, err, errlen))) return rc;
    double n = CAL_TOKENS, x1 = t1 - t0, x2 = t2 - t1, x3 = t3 - t2;
    /* x1 = a n + b n²/2, x2 = a n + b (4n² − n²)/2 -> b = (x2 − x1)/n², a = (x1 − b n²/2)/n */
    m->b = (x2 - x1) / (n * n);
    if (m->b < 0) m->b = 0;
    m->a = (x1 - m->b * n * n / 2) / n;
    if (m->a < 0) m->a = x1 / n;
    m->d = x3 / CAL_GEN - m->b * 2 * n;
    if (m->d < m->a) m->d = m->a;
    m->have = 1;
    *cal = json_pack("{s:i,s:f,s:f,s:i,s:f,s:f,s:f,s:f}", "tokens", 2 * CAL_TOKENS, "prefill_seconds_first",
                     x1, "prefill_seconds_second", x2, "generated", CAL_GEN, "generate_seconds", x3,
                     "a_seconds_per_token", m->a, "b_seconds_per_token_position", m->b,
                     "d_seconds_per_generated_token", m->d);
    return 0;
}

/* ============================================================================================
 * Progress on stderr: \r redrawn on a terminal, else a line every 10 s
 * ========================================================================================== */

typedef struct {
    int quiet, tty, drawn;
    double t0, last, total, done;   /* cost units (seconds of the model, or tokens) */
    int cells_total, cells_done;
} nprogress;

static void progress_show(nprogress *p, const ncell *c, int force) {
    if (p->quiet) return;
    double t = clock_s();
    if (!force && t - p->last < (p->tty ? 0.2 : 10.0)) return;
    p->last = t;
    double el = t - p->t0, eta = p->done > 0 ? el * (p->total - p->done) / p->done : NAN;
    char e1[32], e2[32];
    fmt_duration(el, e1, sizeof e1);
    fmt_duration(eta, e2, sizeof e2);
    int pct = p->total > 0 ? (int)(100.0 * p->done / p->total) : 100;
    if (p->tty) {
        fprintf(stderr, "\rneedle: cell %d/%d (%d%%)  L=%d p=%d t=%d %s  elapsed %s  ETA %s   ",
                p->cells_done, p->cells_total, pct, c ? c->length : 0, c ? c->position : 0,
                c ? c->trial : 0, c ? (c->chat ? "chat" : "raw") : "", e1, e2);
        p->drawn = 1;
    } else {
        fprintf(stderr, "strata-driver: needle: %d/%d cells (%d%%), elapsed %s, ETA %s\n", p->cells_done,
                p->cells_total, pct, e1, e2);
    }
    fflush(stderr);
}

/* ============================================================================================
 * cells.tsv on resume: keep the rows of complete cells (every arm present), drop the rest
 * ========================================================================================== */

static int same_cell(const needle_row *r, const ncell *c) {
    return r->length == c->length && r->position == c->position && r->trial == c->trial && r->chat == c->chat;
}

static int resume_cells(const char *out_dir, nplan *P, const arm *arms, int n_arms, int *done,
                        json_t *warnings, char *err, size_t errlen) {
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    needle_row *rows = NULL;
    size_t n = 0, dropped = 0;
    int rc = -1;
    *done = 0;
    snprintf(path, sizeof path, "%s/cells.tsv", out_dir);
    struct stat st;
    if (stat(path, &st)) return 0;   /* nothing measured yet */
    if (needle_rows_read(path, &rows, &n, &dropped, err, errlen)) goto out;
    int *have = calloc((size_t)P->n * (size_t)n_arms, sizeof *have);   /* [cells][arms] */
    if (!have) { errmsg_set(err, errlen, -1, "out of memory"); goto out; }
    for (size_t i = 0; i < n; i++) {
        int ci = -1, ai = -1;
        for (int k = 0; k < P->n && ci < 0; k++) if (same_cell(&rows[i], &P->c[k])) ci = k;
        for (int a = 0; a < n_arms && ai < 0; a++) if (!strcmp(rows[i].arm, arms[a].name)) ai = a;
        if (ci < 0 || ai < 0) {
            errmsg_set(err, errlen, -1, "%s row %zu (length %d, position %d, trial %d, arm %s) is not "
                       "a cell or arm of this run's plan", path, i + 2, rows[i].length, rows[i].position,
                       rows[i].trial, rows[i].arm);
            free(have);
            goto out;
        }
        if (rows[i].key != P->c[ci].keys.key[0]) {
            errmsg_set(err, errlen, -1, "%s row %zu has key %u where the plan has %u: not the same "
                       "seed or code", path, i + 2, rows[i].key, P->c[ci].keys.key[0]);
            free(have);
            goto out;
        }
        have[(size_t)ci * (size_t)n_arms + (size_t)ai]++;
    }
    for (int k = 0; k < P->n; k++) {
        int all = 1;
        for (int a = 0; a < n_arms; a++) all &= have[(size_t)k * (size_t)n_arms + (size_t)a] == 1;
        P->c[k].done = all;
        *done += all;
    }
    free(have);
    /* rewrite cells.tsv with the complete cells' rows only */
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) { errmsg_set(err, errlen, -1, "cannot create %s: %s", tmp, strerror(errno)); goto out; }
    fprintf(f, "%s\n", NEEDLE_CELLS_HEADER);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        int keep = 0;
        for (int k = 0; k < P->n && !keep; k++) keep = same_cell(&rows[i], &P->c[k]) && P->c[k].done;
        if (keep) { needle_row_write(f, &rows[i]); kept++; }
    }
    if (fclose(f) || rename(tmp, path)) { errmsg_set(err, errlen, -1, "cannot rewrite %s", path); goto out; }
    if (kept != n || dropped) {
        char w[256];
        snprintf(w, sizeof w, "resume dropped %zu rows of incomplete cells and %zu cut-off lines from "
                 "cells.tsv", n - kept, dropped);
        json_array_append_new(warnings, json_string(w));
    }
    rc = 0;
out:
    needle_rows_free(rows, n);
    return rc;
}

/* ============================================================================================
 * needle_main
 * ========================================================================================== */

int needle_main(int argc, char **argv, const char *command_line, const char *git,
                volatile sig_atomic_t *stop) {
    needle_opts o, cli;
    arm *arms = NULL;
    int n_arms = 0, ref = -1, ret = EXIT_RUNTIME, cells_done = 0, explicit_opts = 0;
    char err[2048] = "", tmpdir[PATH_MAX] = "", out_dir[PATH_MAX] = "", tag[256] = "";
    int tmp_lock = -1;
    char self_dir[PATH_MAX], worker[PATH_MAX], repo[PATH_MAX], root[PATH_MAX + 8], status_buf[2200];
    json_t *warnings = json_array(), *resume_meta = NULL;
    proto_tls tls;                /* the arms' start/connect options (workers_arms_build): outlive the arms */
    arm_options aopt;
    doc_t doc;
    ntok T;
    nplan P;
    nrun R;
    nmeta M;
    FILE *cells = NULL;
    double *cell_cost = NULL;
    const char *status = "error";
    memset(&doc, 0, sizeof doc);
    memset(&T, 0, sizeof T);
    memset(&P, 0, sizeof P);
    memset(&R, 0, sizeof R);
    memset(&M, 0, sizeof M);
    opts_defaults(&cli);

    int prc = parse_opts(argc, argv, &cli, &explicit_opts);
    if (prc) { ret = prc < 0 ? EXIT_OK : prc; workers_arm_opts_free(&cli.ao); json_decref(warnings); return ret; }
    o = cli;
    if (cli.resume) {
        char mp[PATH_MAX + 16];
        json_error_t je;
        memset(&o.ao, 0, sizeof o.ao);   /* cli.ao keeps (and frees) what was given */
        if (explicit_opts) {
            cli_errorf("--resume takes the run's options from its meta.json: only --quiet, --threads, --worker and "
                   "the options that say where the workers run (--launch, --launch-listen, --arm, --tls-*) may be "
                   "given with it");
            ret = EXIT_USAGE;
            goto done;
        }
        snprintf(mp, sizeof mp, "%s/meta.json", cli.resume);
        /* a regular file of bounded size (not a FIFO or a link another user planted) */
        char *mtext = NULL;
        size_t mlen = 0;
        if (safeio_read_all(mp, SAFEIO_NOFOLLOW, (size_t)64 << 20, &mtext, &mlen, err, sizeof err)) {
            cli_errorf("--resume: %s", err);
            ret = EXIT_USAGE;
            goto done;
        }
        resume_meta = json_loadb(mtext, mlen, 0, &je);
        free(mtext);
        if (!resume_meta) { cli_errorf("--resume: cannot read %s: %s", mp, je.text); ret = EXIT_USAGE; goto done; }
        const char *kind = json_string_value(json_object_get(resume_meta, "kind"));
        if (!kind || strcmp(kind, "needle")) { cli_errorf("--resume: %s is not a needle run", mp); ret = EXIT_USAGE; goto done; }
        opts_defaults(&o);
        o.quiet = cli.quiet;
        o.threads = cli.threads;
        o.worker = cli.worker;
        o.resume = cli.resume;
        if (opts_from_meta(resume_meta, &o, err, sizeof err)) { cli_errorf("--resume: %s", err); goto done; }
        /* the options that start the workers or say where they run: never meta.json's (anyone may have
         * edited it), the command line's; a run that had them needs them again */
        char missing[1024];
        int n_missing = cli_resume_missing(&o.ao, NULL, &cli.ao, cli.worker, missing, sizeof missing);
        if (n_missing) {
            cli_errorf("--resume: %s/meta.json records %s, which a resume never takes from a results folder "
                       "(options that start the workers or say where they run): give %s again beside --resume",
                       cli.resume, missing, n_missing > 1 ? "them" : "it");
            ret = EXIT_USAGE;
            goto done;
        }
        free(o.ao.remote);
        o.ao.remote = cli.ao.remote;
        o.ao.n_remote = cli.ao.n_remote;
        cli.ao.remote = NULL;
        cli.ao.n_remote = 0;
        o.ao.launch = cli.ao.launch;
        o.ao.launch_listen = cli.ao.launch_listen;
        o.ao.tls_cert = cli.ao.tls_cert;
        o.ao.tls_key = cli.ao.tls_key;
        o.ao.tls_ca = cli.ao.tls_ca;
        snprintf(out_dir, sizeof out_dir, "%s", cli.resume);
        const char *tg = json_string_value(json_object_get(resume_meta, "tag"));
        snprintf(tag, sizeof tag, "%s", tg ? tg : "needle");
        json_t *w = json_object_get(resume_meta, "warnings");
        for (size_t i = 0; json_is_array(w) && i < json_array_size(w); i++)
            json_array_append(warnings, json_array_get(w, i));
        json_t *ws = json_object_get(resume_meta, "wall_seconds");
        M.wall_before = json_is_number(ws) ? json_number_value(ws) : 0;
        json_t *ss = json_object_get(resume_meta, "sessions");
        M.resumed = json_is_integer(ss) ? (int)json_integer_value(ss) : 1;
    }
    if (!o.model) { cli_errorf("--model FILE is required (the prompts are built with its tokenizer)"); ret = EXIT_USAGE; goto done; }

    /* ---- arms ---- */
    const char *list = o.arms_list ? o.arms_list : o.ao.n_remote ? NULL : o.ao.n_arm_models ? "f16" : "f16,int8";
    if (!o.arms_list && list) o.arms_list = list;
    if ((ref = workers_arms_build(list, o.ref, &o.ao, &tls, &aopt, &arms, &n_arms, err, sizeof err)) < 0) {
        cli_errorf("%s", err);
        ret = EXIT_USAGE;
        goto done;
    }
    for (int i = 0; i < n_arms; i++)
        if (arms[i].own_model && access(arms[i].model, R_OK)) {
            cli_errorf("--arm-model %s: cannot read %s: %s", arms[i].name, arms[i].model, strerror(errno));
            goto done;
        }
    int n_local = 0;
    for (int i = 0; i < n_arms; i++) n_local += !arms[i].remote;

    /* ---- paths ---- */
    if (cli_exe_dir(self_dir)) { cli_errorf("cannot find this program's directory (/proc/self/exe)"); goto done; }
    if (snprintf(worker, sizeof worker, "%s%s", o.worker ? o.worker : self_dir,
                 o.worker ? "" : "/strata-worker") >= (int)sizeof worker) {
        cli_errorf("the worker's path is too long");
        goto done;
    }
    if (n_local && access(worker, X_OK)) {
        cli_errorf("cannot run the worker %s: %s (build it with make, or pass --worker PATH)", worker, strerror(errno));
        goto done;
    }
    if (!o.resume) {
        if (o.tag) snprintf(tag, sizeof tag, "%s", o.tag);
        else {
            const char *base = strrchr(o.model, '/');
            snprintf(tag, sizeof tag, "%s", base ? base + 1 : o.model);
            size_t l = strlen(tag);
            if (l > 5 && !strcmp(tag + l - 5, ".gguf")) tag[l - 5] = 0;
            cli_sanitize(tag);
            strncat(tag, "-needle", sizeof tag - strlen(tag) - 1);
        }
        if (o.out) snprintf(out_dir, sizeof out_dir, "%s", o.out);
        else if (cli_default_out_dir(tag, out_dir, sizeof out_dir)) {
            cli_errorf("the results folder's name is too long");
            goto done;
        }
        int ne = dir_nonempty(out_dir);
        if (ne < 0) { cli_errorf("--out %s exists and is not a directory", out_dir); ret = EXIT_USAGE; goto done; }
        if (ne > 0 && !o.force) {
            cli_errorf("the results folder %s already holds a run: choose another --out, pass --force, or "
                   "--resume %s", out_dir, out_dir);
            ret = EXIT_USAGE;
            goto done;
        }
    }

    /* ---- the corpus ---- */
    if (snprintf(root, sizeof root, "%s/..", self_dir) >= (int)sizeof root || !realpath(root, repo))
        snprintf(repo, sizeof repo, "%s", self_dir);
    if (doc_load(o.doc, o.corpus, NULL, repo, &doc, err, sizeof err)) { cli_errorf("%s", err); goto done; }
    doc_sha256_hex(doc.text, doc.n_text, M.doc_sha);
    if (doc.kjv_mismatch)
        json_array_append_new(warnings, json_string("the KJV corpus differs from the standard text (sha256)"));
    if (o.resume) {
        const char *was = json_string_value(json_object_get(json_object_get(resume_meta, "corpus"), "sha256"));
        if (!was || strcmp(was, M.doc_sha)) {
            cli_errorf("--resume: the corpus is not the text the run started with (sha256 %s, now %s)",
                   was ? was : "unknown", M.doc_sha);
            goto done;
        }
    }

    /* ---- workers ---- */
    workers_opts wo = { worker, o.model, o.threads, o.prefill, o.max_context, o.quiet };
    int wrc = workers_start(arms, n_arms, &wo, stop, tmpdir, sizeof tmpdir, &tmp_lock, NULL, warnings, err,
                            sizeof err);
    if (wrc == WORKERS_INTERRUPTED) { ret = EXIT_INTERRUPTED; status = "interrupted"; goto done; }
    if (wrc) { cli_errorf("%s", err); ret = wrc == WORKERS_MISMATCH ? EXIT_MISMATCH : EXIT_RUNTIME; goto done; }
    const proto_hello_rep *h = &arms[ref].hello;
    /* ---- the tokenizer and the template (the reference worker's) ---- */
    if (ntok_fetch(&arms[ref], &T, err, sizeof err)) { cli_errorf("%s", err); goto done; }
    if (!o.tpl) o.tpl = T.chat != NEEDLE_CHAT_NONE ? TPL_BOTH : TPL_RAW;
    if (o.tpl != TPL_RAW && T.chat == NEEDLE_CHAT_NONE) {
        if (o.tpl == TPL_CHAT) {
            cli_errorf("--template chat: %s has no chat template (tokenizer.chat_template) that strata knows "
                   "(ChatML or Gemma); use --template raw", o.model);
            ret = EXIT_USAGE;
            goto done;
        }
        fprintf(stderr, "strata-driver: note: %s has no known chat template: raw prompts only\n", o.model);
        json_array_append_new(warnings, json_string("--template both: the model has no known chat template, raw prompts only"));
        o.tpl = TPL_RAW;
    }

    if (o.resume) {
        const char *was = json_string_value(json_object_get(json_object_get(resume_meta, "model"), "sha256"));
        if (!was || strcmp(was, h->model_sha256)) {
            cli_errorf("--resume: the model is not the one the run started with (sha256 %s, now %s)",
                   was ? was : "unknown", h->model_sha256);
            ret = EXIT_MISMATCH;
            goto done;
        }
    }
    uint64_t n_ctx = h->n_ctx;
    for (int i = 0; i < n_arms; i++)
        if (arms[i].hello.n_ctx < n_ctx) n_ctx = arms[i].hello.n_ctx;

    /* ---- the plan ---- */
    if (plan_build(&o, &T, &doc, n_ctx, h->bos >= 0, h->bos, &P, err, sizeof err)) { cli_errorf("%s", err); goto done; }
    if (o.dump_prompts) {
        if (cli_mkdir_p(o.dump_prompts, err, sizeof err)) { cli_errorf("%s", err); goto done; }
        for (int i = 0; i < P.n; i++) {
            const ncell *c = &P.c[i];
            char p[PATH_MAX + 64];
            snprintf(p, sizeof p, "%s/%s-L%d-p%d-t%d.tok", o.dump_prompts, c->chat ? "chat" : "raw", c->length,
                     c->position, c->trial);
            FILE *f = fopen(p, "w");
            if (!f) { cli_errorf("cannot create %s", p); goto done; }
            for (size_t k = 0; k < c->n; k++) fprintf(f, "%d%c", c->prompt[k], k + 1 < c->n ? ' ' : '\n');
            fprintf(f, "# key %s needle_pos %zu first_cut %zu order %d gold", c->key_text, c->needle_pos, c->first_cut, i);
            for (size_t k = 0; k < c->n_gold; k++) fprintf(f, " %d", c->gold[k]);
            fprintf(f, "\n");
            fclose(f);
        }
    }
    if (P.capped) {
        char w[256];
        snprintf(w, sizeof w, "prompt lengths above %d tokens were capped at %d (context %llu minus the "
                 "generated tokens)", P.cap_len, P.cap_len, (unsigned long long)n_ctx);
        if (!o.quiet) fprintf(stderr, "strata-driver: note: %s\n", w);
        if (!o.resume) json_array_append_new(warnings, json_string(w));
    }
    if (P.hay_overlap) {
        const char *w = "the corpus is too short for disjoint haystacks: some trials share text";
        if (!o.quiet) fprintf(stderr, "strata-driver: note: %s\n", w);
        if (!o.resume) json_array_append_new(warnings, json_string(w));
    }

    /* ---- the results folder ---- */
    if (cli_mkdir_p(out_dir, err, sizeof err)) { cli_errorf("%s", err); goto done; }
    if (o.resume) {
        if (resume_cells(out_dir, &P, arms, n_arms, &cells_done, warnings, err, sizeof err)) { cli_errorf("--resume: %s", err); goto done; }
        if (!o.quiet) fprintf(stderr, "strata-driver: resuming %s: %d of %d cells done\n", out_dir, cells_done, P.n);
    } else {
        static const char *const old[] = {"meta.json", "cells.tsv", "summary.json", "README.md", "workers.log"};
        char p[PATH_MAX + 16];
        for (size_t i = 0; o.force && i < sizeof old / sizeof *old; i++) {
            snprintf(p, sizeof p, "%s/%s", out_dir, old[i]);
            unlink(p);
        }
    }
    {
        char p[PATH_MAX + 16];
        snprintf(p, sizeof p, "%s/cells.tsv", out_dir);
        struct stat st;
        int fresh = stat(p, &st) != 0;
        if (!(cells = fopen(p, "a"))) { cli_errorf("cannot open %s: %s", p, strerror(errno)); goto done; }
        if (fresh) fprintf(cells, "%s\n", NEEDLE_CELLS_HEADER);
        fflush(cells);
    }
    M.o = &o;
    M.command = o.resume && json_is_string(json_object_get(resume_meta, "command"))
                    ? json_string_value(json_object_get(resume_meta, "command")) : command_line;
    M.git = git ? git : "unknown";
    M.tag = tag;
    M.out_dir = out_dir;
    M.T = &T;
    M.doc = &doc;
    M.P = &P;
    M.warnings = warnings;
    M.t0 = clock_s();
    {
        const char *d0 = o.resume ? json_string_value(json_object_get(resume_meta, "date")) : NULL;
        if (d0) snprintf(M.date, sizeof M.date, "%s", d0);
        else {
            time_t wall = time(NULL);
            struct tm tmv;
            localtime_r(&wall, &tmv);
            strftime(M.date, sizeof M.date, "%Y-%m-%dT%H:%M:%S%z", &tmv);
        }
    }
    sweep_machine_string(M.machine, sizeof M.machine);
    if (!(M.stats = calloc((size_t)n_arms, sizeof *M.stats)) || !(M.have_stats = calloc((size_t)n_arms, sizeof *M.have_stats))) {
        cli_errorf("out of memory");
        goto done;
    }
    if (write_meta(&M, arms, n_arms, ref, cells_done, "running", 0, err, sizeof err)) { cli_errorf("%s", err); goto done; }

    /* ---- the run's state ---- */
    size_t max_gold = 1;
    for (int i = 0; i < P.n; i++) max_gold = P.c[i].n_gold > max_gold ? P.c[i].n_gold : max_gold;
    R.arms = arms;
    R.n = n_arms;
    R.ref = ref;
    R.V = (int)h->n_vocab;
    R.recv_max = (size_t)h->n_vocab * 4 * (max_gold > 1 ? max_gold - 1 : 1) + (size_t)o.gen * 8 + PROTO_SLACK;
    R.chunk = o.chunk;
    R.gen = o.gen;
    R.stop = stop;
    R.warnings = warnings;
    R.req = calloc((size_t)n_arms, sizeof *R.req);
    R.rep = calloc((size_t)n_arms, sizeof *R.rep);
    R.twin = calloc((size_t)n_arms, sizeof *R.twin);
    R.twin_warned = calloc((size_t)n_arms, sizeof *R.twin_warned);
    cell_cost = calloc((size_t)P.n, sizeof *cell_cost);
    if (!R.req || !R.rep || !R.twin || !R.twin_warned || !cell_cost) { cli_errorf("out of memory"); goto done; }
    for (int i = 0; i < n_arms; i++) {
        R.twin[i] = -1;
        const proto_hello_rep *a = &arms[i].hello;
        for (int j = 0; j < i && R.twin[i] < 0; j++) {
            const proto_hello_rep *b = &arms[j].hello;
            if (!strcmp(a->kv_k, b->kv_k) && !strcmp(a->kv_v, b->kv_v) && !strcmp(a->device, b->device) &&
                !strcmp(a->engine, b->engine) && !strcmp(a->git, b->git) &&
                !strcmp(a->model_sha256, b->model_sha256))
                R.twin[i] = j;
        }
    }
    for (int i = 0; i < n_arms; i++)
        if (arm_set_recv_max(&arms[i], R.recv_max, err, sizeof err)) { cli_errorf("%s", err); goto done; }

    /* ---- the cost, calibrated ---- */
    int rc = truncate_all(&R, 0, err, sizeof err);
    ncost_model cm;
    json_t *cal = NULL;
    if (!rc) rc = calibrate(&R, &P, &cm, &cal, err, sizeof err);
    if (rc) {
        if (rc == ARM_E_INTERRUPTED) { ret = EXIT_INTERRUPTED; status = "interrupted"; }
        else cli_errorf("%s", err);
        goto done;
    }
    M.calibration = cal;
    ncost cost;
    plan_cost(&P, o.gen, &cm, R.cur, R.n_cur, &cost, cell_cost);
    M.cost = json_pack("{s:I,s:I,s:I,s:I,s:I,s:o}", "cells", (json_int_t)cost.cells, "prompt_tokens_per_arm",
                       (json_int_t)cost.prompt_tokens, "prefill_tokens_per_arm", (json_int_t)cost.prefill_tokens,
                       "gold_tokens_per_arm", (json_int_t)cost.gold_tokens, "generated_tokens_per_arm",
                       (json_int_t)cost.gen_tokens, "estimate_seconds",
                       cm.have ? json_real(cost.seconds) : json_null());
    if (!o.quiet) {
        char est[64] = "no estimate (prompts too short to calibrate)";
        if (cm.have) {
            char d[32];
            fmt_duration(cost.seconds, d, sizeof d);
            snprintf(est, sizeof est, "about %s", d);
        }
        fprintf(stderr, "strata-driver: needle: %d arms; %ld cells to run (%d of %d done) = %d lengths x %d "
                "positions x %d trials x %d templates; per arm: %ld prompt tokens, %ld prefilled (the rest "
                "are shared prefixes), %ld gold, %ld generated; time %s; results in %s\n",
                n_arms, cost.cells, cells_done, P.n, o.n_lengths, o.n_positions, o.trials, P.n_templates,
                cost.prompt_tokens, cost.prefill_tokens, cost.gold_tokens, cost.gen_tokens, est, out_dir);
        if (cm.have)
            fprintf(stderr, "strata-driver: needle: calibration (%d-token prefills, %d generated, all arms at "
                    "once): %.2f ms per token + %.3f us per token per position; %.1f ms per generated token\n",
                    CAL_TOKENS, CAL_GEN, 1e3 * cm.a, 1e6 * cm.b, 1e3 * cm.d);
    }

    /* ---- the cells ---- */
    nprogress pg;
    memset(&pg, 0, sizeof pg);
    pg.quiet = o.quiet;
    pg.tty = isatty(2);
    pg.t0 = pg.last = clock_s();
    pg.cells_total = P.n;
    pg.cells_done = cells_done;
    for (int i = 0; i < P.n; i++) pg.total += cm.have ? cell_cost[i] : (double)(P.c[i].done ? 0 : P.c[i].n);
    needle_row *rows = calloc((size_t)n_arms, sizeof *rows);
    if (!rows) { cli_errorf("out of memory"); goto done; }
    ret = EXIT_OK;
    status = "complete";
    for (int i = 0; i < P.n; i++) {
        const ncell *c = &P.c[i];
        if (c->done) continue;
        if (*stop) { ret = EXIT_INTERRUPTED; break; }
        memset(rows, 0, (size_t)n_arms * sizeof *rows);
        rc = run_cell(&R, &T, c, rows, err, sizeof err);
        for (int a = 0; !rc && a < n_arms; a++)
            if (needle_row_write(cells, &rows[a])) rc = errmsg_set(err, sizeof err, -1, "cannot write cells.tsv: %s", strerror(errno));
        if (!rc && fflush(cells)) rc = errmsg_set(err, sizeof err, -1, "cannot write cells.tsv: %s", strerror(errno));
        for (int a = 0; a < n_arms; a++) {
            free(rows[a].generated); free(rows[a].gold); free(rows[a].gen);
        }
        if (rc) {
            if (rc == ARM_E_INTERRUPTED) ret = EXIT_INTERRUPTED;
            else { cli_errorf("%s", err); ret = EXIT_RUNTIME; }
            break;
        }
        cells_done++;
        pg.cells_done = cells_done;
        pg.done += cm.have ? cell_cost[i] : (double)c->n;
        progress_show(&pg, c, 0);
        if (write_meta(&M, arms, n_arms, ref, cells_done, "running", 0, err, sizeof err)) {
            cli_errorf("%s", err);
            ret = EXIT_RUNTIME;
            break;
        }
    }
    free(rows);
    if (!o.quiet && pg.drawn) { progress_show(&pg, NULL, 1); fprintf(stderr, "\n"); }
    if (ret == EXIT_INTERRUPTED) {
        snprintf(status_buf, sizeof status_buf, "interrupted after %d of %d cells", cells_done, P.n);
        status = status_buf;
        fprintf(stderr, "strata-driver: interrupted: kept %d of %d cells in %s (continue with: strata-driver "
                "needle --resume %s)\n", cells_done, P.n, out_dir, out_dir);
    } else if (ret != EXIT_OK) {
        snprintf(status_buf, sizeof status_buf, "%s", err);
        status = status_buf;
    }
    if (ret != EXIT_OK) {
        char w[256];
        snprintf(w, sizeof w, "partial results: %d of %d cells", cells_done, P.n);
        json_array_append_new(warnings, json_string(w));
    }

    /* ---- the workers' counters, the final meta.json, the report ---- */
    for (int a = 0; a < n_arms; a++) {
        if (!arms[a].connected || !arm_alive(&arms[a])) continue;
        M.have_stats[a] = workers_stats(&arms[a], &M.stats[a], warnings);
    }
    if (write_meta(&M, arms, n_arms, ref, cells_done, status, ret == EXIT_OK, err, sizeof err)) {
        cli_errorf("%s", err);
        if (ret == EXIT_OK) ret = EXIT_RUNTIME;
    }
    fclose(cells);
    cells = NULL;
    arm_stop_all(arms, n_arms, 1, STOP_GRACE_MS);
    arm_save_logs(arms, n_arms, out_dir);
    if (cells_done > 0) {
        if (cli_render(needle_report_render, out_dir, o.quiet) && ret == EXIT_OK) ret = EXIT_RUNTIME;
    }

done:
    if (cells) fclose(cells);
    if (arms) arm_stop_all(arms, n_arms, 1, STOP_GRACE_MS);
    arm_tmpdir_remove(tmpdir, tmp_lock);
    free(arms);
    free(R.req);
    free(R.rep);
    free(R.cur);
    free(R.twin);
    free(R.twin_warned);
    free(cell_cost);
    free(M.stats);
    free(M.have_stats);
    json_decref(M.calibration);
    json_decref(M.cost);
    plan_free(&P);
    ntok_free(&T);
    doc_free(&doc);
    if (cli.resume) workers_arm_opts_free(&o.ao);   /* else o.ao is cli.ao's copy */
    workers_arm_opts_free(&cli.ao);
    json_decref(resume_meta);
    json_decref(warnings);
    if (*stop && ret != EXIT_OK) ret = EXIT_INTERRUPTED;
    return ret;
}
