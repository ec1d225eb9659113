/* report_internal.h — what the files of the report module share; nothing outside
 * driver/report*.c includes it (the public API is report.h).
 *
 * The module, in the order a render runs:
 *   report_tsv.c       the raw files: TSV row writers (sweep), loading meta.json + TSVs into
 *                      report_results
 *   report_analysis.c  the statistics of every arm (stats.h) into report_analysis
 *   report_claims.c    what those statistics support: claims with verdicts
 *   report_summary.c   summary.json as a JSON document
 *   report_plots.c     DIR/plots: gnuplot scripts, their .dat files, PNG and SVG
 *   report_format.c    text into caller buffers: numbers for tables, paths, error messages
 *   report.c           README.md, and report_render (runs all of the above on one folder)
 *   report_compare.c   report_compare: two folders side by side
 *
 * Ownership: report_results_load allocates what a report_results holds (free it with
 * report_results_free); report_analysis_run allocates what a report_analysis holds (free it
 * with report_analysis_free, before the results it was computed from). Every other function
 * here allocates nothing that outlives the call unless its comment says so.
 */
#ifndef STRATA_REPORT_INTERNAL_H
#define STRATA_REPORT_INTERNAL_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "driver/arm.h"   /* ARM_NAME_MAX, arm_valid_name: the names a folder may hold */

#include <jansson.h>

#include "kernels/errmsg.h"
#include "driver/report/report.h"
#include "driver/stats.h"

/* ============================================================================================
 * Loaded results (report_tsv.c)
 * ========================================================================================== */

typedef struct {
    char name[ARM_NAME_MAX];
    char kv_k[ARM_NAME_MAX], kv_v[ARM_NAME_MAX];
    double kv_bytes;   /* kv_bytes_per_token, NAN when absent */
    int is_ref, is_floor;
    int base;          /* the arm this one repeats ("f16#2" -> index of "f16"), or -1 */
    int weight_arm;    /* 1: it ran its own model file (--arm-model; meta.json "weight_arm") */
    char model_file[256];  /* then that file's last path component (meta.json arms[i].model.path) */
    char device[128];  /* what ran it (meta.json arms[i].device: "cpu-avx2", "llama.cpp-0c1e570-cpu+fa-on+rot-off"),
                        * "" when absent */
    double route_n, route_diff;  /* MoE: routing decisions compared with the reference's and those
                                    that differed (meta.json arms[i].routing), NAN when absent */
    double bv_rows, bv_max;      /* an engine that is not batch-invariant (llama.cpp): rows recomputed
                                  * in a longer chunk and the largest |logit difference| between the
                                  * two (meta.json arms[i].batch_variance), NAN when absent */
} report_arm;

#define REPORT_MAX_REASONS 8

/* One depths.tsv row (arm = index into report_results.arms). */
typedef struct {
    int depth, arm;
    double kl_ar, kl_ra, js;
    int same, top1_arm, top1_ref;
    double nll_arm, nll_ref, ent, gap_ref, gap_arm;
    int fork, censored;
    double fgap_arm, fgap_ref;
} report_depth;

/* One positions.tsv row. */
typedef struct {
    int pos, arm;
    double kl_ar, kl_ra, js;
    int same;
    double nll_arm, nll_ref, ent, gap_ref;
} report_pos;

/* One forks.tsv row. */
typedef struct {
    int depth, arm, fork, censored;
    int *tok_arm, *tok_ref; /* [n_arm], [n_ref] */
    int n_arm, n_ref;
} report_fork;

/* A results folder in memory. Row arrays are sorted by (arm, depth or pos) with no duplicate
 * keys, and frows[k] belongs to drows[k] (same arm, depth and fork). */
