/* needle_cli.c — the command line of `strata-driver needle` (see needle_internal.h): the usage,
 * the options from argv or, for --resume, from the run's meta.json, and meta.json's "options".
 *
 * Reading order: usage; lists and templates; defaults; argv; meta.json (--resume); "options". */
#include "driver/needle/needle_internal.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/cli.h"
#include "driver/run.h"
#include "kernels/errmsg.h"

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
        "  --mmap-weights, --rope-angles exact|f32, --allow-kv-mismatch, --devices LIST, --kv-resident R\n"
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

/* "1024,2048" -> out [*n] (at most NEEDLE_MAX_LIST, each in [lo, hi], no repeats). */
static int parse_list(const char *opt, const char *s, long lo, long hi, int *out, int *n) {
    char buf[1024], *save = NULL;
    if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf) { cli_errorf("%s: list too long", opt); return -1; }
    *n = 0;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (*n == NEEDLE_MAX_LIST) { cli_errorf("%s: at most %d values", opt, NEEDLE_MAX_LIST); return -1; }
        if (cli_parse_int(opt, t, lo, hi, &out[*n])) return -1;
        for (int i = 0; i < *n; i++)
            if (out[i] == out[*n]) { cli_errorf("%s: %d given twice", opt, out[i]); return -1; }
        (*n)++;
    }
    if (!*n) { cli_errorf("%s: empty list", opt); return -1; }
    return 0;
}


static int parse_template(const char *s, int *tpl) {
    if (!strcmp(s, "raw")) *tpl = NEEDLE_TPL_RAW;
    else if (!strcmp(s, "chat")) *tpl = NEEDLE_TPL_CHAT;
    else if (!strcmp(s, "both")) *tpl = NEEDLE_TPL_BOTH;
    else { cli_errorf("--template: raw, chat or both, got '%s'", s); return -1; }
    return 0;
}

void needle_opts_defaults(needle_opts *o) {
    memset(o, 0, sizeof *o);
    o->ref = "f16";
    o->keys = 1;
    o->trials = 3;
    o->gen = 12;
    o->eng.chunk = 1024;
    o->seed = 1;
    static const int L[] = {1024, 2048, 4096}, P[] = {0, 25, 50, 75, 100};
    memcpy(o->lengths, L, sizeof L);
    o->n_lengths = 3;
    memcpy(o->positions, P, sizeof P);
    o->n_positions = 5;
}

int needle_opts_parse(int argc, char **argv, needle_opts *o, int *explicit_run_opts) {
    static const struct option opts[] = {
        {"model", 1, 0, 'm'}, {"doc", 1, 0, 'D'}, {"corpus", 1, 0, 'C'}, {"arms", 1, 0, 'a'},
        {"ref", 1, 0, 'r'}, {"lengths", 1, 0, 'L'}, {"positions", 1, 0, 'P'},
        {"keys", 1, 0, 'K'}, {"trials", 1, 0, 'N'}, {"seed", 1, 0, 'S'}, {"template", 1, 0, 'T'},
        {"gen", 1, 0, 'G'}, {"out", 1, 0, 'o'}, {"tag", 1, 0, 'g'},
        {"force", 0, 0, 'F'}, {"quiet", 0, 0, 'q'}, {"resume", 1, 0, 'R'}, {"dump-prompts", 1, 0, 'U'}, {"help", 0, 0, 'h'},
        CLI_ENGINE_LONGOPTS, WORKERS_ARM_LONGOPTS, {0, 0, 0, 0}};
    int c;
    long v;
    *explicit_run_opts = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:o:qh", opts, NULL)) != -1) {
        /* beside --resume: --threads, --quiet, --worker, --dump-prompts and what says where the workers run */
        int taken = cli_resumable_opt(&o->ao, c, optarg, "tqwRUhA", explicit_run_opts);
        if (taken < 0) return RUN_EXIT_RUNTIME;
        if (taken) continue;
        taken = cli_engine_opt(&o->eng, c, optarg);   /* --worker, --chunk, --threads, --prefill, --max-context */
        if (taken < 0) return RUN_EXIT_USAGE;
        if (taken) continue;
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'D': o->doc = optarg; break;
        case 'C': o->corpus = optarg; break;
        case 'a': o->arms_list = optarg; break;
        case 'r': o->ref = optarg; break;
        case 'L': if (parse_list("--lengths", optarg, 16, 1 << 22, o->lengths, &o->n_lengths)) return RUN_EXIT_USAGE; break;
        case 'P': if (parse_list("--positions", optarg, 0, 100, o->positions, &o->n_positions)) return RUN_EXIT_USAGE; break;
        case 'K': if (cli_parse_int("--keys", optarg, 1, NEEDLE_MAX_KEYS, &o->keys)) return RUN_EXIT_USAGE; break;
        case 'N': if (cli_parse_int("--trials", optarg, 1, 10000, &o->trials)) return RUN_EXIT_USAGE; break;
        case 'S': if (cli_parse_long("--seed", optarg, 0, LONG_MAX, &v)) return RUN_EXIT_USAGE; o->seed = (uint64_t)v; break;
        case 'T': if (parse_template(optarg, &o->tpl)) return RUN_EXIT_USAGE; break;
        case 'G': if (cli_parse_int("--gen", optarg, 1, 1024, &o->gen)) return RUN_EXIT_USAGE; break;
        case 'o': o->out = optarg; break;
        case 'g': o->tag = optarg; break;
        case 'F': o->force = 1; break;
        case 'q': o->quiet = 1; break;
        case 'R': o->resume = optarg; break;
        case 'U': o->dump_prompts = optarg; break;
        case 'h': needle_usage(stdout); return -1;
        default: needle_usage(stderr); return RUN_EXIT_USAGE;
        }
    }
    if (optind < argc) { cli_errorf("unexpected argument '%s' (see strata-driver needle --help)", argv[optind]); return RUN_EXIT_USAGE; }
    if (o->doc && o->corpus) { cli_errorf("give at most one of --doc, --corpus"); return RUN_EXIT_USAGE; }
    char e2[512];
    if (workers_arm_opts_check(&o->ao, e2, sizeof e2)) { cli_errorf("%s", e2); return RUN_EXIT_USAGE; }
    if (o->corpus && !o->corpus[0]) { cli_errorf("--corpus is empty: kjv, self or a folder"); return RUN_EXIT_USAGE; }
    if (o->tag && cli_check_tag(o->tag)) return RUN_EXIT_USAGE;
    return 0;
}

