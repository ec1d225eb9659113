/* sweep_cmd.c — `strata-driver sweep` (docs/DESIGN.md §2): the run skeleton (driver/run.h) around
 * sweep_run. sweep_main reads as its table of contents: options (driver/sweep/sweep_cli.c), arms, local
 * checks, the results folder's name, the document, the workers, the tokens, the plan, the folder,
 * the measurement (sweep_run), stop and render.
 *
 * Reading order: the command's state; the results folder; the plan; the configuration; the
 * measurement; sweep_main. */
#include "driver/sweep/sweep.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "driver/cli.h"
#include "driver/journal.h"
#include "driver/passages.h"
#include "driver/report/report.h"
#include "driver/run.h"
#include "driver/sweep/sweep_cli.h"
#include "kernels/errmsg.h"
#include "proto/proto.h"

#define PP_ROWS_BYTES_MAX  ((size_t)256 << 20) /* per-position: rows per arm per reply */


/* The state of one `sweep` command (sweep_main's, on its stack; sweep_close frees it). */
typedef struct {
    sweep_opts o;
    run_ctx r;
    const char *command;      /* the command line meta.json records (borrowed) */
    const char *git;          /* the driver build's git hash (borrowed) */
    json_t *resume_hdr;       /* --resume: the journal header the options point into (owned) */
    char **resume_argv;       /* [..] --resume: the recorded arguments (malloc'd; strings in resume_hdr) */
    json_t *invocation;       /* a new run's {"argv", "cwd"} (owned) */
    int32_t *tokens;          /* [n_tokens] the document's tokens (malloc'd) */
    size_t n_tokens;
    int *depths;              /* [o.depths] the planned depths (malloc'd) */
    int D, chunk;             /* the deepest prefix; tokens per prefill request */
    size_t recv_max;          /* the largest reply any arm may send */
    char full_desc[1400];     /* the document's description with its token count and hash */
} sweep_cmd;

/* ============================================================================================
 * The options and the arms
 * ========================================================================================== */

/* The options of argv, or --resume's from the journal. 0, -1 after --help, or an exit code. */
static int sweep_options(sweep_cmd *s, int argc, char **argv) {
    int prc = sweep_cli_parse(argc, argv, &s->o);
    if (prc) return prc;
    if (s->o.resume) return sweep_cli_resume(&s->o, &s->resume_hdr, &s->resume_argv, s->r.out_dir, &s->command);
    if (!(s->invocation = sweep_cli_invocation(argc, argv))) { cli_errorf("out of memory"); return RUN_EXIT_RUNTIME; }
    return 0;
}

/* The --model arms (default f16,int8; only f16 beside --arm-model; none beside --arm), the weight
 * arms, the remote arms: at least two, and the local ones' files there. */
static int sweep_arms(sweep_cmd *s) {
    const sweep_opts *o = &s->o;
    const char *list = o->arms_list ? o->arms_list : o->ao.n_remote ? NULL : o->ao.n_arm_models ? "f16" : "f16,int8";
    int ret = run_arms(&s->r, list, o->ref, &o->ao);
    if (ret) return ret;
    if (s->r.n_arms < 2) {
        cli_errorf("a sweep needs at least two arms (the reference and one to compare)");
        return RUN_EXIT_USAGE;
    }
    if (s->r.n_local && !o->model) {
        cli_errorf("--model FILE is required (see strata-driver sweep --help)");
        return RUN_EXIT_USAGE;
    }
    return run_check_local(&s->r, o->model, o->eng.worker);
}

/* ============================================================================================
 * The results folder
 * ========================================================================================== */

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

/* The run's tag (--tag, else the model's name and the arms) into s->r.tag and its results
 * folder into s->r.out_dir (--out, the folder resumed, or a fresh default), checked: not a
 * file, not in use, empty unless --force or --resume. Returns 0 or an exit code (message printed). */
