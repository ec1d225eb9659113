/* sweep_cli.c — the command line of `strata-driver sweep` (see sweep_cli.h): the usage, the
 * options, and --resume's options from the run's journal.
 *
 * Reading order: usage; --sample-temps; the options; the invocation; --resume. */
#include "driver/sweep/sweep_cli.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver/cli.h"
#include "driver/journal.h"
#include "driver/passages.h"
#include "driver/run.h"

void sweep_usage(FILE *f) {
    fprintf(f,
        "usage: strata-driver sweep --model FILE [options]\n"
        "Runs one worker per arm and measures every arm against the reference arm at K depths of one\n"
        "document in a single pass (prefill, teacher-forced row, greedy fork probe, truncate back).\n"
        "document (one of; default --corpus kjv):\n"
        "  --corpus kjv        the King James Bible from Debian's bible-kjv package (" DOC_KJV_COMMAND ",\n"
        "                      verse labels stripped; ~1M tokens): the same text on every machine\n"
        "  --corpus perldoc    technical prose: 14 pod files of Perl 5.36's documentation from Debian's\n"
        "                      perl-doc package (" DOC_PERLDOC_DIR "), in a fixed order, sha256 checked\n"
        "  --corpus self       strata's own README.md, docs/*.md and C sources (changes with the code;\n"
        "                      a mix of prose and source code like the original experiment's)\n"
        "  --corpus DIR        the regular text files under DIR, sorted by path, concatenated\n"
        "                      (a folder named kjv, perldoc or self: write ./kjv)\n"
        "  --doc FILE          one text file\n"
        "  Text is tokenised by the reference worker (BOS added).\n"
        "  --tokens-file FILE  token ids, decimal, separated by commas or whitespace\n"
        "arms:\n"
        "  --arms LIST         comma-separated KV specs (default f16,int8): F (K and V), K/V (int8/f16),\n"
        "                      k:F (K only, V as the reference), v:F; a repeat is named NAME#2\n"
        "                      formats: f32 bf16 f16 int8 q8_0 q4_0 q4_0r fp8 (e4m3) q4_1 q5_0 q5_1 iq4_nl\n"
        "                      e5m2 e4m3s e5m2s (fp8 with a per-token-per-head scale) nvfp4 mxfp4,\n"
        "                      tq3 tq4 (rotation + Lloyd-Max codebook), kivi2 kivi4 (kivi4-gG-rR: G\n"
        "                      tokens per K group, R recent tokens in f16); FMT+rot, FMT+roth, FMT+rotp\n"
        "                      rotate the cache (docs/DESIGN.md); an f32 arm is the noise floor.\n"
        "                      Per layer: FMT@N, FMT@N-M, FMT@-N (from the end), per KV head: FMT@hK,\n"
        "                      FMT@hK-J, joined by '+' with one plain FMT for the rest, e.g.\n"
        "                      int8+f16@0+f16@-1 (K and V; also in K/V, k:, v:).\n"
        "                      llama:SPEC runs the arm on llama.cpp (a strata-worker built by `make llama`;\n"
        "                      formats f32 f16 bf16 q8_0 q4_0 q4_1 iq4_nl q5_0 q5_1, no mixes): llama:q8_0\n"
        "                      ref:SPEC runs it on strata's plain C reference pass (--backend ref: one\n"
        "                      thread, dense models; the same bits as SPEC, a check): ref:f16\n"
        "  --ref NAME          the reference arm (default f16)\n"
        "  --arm-model NAME=FILE\n"
        "                      also run an arm on another GGUF (a weight quantisation of --model) with\n"
        "                      the reference arm's KV formats; NAME:SPEC=FILE with SPEC's (q8:int8=F).\n"
        "                      It must have the same tokenizer (hash, vocabulary, BOS), not the same\n"
        "                      weights. Repeatable; without --arms the --model arms are just f16.\n"
        "  --arm NAME=URL      also use an already running worker (tls+tcp://HOST:PORT with --tls-*, or\n"
        "                      tcp://HOST:PORT); repeatable.\n"
        "                      With --arm and no --arms, only the --arm workers are used. Such a\n"
        "                      worker is only disconnected at the end: it keeps serving.\n"
        "  --allow-kv-mismatch run an --arm worker whose K/V formats are not the ones its NAME says\n"
        "                      (--arm int8=URL on a worker started with --kv f16; refused otherwise,\n"
        "                      exit 3); the results then label it by what it ran: int8[ran:f16]\n"
        "  --threads N         threads per local worker (default: cores / local arms, at least 1;\n"
        "                      so 1 per worker with several arms on 2 cores)\n"
        "  --prefill N         worker prefill chunk (default: the worker's, 512)\n"
        "  --max-context N     context reserved by local workers (default: the model's)\n"
        "  --worker PATH       the strata-worker binary (default: next to this program)\n"
        "  --rope-angles A     exact (default) or f32: the local workers' RoPE angles (f32 = llama.cpp's\n"
        "                      evaluation, whose error grows with the position; docs/DESIGN.md §3.2)\n"
        "  --allow-overcommit  pass --allow-overcommit to the local workers (start although the KV cache\n"
        "                      at full context for all arms exceeds MemAvailable)\n"
        "  --mmap-weights      the local workers map the model file and share it, instead of each copying\n"
        "                      it onto huge pages (less memory with many arms, slower decode; same results)\n"
        "  --devices LIST      the local llama:SPEC arms run on these llama.cpp devices in turn, one device\n"
        "                      per worker (no layer split): e.g. cuda:0,cuda:1 (a libllama built for them)\n"
        "  --kv-resident R     llama arms on a device: device (default) or host (KV cache in host memory)\n"
        "  --launch TEMPLATE   start each local arm's worker through a cluster's tool: /bin/sh -c TEMPLATE\n"
        "                      with {worker} the worker's command line (quoted), {arm} the arm's name, {i}\n"
        "                      its index, e.g. 'srun -N1 -n1 --gpus=1 {worker}' or 'ssh gpu{i} {worker}';\n"
        "                      the worker says on stdout where it listens, and exits when the launcher's\n"
        "                      stdin closes (the driver ending). See README, \"Clusters\"\n"
        "  --launch-listen URL where launched workers listen (default tcp://127.0.0.1:0: this host, a free\n"
        "                      port); another host needs tls+tcp://0.0.0.0:0 and the worker's --tls-*\n"
        "                      options after {worker} in the template\n"
        "  --tls-cert F, --tls-key F, --tls-ca F   PEM files for tls+tcp:// arms: the driver's certificate\n"
        "                      and key, and the CA that signed the workers' certificates (mutual TLS)\n"
        "sweep:\n"
        "  --depths K          number of depths (default 16): d_k = round(k*D/K)\n"
        "  --max-depth N       deepest prefix (default: min(tokens - 1, n_ctx - fork))\n"
        "  --fork N            greedy tokens per fork probe (default 32)\n"
        "  --per-position      stream every position's rows and write positions.tsv\n"
        "  --margin-ppl PCT    equivalence margin of the report's PPL verdict, percent (default 1; meta.json)\n"
        "  --margin-top1 PP    equivalence margin of the report's top-1 verdict, percentage points (default 1)\n"
        "  --cross-score       score every arm's greedy continuation teacher-forced under the reference\n"
        "                      arm and the f32 arm (NLL per token, repetition rate) -> cross.tsv\n"
        "  --sample-temps LIST sampled fork probes at these temperatures (e.g. 0,0.3,0.7,1; 0 is the\n"
        "                      greedy probe), the same random stream on every arm -> samples.tsv\n"
        "  --top-p P           nucleus cut of the sampled probes (default 1: none)\n"
        "  --seed S            base seed of the sampled probes (default 20250101)\n"
        "  --pin-experts       mixture-of-experts models: the other arms replay the reference arm's\n"
        "                      experts at every teacher-forced position, so the arms differ only in\n"
        "                      their KV cache (free mode, the default, counts how often they differ:\n"
        "                      meta.json \"routing\"); the fork probes route freely in both modes\n"
        "  --pin-experts=FILE  the same with a routing file: when FILE exists every arm, the\n"
        "                      reference too, replays the experts recorded in it (same model and\n"
        "                      document); otherwise the reference's routing is recorded into it\n"
        "  --passages N        the controlled depth design (docs/DESIGN.md): N passages of --passage-len\n"
        "                      tokens from the document beyond the deepest prefix are scored after every\n"
        "                      depth's prefix (and once after none) -> passages.tsv; N >= 4 recommended\n"
        "                      (the depth trend's interval is a bootstrap over passages); without\n"
        "                      --max-depth the deepest prefix leaves room for them\n"
        "  --passage-len L     tokens per passage (default 256)\n"
        "  --chunk N           tokens per prefill request (default 512; capped so one arm's rows\n"
        "                      stay under 256 MiB in per-position mode)\n"
        "output:\n"
        "  --out DIR           results folder (default results/<YYYY-MM-DD-HHMM>-<tag>/, with -2, -3 ...\n"
        "                      appended if that exists: a default run never reuses a folder)\n"
        "  --tag T             tag (default: model name and arms, e.g. stories260K-f16-int8)\n"
        "  --force             reuse a non-empty results folder\n"
        "  --quiet             no progress line or handshake table\n"
        "  --json              print a JSON summary on stdout at the end (out dir, status, summary.json)\n"
        "faults and resuming:\n"
        "  --resume DIR        continue the sweep of results folder DIR after a crash, an interrupt or a\n"
        "                      failure, with the options recorded there (only --quiet, --json,\n"
        "                      --compare-threads, --request-timeout, --max-restarts, --dump-rows\n"
        "                      may be given beside it); the options that start the workers or say\n"
        "                      where they run (--launch, --launch-listen, --worker, --tls-*, --arm)\n"
        "                      are never taken from DIR: give them again when the run had them;\n"
        "                      the results equal an uninterrupted run's\n"
        "  --request-timeout S a worker that does not answer one request within S seconds is restarted\n"
        "                      (default: 10x the time the measured rate predicts, 60 s to 6 h; 30 min\n"
        "                      before anything is measured)\n"
        "  --max-restarts N    worker restarts (after a crash or a hang) before the sweep stops (default 2)\n"
        "  --compare-threads N threads comparing the arms' rows in per-position mode (default: the\n"
        "                      machine's cores; the results do not depend on it)\n"
        "Ctrl-C stops after the current request, keeps the depths measured and renders them (exit 130).\n"
        "Everything measured is journalled (DIR/journal, fsync'd): after any stop, --resume DIR continues.\n"
        "examples:\n"
        "  strata-driver sweep --model stories260K.gguf --arms f16,int8,f32 --doc story.txt\n"
        "  strata-driver sweep --model smollm2.gguf --arms f16,int8,k:int8,v:int8,f16 --per-position\n"
        "  strata-driver sweep --model m-f16.gguf --arms f16 --arm-model q8=m-q8_0.gguf   # weights\n"
        "  strata-worker --model m.gguf --kv int8 --listen tls+tcp://gpu1:5555 --tls-cert gpu1.pem \\\n"
        "      --tls-key gpu1.key --tls-ca ca.pem &                  # on gpu1\n"
        "  strata-driver sweep --model m.gguf --arms f16 --arm int8=tls+tcp://gpu1:5555 \\\n"
        "      --tls-cert me.pem --tls-key me.key --tls-ca ca.pem\n"
        "  strata-driver sweep --model m.gguf --arms f16,int8 --launch 'srun -N1 -n1 --gpus=1 {worker}'\n"
        "  strata-driver sweep --resume results/2025-01-01-smollm2-f16-int8\n");
}

