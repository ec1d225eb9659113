/* needle_internal.h — what the files of the needle command share; nothing outside driver/needle*.c
 * includes it (the public API is needle.h).
 *
 * The command, in the order a run goes:
 *   needle_cli.c    the usage, the options (argv, or meta.json for --resume), meta.json's "options"
 *   needle_tok.c    the tokenizer: the reference worker's pieces, chat template, tokenize requests
 *   needle_plan.c   the plan: haystacks, every cell's prompt and gold answer, their order, the cost
 *   needle_cell.c   one cell on every arm in lockstep, and the calibration of the cost
 *   needle.c        needle_main on the run skeleton (driver/run.h): meta.json, the progress line,
 *                   cells.tsv (resumed), the cells' loop
 * The pure parts (keys, templates, prompt assembly) are needle_prompt.c; the rows of cells.tsv
 * needle_rows.c; the results folder report_needle*.c.
 *
 * Ownership: needle_main owns every structure below (on its stack) and frees each with its _free
 * function; the functions here fill them and allocate only what their comments say.
 */
#ifndef STRATA_NEEDLE_INTERNAL_H
#define STRATA_NEEDLE_INTERNAL_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "driver/arm.h"
#include "driver/cli.h"
#include "driver/document.h"
#include "driver/needle/needle.h"
#include "driver/workers.h"
#include "proto/proto.h"

#define NEEDLE_MAX_LIST  64    /* --lengths / --positions entries */
#define NEEDLE_CAL_TOKENS 512  /* calibration: two prefills of this many tokens */
#define NEEDLE_CAL_GEN    4    /*   and this many generated tokens */

/* ---- needle_cli.c ------------------------------------------------------------------------------ */

enum { NEEDLE_TPL_RAW = 1, NEEDLE_TPL_CHAT = 2, NEEDLE_TPL_BOTH = 3 };

typedef struct {
    const char *model, *doc, *corpus, *arms_list, *ref, *out, *tag, *resume;
    const char *dump_prompts;     /* tests: DIR for every prompt's token ids */
    cli_engine_opts eng;          /* --worker, --chunk, --threads, --prefill, --max-context */
    workers_arm_opts ao;          /* --arm, --arm-model, --tls-*, --launch, --launch-listen,
                                   * --allow-overcommit */
    int lengths[NEEDLE_MAX_LIST], n_lengths;
    int positions[NEEDLE_MAX_LIST], n_positions;
    int keys, trials, gen;
    int tpl;                      /* TPL_*, 0 = default (both when available) */
    uint64_t seed;
    int force, quiet;
} needle_opts;

/* The defaults (cleared first). */
void needle_opts_defaults(needle_opts *o);
/* Parses argv (argv[0] "needle") into o; *explicit_run_opts counts the options a resume may not
 * take. Returns 0, -1 after --help (printed) or an exit code (message printed). */
int needle_opts_parse(int argc, char **argv, needle_opts *o, int *explicit_run_opts);
/* --resume: o from the run's meta (its "options"; strings point into meta), keeping cli's --quiet,
 * --threads, --worker and where the workers run (cli_resume_take_workers; cli's --arm array moves
 * into o). Returns 0 or an exit code (message printed). */
int needle_opts_resume(needle_opts *o, needle_opts *cli, json_t *meta);
/* meta.json's "options" (a new object). */
json_t *needle_opts_json(const needle_opts *o);

/* ---- needle_tok.c ------------------------------------------------------------------------------ */

#define NEEDLE_TOK_RECV_MAX ((size_t)PROTO_MAX_TEXT * 2 + PROTO_SLACK)   /* vocab and tokenize replies */

#define NEEDLE_TOK_RECV_MAX ((size_t)PROTO_MAX_TEXT * 2 + PROTO_SLACK)   /* vocab and tokenize replies */

typedef struct {
    arm *a;               /* the reference arm (borrowed) */
    int n_vocab;          /* the tokenizer's tokens (<= the model's n_vocab) */
    needle_chat chat;
    char system[NEEDLE_TEXT_MAX];
    proto_msg vocab;      /* the vocab reply: pieces [offsets], control flags, chat template */
    int32_t *nl;          /* [n_nl] the tokens of "\n" alone: the sentinel of needle_tok_piece */
    size_t n_nl;
    uint8_t *ends;        /* [n_vocab] the token ends a sentence */
    uint8_t *ends_nl;     /* [n_vocab] it ends with a newline */
} needle_tokenizer;

/* Asks the reference arm a for its tokenizer's pieces and chat template into *t (its arrays
 * malloc'd: needle_tok_free, also after a failure). Returns 0 or -1 with err. */
int needle_tok_fetch(arm *a, needle_tokenizer *t, char *err, size_t errlen);
void needle_tok_free(needle_tokenizer *t);
/* Tokens of text as they read after a newline: "\n" + text tokenised, the tokens of "\n" cut off
 * (when the two do not line up, text alone). No BOS; special: parse special-token texts. *ids is
 * malloc'd (may be NULL for n = 0). Returns 0 or -1 with err. */
