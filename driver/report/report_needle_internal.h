/* report_needle_internal.h — what the files of the needle results folder share; nothing outside
 * driver/report_needle*.c includes it (the public API is needle.h).
 *
 * The module, in the order a rendering goes:
 *   report_needle_load.c      a folder loaded: meta.json and cells.tsv, the rows indexed by cell and arm
 *   report_needle_analysis.c  the statistics per arm and set of templates; summary.json
 *   report_needle_claims.c    the numbers' formats and the claims they support
 *   report_needle_md.c        README.md
 *   report_needle.c           the heat maps, needle_report_render, needle_report_compare
 * (cells.tsv's rows themselves: driver/needle/needle_rows.c.)
 *
 * Ownership: needle_report_render / needle_report_compare own the structures below (on their
 * stacks) and free them with needle_results_free / needle_analysis_free; the other functions
 * allocate nothing that outlives them.
 */
#ifndef STRATA_REPORT_NEEDLE_INTERNAL_H
#define STRATA_REPORT_NEEDLE_INTERNAL_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "driver/needle/needle.h"
#include "driver/report/report_internal.h"
#include "driver/stats.h"

#define NEEDLE_LOGPROB_EPS 0.1    /* the log-prob margin: equivalent when the 90 % interval of the
                                     mean Δ log-prob lies within ±0.1 nats (~10 %) */
#define NEEDLE_ALPHA       0.05   /* every test; Holm over the arms of a set */
#define NEEDLE_POWER       0.8    /* the power at which the smallest detectable difference is given */
#define NEEDLE_EQ_SHARE    0.05   /* the retrieval margin: ±5 points of accuracy */

/* ---- report_needle_load.c ---------------------------------------------------------------------- */

typedef struct {
    char name[64], kv_k[64], kv_v[64];
    double kv_bytes;
    int role;                       /* ROLE_* */
} needle_results_arm;

enum { ROLE_REF, ROLE_FLOOR, ROLE_REPEAT, ROLE_TEST };

/* A loaded needle folder: meta.json's fields (strings into meta) and the rows of cells.tsv. */
typedef struct {
    json_t *meta;
    const char *tag, *date, *command, *git, *engine, *machine, *status;
    const char *model_path, *model_sha, *model_arch, *chat_template, *chat_system;
    const char *corpus_path, *corpus_desc, *corpus_sha;
    double n_vocab, n_ctx, n_layer, wall, n_cells_plan, cap_len;
    double est_seconds, prefill_tokens, prompt_tokens;
    int complete, sessions;
    needle_results_arm *arms;                     /* [n_arms] */
    int n_arms, ref, floor;
    int lengths[64], n_lengths, positions[64], n_positions;
    int keys, trials, gen;
    long seed;
    int tpl_chat[2], n_tpl;         /* templates in the folder: 0 raw, 1 chat */
    const char **warnings;          /* [n_warnings] into meta */
    int n_warnings;
    needle_row *rows;               /* [n_rows] */
    size_t n_rows, n_dropped;
    const needle_row **idx;         /* [n_tpl][n_lengths][n_positions][trials][n_arms] or NULL */
} needle_results;

/* "reference", "floor", "repeat" or "test" (static). */
const char *needle_role_name(int role);
/* Loads DIR (meta.json, cells.tsv) into *R (needle_results_free, also after a failure). Returns 0
 * or -1 with err. */
int needle_results_load(const char *dir, needle_results *R, char *err, size_t errlen);
void needle_results_free(needle_results *R);
/* The row of (template ti, length li, position pi, trial t, arm a), NULL when not measured. */
const needle_row *needle_results_row(const needle_results *R, int ti, int li, int pi, int t, int a);
/* o[k] as a number, NAN when absent (o may be NULL). */
double needle_results_num(json_t *o, const char *k);

/* ---- report_needle_analysis.c ------------------------------------------------------------------ */

