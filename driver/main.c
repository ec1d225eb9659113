/* strata-driver — runs the one-pass sweep over every arm (one strata-worker per KV configuration)
 * and writes a results folder; re-renders and compares results folders.
 *
 *   strata-driver sweep --model M [--doc F | --corpus DIR | --tokens-file F] [--arms f16,int8] ...
 *   strata-driver report DIR
 *   strata-driver compare DIR1 DIR2
 *   strata-driver needle --model M [--arms f16,int8] [--lengths ...] ...   (driver/needle.c)
 *
 * Exit codes: 0 ok, 1 runtime error, 2 usage error, 3 arms mismatch (model or tokenizer differ),
 * 130 interrupted (Ctrl-C / SIGTERM; the depths measured so far are kept and rendered).
 *
 * Reading order: usage; small helpers (quoting, paths, files); the document; signals; the sweep
 * command; report and compare; main. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "driver/arm.h"
#include "driver/cli.h"
#include "driver/document.h"
#include "driver/passages.h"
#include "driver/journal.h"
#include "driver/needle.h"
#include "driver/report.h"
#include "driver/sweep.h"
#include "driver/workers.h"
#include "kernels/errmsg.h"
#include "proto/proto.h"
#include "proto/safeio.h"

#ifndef STRATA_GIT
#define STRATA_GIT "unknown"
#endif

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2, EXIT_MISMATCH = 3, EXIT_INTERRUPTED = 130 };

#define DIAL_TIMEOUT_MS    60000               /* a worker loading its model */
#define REQUEST_TIMEOUT_MS SWEEP_TIMEOUT_FIRST_MS  /* hello and tokenize; sweep requests scale */
#define STOP_GRACE_MS      3000
#define PP_ROWS_BYTES_MAX  ((size_t)256 << 20) /* per-position: rows per arm per reply */

static void usage_main(FILE *f) {
    fprintf(f,
        "usage: strata-driver COMMAND [options]   (COMMAND --help for details)\n"
        "  sweep     measure what KV-cache formats do to a model's output along one document\n"
        "  report    re-render README.md, summary.json and plots of a results folder\n"
        "  compare   compare two results folders (Markdown on stdout)\n"
        "  needle    needle in a haystack: retrieval accuracy and the key's log-prob per KV format\n"
        "exit codes: 0 ok, 1 runtime error, 2 usage error, 3 arms mismatch, 130 interrupted\n");
}

static void usage_sweep(FILE *f) {
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

static void usage_report(FILE *f) {
    fprintf(f,
        "usage: strata-driver report DIR [--margin-ppl PCT] [--margin-top1 PP]\n"
        "Re-renders DIR/README.md, DIR/summary.json and DIR/plots/ from DIR/meta.json and the TSVs\n"
        "(no model needed); a needle folder (meta.json \"kind\": \"needle\") from its cells.tsv.\n"
        "  --margin-ppl PCT    equivalence margin on the PPL change, percent (default: meta.json's, else 1)\n"
        "  --margin-top1 PP    equivalence margin on top-1 agreement, percentage points (default: meta.json's,\n"
        "                      else 1)\n"
        "example:\n"
        "  strata-driver report results/2025-01-01-stories260K-f16-int8\n");
}

static void usage_compare(FILE *f) {
    fprintf(f,
        "usage: strata-driver compare DIR1 DIR2\n"
        "Prints a Markdown comparison of two results folders on stdout: setup differences and, for\n"
        "each arm in both, the summary statistics and the KL / fork by depth.\n"
        "example:\n"
        "  strata-driver compare results/2025-01-01-a results/2025-01-02-b > diff.md\n");
}

/* ============================================================================================
 * Small helpers
 * ========================================================================================== */

/* argv as one shell-quoted line (malloc'd, caller frees; NULL when out of memory). */
static char *shell_join(int argc, char **argv) {
    char *line = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&line, &len);
    if (!m) return NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int safe = a[0] != 0;
        for (const char *q = a; *q; q++)
            if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=,+-@%", *q)) safe = 0;
        if (i) fputc(' ', m);
        if (safe) { fputs(a, m); continue; }
        fputc('\'', m);
        for (const char *q = a; *q; q++) *q == '\'' ? fputs("'\\''", m) : fputc(*q, m);
        fputc('\'', m);
    }
    if (fclose(m)) { free(line); return NULL; }
    return line;
}

/* 1 when path is a directory with entries, 0 when empty or missing, -1 when not a directory. */
static int dir_nonempty(const char *path) {
    struct stat st;
    if (stat(path, &st)) return 0;
    if (!S_ISDIR(st.st_mode)) return -1;
    DIR *d = opendir(path);
    if (!d) return 1;
    struct dirent *e;
    int any = 0;
    while (!any && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) any = 1;
    closedir(d);
    return any;
}

/* ============================================================================================
 * Signals: the handlers only raise a flag; the sweep checks it between (and during) requests.
 * A second signal exits at once (the workers die with the driver through PR_SET_PDEATHSIG).
 * ========================================================================================== */

static volatile sig_atomic_t g_stop;   /* written by the signal handler only */

static void on_signal(int sig) {
    if (g_stop) _exit(EXIT_INTERRUPTED);
    g_stop = sig;
}

static void install_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* ============================================================================================
 * sweep
 * ========================================================================================== */