/* --sample-temps: comma-separated temperatures in [0, 100]; the zeros (the greedy probe, always
 * run) are dropped, the others kept in order; a repeated value is an error. */
static int parse_temps(const char *list, sweep_opts *o) {
    const char *p = list;
    o->n_sample_temps = 0;
    while (*p) {
        char *end;
        errno = 0;
        double t = strtod(p, &end);
        if (errno || end == p || (*end && *end != ',') || !(t >= 0 && t <= 100)) {
            cli_errorf("--sample-temps '%s': give comma-separated temperatures in [0, 100]", list);
            return -1;
        }
        for (int j = 0; j < o->n_sample_temps; j++)
            if (o->sample_temps[j] == t) { cli_errorf("--sample-temps '%s': %g appears twice", list, t); return -1; }
        if (t > 0) {
            if (o->n_sample_temps == SWEEP_MAX_TEMPS) {
                cli_errorf("--sample-temps '%s': at most %d temperatures", list, SWEEP_MAX_TEMPS);
                return -1;
            }
            o->sample_temps[o->n_sample_temps++] = t;
        }
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* The defaults of the options that have one besides 0 / NULL. */
static void set_defaults(sweep_opts *o) {
    o->depths = 16;
    o->fork_n = 32;
    o->eng.chunk = 512;
    o->ref = "f16";
    o->max_restarts = -1;
    o->top_p = 1.0;
    o->seed = 20250101u;
    o->passage_len = PASSAGES_LEN_DEFAULT;
}

/* The option parsers below print one error line and return -1 when the value is not one. */

/* --margin-ppl / --margin-top1 (opt): a number in (0, 100). */
static int parse_margin(const char *opt, const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v > 0 && v < 100)) {
        cli_errorf("%s '%s': give a number in (0, 100)", opt, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* --top-p: a number in (0, 1]. */
static int parse_top_p(const char *s, double *out) {
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    if (errno || end == s || *end || !(*out > 0 && *out <= 1)) {
        cli_errorf("--top-p '%s': give a number in (0, 1]", s);
        return -1;
    }
    return 0;
}

/* --seed: an unsigned integer. */
static int parse_seed(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-') {
        cli_errorf("--seed '%s': give an unsigned integer", s);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

/* The checks once every option is read: one document source, the combinations refused, the
 * workers' options, the tag. 0 or RUN_EXIT_USAGE (said). */
static int check_opts(const sweep_opts *o) {
    if (!!o->doc + !!o->corpus + !!o->tokens_file > 1) {
        cli_errorf("give at most one of --doc, --corpus, --tokens-file");
        return RUN_EXIT_USAGE;
    }
    if (o->corpus && !o->corpus[0]) { cli_errorf("--corpus is empty: kjv, perldoc, self or a folder"); return RUN_EXIT_USAGE; }
    if (o->n_passages && o->pin_experts) {
        cli_errorf("--passages cannot be combined with --pin-experts (the passages' routing is not pinned)");
        return RUN_EXIT_USAGE;
    }
    char e2[512];
    if (workers_arm_opts_check(&o->ao, e2, sizeof e2)) { cli_errorf("%s", e2); return RUN_EXIT_USAGE; }
    if (o->tag && cli_check_tag(o->tag)) return RUN_EXIT_USAGE;
    return 0;
}

int sweep_cli_parse(int argc, char **argv, sweep_opts *o) {
    static const struct option opts[] = {
        {"model", 1, 0, 'm'}, {"doc", 1, 0, 'D'}, {"corpus", 1, 0, 'C'}, {"tokens-file", 1, 0, 'T'},
        {"arms", 1, 0, 'a'}, {"ref", 1, 0, 'r'}, {"depths", 1, 0, 'k'}, {"max-depth", 1, 0, 'x'},
        {"fork", 1, 0, 'f'}, {"per-position", 0, 0, 'P'}, {"out", 1, 0, 'o'}, {"tag", 1, 0, 'g'},
        {"force", 0, 0, 'F'}, {"quiet", 0, 0, 'q'},
        {"json", 0, 0, 'j'}, {"dump-rows", 1, 0, 'R'}, {"help", 0, 0, 'h'}, {"resume", 1, 0, 'Z'},
        {"request-timeout", 1, 0, 'Y'}, {"max-restarts", 1, 0, 'M'}, {"cross-score", 0, 0, 'S'},
        {"sample-temps", 1, 0, 'e'}, {"top-p", 1, 0, 'u'}, {"seed", 1, 0, 'd'}, {"compare-threads", 1, 0, 'W'},
        {"pin-experts", optional_argument, 0, 1100}, {"passages", 1, 0, 1101}, {"passage-len", 1, 0, 1102},
        {"margin-ppl", 1, 0, 1103}, {"margin-top1", 1, 0, 1104},
        CLI_ENGINE_LONGOPTS, WORKERS_ARM_LONGOPTS, {0, 0, 0, 0}};
    int c;
    set_defaults(o);
    optind = 0;   /* 0: glibc re-initialises (a second argument vector is parsed for --resume) */
    while ((c = getopt_long(argc, argv, "m:o:qh", opts, NULL)) != -1) {
        /* not a run option: may be given beside --resume; the ones that start the workers or say where
         * they run (--launch, --launch-listen, --worker, --tls-*, --arm) must be, when the run had them */
        int taken = cli_resumable_opt(&o->ao, c, optarg, "qjwhZYMWAR", &o->n_run_opts);
        if (taken < 0) return RUN_EXIT_RUNTIME;
        if (taken) continue;
        taken = cli_engine_opt(&o->eng, c, optarg);   /* --worker, --chunk, --threads, --prefill, --max-context */
        if (taken < 0) return RUN_EXIT_USAGE;
        if (taken) continue;
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'D': o->doc = optarg; break;
        case 'C': o->corpus = optarg; break;
        case 'T': o->tokens_file = optarg; break;
        case 'a': o->arms_list = optarg; break;
        case 'r': o->ref = optarg; break;
        case 'k': if (cli_parse_int("--depths", optarg, 1, 100000, &o->depths)) return RUN_EXIT_USAGE; break;
        case 'x': if (cli_parse_int("--max-depth", optarg, 1, INT32_MAX / 2, &o->max_depth)) return RUN_EXIT_USAGE; break;
        case 'f': if (cli_parse_int("--fork", optarg, 1, 1 << 16, &o->fork_n)) return RUN_EXIT_USAGE; break;
        case 'P': o->per_position = 1; break;
        case 'o': o->out = optarg; break;
        case 'g': o->tag = optarg; break;
        case 'F': o->force = 1; break;
        case 'q': o->quiet = 1; break;
        case 'j': o->json = 1; break;
        case 'R': o->dump_rows = optarg; break;
        case 'Z': o->resume = optarg; break;
        case 'Y': if (cli_parse_int("--request-timeout", optarg, 1, 7 * 86400, &o->request_timeout_s)) return RUN_EXIT_USAGE; break;
        case 'M': if (cli_parse_int("--max-restarts", optarg, 0, 1000, &o->max_restarts)) return RUN_EXIT_USAGE; break;
        case 'W': if (cli_parse_int("--compare-threads", optarg, 1, SWEEP_COMPARE_THREADS_MAX, &o->compare_threads)) return RUN_EXIT_USAGE; break;
        case 'S': o->cross_score = 1; break;
        case 1100: o->pin_experts = 1; o->pin_file = optarg; break;
        case 1101: if (cli_parse_int("--passages", optarg, 0, PASSAGES_MAX, &o->n_passages)) return RUN_EXIT_USAGE; break;
        case 1102: if (cli_parse_int("--passage-len", optarg, 1, PASSAGES_LEN_MAX, &o->passage_len)) return RUN_EXIT_USAGE; break;
        case 1103: if (parse_margin("--margin-ppl", optarg, &o->margin_ppl)) return RUN_EXIT_USAGE; break;
        case 1104: if (parse_margin("--margin-top1", optarg, &o->margin_top1)) return RUN_EXIT_USAGE; break;
        case 'e': if (parse_temps(optarg, o)) return RUN_EXIT_USAGE; break;
        case 'u': if (parse_top_p(optarg, &o->top_p)) return RUN_EXIT_USAGE; break;
        case 'd': if (parse_seed(optarg, &o->seed)) return RUN_EXIT_USAGE; break;
        case 'h': sweep_usage(stdout); return -1;
        default: sweep_usage(stderr); return RUN_EXIT_USAGE;
        }
    }
    if (optind < argc) { cli_errorf("unexpected argument '%s' (see strata-driver sweep --help)", argv[optind]); return RUN_EXIT_USAGE; }
    return check_opts(o);
}

json_t *sweep_cli_invocation(int argc, char **argv) {
    json_t *inv = json_object(), *a = json_array();
    char cwd[PATH_MAX];
    for (int i = 0; i < argc; i++) json_array_append_new(a, json_string(argv[i]));
    json_object_set_new(inv, "argv", a);
    json_object_set_new(inv, "cwd", json_string(getcwd(cwd, sizeof cwd) ? cwd : "."));
    return inv;
}


/* The steps of sweep_cli_resume below return 0 or an exit code (the message printed). */

/* What was given beside --resume (given): no option that defines the run, and its folder (into
 * out_dir [PATH_MAX]), TLS files, --worker and --dump-rows made absolute, as the run's directory
 * becomes current. */
static int resume_given(sweep_opts *given, char *out_dir) {
    if (given->n_run_opts) {
        cli_errorf("--resume DIR continues a run with the options recorded in DIR; beside it only --quiet, --json, "
                   "--request-timeout, --max-restarts, --compare-threads, --dump-rows and the options that start the "
                   "workers or say where they run (--worker, --launch, --launch-listen, --arm, --tls-*) may be given");
        return RUN_EXIT_USAGE;
    }
    if (!realpath(given->resume, out_dir)) {
        cli_errorf("cannot resume %s: %s", given->resume, strerror(errno));
        return RUN_EXIT_USAGE;
    }
    const char *tls_given[3] = { given->ao.tls_cert, given->ao.tls_key, given->ao.tls_ca };
    for (int i = 0; i < 3 && tls_given[0]; i++)
        if (!realpath(tls_given[i], given->tls_abs[i])) {
            cli_errorf("cannot resume with %s: %s", tls_given[i], strerror(errno));
            return RUN_EXIT_USAGE;
        }
    if ((given->eng.worker && cli_abs_path(given->eng.worker, given->worker_abs, sizeof given->worker_abs)) ||
        (given->dump_rows && cli_abs_path(given->dump_rows, given->dump_abs, sizeof given->dump_abs))) {
        cli_errorf("cannot resume: a path given beside --resume is too long");
        return RUN_EXIT_USAGE;
    }
    return 0;
}

/* The run's journal header (*hdr, the caller's to decref) and the arguments it records (*rargv [*n],
 * malloc'd; the strings are in *hdr); the run's working directory becomes current. */
static int resume_recorded(const char *out_dir, json_t **hdr, char ***rargv, size_t *n) {
    char err[1024], *text = NULL;
    size_t len = 0;
    if (journal_in_use(out_dir)) {
        cli_errorf("cannot resume %s: it is in use (another strata-driver is writing it)", out_dir);
        return RUN_EXIT_RUNTIME;
    }
    if (journal_read_header(out_dir, &text, &len, err, sizeof err)) {
        cli_errorf("cannot resume %s: %s", out_dir, err);
        return RUN_EXIT_RUNTIME;
    }
    *hdr = json_loadb(text, len, 0, NULL);
    free(text);
    json_t *inv = json_object_get(*hdr, "invocation");
    json_t *av = json_object_get(inv, "argv");
    const char *cwd = json_string_value(json_object_get(inv, "cwd"));
    *n = json_array_size(av);
    if (!json_is_array(av) || *n < 1 || !cwd) {
        cli_errorf("cannot resume %s: its journal does not record the command's arguments", out_dir);
        return RUN_EXIT_RUNTIME;
    }
    if (!(*rargv = calloc(*n + 1, sizeof **rargv))) { cli_errorf("out of memory"); return RUN_EXIT_RUNTIME; }
    for (size_t i = 0; i < *n; i++) {
        const char *a = json_string_value(json_array_get(av, i));
        if (!a) { cli_errorf("cannot resume %s: a recorded argument is not a string", out_dir); return RUN_EXIT_RUNTIME; }
        (*rargv)[i] = (char *)a;
    }
    if (chdir(cwd)) {
        cli_errorf("cannot resume %s: the run's working directory %s: %s", out_dir, cwd, strerror(errno));
        return RUN_EXIT_RUNTIME;
    }
    return 0;
}

/* Into the recorded options o: what the command line gave (given) of where and how the workers run
 * (never taken from a journal: each must be given again when the run had it), the paths, and the
 * options allowed beside --resume. */
static int resume_take_given(sweep_opts *o, sweep_opts *given, char *out_dir) {
    int tls = given->ao.tls_cert != NULL;
    char missing[1024];
    int n_missing = cli_resume_missing(&o->ao, o->eng.worker, &given->ao, given->eng.worker, missing,
                                       sizeof missing);
    if (n_missing) {
        cli_errorf("cannot resume %s: its journal records %s, which a resume never takes from a journal (options "
                   "that start the workers or say where they run): give %s again beside --resume", out_dir, missing,
                   n_missing > 1 ? "them" : "it");
        return RUN_EXIT_USAGE;
    }
    if (o->dump_rows && !given->dump_rows)
        fprintf(stderr, "strata-driver: note: the run's --dump-rows folder is not taken from the journal (give "
                "--dump-rows DIR beside --resume to write rows)\n");
    /* where and how the workers run: the command line's only */
    cli_resume_take_workers(&o->ao, &given->ao);
    memcpy(o->tls_abs, given->tls_abs, sizeof o->tls_abs);
    o->ao.tls_cert = tls ? o->tls_abs[0] : NULL;
    o->ao.tls_key = tls ? o->tls_abs[1] : NULL;
    o->ao.tls_ca = tls ? o->tls_abs[2] : NULL;
    memcpy(o->worker_abs, given->worker_abs, sizeof o->worker_abs);
    o->eng.worker = given->eng.worker ? o->worker_abs : NULL;
    memcpy(o->dump_abs, given->dump_abs, sizeof o->dump_abs);
    o->dump_rows = given->dump_rows ? o->dump_abs : NULL;
    char e2[512];
    if (workers_arm_opts_check(&o->ao, e2, sizeof e2)) { cli_errorf("%s", e2); return RUN_EXIT_USAGE; }
    o->out = out_dir;
    o->force = 0;
    o->resume = given->resume;
    o->quiet |= given->quiet;
    o->json |= given->json;
    if (given->request_timeout_s) o->request_timeout_s = given->request_timeout_s;
    if (given->max_restarts >= 0) o->max_restarts = given->max_restarts;
    if (given->compare_threads) o->compare_threads = given->compare_threads;
    return 0;
}

/* (see sweep_cli.h) */
int sweep_cli_resume(sweep_opts *o, json_t **hdr, char ***rargv, char *out_dir, const char **command) {
    sweep_opts given = *o;   /* owns the --arm array from here on */
    memset(&o->ao, 0, sizeof o->ao);
    size_t n = 0;
    int rc = resume_given(&given, out_dir);
    if (!rc) rc = resume_recorded(out_dir, hdr, rargv, &n);
    if (!rc) {
        memset(o, 0, sizeof *o);
        int prc = sweep_cli_parse((int)n, *rargv, o);
        if (prc) {
            cli_errorf("cannot resume %s: its recorded options do not parse", out_dir);
            rc = prc < 0 ? RUN_EXIT_RUNTIME : prc;
        }
    }
    if (!rc) rc = resume_take_given(o, &given, out_dir);
    if (!rc) {
        const char *cmd = json_string_value(json_object_get(*hdr, "command"));
        if (cmd) *command = cmd;
    }
    workers_arm_opts_free(&given.ao);
    return rc;
}