typedef struct {
    json_t *meta;       /* owns the strings below */
    char *machine_buf;  /* "machine" when it is not a string (compact JSON), else NULL */
    const char *tag, *date, *command, *git, *engine, *machine;
    const char *model_path, *model_sha, *model_arch, *doc_path, *doc_desc;
    double n_vocab, n_ctx, n_layer, doc_tokens, wall; /* NAN when absent */
    int per_position;   /* -1 unknown */
    int ref, floor;     /* arm indices; floor = -1 without an f32 arm */
    report_arm *arms;   /* [n_arms] */
    int n_arms;
    int *depths;        /* [n_depths] from meta (may be empty) */
    int n_depths;
    int fork_n;
    const char **warnings; /* [n_warnings], pointers into meta */
    int n_warnings;
    report_depth *drows; /* [n_drows] */
    size_t n_drows;
    report_pos *prows;  /* [n_prows] */
    size_t n_prows;
    int have_positions;
    report_fork *frows; /* [n_frows] == [n_drows] */
    size_t n_frows;
    /* completeness (report_results_load): rows of unfinished depths, positions past the last
     * complete depth and torn last lines are not loaded; each such finding, and a meta.json that
     * does not say "complete", adds a reason */
    int complete;       /* 1: every planned depth measured and nothing dropped or unfinished */
    int depths_planned; /* meta.json's depths (else the depths measured) */
    int depths_measured;/* depths with rows for every arm, in order, before the first without */
    int last_depth;     /* the deepest of those (0: none) */
    int have_journal;   /* DIR/journal exists (the run can be continued with --resume) */
    char reasons[REPORT_MAX_REASONS][512];
    int n_reasons;
    int pin_experts;    /* MoE: meta.json "pin_experts" (1 true, 0 false, -1 absent: a dense model) */
} report_results;

/* Reads DIR/meta.json, DIR/depths.tsv, DIR/forks.tsv and (if present) DIR/positions.tsv into
 * *R and checks them against each other. An incomplete folder (a crash, a full disk, an
 * interrupt, hand trimming) loads what is whole: a last line without its newline is dropped,
 * only the leading depths with depth and fork rows for every arm are kept, and positions at or
 * past the last of them are not loaded; R->complete and R->reasons say what was found. Allocates the arrays of *R and keeps meta.json's
 * document; the caller frees them with report_results_free, also after a failure (*R is
 * zeroed first, so that is always safe). Returns 0, or -1 with a message in err naming the
 * file and line. */
int report_results_load(const char *dir, report_results *R, char *err, size_t errlen);
/* Frees what report_results_load allocated and zeroes *R (safe on a zeroed *R). */
void report_results_free(report_results *R);

/* Lookups into loaded results; allocate nothing. */
int report_find_arm(const report_results *R, const char *name);  /* arm index, or -1 */
/* The row of arm at depth (pos), or NULL when there is none. */
const report_depth *report_find_depth(const report_results *R, int arm, int depth);
const report_pos *report_find_pos(const report_results *R, int arm, int pos);

/* ============================================================================================
 * Analysis (report_analysis.c)
 * ========================================================================================== */

/* Arm labels: formats ("K:%s,V:%s" <= 131 bytes) plus " (name)". */
#define REPORT_LABEL_MAX 224
/* what a table shows for a value that does not apply or was not measured (never "nan") */
#define REPORT_NA "—"

/* The statistics of one set of rows (one arm's depths, or one arm's positions). */
typedef struct {
    size_t n;
    stats_ci kl, kl_med, klr, js, top1, dnll, sp_ent, sp_gap;
    double pct[STATS_N_PCT];  /* KL(arm‖ref) percentiles, NAN when n == 0 */
    stats_fit slope;          /* log10 KL vs depth in thousands (depths only) */
    stats_neartie tie;
    stats_km km;              /* fork survival (depths only; km.n_obs == 0 otherwise) */
    double floor_mean;        /* mean floor KL(ref‖f32) at the same keys, NAN without floor */
    size_t n_floor;           /* keys with a floor value */
    size_t n_identical;       /* rows with KL = 0 in both directions and JS = 0 */
} report_set;

/* The analysis of one arm. */
typedef struct {
    size_t d0, nd;          /* this arm's rows: drows[d0 .. d0+nd), frows likewise */
    size_t p0, np;          /* prows[p0 .. p0+np) */
    report_set dep, pos;
    double *floor_kl;       /* [nd] floor KL(ref‖f32) at each depth, NAN where absent */
    int *floor_fork;        /* [nd] floor fork index at each depth, -1 where absent */
    char label[REPORT_LABEL_MAX]; /* e.g. "int8", "K:int8,V:f16", "fp16 (f16#2)" */
    int repeat;             /* -1 not a repeat, 1 bit-identical to its base, 0 not */
    char repeat_detail[600];
} report_arm_an;