typedef struct {
    const char *model, *doc, *corpus, *tokens_file, *arms_list, *ref, *out, *tag, *worker, *dump_rows;
    workers_arm_opts ao;     /* --arm, --arm-model, --tls-*, --launch, --launch-listen, --allow-overcommit */
    char tls_abs[3][PATH_MAX];   /* --resume: the --tls-* files given beside it, made absolute */
    char worker_abs[PATH_MAX], dump_abs[PATH_MAX];   /* --resume: --worker, --dump-rows given, absolute */
    int depths, max_depth, fork_n, per_position, chunk, threads, prefill, max_context;
    int force, quiet, json;
    int cross_score;
    int n_passages, passage_len;   /* --passages N (0: off), --passage-len L */
    int *passage_starts;     /* [n_passages] planned (plan_sweep; freed by cmd_sweep) */
    double margin_ppl, margin_top1;   /* --margin-ppl, --margin-top1 (0: not given), for the report */
    int pin_experts;         /* --pin-experts[=FILE] */
    const char *pin_file;    /* its FILE, or NULL */
    double sample_temps[SWEEP_MAX_TEMPS];   /* [n_sample_temps] the positive ones of --sample-temps */
    int n_sample_temps;
    double top_p;
    uint64_t seed;
    const char *resume;      /* --resume DIR */
    int request_timeout_s, max_restarts;   /* 0 = scaled; -1 = default (2) */
    int compare_threads;     /* 0 = the machine's cores */
    int n_run_opts;          /* options that define the run (not allowed beside --resume) */
} sweep_opts;

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

static int parse_sweep_opts(int argc, char **argv, sweep_opts *o) {
    static const struct option opts[] = {
        {"model", 1, 0, 'm'}, {"doc", 1, 0, 'D'}, {"corpus", 1, 0, 'C'}, {"tokens-file", 1, 0, 'T'},
        {"arms", 1, 0, 'a'}, {"ref", 1, 0, 'r'}, {"depths", 1, 0, 'k'}, {"max-depth", 1, 0, 'x'},
        {"fork", 1, 0, 'f'}, {"per-position", 0, 0, 'P'}, {"chunk", 1, 0, 'c'}, {"threads", 1, 0, 't'},
        {"prefill", 1, 0, 'p'}, {"max-context", 1, 0, 'X'}, {"out", 1, 0, 'o'}, {"tag", 1, 0, 'g'},
        {"worker", 1, 0, 'w'}, {"force", 0, 0, 'F'}, {"quiet", 0, 0, 'q'},
        {"json", 0, 0, 'j'}, {"dump-rows", 1, 0, 'R'}, {"help", 0, 0, 'h'}, {"resume", 1, 0, 'Z'},
        {"request-timeout", 1, 0, 'Y'}, {"max-restarts", 1, 0, 'M'}, {"cross-score", 0, 0, 'S'},
        {"sample-temps", 1, 0, 'e'}, {"top-p", 1, 0, 'u'}, {"seed", 1, 0, 'd'}, {"compare-threads", 1, 0, 'W'},
        {"pin-experts", optional_argument, 0, 1100}, {"passages", 1, 0, 1101}, {"passage-len", 1, 0, 1102},
        {"margin-ppl", 1, 0, 1103}, {"margin-top1", 1, 0, 1104},
        WORKERS_ARM_LONGOPTS, {0, 0, 0, 0}};
    int c;
    o->depths = 16;
    o->fork_n = 32;
    o->chunk = 512;
    o->ref = "f16";
    o->max_restarts = -1;
    o->top_p = 1.0;
    o->seed = 20250101u;
    o->passage_len = PASSAGES_LEN_DEFAULT;
    optind = 0;   /* 0: glibc re-initialises (a second argument vector is parsed for --resume) */
    while ((c = getopt_long(argc, argv, "m:o:qh", opts, NULL)) != -1) {
        /* not a run option: may be given beside --resume; the ones that start the workers or say where
         * they run (--launch, --launch-listen, --worker, --tls-*, --arm) must be, when the run had them */
        int beside_resume = c > 255 ? c >= 1001 && c <= 1005 : strchr("qjwhZYMWAR", c) != NULL;
        if (!beside_resume) o->n_run_opts++;
        int taken = workers_arm_opt(&o->ao, c, optarg);
        if (taken < 0) { cli_errorf("out of memory"); return EXIT_RUNTIME; }
        if (taken) continue;
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'D': o->doc = optarg; break;
        case 'C': o->corpus = optarg; break;
        case 'T': o->tokens_file = optarg; break;
        case 'a': o->arms_list = optarg; break;
        case 'r': o->ref = optarg; break;
        case 'k': if (cli_parse_int("--depths", optarg, 1, 100000, &o->depths)) return EXIT_USAGE; break;
        case 'x': if (cli_parse_int("--max-depth", optarg, 1, INT32_MAX / 2, &o->max_depth)) return EXIT_USAGE; break;
        case 'f': if (cli_parse_int("--fork", optarg, 1, 1 << 16, &o->fork_n)) return EXIT_USAGE; break;
        case 'P': o->per_position = 1; break;
        case 'c': if (cli_parse_int("--chunk", optarg, 1, 1 << 20, &o->chunk)) return EXIT_USAGE; break;
        case 't': if (cli_parse_int("--threads", optarg, 1, 1024, &o->threads)) return EXIT_USAGE; break;
        case 'p': if (cli_parse_int("--prefill", optarg, 1, 1 << 16, &o->prefill)) return EXIT_USAGE; break;
        case 'X': if (cli_parse_int("--max-context", optarg, 1, 1 << 22, &o->max_context)) return EXIT_USAGE; break;
        case 'o': o->out = optarg; break;
        case 'g': o->tag = optarg; break;
        case 'w': o->worker = optarg; break;
        case 'F': o->force = 1; break;
        case 'q': o->quiet = 1; break;
        case 'j': o->json = 1; break;
        case 'R': o->dump_rows = optarg; break;
        case 'Z': o->resume = optarg; break;
        case 'Y': if (cli_parse_int("--request-timeout", optarg, 1, 7 * 86400, &o->request_timeout_s)) return EXIT_USAGE; break;
        case 'M': if (cli_parse_int("--max-restarts", optarg, 0, 1000, &o->max_restarts)) return EXIT_USAGE; break;
        case 'W': if (cli_parse_int("--compare-threads", optarg, 1, SWEEP_COMPARE_THREADS_MAX, &o->compare_threads)) return EXIT_USAGE; break;
        case 'S': o->cross_score = 1; break;
        case 1100: o->pin_experts = 1; o->pin_file = optarg; break;
        case 1101: if (cli_parse_int("--passages", optarg, 0, PASSAGES_MAX, &o->n_passages)) return EXIT_USAGE; break;
        case 1102: if (cli_parse_int("--passage-len", optarg, 1, PASSAGES_LEN_MAX, &o->passage_len)) return EXIT_USAGE; break;
        case 1103: case 1104: {
            char *end;
            errno = 0;
            double v = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(v > 0 && v < 100)) {
                cli_errorf("%s '%s': give a number in (0, 100)", c == 1103 ? "--margin-ppl" : "--margin-top1", optarg);
                return EXIT_USAGE;
            }
            if (c == 1103) o->margin_ppl = v;
            else o->margin_top1 = v;
            break;
        }
        case 'e': if (parse_temps(optarg, o)) return EXIT_USAGE; break;
        case 'u': {
            char *end;
            errno = 0;
            o->top_p = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(o->top_p > 0 && o->top_p <= 1)) {
                cli_errorf("--top-p '%s': give a number in (0, 1]", optarg);
                return EXIT_USAGE;
            }
            break;
        }
        case 'd': {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end || optarg[0] == '-') {
                cli_errorf("--seed '%s': give an unsigned integer", optarg);
                return EXIT_USAGE;
            }
            o->seed = (uint64_t)v;
            break;
        }
        case 'h': usage_sweep(stdout); return -1;
        default: usage_sweep(stderr); return EXIT_USAGE;
        }
    }
    if (optind < argc) { cli_errorf("unexpected argument '%s' (see strata-driver sweep --help)", argv[optind]); return EXIT_USAGE; }
    if (!!o->doc + !!o->corpus + !!o->tokens_file > 1) {
        cli_errorf("give at most one of --doc, --corpus, --tokens-file");
        return EXIT_USAGE;
    }
    if (o->corpus && !o->corpus[0]) { cli_errorf("--corpus is empty: kjv, perldoc, self or a folder"); return EXIT_USAGE; }
    if (o->n_passages && o->pin_experts) {
        cli_errorf("--passages cannot be combined with --pin-experts (the passages' routing is not pinned)");
        return EXIT_USAGE;
    }
    char e2[512];
    if (workers_arm_opts_check(&o->ao, e2, sizeof e2)) { cli_errorf("%s", e2); return EXIT_USAGE; }
    if (o->tag && cli_check_tag(o->tag)) return EXIT_USAGE;
    return 0;
}

