/* sweep_cli.h — the command line of `strata-driver sweep` (driver/sweep/sweep_cli.c): its usage, its
 * options, and --resume's options taken from the run's journal. The command itself is sweep_main
 * (driver/sweep/sweep_cmd.c, declared in sweep.h); nothing else includes this header.
 *
 * Ownership: a sweep_opts borrows its strings (argv, or the journal header resume_opts keeps);
 * its ao arrays are freed with workers_arm_opts_free and passage_starts with free, both by
 * sweep_main.
 */
#ifndef STRATA_SWEEP_CLI_H
#define STRATA_SWEEP_CLI_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "driver/cli.h"
#include "driver/sweep/sweep.h"
#include "driver/workers.h"

typedef struct {
    const char *model, *doc, *corpus, *tokens_file, *arms_list, *ref, *out, *tag, *dump_rows;
    cli_engine_opts eng;     /* --worker, --chunk, --threads, --prefill, --max-context */
    workers_arm_opts ao;     /* --arm, --arm-model, --tls-*, --launch, --launch-listen, --allow-overcommit */
    char tls_abs[3][PATH_MAX];   /* --resume: the --tls-* files given beside it, made absolute */
    char worker_abs[PATH_MAX], dump_abs[PATH_MAX];   /* --resume: --worker, --dump-rows given, absolute */
    int depths, max_depth, fork_n, per_position;
    int force, quiet, json;
    int cross_score;
    int n_passages, passage_len;   /* --passages N (0: off), --passage-len L */
    int *passage_starts;     /* [n_passages] planned (sweep_cmd.c's plan; freed by sweep_main) */
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

/* Parses the sweep's arguments (argv[0] is "sweep") into *o (cleared by the caller). Returns 0, -1
 * after --help (printed), or an exit code (message printed). */
int sweep_cli_parse(int argc, char **argv, sweep_opts *o);

/* The invocation a journal records: {"argv": [the sweep's arguments], "cwd": "..."} (a new object
 * the caller owns). */
json_t *sweep_cli_invocation(int argc, char **argv);

/* --resume DIR: replaces *o with the options recorded in DIR's journal (parsed again, in the
 * recorded working directory, which becomes the current one), keeping the few given beside
 * --resume. The options that start the workers or say where they run (cli_resume_missing) are
 * never taken from the journal: they are the command line's, and a run that had them is refused
 * unless they are given again. --dump-rows (a folder written to) is the command line's too.
 * *hdr (the journal header; the caller json_decrefs it) and *rargv (malloc'd; the caller frees
 * it) hold the strings *o points into; out_dir [PATH_MAX] receives DIR's absolute path; *command
 * the original command line. Returns 0 or an exit code (message printed). */
int sweep_cli_resume(sweep_opts *o, json_t **hdr, char ***rargv, char *out_dir, const char **command);

#endif