typedef struct {
    report_arm_an *a;       /* [n_arms] (the reference's entry stays empty) */
    char ref_label[REPORT_LABEL_MAX];
} report_analysis;

/* Computes the statistics of every non-reference arm of R (over depths, and over positions
 * when measured), the labels, and the repeat checks. Allocates A->a and its per-arm arrays;
 * the caller frees them with report_analysis_free(A, R->n_arms), also after a failure (*A is
 * zeroed first). Returns 0, or -1 with a message in err. */
int report_analysis_run(const report_results *R, report_analysis *A, char *err, size_t errlen);
/* Frees what report_analysis_run allocated (safe on a zeroed *A). */
void report_analysis_free(report_analysis *A, int n_arms);

/* "reference", "repeat", "floor" or "test" (a static string). */
const char *report_arm_role(const report_results *R, int i);
/* Arms the report judges and draws as test series: not the reference, the floor or a repeat. */
int report_is_test_arm(const report_results *R, int i);
/* Number of distinct depths in depths.tsv (the most rows any arm has). */
int report_count_depths(const report_results *R);

/* ============================================================================================
 * Claims (report_claims.c)
 * ========================================================================================== */

#define REPORT_MAX_CLAIMS 8

typedef struct {
    int verdict;            /* its text: report_verdict_name(verdict) */
    char claim[1024];
    char evidence[1024];
} report_claim;

/* The claims about test arm i (definitions in the README), written into out
 * [REPORT_MAX_CLAIMS]; returns their count. Allocates nothing. */
typedef struct report_verdicts report_verdicts;
int report_arm_claims(const report_results *R, const report_analysis *A, const report_verdicts *V, int i,
                      report_claim *out);
/* "supported", "not supported", "inconclusive" or "not measured" (a static string). */
const char *report_verdict_name(int verdict);

/* ============================================================================================
 * summary.json (report_summary.c)
 * ========================================================================================== */

/* Builds the summary document: a new reference the caller json_decrefs; NULL when out of
 * memory. */
json_t *report_summary_build(const report_results *R, const report_analysis *A, const report_verdicts *V);

/* ============================================================================================
 * Plots (report_plots.c)
 * ========================================================================================== */

enum { REPORT_PLOT_KL_DEPTH, REPORT_PLOT_POSITIONS, REPORT_PLOT_KL_ENTROPY, REPORT_PLOT_FORKS,
       REPORT_PLOT_PARETO, REPORT_N_PLOTS };

/* The arms of the "size against divergence" view (README "Formats by size", plot kl_bytes): the
 * test arms and the noise-floor arm with a known KV size, into idx [R->n_arms] in increasing KV bytes
 * per token (ties: arm order). Returns their number. */
int report_size_order(const report_results *R, int *idx);
/* The arm's mean KL(arm‖ref) with its CI over positions when they were measured, else over depths
 * (*over: "positions" or "depths"). */
const stats_ci *report_arm_mean_kl(const report_analysis *A, int i, const char **over);

/* The file stem of plot p ("kl_depth", ...; a static string). */
const char *report_plot_name(int p);

/* Writes DIR/plots/NAME.gp and its .dat files for every plot and runs gnuplot on them
 * (PNG + SVG; its messages go to DIR/plots/gnuplot.log); drawn [REPORT_N_PLOTS] says which
 * plots exist. Every plot's old .gp, .png and .svg are removed first, so a plot with nothing
 * to draw leaves none (its old .dat files stay). Allocates nothing that outlives the call.
 * Returns 0, or -1 with a message in err. */
int report_plots_render(const char *dir, const report_results *R, const report_analysis *A,
                        int *drawn, char *err, size_t errlen);

/* ============================================================================================
 * Text into caller buffers (report_format.c; report_fmt_sig2/report_fmt_depth are in report.h)
 * ========================================================================================== */