typedef struct {
    size_t n, exact;
    stats_ci acc;                   /* Wilson */
    size_t *g_n, *g_exact;          /* [n_lengths * n_positions] the grid */
    /* against the reference, over the cells both have */
    size_t pairs, b, c;             /* b: only this arm right; c: only the reference right */
    size_t ref_exact;               /* the reference's successes on those pairs */
    /* over units: (trial, length, depth) with the set's templates together */
    size_t units, disc_units;       /* units with a pair; units where a template's outcome differs */
    double diff;                    /* mean over units of the accuracy difference (arm − ref) */
    double p, p_holm;               /* exact sign-flip test over units; Holm over the set's arms */
    double mdd;                     /* the grid's smallest detectable |diff| (INFINITY: no power) */
    double bound;                   /* Clopper–Pearson 95 % bound on |diff| (discordant units) */
    stats_verdict v_acc;            /* lower / higher / no detected difference / equivalent */
    stats_boot dlp;                 /* mean Δ log-prob (arm − ref) over units, bootstrap over units */
    double dlp_holm, dlp_mdd;       /* its p Holm-adjusted; stats_mdd of its se */
    stats_verdict v_lp;
    double *g_dlp;                  /* [grid] mean Δ log-prob per grid cell, NAN without pairs */
    size_t identical;               /* same greedy tokens and bit-identical log-prob */
    double mean_lp;                 /* mean log-prob of the gold key (this arm, all its cells) */
} needle_arm_stat;

typedef struct {
    int n_sets;                     /* n_tpl, + 1 (pooled) when there are two templates */
    needle_arm_stat *s;                       /* [n_sets][n_arms] */
    double *prompt_mean;            /* [n_lengths] mean prompt tokens (reference rows) */
    double margin_acc;              /* NEEDLE_EQ_SHARE, or NAN on one haystack (not assessed) */
} needle_analysis;

/* The statistics of every arm and set (needle_analysis_free, also after a failure). Returns 0 or -1
 * with err. */
int needle_analysis_run(const needle_results *R, needle_analysis *A, char *err, size_t errlen);
void needle_analysis_free(needle_analysis *A, const needle_results *R);
/* Arm a's numbers in set (a template, or n_tpl: all pooled). */
needle_arm_stat *needle_stat_at(const needle_analysis *A, const needle_results *R, int set, int a);
/* "raw", "chat" or "all" (static). */
const char *needle_set_name(const needle_results *R, const needle_analysis *A, int set);

/* ---- report_needle_claims.c -------------------------------------------------------------------- */

typedef struct {
    char arm[64], set[8];
    int kind;                       /* 0: retrieval, 1: the key's log-probability */
    stats_verdict verdict;          /* STATS_NOT_COMPUTABLE: not measured */
    char words[64];                 /* stats_verdict_format, or "not measured" */
    char claim[512], evidence[1024];
} needle_claim;

/* Formats for README.md and the comparison (into buf [len]). */
void needle_fmt_pct(double v, char *buf, size_t len);
void needle_fmt_p(double p, char *buf, size_t len);
void needle_fmt_lp_ci(const stats_boot *c, char *buf, size_t len);
void needle_fmt_units(const needle_results *R, const needle_analysis *A, int set, size_t units, char *buf, size_t len);
void needle_fmt_power_acc(const needle_arm_stat *S, char *buf, size_t len);
void needle_fmt_power_lp(const needle_arm_stat *S, char *buf, size_t len);
/* A verdict in words (kind 0: retrieval, 1: log-probability), "not measured" when not computable. */
void needle_verdict_words(stats_verdict v, int kind, char *buf, size_t len);
/* The claims (two per test arm and set) into out [max]; returns how many. */
int needle_claims_make(const needle_results *R, const needle_analysis *A, needle_claim *out, int max);

/* ---- report_needle_analysis.c (summary.json) --------------------------------------------------- */

/* summary.json (a new object, or NULL when out of memory). */
json_t *needle_summary_build(const needle_results *R, const needle_analysis *A, const needle_claim *cl, int n_cl);

/* ---- report_needle_md.c ------------------------------------------------------------------------ */

/* README.md on o; drawn [2][n_arms]: which heat maps exist. */
void needle_readme_write(FILE *o, const needle_results *R, const needle_analysis *A, const needle_claim *cl,
                         int n_cl, const int *drawn);

/* ---- report_needle.c --------------------------------------------------------------------------- */

/* The heat maps into DIR/plots (drawn [2][n_arms] set for those written). Returns 0 or -1 with err. */
int needle_plots_render(const char *dir, const needle_results *R, const needle_analysis *A, int *drawn, char *err,
                        size_t errlen);

#endif