/* Model file sanity before any worker starts: exists, regular, starts with "GGUF". The open does
 * not block: a FIFO or device is refused before anything is read (proto/safeio.h). */
static int check_model(const char *path, char *err, size_t errlen) {
    char why[512];
    int fd = safeio_open_regular(path, SAFEIO_OPTIONAL, NULL, why, sizeof why);
    if (fd == SAFEIO_ABSENT) return errmsg_set(err, errlen, -1, "model not found: %s: %s", path, strerror(ENOENT));
    if (fd < 0) return errmsg_set(err, errlen, -1, "model %s", why);
    char magic[4] = { 0 };
    ssize_t got;
    do got = read(fd, magic, 4);
    while (got < 0 && errno == EINTR);
    close(fd);
    if (got != 4 || memcmp(magic, "GGUF", 4)) {
        return errmsg_set(err, errlen, -1, "model %s is not a GGUF file (it does not start with the magic \"GGUF\")",
                          path);
    }
    return 0;
}

/* Removes the files an earlier run left in out_dir (--force). */
static void clear_results(const char *out_dir) {
    static const char *const files[] = { "meta.json", "depths.tsv", "positions.tsv", "forks.tsv",
                                         "cross.tsv", "samples.tsv",
                                         "summary.json", "README.md", "workers.log", ".meta.json.tmp",
                                         "meta.json.tmp", JOURNAL_FILE };
    char p[PATH_MAX];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p, sizeof p, "%s/%s", out_dir, files[i]);
        unlink(p);
    }
}

static void print_json_result(const char *out_dir, const char *status, int code, int depths_done) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/summary.json", out_dir);
    json_t *root = json_object();
    json_object_set_new(root, "out", json_string(out_dir));
    json_object_set_new(root, "status", json_string(status));
    json_object_set_new(root, "exit_code", json_integer(code));
    json_object_set_new(root, "depths_done", json_integer(depths_done));
    json_t *s = json_load_file(p, 0, NULL);
    json_object_set_new(root, "summary", s ? s : json_null());
    json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', stdout);
    fflush(stdout);
    json_decref(root);
}

/* The invocation a journal records: {"argv": [the sweep's arguments], "cwd": "..."}. */
static json_t *invocation_json(int argc, char **argv) {
    json_t *inv = json_object(), *a = json_array();
    char cwd[PATH_MAX];
    for (int i = 0; i < argc; i++) json_array_append_new(a, json_string(argv[i]));
    json_object_set_new(inv, "argv", a);
    json_object_set_new(inv, "cwd", json_string(getcwd(cwd, sizeof cwd) ? cwd : "."));
    return inv;
}

