/* needle.c — `strata-driver needle`: the needle-in-a-haystack bench (see needle.h and
 * docs/DESIGN.md §9) on the run skeleton (driver/run.h). Builds every cell's prompt on the driver
 * with the model's own tokenizer (the reference worker's), prints the cost, runs the cells on every
 * arm in lockstep, appends cells.tsv one cell at a time and renders the folder. needle_main reads
 * as its table of contents; the steps' parts are in needle_cli.c, needle_tok.c, needle_plan.c and
 * needle_cell.c (needle_internal.h).
 *
 * Reading order: the command's state; small helpers; meta.json; progress; cells.tsv on resume;
 * the steps in the order needle_main takes them; needle_main. */
#include "driver/needle/needle_internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "driver/cli.h"
#include "driver/run.h"
#include "kernels/clock.h"
#include "kernels/errmsg.h"
#include "proto/safeio.h"

/* ============================================================================================
 * The command's state
 * ========================================================================================== */

/* meta.json: what the run records beside its options and cells. */
typedef struct {
    const needle_opts *o;
    const char *command, *git, *tag, *out_dir;
    const needle_tokenizer *T;
    const doc_t *doc;
    char doc_sha[65];
    const needle_plan *P;
    json_t *warnings;           /* borrowed */
    json_t *calibration;        /* owned (NULL before) */
    json_t *cost;               /* owned */
    char date[64], machine[512];
    double t0, wall_before;     /* this session's start; wall time of earlier sessions */
    int resumed;                /* sessions before this one */
    proto_stats_rep *stats;     /* [n_arms] */
    int *have_stats;            /* [n_arms] */
} needle_meta;

/* The state of one `needle` command (needle_main's, on its stack; needle_close frees it). */
typedef struct {
    needle_opts o;            /* the run's options (--resume: meta.json's) */
    needle_opts cli;          /* the command line's (owns its --arm arrays) */
    int explicit_opts;        /* options given that a resume may not take */
    run_ctx r;
    const char *command_line, *git;   /* borrowed */
    json_t *resume_meta;      /* --resume: the run's meta.json (owned; o's strings point into it) */
    needle_tokenizer T;
    needle_plan P;
    needle_run R;
    needle_meta M;
    needle_cost_model cm;
    double *cell_cost;        /* [P.n] each cell's cost (seconds, when calibrated) */
    FILE *cells;              /* cells.tsv, appended */
    int cells_done;
    char err[2048];           /* the cells' loop's last error (meta.json's status) */
    char status[2200];
} needle_cmd;

/* ============================================================================================
 * Small helpers
 * ========================================================================================== */