/* Options of an earlier run from its meta.json "options" (strings point into meta). */
static int needle_opts_from_meta(json_t *meta, needle_opts *o, char *err, size_t errlen) {
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
    OINT("chunk", o->eng.chunk, 1, 1 << 20);
    OINT("prefill", o->eng.prefill, 0, 1 << 16);
    OINT("max_context", o->eng.max_context, 0, 1 << 22);
    json_t *sd = json_object_get(op, "seed");
    if (!json_is_integer(sd) || json_integer_value(sd) < 0)
        return errmsg_set(err, errlen, -1, "meta.json options.seed is missing");
    o->seed = (uint64_t)json_integer_value(sd);
    const char *t = OSTR("template");
    o->tpl = !t ? -1 : !strcmp(t, "raw") ? NEEDLE_TPL_RAW : !strcmp(t, "chat") ? NEEDLE_TPL_CHAT : !strcmp(t, "both") ? NEEDLE_TPL_BOTH : -1;
    if (o->tpl < 0) return errmsg_set(err, errlen, -1, "meta.json options.template is not raw, chat or both");
    const char *lk[2] = {"lengths", "positions"};
    int *dst[2] = {o->lengths, o->positions}, *cnt[2] = {&o->n_lengths, &o->n_positions};
    for (int w = 0; w < 2; w++) {
        json_t *a = json_object_get(op, lk[w]);
        if (!json_is_array(a) || !json_array_size(a) || json_array_size(a) > NEEDLE_MAX_LIST)
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

json_t *needle_opts_json(const needle_opts *o) {
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
    json_object_set_new(j, "template", json_string(o->tpl == NEEDLE_TPL_RAW ? "raw" : o->tpl == NEEDLE_TPL_CHAT ? "chat" : "both"));
    json_object_set_new(j, "gen", json_integer(o->gen));
    json_object_set_new(j, "corpus", o->corpus ? json_string(o->corpus) : json_null());
    json_object_set_new(j, "doc", o->doc ? json_string(o->doc) : json_null());
    json_object_set_new(j, "chunk", json_integer(o->eng.chunk));
    json_object_set_new(j, "prefill", json_integer(o->eng.prefill));
    json_object_set_new(j, "max_context", json_integer(o->eng.max_context));
    return j;
}

int needle_opts_resume(needle_opts *o, needle_opts *cli, json_t *meta) {
    char err[2048], missing[1024];
    needle_opts_defaults(o);
    o->quiet = cli->quiet;
    o->eng.threads = cli->eng.threads;
    o->eng.worker = cli->eng.worker;
    o->resume = cli->resume;
    if (needle_opts_from_meta(meta, o, err, sizeof err)) { cli_errorf("--resume: %s", err); return RUN_EXIT_RUNTIME; }
    /* the options that start the workers or say where they run: never meta.json's (anyone may have
     * edited it), the command line's; a run that had them needs them again */
    int n_missing = cli_resume_missing(&o->ao, NULL, &cli->ao, cli->eng.worker, missing, sizeof missing);
    if (n_missing) {
        cli_errorf("--resume: %s/meta.json records %s, which a resume never takes from a results folder "
                   "(options that start the workers or say where they run): give %s again beside --resume",
                   cli->resume, missing, n_missing > 1 ? "them" : "it");
        return RUN_EXIT_USAGE;
    }
    cli_resume_take_workers(&o->ao, &cli->ao);
    return 0;
}