/* "DIR/NAME" into path [len]. Returns 0, or -1 with a message in err when it does not fit. */
int report_path(char *path, size_t len, const char *dir, const char *name, char *err,
                size_t errlen);

/* "est [lo, hi]" with 2 significant digits; "est" without a CI; "n/a" for NaN. */
void report_fmt_ci(const stats_ci *c, char *buf, size_t len);
/* A proportion as a percentage with 2 decimals: "99.25% [98.90%, 99.51%]"; "n/a" for NaN. */
void report_fmt_pct_ci(const stats_ci *c, char *buf, size_t len);
/* A correlation with 2 decimals: "0.42 [0.31, 0.52]"; "0.42" without a CI; "n/a" for NaN. */
void report_fmt_rho(const stats_ci *c, char *buf, size_t len);
/* A share as a percentage with 1 decimal ("42.5%"); "n/a" for NaN. */
void report_fmt_share(double v, char *buf, size_t len);
/* A slope fit as "+0.12 [+0.01, +0.23]"; "n/a" when there is no fit (NaN slope). */
void report_fmt_slope(const stats_fit *f, char *buf, size_t len);
/* A fork index: "identical" when censored, else the index. */
void report_fmt_fork(int fork, int censored, char *buf, size_t len);

/* ============================================================================================
 * Cross-scoring and sampled forks (report_cross.c): cross.tsv and samples.tsv when present
 * ========================================================================================== */


/* One cross.tsv row, or cross_samples.tsv row (arm = index into report_results.arms). */
typedef struct {
    int depth, arm, fork, censored, n;
    double temperature;                                          /* cross_samples.tsv; 0: cross.tsv */
    double ref_nll_arm, ref_nll_ref, f32_nll_arm, f32_nll_ref;   /* mean NLL per token; f32: NAN = none */
    double rep_arm, rep_ref;
} report_cross_row;

/* One samples.tsv row (the token streams are checked on loading, not kept). */
typedef struct {
    int depth, arm, fork, censored;
    double temperature, top_p;
} report_sample_row;

typedef struct {
    int have_cross, have_samples;   /* the files exist */
    int have_cross_samples;
    report_cross_row *x;            /* [nx] sorted by (arm, depth) */
    size_t nx;
    report_cross_row *xs;           /* [nxs] cross_samples.tsv, sorted by (arm, temperature, depth) */
    size_t nxs;
    report_sample_row *s;           /* [ns] in file order */
    size_t ns;
    double *temps;                  /* [n_temps] the temperatures of samples.tsv, first appearance order */
    int n_temps;
    double margin_nats;             /* the Δ NLL/token equivalence margin of the cross tables (report_fork_margin;
                                       report_extra_load sets the default's) */
} report_extra;

/* Reads DIR/cross.tsv and DIR/samples.tsv when they exist (rows of depths R did not load are
 * skipped; a torn last line is dropped), checking every field, the fork columns against
 * depths.tsv and the sampled streams against their fork index. Allocates X's arrays (free with
 * report_extra_free, also after a failure). Returns 0, or -1 with a message naming file and line. */
int report_extra_load(const char *dir, const report_results *R, report_extra *X, char *err, size_t errlen);
void report_extra_free(report_extra *X);
/* The README sections "Cross-scored continuations" and "Sampled forks" (nothing when the files
 * are absent). */
void report_extra_readme(FILE *o, const report_results *R, const report_analysis *A, const report_extra *X);
/* `compare`'s rows for one arm, a in folder (1) and b in (2), appended to its statistics table
 * ("| Statistic | (1) | (2) |"): the cross-scored Δ NLL per token under the reference and fp32 with
 * their verdicts, and the fork rate at every temperature either folder sampled (REPORT_NA where a
 * folder did not measure it). Nothing when neither folder has cross.tsv or samples.tsv. */
void report_extra_compare(FILE *o, const report_results *R0, const report_extra *X0, int a,
                          const report_results *R1, const report_extra *X1, int b);
/* Adds "cross_scoring" and "sampled_forks" to the summary root when the files exist. Returns 0 or -1
 * (out of memory). */