int needle_tok_piece(const needle_tokenizer *t, const char *text, int special, int32_t **ids, size_t *n,
                     char *err, size_t errlen);
/* The decoded text of ids [n] up to the first control token, into a malloc'd NUL-terminated
 * *text [*len]. Returns 0 or -1 (out of memory). */
int needle_tok_decode(const needle_tokenizer *t, const int32_t *ids, size_t n, char **text, size_t *len);

/* ---- needle_plan.c ----------------------------------------------------------------------------- */

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
} needle_cell;

typedef struct {
    needle_cell *c;            /* [n] in run order */
    int n;
    int n_templates;     /* 1 or 2 */
    int tpl_chat[2];     /* [n_templates]: 0 raw, 1 chat */
    int capped;          /* some length was capped at the context */
    int cap_len;
    size_t *hay_off, *hay_end;   /* [trials] the bytes [off, end) of the corpus each trial reads */
    int trials;
    int hay_overlap;     /* a trial's haystack shares text with an earlier one (short corpus) */
} needle_plan;

/* Every cell of o's grid: its haystack (each trial its own stretch of doc), prompt (at most L
 * tokens, capped at n_ctx minus the answer) and gold answer, tokenised by T; bos >= 0 with add_bos
 * opens every prompt. Sorted into run order. Allocates P's arrays (needle_plan_free, also after a
 * failure). Returns 0 or -1 with err. */
int needle_plan_build(const needle_opts *o, const needle_tokenizer *T, const doc_t *doc, uint64_t n_ctx,
                      int add_bos, int bos, needle_plan *P, char *err, size_t errlen);
void needle_plan_free(needle_plan *p);
/* --dump-prompts DIR (tests): every cell's prompt and gold answer as token ids into DIR. 0 or -1
 * with err. */
int needle_plan_dump(const needle_plan *P, const char *dir, char *err, size_t errlen);

/* Cost model of one arm, from the calibration: a prefill of tokens [s, e) takes
 * a·(e − s) + b·(e² − s²)/2 seconds (per-token work plus attention over the positions before),
 * a generated token at position q takes d + b·q. */
typedef struct {
    int have;
    double a, b, d;
} needle_cost_model;

/* What the remaining cells cost: tokens per arm and seconds (when calibrated). The stream starts
 * as cur [n_cur]. */
typedef struct {
    long cells, prompt_tokens, prefill_tokens, gold_tokens, gen_tokens;
    double seconds;
} needle_cost;

/* What the cells not done cost with model m (seconds 0 when uncalibrated), the arms' streams
 * starting as cur [n_cur]; cell_cost [P->n] (or NULL): each cell's seconds. */
void needle_plan_cost(const needle_plan *P, int gen, const needle_cost_model *m, const int32_t *cur,
                      size_t n_cur, needle_cost *out, double *cell_cost);

/* ---- needle_cell.c ----------------------------------------------------------------------------- */

/* The cells' requests to every arm, in lockstep. */
typedef struct {
    arm *arms;                 /* [n] borrowed (the run's) */
    int n, ref;
    int V;                     /* the reference's vocabulary: logit rows are [V] */
    size_t recv_max;           /* the largest reply of a cell */
    int chunk, gen;            /* tokens per prefill request; generated tokens per answer */
    const volatile sig_atomic_t *stop;
    proto_msg *req, *rep;      /* [n] one request / reply per arm */
    int32_t *cur;              /* [cap] the tokens every arm's stream holds (n_cur of them) */
    size_t n_cur, cap;
    int *twin, *twin_warned;   /* [n] the first arm configured like it (-1: none); a twin warning given */
    json_t *warnings;          /* borrowed: the run's */
} needle_run;

/* Allocates R's arrays for the arms of a run (twins found); needle_run_free frees them (also
 * after a failure). Returns 0 or -1 (out of memory). */
int needle_run_alloc(needle_run *R, arm *arms, int n, int ref);
void needle_run_free(needle_run *R);
/* Truncates every arm to depth. Returns 0, ARM_E_INTERRUPTED or an error with err. */
int needle_truncate_all(needle_run *R, size_t depth, char *err, size_t errlen);
/* Runs cell c on every arm and fills out[a] (its strings/arrays malloc'd; the caller frees). Returns
 * 0, ARM_E_INTERRUPTED or an error with err. */
int needle_cell_run(needle_run *R, const needle_tokenizer *T, const needle_cell *c, needle_row *out, char *err,
                    size_t errlen);
/* Calibrates the cost model m on the first cell not done (no estimate when its prompt is short);
 * *cal: the measurements for meta.json (a new object, or NULL). Returns 0, ARM_E_INTERRUPTED or an
 * error with err. */
int needle_calibrate(needle_run *R, const needle_plan *P, needle_cost_model *m, json_t **cal, char *err,
                     size_t errlen);

#endif