/* 1 when DIR has entries, 0 when empty or missing, -1 when it is not a directory. */
static int dir_nonempty(const char *path) {
    struct stat st;
    if (stat(path, &st)) return 0;
    if (!S_ISDIR(st.st_mode)) return -1;
    char p[PATH_MAX + 16];
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
 * meta.json
 * ========================================================================================== */


/* Writes DIR/meta.json (temp file, rename) with the run so far. 0 or -1 with err. */

static int write_meta(const needle_meta *M, const arm *arms, int n, int ref, int cells_done,
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
    json_object_set_new(root, "options", needle_opts_json(M->o));
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
 * Progress on stderr: \r redrawn on a terminal, else a line every 10 s
 * ========================================================================================== */

typedef struct {
    int quiet, tty, drawn;
    double t0, last, total, done;   /* cost units (seconds of the model, or tokens) */
    int cells_total, cells_done;
} needle_progress;

static void progress_show(needle_progress *p, const needle_cell *c, int force) {
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

static int same_cell(const needle_row *r, const needle_cell *c) {
    return r->length == c->length && r->position == c->position && r->trial == c->trial && r->chat == c->chat;
}

static int resume_cells(const char *out_dir, needle_plan *P, const arm *arms, int n_arms, int *done,
                        json_t *warnings, char *err, size_t errlen) {
    char path[PATH_MAX + 16], tmp[PATH_MAX + 24];
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
 * The steps of needle_main
 * ========================================================================================== */

/* --resume DIR: the options and what the run kept from DIR/meta.json. 0 or an exit code. */
static int needle_resume_meta(needle_cmd *N) {
    needle_opts *cli = &N->cli;
    char mp[PATH_MAX + 16], err[2048];
    json_error_t je;
    memset(&N->o.ao, 0, sizeof N->o.ao);   /* cli.ao keeps (and frees) what was given */
    if (N->explicit_opts) {
        cli_errorf("--resume takes the run's options from its meta.json: only --quiet, --threads, --worker and "
               "the options that say where the workers run (--launch, --launch-listen, --arm, --tls-*) may be "
               "given with it");
        return RUN_EXIT_USAGE;
    }
    snprintf(mp, sizeof mp, "%s/meta.json", cli->resume);
    /* a regular file of bounded size (not a FIFO or a link another user planted) */
    char *mtext = NULL;
    size_t mlen = 0;
    if (safeio_read_all(mp, SAFEIO_NOFOLLOW, (size_t)64 << 20, &mtext, &mlen, err, sizeof err)) {
        cli_errorf("--resume: %s", err);
        return RUN_EXIT_USAGE;
    }
    N->resume_meta = json_loadb(mtext, mlen, 0, &je);
    free(mtext);
    json_t *meta = N->resume_meta;
    if (!meta) { cli_errorf("--resume: cannot read %s: %s", mp, je.text); return RUN_EXIT_USAGE; }
    const char *kind = json_string_value(json_object_get(meta, "kind"));
    if (!kind || strcmp(kind, "needle")) { cli_errorf("--resume: %s is not a needle run", mp); return RUN_EXIT_USAGE; }
    int ret = needle_opts_resume(&N->o, cli, meta);
    if (ret) return ret;
    snprintf(N->r.out_dir, sizeof N->r.out_dir, "%s", cli->resume);
    const char *tg = json_string_value(json_object_get(meta, "tag"));
    snprintf(N->r.tag, sizeof N->r.tag, "%s", tg ? tg : "needle");
    json_t *w = json_object_get(meta, "warnings");
    for (size_t i = 0; json_is_array(w) && i < json_array_size(w); i++)
        json_array_append(N->r.warnings, json_array_get(w, i));
    json_t *ws = json_object_get(meta, "wall_seconds");
    N->M.wall_before = json_is_number(ws) ? json_number_value(ws) : 0;
    json_t *ss = json_object_get(meta, "sessions");
    N->M.resumed = json_is_integer(ss) ? (int)json_integer_value(ss) : 1;
    return 0;
}

/* The options: argv's, or --resume's. 0, -1 after --help, or an exit code. */
static int needle_options(needle_cmd *N, int argc, char **argv) {
    needle_opts_defaults(&N->cli);
    int ret = needle_opts_parse(argc, argv, &N->cli, &N->explicit_opts);
    if (ret) return ret;
    N->o = N->cli;
    if (N->cli.resume && (ret = needle_resume_meta(N))) return ret;
    if (!N->o.model) {
        cli_errorf("--model FILE is required (the prompts are built with its tokenizer)");
        return RUN_EXIT_USAGE;
    }
    return 0;
}

/* The arms (default f16,int8; only f16 beside --arm-model; none beside --arm) and their files. */
static int needle_arms(needle_cmd *N) {
    needle_opts *o = &N->o;
    const char *list = o->arms_list ? o->arms_list : o->ao.n_remote ? NULL : o->ao.n_arm_models ? "f16" : "f16,int8";
    if (!o->arms_list && list) o->arms_list = list;
    int ret = run_arms(&N->r, list, o->ref, &o->ao);
    return ret ? ret : run_check_local(&N->r, o->model, o->eng.worker);
}

/* A new run's tag (--tag, else the model's name and -needle) and results folder (--out, else a
 * fresh default): not a file, and holding no run unless --force. */
static int needle_out_dir(needle_cmd *N) {
    const needle_opts *o = &N->o;
    char *tag = N->r.tag, *out_dir = N->r.out_dir;
    size_t taglen = sizeof N->r.tag;
    if (o->resume) return 0;   /* the folder resumed */
    if (o->tag) snprintf(tag, taglen, "%s", o->tag);
    else {
        const char *base = strrchr(o->model, '/');
        snprintf(tag, taglen, "%s", base ? base + 1 : o->model);
        size_t l = strlen(tag);
        if (l > 5 && !strcmp(tag + l - 5, ".gguf")) tag[l - 5] = 0;
        cli_sanitize(tag);
        strncat(tag, "-needle", taglen - strlen(tag) - 1);
    }
    if (o->out) snprintf(out_dir, sizeof N->r.out_dir, "%s", o->out);
    else if (cli_default_out_dir(tag, out_dir, sizeof N->r.out_dir)) {
        cli_errorf("the results folder's name is too long");
        return RUN_EXIT_RUNTIME;
    }
    int ne = dir_nonempty(out_dir);
    if (ne < 0) { cli_errorf("--out %s exists and is not a directory", out_dir); return RUN_EXIT_USAGE; }
    if (ne > 0 && !o->force) {
        cli_errorf("the results folder %s already holds a run: choose another --out, pass --force, or "
               "--resume %s", out_dir, out_dir);
        return RUN_EXIT_USAGE;
    }
    return 0;
}

/* The haystacks' corpus, its hash (a resume's must be the run's). */
static int needle_corpus(needle_cmd *N) {
    int ret = run_doc(&N->r, N->o.doc, N->o.corpus, NULL);
    if (ret) return ret;
    doc_sha256_hex(N->r.doc.text, N->r.doc.n_text, N->M.doc_sha);
    if (N->o.resume) {
        const char *was = json_string_value(json_object_get(json_object_get(N->resume_meta, "corpus"), "sha256"));
        if (!was || strcmp(was, N->M.doc_sha)) {
            cli_errorf("--resume: the corpus is not the text the run started with (sha256 %s, now %s)",
                   was ? was : "unknown", N->M.doc_sha);
            return RUN_EXIT_RUNTIME;
        }
    }
    return 0;
}

/* The tokenizer and the chat template (the reference worker's), the templates the run takes; a
 * resume's model must be the run's. */
static int needle_tokenizer_fetch(needle_cmd *N) {
    needle_opts *o = &N->o;
    char err[2048];
    const proto_hello_rep *h = &N->r.arms[N->r.ref].hello;
    if (needle_tok_fetch(&N->r.arms[N->r.ref], &N->T, err, sizeof err)) { cli_errorf("%s", err); return RUN_EXIT_RUNTIME; }
    if (!o->tpl) o->tpl = N->T.chat != NEEDLE_CHAT_NONE ? NEEDLE_TPL_BOTH : NEEDLE_TPL_RAW;
    if (o->tpl != NEEDLE_TPL_RAW && N->T.chat == NEEDLE_CHAT_NONE) {
        if (o->tpl == NEEDLE_TPL_CHAT) {
            cli_errorf("--template chat: %s has no chat template (tokenizer.chat_template) that strata knows "
                   "(ChatML or Gemma); use --template raw", o->model);
            return RUN_EXIT_USAGE;
        }
        fprintf(stderr, "strata-driver: note: %s has no known chat template: raw prompts only\n", o->model);
        json_array_append_new(N->r.warnings, json_string("--template both: the model has no known chat template, raw prompts only"));
        o->tpl = NEEDLE_TPL_RAW;
    }
    if (o->resume) {
        const char *was = json_string_value(json_object_get(json_object_get(N->resume_meta, "model"), "sha256"));
        if (!was || strcmp(was, h->model_sha256)) {
            cli_errorf("--resume: the model is not the one the run started with (sha256 %s, now %s)",
                   was ? was : "unknown", h->model_sha256);
            return RUN_EXIT_MISMATCH;
        }
    }
    return 0;
}

/* A note on stderr (unless quiet) and, for a new run, in the warnings. */
static void needle_note(needle_cmd *N, const char *w) {
    if (!N->o.quiet) fprintf(stderr, "strata-driver: note: %s\n", w);
    if (!N->o.resume) json_array_append_new(N->r.warnings, json_string(w));
}

/* The plan (every cell's prompt; --dump-prompts), its notes. */
static int needle_plan_make(needle_cmd *N) {
    const needle_opts *o = &N->o;
    const proto_hello_rep *h = &N->r.arms[N->r.ref].hello;
    uint64_t n_ctx = run_n_ctx(&N->r);
    char err[2048];
    if (needle_plan_build(o, &N->T, &N->r.doc, n_ctx, h->bos >= 0, h->bos, &N->P, err, sizeof err) ||
        (o->dump_prompts && needle_plan_dump(&N->P, o->dump_prompts, err, sizeof err))) {
        cli_errorf("%s", err);
        return RUN_EXIT_RUNTIME;
    }
    if (N->P.capped) {
        char w[256];
        snprintf(w, sizeof w, "prompt lengths above %d tokens were capped at %d (context %llu minus the "
                 "generated tokens)", N->P.cap_len, N->P.cap_len, (unsigned long long)n_ctx);
        needle_note(N, w);
    }
    if (N->P.hay_overlap) needle_note(N, "the corpus is too short for disjoint haystacks: some trials share text");
    return 0;
}

/* The files an earlier run left in a results folder (--force removes them). */
static const char *const needle_old_files[] = {"meta.json", "cells.tsv", "summary.json", "README.md", "workers.log",
                                               NULL};

/* The results folder: created (--force: emptied of an earlier run), cells.tsv resumed or begun. */
static int needle_folder(needle_cmd *N) {
    const needle_opts *o = &N->o;
    const char *out_dir = N->r.out_dir;
    char err[2048], p[PATH_MAX + 16];
    int ret = run_folder(&N->r, o->force && !o->resume, needle_old_files);
    if (ret) return ret;
    if (o->resume) {
        if (resume_cells(out_dir, &N->P, N->r.arms, N->r.n_arms, &N->cells_done, N->r.warnings, err, sizeof err)) {
            cli_errorf("--resume: %s", err);
            return RUN_EXIT_RUNTIME;
        }
        if (!o->quiet)
            fprintf(stderr, "strata-driver: resuming %s: %d of %d cells done\n", out_dir, N->cells_done, N->P.n);
    }
    snprintf(p, sizeof p, "%s/cells.tsv", out_dir);
    struct stat st;
    int fresh = stat(p, &st) != 0;
    if (!(N->cells = fopen(p, "a"))) { cli_errorf("cannot open %s: %s", p, strerror(errno)); return RUN_EXIT_RUNTIME; }
    if (fresh) fprintf(N->cells, "%s\n", NEEDLE_CELLS_HEADER);
    fflush(N->cells);
    return 0;
}

/* meta.json's parts that the run knows now, and its first version ("running"). */
static int needle_meta_start(needle_cmd *N) {
    needle_meta *M = &N->M;
    json_t *rm = N->resume_meta;
    char err[2048];
    M->o = &N->o;
    M->command = N->o.resume && json_is_string(json_object_get(rm, "command"))
                     ? json_string_value(json_object_get(rm, "command")) : N->command_line;
    M->git = N->git ? N->git : "unknown";
    M->tag = N->r.tag;
    M->out_dir = N->r.out_dir;
    M->T = &N->T;
    M->doc = &N->r.doc;
    M->P = &N->P;
    M->warnings = N->r.warnings;
    M->t0 = clock_s();
    const char *d0 = N->o.resume ? json_string_value(json_object_get(rm, "date")) : NULL;
    if (d0) snprintf(M->date, sizeof M->date, "%s", d0);
    else {
        time_t wall = time(NULL);
        struct tm tmv;
        localtime_r(&wall, &tmv);
        strftime(M->date, sizeof M->date, "%Y-%m-%dT%H:%M:%S%z", &tmv);
    }
    run_machine_string(M->machine, sizeof M->machine);
    if (!(M->stats = calloc((size_t)N->r.n_arms, sizeof *M->stats)) ||
        !(M->have_stats = calloc((size_t)N->r.n_arms, sizeof *M->have_stats))) {
        cli_errorf("out of memory");
        return RUN_EXIT_RUNTIME;
    }
    if (write_meta(M, N->r.arms, N->r.n_arms, N->r.ref, N->cells_done, "running", 0, err, sizeof err)) {
        cli_errorf("%s", err);
        return RUN_EXIT_RUNTIME;
    }
    return 0;
}

/* The cells' state: the arms' requests and replies, their twins, every arm's reply cap. */
static int needle_state(needle_cmd *N) {
    needle_run *R = &N->R;
    const proto_hello_rep *h = &N->r.arms[N->r.ref].hello;
    char err[1024];
    size_t max_gold = 1;
    for (int i = 0; i < N->P.n; i++) max_gold = N->P.c[i].n_gold > max_gold ? N->P.c[i].n_gold : max_gold;
    int bad = needle_run_alloc(R, N->r.arms, N->r.n_arms, N->r.ref);
    R->V = (int)h->n_vocab;
    R->recv_max = (size_t)h->n_vocab * 4 * (max_gold > 1 ? max_gold - 1 : 1) + (size_t)N->o.gen * 8 + PROTO_SLACK;
    R->chunk = N->o.eng.chunk;
    R->gen = N->o.gen;
    R->stop = N->r.stop;
    R->warnings = N->r.warnings;
    N->cell_cost = calloc((size_t)N->P.n, sizeof *N->cell_cost);
    if (bad || !N->cell_cost) { cli_errorf("out of memory"); return RUN_EXIT_RUNTIME; }
    for (int i = 0; i < N->r.n_arms; i++)
        if (arm_set_recv_max(&N->r.arms[i], R->recv_max, err, sizeof err)) { cli_errorf("%s", err); return RUN_EXIT_RUNTIME; }
    return 0;
}

/* The cost of the cells to run, calibrated: into meta.json and, unless quiet, on stderr. */
static int needle_estimate(needle_cmd *N) {
    const needle_opts *o = &N->o;
    needle_cost_model *cm = &N->cm;
    char err[2048];
    json_t *cal = NULL;
    int rc = needle_truncate_all(&N->R, 0, err, sizeof err);
    if (!rc) rc = needle_calibrate(&N->R, &N->P, cm, &cal, err, sizeof err);
    if (rc == ARM_E_INTERRUPTED) return RUN_EXIT_INTERRUPTED;
    if (rc) { cli_errorf("%s", err); return RUN_EXIT_RUNTIME; }
    N->M.calibration = cal;
    needle_cost cost;
    needle_plan_cost(&N->P, o->gen, cm, N->R.cur, N->R.n_cur, &cost, N->cell_cost);
    N->M.cost = json_pack("{s:I,s:I,s:I,s:I,s:I,s:o}", "cells", (json_int_t)cost.cells, "prompt_tokens_per_arm",
                          (json_int_t)cost.prompt_tokens, "prefill_tokens_per_arm", (json_int_t)cost.prefill_tokens,
                          "gold_tokens_per_arm", (json_int_t)cost.gold_tokens, "generated_tokens_per_arm",
                          (json_int_t)cost.gen_tokens, "estimate_seconds",
                          cm->have ? json_real(cost.seconds) : json_null());
    if (o->quiet) return 0;
    char est[64] = "no estimate (prompts too short to calibrate)";
    if (cm->have) {
        char d[32];
        fmt_duration(cost.seconds, d, sizeof d);
        snprintf(est, sizeof est, "about %s", d);
    }
    fprintf(stderr, "strata-driver: needle: %d arms; %ld cells to run (%d of %d done) = %d lengths x %d "
            "positions x %d trials x %d templates; per arm: %ld prompt tokens, %ld prefilled (the rest "
            "are shared prefixes), %ld gold, %ld generated; time %s; results in %s\n",
            N->r.n_arms, cost.cells, N->cells_done, N->P.n, o->n_lengths, o->n_positions, o->trials,
            N->P.n_templates, cost.prompt_tokens, cost.prefill_tokens, cost.gold_tokens, cost.gen_tokens, est,
            N->r.out_dir);
    if (cm->have)
        fprintf(stderr, "strata-driver: needle: calibration (%d-token prefills, %d generated, all arms at "
                "once): %.2f ms per token + %.3f us per token per position; %.1f ms per generated token\n",
                NEEDLE_CAL_TOKENS, NEEDLE_CAL_GEN, 1e3 * cm->a, 1e6 * cm->b, 1e3 * cm->d);
    return 0;
}

/* One cell on every arm, its rows appended to cells.tsv. 0, ARM_E_INTERRUPTED or an error with
 * N->err. */
static int needle_one_cell(needle_cmd *N, const needle_cell *c, needle_row *rows) {
    int n = N->r.n_arms;
    memset(rows, 0, (size_t)n * sizeof *rows);
    int rc = needle_cell_run(&N->R, &N->T, c, rows, N->err, sizeof N->err);
    for (int a = 0; !rc && a < n; a++)
        if (needle_row_write(N->cells, &rows[a]))
            rc = errmsg_set(N->err, sizeof N->err, -1, "cannot write cells.tsv: %s", strerror(errno));
    if (!rc && fflush(N->cells))
        rc = errmsg_set(N->err, sizeof N->err, -1, "cannot write cells.tsv: %s", strerror(errno));
    for (int a = 0; a < n; a++) { free(rows[a].generated); free(rows[a].gold); free(rows[a].gen); }
    return rc;
}

/* The cells not done, in run order, meta.json rewritten after each, with progress. Returns the
 * exit code (RUN_EXIT_OK: every cell ran). */
static int needle_cells(needle_cmd *N) {
    const needle_plan *P = &N->P;
    int have = N->cm.have;
    needle_progress pg;
    memset(&pg, 0, sizeof pg);
    pg.quiet = N->o.quiet;
    pg.tty = isatty(2);
    pg.t0 = pg.last = clock_s();
    pg.cells_total = P->n;
    pg.cells_done = N->cells_done;
    for (int i = 0; i < P->n; i++) pg.total += have ? N->cell_cost[i] : (double)(P->c[i].done ? 0 : P->c[i].n);
    needle_row *rows = calloc((size_t)N->r.n_arms, sizeof *rows);   /* [n_arms] one cell's */
    if (!rows) { cli_errorf("out of memory"); return RUN_EXIT_RUNTIME; }
    int ret = RUN_EXIT_OK;
    for (int i = 0; i < P->n; i++) {
        const needle_cell *c = &P->c[i];
        if (c->done) continue;
        if (*N->r.stop) { ret = RUN_EXIT_INTERRUPTED; break; }
        int rc = needle_one_cell(N, c, rows);
        if (rc) {
            if (rc == ARM_E_INTERRUPTED) ret = RUN_EXIT_INTERRUPTED;
            else { cli_errorf("%s", N->err); ret = RUN_EXIT_RUNTIME; }
            break;
        }
        pg.cells_done = ++N->cells_done;
        pg.done += have ? N->cell_cost[i] : (double)c->n;
        progress_show(&pg, c, 0);
        if (write_meta(&N->M, N->r.arms, N->r.n_arms, N->r.ref, N->cells_done, "running", 0, N->err, sizeof N->err)) {
            cli_errorf("%s", N->err);
            ret = RUN_EXIT_RUNTIME;
            break;
        }
    }
    free(rows);
    if (!N->o.quiet && pg.drawn) { progress_show(&pg, NULL, 1); fprintf(stderr, "\n"); }
    return ret;
}

/* After the cells: the status, the workers' counters, the final meta.json, the workers stopped,
 * the folder rendered. Returns ret or a later failure's exit code. */
static int needle_finish(needle_cmd *N, int ret) {
    const char *status = "complete", *out_dir = N->r.out_dir;
    int done = N->cells_done, n = N->P.n;
    char err[2048];
    if (ret == RUN_EXIT_INTERRUPTED) {
        snprintf(N->status, sizeof N->status, "interrupted after %d of %d cells", done, n);
        status = N->status;
        fprintf(stderr, "strata-driver: interrupted: kept %d of %d cells in %s (continue with: strata-driver "
                "needle --resume %s)\n", done, n, out_dir, out_dir);
    } else if (ret != RUN_EXIT_OK) {
        snprintf(N->status, sizeof N->status, "%s", N->err);
        status = N->status;
    }
    if (ret != RUN_EXIT_OK) {
        char w[256];
        snprintf(w, sizeof w, "partial results: %d of %d cells", done, n);
        json_array_append_new(N->r.warnings, json_string(w));
    }
    for (int a = 0; a < N->r.n_arms; a++) {
        if (!N->r.arms[a].connected || !arm_alive(&N->r.arms[a])) continue;
        N->M.have_stats[a] = workers_stats(&N->r.arms[a], &N->M.stats[a], N->r.warnings);
    }
    if (write_meta(&N->M, N->r.arms, N->r.n_arms, N->r.ref, done, status, ret == RUN_EXIT_OK, err, sizeof err)) {
        cli_errorf("%s", err);
        if (ret == RUN_EXIT_OK) ret = RUN_EXIT_RUNTIME;
    }
    fclose(N->cells);
    N->cells = NULL;
    run_stop(&N->r);
    return run_render(&N->r, needle_report_render, done > 0, N->o.quiet, ret);
}

/* ============================================================================================
 * needle_main
 * ========================================================================================== */

static int needle_close(needle_cmd *N, int ret) {
    if (N->cells) fclose(N->cells);
    needle_run_free(&N->R);
    free(N->cell_cost);
    free(N->M.stats);
    free(N->M.have_stats);
    json_decref(N->M.calibration);
    json_decref(N->M.cost);
    needle_plan_free(&N->P);
    needle_tok_free(&N->T);
    if (N->cli.resume) workers_arm_opts_free(&N->o.ao);   /* else o.ao is cli.ao's copy */
    workers_arm_opts_free(&N->cli.ao);
    json_decref(N->resume_meta);
    return run_close(&N->r, ret);
}

int needle_main(int argc, char **argv, const char *command_line, const char *git,
                volatile sig_atomic_t *stop) {
    needle_cmd N;
    memset(&N, 0, sizeof N);
    N.command_line = command_line;
    N.git = git;
    int ret = run_init(&N.r, stop);
    if (!ret) ret = needle_options(&N, argc, argv);
    if (!ret) ret = needle_arms(&N);
    if (!ret) ret = needle_out_dir(&N);
    if (!ret) ret = needle_corpus(&N);
    if (!ret) ret = run_start(&N.r, (workers_opts){ NULL, N.o.model, N.o.eng.threads, N.o.eng.prefill,
                                                    N.o.eng.max_context, N.o.quiet });
    if (!ret) ret = needle_tokenizer_fetch(&N);
    if (!ret) ret = needle_plan_make(&N);
    if (!ret) ret = needle_folder(&N);
    if (!ret) ret = needle_meta_start(&N);
    if (!ret) ret = needle_state(&N);
    if (!ret) ret = needle_estimate(&N);
    if (!ret) ret = needle_finish(&N, needle_cells(&N));
    return needle_close(&N, ret < 0 ? RUN_EXIT_OK : ret);   /* -1: after --help */
}