/* --resume DIR: replaces *o with the options recorded in DIR's journal (parsed again, in the
 * recorded working directory, which becomes the current one), keeping the few given beside
 * --resume. The options that start the workers or say where they run (cli_resume_missing) are
 * never taken from the journal: they are the command line's, and a run that had them is refused
 * unless they are given again. --dump-rows (a folder written to) is the command line's too.
 * *hdr (the journal header; the caller json_decrefs it) and *rargv (malloc'd; the caller frees
 * it) hold the strings *o points into; out_dir [PATH_MAX] receives DIR's absolute path; *command
 * the original command line. Returns 0 or an exit code (message printed). */
static int resume_opts(sweep_opts *o, json_t **hdr, char ***rargv, char *out_dir, const char **command) {
    char err[1024], *text = NULL;
    size_t len = 0;
    sweep_opts given = *o;   /* owns the --arm array from here on */
    memset(&o->ao, 0, sizeof o->ao);
    int rc = EXIT_RUNTIME;
    if (given.n_run_opts) {
        cli_errorf("--resume DIR continues a run with the options recorded in DIR; beside it only --quiet, --json, "
                   "--request-timeout, --max-restarts, --compare-threads, --dump-rows and the options that start the "
                   "workers or say where they run (--worker, --launch, --launch-listen, --arm, --tls-*) may be given");
        rc = EXIT_USAGE;
        goto done;
    }
    if (!realpath(given.resume, out_dir)) {
        cli_errorf("cannot resume %s: %s", given.resume, strerror(errno));
        rc = EXIT_USAGE;
        goto done;
    }
    /* paths given now are absolute, as the run's directory becomes current */
    const char *tls_given[3] = { given.ao.tls_cert, given.ao.tls_key, given.ao.tls_ca };
    for (int i = 0; i < 3 && tls_given[0]; i++)
        if (!realpath(tls_given[i], given.tls_abs[i])) {
            cli_errorf("cannot resume with %s: %s", tls_given[i], strerror(errno));
            rc = EXIT_USAGE;
            goto done;
        }
    if ((given.worker && cli_abs_path(given.worker, given.worker_abs, sizeof given.worker_abs)) ||
        (given.dump_rows && cli_abs_path(given.dump_rows, given.dump_abs, sizeof given.dump_abs))) {
        cli_errorf("cannot resume: a path given beside --resume is too long");
        rc = EXIT_USAGE;
        goto done;
    }
    if (journal_in_use(out_dir)) {
        cli_errorf("cannot resume %s: it is in use (another strata-driver is writing it)", out_dir);
        goto done;
    }
    if (journal_read_header(out_dir, &text, &len, err, sizeof err)) {
        cli_errorf("cannot resume %s: %s", out_dir, err);
        goto done;
    }
    *hdr = json_loadb(text, len, 0, NULL);
    free(text);
    json_t *inv = json_object_get(*hdr, "invocation");
    json_t *av = json_object_get(inv, "argv");
    const char *cwd = json_string_value(json_object_get(inv, "cwd"));
    size_t n = json_array_size(av);
    if (!json_is_array(av) || n < 1 || !cwd) {
        cli_errorf("cannot resume %s: its journal does not record the command's arguments", out_dir);
        goto done;
    }
    if (!(*rargv = calloc(n + 1, sizeof **rargv))) { cli_errorf("out of memory"); goto done; }
    for (size_t i = 0; i < n; i++) {
        const char *a = json_string_value(json_array_get(av, i));
        if (!a) { cli_errorf("cannot resume %s: a recorded argument is not a string", out_dir); goto done; }
        (*rargv)[i] = (char *)a;
    }
    if (chdir(cwd)) {
        cli_errorf("cannot resume %s: the run's working directory %s: %s", out_dir, cwd, strerror(errno));
        goto done;
    }
    memset(o, 0, sizeof *o);
    int prc = parse_sweep_opts((int)n, *rargv, o);
    if (prc) {
        cli_errorf("cannot resume %s: its recorded options do not parse", out_dir);
        rc = prc < 0 ? EXIT_RUNTIME : prc;
        goto done;
    }
    char missing[1024];
    int n_missing = cli_resume_missing(&o->ao, o->worker, &given.ao, given.worker, missing, sizeof missing);
    if (n_missing) {
        cli_errorf("cannot resume %s: its journal records %s, which a resume never takes from a journal (options "
                   "that start the workers or say where they run): give %s again beside --resume", out_dir, missing,
                   n_missing > 1 ? "them" : "it");
        rc = EXIT_USAGE;
        goto done;
    }
    if (o->dump_rows && !given.dump_rows)
        fprintf(stderr, "strata-driver: note: the run's --dump-rows folder is not taken from the journal (give "
                "--dump-rows DIR beside --resume to write rows)\n");
    /* where and how the workers run: the command line's only */
    free(o->ao.remote);
    o->ao.remote = given.ao.remote;
    o->ao.n_remote = given.ao.n_remote;
    given.ao.remote = NULL;
    given.ao.n_remote = 0;
    o->ao.launch = given.ao.launch;
    o->ao.launch_listen = given.ao.launch_listen;
    memcpy(o->tls_abs, given.tls_abs, sizeof o->tls_abs);
    o->ao.tls_cert = tls_given[0] ? o->tls_abs[0] : NULL;
    o->ao.tls_key = tls_given[0] ? o->tls_abs[1] : NULL;
    o->ao.tls_ca = tls_given[0] ? o->tls_abs[2] : NULL;
    memcpy(o->worker_abs, given.worker_abs, sizeof o->worker_abs);
    o->worker = given.worker ? o->worker_abs : NULL;
    memcpy(o->dump_abs, given.dump_abs, sizeof o->dump_abs);
    o->dump_rows = given.dump_rows ? o->dump_abs : NULL;
    char e2[512];
    if (workers_arm_opts_check(&o->ao, e2, sizeof e2)) { cli_errorf("%s", e2); rc = EXIT_USAGE; goto done; }
    o->out = out_dir;
    o->force = 0;
    o->resume = given.resume;
    o->quiet |= given.quiet;
    o->json |= given.json;
    if (given.request_timeout_s) o->request_timeout_s = given.request_timeout_s;
    if (given.max_restarts >= 0) o->max_restarts = given.max_restarts;
    if (given.compare_threads) o->compare_threads = given.compare_threads;
    const char *cmd = json_string_value(json_object_get(*hdr, "command"));
    if (cmd) *command = cmd;
    rc = 0;
done:
    workers_arm_opts_free(&given.ao);
    return rc;
}