static int sweep_out_dir(sweep_cmd *s) {
    const sweep_opts *o = &s->o;
    const arm *arms = s->r.arms;
    int n_arms = s->r.n_arms;
    char *tag = s->r.tag, *out_dir = s->r.out_dir;
    size_t taglen = sizeof s->r.tag, outlen = sizeof s->r.out_dir;
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
        return RUN_EXIT_RUNTIME;
    }
    int ne = dir_nonempty(out_dir);
    if (ne < 0) { cli_errorf("--out %s exists and is not a directory", out_dir); return RUN_EXIT_USAGE; }
    if (ne > 0 && !o->resume && journal_in_use(out_dir)) {
        cli_errorf("the results folder %s is in use: another strata-driver is writing it", out_dir);
        return RUN_EXIT_USAGE;
    }
    if (ne > 0 && !o->force && !o->resume) {
        cli_errorf("the results folder %s is not empty: choose another --out or --tag, or pass --force", out_dir);
        return RUN_EXIT_USAGE;
    }
    return 0;
}


/* ============================================================================================
 * The plan and the folder
 * ========================================================================================== */

/* The plan (docs/DESIGN.md §2.1): the depths (malloc'd into *depths [o->depths], the caller
 * frees), the deepest D, the chunk (lowered in per-position mode so that one arm's rows stay
 * under PP_ROWS_BYTES_MAX) and the reply cap, which every arm's socket gets. Returns 0 or -1 with
 * a message in err. n_ctx: the arms' smallest context. */