int report_extra_summary(json_t *root, const report_results *R, const report_extra *X);

/* ============================================================================================
 * Shared with other results folders (the needle bench, driver/report/report_needle.c)
 * ========================================================================================== */

/* ---- untrusted input and safe output (report_io.c; docs/DESIGN.md §4.11) ------------------ */

/* The bounds on what is read from a results folder: one TSV line (a forks.tsv or samples.tsv row
 * holds two streams of --fork tokens, at most 11 bytes per token: 1.44 MB at the largest --fork,
 * 65536), and meta.json. */
#define REPORT_LINE_MAX ((size_t)2 << 20)
#define REPORT_JSON_MAX ((size_t)64 << 20)

/* Reads the JSON file path (at most REPORT_JSON_MAX bytes, a regular file, not a link) and escapes
 * the control bytes of every string in it (\xHH). Returns a new reference, or NULL with a message
 * in err naming the file (and line). */
json_t *report_json_load(const char *path, char *err, size_t errlen);
/* Opens path for reading: a regular file, not a link (proto/safeio.h). When path is missing and
 * path.gz exists (a per-position file kept compressed in git), that is read instead, decompressed
 * through zlib, at most REPORT_GZ_MAX bytes after decompression (more is a read error: the loaders'
 * ferror checks report it). optional: a missing file (and .gz) gives NULL with *absent = 1. NULL
 * with a message in err otherwise. The stream is the caller's to fclose. */
#define REPORT_GZ_MAX ((unsigned long long)2 << 30)
FILE *report_open_read(const char *path, int optional, int *absent, char *err, size_t errlen);
/* One line of at most REPORT_LINE_MAX bytes (safeio_getline): its length, -1 at the end, -2 (err
 * set, naming path:lineno) for a longer line. */
ssize_t report_getline(char **line, size_t *cap, FILE *f, const char *path, long lineno, char *err,
                       size_t errlen);

/* Writes s as the inside of a gnuplot double-quoted string: '"' and '\\' backslash-escaped, '`'
 * (gnuplot's command substitution, active inside double quotes) and control bytes as octal
 * escapes (\140). An ordinary string comes out unchanged (at most 4 KiB of escaped text). */
void report_gp_put(FILE *g, const char *s);
/* The same into dst [len] (cut before an escape when it does not fit; escaping can quadruple the
 * length); returns dst. */
char *report_gp_str(char *dst, size_t len, const char *s);
/* Writes s for a double-quoted string field of a gnuplot data file: '"', '\\', '`' and control
 * bytes become '_'. */
void report_gp_data_put(FILE *g, const char *s);
/* Writes s for a Markdown table cell: '|' as "\\|". */
void report_md_cell(FILE *o, const char *s);
/* One row of the setup table of a comparison (report_compare, needle_report_compare): the name, both
 * values as cells (report_md_cell), and "**differs**" or "same". */
void report_md_setup_row(FILE *o, const char *name, const char *a, const char *b);
/* v with its unit ("%.0f" then unit), or "unknown" when v is NaN (absent from meta.json). */
void report_md_num(FILE *o, double v, const char *unit);
/* The model's sizes in a README's setup table: ", N layers, vocabulary V, context C" (report_md_num). */
void report_md_model_sizes(FILE *o, double n_layer, double n_vocab, double n_ctx);
/* Escapes the control bytes of the message in err [errlen] in place (safeio_escape): a message may
 * quote a field of the folder, and goes to the terminal. The entry points (report_render,
 * report_compare, needle_report_render, needle_report_compare) call it on failure. */
void report_err_clean(char *err, size_t errlen);

/* A folder output is written into, held open: files are created relative to fd. */
typedef struct {
    int fd;            /* O_DIRECTORY, -1 when closed */
    char path[4096];   /* for messages */
} report_outdir;
/* Opens DIR (sub NULL: the results folder itself, which the user named), or DIR/sub, created when
 * missing and refused when it is a symbolic link or not a folder. Returns 0, or -1 with err. */
