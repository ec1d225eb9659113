/* run.h — the one skeleton of every driver command that runs arms (`sweep`, `needle`, and
 * whatever comes next), in the order a command calls it:
 *
 *   run_init          an empty run: no arms, no temp dir, an empty list of warnings
 *   run_arms          the arm specs -> the arms and the reference (workers_arms_build)
 *   run_check_local   the local arms' model files and the worker binary, before anything starts
 *   run_doc           the document or corpus: its text (and tokens, from --tokens-file)
 *   run_start         every local worker started, every arm dialled, the handshakes checked
 *   run_tokens        the document tokenised by the reference, every id checked against the vocabulary
 *   run_folder        the results folder created (with --force, an earlier run's files removed)
 *     ... the command's own loop (sweep_run, the needle's cells) ...
 *   run_stop          the workers stopped, their logs kept in the results folder
 *   run_render        the folder's README.md, summary.json and plots
 *   run_close         everything freed; the driver's exit code
 *
 * The steps that may fail return 0 or one of the driver's exit codes (RUN_EXIT_*) with one error
 * line printed (cli_errorf), so a command reads `if (!ret) ret = run_step(...)` down its table of
 * contents. The command keeps what is its own: its options, its results folder's name, its plan,
 * its files.
 *
 * Ownership: the run_ctx is the command's (on its stack); run_init clears it, the steps fill it and
 * run_close frees what they allocated (the arms, the temp dir, the document, the warnings), also
 * after a failure at any step.
 */
#ifndef STRATA_RUN_H
#define STRATA_RUN_H

#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "driver/arm.h"
#include "driver/document.h"
#include "driver/workers.h"

/* The driver's exit codes (docs/DESIGN.md §1.5). */
enum { RUN_EXIT_OK = 0, RUN_EXIT_RUNTIME = 1, RUN_EXIT_USAGE = 2, RUN_EXIT_MISMATCH = 3, RUN_EXIT_INTERRUPTED = 130 };

#define RUN_STOP_GRACE_MS 3000   /* a worker's time to exit after its stop request */

typedef struct {
    const volatile sig_atomic_t *stop;   /* the driver's signal flag (borrowed) */
    arm *arms;                /* [n_arms] run_arms (malloc'd; run_close frees) */
    int n_arms, ref;          /* ref: the reference arm's index */
    int n_local;              /* arms whose worker this driver starts */
    proto_tls tls;            /* the arms' start/connect options: they outlive the arms */
    arm_options aopt;
    arm_launch launch;        /* how the local workers were started (restarts) */
    char tmpdir[PATH_MAX];    /* the local workers' private temp dir ("" : none) */
    int tmp_lock;             /* its lock (-1: none) */
    char self_dir[PATH_MAX];  /* this program's directory */
    char worker[PATH_MAX];    /* the strata-worker binary */
    doc_t doc;                /* run_doc (run_close frees) */
    char out_dir[PATH_MAX];   /* the results folder (the command chooses it) */
    char tag[256];            /* the run's tag (the command chooses it) */
    json_t *warnings;         /* owned: the run's warnings (meta.json) */
} run_ctx;

/* Clears *r; stop is the flag the driver's signal handler raises. Returns 0 or RUN_EXIT_RUNTIME
 * (out of memory). */
int run_init(run_ctx *r, const volatile sig_atomic_t *stop);

/* The arms of list (comma-separated specs; NULL: none), --arm-model's and --arm's, the reference
 * ref_name resolved (workers_arms_build). 0 or RUN_EXIT_USAGE. */
int run_arms(run_ctx *r, const char *list, const char *ref_name, const workers_arm_opts *ao);

/* When any arm is local: model (NULL: not checked here) and every --arm-model file are regular GGUF
 * files; the worker binary (worker_opt, else strata-worker beside this program) runs. Also finds
 * this program's directory (for run_doc). 0 or RUN_EXIT_RUNTIME. */
int run_check_local(run_ctx *r, const char *model, const char *worker_opt);

/* The document: --doc FILE, --corpus NAME|DIR or --tokens-file FILE (doc_load, the repository the
 * one above this program's directory); a KJV or perldoc text that is not the standard one is
 * warned about on stderr and in the warnings. 0 or RUN_EXIT_RUNTIME. */
int run_doc(run_ctx *r, const char *doc, const char *corpus, const char *tokens_file);

/* Starts and dials the workers and checks their handshakes (workers_start) with wo (wo->worker
 * is set to r->worker here). 0, RUN_EXIT_RUNTIME, RUN_EXIT_MISMATCH or RUN_EXIT_INTERRUPTED. */
int run_start(run_ctx *r, workers_opts wo);

/* The smallest context of the arms (their handshakes). */
uint64_t run_n_ctx(const run_ctx *r);

/* The document's tokens into *tokens [*n] (malloc'd; the caller frees): --tokens-file's (moved out
 * of r->doc), else its text tokenised by the reference (BOS added); every id inside the
 * reference's vocabulary. 0, RUN_EXIT_RUNTIME or RUN_EXIT_INTERRUPTED. */
int run_tokens(run_ctx *r, int32_t **tokens, size_t *n);

/* Creates r->out_dir (mkdir -p); with clear, first removes the files named in clear_files
 * (NULL-terminated) from it: an earlier run's (--force). 0 or RUN_EXIT_RUNTIME. */
int run_folder(run_ctx *r, int clear, const char *const *clear_files);

/* Stops every worker and keeps their logs in r->out_dir (workers.log). */
void run_stop(run_ctx *r);

/* When have_results: render(r->out_dir) (cli_render). Returns ret, or RUN_EXIT_RUNTIME when ret
 * was RUN_EXIT_OK and the rendering failed. */
int run_render(run_ctx *r, int (*render)(const char *dir, char *err, size_t errlen), int have_results, int quiet,
               int ret);

/* Stops what still runs, frees what the steps allocated and clears *r. Returns ret, or
 * RUN_EXIT_INTERRUPTED when a stop was asked and ret is not RUN_EXIT_OK. */
int run_close(run_ctx *r, int ret);

/* "Linux 6.1.0 x86_64; <CPU model>; N cores" into buf[len]: the machine line of meta.json (sweep
 * and needle folders alike). Allocates nothing. */
void run_machine_string(char *buf, size_t len);

#endif