/* The run's tag (--tag, else the model's name and the arms) into tag [taglen] and its results
 * folder into out_dir [outlen] (--out, the folder resumed, or a fresh default), checked: not a
 * file, not in use, empty unless --force or --resume. Returns 0 or an exit code (message printed). */
static int choose_out_dir(const sweep_opts *o, const arm *arms, int n_arms, char *tag, size_t taglen, char *out_dir,
                          size_t outlen) {
    if (o->tag) snprintf(tag, taglen, "%s", o->tag);
    else {
        const char *base = o->model ? strrchr(o->model, '/') : NULL;
        base = base ? base + 1 : o->model ? o->model : "remote";
        snprintf(tag, taglen, "%s", base);
        size_t l = strlen(tag);
        if (l > 5 && !strcmp(tag + l - 5, ".gguf")) tag[l - 5] = 0;
        for (int i = 0; i < n_arms; i++) {
            l = strlen(tag);
            snprintf(tag + l, taglen - l, "-%s", arms[i].name);
        }
        cli_sanitize(tag);
    }
    if (o->resume) { /* out_dir is the folder resumed */ }
    else if (o->out) snprintf(out_dir, outlen, "%s", o->out);
    else if (cli_default_out_dir(tag, out_dir, outlen)) {
        cli_errorf("cannot find a free results folder name for results/*-%s", tag);
        return EXIT_RUNTIME;
    }
    int ne = dir_nonempty(out_dir);
    if (ne < 0) { cli_errorf("--out %s exists and is not a directory", out_dir); return EXIT_USAGE; }
    if (ne > 0 && !o->resume && journal_in_use(out_dir)) {
        cli_errorf("the results folder %s is in use: another strata-driver is writing it", out_dir);
        return EXIT_USAGE;
    }
    if (ne > 0 && !o->force && !o->resume) {
        cli_errorf("the results folder %s is not empty: choose another --out or --tag, or pass --force", out_dir);
        return EXIT_USAGE;
    }
    return 0;
}

/* The document's text tokenised by the reference arm (BOS added) into *tokens [*n] (malloc'd, the
 * caller frees). Returns 0 or -1 with a message in err. */
static int tokenize_doc(arm *ref, const doc_t *doc, int32_t **tokens, size_t *n, char *err, size_t errlen) {
    size_t cap = proto_tokenize_reply_max(doc->n_text);
    if (arm_set_recv_max(ref, cap, err, errlen)) return -1;
    char e[1024];
    if (arm_tokenize(ref, doc->text, doc->n_text, 1, 0, cap, tokens, n, e, sizeof e))
        return errmsg_set(err, errlen, -1, "tokenize: %s", e);
    return 0;
}

/* The plan (docs/DESIGN.md §2.1): the depths (malloc'd into *depths [o->depths], the caller
 * frees), the deepest D, the chunk (lowered in per-position mode so that one arm's rows stay
 * under PP_ROWS_BYTES_MAX) and the reply cap, which every arm's socket gets. Returns 0 or -1 with
 * a message in err. */
static int plan_sweep(sweep_opts *o, arm *arms, int n_arms, int ref, size_t n_tokens, int **depths, int *D,
                      int *chunk, size_t *recv_max, char *err, size_t errlen) {
    const proto_hello_rep *h = &arms[ref].hello;
    uint64_t n_ctx = h->n_ctx;
    for (int i = 0; i < n_arms; i++)
        if (arms[i].hello.n_ctx < n_ctx) n_ctx = arms[i].hello.n_ctx;
    /* --passages without --max-depth: the deepest prefix leaves room for the passages after it */
    int max_depth = o->max_depth;
    if (o->n_passages && !max_depth) {
        max_depth = passages_default_max_depth(n_tokens, n_ctx, o->fork_n, o->n_passages, o->passage_len);
        if (max_depth < o->depths) max_depth = 0;   /* too short: passages_plan says so */
    }
    if ((*D = sweep_max_depth(n_tokens, max_depth, n_ctx, o->fork_n, o->depths, err, errlen)) < 0) return -1;
    if (!(*depths = malloc(sizeof(int) * (size_t)o->depths)) || sweep_depths(*D, o->depths, *depths))
        return errmsg_set(err, errlen, -1, "cannot plan %d depths over %d tokens", o->depths, *D);
    if (o->n_passages && (!(o->passage_starts = malloc(sizeof(int) * (size_t)o->n_passages)) ||
                          passages_plan(n_tokens, *D, o->fork_n, n_ctx, o->n_passages, o->passage_len,
                                        o->passage_starts, err, errlen)))
        return o->passage_starts ? -1 : errmsg_set(err, errlen, -1, "out of memory");
    if (o->n_passages && o->n_passages < PASSAGES_RECOMMENDED && !o->quiet)
        fprintf(stderr, "strata-driver: note: --passages %d: at least %d are recommended (the depth trend's "
                "interval is a bootstrap over passages)\n", o->n_passages, PASSAGES_RECOMMENDED);
    *chunk = o->chunk;
    if (o->per_position && (size_t)*chunk * h->n_vocab * 4 > PP_ROWS_BYTES_MAX) {
        *chunk = (int)(PP_ROWS_BYTES_MAX / ((size_t)h->n_vocab * 4));
        if (*chunk < 1) *chunk = 1;
        if (!o->quiet)
            fprintf(stderr, "strata-driver: note: --chunk lowered to %d so one arm's rows (vocab %u) stay "
                    "under 256 MiB\n", *chunk, h->n_vocab);
    }
    /* MoE: a request's routing (tokens x layers x experts per token ids) must fit PROTO_MAX_ROUTES */
    size_t per_tok = (size_t)h->n_layer * h->n_expert_used;
    if (per_tok && (size_t)*chunk * per_tok > PROTO_MAX_ROUTES) {
        *chunk = (int)(PROTO_MAX_ROUTES / per_tok);
        if (*chunk < 1) return errmsg_set(err, errlen, -1, "one token's routing (%zu expert ids) exceeds %u", per_tok,
                                          PROTO_MAX_ROUTES);
        if (!o->quiet)
            fprintf(stderr, "strata-driver: note: --chunk lowered to %d so one request's routing stays under %u "
                    "expert ids\n", *chunk, PROTO_MAX_ROUTES);
    }
    /* the largest prefill reply: a per-position chunk's rows, or a cross-scored continuation's, and
     * (MoE) the routing of a chunk */
    size_t max_rows = (size_t)(o->per_position ? *chunk : 1);
    if (o->cross_score && (size_t)o->fork_n > max_rows) max_rows = (size_t)o->fork_n;
    size_t pass_rows = (size_t)(o->passage_len < *chunk ? o->passage_len : *chunk);   /* a passage request */
    if (o->n_passages && pass_rows > max_rows) max_rows = pass_rows;
    *recv_max = (size_t)h->n_vocab * 4 * max_rows + (size_t)o->fork_n * 8 + (size_t)*chunk * per_tok * 4 + PROTO_SLACK;
    for (int i = 0; i < n_arms; i++)
        if (arm_set_recv_max(&arms[i], *recv_max, err, errlen)) return -1;
    return 0;
}

