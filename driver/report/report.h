/* report.h — the results folder (docs/DESIGN.md §4): the TSV row writers the sweep uses (so the column
 * format lives in one place), and the renderer that turns DIR/meta.json + the TSVs into
 * DIR/README.md, DIR/summary.json and DIR/plots/ (gnuplot scripts, PNG and SVG).
 *
 * Raw files the sweep writes (tab separated, one header line, numbers as %.17g, NaN as "nan"):
 *   depths.tsv     one row per depth per non-reference arm       (REPORT_DEPTHS_HEADER)
 *   positions.tsv  one row per position per non-reference arm    (REPORT_POSITIONS_HEADER),
 *                  only when per-position streaming was on
 *   forks.tsv      one row per depth per non-reference arm       (REPORT_FORKS_HEADER),
 *                  token ids comma-separated
 *   cross.tsv      one row per depth per non-reference arm (REPORT_CROSS_HEADER), --cross-score only
 *   samples.tsv    one row per depth, temperature and non-reference arm (REPORT_SAMPLES_HEADER),
 *                  --sample-temps only
 *   cross_samples.tsv  the same rows as cross.tsv for the sampled texts, with their temperature
 *                  (REPORT_CROSS_SAMPLES_HEADER), --cross-score with --sample-temps only
 *   meta.json      setup and provenance (see report_render)
 * Arm names and KV format names: 1..63 printable ASCII characters without spaces, quotes,
 * backslash, '|', '`', ',' ; a repeated arm is NAME#k (e.g. "f16#2").
 */
#ifndef STRATA_REPORT_H
#define STRATA_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "driver/stats.h"

#define REPORT_DEPTHS_HEADER                                                                    \
    "depth\tarm\tkl_arm_ref\tkl_ref_arm\tjs\tsame_top1\ttop1_arm\ttop1_ref\tnll_arm\tnll_ref\t"   \
    "entropy_ref\tgap_ref\tgap_arm\tfork\tcensored\tfork_gap_arm\tfork_gap_ref"
#define REPORT_POSITIONS_HEADER                                                                 \
    "pos\tarm\tkl_arm_ref\tkl_ref_arm\tjs\tsame_top1\tnll_arm\tnll_ref\tentropy_ref\tgap_ref"
#define REPORT_FORKS_HEADER "depth\tarm\tfork\tcensored\ttokens_arm\ttokens_ref"
#define REPORT_CROSS_HEADER                                                                     \
    "depth\tarm\tfork\tcensored\tn\tref_nll_arm_text\tref_nll_ref_text\tf32_nll_arm_text\t"     \
    "f32_nll_ref_text\trep_arm\trep_ref"
#define REPORT_SAMPLES_HEADER                                                                   \
    "depth\tarm\ttemperature\ttop_p\tseed\tfork\tcensored\ttokens_arm\ttokens_ref"
#define REPORT_CROSS_SAMPLES_HEADER                                                             \
    "depth\tarm\ttemperature\tfork\tcensored\tn\tref_nll_arm_text\tref_nll_ref_text\t"         \
    "f32_nll_arm_text\tf32_nll_ref_text\trep_arm\trep_ref"
/* n-gram order of the repetition rate (stats_repeat_rate) in cross.tsv */
#define REPORT_REPEAT_ORDER 4

/* Settings the report uses (also written to summary.json). */
#define REPORT_FLOOR_FACTOR 10.0  /* "within the noise floor" = KL <= 10 x KL(ref‖f32) */
#define REPORT_NEAR_TIE_EPS 0.5   /* near tie: reference top-1/top-2 logit gap < 0.5 */
/* arm and format names: driver/arm.h's arm_valid_name and ARM_NAME_MAX (the one rule) */

/* ---- writers (used by the sweep) ---------------------------------------------------------- */

/* Create DIR/depths.tsv (positions.tsv, forks.tsv), truncating it, and write the header line.
 * Returns the open FILE (the caller fcloses it), or NULL with a message in err. */
FILE *report_tsv_open_depths(const char *dir, char *err, size_t errlen);
FILE *report_tsv_open_positions(const char *dir, char *err, size_t errlen);
FILE *report_tsv_open_forks(const char *dir, char *err, size_t errlen);
FILE *report_tsv_open_cross(const char *dir, char *err, size_t errlen);
FILE *report_tsv_open_samples(const char *dir, char *err, size_t errlen);
FILE *report_tsv_open_cross_samples(const char *dir, char *err, size_t errlen);

/* One depths.tsv row: depth = tokens in the prefix, r = the metrics of the teacher-forced row
 * (position depth−1, next = token `depth` or -1), fork in [0, fork_n] with censored = 1 when the
 * streams were identical (then fork == fork_n and the fork gaps are NAN).
 * same_top1 is written as r->top1_arm == r->top1_ref. Returns 0, or -1 on a bad arm name or a
 * write error. Allocates nothing. */