static int plan_sweep(sweep_opts *o, arm *arms, int n_arms, int ref, uint64_t n_ctx, size_t n_tokens, int **depths,
                      int *D, int *chunk, size_t *recv_max, char *err, size_t errlen) {
    const proto_hello_rep *h = &arms[ref].hello;
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
    *chunk = o->eng.chunk;
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

/* The plan of the run (plan_sweep). 0 or RUN_EXIT_RUNTIME. */
static int sweep_plan(sweep_cmd *s) {
    char err[2048];
    if (plan_sweep(&s->o, s->r.arms, s->r.n_arms, s->r.ref, run_n_ctx(&s->r), s->n_tokens, &s->depths, &s->D,
                   &s->chunk, &s->recv_max, err, sizeof err)) {
        cli_errorf("%s", err);
        return RUN_EXIT_RUNTIME;
    }
    return 0;
}

/* The files an earlier run left in a results folder (--force removes them). */
static const char *const sweep_old_files[] = { "meta.json", "depths.tsv", "positions.tsv", "forks.tsv",
                                               "cross.tsv", "samples.tsv",
                                               "summary.json", "README.md", "workers.log", ".meta.json.tmp",
                                               "meta.json.tmp", JOURNAL_FILE, NULL };

/* The results folder (and --dump-rows's), the document's description. 0 or RUN_EXIT_RUNTIME. */
static int sweep_folder(sweep_cmd *s) {
    const sweep_opts *o = &s->o;
    char err[1024], tok_sha[65];
    int ret = run_folder(&s->r, o->force && !o->resume, sweep_old_files);
    if (ret) return ret;
    if (o->dump_rows && cli_mkdir_p(o->dump_rows, err, sizeof err)) { cli_errorf("%s", err); return RUN_EXIT_RUNTIME; }
    doc_sha256_hex(s->tokens, s->n_tokens * sizeof *s->tokens, tok_sha);
    snprintf(s->full_desc, sizeof s->full_desc, "%s; %zu tokens, sha256 of the int32 ids %s", s->r.doc.desc,
             s->n_tokens, tok_sha);
    if (!o->quiet)
        fprintf(stderr, "strata-driver: %zu tokens; %d depths up to %d; fork probe %d tokens; results in %s\n",
                s->n_tokens, o->depths, s->D, o->fork_n, s->r.out_dir);
    return 0;
}

/* ============================================================================================
 * The measurement
 * ========================================================================================== */

/* The sweep's configuration from the options and what sweep_main prepared (all borrowed). */
static void fill_config(sweep_config *c, const sweep_cmd *s) {
    const sweep_opts *o = &s->o;
    memset(c, 0, sizeof *c);
    c->tag = s->r.tag;
    c->command = s->command;
    c->git = s->git;
    c->model_path = o->model;
    c->doc_path = s->r.doc.path;
    c->doc_description = s->full_desc;
    c->tokens = s->tokens;
    c->n_tokens = s->n_tokens;
    c->depths = s->depths;
    c->n_depths = o->depths;
    c->fork_n = o->fork_n;
    c->per_position = o->per_position;
    c->chunk = s->chunk;
    c->worker_chunk = o->eng.prefill > 0 ? o->eng.prefill : SWEEP_WORKER_CHUNK;
    c->ref = s->r.ref;
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
    c->out_dir = s->r.out_dir;
    c->dump_rows_dir = o->dump_rows;
    c->quiet = o->quiet;
    c->recv_max = s->recv_max;
    c->stop = s->r.stop;
    c->warnings = s->r.warnings;
    c->resume = o->resume != NULL;
    c->invocation = o->resume ? json_object_get(s->resume_hdr, "invocation") : s->invocation;
    c->launch = s->r.n_local ? &s->r.launch : NULL;
    c->max_restarts = o->max_restarts >= 0 ? o->max_restarts : 2;
    c->dial_ms = WORKERS_DIAL_MS;
    c->request_timeout_ms = o->request_timeout_s * 1000;
    c->test_fault = getenv("STRATA_TEST_FAULT");
    const char *sde = getenv("SOURCE_DATE_EPOCH");   /* reproducible dates (tests) */
    c->date = sde && sde[0] ? (time_t)strtoll(sde, NULL, 10) : 0;
}

/* --json: the outcome and the summary on stdout. */
static void print_json_result(const char *out_dir, const char *status, int code, int depths_done) {
    char p[PATH_MAX + 16];
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

/* sweep_run, what it kept said on stderr, the workers stopped, the folder rendered (and --json's
 * line). Returns the exit code. */
static int sweep_measure(sweep_cmd *s) {
    const sweep_opts *o = &s->o;
    const char *out_dir = s->r.out_dir, *status = "error";
    char err[2048];
    int ret = RUN_EXIT_RUNTIME;
    sweep_config sc;
    fill_config(&sc, s);
    sweep_outcome so = { 0, -1, 0 };
    int rc = sweep_run(&sc, s->r.arms, s->r.n_arms, &so, err, sizeof err);
    if (rc == SWEEP_OK) { ret = RUN_EXIT_OK; status = "complete"; }
    else {
        if (rc == SWEEP_INTERRUPTED) { ret = RUN_EXIT_INTERRUPTED; status = "interrupted"; }
        else cli_errorf("%s", err);
        /* the advice only where a resume can continue; the count is what the journal holds */
        if (so.resumable)
            fprintf(stderr, "strata-driver: %skept %d of %d depths in %s (continue with: strata-driver sweep "
                    "--resume %s)\n", rc == SWEEP_INTERRUPTED ? "interrupted: " : "", so.depths_kept, o->depths,
                    out_dir, out_dir);
        else if (so.depths_kept >= 0)
            fprintf(stderr, "strata-driver: %s keeps %d of %d depths%s\n", out_dir, so.depths_kept, o->depths,
                    o->resume ? " (its journal is unchanged)" : "");
    }
    run_stop(&s->r);
    ret = run_render(&s->r, report_render, so.depths_done > 0, o->quiet, ret);
    if (o->json) print_json_result(out_dir, status, ret, so.depths_done);
    return ret;
}

/* ============================================================================================
 * sweep_main
 * ========================================================================================== */

static int sweep_close(sweep_cmd *s, int ret) {
    json_decref(s->resume_hdr);
    json_decref(s->invocation);
    free(s->resume_argv);
    free(s->tokens);
    free(s->depths);
    free(s->o.passage_starts);
    workers_arm_opts_free(&s->o.ao);
    return run_close(&s->r, ret);
}

int sweep_main(int argc, char **argv, const char *command_line, const char *git, volatile sig_atomic_t *stop) {
    sweep_cmd s;
    memset(&s, 0, sizeof s);
    s.command = command_line;
    s.git = git ? git : "unknown";
    int ret = run_init(&s.r, stop);
    if (!ret) ret = sweep_options(&s, argc, argv);
    if (!ret) ret = sweep_arms(&s);
    if (!ret) ret = sweep_out_dir(&s);
    if (!ret) ret = run_doc(&s.r, s.o.doc, s.o.corpus, s.o.tokens_file);
    if (!ret) ret = run_start(&s.r, (workers_opts){ NULL, s.o.model, s.o.eng.threads, s.o.eng.prefill,
                                                    s.o.eng.max_context, s.o.quiet });
    if (!ret) ret = run_tokens(&s.r, &s.tokens, &s.n_tokens);
    if (!ret) ret = sweep_plan(&s);
    if (!ret) ret = sweep_folder(&s);
    if (!ret) ret = sweep_measure(&s);
    return sweep_close(&s, ret < 0 ? RUN_EXIT_OK : ret);   /* -1: after --help */
}