/* The sweep's configuration from the options and what cmd_sweep prepared (all borrowed). */
static void fill_config(sweep_config *c, const sweep_opts *o, const char *tag, const char *command_line,
                        const doc_t *doc, const char *full_desc, const int32_t *tokens, size_t n_tokens,
                        const int *depths, int chunk, int ref, const char *out_dir, size_t recv_max,
                        json_t *warnings, json_t *invocation, const arm_launch *launch) {
    memset(c, 0, sizeof *c);
    c->tag = tag;
    c->command = command_line;
    c->git = STRATA_GIT;
    c->model_path = o->model;
    c->doc_path = doc->path;
    c->doc_description = full_desc;
    c->tokens = tokens;
    c->n_tokens = n_tokens;
    c->depths = depths;
    c->n_depths = o->depths;
    c->fork_n = o->fork_n;
    c->per_position = o->per_position;
    c->chunk = chunk;
    c->ref = ref;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);   /* comparing rows is the driver's one heavy job */
    c->compare_threads = o->compare_threads ? o->compare_threads
                         : ncpu < 1 ? 1 : ncpu > SWEEP_COMPARE_THREADS_MAX ? SWEEP_COMPARE_THREADS_MAX : (int)ncpu;
    c->cross_score = o->cross_score;
    c->margin_ppl = o->margin_ppl;
    c->margin_top1 = o->margin_top1;
    c->rope_angles = o->ao.rope_angles;
    c->pin_experts = o->pin_experts;
    c->pin_file = o->pin_file;
    c->sample_temps = o->sample_temps;
    c->n_sample_temps = o->n_sample_temps;
    c->top_p = o->top_p;
    c->sample_seed = o->seed;
    c->n_passages = o->n_passages;
    c->passage_len = o->passage_len;
    c->passage_starts = o->passage_starts;
    c->out_dir = out_dir;
    c->dump_rows_dir = o->dump_rows;
    c->quiet = o->quiet;
    c->recv_max = recv_max;
    c->stop = &g_stop;
    c->warnings = warnings;
    c->resume = o->resume != NULL;
    c->invocation = invocation;
    c->launch = launch;
    c->max_restarts = o->max_restarts >= 0 ? o->max_restarts : 2;
    c->dial_ms = DIAL_TIMEOUT_MS;
    c->request_timeout_ms = o->request_timeout_s * 1000;
    c->test_fault = getenv("STRATA_TEST_FAULT");
    const char *sde = getenv("SOURCE_DATE_EPOCH");   /* reproducible dates (tests) */
    c->date = sde && sde[0] ? (time_t)strtoll(sde, NULL, 10) : 0;
}