int report_outdir_open(report_outdir *d, const char *dir, const char *sub, char *err, size_t errlen);
void report_outdir_close(report_outdir *d);
/* Removes d/name (never what a link points to); a missing name is fine. Returns 0 or -1 (errno). */
int report_outdir_remove(const report_outdir *d, const char *name);
/* Creates d/name afresh for writing (the old name removed, then O_CREAT | O_EXCL | O_NOFOLLOW, mode
 * 0644): a planted link or hard link is replaced, never written through. NULL with err on failure. */
FILE *report_outdir_create(const report_outdir *d, const char *name, char *err, size_t errlen);
/* 1 when d/name is a non-empty regular file (a link is not followed). */
int report_outdir_nonempty(const report_outdir *d, const char *name);

/* A file written as DIR/NAME.tmp and renamed to DIR/NAME once complete (report.c). */
typedef struct {
    char path[4096];   /* DIR/NAME */
    char tmp[4200];    /* DIR/NAME.tmp */
    char name[256], tmpname[264];  /* NAME, NAME.tmp */
    report_outdir dir;
    FILE *f;
} report_tmp_file;
/* Opens DIR/NAME.tmp into out->f. Returns 0, or -1 with a message in err. */
int report_tmp_open(report_tmp_file *out, const char *dir, const char *name, char *err,
                    size_t errlen);
/* Closes out->f and renames it into place (failed: the caller's writing failed; then, or on any
 * error, the temp file is removed). Returns 0, or -1 with a message in err. */
int report_tmp_commit(report_tmp_file *out, int failed, char *err, size_t errlen);
/* Runs "gnuplot NAME.gp" in the plots folder pd, its output appended to its gnuplot.log
 * (report_plots.c). Returns 0, or -1 with a message in err. */
int report_gnuplot_run(const report_outdir *pd, const char *name, char *err, size_t errlen);


/* ============================================================================================
 * Verdicts: "The answer first" and the per-depth-bin table (report_verdict.c, docs/DESIGN.md §4.15)
 * ========================================================================================== */

/* Defaults of the margins (report --margin-ppl / --margin-top1, sweep records them in meta.json
 * "margins"; docs/DESIGN.md §4.15 gives the reasons). */
#define REPORT_MARGIN_PPL_DEFAULT 1.0   /* TOST margin on the PPL change, percent */
#define REPORT_MARGIN_TOP1_DEFAULT 1.0  /* TOST margin on top-1 agreement, percentage points */
#define REPORT_FAR_FACTOR 10.0          /* "distinguishable in distribution": KL CI lower end > 10 x floor */

typedef struct {
    double ppl_pct, top1_pp;   /* the margins used */
    const char *src;           /* "the command line", "meta.json" or "the default" */
} report_margins;

/* One depth bin: positions [lo, hi) (the sweep's depth intervals: [0, d1), [d1, d2), ...). */
typedef struct {
    int lo, hi;
    size_t n;
    stats_boot kl;             /* mean KL(arm‖ref), circular block bootstrap (Politis–White) */
    double top1;               /* share of positions with the same top-1 */
    double dnll, ppl_pct;      /* mean Δ NLL and exp(mean Δ NLL) − 1 in percent */
    size_t n_near, n_near_flips;
    stats_ci near_rate;        /* flips among near ties (Wilson) */
} report_bin;

/* A depth trend measured elsewhere: the controlled passage design (passages.tsv, its own
 * renderer). When report_arm_verdict.from_passages is non-NULL, the depth verdict is taken from
 * it instead of the depth bins of positions.tsv. */
typedef struct {
    stats_boot ratio;          /* the trend: exp(b·ln(depth_last/depth_first)), b the least-squares
                                * slope of ln(mean KL) on ln(depth) over every depth with context
                                * from depth_first to depth_last (all n_depths of them), paired
                                * bootstrap over passages */
    stats_boot endpoint;       /* mean KL at depth_last / at depth_first alone, the same bootstrap */
    int n_passages, depth_first, depth_last, n_depths;
    int have_base;             /* 1: a baseline (no context, or BOS only) was scored besides */
    int depth_base;            /* its depth (0 or 1) */
    stats_boot from_base;      /* deepest / baseline (another regime: no context at all) */
} report_depth_trend;