int report_tsv_depth_row(FILE *f, int depth, const char *arm, const stats_row *r, int fork,
                         int censored, double fork_gap_arm, double fork_gap_ref);
/* One positions.tsv row for position pos (r computed with next = token pos+1 or -1). */
int report_tsv_position_row(FILE *f, int pos, const char *arm, const stats_row *r);
/* One forks.tsv row: the two greedy streams tok_arm [n_arm] and tok_ref [n_ref]. */
int report_tsv_fork_row(FILE *f, int depth, const char *arm, int fork, int censored,
                        const int32_t *tok_arm, int n_arm, const int32_t *tok_ref, int n_ref);

/* One cross.tsv row (docs/DESIGN.md §4.12): the arm's greedy continuation of n tokens and the
 * reference's, each scored teacher-forced (mean NLL per token, nats) under the reference arm and
 * under the f32 arm (NAN when there is none), and their repetition rates. */
typedef struct {
    int fork, censored, n;
    double ref_nll_arm_text, ref_nll_ref_text, f32_nll_arm_text, f32_nll_ref_text;
    double rep_arm, rep_ref;
} report_cross_vals;
int report_tsv_cross_row(FILE *f, int depth, const char *arm, const report_cross_vals *v);
/* One cross_samples.tsv row: as cross.tsv's, for the two texts sampled at temperature T. */
int report_tsv_cross_sample_row(FILE *f, int depth, const char *arm, double temperature, const report_cross_vals *v);
/* One samples.tsv row: the sampled probe at temperature T, top_p, seed; both streams [n]. */
int report_tsv_sample_row(FILE *f, int depth, const char *arm, double temperature, double top_p,
                          uint64_t seed, int fork, int censored, const int32_t *tok_arm,
                          const int32_t *tok_ref, int n);

/* ---- rendering ------------------------------------------------------------------------------ */

/* Reads DIR/meta.json, DIR/depths.tsv, DIR/forks.tsv and (if present) DIR/positions.tsv,
 * computes the statistics (stats.h) and writes DIR/README.md, DIR/summary.json and
 * DIR/plots/{kl_depth,positions_kl,kl_entropy,fork_survival}.{gp,png,svg} plus their .dat files
 * (gnuplot must be on PATH; its messages go to DIR/plots/gnuplot.log). A missing positions.tsv
 * is fine: those parts say "not measured". The same inputs always give byte-identical
 * README.md and summary.json.
 * meta.json: {"tag","date","command","git","engine","machine","model":{"path","sha256","arch",
 * "n_vocab","n_ctx","n_layer"},"document":{"path","n_tokens","description"},"ref":"f16",
 * "arms":[{"name","kv_k","kv_v","kv_bytes_per_token"},...],"depths":[...],"fork_n":32,
 * "per_position":bool,"wall_seconds":x,"warnings":[...]} — "ref", "arms" and "fork_n" are
 * required, the rest shows as "unknown" when absent.
 * Returns 0, or -1 with a message in err (malformed input names the file and line).
 * Everything allocated is freed before return. */
int report_render(const char *dir, char *err, size_t errlen);
/* report_render with settings: the verdict margins (docs/DESIGN.md §4.15). A field that is NAN
 * (or opts NULL) takes meta.json's "margins" value, else the default. */
typedef struct {
    double margin_ppl;   /* percent PPL change */
    double margin_top1;  /* percentage points of top-1 agreement */
} report_render_opts;
int report_render_opts_run(const char *dir, const report_render_opts *opts, char *err, size_t errlen);

/* Side-by-side comparison of two results dirs as Markdown on out: setup differences, and for
 * every arm name present in both, the summary statistics and the depth-by-depth KL / fork.
 * Writes nothing into the dirs. Returns 0, or -1 with a message in err. */
int report_compare(const char *dir1, const char *dir2, FILE *out, char *err, size_t errlen);

/* Formatting rules used in the README tables (exposed for tests):
 * report_fmt_sig2: 2 significant digits; "0" for 0; fixed notation for 1e-4 <= |v| < 1000
 * (0.00026, 0.19, 1.1, 42), else %.1e (5.5e-05, 1.2e+03); REPORT_NA ("—": does not apply) for
 * NaN, "∞" / "−∞" for infinities: a table never shows "nan" or "inf".
 * report_fmt_depth: the exact count below 10,000, else whole thousands rounded down ("15K" for
 * 15360, "32K" for 32512: never past the depth measured). */
void report_fmt_sig2(double v, char *buf, size_t len);
void report_fmt_depth(int depth, char *buf, size_t len);

#endif