static int cmd_sweep(int argc, char **argv, const char *command_line) {
    sweep_opts o;
    arm *arms = NULL;
    int n_arms = 0, ref = -1, ret = EXIT_RUNTIME, depths_done = 0;
    char err[2048] = "", tmpdir[PATH_MAX] = "", out_dir[PATH_MAX] = "", tag[256] = "";
    char self_dir[PATH_MAX], worker[PATH_MAX];
    size_t n_tokens = 0;
    int32_t *tokens = NULL;
    int *depths = NULL;
    json_t *warnings = json_array();
    doc_t doc;
    const char *status = "error";
    arm_launch launch;
    proto_tls tls;
    arm_options aopt;
    memset(&o, 0, sizeof o);
    memset(&doc, 0, sizeof doc);
    memset(&launch, 0, sizeof launch);

    json_t *resume_hdr = NULL, *invocation = NULL;
    char **resume_argv = NULL;
    int tmp_lock = -1;
    int prc = parse_sweep_opts(argc, argv, &o);
    if (prc) { ret = prc < 0 ? EXIT_OK : prc; goto done; }
    if (o.resume) {
        if ((ret = resume_opts(&o, &resume_hdr, &resume_argv, out_dir, &command_line))) goto done;
        ret = EXIT_RUNTIME;
    } else {
        invocation = invocation_json(argc, argv);
    }
    install_signals();

    /* ---- arms ---- */
    /* the --model arms (default f16,int8; only f16 beside --arm-model; none beside --arm), the weight
     * arms, the remote arms */
    const char *list = o.arms_list ? o.arms_list : o.ao.n_remote ? NULL : o.ao.n_arm_models ? "f16" : "f16,int8";
    if ((ref = workers_arms_build(list, o.ref, &o.ao, &tls, &aopt, &arms, &n_arms, err, sizeof err)) < 0) {
        cli_errorf("%s", err);
        ret = EXIT_USAGE;
        goto done;
    }
    int n_local = 0;
    for (int i = 0; i < n_arms; i++) n_local += !arms[i].remote;
    if (n_arms < 2) { cli_errorf("a sweep needs at least two arms (the reference and one to compare)"); ret = EXIT_USAGE; goto done; }

    /* ---- the worker binary and the model ---- */
    if (cli_exe_dir(self_dir)) { cli_errorf("cannot find this program's directory (/proc/self/exe)"); goto done; }
    if (n_local) {
        if (!o.model) { cli_errorf("--model FILE is required (see strata-driver sweep --help)"); ret = EXIT_USAGE; goto done; }
        if (check_model(o.model, err, sizeof err)) { cli_errorf("%s", err); goto done; }
        for (int i = 0; i < n_arms; i++)
            if (arms[i].own_model && check_model(arms[i].model, err, sizeof err)) {
                cli_errorf("--arm-model %s: %s", arms[i].name, err);
                goto done;
            }
        if (snprintf(worker, sizeof worker, "%s%s", o.worker ? o.worker : self_dir,
                     o.worker ? "" : "/strata-worker") >= (int)sizeof worker) {
            cli_errorf("the worker's path is too long");
            goto done;
        }
        if (access(worker, X_OK)) {
            cli_errorf("cannot run the worker %s: %s (build it with make, or pass --worker PATH)", worker, strerror(errno));
            goto done;
        }
    }

    /* ---- the results folder (checked now, created after the handshake) ---- */
    if ((ret = choose_out_dir(&o, arms, n_arms, tag, sizeof tag, out_dir, sizeof out_dir))) goto done;
    ret = EXIT_RUNTIME;

    /* ---- the document (text now, tokenised after the handshake) ---- */
    char root[PATH_MAX], repo[PATH_MAX];
    if (snprintf(root, sizeof root, "%s/..", self_dir) >= (int)sizeof root || !realpath(root, repo))
        snprintf(repo, sizeof repo, "%s", self_dir);
    if (doc_load(o.doc, o.corpus, o.tokens_file, repo, &doc, err, sizeof err)) { cli_errorf("%s", err); goto done; }
    if (doc.kjv_mismatch) {
        fprintf(stderr, "strata-driver: warning: '%s' gave a text whose sha256 is not %s: results are not "
                "comparable with runs on the standard text\n", DOC_KJV_COMMAND, DOC_KJV_SHA256);
        json_array_append_new(warnings, json_string("the KJV corpus differs from the standard text (sha256)"));
    }
    if (doc.perldoc_mismatch) {
        fprintf(stderr, "strata-driver: warning: --corpus perldoc gave a text whose sha256 is not %s: results are "
                "not comparable with runs on the standard text\n", DOC_PERLDOC_SHA256);
        json_array_append_new(warnings, json_string("the perldoc corpus differs from the standard text (sha256)"));
    }
    tokens = doc.tokens;
    n_tokens = doc.n_tokens;
    doc.tokens = NULL;

    /* ---- start and dial the workers ---- */
    workers_opts wo = { worker, o.model, o.threads, o.prefill, o.max_context, o.quiet };
    int wrc = workers_start(arms, n_arms, &wo, &g_stop, tmpdir, sizeof tmpdir, &tmp_lock, &launch, warnings, err,
                            sizeof err);
    if (wrc == WORKERS_INTERRUPTED) { ret = EXIT_INTERRUPTED; status = "interrupted"; goto done; }
    if (wrc) { cli_errorf("%s", err); ret = wrc == WORKERS_MISMATCH ? EXIT_MISMATCH : EXIT_RUNTIME; goto done; }
    const proto_hello_rep *h = &arms[ref].hello;

    /* ---- tokenise the text on the reference ---- */
    if (!tokens && tokenize_doc(&arms[ref], &doc, &tokens, &n_tokens, err, sizeof err)) { cli_errorf("%s", err); goto done; }
    if (g_stop) { ret = EXIT_INTERRUPTED; status = "interrupted"; goto done; }
    for (size_t i = 0; i < n_tokens; i++) {
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= h->n_vocab) {
            cli_errorf("token id %d at index %zu is outside the vocabulary (n_vocab %u)", tokens[i], i, h->n_vocab);
            goto done;
        }
    }

    /* ---- the plan ---- */
    int D = 0, chunk = 0;
    size_t recv_max = 0;
    if (plan_sweep(&o, arms, n_arms, ref, n_tokens, &depths, &D, &chunk, &recv_max, err, sizeof err)) {
        cli_errorf("%s", err);
        goto done;
    }

    /* ---- the results folder ---- */
    if (cli_mkdir_p(out_dir, err, sizeof err)) { cli_errorf("%s", err); goto done; }
    if (o.force && !o.resume) clear_results(out_dir);
    if (o.dump_rows && cli_mkdir_p(o.dump_rows, err, sizeof err)) { cli_errorf("%s", err); goto done; }
    char tok_sha[65], full_desc[1400];
    doc_sha256_hex(tokens, n_tokens * sizeof *tokens, tok_sha);
    snprintf(full_desc, sizeof full_desc, "%s; %zu tokens, sha256 of the int32 ids %s", doc.desc, n_tokens, tok_sha);
    if (!o.quiet)
        fprintf(stderr, "strata-driver: %zu tokens; %d depths up to %d; fork probe %d tokens; results in %s\n",
                n_tokens, o.depths, D, o.fork_n, out_dir);

    sweep_config sc;
    fill_config(&sc, &o, tag, command_line, &doc, full_desc, tokens, n_tokens, depths, chunk, ref, out_dir, recv_max,
                warnings, o.resume ? json_object_get(resume_hdr, "invocation") : invocation,
                n_local ? &launch : NULL);
    sweep_outcome so = { 0, -1, 0 };
    int rc = sweep_run(&sc, arms, n_arms, &so, err, sizeof err);
    depths_done = so.depths_done;
    if (rc == SWEEP_OK) { ret = EXIT_OK; status = "complete"; }
    else {
        if (rc == SWEEP_INTERRUPTED) { ret = EXIT_INTERRUPTED; status = "interrupted"; }
        else cli_errorf("%s", err);
        /* the advice only where a resume can continue; the count is what the journal holds */
        if (so.resumable)
            fprintf(stderr, "strata-driver: %skept %d of %d depths in %s (continue with: strata-driver sweep "
                    "--resume %s)\n", rc == SWEEP_INTERRUPTED ? "interrupted: " : "", so.depths_kept, o.depths,
                    out_dir, out_dir);
        else if (so.depths_kept >= 0)
            fprintf(stderr, "strata-driver: %s keeps %d of %d depths%s\n", out_dir, so.depths_kept, o.depths,
                    o.resume ? " (its journal is unchanged)" : "");
    }

    /* ---- stop the workers, keep their logs, render ---- */
    arm_stop_all(arms, n_arms, 1, STOP_GRACE_MS);
    arm_save_logs(arms, n_arms, out_dir);
    if (depths_done > 0) {
        if (cli_render(report_render, out_dir, o.quiet) && ret == EXIT_OK) ret = EXIT_RUNTIME;
    }
    if (o.json) print_json_result(out_dir, status, ret, depths_done);