/* The verdicts on one test arm against the reference. */
typedef struct {
    int valid;                 /* 0: not a test arm or nothing measured */
    int over_positions;        /* 1: over positions.tsv, 0: over depths.tsv (block 1) */
    size_t n;
    stats_boot kl;             /* mean KL(arm‖ref) */
    double floor;              /* mean floor KL(ref‖f32) over the same rows, NAN without */
    stats_boot dnll;           /* mean Δ NLL (arm − ref), nats/token */
    stats_verdict v_ppl;       /* TOST against ln(1 + margin_ppl/100) */
    stats_boot dtop1;          /* top-1 agreement − 1 (the reference agrees with itself) */
    stats_verdict v_top1;      /* TOST against margin_top1/100 */
    size_t n_near, n_near_flips;
    stats_ci near_rate;        /* flips among near ties (Wilson) */
    stats_ci floor_near_rate;  /* the f32 arm's, same rows (NAN without) */
    report_bin *bins;          /* [n_bins], positions only */
    int n_bins;
    stats_boot ratio;          /* deepest bin / first bin (whole blocks within each bin) */
    stats_verdict v_ratio;     /* on ln ratio: higher = grows with depth */
    const report_depth_trend *from_passages;   /* the plug for passages.tsv: NULL for now */
    int have_fork;             /* cross.tsv rows for this arm */
    size_t n_fork_depths, n_forked;
    stats_boot fork;           /* Δ NLL of the arm's text under the reference, forked depths only */
    double fork_margin;
    const char *fork_margin_src;
    stats_verdict v_fork;
} report_arm_verdict;

struct report_verdicts {
    report_margins m;
    report_arm_verdict *v;     /* [n_arms] */
};

/* Reads the margins: opts' when set (finite, > 0), else meta.json's "margins", else the defaults. */
void report_margins_get(const report_results *R, const report_render_opts *opts, report_margins *m);
/* Computes every test arm's verdicts. Allocates V->v and the bins (report_verdicts_free, also
 * after a failure). Returns 0, or -1 with a message in err. */
int report_verdicts_run(const report_results *R, const report_analysis *A, const report_extra *X,
                        const report_margins *m, report_verdicts *V, char *err, size_t errlen);
void report_verdicts_free(report_verdicts *V, int n_arms);
/* README: "The answer first" (right after the title) and "Depth bins" (positions only). */
void report_verdicts_readme(FILE *o, const report_results *R, const report_analysis *A,
                            const report_verdicts *V);
void report_bins_readme(FILE *o, const report_results *R, const report_analysis *A,
                        const report_verdicts *V, int drawn);
/* DIR/plots/kl_bins.{gp,png,svg} and kl_bins_<arm>.dat: mean KL per depth bin with its 95 % band
 * (nothing, and *drawn = 0, without depth bins; the old .gp/.png/.svg are removed first). Returns 0,
 * or -1 with a message in err. */
int report_bins_plot(const char *dir, const report_results *R, const report_analysis *A,
                     const report_verdicts *V, int *drawn, char *err, size_t errlen);
/* Adds "verdicts" to the summary root. Returns 0 or -1 (out of memory). */
int report_verdicts_summary(json_t *root, const report_results *R, const report_analysis *A,
                            const report_verdicts *V);
/* Paired difference of the mean KL(arm‖ref) of arms a and b at the keys both measured (positions
 * when both have them, circular Politis–White blocks; else depths, block 1): *out (est = a − b) and
 * its two-sided bootstrap p against 0 (NAN when nothing pairs). Returns 0, or -1 out of memory. */
int report_paired_kl(const report_results *R, const report_analysis *A, int a, int b, stats_boot *out, double *p);
/* The fork-cost margin in nats per token (§4.15): ln(1 + ppl_pct/100), or the f32 arm's largest |Δ NLL|
 * over the depths where its own greedy text forked (cross.tsv) when that is larger; *src says which. */
double report_fork_margin(const report_results *R, const report_extra *X, double ppl_pct, const char **src);
/* The model as the README names it: the last path component of meta.json's model path. */
const char *report_model_name(const report_results *R);

#endif