done:
    if (arms) arm_stop_all(arms, n_arms, 1, STOP_GRACE_MS);
    arm_tmpdir_remove(tmpdir, tmp_lock);
    json_decref(resume_hdr);
    json_decref(invocation);
    free(resume_argv);
    free(arms);
    doc_free(&doc);
    free(tokens);
    free(depths);
    free(o.passage_starts);
    workers_arm_opts_free(&o.ao);
    json_decref(warnings);
    if (g_stop && ret != EXIT_OK) ret = EXIT_INTERRUPTED;
    return ret;
}

/* ============================================================================================
 * report, compare
 * ========================================================================================== */

static int cmd_report(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) { usage_report(stdout); return EXIT_OK; }
    if (argc < 2 || argv[1][0] == '-' || argc % 2 != 0) { usage_report(stderr); return EXIT_USAGE; }
    report_render_opts ro = {NAN, NAN};
    for (int i = 2; i + 1 < argc; i += 2) {
        char *end = NULL;
        double v = strtod(argv[i + 1], &end);
        int ppl = !strcmp(argv[i], "--margin-ppl"), top1 = !strcmp(argv[i], "--margin-top1");
        if ((!ppl && !top1) || end == argv[i + 1] || *end || !(v > 0 && v < 100)) {
            cli_errorf("report: %s '%s': expected --margin-ppl or --margin-top1 with a number in (0, 100)",
                       argv[i], argv[i + 1]);
            return EXIT_USAGE;
        }
        if (ppl) ro.margin_ppl = v;
        else ro.margin_top1 = v;
    }
    char err[2048];
    if (needle_is_results(argv[1]) ? needle_report_render(argv[1], err, sizeof err)
                                   : report_render_opts_run(argv[1], &ro, err, sizeof err)) {
        cli_errorf("%s", err);
        return EXIT_RUNTIME;
    }
    fprintf(stderr, "strata-driver: wrote %s/README.md, summary.json and plots/\n", argv[1]);
    return EXIT_OK;
}

static int cmd_compare(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) { usage_compare(stdout); return EXIT_OK; }
    if (argc != 3 || argv[1][0] == '-' || argv[2][0] == '-') { usage_compare(stderr); return EXIT_USAGE; }
    char err[2048];
    if (needle_is_results(argv[1]) || needle_is_results(argv[2])
            ? needle_report_compare(argv[1], argv[2], stdout, err, sizeof err)
            : report_compare(argv[1], argv[2], stdout, err, sizeof err)) {
        cli_errorf("%s", err);
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}

int main(int argc, char **argv) {
    if (argc < 2) { usage_main(stderr); return EXIT_USAGE; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) { usage_main(stdout); return EXIT_OK; }
    if (!strcmp(cmd, "sweep")) {
        char *line = shell_join(argc, argv);
        int rc = cmd_sweep(argc - 1, argv + 1, line ? line : "unknown");
        free(line);
        return rc;
    }
    if (!strcmp(cmd, "needle")) {
        install_signals();
        char *line = shell_join(argc, argv);
        int rc = needle_main(argc - 1, argv + 1, line ? line : "unknown", STRATA_GIT, &g_stop);
        free(line);
        return rc;
    }
    if (!strcmp(cmd, "report")) return cmd_report(argc - 1, argv + 1);
    if (!strcmp(cmd, "compare")) return cmd_compare(argc - 1, argv + 1);
    cli_errorf("unknown command '%s'", cmd);
    usage_main(stderr);
    return EXIT_USAGE;
}
